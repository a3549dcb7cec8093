/* Quoting outside bytes for one-line messages; see quote.h. */
#include "util/quote.h"

#include <stdio.h>

char *ca_quote(const char *s, size_t n, size_t max, char *buf, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[4];
        size_t k;
        if (c < 0x20 || c == 0x7f) {
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[c >> 4], esc[3] = hex[c & 15], k = 4;
        } else if (c == '\\') {
            esc[0] = esc[1] = '\\', k = 2;
        } else {
            esc[0] = (char)c, k = 1;
        }
        /* keep room for "..." and the terminator */
        if (i == max || o + k + 4 > cap) break;
        for (size_t j = 0; j < k; j++) buf[o++] = esc[j];
    }
    if (i < n) /* cut short */
        for (const char *d = "..."; *d && o + 1 < cap; d++) buf[o++] = *d;
    buf[o] = '\0';
    return buf;
}
