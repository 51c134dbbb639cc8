/*
 * Wildcards and multiple completion on a duplicated communicator:
 *  - every rank but 0 sends two vector-typed messages (tags 10*rank and 10*rank+1) to rank 0,
 *    which receives them with MPI_ANY_SOURCE/MPI_ANY_TAG and completes them with Waitany,
 *    Waitsome, Testany, Testsome or Testall (one per round); every status's source and tag
 *    must name the message its data came from;
 *  - non-overtaking: rank 1 sends device, host, device messages on one tag; rank 0 receives
 *    them in that order whatever its own buffers are;
 *  - all compared with the same rounds on host buffers.
 */
#include "mpitest.h"

enum { R_WAITANY, R_WAITSOME, R_TESTANY, R_TESTSOME, R_TESTALL, R_COUNT };
static const char *round_name[R_COUNT] = {"Waitany", "Waitsome", "Testany", "Testsome", "Testall"};

#define VCOUNT 40
#define VBYTES (VCOUNT * 4 * sizeof(int))

static MPI_Comm comm;
static MPI_Datatype vec; /* 40 blocks of 2 ints, stride 4 */

static void fill_msg(int *b, int src, int tag)
{
    for (int i = 0; i < VCOUNT * 4; i++) b[i] = (i % 4) < 2 ? src * 100000 + tag * 1000 + i : -5;
}

/* Rank 0: slot per (source, k) holding the received buffer and status. */
static void round_run(int rnd, int dev, int *slots, int *stat_ok)
{
    int nmsg = 2 * (mt_size - 1);
    if (mt_rank != 0) {
        for (int k = 0; k < 2; k++) {
            int *b = mt_alloc(dev, VBYTES);
            fill_msg(b, mt_rank, 10 * mt_rank + k);
            MT_MPI(MPI_Send(b, 1, vec, 0, 10 * mt_rank + k, comm));
            mt_free(dev, b);
        }
        /* Rank 0's wildcards must not see the next round's messages. */
        MPI_Barrier(comm);
        return;
    }
    int **bufs = malloc(nmsg * sizeof *bufs);
    MPI_Request *rq = malloc(nmsg * sizeof *rq);
    MPI_Status *sts = malloc(nmsg * sizeof *sts);
    for (int i = 0; i < nmsg; i++) {
        bufs[i] = mt_alloc(dev, VBYTES);
        for (int j = 0; j < VCOUNT * 4; j++) bufs[i][j] = -9;
        MT_MPI(MPI_Irecv(bufs[i], 1, vec, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &rq[i]));
    }
    int done = 0, *idx = malloc(nmsg * sizeof *idx);
    MPI_Status *got = malloc(nmsg * sizeof *got);
    int *got_i = malloc(nmsg * sizeof *got_i);
    while (done < nmsg) {
        int n = 0, flag = 0, index = -1;
        switch (rnd) {
        case R_WAITANY:
            MT_MPI(MPI_Waitany(nmsg, rq, &index, &sts[0]));
            if (index != MPI_UNDEFINED) {
                got[done] = sts[0];
                got_i[done++] = index;
            }
            break;
        case R_TESTANY:
            MT_MPI(MPI_Testany(nmsg, rq, &index, &flag, &sts[0]));
            if (flag && index != MPI_UNDEFINED) {
                got[done] = sts[0];
                got_i[done++] = index;
            }
            break;
        case R_WAITSOME:
        case R_TESTSOME:
            if (rnd == R_WAITSOME)
                MT_MPI(MPI_Waitsome(nmsg, rq, &n, idx, sts));
            else
                MT_MPI(MPI_Testsome(nmsg, rq, &n, idx, sts));
            for (int k = 0; n != MPI_UNDEFINED && k < n; k++) {
                got[done] = sts[k];
                got_i[done++] = idx[k];
            }
            break;
        case R_TESTALL:
            MT_MPI(MPI_Testall(nmsg, rq, &flag, sts));
            if (flag)
                for (int k = 0; k < nmsg; k++) {
                    got[done] = sts[k];
                    got_i[done++] = k;
                }
            break;
        }
    }
    *stat_ok = 1;
    for (int k = 0; k < nmsg; k++) {
        int src = got[k].MPI_SOURCE, tag = got[k].MPI_TAG, c = -1;
        MPI_Get_count(&got[k], vec, &c);
        int *b = bufs[got_i[k]];
        int want[VCOUNT * 4];
        fill_msg(want, src, tag);
        for (int j = 0; j < VCOUNT * 4; j++)
            if ((j % 4) >= 2) want[j] = -9;
        int ok = src >= 1 && src < mt_size && (tag == 10 * src || tag == 10 * src + 1) && c == 1 &&
                 !memcmp(b, want, sizeof want);
        if (!ok) {
            *stat_ok = 0;
            MT_CHECK(0, "%s dev=%d: message from status (source %d, tag %d, count %d) has other data (b[0]=%d)",
                     round_name[rnd], dev, src, tag, c, b[0]);
        } else {
            memcpy(slots + ((src - 1) * 2 + (tag - 10 * src)) * VCOUNT * 4, b, sizeof want);
        }
    }
    for (int i = 0; i < nmsg; i++) mt_free(dev, bufs[i]);
    free(bufs);
    free(rq);
    free(sts);
    free(idx);
    free(got);
    free(got_i);
    MPI_Barrier(comm);
}

