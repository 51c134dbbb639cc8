/*
 * Collectives on device buffers: Alltoall(v,w), Neighbor_alltoall(v,w), Neighbor_allgather(v),
 * Allgather(v), Gather(v), Scatter(v), Bcast, blocking, nonblocking and persistent.
 *
 * A collective has two sides on each process, what it sends and what it receives, each cut
 * into blocks (one per peer, or one). A call whose sides are both host memory goes to the MPI
 * as the application gave it. Otherwise each side is staged (a host side too, by the host
 * executor, so that no process hands the MPI a user type on one side and bytes on the other,
 * see gdte_ipo_coll): every block of it is imported
 * (gdte type and packed size), the blocks are laid end to end in one staging buffer (pinned host
 * memory, or device memory over a GPU-aware MPI), and the side is handed to the MPI as bytes:
 * the same collective with MPI_BYTE counts and byte displacements into the staging (the w forms
 * keep their w form, with MPI_BYTE for every block), so that a process whose buffers are on the
 * host and one whose buffers are on the device still call the same collective with matching
 * byte counts. The send side is packed by ONE batched launch over all its blocks
 * (gdte_gpu_exec_batch; the host executor's batch on the fake device) before the MPI's call,
 * the receive side unpacked by one after it (at completion for a nonblocking call: the MPI's
 * own request goes to the application, with a record whose finish hook unpacks).
 *
 * Within the node (see "within the node" below): a blocking Alltoall(v,w), Allgather(v),
 * Gather(v), Scatter(v) or Bcast whose members all run the node path and all have device
 * buffers moves no byte through the MPI: each process packs into device staging by one batch,
 * each receiver unpacks from the senders' staging, mapped through GPU IPC, by one batch.
 *
 * Persistent forms (Open MPI's MPIX_<name>_init, MPI-4's MPI_<name>_init): the sides are
 * described, imported and staged once, at init, and the MPI's own persistent collective is set
 * up on the staged bytes; its request goes to the application with a record (persistent) whose
 * start hook packs the send side by one batched launch at every MPI_Start/MPI_Startall, whose
 * finish hook unpacks by one at every completion, and whose fini hook releases the staging at
 * MPI_Request_free. A process whose buffers are all host memory sets up the MPI's persistent
 * collective as the application gave it.
 *
 * MPI_IN_PLACE: the receive side stands in for the send side; the blocks the MPI reads from it
 * are packed first (all of them for the alltoall forms, this process's own for Allgather(v)),
 * and blocks the MPI leaves alone are not unpacked (the root's own block of an in-place
 * Gather(v)). Errors go through the communicator's handler: a side that is partly host and
 * partly device memory is MPI_ERR_BUFFER once the process has taken part in the MPI's call with
 * zeroed bytes (coll_t.bad), byte counts or displacements that do not fit an int are
 * MPI_ERR_COUNT, before anything is sent.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "interpose_coll.h"
#include "import.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "kernels/devplan.h"
#include "kernels/kernels.h"
#include "util/util.h"

gdte_coll_next_t gdte_coll_next_g;

/* The persistent forms' next definitions, per naming (refuse.h says which the MPI declares);
 * the profiling name when no next definition exists. */
static gdte_coll_init_next_t init_next[3];

void *gdte_pinit_resolve(gdte_pinit_t init, const char *name)
{
#if !defined(GDTE_HAVE_MPIX_PCOLL)
    if (init == GDTE_PINIT_MPIX) return NULL;
#endif
#if !defined(GDTE_HAVE_MPI4_PCOLL)
    if (init == GDTE_PINIT_MPI4) return NULL;
#endif
    if (init == GDTE_PINIT_NONE) return NULL;
    const char *prefix = init == GDTE_PINIT_MPI4 ? "MPI_" : "MPIX_";
    char nm[96];
    snprintf(nm, sizeof nm, "%s%s_init", prefix, name);
    void *f = dlsym(RTLD_NEXT, nm);
    if (!f) {
        snprintf(nm, sizeof nm, "P%s%s_init", prefix, name);
        f = dlsym(RTLD_DEFAULT, nm);
    }
    return f;
}

/* See interpose_core.c for why the next definition rather than PMPI_x. */
__attribute__((constructor)) static void coll_resolve_next(void)
{
#define GDTE_X_COLL_RESOLVE(name, iname, ...) \
    GDTE_RESOLVE_NEXT(gdte_coll_next_g.name, name) GDTE_RESOLVE_NEXT(gdte_coll_next_g.iname, iname)
    GDTE_COLL_LIST(GDTE_X_COLL_RESOLVE)
#undef GDTE_X_COLL_RESOLVE
    for (int k = GDTE_PINIT_MPIX; k <= GDTE_PINIT_MPI4; k++) {
#define GDTE_X_COLL_INIT_RESOLVE(name, ...) *(void **)&init_next[k].name = gdte_pinit_resolve((gdte_pinit_t)k, #name);
        GDTE_COLL_LIST(GDTE_X_COLL_INIT_RESOLVE)
#undef GDTE_X_COLL_INIT_RESOLVE
    }
}

static _Atomic int64_t n_calls, n_node_calls, n_node_inplace, n_bytes_packed, n_bytes_unpacked;

int64_t gdte_ipo_coll_counter(const char *name)
{
    if (!strcmp(name, "coll_calls")) return n_calls;
    if (!strcmp(name, "coll_node_calls")) return n_node_calls;
    if (!strcmp(name, "coll_node_inplace")) return n_node_inplace;
    if (!strcmp(name, "coll_bytes_packed")) return n_bytes_packed;
    if (!strcmp(name, "coll_bytes_unpacked")) return n_bytes_unpacked;
    if (!strcmp(name, "coll_pack_launches")) return gdte_exec_batch_count(GDTE_DIR_PACK);
    if (!strcmp(name, "coll_unpack_launches")) return gdte_exec_batch_count(GDTE_DIR_UNPACK);
    return -1;
}

static const char *op_name(const gdte_coll_args_t *a)
{
    static const char *const names[GDTE_COLL_OPS_][4] = {
#define GDTE_X_COLL_NAMES(name, iname, OP, ...) [GDTE_COLL_##OP] = GDTE_PINIT_NAMES(#name, #iname),
        GDTE_COLL_LIST(GDTE_X_COLL_NAMES)
#undef GDTE_X_COLL_NAMES
    };
    return gdte_pinit_name(names[a->op], a->init, a->req);
}

/* ---- the MPI's own call, each side either as given or as bytes in staging ---- */
typedef gdte_coll_side_args_t eff_t;

/* The form of the call `a` says (blocking, nonblocking, persistent), on the sides given. */
static int call_mpi(const gdte_coll_args_t *a, const eff_t *s, const eff_t *r)
{
    void *rb = (void *)r->buf;
    switch (a->op) {
#define GDTE_X_COLL_CALL(name, iname, OP, params, args, ...)                                           \
    case GDTE_COLL_##OP:                                                                              \
        return GDTE_PCALL(init_next, gdte_coll_next_g, a->init, a->info, a->req, a->comm, name, iname, \
                          GDTE_PI_UNPAREN args);
        GDTE_COLL_LIST(GDTE_X_COLL_CALL)
#undef GDTE_X_COLL_CALL
    default: return MPI_ERR_INTERN;
    }
}

int gdte_ipo_coll_next(const gdte_coll_args_t *a) { return call_mpi(a, &a->s, &a->r); }

/* ---- communicators ---- */
static int comm_inter(MPI_Comm c)
{
    int inter = 0;
    return PMPI_Comm_test_inter(c, &inter) == MPI_SUCCESS && inter;
}

/* The processes a collective exchanges blocks with: the remote group on an intercommunicator. */
static int comm_peers(MPI_Comm c)
{
    int n = 0;
    if ((comm_inter(c) ? PMPI_Comm_remote_size(c, &n) : PMPI_Comm_size(c, &n)) != MPI_SUCCESS) return -1;
    return n;
}

