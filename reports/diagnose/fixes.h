/* What the peak is made of, and what each memory fix would make of it.
 *
 * Input: every allocation's lifetime (bytes, the positions of its allocation
 * and its free in the run's event order, its key: call site or requested
 * size), the iteration boundaries, and optionally a group per allocation (the
 * phase frame its stack runs under: the forward call, backward, the
 * optimizer's step) for the breakdown by frame. No tracker, no stacks table:
 * the callers (the live report, cudalloc-report) turn their state into this.
 *
 * The analysed iteration is the complete one (between two boundaries) with
 * the highest peak, iteration 0 (setup and first step) only when it is the
 * only complete one. In it, each allocation is one of:
 *   persistent   allocated before the iteration (weights, optimizer state,
 *                gradients kept between steps, last step's gradients);
 *   kept         allocated in it and live past its end (this step's
 *                gradients, lazily made optimizer state, the batch);
 *   activations  allocated in the forward pass, live when backward starts
 *                (the most allocations of the iteration live at once), freed
 *                in the iteration: saved for backward;
 *   temporaries  the rest: freed within the iteration, short-lived.
 * Memory that scales with the batch: activations and temporaries, except
 * those made after the forward pass with the size of some persistent or kept
 * allocation (a weight's gradient, an optimizer temporary): `ambiguous`.
 *
 * Each fix's peak is the peak of the iteration replayed with the fix's
 * changes to the lifetimes (fixes_curve.c):
 *   accumulation k  batch-scaled bytes / k; the first micro-batch as
 *                   recorded, the later ones with every kept allocation live
 *                   from the start and each new gradient added into the kept
 *                   one (a brief temporary of its size). Range: low counts
 *                   the ambiguous bytes as scaling and drops those
 *                   temporaries; high does not.
 *   bf16 autocast   batch-scaled bytes x r: r = 0.5 when every activation is
 *                   stored in 16 bits (low), 0.85 when, as autocast does,
 *                   norms, softmax and residuals stay fp32 and casts are
 *                   saved beside them (high), plus bf16 copies of the weights
 *                   (high: half the weights, taken as a quarter of the
 *                   persistent state: weights, gradients, two Adam moments).
 *                   The prediction is the middle.
 *   checkpointing   the forward pass's repeated blocks (blocks.h); in each,
 *                   what it saved for backward is freed at the block's end
 *                   but its output (the next block's input); when backward
 *                   reaches the block, its forward runs again (its own peak)
 *                   and the saved allocations live again to their frees.
 *                   Range: over the block alignments that fit as well.
 *   combinations    the changes together.
 * With a device size: fits (high <= device: yes; low > device: no; else
 * unknown), the bytes missing, and the largest fraction of the micro-batch
 * with which accumulation alone fits.
 *
 * After an OOM in an iteration that needed more than the analysed one (a
 * longer sequence, a bigger batch), the fixes are predicted for that
 * iteration: its batch-scaled memory taken as (needed - the analysed peak
 * without it) / (its batch-scaled part), a lower bound. */
#ifndef CA_FIXES_H
#define CA_FIXES_H
#include <stddef.h>
#include <stdint.h>

#define CA_LIFE_LIVE UINT64_MAX /* death of an allocation never freed */

typedef struct ca_lifetime {
    uint64_t bytes;
    uint64_t birth;  /* position of its allocation */
    uint64_t death;  /* position of its free (> birth), or CA_LIFE_LIVE */
    uint32_t key;    /* call site, or the site of its requested size: blocks repeat keys */
    uint32_t group;  /* breakdown column (0: none) */
    uint32_t unit;   /* checkpointing: the unit call it is made in, from 1 (units.h; 0: none) */
    uint8_t fp32;    /* made by an op autocast keeps in fp32 (a loss, softmax, a norm; from frames) */
} ca_lifetime;

typedef struct ca_fix_input {
    const ca_lifetime *life;
    size_t n;                /* any order; positions unique */
    const uint64_t *bounds;  /* iteration boundaries: the position each iteration starts at, ascending */
    size_t n_bounds;
    uint32_t n_groups;       /* groups are < n_groups (0 or 1: no breakdown by group) */
    int keys_are_stacks;     /* 1: keys are call stacks; 0: sizes */
    uint64_t capacity;       /* the device's size; 0: unknown */
    uint64_t needed;         /* bytes a failing iteration needed at least (allocated + request at an
                                OOM); 0: none. When above the analysed peak, the fixes are predicted
                                for a batch that much larger (shapes vary from step to step) */
    int start_unseen;        /* allocations made before what the lifetimes show: the first step's order
                                cannot tell weights from state */
    int units_known;         /* 1: checkpoint by units (each lifetime's unit; units.h); 0: look for
                                repeated blocks of keys */
    long n_units;            /* with units_known: the unit's calls (< 2: none, units_why says why) */
    const char *unit_name;   /* "Block.forward (model.py:40)" */
    const char *units_why;
} ca_fix_input;

