/* libFuzzer harness: util/size.c. The input is the string to parse (up to its
 * first NUL). Beyond "no crash, no UB": a size that parses prints with
 * ca_format_size into every buffer length without overrunning it, and the
 * printed form parses back to within the rounding of two decimals. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "util/size.h"

static void check_printed(const char *s, size_t v)
{
    char buf[CA_SIZE_BUF];
    ca_format_size(v, buf, sizeof buf);
    FUZZ_CHECK(strlen(buf) < sizeof buf - 1, "'%s' prints as '%s', filling the buffer", s, buf);
    for (size_t len = 0; len <= strlen(buf) + 1; len++) { /* snprintf-like truncation */
        char small[CA_SIZE_BUF + 1];
        memset(small, 'x', sizeof small);
        ca_format_size(v, small, len);
        FUZZ_CHECK(small[len] == 'x', "ca_format_size wrote past %zu bytes", len);
        FUZZ_CHECK(len == 0 || memchr(small, 0, len), "ca_format_size left %zu bytes unterminated", len);
    }
    size_t back = 0;
    if (ca_parse_size(buf, &back) != 0) {
        /* only a value that rounds up past the largest size may not parse */
        FUZZ_CHECK(!strcmp(buf, "16.00 EiB"), "'%s' prints as '%s', which does not parse", s, buf);
        return;
    }
    /* Below 1 KiB exact; above, two decimals of a unit that is at most the
     * value: off by at most half a hundredth of that unit. */
    double diff = (double)v > (double)back ? (double)v - (double)back : (double)back - (double)v;
    FUZZ_CHECK(v < 1024 ? back == v : diff <= (double)v * 0.005 + 1, "'%s' = %zu prints as '%s' = %zu", s, v, buf,
               back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    char *s = fuzz_cstring(data, n);
    size_t v = 0;
    if (ca_parse_size(s, &v) == 0) check_printed(s, v);
    free(s);
    return 0;
}
