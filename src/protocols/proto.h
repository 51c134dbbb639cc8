/*
 * proto.h: fragment-pipelined messages between processes over UCX (UCP active messages).
 *
 * A context owns a UCP context, one worker and one endpoint per peer; its requests move
 * `count` elements of a gdte type between a buffer of this process and one of a peer. A
 * message is matched by (peer, tag) in posting order, then the receiver chooses how the bytes
 * move (protocols.c: eager, copy-in/copy-out through staging rings, RDMA through GPU IPC).
 *
 * The public gdte_comm_* / gdte_msg_* calls of gdte.h are thin wrappers: gdte_comm_h is a
 * gdte_proto_ctx_h and gdte_msg_req_h is a gdte_proto_req_h. This header adds what the MPI
 * layer, tests and benchmarks need beyond the public surface (statistics, attributes).
 *
 * Threading: a context and its requests are used by one thread at a time (UCS_THREAD_MODE_SINGLE
 * worker); callers serialise.
 *
 * May call: src/kernels, src/engine, src/gpu, src/util, UCX. Called by: src/mpi, the public API.
 */
#ifndef GDTE_PROTO_H
#define GDTE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "gdte.h"

typedef struct gdte_comm *gdte_proto_ctx_h;    /* the object behind gdte_comm_h */
typedef struct gdte_msg_req *gdte_proto_req_h; /* the object behind gdte_msg_req_h */

/* ---- context ---------------------------------------------------------------------------- */
enum {
    GDTE_PROTO_CTX_FIELD_RANK = 1u << 0,
    GDTE_PROTO_CTX_FIELD_SIZE = 1u << 1,
    GDTE_PROTO_CTX_FIELD_ALLGATHER = 1u << 2,
    GDTE_PROTO_CTX_FIELD_ALLGATHER_ARG = 1u << 3,
};

typedef struct gdte_proto_ctx_params {
    uint64_t field_mask;          /* RANK, SIZE and ALLGATHER are required */
    int rank;                     /* this process, 0 <= rank < size */
    int size;                     /* number of processes */
    gdte_allgather_fn_t allgather; /* exchanges worker addresses; see gdte.h */
    void *allgather_arg;
} gdte_proto_ctx_params_t;

/* Collective over the `size` processes (it calls allgather twice). */
gdte_status_t gdte_proto_ctx_create(const gdte_proto_ctx_params_t *params, gdte_proto_ctx_h *ctx_p);
/* Local. Requests still in flight complete with GDTE_ERR_CANCELED; they stay valid until the
 * caller tests or frees them. */
gdte_status_t gdte_proto_ctx_destroy(gdte_proto_ctx_h ctx);
/* Drive UCX and every request once. Returns how many things happened (0: idle). */
unsigned gdte_proto_progress(gdte_proto_ctx_h ctx);

enum {
    GDTE_PROTO_CTX_ATTR_FIELD_RANK = 1u << 0,
    GDTE_PROTO_CTX_ATTR_FIELD_SIZE = 1u << 1,
    GDTE_PROTO_CTX_ATTR_FIELD_UCX_DEVICE_MEM = 1u << 2,
    GDTE_PROTO_CTX_ATTR_FIELD_STATS = 1u << 3,
};

/* Counters since the context was created (for tests, benchmarks and gdte_info). */
typedef struct gdte_proto_stats {
    int64_t msgs[4];           /* completed messages by gdte_protocol_t (index AUTO unused) */
    int64_t frags_sent;        /* pipeline fragments moved by this process as a sender */
    int64_t frags_recvd;       /* ... as a receiver */
    int64_t staging_peak;      /* most staging bytes (host and device) held at once */
    int64_t staging_allocs;    /* staging buffers allocated (a pool reuses them) */
    int64_t ipc_opens;         /* IPC handles opened (RDMA rings and user buffers) */
    int64_t ring_opens;        /* ... of them, peers' RDMA rings: once per peer */
    int64_t ring_allocs;       /* RDMA fragment rings exposed by this process */
    int64_t timeouts;          /* requests failed with GDTE_ERR_TIMEOUT */
    int64_t peer_failures;     /* peers declared failed */
    int64_t pulls;             /* RDMA messages received by packing the sender's data here */
    int64_t pulls_same;        /* ... of them between identical irregular types (one unit-copy kernel) */
} gdte_proto_stats_t;

