/*
 * The sorted registry of disjoint address ranges (src/util/ranges.c):
 *  - every way two ranges can overlap is refused under REFUSE and replaces under REPLACE;
 *    adjacent ranges are not overlaps, and the byte at the boundary belongs to the later one;
 *  - removal by start only at a start, removal by overlap exactly the overlapped run;
 *  - the limit evicts the oldest insert, not the lowest address;
 *  - 100,000 ranges inserted in random order, every boundary found;
 *  - a long random sequence of inserts (both modes, with and without a limit), removals and
 *    lookups against a brute-force model (an unsorted array scanned in full);
 *  - readers racing a writer never see an entry torn or out of its range.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/ranges.h"
#include "../kernels/check.h"


typedef struct {
    gdte_range_t r;
    uint64_t tag; /* a function of lo and hi: a torn or misplaced copy shows */
} entry_t;

static uint64_t tag_of(uintptr_t lo, uintptr_t hi) { return (uint64_t)lo * 0x9e3779b97f4a7c15u ^ (uint64_t)hi; }
static entry_t mk(uintptr_t lo, uintptr_t hi) { return (entry_t){{lo, hi, 0}, tag_of(lo, hi)}; }

static uint64_t rng = 0x2545f4914f6cdd1du;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* 1 when `p` is in an entry; *lo_p and *hi_p then name it, and its tag is checked. */
static int find(gdte_ranges_t *r, uintptr_t p, uintptr_t *lo_p, uintptr_t *hi_p)
{
    entry_t e;
    memset(&e, 0xa5, sizeof e);
    if (!gdte_ranges_find(r, p, &e)) return 0;
    CHECK(e.r.lo <= p && p < e.r.hi, "find(%#lx) gave [%#lx, %#lx)", (unsigned long)p, (unsigned long)e.r.lo,
          (unsigned long)e.r.hi);
    CHECK(e.tag == tag_of(e.r.lo, e.r.hi), "the entry's own fields come with it");
    if (lo_p) *lo_p = e.r.lo;
    if (hi_p) *hi_p = e.r.hi;
    return 1;
}

