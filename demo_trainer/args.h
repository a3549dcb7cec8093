/* The command line (see usage() in args.c for every flag). */
#ifndef DT_ARGS_H
#define DT_ARGS_H

#include "demo_trainer/common.h"

typedef enum { LEAK_NONE, LEAK_EVAL_GRAD, LEAK_KEEP_OUTPUTS, LEAK_LOSS_TENSOR } dt_leak;
extern const char *const dt_leak_names[4];

typedef struct dt_args {
    int L, C, NH, T, B;         /* layers, channels, heads, sequence, batch (per optimizer step) */
    int steps, steps_given;
    float lr;
    uint64_t seed;
    int accum;                  /* micro-batches per step: micro-batch = B / accum */
    kernels_dtype dt;           /* --precision */
    int checkpoint;
    dt_leak leak;
    int vary_seq;
    int eval_every;
    int print_every;
    const char *device;         /* "cpu", "cuda" or NULL (cuda when a GPU is there) */
    const char *data;           /* NULL: the synthetic corpus */
    int sweep;
    size_t capacity;            /* --capacity, for --sweep */
    const char *json;           /* --json FILE, for --sweep */
    const char *result;         /* --result FILE: one JSON row at exit (sweep children) */
    size_t mem_cap;             /* --mem-cap SIZE: trainer-side capacity (sweep children) */
    double peak_tflops;         /* for MFU; 0: from the device name */
} dt_args;

/* 0: run; 1: --help was printed (exit 0); 2: bad input, one line said why (exit 2). */
int args_parse(dt_args *a, int argc, char **argv);

#endif
