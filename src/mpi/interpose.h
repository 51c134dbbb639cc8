/*
 * interpose.h: internals of libgdte_mpi.so, the interposition library.
 *
 * shims.c defines one thin MPI_* function per intercepted call; the work lives in
 * interpose_core.c (lifetime, next-in-chain table, memory kinds, errors, datatype references),
 * interpose_p2p.c (sends, receives, persistent requests, MPI_Pack/Unpack) and
 * interpose_req.c (request bookkeeping and completion). Data moves through xfer.c and
 * staging.c; fake device memory for CI is fakedev.c.
 *
 * May call: MPI (through the next-in-chain table only, never its own MPI_* symbols), import.h,
 * xfer.h, staging.h, src/kernels, src/engine (references), src/gpu, src/util.
 */
#ifndef GDTE_MPI_INTERPOSE_H
#define GDTE_MPI_INTERPOSE_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uthash.h>
#include "gdte.h"
#include "staging.h"
#include "gpu/gpu.h"

#define GDTE_IPO_EXPORT __attribute__((visibility("default")))

/* Every MPI function the library defines. Its own calls into MPI go to the next definition in
 * the chain (see interpose_core.c for why dlsym(RTLD_NEXT) rather than PMPI_ directly). */
#define GDTE_IPO_NEXT_LIST(X)                                                                                   \
    X(Init) X(Init_thread) X(Finalize) X(Send) X(Ssend) X(Bsend) X(Rsend) X(Isend) X(Issend) X(Ibsend)        \
    X(Irsend) X(Recv) X(Irecv) X(Sendrecv) X(Sendrecv_replace) X(Send_init) X(Ssend_init) X(Bsend_init)       \
    X(Rsend_init) X(Recv_init) X(Start) X(Startall) X(Request_free) X(Request_get_status) X(Wait) X(Waitall) \
    X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany) X(Testsome) X(Pack) X(Unpack) X(Type_free)          \
    X(Mrecv) X(Imrecv) X(Mprobe) X(Improbe) X(Probe) X(Iprobe) X(Cancel) X(Pack_external)                   \
    X(Unpack_external) X(Buffer_attach) X(Buffer_detach)                                                     \
    X(Comm_dup) X(Comm_dup_with_info) X(Comm_split) X(Comm_split_type) X(Comm_create) X(Comm_create_group)   \
    X(Cart_create) X(Cart_sub) X(Graph_create) X(Dist_graph_create) X(Dist_graph_create_adjacent)          \
    X(Intercomm_create) X(Intercomm_merge)

typedef struct gdte_ipo_next {
#define GDTE_X_NEXT_FIELD(name) __typeof__(&PMPI_##name) name;
    GDTE_IPO_NEXT_LIST(GDTE_X_NEXT_FIELD)
#undef GDTE_X_NEXT_FIELD
} gdte_ipo_next_t;

extern gdte_ipo_next_t gdte_ipo_next_g;
#define IPO_NEXT(name) (gdte_ipo_next_g.name)

/* 1 between a successful MPI_Init with interposition enabled and MPI_Finalize. Every shim
 * tests it first, so GDTE_DISABLE=1 (or a call before MPI_Init) costs one load. */
extern _Atomic int gdte_ipo_on_g;
static inline int gdte_ipo_on(void) { return atomic_load_explicit(&gdte_ipo_on_g, memory_order_acquire); }

/* ---- lifetime (interpose_core.c) ---- */
/* After the MPI initialised: read knobs, start gdte, or stay off under GDTE_DISABLE. */
int gdte_ipo_init(void);
int gdte_ipo_finalize(void);
/* The highest thread level the interposer supports: its state is under locks. */
#define GDTE_IPO_THREAD_MAX MPI_THREAD_MULTIPLE

/* 1 when the MPI underneath moves device memory itself (GDTE_MPI_GPU_AWARE, decided at
 * MPI_Init): device messages are then packed into device staging and handed to it. */
extern int gdte_ipo_gpu_aware_g;
static inline int gdte_ipo_gpu_aware(void) { return gdte_ipo_gpu_aware_g; }

