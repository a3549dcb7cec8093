/* CUDA's error numbers, names and texts, shared by both simulated libraries.
 *
 * Read once from CUDA 13.0: runtime names and texts from its libcudart.so.13
 * (cudaGetErrorName, cudaGetErrorString), driver names from the CUresult enum
 * of cuda.h. Where a number is both a cudaError_t and a CUresult the driver
 * gives the same text; the two driver-only codes have no text here.
 *
 * SIM_ERROR(number, runtime name or NULL, driver name or NULL, text or NULL) */

SIM_ERROR(0, "cudaSuccess", "CUDA_SUCCESS",
          "no error")
SIM_ERROR(1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE",
          "invalid argument")
SIM_ERROR(2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY",
          "out of memory")
SIM_ERROR(3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED",
          "initialization error")
SIM_ERROR(4, "cudaErrorCudartUnloading", "CUDA_ERROR_DEINITIALIZED",
          "driver shutting down")
SIM_ERROR(5, "cudaErrorProfilerDisabled", "CUDA_ERROR_PROFILER_DISABLED",
          "profiler disabled while using external profiling tool")
SIM_ERROR(6, "cudaErrorProfilerNotInitialized", "CUDA_ERROR_PROFILER_NOT_INITIALIZED",
          "profiler not initialized: call cudaProfilerInitialize()")
SIM_ERROR(7, "cudaErrorProfilerAlreadyStarted", "CUDA_ERROR_PROFILER_ALREADY_STARTED",
          "profiler already started")
SIM_ERROR(8, "cudaErrorProfilerAlreadyStopped", "CUDA_ERROR_PROFILER_ALREADY_STOPPED",
          "profiler already stopped")
SIM_ERROR(9, "cudaErrorInvalidConfiguration", NULL,
          "invalid configuration argument")
SIM_ERROR(12, "cudaErrorInvalidPitchValue", NULL,
          "invalid pitch argument")
SIM_ERROR(13, "cudaErrorInvalidSymbol", NULL,
          "invalid device symbol")
SIM_ERROR(16, "cudaErrorInvalidHostPointer", NULL,
          "invalid host pointer")
SIM_ERROR(17, "cudaErrorInvalidDevicePointer", NULL,
          "invalid device pointer")
SIM_ERROR(18, "cudaErrorInvalidTexture", NULL,
          "invalid texture reference")
SIM_ERROR(19, "cudaErrorInvalidTextureBinding", NULL,
          "texture is not bound to a pointer")
SIM_ERROR(20, "cudaErrorInvalidChannelDescriptor", NULL,
          "invalid channel descriptor")
SIM_ERROR(21, "cudaErrorInvalidMemcpyDirection", NULL,
          "invalid copy direction for memcpy")
SIM_ERROR(22, "cudaErrorAddressOfConstant", NULL,
          "invalid address of constant")
SIM_ERROR(23, "cudaErrorTextureFetchFailed", NULL,
          "fetch from texture failed")
SIM_ERROR(24, "cudaErrorTextureNotBound", NULL,
          "cannot fetch from a texture that is not bound")
SIM_ERROR(25, "cudaErrorSynchronizationError", NULL,
          "incorrect use of __syncthreads()")
SIM_ERROR(26, "cudaErrorInvalidFilterSetting", NULL,
          "linear filtering not supported for non-float type")
SIM_ERROR(27, "cudaErrorInvalidNormSetting", NULL,
          "read as normalized float not supported for data type")
SIM_ERROR(28, "cudaErrorMixedDeviceExecution", NULL,
          "device emulation mode and device execution mode cannot be mixed")
SIM_ERROR(31, "cudaErrorNotYetImplemented", NULL,
          "feature not yet implemented")
SIM_ERROR(32, "cudaErrorMemoryValueTooLarge", NULL,
          "memory size or pointer value too large to fit in 32 bit")
SIM_ERROR(34, "cudaErrorStubLibrary", "CUDA_ERROR_STUB_LIBRARY",
          "CUDA driver is a stub library")
SIM_ERROR(35, "cudaErrorInsufficientDriver", NULL,
          "CUDA driver version is insufficient for CUDA runtime version")
SIM_ERROR(36, "cudaErrorCallRequiresNewerDriver", "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER",
          "API call is not supported in the installed CUDA driver")
SIM_ERROR(37, "cudaErrorInvalidSurface", NULL,
          "invalid surface reference")
SIM_ERROR(43, "cudaErrorDuplicateVariableName", NULL,
          "duplicate global variable looked up by string name")
SIM_ERROR(44, "cudaErrorDuplicateTextureName", NULL,
          "duplicate texture looked up by string name")
