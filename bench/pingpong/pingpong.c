/*
 * pingpong: two processes bounce a non-contiguous message through gdte_msg_* and report the
 * one-way time (half the median round trip), next to a contiguous message of the same bytes
 * through gdte (same fragment size and depth) and a raw copy of those bytes (memcpy on the
 * host; device-to-device, or peer across two GPUs, on a GPU) measured in the same run.
 *
 * Layouts of an N x N double matrix, column-major (Wu 2017, 4.4.2; docs/REFERENCES.md):
 *   V          a vector sub-matrix: N columns of N doubles, leading dimension 2N (both sides)
 *   T          the lower triangle, an indexed type (both sides)
 *   VC         vector sent, contiguous received (and back)
 *   transpose  contiguous sent, received as N single-element-column vectors (a transpose)
 * For each layout and size: the default (GDTE_FRAG_SIZE / GDTE_PIPELINE_DEPTH), a fragment-
 * size sweep, a depth sweep, and unpipelined (depth 1, one fragment of the whole message).
 *
 * CSV: device,commit,gpus,layout,protocol,bytes,frag_size,depth,median_us,gbps,ratio_to_contig
 *   gbps = packed bytes / one-way time (1e9 B/s); ratio_to_contig = contig time / this time;
 *   rows with layout "contig" are the reference itself (1.0), "rawcopy" the plain copy in one
 *   process and "rawipc" the plain copy between the two processes through an IPC mapping (their
 *   ratios against the contig message at the default settings). frag_size 0: chosen by
 *   message size (GDTE_FRAG_SIZE=0); a frag_size equal to bytes at depth 1 is unpipelined.
 *
 * Usage: [mpirun -np 2] pingpong [--fork] [--mem host|device] [--gpus 1|2] [--protocol P]
 *        [--layouts V,T,VC,transpose] [--sizes N,N,...] [--iters K] [--warmup W]
 *        [--sweep full|default] [--csv FILE] [--device NAME] [--kernel-times]
 * --kernel-times (device, --protocol rdma): after each layout, the pull's kernels timed alone in
 * one process with device events (rows with layout "kernel", see kernel_times()).
 */
#include <getopt.h>
#include "twoproc.h"
#include <stdint.h>
#include "gdte.h"
#include "engine/engine.h"
#include "gpu/gpu.h"
#include "kernels/devplan.h"
#include "kernels/kernels.h"
#include "protocols/proto.h"
#include "util/util.h"

#ifndef PINGPONG_COMMIT
#define PINGPONG_COMMIT "unknown"
#endif
#ifndef PINGPONG_SRC
#define PINGPONG_SRC "."
#endif

static int rank, opt_device, opt_gpus = 1, opt_iters = 20, opt_warmup = 3, opt_full = 1, opt_kernel_times;
static gdte_protocol_t opt_protocol = GDTE_PROTOCOL_AUTO;
static gdte_comm_h comm;
static FILE *csv;
static char device_name[256] = "host";
static const char *commit = PINGPONG_COMMIT;
static int gpus_used;

