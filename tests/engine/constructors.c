/*
 * Each constructor on its own, with its edge cases: count 0, blocklength 0, one element,
 * negative and zero strides, the standard's extent padding, and extents and packed offsets
 * past 2^31 (sparse types over small real buffers, and a sparse mapping). Expected layouts
 * are written out by hand here, independently of any MPI.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include "testutil.h"

#define INT gdte_type_predefined(GDTE_BASIC_INT32)
#define DBL gdte_type_predefined(GDTE_BASIC_DOUBLE)
#define CHR gdte_type_predefined(GDTE_BASIC_CHAR)
#define SHT gdte_type_predefined(GDTE_BASIC_INT16)

static unsigned char pattern(int64_t i) { return (unsigned char)(i * 7 + 3 + (i >> 8)); }

/* Bounds in one call: size, lb, extent, true lb, true extent. */
static void check_bounds(gdte_type_h t, int64_t size, int64_t lb, int64_t extent, int64_t tlb, int64_t text,
                         int line)
{
    gdte_type_info_t in;
    if (gdte_type_get_info(t, &in) != GDTE_OK) {
        fprintf(stderr, "line %d: get_info failed\n", line);
        tu_failures++;
        return;
    }
    tu_checks++;
    if (in.size != size || in.lb != lb || in.extent != extent || in.true_lb != tlb || in.true_extent != text) {
        fprintf(stderr,
                "line %d: bounds size %lld lb %lld extent %lld true %lld/%lld, expected %lld %lld %lld %lld/%lld\n",
                line, (long long)in.size, (long long)in.lb, (long long)in.extent, (long long)in.true_lb,
                (long long)in.true_extent, (long long)size, (long long)lb, (long long)extent, (long long)tlb,
                (long long)text);
        tu_failures++;
    }
}
#define BOUNDS(t, size, lb, ext, tlb, text) check_bounds(t, size, lb, ext, tlb, text, __LINE__)

/* Pack `count` elements of `t` and compare with the bytes at the listed offsets (relative to
 * the buffer origin) of `elem` bytes each; then unpack into a poisoned buffer and check that
 * exactly those bytes came back and no other byte changed. */
static void check_layout(gdte_type_h t, int64_t count, int64_t elem, const int64_t *offs, int n, int line)
{
    if (gdte_type_commit(t) != GDTE_OK) {
        fprintf(stderr, "line %d: commit failed\n", line);
        tu_failures++;
        return;
    }
    int64_t lo = 0, hi = 1;
    for (int i = 0; i < n; i++) {
        if (offs[i] < lo) lo = offs[i];
        if (offs[i] + elem > hi) hi = offs[i] + elem;
    }
    int64_t blen = hi - lo + 64, total = n * elem;
    unsigned char *buf = malloc((size_t)blen), *out = malloc((size_t)total + 16), *exp = malloc((size_t)total + 16);
    unsigned char *back = malloc((size_t)blen), *bexp = malloc((size_t)blen);
    for (int64_t i = 0; i < blen; i++) buf[i] = pattern(i);
    unsigned char *base = buf + 32 - lo, *bback = back + 32 - lo;
    for (int i = 0; i < n; i++) memcpy(exp + i * elem, base + offs[i], (size_t)elem);
    memset(exp + total, 0xEE, 16);
    memset(out, 0xEE, (size_t)total + 16);
    int64_t done = -1;
    gdte_status_t st = gdte_pack(base, count, t, out, total + 16, NULL, &done);
    tu_checks++;
    if (st != GDTE_OK || done != total || memcmp(out, exp, (size_t)total + 16)) {
        fprintf(stderr, "line %d: pack: %s, %lld of %lld bytes, %s\n", line, gdte_status_name(st), (long long)done,
                (long long)total, st == GDTE_OK && done == total ? "bytes differ" : "");
        tu_failures++;
    }
    memset(back, 0x5A, (size_t)blen);
    memcpy(bexp, back, (size_t)blen);
    for (int i = 0; i < n; i++) memcpy(bexp + 32 - lo + offs[i], exp + i * elem, (size_t)elem);
    st = gdte_unpack(exp, total, bback, count, t, NULL, &done);
    tu_checks++;
    if (st != GDTE_OK || done != total || memcmp(back, bexp, (size_t)blen)) {
        fprintf(stderr, "line %d: unpack: %s\n", line, gdte_status_name(st));
        tu_failures++;
    }
    free(buf), free(out), free(exp), free(back), free(bexp);
}
#define LAYOUT(t, count, elem, ...)                                                                   \
    do {                                                                                              \
        const int64_t offs_[] = {__VA_ARGS__};                                                        \
        check_layout(t, count, elem, offs_, (int)(sizeof offs_ / sizeof offs_[0]), __LINE__);         \
    } while (0)

