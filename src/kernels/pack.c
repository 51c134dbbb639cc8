/* gdte_pack / gdte_unpack: validate, make the layout, choose the host or GPU executor. */
#include <string.h>
#include "kernels.h"
#include "devplan.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "util/util.h"

static int is_device_kind(gdte_mem_kind_t k) { return k == GDTE_MEM_DEVICE; }

static gdte_status_t run(gdte_dir_t dir, void *user, int64_t count, gdte_type_h type, void *packed, int64_t avail,
                         const gdte_pack_params_t *params, int64_t *done_p)
{
    gdte_status_t st;
    gdte_layout_t L;
    int64_t offset = 0, max_bytes = INT64_MAX;
    uint64_t flags = 0;
    gdte_stream_t stream = NULL;
    if ((st = gdte_type_check(type)) != GDTE_OK) return st;
    if (count < 0) return GDTE_ERR_COUNT;
    if (avail < 0) return GDTE_ERR_INVALID_ARG;
    if (params) {
        if (params->field_mask & GDTE_PACK_FIELD_OFFSET) offset = params->offset;
        if (params->field_mask & GDTE_PACK_FIELD_MAX_BYTES) max_bytes = params->max_bytes;
        if (params->field_mask & GDTE_PACK_FIELD_STREAM) stream = params->stream;
        if (params->field_mask & GDTE_PACK_FIELD_FLAGS) flags = params->flags;
    }
    if (offset < 0 || max_bytes < 0) return GDTE_ERR_INVALID_ARG;
    if ((st = gdte_engine_layout(type, count, &L)) != GDTE_OK) return st;
    if (offset > L.total) return GDTE_ERR_OFFSET;
    int64_t n = L.total - offset;
    if (n > avail) n = avail;
    if (n > max_bytes) n = max_bytes;
    if (n == 0) {
        if (done_p) *done_p = 0;
        return GDTE_OK;
    }
    if (!user || !packed) return GDTE_ERR_NULL_BUFFER;

    int on_gpu = 0;
    if (!(flags & GDTE_PACK_FLAG_HOST) && gdte_gpu_available()) {
        gdte_mem_info_t mu, mp;
        /* The user buffer's first touched byte decides its kind (the buffer pointer itself
         * may lie outside the allocation when lb is negative). */
        const char *probe = (const char *)user + L.disp;
        if ((st = gdte_mem_query(probe, &mu)) != GDTE_OK || (st = gdte_mem_query(packed, &mp)) != GDTE_OK)
            return st;
        on_gpu = is_device_kind(mu.kind) || is_device_kind(mp.kind) ||
                 (mu.kind == GDTE_MEM_MANAGED && mp.kind == GDTE_MEM_MANAGED);
    }
    if (!on_gpu) {
        gdte_host_exec(&L, dir, user, packed, offset, n);
    } else {
        if (L.kind == GDTE_LAYOUT_KIND_UNITS && (st = gdte_devplan_units(type, &L.units)) != GDTE_OK) return st;
        int max_blocks = (int)gdte_knob(GDTE_KNOB_MAX_BLOCKS);
        if ((st = gdte_gpu_exec(&L, dir, user, packed, offset, n, stream, max_blocks)) != GDTE_OK) return st;
        if (!(flags & GDTE_PACK_FLAG_ASYNC) && (st = gdte_gpu_stream_synchronize(stream)) != GDTE_OK) return st;
    }
    if (done_p) *done_p = n;
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_pack(const void *inbuf, int64_t count, gdte_type_h type, void *outbuf, int64_t outsize,
                                 const gdte_pack_params_t *params, int64_t *packed_p)
{
    return run(GDTE_DIR_PACK, (void *)inbuf, count, type, outbuf, outsize, params, packed_p);
}

GDTE_API gdte_status_t gdte_unpack(const void *inbuf, int64_t insize, void *outbuf, int64_t count, gdte_type_h type,
                                   const gdte_pack_params_t *params, int64_t *unpacked_p)
{
    return run(GDTE_DIR_UNPACK, outbuf, count, type, (void *)inbuf, insize, params, unpacked_p);
}
