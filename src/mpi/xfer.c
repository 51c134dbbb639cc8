/* Fragmented device <-> host movement of packed streams (see xfer.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "xfer.h"
#include "staging.h"
#include "engine/engine.h"
#include "engine/layout.h"
#include "gpu/gpu.h"
#include "kernels/memquery.h"
#include "util/util.h"

#define XFER_MAX_DEPTH 64
/* Below this a single kernel into mapped memory beats a kernel + copy launch pair. */
#define XFER_ZERO_COPY_AUTO_MAX (64 * 1024)
/* Messages up to this size are moved as one fragment: splitting them costs more in launch
 * latency than the overlap wins. */
#define XFER_ONE_FRAG_MAX (512 * 1024)

enum { ZC_AUTO = 0, ZC_ON = 1, ZC_OFF = 2 }; /* order of GDTE_ZERO_COPY's accepted list */

/* Small messages by the copy engines alone. Why: when processes share a GPU (more ranks than
 * GPUs, no MPS), a kernel needs the GPU to switch over from the context that ran last, and so do
 * the driver's own 1-D host-to-device copies under 32 KiB and its device-to-device copies:
 * 145-150 us a turn on an H100, against 8-20 us for a device-to-host copy of any size, a
 * host-to-device copy from 32 KiB, or a 2-D copy whose pitch differs from its width
 * (bench/mpi/ctxprobe, ctxprobe-h100.csv). A small message whose layout is one block or blocks
 * at one stride is therefore moved by one such copy, no kernel: up to XFER_CE_MAX bytes and
 * XFER_CE_MAX_ROWS blocks (past that a kernel is faster than a copy engine walking short rows).
 * So is one whose blocks lie on a 2-D grid whose plane stride is a whole number of rows (the
 * face of a 3-D array, MPI_Type_create_subarray): one 3-D copy, up to XFER_CE_MAX_ROWS_3D blocks
 * (on one H200 shared by two processes, 4096 rows of 8 bytes: 22 us a turn device to host, 27 us
 * host to device, against 153 us for a kernel; ctxprobe's d2h_3d_face/h2d_3d_face). */
#define XFER_CE_MAX (64 * 1024)
#define XFER_CE_MAX_ROWS 2048
#define XFER_CE_MAX_ROWS_3D 8192
#define XFER_CE_H2D_1D_MIN (32 * 1024)
/* The ring of the asynchronous packs holds this many bytes of fragments (whole messages of up to
 * that size are then packed by one launch). */
#define XFER_ASYNC_RING (16 * 1024 * 1024)
/* The bounds in force (gdte_xfer_set_ce_bounds). */
static _Atomic int64_t ce_max = XFER_CE_MAX, ce_max_rows = XFER_CE_MAX_ROWS;

void gdte_xfer_set_ce_bounds(int64_t bytes, int64_t rows)
{
    if (bytes > 0) atomic_store_explicit(&ce_max, bytes, memory_order_relaxed);
    if (rows > 0) atomic_store_explicit(&ce_max_rows, rows, memory_order_relaxed);
}

typedef struct xfer_gpu {
    int ready;
    gdte_stream_t s_pack, s_copy;
    gdte_gpu_event_t ev_a[XFER_MAX_DEPTH], ev_b[XFER_MAX_DEPTH];
    gdte_gpu_event_t ev_app; /* the application's default-stream work, before our streams */
    /* The ring of the asynchronous packs (gdte_xfer_pack_to_host_start), shared by all of them:
     * their work is queued in order on the two streams, so fragment g of all time takes slot
     * g mod a_depth after the copy that last used it (a_copied[slot]), on the GPU. */
    gdte_stage_t *a_ring;
    int64_t a_slot, a_depth, a_next;
    int a_queued;               /* a_last recorded since the ring was made */
    gdte_gpu_event_t a_last;    /* after the last copy queued */
    int a_used[XFER_MAX_DEPTH];
    gdte_gpu_event_t a_packed[XFER_MAX_DEPTH], a_copied[XFER_MAX_DEPTH];
    int timed; /* GDTETEST_FRAG_TIMES */
} xfer_gpu_t;

static pthread_mutex_t xfer_lock = PTHREAD_MUTEX_INITIALIZER;
static void jobs_free_all_locked(void);
static xfer_gpu_t G;
static _Atomic int64_t n_fragments, n_zero_copies, n_copy_engine;

/* One pipeline run: what the fragment loop needs, for the GPU or the fake device. */
typedef struct xfer {
    int fake;
    void *user;
    int64_t count;
    gdte_type_h type;
} xfer_t;

