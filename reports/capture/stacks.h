/* Room capture/: seeing a call site: native stacks, symbols, Python frames, named frames.
 * May include: allocator/, util/ and capture/ alone (it knows nothing of the tracker).
 *
 * Call stacks ("sites"): captured with libunwind on the allocation path,
 * de-duplicated into small ids, symbolized only when a report is written.
 *
 * Capture cost. A full libunwind walk costs about 6 ns a frame (130 ns at 22
 * frames here), which alone would spend the tracker's budget. So each thread
 * keeps a small cache of the stacks it has seen, keyed by the stack depth at
 * the capture point and checked against the stack memory itself: an entry
 * records where each return address sat (as offsets from the capture frame)
 * and its value. If the words at those offsets are those values, the return
 * addresses are the same, and since each frame's layout follows from its
 * return address, so is the stack. Only the frames that make the site are
 * checked (the leading ones of our own object, then max_frames): deeper ones
 * cannot change it. Words are compared, not hashed, so two stacks are never
 * taken for one. A mismatch falls back to the full walk. Only x86-64 uses the
 * cache (the return address is at CFA-8 there); elsewhere every capture walks
 * the stack.
 *
 * Frames of cudalloc itself are left out: when this code lives in a shared
 * object (libcudalloc.so), leading frames inside that object are skipped at
 * capture. Linked statically into a program (tests, tools), nothing is
 * skipped at capture; reports drop leading ca_/cudalloc_ frames by name.
 *
 * Python. When the capturing thread runs Python code (reports/capture/pyframes.h),
 * its Python frames take the place of the interpreter's eval loop in the
 * stack, and the interpreter's other frames (libpython, libffi, ctypes) are
 * left out: cudaMalloc <- [libcudart] <- keep_metric (train.py:12) <- train
 * (train.py:30) <- <module> (train.py:40). A site is then the pair (native
 * stack, Python stack); such stacks keep up to CA_STACK_MAX_FRAMES frames.
 * Each thread caches the pairs it has seen (32 KiB, made on its first Python
 * capture), so a repeated one costs the Python walk and one lookup. */
#ifndef CA_STACKS_H
#define CA_STACKS_H
#include <stddef.h>
#include <stdint.h>

#define CA_STACK_MAX_FRAMES 64   /* most frames kept per stack */
#define CA_SITE_NONE 0u          /* no stack (capture off, failed, or table full) */

typedef struct ca_stacks ca_stacks;

/* max_frames: frames kept per stack, innermost first (1..CA_STACK_MAX_FRAMES). */
ca_stacks *ca_stacks_new(unsigned max_frames);
void ca_stacks_free(ca_stacks *s);

/* The id of the stack of the caller of this function (its own frames and, in
 * a shared object, the leading frames of that object left out). Thread-safe;
 * CA_SITE_NONE when unwinding fails or memory runs out. */
uint32_t ca_stacks_capture(ca_stacks *s);

/* The id of a given stack (innermost first; n may be 0). Ids are dense, from 1.
 * Thread-safe; lookups take no lock. CA_SITE_NONE when out of memory. */
uint32_t ca_stacks_intern(ca_stacks *s, const uintptr_t *ips, unsigned n);

/* The frames of id; returns their number (0 for CA_SITE_NONE or an unknown id). */
unsigned ca_stacks_get(const ca_stacks *s, uint32_t id, const uintptr_t **ips);

/* Ids handed out so far (the largest id). */
uint32_t ca_stacks_count(const ca_stacks *s);

/* Bytes held by the table (records and index; per-thread caches excluded). */
size_t ca_stacks_memory(const ca_stacks *s);

/* Leading frames inside [lo, hi) are skipped at capture (0, 0: none). Set
 * before capturing starts; the default is described above. */
void ca_stacks_set_skip_range(ca_stacks *s, uintptr_t lo, uintptr_t hi);

/* Python frames in captured stacks (default 1); set before capturing starts. */
void ca_stacks_set_python(ca_stacks *s, int on);

/* In a fork child: the table's insert lock starts free again. */
void ca_stacks_fork_child(ca_stacks *s);
/* In a fork child: the per-thread capture caches of the threads that did not
 * come along are freed (once per fork, whatever the tables). */
void ca_stacks_thread_caches_fork_child(void);
/* Does libunwind's one-time set-up now: call while the process has one thread
 * (a library constructor), so no capture races it later. */
void ca_stacks_init_unwinder(void);

/* The calling thread's capture counters: cache hits and full walks. */
void ca_stacks_thread_counts(uint64_t *hits, uint64_t *walks);
/* The calling thread's cached stacks checked in full that did not match
 * (another stack at the same depth): each costs a check of every frame. */
uint64_t ca_stacks_thread_way_misses(void);

/* Bytes of one thread's capture cache (allocated on its first capture); each
 * stack cached in it adds 12 bytes a frame. */
size_t ca_stacks_thread_cache_bytes(void);

/* The calling thread's captures with Python frames: answered by its cache,
 * and built (native walk, naming, interleaving); and that cache's bytes. */
void ca_stacks_python_counts(uint64_t *hits, uint64_t *builds);
size_t ca_stacks_thread_python_bytes(void);

#endif
