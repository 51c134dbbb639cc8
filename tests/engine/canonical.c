/*
 * The canonical form is what the design claims (Wu 2017, 4.2; docs/ARCHITECTURE.md): regular types (vectors of any size, nested
 * vectors, subarrays, indexed types with regular displacements, transposes) commit to a
 * CONTIG or STRIDED plan whose memory does not grow with the number of blocks; adjacent
 * blocks merge; only irregular types get DEV units, one per block of at most the unit size.
 * Every shape is also packed and compared with a gather written out here.
 */
#include "testutil.h"
#include "engine/engine.h"

#define INT gdte_type_predefined(GDTE_BASIC_INT32)
#define DBL gdte_type_predefined(GDTE_BASIC_DOUBLE)
#define FLT gdte_type_predefined(GDTE_BASIC_FLOAT)
#define CHR gdte_type_predefined(GDTE_BASIC_CHAR)

static int64_t small_plan; /* plan_bytes of a vector of 10 blocks */

static gdte_type_info_t info_of(gdte_type_h t)
{
    gdte_type_info_t in;
    memset(&in, 0, sizeof in);
    CHECK_OK(gdte_type_commit(t));
    CHECK_OK(gdte_type_get_info(t, &in));
    return in;
}

/* Pack count elements and compare with the bytes at offs[] (elem bytes each). */
/* offs[] are relative to the buffer; the type's origin is `origin` bytes into it. */
static void check_gather_at(gdte_type_h t, int64_t count, const int64_t *offs, int64_t n, int64_t elem, int64_t span,
                            int64_t origin)
{
    unsigned char *buf = malloc((size_t)span), *out = malloc((size_t)(n * elem)), *exp = malloc((size_t)(n * elem));
    for (int64_t i = 0; i < span; i++) buf[i] = (unsigned char)(i * 31 + (i >> 9));
    for (int64_t i = 0; i < n; i++) memcpy(exp + i * elem, buf + offs[i], (size_t)elem);
    int64_t done = -1;
    CHECK_OK(gdte_pack(buf + origin, count, t, out, n * elem, NULL, &done));
    CHECK_EQ(done, n * elem);
    CHECK(!memcmp(out, exp, (size_t)(n * elem)));
    free(buf), free(out), free(exp);
}

static void check_gather(gdte_type_h t, int64_t count, const int64_t *offs, int64_t n, int64_t elem, int64_t span)
{
    check_gather_at(t, count, offs, n, elem, span, 0);
}

/* Fragments [a, b) at many places, packed and unpacked, against the same gather: the host
 * executor's tiled and untiled paths start and stop anywhere. */
static void check_fragments(gdte_type_h t, int64_t count, const int64_t *offs, int64_t n, int64_t elem, int64_t span,
                            int64_t origin, uint64_t seed)
{
    tu_rng_t r = {seed};
    int64_t total = n * elem;
    unsigned char *buf = malloc((size_t)span), *exp = malloc((size_t)total), *out = malloc((size_t)total + 8);
    unsigned char *back = malloc((size_t)span), *bexp = malloc((size_t)span);
    for (int64_t i = 0; i < span; i++) buf[i] = (unsigned char)(i * 29 + (i >> 10));
    for (int64_t i = 0; i < n; i++) memcpy(exp + i * elem, buf + offs[i], (size_t)elem);
    int bad = 0;
    for (int f = 0; f < 60 && !bad; f++) {
        int64_t a = tu_range(&r, 0, total - 1), b = a + tu_range(&r, 1, f % 3 ? total - a : (total - a < 300 ? total - a : 300));
        gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = a};
        int64_t done = -1;
        memset(out, 0xEE, (size_t)total + 8);
        if (gdte_pack(buf + origin, count, t, out, b - a, &p, &done) != GDTE_OK || done != b - a ||
            memcmp(out, exp + a, (size_t)(b - a)) || out[b - a] != 0xEE)
            bad = 1;
        /* unpack the same range into a poisoned copy: exactly those bytes change */
        memset(back, 0x77, (size_t)span);
        memcpy(bexp, back, (size_t)span);
        for (int64_t q = a; q < b; q++) bexp[offs[q / elem] + q % elem] = exp[q];
        if (gdte_unpack(exp + a, b - a, back + origin, count, t, &p, &done) != GDTE_OK || done != b - a ||
            memcmp(back, bexp, (size_t)span))
            bad = 2;
        if (bad) fprintf(stderr, "fragment [%lld, %lld) of %lld: %s differs\n", (long long)a, (long long)b,
                         (long long)total, bad == 1 ? "pack" : "unpack");
    }
    CHECK(!bad);
    free(buf), free(exp), free(out), free(back), free(bexp);
}

