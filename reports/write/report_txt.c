/* PREFIX.txt: the human report. It starts with the verdict. */
#include <inttypes.h>
#include <string.h>

#include "reports/diagnose/oom.h"
#include "reports/write/report_internal.h"

#include "reports/write/fixes_out.h"

#define MAX_FRAMES_SHOWN 12
#define MAX_SEGMENTS_SHOWN 20

/* The frames of a site, innermost first, at most `most` of them. */
static void frames_upto(const ca_report_ctx *c, FILE *f, uint32_t site, const char *indent, size_t most) {
    char label[512];
    if (c->snap.site_mode == CA_SITES_SIZE) {
        ca_report_site_label(c, site, label, sizeof label);
        fprintf(f, "%s%s\n", indent, label);
        return;
    }
    const ca_frame *fr[MAX_FRAMES_SHOWN];
    size_t n = ca_report_frames(c, site, fr, most < MAX_FRAMES_SHOWN ? most : MAX_FRAMES_SHOWN);
    if (!n) fprintf(f, "%s(no stack)\n", indent);
    for (size_t i = 0; i < n; i++) {
        if (fr[i]->line)
            fprintf(f, "%s#%zu %s at %s:%u\n", indent, i, fr[i]->function, fr[i]->file, fr[i]->line);
        else
            fprintf(f, "%s#%zu %s in %s\n", indent, i, fr[i]->function, fr[i]->module);
    }
}

static void frames(const ca_report_ctx *c, FILE *f, uint32_t site, const char *indent) {
    frames_upto(c, f, site, indent, MAX_FRAMES_SHOWN);
}

/* Wraps a paragraph at 90 columns: the first line after `first`, the others
 * after `indent`. */
static void para2(FILE *f, const char *first, const char *indent, const char *text) {
    const size_t width = 90;
    for (int line = 0; *text; line++) {
        size_t n = strlen(text);
        if (n > width) {
            n = width;
            while (n > 0 && text[n] != ' ') n--;
            if (!n) n = width;
        }
        fprintf(f, "%s%.*s\n", line ? indent : first, (int)n, text);
        text += n;
        while (*text == ' ') text++;
    }
}

static void para(FILE *f, const char *indent, const char *text) { para2(f, indent, indent, text); }

/* The frames of a site, innermost first, down to (and with) `stop` when
 * it is among them. */
static void frames_to(const ca_report_ctx *c, FILE *f, uint32_t site, const char *indent, int has_stop, uintptr_t stop) {
    if (c->snap.site_mode == CA_SITES_SIZE || !has_stop) {
        frames(c, f, site, indent);
        return;
    }
    const ca_frame *fr[MAX_FRAMES_SHOWN];
    size_t n = ca_report_frames(c, site, fr, MAX_FRAMES_SHOWN);
    for (size_t i = 0; i < n; i++) {
        if (fr[i]->line)
            fprintf(f, "%s#%zu %s at %s:%u\n", indent, i, fr[i]->function, fr[i]->file, fr[i]->line);
        else
            fprintf(f, "%s#%zu %s in %s\n", indent, i, fr[i]->function, fr[i]->module);
        if (fr[i]->ip == stop) break;
    }
}

