/*
 * The oracle pool: seeded random datatypes, each built twice from the same parameters, once
 * with gdte's constructors and once with MPI's, nested up to depth 4, every constructor.
 * For each type and a random count it checks, against Open MPI on the same seeded buffers:
 *   bounds (size, lb, extent, true lb, true extent), full pack (MPI_Pack), pack in random
 *   fragments taken in random order, full and fragmented out-of-order unpack (MPI_Unpack)
 *   into identically poisoned buffers (every byte, gaps included), and the same through
 *   gdte_mpi_type_import of the MPI type.
 *
 * Bounds: gdte follows the MPI standard, Open MPI differs in documented corners
 * (docs/ENGINE.md). The pool computes both rules itself for every node: gdte must match the
 * standard's, Open MPI must match the Open MPI rule, and only then, where the two differ,
 * the gdte type is resized to MPI's bounds (as the import does) before it is used further.
 * So every accepted difference is explained, and every data check is exact.
 *
 * Usage: engine_pool [--seed S] [--cases N] [--first K] [--case K] [--verbose]
 * Environment (overrides defaults, not arguments): GDTETEST_POOL_SEED, GDTETEST_POOL_CASES,
 * GDTETEST_POOL_CASE, GDTETEST_POOL_DEPTH (nesting depth, default 4). Case K of seed S is generated from (S, K) alone, so
 * `engine_pool --seed S --case K --verbose` replays one failure.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdarg.h>
#include "testutil.h"
#include "engine/engine.h"
#include "mpi/import.h"

static int max_depth = 4; /* GDTETEST_POOL_DEPTH: deeper for exploration */
#define PAD 64
#define MAX_CASE_BYTES (8 << 20)

static uint64_t g_seed = 0x9d70a1ull;
static int64_t g_case = -1;
static int g_verbose;

/* Counters for the summary. */
static long n_cases, n_nodes, n_bound_diffs, n_overlap, n_mpi_refused, n_mpi_inconsistent, n_fragments, n_empty;
static long n_kind[16];

/* ---------------------------------------------------------------------------------------- */
/* A node of a random type: both handles, the bounds both libraries agree on after
 * conforming, and what each rule needs to know about it as a child. */
typedef struct node {
    gdte_type_h g;
    MPI_Datatype m;
    int m_named;
    int64_t size, lb, ub, tlb, tub; /* tlb/tub are 0 when size is 0 */
    int g_markers, m_markers;       /* explicit bounds in gdte's / Open MPI's world */
    int g_align, m_align;
    int tainted; /* MPI's own pack contradicts MPI's own extent: unusable as an oracle */
    char *desc;
} node_t;

static void fail(const node_t *n, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

static void fail(const node_t *n, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "\nengine_pool: FAILED seed 0x%llx case %lld: ", (unsigned long long)g_seed, (long long)g_case);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  type: %s\n  replay: engine_pool --seed 0x%llx --case %lld --verbose\n",
            n && n->desc ? n->desc : "(none)", (unsigned long long)g_seed, (long long)g_case);
    fflush(stderr);
    exit(1);
}

static char *fmt_str(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    if (!s) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return s;
}

static void node_free(node_t *n)
{
    if (!n) return;
    if (n->g && gdte_type_free(&n->g) != GDTE_OK) fail(n, "gdte_type_free");
    if (!n->m_named) MPI_Type_free(&n->m);
    free(n->desc);
    free(n);
}

/* ---------------------------------------------------------------------------------------- */
/* The two bounds rules, computed from the children the pool itself built. */

/* MPI standard (gdte): markers decide; else the data, padded once. */
typedef struct std_acc {
    int64_t mlb, mub, tlb, tub;
    int anym, anyd, align;
} std_acc_t;

static void std_add(std_acc_t *a, int64_t d, int64_t bl, const node_t *c)
{
    if (bl == 0) return;
    int64_t E = c->ub - c->lb, span = (bl - 1) * E;
    int64_t lo = d + (span < 0 ? span : 0), hi = d + (span > 0 ? span : 0);
    if (c->g_markers) {
        if (!a->anym || lo + c->lb < a->mlb) a->mlb = lo + c->lb;
        if (!a->anym || hi + c->ub > a->mub) a->mub = hi + c->ub;
        a->anym = 1;
    }
    if (c->size > 0) {
        if (!a->anyd || lo + c->tlb < a->tlb) a->tlb = lo + c->tlb;
        if (!a->anyd || hi + c->tub > a->tub) a->tub = hi + c->tub;
        a->anyd = 1;
        if (c->g_align > a->align) a->align = c->g_align;
    }
}

typedef struct bnd {
    int64_t lb, ub;
    int markers, align;
} bnd_t;

static bnd_t std_final(const std_acc_t *a)
{
    bnd_t b = {0, 0, a->anym, a->align > 0 ? a->align : 1};
    if (a->anym) {
        b.lb = a->mlb;
        b.ub = a->mub;
    } else if (a->anyd) {
        int64_t ext = a->tub - a->tlb;
        b.lb = a->tlb;
        b.ub = a->tub + (b.align - ext % b.align) % b.align;
    }
    return b;
}

/* Open MPI 4.1 (found empirically, docs/ENGINE.md): each block added in argument order
 * extends the bounds by the child's own (padded) lb/ub, empty children included; a side with
 * explicit bounds wins over one without; the ub is re-padded after every block. */
typedef struct om_acc {
    int64_t lb, ub;
    int any, markers, align;
} om_acc_t;

static void om_add_raw(om_acc_t *a, int64_t d, int64_t cnt, int64_t stride, int64_t clb, int64_t cub, int cmarkers,
                       int calign)
{
    if (cnt == 0) return;
    int64_t span = (cnt - 1) * stride;
    int64_t lo = d + (span < 0 ? span : 0) + clb, hi = d + (span > 0 ? span : 0) + cub;
    if (!a->any) {
        a->lb = lo;
        a->ub = hi;
        a->markers = cmarkers;
        a->any = 1;
    } else if (cmarkers != a->markers) {
        if (!a->markers) {
            a->lb = lo;
            a->ub = hi;
        }
        a->markers = 1;
    } else {
        if (lo < a->lb) a->lb = lo;
        if (hi > a->ub) a->ub = hi;
    }
    if (calign > a->align) a->align = calign;
    if (!a->markers) {
        int64_t e = (a->ub - a->lb) % a->align;
        if (e) a->ub += a->align - e;
    }
}

static void om_add(om_acc_t *a, int64_t d, int64_t cnt, int64_t stride, const node_t *c)
{
    om_add_raw(a, d, cnt, stride, c->lb, c->ub, c->m_markers, c->m_align);
}