static int comm_rank(MPI_Comm c)
{
    int r = -1;
    PMPI_Comm_rank(c, &r);
    return r;
}

/* Neighbours of a topology: the blocks of a neighborhood collective. -1: no topology. */
static int topo_degrees(MPI_Comm c, int *in, int *out)
{
    int topo = MPI_UNDEFINED, nd = 0, w = 0;
    *in = *out = 0;
    if (PMPI_Topo_test(c, &topo) != MPI_SUCCESS) return -1;
    if (topo == MPI_CART && PMPI_Cartdim_get(c, &nd) == MPI_SUCCESS) {
        *in = *out = 2 * nd;
    } else if (topo == MPI_GRAPH && PMPI_Graph_neighbors_count(c, comm_rank(c), &nd) == MPI_SUCCESS) {
        *in = *out = nd;
    } else if (topo == MPI_DIST_GRAPH && PMPI_Dist_graph_neighbors_count(c, in, out, &w) == MPI_SUCCESS) {
        return 0;
    } else {
        return -1;
    }
    return 0;
}

/* ---- sides ---- */
typedef struct blk {
    char *buf; /* where the block starts in the user's buffer */
    int count;
    MPI_Datatype dt;
    gdte_type_h type; /* retained while the side lives */
    int64_t nbytes, off;
    int null; /* an MPI_PROC_NULL neighbour: laid out, never moved */
} blk_t;

typedef enum { FORM_UNIFORM = 0, FORM_V, FORM_W, FORM_WA } form_t;

typedef struct side {
    int involved; /* the MPI touches this side's buffer on this process */
    int nb;
    form_t form;
    blk_t *b;
    gdte_ipo_kind_t kind;
    gdte_stage_t *stage;
    char *base; /* where the blocks lie in the staging (a receive: before the guard page) */
    int64_t total;
    MPI_Datatype etype; /* FORM_UNIFORM, FORM_V: the element the MPI is given (elem_type), */
    int64_t esize;      /* and its bytes */
    int ubytes;     /* FORM_UNIFORM: elements per block */
    int *bcounts;   /* the others: elements per block, */
    int *bdispls;   /* displacements (FORM_V: in elements; FORM_W: in bytes), */
    MPI_Aint *adispls; /* (FORM_WA, bytes) */
    MPI_Datatype *btypes; /* and each block's element (FORM_W, FORM_WA) */
    gdte_batch_piece_t *pieces; /* staged sides: side_exec's work list, */
    gdte_type_h *pinned;        /* and the types whose device units it pins, one per block */
    int touched;                /* some block has bytes in memory (side_kind) */
    int imported;               /* side_import ran: its answer */
    gdte_status_t import_st;
    const char *import_why;
} side_t;

static void side_free(side_t *sd)
{
    if (sd->b)
        for (int i = 0; i < sd->nb; i++)
            if (sd->b[i].type) gdte_type_release(sd->b[i].type);
    if (sd->stage) gdte_stage_release(sd->stage);
    free(sd->b);
    free(sd->bcounts);
    free(sd->bdispls);
    free(sd->adispls);
    free(sd->btypes);
    free(sd->pieces);
    free(sd->pinned);
    memset(sd, 0, sizeof *sd);
}

static char *at(const void *b, MPI_Aint off) { return (char *)((uintptr_t)b + (uintptr_t)off); }

/* On a Cartesian communicator without periods a neighbour may be MPI_PROC_NULL: the MPI neither
 * sends that block nor writes the one received from it, so neither is packed or unpacked (the
 * user's receive block keeps its bytes). Blocks 2d and 2d+1 are the neighbours at -1 and +1 in
 * dimension d, for sending and receiving alike. */
static void cart_nulls(MPI_Comm comm, side_t *s, side_t *r)
{
    int topo = MPI_UNDEFINED, nd = 0;
    if (PMPI_Topo_test(comm, &topo) != MPI_SUCCESS || topo != MPI_CART || PMPI_Cartdim_get(comm, &nd) != MPI_SUCCESS)
        return;
    for (int d = 0; d < nd; d++) {
        int lo = MPI_PROC_NULL, hi = MPI_PROC_NULL;
        if (PMPI_Cart_shift(comm, d, 1, &lo, &hi) != MPI_SUCCESS) continue;
        for (int k = 0; k < 2; k++) {
            int peer = k ? hi : lo, b = 2 * d + k;
            if (peer != MPI_PROC_NULL) continue;
            if (s && b < s->nb) s->b[b].null = 1;
            if (r && b < r->nb) r->b[b].null = 1;
        }
    }
}

/* Describe the blocks of one side from the application's arguments: `nb` blocks, in the form
 * given. Returns 0, or an MPI error class for arguments it cannot use. */
static int side_describe(side_t *sd, const gdte_coll_side_args_t *x, form_t form, int nb)
{
    sd->involved = 1;
    sd->form = form;
    sd->nb = nb;
    if (nb <= 0) return MPI_SUCCESS;
    if (!(sd->b = calloc((size_t)nb, sizeof *sd->b))) return MPI_ERR_NO_MEM;
    MPI_Aint lb = 0, ext = 0;
    if (form != FORM_W && form != FORM_WA) {
        if (x->type == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
        if (PMPI_Type_get_extent(x->type, &lb, &ext) != MPI_SUCCESS) return MPI_ERR_TYPE;
    }
    if (form != FORM_UNIFORM && (!x->counts || (!x->displs && !x->adispls) || (form != FORM_V && !x->types)))
        return MPI_ERR_ARG;
    for (int i = 0; i < nb; i++) {
        blk_t *k = &sd->b[i];
        switch (form) {
        case FORM_UNIFORM:
            k->count = x->count;
            k->dt = x->type;
            k->buf = at(x->buf, (MPI_Aint)i * x->count * ext);
            break;
        case FORM_V:
            k->count = x->counts[i];
            k->dt = x->type;
            k->buf = at(x->buf, (MPI_Aint)x->displs[i] * ext);
            break;
        case FORM_W:
        case FORM_WA:
            k->count = x->counts[i];
            k->dt = x->types[i];
            k->buf = at(x->buf, form == FORM_W ? (MPI_Aint)x->displs[i] : x->adispls[i]);
            break;
        }
        if (k->count < 0) return MPI_ERR_COUNT;
        if (k->count > 0 && k->dt == MPI_DATATYPE_NULL) return MPI_ERR_TYPE;
    }
    return MPI_SUCCESS;
}

/* Bytes [first, last] of a block (as gdte_ipo_buf_kind bounds them). 0: the block has none. */
static int blk_span(const blk_t *k, uintptr_t *first, uintptr_t *last)
{
    MPI_Count tlb = 0, text = 0, lb = 0, ext = 0;
    if (k->count <= 0 || PMPI_Type_get_true_extent_x(k->dt, &tlb, &text) != MPI_SUCCESS || text <= 0) return 0;
    if (k->count > 1 && PMPI_Type_get_extent_x(k->dt, &lb, &ext) != MPI_SUCCESS) return 0;
    MPI_Count a = tlb, b = tlb + (MPI_Count)(k->count - 1) * ext + text - 1;
    if (ext < 0) a = tlb + (MPI_Count)(k->count - 1) * ext, b = tlb + text - 1;
    *first = (uintptr_t)k->buf + (uintptr_t)a;
    *last = (uintptr_t)k->buf + (uintptr_t)b;
    return 1;
}

/* The memory kind of a side: of the bytes from the lowest block's first byte to the highest
 * block's last (one lookup when they lie in one allocation). One block is judged as a point-to-
 * point buffer is (MPI_BOTTOM structs field by field). Sets sd->touched: whether any block
 * has bytes at all (a side without is HOST). */
static gdte_ipo_kind_t side_kind(side_t *sd)
{
    sd->touched = 0;
    if (!sd->involved || sd->nb <= 0) return GDTE_IPO_HOST;
    int any = 0, single = -1;
    uintptr_t lo = 0, hi = 0;
    for (int i = 0; i < sd->nb; i++) {
        uintptr_t f, l;
        if (!blk_span(&sd->b[i], &f, &l)) continue;
        single = any ? -2 : i;
        if (!any || f < lo) lo = f;
        if (!any || l > hi) hi = l;
        any = 1;
    }
    if (!any) return GDTE_IPO_HOST;
    sd->touched = 1;
    if (single >= 0) return gdte_ipo_buf_kind(sd->b[single].buf, sd->b[single].count, sd->b[single].dt);
    uint64_t n = (uint64_t)(hi - lo) + 1;
    if (n <= INT_MAX) return gdte_ipo_buf_kind((const void *)lo, (int)n, MPI_BYTE);
    gdte_ipo_kind_t a = gdte_ipo_buf_kind((const void *)lo, 1, MPI_BYTE), b = gdte_ipo_buf_kind((const void *)hi, 1, MPI_BYTE);
    return a == b ? a : GDTE_IPO_MIXED;
}

/* The element a staged side hands the MPI: `size` bytes as one contiguous type, so that the MPI
 * gets the application's own counts (in elements of the application's size) rather than byte
 * counts. An MPI may combine one process's counts with another process's type: Open MPI 4.1's
 * intercommunicator Scatterv receives the root's counts in each receiver's type, and its
 * Allgatherv gathers every member's count in the leader's send type; a process that stages (its
 * buffers on the device) must then give counts in the same unit as a process whose buffers are
 * on the host and goes to the MPI as it is (with bytes, both returned MPI_ERR_TRUNCATE). One
 * type per size, made at first use and kept for the life of the MPI (persistent requests hold
 * them). MPI_BYTE for size 0 or 1, or when no type can be made (a failed MPI_Type_contiguous). */
static pthread_mutex_t elem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int64_t size;
    MPI_Datatype t;
} *elems;
static int nelems, cap_elems;

