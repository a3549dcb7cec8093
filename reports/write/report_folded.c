/* PREFIX.folded: the memory live at the peak by call stack, in the folded
 * format flame graph tools read (flamegraph.pl, inferno, speedscope): one
 * line per stack, its frames outermost first joined by ';', a space and
 * the bytes live at the peak from that stack. Identical stacks are one line,
 * the lines sorted, as stackcollapse writes them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "reports/write/report_internal.h"

typedef struct folded_line {
    char *stack;
    uint64_t bytes;
} folded_line;

/* ';' separates frames and a line ends a stack: neither may be in a name.
 * Returns the length written (snprintf's k, cut to the buffer). */
static size_t clean(char *buf, size_t n, int k) {
    size_t len = k < 0 ? 0 : (size_t)k >= n ? n - 1 : (size_t)k;
    for (size_t i = 0; i < len; i++)
        if (buf[i] == ';' || buf[i] == '\n' || buf[i] == '\r') buf[i] = '_';
    return len;
}

/* A frame's name for the flame graph: "function (file:line)", or "function
 * (module)" without a line. */
static size_t frame_name(const ca_frame *fr, char *buf, size_t n) {
    const char *mod = strrchr(fr->module, '/');
    return clean(buf, n, fr->line ? snprintf(buf, n, "%s (%s:%u)", fr->function, fr->file, fr->line)
                                  : snprintf(buf, n, "%s (%s)", fr->function, mod ? mod + 1 : fr->module));
}

/* The stack of a site, outermost first; malloc'ed, NULL out of memory. */
static char *site_stack(const ca_report_ctx *c, uint32_t site) {
    const ca_frame *fr[CA_STACK_MAX_FRAMES];
    size_t n = ca_report_frames(c, site, fr, CA_STACK_MAX_FRAMES);
    size_t cap = 512 * (n ? n : 1), len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    if (!n) { /* a site by size (a CSV trace), or no stack */
        ca_report_site_label(c, site, s, cap);
        clean(s, cap, (int)strlen(s));
        return s;
    }
    for (size_t i = n; i-- > 0;) {
        if (len) s[len++] = ';';
        len += frame_name(fr[i], s + len, cap - len);
    }
    s[len] = 0;
    return s;
}

static int by_stack(const void *a, const void *b) {
    return strcmp(((const folded_line *)a)->stack, ((const folded_line *)b)->stack);
}

int ca_report_folded(const ca_report_ctx *c, FILE *f) {
    size_t n = c->have_peak ? c->peak.n_sites : 0, k = 0;
    folded_line *lines = calloc(n ? n : 1, sizeof *lines);
    int rc = lines ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!c->peak.sites[i].bytes) continue;
        if (!(lines[k].stack = site_stack(c, c->peak.sites[i].site))) rc = -1;
        else lines[k++].bytes = c->peak.sites[i].bytes;
    }
    if (rc == 0) qsort(lines, k, sizeof *lines, by_stack);
    for (size_t i = 0; rc == 0 && i < k; i++) {
        uint64_t bytes = lines[i].bytes;
        while (i + 1 < k && !strcmp(lines[i].stack, lines[i + 1].stack)) bytes += lines[++i].bytes;
        fprintf(f, "%s %" PRIu64 "\n", lines[i].stack, bytes);
    }
    for (size_t i = 0; lines && i < k; i++) free(lines[i].stack);
    free(lines);
    return rc || ferror(f) ? -1 : 0;
}