/* Device, host, device on one (source, tag): received in order. */
static void non_overtaking(int dev0, int dev1, int *order)
{
    if (mt_rank == 1) {
        int *a = mt_alloc(dev1, VBYTES), *h = calloc(1, VBYTES), *c = mt_alloc(dev1, VBYTES);
        fill_msg(a, 1, 1);
        fill_msg(h, 1, 2);
        fill_msg(c, 1, 3);
        MPI_Request r;
        MT_MPI(MPI_Isend(a, 1, vec, 0, 7, comm, &r));
        MT_MPI(MPI_Send(h, 1, vec, 0, 7, comm));
        MT_MPI(MPI_Send(c, 1, vec, 0, 7, comm));
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        mt_free(dev1, a);
        free(h);
        mt_free(dev1, c);
    } else if (mt_rank == 0) {
        for (int k = 0; k < 3; k++) {
            int d = k == 1 ? 0 : dev0;
            int *b = mt_alloc(d, VBYTES);
            MT_MPI(MPI_Recv(b, 1, vec, MPI_ANY_SOURCE, 7, comm, MPI_STATUS_IGNORE));
            order[k] = (b[0] - 100000) / 1000;
            mt_free(d, b);
        }
    }
    MPI_Barrier(comm);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Type_vector(VCOUNT, 2, 4, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    size_t slot_bytes = (size_t)2 * (mt_size - 1) * VBYTES;
    int *sd = calloc(1, slot_bytes + 1), *sh = calloc(1, slot_bytes + 1);
    for (int r = 0; r < R_COUNT; r++) {
        int okd = 0, okh = 0;
        mt_phase_t ph = mt_phase_begin(1);
        round_run(r, 1, sd, &okd);
        mt_phase_end(ph, round_name[r]);
        round_run(r, 0, sh, &okh);
        if (mt_rank == 0) mt_same(sd, sh, slot_bytes, round_name[r]);
    }
    int combos[4][2] = {{1, 1}, {0, 1}, {1, 0}, {0, 0}};
    for (int c = 0; c < 4; c++) {
        int order[3] = {0, 0, 0};
        non_overtaking(combos[c][0], combos[c][1], order);
        if (mt_rank == 0)
            MT_CHECK(order[0] == 1 && order[1] == 2 && order[2] == 3, "non-overtaking (%d,%d): order %d %d %d",
                     combos[c][0], combos[c][1], order[0], order[1], order[2]);
    }
    MT_CHECK(mt_counter("requests_live") <= 0, "requests left: %lld", (long long)mt_counter("requests_live"));
    free(sd);
    free(sh);
    MPI_Type_free(&vec);
    MPI_Comm_free(&comm);
    return mt_finish("wildcard_test");
}
