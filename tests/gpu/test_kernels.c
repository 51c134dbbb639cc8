/*
 * The GPU kernels against the host executor (kcheck.c), built two ways:
 *  - gpu_kernels (label gpu): on the device, through gdte's GPU layer; skips (77) without one.
 *  - kernels_emulated (KC_EMULATED, label kernels-emu): the kernels' source run on the CPU under
 *    tests/gpu/emu, so that CI, which has no GPU, catches indexing, range and alignment errors
 *    before they reach a device. Built with AddressSanitizer and UBSan where available: its
 *    "device" buffers are host memory, so an out-of-bounds or misaligned access is reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/engine.h"
#include "kcheck.h"
#include "util/util.h"

#ifdef KC_EMULATED
static void *e_alloc(size_t n) { return malloc(n); }
static void e_release(void *p) { free(p); }
static void e_copy(void *d, const void *s, size_t n) { memcpy(d, s, n); }
static const gdte_unit_t *e_units(gdte_type_h t, const gdte_layout_t *L)
{
    (void)t;
    return L->units;
}
static gdte_status_t e_exec(const gdte_layout_t *L, const gdte_gpu_exec_opts_t *o, gdte_dir_t dir, void *user,
                            void *packed, int64_t off, int64_t len)
{
    return gdte_gpu_exec_ex(L, o, dir, user, packed, off, len, NULL);
}
static gdte_status_t e_sync(void) { return GDTE_OK; }
static gdte_status_t e_lcopy(const gdte_layout_t *Ls, const void *src, const gdte_layout_t *Ld, void *dst, int64_t off,
                             int64_t len)
{
    return gdte_gpu_exec_copy(Ls, src, Ld, dst, off, len, NULL, 0);
}
static gdte_status_t e_ucopy(const gdte_layout_t *L, const void *src, void *dst, int64_t off, int64_t len)
{
    return gdte_gpu_exec_copy_units(L, src, dst, off, len, NULL, 0);
}
static const kc_ops_t ops = {e_alloc, e_release, e_copy, e_copy, e_units, e_exec, e_sync, e_lcopy, e_ucopy};
#define SIZE_SCALE 1
#define DEFAULT_ITERS 40
#define MAX_COUNT 5
#else
#include "gpu/gpu.h"
#include "kernels/devplan.h"
static void die(const char *what, gdte_status_t st)
{
    fprintf(stderr, "FAIL: %s: %s (%s)\n", what, gdte_status_name(st), gdte_gpu_last_error());
    exit(1);
}
static void *d_alloc(size_t n)
{
    void *p;
    gdte_status_t st = gdte_gpu_malloc(&p, n);
    if (st != GDTE_OK) die("device allocation", st);
    return p;
}
static void d_release(void *p) { gdte_gpu_free(p); }
static void d_copy(void *d, const void *s, size_t n)
{
    gdte_status_t st = gdte_gpu_memcpy(d, s, n);
    if (st != GDTE_OK) die("copy", st);
}
static const gdte_unit_t *d_units(gdte_type_h t, const gdte_layout_t *L)
{
    (void)L;
    const gdte_unit_t *u;
    gdte_status_t st = gdte_devplan_units(t, &u);
    if (st != GDTE_OK) die("plan upload", st);
    return u;
}
static gdte_status_t d_exec(const gdte_layout_t *L, const gdte_gpu_exec_opts_t *o, gdte_dir_t dir, void *user,
                            void *packed, int64_t off, int64_t len)
{
    gdte_status_t st = gdte_gpu_exec_ex(L, o, dir, user, packed, off, len, NULL);
    if (st != GDTE_OK) return st;
    /* a kernel fault shows here */
    return gdte_gpu_device_synchronize();
}
static gdte_status_t d_lcopy(const gdte_layout_t *Ls, const void *src, const gdte_layout_t *Ld, void *dst, int64_t off,
                             int64_t len)
{
    gdte_status_t st = gdte_gpu_exec_copy(Ls, src, Ld, dst, off, len, NULL, 0);
    return st != GDTE_OK ? st : gdte_gpu_device_synchronize();
}
static gdte_status_t d_ucopy(const gdte_layout_t *L, const void *src, void *dst, int64_t off, int64_t len)
{
    gdte_status_t st = gdte_gpu_exec_copy_units(L, src, dst, off, len, NULL, 0);
    return st != GDTE_OK ? st : gdte_gpu_device_synchronize();
}
static const kc_ops_t ops = {d_alloc,  d_release, d_copy, d_copy, d_units, d_exec, gdte_gpu_device_synchronize,
                             d_lcopy,  d_ucopy};
