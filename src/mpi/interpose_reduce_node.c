/*
 * interpose_reduce_node.c: blocking reductions on device buffers GPU to GPU within the node
 * (interpose_reduce.h, gdte_red_node). Reduce, Allreduce, Reduce_scatter(_block), Scan and
 * Exscan with a predefined operation on a predefined datatype gdte has a rule for
 * (src/kernels/reduce.h), on an intracommunicator whose processes are all framing peers
 * (gdte_ipo_node_comm_local), every buffer device memory, the vector at least
 * GDTE_MPI_REDUCE_NODE_MIN bytes:
 *
 *   1. each process copies its input vector into device staging of the interposer's pool,
 *      whose IPC mapping its peers keep from call to call (the application's own buffers are
 *      never mapped by another process: a mapping that outlived them would make the GPU runtime
 *      refuse the application's own IPC mappings of memory that reuses them), and offers it
 *      with one MPI_Allgather of records, which is also the agreement: a process that cannot
 *      take part (a host buffer, no memory) says so there and every process goes the MPI's way;
 *   2. phase one: each process reduces its slice of the vector from every process's staging
 *      by one kernel with all the inputs (gdte_reduce_gpu_n: each input read once, the result
 *      written once, in rank order, so every process of an Allreduce gets the same bits):
 *      Allreduce and Reduce slice the vector evenly and write the slice back into their own
 *      staging; Reduce_scatter's slices are the receive counts, written to the receive buffer;
 *      Scan and Exscan reduce the whole vector of ranks 0..r (0..r-1) into the receive buffer;
 *   3. a one-integer MPI_Allreduce of the error state (every process's slice done, or who
 *      failed: all return the same error class);
 *   4. phase two (Allreduce everywhere, Reduce at the root): each slice copied from its
 *      owner's staging into the receive buffer; then the same exchange of the error state,
 *      after which no process reads another's staging and each gives it back to its pool.
 *
 * In the fake-device mode the peers' staging is read with process_vm_readv and the host twin
 * of the kernel reduces, the same steps. Order of operations: MPI's canonical order (rank 0's
 * operand first), the same for floating point on every process. Every process of the job must
 * agree on GDTE_MPI_COLL_NODE and GDTE_MPI_REDUCE_NODE_MIN (the decision to exchange records
 * is taken before any message).
 */
#define _GNU_SOURCE
#include <sys/uio.h>
#include <unistd.h>
#include "interpose_reduce.h"
#include "import.h"
#include "staging.h"
#include "kernels/reduce.h"
#include "util/util.h"

/* ---- counters (gdte_mpi_reduce_counter) ---- */
static _Atomic int64_t n_node;       /* reductions carried GPU to GPU within the node */
static _Atomic int64_t n_node_bytes; /* bytes of the vectors they reduced (per process) */

int64_t gdte_red_node_counter(const char *name)
{
    if (!strcmp(name, "reduce_node")) return n_node;
    if (!strcmp(name, "reduce_node_bytes")) return n_node_bytes;
    return -1;
}

/* What a process offers: its staging (the input vector, and after phase one its slice of the
 * result), and whether it takes part. */
typedef struct rn_rec {
    uint64_t addr;  /* the staging there */
    uint64_t rbase; /* IPC: the base of its allocation */
    int64_t pid;    /* fake device: the process */
    int32_t world;  /* rank in MPI_COMM_WORLD */
    int32_t ok;     /* 1: takes part */
    int32_t keep;   /* pooled staging: its mapping may stay */
    int32_t pad;
    gdte_gpu_ipc_handle_t h;
} rn_rec_t;

/* One stream for the node reductions, after the application's legacy default-stream work. */
static gdte_stream_t rn_stream;
static gdte_gpu_event_t rn_ev;
static pthread_mutex_t rn_lock = PTHREAD_MUTEX_INITIALIZER;

static int rn_error(MPI_Comm comm, const char *fn, int code, const char *why)
{
    gdte_error("%s: GPU to GPU within the node: %s", fn, why);
    PMPI_Comm_call_errhandler(comm, code);
    return code;
}

/* The local facts every member sees alike (the MPI requires the same count, datatype, operation
 * and root everywhere, the knobs are job-wide): 1 when the call may take the node path. */
