/*
 * The memory-kind cache (src/kernels/memquery.c) on a machine without a GPU: the GPU layer's
 * address queries are answered from a table of made-up allocations (the stubs below; nothing
 * is dereferenced), so the cache's own decisions run for real and the runtime calls it makes
 * are counted:
 *  - a device or managed allocation is cached whole: a second lookup anywhere in it, or a span
 *    inside it, asks the runtime nothing; adjacent allocations are told apart at the boundary;
 *  - at most 256 ranges: the oldest goes first;
 *  - a range is dropped by gdte_memquery_forget, by gdte's unmap epoch and by reset; an
 *    allocation cached over ranges it overlaps replaces them;
 *  - pinned memory is never cached; pageable host pages are (without the id query);
 *  - with the buffer-id query (argument `id`), a cached range whose allocation was freed and
 *    whose addresses another allocation took is found stale and replaced; id 0 is pageable host
 *    memory at once. Without it (argument `noid`), the cache answers until told.
 * The id query is probed once per process, so each mode is its own CTest test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memquery.h"
#include "gpu/gpu.h"
#include "check.h"

/* ---- the GPU layer's address queries, on a table of made-up allocations ---- */
typedef struct {
    uintptr_t base;
    size_t size;
    gdte_mem_kind_t kind;
    uint64_t id;
} alloc_t;
#define MAX_ALLOCS 1024
static alloc_t allocs[MAX_ALLOCS];
static int nallocs;
static uint64_t next_id = 1, epoch;
static int with_id;
static int64_t runtime_calls; /* gdte_gpu_pointer_query calls */

int gdte_gpu_available(void) { return 1; }
uint64_t gdte_gpu_unmap_epoch(void) { return epoch; }

static const alloc_t *lookup(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].base <= p && p - allocs[i].base < allocs[i].size) return &allocs[i];
    return NULL;
}
gdte_status_t gdte_gpu_pointer_query(const void *ptr, gdte_mem_info_t *info_p)
{
    runtime_calls++;
    const alloc_t *a = lookup(ptr);
    info_p->kind = a ? a->kind : GDTE_MEM_HOST;
    info_p->device = a && (a->kind == GDTE_MEM_DEVICE || a->kind == GDTE_MEM_MANAGED) ? 0 : -1;
    return GDTE_OK;
}
gdte_status_t gdte_gpu_mem_range(const void *ptr, void **base_p, size_t *size_p)
{
    const alloc_t *a = lookup(ptr);
    if (!a || a->kind == GDTE_MEM_HOST) return GDTE_ERR_GPU;
    *base_p = (void *)a->base;
    *size_p = a->size;
    return GDTE_OK;
}
gdte_status_t gdte_gpu_buffer_id(const void *ptr, uint64_t *id_p)
{
    if (!with_id) return GDTE_ERR_UNSUPPORTED;
    const alloc_t *a = lookup(ptr);
    *id_p = a && a->kind != GDTE_MEM_HOST ? a->id : 0;
    return GDTE_OK;
}

/* An allocation of `kind` at [base, base+size), freed behind the cache's back by unmap(). */
static void *map(uintptr_t base, size_t size, gdte_mem_kind_t kind)
{
    if (nallocs == MAX_ALLOCS) exit(2);
    allocs[nallocs++] = (alloc_t){base, size, kind, next_id++};
    return (void *)base;
}
static void unmap(uintptr_t base)
{
    for (int i = 0; i < nallocs; i++)
        if (allocs[i].base == base) {
            allocs[i] = allocs[--nallocs];
            return;
        }
    exit(3);
}

/* ---- checks ---- */
static int nranges(void)
{
    int n;
    gdte_memquery_stats(NULL, NULL, &n);
    return n;
}

/* The kind gdte_mem_query answers for `p`, and in *calls_p the runtime queries it cost. */
static gdte_mem_kind_t kind_of(uintptr_t p, int64_t *calls_p)
{
    int64_t c0 = runtime_calls;
    gdte_mem_info_t mi;
    OK(gdte_mem_query((const void *)p, &mi));
    if (calls_p) *calls_p = runtime_calls - c0;
    return mi.kind;
}

#define MiB ((uintptr_t)1 << 20)
#define DEV0 ((uintptr_t)0x7f0000000000)

