/*
 * Extreme constructor arguments, run under UBSan in the sanitizer build: every value a
 * caller passes goes through checked arithmetic. Displacements, strides, lb and extent of
 * INT64_MIN (no negation) are GDTE_ERR_INVALID_ARG; bounds that leave int64 are
 * GDTE_ERR_OVERFLOW; darray arguments whose products overflow (a huge distribution argument,
 * a huge process grid) return at once, with the type MPI defines where there is one. Before,
 * a BLOCK darray with darg 2^62+8 never returned and UBSan stopped on INT64_MIN negations.
 *
 * CYCLIC darrays are built in their strided form: 64 Mi doubles commit with memory
 * proportional to the description (before: 1.6 GB for a 224-byte plan), checked with
 * gdte_type_get_info and the process's peak RSS, not time. Small darrays of every
 * distribution are checked element by element against MPI's definition.
 */
#define _GNU_SOURCE
#include <sys/resource.h>
#include "testutil.h"
#include "engine/engine.h"

#define DBL gdte_type_predefined(GDTE_BASIC_DOUBLE)
#define INT gdte_type_predefined(GDTE_BASIC_INT32)
#define CHR gdte_type_predefined(GDTE_BASIC_CHAR)

static gdte_type_h sentinel(void) { return (gdte_type_h)(uintptr_t)0x5e5e; }

/* A constructor call that must fail with `expected` and leave *type_p alone. */
#define REFUSED(call_with_out, out, expected)                                                      \
    do {                                                                                           \
        out = sentinel();                                                                          \
        CHECK_ST(call_with_out, expected);                                                         \
        CHECK(out == sentinel());                                                                  \
    } while (0)

static int64_t peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* 64 Mi doubles dealt cyclically to 2 and to 4 processes: strided plans, small memory. */
static void test_cyclic_memory(void)
{
    int64_t rss0 = peak_rss_kib();
    const int64_t g = 64ll << 20;
    for (int p = 2; p <= 4; p += 2) {
        for (int rank = 0; rank < p; rank += p - 1) {
            int64_t gs[1] = {g}, darg[1] = {GDTE_DISTRIBUTE_DFLT_DARG}, ps[1] = {p};
            gdte_distribute_t cyc[1] = {GDTE_DISTRIBUTE_CYCLIC};
            gdte_type_h t;
            CHECK_OK(gdte_type_create_darray(p, rank, 1, gs, cyc, darg, ps, GDTE_ORDER_C, DBL, &t));
            CHECK_OK(gdte_type_commit(t));
            gdte_type_info_t in;
            CHECK_OK(gdte_type_get_info(t, &in));
            CHECK_EQ(in.size, g / p * 8);
            CHECK_EQ(in.extent, g * 8);
            CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
            CHECK_EQ(in.num_blocks, g / p);
            CHECK_EQ(in.num_units, 0);
            CHECK(in.plan_bytes <= 1024);
            /* pack a few elements from the start of the stream (a partial pack) */
            double src[16], out[4];
            for (int i = 0; i < 16; i++) src[i] = i;
            gdte_pack_params_t pp = {.field_mask = GDTE_PACK_FIELD_MAX_BYTES, .max_bytes = sizeof out};
            int64_t done = 0;
            CHECK_OK(gdte_pack(src, 1, t, out, sizeof out, &pp, &done));
            CHECK_EQ(done, (int64_t)sizeof out);
            for (int i = 0; i < 4; i++) CHECK(out[i] == rank + i * p);
            CHECK_OK(gdte_type_free(&t));
        }
    }
    /* 2-D, CYCLIC(3) by CYCLIC(5), each dimension dividing evenly */
    int64_t gs[2] = {3 * 4 * 512, 5 * 2 * 4096}, darg[2] = {3, 5}, ps[2] = {4, 2};
    gdte_distribute_t cyc[2] = {GDTE_DISTRIBUTE_CYCLIC, GDTE_DISTRIBUTE_CYCLIC};
    gdte_type_h t;
    CHECK_OK(gdte_type_create_darray(8, 5, 2, gs, cyc, darg, ps, GDTE_ORDER_C, DBL, &t));
    CHECK_OK(gdte_type_commit(t));
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(t, &in));
    CHECK_EQ(in.size, gs[0] * gs[1] / 8 * 8);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK(in.plan_bytes <= 1024);
    CHECK_OK(gdte_type_free(&t));
    int64_t grown = peak_rss_kib() - rss0;
    printf("cyclic darrays of 64 Mi doubles: peak RSS grew by %lld KiB\n", (long long)grown);
    CHECK(grown < 64 * 1024); /* the old build took 1.6 GB */
}

