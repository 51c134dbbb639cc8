/*
 * Collectives on device buffers through the interposer (src/mpi/interpose_coll.c), checked
 * against the same call through the MPI itself on host copies.
 *
 * Every case is generated from (seed, case) identically on every rank: a collective
 * (Alltoall/v/w, Neighbor_alltoall/v/w and Neighbor_allgather/v on a periodic or open Cartesian,
 * a graph and a distributed graph communicator, Allgather/v, Gather/v, Scatter/v, Bcast, and
 * Alltoall, Allgather, Gather, Scatter, Bcast on an intercommunicator), random datatypes of
 * depth >= 3 (vector, hvector, indexed, struct, subarray in both orders, resized; lower bounds
 * shifted below and above 0), a receive type of the same signature built differently, counts
 * > 1 and zero counts, MPI_IN_PLACE where the call has it, block displacements with gaps.
 * Each rank then picks for itself (so ranks differ) whether its send and its receive buffer are
 * device memory, and whether the call is blocking or nonblocking (completed by one of Wait,
 * Test, Waitall, Waitany, Waitsome, Testall, Testany, Testsome, in turn).
 *
 * The oracle: the same call on host buffers (which the interposer hands to the MPI untouched)
 * from the same seeded send data and the same poisoned receive buffers. Every byte of each
 * receive allocation (gaps between blocks and a margin on each side included) must equal the
 * oracle's, the margins must still hold their poison, and send buffers must be unchanged. The
 * interposer's counters must show ONE batched pack and ONE batched unpack per call on each rank
 * that has bytes of that direction in device memory (the host executor's batches in fake mode,
 * kernel launches on a GPU), none for host buffers. Errors: a buffer that is partly host and
 * partly device memory is MPI_ERR_BUFFER, byte counts past an int are MPI_ERR_COUNT, on every
 * rank, with nothing sent.
 *
 * Within the node: a blocking collective (any of the above but the intercommunicator ones) on an
 * intracommunicator whose ranks all have device buffers moves GPU to GPU (no byte through the
 * MPI); --node yes|no asserts that it did (each such call under --all-device, and at least one
 * otherwise) or that none did.
 *
 * Usage: coll_test [--cases N] [--seed S] [--first K] [--verbose] [--persistent] [--all-device]
 *                  [--node yes|no]
 */
#include "mpitest.h"

static int64_t rr(int64_t lo, int64_t hi) { return lo + (int64_t)(mt_rnd() % (uint64_t)(hi - lo + 1)); }
static int verbose;
static int all_device; /* --all-device: every buffer of every rank on the device */
static int node_want = -1; /* --node yes|no: the node path must (not) carry the calls it can */

/* ---- random types ------------------------------------------------------------------------ */
#define MAX_TYPES 4096
static MPI_Datatype made[MAX_TYPES];
static int nmade;
static MPI_Datatype keep(MPI_Datatype t)
{
    MPI_Type_commit(&t);
    if (nmade < MAX_TYPES) made[nmade++] = t;
    return t;
}
static void free_types(void)
{
    for (int i = 0; i < nmade; i++) MPI_Type_free(&made[i]);
    nmade = 0;
}

static const MPI_Datatype bases[] = {MPI_CHAR, MPI_SHORT, MPI_INT, MPI_DOUBLE, MPI_FLOAT};

typedef struct {
    MPI_Datatype t;
    int base;   /* every element of the signature is bases[base] */
    int nbase;  /* elements per element of t */
} ty_t;

static void ext_of(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *ext, MPI_Aint *tlb, MPI_Aint *text)
{
    MPI_Type_get_extent(t, lb, ext);
    MPI_Type_get_true_extent(t, tlb, text);
}

/* Types whose data lies inside [lb, lb + extent) without overlaps, so that consecutive
 * elements never overlap either. */
static ty_t gen(int depth, int base)
{
    if (depth == 0) return (ty_t){bases[base], base, 1};
    ty_t c = gen(depth - 1, base), o = c;
    MPI_Aint lb, ext, tlb, text;
    ext_of(c.t, &lb, &ext, &tlb, &text);
    switch (rr(0, 6)) {
    case 0: {
        int n = (int)rr(2, 4);
        MPI_Type_contiguous(n, c.t, &o.t);
        o.nbase = c.nbase * n;
        break;
    }
    case 1: {
        int n = (int)rr(1, 4), bl = (int)rr(1, 2), st = (int)rr(bl + 1, bl + 3);
        if (rr(0, 3) == 0) st = -st;
        MPI_Type_vector(n, bl, st, c.t, &o.t);
        o.nbase = c.nbase * n * bl;
        break;
    }
    case 2: {
        int n = (int)rr(1, 3), bl = (int)rr(1, 2);
        MPI_Aint st = bl * ext + 8 * rr(0, 3);
        MPI_Type_create_hvector(n, bl, st, c.t, &o.t);
        o.nbase = c.nbase * n * bl;
        break;
    }
    case 3: {
        int n = (int)rr(1, 4), len[4], dsp[4], at = rr(0, 1) ? -(int)rr(1, 6) : 0, tot = 0;
        for (int i = 0; i < n; i++) {
            len[i] = (int)rr(0, 2);
            dsp[i] = at;
            at += len[i] + (int)rr(0, 2);
            tot += len[i];
        }
        if (!tot) len[0] = 1, tot = 1;
        MPI_Type_indexed(n, len, dsp, c.t, &o.t);
        o.nbase = c.nbase * tot;
        break;
    }
    case 4: { /* struct: the child twice, the second after a gap, the first maybe below 0 */
        int len[2] = {1, (int)rr(1, 2)};
        MPI_Aint d0 = rr(0, 1) ? -8 * rr(1, 8) : 8 * rr(0, 4);
        MPI_Aint disp[2] = {d0, d0 + ext + 8 * rr(0, 3)};
        MPI_Datatype ts[2] = {c.t, c.t};
        MPI_Type_create_struct(2, len, disp, ts, &o.t);
        o.nbase = c.nbase * (1 + len[1]);
        break;
    }
    case 5: { /* 2-D subarray of the child */
        int sizes[2] = {(int)rr(2, 4), (int)rr(2, 4)}, sub[2], st[2];
        for (int k = 0; k < 2; k++) {
            sub[k] = (int)rr(1, sizes[k]);
            st[k] = (int)rr(0, sizes[k] - sub[k]);
        }
        MPI_Type_create_subarray(2, sizes, sub, st, rr(0, 1) ? MPI_ORDER_C : MPI_ORDER_FORTRAN, c.t, &o.t);
        o.nbase = c.nbase * sub[0] * sub[1];
        break;
    }
    default: { /* resized: lb moved below or above 0, room after the data */
        MPI_Aint nlb = tlb - 8 * rr(0, 3);
        MPI_Type_create_resized(c.t, nlb, (tlb + text - nlb) + 8 * rr(0, 2), &o.t);
        break;
    }
    }
    keep(o.t);
    return o;
}

