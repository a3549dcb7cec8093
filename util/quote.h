/* Bytes from outside (a CSV field, an environment value) shown in a one-line
 * message: a line break or other control byte inside them must not split or
 * garble the message, and a huge value must not bury it. */
#ifndef CA_QUOTE_H
#define CA_QUOTE_H

#include <stddef.h>

/* Writes s[0..n) into buf (cap bytes, cap > 0: always terminated): control
 * bytes (NUL included) and DEL as \xNN, a backslash as \\, everything else
 * as is (UTF-8 passes through); cut after `max` source bytes, or where buf
 * runs out, with "..." to say so. Returns buf. */
char *ca_quote(const char *s, size_t n, size_t max, char *buf, size_t cap);

/* Room for ca_quote of up to `max` bytes, never cut for lack of space. */
#define CA_QUOTE_BUF(max) (4 * (max) + 4)

#endif
