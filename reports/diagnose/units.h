/* Checkpointing's units, in the user's terms: the repeated module calls of
 * the forward pass, named by their Python frames ("Block.forward
 * (model.py:40)": 12 calls).
 *
 * Input: the forward pass's allocations in order, each with its call stack
 * (innermost first; named frames, reports/capture/named_frames.h). A unit is
 * a function named `forward` (a module's; "Block.forward" with Python 3.11's
 * qualified names) called at least twice: the outermost such frame, and at
 * that depth the function holding the most bytes. Its calls are told apart
 * by the frames above it (another caller or call line: another call) and by
 * its own line going back (a loop over the modules calls from one line: the
 * next call starts again at the body's first allocating line). Allocations
 * inside one call that repeat (an RNN's timesteps in nn.LSTM's one C++ call,
 * a loop in one layer) are one unit, never several: checkpointing cannot cut
 * between them. */
#ifndef CA_UNITS_H
#define CA_UNITS_H
#include <stddef.h>
#include <stdint.h>

typedef struct ca_unit_stack {
    const uintptr_t *ips; /* innermost first */
    unsigned n;
    uint64_t bytes;
} ca_unit_stack;

#define CA_UNIT_NAME 160

/* call[i]: the unit call allocation i belongs to, from 1 (0: none). Returns
 * the number of calls (>= 2), with the unit's name ("Block.forward
 * (model.py:40)": its first allocating line); 0 when there is none, `why`
 * saying why in a few words; -1 when no stack has a named frame (native
 * stacks: the caller finds blocks otherwise) or memory ran out (*why ""). */
long ca_units_find(const ca_unit_stack *st, size_t n, uint32_t *call, char *name, size_t name_len, char *why,
                   size_t why_len);

/* Does a stack (innermost first) run an op autocast keeps in fp32 (CUDA
 * autocast's float32 list at the Python level: the losses, softmax,
 * log_softmax, layer and group norm)? By named frames' function names. */
int ca_frames_autocast_fp32(const uintptr_t *ips, unsigned n);

#endif