/* ---- darrays against MPI's definition, element by element ---- */

/* Does coordinate c of p own index i of a dimension of g? (MPI 4.1, 5.1.4) */
static int owns(gdte_distribute_t dist, int64_t g, int64_t p, int64_t c, int64_t darg, int64_t i)
{
    if (dist == GDTE_DISTRIBUTE_NONE) return 1;
    if (dist == GDTE_DISTRIBUTE_BLOCK) {
        int64_t b = darg == GDTE_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
        return i / b == c;
    }
    int64_t b = darg == GDTE_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    return (i / b) % p == c;
}

static void test_darray_model(void)
{
    tu_rng_t r = {0xda77a};
    int cases = 0;
    for (int iter = 0; iter < 3000; iter++) {
        int nd = (int)tu_range(&r, 1, 3), size = 1;
        int64_t gs[3], darg[3], ps[3], coord[3];
        gdte_distribute_t dist[3];
        for (int d = 0; d < nd; d++) {
            gs[d] = tu_range(&r, 1, 13);
            int k = (int)tu_range(&r, 0, 2);
            dist[d] = k == 0 ? GDTE_DISTRIBUTE_BLOCK : k == 1 ? GDTE_DISTRIBUTE_CYCLIC : GDTE_DISTRIBUTE_NONE;
            ps[d] = dist[d] == GDTE_DISTRIBUTE_NONE ? 1 : tu_range(&r, 1, 4);
            darg[d] = tu_chance(&r, 1, 3) ? GDTE_DISTRIBUTE_DFLT_DARG : tu_range(&r, 1, 6);
            if (dist[d] == GDTE_DISTRIBUTE_BLOCK && darg[d] != GDTE_DISTRIBUTE_DFLT_DARG && darg[d] * ps[d] < gs[d])
                darg[d] = (gs[d] + ps[d] - 1) / ps[d];
            size *= (int)ps[d];
        }
        int rank = (int)tu_range(&r, 0, size - 1), order = (int)tu_range(&r, 0, 1);
        for (int d = nd - 1, rr = rank; d >= 0; d--) {
            coord[d] = rr % ps[d];
            rr /= (int)ps[d];
        }
        gdte_type_h t;
        CHECK_OK(gdte_type_create_darray(size, rank, nd, gs, dist, darg, ps, order ? GDTE_ORDER_FORTRAN : GDTE_ORDER_C,
                                         INT, &t));
        CHECK_OK(gdte_type_commit(t));
        /* expected: global indices in memory order (C: last fastest) that this rank owns */
        int64_t n = 1;
        for (int d = 0; d < nd; d++) n *= gs[d];
        int32_t *arr = malloc((size_t)n * 4), *exp = malloc((size_t)n * 4 + 4), *got = malloc((size_t)n * 4 + 4);
        int64_t ne = 0;
        for (int64_t lin = 0; lin < n; lin++) {
            arr[lin] = (int32_t)lin;
            int64_t rest = lin, ok = 1;
            for (int k = 0; k < nd; k++) {
                int d = order ? k : nd - 1 - k; /* fastest first */
                int64_t i = rest % gs[d];
                rest /= gs[d];
                ok &= owns(dist[d], gs[d], ps[d], coord[d], darg[d], i);
            }
            if (ok) exp[ne++] = (int32_t)lin;
        }
        gdte_type_info_t in;
        CHECK_OK(gdte_type_get_info(t, &in));
        CHECK_EQ(in.size, ne * 4);
        CHECK_EQ(in.extent, n * 4);
        int64_t done = -1;
        CHECK_OK(gdte_pack(arr, 1, t, got, n * 4 + 4, NULL, &done));
        CHECK_EQ(done, ne * 4);
        if (done == ne * 4 && memcmp(got, exp, (size_t)ne * 4)) {
            fprintf(stderr, "darray case %d: packed elements differ from MPI's definition\n", iter);
            tu_failures++;
        }
        free(arr), free(exp), free(got);
        CHECK_OK(gdte_type_free(&t));
        cases++;
    }
    printf("darray model: %d random darrays match MPI's definition\n", cases);
}