#define SIZE_SCALE 8
#define DEFAULT_ITERS 300
#define MAX_COUNT 64
#endif

/* Arrays of small structs with holes: the layouts PERIODIC is for (UNITS, a short repetition),
 * each word size from 1 to 16 bytes, negative displacements, repetitions over two dimensions
 * (a vector of structs), odd counts and a large one; every variant and word cap (kc_check
 * also cuts the stream into fragments at random bytes, mid-pattern, and misaligns both
 * buffers). The automatic choice must be PERIODIC for each. */
typedef struct periodic_case {
    const char *desc;
    int n;                     /* fields */
    int64_t bl[4], disp[4];
    gdte_basic_t ty[4];
    int64_t lb, extent;        /* resized to these */
    int64_t count, vstride;    /* contiguous(count) of it, or vector(count, 3, vstride) when vstride */
    int64_t elems;             /* elements given to the executor */
} periodic_case_t;

static int check_periodic(uint64_t seed, const int *variants, const int *words, kc_stats_t *st)
{
    static const periodic_case_t cases[] = {
        {"struct {int; hole 4; double; float[3]} (struct3p)", 3, {1, 1, 3}, {0, 8, 16},
         {GDTE_BASIC_INT32, GDTE_BASIC_DOUBLE, GDTE_BASIC_FLOAT}, 0, 32, 37, 0, 3},
        {"struct {double; hole 8; double[2]}: 8-byte words", 2, {1, 2}, {0, 16},
         {GDTE_BASIC_DOUBLE, GDTE_BASIC_DOUBLE}, 0, 32, 29, 0, 5},
        {"struct {complex double; hole 16; complex double[2]}: 16-byte words", 2, {1, 2}, {0, 32},
         {GDTE_BASIC_COMPLEX_DOUBLE, GDTE_BASIC_COMPLEX_DOUBLE}, 0, 80, 17, 0, 3},
        {"struct {char; hole 1; char[3]; hole 2}: byte words", 2, {1, 3}, {0, 2},
         {GDTE_BASIC_CHAR, GDTE_BASIC_CHAR}, 0, 7, 101, 0, 3},
        {"struct {short; hole 2; short[3]}: 2-byte words", 2, {1, 3}, {0, 4},
         {GDTE_BASIC_INT16, GDTE_BASIC_INT16}, 0, 12, 61, 0, 1},
        {"struct at negative displacements {int @-12; float[2] @-4; double @8}, extent 40 from lb -16", 3,
         {1, 2, 1}, {-12, -4, 8}, {GDTE_BASIC_INT32, GDTE_BASIC_FLOAT, GDTE_BASIC_DOUBLE}, -16, 40, 23, 0, 3},
        {"vector(.., 3, 5) of struct {int; hole 4; double}: repetitions over two dimensions", 2, {1, 1},
         {0, 8}, {GDTE_BASIC_INT32, GDTE_BASIC_DOUBLE}, 0, 16, 13, 5, 3},
        {"struct {double x, y, z; hole 4; int id} x large count", 2, {3, 1}, {0, 28},
         {GDTE_BASIC_DOUBLE, GDTE_BASIC_INT32}, 0, 40, 20011, 0, 1},
        {"struct of 24 fields int[1 + k % 3] at 16 k: long map", 0, {0}, {0}, {GDTE_BASIC_INT32}, 0, 0, 9, 0, 3},
    };
    int fails = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const periodic_case_t *c = &cases[i];
        int64_t count = c->count;
        if (c->count > 1000) count = c->count / (SIZE_SCALE == 1 ? 20 : 1); /* the emulator runs a fiber a thread */
        gdte_type_h f[4] = {0}, a = NULL, b = NULL, t = NULL;
        gdte_status_t sta;
        if (c->n) {
            for (int k = 0; k < c->n; k++) f[k] = gdte_type_predefined(c->ty[k]);
            sta = gdte_type_create_struct(c->n, c->bl, c->disp, f, &a);
        } else {
            /* 24 pieces of 4, 8 or 12 bytes 16 bytes apart: 24 units, 192 packed bytes */
            int64_t bl[24], ds[24];
            gdte_type_h ty[24];
            for (int k = 0; k < 24; k++) {
                bl[k] = 1 + k % 3;
                ds[k] = 16 * k;
                ty[k] = gdte_type_predefined(GDTE_BASIC_INT32);
            }
            sta = gdte_type_create_struct(24, bl, ds, ty, &a);
        }
        if (sta == GDTE_OK && (c->extent || c->lb)) sta = gdte_type_create_resized(a, c->lb, c->extent, &b);
        gdte_type_h e = b ? b : a;
        if (sta == GDTE_OK)
            sta = c->vstride ? gdte_type_create_vector(count, 3, c->vstride, e, &t) : gdte_type_create_contiguous(count, e, &t);
        if (sta == GDTE_OK) sta = gdte_type_commit(t);
        if (a) gdte_type_free(&a);
        if (b) gdte_type_free(&b);
        if (sta != GDTE_OK) {
            printf("FAIL: could not build %s: %s\n", c->desc, gdte_status_string(sta));
            fails++;
            if (t) gdte_type_free(&t);
            continue;
        }
        gdte_layout_t L;
        gdte_engine_layout(t, c->elems, &L);
        gdte_kvar_t v = gdte_gpu_exec_variant(&L, GDTE_DIR_PACK);
        if (L.kind != GDTE_LAYOUT_KIND_UNITS || v != GDTE_KVAR_PERIODIC) {
            printf("FAIL: %s: layout kind %d, automatic variant %d, expected units and periodic (%d)\n", c->desc,
                   L.kind, v, GDTE_KVAR_PERIODIC);
            fails++;
        }
        fails += kc_check(&ops, t, c->elems, seed + 300 + (uint64_t)i, c->desc, variants, words, st);
        gdte_type_free(&t);
    }
