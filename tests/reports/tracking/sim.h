/* Simulated training loops for the tracking tests: events go straight to a
 * tracker, with fake call sites, so each test knows exactly what a healthy
 * loop keeps and what a leak piles up. */
#ifndef CA_TEST_SIM_H
#define CA_TEST_SIM_H
#include <stdlib.h>
#include <string.h>

#include "allocator/allocator.h"
#include "reports/diagnose/leaks.h"
#include "reports/track/tracker.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

typedef struct sim {
    ca_tracker *t;
    uintptr_t next;
    unsigned seed;
} sim;

/* A tracker attached to an allocator is done with: detached, both destroyed. */
static inline void tracked_done(ca_allocator *a, ca_tracker *t) {
    ca_tracker_detach(t, a);
    ca_tracker_destroy(t);
    ca_allocator_destroy(a);
}

static inline ca_tracker *sim_tracker(int detect) {
    ca_tracker_options o;
    ca_tracker_options_default(&o);
    o.detect = detect;
    o.time_is_index = 1;
    return ca_tracker_new(&o);
}

/* Frames of the fake stacks: the training step (under the loop), the
 * evaluation pass (under the loop too: its forward at SIM_EVAL_FORWARD, its
 * batch loaded at SIM_EVAL_LOAD), the loop, main. */
#define SIM_TRAIN_STEP 0x401000u
#define SIM_LOOP 0x402000u
#define SIM_MAIN 0x403000u
#define SIM_EVAL_FORWARD 0x404000u
#define SIM_EVAL_LOAD 0x404100u
#define SIM_EVAL_CALL 0x405000u

/* A fake call stack per site number: sites 80-89 are the evaluation pass's
 * (84 its batch), the others the training step's. */
static inline uint32_t sim_site(ca_tracker *t, unsigned id) {
    uintptr_t ips[4] = {0x400000 + 16 * id, SIM_TRAIN_STEP, SIM_LOOP, SIM_MAIN};
    if (id >= 80 && id < 90) {
        ips[1] = id == 84 ? SIM_EVAL_LOAD : SIM_EVAL_FORWARD;
        ips[2] = SIM_EVAL_CALL;
    }
    return ca_tracker_site(t, ips, 4);
}

static inline size_t sim_round(size_t n) { return (n + 511) & ~(size_t)511; }

static inline uintptr_t sim_alloc(sim *s, size_t size, unsigned site) {
    if (!s->next) s->next = 0x100000000000ull;
    uintptr_t a = s->next;
    s->next += sim_round(size) + 512;
    ca_trace_event ev = {CA_EV_ALLOC, a, sim_round(size), size, 0};
    ca_tracker_record(s->t, &ev, sim_site(s->t, site), 0, 0);
    return a;
}

static inline void sim_free(sim *s, uintptr_t a, size_t size) {
    ca_trace_event ev = {CA_EV_FREE, a, sim_round(size), size, 0};
    ca_tracker_record(s->t, &ev, 0, 0, 0);
}

enum {
    LOOP_MARKS = 1,      /* cudalloc_step() at the end of each iteration */
    LOOP_VARYING = 2,    /* batch shape changes every iteration */
    LOOP_LEAK = 4,       /* one 1 MiB tensor per iteration kept forever */
    LOOP_EVAL_LEAK = 8,  /* a forward's activations (4 sites) kept every iteration */
    LOOP_SCALAR_LEAK = 16, /* one 4-byte tensor per iteration kept */
    LOOP_GROWING = 32,   /* one buffer re-made 64 KiB larger every iteration */
    LOOP_SHAPE_CACHE = 64, /* a 4 KiB entry cached per new shape (64 shapes, drawn at random) */
    LOOP_EVAL_BATCH = 128, /* with LOOP_EVAL_LEAK: the kept graph also holds its 2 KiB batch */
};

