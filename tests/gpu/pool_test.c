/*
 * The staging pool (src/gpu/pool.h), alone, without a device (DEVICE kind through fake device
 * memory; real device memory only where a GPU is present):
 *   - random get/put sequences on the interposer's configuration (SOFT, GUARDED, one share,
 *     bounded retention) and the protocols' (HARD, PLAIN, three shares, unbounded), checked
 *     after every step against a model of the policy that counts buffers per list: outcome
 *     (reuse, allocation, overflow, GDTE_INPROGRESS, too large), stats, room per share;
 *   - every buffer: power-of-two size >= the request, page-aligned, writable to its last byte,
 *     its bytes intact until it is put back (no two live buffers overlap);
 *   - the guard page after GUARDED host and fake device buffers (a child process writes one
 *     byte past the end and must die of SIGSEGV);
 *   - charges against a share, an allocation failure rolled back (GDTE_FAULT_STAGING_OOM and a
 *     real device kind without a GPU), destroy with a buffer still out;
 *   - eight threads on one pool of each limit: counters consistent, nothing left in use, a HARD
 *     share never over its budget.
 * GDTETEST_SEED=<n> replays another sequence; GDTETEST_POOL_STEPS=<n> sets its length.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "gpu/gpu.h"
#include "gpu/pool.h"
#include "util/util.h"

static int failures;
#define CHECK(c, ...)                                                                                 \
    do {                                                                                              \
        if (!(c)) {                                                                                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                      \
            fprintf(stderr, __VA_ARGS__);                                                             \
            fprintf(stderr, "\n");                                                                    \
            if (++failures > 20) exit(1);                                                             \
        }                                                                                             \
    } while (0)

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}
static uint64_t rnd(uint64_t *s, uint64_t n) { return n ? rng_next(s) % n : 0; }

/* Sizes from 0 to 256 KiB, spread over the classes. */
static size_t rnd_size(uint64_t *s)
{
    int l = (int)rnd(s, 19);
    size_t base = (size_t)1 << l;
    return rnd(s, 8) == 0 ? base : base + rnd(s, base);
}

static void fill(const gdte_gpu_pool_buf_t *b, uint8_t tag)
{
    memset(b->ptr, tag, b->size);
}
static int intact(const gdte_gpu_pool_buf_t *b, uint8_t tag)
{
    const uint8_t *p = b->ptr;
    for (size_t i = 0; i < b->size; i += 509)
        if (p[i] != tag) return 0;
    return p[b->size - 1] == tag;
}

/* ---- the model ------------------------------------------------------------------------------ */
typedef struct {
    gdte_gpu_pool_params_t p;
    int64_t held[GDTE_GPU_POOL_SHARES];
    int count[GDTE_GPU_POOL_SHARES][GDTE_GPU_POOL_LISTS_][GDTE_GPU_POOL_MAX_LOG + 1];
    gdte_gpu_pool_stats_t st;
} model_t;

enum { OUT_REUSE, OUT_ALLOC, OUT_OVERFLOW, OUT_WAIT, OUT_TOO_BIG };

static int m_log(size_t size)
{
    int l = GDTE_GPU_POOL_MIN_LOG;
    while (((size_t)1 << l) < size) l++;
    return l;
}
static int m_list(gdte_gpu_pool_kind_t kind, int fake)
{
    return kind == GDTE_GPU_POOL_PAGEABLE ? 3 : kind == GDTE_GPU_POOL_HOST ? 0 : (fake ? 2 : 1);
}