/* The type of one exchange: depth >= 3, then shifted so its lower bound is below or above 0. */
static ty_t gen_send(int base)
{
    ty_t t = gen((int)rr(3, 4), base);
    int one = 1;
    MPI_Aint d = 8 * rr(-24, 24);
    MPI_Datatype s;
    MPI_Type_create_struct(1, &one, &d, &t.t, &s);
    t.t = keep(s);
    return t;
}

/* A different type with the same signature: t.nbase elements of the base, in blocks with gaps,
 * maybe resized below 0. */
static ty_t gen_recv(ty_t t)
{
    if (rr(0, 4) == 0) return t;
    int n = 0, len[64], dsp[64], at = 0, left = t.nbase;
    while (left > 0 && n < 63) {
        len[n] = (int)rr(1, left < 4 ? left : 4);
        dsp[n] = at;
        at += len[n] + (int)rr(0, 2);
        left -= len[n++];
    }
    if (left > 0) len[n] = left, dsp[n++] = at;
    MPI_Datatype x;
    MPI_Type_indexed(n, len, dsp, bases[t.base], &x);
    keep(x);
    if (rr(0, 1)) {
        MPI_Aint lb, ext, tlb, text, sz = 0;
        ext_of(x, &lb, &ext, &tlb, &text);
        (void)sz;
        MPI_Datatype y;
        MPI_Type_create_resized(x, -8 * rr(1, 4), ext + 8 * rr(1, 6), &y);
        x = keep(y);
    }
    return (ty_t){x, t.base, t.nbase};
}

/* ---- buffers ----------------------------------------------------------------------------- */
#define MARGIN 64
typedef struct {
    int dev;
    unsigned char *region; /* [0, size) */
    size_t size;
    char *buf; /* what the call gets */
} area_t;

typedef struct {
    MPI_Aint lo, hi; /* touched bytes relative to buf: [lo, hi) */
    int any;
} span_t;

static void span_add(span_t *s, MPI_Aint off, int count, MPI_Datatype t)
{
    if (count <= 0) return;
    MPI_Aint lb, ext, tlb, text;
    ext_of(t, &lb, &ext, &tlb, &text);
    if (text <= 0) return;
    MPI_Aint a = off + tlb + (ext < 0 ? (MPI_Aint)(count - 1) * ext : 0);
    MPI_Aint b = off + tlb + (ext > 0 ? (MPI_Aint)(count - 1) * ext : 0) + text;
    if (!s->any || a < s->lo) s->lo = a;
    if (!s->any || b > s->hi) s->hi = b;
    s->any = 1;
}

static area_t area_new(int dev, span_t s)
{
    area_t a = {dev, NULL, 0, NULL};
    if (!s.any) s.lo = s.hi = 0;
    a.size = (size_t)(s.hi - s.lo) + 2 * MARGIN;
    a.region = dev ? mt_devmem_alloc(a.size) : malloc(a.size);
    a.buf = (char *)a.region + MARGIN - s.lo;
    return a;
}
static void area_free(area_t *a)
{
    if (a->dev) mt_devmem_free(a->region);
    else free(a->region);
}
static void area_fill(area_t *a, unsigned seed)
{
    unsigned char *h = malloc(a->size);
    mt_fill(h, a->size, seed);
    mt_put(a->region, h, a->size);
    free(h);
}
static unsigned char *area_read(const area_t *a)
{
    unsigned char *h = malloc(a->size);
    mt_get(h, a->region, a->size);
    return h;
}

/* ---- the calls --------------------------------------------------------------------------- */
enum {
    OP_ALLTOALL, OP_ALLTOALLV, OP_ALLTOALLW, OP_NALLTOALL, OP_NALLTOALLV, OP_NALLTOALLW, OP_NALLGATHER,
    OP_NALLGATHERV, OP_ALLGATHER, OP_ALLGATHERV, OP_GATHER, OP_GATHERV, OP_SCATTER, OP_SCATTERV, OP_BCAST, OP_COUNT_
};
static const char *op_name[OP_COUNT_] = {"Alltoall", "Alltoallv", "Alltoallw", "Neighbor_alltoall",
                                         "Neighbor_alltoallv", "Neighbor_alltoallw", "Neighbor_allgather",
                                         "Neighbor_allgatherv", "Allgather", "Allgatherv", "Gather", "Gatherv",
                                         "Scatter", "Scatterv", "Bcast"};

#define MAXP 16
typedef struct {
    int op, inplace, root;
    MPI_Comm comm;
    const char *commname;
    int scount, rcount;
    int scounts[MAXP], rcounts[MAXP], sdispls[MAXP], rdispls[MAXP];
    MPI_Aint sad[MAXP], rad[MAXP];
    MPI_Datatype stype, rtype, stypes[MAXP], rtypes[MAXP];
    int bsend; /* Bcast: this rank's buffer is its send side (the root's) */
} call_t;

/* The call in the form asked: `persistent` (an inactive request in *q), nonblocking (q) or
 * blocking (q NULL). */
