/* Shared by the host and count backends: the handle table and ca_backend_used. */
#include "backend_common.h"

#include <stdlib.h>

const char ca_backend_host_name[] = "host";
const char ca_backend_count_name[] = "count";

ca_hslot *ca_htable_add(ca_htable *t, size_t size, ca_handle *h)
{
    uint32_t i;
    if (t->free_head) {
        i = t->free_head - 1;
        t->free_head = t->slot[i].next_free;
    } else {
        if (t->n == t->cap) {
            if (t->cap >= CA_HTABLE_MAX / 2) return NULL;
            uint32_t cap = t->cap ? t->cap * 2 : 64;
            ca_hslot *s = realloc(t->slot, (size_t)cap * sizeof *s);
            if (!s) return NULL;
            t->slot = s;
            t->cap = cap;
        }
        i = t->n++;
        t->slot[i].gen = 1;
    }
    ca_hslot *s = &t->slot[i];
    uint32_t gen = s->gen;
    *s = (ca_hslot){.size = size, .gen = gen};
    *h = ((uint64_t)gen << 32) | ((uint64_t)i + 1);
    return s;
}

void ca_htable_del(ca_htable *t, uint32_t i)
{
    ca_hslot *s = &t->slot[i];
    if (s->n_ext > 1) free(s->ext);
    s->size = 0;
    s->n_ext = 0;
    s->ext = NULL;
    s->gen++;
    if (s->gen == 0) s->gen = 1; /* wrapped: any nonzero generation will do */
    s->next_free = t->free_head;
    t->free_head = i + 1;
}

void ca_htable_fini(ca_htable *t)
{
    for (uint32_t i = 0; i < t->n; i++)
        if (t->slot[i].n_ext > 1) free(t->slot[i].ext);
    free(t->slot);
    *t = (ca_htable){0};
}

size_t ca_backend_used(const ca_backend *be)
{
    if (!be) return 0;
    if (be->name == ca_backend_host_name || be->name == ca_backend_count_name)
        return ca_acct_used((const ca_acct *)be->self);
    /* Another backend (cuda): what its device says is taken. */
    size_t free_b, total;
    if (be->mem_info && be->mem_info(be->self, &free_b, &total) == CA_OK && total >= free_b)
        return total - free_b;
    return 0;
}
