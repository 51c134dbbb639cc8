/*
 * Handles carry a generation: a handle whose type is gone stays GDTE_ERR_INVALID_TYPE even
 * when a new type reuses its registry slot or its memory. Before, the registry was keyed by
 * the object's address, so the first type malloc placed at a freed type's address answered
 * to the freed handle.
 *
 * Also: forged handle values, double free, a handle freed by the user while an internal
 * reference keeps the type alive, predefined handles, and creation/free/check from several
 * threads at once.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include "testutil.h"
#include "engine/type_internal.h"

#define DBL gdte_type_predefined(GDTE_BASIC_DOUBLE)
#define INT gdte_type_predefined(GDTE_BASIC_INT32)

/* Every public call that takes a handle refuses `h`. */
static void refused(gdte_type_h h)
{
    gdte_type_info_t in;
    gdte_type_h out = NULL, hh = h;
    int64_t s = -1, done = -1;
    char buf[64] = {0};
    double x[4] = {0}, y[4] = {0};
    CHECK_ST(gdte_type_check(h), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_get_info(h, &in), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_commit(h), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_pack_size(1, h, &s), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_describe(h, buf, sizeof buf), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_dup(h, &out), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_create_contiguous(2, h, &out), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_pack(x, 1, h, y, sizeof y, NULL, &done), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_free(&hh), GDTE_ERR_INVALID_TYPE);
    CHECK(out == NULL && s == -1 && done == -1 && hh == h);
    gdte_type_retain(h); /* internal calls on a dead handle are no-ops */
    gdte_type_release(h);
    CHECK_EQ(gdte_type_uid(h), 0);
}

/* A freed handle is refused when a new type takes its registry slot (at once: freed slots are
 * reused last-in first-out) and when a new type is allocated at its object's address. */
#define BATCH 1000

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void test_stale_reuse(void)
{
    /* the same slot, the next generation */
    gdte_type_h a, b;
    CHECK_OK(gdte_type_create_contiguous(2, DBL, &a));
    CHECK_OK(gdte_type_commit(a));
    const gdte_type_h stale = a;
    uint64_t a_uid = gdte_type_uid(a);
    CHECK_OK(gdte_type_free(&a));
    refused(stale);
    CHECK_OK(gdte_type_create_vector(3, 1, 2, INT, &b));
    CHECK_EQ(gdte_handle_slot(b), gdte_handle_slot(stale));
    CHECK_EQ(gdte_handle_gen(b), gdte_handle_gen(stale) + 1);
    CHECK(b != stale);
    refused(stale);
    CHECK_OK(gdte_type_commit(b));
    gdte_type_info_t in;
    CHECK_OK(gdte_type_get_info(b, &in));
    CHECK_EQ(in.size, 12);
    CHECK(gdte_type_uid(b) != a_uid);
    CHECK_OK(gdte_type_free(&b));

    /* the same address: free a batch of types, make batches of new ones until some land at
     * freed addresses (glibc: in the first batch; ASan: once its quarantine turns over) */
    static gdte_type_h old[BATCH], cur[BATCH];
    static struct { uintptr_t addr; gdte_type_h h; } old_at[BATCH];
    for (int i = 0; i < BATCH; i++) {
        CHECK_OK(gdte_type_create_contiguous(1 + i % 3, DBL, &old[i]));
        CHECK_OK(gdte_type_commit(old[i]));
        old_at[i].addr = (uintptr_t)gdte_type_obj(old[i]);
        old_at[i].h = old[i];
    }
    qsort(old_at, BATCH, sizeof old_at[0], cmp_ptr);
    for (int i = 0; i < BATCH; i++) CHECK_OK(gdte_type_free(&old[i]));
    int64_t batches = 0, recurred = 0;
    for (; batches < 3000 && !recurred; batches++) {
        for (int i = 0; i < BATCH; i++) CHECK_OK(gdte_type_create_vector(2, 1 + i % 4, 5, INT, &cur[i]));
        for (int i = 0; i < BATCH; i++) {
            uintptr_t key = (uintptr_t)gdte_type_obj(cur[i]);
            void *hit = bsearch(&key, old_at, BATCH, sizeof old_at[0], cmp_ptr);
            if (!hit) continue;
            gdte_type_h s = ((const __typeof__(old_at[0]) *)hit)->h;
            recurred++;
            CHECK(s != cur[i]);
            refused(s);
            gdte_type_info_t ci;
            CHECK_OK(gdte_type_get_info(cur[i], &ci));
            CHECK_EQ(ci.size, 8 * (1 + i % 4));
        }
        for (int i = 0; i < BATCH; i++) CHECK_OK(gdte_type_free(&cur[i]));
    }
    printf("stale handles: %lld new types took freed objects' addresses (after %lld batches of %d), all "
           "stale handles refused\n", (long long)recurred, (long long)batches, BATCH);
    CHECK(recurred > 0);
}

