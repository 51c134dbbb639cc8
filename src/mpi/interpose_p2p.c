/*
 * Point-to-point on device buffers, the copy-in/copy-out way under an MPI that cannot touch
 * device memory.
 *
 * A device send packs its data (gdte kernels, fragment by fragment, see xfer.h) into pinned
 * host staging and hands the MPI `nbytes` of MPI_PACKED on the application's own (comm, dest,
 * tag). MPI_PACKED matches any receive type and, on a homogeneous system, the packed stream is
 * byte for byte what a typed receive expects, so matching, ordering, wildcards, probes, counts
 * and truncation stay the MPI's own, and a receiver that gdte does not intercept (a host
 * buffer, another process without gdte) receives correctly. The pack completes inside the
 * call, before the MPI sees the message: a later send on the same (comm, dest, tag) can never
 * overtake it.
 *
 * A device receive posts `nbytes` of MPI_PACKED into staging, and on completion unpacks what
 * arrived into the device buffer (interpose_req.c) and restates the status in the user's
 * datatype. A longer message is truncated by the MPI into the staging buffer, so nothing past
 * the user's data is ever written.
 *
 * Zero-size messages and MPI_PROC_NULL go to the MPI untouched: it never reads or writes the
 * buffer for them.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "interpose.h"
#include "import.h"
#include "xfer.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "util/util.h"

static int next_send(gdte_ipo_mode_t m, const void *b, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm c)
{
    switch (m) {
    case GDTE_IPO_SYNC: return IPO_NEXT(Ssend)(b, n, dt, dest, tag, c);
    case GDTE_IPO_BUFFERED: return IPO_NEXT(Bsend)(b, n, dt, dest, tag, c);
    case GDTE_IPO_READY: return IPO_NEXT(Rsend)(b, n, dt, dest, tag, c);
    default: return IPO_NEXT(Send)(b, n, dt, dest, tag, c);
    }
}

static int next_isend(gdte_ipo_mode_t m, const void *b, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm c,
                      MPI_Request *r)
{
    switch (m) {
    case GDTE_IPO_SYNC: return IPO_NEXT(Issend)(b, n, dt, dest, tag, c, r);
    case GDTE_IPO_BUFFERED: return IPO_NEXT(Ibsend)(b, n, dt, dest, tag, c, r);
    case GDTE_IPO_READY: return IPO_NEXT(Irsend)(b, n, dt, dest, tag, c, r);
    default: return IPO_NEXT(Isend)(b, n, dt, dest, tag, c, r);
    }
}

static int next_send_init(gdte_ipo_mode_t m, const void *b, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm c,
                          MPI_Request *r)
{
    switch (m) {
    case GDTE_IPO_SYNC: return IPO_NEXT(Ssend_init)(b, n, dt, dest, tag, c, r);
    case GDTE_IPO_BUFFERED: return IPO_NEXT(Bsend_init)(b, n, dt, dest, tag, c, r);
    case GDTE_IPO_READY: return IPO_NEXT(Rsend_init)(b, n, dt, dest, tag, c, r);
    default: return IPO_NEXT(Send_init)(b, n, dt, dest, tag, c, r);
    }
}

/* The gdte view of a device message: its type and packed size. *nbytes_p == 0 means the MPI
 * can take the message as it is. */
typedef struct msg {
    gdte_type_h type;
    int64_t nbytes;
    int64_t post;  /* receives: bytes posted to the MPI (more than nbytes when a marker may come) */
    gdte_stage_t *stage;
} msg_t;

/* Receives are posted at the end of their staging, before its guard page (staging.h). */
#define RECV_AT(m) gdte_stage_tail((m).stage, (size_t)(m).post)

/* Bytes a receive from `source` must be posted for: a marker's at least when one may match. */
static int64_t min_post(MPI_Comm comm, int source)
{
    return gdte_ipo_node_on() && gdte_ipo_node_may_mark(comm, source) ? GDTE_IPO_MARK_BYTES : 0;
}

/* A message the MPI can take as it is: a type whose `count` elements are one dense block. */
static int dense_type(gdte_type_h t)
{
    gdte_type_info_t info;
    return gdte_type_get_info(t, &info) == GDTE_OK && info.is_contiguous;
}

#define LAZY_LANDING_MIN (64 << 10)
#define HOST_EAGER_MAX 4096 /* below every MPI's eager limit for host memory */

