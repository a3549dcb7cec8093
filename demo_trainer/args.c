/* The command line. Bad input: one line naming what was wrong and what is accepted. */
#include "demo_trainer/args.h"

#include <errno.h>
#include <string.h>

#include "util/version.h"

const char *const dt_leak_names[4] = {"none", "eval-grad", "keep-outputs", "loss-tensor"};

static void usage(FILE *f) {
    fprintf(f,
        "usage: demo_trainer [options]        a GPT-style model trained on bytes, every tensor its own cudaMalloc\n"
        "model and run:\n"
        "  --layers L          transformer blocks (default 2)\n"
        "  --channels C        width (default 64)\n"
        "  --heads NH          attention heads, dividing C (default 4)\n"
        "  --seq T             sequence length (default 64)\n"
        "  --batch B           sequences per optimizer step (default 8)\n"
        "  --steps N           optimizer steps (default 40; 3 per config with --sweep)\n"
        "  --lr X              AdamW learning rate (default 0.003)\n"
        "  --seed N            initialization and batches (default 1337)\n"
        "  --data FILE         train on FILE's bytes (default: a built-in synthetic corpus)\n"
        "  --device cpu|cuda   kernels: cpu runs on the simulated device; default cuda on a GPU\n"
        "  --print-every N     a line every N steps (default 1)\n"
        "memory techniques:\n"
        "  --accum N           N micro-batches of B/N per step, each loss divided by N\n"
        "  --precision fp32|bf16  activations and matmul inputs in bf16 (fp32 master weights, AdamW)\n"
        "  --checkpoint        keep each block's input only; recompute the block in backward\n"
        "retention bugs and allocation patterns:\n"
        "  --leak none|eval-grad|keep-outputs|loss-tensor\n"
        "      eval-grad     validation with grad recording on, val_total = val_total + val_loss\n"
        "      keep-outputs  every step's logits kept in a list\n"
        "      loss-tensor   running_loss = running_loss + loss after backward\n"
        "  --vary-seq          a random sequence length each step (in [T/4, T])\n"
        "  --eval-every N      a validation pass (batch 2B/accum, sequence T/2) every N steps,\n"
        "                      then cudalloc_empty_cache() (default 0: none; eval-grad: 1)\n"
        "sweep:\n"
        "  --sweep             run baseline, accum, bf16, checkpoint and all three, each in a child\n"
        "                      process on a device of --capacity, and print the table\n"
        "  --capacity SIZE     device memory for --sweep, e.g. 64MiB (default: the device's)\n"
        "  --json FILE         the sweep's rows as JSON\n"
        "  --peak-tflops X     the device's peak for MFU (default: known from its name)\n"
        "  --result FILE, --mem-cap SIZE   used by --sweep for its children\n"
        "  --version           print the version and exit\n"
        "  --help              print this help and exit\n");
}

static int bad(const char *flag, const char *value, const char *accepted) {
    fprintf(stderr, "demo_trainer: bad %s '%s': accepted: %s\n", flag, value, accepted);
    return 2;
}

static int parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        char acc[96];
        snprintf(acc, sizeof acc, "an integer from %d to %d", lo, hi);
        return bad(flag, v, acc);
    }
    *out = (int)x;
    return 0;
}