#define OK(call)                                                                                              \
    do {                                                                                                      \
        gdte_status_t st_ = (call);                                                                           \
        if (st_ != GDTE_OK) {                                                                                 \
            fprintf(stderr, "[rank %d] %s:%d: %s -> %s\n", rank, __FILE__, __LINE__, #call, gdte_status_name(st_)); \
            tp_abort(2);                                                                                      \
        }                                                                                                     \
    } while (0)

static gdte_type_h dbl(void) { return gdte_type_predefined(GDTE_BASIC_DOUBLE); }

typedef struct {
    gdte_type_h type;
    int64_t count, span, size;
} shape_t;

static void shape_make(gdte_type_h t, int64_t count, shape_t *s)
{
    OK(gdte_type_commit(t));
    gdte_type_info_t ti;
    OK(gdte_type_get_info(t, &ti));
    s->type = t;
    s->count = count;
    s->span = ti.true_lb + ti.true_extent + (count - 1) * ti.extent;
    OK(gdte_type_pack_size(count, t, &s->size));
}

static void shape_vector(int64_t n, shape_t *s)
{
    gdte_type_h t;
    OK(gdte_type_create_vector(n, n, 2 * n, dbl(), &t));
    shape_make(t, 1, s);
}

static void shape_triangle(int64_t n, shape_t *s)
{
    int64_t *bl = malloc((size_t)n * sizeof *bl), *disp = malloc((size_t)n * sizeof *disp);
    for (int64_t j = 0; j < n; j++) {
        bl[j] = n - j;
        disp[j] = j * n + j;
    }
    gdte_type_h t;
    OK(gdte_type_create_indexed(n, bl, disp, dbl(), &t));
    free(bl);
    free(disp);
    shape_make(t, 1, s);
}

static void shape_contig(int64_t doubles, shape_t *s)
{
    gdte_type_h t;
    OK(gdte_type_create_contiguous(doubles, dbl(), &t));
    shape_make(t, 1, s);
}

/* Column j of the transpose: N doubles N apart; columns start one double apart. */
static void shape_transposed(int64_t n, shape_t *s)
{
    gdte_type_h col, t;
    OK(gdte_type_create_vector(n, 1, n, dbl(), &col));
    OK(gdte_type_create_resized(col, 0, 8, &t));
    gdte_type_free(&col);
    shape_make(t, n, s);
}

/* ---- buffers ---------------------------------------------------------------------------- */
static void *buf_new(int64_t bytes, unsigned seed)
{
    unsigned char *h = malloc((size_t)bytes);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < bytes; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        h[i] = (unsigned char)x;
    }
    if (!opt_device) return h;
    void *d;
    OK(gdte_gpu_malloc(&d, (size_t)bytes));
    OK(gdte_gpu_memcpy(d, h, (size_t)bytes));
    free(h);
    return d;
}
static void buf_del(void *p)
{
    if (opt_device) gdte_gpu_free(p);
    else free(p);
}
static void *to_host(const void *p, int64_t bytes)
{
    void *h = malloc((size_t)bytes);
    if (opt_device) OK(gdte_gpu_memcpy(h, p, (size_t)bytes));
    else memcpy(h, p, (size_t)bytes);
    return h;
}

/* ---- one round trip -------------------------------------------------------------------------- */
typedef struct {
    int64_t frag;
    int depth;
} cfg_t;

static gdte_msg_params_t params_of(cfg_t c)
{
    gdte_msg_params_t p = {.field_mask = GDTE_MSG_FIELD_PROTOCOL, .protocol = opt_protocol};
    if (c.frag >= 0) {
        p.field_mask |= GDTE_MSG_FIELD_FRAG_SIZE;
        p.frag_size = c.frag;
    }
    if (c.depth > 0) {
        p.field_mask |= GDTE_MSG_FIELD_DEPTH;
        p.depth = c.depth;
    }
    return p;
}

/* Rank 0 sends (a, sa), then receives the reply into it; rank 1 receives into (b, sb) and sends
 * it back from there. Returns half the median round trip, in seconds (rank 0). */
static int last_pulled; /* the last pingpong's replies were received by RDMA pull (rank 0) */

static int64_t pulls_now(void)
{
    gdte_proto_ctx_attr_t a = {.field_mask = GDTE_PROTO_CTX_ATTR_FIELD_STATS};
    return gdte_proto_ctx_query(comm, &a) == GDTE_OK ? a.stats.pulls : 0;
}

static double pingpong(void *a, const shape_t *sa, void *b, const shape_t *sb, cfg_t c, gdte_protocol_t *used)
{
    gdte_msg_params_t p = params_of(c);
    int64_t pulls0 = pulls_now();
    int n = opt_warmup + opt_iters;
    double *t = malloc((size_t)n * sizeof *t);
    gdte_msg_status_t s = {0};
    tp_barrier();
    for (int i = 0; i < n; i++) {
        gdte_msg_req_h sq, rq;
        if (rank == 0) {
            double t0 = tp_time();
            OK(gdte_msg_isend(comm, a, sa->count, sa->type, 1, 1, &p, &sq));
            OK(gdte_msg_wait(&sq, &s));
            *used = s.protocol;
            OK(gdte_msg_irecv(comm, a, sa->count, sa->type, 1, 2, &p, &rq));
            OK(gdte_msg_wait(&rq, NULL));
            t[i] = (tp_time() - t0) / 2;
        } else {
            OK(gdte_msg_irecv(comm, b, sb->count, sb->type, 0, 1, &p, &rq));
            OK(gdte_msg_wait(&rq, NULL));
            OK(gdte_msg_isend(comm, b, sb->count, sb->type, 0, 2, &p, &sq));
            OK(gdte_msg_wait(&sq, NULL));
        }
    }
    double med = 0;
    last_pulled = pulls_now() > pulls0;
    if (rank == 0) {
        double *m = t + opt_warmup;
        for (int i = 1; i < opt_iters; i++)
            for (int j = i; j > 0 && m[j - 1] > m[j]; j--) {
                double x = m[j];
                m[j] = m[j - 1];
                m[j - 1] = x;
            }
        med = opt_iters % 2 ? m[opt_iters / 2] : 0.5 * (m[opt_iters / 2 - 1] + m[opt_iters / 2]);
    }
    free(t);
    return med;
}

