/*
 * gdte_mpi_type_import: every predefined type and every combiner against MPI's own bounds and
 * MPI_Pack/MPI_Unpack; the cache (hits, dup, MPI_Type_free releasing, children shared, from
 * several threads); MPI's bounds where they differ from the standard; bad handles; and the
 * status -> MPI error class map.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <pthread.h>
#include "testutil.h"
#include "mpicompare.h"
#include "engine/engine.h"
#include "mpi/import.h"

static tu_rng_t rng = {0x1a2b3c};

static int64_t builds(void)
{
    gdte_mpi_import_stats_t s;
    gdte_mpi_import_get_stats(&s);
    return s.builds;
}

/* Import `dt` (committed by the caller) and check bounds and data against MPI for `count`
 * elements. Returns the imported handle (borrowed) or NULL. */
static gdte_type_h check_import(MPI_Datatype dt, int count, const char *what)
{
    gdte_type_h t = NULL;
    gdte_status_t st = gdte_mpi_type_import(dt, &t);
    if (st != GDTE_OK) {
        fprintf(stderr, "%s: import failed: %s\n", what, gdte_status_name(st));
        tu_failures++;
        return NULL;
    }
    MPI_Count lb, ext, tlb, text, size;
    MPI_Type_get_extent_x(dt, &lb, &ext);
    MPI_Type_get_true_extent_x(dt, &tlb, &text);
    MPI_Type_size_x(dt, &size);
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(t, &in));
    int bad = in.size != size || in.lb != lb || in.extent != ext || !in.committed ||
              (size > 0 && (in.true_lb != tlb || in.true_extent != text));
    if (bad) {
        tu_bounds_differ(what, &in, size, lb, ext, tlb, text);
        return t;
    }
    tu_checks++;
    if (size == 0) return t;
    /* data: count elements over a random buffer */
    tu_pack_vs_mpi(&rng, t, dt, count, ext, tlb, text, size, what);
    return t;
}

/* Commit, check, free. */
static void check_derived(MPI_Datatype *dt, int count, const char *what)
{
    MPI_Type_commit(dt);
    check_import(*dt, count, what);
    MPI_Type_free(dt);
}

/* A predefined type first met as a child must come out committed when asked for itself. */
static void test_named_first_as_child(void)
{
    MPI_Datatype t;
    MPI_Type_contiguous(2, MPI_LONG_DOUBLE_INT, &t);
    check_derived(&t, 2, "contiguous of long double + int");
    gdte_type_h g;
    gdte_type_info_t in;
    CHECK_OK(gdte_mpi_type_import(MPI_LONG_DOUBLE_INT, &g));
    CHECK_OK(gdte_type_get_info(g, &in));
    CHECK(in.committed);
    check_import(MPI_LONG_DOUBLE_INT, 3, "MPI_LONG_DOUBLE_INT after its parent");
}

