/*
 * Reductions on device buffers (see interpose_reduce.h for the scheme).
 *
 * Why mirrors rather than packed bytes: the MPI applies the operation element by element of
 * the datatype it is given. Handing it the packed stream would need a datatype of the same
 * signature, which does not exist for pair types with padding (MPI_DOUBLE_INT) and changes
 * what a user-defined operation is called with. A mirror laid out like the application's
 * buffer lets the MPI see exactly the call the application made, on host memory: its own
 * validation (MPI_ERR_OP, MPI_ERR_TYPE, MPI_ERR_COUNT, ...), algorithms and error handlers.
 * The copies in and out move only the bytes the datatype touches: a dense datatype in one
 * transfer, any other through gdte's pack pipeline and the host executor.
 *
 * Which buffers a call touches, per MPI's rules (the others are passed on untouched):
 *  - sendbuf unless MPI_IN_PLACE; at a rooted Reduce on an intercommunicator only in the group
 *    without the root, never at MPI_ROOT or MPI_PROC_NULL;
 *  - recvbuf on every rank, except a non-root of Reduce (and the root's group but the root on
 *    an intercommunicator), and rank 0 of Exscan, whose recvbuf MPI leaves undefined (copied
 *    in under MPI_IN_PLACE, never copied back);
 *  - under MPI_IN_PLACE recvbuf is also the input: the whole input vector (the sum of
 *    recvcounts for Reduce_scatter, n * recvcount for Reduce_scatter_block) is copied in, the
 *    result (this rank's block, at the start) copied back.
 * Zero counts move nothing. A nonblocking call returns the MPI's own request; the mirrors are
 * kept by a request record (interpose_req.c) whose completion copies the result back. A
 * persistent form (Open MPI's MPIX_<name>_init, MPI-4's MPI_<name>_init) makes the mirrors once
 * and sets up the MPI's persistent reduction on them; its record's start hook copies the inputs
 * in at every MPI_Start/MPI_Startall, its finish hook copies the result back at every
 * completion, and its fini hook frees the mirrors at MPI_Request_free.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "interpose_reduce.h"
#include "import.h"
#include "xfer.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "kernels/reduce.h"
#include "util/util.h"

gdte_red_next_t gdte_red_next_g;
gdte_red_init_next_t gdte_red_init_next_g[3];

/* See interpose_core.c for why the next definition rather than PMPI_x. */
__attribute__((constructor)) static void red_resolve_next(void)
{
#define GDTE_X_RED_RESOLVE(name, iname, ...) \
    GDTE_RESOLVE_NEXT(gdte_red_next_g.name, name) GDTE_RESOLVE_NEXT(gdte_red_next_g.iname, iname)
    GDTE_RED_LIST(GDTE_X_RED_RESOLVE)
#undef GDTE_X_RED_RESOLVE
    GDTE_RESOLVE_NEXT(gdte_red_next_g.Reduce_local, Reduce_local)
    for (int k = GDTE_PINIT_MPIX; k <= GDTE_PINIT_MPI4; k++) {
#define GDTE_X_RED_INIT_RESOLVE(name, ...) \
    *(void **)&gdte_red_init_next_g[k].name = gdte_pinit_resolve((gdte_pinit_t)k, #name);
        GDTE_RED_LIST(GDTE_X_RED_INIT_RESOLVE)
#undef GDTE_X_RED_INIT_RESOLVE
    }
}

/* The MPI's call of the form `how` says, on the arguments before comm. */
#define RED_CALL(how, name, iname, ...) \
    GDTE_PCALL(gdte_red_init_next_g, gdte_red_next_g, (how).init, (how).info, (how).req, comm, name, iname, __VA_ARGS__)

/* ---- counters (gdte_mpi_reduce_counter) ---- */
static _Atomic int64_t n_staged;       /* reductions whose device buffers went through mirrors */
static _Atomic int64_t n_bytes_staged; /* bytes copied in and out */
static _Atomic int64_t n_kernels;      /* MPI_Reduce_local by gdte's reduction (kernel or host twin) */

/** Counters of the reduction path for tests and benchmarks: "reduce_staged", "reduce_bytes",
 * "reduce_kernels", and the node path's "reduce_node", "reduce_node_bytes"; -1 for an unknown
 * name. */
GDTE_IPO_EXPORT int64_t gdte_mpi_reduce_counter(const char *name)
{
    if (!name) return -1;
    if (!strcmp(name, "reduce_staged")) return n_staged;
    if (!strcmp(name, "reduce_bytes")) return n_bytes_staged;
    if (!strcmp(name, "reduce_kernels")) return n_kernels;
    return gdte_red_node_counter(name);
}

/* ---- whether to look at buffers ---- */
static _Atomic int red_mode; /* 0 undecided, 1 look, 2 pass (no device possible) */

static int red_possible(void)
{
    int m = atomic_load_explicit(&red_mode, memory_order_relaxed);
    if (__builtin_expect(m == 0, 0)) {
        m = gdte_gpu_available() || gdte_knob(GDTE_KNOB_FAKE_DEVICE) ? 1 : 2;
        atomic_store_explicit(&red_mode, m, memory_order_relaxed);
    }
    return m == 1;
}

int gdte_red_checking(void) { return red_possible() && !gdte_ipo_gpu_aware(); }
int gdte_red_node_possible(void) { return red_possible() && gdte_knob(GDTE_KNOB_MPI_COLL_NODE); }

/* ---- mirrors ---- */
typedef struct red_side {
    void *user;          /* the application's buffer (device memory) */
    gdte_ipo_kind_t kind;
    int64_t in, out;     /* elements copied in before the call, back after */
    gdte_stage_t *mirror;
    gdte_stage_t *packed; /* the packed stream, for a datatype that is not dense */
    void *base;          /* what the MPI is given: the mirror laid out as `user` */
    void *scratch;       /* red_ctx_t.bad: a fresh anonymous mapping of the span, and its length */
    size_t scratch_len;
} red_side_t;

typedef struct red_ctx {
    const char *fn;
    MPI_Comm comm;
    gdte_type_h type; /* retained */
    gdte_type_info_t info;
    int dense;        /* `n` elements are one block of n * size bytes starting at true_lb */
    red_side_t s, r;
    /* A buffer partly host and partly device memory ("sendbuf"/"recvbuf"): the process still
     * takes part in the MPI's reduction (the others cannot know, and would wait for it forever)
     * on zeroed host scratch of the call's datatype and count, so that the MPI's checks of the
     * (operation, datatype) pair see the application's call; nothing of the application's
     * buffers is read or written, and each completion reports MPI_ERR_BUFFER. The scratch is a
     * fresh anonymous mapping of the datatype's span, whose pages cost nothing until the MPI
     * touches them (a span of MPI_BOTTOM addresses in host and device memory far apart is
     * terabytes of address space, a few pages of memory); only a mapping the system refuses
     * leaves the process out (MPI_ERR_BUFFER before the call). */
    const char *bad;
    /* sendbuf == recvbuf (not MPI_IN_PLACE), the receive side touched: one mirror for both, so
     * that the MPI sees the aliasing the application wrote and answers it as for host buffers
     * (Open MPI 4.1: MPI_ERR_BUFFER from Allreduce of more than one element, MPI_ERR_ARG from a
     * root's Reduce; the same on every process, host or device, so none is left waiting). */
    int alias;
} red_ctx_t;

static const gdte_pack_params_t host_params = {.field_mask = GDTE_PACK_FIELD_FLAGS, .flags = GDTE_PACK_FLAG_HOST};

/* Bytes from the lowest to past the highest byte that n elements touch, and the lowest. */
static void span_of(const gdte_type_info_t *ti, int64_t n, int64_t *lo_p, int64_t *bytes_p)
{
    int64_t step = (n - 1) * ti->extent;
    int64_t lo = ti->true_lb + (step < 0 ? step : 0);
    int64_t hi = ti->true_lb + ti->true_extent + (step > 0 ? step : 0);
    *lo_p = lo;
    *bytes_p = hi - lo;
}

/* The inputs of a side, from the application's buffer into its mirror. */
static gdte_status_t side_copy_in(red_ctx_t *c, red_side_t *sd)
{
    if (!sd->mirror || sd->in <= 0 || c->bad) return GDTE_OK;
    gdte_status_t st;
    int fake = sd->kind == GDTE_IPO_FAKE;
    int64_t inbytes = sd->in * c->info.size;
    if (c->dense) {
        st = gdte_xfer_pack_to_host(sd->user, sd->in, c->type, fake, sd->mirror->ptr, sd->mirror->pinned, inbytes);
    } else {
        st = gdte_xfer_pack_to_host(sd->user, sd->in, c->type, fake, sd->packed->ptr, sd->packed->pinned, inbytes);
        if (st == GDTE_OK) st = gdte_unpack(sd->packed->ptr, inbytes, sd->base, sd->in, c->type, &host_params, NULL);
    }
    if (st == GDTE_OK) n_bytes_staged += inbytes;
    return st;
}

/* A side's mirror (and packed stream for a datatype that is not dense); its inputs copied in
 * when `copy` (a persistent form copies them at every start instead). */
static gdte_status_t side_stage_in(red_ctx_t *c, red_side_t *sd, int copy)
{
    int64_t n = sd->in > sd->out ? sd->in : sd->out;
    int64_t lo, bytes, pbytes;
    if (c->bad) {
        /* Zeroed scratch: a new mapping (no other call's bytes reach the MPI or user ops). */
        span_of(&c->info, n, &lo, &bytes);
        size_t len = (size_t)(bytes > 0 ? bytes : 1);
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            gdte_error("%s: no %zu bytes of address space for the scratch of a partly host buffer", c->fn, len);
            return GDTE_ERR_MEMORY_KIND;
        }
        sd->scratch = m;
        sd->scratch_len = len;
        sd->base = (void *)((uintptr_t)m - (uintptr_t)lo);
        return GDTE_OK;
    }
    span_of(&c->info, n, &lo, &bytes);
    gdte_status_t st = gdte_type_pack_size(n, c->type, &pbytes);
    if (st != GDTE_OK) return st;
    if ((st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)bytes, &sd->mirror)) != GDTE_OK) return st;
    /* The buffer the MPI reads is where `user` would be if the mirror's first byte were the
     * user's lowest touched byte (integer arithmetic: it may lie outside the mirror). */
    sd->base = (void *)((uintptr_t)sd->mirror->ptr - (uintptr_t)lo);
    if (!c->dense && (st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)pbytes, &sd->packed)) != GDTE_OK) return st;
    return copy ? side_copy_in(c, sd) : GDTE_OK;
}

