/*
 * One-sided communication with device memory, under an MPI that cannot read it.
 *
 * Origin side (any window): a device origin, result or compare buffer of MPI_Put, MPI_Get,
 * MPI_Accumulate, MPI_Get_accumulate, MPI_Fetch_and_op, MPI_Compare_and_swap and their
 * request-based forms is given to the MPI as a host mirror laid out as the application's
 * buffer (gdte_ipo_mirror_make: the bytes the datatype touches, copied in by gdte's pack). The
 * mirror lives until the operation completes at the origin: at the synchronisation that
 * completes it (MPI_Win_fence, MPI_Win_complete, MPI_Win_unlock[_all], MPI_Win_flush[_local][_all]
 * for its target, MPI_Win_free) or at the completion of its request (MPI_Wait, MPI_Test, ...),
 * whichever comes first; a result buffer (MPI_Get, the result of the accumulating reads) is then
 * copied back, only the bytes its datatype touches.
 *
 * Target side (MPI_Win_create over device memory): the MPI's window is host memory of the
 * same size (the public copy), and the application's device memory is the private copy, the
 * MPI_WIN_SEPARATE memory model of MPI-3 (11.4): MPI_Win_get_attr reports MPI_WIN_SEPARATE
 * and the application's base address. The two copies are synchronised where that model says
 * they are (rma_merge): MPI_Win_fence, MPI_Win_post (before exposing), MPI_Win_wait and a
 * successful MPI_Win_test (after), MPI_Win_sync, MPI_Win_lock and MPI_Win_unlock of the
 * process's own rank, MPI_Win_lock_all and MPI_Win_unlock_all, and MPI_Win_free (after). A merge
 * keeps a third copy, the state both agreed on at the last merge: bytes the application
 * changed since then go to the public copy, bytes the MPI's peers changed go to the device, so
 * neither side's updates overwrite the other's (MPI makes concurrent conflicting updates of one
 * location erroneous). After the merge in MPI_Win_fence every process of the window passes a
 * barrier, so no peer's next epoch reads the public copy before the local changes are in it.
 *
 * Carried only when a device buffer is possible (a GPU, or the fake device) and the MPI is not
 * GPU-aware; under a GPU-aware MPI every call goes to it as it is. Whether a window is gdte's is
 * decided collectively at MPI_Win_create (one allreduce over the window's communicator), so the
 * fence barrier is taken by every process or by none. Memory partly host and partly device is
 * MPI_ERR_BUFFER (on every process of an MPI_Win_create). Dynamic windows (MPI_Win_attach of
 * device memory) stay refused (refuse.h): a peer's displacement is an address in the
 * application's memory, which the host copy cannot have.
 *
 * Thread safety: one lock guards the window records and their pending operations; it is never
 * held across a call into the MPI.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <uthash.h>
#include "interpose.h"
#include "interpose_coll.h"
#include "import.h"
#include "gpu/gpu.h"
#include "util/util.h"

/* clang-format off */
#define GDTE_RMA_LIST(X) \
    X(MPI_Put) X(MPI_Rput) X(MPI_Get) X(MPI_Rget) X(MPI_Accumulate) X(MPI_Raccumulate) X(MPI_Get_accumulate) \
    X(MPI_Rget_accumulate) X(MPI_Fetch_and_op) X(MPI_Compare_and_swap) X(MPI_Win_create) X(MPI_Win_free) \
    X(MPI_Win_fence) X(MPI_Win_lock) X(MPI_Win_unlock) X(MPI_Win_lock_all) X(MPI_Win_unlock_all) X(MPI_Win_flush) \
    X(MPI_Win_flush_all) X(MPI_Win_flush_local) X(MPI_Win_flush_local_all) X(MPI_Win_complete) \
    X(MPI_Win_post) X(MPI_Win_wait) X(MPI_Win_test) X(MPI_Win_sync) X(MPI_Win_get_attr)
/* clang-format on */

/* ---- the next definitions in the chain (see interpose_core.c for why not PMPI_ directly) ---- */
static struct {
#define GDTE_X_RMA_FIELD(name) __typeof__(&P##name) name;
    GDTE_RMA_LIST(GDTE_X_RMA_FIELD)
#undef GDTE_X_RMA_FIELD
} rma_next;