static bnd_t om_final(const om_acc_t *a)
{
    bnd_t b = {0, 0, 0, 1};
    if (a->any) {
        b.lb = a->lb;
        b.ub = a->ub;
        b.markers = a->markers;
        b.align = a->align;
    }
    return b;
}

/* ---------------------------------------------------------------------------------------- */
/* Is MPI consistent with itself? Packing two elements must give the first element followed
 * by the element one extent further. Open MPI 4.1 breaks this when a member of size 0 moves
 * the bounds of a type whose data is one dense block: it reports the wider extent but packs
 * the elements back to back (docs/ENGINE.md). Such a type cannot serve as an oracle. */
static int64_t node_span(const node_t *n);

static int mpi_self_consistent(const node_t *n)
{
    if (n->size == 0 || node_span(n) > MAX_CASE_BYTES) return 1; /* too big: gen() drops it */
    MPI_Datatype m = n->m;
    if (!n->m_named && MPI_Type_commit(&m) != MPI_SUCCESS) fail(n, "MPI_Type_commit");
    int64_t E = n->ub - n->lb, sz = n->size;
    /* room around the two elements: a wrong MPI_Pack reads up to 2 x size bytes from the
     * first one */
    int64_t lo = (E < 0 ? E : 0) + n->tlb - 2 * sz - 64, hi = (E > 0 ? E : 0) + n->tub + 2 * sz + 64;
    int64_t blen = hi - lo;
    char *buf = malloc((size_t)blen), *two = malloc((size_t)(2 * sz)), *one = malloc((size_t)(2 * sz));
    for (int64_t i = 0; i < blen; i++) buf[i] = (char)(i * 131 + (i >> 8));
    char *base = buf - lo;
    int pos = 0, pos1 = 0;
    MPI_Pack(base, 2, m, two, (int)(2 * sz), &pos, MPI_COMM_SELF);
    MPI_Pack(base, 1, m, one, (int)(2 * sz), &pos1, MPI_COMM_SELF);
    MPI_Pack(base + E, 1, m, one, (int)(2 * sz), &pos1, MPI_COMM_SELF);
    int ok = pos == 2 * sz && pos1 == 2 * sz && !memcmp(one, two, (size_t)(2 * sz));
    free(buf), free(two), free(one);
    return ok;
}

/* ---------------------------------------------------------------------------------------- */
/* Compare a freshly built node with both rules and conform it. `std`/`om` NULL: the
 * constructor defines the bounds itself (subarray, darray, resized, dup): `fixed` then. */
static void node_settle(node_t *n, const bnd_t *std, const bnd_t *om, const bnd_t *fixed, const node_t *const *kids,
                        int nkids)
{
    MPI_Count mlb, mext, mtlb, mtext, msize;
    if (MPI_Type_get_extent_x(n->m, &mlb, &mext) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(n->m, &mtlb, &mtext) != MPI_SUCCESS || MPI_Type_size_x(n->m, &msize) != MPI_SUCCESS)
        fail(n, "MPI type queries");
    gdte_type_info_t gi;
    if (gdte_type_get_info(n->g, &gi) != GDTE_OK) fail(n, "gdte_type_get_info");
    if (gi.size != msize) fail(n, "size: gdte %lld, MPI %lld", (long long)gi.size, (long long)msize);
    if (msize > 0 && (gi.true_lb != mtlb || gi.true_extent != mtext))
        fail(n, "true lb/extent: gdte %lld/%lld, MPI %lld/%lld", (long long)gi.true_lb, (long long)gi.true_extent,
             (long long)mtlb, (long long)mtext);
    if (msize == 0 && (gi.true_lb != 0 || gi.true_extent != 0)) fail(n, "empty type with true bounds");
    bnd_t s = std ? *std : *fixed, o = om ? *om : *fixed;
    if (gi.lb != s.lb || gi.extent != s.ub - s.lb)
        fail(n, "gdte bounds lb %lld extent %lld, the standard says lb %lld extent %lld", (long long)gi.lb,
             (long long)gi.extent, (long long)s.lb, (long long)(s.ub - s.lb));
    if (mlb != o.lb || mext != o.ub - o.lb) {
        for (int i = 0; i < nkids; i++)
            fprintf(stderr, "  child %d: lb %lld ub %lld tlb %lld tub %lld size %lld markers g%d/m%d align g%d/m%d\n", i,
                    (long long)kids[i]->lb, (long long)kids[i]->ub, (long long)kids[i]->tlb, (long long)kids[i]->tub,
                    (long long)kids[i]->size, kids[i]->g_markers, kids[i]->m_markers, kids[i]->g_align,
                    kids[i]->m_align);
        fail(n, "MPI bounds lb %lld extent %lld, the pool's model of Open MPI says lb %lld extent %lld", (long long)mlb,
             (long long)mext, (long long)o.lb, (long long)(o.ub - o.lb));
    }
    n->size = msize;
    n->lb = mlb;
    n->ub = mlb + mext;
    n->tlb = msize ? mtlb : 0;
    n->tub = msize ? mtlb + mtext : 0;
    n->g_markers = s.markers;
    n->g_align = s.align;
    n->m_markers = o.markers;
    n->m_align = o.align;
    if (!mpi_self_consistent(n)) {
        n->tainted = 1;
        return;
    }
    if (gi.lb != mlb || gi.extent != mext) {
        /* an explained difference: continue with MPI's bounds, as the import does */
        gdte_type_h r;
        if (gdte_type_create_resized(n->g, mlb, mext, &r) != GDTE_OK) fail(n, "resize to MPI's bounds");
        gdte_type_free(&n->g);
        n->g = r;
        n->g_markers = 1;
        n_bound_diffs++;
        if (g_verbose) fprintf(stderr, "  bounds differ (explained): %s\n", n->desc);
    }
    n_nodes++;
}

/* ---------------------------------------------------------------------------------------- */
/* Leaves: predefined types, elements gdte does not predefine, and MPI's pair types. */
typedef struct leaf {
    const char *name;
    MPI_Datatype m;
    int basic;           /* gdte_basic_t, or -1: custom element of `size`, or -2: pair */
    int64_t size;
    int align;           /* C alignment */
    int first, second;   /* pair: indices of the parts in this table */
    int64_t second_off;
} leaf_t;

static leaf_t leaves[32];
static int nleaves;

#define PAIR_OFF(A, B) offsetof(struct { A a; B b; }, b)

