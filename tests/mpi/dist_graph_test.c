/*
 * MPI_Dist_graph_create after K nonblocking collectives on the old communicator, for every K
 * in 0..32, several times each. Open MPI 4.1's topo/treematch distributes the edges on the old
 * communicator, receiving from MPI_ANY_SOURCE with the fixed tags -50 and -51, which libnbc
 * also gives to the 24th and 25th nonblocking collective on a communicator (tags -27, -28, ...):
 * there, the new communicator's CID allocation (MPI_Iallreduce inside) can lose a message to a
 * process still receiving edges, and every process hangs in ompi_comm_nextcid (about one try
 * in two at 4 processes). The plain MPI hangs the same way; the interposer makes the graph from
 * a fresh copy of the communicator, whose tags start over (shims.c). Without that, this program
 * hangs at the colliding K (CTest's timeout); with it, every graph must also be right: the
 * neighbours and weights each process reads back are the ones given.
 */
#include "mpitest.h"

/* Rank 0 gives every edge: r -> r+1 (weight 10r+1), r -> r+1 again (10r+2), r -> 0 (10r+3, r>0). */
static void one_graph(MPI_Comm base, int k, int dup)
{
    MPI_Comm c = base, g;
    if (dup) MT_MPI(MPI_Comm_dup(base, &c));
    for (int i = 0; i < k; i++) {
        MPI_Request r;
        MT_MPI(MPI_Ibarrier(c, &r));
        MT_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    int n = 0, ne = 0, src[64], deg[64], dst[192], w[192];
    if (mt_rank == 0)
        for (int r = 0; r < mt_size - 1 && r < 64; r++) {
            src[n] = r;
            deg[n] = 2;
            dst[ne] = r + 1, w[ne++] = 10 * r + 1;
            dst[ne] = r + 1, w[ne++] = 10 * r + 2;
            if (r > 0) dst[ne] = 0, w[ne++] = 10 * r + 3, deg[n]++;
            n++;
        }
    MT_MPI(MPI_Dist_graph_create(c, n, src, deg, dst, w, MPI_INFO_NULL, 0, &g));
    /* Expected: in-edges of rank q>0: two from q-1 (10(q-1)+1, +2); of rank 0: one from each r in
     * 1..size-2 (10r+3). Out-edges of rank r<size-1: two to r+1, and one to 0 when r>0. */
    int want_in = mt_rank > 0 ? 2 : (mt_size > 2 ? mt_size - 2 : 0);
    int want_out = mt_rank < mt_size - 1 ? (mt_rank > 0 ? 3 : 2) : 0;
    int in = -1, out = -1, wt = -1;
    MT_MPI(MPI_Dist_graph_neighbors_count(g, &in, &out, &wt));
    MT_CHECK(in == want_in && out == want_out && wt, "K=%d: degrees %d/%d, want %d/%d", k, in, out, want_in, want_out);
    if (in == want_in && out == want_out && in <= 64 && out <= 64) {
        int s[64], sw[64], d[64], dw[64], sum_in = 0, sum_out = 0, want_sum_in = 0, want_sum_out = 0;
        MT_MPI(MPI_Dist_graph_neighbors(g, in, s, sw, out, d, dw));
        for (int i = 0; i < in; i++) sum_in += s[i] * 1000 + sw[i];
        for (int i = 0; i < out; i++) sum_out += d[i] * 1000 + dw[i];
        if (mt_rank > 0) want_sum_in = 2 * (mt_rank - 1) * 1000 + 20 * (mt_rank - 1) + 3;
        else for (int r = 1; r < mt_size - 1; r++) want_sum_in += r * 1000 + 10 * r + 3;
        if (mt_rank < mt_size - 1) {
            want_sum_out = 2 * (mt_rank + 1) * 1000 + 20 * mt_rank + 3;
            if (mt_rank > 0) want_sum_out += 10 * mt_rank + 3;
        }
        MT_CHECK(sum_in == want_sum_in && sum_out == want_sum_out, "K=%d: neighbours %d/%d, want %d/%d", k, sum_in,
                 sum_out, want_sum_in, want_sum_out);
    }
    /* The graph communicator works: its ranks are the old one's. */
    int rank = -1, sum = 0;
    MT_MPI(MPI_Comm_rank(g, &rank));
    MT_CHECK(rank == mt_rank, "K=%d: rank %d in the graph, %d in the old communicator", k, rank, mt_rank);
    MT_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, g));
    MT_CHECK(sum == mt_size * (mt_size - 1) / 2, "K=%d: sum of ranks %d", k, sum);
    MT_MPI(MPI_Comm_free(&g));
    if (dup) MT_MPI(MPI_Comm_free(&c));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    for (int round = 0; round < rounds; round++)
        for (int k = 0; k <= 32; k++) one_graph(MPI_COMM_WORLD, k, 1);
    /* And on MPI_COMM_WORLD itself, after those communicators' creations (collectives on it). */
    for (int round = 0; round < rounds; round++) one_graph(MPI_COMM_WORLD, 1, 0);
    return mt_finish("dist_graph_test");
}
