/*
 * src/kernels/fastdiv.h against the compiler's division: both the 32-bit and the 64-bit
 * paths, over divisors at the edges (1, powers of two and their neighbours, 2^31 - 1, 2^32 - 1,
 * 2^63, 2^64 - 1) and random ones of every bit length, each with dividends at the edges
 * (0, d - 1, d, multiples of d and their neighbours, the largest values) and random ones.
 * GDTETEST_SEED repeats a run.
 */
#include <stdio.h>
#include <stdlib.h>
#include "fastdiv.h"

static uint64_t rng;
static uint64_t next(void) /* xorshift64* */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}
/* Random value of a random bit length (1..bits), so that small values are as likely as big. */
static uint64_t rand_bits(int bits)
{
    int b = 1 + (int)(next() % (uint64_t)bits);
    uint64_t v = next();
    return b == 64 ? v : v & (((uint64_t)1 << b) - 1);
}

static long long checks, fails;

static void check(const gdte_fastdiv_t *f, uint64_t n)
{
    uint64_t d = f->d;
    checks++;
    uint64_t q = gdte_fastdiv64(f, n);
    if (q != n / d && fails++ < 10)
        printf("FAIL 64-bit: %llu / %llu: got %llu\n", (unsigned long long)n, (unsigned long long)d,
               (unsigned long long)q);
    if (d <= UINT32_MAX && n <= UINT32_MAX) {
        checks++;
        uint32_t q32 = gdte_fastdiv32(f, (uint32_t)n);
        if (q32 != (uint32_t)(n / d) && fails++ < 10)
            printf("FAIL 32-bit: %llu / %llu: got %u\n", (unsigned long long)n, (unsigned long long)d, q32);
    }
}

static void check_divisor(uint64_t d)
{
    gdte_fastdiv_t f;
    gdte_fastdiv_init(&f, d);
    const uint64_t edges[] = {0, 1, 2, 3, d - 1, d, d + 1, 2 * d - 1, 2 * d, 2 * d + 1,
                              UINT32_MAX - 1, UINT32_MAX, (uint64_t)UINT32_MAX + 1, INT32_MAX, (uint64_t)INT32_MAX + 1,
                              UINT64_MAX - 1, UINT64_MAX, (uint64_t)INT64_MAX, UINT64_MAX / d * d,
                              UINT64_MAX / d * d - 1, UINT32_MAX / d * d, UINT32_MAX / d * d - 1};
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) check(&f, edges[i]);
    for (int i = 0; i < 200; i++) {
        uint64_t k = rand_bits(64);
        check(&f, k);
        check(&f, k & UINT32_MAX);
        uint64_t m = d * (k % (UINT64_MAX / d)); /* a multiple of d, and its neighbours */
        check(&f, m);
        check(&f, m - 1);
        check(&f, m + 1);
        if (d <= UINT32_MAX) {
            uint64_t m32 = d * ((k & UINT32_MAX) % (UINT32_MAX / d + 1));
            check(&f, m32);
            check(&f, m32 - 1);
            check(&f, m32 + 1);
        }
    }
}

int main(void)
{
    const char *e = getenv("GDTETEST_SEED");
    rng = e && *e ? strtoull(e, NULL, 0) : 0x9e3779b97f4a7c15ull;
    if (!rng) rng = 1;
    printf("seed 0x%llx (GDTETEST_SEED to repeat)\n", (unsigned long long)rng);
    const uint64_t fixed[] = {1, 2, 3, 5, 6, 7, 10, 12, 24, 48, 511, 512, 513, 4095, 4096, 8192, 16384, 65536,
                              1000000, (1u << 31) - 1, 1u << 31, (1u << 31) + 1, UINT32_MAX - 1, UINT32_MAX,
                              (uint64_t)UINT32_MAX + 1, (uint64_t)UINT32_MAX + 2, (uint64_t)1 << 62,
                              (uint64_t)1 << 63, ((uint64_t)1 << 63) + 1, UINT64_MAX - 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) check_divisor(fixed[i]);
    for (int b = 0; b < 64; b++) {
        uint64_t p = (uint64_t)1 << b;
        check_divisor(p);
        check_divisor(p + 1);
        if (p > 2) check_divisor(p - 1);
    }
    for (int i = 0; i < 20000; i++) check_divisor(1 + rand_bits(63)); /* d >= 1 */
    for (int i = 0; i < 2000; i++) check_divisor(1 + rand_bits(31));
    /* Every dividend below 2^12 by every divisor below 2^12 (small layouts' values). */
    for (uint64_t d = 1; d < 4096; d++) {
        gdte_fastdiv_t f;
        gdte_fastdiv_init(&f, d);
        for (uint64_t n = 0; n < 4096; n++) check(&f, n);
    }
    printf("%lld checks, %lld failures\n%s\n", checks, fails, fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