/* ---- memory kinds ---- */
typedef enum { GDTE_IPO_HOST = 0, GDTE_IPO_DEVICE = 1, GDTE_IPO_FAKE = 2, GDTE_IPO_MIXED = 3 } gdte_ipo_kind_t;
/* Where the data of (buf, count, dt) lives: the kind of the bytes the type touches. Host unless a
 * GPU is present or the fake device is on; then cached lookups of the first and last touched
 * bytes (and of each field of a struct). MIXED: host and device bytes in one buffer, which the
 * callers refuse with MPI_ERR_BUFFER. */
gdte_ipo_kind_t gdte_ipo_buf_kind(const void *buf, int count, MPI_Datatype dt);
/* The fake-device registry (fakedev.c). */
int gdte_fake_contains(const void *ptr);
/* 1 and the registered range's first byte when `ptr` lies in fake device memory, else 0. */
int gdte_fake_base(const void *ptr, uintptr_t *base_p);
/* 1 when `first` and `last` lie in one registered fake device range. */
int gdte_fake_span_one(const void *first, const void *last);
void gdte_fake_clear(void);

/* ---- statuses ---- */
/* The status a call that completes one operation (MPI_Recv, MPI_Wait, MPI_Test, MPI_Waitany,
 * MPI_Probe, MPI_Sendrecv, ...) hands back: `st` whole but for MPI_ERROR, which such calls leave
 * as the application set it (MPI-3.1 section 3.2.5: only calls that complete several operations
 * set it, with MPI_ERR_IN_STATUS), as the MPI underneath does. MPICH's test suite checks it. */
static inline void gdte_ipo_status_out(MPI_Status *out, const MPI_Status *st)
{
    if (!out || out == MPI_STATUS_IGNORE) return;
    int keep = out->MPI_ERROR;
    *out = *st;
    out->MPI_ERROR = keep;
}

/* ---- errors ---- */
/* Report a gdte failure of MPI call `fn` through `comm`'s error handler; returns the MPI error
 * class (when the handler returns). */
int gdte_ipo_fail(MPI_Comm comm, const char *fn, gdte_status_t st);
/* A nonblocking or persistent call given no request: MPI_ERR_REQUEST through `comm`'s handler
 * (gdte tells its blocking forms by a NULL request; the call must not run as one). */
int gdte_ipo_null_request(MPI_Comm comm, const char *fn);
/* Set while gdte finishes a receive ahead of the application's completion call (node path
 * progress): errors are recorded in the request and raised through the communicator's handler
 * by the call that completes it, not by whichever call happened to make progress. */
extern _Thread_local int gdte_ipo_defer_errh;
/* A buffer partly host and partly device memory: MPI_ERR_BUFFER through `comm`'s handler. */
int gdte_ipo_mixed_fail(MPI_Comm comm, const char *fn, MPI_Datatype dt, int count);

/* ---- datatypes ---- */
/* The committed gdte type of `dt` and the packed bytes of `count` elements. */
gdte_status_t gdte_ipo_type(MPI_Datatype dt, int count, gdte_type_h *type_p, int64_t *nbytes_p);
/* GDTE_OK when the MPI would take `dt` in a communication call (committed, valid), else
 * GDTE_ERR_NOT_COMMITTED (MPI_ERR_TYPE); gdte_ipo_type checks this first. */
gdte_status_t gdte_ipo_check_type(MPI_Datatype dt);
/* References that keep an MPI datatype alive while a request in flight still needs it for its
 * status: MPI_Type_free of a referenced type is deferred to the last put. */
void gdte_ipo_dt_get(MPI_Datatype dt);
void gdte_ipo_dt_put(MPI_Datatype dt);
int gdte_ipo_type_free(MPI_Datatype *dt);