static void leaves_init(void)
{
    int n = 0;
#define L(nm, mt, b, sz, al) leaves[n++] = (leaf_t){nm, mt, b, sz, al, 0, 0, 0}
    L("char", MPI_CHAR, GDTE_BASIC_CHAR, 1, 1);                                    /* 0 */
    L("short", MPI_SHORT, GDTE_BASIC_INT16, 2, _Alignof(short));                   /* 1 */
    L("int", MPI_INT, GDTE_BASIC_INT32, 4, _Alignof(int));                         /* 2 */
    L("long", MPI_LONG, GDTE_BASIC_INT64, 8, _Alignof(long));                      /* 3 */
    L("float", MPI_FLOAT, GDTE_BASIC_FLOAT, 4, _Alignof(float));                   /* 4 */
    L("double", MPI_DOUBLE, GDTE_BASIC_DOUBLE, 8, _Alignof(double));               /* 5 */
    L("long double", MPI_LONG_DOUBLE, GDTE_BASIC_LONG_DOUBLE, 16, _Alignof(long double)); /* 6 */
    L("float complex", MPI_C_FLOAT_COMPLEX, GDTE_BASIC_COMPLEX_FLOAT, 8, _Alignof(float));
    L("double complex", MPI_C_DOUBLE_COMPLEX, GDTE_BASIC_COMPLEX_DOUBLE, 16, _Alignof(double));
    L("byte", MPI_BYTE, GDTE_BASIC_BYTE, 1, 1);
    L("uint16", MPI_UINT16_T, GDTE_BASIC_UINT16, 2, 2);
    L("uint64", MPI_UINT64_T, GDTE_BASIC_UINT64, 8, _Alignof(uint64_t));
    L("bool", MPI_C_BOOL, -1, 1, 1);
    L("long double complex", MPI_C_LONG_DOUBLE_COMPLEX, -1, 32, _Alignof(long double));
#undef L
#define P(nm, mt, a, b, off) leaves[n++] = (leaf_t){nm, mt, -2, 0, 0, a, b, off}
    P("double_int", MPI_DOUBLE_INT, 5, 2, PAIR_OFF(double, int));
    P("short_int", MPI_SHORT_INT, 1, 2, PAIR_OFF(short, int));
    P("long_double_int", MPI_LONG_DOUBLE_INT, 6, 2, PAIR_OFF(long double, int));
    P("float_int", MPI_FLOAT_INT, 4, 2, PAIR_OFF(float, int));
    P("2int", MPI_2INT, 2, 2, PAIR_OFF(int, int));
    P("long_int", MPI_LONG_INT, 3, 2, PAIR_OFF(long, int));
#undef P
    nleaves = n;
}

static node_t *node_new(void)
{
    node_t *n = calloc(1, sizeof *n);
    if (!n) fail(NULL, "out of memory");
    return n;
}

static node_t *leaf_node(int i)
{
    const leaf_t *L = &leaves[i];
    node_t *n = node_new();
    n->m = L->m;
    n->m_named = 1;
    n->desc = fmt_str("%s", L->name);
    if (L->basic >= 0) {
        n->g = gdte_type_predefined((gdte_basic_t)L->basic);
    } else if (L->basic == -1) {
        if (gdte_type_create_basic(L->size, 1000 + (uint32_t)i, &n->g) != GDTE_OK) fail(n, "create_basic");
    } else {
        /* The pair as a struct of its parts: gdte must get MPI's bounds with no help. */
        node_t *a = leaf_node(L->first), *b = leaf_node(L->second);
        int64_t bl[2] = {1, 1}, d[2] = {0, L->second_off};
        gdte_type_h parts[2] = {a->g, b->g};
        if (gdte_type_create_struct(2, bl, d, parts, &n->g) != GDTE_OK) fail(n, "pair struct");
        std_acc_t sa = {0};
        std_add(&sa, 0, 1, a);
        std_add(&sa, L->second_off, 1, b);
        bnd_t s = std_final(&sa);
        /* Open MPI's pair types are predefined: its bounds are the standard's; align is
         * checked when the pair is used as a child. */
        node_settle(n, &s, &s, NULL, NULL, 0);
        node_free(a);
        node_free(b);
        return n;
    }
    n->size = n->ub = L->size;
    n->tub = L->size;
    n->g_align = n->m_align = L->align;
    if (L->basic == -1) {
        /* gdte's rule for an unknown element: the largest power of two dividing the size, at
         * most 16; the element here is chosen so that this is its C alignment too */
        int a = 1;
        while (a < 16 && L->size % (2 * a) == 0) a *= 2;
        if (a != L->align) fail(n, "test table: alignment of %s", L->name);
    }
    n_nodes++;
    return n;
}

/* ---------------------------------------------------------------------------------------- */
/* Random constructors. Each returns NULL when the type would exceed the budget (bytes of
 * span) or when MPI refuses parameters gdte accepts (counted, then retried). */
static node_t *gen(tu_rng_t *r, int depth, int64_t budget);

static int64_t node_span(const node_t *n)
{
    int64_t v[5] = {n->lb, n->ub, n->tlb, n->tub, n->size}, m = 0;
    for (int i = 0; i < 5; i++) m = llabs(v[i]) > m ? llabs(v[i]) : m;
    return m;
}

static int mpi_ok(node_t *n, int rc, gdte_status_t st, const char *what)
{
    if (st != GDTE_OK) fail(n, "gdte refused %s: %s", what, gdte_status_name(st));
    if (rc != MPI_SUCCESS) fail(n, "MPI refused %s, which gdte accepted", what);
    return 1;
}

/* A count: mostly small, sometimes 0 or 1, rarely large. */
static int g_large; /* this case may build types with large counts (up to MiBs) */

static int64_t rnd_count(tu_rng_t *r, int64_t max_large)
{
    int p = (int)tu_range(r, 0, 99);
    if (p < 4) return 0;
    if (p < 20) return 1;
    if (max_large < 8 || (p < 95 && !(g_large && p >= 60))) return tu_range(r, 2, 6);
    return tu_range(r, 7, max_large < 8 ? 8 : max_large);
}

static node_t *gen_contig(tu_rng_t *r, int depth, int64_t budget)
{
    node_t *c = gen(r, depth + 1, budget / 2);
    int64_t E = c->ub - c->lb;
    int64_t n = rnd_count(r, E > 0 ? budget / E : 64);
    node_t *t = node_new();
    t->desc = fmt_str("contiguous(%lld, %s)", (long long)n, c->desc);
    mpi_ok(t, MPI_Type_contiguous((int)n, c->m, &t->m), gdte_type_create_contiguous(n, c->g, &t->g), "contiguous");
    std_acc_t sa = {0};
    std_add(&sa, 0, n, c);
    om_acc_t oa = {0};
    if (c->size > 0) om_add(&oa, 0, n, E, c); /* as for indexed: size 0 gives an empty type */
    bnd_t s = std_final(&sa), o = om_final(&oa);
    const node_t *kids[1] = {c};
    node_settle(t, &s, &o, NULL, kids, 1);
    node_free(c);
    return t;
}

