/* See livetab.h. uthash did this before: its add, find and delete cost about
 * 250 instructions a tracked alloc+free pair, a third of the tracker's own
 * work at a shallow stack (issue 29). */
#include "reports/track/livetab.h"

#include <stdlib.h>

#include "reports/track/tracker_internal.h"

/* Fibonacci hashing: the top bits of the product, the best mixed. */
static size_t home(const ca_livetab *t, uintptr_t addr) {
    return (size_t)(((uint64_t)addr * 0x9E3779B97F4A7C15ull) >> t->shift);
}

/* Puts l in its slot; returns the entry of the same address it took the
 * place of, or NULL. */
static live *place(ca_livetab *t, live *l) {
    size_t i = home(t, l->addr);
    for (live *o; (o = t->slot[i]); i = (i + 1) & t->mask)
        if (o->addr == l->addr) {
            t->slot[i] = l;
            return o;
        }
    t->slot[i] = l;
    return NULL;
}

static void unlink_entry(ca_livetab *t, live *l) {
    if (l->prev) l->prev->next = l->next;
    else t->head = l->next;
    if (l->next) l->next->prev = l->prev;
    else t->tail = l->prev;
}

static bool grow(ca_livetab *t) {
    size_t cap = t->slot ? 2 * (t->mask + 1) : 64;
    live **old = t->slot;
    size_t old_cap = old ? t->mask + 1 : 0;
    if (!(t->slot = calloc(cap, sizeof *t->slot))) {
        t->slot = old;
        return false;
    }
    t->mask = cap - 1;
    t->shift = 64 - (unsigned)__builtin_ctzll(cap);
    for (size_t i = 0; i < old_cap; i++)
        if (old[i]) place(t, old[i]);
    free(old);
    return true;
}

live *ca_livetab_find(const ca_livetab *t, uintptr_t addr) {
    if (!t->slot) return NULL;
    for (size_t i = home(t, addr);; i = (i + 1) & t->mask) {
        live *l = t->slot[i];
        if (!l || l->addr == addr) return l;
    }
}

bool ca_livetab_add(ca_livetab *t, live *l, live **replaced) {
    if ((!t->slot || 2 * (t->n + 1) > t->mask + 1) && !grow(t)) return false;
    if ((*replaced = place(t, l))) unlink_entry(t, *replaced);
    else t->n++;
    l->next = NULL;
    l->prev = t->tail;
    if (t->tail) t->tail->next = l;
    else t->head = l;
    t->tail = l;
    return true;
}

/* Empties slot i, which holds l. */
static void remove_at(ca_livetab *t, size_t i, live *l) {
    /* Backward shift: a later entry of the run moves into the hole when the
     * hole lies on its probe path (between its home and where it sits). */
    for (size_t j = (i + 1) & t->mask; t->slot[j]; j = (j + 1) & t->mask) {
        size_t h = home(t, t->slot[j]->addr);
        if (((j - h) & t->mask) >= ((j - i) & t->mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i] = NULL;
    t->n--;
    unlink_entry(t, l);
}

void ca_livetab_remove(ca_livetab *t, live *l) {
    size_t i = home(t, l->addr);
    while (t->slot[i] != l) i = (i + 1) & t->mask;
    remove_at(t, i, l);
}

live *ca_livetab_take(ca_livetab *t, uintptr_t addr) {
    if (!t->slot) return NULL;
    for (size_t i = home(t, addr);; i = (i + 1) & t->mask) {
        live *l = t->slot[i];
        if (!l) return NULL;
        if (l->addr == addr) {
            remove_at(t, i, l);
            return l;
        }
    }
}

size_t ca_livetab_memory(const ca_livetab *t) { return t->slot ? (t->mask + 1) * sizeof *t->slot : 0; }

void ca_livetab_free(ca_livetab *t) {
    free(t->slot);
    *t = (ca_livetab){0};
}
