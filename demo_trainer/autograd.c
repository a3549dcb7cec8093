/* The tape and the backward engine (see autograd.h). */
#include "demo_trainer/autograd.h"

#include <string.h>

long ag_live_nodes;
static uint64_t tape_seq;
static uint32_t visit_epoch;
static int grad_on = 1;

int ag_grad_enabled(void) { return grad_on; }

int ag_set_grad_enabled(int on) {
    int prev = grad_on;
    grad_on = on;
    return prev;
}

ag_node *ag_node_new(const char *name, ag_backward_fn *backward, dt_tensor *in0, dt_tensor *in1) {
    ag_node *n = calloc(1, sizeof *n);
    if (!n) DT_FATAL("out of host memory");
    n->refs = 1;
    n->seq = ++tape_seq;
    n->name = name;
    n->backward = backward;
    n->next[0] = in0 ? ag_node_retain(in0->grad_fn) : NULL;
    n->next[1] = in1 ? ag_node_retain(in1->grad_fn) : NULL;
    ag_live_nodes++;
    return n;
}

void ag_node_save(ag_node *n, int slot, dt_storage *s) {
    if (slot < 0 || slot >= AG_MAX_SAVED || n->saved[slot]) DT_FATAL("%s: bad saved slot %d", n->name, slot);
    n->saved[slot] = storage_retain(s);
}

ag_node *ag_node_retain(ag_node *n) {
    if (n) n->refs++;
    return n;
}

static void drop_saved(ag_node *n) {
    for (int i = 0; i < AG_MAX_SAVED; i++) {
        storage_release(n->saved[i]);
        n->saved[i] = NULL;
    }
}

/* Iterative: a chain of nodes (running_loss = running_loss + loss over many steps) is
 * as long as the run. */
void ag_node_release(ag_node *n) {
    ag_node *stack[64];
    ag_node **st = stack;
    size_t top = 0, cap = 64;
    if (n) st[top++] = n;
    while (top) {
        ag_node *x = st[--top];
        if (x->refs <= 0) DT_FATAL("node %s released once too often", x->name);
        if (--x->refs) continue;
        drop_saved(x);
        storage_release(x->grad);
        for (int i = 0; i < AG_MAX_NEXT; i++) {
            if (!x->next[i]) continue;
            if (top == cap) {
                ag_node **bigger = malloc(2 * cap * sizeof *bigger);
                if (!bigger) DT_FATAL("out of host memory");
                memcpy(bigger, st, top * sizeof *st);
                if (st != stack) free(st);
                st = bigger;
                cap *= 2;
            }
            st[top++] = x->next[i];
        }
        free(x);
        ag_live_nodes--;
    }
    if (st != stack) free(st);
}

static int later_first(const void *a, const void *b) {
    uint64_t x = (*(ag_node *const *)a)->seq, y = (*(ag_node *const *)b)->seq;
    return x < y ? 1 : x > y ? -1 : 0;
}

typedef struct node_list {
    ag_node **v;
    size_t n, cap;
} node_list;

static void push(node_list *l, ag_node *x) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) DT_FATAL("out of host memory");
    }
    l->v[l->n++] = x;
}

void ag_backward(dt_tensor *root, dt_storage *grad) {
    ag_node *r = root->grad_fn;
    if (!r) DT_FATAL("backward from a tensor that does not require grad");
    if (!grad && root->numel != 1) DT_FATAL("backward from a non-scalar needs its gradient");

    /* The nodes reachable from root, each once. */
    uint32_t epoch = ++visit_epoch;
    node_list order = {0}, todo = {0};
    push(&todo, r);
    r->visit = epoch;
    while (todo.n) {
        ag_node *x = todo.v[--todo.n];
        if (x->released)
            DT_FATAL("backward through %s a second time: its saved tensors were already freed", x->name);
        push(&order, x);
        for (int i = 0; i < AG_MAX_NEXT; i++)
            if (x->next[i] && x->next[i]->visit != epoch) {
                x->next[i]->visit = epoch;
                push(&todo, x->next[i]);
            }
    }
    free(todo.v);
    qsort(order.v, order.n, sizeof *order.v, later_first);

    if (grad) {
        if (r->grad) DT_FATAL("%s already has a gradient", r->name);
        r->grad = storage_retain(grad);
    } else {
        r->gscalar = 1.0f;
        r->has_gscalar = 1;
    }
    int prev = ag_set_grad_enabled(0);
    for (size_t i = 0; i < order.n; i++) {
        ag_node *x = order.v[i];
        if (x->scalar ? x->has_gscalar : x->grad != NULL) x->backward(x);
        storage_release(x->grad);
        x->grad = NULL;
        x->has_gscalar = 0;
        x->gscalar = 0;
        drop_saved(x);
        x->released = 1;
    }
    ag_set_grad_enabled(prev);
    free(order.v);
}

static void sink_backward(ag_node *n) { (void)n; }

ag_node *ag_sink_new(ag_node *target) {
    ag_node *n = ag_node_new("CheckpointInput", sink_backward, NULL, NULL);
    n->grad_bytes = target->grad_bytes;
    AG_GRAD(target);
    n->grad = storage_retain(target->grad);
    return n;
}