static node_t *gen_vector(tu_rng_t *r, int depth, int64_t budget, int bytes)
{
    node_t *c = gen(r, depth + 1, budget / 4);
    int64_t E = c->ub - c->lb;
    int64_t count = rnd_count(r, g_large ? 1 << 20 : 4096), bl = tu_chance(r, 1, 20) ? 0 : tu_range(r, 1, 4), stride;
    for (;;) {
        stride = bytes ? tu_range(r, -96, 96) : tu_range(r, -6, 6);
        int64_t hs = bytes ? stride : stride * E;
        if (hs != -1) break; /* Open MPI packs a byte stride of -1 as contiguous (docs/ENGINE.md) */
    }
    int64_t hs = bytes ? stride : stride * E;
    node_t *t = node_new();
    t->desc = fmt_str("%s(%lld, %lld, %lld, %s)", bytes ? "hvector" : "vector", (long long)count, (long long)bl,
                      (long long)stride, c->desc);
    if (bytes)
        mpi_ok(t, MPI_Type_create_hvector((int)count, (int)bl, (MPI_Aint)hs, c->m, &t->m),
               gdte_type_create_hvector(count, bl, hs, c->g, &t->g), "hvector");
    else
        mpi_ok(t, MPI_Type_vector((int)count, (int)bl, (int)stride, c->m, &t->m),
               gdte_type_create_vector(count, bl, stride, c->g, &t->g), "vector");
    std_acc_t sa = {0};
    om_acc_t oa = {0};
    if (count > 0 && bl > 0) {
        std_add(&sa, 0, bl, c);
        std_add(&sa, (count - 1) * hs, bl, c);
        int contiguous = bytes ? E * bl == hs : bl == stride;
        if (contiguous || count <= 1) {
            om_add(&oa, 0, count * bl, E, c);
        } else if (bl == 1) {
            om_add(&oa, 0, count, hs, c);
        } else {
            /* Open MPI first makes contiguous(bl, c), padded on its own, then repeats it */
            om_acc_t blk = {0};
            om_add(&blk, 0, bl, E, c);
            om_add_raw(&oa, 0, count, hs, blk.lb, blk.ub, blk.markers, blk.align);
        }
    }
    bnd_t s = std_final(&sa), o = om_final(&oa);
    const node_t *kids[1] = {c};
    node_settle(t, &s, &o, NULL, kids, 1);
    node_free(c);
    return t;
}

/* indexed, hindexed, indexed_block, hindexed_block: kind 0..3 */
static node_t *gen_indexed(tu_rng_t *r, int depth, int64_t budget, int kind)
{
    static const char *names[] = {"indexed", "hindexed", "indexed_block", "hindexed_block"};
    node_t *c = gen(r, depth + 1, budget / 4);
    int64_t E = c->ub - c->lb;
    int bytes = kind == 1 || kind == 3, block = kind >= 2;
    int n = tu_chance(r, 1, 20) ? 0 : (int)tu_range(r, 1, 7);
    if (tu_chance(r, 1, 30)) n = (int)tu_range(r, 8, 300); /* many blocks */
    int64_t gbl[300], gd[300];
    int mbl[300], md[300];
    MPI_Aint ma[300];
    int64_t bl_all = tu_chance(r, 1, 20) ? 0 : tu_range(r, 1, 4);
    /* regular displacements sometimes, so the canonical form's run detection is exercised */
    int regular = tu_chance(r, 1, 4);
    int64_t step = bytes ? tu_range(r, -64, 64) : tu_range(r, -8, 8), start = bytes ? tu_range(r, -40, 120) : tu_range(r, -8, 20);
    for (int i = 0; i < n; i++) {
        gbl[i] = block ? bl_all : (tu_chance(r, 1, 10) ? 0 : tu_range(r, 1, 4));
        mbl[i] = (int)gbl[i];
        gd[i] = regular ? start + i * step : bytes ? tu_range(r, -40, 160) : tu_range(r, -8, 24);
        md[i] = (int)gd[i];
        ma[i] = (MPI_Aint)gd[i];
    }
    node_t *t = node_new();
    {
        size_t cap = 64 + (size_t)n * 24 + strlen(c->desc);
        char *s = malloc(cap);
        size_t o = (size_t)snprintf(s, cap, "%s(%d, [", names[kind], n);
        for (int i = 0; i < n; i++) o += (size_t)snprintf(s + o, cap - o, "%s%lld@%lld", i ? " " : "", (long long)gbl[i], (long long)gd[i]);
        snprintf(s + o, cap - o, "], %s)", c->desc);
        t->desc = s;
    }
    int rc;
    gdte_status_t st;
    switch (kind) {
    case 0:
        st = gdte_type_create_indexed(n, gbl, gd, c->g, &t->g);
        rc = MPI_Type_indexed(n, mbl, md, c->m, &t->m);
        break;
    case 1:
        st = gdte_type_create_hindexed(n, gbl, gd, c->g, &t->g);
        rc = MPI_Type_create_hindexed(n, mbl, ma, c->m, &t->m);
        break;
    case 2:
        st = gdte_type_create_indexed_block(n, bl_all, gd, c->g, &t->g);
        rc = MPI_Type_create_indexed_block(n, (int)bl_all, md, c->m, &t->m);
        break;
    default:
        st = gdte_type_create_hindexed_block(n, bl_all, gd, c->g, &t->g);
        rc = MPI_Type_create_hindexed_block(n, (int)bl_all, ma, c->m, &t->m);
        break;
    }
    mpi_ok(t, rc, st, names[kind]);
    std_acc_t sa = {0};
    om_acc_t oa = {0};
    for (int i = 0; i < n; i++) {
        int64_t d = bytes ? gd[i] : gd[i] * E;
        std_add(&sa, d, gbl[i], c);
        /* Open MPI makes indexed and hindexed (not the _block ones) over a type of size 0
         * an empty type, explicit bounds and all (docs/ENGINE.md) */
        if (c->size > 0 || kind >= 2) om_add(&oa, d, gbl[i], E, c);
    }
    bnd_t s = std_final(&sa), o = om_final(&oa);
    const node_t *kids[1] = {c};
    node_settle(t, &s, &o, NULL, kids, 1);
    node_free(c);
    return t;
}

