#include "reports/write/utf8.h"

size_t ca_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2; v = c & 0x1F; min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0F; min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07; min = 0x10000;
    } else {
        goto bad;   /* continuation byte, C0/C1 (overlong) or F5..FF */
    }
    if (n < len)
        goto bad;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            goto bad;
        v = (v << 6) | (s[i] & 0x3F);
    }
    /* Overlong forms, UTF-16 surrogates and values past U+10FFFF are not
     * UTF-8 (Python's strict decoder and JS's TextDecoder agree). */
    if (v < min || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF)
        goto bad;
    *cp = v;
    return len;
bad:
    *cp = CA_UTF8_REPLACEMENT;
    return 1;
}

size_t ca_utf8_encode(uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t ca_utf8_clean_len(const unsigned char *s, size_t n)
{
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ca_utf8_decode(s + i, n - i, &cp);
        out += (cp == CA_UTF8_REPLACEMENT && k == 1 && s[i] >= 0x80) ? 3 : k;
        i += k;
    }
    return out;
}