static gdte_status_t side_stage_out(red_ctx_t *c, red_side_t *sd)
{
    if (!sd->mirror || sd->out <= 0 || c->bad) return GDTE_OK;
    int fake = sd->kind == GDTE_IPO_FAKE;
    int64_t outbytes = sd->out * c->info.size;
    gdte_status_t st;
    if (c->dense) {
        st = gdte_xfer_unpack_from_host(sd->mirror->ptr, sd->mirror->pinned, outbytes, sd->user, sd->out, c->type, fake);
    } else {
        st = gdte_pack(sd->base, sd->out, c->type, sd->packed->ptr, outbytes, &host_params, NULL);
        if (st == GDTE_OK)
            st = gdte_xfer_unpack_from_host(sd->packed->ptr, sd->packed->pinned, outbytes, sd->user, sd->out, c->type,
                                            fake);
    }
    if (st == GDTE_OK) n_bytes_staged += outbytes;
    return st;
}

static void side_release(red_side_t *sd)
{
    if (sd->scratch) munmap(sd->scratch, sd->scratch_len);
    sd->scratch = NULL;
    if (sd->mirror) gdte_stage_release(sd->mirror);
    if (sd->packed) gdte_stage_release(sd->packed);
    sd->mirror = sd->packed = NULL;
}

