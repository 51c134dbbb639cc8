/* gdte_mem_query (first version: uncached). TODO(gpu): cache device ranges. */
#include "gdte.h"
#include "gpu/gpu.h"

GDTE_API gdte_status_t gdte_mem_query(const void *ptr, gdte_mem_info_t *info_p)
{
    if (!info_p) return GDTE_ERR_INVALID_ARG;
    if (!gdte_gpu_available()) {
        info_p->kind = GDTE_MEM_HOST;
        info_p->device = -1;
        return GDTE_OK;
    }
    return gdte_gpu_pointer_query(ptr, info_p);
}
