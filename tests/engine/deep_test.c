/*
 * Deep nesting: chains of 10^5 constructors (contiguous(1), resized, dup, hvector, hindexed,
 * struct, and all of them mixed), built with gdte's constructors and with MPI's, then
 * committed, packed and unpacked against MPI_Pack/MPI_Unpack on host buffers, imported from
 * MPI with gdte_mpi_type_import, and freed. Each chain is held by its top type only (the
 * user frees every level as it goes), so freeing the top releases 10^5 types at once.
 * Before the fix, commit, import and free recursed per level and overflowed the C stack
 * (30,000 levels crashed the import; 100,000 commit; 10^6 free).
 *
 * Also: the depth limit (GDTE_MAX_TYPE_DEPTH levels work, one more is GDTE_ERR_UNSUPPORTED,
 * and that chain of 2^20 types frees without recursion), and the work of committing dup
 * chains, bounded by counting nodes walked (gdte_engine_nodes_visited), not by time: the old
 * commit walked the whole chain for each dup, n^2/2 nodes (8 * 10^8 for 40,000 dups).
 *
 * Open MPI's own free recurses: its types are freed top first, so each MPI_Type_free
 * releases one level.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include "testutil.h"
#include "mpicompare.h"
#include "engine/engine.h"
#include "mpi/import.h"

#define DEPTH 100000

static tu_rng_t rng = {0xdee9};

typedef enum { K_CONTIG, K_RESIZED, K_DUP, K_HVECTOR, K_HINDEXED, K_STRUCT, K_MIXED, K_COUNT } kind_t;
static const char *kind_name[K_COUNT] = {"contiguous(1)", "resized", "dup", "hvector", "hindexed", "struct", "mixed"};

/* Level i of a chain of kind k over `g`/`m` (both owned by the caller; new references out). */
static int level(kind_t k, int64_t i, gdte_type_h g, MPI_Datatype m, gdte_type_h *g_p, MPI_Datatype *m_p)
{
    if (k == K_MIXED) k = (kind_t)(i % 6);
    gdte_status_t st = GDTE_ERR_INTERNAL;
    int rc = MPI_ERR_OTHER;
    switch (k) {
    case K_CONTIG:
        st = gdte_type_create_contiguous(1, g, g_p);
        rc = MPI_Type_contiguous(1, m, m_p);
        break;
    case K_RESIZED: { /* alternate two extents so no level is a no-op */
        int64_t ext = i % 2 ? 24 : 16;
        st = gdte_type_create_resized(g, 0, ext, g_p);
        rc = MPI_Type_create_resized(m, 0, ext, m_p);
        break;
    }
    case K_DUP:
        st = gdte_type_dup(g, g_p);
        rc = MPI_Type_dup(m, m_p);
        break;
    case K_HVECTOR: { /* two blocks at a few levels (the data doubles), one elsewhere */
        int n = i < 3 ? 2 : 1;
        MPI_Aint lb, ext;
        MPI_Type_get_extent(m, &lb, &ext);
        st = gdte_type_create_hvector(n, 1, ext + 8, g, g_p);
        rc = MPI_Type_create_hvector(n, 1, ext + 8, m, m_p);
        break;
    }
    case K_HINDEXED: {
        int64_t bl = 1, d = i % 3 == 0 ? 8 : 0;
        int mbl = 1;
        MPI_Aint md = (MPI_Aint)d;
        st = gdte_type_create_hindexed(1, &bl, &d, g, g_p);
        rc = MPI_Type_create_hindexed(1, &mbl, &md, m, m_p);
        break;
    }
    case K_STRUCT: { /* every 1000 levels a second member: the struct's other children */
        MPI_Aint lb, ext;
        MPI_Type_get_extent(m, &lb, &ext);
        int two = i % 1000 == 0;
        int64_t bl[2] = {1, 1}, d[2] = {0, ext};
        int mbl[2] = {1, 1};
        MPI_Aint md[2] = {0, ext};
        gdte_type_h gt[2] = {g, gdte_type_predefined(GDTE_BASIC_INT32)};
        MPI_Datatype mt[2] = {m, MPI_INT};
        st = gdte_type_create_struct(two ? 2 : 1, bl, d, gt, g_p);
        rc = MPI_Type_create_struct(two ? 2 : 1, mbl, md, mt, m_p);
        break;
    }
    default: break;
    }
    if (st != GDTE_OK || rc != MPI_SUCCESS) {
        fprintf(stderr, "%s level %lld: gdte %s, MPI %d\n", kind_name[k], (long long)i, gdte_status_name(st), rc);
        tu_failures++;
        return -1;
    }
    return 0;
}

