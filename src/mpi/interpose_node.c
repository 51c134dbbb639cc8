/*
 * The node path: device messages between processes of one node move GPU to GPU, under an MPI
 * that cannot move device memory itself. docs/ARCHITECTURE.md ("Same node, GPU to GPU") has
 * the design and the argument for why a control message is never taken for data; in short:
 *
 *  - Framing peers. Two processes are framing peers when they are different processes of one
 *    node (MPI_Comm_split_type SHARED) that both run the node path (decided at MPI_Init, the
 *    same way everywhere: an allgather of each one's choice). The relation is symmetric.
 *  - Markers. A device message to a framing peer travels as a *marker*: exactly
 *    GDTE_IPO_MARK_BYTES bytes on the application's own (communicator, destination, tag), so
 *    MPI keeps matching, ordering, wildcards and cancel. The marker describes where the data
 *    is (a GPU IPC handle, an offset, a dense or single-stride shape); the receiver copies the
 *    data itself, with one kernel from the sender's memory into its own layout, and answers
 *    with a FIN on a private communicator, which completes the sender's request.
 *  - The sender invariant. Every message of exactly GDTE_IPO_MARK_BYTES bytes that a process
 *    sends to a framing peer on a communicator with a shadow is a marker: an application
 *    message of that size (host or device) becomes an INLINE marker, its bytes carried in the
 *    announcement (below). So the receiver's rule "GDTE_IPO_MARK_BYTES bytes from a framing
 *    peer is a marker" holds for every message, whatever its content.
 *  - Short receives. A receive that may match a marker but was posted for fewer bytes is
 *    posted into scratch of GDTE_IPO_MARK_BYTES (the MPI would truncate the marker otherwise);
 *    what arrived is then copied to the user's buffer, and a longer message is reported as
 *    truncated exactly as the MPI would. So is a longer receive whose type a marker would cut
 *    inside an element (interpose_p2p.c, marker_lands_whole).
 *  - Announcements. Before each marker the sender sends an announcement (cookie, size,
 *    inline bytes) on the *shadow* of the communicator (a duplicate made when the communicator
 *    was made), with the application's tag: per (source, tag) announcements arrive in marker
 *    order. A probe that sees a marker answers with the size of the first announced marker of
 *    its (source, tag) that no receive has matched: matched markers are a prefix of that
 *    order (non-overtaking), and those matched by receives not yet completed by the
 *    application are found with MPI_Request_get_status.
 *
 * A process is its own framing peer too (messages to itself, e.g. a periodic dimension of one
 * process), its own memory standing for the mapping.
 *
 * Communicators made by calls the interposer does not see (MPI_Comm_idup, spawn, connect)
 * have no shadow, on every member alike: their messages take the MPI_PACKED path.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "interpose.h"
#include "xfer.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "kernels/devplan.h"
#include "kernels/kernels.h"
#include "kernels/memquery.h"
#include "util/util.h"
#include <utlist.h>

#define MARK_MAGIC 0x4b52414d45544447ull /* "GDTEMARK" */
enum { HOW_INLINE = 1, HOW_IPC = 2, HOW_FRAGS = 3 };
enum { SHAPE_CONTIG = 1, SHAPE_ROWS = 2, SHAPE_UNITS = 3 };

/* The marker: exactly GDTE_IPO_MARK_BYTES on the wire. */
typedef struct mark {
    uint64_t magic;
    uint64_t cookie;   /* unique per sender */
    int64_t nbytes;    /* the message's packed size */
    int32_t how;       /* HOW_* */
    int32_t fin_tag;   /* IPC: the FIN's tag on the private communicator; FRAGS: the fragments' tag on frag_comm */
    int32_t shape;     /* IPC: SHAPE_* */
    int32_t slot;      /* IPC: the sender's completion word (below) */
    int64_t offset;    /* IPC: first byte, from the exported allocation's base */
    int64_t rows, width, pitch; /* FRAGS: rows fragments of width bytes (the last one shorter) */
    int64_t pid;       /* fake device: the sender's process (read with process_vm_readv) */
    uint64_t addr;     /* the first byte's address in the sender */
    uint64_t rbase;    /* IPC: the exported allocation's base address in the sender */
    uint64_t word;     /* IPC: the completion word's value while the data waits (W_POSTED) */
    gdte_gpu_ipc_handle_t handle;
    unsigned char pad[GDTE_IPO_MARK_BYTES - 8 * 11 - 4 * 4 - GDTE_GPU_IPC_HANDLE_BYTES];
} mark_t;
_Static_assert(sizeof(mark_t) == GDTE_IPO_MARK_BYTES, "marker size");

/* The layout of a sender whose irregular (UNITS) layout the receiver reads in place, carried
 * in the message's announcement: the receiver walks the sender's buffer with the sender's unit
 * array (mapped from the sender's device plan, pinned until the receiver is done), or with its
 * own where both plans hash alike and the shapes agree (one kernel, buffer to buffer). The
 * sender runs no kernel and does not wait for one. */
typedef struct node_lay {
    int32_t ndims, max_unit_len, align, pad0;
    int64_t total, nunits, rep_bytes;
    int64_t count[GDTE_MAX_DIMS], stride[GDTE_MAX_DIMS];
    uint64_t units_hash;              /* gdte_devplan_units_hash of the sender's type */
    uint64_t units_addr, units_rbase; /* the unit array in the sender; its allocation's base */
    int64_t units_offset;             /* from that base */
    gdte_gpu_ipc_handle_t units_handle;
} node_lay_t;

/* The announcement header; an INLINE one is followed by the message's bytes, a SHAPE_UNITS
 * one by the sender's node_lay_t. */
typedef struct ann_hdr {
    uint64_t cookie;
    int64_t nbytes;
} ann_hdr_t;
#define ANN_DATA (sizeof(node_lay_t) > GDTE_IPO_MARK_BYTES ? sizeof(node_lay_t) : GDTE_IPO_MARK_BYTES)
#define ANN_MAX ((int)(sizeof(ann_hdr_t) + ANN_DATA))

/* A received announcement, kept until its marker is taken. */
typedef struct ann {
    int src, tag;
    uint64_t cookie;
    int64_t nbytes;
    int ndata; /* bytes in data */
    unsigned char data[ANN_DATA];
    struct ann *next, *prev;
} ann_t;

/* What the interposer keeps per communicator (an attribute, freed with it). */
typedef struct node_comm {
    MPI_Comm shadow;
    int size;        /* ranks messages name: the remote group's on an intercommunicator */
    int *world;      /* their ranks in MPI_COMM_WORLD (-1: not in it) */
    int any_peer;
    int all_peers;   /* an intracommunicator whose other members are all framing peers */
    ann_t *anns;     /* received announcements, oldest first (utlist DL) */
    MPI_Comm zombie_of; /* freed by the application with gdte requests still on it (comm_delete) */
    struct node_comm *zombie_next;
} node_comm_t;

int gdte_ipo_node_on_g;
static MPI_Comm fin_comm = MPI_COMM_NULL;
/* Fragments of messages to other nodes (HOW_FRAGS), apart from the FINs: a FIN is received from
 * any source by its tag, which a fragment's tag could equal. */
static MPI_Comm frag_comm = MPI_COMM_NULL;
/* peer_w values: a framing peer reached through GPU IPC (this node), or one of another node,
 * which gets fragmented messages (HOW_FRAGS) and inline markers, never IPC markers. */
enum { PEER_IPC = 1, PEER_FRAG = 2 };
/* Device messages from this size on go to framing peers of other nodes in fragments: the size
 * from which a device receive that may match a marker is posted into pageable memory
 * (interpose_p2p.c), so that such receives rarely get MPI_PACKED data there. */
#define FRAG_MIN (64 << 10)
#define FRAG_MAX_COUNT 1024 /* fragments per message at most (larger fragments past that) */
static int64_t frag_min = FRAG_MIN;   /* GDTETEST_NODE_FRAG_MIN: tests */
static int64_t drain_s = 30;          /* MPI_Finalize's wait for unanswered sends; GDTETEST_NODE_DRAIN_S: tests */
static int64_t frag_size_test;        /* GDTETEST_NODE_FRAG_SIZE: tests (0: the pipeline's choice) */
static int frag_timed;                /* GDTETEST_FRAG_TIMES: where a nonblocking send's time goes (info) */
static _Atomic int prog_on;           /* the progress thread (GDTE_MPI_PROGRESS_THREAD) wanted */
static int prog_stop;                 /* ... and stopping (under prog_mx) */
static int prog_drive;                /* it also tests posted fragments until sent (GDTETEST_PROGRESS_DRIVE=0: not) */
static int world_rank, world_size, tag_ub;
/* Persistent sends' FIN tags (pers_tag_get): the freed ones, and the next never used. */
static pthread_mutex_t pers_tag_lock = PTHREAD_MUTEX_INITIALIZER;
static int *pers_free_tags, pers_nfree, pers_cap, pers_next;
static unsigned char *peer_w; /* per world rank: a framing peer (PEER_*), or 0 */
static int keyval = MPI_KEYVAL_INVALID;
static int64_t ipc_min;
static int fake_mode;
static pthread_mutex_t node_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t next_cookie = 1;
static _Atomic(gdte_stream_t) node_stream; /* set once, after its events */
/* The application's legacy-default-stream work, before ours (as xfer.c and interpose_pack.c
 * order theirs; docs/MPI_BACKEND.md): a receiver's copy waits for it on node_stream, a sender
 * waits for it on the host before another process may read its buffer. A cudaMemcpy from
 * pageable memory or a cudaMemset returns before its bytes have landed. */
static gdte_gpu_event_t node_ev_app, node_ev_send;

/* ---- completion words in shared memory ----
 * Each process of the node path owns SLOTS words in a POSIX shared-memory segment that its
 * framing peers map at MPI_Init. A marker names one (slot, value while posted). The receiver
 * takes the data after claiming the word (POSTED -> CLAIMED, compare-and-swap) and marks it
 * DONE when its copy has finished; the sender may instead *detach* a send the receiver has not
 * claimed yet (POSTED -> DETACHED): it first copies the data into staging of its own and
 * writes where, so its own request can complete without the receiver (an MPI_Send is never
 * held hostage by a receiver that sits in a call gdte does not see, e.g. MPI_Barrier). Exactly
 * one of the two wins the word, so the receiver reads either the user's buffer while the
 * sender still waits, or the staged copy; never a buffer the application has reused. */
#define SLOTS 8192
/* The segment holds one word more than the completion words: GPU_WORD, where the process says
 * which GPU its device work runs on (gpu_note). */
#define GPU_WORD SLOTS
#define SEG_BYTES (sizeof(slot_t) * (SLOTS + 1))
#define DETACH_NS 1000000 /* a send the receiver has not taken for 1 ms is detached */
static int64_t detach_ns = DETACH_NS; /* GDTETEST_NODE_DETACH_US: tests and measurements */
static int send_packed; /* GDTETEST_NODE_PACKED: irregular layouts go as packed copies (tests) */
static int other_gpu_all; /* GDTETEST_NODE_OTHER_GPU: every other peer counts as on another GPU (tests) */
static int mps_test;      /* GDTETEST_NODE_MPS=1: every peer and this process count as MPS clients, =0: none
                           * does (tests) */
/* GDTETEST_NODE_BATCH=0: every receive's copy launched on its own (measurements). */
static int node_batch = 1;
/* Sparse messages of this size and more are copied on their own, not in the batch (see
 * BATCH_MAX); GDTETEST_NODE_BATCH_SPARSE_MAX sets it (measurements). 8 MiB since progress passes
 * are pipelined: one H200, window of 64, 4 MiB messages, six runs each (f4efadb,
 * mpi-h200-f4efadb-pipeline.csv): vector 5.06-5.89 us a message pipelined with the batch up to
 * 8 MiB against 5.86-8.10 unpipelined with it up to 2 MiB (7.16-7.41 with 8 MiB unpipelined),
 * indexed 5.21-6.89 against 5.80-8.27. */
#define BATCH_MAX_SPARSE (8 << 20)
static int64_t batch_max_sparse = BATCH_MAX_SPARSE;
/* GDTETEST_NODE_PIPELINE=0: a progress pass waits for its batch's copies (before f4efadb's
 * inflight_t), for measurements and to keep that path tested. */
static int node_pipeline = 1;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* GDTETEST_NODE_PROF=1: where the node path's host time goes, per stage (count, mean), printed by
 * every process at MPI_Finalize. For measurements on the device; off, each stage costs a test
 * of one flag. */
enum { P_SEND, P_SEND_PROGRESS, P_SEND_SHAPE, P_SEND_APP, P_SEND_EXPORT, P_SEND_POST, P_RECV, P_RECV_APP, P_RECV_PULL,
       P_BATCH_SYNC, P_BATCH_FIN, P_N };
static const char *const prof_name[P_N] = {"send",        "send.progress",  "send.shape", "send.app_wait",
                                           "send.export", "send.mpi_posts", "recv",       "recv.app_order",
                                           "recv.queue",  "batch.sync",     "batch.fins"};
static int prof_on;
static _Atomic int64_t prof_ns[P_N], prof_n[P_N];
static int64_t prof_t0(void) { return prof_on ? now_ns() : 0; }
static void prof_add(int k, int64_t t0)
{
    if (!prof_on) return;
    atomic_fetch_add_explicit(&prof_ns[k], now_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&prof_n[k], 1, memory_order_relaxed);
}
static void prof_print(void)
{
    if (!prof_on) return;
    for (int k = 0; k < P_N; k++) {
        int64_t n = atomic_load(&prof_n[k]);
        if (n)
            fprintf(stderr, "gdte node prof: rank %d %-16s %9lld calls %9.2f us mean\n", world_rank, prof_name[k],
                    (long long)n, (double)atomic_load(&prof_ns[k]) / (double)n / 1e3);
    }
}

/* Sparse messages from this size on are packed by the sender for a receiver on another GPU.
 * Packing first costs the sender a kernel and a synchronisation (~5 us), which the link's saved
 * bytes repay only for large messages: two H200s (71bfbc5, vector of 8-byte blocks, time per
 * message in a window) 9.2 / 10.6 / 27.6 us read in place at 64 KiB / 1 MiB / 4 MiB against
 * 15.0 / 15.5 / 19.6 us packed first; the two lines cross near 2 MiB. */
#define SPARSE_PACK_MIN (2 << 20)
static int64_t sparse_pack_min = SPARSE_PACK_MIN; /* GDTETEST_NODE_SPARSE_MIN: tests */
enum { W_FREE = 0, W_POSTED = 1, W_CLAIMED = 2, W_DONE = 3, W_DETACHED = 4 };
#define W_STATE(w) ((unsigned)((w) & 0xff))
#define W_GEN(w) ((w) & ~(uint64_t)0xff)
typedef struct slot {
    _Atomic uint64_t word; /* generation << 8 | W_* */
    /* W_DETACHED: where the packed (contiguous) copy is */
    int64_t offset;
    uint64_t addr, rbase;
    gdte_gpu_ipc_handle_t handle;
} slot_t;
static slot_t *my_slots;    /* mine, shared with my peers */
static slot_t **peer_slots; /* per world rank: a framing peer's, mapped */
static int *slot_stack, slot_top;
static char shm_name[64];
static int64_t *peer_active; /* per world rank: when a send of ours was last seen taken there */

/* ---- recycled records ----
 * The node path's per-message records (internal sends, send states, announcements) go back on
 * a free list of their kind (utlist, a `next` member), at most ISEND_KEEP kept; the caller holds
 * the list's lock. RECYCLE_GET leaves `e` NULL when the list is empty. */
#define ISEND_KEEP 256 /* free records kept per kind */
#define RECYCLE_GET(head, n, e)                                                                                        \
    do {                                                                                                               \
        (e) = (head);                                                                                                  \
        if (e) {                                                                                                       \
            LL_DELETE(head, e);                                                                                        \
            (n)--;                                                                                                     \
        }                                                                                                              \
    } while (0)
#define RECYCLE_PUT(head, n, e)                                                                                        \
    do {                                                                                                               \
        if ((n) < ISEND_KEEP) {                                                                                        \
            LL_PREPEND(head, e);                                                                                       \
            (n)++;                                                                                                     \
        } else {                                                                                                       \
            free(e);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define RECYCLE_DRAIN(head, n, type)                                                                                   \
    do {                                                                                                               \
        type *x_, *xt_;                                                                                                \
        LL_FOREACH_SAFE(head, x_, xt_) free(x_);                                                                       \
        (head) = NULL;                                                                                                 \
        (n) = 0;                                                                                                       \
    } while (0)

/* ---- internal sends (announcements, markers, FINs) ----
 * A record per send, its bytes inline, back on a free list when the MPI is done with it: the
 * node path's per-message sends allocate nothing in steady state. */
typedef struct isend {
    MPI_Request req;
    struct isend *next;
    union {
        mark_t mk;
        unsigned char b[ANN_MAX];
    } u;
} isend_t;
static isend_t *isends, *isend_free;
static int isend_nfree;
static _Atomic int isends_n; /* in flight, read without the lock */

static void isends_reap(int block)
{
    pthread_mutex_lock(&node_lock);
    isend_t *e, *tmp;
    LL_FOREACH_SAFE(isends, e, tmp) {
        int flag = 0;
        if (block) PMPI_Wait(&e->req, MPI_STATUS_IGNORE), flag = 1;
        else PMPI_Test(&e->req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            LL_DELETE(isends, e);
            isends_n--;
            RECYCLE_PUT(isend_free, isend_nfree, e);
        }
    }
    if (block) RECYCLE_DRAIN(isend_free, isend_nfree, isend_t);
    pthread_mutex_unlock(&node_lock);
}

/* A record to fill (its bytes in e->u); NULL when out of memory. */
static isend_t *isend_get(void)
{
    isend_t *e;
    pthread_mutex_lock(&node_lock);
    RECYCLE_GET(isend_free, isend_nfree, e);
    pthread_mutex_unlock(&node_lock);
    return e ? e : malloc(sizeof *e);
}

/* Send the first `n` bytes of e->u to `dest` of `comm` in the background; `e` is the list's. */
static int isend_post(isend_t *e, int n, int dest, int tag, MPI_Comm comm)
{
    int rc = PMPI_Isend(e->u.b, n, MPI_BYTE, dest, tag, comm, &e->req);
    pthread_mutex_lock(&node_lock);
    if (rc != MPI_SUCCESS) {
        RECYCLE_PUT(isend_free, isend_nfree, e);
    } else {
        LL_PREPEND(isends, e);
        isends_n++;
    }
    pthread_mutex_unlock(&node_lock);
    return rc;
}

/* A zero-byte FIN to `dest` (tag `tag` of the private communicator). */
static int send_fin(int dest, int tag)
{
    isend_t *e = isend_get();
    return e ? isend_post(e, 0, dest, tag, fin_comm) : MPI_ERR_NO_MEM;
}

/* ---- communicators ---- */
static void node_comm_free(node_comm_t *nc)
{
    if (nc->shadow != MPI_COMM_NULL) PMPI_Comm_free(&nc->shadow);
    ann_t *a, *tmp;
    DL_FOREACH_SAFE(nc->anns, a, tmp) {
        DL_DELETE(nc->anns, a);
        free(a);
    }
    free(nc->world);
    free(nc);
}

/* Communicators the application freed while gdte requests were still active on them (MPI lets
 * pending operations complete normally): the MPI deletes the attribute at MPI_Comm_free, but a
 * pending receive still needs to know that a marker is one (and its shadow, for the
 * announcement), so the state lives on here, found by the handle, until no gdte request is
 * active on it (zombie_reap: at every record's release and communicator's creation, before the
 * MPI may give the handle to a new communicator). Reaped ones go to comm_dead and are freed at
 * MPI_Finalize (freeing a shadow is a call every member makes in MPI's terms: not at a time
 * only this process chooses). Without this, the receive got the marker as data
 * (exp: free_pending, an MPI_Irecv pending at MPI_Comm_free). */
static pthread_mutex_t zombie_lock = PTHREAD_MUTEX_INITIALIZER;
static node_comm_t *comm_zombies, *comm_dead;
static _Atomic int n_zombies;

static void count_active(gdte_ipo_req_t *r, void *arg)
{
    if (r->active) ++*(int *)arg;
}

static int comm_delete(MPI_Comm comm, int kv, void *val, void *extra)
{
    (void)kv, (void)extra;
    node_comm_t *nc = val;
    if (!nc) return MPI_SUCCESS;
    int active = 0;
    if (comm != MPI_COMM_WORLD && gdte_ipo_node_on_g) gdte_ipo_req_scan(comm, count_active, &active);
    if (active) {
        nc->zombie_of = comm;
        pthread_mutex_lock(&zombie_lock);
        nc->zombie_next = comm_zombies;
        comm_zombies = nc;
        atomic_fetch_add_explicit(&n_zombies, 1, memory_order_release);
        pthread_mutex_unlock(&zombie_lock);
        gdte_debug("communicator freed with %d gdte request(s) active on it: its node-path state kept until they "
                   "complete", active);
        return MPI_SUCCESS;
    }
    node_comm_free(nc);
    return MPI_SUCCESS;
}

void gdte_ipo_node_zombie_reap(void)
{
    if (!atomic_load_explicit(&n_zombies, memory_order_acquire)) return;
    /* Counted without zombie_lock: comm_info takes it, possibly under the table's lock. */
    MPI_Comm cands[16];
    int nc_ = 0;
    pthread_mutex_lock(&zombie_lock);
    for (node_comm_t *z = comm_zombies; z && nc_ < 16; z = z->zombie_next) cands[nc_++] = z->zombie_of;
    pthread_mutex_unlock(&zombie_lock);
    for (int i = 0; i < nc_; i++) {
        int active = 0;
        gdte_ipo_req_scan(cands[i], count_active, &active);
        if (active) continue;
        pthread_mutex_lock(&zombie_lock);
        for (node_comm_t **pp = &comm_zombies; *pp; pp = &(*pp)->zombie_next) {
            if ((*pp)->zombie_of != cands[i]) continue;
            node_comm_t *z = *pp;
            *pp = z->zombie_next;
            z->zombie_next = comm_dead;
            comm_dead = z;
            atomic_fetch_sub_explicit(&n_zombies, 1, memory_order_release);
            break;
        }
        pthread_mutex_unlock(&zombie_lock);
    }
}

static void zombies_free_all(void)
{
    pthread_mutex_lock(&zombie_lock);
    for (int pass = 0; pass < 2; pass++) {
        node_comm_t *z = pass ? comm_dead : comm_zombies, *next;
        for (; z; z = next) {
            next = z->zombie_next;
            node_comm_free(z);
        }
    }
    comm_zombies = comm_dead = NULL;
    atomic_store_explicit(&n_zombies, 0, memory_order_release);
    pthread_mutex_unlock(&zombie_lock);
}

static node_comm_t *comm_info(MPI_Comm comm)
{
    if (!gdte_ipo_node_on_g || comm == MPI_COMM_NULL) return NULL;
    void *v = NULL;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, keyval, &v, &flag) == MPI_SUCCESS && flag) return v;
    if (!atomic_load_explicit(&n_zombies, memory_order_acquire)) return NULL;
    node_comm_t *z;
    pthread_mutex_lock(&zombie_lock);
    for (z = comm_zombies; z && z->zombie_of != comm; z = z->zombie_next) {
    }
    pthread_mutex_unlock(&zombie_lock);
    return z;
}

