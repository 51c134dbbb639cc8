/*
 * The public pack API on a device (label gpu; skips with 77 without one): gdte_pack/gdte_unpack
 * on every pairing of device, pinned and pageable buffers (kernels, zero copy, staging), whole
 * and in out-of-order fragments, blocking and async on a stream, checked against the host
 * executor (GDTE_PACK_FLAG_HOST on host copies); the memory-kind cache; the device plan cache
 * (hits, uploads, LRU eviction under GDTE_CACHE_MAX, the pipelined first upload of a large
 * plan, gdte_type_prepare_device); error mapping of the GPU layer.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gdte.h"
#include "gpu/gpu.h"
#include "engine/engine.h"
#include "kernels/devplan.h"
#include "kernels/memquery.h"
#include "randtype.h"

#define GUARD 64
static int fails;
static uint64_t seed;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fails++;                                                                               \
            printf("FAIL %s:%d (seed 0x%llx): ", __FILE__, __LINE__, (unsigned long long)seed);     \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)
#define OK(call)                                                                                   \
    do {                                                                                           \
        gdte_status_t st_ = (call);                                                                \
        if (st_ != GDTE_OK) {                                                                      \
            printf("FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, gdte_status_name(st_),  \
                   gdte_gpu_last_error());                                                         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef enum { K_DEV, K_PINNED, K_HOST } kind_t;
static const char *kname[] = {"device", "pinned", "pageable"};

static void *balloc(kind_t k, size_t n)
{
    void *p = NULL;
    if (k == K_DEV) OK(gdte_gpu_malloc(&p, n));
    if (k == K_PINNED) OK(gdte_gpu_host_alloc(&p, n, 1));
    if (k == K_HOST && !(p = malloc(n))) exit(1);
    return p;
}
static void bfree(kind_t k, void *p)
{
    if (k == K_DEV) OK(gdte_gpu_free(p));
    if (k == K_PINNED) OK(gdte_gpu_host_free(p));
    if (k == K_HOST) free(p);
}
static void bput(kind_t k, void *d, const void *s, size_t n)
{
    if (k == K_DEV)
        OK(gdte_gpu_memcpy(d, s, n));
    else
        memcpy(d, s, n);
}
static void bget(kind_t k, void *d, const void *s, size_t n)
{
    if (k == K_DEV)
        OK(gdte_gpu_memcpy(d, s, n));
    else
        memcpy(d, s, n);
}
static void fill(rt_rng_t *r, unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rt_next(r);
}
static int64_t first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (int64_t)i;
    return -1;
}

static gdte_pack_params_t range(int64_t off, int64_t len, gdte_stream_t s, uint64_t flags)
{
    gdte_pack_params_t p;
    memset(&p, 0, sizeof p);
    p.field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES | GDTE_PACK_FIELD_FLAGS;
    p.offset = off;
    p.max_bytes = len;
    p.flags = flags;
    if (s) {
        p.field_mask |= GDTE_PACK_FIELD_STREAM;
        p.stream = s;
    }
    return p;
}

/* Up to five fragments of [0, n) in shuffled order. */
static int cut(rt_rng_t *r, int64_t n, int64_t *offs, int64_t *lens)
{
    int k = 1 + (int)rt_below(r, 5);
    int64_t at = 0;
    int m = 0;
    for (int i = 0; i < k && at < n; i++) {
        int64_t len = i == k - 1 ? n - at : 1 + rt_below(r, n - at);
        offs[m] = at;
        lens[m++] = len;
        at += len;
    }
    if (at < n) {
        offs[m] = at;
        lens[m++] = n - at;
    }
    for (int i = m - 1; i > 0; i--) {
        int j = (int)rt_below(r, i + 1);
        int64_t t = offs[i];
        offs[i] = offs[j];
        offs[j] = t;
        t = lens[i];
        lens[i] = lens[j];
        lens[j] = t;
    }
    return m;
}

/* gdte_pack and gdte_unpack of `count` x `t` with the user buffer of kind ku and the packed one
 * of kind kp, against the host executor. */
