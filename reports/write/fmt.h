/* Number formatting for the writers. Independent of the host program's
 * locale: cudalloc runs inside programs that may call setlocale(), and a
 * decimal comma would break JSON and SVG alike. */
#ifndef CA_FMT_H
#define CA_FMT_H
#include <stddef.h>
#include <stdint.h>

/* Shortest "%.Ng" (N = 15..17) that reads back as exactly v, with a '.'
 * decimal point. Returns the length, or -1 when v is NaN or infinite (the
 * caller decides what those become) or buf is too small (32 bytes always do). */
int ca_fmt_double(char *buf, size_t n, double v);

/* v with exactly `decimals` digits after the point (0..9), rounded half away
 * from zero; trailing zeros kept. Returns the length, -1 if v is not finite
 * or too large (|v| * 10^decimals >= 2^63) or buf too small. */
int ca_fmt_fixed(char *buf, size_t n, double v, int decimals);

/* Human-readable binary size: "512 B", "1.50 KiB", "12.3 MiB", "640 GiB"
 * (three significant digits, units up to EiB). Returns the length. */
int ca_fmt_bytes(char *buf, size_t n, double bytes);

#endif