/* Rank 1's buffer after receiving rank 0's message must be the host oracle's. */
static int verify(void *a, const shape_t *sa, void *b, const shape_t *sb, int64_t bspan)
{
    int bad = 0;
    gdte_msg_params_t p = params_of((cfg_t){-1, 0});
    gdte_msg_req_h q;
    if (rank == 0) {
        OK(gdte_msg_isend(comm, a, sa->count, sa->type, 1, 3, &p, &q));
        OK(gdte_msg_wait(&q, NULL));
        int64_t aspan = sa->span;
        void *ha = to_host(a, aspan);
        tp_bcast(ha, (size_t)aspan); /* rank 1 needs rank 0's data for its oracle */
        free(ha);
    } else {
        /* Poison first so bytes the message must not touch are checked too. */
        unsigned char *poison = malloc((size_t)bspan);
        memset(poison, 0x5a, (size_t)bspan);
        if (opt_device) OK(gdte_gpu_memcpy(b, poison, (size_t)bspan));
        else memcpy(b, poison, (size_t)bspan);
        OK(gdte_msg_irecv(comm, b, sb->count, sb->type, 0, 3, &p, &q));
        OK(gdte_msg_wait(&q, NULL));
        unsigned char *ha = malloc((size_t)sa->span);
        tp_bcast(ha, (size_t)sa->span);
        unsigned char *packed = malloc((size_t)sa->size);
        gdte_pack_params_t hp = {.field_mask = GDTE_PACK_FIELD_FLAGS, .flags = GDTE_PACK_FLAG_HOST};
        int64_t done;
        OK(gdte_pack(ha, sa->count, sa->type, packed, sa->size, &hp, &done));
        OK(gdte_unpack(packed, sa->size, poison, sb->count, sb->type, &hp, &done));
        unsigned char *got = to_host(b, bspan);
        bad = memcmp(got, poison, (size_t)bspan) != 0;
        free(got);
        free(packed);
        free(ha);
        free(poison);
    }
    return tp_sum(bad);
}

static double rawcopy(int64_t bytes, const char **what)
{
    if (rank != 0) return 0;
    void *src = buf_new(bytes, 1), *dst;
    int peer_dev = opt_device && opt_gpus > 1;
    if (peer_dev) {
        OK(gdte_gpu_set_device(1));
        OK(gdte_gpu_malloc(&dst, (size_t)bytes));
        OK(gdte_gpu_set_device(0));
        gdte_gpu_enable_peer(1);
    } else {
        dst = buf_new(bytes, 2);
    }
    *what = !opt_device ? "memcpy" : peer_dev ? "peercopy" : "d2d";
    int n = opt_warmup + opt_iters;
    double *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++) {
        double t0 = tp_time();
        if (!opt_device) memcpy(dst, src, (size_t)bytes);
        else if (peer_dev) {
            OK(gdte_gpu_memcpy_peer_async(dst, 1, src, 0, (size_t)bytes, NULL));
            OK(gdte_gpu_stream_synchronize(NULL));
        } else {
            OK(gdte_gpu_memcpy(dst, src, (size_t)bytes));
        }
        t[i] = tp_time() - t0;
    }
    double *m = t + opt_warmup;
    for (int i = 1; i < opt_iters; i++)
        for (int j = i; j > 0 && m[j - 1] > m[j]; j--) {
            double x = m[j];
            m[j] = m[j - 1];
            m[j - 1] = x;
        }
    double med = opt_iters % 2 ? m[opt_iters / 2] : 0.5 * (m[opt_iters / 2 - 1] + m[opt_iters / 2]);
    free(t);
    buf_del(src);
    if (peer_dev) gdte_gpu_free(dst);
    else buf_del(dst);
    return med;
}

/* The least a one-sided transfer between the two processes costs, without gdte: the receiving
 * process copies the bytes straight from the other process's IPC-mapped buffer (one runtime
 * copy, peer access across GPUs), with a one-byte message each way as the signal (over the same
 * UCX transport gdte's control messages use). Half the median round trip, in seconds (rank 0).
 * On one GPU it includes what any two processes sharing the GPU pay and an in-process copy does
 * not: the switch between their contexts each time the other one's work runs. */