static int msg_prepare_post(const char *fn, MPI_Comm comm, MPI_Datatype dt, int count, gdte_ipo_kind_t kind,
                            int64_t minpost, int remote, msg_t *m)
{
    memset(m, 0, sizeof *m);
    gdte_status_t st = gdte_ipo_type(dt, count, &m->type, &m->nbytes);
    if (st != GDTE_OK) return gdte_ipo_fail(comm, fn, st);
    m->post = m->nbytes > minpost ? m->nbytes : minpost;
    if (m->nbytes == 0) return MPI_SUCCESS;
    /* Over an MPI that moves device memory, a small dense or single-stride message still goes
     * through pinned host staging when the copy engines can move it alone (xfer.c: no kernel,
     * no device-to-device copy, which cost a context switch on a shared GPU); past that the
     * packed bytes stay on the device, and a dense message goes to the MPI as it is. Not a
     * receive that may match a marker (the node path runs over a GPU-aware MPI too): the marker
     * must land where the host reads it, so such a receive is posted as over any MPI. */
    const int ga = gdte_ipo_gpu_aware() && minpost == 0;
    /* Small messages go through host memory too whatever their layout: a GPU-aware MPI sends
     * device memory by rendezvous, so an MPI_Send of a few hundred bytes would wait for its
     * receive where every MPI completes it eagerly from host memory (H100, CUDA-aware Open MPI
     * 4.1 with smcuda: a sender that then entered MPI_Barrier before its receiver posted hung). */
    int host_ce = ga && kind == GDTE_IPO_DEVICE &&
                  (m->nbytes <= HOST_EAGER_MAX || gdte_xfer_copy_engine_fits(m->type, count, m->nbytes));
    if (ga && !host_ce && dense_type(m->type)) {
        gdte_debug("%s: %d element(s), %lld contiguous bytes of device data, handed to the MPI as they are", fn, count,
                   (long long)m->nbytes);
        m->nbytes = 0;
        gdte_ipo_cnt_g.direct++;
        return MPI_SUCCESS;
    }
    /* Over an MPI that moves device memory the packed bytes stay on the device. */
    gdte_stage_kind_t sk = ga && !host_ce ? GDTE_STAGE_DEVICE : GDTE_STAGE_HOST;
    int fake = kind == GDTE_IPO_FAKE;
    if (minpost > 0 && !remote && sk == GDTE_STAGE_HOST && kind == GDTE_IPO_DEVICE && m->post >= LAZY_LANDING_MIN) {
        /* A receive that may match a marker (from a framing peer, or any source) most likely
         * gets one: its landing is pageable memory, whose pages cost nothing until written
         * (a marker touches one), instead of pinning the message's size for every posted
         * receive (a window of 64 large receives would pin and unpin gigabytes). Data that
         * does come as MPI_PACKED is unpacked from it, more slowly. */
        sk = GDTE_STAGE_PAGEABLE;
    }
    /* (`remote`: a receive from one process of another node, whose large device messages come
     * in fragments: they land in this pinned staging itself, and are unpacked from it.) */
    st = gdte_stage_acquire(sk, fake, (size_t)m->post, &m->stage);
    if (st != GDTE_OK) return gdte_ipo_fail(comm, fn, st);
    gdte_debug("%s: %d element(s), %lld packed bytes of device data, staged through %s memory as MPI_PACKED", fn, count,
               (long long)m->nbytes,
               sk == GDTE_STAGE_DEVICE    ? "device"
               : sk == GDTE_STAGE_PAGEABLE ? "pageable host (a landing for a marker)"
               : m->stage->pinned         ? "pinned host"
                                          : "pageable host");
    return MPI_SUCCESS;
}

static int msg_prepare(const char *fn, MPI_Comm comm, MPI_Datatype dt, int count, gdte_ipo_kind_t kind, msg_t *m)
{
    return msg_prepare_post(fn, comm, dt, count, kind, 0, 0, m);
}

/* Prepare and pack a device send into staging. */
static int msg_pack(const char *fn, MPI_Comm comm, const void *buf, int count, MPI_Datatype dt, gdte_ipo_kind_t kind,
                    msg_t *m)
{
    int rc = msg_prepare(fn, comm, dt, count, kind, m);
    if (rc != MPI_SUCCESS || m->nbytes == 0) return rc;
    gdte_status_t st = gdte_xfer_pack_stage(buf, count, m->type, kind == GDTE_IPO_FAKE, m->stage, m->nbytes);
    if (st != GDTE_OK) {
        gdte_stage_release(m->stage);
        m->stage = NULL;
        return gdte_ipo_fail(comm, fn, st);
    }
    gdte_ipo_cnt_g.sends++;
    gdte_ipo_cnt_g.bytes_packed += m->nbytes;
    return MPI_SUCCESS;
}

static const char *send_name(gdte_ipo_mode_t m, int nonblocking)
{
    static const char *names[2][4] = {{"MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend"},
                                      {"MPI_Isend", "MPI_Issend", "MPI_Ibsend", "MPI_Irsend"}};
    return names[nonblocking][m];
}

int gdte_ipo_send(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                  MPI_Comm comm)
{
    gdte_ipo_kind_t kind = dest == MPI_PROC_NULL ? GDTE_IPO_HOST : gdte_ipo_buf_kind(buf, count, dt);
    int rc;
    if (kind == GDTE_IPO_HOST) {
        if (gdte_ipo_node_on() && gdte_ipo_node_send_host(mode, buf, count, dt, dest, tag, comm, NULL, &rc)) return rc;
        return next_send(mode, buf, count, dt, dest, tag, comm);
    }
    if (kind == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, send_name(mode, 0), dt, count);
    if (gdte_ipo_node_on() && gdte_ipo_node_send_device(mode, buf, count, dt, kind, dest, tag, comm, NULL, &rc))
        return rc;
    msg_t m;
    rc = msg_pack(send_name(mode, 0), comm, buf, count, dt, kind, &m);
    if (rc != MPI_SUCCESS) return rc;
    if (m.nbytes == 0) return next_send(mode, buf, count, dt, dest, tag, comm);
    /* A buffered send copies into the attached buffer before returning, so the staging can go
     * back at once in every mode. */
    rc = next_send(mode, m.stage->ptr, (int)m.nbytes, MPI_PACKED, dest, tag, comm);
    gdte_stage_release(m.stage);
    return rc;
}

