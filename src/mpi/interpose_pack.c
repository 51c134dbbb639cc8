/*
 * MPI_Pack / MPI_Unpack with a device buffer on either side (the interposer's pack calls).
 *
 * Between two device buffers the call is asynchronous: the kernel goes on a stream of the
 * interposer's own (one per device, made at first use), ordered after whatever the application
 * queued on the legacy default stream before the call, and the legacy default stream is made to
 * wait for it, so later kernels and copies there (and on blocking streams, which synchronise
 * with it) see the bytes. Nothing waits on the host: a halo that packs K boxes into one device
 * buffer and sends it pays one synchronisation, at the send (every other intercepted call
 * flushes first, gdte_ipo_pending_flush), not K.
 *
 * Synchronous inside the call, as before: a host buffer on either side (the CPU may read or
 * reuse it at once), managed memory (the same), buffers on another device than the current one.
 * The fake device (GDTE_FAKE_DEVICE) runs on the host, synchronously, but keeps the same
 * bookkeeping (pending flag, flush, counter) so CI exercises it.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "interpose.h"
#include "xfer.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "kernels/memquery.h"
#include "util/util.h"

_Atomic int gdte_ipo_pending_g;

/* ---- deferred work ------------------------------------------------------------------------
 * One stream per device. pk_lock covers the lazily made streams and events, the pending marks
 * and the launches (the events are reused, so record-then-wait pairs must not interleave), and
 * is held through a flush's synchronisation: the flag is cleared only once the work is done,
 * so a thread that finds it clear may rely on the bytes, and a launch cannot slip in between
 * the synchronisation and the clearing. */
#define PK_MAX_DEVICES 16

typedef struct pk_dev {
    int ready, failed;
    int pending;
    gdte_stream_t s;
    gdte_gpu_event_t ev_app;  /* the application's default-stream work, before ours */
    gdte_gpu_event_t ev_done; /* ours, before the application's later default-stream work */
} pk_dev_t;

static pthread_mutex_t pk_lock = PTHREAD_MUTEX_INITIALIZER;
static pk_dev_t pk_devs[PK_MAX_DEVICES];
static int pk_fake_pending;
/* Set while this thread is inside MPI_Pack/MPI_Unpack: the MPI calls gdte makes there itself
 * (importing a datatype frees the handles MPI_Type_get_contents returned, through the
 * MPI_Type_free shim) hand nothing of the application's to the MPI, so they do not flush. */
static _Thread_local int pk_inside;

static gdte_status_t dev_setup_locked(pk_dev_t *d)
{
    if (d->ready) return GDTE_OK;
    if (d->failed) return GDTE_ERR_GPU;
    gdte_status_t st = gdte_gpu_stream_create(&d->s);
    if (st == GDTE_OK && (st = gdte_gpu_event_create(&d->ev_app, 0)) != GDTE_OK) d->ev_app = NULL;
    if (st == GDTE_OK && (st = gdte_gpu_event_create(&d->ev_done, 0)) != GDTE_OK) d->ev_done = NULL;
    if (st != GDTE_OK) {
        /* Synchronous from now on for this device; said once. */
        gdte_warn("MPI_Pack/MPI_Unpack between device buffers stay synchronous: no stream of gdte's own (%s)",
                  gdte_status_string(st));
        d->failed = 1;
        return st;
    }
    d->ready = 1;
    return GDTE_OK;
}

void gdte_ipo_pending_flush_slow(void)
{
    if (pk_inside) return;
    pthread_mutex_lock(&pk_lock);
    if (atomic_load_explicit(&gdte_ipo_pending_g, memory_order_relaxed)) {
        int synced = 0;
        for (int i = 0; i < PK_MAX_DEVICES; i++) {
            pk_dev_t *d = &pk_devs[i];
            if (!d->pending) continue;
            gdte_status_t st = gdte_gpu_stream_synchronize(d->s);
            /* A kernel that failed after its launch: nothing to hand back to any caller now
             * (the call that queued it has returned), so it is logged. */
            if (st != GDTE_OK)
                gdte_error("a deferred MPI_Pack/MPI_Unpack on device %d failed: %s", i, gdte_status_string(st));
            d->pending = 0;
            synced = 1;
        }
        if (pk_fake_pending) {
            pk_fake_pending = 0;
            synced = 1;
        }
        if (synced) gdte_ipo_cnt_g.pack_syncs++;
        atomic_store_explicit(&gdte_ipo_pending_g, 0, memory_order_release);
    }
    pthread_mutex_unlock(&pk_lock);
}

