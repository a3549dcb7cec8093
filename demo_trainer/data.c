/* Training text (see data.h). */
#include "demo_trainer/data.h"

#include <errno.h>
#include <string.h>

static const char *subjects[] = {"the cat", "a dog", "the old man", "my sister", "the bird", "a farmer",
                                 "the king", "our teacher", "the child", "a sailor"};
static const char *verbs[] = {"sees", "likes", "finds", "paints", "carries", "follows", "feeds", "wants"};
static const char *objects[] = {"the red ball", "a green apple", "the small boat", "a blue kite",
                                "the big house", "some bread", "the river", "a new hat"};
static const char *tails[] = {"", " today", " again", " in the morning", " at night"};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

void data_synthetic(dt_data *d) {
    size_t cap = 256 * 1024;
    d->bytes = malloc(cap);
    if (!d->bytes) DT_FATAL("out of host memory");
    dt_rng rng;
    dt_rng_seed(&rng, 20240517); /* the corpus never depends on --seed */
    size_t n = 0;
    char sentence[160];
    for (;;) {
        const char *s = subjects[dt_rng_u32(&rng) % N_OF(subjects)];
        const char *v = verbs[dt_rng_u32(&rng) % N_OF(verbs)];
        const char *o = objects[dt_rng_u32(&rng) % N_OF(objects)];
        const char *t = tails[dt_rng_u32(&rng) % N_OF(tails)];
        int len = snprintf(sentence, sizeof sentence, "%s %s %s%s.%s", s, v, o, t,
                           dt_rng_u32(&rng) % 4 ? " " : "\n");
        if (n + (size_t)len > cap) break;
        memcpy(d->bytes + n, sentence, (size_t)len);
        n += (size_t)len;
    }
    d->n = n;
    d->val_start = n - n / 10;
    d->source = "synthetic";
}

int data_load_file(dt_data *d, const char *path, int T) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "demo_trainer: --data %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) DT_FATAL("out of host memory");
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    fclose(f);
    size_t val = n / 10;
    if (val < (size_t)T + 1 || n - val < (size_t)T + 1) {
        fprintf(stderr, "demo_trainer: --data %s: %zu bytes is too short for --seq %d: accepted: a file of at least %zu bytes\n",
                path, n, T, (size_t)(T + 1) * 10);
        free(buf);
        return -1;
    }
    d->bytes = buf;
    d->n = n;
    d->val_start = n - val;
    d->source = path;
    return 0;
}

void data_free(dt_data *d) {
    free(d->bytes);
    memset(d, 0, sizeof *d);
}

void data_batch(const dt_data *d, int split, dt_rng *rng, int B, int T, int *inputs, int *targets) {
    size_t lo = split == SPLIT_VAL ? d->val_start : 0, hi = split == SPLIT_VAL ? d->n : d->val_start;
    size_t span = hi - lo - (size_t)T; /* starts in [lo, hi - T - 1] */
    for (int b = 0; b < B; b++) {
        size_t at = lo + (size_t)dt_rng_u32(rng) % span;
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = d->bytes[at + t];
            targets[b * T + t] = d->bytes[at + t + 1];
        }
    }
}
