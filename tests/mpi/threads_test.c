/*
 * MPI_THREAD_MULTIPLE: the interposer reports the MPI's thread level (Open MPI here provides
 * MULTIPLE) and its state holds up under concurrent device traffic. Four threads per rank
 * ping-pong vector-typed device buffers between ranks 0 and 1 at once, each on its own tag,
 * completing with every completion call in turn (Sendrecv, Waitall, Waitany, Testall,
 * Testsome, Waitsome, Request_get_status, Test, and each thread's persistent pair started with
 * Startall); every result is checked against the same run
 * on host buffers,
 * and against the data the peer thread sent. (The MPI recycles request handles between
 * threads: a record looked up by a handle value the MPI had already freed once corrupted a
 * few rounds in a hundred.) With --big the vectors are 160 KB: device messages within a node go
 * GPU to GPU, and a receive one thread's progress pass finished ahead for another was returned
 * to that thread before its batched copy had run (stale and poison values in every run on an
 * H200 until the pass kept the table locked through the batch's synchronization).
 */
#include <pthread.h>
#include "mpitest.h"

#define THREADS 4
static int ROUNDS = 240; /* 60 with --big */
#define NMAX 60000 /* ints in the largest vector's footprint */

/* 100 blocks of 2 ints, stride 3 (800 bytes); with --big 20000 blocks (160 KB: past what the
 * copy engines take alone, so that device messages within a node go GPU to GPU). */
static MPI_Datatype vec;
static int N = 300; /* ints in the vector's footprint */

typedef struct {
    int tid, dev;
    int result[NMAX];
    int bad;
} targ_t;

static void *worker(void *p)
{
    targ_t *a = p;
    int peer = 1 - mt_rank;
    int *s = mt_alloc(a->dev, N * sizeof(int)), *r = mt_alloc(a->dev, N * sizeof(int));
    /* The thread's persistent pair, made once, started every eighth round. */
    MPI_Request pq[2];
    MPI_Recv_init(r, 1, vec, peer, a->tid, MPI_COMM_WORLD, &pq[0]);
    MPI_Send_init(s, 1, vec, peer, a->tid, MPI_COMM_WORLD, &pq[1]);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < N; i++) {
            s[i] = mt_rank * 1000000 + a->tid * 10000 + round * 100 + i % 100;
            r[i] = -1;
        }
        MPI_Request q[2];
        int flag = 0, idx, outc, ind[2], done = 0;
        switch (round % 8) {
        case 0:
            MPI_Sendrecv(s, 1, vec, peer, a->tid, r, 1, vec, peer, a->tid, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            break;
        case 1:
            MPI_Irecv(r, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[1]);
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
            break;
        case 2:
            MPI_Irecv(r, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[1]);
            MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE);
            MPI_Waitany(2, q, &idx, MPI_STATUS_IGNORE);
            break;
        case 3:
            MPI_Irecv(r, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[1]);
            while (!flag) MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE);
            break;
        case 4:
        case 5:
            MPI_Irecv(r, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[1]);
            while (done < 2) {
                if (round % 8 == 4) MPI_Testsome(2, q, &outc, ind, MPI_STATUSES_IGNORE);
                else MPI_Waitsome(2, q, &outc, ind, MPI_STATUSES_IGNORE);
                if (outc != MPI_UNDEFINED) done += outc;
            }
            break;
        case 7:
            /* Complete by MPI_Request_get_status means the data is in the buffer already (the
             * request lives on until the wait). */
            MPI_Irecv(r, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[1]);
            while (!flag) MPI_Request_get_status(q[0], &flag, MPI_STATUS_IGNORE);
            for (int i = 0; i < N; i++) {
                int want = i % 3 == 2 ? -1 : peer * 1000000 + a->tid * 10000 + round * 100 + i % 100;
                if (r[i] != want) a->bad++;
            }
            MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
            break;
        case 6:
            MPI_Startall(2, pq);
            MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
            break;
        default:
            MPI_Irecv(r, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[0]);
            MPI_Isend(s, 1, vec, peer, a->tid, MPI_COMM_WORLD, &q[1]);
            while (!flag) MPI_Test(&q[0], &flag, MPI_STATUS_IGNORE);
            MPI_Wait(&q[1], MPI_STATUS_IGNORE);
            break;
        }
        for (int i = 0; i < N; i++) {
            int want = i % 3 == 2 ? -1 : peer * 1000000 + a->tid * 10000 + round * 100 + i % 100;
            if (r[i] != want) a->bad++;
        }
    }
    memcpy(a->result, r, sizeof(int) * (size_t)N);
    MPI_Request_free(&pq[0]);
    MPI_Request_free(&pq[1]);
    mt_free(a->dev, s);
    mt_free(a->dev, r);
    return NULL;
}

static void run(int dev, targ_t *args)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        args[t].tid = t;
        args[t].dev = dev;
        args[t].bad = 0;
        pthread_create(&th[t], NULL, worker, &args[t]);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
}

int main(int argc, char **argv)
{
    int provided = mt_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
    MT_CHECK(provided == MPI_THREAD_MULTIPLE, "provided thread level %d, want MPI_THREAD_MULTIPLE", provided);
    if (provided != MPI_THREAD_MULTIPLE || mt_size < 2 || mt_rank >= 2) return mt_finish("threads_test");
    int big = argc > 1 && !strcmp(argv[argc - 1], "--big");
    N = big ? NMAX : 300;
    ROUNDS = big ? 60 : 240;
    if (big && mt_rank == 0) printf("threads_test: vectors of %d bytes\n", N / 3 * 2 * (int)sizeof(int));
    MPI_Type_vector(N / 3, 2, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    static targ_t dev_args[THREADS], host_args[THREADS];
    mt_phase_t ph = mt_phase_begin(1);
    run(1, dev_args);
    mt_phase_end(ph, "threads device");
    run(0, host_args);
    for (int t = 0; t < THREADS; t++) {
        MT_CHECK(dev_args[t].bad == 0, "thread %d: %d wrong ints on device buffers", t, dev_args[t].bad);
        MT_CHECK(host_args[t].bad == 0, "thread %d: %d wrong ints on host buffers", t, host_args[t].bad);
        mt_same(dev_args[t].result, host_args[t].result, sizeof(int) * (size_t)N, "thread result");
    }
    MT_CHECK(mt_counter("requests_live") <= 0, "requests left: %lld", (long long)mt_counter("requests_live"));
    MPI_Type_free(&vec);
    return mt_finish("threads_test");
}
