// Built with nvcc -cudart shared and run on simgpu: the fat binary and its
// kernel register, and the launch fails with cudaErrorNoKernelImageForDevice.
#include <cstdio>

__global__ void add_one(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
}

int main()
{
    float *x;
    if (cudaMalloc(&x, 64 * sizeof(float)) != cudaSuccess)
        return 1;
    add_one<<<2, 32>>>(x, 64);
    cudaError_t launch = cudaGetLastError();
    add_one<<<2, 32>>>(x, 64);
    cudaError_t again = cudaGetLastError();
    printf("launch: %s\n", cudaGetErrorName(launch));
    cudaFree(x);
    return launch == cudaErrorNoKernelImageForDevice && again == launch ? 0 : 1;
}