/* gdte and MPI agree on bounds, and pack/unpack `count` elements identically. */
static void check_against_mpi(gdte_type_h g, MPI_Datatype m, int count, const char *what)
{
    MPI_Count lb, ext, tlb, text, size;
    MPI_Type_get_extent_x(m, &lb, &ext);
    MPI_Type_get_true_extent_x(m, &tlb, &text);
    MPI_Type_size_x(m, &size);
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(g, &in));
    if (in.size != size || in.lb != lb || in.extent != ext || in.true_lb != tlb || in.true_extent != text) {
        tu_bounds_differ(what, &in, size, lb, ext, tlb, text);
        return;
    }
    tu_checks++;
    tu_pack_vs_mpi(&rng, g, m, count, ext, tlb, text, size, what);
}

static void test_chain(kind_t k)
{
    char what[96];
    int64_t live0 = gdte_engine_live_types();
    gdte_type_h g = gdte_type_predefined(GDTE_BASIC_DOUBLE);
    MPI_Datatype m = MPI_DOUBLE;
    MPI_Datatype *ms = malloc(DEPTH * sizeof *ms); /* MPI's levels, freed top first at the end */
    int64_t built = 0;
    for (int64_t i = 0; i < DEPTH; i++, built++) {
        gdte_type_h ng;
        if (level(k, i, g, m, &ng, &ms[i])) break;
        gdte_type_free(&g); /* the chain lives on through its top */
        g = ng;
        m = ms[i];
    }
    CHECK_EQ(built, DEPTH);
    snprintf(what, sizeof what, "%s x %d (gdte constructors)", kind_name[k], DEPTH);
    CHECK_OK(gdte_type_commit(g));
    MPI_Type_commit(&m);
    check_against_mpi(g, m, 3, what);
    /* the same MPI type through the import */
    gdte_type_h imp = NULL;
    snprintf(what, sizeof what, "%s x %d (gdte_mpi_type_import)", kind_name[k], DEPTH);
    CHECK_OK(gdte_mpi_type_import(m, &imp));
    if (imp) check_against_mpi(imp, m, 3, what);
    CHECK_OK(gdte_type_free(&g)); /* releases the whole gdte chain, iteratively */
    for (int64_t i = built - 1; i >= 0; i--) MPI_Type_free(&ms[i]); /* and the import's */
    CHECK_EQ(gdte_engine_live_types(), live0);
    free(ms);
    printf("%s: %lld levels committed, packed, imported and freed\n", kind_name[k], (long long)built);
}

/* GDTE_MAX_TYPE_DEPTH levels of resized work; one more is refused. The chain (2^20 types,
 * held by its top only) is then freed in one call. */
static void test_limit(void)
{
    int64_t live0 = gdte_engine_live_types();
    gdte_type_h g = gdte_type_predefined(GDTE_BASIC_DOUBLE), ng = NULL;
    for (int64_t i = 0; i < GDTE_MAX_TYPE_DEPTH; i++) {
        if (gdte_type_create_resized(g, 0, i % 2 ? 8 : 16, &ng) != GDTE_OK) {
            fprintf(stderr, "resized level %lld refused\n", (long long)i);
            tu_failures++;
            break;
        }
        gdte_type_free(&g);
        g = ng;
    }
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(g, &in));
    CHECK_EQ(in.depth, GDTE_MAX_TYPE_DEPTH);
    ng = (gdte_type_h)&in; /* sentinel: must stay */
    CHECK_ST(gdte_type_create_resized(g, 0, 8, &ng), GDTE_ERR_UNSUPPORTED);
    CHECK(ng == (gdte_type_h)&in);
    CHECK_ST(gdte_type_create_contiguous(1, g, &ng), GDTE_ERR_UNSUPPORTED);
    gdte_type_h parts[2] = {g, g};
    int64_t bl[2] = {1, 1}, d[2] = {0, 8};
    CHECK_ST(gdte_type_create_struct(2, bl, d, parts, &ng), GDTE_ERR_UNSUPPORTED);
    /* a dup adds no level */
    CHECK_OK(gdte_type_dup(g, &ng));
    CHECK_OK(gdte_type_free(&ng));
    CHECK_OK(gdte_type_commit(g));
    double x[2] = {1.5, -2.5}, y[2] = {0, 0};
    int64_t done = 0;
    CHECK_OK(gdte_pack(x, 1, g, y, sizeof y, NULL, &done));
    CHECK_EQ(done, 8);
    CHECK(y[0] == 1.5);
    CHECK_OK(gdte_type_free(&g));
    CHECK_EQ(gdte_engine_live_types(), live0);
    printf("limit: %d levels work, one more is GDTE_ERR_UNSUPPORTED, the chain frees\n", GDTE_MAX_TYPE_DEPTH);
}

