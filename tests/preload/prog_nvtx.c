/* Iteration marks through NVTX injection and cudalloc_step(): the program uses
 * the header-only NVTX3 API, as PyTorch's range_push does underneath. */
#include <nvtx3/nvToolsExt.h>
#include <string.h>

#include "include/cudalloc.h"
#include "tests/preload/check.h"

int main(void) {
    for (int i = 0; i < 3; i++) {
        nvtxRangePushA("step");
        nvtxRangePushA("forward"); /* nested ranges of other names do not count */
        nvtxRangePop();
        nvtxRangePop();
    }
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "step";
    nvtxRangePushEx(&a);
    nvtxRangePop();
    CHECK(CUDALLOC_CALL(cudalloc_iteration) == 4, "4 NVTX steps: %ld", CUDALLOC_CALL(cudalloc_iteration));
    /* An explicit mark outranks NVTX: from now on only explicit marks count,
     * whatever NVTX ranges the program keeps opening. */
    CUDALLOC_CALL(cudalloc_step);
    CHECK(CUDALLOC_CALL(cudalloc_iteration) == 1, "explicit wins: %ld", CUDALLOC_CALL(cudalloc_iteration));
    nvtxRangePushA("step");
    nvtxRangePop();
    CUDALLOC_CALL(cudalloc_step);
    CHECK(CUDALLOC_CALL(cudalloc_iteration) == 2, "NVTX no longer counts: %ld", CUDALLOC_CALL(cudalloc_iteration));
    CHECK_DONE("nvtx");
}
