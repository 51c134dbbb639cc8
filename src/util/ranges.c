/* The sorted registry of disjoint address ranges (ranges.h). */
#include "ranges.h"
#include <stdlib.h>
#include <string.h>
#include "util.h"

static gdte_range_t *at(const gdte_ranges_t *r, int64_t i)
{
    return (gdte_range_t *)(r->v + (size_t)i * r->entry_size);
}

/* Index of the first entry with lo > p (n when none). */
static int64_t upper(const gdte_ranges_t *r, uintptr_t p)
{
    int64_t a = 0, b = r->n;
    while (a < b) {
        int64_t m = a + (b - a) / 2;
        if (at(r, m)->lo <= p)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* The entries overlapping [lo, hi) are [*first_p, *last_p): disjoint and sorted by lo, the
 * entries are sorted by hi too, so they form one run. */
static void overlapping(const gdte_ranges_t *r, uintptr_t lo, uintptr_t hi, int64_t *first_p, int64_t *last_p)
{
    int64_t a = 0, b = r->n;
    while (a < b) { /* the first entry with hi > lo */
        int64_t m = a + (b - a) / 2;
        if (at(r, m)->hi <= lo)
            a = m + 1;
        else
            b = m;
    }
    *first_p = a;
    b = r->n;
    while (a < b) { /* then the first with lo >= hi */
        int64_t m = a + (b - a) / 2;
        if (at(r, m)->lo < hi)
            a = m + 1;
        else
            b = m;
    }
    *last_p = a;
}

static void remove_run(gdte_ranges_t *r, int64_t first, int64_t last)
{
    if (first == last) return; /* also keeps an empty registry's NULL array out of memmove */
    memmove(at(r, first), at(r, last), (size_t)(r->n - last) * r->entry_size);
    r->n -= last - first;
}

void gdte_ranges_init(gdte_ranges_t *r, size_t entry_size, int64_t max)
{
    memset(r, 0, sizeof *r);
    pthread_rwlock_init(&r->lock, NULL);
    r->entry_size = entry_size;
    r->max = max;
}

void gdte_ranges_destroy(gdte_ranges_t *r)
{
    free(r->v);
    r->v = NULL;
    r->n = r->cap = 0;
    pthread_rwlock_destroy(&r->lock);
}

gdte_status_t gdte_ranges_insert(gdte_ranges_t *r, const void *entry, gdte_ranges_overlap_t overlap)
{
    gdte_range_t e;
    memcpy(&e, entry, sizeof e);
    if (e.lo >= e.hi) return GDTE_ERR_INVALID_ARG;
    gdte_status_t st = GDTE_OK;
    pthread_rwlock_wrlock(&r->lock);
    int64_t first, last;
    overlapping(r, e.lo, e.hi, &first, &last);
    if (first < last && overlap == GDTE_RANGES_REFUSE) {
        st = GDTE_ERR_INVALID_ARG;
        goto out;
    }
    /* Room first, so that a failure leaves every entry in place. */
    int64_t need = r->max > 0 && r->n >= r->max ? r->max : r->n + 1;
    if ((st = gdte_grow_(&r->v, &r->cap, need, r->entry_size, 16)) != GDTE_OK) goto out;
    remove_run(r, first, last);
    if (r->max > 0 && r->n >= r->max) {
        int64_t old = 0;
        for (int64_t i = 1; i < r->n; i++)
            if (at(r, i)->seq < at(r, old)->seq) old = i;
        remove_run(r, old, old + 1);
    }
    int64_t i = upper(r, e.lo);
    memmove(at(r, i + 1), at(r, i), (size_t)(r->n - i) * r->entry_size);
    memcpy(at(r, i), entry, r->entry_size);
    at(r, i)->seq = r->next_seq++;
    r->n++;
out:
    pthread_rwlock_unlock(&r->lock);
    return st;
}

int gdte_ranges_find(gdte_ranges_t *r, uintptr_t p, void *entry_p)
{
    pthread_rwlock_rdlock(&r->lock);
    int64_t i = upper(r, p) - 1;
    int in = i >= 0 && p < at(r, i)->hi;
    if (in && entry_p) memcpy(entry_p, at(r, i), r->entry_size);
    pthread_rwlock_unlock(&r->lock);
    return in;
}

int gdte_ranges_remove_at(gdte_ranges_t *r, uintptr_t lo)
{
    pthread_rwlock_wrlock(&r->lock);
    int64_t i = upper(r, lo) - 1;
    int found = i >= 0 && at(r, i)->lo == lo;
    if (found) remove_run(r, i, i + 1);
    pthread_rwlock_unlock(&r->lock);
    return found;
}

int64_t gdte_ranges_remove_overlapping(gdte_ranges_t *r, uintptr_t lo, uintptr_t hi)
{
    if (lo >= hi) return 0;
    pthread_rwlock_wrlock(&r->lock);
    int64_t first, last;
    overlapping(r, lo, hi, &first, &last);
    remove_run(r, first, last);
    pthread_rwlock_unlock(&r->lock);
    return last - first;
}

void gdte_ranges_clear(gdte_ranges_t *r)
{
    pthread_rwlock_wrlock(&r->lock);
    free(r->v);
    r->v = NULL;
    r->n = r->cap = 0;
    pthread_rwlock_unlock(&r->lock);
}

int64_t gdte_ranges_count(gdte_ranges_t *r)
{
    pthread_rwlock_rdlock(&r->lock);
    int64_t n = r->n;
    pthread_rwlock_unlock(&r->lock);
    return n;
}
