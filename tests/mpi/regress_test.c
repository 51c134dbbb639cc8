/*
 * Regressions of the interposer found by outside programs (fake device in CI, GPU memory on the
 * device):
 *  - truncation above the eager limit: a message of 8,000 bytes into a non-contiguous device
 *    receive of 4,000, through every receive call (Recv, Irecv+Wait, Irecv+Waitany, Sendrecv,
 *    Sendrecv_replace, Mrecv, Imrecv): MPI_ERR_TRUNCATE, no byte outside the receive type's map
 *    written, and the next messages still right (Open MPI's single-copy path once wrote the whole
 *    message into 4 KiB of staging);
 *  - an error in MPI_Mrecv of a message matched by MPI_Mprobe goes through the handler of the
 *    message's communicator, not MPI_COMM_WORLD's;
 *  - 10,000 outstanding 32-byte device messages: all arrive, and once they complete the staging
 *    the interposer keeps is bounded (it used to keep 4 KiB per message: 80 MiB);
 *  - work the application queued on the default stream before a send or receive comes first:
 *    the send's bytes written by a copy still queued behind others, the receive buffer
 *    overwritten by a memset still queued, then MPI_Send/MPI_Recv at once (GPU to GPU, the
 *    receiver read the sender's buffer before the copy landed and its own memset landed over
 *    the data: random device types came out partly poison, a few in thousands);
 *  - device messages a process sends itself (a periodic dimension of one process: the demo's
 *    halo exchange sent 4 of its 6 faces to itself through pageable host memory): Irecv+Isend,
 *    Isend+Recv, and MPI_Sendrecv, on a vector, an indexed and a contiguous type, each against MPI_Pack /
 *    MPI_Unpack on host copies; with the node path they go GPU to GPU (node_recvs counts them);
 *  - small device messages sent with a blocking MPI_Send before their receive is posted, to
 *    itself and send, send, receive, receive between two processes: complete at once however the
 *    interposer moves them;
 *  - a type whose blocks lie in two device allocations (relative displacements between two
 *    arrays): on a GPU one 2-D runtime copy across both failed and the message was lost, and the
 *    in-place read maps one allocation only (two_allocations);
 *  - device buffers of another GPU than the current one (two GPUs): peer access, or a refusal,
 *    never a kernel faulting on memory it cannot reach (other_gpu_buffers);
 *  - a device message matched by a call that returns at once, then MPI_Barrier before the receive
 *    completes: its sender's MPI_Wait returns (matched_then_barrier).
 */
#include <unistd.h>
#include "mpitest.h"

#define NINT 2000 /* 8,000 bytes sent */
#define RV 500    /* receive: 500 blocks of 2 ints every 3: 4,000 bytes, 6,000 bytes of footprint */

static void truncation(void)
{
    MPI_Datatype v;
    MPI_Type_vector(RV, 2, 3, MPI_INT, &v);
    MPI_Type_commit(&v);
    const size_t foot = (size_t)(RV * 3) * sizeof(int), pad = 256, len = foot + 2 * pad;
    int peer = 1 - mt_rank;
    int *s = mt_devmem_alloc(NINT * sizeof(int));
    int *hs = malloc(NINT * sizeof(int));
    unsigned char *r = mt_devmem_alloc(len), *img = malloc(len);
    for (int way = 0; way < 7; way++) {
        for (int i = 0; i < NINT; i++) hs[i] = 1000 * way + i;
        mt_put(s, hs, NINT * sizeof(int));
        memset(img, 0x5A, len);
        mt_put(r, img, len);
        int *rb = (int *)(r + pad), rc = MPI_SUCCESS, tag = 40 + way;
        MPI_Status st;
        MPI_Request q[3];
        int idx, dummy = 0;
        if (mt_rank == 0) {
            switch (way) {
            case 3: /* Sendrecv: the truncated side is rank 1's receive */
                rc = MPI_Sendrecv(s, NINT, MPI_INT, peer, tag, &dummy, 0, MPI_INT, peer, tag, MPI_COMM_WORLD, &st);
                break;
            case 4:
                rc = MPI_Send(s, NINT, MPI_INT, peer, tag, MPI_COMM_WORLD);
                break;
            default: rc = MPI_Send(s, NINT, MPI_INT, peer, tag, MPI_COMM_WORLD); break;
            }
            MT_CHECK(rc == MPI_SUCCESS, "way %d: send failed (%d)", way, rc);
        } else if (mt_rank == 1) {
            MPI_Message msg;
            switch (way) {
            case 0: rc = MPI_Recv(rb, 1, v, peer, tag, MPI_COMM_WORLD, &st); break;
            case 1:
                MPI_Irecv(rb, 1, v, peer, tag, MPI_COMM_WORLD, &q[0]);
                rc = MPI_Wait(&q[0], &st);
                break;
            case 2:
                MPI_Irecv(&dummy, 1, MPI_INT, peer, 999, MPI_COMM_WORLD, &q[0]);
                MPI_Irecv(rb, 1, v, peer, tag, MPI_COMM_WORLD, &q[1]);
                rc = MPI_Waitany(2, q, &idx, &st);
                MT_CHECK(idx == 1, "Waitany index %d", idx);
                MPI_Cancel(&q[0]);
                MPI_Wait(&q[0], MPI_STATUS_IGNORE);
                break;
            case 3: rc = MPI_Sendrecv(&dummy, 0, MPI_INT, peer, tag, rb, 1, v, peer, tag, MPI_COMM_WORLD, &st); break;
            case 4: rc = MPI_Sendrecv_replace(rb, 1, v, MPI_PROC_NULL, tag, peer, tag, MPI_COMM_WORLD, &st); break;
            case 5:
                MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &msg, &st);
                rc = MPI_Mrecv(rb, 1, v, &msg, &st);
                break;
            default:
                MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &msg, &st);
                MPI_Imrecv(rb, 1, v, &msg, &q[0]);
                rc = MPI_Wait(&q[0], &st);
                break;
            }
            MT_CHECK(mt_eclass(rc) == MPI_ERR_TRUNCATE, "way %d: class %d, want MPI_ERR_TRUNCATE", way, mt_eclass(rc));
            mt_get(img, r, len);
            /* Bytes outside the type map: the margins and the third int of every block. */
            size_t bad = len;
            for (size_t b = 0; b < len && bad == len; b++) {
                int in_map = b >= pad && b < pad + foot && ((b - pad) / sizeof(int)) % 3 != 2;
                if (!in_map && img[b] != 0x5A) bad = b;
            }
            MT_CHECK(bad == len, "way %d: byte %zu outside the receive type was written", way, bad);
        }
        /* The next message on the same pair is intact. */
        int ok = 0;
        if (mt_rank == 0) {
            MPI_Send(s, 1000, MPI_INT, peer, 100 + way, MPI_COMM_WORLD);
        } else if (mt_rank == 1) {
            MPI_Recv(rb, 1000, MPI_INT, peer, 100 + way, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            mt_get(img, r, len);
            ok = !memcmp(img + pad, hs, 1000 * sizeof(int));
            MT_CHECK(ok, "way %d: the message after the truncated one is wrong", way);
        }
    }
    free(img);
    free(hs);
    mt_devmem_free(r);
    mt_devmem_free(s);
    MPI_Type_free(&v);
}