/* Mark work as pending (caller holds pk_lock), after it is queued and before the call returns. */
static void mark_pending_locked(pk_dev_t *d)
{
    if (d) d->pending = 1;
    else pk_fake_pending = 1;
    atomic_store_explicit(&gdte_ipo_pending_g, 1, memory_order_release);
}

/* ---- executors ----------------------------------------------------------------------------- */
/* The packed bytes are gdte's stream, which equals MPI_Pack's on a homogeneous system, so a
 * buffer packed here unpacks with the MPI's own MPI_Unpack and the other way round. */

static gdte_status_t exec_direct(int unpack, void *user, int count, gdte_type_h t, void *packed, int64_t n, int host)
{
    gdte_pack_params_t p = {0};
    if (host) {
        p.field_mask = GDTE_PACK_FIELD_FLAGS;
        p.flags = GDTE_PACK_FLAG_HOST;
    }
    int64_t done = 0;
    gdte_status_t st = unpack ? gdte_unpack(packed, n, user, count, t, &p, &done)
                              : gdte_pack(user, count, t, packed, n, &p, &done);
    return st == GDTE_OK && done != n ? GDTE_ERR_INTERNAL : st;
}

/* One side is real device memory and the other host-addressable: bounce the packed stream
 * through pinned staging. */
static gdte_status_t exec_bounce(int unpack, void *user, int count, gdte_type_h t, void *packed, int64_t n,
                                 int user_on_device)
{
    if (user_on_device) {
        /* Pipelined kernels + copies straight between the device data and host bytes. */
        return unpack ? gdte_xfer_unpack_from_host(packed, 0, n, user, count, t, 0)
                      : gdte_xfer_pack_to_host(user, count, t, 0, packed, 0, n);
    }
    /* Host data, packed bytes on the device: host executor into staging, one copy. */
    gdte_stage_t *s;
    gdte_status_t st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)n, &s);
    if (st != GDTE_OK) return st;
    if (unpack) {
        st = gdte_gpu_memcpy(s->ptr, packed, (size_t)n);
        if (st == GDTE_OK) st = exec_direct(1, user, count, t, s->ptr, n, 1);
    } else {
        st = exec_direct(0, user, count, t, s->ptr, n, 1);
        if (st == GDTE_OK) st = gdte_gpu_memcpy(packed, s->ptr, (size_t)n);
    }
    gdte_stage_release(s);
    return st;
}

/* The device both spans lie on when both are plain device memory of the current device (the
 * stream is per device; managed memory may be read or written by the CPU without any runtime
 * call in between); -1 otherwise. */
static int async_device(const void *user, int count, gdte_type_h t, const void *packed, int64_t n)
{
    gdte_type_info_t ti;
    if (gdte_type_get_info(t, &ti) != GDTE_OK) return -1;
    /* The bytes the type touches: the first and last element's true extents (either may be the
     * lower one: the extent can be negative). */
    int64_t a = ti.true_lb, b = ti.true_lb + (int64_t)(count - 1) * ti.extent;
    int64_t lo = a < b ? a : b, hi = (a > b ? a : b) + ti.true_extent - 1;
    uintptr_t u = (uintptr_t)user; /* may be MPI_BOTTOM */
    gdte_mem_info_t m[4];
    if (gdte_mem_query_span((const void *)(u + (uintptr_t)lo), (const void *)(u + (uintptr_t)hi), &m[0], &m[1]) !=
            GDTE_OK ||
        gdte_mem_query_span(packed, (const char *)packed + n - 1, &m[2], &m[3]) != GDTE_OK)
        return -1;
    int dev = gdte_gpu_current_device();
    if (dev < 0 || dev >= PK_MAX_DEVICES) return -1;
    for (int i = 0; i < 4; i++)
        if (m[i].kind != GDTE_MEM_DEVICE || m[i].device != dev) return -1;
    return dev;
}

