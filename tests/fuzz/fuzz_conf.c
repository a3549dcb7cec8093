/* libFuzzer harness: CUDALLOC_CONF parsing (preload/config.c). The input is
 * CUDALLOC_CONF; when it holds a NUL, the bytes after it are CUDALLOC_REPORT
 * (which the parser reads too). Beyond "no crash, no UB": a rejected setting
 * is one line naming its variable ("CUDALLOC_CONF:" or "CUDALLOC_REPORT:"),
 * truncated safely to any buffer; an
 * accepted one leaves terminated strings within their fields, and parsing is
 * deterministic. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *conf = fuzz_cstring(data, n);
    size_t used = strlen(conf) + 1;
    char *report = used < n ? fuzz_cstring(data + used, n - used) : NULL;
    if (report) setenv("CUDALLOC_REPORT", report, 1);
    else unsetenv("CUDALLOC_REPORT");

    ca_config c, again;
    memset(&c, 0xa5, sizeof c);
    char err[512];
    int rc = ca_config_parse(conf, &c, err, sizeof err);
    if (rc == 0) {
        FUZZ_CHECK(memchr(c.report, 0, sizeof c.report) && memchr(c.nvtx_range, 0, sizeof c.nvtx_range),
                   "unterminated string field");
        FUZZ_CHECK(ca_config_parse(conf, &again, err, sizeof err) == 0, "second parse failed");
        FUZZ_CHECK(again.expandable == c.expandable && again.sync_free == c.sync_free &&
                       again.max_reserved == c.max_reserved && !strcmp(again.report, c.report) &&
                       !strcmp(again.nvtx_range, c.nvtx_range) && again.summary == c.summary &&
                       again.tracking == c.tracking && again.trace_iterations == c.trace_iterations &&
                       again.oom_message == c.oom_message && again.context_fences == c.context_fences,
                   "two parses of one setting differ");
    } else {
        FUZZ_CHECK(rc == -1, "returned %d", rc);
        FUZZ_CHECK(fuzz_one_line(err, sizeof err) &&
                       (!strncmp(err, "CUDALLOC_CONF: ", 15) || !strncmp(err, "CUDALLOC_REPORT: ", 17)),
                   "error '%s'", err);
        char small[24];
        memset(small, 'x', sizeof small);
        FUZZ_CHECK(ca_config_parse(conf, &again, small, 16) == -1, "second parse succeeded");
        FUZZ_CHECK(memchr(small, 0, 16) && small[16] == 'x', "error not cut at 16 bytes");
    }
    free(report);
    free(conf);
    return 0;
}