static int m_get(model_t *m, int s, int k, size_t size)
{
    int l = m_log(size);
    int64_t bytes = (int64_t)1 << l, budget = m->p.budget[s];
    if (m->count[s][k][l]) {
        m->count[s][k][l]--;
        m->st.reuses++;
        m->st.bytes_in_use += bytes;
        return OUT_REUSE;
    }
    if (m->p.limit == GDTE_GPU_POOL_HARD && bytes > budget) return OUT_TOO_BIG;
    for (int ll = GDTE_GPU_POOL_MAX_LOG; ll >= GDTE_GPU_POOL_MIN_LOG; ll--)
        for (int kk = 0; kk < GDTE_GPU_POOL_LISTS_; kk++)
            while (m->count[s][kk][ll] && m->held[s] + bytes > budget) {
                m->count[s][kk][ll]--;
                m->held[s] -= (int64_t)1 << ll;
                m->st.bytes_held -= (int64_t)1 << ll;
            }
    if (m->held[s] + bytes > budget) {
        if (m->p.limit == GDTE_GPU_POOL_HARD) return OUT_WAIT;
        m->st.allocs++;
        m->st.overflows++;
        return OUT_OVERFLOW;
    }
    m->held[s] += bytes;
    m->st.bytes_held += bytes;
    m->st.bytes_in_use += bytes;
    m->st.allocs++;
    if (m->st.bytes_held > m->st.peak_held) m->st.peak_held = m->st.bytes_held;
    return OUT_ALLOC;
}

static void m_put(model_t *m, int s, int k, int l, int overflow)
{
    if (overflow) return;
    int64_t bytes = (int64_t)1 << l;
    m->st.bytes_in_use -= bytes;
    int retain = INT32_MAX;
    if (m->p.retain_min || m->p.retain_bytes) {
        int64_t r = m->p.retain_bytes / bytes;
        retain = r > m->p.retain_min ? (int)r : m->p.retain_min;
    }
    if (m->count[s][k][l] >= retain) {
        m->held[s] -= bytes;
        m->st.bytes_held -= bytes;
    } else {
        m->count[s][k][l]++;
    }
}

static void compare(gdte_gpu_pool_t *pool, const model_t *m, long step)
{
    gdte_gpu_pool_stats_t st;
    gdte_gpu_pool_get_stats(pool, &st);
    CHECK(st.allocs == m->st.allocs && st.reuses == m->st.reuses && st.overflows == m->st.overflows &&
              st.bytes_held == m->st.bytes_held && st.bytes_in_use == m->st.bytes_in_use &&
              st.peak_held == m->st.peak_held,
          "step %ld: stats allocs %lld/%lld reuses %lld/%lld overflows %lld/%lld held %lld/%lld in use %lld/%lld "
          "peak %lld/%lld (pool/model)",
          step, (long long)st.allocs, (long long)m->st.allocs, (long long)st.reuses, (long long)m->st.reuses,
          (long long)st.overflows, (long long)m->st.overflows, (long long)st.bytes_held, (long long)m->st.bytes_held,
          (long long)st.bytes_in_use, (long long)m->st.bytes_in_use, (long long)st.peak_held,
          (long long)m->st.peak_held);
    for (int s = 0; s < GDTE_GPU_POOL_SHARES; s++) {
        CHECK(gdte_gpu_pool_room(pool, s) == m->p.budget[s] - m->held[s], "step %ld: share %d room %lld, model %lld",
              step, s, (long long)gdte_gpu_pool_room(pool, s), (long long)(m->p.budget[s] - m->held[s]));
        CHECK(m->p.budget[s] == 0 || m->held[s] <= m->p.budget[s], "step %ld: share %d holds %lld over %lld", step, s,
              (long long)m->held[s], (long long)m->p.budget[s]);
    }
}

