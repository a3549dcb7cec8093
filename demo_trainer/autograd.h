/* A small tape-based autograd with reference counts, shaped like PyTorch's.
 *
 * Each op run with grad recording on makes one node (its grad_fn): the node holds a
 * reference to the nodes that made its inputs (next[]), the storage it needs for
 * backward (saved[]), and the parameters whose gradients it adds to (p[]). The output
 * tensor holds the node; so holding any tensor holds the graph behind it, the saved
 * activations included, until backward runs through it. Nodes are numbered in the
 * order they were made (the tape): backward runs them in reverse.
 *
 * ag_backward(root) runs every node reachable from root, latest first. Each node
 * receives the gradient of its output (a device buffer, made and zeroed by the first
 * consumer that adds to it, or a host float for scalar outputs), adds its inputs'
 * gradients, and is then "released": its gradient and its saved storage are dropped,
 * which is what frees the activations. A released node stays as long as something
 * holds it (host memory only); running backward through it again is an error, as in
 * PyTorch ("Trying to backward through the graph a second time").
 *
 * With recording off (ag_set_grad_enabled(0), torch.no_grad()) ops make no nodes and
 * save nothing: each intermediate is freed as soon as its last tensor is released. */
#ifndef DT_AUTOGRAD_H
#define DT_AUTOGRAD_H

#include "demo_trainer/tensor.h"

#define AG_MAX_NEXT 2
#define AG_MAX_SAVED 4

typedef struct ag_node ag_node;
typedef void ag_backward_fn(ag_node *n);
/* A checkpointed piece of the model: y = fn(ctx, layer, x). */
typedef dt_tensor *ag_block_fn(void *ctx, int layer, dt_tensor *x);

struct ag_node {
    int refs;
    uint64_t seq;               /* position on the tape */
    const char *name;           /* "MatmulBackward", ... */
    ag_backward_fn *backward;
    ag_node *next[AG_MAX_NEXT]; /* grad_fn of each input; NULL: that input needs no gradient */
    dt_storage *saved[AG_MAX_SAVED];
    dt_param *p[2];             /* parameters whose gradients backward adds to */
    int released;               /* backward ran; saved storage dropped */

    /* The gradient of this node's output. */
    int scalar;                 /* output is a scalar: gradient in gscalar */
    float gscalar;
    int has_gscalar;
    dt_storage *grad;           /* (output's shape) [dt], else */
    size_t grad_bytes;

    /* The op's arguments. */
    kernels_dtype dt;
    int B, T, C, OC, NH, V;
    float f;
    ag_block_fn *block;         /* checkpoint: the piece to recompute */
    void *ctx;
    int layer;
    uint32_t visit;             /* the engine's mark */
};

/* Is grad recording on? Set returns the previous setting. */
int ag_grad_enabled(void);
int ag_set_grad_enabled(int on);

/* A node with refs 1 (for the output tensor to hold), inputs' grad_fns as next[]. */
ag_node *ag_node_new(const char *name, ag_backward_fn *backward, dt_tensor *in0, dt_tensor *in1);
void ag_node_save(ag_node *n, int slot, dt_storage *s); /* holds a reference to s */
ag_node *ag_node_retain(ag_node *n);
void ag_node_release(ag_node *n);

/* The gradient buffer of node n's output, made (where this is written, see DEV_ALLOC)
 * and zeroed on first use; backward ops add into it. */
#define AG_GRAD(n)                                                                         \
    ({                                                                                     \
        ag_node *gr_n_ = (n);                                                              \
        if (!gr_n_->grad) {                                                                \
            gr_n_->grad = STORAGE_NEW(gr_n_->grad_bytes, MEM_ACTGRAD);                     \
            dev_memset0(gr_n_->grad->ptr, gr_n_->grad_bytes);                              \
        }                                                                                  \
        gr_n_->grad->ptr;                                                                  \
    })

/* Backward from root. A scalar root gets gradient 1 (grad NULL); any other root the
 * gradient in grad, which the caller keeps. */
void ag_backward(dt_tensor *root, dt_storage *grad);

/* A stand-in input for recomputing a checkpointed piece: its gradient is the buffer
 * of target's gradient itself, so recomputed backward adds where the first forward's
 * would have. */
ag_node *ag_sink_new(ag_node *target);

/* Graph nodes alive (host memory), for the leak measurements. */
extern long ag_live_nodes;
#define AG_NODE_BYTES sizeof(ag_node)

#endif
