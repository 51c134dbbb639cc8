/*
 * The MPI calls with a buffer that gdte does not carry (refuse.h), generated from one table.
 *
 * Each shim: off (before MPI_Init, after MPI_Finalize, GDTE_DISABLE=1), straight to the next
 * definition in the chain. On, it first completes GPU work gdte deferred (the MPI may read
 * what it produced), then, only when a device buffer is possible at all and the MPI cannot
 * read one (a GPU or the fake device, and not GPU-aware), looks at the memory kind of each
 * buffer the call will touch. A device buffer is refused with MPI_ERR_BUFFER through the
 * error handler of the call's communicator or window (MPI_COMM_WORLD's for a call with
 * none) and a log line saying which buffer and why; the MPI never sees the call. Host buffers,
 * and every buffer under a GPU-aware MPI, go to the MPI untouched.
 *
 * A buffer's kind is the kind of the bytes the call will touch, as gdte_ipo_buf_kind judges
 * them: the first and last byte (and a struct's fields from MPI_BOTTOM). A buffer whose ends
 * are host memory but whose middle is device memory is not caught (the MPI then reads it).
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

static gdte_ipo_kind_t rf_bytes(const void *b, MPI_Count n)
{
    if (!b || n <= 0) return GDTE_IPO_HOST;
    if (n <= INT_MAX) return gdte_ipo_buf_kind(b, (int)n, MPI_BYTE);
    return rf_join(gdte_ipo_buf_kind(b, 1, MPI_BYTE), gdte_ipo_buf_kind(rf_at(b, n - 1), 1, MPI_BYTE));
}

/* Each probe runs only while no earlier buffer of the call was found on the device, and only
 * when its condition says the MPI will touch that buffer. */
#define RF_PROBE(cond, what, kind_expr)                 \
    if (!bad_ && (cond)) {                              \
        gdte_ipo_kind_t k_ = (kind_expr);               \
        if (k_ != GDTE_IPO_HOST) bad_ = what, bad_kind_ = k_; \
    }
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
            gdte_ipo_block_flush();                                       \
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
