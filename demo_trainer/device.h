/* The device the trainer runs on, and every byte it holds there.
 *
 * Three kinds of "device":
 *   - a GPU with the real driver: --device cuda runs the CUDA twin of kernels/;
 *   - the simulated device (simgpu, LD_LIBRARY_PATH=build/sim): device pointers are host
 *     addresses, so --device cpu runs the CPU twin on memory from cudaMalloc;
 *   - no CUDA device at all: --device cpu on plain malloc (host_only), said in one line.
 *
 * Accounting. The trainer counts the bytes it holds by kind, so that it can say what
 * activations cost apart from the weights and the optimizer (the sweep's "activations"
 * column), whether or not cudalloc is preloaded. Peak allocated and reserved, as
 * printed each step, come from cudalloc when it is preloaded (cudalloc_get_stats) and
 * otherwise from this count (allocated) and the device (reserved: total - free from
 * cudaMemGetInfo, sampled where the peak is, at the end of each forward pass, and at
 * the end of each step; not after every allocation, which would slow down the
 * native cudaMalloc run that cudalloc is compared with).
 *
 * A capacity (dev.cap) makes allocations past it fail as an OOM would: the sweep uses
 * it only where neither cudalloc (max_reserved) nor the simulated device
 * (CUDALLOC_SIM_MEMORY) can impose the capacity. */
#ifndef DT_DEVICE_H
#define DT_DEVICE_H

#include "demo_trainer/common.h"

typedef enum {
    MEM_PARAM,      /* fp32 master weights */
    MEM_WCOPY,      /* bf16 copies of the matmul weights (--precision bf16) */
    MEM_GRAD,       /* parameter gradients */
    MEM_OPTIM,      /* AdamW m and v */
    MEM_ACT,        /* activations: op outputs and what ops save for backward */
    MEM_ACTGRAD,    /* gradients of activations, alive during backward */
    MEM_DATA,       /* token batches, scalars */
    MEM_KINDS
} dt_mem_kind;

typedef struct dt_device {
    int host_only;              /* no CUDA device: plain malloc */
    int sim;                    /* the simulated device */
    int preloaded;              /* libcudalloc.so answers cudalloc_get_stats */
    int ordinal;
    char name[256];
    size_t total_mem;           /* device memory, from cudaMemGetInfo */
    const kernels_ops *k;       /* the kernel twin in use */
    kernels_ctx ctx;
    kernels_dtype dt;           /* activations' dtype */

    size_t cap;                 /* trainer-side capacity, 0 = none (see above) */
    size_t bytes[MEM_KINDS], bytes_peak[MEM_KINDS];
    size_t total, total_peak;   /* all kinds */
    size_t transient, transient_peak; /* ACT + ACTGRAD + DATA: what a step allocates */
    size_t device_used_peak;    /* total - free, sampled (dev_sample_usage) */
    uint64_t n_alloc, n_free;

    /* Where the program is, for the OOM line. */
    int step;
    const char *phase;
    /* Called on an allocation failure, before the exit (the sweep's child writes
     * its result row there). */
    void (*on_oom)(const char *site, size_t bytes);
} dt_device;

extern dt_device dev;

/* Pick the device: want "cpu", "cuda" or NULL (cuda when a GPU is there); cuda_ops is
 * kernels_cuda() (NULL in a build without nvcc, and in the unit tests). Returns 0, or
 * -1 after one line on stderr. */
int dev_open(const char *want, kernels_dtype dt, const kernels_ops *cuda_ops);
void dev_close(void);

/* The failure path of an allocation: counts, reports, and (if allocating failed) exits
 * with status 3 after the OOM line. */
void *dev_account(void *p, size_t bytes, dt_mem_kind kind, const char *site, cudaError_t err);
void dev_release(void *p, size_t bytes, dt_mem_kind kind);

/* Allocate `bytes` of device memory right where this is written: a macro, not a
 * function, so that the cudaMalloc call sits in the function that asked for the memory
 * (op_matmul, adamw_state, ...) at the line that asked, and cudalloc's stack of the
 * allocation starts there: that is the call site a leak report names. Returns the
 * pointer (an OOM exits, see dev_account). */
#define DEV_ALLOC(bytes, kind)                                                             \
    ({                                                                                     \
        size_t da_bytes_ = (bytes);                                                        \
        void *da_p_ = NULL;                                                                \
        cudaError_t da_err_;                                                               \
        if (dev.cap && dev.total + da_bytes_ > dev.cap)                                    \
            da_err_ = cudaErrorMemoryAllocation;                                           \
        else if (dev.host_only)                                                            \
            da_err_ = (da_p_ = malloc(da_bytes_ ? da_bytes_ : 1)) ? cudaSuccess            \
                                                                  : cudaErrorMemoryAllocation; \
        else                                                                               \
            da_err_ = cudaMalloc(&da_p_, da_bytes_);                                       \
        dev_account(da_p_, da_bytes_, (kind), __func__, da_err_);                          \
    })

/* Device memory in use (total - free) into device_used_peak, when cudalloc is not
 * there to say what it reserved. */
void dev_sample_usage(void);

void dev_memset0(void *p, size_t bytes);
void dev_upload(void *dst, const void *src, size_t bytes);
void dev_download(void *dst, const void *src, size_t bytes);
void dev_sync(void);

/* Peak allocated and reserved as printed: cudalloc's when preloaded, else ours and
 * the device's. Also the current allocated. */
typedef struct dev_mem_stats {
    size_t allocated, allocated_peak, reserved, reserved_peak;
    int from_cudalloc;
} dev_mem_stats;
void dev_stats(dev_mem_stats *s);

/* Give cached memory back (cudalloc_empty_cache when preloaded; nothing otherwise). */
void dev_empty_cache(void);

#endif
