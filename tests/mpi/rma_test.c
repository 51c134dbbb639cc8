/*
 * One-sided communication on device memory (src/mpi/interpose_rma.c), random cases, against the
 * MPI's own one-sided communication on host memory as the oracle.
 *
 * Each case runs twice with the same seeded plan: once on the system under test (each rank's
 * window memory, and each operation's origin and result buffers, device or host memory at
 * random), once on host memory only (the MPI alone). Everything the two runs leave is compared
 * byte for byte: every rank's window allocation (margins included: nothing written outside the
 * window), and every origin and result buffer's allocation (margins, and bytes between blocks,
 * included; result buffers start poisoned).
 *
 * The plan: a window of disp_unit 1 on every rank, split into one region per origin rank and
 * slots in each region, so no two operations of an epoch touch the same target bytes (their
 * results are then the same whatever order the MPI applies them in). Operations: MPI_Put,
 * MPI_Get, MPI_Accumulate (MPI_SUM, MPI_REPLACE, MPI_BXOR), MPI_Get_accumulate (MPI_NO_OP too),
 * MPI_Fetch_and_op, MPI_Compare_and_swap and, in passive-target epochs, MPI_Rput, MPI_Rget,
 * MPI_Raccumulate and MPI_Rget_accumulate (completed by MPI_Waitall before or after the unlock,
 * or by an MPI_Testall loop). Types on either side: random derived types of MPI_INT, nested up
 * to depth 3 (vectors with negative strides, indexed blocks in non-monotone order, structs with
 * holes, resized types with lower bounds below the data, hvectors, hindexed blocks), count > 1
 * where the extent allows, the other side dense, strided or the same type. Synchronisation:
 * fences, post-start-complete-wait, lock/unlock per target, lock_all with random flushes. Between
 * epochs each rank stores random bytes into its own window memory (cudaMemcpy for device
 * memory), published as the separate memory model requires (fence, post, or a lock of its own
 * rank / MPI_Win_sync in a lock_all epoch), so peers' next reads must see them.
 *
 * --self runs the oracle twice instead (host memory only, no device buffer): whether the MPI
 * itself gives the same results for the plan. Open MPI 4.1's osc rdma over vader does not: its
 * MPI_Get_accumulate results differ from run to run on host memory, so the tests select osc
 * pt2pt (OMPI_MCA_osc), which passes --self.
 *
 * Usage: rma_test [--cases N] [--seed S] [--self] [--first K (start at case K)]
 */
#include "mpitest.h"

#define MARGIN 40
#define SLOTS 4

enum { SYNC_FENCE, SYNC_PSCW, SYNC_LOCK, SYNC_LOCKALL, NSYNC };
enum { OP_PUT, OP_GET, OP_ACC, OP_GETACC, OP_FOP, OP_CAS, OP_RPUT, OP_RGET, OP_RACC, OP_RGETACC, NOPS };
static const char *const op_name[NOPS] = {"Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op",
                                          "Compare_and_swap", "Rput", "Rget", "Raccumulate", "Rget_accumulate"};
static const char *const sync_name[NSYNC] = {"fence", "pscw", "lock", "lock_all"};

static int rr(int lo, int hi) { return lo + (int)(mt_rnd() % (uint64_t)(hi - lo + 1)); }

/* ---- random types of MPI_INT (their elements never overlap) ---- */
/* nonneg: no negative stride, no lower bound below the data (see plan_types) */
static int nonneg;
static MPI_Datatype leaf(int *n)
{
    MPI_Datatype t;
    switch (rr(0, 3)) {
    case 0: {
        int k = rr(1, 8);
        MPI_Type_contiguous(k, MPI_INT, &t);
        *n = k;
        break;
    }
    case 1: {
        int c = rr(1, 6), bl = rr(1, 3), stride = bl + rr(0, 3);
        if (rr(0, 2) == 0 && !nonneg) stride = -stride; /* negative true lower bound */
        MPI_Type_vector(c, bl, stride, MPI_INT, &t);
        *n = c * bl;
        break;
    }
    case 2: {
        int nb = rr(1, 5), bl[5], d[5], pos = 0, tot = 0;
        for (int i = 0; i < nb; i++) {
            d[i] = pos + rr(0, 3);
            bl[i] = rr(1, 3);
            pos = d[i] + bl[i];
            tot += bl[i];
        }
        for (int i = nb - 1; i > 0; i--) { /* non-monotone order */
            int j = rr(0, i), x = d[i], y = bl[i];
            d[i] = d[j], bl[i] = bl[j], d[j] = x, bl[j] = y;
        }
        MPI_Type_indexed(nb, bl, d, MPI_INT, &t);
        *n = tot;
        break;
    }
    default: {
        int a = rr(1, 3), b = rr(1, 3), bl[2] = {a, b};
        MPI_Aint d[2] = {0, (MPI_Aint)(a + rr(1, 3)) * 4};
        MPI_Datatype ts[2] = {MPI_INT, MPI_INT};
        MPI_Type_create_struct(2, bl, d, ts, &t);
        *n = a + b;
        break;
    }
    }
    return t;
}