static gdte_status_t gpu_setup_locked(void)
{
    if (G.ready) return GDTE_OK;
    gdte_status_t st;
    if ((st = gdte_gpu_stream_create(&G.s_pack)) != GDTE_OK) return st;
    if ((st = gdte_gpu_stream_create(&G.s_copy)) != GDTE_OK) return st;
    if ((st = gdte_gpu_event_create(&G.ev_app, 0)) != GDTE_OK) return st;
    if ((st = gdte_gpu_event_create(&G.a_last, 0)) != GDTE_OK) return st;
    G.timed = getenv("GDTETEST_FRAG_TIMES") != NULL;
    for (int i = 0; i < XFER_MAX_DEPTH; i++) {
        if ((st = gdte_gpu_event_create(&G.ev_a[i], 0)) != GDTE_OK) return st;
        if ((st = gdte_gpu_event_create(&G.ev_b[i], 0)) != GDTE_OK) return st;
        if ((st = gdte_gpu_event_create(&G.a_packed[i], 0)) != GDTE_OK) return st;
        if ((st = gdte_gpu_event_create(&G.a_copied[i], 0)) != GDTE_OK) return st;
    }
    G.ready = 1;
    return GDTE_OK;
}

void gdte_xfer_finalize(void)
{
    pthread_mutex_lock(&xfer_lock);
    jobs_free_all_locked();
    if (G.ready) {
        (void)gdte_gpu_stream_synchronize(G.s_pack);
        (void)gdte_gpu_stream_synchronize(G.s_copy);
        if (G.a_ring) gdte_stage_release(G.a_ring);
        gdte_gpu_event_destroy(G.a_last);
        for (int i = 0; i < XFER_MAX_DEPTH; i++) {
            gdte_gpu_event_destroy(G.ev_a[i]);
            gdte_gpu_event_destroy(G.ev_b[i]);
            gdte_gpu_event_destroy(G.a_packed[i]);
            gdte_gpu_event_destroy(G.a_copied[i]);
        }
        gdte_gpu_event_destroy(G.ev_app);
        gdte_gpu_stream_destroy(G.s_pack);
        gdte_gpu_stream_destroy(G.s_copy);
        memset(&G, 0, sizeof G);
    }
    pthread_mutex_unlock(&xfer_lock);
}

int64_t gdte_xfer_frag_size(int64_t nbytes)
{
    int64_t f = gdte_knob(GDTE_KNOB_FRAG_SIZE);
    if (f > 0) return f;
    if (nbytes <= XFER_ONE_FRAG_MAX) return nbytes > 0 ? nbytes : 1;
    /* About eight fragments per message, 256 KiB to 4 MiB each (Wu 2017, 4.3.2: 1-4 MiB typical;
     * smaller ones still hide the copy behind the kernel on mid-size faces). */
    f = nbytes / 8;
    if (f < 256 * 1024) f = 256 * 1024;
    if (f > 4 * 1024 * 1024) f = 4 * 1024 * 1024;
    return (f + 4095) & ~(int64_t)4095;
}

static int use_zero_copy(int64_t nbytes, int host_pinned, int fake)
{
    int64_t zc = gdte_knob(GDTE_KNOB_ZERO_COPY);
    /* A kernel can only write host memory the GPU can map; the fake device can write anything. */
    if (!host_pinned && !fake) return 0;
    if (zc == ZC_ON) return 1;
    if (zc == ZC_OFF) return 0;
    return nbytes <= XFER_ZERO_COPY_AUTO_MAX;
}

/* Pack or unpack bytes [off, off+len) of the stream between the user buffer and `packed`. */
static gdte_status_t x_exec(const xfer_t *x, int unpack, void *packed, int64_t off, int64_t len, int async)
{
    gdte_pack_params_t p = {0};
    p.field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES | GDTE_PACK_FIELD_FLAGS;
    p.offset = off;
    p.max_bytes = len;
    if (x->fake) {
        p.flags = GDTE_PACK_FLAG_HOST;
    } else {
        p.field_mask |= GDTE_PACK_FIELD_STREAM;
        p.stream = G.s_pack;
        p.flags = async ? GDTE_PACK_FLAG_ASYNC : 0;
    }
    int64_t done = 0;
    gdte_status_t st = unpack ? gdte_unpack(packed, len, x->user, x->count, x->type, &p, &done)
                              : gdte_pack(x->user, x->count, x->type, packed, len, &p, &done);
    if (st == GDTE_OK && done != len) {
        gdte_error("%s of bytes [%lld, %lld) moved %lld bytes", unpack ? "unpack" : "pack", (long long)off,
                   (long long)(off + len), (long long)done);
        st = GDTE_ERR_INTERNAL;
    }
    return st;
}

static gdte_status_t x_copy(const xfer_t *x, void *dst, const void *src, int64_t len)
{
    if (x->fake) {
        memcpy(dst, src, (size_t)len);
        return GDTE_OK;
    }
    return gdte_gpu_memcpy_async(dst, src, (size_t)len, G.s_copy);
}

/* Make stream `waiter` (0 pack, 1 copy) wait for event `ev` recorded on the other one. The
 * fake device runs everything in program order, so ordering is already there. */
static gdte_status_t x_signal(const xfer_t *x, gdte_gpu_event_t ev, int on_copy)
{
    if (x->fake) return GDTE_OK;
    return gdte_gpu_event_record(ev, on_copy ? G.s_copy : G.s_pack);
}
static gdte_status_t x_wait(const xfer_t *x, gdte_gpu_event_t ev, int on_copy)
{
    if (x->fake) return GDTE_OK;
    return gdte_gpu_stream_wait_event(on_copy ? G.s_copy : G.s_pack, ev);
}