/* Handles that never named a type. */
static void test_forged(void)
{
    int local;
    uintptr_t vals[] = {1, 2, 0x1000, 0x20000001, (uintptr_t)&local,
                        (uintptr_t)&test_forged, UINTPTR_MAX, UINTPTR_MAX / 3, (uintptr_t)1 << 63};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) refused((gdte_type_h)vals[i]);
    CHECK_ST(gdte_type_check(NULL), GDTE_ERR_INVALID_TYPE);
    /* a handle's neighbours (next slot, next generation) are not types */
    gdte_type_h t;
    CHECK_OK(gdte_type_create_contiguous(4, INT, &t));
    refused((gdte_type_h)((uintptr_t)t + 1));
    refused((gdte_type_h)((uintptr_t)t + ((uintptr_t)1 << 28)));
    refused((gdte_type_h)((uintptr_t)t - ((uintptr_t)1 << 28)));
    CHECK_OK(gdte_type_check(t));
    CHECK_OK(gdte_type_free(&t));
}

static void test_lifetimes(void)
{
    /* double free */
    gdte_type_h t, copy;
    CHECK_OK(gdte_type_create_contiguous(4, INT, &t));
    copy = t;
    CHECK_OK(gdte_type_free(&t));
    CHECK(t == NULL);
    CHECK_ST(gdte_type_free(&copy), GDTE_ERR_INVALID_TYPE);
    /* freed by the user, alive through an internal reference: refused to the user, usable
     * by the holder, gone (and refused everywhere) after the last release */
    CHECK_OK(gdte_type_create_vector(2, 1, 3, DBL, &t));
    CHECK_OK(gdte_type_commit(t));
    copy = t;
    gdte_type_retain(t);
    CHECK_OK(gdte_type_free(&t));
    CHECK_ST(gdte_type_check(copy), GDTE_ERR_INVALID_TYPE);
    CHECK(gdte_type_uid(copy) != 0);
    const gdte_unit_t *u;
    int64_t n;
    CHECK_ST(gdte_engine_units(copy, &u, &n), GDTE_OK);
    gdte_type_release(copy);
    refused(copy);
    /* a child freed by the user lives on in its parent */
    gdte_type_h child, parent;
    CHECK_OK(gdte_type_create_contiguous(3, INT, &child));
    CHECK_OK(gdte_type_create_vector(2, 1, 2, child, &parent));
    copy = child;
    CHECK_OK(gdte_type_free(&child));
    CHECK_ST(gdte_type_check(copy), GDTE_ERR_INVALID_TYPE);
    CHECK_OK(gdte_type_commit(parent));
    CHECK_OK(gdte_type_free(&parent));
    refused(copy);
    /* predefined handles are permanent */
    gdte_type_h d = DBL;
    CHECK(d == DBL);
    CHECK_OK(gdte_type_free(&d));
    CHECK(d == NULL);
    CHECK_OK(gdte_type_check(DBL));
    CHECK(gdte_type_predefined(GDTE_BASIC_COUNT_) == NULL);
}

/* Threads create, check and free types; each checks its own stale handles stay refused. */
static _Atomic int thread_failures;

static void *churn(void *arg)
{
    (void)arg;
    gdte_type_h prev = NULL;
    for (int i = 0; i < 20000; i++) {
        gdte_type_h t;
        if (gdte_type_create_contiguous(1 + i % 5, INT, &t) != GDTE_OK || gdte_type_check(t) != GDTE_OK ||
            (prev && gdte_type_check(prev) == GDTE_OK) || t == prev)
            thread_failures++;
        gdte_type_info_t in;
        if (gdte_type_get_info(t, &in) != GDTE_OK || in.size != 4 * (1 + i % 5)) thread_failures++;
        gdte_type_h keep = t;
        if (gdte_type_free(&t) != GDTE_OK) thread_failures++;
        prev = keep;
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t th[4];
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, churn, NULL);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK_EQ(thread_failures, 0);
}

int main(void)
{
    if (gdte_init(NULL) != GDTE_OK) return 1;
    int64_t live0 = gdte_engine_live_types();
    test_stale_reuse();
    test_forged();
    test_lifetimes();
    test_threads();
    CHECK_EQ(gdte_engine_live_types(), live0);
    gdte_finalize();
    return tu_report("engine_handles");
}