__attribute__((constructor)) static void rma_resolve_next(void)
{
#define GDTE_X_RMA_RESOLVE(name)                                          \
    rma_next.name = (__typeof__(rma_next.name))dlsym(RTLD_NEXT, #name); \
    if (!rma_next.name) rma_next.name = P##name;
    GDTE_RMA_LIST(GDTE_X_RMA_RESOLVE)
#undef GDTE_X_RMA_RESOLVE
}
#define NEXT(name) (rma_next.MPI_##name)

static _Atomic int64_t n_windows, n_ops, n_merges;
/* Device windows in rma_wins now: MPI_Barrier's merge returns at once while there are none. */
static _Atomic int live_dev_windows;

int64_t gdte_ipo_rma_counter(const char *name)
{
    if (!strcmp(name, "rma_windows")) return n_windows;
    if (!strcmp(name, "rma_ops")) return n_ops;
    if (!strcmp(name, "rma_merges")) return n_merges;
    return -1;
}

/* ---- whether gdte carries one-sided calls at all ---- */
/* Decided at the first call after MPI_Init, as the refused calls decide (shims_refuse.c):
 * 1 carry, 2 pass every call to the MPI. */
static _Atomic int rma_mode;

static int rma_on(void)
{
    if (!gdte_ipo_on()) return 0;
    int m = atomic_load_explicit(&rma_mode, memory_order_relaxed);
    if (__builtin_expect(m == 0, 0)) {
        int possible = gdte_gpu_available() || gdte_knob(GDTE_KNOB_FAKE_DEVICE);
        m = possible && !gdte_ipo_gpu_aware() ? 1 : 2;
        atomic_store_explicit(&rma_mode, m, memory_order_relaxed);
    }
    return m == 1;
}

/* ---- records ---- */
typedef struct rma_win rma_win_t;

/* An operation whose origin-side buffers are host mirrors, until it completes at the origin. */
typedef struct rma_op {
    struct rma_op *next;
    rma_win_t *w;        /* the window whose list holds it; NULL once unlinked */
    int target;          /* rank in the window's group */
    int nm;
    gdte_ipo_mirror_t m[3];
    unsigned char out[3]; /* copied back at completion (result buffers) */
    int done;            /* completed: results copied back, mirrors freed */
    int has_req;         /* a request record (its fini) frees the struct */
    int rc;              /* the completion's error, for the request */
} rma_op_t;

struct rma_win {
    MPI_Win win;
    UT_hash_handle hh;
    int any_dev;         /* some process's window memory is device memory (collective) */
    int dev;             /* this process's is: pub is the MPI's window, user the device copy */
    int fake;
    int rank;
    void *user;
    size_t size;
    unsigned char *pub, *snap, *tmp;
    MPI_Comm comm;       /* a duplicate of the window's communicator (any_dev): the fence barrier */
    rma_op_t *ops;
    pthread_mutex_t mlock; /* one merge at a time (threads synchronising one window at once) */
};

static pthread_mutex_t rma_lock = PTHREAD_MUTEX_INITIALIZER;
static rma_win_t *rma_wins;
static int rma_model_separate = MPI_WIN_SEPARATE;

static rma_win_t *rma_find_locked(MPI_Win win)
{
    rma_win_t *w = NULL;
    HASH_FIND(hh, rma_wins, &win, sizeof win, w);
    return w;
}

static rma_win_t *rma_find(MPI_Win win)
{
    pthread_mutex_lock(&rma_lock);
    rma_win_t *w = rma_find_locked(win);
    pthread_mutex_unlock(&rma_lock);
    return w;
}

static int rma_fail(MPI_Win win, const char *fn, const char *what, gdte_status_t st)
{
    int code = st == GDTE_ERR_MEMORY_KIND ? MPI_ERR_BUFFER : gdte_mpi_status_to_mpi_error(st);
    if (code == MPI_SUCCESS) code = MPI_ERR_INTERN;
    if (st == GDTE_ERR_MEMORY_KIND)
        gdte_error("%s: %s is partly host and partly device memory (MPI_ERR_BUFFER)", fn, what);
    else
        gdte_error("%s: %s on device memory failed: %s (%s)", fn, what, gdte_status_string(st), gdte_status_name(st));
    if (win != MPI_WIN_NULL) PMPI_Win_call_errhandler(win, code);
    else PMPI_Comm_call_errhandler(MPI_COMM_WORLD, code);
    return code;
}

/* The kind of `n` bytes from `b` (their first and last byte beyond an int's count). */
static gdte_ipo_kind_t rma_span_kind(const void *b, MPI_Aint n)
{
    if (!b || n <= 0) return GDTE_IPO_HOST;
    if (n <= INT_MAX) return gdte_ipo_buf_kind(b, (int)n, MPI_BYTE);
    gdte_ipo_kind_t a = gdte_ipo_buf_kind(b, 1, MPI_BYTE);
    gdte_ipo_kind_t z = gdte_ipo_buf_kind((const char *)b + n - 1, 1, MPI_BYTE);
    return a == z ? a : GDTE_IPO_MIXED;
}

/* ---- the two copies of a device window ---- */
/* Synchronise the public copy (pub, the MPI's) and the private one (the application's device
 * memory) against snap, the state both held at the last merge. Caller holds the window's mlock
 * (not rma_lock). */
static gdte_status_t rma_merge(rma_win_t *w)
{
    if (!w->dev || w->size == 0) return GDTE_OK;
    gdte_status_t st = gdte_ipo_bytes(w->tmp, w->user, w->size, w->fake);
    if (st != GDTE_OK) return st;
    n_merges++;
    enum { B = 4096 };
    unsigned char *T = w->tmp, *S = w->snap;
    volatile unsigned char *H = w->pub; /* peers' operations may still be landing (passive target) */
    size_t up_lo = 0, up_hi = 0;       /* a run of blocks to write back to the device */
    for (size_t off = 0; off < w->size; off += B) {
        size_t n = w->size - off < B ? w->size - off : B;
        int local = memcmp(T + off, S + off, n) != 0;
        int remote = memcmp((const void *)(H + off), S + off, n) != 0;
        if (!local && !remote) continue;
        int dirty = 0;
        /* Byte by byte, so that a block's bytes neither side changed are never rewritten. */
        for (size_t i = off; i < off + n; i++) {
            unsigned char t = T[i], s = S[i], h = H[i];
            if (t != s) {
                H[i] = t;
                S[i] = t;
            } else if (h != s) {
                T[i] = h;
                S[i] = h;
                dirty = 1;
            }
        }
        if (!dirty) continue;
        if (up_hi == off) {
            up_hi = off + n;
            continue;
        }
        if (up_hi > up_lo && (st = gdte_ipo_bytes((char *)w->user + up_lo, T + up_lo, up_hi - up_lo, w->fake)) != GDTE_OK)
            return st;
        up_lo = off, up_hi = off + n;
    }
    if (up_hi > up_lo) st = gdte_ipo_bytes((char *)w->user + up_lo, T + up_lo, up_hi - up_lo, w->fake);
    return st;
}

static int rma_merge_call(rma_win_t *w, const char *fn)
{
    if (!w->dev) return MPI_SUCCESS;
    pthread_mutex_lock(&w->mlock);
    gdte_status_t st = rma_merge(w);
    pthread_mutex_unlock(&w->mlock);
    return st == GDTE_OK ? MPI_SUCCESS : rma_fail(w->win, fn, "the window's memory", st);
}

/* MPI_Barrier (shims_sync.c) calls this before and after the MPI's barrier: every device window
 * of this process is merged. A barrier is no synchronisation of the separate model, but programs
 * written for the unified model (which the MPI underneath reports when gdte is not there) rely on
 * it: they read their window memory after a barrier that follows the peers' passive-target
 * epochs, and store into it before a barrier that precedes the peers' reads (MPICH's
 * compare_and_swap and lockcontention2 tests do both). A merge moves only what changed, and
 * merging at any time keeps both sides' updates, so it costs time, never correctness. */
int gdte_ipo_rma_barrier_merge(void)
{
    if (live_dev_windows == 0) return MPI_SUCCESS;
    pthread_mutex_lock(&rma_lock);
    unsigned n = 0;
    rma_win_t *w, *tmp, **dev = NULL;
    HASH_ITER(hh, rma_wins, w, tmp) n += w->dev != 0;
    if (n > 0 && (dev = malloc(n * sizeof *dev)) != NULL) {
        n = 0;
        HASH_ITER(hh, rma_wins, w, tmp) if (w->dev) dev[n++] = w;
    }
    pthread_mutex_unlock(&rma_lock);
    if (n > 0 && !dev) {
        gdte_error("MPI_Barrier: no host memory to list the device windows to merge");
        return MPI_ERR_NO_MEM;
    }
    int rc = MPI_SUCCESS;
    for (unsigned i = 0; i < n && rc == MPI_SUCCESS; i++) rc = rma_merge_call(dev[i], "MPI_Barrier");
    free(dev);
    return rc;
}

static void rma_win_release(rma_win_t *w)
{
    if (w->pub) munmap(w->pub, w->size);
    if (w->snap) munmap(w->snap, w->size);
    if (w->tmp) munmap(w->tmp, w->size);
    if (w->comm != MPI_COMM_NULL) PMPI_Comm_free(&w->comm);
    pthread_mutex_destroy(&w->mlock);
    free(w);
}

static unsigned char *rma_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- origin-side operations ---- */
/* Complete `op` (caller holds rma_lock): results copied back, mirrors freed. */
static void rma_op_complete(rma_op_t *op)
{
    if (op->done) return;
    op->done = 1;
    for (int i = 0; i < op->nm; i++) {
        if (op->out[i] && op->rc == MPI_SUCCESS) {
            /* (No error handler is called here, under the lock: the synchronisation call or
             * the request's completion raises op->rc.) */
            gdte_status_t st = gdte_ipo_mirror_out(&op->m[i], -1);
            if (st != GDTE_OK) {
                gdte_error("one-sided completion: copying the result back to device memory failed: %s (%s)",
                           gdte_status_string(st), gdte_status_name(st));
                op->rc = gdte_mpi_status_to_mpi_error(st);
                if (op->rc == MPI_SUCCESS) op->rc = MPI_ERR_INTERN;
            }
        }
        gdte_ipo_mirror_free(&op->m[i]);
    }
}

/* Complete the window's operations to `target` (-1: all). Returns the first error. */
static int rma_complete(rma_win_t *w, int target)
{
    int rc = MPI_SUCCESS;
    pthread_mutex_lock(&rma_lock);
    rma_op_t **pp = &w->ops;
    while (*pp) {
        rma_op_t *op = *pp;
        if (target >= 0 && op->target != target) {
            pp = &op->next;
            continue;
        }
        *pp = op->next;
        op->w = NULL;
        rma_op_complete(op);
        if (rc == MPI_SUCCESS) rc = op->rc;
        if (!op->has_req) free(op);
    }
    pthread_mutex_unlock(&rma_lock);
    return rc;
}

static int rma_req_finish(gdte_ipo_req_t *r, MPI_Status *st, int rc)
{
    (void)st;
    rma_op_t *op = r->ctx;
    if (!op) return rc;
    pthread_mutex_lock(&rma_lock);
    if (op->w) {
        rma_op_t **pp = &op->w->ops;
        while (*pp && *pp != op) pp = &(*pp)->next;
        if (*pp) *pp = op->next;
        op->w = NULL;
    }
    if (rc != MPI_SUCCESS && !op->done) op->rc = rc; /* nothing to copy back */
    rma_op_complete(op);
    int orc = op->rc;
    pthread_mutex_unlock(&rma_lock);
    return rc != MPI_SUCCESS ? rc : orc;
}

static void rma_req_fini(gdte_ipo_req_t *r)
{
    rma_op_t *op = r->ctx;
    if (!op) return;
    pthread_mutex_lock(&rma_lock);
    if (op->w) { /* freed before completing (MPI_Request_free): the window's synchronisation completes it */
        op->has_req = 0;
        op = NULL;
    }
    if (op) rma_op_complete(op); /* (already done by finish, unless the request never completed) */
    pthread_mutex_unlock(&rma_lock);
    free(op);
    r->ctx = NULL;
}

/* One buffer of an operation: in (the MPI reads it), out (the MPI writes it). */
typedef struct {
    const void *buf;
    int count;
    MPI_Datatype dt;
    int in, out;
    const char *what;
} rma_buf_t;

enum { RMA_PASS = -1 };

/* Whether the operation is gdte's (a device buffer among b[0..nb)): then *op_p with each
 * device buffer's mirror, and use[i] the pointer to give the MPI. Returns RMA_PASS, MPI_SUCCESS,
 * or an error already raised through the window's handler. */
static int rma_prepare(const char *fn, MPI_Win win, int target, const rma_buf_t *b, int nb, rma_op_t **op_p,
                       void **use)
{
    gdte_ipo_kind_t k[3];
    int any = 0;
    for (int i = 0; i < nb; i++) {
        use[i] = (void *)b[i].buf;
        k[i] = GDTE_IPO_HOST;
        if (!b[i].buf || b[i].count <= 0 || b[i].dt == MPI_DATATYPE_NULL || target == MPI_PROC_NULL) continue;
        k[i] = gdte_ipo_buf_kind(b[i].buf, b[i].count, b[i].dt);
        if (k[i] == GDTE_IPO_MIXED) return rma_fail(win, fn, b[i].what, GDTE_ERR_MEMORY_KIND);
        any |= k[i] != GDTE_IPO_HOST;
    }
    if (!any) return RMA_PASS;
    rma_op_t *op = calloc(1, sizeof *op);
    if (!op) return rma_fail(win, fn, "a mirror", GDTE_ERR_NO_MEMORY);
    op->target = target;
    for (int i = 0; i < nb; i++) {
        if (k[i] == GDTE_IPO_HOST) continue;
        gdte_ipo_mirror_t *m = &op->m[op->nm];
        op->out[op->nm] = (unsigned char)b[i].out;
        op->nm++;
        gdte_status_t st = gdte_ipo_mirror_make(m, b[i].buf, b[i].count, b[i].dt, k[i], b[i].in);
        if (st != GDTE_OK) {
            for (int j = 0; j < op->nm; j++) gdte_ipo_mirror_free(&op->m[j]);
            free(op);
            return rma_fail(win, fn, b[i].what, st);
        }
        use[i] = m->base;
    }
    n_ops++;
    *op_p = op;
    return MPI_SUCCESS;
}

/* After the MPI took the operation: keep it on the window's list (and on its request's record)
 * until it completes. */
static int rma_keep(const char *fn, MPI_Win win, rma_op_t *op, int rc, MPI_Request *request)
{
    if (rc != MPI_SUCCESS) {
        for (int i = 0; i < op->nm; i++) gdte_ipo_mirror_free(&op->m[i]);
        free(op);
        return rc;
    }
    gdte_ipo_req_t *r = NULL;
    if (request && *request != MPI_REQUEST_NULL) {
        r = gdte_ipo_req_new();
        if (!r) {
            /* The MPI works on the mirrors: they must outlive the operation, so wait here. */
            rc = IPO_NEXT(Wait)(request, MPI_STATUS_IGNORE);
            pthread_mutex_lock(&rma_lock);
            if (rc != MPI_SUCCESS) op->rc = rc;
            rma_op_complete(op);
            rc = op->rc;
            pthread_mutex_unlock(&rma_lock);
            free(op);
            (void)fn;
            return rc;
        }
        op->has_req = 1;
    }
    pthread_mutex_lock(&rma_lock);
    rma_win_t *w = rma_find_locked(win);
    if (!w) {
        /* A window gdte did not make (host memory everywhere, MPI_Win_allocate, dynamic): a
         * record for its pending operations. */
        w = calloc(1, sizeof *w);
        if (w) {
            pthread_mutex_init(&w->mlock, NULL);
            w->win = win;
            w->comm = MPI_COMM_NULL;
            HASH_ADD(hh, rma_wins, win, sizeof w->win, w);
        }
    }
    if (w) {
        op->w = w;
        op->next = w->ops;
        w->ops = op;
    }
    pthread_mutex_unlock(&rma_lock);
    if (!w) {
        /* No record: complete it now (the operation still holds the mirrors). */
        PMPI_Win_flush_local(op->target, win);
        pthread_mutex_lock(&rma_lock);
        rma_op_complete(op);
        pthread_mutex_unlock(&rma_lock);
    }
    if (r) gdte_coll_req_insert(r, *request, MPI_COMM_NULL, 0, NULL, rma_req_finish, rma_req_fini, op);
    else if (!w) free(op);
    return MPI_SUCCESS;
}

/* ---- the operation shims ---- */
#define RMA_ORIGIN(cv) cv void *origin_addr, int origin_count, MPI_Datatype origin_datatype
#define RMA_TARGET int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype
#define RMA_TARGET_A target_rank, target_disp, target_count, target_datatype

/* Put, Get, Accumulate and their request forms: one buffer, read (in) or written (out). */
#define RMA_ONE(Name, cv, in, OPP, OPA, REQP, REQA, REQ)                                                       \
    GDTE_IPO_EXPORT int MPI_##Name(RMA_ORIGIN(cv), RMA_TARGET OPP, MPI_Win win REQP)                            \
    {                                                                                                          \
        if (!rma_on()) return NEXT(Name)(origin_addr, origin_count, origin_datatype, RMA_TARGET_A OPA, win REQA); \
        gdte_ipo_block_flush();                                                                                \
        rma_buf_t b[1] = {{origin_addr, origin_count, origin_datatype, in, !in, "origin_addr"}};               \
        rma_op_t *rop = NULL;                                                                                   \
        void *use[1];                                                                                          \
        int rc = rma_prepare("MPI_" #Name, win, target_rank, b, 1, &rop, use);                                  \
        if (rc == RMA_PASS) return NEXT(Name)(origin_addr, origin_count, origin_datatype, RMA_TARGET_A OPA, win REQA); \
        if (rc != MPI_SUCCESS) return rc;                                                                      \
        rc = NEXT(Name)(use[0], origin_count, origin_datatype, RMA_TARGET_A OPA, win REQA);                     \
        return rma_keep("MPI_" #Name, win, rop, rc, REQ);                                                       \
    }
#define U_(...) __VA_ARGS__
RMA_ONE(Put, const, 1, , , , , NULL)
RMA_ONE(Get, , 0, , , , , NULL)
RMA_ONE(Accumulate, const, 1, U_(, MPI_Op op), U_(, op), , , NULL)
RMA_ONE(Rput, const, 1, , , U_(, MPI_Request *request), U_(, request), request)
RMA_ONE(Rget, , 0, , , U_(, MPI_Request *request), U_(, request), request)
RMA_ONE(Raccumulate, const, 1, U_(, MPI_Op op), U_(, op), U_(, MPI_Request *request), U_(, request), request)

#define GETACC_P                                                                                               \
    const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, int result_count, \
        MPI_Datatype result_datatype, RMA_TARGET, MPI_Op op, MPI_Win win
#define GETACC_A(o, r) o, origin_count, origin_datatype, r, result_count, result_datatype, RMA_TARGET_A, op, win
#define RMA_GETACC(Name, REQP, REQA, REQ)                                                                      \
    GDTE_IPO_EXPORT int MPI_##Name(GETACC_P REQP)                                                               \
    {                                                                                                          \
        if (!rma_on()) return NEXT(Name)(GETACC_A(origin_addr, result_addr) REQA);                              \
        gdte_ipo_block_flush();                                                                                \
        rma_buf_t b[2] = {{op == MPI_NO_OP ? NULL : origin_addr, origin_count, origin_datatype, 1, 0, "origin_addr"}, \
                          {result_addr, result_count, result_datatype, 0, 1, "result_addr"}};                  \
        rma_op_t *rop = NULL;                                                                                  \
        void *use[2];                                                                                          \
        int rc = rma_prepare("MPI_" #Name, win, target_rank, b, 2, &rop, use);                                 \
        if (rc == RMA_PASS) return NEXT(Name)(GETACC_A(origin_addr, result_addr) REQA);                         \
        if (rc != MPI_SUCCESS) return rc;                                                                      \
        rc = NEXT(Name)(GETACC_A(op == MPI_NO_OP ? origin_addr : use[0], use[1]) REQA);                          \
        return rma_keep("MPI_" #Name, win, rop, rc, REQ);                                                      \
    }
RMA_GETACC(Get_accumulate, , , NULL)
RMA_GETACC(Rget_accumulate, U_(, MPI_Request *request), U_(, request), request)

GDTE_IPO_EXPORT int MPI_Fetch_and_op(const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank,
                                     MPI_Aint target_disp, MPI_Op op, MPI_Win win)
{
    if (!rma_on()) return NEXT(Fetch_and_op)(origin_addr, result_addr, datatype, target_rank, target_disp, op, win);
    gdte_ipo_block_flush();
    rma_buf_t b[2] = {{op == MPI_NO_OP ? NULL : origin_addr, 1, datatype, 1, 0, "origin_addr"},
                      {result_addr, 1, datatype, 0, 1, "result_addr"}};
    rma_op_t *rop = NULL;
    void *use[2];
    int rc = rma_prepare("MPI_Fetch_and_op", win, target_rank, b, 2, &rop, use);
    if (rc == RMA_PASS) return NEXT(Fetch_and_op)(origin_addr, result_addr, datatype, target_rank, target_disp, op, win);
    if (rc != MPI_SUCCESS) return rc;
    rc = NEXT(Fetch_and_op)(op == MPI_NO_OP ? origin_addr : use[0], use[1], datatype, target_rank, target_disp, op, win);
    return rma_keep("MPI_Fetch_and_op", win, rop, rc, NULL);
}

GDTE_IPO_EXPORT int MPI_Compare_and_swap(const void *origin_addr, const void *compare_addr, void *result_addr,
                                         MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win)
{
    if (!rma_on())
        return NEXT(Compare_and_swap)(origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp, win);
    gdte_ipo_block_flush();
    rma_buf_t b[3] = {{origin_addr, 1, datatype, 1, 0, "origin_addr"},
                      {compare_addr, 1, datatype, 1, 0, "compare_addr"},
                      {result_addr, 1, datatype, 0, 1, "result_addr"}};
    rma_op_t *rop = NULL;
    void *use[3];
    int rc = rma_prepare("MPI_Compare_and_swap", win, target_rank, b, 3, &rop, use);
    if (rc == RMA_PASS)
        return NEXT(Compare_and_swap)(origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp, win);
    if (rc != MPI_SUCCESS) return rc;
    rc = NEXT(Compare_and_swap)(use[0], use[1], use[2], datatype, target_rank, target_disp, win);
    return rma_keep("MPI_Compare_and_swap", win, rop, rc, NULL);
}

/* ---- windows ---- */
GDTE_IPO_EXPORT int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
    if (!rma_on() || comm == MPI_COMM_NULL || !win) return NEXT(Win_create)(base, size, disp_unit, info, comm, win);
    gdte_ipo_block_flush();
    gdte_ipo_kind_t k = rma_span_kind(base, size);
    /* 0 host, 1 device, 2 partly device, 3 no memory for the host copies */
    int mine = k == GDTE_IPO_HOST ? 0 : k == GDTE_IPO_MIXED ? 2 : 1;
    rma_win_t *w = NULL;
    if (mine == 1) {
        w = calloc(1, sizeof *w);
        if (w) {
            pthread_mutex_init(&w->mlock, NULL);
            w->comm = MPI_COMM_NULL;
            w->size = (size_t)size;
            w->pub = rma_map(w->size);
            w->snap = rma_map(w->size);
            w->tmp = rma_map(w->size);
        }
        gdte_status_t st = w && w->pub && w->snap && w->tmp ? GDTE_OK : GDTE_ERR_NO_MEMORY;
        if (st == GDTE_OK) {
            w->dev = 1;
            w->fake = k == GDTE_IPO_FAKE;
            w->user = base;
            st = gdte_ipo_bytes(w->pub, base, w->size, w->fake);
            if (st == GDTE_OK) memcpy(w->snap, w->pub, w->size);
        }
        if (st != GDTE_OK) {
            gdte_error("MPI_Win_create: the host copy of %lld bytes of device memory: %s", (long long)size,
                       gdte_status_string(st));
            mine = 3;
        }
    }
    /* One decision for every process of the window. */
    int v[3] = {mine == 1, mine == 2, mine == 3}, all[3] = {0, 0, 0};
    int rc = PMPI_Allreduce(v, all, 3, MPI_INT, MPI_MAX, comm);
    if (rc != MPI_SUCCESS || all[1] || all[2]) {
        if (w) rma_win_release(w);
        *win = MPI_WIN_NULL;
        if (rc != MPI_SUCCESS) return rc;
        if (mine == 2) gdte_error("MPI_Win_create: base is partly host and partly device memory (MPI_ERR_BUFFER)");
        else if (mine != 3)
            gdte_error("MPI_Win_create: another process's window memory is partly device memory or could not be "
                       "copied (MPI_ERR_BUFFER)");
        int code = all[1] ? MPI_ERR_BUFFER : MPI_ERR_NO_MEM;
        PMPI_Comm_call_errhandler(comm, code);
        return code;
    }
    if (!all[0]) return NEXT(Win_create)(base, size, disp_unit, info, comm, win);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w) return rma_fail(MPI_WIN_NULL, "MPI_Win_create", "a window record", GDTE_ERR_NO_MEMORY);
        pthread_mutex_init(&w->mlock, NULL);
        w->comm = MPI_COMM_NULL;
    }
    w->any_dev = 1;
    PMPI_Comm_rank(comm, &w->rank);
    if ((rc = PMPI_Comm_dup(comm, &w->comm)) != MPI_SUCCESS) {
        w->comm = MPI_COMM_NULL;
        rma_win_release(w);
        *win = MPI_WIN_NULL;
        return rc;
    }
    rc = NEXT(Win_create)(w->dev ? (void *)w->pub : base, size, disp_unit, info, comm, win);
    if (rc != MPI_SUCCESS) {
        rma_win_release(w);
        return rc;
    }
    w->win = *win;
    if (w->dev) {
        n_windows++;
        live_dev_windows++;
    }
    pthread_mutex_lock(&rma_lock);
    HASH_ADD(hh, rma_wins, win, sizeof w->win, w);
    pthread_mutex_unlock(&rma_lock);
    return MPI_SUCCESS;
}

GDTE_IPO_EXPORT int MPI_Win_free(MPI_Win *win)
{
    if (!gdte_ipo_on() || !win) return NEXT(Win_free)(win);
    gdte_ipo_block_flush();
    MPI_Win h = *win;
    rma_win_t *w = rma_find(h);
    int rc = NEXT(Win_free)(win);
    if (!w || rc != MPI_SUCCESS) return rc;
    pthread_mutex_lock(&rma_lock);
    HASH_DEL(rma_wins, w);
    pthread_mutex_unlock(&rma_lock);
    if (w->dev) live_dev_windows--;
    w->win = MPI_WIN_NULL; /* errors from here go to MPI_COMM_WORLD's handler */
    int crc = rma_complete(w, -1);
    if (crc != MPI_SUCCESS) PMPI_Comm_call_errhandler(MPI_COMM_WORLD, crc);
    /* The last merge, unless the application freed the window's memory first (MPI_Win_free
     * comes after it in MPICH's test3): no private copy is left to bring up to date then. */
    int mrc = MPI_SUCCESS;
    if (rma_span_kind(w->user, (MPI_Aint)w->size) == GDTE_IPO_DEVICE) mrc = rma_merge_call(w, "MPI_Win_free");
    else gdte_debug("MPI_Win_free: the window's device memory %p was released before the window; no last merge", w->user);
    rma_win_release(w);
    return crc != MPI_SUCCESS ? crc : mrc;
}

GDTE_IPO_EXPORT int MPI_Win_get_attr(MPI_Win win, int keyval, void *attr, int *flag)
{
    int rc = NEXT(Win_get_attr)(win, keyval, attr, flag);
    if (rc != MPI_SUCCESS || !flag || !*flag || (keyval != MPI_WIN_BASE && keyval != MPI_WIN_MODEL) || !rma_on())
        return rc;
    rma_win_t *w = rma_find(win);
    if (!w || !w->any_dev) return rc;
    if (keyval == MPI_WIN_MODEL) *(int **)attr = &rma_model_separate;
    else if (w->dev) *(void **)attr = w->user;
    return rc;
}

/* Synchronisation: the MPI's call, then what completes at the origin and the merge where the
 * separate model synchronises the copies. `pre` merges before the MPI's call (the copies must
 * agree before peers may access the window), `post` after it. */
static int rma_sync_after(rma_win_t *w, int rc, int complete_target, int merge, const char *fn)
{
    if (!w || rc != MPI_SUCCESS) return rc;
    int crc = complete_target == INT_MIN ? MPI_SUCCESS : rma_complete(w, complete_target);
    if (crc != MPI_SUCCESS) PMPI_Win_call_errhandler(w->win, crc);
    int mrc = merge ? rma_merge_call(w, fn) : MPI_SUCCESS;
    return crc != MPI_SUCCESS ? crc : mrc;
}
#define NOCOMPLETE INT_MIN

#define RMA_SYNC_PROLOGUE(call)         \
    if (!rma_on()) return call;         \
    gdte_ipo_block_flush();             \
    rma_win_t *w = rma_find(win);       \
    if (!w) return call;

GDTE_IPO_EXPORT int MPI_Win_fence(int assert, MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_fence)(assert, win))
    int rc = rma_sync_after(w, NEXT(Win_fence)(assert, win), -1, 1, "MPI_Win_fence");
    /* No peer's next epoch before every process's changes are in its public copy. */
    if (w->any_dev) {
        int brc = PMPI_Barrier(w->comm);
        if (rc == MPI_SUCCESS) rc = brc;
    }
    return rc;
}

