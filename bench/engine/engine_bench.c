/*
 * bench/engine: CPU figures of the engine and the MPI import (not a test: nothing here
 * asserts a time).
 *
 * Cases
 *   import_vector_1e6    MPI vector of 10^6 blocks: gdte_mpi_type_import on a fresh handle
 *                        (envelope, contents, constructors, canonical form, plan, cache
 *                        insert), and the same through gdte's constructors; plan memory for
 *                        10^6 and for 10 blocks. Target < 10 us, O(1) memory.
 *   import_indexed_1e6   MPI indexed type of 10^6 irregular blocks: the same, as DEV units
 *                        per second. Target >= 100 M units/s.
 *   lookup_hit           gdte_mpi_type_import of an already imported derived type (and of a
 *                        predefined one). Target < 100 ns.
 *   pack_* / unpack_*    host pack (unpack) of the same type by gdte (imported type) and by
 *                        Open MPI's MPI_Pack (MPI_Unpack), same buffers, results checked
 *                        equal once. Target gdte >= 1x MPI, >= 2x on indexed.
 * Every time is the median of repeated runs (RUNS, after a warm-up).
 *
 * CSV (appended header once): host,commit,case,method,bytes,median_us,metric,value,ratio
 *   bytes   packed bytes of one operation (0 where none)
 *   ratio   pack rows: MPI time / gdte time (> 1: gdte faster); other rows: how far the
 *           measurement is on the good side of its target (> 1: target met), e.g.
 *           10 us / median for the vector import, units/s / 1e8 for the indexed import.
 *
 * Usage: mpirun -n 1 engine_bench OUT.csv      (commit: GDTETEST_COMMIT, else `git rev-parse`)
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "gdte.h"
#include "../common/bench_stats.h"
#include "engine/engine.h"
#include "mpi/import.h"

#define RUNS 25

static FILE *csv;
static char host[160], commit[48];

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}


static void row(const char *c, const char *method, int64_t bytes, double us, const char *metric, double value,
                double ratio)
{
    fprintf(csv, "%s,%s,%s,%s,%lld,%.3f,%s,%.6g,%.3f\n", host, commit, c, method, (long long)bytes, us, metric, value,
            ratio);
    fflush(csv);
    printf("%-22s %-12s %12lld B %12.3f us  %-10s %12.6g  ratio %.3f\n", c, method, (long long)bytes, us, metric, value,
           ratio);
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        gdte_status_t st_ = (call);                                                                \
        if (st_ != GDTE_OK) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, gdte_status_name(st_));  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void identify(void)
{
    char hn[64] = "unknown", cpu[96] = "";
    gethostname(hn, sizeof hn - 1);
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) snprintf(cpu, sizeof cpu, "%s", p + 2);
            break;
        }
    if (f) fclose(f);
    cpu[strcspn(cpu, "\n")] = 0;
    for (char *p = cpu; *p; p++)
        if (*p == ',') *p = ' ';
    snprintf(host, sizeof host, "%s (%s; %ld cores)", hn, cpu, sysconf(_SC_NPROCESSORS_ONLN));
    const char *c = getenv("GDTETEST_COMMIT");
    if (c && *c) {
        snprintf(commit, sizeof commit, "%s", c);
    } else {
        FILE *g = popen("git rev-parse --short HEAD 2>/dev/null", "r");
        if (!g || !fgets(commit, sizeof commit, g)) snprintf(commit, sizeof commit, "unknown");
        if (g) pclose(g);
        commit[strcspn(commit, "\n")] = 0;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Import of a fresh MPI type each run: `make` builds the MPI type (not timed). */
typedef MPI_Datatype (*make_fn)(void);