static int rn_eligible(const gdte_red_node_call_t *a, int64_t *total_p, gdte_rop_t *rop, gdte_rtype_t *rt, int *p_p,
                       int *me_p)
{
    /* Cheapest first: every blocking reduction of a process with a GPU comes here. */
    int sz = 0, p = 0, me = 0, inter = 0;
    if (!gdte_knob(GDTE_KNOB_MPI_COLL_NODE) || a->comm == MPI_COMM_NULL || a->count < 0) return 0;
    if (PMPI_Type_size(a->dt, &sz) != MPI_SUCCESS || sz <= 0) return 0;
    int64_t min = gdte_knob(GDTE_KNOB_MPI_REDUCE_NODE_MIN);
    int scatter = a->kind == GDTE_RN_REDUCE_SCATTER || a->kind == GDTE_RN_REDUCE_SCATTER_BLOCK;
    if (!scatter && (int64_t)a->count * sz < min) return 0;
    if (PMPI_Comm_test_inter(a->comm, &inter) != MPI_SUCCESS || inter) return 0;
    if (PMPI_Comm_size(a->comm, &p) != MPI_SUCCESS || PMPI_Comm_rank(a->comm, &me) != MPI_SUCCESS || p < 2) return 0;
    int64_t total = a->count;
    if (a->kind == GDTE_RN_REDUCE_SCATTER_BLOCK) total = (int64_t)a->count * p;
    if (a->kind == GDTE_RN_REDUCE_SCATTER) {
        if (!a->rcounts) return 0;
        total = 0;
        for (int q = 0; q < p; q++) {
            if (a->rcounts[q] < 0) return 0; /* the MPI reports it */
            total += a->rcounts[q];
        }
    }
    if (a->kind == GDTE_RN_REDUCE && (a->root < 0 || a->root >= p)) return 0;
    if (total <= 0 || total * sz < min) return 0;
    /* A rule of gdte's (predefined operation and datatype, extent == the element's size), and
     * elements that are the whole of their extent: a pair type with a gap is left to the MPI,
     * whose result leaves the gap alone. */
    if (!gdte_red_rule(a->op, a->dt, rop, rt) || sz != gdte_reduce_elem_size(*rt)) return 0;
    if (!gdte_ipo_node_comm_local(a->comm)) return 0;
    *total_p = total;
    *p_p = p;
    *me_p = me;
    return 1;
}

/* This process's slice of the vector: its first element and count. */
static void rn_slice(const gdte_red_node_call_t *a, int p, int q, int64_t total, int64_t *lo, int64_t *n)
{
    if (a->kind == GDTE_RN_REDUCE_SCATTER || a->kind == GDTE_RN_REDUCE_SCATTER_BLOCK) {
        int64_t at = 0;
        for (int i = 0; i < q; i++) at += a->kind == GDTE_RN_REDUCE_SCATTER ? a->rcounts[i] : a->count;
        *lo = at;
        *n = a->kind == GDTE_RN_REDUCE_SCATTER ? a->rcounts[q] : a->count;
        return;
    }
    int64_t base = total / p, extra = total % p;
    *lo = q * base + (q < extra ? q : extra);
    *n = base + (q < extra);
}

/* Whether this process's buffers let it take part: device memory of the mode's kind for what
 * the call reads and writes. */
static int rn_buffers_ok(const gdte_red_node_call_t *a, int p, int me, int64_t total, int64_t *out_n)
{
    gdte_ipo_kind_t want = gdte_ipo_node_fake() ? GDTE_IPO_FAKE : GDTE_IPO_DEVICE;
    int inplace = a->sbuf == MPI_IN_PLACE;
    /* MPI_IN_PLACE is for the root of Reduce only; elsewhere in Reduce the MPI reports it. */
    if (inplace && a->kind == GDTE_RN_REDUCE && me != a->root) return 0;
    if (a->kind == GDTE_RN_REDUCE_SCATTER || a->kind == GDTE_RN_REDUCE_SCATTER_BLOCK) {
        int64_t lo, n;
        rn_slice(a, p, me, total, &lo, &n);
        *out_n = n;
    } else if (a->kind == GDTE_RN_REDUCE) {
        *out_n = me == a->root ? total : 0;
    } else if (a->kind == GDTE_RN_EXSCAN) {
        *out_n = me == 0 ? 0 : total;
    } else {
        *out_n = total;
    }
    const void *in = inplace ? a->rbuf : a->sbuf;
    if (gdte_red_kind_of(in, total, a->dt) != want) return 0;
    if (*out_n > 0 && gdte_red_kind_of(a->rbuf, *out_n, a->dt) != want) return 0;
    return 1;
}

/* n bytes of process `r`'s staging from byte `off` into dst (local). */
static gdte_status_t rn_fake_read(const rn_rec_t *r, int64_t off, void *dst, int64_t n)
{
    if (n <= 0) return GDTE_OK;
    struct iovec l = {dst, (size_t)n};
    struct iovec rm = {(void *)(uintptr_t)(r->addr + (uint64_t)off), (size_t)n};
    return process_vm_readv((pid_t)r->pid, &l, 1, &rm, 1, 0) == (ssize_t)n ? GDTE_OK : GDTE_ERR_TRANSPORT;
}

