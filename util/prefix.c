#include "util/prefix.h"

#include <stdio.h>
#include <string.h>

#include "util/quote.h"

#define SHOWN 80
#define QUOTED(s) ca_quote((s), strlen(s), SHOWN, (char[CA_QUOTE_BUF(SHOWN)]){0}, CA_QUOTE_BUF(SHOWN))

int ca_prefix_check(const char *tmpl, char *err, size_t errlen) {
    if (!tmpl || !*tmpl) {
        snprintf(err, errlen, "an empty report prefix: accepted: a path prefix such as runs/r%%r (%%p pid, %%r rank)");
        return -1;
    }
    for (const char *s = tmpl; *s; s++) {
        if (*s != '%') continue;
        if (s[1] == 'p' || s[1] == 'r' || s[1] == '%') {
            s++;
            continue;
        }
        if (!s[1])
            snprintf(err, errlen, "report prefix '%s' ends with a lone '%%': accepted: %%p pid, %%r rank, %%%% for a '%%'",
                     QUOTED(tmpl));
        else
            snprintf(err, errlen, "report prefix '%s' has an unknown '%%%s': accepted: %%p pid, %%r rank, %%%% for a '%%'",
                     QUOTED(tmpl), ca_quote(s + 1, 1, 1, (char[CA_QUOTE_BUF(1)]){0}, CA_QUOTE_BUF(1)));
        return -1;
    }
    if (tmpl[strlen(tmpl) - 1] == '/') {
        snprintf(err, errlen,
                 "report prefix '%s' ends with '/': accepted: a prefix that names the files, such as %srun "
                 "(writes %srun.txt, .json, ...)",
                 QUOTED(tmpl), QUOTED(tmpl), QUOTED(tmpl));
        return -1;
    }
    return 0;
}