static double rawipc(int64_t bytes)
{
    if (!opt_device) return 0;
    void *mine = buf_new(bytes, 20 + (unsigned)rank), *peer = NULL;
    gdte_gpu_ipc_handle_t h[2];
    OK(gdte_gpu_ipc_get_handle(mine, &h[rank]));
    gdte_gpu_ipc_handle_t own = h[rank];
    if (tp_allgather(&own, sizeof own, h, NULL) != 0) tp_abort(2);
    OK(gdte_gpu_ipc_open(&h[1 - rank], &peer));
    gdte_type_h byte = gdte_type_predefined(GDTE_BASIC_BYTE);
    char tok = 0;
    int n = opt_warmup + opt_iters;
    double *t = malloc((size_t)n * sizeof *t);
    gdte_msg_req_h q;
    tp_barrier();
    for (int i = 0; i < n; i++) {
        if (rank == 0) {
            double t0 = tp_time();
            OK(gdte_msg_isend(comm, &tok, 1, byte, 1, 20, NULL, &q)); /* "my buffer is ready" */
            OK(gdte_msg_wait(&q, NULL));
            OK(gdte_msg_irecv(comm, &tok, 1, byte, 1, 21, NULL, &q)); /* the reply's "ready" */
            OK(gdte_msg_wait(&q, NULL));
            OK(gdte_gpu_memcpy_async(mine, peer, (size_t)bytes, NULL));
            OK(gdte_gpu_stream_synchronize(NULL));
            t[i] = (tp_time() - t0) / 2;
        } else {
            OK(gdte_msg_irecv(comm, &tok, 1, byte, 0, 20, NULL, &q));
            OK(gdte_msg_wait(&q, NULL));
            OK(gdte_gpu_memcpy_async(mine, peer, (size_t)bytes, NULL));
            OK(gdte_gpu_stream_synchronize(NULL));
            OK(gdte_msg_isend(comm, &tok, 1, byte, 0, 21, NULL, &q));
            OK(gdte_msg_wait(&q, NULL));
        }
    }
    tp_barrier();
    double med = 0;
    if (rank == 0) {
        double *m = t + opt_warmup;
        for (int i = 1; i < opt_iters; i++)
            for (int j = i; j > 0 && m[j - 1] > m[j]; j--) {
                double x = m[j];
                m[j] = m[j - 1];
                m[j - 1] = x;
            }
        med = opt_iters % 2 ? m[opt_iters / 2] : 0.5 * (m[opt_iters / 2 - 1] + m[opt_iters / 2]);
    }
    free(t);
    OK(gdte_gpu_ipc_close(peer));
    tp_barrier(); /* the peer has closed its mapping of our buffer before we free it */
    buf_del(mine);
    return med;
}

/* Seconds to pack the first `f` bytes of (a, sa) and to unpack them with sb (rank 0, device):
 * one fragment's GPU work on each side, for the pipeline model below. */
static void frag_work(void *a, const shape_t *sa, const shape_t *sb, int64_t f, double *pack_s, double *unpack_s)
{
    *pack_s = *unpack_s = 0;
    if (rank != 0 || !opt_device) return;
    void *stg = buf_new(f, 3), *dst = buf_new(sb->span > 0 ? sb->span : 8, 4);
    gdte_pack_params_t pp = {.field_mask = GDTE_PACK_FIELD_MAX_BYTES, .max_bytes = f};
    int64_t done;
    int n = opt_warmup + opt_iters;
    double *tp = malloc((size_t)n * sizeof *tp), *tu = malloc((size_t)n * sizeof *tu);
    for (int i = 0; i < n; i++) {
        double t0 = tp_time();
        OK(gdte_pack(a, sa->count, sa->type, stg, f, &pp, &done));
        double t1 = tp_time();
        OK(gdte_unpack(stg, f, dst, sb->count, sb->type, &pp, &done));
        tp[i] = t1 - t0;
        tu[i] = tp_time() - t1;
    }
    for (int k = 0; k < 2; k++) {
        double *m = (k ? tu : tp) + opt_warmup;
        for (int i = 1; i < opt_iters; i++)
            for (int j = i; j > 0 && m[j - 1] > m[j]; j--) {
                double x = m[j];
                m[j] = m[j - 1];
                m[j - 1] = x;
            }
        *(k ? unpack_s : pack_s) = m[opt_iters / 2];
    }
    free(tp);
    free(tu);
    buf_del(stg);
    buf_del(dst);
}

static void row(const char *layout, const char *proto, int64_t bytes, int64_t frag, int depth, double t, double tc);

