/* --sweep (see sweep.h). */
#define _GNU_SOURCE
#include "demo_trainer/sweep.h"

#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/cudalloc.h"

void sweep_write_row(const char *path, const dt_args *a, const dt_result *r, const char *fits) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f,
            "{\"micro_batch\": %d, \"accum\": %d, \"peak_allocated_bytes\": %zu, \"peak_reserved_bytes\": %zu, "
            "\"peak_activation_bytes\": %zu, \"persistent_bytes\": %zu, \"step_ms\": %.3f, \"tokens_per_s\": %.1f, "
            "\"final_loss\": %.6f, \"fits\": \"%s\"}\n",
            a->B / a->accum, a->accum, r->peak_allocated, r->peak_reserved, r->peak_activations, r->persistent,
            r->step_ms, r->tokens_per_s, isfinite(r->final_loss) ? r->final_loss : 0.0, fits);
    fclose(f);
}

typedef struct row {
    const char *config;
    int accum, bf16, ckpt, capped;
    int ok;                     /* a result came back */
    int micro_batch;
    double peak_alloc, peak_res, act, persistent, step_ms, tps, loss;
    char fits[200];
} row;

static double field(const char *json, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = strstr(json, k);
    return p ? strtod(p + strlen(k), NULL) : NAN;
}

