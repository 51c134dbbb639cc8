/*
 * Interposer lifetime, the next-in-chain table, memory kinds, errors and datatype references.
 *
 * How calls reach the MPI. The library defines the MPI_* symbols and calls the *next*
 * definition of each, found once with dlsym(RTLD_NEXT, "MPI_x"), not PMPI_x directly. With
 * PMPI_x, a PMPI tool loaded after gdte (LD_PRELOAD="libgdte_mpi.so libtool.so") would never
 * see the calls gdte makes; with RTLD_NEXT it sees them (as the MPI_PACKED transfers that really
 * happen) and then reaches PMPI itself. A tool loaded before gdte bypasses gdte either way, so
 * gdte must come first. PMPI_x is the fallback when no next definition exists (a static MPI).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "interpose.h"
#include "interpose_coll.h"
#include "import.h"
#include "xfer.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "kernels/memquery.h"
#include "util/util.h"

gdte_ipo_next_t gdte_ipo_next_g;
_Atomic int gdte_ipo_on_g;
gdte_ipo_counters_t gdte_ipo_cnt_g;

static int fake_on;
static int gdte_started;
/* MPI_COMM_SELF's twin with MPI_ERRORS_RETURN: the MPI checks datatypes on it (gdte_ipo_type). */
static MPI_Comm check_comm = MPI_COMM_NULL;
int gdte_ipo_gpu_aware_g;

/* Whether the MPI underneath says it moves device memory. Asked through the extension
 * functions of whichever MPI is loaded, found at run time (none of them is in every mpi.h):
 * Open MPI's MPIX_Query_cuda_support (4.x, 5.x) and MPIX_Query_rocm_support (5.x), MPICH's
 * MPIX_GPU_query_support (4.x; 1 = CUDA, 2 = ZE, 3 = HIP in its MPIX_GPU_SUPPORT_* order).
 * The one for this build's GPU runtime decides. */
static int mpi_says_gpu_aware(const char **how)
{
    int hip = gdte_gpu_backend() == GDTE_GPU_BACKEND_HIP;
    int (*query)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, hip ? "MPIX_Query_rocm_support" : "MPIX_Query_cuda_support");
    if (query) {
        *how = hip ? "MPIX_Query_rocm_support()" : "MPIX_Query_cuda_support()";
        return query() == 1;
    }
    int (*mpich)(int, int *) = (int (*)(int, int *))dlsym(RTLD_DEFAULT, "MPIX_GPU_query_support");
    if (mpich) {
        int yes = 0;
        *how = "MPIX_GPU_query_support()";
        return mpich(hip ? 3 : 1, &yes) == MPI_SUCCESS && yes;
    }
    *how = "no query function in this MPI";
    return 0;
}

static void decide_gpu_aware(void)
{
    int64_t k = gdte_knob(GDTE_KNOB_MPI_GPU_AWARE); /* auto|0|1 */
    const char *how = "GDTE_MPI_GPU_AWARE";
    if (k == 0) gdte_ipo_gpu_aware_g = mpi_says_gpu_aware(&how);
    else gdte_ipo_gpu_aware_g = k == 2;
    /* With a fake device the "device" is host memory any MPI can read: the device-staging path
     * runs in CI when asked for. Without a GPU there is nothing to stage on a device. */
    if (!gdte_gpu_available() && !fake_on) gdte_ipo_gpu_aware_g = 0;
    gdte_info("MPI %s device memory (%s): device messages staged in %s memory", gdte_ipo_gpu_aware_g ? "moves" : "cannot move",
              how, gdte_ipo_gpu_aware_g ? "device" : "pinned host");
}

