/* Python frames: finding the interpreter, walking the calling thread's
 * frames, naming them once, and placing them among the native frames. See
 * pyframes.h for what is read and why it is safe without the GIL. */
#define _GNU_SOURCE
#include "reports/capture/pyframes.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/capture/named_frames.h"
#include "reports/capture/pylayouts.h"

#define AT(p, off, T) (*(const T *)((const char *)(p) + (off)))

enum { LOOK, FOUND, ABSENT, UNSUPPORTED };
static _Atomic int state = LOOK;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* everything below, except on the walk */

#define MAX_RANGES 16
static struct {
    const ca_py_layout *L;
    int (*initialized)(void);
    const char *(*thread_state)(void);
    int (*addr2line)(const void *code, int byte_offset);
    uintptr_t code_type, str_type;
    uintptr_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault */
    uintptr_t runtime;          /* an address in the interpreter's object */
    char version[16];
    const char *why;
    unsigned long long adds;    /* objects loaded when we last looked */
    struct { uintptr_t lo, hi; } ranges[MAX_RANGES]; /* the call machinery's code */
    unsigned n_ranges;
    unsigned long long ranges_adds;
} py = {.why = "not looked for yet"};

/* ---- finding the interpreter ---- */

static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *(unsigned long long *)arg = info->dlpi_adds;
    return 1; /* the count is the same in every entry: one is enough */
}

/* Objects loaded so far (never decreases). */
static unsigned long long loaded_count(void) {
    unsigned long long n = 0;
    dl_iterate_phdr(adds_cb, &n);
    return n;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int libpython_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    if (info->dlpi_name && !strncmp(base_name(info->dlpi_name), "libpython3", 10)) {
        *(const char **)arg = info->dlpi_name;
        return 1;
    }
    return 0;
}

/* A Python loaded with RTLD_LOCAL is not in the default scope: open it by
 * name (it stays loaded, as its code may be on stacks we keep). */