static void ctx_free(red_ctx_t *c)
{
    if (!c) return;
    side_release(&c->s);
    side_release(&c->r);
    if (c->type) gdte_type_release(c->type);
    free(c);
}

/* What the MPI is given for the send (recv 0) or receive side: the mirror, or the application's
 * pointer. */
static void *side_arg(const red_ctx_t *c, int recv, const void *user)
{
    const red_side_t *sd = c ? (recv || c->alias ? &c->r : &c->s) : NULL;
    return (void *)(sd && (sd->mirror || sd->scratch) ? sd->base : user);
}

/* The kind of `n` elements at `b` (HOST when the MPI will not touch them). */
static gdte_ipo_kind_t kind_of(const void *b, int64_t n, MPI_Datatype dt);
gdte_ipo_kind_t gdte_red_kind_of(const void *b, int64_t n, MPI_Datatype dt) { return kind_of(b, n, dt); }

static gdte_ipo_kind_t kind_of(const void *b, int64_t n, MPI_Datatype dt)
{
    if (n <= 0 || b == MPI_IN_PLACE) return GDTE_IPO_HOST;
    if (n > INT_MAX) {
        /* gdte_ipo_buf_kind counts in int: judge by the first and the last element. */
        MPI_Count lb, ext;
        if (PMPI_Type_get_extent_x(dt, &lb, &ext) != MPI_SUCCESS) return GDTE_IPO_HOST;
        gdte_ipo_kind_t a = gdte_ipo_buf_kind(b, 1, dt);
        gdte_ipo_kind_t z = gdte_ipo_buf_kind((const void *)((uintptr_t)b + (uintptr_t)((n - 1) * ext)), 1, dt);
        return a == z ? a : GDTE_IPO_MIXED;
    }
    return gdte_ipo_buf_kind(b, (int)n, dt);
}

/*
 * Decide and stage. `s_in`: send elements the MPI reads (0: none); `r_in`/`r_out`: receive
 * elements it reads (MPI_IN_PLACE) and writes. *ctx_p is NULL when no buffer is device memory
 * (the call goes to the MPI as it is). The inputs are copied in now, except for a persistent
 * form (`how`), which copies them at every start. Returns an MPI error code (reported through
 * comm).
 */
