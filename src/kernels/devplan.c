/*
 * Device plan cache. A plan's units are built on the host at commit and depend only on the
 * type, so each (type, device) pair uploads them once and keeps them in the type's backend
 * slot until the type is destroyed or the cache must shrink under GDTE_CACHE_MAX, least
 * recently used first.
 *
 * First use. The units were generated at commit (the engine does that on the CPU), so what a
 * first pack adds is the upload, at PCIe speed from pageable memory: for a triangle that is
 * 3.2 MiB of units, more than the pack itself. Two ways to pay less:
 *  - Compact: where the engine kept runs (long pieces, so runs are a small fraction of the
 *    units), only the runs cross and a kernel cuts them into units on the device just before
 *    the pack (the triangle's runs are 1/12 of its units' bytes). The host writes the runs into
 *    a pinned buffer that the cutting kernel reads over the bus (bounce_take): no pageable copy,
 *    which costs the host 15-35 us even for 32 KiB. Runs of RUNS_PIPE_MIN bytes or more go in
 *    chunks growing fourfold: the first is cut in the caller's stream and packed at once, the
 *    others are cut on the copy stream while the caller's stream packs the chunk before.
 *    Measured on an H100 (bench/pack T, 8192 runs): first use 1.17-1.22x of the cached pack,
 *    where eight equal chunks from pageable memory, each cut in the caller's stream, took
 *    1.41-1.44x.
 *  - Pipelined: other plans of at least PIPE_MIN bytes are copied in chunks on a copy stream
 *    of our own; the kernel for chunk k waits only for chunk k's event, so it runs while chunk
 *    k+1 is copied, and the host stages chunk k+2 meanwhile (pageable copies pass through the
 *    runtime's staging buffers). Smaller plans go in one copy: a chunk's kernel launch would
 *    cost more than the overlap gains.
 *
 * An entry that was published while its copies were still in flight carries a `ready` event;
 * other users of the entry order their stream after it until it has completed.
 *
 * Locking: one mutex over the LRU list, the per-type slots and the counters. Uploads happen
 * under it; they are rare, and two threads must not upload the same plan twice.
 *
 * Lists: the LRU list (doubly linked, utlist DL_*: its head's prev is the tail, the oldest),
 * a type's entries (utlist LL_* over `sibling`) and each device's free ranges (LL_*) come from
 * utlist (uthash-dev, as uthash elsewhere). Our own code keeps only what utlist has no word
 * for: merging a freed range with its neighbours in address order.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>
#include "callprof.h"
#include "devplan.h"
#include "memquery.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "util/util.h"

#define PIPE_MIN (1 << 20)   /* plans smaller than this are uploaded in one copy */
#define PIPE_CHUNK (1 << 19) /* smallest chunk */
#define PIPE_MAX_CHUNKS 8
#define RUNS_PIPE_MIN (64 << 10) /* runs of fewer bytes go in one copy, cut in one kernel */
#define RUNS_CHUNK (32 << 10)    /* smallest chunk of runs */
#define BOUNCE_MIN (256 << 10)   /* first size of the runs' pinned bounce buffer */
#define BOUNCE_MAX (8 << 20)     /* larger runs cross by copies from pageable memory */
#define MAX_DEVICES 64
#define DP_MODE_DEFAULT 0 /* bench/pack T on an H200: neither mode shortened a first use (1.26-1.27x of cached in all four) */

typedef struct dp_slot dp_slot_t;

typedef struct dp_entry {
    struct dp_entry *prev, *next; /* LRU list (utlist DL), most recent first */
    struct dp_entry *sibling;     /* next entry of the same type (other devices) */
    dp_slot_t *slot;
    int device;
    gdte_unit_t *dunits;
    int64_t bytes;
    gdte_gpu_event_t ready; /* non-NULL while the upload may still be in flight */
    int pins;               /* callers between lookup and kernel launch: not evictable */
} dp_entry_t;

struct dp_slot {
    dp_entry_t *entries;
    uint64_t units_hash; /* of the host units, once asked for (gdte_devplan_units_hash) */
    int hashed;
};

/* Plan memory comes from slabs kept for the process, carved first fit: a cudaMalloc of a few
 * MiB costs hundreds of microseconds, more than packing a whole triangle, so a first use must
 * not pay one. Slabs live until gdte_finalize; GDTE_CACHE_MAX bounds the plans in them. */
#define SLAB_BYTES ((size_t)32 << 20)
#define MAX_SLABS 256
typedef struct dp_range {
    char *p;
    size_t n;
    int slab;
    struct dp_range *next; /* free list (utlist LL), by address */
} dp_range_t;