/* Queue the pack/unpack on device `dev`'s stream, between the two orderings with the legacy
 * default stream. GDTE_INPROGRESS: no stream to queue on; the caller runs it synchronously. */
static gdte_status_t exec_async(int unpack, void *user, int count, gdte_type_h t, void *packed, int64_t n, int dev)
{
    pthread_mutex_lock(&pk_lock);
    pk_dev_t *d = &pk_devs[dev];
    gdte_status_t st = dev_setup_locked(d);
    if (st != GDTE_OK) {
        pthread_mutex_unlock(&pk_lock);
        return GDTE_INPROGRESS;
    }
    /* After the application's default-stream work: the kernel that produced the data, or
     * consumes what this unpack overwrites. */
    if ((st = gdte_gpu_event_record(d->ev_app, NULL)) == GDTE_OK) st = gdte_gpu_stream_wait_event(d->s, d->ev_app);
    if (st == GDTE_OK) {
        gdte_pack_params_t p = {0};
        p.field_mask = GDTE_PACK_FIELD_STREAM | GDTE_PACK_FIELD_FLAGS;
        p.stream = d->s;
        p.flags = GDTE_PACK_FLAG_ASYNC;
        int64_t done = 0;
        st = unpack ? gdte_unpack(packed, n, user, count, t, &p, &done)
                    : gdte_pack(user, count, t, packed, n, &p, &done);
        if (st == GDTE_OK && done != n) st = GDTE_ERR_INTERNAL;
    }
    /* Before the application's later default-stream work, also after a failed launch: whatever
     * was queued must not race it. */
    gdte_status_t s2 = gdte_gpu_event_record(d->ev_done, d->s);
    if (s2 == GDTE_OK) s2 = gdte_gpu_stream_wait_event(NULL, d->ev_done);
    if (st == GDTE_OK) st = s2;
    mark_pending_locked(d);
    pthread_mutex_unlock(&pk_lock);
    return st;
}

/* ---- the calls ----------------------------------------------------------------------------- */
/* `position` advances by the packed size; a buffer too small is MPI_ERR_TRUNCATE with nothing
 * written, as the MPI does. */
static int pack_common(int unpack, void *user, int count, MPI_Datatype dt, void *pbuf, int psize, int *position,
                       MPI_Comm comm, gdte_ipo_kind_t uk, gdte_ipo_kind_t pk)
{
    const char *fn = unpack ? "MPI_Unpack" : "MPI_Pack";
    gdte_type_h t;
    int64_t n;
    pk_inside = 1;
    gdte_status_t st = gdte_ipo_type(dt, count, &t, &n);
    pk_inside = 0;
    if (st != GDTE_OK) return gdte_ipo_fail(comm, fn, st);
    if (!position || *position < 0 || (int64_t)*position + n > (int64_t)psize) {
        /* Not gdte's failure: the MPI's own error, through the same handler. */
        PMPI_Comm_call_errhandler(comm, MPI_ERR_TRUNCATE);
        return MPI_ERR_TRUNCATE;
    }
    char *p = (char *)pbuf + *position;
    const char *how = "synchronous";
    if (n > 0) {
        int dev = -1;
        if (uk == GDTE_IPO_FAKE && pk == GDTE_IPO_FAKE) {
            /* Host memory standing in for a device: done now, deferred in the bookkeeping only. */
            st = exec_direct(unpack, user, count, t, p, n, 1);
            pthread_mutex_lock(&pk_lock);
            mark_pending_locked(NULL);
            pthread_mutex_unlock(&pk_lock);
            how = "deferred (fake device)";
        } else if (uk == GDTE_IPO_DEVICE && pk == GDTE_IPO_DEVICE && (dev = async_device(user, count, t, p, n)) >= 0 &&
                   (st = exec_async(unpack, user, count, t, p, n, dev)) != GDTE_INPROGRESS) {
            how = "deferred";
        } else {
            /* Done inside the call: earlier deferred work first (this call may read what it
             * wrote), then this call's own wait. */
            gdte_ipo_pending_flush();
            if (uk == GDTE_IPO_DEVICE && pk == GDTE_IPO_DEVICE)
                st = exec_direct(unpack, user, count, t, p, n, 0);
            else if (uk != GDTE_IPO_DEVICE && pk != GDTE_IPO_DEVICE)
                st = exec_direct(unpack, user, count, t, p, n, 1);
            else
                st = exec_bounce(unpack, user, count, t, p, n, uk == GDTE_IPO_DEVICE);
            gdte_ipo_cnt_g.pack_syncs++;
        }
        if (st != GDTE_OK) return gdte_ipo_fail(comm, fn, st);
    }
    *position += (int)n;
    gdte_debug("%s: %lld bytes at position %d, %s buffer %s, packed buffer %s, %s", fn, (long long)n,
               *position - (int)n, unpack ? "output" : "input", uk == GDTE_IPO_DEVICE ? "device" : "host",
               pk == GDTE_IPO_DEVICE ? "device" : "host", how);
    if (unpack) {
        gdte_ipo_cnt_g.unpacks++;
        gdte_ipo_cnt_g.bytes_unpacked += n;
    } else {
        gdte_ipo_cnt_g.packs++;
        gdte_ipo_cnt_g.bytes_packed += n;
    }
    return MPI_SUCCESS;
}

