/* Device copies of plans: uploaded once per type and device, kept until the type is freed or
 * evicted (GDTE_CACHE_MAX, least recently used first). */
#ifndef GDTE_DEVPLAN_H
#define GDTE_DEVPLAN_H
#include "gdte.h"
#include "kernels.h"
#include "engine/layout.h"

/* Device pointer to the type's units on the current device, uploading them on first use.
 * Returns once the units are on the device (usable from any stream). The pointer stays valid
 * while the type lives and until a later upload evicts the entry under GDTE_CACHE_MAX; code
 * that keeps it across other packs should use gdte_devplan_exec instead. */
gdte_status_t gdte_devplan_units(gdte_type_h type, const gdte_unit_t **dunits_p);

/* gdte_devplan_units, and the entry kept from eviction until gdte_devplan_unpin(type, device):
 * for a peer that reads the units (RDMA pull) while this process goes on packing other types. */
gdte_status_t gdte_devplan_pin(gdte_type_h type, const gdte_unit_t **dunits_p);
void gdte_devplan_unpin(gdte_type_h type, int dev);
/* A hash of the type's unit array (computed once per type): equal hashes and equal shapes mean
 * two processes' plans move the same bytes (RDMA pull between identical irregular types). */
gdte_status_t gdte_devplan_units_hash(gdte_type_h type, uint64_t *hash_p);

/* Run a UNITS layout of `type` on the GPU (as gdte_gpu_exec does) with its cached device plan.
 * On a type's first use on this device the upload is cut into chunks and the kernel packs
 * the units of chunk k while chunk k+1 is still being copied. */
gdte_status_t gdte_devplan_exec(gdte_type_h type, gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed,
                                int64_t offset, int64_t len, gdte_stream_t stream, int max_blocks);

typedef struct gdte_devplan_stats {
    int64_t bytes;     /* device memory held by cached plans */
    int64_t entries;   /* cached plans (one per type and device) */
    int64_t uploads;   /* plans uploaded so far */
    int64_t evictions; /* plans dropped to stay under GDTE_CACHE_MAX */
    int64_t hits, misses;
} gdte_devplan_stats_t;
void gdte_devplan_get_stats(gdte_devplan_stats_t *stats_p);

/* Bytes of device memory held by cached plans; number of uploads and evictions so far. */
int64_t gdte_devplan_bytes(void);
int64_t gdte_devplan_uploads(void);
int64_t gdte_devplan_evictions(void);
/* Tuning of a first use from runs (bench/pack's first-use sweep): the smallest chunk of runs,
 * in bytes, the growth factor of the chunks after it (0: the defaults), and `mode` (-1: the
 * default), a mask of: */
#define GDTE_DEVPLAN_DMA_RUNS 1 /* later chunks' runs copied to device memory before their cut */
#define GDTE_DEVPLAN_URGENT 2   /* later chunks uploaded and cut on a highest-priority stream */
#define GDTE_DEVPLAN_ONE_STREAM 4 /* every chunk cut in the caller's stream, behind the pack before */
void gdte_devplan_tune(int64_t runs_chunk_bytes, int growth, int mode);

/* Drop every cached plan (gdte_finalize; tests). */
void gdte_devplan_finalize(void);
#endif