typedef struct dp_device {
    gdte_stream_t copy_stream;
    gdte_stream_t urgent_stream; /* highest priority, made on the first first use with GDTE_DEVPLAN_URGENT */
    gdte_gpu_event_t events[PIPE_MAX_CHUNKS];
    int ready;
    char *slab[MAX_SLABS];
    size_t slab_bytes[MAX_SLABS];
    int nslabs;
    dp_range_t *free_list;
    /* Runs of a first use are read by the cutting kernel where the host wrote them: pinned
     * host memory mapped into the device (bounce_h on the host, bounce_d on the device), free
     * again once bounce_done has passed. */
    char *bounce_h;
    const gdte_run_t *bounce_d;
    size_t bounce_cap;
    gdte_gpu_event_t bounce_done;
    int bounce_used;
} dp_device_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static dp_entry_t *lru_head; /* most recent; lru_head->prev is the least recent (utlist DL) */
static int64_t cached_bytes, nentries, uploads, evictions, hits, misses;
static dp_device_t devices[MAX_DEVICES];

/* Give [p, p+n) of `slab` back to the free list, merged with the ranges it touches. */
static void range_insert(dp_device_t *d, char *p, size_t n, int slab)
{
    dp_range_t *r, *prev = NULL, *next = NULL;
    LL_FOREACH(d->free_list, r) {
        if (r->p >= p) {
            next = r;
            break;
        }
        prev = r;
    }
    if (prev && prev->slab == slab && prev->p + prev->n == p) { /* grow the one before */
        prev->n += n;
        if (next && next->slab == slab && prev->p + prev->n == next->p) {
            prev->n += next->n;
            LL_DELETE(d->free_list, next);
            free(next);
        }
        return;
    }
    if (next && next->slab == slab && p + n == next->p) { /* grow the one after */
        next->p = p;
        next->n += n;
        return;
    }
    if (!(r = malloc(sizeof *r))) return; /* the range is lost to the pool until finalize: harmless */
    *r = (dp_range_t){p, n, slab, NULL};
    if (prev)
        LL_APPEND_ELEM(d->free_list, prev, r);
    else
        LL_PREPEND(d->free_list, r);
}

static gdte_status_t pool_alloc(int dev, size_t n, void **p_out)
{
    if (dev < 0 || dev >= MAX_DEVICES) return GDTE_ERR_INVALID_ARG;
    dp_device_t *d = &devices[dev];
    n = (n + 255) & ~(size_t)255;
    dp_range_t *r;
    LL_FOREACH(d->free_list, r) { /* first fit */
        if (r->n < n) continue;
        *p_out = r->p;
        r->p += n;
        r->n -= n;
        if (!r->n) {
            LL_DELETE(d->free_list, r);
            free(r);
        }
        return GDTE_OK;
    }
    if (d->nslabs == MAX_SLABS) return GDTE_ERR_NO_DEVICE_MEMORY;
    size_t sz = n > SLAB_BYTES ? n : SLAB_BYTES;
    char *b;
    gdte_status_t st = gdte_gpu_malloc((void **)&b, sz);
    if (st != GDTE_OK) return st;
    int k = d->nslabs++;
    d->slab[k] = b;
    d->slab_bytes[k] = sz;
    if (sz > n) range_insert(d, b + n, sz - n, k);
    *p_out = b;
    return GDTE_OK;
}

/* Back to the pool once the device is idle: a queued kernel may still read these units. */
static void pool_free(int dev, void *p, size_t n)
{
    dp_device_t *d = &devices[dev];
    n = (n + 255) & ~(size_t)255;
    int k = 0;
    while (k < d->nslabs && !((char *)p >= d->slab[k] && (char *)p < d->slab[k] + d->slab_bytes[k])) k++;
    gdte_gpu_device_synchronize();
    range_insert(d, (char *)p, n, k);
}

static void lru_unlink(dp_entry_t *e) { DL_DELETE(lru_head, e); }
static void lru_push_front(dp_entry_t *e) { DL_PREPEND(lru_head, e); }
/* The least recently used entry, and the next older than `e` (NULL past the oldest). */
static dp_entry_t *lru_oldest(void) { return lru_head ? lru_head->prev : NULL; }
static dp_entry_t *lru_newer(dp_entry_t *e) { return e == lru_head ? NULL : e->prev; }

/* Free an entry's device memory. Freeing synchronizes with the device, so a kernel still
 * reading these units finishes first. */
