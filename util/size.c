/* Parsing and printing byte sizes; see size.h for the accepted forms. */
#include "util/size.h"

#include <stdint.h>
#include <stdio.h>
#include <strings.h>

typedef unsigned __int128 u128;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The multiplier of a unit (the whole rest of the string, spaces trimmed), or 0. */
static uint64_t unit_mult(const char *u, size_t len)
{
    static const struct { const char *name; unsigned shift; } units[] = {
        {"", 0},    {"b", 0},
        {"k", 10},  {"kb", 10}, {"kib", 10},
        {"m", 20},  {"mb", 20}, {"mib", 20},
        {"g", 30},  {"gb", 30}, {"gib", 30},
        {"t", 40},  {"tb", 40}, {"tib", 40},
        {"p", 50},  {"pb", 50}, {"pib", 50}, /* ca_format_size prints these too */
        {"e", 60},  {"eb", 60}, {"eib", 60},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        const char *name = units[i].name;
        size_t k = 0;
        while (name[k]) k++;
        if (k == len && strncasecmp(u, name, len) == 0) return 1ull << units[i].shift;
    }
    return 0;
}

int ca_parse_size(const char *s, size_t *out)
{
    if (!s || !out) return -1;
    while (is_space(*s)) s++;
    if (!is_digit(*s)) return -1; /* empty, sign, or a leading '.' */

    u128 whole = 0;
    for (; is_digit(*s); s++) {
        whole = whole * 10 + (unsigned)(*s - '0');
        if (whole > SIZE_MAX) return -1;
    }
    /* The fraction as frac / den, keeping at most 19 digits (exact enough:
     * digits beyond that are below one byte even for TiB). */
    u128 frac = 0, den = 1;
    int has_frac = 0;
    if (*s == '.') {
        s++;
        if (!is_digit(*s)) return -1;
        has_frac = 1;
        for (; is_digit(*s); s++)
            if (den < 10000000000000000000ull) frac = frac * 10 + (unsigned)(*s - '0'), den *= 10;
    }
    while (is_space(*s)) s++;
    const char *u = s;
    while (*s && !is_space(*s)) s++;
    size_t ulen = (size_t)(s - u);
    while (is_space(*s)) s++;
    if (*s) return -1; /* something after the unit */

    uint64_t mult = unit_mult(u, ulen);
    if (!mult) return -1;
    if (has_frac && mult == 1) return -1; /* bytes are whole */
    u128 v = whole * mult + frac * mult / den;
    if (v > SIZE_MAX) return -1;
    *out = (size_t)v;
    return 0;
}

char *ca_format_size(size_t bytes, char *buf, size_t n)
{
    static const char *const names[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!buf || n == 0) return buf;
    if (bytes < 1024) {
        snprintf(buf, n, "%zu B", bytes);
        return buf;
    }
    int k = 0;
    while (k < 5 && bytes >> (10 * (k + 1)) >= 1024) k++;
    /* Hundredths of the unit, rounded to nearest. */
    u128 unit = (u128)1 << (10 * (k + 1));
    u128 h = ((u128)bytes * 100 + unit / 2) / unit;
    if (h >= 102400 && k < 5) { /* 1023.995 MiB and up print as 1.00 GiB */
        k++;
        unit <<= 10;
        h = ((u128)bytes * 100 + unit / 2) / unit;
    }
    snprintf(buf, n, "%llu.%02llu %s", (unsigned long long)(h / 100),
             (unsigned long long)(h % 100), names[k]);
    return buf;
}

int ca_parse_count(const char *s, size_t *out) {
    unsigned long long n = 0;
    if (!s || !*s) return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        n = n * 10 + (unsigned long long)(*s - '0');
        if (n > CA_COUNT_MAX) return -1; /* checked each digit: never wraps */
    }
    *out = (size_t)n;
    return 0;
}

void ca_format_duration(double seconds, char *buf, size_t n) {
    long t = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (t < 60) snprintf(buf, n, "%lds", t);
    else if (t < 3600) snprintf(buf, n, "%ldm %lds", t / 60, t % 60);
    else if (t < 86400) snprintf(buf, n, "%ldh %ldm", t / 3600, t % 3600 / 60);
    else snprintf(buf, n, "%ldd %ldh", t / 86400, t % 86400 / 3600);
}
