/* The memory-kind cache behind gdte_mem_query (memquery.c). */
#ifndef GDTE_MEMQUERY_H
#define GDTE_MEMQUERY_H
#include <stddef.h>
#include <stdint.h>
#include "gdte.h"

/* The kinds of the first and last byte of a span, with one lookup when both lie in one cached
 * allocation or one pageable page (the MPI layer asks this for every message). */
gdte_status_t gdte_mem_query_span(const void *first, const void *last, gdte_mem_info_t *first_p,
                                  gdte_mem_info_t *last_p);
/* 1 when bytes `first` to `last` lie in one device or managed allocation, or when `first` is not
 * GPU memory at all (nothing to split), else 0: a type may reach from one allocation into another
 * (relative displacements between two arrays), which one kernel reads and writes well but one
 * runtime copy, or one IPC mapping, cannot cover. From the cached range of `first` when there is
 * one, not validated again: call it right after a validated lookup of the same buffer (the MPI
 * layer's kind check). */
int gdte_mem_span_one_alloc(const void *first, const void *last);
/* The device allocation holding `ptr`, from the same cache: its first byte and its unique id
 * (0 where the runtime has no id query). GDTE_ERR_UNSUPPORTED for managed memory (which the
 * GPU runtime's IPC cannot export), GDTE_ERR_MEMORY_KIND for other memory. */
gdte_status_t gdte_mem_query_alloc(const void *ptr, void **base_p, uint64_t *id_p);
/* Drop cached ranges overlapping [ptr, ptr+size): call when device memory is freed. */
void gdte_memquery_forget(const void *ptr, size_t size);
/* Drop everything and zero the counters (gdte_finalize, tests). */
void gdte_memquery_reset(void);
void gdte_memquery_stats(int64_t *hits_p, int64_t *misses_p, int *ranges_p);
/* Cached ranges found stale (their allocation freed behind gdte's back) and dropped. */
int64_t gdte_memquery_stale(void);
#endif
