/* gdte_pack / gdte_unpack: validate, make the layout, choose the host or GPU executor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "callprof.h"
#include "kernels.h"
#include "devplan.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "util/util.h"

static int is_device_kind(gdte_mem_kind_t k) { return k == GDTE_MEM_DEVICE; }

/* GDTE_LOG=debug: one line per call, after it ran (the kernel named is the one launched).
 * Only reached when that level is on, so the default level costs one comparison. */
static void log_call(gdte_dir_t dir, int64_t n, int64_t offset, int64_t count, const gdte_layout_t *L,
                     gdte_mem_kind_t user_kind, gdte_mem_kind_t packed_kind, const char *executor, int staged)
{
    static const char *kinds[] = {"host", "pinned", "device", "managed"};
    static const char *layouts[] = {"empty", "contig", "strided", "units"};
    static const char *kvars[] = {"none", "contig", "strided", "tiled", "dev_warp", "dev_thread", "flat", "copy", "periodic"};
    const unsigned nkvars = sizeof kvars / sizeof kvars[0];
    char how[64];
    if (!executor) {
        gdte_kvar_t v = GDTE_KVAR_NONE;
        int word = 0;
        gdte_gpu_exec_last(&v, &word);
        if (word)
            snprintf(how, sizeof how, "GPU kernel %s, %d-byte words", (unsigned)v < nkvars ? kvars[v] : "?", word);
        else
            snprintf(how, sizeof how, "GPU kernel %s", (unsigned)v < nkvars ? kvars[v] : "?");
        executor = how;
    }
    gdte_debug("%s: %lld bytes at offset %lld of %lld element(s), %s layout; user buffer %s, packed buffer %s -> %s%s",
               dir == GDTE_DIR_PACK ? "gdte_pack" : "gdte_unpack", (long long)n, (long long)offset, (long long)count,
               (unsigned)L->kind < 4 ? layouts[L->kind] : "?", (unsigned)user_kind < 4 ? kinds[user_kind] : "?",
               (unsigned)packed_kind < 4 ? kinds[packed_kind] : "?", executor,
               staged ? " (pageable side staged, blocking)" : "");
}

static gdte_status_t gpu_run(gdte_type_h type, gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed,
                             int64_t offset, int64_t n, gdte_stream_t stream, int max_blocks)
{
    if (L->kind == GDTE_LAYOUT_KIND_UNITS)
        return gdte_devplan_exec(type, L, dir, user, packed, offset, n, stream, max_blocks);
    return gdte_gpu_exec(L, dir, user, packed, offset, n, stream, max_blocks);
}

/* One side is device memory and the other pageable host memory, which a kernel cannot touch.
 * The contiguous (packed) side is staged: when the scattered (user) side is on the host the
 * host executor runs and the packed bytes cross in one copy; when it is on the device the
 * kernel runs against a device buffer that crosses in one copy. Staging makes the call
 * blocking even with GDTE_PACK_FLAG_ASYNC. */
static gdte_status_t staged_run(gdte_type_h type, gdte_layout_t *L, gdte_dir_t dir, void *user, int user_on_host,
                                void *packed, int64_t offset, int64_t n, gdte_stream_t stream, int max_blocks)
{
    gdte_status_t st;
    if (user_on_host) {
        void *tmp = malloc((size_t)n);
        if (!tmp) return GDTE_ERR_NO_MEMORY;
        if (dir == GDTE_DIR_PACK) {
            gdte_host_exec(L, dir, user, tmp, offset, n);
            if ((st = gdte_gpu_stream_synchronize(stream)) == GDTE_OK)
                st = gdte_gpu_memcpy(packed, tmp, (size_t)n);
        } else {
            if ((st = gdte_gpu_stream_synchronize(stream)) == GDTE_OK &&
                (st = gdte_gpu_memcpy(tmp, packed, (size_t)n)) == GDTE_OK)
                gdte_host_exec(L, dir, user, tmp, offset, n);
        }
        free(tmp);
        return st;
    }
    void *dtmp;
    if ((st = gdte_gpu_malloc(&dtmp, (size_t)n)) != GDTE_OK) return st;
    if (dir == GDTE_DIR_PACK) {
        if ((st = gpu_run(type, L, dir, user, dtmp, offset, n, stream, max_blocks)) == GDTE_OK)
            st = gdte_gpu_memcpy_async(packed, dtmp, (size_t)n, stream);
    } else {
        if ((st = gdte_gpu_memcpy_async(dtmp, packed, (size_t)n, stream)) == GDTE_OK)
            st = gpu_run(type, L, dir, user, dtmp, offset, n, stream, max_blocks);
    }
    gdte_status_t st2 = gdte_gpu_stream_synchronize(stream);
    gdte_gpu_free(dtmp);
    return st != GDTE_OK ? st : st2;
}

