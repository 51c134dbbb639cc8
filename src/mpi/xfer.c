/* Fragmented device <-> host movement of packed streams (see xfer.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "xfer.h"
#include "staging.h"
#include "gpu/gpu.h"
#include "util/util.h"

#define XFER_MAX_DEPTH 64
/* Below this a single kernel into mapped memory beats a kernel + copy launch pair. */
#define XFER_ZERO_COPY_AUTO_MAX (64 * 1024)
/* Messages up to this size are moved as one fragment: splitting them costs more in launch
 * latency than the overlap wins. */
#define XFER_ONE_FRAG_MAX (512 * 1024)

enum { ZC_AUTO = 0, ZC_ON = 1, ZC_OFF = 2 }; /* order of GDTE_ZERO_COPY's accepted list */

typedef struct xfer_gpu {
    int ready;
    gdte_stream_t s_pack, s_copy;
    gdte_gpu_event_t ev_a[XFER_MAX_DEPTH], ev_b[XFER_MAX_DEPTH];
    gdte_gpu_event_t ev_app; /* the application's default-stream work, before our streams */
} xfer_gpu_t;

static pthread_mutex_t xfer_lock = PTHREAD_MUTEX_INITIALIZER;
static xfer_gpu_t G;
static _Atomic int64_t n_fragments, n_zero_copies;

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
    for (int i = 0; i < XFER_MAX_DEPTH; i++) {
        if ((st = gdte_gpu_event_create(&G.ev_a[i], 0)) != GDTE_OK) return st;
        if ((st = gdte_gpu_event_create(&G.ev_b[i], 0)) != GDTE_OK) return st;
    }
    G.ready = 1;
    return GDTE_OK;
}

void gdte_xfer_finalize(void)
{
    pthread_mutex_lock(&xfer_lock);
    if (G.ready) {
        for (int i = 0; i < XFER_MAX_DEPTH; i++) {
            gdte_gpu_event_destroy(G.ev_a[i]);
            gdte_gpu_event_destroy(G.ev_b[i]);
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
    /* About eight fragments per message, 256 KiB to 4 MiB each (DESIGN.md: 1-4 MiB typical;
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

static gdte_status_t run_pipeline(const xfer_t *x, int unpack, void *host, int host_pinned, int64_t nbytes)
{
    gdte_status_t st = GDTE_OK;
    if (nbytes == 0) return GDTE_OK;
    /* Our streams do not synchronise with the legacy default stream: make the pack stream wait
     * for whatever the application queued there before calling MPI (a kernel that produced the
     * send data), as a blocking stream would. */
    if (!x->fake && ((st = gdte_gpu_event_record(G.ev_app, NULL)) != GDTE_OK ||
                     (st = gdte_gpu_stream_wait_event(G.s_pack, G.ev_app)) != GDTE_OK))
        return st;

    if (use_zero_copy(nbytes, host_pinned, x->fake)) {
        void *packed = host;
        if (!x->fake && (st = gdte_gpu_host_device_pointer(host, &packed)) != GDTE_OK) return st;
        if ((st = x_exec(x, unpack, packed, 0, nbytes, 0)) != GDTE_OK) return st;
        n_fragments++;
        n_zero_copies++;
        return GDTE_OK;
    }

    int64_t frag = gdte_xfer_frag_size(nbytes);
    int64_t nfrag = (nbytes + frag - 1) / frag;
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
            if (k >= depth && (st = x_wait(x, G.ev_b[slot], 0)) != GDTE_OK) break;
            if ((st = x_exec(x, 0, r, off, len, 1)) != GDTE_OK) break;
            if ((st = x_signal(x, G.ev_a[slot], 0)) != GDTE_OK) break;
            if ((st = x_wait(x, G.ev_a[slot], 1)) != GDTE_OK) break;
            if ((st = x_copy(x, hb + off, r, len)) != GDTE_OK) break;
            st = x_signal(x, G.ev_b[slot], 1);
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
                              int host_pinned, int64_t nbytes)
{
    xfer_t x = {.fake = fake, .user = (void *)user, .count = count, .type = type};
    gdte_status_t st;
    if (fake) return run_pipeline(&x, unpack, host, host_pinned, nbytes);
    pthread_mutex_lock(&xfer_lock);
    st = gpu_setup_locked();
    if (st == GDTE_OK) st = run_pipeline(&x, unpack, host, host_pinned, nbytes);
    pthread_mutex_unlock(&xfer_lock);
    return st;
}

gdte_status_t gdte_xfer_pack_to_host(const void *user, int64_t count, gdte_type_h type, int fake, void *dst,
                                     int dst_pinned, int64_t nbytes)
{
    return xfer_run(user, count, type, fake, 0, dst, dst_pinned, nbytes);
}

gdte_status_t gdte_xfer_unpack_from_host(const void *src, int src_pinned, int64_t nbytes, void *user, int64_t count,
                                         gdte_type_h type, int fake)
{
    return xfer_run(user, count, type, fake, 1, (void *)src, src_pinned, nbytes);
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