static void check_empty(gdte_type_h t, int64_t extent, int line)
{
    gdte_type_info_t in;
    CHECK_OK(gdte_type_commit(t));
    CHECK_OK(gdte_type_get_info(t, &in));
    tu_checks++;
    if (in.size != 0 || in.extent != extent || in.layout != GDTE_LAYOUT_EMPTY || in.num_blocks != 0) {
        fprintf(stderr, "line %d: empty type: size %lld extent %lld layout %d blocks %lld\n", line, (long long)in.size,
                (long long)in.extent, in.layout, (long long)in.num_blocks);
        tu_failures++;
    }
    /* packing any count of it moves nothing, even with NULL buffers */
    char out[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t done = -1;
    CHECK_OK(gdte_pack(NULL, 7, t, out, sizeof out, NULL, &done));
    CHECK_EQ(done, 0);
    CHECK_OK(gdte_unpack(NULL, 0, NULL, 7, t, NULL, &done));
    CHECK_EQ(out[0] + out[7], 9);
    int64_t ps = -1;
    CHECK_OK(gdte_type_pack_size(1000, t, &ps));
    CHECK_EQ(ps, 0);
}
#define EMPTY(t, extent) check_empty(t, extent, __LINE__)

#define FREE(t) CHECK_OK(gdte_type_free(&(t)))

static void test_contiguous(void)
{
    gdte_type_h t, s;
    CHECK_OK(gdte_type_create_contiguous(0, INT, &t));
    BOUNDS(t, 0, 0, 0, 0, 0);
    EMPTY(t, 0);
    FREE(t);
    CHECK_OK(gdte_type_create_contiguous(1, INT, &t));
    BOUNDS(t, 4, 0, 4, 0, 4);
    LAYOUT(t, 2, 4, 0, 4);
    FREE(t);
    CHECK_OK(gdte_type_create_contiguous(3, SHT, &t));
    BOUNDS(t, 6, 0, 6, 0, 6);
    LAYOUT(t, 2, 2, 0, 2, 4, 6, 8, 10);
    CHECK_OK(gdte_type_create_contiguous(2, t, &s)); /* over a derived type */
    BOUNDS(s, 12, 0, 12, 0, 12);
    FREE(s);
    FREE(t);
}

static void test_vector(void)
{
    gdte_type_h t;
    CHECK_OK(gdte_type_create_vector(0, 3, 5, INT, &t));
    EMPTY(t, 0);
    FREE(t);
    CHECK_OK(gdte_type_create_vector(4, 0, 5, INT, &t)); /* blocklength 0 */
    EMPTY(t, 0);
    FREE(t);
    CHECK_OK(gdte_type_create_vector(1, 1, 99, INT, &t)); /* one element: the stride is irrelevant */
    BOUNDS(t, 4, 0, 4, 0, 4);
    LAYOUT(t, 3, 4, 0, 4, 8);
    FREE(t);
    CHECK_OK(gdte_type_create_vector(3, 2, 4, INT, &t));
    BOUNDS(t, 24, 0, 40, 0, 40);
    LAYOUT(t, 2, 4, 0, 4, 16, 20, 32, 36, 40, 44, 56, 60, 72, 76);
    FREE(t);
    CHECK_OK(gdte_type_create_vector(3, 1, -2, INT, &t)); /* negative stride: lb moves down */
    BOUNDS(t, 12, -16, 20, -16, 20);
    LAYOUT(t, 2, 4, 0, -8, -16, 20, 12, 4);
    FREE(t);
    CHECK_OK(gdte_type_create_vector(3, 1, 0, INT, &t)); /* stride 0: the same int three times */
    BOUNDS(t, 12, 0, 4, 0, 4);
    LAYOUT(t, 1, 4, 0, 0, 0);
    FREE(t);
    CHECK_OK(gdte_type_create_hvector(3, 1, 13, DBL, &t)); /* odd byte stride: padded to 8 */
    BOUNDS(t, 24, 0, 40, 0, 34);
    LAYOUT(t, 1, 8, 0, 13, 26);
    FREE(t);
    CHECK_OK(gdte_type_create_hvector(2, 2, -3, CHR, &t));
    BOUNDS(t, 4, -3, 5, -3, 5);
    LAYOUT(t, 1, 1, 0, 1, -3, -2);
    FREE(t);
}

static void test_indexed(void)
{
    gdte_type_h t;
    int64_t bl0[3] = {0, 0, 0}, d[3] = {5, 1, 9};
    CHECK_OK(gdte_type_create_indexed(3, bl0, d, INT, &t)); /* every blocklength 0 */
    EMPTY(t, 0);
    FREE(t);
    CHECK_OK(gdte_type_create_indexed(0, NULL, NULL, INT, &t)); /* count 0: arrays not read */
    EMPTY(t, 0);
    FREE(t);
    int64_t bl[4] = {2, 0, 1, 3}, di[4] = {5, 100, -1, 1};
    CHECK_OK(gdte_type_create_indexed(4, bl, di, INT, &t)); /* unsorted, overlapping order kept */
    BOUNDS(t, 24, -4, 32, -4, 32);
    LAYOUT(t, 1, 4, 20, 24, -4, 4, 8, 12);
    FREE(t);
    int64_t hd[4] = {7, 1000, -2, 50};
    CHECK_OK(gdte_type_create_hindexed(4, bl, hd, SHT, &t));
    BOUNDS(t, 12, -2, 58, -2, 58);
    LAYOUT(t, 1, 2, 7, 9, -2, 50, 52, 54);
    FREE(t);
    int64_t bd[3] = {4, 0, 9};
    CHECK_OK(gdte_type_create_indexed_block(3, 2, bd, SHT, &t));
    BOUNDS(t, 12, 0, 22, 0, 22);
    LAYOUT(t, 1, 2, 8, 10, 0, 2, 18, 20);
    FREE(t);
    CHECK_OK(gdte_type_create_indexed_block(3, 0, bd, SHT, &t));
    EMPTY(t, 0);
    FREE(t);
    int64_t hbd[2] = {3, 0};
    CHECK_OK(gdte_type_create_hindexed_block(2, 1, hbd, INT, &t));
    BOUNDS(t, 8, 0, 8, 0, 7);
    LAYOUT(t, 1, 4, 3, 0);
    FREE(t);
    int64_t one = 1, z = 0;
    CHECK_OK(gdte_type_create_hindexed(1, &one, &z, DBL, &t)); /* one element */
    BOUNDS(t, 8, 0, 8, 0, 8);
    FREE(t);
}

static void test_struct(void)
{
    gdte_type_h t, s, e, r, h;
    int64_t bl[3] = {1, 1, 1}, d[3] = {0, 8, 0};
    gdte_type_h ty[3] = {DBL, CHR, INT};
    /* the standard's example: {double at 0, char at 8} has extent 16 */
    CHECK_OK(gdte_type_create_struct(2, bl, d, ty, &s));
    BOUNDS(s, 9, 0, 16, 0, 9);
    LAYOUT(s, 2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 18, 19, 20, 21, 22, 23, 24);
    /* padding is not inherited: two copies 4 bytes apart end at 13, padded to 16 */
    int64_t hd[2] = {0, 4};
    CHECK_OK(gdte_type_create_hindexed(2, bl, hd, s, &h));
    BOUNDS(h, 18, 0, 16, 0, 13);
    FREE(h);
    /* lb below 0 */
    gdte_type_h ty2[2] = {CHR, DBL};
    int64_t d2[2] = {-1, 0};
    CHECK_OK(gdte_type_create_struct(2, bl, d2, ty2, &t));
    BOUNDS(t, 9, -1, 16, -1, 9);
    FREE(t);
    /* an empty member moves nothing */
    CHECK_OK(gdte_type_create_contiguous(0, INT, &e));
    gdte_type_h ty3[2] = {e, INT};
    int64_t d3[2] = {100, 0};
    CHECK_OK(gdte_type_create_struct(2, bl, d3, ty3, &t));
    BOUNDS(t, 4, 0, 4, 0, 4);
    FREE(t);
    /* explicit bounds of a member win, and stop the padding */
    CHECK_OK(gdte_type_create_resized(DBL, 0, 9, &r));
    gdte_type_h ty4[2] = {r, CHR};
    int64_t d4[2] = {0, 9};
    CHECK_OK(gdte_type_create_struct(2, bl, d4, ty4, &t));
    BOUNDS(t, 9, 0, 9, 0, 10);
    FREE(t);
    /* explicit bounds of an empty member count too */
    gdte_type_h re;
    CHECK_OK(gdte_type_create_resized(e, 5, 10, &re));
    gdte_type_h ty5[2] = {re, INT};
    int64_t d5[2] = {0, 100};
    CHECK_OK(gdte_type_create_struct(2, bl, d5, ty5, &t));
    BOUNDS(t, 4, 5, 10, 100, 4);
    FREE(t);
    /* blocklength 0 members and count 0 */
    int64_t bz[3] = {0, 2, 0};
    CHECK_OK(gdte_type_create_struct(3, bz, d, ty, &t));
    BOUNDS(t, 2, 8, 2, 8, 2);
    LAYOUT(t, 2, 1, 8, 9, 10, 11);
    FREE(t);
    CHECK_OK(gdte_type_create_struct(0, NULL, NULL, NULL, &t));
    EMPTY(t, 0);
    FREE(t);
    /* an element gdte does not know aligns to the largest power of two dividing its size */
    gdte_type_h b12;
    CHECK_OK(gdte_type_create_basic(12, 7, &b12));
    gdte_type_h ty6[2] = {b12, CHR};
    int64_t d6[2] = {0, 12};
    CHECK_OK(gdte_type_create_struct(2, bl, d6, ty6, &t));
    BOUNDS(t, 13, 0, 16, 0, 13);
    FREE(t);
    FREE(b12);
    FREE(re);
    FREE(r);
    FREE(e);
    FREE(s);
}

static void test_subarray(void)
{
    gdte_type_h t;
    int64_t sz[3] = {4, 3, 5}, sub[3] = {2, 1, 2}, st[3] = {1, 2, 3};
    /* C order: the last dimension is the fastest */
    CHECK_OK(gdte_type_create_subarray(3, sz, sub, st, GDTE_ORDER_C, CHR, &t));
    BOUNDS(t, 4, 0, 60, 28, 17);
    LAYOUT(t, 1, 1, 28, 29, 43, 44);
    FREE(t);
    /* Fortran order: the first dimension is the fastest */
    int64_t fst[3] = {1, 2, 3};
    CHECK_OK(gdte_type_create_subarray(3, sz, sub, fst, GDTE_ORDER_FORTRAN, CHR, &t));
    /* element (i, j, k) at i + 4j + 12k: (1,2,3)=45 (2,2,3)=46 (1,2,4)=57 (2,2,4)=58 */
    BOUNDS(t, 4, 0, 60, 45, 14);
    LAYOUT(t, 1, 1, 45, 46, 57, 58);
    FREE(t);
    /* two elements are a whole array apart */
    int64_t s1[1] = {6}, b1[1] = {2}, o1[1] = {4};
    CHECK_OK(gdte_type_create_subarray(1, s1, b1, o1, GDTE_ORDER_C, INT, &t));
    BOUNDS(t, 8, 0, 24, 16, 8);
    LAYOUT(t, 2, 4, 16, 20, 40, 44);
    FREE(t);
    /* a zero subsize: no data, the array's extent */
    int64_t z[1] = {0}, o0[1] = {0};
    CHECK_OK(gdte_type_create_subarray(1, s1, z, o0, GDTE_ORDER_C, INT, &t));
    EMPTY(t, 24);
    FREE(t);
}

static void test_darray(void)
{
    gdte_type_h t;
    int64_t g[1] = {10}, dflt[1] = {GDTE_DISTRIBUTE_DFLT_DARG}, p[1] = {3}, two[1] = {2};
    gdte_distribute_t blk[1] = {GDTE_DISTRIBUTE_BLOCK}, cyc[1] = {GDTE_DISTRIBUTE_CYCLIC};
    /* block of 10 over 3: blocks of 4, 4, 2 */
    CHECK_OK(gdte_type_create_darray(3, 1, 1, g, blk, dflt, p, GDTE_ORDER_C, CHR, &t));
    BOUNDS(t, 4, 0, 10, 4, 4);
    LAYOUT(t, 1, 1, 4, 5, 6, 7);
    FREE(t);
    CHECK_OK(gdte_type_create_darray(3, 2, 1, g, blk, dflt, p, GDTE_ORDER_C, CHR, &t));
    LAYOUT(t, 1, 1, 8, 9);
    FREE(t);
    /* cyclic(2) of 10 over 3, rank 1: 2 3 | 8 9 */
    CHECK_OK(gdte_type_create_darray(3, 1, 1, g, cyc, two, p, GDTE_ORDER_C, CHR, &t));
    BOUNDS(t, 4, 0, 10, 2, 8);
    LAYOUT(t, 1, 1, 2, 3, 8, 9);
    FREE(t);
    /* cyclic default (1), rank 0: 0 3 6 9 */
    CHECK_OK(gdte_type_create_darray(3, 0, 1, g, cyc, dflt, p, GDTE_ORDER_C, CHR, &t));
    LAYOUT(t, 1, 1, 0, 3, 6, 9);
    FREE(t);
    /* 2-D, C order, 4x6 over a 2x1 grid with block rows and no distribution of columns */
    int64_t g2[2] = {4, 6}, d2[2] = {GDTE_DISTRIBUTE_DFLT_DARG, GDTE_DISTRIBUTE_DFLT_DARG}, p2[2] = {2, 1};
    gdte_distribute_t bn[2] = {GDTE_DISTRIBUTE_BLOCK, GDTE_DISTRIBUTE_NONE};
    CHECK_OK(gdte_type_create_darray(2, 1, 2, g2, bn, d2, p2, GDTE_ORDER_C, CHR, &t));
    BOUNDS(t, 12, 0, 24, 12, 12);
    LAYOUT(t, 1, 1, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23);
    FREE(t);
}

static void test_resized_dup(void)
{
    gdte_type_h t, c, d;
    CHECK_OK(gdte_type_create_resized(INT, -4, 12, &t));
    BOUNDS(t, 4, -4, 12, 0, 4);
    CHECK_OK(gdte_type_create_contiguous(3, t, &c)); /* copies 12 bytes apart */
    BOUNDS(c, 12, -4, 36, 0, 28);
    LAYOUT(c, 1, 4, 0, 12, 24);
    FREE(c);
    FREE(t);
    /* an extent smaller than the data: elements overlap (fine to pack) */
    CHECK_OK(gdte_type_create_resized(DBL, 0, 4, &t));
    BOUNDS(t, 8, 0, 4, 0, 8);
    CHECK_OK(gdte_type_commit(t));
    char buf[16], out[16];
    for (int i = 0; i < 16; i++) buf[i] = (char)i;
    int64_t done;
    CHECK_OK(gdte_pack(buf, 2, t, out, 16, NULL, &done));
    CHECK(done == 16 && out[8] == 4 && out[15] == 11);
    FREE(t);
    /* dup: same bounds; a dup of a committed type is committed */
    CHECK_OK(gdte_type_create_vector(3, 1, 2, DBL, &t));
    CHECK_OK(gdte_type_commit(t));
    CHECK_OK(gdte_type_dup(t, &d));
    BOUNDS(d, 24, 0, 40, 0, 40);
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(d, &in));
    CHECK(in.committed);
    FREE(t); /* the dup keeps what it needs */
    LAYOUT(d, 1, 8, 0, 16, 32);
    FREE(d);
}

