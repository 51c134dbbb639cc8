/*
 * Windows of device messages in flight at once, all received by one completion call: the node
 * path's batched copies (one kernel for the messages a pass of progress finds arrived).
 *
 * Each round, rank 0 sends rank 1 a window of messages, each from its own buffer to its own
 * receive buffer (poisoned), on random layouts drawn from a seeded pool: the same type on both
 * sides (a vector of rows, an indexed type, a struct with holes, a resized vector of count > 1,
 * a subarray, a contiguous run; buffer to buffer), a dense sender into a strided or irregular
 * receive (unpacked from the peer's buffer), and one message of 9 MiB (copied alone). Rank 1
 * posts every receive, both ranks pass a barrier (the markers are there when it returns: the MPI
 * keeps each pair's messages in order), then rank 1 completes the window with MPI_Waitall, or
 * with MPI_Testall in a loop (progress only in Test). Oracle: the MPI's own MPI_Pack of a host
 * copy of the send buffer, MPI_Unpack into a host copy of the poisoned receive buffer; every
 * byte of the receive allocation (margins included) is compared. Statuses: count in the
 * receive type, source and tag. Host buffers run the same rounds.
 *
 * GDTETEST_EXPECT_COUNTER=node_batches (the GPU registration) asserts the batched kernel ran.
 *
 * Usage: node_window_test [--rounds N] [--seed S]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "mpitest.h"

#define WIN 20
#define BIG (9 << 20)

typedef struct {
    MPI_Datatype st, rt; /* send and receive types (same signature) */
    int sc, rc;          /* counts */
    mt_ubuf_t s, r;
} msg_t;

static int rr(int lo, int hi) { return lo + (int)(mt_rnd() % (uint64_t)(hi - lo + 1)); }

/* A type of the pool with `n` ints of data per element (roughly), and its flat form. */
static MPI_Datatype pool_type(int which, int *ints_p)
{
    MPI_Datatype t = MPI_DATATYPE_NULL, tmp;
    int n;
    switch (which) {
    case 0: /* rows of 2 ints at a stride of 4: vector of 8-byte blocks */
        n = rr(1, 4096);
        MPI_Type_vector(n, 2, 4, MPI_INT, &t);
        n *= 2;
        break;
    case 1: { /* indexed, varying block lengths */
        int nb = rr(1, 64), len[64], dsp[64], at = rr(0, 3);
        n = 0;
        for (int i = 0; i < nb; i++) {
            len[i] = rr(1, 300);
            dsp[i] = at;
            at += len[i] + rr(1, 40);
            n += len[i];
        }
        MPI_Type_indexed(nb, len, dsp, MPI_INT, &t);
        break;
    }
    case 2: { /* struct with holes, resized: count > 1 of it */
        int bl[2] = {3, 2};
        MPI_Aint d[2] = {4, 24};
        MPI_Datatype ts[2] = {MPI_INT, MPI_INT};
        MPI_Type_create_struct(2, bl, d, ts, &tmp);
        MPI_Type_create_resized(tmp, 0, 40, &t);
        MPI_Type_free(&tmp);
        n = 5;
        break;
    }
    case 3: { /* subarray of a 2-D grid (a halo face) */
        int sz[2] = {rr(4, 200), rr(4, 200)}, sub[2], at[2];
        for (int k = 0; k < 2; k++) {
            sub[k] = rr(1, sz[k]);
            at[k] = rr(0, sz[k] - sub[k]);
        }
        MPI_Type_create_subarray(2, sz, sub, at, MPI_ORDER_C, MPI_INT, &t);
        n = sub[0] * sub[1];
        break;
    }
    default: /* a contiguous run */
        n = rr(1, 50000);
        MPI_Type_contiguous(n, MPI_INT, &t);
        break;
    }
    MPI_Type_commit(&t);
    *ints_p = n;
    return t;
}