static MPI_Datatype rtype(int depth, int *n)
{
    if (depth == 0) return leaf(n);
    int m;
    MPI_Datatype in = rtype(depth - 1, &m), t;
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(in, &lb, &ext);
    MPI_Type_get_true_extent(in, &tlb, &text);
    switch (rr(0, 3)) {
    case 0: {
        int c = rr(1, 3);
        if (ext < text) c = 1;
        MPI_Type_contiguous(c, in, &t);
        *n = c * m;
        break;
    }
    case 1: {
        int c = rr(1, 3);
        MPI_Aint stride = text + 4 * rr(0, 2);
        if (rr(0, 1) && !nonneg) stride = -stride;
        MPI_Type_create_hvector(c, 1, stride, in, &t);
        *n = c * m;
        break;
    }
    case 2: /* the lower bound below the data, a wider extent */
        MPI_Type_create_resized(in, lb - (nonneg ? 0 : 4 * rr(0, 2)), ext + 8 * rr(1, 2), &t);
        *n = m;
        break;
    default: {
        MPI_Aint d[2] = {0, text + 4 * rr(0, 3)};
        MPI_Type_create_hindexed_block(2, 1, d, in, &t);
        *n = 2 * m;
        break;
    }
    }
    MPI_Type_free(&in);
    return t;
}

/* ---- one operation of the plan ---- */
typedef struct {
    int origin, target, op, dev_o, dev_r;
    MPI_Datatype ot, tt; /* origin (and result) type, target type */
    int oc, tc;
    MPI_Aint disp;
    MPI_Op mop;
    unsigned seed;
    int wait_mode; /* request-based: 0 Waitall before unlock, 1 after, 2 Testall loop */
    int flush;     /* lock_all: MPI_Win_flush(target) after it */
    mt_ubuf_t o, r; /* origin and result buffers (this run's) */
} rop_t;

static int is_req(int op) { return op >= OP_RPUT; }
static int base_op(int op) { return is_req(op) ? (op == OP_RPUT ? OP_PUT : op == OP_RGET ? OP_GET : op == OP_RACC ? OP_ACC : OP_GETACC) : op; }