static void *local_libpython(void) {
    const char *name = NULL;
    dl_iterate_phdr(libpython_cb, &name);
    return name ? dlopen(name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
}

static void *sym(void *h, const char *name) { return dlsym(h ? h : RTLD_DEFAULT, name); }

/* Under mu. */
static void look(void) {
    py.adds = loaded_count();
    void *h = NULL;
    const char *(*get_version)(void) = (const char *(*)(void))sym(NULL, "Py_GetVersion");
    if (!get_version && (h = local_libpython())) get_version = (const char *(*)(void))sym(h, "Py_GetVersion");
    if (!get_version) {
        py.why = "no Python in this process";
        atomic_store_explicit(&state, ABSENT, memory_order_release);
        return;
    }
    /* One more reference to its object: it can never be unloaded under the
     * function pointers kept below (the handle is kept on purpose). */
    Dl_info where;
    if (dladdr((void *)get_version, &where) && where.dli_fname) (void)dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    const char *v = get_version();
    unsigned major = 0, minor = 0;
    static char why[96];
    if (sscanf(v, "%u.%u", &major, &minor) != 2) {
        snprintf(why, sizeof why, "Python's version '%.16s' is not understood", v);
        goto refuse;
    }
    snprintf(py.version, sizeof py.version, "%u.%u", major, minor);
    for (size_t i = 0; i < CA_PY_N_LAYOUTS; i++)
        if (ca_py_layouts[i].version == (major << 8 | minor)) py.L = &ca_py_layouts[i];
    if (!py.L) {
        snprintf(why, sizeof why, "Python %u.%u is not supported (3.10 to 3.13 are)", major, minor);
        goto refuse;
    }
    if (strstr(v, "free-threading")) {
        snprintf(why, sizeof why, "Python %u.%u's free-threaded build is not supported", major, minor);
        goto refuse;
    }
    /* Debug builds lay objects out otherwise: they count references. */
    if (sym(h, "_Py_RefTotal") || sym(h, "_Py_GetGlobalRefTotal") || sym(h, "_Py_GetRefTotal")) {
        snprintf(why, sizeof why, "Python %u.%u's debug build is not supported", major, minor);
        goto refuse;
    }
    py.initialized = (int (*)(void))sym(h, "Py_IsInitialized");
    py.thread_state = (const char *(*)(void))sym(h, "PyGILState_GetThisThreadState");
    py.addr2line = (int (*)(const void *, int))sym(h, "PyCode_Addr2Line");
    py.code_type = (uintptr_t)sym(h, "PyCode_Type");
    py.str_type = (uintptr_t)sym(h, "PyUnicode_Type");
    void *eval = sym(h, "_PyEval_EvalFrameDefault");
    if (!py.initialized || !py.thread_state || !py.addr2line || !py.code_type || !py.str_type || !eval) {
        snprintf(why, sizeof why, "Python %u.%u lacks a function cudalloc reads frames with", major, minor);
        goto refuse;
    }
    /* The eval loop's extent, for placing Python frames among native ones. */
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    if (dladdr1(eval, &info, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
        py.eval_lo = (uintptr_t)eval;
        py.eval_hi = (uintptr_t)eval + es->st_size;
    }
    py.runtime = (uintptr_t)py.initialized;
    py.why = NULL;
    atomic_store_explicit(&state, FOUND, memory_order_release);
    return;
refuse:
    py.why = why;
    atomic_store_explicit(&state, UNSUPPORTED, memory_order_release);
    fprintf(stderr, "cudalloc: note: %s; call stacks show no Python frames\n", why);
}

void ca_py_recheck(void) {
    if (atomic_load_explicit(&state, memory_order_acquire) != ABSENT) return;
    pthread_mutex_lock(&mu);
    if (atomic_load(&state) == ABSENT && loaded_count() != py.adds) look();
    pthread_mutex_unlock(&mu);
}

const char *ca_py_version(const char **why) {
    int st = atomic_load_explicit(&state, memory_order_acquire);
    if (st == LOOK) {
        pthread_mutex_lock(&mu);
        if (atomic_load(&state) == LOOK) look();
        pthread_mutex_unlock(&mu);
        st = atomic_load(&state);
    }
    if (why) *why = st == FOUND ? NULL : py.why;
    return st == FOUND ? py.version : NULL;
}

/* ---- the walk (allocation path) ---- */

static inline uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
}

static __attribute__((noinline)) unsigned walk_frames(ca_py_frame *out, unsigned max, uint64_t *hash);

/* The check apart from the walk: a capture without Python (most) returns
 * before the walk's register saves. */
unsigned ca_py_walk(ca_py_frame *out, unsigned max, uint64_t *hash) {
    int st = atomic_load_explicit(&state, memory_order_acquire);
    if (st != FOUND && !(st == LOOK && ca_py_version(NULL))) return 0;
    return walk_frames(out, max, hash);
}

static unsigned walk_frames(ca_py_frame *out, unsigned max, uint64_t *hash) {
    /* A copy: the stores to out[] could alias the table's ints, and the
     * offsets should stay in registers. */
    const ca_py_layout lay = *py.L, *L = &lay;
    if (!py.initialized()) return 0; /* not yet, or finalizing */
    const char *ts = py.thread_state();
    if (!ts) return 0;
    const char *f;
    if (L->ts_cframe >= 0) {
        const char *cf = AT(ts, L->ts_cframe, const char *);
        f = cf ? AT(cf, L->cframe_frame, const char *) : NULL;
    } else {
        f = AT(ts, L->ts_frame, const char *);
    }
    unsigned n = 0;
    for (unsigned steps = 0; f && n < max && steps < 4 * CA_PY_MAX_FRAMES; steps++, f = AT(f, L->f_previous, const char *)) {
        int owner = L->f_owner >= 0 ? AT(f, L->f_owner, char) : -1;
        if (L->owner_cstack >= 0 && owner == L->owner_cstack) { /* where a C call of the eval loop began */
            if (n) out[n - 1].ends_call = 1;
            continue;
        }
        const char *code = AT(f, L->f_code, const char *);
        if (!code) continue;
        int32_t lasti = L->f_lasti >= 0 ? AT(f, L->f_lasti, int)
                                        : (int32_t)((AT(f, L->f_instr, const char *) - (code + L->co_code)) / 2);
        /* A frame still being set up has not started: Python's tracebacks skip it too. */
        if (L->co_firsttraceable >= 0 && owner != L->owner_generator && lasti < AT(code, L->co_firsttraceable, int))
            continue;
        out[n].code = (uintptr_t)code;
        out[n].ident = AT(code, L->co_filename, uintptr_t) * 0x9E3779B97F4A7C15ull ^
                       AT(code, L->co_name, uintptr_t) * 0xC2B2AE3D27D4EB4Full ^ (uint32_t)AT(code, L->co_firstlineno, int);
        out[n].lasti = lasti;
        /* 3.10: each Python call is a C call of the eval loop; 3.11: is_entry says */
        out[n].ends_call = L->f_is_entry >= 0 ? AT(f, L->f_is_entry, char) != 0 : L->owner_cstack < 0;
        n++;
    }
    if (n) out[n - 1].ends_call = 1;
    /* Each frame's word is multiplied on its own (the products pipeline) and
     * folded in with a rotation: the chain stays a cycle or two a frame. */
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        uint64_t w = out[i].code * 0xC2B2AE3D27D4EB4Full + out[i].ident + ((uint64_t)(uint32_t)out[i].lasti << 1 | out[i].ends_call);
        uint64_t p = (w ^ (0x9E3779B97F4A7C15ull * (i + 1))) * 0xff51afd7ed558ccdull;
        h = ((h << 7) | (h >> 57)) ^ p ^ (p >> 31);
    }
    *hash = h;
    return n;
}

