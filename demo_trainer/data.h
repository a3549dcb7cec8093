/* Training text as bytes (the vocabulary is the 256 byte values): a built-in
 * synthetic corpus, or any file (--data FILE). The last tenth is the validation split.
 * A batch is B windows of T+1 bytes at random offsets: inputs the first T, targets
 * the last T. */
#ifndef DT_DATA_H
#define DT_DATA_H

#include "demo_trainer/common.h"

typedef struct dt_data {
    unsigned char *bytes;
    size_t n;
    size_t val_start;   /* [0, val_start) train, [val_start, n) validation */
    const char *source; /* "synthetic" or the file name */
} dt_data;

enum { SPLIT_TRAIN, SPLIT_VAL };

/* The synthetic corpus: about 256 KiB of sentences from a small grammar (a few dozen
 * words), the same on every run: a small model learns its spelling and word order
 * within a few dozen steps. */
void data_synthetic(dt_data *d);
/* The bytes of path; 0, or -1 after one line on stderr. Needs room for windows of
 * T+1 bytes in both splits. */
int data_load_file(dt_data *d, const char *path, int T);
void data_free(dt_data *d);

/* inputs and targets (B,T), host int arrays. */
void data_batch(const dt_data *d, int split, dt_rng *rng, int B, int T, int *inputs, int *targets);

#endif