static int64_t vec_n = 1000000;
static MPI_Datatype make_vector(void)
{
    MPI_Datatype t;
    MPI_Type_vector((int)vec_n, 1, 2, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    return t;
}

static int *ix_bl, *ix_d;
static int64_t *ix_bl64, *ix_d64;
static const int ix_n = 1000000;
static MPI_Datatype make_indexed(void)
{
    MPI_Datatype t;
    MPI_Type_indexed(ix_n, ix_bl, ix_d, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    return t;
}

static double time_import(make_fn make, int runs, gdte_type_info_t *info_p)
{
    double v[RUNS * 4];
    for (int r = 0; r < runs + 1; r++) {
        MPI_Datatype t = make();
        gdte_type_h g;
        double t0 = now_us();
        CK(gdte_mpi_type_import(t, &g));
        double t1 = now_us();
        if (r > 0) v[r - 1] = t1 - t0; /* the first run warms up the named table and caches */
        if (info_p) CK(gdte_type_get_info(g, info_p));
        MPI_Type_free(&t);
    }
    return bench_median(v, runs);
}

static void bench_imports(void)
{
    gdte_type_info_t in, in10;
    /* vector of 10^6 blocks */
    double us = time_import(make_vector, RUNS * 4, &in);
    vec_n = 10;
    time_import(make_vector, 3, &in10);
    vec_n = 1000000;
    row("import_vector_1e6", "mpi_import", in.size, us, "plan_bytes", (double)in.plan_bytes, 10.0 / us);
    row("import_vector_1e6", "plan_10blk", 0, 0, "plan_bytes", (double)in10.plan_bytes,
        in10.plan_bytes == in.plan_bytes ? 1.0 : 0.0);
    double v[RUNS * 4];
    for (int r = 0; r < RUNS * 4; r++) {
        gdte_type_h t;
        double t0 = now_us();
        CK(gdte_type_create_vector(1000000, 1, 2, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t));
        CK(gdte_type_commit(t));
        double t1 = now_us();
        v[r] = t1 - t0;
        gdte_type_free(&t);
    }
    us = bench_median(v, RUNS * 4);
    row("import_vector_1e6", "gdte_native", in.size, us, "plan_bytes", (double)in.plan_bytes, 10.0 / us);

    /* indexed of 10^6 irregular blocks */
    ix_bl = malloc(ix_n * sizeof *ix_bl);
    ix_d = malloc(ix_n * sizeof *ix_d);
    ix_bl64 = malloc(ix_n * sizeof *ix_bl64);
    ix_d64 = malloc(ix_n * sizeof *ix_d64);
    for (int i = 0, x = 0; i < ix_n; i++) {
        ix_bl[i] = 1 + (int)((i * 2654435761u) >> 30); /* 1..4 doubles */
        ix_d[i] = x;
        x += ix_bl[i] + 1 + (int)((i * 40503u) % 3);
        ix_bl64[i] = ix_bl[i];
        ix_d64[i] = ix_d[i];
    }
    us = time_import(make_indexed, 7, &in);
    row("import_indexed_1e6", "mpi_import", in.size, us, "Munits/s", in.num_units / us, in.num_units / us / 100.0);
    for (int r = 0; r < 7; r++) {
        gdte_type_h t;
        double t0 = now_us();
        CK(gdte_type_create_indexed(ix_n, ix_bl64, ix_d64, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t));
        CK(gdte_type_commit(t));
        double t1 = now_us();
        v[r] = t1 - t0;
        gdte_type_free(&t);
    }
    us = bench_median(v, 7);
    row("import_indexed_1e6", "gdte_native", in.size, us, "Munits/s", in.num_units / us, in.num_units / us / 100.0);
}

static void bench_lookup(void)
{
    MPI_Datatype t;
    MPI_Type_vector(100, 2, 7, MPI_DOUBLE, &t);
    MPI_Type_commit(&t);
    gdte_type_h g, first;
    CK(gdte_mpi_type_import(t, &first));
    const int N = 1000000;
    double v[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_us();
        for (int i = 0; i < N; i++) {
            gdte_mpi_type_import(t, &g);
            __asm__ volatile("" : : "r"(g) : "memory");
        }
        v[r] = (now_us() - t0) * 1e3 / N;
    }
    double ns = bench_median(v, RUNS);
    row("lookup_hit", "derived", 0, ns / 1e3, "ns", ns, 100.0 / ns);
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_us();
        for (int i = 0; i < N; i++) {
            gdte_mpi_type_import(MPI_DOUBLE, &g);
            __asm__ volatile("" : : "r"(g) : "memory");
        }
        v[r] = (now_us() - t0) * 1e3 / N;
    }
    ns = bench_median(v, RUNS);
    row("lookup_hit", "predefined", 0, ns / 1e3, "ns", ns, 100.0 / ns);
    MPI_Type_free(&t);
}

/* ---------------------------------------------------------------------------------------- */
/* Pack bandwidth: gdte (the imported type) against MPI_Pack on the same type and buffers. */
static void bench_pack(const char *name, MPI_Datatype t, int count, int64_t span_lo, int64_t span_hi)
{
    MPI_Type_commit(&t);
    gdte_type_h g;
    CK(gdte_mpi_type_import(t, &g));
    int size;
    MPI_Type_size(t, &size);
    int64_t total = (int64_t)size * count, blen = span_hi - span_lo;
    char *buf = malloc((size_t)blen), *a = malloc((size_t)total), *b = malloc((size_t)total);
    char *base = buf - span_lo;
    for (int64_t i = 0; i < blen; i++) buf[i] = (char)(i * 7 + 1);
    memset(a, 0, (size_t)total);
    memset(b, 1, (size_t)total);
    int pos = 0;
    MPI_Pack(base, count, t, a, (int)total, &pos, MPI_COMM_SELF);
    int64_t done;
    CK(gdte_pack(base, count, g, b, total, NULL, &done));
    if (pos != total || done != total || memcmp(a, b, (size_t)total)) {
        fprintf(stderr, "%s: gdte and MPI_Pack disagree: not timed\n", name);
        exit(1);
    }
    double vg[RUNS], vm[RUNS], ug[RUNS], um[RUNS];
    for (int r = -2; r < RUNS; r++) { /* two warm-up rounds */
        double t0 = now_us();
        gdte_pack(base, count, g, b, total, NULL, &done);
        double t1 = now_us();
        pos = 0;
        MPI_Pack(base, count, t, a, (int)total, &pos, MPI_COMM_SELF);
        double t2 = now_us();
        gdte_unpack(b, total, base, count, g, NULL, &done);
        double t3 = now_us();
        pos = 0;
        MPI_Unpack(a, (int)total, &pos, base, count, t, MPI_COMM_SELF);
        double t4 = now_us();
        if (r >= 0) {
            vg[r] = t1 - t0;
            vm[r] = t2 - t1;
            ug[r] = t3 - t2;
            um[r] = t4 - t3;
        }
    }
    double g_us = bench_median(vg, RUNS), m_us = bench_median(vm, RUNS), gu_us = bench_median(ug, RUNS), mu_us = bench_median(um, RUNS);
    char c[64];
    gdte_type_info_t in;
    CK(gdte_type_get_info(g, &in));
    static const char *lay[] = {"empty", "contig", "strided", "units"};
    snprintf(c, sizeof c, "pack_%s", name);
    row(c, "gdte", total, g_us, "GB/s", total / g_us / 1e3, m_us / g_us);
    row(c, "openmpi", total, m_us, "GB/s", total / m_us / 1e3, 1.0);
    snprintf(c, sizeof c, "unpack_%s", name);
    row(c, "gdte", total, gu_us, "GB/s", total / gu_us / 1e3, mu_us / gu_us);
    row(c, "openmpi", total, mu_us, "GB/s", total / mu_us / 1e3, 1.0);
    printf("    (%s: gdte layout %s, %lld blocks per element)\n", name, lay[in.layout], (long long)in.num_blocks);
    free(buf), free(a), free(b);
    MPI_Type_free(&t);
}

static void bench_packs(void)
{
    MPI_Datatype t, u, w;
    /* vectors: 8-byte, 64-byte and 1 KiB blocks at twice their length, 16 MiB of data */
    MPI_Type_vector(1 << 21, 1, 2, MPI_DOUBLE, &t);
    bench_pack("vector_8B", t, 1, 0, 8LL << 22);
    MPI_Type_vector(1 << 18, 8, 16, MPI_DOUBLE, &t);
    bench_pack("vector_64B", t, 1, 0, 8LL << 22);
    MPI_Type_vector(1 << 14, 128, 256, MPI_DOUBLE, &t);
    bench_pack("vector_1KiB", t, 1, 0, 8LL << 22);
    /* indexed: the lower triangle of a 2048 x 2048 matrix (16 MiB of data), and 10^6
     * irregular blocks of 1-4 doubles */
    int n = 2048;
    int *bl = malloc(n * sizeof *bl), *d = malloc(n * sizeof *d);
    for (int i = 0; i < n; i++) {
        bl[i] = i + 1;
        d[i] = i * n;
    }
    MPI_Type_indexed(n, bl, d, MPI_DOUBLE, &t);
    bench_pack("indexed_triangle", t, 1, 0, 8LL * n * n);
    free(bl), free(d);
    MPI_Type_indexed(ix_n, ix_bl, ix_d, MPI_DOUBLE, &t);
    bench_pack("indexed_1e6", t, 1, 0, 8LL * (ix_d[ix_n - 1] + ix_bl[ix_n - 1]));
    /* faces of a 256^3 array of doubles (C order): x (a plane), y (256 rows), z (a column
     * element of each row) */
    int sz[3] = {256, 256, 256}, fx[3] = {1, 256, 256}, fy[3] = {256, 1, 256}, fz[3] = {256, 256, 1}, st[3] = {0, 0, 0};
    int64_t arr = 8LL * 256 * 256 * 256;
    st[0] = 100;
    MPI_Type_create_subarray(3, sz, fx, st, MPI_ORDER_C, MPI_DOUBLE, &t);
    bench_pack("subarray_face_x", t, 1, 0, arr);
    st[0] = 0, st[1] = 100;
    MPI_Type_create_subarray(3, sz, fy, st, MPI_ORDER_C, MPI_DOUBLE, &t);
    bench_pack("subarray_face_y", t, 1, 0, arr);
    st[1] = 0, st[2] = 100;
    MPI_Type_create_subarray(3, sz, fz, st, MPI_ORDER_C, MPI_DOUBLE, &t);
    bench_pack("subarray_face_z", t, 1, 0, arr);
    /* struct: particles {double x; int id; char tag[2]} with gaps, an array of 2^20 */
    int sb[3] = {1, 1, 2};
    MPI_Aint sd[3] = {0, 12, 20};
    MPI_Datatype sty[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR};
    MPI_Type_create_struct(3, sb, sd, sty, &u);
    MPI_Type_create_resized(u, 0, 24, &w);
    MPI_Type_free(&u);
    bench_pack("struct_particles", w, 1 << 20, 0, 24LL << 20);
    /* transpose of a 2048 x 2048 matrix of doubles: columns of single elements */
    MPI_Type_vector(n, 1, n, MPI_DOUBLE, &u);
    MPI_Type_create_resized(u, 0, 8, &w);
    MPI_Type_free(&u);
    MPI_Type_contiguous(n, w, &t);
    MPI_Type_free(&w);
    bench_pack("transpose", t, 1, 0, 8LL * n * n);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT.csv\n", argv[0]);
        return 2;
    }
    CK(gdte_init(NULL));
    identify();
    FILE *probe = fopen(argv[1], "r");
    int fresh = !probe;
    if (probe) fclose(probe);
    csv = fopen(argv[1], "a");
    if (!csv) {
        perror(argv[1]);
        return 1;
    }
    if (fresh) fprintf(csv, "host,commit,case,method,bytes,median_us,metric,value,ratio\n");
    bench_imports();
    bench_lookup();
    bench_packs();
    fclose(csv);
    free(ix_bl), free(ix_d), free(ix_bl64), free(ix_d64);
    gdte_finalize();
    MPI_Finalize();
    return 0;
}