static node_t *gen_struct(tu_rng_t *r, int depth, int64_t budget)
{
    int n = tu_chance(r, 1, 25) ? 0 : (int)tu_range(r, 1, 4);
    node_t *c[4];
    int64_t gbl[4], gd[4];
    int mbl[4];
    MPI_Aint ma[4];
    gdte_type_h gt[4];
    MPI_Datatype mt[4];
    size_t cap = 64;
    for (int i = 0; i < n; i++) {
        c[i] = gen(r, depth + 1, budget / 8);
        gbl[i] = tu_chance(r, 1, 10) ? 0 : tu_range(r, 1, 3);
        mbl[i] = (int)gbl[i];
        gd[i] = ma[i] = tu_range(r, -24, 128); /* any byte: gaps and misaligned members */
        gt[i] = c[i]->g;
        mt[i] = c[i]->m;
        cap += strlen(c[i]->desc) + 48;
    }
    node_t *t = node_new();
    char *s = malloc(cap);
    size_t o = (size_t)snprintf(s, cap, "struct(%d", n);
    for (int i = 0; i < n; i++) o += (size_t)snprintf(s + o, cap - o, ", %lldx%s@%lld", (long long)gbl[i], c[i]->desc, (long long)gd[i]);
    snprintf(s + o, cap - o, ")");
    t->desc = s;
    mpi_ok(t, MPI_Type_create_struct(n, mbl, ma, mt, &t->m), gdte_type_create_struct(n, gbl, gd, gt, &t->g), "struct");
    std_acc_t sa = {0};
    om_acc_t oa = {0};
    for (int i = 0; i < n; i++) {
        std_add(&sa, gd[i], gbl[i], c[i]);
        om_add(&oa, gd[i], gbl[i], c[i]->ub - c[i]->lb, c[i]);
    }
    bnd_t sb = std_final(&sa), ob = om_final(&oa);
    node_settle(t, &sb, &ob, NULL, (const node_t *const *)c, n);
    for (int i = 0; i < n; i++) node_free(c[i]);
    return t;
}

static node_t *gen_subarray(tu_rng_t *r, int depth, int64_t budget)
{
    node_t *c = gen(r, depth + 1, budget / 16);
    int nd = (int)tu_range(r, 1, 3), order = (int)tu_range(r, 0, 1);
    int64_t sz[3], sub[3], st[3], prod = 1;
    int msz[3], msub[3], mst[3];
    for (int i = 0; i < nd; i++) {
        sz[i] = tu_range(r, 1, 7);
        sub[i] = tu_range(r, 1, sz[i]);
        st[i] = tu_range(r, 0, sz[i] - sub[i]);
        msz[i] = (int)sz[i], msub[i] = (int)sub[i], mst[i] = (int)st[i];
        prod *= sz[i];
    }
    node_t *t = node_new();
    t->desc = fmt_str("subarray(%s, [%lld %lld %lld], [%lld %lld %lld], [%lld %lld %lld] of %d, %s)", order ? "F" : "C",
                      (long long)sz[0], (long long)(nd > 1 ? sz[1] : 0), (long long)(nd > 2 ? sz[2] : 0),
                      (long long)sub[0], (long long)(nd > 1 ? sub[1] : 0), (long long)(nd > 2 ? sub[2] : 0),
                      (long long)st[0], (long long)(nd > 1 ? st[1] : 0), (long long)(nd > 2 ? st[2] : 0), nd, c->desc);
    mpi_ok(t, MPI_Type_create_subarray(nd, msz, msub, mst, order ? MPI_ORDER_FORTRAN : MPI_ORDER_C, c->m, &t->m),
           gdte_type_create_subarray(nd, sz, sub, st, order ? GDTE_ORDER_FORTRAN : GDTE_ORDER_C, c->g, &t->g),
           "subarray");
    bnd_t f = {0, prod * (c->ub - c->lb), 1, c->size ? c->g_align : 1};
    const node_t *kids[1] = {c};
    node_settle(t, NULL, NULL, &f, kids, 1);
    t->m_align = c->m_align;
    node_free(c);
    return t;
}

static node_t *gen_darray(tu_rng_t *r, int depth, int64_t budget)
{
    node_t *c = gen(r, depth + 1, budget / 16);
    int nd = (int)tu_range(r, 1, 3), order = (int)tu_range(r, 0, 1), size = 1;
    int64_t gs[3], da[3], ps[3], prod = 1;
    gdte_distribute_t di[3];
    int mgs[3], mdi[3], mda[3], mps[3];
    static const char *dn[] = {"block", "cyclic", "none"};
    for (int i = 0; i < nd; i++) {
        gs[i] = tu_range(r, 1, 9);
        int k = (int)tu_range(r, 0, 2);
        di[i] = (gdte_distribute_t)k;
        mdi[i] = k == 0 ? MPI_DISTRIBUTE_BLOCK : k == 1 ? MPI_DISTRIBUTE_CYCLIC : MPI_DISTRIBUTE_NONE;
        ps[i] = k == 2 ? 1 : tu_range(r, 1, 3);
        int dflt = (int)tu_range(r, 0, 1);
        if (k == 2 || dflt) {
            da[i] = GDTE_DISTRIBUTE_DFLT_DARG;
        } else if (k == 0) {
            int64_t need = (gs[i] + ps[i] - 1) / ps[i];
            da[i] = need + tu_range(r, 0, 2);
        } else {
            da[i] = tu_range(r, 1, 4);
        }
        mda[i] = da[i] == GDTE_DISTRIBUTE_DFLT_DARG ? MPI_DISTRIBUTE_DFLT_DARG : (int)da[i];
        mgs[i] = (int)gs[i], mps[i] = (int)ps[i];
        size *= (int)ps[i];
        prod *= gs[i];
    }
    int rank = (int)tu_range(r, 0, size - 1);
    node_t *t = node_new();
    char dims[256];
    size_t o = 0;
    for (int i = 0; i < nd; i++)
        o += (size_t)snprintf(dims + o, sizeof dims - o, "%s%lld:%s:%lld:%lld", i ? " " : "", (long long)gs[i], dn[di[i]],
                              (long long)da[i], (long long)ps[i]);
    t->desc = fmt_str("darray(size %d rank %d %s [%s], %s)", size, rank, order ? "F" : "C", dims, c->desc);
    gdte_status_t st = gdte_type_create_darray(size, rank, nd, gs, di, da, ps, order ? GDTE_ORDER_FORTRAN : GDTE_ORDER_C,
                                               c->g, &t->g);
    int rc = MPI_Type_create_darray(size, rank, nd, mgs, mdi, mda, mps, order ? MPI_ORDER_FORTRAN : MPI_ORDER_C, c->m,
                                    &t->m);
    if (st == GDTE_OK && rc != MPI_SUCCESS) {
        n_mpi_refused++;
        if (g_verbose) fprintf(stderr, "  MPI refused %s\n", t->desc);
        gdte_type_free(&t->g);
        t->m_named = 1;
        node_free(t);
        node_free(c);
        return NULL;
    }
    mpi_ok(t, rc, st, "darray");
    bnd_t f = {0, prod * (c->ub - c->lb), 1, c->size ? c->g_align : 1};
    const node_t *kids[1] = {c};
    node_settle(t, NULL, NULL, &f, kids, 1);
    t->m_align = c->m_align;
    node_free(c);
    return t;
}

