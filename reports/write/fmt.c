#define _GNU_SOURCE
#include "reports/write/fmt.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* If the C locale could not be created, the host's locale was used: turn
 * whatever single-byte decimal separator it chose back into '.'. */
static void fix_point(char *buf)
{
    for (char *p = buf; *p; p++)
        if (*p == ',')
            *p = '.';
}

int ca_fmt_double(char *buf, size_t n, double v)
{
    if (!isfinite(v) || n < 32)
        return -1;
    pthread_once(&c_locale_once, make_c_locale);
    locale_t old = c_locale ? uselocale(c_locale) : (locale_t)0;
    int len = -1;
    for (int prec = 15; prec <= 17; prec++) {
        len = snprintf(buf, n, "%.*g", prec, v);
        if (len < 0 || (size_t)len >= n) {
            len = -1;
            break;
        }
        if (!c_locale)
            fix_point(buf);
        if (c_locale ? strtod(buf, NULL) == v : prec == 17)
            break;
    }
    if (old)
        uselocale(old);
    return len;
}

int ca_fmt_fixed(char *buf, size_t n, double v, int decimals)
{
    static const double pow10[] = {1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    if (decimals < 0 || decimals > 9 || !isfinite(v))
        return -1;
    double scaled = fabs(v) * pow10[decimals] + 0.5;
    if (scaled >= 9.2e18)
        return -1;
    uint64_t q = (uint64_t)scaled;
    uint64_t scale = (uint64_t)pow10[decimals];
    uint64_t ip = q / scale, fp = q % scale;
    int neg = v < 0 && q != 0;
    int len;
    if (decimals == 0)
        len = snprintf(buf, n, "%s%llu", neg ? "-" : "", (unsigned long long)ip);
    else
        len = snprintf(buf, n, "%s%llu.%0*llu", neg ? "-" : "", (unsigned long long)ip,
                       decimals, (unsigned long long)fp);
    return (len < 0 || (size_t)len >= n) ? -1 : len;
}

int ca_fmt_bytes(char *buf, size_t n, double bytes)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (!isfinite(bytes))
        return snprintf(buf, n, "? B");
    double v = bytes;
    int u = 0;
    while (fabs(v) >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    char num[40];
    int dec = u == 0 ? 0 : fabs(v) < 9.995 ? 2 : fabs(v) < 99.95 ? 1 : 0;
    if (ca_fmt_fixed(num, sizeof num, v, dec) < 0)
        snprintf(num, sizeof num, "%.0f", v);
    int len = snprintf(buf, n, "%s %s", num, units[u]);
    return len < 0 ? 0 : ((size_t)len >= n ? (int)n - 1 : len);
}