#define NSMALL 10000
static void many_small(void)
{
    MPI_Datatype v; /* 32 bytes: 4 blocks of 2 ints every 3 */
    MPI_Type_vector(4, 2, 3, MPI_INT, &v);
    MPI_Type_commit(&v);
    const size_t foot = 12 * sizeof(int);
    int peer = 1 - mt_rank;
    unsigned char *buf = mt_devmem_alloc(NSMALL * foot);
    int *img = malloc(NSMALL * foot);
    MPI_Request *q = malloc(NSMALL * sizeof *q);
    for (int i = 0; i < NSMALL * 12; i++) img[i] = mt_rank == 0 ? i : -1;
    mt_put(buf, img, NSMALL * foot);
    for (int i = 0; i < NSMALL; i++) {
        if (mt_rank == 0) MPI_Isend(buf + i * foot, 1, v, peer, i % 1000, MPI_COMM_WORLD, &q[i]);
        else MPI_Irecv(buf + i * foot, 1, v, peer, i % 1000, MPI_COMM_WORLD, &q[i]);
    }
    int64_t held_peak = mt_counter("stage_bytes_held");
    MT_MPI(MPI_Waitall(NSMALL, q, MPI_STATUSES_IGNORE));
    int64_t held = mt_counter("stage_bytes_held");
    if (mt_rank == 1) {
        mt_get(img, buf, NSMALL * foot);
        int bad = 0;
        for (int i = 0; i < NSMALL * 12; i++) bad += img[i] != (i % 3 == 2 ? -1 : i);
        MT_CHECK(bad == 0, "%d wrong ints in 10,000 small messages", bad);
    }
    if (mt_expect_gdte())
        MT_CHECK(held <= 16 << 20, "staging held after 10,000 small messages completed: %lld bytes (%lld while "
                 "outstanding)", (long long)held, (long long)held_peak);
    if (mt_rank == 0)
        printf("10,000 outstanding 32-byte device messages: staging held %lld bytes outstanding, %lld after\n",
               (long long)held_peak, (long long)held);
    free(q);
    free(img);
    mt_devmem_free(buf);
    MPI_Type_free(&v);
}

