/*
 * Calls gdte does not carry (src/mpi/refuse.h): a representative of each family, on device
 * buffers and on host buffers, with MPI_ERRORS_RETURN on every handle.
 *
 * Under an MPI that cannot read device memory (fake mode, GDTE_MPI_GPU_AWARE unset or 0) a
 * call given a device buffer the MPI would touch returns an error of class MPI_ERR_BUFFER on
 * every rank, and the MPI never sees it: receive buffers, windows and files stay as they were.
 * Under a GPU-aware MPI (GDTE_MPI_GPU_AWARE=1; in fake mode the "device" is host memory any
 * MPI reads), under GDTE_DISABLE=1 and without the interposer, the same calls go to the MPI
 * and give the same data as on host buffers. Host buffers always go through and give correct
 * data. Buffers the MPI does not touch (a non-root's receive buffer, MPI_IN_PLACE) are never
 * refused.
 *
 * Family: one-sided (MPI_Win_attach of device memory to a dynamic window). Calls gdte carries
 * now, on either kind of buffer: Win_create + Put/Get under fences and post/start, Fetch_and_op
 * under lock_all; Bcast, Allgather, Alltoallw, Neighbor_alltoallw (Cartesian), Ibcast,
 * File_write_at/File_read_at and a split collective write (MPI-IO; the random cases are
 * io_test's), Pack_external / Unpack_external, Buffer_attach (with buffered sends of host and device
 * messages, one past its capacity: MPI_ERR_BUFFER). Other shapes of the table's probes: Allgatherv and Alltoallv
 * (blocks at displacements), Neighbor_allgather on a distributed
 * graph, Fetch_and_op (an MPI_NO_OP origin is never looked at), a split collective write, and
 * Bcast on an intercommunicator (MPI_ROOT, MPI_PROC_NULL: only the ranks whose buffer moves
 * are refused).
 *
 * MPI_Pack_external, MPI_Unpack_external and MPI_Buffer_attach were refused once too (the
 * random external32 round trips are random_test's). The reductions (Reduce, Allreduce,
 * Reduce_scatter, Iallreduce, Reduce_local) were refused once
 * and are carried now (interpose_reduce.c, tests/mpi/reduce_test.c), and so are the alltoall,
 * gather, scatter and bcast collectives and the neighborhood collectives (interpose_coll.c,
 * tests/mpi/coll_test.c), blocking, nonblocking and persistent (Open MPI's MPIX_*_init, here
 * MPIX_Allreduce_init): on device buffers they go through in every mode and give the data of
 * the host buffers.
 */
#include <unistd.h>
#include "mpitest.h"
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#define N 16

static int expect_refuse; /* device buffers are refused in this run */

/* Whether a call on a device buffer was refused, checked against what this run expects.
 * Returns 1 when it went through (the caller then checks the data). */
static int went_through(int dev, int rc, const char *what)
{
    if (dev && expect_refuse) {
        MT_CHECK(mt_eclass(rc) == MPI_ERR_BUFFER, "%s on device memory: error class %d, want MPI_ERR_BUFFER (%d)", what,
                 mt_eclass(rc), MPI_ERR_BUFFER);
        return 0;
    }
    MT_CHECK(rc == MPI_SUCCESS, "%s on %s memory returned %d", what, dev ? "device" : "host", rc);
    return rc == MPI_SUCCESS;
}

static const char *kind(int dev) { return dev ? "device" : "host"; }

/* A call gdte carries: it goes through on buffers of either kind, in every mode. */
static int carried(int dev, int rc, const char *what)
{
    MT_CHECK(rc == MPI_SUCCESS, "%s on %s memory returned %d (gdte carries it)", what, kind(dev), rc);
    return rc == MPI_SUCCESS;
}