/* Random gets and puts against the model; up to 24 buffers out at once. */
static void random_sequence(const char *what, const gdte_gpu_pool_params_t *params, int shares, uint64_t seed,
                            long steps)
{
    gdte_gpu_pool_t pool;
    model_t m;
    memset(&m, 0, sizeof m);
    m.p = *params;
    CHECK(gdte_gpu_pool_init(&pool, params) == GDTE_OK, "%s: init", what);
    gdte_gpu_pool_buf_t *out[24] = {0};
    uint8_t tag[24];
    uint64_t rs = seed;
    long counts[5] = {0};
    for (long step = 0; step < steps && failures == 0; step++) {
        int i = (int)rnd(&rs, 24);
        if (!out[i]) {
            int s = (int)rnd(&rs, (uint64_t)shares);
            int fake = (int)rnd(&rs, 2);
            gdte_gpu_pool_kind_t kind = fake ? GDTE_GPU_POOL_DEVICE : GDTE_GPU_POOL_HOST;
            size_t size = rnd_size(&rs);
            int want = m_get(&m, s, m_list(kind, fake), size);
            counts[want]++;
            gdte_gpu_pool_buf_t *b = NULL;
            gdte_status_t st = gdte_gpu_pool_get(&pool, s, kind, fake, size, &b);
            if (want == OUT_WAIT || want == OUT_TOO_BIG) {
                CHECK(st == (want == OUT_WAIT ? GDTE_INPROGRESS : GDTE_ERR_NO_DEVICE_MEMORY),
                      "%s step %ld: %zu bytes from share %d: %s, model says %s", what, step, size, s,
                      gdte_status_name(st), want == OUT_WAIT ? "wait" : "too big");
            } else {
                CHECK(st == GDTE_OK && b, "%s step %ld: %zu bytes from share %d: %s", what, step, size, s,
                      gdte_status_name(st));
                if (st != GDTE_OK) break;
                CHECK(b->size >= size && b->size >= 4096 && (b->size & (b->size - 1)) == 0 &&
                          ((uintptr_t)b->ptr & 4095) == 0,
                      "%s step %ld: %zu-byte buffer for %zu bytes at %p", what, step, b->size, size, b->ptr);
                CHECK(b->kind == kind && b->fake == fake && b->share == s && (size_t)1 << b->log2 == b->size,
                      "%s step %ld: buffer fields", what, step);
                CHECK(b->overflow == (want == OUT_OVERFLOW), "%s step %ld: overflow %d, model %d", what, step,
                      b->overflow, want == OUT_OVERFLOW);
                tag[i] = (uint8_t)(step * 7 + 1);
                fill(b, tag[i]);
                out[i] = b;
            }
        } else {
            gdte_gpu_pool_buf_t *b = out[i];
            CHECK(intact(b, tag[i]), "%s step %ld: a buffer's bytes changed while it was out", what, step);
            m_put(&m, b->share, m_list(b->kind, b->fake), b->log2, b->overflow);
            gdte_gpu_pool_put(&pool, b);
            out[i] = NULL;
        }
        compare(&pool, &m, step);
    }
    for (int i = 0; i < 24; i++)
        if (out[i]) {
            m_put(&m, out[i]->share, m_list(out[i]->kind, out[i]->fake), out[i]->log2, out[i]->overflow);
            gdte_gpu_pool_put(&pool, out[i]);
        }
    compare(&pool, &m, steps);
    gdte_gpu_pool_destroy(&pool);
    gdte_gpu_pool_stats_t st;
    gdte_gpu_pool_get_stats(&pool, &st);
    CHECK(st.bytes_held == 0 && st.bytes_in_use == 0, "%s: %lld bytes held after destroy", what,
          (long long)st.bytes_held);
    printf("%s: %ld steps, seed %llu: %ld reuses, %ld allocations, %ld overflows, %ld waits, %ld too large\n", what,
           steps, (unsigned long long)seed, counts[OUT_REUSE], counts[OUT_ALLOC], counts[OUT_OVERFLOW],
           counts[OUT_WAIT], counts[OUT_TOO_BIG]);
}

static const gdte_gpu_pool_params_t interposer_like = {
    .name = "test-soft",
    .budget = {256 << 10},
    .limit = GDTE_GPU_POOL_SOFT,
    .host = GDTE_GPU_POOL_GUARDED,
    .retain_min = 2,
    .retain_bytes = 16 << 10,
};
static const gdte_gpu_pool_params_t protocols_like = {
    .name = "test-hard",
    .budget = {96 << 10, 96 << 10, 64 << 10},
    .limit = GDTE_GPU_POOL_HARD,
    .host = GDTE_GPU_POOL_PLAIN,
};

