/* OOM verdicts and advice, and the judgement of each failure; see oom.h. */
#include "reports/diagnose/oom.h"

#include <string.h>

#include "reports/diagnose/leaks.h"

void ca_oom_diagnose(ca_tracker *t, const ca_oom_info *info) { ca_tracker_oom(t, info, ca_oom_assess); }

void ca_oom_assess(ca_oom_record *r, const ca_site_stat *sites, size_t n_sites, uint32_t iteration) {
    /* What leaks hold now, and the sites holding the most. */
    uint32_t last = iteration ? iteration - 1 : 0;
    for (uint32_t s = 0; s < n_sites; s++) {
        const ca_site_stat *st = &sites[s];
        if (!st->live_count) continue;
        ca_leak l;
        if (iteration && ca_site_leak(st, last, &l)) {
            r->leaked_bytes += l.leaked_bytes;
            r->n_leaks++;
        }
        size_t k = r->n_top;
        while (k > 0 && r->top_bytes[k - 1] < st->live_bytes) k--;
        if (k >= CA_OOM_TOP) continue;
        size_t end = r->n_top < CA_OOM_TOP ? r->n_top : CA_OOM_TOP - 1;
        memmove(&r->top_site[k + 1], &r->top_site[k], (end - k) * sizeof r->top_site[0]);
        memmove(&r->top_bytes[k + 1], &r->top_bytes[k], (end - k) * sizeof r->top_bytes[0]);
        memmove(&r->top_count[k + 1], &r->top_count[k], (end - k) * sizeof r->top_count[0]);
        r->top_site[k] = s;
        r->top_bytes[k] = st->live_bytes;
        r->top_count[k] = st->live_count;
        if (r->n_top < CA_OOM_TOP) r->n_top++;
    }
    r->verdict = ca_oom_judge(&r->info, r->leaked_bytes);
}

/* a + b, or UINT64_MAX when that does not fit: figures near 2^64 (an
 * unlimited device's free bytes) must not wrap into "too little". */
static uint64_t add_sat(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

ca_oom_verdict ca_oom_judge(const ca_oom_info *info, uint64_t leaked_bytes) {
    /* Larger than the whole device (device_total is the cap under one; 0:
     * unknown): no freeing, no defragmenting, no fixed leak makes room. A
     * total inferred offline (reserved + free) is not the device's: other
     * processes may hold the rest, so it never says "beyond". */
    if (info->device_total && !info->device_total_inferred && info->requested > info->device_total)
        return CA_OOM_BEYOND;
    uint64_t free_bytes = add_sat(info->device_free, info->free_cached);
    if (free_bytes >= info->requested) return CA_OOM_FRAGMENTED;
    if (leaked_bytes && add_sat(free_bytes, leaked_bytes) >= info->requested) return CA_OOM_LEAK;
    return CA_OOM_NOT_THERE;
}

const char *ca_oom_verdict_name(ca_oom_verdict v) {
    switch (v) {
    case CA_OOM_FRAGMENTED: return "fragmented";
    case CA_OOM_LEAK: return "leak";
    default: return "not_there";
    }
}

const char *ca_oom_verdict_text(ca_oom_verdict v) {
    switch (v) {
    case CA_OOM_FRAGMENTED:
        return "the memory is there but in pieces: free and cached memory add up to the request, "
               "yet no free block is large enough";
    case CA_OOM_LEAK:
        return "the memory is held by a leak: without what the leaking call sites have piled up, the "
               "request would fit";
    case CA_OOM_BEYOND:
        return "the memory is not there: the request is larger than the device (or max_reserved) could "
               "ever hold, so nothing freed would make room for it";
    default:
        return "the memory is not there: live allocations leave too little for the request";
    }
}

#define NOT_THERE_GENERAL                                                                            \
    "Keep metrics as numbers (.item()) and evaluate under torch.no_grad(), so no graph is kept.",      \
        "Empty the cache between phases of different shapes (training and evaluation): "              \
        "torch.cuda.empty_cache().",                                                                  \
        NULL
static const char *const not_there[] = {
    "Gradient accumulation: run smaller micro-batches and step every k of them, dividing the loss by k "
    "(loss / k) so the gradients stay the same.",
    "Mixed precision: torch.autocast(device_type='cuda', dtype=torch.bfloat16) halves the activations.",
    "Activation checkpointing (torch.utils.checkpoint): recompute activations in backward instead of "
    "keeping them.",
    NOT_THERE_GENERAL,
};
static const char *const not_there_general[] = {NOT_THERE_GENERAL};
static const char *const beyond[] = {
    "A request larger than the whole device is most often a size computed wrong: a negative number "
    "passed as size_t, or a product of dimensions that overflowed. Check the size at the call site.",
    "If the size is meant, split the work: smaller batches or sequences, or the tensor sharded across "
    "devices.",
    NULL,
};
static const char *const fragmented[] = {
    "Use expandable segments (cudalloc's default; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "without cudalloc): free physical memory then serves any request, contiguous or not.",
    "Empty the cache between phases of different shapes (training and evaluation): "
    "torch.cuda.empty_cache().",
    "Allocate large long-lived buffers first, before the many short-lived ones.",
    NULL,
};
static const char *const leak[] = {
    "Fix the leak reported above: keep loss.item() rather than the loss tensor, and run evaluation and "
    "metrics under torch.no_grad().",
    "Until then, the leak's projected out-of-memory iteration says how long a run can last.",
    NULL,
};

const char *const *ca_oom_advice_general(ca_oom_verdict v) {
    return v == CA_OOM_NOT_THERE ? not_there_general : ca_oom_advice(v);
}

const char *const *ca_oom_advice(ca_oom_verdict v) {
    switch (v) {
    case CA_OOM_FRAGMENTED: return fragmented;
    case CA_OOM_LEAK: return leak;
    case CA_OOM_BEYOND: return beyond;
    default: return not_there;
    }
}
