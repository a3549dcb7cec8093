/* The fixes in words (see fixes_text.h). */
#include "reports/write/fixes_text.h"

#include "reports/write/fixes_out.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "reports/write/fmt.h"

static const char *sz(double bytes, char *buf) {
    ca_fmt_bytes(buf, 32, bytes);
    return buf;
}

void ca_fix_label(const ca_fix *f, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = '\0';
#define PUT(...) (k += (size_t)snprintf(buf + k, k < n ? n - k : 0, __VA_ARGS__), k = k < n ? k : n)
    int single = !(f->kinds & (f->kinds - 1));
    if (f->kinds & CA_FIX_ACCUM) PUT("%saccumulation over %u micro-batches", single ? "gradient " : "", f->factor);
    if (f->kinds & CA_FIX_BF16) PUT("%sbf16 autocast", k ? " + " : "");
    if (f->kinds & CA_FIX_CHECKPOINT) PUT("%scheckpointing of %u blocks", k ? " + " : single ? "activation " : "", f->blocks);
#undef PUT
}

void ca_fix_figures(const ca_fix *f, char *buf, size_t n) {
    char a[32], b[32], c[32];
    if (!strcmp(sz((double)f->low, b), sz((double)f->high, c)))
        snprintf(buf, n, "%s", sz((double)f->predicted, a));
    else
        snprintf(buf, n, "%s (%s to %s)", sz((double)f->predicted, a), sz((double)f->low, b), sz((double)f->high, c));
}

/* How to apply it, for the advice. */
static void how(const ca_fix *f, const ca_fix_report *r, char *buf, size_t n) {
    switch (f->kinds) {
    case CA_FIX_ACCUM:
        snprintf(buf, n, " (micro-batches of 1/%u of the batch, each loss divided by %u, one optimizer step)", f->factor,
                 f->factor);
        break;
    case CA_FIX_BF16: snprintf(buf, n, " (torch.autocast(device_type='cuda', dtype=torch.bfloat16) around the forward)"); break;
    case CA_FIX_CHECKPOINT:
        if (r->unit_name[0]) snprintf(buf, n, " (torch.utils.checkpoint around each call of %s)", r->unit_name);
        else snprintf(buf, n, " (torch.utils.checkpoint around each repeated block)");
        break;
    default: buf[0] = '\0';
    }
}

static void line(char (*lines)[CA_FIX_LINE], size_t *k, size_t max, const char *fmt, ...) {
    if (*k >= max) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lines[*k], CA_FIX_LINE, fmt, ap);
    va_end(ap);
    (*k)++;
}

static void fix_line(char (*lines)[CA_FIX_LINE], size_t *k, size_t max, const ca_fix *f, const ca_fix_report *r,
                     uint64_t cap) {
    char label[128], fig[128], c[32], h[256];
    ca_fix_label(f, label, sizeof label);
    ca_fix_figures(f, fig, sizeof fig);
    how(f, r, h, sizeof h);
    const char *fits = !cap ? "" : f->fits == 1 ? ", fits in " : f->fits == 0 ? ", does not fit in " : ", may fit in ";
    line(lines, k, max, "%s%s: predicted peak %s%s%s.", label, h, fig, fits, cap ? sz((double)cap, c) : "");
}

