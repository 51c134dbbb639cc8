/*
 * 3-D halo exchange with subarray faces on a periodic Cartesian communicator (np 2: 2x1x1,
 * np 4: 2x2x1; dimensions of one process exchange with themselves). Usage:
 *   halo3d_test N ITERS {nonblocking|persistent|sendrecv}
 * Checks every ghost cell against the analytic neighbour value, and the device-buffer run
 * against the host-buffer run byte for byte. In persistent mode, also that steady-state
 * iterations allocate no staging.
 */
#include "mpitest.h"

typedef struct {
    int n;               /* interior cells per dimension */
    int N;               /* n + 2 */
    MPI_Comm cart;
    int dims[3], coords[3];
    int lo[3], hi[3];    /* neighbour ranks below / above in each dimension */
    MPI_Datatype send_lo[3], send_hi[3], recv_lo[3], recv_hi[3];
} halo_t;

static double cell_value(const halo_t *h, int gi, int gj, int gk)
{
    int G[3] = {h->dims[0] * h->n, h->dims[1] * h->n, h->dims[2] * h->n};
    gi = (gi + G[0]) % G[0];
    gj = (gj + G[1]) % G[1];
    gk = (gk + G[2]) % G[2];
    /* The fraction fills the mantissa, so a single wrong byte anywhere shows. */
    return gi * 1e6 + gj * 1e3 + gk + (double)((gi * 7919 + gj * 104729 + gk * 1299709) % 1000003) / 1000003.0;
}

static size_t idx(const halo_t *h, int i, int j, int k) { return ((size_t)i * h->N + j) * h->N + k; }

static void face_type(const halo_t *h, int d, int start, MPI_Datatype *t)
{
    int sizes[3] = {h->N, h->N, h->N}, sub[3] = {h->n, h->n, h->n}, st[3] = {1, 1, 1};
    sub[d] = 1;
    st[d] = start;
    MPI_Type_create_subarray(3, sizes, sub, st, MPI_ORDER_C, MPI_DOUBLE, t);
    MPI_Type_commit(t);
}

static void setup(halo_t *h, int n)
{
    h->n = n;
    h->N = n + 2;
    int d3[3] = {mt_size >= 4 ? 2 : mt_size, mt_size >= 4 ? mt_size / 2 : 1, 1};
    int periods[3] = {1, 1, 1};
    memcpy(h->dims, d3, sizeof d3);
    MPI_Cart_create(MPI_COMM_WORLD, 3, h->dims, periods, 0, &h->cart);
    int r;
    MPI_Comm_rank(h->cart, &r);
    MPI_Cart_coords(h->cart, r, 3, h->coords);
    for (int d = 0; d < 3; d++) {
        MPI_Cart_shift(h->cart, d, 1, &h->lo[d], &h->hi[d]);
        face_type(h, d, 1, &h->send_lo[d]);
        face_type(h, d, n, &h->send_hi[d]);
        face_type(h, d, 0, &h->recv_lo[d]);
        face_type(h, d, n + 1, &h->recv_hi[d]);
    }
}

static void fill(const halo_t *h, double *g)
{
    for (int i = 0; i < h->N; i++)
        for (int j = 0; j < h->N; j++)
            for (int k = 0; k < h->N; k++) {
                int interior = i >= 1 && i <= h->n && j >= 1 && j <= h->n && k >= 1 && k <= h->n;
                g[idx(h, i, j, k)] = interior ? cell_value(h, h->coords[0] * h->n + i - 1, h->coords[1] * h->n + j - 1,
                                                           h->coords[2] * h->n + k - 1)
                                              : -1.0;
            }
}

/* Ghost faces hold the neighbours' values; edges and corners stay untouched (-1). */
static void verify(const halo_t *h, const double *g, const char *what)
{
    int bad = 0;
    for (int i = 0; i < h->N; i++)
        for (int j = 0; j < h->N; j++)
            for (int k = 0; k < h->N; k++) {
                int c[3] = {i, j, k}, outside = 0;
                for (int d = 0; d < 3; d++) outside += c[d] == 0 || c[d] == h->n + 1;
                double want = outside > 1 ? -1.0
                                          : cell_value(h, h->coords[0] * h->n + i - 1, h->coords[1] * h->n + j - 1,
                                                       h->coords[2] * h->n + k - 1);
                if (g[idx(h, i, j, k)] != want && bad++ < 3)
                    MT_CHECK(0, "%s: cell (%d,%d,%d) = %g, want %g", what, i, j, k, g[idx(h, i, j, k)], want);
            }
    MT_CHECK(bad == 0, "%s: %d wrong cells", what, bad);
}

static void exchange_nb(const halo_t *h, double *g, int use_statuses)
{
    MPI_Request rq[12];
    MPI_Status st[12];
    int q = 0;
    for (int d = 0; d < 3; d++) {
        MPI_Irecv(g, 1, h->recv_lo[d], h->lo[d], 2 * d, h->cart, &rq[q++]);
        MPI_Irecv(g, 1, h->recv_hi[d], h->hi[d], 2 * d + 1, h->cart, &rq[q++]);
    }
    for (int d = 0; d < 3; d++) {
        MPI_Isend(g, 1, h->send_hi[d], h->hi[d], 2 * d, h->cart, &rq[q++]);
        MPI_Isend(g, 1, h->send_lo[d], h->lo[d], 2 * d + 1, h->cart, &rq[q++]);
    }
    MT_MPI(MPI_Waitall(12, rq, use_statuses ? st : MPI_STATUSES_IGNORE));
    if (use_statuses)
        for (int r = 0; r < 6; r++) {
            int cnt = -1;
            MPI_Get_count(&st[r], h->recv_lo[r / 2], &cnt);
            MT_CHECK(cnt == 1, "face %d: MPI_Get_count = %d", r, cnt);
            MT_CHECK(st[r].MPI_TAG == r, "face %d: tag %d", r, st[r].MPI_TAG);
        }
}