/* A new communicator (every member calls this, from the call that made it): its shadow and the
 * world ranks of the ranks its messages name. */
void gdte_ipo_node_comm_new(MPI_Comm comm)
{
    if (!gdte_ipo_node_on_g || comm == MPI_COMM_NULL) return;
    gdte_ipo_node_zombie_reap(); /* (the handle may be a reaped one's) */
    node_comm_t *nc = calloc(1, sizeof *nc);
    if (!nc) return;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    MPI_Group g, wg;
    if (inter) PMPI_Comm_remote_group(comm, &g);
    else PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    PMPI_Group_size(g, &nc->size);
    int *ranks = malloc(sizeof(int) * (size_t)(nc->size ? nc->size : 1));
    nc->world = malloc(sizeof(int) * (size_t)(nc->size ? nc->size : 1));
    if (ranks && nc->world) {
        for (int i = 0; i < nc->size; i++) ranks[i] = i;
        PMPI_Group_translate_ranks(g, nc->size, ranks, wg, nc->world);
        for (int i = 0; i < nc->size; i++) {
            if (nc->world[i] == MPI_UNDEFINED) nc->world[i] = -1;
            if (nc->world[i] >= 0 && peer_w[nc->world[i]]) nc->any_peer = 1;
        }
        /* Every other member a framing peer of this node: the same answer on every member (the
         * relation is symmetric, and a clique seen from one member is one seen from all). */
        nc->all_peers = !inter;
        for (int i = 0; i < nc->size; i++)
            if (nc->world[i] != world_rank && (nc->world[i] < 0 || peer_w[nc->world[i]] != PEER_IPC)) nc->all_peers = 0;
    }
    free(ranks);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    /* The shadow is made by every member alike (a collective call on `comm`). */
    if (!nc->world || PMPI_Comm_dup(comm, &nc->shadow) != MPI_SUCCESS) {
        nc->shadow = MPI_COMM_NULL;
        node_comm_free(nc);
        return;
    }
    PMPI_Comm_set_attr(comm, keyval, nc);
}

static int is_peer(const node_comm_t *nc, int rank)
{
    return nc && rank >= 0 && rank < nc->size && nc->world[rank] >= 0 && peer_w[nc->world[rank]];
}

int gdte_ipo_node_comm_local(MPI_Comm comm)
{
    node_comm_t *nc = comm_info(comm);
    return nc && nc->all_peers;
}

int gdte_ipo_node_fake(void) { return fake_mode; }
int gdte_ipo_node_world_rank(void) { return world_rank; }

int gdte_ipo_node_remote(MPI_Comm comm, int source)
{
    node_comm_t *nc = comm_info(comm);
    return source != MPI_ANY_SOURCE && is_peer(nc, source) && peer_w[nc->world[source]] == PEER_FRAG;
}

int gdte_ipo_node_may_mark(MPI_Comm comm, int source)
{
    node_comm_t *nc = comm_info(comm);
    if (!nc) return 0;
    return source == MPI_ANY_SOURCE ? nc->any_peer : is_peer(nc, source);
}

int gdte_ipo_node_is_marker(MPI_Comm comm, const MPI_Status *st)
{
    node_comm_t *nc = comm_info(comm);
    if (!nc || !is_peer(nc, st->MPI_SOURCE)) return 0;
    int cancelled = 0;
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) return 0;
    MPI_Count got = 0;
    PMPI_Get_elements_x(st, MPI_BYTE, &got);
    return got == GDTE_IPO_MARK_BYTES;
}

/* ---- which GPU each process works on ----
 * Small dense or single-stride messages go through pinned host memory by the copy engines
 * alone (xfer.c) rather than by a kernel in the receiver, because on a GPU that several
 * processes share a kernel waits for the GPU to switch contexts (~150 us on an H100). Between
 * processes on different GPUs there is no such wait, and the node path is faster at every size
 * (two H200s over NVLink, 5964dc8: a 64 KiB dense message 52 us one way and 46 us per message
 * in a window through host memory, an irregular one of the same size 24 and 10 us GPU to GPU).
 * Nor is there between processes whose contexts MPS shares: one H200, two ranks under MPS
 * (ee7c5ca): 1 KiB one way 23.6 us by the copy engines, 21.6 us GPU to GPU, and 22.0 against
 * 6.5 us per message in a window. So each process says in its segment which GPU it works on
 * (PCI domain, bus and device, plus one: 0 is not known; MPS_BIT when its contexts there are
 * MPS clients), noted again whenever its current device changes (an application may pick its
 * GPU after MPI_Init), and a sender takes the copy engines only to a peer on its own GPU, or
 * whose GPU it does not know, unless both are MPS clients; otherwise such a message goes as a
 * packed copy in device staging (send_shape's PACK_ALWAYS). */
#define MPS_BIT ((uint64_t)1 << 63)
static _Atomic int gpu_noted = -1; /* the device index last noted */

void gdte_ipo_node_gpu_note(void)
{
    if (fake_mode || !my_slots) return;
    int d = gdte_gpu_current_device();
    if (d < 0 || d == atomic_load_explicit(&gpu_noted, memory_order_relaxed)) return;
    gdte_gpu_props_t p;
    if (gdte_gpu_get_props(d, &p) != GDTE_OK) return;
    uint64_t id = ((uint64_t)(uint32_t)p.pci_domain << 32 | (uint64_t)(uint32_t)p.pci_bus << 16 |
                   (uint64_t)(uint32_t)p.pci_device) + 1;
    if (p.mps) id |= MPS_BIT;
    atomic_store_explicit(&my_slots[GPU_WORD].word, id, memory_order_relaxed);
    atomic_store_explicit(&gpu_noted, d, memory_order_relaxed);
}

/* World rank w, a framing peer, is known to work on another GPU than this process. */
static int other_gpu(int w)
{
    if (!peer_slots[w] || peer_slots[w] == my_slots) return 0;
    if (other_gpu_all) return 1;
    uint64_t a = atomic_load_explicit(&my_slots[GPU_WORD].word, memory_order_relaxed) & ~MPS_BIT;
    uint64_t b = atomic_load_explicit(&peer_slots[w][GPU_WORD].word, memory_order_relaxed) & ~MPS_BIT;
    return a && b && a != b;
}

/* GPU work of this process and of world rank w (a framing peer, or this process) never waits
 * for the GPU to switch between them: other GPUs, or MPS clients both (GDTETEST_NODE_MPS: as if,
 * for tests on the fake device). */
static int no_switch(int w)
{
    if (!peer_slots[w]) return 0;
    if (mps_test > 0) return 1;
    if (other_gpu(w)) return 1;
    if (mps_test < 0) return 0;
    uint64_t a = atomic_load_explicit(&my_slots[GPU_WORD].word, memory_order_relaxed);
    uint64_t b = atomic_load_explicit(&peer_slots[w][GPU_WORD].word, memory_order_relaxed);
    return (a & b & MPS_BIT) != 0;
}

/* ---- lifetime ---- */
static void *shm_map(const char *name, int create)
{
    size_t bytes = SEG_BYTES;
    int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
    if (fd < 0) return NULL;
    if (create && ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        shm_unlink(name);
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        if (create) shm_unlink(name);
        return NULL;
    }
    return p;
}

/* This process's completion words: made and mapped (zeroed: W_FREE, generation 0). */
static int slots_create(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(shm_name, sizeof shm_name, "/gdte-node.%d.%lx", (int)getpid(), (unsigned long)ts.tv_nsec);
    my_slots = shm_map(shm_name, 1);
    slot_stack = malloc(sizeof(int) * SLOTS);
    if (!my_slots || !slot_stack) {
        if (my_slots) munmap(my_slots, SEG_BYTES), shm_unlink(shm_name);
        free(slot_stack);
        my_slots = NULL;
        slot_stack = NULL;
        gdte_warn("node path off: no shared memory for its completion words (%s)", shm_name);
        return 0;
    }
    for (int i = 0; i < SLOTS; i++) slot_stack[i] = SLOTS - 1 - i;
    slot_top = SLOTS;
    return 1;
}

/* Reachability at MPI_Init. Two processes of a node may still not reach each other's memory:
 * each sees only its own GPU (CUDA_VISIBLE_DEVICES per rank), GPUs without peer access, a
 * process_vm_readv that ptrace rules forbid (the fake device). So each process exports a probe
 * holding its rank, every peer reads it the way it would read a message, and two processes
 * are framing peers only if each read the other's. */
typedef struct probe {
    gdte_gpu_ipc_handle_t h;
    int64_t pid;
    uint64_t addr;
    int64_t want; /* the rank the probe holds; -1: no probe */
} probe_t;

static int probe_read(const probe_t *p)
{
    int64_t got = -2;
    if (p->want < 0) return 0;
    if (fake_mode) {
        struct iovec l = {&got, sizeof got}, r = {(void *)(uintptr_t)p->addr, sizeof got};
        if (process_vm_readv((pid_t)p->pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof got) return 0;
        return got == p->want;
    }
    void *base = NULL;
    if (gdte_gpu_ipc_open(&p->h, &base) != GDTE_OK) return 0;
    int ok = gdte_gpu_memcpy(&got, base, sizeof got) == GDTE_OK && got == p->want;
    gdte_gpu_ipc_close(base);
    return ok;
}

#define NALL 4 /* values per process in node_init's allgather */
int gdte_ipo_node_init(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    fake_mode = (int)gdte_knob(GDTE_KNOB_FAKE_DEVICE);
    int64_t k = gdte_knob(GDTE_KNOB_MPI_IPC); /* auto|0|1 */
    /* On by default over a GPU-aware MPI too: within the node one kernel from the sender's
     * layout beats packing into device staging and the MPI's own device pipeline (H100, 4 MiB
     * vector: 14-23 GB/s through CUDA-aware Open MPI 4.1 with smcuda). */
    int want = k == 2 || k == 0;
    if (!gdte_gpu_available() && !fake_mode) want = 0;
    /* Fragmented messages to other nodes: where the MPI cannot move device memory (one that can
     * pipelines device messages itself), and only in processes with device buffers. */
    int64_t kp = gdte_knob(GDTE_KNOB_MPI_PIPELINE); /* auto|0|1 */
    int fwant = kp == 2 || (kp == 0 && !gdte_ipo_gpu_aware());
    if (!gdte_gpu_available() && !fake_mode) fwant = 0;
    if (getenv("GDTETEST_NODE_FRAG_MIN")) frag_min = atoll(getenv("GDTETEST_NODE_FRAG_MIN"));
    if (getenv("GDTETEST_NODE_DRAIN_S")) drain_s = atoll(getenv("GDTETEST_NODE_DRAIN_S"));
    if (getenv("GDTETEST_NODE_FRAG_SIZE")) frag_size_test = atoll(getenv("GDTETEST_NODE_FRAG_SIZE"));
    frag_timed = getenv("GDTETEST_FRAG_TIMES") != NULL;
    {
        int lvl = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&lvl);
        prog_on = lvl == MPI_THREAD_MULTIPLE && gdte_knob(GDTE_KNOB_MPI_PROGRESS_THREAD);
        prog_stop = 0;
        prog_drive = !getenv("GDTETEST_PROGRESS_DRIVE") || atoi(getenv("GDTETEST_PROGRESS_DRIVE"));
    }
    if (frag_min < GDTE_IPO_MARK_BYTES + 1) frag_min = GDTE_IPO_MARK_BYTES + 1;
    ipc_min = gdte_knob(GDTE_KNOB_MPI_IPC_MIN);
    send_packed = getenv("GDTETEST_NODE_PACKED") && atoi(getenv("GDTETEST_NODE_PACKED"));
    other_gpu_all = getenv("GDTETEST_NODE_OTHER_GPU") && atoi(getenv("GDTETEST_NODE_OTHER_GPU"));
    mps_test = getenv("GDTETEST_NODE_MPS") ? (atoi(getenv("GDTETEST_NODE_MPS")) ? 1 : -1) : 0;
    if (getenv("GDTETEST_CE_MAX") || getenv("GDTETEST_CE_ROWS"))
        gdte_xfer_set_ce_bounds(getenv("GDTETEST_CE_MAX") ? atoll(getenv("GDTETEST_CE_MAX")) : 0,
                                getenv("GDTETEST_CE_ROWS") ? atoll(getenv("GDTETEST_CE_ROWS")) : 0);
    if (getenv("GDTETEST_NODE_SPARSE_MIN")) sparse_pack_min = atoll(getenv("GDTETEST_NODE_SPARSE_MIN"));
    const char *dus = getenv("GDTETEST_NODE_DETACH_US");
    if (dus) detach_ns = (int64_t)(atof(dus) * 1000);
    prof_on = getenv("GDTETEST_NODE_PROF") && atoi(getenv("GDTETEST_NODE_PROF"));
    if (getenv("GDTETEST_NODE_BATCH")) node_batch = atoi(getenv("GDTETEST_NODE_BATCH")) != 0;
    if (getenv("GDTETEST_NODE_BATCH_SPARSE_MAX")) batch_max_sparse = atoll(getenv("GDTETEST_NODE_BATCH_SPARSE_MAX"));
    if (getenv("GDTETEST_NODE_PIPELINE")) node_pipeline = atoi(getenv("GDTETEST_NODE_PIPELINE")) != 0;
    void *ub = NULL;
    int flag = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tag_ub = flag && ub ? *(int *)ub : 32767;
    /* Collective over MPI_COMM_WORLD whatever this process chose: every process of the job
     * runs this (the interposer is preloaded everywhere or nowhere; GDTE_DISABLE=1 skips it
     * everywhere alike). */
    MPI_Comm node;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    const char *split = getenv("GDTETEST_NODE_SPLIT"); /* tests: ranks >= N act as another node */
    int nsplit = split ? atoi(split) : 0;
    if (want && !slots_create()) want = 0;
    /* (choice, pid, the segment's name suffix, fragments' choice) of every process; the
     * segments all exist once this returns. */
    long long mine[NALL] = {want, (long long)getpid(), 0, fwant};
    if (want) mine[2] = strtoll(strrchr(shm_name, '.') + 1, NULL, 16);
    long long *all = malloc(sizeof(long long) * NALL * (size_t)world_size);
    int nsize = 0;
    PMPI_Comm_size(node, &nsize);
    int *node_world = malloc(sizeof(int) * (size_t)nsize);
    peer_w = calloc((size_t)world_size, 1);
    peer_slots = calloc((size_t)world_size, sizeof *peer_slots);
    peer_active = calloc((size_t)world_size, sizeof *peer_active);
    if (!all || !node_world || !peer_w || !peer_slots || !peer_active) {
        free(all);
        free(node_world);
        PMPI_Comm_free(&node);
        return MPI_ERR_NO_MEM;
    }
    PMPI_Allgather(mine, NALL, MPI_LONG_LONG, all, NALL, MPI_LONG_LONG, MPI_COMM_WORLD);
    PMPI_Allgather(&world_rank, 1, MPI_INT, node_world, 1, MPI_INT, node);
    /* The probes: exported, read by every candidate peer, the results exchanged. */
    int me_n = 0;
    PMPI_Comm_rank(node, &me_n);
    probe_t pr;
    memset(&pr, 0, sizeof pr);
    pr.want = -1;
    int64_t *probe_mem = NULL;
    int64_t rank64 = world_rank;
    if (want && fake_mode && (probe_mem = malloc(sizeof *probe_mem)) != NULL) {
        *probe_mem = rank64;
        pr.pid = (int64_t)getpid();
        pr.addr = (uint64_t)(uintptr_t)probe_mem;
        pr.want = rank64;
    } else if (want && !fake_mode && gdte_gpu_malloc((void **)&probe_mem, 4096) == GDTE_OK) {
        if (gdte_gpu_memcpy(probe_mem, &rank64, sizeof rank64) == GDTE_OK &&
            gdte_gpu_ipc_get_handle(probe_mem, &pr.h) == GDTE_OK)
            pr.want = rank64;
    }
    const char *noprobe = getenv("GDTETEST_NODE_NOPROBE"); /* tests: this rank's probe unreadable */
    if (noprobe && atoi(noprobe) == world_rank) pr.want = -1;
    probe_t *probes = calloc((size_t)nsize, sizeof *probes);
    unsigned char *reach = calloc((size_t)nsize * (size_t)nsize, 1);
    if (!probes || !reach) {
        free(probes);
        free(reach);
        free(all);
        free(node_world);
        PMPI_Comm_free(&node);
        return MPI_ERR_NO_MEM;
    }
    PMPI_Allgather(&pr, (int)sizeof pr, MPI_BYTE, probes, (int)sizeof pr, MPI_BYTE, node);
    for (int i = 0; i < nsize; i++) {
        int w = node_world[i];
        int same_side = !nsplit || ((w >= nsplit) == (world_rank >= nsplit));
        if (w != world_rank && want && all[NALL * w] && same_side) reach[(size_t)me_n * nsize + i] = (unsigned char)probe_read(&probes[i]);
    }
    PMPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, reach, nsize, MPI_BYTE, node);
    PMPI_Barrier(node); /* every probe read: they may go */
    if (probe_mem && fake_mode) free(probe_mem);
    else if (probe_mem) gdte_gpu_free(probe_mem);
    int mapped_all = 1, unreached = 0;
    for (int i = 0; i < nsize; i++) {
        int w = node_world[i];
        int same_side = !nsplit || ((w >= nsplit) == (world_rank >= nsplit));
        if (w == world_rank || !want || !all[NALL * w] || !same_side) continue;
        if (!reach[(size_t)me_n * nsize + i] || !reach[(size_t)i * nsize + me_n]) {
            unreached++;
            continue;
        }
        char name[64];
        snprintf(name, sizeof name, "/gdte-node.%d.%llx", (int)all[NALL * w + 1], (unsigned long long)all[NALL * w + 2]);
        if (!(peer_slots[w] = shm_map(name, 0))) mapped_all = 0;
        peer_w[w] = PEER_IPC;
    }
    if (unreached)
        gdte_info("node path: %d process(es) of this node cannot read this one's device memory or it theirs (GPU IPC "
                  "between them failed, e.g. each sees only its own GPU): their messages take the MPI_PACKED path",
                  unreached);
    free(probes);
    free(reach);
    /* Framing is symmetric: if any process of the node could not map a peer's words, the node
     * path is off on the whole node. Then every segment's name goes (the mappings stay). */
    int ok_all = 0;
    PMPI_Allreduce(&mapped_all, &ok_all, 1, MPI_INT, MPI_MIN, node);
    if (want) shm_unlink(shm_name);
    if (!ok_all) {
        if (want) gdte_warn("node path off: a process of this node could not map a peer's shared memory");
        for (int w = 0; w < world_size; w++) {
            if (peer_slots[w]) munmap(peer_slots[w], SEG_BYTES);
            peer_slots[w] = NULL;
            peer_w[w] = 0;
        }
    }
    /* A process is its own framing peer: a device message to itself (a periodic dimension of one
     * process, a Sendrecv with itself) is one kernel from its buffer into the receive layout, not
     * a trip through host memory; its "mapping" of its own memory is the memory itself. Same
     * answer on every process: each decides for itself only. */
    if (want && ok_all && my_slots) {
        peer_w[world_rank] = PEER_IPC;
        peer_slots[world_rank] = my_slots;
    }
    /* Framing peers of other nodes (or across GDTETEST_NODE_SPLIT): every pair that both chose
     * fragments, known alike on both sides from the allgather above. */
    unsigned char *here = calloc((size_t)world_size, 1);
    for (int i = 0; here && i < nsize; i++) {
        int w = node_world[i];
        here[w] = !nsplit || ((w >= nsplit) == (world_rank >= nsplit));
    }
    int nremote = 0;
    for (int w = 0; here && w < world_size; w++) {
        if (w == world_rank || here[w] || !fwant || !all[NALL * w + 3]) continue;
        peer_w[w] = PEER_FRAG;
        nremote++;
    }
    free(here);
    free(all);
    free(node_world);
    PMPI_Comm_free(&node);
    PMPI_Comm_dup(MPI_COMM_WORLD, &fin_comm);
    PMPI_Comm_dup(MPI_COMM_WORLD, &frag_comm);
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &keyval, NULL);
    gdte_ipo_node_on_g = 1;
    gdte_ipo_node_gpu_note();
    gdte_ipo_node_comm_new(MPI_COMM_WORLD);
    int npeers = 0;
    for (int i = 0; i < world_size; i++) npeers += peer_w[i] == PEER_IPC && i != world_rank;
    gdte_info("node path %s: %d other process(es) of this node reached GPU to GPU (GDTE_MPI_IPC)", want ? "on" : "off",
              npeers);
    gdte_info("fragmented messages to other nodes %s: %d process(es) (GDTE_MPI_PIPELINE)", fwant ? "on" : "off", nremote);
    return MPI_SUCCESS;
}

static void sends_drain(void);
static void inflight_drain(void);
static void recycled_free(void);
static void frag_sends_reap(int block);
static void frag_pools_free(void);
static void prog_finalize(void);

void gdte_ipo_node_finalize(void)
{
    if (!gdte_ipo_node_on_g) return;
    inflight_drain(); /* senders wait for the FINs of batches still queued */
    sends_drain(); /* receivers may still be reading what this process sent */
    prof_print();
    isends_reap(1);
    prog_finalize();
    frag_sends_reap(1);
    frag_pools_free();
    /* MPI_COMM_WORLD's attribute is deleted by the MPI at finalize; its shadow with it. */
    PMPI_Comm_delete_attr(MPI_COMM_WORLD, keyval);
    PMPI_Comm_free_keyval(&keyval);
    zombies_free_all();
    PMPI_Comm_free(&fin_comm);
    PMPI_Comm_free(&frag_comm);
    gdte_ipo_node_on_g = 0;
    if (node_stream) gdte_gpu_stream_destroy(node_stream);
    node_stream = NULL;
    pthread_mutex_lock(&pers_tag_lock);
    free(pers_free_tags);
    pers_free_tags = NULL;
    pers_nfree = pers_cap = pers_next = 0;
    pthread_mutex_unlock(&pers_tag_lock);
    if (node_ev_app) gdte_gpu_event_destroy(node_ev_app);
    if (node_ev_send) gdte_gpu_event_destroy(node_ev_send);
    node_ev_app = node_ev_send = NULL;
    for (int w = 0; peer_slots && w < world_size; w++)
        if (peer_slots[w] && peer_slots[w] != my_slots) munmap(peer_slots[w], SEG_BYTES);
    free(peer_slots);
    peer_slots = NULL;
    free(peer_active);
    peer_active = NULL;
    if (my_slots) munmap(my_slots, SEG_BYTES);
    my_slots = NULL;
    free(slot_stack);
    slot_stack = NULL;
    recycled_free();
}