/* One finding: what it is, its figures, what to do, then its sites. */
static void finding(const ca_report_ctx *c, FILE *f, size_t i) {
    const ca_finding *fd = &c->findings[i];
    char b1[32], b2[32], title[1024];
    ca_report_finding_title(c, i, title, sizeof title);
    if (fd->note) fprintf(f, "\nnote %zu: %s: %s\n", i - c->n_leak_findings + 1, fd->handoff ? "hand-off" : "slow growth", title);
    else fprintf(f, "\nleak %zu: %s\n", i + 1, title);
    fprintf(f, "  +%s and %.2f allocations per iteration from %zu call site%s; growing since iteration %u; oldest "
               "live allocation from iteration %u\n",
            ca_report_bytes(fd->bytes_per_iteration, b1, sizeof b1), fd->count_per_iteration, fd->n_sites,
            fd->n_sites == 1 ? "" : "s", fd->growth_since, fd->first_iteration);
    fprintf(f, "  live now %s in %" PRIu64 " allocations (%s above the level before the growth)\n",
            ca_report_bytes((double)fd->live_bytes, b1, sizeof b1), fd->live_count,
            ca_report_bytes((double)fd->leaked_bytes, b2, sizeof b2));
    fprintf(f, "  %.*f%% of the working set (%s) per iteration; ", ca_report_share_digits(fd->working_set_share),
            fd->working_set_share * 100,
            ca_report_bytes((double)c->working_set, b1, sizeof b1));
    if (fd->iterations_to_fill >= 0 && fd->note)
        fprintf(f, "would fill the device in %.0f iterations\n", fd->iterations_to_fill);
    else if (ca_report_ran_out(c))
        fprintf(f, "the device ran out at iteration %u\n", ca_report_ran_out(c)->iteration);
    else if (fd->projected_oom_iteration >= 0)
        fprintf(f, "at this rate alone the device runs out at iteration %" PRId64 "\n", fd->projected_oom_iteration);
    else
        fprintf(f, "projected out-of-memory iteration: unknown (no device figures)\n");
    if (fd->has_root) {
        char root[512];
        ca_report_finding_root(c, i, root, sizeof root);
        fprintf(f, "  root, the deepest frame its sites share: %s\n", root);
    }
    fprintf(f, "  what to do:\n");
    para(f, "    ", fd->advice);
    for (size_t k = fd->first; k < fd->first + fd->n_sites; k++) {
        const ca_leak *l = &c->leaks[k];
        fprintf(f, "  site %zu: +%s and %.2f allocations per iteration%s; live %s in %" PRIu64 " allocations\n",
                k - fd->first + 1, ca_report_bytes(l->bytes_per_iteration, b1, sizeof b1), l->count_per_iteration,
                l->growing_buffer ? " (one buffer re-made larger)" : "",
                ca_report_bytes((double)l->live_bytes, b2, sizeof b2), l->live_count);
        frames_to(c, f, l->site, "    ", fd->has_root, fd->root_ip);
    }
}

/* Device memory allocated past cudalloc, when the preload measured it. */
static void external(const ca_report_ctx *c, FILE *f, const char *indent) {
    char b1[32], b2[32];
    if (c->opt.external_known)
        fprintf(f, "%soutside cudalloc (CUPTI): %s in allocations, %s held by memory pools\n", indent,
                ca_report_bytes((double)c->opt.external_alloc_bytes, b1, sizeof b1),
                ca_report_bytes((double)c->opt.external_pool_bytes, b2, sizeof b2));
    else if (c->opt.external_note)
        fprintf(f, "%soutside cudalloc: not measured (%s)\n", indent, c->opt.external_note);
}

/* Offline: the recorded run replayed through cudalloc's allocator. */
static void replay(const ca_report_ctx *c, FILE *f) {
    const ca_report_replay *r = c->opt.replay;
    const char *kind = r->expandable ? "expandable segments" : "classic segments";
    char b1[32], b2[32];
    fprintf(f, "\n== Replay under cudalloc\n");
    fprintf(f, "the run's %" PRIu64 " allocations and their frees, replayed in order through cudalloc's "
               "allocator (%s)%s:\n", r->allocations, kind,
            r->failed_requests ? ", the requests that failed when recorded among them (made and freed at once)" : "");
    fprintf(f, "peak requested      %s (the most the program held at once)\n",
            ca_report_bytes((double)r->peak_requested, b1, sizeof b1));
    fprintf(f, "peak reserved       %s under cudalloc; %s by the recorded allocator\n",
            ca_report_bytes((double)r->peak_reserved, b1, sizeof b1),
            ca_report_bytes((double)c->snap.peak_reserved, b2, sizeof b2));
    fprintf(f, "smallest device     %s: the run fits in that much with %s\n",
            ca_report_bytes((double)r->min_capacity, b1, sizeof b1), kind);
    if (r->capacity && !r->ooms_at_capacity && r->failed_requests)
        fprintf(f, "on a %s device: the run would get through, the %" PRIu64 " request%s that failed included\n",
                ca_report_bytes((double)r->capacity, b1, sizeof b1), r->failed_requests,
                r->failed_requests == 1 ? "" : "s");
    else if (r->capacity && !r->ooms_at_capacity)
        fprintf(f, "on a %s device: fits, no allocation fails\n", ca_report_bytes((double)r->capacity, b1, sizeof b1));
    else if (r->capacity)
        fprintf(f, "on a %s device: does not fit, %" PRIu64 " allocation%s fail; %s missing\n",
                ca_report_bytes((double)r->capacity, b1, sizeof b1), r->ooms_at_capacity,
                r->ooms_at_capacity == 1 ? "" : "s", ca_report_bytes((double)c->missing, b2, sizeof b2));
}