static int red_prepare(const char *fn, MPI_Comm comm, MPI_Datatype dt, const void *sbuf, int64_t s_in, void *rbuf,
                       int64_t r_in, int64_t r_out, gdte_red_how_t how, red_ctx_t **ctx_p)
{
    int copy = how.init == GDTE_PINIT_NONE;
    *ctx_p = NULL;
    /* The node path considered the call and left it: a GPU-aware MPI reads device memory. */
    if (!gdte_red_checking()) return MPI_SUCCESS;
    int alias = sbuf == rbuf && sbuf != MPI_IN_PLACE && (r_in > 0 || r_out > 0);
    if (alias) {
        /* the receive side's mirror holds the send side's input too (see red_ctx_t.alias) */
        if (s_in > r_in) r_in = s_in;
        s_in = 0;
    }
    gdte_ipo_kind_t sk = kind_of(sbuf, s_in, dt);
    gdte_ipo_kind_t rk = kind_of(rbuf, r_in > r_out ? r_in : r_out, dt);
    if (sk == GDTE_IPO_HOST && rk == GDTE_IPO_HOST) return MPI_SUCCESS;
    red_ctx_t *c = calloc(1, sizeof *c);
    if (!c) return gdte_ipo_fail(comm, fn, GDTE_ERR_NO_MEMORY);
    c->fn = fn;
    c->comm = comm;
    c->alias = alias;
    if (sk == GDTE_IPO_MIXED || rk == GDTE_IPO_MIXED) c->bad = sk == GDTE_IPO_MIXED ? "sendbuf" : "recvbuf";
    gdte_type_h t;
    gdte_status_t st = gdte_mpi_type_import(dt, &t);
    if (st == GDTE_OK) {
        gdte_type_retain(t);
        c->type = t;
        st = gdte_type_get_info(t, &c->info);
    }
    if (st == GDTE_OK && c->bad) {
        /* Every side the MPI touches gets scratch, the host one too (the MPI must not write the
         * application's host buffer either). */
        int64_t n = s_in > r_in ? s_in : r_in;
        if (r_out > n) n = r_out;
        sk = sbuf != MPI_IN_PLACE && s_in > 0 ? GDTE_IPO_MIXED : GDTE_IPO_HOST;
        rk = r_in > 0 || r_out > 0 ? GDTE_IPO_MIXED : GDTE_IPO_HOST;
    }
    if (st == GDTE_OK) {
        c->dense = c->info.is_contiguous && c->info.true_lb == 0 && c->info.true_extent == c->info.size;
        if (sk != GDTE_IPO_HOST) {
            c->s = (red_side_t){.user = (void *)sbuf, .kind = sk, .in = s_in};
            st = side_stage_in(c, &c->s, copy);
        }
    }
    if (st == GDTE_OK && rk != GDTE_IPO_HOST) {
        c->r = (red_side_t){.user = rbuf, .kind = rk, .in = r_in, .out = r_out};
        st = side_stage_in(c, &c->r, copy);
    }
    if (st != GDTE_OK) {
        ctx_free(c);
        return gdte_ipo_fail(comm, fn, st);
    }
    if (c->bad) {
        gdte_debug("%s: %s partly host and partly device memory: taking part on zeroed scratch, then MPI_ERR_BUFFER",
                   fn, c->bad);
        *ctx_p = c;
        return MPI_SUCCESS;
    }
    if (copy) n_staged++;
    gdte_debug("%s: device buffers through host mirrors (send %lld, receive %lld in / %lld out elements)", fn,
               (long long)(sk != GDTE_IPO_HOST ? s_in : 0), (long long)(rk != GDTE_IPO_HOST ? r_in : 0),
               (long long)(rk != GDTE_IPO_HOST ? r_out : 0));
    *ctx_p = c;
    return MPI_SUCCESS;
}

/* After the MPI's call: a blocking call copies back and frees; a nonblocking one that started
 * hands its mirrors to a request record, completed by interpose_req.c. */
static int red_finish_req(gdte_ipo_req_t *r, MPI_Status *st, int rc)
{
    (void)st;
    red_ctx_t *c = r->ctx;
    if (rc != MPI_SUCCESS || !c) return rc;
    if (c->bad) return gdte_ipo_fail(c->comm, c->fn, GDTE_ERR_MEMORY_KIND);
    gdte_status_t s = side_stage_out(c, &c->r);
    return s == GDTE_OK ? MPI_SUCCESS : gdte_ipo_fail(c->comm, c->fn, s);
}

static void red_fini_req(gdte_ipo_req_t *r)
{
    ctx_free(r->ctx);
    r->ctx = NULL;
}

/* MPI_Start/MPI_Startall of a persistent reduction: the inputs into the mirrors. */
static int red_start_req(gdte_ipo_req_t *r)
{
    red_ctx_t *c = r->ctx;
    if (c->bad) return MPI_SUCCESS; /* nothing of the application's is read; each completion reports it */
    gdte_status_t st = side_copy_in(c, &c->s);
    if (st == GDTE_OK) st = side_copy_in(c, &c->r);
    if (st != GDTE_OK) return gdte_ipo_fail(c->comm, c->fn, st);
    n_staged++;
    return MPI_SUCCESS;
}

static int red_complete(red_ctx_t *c, int rc, gdte_red_how_t how)
{
    if (!c) return rc;
    if (rc == MPI_SUCCESS && !how.req) {
        gdte_status_t s = c->bad ? GDTE_ERR_MEMORY_KIND : side_stage_out(c, &c->r);
        if (s != GDTE_OK) rc = gdte_ipo_fail(c->comm, c->fn, s);
    }
    if (rc != MPI_SUCCESS || !how.req) {
        ctx_free(c);
        return rc;
    }
    int persistent = how.init != GDTE_PINIT_NONE;
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r && persistent) {
        /* Nothing started yet: the MPI's persistent request goes, and the call fails. */
        IPO_NEXT(Request_free)(how.req);
        rc = gdte_ipo_fail(c->comm, c->fn, GDTE_ERR_NO_MEMORY);
        ctx_free(c);
        return rc;
    }
    if (!r) {
        /* The operation is in flight on our mirrors: they must outlive it, so wait here. */
        MPI_Status st;
        rc = IPO_NEXT(Wait)(how.req, &st);
        return red_complete(c, rc, (gdte_red_how_t){.req = NULL});
    }
    gdte_coll_req_insert(r, *how.req, c->comm, persistent, red_start_req, red_finish_req, red_fini_req, c);
    return MPI_SUCCESS;
}