/* ---- extreme darray arguments ---- */
static void test_darray_extremes(void)
{
    gdte_type_h t;
    gdte_distribute_t blk[2] = {GDTE_DISTRIBUTE_BLOCK, GDTE_DISTRIBUTE_BLOCK};
    gdte_distribute_t cyc[2] = {GDTE_DISTRIBUTE_CYCLIC, GDTE_DISTRIBUTE_CYCLIC};
    const int64_t huge = (1ll << 62) + 8;
    /* BLOCK and CYCLIC, darg 2^62+8 on small arrays: valid in MPI, rank 0 owns the whole
     * dimension, the others nothing. (Over 4 processes, BLOCK looped forever: darg * 4 wrapped
     * to 32, passing the check that blocks cover 30 indices, and rank 2's first index
     * wrapped negative.) */
    for (int pp = 2; pp <= 4; pp += 2) {
        int64_t g[1] = {pp == 2 ? 100 : 30}, d[1] = {huge}, p[1] = {pp};
        for (int dist = 0; dist < 2; dist++) {
            for (int rank = 0; rank < pp; rank++) {
                gdte_type_info_t in;
                CHECK_OK(gdte_type_create_darray(pp, rank, 1, g, dist ? cyc : blk, d, p, GDTE_ORDER_C, DBL, &t));
                CHECK_OK(gdte_type_get_info(t, &in));
                CHECK_EQ(in.size, rank == 0 ? g[0] * 8 : 0);
                CHECK_EQ(in.extent, g[0] * 8);
                CHECK_OK(gdte_type_free(&t));
            }
        }
    }
    /* huge darg and a huge dimension: the array's extent overflows */
    {
        int64_t g[1] = {huge + 8}, d[1] = {huge}, p[1] = {2};
        REFUSED(gdte_type_create_darray(2, 1, 1, g, blk, d, p, GDTE_ORDER_C, DBL, &t), t, GDTE_ERR_OVERFLOW);
        REFUSED(gdte_type_create_darray(2, 0, 1, g, cyc, d, p, GDTE_ORDER_FORTRAN, DBL, &t), t, GDTE_ERR_OVERFLOW);
        /* of bytes it fits: rank 1 owns the last 8 indices */
        gdte_type_info_t in;
        CHECK_OK(gdte_type_create_darray(2, 1, 1, g, blk, d, p, GDTE_ORDER_C, CHR, &t));
        CHECK_OK(gdte_type_get_info(t, &in));
        CHECK_EQ(in.size, 8);
        CHECK_EQ(in.true_lb, huge);
        CHECK_OK(gdte_type_free(&t));
    }
    /* BLOCK darg * psize overflowing covers any dimension */
    {
        int64_t g[1] = {1000}, d[1] = {1ll << 62}, p[1] = {4};
        CHECK_OK(gdte_type_create_darray(4, 3, 1, g, blk, d, p, GDTE_ORDER_C, INT, &t));
        CHECK_OK(gdte_type_free(&t));
    }
    /* process grids whose product overflows or exceeds `size` */
    {
        int64_t g[2] = {10, 10}, d[2] = {GDTE_DISTRIBUTE_DFLT_DARG, GDTE_DISTRIBUTE_DFLT_DARG};
        int64_t p1[2] = {1ll << 62, 4}, p2[2] = {1ll << 32, 1ll << 32}, p3[2] = {INT64_MAX, INT64_MAX};
        REFUSED(gdte_type_create_darray(4, 0, 2, g, blk, d, p1, GDTE_ORDER_C, INT, &t), t, GDTE_ERR_INVALID_ARG);
        REFUSED(gdte_type_create_darray(1 << 30, 0, 2, g, cyc, d, p2, GDTE_ORDER_C, INT, &t), t, GDTE_ERR_INVALID_ARG);
        REFUSED(gdte_type_create_darray(2147483647, 5, 2, g, cyc, d, p3, GDTE_ORDER_C, INT, &t), t, GDTE_ERR_INVALID_ARG);
    }
    /* huge gsizes: the extent overflows before anything is built */
    {
        int64_t g[2] = {1ll << 40, 1ll << 40}, d[2] = {GDTE_DISTRIBUTE_DFLT_DARG, GDTE_DISTRIBUTE_DFLT_DARG}, p[2] = {1, 1};
        REFUSED(gdte_type_create_darray(1, 0, 2, g, blk, d, p, GDTE_ORDER_C, INT, &t), t, GDTE_ERR_OVERFLOW);
        int64_t g1[1] = {INT64_MAX}, p1[1] = {3};
        REFUSED(gdte_type_create_darray(3, 2, 1, g1, blk, d, p1, GDTE_ORDER_C, INT, &t), t, GDTE_ERR_OVERFLOW);
        /* bytes, INT64_MAX of them, fit: the last rank's block ends at the end */
        CHECK_OK(gdte_type_create_darray(3, 2, 1, g1, cyc, d, p1, GDTE_ORDER_C, CHR, &t));
        CHECK_OK(gdte_type_free(&t));
        CHECK_OK(gdte_type_create_darray(3, 2, 1, g1, blk, d, p1, GDTE_ORDER_C, CHR, &t));
        CHECK_OK(gdte_type_free(&t));
    }
}

