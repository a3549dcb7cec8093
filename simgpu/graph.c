/* Graphs made by stream capture, their instantiation and launch.
 *
 * Nodes are appended as capture meets them, after their dependencies, so the
 * order of the node array is a topological order and a launch runs them in
 * it: memsets and copies write memory, event record nodes record their event
 * on the launch stream, event wait nodes make it wait, allocation nodes back
 * their fixed address with memory and free nodes give it back (graph_mem.c).
 * A graph is freed when its handle is destroyed and no executable graph uses
 * it any more. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "simgpu/sim.h"

struct CUgraph_st *ca_sim_find_graph(CUgraph g)
{
    struct CUgraph_st *found;
    HASH_FIND_PTR(ca_sim.graphs, &g, found);
    return found && !found->destroyed ? found : NULL;
}

static struct CUgraphExec_st *find_exec(CUgraphExec x)
{
    struct CUgraphExec_st *found;
    HASH_FIND_PTR(ca_sim.execs, &x, found);
    return found;
}

struct CUgraph_st *ca_sim_graph_new(struct CUctx_st *ctx)
{
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->self = g;
    g->ctx = ctx;
    g->refs = 1;
    HASH_ADD_PTR(ca_sim.graphs, self, g);
    return g;
}

struct CUgraphNode_st *ca_sim_graph_capture_node(struct ca_sim_cstate *cs, CUgraphNodeType type)
{
    struct CUgraph_st *g = cs->cap->graph;
    if (!cs->deps_cap) { /* room for the one node the stream will depend on */
        struct CUgraphNode_st **d = malloc(sizeof *d);
        CUgraphEdgeData *e = malloc(sizeof *e);
        if (!d || !e) {
            free(d);
            free(e);
            return NULL;
        }
        free(cs->deps);
        free(cs->edges);
        cs->deps = d;
        cs->edges = e;
        cs->deps_cap = 1;
    }
    struct CUgraphNode_st *n = calloc(1, sizeof *n);
    if (!n || (cs->ndeps && !(n->deps = malloc(cs->ndeps * sizeof *n->deps)))) {
        free(n);
        return NULL;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        struct CUgraphNode_st **v = realloc(g->nodes, cap * sizeof *v);
        if (!v) {
            free(n->deps);
            free(n);
            return NULL;
        }
        g->nodes = v;
        g->cap = cap;
    }
    n->graph = g;
    n->type = type;
    n->ndeps = cs->ndeps;
    if (cs->ndeps)
        memcpy(n->deps, cs->deps, cs->ndeps * sizeof *n->deps);
    g->nodes[g->n++] = n;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || type == CU_GRAPH_NODE_TYPE_MEM_FREE)
        g->mem_nodes = 1;
    /* the next node of the stream depends on this one alone */
    cs->deps[0] = n;
    cs->ndeps = 1;
    return n;
}

void ca_sim_graph_release(struct CUgraph_st *g)
{
    if (--g->refs)
        return;
    for (size_t i = 0; i < g->n; i++) {
        struct CUgraphNode_st *n = g->nodes[i];
        if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            ca_sim_gmem_orphan(n->u.mem);
        free(n->deps);
        free(n);
    }
    free(g->nodes);
    HASH_DEL(ca_sim.graphs, g);
    free(g);
}

static void exec_destroy(struct CUgraphExec_st *x)
{
    HASH_DEL(ca_sim.execs, x);
    x->graph->execs--;
    ca_sim_graph_release(x->graph);
    free(x);
}

void ca_sim_graphs_drop_ctx(struct CUctx_st *ctx)
{
    struct CUgraphExec_st *x, *xtmp;
    HASH_ITER(hh, ca_sim.execs, x, xtmp) {
        if (x->graph->ctx == ctx)
            exec_destroy(x);
    }
    struct CUgraph_st *g, *gtmp;
    HASH_ITER(hh, ca_sim.graphs, g, gtmp) {
        if (g->ctx == ctx && !g->destroyed) {
            g->destroyed = 1;
            ca_sim_graph_release(g);
        }
    }
}

CA_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUgraph_st *g = r == CUDA_SUCCESS ? ca_sim_find_graph(hGraph) : NULL;
    if (r == CUDA_SUCCESS && !g)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        g->destroyed = 1;
        ca_sim_graph_release(g);
    }
    ca_sim_unlock();
    return r;
}

/* A graph with allocation or free nodes has one executable graph at a time. */
CA_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    const unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                     CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUgraph_st *g = r == CUDA_SUCCESS ? ca_sim_find_graph(hGraph) : NULL;
    struct CUgraphExec_st *x = NULL;
    if (r == CUDA_SUCCESS &&
        (!g || !phGraphExec || (flags & ~known) ||
         ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) &&
          (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)) ||
         (g->mem_nodes && g->execs)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !(x = calloc(1, sizeof *x)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        x->self = x;
        x->graph = g;
        x->n = g->n;
        x->flags = flags;
        g->refs++;
        g->execs++;
        HASH_ADD_PTR(ca_sim.execs, self, x);
        *phGraphExec = (CUgraphExec)x;
    }
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUgraphExec_st *x = r == CUDA_SUCCESS ? find_exec(hGraphExec) : NULL;
    if (r == CUDA_SUCCESS && !x)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        exec_destroy(x);
    ca_sim_unlock();
    return r;
}