static MPI_Datatype elem_type(int64_t size)
{
    if (size <= 1 || size > INT_MAX) return MPI_BYTE;
    MPI_Datatype t = MPI_BYTE;
    pthread_mutex_lock(&elem_lock);
    for (int i = 0; i < nelems; i++)
        if (elems[i].size == size) {
            t = elems[i].t;
            goto out;
        }
    if (nelems == cap_elems) {
        int cap = cap_elems ? 2 * cap_elems : 16;
        void *p = realloc(elems, (size_t)cap * sizeof *elems);
        if (!p) goto out;
        elems = p;
        cap_elems = cap;
    }
    MPI_Datatype nt;
    if (PMPI_Type_contiguous((int)size, MPI_BYTE, &nt) != MPI_SUCCESS) goto out;
    if (PMPI_Type_commit(&nt) != MPI_SUCCESS) {
        PMPI_Type_free(&nt);
        goto out;
    }
    elems[nelems].size = size;
    elems[nelems++].t = t = nt;
out:
    pthread_mutex_unlock(&elem_lock);
    return t;
}

/* A block's element: the packed size of one element of its type (its nbytes over its count). */
static int64_t blk_esize(const blk_t *k) { return k->count > 0 ? k->nbytes / k->count : 0; }

static gdte_status_t side_import_once(side_t *sd, const char **why);
/* Import every block's type and lay the blocks out in staging; the byte arrays the MPI gets.
 * Once per side: a second call answers as the first did. */
static gdte_status_t side_import(side_t *sd, const char **why)
{
    if (!sd->imported) {
        sd->import_why = "";
        sd->import_st = side_import_once(sd, &sd->import_why);
        sd->imported = 1;
    }
    *why = sd->import_why;
    return sd->import_st;
}

static gdte_status_t side_import_once(side_t *sd, const char **why)
{
    int64_t total = 0, ub = -1;
    for (int i = 0; i < sd->nb; i++) {
        blk_t *k = &sd->b[i];
        k->nbytes = 0;
        if (k->count > 0) {
            gdte_type_h t;
            int64_t n;
            gdte_status_t st = gdte_ipo_type(k->dt, k->count, &t, &n);
            if (st != GDTE_OK) {
                *why = st == GDTE_ERR_OVERFLOW ? "a block's packed bytes do not fit an int count" : "a datatype";
                return st;
            }
            gdte_type_retain(t);
            k->type = t;
            k->nbytes = n;
        }
        if (sd->form == FORM_UNIFORM) {
            /* Blocks at multiples of one size: the MPI finds block i at i * bytes. */
            if (ub < 0) ub = k->nbytes;
            k->off = (int64_t)i * ub;
        } else {
            k->off = total;
        }
        total += k->nbytes;
    }
    if ((sd->form == FORM_V || sd->form == FORM_W) && total > INT_MAX) {
        *why = "the packed bytes of the blocks together do not fit the int displacements of this call";
        return GDTE_ERR_OVERFLOW;
    }
    sd->total = total;
    sd->ubytes = ub < 0 ? 0 : (int)ub;
    /* The unit the MPI counts in (elem_type): the element of the side's one type (FORM_UNIFORM,
     * FORM_V), of each block's type (FORM_W, FORM_WA); bytes where it has none (no block with
     * bytes, or elem_type could not make one). */
    sd->etype = MPI_BYTE;
    sd->esize = 1;
    int found = 0;
    for (int i = 0; i < sd->nb && (sd->form == FORM_UNIFORM || sd->form == FORM_V); i++) {
        int64_t es = blk_esize(&sd->b[i]);
        if (es <= 0) continue;
        if ((sd->etype = elem_type(es)) != MPI_BYTE) sd->esize = es;
        found = 1;
        break;
    }
    if (!found && sd->nb > 0 && (sd->form == FORM_UNIFORM || sd->form == FORM_V)) {
        /* No block with data (a count of 0): still the unit of the application's type, whose
         * size an MPI may combine with other counts (Open MPI 4.1's Allgatherv picks its
         * algorithm from the send type's size times the receive counts: a staging process with
         * MPI_BYTE there chose another algorithm than its host peers, and both waited). */
        int tsize = 0;
        if (sd->b[0].dt != MPI_DATATYPE_NULL && PMPI_Type_size(sd->b[0].dt, &tsize) == MPI_SUCCESS && tsize > 1 &&
            (sd->etype = elem_type(tsize)) != MPI_BYTE)
            sd->esize = tsize;
    }
    if (sd->form == FORM_UNIFORM) sd->ubytes = (int)(sd->ubytes / sd->esize);
    if (sd->form == FORM_UNIFORM || sd->nb <= 0) return GDTE_OK;
    size_t nb = (size_t)sd->nb;
    if (!(sd->bcounts = malloc(nb * sizeof(int)))) return GDTE_ERR_NO_MEMORY;
    if (sd->form == FORM_WA ? !(sd->adispls = malloc(nb * sizeof(MPI_Aint))) : !(sd->bdispls = malloc(nb * sizeof(int))))
        return GDTE_ERR_NO_MEMORY;
    if ((sd->form == FORM_W || sd->form == FORM_WA) && !(sd->btypes = malloc(nb * sizeof(MPI_Datatype))))
        return GDTE_ERR_NO_MEMORY;
    for (int i = 0; i < sd->nb; i++) {
        const blk_t *k = &sd->b[i];
        if (sd->btypes) {
            /* w forms: each block in its own element, displacements in bytes. */
            int64_t es = blk_esize(k);
            MPI_Datatype t = elem_type(es);
            sd->btypes[i] = t;
            sd->bcounts[i] = (int)(t == MPI_BYTE ? k->nbytes : k->count);
        } else {
            /* FORM_V: every block a whole number of the side's elements, and so its offset. */
            sd->bcounts[i] = (int)(k->nbytes / sd->esize);
        }
        if (sd->adispls) sd->adispls[i] = (MPI_Aint)k->off;
        else sd->bdispls[i] = (int)(sd->btypes ? k->off : k->off / sd->esize);
    }
    return GDTE_OK;
}