static gdte_status_t x_copy2d(const xfer_t *x, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height)
{
    if (!x->fake) return gdte_gpu_memcpy2d_async(dst, dpitch, src, spitch, width, height, G.s_pack);
    for (size_t r = 0; r < height; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return GDTE_OK;
}

static gdte_status_t x_copy3d(const xfer_t *x, void *dst, size_t dpitch, size_t drows, const void *src, size_t spitch,
                              size_t srows, size_t width, size_t height, size_t depth)
{
    if (!x->fake) return gdte_gpu_memcpy3d_async(dst, dpitch, drows, src, spitch, srows, width, height, depth, G.s_pack);
    for (size_t z = 0; z < depth; z++)
        for (size_t r = 0; r < height; r++)
            memcpy((char *)dst + (z * drows + r) * dpitch, (const char *)src + (z * srows + r) * spitch, width);
    return GDTE_OK;
}

/* How the copy-engine path would move (type, count): 1 one block, 2 blocks at one stride, 3
 * blocks on a 2-D grid whose plane stride is a whole number of rows, 0 not at all (see
 * XFER_CE_MAX). *L_p receives the layout. */
static int ce_shape(gdte_type_h type, int64_t count, int64_t nbytes, int unpack, gdte_layout_t *L_p)
{
    gdte_layout_t *L = L_p;
    if (nbytes > atomic_load_explicit(&ce_max, memory_order_relaxed) || gdte_engine_layout(type, count, L) != GDTE_OK ||
        L->total != nbytes)
        return 0;
    if (L->kind == GDTE_LAYOUT_KIND_STRIDED && L->ndims == 1 &&
        L->count[0] <= atomic_load_explicit(&ce_max_rows, memory_order_relaxed) &&
        L->stride[0] > L->blocklen && L->stride[0] < INT32_MAX)
        return 2;
    if (L->kind == GDTE_LAYOUT_KIND_STRIDED && L->ndims == 2 && L->stride[0] > L->blocklen &&
        L->stride[0] < INT32_MAX && L->stride[1] > 0 && L->stride[1] % L->stride[0] == 0 &&
        L->stride[1] / L->stride[0] >= L->count[0] && L->stride[1] < INT32_MAX &&
        L->count[0] * L->count[1] <= XFER_CE_MAX_ROWS_3D)
        return 3;
    if (L->kind != GDTE_LAYOUT_KIND_CONTIG) return 0;
    return !unpack || nbytes >= XFER_CE_H2D_1D_MIN || nbytes % 2 == 0 ? 1 : 0;
}

int gdte_xfer_copy_engine_shape(gdte_type_h type, int64_t count, int64_t nbytes)
{
    gdte_layout_t L;
    return ce_shape(type, count, nbytes, 1, &L) != 0;
}

int gdte_xfer_copy_engine_fits(gdte_type_h type, int64_t count, int64_t nbytes)
{
    return gdte_gpu_available() && gdte_xfer_copy_engine_shape(type, count, nbytes);
}

/* The copy-engine path (see XFER_CE_MAX). Returns GDTE_ERR_UNSUPPORTED when the message does not
 * qualify, before anything was queued. `done` (pack only): recorded on the pack stream after the
 * copy instead of waiting for it (an asynchronous job). */
static gdte_status_t run_copy_engine(const xfer_t *x, int unpack, void *host, int host_pinned, int64_t nbytes,
                                     gdte_gpu_event_t done)
{
    gdte_layout_t L;
    int shape = (host_pinned || x->fake) ? ce_shape(x->type, x->count, nbytes, unpack, &L) : 0;
    if (!shape) return GDTE_ERR_UNSUPPORTED;
    /* In integers: the buffer may be MPI_BOTTOM (NULL) with absolute displacements. */
    char *u = (char *)((uintptr_t)x->user + (uintptr_t)L.disp);
    /* One runtime copy covers one allocation: blocks that reach into another (a type with
     * relative displacements between two arrays) go by the kernel, which reads any address. */
    int64_t span = shape == 3   ? L.stride[1] * (L.count[1] - 1) + L.stride[0] * (L.count[0] - 1) + L.blocklen
                   : shape == 2 ? L.stride[0] * (L.count[0] - 1) + L.blocklen
                                : nbytes;
    if (!x->fake && !gdte_mem_span_one_alloc(u, u + span - 1)) return GDTE_ERR_UNSUPPORTED;
    gdte_status_t st;
    gdte_stage_t *scratch = NULL;
    if (shape == 3) {
        /* Planes of rows: one 3-D copy, the packed side dense (the planes' stride in rows). A
         * copy the runtime refuses was never queued: the kernels move the message. */
        size_t w = (size_t)L.blocklen, pitch = (size_t)L.stride[0], rows = (size_t)(L.stride[1] / L.stride[0]);
        size_t h = (size_t)L.count[0], d = (size_t)L.count[1];
        st = unpack ? x_copy3d(x, u, pitch, rows, host, w, h, w, h, d) : x_copy3d(x, host, w, h, u, pitch, rows, w, h, d);
        if (st == GDTE_ERR_UNSUPPORTED) {
            gdte_debug("3-D copy of %zu planes of %zu rows of %zu bytes refused by the runtime: by the kernels", d, h, w);
            return st;
        }
    } else if (shape == 2) {
        /* Blocks at a stride: one 2-D copy, the packed side dense. */
        st = unpack ? x_copy2d(x, u, (size_t)L.stride[0], host, (size_t)L.blocklen, (size_t)L.blocklen, (size_t)L.count[0])
                    : x_copy2d(x, host, (size_t)L.blocklen, u, (size_t)L.stride[0], (size_t)L.blocklen, (size_t)L.count[0]);
    } else if (!unpack || nbytes >= XFER_CE_H2D_1D_MIN) {
        st = x->fake ? (memcpy(unpack ? (void *)u : host, unpack ? host : (void *)u, (size_t)nbytes), GDTE_OK)
                     : gdte_gpu_memcpy_async(unpack ? (void *)u : host, unpack ? host : u, (size_t)nbytes, G.s_pack);
    } else {
        /* A short dense host-to-device copy as two rows whose source pitch is one byte longer
         * than their width: the copy engine takes it as 2-D (the halves are first set apart by
         * one byte in pinned scratch). */
        size_t h = (size_t)nbytes / 2;
        if ((st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, 2 * h + 1, &scratch)) != GDTE_OK) return st;
        if (!scratch->pinned && !x->fake) {
            gdte_stage_release(scratch);
            return GDTE_ERR_UNSUPPORTED;
        }
        memcpy(scratch->ptr, host, h);
        memcpy((char *)scratch->ptr + h + 1, (const char *)host + h, h);
        st = x_copy2d(x, u, h, scratch->ptr, h + 1, h, 2);
    }
    if (!x->fake && done && !scratch) {
        if (st == GDTE_OK) st = gdte_gpu_event_record(done, G.s_pack);
    } else if (!x->fake) {
        gdte_status_t s2 = gdte_gpu_stream_synchronize(G.s_pack);
        if (st == GDTE_OK) st = s2;
    }
    if (scratch) gdte_stage_release(scratch);
    if (st == GDTE_OK) {
        n_fragments++;
        n_copy_engine++;
        gdte_trace("%s %lld bytes by the copy engine alone", unpack ? "unpacked" : "packed", (long long)nbytes);
    }
    return st;
}

