/* The free-block index of a pool: bins by size; the exact bins (below
 * 32 KiB, one size each) hold a list, newest first, the others a treap
 * ordered by (size, address). Best fit: in an exact bin the block freed last
 * (its lines still in the caches), else the lowest address of the best size.
 * A list's insert and remove touch two neighbours; a treap's walk from its
 * root was a cache miss a level with 100,000 blocks free and live (issue 29).
 * "Order" below is the index's order: size, then list or address. */
#include "internal.h"

void ca_edges_mark(ca_segment *seg, const ca_block *b, bool on) {
    size_t first = ca_unit_of(seg, b->addr), last = first + b->size / CA_ROUND - 1;
    uint64_t f = 1ull << (first % 64), l = 1ull << (last % 64);
    if (on) {
        seg->free_edges[first / 64] |= f;
        seg->free_edges[last / 64] |= l;
    } else {
        seg->free_edges[first / 64] &= ~f;
        seg->free_edges[last / 64] &= ~l;
    }
}

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

/* bins [0, CA_EXACT_BINS): one size each, listed */
static inline bool listed(int bin) { return bin < CA_EXACT_BINS; }

/* A list: root is its head, tail its last; left and right are the previous
 * and next. Only the blocks' first 64 bytes are touched (ca_block). */
static void list_insert(ca_free_index *fi, int bin, ca_block *x) {
    ca_block *h = fi->root[bin];
    x->left = NULL;
    x->right = h;
    if (h) h->left = x;
    else fi->tail[bin] = x;
    fi->root[bin] = x;
}

static void list_remove(ca_free_index *fi, int bin, ca_block *x) {
    if (x->right) x->right->left = x->left;
    else fi->tail[bin] = x->left;
    if (x->left) x->left->right = x->right;
    else fi->root[bin] = x->right;
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
    x->bin = (int16_t)bin;
    fi->count++;
    if (listed(bin)) {
        list_insert(fi, bin, x);
    } else {
        x->left = x->right = NULL;
        ca_block **link = root, *parent = NULL;
        while (*link) {
            parent = *link;
            link = key_less(x, parent) ? &parent->left : &parent->right;
        }
        *link = x;
        x->parent = parent;
        while (x->parent && prio(x->parent) < prio(x)) rotate_up(root, x);
    }
    /* last, a tail call: without bitmaps the insert keeps no frame */
    if (__builtin_expect(x->seg->free_edges != NULL, 0)) ca_edges_mark(x->seg, x, true);
}

void ca_free_index_remove(ca_free_index *fi, ca_block *x) {
    int bin = x->bin;
    ca_block **root = &fi->root[bin];
    if (listed(bin)) {
        list_remove(fi, bin, x);
        goto out;
    }
    while (x->left && x->right)
        rotate_up(root, prio(x->left) > prio(x->right) ? x->left : x->right);
    ca_block *child = x->left ? x->left : x->right;
    if (child) child->parent = x->parent;
    if (!x->parent) *root = child;
    else if (x->parent->left == x) x->parent->left = child;
    else x->parent->right = child; /* (x->parent is left as it is: an insert sets it, and
                                      * it lies past the block's hot 64 bytes) */
out:
    if (!*root) fi->bitmap[bin / 64] &= ~(1ull << (bin % 64));
    x->bin = -1;
    x->left = x->right = NULL;
    fi->count--;
    if (__builtin_expect(x->seg->free_edges != NULL, 0)) ca_edges_mark(x->seg, x, false);
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

/* The first block of a non-empty bin in the index's order. */
static ca_block *first_of(const ca_free_index *fi, int bin) {
    return listed(bin) ? fi->root[bin] : leftmost(fi->root[bin]);
}

ca_block *ca_free_index_best_fit(ca_free_index *fi, size_t size) {
    int bin = bin_of(size);
    if (listed(bin)) { /* every block of the bin is the size */
        int at = next_bin(fi, bin);
        return at < 0 ? NULL : first_of(fi, at);
    }
    /* The first bin may hold blocks smaller than the request: search it. */
    ca_block *best = NULL;
    for (ca_block *n = fi->root[bin]; n;) {
        if (n->size >= size) { best = n; n = n->left; }
        else n = n->right;
    }
    if (best) return best;
    int next = next_bin(fi, bin + 1);
    return next < 0 ? NULL : first_of(fi, next);
}

static ca_block *rightmost(ca_block *n) {
    while (n->right) n = n->right;
    return n;
}

/* The last block of a non-empty bin in the index's order. */
static ca_block *last_of(const ca_free_index *fi, int bin) {
    return listed(bin) ? fi->tail[bin] : rightmost(fi->root[bin]);
}

ca_block *ca_free_index_largest(ca_free_index *fi) {
    for (int w = CA_BIN_WORDS - 1; w >= 0; w--)
        if (fi->bitmap[w]) return last_of(fi, w * 64 + 63 - __builtin_clzll(fi->bitmap[w]));
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

ca_block *ca_free_index_smaller(ca_free_index *fi, ca_block *b) {
    if (listed(b->bin)) {
        if (b->left) return b->left;
    } else {
        if (b->left) return rightmost(b->left);
        for (ca_block *n = b; n->parent; n = n->parent)
            if (n->parent->right == n) return n->parent;
    }
    int bin = prev_bin(fi, b->bin - 1);
    return bin < 0 ? NULL : last_of(fi, bin);
}

ca_block *ca_free_index_lowest_near(ca_free_index *fi, ca_block *b, int n) {
    ca_block *low = b;
    while (n-- > 0 && (b = ca_free_index_larger(fi, b)))
        if (b->addr < low->addr) low = b;
    return low;
}

ca_block *ca_free_index_larger(ca_free_index *fi, ca_block *b) {
    if (listed(b->bin)) {
        if (b->right) return b->right;
    } else {
        if (b->right) return leftmost(b->right);
        for (ca_block *n = b; n->parent; n = n->parent)
            if (n->parent->left == n) return n->parent;
    }
    int bin = next_bin(fi, b->bin + 1);
    return bin < 0 ? NULL : first_of(fi, bin);
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
    for (int bin = next_bin(fi, 0); bin >= 0; bin = next_bin(fi, bin + 1)) {
        if (!listed(bin)) {
            walk(fi->root[bin], fn, ctx);
            continue;
        }
        for (ca_block *n = fi->root[bin], *next; n; n = next) {
            next = n->right;
            fn(ctx, n);
        }
    }
}