/* ---- naming (once per distinct frame) ---- */

/* UTF-8 of a str object's characters, read in place (compact strings, which
 * code objects' names are); "??" otherwise. */
static void read_str(uintptr_t s, char *buf, size_t cap) {
    size_t n = 0;
    if (s && AT(s, CA_PY_OB_TYPE, uintptr_t) == py.str_type) {
        uint32_t st = AT(s, CA_PY_STR_STATE, uint32_t);
        unsigned kind = CA_PY_STR_KIND(st);
        int64_t len = AT(s, CA_PY_STR_LENGTH, int64_t);
        const unsigned char *d =
            (const unsigned char *)s + (st & CA_PY_STR_ASCII ? py.L->str_ascii_size : py.L->str_compact_size);
        if (!(st & CA_PY_STR_COMPACT) || (kind != 1 && kind != 2 && kind != 4)) len = 0;
        for (int64_t i = 0; i < len; i++) {
            uint32_t c = kind == 1 ? d[i] : kind == 2 ? ((const uint16_t *)d)[i] : ((const uint32_t *)d)[i];
            if ((c >= 0xD800 && c < 0xE000) || c > 0x10FFFF) c = 0xFFFD; /* lone surrogates */
            unsigned char u[4];
            size_t k;
            if (c < 0x80) u[0] = (unsigned char)c, k = 1;
            else if (c < 0x800) u[0] = 0xC0 | c >> 6, u[1] = 0x80 | (c & 63), k = 2;
            else if (c < 0x10000) u[0] = 0xE0 | c >> 12, u[1] = 0x80 | (c >> 6 & 63), u[2] = 0x80 | (c & 63), k = 3;
            else u[0] = 0xF0 | c >> 18, u[1] = 0x80 | (c >> 12 & 63), u[2] = 0x80 | (c >> 6 & 63), u[3] = 0x80 | (c & 63), k = 4;
            if (n + k >= cap) break;
            memcpy(buf + n, u, k);
            n += k;
        }
    }
    if (!n) memcpy(buf, "??", n = 2);
    buf[n] = '\0';
}

/* (code, ident, lasti) -> named ip, open addressing; under mu. */
typedef struct fentry {
    uintptr_t code, ident, ip;
    int32_t lasti;
} fentry;
static fentry *table;
static size_t table_cap, table_n;

static size_t slot_of(const ca_py_frame *f, size_t cap) {
    uint64_t h = mix(mix(0x51ED27u, f->code), f->ident ^ (uint32_t)f->lasti);
    return (size_t)h & (cap - 1);
}

static fentry *find_slot(fentry *t, size_t cap, const ca_py_frame *f) {
    size_t i = slot_of(f, cap);
    while (t[i].ip && !(t[i].code == f->code && t[i].ident == f->ident && t[i].lasti == f->lasti)) i = (i + 1) & (cap - 1);
    return &t[i];
}

static int table_grow(void) {
    size_t cap = table_cap ? 2 * table_cap : 1024;
    fentry *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < table_cap; i++) {
        if (!table[i].ip) continue;
        ca_py_frame f = {.code = table[i].code, .ident = table[i].ident, .lasti = table[i].lasti};
        *find_slot(t, cap, &f) = table[i];
    }
    free(table);
    table = t;
    table_cap = cap;
    return 0;
}

static uintptr_t name_frame(const ca_py_frame *f) {
    const ca_py_layout *L = py.L;
    const char *code = (const char *)f->code;
    if (AT(code, CA_PY_OB_TYPE, uintptr_t) != py.code_type) return 0;
    int line = f->lasti < 0 ? AT(code, L->co_firstlineno, int) : py.addr2line(code, f->lasti * 2);
    char name[256], file[1024];
    read_str(AT(code, L->co_name, uintptr_t), name, sizeof name);
    read_str(AT(code, L->co_filename, uintptr_t), file, sizeof file);
    return ca_named_frame(name, file, line > 0 ? (unsigned)line : 0, CA_PY_MODULE);
}