static void parse_row(row *r, const char *json) {
    r->micro_batch = (int)field(json, "micro_batch");
    r->peak_alloc = field(json, "peak_allocated_bytes");
    r->peak_res = field(json, "peak_reserved_bytes");
    r->act = field(json, "peak_activation_bytes");
    r->persistent = field(json, "persistent_bytes");
    r->step_ms = field(json, "step_ms");
    r->tps = field(json, "tokens_per_s");
    r->loss = field(json, "final_loss");
    const char *p = strstr(json, "\"fits\": \"");
    if (p) {
        p += 9;
        size_t n = strcspn(p, "\"");
        snprintf(r->fits, sizeof r->fits, "%.*s", (int)n, p);
    }
    r->ok = 1;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    if (buf) fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

/* Run one configuration as a child; fill r. */
static void run_child(const dt_args *a, row *r, const char *dir, int steps) {
    char result[4096], log[4096];
    snprintf(result, sizeof result, "%s/%s.json", dir, r->config);
    snprintf(log, sizeof log, "%s/%s.log", dir, r->config);
    unlink(result);
    char num[16][32];
    const char *argv[64];
    int n = 0, k = 0;
#define ARG(s) (argv[n++] = (s))
#define NUM(flag, fmt, v) (ARG(flag), snprintf(num[k], sizeof num[k], fmt, v), ARG(num[k++]))
    ARG("demo_trainer");
    NUM("--layers", "%d", a->L);
    NUM("--channels", "%d", a->C);
    NUM("--heads", "%d", a->NH);
    NUM("--seq", "%d", a->T);
    NUM("--batch", "%d", a->B);
    NUM("--steps", "%d", steps);
    NUM("--print-every", "%d", steps);
    NUM("--lr", "%g", (double)a->lr);
    NUM("--seed", "%llu", (unsigned long long)a->seed);
    NUM("--accum", "%d", r->accum);
    if (a->peak_tflops > 0) NUM("--peak-tflops", "%g", a->peak_tflops);
    if (r->bf16) ARG("--precision"), ARG("bf16");
    if (r->ckpt) ARG("--checkpoint");
    if (a->device) ARG("--device"), ARG(a->device);
    if (a->data) ARG("--data"), ARG(a->data);
    if (r->capped && a->capacity) NUM("--mem-cap", "%zu", a->capacity);
    ARG("--result");
    ARG(result);
    argv[n] = NULL;
#undef ARG
#undef NUM
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) DT_FATAL("fork failed");
    if (pid == 0) {
        FILE *l = freopen(log, "w", stdout);
        if (!l || dup2(fileno(stdout), 2) < 0) _exit(126);
        unsetenv("CUDALLOC_REPORT"); /* the children write no reports over the parent's */
        if (r->capped && a->capacity) {
            char cap[32], conf[4096];
            snprintf(cap, sizeof cap, "%zu", a->capacity);
            setenv("CUDALLOC_SIM_MEMORY", cap, 1);
            const char *old = getenv("CUDALLOC_CONF");
            snprintf(conf, sizeof conf, "%s%smax_reserved:%zu", old && *old ? old : "", old && *old ? "," : "",
                     a->capacity);
            setenv("CUDALLOC_CONF", conf, 1);
        } else if (a->capacity) {
            unsetenv("CUDALLOC_SIM_MEMORY"); /* the simulated device's default size */
        }
        execv("/proc/self/exe", (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    char *json = slurp(result);
    if (json && strstr(json, "\"fits\"")) {
        parse_row(r, json);
    } else {
        snprintf(r->fits, sizeof r->fits, "failed (%s %d)", WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        char *text = slurp(log);
        fprintf(stderr, "sweep: %s %s; its output:\n%s\n", r->config, r->fits, text ? text : "(none)");
        free(text);
    }
    free(json);
    unlink(result);
    unlink(log);
}

static const char *mib(double bytes, char *buf) {
    if (!isfinite(bytes)) return "-";
    snprintf(buf, 24, "%.2f MiB", bytes / 1048576.0);
    return buf;
}

static int fits(const row *r) { return r->ok && !strcmp(r->fits, "yes"); }

/* Peaks of a run that did not fit are those at the failure; its times are not shown. */
static void print_row(const row *r) {
    char b1[24], b2[24], b3[24], ms[16] = "-", tps[16] = "-", loss[16] = "-";
    if (fits(r)) {
        snprintf(ms, sizeof ms, "%.1f", r->step_ms);
        snprintf(tps, sizeof tps, "%.0f", r->tps);
        snprintf(loss, sizeof loss, "%.4f", r->loss);
    }
    printf("%-18s %6d %6d %13s %13s %13s %9s %10s %8s  %s\n", r->config, r->ok ? r->micro_batch : 0, r->accum,
           mib(r->peak_alloc, b1), mib(r->peak_res, b2), mib(r->act, b3), ms, tps, loss, r->fits);
}

int sweep_run(const dt_args *a) {
    int N = a->accum > 1 ? a->accum : 4;
    if (a->B % N) {
        fprintf(stderr, "demo_trainer: bad --batch '%d' for --sweep: accepted: a multiple of the accumulation %d\n",
                a->B, N);
        return 2;
    }
    int steps = a->steps_given ? a->steps : 3;
    row rows[10] = {
        {.config = "baseline", .accum = 1, .capped = 1},
        {.config = "accum", .accum = N, .capped = 1},
        {.config = "bf16", .accum = 1, .bf16 = 1, .capped = 1},
        {.config = "checkpoint", .accum = 1, .ckpt = 1, .capped = 1},
        {.config = "all", .accum = N, .bf16 = 1, .ckpt = 1, .capped = 1},
    };
    char tmpl[] = "/tmp/demo_trainer_sweep.XXXXXX";
    const char *tmpdir = getenv("TMPDIR");
    char dir[4096];
    if (tmpdir && *tmpdir) {
        snprintf(dir, sizeof dir, "%s/demo_trainer_sweep.XXXXXX", tmpdir);
        if (!mkdtemp(dir)) snprintf(dir, sizeof dir, "%s", mkdtemp(tmpl) ? tmpl : "/tmp");
    } else {
        snprintf(dir, sizeof dir, "%s", mkdtemp(tmpl) ? tmpl : "/tmp");
    }
    int preloaded = cudalloc_get_stats != NULL;
    printf("sweep: L=%d C=%d NH=%d T=%d B=%d, %d steps per config, capacity %s (%s)\n", a->L, a->C, a->NH, a->T,
           a->B, steps, a->capacity ? SZ(a->capacity) : "the device's",
           !a->capacity ? "no cap"
           : preloaded  ? "cudalloc max_reserved; the simulated device's size when on it"
                        : "the simulated device's size, or the trainer's own count on a GPU");
    printf("%-18s %6s %6s %13s %13s %13s %9s %10s %8s  %s\n", "config", "micro", "accum", "peak alloc",
           "peak reserved", "activations", "step ms", "tok/s", "loss", "fits");
    fflush(stdout);
    for (int i = 0; i < 5; i++) {
        run_child(a, &rows[i], dir, steps);
        print_row(&rows[i]);
        fflush(stdout);
    }
    /* The ratios need every configuration measured: one that did not fit runs again
     * without the cap ("-uncapped"), and the ratios use those figures. */
    int nrows = 5;
    const row *measured[5];
    char names[5][40];
    for (int i = 0; i < 5; i++) {
        measured[i] = &rows[i];
        if (fits(&rows[i]) || !a->capacity) continue;
        row *u = &rows[nrows++];
        *u = rows[i];
        snprintf(names[i], sizeof names[i], "%s-uncapped", rows[i].config);
        u->config = names[i];
        u->capped = 0;
        u->ok = 0;
        u->fits[0] = 0;
        run_child(a, u, dir, steps);
        print_row(u);
        fflush(stdout);
        measured[i] = u;
    }
    rmdir(dir);

    const row *base = measured[0];
    printf("measured (activations: the trainer's peak of activations, their gradients and batches; a config "
           "that did not fit is measured uncapped):\n");
    if (fits(base)) {
        const row *r;
        if (fits(r = measured[1]))
            printf("  accum %d: micro-batch %d -> %d (x%d smaller): activations %.2f -> %.2f MiB (x%.2f smaller)\n",
                   N, a->B, a->B / N, N, base->act / 1048576, r->act / 1048576, base->act / r->act);
        if (fits(r = measured[2]))
            printf("  bf16: activations %.2f -> %.2f MiB (x%.2f smaller; 2 expected: mean/rstd and losses stay fp32)\n",
                   base->act / 1048576, r->act / 1048576, base->act / r->act);
        if (fits(r = measured[3]))
            printf("  checkpoint: activations %.2f -> %.2f MiB (x%.2f smaller with %d layers: one block recomputed "
                   "and the %d block inputs remain)\n",
                   base->act / 1048576, r->act / 1048576, base->act / r->act, a->L, a->L);
        if (fits(r = measured[4]))
            printf("  all three: activations %.2f -> %.2f MiB (x%.2f smaller); peak allocated %.2f -> %.2f MiB\n",
                   base->act / 1048576, r->act / 1048576, base->act / r->act, base->peak_alloc / 1048576,
                   r->peak_alloc / 1048576);
    } else {
        printf("  the baseline did not run: no ratios\n");
    }
    if (a->capacity) {
        if (!fits(&rows[0])) {
            int any = 0;
            for (int i = 1; i < 5; i++) any |= fits(&rows[i]);
            printf("  at %s the baseline does not fit (%s)%s", SZ(a->capacity), rows[0].fits,
                   any ? "; it fits with:" : "; nothing fits");
            for (int i = 1; i < 5; i++)
                if (fits(&rows[i])) printf(" %s", rows[i].config);
            printf("\n");
        } else {
            printf("  at %s the baseline fits: pick a smaller --capacity to see a configuration that needs the "
                   "techniques\n", SZ(a->capacity));
        }
    }

    if (a->json) {
        FILE *f = fopen(a->json, "w");
        if (!f) {
            fprintf(stderr, "demo_trainer: --json %s: cannot write\n", a->json);
            return 1;
        }
        fprintf(f, "[\n");
        for (int i = 0; i < nrows; i++) {
            const row *r = &rows[i];
            fprintf(f,
                    "  {\"config\": \"%s\", \"micro_batch\": %d, \"accum\": %d, \"peak_allocated_bytes\": %.0f, "
                    "\"peak_reserved_bytes\": %.0f, \"peak_activation_bytes\": %.0f, \"step_ms\": %.3f, "
                    "\"tokens_per_s\": %.1f, \"final_loss\": %.6f, \"fits\": \"%s\", \"capacity_bytes\": %zu}%s\n",
                    r->config, r->ok ? r->micro_batch : a->B / r->accum, r->accum,
                    isfinite(r->peak_alloc) ? r->peak_alloc : 0, isfinite(r->peak_res) ? r->peak_res : 0,
                    isfinite(r->act) ? r->act : 0, isfinite(r->step_ms) ? r->step_ms : 0,
                    isfinite(r->tps) ? r->tps : 0, isfinite(r->loss) ? r->loss : 0, r->fits,
                    r->capped ? a->capacity : 0, i + 1 < nrows ? "," : "");
        }
        fprintf(f, "]\n");
        fclose(f);
        printf("sweep: rows written to %s\n", a->json);
    }
    for (int i = 0; i < nrows; i++)
        if (!rows[i].ok) return 1;
    return 0;
}
