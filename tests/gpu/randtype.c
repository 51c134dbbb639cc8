/* Random datatypes for the GPU tests: nested constructors of every kind over a few element
 * types, with strides, displacements and resizes that leave buffers misaligned as often as
 * not. The same seed gives the same type. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "randtype.h"

uint64_t rt_next(rt_rng_t *r)
{
    /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t rt_below(rt_rng_t *r, int64_t n) { return n <= 1 ? 0 : (int64_t)(rt_next(r) % (uint64_t)n); }

typedef struct sbuf {
    char *p;
    size_t len, used;
} sbuf_t;

static void put(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf_t *b, const char *fmt, ...)
{
    if (b->used >= b->len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
    va_end(ap);
    if (n > 0) b->used += (size_t)n < b->len - b->used ? (size_t)n : b->len - b->used - 1;
}

static int64_t extent_of(gdte_type_h t)
{
    gdte_type_info_t in;
    return gdte_type_get_info(t, &in) == GDTE_OK ? in.extent : -1;
}

static gdte_type_h base_type(rt_rng_t *r, sbuf_t *d)
{
    static const struct {
        gdte_basic_t b;
        const char *name;
    } list[] = {{GDTE_BASIC_BYTE, "byte"},     {GDTE_BASIC_INT16, "int16"},   {GDTE_BASIC_INT32, "int32"},
                {GDTE_BASIC_FLOAT, "float"},   {GDTE_BASIC_DOUBLE, "double"}, {GDTE_BASIC_DOUBLE, "double"},
                {GDTE_BASIC_COMPLEX_DOUBLE, "cdouble"}};
    int64_t k = rt_below(r, 9);
    if (k < 7) {
        put(d, "%s", list[k].name);
        return gdte_type_predefined(list[k].b);
    }
    /* odd-sized elements: 3 and 12 bytes */
    int64_t size = k == 7 ? 3 : 12;
    gdte_type_h t;
    if (gdte_type_create_basic(size, 100 + (uint32_t)size, &t) != GDTE_OK) return NULL;
    put(d, "basic%lld", (long long)size);
    return t;
}

static gdte_type_h gen(rt_rng_t *r, int depth, int64_t budget, sbuf_t *d);