int gdte_ipo_isend(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                   MPI_Comm comm, MPI_Request *req)
{
    gdte_ipo_kind_t kind = dest == MPI_PROC_NULL ? GDTE_IPO_HOST : gdte_ipo_buf_kind(buf, count, dt);
    int rc;
    if (kind == GDTE_IPO_HOST) {
        if (gdte_ipo_node_on() && gdte_ipo_node_send_host(mode, buf, count, dt, dest, tag, comm, req, &rc)) return rc;
        return next_isend(mode, buf, count, dt, dest, tag, comm, req);
    }
    const char *fn = send_name(mode, 1);
    if (kind == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, fn, dt, count);
    if (gdte_ipo_node_on() && gdte_ipo_node_send_device(mode, buf, count, dt, kind, dest, tag, comm, req, &rc))
        return rc;
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r) return gdte_ipo_fail(comm, fn, GDTE_ERR_NO_MEMORY);
    msg_t m;
    rc = msg_pack(fn, comm, buf, count, dt, kind, &m);
    if (rc != MPI_SUCCESS || m.nbytes == 0) {
        gdte_ipo_req_destroy(r);
        return rc != MPI_SUCCESS ? rc : next_isend(mode, buf, count, dt, dest, tag, comm, req);
    }
    rc = next_isend(mode, m.stage->ptr, (int)m.nbytes, MPI_PACKED, dest, tag, comm, req);
    if (rc != MPI_SUCCESS) {
        gdte_stage_release(m.stage);
        gdte_ipo_req_destroy(r);
        return rc;
    }
    r->handle = *req;
    r->active = 1;
    r->kind = kind;
    r->comm = comm;
    r->dt = MPI_DATATYPE_NULL;
    r->nbytes = m.nbytes;
    r->stage = m.stage;
    gdte_ipo_req_insert(r);
    return MPI_SUCCESS;
}

int gdte_ipo_send_init(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                       MPI_Comm comm, MPI_Request *req)
{
    gdte_ipo_kind_t kind = dest == MPI_PROC_NULL ? GDTE_IPO_HOST : gdte_ipo_buf_kind(buf, count, dt);
    static const char *names[4] = {"MPI_Send_init", "MPI_Ssend_init", "MPI_Bsend_init", "MPI_Rsend_init"};
    if (kind == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, names[mode], dt, count);
    if (gdte_ipo_node_on()) {
        /* A message of a marker's size to a framing peer: each start sends an inline marker. */
        gdte_ipo_req_t *r = gdte_ipo_req_new();
        void *marker = NULL;
        if (r && gdte_ipo_node_persistent_init(r, buf, count, dt, kind, dest, tag, comm, &marker)) {
            int64_t nb;
            gdte_type_h t = NULL;
            if (kind != GDTE_IPO_HOST && gdte_ipo_type(dt, count, &t, &nb) == GDTE_OK) gdte_type_retain(t);
            r->type = t;
            r->dt = MPI_DATATYPE_NULL;
            int rc = next_send_init(mode, marker, GDTE_IPO_MARK_BYTES, MPI_BYTE, dest, tag, comm, req);
            if (rc != MPI_SUCCESS) {
                gdte_ipo_req_destroy(r);
                return rc;
            }
            r->handle = *req;
            r->persistent = 1;
            r->node_pers = 1;
            gdte_ipo_req_insert(r);
            return MPI_SUCCESS;
        }
        if (r) gdte_ipo_req_destroy(r);
        /* A larger one GPU to GPU, each start as an MPI_Isend through the node path would go. */
        if (kind != GDTE_IPO_HOST && mode != GDTE_IPO_BUFFERED && (r = gdte_ipo_req_new()) != NULL) {
            int rc = MPI_SUCCESS;
            if (gdte_ipo_node_persistent_ipc_init(r, mode, buf, count, dt, kind, dest, tag, comm, req, &rc)) {
                if (rc != MPI_SUCCESS) gdte_ipo_req_destroy(r);
                return rc;
            }
            gdte_ipo_req_destroy(r);
        }
    }
    if (kind == GDTE_IPO_HOST) return next_send_init(mode, buf, count, dt, dest, tag, comm, req);
    msg_t m;
    int rc = msg_prepare(names[mode], comm, dt, count, kind, &m);
    if (rc != MPI_SUCCESS) return rc;
    if (m.nbytes == 0) return next_send_init(mode, buf, count, dt, dest, tag, comm, req);
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r) {
        gdte_stage_release(m.stage);
        return gdte_ipo_fail(comm, names[mode], GDTE_ERR_NO_MEMORY);
    }
    /* The staging belongs to the request for its whole life: each MPI_Start packs into it. */
    rc = next_send_init(mode, m.stage->ptr, (int)m.nbytes, MPI_PACKED, dest, tag, comm, req);
    r->dt = MPI_DATATYPE_NULL;
    r->stage = m.stage;
    if (rc != MPI_SUCCESS) {
        gdte_ipo_req_destroy(r);
        return rc;
    }
    gdte_type_retain(m.type);
    /* Everything a start needs is ready before the first one: the staging (above) and the
     * device plan, so each MPI_Start is the copy or kernel and the MPI's own start. */
    if (kind == GDTE_IPO_DEVICE) (void)gdte_type_prepare_device(m.type);
    r->handle = *req;
    r->persistent = 1;
    r->user = (void *)buf;
    r->count = count;
    r->type = m.type;
    r->kind = kind;
    r->comm = comm;
    r->nbytes = m.nbytes;
    gdte_ipo_req_insert(r);
    return MPI_SUCCESS;
}