/* ---- communicator facts; a failed query sends the call to the MPI as it is, which reports
 * the bad communicator ---- */
typedef struct comm_facts {
    int inter, rank, size;
} comm_facts_t;

static int facts_of(MPI_Comm comm, comm_facts_t *f)
{
    if (comm == MPI_COMM_NULL) return 0;
    return PMPI_Comm_test_inter(comm, &f->inter) == MPI_SUCCESS && PMPI_Comm_rank(comm, &f->rank) == MPI_SUCCESS &&
           PMPI_Comm_size(comm, &f->size) == MPI_SUCCESS;
}

/* A blocking call's node path first (interpose_reduce_node.c): 1 when it carried the call. */
static int red_node_first(gdte_red_node_call_t a, gdte_red_how_t how, int *rc_p)
{
    if (how.req || how.init != GDTE_PINIT_NONE || !gdte_red_node_possible()) return 0;
    if (a.sbuf == a.rbuf && a.sbuf != MPI_IN_PLACE) return 0; /* aliased: the MPI judges it (red_ctx_t.alias) */
    return gdte_red_node(&a, rc_p);
}

/* ---- the calls: each tries the node path (blocking forms), else stages what the MPI
 * touches, calls the MPI on the mirrors, completes ---- */
#define RED_FN(x, ix)                                                      \
    static const char *const names[4] = GDTE_PINIT_NAMES(x, ix);          \
    const char *fn = gdte_pinit_name(names, how.init, how.req)

int gdte_red_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm,
                    gdte_red_how_t how)
{
    RED_FN("Reduce", "Ireduce");
    int nrc;
    if (red_node_first((gdte_red_node_call_t){fn, GDTE_RN_REDUCE, sbuf, rbuf, count, NULL, dt, op, root, comm}, how,
                       &nrc))
        return nrc;
    comm_facts_t f;
    red_ctx_t *c = NULL;
    if (count > 0 && facts_of(comm, &f)) {
        int64_t s_in = 0, r_in = 0, r_out = 0;
        if (f.inter) {
            if (root == MPI_ROOT) r_out = count;
            else if (root != MPI_PROC_NULL) s_in = count;
        } else {
            s_in = count;
            if (f.rank == root) {
                r_out = count;
                if (sbuf == MPI_IN_PLACE) r_in = count;
            }
        }
        int rc = red_prepare(fn, comm, dt, sbuf, s_in, rbuf, r_in, r_out, how, &c);
        if (rc != MPI_SUCCESS) return rc;
    }
    int rc = RED_CALL(how, Reduce, Ireduce, side_arg(c, 0, sbuf), side_arg(c, 1, rbuf), count, dt, op, root);
    return red_complete(c, rc, how);
}

int gdte_red_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                       gdte_red_how_t how)
{
    RED_FN("Allreduce", "Iallreduce");
    int nrc;
    if (red_node_first((gdte_red_node_call_t){fn, GDTE_RN_ALLREDUCE, sbuf, rbuf, count, NULL, dt, op, 0, comm}, how,
                       &nrc))
        return nrc;
    red_ctx_t *c = NULL;
    if (count > 0) {
        int rc = red_prepare(fn, comm, dt, sbuf, count, rbuf, sbuf == MPI_IN_PLACE ? count : 0, count, how, &c);
        if (rc != MPI_SUCCESS) return rc;
    }
    int rc = RED_CALL(how, Allreduce, Iallreduce, side_arg(c, 0, sbuf), side_arg(c, 1, rbuf), count, dt, op);
    return red_complete(c, rc, how);
}

int gdte_red_reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype dt, MPI_Op op,
                            MPI_Comm comm, gdte_red_how_t how)
{
    RED_FN("Reduce_scatter", "Ireduce_scatter");
    int nrc;
    if (red_node_first((gdte_red_node_call_t){fn, GDTE_RN_REDUCE_SCATTER, sbuf, rbuf, 0, rcounts, dt, op, 0, comm},
                       how, &nrc))
        return nrc;
    comm_facts_t f;
    red_ctx_t *c = NULL;
    if (rcounts && facts_of(comm, &f)) {
        int64_t total = 0;
        int ok = 1;
        for (int i = 0; i < f.size; i++) {
            if (rcounts[i] < 0) ok = 0; /* the MPI reports it */
            total += rcounts[i] > 0 ? rcounts[i] : 0;
        }
        int64_t mine = rcounts[f.rank] > 0 ? rcounts[f.rank] : 0;
        if (ok) {
            int rc = red_prepare(fn, comm, dt, sbuf, total, rbuf, sbuf == MPI_IN_PLACE ? total : 0, mine, how, &c);
            if (rc != MPI_SUCCESS) return rc;
        }
    }
    int rc = RED_CALL(how, Reduce_scatter, Ireduce_scatter, side_arg(c, 0, sbuf), side_arg(c, 1, rbuf), rcounts, dt, op);
    return red_complete(c, rc, how);
}