/* Fragments [*next, upto) whose bytes are in host memory, handed to nt->ready in order. `block`:
 * wait for them (nt->idle between polls) rather than stop at the first still on its way. The
 * fake device copies synchronously: everything queued is there. */
static gdte_status_t notify_ready(const xfer_t *x, const gdte_xfer_notify_t *nt, int64_t *next, int64_t upto,
                                  int64_t frag, int64_t depth, int64_t nbytes, int block)
{
    while (*next < upto) {
        int64_t k = *next;
        if (!x->fake) {
            gdte_status_t q = gdte_gpu_event_query(G.ev_b[k % depth]);
            if (q == GDTE_INPROGRESS) {
                if (!block) return GDTE_OK;
                if (nt->idle) nt->idle(nt->arg);
                continue;
            }
            if (q != GDTE_OK) return q;
        }
        int64_t off = k * frag;
        int64_t len = nbytes - off < frag ? nbytes - off : frag;
        gdte_status_t st = nt->ready(nt->arg, off, len);
        if (st != GDTE_OK) return st;
        (*next)++;
    }
    return GDTE_OK;
}

static gdte_status_t run_pipeline(const xfer_t *x, int unpack, void *host, int host_pinned, int64_t nbytes,
                                  const gdte_xfer_notify_t *nt)
{
    gdte_status_t st = GDTE_OK;
    if (nbytes == 0) return GDTE_OK;
    /* Our streams do not synchronise with the legacy default stream: make the pack stream wait
     * for whatever the application queued there before calling MPI (a kernel that produced the
     * send data), as a blocking stream would. */
    if (!x->fake && ((st = gdte_gpu_event_record(G.ev_app, NULL)) != GDTE_OK ||
                     (st = gdte_gpu_stream_wait_event(G.s_pack, G.ev_app)) != GDTE_OK))
        return st;
    /* Fragments the caller hands on as they land (pack only): through the ring, so that each
     * one's copy to the host has its own event. */
    if (nt) goto ring;

    if (gdte_knob(GDTE_KNOB_ZERO_COPY) != ZC_ON) {
        st = run_copy_engine(x, unpack, host, host_pinned, nbytes, NULL);
        if (st != GDTE_ERR_UNSUPPORTED) return st;
        st = GDTE_OK;
    }

    if (use_zero_copy(nbytes, host_pinned, x->fake)) {
        void *packed = host;
        if (!x->fake && (st = gdte_gpu_host_device_pointer(host, &packed)) != GDTE_OK) return st;
        if ((st = x_exec(x, unpack, packed, 0, nbytes, 0)) != GDTE_OK) return st;
        n_fragments++;
        n_zero_copies++;
        return GDTE_OK;
    }

ring:;
    int64_t frag = nt ? nt->frag : gdte_xfer_frag_size(nbytes);
    int64_t nfrag = (nbytes + frag - 1) / frag;
    int64_t next = 0; /* nt: the first fragment not yet handed on */
    int64_t depth = gdte_knob(GDTE_KNOB_PIPELINE_DEPTH);
    if (depth > nfrag) depth = nfrag;
    if (depth > XFER_MAX_DEPTH) depth = XFER_MAX_DEPTH;
    int64_t ring_bytes = depth * frag;
    if (ring_bytes > nbytes) ring_bytes = nbytes;

    gdte_stage_t *ring = NULL;
    if ((st = gdte_stage_acquire(GDTE_STAGE_DEVICE, x->fake, (size_t)ring_bytes, &ring)) != GDTE_OK) return st;
    char *rb = ring->ptr;
    char *hb = host;
    /* ev_a[slot]: the device side of the slot is ready (packed, or copied in);
     * ev_b[slot]: the slot may be reused (copied out, or unpacked). */
    for (int64_t k = 0; k < nfrag && st == GDTE_OK; k++) {
        int64_t slot = k % depth;
        int64_t off = k * frag;
        int64_t len = nbytes - off < frag ? nbytes - off : frag;
        char *r = rb + slot * frag;
        if (!unpack) {
            /* The slot's event is recorded again below: the fragment it marked is handed on
             * first. */
            if (nt && k >= depth && (st = notify_ready(x, nt, &next, k - depth + 1, frag, depth, nbytes, 1)) != GDTE_OK)
                break;
            if (k >= depth && (st = x_wait(x, G.ev_b[slot], 0)) != GDTE_OK) break;
            if ((st = x_exec(x, 0, r, off, len, 1)) != GDTE_OK) break;
            if ((st = x_signal(x, G.ev_a[slot], 0)) != GDTE_OK) break;
            if ((st = x_wait(x, G.ev_a[slot], 1)) != GDTE_OK) break;
            if ((st = x_copy(x, hb + off, r, len)) != GDTE_OK) break;
            st = x_signal(x, G.ev_b[slot], 1);
            if (nt && st == GDTE_OK) st = notify_ready(x, nt, &next, k + 1, frag, depth, nbytes, 0);
        } else {
            if (k >= depth && (st = x_wait(x, G.ev_b[slot], 1)) != GDTE_OK) break;
            if ((st = x_copy(x, r, hb + off, len)) != GDTE_OK) break;
            if ((st = x_signal(x, G.ev_a[slot], 1)) != GDTE_OK) break;
            if ((st = x_wait(x, G.ev_a[slot], 0)) != GDTE_OK) break;
            if ((st = x_exec(x, 1, r, off, len, 1)) != GDTE_OK) break;
            st = x_signal(x, G.ev_b[slot], 0);
        }
        gdte_trace("%s fragment %lld of %lld: bytes [%lld, %lld)", unpack ? "unpack" : "pack", (long long)k,
                   (long long)nfrag, (long long)off, (long long)(off + len));
        n_fragments++;
    }
    if (nt && st == GDTE_OK) st = notify_ready(x, nt, &next, nfrag, frag, depth, nbytes, 1);
    /* Drain both streams even after an error: the ring goes back to the pool and must not be
     * the target of a copy still in flight. */
    if (!x->fake) {
        gdte_status_t s1 = gdte_gpu_stream_synchronize(G.s_pack);
        gdte_status_t s2 = gdte_gpu_stream_synchronize(G.s_copy);
        if (st == GDTE_OK) st = s1 != GDTE_OK ? s1 : s2;
    }
    gdte_stage_release(ring);
    return st;
}

