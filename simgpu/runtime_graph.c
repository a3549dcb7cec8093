/* Runtime stream capture and graphs: cudaGraph_t is CUgraph, cudaGraphExec_t
 * CUgraphExec, the modes, statuses and node types have the driver's values,
 * so each call is the driver call with the error code passed on. */
#include "simgpu/rt.h"

#define ENTER_AND(call)                             \
    do {                                            \
        cudaError_t e_ = ca_rt_enter();             \
        if (e_ == cudaSuccess)                      \
            e_ = (call);                            \
        return ca_rt_ret(e_);                       \
    } while (0)

_Static_assert((int)cudaStreamCaptureModeRelaxed == (int)CU_STREAM_CAPTURE_MODE_RELAXED, "capture modes");
_Static_assert((int)cudaStreamCaptureStatusInvalidated == (int)CU_STREAM_CAPTURE_STATUS_INVALIDATED, "statuses");
_Static_assert((int)cudaGraphNodeTypeMemFree == (int)CU_GRAPH_NODE_TYPE_MEM_FREE, "node types");
_Static_assert((int)cudaGraphInstantiateFlagAutoFreeOnLaunch == (int)CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
               "instantiate flags");
_Static_assert(sizeof(cudaGraphEdgeData) == sizeof(CUgraphEdgeData), "edge data");

CA_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.StreamBeginCapture, stream, (CUstreamCaptureMode)mode));
}

CA_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.StreamBeginCapture, stream, (CUstreamCaptureMode)mode));
}

CA_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.StreamEndCapture, stream, pGraph));
}

CA_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.StreamEndCapture, stream, pGraph));
}

CA_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.StreamIsCapturing, stream, (CUstreamCaptureStatus *)pCaptureStatus));
}

CA_EXPORT cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.StreamIsCapturing, stream, (CUstreamCaptureStatus *)pCaptureStatus));
}

static cudaError_t capture_info(const struct ca_rt_streamfns *f, cudaStream_t stream,
                                enum cudaStreamCaptureStatus *status, unsigned long long *id, cudaGraph_t *graph,
                                const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges, size_t *ndeps)
{
    ENTER_AND(CA_RT_CALL(f->StreamGetCaptureInfo, stream, (CUstreamCaptureStatus *)status, (cuuint64_t *)id,
                         graph, deps, (const CUgraphEdgeData **)edges, ndeps));
}

CA_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                               unsigned long long *id, cudaGraph_t *graph,
                                               const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                               size_t *ndeps)
{
    return capture_info(&ca_rt.legacy, stream, status, id, graph, deps, edges, ndeps);
}

CA_EXPORT cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *status,
                                                    unsigned long long *id, cudaGraph_t *graph,
                                                    const cudaGraphNode_t **deps,
                                                    const cudaGraphEdgeData **edges, size_t *ndeps)
{
    return capture_info(&ca_rt.ptsz, stream, status, id, graph, deps, edges, ndeps);
}

CA_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ThreadExchangeStreamCaptureMode, (CUstreamCaptureMode *)mode));
}

CA_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.EventRecordWithFlags, event, stream, flags));
}

CA_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.EventRecordWithFlags, event, stream, flags));
}

CA_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                    unsigned long long flags)
{
    ENTER_AND(CA_RT_CALL(ca_rt.GraphInstantiateWithFlags, pGraphExec, graph, flags));
}

/* CUDA 12's cudaGraphInstantiate takes flags, as WithFlags does. */
CA_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    return cudaGraphInstantiateWithFlags(pGraphExec, graph, flags);
}

CA_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.GraphLaunch, graphExec, stream));
}

CA_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.GraphLaunch, graphExec, stream));
}

CA_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    ENTER_AND(CA_RT_CALL(ca_rt.GraphExecDestroy, graphExec));
}

CA_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    ENTER_AND(CA_RT_CALL(ca_rt.GraphDestroy, graph));
}

CA_EXPORT cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
    ENTER_AND(CA_RT_CALL(ca_rt.GraphGetNodes, graph, nodes, numNodes));
}

CA_EXPORT cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, enum cudaGraphNodeType *pType)
{
    ENTER_AND(CA_RT_CALL(ca_rt.GraphNodeGetType, node, (CUgraphNodeType *)pType));
}
