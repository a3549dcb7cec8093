/* Frames that are not native return addresses: Python frames taken from the
 * interpreter, frames read from a PyTorch snapshot. Each distinct (function,
 * file, line, module) gets a value that fits a stack's ip slot, so stacks,
 * site ids, period detection and leak attribution treat them as any frame,
 * and symbolization reads their strings back instead of asking addr2line.
 *
 * The table is one per process and lives as long as it: sites in every
 * tracker (every device) and every report may name its frames. Interning
 * takes a lock; callers on a hot path keep their own cache in front of it. */
#ifndef CA_NAMED_FRAMES_H
#define CA_NAMED_FRAMES_H
#include <stdint.h>

/* Native code addresses are below 2^47 on x86-64 and 2^52 elsewhere: the top
 * bit marks a named frame, the low bits are its index. */
#define CA_NAMED_FRAME_BIT ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))

static inline int ca_ip_is_named(uintptr_t ip) { return (ip & CA_NAMED_FRAME_BIT) != 0; }

/* The ip standing for this frame: the same strings give the same ip. NULL
 * strings count as "??"; module says where the frame comes from ("python",
 * "snapshot"). 0 when memory runs out. Thread-safe. */
uintptr_t ca_named_frame(const char *function, const char *file, unsigned line, const char *module);

/* The strings of a named ip (valid for the life of the process); 0 when ip
 * is not one this table handed out. */
int ca_named_frame_get(uintptr_t ip, const char **function, const char **file, unsigned *line,
                       const char **module);

/* Named frames handed out so far, and the bytes the table holds. */
uint32_t ca_named_frame_count(void);
uint64_t ca_named_frame_memory(void);

/* In a fork child: the lock starts free again. */
void ca_named_frames_fork_child(void);

#endif
