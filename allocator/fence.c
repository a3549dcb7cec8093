/* Plain frees: cudaFree promises that the memory is not used again until the
 * work the device has queued so far, on every stream, is done (it waits for
 * the whole device). Here a plain free does not wait: its block becomes
 * pending, and is free again once a fence recorded after the free has passed
 * (backend.h: fence_record). A fence recorded later than a free still covers
 * the work queued before it, only more of it, so one fence serves every block
 * freed since the last one: a burst of frees costs one fence.
 *
 * So a pool records it only when the memory is needed: an allocation that
 * the free memory cannot serve without growing fences the unfenced blocks
 * first (allocator.c), and so do CA_FENCE_BATCH frees or CA_LAZY_BYTES of
 * them; a malloc/free loop that fits in free memory records one fence per
 * CA_FENCE_BATCH frees, not one per free (issue 29). That holds with
 * non-blocking streams too, where a fence waits: a fence is the point "now"
 * in every stream alive at its record (streams.c: the legacy stream's event
 * orders the blocking and per-thread streams, each non-blocking stream has
 * its own event or the context's stands for all), a stream destroyed since
 * the free is behind its context's keeper, which the fence covers until the
 * keeper's wait is done, and no fence is recorded while a capture is under
 * way (the blocks stay unfenced). Work queued before the free, on any of
 * them, is therefore before the fence, however late it is recorded; work
 * queued after the free may not use the block. Recording later changes only
 * how soon the memory comes back: nothing while fences pass at record (no
 * non-blocking stream: the legacy event orders every later use); with
 * fences that wait, the allocation that needed the memory finds its fence
 * not passed yet and grows the pool instead (or, with the memory short,
 * waits for it), which the two bounds keep to a few blocks.
 *
 * Allocations poll the oldest fences without blocking; they wait on them
 * only when the memory is otherwise short (allocator.c). Pending blocks stay `allocated`
 * in the segment, so nothing merges, maps or unmaps them, and count as active
 * and cached, not allocated, as PyTorch counts blocks awaiting their events.
 * Only an answer that the work is done frees them: a fence that cannot be
 * recorded, asked about or waited for now leaves them pending (backend.h). */
#include <stdlib.h>

#include "internal.h"

/* Frees after which a fence is recorded without waiting for an allocation, so
 * that the blocks of a long run of frees do not wait for work queued after it. */
#define CA_FENCE_BATCH 64

struct ca_batch {
    ca_fence fence;
    ca_block *blocks;    /* linked by pending_next */
    ca_batch *next;      /* newer */
};

/* idle: the fence has passed because the work before it is done; not when
 * it passed at record (0), which only orders later work after it. The blocks
 * leave the pending figures together: one locked add per figure and kind to
 * the device-wide totals, not one per block. */
static void free_blocks(ca_allocator *a, ca_pool *p, ca_block *b, bool idle) {
    int64_t count[CA_POOL_KINDS] = {0}, bytes[CA_POOL_KINDS] = {0};
    while (b) {
        ca_block *next = b->pending_next;
        int kind = b->small ? CA_POOL_SMALL : CA_POOL_LARGE;
        count[kind]++;
        bytes[kind] += (int64_t)b->size; /* before the merge changes it */
        b->pending = false;
        b->pending_next = NULL;
        ca_block_release(a, p, b, idle);
        b = next;
    }
    for (int kind = CA_POOL_SMALL; kind < CA_POOL_KINDS; kind++)
        if (count[kind]) ca_pend_kind(a, p, kind, -count[kind], -bytes[kind]);
}

static void batch_done(ca_allocator *a, ca_pool *p, ca_batch *bt) {
    a->be->fence_destroy(a->be->self, bt->fence);
    free_blocks(a, p, bt->blocks, true);
    bt->next = p->spare_batches;
    p->spare_batches = bt;
}