int gdte_ipo_persistent_pack(gdte_ipo_req_t *r)
{
    gdte_status_t st = gdte_xfer_pack_stage(r->user, r->count, r->type, r->kind == GDTE_IPO_FAKE, r->stage, r->nbytes);
    if (st != GDTE_OK) return gdte_ipo_fail(r->comm, "MPI_Start", st);
    gdte_ipo_cnt_g.sends++;
    gdte_ipo_cnt_g.bytes_packed += r->nbytes;
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------------------------------- */
/* After a blocking receive of MPI_PACKED into staging: unpack what arrived (a truncated
 * message too: the bytes that fit), release the staging, hand the status back. */
static int recv_done(const char *fn, MPI_Comm comm, int rc, void *buf, int count, MPI_Datatype dt,
                     gdte_ipo_kind_t kind, msg_t *m, MPI_Status *st, MPI_Status *status)
{
    int eclass = MPI_SUCCESS, erc = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &eclass);
    if (rc == MPI_SUCCESS || eclass == MPI_ERR_TRUNCATE) {
        gdte_ipo_cnt_g.recvs++;
        erc = gdte_ipo_recv_finish(comm, fn, buf, count, dt, m->type, kind, m->stage, m->nbytes, m->post, st);
    }
    gdte_stage_release(m->stage);
    gdte_ipo_status_out(status, st);
    return rc != MPI_SUCCESS ? rc : erc;
}

/* Record a posted receive of MPI_PACKED into staging (nonblocking or persistent), so its
 * completion unpacks into the user's buffer. */
static void recv_record(gdte_ipo_req_t *r, MPI_Request handle, int persistent, void *buf, int count, MPI_Datatype dt,
                        const msg_t *m, gdte_ipo_kind_t kind, MPI_Comm comm)
{
    gdte_type_retain(m->type);
    if (persistent && kind == GDTE_IPO_DEVICE) (void)gdte_type_prepare_device(m->type); /* as for Send_init */
    gdte_ipo_dt_get(dt);
    r->handle = handle;
    r->is_recv = 1;
    r->persistent = persistent;
    r->active = !persistent;
    r->user = buf;
    r->count = count;
    r->dt = dt;
    r->type = m->type;
    r->kind = kind;
    r->comm = comm;
    r->nbytes = m->nbytes;
    r->node_post = m->post;
    r->node_landing = RECV_AT(*m);
    if (!persistent) gdte_ipo_cnt_g.recvs++;
    gdte_ipo_req_insert(r);
}

/* ---- where a marker would end in a host receive's own type ----
 * A host receive posted into the user's buffer with the user's type gets a marker unpacked
 * into it by the MPI (gdte then writes the real data over it). When the marker's
 * GDTE_IPO_MARK_BYTES end inside one of the type's basic elements, the MPI must unpack a
 * partial element, which an application's own messages never ask of it: Open MPI 4.1 aborts
 * there ("buffer overflow detected" in opal_generic_simple_unpack) for 32-byte elements
 * (MPI_C_LONG_DOUBLE_COMPLEX) of a non-contiguous type. Such receives take scratch instead.
 * The walk reads the type as the MPI describes it (a named type is one element), and says "not
 * whole" where reading it would be costly (over 4096 entries) or it does not know the
 * constructor: scratch is always correct, only a copy slower. */
#define SIG_WALK_MAX_ENTRIES 4096
#define SIG_WALK_MAX_DEPTH 64
#define SIG_WALK_STACK 16

static int sig_size(MPI_Datatype t, int64_t *size_p)
{
    MPI_Count sz = 0;
    if (PMPI_Type_size_x(t, &sz) != MPI_SUCCESS || sz < 0) return 0;
    *size_p = (int64_t)sz;
    return 1;
}

/* 1 when the first `left` bytes (0 < left < size of t) of one t's signature end on an element
 * boundary. */
static int sig_whole(MPI_Datatype t, int64_t left, int depth)
{
    if (left == 0) return 1;
    int ni, na, nd, comb;
    if (depth > SIG_WALK_MAX_DEPTH || PMPI_Type_get_envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS) return 0;
    if (comb == MPI_COMBINER_NAMED || ni > SIG_WALK_MAX_ENTRIES || na > SIG_WALK_MAX_ENTRIES ||
        nd > SIG_WALK_MAX_ENTRIES)
        return 0; /* inside a predefined element (or too large to read here) */
    /* On the stack for the usual constructors: this runs for every such receive. */
    int Is[SIG_WALK_STACK];
    MPI_Aint As[SIG_WALK_STACK];
    MPI_Datatype Ds[SIG_WALK_STACK];
    int *I = ni < SIG_WALK_STACK ? Is : malloc(sizeof(int) * (size_t)(ni + 1));
    MPI_Aint *A = na < SIG_WALK_STACK ? As : malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    MPI_Datatype *D = nd < SIG_WALK_STACK ? Ds : malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    int whole = 0, got = 0;
    if (I && A && D && PMPI_Type_get_contents(t, ni, na, nd, I, A, D) == MPI_SUCCESS) {
        got = 1;
        int64_t reps = -1; /* of D[0], for the one-child constructors */
        switch (comb) {
        case MPI_COMBINER_DUP:
        case MPI_COMBINER_RESIZED: reps = 1; break;
        case MPI_COMBINER_CONTIGUOUS: reps = I[0]; break;
        case MPI_COMBINER_VECTOR:
        case MPI_COMBINER_HVECTOR:
        case MPI_COMBINER_INDEXED_BLOCK:
        case MPI_COMBINER_HINDEXED_BLOCK: reps = (int64_t)I[0] * I[1]; break;
        case MPI_COMBINER_INDEXED:
        case MPI_COMBINER_HINDEXED:
            reps = 0;
            for (int i = 0; i < I[0]; i++) reps += I[1 + i];
            break;
        case MPI_COMBINER_SUBARRAY:
            reps = 1;
            for (int i = 0; i < I[0]; i++) reps *= I[1 + I[0] + i];
            break;
        case MPI_COMBINER_DARRAY: {
            int64_t all = 0, one = 0;
            if (sig_size(t, &all) && sig_size(D[0], &one) && one > 0) reps = all / one;
            break;
        }
        case MPI_COMBINER_STRUCT: {
            /* members in order: skip the whole ones, walk into the one the cut falls in */
            for (int i = 0; i < I[0]; i++) {
                int64_t one = 0;
                if (!sig_size(D[i], &one)) break;
                int64_t all = one * I[1 + i];
                if (left < all) {
                    whole = one > 0 && sig_whole(D[i], left % one, depth + 1);
                    break;
                }
                left -= all;
                if (left == 0) {
                    whole = 1;
                    break;
                }
            }
            break;
        }
        default: break; /* F90 parameterized types (one element each) and anything else */
        }
        if (reps > 0) {
            int64_t one = 0;
            whole = sig_size(D[0], &one) && one > 0 && left < one * reps && sig_whole(D[0], left % one, depth + 1);
        }
    }
    if (got)
        for (int i = 0; i < nd; i++) {
            int ci, ca, cd, cc;
            if (PMPI_Type_get_envelope(D[i], &ci, &ca, &cd, &cc) == MPI_SUCCESS && cc != MPI_COMBINER_NAMED)
                PMPI_Type_free(&D[i]);
        }
    if (I != Is) free(I);
    if (A != As) free(A);
    if (D != Ds) free(D);
    return whole;
}

