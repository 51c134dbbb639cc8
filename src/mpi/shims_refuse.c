/*
 * The MPI calls with a buffer that gdte does not carry (refuse.h), generated from one table.
 *
 * Each shim: off (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1), straight to the next
 * definition in the chain. On, it first completes GPU work gdte deferred (the MPI may read
 * what it produced), then, only when a device buffer is possible at all and the MPI cannot
 * read one (a GPU or the fake device, and not GPU-aware), looks at the memory kind of each
 * buffer the call will touch. A device buffer is refused with MPI_ERR_BUFFER through the
 * error handler of the call's communicator, window or file (MPI_COMM_WORLD's for a call with
 * none) and a log line saying which buffer and why; the MPI never sees the call. Host buffers,
 * and every buffer under a GPU-aware MPI, go to the MPI untouched.
 *
 * A buffer's kind is the kind of the bytes the call will touch, as gdte_ipo_buf_kind judges
 * them: the first and last byte (and a struct's fields from MPI_BOTTOM); for the per-process
 * blocks of a v or w collective, the lowest and the highest block. A buffer whose ends are
 * host memory but whose middle is device memory is not caught (the MPI then reads it).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include "interpose.h"
#include "refuse.h"
#include "gpu/gpu.h"
#include "util/util.h"

/* ---- whether to look at all ---- */
/* Decided at the first call after MPI_Init (from what MPI_Init decided, so it never changes):
 * 1 look at buffers, 2 pass every call. Without a GPU and without the fake device, or under a
 * GPU-aware MPI, the shims cost the two loads of gdte_ipo_on() and this flag. */
static _Atomic int rf_mode;

static int rf_decide(void)
{
    int possible = gdte_gpu_available() || gdte_knob(GDTE_KNOB_FAKE_DEVICE);
    int m = possible && !gdte_ipo_gpu_aware() ? 1 : 2;
    atomic_store_explicit(&rf_mode, m, memory_order_relaxed);
    return m;
}

static inline int rf_checking(void)
{
    int m = atomic_load_explicit(&rf_mode, memory_order_relaxed);
    if (__builtin_expect(m == 0, 0)) m = rf_decide();
    return m == 1;
}

/* ---- buffer probes ---- */
static gdte_ipo_kind_t rf_join(gdte_ipo_kind_t a, gdte_ipo_kind_t b)
{
    return a == b ? a : a == GDTE_IPO_HOST ? (b == GDTE_IPO_HOST ? a : GDTE_IPO_MIXED)
                                           : (b == GDTE_IPO_HOST ? GDTE_IPO_MIXED : (a == GDTE_IPO_MIXED ? a : b));
}

static const void *rf_at(const void *b, MPI_Count off) { return (const void *)((uintptr_t)b + (uintptr_t)off); }

/* `n` elements of `t` from `b`. */
static gdte_ipo_kind_t rf_typed(const void *b, MPI_Count n, MPI_Datatype t)
{
    if (n <= 0 || b == MPI_IN_PLACE || t == MPI_DATATYPE_NULL) return GDTE_IPO_HOST;
    if (n <= INT_MAX) return gdte_ipo_buf_kind(b, (int)n, t);
    /* More elements than an int counts: the first and the last element. */
    MPI_Count lb, ext;
    if (PMPI_Type_get_extent_x(t, &lb, &ext) != MPI_SUCCESS) return GDTE_IPO_HOST;
    return rf_join(gdte_ipo_buf_kind(b, 1, t), gdte_ipo_buf_kind(rf_at(b, (n - 1) * ext), 1, t));
}

static gdte_ipo_kind_t rf_bytes(const void *b, MPI_Count n)
{
    if (!b || n <= 0) return GDTE_IPO_HOST;
    if (n <= INT_MAX) return gdte_ipo_buf_kind(b, (int)n, MPI_BYTE);
    return rf_join(gdte_ipo_buf_kind(b, 1, MPI_BYTE), gdte_ipo_buf_kind(rf_at(b, n - 1), 1, MPI_BYTE));
}

/* Blocks i < nb of counts[i] elements of `t` at displs[i] extents from `b`: the block that
 * starts lowest and the one that ends highest. */
