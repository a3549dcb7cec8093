/* Byte sizes as people write them ("8GiB", "512 MB", "1.5G", "4096") and as
 * reports print them ("1.50 GiB"). */
#ifndef CA_SIZE_H
#define CA_SIZE_H

#include <stddef.h>

/* Parse a size: optional spaces, a decimal number (a fraction only with a
 * unit: "1.5GiB"), optional spaces, an optional unit, optional spaces.
 * Units, case-insensitive: B; K, KB, KiB; M, MB, MiB; G, GB, GiB; T, TB, TiB;
 * P, PB, PiB; E, EB, EiB (so whatever ca_format_size prints parses back).
 * All are powers of 1024: "8GB" means 8 GiB, as PyTorch users and
 * PYTORCH_CUDA_ALLOC_CONF mean it; nobody sizes device memory in powers of 1000.
 * "Spaces" are blanks, tabs and line ends (a value read with fgets parses).
 * A fraction is rounded down to a whole byte. Rejected: empty or blank strings,
 * signs, hex, exponents, other units, trailing garbage, values over SIZE_MAX.
 * Returns 0 and sets *out, or -1 and leaves *out alone. */
int ca_parse_size(const char *s, size_t *out);

/* A count ("10000", "0"): decimal digits only, nothing else (no sign, blank,
 * unit or fraction), at most CA_COUNT_MAX. Returns 0 and sets *out, or -1 and
 * leaves *out alone. */
#define CA_COUNT_MAX 1000000000000000ull /* 10^15 */
int ca_parse_count(const char *s, size_t *out);

/* "512 B", "1.50 KiB", "16.00 GiB": bytes below 1 KiB, else two decimals in the
 * largest unit that keeps the number at or above 1 (rounded to nearest; a value
 * that rounds to 1024.00 moves to the next unit). Writes at most n bytes,
 * always terminated when n > 0, like snprintf; returns buf. */
char *ca_format_size(size_t bytes, char *buf, size_t n);

/* A buffer always big enough for ca_format_size. */
#define CA_SIZE_BUF 32

/* A duration for people: "42s", "3m 12s", "5h 7m", "2d 4h" (rounded to the second). */
void ca_format_duration(double seconds, char *buf, size_t n);

#endif