/* Median of `n` device-event-timed runs of `op` on a stream (seconds); `op` queues its work. */
typedef struct {
    const gdte_layout_t *La, *Lb;
    void *a, *b, *stg;
    int64_t off, len;
    int what; /* 0 d2d copy, 1 layout-to-layout copy, 2 units copy, 3 pack a fragment, 4 unpack one */
} kop_t;

static gdte_status_t kop_run(const kop_t *k, gdte_stream_t s)
{
    const int mb = (int)gdte_knob(GDTE_KNOB_MAX_BLOCKS);
    switch (k->what) {
    case 0: return gdte_gpu_memcpy_async(k->b, k->a, (size_t)k->len, s);
    case 1: return gdte_gpu_exec_copy(k->La, k->a, k->Lb, k->b, 0, k->len, s, mb);
    case 2: return gdte_gpu_exec_copy_units(k->La, k->a, k->b, 0, k->len, s, mb);
    case 3: return gdte_gpu_exec(k->La, GDTE_DIR_PACK, k->a, k->stg, k->off, k->len, s, mb);
    default: return gdte_gpu_exec(k->Lb, GDTE_DIR_UNPACK, k->b, k->stg, k->off, k->len, s, mb);
    }
}

static double kop_time(const kop_t *k, gdte_stream_t s)
{
    gdte_gpu_event_t e0, e1;
    OK(gdte_gpu_event_create(&e0, 1));
    OK(gdte_gpu_event_create(&e1, 1));
    int n = opt_warmup + opt_iters;
    double *t = malloc((size_t)n * sizeof *t);
    for (int i = 0; i < n; i++) {
        float ms = 0;
        OK(gdte_gpu_event_record(e0, s));
        OK(kop_run(k, s));
        OK(gdte_gpu_event_record(e1, s));
        OK(gdte_gpu_event_synchronize(e1));
        OK(gdte_gpu_event_elapsed_ms(e0, e1, &ms));
        t[i] = ms * 1e-3;
    }
    double *m = t + opt_warmup;
    for (int i = 1; i < opt_iters; i++)
        for (int j = i; j > 0 && m[j - 1] > m[j]; j--) {
            double x = m[j];
            m[j] = m[j - 1];
            m[j - 1] = x;
        }
    double med = m[opt_iters / 2];
    free(t);
    gdte_gpu_event_destroy(e0);
    gdte_gpu_event_destroy(e1);
    return med;
}

/* --kernel-times (rank 0, device): the GPU work of a pull timed alone, in this process, with device
 * events, so that a slower ping-pong can be split between the kernels and the rest (handshake,
 * IPC mapping, the two processes' turns on one GPU). Rows, ratio_to_contig = k_d2d time / row's:
 *   k_d2d        a device-to-device copy of the message's bytes (the kernels' yardstick)
 *   k_copy       the layout-to-layout copy a pull between two regular layouts runs (one kernel)
 *   k_copy_units the unit copy a pull between identical irregular types runs (one kernel)
 *   k_pack       the pack of one fragment of `f` bytes (the first) out of the sender's layout
 *   k_unpack     the unpack of that fragment into the receiver's layout
 *   k_pack_last  the pack of the last fragment (a shorter one, or the end of the buffer)
 * frag_size: f (the pull's default fragment, as for model_bound; the message for the copies). */