static void entry_destroy(dp_entry_t *e)
{
    int cur = gdte_gpu_current_device();
    if (gdte_gpu_available()) {
        if (e->device != cur && cur >= 0) gdte_gpu_set_device(e->device);
        if (e->ready) gdte_gpu_event_destroy(e->ready);
        pool_free(e->device, e->dunits, (size_t)e->bytes);
        if (e->device != cur && cur >= 0) gdte_gpu_set_device(cur);
    }
    cached_bytes -= e->bytes;
    nentries--;
    free(e);
}

static void slot_unlink(dp_entry_t *e) { LL_DELETE2(e->slot->entries, e, sibling); }

/* Runs when the type is destroyed. */
static void slot_free(void *p)
{
    dp_slot_t *s = p;
    pthread_mutex_lock(&lock);
    while (s->entries) {
        dp_entry_t *e = s->entries;
        LL_DELETE2(s->entries, e, sibling);
        lru_unlink(e);
        entry_destroy(e);
    }
    pthread_mutex_unlock(&lock);
    free(s);
}

static void evict_to_limit(const dp_entry_t *keep)
{
    int64_t limit = gdte_knob(GDTE_KNOB_CACHE_MAX);
    if (limit <= 0) return;
    dp_entry_t *e = lru_oldest();
    while (cached_bytes > limit && e) {
        dp_entry_t *newer = lru_newer(e);
        if (e != keep && !e->pins) {
            lru_unlink(e);
            slot_unlink(e);
            entry_destroy(e);
            evictions++;
        }
        e = newer;
    }
}

static dp_device_t *device_state(int dev)
{
    if (dev < 0 || dev >= MAX_DEVICES) return NULL;
    dp_device_t *d = &devices[dev];
    if (d->ready) return d;
    if (gdte_gpu_stream_create(&d->copy_stream) != GDTE_OK) return NULL;
    for (int i = 0; i < PIPE_MAX_CHUNKS; i++) {
        if (gdte_gpu_event_create(&d->events[i], 0) != GDTE_OK) {
            while (i-- > 0) gdte_gpu_event_destroy(d->events[i]);
            gdte_gpu_stream_destroy(d->copy_stream);
            return NULL;
        }
    }
    d->ready = 1;
    return d;
}

/* The runs' bounce buffer of `d`, at least `bytes`, free to overwrite: its host address in
 * *host_p, the device's in *dev_p. A pageable copy costs the host 15-35 us even for 32 KiB (it
 * returns once the runtime has staged the bytes) and then the DMA; a memcpy into pinned memory
 * that the cutting kernel reads over the bus costs a few microseconds, and the runs need no
 * device memory of their own. Allocated once per device and grown to the largest need up to
 * BOUNCE_MAX; caller holds the lock. */
static gdte_status_t bounce_take(dp_device_t *d, size_t bytes, char **host_p, const gdte_run_t **dev_p)
{
    if (bytes > BOUNCE_MAX) return GDTE_ERR_UNSUPPORTED;
    gdte_status_t st;
    if (d->bounce_used && (st = gdte_gpu_event_synchronize(d->bounce_done)) != GDTE_OK) return st;
    d->bounce_used = 0;
    if (!d->bounce_done && (st = gdte_gpu_event_create(&d->bounce_done, 0)) != GDTE_OK) return st;
    if (d->bounce_cap < bytes) {
        size_t cap = BOUNCE_MIN;
        while (cap < bytes) cap *= 2;
        if (d->bounce_h) gdte_gpu_host_free(d->bounce_h);
        d->bounce_h = NULL;
        d->bounce_d = NULL;
        d->bounce_cap = 0;
        void *h, *dp;
        if ((st = gdte_gpu_host_alloc(&h, cap, 1)) != GDTE_OK) return st;
        if ((st = gdte_gpu_host_device_pointer(h, &dp)) != GDTE_OK) {
            gdte_gpu_host_free(h);
            return st;
        }
        d->bounce_h = h;
        d->bounce_d = dp;
        d->bounce_cap = cap;
    }
    *host_p = d->bounce_h;
    *dev_p = d->bounce_d;
    return GDTE_OK;
}

/* The bounce buffer is read by work queued on `stream` up to now. */
static gdte_status_t bounce_release(dp_device_t *d, gdte_stream_t stream)
{
    gdte_status_t st = gdte_gpu_event_record(d->bounce_done, stream);
    d->bounce_used = st == GDTE_OK;
    return st;
}

/* Find the entry of (type, dev); on a hit, make it the most recent. Caller holds the lock. */
static dp_entry_t *lookup(gdte_type_h type, int dev, dp_slot_t **slot_p)
{
    dp_slot_t *s = gdte_type_backend_slot(type);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return NULL;
        gdte_type_set_backend_slot(type, s, slot_free);
    }
    *slot_p = s;
    dp_entry_t *e;
    LL_FOREACH2(s->entries, e, sibling) {
        if (e->device == dev) {
            if (e != lru_head) {
                lru_unlink(e);
                lru_push_front(e);
            }
            return e;
        }
    }
    return NULL;
}