uintptr_t ca_py_frame_ip(const ca_py_frame *f) {
    if (atomic_load_explicit(&state, memory_order_acquire) != FOUND) return 0;
    uintptr_t ip = 0;
    pthread_mutex_lock(&mu);
    if (2 * (table_n + 1) > table_cap && table_grow() != 0) goto out;
    fentry *e = find_slot(table, table_cap, f);
    if (e->ip) {
        ip = e->ip;
    } else if ((ip = name_frame(f))) {
        *e = (fentry){f->code, f->ident, ip, f->lasti};
        table_n++;
    }
out:
    pthread_mutex_unlock(&mu);
    return ip;
}

/* ---- native frames ---- */

static int ranges_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    const char *b = info->dlpi_name ? base_name(info->dlpi_name) : "";
    int named = !strncmp(b, "libpython3", 10) || !strncmp(b, "libffi.so", 9) || !strncmp(b, "_ctypes.", 8);
    int runtime = 0;
    for (int i = 0; i < info->dlpi_phnum && !named && !runtime; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        runtime = ph->p_type == PT_LOAD && py.runtime >= lo && py.runtime < lo + ph->p_memsz;
    }
    if (!named && !runtime) return 0;
    for (int i = 0; i < info->dlpi_phnum && py.n_ranges < MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        py.ranges[py.n_ranges].lo = lo;
        py.ranges[py.n_ranges++].hi = lo + ph->p_memsz;
    }
    return 0;
}

void ca_py_classify(const uintptr_t *ips, unsigned n, uint8_t *kind) {
    memset(kind, CA_PY_NATIVE, n);
    if (atomic_load_explicit(&state, memory_order_acquire) != FOUND) return;
    pthread_mutex_lock(&mu);
    unsigned long long adds = loaded_count();
    if (adds != py.ranges_adds) { /* libffi and ctypes load with `import ctypes` */
        py.n_ranges = 0;
        dl_iterate_phdr(ranges_cb, NULL);
        py.ranges_adds = adds;
    }
    for (unsigned i = 0; i < n; i++) {
        uintptr_t a = ips[i] - 1; /* the call, not the instruction after it */
        if (a >= py.eval_lo && a < py.eval_hi) {
            kind[i] = CA_PY_EVAL;
            continue;
        }
        for (unsigned r = 0; r < py.n_ranges; r++)
            if (a >= py.ranges[r].lo && a < py.ranges[r].hi) kind[i] = CA_PY_INTERNAL;
    }
    pthread_mutex_unlock(&mu);
}

/* Native frames kept next to the call site when a stack is too long. */
#define KEEP_INNER 8

unsigned ca_py_interleave(const uintptr_t *c, const uint8_t *kind, unsigned nc, const uintptr_t *py_ips,
                          const uint8_t *ends_call, unsigned np, uintptr_t *out, unsigned max) {
    enum { ROOM = 256 };
    uintptr_t all[ROOM];
    int first_py = -1;
    if (nc > ROOM - CA_PY_MAX_FRAMES) nc = ROOM - CA_PY_MAX_FRAMES;
    if (np > CA_PY_MAX_FRAMES) np = CA_PY_MAX_FRAMES;
    int last_eval = -1, first_internal = -1;
    for (unsigned i = 0; i < nc; i++) {
        if (kind[i] == CA_PY_EVAL) last_eval = (int)i;
        if (kind[i] != CA_PY_NATIVE && first_internal < 0) first_internal = (int)i;
    }
    unsigned n = 0, p = 0;
#define PY(k) (first_py < 0 ? first_py = (int)n : 0, all[n++] = py_ips[k])
    for (unsigned i = 0; i < nc; i++) {
        if (kind[i] == CA_PY_EVAL) {
            while (p < np) { /* the frames of this call, up to the one that ends it */
                PY(p);
                if (ends_call[p++]) break;
            }
            if ((int)i == last_eval)
                while (p < np) PY(p++);
        } else if (kind[i] == CA_PY_INTERNAL) {
            if (last_eval < 0 && (int)i == first_internal)
                while (p < np) PY(p++);
        } else {
            all[n++] = c[i];
        }
    }
    while (p < np) PY(p++);
#undef PY
    /* Too long: leave out native frames just above the first Python frame
     * (the middle of a deep native stack, such as a framework's dispatch
     * between its Python binding and the CUDA runtime), keeping the
     * innermost ones; then, if need be, the outermost frames. */
    unsigned drop = 0, at = first_py > KEEP_INNER ? (unsigned)first_py : 0;
    if (n > max && at) {
        drop = n - max;
        if (drop > at - KEEP_INNER) drop = at - KEEP_INNER;
    }
    unsigned k = 0;
    for (unsigned i = 0; i < n && k < max; i++)
        if (i < at - drop || i >= at) out[k++] = all[i];
    return k;
}

void ca_py_fork_child(void) { pthread_mutex_init(&mu, NULL); }
