/* cuGetErrorString / cuGetErrorName with the driver's own names and texts;
 * they work before cuInit, as the real ones do. */
#include "simgpu/sim.h"

struct error {
    int code;
    const char *name, *text;
};

static const struct error errors[] = {
#define SIM_ERROR(code, rt_name, drv_name, text) {code, drv_name, text},
#include "simgpu/error_table.h"
#undef SIM_ERROR
};

static const struct error *lookup(CUresult code)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)code && errors[i].name)
            return &errors[i];
    return NULL;
}

/* Unknown codes: CUDA_ERROR_INVALID_VALUE and *pStr = NULL, as documented. */
CA_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct error *e = lookup(error);
    *pStr = e ? e->text : NULL;
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CA_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct error *e = lookup(error);
    *pStr = e ? e->name : NULL;
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