/* 1 when a marker received as `count` of `dt` ends on an element boundary (the MPI unpacks
 * only whole elements). */
static int marker_lands_whole(MPI_Datatype dt, int count)
{
    int64_t size = 0;
    if (!sig_size(dt, &size) || size <= 0 || count <= 0) return 0;
    return sig_whole(dt, GDTE_IPO_MARK_BYTES % size, 0);
}

/* ---- host receives that may match a marker (the node path) ----
 * Posted into scratch of a marker's size when shorter than one (the MPI would truncate a
 * marker), else into the user's buffer; completion delivers (gdte_ipo_host_recv_finish).
 * `msg`: a matched message (MPI_Mrecv/MPI_Imrecv) instead of (source, tag). `req` NULL:
 * blocking. */
static int node_host_recv(const char *fn, int persistent, void *buf, int count, MPI_Datatype dt, int source, int tag,
                          MPI_Comm comm, MPI_Message *msg, MPI_Request *req, MPI_Status *status)
{
    int size = 0;
    PMPI_Type_size(dt, &size);
    int64_t P = (int64_t)size * count;
    gdte_stage_t *scratch = NULL;
    int64_t post = 0; /* bytes posted into scratch */
    if (P < GDTE_IPO_MARK_BYTES || (P <= INT_MAX && !marker_lands_whole(dt, count))) {
        /* The MPI sees bytes into scratch, not the application's (count, datatype): their
         * checks are made here, or a negative count, MPI_DATATYPE_NULL or an uncommitted type
         * would be posted without an error. A receive of a marker's size or more whose type a
         * marker would cut inside an element: scratch of its own size, never pinned (the walk
         * above says why). */
        if (count < 0) return gdte_ipo_fail(comm, fn, GDTE_ERR_COUNT);
        gdte_type_h ht;
        gdte_status_t cs = gdte_mpi_type_import_validated(dt, gdte_ipo_check_type, &ht);
        if (cs != GDTE_OK) return gdte_ipo_fail(comm, fn, cs);
        post = P < GDTE_IPO_MARK_BYTES ? GDTE_IPO_MARK_BYTES : P;
        gdte_status_t st = gdte_stage_acquire(P < GDTE_IPO_MARK_BYTES ? GDTE_STAGE_HOST : GDTE_STAGE_PAGEABLE, 0,
                                              (size_t)post, &scratch);
        if (st != GDTE_OK) return gdte_ipo_fail(comm, fn, st);
        if (P >= GDTE_IPO_MARK_BYTES) gdte_ipo_cnt_g.host_cut_scratch++;
    }
    void *b = scratch ? scratch->ptr : buf;
    int c = scratch ? (int)post : count;
    MPI_Datatype t = scratch ? MPI_BYTE : dt;
    int rc;
    if (!req) {
        MPI_Status st;
        rc = msg ? IPO_NEXT(Mrecv)(b, c, t, msg, &st) : IPO_NEXT(Recv)(b, c, t, source, tag, comm, &st);
        int eclass = MPI_SUCCESS, erc = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &eclass);
        if (rc == MPI_SUCCESS || eclass == MPI_ERR_TRUNCATE)
            erc = gdte_ipo_host_recv_finish(comm, fn, buf, count, dt, scratch, P, &st);
        if (scratch) gdte_stage_release(scratch);
        gdte_ipo_status_out(status, &st);
        return rc != MPI_SUCCESS ? rc : erc;
    }
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r) {
        if (scratch) gdte_stage_release(scratch);
        return gdte_ipo_fail(comm, fn, GDTE_ERR_NO_MEMORY);
    }
    r->dt = MPI_DATATYPE_NULL;
    r->stage = scratch;
    rc = msg ? IPO_NEXT(Imrecv)(b, c, t, msg, req)
             : persistent ? IPO_NEXT(Recv_init)(b, c, t, source, tag, comm, req)
                          : IPO_NEXT(Irecv)(b, c, t, source, tag, comm, req);
    if (rc != MPI_SUCCESS) {
        gdte_ipo_req_destroy(r);
        return rc;
    }
    gdte_ipo_dt_get(dt);
    r->handle = *req;
    r->is_recv = 1;
    r->persistent = persistent;
    r->active = !persistent;
    r->user = buf;
    r->count = count;
    r->dt = dt;
    r->kind = GDTE_IPO_HOST;
    r->comm = comm;
    r->nbytes = P;
    r->node_post = scratch ? post : P;
    r->node_landing = scratch ? scratch->ptr : NULL;
    gdte_ipo_req_insert(r);
    return MPI_SUCCESS;
}