static CUresult run_set(const struct CUgraphNode_st *n)
{
    CUresult r = ca_sim_check_range(n->u.set.dst, n->u.set.n * n->u.set.width, 0, PROT_WRITE);
    if (r != CUDA_SUCCESS)
        return CUDA_ERROR_ILLEGAL_ADDRESS; /* a kernel writing there would fault */
    if (n->u.set.width == 1) {
        memset((void *)n->u.set.dst, (int)(n->u.set.value & 0xff), n->u.set.n);
    } else if (n->u.set.width == 2) {
        for (size_t i = 0; i < n->u.set.n; i++)
            ((unsigned short *)n->u.set.dst)[i] = (unsigned short)n->u.set.value;
    } else {
        for (size_t i = 0; i < n->u.set.n; i++)
            ((unsigned int *)n->u.set.dst)[i] = n->u.set.value;
    }
    return CUDA_SUCCESS;
}

static CUresult run_copy(const struct CUgraphNode_st *n)
{
    if (ca_sim_check_range(n->u.copy.dst, n->u.copy.n, 1, PROT_WRITE) != CUDA_SUCCESS ||
        ca_sim_check_range(n->u.copy.src, n->u.copy.n, 1, PROT_READ) != CUDA_SUCCESS)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    if (n->u.copy.n)
        memmove((void *)n->u.copy.dst, (const void *)n->u.copy.src, n->u.copy.n);
    return CUDA_SUCCESS;
}

static CUresult run(const struct CUgraphNode_st *n, const struct ca_sim_stream_ref *ref)
{
    struct CUevent_st *e;
    switch (n->type) {
    case CU_GRAPH_NODE_TYPE_MEMSET: return run_set(n);
    case CU_GRAPH_NODE_TYPE_MEMCPY: return run_copy(n);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        if ((e = ca_sim_find_event(n->u.event)))
            ca_sim_event_record_now(e, ref);
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        if ((e = ca_sim_find_event(n->u.event)))
            ca_sim_stream_wait_now(ref, e);
        return CUDA_SUCCESS;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return ca_sim_gmem_alloc(n->u.mem);
    case CU_GRAPH_NODE_TYPE_MEM_FREE: ca_sim_gmem_free(n->u.mem); return CUDA_SUCCESS;
    default: return CUDA_SUCCESS;
    }
}

/* Runs the graph's work now, in the order it was captured. An allocation of
 * a previous launch still live makes the launch fail, unless the graph was
 * instantiated to free it first. */
static CUresult launch(CUgraphExec hGraphExec, CUstream s)
{
    struct ca_sim_stream_ref ref;
    struct ca_sim_cstate *cs = NULL;
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUgraphExec_st *x = r == CUDA_SUCCESS ? find_exec(hGraphExec) : NULL;
    if (r == CUDA_SUCCESS && !x)
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        r = ca_sim_stream_resolve(s, &ref);
    if (r == CUDA_SUCCESS)
        r = ca_sim_capture_issue(&ref, &cs);
    if (r == CUDA_SUCCESS && cs)
        r = CUDA_ERROR_NOT_SUPPORTED; /* a child graph node: not simulated */
    struct CUgraphNode_st **nodes = x ? x->graph->nodes : NULL;
    for (size_t i = 0; r == CUDA_SUCCESS && i < x->n; i++) {
        struct CUgraphNode_st *n = nodes[i];
        if (n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !n->u.mem->live)
            continue;
        if (x->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
            ca_sim_gmem_free(n->u.mem);
        else
            r = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; r == CUDA_SUCCESS && i < x->n; i++)
        r = run(nodes[i], &ref);
    if (r == CUDA_SUCCESS)
        ca_sim.n.graph_launches++;
    ca_sim_unlock();
    return r;
}

CA_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream s)
{
    return launch(hGraphExec, s);
}

CA_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream s)
{
    return launch(hGraphExec, ca_sim_ptsz(s));
}

CA_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    struct CUgraph_st *g = r == CUDA_SUCCESS ? ca_sim_find_graph(hGraph) : NULL;
    if (r == CUDA_SUCCESS && (!g || !numNodes))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && nodes) {
        for (size_t i = 0; i < *numNodes; i++)
            nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
        if (*numNodes > g->n)
            *numNodes = g->n;
    } else if (r == CUDA_SUCCESS) {
        *numNodes = g->n;
    }
    ca_sim_unlock();
    return r;
}

static int node_known(const struct CUgraphNode_st *n)
{
    struct CUgraph_st *g, *tmp;
    HASH_ITER(hh, ca_sim.graphs, g, tmp) {
        for (size_t i = 0; i < g->n; i++)
            if (g->nodes[i] == n)
                return !g->destroyed;
    }
    return 0;
}

CA_EXPORT CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    ca_sim_lock();
    CUresult r = ca_sim_check_init();
    if (r == CUDA_SUCCESS && (!type || !node_known(hNode)))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *type = hNode->type;
    ca_sim_unlock();
    return r;
}