typedef struct gdte_proto_ctx_attr {
    uint64_t field_mask;
    int rank;
    int size;
    int ucx_device_mem;        /* UCX can move device memory itself (CUDA memory type) */
    gdte_proto_stats_t stats;
} gdte_proto_ctx_attr_t;

gdte_status_t gdte_proto_ctx_query(gdte_proto_ctx_h ctx, gdte_proto_ctx_attr_t *attr_p);

/* Write the UCX transports of the endpoint to `peer` (ucp_ep_print_info) to `f`, creating
 * the endpoint if needed: benchmarks and tests log what their messages travel on. */
void gdte_proto_print_transports(gdte_proto_ctx_h ctx, int peer, FILE *f);

/* ---- messages --------------------------------------------------------------------------- */
/* Options of one send or receive: gdte_msg_params_t (gdte.h), used as is. */

/* Nonblocking send of `count` elements of `type` at `buf` to `peer` with `tag`. */
gdte_status_t gdte_proto_send_nb(gdte_proto_ctx_h ctx, const void *buf, int64_t count, gdte_type_h type,
                                 int peer, uint64_t tag, const gdte_msg_params_t *params,
                                 gdte_proto_req_h *req_p);
/* Nonblocking receive; `peer` may be GDTE_ANY_PEER, params->tag_mask selects tag bits. */
gdte_status_t gdte_proto_recv_nb(gdte_proto_ctx_h ctx, void *buf, int64_t count, gdte_type_h type, int peer,
                                 uint64_t tag, const gdte_msg_params_t *params, gdte_proto_req_h *req_p);

/* GDTE_INPROGRESS while in flight; otherwise the request's final status, with *status_p
 * filled (if not NULL). Does not progress and does not free. */
gdte_status_t gdte_proto_req_check(gdte_proto_req_h req, gdte_msg_status_t *status_p);
/* Release a completed request. GDTE_INPROGRESS (and nothing freed) while it is in flight. */
gdte_status_t gdte_proto_req_free(gdte_proto_req_h req);
/* A receive not yet matched completes with GDTE_ERR_CANCELED; otherwise GDTE_INPROGRESS
 * (too late) and the request goes on. Sends cannot be canceled. */
gdte_status_t gdte_proto_req_cancel(gdte_proto_req_h req);
/* The context a request belongs to (NULL once its context was destroyed). */
gdte_proto_ctx_h gdte_proto_req_ctx(gdte_proto_req_h req);

/* Is a message that a receive of (peer, tag, tag_mask) would match waiting? Progresses. */
gdte_status_t gdte_proto_probe(gdte_proto_ctx_h ctx, int peer, uint64_t tag, uint64_t tag_mask, int *found_p,
                               gdte_msg_status_t *status_p);

/* ---- tests only ----------------------------------------------------------------------------- */
/* Run the RDMA protocol without a GPU: "device" buffers are POSIX shared memory from
 * gdte_proto_test_shm_alloc, IPC handles are segment names, and GPU copies, packs and events
 * are synchronous host operations. Every process of the test calls it before creating its
 * context. It checks the protocol (rings, credits, shortcuts, caches), not any GPU. */
void gdte_proto_test_emulate_ipc(int on);
/* Emulated GPU work reads as pending for up to `polls` polls of its event (0: done at once). */
void gdte_proto_test_emulate_delay(int polls);
void *gdte_proto_test_shm_alloc(size_t size);
void gdte_proto_test_shm_free(void *ptr);

#endif