static node_t *gen_resized(tu_rng_t *r, int depth, int64_t budget)
{
    node_t *c = gen(r, depth + 1, budget / 2);
    int64_t lb = tu_range(r, -32, 32), ext;
    int p = (int)tu_range(r, 0, 9);
    if (p < 3) ext = c->tub - c->tlb;                   /* tight */
    else if (p < 9) ext = tu_range(r, 1, 2 * (c->ub - c->lb) + 16);
    else ext = 0;                                       /* all elements at one place */
    node_t *t = node_new();
    t->desc = fmt_str("resized(%lld, %lld, %s)", (long long)lb, (long long)ext, c->desc);
    mpi_ok(t, MPI_Type_create_resized(c->m, lb, ext, &t->m), gdte_type_create_resized(c->g, lb, ext, &t->g), "resized");
    bnd_t f = {lb, lb + ext, 1, c->g_align};
    const node_t *kids[1] = {c};
    node_settle(t, NULL, NULL, &f, kids, 1);
    t->m_align = c->m_align;
    node_free(c);
    return t;
}

static node_t *gen_dup(tu_rng_t *r, int depth, int64_t budget)
{
    node_t *c = gen(r, depth + 1, budget);
    node_t *t = node_new();
    t->desc = fmt_str("dup(%s)", c->desc);
    mpi_ok(t, MPI_Type_dup(c->m, &t->m), gdte_type_dup(c->g, &t->g), "dup");
    bnd_t f = {c->lb, c->ub, c->g_markers, c->g_align};
    node_settle(t, NULL, NULL, &f, NULL, 0);
    t->m_markers = c->m_markers;
    t->m_align = c->m_align;
    node_free(c);
    return t;
}

enum { K_CONTIG, K_VECTOR, K_HVECTOR, K_INDEXED, K_HINDEXED, K_INDEXED_BLOCK, K_HINDEXED_BLOCK, K_STRUCT, K_SUBARRAY,
       K_DARRAY, K_RESIZED, K_DUP, K_COUNT_ };
static const char *kind_names[] = {"contiguous", "vector", "hvector", "indexed", "hindexed", "indexed_block",
                                   "hindexed_block", "struct", "subarray", "darray", "resized", "dup"};

static node_t *gen(tu_rng_t *r, int depth, int64_t budget)
{
    for (int attempt = 0; attempt < 6; attempt++) {
        if (depth >= max_depth || budget < 64 || tu_chance(r, depth + 1, max_depth + 3)) return leaf_node((int)tu_range(r, 0, nleaves - 1));
        int k = (int)tu_range(r, 0, K_COUNT_ - 1);
        node_t *t = NULL;
        switch (k) {
        case K_CONTIG: t = gen_contig(r, depth, budget); break;
        case K_VECTOR: t = gen_vector(r, depth, budget, 0); break;
        case K_HVECTOR: t = gen_vector(r, depth, budget, 1); break;
        case K_INDEXED: case K_HINDEXED: case K_INDEXED_BLOCK: case K_HINDEXED_BLOCK:
            t = gen_indexed(r, depth, budget, k - K_INDEXED);
            break;
        case K_STRUCT: t = gen_struct(r, depth, budget); break;
        case K_SUBARRAY: t = gen_subarray(r, depth, budget); break;
        case K_DARRAY: t = gen_darray(r, depth, budget); break;
        case K_RESIZED: t = gen_resized(r, depth, budget); break;
        default: t = gen_dup(r, depth, budget); break;
        }
        if (!t) continue;
        if (t->tainted) {
            n_mpi_inconsistent++;
            if (g_verbose) fprintf(stderr, "  MPI inconsistent with its own extent, dropped: %s\n", t->desc);
            node_free(t);
            continue;
        }
        if (node_span(t) <= budget) {
            n_kind[k]++;
            return t;
        }
        node_free(t); /* too big for this level: try again */
    }
    return leaf_node((int)tu_range(r, 0, nleaves - 1));
}

/* ---------------------------------------------------------------------------------------- */
/* Data checks. */

