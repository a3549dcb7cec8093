/* libFuzzer harness: tools/trace.c, the RMM CSV reader. The input is the
 * file's bytes, given exactly as they are (no terminator). Beyond "no crash,
 * no UB, no leak": a parsed trace is consistent (counts, dense ids, every free
 * of a live id with its size, the peak and the live count recomputed from the
 * ops, a cut last line after every row kept), and a rejected one is a single
 * line naming the file, truncated safely to any buffer size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "tools/trace.h"

static void check_trace(const ca_trace *t)
{
    size_t sum = 0;
    for (int k = 0; k < CA_TRACE_KINDS; k++) sum += t->count[k];
    FUZZ_CHECK(sum == t->n_ops, "counts add to %zu, %zu ops", sum, t->n_ops);
    uint64_t *live = calloc(t->n_ids ? t->n_ids : 1, sizeof *live); /* size+1 while live, else 0 */
    FUZZ_CHECK(live, "out of memory");
    uint64_t bytes = 0, peak = 0;
    size_t n_live = 0;
    uint32_t line = 0;
    for (size_t i = 0; i < t->n_ops; i++) {
        const ca_trace_op *o = &t->ops[i];
        FUZZ_CHECK(o->line > line, "op %zu: line %u after line %u", i, o->line, line);
        line = o->line;
        if (o->kind == CA_TRACE_ALLOC || o->kind == CA_TRACE_FREE) {
            FUZZ_CHECK(o->id < t->n_ids, "op %zu: id %u of %u", i, o->id, t->n_ids);
        } else {
            FUZZ_CHECK(o->kind < CA_TRACE_KINDS && o->id == CA_TRACE_NO_ID, "op %zu: kind %d id %u", i, o->kind, o->id);
            continue;
        }
        if (o->kind == CA_TRACE_ALLOC) {
            FUZZ_CHECK(!live[o->id] && o->size, "op %zu: id %u given while live, or size 0", i, o->id);
            live[o->id] = o->size + 1;
            bytes += o->size, n_live++;
            if (bytes > peak) peak = bytes;
        } else {
            FUZZ_CHECK(live[o->id] == o->size + 1, "op %zu: free of id %u, %llu bytes, not live so", i, o->id,
                       (unsigned long long)o->size);
            live[o->id] = 0;
            bytes -= o->size, n_live--;
        }
    }
    FUZZ_CHECK(peak == t->peak_live_bytes, "peak %llu, recomputed %llu", (unsigned long long)t->peak_live_bytes,
               (unsigned long long)peak);
    FUZZ_CHECK(n_live == t->live_at_end, "live at end %zu, recomputed %zu", t->live_at_end, n_live);
    /* a cut last line comes after every row read, and says what is wrong with it */
    FUZZ_CHECK(!t->cut_line || (t->cut_line > line && t->cut_why[0] && !memchr(t->cut_why, '\n', strlen(t->cut_why))),
               "cut line %u after line %u: '%s'", t->cut_line, line, t->cut_why);
    free(live);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    ca_trace t;
    char err[256];
    int rc = ca_trace_parse_buffer("fuzz.csv", (const char *)data, n, &t, err, sizeof err);
    if (rc == 0) {
        check_trace(&t);
        ca_trace_free(&t);
        return 0;
    }
    FUZZ_CHECK(rc == -1 && t.n_ops == 0 && !t.ops, "a failed parse returned %d with ops", rc);
    FUZZ_CHECK(fuzz_one_line(err, sizeof err) && !strncmp(err, "fuzz.csv:", 9), "error is not one line: '%s'", err);
    /* Again into a buffer too small for the message: cut, terminated, no overrun. */
    char small[12];
    memset(small, 'x', sizeof small);
    FUZZ_CHECK(ca_trace_parse_buffer("fuzz.csv", (const char *)data, n, &t, small, 8) == -1, "second parse differs");
    FUZZ_CHECK(memchr(small, 0, 8) && small[8] == 'x', "error not cut at 8 bytes");
    return 0;
}
