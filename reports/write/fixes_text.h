/* The fixes in words, for the text report, the HTML page, stderr at an OOM
 * and the OOM records' advice (one wording everywhere). */
#ifndef CA_FIXES_TEXT_H
#define CA_FIXES_TEXT_H
#include <stddef.h>

#include "reports/diagnose/fixes.h"

#define CA_FIX_LINE 400
#define CA_FIX_ADVICE_MAX 8
#define CA_FIX_ASSUME_MAX 8

/* "gradient accumulation over 4 micro-batches", "bf16 autocast",
 * "activation checkpointing of 6 blocks", "accumulation over 4
 * micro-batches + bf16 autocast + checkpointing of 6 blocks". */
void ca_fix_label(const ca_fix *f, char *buf, size_t n);

/* "9.34 MiB (8.10 to 9.34 MiB)": the prediction and its range. */
void ca_fix_figures(const ca_fix *f, char *buf, size_t n);

/* What to do when the memory is not there, for this run, against the
 * device's `capacity` bytes: the single fixes predicted to fit, else the
 * combinations that do, each with its predicted peak and how to apply it;
 * the largest micro-batch fraction that fits and how much is missing. When
 * nothing can be predicted (r->have 0), one line says why. Returns the
 * number of lines written into lines (at most max). */
size_t ca_fixes_advice(const ca_fix_report *r, uint64_t capacity, char (*lines)[CA_FIX_LINE], size_t max);

/* What the predictions assume, one line each: what was taken as weights,
 * gradients, optimizer state and activations, and how (call stacks or sizes
 * alone). Returns the number of lines (at most max); 0 when r->have is 0. */
size_t ca_fixes_assumptions(const ca_fix_report *r, char (*lines)[CA_FIX_LINE], size_t max);

#endif
