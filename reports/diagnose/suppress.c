/* Suppressions: frame patterns whose call sites' memory is not reported. */
#define _GNU_SOURCE
#include "reports/diagnose/suppress.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES 4096

void ca_suppressions_free(ca_suppressions *s) {
    for (size_t i = 0; i < s->n; i++) free(s->pattern[i]);
    free(s->pattern);
    s->pattern = NULL, s->n = 0;
}

int ca_suppressions_load(const char *path, ca_suppressions *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the suppressions file: %s", path, strerror(errno));
        return -1;
    }
    char line[LINE_MAX_BYTES];
    size_t cap = 0;
    for (unsigned no = 1; fgets(line, sizeof line, f); no++) {
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            snprintf(err, errlen, "%s:%u: line longer than %d bytes: a suppressions file holds one frame pattern a line",
                     path, no, LINE_MAX_BYTES - 2);
            goto fail;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
            line[--len] = 0;
        char *p = line + strspn(line, " \t");
        if (!*p || *p == '#') continue;
        if (out->n == cap) {
            cap = cap ? 2 * cap : 8;
            char **g = realloc(out->pattern, cap * sizeof *g);
            if (!g) goto oom;
            out->pattern = g;
        }
        if (!(out->pattern[out->n] = strdup(p))) goto oom;
        out->n++;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: cannot read the suppressions file: %s", path, strerror(errno));
        goto fail;
    }
    fclose(f);
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory reading the suppressions", path);
fail:
    fclose(f);
    ca_suppressions_free(out);
    return -1;
}

static int glob(const char *pattern, const char *text) { return fnmatch(pattern, text, 0) == 0; }

/* "file:line" and the file alone, "fun" alone, "obj" alone. */
static int frame_matches(const char *pattern, const ca_frame *fr) {
    char src[1024];
    snprintf(src, sizeof src, "%s:%u", fr->file, fr->line);
    int fun = !strncmp(pattern, "fun:", 4), file = !strncmp(pattern, "src:", 4), obj = !strncmp(pattern, "obj:", 4);
    const char *g = fun || file || obj ? pattern + 4 : pattern;
    int any = !fun && !file && !obj;
    if ((fun || any) && glob(g, fr->function)) return 1;
    if ((file || any) && (glob(g, src) || glob(g, fr->file))) return 1;
    return (obj || any) && glob(g, fr->module);
}

int ca_suppressions_match(const ca_suppressions *s, const ca_frame *const *frames, size_t n) {
    for (size_t i = 0; s && i < n; i++)
        for (size_t k = 0; k < s->n; k++)
            if (frame_matches(s->pattern[k], frames[i])) return 1;
    return 0;
}
