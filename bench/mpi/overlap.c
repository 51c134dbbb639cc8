/*
 * overlap: how much of a nonblocking device send an application hides behind its own work (the
 * measure of OSU's overlap benchmarks), issue 13 item 3. 2 ranks, one message rank 0 -> rank 1
 * per iteration, the receive posted before the send; timed on rank 0:
 *
 *   pure     t0  MPI_Isend                       MPI_Wait  MPI_Recv(ack)   -> t_pure, and t_call
 *                                                                             (MPI_Isend alone)
 *   overlap  t0  MPI_Isend  compute(t_pure)      MPI_Wait  MPI_Recv(ack)   -> t_total
 *   tested   t0  MPI_Isend  compute(t_pure) with MPI_Test every --slice us,
 *                                                MPI_Wait  MPI_Recv(ack)   -> t_tested
 *   rank 1:  MPI_Irecv before the iteration's barrier; MPI_Wait; MPI_Send(ack)
 *
 * compute() spins on the host clock without MPI calls (overlap) or calls MPI_Test on the send
 * every slice (tested: an application that polls). overlap_pct = 100 * (t_pure + t_compute -
 * t_total) / t_pure, clamped to [0, 100]: 100 means the message cost nothing beyond the compute.
 * Medians over --iters iterations after --warmup. The first iteration's message is verified on
 * rank 1 against the pattern the sender wrote (every payload byte, and the gaps of a vector still
 * poison); a failure prints VERIFY FAILED and exits 1.
 *
 * Layouts: contig (MPI_BYTE), vector (8-byte blocks at a 16-byte stride, as OSU's vect:16:8).
 * Run with GDTETEST_NODE_SPLIT=1 under libgdte_mpi.so to take the path of messages to another
 * node (a marker, then fragments through pinned host staging), else the node path within a node.
 *
 * CSV (--csv, appended; header written when the file is empty; commit: $GDTETEST_COMMIT, else the
 * configured one):
 *   device,commit,mpi,layout,bytes,isend_us,pure_us,overlap_pct,tested_pct,async_sends
 * async_sends: the interposer's node_frag_async counter per message (1.0: every MPI_Isend
 * returned before its message was packed), empty without the interposer.
 *
 * Usage: mpirun -np 2 -x LD_PRELOAD=libgdte_mpi.so overlap [--mem device|host]
 *        [--sizes 64K,1M,4M,16M] [--layouts contig,vector] [--iters 30] [--warmup 5]
 *        [--slice 20] [--mpi-label L] [--csv FILE] [--thread-multiple]
 *
 * --thread-multiple initialises MPI with MPI_THREAD_MULTIPLE, where the interposer posts the
 * fragments of messages to another node from a thread of its own as they land
 * (GDTE_MPI_PROGRESS_THREAD); the run then fails (PROGRESS THREAD POSTED NOTHING) if that thread
 * posted none.
 */
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpibench_mem.h"
#include "../common/bench_stats.h"

#ifndef OVERLAP_COMMIT
#define OVERLAP_COMMIT "unknown"
#endif

extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));

enum { L_CONTIG, L_VECTOR, L_COUNT };
static const char *layout_name[L_COUNT] = {"contig", "vector"};
#define POISON 0xA5
#define MAX_SIZES 32
#define MAX_ITERS 1000
enum { TAG_DATA = 300, TAG_ACK };

static int rank, device_mem;
static int opt_iters = 30, opt_warmup = 5;
static double opt_slice_us = 20;

static void *buf_alloc(size_t n) { return mbm_alloc(n, device_mem, "overlap"); }
static void buf_free(void *p) { mbm_free(p, device_mem); }
static void copy(void *dst, const void *src, size_t n) { mbm_copy(dst, src, n, device_mem); }

static double now_us(void) { return MPI_Wtime() * 1e6; }

/* Spin for `us` on the host clock; with `req`, MPI_Test it every opt_slice_us (once complete,
 * the rest is spun without MPI calls). */
static void compute(double us, MPI_Request *req)
{
    double t0 = now_us(), next = t0 + opt_slice_us;
    int done = 0;
    for (double t = t0; t - t0 < us; t = now_us()) {
        if (req && !done && t >= next) {
            MPI_Test(req, &done, MPI_STATUS_IGNORE);
            next = t + opt_slice_us;
        }
    }
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'K' || *end == 'k') v *= 1024;
    else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
    return (size_t)v;
}

/* The message: `payload` bytes in the layout; span: the buffer it covers. */
typedef struct {
    int kind;
    size_t payload, span;
    MPI_Datatype type;
    int count;
} msg_t;