int gdte_ipo_pack(const void *inbuf, int incount, MPI_Datatype dt, void *outbuf, int outsize, int *position,
                  MPI_Comm comm)
{
    gdte_ipo_kind_t uk = gdte_ipo_buf_kind(inbuf, incount, dt);
    gdte_ipo_kind_t pk = incount && outbuf && position ? gdte_ipo_buf_kind((char *)outbuf + *position, 1, MPI_BYTE)
                                                       : GDTE_IPO_HOST;
    if (uk == GDTE_IPO_HOST && pk == GDTE_IPO_HOST)
        return IPO_NEXT(Pack)(inbuf, incount, dt, outbuf, outsize, position, comm);
    if (uk == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, "MPI_Pack", dt, incount);
    return pack_common(0, (void *)inbuf, incount, dt, outbuf, outsize, position, comm, uk, pk);
}

int gdte_ipo_unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype dt,
                    MPI_Comm comm)
{
    gdte_ipo_kind_t uk = gdte_ipo_buf_kind(outbuf, outcount, dt);
    gdte_ipo_kind_t pk = outcount && inbuf && position
                             ? gdte_ipo_buf_kind((const char *)inbuf + *position, 1, MPI_BYTE)
                             : GDTE_IPO_HOST;
    if (uk == GDTE_IPO_HOST && pk == GDTE_IPO_HOST)
        return IPO_NEXT(Unpack)(inbuf, insize, position, outbuf, outcount, dt, comm);
    if (uk == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, "MPI_Unpack", dt, outcount);
    return pack_common(1, outbuf, outcount, dt, (void *)inbuf, insize, position, comm, uk, pk);
}

/* ---- MPI_Pack_external / MPI_Unpack_external ------------------------------------------------
 * The external32 representation is the MPI's to produce (byte order, sizes of the predefined
 * types): gdte hands the MPI host memory laid out as the application's buffer and lets it
 * convert. The typed side is mirrored: its touched bytes packed by gdte into host staging and
 * unpacked by the host executor into a fresh anonymous mapping of the type's span, placed so
 * that the user's lowest touched byte is the mapping's first (pages never touched cost nothing,
 * so a span of MPI_BOTTOM addresses far apart costs address space only); after an unpack the
 * touched bytes go back the same way, so bytes between them are never written. The byte side
 * (the external32 stream) is bounced through host staging; the MPI sees it at the application's
 * `position` by integer arithmetic on the staging's address. Synchronous: the MPI reads and
 * writes inside the call. Under a GPU-aware MPI too: whether its external32 conversion reads
 * device memory is not something gdte can ask. */

