/* UTF-8 checking shared by the writers: every text that leaves cudalloc
 * (frame names, file names, labels) may hold arbitrary bytes, and each format
 * we write has readers that reject or mangle invalid UTF-8. */
#ifndef CA_UTF8_H
#define CA_UTF8_H
#include <stddef.h>
#include <stdint.h>

#define CA_UTF8_REPLACEMENT 0xFFFDu

/* Decodes the sequence at s (n > 0 bytes available) into *cp and returns its
 * length (1-4). A malformed, overlong, truncated or surrogate sequence
 * returns 1 with *cp = CA_UTF8_REPLACEMENT: the caller replaces one byte and
 * resynchronises on the next. */
size_t ca_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Writes cp as UTF-8 into out (room for 4 bytes); returns the length. */
size_t ca_utf8_encode(uint32_t cp, unsigned char *out);

/* Length of s[0..n) once every invalid sequence is replaced by U+FFFD. */
size_t ca_utf8_clean_len(const unsigned char *s, size_t n);

#endif