GDTE_IPO_EXPORT int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_lock)(lock_type, rank, assert, win))
    return rma_sync_after(w, NEXT(Win_lock)(lock_type, rank, assert, win), NOCOMPLETE, w->dev && rank == w->rank,
                          "MPI_Win_lock");
}

GDTE_IPO_EXPORT int MPI_Win_unlock(int rank, MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_unlock)(rank, win))
    int mrc = w->dev && rank == w->rank ? rma_merge_call(w, "MPI_Win_unlock") : MPI_SUCCESS;
    int rc = rma_sync_after(w, NEXT(Win_unlock)(rank, win), rank, 0, "MPI_Win_unlock");
    return rc != MPI_SUCCESS ? rc : mrc;
}

GDTE_IPO_EXPORT int MPI_Win_lock_all(int assert, MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_lock_all)(assert, win))
    return rma_sync_after(w, NEXT(Win_lock_all)(assert, win), NOCOMPLETE, 1, "MPI_Win_lock_all");
}

GDTE_IPO_EXPORT int MPI_Win_unlock_all(MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_unlock_all)(win))
    int mrc = rma_merge_call(w, "MPI_Win_unlock_all");
    int rc = rma_sync_after(w, NEXT(Win_unlock_all)(win), -1, 0, "MPI_Win_unlock_all");
    return rc != MPI_SUCCESS ? rc : mrc;
}