int args_parse(dt_args *a, int argc, char **argv) {
    *a = (dt_args){.L = 2, .C = 64, .NH = 4, .T = 64, .B = 8, .steps = 40, .lr = 3e-3f, .seed = 1337,
                   .accum = 1, .dt = KERNELS_F32, .eval_every = -1, .print_every = 1};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(f, "--version")) {
            ca_print_version("demo_trainer");
            return 1;
        }
        /* flags without a value */
        if (!strcmp(f, "--checkpoint")) { a->checkpoint = 1; continue; }
        if (!strcmp(f, "--vary-seq")) { a->vary_seq = 1; continue; }
        if (!strcmp(f, "--sweep")) { a->sweep = 1; continue; }
        static const char *const with_value[] = {"--layers", "--channels", "--heads", "--seq", "--batch",
            "--steps", "--lr", "--seed", "--accum", "--precision", "--leak", "--eval-every", "--device",
            "--data", "--capacity", "--json", "--result", "--mem-cap", "--print-every", "--peak-tflops"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++) known |= !strcmp(f, with_value[k]);
        if (!known) {
            fprintf(stderr, "demo_trainer: unknown option '%s': accepted: --layers --channels --heads --seq --batch "
                            "--steps --lr --seed --data --device --accum --precision --checkpoint --leak --vary-seq "
                            "--eval-every --print-every --sweep --capacity --json --peak-tflops --version --help\n", f);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "demo_trainer: %s needs a value (see --help)\n", f);
            return 2;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(f, "--layers")) rc = parse_int(f, v, 1, 64, &a->L);
        else if (!strcmp(f, "--channels")) rc = parse_int(f, v, 8, 8192, &a->C);
        else if (!strcmp(f, "--heads")) rc = parse_int(f, v, 1, 128, &a->NH);
        else if (!strcmp(f, "--seq")) rc = parse_int(f, v, 2, 8192, &a->T);
        else if (!strcmp(f, "--batch")) rc = parse_int(f, v, 1, 4096, &a->B);
        else if (!strcmp(f, "--steps")) { rc = parse_int(f, v, 1, 1000000, &a->steps); a->steps_given = 1; }
        else if (!strcmp(f, "--accum")) rc = parse_int(f, v, 1, 4096, &a->accum);
        else if (!strcmp(f, "--eval-every")) rc = parse_int(f, v, 0, 1000000, &a->eval_every);
        else if (!strcmp(f, "--print-every")) rc = parse_int(f, v, 1, 1000000, &a->print_every);
        else if (!strcmp(f, "--seed")) {
            int s;
            rc = parse_int(f, v, 0, 2147483647, &s);
            a->seed = (uint64_t)s;
        } else if (!strcmp(f, "--lr") || !strcmp(f, "--peak-tflops")) {
            char *end;
            double x = strtod(v, &end);
            if (end == v || *end || !(x > 0) || x > 1e6) return bad(f, v, "a positive number, e.g. 0.003");
            if (!strcmp(f, "--lr")) a->lr = (float)x;
            else a->peak_tflops = x;
        } else if (!strcmp(f, "--precision")) {
            if (!strcmp(v, "fp32")) a->dt = KERNELS_F32;
            else if (!strcmp(v, "bf16")) a->dt = KERNELS_BF16;
            else return bad(f, v, "fp32, bf16");
        } else if (!strcmp(f, "--leak")) {
            int found = -1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, dt_leak_names[k])) found = k;
            if (found < 0) return bad(f, v, "none, eval-grad, keep-outputs, loss-tensor");
            a->leak = (dt_leak)found;
        } else if (!strcmp(f, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) return bad(f, v, "cpu, cuda");
            a->device = v;
        } else if (!strcmp(f, "--capacity") || !strcmp(f, "--mem-cap")) {
            size_t s;
            if (ca_parse_size(v, &s) || !s) return bad(f, v, "a size such as 64MiB, 8GiB");
            if (!strcmp(f, "--capacity")) a->capacity = s;
            else a->mem_cap = s;
        } else if (!strcmp(f, "--data")) a->data = v;
        else if (!strcmp(f, "--json")) a->json = v;
        else if (!strcmp(f, "--result")) a->result = v;
        if (rc) return rc;
    }
    if (a->C % a->NH) {
        char v[64];
        snprintf(v, sizeof v, "%d", a->NH);
        char acc[96];
        snprintf(acc, sizeof acc, "a divisor of --channels %d", a->C);
        return bad("--heads", v, acc);
    }
    if (a->B % a->accum) {
        char v[64], acc[96];
        snprintf(v, sizeof v, "%d", a->accum);
        snprintf(acc, sizeof acc, "a divisor of --batch %d (micro-batch = batch / accum)", a->B);
        return bad("--accum", v, acc);
    }
    if (a->eval_every < 0) a->eval_every = a->leak == LEAK_EVAL_GRAD ? 1 : 0;
    if ((a->json || a->capacity) && !a->sweep) {
        fprintf(stderr, "demo_trainer: %s goes with --sweep\n", a->json ? "--json" : "--capacity");
        return 2;
    }
    return 0;
}