/* ---- the sender ---- */
/* Exported allocations: the IPC handle of an allocation's base, by base and buffer id (a
 * failed export is remembered too: memory the IPC cannot export is copied instead). */
typedef struct export_ent {
    uintptr_t base;
    uint64_t id;
    gdte_status_t st;
    gdte_gpu_ipc_handle_t h;
    UT_hash_handle hh;
} export_ent_t;
static export_ent_t *exports;

/* 1 when the bytes `count` elements of `type` at `buf` touch lie in one allocation (see
 * gdte_mem_span_one_alloc). */
static int user_span_one_alloc(const void *buf, int count, gdte_type_h type, int fake)
{
    gdte_bounds_t b;
    if (count <= 0 || gdte_type_bounds(type, &b) != GDTE_OK || b.true_extent <= 0) return 1;
    int64_t rep = (int64_t)(count - 1) * b.extent;
    uintptr_t lo = (uintptr_t)buf + (uintptr_t)(b.true_lb + (rep < 0 ? rep : 0));
    uintptr_t hi = (uintptr_t)buf + (uintptr_t)(b.true_lb + b.true_extent - 1 + (rep > 0 ? rep : 0));
    return fake ? gdte_fake_span_one((const void *)lo, (const void *)hi)
                : gdte_mem_span_one_alloc((const void *)lo, (const void *)hi);
}

static gdte_status_t export_ptr(const void *p, gdte_gpu_ipc_handle_t *h, int64_t *offset, uint64_t *rbase)
{
    void *base = NULL;
    uint64_t id = 0;
    /* The allocation from the memory-kind cache (one id query, no range query per message). */
    gdte_status_t st = gdte_mem_query_alloc(p, &base, &id);
    if (st != GDTE_OK) return st;
    *offset = (int64_t)((uintptr_t)p - (uintptr_t)base);
    *rbase = (uint64_t)(uintptr_t)base;
    uintptr_t b = (uintptr_t)base;
    pthread_mutex_lock(&node_lock);
    export_ent_t *e;
    HASH_FIND(hh, exports, &b, sizeof b, e);
    if (e && e->id == id && id) {
        *h = e->h;
        st = e->st;
        pthread_mutex_unlock(&node_lock);
        return st;
    }
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&node_lock);
            return GDTE_ERR_NO_MEMORY;
        }
        e->base = b;
        HASH_ADD(hh, exports, base, sizeof e->base, e);
    }
    st = gdte_gpu_ipc_get_handle(base, &e->h);
    e->id = id;
    e->st = st;
    *h = e->h;
    pthread_mutex_unlock(&node_lock);
    return st;
}

/* The sender's state until the receiver is done with the data. It outlives the application's
 * request when the send was detached: kept on `pending` until its word reads DONE. The marker
 * sent is kept in it: its slot, posted word, FIN tag, size and the shape the receiver reads. */
typedef struct node_send {
    mark_t mk;
    gdte_stage_t *stage;  /* a packed copy the receiver reads (irregular layouts, or detached) */
    gdte_type_h type;
    const void *user;     /* SHAPE_UNITS: the user's buffer and count (a detach packs them) */
    int count;
    int units_dev;        /* SHAPE_UNITS on a GPU: the device whose plan is pinned, else -1 */
    int sync;             /* synchronous mode, its receive not yet matched: completes only when the
                             receiver has the data (then as a standard send, below) */
    /* Synchronous mode: the marker goes by PMPI_Issend from `wire`; once that completes the
     * receive has matched, and the send may be detached like a standard one (a receiver that
     * posted its receive and then sits in MPI_Barrier must not hold an MPI_Ssend hostage). */
    MPI_Request mreq;
    mark_t wire;
    int detached;         /* the application's request was completed by the sender itself */
    int no_detach;        /* a detach was tried and could not be done */
    int req_gone;         /* the request record is gone: the entry is the list's alone */
    int done;             /* the receiver has finished: staging released, word free */
    int fake;
    int peer;             /* the receiver's rank in MPI_COMM_WORLD */
    int64_t t0;
    struct node_send *next;
} node_send_t;
static node_send_t *pending, *send_free; /* under send_lock (taken before node_lock, never after) */
static int send_nfree;
static _Atomic int pending_n; /* its length, read without the lock */
static pthread_mutex_t send_lock = PTHREAD_MUTEX_INITIALIZER;
static gdte_status_t ensure_stream(void);
static gdte_status_t host_after_app(void);

/* Records recycled like the internal sends': nothing allocated per message in steady state. */
static node_send_t *send_get(void)
{
    node_send_t *s;
    pthread_mutex_lock(&send_lock);
    RECYCLE_GET(send_free, send_nfree, s);
    pthread_mutex_unlock(&send_lock);
    if (!s) s = malloc(sizeof *s);
    if (s) memset(s, 0, sizeof *s), s->units_dev = -1, s->mreq = MPI_REQUEST_NULL;
    return s;
}

static void send_put(node_send_t *s) /* under send_lock */
{
    RECYCLE_PUT(send_free, send_nfree, s);
}

/* Under send_lock: the receiver has finished with `s` (its word reads DONE), or the marker was
 * never sent. */
static void send_done(node_send_t *s)
{
    if (s->stage) gdte_stage_release(s->stage);
    s->stage = NULL;
    if (s->units_dev >= 0 && s->type) gdte_devplan_unpin(s->type, s->units_dev);
    s->units_dev = -1;
    if (s->type) gdte_type_release(s->type);
    s->type = NULL;
    atomic_store_explicit(&my_slots[s->mk.slot].word, W_GEN(s->mk.word) | W_FREE, memory_order_relaxed);
    slot_stack[slot_top++] = s->mk.slot;
    s->done = 1;
}

static void pending_unlink(node_send_t *s)
{
    LL_DELETE(pending, s);
    pending_n--;
}

static unsigned word_state(const node_send_t *s)
{
    return W_STATE(atomic_load_explicit(&my_slots[s->mk.slot].word, memory_order_acquire));
}

static void send_release(node_send_t *s);
static void send_fini(gdte_ipo_req_t *r)
{
    node_send_t *s = r->ctx;
    r->ctx = NULL;
    send_release(s);
}

/* The application's request of send `s` has completed (or is gone): the record goes once the
 * receiver is done with the data. */
static void send_release(node_send_t *s)
{
    if (!s) return;
    pthread_mutex_lock(&send_lock);
    s->req_gone = 1;
    if (!s->done && word_state(s) == W_DONE) send_done(s);
    if (s->done && s->mreq == MPI_REQUEST_NULL) { /* else sends_progress reaps it */
        pending_unlink(s);
        send_put(s);
    }
    pthread_mutex_unlock(&send_lock);
}

/* The first `n` bytes of the data a marker names (dense, or rows of one stride) at `src`, to
 * `dst` contiguous: on `stream` (device memory) or at once (host memory: the fake device). */
static gdte_status_t copy_shape(void *dst, const char *src, const mark_t *mk, int64_t n, int host, gdte_stream_t stream)
{
    if (mk->shape == SHAPE_CONTIG) {
        if (host) return memcpy(dst, src, (size_t)n), GDTE_OK;
        return gdte_gpu_memcpy_async(dst, src, (size_t)n, stream);
    }
    int64_t full = n / mk->width, rest = n % mk->width;
    gdte_status_t st = GDTE_OK;
    if (host) {
        for (int64_t row = 0; row < full; row++)
            memcpy((char *)dst + row * mk->width, src + row * mk->pitch, (size_t)mk->width);
    } else if (full) {
        st = gdte_gpu_memcpy2d_async(dst, (size_t)mk->width, src, (size_t)mk->pitch, (size_t)mk->width, (size_t)full,
                                     stream);
    }
    if (st == GDTE_OK && rest) {
        if (host) memcpy((char *)dst + full * mk->width, src + full * mk->pitch, (size_t)rest);
        else st = gdte_gpu_memcpy_async((char *)dst + full * mk->width, src + full * mk->pitch, (size_t)rest, stream);
    }
    return st;
}

/* Under send_lock: copy the data the marker names into staging of our own (unless it already
 * is a packed copy of ours), publish where, and take the word from the receiver if it has not
 * claimed it. 1 when detached. */
static int detach(node_send_t *s)
{
    gdte_stage_t *cp = NULL;
    gdte_status_t st = GDTE_OK;
    if (!s->stage) {
        st = gdte_stage_acquire(GDTE_STAGE_DEVICE, s->fake, (size_t)s->mk.nbytes, &cp);
        if (st == GDTE_OK && s->mk.shape == SHAPE_UNITS) {
            st = gdte_xfer_pack_stage(s->user, s->count, s->type, s->fake, cp, s->mk.nbytes); /* synchronous */
        } else {
            if (st == GDTE_OK && !s->fake) st = ensure_stream();
            if (st == GDTE_OK)
                st = copy_shape(cp->ptr, (const char *)(uintptr_t)s->mk.addr, &s->mk, s->mk.nbytes, s->fake, node_stream);
            if (st == GDTE_OK && !s->fake) st = gdte_gpu_stream_synchronize(node_stream);
        }
    }
    slot_t *sl = &my_slots[s->mk.slot];
    const void *at = cp ? cp->ptr : s->stage ? s->stage->ptr : NULL;
    if (st == GDTE_OK && !at) st = GDTE_ERR_INTERNAL;
    if (st == GDTE_OK) {
        sl->addr = (uint64_t)(uintptr_t)at;
        sl->rbase = 0;
        if (!s->fake) st = export_ptr(at, &sl->handle, &sl->offset, &sl->rbase);
    }
    uint64_t want = s->mk.word;
    if (st != GDTE_OK || !atomic_compare_exchange_strong_explicit(&sl->word, &want, W_GEN(s->mk.word) | W_DETACHED,
                                                                  memory_order_acq_rel, memory_order_acquire)) {
        /* The receiver has it (it finishes inside a gdte call it is in now), or no copy. */
        if (cp) gdte_stage_release(cp);
        if (st != GDTE_OK) s->no_detach = 1;
        return 0;
    }
    if (cp) s->stage = cp;
    s->detached = 1;
    /* The application's request is the FIN receive: this process answers it itself. */
    (void)send_fin(world_rank, s->mk.fin_tag);
    gdte_ipo_cnt_g.node_detached++;
    gdte_debug("node path: a send of %lld bytes to rank %d detached after %.3f ms (%s)", (long long)s->mk.nbytes,
               s->peer, (double)(now_ns() - s->t0) / 1e6, cp ? "copied" : "its packed copy");
    return 1;
}

/* Sends in flight: finished ones release their staging; ones the receiver has not taken for
 * DETACH_NS (or at once, `all`) are detached. */
static void sends_progress(int all)
{
    if (!atomic_load_explicit(&pending_n, memory_order_relaxed)) return;
    int64_t now = now_ns();
    pthread_mutex_lock(&send_lock);
    for (node_send_t *s = pending, *next; s; s = next) {
        next = s->next;
        unsigned w = s->done ? W_FREE : word_state(s);
        if (w == W_CLAIMED || w == W_DONE) peer_active[s->peer] = now;
        if (w == W_DONE) send_done(s);
        if (s->mreq != MPI_REQUEST_NULL) {
            int flag = 0;
            PMPI_Test(&s->mreq, &flag, MPI_STATUS_IGNORE);
            if (flag) s->sync = 0; /* matched: may complete without the receiver from now on */
        }
        if (s->done) {
            if (s->req_gone && s->mreq == MPI_REQUEST_NULL) {
                pending_unlink(s);
                send_put(s);
            }
            continue;
        }
        /* A receiver that takes other messages of ours (a window) is not stuck: only one that
         * took nothing for DETACH_NS. */
        int64_t since = s->t0 > peer_active[s->peer] ? s->t0 : peer_active[s->peer];
        if (!s->detached && !s->sync && !s->no_detach && (all || now - since > detach_ns)) (void)detach(s);
    }
    pthread_mutex_unlock(&send_lock);
}

void gdte_ipo_node_sends_progress(void)
{
    /* Internal sends (FINs, announcements) complete in the MPI's time; a process that only
     * receives must reap them here too, or their requests pile up. */
    if (atomic_load_explicit(&isends_n, memory_order_relaxed)) isends_reap(0);
    frag_sends_reap(0);
    sends_progress(0);
}

/* MPI_Finalize: every send's receiver has finished (a receive must complete before its
 * process finalizes, inside a call that finishes markers); then nothing of ours is read. */
static void sends_drain(void)
{
    int64_t t0 = now_ns();
    for (;;) {
        sends_progress(1);
        gdte_ipo_node_progress();
        pthread_mutex_lock(&send_lock);
        int left = 0;
        for (node_send_t *s = pending; s; s = s->next) left += !s->done;
        /* Received: their synchronous markers complete (the MPI is done with `wire`). */
        for (node_send_t *s = pending; !left && s; s = s->next)
            if (s->mreq != MPI_REQUEST_NULL) PMPI_Wait(&s->mreq, MPI_STATUS_IGNORE);
        pthread_mutex_unlock(&send_lock);
        if (!left) return;
        if (now_ns() - t0 > drain_s * 1000000000ll) {
            gdte_warn("MPI_Finalize: %d device message(s) sent on the node path were never received; their staging "
                      "is left allocated",
                      left);
            return;
        }
        sched_yield();
    }
}

static int send_finish(gdte_ipo_req_t *r, MPI_Status *st, int rc)
{
    (void)r, (void)st;
    return rc;
}

static void free_ctx(gdte_ipo_req_t *r)
{
    free(r->ctx);
    r->ctx = NULL;
}

/* The record of a send whose request `h` is the application's: completion runs `fini` on `ctx`
 * (what the send keeps alive); `node_send`: a cancel does not cancel it (gdte_ipo_cancel). */
static void send_record(gdte_ipo_req_t *r, MPI_Request h, gdte_ipo_kind_t kind, MPI_Comm comm, void *ctx,
                        void (*fini)(gdte_ipo_req_t *), int node_send)
{
    r->handle = h;
    r->active = 1;
    r->kind = kind;
    r->comm = comm;
    r->dt = MPI_DATATYPE_NULL;
    r->ctx = ctx;
    r->finish = send_finish;
    r->fini = fini;
    r->node_send = node_send;
}

static int post_announcement(node_comm_t *nc, int dest, int tag, uint64_t cookie, int64_t nbytes, const void *data,
                             int ndata)
{
    isend_t *e = isend_get();
    if (!e) return MPI_ERR_NO_MEM;
    ann_hdr_t h = {cookie, nbytes};
    memcpy(e->u.b, &h, sizeof h);
    if (ndata) memcpy(e->u.b + sizeof h, data, (size_t)ndata);
    return isend_post(e, (int)sizeof(ann_hdr_t) + ndata, dest, tag, nc->shadow);
}

static int next_mark_send(gdte_ipo_mode_t m, const void *b, int dest, int tag, MPI_Comm c, MPI_Request *req)
{
    int n = GDTE_IPO_MARK_BYTES;
    if (req) {
        switch (m) {
        case GDTE_IPO_SYNC: return IPO_NEXT(Issend)(b, n, MPI_BYTE, dest, tag, c, req);
        case GDTE_IPO_BUFFERED: return IPO_NEXT(Ibsend)(b, n, MPI_BYTE, dest, tag, c, req);
        case GDTE_IPO_READY: return IPO_NEXT(Irsend)(b, n, MPI_BYTE, dest, tag, c, req);
        default: return IPO_NEXT(Isend)(b, n, MPI_BYTE, dest, tag, c, req);
        }
    }
    switch (m) {
    case GDTE_IPO_SYNC: return IPO_NEXT(Ssend)(b, n, MPI_BYTE, dest, tag, c);
    case GDTE_IPO_BUFFERED: return IPO_NEXT(Bsend)(b, n, MPI_BYTE, dest, tag, c);
    case GDTE_IPO_READY: return IPO_NEXT(Rsend)(b, n, MPI_BYTE, dest, tag, c);
    default: return IPO_NEXT(Send)(b, n, MPI_BYTE, dest, tag, c);
    }
}

/* An INLINE marker for `bytes` (exactly GDTE_IPO_MARK_BYTES, the message's packed bytes). With
 * `req` the marker's own request is the application's (the bytes are already copied). */
static int send_inline(gdte_ipo_mode_t mode, node_comm_t *nc, const void *bytes, int dest, int tag, MPI_Comm comm,
                       MPI_Request *req)
{
    uint64_t cookie = atomic_fetch_add(&next_cookie, 1);
    int rc = post_announcement(nc, dest, tag, cookie, GDTE_IPO_MARK_BYTES, bytes, GDTE_IPO_MARK_BYTES);
    if (rc != MPI_SUCCESS) return rc;
    mark_t *mk = calloc(1, sizeof *mk);
    if (!mk) return MPI_ERR_NO_MEM;
    mk->magic = MARK_MAGIC;
    mk->cookie = cookie;
    mk->nbytes = GDTE_IPO_MARK_BYTES;
    mk->how = HOW_INLINE;
    if (req) {
        /* The marker buffer must outlive the application's request: a copy kept until the
         * MPI is done with an internal twin is not possible, so the request's own buffer is
         * the one freed when the request completes (a record with fini). */
        rc = next_mark_send(mode, mk, dest, tag, comm, req);
        if (rc != MPI_SUCCESS) {
            free(mk);
            return rc;
        }
        gdte_ipo_req_t *r = gdte_ipo_req_new();
        if (!r) return MPI_SUCCESS; /* the marker leaks; the message is right */
        send_record(r, *req, GDTE_IPO_HOST, comm, mk, free_ctx, 0);
        gdte_ipo_req_insert(r);
        return MPI_SUCCESS;
    }
    rc = next_mark_send(mode, mk, dest, tag, comm, NULL);
    free(mk);
    return rc;
}

int gdte_ipo_node_send_host(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, int dest, int tag,
                            MPI_Comm comm, MPI_Request *req, int *rc_p)
{
    node_comm_t *nc = comm_info(comm);
    if (!nc || !is_peer(nc, dest)) return 0;
    int size = 0;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || (int64_t)size * count != GDTE_IPO_MARK_BYTES) return 0;
    unsigned char bytes[GDTE_IPO_MARK_BYTES];
    int pos = 0;
    int rc = PMPI_Pack(buf, count, dt, bytes, (int)sizeof bytes, &pos, comm);
    if (rc == MPI_SUCCESS) rc = send_inline(mode, nc, bytes, dest, tag, comm, req);
    *rc_p = rc;
    return 1;
}

/* Persistent sends of exactly a marker's size: the MPI's persistent request sends the marker
 * kept in r->ctx; each start gives it a new cookie and announces the bytes. */
typedef struct node_pers {
    mark_t mk;
    node_comm_t *nc;
    int dest, tag;
    MPI_Datatype dt; /* host buffers: packed by the MPI */
} node_pers_t;

int gdte_ipo_node_persistent_init(gdte_ipo_req_t *r, const void *buf, int count, MPI_Datatype dt, gdte_ipo_kind_t kind,
                                  int dest, int tag, MPI_Comm comm, void **marker_p)
{
    node_comm_t *nc = comm_info(comm);
    if (!nc || !is_peer(nc, dest)) return 0;
    int size = 0;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || (int64_t)size * count != GDTE_IPO_MARK_BYTES) return 0;
    node_pers_t *p = calloc(1, sizeof *p);
    if (!p) return 0;
    p->mk.magic = MARK_MAGIC;
    p->mk.nbytes = GDTE_IPO_MARK_BYTES;
    p->mk.how = HOW_INLINE;
    p->nc = nc;
    p->dest = dest;
    p->tag = tag;
    p->dt = dt;
    r->ctx = p;
    r->fini = free_ctx;
    r->user = (void *)buf;
    r->count = count;
    r->kind = kind;
    r->comm = comm;
    *marker_p = &p->mk;
    return 1;
}

int gdte_ipo_node_persistent_start(gdte_ipo_req_t *r)
{
    node_pers_t *p = r->ctx;
    unsigned char bytes[GDTE_IPO_MARK_BYTES];
    int rc = MPI_SUCCESS;
    if (r->kind == GDTE_IPO_HOST) {
        int pos = 0;
        rc = PMPI_Pack(r->user, r->count, p->dt, bytes, (int)sizeof bytes, &pos, r->comm);
    } else {
        gdte_status_t st = gdte_xfer_pack_to_host(r->user, r->count, r->type, r->kind == GDTE_IPO_FAKE, bytes, 0,
                                                  GDTE_IPO_MARK_BYTES);
        if (st != GDTE_OK) return gdte_ipo_fail(r->comm, "MPI_Start", st);
    }
    if (rc != MPI_SUCCESS) return rc;
    p->mk.cookie = atomic_fetch_add(&next_cookie, 1);
    return post_announcement(p->nc, p->dest, p->tag, p->mk.cookie, GDTE_IPO_MARK_BYTES, bytes, GDTE_IPO_MARK_BYTES);
}

/* ---- messages to other nodes: a marker, then fragments (HOW_FRAGS) ----
 * A device message of frag_min bytes or more to a framing peer of another node. The marker (the
 * message's size, the fragments' size and count, their tag on frag_comm) goes first, on the
 * application's envelope and in the application's mode, so MPI matches it as it would the
 * message; then the pack pipeline (xfer.c) packs and copies the message to pinned host staging
 * fragment by fragment, and each fragment is posted to the MPI as soon as its bytes are on the
 * host, while the next ones are packed: the network moves fragment k while the GPU packs k+1.
 *
 * A blocking send posts every fragment before it returns. A nonblocking one (MPI_Isend, Issend,
 * Irsend) queues the whole pack on the GPU and returns: its fragments are posted by every later
 * gdte call as they land (gdte_ipo_node_frag_advance), the completion of its request waits for
 * the rest (the buffer is free only once all of it is packed), and so does every call that may
 * block inside the MPI where gdte cannot progress (MPI_Barrier, blocking collectives, window
 * synchronisation, file calls: gdte_ipo_block_flush), since a peer waiting for these fragments
 * could otherwise hold such a call hostage. The staging goes when the MPI has sent
 * every fragment (any later gdte call reaps them, MPI_Finalize waits for them). */
typedef struct frag_send {
    gdte_stage_t *stage;
    int n, posted;   /* fragments; posted so far */
    int dest, tag;   /* on frag_comm */
    int64_t frag, nbytes;
    gdte_xfer_job_t *job; /* a nonblocking send's queued pack (NULL: all of it landed) */
    int sent;             /* every fragment posted and sent (the progress thread's test) */
    gdte_status_t st;     /* its first error (reported when the request completes) */
    int held;             /* the application's request still refers to it */
    void *mk;             /* the marker, kept until that request completes */
    MPI_Request *reqs;
    int cap;         /* reqs' length (kept when the record is recycled) */
    struct frag_send *next, *prev;
} frag_send_t;
/* In flight, oldest first (utlist), and every move of one (posting, testing, freeing): under
 * frag_lock, taken before node_lock where both are held. The packs of nonblocking sends run in
 * their order on the same two streams, so while one has a fragment still on its way no later one
 * has anything landed: the nonblocking passes stop at the first such send. */
