/* The device, memory accounting and the few CUDA runtime calls the trainer makes
 * outside kernels/ (see device.h). */
#define _GNU_SOURCE
#include "demo_trainer/device.h"

#include <dlfcn.h>
#include <string.h>

#include "include/cudalloc.h"

dt_device dev;

static const char *kind_name[MEM_KINDS] = {"params", "bf16 weights", "grads", "optimizer", "activations",
                                           "activation grads", "data"};

/* The simulated libcuda.so.1 exports simgpu_counters; the real driver does not. */
static int on_simulated_device(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int sim = h && dlsym(h, "simgpu_counters");
    if (h) dlclose(h);
    return sim;
}

int dev_open(const char *want, kernels_dtype dt, const kernels_ops *cuda_ops) {
    memset(&dev, 0, sizeof dev);
    dev.dt = dt;
    dev.phase = "setup";
    dev.preloaded = cudalloc_get_stats != NULL;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        if (want && !strcmp(want, "cuda")) {
            fprintf(stderr, "demo_trainer: --device cuda: no CUDA device here; accepted here: --device cpu\n");
            return -1;
        }
        dev.host_only = 1;
        snprintf(dev.name, sizeof dev.name, "host memory (no CUDA device)");
        fprintf(stderr, "demo_trainer: no CUDA device: tensors live in host memory (run under `cudalloc run` "
                        "for the simulated device)\n");
        dev.k = kernels_cpu();
        return dev.k->init(&dev.ctx, NULL);
    }
    cudaCheck(cudaSetDevice(0));
    cudaCheck(cudaGetDevice(&dev.ordinal));
    struct cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, dev.ordinal));
    snprintf(dev.name, sizeof dev.name, "%s", prop.name);
    size_t free_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &dev.total_mem));
    dev.sim = on_simulated_device();

    int use_cuda;
    if (!want)
        use_cuda = !dev.sim;
    else
        use_cuda = !strcmp(want, "cuda");
    if (use_cuda && dev.sim) {
        fprintf(stderr, "demo_trainer: --device cuda: the simulated device cannot run CUDA kernels; "
                        "accepted here: --device cpu\n");
        return -1;
    }
    if (use_cuda && !cuda_ops) {
        fprintf(stderr, "demo_trainer: --device cuda: this build has no CUDA kernels (no nvcc at build time); "
                        "rebuild with nvcc\n");
        return -1;
    }
    if (!use_cuda && !dev.sim) {
        fprintf(stderr, "demo_trainer: --device cpu: the CPU kernels need device memory the CPU can read: run on "
                        "the simulated device (cudalloc run --sim SIZE) or use --device cuda\n");
        return -1;
    }
    dev.k = use_cuda ? cuda_ops : kernels_cpu();
    if (dev.k->init(&dev.ctx, NULL) != 0) {
        fprintf(stderr, "demo_trainer: cannot set up the %s kernels (see above)\n", dev.k->name);
        return -1;
    }
    return 0;
}

void dev_close(void) {
    if (dev.k) dev.k->destroy(&dev.ctx);
    dev.k = NULL;
}

static int transient_kind(dt_mem_kind k) { return k == MEM_ACT || k == MEM_ACTGRAD || k == MEM_DATA; }

void *dev_account(void *p, size_t bytes, dt_mem_kind kind, const char *site, cudaError_t err) {
    if (err != cudaSuccess || (!p && bytes)) {
        if (!dev.host_only) cudaGetLastError(); /* the failed cudaMalloc's error, consumed */
        fprintf(stderr,
                "demo_trainer: out of memory: %s asked for %s at step %d (%s) holding %s "
                "(activations %s, params+grads+optimizer %s)%s\n",
                site, SZ(bytes), dev.step, dev.phase ? dev.phase : "?", SZ(dev.total), SZ(dev.transient),
                SZ(dev.total - dev.transient), dev.cap ? ", trainer-side capacity" : "");
        if (dev.on_oom) dev.on_oom(site, bytes);
        exit(3);
    }
    dev.bytes[kind] += bytes;
    if (dev.bytes[kind] > dev.bytes_peak[kind]) dev.bytes_peak[kind] = dev.bytes[kind];
    dev.total += bytes;
    if (dev.total > dev.total_peak) dev.total_peak = dev.total;
    if (transient_kind(kind)) {
        dev.transient += bytes;
        if (dev.transient > dev.transient_peak) dev.transient_peak = dev.transient;
    }
    dev.n_alloc++;
    return p;
}

void dev_sample_usage(void) {
    if (dev.preloaded || dev.host_only) return;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && total_b - free_b > dev.device_used_peak)
        dev.device_used_peak = total_b - free_b;
}

void dev_release(void *p, size_t bytes, dt_mem_kind kind) {
    if (!p) return;
    if (dev.host_only)
        free(p);
    else
        cudaCheck(cudaFree(p));
    if (dev.bytes[kind] < bytes || dev.total < bytes) DT_FATAL("freeing more %s than held", kind_name[kind]);
    dev.bytes[kind] -= bytes;
    dev.total -= bytes;
    if (transient_kind(kind)) dev.transient -= bytes;
    dev.n_free++;
}

void dev_memset0(void *p, size_t bytes) {
    if (dev.host_only)
        memset(p, 0, bytes);
    else
        cudaCheck(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)dev.ctx.stream));
}

void dev_upload(void *dst, const void *src, size_t bytes) {
    if (dev.host_only)
        memcpy(dst, src, bytes);
    else
        cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void dev_download(void *dst, const void *src, size_t bytes) {
    if (dev.host_only)
        memcpy(dst, src, bytes);
    else
        cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void dev_sync(void) {
    if (!dev.host_only) cudaCheck(cudaDeviceSynchronize());
}

void dev_stats(dev_mem_stats *s) {
    memset(s, 0, sizeof *s);
    cudalloc_stats cs;
    if (dev.preloaded && CUDALLOC_CALL(cudalloc_get_stats, dev.ordinal, &cs) == 0) {
        s->allocated = (size_t)cs.allocated_bytes;
        s->allocated_peak = (size_t)cs.allocated_bytes_peak;
        s->reserved = (size_t)cs.reserved_bytes;
        s->reserved_peak = (size_t)cs.reserved_bytes_peak;
        s->from_cudalloc = 1;
        return;
    }
    s->allocated = dev.total;
    s->allocated_peak = dev.total_peak;
    if (!dev.host_only) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) s->reserved = total_b - free_b;
    } else {
        s->reserved = dev.total;
    }
    /* sampled, so it may miss the moment of the peak: never below what was allocated */
    s->reserved_peak = dev.device_used_peak > s->reserved ? dev.device_used_peak : s->reserved;
    if (s->reserved_peak < dev.total_peak) s->reserved_peak = dev.total_peak;
}

void dev_empty_cache(void) { CUDALLOC_CALL(cudalloc_empty_cache); }
