/*
 * A registry of disjoint address ranges [lo, hi), sorted by address, each carrying the caller's
 * fields: lookups by address are a binary search under a read lock, so any number of threads
 * look up at once while inserts and removals take the write lock. Used by the memory-kind cache
 * (src/kernels/memquery.c: device allocations with their kind and buffer id, at most 256, the
 * oldest evicted) and by the fake device memory of the MPI tests (src/mpi/fakedev.c: ranges
 * that refuse overlaps).
 *
 * Ours rather than a library's: the ranges never overlap, so what an interval tree adds (overlap
 * queries over nested intervals) is not needed, and the one query that is, "which range holds
 * this byte", runs on every message; a sorted array answers it from one or two cache lines
 * without a node allocation per insert, and adds no run-time dependency to libgdte_mpi.so, which
 * is preloaded into every process of an MPI job.
 *
 * An entry is the caller's struct whose first member is a gdte_range_t:
 *     typedef struct { gdte_range_t r; uint64_t id; } my_entry_t;
 *     static gdte_ranges_t reg = GDTE_RANGES_INIT(my_entry_t, 256);
 * Entries are copied in and out whole, so a lookup's answer stays valid after the lock is gone.
 */
#ifndef GDTE_UTIL_RANGES_H
#define GDTE_UTIL_RANGES_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "gdte.h"

typedef struct gdte_range {
    uintptr_t lo, hi; /* [lo, hi), lo < hi */
    uint64_t seq;     /* insertion order, set by the registry (which entry is oldest) */
} gdte_range_t;

typedef struct gdte_ranges {
    pthread_rwlock_t lock;
    size_t entry_size; /* sizeof the caller's entry, a gdte_range_t first */
    int64_t max;       /* at most this many entries, the oldest evicted first; 0: no limit */
    unsigned char *v;  /* n entries of entry_size bytes, sorted by lo, disjoint */
    int64_t n, cap;
    uint64_t next_seq;
} gdte_ranges_t;

/* A registry of `entry_type` entries, for static storage. */
#define GDTE_RANGES_INIT(entry_type, max_entries)                                                  \
    {.lock = PTHREAD_RWLOCK_INITIALIZER, .entry_size = sizeof(entry_type), .max = (max_entries)}

/* The same at run time, for a registry not in static storage; gdte_ranges_destroy ends it. */
void gdte_ranges_init(gdte_ranges_t *r, size_t entry_size, int64_t max);
void gdte_ranges_destroy(gdte_ranges_t *r);

/* What gdte_ranges_insert does with the entries the new one overlaps. */
typedef enum {
    GDTE_RANGES_REFUSE,  /* keep them; the insert fails with GDTE_ERR_INVALID_ARG */
    GDTE_RANGES_REPLACE, /* drop them (a cache whose new answer supersedes stale ones) */
} gdte_ranges_overlap_t;

/* Insert a copy of `entry` (its gdte_range_t first; seq is ignored). GDTE_ERR_INVALID_ARG for an
 * empty range (lo >= hi) or, under GDTE_RANGES_REFUSE, one that overlaps an entry;
 * GDTE_ERR_NO_MEMORY with the registry as it was. At the registry's limit the oldest entry goes
 * first (after any REPLACE drops, so an insert drops the oldest only when it must). */
gdte_status_t gdte_ranges_insert(gdte_ranges_t *r, const void *entry, gdte_ranges_overlap_t overlap);
/* 1 when an entry holds byte `p`, copied to *entry_p when entry_p is not NULL; else 0. */
int gdte_ranges_find(gdte_ranges_t *r, uintptr_t p, void *entry_p);
/* Remove the entry that starts at `lo`: 1, or 0 when none starts there. */
int gdte_ranges_remove_at(gdte_ranges_t *r, uintptr_t lo);
/* Remove every entry that overlaps [lo, hi): how many went. */
int64_t gdte_ranges_remove_overlapping(gdte_ranges_t *r, uintptr_t lo, uintptr_t hi);
/* Remove every entry and give back the memory. */
void gdte_ranges_clear(gdte_ranges_t *r);
int64_t gdte_ranges_count(gdte_ranges_t *r);

#endif