static pthread_mutex_t frag_lock = PTHREAD_MUTEX_INITIALIZER;
static frag_send_t *frag_sends;
static _Atomic int frag_sends_n;
/* Recycled records of fragmented sends and receives, their arrays kept (under node_lock): a
 * steady stream of messages allocates nothing. */
static frag_send_t *frag_send_pool;
static int frag_send_npool;

/* reqs (and idx, when given) of at least n entries; 0 when out of memory. */
static int frag_arrays(MPI_Request **reqs, int **idx, int *cap, int n)
{
    if (n <= *cap) return 1;
    MPI_Request *r = realloc(*reqs, sizeof *r * (size_t)n);
    if (r) *reqs = r;
    int *x = idx ? realloc(*idx, sizeof *x * (size_t)n) : NULL;
    if (x) *idx = x;
    if (!r || (idx && !x)) return 0;
    *cap = n;
    return 1;
}

static frag_send_t *frag_send_get(int n)
{
    frag_send_t *fs;
    pthread_mutex_lock(&node_lock);
    RECYCLE_GET(frag_send_pool, frag_send_npool, fs);
    pthread_mutex_unlock(&node_lock);
    if (!fs && !(fs = calloc(1, sizeof *fs))) return NULL;
    MPI_Request *reqs = fs->reqs;
    int cap = fs->cap;
    memset(fs, 0, sizeof *fs);
    fs->reqs = reqs;
    fs->cap = cap;
    if (!frag_arrays(&fs->reqs, NULL, &fs->cap, n)) {
        free(fs->reqs);
        free(fs);
        return NULL;
    }
    for (int i = 0; i < n; i++) fs->reqs[i] = MPI_REQUEST_NULL;
    fs->n = n;
    return fs;
}

static void frag_send_free(frag_send_t *fs)
{
    gdte_xfer_job_end(fs->job);
    fs->job = NULL;
    if (fs->stage) gdte_stage_release(fs->stage);
    fs->stage = NULL;
    free(fs->mk);
    fs->mk = NULL;
    pthread_mutex_lock(&node_lock);
    if (frag_send_npool < ISEND_KEEP) {
        LL_PREPEND(frag_send_pool, fs);
        frag_send_npool++;
        fs = NULL;
    }
    pthread_mutex_unlock(&node_lock);
    if (fs) free(fs->reqs), free(fs);
}

static gdte_status_t frag_post(void *arg, int64_t off, int64_t len)
{
    frag_send_t *fs = arg;
    if (fs->posted >= fs->n) return GDTE_ERR_INTERNAL;
    int rc = PMPI_Isend((char *)fs->stage->ptr + off, (int)len, MPI_BYTE, fs->dest, fs->tag, frag_comm,
                        &fs->reqs[fs->posted]);
    if (rc != MPI_SUCCESS) return GDTE_ERR_TRANSPORT;
    fs->posted++;
    return GDTE_OK;
}

/* Post the fragments of a nonblocking send that have landed (`block`: all of them, waiting for
 * the GPU: it depends on no other process). Every fragment is posted even after a pack error,
 * since the receiver waits for all of them; the error is the request's. Under frag_lock. */
static void frag_advance_locked(frag_send_t *fs, int block)
{
    if (fs->posted == fs->n) return;
    int64_t landed = fs->n;
    if (fs->job) {
        gdte_status_t st = gdte_xfer_job_landed(fs->job, block, &landed);
        if (st != GDTE_OK && fs->st == GDTE_OK) fs->st = st;
        if (st != GDTE_OK) landed = fs->n; /* (the receiver waits for every fragment) */
    }
    while (fs->posted < landed) {
        int64_t off = (int64_t)fs->posted * fs->frag;
        if (frag_post(fs, off, fs->nbytes - off < fs->frag ? fs->nbytes - off : fs->frag) != GDTE_OK) {
            /* The MPI refused a fragment: the receiver will never have the message. */
            gdte_error("%d of %d fragments of a message to process %d could not be posted", fs->n - fs->posted, fs->n,
                       fs->dest);
            if (fs->st == GDTE_OK) fs->st = GDTE_ERR_TRANSPORT;
            fs->posted = fs->n; /* (nothing more is tried; reqs past it stay null) */
            break;
        }
    }
    if (fs->posted == fs->n && fs->job) {
        gdte_xfer_job_end(fs->job); /* every byte is on the host: its events and the type go */
        fs->job = NULL;
        gdte_ipo_frag_unposted_g--;
    }
}

/* One pass over the sends, oldest first, posting what has landed: `block` waits for all of it;
 * otherwise the pass stops at the first send still packing (the later ones are behind it on the
 * streams). Returns the fragments posted; *unposted_p (when given): a send has some left. */
static int frag_pass_locked(int block, int *unposted_p)
{
    int moved = 0, unposted = 0;
    frag_send_t *fs;
    DL_FOREACH(frag_sends, fs) {
        if (fs->posted == fs->n) continue;
        int before = fs->posted;
        frag_advance_locked(fs, block);
        moved += fs->posted - before;
        if (fs->posted < fs->n) {
            unposted = 1;
            break;
        }
    }
    if (unposted_p) *unposted_p = unposted;
    return moved;
}

/* Sends whose fragments have all gone release their staging; nonblocking ones post what has
 * landed. `block`: post and wait for all (MPI_Finalize). A thread that finds another one at it
 * leaves it to that one, unless it must block. */
static void frag_sends_reap(int block)
{
    if (!atomic_load_explicit(&frag_sends_n, memory_order_relaxed)) return;
    if (block) pthread_mutex_lock(&frag_lock);
    else if (pthread_mutex_trylock(&frag_lock)) return;
    (void)frag_pass_locked(block, NULL);
    frag_send_t *fs, *tmp;
    DL_FOREACH_SAFE(frag_sends, fs, tmp) {
        int flag = 0;
        if (block) PMPI_Waitall(fs->n, fs->reqs, MPI_STATUSES_IGNORE), flag = 1;
        else PMPI_Testall(fs->posted, fs->reqs, &flag, MPI_STATUSES_IGNORE);
        if (flag && fs->posted == fs->n && !fs->held) {
            DL_DELETE(frag_sends, fs);
            frag_sends_n--;
            frag_send_free(fs);
        }
    }
    pthread_mutex_unlock(&frag_lock);
}

_Atomic int gdte_ipo_frag_unposted_g; /* nonblocking sends with fragments not yet posted */

void gdte_ipo_node_frag_advance(int block)
{
    if (!atomic_load_explicit(&gdte_ipo_frag_unposted_g, memory_order_acquire)) return;
    if (block) pthread_mutex_lock(&frag_lock);
    else if (pthread_mutex_trylock(&frag_lock)) return;
    int moved = frag_pass_locked(block, NULL);
    pthread_mutex_unlock(&frag_lock);
    if (block && moved) gdte_ipo_cnt_g.node_frag_flushes++;
}

/* The progress thread (GDTE_MPI_PROGRESS_THREAD, where the MPI provides MPI_THREAD_MULTIPLE):
 * while a nonblocking send has fragments still being packed it posts them as they land, polling
 * (a yield between passes: a pack lasts tens to hundreds of microseconds), and tests the posted
 * fragments until the MPI has sent them all (a transport that copies a large message in pieces
 * moves it only while the sender calls into it); otherwise it sleeps on a condition the sends
 * signal. Without it a fragment waits for the application's next MPI call, so an application
 * that computes between MPI_Isend and MPI_Wait overlaps the pack with its work, not the
 * transfer. On one H200 across a forced node boundary, without MPI calls during the work: 1-6%
 * hidden (contig, 64 KiB-16 MiB) with neither, 3-13% posting only, 66-96% posting and testing
 * (overlap-h200-97772ca.csv). GDTETEST_PROGRESS_DRIVE=0: posting only (to measure that). */
static pthread_t prog_thread;
static pthread_mutex_t prog_mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t prog_cv = PTHREAD_COND_INITIALIZER;
static int prog_started;

static void *prog_main(void *arg)
{
    (void)arg;
    int busy = 0, idle = 0;
    for (;;) {
        pthread_mutex_lock(&prog_mx);
        while (!prog_stop && !busy && !atomic_load_explicit(&gdte_ipo_frag_unposted_g, memory_order_acquire))
            pthread_cond_wait(&prog_cv, &prog_mx);
        int stop = prog_stop;
        pthread_mutex_unlock(&prog_mx);
        if (stop) return NULL;
        int moved = 0;
        busy = 1; /* (another thread holds the lock: look again) */
        if (!pthread_mutex_trylock(&frag_lock)) {
            moved = frag_pass_locked(0, &busy);
            gdte_ipo_cnt_g.node_frag_thread_posts += moved;
            /* The posted fragments tested until sent: a transport that copies a large message
             * in pieces the sender feeds moves it only while the sender calls into it. */
            frag_send_t *fs;
            DL_FOREACH(frag_sends, fs) {
                if (!prog_drive || !fs->posted || fs->sent) continue;
                int flag = 0;
                PMPI_Testall(fs->posted, fs->reqs, &flag, MPI_STATUSES_IGNORE);
                if (flag && fs->posted == fs->n) fs->sent = 1;
                else busy = 1;
            }
            pthread_mutex_unlock(&frag_lock);
        }
        /* A peer that takes its time to receive: poll less often the longer nothing lands. */
        idle = moved ? 0 : idle + 1;
        if (idle > 1000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

/* A nonblocking send to another node was posted: wake the thread (started at the first). */
static void prog_kick(void)
{
    if (!prog_on) return;
    pthread_mutex_lock(&prog_mx);
    if (!prog_started && !prog_stop) {
        if (pthread_create(&prog_thread, NULL, prog_main, NULL) == 0) {
            prog_started = 1;
        } else {
            prog_on = 0;
            gdte_warn("no progress thread (pthread_create failed): fragments of nonblocking sends to other nodes are "
                      "posted by the application's MPI calls");
        }
    }
    pthread_cond_signal(&prog_cv);
    pthread_mutex_unlock(&prog_mx);
}

static void prog_finalize(void)
{
    pthread_mutex_lock(&prog_mx);
    prog_stop = 1;
    pthread_cond_signal(&prog_cv);
    int started = prog_started;
    pthread_mutex_unlock(&prog_mx);
    if (started) pthread_join(prog_thread, NULL);
    prog_started = 0;
}

/* Completion of a nonblocking send's request: the rest of its fragments posted (the buffer is
 * free once all of it is packed), and the pack's error, if any, is the request's. */
static int frag_send_finish(gdte_ipo_req_t *r, MPI_Status *st, int rc)
{
    (void)st;
    frag_send_t *fs = r->ctx;
    pthread_mutex_lock(&frag_lock);
    frag_advance_locked(fs, 1);
    gdte_status_t s = fs->st;
    pthread_mutex_unlock(&frag_lock);
    if (rc == MPI_SUCCESS && s != GDTE_OK) return gdte_ipo_fail(r->comm, "MPI_Wait", s);
    return rc;
}

/* MPI_Test and the like: whether the send still has fragments on their way (those landed are
 * posted first). */
static int frag_send_pending(gdte_ipo_req_t *r)
{
    frag_send_t *fs = r->ctx;
    pthread_mutex_lock(&frag_lock);
    frag_advance_locked(fs, 0);
    int pending = fs->posted < fs->n;
    pthread_mutex_unlock(&frag_lock);
    return pending;
}

static void frag_send_fini(gdte_ipo_req_t *r)
{
    frag_send_t *fs = r->ctx;
    r->ctx = NULL;
    if (!fs) return;
    pthread_mutex_lock(&frag_lock);
    frag_advance_locked(fs, 1); /* (a request that failed in the MPI before its completion ran) */
    fs->held = 0;
    pthread_mutex_unlock(&frag_lock);
}

/* While the next fragment is packed: the MPI moves the posted ones. */
static void frag_idle(void *arg)
{
    frag_send_t *fs = arg;
    int flag = 0;
    PMPI_Testall(fs->posted, fs->reqs, &flag, MPI_STATUSES_IGNORE);
}

static int64_t frag_size_for(int64_t nbytes)
{
    int64_t f = frag_size_test > 0 ? frag_size_test : gdte_xfer_frag_size(nbytes);
    int64_t least = (nbytes + FRAG_MAX_COUNT - 1) / FRAG_MAX_COUNT;
    if (f < least) f = (least + 4095) & ~(int64_t)4095;
    return f > 0 ? f : 1;
}

static int frag_send(gdte_ipo_mode_t mode, node_comm_t *nc, const void *buf, int count, gdte_type_h type, int fake,
                     int64_t nbytes, int dest, int tag, MPI_Comm comm, MPI_Request *req, const char *fn)
{
    int64_t frag = frag_size_for(nbytes);
    int n = (int)((nbytes + frag - 1) / frag);
    double t0 = frag_timed ? gdte_time_now() : 0, t1 = t0, t2 = t0;
    frag_send_t *fs = frag_send_get(n);
    mark_t *mk = calloc(1, sizeof *mk);
    gdte_ipo_req_t *r = req ? gdte_ipo_req_new() : NULL;
    gdte_status_t st = !fs || !mk || (req && !r) ? GDTE_ERR_NO_MEMORY : GDTE_OK;
    if (st == GDTE_OK) st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)nbytes, &fs->stage);
    if (t0) t1 = gdte_time_now();
    if (st != GDTE_OK) {
        if (fs) frag_send_free(fs);
        free(mk);
        if (r) gdte_ipo_req_destroy(r);
        return gdte_ipo_fail(comm, fn, st);
    }
    uint64_t cookie = atomic_fetch_add(&next_cookie, 1);
    fs->dest = nc->world[dest];
    fs->tag = (int)(1 + cookie % (uint64_t)(tag_ub > 1 ? tag_ub - 1 : 1));
    fs->frag = frag;
    fs->nbytes = nbytes;
    mk->magic = MARK_MAGIC;
    mk->cookie = cookie;
    mk->nbytes = nbytes;
    mk->how = HOW_FRAGS;
    mk->fin_tag = fs->tag;
    mk->rows = n;
    mk->width = frag;
    mk->pid = (int64_t)getpid();
    /* A nonblocking send queues its pack before the marker goes (a failure to queue is then
     * this call's error, with nothing sent). */
    if (req) st = gdte_xfer_pack_to_host_start(buf, count, type, fake, fs->stage->ptr, nbytes, frag, &fs->job);
    if (t0) t2 = gdte_time_now();
    if (st != GDTE_OK) {
        frag_send_free(fs);
        free(mk);
        gdte_ipo_req_destroy(r);
        return gdte_ipo_fail(comm, fn, st);
    }
    MPI_Request mreq = MPI_REQUEST_NULL;
    int rc = post_announcement(nc, dest, tag, cookie, nbytes, NULL, 0);
    if (rc == MPI_SUCCESS) rc = next_mark_send(mode, mk, dest, tag, comm, &mreq);
    if (rc != MPI_SUCCESS) {
        frag_send_free(fs);
        free(mk);
        if (r) gdte_ipo_req_destroy(r);
        return rc;
    }
    gdte_ipo_cnt_g.sends++;
    gdte_ipo_cnt_g.node_frag_sends++;
    gdte_ipo_cnt_g.bytes_packed += nbytes;
    gdte_debug("%s: %lld bytes of device data to a process of another node, in %d fragment(s) of %lld bytes", fn,
               (long long)nbytes, n, (long long)frag);
    if (req) {
        /* The marker's request is the application's; it cannot be cancelled (gdte_ipo_cancel):
         * the fragments go in any case. */
        fs->held = 1;
        fs->mk = mk;
        gdte_ipo_frag_unposted_g++;
        pthread_mutex_lock(&frag_lock);
        frag_advance_locked(fs, 0);
        int unposted = fs->posted < fs->n;
        if (unposted) gdte_ipo_cnt_g.node_frag_async++;
        DL_APPEND(frag_sends, fs);
        frag_sends_n++;
        pthread_mutex_unlock(&frag_lock);
        prog_kick(); /* (also when all of it is posted: the thread tests it until sent) */
        if (t0) {
            double jt[3] = {0, 0, 0};
            if (fs->job) gdte_xfer_job_times(fs->job, jt);
            gdte_info("%s: %lld bytes to another node: staging %.1f us, pack queued in %.1f us (packs %.1f, events "
                      "%.1f, copies %.1f), marker and %d of %d fragments posted by %.1f us",
                      fn, (long long)nbytes, (t1 - t0) * 1e6, (t2 - t1) * 1e6, jt[0] * 1e6, jt[1] * 1e6, jt[2] * 1e6,
                      fs->posted, fs->n, (gdte_time_now() - t0) * 1e6);
        }
        *req = mreq;
        send_record(r, mreq, GDTE_IPO_HOST, comm, fs, frag_send_fini, 1);
        r->finish = frag_send_finish;
        r->pending = frag_send_pending;
        gdte_ipo_req_insert(r);
        return MPI_SUCCESS;
    }
    /* The receiver now waits for n fragments: a pack that fails still sends them all (what
     * the staging holds), and the error is this call's. */
    gdte_xfer_notify_t nt = {frag_post, frag_idle, fs, frag};
    st = gdte_xfer_pack_to_host_notify(buf, count, type, fake, fs->stage->ptr, nbytes, &nt);
    pthread_mutex_lock(&frag_lock);
    fs->st = st;
    frag_advance_locked(fs, 1);
    st = fs->st;
    DL_APPEND(frag_sends, fs);
    frag_sends_n++;
    pthread_mutex_unlock(&frag_lock);
    if (st != GDTE_OK) {
        /* The marker is out: its request goes on in the background. */
        PMPI_Request_free(&mreq);
        return gdte_ipo_fail(comm, fn, st); /* mk stays: the MPI may still read it */
    }
    gdte_ipo_node_block(1, &mreq, 0); /* a synchronous send's marker: our own marker receives meanwhile */
    rc = PMPI_Wait(&mreq, MPI_STATUS_IGNORE);
    free(mk);
    return rc;
}

/* An irregular layout for the receiver to read in place: its shape, and its unit array where the
 * receiver can reach it (the device plan pinned and exported; the host array on the fake
 * device, read there with process_vm_readv). */
static gdte_status_t units_offer(gdte_type_h type, int fake, const gdte_layout_t *L, node_lay_t *w, node_send_t *s)
{
    const gdte_unit_t *hu = NULL;
    int64_t n = 0;
    gdte_status_t st = gdte_engine_units(type, &hu, &n);
    if (st != GDTE_OK) return st;
    if (n != L->nunits || n <= 0 || L->ndims < 0 || L->ndims > GDTE_MAX_DIMS || L->rep_bytes <= 0)
        return GDTE_ERR_UNSUPPORTED;
    memset(w, 0, sizeof *w);
    w->ndims = L->ndims;
    w->max_unit_len = L->max_unit_len;
    w->align = L->align;
    w->total = L->total;
    w->nunits = L->nunits;
    w->rep_bytes = L->rep_bytes;
    for (int k = 0; k < L->ndims; k++) {
        w->count[k] = L->count[k];
        w->stride[k] = L->stride[k];
    }
    if ((st = gdte_devplan_units_hash(type, &w->units_hash)) != GDTE_OK) return st;
    if (fake) {
        w->units_addr = (uint64_t)(uintptr_t)hu;
        return GDTE_OK;
    }
    const gdte_unit_t *du = NULL;
    if ((st = gdte_devplan_pin(type, &du)) != GDTE_OK) return st;
    s->units_dev = gdte_gpu_current_device();
    w->units_addr = (uint64_t)(uintptr_t)du;
    return export_ptr(du, &w->units_handle, &w->units_offset, &w->units_rbase);
}

/* A layout whose blocks average fewer bytes than this is sparse: read from another GPU, each
 * block drags in the rest of its 32-byte sectors over the link. */
#define SPARSE_BLOCK 128

/* Blocks of `type` are short enough that a receiver on another GPU, reading them in place over
 * the link, would move far more bytes than the message holds (8-byte blocks at a 16-byte stride:
 * twice; two H200s, 5964dc8: a 4 MiB vector message in 28 us where 4 MiB of dense data takes 15).
 * The sender then packs them on its own GPU first, at its memory's bandwidth, and the link
 * carries only packed bytes. */
static int sparse_type(gdte_type_h type)
{
    gdte_type_info_t ti;
    return gdte_type_get_info(type, &ti) == GDTE_OK && ti.num_blocks > 0 && ti.size / ti.num_blocks < SPARSE_BLOCK;
}

/* How a send reaches a receiver on another GPU: PACK_SPARSE, a sparse layout goes as a packed
 * copy; PACK_ALWAYS, any layout does (a small message: the send then completes at once, as an
 * eager one would). */
enum { PACK_NONE, PACK_SPARSE, PACK_ALWAYS };

/* The shape the receiver reads: the user's layout when it is dense or one stride, or irregular
 * with its units offered (`lay` filled), else a packed copy in device staging. `*first` is the
 * layout's origin (byte 0 of a dense or strided layout); `*anchor` a byte of the data, inside
 * the allocation, to export it by: an irregular layout's origin (buf + disp) can lie outside it
 * (negative true lower bounds, MPI_BOTTOM). `pack` (PACK_*) may ask for the packed copy. */
static gdte_status_t send_shape(const void *buf, int count, gdte_type_h type, int fake, int64_t nbytes, int pack,
                                mark_t *mk, node_send_t *s, node_lay_t *lay, const void **first, const void **anchor)
{
    gdte_layout_t L;
    gdte_status_t st = gdte_engine_layout(type, count, &L);
    if (st != GDTE_OK) return st;
    const char *u = (const char *)((uintptr_t)buf + (uintptr_t)L.disp);
    int dense = L.kind == GDTE_LAYOUT_KIND_CONTIG && L.total == nbytes;
    if (pack == PACK_ALWAYS || (pack == PACK_SPARSE && !dense && nbytes >= sparse_pack_min && sparse_type(type))) {
        if (pack == PACK_SPARSE) gdte_ipo_cnt_g.node_sparse_packed++;
    } else if (!user_span_one_alloc(buf, count, type, fake)) {
        /* One IPC mapping covers one allocation: data that reaches into another (a type with
         * relative displacements between two arrays) goes as a packed copy. */
        gdte_ipo_cnt_g.node_split++;
    } else if (dense) {
        mk->shape = SHAPE_CONTIG;
        *first = u;
        return GDTE_OK;
    } else if (L.kind == GDTE_LAYOUT_KIND_STRIDED && L.ndims == 1 && L.stride[0] > L.blocklen && L.total == nbytes) {
        mk->shape = SHAPE_ROWS;
        mk->rows = L.count[0];
        mk->width = L.blocklen;
        mk->pitch = L.stride[0];
        *first = u;
        return GDTE_OK;
    } else if (L.kind == GDTE_LAYOUT_KIND_UNITS && L.total == nbytes && !send_packed) {
        if (units_offer(type, fake, &L, lay, s) == GDTE_OK) {
            mk->shape = SHAPE_UNITS;
            gdte_type_retain(type); /* the pin is released with it (send_done) */
            s->type = type;
            s->user = buf;
            s->count = count;
            *first = u;
            *anchor = (const void *)((uintptr_t)buf + (uintptr_t)L.true_lb); /* element 0's first byte */
            return GDTE_OK;
        }
        if (s->units_dev >= 0) gdte_devplan_unpin(type, s->units_dev);
        s->units_dev = -1;
    }
    if ((st = gdte_stage_acquire(GDTE_STAGE_DEVICE, fake, (size_t)nbytes, &s->stage)) != GDTE_OK) return st;
    if ((st = gdte_xfer_pack_stage(buf, count, type, fake, s->stage, nbytes)) != GDTE_OK) return st;
    mk->shape = SHAPE_CONTIG;
    *first = s->stage->ptr;
    return GDTE_OK;
}

/* How a device send of `nbytes` (more than a marker's) to framing peer `dest` of this node goes:
 * PACK_* by the node path, or -1 not (the MPI_PACKED path). `nonblocking`: an MPI_Isend or a
 * persistent send. *ce_peer: CE_PEER_* when the message is one the copy engines would move, to a
 * peer on another GPU or one MPS shares our context with (counted per message, by ce_count, once
 * it is posted), else CE_PEER_NONE. */
enum { CE_PEER_NONE, CE_PEER_OTHER_GPU, CE_PEER_MPS };
static void ce_count(int ce_peer)
{
    if (ce_peer == CE_PEER_OTHER_GPU) gdte_ipo_cnt_g.node_other_gpu++;
    else if (ce_peer == CE_PEER_MPS) gdte_ipo_cnt_g.node_mps++;
}
static int node_pack_mode(gdte_ipo_mode_t mode, node_comm_t *nc, int dest, gdte_type_h type, int count, int64_t nbytes,
                          int fake, int nonblocking, int *ce_peer)
{
    *ce_peer = CE_PEER_NONE;
    /* Buffered sends complete without the receiver: they keep the MPI_PACKED path. Small
     * messages to a peer on this GPU too (the copy engines move them faster than a kernel on the
     * receiver, which would wait for a context switch), unless MPS shares the contexts. On the
     * fake device the copy-engine rule applies only where a test makes peers count as on other
     * GPUs or as MPS clients (GDTETEST_NODE_OTHER_GPU, GDTETEST_NODE_MPS). */
    if (mode == GDTE_IPO_BUFFERED || nbytes < GDTE_IPO_MARK_BYTES) return -1;
    gdte_ipo_node_gpu_note();
    const int other = other_gpu(nc->world[dest]);
    int pack = other ? PACK_SPARSE : PACK_NONE;
    if (ipc_min) {
        if (nbytes < ipc_min) return -1;
    } else if ((fake ? other_gpu_all || mps_test > 0 : gdte_gpu_available()) &&
               gdte_xfer_copy_engine_shape(type, count, nbytes)) {
        /* A message the copy engines would move through host memory to a peer on this GPU; to
         * one on another GPU, or whose context MPS shares with ours, GPU to GPU. A blocking send
         * goes as a packed copy in device staging, so that it completes at once as it would
         * through host memory (a blocking send of a small message must not wait for its
         * receive: send, send, receive, receive between two processes is common). A nonblocking
         * one is read in place, as larger messages are: its request completes when the receiver
         * has copied it (or when the sender detaches it), and the packed copy's kernel and
         * synchronisation are saved (one H200 under MPS, a window of 64: 1 KiB contiguous 5.4-5.6
         * us a message against 13.7 us packed, vector 4.3-4.6 against 14.0; 16 KiB contiguous
         * 5.3-5.5 against 13.8). */
        if (!no_switch(nc->world[dest])) return -1;
        *ce_peer = other ? CE_PEER_OTHER_GPU : CE_PEER_MPS;
        if (!nonblocking) pack = PACK_ALWAYS;
    }

    return pack;
}

/* FIN tags on fin_comm: a send's comes from its cookie, in the lower half of the tag range; a
 * persistent send holds one of the upper half for its life (its FIN receive is the application's
 * persistent request, started at each MPI_Start), so the two never meet. */
static int fin_half(void) { return tag_ub > 3 ? tag_ub / 2 + 1 : 2; }
static int fin_tag_of(uint64_t cookie) { return (int)(1 + cookie % (uint64_t)(fin_half() - 1)); }
/* A free persistent FIN tag, or 0 when none is left. */
static int pers_tag_get(void)
{
    int t = 0;
    pthread_mutex_lock(&pers_tag_lock);
    if (pers_nfree) t = pers_free_tags[--pers_nfree];
    else if (fin_half() + pers_next <= tag_ub) t = fin_half() + pers_next++;
    pthread_mutex_unlock(&pers_tag_lock);
    return t;
}
static void pers_tag_put(int t)
{
    pthread_mutex_lock(&pers_tag_lock);
    if (pers_nfree == pers_cap) {
        int c = pers_cap ? 2 * pers_cap : 64;
        int *a = realloc(pers_free_tags, sizeof *a * (size_t)c);
        if (a) pers_free_tags = a, pers_cap = c;
    }
    if (pers_nfree < pers_cap) pers_free_tags[pers_nfree++] = t; /* else the tag is not reused */
    pthread_mutex_unlock(&pers_tag_lock);
}

/* Post a device send of the node path (`pack`: PACK_*): a completion word, the shape the receiver
 * reads, the announcement and the marker, the record on the pending list (*s_p). The FIN receive
 * that completes the send: posted here (*fin_p) when `pers_tag` is 0, else the caller's persistent
 * receive of FIN tag `pers_tag` (gdte_ipo_node_persistent_init). Returns MPI_SUCCESS, an MPI error
 * (nothing left in flight), or NODE_NO_SLOT (every completion word in use: nothing was sent). */
#define NODE_NO_SLOT (-1)
static int node_send_post(gdte_ipo_mode_t mode, node_comm_t *nc, const void *buf, int count, gdte_type_h type,
                          int fake, int64_t nbytes, int dest, int tag, MPI_Comm comm, int pack, int pers_tag,
                          MPI_Request *fin_p, node_send_t **s_p, const char *fn)
{
    gdte_status_t st;
    int64_t t_send = prof_t0();
    gdte_ipo_node_sends_progress();
    prof_add(P_SEND_PROGRESS, t_send);
    node_send_t *s = send_get();
    if (!s) return gdte_ipo_fail(comm, fn, GDTE_ERR_NO_MEMORY);
    mark_t *mk = &s->mk;
    pthread_mutex_lock(&send_lock);
    mk->slot = slot_top ? slot_stack[--slot_top] : -1;
    pthread_mutex_unlock(&send_lock);
    if (mk->slot < 0) {
        /* Every completion word in use (that many sends in flight): the MPI_PACKED path, which
         * the MPI orders with the markers on the same envelope. */
        free(s);
        return NODE_NO_SLOT;
    }
    const void *first = NULL, *anchor = NULL;
    node_lay_t lay;
    int64_t t = prof_t0();
    st = send_shape(buf, count, type, fake, nbytes, pack, mk, s, &lay, &first, &anchor);
    prof_add(P_SEND_SHAPE, t);
    if (!anchor) anchor = first;
    /* The receiver reads the user's buffer in place: what the application queued before this
     * call is in it first (a packed copy was made after that work already). */
    t = prof_t0();
    if (st == GDTE_OK && !fake && !s->stage) st = host_after_app(), prof_add(P_SEND_APP, t);
    if (st == GDTE_OK && !fake) {
        t = prof_t0();
        st = export_ptr(anchor, &mk->handle, &mk->offset, &mk->rbase);
        prof_add(P_SEND_EXPORT, t);
        /* The origin from the allocation's base: negative when it lies before it. */
        if (st == GDTE_OK) mk->offset += (int64_t)((uintptr_t)first - (uintptr_t)anchor);
        if (st == GDTE_ERR_UNSUPPORTED && !s->stage) {
            /* Memory the IPC cannot export (managed memory): a packed copy in staging. */
            if ((st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, (size_t)nbytes, &s->stage)) == GDTE_OK &&
                (st = gdte_xfer_pack_stage(buf, count, type, 0, s->stage, nbytes)) == GDTE_OK) {
                mk->shape = SHAPE_CONTIG;
                first = s->stage->ptr;
                st = export_ptr(first, &mk->handle, &mk->offset, &mk->rbase);
            }
        }
    } else if (st == GDTE_OK) {
        /* Fake device: the receiver reads from the allocation's base and the offset, as the IPC
         * path does, so CI checks the same arithmetic and the same lookup of the allocation. */
        uintptr_t b = 0;
        if (s->stage) {
            mk->rbase = 0; /* our staging (not registered memory): its address */
        } else if (gdte_fake_base(anchor, &b)) {
            mk->rbase = (uint64_t)b;
            mk->offset = (int64_t)((uintptr_t)first - b);
        } else {
            st = GDTE_ERR_MEMORY_KIND;
        }
    }
    uint64_t cookie = atomic_fetch_add(&next_cookie, 1);
    mk->word = W_GEN(atomic_load_explicit(&my_slots[mk->slot].word, memory_order_relaxed)) + 0x100 + W_POSTED;
    if (st == GDTE_OK) {
        mk->magic = MARK_MAGIC;
        mk->cookie = cookie;
        mk->nbytes = nbytes;
        mk->how = HOW_IPC;
        mk->fin_tag = pers_tag ? pers_tag : fin_tag_of(cookie);
        mk->pid = (int64_t)getpid();
        mk->addr = (uint64_t)(uintptr_t)first;
        atomic_store_explicit(&my_slots[mk->slot].word, mk->word, memory_order_release);
        if (!s->type) gdte_type_retain(type), s->type = type;
        s->sync = mode == GDTE_IPO_SYNC;
        s->fake = fake;
        s->peer = nc->world[dest];
        s->t0 = now_ns();
    }
    /* The FIN receive is the application's request: it completes when the receiver has copied
     * the data, or when this process detached the send (it answers itself then). A persistent
     * send's is the application's persistent request, started by the caller. */
    MPI_Request fin = MPI_REQUEST_NULL;
    isend_t *e = NULL;
    int rc = st == GDTE_OK ? MPI_SUCCESS : gdte_ipo_fail(comm, fn, st);
    t = prof_t0();
    if (rc == MPI_SUCCESS && !pers_tag) rc = PMPI_Irecv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, mk->fin_tag, fin_comm, &fin);
    if (rc == MPI_SUCCESS)
        rc = mk->shape == SHAPE_UNITS ? post_announcement(nc, dest, tag, cookie, nbytes, &lay, (int)sizeof lay)
                                      : post_announcement(nc, dest, tag, cookie, nbytes, NULL, 0);
    if (rc == MPI_SUCCESS && s->sync) {
        s->wire = *mk;
        rc = PMPI_Issend(&s->wire, GDTE_IPO_MARK_BYTES, MPI_BYTE, dest, tag, comm, &s->mreq);
    } else if (rc == MPI_SUCCESS) {
        rc = (e = isend_get()) ? MPI_SUCCESS : MPI_ERR_NO_MEM;
        if (rc == MPI_SUCCESS) {
            e->u.mk = *mk;
            rc = isend_post(e, GDTE_IPO_MARK_BYTES, dest, tag, comm);
        }
    }
    prof_add(P_SEND_POST, t);
    if (rc != MPI_SUCCESS) {
        if (fin != MPI_REQUEST_NULL) PMPI_Cancel(&fin), PMPI_Request_free(&fin);
        pthread_mutex_lock(&send_lock);
        send_done(s);
        send_put(s);
        pthread_mutex_unlock(&send_lock);
        return rc;
    }
    pthread_mutex_lock(&send_lock);
    LL_PREPEND(pending, s);
    pending_n++;
    /* A packed copy is the sender's own: the send completes now, as an eager one would. */
    if (s->stage && !s->sync) (void)detach(s);
    pthread_mutex_unlock(&send_lock);
    gdte_ipo_cnt_g.node_sends++;
    if (mk->shape == SHAPE_UNITS) gdte_ipo_cnt_g.node_units++;
    gdte_ipo_cnt_g.bytes_packed += nbytes;
    gdte_debug("%s: %lld bytes of device data to a process of this node, GPU to GPU (%s)", fn, (long long)nbytes,
               s->stage ? "packed copy" : "user layout");
    prof_add(P_SEND, t_send);
    *fin_p = fin;
    *s_p = s;
    return MPI_SUCCESS;
}

