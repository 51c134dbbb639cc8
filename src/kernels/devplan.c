/* Device plan cache (first version: upload on first use per type, current device only).
 * TODO(gpu): per-device entries and LRU eviction under GDTE_CACHE_MAX. */
#include <stdlib.h>
#include "devplan.h"
#include "engine/engine.h"
#include "gpu/gpu.h"

typedef struct devplan {
    int device;
    gdte_unit_t *dunits;
    int64_t bytes;
} devplan_t;

static _Atomic int64_t cached_bytes, uploads, evictions;

static void devplan_free(void *p)
{
    devplan_t *d = p;
    if (d->dunits) gdte_gpu_free(d->dunits);
    cached_bytes -= d->bytes;
    free(d);
}

gdte_status_t gdte_devplan_units(gdte_type_h type, const gdte_unit_t **dunits_p)
{
    devplan_t *d = gdte_type_backend_slot(type);
    int dev = gdte_gpu_current_device();
    if (d && d->device == dev) {
        *dunits_p = d->dunits;
        return GDTE_OK;
    }
    const gdte_unit_t *hu;
    int64_t n;
    gdte_status_t st = gdte_engine_units(type, &hu, &n);
    if (st != GDTE_OK) return st;
    devplan_t *nd = calloc(1, sizeof *nd);
    if (!nd) return GDTE_ERR_NO_MEMORY;
    nd->device = dev;
    nd->bytes = n * (int64_t)sizeof(gdte_unit_t);
    if ((st = gdte_gpu_malloc((void **)&nd->dunits, (size_t)nd->bytes)) != GDTE_OK ||
        (st = gdte_gpu_memcpy(nd->dunits, hu, (size_t)nd->bytes)) != GDTE_OK) {
        if (nd->dunits) gdte_gpu_free(nd->dunits);
        free(nd);
        return st;
    }
    if (d) devplan_free(d);
    gdte_type_set_backend_slot(type, nd, devplan_free);
    cached_bytes += nd->bytes;
    uploads++;
    *dunits_p = nd->dunits;
    return GDTE_OK;
}

int64_t gdte_devplan_bytes(void) { return cached_bytes; }
int64_t gdte_devplan_uploads(void) { return uploads; }
int64_t gdte_devplan_evictions(void) { return evictions; }
void gdte_devplan_finalize(void) {}
