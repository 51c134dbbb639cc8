/*
 * Soak: many messages of random derived datatypes between 2 ranks on (fake) device buffers
 * through the interposer, every one checked against MPI_Pack/MPI_Unpack on host copies, with
 * types created and freed all along. At the end: no request, type or staging byte held by
 * gdte, and resident memory flat between the first tenth of the run and the end.
 *   soak [messages (default 100000)] [max seconds (default 120)] [in flight (default 8)]
 * An ordinary MPI program: gdte is reached only through weak hooks of the preloaded library.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int gdte_fake_device_unregister(void *ptr) __attribute__((weak));
extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));

static int rank;

static void die(const char *m)
{
    fprintf(stderr, "soak[%d]: FAIL: %s\n", rank, m);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A random committed type (both ranks draw the same one from the same seed). */
static MPI_Datatype random_type(uint64_t *s)
{
    MPI_Datatype t, base[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR}, el = base[rng(s) % 3], tmp;
    int kind = (int)(rng(s) % 5);
    switch (kind) {
    case 0: { /* vector */
        int n = 1 + (int)(rng(s) % 64), bl = 1 + (int)(rng(s) % 8), st = bl + (int)(rng(s) % 9);
        MPI_Type_vector(n, bl, st, el, &t);
        break;
    }
    case 1: { /* indexed, increasing displacements */
        int n = 1 + (int)(rng(s) % 32), bl[32], d[32], at = 0;
        for (int i = 0; i < n; i++) {
            bl[i] = 1 + (int)(rng(s) % 6);
            d[i] = at + (int)(rng(s) % 5);
            at = d[i] + bl[i];
        }
        MPI_Type_indexed(n, bl, d, el, &t);
        break;
    }
    case 2: { /* struct with gaps, resized */
        int bl[3] = {1, 1, 3};
        MPI_Aint d[3] = {0, 8, 12};
        MPI_Datatype ty[3] = {MPI_DOUBLE, MPI_INT, MPI_FLOAT};
        MPI_Type_create_struct(3, bl, d, ty, &tmp);
        MPI_Type_create_resized(tmp, 0, 32 + 8 * (MPI_Aint)(rng(s) % 3), &t);
        MPI_Type_free(&tmp);
        break;
    }
    case 3: { /* face of a 3-D array */
        int sz[3] = {4 + (int)(rng(s) % 12), 4 + (int)(rng(s) % 12), 4 + (int)(rng(s) % 12)};
        int sub[3] = {sz[0], sz[1], sz[2]}, st[3] = {0, 0, 0}, ax = (int)(rng(s) % 3);
        sub[ax] = 1;
        st[ax] = (int)(rng(s) % (unsigned)sz[ax]);
        MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, el, &t);
        break;
    }
    default: { /* columns of a matrix, transposed */
        int m = 2 + (int)(rng(s) % 40);
        MPI_Type_vector(m, 1, m, el, &tmp);
        MPI_Datatype col;
        MPI_Aint lb, ext;
        MPI_Type_get_extent(el, &lb, &ext);
        MPI_Type_create_resized(tmp, 0, ext, &col);
        MPI_Type_contiguous(m, col, &t);
        MPI_Type_free(&tmp);
        MPI_Type_free(&col);
        break;
    }
    }
    MPI_Type_commit(&t);
    return t;
}