/* Random cut points of [0, total) into fragments, and an order to take them in. */
static int make_fragments(tu_rng_t *r, int64_t total, int64_t *cut, int *order, int maxf)
{
    int nf = (int)tu_range(r, 1, total < maxf ? (total > 0 ? total : 1) : maxf);
    int64_t *pts = cut;
    pts[0] = 0;
    for (int i = 1; i < nf; i++) pts[i] = tu_range(r, 1, total > 1 ? total - 1 : 1);
    pts[nf] = total;
    /* sort and drop duplicates */
    for (int i = 1; i < nf; i++)
        for (int j = i; j > 0 && pts[j] < pts[j - 1]; j--) {
            int64_t x = pts[j];
            pts[j] = pts[j - 1];
            pts[j - 1] = x;
        }
    int w = 1;
    for (int i = 1; i <= nf; i++)
        if (pts[i] != pts[w - 1]) pts[w++] = pts[i];
    nf = w - 1;
    if (nf < 1) { /* total == 0 */
        pts[1] = total;
        nf = 1;
    }
    for (int i = 0; i < nf; i++) order[i] = i;
    for (int i = nf - 1; i > 0; i--) {
        int j = (int)tu_range(r, 0, i), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    return nf;
}

#define MAXF 24

/* Pack [cut[i], cut[i+1]) fragments of `g` out of order and compare with `ref`. Each call
 * lands in a poisoned scratch buffer with room to spare, so writing past the fragment shows. */
static void check_frag_pack(tu_rng_t *r, const node_t *n, gdte_type_h g, const char *base, int count, const char *ref,
                            int64_t total)
{
    int64_t cut[MAXF + 1];
    int order[MAXF];
    int nf = make_fragments(r, total, cut, order, MAXF);
    char *asm_ = malloc((size_t)total + 1), *scratch = malloc((size_t)total + PAD);
    for (int k = 0; k < nf; k++) {
        int i = order[k];
        int64_t len = cut[i + 1] - cut[i], done = -1, outsize;
        gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = cut[i]};
        switch (tu_range(r, 0, 2)) {
        case 0: /* bounded by max_bytes */
            p.field_mask |= GDTE_PACK_FIELD_MAX_BYTES;
            p.max_bytes = len;
            outsize = len + PAD;
            break;
        case 1: /* bounded by the output size */
            outsize = len;
            break;
        default: /* both, the smaller one wins */
            p.field_mask |= GDTE_PACK_FIELD_MAX_BYTES;
            p.max_bytes = len + tu_range(r, 0, 9);
            outsize = len;
        }
        if (cut[i + 1] == total && !(p.field_mask & GDTE_PACK_FIELD_MAX_BYTES)) outsize = len + PAD; /* stream end bounds it */
        memset(scratch, 0xE7, (size_t)len + PAD);
        gdte_status_t st = gdte_pack(base, count, g, scratch, outsize, &p, &done);
        if (st != GDTE_OK || done != len)
            fail(n, "fragment pack [%lld, %lld): %s, %lld bytes", (long long)cut[i], (long long)cut[i + 1],
                 gdte_status_name(st), (long long)done);
        if (tu_find_unpoisoned(scratch + len, PAD, 0xE7) >= 0)
            fail(n, "fragment pack [%lld, %lld) wrote past its end", (long long)cut[i], (long long)cut[i + 1]);
        memcpy(asm_ + cut[i], scratch, (size_t)len);
        n_fragments++;
    }
    if (memcmp(asm_, ref, (size_t)total)) {
        int64_t j = 0;
        while (asm_[j] == ref[j]) j++;
        fail(n, "fragmented pack differs from MPI_Pack at packed byte %lld of %lld (%d fragments)", (long long)j,
             (long long)total, nf);
    }
    free(asm_);
    free(scratch);
}

static void check_frag_unpack(tu_rng_t *r, const node_t *n, gdte_type_h g, char *ubuf, char *ubase, int count,
                              const char *packed, int64_t total, const char *expect, int64_t blen)
{
    int64_t cut[MAXF + 1];
    int order[MAXF];
    int nf = make_fragments(r, total, cut, order, MAXF);
    for (int k = 0; k < nf; k++) {
        int i = order[k];
        int64_t len = cut[i + 1] - cut[i], done = -1;
        gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = cut[i]};
        gdte_status_t st = gdte_unpack(packed + cut[i], len, ubase, count, g, &p, &done);
        if (st != GDTE_OK || done != len)
            fail(n, "fragment unpack [%lld, %lld): %s", (long long)cut[i], (long long)cut[i + 1], gdte_status_name(st));
    }
    if (memcmp(ubuf, expect, (size_t)blen)) {
        int64_t j = 0;
        while (ubuf[j] == expect[j]) j++;
        fail(n, "fragmented unpack differs from MPI_Unpack at buffer byte %lld (%d fragments)", (long long)j, nf);
    }
}