static void test_signature(void)
{
    gdte_type_h a, b, c;
    CHECK_OK(gdte_type_create_contiguous(4, INT, &a));
    CHECK_OK(gdte_type_create_vector(2, 2, 5, INT, &b));
    CHECK_OK(gdte_type_create_contiguous(4, gdte_type_predefined(GDTE_BASIC_FLOAT), &c));
    uint64_t ha, hb, hc, h6a, h3b;
    int64_t na, nb;
    CHECK_OK(gdte_type_signature(1, a, &ha, &na));
    CHECK_OK(gdte_type_signature(1, b, &hb, &nb));
    CHECK_OK(gdte_type_signature(1, c, &hc, NULL));
    CHECK(ha == hb && na == 4 && nb == 4);
    CHECK(ha != hc);
    CHECK_OK(gdte_type_signature(6, a, &h6a, NULL)); /* 24 ints either way */
    CHECK_OK(gdte_type_signature(6, b, &h3b, NULL));
    CHECK(h6a == h3b);
    FREE(a);
    FREE(b);
    FREE(c);
    /* indexed blocks of every length (the per-block signature path) against contiguous */
    int64_t ibl[40], idd[40], tot = 0;
    for (int i = 0; i < 40; i++) {
        ibl[i] = i % 3 ? i : 0; /* 0..39, some zero, long ones past the small-block table */
        idd[i] = 1000 * i;
        tot += ibl[i];
    }
    gdte_type_h ix, cx;
    CHECK_OK(gdte_type_create_indexed(40, ibl, idd, INT, &ix));
    CHECK_OK(gdte_type_create_contiguous(tot, INT, &cx));
    uint64_t hix, hcx;
    CHECK_OK(gdte_type_signature(3, ix, &hix, NULL));
    CHECK_OK(gdte_type_signature(3, cx, &hcx, NULL));
    CHECK(hix == hcx);
    FREE(ix);
    FREE(cx);
    /* composition: k ints are k ints however they are built; order of kinds matters */
    for (int64_t k = 1; k < 300; k += 7) {
        gdte_type_h x, y, z, parts[2];
        int64_t bl2[2] = {k / 3, k - k / 3}, d2[2] = {0, 1000};
        CHECK_OK(gdte_type_create_contiguous(k, INT, &x));
        CHECK_OK(gdte_type_create_contiguous(bl2[0], INT, &parts[0]));
        CHECK_OK(gdte_type_create_vector(bl2[1], 1, 3, INT, &parts[1]));
        int64_t one2[2] = {1, 1};
        CHECK_OK(gdte_type_create_struct(2, one2, d2, parts, &y));
        uint64_t hx, hy, hk;
        int64_t nx, ny;
        CHECK_OK(gdte_type_signature(1, x, &hx, &nx));
        CHECK_OK(gdte_type_signature(1, y, &hy, &ny));
        CHECK_OK(gdte_type_signature(k, INT, &hk, NULL));
        CHECK(hx == hy && hx == hk && nx == k && ny == k);
        gdte_type_h mixed[2] = {INT, gdte_type_predefined(GDTE_BASIC_FLOAT)}, swapped[2] = {mixed[1], mixed[0]};
        CHECK_OK(gdte_type_create_struct(2, one2, d2, mixed, &z));
        uint64_t h1, h2;
        CHECK_OK(gdte_type_signature(1, z, &h1, NULL));
        FREE(z);
        CHECK_OK(gdte_type_create_struct(2, one2, d2, swapped, &z));
        CHECK_OK(gdte_type_signature(1, z, &h2, NULL));
        CHECK(h1 != h2);
        FREE(z);
        FREE(x);
        FREE(y);
        FREE(parts[0]);
        FREE(parts[1]);
    }
}

