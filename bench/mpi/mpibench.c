/*
 * mpibench: an OSU-style point-to-point benchmark of MPI derived datatypes on device (or host)
 * buffers, 2 ranks. A plain MPI program: it calls only MPI and the GPU runtime, so it runs the
 * same with gdte's interposer preloaded (LD_PRELOAD=libgdte_mpi.so), over a GPU-aware MPI
 * alone, or over both.
 *
 * Benchmarks, for each payload size and layout (the same type on both sides):
 *   latency  ping-pong with MPI_Send / MPI_Recv; one-way time = half the round trip (rank 0's
 *            clock), median over the timed iterations
 *   bw       a window of 64 MPI_Isend then MPI_Waitall; the receiver posts 64 MPI_Irecv, waits,
 *            then sends a 1-byte ack; median window time / 64 is the time per message
 * --persistent: the same with persistent requests, made once per layout and size (MPI_Send_init
 * / MPI_Recv_init): latency MPI_Start + MPI_Wait for each send and receive, bw MPI_Startall of
 * the window + MPI_Waitall (label such rows with --mpi-label).
 * Layouts (payload = the size in bytes, a multiple of 8):
 *   contig   size x MPI_BYTE
 *   vector   8 B blocks at a 16 B stride (OSU's -D vect:16:8): MPI_Type_vector(size/8, 1, 2,
 *            MPI_DOUBLE)
 *   indexed  64 blocks of doubles with deterministic pseudo-random lengths (1x..7x weights)
 *            summing to the payload, each followed by a gap of 1 + 0..3/4 of its length:
 *            MPI_Type_indexed over MPI_DOUBLE, lengths scaled to the size
 * Raw baseline (device memory only; rows with layout "raw", one per size and benchmark, measured
 * in the same run just before that size's layouts): the payload bytes moved between the two
 * processes' device buffers by CUDA IPC (handles exchanged once over MPI on host memory) with
 * one-byte MPI signals on host memory, as bench/pingpong's rawipc:
 *   latency  rank 0 signals; rank 1 copies `size` bytes from rank 0's buffer into its own and
 *            signals back; rank 0 copies from rank 1's; half the round trip
 *   bw       rank 0 signals; rank 1 makes 64 copies of `size` bytes from rank 0's buffer into
 *            its own and acks; window / 64
 * For vector and indexed the raw copy is the contiguous payload: the ideal.
 *
 * Verification: send buffers hold a pattern seeded by the rank, receive buffers are poisoned;
 * after the first iteration of each (benchmark, layout, size) every received payload byte must
 * equal the peer's and every gap byte (and GUARD bytes past the end) must still be poison; the
 * raw baseline's copies are checked the same way. A failure prints VERIFY FAILED and exits 1.
 *
 * Iterations: --iters timed (default 200) after --warmup (default 20), both capped from the
 * measured time of an iteration so that the warm-up takes at most --budget/2 s and the timed part
 * about --budget s (at least one iteration). A layout whose round trip exceeds --budget is not
 * run at larger sizes, and bw is skipped where 64 one-way latencies exceed 2 x --budget (both
 * printed). --rounds R (default 1): for each size the raw baseline and every layout are measured
 * in turn R times, each measurement with --budget / R; reported: the median time over the rounds
 * (each round's printed beside it) and, as ratio_to_raw, the median of the rounds' ratios, each
 * of a layout and the baseline measured seconds apart. A baseline measured once, before the
 * layouts, lets drift of the machine between the two land in the ratio (one H200's 4 MiB
 * windows move between ~4.3 and ~5.6 us a message from one second to the next, for the raw copy
 * and gdte alike).
 *
 * CSV (--csv, appended; header written when the file is empty):
 *   device,commit,gpus,mpi,benchmark,layout,bytes,median_us,gbps,ratio_to_raw
 * device: short GPU name ("H100") or "host"; commit: $GDTETEST_COMMIT, else the configured one;
 * gpus: distinct GPUs used by the two ranks (0 on host memory); mpi: --mpi-label; median_us:
 * per message (one-way for latency, window / 64 for bw); gbps: payload bytes / median_us;
 * ratio_to_raw: raw time / this time for the same benchmark and size (empty on host memory; with
 * --rounds, the median of the rounds' ratios).
 *
 * Memory: --mem device (cudaMalloc, CUDA builds; rank r uses GPU r % ngpus) or --mem host
 * (malloc, registered as fake device memory when libgdte_mpi.so is preloaded, so that with
 * GDTE_FAKE_DEVICE=1 the interposer's device path runs without a GPU).
 *
 * Usage: mpirun -np 2 [-x LD_PRELOAD=libgdte_mpi.so] mpibench [--mem device|host]
 *        [--sizes 1K,4K,...,16M] [--layouts contig,vector,indexed] [--benchmarks latency,bw]
 *        [--iters N] [--warmup N] [--window N] [--budget SECONDS] [--csv FILE]
 *        [--mpi-label plain|gpu-aware|...] [--no-raw] [--persistent] [--rounds R]
 */
#include <mpi.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpibench_mem.h"

#ifndef MPIBENCH_COMMIT
#define MPIBENCH_COMMIT "unknown"
#endif

extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));
/* Open MPI's runtime answer (mpi-ext.h, not included: the headers carried to the GPU machine
 * lack its subheaders); absent from other MPIs. */
extern int MPIX_Query_cuda_support(void) __attribute__((weak));

enum { L_CONTIG, L_VECTOR, L_INDEXED, L_COUNT };
static const char *layout_name[L_COUNT] = {"contig", "vector", "indexed"};
enum { B_LAT, B_BW, B_COUNT };
static const char *bench_name[B_COUNT] = {"latency", "bw"};

#define GUARD 256     /* bytes past a layout's span that must stay poison */
#define POISON 0xA5
#define MAX_SIZES 64
#define MAX_WINDOW 1024
enum { TAG_DATA = 100, TAG_ACK, TAG_SIG, TAG_SIG2 };

static int rank, device_mem;
static int opt_iters = 200, opt_warmup = 20, opt_window = 64, opt_raw = 1;
static double opt_budget = 0.5;
#define MAX_ROUNDS 16
static int opt_rounds = 1; /* --rounds: raw and layouts measured in turn this many times */
static int opt_persistent;
/* --persistent: the current measurement's requests (latency: [0] the send, [1] the receive). */
static MPI_Request preq[MAX_WINDOW + 2];
static int npreq;
static MPI_Comm comm;

/* Buffers: the layouts' (send, receive) and the raw baseline's (mine: exposed, dst: local). */
static unsigned char *sbuf, *rbuf, *raw_mine, *raw_dst, *raw_peer;
static size_t buf_bytes, raw_bytes;
static unsigned char *pat_own, *pat_peer, *host_got, *host_exp; /* host, buf_bytes each */

typedef struct {
    int kind;
    size_t bytes;      /* payload */
    size_t span;       /* payload bytes lie in [0, span) */
    MPI_Datatype type; /* messages are (buf, count, type) */
    int count;
    int nblk;          /* contig, indexed: explicit blocks in bytes; vector: implicit */
    size_t *off, *len;
} layout_t;

typedef struct {
    int bench, raw;
    const layout_t *L; /* NULL for raw */
    size_t bytes;
} meas_t;

/* ---- memory ------------------------------------------------------------------------------ */