int gdte_red_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                                  gdte_red_how_t how)
{
    RED_FN("Reduce_scatter_block", "Ireduce_scatter_block");
    int nrc;
    if (red_node_first(
            (gdte_red_node_call_t){fn, GDTE_RN_REDUCE_SCATTER_BLOCK, sbuf, rbuf, rcount, NULL, dt, op, 0, comm}, how,
            &nrc))
        return nrc;
    comm_facts_t f;
    red_ctx_t *c = NULL;
    if (rcount > 0 && facts_of(comm, &f)) {
        /* n * recvcount input elements, n the size of this process's own group on an
         * intercommunicator too (the remote group's size times its recvcount is the same
         * number; this process's recvcount times the remote size is not). */
        int64_t total = (int64_t)rcount * f.size;
        int rc = red_prepare(fn, comm, dt, sbuf, total, rbuf, sbuf == MPI_IN_PLACE ? total : 0, rcount, how, &c);
        if (rc != MPI_SUCCESS) return rc;
    }
    int rc = RED_CALL(how, Reduce_scatter_block, Ireduce_scatter_block, side_arg(c, 0, sbuf), side_arg(c, 1, rbuf),
                      rcount, dt, op);
    return red_complete(c, rc, how);
}

/* Scan and Exscan: what they touch. */
static int scan_prepare(const char *fn, int exclusive, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                        MPI_Comm comm, gdte_red_how_t how, red_ctx_t **c_p)
{
    comm_facts_t f;
    *c_p = NULL;
    if (count <= 0 || !facts_of(comm, &f)) return MPI_SUCCESS;
    /* Exscan leaves rank 0's recvbuf undefined: the MPI does not write it, nor do we. */
    int64_t r_out = exclusive && f.rank == 0 ? 0 : count;
    return red_prepare(fn, comm, dt, sbuf, count, rbuf, sbuf == MPI_IN_PLACE ? count : 0, r_out, how, c_p);
}

int gdte_red_scan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                  gdte_red_how_t how)
{
    RED_FN("Scan", "Iscan");
    int nrc;
    if (red_node_first((gdte_red_node_call_t){fn, GDTE_RN_SCAN, sbuf, rbuf, count, NULL, dt, op, 0, comm}, how, &nrc))
        return nrc;
    red_ctx_t *c;
    int rc = scan_prepare(fn, 0, sbuf, rbuf, count, dt, comm, how, &c);
    if (rc != MPI_SUCCESS) return rc;
    rc = RED_CALL(how, Scan, Iscan, side_arg(c, 0, sbuf), side_arg(c, 1, rbuf), count, dt, op);
    return red_complete(c, rc, how);
}

int gdte_red_exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                    gdte_red_how_t how)
{
    RED_FN("Exscan", "Iexscan");
    int nrc;
    if (red_node_first((gdte_red_node_call_t){fn, GDTE_RN_EXSCAN, sbuf, rbuf, count, NULL, dt, op, 0, comm}, how, &nrc))
        return nrc;
    red_ctx_t *c;
    int rc = scan_prepare(fn, 1, sbuf, rbuf, count, dt, comm, how, &c);
    if (rc != MPI_SUCCESS) return rc;
    rc = RED_CALL(how, Exscan, Iexscan, side_arg(c, 0, sbuf), side_arg(c, 1, rbuf), count, dt, op);
    return red_complete(c, rc, how);
}

/* ---------------------------------------------------------------------------------------- */
/* MPI_Reduce_local by gdte's reduction: (op, datatype) as a rule of src/kernels/reduce.h,
 * where MPI allows the pair. */
typedef enum { CL_CINT, CL_FINT, CL_FLOAT, CL_BOOL, CL_BYTE, CL_PAIR } red_class_t;

static int map_op(MPI_Op op, gdte_rop_t *r)
{
    if (op == MPI_SUM) *r = GDTE_ROP_SUM;
    else if (op == MPI_PROD) *r = GDTE_ROP_PROD;
    else if (op == MPI_MIN) *r = GDTE_ROP_MIN;
    else if (op == MPI_MAX) *r = GDTE_ROP_MAX;
    else if (op == MPI_LAND) *r = GDTE_ROP_LAND;
    else if (op == MPI_LOR) *r = GDTE_ROP_LOR;
    else if (op == MPI_LXOR) *r = GDTE_ROP_LXOR;
    else if (op == MPI_BAND) *r = GDTE_ROP_BAND;
    else if (op == MPI_BOR) *r = GDTE_ROP_BOR;
    else if (op == MPI_BXOR) *r = GDTE_ROP_BXOR;
    else if (op == MPI_MINLOC) *r = GDTE_ROP_MINLOC;
    else if (op == MPI_MAXLOC) *r = GDTE_ROP_MAXLOC;
    else return 0;
    return 1;
}

