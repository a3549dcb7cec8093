/* Room read/: other tools' files: the value tree, pickle and JSON, PyTorch snapshots.
 * May include: allocator/, util/ and every room of reports/ (it feeds the tracker).
 *
 * PyTorch memory snapshots read back: the pickle torch.cuda.memory.
 * _dump_snapshot() writes (and cudalloc's own PREFIX.pickle), turned into
 * the events cudalloc's offline diagnosis consumes.
 *
 * Two steps. ca_torch_snapshot_read() checks the document and keeps what
 * the diagnosis needs: segments with their blocks, each device's trace
 * (alloc, free_requested, free_completed, segment_alloc/free/map/unmap,
 * oom; other actions such as snapshot and annotate are counted and
 * skipped), step annotations, and the allocator settings. Frames become
 * named frames (module "snapshot", reports/capture/named_frames.h) interned into a
 * stack table, so a site is a real stack: PyTorch writes the innermost
 * frame first, as cudalloc's stacks are. When a stack holds Python frames
 * (a file ending in .py) only those are kept, so a leak names its Python
 * line rather than the allocator's C++; frames PyTorch's own tools hide
 * (unwinding, the interpreter's C) are dropped; an allocation recorded
 * without frames gets a site by its requested size, as a CSV trace has.
 *
 * ca_snap_run_build() then lays out one device's run, in order:
 *  1. the mapped ranges at the start of the trace: the final segments with
 *     the trace's segment events undone from the newest back, as PyTorch's
 *     viewer does. Segments stay as the allocator made them
 *     (reports/track/ranges.h): a classic segment (segment_alloc and
 *     segment_free, or is_expandable false) is one range however its
 *     neighbours touch it; expandable memory (segment_map and
 *     segment_unmap) is one range per contiguous mapped piece. Each range
 *     keeps the pool, pool id and expandability of the final segment it
 *     lies in;
 *  2. the allocations live before the trace began (the trace is a ring that
 *     drops old entries): blocks still active in the segments that no alloc
 *     of the trace made, and addresses the trace frees before allocating;
 *  3. the trace: an allocation is freed on free_completed (the memory is
 *     reusable from then on) when the trace has any free_completed, else on
 *     free_requested (traces recorded with skip_actions); segment_alloc and
 *     segment_map map memory, segment_free and segment_unmap unmap it; oom
 *     is a failed allocation; a step boundary goes before the first entry at
 *     or after the time_us of each step annotation ("ProfilerStep#N" or
 *     "step" START in external_annotations), or without those, before the
 *     first entry after each "Optimizer.step#..." END, when the entries
 *     carry time_us.
 * Block sizes: active blocks keep the size the segments give them; others
 * are the request rounded up to 512 bytes, as PyTorch rounds (a block it did
 * not split keeps more, which the trace does not say).
 *
 * Bad input never crashes: each error names the place ("device_traces[0][12]:
 * 'addr' is a str, expected an int"). */
#ifndef CA_SNAPSHOT_READ_H
#define CA_SNAPSHOT_READ_H
#include <stddef.h>
#include <stdint.h>

#include "reports/capture/stacks.h"
#include "reports/track/tracker.h"
#include "reports/read/value.h"

typedef enum {
    CA_SNAP_ALLOC,
    CA_SNAP_FREE_REQUESTED,
    CA_SNAP_FREE_COMPLETED,
    CA_SNAP_SEGMENT_ALLOC,
    CA_SNAP_SEGMENT_FREE,
    CA_SNAP_SEGMENT_MAP,
    CA_SNAP_SEGMENT_UNMAP,
    CA_SNAP_OOM,
    CA_SNAP_OTHER, /* snapshot, annotate, and actions of later versions: skipped */
} ca_snap_action;

typedef struct ca_snap_entry {
    ca_snap_action action;
    uint64_t addr;        /* OOM: device_free */
    uint64_t size;        /* requested bytes; segment events: bytes mapped */
    uint64_t stream;
    int64_t time_us;      /* -1 when not recorded */
    uint32_t site;        /* ALLOC, OOM, segment events with frames: the frames' stack id */
} ca_snap_entry;

enum { CA_SNAP_INACTIVE, CA_SNAP_ACTIVE_ALLOCATED, CA_SNAP_ACTIVE_PENDING_FREE };

typedef struct ca_snap_block {
    uint64_t addr, size, requested;
    int state;            /* CA_SNAP_INACTIVE, CA_SNAP_ACTIVE_* */
    uint32_t site;
} ca_snap_block;

typedef struct ca_snap_segment {
    int device;
    uint64_t addr, total_size, stream;
    int large;            /* segment_type: 1 large, 0 small, -1 not said */
    int expandable;       /* 1, 0, -1 not said */
    int64_t pool_id[2];   /* segment_pool_id ((0, 0) when not said) */
    size_t first_block, n_blocks; /* in blocks[] */
} ca_snap_segment;

typedef struct ca_snap_trace {
    ca_snap_entry *e;
    size_t n;
} ca_snap_trace;

/* What the step boundaries come from. */
typedef enum {
    CA_SNAP_STEPS_NONE = 0,
    CA_SNAP_STEPS_PROFILER,  /* "ProfilerStep#N" (or "step") STARTs */
    CA_SNAP_STEPS_OPTIMIZER, /* "Optimizer.step#..." ENDs */
} ca_snap_steps_from;

