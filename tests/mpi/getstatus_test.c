/*
 * MPI_Request_get_status on nonblocking collectives and reductions of device buffers: when it
 * says complete, the result must already be in the application's buffer (the standard's
 * meaning of completion), before the MPI_Wait that frees the request; the wait then reports
 * the same and does not unpack or copy back a second time.
 *  - MPI_Iallreduce (MPI_SUM of doubles) and MPI_Ialltoall (a vector type on both sides), on
 *    device buffers, each against the values it must have.
 * Calls that complete one operation leave the status's MPI_ERROR field as the application set
 * it (MPI-3.1 section 3.2.5; the MPI underneath does so, and MPICH's test suite checks it):
 *  - MPI_Recv (a given source and MPI_ANY_SOURCE), MPI_Wait, MPI_Test, MPI_Waitany, MPI_Testany,
 *    MPI_Request_get_status, MPI_Probe, MPI_Iprobe, MPI_Mprobe + MPI_Mrecv, MPI_Improbe +
 *    MPI_Imrecv, MPI_Sendrecv and MPI_Sendrecv_replace, on device and host buffers of a vector
 *    type, between ranks 0 and 1; source, tag, count and data checked as well.
 */
#include "mpitest.h"

enum { N = 1000 };

enum { C_RECV, C_RECV_ANY, C_WAIT, C_TEST, C_WAITANY, C_TESTANY, C_GETSTATUS, C_PROBE, C_IPROBE, C_MPROBE,
       C_IMPROBE, C_SENDRECV, C_REPLACE, C_NCALLS };
static const char *const call_name[C_NCALLS] = {"MPI_Recv", "MPI_Recv(MPI_ANY_SOURCE)", "MPI_Wait", "MPI_Test",
                                                "MPI_Waitany", "MPI_Testany", "MPI_Request_get_status",
                                                "MPI_Probe", "MPI_Iprobe", "MPI_Mprobe", "MPI_Improbe",
                                                "MPI_Sendrecv", "MPI_Sendrecv_replace"};

/* Ranks 0 and 1: message `c` (tag 100 + c) goes 0 -> 1 (both ways for the Sendrecv calls), of
 * 3 elements of a vector type (2 of every 3 ints), and rank 1 receives it with call `c`. */