static void bcast(int dev)
{
    int *b = mt_alloc(dev, N * sizeof(int));
    for (int i = 0; i < N; i++) b[i] = mt_rank == 0 ? 3 * i + 7 : -1;
    int ok = carried(dev, MPI_Bcast(b, N, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    for (int i = 0; i < N; i++) {
        int want = ok || mt_rank == 0 ? 3 * i + 7 : -1;
        if (b[i] != want) {
            MT_CHECK(0, "MPI_Bcast (%s): element %d is %d, want %d", kind(dev), i, b[i], want);
            break;
        }
    }
    mt_free(dev, b);
}

static void ibcast(int dev)
{
    int *b = mt_alloc(dev, N * sizeof(int));
    for (int i = 0; i < N; i++) b[i] = mt_rank == 1 ? 5 * i - 3 : -1;
    MPI_Request r = MPI_REQUEST_NULL;
    int root = mt_size > 1 ? 1 : 0;
    if (carried(dev, MPI_Ibcast(b, N, MPI_INT, root, MPI_COMM_WORLD, &r), "MPI_Ibcast")) {
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < N; i++)
            if (b[i] != 5 * i - 3) {
                MT_CHECK(0, "MPI_Ibcast (%s): element %d is %d", kind(dev), i, b[i]);
                break;
            }
    } else {
        MT_CHECK(r == MPI_REQUEST_NULL, "a refused MPI_Ibcast set a request");
        for (int i = 0; i < N && mt_rank != root; i++)
            if (b[i] != -1) {
                MT_CHECK(0, "refused MPI_Ibcast wrote element %d", i);
                break;
            }
    }
    mt_free(dev, b);
}

/* The send buffer stays on the host: the refusal must name the receive buffer. */
static void allgather(int dev)
{
    int s[3], *r = mt_alloc(dev, 3 * mt_size * sizeof(int));
    for (int i = 0; i < 3; i++) s[i] = mt_rank * 10 + i;
    for (int i = 0; i < 3 * mt_size; i++) r[i] = -1;
    int ok = carried(dev, MPI_Allgather(s, 3, MPI_INT, r, 3, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
    for (int p = 0; p < mt_size; p++)
        for (int i = 0; i < 3; i++) {
            int want = ok ? p * 10 + i : -1;
            MT_CHECK(r[p * 3 + i] == want, "MPI_Allgather (%s): from %d element %d is %d, want %d", kind(dev), p, i,
                     r[p * 3 + i], want);
        }
    mt_free(dev, r);
}

/* Two ints for each peer; received as one pair type from even peers, as two MPI_INT from odd. */
static void alltoallw(int dev)
{
    int np = mt_size;
    int *s = mt_alloc(dev, 2 * np * sizeof(int)), *r = mt_alloc(dev, 2 * np * sizeof(int));
    int *sc = malloc(np * sizeof(int)), *sd = malloc(np * sizeof(int)), *rc = malloc(np * sizeof(int)),
        *rd = malloc(np * sizeof(int));
    MPI_Datatype *st = malloc(np * sizeof(MPI_Datatype)), *rt = malloc(np * sizeof(MPI_Datatype)), pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    for (int p = 0; p < np; p++) {
        s[2 * p] = mt_rank * 100 + p;
        s[2 * p + 1] = mt_rank * 100 + p + 50;
        r[2 * p] = r[2 * p + 1] = -1;
        sc[p] = 2, sd[p] = 2 * p * (int)sizeof(int), st[p] = MPI_INT;
        rc[p] = p % 2 ? 2 : 1, rd[p] = 2 * p * (int)sizeof(int), rt[p] = p % 2 ? MPI_INT : pair;
    }
    int ok = carried(dev, MPI_Alltoallw(s, sc, sd, st, r, rc, rd, rt, MPI_COMM_WORLD), "MPI_Alltoallw");
    for (int p = 0; p < np; p++) {
        int w0 = ok ? p * 100 + mt_rank : -1, w1 = ok ? p * 100 + mt_rank + 50 : -1;
        MT_CHECK(r[2 * p] == w0 && r[2 * p + 1] == w1, "MPI_Alltoallw (%s): from %d got %d %d, want %d %d", kind(dev), p,
                 r[2 * p], r[2 * p + 1], w0, w1);
    }
    MPI_Type_free(&pair);
    free(sc), free(sd), free(rc), free(rd), free(st), free(rt);
    mt_free(dev, s);
    mt_free(dev, r);
}

/* A non-periodic line of processes: block 0 goes to / comes from the left neighbour, block 1
 * the right; at the ends the missing neighbour is MPI_PROC_NULL and its block is untouched. */
static void neighbor_alltoallw(int dev)
{
    MPI_Comm cart;
    int dims[1] = {mt_size}, periods[1] = {0};
    MT_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart));
    int left, right;
    MPI_Cart_shift(cart, 0, 1, &left, &right);
    int *s = mt_alloc(dev, 2 * sizeof(int)), *r = mt_alloc(dev, 2 * sizeof(int));
    s[0] = mt_rank * 10, s[1] = mt_rank * 10 + 1, r[0] = r[1] = -1;
    int cnt[2] = {1, 1};
    MPI_Aint disp[2] = {0, sizeof(int)};
    MPI_Datatype t[2] = {MPI_INT, MPI_INT};
    int ok = carried(dev, MPI_Neighbor_alltoallw(s, cnt, disp, t, r, cnt, disp, t, cart), "MPI_Neighbor_alltoallw");
    int w0 = ok && left != MPI_PROC_NULL ? left * 10 + 1 : -1, w1 = ok && right != MPI_PROC_NULL ? right * 10 : -1;
    MT_CHECK(r[0] == w0 && r[1] == w1, "MPI_Neighbor_alltoallw (%s): got %d %d, want %d %d", kind(dev), r[0], r[1], w0, w1);
    mt_free(dev, s);
    mt_free(dev, r);
    MPI_Comm_free(&cart);
}

static void reductions(int dev)
{
    int *s = mt_alloc(dev, N * sizeof(int)), *r = mt_alloc(dev, N * sizeof(int));
    int sum_ranks = mt_size * (mt_size - 1) / 2;
    for (int i = 0; i < N; i++) s[i] = mt_rank + i, r[i] = -1;
    int ok = carried(dev, MPI_Reduce(s, r, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    if (mt_rank == 0)
        for (int i = 0; i < N; i++) {
            int want = ok ? sum_ranks + mt_size * i : -1;
            MT_CHECK(r[i] == want, "MPI_Reduce (%s): element %d is %d, want %d", kind(dev), i, r[i], want);
        }
    for (int i = 0; i < N; i++) r[i] = -1;
    ok = carried(dev, MPI_Allreduce(s, r, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    for (int i = 0; i < N; i++) {
        int want = ok ? mt_size - 1 + i : -1;
        MT_CHECK(r[i] == want, "MPI_Allreduce (%s): element %d is %d, want %d", kind(dev), i, r[i], want);
    }
    mt_free(dev, s);
    mt_free(dev, r);
}

/* Buffers the MPI does not touch are not looked at: a host MPI_Reduce whose non-root ranks pass
 * a device receive buffer, and MPI_IN_PLACE. Both go through in every mode. */
static void insignificant(void)
{
    int s[N], *r = mt_rank == 0 ? calloc(N, sizeof(int)) : mt_dev_alloc(N * sizeof(int));
    for (int i = 0; i < N; i++) s[i] = mt_rank + 1;
    MT_MPI(MPI_Reduce(s, r, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (mt_rank == 0)
        for (int i = 0; i < N; i++) MT_CHECK(r[i] == mt_size * (mt_size + 1) / 2, "MPI_Reduce at root: %d", r[i]);
    if (mt_rank == 0) free(r);
    else mt_dev_free(r);
    MT_MPI(MPI_Allreduce(MPI_IN_PLACE, s, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MT_CHECK(s[0] == mt_size * (mt_size + 1) / 2, "MPI_Allreduce in place: %d", s[0]);
}

/* A window over device memory (carried: the MPI's window is a host copy, synchronised at each
 * fence and post/wait), then Put and Get with a device origin buffer under fences, a local store
 * into the window between fences, and a Put of a derived origin type under
 * post-start-complete-wait (passive target: atomics() below; random cases: rma_test). */
static void one_sided(int dev)
{
    int np = mt_size, right = (mt_rank + 1) % np, left = (mt_rank + np - 1) % np;
    int wdev = dev, *wmem = mt_alloc(wdev, np * sizeof(int));
    for (int i = 0; i < np; i++) wmem[i] = -1;
    MPI_Win win = MPI_WIN_NULL;
    MT_CHECK(carried(dev, MPI_Win_create(wmem, np * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win),
                     "MPI_Win_create"),
             "no window");
    if (win == MPI_WIN_NULL) {
        mt_free(wdev, wmem);
        return;
    }
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    void *wbase = NULL;
    int flag = 0;
    MT_MPI(MPI_Win_get_attr(win, MPI_WIN_BASE, &wbase, &flag));
    MT_CHECK(flag && wbase == (void *)wmem, "MPI_WIN_BASE of a %s window: %p, want %p", kind(dev), wbase, (void *)wmem);
    int *o = mt_alloc(dev, sizeof(int));
    *o = 1000 + mt_rank;
    MT_MPI(MPI_Win_fence(0, win));
    int ok = carried(dev, MPI_Put(o, 1, MPI_INT, right, mt_rank, 1, MPI_INT, win), "MPI_Put");
    MT_MPI(MPI_Win_fence(0, win));
    int want = ok ? 1000 + left : -1;
    MT_CHECK(wmem[left] == want, "MPI_Put (%s origin): window slot %d is %d, want %d", kind(dev), left, wmem[left], want);
    wmem[mt_rank] = 2000 + mt_rank;
    *o = -1;
    MT_MPI(MPI_Win_fence(0, win));
    ok = carried(dev, MPI_Get(o, 1, MPI_INT, right, right, 1, MPI_INT, win), "MPI_Get");
    MT_MPI(MPI_Win_fence(0, win));
    want = ok ? 2000 + right : -1;
    MT_CHECK(*o == want, "MPI_Get (%s origin): got %d, want %d", kind(dev), *o, want);
    /* Post-start-complete-wait, a derived origin type (a vector of 2 ints, 1 apart): each rank
     * exposes its window to its left neighbour and accesses its right one. */
    if (np < 2) {
        MT_MPI(MPI_Win_free(&win));
        mt_free(dev, o);
        mt_free(wdev, wmem);
        return;
    }
    MPI_Group wg, gl, gr;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_incl(wg, 1, &left, &gl);
    MPI_Group_incl(wg, 1, &right, &gr);
    MPI_Datatype vec;
    MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *ov = mt_alloc(dev, 4 * sizeof(int));
    ov[0] = 3000 + mt_rank, ov[1] = -7, ov[2] = 4000 + mt_rank, ov[3] = -7;
    for (int i = 0; i < np; i++) wmem[i] = -1;
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_MPI(MPI_Win_post(gl, 0, win));
    MT_MPI(MPI_Win_start(gr, 0, win));
    ok = carried(dev, MPI_Put(ov, 1, vec, right, 0, 2, MPI_INT, win), "MPI_Put (vector origin)");
    MT_MPI(MPI_Win_complete(win));
    MT_MPI(MPI_Win_wait(win));
    MT_CHECK(wmem[0] == (ok ? 3000 + left : -1) && wmem[1] == (ok ? 4000 + left : -1),
             "MPI_Put under post/start (%s vector origin): window %d %d", kind(dev), wmem[0], wmem[1]);
    MPI_Type_free(&vec);
    MPI_Group_free(&gl);
    MPI_Group_free(&gr);
    MPI_Group_free(&wg);
    mt_free(dev, ov);
    MT_MPI(MPI_Win_free(&win));
    mt_free(dev, o);
    mt_free(wdev, wmem);
}

/* Each rank writes its block at its own offset of a shared file; all read the whole file back
 * into host memory, then into device memory. */
static void file_io(int dev)
{
    char path[256] = "";
    if (mt_rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/gdte_refuse_test_%ld_%d", tmp && *tmp ? tmp : "/tmp", (long)getpid(), dev);
    }
    MT_MPI(MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD));
    MPI_File fh;
    MT_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                         &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    int *b = mt_alloc(dev, N * sizeof(int));
    for (int i = 0; i < N; i++) b[i] = mt_rank * 1000 + i;
    MPI_Status st;
    int64_t w0 = mt_counter("io_writes"), r0 = mt_counter("io_reads");
    int ok = carried(dev, MPI_File_write_at(fh, (MPI_Offset)mt_rank * N * sizeof(int), b, N, MPI_INT, &st),
                     "MPI_File_write_at");
    if (dev && mt_expect_gdte()) MT_CHECK(mt_counter("io_writes") == w0 + 1, "MPI_File_write_at of device memory not carried");
    MT_MPI(MPI_File_sync(fh));
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_MPI(MPI_File_sync(fh));
    int total = N * mt_size, *all = calloc(total, sizeof(int)), got = -1;
    MT_MPI(MPI_File_read_at(fh, 0, all, total, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &got);
    MT_CHECK(got == (ok ? total : 0), "MPI_File_read_at after a %s write read %d ints, want %d", kind(dev), got,
             ok ? total : 0);
    for (int i = 0; ok && i < total; i++)
        if (all[i] != (i / N) * 1000 + i % N) {
            MT_CHECK(0, "file int %d is %d", i, all[i]);
            break;
        }
    if (ok) {
        /* Reading into the buffer: the same bytes (carried on device memory). */
        int *d = mt_alloc(dev, total * sizeof(int));
        for (int i = 0; i < total; i++) d[i] = -1;
        if (carried(dev, MPI_File_read_at(fh, 0, d, total, MPI_INT, &st), "MPI_File_read_at"))
            mt_same(d, all, total * sizeof(int), "MPI_File_read_at");
        if (dev && mt_expect_gdte()) MT_CHECK(mt_counter("io_reads") == r0 + 1, "MPI_File_read_at into device memory not carried");
        mt_free(dev, d);
    }
    free(all);
    mt_free(dev, b);
    MT_MPI(MPI_File_close(&fh));
}

/* external32 is big-endian: int 0x01020304 + i is the bytes 01 02 03 04+i. */
static void pack_external(int dev)
{
    int *in = mt_alloc(dev, N * sizeof(int)), *back = mt_alloc(dev, N * sizeof(int));
    unsigned char out[N * 4];
    memset(out, 0xEE, sizeof out);
    for (int i = 0; i < N; i++) in[i] = 0x01020304 + i, back[i] = -1;
    MPI_Aint pos = 0;
    int ok = carried(dev, MPI_Pack_external("external32", in, N, MPI_INT, out, sizeof out, &pos),
                     "MPI_Pack_external");
    if (ok) {
        MT_CHECK(pos == N * 4, "MPI_Pack_external position %ld", (long)pos);
        for (int i = 0; i < N; i++)
            MT_CHECK(out[4 * i] == 1 && out[4 * i + 1] == 2 && out[4 * i + 2] == 3 && out[4 * i + 3] == 4 + i,
                     "MPI_Pack_external (%s): int %d packed as %02x %02x %02x %02x", kind(dev), i, out[4 * i],
                     out[4 * i + 1], out[4 * i + 2], out[4 * i + 3]);
    } else {
        MT_CHECK(pos == 0 && out[0] == 0xEE, "a refused MPI_Pack_external wrote its output");
        for (int i = 0; i < N; i++) out[4 * i] = 1, out[4 * i + 1] = 2, out[4 * i + 2] = 3, out[4 * i + 3] = 4 + i;
    }
    pos = 0;
    ok = carried(dev, MPI_Unpack_external("external32", out, sizeof out, &pos, back, N, MPI_INT),
                 "MPI_Unpack_external");
    for (int i = 0; i < N; i++) {
        int want = ok ? 0x01020304 + i : -1;
        if (back[i] != want) {
            MT_CHECK(0, "MPI_Unpack_external (%s): int %d is %#x, want %#x", kind(dev), i, back[i], want);
            break;
        }
    }
    mt_free(dev, in);
    mt_free(dev, back);
}

static void local_calls(int dev)
{
    int in[N], *io = mt_alloc(dev, N * sizeof(int));
    for (int i = 0; i < N; i++) in[i] = i, io[i] = 100;
    int ok = carried(dev, MPI_Reduce_local(in, io, N, MPI_INT, MPI_SUM), "MPI_Reduce_local");
    for (int i = 0; i < N; i++) {
        int want = ok ? 100 + i : 100;
        if (io[i] != want) {
            MT_CHECK(0, "MPI_Reduce_local (%s): element %d is %d, want %d", kind(dev), i, io[i], want);
            break;
        }
    }
    mt_free(dev, io);

    /* A buffered send through an attached buffer of either kind (carried: on device memory the
     * MPI is given host memory of the same size; the message is host memory here, a device one
     * in bsend_device()); then a message larger than the whole buffer: the same error class as
     * through the host buffer (the MPI's own accounting either way). */
    int size = MPI_BSEND_OVERHEAD + N * (int)sizeof(int) + 64;
    static int host_overflow = -1;
    void *att = mt_alloc(dev, size);
    int64_t shadowed = mt_counter("buffers_shadowed");
    if (carried(dev, MPI_Buffer_attach(att, size), "MPI_Buffer_attach")) {
        if (dev && mt_expect_gdte())
            MT_CHECK(mt_counter("buffers_shadowed") == shadowed + 1, "MPI_Buffer_attach of device memory not carried");
        int msg[N], got[N];
        for (int i = 0; i < N; i++) msg[i] = mt_rank * 7 + i;
        int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
        MT_MPI(MPI_Bsend(msg, N, MPI_INT, to, 77, MPI_COMM_WORLD));
        MT_MPI(MPI_Recv(got, N, MPI_INT, from, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MT_CHECK(got[N - 1] == from * 7 + N - 1, "MPI_Bsend through an attached %s buffer: %d", kind(dev), got[N - 1]);
        int big[8 * N] = {0};
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        int e = MPI_Bsend(big, 8 * N, MPI_INT, to, 79, MPI_COMM_WORLD);
        if (e == MPI_SUCCESS) MT_MPI(MPI_Recv(big, 8 * N, MPI_INT, from, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        if (!dev) host_overflow = mt_eclass(e);
        else if (host_overflow >= 0)
            MT_CHECK(mt_eclass(e) == host_overflow,
                     "MPI_Bsend past the capacity of an attached device buffer: class %d, through a host buffer %d",
                     mt_eclass(e), host_overflow);
        void *det;
        int dsize;
        MT_MPI(MPI_Buffer_detach(&det, &dsize));
        MT_CHECK(det == att && dsize == size, "MPI_Buffer_detach gave back %p/%d, want %p/%d", det, dsize, att, size);
        /* Detached: attaching again works (the MPI holds none). */
        MT_MPI(MPI_Buffer_attach(att, size));
        MT_MPI(MPI_Buffer_detach(&det, &dsize));
        MT_CHECK(det == att && dsize == size, "second MPI_Buffer_detach gave back %p/%d", det, dsize);
    }
    mt_free(dev, att);
}

/* A buffered send of a device message through an attached device buffer (both carried), and a
 * device receive of it; outside refuse_test's phases, whose point-to-point counters must not
 * move. */
static void bsend_device(void)
{
    int size = 2 * (MPI_BSEND_OVERHEAD + N * (int)sizeof(int));
    void *att = mt_dev_alloc(size);
    int *dmsg = mt_dev_alloc(N * sizeof(int)), *dgot = mt_dev_alloc(N * sizeof(int)), hmsg[N], hgot[N];
    for (int i = 0; i < N; i++) hmsg[i] = -mt_rank * 5 - i, hgot[i] = 0;
    mt_put(dmsg, hmsg, sizeof hmsg);
    mt_put(dgot, hgot, sizeof hgot);
    int to = (mt_rank + 1) % mt_size, from = (mt_rank + mt_size - 1) % mt_size;
    mt_phase_t ph = mt_phase_begin(1);
    MT_MPI(MPI_Buffer_attach(att, size));
    MT_MPI(MPI_Bsend(dmsg, N, MPI_INT, to, 78, MPI_COMM_WORLD));
    MT_MPI(MPI_Recv(dgot, N, MPI_INT, from, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    void *det;
    int dsize;
    MT_MPI(MPI_Buffer_detach(&det, &dsize));
    mt_phase_end(ph, "MPI_Bsend of device memory through an attached device buffer");
    mt_get(hgot, dgot, sizeof hgot);
    MT_CHECK(hgot[0] == -from * 5 && hgot[N - 1] == -from * 5 - (N - 1),
             "MPI_Bsend of device memory through an attached device buffer: %d %d", hgot[0], hgot[N - 1]);
    MT_CHECK(det == att && dsize == size, "MPI_Buffer_detach gave back %p/%d, want %p/%d", det, dsize, att, size);
    mt_dev_free(att);
    mt_dev_free(dmsg);
    mt_dev_free(dgot);
}

/* Blocks at displacements, in reverse rank order: the receive buffer is looked at by its lowest
 * and its highest block. The send buffers stay on the host. */
static void vector_shapes(int dev)
{
    int np = mt_size, *cnt = malloc(np * sizeof(int)), *dsp = malloc(np * sizeof(int));
    for (int p = 0; p < np; p++) cnt[p] = 2, dsp[p] = 2 * (np - 1 - p);
    int s[2] = {mt_rank * 10, mt_rank * 10 + 1}, *r = mt_alloc(dev, 2 * np * sizeof(int));
    for (int i = 0; i < 2 * np; i++) r[i] = -1;
    int ok = carried(dev, MPI_Allgatherv(s, 2, MPI_INT, r, cnt, dsp, MPI_INT, MPI_COMM_WORLD), "MPI_Allgatherv");
    for (int p = 0; p < np; p++) {
        int *b = r + 2 * (np - 1 - p), w0 = ok ? p * 10 : -1, w1 = ok ? p * 10 + 1 : -1;
        MT_CHECK(b[0] == w0 && b[1] == w1, "MPI_Allgatherv (%s): from %d got %d %d", kind(dev), p, b[0], b[1]);
    }
    int *sa = malloc(2 * np * sizeof(int)), *sd = malloc(np * sizeof(int));
    for (int p = 0; p < np; p++) sa[2 * p] = mt_rank * 100 + p, sa[2 * p + 1] = -mt_rank * 100 - p, sd[p] = 2 * p;
    for (int i = 0; i < 2 * np; i++) r[i] = -1;
    ok = carried(dev, MPI_Alltoallv(sa, cnt, sd, MPI_INT, r, cnt, dsp, MPI_INT, MPI_COMM_WORLD), "MPI_Alltoallv");
    for (int p = 0; p < np; p++) {
        int *b = r + 2 * (np - 1 - p), w0 = ok ? p * 100 + mt_rank : -1, w1 = ok ? -p * 100 - mt_rank : -1;
        MT_CHECK(b[0] == w0 && b[1] == w1, "MPI_Alltoallv (%s): from %d got %d %d", kind(dev), p, b[0], b[1]);
    }
    /* Reduce_scatter: 2 elements for each rank, the sum over ranks of (index + rank). */
    for (int i = 0; i < 2 * np; i++) sa[i] = i + mt_rank;
    int *rs = mt_alloc(dev, 2 * sizeof(int));
    rs[0] = rs[1] = -1;
    ok = carried(dev, MPI_Reduce_scatter(sa, rs, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter");
    for (int i = 0; i < 2; i++) {
        int want = ok ? np * (2 * mt_rank + i) + np * (np - 1) / 2 : -1;
        MT_CHECK(rs[i] == want, "MPI_Reduce_scatter (%s): element %d is %d, want %d", kind(dev), i, rs[i], want);
    }
    mt_free(dev, rs);
    free(sa), free(sd), free(cnt), free(dsp);
    mt_free(dev, r);
}

/* Nonblocking and persistent reductions: carried, on buffers of either kind. */
static void request_shapes(int dev)
{
    int *s = mt_alloc(dev, N * sizeof(int)), *r = mt_alloc(dev, N * sizeof(int));
    for (int i = 0; i < N; i++) s[i] = mt_rank * i, r[i] = -1;
    MPI_Request q = MPI_REQUEST_NULL;
    int ok = carried(dev, MPI_Iallreduce(s, r, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q), "MPI_Iallreduce");
    if (ok) MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
    else MT_CHECK(q == MPI_REQUEST_NULL, "a refused MPI_Iallreduce set a request");
    for (int i = 0; i < N; i++) {
        int want = ok ? i * mt_size * (mt_size - 1) / 2 : -1;
        MT_CHECK(r[i] == want, "MPI_Iallreduce (%s): element %d is %d, want %d", kind(dev), i, r[i], want);
    }
#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
    for (int i = 0; i < N; i++) r[i] = -1;
    q = MPI_REQUEST_NULL;
    /* Open MPI's persistent reduction: carried (the rounds and data are reduce_test's). */
    ok = carried(dev, MPIX_Allreduce_init(s, r, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &q),
                 "MPIX_Allreduce_init");
    if (ok) {
        for (int round = 0; round < 2; round++) {
            MT_MPI(MPI_Start(&q));
            MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        }
        MT_MPI(MPI_Request_free(&q));
    }
    for (int i = 0; i < N; i++) {
        int want = ok ? i * (mt_size - 1) : -1;
        MT_CHECK(r[i] == want, "MPIX_Allreduce_init (%s): element %d is %d, want %d", kind(dev), i, r[i], want);
    }
#endif
    mt_free(dev, s);
    mt_free(dev, r);
}

/* A ring as a distributed graph: one in-neighbour (the left), one out-neighbour (the right). */
static void dist_graph(int dev)
{
    int left = (mt_rank + mt_size - 1) % mt_size, right = (mt_rank + 1) % mt_size;
    int w = 1; /* weights rather than MPI_UNWEIGHTED, a pointer constant the compiler warns about */
    MPI_Comm g;
    MT_MPI(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, &w, 1, &right, &w, MPI_INFO_NULL, 0, &g));
    int s[2] = {mt_rank, -mt_rank}, *r = mt_alloc(dev, 2 * sizeof(int));
    r[0] = r[1] = 99;
    int ok = carried(dev, MPI_Neighbor_allgather(s, 2, MPI_INT, r, 2, MPI_INT, g), "MPI_Neighbor_allgather");
    int w0 = ok ? left : 99, w1 = ok ? -left : 99;
    MT_CHECK(r[0] == w0 && r[1] == w1, "MPI_Neighbor_allgather (%s): got %d %d, want %d %d", kind(dev), r[0], r[1], w0,
             w1);
    mt_free(dev, r);
    MPI_Comm_free(&g);
}

/* Passive target: an MPI_NO_OP origin and a device result buffer (carried). */
static void atomics(int dev)
{
    int right = (mt_rank + 1) % mt_size, *wmem = calloc(1, sizeof(int));
    *wmem = 5 * mt_rank;
    MPI_Win win;
    MT_MPI(MPI_Win_create(wmem, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int *o = mt_alloc(dev, sizeof(int)), res = -1;
    *o = 12345;
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_MPI(MPI_Win_lock_all(0, win));
    MT_MPI(MPI_Fetch_and_op(o, &res, MPI_INT, right, 0, MPI_NO_OP, win));
    MT_MPI(MPI_Win_flush(right, win));
    MT_CHECK(res == 5 * right, "MPI_Fetch_and_op MPI_NO_OP (%s origin): %d, want %d", kind(dev), res, 5 * right);
    int one = 1, *dres = mt_alloc(dev, sizeof(int));
    *dres = -1;
    int ok = carried(dev, MPI_Fetch_and_op(&one, dres, MPI_INT, right, 0, MPI_SUM, win), "MPI_Fetch_and_op");
    MT_MPI(MPI_Win_flush(right, win));
    MT_CHECK(*dres == (ok ? 5 * right : -1), "MPI_Fetch_and_op (%s result): %d", kind(dev), *dres);
    MT_MPI(MPI_Win_unlock_all(win));
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_CHECK(*wmem == 5 * mt_rank + ok, "window after MPI_Fetch_and_op (%s): %d", kind(dev), *wmem);
    MT_MPI(MPI_Win_free(&win));
    mt_free(dev, o);
    mt_free(dev, dres);
    free(wmem);
}

/* A dynamic window: device memory attached is refused (a peer's displacement is an address in
 * the application's memory, which no host copy can have); host memory goes through. */
static void dynamic_window(int dev)
{
    MPI_Win win;
    MT_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    int *m = mt_alloc(dev, N * sizeof(int));
    if (went_through(dev, MPI_Win_attach(win, m, N * sizeof(int)), "MPI_Win_attach")) MT_MPI(MPI_Win_detach(win, m));
    MT_MPI(MPI_Win_free(&win));
    mt_free(dev, m);
}

/* A split collective: refused at _begin (and nothing in progress); otherwise _end completes it. */
static void split_collective(int dev)
{
    char path[256] = "";
    if (mt_rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/gdte_refuse_split_%ld_%d", tmp && *tmp ? tmp : "/tmp", (long)getpid(), dev);
    }
    MT_MPI(MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD));
    MPI_File fh;
    MT_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                         &fh));
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    int *b = mt_alloc(dev, N * sizeof(int));
    for (int i = 0; i < N; i++) b[i] = mt_rank * 100 + i;
    MPI_Offset at = (MPI_Offset)mt_rank * N * sizeof(int);
    MPI_Status st;
    int ok = carried(dev, MPI_File_write_at_all_begin(fh, at, b, N, MPI_INT), "MPI_File_write_at_all_begin");
    if (ok) MT_MPI(MPI_File_write_at_all_end(fh, b, &st));
    MT_MPI(MPI_File_sync(fh));
    MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MT_MPI(MPI_File_sync(fh));
    int back[N], got = -1;
    MT_MPI(MPI_File_read_at(fh, at, back, N, MPI_INT, &st));
    MPI_Get_count(&st, MPI_INT, &got);
    MT_CHECK(got == (ok ? N : 0), "split collective write (%s): read back %d ints", kind(dev), got);
    if (ok && got == N) mt_same(back, b, sizeof back, "split collective write");
    mt_free(dev, b);
    MT_MPI(MPI_File_close(&fh));
}

/* Even ranks form group A, odd ranks group B; A's first rank broadcasts to B. In A the root
 * passes MPI_ROOT and the others MPI_PROC_NULL: their device buffers are not touched, so they
 * go through in every mode. */
static void intercomm_bcast(int dev)
{
    if (mt_size < 2) return;
    MPI_Comm half, inter;
    int a = mt_rank % 2 == 0, hr;
    MT_MPI(MPI_Comm_split(MPI_COMM_WORLD, a, mt_rank, &half));
    MPI_Comm_rank(half, &hr);
    MT_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, a ? 1 : 0, 31, &inter));
    int root = a ? (hr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    int *b = mt_alloc(dev, N * sizeof(int));
    for (int i = 0; i < N; i++) b[i] = root == MPI_ROOT ? 9 * i + 1 : -1;
    int rc = MPI_Bcast(b, N, MPI_INT, root, inter);
    int ok = 0;
    if (root == MPI_PROC_NULL) MT_CHECK(rc == MPI_SUCCESS, "MPI_Bcast with MPI_PROC_NULL returned %d", rc);
    else ok = carried(dev, rc, "MPI_Bcast (intercommunicator)");
    if (!a)
        for (int i = 0; i < N; i++) {
            int want = ok ? 9 * i + 1 : -1;
            if (b[i] != want) {
                MT_CHECK(0, "intercommunicator MPI_Bcast (%s): element %d is %d, want %d", kind(dev), i, b[i], want);
                break;
            }
        }
    mt_free(dev, b);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

/* Whether the MPI underneath moves device memory as gdte decides it (GDTE_MPI_GPU_AWARE). */
static int mpi_gpu_aware(void)
{
    const char *k = getenv("GDTE_MPI_GPU_AWARE");
    if (k && !strcmp(k, "1")) return 1;
    if (k && !strcmp(k, "0")) return 0;
    if (!mt_cuda()) return 0; /* fake mode: "auto" asks the MPI, whose answer concerns a real GPU */
    int (*q)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "MPIX_Query_cuda_support");
    return q && q() == 1;
}

/* Whether this MPI creates windows on host memory at all (an Open MPI without a usable one-sided
 * component for its transports does not): the one-sided cases need it as their reference. */
static int windows_work(void)
{
    int x = 0, ok;
    MPI_Win win = MPI_WIN_NULL;
    int rc = MPI_Win_create(&x, sizeof x, sizeof x, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Allreduce(&rc, &ok, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) MPI_Win_free(&win);
    if (ok != MPI_SUCCESS && mt_rank == 0)
        printf("one-sided cases skipped: this MPI refuses MPI_Win_create on host memory (error %d)\n", ok);
    return ok == MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    expect_refuse = mt_expect_gdte() && !mpi_gpu_aware();
    if (mt_rank == 0)
        printf("device buffers in calls gdte does not carry: %s\n", expect_refuse ? "refused" : "passed to the MPI");
    int rma = windows_work();
    for (int dev = 0; dev < 2; dev++) {
        mt_phase_t ph = mt_phase_begin(0);
        bcast(dev);
        ibcast(dev);
        allgather(dev);
        alltoallw(dev);
        neighbor_alltoallw(dev);
        reductions(dev);
        if (rma) one_sided(dev);
        file_io(dev);
        pack_external(dev);
        local_calls(dev);
        vector_shapes(dev);
        request_shapes(dev);
        dist_graph(dev);
        if (rma) atomics(dev);
        if (rma) dynamic_window(dev);
        split_collective(dev);
        intercomm_bcast(dev);
        /* None of these is gdte's point-to-point work: its counters must not move. */
        mt_phase_end(ph, dev ? "calls gdte does not carry, device buffers" : "calls gdte does not carry, host buffers");
    }
    bsend_device();
    insignificant();
    return mt_finish("refuse_test");
}
