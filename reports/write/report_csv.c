/* PREFIX.csv: the event stream as an RMM-style trace (tools/trace.h), with
 * cudalloc's `iteration` rows at boundaries unless left out. The ring keeps
 * the latest events; frees of allocations made before its oldest event are
 * left out, so the file always parses and replays (what was live before the
 * window is then simply absent). */
#include <inttypes.h>
#include <stdlib.h>

#include "reports/write/report_internal.h"

/* A set of addresses live within the window. */
typedef struct addrset {
    uint64_t *slot; /* 0 empty, 1 deleted */
    size_t mask;
} addrset;

static size_t probe(const addrset *s, uint64_t a, int for_insert) {
    size_t i = (size_t)((a >> 9) * 0x9E3779B97F4A7C15ull >> 20) & s->mask;
    size_t tomb = SIZE_MAX;
    for (;; i = (i + 1) & s->mask) {
        if (s->slot[i] == a) return i;
        if (s->slot[i] == 1 && tomb == SIZE_MAX) tomb = i;
        if (!s->slot[i]) return for_insert && tomb != SIZE_MAX ? tomb : i;
    }
}

int ca_report_csv(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    size_t cap = 64;
    while (cap < 2 * s->n_events + 2) cap *= 2;
    addrset set = {calloc(cap, sizeof(uint64_t)), cap - 1};
    if (!set.slot) return -1;
    fprintf(f, "Thread,Time,Action,Pointer,Size,Stream\n");
    size_t b = 0;
    while (b < s->n_bounds && s->bounds[b].seq < s->first_seq) b++;
    for (size_t i = 0; i <= s->n_events; i++) {
        uint64_t seq = s->first_seq + i;
        for (; b < s->n_bounds && s->bounds[b].seq <= seq; b++) {
            if (!c->opt.csv_iterations) continue;
            const ca_boundary *bd = &s->bounds[b];
            fprintf(f, "0,%.0f,iteration,,%" PRIu32 ",0x0\n",
                    s->time_is_index ? (double)bd->ticks : ca_report_time(c, bd->ticks) * 1e9, bd->iteration + 1);
        }
        if (i == s->n_events) break;
        const ca_ev *e = &s->events[i];
        ca_evk k = ca_ev_kind(e);
        const char *action;
        uint64_t ptr = e->addr < 2 ? e->addr + 2 : e->addr; /* 0 and 1 mark empty slots */
        if (k == CA_EVK_ALLOC) {
            size_t at = probe(&set, ptr, 1);
            set.slot[at] = ptr;
            action = "allocate";
        } else if (k == CA_EVK_FREE) {
            size_t at = probe(&set, ptr, 0);
            if (set.slot[at] != ptr) continue; /* allocated before the window */
            set.slot[at] = 1;
            action = "free";
        } else if (k == CA_EVK_OOM) {
            action = "allocate failure";
        } else {
            continue; /* mapping is the allocator's business, not the program's */
        }
        uint64_t tid = ca_ev_thread(s, e), stream = ca_ev_stream(s, e);
        fprintf(f, "%" PRIu64 ",%.0f,%s,0x%" PRIx64 ",%" PRIu64 ",0x%" PRIx64 "\n", tid,
                s->time_is_index ? (double)e->ticks : ca_report_time(c, e->ticks) * 1e9, action,
                k == CA_EVK_OOM ? (uint64_t)0 : e->addr, ca_ev_bytes(e), stream);
    }
    free(set.slot);
    return ferror(f) ? -1 : 0;
}
