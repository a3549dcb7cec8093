/* demo_trainer: what every file needs. The CUDA error macro (llm.c's cudaCheck, with
 * file and line), sizes printed the way the reports print them, and the fatal exit. */
#ifndef DT_COMMON_H
#define DT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "kernels/kernels.h"
#include "util/size.h"

/* Every CUDA call goes through this: on an error, say which call failed where, and stop. */
#define cudaCheck(err) dt_cuda_check((err), __FILE__, __LINE__)
void dt_cuda_check(cudaError_t err, const char *file, int line);

/* An internal error (a bug, not bad input): file:line and the message, exit 1. */
#define DT_FATAL(...) dt_fatal(__FILE__, __LINE__, __VA_ARGS__)
__attribute__((noreturn, format(printf, 3, 4))) void dt_fatal(const char *file, int line, const char *fmt, ...);

/* Keeps a function's frame in the stacks cudalloc records (a static function called
 * once would be inlined into its caller, and the call site would lose its name). */
#define DT_NOINLINE __attribute__((noinline))

/* "12.50 MiB" in a compound literal: printf("%s", SZ(bytes)). */
#define SZ(x) ca_format_size((size_t)(x), (char[CA_SIZE_BUF]){0}, CA_SIZE_BUF)

/* Seconds on the monotonic clock. */
double dt_now(void);

/* Deterministic random numbers (xorshift64*), one state per use. */
typedef struct dt_rng {
    uint64_t s;
} dt_rng;
void dt_rng_seed(dt_rng *r, uint64_t seed);
uint32_t dt_rng_u32(dt_rng *r);
float dt_rng_uniform(dt_rng *r);            /* [0, 1) */
float dt_rng_normal(dt_rng *r);             /* N(0, 1), Box-Muller */

#endif