/* ---- the guard page ------------------------------------------------------------------------- */
static int dies_writing_past(const gdte_gpu_pool_buf_t *b)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        ((volatile char *)b->ptr)[b->size - 1] = 1;
        ((volatile char *)b->ptr)[b->size] = 1;
        _exit(0);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    return WIFSIGNALED(ws) && WTERMSIG(ws) == SIGSEGV;
}

static void guard_pages(void)
{
    gdte_gpu_pool_t pool;
    gdte_gpu_pool_init(&pool, &interposer_like);
    gdte_gpu_pool_buf_t *h = NULL, *d = NULL, *g = NULL, *g2 = NULL;
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_HOST, 0, 5000, &h) == GDTE_OK, "guarded host get");
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_DEVICE, 1, 100, &d) == GDTE_OK, "guarded fake device get");
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_PAGEABLE, 0, 70000, &g) == GDTE_OK, "pageable get");
    if (h) CHECK(h->guarded && dies_writing_past(h), "no guard page after a GUARDED host buffer");
    if (d) CHECK(d->guarded && dies_writing_past(d), "no guard page after a fake device buffer");
    if (g) CHECK(g->guarded && !g->pinned && g->kind == GDTE_GPU_POOL_PAGEABLE && dies_writing_past(g),
                 "a pageable buffer is guarded, never pinned");
    gdte_gpu_pool_put(&pool, h);
    gdte_gpu_pool_put(&pool, d);
    gdte_gpu_pool_put(&pool, g);
    gdte_gpu_pool_destroy(&pool);
    /* Its own free list: a host request of the same size does not get it, a pageable one does
     * (a budget that holds both, so nothing is trimmed). */
    gdte_gpu_pool_params_t roomy = interposer_like;
    roomy.budget[0] = 1 << 20;
    gdte_gpu_pool_init(&pool, &roomy);
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_PAGEABLE, 0, 70000, &g) == GDTE_OK, "pageable get");
    gdte_gpu_pool_put(&pool, g);
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_HOST, 0, 70000, &g2) == GDTE_OK && g2 != g &&
              g2->kind == GDTE_GPU_POOL_HOST,
          "a host request took the cached pageable buffer");
    gdte_gpu_pool_put(&pool, g2);
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_PAGEABLE, 0, 70000, &g2) == GDTE_OK && g2 == g,
          "the cached pageable buffer not reused");
    gdte_gpu_pool_put(&pool, g2);
    gdte_gpu_pool_destroy(&pool);
    printf("guard pages: a write past a GUARDED host or fake device buffer faults\n");
}

