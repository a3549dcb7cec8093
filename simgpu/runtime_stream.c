/* Runtime streams and events: cudaStream_t is CUstream and cudaEvent_t is
 * CUevent, so each call is the driver call with the error code passed on. */
#include "simgpu/rt.h"

/* Every call here needs the thread's context: enter, then one driver call. */
#define ENTER_AND(call)                             \
    do {                                            \
        cudaError_t e_ = ca_rt_enter();             \
        if (e_ == cudaSuccess)                      \
            e_ = (call);                            \
        return ca_rt_ret(e_);                       \
    } while (0)

CA_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority)
{
    ENTER_AND(CA_RT_CALL(ca_rt.StreamCreateWithPriority, pStream, flags, priority));
}

CA_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return cudaStreamCreateWithPriority(pStream, flags, 0);
}

CA_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, 0);
}

CA_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.StreamDestroy, stream));
}

CA_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.StreamSynchronize, stream));
}

CA_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.StreamSynchronize, stream));
}

CA_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.StreamQuery, stream));
}

CA_EXPORT cudaError_t cudaStreamQuery_ptsz(cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.StreamQuery, stream));
}

CA_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.StreamWaitEvent, stream, event, flags));
}

CA_EXPORT cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.StreamWaitEvent, stream, event, flags));
}

CA_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    ENTER_AND(CA_RT_CALL(ca_rt.EventCreate, event, flags));
}

CA_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

CA_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.legacy.EventRecord, event, stream));
}

CA_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    ENTER_AND(CA_RT_CALL(ca_rt.ptsz.EventRecord, event, stream));
}

CA_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event)
{
    ENTER_AND(CA_RT_CALL(ca_rt.EventQuery, event));
}

CA_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    ENTER_AND(CA_RT_CALL(ca_rt.EventSynchronize, event));
}

CA_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    ENTER_AND(CA_RT_CALL(ca_rt.EventDestroy, event));
}

CA_EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    ENTER_AND(CA_RT_CALL(ca_rt.EventElapsedTime, ms, start, end));
}