/* The peak and what held it, by the frame that names each call site. */
static void peak(const ca_report_ctx *c, FILE *f) {
    char b1[32];
    if (!c->have_peak) return;
    fprintf(f, "\n== At the peak\n");
    fprintf(f, "%s allocated in %" PRIu64 " allocations at event %" PRIu64 " (iteration %u), held by:\n",
            ca_report_bytes((double)c->peak.allocated, b1, sizeof b1), c->peak.count, c->peak.seq, c->peak.iteration);
    for (size_t i = 0; i < c->n_holders; i++)
        fprintf(f, "  %-10s in %6" PRIu64 " allocations from %u call site%s: %s\n",
                ca_report_bytes((double)c->holders[i].bytes, b1, sizeof b1), c->holders[i].count, c->holders[i].sites,
                c->holders[i].sites == 1 ? "" : "s", c->holders[i].label);
    if (c->others_count)
        fprintf(f, "  %-10s in %6" PRIu64 " allocations elsewhere\n", ca_report_bytes((double)c->others_bytes, b1, sizeof b1),
                c->others_count);
}

/* What is live now, by call site, largest first, with the stacks (at a
 * program's end: what it never freed). The answer of a run with nothing
 * over time to judge: every site shown, 6 frames each; after a loop, whose
 * iterations said what grows, the 5 largest with 3 (the JSON has them all). */
static void live_sites(const ca_report_ctx *c, FILE *f) {
    char b1[32], label[512];
    if (!c->snap.n_live && !c->suppressed.count) return;
    int answer = c->base_verdict == CA_VERDICT_NO_ITERATIONS || c->base_verdict == CA_VERDICT_NO_TRACE;
    size_t sites = answer ? c->n_live_sites : c->n_live_sites < 5 ? c->n_live_sites : 5;
    fprintf(f, "\n== Live now, by call site\n");
    ca_report_suppressed_text(c, label, sizeof label);
    if (*label) fprintf(f, "%s\n", label);
    fprintf(f, "%s in %zu allocations", ca_report_bytes((double)c->snap.allocated - (double)c->suppressed.bytes, b1, sizeof b1),
            c->snap.n_live - (size_t)c->suppressed.count);
    if (!sites) {
        fprintf(f, ".\n");
        return;
    }
    fprintf(f, "; the %zu call site%s holding the most:\n", sites, sites == 1 ? "" : "s");
    for (size_t i = 0; i < sites; i++) {
        const ca_site_stat *st = c->live_sites[i];
        ca_report_site_label(c, st->site, label, sizeof label);
        fprintf(f, "%zu. %s in %" PRIu64 " allocation%s: %s\n", i + 1,
                ca_report_bytes((double)st->live_bytes, b1, sizeof b1), st->live_count, st->live_count == 1 ? "" : "s",
                label);
        const ca_frame *fr[1];
        /* the frames, when there are some to show (not a site by size) */
        if (ca_report_frames(c, st->site, fr, 1)) frames_upto(c, f, st->site, "    ", answer ? 6 : 3);
    }
}