/* ---- charges, failures, destroy -------------------------------------------------------------- */
static void edges(void)
{
    gdte_gpu_pool_t pool;
    gdte_gpu_pool_init(&pool, &protocols_like);
    gdte_gpu_pool_buf_t *a = NULL, *b = NULL;
    gdte_gpu_pool_stats_t st;

    /* Charges count against a share, not in the stats; a charged-full share makes gets wait. */
    gdte_gpu_pool_charge(&pool, 2, 60 << 10);
    CHECK(gdte_gpu_pool_room(&pool, 2) == 4 << 10, "room after a charge: %lld", (long long)gdte_gpu_pool_room(&pool, 2));
    CHECK(gdte_gpu_pool_get(&pool, 2, GDTE_GPU_POOL_HOST, 0, 4096, &a) == GDTE_OK, "4 KiB in a charged share");
    CHECK(gdte_gpu_pool_get(&pool, 2, GDTE_GPU_POOL_HOST, 0, 1, &b) == GDTE_INPROGRESS, "a full share waits");
    gdte_gpu_pool_put(&pool, a);
    CHECK(gdte_gpu_pool_get(&pool, 2, GDTE_GPU_POOL_HOST, 0, 1, &b) == GDTE_OK && b == a, "the cached buffer again");
    gdte_gpu_pool_put(&pool, b);
    gdte_gpu_pool_charge(&pool, 2, -(60 << 10));
    CHECK(gdte_gpu_pool_room(&pool, 2) == 60 << 10, "room after the credit");
    CHECK(gdte_gpu_pool_get(&pool, 2, GDTE_GPU_POOL_HOST, 0, (64 << 10) + 1, &a) == GDTE_ERR_NO_DEVICE_MEMORY,
          "past a HARD share's whole budget");
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_HOST, 0, (size_t)1 << 42, &a) == GDTE_ERR_NO_DEVICE_MEMORY,
          "past the largest size");
    CHECK(gdte_gpu_pool_get(&pool, GDTE_GPU_POOL_SHARES, GDTE_GPU_POOL_HOST, 0, 1, &a) == GDTE_ERR_INVALID_ARG,
          "a share out of range");

    /* A real device buffer without a GPU fails, and the reservation is rolled back. */
    gdte_gpu_pool_get_stats(&pool, &st);
    int64_t held = st.bytes_held, room = gdte_gpu_pool_room(&pool, 1);
    if (!gdte_gpu_available()) {
        CHECK(gdte_gpu_pool_get(&pool, 1, GDTE_GPU_POOL_DEVICE, 0, 4096, &a) != GDTE_OK, "device memory without a GPU");
        gdte_gpu_pool_get_stats(&pool, &st);
        CHECK(st.bytes_held == held && st.bytes_in_use == 0 && gdte_gpu_pool_room(&pool, 1) == room,
              "a failed allocation left %lld bytes held", (long long)(st.bytes_held - held));
    }

    /* The K-th system allocation of the process fails once (GDTE_FAULT_STAGING_OOM). */
    setenv("GDTE_FAULT_STAGING_OOM", "2", 1);
    gdte_knobs_reset();
    CHECK(gdte_knobs_load() == GDTE_OK, "knobs");
    gdte_gpu_pool_buf_t *c = NULL;
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_HOST, 0, 8192, &a) == GDTE_OK, "first allocation");
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_HOST, 0, 8192, &b) == GDTE_ERR_NO_MEMORY, "injected failure");
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_HOST, 0, 8192, &c) == GDTE_OK, "the next one succeeds");
    gdte_gpu_pool_get_stats(&pool, &st);
    CHECK(st.bytes_in_use == 2 * 8192, "in use after an injected failure: %lld", (long long)st.bytes_in_use);
    unsetenv("GDTE_FAULT_STAGING_OOM");
    gdte_knobs_reset();
    gdte_gpu_pool_put(&pool, a);

    /* Destroy with a buffer out: cached ones go, the one out stays counted until it comes back
     * (freed then); the pool takes no more gets. */
    gdte_gpu_pool_destroy(&pool);
    gdte_gpu_pool_get_stats(&pool, &st);
    CHECK(st.bytes_held == 8192 && st.bytes_in_use == 8192, "after destroy: held %lld in use %lld",
          (long long)st.bytes_held, (long long)st.bytes_in_use);
    CHECK(gdte_gpu_pool_get(&pool, 0, GDTE_GPU_POOL_HOST, 0, 1, &a) == GDTE_ERR_NOT_INITIALIZED, "get after destroy");
    gdte_gpu_pool_put(&pool, c);
    gdte_gpu_pool_get_stats(&pool, &st);
    CHECK(st.bytes_held == 0 && st.bytes_in_use == 0, "after the late put: held %lld", (long long)st.bytes_held);
    printf("edges: charges, rollback of failed allocations, injected failure, destroy with a buffer out\n");
}