/* The side as the MPI sees it: bytes in staging when staged, else as the application gave it. */
static eff_t side_eff(const side_t *sd, const gdte_coll_side_args_t *x)
{
    if (!sd->stage) return *x;
    eff_t e;
    memset(&e, 0, sizeof e);
    e.buf = sd->base;
    e.count = sd->ubytes;
    e.counts = sd->bcounts;
    e.displs = sd->bdispls;
    e.adispls = sd->adispls;
    e.type = sd->etype;
    e.types = sd->btypes;
    return e;
}

/* ---- running a batch ---- */
static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;
static gdte_stream_t coll_stream;
static gdte_gpu_event_t coll_ev_app;
#define ZERO_COPY_MAX (64 * 1024) /* pinned staging written or read by the kernel itself up to this */

gdte_status_t gdte_coll_stream_after_app(gdte_stream_t *s, gdte_gpu_event_t *ev)
{
    gdte_status_t st;
    if (!*s) {
        if ((st = gdte_gpu_stream_create(s)) != GDTE_OK) return st;
        if ((st = gdte_gpu_event_create(ev, 0)) != GDTE_OK) {
            gdte_gpu_stream_destroy(*s);
            *s = NULL;
            return st;
        }
    }
    if ((st = gdte_gpu_event_record(*ev, NULL)) != GDTE_OK) return st;
    return gdte_gpu_stream_wait_event(*s, *ev);
}

static void unpin_all(gdte_type_h *t, int n)
{
    int dev = n > 0 ? gdte_gpu_current_device() : 0;
    for (int i = 0; i < n; i++) gdte_devplan_unpin(t[i], dev);
}

/* The work list of block `only` (-1: every block but `skip`) of a side: each piece's packed
 * stream at its block's offset in the side's staging, or, given `src`, at src[i] itself (a
 * peer's staging, mapped: gdte_gpu_exec_batch with no packed buffer; NULL: the block is not
 * moved). Device UNITS plans are pinned into sd->pinned (*npinned_p; the caller unpins them
 * once the kernel is done); [*lo_p, *hi_p) is the staging the pieces touch. */
static gdte_status_t side_pieces(side_t *sd, int only, int skip, char *const *src, const char *omit, int *n_p,
                                 int *npinned_p, int64_t *lo_p, int64_t *hi_p)
{
    gdte_batch_piece_t *p = sd->pieces;
    gdte_type_h *pinned = sd->pinned;
    int npinned = 0, n = 0;
    gdte_status_t st = GDTE_OK;
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < sd->nb && st == GDTE_OK; i++) {
        blk_t *k = &sd->b[i];
        if (k->nbytes <= 0 || k->null || (only >= 0 && i != only) || i == skip || (src && !src[i]) || (omit && omit[i]))
            continue;
        gdte_layout_t L;
        if ((st = gdte_engine_layout(k->type, k->count, &L)) != GDTE_OK) break;
        char *user = k->buf;
        if (!user && L.true_lb != 0) {
            /* MPI_BOTTOM: absolute displacements; rebased on the first touched byte, as gdte_pack does. */
            user = (char *)(uintptr_t)L.true_lb;
            L.disp -= L.true_lb;
        }
        if (sd->kind == GDTE_IPO_DEVICE && L.kind == GDTE_LAYOUT_KIND_UNITS) {
            /* Pinned until the kernel is done: another block's upload must not evict it. */
            const gdte_unit_t *du;
            if ((st = gdte_devplan_pin(k->type, &du)) != GDTE_OK) break;
            pinned[npinned++] = k->type;
            L.units = du;
        }
        p[n].L = L;
        p[n].user = user;
        p[n].packed = src ? (int64_t)(uintptr_t)src[i] : k->off;
        p[n].mirror = 0;
        if (k->off < lo) lo = k->off;
        if (k->off + k->nbytes > hi) hi = k->off + k->nbytes;
        n++;
    }
    *n_p = n;
    *npinned_p = npinned;
    *lo_p = lo;
    *hi_p = hi;
    return st;
}

/* Block `only` (-1: every block but `skip`, and but those omit[] marks) of a side, between the
 * user's buffers and the side's staging (sd->base), or with `src` the packed streams at src[i]
 * (side_pieces), in one batch. Caller holds nothing. */
static gdte_status_t side_exec_at(side_t *sd, gdte_dir_t dir, int only, int skip, const char *omit, char *const *src)
{
    gdte_batch_piece_t *p = sd->pieces;
    gdte_type_h *pinned = sd->pinned;
    int n = 0, npinned = 0;
    int64_t lo = 0, hi = 0;
    gdte_status_t st = side_pieces(sd, only, skip, src, omit, &n, &npinned, &lo, &hi);
    char *packed = src ? NULL : sd->base; /* NULL: each piece's address is its own (batch_plan.h) */
    if (st != GDTE_OK || n == 0) {
        unpin_all(pinned, npinned);
        return st;
    }
    if (sd->kind == GDTE_IPO_HOST) {
        /* The host side of a call whose other side is on the device (see gdte_ipo_coll): the
         * host executor, piece by piece; no batch to count. */
        for (int i = 0; i < n; i++)
            gdte_host_exec(&p[i].L, dir, p[i].user, (char *)((uintptr_t)packed + (uintptr_t)p[i].packed), 0, p[i].L.total);
        return GDTE_OK;
    }
    if (sd->kind == GDTE_IPO_FAKE) {
        gdte_host_exec_batch(p, n, dir, packed);
        return GDTE_OK;
    }
    pthread_mutex_lock(&gpu_lock);
    gdte_stage_t *desc = NULL, *tmp = NULL;
    /* After the application's legacy-default-stream work (a kernel that produced the data, or
     * one still reading the receive buffer), as a blocking stream would be. */
    st = gdte_coll_stream_after_app(&coll_stream, &coll_ev_app);
    if (st == GDTE_OK) st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, gdte_gpu_exec_batch_scratch(n), &desc);
    char *target = packed;
    if (st == GDTE_OK && packed && sd->stage->kind == GDTE_STAGE_HOST) {
        if (sd->stage->pinned && hi - lo <= ZERO_COPY_MAX) {
            void *d = NULL;
            st = gdte_gpu_host_device_pointer(sd->base, &d);
            target = d;
        } else if ((st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, (size_t)hi, &tmp)) == GDTE_OK) {
            /* Through device memory and one copy: the kernel's scattered side stays local. */
            target = tmp->ptr;
            if (dir == GDTE_DIR_UNPACK)
                st = gdte_gpu_memcpy_async(target + lo, sd->base + lo, (size_t)(hi - lo), coll_stream);
        }
    }
    if (st == GDTE_OK) st = gdte_gpu_exec_batch(p, n, dir, target, desc->ptr, coll_stream);
    if (st == GDTE_OK && tmp && dir == GDTE_DIR_PACK)
        st = gdte_gpu_memcpy_async(sd->base + lo, target + lo, (size_t)(hi - lo), coll_stream);
    if (coll_stream) {
        gdte_status_t s2 = gdte_gpu_stream_synchronize(coll_stream);
        if (st == GDTE_OK) st = s2;
    }
    if (desc) gdte_stage_release(desc);
    if (tmp) gdte_stage_release(tmp);
    pthread_mutex_unlock(&gpu_lock);
    unpin_all(pinned, npinned);
    return st;
}

static gdte_status_t side_exec(side_t *sd, gdte_dir_t dir, int only, int skip)
{
    return side_exec_at(sd, dir, only, skip, NULL, NULL);
}

/* ---- one call ---- */
typedef enum { PRE_NONE = 0, PRE_ALL, PRE_MINE } pre_t;

typedef struct coll {
    side_t s, r;
    int skip;  /* receive block not to unpack (-1: none) */
    pre_t pre; /* MPI_IN_PLACE: which receive blocks the MPI reads */
    int rank;  /* this process in the communicator (PRE_MINE's block) */
    const char *fn;
    MPI_Comm comm;
    /* A side partly host and partly device memory: the call still takes part in the MPI's
     * collective with zeroed bytes of the right sizes (the other processes cannot know, and
     * would wait for it forever), nothing of the application's buffer is read or written, and
     * each completion reports MPI_ERR_BUFFER. */
    const char *bad;
} coll_t;

