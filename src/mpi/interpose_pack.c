/*
 * MPI_Pack / MPI_Unpack with a device buffer on either side (the interposer's pack calls).
 */
#include <string.h>
#include "interpose.h"
#include "xfer.h"
#include "gpu/gpu.h"
#include "util/util.h"

_Atomic int gdte_ipo_pending_g;

/* Nothing is deferred yet: every pack and unpack completes inside its call. */
void gdte_ipo_pending_flush_slow(void) { atomic_store_explicit(&gdte_ipo_pending_g, 0, memory_order_release); }

/* MPI_Pack / MPI_Unpack with a device buffer on either side. The packed bytes are gdte's
 * stream, which equals MPI_Pack's on a homogeneous system, so a buffer packed here unpacks
 * with the MPI's own MPI_Unpack and the other way round. `position` advances by the packed
 * size; a buffer too small is MPI_ERR_TRUNCATE with nothing written, as the MPI does. */

static int host_side(gdte_ipo_kind_t k) { return k != GDTE_IPO_DEVICE; }

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

static int pack_common(int unpack, void *user, int count, MPI_Datatype dt, void *pbuf, int psize, int *position,
                       MPI_Comm comm, gdte_ipo_kind_t uk, gdte_ipo_kind_t pk)
{
    const char *fn = unpack ? "MPI_Unpack" : "MPI_Pack";
    gdte_type_h t;
    int64_t n;
    gdte_status_t st = gdte_ipo_type(dt, count, &t, &n);
    if (st != GDTE_OK) return gdte_ipo_fail(comm, fn, st);
    if (!position || *position < 0 || (int64_t)*position + n > (int64_t)psize) {
        /* Not gdte's failure: the MPI's own error, through the same handler. */
        PMPI_Comm_call_errhandler(comm, MPI_ERR_TRUNCATE);
        return MPI_ERR_TRUNCATE;
    }
    char *p = (char *)pbuf + *position;
    if (n > 0) {
        if (host_side(uk) && host_side(pk))
            st = exec_direct(unpack, user, count, t, p, n, 1);
        else if (!host_side(uk) && !host_side(pk))
            st = exec_direct(unpack, user, count, t, p, n, 0);
        else
            st = exec_bounce(unpack, user, count, t, p, n, !host_side(uk));
        if (st != GDTE_OK) return gdte_ipo_fail(comm, fn, st);
    }
    *position += (int)n;
    gdte_debug("%s: %lld bytes at position %d, %s buffer %s, packed buffer %s", fn, (long long)n, *position - (int)n,
               unpack ? "output" : "input", host_side(uk) ? "host" : "device", host_side(pk) ? "host" : "device");
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