static void error_field_kept(int dev)
{
    if (mt_rank > 1 || mt_size < 2) return;
    const int peer = 1 - mt_rank, count = 3, sentinel = MPI_ERR_DIMS;
    MPI_Datatype v;
    MT_MPI(MPI_Type_vector(4, 2, 3, MPI_INT, &v));
    MT_MPI(MPI_Type_commit(&v));
    const size_t ints = 3 * 12, bytes = ints * sizeof(int);
    int *buf = mt_alloc(dev, bytes), *h = malloc(bytes);
    for (int c = 0; c < C_NCALLS; c++) {
        const int tag = 100 + c, both = c == C_SENDRECV || c == C_REPLACE;
        for (size_t i = 0; i < ints; i++) h[i] = mt_rank == 0 || both ? (int)(1000 * mt_rank + 10 * c + (int)i) : -7;
        mt_put(buf, h, bytes);
        MPI_Status st;
        memset(&st, 0, sizeof st);
        st.MPI_ERROR = sentinel;
        int rc = MPI_SUCCESS, checked = 1;
        if (mt_rank == 0 && !both) {
            MT_MPI(MPI_Send(buf, count, v, peer, tag, MPI_COMM_WORLD));
            checked = 0;
        } else if (c == C_SENDRECV) {
            int *in = mt_alloc(dev, bytes);
            memset(h, 0, bytes);
            mt_put(in, h, bytes);
            rc = MPI_Sendrecv(buf, count, v, peer, tag, in, count, v, peer, tag, MPI_COMM_WORLD, &st);
            mt_free(dev, buf);
            buf = in;
        } else if (c == C_REPLACE) {
            rc = MPI_Sendrecv_replace(buf, count, v, peer, tag, peer, tag, MPI_COMM_WORLD, &st);
        } else if (c == C_RECV || c == C_RECV_ANY) {
            rc = MPI_Recv(buf, count, v, c == C_RECV ? peer : MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
        } else if (c == C_PROBE || c == C_IPROBE) {
            int flag = 0;
            if (c == C_PROBE) rc = MPI_Probe(peer, tag, MPI_COMM_WORLD, &st), flag = 1;
            while (!flag && rc == MPI_SUCCESS) rc = MPI_Iprobe(peer, tag, MPI_COMM_WORLD, &flag, &st);
            MT_CHECK(st.MPI_ERROR == sentinel, "dev %d: %s changed MPI_ERROR to %d", dev, call_name[c], st.MPI_ERROR);
            MT_MPI(MPI_Recv(buf, count, v, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else if (c == C_MPROBE || c == C_IMPROBE) {
            MPI_Message msg = MPI_MESSAGE_NULL;
            int flag = 0;
            if (c == C_MPROBE) rc = MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &msg, &st), flag = 1;
            while (!flag && rc == MPI_SUCCESS) rc = MPI_Improbe(peer, tag, MPI_COMM_WORLD, &flag, &msg, &st);
            MT_CHECK(st.MPI_ERROR == sentinel, "dev %d: %s changed MPI_ERROR to %d", dev, call_name[c], st.MPI_ERROR);
            if (c == C_MPROBE) {
                MT_MPI(MPI_Mrecv(buf, count, v, &msg, &st));
            } else {
                MPI_Request r;
                MT_MPI(MPI_Imrecv(buf, count, v, &msg, &r));
                MT_MPI(MPI_Wait(&r, &st));
            }
        } else {
            MPI_Request r;
            MT_MPI(MPI_Irecv(buf, count, v, peer, tag, MPI_COMM_WORLD, &r));
            int flag = 0, index = -1;
            switch (c) {
            case C_WAIT: rc = MPI_Wait(&r, &st); break;
            case C_TEST: while (!flag && rc == MPI_SUCCESS) rc = MPI_Test(&r, &flag, &st); break;
            case C_WAITANY: rc = MPI_Waitany(1, &r, &index, &st); break;
            case C_TESTANY: while (!flag && rc == MPI_SUCCESS) rc = MPI_Testany(1, &r, &index, &flag, &st); break;
            case C_GETSTATUS:
                while (!flag && rc == MPI_SUCCESS) rc = MPI_Request_get_status(r, &flag, &st);
                MT_CHECK(st.MPI_ERROR == sentinel, "dev %d: %s changed MPI_ERROR to %d", dev, call_name[c], st.MPI_ERROR);
                MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
                break;
            }
        }
        if (!checked) continue;
        MT_CHECK(rc == MPI_SUCCESS, "dev %d: %s returned %d", dev, call_name[c], rc);
        MT_CHECK(st.MPI_ERROR == sentinel, "dev %d: %s changed MPI_ERROR to %d", dev, call_name[c], st.MPI_ERROR);
        int n = -1;
        MPI_Get_count(&st, v, &n);
        MT_CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == tag && n == count,
                 "dev %d: %s status source %d tag %d count %d, want %d %d %d", dev, call_name[c], st.MPI_SOURCE,
                 st.MPI_TAG, n, peer, tag, count);
        mt_get(h, buf, bytes);
        int bad = -1;
        for (size_t i = 0; i < ints && bad < 0; i++) {
            int in_type = i < 33 && (i % 11) % 3 < 2, want = /* extent 11 ints, 3 elements */ in_type ? (int)(1000 * peer + 10 * c + (int)i) : (both ? 0 : -7);
            if (c == C_REPLACE && !in_type) want = (int)(1000 * mt_rank + 10 * c + (int)i);
            if (h[i] != want) bad = (int)i;
        }
        MT_CHECK(bad < 0, "dev %d: %s data wrong at int %d", dev, call_name[c], bad);
    }
    mt_free(dev, buf);
    free(h);
    MT_MPI(MPI_Type_free(&v));
}

static void poll_done(MPI_Request r)
{
    int flag = 0;
    MPI_Status st;
    while (!flag) MT_MPI(MPI_Request_get_status(r, &flag, &st));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    for (int dev = 1; dev >= 0; dev--) {
        error_field_kept(dev);
        MT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        /* Allreduce: element i of rank r is r + i; the sum is size*i + size*(size-1)/2. */
        double *in = mt_alloc(dev, N * sizeof(double)), *out = mt_alloc(dev, N * sizeof(double));
        double *h = malloc(N * sizeof(double));
        for (int i = 0; i < N; i++) h[i] = mt_rank + i;
        mt_put(in, h, N * sizeof(double));
        for (int i = 0; i < N; i++) h[i] = -1;
        mt_put(out, h, N * sizeof(double));
        MPI_Request r;
        MT_MPI(MPI_Iallreduce(in, out, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r));
        poll_done(r);
        mt_get(h, out, N * sizeof(double));
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (h[i] != (double)mt_size * i + mt_size * (mt_size - 1) / 2.0) bad = i;
        MT_CHECK(bad < 0, "dev %d: Iallreduce result not in the buffer when MPI_Request_get_status said complete (element %d: %g)",
                 dev, bad, bad >= 0 ? h[bad] : 0.0);
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        mt_get(h, out, N * sizeof(double));
        bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (h[i] != (double)mt_size * i + mt_size * (mt_size - 1) / 2.0) bad = i;
        MT_CHECK(bad < 0, "dev %d: Iallreduce result after MPI_Wait (element %d)", dev, bad);
        MT_CHECK(r == MPI_REQUEST_NULL, "dev %d: MPI_Wait did not free the request", dev);
        mt_free(dev, in);
        mt_free(dev, out);
        free(h);

        /* Alltoall of a vector type (2 of every 3 ints): block k of rank r holds 1000r + k. */
        MPI_Datatype v;
        MPI_Type_vector(4, 2, 3, MPI_INT, &v);
        MPI_Type_commit(&v);
        MPI_Aint lb, ext;
        MPI_Type_get_extent(v, &lb, &ext);
        size_t span = (size_t)ext * mt_size;
        int *sb = mt_alloc(dev, span), *rb = mt_alloc(dev, span), *hs = malloc(span), *hr = malloc(span);
        for (int k = 0; k < mt_size; k++)
            for (int j = 0; j < (int)(ext / sizeof(int)); j++) hs[k * (ext / sizeof(int)) + j] = 1000 * mt_rank + k;
        mt_put(sb, hs, span);
        memset(hr, 0x5a, span);
        mt_put(rb, hr, span);
        MT_MPI(MPI_Ialltoall(sb, 1, v, rb, 1, v, MPI_COMM_WORLD, &r));
        poll_done(r);
        mt_get(hr, rb, span);
        int ok = 1;
        for (int k = 0; k < mt_size; k++)
            for (int j = 0; j < (int)(ext / sizeof(int)); j++) {
                int in_type = j % 3 < 2;
                int got = hr[k * (ext / sizeof(int)) + j], want = 1000 * k + mt_rank;
                if (in_type ? got != want : got != 0x5a5a5a5a) ok = 0;
            }
        MT_CHECK(ok, "dev %d: Ialltoall result not in the buffer when MPI_Request_get_status said complete", dev);
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        mt_get(hr, rb, span);
        for (int k = 0; k < mt_size; k++) MT_CHECK(hr[k * (ext / sizeof(int))] == 1000 * k + mt_rank, "dev %d: after Wait", dev);
        MPI_Type_free(&v);
        mt_free(dev, sb);
        mt_free(dev, rb);
        free(hs);
        free(hr);
    }
    return mt_finish("getstatus_test");
}