/* Queued on the legacy default stream, then sent or received at once, without synchronizing. */
static void default_stream_order(void)
{
    typedef int (*memset_async_t)(void *, int, size_t, void *);
    typedef int (*memcpy_async_t)(void *, const void *, size_t, int, void *);
    memset_async_t ms = NULL;
    memcpy_async_t mc = NULL;
    if (mt_cuda()) {
        ms = (memset_async_t)dlsym(RTLD_DEFAULT, "cudaMemsetAsync");
        mc = (memcpy_async_t)dlsym(RTLD_DEFAULT, "cudaMemcpyAsync");
        MT_CHECK(ms && mc, "cudaMemsetAsync/cudaMemcpyAsync not found");
        if (!ms || !mc) return;
    }
    const size_t n = 8u << 20, big = 256u << 20;
    int peer = 1 - mt_rank;
    MPI_Datatype vec; /* 8-byte blocks every 16 bytes: the receiver's rows copy */
    MPI_Type_vector((int)(n / 16), 2, 4, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    unsigned char *buf = mt_devmem_alloc(n), *src = mt_devmem_alloc(n), *busy = mt_cuda() ? mt_devmem_alloc(big) : NULL;
    unsigned char *img = malloc(n), *want = malloc(n);
    for (size_t i = 0; i < n; i++) want[i] = (unsigned char)(i * 13 + 7);
    int64_t recvs0 = mt_counter("node_recvs");
    for (int shape = 0; shape < 2; shape++) {
        int count = shape ? 1 : (int)n;
        MPI_Datatype dt = shape ? vec : MPI_BYTE;
        memset(img, 0x11, n);
        mt_put(buf, img, n); /* stale bytes: what a sender that did not wait would send */
        if (mt_rank == 0) mt_put(src, want, n);
        MPI_Barrier(MPI_COMM_WORLD);
        /* A few milliseconds of work on the default stream, then the last write of the buffer. */
        for (int k = 0; busy && k < 40; k++) ms(busy, k, big, NULL);
        if (mt_rank == 0) {
            if (mc) mc(buf, src, n, 3 /* cudaMemcpyDeviceToDevice */, NULL);
            else memcpy(buf, want, n);
            MT_MPI(MPI_Send(buf, count, dt, peer, 31, MPI_COMM_WORLD));
        } else {
            if (ms) ms(buf, 0x5A, n, NULL);
            else memset(buf, 0x5A, n);
            MT_MPI(MPI_Recv(buf, count, dt, peer, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            mt_get(img, buf, n);
            size_t bad = 0, first = n;
            for (size_t i = 0; i < n; i++) {
                unsigned char w = shape && (i % 16) >= 8 ? 0x5A : want[i];
                if (img[i] != w && bad++ == 0) first = i;
            }
            MT_CHECK(bad == 0, "%s message after queued default-stream work: %zu wrong bytes, first at %zu (0x%02x, "
                     "want 0x%02x)", shape ? "vector" : "contiguous", bad, first, bad ? img[first] : 0,
                     bad ? (shape && (first % 16) >= 8 ? 0x5A : want[first]) : 0);
        }
    }
    if (mt_rank == 1) {
        /* On a GPU with the node path on, both messages went GPU to GPU (the path under test). */
        const char *ipc = getenv("GDTE_MPI_IPC");
        int64_t got = mt_counter("node_recvs") - recvs0;
        if (mt_cuda() && !(ipc && !strcmp(ipc, "0")))
            MT_CHECK(got == 2, "default-stream order: %lld of 2 receives took the node path", (long long)got);
    }
    free(img);
    free(want);
    mt_devmem_free(busy);
    mt_devmem_free(src);
    mt_devmem_free(buf);
    MPI_Type_free(&vec);
}

static int handler_calls;
static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    handler_calls++;
}

static void mrecv_error_comm(void)
{
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(count_errors, &eh);
    MPI_Comm_set_errhandler(dup, eh);
    int peer = 1 - mt_rank, v[4] = {1, 2, 3, 4};
    if (mt_rank == 0) {
        MT_MPI(MPI_Send(v, 4, MPI_INT, peer, 3, dup));
    } else if (mt_rank == 1) {
        /* A device buffer of 4 ints and a type whose second block lies in host memory: gdte
         * refuses (host and device bytes in one buffer) before the MPI touches anything. (The
         * block was once 4 MiB past the buffer, which under compute-sanitizer's allocator is
         * another device allocation: the message was then taken, and lost.) */
        int *d = mt_devmem_alloc(4 * sizeof(int));
        int *h = calloc(4, sizeof(int));
        MPI_Datatype far;
        int fbl[2] = {2, 2};
        MPI_Aint fdp[2] = {0, (MPI_Aint)((uintptr_t)h - (uintptr_t)d)};
        MPI_Type_create_hindexed(2, fbl, fdp, MPI_INT, &far);
        MPI_Type_commit(&far);
        MPI_Message msg;
        MPI_Status st;
        MT_MPI(MPI_Mprobe(peer, 3, dup, &msg, &st));
        /* (Only with gdte: the MPI alone would write past the buffer.) */
        int rc = mt_expect_gdte() ? MPI_Mrecv(d, 1, far, &msg, &st) : MPI_ERR_OTHER;
        if (mt_expect_gdte()) {
            MT_CHECK(rc != MPI_SUCCESS, "Mrecv into a buffer half outside device memory succeeded");
            MT_CHECK(handler_calls == 1, "the message's communicator's handler ran %d times, want 1", handler_calls);
        }
        if (rc != MPI_SUCCESS) MT_MPI(MPI_Mrecv(v, 4, MPI_INT, &msg, &st)); /* the message is still there */
        MPI_Type_free(&far);
        mt_devmem_free(d);
        free(h);
    }
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&dup);
}

/* The same bytes through MPI_Pack/MPI_Unpack on host copies: what `rtype` must hold after
 * receiving `stype` from `sbuf` (footprint `n` bytes each). */
static void self_oracle(const void *hs, MPI_Datatype st, void *hr, MPI_Datatype rt)
{
    int sz = 0, pos = 0;
    MPI_Pack_size(1, st, MPI_COMM_WORLD, &sz);
    char *p = malloc((size_t)sz);
    MPI_Pack(hs, 1, st, p, sz, &pos, MPI_COMM_WORLD);
    pos = 0;
    MPI_Unpack(p, sz, &pos, hr, 1, rt, MPI_COMM_WORLD);
    free(p);
}

static void free_bufs(void *ds, void *dr, int *hs, int *hr, int *want, int *back)
{
    mt_devmem_free(ds);
    mt_devmem_free(dr);
    free(hs);
    free(hr);
    free(want);
    free(back);
}

static void self_messages(void)
{
    /* ints of footprint per buffer: the strided messages carry 128 KiB, past what the interposer
     * gives the copy engines alone on a GPU (64 KiB: xfer.c), so they take the node path. */
    enum { N = 65536 };
    MPI_Datatype types[3][2];
    int bl[64], dp[64];
    MPI_Type_vector(N / 4, 2, 4, MPI_INT, &types[0][0]);
    MPI_Type_vector(N / 8, 4, 8, MPI_INT, &types[0][1]);
    for (int i = 0; i < 64; i++) bl[i] = 1 + i % 7, dp[i] = i * 60 + (i * 13) % 17;
    MPI_Type_indexed(64, bl, dp, MPI_INT, &types[1][0]);
    int nidx = 0;
    for (int i = 0; i < 64; i++) nidx += bl[i];
    MPI_Type_contiguous(nidx, MPI_INT, &types[1][1]);
    MPI_Type_contiguous(N / 2, MPI_INT, &types[2][0]);
    MPI_Type_vector(N / 4, 2, 4, MPI_INT, &types[2][1]);
    size_t bytes = N * sizeof(int);
    int *hs = malloc(bytes), *hr = malloc(bytes), *want = malloc(bytes), *back = malloc(bytes);
    void *ds = mt_devmem_alloc(bytes), *dr = mt_devmem_alloc(bytes);
    int me = mt_rank;
    for (int t = 0; t < 3; t++) {
        MPI_Type_commit(&types[t][0]);
        MPI_Type_commit(&types[t][1]);
        int ssz = 0, rsz = 0;
        MPI_Type_size(types[t][0], &ssz);
        MPI_Type_size(types[t][1], &rsz);
        MT_CHECK(ssz == rsz, "self type pair %d: sizes %d and %d", t, ssz, rsz);
        for (int way = 0; way < 3; way++) {
            for (int i = 0; i < N; i++) hs[i] = 100000 * t + 1000 * way + i, hr[i] = -1;
            mt_put(ds, hs, bytes);
            mt_put(dr, hr, bytes);
            memcpy(want, hr, bytes);
            self_oracle(hs, types[t][0], want, types[t][1]);
            int64_t n0 = mt_counter("node_recvs");
            MPI_Request q[2];
            int rc = MPI_SUCCESS, tag = 70 + 3 * t + way;
            if (way == 0) {
                rc = MPI_Irecv(dr, 1, types[t][1], me, tag, MPI_COMM_WORLD, &q[0]);
                if (rc == MPI_SUCCESS) rc = MPI_Isend(ds, 1, types[t][0], me, tag, MPI_COMM_WORLD, &q[1]);
                if (rc == MPI_SUCCESS) rc = MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
            } else if (way == 1) {
                /* The send first, then a blocking receive. */
                rc = MPI_Isend(ds, 1, types[t][0], me, tag, MPI_COMM_WORLD, &q[1]);
                if (rc == MPI_SUCCESS) rc = MPI_Recv(dr, 1, types[t][1], me, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (rc == MPI_SUCCESS) rc = MPI_Wait(&q[1], MPI_STATUS_IGNORE);
            } else {
                rc = MPI_Sendrecv(ds, 1, types[t][0], me, tag, dr, 1, types[t][1], me, tag, MPI_COMM_WORLD,
                                  MPI_STATUS_IGNORE);
            }
            MT_CHECK(rc == MPI_SUCCESS, "self message, type pair %d, way %d: %d", t, way, rc);
            mt_get(back, dr, bytes);
            char what[80];
            snprintf(what, sizeof what, "self message, type pair %d, way %d", t, way);
            mt_same(back, want, bytes, what);
            const char *ipc = getenv("GDTE_MPI_IPC"); /* the node path off: MPI_PACKED twins */
            if (mt_expect_gdte() && !(ipc && !strcmp(ipc, "0")))
                MT_CHECK(mt_counter("node_recvs") > n0, "%s: not GPU to GPU (node_recvs %lld -> %lld)", what,
                         (long long)n0, (long long)mt_counter("node_recvs"));
        }
        MPI_Type_free(&types[t][0]);
        MPI_Type_free(&types[t][1]);
    }
    free_bufs(ds, dr, hs, hr, want, back);
}

/* Small device messages sent with a blocking MPI_Send before their receive is posted: to itself,
 * and send, send, receive, receive between two processes. Every MPI completes such sends from
 * host memory at once (eagerly); so must the interposer, whichever way it moves them (the copy
 * engines through host memory, or GPU to GPU as a packed copy to a peer on another GPU or under
 * MPS: GDTETEST_NODE_OTHER_GPU / GDTETEST_NODE_MPS). A contiguous and two strided types, against
 * MPI_Pack / MPI_Unpack on host copies. `nb`: each send an MPI_Isend waited for at once, then a
 * host message exchange of the pair before the receives (Open MPI completes these from host memory at once too); the
 * interposer reads such a send in place where it goes GPU to GPU, so the wait must end without
 * the receiver, which sits in a host message exchange of the pair (the sender detaches it: a
 * copy of its own). */
static void small_blocking(int peer, int nb)
{
    enum { N = 8192 };
    MPI_Datatype types[3];
    /* Under the MPI's eager limits, where a blocking send completes before its receive for host
     * buffers too: Open MPI's shared memory transport 4 KiB, its transport to itself 1 KiB with
     * the header (the node path's 248-byte marker is what goes to the MPI from 248 bytes on). */
    const int self = peer == mt_rank, k = self ? 4 : 1;
    MPI_Type_contiguous(256 / k, MPI_INT, &types[0]);    /* 1 KiB; 256 B to itself */
    MPI_Type_vector(256 / k, 2, 4, MPI_INT, &types[1]);  /* 2 KiB in 256 blocks; 512 B in 64 */
    MPI_Type_vector(16 / k, 24, 25, MPI_INT, &types[2]); /* 1.5 KiB in 16 blocks; 384 B in 4 */
    size_t bytes = N * sizeof(int);
    int *hs = malloc(bytes), *hr = malloc(bytes), *want = malloc(bytes), *back = malloc(bytes);
    void *ds = mt_devmem_alloc(bytes), *dr = mt_devmem_alloc(bytes);
    for (int t = 0; t < 3; t++) {
        MPI_Type_commit(&types[t]);
        for (int i = 0; i < N; i++) hs[i] = 7000000 + 10000 * t + i + 100 * mt_rank, hr[i] = -3;
        mt_put(ds, hs, bytes);
        mt_put(dr, hr, bytes);
        /* What arrives is the sender's: the peer's values (or this process's, to itself). */
        int *ps = malloc(bytes);
        for (int i = 0; i < N; i++) ps[i] = 7000000 + 10000 * t + i + 100 * (peer == mt_rank ? mt_rank : peer);
        memcpy(want, hr, bytes);
        self_oracle(ps, types[t], want, types[t]);
        free(ps);
        int tag = 90 + t + 20 * nb, rc = MPI_SUCCESS;
        const int64_t det0 = mt_counter("node_detached");
        for (int m = 0; m < 2 && rc == MPI_SUCCESS; m++) {
            MPI_Request q;
            if (!nb) rc = MPI_Send(ds, 1, types[t], peer, tag + 10 * m, MPI_COMM_WORLD);
            else if ((rc = MPI_Isend(ds, 1, types[t], peer, tag + 10 * m, MPI_COMM_WORLD, &q)) == MPI_SUCCESS)
                rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
        }
        if (nb && rc == MPI_SUCCESS && peer != mt_rank) {
            /* the barrier of the pair: host tokens */
            int a = mt_rank, b = -1;
            rc = MPI_Sendrecv(&a, 1, MPI_INT, peer, 999, &b, 1, MPI_INT, peer, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        if (rc == MPI_SUCCESS) rc = MPI_Recv(dr, 1, types[t], peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        char what[112];
        snprintf(what, sizeof what, "%s sends first to %s, type %d", nb ? "nonblocking (waited)" : "blocking",
                 peer == mt_rank ? "itself" : "the peer", t);
        MT_CHECK(rc == MPI_SUCCESS, "%s: %d", what, rc);
        /* Where such a message goes GPU to GPU (another GPU, or MPS: the test knobs make the fake
         * device's peers count as such), both sends went that way and completed without their
         * receiver: detached (a nonblocking one read in place is detached when its wait outlasts
         * the sender's patience; a blocking one is a packed copy, detached at once). */
        const char *mps = getenv("GDTETEST_NODE_MPS"), *og = getenv("GDTETEST_NODE_OTHER_GPU");
        if (nb && mt_expect_gdte() && ((mps && atoi(mps) > 0) || (og && atoi(og) > 0 && peer != mt_rank)))
            MT_CHECK(mt_counter("node_detached") >= det0 + 2, "%s: node_detached %lld -> %lld, want both sends detached",
                     what, (long long)det0, (long long)mt_counter("node_detached"));
        mt_get(back, dr, bytes);
        mt_same(back, want, bytes, what);
        mt_put(dr, hr, bytes);
        rc = MPI_Recv(dr, 1, types[t], peer, tag + 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MT_CHECK(rc == MPI_SUCCESS, "%s, second message: %d", what, rc);
        mt_get(back, dr, bytes);
        mt_same(back, want, bytes, what);
        MPI_Type_free(&types[t]);
    }
    free_bufs(ds, dr, hs, hr, want, back);
}

/* Persistent device sends in the standard, synchronous and ready modes of a strided type
 * larger than the node path's marker, to the peer (or to itself), each request started three
 * times with the data changed in between; received by a persistent receive of another layout
 * of the same signature, polled with MPI_Testall. The last round frees the send request while it
 * is active. Against MPI_Pack / MPI_Unpack on host copies. Where the node path is on, they go GPU
 * to GPU (node_sends). (A persistent buffered send is left out: Open MPI 4.1's own, on host
 * buffers without the interposer, delivered other bytes than the buffer's from the second start
 * on in this test.) */
static void persistent_modes(int peer)
{
    enum { N = 16384 };
    MPI_Datatype st, rt;
    MPI_Type_vector(N / 4, 2, 4, MPI_INT, &st); /* 32 KiB in 8-byte blocks */
    MPI_Type_vector(N / 8, 4, 8, MPI_INT, &rt); /* the same ints in 16-byte blocks */
    MPI_Type_commit(&st);
    MPI_Type_commit(&rt);
    size_t bytes = N * sizeof(int);
    int *hs = malloc(bytes), *hr = malloc(bytes), *want = malloc(bytes), *back = malloc(bytes);
    void *ds = mt_devmem_alloc(bytes), *dr = mt_devmem_alloc(bytes);
    const char *ipc = getenv("GDTE_MPI_IPC");
    /* the node path: on, and the peer on this node (GDTETEST_NODE_SPLIT makes it another) */
    const int node = mt_expect_gdte() && !(ipc && !strcmp(ipc, "0")) && (peer == mt_rank || !getenv("GDTETEST_NODE_SPLIT"));
    static const char *names[3] = {"Send_init", "Ssend_init", "Rsend_init"};
    for (int mode = 0; mode < 3; mode++) {
        MPI_Request q[2];
        int tag = 500 + mode, rc;
        rc = MPI_Recv_init(dr, 1, rt, peer, tag, MPI_COMM_WORLD, &q[1]);
        if (rc == MPI_SUCCESS) {
            if (mode == 0) rc = MPI_Send_init(ds, 1, st, peer, tag, MPI_COMM_WORLD, &q[0]);
            else if (mode == 1) rc = MPI_Ssend_init(ds, 1, st, peer, tag, MPI_COMM_WORLD, &q[0]);
            else rc = MPI_Rsend_init(ds, 1, st, peer, tag, MPI_COMM_WORLD, &q[0]);
        }
        MT_CHECK(rc == MPI_SUCCESS, "persistent %s to %s: init %d", names[mode], peer == mt_rank ? "itself" : "the peer", rc);
        if (rc != MPI_SUCCESS) continue;
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < N; i++) hs[i] = 9000000 + 100000 * mode + 1000 * round + i + 10 * mt_rank, hr[i] = -5;
            /* What arrives: the sender's values (the peer's, or this process's own). */
            int *ps = malloc(bytes);
            for (int i = 0; i < N; i++) ps[i] = 9000000 + 100000 * mode + 1000 * round + i + 10 * peer;
            memcpy(want, hr, bytes);
            self_oracle(ps, st, want, rt);
            free(ps);
            mt_put(ds, hs, bytes);
            mt_put(dr, hr, bytes);
            int64_t n0 = mt_counter("node_sends");
            rc = MPI_Start(&q[1]);
            if (rc == MPI_SUCCESS && mode == 2 && peer != mt_rank) {
                /* A ready send needs its receive posted first: a host token from the peer says so. */
                int a = 1, b = 0;
                rc = MPI_Sendrecv(&a, 1, MPI_INT, peer, 997, &b, 1, MPI_INT, peer, 997, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            if (rc == MPI_SUCCESS) rc = MPI_Start(&q[0]);
            char what[96];
            snprintf(what, sizeof what, "persistent %s to %s, round %d", names[mode], peer == mt_rank ? "itself" : "the peer",
                     round);
            if (rc == MPI_SUCCESS && round == 2) {
                /* Freed while active: the send still completes, the receive is waited for. */
                rc = MPI_Request_free(&q[0]);
                if (rc == MPI_SUCCESS) rc = MPI_Wait(&q[1], MPI_STATUS_IGNORE);
            } else if (rc == MPI_SUCCESS) {
                int flag = 0;
                while (rc == MPI_SUCCESS && !flag) rc = MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE);
            }
            MT_CHECK(rc == MPI_SUCCESS, "%s: %d", what, rc);
            if (node)
                MT_CHECK(mt_counter("node_sends") > n0, "%s: not GPU to GPU (node_sends %lld -> %lld)", what, (long long)n0,
                         (long long)mt_counter("node_sends"));
            mt_get(back, dr, bytes);
            mt_same(back, want, bytes, what);
        }
        MPI_Request_free(&q[1]);
        /* The freed send of the last round has completed before the pair goes on. */
        if (peer != mt_rank) {
            int a = 1, b = 0;
            MPI_Sendrecv(&a, 1, MPI_INT, peer, 996, &b, 1, MPI_INT, peer, 996, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_Type_free(&st);
    MPI_Type_free(&rt);
    free_bufs(ds, dr, hs, hr, want, back);
}

/* Persistent device sends to the peer, as outside programs use them: several started at once
 * (MPI_Startall) and received in the reverse order of their tags; one probed first with
 * wildcards (the status must state the message's size) and received from MPI_ANY_SOURCE; and one
 * received by a shorter receive (MPI_ERR_TRUNCATE for the receive, nothing written outside it,
 * the send completes). Two rounds each. The shorter receive is strided, so that gdte receives it
 * on every path: a dense one is handed to a GPU-aware MPI as it is, and Open MPI 4.1's shared
 * memory transport with its single-copy mechanism (CMA) writes a truncated contiguous message of
 * rendezvous size past the end of the receive buffer (host buffers, no interposer: 8 KiB past an
 * 8 KiB receive of a 16 KiB message; not with btl_vader_single_copy_mechanism=none). */
static void persistent_edges(int peer)
{
    enum { N = 8192, K = 3 };
    MPI_Datatype st;
    MPI_Type_vector(N / 4, 2, 4, MPI_INT, &st); /* 16 KiB of ints in 8-byte blocks */
    MPI_Type_commit(&st);
    const size_t bytes = N * sizeof(int), half = N / 4 * sizeof(int), pad = 256;
    int *hs = malloc(bytes), *want = malloc(bytes), *back = malloc(bytes);
    void *ds = mt_devmem_alloc(bytes), *dr = mt_devmem_alloc(K * half * 2 + 2 * pad);
    MPI_Request q[K];
    for (int k = 0; k < K; k++) MPI_Send_init(ds, 1, st, peer, 600 + k, MPI_COMM_WORLD, &q[k]);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) hs[i] = 31000000 + 10000 * round + i + 7 * mt_rank;
        mt_put(ds, hs, bytes);
        /* the ints a dense receive holds: every other pair of the peer's values */
        int *ps = malloc(bytes), *expect = malloc(half * 2);
        for (int i = 0; i < N; i++) ps[i] = 31000000 + 10000 * round + i + 7 * peer;
        for (int i = 0, j = 0; i < N; i += 4) expect[j++] = ps[i], expect[j++] = ps[i + 1];
        free(ps);
        unsigned char *img = malloc(K * half * 2 + 2 * pad);
        memset(img, 0x6B, K * half * 2 + 2 * pad);
        mt_put(dr, img, K * half * 2 + 2 * pad);
        int rc = MPI_Startall(K, q);
        MT_CHECK(rc == MPI_SUCCESS, "persistent edges, round %d: Startall %d", round, rc);
        char *base = (char *)dr + pad;
        /* tag 602 first, dense, a whole message */
        MPI_Status sts;
        rc = MPI_Recv(base, (int)(half * 2 / sizeof(int)), MPI_INT, peer, 602, MPI_COMM_WORLD, &sts);
        MT_CHECK(rc == MPI_SUCCESS, "round %d: receive of tag 602: %d", round, rc);
        /* tag 601: probed with wildcards, then received from MPI_ANY_SOURCE */
        int count = -1;
        rc = MPI_Probe(MPI_ANY_SOURCE, 601, MPI_COMM_WORLD, &sts);
        if (rc == MPI_SUCCESS) rc = MPI_Get_count(&sts, MPI_BYTE, &count);
        MT_CHECK(rc == MPI_SUCCESS && count == (int)(half * 2) && sts.MPI_SOURCE == peer,
                 "round %d: probe of tag 601: rc %d, %d bytes from %d (want %zu from %d)", round, rc, count,
                 sts.MPI_SOURCE, half * 2, peer);
        rc = MPI_Recv(base + half * 2, (int)(half * 2 / sizeof(int)), MPI_INT, MPI_ANY_SOURCE, 601, MPI_COMM_WORLD, &sts);
        MT_CHECK(rc == MPI_SUCCESS, "round %d: receive of tag 601: %d", round, rc);
        /* tag 600 into half the room, 2 ints of every 3: truncated */
        MPI_Datatype tr;
        MPI_Type_vector((int)(half / 8), 2, 3, MPI_INT, &tr);
        MPI_Type_commit(&tr);
        rc = MPI_Recv(base + half * 4, 1, tr, peer, 600, MPI_COMM_WORLD, &sts);
        MPI_Type_free(&tr);
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        MT_CHECK(cls == MPI_ERR_TRUNCATE, "round %d: truncated receive of tag 600: class %d, want MPI_ERR_TRUNCATE", round, cls);
        rc = MPI_Waitall(K, q, MPI_STATUSES_IGNORE);
        MT_CHECK(rc == MPI_SUCCESS, "round %d: Waitall of the persistent sends: %d", round, rc);
        unsigned char *got = malloc(K * half * 2 + 2 * pad);
        mt_get(got, dr, K * half * 2 + 2 * pad);
        memcpy(img + pad, expect, half * 2);
        memcpy(img + pad + half * 2, expect, half * 2);
        for (size_t j = 0; j < half / 8; j++) /* the truncated receive: its blocks only */
            memcpy(img + pad + half * 4 + j * 12, expect + 2 * j, 8);
        char what[64];
        snprintf(what, sizeof what, "persistent edges, round %d", round);
        mt_same(got, img, K * half * 2 + 2 * pad, what);
        free(got);
        free(img);
        free(expect);
    }
    for (int k = 0; k < K; k++) MPI_Request_free(&q[k]);
    MPI_Type_free(&st);
    mt_devmem_free(ds);
    mt_devmem_free(dr);
    free(hs);
    free(want);
    free(back);
}

/* A type whose blocks lie in two allocations, as relative displacements between two arrays
 * (MPI_Get_address differences) give: three blocks, in a (2B bytes), in b (B bytes), and in a's
 * second half, sent to `peer`, which receives the same structure over its own two allocations
 * (each with its own displacement), and then into one dense buffer. One runtime copy, or one IPC
 * mapping, covers one allocation: on a GPU the copy-engine path's 2-D copy across the two failed
 * with an invalid argument and the message was lost; the in-place read would map only a's. */
static void two_allocations(int peer)
{
    static const int sizes[] = {64, 4096, 65536, 1 << 20};
    for (int si = 0; si < 4; si++)
        for (int nblk = 2; nblk <= 3; nblk++) {
            const int B = sizes[si];
            char *sa = mt_devmem_alloc(2 * (size_t)B), *sb = mt_devmem_alloc((size_t)B);
            char *ra = mt_devmem_alloc(2 * (size_t)B), *rb = mt_devmem_alloc((size_t)B);
            char *rd = mt_devmem_alloc(3 * (size_t)B);
            unsigned char *ha = malloc(2 * (size_t)B), *hb = malloc((size_t)B), *got = malloc(3 * (size_t)B);
            unsigned char *wa = malloc(2 * (size_t)B), *wb = malloc((size_t)B), *wd = malloc(3 * (size_t)B);
            /* What this rank sends, and (seeded by the sender's rank) what it receives. */
            mt_fill(ha, 2 * (size_t)B, (unsigned)(1000 * si + 10 * nblk + mt_rank));
            mt_fill(hb, (size_t)B, (unsigned)(1000 * si + 10 * nblk + mt_rank + 500));
            mt_put(sa, ha, 2 * (size_t)B);
            mt_put(sb, hb, (size_t)B);
            mt_fill(wa, 2 * (size_t)B, (unsigned)(1000 * si + 10 * nblk + peer));
            mt_fill(wb, (size_t)B, (unsigned)(1000 * si + 10 * nblk + peer + 500));
            const int tail = B - 8; /* the third block: a's second half but its first 8 bytes */
            int bl[3] = {B, B, tail};
            MPI_Aint sd[3] = {0, (MPI_Aint)((uintptr_t)sb - (uintptr_t)sa), B + 8};
            MPI_Aint rdp[3] = {0, (MPI_Aint)((uintptr_t)rb - (uintptr_t)ra), B + 8};
            MPI_Datatype st, rt;
            MPI_Type_create_hindexed(nblk, bl, sd, MPI_BYTE, &st);
            MPI_Type_create_hindexed(nblk, bl, rdp, MPI_BYTE, &rt);
            MPI_Type_commit(&st);
            MPI_Type_commit(&rt);
            const size_t n = (size_t)B * 2 + (nblk == 3 ? (size_t)tail : 0);
            /* Expected: the peer's blocks at the same places, poison elsewhere; dense: in order. */
            unsigned char *ea = malloc(2 * (size_t)B);
            memset(ea, 0xA5, 2 * (size_t)B);
            memcpy(ea, wa, (size_t)B);
            if (nblk == 3) memcpy(ea + B + 8, wa + B + 8, (size_t)tail);
            memcpy(wd, wa, (size_t)B);
            memcpy(wd + B, wb, (size_t)B);
            if (nblk == 3) memcpy(wd + 2 * (size_t)B, wa + B + 8, (size_t)tail);
            for (int way = 0; way < 2; way++) {
                memset(got, 0xA5, 3 * (size_t)B);
                mt_put(ra, got, 2 * (size_t)B);
                mt_put(rb, got, (size_t)B);
                mt_put(rd, got, 3 * (size_t)B);
                MPI_Request q;
                int tag = 700 + 10 * si + 2 * nblk + way;
                const int64_t sends0 = mt_counter("node_sends"), split0 = mt_counter("node_split");
                MT_MPI(MPI_Isend(sa, 1, st, peer, tag, MPI_COMM_WORLD, &q));
                /* Posted by the node path: then as a packed copy (the receiver maps one allocation). */
                MT_CHECK(mt_counter("node_sends") == sends0 || mt_counter("node_split") > split0,
                         "two allocations, %d blocks of %d bytes: the node path read it in place", nblk, B);
                if (way == 0) MT_MPI(MPI_Recv(ra, 1, rt, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                else MT_MPI(MPI_Recv(rd, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
                char what[96];
                if (way == 0) {
                    mt_get(got, ra, 2 * (size_t)B);
                    snprintf(what, sizeof what, "two allocations, %d blocks of %d bytes, to %d: first", nblk, B, peer);
                    mt_same(got, ea, 2 * (size_t)B, what);
                    mt_get(got, rb, (size_t)B);
                    snprintf(what, sizeof what, "two allocations, %d blocks of %d bytes, to %d: second", nblk, B, peer);
                    mt_same(got, wb, (size_t)B, what);
                } else {
                    mt_get(got, rd, 3 * (size_t)B);
                    memset(wd + n, 0xA5, 3 * (size_t)B - n);
                    snprintf(what, sizeof what, "two allocations, %d blocks of %d bytes, to %d: dense", nblk, B, peer);
                    mt_same(got, wd, 3 * (size_t)B, what);
                }
            }
            MPI_Type_free(&st);
            MPI_Type_free(&rt);
            mt_devmem_free(sa);
            mt_devmem_free(sb);
            mt_devmem_free(ra);
            mt_devmem_free(rb);
            mt_devmem_free(rd);
            free(ha), free(hb), free(got), free(wa), free(wb), free(wd), free(ea);
        }
}

/* Faces of a 3-D grid of (n+2)^3 doubles (MPI_Type_create_subarray, C order), to `peer`, device
 * to device, device to host and host to device, into a poisoned grid, against MPI_Pack/MPI_Unpack
 * on host copies. The x face (8-byte blocks, a plane's rows n+2 doubles apart, planes (n+2)^2
 * apart) is a 2-level grid whose plane stride is a whole number of rows: up to 8192 blocks and 64
 * KiB the copy engines move it by one 3-D copy (xfer.c, shape 3), and where it goes as MPI_PACKED
 * (a peer on the same GPU without MPS, GDTE_MPI_IPC=0) copy_engine must count it on both sides.
 * The y and z faces are one stride; "skewed" is an x face whose planes lie 8 bytes further apart
 * than a whole number of rows, and n = 100 has 10000 blocks: both by the kernels. */
static void faces(int peer)
{
    static const int ns[] = {3, 16, 64, 90, 100};
    for (int ni = 0; ni < 5; ni++)
        for (int kind = 0; kind < 4; kind++) {
            const int n = ns[ni], m = n + 2;
            const size_t cells = (size_t)m * m * m, bytes = cells * sizeof(double);
            MPI_Datatype t;
            if (kind < 3) {
                int sizes[3] = {m, m, m}, sub[3] = {n, n, n}, start[3] = {1, 1, 1};
                sub[2 - kind] = 1; /* kind 0: x (fastest, C index 2), 1: y, 2: z */
                start[2 - kind] = n;
                MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE, &t);
            } else {
                MPI_Datatype col;
                MPI_Type_vector(n, 1, m, MPI_DOUBLE, &col);
                MPI_Type_create_hvector(n, 1, (MPI_Aint)((size_t)m * m * sizeof(double) + 8), col, &t);
                MPI_Type_free(&col);
            }
            MPI_Type_commit(&t);
            int tsize = 0;
            MPI_Type_size(t, &tsize);
            const size_t foot = kind < 3 ? bytes : bytes + (size_t)n * 8;
            double *hs = malloc(foot), *hr = malloc(foot), *want = malloc(foot), *got = malloc(foot);
            char *ds = mt_devmem_alloc(foot), *dr = mt_devmem_alloc(foot);
            mt_fill(hs, foot, (unsigned)(31 * ni + kind + 100 * mt_rank));
            mt_put(ds, hs, foot);
            const int ce = kind == 0 && n * n <= 8192 && tsize <= 65536;
            for (int way = 0; way < 3; way++) { /* 0 device to device, 1 device to host, 2 host to device */
                int tag = 900 + 20 * ni + 4 * kind + way;
                void *sb = way == 2 ? (void *)hs : (void *)ds, *rb = way == 1 ? (void *)hr : (void *)dr;
                memset(hr, 0xA5, foot);
                memset(want, 0xA5, foot);
                if (rb == dr) mt_put(dr, hr, foot);
                /* What the peer sends: its own grid, seeded by its rank. */
                double *ps = malloc(foot);
                mt_fill(ps, foot, (unsigned)(31 * ni + kind + 100 * peer));
                self_oracle(ps, t, want, t);
                free(ps);
                const int64_t ce0 = mt_counter("copy_engine"), ns0 = mt_counter("node_sends"),
                              nr0 = mt_counter("node_recvs"), fs0 = mt_counter("node_frag_sends"),
                              fr0 = mt_counter("node_frag_recvs");
                MPI_Request q;
                MT_MPI(MPI_Isend(sb, 1, t, peer, tag, MPI_COMM_WORLD, &q));
                const int sent_packed = mt_counter("node_sends") == ns0 && mt_counter("node_frag_sends") == fs0;
                const int64_t ce1 = mt_counter("copy_engine");
                MT_MPI(MPI_Recv(rb, 1, t, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                const int recv_packed = mt_counter("node_recvs") == nr0 && mt_counter("node_frag_recvs") == fr0;
                MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
                if (rb == dr) mt_get(got, dr, foot);
                else memcpy(got, hr, foot);
                char what[96];
                snprintf(what, sizeof what, "faces: n %d kind %d way %d to %d", n, kind, way, peer);
                mt_same(got, want, foot, what);
                /* (Over a GPU-aware MPI on the fake device the staging is device memory: the
                 * copy engines' rule needs a GPU.) */
                const char *ga = getenv("GDTE_MPI_GPU_AWARE");
                if (ce && mt_expect_gdte() && peer != mt_rank && !(mt_fake() && ga && !strcmp(ga, "1"))) {
                    if (sb == ds && sent_packed)
                        MT_CHECK(ce1 > ce0, "%s: a device x face sent as MPI_PACKED without the copy engines", what);
                    if (rb == dr && recv_packed)
                        MT_CHECK(mt_counter("copy_engine") > ce1,
                                 "%s: a device x face received as MPI_PACKED without the copy engines", what);
                }
            }
            MPI_Type_free(&t);
            mt_devmem_free(ds);
            mt_devmem_free(dr);
            free(hs), free(hr), free(want), free(got);
        }
}

/* Device buffers of another GPU than the one the calling thread has current (two GPUs or more;
 * the test does nothing on one): gdte's kernels run on the current GPU, so it enables peer
 * access (or, without a link, refuses with MPI_ERR_BUFFER); a kernel touching another GPU's
 * memory without it faulted and left the context unusable. Sent and received with a vector (a
 * kernel each side), an indexed type and a dense one, to `peer`, against MPI_Pack/MPI_Unpack on
 * host copies; and MPI_Pack from such a buffer. */
static void other_gpu_buffers(int peer)
{
    if (!mt_cuda() || mt_cuda_ndev < 2) return;
    int (*can_peer)(int *, int, int) = (int (*)(int *, int, int))dlsym(RTLD_DEFAULT, "cudaDeviceCanAccessPeer");
    const int other = (mt_cuda_dev + 1) % mt_cuda_ndev;
    int can = 0;
    MT_CHECK(can_peer && can_peer(&can, mt_cuda_dev, other) == 0, "cudaDeviceCanAccessPeer");
    enum { N = 1 << 16 }; /* ints of footprint */
    const size_t bytes = N * sizeof(int);
    MPI_Datatype types[3];
    int bl[48], dp[48];
    MPI_Type_vector(N / 4, 3, 4, MPI_INT, &types[0]);
    for (int i = 0; i < 48; i++) bl[i] = 1 + (i * 7) % 300, dp[i] = i * 1300 + (i * 31) % 97;
    MPI_Type_indexed(48, bl, dp, MPI_INT, &types[1]);
    MPI_Type_contiguous(N / 2, MPI_INT, &types[2]);
    mt_cuda_setdev(other);
    int *ds = mt_devmem_alloc(bytes), *dr = mt_devmem_alloc(bytes);
    mt_cuda_setdev(mt_cuda_dev);
    int *hs = malloc(bytes), *hr = malloc(bytes), *want = malloc(bytes), *back = malloc(bytes), *theirs = malloc(bytes);
    for (int t = 0; t < 3; t++) {
        MPI_Type_commit(&types[t]);
        for (int i = 0; i < N; i++) hs[i] = 1000000 * t + 10 * i + mt_rank, theirs[i] = 1000000 * t + 10 * i + peer,
                                    hr[i] = -7;
        mt_put(ds, hs, bytes);
        mt_put(dr, hr, bytes);
        memcpy(want, hr, bytes);
        self_oracle(theirs, types[t], want, types[t]);
        MPI_Request q;
        int rc = MPI_Isend(ds, 1, types[t], peer, 900 + t, MPI_COMM_WORLD, &q);
        if (rc == MPI_SUCCESS) {
            int rr = MPI_Recv(dr, 1, types[t], peer, 900 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            int rw = MPI_Wait(&q, MPI_STATUS_IGNORE);
            rc = rr != MPI_SUCCESS ? rr : rw;
        }
        char what[96];
        snprintf(what, sizeof what, "type %d between buffers of GPU %d, GPU %d current", t, other, mt_cuda_dev);
        if (!can) {
            int cls = -1;
            MPI_Error_class(rc, &cls);
            MT_CHECK(cls == MPI_ERR_BUFFER, "%s, no peer access: error class %d, want MPI_ERR_BUFFER", what, cls);
            continue;
        }
        MT_CHECK(rc == MPI_SUCCESS, "%s: %d", what, rc);
        mt_get(back, dr, bytes);
        mt_same(back, want, bytes, what);
        /* MPI_Pack from that GPU's memory into host memory: the bytes MPI_Pack gives on a host copy. */
        int sz = 0, pos = 0, hpos = 0;
        MPI_Pack_size(1, types[t], MPI_COMM_WORLD, &sz);
        char *p = malloc((size_t)sz), *hp = malloc((size_t)sz);
        MT_MPI(MPI_Pack(ds, 1, types[t], p, sz, &pos, MPI_COMM_WORLD));
        MPI_Pack(hs, 1, types[t], hp, sz, &hpos, MPI_COMM_WORLD);
        MT_CHECK(pos == hpos, "%s: MPI_Pack position %d, want %d", what, pos, hpos);
        snprintf(what, sizeof what, "MPI_Pack of type %d from GPU %d, GPU %d current", t, other, mt_cuda_dev);
        mt_same(p, hp, (size_t)sz, what);
        free(p);
        free(hp);
    }
    for (int t = 0; t < 3; t++) MPI_Type_free(&types[t]);
    mt_cuda_setdev(other);
    mt_devmem_free(ds);
    mt_devmem_free(dr);
    mt_cuda_setdev(mt_cuda_dev);
    free(hs), free(hr), free(want), free(back), free(theirs);
}

/* A device message matched by a progress pass of a call that returns to the application at once
 * (MPI_Test), then MPI_Barrier before the receive completes: the
 * sender's MPI_Wait must return, so the receiver answers before the call returns, or the two never
 * meet at the barrier (a pipelined pass once left the copy in flight and its sender unanswered
 * until a later gdte call that never came before the barrier). */
static void matched_then_barrier(int peer)
{
    enum { N = 1 << 18 }; /* ints: 1 MiB, the node path's batched copy */
    int *d = mt_devmem_alloc(N * sizeof(int)), *h = malloc(N * sizeof(int)), flag = 0;
    for (int i = 0; i < N; i++) h[i] = mt_rank == 0 ? 3 * i + 1 : -1;
    mt_put(d, h, N * sizeof(int));
    MPI_Request q;
    if (mt_rank == 0) {
        MT_MPI(MPI_Isend(d, N, MPI_INT, peer, 950, MPI_COMM_WORLD, &q));
        MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (mt_rank == 1) {
        MT_MPI(MPI_Irecv(d, N, MPI_INT, peer, 950, MPI_COMM_WORLD, &q));
        /* The marker is there by then (sent at once); no MPI call sees it before the MPI_Test,
         * whose progress pass matches it. */
        usleep(200000);
        MT_MPI(MPI_Test(&q, &flag, MPI_STATUS_IGNORE));
        MPI_Barrier(MPI_COMM_WORLD);
        if (!flag) MT_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
        mt_get(h, d, N * sizeof(int));
        int bad = 0;
        for (int i = 0; i < N; i++) bad += h[i] != 3 * i + 1;
        MT_CHECK(bad == 0, "matched, then MPI_Barrier: %d of %d ints wrong", bad, N);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    mt_devmem_free(d);
    free(h);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    /* --barrier-only: matched_then_barrier alone, registered with senders that never detach
     * (GDTETEST_NODE_DETACH_US), so that its sender waits for the receiver's answer. */
    if (argc > 1 && !strcmp(argv[1], "--barrier-only")) {
        if (mt_size >= 2) matched_then_barrier(1 - mt_rank);
        return mt_finish("regress_test --barrier-only");
    }
    if (mt_size >= 2 && mt_rank < 2) {
        small_blocking(1 - mt_rank, 0);
        small_blocking(1 - mt_rank, 1);
        persistent_modes(1 - mt_rank);
        persistent_edges(1 - mt_rank);
        truncation();
        mrecv_error_comm();
        many_small();
        default_stream_order();
        two_allocations(1 - mt_rank); /* after many_small, which bounds the staging held */
        faces(1 - mt_rank);
    }
    if (mt_size >= 2) matched_then_barrier(1 - mt_rank); /* every rank: it ends in MPI_Barrier */
    if (mt_size >= 2 && mt_rank < 2) {
        other_gpu_buffers(1 - mt_rank);
    }
    small_blocking(mt_rank, 0);
    small_blocking(mt_rank, 1);
    persistent_modes(mt_rank);
    two_allocations(mt_rank);
    faces(mt_rank);
    other_gpu_buffers(mt_rank);
    self_messages();
    return mt_finish("regress_test");
}