static void test_named(void)
{
    struct { MPI_Datatype dt; const char *name; } named[] = {
#define N(x) {x, #x}
        N(MPI_BYTE), N(MPI_PACKED), N(MPI_CHAR), N(MPI_SIGNED_CHAR), N(MPI_UNSIGNED_CHAR), N(MPI_SHORT),
        N(MPI_UNSIGNED_SHORT), N(MPI_INT), N(MPI_UNSIGNED), N(MPI_LONG), N(MPI_UNSIGNED_LONG), N(MPI_LONG_LONG_INT),
        N(MPI_UNSIGNED_LONG_LONG), N(MPI_FLOAT), N(MPI_DOUBLE), N(MPI_LONG_DOUBLE), N(MPI_WCHAR), N(MPI_C_BOOL),
        N(MPI_INT8_T), N(MPI_INT16_T), N(MPI_INT32_T), N(MPI_INT64_T), N(MPI_UINT8_T), N(MPI_UINT16_T),
        N(MPI_UINT32_T), N(MPI_UINT64_T), N(MPI_AINT), N(MPI_OFFSET), N(MPI_COUNT), N(MPI_C_COMPLEX),
        N(MPI_C_FLOAT_COMPLEX), N(MPI_C_DOUBLE_COMPLEX), N(MPI_C_LONG_DOUBLE_COMPLEX), N(MPI_CXX_BOOL),
        N(MPI_CXX_FLOAT_COMPLEX), N(MPI_CXX_DOUBLE_COMPLEX), N(MPI_CXX_LONG_DOUBLE_COMPLEX), N(MPI_CHARACTER),
        N(MPI_INTEGER), N(MPI_REAL), N(MPI_DOUBLE_PRECISION), N(MPI_COMPLEX), N(MPI_DOUBLE_COMPLEX), N(MPI_LOGICAL),
        N(MPI_INTEGER1), N(MPI_INTEGER2), N(MPI_INTEGER4), N(MPI_INTEGER8), N(MPI_REAL4), N(MPI_REAL8), N(MPI_REAL16),
        N(MPI_COMPLEX8), N(MPI_COMPLEX16), N(MPI_COMPLEX32), N(MPI_FLOAT_INT), N(MPI_DOUBLE_INT), N(MPI_LONG_INT),
        N(MPI_2INT), N(MPI_SHORT_INT), N(MPI_LONG_DOUBLE_INT), N(MPI_2REAL), N(MPI_2DOUBLE_PRECISION),
        N(MPI_2INTEGER),
#undef N
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        if (named[i].dt == MPI_DATATYPE_NULL) continue;
        gdte_type_h t = check_import(named[i].dt, 3, named[i].name), t2 = NULL;
        /* predefined types come from the static table: the same handle every time */
        CHECK_OK(gdte_mpi_type_import(named[i].dt, &t2));
        CHECK(t == t2);
    }
    /* identity and layout of a few: the pair types are structs with a gap */
    gdte_type_h t;
    gdte_type_info_t in;
    CHECK_OK(gdte_mpi_type_import(MPI_SHORT_INT, &t));
    CHECK_OK(gdte_type_get_info(t, &in));
    CHECK_EQ(in.size, sizeof(short) + sizeof(int));
    CHECK_EQ(in.extent, sizeof(struct { short a; int b; }));
    CHECK_EQ(in.num_blocks, 2);
    CHECK_OK(gdte_mpi_type_import(MPI_INT, &t));
    CHECK(t == gdte_type_predefined(GDTE_BASIC_INT32));
    CHECK_OK(gdte_mpi_type_import(MPI_DOUBLE, &t));
    CHECK(t == gdte_type_predefined(GDTE_BASIC_DOUBLE));
    /* signatures: MPI_INT and MPI_INT32_T are the same element; MPI_FLOAT is not */
    gdte_type_h a, b, c;
    gdte_mpi_type_import(MPI_INT, &a);
    gdte_mpi_type_import(MPI_INT32_T, &b);
    gdte_mpi_type_import(MPI_FLOAT, &c);
    uint64_t ha, hb, hc;
    gdte_type_signature(1, a, &ha, NULL);
    gdte_type_signature(1, b, &hb, NULL);
    gdte_type_signature(1, c, &hc, NULL);
    CHECK(ha == hb);
    CHECK(ha != hc);
}

static void test_f90(void)
{
    MPI_Datatype r, c, i, s;
    if (MPI_Type_create_f90_real(6, MPI_UNDEFINED, &r) != MPI_SUCCESS ||
        MPI_Type_create_f90_complex(15, MPI_UNDEFINED, &c) != MPI_SUCCESS ||
        MPI_Type_create_f90_integer(9, &i) != MPI_SUCCESS) {
        printf("import_test: F90 types not available in this MPI, skipped\n");
        return;
    }
    check_import(r, 4, "f90 real");
    check_import(c, 4, "f90 complex");
    check_import(i, 4, "f90 integer");
    /* as members of a struct, which must not free them */
    int bl[3] = {1, 2, 1};
    MPI_Aint d[3] = {0, 8, 48};
    MPI_Datatype ty[3] = {r, c, i};
    MPI_Type_create_struct(3, bl, d, ty, &s);
    check_derived(&s, 3, "struct of f90 types");
    check_import(r, 2, "f90 real after its parent was freed");
}

