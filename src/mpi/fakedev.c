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
#include <stdint.h>
#include "interpose.h"
#include "util/ranges.h"

/* Any number of ranges, none overlapping another. */
static gdte_ranges_t fake = GDTE_RANGES_INIT(gdte_range_t, 0);

int gdte_fake_contains(const void *ptr) { return gdte_ranges_find(&fake, (uintptr_t)ptr, NULL); }

int gdte_fake_base(const void *ptr, uintptr_t *base_p)
{
    gdte_range_t r;
    if (!gdte_ranges_find(&fake, (uintptr_t)ptr, &r)) return 0;
    *base_p = r.lo;
    return 1;
}

int gdte_fake_span_one(const void *first, const void *last)
{
    gdte_range_t r;
    return gdte_ranges_find(&fake, (uintptr_t)first, &r) && (uintptr_t)last >= (uintptr_t)first &&
           (uintptr_t)last < r.hi;
}

/** Designate [ptr, ptr+size) as fake device memory. 0 on success; -1 for a NULL or empty range,
 * one that overlaps a registered range, or no memory. */
GDTE_IPO_EXPORT int gdte_fake_device_register(void *ptr, size_t size)
{
    if (!ptr || size == 0 || (uintptr_t)ptr + size < (uintptr_t)ptr) return -1;
    gdte_range_t r = {(uintptr_t)ptr, (uintptr_t)ptr + size, 0};
    return gdte_ranges_insert(&fake, &r, GDTE_RANGES_REFUSE) == GDTE_OK ? 0 : -1;
}

/** Remove the range registered at exactly `ptr`. 0 on success, -1 when none starts there. */
GDTE_IPO_EXPORT int gdte_fake_device_unregister(void *ptr)
{
    return gdte_ranges_remove_at(&fake, (uintptr_t)ptr) ? 0 : -1;
}

void gdte_fake_clear(void) { gdte_ranges_clear(&fake); }