static void kernel_times(void *a, const shape_t *sa, void *b, const shape_t *sb, int64_t bytes, int64_t f)
{
    if (rank != 0 || !opt_device) return;
    gdte_layout_t La, Lb;
    OK(gdte_engine_layout(sa->type, sa->count, &La));
    OK(gdte_engine_layout(sb->type, sb->count, &Lb));
    gdte_stream_t s;
    OK(gdte_gpu_stream_create(&s));
    void *src = buf_new(bytes, 21), *dst = buf_new(bytes, 22), *stg = buf_new(f, 23);
    kop_t k = {&La, &Lb, src, dst, stg, 0, bytes, 0};
    const double td = kop_time(&k, s);
    row("kernel", "k_d2d", bytes, bytes, 0, td, td);
    int regular_a = La.kind == GDTE_LAYOUT_KIND_STRIDED || La.kind == GDTE_LAYOUT_KIND_CONTIG;
    int regular_b = Lb.kind == GDTE_LAYOUT_KIND_STRIDED || Lb.kind == GDTE_LAYOUT_KIND_CONTIG;
    const gdte_unit_t *ua = NULL, *ub = NULL;
    if (La.kind == GDTE_LAYOUT_KIND_UNITS) OK(gdte_devplan_units(sa->type, &ua));
    if (Lb.kind == GDTE_LAYOUT_KIND_UNITS) OK(gdte_devplan_units(sb->type, &ub));
    La.units = ua;
    Lb.units = ub;
    k = (kop_t){&La, &Lb, a, b, stg, 0, bytes, 1};
    if (regular_a && regular_b) row("kernel", "k_copy", bytes, bytes, 0, kop_time(&k, s), td);
    k.what = 2;
    if (La.kind == GDTE_LAYOUT_KIND_UNITS && Lb.kind == GDTE_LAYOUT_KIND_UNITS && La.nunits == Lb.nunits &&
        La.rep_bytes == Lb.rep_bytes)
        row("kernel", "k_copy_units", bytes, bytes, 0, kop_time(&k, s), td);
    if (La.kind != GDTE_LAYOUT_KIND_EMPTY && f > 0) {
        k = (kop_t){&La, &Lb, a, b, stg, 0, f < bytes ? f : bytes, 3};
        row("kernel", "k_pack", bytes, f, 0, kop_time(&k, s), td);
        k.what = 4;
        row("kernel", "k_unpack", bytes, f, 0, kop_time(&k, s), td);
        int64_t last = (bytes - 1) / f * f;
        k = (kop_t){&La, &Lb, a, b, stg, last, bytes - last, 3};
        row("kernel", "k_pack_last", bytes, bytes - last, 0, kop_time(&k, s), td);
    }
    OK(gdte_gpu_stream_synchronize(s));
    gdte_gpu_stream_destroy(s);
    buf_del(src);
    buf_del(dst);
    buf_del(stg);
}

static void row(const char *layout, const char *proto, int64_t bytes, int64_t frag, int depth, double t, double tc)
{
    if (rank != 0) return;
    double gbps = t > 0 ? (double)bytes / t / 1e9 : 0;
    double ratio = t > 0 ? tc / t : 0;
    fprintf(csv, "%s,%s,%d,%s,%s,%lld,%lld,%d,%.2f,%.3f,%.3f\n", device_name, commit, gpus_used, layout, proto,
            (long long)bytes, (long long)frag, depth, t * 1e6, gbps, ratio);
    fflush(csv);
    printf("%-10s %-10s %11lld B  frag %9lld  depth %2d  %11.1f us  %8.3f GB/s  x%.3f\n", layout, proto,
           (long long)bytes, (long long)frag, depth, t * 1e6, gbps, ratio);
    fflush(stdout);
}