/* Phase one: out[0..n) = op over the inputs `first`..`first+nin-1` (records), each from
 * element lo of their staging. */
static gdte_status_t rn_reduce(const rn_rec_t *recs, char *const *peer, int first, int nin, int64_t lo, int64_t n,
                               int64_t esz, gdte_rop_t rop, gdte_rtype_t rt, void *out)
{
    if (nin <= 0 || n <= 0) return GDTE_OK;
    gdte_status_t st = GDTE_OK;
    const void **in = calloc((size_t)nin, sizeof *in);
    if (!in) return GDTE_ERR_NO_MEMORY;
    if (gdte_ipo_node_fake()) {
        /* The inputs read into buffers of this process, then the host twin. */
        char *tmp = malloc((size_t)(nin * n * esz));
        for (int k = 0; tmp && k < nin && st == GDTE_OK; k++) {
            in[k] = tmp + k * n * esz;
            st = rn_fake_read(&recs[first + k], lo * esz, tmp + k * n * esz, n * esz);
        }
        if (!tmp) st = GDTE_ERR_NO_MEMORY;
        if (st == GDTE_OK) st = gdte_reduce_host_n(rop, rt, in, nin, out, n);
        free(tmp);
    } else {
        for (int k = 0; k < nin; k++) in[k] = peer[first + k] + lo * esz;
        pthread_mutex_lock(&rn_lock);
        st = gdte_reduce_gpu_n(rop, rt, in, nin, out, n, rn_stream);
        gdte_status_t s2 = gdte_gpu_stream_synchronize(rn_stream);
        pthread_mutex_unlock(&rn_lock);
        if (st == GDTE_OK) st = s2;
    }
    free(in);
    return st;
}

/* Phase two: every slice from its owner's staging into rbuf. */
static gdte_status_t rn_gather(const gdte_red_node_call_t *a, const rn_rec_t *recs, char *const *peer, int p,
                               int64_t total, int64_t esz, char *rbuf)
{
    gdte_status_t st = GDTE_OK;
    if (!gdte_ipo_node_fake()) pthread_mutex_lock(&rn_lock);
    for (int q = 0; q < p && st == GDTE_OK; q++) {
        int64_t lo, n;
        rn_slice(a, p, q, total, &lo, &n);
        if (n <= 0) continue;
        if (gdte_ipo_node_fake()) st = rn_fake_read(&recs[q], lo * esz, rbuf + lo * esz, n * esz);
        else st = gdte_gpu_memcpy_async(rbuf + lo * esz, peer[q] + lo * esz, (size_t)(n * esz), rn_stream);
    }
    if (!gdte_ipo_node_fake()) {
        gdte_status_t s2 = gdte_gpu_stream_synchronize(rn_stream);
        pthread_mutex_unlock(&rn_lock);
        if (st == GDTE_OK) st = s2;
    }
    return st;
}

/* The error state of every member, agreed: GDTE_OK, or the first failure's status (the one of
 * the lowest status code: the same on every member). Also a barrier. */
static int rn_agree(MPI_Comm comm, gdte_status_t *st)
{
    int mine = (int)*st, worst = 0;
    int rc = PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MIN, comm);
    if (rc == MPI_SUCCESS) *st = (gdte_status_t)worst;
    return rc;
}