/* ---- counters (exported through gdte_mpi_counter) ---- */
typedef struct gdte_ipo_counters {
    _Atomic int64_t sends, recvs;     /* device messages staged */
    _Atomic int64_t bytes_packed, bytes_unpacked;
    _Atomic int64_t packs, unpacks;   /* MPI_Pack / MPI_Unpack on device buffers */
    _Atomic int64_t pack_syncs;       /* their waits: one per synchronous call, one per flush */
    _Atomic int64_t status_fixed;
    _Atomic int64_t deferred_type_frees;
    _Atomic int64_t orphans;          /* requests freed while active */
    _Atomic int64_t direct;           /* device messages handed to a GPU-aware MPI as they are */
    _Atomic int64_t node_sends, node_recvs; /* device messages moved GPU to GPU within the node */
    _Atomic int64_t node_detached;          /* ... of them completed by the sender from a copy */
    _Atomic int64_t node_units;             /* ... irregular ones read in place (the sender packs none) */
    _Atomic int64_t node_units_same;        /* receives of those in one kernel, buffer to buffer */
    _Atomic int64_t node_other_gpu;         /* small sends the copy engines would take to a peer on this
                                               process's GPU, taken GPU to GPU to one on another GPU */
    _Atomic int64_t node_split;             /* node-path sends whose data lies in several allocations:
                                               a packed copy the receiver reads */
    _Atomic int64_t node_mps;               /* ... and to a peer (or itself) on this GPU, MPS clients both */
    _Atomic int64_t node_sparse_packed;     /* sends of short blocks packed by the sender for a peer on another GPU */
    _Atomic int64_t node_batched;           /* receives copied by a batched kernel (one launch per pass) */
    _Atomic int64_t node_batches;           /* ... those launches */
    _Atomic int64_t node_pipelined;         /* progress passes that left their copies in flight
                                               (GDTETEST_NODE_PIPELINE) */
    _Atomic int64_t node_frag_sends;        /* device messages to other nodes sent in fragments (HOW_FRAGS) */
    _Atomic int64_t node_frag_recvs;        /* ... and received (any receive buffer) */
    _Atomic int64_t node_frag_async;        /* ... nonblocking ones that returned before every fragment
                                               was posted (the rest posted by later calls) */
    _Atomic int64_t node_frag_thread_posts; /* ... fragments of theirs posted by the progress thread */
    _Atomic int64_t node_frag_flushes;      /* calls that may block in the MPI and posted such
                                               fragments first (gdte_ipo_block_flush) */
    _Atomic int64_t host_cut_scratch;       /* host receives a marker would cut inside an element: into scratch */
    _Atomic int64_t packs_external, unpacks_external; /* MPI_Pack_external / MPI_Unpack_external on device buffers */
    _Atomic int64_t buffers_shadowed;       /* MPI_Buffer_attach of device memory: host memory attached instead */
} gdte_ipo_counters_t;
extern gdte_ipo_counters_t gdte_ipo_cnt_g;

/* MPI-IO on device buffers (interpose_io.c): counters io_reads, io_writes, or -1. */
int64_t gdte_ipo_io_counter(const char *name);
/* One-sided calls with device memory (interpose_rma.c): counters rma_windows, rma_ops, rma_merges
 * (-1 for another name), and the windows still open at MPI_Finalize released. */
int64_t gdte_ipo_rma_counter(const char *name);
void gdte_ipo_rma_finalize(void);
/* Merge every device window of this process (MPI_Barrier, before and after the MPI's). */
int gdte_ipo_rma_barrier_merge(void);

/* Communicators freed by the application with gdte requests active on them keep their node-path
 * state until those complete (interpose_node.c); called at every request record's release. */
void gdte_ipo_node_zombie_reap(void);