static void coll_free(coll_t *c)
{
    side_free(&c->s);
    side_free(&c->r);
    free(c);
}

static int coll_error(MPI_Comm comm, const char *fn, int code, const char *what, const char *why);
/* The error of a call with a side partly host and partly device memory (coll_t.bad). */
static int coll_bad(coll_t *c)
{
    return coll_error(c->comm, c->fn, MPI_ERR_BUFFER, c->bad,
                      "partly host and partly device memory; gdte moves one memory kind per buffer");
}

static int coll_unpack(coll_t *c)
{
    if (c->bad) return coll_bad(c);
    if (!c->r.stage || c->r.total == 0) return MPI_SUCCESS;
    gdte_status_t st = side_exec(&c->r, GDTE_DIR_UNPACK, -1, c->skip);
    if (st != GDTE_OK) return gdte_ipo_fail(c->comm, c->fn, st);
    n_bytes_unpacked += c->r.total;
    return MPI_SUCCESS;
}

/* Before the MPI's call (at every start of a persistent one): the send side packed by one
 * batch, or under MPI_IN_PLACE the receive blocks the MPI reads. */
static int coll_pack(coll_t *c)
{
    gdte_status_t st = GDTE_OK;
    if (c->bad) {
        /* Zeroes where the bytes would be (the staging is pooled: no other call's bytes leak). */
        if (c->s.stage && c->s.total > 0) memset(c->s.stage->ptr, 0, (size_t)c->s.total);
        if (c->r.stage && c->r.total > 0) memset(c->r.base, 0, (size_t)c->r.total);
        n_calls++;
        return MPI_SUCCESS;
    }
    if (c->s.stage && c->s.total > 0) {
        if ((st = side_exec(&c->s, GDTE_DIR_PACK, -1, -1)) == GDTE_OK) n_bytes_packed += c->s.total;
    }
    if (st == GDTE_OK && c->r.stage && c->pre != PRE_NONE && c->r.total > 0) {
        if ((st = side_exec(&c->r, GDTE_DIR_PACK, c->pre == PRE_MINE ? c->rank : -1, -1)) == GDTE_OK)
            n_bytes_packed += c->r.total;
    }
    if (st != GDTE_OK) return gdte_ipo_fail(c->comm, c->fn, st);
    n_calls++;
    return MPI_SUCCESS;
}

/* MPI_Start/MPI_Startall of a persistent collective: pack, then the MPI starts its request. */
static int coll_start(gdte_ipo_req_t *r) { return coll_pack(r->ctx); }

static int coll_finish(gdte_ipo_req_t *r, MPI_Status *st, int rc)
{
    (void)st;
    coll_t *c = r->ctx;
    return rc == MPI_SUCCESS ? coll_unpack(c) : rc;
}

static void coll_fini(gdte_ipo_req_t *r)
{
    if (r->ctx) coll_free(r->ctx);
    r->ctx = NULL;
}

void gdte_coll_req_insert(gdte_ipo_req_t *r, MPI_Request handle, MPI_Comm comm, int persistent,
                          int (*start)(gdte_ipo_req_t *), int (*finish)(gdte_ipo_req_t *, MPI_Status *, int),
                          void (*fini)(gdte_ipo_req_t *), void *ctx)
{
    r->handle = handle;
    r->persistent = persistent;
    r->active = !persistent;
    r->comm = comm;
    r->dt = MPI_DATATYPE_NULL;
    r->start = persistent ? start : NULL;
    r->finish = finish;
    r->fini = fini;
    r->ctx = ctx;
    gdte_ipo_req_insert(r);
}

static int coll_error(MPI_Comm comm, const char *fn, int code, const char *what, const char *why)
{
    gdte_error("%s: %s: %s", fn, what, why);
    PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, code);
    return code;
}

/* Which blocks each side has on this process, and what MPI_IN_PLACE asks. */
static int describe(const gdte_coll_args_t *a, coll_t *c)
{
    MPI_Comm comm = a->comm;
    int inter = comm_inter(comm), rank = c->rank, peers = comm_peers(comm), rc = MPI_SUCCESS;
    int in_place_s = a->s.buf == MPI_IN_PLACE, in_place_r = a->r.buf == MPI_IN_PLACE;
    int at_root = a->root == MPI_ROOT || (!inter && a->root == rank);
    int nonroot = a->root != MPI_ROOT && a->root != MPI_PROC_NULL;
    int in = 0, out = 0;
    c->pre = PRE_NONE;
    c->skip = -1;
    if (peers < 0) return MPI_ERR_COMM;
    switch (a->op) {
    case GDTE_COLL_ALLTOALL:
    case GDTE_COLL_ALLTOALLV:
    case GDTE_COLL_ALLTOALLW: {
        form_t f = a->op == GDTE_COLL_ALLTOALL ? FORM_UNIFORM : a->op == GDTE_COLL_ALLTOALLV ? FORM_V : FORM_W;
        if (!in_place_s) rc = side_describe(&c->s, &a->s, f, peers);
        else c->pre = PRE_ALL;
        if (rc == MPI_SUCCESS) rc = side_describe(&c->r, &a->r, f, peers);
        break;
    }
    case GDTE_COLL_NALLTOALL:
    case GDTE_COLL_NALLTOALLV:
    case GDTE_COLL_NALLTOALLW: {
        if (topo_degrees(comm, &in, &out)) return MPI_ERR_TOPOLOGY;
        form_t f = a->op == GDTE_COLL_NALLTOALL ? FORM_UNIFORM : a->op == GDTE_COLL_NALLTOALLV ? FORM_V : FORM_WA;
        rc = side_describe(&c->s, &a->s, f, out);
        if (rc == MPI_SUCCESS) rc = side_describe(&c->r, &a->r, f, in);
        if (rc == MPI_SUCCESS) cart_nulls(comm, &c->s, &c->r);
        break;
    }
    case GDTE_COLL_NALLGATHER:
    case GDTE_COLL_NALLGATHERV:
        if (topo_degrees(comm, &in, &out)) return MPI_ERR_TOPOLOGY;
        rc = side_describe(&c->s, &a->s, FORM_UNIFORM, out > 0 ? 1 : 0);
        if (rc == MPI_SUCCESS) rc = side_describe(&c->r, &a->r, a->op == GDTE_COLL_NALLGATHER ? FORM_UNIFORM : FORM_V, in);
        if (rc == MPI_SUCCESS) cart_nulls(comm, NULL, &c->r);
        break;
    case GDTE_COLL_ALLGATHER:
    case GDTE_COLL_ALLGATHERV:
        if (!in_place_s) rc = side_describe(&c->s, &a->s, FORM_UNIFORM, 1);
        else c->pre = PRE_MINE, c->skip = rank;
        if (rc == MPI_SUCCESS) rc = side_describe(&c->r, &a->r, a->op == GDTE_COLL_ALLGATHER ? FORM_UNIFORM : FORM_V, peers);
        break;
    case GDTE_COLL_GATHER:
    case GDTE_COLL_GATHERV:
        if (nonroot && !in_place_s) rc = side_describe(&c->s, &a->s, FORM_UNIFORM, 1);
        if (at_root && in_place_s && !inter) c->skip = rank; /* the root's own block stays where it is */
        if (rc == MPI_SUCCESS && at_root)
            rc = side_describe(&c->r, &a->r, a->op == GDTE_COLL_GATHER ? FORM_UNIFORM : FORM_V, peers);
        break;
    case GDTE_COLL_SCATTER:
    case GDTE_COLL_SCATTERV:
        if (at_root) rc = side_describe(&c->s, &a->s, a->op == GDTE_COLL_SCATTER ? FORM_UNIFORM : FORM_V, peers);
        if (rc == MPI_SUCCESS && nonroot && !in_place_r) rc = side_describe(&c->r, &a->r, FORM_UNIFORM, 1);
        break;
    case GDTE_COLL_BCAST:
        if (a->root == MPI_PROC_NULL) break;
        if (at_root) rc = side_describe(&c->s, &a->s, FORM_UNIFORM, 1);
        else rc = side_describe(&c->r, &a->r, FORM_UNIFORM, 1);
        break;
    default: return MPI_ERR_INTERN;
    }
    return rc;
}

