/*
 * gdte_mem_query with a cache of device allocations, so that the per-message decision (host or
 * GPU executor) costs a binary search instead of a runtime call.
 *
 * Device and managed allocations are cached as whole ranges [base, base+size) from the
 * runtime's address-range query. Pageable host memory is cached by 4 KiB page in a small
 * direct-mapped table (an interposed MPI application queries the same host buffers on every
 * call, and a runtime query costs about a microsecond). Pinned answers are never cached: memory
 * the application unregisters would otherwise still be taken for GPU-reachable. The one stale
 * answer the host table can give is "pageable" for memory the application pinned itself after
 * gdte first saw it; pageable is the answer that never lets a kernel touch host memory, so
 * that costs speed (staging instead of zero copy), never correctness.
 *
 * Ranges gdte itself releases or registers (its staging and plan memory, IPC mappings, host
 * registration) empty both tables through the GPU layer's unmap epoch.
 *
 * The application frees and maps memory behind gdte's back: a device allocation freed with
 * cudaFree whose addresses a later host allocation reuses, or pageable memory unmapped and
 * then handed out as device memory. So where the runtime has it (CUDA's
 * CU_POINTER_ATTRIBUTE_BUFFER_ID, HIP's HIP_POINTER_ATTRIBUTE_BUFFER_ID), every answer is
 * validated by the allocation's unique id, which the driver never reuses: one attribute query
 * per lookup. Id 0 (memory the runtime does not know) is pageable host memory, answered at
 * once; a cached range is used only while the id of the queried byte is the id it was cached
 * with, and dropped otherwise. Without the id query the tables work as before and
 * gdte_memquery_forget() drops ranges for callers that know of a free.
 */
#include <stdint.h>
#include "gdte.h"
#include "gpu/gpu.h"
#include "util/ranges.h"
#include "memquery.h"

typedef struct cached {
    gdte_range_t r; /* [base, end) of the allocation */
    uint64_t id;    /* the allocation's unique id (0 when the runtime has no id query) */
    gdte_mem_info_t info;
} cached_t;

/* The oldest range goes when a new one finds all 256 places taken. */
static gdte_ranges_t ranges = GDTE_RANGES_INIT(cached_t, 256);
static _Atomic int64_t n_hits, n_misses, n_stale;
static _Atomic uint64_t cache_epoch;

/* Pageable host pages seen: slot (page % HOST_SLOTS) holds page + 1, 0 when empty. Written
 * without a lock: a slot is one word, and a lost or torn-free race only costs a miss. */
#define HOST_SLOTS 1024
#define HOST_PAGE_SHIFT 12
static _Atomic uintptr_t host_pages[HOST_SLOTS];

static void host_clear(uintptr_t b, uintptr_t e)
{
    for (int i = 0; i < HOST_SLOTS; i++) {
        uintptr_t v = host_pages[i];
        if (!v) continue;
        uintptr_t pb = (v - 1) << HOST_PAGE_SHIFT;
        if (pb < e && b < pb + ((uintptr_t)1 << HOST_PAGE_SHIFT)) host_pages[i] = 0;
    }
}

/* The kind of `ptr`, and in *end_p the end of the region known to share it: the whole
 * allocation for a cached device or managed range, the page for pageable host memory, else the
 * byte itself. For device and managed memory also the allocation: *base_p its first byte (0
 * when the runtime gave no range) and *id_p its unique id (0 without the id query). */
