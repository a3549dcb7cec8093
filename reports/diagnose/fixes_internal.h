/* Shared by fixes.c (the rules) and fixes_curve.c (the replay of an
 * iteration with a fix's changes). Not for other callers. */
#ifndef CA_FIXES_INTERNAL_H
#define CA_FIXES_INTERNAL_H
#include "reports/diagnose/fixes.h"

enum { FX_SPAN, FX_IN, FX_OUT, FX_TR };       /* across, ends in it, starts in it, inside */
enum { FX_FIXED, FX_SCALED, FX_AMBIGUOUS };   /* with the batch */

typedef struct fx_life {
    uint64_t bytes, birth, death;  /* death may be CA_LIFE_LIVE */
    uint32_t key, group, unit;
    uint8_t cls, scale;
    uint8_t grad;                  /* FX_TR: a gradient freed inside the iteration (zero_grad at its end) */
    uint8_t fp32;                  /* batch-scaled, of the size of what an fp32 op made: stays fp32 (bf16) */
    int32_t block;                 /* checkpointing: the block that drops it, else -1 */
} fx_life;

#define CA_FIX_ALIGNMENTS 8 /* block alignments kept for the range */

/* One alignment of the repeated blocks, for checkpointing. */
typedef struct fx_ckpt {
    size_t n;                   /* blocks */
    uint64_t *end;              /* position of each block's last allocation */
    uint64_t *again;            /* position its forward runs again (backward reaches it) */
    uint64_t *spike_fixed, *spike_scaled; /* that forward's own peak, by kind */
    int32_t *drop;              /* per fx_life: the block that drops it, or -1 */
} fx_ckpt;

typedef struct fx_scen {
    double r;             /* scaled bytes x r (bf16); 1: as recorded */
    int ambiguous_scale;  /* ambiguous bytes scale with the batch */
    int grad_temps;       /* later micro-batches: each new gradient, briefly */
    uint64_t extra;       /* bytes live through the whole iteration (bf16 weight copies) */
    const fx_ckpt *ck;    /* checkpointing, or NULL */
    int no_spike;         /* checkpointing's low end: the recomputed forward's own peak left out */
} fx_scen;

/* The iteration [lo, hi) and its allocations; bwd_end: where its last
 * activation is freed (backward is over): what it keeps from there on (the
 * optimizer's state, an evaluation's results) is made once per step, not
 * once per micro-batch. */
typedef struct fx_iter {
    const fx_life *l;
    size_t n;
    uint64_t lo, hi, bwd_end;
} fx_iter;

/* A replay, sorted: evaluate it for any micro-batch fraction. */
typedef struct fx_curve {
    size_t n;
    struct fx_ev *ev;
} fx_curve;

/* 0, or -1 when memory ran out. later: the second and later micro-batches of
 * an accumulation (kept allocations live from the start, the iteration's
 * carried-in ones gone). */
int fx_curve_build(const fx_iter *it, const fx_scen *s, int later, fx_curve *out);
/* The peak with batch-scaled bytes x f, rounded to bytes, and unrounded. */
uint64_t fx_curve_peak(const fx_curve *c, double f);
double fx_curve_peak_exact(const fx_curve *c, double f);
void fx_curve_free(fx_curve *c);

/* The scenario's peak for micro-batch fraction f (f = 1: no accumulation:
 * the first replay alone). UINT64_MAX when memory ran out. */
uint64_t fx_scen_peak(const fx_iter *it, const fx_scen *s, double f);

#endif