static void test_vector_1e6(void)
{
    gdte_type_h t10, t;
    CHECK_OK(gdte_type_create_vector(10, 1, 2, DBL, &t10));
    small_plan = info_of(t10).plan_bytes;
    CHECK_OK(gdte_type_create_vector(1000000, 1, 2, DBL, &t));
    gdte_type_info_t in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK_EQ(in.ndims, 1);
    CHECK_EQ(in.block_bytes, 8);
    CHECK_EQ(in.num_blocks, 1000000);
    CHECK_EQ(in.num_units, 0);
    CHECK_EQ(in.plan_bytes, small_plan); /* O(1): the same as for 10 blocks */
    CHECK(small_plan < 1024);
    int64_t n = 1000000, *offs = malloc((size_t)n * sizeof *offs);
    for (int64_t i = 0; i < n; i++) offs[i] = 16 * i;
    check_gather(t, 1, offs, n, 8, 16 * n);
    free(offs);
    /* with count: the count becomes one more dimension */
    gdte_layout_t L;
    CHECK_OK(gdte_engine_layout(t, 5, &L));
    CHECK_EQ(L.kind, GDTE_LAYOUT_KIND_STRIDED);
    CHECK_EQ(L.ndims, 2);
    CHECK_OK(gdte_type_free(&t));
    CHECK_OK(gdte_type_free(&t10));
}

static void test_subarray_3d(void)
{
    gdte_type_h t;
    int64_t sz[3] = {100, 100, 100}, sub[3] = {50, 60, 70}, st[3] = {10, 20, 30};
    CHECK_OK(gdte_type_create_subarray(3, sz, sub, st, GDTE_ORDER_C, DBL, &t));
    gdte_type_info_t in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK_EQ(in.ndims, 2);           /* rows are contiguous: 70 doubles */
    CHECK_EQ(in.block_bytes, 70 * 8);
    CHECK_EQ(in.num_blocks, 50 * 60);
    CHECK_EQ(in.plan_bytes, small_plan);
    int64_t n = 50 * 60 * 70, *offs = malloc((size_t)n * sizeof *offs), k = 0;
    for (int64_t i = 0; i < 50; i++)
        for (int64_t j = 0; j < 60; j++)
            for (int64_t l = 0; l < 70; l++) offs[k++] = 8 * ((i + 10) * 10000 + (j + 20) * 100 + (l + 30));
    check_gather(t, 1, offs, n, 8, 8 * 1000000);
    free(offs);
    CHECK_OK(gdte_type_free(&t));
    /* the y-z face of a Fortran array: one double per 100 */
    int64_t fsub[3] = {1, 100, 100}, fst[3] = {7, 0, 0};
    CHECK_OK(gdte_type_create_subarray(3, sz, fsub, fst, GDTE_ORDER_FORTRAN, DBL, &t));
    in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK_EQ(in.ndims, 1); /* (y, z) fold into one dimension of stride 100 */
    CHECK_EQ(in.block_bytes, 8);
    CHECK_OK(gdte_type_free(&t));
    /* full rows and planes fold into one block */
    int64_t psub[3] = {5, 100, 100}, pst[3] = {40, 0, 0};
    CHECK_OK(gdte_type_create_subarray(3, sz, psub, pst, GDTE_ORDER_C, DBL, &t));
    in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_CONTIG);
    CHECK_EQ(in.block_bytes, 5 * 100 * 100 * 8);
    CHECK_EQ(in.num_blocks, 1);
    CHECK_OK(gdte_type_free(&t));
}