int gdte_ipo_node_send_device(gdte_ipo_mode_t mode, const void *buf, int count, MPI_Datatype dt, gdte_ipo_kind_t kind,
                              int dest, int tag, MPI_Comm comm, MPI_Request *req, int *rc_p)
{
    node_comm_t *nc = comm_info(comm);
    if (!nc || !is_peer(nc, dest)) return 0;
    const char *fn = req ? "MPI_Isend" : "MPI_Send";
    gdte_type_h type;
    int64_t nbytes;
    gdte_status_t st = gdte_ipo_type(dt, count, &type, &nbytes);
    if (st != GDTE_OK) {
        *rc_p = gdte_ipo_fail(comm, fn, st);
        return 1;
    }
    int fake = kind == GDTE_IPO_FAKE;
    if (nbytes == GDTE_IPO_MARK_BYTES) {
        unsigned char bytes[GDTE_IPO_MARK_BYTES];
        st = gdte_xfer_pack_to_host(buf, count, type, fake, bytes, 0, nbytes);
        *rc_p = st != GDTE_OK ? gdte_ipo_fail(comm, fn, st) : send_inline(mode, nc, bytes, dest, tag, comm, req);
        if (*rc_p == MPI_SUCCESS) {
            /* A device message packed by gdte, its bytes inside the announcement. */
            gdte_ipo_cnt_g.sends++;
            gdte_ipo_cnt_g.bytes_packed += nbytes;
        }
        return 1;
    }
    if (peer_w[nc->world[dest]] == PEER_FRAG) {
        /* Another node. Buffered sends complete without the receiver: MPI_PACKED. */
        if (mode == GDTE_IPO_BUFFERED || nbytes < frag_min) return 0;
        *rc_p = frag_send(mode, nc, buf, count, type, fake, nbytes, dest, tag, comm, req, fn);
        return 1;
    }
    int ce_peer;
    const int pack = node_pack_mode(mode, nc, dest, type, count, nbytes, fake, req != NULL, &ce_peer);
    if (pack < 0) return 0;
    gdte_ipo_req_t *r = gdte_ipo_req_new();
    if (!r) {
        *rc_p = gdte_ipo_fail(comm, fn, GDTE_ERR_NO_MEMORY);
        return 1;
    }
    MPI_Request fin = MPI_REQUEST_NULL;
    node_send_t *s = NULL;
    int rc = node_send_post(mode, nc, buf, count, type, fake, nbytes, dest, tag, comm, pack, 0, &fin, &s, fn);
    if (rc != MPI_SUCCESS) {
        gdte_ipo_req_destroy(r);
        /* No completion word free (that many sends in flight): the MPI_PACKED path, which the
         * MPI orders with the markers on the same envelope. */
        if (rc == NODE_NO_SLOT) return 0;
        *rc_p = rc;
        return 1;
    }
    ce_count(ce_peer);
    send_record(r, fin, kind, comm, s, send_fini, 1);
    if (req) {
        *req = fin;
        gdte_ipo_req_insert(r);
        *rc_p = MPI_SUCCESS;
        return 1;
    }
    gdte_ipo_node_block(1, &fin, 0); /* finishing our own marker receives meanwhile */
    rc = PMPI_Wait(&fin, MPI_STATUS_IGNORE);
    gdte_ipo_req_destroy(r);
    *rc_p = rc;
    return 1;
}

/* ---- persistent device sends through the node path ----
 * The application's persistent request is a persistent receive of the send's FIN, of a tag the
 * send holds for its life (pers_tag_get). Each MPI_Start posts the message as an MPI_Isend
 * would (node_send_post with that FIN tag: read in place, or a packed copy to another GPU where
 * the layout is sparse), then the MPI starts the FIN receive; the start's completion (the
 * receiver's FIN, or this process's own after a detach) releases its record. The device plan is
 * made at init. */
typedef struct node_pers_ipc {
    node_comm_t *nc;
    gdte_ipo_mode_t mode;
    int dest, tag, pack, fin_tag, fake, ce_peer;
    int64_t nbytes;
    node_send_t *s; /* the current start's, until it completes */
} node_pers_ipc_t;

static int pers_start(gdte_ipo_req_t *r)
{
    node_pers_ipc_t *p = r->ctx;
    send_release(p->s); /* a start whose completion did not run its finish (never, defensively) */
    p->s = NULL;
    MPI_Request none = MPI_REQUEST_NULL;
    int64_t t0 = now_ns();
    for (;;) {
        int rc = node_send_post(p->mode, p->nc, r->user, r->count, r->type, p->fake, p->nbytes, p->dest, p->tag,
                                r->comm, p->pack, p->fin_tag, &none, &p->s, "MPI_Start");
        if (rc == MPI_SUCCESS) ce_count(p->ce_peer);
        if (rc != NODE_NO_SLOT) return rc;
        /* Every completion word in use: the request cannot take the MPI_PACKED path now (its
         * handle is the FIN receive), so it waits for sends to finish, finishing receives
         * meanwhile (a peer may be waiting for them), for at most a minute. */
        if (now_ns() - t0 > 60 * (int64_t)1000000000) {
            gdte_error("MPI_Start: every one of the node path's %d completion words stayed in use for a minute", SLOTS);
            return gdte_ipo_fail(r->comm, "MPI_Start", GDTE_ERR_NO_MEMORY);
        }
        gdte_ipo_node_progress();
        sched_yield();
    }
}

static int pers_finish(gdte_ipo_req_t *r, MPI_Status *st, int rc)
{
    (void)st;
    node_pers_ipc_t *p = r->ctx;
    send_release(p->s);
    p->s = NULL;
    return rc;
}

static void pers_fini(gdte_ipo_req_t *r)
{
    node_pers_ipc_t *p = r->ctx;
    r->ctx = NULL;
    if (!p) return;
    send_release(p->s);
    pers_tag_put(p->fin_tag);
    free(p);
}

int gdte_ipo_node_persistent_ipc_init(gdte_ipo_req_t *r, gdte_ipo_mode_t mode, const void *buf, int count,
                                      MPI_Datatype dt, gdte_ipo_kind_t kind, int dest, int tag, MPI_Comm comm,
                                      MPI_Request *req, int *rc_p)
{
    node_comm_t *nc = comm_info(comm);
    if (!nc || !is_peer(nc, dest) || (kind != GDTE_IPO_DEVICE && kind != GDTE_IPO_FAKE)) return 0;
    gdte_type_h type;
    int64_t nbytes;
    if (gdte_ipo_type(dt, count, &type, &nbytes) != GDTE_OK || nbytes <= GDTE_IPO_MARK_BYTES) return 0;
    if (peer_w[nc->world[dest]] == PEER_FRAG) return 0; /* another node: the MPI_PACKED path */
    const int fake = kind == GDTE_IPO_FAKE;
    int ce_peer;
    const int pack = node_pack_mode(mode, nc, dest, type, count, nbytes, fake, 1, &ce_peer);
    if (pack < 0) return 0;
    int ft = pers_tag_get();
    node_pers_ipc_t *p = ft ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        if (ft) pers_tag_put(ft);
        return 0;
    }
    int rc = PMPI_Recv_init(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, ft, fin_comm, req);
    if (rc != MPI_SUCCESS) {
        free(p);
        pers_tag_put(ft);
        *rc_p = rc;
        return 1;
    }
    p->nc = nc;
    p->mode = mode;
    p->dest = dest;
    p->tag = tag;
    p->pack = pack;
    p->fin_tag = ft;
    p->fake = fake;
    p->nbytes = nbytes;
    p->ce_peer = ce_peer;
    if (!fake) (void)gdte_type_prepare_device(type); /* the plan before the first start */
    gdte_type_retain(type);
    r->type = type;
    r->user = (void *)buf;
    r->count = count;
    r->kind = kind;
    r->comm = comm;
    r->dt = MPI_DATATYPE_NULL;
    r->nbytes = nbytes;
    r->handle = *req;
    r->persistent = 1;
    r->node_send = 1;
    r->ctx = p;
    r->start = pers_start;
    r->finish = pers_finish;
    r->fini = pers_fini;
    gdte_ipo_req_insert(r);
    *rc_p = MPI_SUCCESS;
    return 1;
}

/* ---- the receiver ---- */
/* The announcement of `cookie` from `src` (tag `tag`), waited for on the shadow (it was sent
 * before its marker). Unlinked and returned; the caller frees it. */
static ann_t *ann_free;
static int ann_nfree;

/* Announcements are recycled too (node_lock held for the list). */
static void ann_put_locked(ann_t *a)
{
    RECYCLE_PUT(ann_free, ann_nfree, a);
}

static void ann_put(ann_t *a)
{
    if (!a) return;
    pthread_mutex_lock(&node_lock);
    ann_put_locked(a);
    pthread_mutex_unlock(&node_lock);
}

/* Under node_lock. */
static ann_t *ann_fetch(node_comm_t *nc, int src, int tag)
{
    ann_t *a;
    RECYCLE_GET(ann_free, ann_nfree, a);
    if (!a) a = malloc(sizeof *a);
    unsigned char buf[ANN_MAX];
    MPI_Status st;
    if (!a || PMPI_Recv(buf, ANN_MAX, MPI_BYTE, src, tag, nc->shadow, &st) != MPI_SUCCESS) {
        if (a) ann_put_locked(a);
        return NULL;
    }
    ann_hdr_t h;
    memcpy(&h, buf, sizeof h);
    a->src = src;
    a->tag = tag;
    a->cookie = h.cookie;
    a->nbytes = h.nbytes;
    int got = 0;
    PMPI_Get_count(&st, MPI_BYTE, &got);
    a->ndata = got > (int)sizeof h ? got - (int)sizeof h : 0;
    if (a->ndata) memcpy(a->data, buf + sizeof h, (size_t)a->ndata);
    /* Appended: per (src, tag) the list keeps the sender's order. */
    DL_APPEND(nc->anns, a);
    return a;
}

/* The announcement of `cookie` from `src` (tag `tag`), waited for on the shadow (it was sent
 * before its marker). Unlinked and returned; the caller frees it. */