/* The common start of a receive: the memory kind of the user's buffer, the bytes a marker
 * needs (node path), the staging. *direct_p: the user's buffer goes to the MPI itself (host
 * memory, or nothing to stage). `none`: no process to receive from (MPI_PROC_NULL). */
static int recv_begin(const char *fn, MPI_Comm comm, int none, int source, void *buf, int count, MPI_Datatype dt,
                      gdte_ipo_kind_t *kind_p, int64_t *mp_p, msg_t *m, int *direct_p)
{
    memset(m, 0, sizeof *m);
    *kind_p = none ? GDTE_IPO_HOST : gdte_ipo_buf_kind(buf, count, dt);
    *mp_p = none ? 0 : min_post(comm, source);
    if (*kind_p == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, fn, dt, count);
    /* A sender that may mark chooses its path by the GPU this process works on. */
    if (*kind_p == GDTE_IPO_DEVICE && *mp_p) gdte_ipo_node_gpu_note();
    if (*kind_p != GDTE_IPO_HOST) {
        int rc = msg_prepare_post(fn, comm, dt, count, *kind_p, *mp_p, *mp_p && gdte_ipo_node_remote(comm, source), m);
        if (rc != MPI_SUCCESS) return rc;
    }
    *direct_p = *kind_p == GDTE_IPO_HOST || m->nbytes == 0;
    return MPI_SUCCESS;
}

int gdte_ipo_recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (gdte_ipo_node_on() && source != MPI_PROC_NULL && gdte_ipo_node_may_mark(comm, MPI_ANY_SOURCE)) {
        /* Never blocked inside the MPI: a peer may wait for this process to finish a marker. */
        MPI_Request r;
        int rc = gdte_ipo_irecv(buf, count, dt, source, tag, comm, &r);
        return rc != MPI_SUCCESS ? rc : gdte_ipo_wait(&r, status);
    }
    gdte_ipo_kind_t kind;
    int64_t mp;
    msg_t m;
    int direct, rc = recv_begin("MPI_Recv", comm, source == MPI_PROC_NULL, source, buf, count, dt, &kind, &mp, &m, &direct);
    if (rc != MPI_SUCCESS) return rc;
    if (direct) {
        if (mp) return node_host_recv("MPI_Recv", 0, buf, count, dt, source, tag, comm, NULL, NULL, status);
        return IPO_NEXT(Recv)(buf, count, dt, source, tag, comm, status);
    }
    MPI_Status st;
    rc = IPO_NEXT(Recv)(RECV_AT(m), (int)m.post, MPI_PACKED, source, tag, comm, &st);
    return recv_done("MPI_Recv", comm, rc, buf, count, dt, kind, &m, &st, status);
}

/* A receive request record (nonblocking or persistent). */
static int recv_request(int persistent, void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                        MPI_Request *req)
{
    const char *fn = persistent ? "MPI_Recv_init" : "MPI_Irecv";
    gdte_ipo_kind_t kind;
    int64_t mp;
    msg_t m;
    int direct, rc = recv_begin(fn, comm, source == MPI_PROC_NULL, source, buf, count, dt, &kind, &mp, &m, &direct);
    if (rc != MPI_SUCCESS) return rc;
    if (direct) {
        if (mp) return node_host_recv(fn, persistent, buf, count, dt, source, tag, comm, NULL, req, NULL);
        return persistent ? IPO_NEXT(Recv_init)(buf, count, dt, source, tag, comm, req)
                          : IPO_NEXT(Irecv)(buf, count, dt, source, tag, comm, req);
    }
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r) {
        gdte_stage_release(m.stage);
        return gdte_ipo_fail(comm, fn, GDTE_ERR_NO_MEMORY);
    }
    rc = persistent ? IPO_NEXT(Recv_init)(RECV_AT(m), (int)m.post, MPI_PACKED, source, tag, comm, req)
                    : IPO_NEXT(Irecv)(RECV_AT(m), (int)m.post, MPI_PACKED, source, tag, comm, req);
    r->dt = MPI_DATATYPE_NULL;
    r->stage = m.stage;
    if (rc != MPI_SUCCESS) {
        gdte_ipo_req_destroy(r);
        return rc;
    }
    recv_record(r, *req, persistent, buf, count, dt, &m, kind, comm);
    return MPI_SUCCESS;
}

int gdte_ipo_irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    return recv_request(0, buf, count, dt, source, tag, comm, req);
}

int gdte_ipo_recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    return recv_request(1, buf, count, dt, source, tag, comm, req);
}

/* Matched messages and their communicators (MPI_Mprobe/MPI_Improbe to MPI_Mrecv/MPI_Imrecv).
 * A message handle is taken out before the receive call, while the application still owns
 * it (as request records are): the MPI may reuse its value as soon as the receive starts. */
typedef struct msg_comm {
    MPI_Message msg;
    MPI_Comm comm;
    UT_hash_handle hh;
} msg_comm_t;
static msg_comm_t *msg_comms, *msg_comm_free; /* the table; recycled entries (linked by hh.next) */
static pthread_mutex_t msg_comm_lock = PTHREAD_MUTEX_INITIALIZER;

