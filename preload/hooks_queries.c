/* The driver entries that ask about memory (pointer_query.c) and those of
 * the allocators beside ours (others.c), swapped for ours wherever a program
 * finds them: cuGetProcAddress, dlsym, and so the runtime's own table
 * (cudaPointerGetAttributes, cudaMallocManaged go through it). Kept beside
 * hooks_driver.c's table, which looks here too. */
#include "preload/preload.h"

const ca_swap ca_query_swaps[] = {
    CA_SWAP(cuMemGetAddressRange_v2, cuMemGetAddressRange_v2),
    CA_SWAP(cuPointerGetAttribute, cuPointerGetAttribute),
    CA_SWAP(cuPointerGetAttributes, cuPointerGetAttributes),
    CA_SWAP(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle),
    CA_SWAP(cuMemGetHandleForAddressRange, cuMemGetHandleForAddressRange),
    CA_SWAP(cuMemCreate, cuMemCreate),
    CA_SWAP(cuMemAllocManaged, cuMemAllocManaged),
    CA_SWAP(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync),
    CA_SWAP(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync_ptsz),
};
const size_t ca_query_nswaps = sizeof ca_query_swaps / sizeof ca_query_swaps[0];