static void run_case(int64_t k)
{
    g_case = k;
    tu_rng_t r = {g_seed ^ ((uint64_t)k * 0xd1b54a32d192ed03ull)};
    tu_next(&r);
    int64_t live0 = gdte_engine_live_types();
    /* mostly small types (fast, and small types meet every code path); 1 in 10 up to 64 KiB;
     * 1 in 30 large: counts up to 2^20 and spans up to 4 MiB */
    g_large = tu_chance(&r, 1, 30);
    int64_t budget = g_large ? (4 << 20) : tu_chance(&r, 1, 10) ? (1 << 16) : (1 << 12);
    node_t *n = gen(&r, 0, budget);

    /* count: the buffer of count elements stays under MAX_CASE_BYTES */
    int64_t E = n->ub - n->lb, span = n->tub - n->tlb;
    int64_t per = (llabs(E) > span ? llabs(E) : span) + 1;
    int64_t cmax = MAX_CASE_BYTES / per;
    int64_t count = tu_chance(&r, 1, 40) ? 0 : tu_chance(&r, 1, 3) ? 1 : tu_range(&r, 2, 5);
    if (tu_chance(&r, 1, 25)) count = tu_range(&r, 6, cmax > 6 ? (cmax < 200000 ? cmax : 200000) : 6);
    if (count > cmax) count = cmax;
    if (g_verbose) fprintf(stderr, "case %lld: count %lld of %s\n", (long long)k, (long long)count, n->desc);

    if (MPI_Type_commit(&n->m) != MPI_SUCCESS) fail(n, "MPI_Type_commit");
    if (gdte_type_commit(n->g) != GDTE_OK) fail(n, "gdte_type_commit");

    int64_t total = count * n->size;
    if (total == 0) n_empty++;
    /* user buffer covering every byte count elements touch, with margins */
    int64_t lo = 0, hi = 0;
    if (total > 0) {
        int64_t last = (count - 1) * E;
        lo = (last < 0 ? last : 0) + n->tlb;
        hi = (last > 0 ? last : 0) + n->tub;
    }
    int64_t blen = hi - lo + 2 * PAD;
    char *src = malloc((size_t)blen), *ref = malloc((size_t)total + PAD), *out = malloc((size_t)total + PAD);
    char *u1 = malloc((size_t)blen), *u2 = malloc((size_t)blen), *u3 = malloc((size_t)blen);
    char *sbase = src + PAD - lo, *b1 = u1 + PAD - lo, *b2 = u2 + PAD - lo, *b3 = u3 + PAD - lo;
    tu_fill_random(&r, src, (size_t)blen);

    /* Full pack: MPI_Pack is the reference; the bytes after the stream must stay poisoned. */
    int pos = 0;
    memset(ref, 0xA5, (size_t)total + PAD);
    if (MPI_Pack(sbase, (int)count, n->m, ref, (int)total, &pos, MPI_COMM_SELF) != MPI_SUCCESS || pos != total)
        fail(n, "MPI_Pack (count %lld)", (long long)count);
    memset(out, 0xA5, (size_t)total + PAD);
    int64_t done = -1;
    gdte_status_t st = gdte_pack(sbase, count, n->g, out, total + PAD, NULL, &done);
    if (st != GDTE_OK || done != total)
        fail(n, "gdte_pack (count %lld): %s, %lld of %lld bytes", (long long)count, gdte_status_name(st), (long long)done,
             (long long)total);
    if (memcmp(out, ref, (size_t)total + PAD)) {
        int64_t j = 0;
        while (out[j] == ref[j]) j++;
        fail(n, "pack differs from MPI_Pack at packed byte %lld of %lld (count %lld)", (long long)j, (long long)total,
             (long long)count);
    }
    check_frag_pack(&r, n, n->g, sbase, (int)count, ref, total);

    /* Unpack needs a type whose bytes do not overlap (else the result depends on order, and
     * MPI forbids it for receives). MPI tells: unpack all-ones into zeros and count. */
    int overlap = 0;
    if (total > 0) {
        char *ones = malloc((size_t)total);
        memset(ones, 0xFF, (size_t)total);
        memset(u1, 0, (size_t)blen);
        pos = 0;
        MPI_Unpack(ones, (int)total, &pos, b1, (int)count, n->m, MPI_COMM_SELF);
        int64_t touched = 0;
        for (int64_t i = 0; i < blen; i++) touched += (unsigned char)u1[i] == 0xFF;
        overlap = touched != total;
        free(ones);
    }
    if (overlap) n_overlap++;
    if (!overlap) {
        tu_fill_random(&r, u1, (size_t)blen);
        memcpy(u2, u1, (size_t)blen);
        memcpy(u3, u1, (size_t)blen);
        pos = 0;
        if (MPI_Unpack(ref, (int)total, &pos, b1, (int)count, n->m, MPI_COMM_SELF) != MPI_SUCCESS) fail(n, "MPI_Unpack");
        st = gdte_unpack(ref, total, b2, count, n->g, NULL, &done);
        if (st != GDTE_OK || done != total) fail(n, "gdte_unpack: %s", gdte_status_name(st));
        if (memcmp(u1, u2, (size_t)blen)) {
            int64_t j = 0;
            while (u1[j] == u2[j]) j++;
            fail(n, "unpack differs from MPI_Unpack at buffer byte %lld (lo %lld)", (long long)j, (long long)lo);
        }
        check_frag_unpack(&r, n, n->g, u3, b3, (int)count, ref, total, u1, blen);
    }

    /* The import of the MPI type must give MPI's bounds and the same bytes. */
    gdte_type_h imp;
    st = gdte_mpi_type_import(n->m, &imp);
    if (st != GDTE_OK) fail(n, "gdte_mpi_type_import: %s", gdte_status_name(st));
    gdte_type_info_t ii;
    gdte_type_get_info(imp, &ii);
    if (ii.size != n->size || ii.lb != n->lb || ii.extent != n->ub - n->lb ||
        (n->size && (ii.true_lb != n->tlb || ii.true_extent != n->tub - n->tlb)))
        fail(n, "imported bounds: size %lld lb %lld extent %lld true %lld/%lld", (long long)ii.size, (long long)ii.lb,
             (long long)ii.extent, (long long)ii.true_lb, (long long)ii.true_extent);
    gdte_type_h again;
    if (gdte_mpi_type_import(n->m, &again) != GDTE_OK || again != imp) fail(n, "second import is not a cache hit");
    memset(out, 0xA5, (size_t)total + PAD);
    st = gdte_pack(sbase, count, imp, out, total + PAD, NULL, &done);
    if (st != GDTE_OK || done != total || memcmp(out, ref, (size_t)total + PAD))
        fail(n, "pack with the imported type differs from MPI_Pack");
    check_frag_pack(&r, n, imp, sbase, (int)count, ref, total);
    if (!overlap) {
        tu_fill_random(&r, u2, (size_t)blen);
        memcpy(u1, u2, (size_t)blen);
        pos = 0;
        MPI_Unpack(ref, (int)total, &pos, b1, (int)count, n->m, MPI_COMM_SELF);
        st = gdte_unpack(ref, total, b2, count, imp, NULL, &done);
        if (st != GDTE_OK || done != total || memcmp(u1, u2, (size_t)blen)) fail(n, "unpack with the imported type");
    }

    free(src), free(ref), free(out), free(u1), free(u2), free(u3);
    node_free(n); /* MPI_Type_free runs the import cache's delete callback */
    if (gdte_engine_live_types() != live0)
        fail(NULL, "%lld gdte types leaked by the case (import cache or engine)",
             (long long)(gdte_engine_live_types() - live0));
    n_cases++;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : def;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (gdte_init(NULL) != GDTE_OK) {
        fprintf(stderr, "gdte_init failed\n");
        return 1;
    }
    g_seed = env_u64("GDTETEST_POOL_SEED", g_seed);
    max_depth = (int)env_u64("GDTETEST_POOL_DEPTH", (uint64_t)max_depth);
    int64_t ncases = (int64_t)env_u64("GDTETEST_POOL_CASES", 1000), first = 0;
    int64_t one = getenv("GDTETEST_POOL_CASE") ? (int64_t)env_u64("GDTETEST_POOL_CASE", 0) : -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) ncases = strtoll(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--first") && i + 1 < argc) first = strtoll(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--case") && i + 1 < argc) one = strtoll(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--verbose")) g_verbose = 1;
        else {
            fprintf(stderr, "usage: %s [--seed S] [--cases N] [--first K] [--case K] [--verbose]\n", argv[0]);
            return 2;
        }
    }
    leaves_init();
    /* Import every leaf once, so the named-type table is complete before leaks are counted. */
    for (int i = 0; i < nleaves; i++) {
        gdte_type_h t;
        if (gdte_mpi_type_import(leaves[i].m, &t) != GDTE_OK) {
            fprintf(stderr, "import of %s failed\n", leaves[i].name);
            return 1;
        }
    }
    double t0 = MPI_Wtime();
    if (one >= 0) {
        run_case(one);
    } else {
        for (int64_t k = first; k < first + ncases; k++) run_case(k);
    }
    double t1 = MPI_Wtime();
    gdte_mpi_import_stats_t is;
    gdte_mpi_import_get_stats(&is);
    printf("engine_pool: seed 0x%llx: %ld cases passed in %.1f s (%ld nodes; %ld fragments; %ld empty; %ld overlapping, "
           "pack only; %ld bounds differences explained by Open MPI's rules; %ld darrays refused by MPI; %ld types "
           "dropped where MPI contradicts its own extent; import: %lld builds, %lld resized to MPI's bounds)\n",
           (unsigned long long)g_seed, n_cases, t1 - t0, n_nodes, n_fragments, n_empty, n_overlap, n_bound_diffs,
           n_mpi_refused, n_mpi_inconsistent, (long long)is.builds, (long long)is.wrapped);
    printf("  constructors:");
    for (int k = 0; k < K_COUNT_; k++) printf(" %s %ld", kind_names[k], n_kind[k]);
    printf("\n");
    gdte_finalize();
    MPI_Finalize();
    return 0;
}