static void api_check(gdte_type_h t, int64_t count, kind_t ku, kind_t kp, gdte_stream_t stream, rt_rng_t *r,
                      const char *desc)
{
    gdte_type_info_t in;
    OK(gdte_type_get_info(t, &in));
    int64_t n;
    OK(gdte_type_pack_size(count, t, &n));
    if (n == 0) return;
    int64_t last = (count - 1) * in.extent;
    int64_t lo_off = (last < 0 ? last : 0) + in.true_lb;
    int64_t hi_off = (last > 0 ? last : 0) + in.true_lb + in.true_extent;
    size_t ub = (size_t)(hi_off - lo_off) + 2 * GUARD;
    unsigned char *uh = malloc(ub), *ue = malloc(ub), *ug = malloc(ub), *cov = calloc(1, ub);
    unsigned char *ref = malloc((size_t)n), *pg = malloc((size_t)n), *ones = malloc((size_t)n);
    if (!uh || !ue || !ug || !cov || !ref || !pg || !ones) exit(1);
    uint64_t async = stream ? GDTE_PACK_FLAG_ASYNC : 0;
    gdte_pack_params_t hp = range(0, n, NULL, GDTE_PACK_FLAG_HOST);
    int64_t done;
    fill(r, uh, ub);
    OK(gdte_pack(uh + GUARD - lo_off, count, t, ref, n, &hp, &done));
    memset(ones, 0xff, (size_t)n);
    OK(gdte_unpack(ones, n, cov + GUARD - lo_off, count, t, &hp, &done));
    int64_t covered = 0;
    for (size_t i = 0; i < ub; i++) covered += cov[i] != 0;

    unsigned char *ubuf = balloc(ku, ub), *pbuf = balloc(kp, (size_t)n);
    char *user = (char *)ubuf + GUARD - lo_off;
    bput(ku, ubuf, uh, ub);
    /* whole */
    fill(r, pg, (size_t)n);
    bput(kp, pbuf, pg, (size_t)n);
    gdte_pack_params_t p = range(0, n, stream, async);
    gdte_status_t st = gdte_pack(user, count, t, pbuf, n, &p, &done);
    if (stream) OK(gdte_gpu_stream_synchronize(stream));
    bget(kp, pg, pbuf, (size_t)n);
    int64_t d = first_diff(pg, ref, (size_t)n);
    EXPECT(st == GDTE_OK && done == n && d < 0, "pack %s->%s%s: %s done=%lld diff at %lld: %s", kname[ku], kname[kp],
           stream ? " async" : "", gdte_status_name(st), (long long)done, (long long)d, desc);
    /* fragments, out of order */
    int64_t offs[8], lens[8];
    int k = cut(r, n, offs, lens);
    fill(r, pg, (size_t)n);
    bput(kp, pbuf, pg, (size_t)n);
    for (int i = 0; i < k; i++) {
        p = range(offs[i], lens[i], stream, async);
        st = gdte_pack(user, count, t, pbuf + offs[i], lens[i], &p, &done);
        EXPECT(st == GDTE_OK && done == lens[i], "fragment pack: %s", gdte_status_name(st));
    }
    if (stream) OK(gdte_gpu_stream_synchronize(stream));
    bget(kp, pg, pbuf, (size_t)n);
    d = first_diff(pg, ref, (size_t)n);
    EXPECT(d < 0, "fragmented pack %s->%s: diff at %lld: %s", kname[ku], kname[kp], (long long)d, desc);

    if (covered == n) { /* overlap-free: unpack is defined */
        for (int pass = 0; pass < 2; pass++) {
            fill(r, ue, ub);
            bput(ku, ubuf, ue, ub);
            bput(kp, pbuf, ref, (size_t)n);
            if (pass == 0) {
                p = range(0, n, stream, async);
                st = gdte_unpack(pbuf, n, user, count, t, &p, &done);
                EXPECT(st == GDTE_OK && done == n, "unpack: %s", gdte_status_name(st));
            } else {
                k = cut(r, n, offs, lens);
                for (int i = 0; i < k; i++) {
                    p = range(offs[i], lens[i], stream, async);
                    st = gdte_unpack(pbuf + offs[i], lens[i], user, count, t, &p, &done);
                    EXPECT(st == GDTE_OK && done == lens[i], "fragment unpack: %s", gdte_status_name(st));
                }
            }
            if (stream) OK(gdte_gpu_stream_synchronize(stream));
            bget(ku, ug, ubuf, ub);
            OK(gdte_unpack(ref, n, ue + GUARD - lo_off, count, t, &hp, &done));
            d = first_diff(ug, ue, ub);
            EXPECT(d < 0, "%sunpack %s<-%s%s: diff at user byte %lld: %s", pass ? "fragmented " : "", kname[ku],
                   kname[kp], stream ? " async" : "", (long long)(d - GUARD + lo_off), desc);
        }
    }
    bfree(ku, ubuf);
    bfree(kp, pbuf);
    free(uh);
    free(ue);
    free(ug);
    free(cov);
    free(ref);
    free(pg);
    free(ones);
}