static void test_overlaps(void)
{
    gdte_ranges_t r;
    gdte_ranges_init(&r, sizeof(entry_t), 0);
    entry_t e = mk(100, 200);
    CHECK(gdte_ranges_insert(&r, &e, GDTE_RANGES_REFUSE) == GDTE_OK, "insert into an empty registry");
    /* Each of these overlaps [100, 200): inside, around, equal, over either end, one byte. */
    static const uintptr_t over[][2] = {{120, 130}, {50, 300}, {100, 200}, {50, 101}, {199, 250},
                                        {100, 101}, {199, 200}, {0, 150},  {150, 1000}};
    for (size_t i = 0; i < sizeof over / sizeof *over; i++) {
        entry_t o = mk(over[i][0], over[i][1]);
        CHECK(gdte_ranges_insert(&r, &o, GDTE_RANGES_REFUSE) == GDTE_ERR_INVALID_ARG, "[%lu, %lu) overlaps",
              (unsigned long)over[i][0], (unsigned long)over[i][1]);
        CHECK(gdte_ranges_count(&r) == 1, "a refused insert leaves the registry as it was");
        uintptr_t lo, hi;
        CHECK(find(&r, 150, &lo, &hi) && lo == 100 && hi == 200, "the old range is still there");
    }
    /* Adjacent on both sides: not overlaps. */
    entry_t left = mk(50, 100), right = mk(200, 260);
    CHECK(gdte_ranges_insert(&r, &left, GDTE_RANGES_REFUSE) == GDTE_OK, "adjacent below");
    CHECK(gdte_ranges_insert(&r, &right, GDTE_RANGES_REFUSE) == GDTE_OK, "adjacent above");
    CHECK(gdte_ranges_count(&r) == 3, "three ranges");
    uintptr_t lo, hi;
    CHECK(find(&r, 99, &lo, &hi) && lo == 50, "byte 99 is the lower range's");
    CHECK(find(&r, 100, &lo, &hi) && lo == 100, "byte 100 is the middle range's");
    CHECK(find(&r, 199, &lo, &hi) && lo == 100, "byte 199 is the middle range's");
    CHECK(find(&r, 200, &lo, &hi) && lo == 200 && hi == 260, "byte 200 is the upper range's");
    CHECK(!find(&r, 49, NULL, NULL) && !find(&r, 260, NULL, NULL) && !find(&r, 0, NULL, NULL) &&
              !find(&r, UINTPTR_MAX, NULL, NULL),
          "outside all ranges");
    CHECK(gdte_ranges_find(&r, 150, NULL) == 1, "find with no copy");
    /* Empty and reversed ranges are refused in either mode. */
    entry_t empty = mk(500, 500), rev = mk(600, 550);
    CHECK(gdte_ranges_insert(&r, &empty, GDTE_RANGES_REPLACE) == GDTE_ERR_INVALID_ARG, "empty range");
    CHECK(gdte_ranges_insert(&r, &rev, GDTE_RANGES_REFUSE) == GDTE_ERR_INVALID_ARG, "reversed range");
    /* REPLACE drops every range it overlaps, and only those. */
    entry_t far = mk(1000, 1100);
    CHECK(gdte_ranges_insert(&r, &far, GDTE_RANGES_REFUSE) == GDTE_OK, "a far range");
    entry_t big = mk(99, 201);
    CHECK(gdte_ranges_insert(&r, &big, GDTE_RANGES_REPLACE) == GDTE_OK, "replace");
    CHECK(gdte_ranges_count(&r) == 2, "[99, 201) replaced the three it overlaps: %lld left",
          (long long)gdte_ranges_count(&r));
    CHECK(find(&r, 50, NULL, NULL) == 0 && find(&r, 250, NULL, NULL) == 0, "the replaced ranges are gone");
    CHECK(find(&r, 150, &lo, &hi) && lo == 99 && hi == 201, "the new range");
    CHECK(find(&r, 1050, &lo, &hi) && lo == 1000, "the range it did not overlap stays");
    entry_t none = mk(300, 400);
    CHECK(gdte_ranges_insert(&r, &none, GDTE_RANGES_REPLACE) == GDTE_OK && gdte_ranges_count(&r) == 3,
          "replace over nothing is an insert");

    /* Removal by start. */
    CHECK(gdte_ranges_remove_at(&r, 100) == 0, "no range starts at 100 any more");
    CHECK(gdte_ranges_remove_at(&r, 150) == 0, "150 is inside a range, not its start");
    CHECK(gdte_ranges_remove_at(&r, 99) == 1 && gdte_ranges_count(&r) == 2, "remove [99, 201)");
    CHECK(gdte_ranges_remove_at(&r, 99) == 0, "only once");
    CHECK(!find(&r, 150, NULL, NULL), "removed");
    /* Removal by overlap: [300, 400) and [1000, 1100), hit by their last and first byte. */
    CHECK(gdte_ranges_remove_overlapping(&r, 400, 1000) == 0, "the gap between them overlaps neither");
    CHECK(gdte_ranges_remove_overlapping(&r, 200, 200) == 0, "an empty span removes nothing");
    CHECK(gdte_ranges_remove_overlapping(&r, 399, 1001) == 2 && gdte_ranges_count(&r) == 0, "both");
    CHECK(gdte_ranges_remove_overlapping(&r, 0, UINTPTR_MAX) == 0, "nothing left");
    CHECK(gdte_ranges_remove_at(&r, 0) == 0 && !find(&r, 0, NULL, NULL), "an empty registry");

    /* The top of the address space. */
    entry_t top = mk(UINTPTR_MAX - 10, UINTPTR_MAX);
    CHECK(gdte_ranges_insert(&r, &top, GDTE_RANGES_REFUSE) == GDTE_OK, "a range at the top");
    CHECK(find(&r, UINTPTR_MAX - 1, &lo, NULL) && lo == UINTPTR_MAX - 10, "its last byte");
    CHECK(!find(&r, UINTPTR_MAX, NULL, NULL), "the byte past it");
    gdte_ranges_clear(&r);
    CHECK(gdte_ranges_count(&r) == 0 && !find(&r, UINTPTR_MAX - 1, NULL, NULL), "clear");
    CHECK(gdte_ranges_insert(&r, &e, GDTE_RANGES_REFUSE) == GDTE_OK && gdte_ranges_count(&r) == 1,
          "usable after clear");
    gdte_ranges_destroy(&r);
}