/* A plan's device memory: the units, followed by the runs when it is uploaded compact. */
static gdte_status_t entry_new(dp_slot_t *s, int dev, int64_t nunits, int64_t nruns, dp_entry_t **e_p)
{
    dp_entry_t *e = calloc(1, sizeof *e);
    if (!e) return GDTE_ERR_NO_MEMORY;
    e->slot = s;
    e->device = dev;
    e->bytes = nunits * (int64_t)sizeof(gdte_unit_t) + nruns * (int64_t)sizeof(gdte_run_t);
    gdte_status_t st = pool_alloc(dev, (size_t)e->bytes, (void **)&e->dunits);
    /* Make room from the cache, oldest first, before giving up. */
    for (dp_entry_t *v = lru_oldest(), *newer; v && st == GDTE_ERR_NO_DEVICE_MEMORY; v = newer) {
        newer = lru_newer(v);
        if (v->pins) continue;
        lru_unlink(v);
        slot_unlink(v);
        entry_destroy(v);
        evictions++;
        st = pool_alloc(dev, (size_t)e->bytes, (void **)&e->dunits);
    }
    if (st != GDTE_OK) {
        free(e);
        return st;
    }
    *e_p = e;
    return GDTE_OK;
}

static void entry_publish(dp_slot_t *s, dp_entry_t *e)
{
    LL_PREPEND2(s->entries, e, sibling);
    lru_push_front(e);
    cached_bytes += e->bytes;
    nentries++;
    uploads++;
    evict_to_limit(e);
}

/* A hit whose upload may still be in flight: order `stream` after it (or wait, when the
 * caller's stream is unknown). Caller holds the lock. */
static gdte_status_t entry_wait(dp_entry_t *e, gdte_stream_t stream, int blocking)
{
    if (!e->ready) return GDTE_OK;
    gdte_status_t st = gdte_gpu_event_query(e->ready);
    if (st == GDTE_OK) {
        gdte_gpu_event_destroy(e->ready);
        e->ready = NULL;
        return GDTE_OK;
    }
    if (st != GDTE_INPROGRESS) return st;
    return blocking ? gdte_gpu_event_synchronize(e->ready) : gdte_gpu_stream_wait_event(stream, e->ready);
}

/* Compact upload: the runs go over, a kernel cuts them into the units, both in `stream`. */
static gdte_status_t upload_runs(dp_entry_t *e, int64_t nunits, const gdte_run_t *hr, int64_t nr, int64_t us,
                                 gdte_stream_t stream)
{
    gdte_run_t *dr = (gdte_run_t *)(e->dunits + nunits);
    gdte_status_t st = gdte_gpu_memcpy_async(dr, hr, (size_t)nr * sizeof *hr, stream);
    return st != GDTE_OK ? st : gdte_gpu_expand_units(dr, nr, us, e->dunits, stream);
}

/* The type's entry on the current device, uploaded if needed and complete. Caller holds the lock. */
static gdte_status_t units_locked(gdte_type_h type, dp_entry_t **e_p)
{
    const gdte_unit_t *hu;
    int64_t n;
    gdte_status_t st = gdte_engine_units(type, &hu, &n);
    if (st != GDTE_OK) return st;
    if (n <= 0) return GDTE_ERR_INVALID_ARG;
    int dev = gdte_gpu_current_device();
    dp_slot_t *s;
    dp_entry_t *e = lookup(type, dev, &s);
    if (e) {
        hits++;
        st = entry_wait(e, NULL, 1);
    } else if (!s) {
        st = GDTE_ERR_NO_MEMORY;
    } else {
        misses++;
        const gdte_run_t *hr;
        int64_t nr = 0, us = 0;
        if (gdte_engine_runs(type, &hr, &nr, &us) != GDTE_OK) nr = 0;
        if ((st = entry_new(s, dev, n, nr, &e)) == GDTE_OK) {
            if (nr)
                st = upload_runs(e, n, hr, nr, us, NULL);
            else
                st = gdte_gpu_memcpy_async(e->dunits, hu, (size_t)n * sizeof *hu, NULL);
            if (st == GDTE_OK) st = gdte_gpu_stream_synchronize(NULL);
            if (st != GDTE_OK) {
                pool_free(dev, e->dunits, (size_t)e->bytes);
                free(e);
                e = NULL;
            } else {
                entry_publish(s, e);
            }
        }
    }
    if (st == GDTE_OK) *e_p = e;
    return st;
}