/* Types for an operation whose target bytes must fit `slot` bytes from `slot_start` (disp >= 0). */
static void plan_types(rop_t *p, size_t slot, size_t slot_start)
{
    int b = base_op(p->op);
    if (b == OP_FOP || b == OP_CAS) {
        p->ot = p->tt = MPI_INT;
        MPI_Type_dup(MPI_INT, &p->ot);
        MPI_Type_dup(MPI_INT, &p->tt);
        p->oc = p->tc = 1;
        p->disp = (MPI_Aint)slot_start;
        return;
    }
    for (int tries = 0;; tries++) {
        int n, depth = tries > 20 ? 0 : rr(0, 3);
        /* Open MPI 4.1 applies an accumulate to a target type whose lower bound lies below its
         * data at other addresses than the type's (before the window's base), host memory
         * alone; accumulating operations get no such type, nor negative strides. */
        nonneg = b == OP_ACC || b == OP_GETACC;
        MPI_Datatype x = rtype(depth, &n);
        nonneg = 0;
        MPI_Type_commit(&x);
        MPI_Aint lb, ext, tlb, text;
        MPI_Type_get_extent(x, &lb, &ext);
        MPI_Type_get_true_extent(x, &tlb, &text);
        int cx = ext >= text && rr(0, 2) == 0 ? rr(2, 3) : 1;
        /* the derived side: target, origin or both; the other dense or strided */
        int side = rr(0, 2);
        MPI_Datatype other;
        int ocount;
        if (rr(0, 1) || (n * cx) % 2) {
            MPI_Type_contiguous(n * cx, MPI_INT, &other);
            ocount = 1;
        } else {
            MPI_Type_vector(n * cx / 2, 2, 3, MPI_INT, &other);
            ocount = 1;
        }
        MPI_Type_commit(&other);
        if (side == 0) { /* target derived */
            p->tt = x, p->tc = cx, p->ot = other, p->oc = ocount;
        } else if (side == 1) { /* origin derived */
            p->ot = x, p->oc = cx, p->tt = other, p->tc = ocount;
        } else {
            MPI_Type_dup(x, &p->ot);
            p->oc = cx, p->tt = x, p->tc = cx;
            MPI_Type_free(&other);
        }
        ptrdiff_t lo, hi;
        mt_span(p->tt, p->tc, &lo, &hi);
        /* (mt_consistent: a type the MPI itself mis-handles has no oracle; drawn again) */
        if ((size_t)(hi - lo) <= slot && (ptrdiff_t)slot_start - lo >= 0 && mt_consistent(p->tt, p->tc) &&
            mt_consistent(p->ot, p->oc)) {
            p->disp = (MPI_Aint)((ptrdiff_t)slot_start - lo);
            return;
        }
        MPI_Type_free(&p->ot);
        MPI_Type_free(&p->tt);
    }
}

/* ---- a case ---- */
typedef struct {
    int sync, epochs, np;
    size_t slot, wsize;
    int wdev[64];
    int nops;
    rop_t *ops;       /* per epoch, in order: ops[e * per_epoch + i] */
    int per_epoch;
    unsigned wseed;
    unsigned store_seed[8];
    size_t store_off[8][64], store_len[8][64];
} plan_t;

static void plan_make(plan_t *pl)
{
    int np = mt_size;
    pl->np = np;
    pl->sync = rr(0, NSYNC - 1);
    pl->epochs = rr(1, 3);
    pl->slot = (size_t)rr(16, 256) * 4;
    pl->wsize = pl->slot * SLOTS * (size_t)np;
    for (int r = 0; r < np && r < 64; r++) pl->wdev[r] = rr(0, 3) != 0;
    pl->wseed = (unsigned)mt_rnd() | 1;
    int k = rr(1, SLOTS); /* operations per (origin, target) pair per epoch */
    pl->per_epoch = np * np * k;
    pl->nops = pl->epochs * pl->per_epoch;
    pl->ops = calloc((size_t)pl->nops, sizeof(rop_t));
    int passive = pl->sync == SYNC_LOCK || pl->sync == SYNC_LOCKALL;
    for (int e = 0; e < pl->epochs; e++) {
        pl->store_seed[e] = (unsigned)mt_rnd() | 1;
        for (int r = 0; r < np && r < 64; r++) {
            size_t a = (size_t)rr(0, (int)pl->wsize - 1), b = (size_t)rr(0, (int)pl->wsize - 1);
            pl->store_off[e][r] = a < b ? a : b;
            pl->store_len[e][r] = rr(0, 3) == 0 ? 0 : (a < b ? b - a : a - b) + 1;
        }
        int i = 0;
        for (int o = 0; o < np; o++)
            for (int t = 0; t < np; t++)
                for (int j = 0; j < k; j++) {
                    rop_t *p = &pl->ops[e * pl->per_epoch + i++];
                    p->origin = o, p->target = t;
                    p->op = rr(0, passive ? NOPS - 1 : OP_CAS);
                    p->dev_o = rr(0, 1), p->dev_r = rr(0, 1);
                    static const MPI_Op accops[4] = {MPI_SUM, MPI_REPLACE, MPI_BXOR, MPI_NO_OP};
                    int b = base_op(p->op);
                    p->mop = accops[rr(0, b == OP_GETACC || b == OP_FOP ? 3 : 2)];
                    p->seed = (unsigned)mt_rnd() | 1;
                    p->wait_mode = rr(0, 2);
                    p->flush = rr(0, 1);
                    size_t slot_start = ((size_t)o * SLOTS + (size_t)j) * pl->slot;
                    plan_types(p, pl->slot, slot_start);
                }
    }
}