#ifndef KC_EMULATED
    {
        /* A large count on the device (2^21 particles, 56 MiB packed; 2^16 under a sanitizer,
         * whose racecheck follows every shared-memory access): many waves of blocks and, with the
         * caps kc_check draws, grid-stride loops of many turns. Automatic and forced PERIODIC
         * against DEV_THREAD, natural and 4-byte words. */
        const int64_t big = getenv("GDTETEST_UNDER_SANITIZER") ? (int64_t)1 << 16 : (int64_t)1 << 21;
        static const int v3[] = {GDTE_KVAR_NONE, GDTE_KVAR_PERIODIC, GDTE_KVAR_DEV_THREAD, -1};
        static const int w2[] = {0, 4, -1};
        int64_t bl[2] = {3, 1}, ds[2] = {0, 28};
        gdte_type_h ty[2] = {gdte_type_predefined(GDTE_BASIC_DOUBLE), gdte_type_predefined(GDTE_BASIC_INT32)};
        gdte_type_h a = NULL, b = NULL;
        if (gdte_type_create_struct(2, bl, ds, ty, &a) != GDTE_OK || gdte_type_create_resized(a, 0, 40, &b) != GDTE_OK ||
            gdte_type_commit(b) != GDTE_OK) {
            printf("FAIL: could not build the particle struct\n");
            fails++;
        } else {
            fails += kc_check(&ops, b, big, seed + 399, "2^21 (2^16) x struct {double x, y, z; hole 4; int id}",
                              v3, w2, st);
        }
        if (a) gdte_type_free(&a);
        if (b) gdte_type_free(&b);
    }
