/* Packs a sub-matrix (a vector type) with the installed gdte and checks the bytes. */
#include <gdte.h>
#include <stdio.h>

int main(void)
{
    if (gdte_init(NULL) != GDTE_OK) return 1;
    double m[8][8], packed[12];
    for (int i = 0; i < 64; i++) m[i / 8][i % 8] = i;
    gdte_type_h sub;
    /* rows 2..5, columns 1..3 of an 8x8 row-major matrix */
    gdte_status_t st = gdte_type_create_vector(4, 3, 8, gdte_type_predefined(GDTE_BASIC_DOUBLE), &sub);
    if (st == GDTE_OK) st = gdte_type_commit(sub);
    int64_t n = 0;
    if (st == GDTE_OK) st = gdte_pack(&m[2][1], 1, sub, packed, sizeof packed, NULL, &n);
    if (st != GDTE_OK) {
        fprintf(stderr, "consumer: %s\n", gdte_status_string(st));
        return 1;
    }
    for (int k = 0; k < 12; k++)
        if (packed[k] != m[2 + k / 3][1 + k % 3]) {
            fprintf(stderr, "consumer: wrong byte at element %d\n", k);
            return 1;
        }
    printf("consumer: gdte %s packed %lld bytes correctly\n", gdte_version_string(), (long long)n);
    gdte_type_free(&sub);
    gdte_finalize();
    return 0;
}