static ann_t *take_announcement(node_comm_t *nc, int src, int tag, uint64_t cookie)
{
    pthread_mutex_lock(&node_lock);
    ann_t *a = nc->anns;
    while (a && !(a->src == src && a->cookie == cookie)) a = a->next;
    while (!a) {
        a = ann_fetch(nc, src, tag);
        if (!a) break;
        if (a->cookie != cookie) a = NULL;
    }
    if (a) DL_DELETE(nc->anns, a);
    pthread_mutex_unlock(&node_lock);
    return a;
}

/* MPI_Finalize: the recycled records go (sends still in flight stay on `pending`: their
 * receivers may still read what they name). */
static void recycled_free(void)
{
    RECYCLE_DRAIN(send_free, send_nfree, node_send_t);
    RECYCLE_DRAIN(ann_free, ann_nfree, ann_t);
}

/* Mapped peer allocations, by (peer, the allocation's base address there). A handle that
 * differs from the cached one at that base is a new allocation (the peer freed the old one):
 * the stale mapping goes first, since the runtime maps an exporter's memory at most once. */
typedef struct map_key {
    int peer;
    uint64_t rbase;
} map_key_t;
typedef struct map_ent {
    map_key_t key;
    gdte_gpu_ipc_handle_t h;
    void *base;
    UT_hash_handle hh;
} map_ent_t;
static map_ent_t *maps;
static int nmaps;
static _Atomic uint64_t map_drops; /* mappings closed so far: a pointer taken before may be gone */
#define MAPS_MAX 512

static void map_drop(map_ent_t *e)
{
    /* Copies of a batch may still read through it: they finish first (rare: a stale or an
     * evicted mapping). */
    if (node_stream) (void)gdte_gpu_stream_synchronize(node_stream);
    atomic_fetch_add(&map_drops, 1);
    HASH_DEL(maps, e);
    gdte_gpu_ipc_close(e->base);
    free(e);
    nmaps--;
}

/* The cached mapping of (peer, rbase), or NULL; *k receives the key. Caller holds node_lock. */
static map_ent_t *map_find_locked(int peer, uint64_t rbase, map_key_t *k)
{
    memset(k, 0, sizeof *k);
    k->peer = peer;
    k->rbase = rbase;
    map_ent_t *e;
    HASH_FIND(hh, maps, k, sizeof *k, e);
    return e;
}

static gdte_status_t map_peer(int peer, uint64_t rbase, const gdte_gpu_ipc_handle_t *h, void **base_p)
{
    if (peer == world_rank) {
        /* A message to itself: the allocation is this process's own (a runtime refuses to open
         * its own handle). */
        *base_p = (void *)(uintptr_t)rbase;
        return GDTE_OK;
    }
    map_key_t k;
    pthread_mutex_lock(&node_lock);
    map_ent_t *e = map_find_locked(peer, rbase, &k);
    if (e && !memcmp(&e->h, h, sizeof *h)) {
        *base_p = e->base;
        pthread_mutex_unlock(&node_lock);
        return GDTE_OK;
    }
    if (e) map_drop(e);
    if (nmaps >= MAPS_MAX) map_drop(maps); /* the oldest mapping goes */
    void *base = NULL;
    gdte_status_t st = gdte_gpu_ipc_open(h, &base);
    if (st == GDTE_ERR_INVALID_ARG) {
        /* Already mapped under another base of ours: a stale mapping of this peer whose
         * memory the new allocation reuses. Drop the peer's mappings and map again. */
        map_ent_t *x, *tmp;
        HASH_ITER(hh, maps, x, tmp)
        if (x->key.peer == peer) map_drop(x);
        st = gdte_gpu_ipc_open(h, &base);
        if (st == GDTE_ERR_INVALID_ARG) {
            gdte_error("cannot map a peer's device memory: the GPU runtime reports it mapped already");
            st = GDTE_ERR_GPU;
        }
    }
    if (st == GDTE_OK && (e = calloc(1, sizeof *e)) != NULL) {
        e->key = k;
        e->h = *h;
        e->base = base;
        HASH_ADD(hh, maps, key, sizeof e->key, e);
        nmaps++;
    }
    pthread_mutex_unlock(&node_lock);
    *base_p = base;
    return st;
}

gdte_status_t gdte_ipo_node_export(const void *p, gdte_gpu_ipc_handle_t *h, int64_t *offset, uint64_t *rbase)
{
    return export_ptr(p, h, offset, rbase);
}

gdte_status_t gdte_ipo_node_map(int peer_world, uint64_t rbase, const gdte_gpu_ipc_handle_t *h, void **base_p)
{
    return map_peer(peer_world, rbase, h, base_p);
}

void gdte_ipo_node_unmap(int peer_world, uint64_t rbase)
{
    if (peer_world == world_rank) return;
    map_key_t k;
    pthread_mutex_lock(&node_lock);
    map_ent_t *e = map_find_locked(peer_world, rbase, &k);
    if (e) map_drop(e);
    pthread_mutex_unlock(&node_lock);
}

/* Fake device: the sender's bytes read with process_vm_readv into `dst` (n packed bytes). */
/* A sender's UNITS layout from its announcement, checked before any kernel walks the sender's
 * memory with it: sizes that multiply out to the message, ranks and counts in range. */
static int lay_usable(const node_lay_t *w, int64_t nbytes)
{
    if (w->ndims < 0 || w->ndims > GDTE_MAX_DIMS || w->nunits <= 0 || w->rep_bytes <= 0 || w->total != nbytes)
        return 0;
    int64_t reps = 1;
    for (int k = 0; k < w->ndims; k++) {
        if (w->count[k] <= 0 || reps > INT64_MAX / w->count[k]) return 0;
        reps *= w->count[k];
    }
    return reps <= INT64_MAX / w->rep_bytes && reps * w->rep_bytes == w->total;
}

/* The sender's layout, runnable here: byte 0 at the sender's first byte (the marker's address),
 * its units at `units` (the mapped plan, or a local copy). */
static void lay_layout(const node_lay_t *w, const gdte_unit_t *units, gdte_layout_t *L)
{
    memset(L, 0, sizeof *L);
    L->kind = GDTE_LAYOUT_KIND_UNITS;
    L->ndims = w->ndims;
    L->total = w->total;
    for (int k = 0; k < w->ndims; k++) {
        L->count[k] = w->count[k];
        L->stride[k] = w->stride[k];
    }
    L->units = units;
    L->nunits = w->nunits;
    L->rep_bytes = w->rep_bytes;
    L->max_unit_len = w->max_unit_len;
    L->align = w->align;
}

/* Our (type, count) moves the same units in the same shape as the sender's: one kernel from its
 * buffer to ours through our own plan. */
static int lay_same(const node_lay_t *w, const gdte_layout_t *L, gdte_type_h type)
{
    if (L->kind != GDTE_LAYOUT_KIND_UNITS || L->nunits != w->nunits || L->rep_bytes != w->rep_bytes ||
        L->ndims != w->ndims)
        return 0;
    for (int k = 0; k < L->ndims; k++)
        if (L->count[k] != w->count[k] || L->stride[k] != w->stride[k]) return 0;
    uint64_t h = 0;
    return gdte_devplan_units_hash(type, &h) == GDTE_OK && h == w->units_hash;
}

/* Fake device: bytes [0, n) of a UNITS sender's stream, read unit by unit from its memory (its
 * unit array first), in packed order. */
static gdte_status_t fake_read_units(pid_t pid, uint64_t addr, const node_lay_t *w, void *dst, int64_t n)
{
    size_t ub = (size_t)w->nunits * sizeof(gdte_unit_t);
    gdte_unit_t *u = malloc(ub);
    if (!u) return GDTE_ERR_NO_MEMORY;
    struct iovec l = {u, ub}, r = {(void *)(uintptr_t)w->units_addr, ub};
    gdte_status_t st = process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)ub ? GDTE_OK : GDTE_ERR_TRANSPORT;
    gdte_layout_t L;
    lay_layout(w, u, &L);
    enum { IOV = 256 };
    struct iovec li[IOV], ri[IOV];
    int k = 0;
    size_t want = 0;
    for (int64_t rep = 0; st == GDTE_OK && rep * w->rep_bytes < n; rep++) {
        int64_t base = gdte_layout_rep_offset(&L, rep);
        for (int64_t i = 0; st == GDTE_OK && i < w->nunits; i++) {
            int64_t at = rep * w->rep_bytes + u[i].packed;
            if (at >= n) break;
            int64_t len = u[i].len < n - at ? u[i].len : n - at;
            li[k] = (struct iovec){(char *)dst + at, (size_t)len};
            ri[k] = (struct iovec){(void *)(uintptr_t)(addr + (uint64_t)(base + u[i].src)), (size_t)len};
            want += (size_t)len;
            if (++k == IOV) {
                if (process_vm_readv(pid, li, k, ri, k, 0) != (ssize_t)want) st = GDTE_ERR_TRANSPORT;
                k = 0, want = 0;
            }
        }
    }
    if (st == GDTE_OK && k && process_vm_readv(pid, li, k, ri, k, 0) != (ssize_t)want) st = GDTE_ERR_TRANSPORT;
    free(u);
    return st;
}

/* Fake device: the sender's origin, from its allocation's base when it named one. */
static uint64_t fake_origin(const mark_t *mk)
{
    return mk->rbase ? mk->rbase + (uint64_t)mk->offset : mk->addr;
}

static gdte_status_t fake_read(const mark_t *mk, const node_lay_t *lay, void *dst, int64_t n)
{
    pid_t pid = (pid_t)mk->pid;
    const uint64_t addr = fake_origin(mk);
    if (mk->shape == SHAPE_UNITS) return fake_read_units(pid, addr, lay, dst, n);
    if (mk->shape == SHAPE_CONTIG) {
        struct iovec l = {dst, (size_t)n}, r = {(void *)(uintptr_t)addr, (size_t)n};
        return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)n ? GDTE_OK : GDTE_ERR_TRANSPORT;
    }
    int64_t done = 0;
    for (int64_t row = 0; done < n; row++) {
        size_t w = (size_t)(mk->width < n - done ? mk->width : n - done);
        struct iovec l = {(char *)dst + done, w}, r = {(void *)(uintptr_t)(addr + (uint64_t)(row * mk->pitch)), w};
        if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)w) return GDTE_ERR_TRANSPORT;
        done += (int64_t)w;
    }
    return GDTE_OK;
}

/* Receives finished in one pass of node progress: their copies are queued on node_stream and
 * synchronized once (gdte_ipo_node_batch_end), then their words marked DONE and their FINs
 * sent. A window of messages then costs one synchronization, not one per message. */
/* The fake device copies at once where a GPU queues the copy and runs it later; in a batch it
 * defers the copy to the batch's end as a GPU's runs then, so that CI sees the same order of
 * copies and completions as the device (a receive visible as complete before its copy ran is a
 * defect CI can catch: threads_test --big). */
typedef struct fake_copy {
    mark_t mk;
    node_lay_t lay;
    int has_lay;
    int64_t n;
    void *user;
    int count;
    gdte_type_h type; /* retained; NULL: no fake copy */
} fake_copy_t;
typedef struct queued_fin {
    slot_t *sl;
    uint64_t word;
    int peer, fin_tag, detached;
    gdte_type_h pinned; /* a plan pinned for the copy (retained), unpinned once it is done */
    fake_copy_t fc;     /* the fake device: the copy itself, done at the batch's end */
} queued_fin_t;
static _Thread_local fake_copy_t fake_pending; /* set by pull, taken by the batch record */
static _Thread_local int batch_depth;
static _Thread_local queued_fin_t *batch;
static _Thread_local int batch_n, batch_cap;
/* The batch's copies already come after the application's default-stream work: within one
 * call of the application's thread nothing more can be queued there. */
static _Thread_local int batch_app_ordered;
/* Copies of the batch not launched yet: at its end they go as ONE batched kernel
 * (gdte_gpu_exec_batch), where a launch each would cost a runtime call per message (about as much
 * as the raw copy of 4 MiB on one GPU). Each is the whole message, from the peer's buffer into the
 * receive buffer: a dense sender's bytes unpacked into any layout, or (`mirror`) a buffer of the
 * receiver's own layout, rows or the same plan, copied buffer to buffer. */
static _Thread_local gdte_batch_piece_t *dfr;
/* Messages of this size and more are copied on their own: their copy outlasts a launch, and the
 * copy engines (dense) or the per-layout kernels move them faster than the batched kernel (one
 * H200, window of 64: 16 MiB dense 10.3 us a message alone, 11.9 batched; 4 MiB 10.2 alone,
 * 8.2 batched: b6281ab). Strided and irregular layouts gain less from the batch: at 4 MiB their
 * tuned kernels, one launch each, matched or beat it (vector 7.56 us alone, 7.87 batched;
 * indexed 7.79 against 9.07), at 1 MiB the batch won (vector 6.61 against 7.63, indexed 7.01
 * against 8.08: b7436c4). */
#define BATCH_MAX (8 << 20)
static _Thread_local int dfr_n, dfr_cap;
static gdte_status_t deferred_launch(gdte_stage_t **scratch_p);

/* The two per-thread arrays grow (doubling from 64), never shrink; a thread that exits frees
 * them through a key's destructor, as interpose_req.c's scratch (the thread-local pointers are
 * still valid then). */
static pthread_key_t batch_key;
static pthread_once_t batch_once = PTHREAD_ONCE_INIT;
static void batch_release(void *unused)
{
    (void)unused;
    free(batch);
    free(dfr);
    batch = NULL;
    dfr = NULL;
    batch_cap = dfr_cap = 0;
}
static void batch_key_init(void) { pthread_key_create(&batch_key, batch_release); }
/* *arr grown to the next capacity (*cap updated); 0 when there is no memory (unchanged). */
static int batch_grow(void **arr, int *cap, size_t elem)
{
    if (!batch_cap && !dfr_cap) {
        pthread_once(&batch_once, batch_key_init);
        pthread_setspecific(batch_key, &batch_once); /* any non-NULL value arms the destructor */
    }
    int c = *cap ? 2 * *cap : 64;
    void *p = realloc(*arr, elem * (size_t)c);
    if (!p) return 0;
    *arr = p;
    *cap = c;
    return 1;
}

static void finish_word(slot_t *sl, uint64_t word, int peer, int fin_tag, int detached)
{
    atomic_store_explicit(&sl->word, W_GEN(word) | W_DONE, memory_order_release);
    if (!detached) (void)send_fin(peer, fin_tag);
}

static void unpin_plan(gdte_type_h t)
{
    if (!t) return;
    gdte_devplan_unpin(t, gdte_gpu_current_device());
    gdte_type_release(t);
}

/* The pass's copies queued: its deferred ones launched (*scratch_p: their work list), and on the
 * fake device all of them made now, as a GPU's would run at this point. */
static gdte_status_t batch_launch(gdte_stage_t **scratch_p)
{
    gdte_status_t st = dfr_n ? deferred_launch(scratch_p) : GDTE_OK;
    if (!fake_mode) return st;
    for (int i = 0; i < batch_n; i++) {
        fake_copy_t *fc = &batch[i].fc;
        if (!fc->type) continue;
        void *tmp = malloc((size_t)fc->n);
        gdte_status_t s1 = tmp ? fake_read(&fc->mk, fc->has_lay ? &fc->lay : NULL, tmp, fc->n) : GDTE_ERR_NO_MEMORY;
        if (s1 == GDTE_OK) s1 = gdte_xfer_unpack_from_host(tmp, 0, fc->n, fc->user, fc->count, fc->type, 1);
        if (st == GDTE_OK) st = s1;
        free(tmp);
        gdte_type_release(fc->type);
        fc->type = NULL;
    }
    return st;
}

/* The senders of `n` finished receives answered, their plans unpinned. */
static void answer_senders(const queued_fin_t *f, int n)
{
    for (int i = 0; i < n; i++) {
        finish_word(f[i].sl, f[i].word, f[i].peer, f[i].fin_tag, f[i].detached);
        unpin_plan(f[i].pinned);
    }
}

/* ---- pipelined batches (the default; GDTETEST_NODE_PIPELINE=0: not) ----
 * A progress pass of a polling loop (gdte_ipo_node_block: MPI_Wait and the other blocking
 * completions, blocking sends and receives) queues its batch's copies and returns without
 * waiting for them: an event
 * recorded after the copies marks the batch, and its receives stay pending (r->node_frag holds
 * the batch, kind PEND_COPY, as a fragmented message's record is held) until a later pass, or
 * the receive's completion call, finds the event complete. Then the senders' words are marked
 * DONE and their FINs sent, once per batch, batches in the order they were queued (one stream:
 * a later batch's event cannot complete first). The next pass's host work (matching, launches)
 * then runs while this batch's copies do, where a pass used to wait for them: on one H200 a
 * window of 4 MiB vector messages spent ~3 us of host work and ~3.5 us of copy a message, one
 * after the other. On the fake device the copies are made at the batch's end as before, and
 * the batch completes at the second poll after it, so that CI goes through the pending states. */
enum { PEND_FRAG = 1, PEND_COPY = 2 };
/* Receives pending on fragments or on a batch (gdte_ipo_node_frag_live), and where the progress
 * pass wants a receive's pending record (gdte_ipo_node_frag_defer). */
static _Atomic int frag_live;
static _Thread_local void **frag_defer_slot;
typedef struct inflight {
    int pend_kind;       /* PEND_COPY (first, as frag_recv_t's) */
    gdte_gpu_event_t ev; /* NULL: no GPU copy (the fake device) */
    queued_fin_t *fins;    /* the senders to answer (kept, with its capacity, when recycled) */
    int nfins, fins_cap;
    gdte_stage_t *scratch; /* the batched kernel's work list, until the copies are done */
    int refs;              /* receives pending on it, plus one while it is in the queue */
    int done, fake_polls;
    struct inflight *next; /* the queue, or the recycled records */
} inflight_t;
static pthread_mutex_t inflight_lock = PTHREAD_MUTEX_INITIALIZER;
static inflight_t *inflight_head, *inflight_tail; /* queued batches, oldest first */
static inflight_t *inflight_free;                 /* recycled records (no allocation per pass) */
static gdte_gpu_event_t ev_pool[64];
static int ev_pool_n;
static _Thread_local inflight_t *cur_inflight; /* the batch being built by this thread's pass */
static _Thread_local int pipeline_depth;        /* gdte_ipo_node_pipeline_begin/end */
static _Thread_local int batch_unattached;      /* its queued receives no record waits on */

static void inflight_unref_locked(inflight_t *b)
{
    if (--b->refs > 0) return;
    b->next = inflight_free;
    inflight_free = b;
}

/* A cleared record for a new batch, recycled when one is free (NULL: no memory). */
static inflight_t *inflight_get(void)
{
    pthread_mutex_lock(&inflight_lock);
    inflight_t *b = inflight_free;
    if (b) inflight_free = b->next;
    pthread_mutex_unlock(&inflight_lock);
    if (!b && !(b = calloc(1, sizeof *b))) return NULL;
    queued_fin_t *fins = b->fins;
    int cap = b->fins_cap;
    memset(b, 0, sizeof *b);
    b->fins = fins;
    b->fins_cap = cap;
    b->pend_kind = PEND_COPY;
    return b;
}

/* Under inflight_lock: the batch's copies are done (or failed: said once, as a synchronous
 * batch's are), its senders answered, its resources back. */
static void inflight_complete_locked(inflight_t *b, gdte_status_t st)
{
    if (st != GDTE_OK) gdte_error("node path: copies from peers failed: %s", gdte_status_string(st));
    answer_senders(b->fins, b->nfins);
    b->nfins = 0;
    if (b->scratch) gdte_stage_release(b->scratch);
    b->scratch = NULL;
    if (b->ev) {
        if (ev_pool_n < (int)(sizeof ev_pool / sizeof ev_pool[0])) ev_pool[ev_pool_n++] = b->ev;
        else gdte_gpu_event_destroy(b->ev);
        b->ev = NULL;
    }
    b->done = 1;
}

/* Complete queued batches, oldest first, whose copies are done; with `block`, wait for them
 * until `upto` is done (NULL: all queued). */
static void inflight_poll(inflight_t *upto, int block)
{
    pthread_mutex_lock(&inflight_lock);
    while (inflight_head && !(upto && upto->done)) {
        inflight_t *b = inflight_head;
        gdte_status_t q = GDTE_OK;
        if (b->ev) {
            q = block ? gdte_gpu_event_synchronize(b->ev) : gdte_gpu_event_query(b->ev);
        } else if (b->fake_polls > 0 && !block) {
            b->fake_polls--;
            q = GDTE_INPROGRESS;
        }
        if (q == GDTE_INPROGRESS) break;
        inflight_complete_locked(b, q);
        inflight_head = b->next;
        if (!inflight_head) inflight_tail = NULL;
        inflight_unref_locked(b); /* the queue's reference */
    }
    pthread_mutex_unlock(&inflight_lock);
}

static void inflight_drain(void)
{
    inflight_poll(NULL, 1);
    pthread_mutex_lock(&inflight_lock);
    while (ev_pool_n) gdte_gpu_event_destroy(ev_pool[--ev_pool_n]);
    while (inflight_free) {
        inflight_t *b = inflight_free;
        inflight_free = b->next;
        free(b->fins);
        free(b);
    }
    pthread_mutex_unlock(&inflight_lock);
}

/* A receive pending on a batch: delivered (1) once the batch is done. */
static int copy_progress(gdte_ipo_req_t *r, int block)
{
    inflight_t *b = r->node_frag;
    inflight_poll(b, block);
    pthread_mutex_lock(&inflight_lock);
    int done = b->done;
    if (done) inflight_unref_locked(b);
    pthread_mutex_unlock(&inflight_lock);
    if (!done) return 0;
    r->node_frag = NULL;
    r->unpacked = 1;
    atomic_fetch_sub_explicit(&frag_live, 1, memory_order_relaxed);
    return 1;
}

void gdte_ipo_node_pipeline_begin(void) { pipeline_depth++; }

void gdte_ipo_node_pipeline_end(void)
{
    if (--pipeline_depth > 0) return;
    int any;
    pthread_mutex_lock(&inflight_lock);
    any = inflight_head != NULL;
    pthread_mutex_unlock(&inflight_lock);
    if (any) inflight_poll(NULL, 1);
}

/* In a pipelined pass, a receive whose copy was just queued: its record waits on the batch. */
static void attach_to_batch(void)
{
    if (!pipeline_depth) return; /* not in a polling loop: the pass waits for its batch */
    if (!frag_defer_slot) {
        batch_unattached++;
        return;
    }
    if (!cur_inflight && !(cur_inflight = inflight_get())) {
        batch_unattached++;
        return;
    }
    cur_inflight->refs++;
    *frag_defer_slot = cur_inflight;
    atomic_fetch_add_explicit(&frag_live, 1, memory_order_relaxed);
}

/* The end of a pipelined pass (batch_n > 0, cur_inflight set): its copies launched, its event
 * recorded and the batch queued; 0 when it must be finished synchronously instead (a receive
 * nothing waits on, no memory, a failed launch or record: the caller then finishes it as an
 * unpipelined batch, and its waiting receives find it done). */
static int batch_end_pipelined(void)
{
    inflight_t *b = cur_inflight;
    if (batch_unattached) return 0;
    if (b->fins_cap < batch_n) {
        int cap = b->fins_cap ? b->fins_cap : 64;
        while (cap < batch_n) cap *= 2;
        queued_fin_t *f = realloc(b->fins, sizeof *f * (size_t)cap);
        if (!f) return 0;
        b->fins = f;
        b->fins_cap = cap;
    }
    gdte_stage_t *scratch = NULL;
    gdte_status_t st = batch_launch(&scratch);
    gdte_gpu_event_t ev = NULL;
    if (st == GDTE_OK && (!fake_mode || atomic_load_explicit(&node_stream, memory_order_acquire))) {
        pthread_mutex_lock(&inflight_lock);
        if (ev_pool_n) ev = ev_pool[--ev_pool_n];
        pthread_mutex_unlock(&inflight_lock);
        if (!ev && gdte_gpu_event_create(&ev, 0) != GDTE_OK) ev = NULL;
        if (!ev || gdte_gpu_event_record(ev, node_stream) != GDTE_OK) st = GDTE_ERR_GPU;
    }
    if (st != GDTE_OK) {
        /* Finished synchronously by the caller, which synchronizes the stream and answers the
         * senders; the work list only after the copies that read it. */
        gdte_error("node path: copies from peers failed: %s", gdte_status_string(st));
        if (ev) gdte_gpu_event_destroy(ev);
        if (scratch) {
            (void)gdte_gpu_stream_synchronize(node_stream);
            gdte_stage_release(scratch);
        }
        return 0;
    }
    memcpy(b->fins, batch, sizeof *b->fins * (size_t)batch_n);
    pthread_mutex_lock(&inflight_lock);
    b->ev = ev;
    b->nfins = batch_n;
    b->scratch = scratch;
    b->fake_polls = ev ? 0 : 1;
    b->refs++;
    if (inflight_tail) inflight_tail->next = b;
    else inflight_head = b;
    inflight_tail = b;
    pthread_mutex_unlock(&inflight_lock);
    cur_inflight = NULL;
    batch_n = 0;
    gdte_ipo_cnt_g.node_pipelined++;
    return 1;
}

void gdte_ipo_node_batch_begin(void) { batch_depth++; }

void gdte_ipo_node_batch_end(void)
{
    if (--batch_depth > 0) return;
    batch_app_ordered = 0;
    if (batch_n == 0) return;
    int64_t t = prof_t0();
    if (cur_inflight && batch_end_pipelined()) {
        batch_unattached = 0;
        prof_add(P_BATCH_SYNC, t);
        return;
    }
    gdte_stage_t *scratch = NULL;
    gdte_status_t st = batch_launch(&scratch);
    /* GPU copies of the batch (a process may hold real device buffers beside fake ones). */
    if (!fake_mode || atomic_load_explicit(&node_stream, memory_order_acquire)) {
        gdte_status_t s2 = gdte_gpu_stream_synchronize(node_stream);
        if (st == GDTE_OK) st = s2;
    }
    if (st != GDTE_OK) gdte_error("node path: copies from peers failed: %s", gdte_status_string(st));
    if (scratch) gdte_stage_release(scratch);
    prof_add(P_BATCH_SYNC, t);
    t = prof_t0();
    answer_senders(batch, batch_n);
    prof_add(P_BATCH_FIN, t);
    batch_n = 0;
    batch_unattached = 0;
    if (cur_inflight) {
        /* A pipelined pass finished here after all: the receives waiting on it find it done. */
        pthread_mutex_lock(&inflight_lock);
        cur_inflight->done = 1;
        cur_inflight->refs++;
        inflight_unref_locked(cur_inflight); /* recycled here when no receive waits on it */
        pthread_mutex_unlock(&inflight_lock);
        cur_inflight = NULL;
    }
}

static gdte_status_t ensure_stream(void)
{
    if (atomic_load_explicit(&node_stream, memory_order_acquire)) return GDTE_OK;
    pthread_mutex_lock(&node_lock);
    gdte_status_t st = GDTE_OK;
    if (!node_stream) {
        gdte_stream_t s = NULL;
        if (!node_ev_app) st = gdte_gpu_event_create(&node_ev_app, 0);
        if (st == GDTE_OK && !node_ev_send) st = gdte_gpu_event_create(&node_ev_send, 0);
        if (st == GDTE_OK) st = gdte_gpu_stream_create(&s);
        if (st == GDTE_OK) atomic_store_explicit(&node_stream, s, memory_order_release);
    }
    pthread_mutex_unlock(&node_lock);
    return st;
}

/* node_stream's next work after the application's default-stream work queued so far. Two
 * threads may record the event in turn: a wait on the later record is a wait on both. */
static gdte_status_t stream_after_app(void)
{
    if (batch_depth && batch_app_ordered) return GDTE_OK;
    int64_t t = prof_t0();
    /* An event, not a host-side query of the default streams: on an H200 the query of the two
     * default streams took 4.3 us, the record and the wait 1.3 us (GDTETEST_NODE_PROF, b6281ab). */
    gdte_status_t st = gdte_gpu_event_record(node_ev_app, NULL);
    if (st == GDTE_OK) st = gdte_gpu_stream_wait_event(node_stream, node_ev_app);
    if (st == GDTE_OK && batch_depth) batch_app_ordered = 1;
    prof_add(P_RECV_APP, t);
    return st;
}

/* The application's default-stream work queued so far has finished: the bytes a peer is about
 * to read from this process's buffer are there. */
static gdte_status_t host_after_app(void)
{
    gdte_status_t st = ensure_stream();
    if (st != GDTE_OK) return st;
    /* Record and wait (2.4 us a send on an H200) rather than query the default streams on the
     * host (3.7 us there: GDTETEST_NODE_PROF, b6281ab). */
    st = gdte_gpu_event_record(node_ev_send, NULL);
    return st == GDTE_OK ? gdte_gpu_event_synchronize(node_ev_send) : st;
}

/* Work queued on node_stream: left for the batch's one synchronization, or waited for now. */
static gdte_status_t queued_or_wait(gdte_status_t st, int *queued)
{
    if (st == GDTE_OK && batch_depth) {
        *queued = 1; /* synchronized once for the batch (gdte_ipo_node_batch_end) */
        return GDTE_OK;
    }
    gdte_status_t s2 = gdte_gpu_stream_synchronize(node_stream);
    return st != GDTE_OK ? st : s2;
}

/* The batch's deferred copies, on node_stream: one alone as its own copy (one runtime call),
 * several in one batched kernel (the work list's upload and the launch); `*scratch_p` holds the
 * work list until the stream is synchronized. A batch that cannot be launched is copied piece by
 * piece. */
static gdte_status_t deferred_one(const gdte_batch_piece_t *p)
{
    const gdte_layout_t *L = &p->L;
    const char *src = (const char *)(uintptr_t)p->packed;
    if (!p->mirror && L->kind == GDTE_LAYOUT_KIND_CONTIG)
        return gdte_gpu_memcpy_async(p->user + L->disp, src, (size_t)L->total, node_stream);
    if (!p->mirror) return gdte_gpu_exec(L, GDTE_DIR_UNPACK, p->user, (void *)src, 0, L->total, node_stream, 0);
    if (L->kind == GDTE_LAYOUT_KIND_UNITS) return gdte_gpu_exec_copy_units(L, src, p->user, 0, L->total, node_stream, 0);
    return gdte_gpu_exec_copy(L, src, L, p->user, 0, L->total, node_stream, 0);
}

static gdte_status_t deferred_launch(gdte_stage_t **scratch_p)
{
    int n = dfr_n;
    dfr_n = 0;
    gdte_status_t st = GDTE_ERR_NO_MEMORY;
    if (n > 1 && gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, gdte_gpu_exec_batch_scratch(n), scratch_p) == GDTE_OK) {
        st = gdte_gpu_exec_batch(dfr, n, GDTE_DIR_UNPACK, NULL, (*scratch_p)->ptr, node_stream);
        if (st == GDTE_OK) {
            gdte_ipo_cnt_g.node_batches++;
            gdte_ipo_cnt_g.node_batched += n;
            return GDTE_OK;
        }
    }
    st = GDTE_OK;
    for (int i = 0; i < n; i++) {
        gdte_status_t s = deferred_one(&dfr[i]);
        if (st == GDTE_OK) st = s;
    }
    return st;
}

/* A receive of the whole message that the batch's kernel can copy: left for the batch's end
 * (GDTE_OK, *queued set; `*pinned` the receiver's plan, pinned until the copy is done), or
 * GDTE_INPROGRESS where it cannot (the caller copies it now). */
static gdte_status_t defer_pull(const mark_t *mk, const node_lay_t *w, int src_world, int64_t n, void *user,
                                const gdte_layout_t *Ld, gdte_type_h type, int *queued, gdte_type_h *pinned)
{
    gdte_layout_t L = *Ld;
    if (!node_batch || n != mk->nbytes || n >= BATCH_MAX || L.total != n) return GDTE_INPROGRESS;
    if (n >= batch_max_sparse && (L.kind != GDTE_LAYOUT_KIND_CONTIG || mk->shape != SHAPE_CONTIG)) return GDTE_INPROGRESS;
    int mirror;
    if (mk->shape == SHAPE_CONTIG) {
        mirror = 0;
    } else if (mk->shape == SHAPE_ROWS) {
        /* Rows on both sides, the same rows. */
        if (L.kind != GDTE_LAYOUT_KIND_STRIDED || L.ndims != 1 || L.count[0] != mk->rows || L.stride[0] != mk->pitch ||
            L.blocklen != mk->width)
            return GDTE_INPROGRESS;
        mirror = 1;
    } else if (mk->shape == SHAPE_UNITS && w && L.kind == GDTE_LAYOUT_KIND_UNITS && lay_same(w, &L, type)) {
        mirror = 1;
    } else {
        return GDTE_INPROGRESS;
    }
    if (dfr_n == dfr_cap && !batch_grow((void **)&dfr, &dfr_cap, sizeof *dfr)) return GDTE_INPROGRESS;
    void *base = NULL;
    gdte_status_t st = map_peer(src_world, mk->rbase, &mk->handle, &base);
    if (st != GDTE_OK) return st;
    const char *remote = (const char *)((uintptr_t)base + (uintptr_t)mk->offset);
    if (L.kind == GDTE_LAYOUT_KIND_UNITS) {
        const gdte_unit_t *du = NULL;
        if ((st = gdte_devplan_pin(type, &du)) != GDTE_OK) return st;
        gdte_type_retain(type);
        *pinned = type;
        L.units = du;
        if (mirror) gdte_ipo_cnt_g.node_units_same++;
    }
    /* A mirror's second buffer is the peer's, placed as ours: its first byte at our L.disp. */
    gdte_batch_piece_t *p = &dfr[dfr_n++];
    memset(p, 0, sizeof *p);
    p->L = L;
    p->user = user;
    p->packed = (int64_t)(uintptr_t)(mirror ? remote - L.disp : remote);
    p->mirror = mirror;
    *queued = 1;
    return GDTE_OK;
}

/* Bytes [0, n) of a UNITS sender's message (GPU): one kernel from its buffer to ours when our
 * plan is the same (`*pinned`: our plan, pinned until the kernel is done), else a pack through
 * the sender's mapped units, straight into a contiguous receive or into staging, then our
 * unpack. Everything on node_stream, in this process: the sender runs nothing. */
static gdte_status_t pull_units(const mark_t *mk, const node_lay_t *w, int src_world, int64_t n, void *user, int count,
                                gdte_type_h type, gdte_ipo_kind_t kind, const gdte_layout_t *Ld, int *queued,
                                gdte_type_h *pinned)
{
    gdte_layout_t Lr;
    if (Ld) Lr = *Ld;
    else memset(&Lr, 0, sizeof Lr);
    gdte_status_t st = GDTE_OK;
    void *base = NULL, *ub = NULL;
    int same = kind == GDTE_IPO_DEVICE && lay_same(w, &Lr, type);
    /* Two mappings of the peer: opening one may close the other (a stale mapping of the peer
     * found in the way drops them all), so both are taken again until neither open closed one. */
    for (int tries = 0;; tries++) {
        if (!same && (st = map_peer(src_world, w->units_rbase, &w->units_handle, &ub)) != GDTE_OK) return st;
        uint64_t after_units = atomic_load(&map_drops);
        if ((st = map_peer(src_world, mk->rbase, &mk->handle, &base)) != GDTE_OK) return st;
        if (same || atomic_load(&map_drops) == after_units) break;
        if (tries == 3) return GDTE_ERR_GPU;
    }
    const char *remote = (const char *)((uintptr_t)base + (uintptr_t)mk->offset);
    if (same) {
        const gdte_unit_t *du = NULL;
        if ((st = gdte_devplan_pin(type, &du)) != GDTE_OK) return st;
        gdte_type_retain(type);
        *pinned = type;
        Lr.units = du;
        gdte_ipo_cnt_g.node_units_same++;
        /* Both buffers through our plan: src + Lr.disp is the sender's first byte. */
        return queued_or_wait(gdte_gpu_exec_copy_units(&Lr, remote - Lr.disp, user, 0, n, node_stream, 0), queued);
    }
    gdte_layout_t Ls;
    lay_layout(w, (const gdte_unit_t *)((const char *)ub + w->units_offset), &Ls);
    if (kind == GDTE_IPO_DEVICE && Lr.kind == GDTE_LAYOUT_KIND_CONTIG)
        return queued_or_wait(gdte_gpu_exec(&Ls, GDTE_DIR_PACK, (void *)remote, (char *)user + Lr.disp, 0, n, node_stream, 0),
                              queued);
    gdte_stage_t *tmp = NULL, *h = NULL;
    st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, (size_t)n, &tmp);
    if (st == GDTE_OK) st = gdte_gpu_exec(&Ls, GDTE_DIR_PACK, (void *)remote, tmp->ptr, 0, n, node_stream, 0);
    if (st == GDTE_OK && kind == GDTE_IPO_DEVICE) {
        gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_STREAM, .stream = node_stream, .flags = GDTE_PACK_FLAG_ASYNC};
        st = gdte_unpack(tmp->ptr, n, user, count, type, &p, NULL);
    } else if (st == GDTE_OK) {
        /* A host receive: the packed bytes through pinned staging. */
        st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)n, &h);
        if (st == GDTE_OK) st = gdte_gpu_memcpy_async(h->ptr, tmp->ptr, (size_t)n, node_stream);
    }
    gdte_status_t s2 = gdte_gpu_stream_synchronize(node_stream);
    if (st == GDTE_OK) st = s2;
    if (st == GDTE_OK && h) {
        gdte_pack_params_t p = {.field_mask = 0, .flags = GDTE_PACK_FLAG_HOST};
        st = gdte_unpack(h->ptr, n, user, count, type, &p, NULL);
    }
    if (h) gdte_stage_release(h);
    if (tmp) gdte_stage_release(tmp);
    return st;
}

/* Bytes [0, n) of the sender's message into (user, count, type): one kernel (or copy) from the
 * peer's memory where the shapes allow, else the packed bytes through a local buffer. */
static gdte_status_t pull(const mark_t *mk, const node_lay_t *lay, int src_world, int64_t n, void *user, int count,
                          gdte_type_h type, gdte_ipo_kind_t kind, int *queued, gdte_type_h *pinned)
{
    *queued = 0;
    *pinned = NULL;
    if (n == 0) return GDTE_OK;
    gdte_status_t st;
    if (mk->shape == SHAPE_UNITS && (!lay || !lay_usable(lay, mk->nbytes))) return GDTE_ERR_INTERNAL;
    if (fake_mode && kind != GDTE_IPO_DEVICE) {
        if (kind == GDTE_IPO_FAKE && batch_depth) {
            /* Copied at the batch's end (an error then is logged, as a GPU batch's is). */
            fake_copy_t *fc = &fake_pending;
            fc->mk = *mk;
            fc->has_lay = lay != NULL;
            if (lay) fc->lay = *lay;
            fc->n = n;
            fc->user = user;
            fc->count = count;
            gdte_type_retain(type);
            fc->type = type;
            *queued = 1;
            return GDTE_OK;
        }
        /* Host memory on both sides (the fake device, or a host receive): read, then unpack. */
        void *tmp = malloc((size_t)n);
        if (!tmp) return GDTE_ERR_NO_MEMORY;
        st = fake_read(mk, lay, tmp, n);
        if (st == GDTE_OK) {
            gdte_pack_params_t p = {.field_mask = 0, .flags = GDTE_PACK_FLAG_HOST};
            st = kind == GDTE_IPO_FAKE ? gdte_xfer_unpack_from_host(tmp, 0, n, user, count, type, 1)
                                       : gdte_unpack(tmp, n, user, count, type, &p, NULL);
        }
        free(tmp);
        return st;
    }
    if ((st = ensure_stream()) != GDTE_OK) return st;
    gdte_layout_t Ld; /* a device receive's layout */
    if (kind == GDTE_IPO_DEVICE) {
        /* The application's last writes to its receive buffer land before the peer's bytes. */
        if ((st = stream_after_app()) != GDTE_OK || (st = gdte_engine_layout(type, count, &Ld)) != GDTE_OK) return st;
        if (batch_depth && (st = defer_pull(mk, lay, src_world, n, user, &Ld, type, queued, pinned)) != GDTE_INPROGRESS)
            return st;
    }
    if (mk->shape == SHAPE_UNITS)
        return pull_units(mk, lay, src_world, n, user, count, type, kind, kind == GDTE_IPO_DEVICE ? &Ld : NULL, queued,
                          pinned);
    void *base = NULL;
    if ((st = map_peer(src_world, mk->rbase, &mk->handle, &base)) != GDTE_OK) return st;
    const char *remote = (const char *)((uintptr_t)base + (uintptr_t)mk->offset);
    gdte_layout_t Ls;
    memset(&Ls, 0, sizeof Ls);
    Ls.total = mk->nbytes;
    if (mk->shape == SHAPE_CONTIG) {
        Ls.kind = GDTE_LAYOUT_KIND_CONTIG;
        Ls.ndims = 0;
        Ls.blocklen = mk->nbytes;
    } else {
        Ls.kind = GDTE_LAYOUT_KIND_STRIDED;
        Ls.ndims = 1;
        Ls.count[0] = mk->rows;
        Ls.stride[0] = mk->pitch;
        Ls.blocklen = mk->width;
    }
    int a = 16;
    while (a > 1 && (((uintptr_t)remote | (uintptr_t)Ls.blocklen | (uintptr_t)(Ls.ndims ? Ls.stride[0] : 0)) % a)) a >>= 1;
    Ls.align = a;
    if (kind == GDTE_IPO_DEVICE) {
        if (Ld.kind == GDTE_LAYOUT_KIND_CONTIG && Ls.kind == GDTE_LAYOUT_KIND_CONTIG) {
            /* Dense to dense: the copy engines, as the MPI's own IPC copy (no SMs held). */
            st = gdte_gpu_memcpy_async((char *)user + Ld.disp, remote, (size_t)n, node_stream);
        } else if (Ld.kind == GDTE_LAYOUT_KIND_CONTIG || Ld.kind == GDTE_LAYOUT_KIND_STRIDED) {
            st = gdte_gpu_exec_copy(&Ls, remote, &Ld, user, 0, n, node_stream, 0);
        } else if (mk->shape == SHAPE_CONTIG) {
            gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_STREAM, .stream = node_stream,
                                    .flags = GDTE_PACK_FLAG_ASYNC};
            st = gdte_unpack(remote, n, user, count, type, &p, NULL);
        } else {
            gdte_stage_t *tmp = NULL;
            st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, (size_t)n, &tmp);
            if (st == GDTE_OK) st = gdte_gpu_exec(&Ls, GDTE_DIR_PACK, (void *)remote, tmp->ptr, 0, n, node_stream, 0);
            if (st == GDTE_OK) {
                gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_STREAM, .stream = node_stream,
                                        .flags = GDTE_PACK_FLAG_ASYNC};
                st = gdte_unpack(tmp->ptr, n, user, count, type, &p, NULL);
            }
            gdte_status_t s2 = gdte_gpu_stream_synchronize(node_stream);
            if (st == GDTE_OK) st = s2;
            if (tmp) gdte_stage_release(tmp);
            return st;
        }
        return queued_or_wait(st, queued);
    }
    /* A host receive of a device message: the packed bytes through pinned staging. */
    gdte_stage_t *h = NULL;
    if ((st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)n, &h)) != GDTE_OK) return st;
    st = copy_shape(h->ptr, remote, mk, n, 0, node_stream);
    gdte_status_t s2 = gdte_gpu_stream_synchronize(node_stream);
    if (st == GDTE_OK) st = s2;
    if (st == GDTE_OK) {
        gdte_pack_params_t p = {.field_mask = 0, .flags = GDTE_PACK_FLAG_HOST};
        st = gdte_unpack(h->ptr, n, user, count, type, &p, NULL);
    }
    gdte_stage_release(h);
    return st;
}

/* Read the marker a receive got: from `landing` (scratch or staging: contiguous), or from the
 * user's host buffer (the first GDTE_IPO_MARK_BYTES of its packed stream). */
static gdte_status_t read_marker(const void *landing, const void *user, int count, MPI_Datatype dt, mark_t *mk)
{
    if (landing) {
        memcpy(mk, landing, sizeof *mk);
        return GDTE_OK;
    }
    gdte_type_h t;
    int64_t n;
    gdte_status_t st = gdte_ipo_type(dt, count, &t, &n);
    if (st != GDTE_OK) return st;
    gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_MAX_BYTES, .max_bytes = GDTE_IPO_MARK_BYTES,
                            .flags = GDTE_PACK_FLAG_HOST};
    return gdte_pack(user, count, t, mk, GDTE_IPO_MARK_BYTES, &p, NULL);
}

int gdte_ipo_node_marker_cookie(const void *landing, const void *user, int count, MPI_Datatype dt, uint64_t *cookie)
{
    mark_t mk;
    if (read_marker(landing, user, count, dt, &mk) != GDTE_OK || mk.magic != MARK_MAGIC) return 0;
    *cookie = mk.cookie;
    return 1;
}

/* ---- fragmented messages from other nodes (HOW_FRAGS) ----
 * The receiver posts one receive per fragment into pinned host staging once it has matched the
 * marker, and unpacks each fragment as it arrives (a device receive: copied to device staging
 * and unpacked there on node_stream, asynchronously, so the next fragments keep arriving). Only
 * the first min(size, posted) bytes are unpacked; every fragment is received, so the sender's
 * sends complete whatever the receive's size. */