static gdte_status_t query(const void *ptr, gdte_mem_info_t *info_p, uintptr_t *end_p, uintptr_t *base_p,
                           uint64_t *id_p)
{
    uintptr_t p = (uintptr_t)ptr;
    *base_p = 0;
    *id_p = 0;
    uintptr_t page_end = ((p >> HOST_PAGE_SHIFT) + 1) << HOST_PAGE_SHIFT;
    *end_p = p + 1;
    if (!gdte_gpu_available() || !ptr) {
        info_p->kind = GDTE_MEM_HOST;
        info_p->device = -1;
        *end_p = gdte_gpu_available() ? page_end : UINTPTR_MAX;
        return GDTE_OK;
    }
    uint64_t epoch = gdte_gpu_unmap_epoch();
    if (epoch != cache_epoch) {
        /* gdte released some range since the cache was filled: its addresses may now be host
         * memory. Start over (rare: pools keep their memory in steady state). Threads that see
         * the new epoch at once each start over; that costs misses, never a wrong answer. */
        gdte_ranges_clear(&ranges);
        host_clear(0, UINTPTR_MAX);
        cache_epoch = epoch;
    }
    /* 1: validated by buffer id; 0: this runtime has no id query; -1: not probed yet. */
    static _Atomic int have_id = -1;
    uint64_t id = 0;
    int validated = 0;
    if (have_id != 0) {
        gdte_status_t ist = gdte_gpu_buffer_id(ptr, &id);
        if (have_id < 0) have_id = ist == GDTE_OK;
        validated = ist == GDTE_OK;
    }
    if (validated && id == 0) {
        /* Memory the runtime has no allocation for: pageable host memory, whatever the
         * tables say (an allocation freed since is not device memory any more). */
        info_p->kind = GDTE_MEM_HOST;
        info_p->device = -1;
        *end_p = page_end;
        n_hits++;
        return GDTE_OK;
    }
    uintptr_t page = p >> HOST_PAGE_SHIFT;
    if (!validated && host_pages[page % HOST_SLOTS] == page + 1) {
        info_p->kind = GDTE_MEM_HOST;
        info_p->device = -1;
        *end_p = page_end;
        n_hits++;
        return GDTE_OK;
    }
    cached_t c;
    if (gdte_ranges_find(&ranges, p, &c)) {
        if (!validated || c.id == id) {
            *info_p = c.info;
            *end_p = c.r.hi;
            *base_p = c.r.lo;
            *id_p = c.id;
            n_hits++;
            return GDTE_OK;
        }
        /* A cached range whose allocation is gone (its addresses now belong to another
         * one): dropped below, when the new allocation is inserted over it. */
        n_stale++;
    }
    n_misses++;
    gdte_mem_info_t in;
    gdte_status_t st = gdte_gpu_pointer_query(ptr, &in);
    if (st != GDTE_OK) return st;
    if (in.kind == GDTE_MEM_DEVICE || in.kind == GDTE_MEM_MANAGED) {
        void *base;
        size_t size;
        if (gdte_gpu_mem_range(ptr, &base, &size) == GDTE_OK && size > 0 && (uintptr_t)base <= p &&
            p < (uintptr_t)base + size) {
            /* A new allocation replaces whatever stale ranges it overlaps. Out of memory, it
             * is just not cached. */
            cached_t n = {{(uintptr_t)base, (uintptr_t)base + size, 0}, validated ? id : 0, in};
            (void)gdte_ranges_insert(&ranges, &n, GDTE_RANGES_REPLACE);
            *base_p = (uintptr_t)base;
            *end_p = (uintptr_t)base + size;
            *id_p = n.id;
        }
    } else if (in.kind == GDTE_MEM_HOST && !validated && gdte_gpu_unmap_epoch() == epoch) {
        /* Only if nothing was released or registered while the runtime was asked. */
        host_pages[page % HOST_SLOTS] = page + 1;
    }
    *info_p = in;
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_mem_query(const void *ptr, gdte_mem_info_t *info_p)
{
    if (!info_p) return GDTE_ERR_INVALID_ARG;
    uintptr_t end, base;
    uint64_t id;
    return query(ptr, info_p, &end, &base, &id);
}

gdte_status_t gdte_mem_query_alloc(const void *ptr, void **base_p, uint64_t *id_p)
{
    gdte_mem_info_t info;
    uintptr_t end, base;
    gdte_status_t st = query(ptr, &info, &end, &base, id_p);
    if (st != GDTE_OK) return st;
    if (info.kind == GDTE_MEM_MANAGED) return GDTE_ERR_UNSUPPORTED;
    if (info.kind != GDTE_MEM_DEVICE || !base) return GDTE_ERR_MEMORY_KIND;
    *base_p = (void *)base;
    return GDTE_OK;
}

gdte_status_t gdte_mem_query_span(const void *first, const void *last, gdte_mem_info_t *first_p,
                                  gdte_mem_info_t *last_p)
{
    uintptr_t end, base;
    uint64_t id;
    gdte_status_t st = query(first, first_p, &end, &base, &id);
    if (st != GDTE_OK) return st;
    if ((uintptr_t)last >= (uintptr_t)first && (uintptr_t)last < end) {
        *last_p = *first_p; /* one allocation (or one pageable page): no second lookup */
        return GDTE_OK;
    }
    return query(last, last_p, &end, &base, &id);
}

int gdte_mem_span_one_alloc(const void *first, const void *last)
{
    uintptr_t end, base;
    uint64_t id;
    gdte_mem_info_t in;
    if (!gdte_gpu_available()) return 1;
    /* The MPI layer asks this of a buffer whose kind it has just looked up (validated by buffer
     * id there): the cached range alone, no second pointer query per message. */
    cached_t c;
    if (gdte_gpu_unmap_epoch() == cache_epoch && gdte_ranges_find(&ranges, (uintptr_t)first, &c)) {
        n_hits++;
        if (c.info.kind != GDTE_MEM_DEVICE && c.info.kind != GDTE_MEM_MANAGED) return 1;
        return (uintptr_t)last >= (uintptr_t)first && (uintptr_t)last < c.r.hi;
    }
    if (query(first, &in, &end, &base, &id) != GDTE_OK) return 1;
    if (in.kind != GDTE_MEM_DEVICE && in.kind != GDTE_MEM_MANAGED) return 1;
    return (uintptr_t)last >= (uintptr_t)first && (uintptr_t)last < end;
}

void gdte_memquery_forget(const void *ptr, size_t size)
{
    uintptr_t b = (uintptr_t)ptr, e = b + (size ? size : 1);
    gdte_ranges_remove_overlapping(&ranges, b, e);
    host_clear(b, e);
}

void gdte_memquery_reset(void)
{
    gdte_ranges_clear(&ranges);
    host_clear(0, UINTPTR_MAX);
    n_hits = n_misses = 0;
}

int64_t gdte_memquery_stale(void) { return n_stale; }

void gdte_memquery_stats(int64_t *hits_p, int64_t *misses_p, int *ranges_p)
{
    if (hits_p) *hits_p = n_hits;
    if (misses_p) *misses_p = n_misses;
    if (ranges_p) *ranges_p = (int)gdte_ranges_count(&ranges);
}