static void msg_make(int kind, size_t payload, msg_t *m)
{
    m->kind = kind;
    m->payload = payload;
    if (kind == L_CONTIG) {
        m->span = payload;
        MPI_Type_dup(MPI_BYTE, &m->type);
        m->count = (int)payload;
    } else {
        size_t blocks = payload / 8;
        m->payload = blocks * 8;
        m->span = blocks * 16;
        MPI_Type_vector((int)blocks, 8, 16, MPI_BYTE, &m->type);
        m->count = 1;
    }
    MPI_Type_commit(&m->type);
}

/* 1 when rank 1's received buffer holds the pattern at the payload and poison elsewhere. */
static int verify(const msg_t *m, const unsigned char *got)
{
    for (size_t i = 0; i < m->span; i++) {
        int in = m->kind == L_CONTIG || i % 16 < 8;
        unsigned char want = in ? (unsigned char)(i * 131 + 7) : POISON;
        if (got[i] != want) {
            fprintf(stderr, "VERIFY FAILED: %s, %zu bytes: byte %zu is 0x%02x, not 0x%02x\n", layout_name[m->kind],
                    m->payload, i, got[i], want);
            return 0;
        }
    }
    return 1;
}

/* One iteration of `how` (0 pure, 1 overlap, 2 tested); rank 0 returns its time, and the time
 * of MPI_Isend in *call. */
static double iteration(const msg_t *m, void *sbuf, void *rbuf, int how, double compute_us, double *call)
{
    MPI_Request q = MPI_REQUEST_NULL;
    int ack = 0;
    if (rank == 1) MPI_Irecv(rbuf, m->count, m->type, 0, TAG_DATA, MPI_COMM_WORLD, &q);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Send(&ack, 1, MPI_INT, 0, TAG_ACK, MPI_COMM_WORLD);
        return 0;
    }
    double t0 = now_us();
    MPI_Isend(sbuf, m->count, m->type, 1, TAG_DATA, MPI_COMM_WORLD, &q);
    double t1 = now_us();
    if (how) compute(compute_us, how == 2 ? &q : NULL);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_Recv(&ack, 1, MPI_INT, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double t2 = now_us();
    if (call) *call = t1 - t0;
    return t2 - t0;
}