static void round_one(int r, int testall)
{
    int dev = mt_expect_gdte();
    msg_t m[WIN];
    for (int i = 0; i < WIN; i++) {
        int ints, which = rr(0, 4);
        MPI_Datatype t = pool_type(which, &ints);
        m[i].rt = t;
        m[i].rc = which == 2 ? rr(1, 3000) : rr(1, 3);
        if (i == WIN - 1) { /* the big one, alone */
            MPI_Type_free(&m[i].rt);
            MPI_Type_contiguous(BIG / 4, MPI_INT, &m[i].rt);
            MPI_Type_commit(&m[i].rt);
            m[i].rc = 1;
            ints = BIG / 4;
        }
        if (i % 3 == 1) {
            /* A dense sender into the receive's layout. */
            MPI_Type_contiguous(ints, MPI_INT, &m[i].st);
            MPI_Type_commit(&m[i].st);
            m[i].sc = m[i].rc;
        } else {
            MPI_Type_dup(m[i].rt, &m[i].st);
            m[i].sc = m[i].rc;
        }
        m[i].s = mt_ubuf_new(dev, m[i].st, m[i].sc, 64, 0);
        m[i].r = mt_ubuf_new(dev, m[i].rt, m[i].rc, 64, 0);
    }
    MPI_Request q[WIN];
    if (mt_rank == 0) {
        for (int i = 0; i < WIN; i++) {
            mt_ubuf_set(&m[i].s, (unsigned)(1000 * r + i + 1), 0);
            MT_MPI(MPI_Isend(m[i].s.buf, m[i].sc, m[i].st, 1, i, MPI_COMM_WORLD, &q[i]));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MT_MPI(MPI_Waitall(WIN, q, MPI_STATUSES_IGNORE));
    } else {
        for (int i = 0; i < WIN; i++) {
            mt_ubuf_set(&m[i].r, 0, 0xA5);
            MT_MPI(MPI_Irecv(m[i].r.buf, m[i].rc, m[i].rt, 0, i, MPI_COMM_WORLD, &q[i]));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Status sts[WIN];
        if (testall) {
            int flag = 0;
            while (!flag) MT_MPI(MPI_Testall(WIN, q, &flag, sts));
        } else {
            MT_MPI(MPI_Waitall(WIN, q, sts));
        }
        for (int i = 0; i < WIN; i++) {
            /* The oracle: the sender's bytes (seeded, rebuilt here) through the MPI's pack. */
            mt_ubuf_t s = m[i].s;
            mt_fill(s.img, s.len, (unsigned)(1000 * r + i + 1));
            int psz = 0, pos = 0;
            MPI_Pack_size(m[i].sc, m[i].st, MPI_COMM_WORLD, &psz);
            char *pk = malloc((size_t)psz + 1);
            MPI_Pack(s.img + (s.buf - s.base), m[i].sc, m[i].st, pk, psz, &pos, MPI_COMM_WORLD);
            int upos = 0;
            MPI_Unpack(pk, pos, &upos, m[i].r.img + (m[i].r.buf - m[i].r.base), m[i].rc, m[i].rt, MPI_COMM_WORLD);
            free(pk);
            char what[96];
            snprintf(what, sizeof what, "round %d message %d (%s)", r, i, testall ? "Testall" : "Waitall");
            mt_ubuf_check(&m[i].r, what);
            int cnt = -1;
            MPI_Get_count(&sts[i], m[i].rt, &cnt);
            MT_CHECK(cnt == m[i].rc && sts[i].MPI_SOURCE == 0 && sts[i].MPI_TAG == i,
                     "%s: status count %d source %d tag %d, want %d 0 %d", what, cnt, sts[i].MPI_SOURCE, sts[i].MPI_TAG,
                     m[i].rc, i);
        }
    }
    for (int i = 0; i < WIN; i++) {
        mt_ubuf_free(&m[i].s);
        mt_ubuf_free(&m[i].r);
        MPI_Type_free(&m[i].st);
        MPI_Type_free(&m[i].rt);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    int rounds = 6;
    uint64_t seed = 11;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
    }
    if (mt_size != 2) {
        if (mt_rank == 0) fprintf(stderr, "node_window_test: needs 2 processes\n");
        MPI_Finalize();
        return 77;
    }
    mt_rng_state = seed; /* both ranks draw the same types */
    for (int r = 0; r < rounds; r++) round_one(r, r % 2);
    return mt_finish("node_window_test");
}