SIM_ERROR(45, "cudaErrorDuplicateSurfaceName", NULL,
          "duplicate surface looked up by string name")
SIM_ERROR(46, "cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE",
          "CUDA-capable device(s) is/are busy or unavailable")
SIM_ERROR(49, "cudaErrorIncompatibleDriverContext", NULL,
          "incompatible driver context")
SIM_ERROR(52, "cudaErrorMissingConfiguration", NULL,
          "__global__ function call is not configured")
SIM_ERROR(53, "cudaErrorPriorLaunchFailure", NULL,
          "unspecified launch failure in prior launch")
SIM_ERROR(65, "cudaErrorLaunchMaxDepthExceeded", NULL,
          "launch would exceed maximum depth of nested launches")
SIM_ERROR(66, "cudaErrorLaunchFileScopedTex", NULL,
          "launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)")
SIM_ERROR(67, "cudaErrorLaunchFileScopedSurf", NULL,
          "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)")
SIM_ERROR(68, "cudaErrorSyncDepthExceeded", NULL,
          "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth")
SIM_ERROR(69, "cudaErrorLaunchPendingCountExceeded", NULL,
          "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount")
SIM_ERROR(98, "cudaErrorInvalidDeviceFunction", NULL,
          "invalid device function")
SIM_ERROR(100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE",
          "no CUDA-capable device is detected")
SIM_ERROR(101, "cudaErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE",
          "invalid device ordinal")
SIM_ERROR(102, "cudaErrorDeviceNotLicensed", "CUDA_ERROR_DEVICE_NOT_LICENSED",
          "device doesn't have valid Grid license")
SIM_ERROR(103, "cudaErrorSoftwareValidityNotEstablished", NULL,
          "integrity checks failed")
SIM_ERROR(127, "cudaErrorStartupFailure", NULL,
          "startup failure in cuda runtime")
SIM_ERROR(200, "cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE",
          "device kernel image is invalid")
SIM_ERROR(201, "cudaErrorDeviceUninitialized", "CUDA_ERROR_INVALID_CONTEXT",
          "invalid device context")
SIM_ERROR(202, NULL, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT",
          NULL)
SIM_ERROR(205, "cudaErrorMapBufferObjectFailed", "CUDA_ERROR_MAP_FAILED",
          "mapping of buffer object failed")
SIM_ERROR(206, "cudaErrorUnmapBufferObjectFailed", "CUDA_ERROR_UNMAP_FAILED",
          "unmapping of buffer object failed")
SIM_ERROR(207, "cudaErrorArrayIsMapped", "CUDA_ERROR_ARRAY_IS_MAPPED",
          "array is mapped")
SIM_ERROR(208, "cudaErrorAlreadyMapped", "CUDA_ERROR_ALREADY_MAPPED",
          "resource already mapped")
SIM_ERROR(209, "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU",
          "no kernel image is available for execution on the device")
SIM_ERROR(210, "cudaErrorAlreadyAcquired", "CUDA_ERROR_ALREADY_ACQUIRED",
          "resource already acquired")
SIM_ERROR(211, "cudaErrorNotMapped", "CUDA_ERROR_NOT_MAPPED",
          "resource not mapped")
SIM_ERROR(212, "cudaErrorNotMappedAsArray", "CUDA_ERROR_NOT_MAPPED_AS_ARRAY",
          "resource not mapped as array")
SIM_ERROR(213, "cudaErrorNotMappedAsPointer", "CUDA_ERROR_NOT_MAPPED_AS_POINTER",
          "resource not mapped as pointer")
SIM_ERROR(214, "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE",
          "uncorrectable ECC error encountered")
SIM_ERROR(215, "cudaErrorUnsupportedLimit", "CUDA_ERROR_UNSUPPORTED_LIMIT",
          "limit is not supported on this architecture")
SIM_ERROR(216, "cudaErrorDeviceAlreadyInUse", "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
          "exclusive-thread device already in use by a different thread")
SIM_ERROR(217, "cudaErrorPeerAccessUnsupported", "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
          "peer access is not supported between these two devices")
SIM_ERROR(218, "cudaErrorInvalidPtx", "CUDA_ERROR_INVALID_PTX",
          "a PTX JIT compilation failed")
SIM_ERROR(219, "cudaErrorInvalidGraphicsContext", "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT",
          "invalid OpenGL or DirectX context")
SIM_ERROR(220, "cudaErrorNvlinkUncorrectable", "CUDA_ERROR_NVLINK_UNCORRECTABLE",
          "uncorrectable NVLink error detected during the execution")