size_t ca_fixes_advice(const ca_fix_report *r, uint64_t cap, char (*lines)[CA_FIX_LINE], size_t max) {
    size_t k = 0;
    char a[32], b[32], c[32], d[32];
    if (!r->have) {
        line(lines, &k, max, "No fix can be predicted for this run: %s.", r->why);
        return k;
    }
    if (r->leaked)
        line(lines, &k, max,
             "Predicted for the run without its leak (%s piled up by the end, left out): fix the leak first; with "
             "it, no fix fits for long.", sz((double)r->leaked, a));
    if (r->needed > r->peak)
        line(lines, &k, max,
             "The failing iteration needed at least %s, more than iteration %u's peak of %s: the predictions below "
             "take its batch-scaled memory as %.2f times iteration %u's (at least).",
             sz((double)r->needed, a), r->iteration, sz((double)r->peak, b), r->batch_scale, r->iteration);
    /* the single fixes that fit (accumulation: the fewest micro-batches), else
     * the combinations that do, else the lowest of all */
    const ca_fix *pick[CA_FIX_MAX];
    size_t np = 0;
    unsigned seen = 0;
    for (int pass = 0; pass < 2 && !np; pass++)
        for (size_t i = 0; i < r->n_fix; i++) {
            const ca_fix *f = &r->fix[i];
            int single = !(f->kinds & (f->kinds - 1));
            if (single != !pass || (seen & f->kinds && single)) continue;
            if (cap && f->predicted > cap) continue;
            if (!cap && f->kinds == CA_FIX_ACCUM && f->factor != 4) continue; /* no device: one of each */
            if (!cap && !single) continue;
            pick[np++] = f;
            seen |= f->kinds;
        }
    if (cap && !np) {
        const ca_fix *low = NULL;
        for (size_t i = 0; i < r->n_fix; i++)
            if (!low || r->fix[i].predicted < low->predicted) low = &r->fix[i];
        if (low) {
            char label[128];
            ca_fix_label(low, label, sizeof label);
            line(lines, &k, max, "No fix alone or together is predicted to fit in %s: the lowest, %s, peaks at %s.",
                 sz((double)cap, a), label, sz((double)low->predicted, b));
        }
    }
    for (size_t i = 0; i < np; i++) fix_line(lines, &k, max, pick[i], r, cap);
    if (r->checkpoint_why[0]) line(lines, &k, max, "Checkpointing cannot be predicted: %s.", r->checkpoint_why);
    if (cap && r->missing) {
        char what[96];
        if (r->needed > r->peak) snprintf(what, sizeof what, "The failing iteration needed at least %s", sz((double)r->needed, a));
        else snprintf(what, sizeof what, "Iteration %u peaked at %s", r->iteration, sz((double)r->peak, a));
        if (r->micro_fraction > 0 && r->micro_fraction < 1) {
            unsigned kk = 1;
            while (kk < 1024 && 1.0 / kk > r->micro_fraction) kk++;
            line(lines, &k, max,
                 "%s, %s more than the device's %s; accumulation alone fits with micro-batches of up to %.2f of the "
                 "batch (%u or more of them).",
                 what, sz((double)r->missing, b), sz((double)cap, c), floor(r->micro_fraction * 100) / 100, kk);
        } else {
            line(lines, &k, max,
                 "%s, %s more than the device's %s; no micro-batch fits: what does not scale with the batch "
                 "(weights, optimizer state, gradients) alone peaks at %s.",
                 what, sz((double)r->missing, b), sz((double)cap, c), sz((double)r->unscaled_peak, d));
        }
    }
    return k;
}

size_t ca_fixes_assumptions(const ca_fix_report *r, char (*lines)[CA_FIX_LINE], size_t max) {
    size_t k = 0;
    char a[32], b[32];
    const ca_roles *x = &r->roles;
    if (!r->have) return 0;
    if (x->from_setup)
        line(lines, &k, max, "Weights: %s, kept from before the first forward pass (with buffers and data kept).",
             sz((double)x->weights, a));
    else
        line(lines, &k, max, "Weights: %s, taken as a quarter of the state kept from the first step (weights, "
             "gradients, two Adam moments): the first step was not seen.", sz((double)r->weight_bytes, a));
    if (x->grads_in_place)
        line(lines, &k, max, "Gradients: kept from step to step (zeroed in place), counted with the optimizer "
             "state below.");
    else if (x->gradients)
        line(lines, &k, max, "Gradients: %s, made in backward with a weight's size and %s; with accumulation "
             "they live from the first micro-batch's backward to the step.", sz((double)x->gradients, a),
             x->grads_freed ? "freed after the step (zero_grad at the end)" : "kept to the next iteration");
    else
        line(lines, &k, max, "Gradients: none told apart from other memory.");
    if (x->from_setup)
        line(lines, &k, max, "Optimizer state%s: %s, made by the first step after its forward pass and kept.",
             x->grads_in_place ? " and gradients" : "", sz((double)x->optimizer, a));
    if (x->later)
        line(lines, &k, max, "Made after the first step and kept: %s (caches made late, or a leak).",
             sz((double)x->later, a));
    line(lines, &k, max, "Activations: %s saved for backward at the peak; they and the temporaries (%s at the "
         "peak) scale with the batch. Roles are told by when each allocation is made and freed in the step%s.",
         sz((double)r->total.activations, a), sz((double)r->total.temporaries, b),
         x->from_frames ? "; call stacks name the units and the fp32 ops" : ", and sizes (no call stacks)");
    if (r->fp32_bytes)
        line(lines, &k, max, "bf16: %s at the peak stays fp32 under autocast (made by a loss, softmax or a norm, "
             "by their frames, and backward's allocations of their sizes).", sz((double)r->fp32_bytes, a));
    if (r->blocks && r->unit_name[0])
        line(lines, &k, max, "Checkpointing: each call of %s, %u of them (the module calls of the forward pass, "
             "by their frames).", r->unit_name, r->blocks);
    else if (r->blocks)
        line(lines, &k, max, "Checkpointing: %u blocks, a stretch of %s repeated in the forward pass%s.", r->blocks,
             r->blocks_by_sizes ? "allocation sizes" : "call sites",
             r->blocks_by_sizes ? " (sizes alone cannot tell module calls from steps inside one layer, an RNN's "
                                  "timesteps: record with Python frames to be sure)" : "");
    return k;
}

