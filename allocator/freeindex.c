/* The free-block index of a pool: bins by size, a treap per bin ordered by
 * (size, address). Best fit with ties broken by the lowest address. */
#include "internal.h"

static inline int bin_of(size_t size) {
    size_t u = size / CA_ROUND;
    if (u < 64) return (int)u; /* exact bins up to 32 KiB */
    int fl = 63 - __builtin_clzll(u);
    int b = 64 + (fl - 6) * 8 + (int)((u >> (fl - 3)) & 7);
    return b < CA_BINS ? b : CA_BINS - 1;
}

/* Treap priority from the address: deterministic, and random enough to keep
 * the expected depth logarithmic. */
static inline uint32_t prio(const ca_block *b) {
    return (uint32_t)(((uint64_t)(b->addr >> 9) * 0x9E3779B97F4A7C15ull) >> 32);
}

static inline bool key_less(const ca_block *x, const ca_block *y) {
    return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

/* x takes its parent's place. */
static void rotate_up(ca_block **root, ca_block *x) {
    ca_block *p = x->parent, *g = p->parent;
    if (p->left == x) {
        p->left = x->right;
        if (x->right) x->right->parent = p;
        x->right = p;
    } else {
        p->right = x->left;
        if (x->left) x->left->parent = p;
        x->left = p;
    }
    p->parent = x;
    x->parent = g;
    if (!g) *root = x;
    else if (g->left == p) g->left = x;
    else g->right = x;
}

void ca_free_index_insert(ca_free_index *fi, ca_block *x) {
    int bin = bin_of(x->size);
    ca_block **root = &fi->root[bin];
    if (!*root) fi->bitmap[bin / 64] |= 1ull << (bin % 64);
    x->left = x->right = NULL;
    ca_block **link = root, *parent = NULL;
    while (*link) {
        parent = *link;
        link = key_less(x, parent) ? &parent->left : &parent->right;
    }
    *link = x;
    x->parent = parent;
    while (x->parent && prio(x->parent) < prio(x)) rotate_up(root, x);
    x->bin = bin;
    fi->count++;
}

void ca_free_index_remove(ca_free_index *fi, ca_block *x) {
    int bin = x->bin;
    ca_block **root = &fi->root[bin];
    while (x->left && x->right)
        rotate_up(root, prio(x->left) > prio(x->right) ? x->left : x->right);
    ca_block *child = x->left ? x->left : x->right;
    if (child) child->parent = x->parent;
    if (!x->parent) *root = child;
    else if (x->parent->left == x) x->parent->left = child;
    else x->parent->right = child;
    if (!*root) fi->bitmap[bin / 64] &= ~(1ull << (bin % 64));
    x->bin = -1;
    x->left = x->right = x->parent = NULL;
    fi->count--;
}

static int next_bin(const ca_free_index *fi, int from) {
    if (from >= CA_BINS) return -1;
    int w = from / 64;
    uint64_t bits = fi->bitmap[w] & (~0ull << (from % 64));
    for (;;) {
        if (bits) return w * 64 + __builtin_ctzll(bits);
        if (++w >= CA_BIN_WORDS) return -1;
        bits = fi->bitmap[w];
    }
}

static ca_block *leftmost(ca_block *n) {
    while (n->left) n = n->left;
    return n;
}

ca_block *ca_free_index_best_fit(ca_free_index *fi, size_t size) {
    int bin = bin_of(size);
    /* The first bin may hold blocks smaller than the request: search it. */
    ca_block *best = NULL;
    for (ca_block *n = fi->root[bin]; n;) {
        if (n->size >= size) { best = n; n = n->left; }
        else n = n->right;
    }
    if (best) return best;
    int next = next_bin(fi, bin + 1);
    return next < 0 ? NULL : leftmost(fi->root[next]);
}

ca_block *ca_free_index_largest(ca_free_index *fi) {
    for (int w = CA_BIN_WORDS - 1; w >= 0; w--) {
        if (!fi->bitmap[w]) continue;
        ca_block *n = fi->root[w * 64 + 63 - __builtin_clzll(fi->bitmap[w])];
        while (n->right) n = n->right;
        return n;
    }
    return NULL;
}

/* The highest non-empty bin at or below `from`; -1 when none. */
static int prev_bin(const ca_free_index *fi, int from) {
    if (from < 0) return -1;
    int w = from / 64;
    uint64_t bits = fi->bitmap[w] & (~0ull >> (63 - from % 64));
    for (;;) {
        if (bits) return w * 64 + 63 - __builtin_clzll(bits);
        if (--w < 0) return -1;
        bits = fi->bitmap[w];
    }
}

static ca_block *rightmost(ca_block *n) {
    while (n->right) n = n->right;
    return n;
}

ca_block *ca_free_index_smaller(ca_free_index *fi, ca_block *b) {
    if (b->left) return rightmost(b->left);
    for (ca_block *n = b; n->parent; n = n->parent)
        if (n->parent->right == n) return n->parent;
    int bin = prev_bin(fi, b->bin - 1);
    return bin < 0 ? NULL : rightmost(fi->root[bin]);
}

ca_block *ca_free_index_lowest_near(ca_free_index *fi, ca_block *b, int n) {
    ca_block *low = b;
    while (n-- > 0 && (b = ca_free_index_larger(fi, b)))
        if (b->addr < low->addr) low = b;
    return low;
}

ca_block *ca_free_index_larger(ca_free_index *fi, ca_block *b) {
    if (b->right) return leftmost(b->right);
    for (ca_block *n = b; n->parent; n = n->parent)
        if (n->parent->left == n) return n->parent;
    int bin = next_bin(fi, b->bin + 1);
    return bin < 0 ? NULL : leftmost(fi->root[bin]);
}

static void walk(ca_block *n, void (*fn)(void *, ca_block *), void *ctx) {
    while (n) {
        walk(n->left, fn, ctx);
        ca_block *right = n->right; /* fn may not modify the tree, but be safe */
        fn(ctx, n);
        n = right;
    }
}

void ca_free_index_walk(ca_free_index *fi, void (*fn)(void *ctx, ca_block *b), void *ctx) {
    for (int bin = next_bin(fi, 0); bin >= 0; bin = next_bin(fi, bin + 1)) walk(fi->root[bin], fn, ctx);
}