static void exchange_sendrecv(const halo_t *h, double *g)
{
    for (int d = 0; d < 3; d++) {
        MPI_Status st;
        MT_MPI(MPI_Sendrecv(g, 1, h->send_hi[d], h->hi[d], 2 * d, g, 1, h->recv_lo[d], h->lo[d], 2 * d, h->cart, &st));
        MT_CHECK(st.MPI_SOURCE == h->lo[d], "sendrecv source %d want %d", st.MPI_SOURCE, h->lo[d]);
        MT_MPI(MPI_Sendrecv(g, 1, h->send_lo[d], h->lo[d], 2 * d + 1, g, 1, h->recv_hi[d], h->hi[d], 2 * d + 1,
                            h->cart, MPI_STATUS_IGNORE));
    }
}

/* Staging allocated into the pool (overflow buffers, for a pool too small, are per message by
 * design and counted apart). */
static int64_t pooled_allocs(void) { return mt_counter("stage_allocs") - mt_counter("stage_overflows"); }

static void run(const halo_t *h, int device, const char *mode, int iters, double *out)
{
    size_t bytes = (size_t)h->N * h->N * h->N * sizeof(double);
    double *g = mt_alloc(device, bytes);
    fill(h, g);
    mt_phase_t ph = mt_phase_begin(device);
    const char *what = device ? "device" : "host";
    if (!strcmp(mode, "persistent")) {
        MPI_Request rq[12];
        int q = 0;
        for (int d = 0; d < 3; d++) {
            MPI_Recv_init(g, 1, h->recv_lo[d], h->lo[d], 2 * d, h->cart, &rq[q++]);
            MPI_Recv_init(g, 1, h->recv_hi[d], h->hi[d], 2 * d + 1, h->cart, &rq[q++]);
        }
        for (int d = 0; d < 3; d++) {
            MPI_Send_init(g, 1, h->send_hi[d], h->hi[d], 2 * d, h->cart, &rq[q++]);
            MPI_Send_init(g, 1, h->send_lo[d], h->lo[d], 2 * d + 1, h->cart, &rq[q++]);
        }
        int64_t allocs_after_first = 0, det0 = 0;
        for (int it = 0; it < iters; it++) {
            MT_MPI(MPI_Startall(12, rq));
            MT_MPI(MPI_Waitall(12, rq, MPI_STATUSES_IGNORE));
            verify(h, g, what);
            if (it == 0) allocs_after_first = pooled_allocs(), det0 = mt_counter("node_detached");
        }
        /* A node-path send its receiver did not take for 1 ms (a time-shared machine) is
         * detached into new staging: allowed, and only then. */
        MT_CHECK(pooled_allocs() == allocs_after_first || mt_counter("node_detached") > det0,
                 "steady-state iterations allocated staging (%lld -> %lld)", (long long)allocs_after_first,
                 (long long)pooled_allocs());
        for (int r = 0; r < 12; r++) MT_MPI(MPI_Request_free(&rq[r]));
        MT_CHECK(!device || !mt_expect_gdte() || mt_counter("requests_live") == 0, "requests left: %lld",
                 (long long)mt_counter("requests_live"));
    } else {
        int64_t allocs = 0, det0 = 0;
        for (int it = 0; it < iters; it++) {
            if (!strcmp(mode, "sendrecv"))
                exchange_sendrecv(h, g);
            else
                exchange_nb(h, g, it % 2);
            verify(h, g, what);
            if (it == 0) allocs = pooled_allocs(), det0 = mt_counter("node_detached");
        }
        MT_CHECK(pooled_allocs() == allocs || mt_counter("node_detached") > det0,
                 "steady-state iterations allocated staging (%lld -> %lld)", (long long)allocs, (long long)pooled_allocs());
        if (device && mt_expect_gdte() && getenv("GDTE_STAGING_MAX"))
            MT_CHECK(mt_counter("stage_overflows") > 0, "a pool smaller than one exchange did not overflow");
    }
    mt_phase_end(ph, what);
    memcpy(out, g, bytes);
    mt_free(device, g);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 8;
    int iters = argc > 2 ? atoi(argv[2]) : 3;
    const char *mode = argc > 3 ? argv[3] : "nonblocking";
    halo_t h;
    setup(&h, n);
    size_t bytes = (size_t)h.N * h.N * h.N * sizeof(double);
    double *dev_result = malloc(bytes), *host_result = malloc(bytes);
    run(&h, 1, mode, iters, dev_result);
    run(&h, 0, mode, iters, host_result);
    mt_same(dev_result, host_result, bytes, "halo");
    for (int d = 0; d < 3; d++) {
        MPI_Type_free(&h.send_lo[d]);
        MPI_Type_free(&h.send_hi[d]);
        MPI_Type_free(&h.recv_lo[d]);
        MPI_Type_free(&h.recv_hi[d]);
    }
    MPI_Comm_free(&h.cart);
    free(dev_result);
    free(host_result);
    return mt_finish("halo3d_test");
}
