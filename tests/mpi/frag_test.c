/*
 * Device messages that travel as a marker and fragments (messages to another node,
 * GDTE_MPI_PIPELINE; registered with GDTETEST_NODE_SPLIT=1 so that rank 1 counts as another
 * node, and also without it, where the same program runs through the node path or MPI_PACKED):
 * the cases where a fragmented message's receive completes in pieces.
 *
 *  - completion seen first by MPI_Request_get_status, by an MPI_Test loop, by Testany/Testsome:
 *    when the call says complete, every byte is in the buffer and the status states the
 *    message (not the marker);
 *  - a send followed by MPI_Barrier while the receive was posted before the barrier, and an
 *    Isend, barrier, wait against a receive after the barrier (legal programs that must not hang);
 *  - an Isend whose receiver waits in MPI_Recv while the sender sits in MPI_Barrier, a blocking
 *    collective, a synchronous host send or MPI_Win_fence before its MPI_Wait (a nonblocking send
 *    to another node returns with its fragments still being packed: those calls post them);
 *  - a receive shorter than the message: MPI_ERR_TRUNCATE and the bytes that fit;
 *  - probe then receive with wildcards: the probe states the message's size;
 *  - order per (source, tag) across fragmented, small and host messages;
 *  - device to host and host to device, synchronous and ready sends;
 *  - both ranks exchanging and completing by Testany/Testsome/Waitany/Waitsome loops over
 *    their receive and their own send (exchange_any);
 *  - a receive pending when its communicator is freed (free_pending).
 *
 * Oracle: the MPI's own MPI_Pack of a host copy of the send buffer and MPI_Unpack into a host
 * copy of the poisoned receive buffer; every byte of the receive allocation is compared.
 *
 * Usage: frag_test [--rounds N] [--seed S]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "mpitest.h"

static int rr(int lo, int hi) { return lo + (int)(mt_rnd() % (uint64_t)(hi - lo + 1)); }

/* A strided or irregular type of about `ints` ints, drawn from the shared generator. */
static MPI_Datatype some_type(int ints)
{
    MPI_Datatype t, v;
    switch (rr(0, 2)) {
    case 0: /* 8-byte blocks at a 16-byte stride */
        MPI_Type_vector(ints / 2 > 0 ? ints / 2 : 1, 2, 4, MPI_INT, &t);
        break;
    case 1: { /* indexed of varying blocks, resized so that count 2 interleaves nothing */
        int len[8], dsp[8], at = 1;
        for (int i = 0; i < 8; i++) {
            len[i] = ints / 8 > 0 ? ints / 8 : 1;
            dsp[i] = at;
            at += len[i] + rr(1, 9);
        }
        MPI_Type_indexed(8, len, dsp, MPI_INT, &v);
        MPI_Type_create_resized(v, 0, (MPI_Aint)(at + 3) * 4, &t);
        MPI_Type_free(&v);
        break;
    }
    default: /* contiguous */
        MPI_Type_contiguous(ints, MPI_INT, &t);
        break;
    }
    MPI_Type_commit(&t);
    return t;
}

typedef struct {
    MPI_Datatype st, rt;
    int sc, rc;
    mt_ubuf_t s, r;
    unsigned seed;
} msg_t;

/* A message of `ints` ints per element sent as (st, sc) and received as (rt, rc): the receive
 * type is the dense form when `dense_recv`. Buffers on the device where `sdev`/`rdev`. */
static void msg_new(msg_t *m, int ints, int count, int sdev, int rdev, int dense_recv, unsigned seed)
{
    m->st = some_type(ints);
    int size = 0;
    MPI_Type_size(m->st, &size);
    m->sc = count;
    if (dense_recv) {
        MPI_Type_contiguous(size / 4, MPI_INT, &m->rt);
        MPI_Type_commit(&m->rt);
    } else {
        MPI_Type_dup(m->st, &m->rt);
    }
    m->rc = count;
    m->seed = seed;
    m->s = mt_ubuf_new(sdev, m->st, m->sc, 64, 0);
    m->r = mt_ubuf_new(rdev, m->rt, m->rc, 64, 0);
    mt_ubuf_set(&m->s, seed, 0);
    mt_ubuf_set(&m->r, 0, 0x5A);
}

