/* Small streaming JSON writer: commas, nesting and escaping are its job, so
 * report code only says what to write.
 *
 * Strings: '"', '\\' and every control character are escaped (\n, \t, ...,
 * else \u00XX), as are U+2028/U+2029 so the text can also sit inside a
 * <script>; invalid UTF-8 bytes become U+FFFD. Doubles are printed with the
 * fewest digits that read back exactly, always with a '.' whatever the
 * locale; NaN and infinities, which JSON cannot hold, become null.
 *
 * Errors (unbalanced nesting, a value where an object key is due, a second
 * top-level value, I/O failure, out of memory) are sticky, as in pickle.h,
 * and as there a failed FILE* writer may leave a truncated file: write
 * through ca_out (fileout.h) and abort it when ca_json_finish() fails. */
#ifndef CA_JSON_H
#define CA_JSON_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct ca_json ca_json;

/* pretty: newlines and two-space indentation; otherwise compact. */
ca_json *ca_json_new_file(FILE *f, int pretty);
ca_json *ca_json_new_buf(int pretty);
void ca_json_free(ca_json *j);

int ca_json_obj_begin(ca_json *j);
int ca_json_obj_end(ca_json *j);
int ca_json_arr_begin(ca_json *j);
int ca_json_arr_end(ca_json *j);

int ca_json_key(ca_json *j, const char *k);
int ca_json_keyn(ca_json *j, const char *k, size_t n);

int ca_json_str(ca_json *j, const char *s);            /* NULL writes null */
int ca_json_strn(ca_json *j, const char *s, size_t n); /* NULs become \u0000 */
int ca_json_int(ca_json *j, int64_t v);
int ca_json_uint(ca_json *j, uint64_t v);
int ca_json_double(ca_json *j, double v);
int ca_json_bool(ca_json *j, int v);
int ca_json_null(ca_json *j);

int ca_json_kv_str(ca_json *j, const char *k, const char *v);
int ca_json_kv_int(ca_json *j, const char *k, int64_t v);
int ca_json_kv_uint(ca_json *j, const char *k, uint64_t v);
int ca_json_kv_double(ca_json *j, const char *k, double v);
int ca_json_kv_bool(ca_json *j, const char *k, int v);

/* Checks that one complete value was written, ends it with a newline and
 * flushes (the FILE* stays open). 0 on success. */
int ca_json_finish(ca_json *j);

const char *ca_json_error(const ca_json *j);             /* NULL if fine */
const char *ca_json_data(const ca_json *j, size_t *len); /* buffer mode, NUL-terminated */

#endif
