/* --sweep: the memory techniques side by side on a device of a given capacity.
 *
 * Each configuration (baseline, accum, bf16, checkpoint, all three) runs as a child
 * process of this program, under the same preload, so that an OOM ends that child
 * only. The capacity reaches the child three ways, whichever applies there:
 * CUDALLOC_SIM_MEMORY (the simulated device's size), max_reserved in CUDALLOC_CONF
 * (cudalloc's cap), and --mem-cap (the trainer's own count, used only when neither
 * cudalloc nor the simulated device is there). Each child writes one JSON row
 * (--result); this process prints the table, the measured ratios, and --json. */
#ifndef DT_SWEEP_H
#define DT_SWEEP_H

#include "demo_trainer/train.h"

/* Returns the exit status for main. */
int sweep_run(const dt_args *a);

/* The row a run writes for the sweep (--result), fits "yes" or "OOM at ...". */
void sweep_write_row(const char *path, const dt_args *a, const dt_result *r, const char *fits);

#endif