static void plan_free(plan_t *pl)
{
    for (int i = 0; i < pl->nops; i++) {
        MPI_Type_free(&pl->ops[i].ot);
        MPI_Type_free(&pl->ops[i].tt);
    }
    free(pl->ops);
}

/* This rank's operations of epoch e to `target` (-1: all), issued; request handles appended. */
static void issue(plan_t *pl, int e, int target, MPI_Win win, MPI_Request *reqs, int *nreq)
{
    for (int i = 0; i < pl->per_epoch; i++) {
        rop_t *p = &pl->ops[e * pl->per_epoch + i];
        if (p->origin != mt_rank || (target >= 0 && p->target != target)) continue;
        void *o = p->o.buf, *r = p->r.buf;
        MPI_Request q = MPI_REQUEST_NULL;
        int rc;
        switch (p->op) {
        case OP_PUT: rc = MPI_Put(o, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, win); break;
        case OP_GET: rc = MPI_Get(r, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, win); break;
        case OP_ACC: rc = MPI_Accumulate(o, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, p->mop, win); break;
        case OP_GETACC:
            rc = MPI_Get_accumulate(o, p->oc, p->ot, r, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, p->mop, win);
            break;
        case OP_FOP: rc = MPI_Fetch_and_op(o, r, MPI_INT, p->target, p->disp, p->mop, win); break;
        case OP_CAS: rc = MPI_Compare_and_swap(o, (char *)o + 4, r, MPI_INT, p->target, p->disp, win); break;
        case OP_RPUT: rc = MPI_Rput(o, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, win, &q); break;
        case OP_RGET: rc = MPI_Rget(r, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, win, &q); break;
        case OP_RACC: rc = MPI_Raccumulate(o, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, p->mop, win, &q); break;
        default:
            rc = MPI_Rget_accumulate(o, p->oc, p->ot, r, p->oc, p->ot, p->target, p->disp, p->tc, p->tt, p->mop, win, &q);
            break;
        }
        MT_CHECK(rc == MPI_SUCCESS, "MPI_%s (origin %s, result %s) returned %d", op_name[p->op], p->dev_o ? "device" : "host",
                 p->dev_r ? "device" : "host", rc);
        if (q != MPI_REQUEST_NULL) reqs[(*nreq)++] = q;
        if (pl->sync == SYNC_LOCKALL && p->flush) MT_MPI(MPI_Win_flush(p->target, win));
    }
}

static void complete_reqs(MPI_Request *reqs, int *nreq, int mode)
{
    if (!*nreq) return;
    if (mode == 2) {
        int flag = 0;
        while (!flag) MT_MPI(MPI_Testall(*nreq, reqs, &flag, MPI_STATUSES_IGNORE));
    } else {
        MT_MPI(MPI_Waitall(*nreq, reqs, MPI_STATUSES_IGNORE));
    }
    *nreq = 0;
}

/* Local stores of epoch e into this rank's window memory. */
static void stores(plan_t *pl, int e, mt_ubuf_t *w)
{
    size_t off = pl->store_off[e][mt_rank], len = pl->store_len[e][mt_rank];
    if (!len) return;
    unsigned char *b = malloc(len);
    mt_fill(b, len, pl->store_seed[e] + (unsigned)mt_rank);
    mt_put(w->buf + off, b, len);
    free(b);
}

/* Make this rank's window memory and public copy agree (separate model): a lock of its own rank,
 * or MPI_Win_sync in a lock_all epoch. */
static void self_sync(MPI_Win win, int how)
{
    if (how) {
        MT_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, mt_rank, 0, win));
        MT_MPI(MPI_Win_unlock(mt_rank, win));
    } else {
        MT_MPI(MPI_Win_lock_all(0, win));
        MT_MPI(MPI_Win_sync(win));
        MT_MPI(MPI_Win_unlock_all(win));
    }
}

/* One run of the plan: `test` 1 on the system under test, 0 on host memory only. The window's
 * and every buffer's final bytes are left in their images. */
