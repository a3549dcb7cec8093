/* Stack capture with a verified per-thread cache, and the stack table; see
 * stacks.h for why. */
#define _GNU_SOURCE
#include "reports/capture/stacks.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "reports/capture/pyframes.h"

/* ---- the table ---- */

typedef struct srec {
    uint64_t hash;
    uint32_t n;
    uintptr_t ips[];
} srec;

/* Open addressing over ids; replaced (never changed in place once full) so
 * that lookups need no lock. Retired tables are freed with the whole table. */
typedef struct sindex {
    uint32_t mask;
    struct sindex *retired;
    _Atomic uint32_t slot[];
} sindex;

#define CHUNK_BITS 10
#define CHUNK (1u << CHUNK_BITS)
#define MAX_CHUNKS 1024 /* a million stacks */

struct ca_stacks {
    unsigned max_frames;
    int python;                            /* Python frames in stacks (default on) */
    uintptr_t skip_lo, skip_hi;
    uint64_t serial;
    pthread_mutex_t mu;                    /* inserts */
    _Atomic(sindex *) index;
    _Atomic uint32_t count;
    _Atomic(srec *) *chunks[MAX_CHUNKS];   /* id -> record */
    size_t bytes;
};

static uint64_t hash_ips(const uintptr_t *ips, unsigned n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (unsigned i = 0; i < n; i++) {
        h ^= (uint64_t)ips[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

static const srec *rec_of(const ca_stacks *s, uint32_t id) {
    _Atomic(srec *) *c = s->chunks[id >> CHUNK_BITS];
    return c ? atomic_load_explicit(&c[id & (CHUNK - 1)], memory_order_acquire) : NULL;
}

static uint32_t find(const ca_stacks *s, const sindex *ix, uint64_t h, const uintptr_t *ips, unsigned n) {
    for (uint32_t i = (uint32_t)h & ix->mask;; i = (i + 1) & ix->mask) {
        uint32_t id = atomic_load_explicit(&ix->slot[i], memory_order_acquire);
        if (!id) return 0;
        const srec *r = rec_of(s, id);
        if (r && r->hash == h && r->n == n && (!n || !memcmp(r->ips, ips, n * sizeof *ips))) return id;
    }
}

static sindex *index_new(uint32_t cap) {
    sindex *ix = calloc(1, sizeof *ix + cap * sizeof ix->slot[0]);
    if (ix) ix->mask = cap - 1;
    return ix;
}

static void index_put(sindex *ix, uint64_t h, uint32_t id) {
    uint32_t i = (uint32_t)h & ix->mask;
    while (atomic_load_explicit(&ix->slot[i], memory_order_relaxed)) i = (i + 1) & ix->mask;
    atomic_store_explicit(&ix->slot[i], id, memory_order_release);
}

/* n <= CA_STACK_MAX_FRAMES */
static uint32_t intern_n(ca_stacks *s, const uintptr_t *ips, unsigned n) {
    uint64_t h = hash_ips(ips, n);
    uint32_t id = find(s, atomic_load_explicit(&s->index, memory_order_acquire), h, ips, n);
    if (id) return id;
    pthread_mutex_lock(&s->mu);
    sindex *ix = atomic_load_explicit(&s->index, memory_order_relaxed);
    if ((id = find(s, ix, h, ips, n))) goto out;
    uint32_t next = atomic_load_explicit(&s->count, memory_order_relaxed) + 1;
    if (next >= (uint32_t)MAX_CHUNKS * CHUNK) goto out;
    if (!s->chunks[next >> CHUNK_BITS]) {
        s->chunks[next >> CHUNK_BITS] = calloc(CHUNK, sizeof(_Atomic(srec *)));
        if (!s->chunks[next >> CHUNK_BITS]) goto out;
        s->bytes += CHUNK * sizeof(void *);
    }
    srec *r = malloc(sizeof *r + n * sizeof *ips);
    if (!r) goto out;
    r->hash = h;
    r->n = n;
    if (n) memcpy(r->ips, ips, n * sizeof *ips);
    s->bytes += sizeof *r + n * sizeof *ips;
    /* Keep the index at most half full; grow by doubling into a new table. */
    if (2 * (uint64_t)next > (uint64_t)ix->mask + 1) {
        sindex *bigger = index_new(2 * (ix->mask + 1));
        if (!bigger) {
            free(r);
            goto out;
        }
        for (uint32_t k = 1; k < next; k++) index_put(bigger, rec_of(s, k)->hash, k);
        bigger->retired = ix;
        s->bytes += (size_t)(bigger->mask + 1) * sizeof(uint32_t);
        atomic_store_explicit(&s->index, bigger, memory_order_release);
        ix = bigger;
    }
    atomic_store_explicit(&s->chunks[next >> CHUNK_BITS][next & (CHUNK - 1)], r, memory_order_release);
    atomic_store_explicit(&s->count, next, memory_order_release);
    index_put(ix, h, next);
    id = next;
out:
    pthread_mutex_unlock(&s->mu);
    return id;
}

uint32_t ca_stacks_intern(ca_stacks *s, const uintptr_t *ips, unsigned n) {
    if (!s) return CA_SITE_NONE;
    return intern_n(s, ips, n > s->max_frames ? s->max_frames : n);
}

unsigned ca_stacks_get(const ca_stacks *s, uint32_t id, const uintptr_t **ips) {
    const srec *r = s && id && id <= atomic_load_explicit(&s->count, memory_order_acquire) ? rec_of(s, id) : NULL;
    if (ips) *ips = r ? r->ips : NULL;
    return r ? r->n : 0;
}

uint32_t ca_stacks_count(const ca_stacks *s) {
    return s ? atomic_load_explicit(&s->count, memory_order_acquire) : 0;
}

size_t ca_stacks_memory(const ca_stacks *s) { return s ? s->bytes + sizeof *s : 0; }

void ca_stacks_fork_child(ca_stacks *s) {
    if (s) pthread_mutex_init(&s->mu, NULL);
    ca_py_fork_child();
}

void ca_stacks_set_python(ca_stacks *s, int on) { s->python = on; }

void ca_stacks_set_skip_range(ca_stacks *s, uintptr_t lo, uintptr_t hi) {
    s->skip_lo = lo;
    s->skip_hi = hi;
}

/* ---- which object are we in? ---- */

struct own_search {
    uintptr_t addr, lo, hi;
    int index, found;
};

static int own_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    struct own_search *o = arg;
    int idx = o->index++;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (o->addr >= lo && o->addr < hi) {
            /* The first object is the program itself: nothing to skip then. */
            o->found = idx > 0;
            o->lo = lo;
            o->hi = hi;
            return 1;
        }
    }
    return 0;
}

static uint64_t next_serial(void) {
    static _Atomic uint64_t serials;
    return atomic_fetch_add(&serials, 1) + 1;
}

ca_stacks *ca_stacks_new(unsigned max_frames) {
    if (max_frames < 1) max_frames = 1;
    if (max_frames > CA_STACK_MAX_FRAMES) max_frames = CA_STACK_MAX_FRAMES;
    ca_stacks *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->max_frames = max_frames;
    s->python = 1;
    s->serial = next_serial();
    pthread_mutex_init(&s->mu, NULL);
    sindex *ix = index_new(256);
    if (!ix) {
        free(s);
        return NULL;
    }
    atomic_init(&s->index, ix);
    s->bytes = 256 * sizeof(uint32_t);
    struct own_search o = {.addr = (uintptr_t)&ca_stacks_capture};
    dl_iterate_phdr(own_cb, &o);
    if (o.found) ca_stacks_set_skip_range(s, o.lo, o.hi);
    return s;
}

void ca_stacks_free(ca_stacks *s) {
    if (!s) return;
    uint32_t n = atomic_load(&s->count);
    for (uint32_t id = 1; id <= n; id++) free((void *)rec_of(s, id));
    for (unsigned c = 0; c < MAX_CHUNKS; c++) free(s->chunks[c]);
    for (sindex *ix = atomic_load(&s->index), *next; ix; ix = next) {
        next = ix->retired;
        free(ix);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- capture ---- */

/* Raw frames walked per capture: the frames kept plus room for ours. */
#define RAW_MAX (CA_STACK_MAX_FRAMES + 16)

#if defined(__x86_64__)
#define USE_CACHE 1
#else
#define USE_CACHE 0
#endif

/* One cached stack: the first n return addresses of a walk (as many as
 * decide its site: the leading frames skipped, then max_frames) and where
 * each sat, as a byte offset from the capture frame. The two arrays share one
 * block, made when the entry is: ip[n], then off[n]. */
#define CACHE_SETS 256
#define CACHE_WAYS 4
typedef struct centry {
    uint32_t depth; /* stack top minus capture frame; 0 = empty */
    uint32_t site;
    uint32_t n;
    uintptr_t *ip;
} centry;

typedef struct tcache {
    struct tcache *prev, *next; /* every thread's cache, for a fork child */
    uint64_t serial;        /* of the ca_stacks the entries belong to */
    uintptr_t lo, hi;       /* this thread's stack */
    uint8_t next_way[CACHE_SETS];
    uint8_t last_hit[CACHE_SETS]; /* the way to check first: a loop repeats its site */
    centry e[CACHE_SETS][CACHE_WAYS];
} tcache;

static void cache_clear(tcache *tc) {
    for (unsigned i = 0; i < CACHE_SETS; i++)
        for (unsigned w = 0; w < CACHE_WAYS; w++) free(tc->e[i][w].ip);
    memset(tc->e, 0, sizeof tc->e);
}

/* initial-exec: inside libcudalloc.so the default model would call
 * __tls_get_addr on every capture. */
#define TLS __thread __attribute__((tls_model("initial-exec")))
static TLS tcache *tl_cache;
static TLS int tl_cache_failed;
static TLS uint64_t tl_hits, tl_walks, tl_way_misses;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* All threads' caches: a forked child frees those of the threads it did not
 * inherit (they would stay allocated, unreachable, for its whole life). */
static pthread_mutex_t caches_mu = PTHREAD_MUTEX_INITIALIZER;
static tcache *caches;

static void cache_unlink(tcache *tc) {
    if (tc->prev) tc->prev->next = tc->next;
    else caches = tc->next;
    if (tc->next) tc->next->prev = tc->prev;
}

/* At thread exit. A later destructor of the same thread may still allocate
 * (and capture): it then walks without a cache rather than use a freed one. */
static void cache_destroy(void *p) {
    pthread_mutex_lock(&caches_mu);
    cache_unlink(p);
    pthread_mutex_unlock(&caches_mu);
    cache_clear(p);
    free(p);
    tl_cache = NULL;
    tl_cache_failed = 1;
}
static void cache_key_init(void) { pthread_key_create(&cache_key, cache_destroy); }

void ca_stacks_thread_caches_fork_child(void) {
    pthread_mutex_init(&caches_mu, NULL);
    for (tcache *tc = caches, *next; tc; tc = next) {
        next = tc->next;
        if (tc != tl_cache) {
            cache_clear(tc);
            free(tc);
        }
    }
    caches = tl_cache;
    if (tl_cache) tl_cache->prev = tl_cache->next = NULL;
}

/* libunwind sets up its global state (a signal mask, caches) on its first
 * walk, and other threads read it unlocked afterwards: do that first walk
 * while the process has one thread. */
void ca_stacks_init_unwinder(void) {
    unw_context_t uc;
    unw_cursor_t c;
    if (unw_getcontext(&uc) == 0 && unw_init_local(&c, &uc) == 0) unw_step(&c);
}

size_t ca_stacks_thread_cache_bytes(void) { return sizeof(tcache); } /* and 12 bytes a cached frame */

uint64_t ca_stacks_thread_way_misses(void) { return tl_way_misses; }

void ca_stacks_thread_counts(uint64_t *hits, uint64_t *walks) {
    if (hits) *hits = tl_hits;
    if (walks) *walks = tl_walks;
}

static tcache *thread_cache(const ca_stacks *s) {
    tcache *tc = tl_cache;
    if (__builtin_expect(tc != NULL, 1)) {
        if (tc->serial != s->serial) {
            cache_clear(tc);
            tc->serial = s->serial;
        }
        return tc;
    }
    if (tl_cache_failed) return NULL;
    tl_cache_failed = 1; /* until it works: no retry on every capture */
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return NULL;
    int rc = pthread_attr_getstack(&attr, &addr, &size);
    pthread_attr_destroy(&attr);
    if (rc != 0 || !(tc = calloc(1, sizeof *tc))) return NULL;
    tc->lo = (uintptr_t)addr;
    tc->hi = (uintptr_t)addr + size;
    tc->serial = s->serial;
    pthread_once(&cache_once, cache_key_init);
    pthread_setspecific(cache_key, tc);
    pthread_mutex_lock(&caches_mu);
    tc->next = caches;
    if (caches) caches->prev = tc;
    caches = tc;
    pthread_mutex_unlock(&caches_mu);
    tl_cache = tc;
    tl_cache_failed = 0;
    return tc;
}

/* Does the stack still hold e's return addresses where they sat? Each word
 * is compared, not hashed: exact, and fewer instructions a frame (the loads
 * do not depend on one another). Four at a time, stopping at a difference. */
static inline __attribute__((no_sanitize_address)) int same_frames(uintptr_t ref, const centry *e) {
    const uintptr_t *ip = e->ip;
    const uint32_t *off = (const uint32_t *)(ip + e->n);
#define AT(i) (*(const uintptr_t *)(ref + off[i]) ^ ip[i])
    unsigned i = 0, n = e->n;
    for (; i + 4 <= n; i += 4)
        if (AT(i) | AT(i + 1) | AT(i + 2) | AT(i + 3)) return 0;
    uintptr_t diff = 0;
    for (; i < n; i++) diff |= AT(i);
#undef AT
    return !diff;
}

static inline unsigned set_of(uint32_t depth) { return (unsigned)((depth >> 3) * 2654435761u) >> 24; }

/* The full walk, from its caller's caller on (the capture function's caller is
 * frame 0). ips and slots (the address each return address was read from, 0
 * when it is not on this stack as expected) for up to max frames. */
static __attribute__((noinline)) unsigned walk(uintptr_t *ips, uintptr_t *slots, unsigned max) {
    unw_context_t uc;
    unw_cursor_t c;
    if (unw_getcontext(&uc) != 0 || unw_init_local(&c, &uc) != 0) return 0;
    /* Frame 0 of the cursor is walk() itself; one step reaches
     * ca_stacks_capture, and each step of the loop its callers. */
    if (unw_step(&c) <= 0) return 0;
    unsigned n = 0;
    while (n < max && unw_step(&c) > 0) {
        unw_word_t ip, sp;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) != 0 || !ip) break;
        unw_get_reg(&c, UNW_REG_SP, &sp);
        ips[n] = (uintptr_t)ip;
        /* x86-64: the caller's SP right after the return is the callee's CFA,
         * and the return address sat just below it. */
        slots[n] = (USE_CACHE && unw_is_signal_frame(&c) <= 0 && sp >= 8 &&
                    *(const uintptr_t *)(uintptr_t)(sp - 8) == (uintptr_t)ip)
                       ? (uintptr_t)sp - 8
                       : 0;
        n++;
    }
    return n;
}

/* The leading frames of raw[0..n) inside our own object (left out of sites). */
static unsigned skipped(const ca_stacks *s, const uintptr_t *raw, unsigned n) {
    unsigned first = 0;
    while (first < n && raw[first] >= s->skip_lo && raw[first] < s->skip_hi) first++;
    return first;
}

static uint32_t intern_skipping(ca_stacks *s, const uintptr_t *raw, unsigned n) {
    unsigned first = skipped(s, raw, n);
    unsigned keep = n - first < s->max_frames ? n - first : s->max_frames;
    return ca_stacks_intern(s, raw + first, keep);
}

/* ---- Python frames ----
 * One native stack holds many Python stacks (every Python line that calls
 * into C runs the same C code), so a site is the pair. Each thread keeps a
 * cache from (native site, hash of the Python frames) to the site; a miss
 * walks the native stack in full (the native site may be cut short), names
 * the Python frames and interleaves the two. */

#define PY_SETS 512
#define PY_WAYS 4
typedef struct pentry {
    uint64_t key;
    uint32_t native, site; /* site 0: empty */
} pentry;

typedef struct pcache {
    uint64_t serial; /* of the ca_stacks the entries belong to */
    uint8_t next_way[PY_SETS];
    pentry e[PY_SETS][PY_WAYS];
} pcache;

static TLS pcache *tl_py;
static TLS int tl_py_failed;
static TLS uint64_t tl_py_hits, tl_py_builds;
static pthread_key_t py_key;
static pthread_once_t py_once = PTHREAD_ONCE_INIT;

/* At thread exit, as cache_destroy (a pcache is in no list). */
static void py_cache_destroy(void *p) {
    free(p);
    tl_py = NULL;
    tl_py_failed = 1;
}
static void py_key_init(void) { pthread_key_create(&py_key, py_cache_destroy); }

void ca_stacks_python_counts(uint64_t *hits, uint64_t *builds) {
    if (hits) *hits = tl_py_hits;
    if (builds) *builds = tl_py_builds;
}

size_t ca_stacks_thread_python_bytes(void) { return sizeof(pcache); }

static pcache *py_cache(const ca_stacks *s) {
    pcache *pc = tl_py;
    if (__builtin_expect(pc != NULL, 1)) {
        if (pc->serial != s->serial) {
            memset(pc->e, 0, sizeof pc->e);
            pc->serial = s->serial;
        }
        return pc;
    }
    if (tl_py_failed || !(pc = calloc(1, sizeof *pc))) {
        tl_py_failed = 1;
        return NULL;
    }
    pc->serial = s->serial;
    pthread_once(&py_once, py_key_init);
    pthread_setspecific(py_key, pc);
    return tl_py = pc;
}

/* The stack of native frames raw[0..n) (leading frames of our own object
 * included) with the Python frames py[0..np) in place of the interpreter's;
 * CA_SITE_NONE when a Python frame cannot be named. */
static uint32_t intern_python(ca_stacks *s, const uintptr_t *raw, unsigned n, const ca_py_frame *py, unsigned np) {
    unsigned first = skipped(s, raw, n);
    uintptr_t ips[CA_PY_MAX_FRAMES], out[CA_STACK_MAX_FRAMES];
    uint8_t ends[CA_PY_MAX_FRAMES], kind[RAW_MAX];
    for (unsigned i = 0; i < np; i++) {
        if (!(ips[i] = ca_py_frame_ip(&py[i]))) return CA_SITE_NONE;
        ends[i] = py[i].ends_call;
    }
    ca_py_classify(raw + first, n - first, kind);
    unsigned k = ca_py_interleave(raw + first, kind, n - first, ips, ends, np, out, CA_STACK_MAX_FRAMES);
    return intern_n(s, out, k);
}

/* Caches the walk raw[0..n) (slots: where each return address sat) as the
 * stack at `depth`, if every slot is on this stack, above the capture frame
 * ref, in order. Only the frames that decide the site are kept. */
static void cache_put(const ca_stacks *s, tcache *tc, uintptr_t ref, uint32_t depth, uint32_t site,
                      const uintptr_t *raw, const uintptr_t *slots, unsigned n) {
    unsigned first = skipped(s, raw, n);
    unsigned k = first + (n - first < s->max_frames ? n - first : s->max_frames);
    if (!k) return;
    uintptr_t prev = ref;
    for (unsigned i = 0; i < k; i++) {
        if (!slots[i] || slots[i] <= prev || slots[i] + 8 > tc->hi || slots[i] - ref > UINT32_MAX) return;
        prev = slots[i];
    }
    uintptr_t *ip = malloc(k * (sizeof *ip + sizeof(uint32_t)));
    if (!ip) return;
    uint32_t *off = (uint32_t *)(ip + k);
    for (unsigned i = 0; i < k; i++) {
        ip[i] = raw[i];
        off[i] = (uint32_t)(slots[i] - ref);
    }
    unsigned set = set_of(depth);
    unsigned w = tc->next_way[set]++ % CACHE_WAYS;
    centry *e = &tc->e[set][w];
    free(e->ip);
    *e = (centry){.depth = depth, .site = site, .n = k, .ip = ip};
    tc->last_hit[set] = (uint8_t)w;
}

/* The cache check reads the callers' stack words where return addresses sat
 * when the entry was made: memory of live frames, but possibly their
 * sanitizer redzones now. AddressSanitizer is told. */
__attribute__((noinline, no_sanitize_address)) uint32_t ca_stacks_capture(ca_stacks *s) {
    if (!s) return CA_SITE_NONE;
    uintptr_t ref = (uintptr_t)__builtin_frame_address(0);
    uintptr_t raw[RAW_MAX], slots[RAW_MAX];
    uint32_t site = CA_SITE_NONE;
    tcache *tc = USE_CACHE ? thread_cache(s) : NULL;
    uint32_t depth = 0;
    if (tc && ref >= tc->lo && ref < tc->hi) {
        depth = (uint32_t)(tc->hi - ref);
        unsigned set = set_of(depth), first = tc->last_hit[set];
        /* Ways at one depth differ in some frame, often the outermost (one
         * function called from two places): each failed way costs a whole
         * check, so the way that hit last goes first. */
        for (unsigned k = 0; k < CACHE_WAYS; k++) {
            unsigned w = (first + k) % CACHE_WAYS;
            const centry *e = &tc->e[set][w];
            if (e->depth != depth) continue;
            if (same_frames(ref, e)) {
                tl_hits++;
                tc->last_hit[set] = (uint8_t)w;
                site = e->site;
                goto python;
            }
            tl_way_misses++;
        }
    }
    tl_walks++;
    if (s->python) ca_py_recheck(); /* a Python loaded since shows first as a new native stack */
    unsigned max = s->max_frames + 16 < RAW_MAX ? s->max_frames + 16 : RAW_MAX;
    unsigned n = walk(raw, slots, max);
    site = intern_skipping(s, raw, n);
    if (depth && site) cache_put(s, tc, ref, depth, site, raw, slots, n);

python:
    if (!s->python || !site) return site;
    ca_py_frame py[CA_PY_MAX_FRAMES];
    uint64_t ph;
    unsigned np = ca_py_walk(py, CA_PY_MAX_FRAMES, &ph);
    if (!np) return site;
    pcache *pc = py_cache(s);
    uint64_t key = ph ^ (uint64_t)site * 0xC2B2AE3D27D4EB4Full;
    pentry *pset = pc ? pc->e[(key >> 40) & (PY_SETS - 1)] : NULL;
    for (int w2 = 0; pset && w2 < PY_WAYS; w2++)
        if (pset[w2].key == key && pset[w2].native == site && pset[w2].site) {
            tl_py_hits++;
            return pset[w2].site;
        }
    tl_py_builds++;
    unsigned nr = walk(raw, slots, RAW_MAX);
    uint32_t with = intern_python(s, raw, nr, py, np);
    if (!with) return site;
    if (pset) pset[pc->next_way[(key >> 40) & (PY_SETS - 1)]++ % PY_WAYS] = (pentry){key, site, with};
    return with;
}