__attribute__((constructor)) static void ipo_resolve_next(void)
{
#define GDTE_X_RESOLVE(name)                                                                  \
    gdte_ipo_next_g.name = (__typeof__(gdte_ipo_next_g.name))dlsym(RTLD_NEXT, "MPI_" #name); \
    if (!gdte_ipo_next_g.name) gdte_ipo_next_g.name = PMPI_##name;
    GDTE_IPO_NEXT_LIST(GDTE_X_RESOLVE)
#undef GDTE_X_RESOLVE
}

int gdte_ipo_init(void)
{
    /* Knobs first: GDTE_DISABLE must keep gdte from touching the GPU runtime at all. */
    gdte_status_t st = gdte_knobs_load();
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    gdte_log_set_rank(rank);
    /* GDTE_DISABLE=1 is honoured even when another knob is bad: it is the way out. */
    const char *dis = getenv("GDTE_DISABLE");
    int64_t disabled = 0;
    if (dis && *dis && gdte_knob_parse(GDTE_KNOB_DISABLE, dis, &disabled) != GDTE_OK) disabled = 0;
    if (disabled) {
        gdte_info("GDTE_DISABLE=1: every MPI call goes to the MPI untouched");
        return MPI_SUCCESS;
    }
    if (st == GDTE_OK) st = gdte_init(NULL);
    if (st == GDTE_OK) {
        gdte_started = 1;
        st = gdte_stage_init();
    }
    if (st != GDTE_OK) return gdte_ipo_fail(MPI_COMM_WORLD, "MPI_Init", st);
    gdte_log_set_rank(rank);
    fake_on = (int)gdte_knob(GDTE_KNOB_FAKE_DEVICE);
    if (PMPI_Comm_dup(MPI_COMM_SELF, &check_comm) == MPI_SUCCESS)
        PMPI_Comm_set_errhandler(check_comm, MPI_ERRORS_RETURN);
    else
        check_comm = MPI_COMM_NULL;
    decide_gpu_aware();
    int nrc = gdte_ipo_node_init();
    if (nrc != MPI_SUCCESS) return nrc;
    gdte_info("interposer on: GPU %s, fake device %s", gdte_gpu_available() ? "available" : "absent",
              fake_on ? "on" : "off");
    atomic_store_explicit(&gdte_ipo_on_g, 1, memory_order_release);
    return MPI_SUCCESS;
}

int gdte_ipo_finalize(void)
{
    if (gdte_ipo_on()) {
        gdte_ipo_orphans_drain();
        gdte_ipo_node_finalize();
        atomic_store_explicit(&gdte_ipo_on_g, 0, memory_order_release);
    }
    if (check_comm != MPI_COMM_NULL) PMPI_Comm_free(&check_comm);
    int rc = IPO_NEXT(Finalize)();
    gdte_ipo_buffer_finalize();
    gdte_ipo_rma_finalize();
    if (gdte_started) {
        if (gdte_ipo_req_live() > 0)
            gdte_warn("%lld device requests never completed before MPI_Finalize", (long long)gdte_ipo_req_live());
        gdte_xfer_finalize();
        gdte_stage_finalize();
        gdte_finalize();
        gdte_started = 0;
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
static gdte_ipo_kind_t kind_of(const gdte_mem_info_t *mi)
{
    /* Managed memory too: the MPI could touch it from the CPU, but pages resident on the GPU
     * would migrate one fault at a time; the kernels read it in place. */
    return mi->kind == GDTE_MEM_DEVICE || mi->kind == GDTE_MEM_MANAGED ? GDTE_IPO_DEVICE : GDTE_IPO_HOST;
}

/* Device memory of another GPU than the calling thread's current one: gdte's kernels run on the
 * current GPU and reach it over the peer link, enabled here once per pair. A pair without one is
 * refused (a kernel touching it would fault, and leave the context unusable for the rest of the
 * run). PEER_MAX bounds the devices a node has. */
#define PEER_MAX 64
static _Atomic signed char peer_state[PEER_MAX][PEER_MAX]; /* 0 not asked, 1 reachable, -1 not */
static _Thread_local int unreachable_dev = -1, unreachable_cur = -1; /* for buf_kind's message */
static int reach_gpu(int dev)
{
    int cur = gdte_gpu_current_device();
    if (cur < 0 || dev < 0 || dev == cur) return 1;
    signed char s = -1;
    if (cur < PEER_MAX && dev < PEER_MAX && !(s = atomic_load_explicit(&peer_state[cur][dev], memory_order_acquire))) {
        int can = 0;
        s = gdte_gpu_can_access_peer(cur, dev, &can) == GDTE_OK && can && gdte_gpu_enable_peer(dev) == GDTE_OK ? 1 : -1;
        atomic_store_explicit(&peer_state[cur][dev], s, memory_order_release);
        if (s > 0) gdte_info("device buffers of GPU %d used from GPU %d: peer access enabled", dev, cur);
    }
    if (s < 0) unreachable_dev = dev, unreachable_cur = cur;
    return s > 0;
}

/* The kind of the bytes [first, last]: of the two ends (one lookup when both lie in one
 * allocation); MIXED when they differ, or when they are device memory the current GPU cannot
 * reach (reach_gpu). */
static gdte_ipo_kind_t span_kind(uintptr_t first, uintptr_t last, int gpu)
{
    if (fake_on) {
        int a = gdte_fake_contains((const void *)first), b = gdte_fake_contains((const void *)last);
        if (a || b) return a && b ? GDTE_IPO_FAKE : GDTE_IPO_MIXED;
    }
    if (!gpu) return GDTE_IPO_HOST;
    gdte_mem_info_t a, b;
    if (gdte_mem_query_span((const void *)first, (const void *)last, &a, &b) != GDTE_OK) return GDTE_IPO_HOST;
    gdte_ipo_kind_t ka = kind_of(&a), kb = kind_of(&b);
    if (ka != kb) return GDTE_IPO_MIXED;
    if (a.kind == GDTE_MEM_DEVICE && !reach_gpu(a.device)) return GDTE_IPO_MIXED;
    if (b.kind == GDTE_MEM_DEVICE && b.device != a.device && !reach_gpu(b.device)) return GDTE_IPO_MIXED;
    return ka;
}

/* MPI_BOTTOM with a struct of absolute addresses: its fields may lie in different allocations,
 * so each field's first byte counts too (at most STRUCT_PROBES fields; a larger struct is
 * judged by its ends). */
#define STRUCT_PROBES 64
static gdte_ipo_kind_t bottom_struct_kind(MPI_Datatype dt, gdte_ipo_kind_t k, int gpu)
{
    int ni, na, nd, comb;
    if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS || comb != MPI_COMBINER_STRUCT ||
        ni - 1 > STRUCT_PROBES)
        return k;
    int n = ni - 1;
    int ints[STRUCT_PROBES + 1];
    MPI_Aint addrs[STRUCT_PROBES];
    MPI_Datatype types[STRUCT_PROBES];
    if (PMPI_Type_get_contents(dt, ni, na, nd, ints, addrs, types) != MPI_SUCCESS) return k;
    for (int i = 0; i < n; i++) {
        MPI_Count tlb = 0, text = 0;
        if (k != GDTE_IPO_MIXED && ints[1 + i] > 0 && PMPI_Type_get_true_extent_x(types[i], &tlb, &text) == MPI_SUCCESS &&
            text > 0) {
            uintptr_t b = (uintptr_t)addrs[i] + (uintptr_t)tlb;
            gdte_ipo_kind_t f = span_kind(b, b, gpu);
            if (f != k) k = GDTE_IPO_MIXED;
        }
        int c, a, bb, d;
        if (PMPI_Type_get_envelope(types[i], &a, &bb, &d, &c) == MPI_SUCCESS && c != MPI_COMBINER_NAMED)
            PMPI_Type_free(&types[i]);
    }
    return k;
}

gdte_ipo_kind_t gdte_ipo_buf_kind(const void *buf, int count, MPI_Datatype dt)
{
    if (count <= 0) return GDTE_IPO_HOST;
    int gpu = gdte_gpu_available();
    if (!gpu && !fake_on) return GDTE_IPO_HOST;
    /* The kind of a buffer is the kind of the bytes the type touches, not of `buf` (which may
     * lie outside the allocation, or be MPI_BOTTOM): the first byte of the first element and
     * the last byte of the last one. */
    MPI_Count tlb = 0, text = 0, lb = 0, ext = 0, size = 0;
    /* A type of no bytes touches no memory, and its bounds mean nothing: Open MPI gives an
     * empty struct (MPI_BOTTOM with a zero count) a true lb of LLONG_MAX and a true extent of 1,
     * and the sum below overflowed. The MPI takes such a message as it is. */
    if (PMPI_Type_size_x(dt, &size) != MPI_SUCCESS || size <= 0) return GDTE_IPO_HOST;
    if (PMPI_Type_get_true_extent_x(dt, &tlb, &text) != MPI_SUCCESS || text <= 0) return GDTE_IPO_HOST;
    if (count > 1 && PMPI_Type_get_extent_x(dt, &lb, &ext) != MPI_SUCCESS) return GDTE_IPO_HOST;
    uintptr_t base = (uintptr_t)buf;
    uintptr_t first = base + (uintptr_t)tlb;
    uintptr_t last = base + (uintptr_t)(tlb + (MPI_Count)(count - 1) * ext + text - 1);
    unreachable_dev = -1;
    gdte_ipo_kind_t k = span_kind(first, last, gpu);
    if (!buf && k != GDTE_IPO_MIXED) k = bottom_struct_kind(dt, k, gpu);
    if (k == GDTE_IPO_MIXED && unreachable_dev >= 0)
        gdte_error("a datatype touches memory of GPU %d (first byte %p, last byte %p), which this thread's current "
                   "GPU %d cannot reach (no peer access between the two): gdte moves device buffers of the GPU a "
                   "process works on, and of GPUs that one can reach",
                   unreachable_dev, (void *)first, (void *)last, unreachable_cur);
    else if (k == GDTE_IPO_MIXED)
        gdte_error("a datatype touches both host and device memory (first byte %p, last byte %p): gdte moves one "
                   "memory kind per buffer",
                   (void *)first, (void *)last);
    return k;
}

_Thread_local int gdte_ipo_defer_errh;

int gdte_ipo_fail(MPI_Comm comm, const char *fn, gdte_status_t st)
{
    int code = gdte_mpi_status_to_mpi_error(st);
    if (code == MPI_SUCCESS) code = MPI_ERR_INTERN;
    /* Printed whatever GDTE_LOG says: under MPI_ERRORS_ARE_FATAL the next line is the abort. */
    if (!strncmp(fn, "MPI_Init", 8))
        fprintf(stderr, "[gdte] %s: gdte could not start: %s (%s); GDTE_DISABLE=1 runs without it\n", fn,
                gdte_status_string(st), gdte_status_name(st));
    else
        fprintf(stderr, "[gdte] %s on a device buffer failed: %s (%s)\n", fn, gdte_status_string(st),
                gdte_status_name(st));
    fflush(stderr);
    if (comm == MPI_COMM_NULL) comm = MPI_COMM_WORLD;
    if (!gdte_ipo_defer_errh) PMPI_Comm_call_errhandler(comm, code);
    return code;
}

int gdte_ipo_null_request(MPI_Comm comm, const char *fn)
{
    gdte_error("%s: the request argument is NULL", fn);
    if (comm == MPI_COMM_NULL) comm = MPI_COMM_WORLD;
    PMPI_Comm_call_errhandler(comm, MPI_ERR_REQUEST);
    return MPI_ERR_REQUEST;
}

gdte_status_t gdte_ipo_check_type(MPI_Datatype dt)
{
    /* The MPI never sees the application's datatype on a path gdte carries (it moves
     * MPI_PACKED, or gdte sizes the type itself), so its own checks of that argument are asked
     * for here: an empty send of the datatype to MPI_PROC_NULL is checked as any send is (a
     * datatype not committed, or not valid, is MPI_ERR_TYPE in Open MPI and MPICH) and moves
     * nothing. Without it an uncommitted type went out silently, and MPI_Pack_size of one
     * (Open MPI 4.1) dereferenced its missing description. The per-message paths call it
     * through gdte_mpi_type_import_validated: once per datatype, not once per message. */
    if (dt == MPI_DATATYPE_NULL) return GDTE_ERR_INVALID_TYPE;
    if (check_comm != MPI_COMM_NULL && PMPI_Send(NULL, 0, dt, MPI_PROC_NULL, 0, check_comm) != MPI_SUCCESS) {
        gdte_error("the datatype of a device buffer is not committed or not valid");
        return GDTE_ERR_NOT_COMMITTED;
    }
    return GDTE_OK;
}

gdte_status_t gdte_ipo_type(MPI_Datatype dt, int count, gdte_type_h *type_p, int64_t *nbytes_p)
{
    gdte_type_h t;
    gdte_status_t st = gdte_mpi_type_import_validated(dt, gdte_ipo_check_type, &t);
    if (st == GDTE_ERR_NOT_COMMITTED || st == GDTE_ERR_INVALID_TYPE) return st; /* said by the check */
    if (st != GDTE_OK) {
        gdte_error("cannot import the MPI datatype for a device buffer: %s", gdte_status_string(st));
        return st;
    }
    int64_t n;
    if ((st = gdte_type_pack_size(count, t, &n)) != GDTE_OK) return st;
    /* The packed stream travels as `n` MPI_PACKED elements: an int count. */
    if (n > INT32_MAX) {
        gdte_error("device message of %lld bytes exceeds the %d bytes one MPI_PACKED transfer can carry",
                   (long long)n, INT32_MAX);
        return GDTE_ERR_OVERFLOW;
    }
    *type_p = t;
    *nbytes_p = n;
    return GDTE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Datatype references. Entries stay in the table with zero references (no allocation per
 * message in steady state) and leave it when the datatype is really freed. */
typedef struct dtref {
    MPI_Datatype dt;
    int64_t refs;
    int pending_frees; /* MPI_Type_free calls deferred until refs drops to zero */
    UT_hash_handle hh;
} dtref_t;

static pthread_mutex_t dt_lock = PTHREAD_MUTEX_INITIALIZER;
static dtref_t *dt_table;

void gdte_ipo_dt_get(MPI_Datatype dt)
{
    pthread_mutex_lock(&dt_lock);
    dtref_t *e;
    HASH_FIND(hh, dt_table, &dt, sizeof dt, e);
    if (!e && (e = calloc(1, sizeof *e))) {
        e->dt = dt;
        HASH_ADD(hh, dt_table, dt, sizeof e->dt, e);
    }
    if (e) e->refs++;
    pthread_mutex_unlock(&dt_lock);
}

void gdte_ipo_dt_put(MPI_Datatype dt)
{
    int frees = 0;
    pthread_mutex_lock(&dt_lock);
    dtref_t *e;
    HASH_FIND(hh, dt_table, &dt, sizeof dt, e);
    if (e && --e->refs == 0 && e->pending_frees) {
        frees = e->pending_frees;
        HASH_DEL(dt_table, e);
        free(e);
    }
    pthread_mutex_unlock(&dt_lock);
    for (int i = 0; i < frees; i++) {
        MPI_Datatype d = dt;
        IPO_NEXT(Type_free)(&d);
    }
}

int gdte_ipo_type_free(MPI_Datatype *dt)
{
    if (!dt) return IPO_NEXT(Type_free)(dt);
    pthread_mutex_lock(&dt_lock);
    dtref_t *e;
    HASH_FIND(hh, dt_table, dt, sizeof *dt, e);
    if (e && e->refs > 0) {
        /* A receive in flight still needs the datatype for its status: MPI lets the
         * application free it now, so the real free waits for that request. */
        e->pending_frees++;
        pthread_mutex_unlock(&dt_lock);
        gdte_ipo_cnt_g.deferred_type_frees++;
        *dt = MPI_DATATYPE_NULL;
        return MPI_SUCCESS;
    }
    if (e) {
        HASH_DEL(dt_table, e);
        free(e);
    }
    pthread_mutex_unlock(&dt_lock);
    return IPO_NEXT(Type_free)(dt);
}

/* ---------------------------------------------------------------------------------------- */
/* Exported for tests and benchmarks: counters by name, -1 for an unknown name. */
GDTE_IPO_EXPORT int64_t gdte_mpi_counter(const char *name)
{
    if (!name) return -1;
    gdte_stage_stats_t ss;
    gdte_stage_get_stats(&ss);
    struct {
        const char *n;
        int64_t v;
    } tab[] = {
        {"sends", gdte_ipo_cnt_g.sends},
        {"recvs", gdte_ipo_cnt_g.recvs},
        {"bytes_packed", gdte_ipo_cnt_g.bytes_packed},
        {"bytes_unpacked", gdte_ipo_cnt_g.bytes_unpacked},
        {"packs", gdte_ipo_cnt_g.packs},
        {"unpacks", gdte_ipo_cnt_g.unpacks},
        {"pack_syncs", gdte_ipo_cnt_g.pack_syncs},
        {"status_fixed", gdte_ipo_cnt_g.status_fixed},
        {"deferred_type_frees", gdte_ipo_cnt_g.deferred_type_frees},
        {"orphans", gdte_ipo_cnt_g.orphans},
        {"direct", gdte_ipo_cnt_g.direct},
        {"node_sends", gdte_ipo_cnt_g.node_sends},
        {"node_detached", gdte_ipo_cnt_g.node_detached},
        {"node_units", gdte_ipo_cnt_g.node_units},
        {"node_units_same", gdte_ipo_cnt_g.node_units_same},
        {"node_other_gpu", gdte_ipo_cnt_g.node_other_gpu},
        {"node_mps", gdte_ipo_cnt_g.node_mps},
        {"node_split", gdte_ipo_cnt_g.node_split},
        {"node_sparse_packed", gdte_ipo_cnt_g.node_sparse_packed},
        {"node_batched", gdte_ipo_cnt_g.node_batched},
        {"node_batches", gdte_ipo_cnt_g.node_batches},
        {"node_pipelined", gdte_ipo_cnt_g.node_pipelined},
        {"node_frag_sends", gdte_ipo_cnt_g.node_frag_sends},
        {"node_frag_recvs", gdte_ipo_cnt_g.node_frag_recvs},
        {"node_frag_async", gdte_ipo_cnt_g.node_frag_async},
        {"node_frag_flushes", gdte_ipo_cnt_g.node_frag_flushes},
        {"node_frag_thread_posts", gdte_ipo_cnt_g.node_frag_thread_posts},
        {"host_cut_scratch", gdte_ipo_cnt_g.host_cut_scratch},
        {"packs_external", gdte_ipo_cnt_g.packs_external},
        {"unpacks_external", gdte_ipo_cnt_g.unpacks_external},
        {"buffers_shadowed", gdte_ipo_cnt_g.buffers_shadowed},
        {"io_reads", gdte_ipo_io_counter("io_reads")},
        {"io_writes", gdte_ipo_io_counter("io_writes")},
        {"rma_windows", gdte_ipo_rma_counter("rma_windows")},
        {"rma_ops", gdte_ipo_rma_counter("rma_ops")},
        {"rma_merges", gdte_ipo_rma_counter("rma_merges")},
        {"node_recvs", gdte_ipo_cnt_g.node_recvs},
        {"requests_live", gdte_ipo_req_live()},
        {"types_live", gdte_engine_live_types()},
        {"fragments", gdte_xfer_fragments()},
        {"zero_copies", gdte_xfer_zero_copies()},
        {"copy_engine", gdte_xfer_copy_engine()},
        {"stage_allocs", ss.allocs},
        {"stage_reuses", ss.reuses},
        {"stage_overflows", ss.overflows},
        {"stage_bytes_held", ss.bytes_held},
        {"stage_bytes_in_use", ss.bytes_in_use},
        {"active", gdte_ipo_on()},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (!strcmp(tab[i].n, name)) return tab[i].v;
    return gdte_ipo_coll_counter(name); /* the collectives' (interpose_coll.c), or -1 */
}

/* A buffer whose touched bytes are partly host and partly device memory. A type too large to
 * send at all is reported as that (the more useful message when the last byte lies far past
 * the allocation). */
int gdte_ipo_mixed_fail(MPI_Comm comm, const char *fn, MPI_Datatype dt, int count)
{
    gdte_type_h t;
    int64_t n;
    gdte_status_t st = gdte_ipo_type(dt, count, &t, &n);
    return gdte_ipo_fail(comm, fn, st != GDTE_OK ? st : GDTE_ERR_MEMORY_KIND);
}