void gdte_ipo_message_note(MPI_Message msg, MPI_Comm comm)
{
    if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC) return;
    pthread_mutex_lock(&msg_comm_lock);
    msg_comm_t *e = msg_comm_free;
    if (e) msg_comm_free = e->hh.next;
    else e = malloc(sizeof *e); /* grows to the most messages ever matched at once */
    if (e) {
        e->msg = msg;
        e->comm = comm;
        HASH_ADD(hh, msg_comms, msg, sizeof e->msg, e);
    } /* else: errors of its receive go to MPI_COMM_WORLD */
    pthread_mutex_unlock(&msg_comm_lock);
}

static MPI_Comm message_comm(const MPI_Message *msg)
{
    MPI_Comm c = MPI_COMM_WORLD;
    if (!msg || !msg_comms) return c;
    msg_comm_t *e;
    pthread_mutex_lock(&msg_comm_lock);
    HASH_FIND(hh, msg_comms, msg, sizeof *msg, e);
    if (e) {
        HASH_DEL(msg_comms, e);
        c = e->comm;
        e->hh.next = msg_comm_free;
        msg_comm_free = e;
    }
    pthread_mutex_unlock(&msg_comm_lock);
    return c;
}

/* A matched message is received like any other: MPI_PACKED into staging; errors go through
 * the handler of the communicator it was matched on. */
int gdte_ipo_mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Status *status)
{
    MPI_Comm comm = message_comm(msg);
    gdte_ipo_kind_t kind;
    int64_t mp;
    msg_t m;
    int direct, rc = recv_begin("MPI_Mrecv", comm, msg && *msg == MPI_MESSAGE_NO_PROC, MPI_ANY_SOURCE, buf, count, dt, &kind,
                                &mp, &m, &direct);
    if (rc != MPI_SUCCESS) return rc;
    if (direct) {
        if (mp) return node_host_recv("MPI_Mrecv", 0, buf, count, dt, 0, 0, comm, msg, NULL, status);
        return IPO_NEXT(Mrecv)(buf, count, dt, msg, status);
    }
    MPI_Status st;
    rc = IPO_NEXT(Mrecv)(RECV_AT(m), (int)m.post, MPI_PACKED, msg, &st);
    return recv_done("MPI_Mrecv", comm, rc, buf, count, dt, kind, &m, &st, status);
}

int gdte_ipo_imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Request *req)
{
    MPI_Comm comm = message_comm(msg);
    gdte_ipo_kind_t kind;
    int64_t mp;
    msg_t m;
    int direct, rc = recv_begin("MPI_Imrecv", comm, msg && *msg == MPI_MESSAGE_NO_PROC, MPI_ANY_SOURCE, buf, count, dt, &kind,
                                &mp, &m, &direct);
    if (rc != MPI_SUCCESS) return rc;
    if (direct) {
        if (mp) return node_host_recv("MPI_Imrecv", 0, buf, count, dt, 0, 0, comm, msg, req, NULL);
        return IPO_NEXT(Imrecv)(buf, count, dt, msg, req);
    }
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r) {
        gdte_stage_release(m.stage);
        return gdte_ipo_fail(comm, "MPI_Imrecv", GDTE_ERR_NO_MEMORY);
    }
    rc = IPO_NEXT(Imrecv)(RECV_AT(m), (int)m.post, MPI_PACKED, msg, req);
    r->dt = MPI_DATATYPE_NULL;
    r->stage = m.stage;
    if (rc != MPI_SUCCESS) {
        gdte_ipo_req_destroy(r);
        return rc;
    }
    recv_record(r, *req, 0, buf, count, dt, &m, kind, comm);
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------------------------------- */
int gdte_ipo_sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag, void *rbuf, int rcount,
                      MPI_Datatype rdt, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    if (gdte_ipo_node_on() && gdte_ipo_node_may_mark(comm, MPI_ANY_SOURCE)) {
        /* Both halves through the node path's own send and receive, as MPI defines the call. */
        MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_Status sts[2];
        int rc = gdte_ipo_irecv(rbuf, rcount, rdt, source, rtag, comm, &rq[1]);
        if (rc != MPI_SUCCESS) return rc;
        rc = gdte_ipo_isend(GDTE_IPO_STD, sbuf, scount, sdt, dest, stag, comm, &rq[0]);
        if (rc != MPI_SUCCESS) {
            gdte_ipo_cancel(&rq[1]);
            gdte_ipo_wait(&rq[1], MPI_STATUS_IGNORE);
            return rc;
        }
        rc = gdte_ipo_waitall(2, rq, sts);
        gdte_ipo_status_out(status, &sts[1]);
        if (rc == MPI_ERR_IN_STATUS) rc = sts[0].MPI_ERROR != MPI_SUCCESS ? sts[0].MPI_ERROR : sts[1].MPI_ERROR;
        return rc;
    }
    gdte_ipo_kind_t sk = dest == MPI_PROC_NULL ? GDTE_IPO_HOST : gdte_ipo_buf_kind(sbuf, scount, sdt);
    gdte_ipo_kind_t rk = source == MPI_PROC_NULL ? GDTE_IPO_HOST : gdte_ipo_buf_kind(rbuf, rcount, rdt);
    if (sk == GDTE_IPO_HOST && rk == GDTE_IPO_HOST)
        return IPO_NEXT(Sendrecv)(sbuf, scount, sdt, dest, stag, rbuf, rcount, rdt, source, rtag, comm, status);
    if (sk == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, "MPI_Sendrecv", sdt, scount);
    if (rk == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, "MPI_Sendrecv", rdt, rcount);
    msg_t ms = {0}, mr = {0};
    int rc;
    const void *sb = sbuf;
    int sc = scount;
    MPI_Datatype st_ = sdt;
    void *rb = rbuf;
    int rcn = rcount;
    MPI_Datatype rt = rdt;
    if (sk != GDTE_IPO_HOST) {
        if ((rc = msg_pack("MPI_Sendrecv", comm, sbuf, scount, sdt, sk, &ms)) != MPI_SUCCESS) return rc;
        if (ms.nbytes) {
            sb = ms.stage->ptr;
            sc = (int)ms.nbytes;
            st_ = MPI_PACKED;
        }
    }
    if (rk != GDTE_IPO_HOST) {
        if ((rc = msg_prepare("MPI_Sendrecv", comm, rdt, rcount, rk, &mr)) != MPI_SUCCESS) {
            gdte_stage_release(ms.stage);
            return rc;
        }
        if (mr.nbytes) {
            rb = RECV_AT(mr);
            rcn = (int)mr.nbytes;
            rt = MPI_PACKED;
        }
    }
    MPI_Status st;
    rc = IPO_NEXT(Sendrecv)(sb, sc, st_, dest, stag, rb, rcn, rt, source, rtag, comm, &st);
    gdte_stage_release(ms.stage);
    int erc = MPI_SUCCESS;
    if (mr.stage) {
        int eclass = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &eclass);
        if (rc == MPI_SUCCESS || eclass == MPI_ERR_TRUNCATE) {
            gdte_ipo_cnt_g.recvs++;
            erc = gdte_ipo_recv_finish(comm, "MPI_Sendrecv", rbuf, rcount, rdt, mr.type, rk, mr.stage, mr.nbytes,
                                       mr.post, &st);
        }
        gdte_stage_release(mr.stage);
    }
    gdte_ipo_status_out(status, &st);
    return rc != MPI_SUCCESS ? rc : erc;
}