/* Import a side and give it staging: of kind `sk` (-1: what the MPI underneath reads) when
 * `bytes` is set, else only the work list's arrays. */
static int stage_side_as(coll_t *c, side_t *sd, int recv, int sk, int bytes);
static int stage_side(coll_t *c, side_t *sd, int recv) { return stage_side_as(c, sd, recv, -1, 1); }

static int stage_side_as(coll_t *c, side_t *sd, int recv, int sk_want, int bytes)
{
    const char *why = "";
    gdte_status_t st = side_import(sd, &why);
    if (st != GDTE_OK) {
        int code = gdte_mpi_status_to_mpi_error(st);
        return coll_error(c->comm, c->fn, code == MPI_SUCCESS ? MPI_ERR_INTERN : code, recv ? "recvbuf" : "sendbuf", why);
    }
    size_t nb = (size_t)(sd->nb > 0 ? sd->nb : 1);
    if (!(sd->pieces = malloc(nb * sizeof *sd->pieces)) || !(sd->pinned = malloc(nb * sizeof *sd->pinned)))
        return gdte_ipo_fail(c->comm, c->fn, GDTE_ERR_NO_MEMORY);
    if (!bytes) return MPI_SUCCESS;
    gdte_stage_kind_t sk = sk_want >= 0 ? (gdte_stage_kind_t)sk_want
                           : gdte_ipo_gpu_aware() && sd->kind != GDTE_IPO_HOST && !c->bad ? GDTE_STAGE_DEVICE
                                                                                         : GDTE_STAGE_HOST;
    if ((st = gdte_stage_acquire(sk, sd->kind == GDTE_IPO_FAKE, (size_t)sd->total, &sd->stage)) != GDTE_OK)
        return gdte_ipo_fail(c->comm, c->fn, st);
    /* A receive is posted before the guard page of host staging (staging.h). */
    sd->base = recv ? gdte_stage_tail(sd->stage, (size_t)sd->total) : sd->stage->ptr;
    return MPI_SUCCESS;
}

/* ---- within the node: GPU to GPU ----
 * A blocking Alltoall(v,w), Allgather(v), Gather(v), Scatter(v) or Bcast on an intracommunicator
 * whose other members are all framing peers (interpose_node.c: the same answer on every member)
 * first asks, by a one-integer MPI_Allreduce, whether every member's buffers are device memory
 * (or have no bytes). If so, no byte goes through the MPI: each process packs what it sends into
 * device staging by one batched kernel, an MPI_Alltoall of small records tells each receiver
 * where its pieces lie in each sender's staging (and hands over the staging's IPC handle), each
 * receiver unpacks every piece from the senders' staging, mapped, by one batched kernel, and an
 * MPI_Barrier keeps each staging until its last reader is done. Otherwise every member goes on
 * as before (host buffers to the MPI untouched, device ones staged): the decision is the same on
 * every member, so all of them call the same collectives underneath. */
typedef struct node_rec {
    int64_t off;    /* the piece for the receiver: its offset from addr (-1: none) */
    int64_t nbytes; /* and its packed bytes */
    uint64_t addr;  /* where the sender's region (its staging, or a dense send block) starts there */
    uint64_t rbase; /* IPC: the base of the allocation holding it, in the sender */
    int64_t pid;    /* fake device: the sender's process */
    int32_t status; /* GDTE_OK, or why the sender has nothing to offer */
    int32_t world;  /* the sender's rank in MPI_COMM_WORLD */
    int32_t keep;   /* the memory is pooled staging that outlives the call: its mapping may stay */
    int32_t pad;
    gdte_gpu_ipc_handle_t h;
} node_rec_t;

static int node_op(gdte_coll_op_t op)
{
    switch (op) {
    case GDTE_COLL_ALLTOALL:
    case GDTE_COLL_ALLTOALLV:
    case GDTE_COLL_ALLTOALLW:
    case GDTE_COLL_ALLGATHER:
    case GDTE_COLL_ALLGATHERV:
    case GDTE_COLL_GATHER:
    case GDTE_COLL_GATHERV:
    case GDTE_COLL_SCATTER:
    case GDTE_COLL_SCATTERV:
    case GDTE_COLL_BCAST:
    case GDTE_COLL_NALLTOALL:
    case GDTE_COLL_NALLTOALLV:
    case GDTE_COLL_NALLTOALLW:
    case GDTE_COLL_NALLGATHER:
    case GDTE_COLL_NALLGATHERV: return 1;
    default: return 0;
    }
}

static int node_neighbor(gdte_coll_op_t op)
{
    return op == GDTE_COLL_NALLTOALL || op == GDTE_COLL_NALLTOALLV || op == GDTE_COLL_NALLTOALLW ||
           op == GDTE_COLL_NALLGATHER || op == GDTE_COLL_NALLGATHERV;
}

/* A side this process may take into the node path: not used, without bytes, or on the device. */
static int node_side_ok(const side_t *sd)
{
    return !sd->touched || sd->kind == GDTE_IPO_DEVICE || sd->kind == GDTE_IPO_FAKE;
}

/* The block this process sends to member d, and the side it lies on (the receive side under
 * MPI_IN_PLACE); -1: none. Mirrors what each collective moves (describe() made the sides). */
static int node_send_blk(const coll_t *c, const gdte_coll_args_t *a, int d, side_t **sd_p)
{
    side_t *s = (side_t *)&c->s, *r = (side_t *)&c->r;
    int me = c->rank, b = -1;
    *sd_p = s;
    switch (a->op) {
    case GDTE_COLL_ALLTOALL:
    case GDTE_COLL_ALLTOALLV:
    case GDTE_COLL_ALLTOALLW:
        if (c->pre == PRE_ALL) *sd_p = r;
        b = d;
        break;
    case GDTE_COLL_ALLGATHER:
    case GDTE_COLL_ALLGATHERV:
        if (c->pre == PRE_MINE) *sd_p = r, b = d == me ? -1 : me;
        else b = 0;
        break;
    case GDTE_COLL_GATHER:
    case GDTE_COLL_GATHERV: b = d == a->root ? 0 : -1; break; /* the root in place has no send side */
    case GDTE_COLL_SCATTER:
    case GDTE_COLL_SCATTERV:
        b = me != a->root || (d == me && c->r.nb <= 0) ? -1 : d; /* the root in place keeps its own */
        break;
    case GDTE_COLL_BCAST: b = me == a->root && d != me ? 0 : -1; break;
    default: break;
    }
    return b >= 0 && b < (*sd_p)->nb ? b : -1;
}

/* The block of the receive side that member q fills; -1: none. */
static int node_recv_blk(const coll_t *c, const gdte_coll_args_t *a, int q)
{
    int me = c->rank, b = -1;
    switch (a->op) {
    case GDTE_COLL_ALLTOALL:
    case GDTE_COLL_ALLTOALLV:
    case GDTE_COLL_ALLTOALLW: b = q; break;
    case GDTE_COLL_ALLGATHER:
    case GDTE_COLL_ALLGATHERV:
    case GDTE_COLL_GATHER:
    case GDTE_COLL_GATHERV: b = q == me && c->skip == me ? -1 : q; break; /* r has no blocks off the root */
    case GDTE_COLL_SCATTER:
    case GDTE_COLL_SCATTERV: b = q == a->root ? 0 : -1; break;
    case GDTE_COLL_BCAST: b = q == a->root && me != a->root ? 0 : -1; break;
    default: break;
    }
    return b >= 0 && b < c->r.nb ? b : -1;
}