static gdte_type_h gen_node(rt_rng_t *r, int depth, int64_t budget, sbuf_t *d)
{
    gdte_status_t st = GDTE_OK;
    gdte_type_h t = NULL, c = NULL;
    int kind = (int)rt_below(r, 11);
    int64_t cnt = 1 + rt_below(r, 4), bl = 1 + rt_below(r, 3);
    int64_t bls[6], dis[6];
    switch (kind) {
    case 0:
        put(d, "contig(%lld,", (long long)cnt);
        if (!(c = gen(r, depth - 1, budget / cnt, d))) return NULL;
        st = gdte_type_create_contiguous(cnt, c, &t);
        break;
    case 1: {
        int64_t stride = bl + rt_below(r, 4);
        if (rt_below(r, 5) == 0) stride = -stride;
        put(d, "vector(%lld,%lld,%lld,", (long long)cnt, (long long)bl, (long long)stride);
        if (!(c = gen(r, depth - 1, budget / (cnt * (bl + 3)), d))) return NULL;
        st = gdte_type_create_vector(cnt, bl, stride, c, &t);
        break;
    }
    case 2: {
        put(d, "hvector(%lld,%lld,", (long long)cnt, (long long)bl);
        if (!(c = gen(r, depth - 1, budget / (cnt * (bl + 1)), d))) return NULL;
        int64_t stride = bl * extent_of(c) + rt_below(r, 3) * rt_below(r, 17);
        if (rt_below(r, 5) == 0) stride = -stride;
        put(d, " stride=%lld", (long long)stride);
        st = gdte_type_create_hvector(cnt, bl, stride, c, &t);
        break;
    }
    case 3:
    case 4: {
        put(d, "%sindexed(%lld,", kind == 3 ? "" : "h", (long long)cnt);
        if (!(c = gen(r, depth - 1, budget / (cnt * 4), d))) return NULL;
        int64_t ext = extent_of(c), at = rt_below(r, 3);
        put(d, " [");
        for (int64_t i = 0; i < cnt; i++) {
            bls[i] = rt_below(r, 4);
            dis[i] = kind == 3 ? at : at * ext + rt_below(r, 2) * rt_below(r, 9);
            put(d, "%lld@%lld ", (long long)bls[i], (long long)dis[i]);
            at += bls[i] + rt_below(r, 3) - (rt_below(r, 6) == 0 ? 2 : 0); /* sometimes back: out of order */
            if (at < 0) at = 0;
        }
        put(d, "]");
        st = kind == 3 ? gdte_type_create_indexed(cnt, bls, dis, c, &t) : gdte_type_create_hindexed(cnt, bls, dis, c, &t);
        break;
    }
    case 5:
    case 6: {
        put(d, "%sindexed_block(%lld,%lld,", kind == 5 ? "" : "h", (long long)cnt, (long long)bl);
        if (!(c = gen(r, depth - 1, budget / (cnt * (bl + 2)), d))) return NULL;
        int64_t ext = extent_of(c), at = rt_below(r, 2);
        put(d, " [");
        for (int64_t i = 0; i < cnt; i++) {
            dis[i] = kind == 5 ? at : at * ext + rt_below(r, 2) * rt_below(r, 5);
            put(d, "%lld ", (long long)dis[i]);
            at += bl + rt_below(r, 3);
        }
        put(d, "]");
        st = kind == 5 ? gdte_type_create_indexed_block(cnt, bl, dis, c, &t)
                       : gdte_type_create_hindexed_block(cnt, bl, dis, c, &t);
        break;
    }
    case 7: {
        int64_t nf = 2 + rt_below(r, 2), at = rt_below(r, 2) * 4;
        gdte_type_h f[3] = {NULL, NULL, NULL};
        put(d, "struct(");
        for (int64_t i = 0; i < nf; i++) {
            f[i] = rt_below(r, 3) == 0 ? gen(r, depth - 1, budget / 6, d) : base_type(r, d);
            if (!f[i]) {
                for (int64_t k = 0; k < i; k++) gdte_type_free(&f[k]);
                return NULL;
            }
            bls[i] = rt_below(r, 4);
            dis[i] = at;
            put(d, "x%lld@%lld; ", (long long)bls[i], (long long)at);
            gdte_type_info_t in;
            gdte_type_get_info(f[i], &in);
            at += bls[i] * in.extent + rt_below(r, 3) * rt_below(r, 5);
        }
        st = gdte_type_create_struct(nf, bls, dis, f, &t);
        for (int64_t i = 0; i < nf; i++) gdte_type_free(&f[i]);
        put(d, ")");
        return st == GDTE_OK ? t : NULL;
    }
    case 8: {
        int nd = 1 + (int)rt_below(r, 3);
        int64_t sizes[3], subs[3], starts[3];
        gdte_order_t order = rt_below(r, 2) ? GDTE_ORDER_C : GDTE_ORDER_FORTRAN;
        int64_t tot = 1;
        put(d, "subarray(%s", order == GDTE_ORDER_C ? "C" : "F");
        for (int i = 0; i < nd; i++) {
            sizes[i] = 1 + rt_below(r, 6);
            subs[i] = 1 + rt_below(r, sizes[i]);
            starts[i] = rt_below(r, sizes[i] - subs[i] + 1);
            tot *= sizes[i];
            put(d, " %lld/%lld+%lld", (long long)subs[i], (long long)sizes[i], (long long)starts[i]);
        }
        put(d, ",");
        if (!(c = gen(r, depth - 1, budget / tot, d))) return NULL;
        st = gdte_type_create_subarray(nd, sizes, subs, starts, order, c, &t);
        break;
    }
    case 9: {
        put(d, "resized(");
        if (!(c = gen(r, depth - 1, budget / 2, d))) return NULL;
        gdte_type_info_t in;
        gdte_type_get_info(c, &in);
        int64_t lb = in.lb - rt_below(r, 3) * rt_below(r, 9);
        int64_t ext = in.extent + rt_below(r, 3) * rt_below(r, 17);
        if (ext <= 0) ext = 1;
        put(d, " lb=%lld ext=%lld", (long long)lb, (long long)ext);
        st = gdte_type_create_resized(c, lb, ext, &t);
        break;
    }
    default:
        put(d, "dup(");
        if (!(c = gen(r, depth - 1, budget, d))) return NULL;
        st = gdte_type_dup(c, &t);
        break;
    }
    put(d, ")");
    gdte_type_free(&c);
    return st == GDTE_OK ? t : NULL;
}

static gdte_type_h gen(rt_rng_t *r, int depth, int64_t budget, sbuf_t *d)
{
    if (depth <= 0 || budget < 64 || rt_below(r, 4) == 0) return base_type(r, d);
    size_t mark = d->used;
    gdte_type_h t = gen_node(r, depth, budget, d);
    if (t && extent_of(t) <= budget && extent_of(t) > 0) return t;
    /* Too big (or degenerate): fall back to an element. */
    if (t) gdte_type_free(&t);
    d->used = mark;
    if (mark < d->len) d->p[mark] = 0;
    return base_type(r, d);
}

gdte_type_h rt_random_type(rt_rng_t *r, int64_t max_extent, char *desc, size_t desc_len)
{
    sbuf_t d = {desc, desc_len, 0};
    desc[0] = 0;
    gdte_type_h t = gen(r, 1 + (int)rt_below(r, 4), max_extent, &d);
    if (t && gdte_type_commit(t) != GDTE_OK) gdte_type_free(&t);
    return t;
}