static int call(const call_t *c, char *s, char *r, MPI_Request *q, int persistent)
{
    const void *sb = c->inplace && c->op != OP_SCATTER && c->op != OP_SCATTERV ? MPI_IN_PLACE : s;
    void *rb = c->inplace && (c->op == OP_SCATTER || c->op == OP_SCATTERV) ? MPI_IN_PLACE : r;
    MPI_Comm m = c->comm;
#ifdef HAVE_PINIT
#define P(name, ...) PINIT(name)(__VA_ARGS__, MPI_INFO_NULL, q)
#else
#define P(name, ...) MPI_ERR_INTERN
#endif
#define B(name, iname, ...) \
    (persistent ? P(name, __VA_ARGS__) : q ? MPI_##iname(__VA_ARGS__, q) : MPI_##name(__VA_ARGS__))
    switch (c->op) {
    case OP_ALLTOALL: return B(Alltoall, Ialltoall, sb, c->scount, c->stype, rb, c->rcount, c->rtype, m);
    case OP_ALLTOALLV:
        return B(Alltoallv, Ialltoallv, sb, c->scounts, c->sdispls, c->stype, rb, c->rcounts, c->rdispls, c->rtype, m);
    case OP_ALLTOALLW:
        return B(Alltoallw, Ialltoallw, sb, c->scounts, c->sdispls, c->stypes, rb, c->rcounts, c->rdispls, c->rtypes, m);
    case OP_NALLTOALL:
        return B(Neighbor_alltoall, Ineighbor_alltoall, sb, c->scount, c->stype, rb, c->rcount, c->rtype, m);
    case OP_NALLTOALLV:
        return B(Neighbor_alltoallv, Ineighbor_alltoallv, sb, c->scounts, c->sdispls, c->stype, rb, c->rcounts,
                 c->rdispls, c->rtype, m);
    case OP_NALLTOALLW:
        return B(Neighbor_alltoallw, Ineighbor_alltoallw, sb, c->scounts, c->sad, c->stypes, rb, c->rcounts, c->rad,
                 c->rtypes, m);
    case OP_NALLGATHER:
        return B(Neighbor_allgather, Ineighbor_allgather, sb, c->scount, c->stype, rb, c->rcount, c->rtype, m);
    case OP_NALLGATHERV:
        return B(Neighbor_allgatherv, Ineighbor_allgatherv, sb, c->scount, c->stype, rb, c->rcounts, c->rdispls,
                 c->rtype, m);
    case OP_ALLGATHER: return B(Allgather, Iallgather, sb, c->scount, c->stype, rb, c->rcount, c->rtype, m);
    case OP_ALLGATHERV: return B(Allgatherv, Iallgatherv, sb, c->scount, c->stype, rb, c->rcounts, c->rdispls, c->rtype, m);
    case OP_GATHER: return B(Gather, Igather, sb, c->scount, c->stype, rb, c->rcount, c->rtype, c->root, m);
    case OP_GATHERV: return B(Gatherv, Igatherv, sb, c->scount, c->stype, rb, c->rcounts, c->rdispls, c->rtype, c->root, m);
    case OP_SCATTER: return B(Scatter, Iscatter, sb, c->scount, c->stype, rb, c->rcount, c->rtype, c->root, m);
    case OP_SCATTERV: return B(Scatterv, Iscatterv, sb, c->scounts, c->sdispls, c->stype, rb, c->rcount, c->rtype, c->root, m);
    case OP_BCAST: return B(Bcast, Ibcast, c->bsend ? s : r, c->bsend ? c->scount : c->rcount, c->bsend ? c->stype : c->rtype, c->root, m);
    }
#undef B
#undef P
    return MPI_ERR_INTERN;
}

/* ---- cases ------------------------------------------------------------------------------- */
/* The blocks of each side on this rank: offset from the buffer, count, type; `null` blocks
 * (an MPI_PROC_NULL neighbour) and `skip` blocks (left alone by an in-place call) are not
 * moved; `pre` blocks are read by an in-place call from the receive side. */
typedef struct {
    MPI_Aint off;
    int count;
    MPI_Datatype t;
    int null, skip, pre;
} blk_t;
typedef struct {
    call_t c;
    blk_t sb[MAXP], rb[MAXP];
    int nsb, nrb;
    int hassend, hasrecv; /* the side exists on this rank */
} kase_t;

/* Rank-local choices: their own generator, so that the global one stays in step on all ranks. */
static uint64_t lr_state;
static uint64_t lr(void)
{
    uint64_t z = (lr_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static MPI_Aint extent(MPI_Datatype t)
{
    MPI_Aint lb, ext;
    MPI_Type_get_extent(t, &lb, &ext);
    return ext;
}

static int64_t blk_bytes(const blk_t *b)
{
    int sz = 0;
    MPI_Type_size(b->t, &sz);
    return b->null || b->skip ? 0 : (int64_t)sz * b->count;
}

/* Communicators, made once. */
static MPI_Comm cart_per, cart_open, graph, dgraph, inter;
static int inter_low; /* this rank is in the low group of `inter` */

static void make_comms(void)
{
    /* No neighbour twice in one neighbour list: which of two blocks between the same pair of
     * processes goes where is not something MPI implementations agree on (a periodic dimension
     * of 1 or 2 processes, a multigraph). Periodic: one dimension of all processes from 3 on;
     * open: two dimensions, MPI_PROC_NULL at the borders. */
    int dims1[1] = {mt_size}, per1[1] = {mt_size >= 3};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, per1, 0, &cart_per);
    int dims[2] = {0, 0}, per[2] = {0, 0};
    MPI_Dims_create(mt_size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, per, 0, &cart_open);
    /* Graph: a ring with a chord to the opposite process, each neighbour once (symmetric). */
    int index[MAXP], edges[4 * MAXP], ne = 0;
    for (int i = 0; i < mt_size; i++) {
        int cand[3] = {(i + mt_size - 1) % mt_size, (i + 1) % mt_size, (i + mt_size / 2) % mt_size};
        int first = ne;
        for (int k = 0; k < 3; k++) {
            int dup = cand[k] == i;
            for (int e = first; e < ne; e++) dup |= edges[e] == cand[k];
            if (!dup) edges[ne++] = cand[k];
        }
        index[i] = ne;
    }
    MPI_Graph_create(MPI_COMM_WORLD, mt_size, index, edges, 0, &graph);
    /* Distributed graph: a fixed random directed graph (self edges included). */
    int src[MAXP * MAXP], dst[MAXP * MAXP], ns = 0, nd = 0;
    uint64_t save = mt_rng_state;
    mt_rng_state = 4242;
    for (int i = 0; i < mt_size; i++)
        for (int j = 0; j < mt_size; j++) {
            int e = mt_rnd() % 3 != 0;
            if (e && j == mt_rank) src[ns++] = i;
            if (e && i == mt_rank) dst[nd++] = j;
        }
    mt_rng_state = save;
    int wts[MAXP * MAXP];
    for (int i = 0; i < MAXP * MAXP; i++) wts[i] = 1;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, ns, src, wts, nd, dst, wts, MPI_INFO_NULL, 0, &dgraph);
    MPI_Comm half;
    inter_low = mt_rank < mt_size / 2;
    MPI_Comm_split(MPI_COMM_WORLD, inter_low, mt_rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, inter_low ? mt_size / 2 : 0, 77, &inter);
    MPI_Comm_free(&half);
    MPI_Comm cs[5] = {cart_per, cart_open, graph, dgraph, inter};
    for (int i = 0; i < 5; i++) MPI_Comm_set_errhandler(cs[i], MPI_ERRORS_RETURN);
}

/* The neighbours of a topology in the order of the blocks of a neighborhood collective. */
static void neighbours(MPI_Comm c, int *nin, int *src, int *nout, int *dst)
{
    int topo;
    MPI_Topo_test(c, &topo);
    if (topo == MPI_CART) {
        int nd;
        MPI_Cartdim_get(c, &nd);
        for (int d = 0; d < nd; d++) {
            int a, b;
            MPI_Cart_shift(c, d, 1, &a, &b);
            src[2 * d] = dst[2 * d] = a;
            src[2 * d + 1] = dst[2 * d + 1] = b;
        }
        *nin = *nout = 2 * nd;
    } else if (topo == MPI_GRAPH) {
        MPI_Graph_neighbors_count(c, mt_rank, nin);
        MPI_Graph_neighbors(c, mt_rank, MAXP, src);
        *nout = *nin;
        memcpy(dst, src, sizeof(int) * (size_t)*nin);
    } else {
        int w, ws[MAXP], wd[MAXP];
        MPI_Dist_graph_neighbors_count(c, nin, nout, &w);
        MPI_Dist_graph_neighbors(c, *nin, src, ws, *nout, dst, wd);
    }
}

/* Place blocks one after the other with gaps (rank-local). Byte displacements (`bytes`) for the
 * w forms, whose blocks have types of their own: each block starts past the last byte of the
 * one before, 8-byte aligned. Else in extents of the one type: element k's data lies within
 * [k*extent + lb, (k+1)*extent + lb), so blocks [d, d+count) that do not overlap as ranges do
 * not overlap in memory. */
static void place(blk_t *b, int n, int bytes, int *displs, MPI_Aint *adispls)
{
    MPI_Aint at = 0;
    for (int i = 0; i < n; i++) {
        if (!bytes) {
            MPI_Aint q = at + (MPI_Aint)(lr() % 3);
            b[i].off = q * extent(b[i].t);
            displs[i] = (int)q;
            at = q + b[i].count + (MPI_Aint)(lr() % 2);
            continue;
        }
        span_t sp = {0, 0, 0};
        span_add(&sp, 0, b[i].count, b[i].t);
        MPI_Aint q = sp.any ? at - sp.lo : at;
        q = (q + 7) / 8 * 8 + 8 * (MPI_Aint)(lr() % 3);
        if (q < 0) q = -((-q) / 8 * 8);
        b[i].off = q;
        if (displs) displs[i] = (int)q;
        if (adispls) adispls[i] = q;
        if (sp.any) at = q + sp.hi;
    }
}

#define NPOOL 3
static ty_t ts[NPOOL], trr[NPOOL];

/* Build case `k` of operation `op` on communicator kind `ck` (0 world, 1..4 topologies, 5 inter). */
static int build(kase_t *K, int op, int ck, int inplace)
{
    memset(K, 0, sizeof *K);
    call_t *c = &K->c;
    c->op = op;
    c->inplace = inplace;
    int base = (int)rr(0, 4);
    for (int i = 0; i < NPOOL; i++) {
        ts[i] = gen_send(base);
        trr[i] = gen_recv(ts[i]);
    }
    int C[MAXP][MAXP], S[MAXP];
    for (int i = 0; i < mt_size; i++) {
        S[i] = (int)rr(0, 3);
        for (int j = 0; j < mt_size; j++) C[i][j] = (int)rr(0, 3);
    }
    /* In place, what I send to j is my receive block from j: the counts must be symmetric. */
    if (inplace)
        for (int i = 0; i < mt_size; i++)
            for (int j = 0; j < i; j++) C[i][j] = C[j][i];
    int count = (int)rr(2, 4), root = (int)rr(0, mt_size - 1);
    MPI_Comm comms[6] = {MPI_COMM_WORLD, cart_per, cart_open, graph, dgraph, inter};
    static const char *cnames[6] = {"world", "cart periodic", "cart open", "graph", "dist graph", "intercomm"};
    c->comm = comms[ck];
    c->commname = cnames[ck];
    int me = mt_rank, np = mt_size, peers = np;
    if (ck == 5) {
        int rs;
        MPI_Comm_remote_size(inter, &rs);
        MPI_Comm_rank(inter, &me);
        peers = rs;
    }
    MPI_Datatype T = ts[0].t, R = trr[0].t;
    c->stype = T;
    c->rtype = R;
    switch (op) {
    case OP_ALLTOALL:
        c->scount = c->rcount = count;
        K->hassend = !inplace;
        K->hasrecv = 1;
        for (int j = 0; j < peers; j++) {
            K->sb[j] = (blk_t){(MPI_Aint)j * count * extent(T), count, T, 0, 0, 0};
            K->rb[j] = (blk_t){(MPI_Aint)j * count * extent(R), count, R, 0, 0, inplace};
        }
        K->nsb = K->nrb = peers;
        if (inplace) c->stype = c->rtype = R;
        break;
    case OP_ALLTOALLV:
    case OP_ALLTOALLW: {
        int w = op == OP_ALLTOALLW;
        K->hassend = !inplace;
        K->hasrecv = 1;
        for (int j = 0; j < np; j++) {
            int k = (me + j) % NPOOL;
            /* in place: what j receives from me is what I receive from j (the MPI's rule) */
            c->scounts[j] = inplace ? C[j][me] : C[me][j];
            c->rcounts[j] = C[j][me];
            c->stypes[j] = w ? (inplace ? trr[k].t : ts[k].t) : T;
            c->rtypes[j] = w ? trr[k].t : R;
            K->sb[j] = (blk_t){0, c->scounts[j], c->stypes[j], 0, 0, 0};
            K->rb[j] = (blk_t){0, c->rcounts[j], c->rtypes[j], 0, 0, inplace};
        }
        if (inplace) c->stype = R;
        K->nsb = K->nrb = np;
        place(K->sb, np, w, c->sdispls, NULL);
        place(K->rb, np, w, c->rdispls, NULL);
        if (inplace) memcpy(c->sdispls, c->rdispls, sizeof c->sdispls);
        break;
    }
    case OP_NALLTOALL:
    case OP_NALLTOALLV:
    case OP_NALLTOALLW:
    case OP_NALLGATHER:
    case OP_NALLGATHERV: {
        int nin, nout, src[MAXP], dst[MAXP];
        neighbours(c->comm, &nin, src, &nout, dst);
        int gather = op == OP_NALLGATHER || op == OP_NALLGATHERV, w = op == OP_NALLTOALLW;
        int uniform = op == OP_NALLTOALL || op == OP_NALLGATHER;
        c->scount = c->rcount = count;
        K->hassend = K->hasrecv = 1;
        /* counts and types depend on the sender only: any pairing of blocks matches */
        for (int b = 0; b < nout && !gather; b++) {
            c->scounts[b] = uniform ? count : S[me];
            c->stypes[b] = w ? ts[me % NPOOL].t : T;
            K->sb[b] = (blk_t){uniform ? (MPI_Aint)b * count * extent(T) : 0, c->scounts[b], c->stypes[b],
                               dst[b] == MPI_PROC_NULL, 0, 0};
        }
        if (gather) {
            c->scount = uniform ? count : S[me];
            K->sb[0] = (blk_t){0, c->scount, T, nout == 0, 0, 0};
        }
        for (int b = 0; b < nin; b++) {
            int s = src[b] == MPI_PROC_NULL ? 0 : src[b];
            c->rcounts[b] = uniform ? count : S[s];
            c->rtypes[b] = w ? trr[s % NPOOL].t : R;
            K->rb[b] = (blk_t){uniform ? (MPI_Aint)b * count * extent(R) : 0, c->rcounts[b], c->rtypes[b],
                               src[b] == MPI_PROC_NULL, 0, 0};
        }
        K->nsb = gather ? 1 : nout;
        K->nrb = nin;
        if (!uniform) {
            if (!gather) place(K->sb, nout, w, w ? NULL : c->sdispls, c->sad);
            place(K->rb, nin, w, w ? NULL : c->rdispls, c->rad);
        }
        break;
    }
    case OP_ALLGATHER:
    case OP_ALLGATHERV: {
        int v = op == OP_ALLGATHERV;
        c->scount = v ? S[me] : count;
        c->rcount = count;
        K->hassend = !inplace;
        K->hasrecv = 1;
        K->sb[0] = (blk_t){0, c->scount, T, 0, 0, 0};
        K->nsb = 1;
        for (int j = 0; j < peers; j++) {
            c->rcounts[j] = v ? S[j] : count;
            K->rb[j] = (blk_t){(MPI_Aint)j * count * extent(R), c->rcounts[j], R, 0, inplace && j == me, inplace && j == me};
        }
        K->nrb = peers;
        if (v) place(K->rb, peers, 0, c->rdispls, NULL);
        if (inplace) c->stype = R;
        break;
    }
    case OP_GATHER:
    case OP_GATHERV:
    case OP_SCATTER:
    case OP_SCATTERV: {
        int v = op == OP_GATHERV || op == OP_SCATTERV, scat = op == OP_SCATTER || op == OP_SCATTERV;
        int at_root, contributes;
        if (ck == 5) {
            c->root = inter_low ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
            at_root = c->root == MPI_ROOT;
            contributes = !inter_low;
        } else {
            c->root = root;
            at_root = me == root;
            contributes = 1;
        }
        int mine = v ? S[me] : count;
        /* the root side: `peers` blocks; the other: one */
        blk_t *many = scat ? K->sb : K->rb, *one = scat ? K->rb : K->sb;
        MPI_Datatype tm = scat ? T : R, to = scat ? R : T;
        int *mc = scat ? c->scounts : c->rcounts, *md = scat ? c->sdispls : c->rdispls;
        int ip = inplace && at_root && ck != 5;
        if (at_root) {
            for (int j = 0; j < peers; j++) {
                mc[j] = v ? S[j] : count;
                many[j] = (blk_t){(MPI_Aint)j * count * extent(tm), mc[j], tm, 0, ip && j == me && !scat, 0};
            }
            if (v) place(many, peers, 0, md, NULL);
            if (scat) K->nsb = peers, K->hassend = 1;
            else K->nrb = peers, K->hasrecv = 1;
        }
        if (contributes && !ip) {
            one[0] = (blk_t){0, mine, to, 0, 0, 0};
            if (scat) K->nrb = 1, K->hasrecv = 1;
            else K->nsb = 1, K->hassend = 1;
        }
        if (scat) c->rcount = mine, c->scount = count;
        else c->scount = mine, c->rcount = count;
        c->inplace = ip;
        break;
    }
    case OP_BCAST: {
        if (ck == 5) c->root = inter_low ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        else c->root = root;
        c->bsend = c->root == MPI_ROOT || (ck != 5 && me == root);
        c->scount = c->rcount = count;
        if (c->bsend) K->sb[0] = (blk_t){0, count, T, 0, 0, 0}, K->nsb = 1, K->hassend = 1;
        else if (c->root != MPI_PROC_NULL) K->rb[0] = (blk_t){0, count, R, 0, 0, 0}, K->nrb = 1, K->hasrecv = 1;
        break;
    }
    }
    return 0;
}

static const char *completions[8] = {"Wait", "Test", "Waitall", "Waitany", "Waitsome", "Testall", "Testany", "Testsome"};

static int complete(MPI_Request *q, int how)
{
    int rc = MPI_SUCCESS, flag = 0, idx, n;
    MPI_Status st;
    switch (how) {
    case 0: return MPI_Wait(q, &st);
    case 1:
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(q, &flag, &st);
        return rc;
    case 2: return MPI_Waitall(1, q, MPI_STATUSES_IGNORE);
    case 3: return MPI_Waitany(1, q, &idx, &st);
    case 4:
        n = 0;
        while (n == 0 && rc == MPI_SUCCESS) rc = MPI_Waitsome(1, q, &n, &idx, MPI_STATUSES_IGNORE);
        return rc;
    case 5:
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Testall(1, q, &flag, MPI_STATUSES_IGNORE);
        return rc;
    case 6:
        while (!flag && rc == MPI_SUCCESS) rc = MPI_Testany(1, q, &idx, &flag, &st);
        return rc;
    default:
        n = 0;
        while (n == 0 && rc == MPI_SUCCESS) rc = MPI_Testsome(1, q, &n, &idx, MPI_STATUSES_IGNORE);
        return rc;
    }
}

enum { M_BLOCKING = 0, M_NONBLOCKING, M_PERSISTENT };
static const char *const mode_names[3] = {"blocking", "nonblocking", "persistent"};
#define ROUNDS 3 /* starts of one persistent request */

/* One case: the oracle on host buffers, then the same call with this rank's device choices. A
 * persistent case sets its request up once and starts it ROUNDS times (MPI_Start and
 * MPI_Startall in turn, completed by the completion calls in turn, the last round polled with
 * MPI_Request_get_status until complete before its completion call), with new send data and new
 * receive buffer contents each round, each round against the oracle's blocking call on that
 * round's data; then frees the inactive request. */
static void run(kase_t *K, int casen, int mode, int how)
{
    call_t *c = &K->c;
    span_t ss = {0, 0, 0}, rs = {0, 0, 0};
    for (int i = 0; i < K->nsb; i++) span_add(&ss, K->sb[i].off, K->sb[i].count, K->sb[i].t);
    for (int i = 0; i < K->nrb; i++) span_add(&rs, K->rb[i].off, K->rb[i].count, K->rb[i].t);
    int dev_s = K->hassend && lr() % 3 != 0, dev_r = K->hasrecv && lr() % 3 != 0;
    if (all_device) dev_s = K->hassend, dev_r = K->hasrecv;
    if (getenv("COLLTEST_HOST")) dev_s = dev_r = 0; /* to replay a case on host buffers alone */
    int64_t sbytes = 0, rbytes = 0, prebytes = 0;
    for (int i = 0; i < K->nsb; i++) sbytes += blk_bytes(&K->sb[i]);
    for (int i = 0; i < K->nrb; i++) {
        rbytes += blk_bytes(&K->rb[i]);
        if (K->rb[i].pre) {
            blk_t b = K->rb[i];
            b.skip = 0;
            prebytes += blk_bytes(&b);
        }
    }
    int in_place_recv = c->inplace && c->op != OP_SCATTER && c->op != OP_SCATTERV;
    int64_t want_p = mt_expect_gdte() && ((dev_s && !in_place_recv && sbytes > 0) || (dev_r && prebytes > 0));
    int64_t want_u = mt_expect_gdte() && dev_r && rbytes > 0;
    int carried = mt_expect_gdte() && ((dev_s && !in_place_recv && ss.any) || (dev_r && rs.any));
    area_t hs = area_new(0, ss), hr = area_new(0, rs), ds = area_new(dev_s, ss), dr = area_new(dev_r, rs);
    char what[200];
    snprintf(what, sizeof what, "case %d %s on %s (%s send, %s recv%s, %s)", casen, op_name[c->op], c->commname,
             dev_s ? "device" : "host", dev_r ? "device" : "host", c->inplace ? ", in place" : "",
             mode == M_NONBLOCKING ? completions[how] : mode_names[mode]);
    MPI_Request q = MPI_REQUEST_NULL;
    int64_t live0 = mt_counter("requests_live");
    if (mode == M_PERSISTENT) {
        /* The init sets up, and moves nothing. */
        int64_t p0 = mt_counter("coll_pack_launches"), u0 = mt_counter("coll_unpack_launches");
        int64_t n0 = mt_counter("coll_calls");
        int rc = call(c, ds.buf, dr.buf, &q, 1);
        MT_CHECK(rc == MPI_SUCCESS && q != MPI_REQUEST_NULL, "%s: init returned %d", what, rc);
        MT_CHECK(mt_counter("coll_pack_launches") == p0 && mt_counter("coll_unpack_launches") == u0 &&
                     mt_counter("coll_calls") == n0,
                 "%s: the init moved data", what);
        MT_CHECK(mt_counter("requests_live") == live0 + carried, "%s: %lld gdte requests after the init, want %lld",
                 what, (long long)mt_counter("requests_live"), (long long)(live0 + carried));
        if (rc != MPI_SUCCESS) q = MPI_REQUEST_NULL;
    }
    int rounds = mode == M_PERSISTENT ? ROUNDS : 1;
    for (int round = 0; round < rounds && (mode != M_PERSISTENT || q != MPI_REQUEST_NULL); round++) {
        unsigned sseed = (unsigned)(casen * 131 + mt_rank * 7 + 1 + round * 1000003), rseed = sseed + 99991;
        /* In place, the receive side carries this rank's data: filled, not poisoned (any filling
         * is a poison for the bytes the call must not touch). */
        area_fill(&hs, sseed);
        area_fill(&ds, sseed);
        area_fill(&hr, rseed);
        area_fill(&dr, rseed);
        int rc = call(c, hs.buf, hr.buf, NULL, 0);
        MT_CHECK(rc == MPI_SUCCESS, "%s round %d: host oracle returned %d", what, round, rc);
        int64_t p0 = mt_counter("coll_pack_launches"), u0 = mt_counter("coll_unpack_launches");
        int64_t n0 = mt_counter("coll_calls"), node0 = mt_counter("coll_node_calls");
        int64_t inplace0 = mt_counter("coll_node_inplace");
        if (mode == M_PERSISTENT) {
            rc = round % 2 ? MPI_Startall(1, &q) : MPI_Start(&q);
            /* The last round is seen complete by MPI_Request_get_status first: the data is in the
             * buffer then, and the completion call does not unpack it again. */
            for (int flag = 0; rc == MPI_SUCCESS && round == ROUNDS - 1 && !flag;)
                rc = MPI_Request_get_status(q, &flag, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) rc = complete(&q, (how + round) % 8);
            MT_CHECK(q != MPI_REQUEST_NULL, "%s round %d: completion freed a persistent request", what, round);
        } else {
            rc = call(c, ds.buf, dr.buf, mode == M_NONBLOCKING ? &q : NULL, 0);
            if (rc == MPI_SUCCESS && mode == M_NONBLOCKING) rc = complete(&q, how);
        }
        MT_CHECK(rc == MPI_SUCCESS, "%s round %d: returned %d", what, round, rc);
        int64_t dp = mt_counter("coll_pack_launches") - p0, du = mt_counter("coll_unpack_launches") - u0;
        int64_t dn = mt_counter("coll_calls") - n0;
        /* Within the node a send side whose blocks are all dense is read where it is: no pack. */
        int64_t dinplace = mt_counter("coll_node_inplace") - inplace0;
        int pack_ok = dp == want_p || (dp == 0 && want_p == 1 && dinplace > 0);
        /* GDTE_MPI_COLL_INPLACE_MAX=0: no block is read where it is. */
        const char *ipm = getenv("GDTE_MPI_COLL_INPLACE_MAX");
        if (ipm && !strcmp(ipm, "0"))
            MT_CHECK(dinplace == 0, "%s round %d: %lld blocks read in place with GDTE_MPI_COLL_INPLACE_MAX=0", what, round,
                     (long long)dinplace);
        MT_CHECK(pack_ok && du == want_u, "%s round %d: %lld pack and %lld unpack launches, want %lld and %lld", what,
                 round, (long long)dp, (long long)du, (long long)want_p, (long long)want_u);
        MT_CHECK(dn == carried, "%s round %d: coll_calls moved by %lld, want %d", what, round, (long long)dn, carried);
        /* Within the node, GPU to GPU: a blocking call of the forms the node path takes, on an
         * intracommunicator, every buffer on the device (--all-device). */
        int64_t dnode = mt_counter("coll_node_calls") - node0;
        int node_form = mode == M_BLOCKING && c->comm != inter;
        if (node_want == 0 || (node_want == 1 && all_device))
            MT_CHECK(dnode == (node_want && node_form ? carried : 0), "%s round %d: %lld calls GPU to GPU, want %d", what,
                     round, (long long)dnode, node_want && node_form ? carried : 0);
        unsigned char *a = area_read(&dr), *b = area_read(&hr);
        char w2[260];
        snprintf(w2, sizeof w2, "%s round %d, receive buffer", what, round);
        mt_same(a, b, hr.size, w2);
        /* the margins still hold their poison in the oracle too (nothing outside the type map) */
        unsigned char *poison = malloc(hr.size);
        mt_fill(poison, hr.size, rseed);
        MT_CHECK(!memcmp(a, poison, MARGIN) && !memcmp(a + hr.size - MARGIN, poison + hr.size - MARGIN, MARGIN),
                 "%s: a margin was written", w2);
        free(poison);
        free(a);
        free(b);
        a = area_read(&ds);
        b = area_read(&hs);
        snprintf(w2, sizeof w2, "%s round %d, send buffer", what, round);
        mt_same(a, b, hs.size, w2);
        free(a);
        free(b);
    }
    if (mode == M_PERSISTENT && q != MPI_REQUEST_NULL) {
        /* An inactive persistent request: freed, and gdte's record and staging with it. */
        MT_MPI(MPI_Request_free(&q));
        MT_CHECK(q == MPI_REQUEST_NULL, "%s: MPI_Request_free left the handle", what);
        MT_CHECK(mt_counter("requests_live") == live0, "%s: %lld gdte requests after MPI_Request_free, want %lld", what,
                 (long long)mt_counter("requests_live"), (long long)live0);
    }
    if (verbose && mt_rank == 0) printf("%s\n", what);
    area_free(&hs);
    area_free(&hr);
    area_free(&ds);
    area_free(&dr);
}

/* ---- errors ------------------------------------------------------------------------------ */
static void errors(void)
{
    if (!mt_expect_gdte()) return;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* A send buffer whose first half only is device memory. */
    size_t n = 64 * sizeof(int) * (size_t)mt_size;
    char *half = malloc(2 * n), *r = malloc(n);
    int registered = gdte_fake_device_register && !mt_cuda() && gdte_fake_device_register(half, n) == 0;
    if (registered) {
        int rc = MPI_Allgather(half + n - 128, 64, MPI_INT, r, 64, MPI_INT, MPI_COMM_WORLD);
        MT_CHECK(mt_eclass(rc) == MPI_ERR_BUFFER, "Allgather on a half-device buffer: class %d, want MPI_ERR_BUFFER",
                 mt_eclass(rc));
        gdte_fake_device_unregister(half);
    }
    free(half);
    free(r);
    /* Packed bytes past an int: one block (Allgather) and the sum of the blocks (Alltoallv). */
    char *d = mt_devmem_alloc(4096), *h = malloc(4096);
    MPI_Datatype big;
    MPI_Type_contiguous(1 << 28, MPI_BYTE, &big);
    MPI_Type_commit(&big);
    int rc = MPI_Allgather(d, 16, big, h, 16, big, MPI_COMM_WORLD);
    MT_CHECK(mt_eclass(rc) == MPI_ERR_COUNT, "Allgather of 4 GiB per block: class %d, want MPI_ERR_COUNT", mt_eclass(rc));
    int cnt[MAXP], dsp[MAXP];
    for (int j = 0; j < mt_size; j++) cnt[j] = 5, dsp[j] = 5 * j;
    rc = MPI_Alltoallv(d, cnt, dsp, big, h, cnt, dsp, big, MPI_COMM_WORLD);
    MT_CHECK(mt_eclass(rc) == MPI_ERR_COUNT, "Alltoallv of 1.25 GiB blocks: class %d, want MPI_ERR_COUNT", mt_eclass(rc));
    MPI_Type_free(&big);
    mt_devmem_free(d);
    free(h);
}

int main(int argc, char **argv)
{
    int cases = 120, first = 0, persistent = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--first") && i + 1 < argc) first = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--verbose")) verbose = 1;
        else if (!strcmp(argv[i], "--persistent")) persistent = 1;
        else if (!strcmp(argv[i], "--all-device")) all_device = 1;
        else if (!strcmp(argv[i], "--node") && i + 1 < argc) node_want = !strcmp(argv[++i], "yes");
    }
    mt_init(&argc, &argv);
