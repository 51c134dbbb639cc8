/* Small helpers shared by the engine tests: checks that report file:line and keep going
 * counted, a seeded generator, poisoned buffers. Header-only on purpose: each test is one
 * executable. */
#ifndef GDTE_TESTS_ENGINE_TESTUTIL_H
#define GDTE_TESTS_ENGINE_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gdte.h"

static int tu_failures;
static int tu_checks;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        tu_checks++;                                                                             \
        if (!(cond)) {                                                                           \
            tu_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);            \
        }                                                                                        \
    } while (0)

#define CHECK_EQ(a, b)                                                                           \
    do {                                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                                      \
        tu_checks++;                                                                             \
        if (a_ != b_) {                                                                          \
            tu_failures++;                                                                       \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, \
                    #a, #b, a_, b_);                                                             \
        }                                                                                        \
    } while (0)

#define CHECK_ST(call, expected)                                                                 \
    do {                                                                                         \
        gdte_status_t st_ = (call), ex_ = (expected);                                            \
        tu_checks++;                                                                             \
        if (st_ != ex_) {                                                                        \
            tu_failures++;                                                                       \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call,   \
                    gdte_status_name(st_), gdte_status_name(ex_));                               \
        }                                                                                        \
    } while (0)

#define CHECK_OK(call) CHECK_ST(call, GDTE_OK)

static inline int tu_report(const char *name)
{
    if (tu_failures)
        fprintf(stderr, "%s: %d of %d checks FAILED\n", name, tu_failures, tu_checks);
    else
        printf("%s: all %d checks passed\n", name, tu_checks);
    return tu_failures ? 1 : 0;
}

/* splitmix64: tiny, good enough, and the same on every platform, so a seed replays. */
typedef struct tu_rng {
    uint64_t s;
} tu_rng_t;

static inline uint64_t tu_next(tu_rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (inclusive). */
static inline int64_t tu_range(tu_rng_t *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(tu_next(r) % (uint64_t)(hi - lo + 1));
}

/* True with probability num/den. */
static inline int tu_chance(tu_rng_t *r, int num, int den) { return (int)(tu_next(r) % (uint64_t)den) < num; }

static inline void tu_fill_random(tu_rng_t *r, void *buf, size_t n)
{
    unsigned char *p = buf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = tu_next(r);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = tu_next(r);
        memcpy(p + i, &v, n - i);
    }
}

/* Index of the first byte of `p` that is not `poison`, or -1. */
static inline int64_t tu_find_unpoisoned(const void *p, size_t n, unsigned char poison)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != poison) return (int64_t)i;
    return -1;
}

#endif