GDTE_IPO_EXPORT int MPI_Win_flush(int rank, MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_flush)(rank, win))
    return rma_sync_after(w, NEXT(Win_flush)(rank, win), rank, 0, "MPI_Win_flush");
}

GDTE_IPO_EXPORT int MPI_Win_flush_local(int rank, MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_flush_local)(rank, win))
    return rma_sync_after(w, NEXT(Win_flush_local)(rank, win), rank, 0, "MPI_Win_flush_local");
}

GDTE_IPO_EXPORT int MPI_Win_flush_all(MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_flush_all)(win))
    return rma_sync_after(w, NEXT(Win_flush_all)(win), -1, 0, "MPI_Win_flush_all");
}

GDTE_IPO_EXPORT int MPI_Win_flush_local_all(MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_flush_local_all)(win))
    return rma_sync_after(w, NEXT(Win_flush_local_all)(win), -1, 0, "MPI_Win_flush_local_all");
}

GDTE_IPO_EXPORT int MPI_Win_complete(MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_complete)(win))
    return rma_sync_after(w, NEXT(Win_complete)(win), -1, 0, "MPI_Win_complete");
}

GDTE_IPO_EXPORT int MPI_Win_post(MPI_Group group, int assert, MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_post)(group, assert, win))
    int mrc = w->dev ? rma_merge_call(w, "MPI_Win_post") : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS) return mrc;
    return NEXT(Win_post)(group, assert, win);
}

