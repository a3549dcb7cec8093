/* The errors after which a CUDA context runs nothing more: every later call
 * answers the same (cuda.h: "This leaves the process in an inconsistent state
 * and any further CUDA work will return the same error"). One list for the
 * simulated driver, which poisons its context with them, and for the
 * preload, which takes them as "the device's work is over". Needs cuda.h. */
#ifndef CA_CUDA_STICKY_H
#define CA_CUDA_STICKY_H

static inline int ca_cuda_sticky(CUresult r) {
    switch (r) {
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_EXTERNAL_DEVICE: return 1;
    default: return 0;
    }
}

#endif
