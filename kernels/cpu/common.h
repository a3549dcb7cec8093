/* Shared by the CPU twin: typed loads and stores, the dtype dispatch, checks.
 *
 * Each op is written once as a static always-inline body that takes `dt` and reads and
 * writes tensors through ld()/st(). The public cpu_<op> calls that body with a constant
 * KERNELS_F32 or KERNELS_BF16 (CPU_DISPATCH), so the compiler specialises it twice and
 * the per-element dtype test folds away: the C counterpart of the CUDA twin's template
 * on float / __nv_bfloat16. */
#ifndef KERNELS_CPU_COMMON_H
#define KERNELS_CPU_COMMON_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/bf16.h"
#include "kernels/kernels.h"

#define CPU_INLINE static inline __attribute__((always_inline))

/* Element i of a [dt] tensor, widened to float. */
CPU_INLINE float ld(const void *p, size_t i, kernels_dtype dt) {
    if (dt == KERNELS_BF16)
        return kernels_bf16_to_f32(((const kernels_bf16 *)p)[i]);
    return ((const float *)p)[i];
}

/* Store v into element i of a [dt] tensor (rounded to nearest even for bf16). */
CPU_INLINE void st(void *p, size_t i, float v, kernels_dtype dt) {
    if (dt == KERNELS_BF16)
        ((kernels_bf16 *)p)[i] = kernels_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

/* Call body(args..., dt) with dt as a compile-time constant. */
#define CPU_DISPATCH(dt, body, ...)                                                  \
    do {                                                                             \
        if ((dt) == KERNELS_BF16)                                                    \
            body(__VA_ARGS__, KERNELS_BF16);                                         \
        else if ((dt) == KERNELS_F32)                                                \
            body(__VA_ARGS__, KERNELS_F32);                                          \
        else                                                                         \
            kernels_cpu_fail(__FILE__, __LINE__, "unknown kernels_dtype");           \
    } while (0)

/* A broken precondition is a bug in the caller: say where, and stop. */
#define CPU_REQUIRE(cond)                                                            \
    do {                                                                             \
        if (!(cond))                                                                 \
            kernels_cpu_fail(__FILE__, __LINE__, "requirement failed: " #cond);      \
    } while (0)

__attribute__((noreturn, cold)) static inline void kernels_cpu_fail(const char *file, int line,
                                                                   const char *what) {
    fprintf(stderr, "kernels (cpu): %s:%d: %s\n", file, line, what);
    abort();
}

/* OpenMP is optional (make KERNELS_OMP=1); without it these expand to nothing. */
#ifdef _OPENMP
#define CPU_PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#define CPU_PARALLEL_FOR_DYNAMIC _Pragma("omp parallel for schedule(dynamic, 1)")
#else
#define CPU_PARALLEL_FOR
#define CPU_PARALLEL_FOR_DYNAMIC
#endif

#endif /* KERNELS_CPU_COMMON_H */