int main(int argc, char **argv)
{
    /* --thread-multiple: MPI_Init_thread(MPI_THREAD_MULTIPLE), where the interposer runs its
     * progress thread (GDTE_MPI_PROGRESS_THREAD); read before MPI starts. */
    int want_mt = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--thread-multiple")) want_mt = 1;
    int provided = MPI_THREAD_SINGLE;
    if (want_mt) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t sizes[MAX_SIZES];
    int nsizes = 0, use[L_COUNT] = {1, 1};
    const char *csv = NULL, *label = "plain", *mem = "device";
    char sizes_s[256] = "64K,1M,4M,16M";
    static struct option opts[] = {{"mem", 1, 0, 'm'},   {"sizes", 1, 0, 's'},     {"layouts", 1, 0, 'l'},
                                   {"iters", 1, 0, 'i'}, {"warmup", 1, 0, 'w'},    {"slice", 1, 0, 'S'},
                                   {"csv", 1, 0, 'c'},   {"mpi-label", 1, 0, 'L'}, {"thread-multiple", 0, 0, 'T'},
                                   {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case 'm': mem = optarg; break;
        case 's': snprintf(sizes_s, sizeof sizes_s, "%s", optarg); break;
        case 'l':
            use[L_CONTIG] = strstr(optarg, "contig") != NULL;
            use[L_VECTOR] = strstr(optarg, "vector") != NULL;
            break;
        case 'i': opt_iters = atoi(optarg); break;
        case 'w': opt_warmup = atoi(optarg); break;
        case 'S': opt_slice_us = atof(optarg); break;
        case 'c': csv = optarg; break;
        case 'L': label = optarg; break;
        case 'T': break;
        default:
            if (rank == 0) fprintf(stderr, "usage: see the header of overlap.c\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (size != 2 || opt_iters < 1 || opt_iters > MAX_ITERS || opt_warmup < 0 || opt_slice_us <= 0) {
        if (rank == 0) fprintf(stderr, "overlap: 2 ranks, 1 <= --iters <= %d, --slice > 0\n", MAX_ITERS);
        MPI_Finalize();
        return 2;
    }
    for (char *save = NULL, *t = strtok_r(sizes_s, ",", &save); t && nsizes < MAX_SIZES; t = strtok_r(NULL, ",", &save))
        if ((sizes[nsizes] = parse_size(t)) >= 16) nsizes++;
    const char *commit = getenv("GDTETEST_COMMIT") && *getenv("GDTETEST_COMMIT") ? getenv("GDTETEST_COMMIT") : OVERLAP_COMMIT;
    device_mem = strcmp(mem, "device") == 0;
    if (device_mem && mb_init(rank) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
    const char *dev = device_mem ? mb_device_name() : "host";
    int have_ipo = gdte_mpi_counter && gdte_mpi_counter("active") > 0;
    if (rank == 0) {
        printf("overlap: %s, %s memory, mpi=%s, gdte interposer: %s, commit %s\n", dev, mem, label,
               have_ipo ? "present" : "absent", commit);
        printf("  iters %d, warmup %d, MPI_Test every %.0f us in 'tested', thread level %s\n", opt_iters, opt_warmup,
               opt_slice_us, provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : want_mt ? "below MULTIPLE" : "default");
        printf("%-8s %10s %10s %10s %10s %10s %8s\n", "layout", "bytes", "isend_us", "pure_us", "overlap%", "tested%",
               "async");
    }
    FILE *out = NULL;
    if (rank == 0 && csv) {
        out = fopen(csv, "a");
        if (out && ftell(out) == 0)
            fprintf(out, "device,commit,mpi,layout,bytes,isend_us,pure_us,overlap_pct,tested_pct,async_sends\n");
    }
    int failed = 0;
    for (int k = 0; k < L_COUNT; k++) {
        if (!use[k]) continue;
        for (int z = 0; z < nsizes; z++) {
            msg_t m;
            msg_make(k, sizes[z], &m);
            unsigned char *host = malloc(m.span);
            for (size_t i = 0; i < m.span; i++) host[i] = rank == 0 ? (unsigned char)(i * 131 + 7) : POISON;
            void *sbuf = buf_alloc(m.span), *rbuf = buf_alloc(m.span);
            copy(rank == 0 ? sbuf : rbuf, host, m.span);
            /* Verified once, on the first message. */
            iteration(&m, sbuf, rbuf, 0, 0, NULL);
            int ok = 1;
            if (rank == 1) {
                copy(host, rbuf, m.span);
                ok = verify(&m, host);
            }
            MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            if (!ok) failed = 1;
            double pure[MAX_ITERS], call[MAX_ITERS], tot[MAX_ITERS], tst[MAX_ITERS];
            for (int i = 0; i < opt_warmup; i++) iteration(&m, sbuf, rbuf, 0, 0, NULL);
            int64_t a0 = have_ipo ? gdte_mpi_counter("node_frag_async") : 0;
            for (int i = 0; i < opt_iters; i++) pure[i] = iteration(&m, sbuf, rbuf, 0, 0, &call[i]);
            int64_t a1 = have_ipo ? gdte_mpi_counter("node_frag_async") : 0;
            double t_pure = rank == 0 ? bench_median(pure, opt_iters) : 0;
            MPI_Bcast(&t_pure, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            for (int i = 0; i < opt_iters; i++) tot[i] = iteration(&m, sbuf, rbuf, 1, t_pure, NULL);
            for (int i = 0; i < opt_iters; i++) tst[i] = iteration(&m, sbuf, rbuf, 2, t_pure, NULL);
            if (rank == 0) {
                double t_call = bench_median(call, opt_iters), t_tot = bench_median(tot, opt_iters), t_tst = bench_median(tst, opt_iters);
                double ov = 100 * (t_pure + t_pure - t_tot) / t_pure, ot = 100 * (t_pure + t_pure - t_tst) / t_pure;
                ov = ov < 0 ? 0 : ov > 100 ? 100 : ov;
                ot = ot < 0 ? 0 : ot > 100 ? 100 : ot;
                char async[32] = "";
                if (have_ipo) snprintf(async, sizeof async, "%.2f", (double)(a1 - a0) / opt_iters);
                printf("%-8s %10zu %10.2f %10.2f %10.1f %10.1f %8s\n", layout_name[k], m.payload, t_call, t_pure, ov, ot,
                       async);
                if (out)
                    fprintf(out, "%s,%s,%s,%s,%zu,%.3f,%.3f,%.1f,%.1f,%s\n", dev, commit, label, layout_name[k],
                            m.payload, t_call, t_pure, ov, ot, async);
            }
            buf_free(sbuf);
            buf_free(rbuf);
            free(host);
            MPI_Type_free(&m.type);
        }
    }
    if (out) fclose(out);
    /* With MPI_THREAD_MULTIPLE the interposer's progress thread must have posted fragments of
     * messages to another node: between MPI_Isend and MPI_Wait of 'overlap' nobody else can. */
    if (rank == 0 && have_ipo && provided == MPI_THREAD_MULTIPLE && gdte_mpi_counter("node_frag_sends") > 0) {
        long long tp = (long long)gdte_mpi_counter("node_frag_thread_posts");
        printf("progress thread: %lld fragment(s) posted\n", tp);
        if (tp <= 0) {
            printf("PROGRESS THREAD POSTED NOTHING\n");
            failed = 1;
        }
    }
    if (rank == 0) fflush(stdout);
    MPI_Finalize();
    return failed;
}
