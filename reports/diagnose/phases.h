/* The phases of a training step, from call stacks: the calls the loop's body
 * makes (the forward call, backward, the optimizer's step), for the peak's
 * breakdown by frame.
 *
 * The loop's frames are the longest run of outermost frames that at least
 * CA_PHASE_SHARE of the step's allocations share (main, train, the loop's
 * body); an allocation's phase is its first frame past them, or, for one
 * that does not run under the loop (weights made before it), the first frame
 * where it leaves them. Stacks are innermost first, as ca_stacks_get gives
 * them; only frame identity (the address) matters, so Python frames and
 * named frames work alike. */
#ifndef CA_PHASES_H
#define CA_PHASES_H
#include <stddef.h>
#include <stdint.h>

#define CA_PHASE_SHARE 0.95
#define CA_PHASE_MAX_DEPTH 256 /* loop frames looked for at most */

typedef struct ca_phase_stack {
    const uintptr_t *ips;  /* innermost first */
    unsigned n;
    uint64_t weight;       /* allocations of the step made here (0: not in the step) */
    int used;              /* give it a phase (an allocation of the breakdown has it); 0: group 0 */
} ca_phase_stack;

typedef struct ca_phase {
    size_t stack;          /* a stack of the phase (index into the input) */
    unsigned frame;        /* its phase frame, counted from the innermost (0) */
} ca_phase;

/* group[i]: the phase of stack i, from 1 (0: a stack with no frames, or not
 * used); phases (at most n) describe each: phases[g - 1]. The cost: the
 * step's stacks sorted once per loop frame, then each used stack against the
 * phases found. Returns the number of phases, or -1 when memory ran out. */
long ca_phases_find(const ca_phase_stack *stacks, size_t n, uint32_t *group, ca_phase *phases);

#endif