static gdte_status_t run(gdte_dir_t dir, void *user, int64_t count, gdte_type_h type, void *packed, int64_t avail,
                         const gdte_pack_params_t *params, int64_t *done_p)
{
    gdte_status_t st;
    gdte_layout_t L;
    int64_t offset = 0, max_bytes = INT64_MAX;
    uint64_t flags = 0;
    gdte_stream_t stream = NULL;
    /* GDTETEST_PROFILE_CALLS=1: the host time of each stage (callprof.h); t_start stays 0 when off. */
    const double t_start = gdte_callprof_on ? gdte_time_now() : 0;
    double t_mark = t_start;
#define STAGE_DONE(stage)                                                                          \
    do {                                                                                         \
        if (t_start) {                                                                           \
            double t_ = gdte_time_now();                                                         \
            gdte_callprof_add((stage), t_ - t_mark);                                             \
            t_mark = t_;                                                                         \
        }                                                                                        \
    } while (0)
    /* The layout validates the handle (first) and the count: one lookup of the type per call. */
    if ((st = gdte_engine_layout(type, count, &L)) != GDTE_OK) return st;
    if (avail < 0) return GDTE_ERR_INVALID_ARG;
    if (params) {
        if (params->field_mask & GDTE_PACK_FIELD_OFFSET) offset = params->offset;
        if (params->field_mask & GDTE_PACK_FIELD_MAX_BYTES) max_bytes = params->max_bytes;
        if (params->field_mask & GDTE_PACK_FIELD_STREAM) stream = params->stream;
        if (params->field_mask & GDTE_PACK_FIELD_FLAGS) flags = params->flags;
    }
    if (offset < 0 || max_bytes < 0) return GDTE_ERR_INVALID_ARG;
    if (offset > L.total) return GDTE_ERR_OFFSET;
    int64_t n = L.total - offset;
    if (n > avail) n = avail;
    if (n > max_bytes) n = max_bytes;
    if (n == 0) {
        if (done_p) *done_p = 0;
        return GDTE_OK;
    }
    /* The first byte the operation touches (with count > 1 and a negative extent a later
     * element may lie lower, but this one is touched too). */
    const char *first;
    if (!user && L.true_lb != 0) {
        /* MPI_BOTTOM: the type's displacements are absolute addresses. Rebase on the first
         * touched byte so no executor offsets a null pointer. */
        user = (void *)(uintptr_t)L.true_lb;
        L.disp -= L.true_lb;
        first = (const char *)user;
    } else {
        first = (const char *)((uintptr_t)user + (uintptr_t)L.true_lb);
    }
    if (!user || !packed) return GDTE_ERR_NULL_BUFFER;

    STAGE_DONE(GDTE_CP_LAYOUT);
    int on_gpu = 0;
    gdte_mem_info_t mu = {GDTE_MEM_HOST, -1}, mp = {GDTE_MEM_HOST, -1};
    if (gdte_gpu_available()) {
        /* The user buffer's first touched byte decides its kind (the buffer pointer itself
         * may lie outside the allocation when the true lb is not 0). */
        const char *probe = first;
        if ((st = gdte_mem_query(probe, &mu)) != GDTE_OK || (st = gdte_mem_query(packed, &mp)) != GDTE_OK)
            return st;
        if (flags & GDTE_PACK_FLAG_HOST) {
            /* The host cannot touch device memory: refuse instead of faulting. The cache may
             * hold a range the application freed since: ask the runtime before refusing. */
            if (is_device_kind(mu.kind) && gdte_gpu_pointer_query(probe, &mu) != GDTE_OK) return GDTE_ERR_GPU;
            if (is_device_kind(mp.kind) && gdte_gpu_pointer_query(packed, &mp) != GDTE_OK) return GDTE_ERR_GPU;
            if (is_device_kind(mu.kind) || is_device_kind(mp.kind)) return GDTE_ERR_MEMORY_KIND;
        } else {
            on_gpu = is_device_kind(mu.kind) || is_device_kind(mp.kind) ||
                     (mu.kind == GDTE_MEM_MANAGED && mp.kind == GDTE_MEM_MANAGED);
        }
    }
    STAGE_DONE(GDTE_CP_MEMKIND);
    int debug = gdte_log_level_g >= GDTE_LOG_DEBUG;
    if (!on_gpu) {
        gdte_host_exec(&L, dir, user, packed, offset, n);
        if (debug) log_call(dir, n, offset, count, &L, mu.kind, mp.kind, "host executor", 0);
    } else {
        int max_blocks = (int)gdte_knob(GDTE_KNOB_MAX_BLOCKS);
        int user_host = mu.kind == GDTE_MEM_HOST, packed_host = mp.kind == GDTE_MEM_HOST;
        if (L.kind != GDTE_LAYOUT_KIND_CONTIG && (user_host || packed_host)) {
            /* (a contiguous layout is one copy, which the runtime does from pageable memory) */
            if ((st = staged_run(type, &L, dir, user, user_host, packed, offset, n, stream, max_blocks)) != GDTE_OK)
                return st;
            if (debug) log_call(dir, n, offset, count, &L, mu.kind, mp.kind, user_host ? "host executor" : NULL, 1);
        } else {
            if ((st = gpu_run(type, &L, dir, user, packed, offset, n, stream, max_blocks)) != GDTE_OK) return st;
            if (t_start) t_mark = gdte_time_now(); /* plan, choice and launch are timed inside */
            if (!(flags & GDTE_PACK_FLAG_ASYNC) && (st = gdte_gpu_stream_synchronize(stream)) != GDTE_OK) return st;
            STAGE_DONE(GDTE_CP_SYNC);
            if (debug) log_call(dir, n, offset, count, &L, mu.kind, mp.kind, NULL, 0);
        }
    }
    if (done_p) *done_p = n;
    if (t_start) {
        gdte_callprof_add(GDTE_CP_TOTAL, gdte_time_now() - t_start);
        gdte_callprof_call();
    }
    return GDTE_OK;
#undef STAGE_DONE
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