static void test_combiners(void)
{
    MPI_Datatype t, u, v, w;
    MPI_Type_dup(MPI_DOUBLE_INT, &t);
    check_derived(&t, 3, "dup");
    MPI_Type_contiguous(5, MPI_SHORT_INT, &t);
    check_derived(&t, 2, "contiguous");
    MPI_Type_vector(4, 3, -7, MPI_FLOAT, &t);
    check_derived(&t, 3, "vector, negative stride");
    MPI_Type_create_hvector(3, 2, 37, MPI_DOUBLE, &t);
    check_derived(&t, 3, "hvector, odd stride");
    int bl[5] = {1, 0, 3, 2, 1}, di[5] = {9, 4, -3, 12, 2};
    MPI_Aint ad[5] = {100, 3, -20, 40, 61};
    MPI_Type_indexed(5, bl, di, MPI_INT, &t);
    check_derived(&t, 2, "indexed, zero blocklength");
    MPI_Type_create_hindexed(5, bl, ad, MPI_DOUBLE, &t);
    check_derived(&t, 2, "hindexed");
    MPI_Type_create_indexed_block(5, 2, di, MPI_LONG, &t);
    check_derived(&t, 2, "indexed_block");
    MPI_Type_create_hindexed_block(5, 3, ad, MPI_CHAR, &t);
    check_derived(&t, 2, "hindexed_block");
    MPI_Datatype ty[5] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT_INT, MPI_LONG_DOUBLE, MPI_INT};
    MPI_Aint sd[5] = {1, 8, 17, 32, 60};
    int sb[5] = {3, 1, 2, 1, 1};
    MPI_Type_create_struct(5, sb, sd, ty, &t);
    check_derived(&t, 3, "struct, gaps and mixed elements");
    int sz[3] = {6, 5, 4}, sub[3] = {3, 2, 2}, st[3] = {1, 2, 0};
    MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE, &t);
    check_derived(&t, 2, "subarray C");
    MPI_Type_create_subarray(3, sz, sub, st, MPI_ORDER_FORTRAN, MPI_INT, &t);
    check_derived(&t, 2, "subarray Fortran");
    int gs[3] = {9, 7, 4}, dist[3] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_NONE},
        darg[3] = {MPI_DISTRIBUTE_DFLT_DARG, 2, MPI_DISTRIBUTE_DFLT_DARG}, ps[3] = {2, 3, 1};
    for (int rank = 0; rank < 6; rank++) {
        MPI_Type_create_darray(6, rank, 3, gs, dist, darg, ps, rank % 2 ? MPI_ORDER_FORTRAN : MPI_ORDER_C, MPI_FLOAT, &t);
        check_derived(&t, 2, "darray");
    }
    MPI_Type_create_resized(MPI_INT, -4, 20, &t);
    check_derived(&t, 3, "resized");
    /* nested to depth 4, with a struct of a subarray and a resized vector */
    MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_DOUBLE_INT, &u);
    MPI_Type_vector(3, 1, 2, MPI_FLOAT, &v);
    MPI_Type_create_resized(v, 0, 8, &w);
    MPI_Type_free(&v);
    MPI_Datatype ty2[2] = {u, w};
    int bl2[2] = {1, 2};
    MPI_Aint d2[2] = {0, 1000};
    MPI_Type_create_struct(2, bl2, d2, ty2, &v);
    MPI_Type_free(&u);
    MPI_Type_free(&w);
    MPI_Type_contiguous(2, v, &t);
    MPI_Type_free(&v);
    check_derived(&t, 2, "nested: contiguous of struct of subarray and resized vector");
    /* many blocks */
    int n = 100000;
    int *bls = malloc(n * sizeof *bls), *dis = malloc(n * sizeof *dis);
    for (int i = 0, d = 0; i < n; i++) {
        bls[i] = 1 + i % 3;
        dis[i] = d;
        d += bls[i] + 1 + (i * 7) % 5;
    }
    MPI_Type_indexed(n, bls, dis, MPI_DOUBLE, &t);
    check_derived(&t, 1, "indexed, 10^5 blocks");
    free(bls), free(dis);
}