gdte_type_h rt_shape_type(rt_shape_t shape, int64_t n, char *desc, size_t desc_len)
{
    gdte_type_h t = NULL, a = NULL, b = NULL;
    gdte_type_h dbl = gdte_type_predefined(GDTE_BASIC_DOUBLE);
    gdte_status_t st = GDTE_OK;
    switch (shape) {
    case RT_SHAPE_VECTOR:
        snprintf(desc, desc_len, "V: %lldx%lld of a %lld-row column-major double matrix", (long long)n,
                 (long long)n, (long long)(2 * n));
        st = gdte_type_create_vector(n, n, 2 * n, dbl, &t);
        break;
    case RT_SHAPE_SMALLBLK:
        snprintf(desc, desc_len, "V64: %lld blocks of 64 B at 128 B", (long long)n);
        st = gdte_type_create_vector(n, 8, 16, dbl, &t);
        break;
    case RT_SHAPE_TRIANGLE: {
        snprintf(desc, desc_len, "T: lower triangle of %lldx%lld doubles", (long long)n, (long long)n);
        int64_t *bl = malloc((size_t)n * sizeof *bl), *ds = malloc((size_t)n * sizeof *ds);
        if (!bl || !ds) {
            free(bl);
            free(ds);
            return NULL;
        }
        for (int64_t j = 0; j < n; j++) {
            bl[j] = n - j;
            ds[j] = j * n + j;
        }
        st = gdte_type_create_indexed(n, bl, ds, dbl, &t);
        free(bl);
        free(ds);
        break;
    }
    case RT_SHAPE_TRANSPOSE:
    case RT_SHAPE_TRANSPOSE_C16:
    case RT_SHAPE_TRANSPOSE_B1: {
        gdte_type_h el = shape == RT_SHAPE_TRANSPOSE ? dbl
                         : shape == RT_SHAPE_TRANSPOSE_C16 ? gdte_type_predefined(GDTE_BASIC_COMPLEX_DOUBLE)
                                                            : gdte_type_predefined(GDTE_BASIC_BYTE);
        int64_t es = shape == RT_SHAPE_TRANSPOSE ? 8 : shape == RT_SHAPE_TRANSPOSE_C16 ? 16 : 1;
        snprintf(desc, desc_len, "transpose: %lldx%lld elements of %lld bytes", (long long)n, (long long)n,
                 (long long)es);
        if ((st = gdte_type_create_vector(n, 1, n, el, &a)) == GDTE_OK &&
            (st = gdte_type_create_resized(a, 0, es, &b)) == GDTE_OK)
            st = gdte_type_create_contiguous(n, b, &t);
        break;
    }
    case RT_SHAPE_STRUCT: {
        snprintf(desc, desc_len, "struct {int, double, float[3]} x %lld", (long long)n);
        int64_t bl[3] = {1, 1, 3}, ds[3] = {0, 8, 16};
        gdte_type_h ty[3] = {gdte_type_predefined(GDTE_BASIC_INT32), dbl, gdte_type_predefined(GDTE_BASIC_FLOAT)};
        if ((st = gdte_type_create_struct(3, bl, ds, ty, &a)) == GDTE_OK &&
            (st = gdte_type_create_resized(a, 0, 32, &b)) == GDTE_OK)
            st = gdte_type_create_contiguous(n, b, &t);
        break;
    }
    case RT_SHAPE_LONGBLK:
        snprintf(desc, desc_len, "%lld blocks of 12 KiB at 16000 B", (long long)n);
        st = gdte_type_create_vector(n, 1536, 2000, dbl, &t);
        break;
    case RT_SHAPE_LONGIDX: {
        snprintf(desc, desc_len, "%lld irregular blocks of 8-24 KiB", (long long)n);
        int64_t *bl = malloc((size_t)n * sizeof *bl), *ds = malloc((size_t)n * sizeof *ds);
        if (!bl || !ds) {
            free(bl);
            free(ds);
            return NULL;
        }
        for (int64_t j = 0, at = 3; j < n; j++) {
            bl[j] = 1000 + (j * 797) % 2000;
            ds[j] = at;
            at += bl[j] + 1 + j % 5;
        }
        st = gdte_type_create_indexed(n, bl, ds, dbl, &t);
        free(bl);
        free(ds);
        break;
    }
    case RT_SHAPE_FACE_X: {
        snprintf(desc, desc_len, "face_x of a %lld^3 double grid", (long long)n);
        int64_t sz[3] = {n, n, n}, sub[3] = {n, n, 1}, at[3] = {0, 0, n / 2};
        st = gdte_type_create_subarray(3, sz, sub, at, GDTE_ORDER_C, dbl, &t);
        break;
    }
    default: return NULL;
    }
    if (a) gdte_type_free(&a);
    if (b) gdte_type_free(&b);
    if (st != GDTE_OK || gdte_type_commit(t) != GDTE_OK) {
        if (t) gdte_type_free(&t);
        return NULL;
    }
    return t;
}
