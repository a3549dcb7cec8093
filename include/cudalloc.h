/* cudalloc's public API, for programs that want to talk to the allocator.
 *
 * Every function is declared weak: a program built with this header runs with
 * or without libcudalloc.so preloaded. Without it the functions are NULL, so
 * call them through the CUDALLOC_CALL macro (or test them yourself):
 *
 *     CUDALLOC_CALL(cudalloc_step);               // an iteration ends here
 *     cudalloc_stats s;
 *     if (CUDALLOC_CALL(cudalloc_get_stats, 0, &s) == 0) ...
 *
 * CUDALLOC_CALL evaluates to -1 when the preload is not there. */
#ifndef CUDALLOC_H
#define CUDALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CUDALLOC_IMPLEMENTATION
#define CUDALLOC_WEAK /* the library defines them */
#else
#define CUDALLOC_WEAK __attribute__((weak))
#endif

/* Figures as PyTorch's torch.cuda.memory_stats() names them ("all" pool). */
typedef struct cudalloc_stats {
    int64_t allocated_bytes, allocated_bytes_peak;
    int64_t reserved_bytes, reserved_bytes_peak;
    int64_t active_bytes, active_bytes_peak;
    int64_t requested_bytes, requested_bytes_peak;
    int64_t allocation, allocation_peak;   /* live allocations (count) */
    int64_t segment, segment_peak;
    int64_t num_alloc_retries, num_ooms;
    int64_t num_device_alloc, num_device_free;
} cudalloc_stats;

/* Statistics of one device's allocator. 0, or -1 for a device never used. */
int cudalloc_get_stats(int device, cudalloc_stats *out) CUDALLOC_WEAK;
/* Give every cached free granule back to the device, on all devices (after
 * waiting for the fences of blocks freed with cudaFree that still wait). 0. */
int cudalloc_empty_cache(void) CUDALLOC_WEAK;
/* Peaks start again from the current figures. 0. */
int cudalloc_reset_peak_stats(void) CUDALLOC_WEAK;
/* An iteration of the training loop ends here (the most trusted marker). 0. */
int cudalloc_step(void) CUDALLOC_WEAK;
/* Iterations seen so far (by cudalloc_step, NVTX "step" ranges, or detection). */
long cudalloc_iteration(void) CUDALLOC_WEAK;
/* Write the reports now (when a report prefix is configured). 0 on success. */
int cudalloc_report(void) CUDALLOC_WEAK;
/* The library's version, as `cudalloc --version` prints it: "0.1.0 (git 1a2b3c4d5e6f)". */
const char *cudalloc_version(void) CUDALLOC_WEAK;

/* Called when a leak becomes sure (event "leak"), when the device it will run
 * out is near ("near"), and when it stops growing ("stopped"), with the
 * finding as a JSON object (keys: event, device, iteration,
 * bytes_per_iteration, growth_since, leaked_bytes, n_sites, oom_iteration,
 * oom_time, title), valid during the call; on the thread that ended the
 * iteration (or cudalloc's own). NULL stops the calls. 0. */
typedef void (*cudalloc_leak_fn)(const char *finding_json, void *ctx);
int cudalloc_on_leak(cudalloc_leak_fn fn, void *ctx) CUDALLOC_WEAK;

/* PyTorch's pluggable allocator (torch.cuda.memory.CUDAPluggableAllocator):
 *   CUDAPluggableAllocator("libcudalloc.so", "cudalloc_torch_malloc", "cudalloc_torch_free") */
void *cudalloc_torch_malloc(size_t size, int device, void *stream) CUDALLOC_WEAK;
void cudalloc_torch_free(void *ptr, size_t size, int device, void *stream) CUDALLOC_WEAK;

#define CUDALLOC_CALL(fn, ...) ((fn) ? (fn)(__VA_ARGS__) : -1)

#ifdef __cplusplus
}
#endif
#endif