/* Extents and packed offsets past 2^31. */
static void test_large(void)
{
    gdte_type_h t, c, r;
    const int64_t G = 1LL << 30;
    /* extent arithmetic in 64 bits */
    CHECK_OK(gdte_type_create_vector(3, 1, G, DBL, &t)); /* stride 2^33 bytes */
    BOUNDS(t, 24, 0, 16 * G + 8, 0, 16 * G + 8);
    CHECK_OK(gdte_type_commit(t));
    int64_t ps;
    CHECK_OK(gdte_type_pack_size(1000, t, &ps));
    CHECK_EQ(ps, 24000);
    FREE(t);
    CHECK_OK(gdte_type_create_hvector(2, 1, 1LL << 40, CHR, &t));
    BOUNDS(t, 2, 0, (1LL << 40) + 1, 0, (1LL << 40) + 1);
    FREE(t);

    /* A packed stream of 2^32 bytes over a 1 KiB buffer: 2^22 copies of the same 1 KiB
     * (stride 0). Pack and unpack ranges that start past 2^31. */
    unsigned char buf[1024], out[128], back[1024];
    for (int i = 0; i < 1024; i++) buf[i] = pattern(i);
    CHECK_OK(gdte_type_create_contiguous(1024, CHR, &c));
    CHECK_OK(gdte_type_create_hvector(1LL << 22, 1, 0, c, &t));
    CHECK_OK(gdte_type_commit(t));
    BOUNDS(t, 1LL << 32, 0, 1024, 0, 1024);
    int64_t done = -1;
    gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES,
                            .offset = (1LL << 31) + 5, .max_bytes = 100};
    memset(out, 0xEE, sizeof out);
    CHECK_OK(gdte_pack(buf, 1, t, out, sizeof out, &p, &done));
    CHECK_EQ(done, 100);
    CHECK(!memcmp(out, buf + 5, 100) && out[100] == 0xEE);
    p.offset = (1LL << 32) - 30; /* the end of the stream bounds it */
    CHECK_OK(gdte_pack(buf, 1, t, out, sizeof out, &p, &done));
    CHECK_EQ(done, 30);
    CHECK(!memcmp(out, buf + 994, 30));
    memset(back, 0x11, sizeof back);
    p.offset = (1LL << 31) + 1000;
    CHECK_OK(gdte_unpack(buf, 20, back, 1, t, &p, &done)); /* lands at 1000..1019 */
    CHECK_EQ(done, 20);
    CHECK(!memcmp(back + 1000, buf, 20) && back[999] == 0x11 && back[1020] == 0x11);
    FREE(t);
    FREE(c);

    /* The same through `count` and a DEV (units) layout: an irregular element resized to
     * extent 0, 2^31 of them. Each element packs bytes 0 1 10 11 13. */
    int64_t bl[3] = {2, 2, 1}, d[3] = {0, 10, 13};
    CHECK_OK(gdte_type_create_hindexed(3, bl, d, CHR, &c));
    CHECK_OK(gdte_type_create_resized(c, 0, 0, &r));
    CHECK_OK(gdte_type_commit(r));
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(r, &in));
    CHECK_EQ(in.layout, GDTE_LAYOUT_UNITS);
    int64_t n = 1LL << 31, total = 5 * n;
    p.offset = total - 3;
    p.max_bytes = 100;
    CHECK_OK(gdte_pack(buf, n, r, out, sizeof out, &p, &done));
    CHECK_EQ(done, 3);
    CHECK(out[0] == buf[10] && out[1] == buf[11] && out[2] == buf[13]);
    p.offset = 5 * (n / 2) + 1; /* mid-element, past 2^32 */
    CHECK_OK(gdte_pack(buf, n, r, out, 6, &p, &done));
    CHECK_EQ(done, 6);
    CHECK(out[0] == buf[1] && out[1] == buf[10] && out[2] == buf[11] && out[3] == buf[13] && out[4] == buf[0] &&
          out[5] == buf[1]);
    FREE(r);
    FREE(c);

    /* A real sparse buffer: 2^33 + 4 KiB of address space, two pages touched. */
    size_t len = ((size_t)1 << 33) + 4096;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        printf("constructors: no 8 GiB mapping here, sparse-buffer check skipped\n");
        return;
    }
    double lo = 1.5, hi = -2.25, got[2] = {0, 0};
    memcpy(m, &lo, 8);
    memcpy(m + ((size_t)1 << 33), &hi, 8);
    CHECK_OK(gdte_type_create_vector(2, 1, G, DBL, &t));
    CHECK_OK(gdte_type_commit(t));
    CHECK_OK(gdte_pack(m, 1, t, got, sizeof got, NULL, &done));
    CHECK(done == 16 && got[0] == lo && got[1] == hi);
    /* only the second half: offset 8 */
    gdte_pack_params_t p8 = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = 8};
    got[0] = 0;
    CHECK_OK(gdte_pack(m, 1, t, got, 8, &p8, &done));
    CHECK(done == 8 && got[0] == hi);
    double w[2] = {3.0, 4.0};
    CHECK_OK(gdte_unpack(w, 16, m, 1, t, NULL, &done));
    CHECK(!memcmp(m, &w[0], 8) && !memcmp(m + ((size_t)1 << 33), &w[1], 8));
    FREE(t);
    munmap(m, len);
}

