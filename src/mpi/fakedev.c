/*
 * Fake device memory for CI (GDTE_FAKE_DEVICE=1): host ranges a test program designates as
 * "device" buffers, so every device path of the interposer (staging, fragments, request
 * bookkeeping, status fixing) runs without a GPU.
 *
 * Test programs reach the two exported functions without linking against gdte, so the same
 * binary runs with and without the interposer:
 *     extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
 *     if (gdte_fake_device_register) gdte_fake_device_register(buf, bytes);
 * (LD_PRELOAD binds the weak reference), or dlsym(RTLD_DEFAULT, "gdte_fake_device_register").
 * The registry is consulted only while GDTE_FAKE_DEVICE=1; registering works at any time.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "interpose.h"
#include "util/util.h"

typedef struct range {
    uintptr_t lo, hi; /* [lo, hi) */
} range_t;

static pthread_rwlock_t fake_lock = PTHREAD_RWLOCK_INITIALIZER;
static range_t *ranges; /* sorted by lo, disjoint */
static size_t nranges, cap;

/* Index of the first range with lo > p. */
static size_t upper(uintptr_t p)
{
    size_t a = 0, b = nranges;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (ranges[m].lo <= p)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

int gdte_fake_contains(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    pthread_rwlock_rdlock(&fake_lock);
    size_t i = upper(p);
    int in = i > 0 && p < ranges[i - 1].hi;
    pthread_rwlock_unlock(&fake_lock);
    return in;
}

/** Designate [ptr, ptr+size) as fake device memory. 0 on success; -1 for a NULL or empty range,
 * one that overlaps a registered range, or no memory. */
GDTE_IPO_EXPORT int gdte_fake_device_register(void *ptr, size_t size)
{
    if (!ptr || size == 0 || (uintptr_t)ptr + size < (uintptr_t)ptr) return -1;
    range_t r = {(uintptr_t)ptr, (uintptr_t)ptr + size};
    int rc = 0;
    pthread_rwlock_wrlock(&fake_lock);
    size_t i = upper(r.lo);
    if ((i > 0 && ranges[i - 1].hi > r.lo) || (i < nranges && ranges[i].lo < r.hi)) {
        rc = -1;
    } else {
        if (nranges == cap) {
            size_t nc = cap ? cap * 2 : 16;
            range_t *nr = realloc(ranges, nc * sizeof *nr);
            if (!nr) rc = -1;
            else {
                ranges = nr;
                cap = nc;
            }
        }
        if (rc == 0) {
            memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof *ranges);
            ranges[i] = r;
            nranges++;
        }
    }
    pthread_rwlock_unlock(&fake_lock);
    return rc;
}

/** Remove the range registered at exactly `ptr`. 0 on success, -1 when none starts there. */
GDTE_IPO_EXPORT int gdte_fake_device_unregister(void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    int rc = -1;
    pthread_rwlock_wrlock(&fake_lock);
    size_t i = upper(p);
    if (i > 0 && ranges[i - 1].lo == p) {
        memmove(&ranges[i - 1], &ranges[i], (nranges - i) * sizeof *ranges);
        nranges--;
        rc = 0;
    }
    pthread_rwlock_unlock(&fake_lock);
    return rc;
}

void gdte_fake_clear(void)
{
    pthread_rwlock_wrlock(&fake_lock);
    free(ranges);
    ranges = NULL;
    nranges = cap = 0;
    pthread_rwlock_unlock(&fake_lock);
}