SIM_ERROR(221, "cudaErrorJitCompilerNotFound", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
          "PTX JIT compiler library not found")
SIM_ERROR(222, "cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
          "the provided PTX was compiled with an unsupported toolchain.")
SIM_ERROR(223, "cudaErrorJitCompilationDisabled", "CUDA_ERROR_JIT_COMPILATION_DISABLED",
          "PTX JIT compilation was disabled")
SIM_ERROR(224, "cudaErrorUnsupportedExecAffinity", "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY",
          "the provided execution affinity is not supported")
SIM_ERROR(225, "cudaErrorUnsupportedDevSideSync", "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC",
          "the provided PTX contains unsupported call to cudaDeviceSynchronize")
SIM_ERROR(226, "cudaErrorContained", "CUDA_ERROR_CONTAINED",
          "Invalid access of peer GPU memory over nvlink or a hardware error")
SIM_ERROR(300, "cudaErrorInvalidSource", "CUDA_ERROR_INVALID_SOURCE",
          "device kernel image is invalid")
SIM_ERROR(301, "cudaErrorFileNotFound", "CUDA_ERROR_FILE_NOT_FOUND",
          "file not found")
SIM_ERROR(302, "cudaErrorSharedObjectSymbolNotFound", "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
          "shared object symbol not found")
SIM_ERROR(303, "cudaErrorSharedObjectInitFailed", "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
          "shared object initialization failed")
SIM_ERROR(304, "cudaErrorOperatingSystem", "CUDA_ERROR_OPERATING_SYSTEM",
          "OS call failed or operation not supported on this OS")
SIM_ERROR(400, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE",
          "invalid resource handle")
SIM_ERROR(401, "cudaErrorIllegalState", "CUDA_ERROR_ILLEGAL_STATE",
          "the operation cannot be performed in the present state")
SIM_ERROR(402, "cudaErrorLossyQuery", "CUDA_ERROR_LOSSY_QUERY",
          "attempted introspection would be semantically lossy")
SIM_ERROR(500, "cudaErrorSymbolNotFound", "CUDA_ERROR_NOT_FOUND",
          "named symbol not found")
SIM_ERROR(600, "cudaErrorNotReady", "CUDA_ERROR_NOT_READY",
          "device not ready")
SIM_ERROR(700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS",
          "an illegal memory access was encountered")
SIM_ERROR(701, "cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
          "too many resources requested for launch")
SIM_ERROR(702, "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT",
          "the launch timed out and was terminated")
SIM_ERROR(703, "cudaErrorLaunchIncompatibleTexturing", "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING",
          "launch uses incompatible texturing mode")
SIM_ERROR(704, "cudaErrorPeerAccessAlreadyEnabled", "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
          "peer access is already enabled")
SIM_ERROR(705, "cudaErrorPeerAccessNotEnabled", "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
          "peer access has not been enabled")
SIM_ERROR(708, "cudaErrorSetOnActiveProcess", "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE",
          "cannot set while device is active in this process")
SIM_ERROR(709, "cudaErrorContextIsDestroyed", "CUDA_ERROR_CONTEXT_IS_DESTROYED",
          "context is destroyed")
SIM_ERROR(710, "cudaErrorAssert", "CUDA_ERROR_ASSERT",
          "device-side assert triggered")
SIM_ERROR(711, "cudaErrorTooManyPeers", "CUDA_ERROR_TOO_MANY_PEERS",
          "peer mapping resources exhausted")
SIM_ERROR(712, "cudaErrorHostMemoryAlreadyRegistered", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
          "part or all of the requested memory range is already mapped")
SIM_ERROR(713, "cudaErrorHostMemoryNotRegistered", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
          "pointer does not correspond to a registered memory region")
SIM_ERROR(714, "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR",
          "hardware stack error")
SIM_ERROR(715, "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
          "an illegal instruction was encountered")
SIM_ERROR(716, "cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS",
          "misaligned address")
SIM_ERROR(717, "cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
          "operation not supported on global/shared address space")
SIM_ERROR(718, "cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC",
          "invalid program counter")
SIM_ERROR(719, "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED",
          "unspecified launch failure")
SIM_ERROR(720, "cudaErrorCooperativeLaunchTooLarge", "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
          "too many blocks in cooperative launch")
SIM_ERROR(721, "cudaErrorTensorMemoryLeak", "CUDA_ERROR_TENSOR_MEMORY_LEAK",
          "tensor memory not completely freed")
SIM_ERROR(800, "cudaErrorNotPermitted", "CUDA_ERROR_NOT_PERMITTED",
          "operation not permitted")
SIM_ERROR(801, "cudaErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED",
          "operation not supported")