int gdte_red_node(const gdte_red_node_call_t *a, int *rc_p)
{
    int64_t total = 0, out_n = 0;
    gdte_rop_t rop;
    gdte_rtype_t rt;
    int p = 0, me = 0;
    if (!rn_eligible(a, &total, &rop, &rt, &p, &me)) return 0;
    int fake = gdte_ipo_node_fake();
    int64_t esz = gdte_reduce_elem_size(rt), bytes = total * esz;
    const void *in = a->sbuf == MPI_IN_PLACE ? a->rbuf : a->sbuf;
    char *rbuf = a->rbuf;

    /* 1. Staging with this process's input, offered (or not) to every member. */
    rn_rec_t mine, *recs = calloc((size_t)p, sizeof *recs);
    char **peer = calloc((size_t)p, sizeof *peer);
    memset(&mine, 0, sizeof mine);
    mine.world = gdte_ipo_node_world_rank();
    mine.pid = (int64_t)getpid();
    gdte_stage_t *stg = NULL;
    gdte_status_t st = GDTE_OK;
    int ok = recs && peer && rn_buffers_ok(a, p, me, total, &out_n);
    if (ok && gdte_stage_acquire(GDTE_STAGE_DEVICE, fake, (size_t)bytes, &stg) != GDTE_OK) ok = 0;
    if (ok && fake) {
        memcpy(stg->ptr, in, (size_t)bytes);
    } else if (ok) {
        int64_t off = 0;
        pthread_mutex_lock(&rn_lock);
        st = gdte_coll_stream_after_app(&rn_stream, &rn_ev);
        if (st == GDTE_OK) st = gdte_gpu_memcpy_async(stg->ptr, in, (size_t)bytes, rn_stream);
        if (st == GDTE_OK) st = gdte_gpu_stream_synchronize(rn_stream);
        pthread_mutex_unlock(&rn_lock);
        if (st == GDTE_OK) st = gdte_ipo_node_export(stg->ptr, &mine.h, &off, &mine.rbase);
        if (st != GDTE_OK) {
            gdte_debug("%s: the node path declined here: %s", a->fn, gdte_status_string(st));
            ok = 0;
        }
    }
    if (ok) {
        mine.addr = (uint64_t)(uintptr_t)stg->ptr;
        mine.keep = !stg->overflow;
    }
    mine.ok = ok;
    rn_rec_t dummy;
    int rc = PMPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, recs ? recs : &dummy, (int)sizeof mine, MPI_BYTE,
                            a->comm);
    int all = rc == MPI_SUCCESS && recs;
    for (int q = 0; all && q < p; q++) all = recs[q].ok;
    if (!all) {
        if (stg) gdte_stage_release(stg);
        free(recs);
        free(peer);
        *rc_p = rc;
        return rc != MPI_SUCCESS;
    }

    /* The members' staging, mapped (kept from call to call for pooled staging). */
    for (int q = 0; !fake && q < p && st == GDTE_OK; q++) {
        void *mb = NULL;
        st = gdte_ipo_node_map(recs[q].world, recs[q].rbase, &recs[q].h, &mb);
        if (st == GDTE_OK) peer[q] = (char *)mb + (recs[q].addr - recs[q].rbase);
    }

    /* 2. Phase one. */
    int64_t lo = 0, n = 0;
    rn_slice(a, p, me, total, &lo, &n);
    if (st == GDTE_OK) {
        switch (a->kind) {
        case GDTE_RN_ALLREDUCE:
        case GDTE_RN_REDUCE:
            st = rn_reduce(recs, peer, 0, p, lo, n, esz, rop, rt, (char *)stg->ptr + lo * esz);
            break;
        case GDTE_RN_REDUCE_SCATTER:
        case GDTE_RN_REDUCE_SCATTER_BLOCK: st = rn_reduce(recs, peer, 0, p, lo, n, esz, rop, rt, rbuf); break;
        case GDTE_RN_SCAN: st = rn_reduce(recs, peer, 0, me + 1, 0, total, esz, rop, rt, rbuf); break;
        case GDTE_RN_EXSCAN: st = rn_reduce(recs, peer, 0, me, 0, total, esz, rop, rt, rbuf); break;
        }
    }
    /* 3. Every slice done (or the same error everywhere). */
    rc = rn_agree(a->comm, &st);
    /* 4. Phase two, and the last exchange after which no member reads another's staging. */
    int gather = a->kind == GDTE_RN_ALLREDUCE || (a->kind == GDTE_RN_REDUCE && me == a->root);
    int phase2 = a->kind == GDTE_RN_ALLREDUCE || a->kind == GDTE_RN_REDUCE;
    if (rc == MPI_SUCCESS && st == GDTE_OK && phase2) {
        if (gather) st = rn_gather(a, recs, peer, p, total, esz, rbuf);
        rc = rn_agree(a->comm, &st);
    }
    for (int q = 0; !fake && q < p; q++)
        if (peer[q] && !recs[q].keep) gdte_ipo_node_unmap(recs[q].world, recs[q].rbase);
    gdte_stage_release(stg);
    free(recs);
    free(peer);
    if (rc == MPI_SUCCESS && st == GDTE_OK) {
        n_node++;
        n_node_bytes += bytes;
        gdte_debug("%s: %lld bytes reduced GPU to GPU within the node (%d processes)", a->fn, (long long)bytes, p);
    } else if (rc == MPI_SUCCESS) {
        int code = gdte_mpi_status_to_mpi_error(st);
        rc = rn_error(a->comm, a->fn, code == MPI_SUCCESS ? MPI_ERR_INTERN : code, gdte_status_string(st));
    }
    *rc_p = rc;
    return 1;
}
