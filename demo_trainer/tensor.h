/* Device tensors with reference counts, as a framework has them.
 *
 * dt_storage is a device buffer (one cudaMalloc) with a count of its holders: the
 * tensors that view it and the autograd nodes that saved it for backward. It is freed
 * (cudaFree) when the last holder lets go. dt_tensor is a (B,T,C) view of a storage
 * plus grad_fn, the autograd node that made it (NULL for leaves and for anything made
 * with grad recording off). A node saves storage, not tensors (PyTorch's
 * SavedVariable), so a node that saves its own output makes no cycle.
 *
 * Parameters are not tensors here: dt_param holds the fp32 weight, its gradient, the
 * AdamW state and the bf16 copy, all allocated once; ops take them directly and their
 * backward adds into param->grad.
 *
 * Ownership: every function returning a dt_tensor* hands the caller one reference;
 * tensor_release drops it. */
#ifndef DT_TENSOR_H
#define DT_TENSOR_H

#include "demo_trainer/device.h"

typedef struct dt_storage {
    void *ptr;          /* device memory */
    size_t bytes;
    int refs;
    dt_mem_kind kind;
} dt_storage;

struct ag_node;

typedef struct dt_tensor {
    dt_storage *st;
    int refs;
    kernels_dtype dt;
    int B, T, C;            /* shape (B,T,C); a scalar is (1,1,1) */
    size_t numel;
    struct ag_node *grad_fn;
    float item;             /* a scalar's value, also kept on the host */
} dt_tensor;

typedef struct dt_param {
    const char *name;
    int rows, cols;         /* (rows, cols); a vector has rows 1 */
    size_t numel;
    float *w;               /* (rows, cols) fp32 master weight */
    float *grad;            /* (rows, cols) fp32, accumulated by backward */
    float *m, *v;           /* (rows, cols) AdamW moments, made at the first step */
    kernels_bf16 *lp;       /* (rows, cols) bf16 copy, matmul weights in bf16 runs */
} dt_param;

/* Wrap a device buffer of `bytes` (taking the reference the allocation gave). */
dt_storage *storage_wrap(void *ptr, size_t bytes, dt_mem_kind kind);
dt_storage *storage_retain(dt_storage *s);
void storage_release(dt_storage *s);

/* A storage allocated where this is written (see DEV_ALLOC). */
#define STORAGE_NEW(bytes, kind)                                                           \
    ({                                                                                     \
        size_t sn_bytes_ = (bytes);                                                        \
        storage_wrap(DEV_ALLOC(sn_bytes_, (kind)), sn_bytes_, (kind));                     \
    })

/* A tensor on a storage (taking the caller's reference to st). */
dt_tensor *tensor_wrap(dt_storage *st, kernels_dtype dt, int B, int T, int C);
/* A new (B,T,C) tensor of dtype dt, uninitialized, allocated where this is written. */
#define TENSOR_NEW(dt, B, T, C, kind)                                                      \
    ({                                                                                     \
        kernels_dtype tn_dt_ = (dt);                                                       \
        int tn_B_ = (B), tn_T_ = (T), tn_C_ = (C);                                         \
        tensor_wrap(STORAGE_NEW((size_t)tn_B_ * tn_T_ * tn_C_ * kernels_dtype_size(tn_dt_), (kind)), tn_dt_, \
                    tn_B_, tn_T_, tn_C_);                                                  \
    })

dt_tensor *tensor_retain(dt_tensor *t);
void tensor_release(dt_tensor *t);
static inline size_t tensor_bytes(const dt_tensor *t) { return t->numel * kernels_dtype_size(t->dt); }

/* Host-side objects alive (tensors, storages), for the leak measurements. */
extern long dt_live_tensors, dt_live_storages;

#endif