static const gdte_pack_params_t mirror_host_params = {.field_mask = GDTE_PACK_FIELD_FLAGS,
                                                      .flags = GDTE_PACK_FLAG_HOST};

void gdte_ipo_mirror_free(gdte_ipo_mirror_t *m)
{
    if (m->map) munmap(m->map, m->len);
    if (m->packed) gdte_stage_release(m->packed);
    if (m->t) gdte_type_release(m->t);
    memset(m, 0, sizeof *m);
}

gdte_status_t gdte_ipo_mirror_make(gdte_ipo_mirror_t *m, const void *user, int count, MPI_Datatype dt,
                                   gdte_ipo_kind_t kind, int copy_in)
{
    memset(m, 0, sizeof *m);
    m->user = (void *)user;
    m->count = count;
    m->fake = kind == GDTE_IPO_FAKE;
    gdte_type_info_t ti;
    gdte_type_h t;
    pk_inside = 1;
    gdte_status_t st = gdte_ipo_type(dt, count, &t, &m->n);
    pk_inside = 0;
    if (st != GDTE_OK) return st;
    gdte_type_retain(t); /* the MPI datatype may be freed while a nonblocking call holds the mirror */
    m->t = t;
    if ((st = gdte_type_get_info(t, &ti)) != GDTE_OK) return st;
    int64_t step = (int64_t)(count > 0 ? count - 1 : 0) * ti.extent;
    int64_t lo = ti.true_lb + (step < 0 ? step : 0), hi = ti.true_lb + ti.true_extent + (step > 0 ? step : 0);
    m->len = (size_t)(hi - lo > 0 ? hi - lo : 1);
    void *map = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return GDTE_ERR_NO_MEMORY;
    m->map = map;
    m->base = (void *)((uintptr_t)map - (uintptr_t)lo);
    if ((st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)(m->n > 0 ? m->n : 1), &m->packed)) != GDTE_OK) return st;
    if (!copy_in || m->n == 0) return GDTE_OK;
    gdte_ipo_pending_flush(); /* earlier deferred packs may have produced these bytes */
    st = gdte_xfer_pack_to_host(user, count, t, m->fake, m->packed->ptr, m->packed->pinned, m->n);
    if (st == GDTE_OK) st = gdte_unpack(m->packed->ptr, m->n, m->base, count, t, &mirror_host_params, NULL);
    return st;
}

gdte_status_t gdte_ipo_mirror_out(gdte_ipo_mirror_t *m, int64_t nbytes)
{
    if (nbytes < 0 || nbytes > m->n) nbytes = m->n;
    if (nbytes == 0) return GDTE_OK;
    gdte_status_t st = gdte_pack(m->base, m->count, m->t, m->packed->ptr, m->n, &mirror_host_params, NULL);
    if (st == GDTE_OK)
        st = gdte_xfer_unpack_from_host(m->packed->ptr, m->packed->pinned, nbytes, m->user, m->count, m->t, m->fake);
    return st;
}

/* Plain bytes between device (or fake device) memory and host memory. */
gdte_status_t gdte_ipo_bytes(void *dst, const void *src, size_t n, int fake)
{
    if (n == 0) return GDTE_OK;
    if (fake) {
        memcpy(dst, src, n);
        return GDTE_OK;
    }
    return gdte_gpu_memcpy(dst, src, n);
}

