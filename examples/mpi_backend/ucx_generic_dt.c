/*
 * The second half of gdte's datatype backend API: a gdte type as a UCX generic datatype.
 * Two processes (MPI only bootstraps: it swaps the UCX worker addresses) exchange
 * non-contiguous data with ucp_tag_send_nbx / ucp_tag_recv_nbx, each side describing its own
 * layout with a gdte type turned into a ucp_datatype_t by gdte_ucx_dt_create(). UCX asks the
 * datatype for byte ranges of the packed stream (eager fragments, rendezvous pipeline); gdte
 * packs and unpacks exactly those. This is how an MPI built on UCX (Open MPI's pml/ucx) hands
 * non-contiguous device or host data to gdte: see docs/MPI_BACKEND.md.
 *
 * The sender's layout is the x = 1 face of an n^3 grid of doubles (a subarray); the receiver's
 * is a column block of a matrix (a vector). Same signature, different shapes. The receiver
 * checks its whole buffer byte for byte against gdte_pack + gdte_unpack done locally, for a
 * small message (eager) and a large one (rendezvous, several fragments).
 * Run: mpirun -np 2 ucx_generic_dt
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gdte.h>
#include <gdte_ucx.h>

#define TAG 0x6764746565ull

static int fail(const char *what, int rank)
{
    fprintf(stderr, "[rank %d] %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

static void wait_req(ucp_worker_h w, void *req)
{
    if (req == NULL) return;
    if (UCS_PTR_IS_ERR(req)) {
        fprintf(stderr, "UCX request failed: %s\n", ucs_status_string(UCS_PTR_STATUS(req)));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(w);
    ucs_status_t st = ucp_request_check_status(req);
    ucp_request_free(req);
    if (st != UCS_OK) {
        fprintf(stderr, "UCX request completed with %s\n", ucs_status_string(st));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Sender's layout: face x = 1 of an (n+2)^3 grid, interior n x n. */
static gdte_type_h face_type(int n)
{
    int64_t sizes[3] = {n + 2, n + 2, n + 2}, sub[3] = {1, n, n}, starts[3] = {1, 1, 1};
    gdte_type_h t;
    gdte_type_create_subarray(3, sizes, sub, starts, GDTE_ORDER_C, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t);
    gdte_type_commit(t);
    return t;
}

/* Receiver's layout: n*n doubles as n columns of n, every other column of an n x 2n matrix. */
static gdte_type_h column_type(int n)
{
    gdte_type_h t;
    gdte_type_create_vector(n * n / 2, 2, 4, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t);
    gdte_type_commit(t);
    return t;
}

static int exchange(int rank, int n, ucp_worker_h worker, ucp_ep_h ep)
{
    size_t sbytes = sizeof(double) * (n + 2) * (n + 2) * (n + 2);
    size_t rbytes = sizeof(double) * (size_t)n * n * 2;
    gdte_type_h ft = face_type(n), ct = column_type(n);
    ucp_datatype_t fdt, cdt;
    if (gdte_ucx_dt_create(ft, 1, &fdt) != GDTE_OK || gdte_ucx_dt_create(ct, 1, &cdt) != GDTE_OK)
        return fail("gdte_ucx_dt_create failed", rank);
    double *grid = malloc(sbytes);
    for (size_t i = 0; i < sbytes / sizeof(double); i++) grid[i] = i + 1.0 / (i % 97 + 2);
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE};
    int rc = 0;
    if (rank == 0) {
        rp.datatype = fdt;
        wait_req(worker, ucp_tag_send_nbx(ep, grid, 1, TAG + n, &rp));
    } else {
        unsigned char *got = malloc(rbytes), *want = malloc(rbytes);
        memset(got, 0xAB, rbytes);
        memset(want, 0xAB, rbytes);
        rp.datatype = cdt;
        wait_req(worker, ucp_tag_recv_nbx(worker, got, 1, TAG + n, ~0ull, &rp));
        /* What the transfer must produce: the sender's stream unpacked into our layout. */
        int64_t total, done;
        gdte_type_pack_size(1, ft, &total);
        unsigned char *stream = malloc(total);
        gdte_pack(grid, 1, ft, stream, total, NULL, &done);
        gdte_unpack(stream, total, want, 1, ct, NULL, &done);
        size_t i = 0;
        while (i < rbytes && got[i] == want[i]) i++;
        if (i != rbytes) {
            fprintf(stderr, "[rank 1] n=%d: received buffer differs at byte %zu of %zu\n", n, i, rbytes);
            rc = 1;
        } else {
            printf("ucx generic datatype: n=%d, %lld packed bytes, subarray face -> column vector, identical\n", n,
                   (long long)total);
        }
        free(stream);
        free(got);
        free(want);
    }
    free(grid);
    gdte_ucx_dt_destroy(fdt);
    gdte_ucx_dt_destroy(cdt);
    gdte_type_free(&ft);
    gdte_type_free(&ct);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) return fail("run with exactly 2 processes", rank);
    if (gdte_init(NULL) != GDTE_OK) return fail("gdte_init failed", rank);

    ucp_config_t *cfg;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_TAG};
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK || ucp_init(&params, cfg, &ctx) != UCS_OK)
        return fail("ucp_init failed", rank);
    ucp_config_release(cfg);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (ucp_worker_create(ctx, &wp, &worker) != UCS_OK) return fail("ucp_worker_create failed", rank);

    /* Bootstrap: swap worker addresses over MPI. */
    ucp_address_t *addr;
    size_t alen, plen;
    ucp_worker_get_address(worker, &addr, &alen);
    MPI_Sendrecv(&alen, sizeof alen, MPI_BYTE, 1 - rank, 0, &plen, sizeof plen, MPI_BYTE, 1 - rank, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    void *paddr = malloc(plen);
    MPI_Sendrecv(addr, (int)alen, MPI_BYTE, 1 - rank, 1, paddr, (int)plen, MPI_BYTE, 1 - rank, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    ucp_worker_release_address(worker, addr);
    ucp_ep_params_t ep_params = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = paddr};
    ucp_ep_h ep;
    if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) return fail("ucp_ep_create failed", rank);

    int rc = 0;
    rc |= exchange(rank, 8, worker, ep);   /* 512 bytes: eager */
    rc |= exchange(rank, 256, worker, ep); /* 512 KiB: rendezvous, fragments */

    MPI_Barrier(MPI_COMM_WORLD);
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    void *creq = ucp_ep_close_nbx(ep, &cp);
    if (creq && !UCS_PTR_IS_ERR(creq)) {
        while (ucp_request_check_status(creq) == UCS_INPROGRESS) ucp_worker_progress(worker);
        ucp_request_free(creq);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    ucp_worker_destroy(worker);
    ucp_cleanup(ctx);
    free(paddr);
    gdte_finalize();
    int any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return any;
}