int ca_report_txt(const ca_report_ctx *c, FILE *f) {
    const ca_track_snap *s = &c->snap;
    char b1[32], b2[32], b3[32], b4[32];
    fprintf(f, "VERDICT: %s\n\n", c->verdict_line);
    if (*c->caching_warning) {
        fprintf(f, "WARNING: ");
        para2(f, "", "  ", c->caching_warning);
        fprintf(f, "\n");
    }
    fprintf(f, "%s\n", c->opt.title ? c->opt.title : "cudalloc report");
    if (c->opt.source_name) fprintf(f, "trace: %s\n", c->opt.source_name);

    fprintf(f, "\n== Summary\n");
    fprintf(f, "iterations          %u (source: %s", s->iteration, ca_iter_source_name(s->source));
    if (s->source == CA_ITER_EXPLICIT && c->opt.marks_name) fprintf(f, ": %s", c->opt.marks_name);
    if (s->source == CA_ITER_DETECTED) fprintf(f, ", %u allocations per iteration", s->detect_period);
    fprintf(f, "; marks offered: explicit %" PRIu64 ", nvtx %" PRIu64 ")\n", s->marks[CA_ITER_EXPLICIT],
            s->marks[CA_ITER_NVTX]);
    fprintf(f, "allocated now       %s in %zu allocations (requested %s)\n",
            ca_report_bytes((double)s->allocated, b1, sizeof b1), s->n_live,
            ca_report_bytes((double)s->requested, b2, sizeof b2));
    fprintf(f, "reserved now        %s\n", ca_report_bytes((double)s->reserved, b1, sizeof b1));
    fprintf(f, "peak allocated      %s\n", ca_report_bytes((double)s->peak_allocated, b1, sizeof b1));
    fprintf(f, "peak reserved       %s\n", ca_report_bytes((double)s->peak_reserved, b1, sizeof b1));
    fprintf(f, "allocations, frees  %" PRIu64 ", %" PRIu64 "\n", s->n_allocs, s->n_frees);
    if (c->frag.have_device)
        fprintf(f, "device              %s free of %s\n", ca_report_bytes((double)c->frag.device_free, b1, sizeof b1),
                ca_report_bytes((double)c->frag.device_total, b2, sizeof b2));
    if (s->n_bounds) {
        /* The healthy part of the memory: what stays live across boundaries. */
        const ca_boundary *last = &s->bounds[s->n_bounds - 1];
        fprintf(f, "kept across the last boundary  %s in %" PRIu64 " allocations (weights, gradients, "
                   "optimizer state, and whatever leaks)\n",
                ca_report_bytes((double)last->allocated, b1, sizeof b1), last->live_count);
    }
    if (c->have_blocks) {
        char text[512];
        ca_report_blocks_text(c, text, sizeof text);
        fprintf(f, "repeated blocks     %s: not iterations\n", text);
    }
    peak(c, f);

    fprintf(f, "\n== Leaks\n");
    if (c->opt.no_trace)
        para(f, "", "No trace: leaks show over time, and the snapshot holds its segments only. " CA_HOW_TO_RECORD);
    else if (c->verdict == CA_VERDICT_SINGLE_PASS || c->base_verdict == CA_VERDICT_SINGLE_PASS)
        fprintf(f, "Not judged: fewer than two whole iterations (a leak is memory kept more at every boundary).\n");
    else if (!s->iteration)
        fprintf(f, "No iteration boundaries: the diagnosis needs them (cudalloc_step(), an NVTX range, or a "
                   "repeating loop to detect).\n");
    else if (!c->n_leak_findings)
        fprintf(f, "None: no call site piled up allocations across iterations after warm-up (%u).\n", s->warmup);
    for (size_t i = 0; i < c->n_leak_findings; i++) finding(c, f, i);
    size_t handed = 0;
    for (size_t i = c->n_leak_findings; i < c->n_findings; i++) handed += c->findings[i].handoff;
    if (c->n_findings > c->n_leak_findings + handed)
        fprintf(f, "%s slow growth below is under %.1f%% of the working set (%s) per iteration%s. Notes, not "
                   "leaks.\n",
                c->n_leak_findings ? "\nThe" : "The", 100.0 / CA_NOTE_WORKING_SETS,
                ca_report_bytes((double)c->working_set, b1, sizeof b1),
                c->have_headroom ? ", and the device would not be full within " CA_STR(CA_NOTE_DEVICE_ITERATIONS_INT)
                                   " iterations" : "");
    if (handed)
        fprintf(f, "%sThe hand-offs below grow at some call sites while others shrink by about as much: the memory "
                   "kept across boundaries is flat. Notes, not leaks.\n", c->n_leak_findings ? "\n" : "");
    for (size_t i = c->n_leak_findings; i < c->n_findings; i++) finding(c, f, i);
    if (c->n_leak_findings > 1 && c->leak_oom_iteration >= 0)
        fprintf(f, "\nAll leaks together (+%s per iteration): the device runs out at iteration %" PRId64 ".\n",
                ca_report_bytes(c->leak_rate, b1, sizeof b1), c->leak_oom_iteration);

    live_sites(c, f);

    const ca_frag *fr = &c->frag;
    fprintf(f, "\n== Fragmentation\n");
    fprintf(f, "reserved %s, allocated %s, cached free %s in %zu segment%s\n",
            ca_report_bytes((double)fr->reserved, b1, sizeof b1), ca_report_bytes((double)fr->allocated, b2, sizeof b2),
            ca_report_bytes((double)fr->cached_free, b3, sizeof b3), fr->n_segs, fr->n_segs == 1 ? "" : "s");
    fprintf(f, "largest free block %s; fragmentation %.1f%% (1 - largest free / free)\n",
            ca_report_bytes((double)fr->largest_free, b1, sizeof b1), fr->fragmentation * 100);
    fprintf(f, "largest allocation that would succeed now without growing: %s\n",
            ca_report_bytes((double)fr->largest_allocation_now, b1, sizeof b1));
    if (fr->have_device)
        fprintf(f, "device free memory: %s of %s\n", ca_report_bytes((double)fr->device_free, b1, sizeof b1),
                ca_report_bytes((double)fr->device_total, b2, sizeof b2));
    external(c, f, "");
    fprintf(f, "free blocks by size:%s\n", fr->cached_free ? "" : " (none)");
    for (int b = 0; b < CA_FRAG_BINS; b++) {
        if (!fr->hist_count[b]) continue;
        fprintf(f, "  >= %-10s %8" PRIu64 " blocks  %s\n", ca_report_bytes((double)ca_frag_bin_min(b), b1, sizeof b1),
                fr->hist_count[b], ca_report_bytes((double)fr->hist_bytes[b], b2, sizeof b2));
    }
    const ca_frag_segment **shown;
    size_t n_shown = ca_report_segments_shown(c, MAX_SEGMENTS_SHOWN, &shown);
    if (fr->n_segs > n_shown)
        fprintf(f, "segments (the %zu of %zu holding the most free memory):\n", n_shown, fr->n_segs);
    else if (fr->n_segs)
        fprintf(f, "segments:\n");
    for (size_t i = 0; i < n_shown; i++) {
        const ca_frag_segment *g = shown[i];
        fprintf(f, "  0x%012" PRIxPTR " %-5s reserved %-10s allocated %-10s free %-10s largest free %-10s (%.0f%%)\n",
                g->addr, g->pool == 1 ? "small" : g->pool == 2 ? "large" : "",
                ca_report_bytes((double)g->reserved, b1, sizeof b1), ca_report_bytes((double)g->allocated, b2, sizeof b2),
                ca_report_bytes((double)g->cached_free, b3, sizeof b3),
                ca_report_bytes((double)g->largest_free, b4, sizeof b4), g->fragmentation * 100);
    }
    if (fr->n_segs > n_shown) fprintf(f, "  ... %zu more\n", fr->n_segs - n_shown);
    free(shown);

    if (c->opt.replay) replay(c, f);

    fprintf(f, "\n== ");
    ca_fixes_txt(f, &c->fixes, (const char *const *)c->fix_frames);

    fprintf(f, "== Out of memory\n");
    if (!s->n_ooms_total) fprintf(f, "No allocation failed.\n");
    for (size_t i = 0; i < s->n_ooms; i++) {
        const ca_oom_record *r = &s->ooms[i];
        fprintf(f, "\nOOM %zu at iteration %u: %s requested\n", i + 1, r->iteration,
                ca_report_bytes((double)r->requested, b1, sizeof b1));
        if (r->have_info) {
            const ca_oom_info *in = &r->info;
            if (!in->device_total)
                fprintf(f, "  device: its size and free memory were not recorded (--capacity gives the size)\n");
            else
                fprintf(f, "  device: %s free of %s%s\n", ca_report_bytes((double)in->device_free, b1, sizeof b1),
                        ca_report_bytes((double)in->device_total, b2, sizeof b2),
                        in->device_total_inferred ? " (the total inferred: reserved + free; the snapshot does not "
                                                    "record the device's size, --capacity gives it)"
                                                  : "");
            fprintf(f, "  allocated %s, reserved %s, cached %s, largest free block %s\n",
                    ca_report_bytes((double)in->allocated, b1, sizeof b1), ca_report_bytes((double)in->reserved, b2, sizeof b2),
                    ca_report_bytes((double)in->free_cached, b3, sizeof b3),
                    ca_report_bytes((double)in->largest_free, b4, sizeof b4));
            external(c, f, "  ");
            fprintf(f, "  verdict: %s: %s\n", ca_oom_verdict_name(r->verdict), ca_oom_verdict_text(r->verdict));
            if (r->n_leaks)
                fprintf(f, "  leaking call sites then: %u, holding %s\n", r->n_leaks,
                        ca_report_bytes((double)r->leaked_bytes, b1, sizeof b1));
        }
        fprintf(f, "  failed call:\n");
        frames(c, f, r->site, "    ");
        for (uint32_t k = 0; k < r->n_top; k++) {
            char label[512];
            ca_report_site_label(c, r->top_site[k], label, sizeof label);
            fprintf(f, "  live site %u: %s in %" PRIu64 " allocations: %s\n", k + 1,
                    ca_report_bytes((double)r->top_bytes[k], b1, sizeof b1), r->top_count[k], label);
        }
        if (r->have_info) {
            char lines[CA_REPORT_ADVICE_MAX][CA_FIX_LINE];
            size_t n = ca_report_oom_advice(c, r, lines, CA_REPORT_ADVICE_MAX);
            fprintf(f, "  what to do:\n");
            for (size_t k = 0; k < n; k++) para2(f, "    - ", "      ", lines[k]);
        }
    }
    if (s->n_ooms_total > s->n_ooms)
        fprintf(f, "(%" PRIu64 " more failures not kept)\n", s->n_ooms_total - s->n_ooms);
    return ferror(f) ? -1 : 0;
}