/* ---- threads -------------------------------------------------------------------------------- */
typedef struct {
    gdte_gpu_pool_t *pool;
    int shares, id;
    long ops;
    uint64_t seed;
    long gets, waits;
    int bad;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    gdte_gpu_pool_buf_t *mine[4] = {0};
    uint64_t rs = w->seed;
    for (long i = 0; i < w->ops; i++) {
        int j = (int)rnd(&rs, 4);
        if (mine[j]) {
            if (!intact(mine[j], (uint8_t)(w->id + 1))) w->bad++;
            gdte_gpu_pool_put(w->pool, mine[j]);
            mine[j] = NULL;
            continue;
        }
        int s = (int)rnd(&rs, (uint64_t)w->shares), fake = (int)rnd(&rs, 2);
        gdte_status_t st = gdte_gpu_pool_get(w->pool, s, fake ? GDTE_GPU_POOL_DEVICE : GDTE_GPU_POOL_HOST, fake,
                                             rnd(&rs, 24 << 10), &mine[j]);
        if (st == GDTE_INPROGRESS) {
            w->waits++;
            mine[j] = NULL;
            continue;
        }
        if (st != GDTE_OK) {
            w->bad++;
            mine[j] = NULL;
            continue;
        }
        w->gets++;
        fill(mine[j], (uint8_t)(w->id + 1));
        if (w->pool->params.limit == GDTE_GPU_POOL_HARD && gdte_gpu_pool_room(w->pool, s) < 0) w->bad++;
    }
    for (int j = 0; j < 4; j++) gdte_gpu_pool_put(w->pool, mine[j]);
    return NULL;
}

static void threads(const char *what, const gdte_gpu_pool_params_t *params, int shares, uint64_t seed)
{
    enum { NT = 8 };
    gdte_gpu_pool_t pool;
    gdte_gpu_pool_init(&pool, params);
    worker_t w[NT];
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) {
        w[i] = (worker_t){.pool = &pool, .shares = shares, .id = i, .ops = 20000, .seed = seed + 977 * (uint64_t)i + 1};
        pthread_create(&t[i], NULL, worker, &w[i]);
    }
    long gets = 0, waits = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].bad == 0, "%s: thread %d saw %d bad buffers or failures", what, i, w[i].bad);
        gets += w[i].gets;
        waits += w[i].waits;
    }
    gdte_gpu_pool_stats_t st;
    gdte_gpu_pool_get_stats(&pool, &st);
    CHECK(st.allocs + st.reuses == gets, "%s: %lld allocations + %lld reuses for %ld gets", what, (long long)st.allocs,
          (long long)st.reuses, gets);
    CHECK(st.bytes_in_use == 0, "%s: %lld bytes in use after every thread put its buffers back", what,
          (long long)st.bytes_in_use);
    int64_t total = 0;
    for (int s = 0; s < GDTE_GPU_POOL_SHARES; s++) {
        CHECK(gdte_gpu_pool_room(&pool, s) >= 0, "%s: share %d over its budget", what, s);
        total += params->budget[s];
    }
    CHECK(st.peak_held <= total, "%s: peak %lld over %lld", what,
          (long long)st.peak_held, (long long)total);
    CHECK(st.bytes_held <= total, "%s: %lld bytes held over %lld", what, (long long)st.bytes_held, (long long)total);
    gdte_gpu_pool_destroy(&pool);
    printf("%s: %d threads, %ld gets (%lld reused, %lld overflows), %ld waits\n", what, NT, gets,
           (long long)st.reuses, (long long)st.overflows, waits);
}

int main(void)
{
    const char *e = getenv("GDTETEST_SEED");
    uint64_t seed = e ? strtoull(e, NULL, 0) : 0x5eed2024;
    if (!seed) seed = 1;
    e = getenv("GDTETEST_POOL_STEPS");
    long steps = e ? atol(e) : 200000;
    random_sequence("soft pool (interposer's policy)", &interposer_like, 1, seed, steps);
    random_sequence("hard pool (protocols' policy)", &protocols_like, 3, seed ^ 0x9e3779b97f4a7c15ull, steps);
    guard_pages();
    edges();
    threads("soft pool, threads", &interposer_like, 1, seed);
    threads("hard pool, threads", &protocols_like, 3, seed);
    if (failures) {
        fprintf(stderr, "pool_test: %d failures (GDTETEST_SEED=%llu)\n", failures, (unsigned long long)seed);
        return 1;
    }
    printf("pool_test: all passed\n");
    return 0;
}