/* A predefined datatype as an element type and the class of MPI's table of valid operations. */
static int map_named(MPI_Datatype dt, gdte_rtype_t *t, red_class_t *cl)
{
#define M(d, tt, c)     \
    if (dt == (d)) {    \
        *t = (tt);      \
        *cl = (c);      \
        return 1;       \
    }
#define SIGNED(d, T) M(d, sizeof(T) == 1 ? GDTE_RT_I8 : sizeof(T) == 2 ? GDTE_RT_I16 : sizeof(T) == 4 ? GDTE_RT_I32 : GDTE_RT_I64, CL_CINT)
#define UNSIGNED(d, T) M(d, sizeof(T) == 1 ? GDTE_RT_U8 : sizeof(T) == 2 ? GDTE_RT_U16 : sizeof(T) == 4 ? GDTE_RT_U32 : GDTE_RT_U64, CL_CINT)
    SIGNED(MPI_INT, int)
    SIGNED(MPI_LONG, long)
    SIGNED(MPI_LONG_LONG, long long)
    SIGNED(MPI_SHORT, short)
    SIGNED(MPI_SIGNED_CHAR, signed char)
    SIGNED(MPI_INT8_T, int8_t)
    SIGNED(MPI_INT16_T, int16_t)
    SIGNED(MPI_INT32_T, int32_t)
    SIGNED(MPI_INT64_T, int64_t)
    UNSIGNED(MPI_UNSIGNED, unsigned)
    UNSIGNED(MPI_UNSIGNED_LONG, unsigned long)
    UNSIGNED(MPI_UNSIGNED_LONG_LONG, unsigned long long)
    UNSIGNED(MPI_UNSIGNED_SHORT, unsigned short)
    UNSIGNED(MPI_UNSIGNED_CHAR, unsigned char)
    UNSIGNED(MPI_UINT8_T, uint8_t)
    UNSIGNED(MPI_UINT16_T, uint16_t)
    UNSIGNED(MPI_UINT32_T, uint32_t)
    UNSIGNED(MPI_UINT64_T, uint64_t)
    M(MPI_FLOAT, GDTE_RT_F32, CL_FLOAT)
    M(MPI_DOUBLE, GDTE_RT_F64, CL_FLOAT)
    M(MPI_C_BOOL, GDTE_RT_BOOL, CL_BOOL)
    M(MPI_BYTE, GDTE_RT_U8, CL_BYTE)
    M(MPI_FLOAT_INT, GDTE_RT_FLOAT_INT, CL_PAIR)
    M(MPI_DOUBLE_INT, GDTE_RT_DOUBLE_INT, CL_PAIR)
    M(MPI_LONG_INT, sizeof(long) == 8 ? GDTE_RT_LONG_INT : GDTE_RT_COUNT_, CL_PAIR)
    M(MPI_2INT, GDTE_RT_2INT, CL_PAIR)
    M(MPI_SHORT_INT, GDTE_RT_SHORT_INT, CL_PAIR)
    /* Fortran: the sizes are checked against MPI's below. */
    M(MPI_INTEGER, sizeof(MPI_Fint) == 4 ? GDTE_RT_I32 : GDTE_RT_I64, CL_FINT)
    M(MPI_REAL, GDTE_RT_F32, CL_FLOAT)
    M(MPI_DOUBLE_PRECISION, GDTE_RT_F64, CL_FLOAT)
#undef SIGNED
#undef UNSIGNED
#undef M
    return 0;
}

static int class_allows(red_class_t cl, gdte_rop_t op)
{
    switch (cl) {
    case CL_CINT: return op <= GDTE_ROP_BXOR;
    case CL_FINT: return op <= GDTE_ROP_MAX || (op >= GDTE_ROP_BAND && op <= GDTE_ROP_BXOR);
    case CL_FLOAT: return op <= GDTE_ROP_MAX;
    case CL_BOOL: return op == GDTE_ROP_LAND || op == GDTE_ROP_LOR || op == GDTE_ROP_LXOR;
    case CL_BYTE: return op >= GDTE_ROP_BAND && op <= GDTE_ROP_BXOR;
    case CL_PAIR: return op == GDTE_ROP_MINLOC || op == GDTE_ROP_MAXLOC;
    }
    return 0;
}

/* `dt` as an element type of gdte's reduction: predefined datatypes only. A derived datatype,
 * even a contiguous run of one predefined type, goes to the MPI, which decides whether a
 * predefined operation applies to it (Open MPI 4.1 refuses them all with MPI_ERR_OP, MPICH
 * accepts some): a call then behaves on device buffers as it does on host buffers. */
static int map_type(MPI_Datatype dt, gdte_rtype_t *t, red_class_t *cl)
{
    int ni, na, nd, comb, sz = 0;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS || comb != MPI_COMBINER_NAMED) return 0;
    if (!map_named(dt, t, cl) || *t >= GDTE_RT_COUNT_) return 0;
    /* The element is the C layout reduce.h assumes: MPI's size (a pair's: at most, padding
     * aside) and extent must agree with it. */
    MPI_Aint lb = 0, ext = 0;
    return PMPI_Type_size(dt, &sz) == MPI_SUCCESS && sz > 0 &&
           (*cl == CL_PAIR ? sz <= gdte_reduce_elem_size(*t) : sz == gdte_reduce_elem_size(*t)) &&
           PMPI_Type_get_extent(dt, &lb, &ext) == MPI_SUCCESS && lb == 0 && ext == gdte_reduce_elem_size(*t);
}

