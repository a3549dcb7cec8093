/* Stands in for libkernels_cuda.a when the build had no nvcc, so programs that offer
 * both twins still link: kernels_cuda() answers NULL and they run the CPU twin. */
#include <stddef.h>

#include "kernels/kernels.h"

const kernels_ops *kernels_cuda(void) { return NULL; }
