/* OOM verdicts and advice; see oom.h. */
#include "reports/oom.h"

ca_oom_verdict ca_oom_judge(const ca_oom_info *info, uint64_t leaked_bytes) {
    uint64_t free_bytes = (uint64_t)info->device_free + info->free_cached;
    if (free_bytes >= info->requested) return CA_OOM_FRAGMENTED;
    if (leaked_bytes && free_bytes + leaked_bytes >= info->requested) return CA_OOM_LEAK;
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
    default:
        return "the memory is not there: live allocations leave too little for the request";
    }
}

static const char *const not_there[] = {
    "Gradient accumulation: run smaller micro-batches and step every k of them, dividing the loss by k "
    "(loss / k) so the gradients stay the same.",
    "Mixed precision: torch.autocast(device_type='cuda', dtype=torch.bfloat16) halves the activations.",
    "Activation checkpointing (torch.utils.checkpoint): recompute activations in backward instead of "
    "keeping them.",
    "Keep metrics as numbers (.item()) and evaluate under torch.no_grad(), so no graph is kept.",
    "Empty the cache between phases of different shapes (training and evaluation): "
    "torch.cuda.empty_cache().",
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

const char *const *ca_oom_advice(ca_oom_verdict v) {
    switch (v) {
    case CA_OOM_FRAGMENTED: return fragmented;
    case CA_OOM_LEAK: return leak;
    default: return not_there;
    }
}
