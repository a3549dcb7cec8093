/* The driver entries that ask about memory (pointer_query.c) swapped for
 * ours wherever a program finds them: cuGetProcAddress, dlsym, and so the
 * runtime's own table (cudaPointerGetAttributes goes through it). Kept
 * beside hooks_driver.c's table, which looks here too. */
#include "preload/preload.h"

const ca_swap ca_query_swaps[] = {
    CA_SWAP(cuMemGetAddressRange_v2, cuMemGetAddressRange_v2),
    CA_SWAP(cuPointerGetAttribute, cuPointerGetAttribute),
    CA_SWAP(cuPointerGetAttributes, cuPointerGetAttributes),
    CA_SWAP(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle),
    CA_SWAP(cuMemGetHandleForAddressRange, cuMemGetHandleForAddressRange),
};
const size_t ca_query_nswaps = sizeof ca_query_swaps / sizeof ca_query_swaps[0];