typedef struct frag_recv {
    int pend_kind;            /* PEND_FRAG (first, as inflight_t's: r->node_frag holds either) */
    gdte_stage_t *host, *dev; /* staging of its own (NULL: none) */
    char *land;               /* where the fragments land: host's memory, or the receive's staging */
    char *dense;              /* a dense device receive: its first byte (fragments copied there) */
    int n, done;
    uint64_t cookie;  /* the marker's (probes skip it: the landing holds data now) */
    int64_t frag, nbytes, deliver, posted;
    MPI_Request *reqs;
    int *idx;
    int cap;          /* reqs' and idx's length (kept when the record is recycled) */
    void *user;
    int count;
    gdte_type_h type; /* retained */
    gdte_ipo_kind_t kind;
    MPI_Comm comm;
    MPI_Datatype dt;
    MPI_Status st;    /* the marker's: source, tag */
    gdte_status_t err;
    struct frag_recv *next; /* the recycled records' list */
} frag_recv_t;
static frag_recv_t *frag_recv_pool; /* under node_lock */
static int frag_recv_npool;

void gdte_ipo_node_frag_defer(void **slot) { frag_defer_slot = slot; }
int gdte_ipo_node_frag_live(void) { return atomic_load_explicit(&frag_live, memory_order_relaxed); }

static void frag_recv_free(frag_recv_t *fr)
{
    if (fr->host) gdte_stage_release(fr->host);
    if (fr->dev) gdte_stage_release(fr->dev);
    if (fr->type) gdte_type_release(fr->type);
    fr->host = fr->dev = NULL;
    fr->type = NULL;
    frag_live--;
    pthread_mutex_lock(&node_lock);
    if (frag_recv_npool < ISEND_KEEP) {
        LL_PREPEND(frag_recv_pool, fr);
        frag_recv_npool++;
        fr = NULL;
    }
    pthread_mutex_unlock(&node_lock);
    if (fr) free(fr->reqs), free(fr->idx), free(fr);
}

static void frag_pools_free(void)
{
    pthread_mutex_lock(&node_lock);
    frag_send_t *fs, *ft;
    LL_FOREACH_SAFE(frag_send_pool, fs, ft) free(fs->reqs), free(fs);
    frag_recv_t *fr, *rt;
    LL_FOREACH_SAFE(frag_recv_pool, fr, rt) free(fr->reqs), free(fr->idx), free(fr);
    frag_send_pool = NULL;
    frag_recv_pool = NULL;
    frag_send_npool = frag_recv_npool = 0;
    pthread_mutex_unlock(&node_lock);
}

static gdte_status_t frag_recv_start(const mark_t *mk, int src_world, void *user, int count, gdte_type_h type,
                                     gdte_ipo_kind_t kind, int64_t posted, const gdte_stage_t *room,
                                     int64_t room_bytes, frag_recv_t **fr_p)
{
    *fr_p = NULL;
    int64_t frag = mk->width, n = mk->rows;
    /* A marker the sender wrote: fragments that add up to the message. */
    if (mk->nbytes <= 0 || frag <= 0 || n <= 0 || n > INT_MAX || frag > INT_MAX || (mk->nbytes + frag - 1) / frag != n)
        return GDTE_ERR_TRANSPORT;
    frag_recv_t *fr;
    pthread_mutex_lock(&node_lock);
    RECYCLE_GET(frag_recv_pool, frag_recv_npool, fr);
    pthread_mutex_unlock(&node_lock);
    if (!fr && !(fr = calloc(1, sizeof *fr))) return GDTE_ERR_NO_MEMORY;
    MPI_Request *reqs = fr->reqs;
    int *idx = fr->idx, cap = fr->cap;
    memset(fr, 0, sizeof *fr);
    fr->pend_kind = PEND_FRAG;
    fr->reqs = reqs;
    fr->idx = idx;
    fr->cap = cap;
    frag_live++;
    fr->n = (int)n;
    fr->cookie = mk->cookie;
    fr->frag = frag;
    fr->nbytes = mk->nbytes;
    fr->posted = posted;
    fr->deliver = mk->nbytes < posted ? mk->nbytes : posted;
    fr->user = user;
    fr->count = count;
    fr->kind = kind;
    gdte_type_retain(type);
    fr->type = type;
    gdte_status_t st = frag_arrays(&fr->reqs, &fr->idx, &fr->cap, fr->n) ? GDTE_OK : GDTE_ERR_NO_MEMORY;
    /* The receive's own staging where the message fits and a device receive can read it in
     * place (pinned; the fake device reads anything): no second buffer of the message's size
     * (a window of 64 receives of 16 MiB would hold three gigabytes of staging otherwise). */
    int room_ok = room && room_bytes >= fr->nbytes && room->kind == GDTE_STAGE_HOST &&
                  (kind != GDTE_IPO_DEVICE || room->pinned);
    if (st == GDTE_OK && room_ok) {
        fr->land = gdte_stage_tail(room, (size_t)room_bytes);
    } else if (st == GDTE_OK) {
        st = gdte_stage_acquire(GDTE_STAGE_HOST, 0, (size_t)fr->nbytes, &fr->host);
        if (st == GDTE_OK) fr->land = fr->host->ptr;
    }
    if (st == GDTE_OK && kind == GDTE_IPO_DEVICE && fr->deliver > 0) {
        st = ensure_stream();
        /* The unpacks come after what the application queued on its default stream. */
        if (st == GDTE_OK) st = stream_after_app();
        /* A dense receive gets each fragment by one host-to-device copy; any other is copied
         * into one fragment of device staging and unpacked from there, all on node_stream, whose
         * order lets the next fragment reuse it. (Kernels reading the pinned host memory in
         * place ran 1 MiB vector and indexed windows 1.2-1.4x slower than the copy engine: H200,
         * 6f89dfe.) */
        gdte_layout_t L;
        if (fr->n == 1) {
            /* One fragment: unpacked as a whole message is (frag_unpack). */
        } else if (st == GDTE_OK && gdte_engine_layout(type, count, &L) == GDTE_OK && L.kind == GDTE_LAYOUT_KIND_CONTIG &&
            L.total >= fr->deliver) {
            fr->dense = (char *)((uintptr_t)user + (uintptr_t)L.disp); /* MPI_BOTTOM: in integers */
        } else if (st == GDTE_OK) {
            st = gdte_stage_acquire(GDTE_STAGE_DEVICE, 0, (size_t)(frag < fr->deliver ? frag : fr->deliver), &fr->dev);
        }
    }
    for (int k = 0; st == GDTE_OK && k < fr->n; k++) {
        int64_t off = k * frag;
        int len = (int)(fr->nbytes - off < frag ? fr->nbytes - off : frag);
        if (PMPI_Irecv(fr->land + off, len, MPI_BYTE, src_world, mk->fin_tag, frag_comm, &fr->reqs[k]) !=
            MPI_SUCCESS) {
            /* Those already posted are cancelled: nothing will land in staging freed below. */
            for (int j = 0; j < k; j++) PMPI_Cancel(&fr->reqs[j]), PMPI_Wait(&fr->reqs[j], MPI_STATUS_IGNORE);
            st = GDTE_ERR_TRANSPORT;
        }
    }
    if (st != GDTE_OK) {
        frag_recv_free(fr);
        return st;
    }
    *fr_p = fr;
    return GDTE_OK;
}

/* Bytes [off, off+len) of the message, arrived in host staging, into the receive buffer. */
static gdte_status_t frag_unpack(frag_recv_t *fr, int64_t off, int64_t len)
{
    const char *h = fr->land + off;
    gdte_pack_params_t p = {0};
    p.field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES | GDTE_PACK_FIELD_FLAGS;
    p.offset = off;
    p.max_bytes = len;
    int64_t done = 0;
    gdte_status_t st;
    if (fr->kind == GDTE_IPO_DEVICE && fr->n == 1) {
        /* The whole message at once, the way a message received whole is unpacked: small dense
         * or single-stride ones by the copy engines alone (no kernel: on a GPU that processes
         * share, a kernel waits for the GPU to switch over to this process, ~150 us). */
        return gdte_xfer_unpack_from_host(h, fr->host ? fr->host->pinned : 1, len, fr->user, fr->count, fr->type, 0);
    }
    if (fr->kind == GDTE_IPO_DEVICE) {
        p.field_mask |= GDTE_PACK_FIELD_STREAM;
        p.stream = node_stream;
        p.flags = GDTE_PACK_FLAG_ASYNC;
        if (fr->dense) {
            st = gdte_gpu_memcpy_async(fr->dense + off, h, (size_t)len, node_stream);
            done = len;
        } else {
            char *d = fr->dev->ptr;
            st = gdte_gpu_memcpy_async(d, h, (size_t)len, node_stream);
            if (st == GDTE_OK) st = gdte_unpack(d, len, fr->user, fr->count, fr->type, &p, &done);
        }
    } else {
        /* A host receive, or host memory standing in for a device. */
        p.flags = GDTE_PACK_FLAG_HOST;
        st = gdte_unpack(h, len, fr->user, fr->count, fr->type, &p, &done);
    }
    if (st == GDTE_OK && done != len) st = GDTE_ERR_INTERNAL;
    return st;
}

/* Unpack what has arrived; 1 when all of it is in the receive buffer. `block`: until then. */
static int frag_recv_step(frag_recv_t *fr, int block)
{
    for (;;) {
        int outc = 0;
        if (fr->done < fr->n) {
            if (PMPI_Testsome(fr->n, fr->reqs, &outc, fr->idx, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
                if (fr->err == GDTE_OK) fr->err = GDTE_ERR_TRANSPORT;
                /* What is left cannot be waited for reliably: cancel it, so the staging is
                 * no longer a target. */
                for (int k = 0; k < fr->n; k++)
                    if (fr->reqs[k] != MPI_REQUEST_NULL) PMPI_Cancel(&fr->reqs[k]), PMPI_Wait(&fr->reqs[k], MPI_STATUS_IGNORE);
                fr->done = fr->n;
                outc = 0;
            }
            if (outc == MPI_UNDEFINED) outc = 0;
        }
        for (int i = 0; i < outc; i++) {
            int64_t off = fr->idx[i] * fr->frag;
            int64_t len = fr->nbytes - off < fr->frag ? fr->nbytes - off : fr->frag;
            if (off + len > fr->deliver) len = fr->deliver - off;
            if (len > 0 && fr->err == GDTE_OK) fr->err = frag_unpack(fr, off, len);
        }
        fr->done += outc;
        if (fr->done == fr->n) {
            if (fr->kind == GDTE_IPO_DEVICE && fr->deliver > 0) {
                gdte_status_t s2 = gdte_gpu_stream_synchronize(node_stream);
                if (fr->err == GDTE_OK) fr->err = s2;
            }
            return 1;
        }
        if (!block) return 0;
        /* This process's own nonblocking sends to other nodes may still have fragments to
         * post, and the peer may be waiting for them before it posts ours (both ranks in an
         * MPI_Testany that finishes a fragmented receive: the sender invariant needs them out). */
        frag_sends_reap(0);
        sched_yield();
    }
}

/* The receive's status and error code once everything has arrived (as recv_marker states them). */
static int frag_recv_status(frag_recv_t *fr, const char *fn, MPI_Status *st)
{
    if (fr->err != GDTE_OK) return gdte_ipo_fail(fr->comm, fn, fr->err);
    gdte_ipo_cnt_g.bytes_unpacked += fr->deliver;
    if (fr->nbytes > fr->posted) {
        PMPI_Status_set_elements_x(st, MPI_BYTE, (MPI_Count)fr->nbytes);
        return gdte_ipo_truncated(fr->comm, st);
    }
    gdte_ipo_status_bytes(st, fr->dt, fr->type, fr->deliver);
    return MPI_SUCCESS;
}

int gdte_ipo_node_frag_progress(gdte_ipo_req_t *r, int block)
{
    frag_recv_t *fr = r->node_frag;
    if (!fr || r->unpacked) return 1;
    if (fr->pend_kind == PEND_COPY) return copy_progress(r, block);
    if (!frag_recv_step(fr, block)) return 0;
    int defer = gdte_ipo_defer_errh;
    gdte_ipo_defer_errh = 1; /* the completion call raises it (complete_one) */
    r->fixed_st = fr->st;
    r->fixed_rc = frag_recv_status(fr, "MPI_Wait", &r->fixed_st);
    r->fixed_st.MPI_ERROR = r->fixed_rc;
    gdte_ipo_defer_errh = defer;
    r->unpacked = 1;
    r->node_frag = NULL;
    frag_recv_free(fr);
    return 1;
}

/* The marker the MPI unpacked into the user's buffer did not read back through gdte's pack.
 * Read it with the MPI's own MPI_Pack (enough elements to cover it): if that finds it, gdte
 * and the MPI disagree on the type's layout (logged: a gdte defect, but the message is still
 * delivered). If not, the type maps some byte twice, which a receive's type must not (the MPI
 * wrote the marker's later bytes over its earlier ones): a clear error, not an internal one. */
static gdte_status_t reread_marker(const void *user, int count, MPI_Datatype dt, mark_t *mk)
{
    int size = 0, psize = 0, pos = 0;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || size <= 0) return GDTE_ERR_INTERNAL;
    int n = (GDTE_IPO_MARK_BYTES + size - 1) / size;
    if (n > count) n = count;
    if (PMPI_Pack_size(n, dt, MPI_COMM_SELF, &psize) != MPI_SUCCESS) return GDTE_ERR_INTERNAL;
    unsigned char *p = malloc((size_t)psize + 1);
    if (!p) return GDTE_ERR_NO_MEMORY;
    gdte_status_t st = GDTE_ERR_INVALID_TYPE;
    if (PMPI_Pack(user, n, dt, p, psize, &pos, MPI_COMM_SELF) == MPI_SUCCESS && pos >= GDTE_IPO_MARK_BYTES) {
        memcpy(mk, p, sizeof *mk);
        if (mk->magic == MARK_MAGIC) {
            char desc[256];
            gdte_type_h t;
            int64_t nb;
            desc[0] = 0;
            if (gdte_ipo_type(dt, count, &t, &nb) == GDTE_OK) gdte_type_describe(t, desc, sizeof desc);
            gdte_warn("a receive's datatype reads back differently through gdte than through the MPI (%s); "
                      "the MPI's reading was used",
                      desc);
            st = GDTE_OK;
        }
    }
    free(p);
    if (st != GDTE_OK)
        gdte_error("a device message matched a receive whose datatype maps some bytes more than once, which a "
                   "receive's datatype must not: the message cannot be delivered (MPI_ERR_TYPE)");
    return st;
}

/* A receive matched a marker: deliver the message, answer the sender, state the status. */
int gdte_ipo_node_recv_marker(MPI_Comm comm, const char *fn, void *user, int count, MPI_Datatype dt,
                              gdte_ipo_kind_t kind, int64_t posted, const void *landing, const gdte_stage_t *room,
                              int64_t room_bytes, MPI_Status *st)
{
    node_comm_t *nc = comm_info(comm);
    int64_t t_recv = prof_t0();
    mark_t mk;
    gdte_status_t s = read_marker(landing, user, count, dt, &mk);
    if (s == GDTE_OK && mk.magic != MARK_MAGIC) s = landing ? GDTE_ERR_INTERNAL : reread_marker(user, count, dt, &mk);
    if (s != GDTE_OK) return gdte_ipo_fail(comm, fn, s);
    int src = st->MPI_SOURCE, tag = st->MPI_TAG;
    ann_t *a = take_announcement(nc, src, tag, mk.cookie);
    gdte_type_h type = NULL;
    int64_t tbytes = 0;
    s = gdte_ipo_type(dt, count, &type, &tbytes);
    int64_t n = mk.nbytes < posted ? mk.nbytes : posted;
    if (s == GDTE_OK && !a) s = GDTE_ERR_TRANSPORT;
    if (s == GDTE_OK && mk.how == HOW_FRAGS) {
        frag_recv_t *fr = NULL;
        s = frag_recv_start(&mk, nc->world[src], user, count, type, kind, posted, room, room_bytes, &fr);
        if (s == GDTE_OK) {
            gdte_ipo_cnt_g.node_frag_recvs++;
            fr->comm = comm;
            fr->dt = dt;
            fr->st = *st;
            if (frag_defer_slot) {
                /* The progress pass: the fragments arrive in later passes (or the completion
                 * call, which waits for the rest). */
                *frag_defer_slot = fr;
                ann_put(a);
                prof_add(P_RECV, t_recv);
                return GDTE_IPO_PENDING;
            }
            frag_recv_step(fr, 1);
            int rc = frag_recv_status(fr, fn, st);
            frag_recv_free(fr);
            ann_put(a);
            prof_add(P_RECV, t_recv);
            return rc;
        }
    } else if (s == GDTE_OK && mk.how == HOW_INLINE) {
        if (kind == GDTE_IPO_HOST) {
            gdte_pack_params_t p = {.field_mask = 0, .flags = GDTE_PACK_FLAG_HOST};
            s = n ? gdte_unpack(a->data, n, user, count, type, &p, NULL) : GDTE_OK;
        } else {
            s = n ? gdte_xfer_unpack_from_host(a->data, 0, n, user, count, type, kind == GDTE_IPO_FAKE) : GDTE_OK;
        }
    } else if (s == GDTE_OK && mk.how != HOW_IPC) {
        s = GDTE_ERR_TRANSPORT;
    } else if (s == GDTE_OK) {
        /* The sender's word: claimed (the data where the marker says, the sender waits), or
         * detached by the sender (a packed copy where the word says, nobody waits). */
        int w = nc->world[src];
        slot_t *sl = peer_slots[w] ? &peer_slots[w][mk.slot & (SLOTS - 1)] : NULL;
        uint64_t was = mk.word;
        int detached = 0;
        mark_t at = mk;
        if (!sl) {
            s = GDTE_ERR_INTERNAL;
        } else if (!atomic_compare_exchange_strong_explicit(&sl->word, &was, W_GEN(mk.word) | W_CLAIMED,
                                                            memory_order_acq_rel, memory_order_acquire)) {
            if (was != (W_GEN(mk.word) | W_DETACHED)) {
                gdte_error("node path: a marker's completion word reads %#llx, want %#llx",
                           (unsigned long long)was, (unsigned long long)mk.word);
                s = GDTE_ERR_INTERNAL;
            }
            detached = 1;
            at.shape = SHAPE_CONTIG;
            at.addr = sl->addr;
            at.offset = sl->offset;
            at.rbase = sl->rbase;
            at.handle = sl->handle;
        }
        int queued = 0;
        gdte_type_h pinned = NULL;
        node_lay_t lay_buf, *lay = NULL;
        if (at.shape == SHAPE_UNITS && a && a->ndata == (int)sizeof lay_buf) {
            memcpy(&lay_buf, a->data, sizeof lay_buf);
            lay = &lay_buf;
        }
        int64_t t = prof_t0();
        /* Room for its record in the batch first (only device receives are queued); with none,
         * this receive is copied outside it. */
        int depth = batch_depth;
        if (batch_depth && (kind == GDTE_IPO_DEVICE || kind == GDTE_IPO_FAKE) && batch_n == batch_cap &&
            !batch_grow((void **)&batch, &batch_cap, sizeof *batch))
            batch_depth = 0;
        if (s == GDTE_OK) s = pull(&at, lay, w, n, user, count, type, kind, &queued, &pinned);
        batch_depth = depth;
        prof_add(P_RECV_PULL, t);
        if (queued) {
            batch[batch_n++] = (queued_fin_t){sl, mk.word, w, mk.fin_tag, detached, pinned, fake_pending};
            fake_pending.type = NULL;
            if (node_pipeline) attach_to_batch();
        } else {
            /* The sender waits for this whatever happened here. */
            if (sl) finish_word(sl, mk.word, w, mk.fin_tag, detached);
            unpin_plan(pinned);
        }
        if (kind != GDTE_IPO_HOST) gdte_ipo_cnt_g.node_recvs++; /* device receives, as `recvs` */
    }
    ann_put(a);
    prof_add(P_RECV, t_recv);
    if (s != GDTE_OK) return gdte_ipo_fail(comm, fn, s);
    gdte_ipo_cnt_g.bytes_unpacked += n;
    /* The status the message would have had: its size in the user's type, truncation when the
     * receive was shorter. */
    if (mk.nbytes > posted) {
        PMPI_Status_set_elements_x(st, MPI_BYTE, (MPI_Count)mk.nbytes);
        return gdte_ipo_truncated(comm, st);
    }
    gdte_ipo_status_bytes(st, dt, type, n);
    return MPI_SUCCESS;
}

/* ---- probes ---- */
typedef struct scan {
    int src, tag;
    uint64_t *skip;
    int nskip, cap;
} scan_t;

/* A pending receive of `comm` that the MPI completed with a marker of (src, tag): its cookie is
 * one a probe must skip. */
static void scan_one(gdte_ipo_req_t *r, void *arg)
{
    scan_t *s = arg;
    MPI_Status st;
    int flag = 0;
    if (!r->is_recv || !r->active || r->unpacked || PMPI_Request_get_status(r->handle, &flag, &st) != MPI_SUCCESS || !flag) return;
    if (st.MPI_SOURCE != s->src || st.MPI_TAG != s->tag || !gdte_ipo_node_is_marker(r->comm, &st)) return;
    uint64_t c;
    if (r->node_frag && *(const int *)r->node_frag == PEND_COPY) return; /* delivered: its announcement taken */
    if (r->node_frag) c = ((const frag_recv_t *)r->node_frag)->cookie; /* fragments overwrite the landing */
    else if (!gdte_ipo_node_marker_cookie(r->node_landing, r->user, r->count, r->dt, &c)) return;
    if (s->nskip == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        uint64_t *p = realloc(s->skip, sizeof *p * (size_t)cap);
        if (!p) return;
        s->skip = p;
        s->cap = cap;
    }
    s->skip[s->nskip++] = c;
}

void gdte_ipo_node_probe_fix(MPI_Comm comm, MPI_Status *st)
{
    node_comm_t *nc = comm_info(comm);
    if (!nc || !gdte_ipo_node_is_marker(comm, st)) return;
    scan_t s = {st->MPI_SOURCE, st->MPI_TAG, NULL, 0, 0};
    gdte_ipo_req_scan(comm, scan_one, &s);
    pthread_mutex_lock(&node_lock);
    int64_t nbytes = -1;
    for (ann_t *a = nc->anns;; a = a->next) {
        if (!a && !(a = ann_fetch(nc, s.src, s.tag))) break; /* not here yet: from the shadow */
        if (a->src != s.src || a->tag != s.tag) continue;
        int skip = 0;
        for (int i = 0; i < s.nskip && !skip; i++) skip = s.skip[i] == a->cookie;
        if (!skip) {
            nbytes = a->nbytes;
            break;
        }
    }
    pthread_mutex_unlock(&node_lock);
    free(s.skip);
    if (nbytes >= 0) PMPI_Status_set_elements_x(st, MPI_BYTE, (MPI_Count)nbytes);
}