/* Where Open MPI's bounds differ from the standard's the import must report MPI's. */
static void test_open_mpi_bounds(void)
{
    MPI_Datatype s, t;
    int bl[2] = {1, 1};
    MPI_Aint d[2] = {0, 8};
    MPI_Datatype ty[2] = {MPI_DOUBLE, MPI_CHAR};
    MPI_Type_create_struct(2, bl, d, ty, &s);
    d[1] = 4;
    MPI_Type_create_hindexed(2, bl, d, s, &t);
    MPI_Type_commit(&t);
    /* gdte's own constructors follow the standard: extent 16 */
    gdte_type_h gs, gt;
    int64_t gbl[2] = {1, 1}, gd[2] = {0, 8};
    gdte_type_h gty[2] = {gdte_type_predefined(GDTE_BASIC_DOUBLE), gdte_type_predefined(GDTE_BASIC_CHAR)};
    CHECK_OK(gdte_type_create_struct(2, gbl, gd, gty, &gs));
    gd[1] = 4;
    CHECK_OK(gdte_type_create_hindexed(2, gbl, gd, gs, &gt));
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(gt, &in));
    CHECK_EQ(in.extent, 16);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(t, &lb, &ext);
    gdte_mpi_import_stats_t s0, s1;
    gdte_mpi_import_get_stats(&s0);
    gdte_type_h imp = check_import(t, 3, "hindexed of a padded struct");
    gdte_mpi_import_get_stats(&s1);
    if (ext != 16) CHECK(s1.wrapped > s0.wrapped); /* Open MPI 4.1 reports 24 */
    if (imp) {
        CHECK_OK(gdte_type_get_info(imp, &in));
        CHECK_EQ(in.extent, ext);
    }
    gdte_type_free(&gt);
    gdte_type_free(&gs);
    MPI_Type_free(&t);
    MPI_Type_free(&s);

    /* Open MPI packs a byte stride of -1 as contiguous: the import must not hide that. */
    MPI_Type_vector(3, 1, -1, MPI_CHAR, &t);
    MPI_Type_commit(&t);
    gdte_type_h v = NULL;
    gdte_status_t st = gdte_mpi_type_import(t, &v);
    if (st == GDTE_OK) {
        check_import(t, 2, "vector with byte stride -1"); /* an MPI without the bug */
    } else {
        CHECK_EQ(st, GDTE_ERR_INTERNAL);
    }
    MPI_Type_free(&t);
}

static void test_cache(void)
{
    int64_t live0 = gdte_engine_live_types();
    MPI_Datatype c, p1, p2, dup;
    MPI_Type_vector(10, 2, 5, MPI_INT, &c);
    MPI_Type_contiguous(3, c, &p1);
    MPI_Type_create_hvector(2, 1, 1000, c, &p2);
    MPI_Type_commit(&p1);
    MPI_Type_commit(&p2);
    int64_t b0 = builds();
    gdte_type_h t1, t1b, t2, td;
    CHECK_OK(gdte_mpi_type_import(p1, &t1));
    CHECK_EQ(builds() - b0, 2); /* c and p1 */
    CHECK(gdte_engine_live_types() > live0);
    CHECK_OK(gdte_mpi_type_import(p1, &t1b));
    CHECK(t1 == t1b);
    CHECK_EQ(builds() - b0, 2); /* a hit builds nothing */
    CHECK_OK(gdte_mpi_type_import(p2, &t2));
    /* c's import is reused where MPI_Type_get_contents hands back c itself; Open MPI 4.1
     * hands back a new object each time, so c is built again */
    int64_t b1 = builds() - b0;
    CHECK(b1 == 3 || b1 == 4);
    /* a dup shares the gdte type through the attribute copy callback */
    MPI_Type_dup(p1, &dup);
    CHECK_OK(gdte_mpi_type_import(dup, &td));
    CHECK(td == t1);
    CHECK_EQ(builds() - b0, b1);
    /* the child freed by the application first: the parents keep what they need */
    MPI_Type_free(&c);
    check_import(p2, 2, "parent of a freed child");
    MPI_Type_free(&p1);
    check_import(dup, 2, "dup of a freed type");
    MPI_Type_free(&dup);
    MPI_Type_free(&p2);
    /* MPI_Type_free ran the delete callbacks: every gdte type is gone */
    CHECK_EQ(gdte_engine_live_types(), live0);
    /* an uncommitted type can be imported; its import is committed */
    MPI_Type_contiguous(2, MPI_DOUBLE, &c);
    gdte_type_info_t in;
    CHECK_OK(gdte_mpi_type_import(c, &t1));
    CHECK_OK(gdte_type_get_info(t1, &in));
    CHECK(in.committed);
    MPI_Type_free(&c);
    CHECK_EQ(gdte_engine_live_types(), live0);
}