static void test_whole_allocation(void)
{
    gdte_memquery_reset();
    map(DEV0, 4 * MiB, GDTE_MEM_DEVICE);
    int64_t c;
    CHECK(kind_of(DEV0 + 100, &c) == GDTE_MEM_DEVICE && c == 1, "first lookup asks the runtime (%lld)", (long long)c);
    CHECK(kind_of(DEV0, &c) == GDTE_MEM_DEVICE && c == 0, "first byte: a hit");
    CHECK(kind_of(DEV0 + 4 * MiB - 1, &c) == GDTE_MEM_DEVICE && c == 0, "last byte: a hit");
    CHECK(nranges() == 1, "one range cached, not %d", nranges());
    int64_t h0, m0, h1, m1;
    gdte_memquery_stats(&h0, &m0, NULL);
    gdte_mem_info_t a, b;
    int64_t c0 = runtime_calls;
    OK(gdte_mem_query_span((void *)(DEV0 + 8), (void *)(DEV0 + 3 * MiB), &a, &b));
    gdte_memquery_stats(&h1, &m1, NULL);
    CHECK(a.kind == GDTE_MEM_DEVICE && b.kind == GDTE_MEM_DEVICE && a.device == 0 && b.device == 0,
          "span inside one allocation");
    CHECK(h1 - h0 == 1 && m1 == m0 && runtime_calls == c0, "a span inside one cached range is one hit (%lld hits)",
          (long long)(h1 - h0));

    /* The byte past the allocation is not in it: pageable here. */
    CHECK(kind_of(DEV0 + 4 * MiB, &c) == GDTE_MEM_HOST, "the byte past the range");

    /* An adjacent allocation, managed: the boundary belongs to it. */
    map(DEV0 + 4 * MiB, 2 * MiB, GDTE_MEM_MANAGED);
    if (!with_id) gdte_memquery_forget((void *)(DEV0 + 4 * MiB), 2 * MiB); /* the cached host page */
    CHECK(kind_of(DEV0 + 4 * MiB, &c) == GDTE_MEM_MANAGED && c == 1, "adjacent allocation: its first byte");
    CHECK(kind_of(DEV0 + 4 * MiB - 1, &c) == GDTE_MEM_DEVICE && c == 0, "adjacent allocation: the byte before");
    CHECK(kind_of(DEV0 + 6 * MiB - 1, &c) == GDTE_MEM_MANAGED && c == 0, "adjacent allocation: its last byte");
    CHECK(nranges() == 2, "two ranges, not %d", nranges());
    OK(gdte_mem_query_span((void *)(DEV0 + 8), (void *)(DEV0 + 5 * MiB), &a, &b));
    CHECK(a.kind == GDTE_MEM_DEVICE && b.kind == GDTE_MEM_MANAGED, "a span over two allocations: both kinds");

    /* forget drops exactly the ranges it overlaps. */
    gdte_memquery_forget((void *)(DEV0 + 4 * MiB - 1), 1);
    CHECK(nranges() == 1, "forget of the last byte of the first range leaves 1, not %d", nranges());
    CHECK(kind_of(DEV0 + 6 * MiB - 1, &c) == GDTE_MEM_MANAGED && c == 0, "the other range stays");
    CHECK(kind_of(DEV0, &c) == GDTE_MEM_DEVICE && c == 1, "the forgotten range is asked again");
    gdte_memquery_forget((void *)DEV0, 6 * MiB);
    CHECK(nranges() == 0, "forget over both leaves none, not %d", nranges());
    unmap(DEV0);
    unmap(DEV0 + 4 * MiB);
}

static void test_capacity(void)
{
    gdte_memquery_reset();
    enum { N = 300, CAP = 256 };
    for (int i = 0; i < N; i++) map(DEV0 + (uintptr_t)i * 2 * MiB, MiB, GDTE_MEM_DEVICE);
    int64_t c;
    for (int i = 0; i < N; i++) kind_of(DEV0 + (uintptr_t)i * 2 * MiB + 5, NULL);
    CHECK(nranges() == CAP, "the cache holds %d ranges, not %d", CAP, nranges());
    int hits = 0;
    for (int i = N - 1; i >= N - CAP; i--) {
        CHECK(kind_of(DEV0 + (uintptr_t)i * 2 * MiB, &c) == GDTE_MEM_DEVICE, "allocation %d", i);
        hits += c == 0;
    }
    CHECK(hits == CAP, "the newest %d allocations are hits (%d)", CAP, hits);
    /* The oldest went first: allocation 0 is asked again, and takes the place of the oldest left
     * (allocation N-CAP), not of a newer one. */
    CHECK(kind_of(DEV0 + 5, &c) == GDTE_MEM_DEVICE && c == 1, "the oldest was evicted");
    CHECK(kind_of(DEV0 + (uintptr_t)(N - 1) * 2 * MiB, &c) == GDTE_MEM_DEVICE && c == 0, "the newest stays");
    CHECK(kind_of(DEV0 + (uintptr_t)(N - CAP) * 2 * MiB, &c) == GDTE_MEM_DEVICE && c == 1,
          "allocation %d, then the oldest, was evicted", N - CAP);
    CHECK(kind_of(DEV0 + 5, &c) == GDTE_MEM_DEVICE && c == 0, "allocation 0, now newer, stayed");
    CHECK(kind_of(DEV0 + (uintptr_t)(N - CAP + 1) * 2 * MiB, &c) == GDTE_MEM_DEVICE && c == 1,
          "allocation %d, the oldest then, was evicted", N - CAP + 1);
    CHECK(nranges() == CAP, "still %d ranges, not %d", CAP, nranges());
    for (int i = 0; i < N; i++) unmap(DEV0 + (uintptr_t)i * 2 * MiB);
    gdte_memquery_reset();
    CHECK(nranges() == 0, "reset empties the cache");
    int64_t h, m;
    gdte_memquery_stats(&h, &m, NULL);
    CHECK(h == 0 && m == 0, "reset zeroes the counters");
}

