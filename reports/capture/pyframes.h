/* Python frames in call stacks: which Python function and line made an
 * allocation, in whatever CPython the process runs (libpython3.X.so, or a
 * python executable with the interpreter linked in), found at run time:
 * nothing is built against Python.
 *
 * What is read, and when. Only the calling thread's own frames, through its
 * own thread state (PyGILState_GetThisThreadState), and only by reading
 * memory: no reference count is touched, nothing is allocated by Python, the
 * GIL is never taken. So it works the same whether the thread holds the GIL
 * or has released it around a C call, which is how allocations arrive:
 * PyTorch's operators and ctypes' foreign calls release it before reaching
 * cudaMalloc. That thread's frames cannot change until its call returns.
 * Threads with no Python thread state (PyTorch's C++ workers) have none. The
 * layouts are those of CPython 3.10 to 3.13 (reports/capture/pylayouts.h); other
 * versions, debug and free-threaded builds get no Python frames.
 *
 * Cost on the allocation path: per frame, the code object, the instruction
 * offset and the code's identity (its file and name objects, first line),
 * hashed. Naming a frame ("keep_metric", "train.py", line 12) happens once per
 * distinct (code, offset), at capture time while the frame is alive, through
 * PyCode_Addr2Line, which only reads the code's line table: a report is
 * written at exit, when the code objects may be gone. The names go to the
 * named-frame table (module "python"), so stacks hold them as ips. */
#ifndef CA_PYFRAMES_H
#define CA_PYFRAMES_H
#include <stdint.h>

#define CA_PY_MAX_FRAMES 64   /* Python frames taken per capture, innermost first */
#define CA_PY_MODULE "python" /* the named frames' module */

typedef struct ca_py_frame {
    uintptr_t code;       /* the code object */
    uintptr_t ident;      /* its file and name objects and first line, mixed: a reused address differs */
    int32_t lasti;        /* instruction offset in code units; < 0 before the first */
    uint8_t ends_call;    /* the outermost frame of one C call of the eval loop */
} ca_py_frame;

/* The calling thread's Python frames, innermost first, at most max; 0 when it
 * runs no Python or no supported interpreter is loaded. *hash: of them all.
 * Looks for the interpreter on first use. */
unsigned ca_py_walk(ca_py_frame *out, unsigned max, uint64_t *hash);

/* The named-frame ip of a frame ca_py_walk returned on this thread, before
 * the thread went back to Python (computed once per distinct frame). 0 when
 * it cannot be named. Thread-safe. */
uintptr_t ca_py_frame_ip(const ca_py_frame *f);

/* What native return addresses are to the interpreter: a frame of its eval
 * loop (Python frames go there), another frame of its call machinery
 * (libpython, libffi, ctypes: folded away), or neither. */
enum { CA_PY_NATIVE = 0, CA_PY_EVAL = 1, CA_PY_INTERNAL = 2 };
void ca_py_classify(const uintptr_t *ips, unsigned n, uint8_t *kind);

/* One stack from native frames (with their kinds) and Python frames (named
 * ips, ends_call flags), innermost first: each eval-loop frame is replaced by
 * the Python frames of its call, other interpreter frames are dropped.
 * Python frames whose eval-loop frame was not recognized go after the last
 * one that was (or where the interpreter's frames start, or at the end).
 * More than max frames: native frames just above the first Python frame are
 * left out (the 8 innermost stay), then the outermost frames, so the Python
 * frames survive a deep C++ stack. Returns the frames written (<= max). */
unsigned ca_py_interleave(const uintptr_t *c, const uint8_t *kind, unsigned nc, const uintptr_t *py,
                          const uint8_t *ends_call, unsigned np, uintptr_t *out, unsigned max);

/* While there is no Python: looks again if objects were loaded since (a
 * program may dlopen one later). 15 ns when none were; stack capture calls
 * it on each full native walk, which the first allocation from a newly
 * loaded interpreter always makes (its native stack is new). */
void ca_py_recheck(void);

/* "3.11" when a supported interpreter was found, else NULL; why: the reason
 * ("no Python in this process", "Python 3.9 is not supported", ...). */
const char *ca_py_version(const char **why);

/* In a fork child: the lock starts free again. */
void ca_py_fork_child(void);

#endif