/* Sites: 1-10 weights, 20-27 activations, 30 gradient buffers, 31 gradient
 * temporaries, 40 optimizer state (lazy, iteration 1), 50 tensor replaced
 * every iteration, 60 a cache that grows for three iterations then stops,
 * 65 per-shape cache, 70 leak, 80-83 kept activations, 84 kept eval batch,
 * 90 scalar leak, 95 growing buffer. */
typedef struct loop_state {
    uintptr_t kept, cache[8], grads[10], growing;
    unsigned char shape_seen[64];
    size_t kept_size, growing_size;
    int it;
} loop_state;

static inline void loop_setup(sim *s, loop_state *L) {
    memset(L, 0, sizeof *L);
    for (unsigned w = 0; w < 10; w++) sim_alloc(s, 4 * MIB + w * 1024, 1 + w);
}

static inline void loop_iteration(sim *s, loop_state *L, int flags) {
    int it = L->it++;
    size_t batch = flags & LOOP_VARYING ? 1 + (size_t)(rand_r(&s->seed) % 8) : 4;
    uintptr_t act[8];
    for (unsigned k = 0; k < 8; k++) act[k] = sim_alloc(s, batch * 256 * KIB + k * 512, 20 + k);
    if (flags & LOOP_EVAL_LEAK) /* an eval forward whose loss is kept, graph and all */
        for (unsigned k = 0; k < 4; k++) sim_alloc(s, batch * 256 * KIB, 80 + k);
    if (flags & LOOP_EVAL_BATCH) sim_alloc(s, 2 * KIB, 84);
    if (flags & LOOP_SHAPE_CACHE) {
        unsigned shape = (unsigned)(rand_r(&s->seed) % 64);
        if (!L->shape_seen[shape]++) sim_alloc(s, 4 * KIB, 65);
    }
    if (it == 0)
        for (unsigned g = 0; g < 10; g++) L->grads[g] = sim_alloc(s, 4 * MIB + g * 1024, 30);
    for (unsigned k = 8; k-- > 0;) {
        uintptr_t tmp = sim_alloc(s, batch * 128 * KIB, 31);
        sim_free(s, tmp, batch * 128 * KIB);
        sim_free(s, act[k], batch * 256 * KIB + k * 512);
    }
    if (it == 1)
        for (unsigned o = 0; o < 20; o++) sim_alloc(s, 4 * MIB, 40);
    if (L->kept) sim_free(s, L->kept, L->kept_size);
    L->kept_size = batch * 64 * KIB;
    L->kept = sim_alloc(s, L->kept_size, 50);
    if (it < 3) L->cache[it] = sim_alloc(s, 32 * KIB, 60);
    if (flags & LOOP_LEAK) sim_alloc(s, 1 * MIB, 70);
    if (flags & LOOP_SCALAR_LEAK) sim_alloc(s, 4, 90);
    if (flags & LOOP_GROWING) {
        if (L->growing) sim_free(s, L->growing, L->growing_size);
        L->growing_size = (size_t)(it + 1) * 64 * KIB;
        L->growing = sim_alloc(s, L->growing_size, 95);
    }
    if (flags & LOOP_MARKS) ca_tracker_step(s->t, CA_ITER_EXPLICIT);
}

/* Leaks as a report would find them now (no device figures). */
static inline size_t sim_leaks(ca_tracker *t, ca_leak **out, ca_track_snap *snap) {
    ca_track_snap local, *s = snap ? snap : &local;
    if (ca_tracker_snapshot(t, s) != 0) return 0;
    size_t n = ca_leaks_find(s, 0, 0, out);
    if (!snap) ca_track_snap_free(s);
    return n;
}

/* The site number (as sim_site numbers them) of a site id, or -1. */
static inline int sim_site_number(ca_tracker *t, uint32_t site) {
    const uintptr_t *ips;
    if (ca_stacks_get(ca_tracker_stacks(t), site, &ips) != 4) return -1;
    return (int)((ips[0] - 0x400000) / 16);
}

#endif