static gdte_status_t xfer_run(const void *user, int64_t count, gdte_type_h type, int fake, int unpack, void *host,
                              int host_pinned, int64_t nbytes, const gdte_xfer_notify_t *nt)
{
    xfer_t x = {.fake = fake, .user = (void *)user, .count = count, .type = type};
    gdte_status_t st;
    if (fake) return run_pipeline(&x, unpack, host, host_pinned, nbytes, nt);
    pthread_mutex_lock(&xfer_lock);
    st = gpu_setup_locked();
    if (st == GDTE_OK) st = run_pipeline(&x, unpack, host, host_pinned, nbytes, nt);
    pthread_mutex_unlock(&xfer_lock);
    return st;
}

gdte_status_t gdte_xfer_pack_to_host_notify(const void *user, int64_t count, gdte_type_h type, int fake, void *dst,
                                            int64_t nbytes, const gdte_xfer_notify_t *nt)
{
    if (!nt || !nt->ready || nt->frag <= 0) return GDTE_ERR_INVALID_ARG;
    if (nbytes <= nt->frag) {
        /* One fragment: the whole-message path (small dense or single-stride messages by the copy
         * engines alone, no kernel), then handed on. */
        gdte_status_t st = xfer_run(user, count, type, fake, 0, dst, 1, nbytes, NULL);
        return st == GDTE_OK ? nt->ready(nt->arg, 0, nbytes) : st;
    }
    return xfer_run(user, count, type, fake, 0, dst, 0, nbytes, nt);
}

gdte_status_t gdte_xfer_pack_to_host(const void *user, int64_t count, gdte_type_h type, int fake, void *dst,
                                     int dst_pinned, int64_t nbytes)
{
    return xfer_run(user, count, type, fake, 0, dst, dst_pinned, nbytes, NULL);
}