static void link_unfenced(ca_pool *p, ca_block *b) {
    b->pending_next = p->unfenced;
    p->unfenced = b;
    p->unfenced_bytes += b->size;
    p->n_unfenced++;
}

/* One fence for every block freed since the last one, those kept for their
 * stream's next request too (share.c). None can be recorded now (a capture
 * is under way, the device refused): the blocks stay unfenced, never free,
 * and the next call tries again. */
static void fence_unfenced(ca_allocator *a, ca_pool *p) {
    for (ca_block *b = p->n_kept ? ca_share_take_all(a, p) : NULL, *next; b; b = next) {
        next = b->pending_next;
        link_unfenced(p, b);
    }
    if (!p->unfenced) return;
    ca_batch *bt = p->spare_batches;
    if (bt) p->spare_batches = bt->next;
    else if (!(bt = malloc(sizeof *bt))) return; /* no memory to keep a batch: later */
    ca_fence f = 0;
    if (a->be->fence_record(a->be->self, &f) != CA_OK) {
        bt->next = p->spare_batches;
        p->spare_batches = bt;
        return;
    }
    ca_block *blocks = p->unfenced;
    p->unfenced = NULL;
    p->n_unfenced = p->unfenced_bytes = 0;
    p->fences_pass = !f;
    if (!f) { /* passed already: every later use is ordered after it */
        bt->next = p->spare_batches;
        p->spare_batches = bt;
        free_blocks(a, p, blocks, false);
        return;
    }
    *bt = (ca_batch){f, blocks, NULL};
    if (p->newest) p->newest->next = bt;
    else p->oldest = bt;
    p->newest = bt;
}

void ca_pending_requeue(ca_allocator *a, ca_pool *p, ca_block *b) {
    link_unfenced(p, b);
    if (p->n_unfenced >= CA_FENCE_BATCH) fence_unfenced(a, p);
}

void ca_pending_add(ca_allocator *a, ca_pool *p, ca_block *b) {
    b->pending = true;
    ca_pend(a, p, b);
    ca_pending_requeue(a, p, b);
}

static void pop_oldest(ca_allocator *a, ca_pool *p) {
    ca_batch *bt = p->oldest;
    p->oldest = bt->next;
    if (!p->oldest) p->newest = NULL;
    batch_done(a, p, bt);
}

void ca_pending_poll(ca_allocator *a, ca_pool *p) {
    while (p->oldest && a->be->fence_query(a->be->self, p->oldest->fence)) pop_oldest(a, p);
}

void ca_pending_collect(ca_allocator *a, ca_pool *p) {
    fence_unfenced(a, p);
    ca_pending_poll(a, p);
}

bool ca_pending_wait_oldest(ca_allocator *a, ca_pool *p) {
    bool unfenced = p->unfenced || p->n_kept;
    if (!p->oldest) fence_unfenced(a, p);
    if (!p->oldest) return unfenced && !p->unfenced; /* a fence passed at record freed them */
    if (!a->be->fence_wait(a->be->self, p->oldest->fence)) return false; /* could not wait: still busy */
    pop_oldest(a, p);
    return true;
}

void ca_pending_settle(ca_allocator *a, ca_pool *p) {
    fence_unfenced(a, p);
    while (ca_pending_wait_oldest(a, p)) {
    }
}

void ca_pending_drop(ca_allocator *a, ca_pool *p) {
    for (ca_batch *bt = p->oldest, *next; bt; bt = next) {
        next = bt->next;
        a->be->fence_destroy(a->be->self, bt->fence);
        free(bt);
    }
    for (ca_batch *bt = p->spare_batches, *next; bt; bt = next) {
        next = bt->next;
        free(bt);
    }
    p->oldest = p->newest = p->spare_batches = NULL;
    p->unfenced = NULL;
    p->n_unfenced = p->unfenced_bytes = 0;
    free(p->keep); /* the kept blocks go with the pool's segments */
    p->keep = NULL;
    p->n_kept = p->kept_bytes = 0;
}