GDTE_IPO_EXPORT int MPI_Win_wait(MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_wait)(win))
    return rma_sync_after(w, NEXT(Win_wait)(win), NOCOMPLETE, w->dev, "MPI_Win_wait");
}

GDTE_IPO_EXPORT int MPI_Win_test(MPI_Win win, int *flag)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_test)(win, flag))
    int rc = NEXT(Win_test)(win, flag);
    return rma_sync_after(w, rc, NOCOMPLETE, rc == MPI_SUCCESS && flag && *flag && w->dev, "MPI_Win_test");
}

GDTE_IPO_EXPORT int MPI_Win_sync(MPI_Win win)
{
    RMA_SYNC_PROLOGUE(NEXT(Win_sync)(win))
    return rma_sync_after(w, NEXT(Win_sync)(win), NOCOMPLETE, w->dev, "MPI_Win_sync");
}

/* At MPI_Finalize: windows the application never freed (their host copies go with the process). */
void gdte_ipo_rma_finalize(void)
{
    pthread_mutex_lock(&rma_lock);
    rma_win_t *w, *tmp;
    HASH_ITER(hh, rma_wins, w, tmp)
    {
        HASH_DEL(rma_wins, w);
        if (w->dev) live_dev_windows--;
        rma_op_t *op = w->ops;
        while (op) {
            rma_op_t *nx = op->next;
            op->w = NULL;
            for (int i = 0; i < op->nm; i++) gdte_ipo_mirror_free(&op->m[i]);
            op->done = 1;
            if (!op->has_req) free(op);
            op = nx;
        }
        w->comm = MPI_COMM_NULL; /* the MPI frees its communicators itself */
        rma_win_release(w);
    }
    pthread_mutex_unlock(&rma_lock);
}