static void test_epoch_and_replacement(void)
{
    gdte_memquery_reset();
    int64_t c;
    map(DEV0, MiB, GDTE_MEM_DEVICE);
    map(DEV0 + 2 * MiB, MiB, GDTE_MEM_DEVICE);
    kind_of(DEV0, NULL);
    kind_of(DEV0 + 2 * MiB, NULL);
    CHECK(nranges() == 2, "two ranges");
    epoch++; /* gdte released something: everything goes */
    CHECK(kind_of(DEV0, &c) == GDTE_MEM_DEVICE && c == 1, "after an unmap epoch the cache starts over");
    CHECK(nranges() == 1, "only what was asked since (%d)", nranges());
    kind_of(DEV0 + 2 * MiB, NULL);

    /* Both freed behind gdte's back, one larger allocation over both (and the gap). */
    unmap(DEV0);
    unmap(DEV0 + 2 * MiB);
    map(DEV0 + MiB / 2, 3 * MiB, GDTE_MEM_MANAGED);
    int64_t stale0 = gdte_memquery_stale();
    gdte_mem_kind_t k = kind_of(DEV0 + MiB / 2 + 10, &c);
    if (with_id) {
        CHECK(k == GDTE_MEM_MANAGED && c == 1, "a freed allocation's range is validated by id (kind %d)", k);
        CHECK(gdte_memquery_stale() == stale0 + 1, "and counted stale");
        CHECK(nranges() == 1, "the new range replaced both it overlaps (%d ranges)", nranges());
        CHECK(kind_of(DEV0 + 3 * MiB, &c) == GDTE_MEM_MANAGED && c == 0, "the new range is a hit");
    } else {
        CHECK(k == GDTE_MEM_DEVICE && c == 0, "without the id query the cache answers until told (kind %d)", k);
        CHECK(kind_of(DEV0 + MiB + 10, &c) == GDTE_MEM_MANAGED && c == 1, "in the gap: asked");
        CHECK(nranges() == 1, "the new range replaced both it overlaps (%d ranges)", nranges());
        CHECK(kind_of(DEV0 + MiB / 2 + 10, &c) == GDTE_MEM_MANAGED && c == 0, "now a hit");
    }
    unmap(DEV0 + MiB / 2);
    gdte_memquery_forget((void *)DEV0, 4 * MiB);
}

static void test_host(void)
{
    gdte_memquery_reset();
    int64_t c;
    uintptr_t h = (uintptr_t)0x10000000 + 100;
    CHECK(kind_of(h, &c) == GDTE_MEM_HOST, "pageable");
    int64_t first = c;
    CHECK(kind_of(h + 8, &c) == GDTE_MEM_HOST && c == 0, "pageable again: no runtime query");
    CHECK(first == (with_id ? 0 : 1), "the first pageable lookup asks the runtime only without ids (%lld)",
          (long long)first);
    /* Pinned memory is asked every time. */
    map(0x20000000, MiB, GDTE_MEM_PINNED);
    CHECK(kind_of(0x20000000 + 64, &c) == GDTE_MEM_PINNED && c == 1, "pinned: asked");
    CHECK(kind_of(0x20000000 + 64, &c) == GDTE_MEM_PINNED && c == 1, "pinned: asked again");
    CHECK(nranges() == 0, "pinned memory is not cached (%d)", nranges());
    unmap(0x20000000);
    /* A pageable page later handed out as device memory. */
    uintptr_t p = 0x30000000;
    CHECK(kind_of(p, &c) == GDTE_MEM_HOST, "pageable page");
    map(p, MiB, GDTE_MEM_DEVICE);
    gdte_mem_kind_t k = kind_of(p + 16, &c);
    if (with_id)
        CHECK(k == GDTE_MEM_DEVICE && c == 1, "by id, the page now device memory is seen at once (kind %d)", k);
    else
        CHECK(k == GDTE_MEM_HOST && c == 0, "without ids, the stale page answers pageable (kind %d)", k);
    gdte_memquery_forget((void *)p, MiB);
    CHECK(kind_of(p + 16, &c) == GDTE_MEM_DEVICE, "after forget: device");
    unmap(p);
    gdte_memquery_forget((void *)p, MiB);
    gdte_mem_info_t mi;
    OK(gdte_mem_query(NULL, &mi));
    CHECK(mi.kind == GDTE_MEM_HOST && mi.device == -1, "NULL is host memory");
    CHECK(gdte_mem_query((void *)h, NULL) == GDTE_ERR_INVALID_ARG, "NULL info");
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "id") && strcmp(argv[1], "noid"))) {
        fprintf(stderr, "usage: %s id|noid\n", argv[0]);
        return 2;
    }
    with_id = !strcmp(argv[1], "id");
    test_whole_allocation();
    test_capacity();
    test_epoch_and_replacement();
    test_host();
    printf("%s (%s): %d failures\n", argv[0], argv[1], failures);
    return failures ? 1 : 0;
}