static void msg_free(msg_t *m)
{
    mt_ubuf_free(&m->s);
    mt_ubuf_free(&m->r);
    MPI_Type_free(&m->st);
    MPI_Type_free(&m->rt);
}

/* The oracle for a receive of `rc` elements (fewer than sent: truncated to what fits). */
static void msg_check(msg_t *m, int rc, const MPI_Status *st, const char *what)
{
    int psz = 0, pos = 0;
    MPI_Pack_size(m->sc, m->st, MPI_COMM_WORLD, &psz);
    char *pk = malloc((size_t)psz + 1);
    MPI_Pack(m->s.img + (m->s.buf - m->s.base), m->sc, m->st, pk, psz, &pos, MPI_COMM_WORLD);
    int rsz = 0, upos = 0;
    MPI_Pack_size(rc, m->rt, MPI_COMM_WORLD, &rsz);
    MPI_Unpack(pk, pos < rsz ? pos : rsz, &upos, m->r.img + (m->r.buf - m->r.base), rc, m->rt, MPI_COMM_WORLD);
    free(pk);
    mt_ubuf_check(&m->r, what);
    if (st && rc == m->rc) {
        int cnt = -1;
        MPI_Get_count(st, m->rt, &cnt);
        MT_CHECK(cnt == m->rc, "%s: status count %d, want %d", what, cnt, m->rc);
    }
}

/* Rank 0 sends, rank 1 receives and completes by `how`: 0 Request_get_status loop, 1 Test
 * loop, 2 Testany loop over it and a receive that never completes before it, 3 Testsome. */