static gdte_ipo_kind_t rf_vec(const void *b, const int *counts, const int *displs, MPI_Datatype t, int nb)
{
    if (b == MPI_IN_PLACE || !counts || !displs || t == MPI_DATATYPE_NULL || nb <= 0) return GDTE_IPO_HOST;
    int lo = -1, hi = -1;
    for (int i = 0; i < nb; i++) {
        if (counts[i] <= 0) continue;
        if (lo < 0 || displs[i] < displs[lo]) lo = i;
        if (hi < 0 || (int64_t)displs[i] + counts[i] > (int64_t)displs[hi] + counts[hi]) hi = i;
    }
    if (lo < 0) return GDTE_IPO_HOST;
    MPI_Count lb, ext;
    if (PMPI_Type_get_extent_x(t, &lb, &ext) != MPI_SUCCESS) return GDTE_IPO_HOST;
    gdte_ipo_kind_t k = rf_typed(rf_at(b, (MPI_Count)displs[lo] * ext), counts[lo], t);
    if (hi != lo) k = rf_join(k, rf_typed(rf_at(b, (MPI_Count)displs[hi] * ext), counts[hi], t));
    return k;
}

/* The same with byte displacements (idispls or adispls) and a type per block. */
static gdte_ipo_kind_t rf_vecw(const void *b, const int *counts, const int *idispls, const MPI_Aint *adispls,
                               const MPI_Datatype *types, int nb)
{
    if (b == MPI_IN_PLACE || !counts || (!idispls && !adispls) || !types || nb <= 0) return GDTE_IPO_HOST;
    int lo = -1, hi = -1;
    MPI_Aint dlo = 0, dhi = 0;
    for (int i = 0; i < nb; i++) {
        if (counts[i] <= 0 || types[i] == MPI_DATATYPE_NULL) continue;
        MPI_Aint d = idispls ? idispls[i] : adispls[i];
        if (lo < 0 || d < dlo) lo = i, dlo = d;
        if (hi < 0 || d > dhi) hi = i, dhi = d;
    }
    if (lo < 0) return GDTE_IPO_HOST;
    gdte_ipo_kind_t k = rf_typed(rf_at(b, dlo), counts[lo], types[lo]);
    if (hi != lo) k = rf_join(k, rf_typed(rf_at(b, dhi), counts[hi], types[hi]));
    return k;
}

/* ---- what the probes ask of a communicator ---- */
static int rf_peers(MPI_Comm comm)
{
    int inter = 0, n = 0;
    if (comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
    if ((inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS) return 0;
    return n;
}

static int rf_at_root(int root, MPI_Comm comm)
{
    if (root == MPI_ROOT) return 1;
    int inter = 0, rank = -1;
    if (root < 0 || comm == MPI_COMM_NULL || PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return 0;
    return PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS && rank == root;
}

static void rf_degrees(MPI_Comm comm, int *in, int *out)
{
    int topo = MPI_UNDEFINED, rank = 0, nd = 0, w = 0;
    *in = *out = 0;
    if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &topo) != MPI_SUCCESS) return;
    if (topo == MPI_CART && PMPI_Cartdim_get(comm, &nd) == MPI_SUCCESS) {
        *in = *out = 2 * nd;
    } else if (topo == MPI_GRAPH && PMPI_Comm_rank(comm, &rank) == MPI_SUCCESS &&
               PMPI_Graph_neighbors_count(comm, rank, &nd) == MPI_SUCCESS) {
        *in = *out = nd;
    } else if (topo == MPI_DIST_GRAPH && PMPI_Dist_graph_neighbors_count(comm, in, out, &w) != MPI_SUCCESS) {
        *in = *out = 0;
    }
}

static int rf_indeg(MPI_Comm comm)
{
    int in, out;
    rf_degrees(comm, &in, &out);
    return in;
}

static int rf_outdeg(MPI_Comm comm)
{
    int in, out;
    rf_degrees(comm, &in, &out);
    return out;
}

static MPI_Count rf_sum(const int *counts, MPI_Comm comm)
{
    int n = 0;
    MPI_Count s = 0;
    if (!counts || comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &n) != MPI_SUCCESS) return 0;
    for (int i = 0; i < n; i++) s += counts[i] > 0 ? counts[i] : 0;
    return s;
}

static MPI_Count rf_mine(const int *counts, MPI_Comm comm)
{
    int r = -1;
    if (!counts || comm == MPI_COMM_NULL || PMPI_Comm_rank(comm, &r) != MPI_SUCCESS || r < 0) return 0;
    return counts[r];
}