static void run(plan_t *pl, int test, mt_ubuf_t *w)
{
    int wdev = test && pl->wdev[mt_rank];
    *w = mt_ubuf_new(wdev, MPI_BYTE, (int)pl->wsize, MARGIN, 0);
    mt_ubuf_set(w, pl->wseed + (unsigned)mt_rank, 0);
    for (int i = 0; i < pl->nops; i++) {
        rop_t *p = &pl->ops[i];
        if (p->origin != mt_rank) continue;
        p->o = mt_ubuf_new(test && p->dev_o, p->ot, p->oc, MARGIN, 0);
        mt_ubuf_set(&p->o, p->seed, 0);
        p->r = mt_ubuf_new(test && p->dev_r, p->ot, p->oc, MARGIN, 0);
        mt_ubuf_set(&p->r, 0, 0xA5);
    }
    MPI_Win win;
    MT_MPI(MPI_Win_create(w->buf, (MPI_Aint)pl->wsize, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    void *base = NULL;
    int flag = 0;
    MT_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    MT_CHECK(flag && base == (void *)w->buf, "MPI_WIN_BASE %p, want %p", base, (void *)w->buf);
    int nmax = pl->per_epoch + 1, nreq = 0;
    MPI_Request *reqs = calloc((size_t)nmax, sizeof *reqs);
    MPI_Group all;
    MPI_Comm_group(MPI_COMM_WORLD, &all);
    if (pl->sync == SYNC_FENCE) MT_MPI(MPI_Win_fence(0, win));
    for (int e = 0; e < pl->epochs; e++) {
        int mode = pl->ops[e * pl->per_epoch].wait_mode, how = pl->ops[e * pl->per_epoch].flush;
        switch (pl->sync) {
        case SYNC_FENCE: /* fence, ops, fence, stores, fence (no operation between the last two) */
            issue(pl, e, -1, win, reqs, &nreq);
            MT_MPI(MPI_Win_fence(0, win));
            stores(pl, e, w);
            MT_MPI(MPI_Win_fence(0, win));
            break;
        case SYNC_PSCW:
            stores(pl, e, w);
            MT_MPI(MPI_Win_post(all, 0, win));
            MT_MPI(MPI_Win_start(all, 0, win));
            issue(pl, e, -1, win, reqs, &nreq);
            MT_MPI(MPI_Win_complete(win));
            MT_MPI(MPI_Win_wait(win));
            break;
        case SYNC_LOCK:
            stores(pl, e, w);
            self_sync(win, how);
            MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
            for (int k = 0; k < mt_size; k++) {
                int t = (mt_rank + k) % mt_size;
                MT_MPI(MPI_Win_lock(k % 2 ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, t, 0, win));
                issue(pl, e, t, win, reqs, &nreq);
                if (mode != 1) complete_reqs(reqs, &nreq, mode);
                MT_MPI(MPI_Win_unlock(t, win));
                complete_reqs(reqs, &nreq, mode);
            }
            MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
            self_sync(win, !how);
            break;
        default: /* lock_all, flushes */
            stores(pl, e, w);
            MT_MPI(MPI_Win_lock_all(0, win));
            MT_MPI(MPI_Win_sync(win));
            MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
            issue(pl, e, -1, win, reqs, &nreq);
            if (mode != 1) complete_reqs(reqs, &nreq, mode);
            MT_MPI(MPI_Win_unlock_all(win));
            complete_reqs(reqs, &nreq, mode);
            MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
            self_sync(win, how);
            break;
        }
    }
    MPI_Group_free(&all);
    free(reqs);
    MT_MPI(MPI_Win_free(&win));
    mt_get(w->img, w->base, w->len);
    for (int i = 0; i < pl->nops; i++) {
        rop_t *p = &pl->ops[i];
        if (p->origin != mt_rank) continue;
        mt_get(p->o.img, p->o.base, p->o.len);
        mt_get(p->r.img, p->r.base, p->r.len);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    int cases = 60, self = 0, first = 0;
    uint64_t seed = 0x0de5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--self")) self = 1;
        else if (!strcmp(argv[i], "--first") && i + 1 < argc) first = atoi(argv[++i]);
    }
    if (mt_size > 64) {
        if (mt_rank == 0) printf("rma_test: at most 64 ranks\n");
        MPI_Finalize();
        return 77;
    }
    /* Whether this MPI creates windows at all (the oracle needs them). */
    {
        int x = 0, rc, worst;
        MPI_Win win = MPI_WIN_NULL;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        rc = MPI_Win_create(&x, sizeof x, sizeof x, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) MPI_Win_free(&win);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        if (worst != MPI_SUCCESS) {
            if (mt_rank == 0) printf("rma_test: this MPI creates no windows on host memory: skipped\n");
            MPI_Finalize();
            return 77;
        }
    }
    long n_sync[NSYNC] = {0}, n_op[NOPS] = {0}, n_devwin = 0;
    for (int c = first; c < cases; c++) {
        mt_rng_state = seed * 1000003u + (uint64_t)c;
        plan_t pl;
        memset(&pl, 0, sizeof pl);
        plan_make(&pl);
        n_sync[pl.sync]++;
        n_devwin += pl.wdev[mt_rank];
        mt_ubuf_t wt, wo;
        run(&pl, self ? 0 : 1, &wt);
        /* keep the test run's buffers' images, then run the oracle into fresh ones */
        rop_t *keep = malloc((size_t)pl.nops * sizeof *keep);
        memcpy(keep, pl.ops, (size_t)pl.nops * sizeof *keep);
        run(&pl, 0, &wo);
        char what[160];
        snprintf(what, sizeof what, "case %d (%s, %d epochs, window on %s): window", c, sync_name[pl.sync], pl.epochs,
                 pl.wdev[mt_rank] ? "device" : "host");
        /* The oracle itself kept to the window (else the plan has no oracle: an MPI defect). */
        unsigned char *init = malloc(wo.len);
        mt_fill(init, wo.len, pl.wseed + (unsigned)mt_rank);
        size_t lm = (size_t)(wo.buf - wo.base), bad = 0;
        while (bad < wo.len && ((bad >= lm && bad < lm + pl.wsize) || init[bad] == wo.img[bad])) bad++;
        MT_CHECK(bad == wo.len, "case %d: the MPI alone wrote byte %zu of the host window's allocation, outside the window",
                 c, bad);
        free(init);
        mt_same(wt.img, wo.img, wt.len, what);
        for (int i = 0; i < pl.nops; i++) {
            rop_t *p = &pl.ops[i], *q = &keep[i];
            if (p->origin != mt_rank) continue;
            n_op[p->op]++;
            snprintf(what, sizeof what, "case %d (%s): op %d MPI_%s to %d, origin (%s)", c, sync_name[pl.sync], i,
                     op_name[p->op], p->target, q->dev_o ? "device" : "host");
            mt_same(q->o.img, p->o.img, p->o.len, what);
            snprintf(what, sizeof what, "case %d (%s): op %d MPI_%s to %d, result (%s)", c, sync_name[pl.sync], i,
                     op_name[p->op], p->target, q->dev_r ? "device" : "host");
            mt_same(q->r.img, p->r.img, p->r.len, what);
            mt_ubuf_free(&p->o);
            mt_ubuf_free(&p->r);
            mt_ubuf_free(&q->o);
            mt_ubuf_free(&q->r);
        }
        free(keep);
        mt_ubuf_free(&wt);
        mt_ubuf_free(&wo);
        plan_free(&pl);
    }
    if (mt_rank == 0) {
        printf("rma_test: %d cases, seed %#llx; synchronisation fence %ld, pscw %ld, lock %ld, lock_all %ld; rank 0: "
               "%ld device windows;",
               cases, (unsigned long long)seed, n_sync[0], n_sync[1], n_sync[2], n_sync[3], n_devwin);
        for (int k = 0; k < NOPS; k++) printf(" %s %ld", op_name[k], n_op[k]);
        printf("\n");
    }
    if (mt_expect_gdte() && getenv("GDTETEST_EXPECT_RMA")) {
        MT_CHECK(mt_counter("rma_windows") > 0 || !n_devwin, "no device window went through gdte");
        MT_CHECK(mt_counter("rma_ops") > 0, "no operation with a device buffer went through gdte");
    }
    return mt_finish("rma_test");
}
