/*
 * The reduction kernels (src/kernels/reduce_kernels.cu) on the CPU emulator, against their host
 * twin (reduce_host.c): every supported (operation, element type) pair, seeded random inputs of
 * random lengths (0 and lengths that leave a partial block and make the grid-stride loop turn),
 * byte for byte, with poisoned bytes past the end that must stay as they were; unsupported pairs
 * refused by both with nothing written.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/reduce.h"

static uint64_t st = 12345;
static uint64_t rnd(void)
{
    uint64_t z = (st += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Values with zeros and ties common; floating point small and exact. */
static void fill(unsigned char *b, gdte_rtype_t t, int64_t n)
{
    int64_t es = gdte_reduce_elem_size(t);
    for (int64_t i = 0; i < n; i++) {
        unsigned char *e = b + i * es;
        uint64_t r = rnd() % 4 == 0 ? 0 : rnd();
        switch (t) {
        case GDTE_RT_F32: { float f = (float)((int)(r % 41) - 20) / 4.0f; memcpy(e, &f, 4); break; }
        case GDTE_RT_F64: { double d = (double)((int)(r % 2001) - 1000) / 8.0; memcpy(e, &d, 8); break; }
        case GDTE_RT_BOOL: e[0] = (unsigned char)(r & 1); break;
        case GDTE_RT_FLOAT_INT: { gdte_red_pair_FLOAT_INT_t p = {(float)(r % 5), (int32_t)(rnd() % 50)}; memcpy(e, &p, sizeof p); break; }
        case GDTE_RT_DOUBLE_INT: { gdte_red_pair_DOUBLE_INT_t p; memset(&p, 0, sizeof p); p.v = (double)(r % 5); p.k = (int32_t)(rnd() % 50); memcpy(e, &p, sizeof p); break; }
        case GDTE_RT_LONG_INT: { gdte_red_pair_LONG_INT_t p; memset(&p, 0, sizeof p); p.v = (int64_t)(r % 5) - 2; p.k = (int32_t)(rnd() % 50); memcpy(e, &p, sizeof p); break; }
        case GDTE_RT_2INT: { gdte_red_pair_2INT_t p = {(int32_t)(r % 5), (int32_t)(rnd() % 50)}; memcpy(e, &p, sizeof p); break; }
        case GDTE_RT_SHORT_INT: { gdte_red_pair_SHORT_INT_t p; memset(&p, 0, sizeof p); p.v = (int16_t)(r % 5); p.k = (int32_t)(rnd() % 50); memcpy(e, &p, sizeof p); break; }
        default: memcpy(e, &r, (size_t)es); break;
        }
    }
}