/* ---- requests (interpose_req.c) ---- */
typedef struct gdte_ipo_req {
    MPI_Request handle;   /* the MPI's own request: the application holds the same value */
    int is_recv;
    int persistent;
    int active;           /* started and not yet completed */
    int unpacked;         /* receive already unpacked (MPI_Request_get_status) */
    int orphan;           /* freed by the application while active */
    int in_table;         /* in the handle table (not yet inserted, or orphaned: not) */
    void *user;
    int count;
    MPI_Datatype dt;      /* referenced with gdte_ipo_dt_get (receives) */
    gdte_type_h type;     /* referenced with gdte_type_retain */
    gdte_ipo_kind_t kind;
    MPI_Comm comm;
    int64_t nbytes;
    gdte_stage_t *stage;
    /* Requests of other shapes (nonblocking collectives): when set, completion calls
     * finish(r, st, rc) instead of the receive unpack above, then recycles the record (after
     * fini(r) when set: release what ctx holds). finish returns the request's error code. */
    int (*finish)(struct gdte_ipo_req *r, MPI_Status *st, int rc);
    void (*fini)(struct gdte_ipo_req *r);
    /* A persistent request of another shape (persistent collectives): MPI_Start/Startall call
     * start(r) in place of the persistent send's pack, before the MPI starts it; it returns an
     * MPI error code (not MPI_SUCCESS: the request is not started). */
    int (*start)(struct gdte_ipo_req *r);
    void *ctx;
    /* Node path (interpose_node.c): bytes posted to the MPI (>= nbytes: a receive that may
     * match a marker is posted for at least GDTE_IPO_MARK_BYTES), where they land (NULL: the
     * user's buffer with the user's type), and a send completed by the receiver's FIN. */
    int64_t node_post;
    void *node_landing;
    int node_send;
    int node_pers;        /* persistent send of inline markers */
    MPI_Status fixed_st;  /* a receive finished ahead of its completion call: its status */
    int fixed_rc;         /* ... and its error code (raised by the completion call) */
    void *node_frag;      /* a receive whose fragmented message (HOW_FRAGS) is still arriving */
    /* A send not yet complete for the application although the MPI completed its request (a
     * nonblocking send to another node whose fragments are still being packed): MPI_Test,
     * MPI_Testall and MPI_Request_get_status answer "not yet" while pending(r) returns 1; the
     * other completion calls wait for it in finish. */
    int (*pending)(struct gdte_ipo_req *r);
    UT_hash_handle hh;
    struct gdte_ipo_req *next_orphan;
} gdte_ipo_req_t;

gdte_ipo_req_t *gdte_ipo_req_new(void);
void gdte_ipo_req_insert(gdte_ipo_req_t *r);
/* Release what the record holds and recycle it (removes it from the table when inserted). */
void gdte_ipo_req_destroy(gdte_ipo_req_t *r);
gdte_ipo_req_t *gdte_ipo_req_find(MPI_Request h);
int64_t gdte_ipo_req_live(void);
/* Receive side of a completion: unpack what arrived, make the status describe the user's
 * datatype. `st` is a real status (never IGNORE). Returns an MPI error code. */
int gdte_ipo_recv_finish(MPI_Comm comm, const char *fn, void *user, int count, MPI_Datatype dt, gdte_type_h type,
                         gdte_ipo_kind_t kind, const gdte_stage_t *stage, int64_t nbytes, int64_t post,
                         MPI_Status *st);
/* A host receive that may have matched a marker (posted into `scratch` when shorter than one,
 * else into the user's buffer): deliver what arrived. */
int gdte_ipo_host_recv_finish(MPI_Comm comm, const char *fn, void *user, int count, MPI_Datatype dt,
                              const gdte_stage_t *scratch, int64_t nbytes, MPI_Status *st);
/* State `n` received packed bytes in the status as elements of the user's datatype. */
void gdte_ipo_status_bytes(MPI_Status *st, MPI_Datatype dt, gdte_type_h type, int64_t n);
/* Call fn on every active receive record of `comm` (under the table's lock). */
void gdte_ipo_req_scan(MPI_Comm comm, void (*fn)(gdte_ipo_req_t *r, void *arg), void *arg);
int gdte_ipo_cancel(MPI_Request *req);
/* A receive longer than the user's buffer found by gdte: MPI_ERR_TRUNCATE through comm's handler. */
int gdte_ipo_truncated(MPI_Comm comm, MPI_Status *st);

int gdte_ipo_wait(MPI_Request *req, MPI_Status *status);
int gdte_ipo_test(MPI_Request *req, int *flag, MPI_Status *status);
int gdte_ipo_waitall(int n, MPI_Request reqs[], MPI_Status statuses[]);
int gdte_ipo_testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]);
int gdte_ipo_waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status);
int gdte_ipo_testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status);
int gdte_ipo_waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]);
int gdte_ipo_testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]);
int gdte_ipo_request_free(MPI_Request *req);
int gdte_ipo_request_get_status(MPI_Request req, int *flag, MPI_Status *status);
int gdte_ipo_start(MPI_Request *req);
int gdte_ipo_startall(int n, MPI_Request reqs[]);
/* Complete every orphan (at MPI_Finalize). */
void gdte_ipo_orphans_drain(void);

