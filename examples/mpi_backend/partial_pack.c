/*
 * The first half of gdte's datatype backend API for MPI implementations: partial pack and
 * unpack by byte offset. An MPI's pipeline (or a UCX generic datatype, see ucx_generic_dt.c)
 * asks for "bytes [offset, offset + n) of the packed stream of (buf, count, type)" and gets
 * exactly those, in any order. This example packs a lower triangle fragment by fragment in
 * reverse order, unpacks the fragments in a shuffled order, and checks both against the whole
 * stream byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <gdte.h>

#define N 300
#define FRAG 1000 /* not a multiple of the element size: fragments split doubles */

#define CHECK(call)                                                                                \
    do {                                                                                           \
        gdte_status_t st_ = (call);                                                                \
        if (st_ != GDTE_OK) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, gdte_status_string(st_)); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(void)
{
    CHECK(gdte_init(NULL));
    /* Lower triangle of an N x N matrix of doubles: row i holds i + 1 elements. */
    int64_t bl[N], dp[N];
    for (int i = 0; i < N; i++) {
        bl[i] = i + 1;
        dp[i] = (int64_t)i * N;
    }
    gdte_type_h tri;
    CHECK(gdte_type_create_indexed(N, bl, dp, gdte_type_predefined(GDTE_BASIC_DOUBLE), &tri));
    CHECK(gdte_type_commit(tri));
    int64_t total;
    CHECK(gdte_type_pack_size(1, tri, &total));

    double *m = malloc(sizeof(double) * N * N);
    for (int i = 0; i < N * N; i++) m[i] = i * 0.5 + 1.0 / (i + 3);
    unsigned char *whole = malloc(total), *frags = malloc(total);
    int64_t done;
    CHECK(gdte_pack(m, 1, tri, whole, total, NULL, &done));

    /* Pack: last fragment first. */
    int64_t nfrag = (total + FRAG - 1) / FRAG;
    for (int64_t k = nfrag - 1; k >= 0; k--) {
        gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES,
                                .offset = k * FRAG, .max_bytes = FRAG};
        CHECK(gdte_pack(m, 1, tri, frags + k * FRAG, total - k * FRAG, &p, &done));
        if (done != (k == nfrag - 1 ? total - k * FRAG : FRAG)) {
            fprintf(stderr, "fragment %lld: %lld bytes\n", (long long)k, (long long)done);
            return 1;
        }
    }
    if (memcmp(whole, frags, total)) {
        fprintf(stderr, "fragmented pack differs from the whole pack\n");
        return 1;
    }

    /* Unpack: fragments in a shuffled order (a stride coprime with their number). */
    double *out = calloc(N * N, sizeof(double)), *ref = calloc(N * N, sizeof(double));
    CHECK(gdte_unpack(whole, total, ref, 1, tri, NULL, &done));
    int64_t step = 7;
    while (nfrag % step == 0) step++;
    for (int64_t i = 0; i < nfrag; i++) {
        int64_t k = (i * step) % nfrag;
        int64_t len = k == nfrag - 1 ? total - k * FRAG : FRAG;
        gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = k * FRAG};
        CHECK(gdte_unpack(frags + k * FRAG, len, out, 1, tri, &p, &done));
    }
    if (memcmp(out, ref, sizeof(double) * N * N)) {
        fprintf(stderr, "fragmented unpack differs from the whole unpack\n");
        return 1;
    }
    printf("partial pack/unpack: %lld bytes in %lld fragments of %d, out of order: identical\n", (long long)total,
           (long long)nfrag, FRAG);
    gdte_type_free(&tri);
    free(m), free(whole), free(frags), free(out), free(ref);
    gdte_finalize();
    return 0;
}