static void completion(int round, int how, int dev)
{
    msg_t m;
    msg_new(&m, rr(20000, 200000), rr(1, 3), dev, dev, rr(0, 1), (unsigned)(100 * round + how + 1));
    static const char *names[] = {"Request_get_status", "Test", "Testany", "Testsome"};
    char what[96];
    snprintf(what, sizeof what, "round %d completion by %s", round, names[how]);
    if (getenv("FT_DEBUG")) fprintf(stderr, "[%d] %s\n", mt_rank, what);
    if (mt_rank == 0) {
        MPI_Request q;
        MT_MPI(MPI_Isend(m.s.buf, m.sc, m.st, 1, 7, MPI_COMM_WORLD, &q));
        MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        int one = 1;
        MT_MPI(MPI_Send(&one, 1, MPI_INT, 1, 8, MPI_COMM_WORLD)); /* after: completes the other receive */
    } else {
        MPI_Request q[2];
        int other = 0;
        MT_MPI(MPI_Irecv(m.r.buf, m.rc, m.rt, 0, 7, MPI_COMM_WORLD, &q[0]));
        MT_MPI(MPI_Irecv(&other, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, &q[1]));
        MPI_Status st;
        int flag = 0;
        if (how == 0) {
            while (!flag) MT_MPI(MPI_Request_get_status(q[0], &flag, &st));
            msg_check(&m, m.rc, &st, what); /* complete means in the buffer */
            MT_MPI(MPI_Wait(&q[0], &st));
            msg_check(&m, m.rc, &st, what);
        } else if (how == 1) {
            while (!flag) MT_MPI(MPI_Test(&q[0], &flag, &st));
            msg_check(&m, m.rc, &st, what);
        } else {
            int got0 = 0;
            while (!got0) {
                int idx = -1, outc = 0, ids[2];
                MPI_Status sts[2];
                if (how == 2) {
                    MT_MPI(MPI_Testany(2, q, &idx, &flag, &st));
                    if (flag && idx == 0) got0 = 1, sts[0] = st;
                } else {
                    MT_MPI(MPI_Testsome(2, q, &outc, ids, sts));
                    for (int i = 0; i < outc; i++)
                        if (ids[i] == 0) got0 = 1, st = sts[i];
                }
            }
            msg_check(&m, m.rc, &st, what);
        }
        if (q[0] != MPI_REQUEST_NULL) MT_MPI(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
        MT_MPI(MPI_Wait(&q[1], MPI_STATUS_IGNORE));
        MT_CHECK(other == 1, "%s: the other message reads %d", what, other);
    }
    msg_free(&m);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Both ranks send to each other and complete their receive by `how` (0 Testany, 1 Testsome, 2
 * Waitany, 3 Waitsome) over the receive and their own send: a completion call that finishes a
 * fragmented receive waits for the peer's fragments, and the peer may itself sit in the same
 * call waiting for this process's, which its nonblocking send may not have posted yet (hung
 * before 2026-11-29's fix: found by an outside program, exp/adv/anyhang). */
static void exchange_any(int round, int how, int dev)
{
    msg_t m;
    msg_new(&m, rr(20000, 60000), rr(1, 2), dev, dev, rr(0, 1), (unsigned)(300 * round + how + 7));
    static const char *names[] = {"Testany", "Testsome", "Waitany", "Waitsome"};
    char what[96];
    snprintf(what, sizeof what, "round %d exchange completed by %s", round, names[how]);
    int peer = 1 - mt_rank;
    MPI_Request q[2];
    MT_MPI(MPI_Irecv(m.r.buf, m.rc, m.rt, peer, 9, MPI_COMM_WORLD, &q[0]));
    MT_MPI(MPI_Isend(m.s.buf, m.sc, m.st, peer, 9, MPI_COMM_WORLD, &q[1]));
    MPI_Status st, one, sts[2];
    int got = 0, left = 2;
    while (left) {
        int idx = MPI_UNDEFINED, flag = 0, outc = 0, ids[2];
        switch (how) {
        case 0:
            MT_MPI(MPI_Testany(2, q, &idx, &flag, &one));
            if (flag && idx != MPI_UNDEFINED) outc = 1, ids[0] = idx, sts[0] = one;
            break;
        case 1: MT_MPI(MPI_Testsome(2, q, &outc, ids, sts)); break;
        case 2:
            MT_MPI(MPI_Waitany(2, q, &idx, &one));
            if (idx != MPI_UNDEFINED) outc = 1, ids[0] = idx, sts[0] = one;
            break;
        default: MT_MPI(MPI_Waitsome(2, q, &outc, ids, sts)); break;
        }
        if (outc == MPI_UNDEFINED) break;
        for (int i = 0; i < outc; i++) {
            left--;
            if (ids[i] == 0) got = 1, st = sts[i];
        }
    }
    MT_CHECK(got, "%s: the receive never completed", what);
    msg_check(&m, m.rc, &st, what);
    msg_free(&m);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A receive still pending when its communicator is freed (MPI lets it complete normally): rank
 * 1 posts it on a duplicate of MPI_COMM_WORLD and frees that, and only then does rank 0 send on
 * its own duplicate (freed after the send). The data must arrive, not a marker (before
 * 2026-11-29 the receive got the node path's marker as data, and MPI_Finalize hung across a
 * node boundary: exp/adv/free_pending). */
static void free_pending(int round, int dev)
{
    msg_t m;
    msg_new(&m, rr(200, 60000), rr(1, 2), dev, dev, rr(0, 1), (unsigned)(500 * round + 3));
    char what[96];
    snprintf(what, sizeof what, "round %d receive pending at MPI_Comm_free", round);
    MPI_Comm c;
    MT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    if (mt_rank == 1) {
        MPI_Request q;
        MPI_Status st;
        MT_MPI(MPI_Irecv(m.r.buf, m.rc, m.rt, 0, 4, c, &q));
        MT_MPI(MPI_Comm_free(&c));
        MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        MT_MPI(MPI_Wait(&q, &st));
        msg_check(&m, m.rc, &st, what);
    } else {
        MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        MT_MPI(MPI_Send(m.s.buf, m.sc, m.st, 1, 4, c));
        MT_MPI(MPI_Comm_free(&c));
    }
    msg_free(&m);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Send then barrier against a receive posted before the barrier; Isend, barrier, wait against a
 * receive after it; a synchronous send; a ready send into a posted receive. Then an Isend whose
 * receiver waits for it in a blocking MPI_Recv while the sender sits in a call that blocks inside
 * the MPI before its MPI_Wait: MPI_Barrier, a blocking collective on host buffers, a synchronous
 * host send the receiver takes only after the device message, MPI_Win_fence. A nonblocking send
 * to another node returns with its fragments still being packed; each of these calls must post
 * them first or the program hangs. */
static void barriers(int round, int dev, MPI_Win win)
{
    for (int k = 0; k < 8; k++) {
        msg_t m;
        msg_new(&m, rr(30000, 120000), 1, dev, k == 3 ? !dev : dev, k == 1, (unsigned)(7000 + 10 * round + k));
        char what[96];
        snprintf(what, sizeof what, "round %d barrier case %d", round, k);
        if (getenv("FT_DEBUG")) fprintf(stderr, "[%d] %s\n", mt_rank, what);
        int host = 7 + round, got = -1;
        if (mt_rank == 0) {
            if (k == 0) {
                MT_MPI(MPI_Send(m.s.buf, m.sc, m.st, 1, 3, MPI_COMM_WORLD));
                MPI_Barrier(MPI_COMM_WORLD);
            } else if (k == 1) {
                MPI_Request q;
                MT_MPI(MPI_Isend(m.s.buf, m.sc, m.st, 1, 3, MPI_COMM_WORLD, &q));
                MPI_Barrier(MPI_COMM_WORLD);
                MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
            } else if (k == 2) {
                MT_MPI(MPI_Ssend(m.s.buf, m.sc, m.st, 1, 3, MPI_COMM_WORLD));
                MPI_Barrier(MPI_COMM_WORLD);
            } else if (k == 3) {
                MPI_Barrier(MPI_COMM_WORLD); /* the receive is posted */
                MT_MPI(MPI_Rsend(m.s.buf, m.sc, m.st, 1, 3, MPI_COMM_WORLD));
            } else {
                MPI_Request q;
                MT_MPI(MPI_Isend(m.s.buf, m.sc, m.st, 1, 3, MPI_COMM_WORLD, &q));
                if (k == 4) MPI_Barrier(MPI_COMM_WORLD);
                if (k == 5) MT_MPI(MPI_Allreduce(&host, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
                if (k == 6) MT_MPI(MPI_Ssend(&host, 1, MPI_INT, 1, 4, MPI_COMM_WORLD));
                if (k == 7 && win != MPI_WIN_NULL) MT_MPI(MPI_Win_fence(0, win));
                if (k == 7 && win == MPI_WIN_NULL) MPI_Barrier(MPI_COMM_WORLD);
                MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
            }
        } else {
            MPI_Status st;
            if (k == 1) {
                MPI_Barrier(MPI_COMM_WORLD);
                MT_MPI(MPI_Recv(m.r.buf, m.rc, m.rt, 0, 3, MPI_COMM_WORLD, &st));
            } else if (k >= 4) {
                MT_MPI(MPI_Recv(m.r.buf, m.rc, m.rt, 0, 3, MPI_COMM_WORLD, &st));
                if (k == 4) MPI_Barrier(MPI_COMM_WORLD);
                if (k == 5) MT_MPI(MPI_Allreduce(&host, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
                if (k == 6) MT_MPI(MPI_Recv(&got, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                if (k == 7 && win != MPI_WIN_NULL) MT_MPI(MPI_Win_fence(0, win));
                if (k == 7 && win == MPI_WIN_NULL) MPI_Barrier(MPI_COMM_WORLD);
            } else {
                MPI_Request q;
                MT_MPI(MPI_Irecv(m.r.buf, m.rc, m.rt, 0, 3, MPI_COMM_WORLD, &q));
                MPI_Barrier(MPI_COMM_WORLD);
                MT_MPI(MPI_Wait(&q, &st));
            }
            msg_check(&m, m.rc, &st, what);
        }
        if (k == 5) MT_CHECK(got == 2 * host, "%s: allreduce gave %d, not %d", what, got, 2 * host);
        if (k == 6 && mt_rank == 1) MT_CHECK(got == host, "%s: host message %d, not %d", what, got, host);
        msg_free(&m);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

/* A receive shorter than the message; probes with wildcards; order per (source, tag). */
static void truncation_and_order(int round, int dev)
{
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    msg_t m;
    msg_new(&m, rr(40000, 90000), 3, dev, dev, 0, (unsigned)(9000 + round));
    char what[96];
    snprintf(what, sizeof what, "round %d truncated receive", round);
    if (mt_rank == 0) {
        MT_MPI(MPI_Send(m.s.buf, m.sc, m.st, 1, 5, c));
    } else {
        MPI_Status st;
        int rc = MPI_Recv(m.r.buf, 2, m.rt, 0, 5, c, &st); /* two of three elements */
        MT_CHECK(mt_eclass(rc) == MPI_ERR_TRUNCATE, "%s: error class %d, want MPI_ERR_TRUNCATE", what, mt_eclass(rc));
        /* The bytes that fit (the plain MPI may write more of the third element: gdte writes
         * exactly these). */
        if (mt_expect_gdte()) msg_check(&m, 2, NULL, what);
    }
    msg_free(&m);

    /* Three messages on one (source, tag): fragmented device, small host, fragmented device;
     * probed with wildcards (the probe states each one's size), received in order. */
    msg_t a[3];
    int ints[3] = {rr(30000, 60000), 25, rr(60001, 90000)};
    for (int i = 0; i < 3; i++) msg_new(&a[i], ints[i], 1, i != 1 && dev, i != 1 && dev, 1, (unsigned)(9100 + 3 * round + i));
    if (mt_rank == 0) {
        for (int i = 0; i < 3; i++) MT_MPI(MPI_Send(a[i].s.buf, a[i].sc, a[i].st, 1, 6, c));
    } else {
        for (int i = 0; i < 3; i++) {
            MPI_Status st;
            MT_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st));
            int n = -1, want = 0;
            MPI_Get_count(&st, MPI_BYTE, &n);
            MPI_Type_size(a[i].st, &want);
            snprintf(what, sizeof what, "round %d ordered message %d", round, i);
            MT_CHECK(n == want && st.MPI_SOURCE == 0 && st.MPI_TAG == 6, "%s: probe says %d bytes from %d tag %d, want %d",
                     what, n, st.MPI_SOURCE, st.MPI_TAG, want);
            MT_MPI(MPI_Recv(a[i].r.buf, a[i].rc, a[i].rt, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &st));
            msg_check(&a[i], a[i].rc, &st, what);
        }
    }
    for (int i = 0; i < 3; i++) msg_free(&a[i]);
    MPI_Comm_free(&c);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    int rounds = 3;
    uint64_t seed = 17;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
    }
    if (mt_size != 2) {
        if (mt_rank == 0) fprintf(stderr, "frag_test: needs 2 processes\n");
        MPI_Finalize();
        return 77;
    }
    mt_rng_state = seed; /* both ranks draw the same types */
    int dev = mt_expect_gdte();
    /* A window for the MPI_Win_fence case, where the MPI has one-sided communication at all
     * (Open MPI 4.1 may have no component for the transports or thread level in use). */
    int wbuf[4] = {0};
    MPI_Win win = MPI_WIN_NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int wrc = MPI_Win_create(wbuf, sizeof wbuf, sizeof wbuf[0], MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    int wok = wrc == MPI_SUCCESS, wall = 0;
    MPI_Allreduce(&wok, &wall, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!wall) {
        if (wok) MPI_Win_free(&win);
        win = MPI_WIN_NULL;
        if (mt_rank == 0) printf("frag_test: no MPI window here; the MPI_Win_fence case is skipped\n");
    }
    if (win != MPI_WIN_NULL) MT_MPI(MPI_Win_fence(0, win));
    for (int r = 0; r < rounds; r++) {
        for (int how = 0; how < 4; how++) completion(r, how, dev);
        for (int how = 0; how < 4; how++) exchange_any(r, how, dev);
        free_pending(r, dev);
        barriers(r, dev, win);
        truncation_and_order(r, dev);
    }
    if (win != MPI_WIN_NULL) {
        MT_MPI(MPI_Win_fence(0, win));
        MT_MPI(MPI_Win_free(&win));
    }
    return mt_finish("frag_test");
}
