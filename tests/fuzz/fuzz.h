/* What every libFuzzer harness in tests/fuzz shares: the input as a C string,
 * and a check that turns a broken invariant into a crash libFuzzer records. */
#ifndef CA_FUZZ_H
#define CA_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The input up to its first NUL, NUL-terminated, in a buffer of exactly that
 * size (so AddressSanitizer sees a read past the end). Free it. */
static inline char *fuzz_cstring(const uint8_t *data, size_t n)
{
    const uint8_t *nul = memchr(data, 0, n);
    size_t len = nul ? (size_t)(nul - data) : n;
    char *s = malloc(len + 1);
    if (!s) abort();
    memcpy(s, data, len);
    s[len] = '\0';
    return s;
}

/* A one-line message that is one line: no line break, terminated. */
static inline int fuzz_one_line(const char *msg, size_t cap)
{
    const char *end = memchr(msg, 0, cap);
    return end && end > msg && !memchr(msg, '\n', (size_t)(end - msg)) && !memchr(msg, '\r', (size_t)(end - msg));
}

#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: invariant broken: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif
