/*
 * proto_int.h: what the files of src/protocols share: the wire format of the active
 * messages, the context, peer and request objects, and the protocol table.
 */
#ifndef GDTE_PROTO_INT_H
#define GDTE_PROTO_INT_H

#include <string.h>
#include <ucp/api/ucp.h>
#include <uthash.h>
#include "proto.h"
#include "staging.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "util/util.h"

/* Messages at most this long (packed) travel inside the handshake when the protocol is auto. */
#define GDTE_PROTO_EAGER_MAX 8192
#define GDTE_PROTO_MAX_DEPTH 64
/* RDMA ring slot when GDTE_FRAG_SIZE is 0: fragments over NVLink need a few MiB to hide the
 * per-fragment control round trip. */
#define GDTE_PROTO_RING_SLOT_DEFAULT (4 << 20)
#define GDTE_PROTO_RING_SLOTS_MIN 8
/* Opened IPC mappings of a peer's allocations (its ring and user buffers) kept per peer: each
 * costs a driver mapping, and CUDA lets a process map an allocation only once, so there is
 * exactly one entry per remote allocation, shared by every buffer inside it. */
#define GDTE_PROTO_IPC_CACHE 16
/* Consecutive IPC failures with one peer before RDMA to it is given up for good (each failed
 * message itself falls back to copy-in/out). */
#define GDTE_PROTO_IPC_MAX_FAIL 4
/* FIN status (not a gdte_status_t): the sender could not reach the receiver's buffer; the
 * receiver answers the same handshake again, with copy-in/out. Nothing was written. */
#define GDTE_FIN_REDO 0x7fff0001

/* ---- wire format (all messages carry the sender's rank; both ends run the same build) ---- */
enum {
    GDTE_AM_RTS = 0, /* sender -> receiver: shape of a message (+ packed bytes when eager) */
    GDTE_AM_CTS,     /* receiver -> sender: accepted length, protocol, fragments, credits */
    GDTE_AM_FRAG,    /* copy-in/out: one fragment's bytes */
    GDTE_AM_ACK,     /* copy-in/out: receive slots freed (credits) */
    GDTE_AM_READY,   /* RDMA: fragment k is packed in ring slot s */
    GDTE_AM_DONE,    /* RDMA: ring slot s may be reused */
    GDTE_AM_FIN,     /* end of a transfer: success of a one-sided shortcut, or an abort */
    GDTE_AM_COUNT_
};

enum {
    GDTE_RTS_EAGER = 1u << 0,      /* packed bytes follow as the AM payload */
    GDTE_RTS_CONTIG = 1u << 1,     /* the sender's data is one dense block */
    GDTE_RTS_DEVICE = 1u << 2,     /* ... in device memory */
    GDTE_RTS_RING = 1u << 3,       /* an RDMA ring is offered (ring_* fields) */
    GDTE_RTS_BUF_HANDLE = 1u << 4, /* contiguous device data exported (buf_h, buf_off) */
    GDTE_RTS_ANY_SIG = 1u << 5,    /* skip the signature check */
    GDTE_RTS_SRC_LAYOUT = 1u << 6, /* non-contiguous device data exported (buf_h, buf_off) with its
                                    * layout (lay): the receiver may pack it itself (RDMA pull) */
};

/* Pull: boundaries of a single repetition's packed stream, each with the unit that holds it, so
 * that a receiver packing a fragment of a UNITS layout launches only that fragment's units. */
#define GDTE_WIRE_UNIT_MARKS 16

/* A sender's layout as the receiver needs it to pack the sender's buffer (buf_h + buf_off is the
 * layout's byte 0, i.e. its disp is already applied). UNITS: the unit array is exported too
 * (units_h + units_off), and stays valid until the sender's request completes. */
typedef struct gdte_wire_layout {
    int32_t kind;
    int32_t ndims;
    int64_t blocklen;
    int64_t total;
    int64_t count[GDTE_MAX_DIMS];
    int64_t stride[GDTE_MAX_DIMS];
    int64_t nunits;
    int64_t rep_bytes;
    int32_t max_unit_len;
    int32_t align;
    int64_t units_off;
    uint64_t units_hash; /* gdte_devplan_units_hash of the sender's type */
    int64_t mark_byte[GDTE_WIRE_UNIT_MARKS + 1]; /* rep_bytes * j / MARKS */
    int64_t mark_unit[GDTE_WIRE_UNIT_MARKS + 1]; /* the unit holding that byte (nunits at the end) */
    gdte_gpu_ipc_handle_t units_h;
} gdte_wire_layout_t;

typedef struct gdte_wire_rts {
    int32_t src;
    uint32_t flags;
    uint64_t sreq;
    uint64_t tag;
    uint64_t seq;      /* per ordered pair: restores send order if the transport reorders */
    int64_t size;      /* packed bytes */
    uint64_t sig_hash;
    int64_t sig_n;
    int64_t max_frag;  /* largest fragment the sender can stage */
    int32_t protocol;  /* gdte_protocol_t the sender allows (AUTO: any) */
    int32_t dev;       /* sender's GPU ordinal, -1 if none */
    uint64_t node;     /* host identity: IPC needs the same node */
    uint32_t pci;      /* domain/bus/device of the sender's GPU: ordinals differ per process */
    int32_t ring_slots;
    uint64_t ring_id;
    int64_t ring_slot_bytes;
    int64_t buf_off;   /* data offset inside the exported allocation */
    gdte_gpu_ipc_handle_t ring_h;
    gdte_gpu_ipc_handle_t buf_h;
    gdte_wire_layout_t lay; /* GDTE_RTS_SRC_LAYOUT */
} gdte_wire_rts_t;

enum {
    GDTE_CTS_DST_HANDLE = 1u << 0, /* RDMA: pack straight into the receiver's buffer */
    GDTE_CTS_SRC_DIRECT = 1u << 1, /* RDMA: the receiver reads the sender's buffer itself */
};

typedef struct gdte_wire_cts {
    int32_t src;
    int32_t status;    /* GDTE_OK, or why the receive refused (mismatch) */
    uint64_t sreq, rreq;
    int64_t len;       /* bytes to transfer (less than size when truncated) */
    int64_t frag;
    int32_t protocol;
    int32_t credits;   /* fragments the sender may have in flight */
    uint32_t flags;
    int32_t pad;
    int64_t buf_off;
    gdte_gpu_ipc_handle_t buf_h;
} gdte_wire_cts_t;

typedef struct gdte_wire_frag {
    int32_t src;
    int32_t pad;
    uint64_t rreq;
    int64_t k;
} gdte_wire_frag_t;

typedef struct gdte_wire_ack {
    int32_t src;
    int32_t n;
    uint64_t sreq;
} gdte_wire_ack_t;

typedef struct gdte_wire_ready {
    int32_t src;
    int32_t slot;
    uint64_t req;      /* READY: the receiver's request; DONE: the sender's */
    int64_t k;
    uint64_t ring_id;
} gdte_wire_ready_t;

typedef struct gdte_wire_fin {
    int32_t src;
    int32_t status;
    uint64_t req;      /* the recipient's request; 0 when the sender never learned it ... */
    uint64_t sreq;     /* ... then the handshake to revoke is named by the sender's request */
    int64_t bytes;
} gdte_wire_fin_t;

/* ---- objects ---------------------------------------------------------------------------- */
typedef struct gdte_unexp {
    struct gdte_unexp *prev, *next;
    gdte_wire_rts_t rts;
    void *payload;     /* eager bytes (malloc), or NULL */
    int64_t payload_len;
} gdte_unexp_t;

/* An RDMA fragment ring this process exposes to one peer (sender side). */
typedef struct gdte_ring {
    uint64_t id;
    gdte_stg_buf_t *buf;
    int slots;
    int64_t slot_bytes;
    uint8_t busy[GDTE_PROTO_MAX_DEPTH];
    int nbusy;
    gdte_gpu_ipc_handle_t handle;
} gdte_ring_t;

/* One mapping of one remote allocation, named by the IPC handle of its base (rdma_mem.c
 * exports base + offset, so every buffer of an allocation has the same handle bytes). */
typedef struct gdte_ipc_map {
    gdte_gpu_ipc_handle_t h;
    void *base;
    uint64_t last_use;
    int refs;                     /* users now (requests, the peer's ring): not evicted */
} gdte_ipc_map_t;

typedef struct gdte_peer {
    struct gdte_comm *ctx;
    int rank;
    ucp_ep_h ep;
    void *close_req;              /* ucp_ep_close_nbx in flight */
    void *addr;
    size_t addr_len;
    int failed;
    gdte_status_t fail_status;
    int64_t pid;                  /* the peer's pid when it is on this node, else 0 */
    uint64_t tx_seq, rx_seq;
    gdte_unexp_t *early;          /* handshakes that arrived ahead of their turn */
    gdte_ring_t *ring;            /* ours, exposed to this peer */
    int ring_failed;              /* no RDMA offers to this peer (no ring, or IPC failed) */
    uint64_t peer_ring_id;        /* the peer's ring, opened here ... */
    gdte_ipc_map_t *peer_ring_map; /* ... through the mapping table (holds one reference) */
    int ipc_failed;               /* IPC with this peer failed GDTE_PROTO_IPC_MAX_FAIL times in a row */
    int ipc_fail_count;
    uint32_t reach_pci;           /* the peer GPU last checked for access from ours ... */
    int reach;                    /* ... and the answer: 1 reachable, -1 not, 0 not checked */
    gdte_ipc_map_t ipc_cache[GDTE_PROTO_IPC_CACHE];
} gdte_peer_t;

/* One fragment of a pipeline in flight, on either side. */
enum {
    GDTE_SLOT_FREE = 0,
    GDTE_SLOT_PACKING,   /* GPU pack or copy queued, event pending */
    GDTE_SLOT_READY,     /* packed, waiting to be sent */
    GDTE_SLOT_SENDING,   /* UCX send in flight */
    GDTE_SLOT_ARRIVED,   /* receiver: rendezvous descriptor held, data not fetched */
    GDTE_SLOT_RECVING,   /* receiver: UCX fetch in flight */
    GDTE_SLOT_RECEIVED,  /* receiver: bytes in staging, to unpack */
    GDTE_SLOT_UNPACKING, /* GPU unpack queued, event pending */
};

typedef struct gdte_slot {
    struct gdte_msg_req *req;
    int state;
    int ucx_pending;      /* a UCX operation holds this slot */
    int64_t k, off, len;
    gdte_stg_buf_t *host; /* staging kept for the whole message and reused by its fragments */
    gdte_stg_buf_t *dev;
    gdte_gpu_event_t ev;  /* completion of the GPU work queued for this fragment */
    gdte_gpu_event_t ev2; /* RDMA local copy: the copy out of the peer's ring is done */
    int ev2_pending;
    int ring_slot;        /* RDMA */
    void *desc;           /* rendezvous descriptor from UCX */
    gdte_wire_frag_t hdr; /* lives until the send completes */
} gdte_slot_t;

enum {
    GDTE_REQ_POSTED = 0, /* receive in the posted queue */
    GDTE_REQ_WAIT_RES,   /* receive matched, waiting for staging to answer */
    GDTE_REQ_WAIT_CTS,   /* send: handshake out */
    GDTE_REQ_ACTIVE,     /* protocol running */
    GDTE_REQ_DRAIN,      /* finished or failed; waiting for operations still holding buffers */
    GDTE_REQ_DONE,
};

typedef struct gdte_proto_ops gdte_proto_ops_t;

struct gdte_msg_req {
    uint64_t id;
    UT_hash_handle hh;
    struct gdte_msg_req *prev, *next; /* posted queue, or active list */
    struct gdte_comm *ctx;
    int is_send;
    int state;
    int on_list;           /* 1 posted, 2 active */
    int in_hash;
    int peer;
    uint64_t tag, tag_mask;
    uint64_t flags;
    int want_protocol;     /* gdte_protocol_t */
    int64_t want_frag;
    int want_depth;
    /* the local side */
    void *buf;
    int64_t count;
    gdte_type_h type;
    gdte_layout_t L;
    int contig;            /* L is one dense block at buf + L.disp */
    int on_dev;            /* data in device memory and a GPU to reach it */
    int dev;               /* its GPU ordinal */
    int64_t size;
    uint64_t sig_hash;
    int64_t sig_n;
    /* what the two sides agreed */
    gdte_wire_rts_t rts;   /* receiver: the sender's shape */
    gdte_wire_cts_t cts;   /* sender: the receiver's answer, acted on outside the callback */
    int cts_arrived;
    uint64_t peer_req;
    int64_t len, frag, nfrags;
    const gdte_proto_ops_t *proto;
    int credits;           /* send: fragments that may still go out; recv: given at CTS */
    int64_t next_k;        /* next fragment to start */
    int64_t frags_done;
    int64_t acks_sent;
    int acks_owed;
    int nslots;
    gdte_slot_t *slots;
    int outstanding;       /* UCX operations and GPU events not yet completed */
    void *eager_buf;       /* send: packed bytes of an eager message; recv: unexpected payload */
    void *peer_mem;        /* RDMA shortcut: the peer's buffer opened here (cached, not owned) */
    gdte_ipc_map_t *ipc_ref; /* ... and the cache entry it pins */
    /* RDMA receiver: READYs that found every local slot busy. With the local copy the DONE of a
     * fragment goes out once its copy is done, while its slot still unpacks, so the sender may
     * announce the next fragment before a slot is free; it waits here (at most one per ring
     * slot the sender has, bounded by the depth). Each entry counts in `outstanding`. */
    int64_t rdy_k[GDTE_PROTO_MAX_DEPTH];
    int32_t rdy_slot[GDTE_PROTO_MAX_DEPTH];
    int nrdy;
    int mem_kind;          /* gdte_mem_kind_t of the data */
    int rdma_mode;         /* RDMA: 0 ring, GDTE_CTS_SRC_DIRECT or GDTE_CTS_DST_HANDLE */
    int truncated;         /* receive shorter than the message: GDTE_ERR_TRUNCATE at the end */
    gdte_gpu_event_t ev;   /* RDMA shortcut work */
    int ev_pending;
    int fin_wait;          /* waiting for the peer's FIN */
    int fin_early;         /* ... which came with the CTS, before the CTS was acted on */
    int fin_send;          /* send a FIN with `status` once drained */
    /* RDMA pull. Sender: its device units pinned for the receiver (units_pinned), or, emulated,
     * a shared copy of them (units_emu). Receiver: the sender's units mapped here. */
    int units_pinned;
    int dst_retry;         /* sender, contiguous-receiver shortcut: waiting for a mapping entry */
    int pull_same;         /* receiver: the sender's irregular layout is ours (same units) */
    gdte_stg_buf_t *units_emu;
    gdte_ipc_map_t *units_ref;
    /* outcome */
    gdte_status_t status;
    gdte_msg_status_t info;
    double t_last;
    int timed;             /* subject to GDTE_TIMEOUT (a transfer is under way) */
};

struct gdte_comm {
    int rank, size;
    ucp_context_h ucp;
    ucp_worker_h worker;
    gdte_peer_t *peers;
    size_t max_am_header;
    int ucx_cuda;          /* UCX moves CUDA memory itself */
    int peer_errh;         /* endpoints report peer failure (UCP_ERR_HANDLING_MODE_PEER) */
    int gpu;               /* a GPU is available in this process */
    int dev;
    uint32_t pci;
    uint64_t node;
    uint64_t next_id;
    uint64_t next_ring_id;
    struct gdte_msg_req *by_id;
    struct gdte_msg_req *posted;
    struct gdte_msg_req *active;
    gdte_unexp_t *unexpected;
    gdte_stg_pool_t pool;
    gdte_stream_t stream;  /* GPU work of sends (packs, copies out), in order */
    gdte_stream_t rstream; /* GPU work of receives (unpacks, copies in): overlaps with sends */
    gdte_gpu_event_t *ev_cache;
    int n_ev_cache, cap_ev_cache;
    void *bounce;          /* pinned, GDTE_PROTO_EAGER_MAX: eager bytes to and from the GPU */
    double timeout;
    double next_check;
    uint64_t ipc_clock;
    /* Emulated RDMA pull: shared segments that held a message's units, kept for the next one
     * (as the GPU's plan slabs are), so that the peer's mapping of them is reused. */
    gdte_stg_buf_t *emu_units_free[4];
    int in_progress;
    gdte_proto_stats_t stats;
};

/* ---- protocol table --------------------------------------------------------------------- */
struct gdte_proto_ops {
    const char *name;
    gdte_protocol_t id;
    /* Receiver, after a match: can this protocol move the message? */
    int (*usable)(struct gdte_msg_req *rreq);
    /* Receiver: reserve resources, answer with a CTS. GDTE_INPROGRESS: retry later. */
    gdte_status_t (*recv_start)(struct gdte_msg_req *rreq);
    /* Sender, on the CTS. */
    gdte_status_t (*send_start)(struct gdte_msg_req *sreq, const gdte_wire_cts_t *cts);
    /* Either side: move the pipeline forward; returns how many steps were taken. */
    int (*progress)(struct gdte_msg_req *req);
};

extern const gdte_proto_ops_t gdte_proto_eager_ops;
extern const gdte_proto_ops_t gdte_proto_copyinout_ops;
extern const gdte_proto_ops_t gdte_proto_rdma_ops;
const gdte_proto_ops_t *gdte_proto_ops_by_id(int id);

/* ---- shared helpers (ctx.c) ------------------------------------------------------------- */
gdte_status_t gdte_proto_status_from_ucs(ucs_status_t s);
ucp_ep_h gdte_proto_ep(struct gdte_comm *ctx, int peer);
/* Send a header-only (plus optional payload) control message; the header is copied. */
gdte_status_t gdte_proto_ctrl_send(struct gdte_comm *ctx, int peer, unsigned am_id, const void *hdr,
                                   size_t hdr_len);
void gdte_proto_peer_failed(struct gdte_comm *ctx, int peer, gdte_status_t why);
struct gdte_msg_req *gdte_proto_req_lookup(struct gdte_comm *ctx, uint64_t id);
/* The request progressed: reset its GDTE_TIMEOUT clock. */
static inline void gdte_proto_touch(struct gdte_msg_req *req) { req->t_last = gdte_time_now(); }
void gdte_proto_activate(struct gdte_msg_req *req);
/* End the request with `st` (first error wins); it completes once nothing holds its buffers.
 * `tell_peer`: send the peer a FIN with the status. */
void gdte_proto_fail(struct gdte_msg_req *req, gdte_status_t st, int tell_peer);
/* All work done with status OK: move to drain/complete. */
void gdte_proto_finish(struct gdte_msg_req *req);
gdte_status_t gdte_proto_event_get(struct gdte_comm *ctx, gdte_gpu_event_t *ev_p);
void gdte_proto_event_put(struct gdte_comm *ctx, gdte_gpu_event_t ev);

static inline gdte_stream_t gdte_proto_stream(const struct gdte_msg_req *req)
{
    return req->is_send ? req->ctx->stream : req->ctx->rstream;
}

/* An active message's fixed-size header, copied out (UCX may hand headers at any alignment).
 * 0: its size is not `want` (not ours, or another build's): the handler drops it. */
static inline int gdte_proto_header(void *dst, size_t want, const void *header, size_t header_length)
{
    if (header_length != want) return 0;
    memcpy(dst, header, want);
    return 1;
}

/* ---- handshake and matching (match.c) --------------------------------------------------- */
ucs_status_t gdte_proto_rts_handler(void *arg, const void *header, size_t header_length, void *data,
                                    size_t length, const ucp_am_recv_param_t *param);
ucs_status_t gdte_proto_cts_handler(void *arg, const void *header, size_t header_length, void *data,
                                    size_t length, const ucp_am_recv_param_t *param);
ucs_status_t gdte_proto_fin_handler(void *arg, const void *header, size_t header_length, void *data,
                                    size_t length, const ucp_am_recv_param_t *param);
/* Receiver: the chosen protocol was set up; send the CTS. */
gdte_status_t gdte_proto_send_cts(struct gdte_msg_req *rreq, int credits, uint32_t flags, int64_t buf_off,
                                  const gdte_gpu_ipc_handle_t *buf_h);
void gdte_proto_match_retry(struct gdte_msg_req *rreq);

/* ---- copy-in/out (p_copyinout.c) and RDMA (p_rdma.c) handlers --------------------------- */
ucs_status_t gdte_proto_frag_handler(void *arg, const void *header, size_t header_length, void *data,
                                     size_t length, const ucp_am_recv_param_t *param);
ucs_status_t gdte_proto_ack_handler(void *arg, const void *header, size_t header_length, void *data,
                                    size_t length, const ucp_am_recv_param_t *param);
ucs_status_t gdte_proto_ready_handler(void *arg, const void *header, size_t header_length, void *data,
                                      size_t length, const ucp_am_recv_param_t *param);
ucs_status_t gdte_proto_done_handler(void *arg, const void *header, size_t header_length, void *data,
                                     size_t length, const ucp_am_recv_param_t *param);
/* Receiver side of a FIN for a one-sided RDMA shortcut. */
void gdte_proto_rdma_fin(struct gdte_msg_req *req, const gdte_wire_fin_t *fin);
/* Receiver of a contiguous-receiver shortcut: the sender asked for copy-in/out (GDTE_FIN_REDO). */
void gdte_proto_rdma_redo(struct gdte_msg_req *req);
gdte_status_t gdte_proto_slots_alloc(struct gdte_msg_req *req, int n);
/* Sender of a fragmented transfer, on the CTS: fragment size and credits from it (a fragment over
 * `max_frag`, when > 0, is refused), and the slots for its depth. */
gdte_status_t gdte_proto_send_frags(struct gdte_msg_req *req, const gdte_wire_cts_t *cts, int64_t max_frag);
gdte_slot_t *gdte_proto_slot_free(struct gdte_msg_req *req);
/* Record (creating it on first use) an event after the work queued on the context stream. */
gdte_status_t gdte_proto_record(struct gdte_msg_req *req, gdte_gpu_event_t *ev);
/* Release what a request holds in the pipeline (staging, events, IPC mapping pins). */
void gdte_proto_slots_release(struct gdte_msg_req *req);
/* Sender, before the RTS: offer RDMA (ring and, for contiguous data, the buffer's handle). */
void gdte_proto_rdma_offer(struct gdte_msg_req *sreq, gdte_wire_rts_t *rts);
/* What an RDMA pull holds on either side (sender: its exported units; receiver: their mapping). */
void gdte_proto_rdma_release(struct gdte_msg_req *req);
/* Drop every IPC mapping and ring of a context. */
void gdte_proto_rdma_cleanup(struct gdte_comm *ctx);

/* ---- device memory for RDMA: the GPU runtime, or the tests' host emulation (rdma_mem.c) ---- */
int gdte_rdma_emulated(void);
int gdte_rdma_capable(const struct gdte_comm *ctx);
/* The request's data can be reached by RDMA (device memory; emulation: a test segment). */
int gdte_rdma_buffer_ok(const struct gdte_msg_req *req);
/* ... and exported as it is (an IPC handle of its allocation). */
int gdte_rdma_exportable(const struct gdte_msg_req *req);
/* Device staging; `shared`: exportable to a peer (a ring). */
gdte_status_t gdte_rdma_alloc(struct gdte_comm *ctx, gdte_stg_class_t cls, int64_t bytes, int shared,
                              gdte_stg_buf_t **buf_p);
void gdte_rdma_free(struct gdte_comm *ctx, gdte_stg_buf_t *buf);
gdte_status_t gdte_rdma_export(const void *ptr, gdte_gpu_ipc_handle_t *h, int64_t *off_p);
gdte_status_t gdte_rdma_open(const gdte_gpu_ipc_handle_t *h, void **base_p);
void gdte_rdma_close(void *base);
gdte_status_t gdte_rdma_copy(struct gdte_msg_req *req, void *dst, const void *src, int64_t n);
gdte_status_t gdte_rdma_record(struct gdte_msg_req *req, gdte_gpu_event_t *ev);
/* GDTE_OK once the work before the event recorded in *ev is done. The emulation can report
 * work as pending for a few polls (gdte_proto_test_emulate_delay), as a GPU would. */
gdte_status_t gdte_rdma_query(gdte_gpu_event_t *ev);
/* Packs and unpacks of RDMA data run on the GPU (not in the emulation). */
int gdte_rdma_gpu_work(void);

/* Pack or unpack bytes [off, off+len) between the request's buffer and `staging`. `gpu`: queue
 * on the context stream (async) instead of running on the host. */
gdte_status_t gdte_proto_pack_range(struct gdte_msg_req *req, void *staging, int64_t off, int64_t len, int gpu);
gdte_status_t gdte_proto_unpack_range(struct gdte_msg_req *req, const void *staging, int64_t off, int64_t len,
                                      int gpu);

#endif
