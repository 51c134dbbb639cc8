/*
 * The heap-as-device tool (libgdte_heapdev.so, heapdev.c) does what tools/mpich_suite.sh relies
 * on: run with it preloaded before libgdte_mpi.so and GDTE_FAKE_DEVICE=1, every heap block this
 * program allocates (malloc, calloc, realloc, posix_memalign, aligned_alloc) is device memory to
 * gdte, and static buffers are not.
 *
 * Ranks 0 and 1 exchange a strided type (a vector of 3-int blocks at a stride of 7, count 5) from
 * each kind of heap block and from a static buffer, both ways. Checks: the received bytes equal
 * what MPI_Unpack of MPI_Pack's output on static host copies gives (the oracle, the MPI alone on
 * host memory); a heap block moves through gdte (its counters move) and a static buffer does not;
 * a block freed and allocated again (same size, likely the same address) is device memory again,
 * which needs the free to have unregistered it; a block grown by realloc is device memory over its
 * whole new size.
 */
#include "mpitest.h"


#define ELEMS 256
static int st_send[ELEMS], st_recv[ELEMS], st_oracle[ELEMS];
static char st_packed[ELEMS * sizeof(int)];

enum { K_MALLOC, K_CALLOC, K_REALLOC, K_MEMALIGN, K_ALIGNED, K_AGAIN, K_STATIC, K_COUNT };
static const char *const kname[K_COUNT] = {"malloc", "calloc", "realloc", "posix_memalign",
                                           "aligned_alloc", "malloc after free", "static"};

static int *get(int k)
{
    void *p = NULL;
    switch (k) {
    case K_MALLOC: return malloc(ELEMS * sizeof(int));
    case K_CALLOC: return calloc(ELEMS, sizeof(int));
    case K_REALLOC: { /* grown: the second half is beyond the first block */
        int *a = malloc(16);
        return realloc(a, ELEMS * sizeof(int));
    }
    case K_MEMALIGN: return posix_memalign(&p, 256, ELEMS * sizeof(int)) == 0 ? p : NULL;
    case K_ALIGNED: return aligned_alloc(64, ELEMS * sizeof(int));
    case K_AGAIN: {
        int *a = malloc(ELEMS * sizeof(int));
        free(a);
        return malloc(ELEMS * sizeof(int));
    }
    default: return NULL;
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    if (mt_size < 2) {
        fprintf(stderr, "heapdev_test: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Datatype v;
    MT_MPI(MPI_Type_vector(5, 3, 7, MPI_INT, &v));
    MT_MPI(MPI_Type_commit(&v));
    const int count = 5, peer = 1 - mt_rank;
    for (int k = 0; k < K_COUNT; k++) {
        if (mt_rank > 1) break;
        int *buf = k == K_STATIC ? NULL : get(k);
        MT_CHECK(k == K_STATIC || buf, "%s returned NULL", kname[k]);
        if (k != K_STATIC && !buf) continue;
        /* The message goes 0 -> 1 and then 1 -> 0, with the heap block on both sides. */
        for (int dir = 0; dir < 2; dir++) {
            int sender = dir == 0 ? 0 : 1;
            unsigned seed = 1000u + 17u * (unsigned)k + (unsigned)dir;
            int *send = k == K_STATIC ? st_send : buf, *recv = k == K_STATIC ? st_recv : buf;
            /* Oracle on static host memory: what MPI's own pack/unpack makes of the same bytes. */
            mt_fill(st_send, sizeof st_send, seed);
            memset(st_oracle, 0x5a, sizeof st_oracle);
            int pos = 0;
            MT_MPI(MPI_Pack(st_send, count, v, st_packed, (int)sizeof st_packed, &pos, MPI_COMM_SELF));
            int upos = 0;
            MT_MPI(MPI_Unpack(st_packed, pos, &upos, st_oracle, count, v, MPI_COMM_SELF));
            int64_t t0 = mt_gdte_traffic();
            if (mt_rank == sender) {
                if (send != st_send) memcpy(send, st_send, sizeof st_send);
                MT_MPI(MPI_Send(send, count, v, peer, 7, MPI_COMM_WORLD));
            } else {
                memset(recv, 0x5a, ELEMS * sizeof(int));
                MPI_Status st;
                MT_MPI(MPI_Recv(recv, count, v, peer, 7, MPI_COMM_WORLD, &st));
                int n = -1;
                MT_MPI(MPI_Get_count(&st, v, &n));
                MT_CHECK(n == count, "%s: received count %d, want %d", kname[k], n, count);
                MT_CHECK(memcmp(recv, st_oracle, sizeof st_oracle) == 0, "%s: received bytes differ from the oracle",
                         kname[k]);
            }
            int64_t moved = mt_gdte_traffic() - t0;
            if (mt_fake()) {
                if (k == K_STATIC)
                    MT_CHECK(moved == 0, "%s: a static buffer went through gdte", kname[k]);
                else
                    MT_CHECK(moved > 0, "%s: a heap block did not go through gdte (not device memory)", kname[k]);
            }
        }
        free(buf);
    }
    MT_MPI(MPI_Type_free(&v));
    return mt_finish("heapdev_test");
}