typedef struct ca_torch_snapshot {
    ca_stacks *stacks;               /* the sites; give it to the tracker (options.stacks) */
    ca_snap_segment *segs;
    size_t n_segs;
    ca_snap_block *blocks;
    size_t n_blocks;
    ca_snap_trace *traces;           /* index: device */
    size_t n_traces;
    int64_t *steps;                  /* step boundaries' time_us (START, or END + 1), sorted */
    int *step_devices;               /* their device (-1: any) */
    size_t n_steps;
    ca_snap_steps_from steps_from;
    size_t n_other;                  /* trace entries skipped (snapshot, annotate, ...) */
    int expandable_segments;         /* allocator_settings: 1, 0, -1 not said */
    char alloc_conf[256];            /* allocator_settings PYTORCH_CUDA_ALLOC_CONF ("" when absent) */
} ca_torch_snapshot;

/* A snapshot file's bytes as a document (snapshot_file.c): the pickle, or a
 * gzipped pickle (snapshot.pickle.gz: zlib, every member, read as it
 * inflates, up to max_bytes and ca_gz_most(len): refused at the first byte
 * that is no snapshot's, never inflated whole first). A zip archive, or the
 * legacy format, of torch.save() (a model, tensors: what people take for a
 * snapshot) is refused as what it is, with how to make a snapshot. NULL with
 * a one-line message in err. */
ca_doc *ca_snapshot_unpickle(const void *buf, size_t len, size_t max_bytes, char *err, size_t errlen);
#define CA_SNAPSHOT_MAX_INFLATED ((size_t)1 << 40) /* 1 TiB: only memory limits it */

/* Reads a snapshot from a file's bytes buf[0..len) (ca_snapshot_unpickle,
 * CA_SNAPSHOT_MAX_INFLATED). 0, or -1 with a one-line message in err (the
 * caller adds the file name). */
int ca_torch_snapshot_read(const void *buf, size_t len, ca_torch_snapshot *out, char *err, size_t errlen);
/* The same from a document already read. Refused: more segments, blocks,
 * trace entries and annotations than the document has distinct dicts (one
 * object named again and again through the pickle's memo), blocks that
 * overlap or leave their segment, segments of a device that overlap. The
 * work is bounded by the document, not by what it claims. */
int ca_torch_snapshot_from_doc(const ca_doc *doc, ca_torch_snapshot *out, char *err, size_t errlen);
void ca_torch_snapshot_free(ca_torch_snapshot *s);

/* Devices with a trace entry or a segment: a bit per device (0..63). */
uint64_t ca_torch_snapshot_devices(const ca_torch_snapshot *s);

/* ---- one device's run ---- */

typedef enum { CA_RUN_MAP, CA_RUN_UNMAP, CA_RUN_ALLOC, CA_RUN_FREE, CA_RUN_OOM, CA_RUN_STEP } ca_run_kind;

typedef struct ca_run_op {
    ca_run_kind kind;
    uint32_t site;            /* ALLOC, OOM; MAP, UNMAP from the trace (0 when none) */
    uint32_t id;              /* ALLOC, FREE: dense allocation id (< n_ids), reused after a free */
    uint32_t range_kind;      /* MAP, UNMAP: the range's kind, an index in the run's kinds */
    uint64_t addr;            /* OOM: the device's free bytes PyTorch recorded */
    uint64_t size;            /* ALLOC, FREE: block bytes; MAP, UNMAP: bytes; OOM: requested */
    uint64_t requested;       /* ALLOC, FREE */
    uint64_t stream;
} ca_run_op;

typedef struct ca_snap_run {
    int device;
    ca_run_op *ops;
    size_t n_ops;
    ca_range_kind *kinds;           /* of the ranges MAP and UNMAP name: whole (a classic
                                       segment, segment_alloc/free), pool, pool id, as the
                                       segment at that address has them */
    size_t n_kinds;
    uint32_t n_ids;                 /* most allocations live at once */
    size_t seeded_ranges, seeded_allocs; /* steps 1 and 2 above */
    uint64_t seeded_bytes;
    size_t trace_entries;           /* entries of this device's trace */
    int frees_on;                   /* CA_SNAP_FREE_COMPLETED or CA_SNAP_FREE_REQUESTED */
    size_t unmatched_frees;         /* frees of an address already freed in the trace */
    size_t steps;                   /* step boundaries placed */
    uint64_t reserved_at_snapshot;  /* the device's segments' total_size */
} ca_snap_run;

/* 0, or -1 (out of memory) with a message in err. Sites of the allocations
 * it finds were made before the trace are interned into s->stacks. */
int ca_snap_run_build(const ca_torch_snapshot *s, int device, ca_snap_run *out, char *err, size_t errlen);
void ca_snap_run_free(ca_snap_run *r);

/* Feeds the run to a tracker made with options.stacks = s->stacks and
 * time_is_index (the events are numbered, not timed): events, step
 * boundaries (explicit), and each OOM judged with the state then (device
 * free from the snapshot; device total = device_total, or when 0 what
 * PyTorch had reserved plus what the driver said was free). */
void ca_snap_run_feed(const ca_snap_run *r, ca_tracker *t, uint64_t device_total);

#endif
