/*
 * Ping-pong between ranks 0 and 1 with derived datatypes, every send mode, and mixed pairs:
 *  - transpose: contiguous send, vector-of-columns receive (and back);
 *  - vector and indexed (a triangle) on both sides, a struct, a 640 KiB triangle (several
 *    pipeline fragments by default);
 *  - modes: Send, Ssend, Bsend, Rsend, Isend+Wait, Issend+Test, Sendrecv, Sendrecv_replace;
 *  - each case with device buffers on both ranks, on one, on the other, and on none (the
 *    reference), compared byte for byte, with the receive statuses (source, tag, count,
 *    elements) compared too;
 *  - Probe then Recv, Mprobe then Mrecv, Improbe then Imrecv, short messages (Get_count / Get_elements, partial last element),
 *    zero-size messages, MPI_PROC_NULL.
 */
#include "mpitest.h"

enum { M_SEND, M_SSEND, M_BSEND, M_RSEND, M_ISEND, M_ISSEND, M_SENDRECV, M_REPLACE, M_COUNT };
static const char *mode_name[M_COUNT] = {"Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Sendrecv", "Sendrecv_replace"};

typedef struct {
    const char *name;
    MPI_Datatype t0, t1; /* rank 0's type, rank 1's type */
    int c0, c1;          /* counts */
    size_t bytes;        /* buffer size on each side */
} pcase_t;

typedef struct {
    int source, tag, count, elems;
} stat_t;

static stat_t stat_of(const MPI_Status *st, MPI_Datatype t)
{
    stat_t s = {st->MPI_SOURCE, st->MPI_TAG, 0, 0};
    MPI_Get_count(st, t, &s.count);
    MPI_Get_elements(st, t, &s.elems);
    return s;
}