gdte_status_t gdte_xfer_unpack_from_host(const void *src, int src_pinned, int64_t nbytes, void *user, int64_t count,
                                         gdte_type_h type, int fake)
{
    return xfer_run(user, count, type, fake, 1, (void *)src, src_pinned, nbytes, NULL);
}

/* ---- asynchronous packs into host memory (nonblocking sends to other nodes) ----
 * Everything is queued at once: fragment k is packed into a slot of the shared ring (G.a_ring)
 * on the pack stream, after the copy that last used that slot (by its event: a slot is reused in
 * the GPU's order, never waited for on the host), then copied to the host on the copy stream,
 * after which the fragment's own event is recorded: the caller learns which fragments have
 * landed without blocking. The job holds its events and a reference to the type (the
 * application may free its datatype once the send is posted) until gdte_xfer_job_end. */
struct gdte_xfer_job {
    int fake, fake_queries, queued;
    int64_t nfrag, landed;
    gdte_status_t st;     /* the first error of queueing or of a fragment's work */
    gdte_type_h type;
    gdte_gpu_event_t *ev; /* one per fragment: on the host */
    int64_t nev, cap;     /* events created (kept when the job is recycled); ev's length */
    double t_exec, t_order, t_copy; /* with `timed`: host seconds queueing packs, events, copies */
    int timed;
};

/* Recycled jobs, their events kept (creating one is a driver call): a steady stream of messages
 * allocates nothing. Under xfer_lock. */
#define XFER_JOBS_KEEP 64
static gdte_xfer_job_t *job_free[XFER_JOBS_KEEP];
static int job_nfree;

static void job_destroy(gdte_xfer_job_t *j)
{
    for (int64_t i = 0; i < j->nev; i++) gdte_gpu_event_destroy(j->ev[i]);
    free(j->ev);
    free(j);
}

static void jobs_free_all_locked(void)
{
    while (job_nfree) job_destroy(job_free[--job_nfree]);
}

/* A job for `nfrag` fragments, its event array long enough (NULL: out of memory). */
static gdte_xfer_job_t *job_get(int64_t nfrag, int fake)
{
    pthread_mutex_lock(&xfer_lock);
    gdte_xfer_job_t *j = job_nfree ? job_free[--job_nfree] : NULL;
    pthread_mutex_unlock(&xfer_lock);
    if (!j && !(j = calloc(1, sizeof *j))) return NULL;
    gdte_gpu_event_t *ev = j->ev;
    int64_t nev = j->nev, cap = j->cap;
    if (nfrag > cap) {
        gdte_gpu_event_t *e = realloc(ev, sizeof *e * (size_t)nfrag);
        if (!e) {
            job_destroy(j);
            return NULL;
        }
        ev = e, cap = nfrag;
    }
    memset(j, 0, sizeof *j);
    j->ev = ev, j->nev = nev, j->cap = cap;
    j->fake = fake;
    j->nfrag = nfrag;
    return j;
}

/* The shared ring cut into slots of `frag` bytes (rounded up to 4 KiB), as many as fit, at least
 * `least`. The buffer holds XFER_ASYNC_RING bytes (more only where `least` slots need it: then it
 * is replaced once the streams have drained, a wait of the host). A message with another
 * fragment size re-cuts it: its packs wait on the GPU for every copy queued before (G.a_last),
 * nothing on the host. */
static gdte_status_t a_ring_locked(int64_t frag, int64_t least)
{
    gdte_status_t st;
    int64_t slot = (frag + 4095) & ~(int64_t)4095;
    int64_t bytes = slot * least > XFER_ASYNC_RING ? slot * least : XFER_ASYNC_RING;
    if (!G.a_ring || (int64_t)G.a_ring->size < bytes) {
        if ((st = gdte_gpu_stream_synchronize(G.s_pack)) != GDTE_OK ||
            (st = gdte_gpu_stream_synchronize(G.s_copy)) != GDTE_OK)
            return st;
        if (G.a_ring) gdte_stage_release(G.a_ring);
        G.a_ring = NULL;
        if ((st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, (size_t)bytes, &G.a_ring)) != GDTE_OK) return st;
        G.a_slot = 0; /* re-cut below; nothing queued is left to wait for */
        G.a_queued = 0;
    }
    int64_t depth = (int64_t)G.a_ring->size / slot;
    if (depth > XFER_MAX_DEPTH) depth = XFER_MAX_DEPTH;
    if (slot == G.a_slot && depth == G.a_depth) return GDTE_OK;
    if (G.a_queued && (st = gdte_gpu_stream_wait_event(G.s_pack, G.a_last)) != GDTE_OK) return st;
    G.a_slot = slot;
    G.a_depth = depth;
    G.a_next = 0;
    memset(G.a_used, 0, sizeof G.a_used);
    return GDTE_OK;
}

