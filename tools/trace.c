/* RMM-style CSV allocation logs into an array of ops with dense ids; see trace.h. */
#include "tools/trace.h"

#include "util/gunzip.h"
#include "util/size.h"
#include "allocator/allocator.h"
#include "util/quote.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Out of memory inside uthash: report it, never exit (uthash's default). */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(e) (hash_oom = 1)
#include <uthash.h>

static const char HEADER[] = "Thread,Time,Action,Pointer,Size,Stream";
enum { F_THREAD, F_TIME, F_ACTION, F_POINTER, F_SIZE, F_STREAM, N_FIELDS };

/* A live allocation, by its Pointer column. Entries come from chunks and are
 * recycled through `next_free`, so the table costs no malloc per allocation. */
typedef struct live {
    uint64_t ptr;
    uint64_t size;
    uint32_t id;
    uint32_t line;
    struct live *next_free;
    UT_hash_handle hh;
} live;

#define CHUNK 4096
typedef struct chunk {
    struct chunk *prev;
    live e[CHUNK];
} chunk;

typedef struct parser {
    const char *name;
    char *err;
    size_t errlen;
    uint32_t line;
    ca_trace t;
    size_t cap_ops;
    live *table, *free_entries;
    chunk *chunks;
    size_t chunk_used;
    uint32_t *free_ids; /* ids of freed allocations, reused last-freed first */
    uint32_t n_free_ids, cap_ids;
    unsigned __int128 live_bytes; /* live sizes can add up past 2^64 */
    int out_of_memory;            /* the error is ours, not the input's */
    size_t why_at;                /* where the error says what is wrong, after "NAME:LINE: " */
} parser;

typedef struct field {
    const char *s;
    size_t n;
} field;

