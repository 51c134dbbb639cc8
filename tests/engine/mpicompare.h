/* gdte against MPI on one type, for the engine tests that build a type both ways or import
 * it (deep_test.c, import_test.c): a bounds mismatch reported the same way, and the data check
 * (pack and unpack against MPI_Pack/MPI_Unpack on host buffers). Needs <mpi.h>; header-only
 * like testutil.h. */
#ifndef GDTE_TESTS_ENGINE_MPICOMPARE_H
#define GDTE_TESTS_ENGINE_MPICOMPARE_H

#include <mpi.h>
#include "testutil.h"

/* Counts a failure: gdte's bounds `in` differ from MPI's. */
static inline void tu_bounds_differ(const char *what, const gdte_type_info_t *in, int64_t size, int64_t lb,
                                    int64_t ext, int64_t tlb, int64_t text)
{
    fprintf(stderr, "%s: gdte size %lld lb %lld extent %lld true %lld/%lld; MPI %lld %lld %lld %lld/%lld\n", what,
            (long long)in->size, (long long)in->lb, (long long)in->extent, (long long)in->true_lb,
            (long long)in->true_extent, (long long)size, (long long)lb, (long long)ext, (long long)tlb, (long long)text);
    tu_failures++;
}

/* `count` elements of gdte's `g` and MPI's `m`, whose bounds agree (extent `ext`, true lb and
 * extent `tlb`/`text`, size `size`), over random bytes with 16 bytes either side: gdte_pack
 * writes what MPI_Pack writes (all `count * size` bytes), and gdte_unpack of MPI's packed bytes
 * leaves the buffer MPI_Unpack leaves (both poisoned alike beforehand, gaps included). */
static inline void tu_pack_vs_mpi(tu_rng_t *rng, gdte_type_h g, MPI_Datatype m, int count, int64_t ext, int64_t tlb,
                                  int64_t text, int64_t size, const char *what)
{
    int64_t last = (int64_t)(count - 1) * ext, lo = (last < 0 ? last : 0) + tlb, hi = (last > 0 ? last : 0) + tlb + text;
    int64_t blen = hi - lo + 32, total = (int64_t)count * size;
    char *src = malloc((size_t)blen), *a = malloc((size_t)total + 1), *b = malloc((size_t)total + 1);
    char *u1 = malloc((size_t)blen), *u2 = malloc((size_t)blen);
    tu_fill_random(rng, src, (size_t)blen);
    int pos = 0;
    MPI_Pack(src + 16 - lo, count, m, a, (int)total, &pos, MPI_COMM_SELF);
    CHECK_EQ(pos, total);
    int64_t done = -1;
    CHECK_OK(gdte_pack(src + 16 - lo, count, g, b, total, NULL, &done));
    CHECK_EQ(done, total);
    if (memcmp(a, b, (size_t)total)) {
        fprintf(stderr, "%s: pack differs from MPI_Pack\n", what);
        tu_failures++;
    }
    memset(u1, 0x3c, (size_t)blen);
    memset(u2, 0x3c, (size_t)blen);
    pos = 0;
    MPI_Unpack(a, (int)total, &pos, u1 + 16 - lo, count, m, MPI_COMM_SELF);
    CHECK_OK(gdte_unpack(a, total, u2 + 16 - lo, count, g, NULL, &done));
    if (memcmp(u1, u2, (size_t)blen)) {
        fprintf(stderr, "%s: unpack differs from MPI_Unpack\n", what);
        tu_failures++;
    }
    free(src), free(a), free(b), free(u1), free(u2);
}

#endif
