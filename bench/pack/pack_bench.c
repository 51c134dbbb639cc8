/*
 * bench/pack: GPU pack and unpack of the layouts, against the copies an MPI would
 * otherwise make.
 *
 * Methods, each on device buffers, on one non-blocking stream:
 *   gdte      gdte_pack / gdte_unpack (async) of the layout
 *   gdte_strided, gdte_flat, gdte_tiled
 *             the same with the kernel variant forced (gdte_gpu_exec_force_variant), for
 *             regular layouts (automatic choice STRIDED, TILED or CONTIG, as face_z; gdte_tiled
 *             where TILED can run): the measurements that decide between the variants
 *   memcpy    one device-to-device copy of the same number of bytes (the yardstick)
 *   memcpy2d  one 2-D copy, where the layout is a single vector (width = block, pitch = stride)
 *   perblock  one async copy per contiguous block (what MPIs do today); layouts of more than
 *             PERBLOCK_MAX blocks are timed on their first PERBLOCK_MAX blocks and scaled to
 *             the whole count (printed as such in the log)
 * Timing: device events around each sample, warm-up first, median of RUNS samples. Layouts
 * under 16 MiB: a sample is 20 operations captured once into a graph and replayed (GPU time
 * without launch gaps or gdte's host work, for every method alike; the log also prints the
 * plain stream times, launches included). Larger layouts: one operation per sample. The first use of an uncached T (plan not yet on the device) is timed on the
 * host clock around a blocking gdte_pack, against the same clock for the cached plan.
 * Every gdte result (each forced variant's too) is checked once against the host executor
 * before it is timed.
 *
 * CSV: device,commit,layout,method,direction,packed_bytes,median_us,gbps,ratio_to_memcpy
 * (gbps: packed bytes / median time, 1e9; ratio: memcpy time / method time).
 *
 * Layouts: the (V, V64, T, face_x/y/z, transpose, struct3), struct3p (a struct with a
 * hole: PERIODIC, with DEV_THREAD, DEV_WARP and PERIODIC forced beside it), particle ({double
 * x, y, z; int id} padded to 32 bytes), callcost (the host time of one call, see callcost())
 * and contig512 (a calibration: V's bytes contiguous; its gdte_flat row is the FLAT
 * kernel as a plain copy, the ceiling for V).
 *
 * Usage: pack_bench OUT.csv [layout,layout,...]   (commit from GDTETEST_COMMIT)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/engine.h"
#include "gdte.h"
#include "../common/bench_stats.h"
#include "gpu/gpu.h"
#include "kernels/callprof.h"
#include "kernels/devplan.h"
#include "kernels/kernels.h"
#include "util/util.h"

#define RUNS 25
#define WARMUP 3
#define PERBLOCK_MAX 65536
#define PERBLOCK_RUNS 5

static gdte_stream_t S;
static FILE *csv;
static char device[256], commit[64];

#define CK(call)                                                                                   \
    do {                                                                                           \
        gdte_status_t st_ = (call);                                                                \
        if (st_ != GDTE_OK) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, gdte_status_name(st_), \
                    gdte_gpu_last_error());                                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)


/* ---- one benchmark case ---- */
typedef struct bcase {
    const char *name;
    gdte_type_h type;
    int64_t n;          /* packed bytes */
    char *user, *packed; /* device buffers */
    size_t user_bytes;
    gdte_layout_t L;
    /* perblock: prefix of the block list */
    int64_t nblocks, nlist;
    int64_t *boff, *bpk, *blen;
} bcase_t;

typedef void (*op_fn)(bcase_t *c, gdte_dir_t dir);

static void op_gdte(bcase_t *c, gdte_dir_t dir)
{
    gdte_pack_params_t p = {GDTE_PACK_FIELD_STREAM | GDTE_PACK_FIELD_FLAGS, 0, 0, S, GDTE_PACK_FLAG_ASYNC};
    int64_t done;
    if (dir == GDTE_DIR_PACK)
        CK(gdte_pack(c->user, 1, c->type, c->packed, c->n, &p, &done));
    else
        CK(gdte_unpack(c->packed, c->n, c->user, 1, c->type, &p, &done));
}

static void op_memcpy(bcase_t *c, gdte_dir_t dir)
{
    /* the same bytes, contiguous on both sides */
    if (dir == GDTE_DIR_PACK)
        CK(gdte_gpu_memcpy_async(c->packed, c->user, (size_t)c->n, S));
    else
        CK(gdte_gpu_memcpy_async(c->user, c->packed, (size_t)c->n, S));
}