static void test_nested_vectors(void)
{
    gdte_type_h inner, outer, outer2;
    CHECK_OK(gdte_type_create_vector(50, 2, 4, FLT, &inner)); /* 2 floats every 16 bytes */
    CHECK_OK(gdte_type_create_hvector(100, 1, 5000, inner, &outer));
    gdte_type_info_t in = info_of(outer);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK_EQ(in.ndims, 2);
    CHECK_EQ(in.block_bytes, 8);
    CHECK_EQ(in.num_blocks, 5000);
    CHECK_EQ(in.plan_bytes, small_plan);
    int64_t n = 100 * 50 * 2, *offs = malloc((size_t)n * sizeof *offs), k = 0;
    for (int64_t i = 0; i < 100; i++)
        for (int64_t j = 0; j < 50; j++)
            for (int64_t l = 0; l < 2; l++) offs[k++] = 5000 * i + 16 * j + 4 * l;
    check_gather(outer, 1, offs, n, 4, 5000 * 100);
    free(offs);
    /* three levels, and a level whose stride tiles the one inside folds away */
    CHECK_OK(gdte_type_create_hvector(3, 1, 800, inner, &outer2)); /* 800 = 50 x 16: tiles */
    in = info_of(outer2);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK_EQ(in.ndims, 1);
    CHECK_EQ(in.num_blocks, 150);
    gdte_type_h deep;
    CHECK_OK(gdte_type_create_hvector(4, 1, 1 << 20, outer, &deep));
    in = info_of(deep);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK_EQ(in.ndims, 3);
    CHECK_OK(gdte_type_free(&deep));
    CHECK_OK(gdte_type_free(&outer2));
    CHECK_OK(gdte_type_free(&outer));
    CHECK_OK(gdte_type_free(&inner));
}

static void test_indexed_regular(void)
{
    int64_t n = 100000, *bl = malloc((size_t)n * sizeof *bl), *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) {
        bl[i] = 3;
        d[i] = 7 * i + 11;
    }
    gdte_type_h t;
    CHECK_OK(gdte_type_create_indexed(n, bl, d, INT, &t));
    gdte_type_info_t in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED); /* found to be a vector */
    CHECK_EQ(in.ndims, 1);
    CHECK_EQ(in.block_bytes, 12);
    CHECK_EQ(in.num_blocks, n);
    CHECK_EQ(in.plan_bytes, small_plan);
    CHECK_OK(gdte_type_free(&t));
    /* adjacent blocks merge into one */
    for (int64_t i = 0; i < n; i++) d[i] = 3 * i;
    CHECK_OK(gdte_type_create_indexed(n, bl, d, INT, &t));
    in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_CONTIG);
    CHECK_EQ(in.num_blocks, 1);
    CHECK(in.is_contiguous);
    CHECK_OK(gdte_type_free(&t));
    /* irregular: one unit per block (blocks are shorter than a unit), plan grows with n */
    for (int64_t i = 0, x = 0; i < n; i++) {
        bl[i] = 1 + (i % 3);
        d[i] = x;
        x += bl[i] + 1 + (i * 7) % 5;
    }
    CHECK_OK(gdte_type_create_indexed(n, bl, d, INT, &t));
    in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_UNITS);
    CHECK_EQ(in.num_blocks, n);
    CHECK_EQ(in.num_units, n);
    CHECK(in.plan_bytes >= n * (int64_t)sizeof(gdte_unit_t));
    int64_t tot = 0;
    for (int64_t i = 0; i < n; i++) tot += bl[i];
    int64_t *offs = malloc((size_t)tot * sizeof *offs), k = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < bl[i]; j++) offs[k++] = 4 * (d[i] + j);
    check_gather(t, 1, offs, tot, 4, 4 * (d[n - 1] + bl[n - 1]));
    free(offs);
    CHECK_OK(gdte_type_free(&t));
    free(bl), free(d);
}

static void test_contig_shapes(void)
{
    gdte_type_h t;
    gdte_type_info_t in;
    CHECK_OK(gdte_type_create_contiguous(1000, INT, &t));
    in = info_of(t);
    CHECK(in.layout == GDTE_LAYOUT_CONTIG && in.is_contiguous && in.block_bytes == 4000);
    CHECK_OK(gdte_type_free(&t));
    CHECK_OK(gdte_type_create_vector(10, 3, 3, INT, &t)); /* stride == blocklength */
    in = info_of(t);
    CHECK(in.layout == GDTE_LAYOUT_CONTIG && in.is_contiguous && in.block_bytes == 120);
    CHECK_OK(gdte_type_free(&t));
    CHECK_OK(gdte_type_create_vector(1, 5, 100, INT, &t)); /* a count-1 dimension is dropped */
    in = info_of(t);
    CHECK(in.layout == GDTE_LAYOUT_CONTIG && in.ndims == 0);
    CHECK_OK(gdte_type_free(&t));
    int64_t bl[3] = {1, 1, 1}, d[3] = {0, 4, 8};
    gdte_type_h ty[3] = {INT, FLT, DBL};
    CHECK_OK(gdte_type_create_struct(3, bl, d, ty, &t)); /* members back to back */
    in = info_of(t);
    CHECK(in.layout == GDTE_LAYOUT_CONTIG && in.is_contiguous && in.num_blocks == 1);
    CHECK_OK(gdte_type_free(&t));
    int64_t hb[3] = {2, 5, 1}, hd[3] = {100, 108, 128};
    CHECK_OK(gdte_type_create_hindexed(3, hb, hd, INT, &t)); /* adjacent but displaced */
    in = info_of(t);
    CHECK(in.layout == GDTE_LAYOUT_CONTIG && in.block_bytes == 32 && in.num_blocks == 1);
    CHECK_OK(gdte_type_free(&t));
}