int gdte_ipo_pack_external(const char *datarep, const void *inbuf, int incount, MPI_Datatype dt, void *outbuf,
                           MPI_Aint outsize, MPI_Aint *position)
{
    gdte_ipo_kind_t uk = incount > 0 ? gdte_ipo_buf_kind(inbuf, incount, dt) : GDTE_IPO_HOST;
    gdte_ipo_kind_t pk = incount > 0 && outbuf && position && *position >= 0 && *position < outsize
                             ? gdte_ipo_buf_kind((char *)outbuf + *position, 1, MPI_BYTE)
                             : GDTE_IPO_HOST;
    if (uk == GDTE_IPO_HOST && pk == GDTE_IPO_HOST)
        return IPO_NEXT(Pack_external)(datarep, inbuf, incount, dt, outbuf, outsize, position);
    if (uk == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(MPI_COMM_WORLD, "MPI_Pack_external", dt, incount);
    gdte_ipo_pending_flush(); /* earlier deferred packs may have produced these bytes */
    MPI_Aint need = 0;
    int rc = PMPI_Pack_external_size(datarep, incount, dt, &need);
    if (rc != MPI_SUCCESS) return rc; /* the MPI's own error, through its handler */
    gdte_ipo_mirror_t m = {0};
    gdte_stage_t *out = NULL;
    const void *in_arg = inbuf;
    void *out_arg = outbuf;
    gdte_status_t st = GDTE_OK;
    if (uk != GDTE_IPO_HOST) {
        st = gdte_ipo_mirror_make(&m, inbuf, incount, dt, uk, 1);
        in_arg = m.base;
    }
    MPI_Aint pos0 = *position;
    if (st == GDTE_OK && pk != GDTE_IPO_HOST) {
        /* The MPI writes at most min(need, outsize - pos0) bytes from out_arg + pos0. */
        st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)(need > 0 ? need : 1), &out);
        if (st == GDTE_OK) out_arg = (void *)((uintptr_t)out->ptr - (uintptr_t)pos0);
    }
    if (st != GDTE_OK) {
        gdte_ipo_mirror_free(&m);
        if (out) gdte_stage_release(out);
        return gdte_ipo_fail(MPI_COMM_WORLD, "MPI_Pack_external", st);
    }
    rc = IPO_NEXT(Pack_external)(datarep, in_arg, incount, dt, out_arg, outsize, position);
    if (rc == MPI_SUCCESS && out && *position > pos0)
        st = gdte_ipo_bytes((char *)outbuf + pos0, out->ptr, (size_t)(*position - pos0), pk == GDTE_IPO_FAKE);
    gdte_ipo_mirror_free(&m);
    if (out) gdte_stage_release(out);
    if (st != GDTE_OK) return gdte_ipo_fail(MPI_COMM_WORLD, "MPI_Pack_external", st);
    if (rc == MPI_SUCCESS) gdte_ipo_cnt_g.packs_external++;
    return rc;
}

int gdte_ipo_unpack_external(const char *datarep, const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf,
                             int outcount, MPI_Datatype dt)
{
    gdte_ipo_kind_t uk = outcount > 0 ? gdte_ipo_buf_kind(outbuf, outcount, dt) : GDTE_IPO_HOST;
    gdte_ipo_kind_t pk = outcount > 0 && inbuf && position && *position >= 0 && *position < insize
                             ? gdte_ipo_buf_kind((const char *)inbuf + *position, 1, MPI_BYTE)
                             : GDTE_IPO_HOST;
    if (uk == GDTE_IPO_HOST && pk == GDTE_IPO_HOST)
        return IPO_NEXT(Unpack_external)(datarep, inbuf, insize, position, outbuf, outcount, dt);
    if (uk == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(MPI_COMM_WORLD, "MPI_Unpack_external", dt, outcount);
    gdte_ipo_pending_flush();
    MPI_Aint need = 0;
    int rc = PMPI_Pack_external_size(datarep, outcount, dt, &need);
    if (rc != MPI_SUCCESS) return rc;
    gdte_ipo_mirror_t m = {0};
    gdte_stage_t *in = NULL;
    const void *in_arg = inbuf;
    void *out_arg = outbuf;
    gdte_status_t st = GDTE_OK;
    MPI_Aint pos0 = *position;
    if (pk != GDTE_IPO_HOST) {
        /* The MPI reads at most min(need, insize - pos0) bytes from in_arg + pos0. */
        size_t avail = (size_t)(insize - pos0 < need ? insize - pos0 : need);
        st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, avail > 0 ? avail : 1, &in);
        if (st == GDTE_OK) st = gdte_ipo_bytes(in->ptr, (const char *)inbuf + pos0, avail, pk == GDTE_IPO_FAKE);
        if (in) in_arg = (const void *)((uintptr_t)in->ptr - (uintptr_t)pos0);
    }
    if (st == GDTE_OK && uk != GDTE_IPO_HOST) {
        st = gdte_ipo_mirror_make(&m, outbuf, outcount, dt, uk, 0);
        out_arg = m.base;
    }
    if (st == GDTE_OK) {
        rc = IPO_NEXT(Unpack_external)(datarep, in_arg, insize, position, out_arg, outcount, dt);
        if (rc == MPI_SUCCESS && uk != GDTE_IPO_HOST) st = gdte_ipo_mirror_out(&m, -1);
    }
    gdte_ipo_mirror_free(&m);
    if (in) gdte_stage_release(in);
    if (st != GDTE_OK) return gdte_ipo_fail(MPI_COMM_WORLD, "MPI_Unpack_external", st);
    if (rc == MPI_SUCCESS) gdte_ipo_cnt_g.unpacks_external++;
    return rc;
}