static gdte_status_t job_queue_locked(const xfer_t *x, gdte_xfer_job_t *j, char *dst, int64_t nbytes, int64_t frag)
{
    gdte_status_t st;
    for (; j->nev < j->nfrag; j->nev++)
        if ((st = gdte_gpu_event_create(&j->ev[j->nev], 0)) != GDTE_OK) return st;
    /* After the application's default-stream work, as in run_pipeline. */
    if ((st = gdte_gpu_event_record(G.ev_app, NULL)) != GDTE_OK ||
        (st = gdte_gpu_stream_wait_event(G.s_pack, G.ev_app)) != GDTE_OK)
        return st;
    if (j->nfrag == 1 && gdte_knob(GDTE_KNOB_ZERO_COPY) != ZC_ON) {
        /* One fragment: the copy engines alone where the layout allows (no kernel). */
        st = run_copy_engine(x, 0, dst, 1, nbytes, j->ev[0]);
        j->queued = st == GDTE_OK;
        if (st != GDTE_ERR_UNSUPPORTED) return st;
    }
    int64_t least = gdte_knob(GDTE_KNOB_PIPELINE_DEPTH);
    if (least > XFER_MAX_DEPTH) least = XFER_MAX_DEPTH;
    if ((st = a_ring_locked(frag, least)) != GDTE_OK) return st;
    for (int64_t k = 0; k < j->nfrag;) {
        /* A group: the fragments whose slots follow one another up to the ring's end, packed by
         * one launch (a launch costs the host ~5 us; the GPU packs faster than the copies
         * drain), after the copy that last used the group's last slot (copies complete in
         * order: the earlier slots' are done by then). */
        int64_t slot = G.a_next % G.a_depth, m = G.a_depth - slot;
        if (m > j->nfrag - k) m = j->nfrag - k;
        int64_t off = k * frag, glen = (k + m) * frag < nbytes ? m * frag : nbytes - off, last = slot + m - 1;
        char *r = (char *)G.a_ring->ptr + slot * G.a_slot;
        double t0 = j->timed ? gdte_time_now() : 0, t1 = 0, t2 = 0, t3 = 0;
        if (G.a_used[last] && (st = gdte_gpu_stream_wait_event(G.s_pack, G.a_copied[last])) != GDTE_OK) return st;
        if (j->timed) t1 = gdte_time_now();
        /* The slots are a_slot >= frag apart: one launch writes them densely only when equal. */
        if (G.a_slot == frag) {
            if ((st = x_exec(x, 0, r, off, glen, 1)) != GDTE_OK) return st;
        } else {
            for (int64_t i = 0; i < m; i++) {
                int64_t o = off + i * frag, len = nbytes - o < frag ? nbytes - o : frag;
                if ((st = x_exec(x, 0, r + i * G.a_slot, o, len, 1)) != GDTE_OK) return st;
            }
        }
        if (j->timed) t2 = gdte_time_now();
        if ((st = gdte_gpu_event_record(G.a_packed[slot], G.s_pack)) != GDTE_OK) return st;
        if ((st = gdte_gpu_stream_wait_event(G.s_copy, G.a_packed[slot])) != GDTE_OK) return st;
        if (j->timed) j->t_order += (t1 - t0) + (gdte_time_now() - t2), j->t_exec += t2 - t1;
        for (int64_t i = 0; i < m; i++, k++) {
            int64_t o = k * frag, len = nbytes - o < frag ? nbytes - o : frag;
            if (j->timed) t3 = gdte_time_now();
            if ((st = gdte_gpu_memcpy_async(dst + o, r + i * G.a_slot, (size_t)len, G.s_copy)) != GDTE_OK) return st;
            if (j->timed) t2 = gdte_time_now(), j->t_copy += t2 - t3;
            if ((st = gdte_gpu_event_record(G.a_copied[slot + i], G.s_copy)) != GDTE_OK) return st;
            if ((st = gdte_gpu_event_record(j->ev[k], G.s_copy)) != GDTE_OK) return st;
            if (j->timed) j->t_order += gdte_time_now() - t2;
            G.a_used[slot + i] = 1;
            G.a_next++;
            n_fragments++;
        }
        if ((st = gdte_gpu_event_record(G.a_last, G.s_copy)) != GDTE_OK) return st;
        G.a_queued = 1;
    }
    j->queued = 1;
    return GDTE_OK;
}

void gdte_xfer_job_times(const gdte_xfer_job_t *j, double t[3])
{
    t[0] = j->t_exec, t[1] = j->t_order, t[2] = j->t_copy;
}