static void test_transpose(void)
{
    /* A column of an N x N row-major matrix, resized to one element, N of them: the packed
     * stream is the transpose. Two strided dimensions. */
    const int64_t N = 300;
    gdte_type_h col, colr, tr;
    CHECK_OK(gdte_type_create_vector(N, 1, N, DBL, &col));
    CHECK_OK(gdte_type_create_resized(col, 0, 8, &colr));
    CHECK_OK(gdte_type_create_contiguous(N, colr, &tr));
    gdte_type_info_t in = info_of(tr);
    CHECK_EQ(in.layout, GDTE_LAYOUT_STRIDED);
    CHECK_EQ(in.ndims, 2);
    CHECK_EQ(in.block_bytes, 8);
    CHECK_EQ(in.plan_bytes, small_plan);
    int64_t *offs = malloc((size_t)(N * N) * sizeof *offs), k = 0;
    for (int64_t j = 0; j < N; j++)
        for (int64_t i = 0; i < N; i++) offs[k++] = 8 * (i * N + j);
    check_gather(tr, 1, offs, N * N, 8, 8 * N * N);
    check_fragments(tr, 1, offs, N * N, 8, 8 * N * N, 0, 1);
    free(offs);
    CHECK_OK(gdte_type_free(&tr));
    CHECK_OK(gdte_type_free(&colr));
    CHECK_OK(gdte_type_free(&col));
    /* Shapes around the tiled path: a column count that is not a multiple of the tile, a
     * negative row stride, 4-byte and 12-byte elements, two matrices (a third dimension),
     * and count 2. Rows of R elements of `el` bytes, C columns taken, matrix pitch P. */
    struct { int64_t R, C, el, neg, mats, count; } cases[] = {
        {100, 37, 8, 0, 1, 1}, {64, 70, 4, 1, 1, 1}, {50, 33, 12, 0, 2, 1}, {40, 5, 8, 0, 1, 2}, {300, 64, 8, 0, 3, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t R = cases[c].R, C = cases[c].C, el = cases[c].el, pitch = 300 * el, mats = cases[c].mats;
        gdte_type_h e, colv, colrs, m, mm, all;
        CHECK_OK(gdte_type_create_contiguous(el, CHR, &e));
        /* column j: R elements `pitch` bytes apart (upwards if neg), then C columns */
        CHECK_OK(gdte_type_create_hvector(R, 1, cases[c].neg ? -pitch : pitch, e, &colv));
        CHECK_OK(gdte_type_create_resized(colv, 0, el, &colrs));
        CHECK_OK(gdte_type_create_contiguous(C, colrs, &m));
        CHECK_OK(gdte_type_create_hvector(mats, 1, R * pitch + 64, m, &mm));
        CHECK_OK(gdte_type_create_resized(mm, 0, mats * (R * pitch + 64), &all));
        gdte_type_info_t ai = info_of(all);
        CHECK_EQ(ai.layout, GDTE_LAYOUT_STRIDED);
        int64_t cnt = cases[c].count, n = cnt * mats * C * R, k = 0, base = cases[c].neg ? (R - 1) * pitch : 0;
        int64_t *o = malloc((size_t)n * sizeof *o);
        for (int64_t x = 0; x < cnt; x++)
            for (int64_t q = 0; q < mats; q++)
                for (int64_t j = 0; j < C; j++)
                    for (int64_t i = 0; i < R; i++)
                        o[k++] = base + x * mats * (R * pitch + 64) + q * (R * pitch + 64) + j * el +
                                 (cases[c].neg ? -i : i) * pitch;
        int64_t span = base + cnt * mats * (R * pitch + 64) + pitch;
        /* upward rows start `base` bytes into the buffer */
        check_gather_at(all, cnt, o, n, el, span, base);
        check_fragments(all, cnt, o, n, el, span, base, 100 + c);
        free(o);
        CHECK_OK(gdte_type_free(&all));
        CHECK_OK(gdte_type_free(&mm));
        CHECK_OK(gdte_type_free(&m));
        CHECK_OK(gdte_type_free(&colrs));
        CHECK_OK(gdte_type_free(&colv));
        CHECK_OK(gdte_type_free(&e));
    }
}

static void test_units(void)
{
    /* blocks longer than a unit are cut; units cover the stream in order */
    int64_t S = gdte_knob(GDTE_KNOB_DEV_UNIT);
    int64_t bl[3] = {10000, 300, 5000}, d[3] = {0, 20000, 30000};
    gdte_type_h t;
    CHECK_OK(gdte_type_create_hindexed(3, bl, d, CHR, &t));
    gdte_type_info_t in = info_of(t);
    CHECK_EQ(in.layout, GDTE_LAYOUT_UNITS);
    CHECK_EQ(in.num_blocks, 3);
    CHECK_EQ(in.num_units, (10000 + S - 1) / S + 1 + (5000 + S - 1) / S);
    const gdte_unit_t *u;
    int64_t nu;
    CHECK_OK(gdte_engine_units(t, &u, &nu));
    int64_t packed = 0;
    for (int64_t i = 0; i < nu; i++) {
        CHECK_EQ(u[i].packed, packed);
        CHECK(u[i].len > 0 && u[i].len <= S);
        CHECK(u[i].align >= 1 && u[i].align <= 16 && (u[i].src % u[i].align) == 0);
        packed += u[i].len;
    }
    CHECK_EQ(packed, 15300);
    CHECK_OK(gdte_type_free(&t));
}

static void test_many_dims(void)
{
    /* Ten nested levels of 2, none of which fold: more dimensions than a plan holds
     * (GDTE_MAX_DIMS). The canonical form must still pack every byte in order. */
    gdte_type_h cur = CHR, next;
    int64_t stride = 3;
    int nlev = 10;
    for (int l = 0; l < nlev; l++) {
        CHECK_OK(gdte_type_create_hvector(2, 1, stride, cur, &next));
        if (l) CHECK_OK(gdte_type_free(&cur));
        cur = next;
        stride = stride * 2 + 1;
    }
    gdte_type_info_t in = info_of(cur);
    CHECK_EQ(in.size, 1 << nlev);
    CHECK(in.layout == GDTE_LAYOUT_STRIDED || in.layout == GDTE_LAYOUT_UNITS);
    int64_t n = 1 << nlev, *offs = malloc((size_t)n * sizeof *offs);
    for (int64_t i = 0; i < n; i++) {
        int64_t o = 0, s = 3;
        for (int l = 0; l < nlev; l++, s = s * 2 + 1)
            if (i >> l & 1) o += s;
        offs[i] = o;
    }
    check_gather(cur, 1, offs, n, 1, in.true_extent + 1);
    /* and fragments starting anywhere */
    unsigned char *buf = malloc((size_t)in.true_extent + 1), out[64];
    for (int64_t i = 0; i <= in.true_extent; i++) buf[i] = (unsigned char)(i * 31 + (i >> 9));
    for (int64_t off = 0; off < n; off += 37) {
        gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = off};
        int64_t done;
        CHECK_OK(gdte_pack(buf, 1, cur, out, sizeof out, &p, &done));
        int ok = done == (n - off < 64 ? n - off : 64);
        for (int64_t j = 0; ok && j < done; j++) ok = out[j] == buf[offs[off + j]];
        CHECK(ok);
    }
    free(buf);
    free(offs);
    CHECK_OK(gdte_type_free(&cur));
}

int main(void)
{
    if (gdte_init(NULL) != GDTE_OK) return 1;
    test_vector_1e6();
    test_subarray_3d();
    test_nested_vectors();
    test_indexed_regular();
    test_contig_shapes();
    test_transpose();
    test_units();
    test_many_dims();
    int rc = tu_report("canonical");
    gdte_finalize();
    return rc;
}
