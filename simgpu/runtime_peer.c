/* Peer access in the runtime: the current device's context reaching the
 * primary context of another device, through the driver's cuCtxEnablePeerAccess
 * and cuCtxDisablePeerAccess (as cudart does), with the runtime's codes. */
#include "simgpu/rt.h"

CA_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    if (!canAccessPeer)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = ca_rt_init();
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DeviceCanAccessPeer, canAccessPeer, device, peerDevice);
    return ca_rt_ret(e);
}

/* The peer's primary context; a device that is not a peer (itself, or one
 * cudaDeviceCanAccessPeer says no to) is cudaErrorInvalidDevice. */
static cudaError_t peer_context(int peerDevice, CUcontext *peer)
{
    cudaError_t e = ca_rt_enter();
    CUcontext current = NULL;
    CUdevice self = 0;
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxGetCurrent, &current);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxGetDevice, &self, NULL);
    int can = 0;
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.DeviceCanAccessPeer, &can, self, peerDevice);
    if (e == cudaSuccess && !can)
        e = cudaErrorInvalidDevice;
    if (e == cudaSuccess)
        e = ca_rt_primary(peerDevice, peer);
    return e;
}

CA_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags)
{
    CUcontext peer = NULL;
    if (flags)
        return ca_rt_ret(cudaErrorInvalidValue);
    cudaError_t e = peer_context(peerDevice, &peer);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxEnablePeerAccess, peer, 0);
    return ca_rt_ret(e);
}

CA_EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peerDevice)
{
    CUcontext peer = NULL;
    cudaError_t e = peer_context(peerDevice, &peer);
    if (e == cudaSuccess)
        e = CA_RT_CALL(ca_rt.CtxDisablePeerAccess, peer);
    return ca_rt_ret(e);
}