/* A send block whose bytes are dense in the user's buffer: its first byte (*start_p). */
static int blk_dense(const blk_t *k, char **start_p)
{
    gdte_layout_t L;
    if (k->nbytes <= 0 || gdte_engine_layout(k->type, k->count, &L) != GDTE_OK || L.kind != GDTE_LAYOUT_KIND_CONTIG)
        return 0;
    *start_p = (char *)((uintptr_t)k->buf + (uintptr_t)L.disp); /* MPI_BOTTOM: disp is the address */
    return 1;
}

/* What this process offers for send block b of side sd: the block itself where it is dense and
 * exported (dense[b], with its record base[b]), else its place in the staging (stage). */
static void node_offer(const side_t *sd, int b, const char *dense, const node_rec_t *base, const node_rec_t *stage,
                       node_rec_t *out)
{
    if (b < 0 || b >= sd->nb || sd->b[b].nbytes <= 0 || sd->b[b].null) {
        *out = *stage;
        out->off = -1;
        out->nbytes = 0;
        return;
    }
    *out = dense && dense[b] ? base[b] : *stage;
    out->off = dense && dense[b] ? 0 : sd->b[b].off;
    out->nbytes = sd->b[b].nbytes;
}

/* The node path for collective `a` (node_op, blocking, on a communicator of framing peers):
 * every member calls it. Returns 0 when the members' buffers do not all allow it (the caller
 * goes on, on every member alike), else 1 with *rc_p the call's result. `described`: describe()
 * succeeded on this process and the sides' kinds are set. */
static int coll_node(const gdte_coll_args_t *a, coll_t *c, int described, int *rc_p)
{
    MPI_Comm comm = a->comm;
    int fake = gdte_ipo_node_fake(), me = c->rank, my_world = gdte_ipo_node_world_rank();
    int neighbor = node_neighbor(a->op), nout = comm_peers(comm), nin = nout;
    if (neighbor && topo_degrees(comm, &nin, &nout)) nin = nout = 0; /* describe() read them already */
    /* The side this process's pieces come from: the receive side under MPI_IN_PLACE (packed
     * first: the peers must not read blocks this process is about to overwrite), else the send
     * side, whose dense blocks are read where they are. */
    side_t *ps = c->pre != PRE_NONE ? &c->r : &c->s;
    size_t nps = (size_t)(ps->nb > 0 ? ps->nb : 1);
    /* Taken before the agreement: a process that cannot take part says so there, and every
     * process then goes the other way (no one is left waiting in an exchange). */
    char *dense = calloc(nps, 1);
    node_rec_t *base = calloc(nps, sizeof *base);
    node_rec_t *out = calloc((size_t)(nout > 0 ? nout : 1), sizeof *out);
    node_rec_t *in = calloc((size_t)(nin > 0 ? nin : 1), sizeof *in);
    char **src = calloc((size_t)(c->r.nb > 0 ? c->r.nb : 1), sizeof *src);
    int ok = described && dense && base && out && in && src && node_side_ok(&c->s) && node_side_ok(&c->r);
    const char *why = "";
    if (ok && (side_import(&c->s, &why) != GDTE_OK || side_import(&c->r, &why) != GDTE_OK)) ok = 0;
    int all = 0, rc = PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    if (rc != MPI_SUCCESS || !all) {
        free(dense);
        free(base);
        free(out);
        free(in);
        free(src);
        *rc_p = rc;
        return rc != MPI_SUCCESS;
    }
    gdte_status_t st = GDTE_OK;
    node_rec_t stage;
    memset(&stage, 0, sizeof stage);
    stage.world = my_world;
    stage.pid = (int64_t)getpid();
    /* Dense send blocks offered in place (device memory another process can map). */
    int64_t packed_bytes = ps->total, ndense = 0, inplace_max = gdte_knob(GDTE_KNOB_MPI_COLL_INPLACE_MAX);
    for (int i = 0; ps == &c->s && i < ps->nb; i++) {
        char *at;
        /* Past GDTE_MPI_COLL_INPLACE_MAX a block is copied into the pooled staging instead: a
         * peer maps application memory anew each call (its mapping must not outlive the call),
         * and mapping a large allocation costs more than copying the block. */
        if (ps->b[i].nbytes > inplace_max || !blk_dense(&ps->b[i], &at)) continue;
        base[i] = stage;
        base[i].addr = (uint64_t)(uintptr_t)at;
        int64_t soff = 0;
        if (!fake && gdte_ipo_node_export(at, &base[i].h, &soff, &base[i].rbase) != GDTE_OK) continue;
        dense[i] = 1;
        ndense++;
        n_node_inplace++;
        packed_bytes -= ps->b[i].nbytes;
    }
    /* Work lists for both sides; staging for what is packed. */
    if (c->s.nb > 0 &&
        stage_side_as(c, &c->s, 0, GDTE_STAGE_DEVICE, ps == &c->s && packed_bytes > 0) != MPI_SUCCESS)
        st = GDTE_ERR_NO_MEMORY;
    if (st == GDTE_OK && c->r.nb > 0 &&
        stage_side_as(c, &c->r, 1, GDTE_STAGE_DEVICE, ps == &c->r && packed_bytes > 0) != MPI_SUCCESS)
        st = GDTE_ERR_NO_MEMORY;
    if (st == GDTE_OK && ps->stage) {
        /* The pieces in place before any peer may read them: the records go out after this. */
        if ((st = side_exec_at(ps, GDTE_DIR_PACK, c->pre == PRE_MINE ? me : -1, -1, dense, NULL)) == GDTE_OK)
            n_bytes_packed += packed_bytes;
        stage.addr = (uint64_t)(uintptr_t)ps->base;
        stage.keep = !ps->stage->overflow;
        int64_t soff = 0;
        if (st == GDTE_OK && !fake) st = gdte_ipo_node_export(ps->base, &stage.h, &soff, &stage.rbase);
    } else if (st == GDTE_OK && ndense && !fake) {
        /* Read where they are: after the application's queued work that writes them. */
        pthread_mutex_lock(&gpu_lock);
        st = gdte_coll_stream_after_app(&coll_stream, &coll_ev_app);
        if (st == GDTE_OK) st = gdte_gpu_stream_synchronize(coll_stream);
        pthread_mutex_unlock(&gpu_lock);
    }
    stage.status = (int32_t)st;
    for (int i = 0; i < ps->nb; i++) base[i].status = (int32_t)st;
    /* The records: per member (Alltoall) or per neighbour (Neighbor_alltoall, whose routing is the
     * MPI's own, as the data's would be: directions on a Cartesian communicator, repeated
     * neighbours in order). */
    for (int d = 0; d < nout; d++) {
        side_t *sd = ps;
        int b = neighbor ? (a->op == GDTE_COLL_NALLGATHER || a->op == GDTE_COLL_NALLGATHERV ? 0 : d)
                         : node_send_blk(c, a, d, &sd);
        node_offer(sd, b, sd == ps ? dense : NULL, base, &stage, &out[d]);
    }
    for (int i = 0; i < nin; i++) in[i].off = -1; /* an MPI_PROC_NULL neighbour writes none */
    rc = neighbor ? PMPI_Neighbor_alltoall(out, (int)sizeof *out, MPI_BYTE, in, (int)sizeof *in, MPI_BYTE, comm)
                  : PMPI_Alltoall(out, (int)sizeof *out, MPI_BYTE, in, (int)sizeof *in, MPI_BYTE, comm);
    /* Each piece from its sender, checked against what this process expects. */
    char *tmp = NULL;
    int any = 0;
    int64_t got = 0;
    if (rc == MPI_SUCCESS && fake && c->r.total > 0 && !(tmp = malloc((size_t)c->r.total))) st = GDTE_ERR_NO_MEMORY;
    for (int q = 0; rc == MPI_SUCCESS && q < nin; q++) {
        int b = neighbor ? (q < c->r.nb && !c->r.b[q].null ? q : -1) : node_recv_blk(c, a, q);
        if (neighbor && b < 0) continue;
        int64_t want = b >= 0 ? c->r.b[b].nbytes : 0, have = in[q].off >= 0 ? in[q].nbytes : 0;
        if (want != have) {
            gdte_error("%s: %s %d sends %lld bytes where rank %d expects %lld (the type signatures differ)", c->fn,
                       neighbor ? "the neighbour of block" : "rank", q, (long long)have, me, (long long)want);
            if (st == GDTE_OK) st = GDTE_ERR_TRUNCATE;
            continue;
        }
        if (have == 0) continue;
        if (in[q].status != GDTE_OK) {
            if (st == GDTE_OK) st = (gdte_status_t)in[q].status;
            continue;
        }
        /* This process's own pieces too, through the same mechanism: process_vm_readv reads the
         * calling process, and map_peer answers an allocation of its own with itself. */
        uint64_t from = in[q].addr + (uint64_t)in[q].off;
        char *at = NULL;
        if (fake) {
            struct iovec l = {tmp + c->r.b[b].off, (size_t)have};
            struct iovec r = {(void *)(uintptr_t)from, (size_t)have};
            if (process_vm_readv((pid_t)in[q].pid, &l, 1, &r, 1, 0) != (ssize_t)have && st == GDTE_OK)
                st = GDTE_ERR_TRANSPORT;
        } else {
            void *mb = NULL;
            gdte_status_t s2 = gdte_ipo_node_map(in[q].world, in[q].rbase, &in[q].h, &mb);
            if (s2 == GDTE_OK) at = (char *)mb + (from - in[q].rbase);
            else if (st == GDTE_OK) st = s2;
        }
        src[b] = at;
        any = 1;
        got += have;
    }
    if (rc == MPI_SUCCESS && st == GDTE_OK && any) {
        if (fake) {
            c->r.base = tmp;
            st = side_exec(&c->r, GDTE_DIR_UNPACK, -1, c->skip);
        } else {
            st = side_exec_at(&c->r, GDTE_DIR_UNPACK, -1, c->skip, NULL, src);
        }
        if (st == GDTE_OK) n_bytes_unpacked += got;
    }
    /* Every reader done before any staging goes back to its pool, or the caller reuses a send
     * buffer read in place. */
    int rc2 = PMPI_Barrier(comm);
    if (rc == MPI_SUCCESS) rc = rc2;
    /* Only the peers' pooled staging stays mapped (cached for the next call): a mapping of the
     * application's memory (a dense send block) or of staging freed on release (past
     * GDTE_STAGING_MAX) would outlive the memory, and then the runtime refuses the application's
     * own IPC mapping of memory that reuses it (H100: bench/coll's expert got
     * cudaErrorAlreadyMapped after gdte's Allgather and Bcast had read its peers in place). */
    for (int q = 0; !fake && rc == MPI_SUCCESS && q < nin; q++)
        if (in[q].off >= 0 && in[q].nbytes > 0 && in[q].status == GDTE_OK && !in[q].keep)
            gdte_ipo_node_unmap(in[q].world, in[q].rbase);
    free(tmp);
    free(dense);
    free(base);
    free(out);
    free(in);
    free(src);
    if (c->s.kind != GDTE_IPO_HOST || c->r.kind != GDTE_IPO_HOST) {
        n_calls++;
        n_node_calls++;
    }
    if (rc == MPI_SUCCESS && st != GDTE_OK) {
        int code = gdte_mpi_status_to_mpi_error(st);
        rc = coll_error(comm, c->fn, code == MPI_SUCCESS ? MPI_ERR_INTERN : code, "GPU to GPU within the node",
                        gdte_status_string(st));
    }
    *rc_p = rc;
    return 1;
}