int gdte_ipo_sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int source, int rtag,
                              MPI_Comm comm, MPI_Status *status)
{
    if (gdte_ipo_node_on() && gdte_ipo_node_may_mark(comm, MPI_ANY_SOURCE) && count > 0) {
        /* The outgoing data copied first (host: MPI_Pack; device: packed to host), then a
         * send of that copy and a receive into the buffer, through the node path. */
        gdte_ipo_kind_t k0 = gdte_ipo_buf_kind(buf, count, dt);
        if (k0 == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, "MPI_Sendrecv_replace", dt, count);
        int psize = 0, pos = 0, rc;
        gdte_status_t cs = gdte_ipo_check_type(dt); /* before MPI_Pack_size, which trusts it */
        if (cs != GDTE_OK) return gdte_ipo_fail(comm, "MPI_Sendrecv_replace", cs);
        if ((rc = PMPI_Pack_size(count, dt, comm, &psize)) != MPI_SUCCESS) return rc;
        void *copy = malloc(psize ? (size_t)psize : 1);
        if (!copy) return gdte_ipo_fail(comm, "MPI_Sendrecv_replace", GDTE_ERR_NO_MEMORY);
        if (k0 == GDTE_IPO_HOST) {
            rc = PMPI_Pack(buf, count, dt, copy, psize, &pos, comm);
        } else {
            gdte_type_h t;
            int64_t nb = 0;
            gdte_status_t gs = gdte_ipo_type(dt, count, &t, &nb);
            if (gs == GDTE_OK) gs = gdte_xfer_pack_to_host(buf, count, t, k0 == GDTE_IPO_FAKE, copy, 0, nb);
            rc = gs == GDTE_OK ? MPI_SUCCESS : gdte_ipo_fail(comm, "MPI_Sendrecv_replace", gs);
            pos = (int)nb;
        }
        if (rc == MPI_SUCCESS) rc = gdte_ipo_sendrecv(copy, pos, MPI_PACKED, dest, stag, buf, count, dt, source, rtag, comm, status);
        free(copy);
        return rc;
    }
    gdte_ipo_kind_t k = gdte_ipo_buf_kind(buf, count, dt);
    if (k == GDTE_IPO_HOST) return IPO_NEXT(Sendrecv_replace)(buf, count, dt, dest, stag, source, rtag, comm, status);
    if (k == GDTE_IPO_MIXED) return gdte_ipo_mixed_fail(comm, "MPI_Sendrecv_replace", dt, count);
    /* Two staging buffers: the outgoing stream must be read in full before the incoming one
     * lands, which the MPI's own replace does with a temporary of its own. */
    msg_t ms, mr;
    int rc = msg_pack("MPI_Sendrecv_replace", comm, buf, count, dt, k, &ms);
    if (rc != MPI_SUCCESS) return rc;
    if (ms.nbytes == 0) return IPO_NEXT(Sendrecv_replace)(buf, count, dt, dest, stag, source, rtag, comm, status);
    if ((rc = msg_prepare("MPI_Sendrecv_replace", comm, dt, count, k, &mr)) != MPI_SUCCESS) {
        gdte_stage_release(ms.stage);
        return rc;
    }
    MPI_Status st;
    rc = IPO_NEXT(Sendrecv)(ms.stage->ptr, (int)ms.nbytes, MPI_PACKED, dest, stag, RECV_AT(mr), (int)mr.nbytes,
                            MPI_PACKED, source, rtag, comm, &st);
    gdte_stage_release(ms.stage);
    int eclass = MPI_SUCCESS, erc = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &eclass);
    if (rc == MPI_SUCCESS || eclass == MPI_ERR_TRUNCATE) {
        gdte_ipo_cnt_g.recvs++;
        erc = gdte_ipo_recv_finish(comm, "MPI_Sendrecv_replace", buf, count, dt, mr.type, k, mr.stage, mr.nbytes,
                                   mr.post, &st);
    }
    gdte_stage_release(mr.stage);
    gdte_ipo_status_out(status, &st);
    return rc != MPI_SUCCESS ? rc : erc;
}
