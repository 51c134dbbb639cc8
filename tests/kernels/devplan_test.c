/*
 * The device plan cache (src/kernels/devplan.c) on a machine without a GPU: the GPU layer is
 * replaced by host memory (the stubs below), so the cache's own bookkeeping runs for real:
 *  - least recently used plans go first under GDTE_CACHE_MAX, a hit makes a plan the newest,
 *    a pinned plan is never evicted, a freed type drops its plans;
 *  - the slab's free list merges a freed range with its free neighbours (a plan as large as
 *    five freed neighbours fits again without a new slab);
 *  - uploaded units equal the engine's, and a first use of a large plan (uploaded in chunks)
 *    packs what the host executor packs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "devplan.h"
#include "memquery.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "util/util.h"
#include "check.h"

/* ---- the GPU layer, on host memory ---- */
static int64_t mallocs, execs;
int gdte_gpu_available(void) { return 1; }
int gdte_gpu_current_device(void) { return 0; }
gdte_status_t gdte_gpu_set_device(int device) { return device == 0 ? GDTE_OK : GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_malloc(void **ptr_p, size_t size)
{
    mallocs++;
    return (*ptr_p = malloc(size)) ? GDTE_OK : GDTE_ERR_NO_DEVICE_MEMORY;
}
gdte_status_t gdte_gpu_free(void *ptr)
{
    free(ptr);
    return GDTE_OK;
}
static int64_t bounce_copies; /* copies out of the bounce buffer (GDTE_DEVPLAN_DMA_RUNS) */
static char *bounce_mem;
static size_t bounce_size;
gdte_status_t gdte_gpu_memcpy_async(void *dst, const void *src, size_t size, gdte_stream_t s)
{
    (void)s;
    if (bounce_mem && (const char *)src >= bounce_mem && (const char *)src + size <= bounce_mem + bounce_size)
        bounce_copies++;
    memcpy(dst, src, size);
    return GDTE_OK;
}
gdte_status_t gdte_gpu_stream_create(gdte_stream_t *s_p) { return (*s_p = malloc(1)) ? GDTE_OK : GDTE_ERR_NO_MEMORY; }
gdte_status_t gdte_gpu_stream_create_urgent(gdte_stream_t *s_p) { return gdte_gpu_stream_create(s_p); }
gdte_status_t gdte_gpu_stream_destroy(gdte_stream_t s)
{
    free(s);
    return GDTE_OK;
}
gdte_status_t gdte_gpu_stream_synchronize(gdte_stream_t s) { return (void)s, GDTE_OK; }
gdte_status_t gdte_gpu_event_create(gdte_gpu_event_t *e_p, int timing)
{
    (void)timing;
    return (*e_p = malloc(1)) ? GDTE_OK : GDTE_ERR_NO_MEMORY;
}
gdte_status_t gdte_gpu_event_destroy(gdte_gpu_event_t e)
{
    free(e);
    return GDTE_OK;
}
gdte_status_t gdte_gpu_event_record(gdte_gpu_event_t e, gdte_stream_t s) { return (void)e, (void)s, GDTE_OK; }
gdte_status_t gdte_gpu_event_query(gdte_gpu_event_t e) { return (void)e, GDTE_OK; }
gdte_status_t gdte_gpu_event_synchronize(gdte_gpu_event_t e) { return (void)e, GDTE_OK; }
gdte_status_t gdte_gpu_stream_wait_event(gdte_stream_t s, gdte_gpu_event_t e) { return (void)s, (void)e, GDTE_OK; }
gdte_status_t gdte_gpu_device_synchronize(void) { return GDTE_OK; }
/* Pinned mapped memory (the runs' bounce buffer): plain memory here, refused while bounce_off. */
static int bounce_off;
gdte_status_t gdte_gpu_host_alloc(void **ptr_p, size_t size, int mapped)
{
    if (bounce_off || !mapped) return GDTE_ERR_NO_MEMORY;
    if (!(*ptr_p = malloc(size))) return GDTE_ERR_NO_MEMORY;
    bounce_mem = *ptr_p;
    bounce_size = size;
    return GDTE_OK;
}
gdte_status_t gdte_gpu_host_free(void *ptr)
{
    if (ptr == bounce_mem) bounce_mem = NULL;
    free(ptr);
    return GDTE_OK;
}
gdte_status_t gdte_gpu_host_device_pointer(void *host, void **dev_p)
{
    *dev_p = host;
    return GDTE_OK;
}
/* A chunked first use calls this once per uploaded chunk of units; the copies are synchronous
 * here, so running the whole range at the last chunk reads only uploaded units. Each chunk's
 * units must be in place when its call comes (cut from runs already, where they come as runs),
 * and the chunks must follow one another from unit 0. */
static const gdte_unit_t *expect_units; /* the engine's units of the type in test, or NULL */
static int64_t next_unit, chunk_calls, chunk_errors, bounce_reads, other_reads;
gdte_status_t gdte_gpu_exec_ex(const gdte_layout_t *L, const gdte_gpu_exec_opts_t *o, gdte_dir_t dir, void *user,
                               void *packed, int64_t offset, int64_t len, gdte_stream_t stream)
{
    (void)stream;
    if (o && o->unit_hi > o->unit_lo) {
        chunk_calls++;
        if (o->unit_lo != next_unit) chunk_errors++;
        if (expect_units && memcmp(L->units + o->unit_lo, expect_units + o->unit_lo,
                                   (size_t)(o->unit_hi - o->unit_lo) * sizeof *L->units))
            chunk_errors++;
        next_unit = o->unit_hi;
    }
    if (o && o->unit_hi > o->unit_lo && o->unit_hi < L->nunits) return GDTE_OK;
    next_unit = 0;
    gdte_host_exec(L, dir, user, packed, offset, len);
    execs++;
    return GDTE_OK;
}
gdte_status_t gdte_gpu_expand_units(const gdte_run_t *runs, int64_t nruns, int64_t unit_size, gdte_unit_t *units,
                                    gdte_stream_t stream)
{
    (void)stream;
    if (bounce_mem && (const char *)runs >= bounce_mem && (const char *)(runs + nruns) <= bounce_mem + bounce_size)
        bounce_reads++;
    else
        other_reads++;
    for (int64_t i = 0; i < nruns; i++)
        for (int64_t k = 0; k < gdte_run_nunits(&runs[i], unit_size); k++)
            units[runs[i].first_unit + k] = gdte_run_unit(&runs[i], k, unit_size);
    return GDTE_OK;
}
void gdte_memquery_reset(void) {}

/* `nblocks` doubles at irregular distances (8, 16 or 24 bytes apart): nothing merges, one
 * 24-byte unit per block. */
static gdte_type_h irregular(int64_t nblocks, unsigned salt)
{
    int64_t *bl = malloc((size_t)nblocks * sizeof *bl), *dp = malloc((size_t)nblocks * sizeof *dp);
    if (!bl || !dp) exit(2);
    int64_t at = 0;
    for (int64_t i = 0; i < nblocks; i++) {
        bl[i] = 1;
        dp[i] = at;
        at += 16 + 8 * (int64_t)(((uint64_t)i * 2654435761u + salt) >> 7 & 1) +
              8 * (int64_t)(((uint64_t)i * 40503u + salt) >> 5 & 1);
    }
    gdte_type_h t;
    OK(gdte_type_create_hindexed(nblocks, bl, dp, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t));
    OK(gdte_type_commit(t));
    free(bl);
    free(dp);
    return t;
}

static gdte_devplan_stats_t stats(void)
{
    gdte_devplan_stats_t s;
    gdte_devplan_get_stats(&s);
    return s;
}

/* Fetch the device units of `t`; 1 when that was a cache hit. Checks them against the host's. */
static int fetch(gdte_type_h t)
{
    int64_t m0 = stats().misses;
    const gdte_unit_t *du, *hu;
    int64_t n;
    OK(gdte_devplan_units(t, &du));
    OK(gdte_engine_units(t, &hu, &n));
    CHECK(!memcmp(du, hu, (size_t)n * sizeof *hu), "device units differ from the engine's");
    return stats().misses == m0;
}

static void test_lru(void)
{
    /* 1000 units of 24 bytes: 24,064 pool bytes a plan; the limit holds four. */
    setenv("GDTE_CACHE_MAX", "100000", 1);
    gdte_knobs_reset();
    OK(gdte_knobs_load());
    gdte_type_h t[8];
    for (int i = 0; i < 8; i++) t[i] = irregular(1000, (unsigned)i);
    gdte_type_info_t in;
    OK(gdte_type_get_info(t[0], &in));
    CHECK(in.layout == GDTE_LAYOUT_UNITS && in.num_units == 1000, "expected 1000 units, got layout %d, %lld units",
          (int)in.layout, (long long)in.num_units);
    for (int i = 0; i < 4; i++) CHECK(!fetch(t[i]), "first fetch of plan %d must upload", i);
    gdte_devplan_stats_t s = stats();
    CHECK(s.entries == 4 && s.evictions == 0 && s.uploads == 4, "4 plans under the limit: %lld entries, %lld evictions",
          (long long)s.entries, (long long)s.evictions);
    CHECK(fetch(t[0]), "plan 0 must hit"); /* 0 is now the newest: 0 3 2 1 */
    CHECK(!fetch(t[4]), "plan 4 must upload"); /* evicts 1: 4 0 3 2 */
    s = stats();
    CHECK(s.entries == 4 && s.evictions == 1 && s.bytes <= 100000, "one eviction: %lld entries, %lld evictions, %lld bytes",
          (long long)s.entries, (long long)s.evictions, (long long)s.bytes);
    CHECK(fetch(t[0]) && fetch(t[3]) && fetch(t[2]), "recent plans must stay"); /* 2 3 0 4 */
    CHECK(!fetch(t[1]), "the least recently used plan (1) must have been evicted"); /* evicts 4: 1 2 3 0 */
    CHECK(!fetch(t[4]), "plan 4 was the oldest"); /* evicts 0: 4 1 2 3 */

    /* A pinned plan stays even when it is the oldest. */
    const gdte_unit_t *du;
    OK(gdte_devplan_pin(t[3], &du)); /* 3 4 1 2 */
    CHECK(!fetch(t[5]) && !fetch(t[6]), "plans 5 and 6 must upload"); /* evict 2, 1: 6 5 3 4 */
    CHECK(fetch(t[3]), "the pinned plan was evicted");                  /* 3 6 5 4 */
    CHECK(!fetch(t[7]), "plan 7 must upload");                          /* evicts 4: 7 3 6 5 */
    CHECK(!fetch(t[4]), "plan 4 must be gone");                         /* evicts 5: 4 7 3 6 */
    gdte_devplan_unpin(t[3], 0);

    int64_t bytes = stats().bytes, entries = stats().entries;
    gdte_type_free(&t[7]);
    s = stats();
    CHECK(s.entries == entries - 1 && s.bytes < bytes, "freeing a type must drop its plan");
    for (int i = 0; i < 8; i++)
        if (t[i]) gdte_type_free(&t[i]);
    s = stats();
    CHECK(s.entries == 0 && s.bytes == 0, "every plan must go with its type: %lld entries, %lld bytes",
          (long long)s.entries, (long long)s.bytes);
    CHECK(mallocs == 1, "small plans must share one slab: %lld slabs", (long long)mallocs);
}

static void test_coalesce(void)
{
    setenv("GDTE_CACHE_MAX", "0", 1); /* no limit */
    gdte_knobs_reset();
    OK(gdte_knobs_load());
    /* 174,762 units are 4 MiB (to 16 bytes): eight fill the 32 MiB slab exactly, which the
     * plans above left as one free range again. */
    int64_t m0 = mallocs;
    gdte_type_h t[8];
    for (int i = 0; i < 8; i++) {
        t[i] = irregular(174762, 100u + (unsigned)i);
        CHECK(!fetch(t[i]), "plan %d must upload", i);
    }
    CHECK(mallocs == m0, "eight 4 MiB plans must fill the freed slab: %lld new slabs", (long long)(mallocs - m0));
    /* Free 1, 3, 5, then 2 and 4: each later range touches free ones on both sides. */
    gdte_type_free(&t[1]);
    gdte_type_free(&t[3]);
    gdte_type_free(&t[5]);
    gdte_type_free(&t[2]);
    gdte_type_free(&t[4]);
    /* 20 MiB: fits only where the five freed ranges became one. */
    gdte_type_h big = irregular(5 * 174762 + 3, 7u);
    CHECK(!fetch(big), "the 20 MiB plan must upload");
    CHECK(mallocs == m0, "freed neighbours were not merged: a new slab was allocated");
    gdte_type_free(&big);
    for (int i = 0; i < 8; i++)
        if (t[i]) gdte_type_free(&t[i]);
}

static void test_first_use(void)
{
    /* >= 1 MiB of units: the first pack uploads in chunks and packs at the last one. */
    gdte_type_h t = irregular(60000, 11u);
    gdte_layout_t L, H;
    OK(gdte_engine_layout(t, 2, &L));
    OK(gdte_engine_layout(t, 2, &H));
    gdte_type_info_t in;
    OK(gdte_type_get_info(t, &in));
    size_t ub = (size_t)(in.extent + in.true_lb + in.true_extent);
    char *user = malloc(ub), *got = malloc((size_t)L.total), *want = malloc((size_t)L.total);
    if (!user || !got || !want) exit(2);
    for (size_t i = 0; i < ub; i++) user[i] = (char)(i * 131 + 7);
    gdte_host_exec(&H, GDTE_DIR_PACK, user, want, 0, H.total);
    int64_t u0 = stats().uploads, e0 = execs;
    memset(got, 0, (size_t)L.total);
    OK(gdte_devplan_exec(t, &L, GDTE_DIR_PACK, user, got, 0, L.total, NULL, 0));
    CHECK(stats().uploads == u0 + 1 && execs == e0 + 1, "first use: one upload, one pack");
    CHECK(!memcmp(got, want, (size_t)L.total), "first use (chunked upload) packed wrong bytes");
    OK(gdte_engine_layout(t, 2, &L));
    memset(got, 0, (size_t)L.total);
    OK(gdte_devplan_exec(t, &L, GDTE_DIR_PACK, user, got, 0, L.total, NULL, 0));
    CHECK(stats().uploads == u0 + 1, "second use must hit");
    CHECK(!memcmp(got, want, (size_t)L.total), "second use packed wrong bytes");
    free(user);
    free(got);
    free(want);
    gdte_type_free(&t);
}

/* mode: gdte_devplan_tune's (-1: the default) */
static void test_first_use_runs(int bounce, int mode)
{
    bounce_off = !bounce;
    gdte_devplan_tune(0, 0, mode);
    const int dma = (mode < 0 ? 0 /* the default mode */ : mode) & GDTE_DEVPLAN_DMA_RUNS;
    /* Long irregular blocks: the engine keeps runs, and >= 64 KiB of them cross in chunks, each
     * cut into units before its part of the pack. 3000 blocks of 800 doubles. */
    const int64_t nb = 3000;
    int64_t *bl = malloc((size_t)nb * sizeof *bl), *dp = malloc((size_t)nb * sizeof *dp);
    if (!bl || !dp) exit(2);
    for (int64_t i = 0, at = 0; i < nb; i++) {
        bl[i] = 800;
        dp[i] = at;
        at += 800 + 1 + (i % 3);
    }
    gdte_type_h t;
    OK(gdte_type_create_indexed(nb, bl, dp, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t));
    OK(gdte_type_commit(t));
    free(bl);
    free(dp);
    const gdte_run_t *hr;
    int64_t nr = 0, us = 0, nu = 0;
    CHECK(gdte_engine_runs(t, &hr, &nr, &us) == GDTE_OK && nr * (int64_t)sizeof *hr >= 64 * 1024,
          "the test type must keep at least 64 KiB of runs (%lld runs)", (long long)nr);
    OK(gdte_engine_units(t, &expect_units, &nu));
    gdte_layout_t L, H;
    OK(gdte_engine_layout(t, 1, &L));
    OK(gdte_engine_layout(t, 1, &H));
    gdte_type_info_t in;
    OK(gdte_type_get_info(t, &in));
    size_t ub = (size_t)(in.true_lb + in.true_extent);
    char *user = malloc(ub), *got = malloc((size_t)L.total), *want = malloc((size_t)L.total);
    if (!user || !got || !want) exit(2);
    for (size_t i = 0; i < ub; i++) user[i] = (char)(i * 131 + 7);
    gdte_host_exec(&H, GDTE_DIR_PACK, user, want, 0, H.total);
    int64_t u0 = stats().uploads, e0 = execs, c0 = chunk_calls, b0 = bounce_reads, o0 = other_reads,
            k0 = bounce_copies;
    memset(got, 0, (size_t)L.total);
    OK(gdte_devplan_exec(t, &L, GDTE_DIR_PACK, user, got, 0, L.total, NULL, 0));
    CHECK(stats().uploads == u0 + 1 && execs == e0 + 1, "first use from runs: one upload, one pack");
    /* With pinned mapped memory the first cut reads its runs from the bounce buffer, and so do
     * the later ones unless DMA_RUNS has the copy engine bring theirs into device memory first
     * (one copy out of the bounce buffer per later chunk); without, every cut reads the copies
     * behind the units. */
    const int64_t nch = chunk_calls - c0, nb_ = bounce_reads - b0, no_ = other_reads - o0, nk = bounce_copies - k0;
    CHECK(bounce ? (dma ? nb_ == 1 && no_ == nch - 1 && nk == nch - 1 : nb_ == nch && no_ == 0 && nk == 0)
                 : nb_ == 0 && no_ == nch && nk == 0,
          "first use from runs (bounce %s, mode %d): %lld cut(s) from the bounce buffer, %lld from elsewhere, %lld "
          "copies out of it, %lld chunk(s)",
          bounce ? "on" : "off", mode, (long long)nb_, (long long)no_, (long long)nk, (long long)nch);
    CHECK(chunk_calls - c0 >= 2, "first use from %lld runs: %lld chunk(s), expected several", (long long)nr,
          (long long)(chunk_calls - c0));
    CHECK(!chunk_errors, "first use from runs: %lld chunk(s) out of order or run before their units were cut",
          (long long)chunk_errors);
    CHECK(!memcmp(got, want, (size_t)L.total), "first use (runs in chunks) packed wrong bytes");
    expect_units = NULL;
    free(user);
    free(got);
    free(want);
    gdte_type_free(&t);
    gdte_devplan_tune(0, 0, -1);
}

int main(void)
{
    test_lru();
    test_coalesce();
    test_first_use();
    test_first_use_runs(0, -1); /* first: once made, the bounce buffer stays */
    test_first_use_runs(1, -1);
    test_first_use_runs(1, -1); /* the bounce buffer again, after its first use */
    test_first_use_runs(1, 0);  /* every cut reading the bounce buffer */
    test_first_use_runs(1, GDTE_DEVPLAN_DMA_RUNS);
    test_first_use_runs(1, GDTE_DEVPLAN_URGENT);
    test_first_use_runs(1, GDTE_DEVPLAN_ONE_STREAM);
    test_first_use_runs(1, GDTE_DEVPLAN_ONE_STREAM | GDTE_DEVPLAN_DMA_RUNS);
    gdte_devplan_finalize();
    if (failures) {
        printf("devplan: %d failures\n", failures);
        return 1;
    }
    printf("devplan: LRU, pins, frees, range merging and chunked first use all as expected\n");
    return 0;
}