enum { CA_FIX_ACCUM = 1, CA_FIX_BF16 = 2, CA_FIX_CHECKPOINT = 4 };

/* The bf16 ratio of batch-scaled bytes: all in 16 bits, and autocast's mix. */
#define CA_BF16_LOW 0.5
#define CA_BF16_HIGH 0.85

typedef struct ca_fix {
    unsigned kinds;       /* CA_FIX_* */
    unsigned factor;      /* accumulation's micro-batches (0: none) */
    unsigned blocks;      /* checkpointed blocks (0: none) */
    uint64_t predicted, low, high;
    int fits;             /* 1, 0, -1: unknown (no device size, or it lies in the range) */
} ca_fix;

typedef struct ca_breakdown {
    uint64_t persistent, kept, activations, temporaries; /* at the peak; they sum to it */
    uint64_t kept_after_peak;  /* kept allocations made after the peak (not in it) */
} ca_breakdown;

/* What the persistent memory was taken for, by the order of the first
 * step's phases (weights before its forward pass; gradients and optimizer
 * state after it) and the analysed iteration's lifetimes (gradients). */
typedef struct ca_roles {
    uint64_t weights;     /* kept from before the first forward pass: weights, buffers, data kept */
    uint64_t gradients;   /* made in backward with a weight's size, live to the step (0 when zeroed in place) */
    uint64_t optimizer;   /* made by the first step after its forward pass and kept: optimizer state */
    uint64_t later;       /* persistent, made after the first step (caches made late, a leak) */
    int grads_in_place;   /* gradients kept from step to step (zeroed in place): counted in optimizer */
    int grads_freed;      /* gradients freed inside the iteration (zero_grad after the step), else kept to the next */
    int from_setup;       /* 1: weights from the first step's order; 0: it was not seen, a quarter of the state */
    int from_frames;      /* 1: allocations told apart by call stacks; 0: by sizes alone */
} ca_roles;

#define CA_FIX_MAX 12
#define CA_FIX_WHY 200

typedef struct ca_fix_report { /* (struct tag used by reports/report.h) */
    int have;                 /* 0: nothing could be predicted; why says why */
    char why[CA_FIX_WHY];
    uint32_t iteration;       /* the iteration analysed */
    uint64_t peak;            /* its peak (bytes) */
    uint64_t peak_position, forward_end; /* positions */
    ca_breakdown total;
    ca_breakdown *by_group;   /* n_groups entries (NULL when n_groups < 2) */
    uint32_t n_groups;
    /* Filled by ca_fixes_from_track (fixes_track.h): group g's phase frame is
     * frame group_frame[g] (from the innermost) of site group_site[g]. */
    uint32_t *group_site;
    unsigned *group_frame;
    uint64_t scaled_bytes;    /* at the peak: what scales with the batch */
    uint64_t ambiguous_bytes; /* at the peak: in-iteration allocations of a persistent size */
    uint64_t weight_bytes;    /* the estimate bf16 copies are half of */
    uint64_t fp32_bytes;      /* at the peak: batch-scaled bytes taken to stay fp32 under autocast */
    ca_roles roles;

    ca_fix fix[CA_FIX_MAX];
    size_t n_fix;
    unsigned blocks;           /* repeated blocks of the forward pass (0: none) */
    uint64_t block_saved_bytes, block_input_bytes; /* per block: saved for backward, kept by checkpointing */
    char checkpoint_why[CA_FIX_WHY]; /* "" or why checkpointing has no prediction ("no repeated blocks ...") */
    char unit_name[160];       /* the unit checkpointed ("Block.forward (model.py:40)"); "": repeated blocks of
                                  call sites or sizes */
    int blocks_by_sizes;       /* the blocks are a stretch of sizes repeated (no call stacks) */

    uint64_t leaked;           /* bytes a leak piled up, left out: the predictions are of the run without it */
    uint64_t needed;           /* the failing iteration's need, when above the peak (else 0) */
    double batch_scale;        /* the fixes are for the batch-scaled memory x this (1, or > 1 with needed) */
    uint64_t capacity;         /* 0: unknown, and the three below mean nothing */
    uint64_t missing;          /* peak - capacity, 0 when it fits */
    double micro_fraction;     /* largest micro-batch fraction with which accumulation fits (1: as it is; 0: none) */
    uint64_t unscaled_peak;    /* accumulation's limit: the peak with the batch-scaled bytes gone */
} ca_fix_report;

/* Fills *out (ca_fix_report_free releases it). 0, or -1 when memory ran out
 * (out->have 0, why says so). */
int ca_fixes_predict(const ca_fix_input *in, ca_fix_report *out);
void ca_fix_report_free(ca_fix_report *r);

/* "accumulation", "bf16", "checkpointing", "accumulation+bf16", ...: the
 * JSON name of a fix's kinds. */
const char *ca_fix_name(unsigned kinds);

#endif