gdte_status_t gdte_devplan_units(gdte_type_h type, const gdte_unit_t **dunits_p)
{
    if (!gdte_gpu_available()) return GDTE_ERR_NO_DEVICE;
    dp_entry_t *e = NULL;
    pthread_mutex_lock(&lock);
    gdte_status_t st = units_locked(type, &e);
    if (st == GDTE_OK) *dunits_p = e->dunits;
    pthread_mutex_unlock(&lock);
    return st;
}

gdte_status_t gdte_devplan_pin(gdte_type_h type, const gdte_unit_t **dunits_p)
{
    if (!gdte_gpu_available()) return GDTE_ERR_NO_DEVICE;
    dp_entry_t *e = NULL;
    pthread_mutex_lock(&lock);
    gdte_status_t st = units_locked(type, &e);
    if (st == GDTE_OK) {
        e->pins++;
        *dunits_p = e->dunits;
    }
    pthread_mutex_unlock(&lock);
    return st;
}

/* 64-bit hash of the unit array: 8-byte words folded by multiply and rotate (a plan's units are
 * whole gdte_unit_t records, so their bytes are a multiple of 8). Two processes that get the same
 * value for plans of the same shape run the same units. */
static uint64_t units_hash(const gdte_unit_t *u, int64_t n)
{
    const uint64_t *w = (const uint64_t *)(const void *)u;
    size_t nw = (size_t)n * sizeof *u / 8;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (size_t i = 0; i < nw; i++) {
        h ^= w[i] * 0xbf58476d1ce4e5b9ull;
        h = (h << 27 | h >> 37) * 0x94d049bb133111ebull;
    }
    return h ^ (h >> 31);
}

gdte_status_t gdte_devplan_units_hash(gdte_type_h type, uint64_t *hash_p)
{
    const gdte_unit_t *hu;
    int64_t n;
    gdte_status_t st = gdte_engine_units(type, &hu, &n);
    if (st != GDTE_OK) return st;
    pthread_mutex_lock(&lock);
    dp_slot_t *s = gdte_type_backend_slot(type);
    if (!s && (s = calloc(1, sizeof *s)) != NULL) gdte_type_set_backend_slot(type, s, slot_free);
    if (s && !s->hashed) {
        s->units_hash = units_hash(hu, n);
        s->hashed = 1;
    }
    uint64_t h = s ? s->units_hash : units_hash(hu, n);
    pthread_mutex_unlock(&lock);
    *hash_p = h;
    return GDTE_OK;
}