static void run_layout(const char *name, int64_t n)
{
    shape_t sa, sb, ca, cb;
    if (!strcmp(name, "V")) {
        shape_vector(n, &sa);
        shape_vector(n, &sb);
    } else if (!strcmp(name, "T")) {
        shape_triangle(n, &sa);
        shape_triangle(n, &sb);
    } else if (!strcmp(name, "VC")) {
        shape_vector(n, &sa);
        shape_contig(n * n, &sb);
    } else if (!strcmp(name, "transpose")) {
        shape_contig(n * n, &sa);
        shape_transposed(n, &sb);
    } else {
        if (rank == 0) fprintf(stderr, "unknown layout %s\n", name);
        return;
    }
    int64_t bytes = sa.size;
    shape_contig(bytes / 8, &ca);
    shape_contig(bytes / 8, &cb);
    void *a = buf_new(sa.span > 0 ? sa.span : 8, 10), *b = buf_new(sb.span > 0 ? sb.span : 8, 11);
    void *ac = buf_new(bytes, 12), *bc = buf_new(bytes, 13);

    if (verify(a, &sa, b, &sb, sb.span)) {
        if (rank == 0) fprintf(stderr, "VERIFY FAILED: %s N=%lld\n", name, (long long)n);
        tp_abort(1);
    }
    int64_t kdepth = (int64_t)4;
    cfg_t cfgs[16];
    int nc = 0;
    cfgs[nc++] = (cfg_t){-1, 0}; /* the knobs' defaults */
    if (opt_full) {
        static const int64_t frags[] = {65536, 262144, 1 << 20, 4 << 20};
        for (int i = 0; i < 4; i++)
            if (frags[i] < bytes) cfgs[nc++] = (cfg_t){frags[i], (int)kdepth};
        static const int depths[] = {1, 2, 8};
        for (int i = 0; i < 3; i++) cfgs[nc++] = (cfg_t){-1, depths[i]};
    }
    cfgs[nc++] = (cfg_t){bytes, 1}; /* unpipelined: one fragment, nothing overlaps */
    double t_default_contig = 0, t_default = 0;
    for (int i = 0; i < nc; i++) {
        gdte_protocol_t used = GDTE_PROTOCOL_AUTO, usedc = GDTE_PROTOCOL_AUTO;
        double t = pingpong(a, &sa, b, &sb, cfgs[i], &used);
        int pulled = last_pulled;
        double tc = pingpong(ac, &ca, bc, &cb, cfgs[i], &usedc);
        if (i == 0) {
            t_default_contig = tc;
            t_default = t;
        }
        /* Defaults are reported as the knobs give them (frag 0: chosen by message size). */
        int64_t frag = cfgs[i].frag < 0 ? gdte_knob(GDTE_KNOB_FRAG_SIZE) : cfgs[i].frag;
        int depth = cfgs[i].depth > 0 ? cfgs[i].depth : (int)gdte_knob(GDTE_KNOB_PIPELINE_DEPTH);
        /* RDMA rows say how: rdma_pull (the receiver packed the sender's data itself) or rdma
         * (the sender's fragment ring, or a contiguous side's shortcut). */
        row(name, used == GDTE_PROTOCOL_RDMA && pulled ? "rdma_pull" : gdte_protocol_name(used), bytes, frag,
            depth, t, tc);
        row("contig", gdte_protocol_name(usedc), bytes, frag, depth, tc, tc);
    }
    const char *what = "memcpy";
    double tr = rawcopy(bytes, &what);
    row("rawcopy", what, bytes, 0, 0, tr, t_default_contig);
    double ti = rawipc(bytes);
    if (opt_device) row("rawipc", "ipccopy", bytes, 0, 0, ti, t_default_contig);
    if (opt_device && opt_protocol == GDTE_PROTOCOL_RDMA) {
        /* The pipeline's bound: the whole message's transfer plus one fragment's pack and
         * unpack, at the fragment size a pull picks by default (a quarter of the message, a
         * power of two in 256 KiB..16 MiB). Row "model_bound": median_us is the model with the
         * transfer as an in-process raw copy, "model_bound_ipc" with the transfer as the two
         * processes' raw IPC copy (rawipc); ratio_to_contig is the measured default time over
         * the model (target <= 1.2). */
        int64_t f = 1;
        while (f < bytes / 4) f <<= 1;
        f = f < (256 << 10) ? (256 << 10) : f > (16 << 20) ? (16 << 20) : f;
        if (f > bytes) f = bytes;
        double tpk, tun;
        frag_work(a, &sa, &sb, f, &tpk, &tun);
        row(name, "model_bound", bytes, f, (int)gdte_knob(GDTE_KNOB_PIPELINE_DEPTH), tr + tpk + tun, t_default);
        row(name, "model_bound_ipc", bytes, f, (int)gdte_knob(GDTE_KNOB_PIPELINE_DEPTH), ti + tpk + tun, t_default);
        if (opt_kernel_times) kernel_times(a, &sa, b, &sb, bytes, f);
    }
    buf_del(a);
    buf_del(b);
    buf_del(ac);
    buf_del(bc);
    gdte_type_free(&sa.type);
    gdte_type_free(&sb.type);
    gdte_type_free(&ca.type);
    gdte_type_free(&cb.type);
}