static void *buf_alloc(size_t n) { return mbm_alloc(n, device_mem, "mpibench"); }
static void buf_free(void *p) { mbm_free(p, device_mem); }
static void put(void *dst, const void *src, size_t n) { mbm_copy(dst, src, n, device_mem); }
static void get(void *dst, const void *src, size_t n) { mbm_copy(dst, src, n, device_mem); }

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static void pattern(unsigned char *p, size_t n, int seed)
{
    uint64_t s = ((uint64_t)seed + 1) << 40;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = splitmix(s ^ (i / 8));
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

/* ---- layouts ----------------------------------------------------------------------------- */
static void layout_make(int kind, size_t bytes, layout_t *L)
{
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->bytes = bytes;
    size_t E = bytes / 8;
    if (kind == L_CONTIG) {
        L->type = MPI_BYTE;
        L->count = (int)bytes;
        L->span = bytes;
        L->nblk = 1;
        L->off = calloc(1, sizeof *L->off);
        L->len = malloc(sizeof *L->len);
        L->len[0] = bytes;
    } else if (kind == L_VECTOR) {
        MPI_Type_vector((int)E, 1, 2, MPI_DOUBLE, &L->type);
        MPI_Type_commit(&L->type);
        L->count = 1;
        L->span = 16 * E - 8;
    } else {
        int nb = E < 64 ? (int)E : 64;
        int *bl = malloc(nb * sizeof *bl), *dp = malloc(nb * sizeof *dp), w[64];
        uint64_t x = 0x243f6a8885a308d3ull ^ bytes, W = 0, sum = 0;
        for (int i = 0; i < nb; i++) {
            x = splitmix(x);
            w[i] = 1 + (int)(x % 7);
            W += (uint64_t)w[i];
        }
        for (int i = 0; i < nb; i++) {
            bl[i] = 1 + (int)((uint64_t)(E - (size_t)nb) * (uint64_t)w[i] / W);
            sum += (uint64_t)bl[i];
        }
        for (int i = 0; sum < E; i = (i + 1) % nb, sum++) bl[i]++; /* exact: fewer than nb left */
        int64_t d = 0;
        L->nblk = nb;
        L->off = malloc(nb * sizeof *L->off);
        L->len = malloc(nb * sizeof *L->len);
        for (int i = 0; i < nb; i++) {
            dp[i] = (int)d;
            L->off[i] = (size_t)d * 8;
            L->len[i] = (size_t)bl[i] * 8;
            x = splitmix(x);
            d += bl[i] + 1 + (int64_t)bl[i] * (int64_t)(x % 4) / 4;
        }
        L->span = L->off[nb - 1] + L->len[nb - 1];
        MPI_Type_indexed(nb, bl, dp, MPI_DOUBLE, &L->type);
        MPI_Type_commit(&L->type);
        L->count = 1;
        free(bl);
        free(dp);
    }
}
static void layout_free(layout_t *L)
{
    if (L->kind != L_CONTIG) MPI_Type_free(&L->type);
    free(L->off);
    free(L->len);
}
/* What a receive buffer of layout L must hold: the peer's bytes at payload positions, poison
 * elsewhere up to span + GUARD. */
static void expected(const layout_t *L, unsigned char *exp)
{
    memset(exp, POISON, L->span + GUARD);
    if (L->kind == L_VECTOR) {
        for (size_t o = 0; o < L->span; o += 16) memcpy(exp + o, pat_peer + o, 8);
    } else {
        for (int i = 0; i < L->nblk; i++) memcpy(exp + L->off[i], pat_peer + L->off[i], L->len[i]);
    }
}

/* ---- one iteration ----------------------------------------------------------------------- */
/* Rank 0's time of one round trip (latency) or one window (bw); 0 on rank 1. */
static double one_iter(const meas_t *m)
{
    char tok = 1;
    MPI_Request rq[MAX_WINDOW];
    int peer = 1 - rank, W = opt_window;
    double t0 = MPI_Wtime();
    if (!m->raw && npreq) {
        if (m->bench == B_LAT) {
            /* rank 0 sends first; rank 1 receives first */
            for (int k = 0; k < 2; k++) {
                MPI_Request *q = &preq[rank == 0 ? k : 1 - k];
                MPI_Start(q);
                MPI_Wait(q, MPI_STATUS_IGNORE);
            }
        } else {
            MPI_Startall(W, preq);
            MPI_Waitall(W, preq, MPI_STATUSES_IGNORE);
            if (rank == 0) MPI_Recv(&tok, 1, MPI_CHAR, peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
            else MPI_Send(&tok, 1, MPI_CHAR, peer, TAG_ACK, comm);
        }
    } else if (!m->raw) {
        const layout_t *L = m->L;
        if (m->bench == B_LAT) {
            if (rank == 0) {
                MPI_Send(sbuf, L->count, L->type, peer, TAG_DATA, comm);
                MPI_Recv(rbuf, L->count, L->type, peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf, L->count, L->type, peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, L->count, L->type, peer, TAG_DATA, comm);
            }
        } else if (rank == 0) {
            for (int w = 0; w < W; w++) MPI_Isend(sbuf, L->count, L->type, peer, TAG_DATA, comm, &rq[w]);
            MPI_Waitall(W, rq, MPI_STATUSES_IGNORE);
            MPI_Recv(&tok, 1, MPI_CHAR, peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < W; w++) MPI_Irecv(rbuf, L->count, L->type, peer, TAG_DATA, comm, &rq[w]);
            MPI_Waitall(W, rq, MPI_STATUSES_IGNORE);
            MPI_Send(&tok, 1, MPI_CHAR, peer, TAG_ACK, comm);
        }
    } else if (m->bench == B_LAT) {
        /* "My buffer is ready" one way, the peer pulls it and answers, then the reverse. */
        if (rank == 0) {
            MPI_Send(&tok, 1, MPI_CHAR, peer, TAG_SIG, comm);
            MPI_Recv(&tok, 1, MPI_CHAR, peer, TAG_SIG2, comm, MPI_STATUS_IGNORE);
            mb_copy_async(raw_dst, raw_peer, m->bytes);
            mb_sync();
        } else {
            MPI_Recv(&tok, 1, MPI_CHAR, peer, TAG_SIG, comm, MPI_STATUS_IGNORE);
            mb_copy_async(raw_dst, raw_peer, m->bytes);
            mb_sync();
            MPI_Send(&tok, 1, MPI_CHAR, peer, TAG_SIG2, comm);
        }
    } else {
        if (rank == 0) {
            MPI_Send(&tok, 1, MPI_CHAR, peer, TAG_SIG, comm);
            MPI_Recv(&tok, 1, MPI_CHAR, peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&tok, 1, MPI_CHAR, peer, TAG_SIG, comm, MPI_STATUS_IGNORE);
            for (int w = 0; w < W; w++) mb_copy_async(raw_dst, raw_peer, m->bytes);
            mb_sync();
            MPI_Send(&tok, 1, MPI_CHAR, peer, TAG_ACK, comm);
        }
    }
    return rank == 0 ? MPI_Wtime() - t0 : 0;
}

static void poison(const meas_t *m)
{
    size_t n = m->raw ? m->bytes + GUARD : m->L->span + GUARD;
    memset(host_exp, POISON, n);
    put(m->raw ? raw_dst : rbuf, host_exp, n);
}

/* 0 when this rank's receive buffer is what the first iteration must leave there. */
static int check(const meas_t *m)
{
    if (m->bench == B_BW && rank == 0) return 0; /* rank 0 only sends */
    size_t n = m->raw ? m->bytes + GUARD : m->L->span + GUARD;
    if (m->raw) {
        memset(host_exp, POISON, n);
        memcpy(host_exp, pat_peer, m->bytes);
    } else {
        expected(m->L, host_exp);
    }
    get(host_got, m->raw ? raw_dst : rbuf, n);
    if (!memcmp(host_got, host_exp, n)) return 0;
    size_t i = 0, nbad = 0;
    while (host_got[i] == host_exp[i]) i++;
    for (size_t k = i; k < n; k++) nbad += host_got[k] != host_exp[k];
    fprintf(stderr, "[%d] VERIFY FAILED: %s %s %zu B: %zu wrong bytes, first at offset %zu (got 0x%02x, want 0x%02x%s)\n",
            rank, bench_name[m->bench], m->raw ? "raw" : layout_name[m->L->kind], m->bytes, nbad, i, host_got[i],
            host_exp[i], host_exp[i] == POISON ? ", a gap or guard byte" : "");
    return 1;
}

static int cap(int want, double t_each, double budget, int least)
{
    if (t_each <= 0) return want;
    double k = budget / t_each;
    return k >= want ? want : k < least ? least : (int)k;
}
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Verify, warm up, time. *per_msg: the median time per message in seconds (both ranks).
 * Returns 1 when verification failed on either rank. */
static int measure_run(const meas_t *m, double *per_msg);
static int measure(const meas_t *m, double *per_msg)
{
    if (!opt_persistent || m->raw) return measure_run(m, per_msg);
    const layout_t *L = m->L;
    int peer = 1 - rank;
    if (m->bench == B_LAT) {
        MPI_Send_init(sbuf, L->count, L->type, peer, TAG_DATA, comm, &preq[0]);
        MPI_Recv_init(rbuf, L->count, L->type, peer, TAG_DATA, comm, &preq[1]);
        npreq = 2;
    } else {
        for (int w = 0; w < opt_window; w++) {
            if (rank == 0) MPI_Send_init(sbuf, L->count, L->type, peer, TAG_DATA, comm, &preq[w]);
            else MPI_Recv_init(rbuf, L->count, L->type, peer, TAG_DATA, comm, &preq[w]);
        }
        npreq = opt_window;
    }
    int bad = measure_run(m, per_msg);
    for (int i = 0; i < npreq; i++) MPI_Request_free(&preq[i]);
    npreq = 0;
    return bad;
}

static int measure_run(const meas_t *m, double *per_msg)
{
    poison(m);
    MPI_Barrier(comm);
    double tv = one_iter(m);
    int bad = check(m), anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, comm);
    if (anybad) return 1;
    const double budget = opt_budget / opt_rounds; /* each round gets its share */
    int n[2] = {cap(opt_warmup, tv, budget / 2, 0), 0};
    MPI_Bcast(n, 1, MPI_INT, 0, comm);
    double tw = tv;
    for (int i = 0; i < n[0]; i++) tw = one_iter(m);
    n[1] = cap(opt_iters, tw, budget, 1);
    MPI_Bcast(&n[1], 1, MPI_INT, 0, comm);
    double *t = malloc(n[1] * sizeof *t);
    MPI_Barrier(comm);
    for (int i = 0; i < n[1]; i++) t[i] = one_iter(m);
    qsort(t, n[1], sizeof *t, cmp_double);
    double med = n[1] % 2 ? t[n[1] / 2] : 0.5 * (t[n[1] / 2 - 1] + t[n[1] / 2]);
    free(t);
    med /= m->bench == B_LAT ? 2 : opt_window;
    MPI_Bcast(&med, 1, MPI_DOUBLE, 0, comm);
    *per_msg = med;
    return 0;
}

/* ---- output ------------------------------------------------------------------------------ */
static FILE *csv;
static const char *device = "host", *commit = MPIBENCH_COMMIT, *mpi_label = "plain";
static int gpus;

/* The median of n values (copied: the rounds keep their order). */
static double median_of(const double *v, int n)
{
    double c[MAX_ROUNDS];
    memcpy(c, v, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    return n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
}

/* One result: `t` the median over the rounds, `rounds` each round's (printed, not in the CSV,
 * when there are several); `raws` the raw baseline's rounds (NULL: none). The ratio is the median
 * of the rounds' ratios, each of a layout and the baseline measured next to each other. */
static void row(int bench, const char *layout, size_t bytes, double t, const double *raws, const double *rounds)
{
    if (rank != 0) return;
    double gbps = t > 0 ? (double)bytes / t / 1e9 : 0;
    char ratio[32] = "";
    if (raws && t > 0) {
        double q[MAX_ROUNDS];
        for (int r = 0; r < opt_rounds; r++) q[r] = rounds[r] > 0 ? raws[r] / rounds[r] : 0;
        snprintf(ratio, sizeof ratio, "%.3f", median_of(q, opt_rounds));
    }
    if (csv) {
        fprintf(csv, "%s,%s,%d,%s,%s,%s,%zu,%.2f,%.3f,%s\n", device, commit, gpus, mpi_label, bench_name[bench], layout,
                bytes, t * 1e6, gbps, ratio);
        fflush(csv);
    }
    printf("%-20s %-8s %-8s %10zu %12.2f %10.3f %8s", mpi_label, bench_name[bench], layout, bytes, t * 1e6, gbps,
           ratio);
    if (opt_rounds > 1) {
        printf("   rounds:");
        for (int r = 0; r < opt_rounds; r++) printf(" %.2f", rounds[r] * 1e6);
    }
    printf("\n");
    fflush(stdout);
}
static void note(const char *what, size_t bytes, const char *why)
{
    if (rank == 0) printf("%-20s %-17s %10zu  skipped: %s\n", mpi_label, what, bytes, why);
}

/* ---- options ----------------------------------------------------------------------------- */
static size_t parse_size(const char *s, int *ok)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    else if (*end == 'G' || *end == 'g') v <<= 30, end++;
    if (*end && *end != ',') *ok = 0;
    return (size_t)v;
}
static int parse_sizes(const char *s, size_t *out, int *ok)
{
    int n = 0;
    while (s && *s && n < MAX_SIZES) {
        out[n++] = parse_size(s, ok);
        s = strchr(s, ',');
        if (s) s++;
    }
    return n;
}
/* Which of `names` appear in the comma-separated `list`; 0 when an unknown one does. */
static int parse_set(const char *list, const char *const *names, int n, int *use)
{
    for (int i = 0; i < n; i++) use[i] = 0;
    char *copy = strdup(list), *save = NULL;
    int ok = 1;
    for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < n; i++)
            if (!strcmp(w, names[i])) use[i] = found = 1;
        ok &= found;
    }
    free(copy);
    return ok;
}
static const char *env_rank(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return getenv(vars[i]);
    return NULL;
}