/* ---- INT64_MIN and overflowing bounds in the other constructors ---- */
static void test_int64_min(void)
{
    gdte_type_h t, r;
    const int64_t MIN = INT64_MIN, MAX = INT64_MAX;
    int64_t one = 1, two[2] = {1, 1};
    /* hindexed / hindexed_block / struct displacement INT64_MIN */
    int64_t dmin = MIN, dmin1[2] = {0, MIN};
    REFUSED(gdte_type_create_hindexed(1, &one, &dmin, DBL, &t), t, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_hindexed(2, two, dmin1, DBL, &t), t, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_hindexed_block(1, 1, &dmin, DBL, &t), t, GDTE_ERR_INVALID_ARG);
    gdte_type_h parts[2] = {DBL, INT};
    REFUSED(gdte_type_create_struct(2, two, dmin1, parts, &t), t, GDTE_ERR_INVALID_ARG);
    /* indexed: displacement * extent == INT64_MIN, or past it */
    int64_t d60 = -(1ll << 60), d61 = -(1ll << 61) - 1;
    REFUSED(gdte_type_create_indexed(1, &one, &d60, DBL, &t), t, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_indexed_block(1, 1, &d61, DBL, &t), t, GDTE_ERR_OVERFLOW);
    /* INT64_MIN + 1 displacement of a child whose lb is -1: the type's lb would be INT64_MIN */
    gdte_type_h lbm1;
    CHECK_OK(gdte_type_create_resized(DBL, -1, 16, &lbm1));
    int64_t dmin_1 = MIN + 1;
    REFUSED(gdte_type_create_hindexed(1, &one, &dmin_1, lbm1, &t), t, GDTE_ERR_OVERFLOW);
    /* the data alone reaches INT64_MIN + 1: valid, and every bound and extent is right */
    CHECK_OK(gdte_type_create_hindexed(1, &one, &dmin_1, DBL, &t));
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(t, &in));
    CHECK_EQ(in.true_lb, MIN + 1);
    CHECK_EQ(in.true_extent, 8);
    CHECK_OK(gdte_type_free(&t));
    /* two blocks 2^63 apart: the extent overflows */
    int64_t far[2] = {-(1ll << 62), 1ll << 62};
    REFUSED(gdte_type_create_hindexed(2, two, far, DBL, &t), t, GDTE_ERR_OVERFLOW);
    int64_t dmax = MAX;
    REFUSED(gdte_type_create_hindexed(1, &one, &dmax, DBL, &t), t, GDTE_ERR_OVERFLOW);
    /* hvector stride INT64_MIN, and strides whose span overflows */
    REFUSED(gdte_type_create_hvector(2, 1, MIN, DBL, &t), t, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_hvector(1, 1, MIN, DBL, &t), t, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_hvector(2, 1, MIN + 1, DBL, &t), t, GDTE_ERR_OVERFLOW);
    REFUSED(gdte_type_create_hvector(3, 1, MIN / 2, DBL, &t), t, GDTE_ERR_OVERFLOW);
    REFUSED(gdte_type_create_hvector(2, 1, MAX, DBL, &t), t, GDTE_ERR_OVERFLOW);
    REFUSED(gdte_type_create_vector(2, 1, MIN / 8, DBL, &t), t, GDTE_ERR_INVALID_ARG); /* stride*8 == INT64_MIN */
    REFUSED(gdte_type_create_vector(2, 1, MIN / 4, DBL, &t), t, GDTE_ERR_OVERFLOW);
    /* blocks of a child with a negative extent reaching INT64_MIN */
    gdte_type_h neg;
    CHECK_OK(gdte_type_create_resized(DBL, 0, -(1ll << 62), &neg));
    REFUSED(gdte_type_create_contiguous(3, neg, &t), t, GDTE_ERR_OVERFLOW);
    REFUSED(gdte_type_create_vector(1, 3, 1, neg, &t), t, GDTE_ERR_OVERFLOW);
    CHECK_OK(gdte_type_free(&neg));
    /* resized lb / extent INT64_MIN, and lb + extent past INT64_MAX */
    REFUSED(gdte_type_create_resized(DBL, MIN, 8, &r), r, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_resized(DBL, MIN, 0, &r), r, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_resized(DBL, 0, MIN, &r), r, GDTE_ERR_INVALID_ARG);
    REFUSED(gdte_type_create_resized(DBL, -1, MIN + 1, &r), r, GDTE_ERR_OVERFLOW);
    REFUSED(gdte_type_create_resized(DBL, MAX, 1, &r), r, GDTE_ERR_OVERFLOW);
    CHECK_OK(gdte_type_create_resized(DBL, MIN + 1, MAX, &r)); /* lb -(2^63 - 1), ub 0: representable */
    CHECK_OK(gdte_type_free(&r));
    /* a type built over a child whose bounds sit at the edge */
    gdte_type_h edge;
    CHECK_OK(gdte_type_create_resized(DBL, MIN + 1, 8, &edge));
    REFUSED(gdte_type_create_hindexed(1, &one, &(int64_t){-1}, edge, &t), t, GDTE_ERR_OVERFLOW);
    REFUSED(gdte_type_create_hvector(2, 1, -8, edge, &t), t, GDTE_ERR_OVERFLOW);
    CHECK_OK(gdte_type_create_contiguous(2, edge, &t)); /* upwards it fits */
    CHECK_OK(gdte_type_free(&t));
    CHECK_OK(gdte_type_free(&edge));
    /* blocks ending near INT64_MAX: the plan walks them without stepping past the last */
    {
        gdte_type_h v, parts2[2];
        CHECK_OK(gdte_type_create_hvector(2, 1, 1ll << 61, DBL, &v));
        int64_t bl2[2] = {1, 1}, d2[2] = {0, 1ll << 62};
        parts2[0] = DBL;
        parts2[1] = v;
        CHECK_OK(gdte_type_create_struct(2, bl2, d2, parts2, &t));
        CHECK_OK(gdte_type_commit(t));
        CHECK_OK(gdte_type_get_info(t, &in));
        CHECK_EQ(in.layout, GDTE_LAYOUT_UNITS);
        CHECK_EQ(in.true_extent, (1ll << 62) + (1ll << 61) + 8);
        CHECK_OK(gdte_type_free(&t));
        CHECK_OK(gdte_type_free(&v));
    }
    /* subarray offsets and extents past int64 */
    int64_t sz[2] = {1ll << 40, 1ll << 40}, sub[2] = {1, 1}, st[2] = {(1ll << 40) - 1, (1ll << 40) - 1};
    REFUSED(gdte_type_create_subarray(2, sz, sub, st, GDTE_ORDER_C, DBL, &t), t, GDTE_ERR_OVERFLOW);
    CHECK_OK(gdte_type_free(&lbm1));
    /* the library still works */
    CHECK_OK(gdte_type_create_vector(3, 2, 4, INT, &t));
    CHECK_OK(gdte_type_commit(t));
    CHECK_OK(gdte_type_free(&t));
}

int main(void)
{
    if (gdte_init(NULL) != GDTE_OK) return 1;
    int64_t live0 = gdte_engine_live_types();
    test_cyclic_memory(); /* first: the peak RSS it checks is the process's */
    test_darray_extremes();
    test_int64_min();
    test_darray_model();
    CHECK_EQ(gdte_engine_live_types(), live0);
    gdte_finalize();
    return tu_report("engine_extremes");
}
