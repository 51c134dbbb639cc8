/*
 * util.h: services every layer may use: logging, knobs (GDTE_* environment variables),
 * checked arithmetic, growable arrays, time. May call: libc only.
 */
#ifndef GDTE_UTIL_H
#define GDTE_UTIL_H

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "gdte.h"

#define GDTE_INTERNAL __attribute__((visibility("hidden")))

/* ---- logging ---- */
typedef enum { GDTE_LOG_ERROR = 0, GDTE_LOG_WARN, GDTE_LOG_INFO, GDTE_LOG_DEBUG, GDTE_LOG_TRACE } gdte_log_level_t;
extern int gdte_log_level_g;
void gdte_log_set_rank(int rank);
void gdte_log_emit(gdte_log_level_t lvl, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define gdte_log(lvl, ...) \
    do { if ((int)(lvl) <= gdte_log_level_g) gdte_log_emit((lvl), __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define gdte_error(...) gdte_log(GDTE_LOG_ERROR, __VA_ARGS__)
#define gdte_warn(...)  gdte_log(GDTE_LOG_WARN, __VA_ARGS__)
#define gdte_info(...)  gdte_log(GDTE_LOG_INFO, __VA_ARGS__)
#define gdte_debug(...) gdte_log(GDTE_LOG_DEBUG, __VA_ARGS__)
#define gdte_trace(...) gdte_log(GDTE_LOG_TRACE, __VA_ARGS__)

/* ---- knobs ---- */
/* Every GDTE_* variable, in one list: X(id, "NAME", kind, "default", "accepted", "doc").
 * kinds: SIZE (bytes, with k/m/g suffixes), INT, BOOL, ENUM (accepted = "a|b|c").
 * Numbers are decimal only: a leading zero is not octal ("065536" is 65536) and "0x" is
 * refused, so a value means what it reads as. */
#define GDTE_KNOB_LIST(X)                                                                                   \
    X(LOG, "GDTE_LOG", ENUM, "warn", "error|warn|info|debug|trace", "log level; lines go to stderr, prefixed with the rank") \
    X(DEV_UNIT, "GDTE_DEV_UNIT", SIZE, "2048", "256..65536, a multiple of 256", "DEV work-unit size S in bytes") \
    X(MAX_BLOCKS, "GDTE_MAX_BLOCKS", INT, "0", "0..65535 (0: enough to fill the GPU)", "thread blocks per pack kernel") \
    X(FRAG_SIZE, "GDTE_FRAG_SIZE", SIZE, "0", "0 or 4096..1073741824 (0: chosen by message size)", "pipeline fragment size") \
    X(PIPELINE_DEPTH, "GDTE_PIPELINE_DEPTH", INT, "4", "1..64", "fragments in flight per message") \
    X(PROTOCOL, "GDTE_PROTOCOL", ENUM, "auto", "auto|rdma|copyinout", "protocol override") \
    X(RDMA_LOCAL_COPY, "GDTE_RDMA_LOCAL_COPY", BOOL, "1", "0|1", "RDMA: copy a peer fragment to local memory before unpacking") \
    X(RDMA_PULL, "GDTE_RDMA_PULL", BOOL, "1", "0|1", "RDMA: the receiver packs a non-contiguous sender's data itself instead of the sender's fragment ring") \
    X(ZERO_COPY, "GDTE_ZERO_COPY", ENUM, "auto", "auto|on|off", "pack device data straight into mapped pinned memory") \
    X(TIMEOUT, "GDTE_TIMEOUT", INT, "120", "1..86400 (seconds)", "a request with no progress for this long fails") \
    X(CACHE_MAX, "GDTE_CACHE_MAX", SIZE, "268435456", "0..2^40 (0: no limit)", "device plan cache bytes; least recently used plans are evicted") \
    X(STAGING_MAX, "GDTE_STAGING_MAX", SIZE, "1073741824", "65536..2^40", "staging (pinned and device) bytes per pool: one pool per gdte_comm context, where a transfer waits for room, and one in the interposer, where the bound is soft (past it a message gets a buffer of its own, warned once, and a collective's peers map it anew each call: a 512^3 complex pencil transpose on 4 ranks stages 512 MiB per rank)") \
    X(MPI_GPU_AWARE, "GDTE_MPI_GPU_AWARE", ENUM, "auto", "auto|0|1", "interposer: the MPI underneath moves device memory itself (auto: ask it, MPIX_Query_cuda_support / MPIX_Query_rocm_support / MPIX_GPU_query_support); then device messages to other nodes (and all of them with GDTE_MPI_IPC=0) are packed into device staging and handed to it, contiguous ones untouched, small ones (4 KiB and less) through host memory; within the node the node path carries them") \
    X(MPI_IPC, "GDTE_MPI_IPC", ENUM, "auto", "auto|0|1", "interposer: device messages to other processes of the node move GPU to GPU (the receiver copies from the sender's memory through GPU IPC; MPI carries a control message on the application's envelope); auto: on where a GPU is present, whether or not the MPI underneath can move device memory (within the node one kernel beats the MPI's own device pipeline). Every process of the job must agree") \
    X(MPI_IPC_MIN, "GDTE_MPI_IPC_MIN", SIZE, "0", "0..2^40 (0: every message the copy engines do not move alone)", "interposer: smallest device message the node path (GDTE_MPI_IPC) carries") \
    X(MPI_PIPELINE, "GDTE_MPI_PIPELINE", ENUM, "auto", "auto|0|1", "interposer: device messages of 64 KiB and more to processes of other nodes travel as a control message on the application's envelope followed by fragments on a private communicator, each posted to the MPI as soon as it is packed and copied to host memory while the next ones are packed, and unpacked by the receiver as it arrives; auto: on unless the MPI underneath moves device memory (then it pipelines them itself). Every process of the job must agree") \
    X(MPI_PROGRESS_THREAD, "GDTE_MPI_PROGRESS_THREAD", BOOL, "1", "0|1", "interposer: where the MPI provides MPI_THREAD_MULTIPLE, a thread of gdte posts the fragments of nonblocking device sends to other nodes (GDTE_MPI_PIPELINE) as they land in host memory and tests them until the MPI has sent them, so that they move while the application computes without calling MPI; otherwise, or with 0, the application's next MPI call posts them") \
    X(MPI_COLL_NODE, "GDTE_MPI_COLL_NODE", BOOL, "1", "0|1", "interposer: blocking Alltoall(v,w), Allgather(v), Gather(v), Scatter(v), Bcast, Neighbor_alltoall(v,w) and Neighbor_allgather(v) on a communicator whose processes all run the node path (GDTE_MPI_IPC) and all have device buffers move GPU to GPU: one kernel per process packs into device staging (dense send blocks are read where they are), one per process unpacks from the senders' memory through GPU IPC, nothing through the MPI; each such call starts with a one-integer MPI_Allreduce that finds whether all buffers are device memory (host buffers then go to the MPI untouched). Every process of the job must agree") \
    X(MPI_COLL_INPLACE_MAX, "GDTE_MPI_COLL_INPLACE_MAX", SIZE, "1048576", "0..2^40 (0: never)", "interposer: largest contiguous send block a node-path collective (GDTE_MPI_COLL_NODE) lets its peers read where it is; larger ones are copied into the sender's pooled device staging by its pack kernel: the peers keep their mapping of the staging from call to call, while application memory is mapped anew at every call (a mapping must not outlive the memory), which costs more than the copy for large allocations") \
    X(MPI_REDUCE_NODE_MIN, "GDTE_MPI_REDUCE_NODE_MIN", SIZE, "1048576", "0..2^40 (0: every size)", "interposer: smallest vector (count x datatype size; Reduce_scatter: all the blocks) of a blocking Reduce, Allreduce, Reduce_scatter(_block), Scan or Exscan on device buffers that moves GPU to GPU within the node (GDTE_MPI_COLL_NODE): each process copies its input into device staging, reduces its slice from every process's staging by one kernel, and the slices are copied to where they belong; a predefined operation on a predefined datatype, on a communicator of framing peers. Smaller ones (and other operations and datatypes) go through host mirrors, or to a GPU-aware MPI as they are. Every process of the job must agree") \
    X(DISABLE, "GDTE_DISABLE", BOOL, "0", "0|1", "interposer: pass every call to MPI untouched") \
    X(FAKE_DEVICE, "GDTE_FAKE_DEVICE", BOOL, "0", "0|1", "testing: treat buffers registered with the test hook as device memory") \
    X(FAULT_STAGING_OOM, "GDTE_FAULT_STAGING_OOM", INT, "0", "0..1000000 (0: off)", "fault injection: the K-th staging allocation of the process fails once") \
    X(FAULT_UCX_ERROR, "GDTE_FAULT_UCX_ERROR", INT, "0", "0..1000000 (0: off)", "fault injection: the K-th fragment sent over UCX by the process fails as an endpoint error")

typedef enum {
#define GDTE_X_KNOB_ID(id, name, kind, def, acc, doc) GDTE_KNOB_##id,
    GDTE_KNOB_LIST(GDTE_X_KNOB_ID)
#undef GDTE_X_KNOB_ID
    GDTE_KNOB_COUNT_
} gdte_knob_id_t;

typedef enum { GDTE_KNOB_SIZE, GDTE_KNOB_INT, GDTE_KNOB_BOOL, GDTE_KNOB_ENUM } gdte_knob_kind_t;

typedef struct gdte_knob_desc {
    const char *name;
    gdte_knob_kind_t kind;
    const char *def;
    const char *accepted;
    const char *doc;
} gdte_knob_desc_t;

/* Parse and validate every knob from the environment. Idempotent until gdte_knobs_reset(). */
gdte_status_t gdte_knobs_load(void);
void gdte_knobs_reset(void);
int64_t gdte_knob(gdte_knob_id_t id);          /* value (ENUM: index into accepted list) */
const char *gdte_knob_source(gdte_knob_id_t id); /* "default" or "environment" */
const char *gdte_knob_text(gdte_knob_id_t id);   /* value as text */
const gdte_knob_desc_t *gdte_knob_desc(gdte_knob_id_t id);
/* For tests: parse one value of a knob, without touching the environment. */
gdte_status_t gdte_knob_parse(gdte_knob_id_t id, const char *text, int64_t *value_p);

/* GDTE_* environment variables that name no knob (a misspelling would otherwise be ignored
 * silently, as UCX warns about unused UCX_* variables): calls fn for each, with the closest
 * knob name when one is near (else NULL), and returns how many there were. Test programs use
 * the GDTETEST_ prefix, which is not looked at. */
int gdte_env_unknown(void (*fn)(const char *name, const char *closest, void *arg), void *arg);
/* Warn once per process (GDTE_LOG warn) about each of them; gdte_init calls it. */
void gdte_env_warn_unknown(void);

/* ---- fault injection (tests of failure paths) ---- */
/* 1 exactly once: on the K-th call for the fault whose knob holds K (never when the knob is 0). */
int gdte_fault_hit(gdte_knob_id_t knob);

/* ---- checked arithmetic ---- */
static inline int gdte_mul_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }
static inline int gdte_add_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int gdte_sub_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_sub_overflow(a, b, r); }

/* ---- growable arrays ---- */
/* Room for `need` elements in the array `arr` (a T * lvalue; NULL with *cap_p == 0 when
 * empty), whose capacity *cap_p doubles from `first`: GDTE_OK, or GDTE_ERR_NO_MEMORY with
 * `arr` and *cap_p as they were. */
#define gdte_grow(arr, cap_p, need, first) gdte_grow_(&(arr), (cap_p), (need), sizeof *(arr), (first))
static inline gdte_status_t gdte_grow_(void *arr_p, int64_t *cap_p, int64_t need, size_t size, int64_t first)
{
    int64_t cap = *cap_p;
    if (need <= cap) return GDTE_OK;
    if (cap < first) cap = first;
    while (cap < need)
        if (gdte_mul_ovf(cap, 2, &cap)) return GDTE_ERR_NO_MEMORY;
    if ((uint64_t)cap > SIZE_MAX / size) return GDTE_ERR_NO_MEMORY;
    void *a, *n;
    memcpy(&a, arr_p, sizeof a); /* any T * through void *, without aliasing it */
    if (!(n = realloc(a, (size_t)cap * size))) return GDTE_ERR_NO_MEMORY;
    memcpy(arr_p, &n, sizeof n);
    *cap_p = cap;
    return GDTE_OK;
}

/* ---- time ---- */
double gdte_time_now(void); /* seconds, monotonic */

#endif