/* Committing dup chains: O(n) nodes walked in all, whatever the order. */
static void test_dup_work(void)
{
    const int64_t n = 40000;
    gdte_type_h *d = malloc((size_t)(n + 1) * sizeof *d);
    int64_t vals[3] = {0, 1, 5};
    gdte_type_h base;
    CHECK_OK(gdte_type_create_indexed_block(3, 1, vals, gdte_type_predefined(GDTE_BASIC_DOUBLE), &base));
    /* 1: dups of a committed type (each committed by gdte_type_dup, as MPI says) */
    CHECK_OK(gdte_type_commit(base));
    int64_t w0 = gdte_engine_nodes_visited();
    d[0] = base;
    for (int64_t i = 1; i <= n; i++) CHECK_OK(gdte_type_dup(d[i - 1], &d[i]));
    int64_t walked = gdte_engine_nodes_visited() - w0;
    printf("dup work: %lld dups of a committed type walked %lld nodes (the old commit: %lld)\n", (long long)n,
           (long long)walked, (long long)(n * (n + 1) / 2));
    CHECK(walked <= 4 * n);
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(d[n], &in));
    CHECK(in.committed && in.layout == GDTE_LAYOUT_UNITS && in.size == 24);
    for (int64_t i = n; i >= 1; i--) CHECK_OK(gdte_type_free(&d[i]));
    /* 2: dups of an uncommitted type, committed from the top down, then a fresh chain from
     * the bottom up */
    for (int pass = 0; pass < 2; pass++) {
        gdte_type_h b2;
        CHECK_OK(gdte_type_create_indexed_block(3, 1, vals, gdte_type_predefined(GDTE_BASIC_INT64), &b2));
        d[0] = b2;
        for (int64_t i = 1; i <= n; i++) CHECK_OK(gdte_type_dup(d[i - 1], &d[i]));
        w0 = gdte_engine_nodes_visited();
        for (int64_t k = 0; k <= n; k++) CHECK_OK(gdte_type_commit(d[pass == 0 ? n - k : k]));
        walked = gdte_engine_nodes_visited() - w0;
        printf("dup work: %lld uncommitted dups committed %s walked %lld nodes\n", (long long)n,
               pass == 0 ? "top down" : "bottom up", (long long)walked);
        CHECK(walked <= 4 * n);
        int64_t v[6] = {1, 2, 3, 4, 5, 6}, out[3] = {0, 0, 0}, done = 0;
        CHECK_OK(gdte_pack(v, 1, d[n / 2], out, sizeof out, NULL, &done));
        CHECK(done == 24 && out[0] == 1 && out[1] == 2 && out[2] == 6);
        for (int64_t i = 0; i <= n; i++) CHECK_OK(gdte_type_free(&d[i])); /* bottom first: the top frees the rest */
    }
    CHECK_OK(gdte_type_free(&base));
    free(d);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    CHECK_OK(gdte_init(NULL));
    for (int k = 0; k < K_COUNT; k++) test_chain((kind_t)k);
    test_dup_work();
    test_limit();
    CHECK_OK(gdte_finalize());
    MPI_Finalize();
    return tu_report("engine_deep");
}