SIM_ERROR(802, "cudaErrorSystemNotReady", "CUDA_ERROR_SYSTEM_NOT_READY",
          "system not yet initialized")
SIM_ERROR(803, "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
          "system has unsupported display driver / cuda driver combination")
SIM_ERROR(804, "cudaErrorCompatNotSupportedOnDevice", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
          "forward compatibility was attempted on non supported HW")
SIM_ERROR(805, "cudaErrorMpsConnectionFailed", "CUDA_ERROR_MPS_CONNECTION_FAILED",
          "MPS client failed to connect to the MPS control daemon or the MPS server")
SIM_ERROR(806, "cudaErrorMpsRpcFailure", "CUDA_ERROR_MPS_RPC_FAILURE",
          "the remote procedural call between the MPS server and the MPS client failed")
SIM_ERROR(807, "cudaErrorMpsServerNotReady", "CUDA_ERROR_MPS_SERVER_NOT_READY",
          "MPS server is not ready to accept new MPS client requests")
SIM_ERROR(808, "cudaErrorMpsMaxClientsReached", "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED",
          "the hardware resources required to create MPS client have been exhausted")
SIM_ERROR(809, "cudaErrorMpsMaxConnectionsReached", "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED",
          "the hardware resources required to support device connections have been exhausted")
SIM_ERROR(810, "cudaErrorMpsClientTerminated", "CUDA_ERROR_MPS_CLIENT_TERMINATED",
          "the MPS client has been terminated by the server")
SIM_ERROR(811, "cudaErrorCdpNotSupported", "CUDA_ERROR_CDP_NOT_SUPPORTED",
          "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it")
SIM_ERROR(812, "cudaErrorCdpVersionMismatch", "CUDA_ERROR_CDP_VERSION_MISMATCH",
          "unsupported interaction between different versions of CUDA Dynamic Parallelism")
SIM_ERROR(900, "cudaErrorStreamCaptureUnsupported", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
          "operation not permitted when stream is capturing")
SIM_ERROR(901, "cudaErrorStreamCaptureInvalidated", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
          "operation failed due to a previous error during capture")
SIM_ERROR(902, "cudaErrorStreamCaptureMerge", "CUDA_ERROR_STREAM_CAPTURE_MERGE",
          "operation would result in a merge of separate capture sequences")
SIM_ERROR(903, "cudaErrorStreamCaptureUnmatched", "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
          "capture was not ended in the same stream as it began")
SIM_ERROR(904, "cudaErrorStreamCaptureUnjoined", "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
          "capturing stream has unjoined work")
SIM_ERROR(905, "cudaErrorStreamCaptureIsolation", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
          "dependency created on uncaptured work in another stream")
SIM_ERROR(906, "cudaErrorStreamCaptureImplicit", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
          "operation would make the legacy stream depend on a capturing blocking stream")
SIM_ERROR(907, "cudaErrorCapturedEvent", "CUDA_ERROR_CAPTURED_EVENT",
          "operation not permitted on an event last recorded in a capturing stream")
SIM_ERROR(908, "cudaErrorStreamCaptureWrongThread", "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
          "attempt to terminate a thread-local capture sequence from another thread")
SIM_ERROR(909, "cudaErrorTimeout", "CUDA_ERROR_TIMEOUT",
          "wait operation timed out")
SIM_ERROR(910, "cudaErrorGraphExecUpdateFailure", "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
          "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update")
SIM_ERROR(911, "cudaErrorExternalDevice", "CUDA_ERROR_EXTERNAL_DEVICE",
          "an async error has occured in external entity outside of CUDA")
SIM_ERROR(912, "cudaErrorInvalidClusterSize", "CUDA_ERROR_INVALID_CLUSTER_SIZE",
          "a kernel launch error has occurred due to cluster misconfiguration")
SIM_ERROR(913, "cudaErrorFunctionNotLoaded", "CUDA_ERROR_FUNCTION_NOT_LOADED",
          "the function handle is not loaded when calling an API that requires a loaded function")
SIM_ERROR(914, "cudaErrorInvalidResourceType", "CUDA_ERROR_INVALID_RESOURCE_TYPE",
          "one or more resources passed in are not valid resource types for the operation")
SIM_ERROR(915, "cudaErrorInvalidResourceConfiguration", "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION",
          "one or more resources are insufficient or non-applicable for the operation")
SIM_ERROR(916, NULL, "CUDA_ERROR_KEY_ROTATION",
          NULL)
SIM_ERROR(999, "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN",
          "unknown error")
SIM_ERROR(10000, "cudaErrorApiFailureBase", NULL,
          "api failure base")
