/* What glibc's malloc needs for a trace's sizes: its arena at its largest,
 * against the trace's peak of live bytes, the figure `cudalloc-replay
 * --min-capacity` gives cudalloc's (issue 29: is a trace's fragmentation
 * cudalloc's, or any non-moving allocator's?). One arena, no mmap and no trim
 * while it replays, so that the arena is every byte glibc holds: chunks live,
 * free in its bins, and their headers. Each trace in a child of its own, parsed
 * before: the parser's free chunks left in the arena (`slack`, trimmed first)
 * are counted as the replay's, so peak_arena is within slack above glibc's.
 *   glibc_footprint TRACE...   one line each: peak_requested, peak_arena, ratio */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/trace.h"

/* The arena's end: it grows with sbrk alone here (mallinfo2 would walk every
 * free chunk at each call); checked against mallinfo2 at the end. */
static size_t brk_now(void) { return (size_t)(char *)sbrk(0); }

static int footprint(const char *path) {
    ca_trace t;
    char err[256];
    if (ca_trace_parse_file(path, &t, err, sizeof err) != 0) {
        fprintf(stderr, "glibc_footprint: %s\n", err);
        return 2;
    }
    void **ptrs = calloc(t.n_ids ? t.n_ids : 1, sizeof *ptrs);
    size_t *sizes = calloc(t.n_ids ? t.n_ids : 1, sizeof *sizes);
    if (!ptrs || !sizes) {
        fprintf(stderr, "glibc_footprint: %s: out of host memory\n", path);
        return 2;
    }
    /* from here every chunk comes from the one arena (sbrk), none mapped alone,
     * and nothing is given back */
    malloc_trim(0);
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
    size_t slack = mallinfo2().fordblks, base = brk_now(), base_arena = mallinfo2().arena;
    size_t live = 0, peak_live = 0, peak_arena = 0;
    for (size_t i = 0; i < t.n_ops; i++) {
        const ca_trace_op *op = &t.ops[i];
        if (op->kind == CA_TRACE_ALLOC) {
            if (!(ptrs[op->id] = malloc(op->size))) {
                fprintf(stderr, "glibc_footprint: %s:%u: malloc(%llu) failed\n", path, op->line,
                        (unsigned long long)op->size);
                return 2;
            }
            sizes[op->id] = op->size;
            if ((live += op->size) > peak_live) peak_live = live;
            size_t arena = brk_now() - base + slack; /* grows only on an allocation */
            if (arena > peak_arena) peak_arena = arena;
        } else if (op->kind == CA_TRACE_FREE && ptrs[op->id]) {
            free(ptrs[op->id]);
            ptrs[op->id] = NULL;
            live -= sizes[op->id];
        }
    }
    if (mallinfo2().arena - base_arena != brk_now() - base) {
        fprintf(stderr, "glibc_footprint: %s: glibc's arena grew other than by sbrk; no figure\n", path);
        return 2;
    }
    for (uint32_t id = 0; id < t.n_ids; id++) free(ptrs[id]);
    printf("%s: glibc peak_requested=%zu peak_arena=%zu slack=%zu ratio=%.3f\n", path, peak_live, peak_arena,
           slack, peak_live ? (double)peak_arena / (double)peak_live : 0.0);
    free(ptrs);
    free(sizes);
    ca_trace_free(&t);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: glibc_footprint TRACE.csv[.gz]...\n");
        return 2;
    }
    mallopt(M_ARENA_MAX, 1);
    for (int i = 1; i < argc; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int rc = footprint(argv[i]);
            fflush(stdout);
            _exit(rc);
        }
        int status;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) return 2;
    }
    return 0;
}