static void test_limit(void)
{
    static gdte_ranges_t r = GDTE_RANGES_INIT(entry_t, 4);
    /* Inserted from the top down, so that the oldest is not the lowest. */
    for (int i = 0; i < 4; i++) {
        entry_t e = mk((uintptr_t)(1000 - 100 * i), (uintptr_t)(1050 - 100 * i));
        CHECK(gdte_ranges_insert(&r, &e, GDTE_RANGES_REFUSE) == GDTE_OK, "insert %d", i);
    }
    CHECK(gdte_ranges_count(&r) == 4, "full");
    entry_t e = mk(2000, 2010);
    CHECK(gdte_ranges_insert(&r, &e, GDTE_RANGES_REFUSE) == GDTE_OK && gdte_ranges_count(&r) == 4,
          "a fifth insert keeps four");
    CHECK(!find(&r, 1000, NULL, NULL), "the oldest ([1000, 1050)) went");
    CHECK(find(&r, 700, NULL, NULL) && find(&r, 800, NULL, NULL) && find(&r, 900, NULL, NULL) &&
              find(&r, 2005, NULL, NULL),
          "the others stay");
    /* A refused insert evicts nothing. */
    entry_t o = mk(705, 706);
    CHECK(gdte_ranges_insert(&r, &o, GDTE_RANGES_REFUSE) == GDTE_ERR_INVALID_ARG && find(&r, 900, NULL, NULL),
          "refused: nothing evicted");
    /* A replacing insert that frees a place evicts nothing more. */
    entry_t rep = mk(690, 760);
    CHECK(gdte_ranges_insert(&r, &rep, GDTE_RANGES_REPLACE) == GDTE_OK && gdte_ranges_count(&r) == 4,
          "replace within the limit");
    CHECK(find(&r, 900, NULL, NULL) && find(&r, 800, NULL, NULL) && find(&r, 2005, NULL, NULL),
          "no other range evicted");
    /* Next oldest: [900, 950). */
    entry_t e2 = mk(3000, 3001);
    CHECK(gdte_ranges_insert(&r, &e2, GDTE_RANGES_REPLACE) == GDTE_OK, "insert");
    CHECK(!find(&r, 900, NULL, NULL) && find(&r, 800, NULL, NULL), "[900, 950) was next oldest");
    gdte_ranges_clear(&r);
}

static void test_many(void)
{
    enum { N = 100000 };
    gdte_ranges_t r;
    gdte_ranges_init(&r, sizeof(entry_t), 0);
    /* Ranges [64 k, 64 k + len), len in 1..64: adjacent where len is 64. */
    uintptr_t *order = malloc(N * sizeof *order), *len = malloc(N * sizeof *len);
    if (!order || !len) exit(2);
    for (int i = 0; i < N; i++) {
        order[i] = (uintptr_t)i;
        len[i] = 1 + rnd() % 64;
    }
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(rnd() % (uint64_t)(i + 1));
        uintptr_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < N; i++) {
        uintptr_t k = order[i];
        entry_t e = mk(0x100000 + 64 * k, 0x100000 + 64 * k + len[k]);
        if (gdte_ranges_insert(&r, &e, GDTE_RANGES_REFUSE) != GDTE_OK) {
            CHECK(0, "insert %d", i);
            break;
        }
    }
    CHECK(gdte_ranges_count(&r) == N, "%d ranges", N);
    int bad = 0;
    for (uintptr_t k = 0; k < N; k++) {
        uintptr_t lo = 0x100000 + 64 * k, hi = lo + len[k], flo, fhi;
        bad += !(find(&r, lo, &flo, &fhi) && flo == lo && fhi == hi);
        bad += !(find(&r, hi - 1, &flo, &fhi) && flo == lo);
        bad += len[k] < 64 || k == N - 1 ? find(&r, hi, NULL, NULL) : !(find(&r, hi, &flo, NULL) && flo == hi);
    }
    CHECK(bad == 0, "%d boundaries of %d ranges answered wrong", bad, N);
    CHECK(!find(&r, 0x100000 - 1, NULL, NULL) && !find(&r, 0x100000 + 64 * (uintptr_t)N, NULL, NULL), "outside");
    /* Remove every other one by start, then the rest by one span. */
    for (uintptr_t k = 0; k < N; k += 2) bad += gdte_ranges_remove_at(&r, 0x100000 + 64 * k) != 1;
    CHECK(bad == 0 && gdte_ranges_count(&r) == N / 2, "half removed by start");
    for (uintptr_t k = 0; k < N; k++) bad += find(&r, 0x100000 + 64 * k, NULL, NULL) != (int)(k & 1);
    CHECK(bad == 0, "the odd ones stay");
    CHECK(gdte_ranges_remove_overlapping(&r, 0, UINTPTR_MAX) == N / 2 && gdte_ranges_count(&r) == 0, "all gone");
    free(order);
    free(len);
    gdte_ranges_destroy(&r);
}