static int is_vector(const bcase_t *c)
{
    return c->L.kind == GDTE_LAYOUT_KIND_STRIDED && c->L.ndims == 1 && c->L.stride[0] > 0;
}

static void op_memcpy2d(bcase_t *c, gdte_dir_t dir)
{
    const gdte_layout_t *L = &c->L;
    size_t w = (size_t)L->blocklen, h = (size_t)L->count[0], pitch = (size_t)L->stride[0];
    if (dir == GDTE_DIR_PACK)
        CK(gdte_gpu_memcpy2d_async(c->packed, w, c->user + L->disp, pitch, w, h, S));
    else
        CK(gdte_gpu_memcpy2d_async(c->user + L->disp, pitch, c->packed, w, w, h, S));
}

static void op_perblock(bcase_t *c, gdte_dir_t dir)
{
    for (int64_t i = 0; i < c->nlist; i++) {
        if (dir == GDTE_DIR_PACK)
            CK(gdte_gpu_memcpy_async(c->packed + c->bpk[i], c->user + c->boff[i], (size_t)c->blen[i], S));
        else
            CK(gdte_gpu_memcpy_async(c->user + c->boff[i], c->packed + c->bpk[i], (size_t)c->blen[i], S));
    }
}

/* Contiguous blocks of the layout, in packed order, merging adjacent pieces. */
static void list_blocks(bcase_t *c)
{
    const gdte_layout_t *L = &c->L;
    int64_t cap = 1 << 16, n = 0, total = 0;
    c->boff = malloc((size_t)cap * sizeof(int64_t));
    c->bpk = malloc((size_t)cap * sizeof(int64_t));
    c->blen = malloc((size_t)cap * sizeof(int64_t));
#define ADD(off, pk, len)                                                                          \
    do {                                                                                           \
        if (n > 0 && c->boff[n - 1] + c->blen[n - 1] == (off) && c->bpk[n - 1] + c->blen[n - 1] == (pk)) { \
            c->blen[n - 1] += (len);                                                               \
        } else {                                                                                   \
            total++;                                                                               \
            if (n < cap) {                                                                         \
                c->boff[n] = (off);                                                                \
                c->bpk[n] = (pk);                                                                  \
                c->blen[n] = (len);                                                                \
                n++;                                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)
    if (L->kind == GDTE_LAYOUT_KIND_CONTIG) {
        ADD(L->disp, 0, L->blocklen);
    } else if (L->kind == GDTE_LAYOUT_KIND_STRIDED) {
        int64_t nb = gdte_layout_nblocks(L);
        for (int64_t b = 0; b < nb; b++) ADD(gdte_layout_block_offset(L, b), b * L->blocklen, L->blocklen);
    } else if (L->kind == GDTE_LAYOUT_KIND_UNITS) {
        int64_t reps = gdte_layout_nblocks(L);
        for (int64_t r = 0; r < reps; r++) {
            int64_t ro = gdte_layout_rep_offset(L, r);
            for (int64_t u = 0; u < L->nunits; u++)
                ADD(ro + L->units[u].src, r * L->rep_bytes + L->units[u].packed, (int64_t)L->units[u].len);
        }
    }
#undef ADD
    c->nblocks = total;
    c->nlist = n;
}

/* Median time (us) of one operation. With `graph`, the K operations of a sample are captured
 * once into a graph and each sample replays it: the GPU's time without launch gaps and
 * without gdte's host work (small layouts, where a launch costs as much as the copy). */
static double time_op(bcase_t *c, op_fn op, gdte_dir_t dir, int runs, int k, int graph)
{
    gdte_gpu_event_t a, b;
    gdte_gpu_graph_t g = NULL;
    CK(gdte_gpu_event_create(&a, 1));
    CK(gdte_gpu_event_create(&b, 1));
    for (int i = 0; i < WARMUP; i++) op(c, dir);
    CK(gdte_gpu_stream_synchronize(S));
    if (graph) {
        CK(gdte_gpu_capture_begin(S));
        for (int i = 0; i < k; i++) op(c, dir);
        CK(gdte_gpu_capture_end(S, &g));
        for (int i = 0; i < WARMUP; i++) CK(gdte_gpu_graph_launch(g, S));
        CK(gdte_gpu_stream_synchronize(S));
    }
    double v[64];
    for (int r = 0; r < runs; r++) {
        CK(gdte_gpu_event_record(a, S));
        if (graph)
            CK(gdte_gpu_graph_launch(g, S));
        else
            for (int i = 0; i < k; i++) op(c, dir);
        CK(gdte_gpu_event_record(b, S));
        CK(gdte_gpu_event_synchronize(b));
        float ms;
        CK(gdte_gpu_event_elapsed_ms(a, b, &ms));
        v[r] = ms * 1000.0 / k;
    }
    if (g) CK(gdte_gpu_graph_destroy(g));
    CK(gdte_gpu_event_destroy(a));
    CK(gdte_gpu_event_destroy(b));
    return bench_median(v, runs);
}

static void row(const char *layout, const char *method, gdte_dir_t dir, int64_t n, double us, double memcpy_us)
{
    double gbps = n / (us * 1e3);
    fprintf(csv, "%s,%s,%s,%s,%s,%lld,%.2f,%.2f,%.3f\n", device, commit, layout, method,
            dir == GDTE_DIR_PACK ? "pack" : "unpack", (long long)n, us, gbps, memcpy_us / us);
    printf("  %-10s %-16s %-6s %12lld B %10.1f us %8.1f GB/s  x%.3f of memcpy\n", layout, method,
           dir == GDTE_DIR_PACK ? "pack" : "unpack", (long long)n, us, gbps, memcpy_us / us);
    fflush(csv);
    fflush(stdout);
}

/* Fill device memory with a pseudo-random pattern (never zeros: they hide unwritten bytes).
 * The pattern's length is no power of two, so a repeat never lines up with a layout's stride. */
static unsigned char *pattern;
#define PATTERN_BYTES ((size_t)(63u << 20) + 24)
static void fill_device(char *d, size_t n)
{
    for (size_t at = 0; at < n; at += PATTERN_BYTES)
        CK(gdte_gpu_memcpy(d + at, pattern, n - at < PATTERN_BYTES ? n - at : PATTERN_BYTES));
}

static int verify_failures;

/* gdte's pack against the host executor's, and its unpack into a buffer whose other bytes are
 * scribbled over (under whatever variant is forced at the time). */
static int verify(bcase_t *c)
{
    size_t ub = c->user_bytes, pb = (size_t)c->n;
    unsigned char *uh = malloc(ub), *exp = malloc(ub), *got = malloc(ub), *ph = malloc(pb), *ref = malloc(pb);
    if (!uh || !exp || !got || !ph || !ref) {
        fprintf(stderr, "out of host memory for verification\n");
        exit(1);
    }
    CK(gdte_gpu_memcpy(uh, c->user, ub));
    CK(gdte_gpu_memset(c->packed, 0x5a, pb));
    op_gdte(c, GDTE_DIR_PACK);
    CK(gdte_gpu_stream_synchronize(S));
    CK(gdte_gpu_memcpy(ph, c->packed, pb));
    gdte_host_exec(&c->L, GDTE_DIR_PACK, uh, ref, 0, c->n);
    int ok = !memcmp(ph, ref, pb);
    memcpy(exp, uh, ub);
    memset(exp, 0x33, ub / 2);
    CK(gdte_gpu_memcpy(c->user, exp, ub));
    CK(gdte_gpu_memcpy(c->packed, ref, pb));
    op_gdte(c, GDTE_DIR_UNPACK);
    CK(gdte_gpu_stream_synchronize(S));
    CK(gdte_gpu_memcpy(got, c->user, ub));
    gdte_host_exec(&c->L, GDTE_DIR_UNPACK, exp, ref, 0, c->n);
    ok = ok && !memcmp(got, exp, ub);
    CK(gdte_gpu_memcpy(c->user, uh, ub)); /* back to the original data for timing */
    free(uh);
    free(exp);
    free(got);
    free(ph);
    free(ref);
    return ok;
}

static gdte_type_h make_type(const char *name, size_t *user_bytes)
{
    gdte_type_h t = NULL, a = NULL, b = NULL;
    gdte_type_h dbl = gdte_type_predefined(GDTE_BASIC_DOUBLE);
    if (!strcmp(name, "V")) {
        CK(gdte_type_create_vector(8192, 8192, 16384, dbl, &t));
        *user_bytes = (size_t)16384 * 8192 * 8;
    } else if (!strcmp(name, "V64")) {
        CK(gdte_type_create_vector(4 << 20, 8, 16, dbl, &t));
        *user_bytes = (size_t)(4 << 20) * 128;
    } else if (!strcmp(name, "T")) {
        int64_t *bl = malloc(8192 * sizeof *bl), *ds = malloc(8192 * sizeof *ds);
        for (int64_t j = 0; j < 8192; j++) {
            bl[j] = 8192 - j;
            ds[j] = j * 8192 + j;
        }
        CK(gdte_type_create_indexed(8192, bl, ds, dbl, &t));
        free(bl);
        free(ds);
        *user_bytes = (size_t)8192 * 8192 * 8;
    } else if (!strncmp(name, "face_", 5)) {
        int64_t sz[3] = {512, 512, 512}, sub[3] = {512, 512, 512}, at[3] = {0, 0, 0};
        int axis = name[5] == 'x' ? 2 : name[5] == 'y' ? 1 : 0; /* C order: x fastest */
        sub[axis] = 1;
        at[axis] = 256;
        CK(gdte_type_create_subarray(3, sz, sub, at, GDTE_ORDER_C, dbl, &t));
        *user_bytes = (size_t)512 * 512 * 512 * 8;
    } else if (!strcmp(name, "transpose")) {
        CK(gdte_type_create_vector(4096, 1, 4096, dbl, &a));
        CK(gdte_type_create_resized(a, 0, 8, &b));
        CK(gdte_type_create_contiguous(4096, b, &t));
        *user_bytes = (size_t)4096 * 4096 * 8;
    } else if (!strcmp(name, "struct3") || !strcmp(name, "struct3p")) {
        /* struct3: {double, int, float[3]}, dense (24 bytes). struct3p, an extra case:
         * {int, double, float[3]}, a 4-byte hole (32 bytes), so two pieces per element. */
        int pad = !strcmp(name, "struct3p");
        gdte_type_h i32 = gdte_type_predefined(GDTE_BASIC_INT32), f32 = gdte_type_predefined(GDTE_BASIC_FLOAT);
        int64_t bl[3] = {1, 1, 3};
        int64_t ds_dense[3] = {0, 8, 12}, ds_pad[3] = {0, 8, 16};
        gdte_type_h ty_dense[3] = {dbl, i32, f32}, ty_pad[3] = {i32, dbl, f32};
        int64_t ext = pad ? 32 : 24;
        CK(gdte_type_create_struct(3, bl, pad ? ds_pad : ds_dense, pad ? ty_pad : ty_dense, &a));
        CK(gdte_type_create_resized(a, 0, ext, &b));
        CK(gdte_type_create_contiguous(1000000, b, &t));
        *user_bytes = (size_t)1000000 * (size_t)ext;
    } else if (!strcmp(name, "particle")) {
        /* The particle array, {double x, y, z; int id} padded to 32 bytes: 28-byte
         * blocks at a 32-byte stride (STRIDED, 4-byte words). */
        int64_t bl[2] = {3, 1}, ds[2] = {0, 24};
        gdte_type_h ty[2] = {dbl, gdte_type_predefined(GDTE_BASIC_INT32)};
        CK(gdte_type_create_struct(2, bl, ds, ty, &a));
        CK(gdte_type_create_resized(a, 0, 32, &b));
        CK(gdte_type_create_contiguous(1000000, b, &t));
        *user_bytes = (size_t)1000000 * 32;
    } else if (!strcmp(name, "contig512")) {
        /* A calibration, not a layout of the issue: V's 512 MiB, contiguous. Its gdte_flat row
         * is the FLAT kernel as a plain copy at V's size: what V (FLAT too) can reach. */
        CK(gdte_type_create_contiguous((int64_t)64 << 20, dbl, &t));
        *user_bytes = (size_t)512 << 20;
    } else {
        fprintf(stderr, "unknown layout %s\n", name);
        exit(2);
    }
    if (a) gdte_type_free(&a);
    if (b) gdte_type_free(&b);
    CK(gdte_type_commit(t));
    return t;
}

/* First use of an uncached T: host clock around a blocking pack, fresh type each trial; the
 * GPU's time of the same call between events in S, and the host stages of the first use
 * (callprof: writing the runs into the bounce buffer, queueing the cuts and packs). Run for the
 * default chunking of the runs (label "gdte_first_use") and, with sweep, for others
 * ("first_use_c<KiB>_g<growth>"): the smallest chunk and the growth of the chunks after it. */
static void first_use_T_one(bcase_t *c, double memcpy_us, int64_t chunk, int growth, int mode, const char *label)
{
    double first[5], gpu[5], cached[25], gcached[25], commit_ms[5], fcopy = 0, fqueue = 0;
    int nc = 0;
    gdte_pack_params_t p = {GDTE_PACK_FIELD_STREAM, 0, 0, S, 0};
    int64_t done;
    gdte_gpu_event_t a, b;
    CK(gdte_gpu_event_create(&a, 1));
    CK(gdte_gpu_event_create(&b, 1));
    gdte_devplan_tune(chunk, growth, mode);
    for (int trial = 0; trial < 5; trial++) {
        size_t ub;
        double t0 = gdte_time_now();
        gdte_type_h t = make_type("T", &ub);
        commit_ms[trial] = (gdte_time_now() - t0) * 1e3;
        CK(gdte_gpu_stream_synchronize(S));
        gdte_callprof_t prof;
        gdte_callprof_take(&prof);
        gdte_callprof_enable(1);
        t0 = gdte_time_now();
        CK(gdte_gpu_event_record(a, S));
        CK(gdte_pack(c->user, 1, t, c->packed, c->n, &p, &done));
        first[trial] = (gdte_time_now() - t0) * 1e6;
        gdte_callprof_enable(0);
        gdte_callprof_take(&prof);
        fcopy += prof.sec[GDTE_CP_FIRST_COPY] * 1e6 / 5;
        fqueue += prof.sec[GDTE_CP_FIRST_QUEUE] * 1e6 / 5;
        CK(gdte_gpu_event_record(b, S));
        CK(gdte_gpu_event_synchronize(b));
        float ms = 0;
        CK(gdte_gpu_event_elapsed_ms(a, b, &ms));
        gpu[trial] = ms * 1e3;
        for (int i = 0; i < 5; i++) {
            t0 = gdte_time_now();
            CK(gdte_gpu_event_record(a, S));
            CK(gdte_pack(c->user, 1, t, c->packed, c->n, &p, &done));
            cached[nc] = (gdte_time_now() - t0) * 1e6;
            CK(gdte_gpu_event_record(b, S));
            CK(gdte_gpu_event_synchronize(b));
            CK(gdte_gpu_event_elapsed_ms(a, b, &ms));
            gcached[nc++] = ms * 1e3;
        }
        gdte_type_free(&t);
    }
    gdte_devplan_tune(0, 0, -1);
    CK(gdte_gpu_event_destroy(a));
    CK(gdte_gpu_event_destroy(b));
    double f = bench_median(first, 5), cm = bench_median(cached, nc), cmt = bench_median(commit_ms, 5);
    double gf = bench_median(gpu, 5), gc = bench_median(gcached, nc);
    row("T", label, GDTE_DIR_PACK, c->n, f, memcpy_us);
    if (!strcmp(label, "gdte_first_use")) row("T", "gdte_cached_wall", GDTE_DIR_PACK, c->n, cm, memcpy_us);
    printf("  T %s (chunk %lld KiB, growth %d, mode %d): first use %.1f us vs cached %.1f us (host clock, blocking): x%.2f "
           "[target <= 1.2]; GPU time %.1f vs %.1f us; host: runs into the bounce buffer %.1f us, queueing %.1f us; "
           "commit (host, not in either) %.1f ms\n",
           label, (long long)(chunk >> 10), growth, mode, f, cm, f / cm, gf, gc, fcopy, fqueue, cmt);
}

static void first_use_T(bcase_t *c, double memcpy_us)
{
    first_use_T_one(c, memcpy_us, 0, 0, -1, "gdte_first_use");
    if (!getenv("GDTEBENCH_FIRST_USE_SWEEP")) return;
    /* mode: GDTE_DEVPLAN_DMA_RUNS | GDTE_DEVPLAN_URGENT | GDTE_DEVPLAN_ONE_STREAM; -1: the default */
    static const struct {
        int kib, growth, mode;
    } v[] = {{32, 4, 0}, {32, 4, 4}, {32, 4, 5}, {8, 4, 4}, {16, 4, 4}, {64, 4, 4}, {8, 8, 4}, {32, 2, 4}, {32, 4, 1}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char label[48];
        snprintf(label, sizeof label, "first_use_c%d_g%d_m%d", v[i].kib, v[i].growth, v[i].mode);
        first_use_T_one(c, memcpy_us, (int64_t)v[i].kib << 10, v[i].growth, v[i].mode, label);
    }
}

/* callcost: the host time of one gdte_pack of a cached 64 KiB face (64 blocks of 1 KiB, 128 KiB
 * apart: STRIDED, FLAT), launch included: the async form on a stream (the stream drained every
 * CC_BATCH calls, outside the clock) and the blocking form; the host time of a 64 KiB
 * cudaMemcpyAsync beside them (ratio column: its time over the row's). Then the same calls with
 * the per-stage profile on (callprof.h): mean microseconds per call of each stage, rows
 * "async_<stage>" and "blocking_<stage>". Target: host_async <= 2 us. */
#define CC_CALLS 4000
#define CC_BATCH 50
static void callcost(void)
{
    static const char *stage[GDTE_CP_COUNT_] = {"layout", "memkind", "plan",  "choose",    "launch",
                                                      "sync",   "total",   "first_copy", "first_queue"};
    gdte_type_h t;
    CK(gdte_type_create_vector(64, 128, 128 * 128, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t));
    CK(gdte_type_commit(t));
    const size_t ub = (size_t)63 * 128 * 128 * 8 + 128 * 8, n = 64 * 1024;
    char *user, *packed;
    CK(gdte_gpu_malloc((void **)&user, ub));
    CK(gdte_gpu_malloc((void **)&packed, n));
    fill_device(user, ub);
    gdte_pack_params_t pa = {GDTE_PACK_FIELD_STREAM | GDTE_PACK_FIELD_FLAGS, 0, 0, S, GDTE_PACK_FLAG_ASYNC};
    gdte_pack_params_t pb = {GDTE_PACK_FIELD_STREAM, 0, 0, S, 0};
    static double ta[CC_CALLS], tb[CC_CALLS], tm[CC_CALLS];
    int64_t done;
    gdte_callprof_t prof;
    gdte_callprof_enable(0);
    for (int i = 0; i < 200; i++) CK(gdte_pack(user, 1, t, packed, (int64_t)n, &pa, &done)); /* warm: caches */
    CK(gdte_gpu_stream_synchronize(S));
    printf("callcost: face64k, 64 blocks of 1 KiB at 128 KiB (cached), host time per call\n");
    for (int pass = 0; pass < 2; pass++) {
        gdte_callprof_enable(pass);
        for (int form = 0; form < 2; form++) {
            double *tt = form ? tb : ta;
            gdte_callprof_take(&prof);
            for (int i = 0; i < CC_CALLS; i++) {
                double t0 = gdte_time_now();
                CK(gdte_pack(user, 1, t, packed, (int64_t)n, form ? &pb : &pa, &done));
                tt[i] = (gdte_time_now() - t0) * 1e6;
                if (i % CC_BATCH == CC_BATCH - 1) CK(gdte_gpu_stream_synchronize(S));
            }
            CK(gdte_gpu_stream_synchronize(S));
            gdte_callprof_take(&prof);
            if (pass && prof.calls > 0) {
                for (int k = 0; k < GDTE_CP_COUNT_; k++) {
                    char m[64];
                    snprintf(m, sizeof m, "%s_%s", form ? "blocking" : "async", stage[k]);
                    double us = prof.sec[k] / (double)prof.calls * 1e6;
                    fprintf(csv, "%s,%s,face64k,%s,pack,%lld,%.3f,0,0\n", device, commit, m, (long long)n, us);
                    printf("  %-22s %8.3f us per call (mean over %lld calls, profile on)\n", m, us,
                           (long long)prof.calls);
                }
            }
        }
        if (pass) break;
        for (int i = 0; i < CC_CALLS; i++) {
            double t0 = gdte_time_now();
            CK(gdte_gpu_memcpy_async(packed, user, n, S));
            tm[i] = (gdte_time_now() - t0) * 1e6;
            if (i % CC_BATCH == CC_BATCH - 1) CK(gdte_gpu_stream_synchronize(S));
        }
        CK(gdte_gpu_stream_synchronize(S));
        qsort(ta, CC_CALLS, sizeof *ta, bench_cmp_double);
        qsort(tb, CC_CALLS, sizeof *tb, bench_cmp_double);
        qsort(tm, CC_CALLS, sizeof *tm, bench_cmp_double);
        const double ma = ta[CC_CALLS / 2], mb = tb[CC_CALLS / 2], mm = tm[CC_CALLS / 2];
        row("face64k", "memcpy_async_host", GDTE_DIR_PACK, (int64_t)n, mm, mm);
        row("face64k", "host_async", GDTE_DIR_PACK, (int64_t)n, ma, mm);
        row("face64k", "host_blocking", GDTE_DIR_PACK, (int64_t)n, mb, mm);
        printf("  host time of an async pack: median %.2f us, p90 %.2f us [target <= 2 us]; blocking %.2f us; "
               "cudaMemcpyAsync of 64 KiB %.2f us\n",
               ma, ta[CC_CALLS * 9 / 10], mb, mm);
    }
    gdte_callprof_enable(0);
    CK(gdte_gpu_free(user));
    CK(gdte_gpu_free(packed));
    gdte_type_free(&t);
}

static double dram_bytes_per_us; /* from the largest memcpy: bytes read + written per us */

static void run_case(const char *name)
{
    bcase_t c;
    memset(&c, 0, sizeof c);
    c.name = name;
    c.type = make_type(name, &c.user_bytes);
    CK(gdte_type_pack_size(1, c.type, &c.n));
    CK(gdte_engine_layout(c.type, 1, &c.L));
    CK(gdte_gpu_malloc((void **)&c.user, c.user_bytes));
    CK(gdte_gpu_malloc((void **)&c.packed, (size_t)c.n));
    fill_device(c.user, c.user_bytes);
    fill_device(c.packed, (size_t)c.n);
    char desc[256];
    gdte_type_describe(c.type, desc, sizeof desc);
    gdte_kvar_t v = gdte_gpu_exec_variant(&c.L, GDTE_DIR_PACK);
    static const char *vn[] = {"none", "contig", "strided", "tiled", "dev_warp", "dev_thread", "flat", "copy", "periodic"};
    printf("%s: %s; kernel %s; %lld packed bytes\n", name, desc, vn[v], (long long)c.n);
    if (!verify(&c)) {
        printf("  VERIFY FAILED: gdte's result differs from the host executor's\n");
        verify_failures++;
    } else {
        printf("  verified against the host executor (pack, and unpack into scribbled memory)\n");
    }
    /* Regular layouts: each kernel variant that can run them, forced, verified like the default
     * (a contiguous one too: FLAT there is a copy kernel plus its divisions, a calibration). */
    static const struct {
        gdte_kvar_t v;
        const char *method;
        int units; /* for UNITS layouts (else regular ones) */
    } forced[] = {{GDTE_KVAR_STRIDED, "gdte_strided", 0},      {GDTE_KVAR_FLAT, "gdte_flat", 0},
                  {GDTE_KVAR_TILED, "gdte_tiled", 0},          {GDTE_KVAR_DEV_THREAD, "gdte_dev_thread", 1},
                  {GDTE_KVAR_DEV_WARP, "gdte_dev_warp", 1},    {GDTE_KVAR_PERIODIC, "gdte_periodic", 1}};
    const int nforced = (int)(sizeof forced / sizeof *forced);
    int forced_on[sizeof forced / sizeof *forced] = {0};
    /* Irregular layouts: the DEV kernels and PERIODIC side by side, where the default is one of
     * them and PERIODIC can run the layout (the struct arrays; T stays on DEV_WARP alone). */
    const int is_units = c.L.kind == GDTE_LAYOUT_KIND_UNITS;
    gdte_gpu_exec_force_variant(GDTE_KVAR_PERIODIC);
    const int units_rows = is_units && gdte_gpu_exec_variant(&c.L, GDTE_DIR_PACK) == GDTE_KVAR_PERIODIC;
    gdte_gpu_exec_force_variant(GDTE_KVAR_NONE);
    const int regular = v == GDTE_KVAR_STRIDED || v == GDTE_KVAR_FLAT || v == GDTE_KVAR_TILED || v == GDTE_KVAR_CONTIG;
    for (int f = 0; f < nforced; f++) {
        if (!(forced[f].units ? units_rows : regular)) continue;
        gdte_gpu_exec_force_variant(forced[f].v);
        if (gdte_gpu_exec_variant(&c.L, GDTE_DIR_PACK) == forced[f].v) {
            int ok = verify(&c);
            gdte_kvar_t ran;
            int w;
            gdte_gpu_exec_last(&ran, &w);
            forced_on[f] = ran == forced[f].v;
            printf("  %s (%s, %d-byte words): %s%s\n", forced[f].method, vn[ran], w,
                   ok ? "verified against the host executor" : "VERIFY FAILED",
                   forced_on[f] ? "" : "; another variant ran, not timed");
            if (!ok) verify_failures++;
        }
        gdte_gpu_exec_force_variant(GDTE_KVAR_NONE);
    }
    /* Small layouts: 20 operations per sample, replayed from a graph (see time_op); the
     * launch-inclusive stream times are printed beside them. */
    int small = c.n < (16 << 20), k = small ? 20 : 1;
    for (int d = 0; d < 2; d++) {
        gdte_dir_t dir = d ? GDTE_DIR_UNPACK : GDTE_DIR_PACK;
        double mc = time_op(&c, op_memcpy, dir, RUNS, k, small);
        if (c.n >= (256 << 20) && d == 0) dram_bytes_per_us = 2.0 * c.n / mc;
        row(name, "memcpy", dir, c.n, mc, mc);
        double g = time_op(&c, op_gdte, dir, RUNS, k, small);
        row(name, "gdte", dir, c.n, g, mc);
        for (int f = 0; f < nforced; f++) {
            if (!forced_on[f]) continue;
            gdte_gpu_exec_force_variant(forced[f].v);
            row(name, forced[f].method, dir, c.n, time_op(&c, op_gdte, dir, RUNS, k, small), mc);
            gdte_gpu_exec_force_variant(GDTE_KVAR_NONE);
        }
        if (small)
            printf("  (stream, launches included: memcpy %.1f us, gdte %.1f us)\n",
                   time_op(&c, op_memcpy, dir, RUNS, k, 0), time_op(&c, op_gdte, dir, RUNS, k, 0));
        if (is_vector(&c)) row(name, "memcpy2d", dir, c.n, time_op(&c, op_memcpy2d, dir, RUNS, k, small), mc);
        if (d == 0) list_blocks(&c);
        double pb = time_op(&c, op_perblock, dir, PERBLOCK_RUNS, 1, 0);
        if (c.nlist < c.nblocks) {
            printf("  (perblock: timed %lld of %lld blocks, scaled)\n", (long long)c.nlist, (long long)c.nblocks);
            pb *= (double)c.nblocks / (double)c.nlist;
        }
        row(name, "perblock", dir, c.n, pb, mc);
        if (!strcmp(name, "face_x") && dram_bytes_per_us > 0) {
            /* Each 8-byte element costs one 32-byte sector of the strided side, the packed side
             * is dense. A scattered 8-byte write also makes its sector be read first (partial
             * sector, ECC), so unpack has a second bound counting that read. */
            double bound = (c.nblocks * 32.0 + c.n) / dram_bytes_per_us;
            printf("  face_x %s: 32-byte-sector bound %.1f us (at %.0f GB/s), gdte %.1f us: x%.2f of the bound "
                   "[target <= 1.25]\n",
                   d ? "unpack" : "pack", bound, dram_bytes_per_us / 1e3, g, g / bound);
            if (d) {
                double rmw = (c.nblocks * 64.0 + c.n) / dram_bytes_per_us;
                printf("  face_x unpack: with the read of each written sector, bound %.1f us: x%.2f\n", rmw, g / rmw);
            }
        }
        if (!strcmp(name, "T") && d == 0) first_use_T(&c, mc);
    }
    CK(gdte_gpu_free(c.user));
    CK(gdte_gpu_free(c.packed));
    free(c.boff);
    free(c.bpk);
    free(c.blen);
    gdte_type_free(&c.type);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT.csv [layout,...]\n", argv[0]);
        return 2;
    }
    CK(gdte_init(NULL));
    if (!gdte_gpu_available()) {
        printf("no usable GPU (%s): nothing to measure\n", gdte_gpu_last_error());
        return 77;
    }
    gdte_gpu_props_t pr;
    CK(gdte_gpu_get_props(-1, &pr));
    const char *short_name = strstr(pr.name, "H100") ? "h100" : strstr(pr.name, "H200") ? "h200" : NULL;
    if (short_name) {
        snprintf(device, sizeof device, "%s", short_name);
    } else {
        snprintf(device, sizeof device, "%s", pr.name);
        for (char *q = device; *q; q++)
            if (*q == ',' || *q == ' ') *q = '_';
    }
    const char *cm = getenv("GDTETEST_COMMIT");
    snprintf(commit, sizeof commit, "%s", cm && *cm ? cm : "unknown");
    printf("device %s (%s, %d SMs, L2 %d MB), commit %s\n", device, pr.name, pr.sm_count, pr.l2_bytes >> 20, commit);
    csv = fopen(argv[1], "w");
    if (!csv) {
        perror(argv[1]);
        return 1;
    }
    fprintf(csv, "device,commit,layout,method,direction,packed_bytes,median_us,gbps,ratio_to_memcpy\n");
    CK(gdte_gpu_stream_create(&S));
    pattern = malloc(PATTERN_BYTES);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < PATTERN_BYTES; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pattern[i] = (unsigned char)(x >> 24);
    }
    const char *list = argc > 2 ? argv[2] : "V,V64,T,face_x,face_y,face_z,transpose,struct3,struct3p,particle,contig512,callcost";
    char *dup = strdup(list);
    for (char *tok = strtok(dup, ","); tok; tok = strtok(NULL, ","))
        if (!strcmp(tok, "callcost"))
            callcost();
        else
            run_case(tok);
    free(dup);
    gdte_devplan_stats_t ds;
    gdte_devplan_get_stats(&ds);
    printf("device plan cache: %lld uploads, %lld hits, %lld misses, %lld evictions\n", (long long)ds.uploads,
           (long long)ds.hits, (long long)ds.misses, (long long)ds.evictions);
    fclose(csv);
    CK(gdte_gpu_stream_destroy(S));
    gdte_finalize();
    if (verify_failures) printf("%d layouts FAILED verification\n", verify_failures);
    return verify_failures ? 1 : 0;
}