/* ---- deferred GPU work (interpose_pack.c) ----
 * Work gdte queued on its streams and has not waited for yet (asynchronous MPI_Pack/MPI_Unpack
 * between device buffers). Every intercepted call that hands a buffer to the MPI, or returns a
 * buffer to the application, flushes it first: one load when nothing is pending. */
extern _Atomic int gdte_ipo_pending_g;
void gdte_ipo_pending_flush_slow(void);
/* (Nonblocking sends to other nodes still being packed: below.) */
extern _Atomic int gdte_ipo_frag_unposted_g;
void gdte_ipo_node_frag_advance(int block);
static inline void gdte_ipo_pending_flush(void)
{
    if (atomic_load_explicit(&gdte_ipo_pending_g, memory_order_acquire)) gdte_ipo_pending_flush_slow();
    if (atomic_load_explicit(&gdte_ipo_frag_unposted_g, memory_order_acquire)) gdte_ipo_node_frag_advance(0);
}

/* ---- nonblocking sends to other nodes not yet wholly posted (interpose_node.c) ----
 * Such a send returns with its pack queued on the GPU; its fragments are posted as they land,
 * by every later call (gdte_ipo_pending_flush, which every shim runs, posts those that have
 * landed: one load when there are none). Every call that may block inside the MPI, where gdte
 * cannot progress, posts them all first, waiting for the GPU alone (gdte_ipo_block_flush): a
 * peer that waits for them could otherwise hold that call hostage (MPI_Barrier after an
 * MPI_Isend whose receiver sits in MPI_Recv). */
static inline void gdte_ipo_block_flush(void)
{
    if (atomic_load_explicit(&gdte_ipo_pending_g, memory_order_acquire)) gdte_ipo_pending_flush_slow();
    if (atomic_load_explicit(&gdte_ipo_frag_unposted_g, memory_order_acquire)) gdte_ipo_node_frag_advance(1);
}

/* ---- point to point (interpose_p2p.c) ---- */
typedef enum { GDTE_IPO_STD = 0, GDTE_IPO_SYNC, GDTE_IPO_BUFFERED, GDTE_IPO_READY } gdte_ipo_mode_t;
int gdte_ipo_send(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                  MPI_Comm comm);
int gdte_ipo_isend(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                   MPI_Comm comm, MPI_Request *req);
int gdte_ipo_send_init(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                       MPI_Comm comm, MPI_Request *req);
int gdte_ipo_recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Status *status);
int gdte_ipo_irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Request *req);
int gdte_ipo_recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                       MPI_Request *req);
/* The communicator of a message matched by MPI_Mprobe/MPI_Improbe (a message handle carries
 * none), remembered until its MPI_Mrecv/MPI_Imrecv, whose errors go through its handler. */
void gdte_ipo_message_note(MPI_Message msg, MPI_Comm comm);
/* Receives of a message matched by MPI_Mprobe/MPI_Improbe. */
int gdte_ipo_mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Status *status);
int gdte_ipo_imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *msg, MPI_Request *req);
int gdte_ipo_sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest, int stag, void *rbuf, int rcount,
                      MPI_Datatype rdt, int source, int rtag, MPI_Comm comm, MPI_Status *status);
int gdte_ipo_sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int stag, int source, int rtag,
                              MPI_Comm comm, MPI_Status *status);
/* Pack a persistent send's user buffer into its staging (MPI_Start). */
int gdte_ipo_persistent_pack(gdte_ipo_req_t *r);
int gdte_ipo_pack(const void *inbuf, int incount, MPI_Datatype dt, void *outbuf, int outsize, int *position,
                  MPI_Comm comm);
int gdte_ipo_unpack(const void *inbuf, int insize, int *position, void *outbuf, int outcount, MPI_Datatype dt,
                    MPI_Comm comm);
/* A host mirror of a typed device buffer, for calls whose work the MPI must do on host memory
 * laid out as the application's (external32, MPI-IO): a fresh anonymous mapping of the span of
 * (count, dt), `base` placed so that the user's lowest touched byte is its first (pages never
 * touched cost nothing), plus host staging of the packed stream. copy_in: the user's touched
 * bytes into the mirror. gdte_ipo_mirror_out: the first `nbytes` (-1: all) of the mirror's
 * packed stream back into the user's buffer (bytes between blocks never written). The gdte
 * type is retained until gdte_ipo_mirror_free. */
typedef struct gdte_ipo_mirror {
    void *map;
    size_t len;
    void *base;
    gdte_stage_t *packed;
    gdte_type_h t;
    int64_t n; /* packed bytes of (count, dt) */
    void *user;
    int count;
    int fake;
} gdte_ipo_mirror_t;
gdte_status_t gdte_ipo_mirror_make(gdte_ipo_mirror_t *m, const void *user, int count, MPI_Datatype dt,
                                   gdte_ipo_kind_t kind, int copy_in);
gdte_status_t gdte_ipo_mirror_out(gdte_ipo_mirror_t *m, int64_t nbytes);
void gdte_ipo_mirror_free(gdte_ipo_mirror_t *m);
/* Plain bytes between device (or, with `fake`, fake device) memory and host memory. */
gdte_status_t gdte_ipo_bytes(void *dst, const void *src, size_t n, int fake);

/* MPI_Pack_external / MPI_Unpack_external with a device buffer on either side: the MPI converts
 * on host mirrors (interpose_pack.c). */
int gdte_ipo_pack_external(const char *datarep, const void *inbuf, int incount, MPI_Datatype dt, void *outbuf,
                           MPI_Aint outsize, MPI_Aint *position);
int gdte_ipo_unpack_external(const char *datarep, const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf,
                             int outcount, MPI_Datatype dt);
/* MPI_Buffer_attach of device memory: the MPI is given host memory of the same size instead
 * (the attached buffer is the MPI's alone until detached), and MPI_Buffer_detach hands back the
 * application's address (interpose_pack.c). */
int gdte_ipo_buffer_attach(void *buffer, int size);
int gdte_ipo_buffer_detach(void *buffer_addr, int *size);
void gdte_ipo_buffer_finalize(void);

/* ---- node path: same-node device messages GPU to GPU (interpose_node.c) ---- */
/* A marker's size: every message of exactly this many bytes between framing peers is one. An
 * unusual size (31 doubles), so that application messages of it, which then travel as inline
 * markers, are rare. */
#define GDTE_IPO_MARK_BYTES 248
extern int gdte_ipo_node_on_g;
static inline int gdte_ipo_node_on(void) { return gdte_ipo_node_on_g; }
int gdte_ipo_node_init(void);
void gdte_ipo_node_finalize(void);
void gdte_ipo_node_comm_new(MPI_Comm comm);
/* 1 when a receive from `source` (MPI_ANY_SOURCE too) on `comm` may match a marker. */
int gdte_ipo_node_may_mark(MPI_Comm comm, int source);
/* 1 when `source` (not MPI_ANY_SOURCE) is a framing peer of another node (fragmented messages). */
int gdte_ipo_node_remote(MPI_Comm comm, int source);
int gdte_ipo_node_is_marker(MPI_Comm comm, const MPI_Status *st);
/* Sends the node path takes (1, *rc_p set) or leaves (0). req NULL: blocking. */
int gdte_ipo_node_send_host(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                            MPI_Comm comm, MPI_Request *req, int *rc_p);
/* A persistent device send (not buffered) of more than a marker's bytes to a framing peer of this
 * node that the node path takes: set up on `r` (inserted), *req the application's request, *rc_p
 * the MPI code; returns 1. 0: not taken (nothing changed). */
int gdte_ipo_node_persistent_ipc_init(gdte_ipo_req_t *r, gdte_ipo_mode_t mode, const void *buf, int count,
                                      MPI_Datatype dt, gdte_ipo_kind_t kind, int dest, int tag, MPI_Comm comm,
                                      MPI_Request *req, int *rc_p);
int gdte_ipo_node_send_device(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, gdte_ipo_kind_t kind,
                              int dest, int tag, MPI_Comm comm, MPI_Request *req, int *rc_p);
/* A persistent send of exactly GDTE_IPO_MARK_BYTES to a framing peer: each start sends an
 * inline marker (the request's MPI request sends r->ctx's marker). */
int gdte_ipo_node_persistent_init(gdte_ipo_req_t *r, const void *buf, int count, MPI_Datatype dt, gdte_ipo_kind_t kind,
                                  int dest, int tag, MPI_Comm comm, void **marker_p);
