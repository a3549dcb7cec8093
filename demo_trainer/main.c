/* demo_trainer: a GPT-style model trained on bytes, allocating and freeing each tensor
 * as a framework does, with the memory techniques (gradient accumulation, bf16,
 * activation checkpointing), planted retention bugs, and its own measurements. See
 * demo_trainer/README.md. */
#include <string.h>

#include "demo_trainer/sweep.h"

static const dt_args *g_args;

/* A sweep child that runs out of memory still reports its row. */
static void oom_row(const char *site, size_t bytes) {
    if (!g_args || !g_args->result) return;
    char fits[160];
    snprintf(fits, sizeof fits, "OOM at %s (%s, step %d %s)", site, SZ(bytes), dev.step, dev.phase);
    dev_mem_stats s;
    dev_stats(&s);
    dt_result r = {.peak_allocated = s.allocated_peak, .peak_reserved = s.reserved_peak,
                   .peak_activations = dev.transient_peak,
                   .persistent = dev.bytes[MEM_PARAM] + dev.bytes[MEM_WCOPY] + dev.bytes[MEM_GRAD] + dev.bytes[MEM_OPTIM]};
    sweep_write_row(g_args->result, g_args, &r, fits);
}

int main(int argc, char **argv) {
    dt_args a;
    int rc = args_parse(&a, argc, argv);
    if (rc == 1) return 0;
    if (rc) return 2;
    if (a.sweep) return sweep_run(&a); /* before any CUDA call: the children use the device */

    dt_data data;
    if (a.data) {
        if (data_load_file(&data, a.data, a.T) != 0) return 2;
    } else {
        data_synthetic(&data);
    }
    if (dev_open(a.device, a.dt, kernels_cuda()) != 0) return 2;
    if (!strcmp(dev.k->name, "cuda") && a.C / a.NH > 128) {
        fprintf(stderr, "demo_trainer: bad --heads '%d' on the GPU: accepted: heads of at most 128 channels "
                        "(--heads >= %d for --channels %d)\n", a.NH, (a.C + 127) / 128, a.C);
        return 2;
    }
    if (a.mem_cap && !dev.preloaded && !dev.sim) dev.cap = a.mem_cap;
    g_args = &a;
    dev.on_oom = oom_row;

    gpt_config cfg = {.V = 256, .maxT = a.T, .L = a.L, .NH = a.NH, .C = a.C};
    gpt m;
    gpt_init(&m, cfg, a.seed);
    m.checkpoint = a.checkpoint;
    printf("demo_trainer: %d layers, %d channels, %d heads, seq %d, vocab 256: %.2fM parameters; batch %d = %d x %d "
           "micro-batch; %s%s; leak %s; data %s (%zu bytes)\n",
           a.L, a.C, a.NH, a.T, (double)m.num_parameters / 1e6, a.B, a.accum, a.B / a.accum,
           a.dt == KERNELS_BF16 ? "bf16" : "fp32", a.checkpoint ? ", checkpointing" : "", dt_leak_names[a.leak],
           data.source, data.n);
    printf("demo_trainer: device %s, %s kernels; memory figures from %s\n", dev.name, dev.k->name,
           dev.preloaded ? "cudalloc" : dev.host_only ? "the trainer's count" : "the trainer's count and cudaMemGetInfo");
    fflush(stdout);

    dt_result r = {0}; /* train_run keeps its trace pointers: none here */
    dt_leaks leaks;
    train_run(&a, &data, &m, &r, &leaks);
    if (a.result) sweep_write_row(a.result, &a, &r, "yes");
    /* No teardown: like a Python process, exit with what is held (the leaks included),
     * so cudalloc's exit report sees them live. */
    return 0;
}
