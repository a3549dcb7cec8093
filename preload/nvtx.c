/* NVTX injection: with NVTX_INJECTION64_PATH pointing at libcudalloc.so (the
 * launcher sets it), NVTX loads us and calls InitializeInjectionNvtx2; we take
 * the range push/pop entries, and the end of every range named like the
 * configured step range (default "step") marks the end of an iteration. This
 * is how torch.cuda.nvtx.range_push("step") reaches us. */
#include <nvtx3/nvToolsExt.h>
#include <string.h>

#include "preload/preload.h"

#define MAX_DEPTH 64

/* Per thread: which open ranges are step ranges. */
static __thread __attribute__((tls_model("initial-exec"))) unsigned char open_is_step[MAX_DEPTH];
static __thread __attribute__((tls_model("initial-exec"))) int depth;

static int push(const char *name) {
    if (depth < MAX_DEPTH) open_is_step[depth] = name && !strcmp(name, ca_conf.nvtx_range);
    return depth++;
}

static int pop(void) {
    if (depth <= 0) return -1;
    if (--depth < MAX_DEPTH && open_is_step[depth]) ca_iteration_mark(CA_ITER_NVTX);
    return depth;
}

static const char *ascii_message(const nvtxEventAttributes_t *a) {
    return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
}

static int NVTX_API range_push_a(const char *message) { return push(message); }
static int NVTX_API range_push_ex(const nvtxEventAttributes_t *a) { return push(ascii_message(a)); }
static int NVTX_API range_pop(void) { return pop(); }
static int NVTX_API domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
    return push(ascii_message(a));
}
static int NVTX_API domain_range_pop(nvtxDomainHandle_t d) { return pop(); }

static void set(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn) {
    if (table && id < size + 1 && table[id]) *table[id] = fn;
}

CA_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
    const NvtxExportTableCallbacks *cb = get_table ? get_table(NVTX_ETID_CALLBACKS) : NULL;
    if (!cb || !cb->GetModuleFunctionTable) return 0;
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned core_size = 0, core2_size = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size)) return 0;
    set(core, core_size, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)range_push_a);
    set(core, core_size, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)range_push_ex);
    set(core, core_size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)range_pop);
    if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) {
        set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_range_push_ex);
        set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)domain_range_pop);
    }
    return 1;
}