int main(int argc, char **argv)
{
#ifdef MPIBENCH_CUDA
    device_mem = 1;
#endif
    size_t sizes[MAX_SIZES] = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
    int nsizes = 8, use_l[L_COUNT] = {1, 1, 1}, use_b[B_COUNT] = {1, 1}, ok = 1;
    const char *csv_path = NULL;
    char bad_opt[256] = "";
    static const struct option lopts[] = {
        {"mem", required_argument, 0, 'm'},       {"sizes", required_argument, 0, 's'},
        {"layouts", required_argument, 0, 'l'},   {"benchmarks", required_argument, 0, 'b'},
        {"iters", required_argument, 0, 'i'},     {"warmup", required_argument, 0, 'w'},
        {"window", required_argument, 0, 'W'},    {"budget", required_argument, 0, 'B'},
        {"csv", required_argument, 0, 'c'},       {"mpi-label", required_argument, 0, 'L'},
        {"no-raw", no_argument, 0, 'n'},          {"help", no_argument, 0, 'h'},
        {"persistent", no_argument, 0, 'P'},     {"rounds", required_argument, 0, 'R'},
        {0, 0, 0, 0}};
    opterr = 0;
    for (int c; ok && (c = getopt_long(argc, argv, "", lopts, NULL)) != -1;) {
        switch (c) {
        case 'm':
            if (!strcmp(optarg, "device")) device_mem = 1;
            else if (!strcmp(optarg, "host")) device_mem = 0;
            else ok = 0;
            break;
        case 's': nsizes = parse_sizes(optarg, sizes, &ok); break;
        case 'l': ok = parse_set(optarg, layout_name, L_COUNT, use_l); break;
        case 'b': ok = parse_set(optarg, bench_name, B_COUNT, use_b); break;
        case 'i': opt_iters = atoi(optarg); break;
        case 'w': opt_warmup = atoi(optarg); break;
        case 'W': opt_window = atoi(optarg); break;
        case 'B': opt_budget = atof(optarg); break;
        case 'c': csv_path = optarg; break;
        case 'L': mpi_label = optarg; break;
        case 'n': opt_raw = 0; break;
        case 'P': opt_persistent = 1; break;
        case 'R': opt_rounds = atoi(optarg); break;
        default: ok = 0;
        }
        if (!ok) snprintf(bad_opt, sizeof bad_opt, "%s", argv[optind - 1]);
    }
    if (ok && optind < argc) ok = 0, snprintf(bad_opt, sizeof bad_opt, "%s", argv[optind]);
    for (int i = 0; ok && i < nsizes; i++)
        if (sizes[i] < 8 || sizes[i] % 8 || sizes[i] > ((size_t)1 << 30))
            ok = 0, snprintf(bad_opt, sizeof bad_opt, "size %zu (a multiple of 8 in 8..1G)", sizes[i]);
    if (ok && (opt_window < 1 || opt_window > MAX_WINDOW || opt_budget <= 0 || nsizes < 1 || opt_rounds < 1 ||
               opt_rounds > MAX_ROUNDS))
        ok = 0, snprintf(bad_opt, sizeof bad_opt, "--window 1..%d, --budget > 0, --rounds 1..%d, --sizes", MAX_WINDOW,
                         MAX_ROUNDS);
    if (opt_iters < 1) opt_iters = 1;
    if (opt_warmup < 0) opt_warmup = 0;

    /* The GPU first, as a GPU-aware MPI wants it chosen before MPI_Init: rank r on GPU r % n. */
    int dev = -1, pre = -1;
    if (ok && device_mem && env_rank()) dev = mb_init(pre = atoi(env_rank()));
    MPI_Init(&argc, &argv);
    comm = MPI_COMM_WORLD;
    int nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    if (!ok || nranks != 2) {
        if (rank == 0) {
            if (!ok) fprintf(stderr, "mpibench: bad option or value: %s\n", bad_opt);
            else fprintf(stderr, "mpibench runs on exactly 2 ranks\n");
            fprintf(stderr, "usage: mpirun -np 2 mpibench [--mem device|host] [--sizes 1K,4K,...] "
                            "[--layouts contig,vector,indexed] [--benchmarks latency,bw] [--iters N] [--warmup N] "
                            "[--window N] [--budget S] [--csv FILE] [--mpi-label L] [--no-raw] [--persistent] [--rounds R]\n");
        }
        MPI_Finalize();
        return 2;
    }
    if (device_mem && pre != rank) dev = mb_init(rank);
    int alldev[2];
    MPI_Allgather(&dev, 1, MPI_INT, alldev, 1, MPI_INT, comm);
    if (device_mem && (alldev[0] < 0 || alldev[1] < 0)) {
        if (rank == 0) fprintf(stderr, "mpibench: --mem device needs a GPU on both ranks: skipped\n");
        MPI_Finalize();
        return 77;
    }
    int gdte_on = gdte_mpi_counter && gdte_mpi_counter("active") == 1;
    const char *cuda_aware = !MPIX_Query_cuda_support ? "unknown" : MPIX_Query_cuda_support() ? "yes" : "no";
    if (device_mem && !gdte_on && !strcmp(cuda_aware, "no")) {
        if (rank == 0)
            fprintf(stderr, "mpibench: device buffers need gdte's interposer (LD_PRELOAD=libgdte_mpi.so) or a "
                            "CUDA-aware MPI; this MPI is not CUDA-aware\n");
        MPI_Finalize();
        return 2;
    }
    if (device_mem) {
        char keys[2][64] = {{0}}, mine[64] = {0};
        snprintf(mine, sizeof mine, "%s", mb_device_key());
        MPI_Allgather(mine, 64, MPI_CHAR, keys, 64, MPI_CHAR, comm);
        gpus = strcmp(keys[0], keys[1]) ? 2 : 1;
        device = mb_device_name();
    }
    if (getenv("GDTETEST_COMMIT") && *getenv("GDTETEST_COMMIT")) commit = getenv("GDTETEST_COMMIT");
    opt_raw &= device_mem;

    /* Buffers, once, at the largest size: a layout's span is below 2 x payload + 64 doubles. */
    size_t maxb = 0;
    for (int i = 0; i < nsizes; i++) maxb = sizes[i] > maxb ? sizes[i] : maxb;
    buf_bytes = 2 * maxb + 64 * 8 + GUARD;
    raw_bytes = maxb + GUARD;
    pat_own = malloc(buf_bytes);
    pat_peer = malloc(buf_bytes);
    host_got = malloc(buf_bytes);
    host_exp = malloc(buf_bytes);
    if (!pat_own || !pat_peer || !host_got || !host_exp) {
        fprintf(stderr, "[%d] mpibench: out of host memory\n", rank);
        MPI_Abort(comm, 2);
    }
    pattern(pat_own, buf_bytes, rank);
    pattern(pat_peer, buf_bytes, 1 - rank);
    sbuf = buf_alloc(buf_bytes);
    rbuf = buf_alloc(buf_bytes);
    put(sbuf, pat_own, buf_bytes);
    if (opt_raw) {
        /* Each rank exposes raw_mine (its pattern) and pulls the peer's into raw_dst. */
        raw_mine = mb_alloc(raw_bytes);
        raw_dst = mb_alloc(raw_bytes);
        mb_memcpy(raw_mine, pat_own, raw_bytes);
        /* Whole MB_IPC_HANDLE_MAX slots go over the wire, so that rank r's handle lands at h[r]
         * (with the handle's own size, 64 bytes, rank 1's landed at h[0] + 64 and rank 0 opened
         * the uninitialized h[1]: cudaIpcOpenMemHandle said "invalid argument"). */
        unsigned char h[2][MB_IPC_HANDLE_MAX], mine[MB_IPC_HANDLE_MAX] = {0};
        int got = mb_ipc_handle_size() <= MB_IPC_HANDLE_MAX && mb_ipc_get(raw_mine, mine) == 0, both = 0;
        MPI_Allgather(mine, MB_IPC_HANDLE_MAX, MPI_BYTE, h, MB_IPC_HANDLE_MAX, MPI_BYTE, comm);
        if (got) raw_peer = mb_ipc_open(h[1 - rank]);
        got = got && raw_peer;
        MPI_Allreduce(&got, &both, 1, MPI_INT, MPI_MIN, comm);
        if (!both) {
            if (rank == 0) fprintf(stderr, "mpibench: CUDA IPC unavailable: no raw baseline\n");
            opt_raw = 0;
        }
    }

    if (rank == 0 && csv_path) {
        csv = fopen(csv_path, "a+");
        if (!csv) {
            perror(csv_path);
            MPI_Abort(comm, 2);
        }
        fseek(csv, 0, SEEK_END);
        if (ftell(csv) == 0) fprintf(csv, "device,commit,gpus,mpi,benchmark,layout,bytes,median_us,gbps,ratio_to_raw\n");
    }
    if (rank == 0) {
        printf("mpibench: %s, %d GPU(s), %s memory, mpi=%s, gdte interposer: %s, MPI CUDA support: %s, commit %s\n",
               device, gpus, device_mem ? "device" : "host", mpi_label, gdte_on ? "active" : "absent", cuda_aware,
               commit);
        printf("  iters %d, warmup %d, window %d, budget %.2f s per measurement, raw baseline %s, CSV %s\n", opt_iters,
               opt_warmup, opt_window, opt_budget, opt_raw ? "CUDA IPC" : "none", csv_path ? csv_path : "-");
        printf("%-20s %-8s %-8s %10s %12s %10s %8s\n", "mpi", "bench", "layout", "bytes", "median_us", "GB/s",
               "x_raw");
    }

    int failed = 0, stop[L_COUNT] = {0};
    for (int s = 0; s < nsizes && !failed; s++) {
        size_t bytes = sizes[s];
        /* Per round: the raw baseline, then every layout; reported: the median over rounds. */
        double traw[B_COUNT][MAX_ROUNDS] = {{0}}, t[L_COUNT][B_COUNT][MAX_ROUNDS] = {{{0}}}, lat[L_COUNT] = {0};
        int have[L_COUNT][B_COUNT] = {{0}};
        layout_t L[L_COUNT];
        for (int l = 0; l < L_COUNT; l++)
            if (use_l[l]) layout_make(l, bytes, &L[l]);
        for (int r = 0; r < opt_rounds && !failed; r++) {
            for (int b = 0; b < B_COUNT && opt_raw && !failed; b++) {
                if (!use_b[b]) continue;
                meas_t m = {b, 1, NULL, bytes};
                failed = measure(&m, &traw[b][r]);
            }
            for (int l = 0; l < L_COUNT && !failed; l++) {
                if (!use_l[l]) continue;
                if (stop[l]) {
                    if (r == 0) note(layout_name[l], bytes, "a smaller size's round trip exceeded --budget");
                    continue;
                }
                for (int b = 0; b < B_COUNT && !failed; b++) {
                    if (!use_b[b]) continue;
                    if (b == B_BW && lat[l] * opt_window > 2 * opt_budget) {
                        char why[96];
                        snprintf(why, sizeof why, "bw window would take ~%.1f s (> 2 x --budget)", lat[l] * opt_window);
                        if (r == 0) note(layout_name[l], bytes, why);
                        continue;
                    }
                    meas_t m = {b, 0, &L[l], bytes};
                    failed = measure(&m, &t[l][b][r]);
                    if (failed) {
                        if (rank == 0)
                            fprintf(stderr, "VERIFY FAILED: %s %s %zu B (mpi=%s)\n", bench_name[b], layout_name[l],
                                    bytes, mpi_label);
                        break;
                    }
                    if (b == B_LAT && r == 0) lat[l] = t[l][b][r];
                    have[l][b] = 1;
                }
            }
        }
        for (int b = 0; b < B_COUNT && opt_raw && !failed; b++)
            if (use_b[b]) row(b, "raw", bytes, median_of(traw[b], opt_rounds), traw[b], traw[b]);
        for (int l = 0; l < L_COUNT; l++) {
            if (!use_l[l]) continue;
            for (int b = 0; b < B_COUNT && !failed; b++)
                if (have[l][b])
                    row(b, layout_name[l], bytes, median_of(t[l][b], opt_rounds), opt_raw ? traw[b] : NULL, t[l][b]);
            if (lat[l] * 2 > opt_budget) stop[l] = 1;
            layout_free(&L[l]);
        }
    }

    if (rank == 0 && gdte_mpi_counter)
        printf("gdte: %lld device sends, %lld device receives, %lld fragments\n",
               (long long)(gdte_mpi_counter("sends") + gdte_mpi_counter("node_sends")),
               (long long)(gdte_mpi_counter("recvs") + gdte_mpi_counter("node_recvs")),
               (long long)gdte_mpi_counter("fragments"));
    if (rank == 0 && gdte_mpi_counter && gdte_mpi_counter("node_sends") > 0)
        printf("gdte node path: %lld sends, %lld of them detached by the sender, %lld small ones to a peer on "
               "another GPU, %lld to one on this GPU under MPS\n",
               (long long)gdte_mpi_counter("node_sends"), (long long)gdte_mpi_counter("node_detached"),
               (long long)gdte_mpi_counter("node_other_gpu"), (long long)gdte_mpi_counter("node_mps"));
    if (csv) fclose(csv);
    /* The peer has unmapped our buffer before we free it. Both ranks or neither reach the
     * barrier: raw_mine exists on both when the baseline was tried, raw_peer only where the
     * mapping opened, which may be one rank. */
    if (raw_peer) mb_ipc_close(raw_peer);
    if (raw_mine) MPI_Barrier(comm);
    if (raw_mine) mb_free(raw_mine);
    if (raw_dst) mb_free(raw_dst);
    buf_free(sbuf);
    buf_free(rbuf);
    free(pat_own);
    free(pat_peer);
    free(host_got);
    free(host_exp);
    MPI_Finalize();
    return failed ? 1 : 0;
}