typedef struct thr {
    MPI_Datatype dt;
    gdte_type_h got;
    gdte_status_t st;
} thr_t;

static void *import_thread(void *arg)
{
    thr_t *t = arg;
    for (int i = 0; i < 1000; i++) {
        gdte_type_h h;
        t->st = gdte_mpi_type_import(t->dt, &h);
        if (t->st != GDTE_OK) break;
        if (i == 0) t->got = h;
        else if (h != t->got) t->st = GDTE_ERR_INTERNAL;
    }
    return NULL;
}

static void test_threads(int provided)
{
    if (provided < MPI_THREAD_MULTIPLE) {
        printf("import_test: MPI_THREAD_MULTIPLE not provided, thread test skipped\n");
        return;
    }
    MPI_Datatype dt;
    MPI_Type_vector(7, 2, 3, MPI_DOUBLE, &dt);
    MPI_Type_commit(&dt);
    pthread_t th[4];
    thr_t a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (thr_t){dt, NULL, GDTE_OK};
        pthread_create(&th[i], NULL, import_thread, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_OK(a[i].st);
        CHECK(a[i].got == a[0].got);
    }
    MPI_Type_free(&dt);
}

static void test_bad_input(void)
{
    gdte_type_h t = (gdte_type_h)0x1234;
    CHECK_ST(gdte_mpi_type_import(MPI_DATATYPE_NULL, &t), GDTE_ERR_INVALID_TYPE);
    CHECK(t == (gdte_type_h)0x1234); /* outputs are written only on success */
    CHECK_ST(gdte_mpi_type_import(MPI_INT, NULL), GDTE_ERR_INVALID_ARG);
}

static void test_error_classes(void)
{
#define X(name, value, text)                                                                          \
    {                                                                                                 \
        int cls = gdte_mpi_status_to_mpi_error(name), c2 = -1;                                        \
        if (name == GDTE_OK || name == GDTE_INPROGRESS) {                                             \
            CHECK_EQ(cls, MPI_SUCCESS);                                                               \
        } else {                                                                                      \
            CHECK(cls != MPI_SUCCESS && cls != MPI_ERR_UNKNOWN && cls <= MPI_ERR_LASTCODE);           \
            CHECK(MPI_Error_class(cls, &c2) == MPI_SUCCESS && c2 == cls);                             \
        }                                                                                             \
    }
    GDTE_STATUS_LIST(X)
#undef X
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_TRUNCATE), MPI_ERR_TRUNCATE);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_INVALID_TYPE), MPI_ERR_TYPE);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_NOT_COMMITTED), MPI_ERR_TYPE);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_MISMATCH), MPI_ERR_TYPE);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_COUNT), MPI_ERR_COUNT);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_OVERFLOW), MPI_ERR_COUNT);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_NULL_BUFFER), MPI_ERR_BUFFER);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_NO_MEMORY), MPI_ERR_NO_MEM);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_NO_DEVICE_MEMORY), MPI_ERR_NO_MEM);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_INVALID_ARG), MPI_ERR_ARG);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_INTERNAL), MPI_ERR_INTERN);
    CHECK_EQ(gdte_mpi_status_to_mpi_error(GDTE_ERR_GPU), MPI_ERR_OTHER);
    CHECK_EQ(gdte_mpi_status_to_mpi_error((gdte_status_t)-999), MPI_ERR_UNKNOWN);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (gdte_init(NULL) != GDTE_OK) return 1;
    test_bad_input();
    test_named_first_as_child();
    test_named();
    test_f90();
    test_combiners();
    test_open_mpi_bounds();
    test_cache();
    test_threads(provided);
    test_error_classes();
    int rc = tu_report("import_test");
    gdte_finalize();
    MPI_Finalize();
    return rc;
}