#ifndef HAVE_PINIT
    if (persistent) {
        if (mt_rank == 0) printf("coll_test: this MPI declares no persistent collectives\n");
        MPI_Finalize();
        return 77;
    }
#endif
    if (mt_size > MAXP) {
        if (mt_rank == 0) printf("coll_test: at most %d ranks\n", MAXP);
        MPI_Finalize();
        return 77;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    make_comms();
    int launches_before = (int)mt_counter("coll_pack_launches");
    /* Every operation on its communicators, in turn; the rest of the case is random. */
    static const struct {
        int op, ck, inplace_ok;
    } plan[] = {
        {OP_ALLTOALL, 0, 1}, {OP_ALLTOALLV, 0, 1}, {OP_ALLTOALLW, 0, 1}, {OP_ALLGATHER, 0, 1},
        {OP_ALLGATHERV, 0, 1}, {OP_GATHER, 0, 1}, {OP_GATHERV, 0, 1}, {OP_SCATTER, 0, 1},
        {OP_SCATTERV, 0, 1}, {OP_BCAST, 0, 0}, {OP_NALLTOALL, 1, 0}, {OP_NALLTOALLV, 2, 0},
        {OP_NALLTOALLW, 3, 0}, {OP_NALLGATHER, 4, 0}, {OP_NALLGATHERV, 1, 0}, {OP_NALLTOALL, 4, 0},
        {OP_NALLTOALLV, 3, 0}, {OP_NALLTOALLW, 2, 0}, {OP_NALLGATHER, 3, 0}, {OP_NALLGATHERV, 2, 0},
        {OP_NALLTOALLW, 1, 0}, {OP_NALLTOALLW, 4, 0}, {OP_ALLTOALL, 5, 0}, {OP_ALLGATHER, 5, 0},
        {OP_BCAST, 5, 0}, {OP_GATHER, 5, 0}, {OP_SCATTER, 5, 0},
    };
    const int nplan = (int)(sizeof plan / sizeof plan[0]);
    for (int k = first; k < cases; k++) {
        mt_rng_state = seed * 1000003u + (uint64_t)k;
        lr_state = (seed * 1000003u + (uint64_t)k) * 31u + (uint64_t)mt_rank * 7919u + 17u;
        int op = plan[k % nplan].op, ck = plan[k % nplan].ck;
        int inplace = plan[k % nplan].inplace_ok && (k / nplan) % 2 == 1;
        kase_t K;
        build(&K, op, ck, inplace);
        int mode = persistent ? M_PERSISTENT : (k / 2) % 2 == 1 ? M_NONBLOCKING : M_BLOCKING;
        /* Open MPI 4.1's MPI_Ialltoallw in place on derived types never completes on 2 ranks, on
         * host buffers alone too (COLLTEST_HOST=1 replays it): those cases stay blocking. */
        if (inplace && op == OP_ALLTOALLW) mode = M_BLOCKING;
        /* --all-device tests the node path, which takes blocking calls; Open MPI 4.1 also never
         * completes MPI_Igather in place after an in-place MPI_Ialltoallv on 3 ranks (seed 33,
         * cases 298-302, without gdte too). */
        if (all_device && !persistent) mode = M_BLOCKING;
        int how = getenv("COLLTEST_HOW") ? atoi(getenv("COLLTEST_HOW")) : (k / 4) % 8; /* to replay a case */
        run(&K, k, mode, how);
        free_types();
    }
    errors();
    if (mt_expect_gdte())
        MT_CHECK(mt_counter("coll_pack_launches") > launches_before, "no collective went through gdte's batches");
    else
        MT_CHECK(mt_counter("coll_pack_launches") <= 0, "collectives went through gdte in mode %s", mt_mode ? mt_mode : "plain");
    MPI_Comm cs[5] = {cart_per, cart_open, graph, dgraph, inter};
    for (int i = 0; i < 5; i++) MPI_Comm_free(&cs[i]);
    if (node_want == 1) MT_CHECK(mt_counter("coll_node_calls") > 0, "no collective went GPU to GPU within the node");
    if (mt_rank == 0)
        printf("coll_test: %d cases, %lld pack and %lld unpack batches, %lld calls GPU to GPU on rank 0\n", cases,
               (long long)mt_counter("coll_pack_launches"), (long long)mt_counter("coll_unpack_launches"),
               (long long)mt_counter("coll_node_calls"));
    return mt_finish("coll_test");
}