#define RF_PEERS(comm) rf_peers(comm)
#define RF_INDEG(comm) rf_indeg(comm)
#define RF_OUTDEG(comm) rf_outdeg(comm)
#define RF_AT_ROOT(root, comm) rf_at_root(root, comm)
#define RF_NONROOT(root) ((root) != MPI_ROOT && (root) != MPI_PROC_NULL)
#define RF_SUM(counts, comm) rf_sum(counts, comm)
#define RF_MINE(counts, comm) rf_mine(counts, comm)

/* Each probe runs only while no earlier buffer of the call was found on the device, and only
 * when its condition says the MPI will touch that buffer. */
#define RF_PROBE(cond, what, kind_expr)                 \
    if (!bad_ && (cond)) {                              \
        gdte_ipo_kind_t k_ = (kind_expr);               \
        if (k_ != GDTE_IPO_HOST) bad_ = what, bad_kind_ = k_; \
    }
#define RF_BUF(cond, b, n, t) RF_PROBE(cond, #b, rf_typed(b, n, t))
#define RF_VEC(cond, b, counts, displs, t, nb) RF_PROBE(cond, #b, rf_vec(b, counts, displs, t, nb))
#define RF_VECW(cond, b, counts, idispls, adispls, types, nb) \
    RF_PROBE(cond, #b, rf_vecw(b, counts, idispls, adispls, types, nb))
#define RF_BYTES(cond, b, n) RF_PROBE(cond, #b, rf_bytes(b, n))

/* ---- refusal ---- */
static void rf_log(const char *fn, const char *what, gdte_ipo_kind_t k)
{
    gdte_error("%s: %s is %sdevice memory; gdte does not carry this call yet and the MPI underneath cannot read device "
               "memory (MPI_ERR_BUFFER; GDTE_MPI_GPU_AWARE=1 if this MPI can)",
               fn, what, k == GDTE_IPO_MIXED ? "partly " : "");
}

static int rf_fail_COMM(MPI_Comm comm, const char *fn, const char *what, gdte_ipo_kind_t k)
{
    rf_log(fn, what, k);
    PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, MPI_ERR_BUFFER);
    return MPI_ERR_BUFFER;
}
#define rf_fail_WORLD rf_fail_COMM

static int rf_fail_WIN(MPI_Win win, const char *fn, const char *what, gdte_ipo_kind_t k)
{
    if (win == MPI_WIN_NULL) return rf_fail_COMM(MPI_COMM_WORLD, fn, what, k);
    rf_log(fn, what, k);
    PMPI_Win_call_errhandler(win, MPI_ERR_BUFFER);
    return MPI_ERR_BUFFER;
}

/* MPI_FILE_NULL has a handler too: the default for files (MPI_ERRORS_RETURN unless changed). */
static int rf_fail_FH(MPI_File fh, const char *fn, const char *what, gdte_ipo_kind_t k)
{
    rf_log(fn, what, k);
    PMPI_File_call_errhandler(fh, MPI_ERR_BUFFER);
    return MPI_ERR_BUFFER;
}

/* ---- the next definitions in the chain (see interpose_core.c for why not PMPI_ directly) ---- */
static struct {
#define GDTE_X_RF_FIELD(fam, name, params, args, hk, h, probes) __typeof__(&P##name) name;
    GDTE_REFUSE_LIST(GDTE_X_RF_FIELD)
#undef GDTE_X_RF_FIELD
} rf_next;

__attribute__((constructor)) static void rf_resolve_next(void)
{
#define GDTE_X_RF_RESOLVE(fam, name, params, args, hk, h, probes)             \
    rf_next.name = (__typeof__(rf_next.name))dlsym(RTLD_NEXT, #name); \
    if (!rf_next.name) rf_next.name = P##name;
    GDTE_REFUSE_LIST(GDTE_X_RF_RESOLVE)
#undef GDTE_X_RF_RESOLVE
}

/* ---- the shims ---- */
#define GDTE_X_RF_SHIM(fam, name, params, args, hk, h, probes)            \
    GDTE_IPO_EXPORT int name params                                       \
    {                                                                     \
        if (gdte_ipo_on()) {                                              \
            gdte_ipo_pending_flush();                                     \
            if (rf_checking()) {                                          \
                const char *bad_ = NULL;                                  \
                gdte_ipo_kind_t bad_kind_ = GDTE_IPO_HOST;                \
                probes if (bad_) return rf_fail_##hk(h, #name, bad_, bad_kind_); \
            }                                                             \
        }                                                                 \
        return rf_next.name args;                                         \
    }
GDTE_REFUSE_LIST(GDTE_X_RF_SHIM)
#undef GDTE_X_RF_SHIM