/* ---- against a brute-force model ---- */
#define UNIVERSE 2048
typedef struct {
    entry_t e[UNIVERSE];
    uint64_t seq[UNIVERSE];
    int n;
    uint64_t next;
} model_t;

static int model_overlaps(const entry_t *a, uintptr_t lo, uintptr_t hi) { return a->r.lo < hi && lo < a->r.hi; }
static void model_drop(model_t *m, int i)
{
    m->e[i] = m->e[m->n - 1];
    m->seq[i] = m->seq[m->n - 1];
    m->n--;
}
static gdte_status_t model_insert(model_t *m, const entry_t *e, gdte_ranges_overlap_t mode, int max)
{
    if (e->r.lo >= e->r.hi) return GDTE_ERR_INVALID_ARG;
    for (int i = 0; i < m->n; i++)
        if (model_overlaps(&m->e[i], e->r.lo, e->r.hi) && mode == GDTE_RANGES_REFUSE) return GDTE_ERR_INVALID_ARG;
    for (int i = 0; i < m->n;)
        if (model_overlaps(&m->e[i], e->r.lo, e->r.hi))
            model_drop(m, i);
        else
            i++;
    if (max > 0 && m->n >= max) {
        int old = 0;
        for (int i = 1; i < m->n; i++)
            if (m->seq[i] < m->seq[old]) old = i;
        model_drop(m, old);
    }
    m->e[m->n] = *e;
    m->seq[m->n++] = m->next++;
    return GDTE_OK;
}
static int model_find(const model_t *m, uintptr_t p)
{
    for (int i = 0; i < m->n; i++)
        if (m->e[i].r.lo <= p && p < m->e[i].r.hi) return i;
    return -1;
}

static void test_model(int max, int steps)
{
    gdte_ranges_t r;
    gdte_ranges_init(&r, sizeof(entry_t), max);
    static model_t m;
    memset(&m, 0, sizeof m);
    int64_t inserted = 0, refused = 0, removed = 0;
    for (int s = 0; s < steps && failures == 0; s++) {
        uint64_t op = rnd() % 100;
        uintptr_t lo = rnd() % UNIVERSE, len = rnd() % 8 ? 1 + rnd() % 40 : rnd() % 300;
        entry_t e = mk(lo, lo + len);
        if (op < 50) {
            gdte_ranges_overlap_t mode = op < 25 ? GDTE_RANGES_REFUSE : GDTE_RANGES_REPLACE;
            gdte_status_t want = model_insert(&m, &e, mode, max);
            gdte_status_t got = gdte_ranges_insert(&r, &e, mode);
            CHECK(got == want, "step %d: insert [%lu, %lu) mode %d: %d, the model %d", s, (unsigned long)lo,
                  (unsigned long)(lo + len), mode, got, want);
            inserted += got == GDTE_OK;
            refused += got != GDTE_OK;
        } else if (op < 65) {
            /* At a start when there is one, else anywhere. */
            uintptr_t at = m.n && rnd() % 2 ? m.e[rnd() % (uint64_t)m.n].r.lo : lo;
            int i = -1;
            for (int k = 0; k < m.n; k++)
                if (m.e[k].r.lo == at) i = k;
            if (i >= 0) model_drop(&m, i);
            int got = gdte_ranges_remove_at(&r, at);
            CHECK(got == (i >= 0), "step %d: remove_at %lu: %d", s, (unsigned long)at, got);
            removed += got;
        } else if (op < 75) {
            int64_t want = 0;
            for (int i = 0; i < m.n;)
                if (len > 0 && model_overlaps(&m.e[i], lo, lo + len)) {
                    model_drop(&m, i);
                    want++;
                } else {
                    i++;
                }
            int64_t got = gdte_ranges_remove_overlapping(&r, lo, lo + len);
            CHECK(got == want, "step %d: remove_overlapping [%lu, %lu): %lld, the model %lld", s,
                  (unsigned long)lo, (unsigned long)(lo + len), (long long)got, (long long)want);
            removed += got;
        } else if (op < 76) {
            gdte_ranges_clear(&r);
            m.n = 0;
        } else {
            for (int k = 0; k < 16; k++) {
                uintptr_t p = rnd() % (UNIVERSE + 400);
                int i = model_find(&m, p);
                uintptr_t flo, fhi;
                int got = find(&r, p, &flo, &fhi);
                CHECK(got == (i >= 0) && (!got || (flo == m.e[i].r.lo && fhi == m.e[i].r.hi)),
                      "step %d: find(%lu): %d", s, (unsigned long)p, got);
            }
        }
        CHECK(gdte_ranges_count(&r) == m.n, "step %d: %lld ranges, the model %d", s,
              (long long)gdte_ranges_count(&r), m.n);
        if (s % 64 == 0) { /* the whole content: every model range there, nothing else (counts equal) */
            for (int i = 0; i < m.n; i++) {
                uintptr_t flo, fhi;
                CHECK(find(&r, m.e[i].r.lo, &flo, &fhi) && flo == m.e[i].r.lo && fhi == m.e[i].r.hi &&
                          find(&r, m.e[i].r.hi - 1, &flo, NULL) && flo == m.e[i].r.lo,
                      "step %d: model range [%lu, %lu)", s, (unsigned long)m.e[i].r.lo, (unsigned long)m.e[i].r.hi);
            }
        }
    }
    CHECK(inserted > steps / 10 && refused > steps / 50 && removed > steps / 20,
          "the sequence exercised every path (%lld inserted, %lld refused, %lld removed)", (long long)inserted,
          (long long)refused, (long long)removed);
    printf("model (limit %d): %d steps, %lld inserted, %lld refused, %lld removed\n", max, steps, (long long)inserted,
           (long long)refused, (long long)removed);
    gdte_ranges_destroy(&r);
}