static int fail(parser *p, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        int k = snprintf(p->err, p->errlen, "%s:%u: ", p->name, p->line);
        p->why_at = k >= 0 && (size_t)k < p->errlen ? (size_t)k : 0;
        if (k >= 0 && (size_t)k < p->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->err + k, p->errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static int nomem(parser *p)
{
    p->out_of_memory = 1;
    return fail(p, "out of memory");
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

static field trim(const char *s, size_t n)
{
    while (n && blank(*s)) s++, n--;
    while (n && blank(s[n - 1])) n--;
    return (field){s, n};
}

static int is_word(field f, const char *w)
{
    size_t n = strlen(w);
    return f.n == n && memcmp(f.s, w, n) == 0;
}

enum { NUM_OK = 0, NUM_BAD = -1, NUM_TOO_LARGE = -2 };

static int is_hex(field f) { return f.n > 2 && f.s[0] == '0' && (f.s[1] == 'x' || f.s[1] == 'X'); }

/* Decimal, or hex after 0x when hex_ok; nothing else. Any value that fits in
 * 64 bits is read exactly; a larger one is NUM_TOO_LARGE, never wrapped. */
static int parse_u64(field f, int hex_ok, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    int too_large = 0;
    if (hex_ok && is_hex(f)) {
        for (i = 2; i < f.n; i++) {
            char c = f.s[i];
            unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                : 16;
            if (d == 16) return NUM_BAD;
            if (v >> 60) too_large = 1; /* read on: a bad digit later is still bad */
            v = v << 4 | d;
        }
    } else {
        if (f.n == 0) return NUM_BAD;
        for (; i < f.n; i++) {
            char c = f.s[i];
            if (c < '0' || c > '9') return NUM_BAD;
            unsigned d = (unsigned)(c - '0');
            if (v > (UINT64_MAX - d) / 10) too_large = 1;
            v = v * 10 + d;
        }
    }
    if (too_large) return NUM_TOO_LARGE;
    *out = v;
    return NUM_OK;
}

static live *new_entry(parser *p)
{
    live *e = p->free_entries;
    if (e) {
        p->free_entries = e->next_free;
        return e;
    }
    if (!p->chunks || p->chunk_used == CHUNK) {
        chunk *c = malloc(sizeof *c);
        if (!c) return NULL;
        c->prev = p->chunks;
        p->chunks = c;
        p->chunk_used = 0;
    }
    return &p->chunks->e[p->chunk_used++];
}

static ca_trace_op *push_op(parser *p)
{
    if (p->t.n_ops == p->cap_ops) {
        size_t cap = p->cap_ops ? 2 * p->cap_ops : 1024;
        ca_trace_op *o = realloc(p->t.ops, cap * sizeof *o);
        if (!o) return NULL;
        p->t.ops = o;
        p->cap_ops = cap;
    }
    return &p->t.ops[p->t.n_ops++];
}

#define SHOWN 40 /* at most this much of a bad field is quoted back */
#define QUOTED(f) ca_quote((f).s, (f).n, SHOWN, (char[CA_QUOTE_BUF(SHOWN)]){0}, CA_QUOTE_BUF(SHOWN))

static int row(parser *p, const char *s, size_t n)
{
    field f[N_FIELDS + 1];
    int nf = 0;
    for (const char *end = s + n;;) {
        const char *c = memchr(s, ',', (size_t)(end - s));
        if (nf <= N_FIELDS) f[nf] = trim(s, (size_t)((c ? c : end) - s));
        nf++;
        if (!c) break;
        s = c + 1;
    }
    if (nf != N_FIELDS) return fail(p, "expected %d fields, found %d", N_FIELDS, nf);

    ca_trace_kind kind;
    if (is_word(f[F_ACTION], "allocate")) kind = CA_TRACE_ALLOC;
    else if (is_word(f[F_ACTION], "free")) kind = CA_TRACE_FREE;
    else if (is_word(f[F_ACTION], "allocate failure")) kind = CA_TRACE_ALLOC_FAIL;
    else if (is_word(f[F_ACTION], "iteration")) kind = CA_TRACE_ITERATION;
    else
        return fail(p, "unknown action '%s' (allocate, free, allocate failure, iteration)",
                    QUOTED(f[F_ACTION]));

    static const char *const col[N_FIELDS] = {"Thread", "Time", "Action", "Pointer", "Size",
                                              "Stream"};
    uint64_t v[N_FIELDS] = {0};
    for (int i = 0; i < N_FIELDS; i++) {
        if (i == F_TIME || i == F_ACTION) continue;
        /* An iteration row names no pointer: Pointer may be empty. */
        if (i == F_POINTER && kind == CA_TRACE_ITERATION && f[i].n == 0) continue;
        int rc = parse_u64(f[i], i != F_SIZE, &v[i]);
        if (rc == NUM_TOO_LARGE)
            return fail(p, "bad %s '%s': larger than %s, the most 64 bits hold", col[i], QUOTED(f[i]),
                        is_hex(f[i]) ? "0xffffffffffffffff" : "18446744073709551615");
        if (rc != NUM_OK)
            return fail(p, "bad %s '%s': expected %s", col[i], QUOTED(f[i]),
                        i == F_SIZE ? "decimal bytes" : "a hex (0x...) or decimal number");
    }

    ca_trace_op op = {.ptr = v[F_POINTER], .size = v[F_SIZE], .stream = v[F_STREAM],
                      .thread = v[F_THREAD], .id = CA_TRACE_NO_ID, .line = p->line,
                      .kind = kind};
    live *e;
    switch (kind) {
    case CA_TRACE_ALLOC:
        if (op.size == 0) return fail(p, "allocate of size 0");
        HASH_FIND(hh, p->table, &op.ptr, sizeof op.ptr, e);
        if (e)
            return fail(p, "pointer 0x%llx allocated again while live (allocated at line %u)",
                        (unsigned long long)op.ptr, e->line);
        if (!(e = new_entry(p))) return nomem(p);
        if (p->n_free_ids) {
            op.id = p->free_ids[--p->n_free_ids];
        } else {
            /* A new id. free_ids has room for every id, so frees never grow it. */
            if (p->t.n_ids == p->cap_ids) {
                uint32_t cap = p->cap_ids ? 2 * p->cap_ids : 1024;
                uint32_t *ids = cap > p->cap_ids ? realloc(p->free_ids, cap * sizeof *ids) : NULL;
                if (!ids) return nomem(p);
                p->free_ids = ids;
                p->cap_ids = cap;
            }
            op.id = p->t.n_ids++;
        }
        *e = (live){.ptr = op.ptr, .size = op.size, .id = op.id, .line = p->line};
        int hash_oom = 0;
        HASH_ADD(hh, p->table, ptr, sizeof e->ptr, e);
        if (hash_oom) return nomem(p);
        p->live_bytes += op.size;
        if (p->live_bytes > p->t.peak_live_bytes) /* saturates at UINT64_MAX */
            p->t.peak_live_bytes = p->live_bytes > UINT64_MAX ? UINT64_MAX : (uint64_t)p->live_bytes;
        break;
    case CA_TRACE_FREE:
        HASH_FIND(hh, p->table, &op.ptr, sizeof op.ptr, e);
        if (!e) return fail(p, "free of pointer 0x%llx that is not live", (unsigned long long)op.ptr);
        if (op.size && op.size != e->size)
            return fail(p, "free of %llu bytes, but pointer 0x%llx has %llu (line %u)",
                        (unsigned long long)op.size, (unsigned long long)op.ptr,
                        (unsigned long long)e->size, e->line);
        op.size = e->size;
        op.id = e->id;
        p->live_bytes -= e->size;
        HASH_DEL(p->table, e);
        e->next_free = p->free_entries;
        p->free_entries = e;
        p->free_ids[p->n_free_ids++] = op.id;
        break;
    default:
        break; /* failures and iteration marks change nothing that is live */
    }
    ca_trace_op *o = push_op(p);
    if (!o) return nomem(p);
    *o = op;
    p->t.count[kind]++;
    return 0;
}

static void parser_fini(parser *p)
{
    HASH_CLEAR(hh, p->table);
    while (p->chunks) {
        chunk *c = p->chunks;
        p->chunks = c->prev;
        free(c);
    }
    free(p->free_ids);
}

int ca_trace_parse_buffer(const char *name, const char *buf, size_t len, ca_trace *out,
                          char *err, size_t errlen)
{
    parser p = {.name = name ? name : "trace", .err = err, .errlen = errlen};
    if (err && errlen) err[0] = '\0';
    if (!out) return -1;
    *out = (ca_trace){0};
    if (!buf && len) return fail(&p, "no buffer");

    int have_header = 0, rc = 0;
    const char *s = buf, *end = buf + len;
    while (rc == 0 && s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *eol = nl ? nl : end;
        p.line++;
        field l = trim(s, (size_t)(eol - s));
        s = nl ? nl + 1 : end;
        if (l.n == 0) continue; /* blank lines (and the one after a last newline) */
        if (!have_header) {
            if (p.line == 1 && l.n >= 3 && memcmp(l.s, "\xef\xbb\xbf", 3) == 0)
                l.s += 3, l.n -= 3; /* a UTF-8 byte order mark */
            if (!is_word(l, HEADER)) rc = fail(&p, "bad header: expected '%s'", HEADER);
            have_header = 1;
            continue;
        }
        rc = row(&p, l.s, l.n);
        /* The last line, with no newline after it, is not a whole row: the
         * writer was killed mid-line (RMM's log loses its tail so). Left out,
         * and said; the rows before it stand. row() fails before changing
         * anything, so they are as they were. */
        if (rc && !nl && !p.out_of_memory) {
            snprintf(p.t.cut_why, sizeof p.t.cut_why, "%s", err && errlen ? err + p.why_at : "");
            p.t.cut_line = p.line;
            if (err && errlen) err[0] = '\0';
            rc = 0;
        }
    }
    if (rc == 0 && !have_header) {
        p.line = p.line ? p.line : 1;
        rc = fail(&p, "empty trace: expected the header '%s'", HEADER);
    }
    if (rc == 0) {
        p.t.live_at_end = HASH_COUNT(p.table);
        *out = p.t;
    } else {
        free(p.t.ops);
    }
    parser_fini(&p);
    return rc;
}

/* A gzipped trace's first lines, up to its header, read from its first
 * piece: a file that is no trace is refused there, not inflated whole first
 * (issue 30: a 2 MB gzip of zeros was inflated to 2 GiB). 0, or -1 with the
 * parser's message (or gzip's) in err. */
static int header_of_gzip(const char *path, const unsigned char *gz, size_t len, char *err, size_t errlen)
{
    enum { PIECE = 64 << 10 };
    char *piece = malloc(PIECE);
    ca_gz *g = piece ? ca_gz_open(gz, len, ca_gz_most(len)) : NULL;
    long got = g ? ca_gz_read(g, (unsigned char *)piece, PIECE) : -1;
    int rc = 0;
    if (got < 0) {
        if (err && errlen) snprintf(err, errlen, "%s:0: %s", path, g ? ca_gz_error(g) : "out of memory");
        rc = -1;
    } else {
        size_t upto = 0; /* through the first line that is not blank, or all the piece holds */
        for (const char *nl; upto < (size_t)got; upto = (size_t)(nl - piece) + 1) {
            if (!(nl = memchr(piece + upto, '\n', (size_t)got - upto))) {
                upto = (size_t)got;
                break;
            }
            if (trim(piece + upto, (size_t)(nl - piece) - upto).n) {
                upto = (size_t)(nl - piece) + 1;
                break;
            }
        }
        ca_trace t;
        if ((rc = ca_trace_parse_buffer(path, piece, upto, &t, err, errlen)) == 0) ca_trace_free(&t);
    }
    ca_gz_close(g);
    free(piece);
    return rc;
}

int ca_trace_parse_file(const char *path, ca_trace *out, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (out) *out = (ca_trace){0};
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        if (err && errlen)
            snprintf(err, errlen, "%s:0: cannot open: %s", path ? path : "(null)",
                     strerror(path ? errno : EINVAL));
        return -1;
    }
    /* Read it whole (works for pipes too), then parse in place. */
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : -1;
    while (rc == 0) {
        if (n == cap) {
            char *b = realloc(buf, cap * 2);
            if (!b) {
                rc = -1;
                break;
            }
            buf = b, cap *= 2;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) {
            if (ferror(f)) rc = -1;
            break;
        }
    }
    int read_errno = errno;
    fclose(f);
    if (rc != 0) {
        if (err && errlen)
            snprintf(err, errlen, "%s:0: cannot read: %s", path,
                     buf ? strerror(read_errno) : "out of memory");
        free(buf);
        return -1;
    }
    if (ca_is_gzip(buf, n)) { /* trace.csv.gz: its header first, then the rest */
        unsigned char *raw;
        size_t raw_n;
        char why[200] = "";
        rc = header_of_gzip(path, (const unsigned char *)buf, n, err, errlen);
        if (rc == 0 && (rc = ca_gunzip((const unsigned char *)buf, n, ca_gz_most(n), &raw, &raw_n, why, sizeof why)))
            if (err && errlen) snprintf(err, errlen, "%s:0: %s", path, why);
        free(buf);
        if (rc != 0) return -1;
        buf = (char *)raw, n = raw_n;
    }
    rc = ca_trace_parse_buffer(path, buf, n, out, err, errlen);
    free(buf);
    return rc;
}

void ca_trace_warn_cut(const ca_trace *t, const char *tool, const char *name, FILE *f)
{
    if (!t->cut_line) return;
    fprintf(f, "%s: %s:%u: warning: the last line is cut short (no newline at its end: the program writing the "
               "log was stopped mid-line) and is not a whole row (%s): left out; the %zu rows before it are read\n",
            tool, name, t->cut_line, t->cut_why, t->n_ops);
}

#define DEVICE_GRANULE ((size_t)2 << 20)

/* What the peak can map: no allocator holds more than the device's capacity
 * (0: none given) or CA_MAX_BYTES; a larger request fails at once, mapping
 * nothing. */
static uint64_t mappable_peak(const ca_trace *t, size_t capacity)
{
    uint64_t most = capacity && capacity < CA_MAX_BYTES ? capacity : CA_MAX_BYTES;
    return t->peak_live_bytes < most ? t->peak_live_bytes : most;
}

size_t ca_trace_granule(const ca_trace *t, size_t capacity)
{
    uint64_t most = t->n_ops > 65536 / 4 ? 4 * (uint64_t)t->n_ops : 65536, g = DEVICE_GRANULE;
    while (mappable_peak(t, capacity) / g > most) g *= 2;
    return (size_t)g;
}

void ca_trace_warn_granule(const ca_trace *t, size_t capacity, const char *tool, const char *name, FILE *f)
{
    size_t g = ca_trace_granule(t, capacity);
    if (g == DEVICE_GRANULE) return;
    char peak[CA_SIZE_BUF], gran[CA_SIZE_BUF];
    fprintf(f, "%s: %s: note: %s live at once in %zu rows: replayed in granules of %s, not a device's 2 MiB, so "
               "that time and memory follow the rows (reserved figures round up to that)\n",
            tool, name, ca_format_size(mappable_peak(t, capacity), peak, sizeof peak), t->n_ops,
            ca_format_size(g, gran, sizeof gran));
}

void ca_trace_free(ca_trace *t)
{
    if (!t) return;
    free(t->ops);
    *t = (ca_trace){0};
}

const char *ca_trace_kind_name(ca_trace_kind k)
{
    static const char *const names[CA_TRACE_KINDS] = {"allocate", "free", "allocate failure",
                                                      "iteration"};
    return (unsigned)k < CA_TRACE_KINDS ? names[k] : "?";
}