static void test_mem_query(void)
{
    gdte_mem_info_t mi;
    int64_t h0, m0, h1, m1;
    int nr;
    char *d;
    OK(gdte_gpu_malloc((void **)&d, 1 << 20));
    gdte_memquery_stats(&h0, &m0, &nr);
    OK(gdte_mem_query(d + 1000, &mi));
    EXPECT(mi.kind == GDTE_MEM_DEVICE && mi.device == gdte_gpu_current_device(), "device memory: kind %d dev %d",
           mi.kind, mi.device);
    OK(gdte_mem_query(d + 700000, &mi));
    EXPECT(mi.kind == GDTE_MEM_DEVICE, "device memory (interior)");
    gdte_memquery_stats(&h1, &m1, &nr);
    EXPECT(h1 - h0 >= 1 && m1 - m0 == 1, "second query of one allocation should hit the cache: hits %lld misses %lld",
           (long long)(h1 - h0), (long long)(m1 - m0));
    OK(gdte_gpu_free(d));
    gdte_memquery_forget(d, 1 << 20);

    /* The application frees device memory behind gdte's back (the runtime's own cudaFree, which
     * gdte never sees) and the addresses are then host memory: the cached range must not answer
     * "device" any more (an outside program's host MPI_Pack was run by a kernel that way). */
    int (*app_free)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaFree");
    if (app_free) {
        OK(gdte_gpu_malloc((void **)&d, 1 << 20));
        OK(gdte_mem_query(d + 64, &mi));
        EXPECT(mi.kind == GDTE_MEM_DEVICE, "device memory before the application's free: kind %d", mi.kind);
        EXPECT(app_free(d) == 0, "cudaFree");
        /* Host memory at the same addresses when the system lets us map there. */
        void *h2 = mmap(d, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        int remapped = h2 == (void *)d;
        if (h2 != MAP_FAILED && !remapped) munmap(h2, 1 << 20);
        OK(gdte_mem_query(d + 64, &mi));
        EXPECT(mi.kind != GDTE_MEM_DEVICE, "memory freed by the application (%s) still taken for device memory",
               remapped ? "now host memory at the same address" : "address not remapped");
        printf("mem_query after an application free: kind %d (host memory mapped there: %s), stale ranges dropped "
               "%lld\n", mi.kind, remapped ? "yes" : "no", (long long)gdte_memquery_stale());
        if (remapped) munmap(d, 1 << 20);
    } else {
        printf("mem_query after an application free: cudaFree not reachable with dlsym, not checked\n");
    }

    char *h = malloc(1 << 16);
    OK(gdte_mem_query(h, &mi));
    EXPECT(mi.kind == GDTE_MEM_HOST && mi.device == -1, "malloc memory: kind %d", mi.kind);
    /* Pageable answers are cached by page: the second query of the page is a hit. */
    gdte_memquery_stats(&h0, &m0, &nr);
    OK(gdte_mem_query(h + 8, &mi));
    gdte_memquery_stats(&h1, &m1, &nr);
    EXPECT(mi.kind == GDTE_MEM_HOST && h1 - h0 == 1 && m1 == m0,
           "second query of a pageable page should hit: kind %d hits %lld misses %lld", mi.kind,
           (long long)(h1 - h0), (long long)(m1 - m0));
    /* ... and gdte's own registration drops it: registering is seen at once, and unregistering. */
    OK(gdte_gpu_host_register(h, 1 << 16));
    OK(gdte_mem_query(h + 10, &mi));
    EXPECT(mi.kind == GDTE_MEM_PINNED, "registered memory: kind %d", mi.kind);
    OK(gdte_gpu_host_unregister(h));
    OK(gdte_mem_query(h + 10, &mi));
    EXPECT(mi.kind == GDTE_MEM_HOST, "unregistered memory: kind %d", mi.kind);
    /* Pinned answers are never cached (the application may unregister behind gdte's back). */
    OK(gdte_gpu_host_register(h, 1 << 16));
    OK(gdte_mem_query(h, &mi));
    gdte_memquery_stats(&h0, &m0, &nr);
    OK(gdte_mem_query(h, &mi));
    gdte_memquery_stats(&h1, &m1, &nr);
    EXPECT(mi.kind == GDTE_MEM_PINNED && m1 - m0 == 1, "pinned answers are asked each time: kind %d misses %lld",
           mi.kind, (long long)(m1 - m0));
    OK(gdte_gpu_host_unregister(h));
    free(h);
    void *pin;
    OK(gdte_gpu_host_alloc(&pin, 4096, 1));
    OK(gdte_mem_query(pin, &mi));
    EXPECT(mi.kind == GDTE_MEM_PINNED, "pinned memory: kind %d", mi.kind);
    OK(gdte_gpu_host_free(pin));
}

/* A UNITS type whose plan is about `bytes` of units: `nb` irregular 16-byte blocks. */
static gdte_type_h many_blocks(int64_t nb, uint64_t salt)
{
    int64_t *d = malloc((size_t)nb * sizeof *d);
    rt_rng_t r = {salt};
    int64_t at = 0;
    for (int64_t i = 0; i < nb; i++) {
        at += 1 + rt_below(&r, 3);
        d[i] = at;
        at += 2;
    }
    gdte_type_h t;
    OK(gdte_type_create_indexed_block(nb, 2, d, gdte_type_predefined(GDTE_BASIC_DOUBLE), &t));
    OK(gdte_type_commit(t));
    free(d);
    return t;
}

static void test_devplan(rt_rng_t *r)
{
    gdte_devplan_stats_t a, b;
    char desc[256];
    gdte_type_h tri = rt_shape_type(RT_SHAPE_TRIANGLE, 300, desc, sizeof desc);
    gdte_devplan_get_stats(&a);
    api_check(tri, 1, K_DEV, K_DEV, NULL, r, desc);
    gdte_devplan_get_stats(&b);
    EXPECT(b.uploads == a.uploads + 1 && b.misses == a.misses + 1 && b.hits > a.hits,
           "first use uploads once, then hits: uploads %lld->%lld misses %lld->%lld hits %lld->%lld",
           (long long)a.uploads, (long long)b.uploads, (long long)a.misses, (long long)b.misses, (long long)a.hits,
           (long long)b.hits);
    gdte_type_free(&tri);
    gdte_devplan_get_stats(&a);
    EXPECT(a.bytes < b.bytes && a.entries == b.entries - 1, "freeing a type drops its device plan");

    /* prepare_device uploads ahead; the first pack then hits */
    gdte_type_h tri2 = rt_shape_type(RT_SHAPE_TRIANGLE, 200, desc, sizeof desc);
    OK(gdte_type_prepare_device(tri2));
    gdte_devplan_get_stats(&a);
    api_check(tri2, 1, K_DEV, K_DEV, NULL, r, desc);
    gdte_devplan_get_stats(&b);
    EXPECT(b.misses == a.misses && b.uploads == a.uploads, "prepared plan missed the cache");
    gdte_type_free(&tri2);

    /* A plan with long pieces goes up as runs and is cut on the device (first use by gdte_pack);
     * the device's units must then be the host's, byte for byte. */
    gdte_type_h li = rt_shape_type(RT_SHAPE_LONGIDX, 40, desc, sizeof desc);
    {
        const gdte_run_t *hr;
        const gdte_unit_t *hu, *du;
        int64_t nr, us, nu;
        EXPECT(gdte_engine_runs(li, &hr, &nr, &us) == GDTE_OK, "long pieces should keep runs");
        OK(gdte_engine_units(li, &hu, &nu));
        gdte_devplan_get_stats(&a);
        api_check(li, 2, K_DEV, K_DEV, NULL, r, desc);
        OK(gdte_devplan_units(li, &du));
        gdte_devplan_get_stats(&b);
        EXPECT(b.uploads == a.uploads + 1, "one upload for the compact plan");
        unsigned char *got = malloc((size_t)nu * sizeof *hu);
        bget(K_DEV, got, du, (size_t)nu * sizeof *hu);
        EXPECT(!memcmp(got, hu, (size_t)nu * sizeof *hu), "units cut on the device differ from the host's");
        free(got);
    }
    gdte_type_free(&li);

    /* Large plans (>= 1 MiB of units: pipelined first upload), first used by a fragment in the
     * middle, then whole; GDTE_CACHE_MAX (set to 3 MiB by main) forces evictions among them. */
    gdte_type_h big[4];
    for (int i = 0; i < 4; i++) {
        big[i] = many_blocks(60000, seed + (uint64_t)i);
        gdte_type_info_t in;
        OK(gdte_type_get_info(big[i], &in));
        EXPECT(in.layout == GDTE_LAYOUT_UNITS && in.num_units * 24 >= (1 << 20), "big plan: %lld units",
               (long long)in.num_units);
        int64_t n;
        OK(gdte_type_pack_size(1, big[i], &n));
        char *u, *pk;
        size_t ub = (size_t)(in.true_lb + in.true_extent);
        OK(gdte_gpu_malloc((void **)&u, ub));
        OK(gdte_gpu_malloc((void **)&pk, (size_t)n));
        unsigned char *uh = malloc(ub), *ref = malloc((size_t)n), *got = malloc((size_t)n);
        fill(r, uh, ub);
        bput(K_DEV, u, uh, ub);
        gdte_pack_params_t hp = range(0, n, NULL, GDTE_PACK_FLAG_HOST);
        int64_t done;
        OK(gdte_pack(uh, 1, big[i], ref, n, &hp, &done));
        memset(got, 0, (size_t)n);
        bput(K_DEV, pk, got, (size_t)n);
        int64_t off = n / 3 + 5, len = n / 3;
        gdte_pack_params_t p = range(off, len, NULL, 0);
        OK(gdte_pack(u, 1, big[i], pk + off, len, &p, &done)); /* first use: a middle fragment */
        p = range(0, off, NULL, 0);
        OK(gdte_pack(u, 1, big[i], pk, off, &p, &done));
        p = range(off + len, n - off - len, NULL, 0);
        OK(gdte_pack(u, 1, big[i], pk + off + len, n - off - len, &p, &done));
        bget(K_DEV, got, pk, (size_t)n);
        int64_t d = first_diff(got, ref, (size_t)n);
        EXPECT(d < 0, "big plan %d, first use by fragments: diff at %lld", i, (long long)d);
        OK(gdte_gpu_free(u));
        OK(gdte_gpu_free(pk));
        free(uh);
        free(ref);
        free(got);
    }
    gdte_devplan_get_stats(&b);
    EXPECT(b.evictions > 0 && b.bytes <= 3 * (1 << 20) + 2 * (1 << 20),
           "cache limit: evictions %lld, bytes %lld", (long long)b.evictions, (long long)b.bytes);
    /* an evicted plan comes back, correctly */
    api_check(big[0], 1, K_DEV, K_DEV, NULL, r, "big plan 0 after eviction");
    for (int i = 0; i < 4; i++) gdte_type_free(&big[i]);
    gdte_devplan_get_stats(&b);
    EXPECT(b.entries == 0 && b.bytes == 0, "all plans freed: %lld entries, %lld bytes", (long long)b.entries,
           (long long)b.bytes);
}

int main(void)
{
    /* Small enough that the large plans below evict each other. */
    setenv("GDTE_CACHE_MAX", "3m", 1);
    OK(gdte_init(NULL));
    if (!gdte_gpu_available()) {
        printf("SKIP: no usable GPU (%s)\n", gdte_gpu_last_error());
        gdte_finalize();
        return 77;
    }
    const char *e = getenv("GDTETEST_SEED");
    seed = e && *e ? strtoull(e, NULL, 0) : 0x9e3779b9ull;
    const char *it = getenv("GDTETEST_ITERS");
    int iters = it && atoi(it) > 0 ? atoi(it) : 60;
    printf("gpu api: seed 0x%llx (GDTETEST_SEED to repeat), %d random types\n", (unsigned long long)seed, iters);
    rt_rng_t r = {seed};

    /* error mapping: an impossible allocation is "out of device memory", logged once (not
     * under compute-sanitizer, which counts the failed call as an error) */
    void *p = NULL;
    if (!getenv("GDTETEST_UNDER_SANITIZER"))
        EXPECT(gdte_gpu_malloc(&p, (size_t)1 << 52) == GDTE_ERR_NO_DEVICE_MEMORY, "huge allocation");

    test_mem_query();

    /* Host execution forced on device memory: refused with GDTE_ERR_MEMORY_KIND, nothing
     * touched, and the library keeps working. */
    {
        gdte_type_h v;
        OK(gdte_type_create_vector(64, 2, 3, gdte_type_predefined(GDTE_BASIC_DOUBLE), &v));
        OK(gdte_type_commit(v));
        void *dbuf = NULL;
        double hbuf[128], hsrc[192];
        for (int i = 0; i < 192; i++) hsrc[i] = i;
        OK(gdte_gpu_malloc(&dbuf, 192 * sizeof(double)));
        memset(hbuf, 0x5a, sizeof hbuf);
        gdte_pack_params_t hp = {.field_mask = GDTE_PACK_FIELD_FLAGS, .flags = GDTE_PACK_FLAG_HOST};
        int64_t done = -7;
        EXPECT(gdte_pack(dbuf, 1, v, hbuf, sizeof hbuf, &hp, &done) == GDTE_ERR_MEMORY_KIND && done == -7,
               "host pack of device memory must be refused");
        EXPECT(gdte_unpack(hbuf, sizeof hbuf, dbuf, 1, v, &hp, &done) == GDTE_ERR_MEMORY_KIND && done == -7,
               "host unpack into device memory must be refused");
        unsigned char c = 0x5a;
        for (size_t i = 0; i < sizeof hbuf; i++) EXPECT(((unsigned char *)hbuf)[i] == c, "output touched");
        OK(gdte_pack(hsrc, 1, v, hbuf, sizeof hbuf, &hp, &done)); /* still works on host memory */
        EXPECT(done == 128 * (int64_t)sizeof(double) && hbuf[2] == 3.0, "host pack after the refusal");
        OK(gdte_gpu_free(dbuf));
        gdte_type_free(&v);
    }

    gdte_stream_t s;
    OK(gdte_gpu_stream_create(&s));
    static const kind_t pairs[][2] = {{K_DEV, K_DEV},    {K_DEV, K_PINNED},  {K_DEV, K_HOST},
                                      {K_HOST, K_DEV},   {K_PINNED, K_DEV}};
    for (int shp = 0; shp < RT_SHAPE_COUNT_; shp++) {
        char desc[256];
        gdte_type_h t = rt_shape_type((rt_shape_t)shp, shp == RT_SHAPE_FACE_X ? 24 : 150, desc, sizeof desc);
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) api_check(t, 3, pairs[k][0], pairs[k][1], NULL, &r, desc);
        api_check(t, 3, K_DEV, K_DEV, s, &r, desc);
        gdte_type_free(&t);
    }
    for (int i = 0; i < iters; i++) {
        char desc[4096];
        uint64_t ts = rt_next(&r);
        rt_rng_t tr = {ts};
        gdte_type_h t = rt_random_type(&tr, 8192, desc, sizeof desc);
        if (!t) continue;
        int k = (int)rt_below(&tr, 5);
        int64_t count = 1 + rt_below(&tr, 40);
        api_check(t, count, pairs[k][0], pairs[k][1], rt_below(&tr, 3) == 0 ? s : NULL, &tr, desc);
        gdte_type_free(&t);
    }
    OK(gdte_gpu_stream_destroy(s));

    test_devplan(&r);
    printf("%s\n", fails ? "FAILED" : "PASSED");
    OK(gdte_finalize());
    return fails ? 1 : 0;
}