int main(int argc, char **argv)
{
    tp_init(&argc, &argv);
    rank = tp.rank;
    const char *layouts = "V,T,VC,transpose", *sizes = NULL, *csv_path = NULL, *dev_override = NULL;
    /* (--fork was taken out of argv by tp_init) */
    static const struct option opts[] = {
        {"mem", required_argument, NULL, 'm'},     {"gpus", required_argument, NULL, 'g'},
        {"protocol", required_argument, NULL, 'p'}, {"layouts", required_argument, NULL, 'l'},
        {"sizes", required_argument, NULL, 's'},   {"iters", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'w'},  {"sweep", required_argument, NULL, 'S'},
        {"csv", required_argument, NULL, 'c'},     {"device", required_argument, NULL, 'd'},
        {"kernel-times", no_argument, NULL, 'k'},
        {NULL, 0, NULL, 0},
    };
    opterr = rank == 0; /* one rank reports a bad option */
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (c) {
        case 'm': opt_device = !strcmp(optarg, "device"); break;
        case 'g': opt_gpus = atoi(optarg); break;
        case 'p':
            opt_protocol = !strcmp(optarg, "rdma")        ? GDTE_PROTOCOL_RDMA
                           : !strcmp(optarg, "copyinout") ? GDTE_PROTOCOL_COPYINOUT
                                                          : GDTE_PROTOCOL_AUTO;
            break;
        case 'l': layouts = optarg; break;
        case 's': sizes = optarg; break;
        case 'i': opt_iters = atoi(optarg); break;
        case 'w': opt_warmup = atoi(optarg); break;
        case 'S': opt_full = strcmp(optarg, "default") != 0; break;
        case 'c': csv_path = optarg; break;
        case 'd': dev_override = optarg; break;
        case 'k': opt_kernel_times = 1; break;
        default: return tp_finalize(2);
        }
    }
    if (optind < argc) {
        if (rank == 0) fprintf(stderr, "unknown option %s\n", argv[optind]);
        return tp_finalize(2);
    }
    if (opt_iters < 1) opt_iters = 1;
    /* The commit measured: GDTETEST_COMMIT, else the source tree's HEAD now (the one configured
     * into the binary may be older), else the configured one. */
    static char head[64];
    if (getenv("GDTETEST_COMMIT")) {
        commit = getenv("GDTETEST_COMMIT");
    } else {
        FILE *g = popen("git -C " PINGPONG_SRC " rev-parse --short HEAD 2>/dev/null", "r");
        if (g) {
            if (fgets(head, sizeof head, g) && head[0]) {
                head[strcspn(head, "\n")] = 0;
                commit = head;
            }
            pclose(g);
        }
    }
    gdte_init_params_t ip = {.field_mask = 0};
    if (opt_device) {
        ip.field_mask = GDTE_INIT_FIELD_DEVICE;
        ip.device = opt_gpus > 1 ? rank : 0;
    } else {
        ip.field_mask = GDTE_INIT_FIELD_FLAGS;
        ip.flags = GDTE_INIT_FLAG_HOST_ONLY;
    }
    OK(gdte_init(&ip));
    if (opt_device && (!gdte_gpu_available() || (opt_gpus > 1 && gdte_gpu_device_count() < 2))) {
        if (rank == 0) fprintf(stderr, "device mode needs %d GPU(s)\n", opt_gpus);
        gdte_finalize();
        return tp_finalize(77);
    }
    if (opt_device) {
        gdte_gpu_props_t pr;
        if (gdte_gpu_get_props(gdte_gpu_current_device(), &pr) == GDTE_OK) {
            snprintf(device_name, sizeof device_name, "%s", pr.name);
            for (char *c = device_name; *c; c++)
                if (*c == ' ' || *c == ',') *c = '-';
        }
        gpus_used = opt_gpus > 1 ? 2 : 1;
    }
    if (dev_override) snprintf(device_name, sizeof device_name, "%s", dev_override);
    gdte_comm_params_t cp = {.field_mask = GDTE_COMM_FIELD_RANK | GDTE_COMM_FIELD_SIZE | GDTE_COMM_FIELD_ALLGATHER,
                             .rank = rank,
                             .size = tp.size,
                             .allgather = tp_allgather};
    OK(gdte_comm_create(&cp, &comm));
    /* The transports decide what copy-in/out can reach (TCP: a few GB/s; shared memory: more)
     * and the latency of every control message: log them with the numbers. */
    if (rank == 0) gdte_proto_print_transports(comm, 1, stdout);
    if (rank == 0) {
        char path[320];
        if (!csv_path) {
            snprintf(path, sizeof path, "pingpong-%s.csv", device_name);
            csv_path = path;
        }
        csv = fopen(csv_path, "w");
        if (!csv) {
            perror(csv_path);
            tp_abort(2);
        }
        fprintf(csv, "device,commit,gpus,layout,protocol,bytes,frag_size,depth,median_us,gbps,ratio_to_contig\n");
        printf("pingpong: %s, %d GPU(s), protocol %s, %d iterations (+%d warm-up), CSV %s\n", device_name, gpus_used,
               gdte_protocol_name(opt_protocol), opt_iters, opt_warmup, csv_path);
    }
    if (!sizes) sizes = opt_device ? "1024,2048,4096,8192" : "256,1024,2048";
    char *lcopy = strdup(layouts), *save1 = NULL;
    for (char *l = strtok_r(lcopy, ",", &save1); l; l = strtok_r(NULL, ",", &save1)) {
        char *scopy = strdup(sizes), *save2 = NULL;
        for (char *s = strtok_r(scopy, ",", &save2); s; s = strtok_r(NULL, ",", &save2)) run_layout(l, atoll(s));
        free(scopy);
    }
    free(lcopy);
    tp_barrier();
    if (rank == 0) fclose(csv);
    OK(gdte_comm_destroy(comm));
    gdte_finalize();
    return tp_finalize(0);
}