void gdte_devplan_unpin(gdte_type_h type, int dev)
{
    pthread_mutex_lock(&lock);
    dp_slot_t *s = gdte_type_backend_slot(type);
    dp_entry_t *e;
    if (s) {
        LL_FOREACH2(s->entries, e, sibling) {
            if (e->device == dev && e->pins > 0) {
                e->pins--;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
}

/* The end of chunk k, which starts at a, of a pipelined upload of n items whose first chunk has
 * `first`: chunk k has first * 4^k items, the last of PIPE_MAX_CHUNKS (or one that would leave
 * less than its own size behind) takes the rest. Fourfold growth keeps each copy shorter than
 * the pack of the chunk before it (a run is 32 bytes to copy and about 24 ns of packing on an
 * H100 for the triangle's rows) with few kernels in the caller's stream: every kernel boundary
 * there drains the GPU once. */
static int64_t runs_chunk = RUNS_CHUNK; /* gdte_devplan_tune */
static int growth = 4;
static int mode = DP_MODE_DEFAULT;

void gdte_devplan_tune(int64_t runs_chunk_bytes, int g, int m)
{
    pthread_mutex_lock(&lock);
    runs_chunk = runs_chunk_bytes > 0 ? runs_chunk_bytes : RUNS_CHUNK;
    growth = g >= 1 ? g : 4;
    mode = m >= 0 ? m : DP_MODE_DEFAULT;
    pthread_mutex_unlock(&lock);
}

static int64_t chunk_end(int64_t a, int64_t first, int64_t n, int k)
{
    int64_t per = first;
    for (int i = 0; i < k && per < n; i++) per *= growth;
    if (k == PIPE_MAX_CHUNKS - 1 || per >= n - a || n - a - per < per) return n;
    return a + per;
}

/* First use: upload in chunks on the copy stream and run each chunk's units as soon as they
 * have arrived. Caller holds the lock. */
static gdte_status_t first_use(dp_slot_t *s, int dev, gdte_type_h type, const gdte_unit_t *hu, gdte_layout_t *L,
                               gdte_dir_t dir, void *user, void *packed, int64_t offset, int64_t len,
                               gdte_stream_t stream, int max_blocks)
{
    dp_entry_t *e;
    const gdte_run_t *hr;
    int64_t nr = 0, us = 0;
    if (gdte_engine_runs(type, &hr, &nr, &us) != GDTE_OK) nr = 0;
    dp_device_t *d = device_state(dev);
    char *bh = NULL;           /* runs: the bounce buffer, host side ... */
    const gdte_run_t *dr = NULL; /* ... and where the cutting kernel reads them */
    if (nr && d && bounce_take(d, (size_t)nr * sizeof *hr, &bh, &dr) != GDTE_OK) bh = NULL;
    const int dma = (mode & GDTE_DEVPLAN_DMA_RUNS) != 0;
    gdte_status_t st = entry_new(s, dev, L->nunits, nr && (!bh || dma) ? nr : 0, &e);
    if (st != GDTE_OK) return st;
    gdte_run_t *druns = nr && (!bh || dma) ? (gdte_run_t *)(e->dunits + L->nunits) : NULL; /* behind the units */
    if (nr && !bh) dr = druns;
    /* Pipelined: units of at least PIPE_MIN bytes, or runs of at least RUNS_PIPE_MIN bytes. */
    const int pipe = d && (nr ? nr * (int64_t)sizeof(gdte_run_t) >= RUNS_PIPE_MIN : e->bytes >= PIPE_MIN);
    gdte_gpu_exec_opts_t o;
    memset(&o, 0, sizeof o);
    o.host_units = hu;
    o.max_blocks = max_blocks;
    L->units = e->dunits;
    if (!pipe) {
        /* Compact plan (runs, cut on the device) or small plan: one upload in the caller's
         * stream, then the kernel. */
        if (bh) {
            memcpy(bh, hr, (size_t)nr * sizeof *hr);
            if ((st = gdte_gpu_expand_units(dr, nr, us, e->dunits, stream)) != GDTE_OK ||
                (st = bounce_release(d, stream)) != GDTE_OK)
                goto fail;
        } else {
            st = nr ? upload_runs(e, L->nunits, hr, nr, us, stream)
                    : gdte_gpu_memcpy_async(e->dunits, hu, (size_t)L->nunits * sizeof *hu, stream);
            if (st != GDTE_OK) goto fail;
        }
        if ((st = gdte_gpu_exec_ex(L, &o, dir, user, packed, offset, len, stream)) != GDTE_OK) goto fail;
        /* Other streams must not read the units before this copy is done. */
        if ((st = gdte_gpu_event_create(&e->ready, 0)) != GDTE_OK) goto fail;
        if ((st = gdte_gpu_event_record(e->ready, stream)) != GDTE_OK) goto fail;
        entry_publish(s, e);
        return GDTE_OK;
    }
    int k = 0;
    /* The stream of the later chunks' uploads and cuts: the urgent one dispatches a cut's blocks
     * ahead of the pack blocks already queued (GDTE_DEVPLAN_URGENT). */
    gdte_stream_t cps = d ? d->copy_stream : NULL;
    if (d && (mode & GDTE_DEVPLAN_URGENT) && !d->urgent_stream &&
        gdte_gpu_stream_create_urgent(&d->urgent_stream) != GDTE_OK)
        d->urgent_stream = NULL; /* the copy stream then */
    if (d && (mode & GDTE_DEVPLAN_URGENT) && d->urgent_stream) cps = d->urgent_stream;
    if (nr && (mode & GDTE_DEVPLAN_ONE_STREAM)) cps = stream; /* cut k+1 queued behind pack k */
    const int one = cps == stream;
    if (nr) {
        /* Runs in chunks, each cut into its units on the copy stream (read from the bounce
         * buffer, or copied from pageable memory first); the caller's stream packs chunk k once
         * its event says the units are in place, while the host writes chunk k+1 and the copy
         * stream cuts it. Chunks grow fourfold (chunk_end), so the first pack starts after one
         * small chunk and the caller's stream runs a few back-to-back kernels with nothing
         * between them. */
        int64_t first = runs_chunk / (int64_t)sizeof(gdte_run_t);
        if (first < 1) first = 1;
        double tq = 0, tc = 0; /* callprof: host time of the bounce writes, and of the whole loop */
        if (gdte_callprof_on) tq = gdte_time_now();
        for (int64_t a = 0, b; a < nr; a = b, k++) {
            b = chunk_end(a, first, nr, k);
            /* The first chunk is cut in the caller's stream, right before its pack: nothing
             * waits across streams before the first pack. */
            gdte_stream_t cs = k ? cps : stream;
            const gdte_run_t *src = dr;
            if (bh) {
                const double t0 = gdte_callprof_on ? gdte_time_now() : 0;
                memcpy(bh + a * (int64_t)sizeof *hr, hr + a, (size_t)(b - a) * sizeof *hr);
                if (t0) tc += gdte_time_now() - t0;
                /* Later chunks, with DMA_RUNS: the copy engine brings the runs into device
                 * memory and the cut reads them there, not over the bus. Not the default: on an
                 * H200 (bench/pack T's sweep) a first use took 1.26-1.27x of the cached pack with
                 * or without it, and with or without the urgent stream. */
                if (k && druns) {
                    if ((st = gdte_gpu_memcpy_async(druns + a, bh + a * (int64_t)sizeof *hr,
                                                    (size_t)(b - a) * sizeof *hr, cs)) != GDTE_OK)
                        goto fail;
                    src = druns;
                }
            } else if ((st = gdte_gpu_memcpy_async((gdte_run_t *)dr + a, hr + a, (size_t)(b - a) * sizeof *hr, cs)) !=
                     GDTE_OK)
                goto fail;
            if ((st = gdte_gpu_expand_units(src + a, b - a, us, e->dunits, cs)) != GDTE_OK ||
                (!one && (st = gdte_gpu_event_record(d->events[k], cs)) != GDTE_OK) ||
                (!one && k && (st = gdte_gpu_stream_wait_event(stream, d->events[k])) != GDTE_OK))
                goto fail;
            o.unit_lo = hr[a].first_unit;
            o.unit_hi = b < nr ? hr[b].first_unit : L->nunits;
            if (a == 0 && b == nr) o.unit_lo = o.unit_hi = 0;
            if ((st = gdte_gpu_exec_ex(L, &o, dir, user, packed, offset, len, stream)) != GDTE_OK) goto fail;
        }
        /* The copy stream waits for the first chunk's cut (events[0], in the caller's stream):
         * past that and its own last cut, every unit is in place and the runs are read. */
        if ((!one && (st = gdte_gpu_stream_wait_event(cps, d->events[0])) != GDTE_OK) ||
            (bh && (st = bounce_release(d, cps)) != GDTE_OK))
            goto fail;
        if (tq) {
            gdte_callprof_add(GDTE_CP_FIRST_COPY, tc);
            gdte_callprof_add(GDTE_CP_FIRST_QUEUE, gdte_time_now() - tq - tc);
        }
    } else {
        const int64_t first = PIPE_CHUNK / (int64_t)sizeof(gdte_unit_t);
        for (int64_t a = 0, b; a < L->nunits; a = b, k++) {
            b = chunk_end(a, first, L->nunits, k);
            if ((st = gdte_gpu_memcpy_async(e->dunits + a, hu + a, (size_t)(b - a) * sizeof(gdte_unit_t), cps)) !=
                    GDTE_OK ||
                (st = gdte_gpu_event_record(d->events[k], cps)) != GDTE_OK ||
                (st = gdte_gpu_stream_wait_event(stream, d->events[k])) != GDTE_OK)
                goto fail;
            o.unit_lo = a;
            o.unit_hi = b;
            /* A whole-plan chunk would read as "all units": give it the exact-range path. */
            if (a == 0 && b == L->nunits) o.unit_lo = o.unit_hi = 0;
            if ((st = gdte_gpu_exec_ex(L, &o, dir, user, packed, offset, len, stream)) != GDTE_OK) goto fail;
        }
    }
    /* The units are complete once the copy stream has passed its last chunk. */
    if ((st = gdte_gpu_event_create(&e->ready, 0)) != GDTE_OK ||
        (st = gdte_gpu_event_record(e->ready, cps)) != GDTE_OK)
        goto fail;
    entry_publish(s, e);
    return GDTE_OK;
fail:
    /* Let queued work that may read these units drain before the memory goes back. */
    gdte_gpu_device_synchronize();
    if (e->ready) gdte_gpu_event_destroy(e->ready);
    pool_free(dev, e->dunits, (size_t)e->bytes);
    free(e);
    return st;
}

gdte_status_t gdte_devplan_exec(gdte_type_h type, gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed,
                                int64_t offset, int64_t len, gdte_stream_t stream, int max_blocks)
{
    if (!gdte_gpu_available()) return GDTE_ERR_NO_DEVICE;
    const double t0 = gdte_callprof_on ? gdte_time_now() : 0;
    const gdte_unit_t *hu;
    int64_t n;
    gdte_status_t st = gdte_engine_units(type, &hu, &n);
    if (st != GDTE_OK) return st;
    if (n != L->nunits || n <= 0) return GDTE_ERR_INVALID_ARG;
    int dev = gdte_gpu_current_device();
    dp_slot_t *s;
    pthread_mutex_lock(&lock);
    dp_entry_t *e = lookup(type, dev, &s);
    if (e) {
        hits++;
        st = entry_wait(e, stream, 0);
        if (st != GDTE_OK) {
            pthread_mutex_unlock(&lock);
            return st;
        }
        /* Launch outside the lock, the entry pinned so that no other thread evicts it before
         * the kernel is queued. Once queued, an eviction is safe: freeing device memory waits
         * for the device's work. */
        e->pins++;
        pthread_mutex_unlock(&lock);
        if (t0) gdte_callprof_add(GDTE_CP_PLAN, gdte_time_now() - t0);
        gdte_gpu_exec_opts_t o;
        memset(&o, 0, sizeof o);
        o.host_units = hu;
        o.max_blocks = max_blocks;
        L->units = e->dunits;
        st = gdte_gpu_exec_ex(L, &o, dir, user, packed, offset, len, stream);
        pthread_mutex_lock(&lock);
        e->pins--;
        pthread_mutex_unlock(&lock);
        return st;
    }
    if (!s) {
        pthread_mutex_unlock(&lock);
        return GDTE_ERR_NO_MEMORY;
    }
    misses++;
    st = first_use(s, dev, type, hu, L, dir, user, packed, offset, len, stream, max_blocks);
    pthread_mutex_unlock(&lock);
    return st;
}

void gdte_devplan_get_stats(gdte_devplan_stats_t *st)
{
    pthread_mutex_lock(&lock);
    st->bytes = cached_bytes;
    st->entries = nentries;
    st->uploads = uploads;
    st->evictions = evictions;
    st->hits = hits;
    st->misses = misses;
    pthread_mutex_unlock(&lock);
}

int64_t gdte_devplan_bytes(void)
{
    gdte_devplan_stats_t s;
    gdte_devplan_get_stats(&s);
    return s.bytes;
}
int64_t gdte_devplan_uploads(void)
{
    gdte_devplan_stats_t s;
    gdte_devplan_get_stats(&s);
    return s.uploads;
}
int64_t gdte_devplan_evictions(void)
{
    gdte_devplan_stats_t s;
    gdte_devplan_get_stats(&s);
    return s.evictions;
}

void gdte_devplan_finalize(void)
{
    pthread_mutex_lock(&lock);
    /* Slots stay attached to their (possibly still live) types, empty. */
    while (lru_head) {
        dp_entry_t *e = lru_head;
        lru_unlink(e);
        slot_unlink(e);
        entry_destroy(e);
    }
    if (gdte_gpu_available()) {
        int cur = gdte_gpu_current_device();
        for (int i = 0; i < MAX_DEVICES; i++) {
            dp_device_t *d = &devices[i];
            if (!d->ready && !d->nslabs) continue;
            if (i != cur) gdte_gpu_set_device(i);
            if (d->ready) {
                for (int k = 0; k < PIPE_MAX_CHUNKS; k++) gdte_gpu_event_destroy(d->events[k]);
                gdte_gpu_stream_destroy(d->copy_stream);
                if (d->urgent_stream) gdte_gpu_stream_destroy(d->urgent_stream);
            }
            if (d->bounce_done) {
                gdte_gpu_event_synchronize(d->bounce_done);
                gdte_gpu_event_destroy(d->bounce_done);
            }
            if (d->bounce_h) gdte_gpu_host_free(d->bounce_h);
            for (int k = 0; k < d->nslabs; k++) gdte_gpu_free(d->slab[k]);
            if (i != cur) gdte_gpu_set_device(cur);
        }
    }
    for (int i = 0; i < MAX_DEVICES; i++) {
        dp_range_t *r, *tmp;
        LL_FOREACH_SAFE(devices[i].free_list, r, tmp) {
            LL_DELETE(devices[i].free_list, r);
            free(r);
        }
    }
    memset(devices, 0, sizeof devices);
    pthread_mutex_unlock(&lock);
    /* The kernels layer's other cache: addresses may mean something else after a new init. */
    gdte_memquery_reset();
}

GDTE_API gdte_status_t gdte_type_prepare_device(gdte_type_h type)
{
    gdte_type_info_t in;
    gdte_status_t st = gdte_type_get_info(type, &in);
    if (st != GDTE_OK) return st;
    if (!in.committed) return GDTE_ERR_NOT_COMMITTED;
    if (!gdte_gpu_available()) return GDTE_ERR_NO_DEVICE;
    /* Regular layouts travel as kernel arguments: nothing to upload. */
    if (in.layout != GDTE_LAYOUT_UNITS) return GDTE_OK;
    const gdte_unit_t *du;
    return gdte_devplan_units(type, &du);
}