int gdte_ipo_coll(const gdte_coll_args_t *a)
{
    const char *fn = op_name(a);
    coll_t *c = calloc(1, sizeof *c);
    if (!c) return gdte_ipo_fail(a->comm, fn, GDTE_ERR_NO_MEMORY);
    c->fn = fn;
    c->comm = a->comm;
    c->rank = comm_rank(a->comm);
    int rc = describe(a, c);
    if (rc == MPI_SUCCESS) {
        c->s.kind = side_kind(&c->s);
        c->r.kind = side_kind(&c->r);
    }
    if (!a->req && a->init == GDTE_PINIT_NONE && node_op(a->op) && gdte_knob(GDTE_KNOB_MPI_COLL_NODE) &&
        gdte_ipo_node_comm_local(a->comm)) {
        int nrc = MPI_SUCCESS;
        if (coll_node(a, c, rc == MPI_SUCCESS, &nrc)) {
            coll_free(c);
            return nrc;
        }
    }
    if (rc != MPI_SUCCESS) {
        /* Arguments gdte cannot read: the MPI's own checks report them. */
        coll_free(c);
        return gdte_ipo_coll_next(a);
    }
    int dev_s = c->s.kind != GDTE_IPO_HOST, dev_r = c->r.kind != GDTE_IPO_HOST;
    if (!dev_s && !dev_r) {
        coll_free(c);
        return gdte_ipo_coll_next(a);
    }
    for (int k = 0; k < 2; k++) {
        side_t *sd = k ? &c->r : &c->s;
        if (sd->kind != GDTE_IPO_MIXED) continue;
        /* A type too large to move at all is reported as that (its last byte lies far past the
         * allocation), before anything is sent; else the mix, after the call (coll_t.bad). */
        const char *why = "";
        gdte_status_t st = side_import(sd, &why);
        if (st != GDTE_OK) {
            int code = gdte_mpi_status_to_mpi_error(st);
            rc = coll_error(a->comm, fn, st == GDTE_ERR_OVERFLOW ? MPI_ERR_COUNT : code == MPI_SUCCESS ? MPI_ERR_INTERN : code,
                            k ? "recvbuf" : "sendbuf", why);
            coll_free(c);
            return rc;
        }
        if (!c->bad) c->bad = k ? "recvbuf" : "sendbuf";
    }
    /* Both sides as bytes, the host one too: an MPI may choose its algorithm from the send type's
     * size and the receive counts together (Open MPI 4.1's tuned Allgatherv does), and two
     * processes must not choose differently because one of them mixes a user type with bytes. */
    int host_s = !dev_s && c->s.involved && c->s.nb > 0, host_r = !dev_r && c->r.involved && c->r.nb > 0;
    if ((dev_s || host_s) && (rc = stage_side(c, &c->s, 0)) != MPI_SUCCESS) goto out;
    if ((dev_r || host_r) && (rc = stage_side(c, &c->r, 1)) != MPI_SUCCESS) goto out;
    gdte_debug("%s: send side %s (%lld bytes), receive side %s (%lld bytes)", fn,
               dev_s ? "device, staged" : c->s.stage ? "host, staged" : "not used", (long long)c->s.total,
               dev_r ? "device, staged" : c->r.stage ? "host, staged" : "not used", (long long)c->r.total);
    /* A persistent form packs at every start, not now. */
    if (a->init == GDTE_PINIT_NONE && (rc = coll_pack(c)) != MPI_SUCCESS) goto out;
    eff_t es = side_eff(&c->s, &a->s), er = side_eff(&c->r, &a->r);
    if (a->op == GDTE_COLL_BCAST && c->s.stage) er = es; /* the root's buffer is its send side */
    if (!a->req) {
        rc = call_mpi(a, &es, &er);
        if (rc == MPI_SUCCESS) rc = coll_unpack(c);
        goto out;
    }
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r) {
        rc = gdte_ipo_fail(a->comm, fn, GDTE_ERR_NO_MEMORY);
        goto out;
    }
    rc = call_mpi(a, &es, &er);
    if (rc != MPI_SUCCESS) {
        gdte_ipo_req_destroy(r);
        goto out;
    }
    /* The MPI's request is the application's; completion unpacks (finish), the last completion
     * or MPI_Request_free of a persistent one releases (fini), each start packs (start). */
    gdte_coll_req_insert(r, *a->req, a->comm, a->init != GDTE_PINIT_NONE, coll_start, coll_finish, coll_fini, c);
    return MPI_SUCCESS;
out:
    coll_free(c);
    return rc;
}