/* ---- readers racing a writer ---- */
static gdte_ranges_t shared = GDTE_RANGES_INIT(entry_t, 64);
static _Atomic int stop;
static _Atomic int64_t torn, seen;

static void *reader(void *arg)
{
    uint64_t x = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    while (!stop) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uintptr_t p = x % 100000;
        entry_t e;
        /* glibc's rwlock prefers readers: without a pause now and then, readers that never stop
         * would keep the writer out for minutes. */
        if ((x & 15) == 0) sched_yield();
        if (gdte_ranges_find(&shared, p, &e)) {
            seen++;
            if (e.r.lo > p || p >= e.r.hi || e.tag != tag_of(e.r.lo, e.r.hi)) torn++;
        }
    }
    return NULL;
}

static void test_threads(void)
{
    enum { READERS = 3 };
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++) pthread_create(&t[i], NULL, reader, (void *)(uintptr_t)(i + 1));
    /* Until the readers have found many entries (they may start late), within a bound. */
    for (int s = 0; s < 20000 || (seen < 100000 && s < 20000000); s++) {
        uintptr_t lo = rnd() % 100000, len = 1 + rnd() % 500;
        entry_t e = mk(lo, lo + len);
        switch (rnd() % 4) {
        case 0:
        case 1: gdte_ranges_insert(&shared, &e, GDTE_RANGES_REPLACE); break;
        case 2: gdte_ranges_remove_overlapping(&shared, lo, lo + len); break;
        default: gdte_ranges_insert(&shared, &e, GDTE_RANGES_REFUSE); break;
        }
    }
    stop = 1;
    for (int i = 0; i < READERS; i++) pthread_join(t[i], NULL);
    CHECK(torn == 0, "%lld of %lld lookups saw a torn or misplaced entry", (long long)torn, (long long)seen);
    CHECK(seen > 0, "the readers found entries while the writer ran");
    CHECK(gdte_ranges_count(&shared) <= 64, "the limit held under threads");
    gdte_ranges_clear(&shared);
}

int main(void)
{
    test_overlaps();
    test_limit();
    test_many();
    test_model(0, 200000);
    test_model(16, 200000);
    test_threads();
    printf("util_ranges: %d failures\n", failures);
    return failures ? 1 : 0;
}