#endif
    return fails;
}

int main(void)
{
#ifdef KC_EMULATED
    gdte_knobs_load();
    const char *where = "emulated GPU";
#else
    gdte_status_t ist = gdte_init(NULL);
    if (ist != GDTE_OK) die("gdte_init", ist);
    if (!gdte_gpu_available()) {
        printf("SKIP: no usable GPU (%s)\n", gdte_gpu_last_error());
        gdte_finalize();
        return 77;
    }
    gdte_gpu_props_t props;
    gdte_gpu_get_props(-1, &props);
    const char *where = props.name;
#endif
    uint64_t seed = kc_seed();
    int iters = kc_iters(DEFAULT_ITERS);
    printf("%s: seed 0x%llx (GDTETEST_SEED to repeat), %d random types\n", where, (unsigned long long)seed, iters);
    kc_stats_t st;
    memset(&st, 0, sizeof st);
    int fails = 0;
    static const int all_variants[] = {GDTE_KVAR_NONE,     GDTE_KVAR_STRIDED,    GDTE_KVAR_TILED,    GDTE_KVAR_FLAT,
                                       GDTE_KVAR_DEV_WARP, GDTE_KVAR_DEV_THREAD, GDTE_KVAR_PERIODIC, -1};
    static const int all_words[] = {0, 1, 2, 4, 8, 16, -1};
    static const gdte_kvar_t expect[RT_SHAPE_COUNT_] = {
        GDTE_KVAR_FLAT,     GDTE_KVAR_FLAT, GDTE_KVAR_DEV_WARP, GDTE_KVAR_TILED,
        GDTE_KVAR_PERIODIC, GDTE_KVAR_FLAT, GDTE_KVAR_TILED,    GDTE_KVAR_TILED, GDTE_KVAR_FLAT,
        GDTE_KVAR_DEV_WARP};
    static const int64_t sizes[RT_SHAPE_COUNT_] = {40, 300, 70, 63, 200, 12, 33, 71, 3, 5};
    /* The benchmark's shapes, small, each under every variant and word cap. */
    for (int s = 0; s < RT_SHAPE_COUNT_; s++) {
        char desc[512];
        int64_t n = sizes[s] * (s == RT_SHAPE_FACE_X ? 1 : SIZE_SCALE);
        gdte_type_h t = rt_shape_type((rt_shape_t)s, n, desc, sizeof desc);
        if (!t) {
            printf("FAIL: could not build shape %d\n", s);
            fails++;
            continue;
        }
        gdte_layout_t L;
        gdte_engine_layout(t, 2, &L);
        gdte_kvar_t v = gdte_gpu_exec_variant(&L, GDTE_DIR_PACK);
        if (v != expect[s]) {
            printf("FAIL: %s: automatic variant %d, expected %d\n", desc, v, expect[s]);
            fails++;
        }
        fails += kc_check(&ops, t, 2, seed + (uint64_t)s, desc, all_variants, all_words, &st);
        fails += kc_check_runs(&ops, t, seed, desc, &st);
        fails += kc_check_copy_units(&ops, t, 2, seed + (uint64_t)s, desc, &st);
        gdte_type_free(&t);
    }
    /* Subarrays of 4-D and 5-D arrays: STRIDED layouts of 3 and 4 dimensions, which the random
     * pool seldom makes (FLAT runs them through its general path). */
    for (int nd = 4; nd <= 5; nd++) {
        static const int64_t sz[5] = {5, 4, 3, 6, 7}, sub[5] = {3, 2, 2, 4, 5}, at[5] = {1, 2, 0, 1, 2};
        gdte_type_h t = NULL;
        char desc[64];
        snprintf(desc, sizeof desc, "subarray of a %d-D array of double", nd);
        if (gdte_type_create_subarray(nd, sz, sub, at, GDTE_ORDER_C, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t) !=
                GDTE_OK ||
            gdte_type_commit(t) != GDTE_OK) {
            printf("FAIL: could not build a %s\n", desc);
            fails++;
            continue;
        }
        gdte_layout_t L;
        gdte_engine_layout(t, 2, &L);
        if (L.kind != GDTE_LAYOUT_KIND_STRIDED || L.ndims < 3) {
            printf("FAIL: %s: layout kind %d of %d dimensions, expected STRIDED of 3 or more\n", desc, L.kind, L.ndims);
            fails++;
        }
        fails += kc_check(&ops, t, 2, seed + 100 + (uint64_t)nd, desc, all_variants, all_words, &st);
        gdte_type_free(&t);
    }
    fails += check_periodic(seed, all_variants, all_words, &st);
    /* Random types: every variant, two random word caps each; units layouts also buffer to
     * buffer (gdte_gpu_exec_copy_units). */
    rt_rng_t r = {seed};
    int unit_copies = 0;
    for (int i = 0; i < iters; i++) {
        char desc[4096];
        uint64_t ts = rt_next(&r);
        rt_rng_t tr = {ts};
        gdte_type_h t = rt_random_type(&tr, 4096, desc, sizeof desc);
        if (!t) {
            printf("FAIL: type seed 0x%llx: generator made an invalid type\n", (unsigned long long)ts);
            fails++;
            continue;
        }
        int words[4] = {0, all_words[1 + rt_below(&tr, 5)], all_words[1 + rt_below(&tr, 5)], -1};
        int64_t count = 1 + rt_below(&tr, rt_below(&tr, 4) == 0 ? MAX_COUNT : 5);
        fails += kc_check(&ops, t, count, ts, desc, all_variants, words, &st);
        fails += kc_check_runs(&ops, t, ts, desc, &st);
        int64_t before = st.cases;
        fails += kc_check_copy_units(&ops, t, count, ts, desc, &st);
        unit_copies += st.cases > before;
        gdte_type_free(&t);
    }
    /* Layout to layout in one kernel (RDMA pull between regular types): random pairs, and the
     * benchmark's shapes against each other. */
    int copies = 0;
    for (int i = 0; i < iters; i++) {
        char da[2048], db[2048], desc[4200];
        uint64_t ts = rt_next(&r);
        rt_rng_t tr = {ts};
        gdte_type_h a = rt_random_type(&tr, 4096, da, sizeof da), b = rt_random_type(&tr, 4096, db, sizeof db);
        if (a && b) {
            snprintf(desc, sizeof desc, "%s -> %s", da, db);
            int64_t before = st.cases;
            fails += kc_check_copy(&ops, a, 1 + rt_below(&tr, 4), b, 1 + rt_below(&tr, 4), ts, desc, &st);
            copies += st.cases > before;
        }
        if (a) gdte_type_free(&a);
        if (b) gdte_type_free(&b);
    }
    for (int s1 = 0; s1 < RT_SHAPE_COUNT_; s1++)
        for (int s2 = 0; s2 < RT_SHAPE_COUNT_; s2++) {
            char da[512], db[512], desc[1100];
            int64_t n1 = sizes[s1] * (s1 == RT_SHAPE_FACE_X ? 1 : SIZE_SCALE);
            int64_t n2 = sizes[s2] * (s2 == RT_SHAPE_FACE_X ? 1 : SIZE_SCALE);
            gdte_type_h a = rt_shape_type((rt_shape_t)s1, n1, da, sizeof da);
            gdte_type_h b = rt_shape_type((rt_shape_t)s2, n2, db, sizeof db);
            if (a && b) {
                snprintf(desc, sizeof desc, "%s -> %s", da, db);
                int64_t before = st.cases;
                fails += kc_check_copy(&ops, a, 2, b, 2, seed + 1000 + (uint64_t)(s1 * 16 + s2), desc, &st);
                copies += st.cases > before;
            }
            if (a) gdte_type_free(&a);
            if (b) gdte_type_free(&b);
        }
    /* Units layouts buffer to buffer on the fixed shapes too (triangle, struct, irregular long
     * blocks), so that the check does not depend on the random pool making one at small
     * GDTETEST_ITERS (the sanitizer runs use 12). */
    static const rt_shape_t unit_shapes[] = {RT_SHAPE_TRIANGLE, RT_SHAPE_STRUCT, RT_SHAPE_LONGIDX};
    for (size_t k = 0; k < sizeof unit_shapes / sizeof unit_shapes[0]; k++) {
        char da[512];
        const rt_shape_t sh = unit_shapes[k];
        gdte_type_h t = rt_shape_type(sh, sizes[sh] * SIZE_SCALE, da, sizeof da);
        if (!t) {
            printf("FAIL: could not build shape %d\n", (int)sh);
            fails++;
            continue;
        }
        int64_t before = st.cases;
        fails += kc_check_copy_units(&ops, t, 2, seed + 2000 + (uint64_t)sh, da, &st);
        unit_copies += st.cases > before;
        gdte_type_free(&t);
    }
    printf("layout-to-layout copies checked: %d pairs; same-layout units copies: %d types\n", copies, unit_copies);
    if (!unit_copies) {
        printf("FAIL: no units layout was copied buffer to buffer\n");
        fails++;
    }
    kc_print_coverage(&st);
    /* Every kernel must have run, and the strided, tiled and flat ones at each word size; flat
     * also with 64-bit indices and on ranges that start or end inside a word. */
    for (int w = 1; w <= 16; w *= 2) {
        if (!st.ran[GDTE_KVAR_STRIDED][w]) { printf("FAIL: strided never ran with %d-byte words\n", w); fails++; }
        if (!st.ran[GDTE_KVAR_TILED][w]) { printf("FAIL: tiled never ran with %d-byte words\n", w); fails++; }
        if (!st.ran[GDTE_KVAR_FLAT][w]) { printf("FAIL: flat never ran with %d-byte words\n", w); fails++; }
        if (!st.ran[GDTE_KVAR_COPY][w]) { printf("FAIL: copy never ran with %d-byte words\n", w); fails++; }
        if (!st.flat_wide[w]) { printf("FAIL: flat never ran with 64-bit indices and %d-byte words\n", w); fails++; }
        if (w > 1 && !st.cut[GDTE_KVAR_FLAT][w]) {
            printf("FAIL: flat never ran on a range cutting a %d-byte word\n", w);
            fails++;
        }
    }
    for (int d = 1; d <= 3; d++)
        if (!st.flat_nd[d]) {
            printf("FAIL: flat never ran on a layout of %d%s dimensions\n", d, d == 3 ? " or more" : "");
            fails++;
        }
    if (!st.runs_checked) {
        printf("FAIL: no plan with runs was cut on the device\n");
        fails++;
    }
    for (int w = 1; w <= 16; w *= 2) {
        if (!st.ran[GDTE_KVAR_PERIODIC][w]) { printf("FAIL: periodic never ran with %d-byte words\n", w); fails++; }
        if (w > 1 && !st.cut[GDTE_KVAR_PERIODIC][w]) {
            printf("FAIL: periodic never ran on a range cutting a %d-byte word\n", w);
            fails++;
        }
    }
    if (!st.periodic_wide) {
        printf("FAIL: periodic never ran with 64-bit indices\n");
        fails++;
    }
    if (!st.ran[GDTE_KVAR_DEV_WARP][0] || !st.ran[GDTE_KVAR_DEV_THREAD][0] || !st.ran[GDTE_KVAR_CONTIG][0]) {
        printf("FAIL: a DEV or contiguous variant never ran\n");
        fails++;
    }
    printf("%s\n", fails ? "FAILED" : "PASSED");
#ifndef KC_EMULATED
    gdte_finalize();
#endif
    return fails ? 1 : 0;
}