#define POOL 16
#define MAXW 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) die("run with 2 ranks");
    if (!gdte_fake_device_register || !gdte_mpi_counter) die("run under LD_PRELOAD=libgdte_mpi.so GDTE_FAKE_DEVICE=1");
    long total = argc > 1 ? atol(argv[1]) : 100000;
    double max_s = argc > 2 ? atof(argv[2]) : 120.0;
    int width = argc > 3 ? atoi(argv[3]) : 8;
    if (width < 1 || width > MAXW) die("in flight must be 1..64");
    int64_t types0 = gdte_mpi_counter("types_live");

    /* The type pool: both ranks build the same types; one is replaced every 64 rounds, so
     * gdte's import cache and plan cache churn all along. */
    uint64_t ts = 0x9e3779b97f4a7c15ull;
    MPI_Datatype pool[POOL];
    for (int i = 0; i < POOL; i++) pool[i] = random_type(&ts);

    const size_t cap = 1 << 18; /* bytes per buffer; a message's extent must fit */
    char *sbuf[MAXW], *rbuf[MAXW], *ref = malloc(cap), *pk = malloc(cap), *want = malloc(cap);
    for (int w = 0; w < width; w++) {
        sbuf[w] = malloc(cap);
        rbuf[w] = malloc(cap);
        if (!sbuf[w] || !rbuf[w] || gdte_fake_device_register(sbuf[w], cap) || gdte_fake_device_register(rbuf[w], cap))
            die("buffers");
    }
    long done = 0, rss_early = 0, rounds = 0;
    double t0 = MPI_Wtime();
    uint64_t ms = 12345;
    int stop = 0;
    while (!stop) {
        MPI_Request rq[2 * MAXW];
        MPI_Datatype ty[MAXW];
        int cnt[MAXW];
        uint64_t seed[MAXW];
        for (int w = 0; w < width; w++) {
            ty[w] = pool[rng(&ms) % POOL];
            MPI_Aint lb, ext, tlb, text;
            MPI_Type_get_extent(ty[w], &lb, &ext);
            MPI_Type_get_true_extent(ty[w], &tlb, &text);
            int maxc = (int)((cap - (size_t)text) / (size_t)(ext > 0 ? ext : 1)) + 1;
            cnt[w] = 1 + (int)(rng(&ms) % (unsigned)(maxc < 4 ? maxc : 4));
            seed[w] = rng(&ms) | 1;
            /* the message this rank sends: its bytes depend on (seed, rank) */
            uint64_t s = seed[w] ^ (uint64_t)(rank + 1);
            for (size_t i = 0; i < cap; i += 8) {
                uint64_t v = rng(&s);
                memcpy(sbuf[w] + i, &v, 8);
            }
            memset(rbuf[w], 0xEE, cap);
            MPI_Irecv(rbuf[w], cnt[w], ty[w], 1 - rank, w, MPI_COMM_WORLD, &rq[w]);
        }
        for (int w = 0; w < width; w++) MPI_Isend(sbuf[w], cnt[w], ty[w], 1 - rank, w, MPI_COMM_WORLD, &rq[width + w]);
        MPI_Status st[2 * MAXW];
        if (MPI_Waitall(2 * width, rq, st) != MPI_SUCCESS) die("Waitall");
        for (int w = 0; w < width; w++) {
            /* what the peer sent, rebuilt here, packed and unpacked by the MPI on host memory */
            uint64_t s = seed[w] ^ (uint64_t)(2 - rank);
            for (size_t i = 0; i < cap; i += 8) {
                uint64_t v = rng(&s);
                memcpy(ref + i, &v, 8);
            }
            int pos = 0, bytes;
            MPI_Pack(ref, cnt[w], ty[w], pk, (int)cap, &pos, MPI_COMM_WORLD);
            memset(want, 0xEE, cap);
            bytes = pos;
            pos = 0;
            MPI_Unpack(pk, bytes, &pos, want, cnt[w], ty[w], MPI_COMM_WORLD);
            if (memcmp(want, rbuf[w], cap)) die("received bytes differ from MPI_Pack/MPI_Unpack of the sent data");
            int c;
            MPI_Get_count(&st[w], ty[w], &c);
            if (c != cnt[w]) die("status count");
        }
        done += width;
        rounds++;
        if (rounds % 64 == 0) { /* churn: replace one pool type */
            int k = (int)(rng(&ts) % POOL);
            MPI_Type_free(&pool[k]);
            pool[k] = random_type(&ts);
        }
        if (!rss_early && done >= total / 10) rss_early = rss_kib();
        int local_stop = done >= total || MPI_Wtime() - t0 > max_s, any;
        MPI_Allreduce(&local_stop, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
        stop = any;
    }
    double secs = MPI_Wtime() - t0;
    long rss_end = rss_kib();
    for (int i = 0; i < POOL; i++) MPI_Type_free(&pool[i]);
    int64_t req = gdte_mpi_counter("requests_live"), types = gdte_mpi_counter("types_live"),
            inuse = gdte_mpi_counter("stage_bytes_in_use"), held = gdte_mpi_counter("stage_bytes_held");
    printf("soak[%d]: %ld messages verified in %.1f s; RSS %ld KiB after 10%%, %ld KiB at the end; "
           "live requests %lld, live gdte types %lld (start %lld), staging in use %lld B, held %lld B\n",
           rank, done, secs, rss_early, rss_end, (long long)req, (long long)types, (long long)types0, (long long)inuse,
           (long long)held);
    if (req != 0) die("requests left alive");
    if (inuse != 0) die("staging still in use");
    if (types > types0) die("gdte types leaked");
    if (rss_early && rss_end - rss_early > 16 * 1024) die("resident memory grew by more than 16 MiB");
    for (int w = 0; w < width; w++) {
        if (gdte_fake_device_unregister) {
            gdte_fake_device_unregister(sbuf[w]);
            gdte_fake_device_unregister(rbuf[w]);
        }
        free(sbuf[w]);
        free(rbuf[w]);
    }
    free(ref);
    free(pk);
    free(want);
    MPI_Finalize();
    return 0;
}