int gdte_ipo_node_persistent_start(gdte_ipo_req_t *r);
/* `room`: the receive's staging, where `room_bytes` were posted from `landing` on (NULL: none);
 * a fragmented message that fits lands there rather than in staging of its own. */
int gdte_ipo_node_recv_marker(MPI_Comm comm, const char *fn, void *user, int count, MPI_Datatype dt,
                              gdte_ipo_kind_t kind, int64_t posted, const void *landing, const gdte_stage_t *room,
                              int64_t room_bytes, MPI_Status *st);
int gdte_ipo_node_marker_cookie(const void *landing, const void *user, int count, MPI_Datatype dt, uint64_t *cookie);
/* A probe's status: a marker's size restated as its message's. */
void gdte_ipo_node_probe_fix(MPI_Comm comm, MPI_Status *st);
/* Finish the marker receives the MPI completed; poll requests until all/any complete. */
void gdte_ipo_node_progress(void);
/* Progress passes between these two may leave their batch's copies in flight (pipelined); the
 * end (the outermost, on this thread) waits for every batch still in flight and answers its
 * senders. Only a loop that keeps polling until its requests complete opens such a scope: a
 * batch left in flight when the call returns to the application would leave its senders
 * unanswered while the application sits in a call gdte does not see (MPI_Barrier), and a sender
 * waiting for them there would never return. */
void gdte_ipo_node_pipeline_begin(void);
void gdte_ipo_node_pipeline_end(void);
/* The node path's sends in flight: release finished ones, detach those waited for too long. */
void gdte_ipo_node_sends_progress(void);
/* Publishes which GPU this process works on, for its peers' choice of path (cheap when the
 * current device has not changed). */
void gdte_ipo_node_gpu_note(void);
/* Between these, receives the node path finishes queue their copies and are synchronized
 * once, at the end (nestable, per thread). */
void gdte_ipo_node_batch_begin(void);
void gdte_ipo_node_batch_end(void);
void gdte_ipo_node_block(int n, MPI_Request reqs[], int any);
/* Fragmented messages from other nodes. The progress pass only starts a matched one's receives
 * (recv_marker then returns GDTE_IPO_PENDING and r->node_frag holds it); then
 * gdte_ipo_node_frag_progress moves it on (`block`: to the end) and, once all is delivered, sets
 * r->unpacked, r->fixed_st and r->fixed_rc as finish-ahead does, and returns 1. A request whose
 * node_frag is set is not complete for the application until then. */
#define GDTE_IPO_PENDING (-1)
void gdte_ipo_node_frag_defer(void **slot);
int gdte_ipo_node_frag_progress(gdte_ipo_req_t *r, int block);
int gdte_ipo_node_frag_live(void);
/* 1 when every other member of intracommunicator `comm` is a framing peer (the same answer on
 * every member), else 0. */
int gdte_ipo_node_comm_local(MPI_Comm comm);
/* The fake-device test mode (GDTE_FAKE_DEVICE): peers read each other's memory with
 * process_vm_readv instead of GPU IPC. */
int gdte_ipo_node_fake(void);
/* This process's rank in MPI_COMM_WORLD (the key of its peers' mappings of its memory). */
int gdte_ipo_node_world_rank(void);
/* Device memory at p offered to framing peers: its allocation's IPC handle (exported once per
 * allocation), p's offset from the allocation's base, and that base. */
gdte_status_t gdte_ipo_node_export(const void *p, gdte_gpu_ipc_handle_t *h, int64_t *offset, uint64_t *rbase);
/* A framing peer's exported allocation (its base rbase there) mapped here, cached per (peer,
 * rbase) until the peer offers another allocation at that base. */
gdte_status_t gdte_ipo_node_map(int peer_world, uint64_t rbase, const gdte_gpu_ipc_handle_t *h, void **base_p);
/* Close that mapping now (if any). A mapping kept after the peer freed the memory makes the
 * GPU runtime refuse this process any later IPC mapping of memory reusing it, its own included
 * (cudaErrorAlreadyMapped): mappings of memory gdte does not own must not outlive their use. */
void gdte_ipo_node_unmap(int peer_world, uint64_t rbase);

#endif