gdte_status_t gdte_xfer_pack_to_host_start(const void *user, int64_t count, gdte_type_h type, int fake, void *dst,
                                           int64_t nbytes, int64_t frag, gdte_xfer_job_t **job_p)
{
    *job_p = NULL;
    if (frag <= 0 || nbytes <= 0) return GDTE_ERR_INVALID_ARG;
    gdte_xfer_job_t *j = job_get((nbytes + frag - 1) / frag, fake);
    if (!j) return GDTE_ERR_NO_MEMORY;
    xfer_t x = {.fake = fake, .user = (void *)user, .count = count, .type = type};
    gdte_status_t st;
    if (fake) {
        /* The fake device copies synchronously; gdte_xfer_job_landed then reports the fragments
         * one per query, as a GPU's trickle in, so CI runs the caller's handling of fragments
         * still on their way. */
        st = run_pipeline(&x, 0, dst, 1, nbytes, NULL);
    } else {
        pthread_mutex_lock(&xfer_lock);
        st = gpu_setup_locked();
        /* GDTETEST_FRAG_TIMES: the queueing timed (gdte_xfer_job_times). */
        j->timed = st == GDTE_OK && G.timed;
        if (st == GDTE_OK) st = job_queue_locked(&x, j, dst, nbytes, frag);
        if (st != GDTE_OK) {
            /* Part of it may be queued: drained before the ring and events go. */
            (void)gdte_gpu_stream_synchronize(G.s_pack);
            (void)gdte_gpu_stream_synchronize(G.s_copy);
        }
        pthread_mutex_unlock(&xfer_lock);
    }
    if (st != GDTE_OK) {
        gdte_xfer_job_end(j);
        return st;
    }
    gdte_type_retain(type);
    j->type = type;
    *job_p = j;
    return GDTE_OK;
}

gdte_status_t gdte_xfer_job_landed(gdte_xfer_job_t *j, int block, int64_t *landed_p)
{
    if (j->fake) {
        /* The first query finds nothing landed, each later one a fragment more. */
        if (block) j->landed = j->nfrag;
        else if (j->fake_queries++ && j->landed < j->nfrag) j->landed++;
    }
    while (!j->fake && j->landed < j->nfrag && j->st == GDTE_OK) {
        gdte_gpu_event_t e = j->ev[j->landed];
        gdte_status_t q = block ? gdte_gpu_event_synchronize(e) : gdte_gpu_event_query(e);
        if (q == GDTE_INPROGRESS) break;
        if (q != GDTE_OK) j->st = q;
        else j->landed++;
    }
    *landed_p = j->landed;
    return j->st;
}

void gdte_xfer_job_end(gdte_xfer_job_t *j)
{
    if (!j) return;
    /* The copies run in order on one stream: the last one done, all of the message is on the
     * host (after an error in queueing, the caller drained the streams). */
    if (!j->fake && j->queued) (void)gdte_gpu_event_synchronize(j->ev[j->nfrag - 1]);
    if (j->type) gdte_type_release(j->type);
    j->type = NULL;
    pthread_mutex_lock(&xfer_lock);
    int kept = job_nfree < XFER_JOBS_KEEP;
    if (kept) job_free[job_nfree++] = j;
    pthread_mutex_unlock(&xfer_lock);
    if (!kept) job_destroy(j);
}

/* Device staging (an MPI that moves device memory): one kernel between the user's layout and the
 * packed bytes in device memory, on the pack stream after the application's default-stream
 * work, waited for before the MPI (which knows nothing of our stream) reads or the application
 * sees the result. */
static gdte_status_t device_run(const void *user, int64_t count, gdte_type_h type, int fake, int unpack, void *packed,
                                int64_t nbytes)
{
    xfer_t x = {.fake = fake, .user = (void *)user, .count = count, .type = type};
    if (nbytes == 0) return GDTE_OK;
    if (fake) {
        n_fragments++;
        return x_exec(&x, unpack, packed, 0, nbytes, 0);
    }
    pthread_mutex_lock(&xfer_lock);
    gdte_status_t st = gpu_setup_locked();
    if (st == GDTE_OK) st = gdte_gpu_event_record(G.ev_app, NULL);
    if (st == GDTE_OK) st = gdte_gpu_stream_wait_event(G.s_pack, G.ev_app);
    if (st == GDTE_OK) st = x_exec(&x, unpack, packed, 0, nbytes, 1);
    gdte_status_t s2 = gdte_gpu_stream_synchronize(G.s_pack);
    pthread_mutex_unlock(&xfer_lock);
    if (st == GDTE_OK) st = s2;
    if (st == GDTE_OK) n_fragments++;
    gdte_trace("%s %lld bytes %s device staging", unpack ? "unpacked" : "packed", (long long)nbytes,
               unpack ? "from" : "into");
    return st;
}

gdte_status_t gdte_xfer_pack_stage(const void *user, int64_t count, gdte_type_h type, int fake,
                                   const gdte_stage_t *stage, int64_t nbytes)
{
    if (stage->kind == GDTE_STAGE_DEVICE) return device_run(user, count, type, fake, 0, stage->ptr, nbytes);
    return gdte_xfer_pack_to_host(user, count, type, fake, stage->ptr, stage->pinned, nbytes);
}

gdte_status_t gdte_xfer_unpack_stage(const gdte_stage_t *stage, int64_t posted, int64_t n, void *user, int64_t count,
                                     gdte_type_h type, int fake)
{
    void *src = gdte_stage_tail(stage, (size_t)posted);
    if (stage->kind == GDTE_STAGE_DEVICE) return device_run(user, count, type, fake, 1, src, n);
    return gdte_xfer_unpack_from_host(src, stage->pinned, n, user, count, type, fake);
}

int64_t gdte_xfer_fragments(void) { return n_fragments; }
int64_t gdte_xfer_zero_copies(void) { return n_zero_copies; }
int64_t gdte_xfer_copy_engine(void) { return n_copy_engine; }