static void do_send(int mode, void *buf, int c, MPI_Datatype t, int peer, int tag)
{
    MPI_Request r;
    int flag = 0;
    switch (mode) {
    case M_SEND: MT_MPI(MPI_Send(buf, c, t, peer, tag, MPI_COMM_WORLD)); break;
    case M_SSEND: MT_MPI(MPI_Ssend(buf, c, t, peer, tag, MPI_COMM_WORLD)); break;
    case M_BSEND: MT_MPI(MPI_Bsend(buf, c, t, peer, tag, MPI_COMM_WORLD)); break;
    case M_RSEND:
        /* The receiver posted its receive before the barrier. */
        MPI_Barrier(MPI_COMM_WORLD);
        MT_MPI(MPI_Rsend(buf, c, t, peer, tag, MPI_COMM_WORLD));
        break;
    case M_ISEND:
        MT_MPI(MPI_Isend(buf, c, t, peer, tag, MPI_COMM_WORLD, &r));
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        break;
    case M_ISSEND:
        MT_MPI(MPI_Issend(buf, c, t, peer, tag, MPI_COMM_WORLD, &r));
        while (!flag) MT_MPI(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        break;
    }
}

static void do_recv(int mode, void *buf, int c, MPI_Datatype t, int peer, int tag, MPI_Status *st)
{
    if (mode == M_RSEND) {
        MPI_Request r;
        MT_MPI(MPI_Irecv(buf, c, t, peer, tag, MPI_COMM_WORLD, &r));
        MPI_Barrier(MPI_COMM_WORLD);
        MT_MPI(MPI_Wait(&r, st));
    } else {
        MT_MPI(MPI_Recv(buf, c, t, peer, tag, MPI_COMM_WORLD, st));
    }
}

/* One ping-pong of case `pc` in `mode`; my buffers on the device when `dev`. Returns my final
 * buffer in `out` and the statuses of my receives in `stats`. */
static void pingpong(const pcase_t *pc, int mode, int dev, unsigned char *out, stat_t stats[2])
{
    int me = mt_rank, peer = 1 - me;
    MPI_Datatype mt = me == 0 ? pc->t0 : pc->t1;
    int mc = me == 0 ? pc->c0 : pc->c1;
    unsigned char *a = mt_alloc(dev, pc->bytes), *b = mt_alloc(dev, pc->bytes);
    mt_fill(a, pc->bytes, 7 + me);
    memset(b, 0xEE, pc->bytes);
    MPI_Status st;
    memset(stats, 0, 2 * sizeof *stats);
    mt_phase_t ph = mt_phase_begin(dev);
    if (mode == M_SENDRECV) {
        MT_MPI(MPI_Sendrecv(a, mc, mt, peer, 5, b, mc, mt, peer, 5, MPI_COMM_WORLD, &st));
        stats[0] = stat_of(&st, mt);
        MT_MPI(MPI_Sendrecv(b, mc, mt, peer, 6, a, mc, mt, peer, 6, MPI_COMM_WORLD, &st));
        stats[1] = stat_of(&st, mt);
    } else if (mode == M_REPLACE) {
        MT_MPI(MPI_Sendrecv_replace(a, mc, mt, peer, 8, peer, 8, MPI_COMM_WORLD, &st));
        stats[0] = stat_of(&st, mt);
        memcpy(b, a, pc->bytes);
    } else if (me == 0) {
        do_send(mode, a, mc, mt, peer, 1);
        do_recv(mode, b, mc, mt, peer, 2, &st);
        stats[0] = stat_of(&st, mt);
    } else {
        do_recv(mode, b, mc, mt, peer, 1, &st);
        stats[0] = stat_of(&st, mt);
        do_send(mode, b, mc, mt, peer, 2);
    }
    char what[128];
    snprintf(what, sizeof what, "%s/%s dev=%d", pc->name, mode_name[mode], dev);
    mt_phase_end(ph, what);
    memcpy(out, b, pc->bytes);
    mt_free(dev, a);
    mt_free(dev, b);
}

/* Probe then Recv (tag 42), Mprobe then Mrecv (43), Improbe then Imrecv (44): three
 * messages into three parts of `out`. */
static void probe_then_recv(int dev, const pcase_t *pc, unsigned char *out, stat_t *probe_stat, stat_t *recv_stat)
{
    unsigned char *buf = mt_alloc(dev, 3 * pc->bytes);
    mt_fill(buf, 3 * pc->bytes, 99);
    if (mt_rank == 0) {
        for (int k = 0; k < 3; k++) do_send(M_SEND, buf + k * pc->bytes, pc->c0, pc->t0, 1, 42 + k);
    } else {
        MPI_Status st;
        memset(buf, 0xEE, 3 * pc->bytes);
        MT_MPI(MPI_Probe(0, 42, MPI_COMM_WORLD, &st));
        probe_stat[0] = stat_of(&st, pc->t1);
        int flag = 0;
        MT_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 42, MPI_COMM_WORLD, &flag, &st));
        MT_CHECK(flag && st.MPI_TAG == 42, "Iprobe after Probe: flag %d tag %d", flag, st.MPI_TAG);
        MT_MPI(MPI_Recv(buf, pc->c1, pc->t1, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
        recv_stat[0] = stat_of(&st, pc->t1);

        MPI_Message msg;
        MT_MPI(MPI_Mprobe(0, 43, MPI_COMM_WORLD, &msg, &st));
        probe_stat[1] = stat_of(&st, pc->t1);
        MT_MPI(MPI_Mrecv(buf + pc->bytes, pc->c1, pc->t1, &msg, &st));
        recv_stat[1] = stat_of(&st, pc->t1);

        flag = 0;
        while (!flag) MT_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
        probe_stat[2] = stat_of(&st, pc->t1);
        MPI_Request r;
        MT_MPI(MPI_Imrecv(buf + 2 * pc->bytes, pc->c1, pc->t1, &msg, &r));
        MT_MPI(MPI_Wait(&r, &st));
        recv_stat[2] = stat_of(&st, pc->t1);
    }
    memcpy(out, buf, 3 * pc->bytes);
    mt_free(dev, buf);
}

/* Short and partial messages: the receive type is a vector of 3 blocks of 2 ints (6 ints);
 * the sender sends 6, 4 (one partial element) or 15 ints (two full and one partial). */
static void short_messages(int dev, int *results)
{
    MPI_Datatype v;
    MPI_Type_vector(3, 2, 3, MPI_INT, &v);
    MPI_Type_commit(&v);
    int sends[3] = {6, 4, 15};
    int *buf = mt_alloc(dev, 64 * sizeof(int));
    for (int s = 0; s < 3; s++) {
        if (mt_rank == 0) {
            for (int i = 0; i < 64; i++) buf[i] = 1000 + i;
            MT_MPI(MPI_Send(buf, sends[s], MPI_INT, 1, 3, MPI_COMM_WORLD));
        } else {
            for (int i = 0; i < 64; i++) buf[i] = -1;
            MPI_Status st;
            MT_MPI(MPI_Recv(buf, 4, v, 0, 3, MPI_COMM_WORLD, &st));
            int c = -7, e = -7;
            MPI_Get_count(&st, v, &c);
            MPI_Get_elements(&st, v, &e);
            results[s * 2] = c;
            results[s * 2 + 1] = e;
            for (int i = 0; i < 64; i++) results[6 + s * 64 + i] = buf[i];
        }
    }
    mt_free(dev, buf);
    MPI_Type_free(&v);
}

static void zero_and_proc_null(int dev)
{
    double *buf = mt_alloc(dev, 16 * sizeof(double));
    for (int i = 0; i < 16; i++) buf[i] = i;
    MPI_Status st;
    MPI_Datatype v;
    MPI_Type_vector(2, 1, 4, MPI_DOUBLE, &v);
    MPI_Type_commit(&v);
    if (mt_rank == 0) {
        MT_MPI(MPI_Send(buf, 0, v, 1, 9, MPI_COMM_WORLD));
        MT_MPI(MPI_Send(buf, 0, v, 1, 10, MPI_COMM_WORLD));
    } else {
        MT_MPI(MPI_Recv(buf, 0, v, 0, 9, MPI_COMM_WORLD, &st));
        int c = -1;
        MPI_Get_count(&st, v, &c);
        MT_CHECK(c == 0, "zero-size receive count %d", c);
        MT_MPI(MPI_Recv(buf, 3, v, 0, 10, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, v, &c);
        MT_CHECK(c == 0 && st.MPI_SOURCE == 0 && st.MPI_TAG == 10, "zero-size into 3 elements: count %d", c);
    }
    MT_MPI(MPI_Send(buf, 2, v, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    MT_MPI(MPI_Recv(buf, 2, v, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    int c = -1;
    MPI_Get_count(&st, v, &c);
    MT_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && c == 0,
             "PROC_NULL status: source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, c);
    MPI_Request r;
    MT_MPI(MPI_Irecv(buf, 2, v, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r));
    MT_MPI(MPI_Wait(&r, &st));
    MT_CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL Irecv status source %d", st.MPI_SOURCE);
    for (int i = 0; i < 16; i++) MT_CHECK(buf[i] == i, "buffer changed by zero-size or PROC_NULL at %d", i);
    MPI_Type_free(&v);
    mt_free(dev, buf);
}


/* A send must not depend on the receiver making gdte calls: the sender completes MPI_Send and
 * enters MPI_Barrier while the receiver enters the barrier first and receives after it (legal
 * for a message the MPI buffers; the node path detaches the send), and the receiver's posted
 * receive waits in MPI_Wait only after a barrier (MPI's progress rule). Contiguous, strided and
 * irregular device data, each received into a device and a host buffer. */
static void progress_without_receiver(int rdev, MPI_Datatype irr, int irr_count, int64_t *detached)
{
    int dev = mt_rank == 0 ? 1 : rdev; /* device sender; receiver as asked */
    enum { N = 16384 };
    MPI_Datatype types[3] = {MPI_DOUBLE, MPI_DATATYPE_NULL, irr};
    int counts[3] = {N, 1, irr_count};
    MPI_Type_vector(N / 2, 1, 2, MPI_DOUBLE, &types[1]);
    /* Way 0 (the receive posted after the barrier) is legal only for a message the MPI
     * buffers: 2 KiB (every MPI's eager size is larger); way 1 moves 128 KiB. */
    int small[3] = {256, 1, irr_count / 16};
    MPI_Datatype vsmall;
    MPI_Type_vector(128, 1, 2, MPI_DOUBLE, &vsmall);
    MPI_Type_commit(&vsmall);
    MPI_Type_commit(&types[1]);
    int64_t before = mt_counter("node_detached");
    for (int t = 0; t < 3; t++)
        for (int way = 0; way < 2; way++) {
            double *buf = dev ? mt_devmem_alloc(N * sizeof(double)) : calloc(N, sizeof(double));
            double *want = malloc(N * sizeof(double));
            for (int i = 0; i < N; i++) want[i] = 1000.0 * t + way * 100.0 + i;
            if (mt_rank == 0) {
                mt_put(buf, want, N * sizeof(double));
                MPI_Datatype ty = way == 0 && t == 1 ? vsmall : types[t];
                MT_MPI(MPI_Send(buf, way == 0 ? small[t] : counts[t], ty, 1, 40 + way, MPI_COMM_WORLD));
                /* The buffer is the application's again: overwrite it. */
                double *junk = malloc(N * sizeof(double));
                for (int i = 0; i < N; i++) junk[i] = -1;
                mt_put(buf, junk, N * sizeof(double));
                free(junk);
                MPI_Barrier(MPI_COMM_WORLD);
            } else {
                double *got = malloc(N * sizeof(double)), *ref = malloc(N * sizeof(double));
                MPI_Datatype ty = way == 0 && t == 1 ? vsmall : types[t];
                int cnt = way == 0 ? small[t] : counts[t];
                for (int i = 0; i < N; i++) ref[i] = -7;
                mt_put(buf, ref, N * sizeof(double));
                if (way == 0) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    MT_MPI(MPI_Recv(buf, cnt, ty, 0, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                } else {
                    MPI_Request r;
                    MT_MPI(MPI_Irecv(buf, cnt, ty, 0, 41, MPI_COMM_WORLD, &r));
                    MPI_Barrier(MPI_COMM_WORLD);
                    MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
                }
                mt_get(got, buf, N * sizeof(double));
                /* The reference: the same type applied to host copies. */
                int psize = 0, pos = 0;
                MPI_Pack_size(cnt, ty, MPI_COMM_WORLD, &psize);
                char *packed = malloc(psize);
                MPI_Pack(want, cnt, ty, packed, psize, &pos, MPI_COMM_WORLD);
                pos = 0;
                MPI_Unpack(packed, psize, &pos, ref, cnt, ty, MPI_COMM_WORLD);
                MT_CHECK(!memcmp(got, ref, N * sizeof(double)), "progress: type %d way %d dev %d: data differs", t,
                         way, dev);
                free(packed);
                free(got);
                free(ref);
            }
            free(want);
            if (dev) mt_devmem_free(buf);
            else free(buf);
        }
    *detached = mt_counter("node_detached") - before;
    MPI_Type_free(&types[1]);
    MPI_Type_free(&vsmall);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    if (mt_size < 2) return mt_finish("pingpong_test (needs 2 ranks)") || 1;
    if (mt_rank >= 2) return mt_finish("pingpong_test");

    /* Bsend needs an attached buffer big enough for the largest case. */
    int bsize = (1 << 21) + MPI_BSEND_OVERHEAD;
    void *bbuf = malloc(bsize);
    MPI_Buffer_attach(bbuf, bsize);

    enum { T = 64, TRI = 400 };
    MPI_Datatype col, tcol, vec, tri, tri_big, st, st_r;
    MPI_Type_vector(T, 1, T, MPI_DOUBLE, &col);
    MPI_Type_create_resized(col, 0, sizeof(double), &tcol);
    MPI_Type_commit(&tcol);
    MPI_Type_vector(50, 3, 7, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int bl[T], dp[T];
    for (int i = 0; i < T; i++) {
        bl[i] = i + 1;
        dp[i] = i * T;
    }
    MPI_Type_indexed(T, bl, dp, MPI_DOUBLE, &tri);
    MPI_Type_commit(&tri);
    int *blb = malloc(TRI * sizeof(int)), *dpb = malloc(TRI * sizeof(int));
    for (int i = 0; i < TRI; i++) {
        blb[i] = i + 1;
        dpb[i] = i * TRI;
    }
    MPI_Type_indexed(TRI, blb, dpb, MPI_DOUBLE, &tri_big);
    MPI_Type_commit(&tri_big);
    int sbl[3] = {1, 3, 2};
    MPI_Aint sdp[3] = {0, 8, 40};
    MPI_Datatype sty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_Type_create_struct(3, sbl, sdp, sty, &st);
    MPI_Type_create_resized(st, 0, 48, &st_r);
    MPI_Type_commit(&st_r);

    pcase_t cases[] = {
        {"transpose", MPI_DOUBLE, tcol, T * T, T, T * T * sizeof(double)},
        {"vector", vec, vec, 2, 2, 2 * 350 * sizeof(int)},
        {"vector-to-contig", vec, MPI_INT, 1, 150, 350 * sizeof(int)},
        {"triangle", tri, tri, 1, 1, T * T * sizeof(double)},
        {"struct", st_r, st_r, 20, 20, 20 * 48},
        {"triangle-640KiB", tri_big, tri_big, 1, 1, (size_t)TRI * TRI * sizeof(double)},
    };
    int ncases = sizeof cases / sizeof cases[0];
    /* Mixed pairs: (rank 0 device?, rank 1 device?); the last is the host reference. */
    int pairs[4][2] = {{1, 1}, {1, 0}, {0, 1}, {0, 0}};
    for (int c = 0; c < ncases; c++) {
        const pcase_t *pc = &cases[c];
        /* The transpose sends contiguous and receives columns; a symmetric mode would need
         * the same type on both sides. */
        for (int m = 0; m < M_COUNT; m++) {
            if ((m == M_SENDRECV || m == M_REPLACE) && pc->t0 != pc->t1) continue;
            unsigned char *res[4];
            stat_t stats[4][2];
            for (int p = 0; p < 4; p++) {
                res[p] = malloc(pc->bytes);
                pingpong(pc, m, pairs[p][mt_rank], res[p], stats[p]);
            }
            for (int p = 0; p < 3; p++) {
                char what[160];
                snprintf(what, sizeof what, "%s/%s pair (%d,%d)", pc->name, mode_name[m], pairs[p][0], pairs[p][1]);
                mt_same(res[p], res[3], pc->bytes, what);
                MT_CHECK(!memcmp(stats[p], stats[3], sizeof stats[3]),
                         "%s: status (src %d tag %d count %d elems %d) vs host (src %d tag %d count %d elems %d)", what,
                         stats[p][0].source, stats[p][0].tag, stats[p][0].count, stats[p][0].elems, stats[3][0].source,
                         stats[3][0].tag, stats[3][0].count, stats[3][0].elems);
            }
            for (int p = 0; p < 4; p++) free(res[p]);
        }
    }

    /* Probe then Recv, device vs host. */
    for (int c = 0; c < ncases; c++) {
        unsigned char *rd = malloc(3 * cases[c].bytes), *rh = malloc(3 * cases[c].bytes);
        stat_t pd[3] = {{0}}, rsd[3] = {{0}}, phs[3] = {{0}}, rhs[3] = {{0}};
        probe_then_recv(1, &cases[c], rd, pd, rsd);
        probe_then_recv(0, &cases[c], rh, phs, rhs);
        if (mt_rank == 1) {
            mt_same(rd, rh, 3 * cases[c].bytes, "probe then recv");
            MT_CHECK(!memcmp(pd, phs, sizeof pd) && !memcmp(rsd, rhs, sizeof rsd),
                     "%s: probe/recv statuses differ from host (probe count %d vs %d, recv count %d vs %d)", cases[c].name,
                     pd[0].count, phs[0].count, rsd[0].count, rhs[0].count);
            MT_CHECK(rsd[2].tag == 44 && pd[1].tag == 43, "matched probes: tags %d %d", pd[1].tag, rsd[2].tag);
        }
        free(rd);
        free(rh);
    }

    /* Short and partial messages: counts, elements and data as on host. */
    int rd[6 + 3 * 64], rh[6 + 3 * 64];
    memset(rd, 0, sizeof rd);
    memset(rh, 0, sizeof rh);
    short_messages(1, rd);
    short_messages(0, rh);
    if (mt_rank == 1) {
        MT_CHECK(!memcmp(rd, rh, sizeof rd), "short messages: device (count %d/%d/%d elems %d/%d/%d) vs host (%d/%d/%d, %d/%d/%d)",
                 rd[0], rd[2], rd[4], rd[1], rd[3], rd[5], rh[0], rh[2], rh[4], rh[1], rh[3], rh[5]);
        MT_CHECK(rh[0] == 1 && rh[1] == 6 && rh[2] == MPI_UNDEFINED && rh[3] == 4 && rh[5] == 15,
                 "host reference counts unexpected: %d %d %d %d %d", rh[0], rh[1], rh[2], rh[3], rh[5]);
    }

    zero_and_proc_null(1);
    zero_and_proc_null(0);

    /* Senders that do not wait for their receiver; through the node path they are detached
     * (a receiver that is not inside a gdte call cannot take the data). */
    int64_t det = 0, det1 = 0;
    progress_without_receiver(1, st_r, 300, &det);
    progress_without_receiver(0, st_r, 300, &det1);
    det += det1;
    /* A process whose memory its peer cannot read frames with nobody: no node-path traffic. */
    if (getenv("GDTETEST_NODE_NOPROBE"))
        MT_CHECK(mt_counter("node_sends") == 0 && mt_counter("node_recvs") == 0,
                 "an unreachable peer got node-path messages (%lld sent, %lld received)",
                 (long long)mt_counter("node_sends"), (long long)mt_counter("node_recvs"));
    const char *ipc = getenv("GDTE_MPI_IPC");
    if (mt_rank == 0 && mt_expect_gdte() && (mt_counter("node_sends") > 0 || (ipc && !strcmp(ipc, "1"))))
        MT_CHECK(det >= 2, "node path: %lld sends detached, want at least the 2 waited-for 128 KiB ones",
                 (long long)det);

    int dummy;
    MPI_Buffer_detach(&bbuf, &dummy);
    free(bbuf);
    MPI_Type_free(&col);
    MPI_Type_free(&tcol);
    MPI_Type_free(&vec);
    MPI_Type_free(&tri);
    MPI_Type_free(&tri_big);
    MPI_Type_free(&st);
    MPI_Type_free(&st_r);
    free(blb);
    free(dpb);
    return mt_finish("pingpong_test");
}