int gdte_red_rule(MPI_Op op, MPI_Datatype dt, gdte_rop_t *rop, gdte_rtype_t *rt)
{
    red_class_t cl;
    return map_op(op, rop) && map_type(dt, rt, &cl) && class_allows(cl, *rop) && gdte_reduce_supported(*rop, *rt);
}

/* One stream for the reduction kernels, made at first use (legacy default-stream work of the
 * application comes first: an event on the NULL stream). */
static gdte_stream_t red_stream;
static gdte_gpu_event_t red_ev;
static pthread_mutex_t red_lock = PTHREAD_MUTEX_INITIALIZER;

static gdte_status_t gpu_reduce_locked(gdte_rop_t rop, gdte_rtype_t rt, const void *in, void *inout, int64_t n)
{
    gdte_status_t st = gdte_coll_stream_after_app(&red_stream, &red_ev);
    if (st != GDTE_OK) return st;
    st = gdte_reduce_gpu(rop, rt, in, inout, n, red_stream);
    gdte_status_t s2 = gdte_gpu_stream_synchronize(red_stream);
    return st != GDTE_OK ? st : s2;
}

/* The reduction of n elements with `in` and `inout` of the kinds given (not both host). */
static gdte_status_t local_reduce(gdte_rop_t rop, gdte_rtype_t rt, const void *in, gdte_ipo_kind_t ik, void *inout,
                                  gdte_ipo_kind_t ok, int64_t n)
{
    int64_t bytes = n * gdte_reduce_elem_size(rt);
    /* Fake device memory is host memory: the host twin runs where the kernel would. */
    if ((ik == GDTE_IPO_FAKE || ik == GDTE_IPO_HOST) && (ok == GDTE_IPO_FAKE || ok == GDTE_IPO_HOST))
        return gdte_reduce_host(rop, rt, in, inout, n);
    gdte_status_t st;
    gdte_stage_t *tmp = NULL;
    if (ok == GDTE_IPO_HOST) {
        /* The result stays on the host: bring `in` over and reduce there. */
        if ((st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)bytes, &tmp)) != GDTE_OK) return st;
        st = gdte_gpu_memcpy(tmp->ptr, in, (size_t)bytes);
        if (st == GDTE_OK) st = gdte_reduce_host(rop, rt, tmp->ptr, inout, n);
        gdte_stage_release(tmp);
        return st;
    }
    pthread_mutex_lock(&red_lock);
    if (ik == GDTE_IPO_HOST) {
        if ((st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, (size_t)bytes, &tmp)) == GDTE_OK &&
            (st = gdte_gpu_memcpy(tmp->ptr, in, (size_t)bytes)) == GDTE_OK)
            st = gpu_reduce_locked(rop, rt, tmp->ptr, inout, n);
    } else {
        st = gpu_reduce_locked(rop, rt, in, inout, n);
    }
    pthread_mutex_unlock(&red_lock);
    if (tmp) gdte_stage_release(tmp);
    return st;
}

int gdte_red_reduce_local(const void *in, void *inout, int count, MPI_Datatype dt, MPI_Op op)
{
    static const char fn[] = "MPI_Reduce_local";
    if (count <= 0 || !red_possible()) return RED_NEXT(Reduce_local)(in, inout, count, dt, op);
    gdte_ipo_kind_t ik = kind_of(in, count, dt), ok = kind_of(inout, count, dt);
    if (ik == GDTE_IPO_HOST && ok == GDTE_IPO_HOST) return RED_NEXT(Reduce_local)(in, inout, count, dt, op);
    if (ik == GDTE_IPO_MIXED || ok == GDTE_IPO_MIXED) return gdte_ipo_fail(MPI_COMM_WORLD, fn, GDTE_ERR_MEMORY_KIND);
    gdte_rop_t rop;
    gdte_rtype_t rt;
    red_class_t cl;
    if (map_op(op, &rop) && map_type(dt, &rt, &cl) && class_allows(cl, rop) && gdte_reduce_supported(rop, rt)) {
        gdte_status_t st = local_reduce(rop, rt, in, ik, inout, ok, (int64_t)count);
        if (st != GDTE_OK) return gdte_ipo_fail(MPI_COMM_WORLD, fn, st);
        n_kernels++;
        gdte_debug("%s: %d element(s) reduced by gdte (%s)", fn, count,
                   ik == GDTE_IPO_FAKE || ok == GDTE_IPO_FAKE ? "host twin, fake device" : "GPU kernel");
        return MPI_SUCCESS;
    }
    /* Any other operation or datatype: the MPI's own, on device memory when it reads it,
     * else on host mirrors. */
    if (gdte_ipo_gpu_aware()) return RED_NEXT(Reduce_local)(in, inout, count, dt, op);
    const gdte_red_how_t blocking = {.req = NULL};
    red_ctx_t *c = NULL;
    int rc = red_prepare(fn, MPI_COMM_WORLD, dt, in, count, inout, count, count, blocking, &c);
    if (rc != MPI_SUCCESS) return rc;
    rc = RED_NEXT(Reduce_local)(side_arg(c, 0, in), side_arg(c, 1, inout), count, dt, op);
    return red_complete(c, rc, blocking);
}
