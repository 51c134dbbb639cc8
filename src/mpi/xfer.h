/*
 * xfer.h: moving the packed stream of a device buffer to host memory and back, in fragments
 * so that packing and the device-host copy overlap (the copy-in/copy-out protocol, Wu 2017, 4.3.2).
 *
 * Device to host, for each fragment k (slot = k mod depth of a device ring):
 *   pack stream: [wait copy k-depth] pack k into ring[slot]  -> event packed[slot]
 *   copy stream: [wait packed[slot]] copy ring[slot] to host -> event copied[slot]
 * so the kernel of fragment k+1 runs while fragment k crosses the bus. Small messages into
 * mapped pinned memory skip the ring: one kernel writes the host buffer directly (zero copy).
 * Host to device is the mirror image (copy k+1 while unpacking k).
 *
 * With `fake` (GDTE_FAKE_DEVICE) the user buffer is host memory standing in for a device: the
 * same fragment loop, ring and offsets run with the host executor and memcpy, synchronously,
 * so CI exercises everything but the GPU calls.
 *
 * Thread-safe (one pipeline at a time per process: the streams and events are shared).
 * May call: src/kernels (gdte_pack/gdte_unpack), src/gpu, src/util, staging.
 */
#ifndef GDTE_MPI_XFER_H
#define GDTE_MPI_XFER_H

#include <stdint.h>
#include "gdte.h"
#include "staging.h"

/* Bytes [0, nbytes) of the packed stream of (user, count, type) into host memory `dst`.
 * `dst_pinned`: dst is mapped pinned staging (zero copy allowed; DMA without bouncing). */
gdte_status_t gdte_xfer_pack_to_host(const void *user, int64_t count, gdte_type_h type, int fake, void *dst,
                                     int dst_pinned, int64_t nbytes);
/* The same, handing each fragment on as soon as its bytes are in `dst`: ready(arg, off, len) is
 * called for fragments of `frag` bytes in order (the last one shorter), and idle(arg) (may be
 * NULL) between polls while the next one is still on its way; a ready() that fails stops the
 * pipeline with its status. Used to post each fragment to the network while the next ones are
 * packed and copied. */
typedef struct gdte_xfer_notify {
    gdte_status_t (*ready)(void *arg, int64_t off, int64_t len);
    void (*idle)(void *arg);
    void *arg;
    int64_t frag;
} gdte_xfer_notify_t;
gdte_status_t gdte_xfer_pack_to_host_notify(const void *user, int64_t count, gdte_type_h type, int fake, void *dst,
                                            int64_t nbytes, const gdte_xfer_notify_t *nt);
/* The same without waiting: everything is queued and the call returns; the job reports which
 * fragments of `frag` bytes have landed in `dst`, in order (`block`: wait for all), and holds
 * what the queued work uses (its events, a reference to `type`; the device ring is shared by all jobs) until
 * gdte_xfer_job_end, which waits for the work first. On an error nothing is left queued and no
 * job is made. A message of one fragment takes the copy engines alone where its layout allows. */
typedef struct gdte_xfer_job gdte_xfer_job_t;
gdte_status_t gdte_xfer_pack_to_host_start(const void *user, int64_t count, gdte_type_h type, int fake, void *dst,
                                           int64_t nbytes, int64_t frag, gdte_xfer_job_t **job_p);
gdte_status_t gdte_xfer_job_landed(gdte_xfer_job_t *job, int block, int64_t *landed_p);
void gdte_xfer_job_end(gdte_xfer_job_t *job);
/* With GDTETEST_FRAG_TIMES set: host seconds the job spent queueing packs, ordering (events and
 * stream waits) and copies, else zeros. */
void gdte_xfer_job_times(const gdte_xfer_job_t *job, double t[3]);
/* (A message of one fragment goes the way of gdte_xfer_pack_to_host, `dst` taken as pinned.) */
/* Bytes [0, nbytes) of the packed stream, read from host memory `src`, into (user, count, type).
 * nbytes may be shorter than the whole stream (a short message). */
gdte_status_t gdte_xfer_unpack_from_host(const void *src, int src_pinned, int64_t nbytes, void *user, int64_t count,
                                         gdte_type_h type, int fake);
/* The same for a staging buffer of either kind: HOST as above; DEVICE (the MPI moves device
 * memory itself) one kernel between the user's layout and the packed bytes, no host copy.
 * Unpack reads `n` bytes where a receive of `posted` bytes was posted (gdte_stage_tail). */
gdte_status_t gdte_xfer_pack_stage(const void *user, int64_t count, gdte_type_h type, int fake,
                                   const gdte_stage_t *stage, int64_t nbytes);
gdte_status_t gdte_xfer_unpack_stage(const gdte_stage_t *stage, int64_t posted, int64_t n, void *user, int64_t count,
                                     gdte_type_h type, int fake);
/* Fragment size the pipeline uses for a message of `nbytes` (GDTE_FRAG_SIZE, or chosen). */
int64_t gdte_xfer_frag_size(int64_t nbytes);
/* Fragments moved so far (all directions), and transfers that used zero copy. */
int64_t gdte_xfer_fragments(void);
int64_t gdte_xfer_zero_copies(void);
/* 1 when a message of (type, count), `nbytes` packed, is small and regular enough for the
 * copy engines alone both ways through pinned host staging (a GPU present). */
int gdte_xfer_copy_engine_fits(gdte_type_h type, int64_t count, int64_t nbytes);
/* The same question of the layout alone, GPU or not: small, and one block or blocks at one stride. */
int gdte_xfer_copy_engine_shape(gdte_type_h type, int64_t count, int64_t nbytes);
/* Transfers done by the copy engines alone (small dense or single-stride messages). */
int64_t gdte_xfer_copy_engine(void);
void gdte_xfer_finalize(void);

/* The copy-engine path's bounds: bytes of a message and rows of a strided one (a value <= 0
 * leaves one as it is). */
void gdte_xfer_set_ce_bounds(int64_t bytes, int64_t rows);

#endif
