/* Which repeating patterns are a training loop's iterations.
 *
 * Period detection (period.h) finds what repeats in the allocations; a
 * training loop repeats, but so do the identical layers of one forward or
 * backward pass and the optimizer's loop over its parameters. An iteration
 * is a period over which memory comes back to its level (apart from what
 * leaks); the judge refuses a candidate, saying what it is instead, when
 *   - climbs (judged only when frames do not say where the periods run): in
 *     most periods the level at the next boundary is higher by more than
 *     half of what the period allocated above its start: the layers of a
 *     forward pass keep what they save for backward. A loop rarely keeps
 *     that much, but one that leaks a whole forward pass of evaluation a
 *     step can (the demo trainer's `--leak eval-grad` on a small model
 *     keeps 89% of its swing); with frames, those are told apart by the
 *     rule on passes below instead;
 *   - falls: in most periods the level drops by more than half of what the
 *     period allocated above its start (the layers of a backward pass free
 *     what forward saved);
 *   - small: the periods' swing (peak above the boundary level, the median
 *     one) is under CA_LOOP_MIN_SWING_SHARE of the largest swing before or
 *     after them (above the level of the boundary before, or of the first
 *     boundary): an inner loop (an optimizer stepping its parameters one by
 *     one) of an iteration whose forward and backward, outside that loop,
 *     make the big swing. A loop's first iteration may peak higher than
 *     the others (work space tried out, state made lazily), but not four
 *     times higher than most;
 *   - inside one pass: with frames, the frames that at least 90% of the
 *     period's allocations share (from the outermost in) include the call of
 *     a torch.nn.Module, an optimizer's step or autograd's backward
 *     (capture/frame_kind.h): a training iteration is never inside one of
 *     those, the layers and parameter loops they run are.
 * Measured on real snapshots and the fixtures (BENCHMARKS.md, issue 17). */
#ifndef CA_LOOPS_H
#define CA_LOOPS_H
#include <stddef.h>
#include <stdint.h>

#include "reports/capture/frame_kind.h"
#include "reports/capture/stacks.h"

#define CA_LOOP_MIN_SWING_SHARE 0.25

typedef enum {
    CA_LOOP_ITERATIONS = 0, /* a loop: memory comes back to its level every period */
    CA_LOOP_CLIMBS,         /* each period keeps most of what it allocates */
    CA_LOOP_FALLS,          /* each period frees more than it allocates */
    CA_LOOP_SMALL,          /* a small share of the window's swing */
    CA_LOOP_INSIDE_PASS,    /* inside one call of a module, an optimizer step, or backward */
} ca_loop_shape;

/* "iterations", "climbs", "falls", "small", "inside_pass" */
const char *ca_loop_shape_name(ca_loop_shape s);

/* What the judge reads: per allocation i of the window (0..n), the bytes
 * allocated just before it and just after it, and its call site (sites NULL
 * when sites are not stacks). */
typedef struct ca_loop_input {
    const uint64_t *level, *after;
    size_t n;
    const uint32_t *sites;
    const ca_stacks *stacks;
} ca_loop_input;

/* The figures the judgement rests on. */
typedef struct ca_loop_figures {
    uint32_t periods;         /* whole periods between the boundaries */
    uint32_t climbing, falling; /* periods that keep (free) more than half their swing */
    uint64_t swing;           /* median peak above a period's starting level */
    int64_t rise;             /* median change of the level over a period */
    uint64_t outside_swing;   /* the largest swing outside the periods (the "small" rule) */
    int framed;               /* the periods' allocations have frames (90% of them) */
    ca_pass_kind pass;        /* the pass the periods run inside (CA_PASS_NONE: none) */
    uintptr_t pass_ip;        /* its frame */
} ca_loop_figures;

/* Judges the candidate with `period` allocations per period and boundaries
 * at[0..nb) (allocation positions, increasing). fig may be NULL. */
ca_loop_shape ca_loop_judge(const ca_loop_input *in, uint32_t period, const size_t *at, size_t nb,
                            ca_loop_figures *fig);

#endif