/* ---- the text report's section ---- */

static void part(FILE *f, const char *what, uint64_t bytes, const char *note) {
    char b[32];
    fprintf(f, "    %-13s %10s  %s\n", what, sz((double)bytes, b), note);
}

int ca_fixes_txt(FILE *f, const ca_fix_report *r, const char *const *names) {
    char a[32], b[32], c[32], d[32];
    fprintf(f, "What would fit\n");
    if (!r->have) {
        fprintf(f, "  No fix can be predicted for this run: %s.\n\n", r->why);
        return ferror(f) ? -1 : 0;
    }
    fprintf(f, "  The peak of iteration %u, %s, is made of:\n", r->iteration, sz((double)r->peak, a));
    part(f, "persistent", r->total.persistent, "allocated before the iteration: weights, optimizer state, gradients kept");
    part(f, "kept", r->total.kept, "allocated in it, live to the step or past: this step's gradients, state");
    part(f, "activations", r->total.activations, "saved in the forward pass for backward");
    part(f, "temporaries", r->total.temporaries, "short-lived");
    if (r->total.kept_after_peak)
        fprintf(f, "    and %s kept after the peak (with accumulation, live at every micro-batch's peak)\n",
                sz((double)r->total.kept_after_peak, a));
    int any = 0;
    for (uint32_t g = 1; g < r->n_groups; g++) {
        const ca_breakdown *x = &r->by_group[g];
        if (!x->persistent && !x->kept && !x->activations && !x->temporaries) continue;
        if (!any++) fprintf(f, "  By frame:\n");
        fprintf(f, "    %s:", names && names[g] ? names[g] : "unknown frame");
        const char *sep = " ";
        if (x->persistent) fprintf(f, "%spersistent %s", sep, sz((double)x->persistent, a)), sep = ", ";
        if (x->kept) fprintf(f, "%skept %s", sep, sz((double)x->kept, b)), sep = ", ";
        if (x->activations) fprintf(f, "%sactivations %s", sep, sz((double)x->activations, c)), sep = ", ";
        if (x->temporaries) fprintf(f, "%stemporaries %s", sep, sz((double)x->temporaries, d));
        fputc('\n', f);
    }
    if (r->capacity)
        fprintf(f, "  Each fix's peak, predicted (range), and whether it fits in %s:\n", sz((double)r->capacity, a));
    else
        fprintf(f, "  Each fix's peak, predicted (range):\n");
    for (size_t i = 0; i < r->n_fix; i++) {
        const ca_fix *x = &r->fix[i];
        char label[160], fig[128];
        ca_fix_label(x, label, sizeof label);
        ca_fix_figures(x, fig, sizeof fig);
        if (r->capacity)
            fprintf(f, "    %-5s  %-34s %s\n", x->fits == 1 ? "yes" : x->fits == 0 ? "no" : "maybe", fig, label);
        else
            fprintf(f, "    %-34s %s\n", fig, label);
    }
    char lines[CA_FIX_ADVICE_MAX][CA_FIX_LINE];
    size_t n = ca_fixes_advice(r, r->capacity, lines, CA_FIX_ADVICE_MAX);
    if (r->capacity) fprintf(f, "  On this device:\n");
    for (size_t i = 0; i < n; i++) {
        if (!r->capacity && strncmp(lines[i], "Checkpointing cannot", 20)) continue; /* the table said it */
        fprintf(f, "    - %s\n", lines[i]);
    }
    n = ca_fixes_assumptions(r, lines, CA_FIX_ADVICE_MAX);
    fprintf(f, "  Assumed:\n");
    for (size_t i = 0; i < n; i++) fprintf(f, "    - %s\n", lines[i]);
    fputc('\n', f);
    return ferror(f) ? -1 : 0;
}