int main(void)
{
    int checks = 0, fails = 0, pairs = 0;
    for (int t = 0; t < GDTE_RT_COUNT_; t++)
        for (int op = 0; op < GDTE_ROP_COUNT_; op++) {
            int64_t es = gdte_reduce_elem_size((gdte_rtype_t)t);
            int sup = gdte_reduce_supported((gdte_rop_t)op, (gdte_rtype_t)t);
            pairs += sup;
            for (int round = 0; round < (sup ? 4 : 1); round++) {
                int64_t n = round == 0 ? 0 : round == 1 ? 1 + (int64_t)(rnd() % 300) : 1 + (int64_t)(rnd() % 9000);
                size_t bytes = (size_t)(n * es) + 32;
                unsigned char *in = malloc(bytes), *a = malloc(bytes), *b = malloc(bytes);
                memset(in, 0x5A, bytes), memset(a, 0xA5, bytes);
                fill(in, (gdte_rtype_t)t, n);
                fill(a, (gdte_rtype_t)t, n);
                memcpy(b, a, bytes);
                gdte_status_t sh = gdte_reduce_host((gdte_rop_t)op, (gdte_rtype_t)t, in, a, n);
                gdte_status_t sg = gdte_reduce_gpu((gdte_rop_t)op, (gdte_rtype_t)t, in, b, n, NULL);
                checks++;
                if (sh != sg || (sup ? sh != GDTE_OK : sh != GDTE_ERR_UNSUPPORTED) || memcmp(a, b, bytes) != 0) {
                    size_t i = 0;
                    while (i < bytes && a[i] == b[i]) i++;
                    fprintf(stderr, "FAIL: type %d op %d n %lld: host %d, kernel %d, first difference at byte %zu\n", t,
                            op, (long long)n, (int)sh, (int)sg, i);
                    fails++;
                }
                for (size_t i = (size_t)(n * es); i < bytes; i++)
                    if (b[i] != 0xA5) {
                        fprintf(stderr, "FAIL: type %d op %d n %lld: byte %zu past the end written\n", t, op, (long long)n, i);
                        fails++;
                        break;
                    }
                free(in), free(a), free(b);
            }
        }
    /* The n-input form: 0 to 19 inputs (several launches past GDTE_REDUCE_MAX_INPUTS), the
     * output apart or one of the first inputs, against the host twin; bytes past the end kept. */
    int nchecks = 0;
    for (int t = 0; t < GDTE_RT_COUNT_; t++)
        for (int op = 0; op < GDTE_ROP_COUNT_; op++) {
            if (!gdte_reduce_supported((gdte_rop_t)op, (gdte_rtype_t)t)) continue;
            int64_t es = gdte_reduce_elem_size((gdte_rtype_t)t);
            for (int round = 0; round < 3; round++) {
                int nin = (int)(rnd() % 20), alias = nin > 0 && rnd() % 2 ? (int)(rnd() % (nin < 8 ? nin : 8)) : -1;
                int64_t n = 1 + (int64_t)(rnd() % 5000);
                size_t bytes = (size_t)(n * es) + 32;
                unsigned char *ins[20], *ins2[20], *a = malloc(bytes), *b = malloc(bytes);
                const void *pa[20], *pb[20];
                memset(a, 0xA5, bytes);
                fill(a, (gdte_rtype_t)t, n);
                memcpy(b, a, bytes);
                for (int k = 0; k < nin; k++) {
                    ins[k] = malloc(bytes), ins2[k] = malloc(bytes);
                    memset(ins[k], 0x5A, bytes);
                    fill(ins[k], (gdte_rtype_t)t, n);
                    memcpy(ins2[k], ins[k], bytes);
                    pa[k] = k == alias ? (const void *)a : ins[k];
                    pb[k] = k == alias ? (const void *)b : ins2[k];
                }
                gdte_status_t sh = gdte_reduce_host_n((gdte_rop_t)op, (gdte_rtype_t)t, pa, nin, a, n);
                gdte_status_t sg = gdte_reduce_gpu_n((gdte_rop_t)op, (gdte_rtype_t)t, pb, nin, b, n, NULL);
                nchecks++;
                if (sh != GDTE_OK || sg != GDTE_OK || memcmp(a, b, bytes) != 0) {
                    size_t i = 0;
                    while (i < bytes && a[i] == b[i]) i++;
                    fprintf(stderr, "FAIL: n-input type %d op %d nin %d alias %d n %lld: host %d, kernel %d, first "
                            "difference at byte %zu\n", t, op, nin, alias, (long long)n, (int)sh, (int)sg, i);
                    fails++;
                }
                for (size_t i = (size_t)(n * es); i < bytes; i++)
                    if (b[i] != 0xA5) {
                        fprintf(stderr, "FAIL: n-input type %d op %d: byte %zu past the end written\n", t, op, i);
                        fails++;
                        break;
                    }
                if (nin >= 2 && alias < 0) {
                    /* The result against a fold of the two-array form. */
                    unsigned char *c = malloc(bytes);
                    memcpy(c, ins[0], bytes);
                    for (int k = 1; k < nin; k++) gdte_reduce_host((gdte_rop_t)op, (gdte_rtype_t)t, ins[k], c, n);
                    if (memcmp(c, a, (size_t)(n * es)) != 0) {
                        fprintf(stderr, "FAIL: n-input type %d op %d nin %d: differs from the two-array fold\n", t, op,
                                nin);
                        fails++;
                    }
                    free(c);
                }
                for (int k = 0; k < nin; k++) free(ins[k]), free(ins2[k]);
                free(a), free(b);
            }
        }
    /* An output that is a later input than the first launch reads is refused by both. */
    {
        double x[4] = {1, 2, 3, 4};
        const void *in[10];
        for (int k = 0; k < 10; k++) in[k] = x;
        nchecks++;
        if (gdte_reduce_host_n(GDTE_ROP_SUM, GDTE_RT_F64, in, 10, x, 4) != GDTE_ERR_INVALID_ARG ||
            gdte_reduce_gpu_n(GDTE_ROP_SUM, GDTE_RT_F64, in, 10, x, 4, NULL) != GDTE_ERR_INVALID_ARG || x[3] != 4) {
            fprintf(stderr, "FAIL: an output aliasing input 9 was not refused\n");
            fails++;
        }
    }
    printf("reduce kernels on the emulator: %d supported pairs, %d checks, %d n-input checks, %d failed\n", pairs,
           checks, nchecks, fails);
    return fails ? 1 : 0;
}