/* ---- MPI_Buffer_attach / MPI_Buffer_detach ----------------------------------------------------
 * The attached buffer is the MPI's alone until it is detached: the MPI copies buffered messages
 * into it with the CPU, and the application may not touch it meanwhile. So device memory is
 * replaced by host memory of the same size (the MPI's accounting of what fits, and its
 * MPI_ERR_BUFFER when a message does not, stay exactly the application's), and detaching hands
 * back the application's address and size. One buffer is attached at a time (MPI's rule). */
static pthread_mutex_t bat_lock = PTHREAD_MUTEX_INITIALIZER;
static void *bat_user, *bat_shadow;

int gdte_ipo_buffer_attach(void *buffer, int size)
{
    gdte_ipo_kind_t k = size > 0 ? gdte_ipo_buf_kind(buffer, size, MPI_BYTE) : GDTE_IPO_HOST;
    if (k == GDTE_IPO_HOST) return IPO_NEXT(Buffer_attach)(buffer, size);
    if (k == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(MPI_COMM_WORLD, "MPI_Buffer_attach", MPI_BYTE, size);
    void *shadow = malloc((size_t)size);
    if (!shadow) return gdte_ipo_fail(MPI_COMM_WORLD, "MPI_Buffer_attach", GDTE_ERR_NO_MEMORY);
    pthread_mutex_lock(&bat_lock);
    int rc = IPO_NEXT(Buffer_attach)(shadow, size); /* (MPI_ERR_BUFFER where one is attached already) */
    if (rc == MPI_SUCCESS) {
        /* An earlier shadow the MPI took back without gdte seeing it (a detach through a binding
         * that bypasses the shim): the MPI is done with it. */
        free(bat_shadow);
        bat_user = buffer;
        bat_shadow = shadow;
        gdte_ipo_cnt_g.buffers_shadowed++;
        gdte_debug("MPI_Buffer_attach: %d bytes of device memory at %p; the MPI gets host memory instead", size, buffer);
    }
    pthread_mutex_unlock(&bat_lock);
    if (rc != MPI_SUCCESS) free(shadow);
    return rc;
}

int gdte_ipo_buffer_detach(void *buffer_addr, int *size)
{
    pthread_mutex_lock(&bat_lock);
    int rc = IPO_NEXT(Buffer_detach)(buffer_addr, size);
    if (rc == MPI_SUCCESS && buffer_addr && bat_shadow && *(void **)buffer_addr == bat_shadow) {
        *(void **)buffer_addr = bat_user;
        free(bat_shadow);
        bat_shadow = bat_user = NULL;
    }
    pthread_mutex_unlock(&bat_lock);
    return rc;
}

/* After the MPI finalised: a buffer still attached is the MPI's no more. */
void gdte_ipo_buffer_finalize(void)
{
    pthread_mutex_lock(&bat_lock);
    free(bat_shadow);
    bat_shadow = bat_user = NULL;
    pthread_mutex_unlock(&bat_lock);
}
