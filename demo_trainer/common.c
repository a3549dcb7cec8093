/* demo_trainer: the error exits, the clock and the random numbers. */
#include "demo_trainer/common.h"

#include <math.h>
#include <stdarg.h>
#include <time.h>

void dt_cuda_check(cudaError_t err, const char *file, int line) {
    if (err == cudaSuccess) return;
    fprintf(stderr, "demo_trainer: CUDA error at %s:%d: %s (%s)\n", file, line, cudaGetErrorString(err),
            cudaGetErrorName(err));
    exit(EXIT_FAILURE);
}

void dt_fatal(const char *file, int line, const char *fmt, ...) {
    fprintf(stderr, "demo_trainer: %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_FAILURE);
}

double dt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dt_rng_seed(dt_rng *r, uint64_t seed) {
    /* splitmix64 of the seed, never 0 */
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    r->s = z ? z : 1;
}

uint32_t dt_rng_u32(dt_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return (uint32_t)((r->s * 0x2545F4914F6CDD1Dull) >> 32);
}

float dt_rng_uniform(dt_rng *r) { return (float)(dt_rng_u32(r) >> 8) / 16777216.0f; }

float dt_rng_normal(dt_rng *r) {
    float u1 = dt_rng_uniform(r), u2 = dt_rng_uniform(r);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}