static void test_basic(void)
{
    gdte_type_h t;
    CHECK_OK(gdte_type_create_basic(1, 1, &t));
    BOUNDS(t, 1, 0, 1, 0, 1);
    FREE(t);
    CHECK_OK(gdte_type_create_basic(1 << 20, 2, &t));
    BOUNDS(t, 1 << 20, 0, 1 << 20, 0, 1 << 20);
    FREE(t);
    for (int b = 0; b < GDTE_BASIC_COUNT_; b++) {
        gdte_type_h p = gdte_type_predefined((gdte_basic_t)b);
        CHECK(p != NULL);
        gdte_type_info_t in;
        CHECK_OK(gdte_type_get_info(p, &in));
        CHECK(in.committed && in.is_contiguous && in.layout == GDTE_LAYOUT_CONTIG && in.depth == 0);
        gdte_type_h q = p;
        CHECK_OK(gdte_type_free(&q)); /* a no-op that clears the caller's handle */
        CHECK(q == NULL);
        CHECK_OK(gdte_type_get_info(p, &in));
    }
    CHECK(gdte_type_predefined(GDTE_BASIC_COUNT_) == NULL);
}

int main(void)
{
    if (gdte_init(NULL) != GDTE_OK) return 1;
    test_basic();
    test_contiguous();
    test_vector();
    test_indexed();
    test_struct();
    test_subarray();
    test_darray();
    test_resized_dup();
    test_signature();
    test_large();
    int rc = tu_report("constructors");
    gdte_finalize();
    return rc;
}
