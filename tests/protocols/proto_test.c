/*
 * Protocol tests: two processes (under mpirun, or forked with --fork: twoproc.h) exchange
 * messages through gdte_msg_* over UCX. The launcher is used only to find each other (the
 * allgather callback), to agree on a seed and for barriers; every
 * input is generated identically on both ranks from that seed, so each rank computes the
 * expected receive buffer itself (host pack of the sender's data with the sender's type, then
 * host unpack with the receiver's type into a poisoned copy) and compares byte for byte,
 * guard bytes past the buffer included.
 *
 *   proto_test random    [opts]  random send/receive types of one signature, in batches
 *   proto_test semantics [opts]  ordering, wildcards, probe, cancel, zero bytes, truncation,
 *                                signature mismatch, shorter messages
 *   proto_test revoke    [opts]  a process destroys its context with a send in flight: the
 *                                send ends canceled, the peer no longer sees the message
 *   proto_test kill-receiver|kill-sender [opts]
 *                                one rank _exit()s in the middle of a message; the other's
 *                                request must fail (never hang)
 * opts: --protocol auto|copyinout|rdma   --mem host|device|emu   --cases N   --seed S
 *       (emu: the RDMA protocol on host shared memory instead of GPU IPC, see proto.h)
 *       --expect-protocol NAME (every nonempty rendezvous message must have used it)
 *       --expect-pulls yes|no|same (RDMA: some message was received by pull / none was / some
 *       pull was between identical irregular types, one kernel with the receiver's units)
 *       --same-type (random: receive with the sender's type, rebuilt)
 *       --gpus 1|2 (device mode: both ranks on GPU 0, or rank r on GPU r)   --fork
 *       --params none (no per-message parameters: the GDTE_* knobs decide; pass --protocol too
 *       so the test knows what to expect)
 *       --emu-delay N (emu: emulated GPU work stays pending for up to N polls; default 3)
 *   proto_test burst    [opts]  messages back to back through the RDMA ring, depth 1..8, many
 *                                fragments, non-contiguous on both sides (the local-copy path)
 *   proto_test ipcshare [opts]  slices of one allocation sent and received: one IPC mapping
 */
#include "twoproc.h"
#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gdte.h"
#include "gpu/gpu.h"
#include "protocols/proto.h"

static int rank, nfail, opt_emu, opt_knobs;
static gdte_protocol_t opt_protocol = GDTE_PROTOCOL_AUTO;
static gdte_protocol_t opt_expect = GDTE_PROTOCOL_AUTO;
static int opt_same_type; /* --same-type: receive with the sender's type (built anew) */
static int opt_expect_pulls = -1; /* --expect-pulls yes|no: RDMA pulls happened (on some rank) or none did */
static int opt_device, opt_cases = 60;
static int opt_emu_delay = 3; /* --mem emu: GPU work reads as pending for up to this many polls */
static unsigned opt_seed = 12345;
static gdte_comm_h comm;

#define CHECK(cond, ...)                                                                                \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "[rank %d] FAIL %s:%d: ", rank, __FILE__, __LINE__);                      \
            fprintf(stderr, __VA_ARGS__);                                                              \
            fprintf(stderr, "\n");                                                                     \
            nfail++;                                                                                   \
        }                                                                                              \
    } while (0)
#define OK(call)                                                                                       \
    do {                                                                                               \
        gdte_status_t st_ = (call);                                                                    \
        if (st_ != GDTE_OK) {                                                                          \
            fprintf(stderr, "[rank %d] %s:%d: %s -> %s\n", rank, __FILE__, __LINE__, #call,           \
                    gdte_status_name(st_));                                                            \
            tp_abort(2);                                                              \
        }                                                                                              \
    } while (0)

/* ---- deterministic random numbers (same stream on both ranks) ---------------------------- */
typedef struct { uint64_t s; } rng_t;
static uint64_t rnd(rng_t *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    uint64_t z = r->s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static int64_t rint_(rng_t *r, int64_t lo, int64_t hi) { return lo + (int64_t)(rnd(r) % (uint64_t)(hi - lo + 1)); }

/* ---- random types holding exactly n doubles --------------------------------------------------- */
static gdte_type_h dbl(void) { return gdte_type_predefined(GDTE_BASIC_DOUBLE); }

static int64_t rand_divisor(rng_t *r, int64_t n)
{
    for (int tries = 0; tries < 16; tries++) {
        int64_t d = rint_(r, 1, n < 64 ? n : 64);
        if (n % d == 0) return d;
    }
    return 1;
}

/* Split n into k>=1 positive parts. */
static int64_t split(rng_t *r, int64_t n, int64_t *parts, int64_t maxk)
{
    int64_t k = rint_(r, 1, n < maxk ? n : maxk), left = n;
    for (int64_t i = 0; i < k - 1; i++) {
        int64_t most = left - (k - 1 - i);
        parts[i] = rint_(r, 1, most < 2 * n / k + 1 ? most : 2 * n / k + 1);
        left -= parts[i];
    }
    parts[k - 1] = left;
    return k;
}



static gdte_type_h build(rng_t *r, int64_t n, int depth, char *desc, size_t dlen)
{
    gdte_type_h t = NULL;
    int kind = (int)rint_(r, 0, depth >= 2 ? 4 : 6);
    if (n == 0) kind = 0;
    switch (kind) {
    case 0:
        OK(gdte_type_create_contiguous(n, dbl(), &t));
        snprintf(desc, dlen, "contig(%lld)", (long long)n);
        break;
    case 1: { /* vector: a sub-matrix */
        int64_t b = rand_divisor(r, n), c = n / b, stride = b + rint_(r, 0, 5);
        OK(gdte_type_create_vector(c, b, stride, dbl(), &t));
        snprintf(desc, dlen, "vector(%lld,%lld,%lld)", (long long)c, (long long)b, (long long)stride);
        break;
    }
    case 2: { /* indexed: uneven blocks with gaps (a triangle is one of these) */
        int64_t bl[64], disp[64], pos = 0;
        int64_t k = split(r, n, bl, 64);
        for (int64_t i = 0; i < k; i++) {
            disp[i] = pos + rint_(r, 0, 3);
            pos = disp[i] + bl[i];
        }
        OK(gdte_type_create_indexed(k, bl, disp, dbl(), &t));
        snprintf(desc, dlen, "indexed(%lld blocks)", (long long)k);
        break;
    }
    case 3: { /* struct of doubles at byte displacements, sometimes 4-byte misaligned */
        int64_t bl[64], disp[64], pos = 0;
        gdte_type_h ty[64];
        int64_t k = split(r, n, bl, 64);
        for (int64_t i = 0; i < k; i++) {
            disp[i] = pos + 8 * rint_(r, 0, 2) + (rint_(r, 0, 3) == 0 ? 4 : 0);
            pos = disp[i] + 8 * bl[i];
            ty[i] = dbl();
        }
        OK(gdte_type_create_struct(k, bl, disp, ty, &t));
        snprintf(desc, dlen, "struct(%lld fields)", (long long)k);
        break;
    }
    case 4: { /* hvector of a random inner type */
        int64_t m = rand_divisor(r, n);
        char in[128];
        gdte_type_h inner = build(r, n / m, depth + 1, in, sizeof in);
        gdte_type_info_t ii;
        OK(gdte_type_get_info(inner, &ii));
        int64_t stride = ii.extent + 8 * rint_(r, 0, 4);
        OK(gdte_type_create_hvector(m, 1, stride, inner, &t));
        snprintf(desc, dlen, "hvector(%lld x %s)", (long long)m, in);
        gdte_type_free(&inner);
        break;
    }
    case 5: { /* 2-D subarray of a larger Fortran-order matrix */
        int64_t rows = rand_divisor(r, n), cols = n / rows;
        int64_t sizes[2] = {rows + rint_(r, 0, 3), cols + rint_(r, 0, 3)}, sub[2] = {rows, cols};
        int64_t starts[2] = {rint_(r, 0, sizes[0] - rows), rint_(r, 0, sizes[1] - cols)};
        OK(gdte_type_create_subarray(2, sizes, sub, starts, GDTE_ORDER_FORTRAN, dbl(), &t));
        snprintf(desc, dlen, "subarray(%lldx%lld)", (long long)rows, (long long)cols);
        break;
    }
    default: { /* resized: elements further apart than their data */
        gdte_type_h c;
        OK(gdte_type_create_contiguous(n, dbl(), &c));
        OK(gdte_type_create_resized(c, 0, 8 * n + 8 * rint_(r, 1, 3), &t));
        gdte_type_free(&c);
        snprintf(desc, dlen, "resized(contig(%lld))", (long long)n);
        break;
    }
    }
    return t;
}

typedef struct {
    gdte_type_h type;
    int64_t count;
    int64_t span; /* bytes the buffer needs */
    int64_t size; /* packed bytes */
    char desc[300];
} ttype_t;

/* `n` doubles as `count` elements of a random type. */
static void random_ttype(rng_t *r, int64_t n, ttype_t *tt)
{
    int64_t count = n ? rand_divisor(r, n) : rint_(r, 0, 3);
    if (count > 8) count = 1;
    char d[256];
    tt->type = build(r, n ? n / count : 0, 0, d, sizeof d);
    OK(gdte_type_commit(tt->type));
    tt->count = count;
    gdte_type_info_t ti;
    OK(gdte_type_get_info(tt->type, &ti));
    if (ti.true_lb < 0 || ti.extent < 0) {
        fprintf(stderr, "test bug: negative bounds\n");
        tp_abort(2);
    }
    tt->span = count ? ti.true_lb + ti.true_extent + (count - 1) * ti.extent : 0;
    OK(gdte_type_pack_size(count, tt->type, &tt->size));
    snprintf(tt->desc, sizeof tt->desc, "%lld x %s", (long long)count, d);
}

/* ---- buffers (host, or device with host mirrors) ------------------------------------------ */
#define GUARD 64
#define POISON 0xA5

typedef struct {
    unsigned char *host; /* what the test reads and writes */
    void *user;          /* what gdte gets: host or device */
    int64_t bytes;       /* span + GUARD */
} buf_t;

static void buf_alloc(buf_t *b, int64_t span)
{
    b->bytes = span + GUARD;
    /* Emulated RDMA: the "device" buffer is a shared-memory segment the peer can map. */
    b->host = opt_emu ? gdte_proto_test_shm_alloc((size_t)b->bytes) : malloc((size_t)b->bytes);
    if (!b->host) {
        fprintf(stderr, "[rank %d] no %s buffer of %lld bytes\n", rank, opt_emu ? "shared-memory" : "host",
                (long long)b->bytes);
        tp_abort(2);
    }
    b->user = b->host;
    if (opt_device) OK(gdte_gpu_malloc(&b->user, (size_t)b->bytes));
}
static void buf_push(buf_t *b)
{
    if (opt_device) OK(gdte_gpu_memcpy(b->user, b->host, (size_t)b->bytes));
}
static void buf_pull(buf_t *b)
{
    if (opt_device) OK(gdte_gpu_memcpy(b->host, b->user, (size_t)b->bytes));
}
static void buf_free(buf_t *b)
{
    if (opt_device) gdte_gpu_free(b->user);
    if (opt_emu) gdte_proto_test_shm_free(b->host);
    else free(b->host);
}

/* Memory of the kind under test: device, emulated-RDMA segment, or host. */
static void *dmalloc(size_t n)
{
    void *p = NULL;
    if (n == 0) n = 8;
    if (opt_device) OK(gdte_gpu_malloc(&p, n));
    else p = opt_emu ? gdte_proto_test_shm_alloc(n) : malloc(n);
    if (!p) {
        fprintf(stderr, "[rank %d] no buffer of %zu bytes\n", rank, n);
        tp_abort(2);
    }
    return p;
}
static void dfree(void *p)
{
    if (opt_device) gdte_gpu_free(p);
    else if (opt_emu) gdte_proto_test_shm_free(p);
    else free(p);
}
static void dput(void *d, const void *h, size_t n)
{
    if (opt_device) OK(gdte_gpu_memcpy(d, h, n));
    else memcpy(d, h, n);
}
static void dget(void *h, const void *d, size_t n)
{
    if (opt_device) OK(gdte_gpu_memcpy(h, d, n));
    else memcpy(h, d, n);
}

static void fill(rng_t *r, unsigned char *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) p[i] = (unsigned char)rnd(r);
}

/* Expected receive buffer: poison, then host pack of (data, st) and host unpack with rt. */
static void oracle(const unsigned char *data, const ttype_t *st, const ttype_t *rt, unsigned char *exp, int64_t ebytes)
{
    memset(exp, POISON, (size_t)ebytes);
    int64_t n = st->size < rt->size ? st->size : rt->size;
    if (n == 0) return;
    unsigned char *packed = malloc((size_t)st->size);
    int64_t got;
    gdte_pack_params_t hp = {.field_mask = GDTE_PACK_FIELD_FLAGS, .flags = GDTE_PACK_FLAG_HOST};
    OK(gdte_pack(data, st->count, st->type, packed, st->size, &hp, &got));
    OK(gdte_unpack(packed, n, exp, rt->count, rt->type, &hp, &got));
    free(packed);
}

static int64_t first_diff(const unsigned char *a, const unsigned char *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return -1;
}

static gdte_msg_params_t msg_params(rng_t *r, int64_t bytes)
{
    static const int64_t frags[] = {0, 4096, 1000, 12312, 65544, 3333};
    gdte_msg_params_t p = {.field_mask = GDTE_MSG_FIELD_PROTOCOL | GDTE_MSG_FIELD_DEPTH | GDTE_MSG_FIELD_FRAG_SIZE};
    p.protocol = opt_protocol;
    p.depth = (int)rint_(r, 1, 4);
    p.frag_size = frags[rint_(r, 0, 5)];
    if (rint_(r, 0, 7) == 0) p.frag_size = bytes + 1; /* unpipelined: one fragment */
    if (opt_knobs) p.field_mask = 0;                  /* the GDTE_* knobs decide */
    return p;
}

static void check_protocol(const gdte_msg_status_t *s, int64_t bytes, const char *what)
{
    if (opt_expect == GDTE_PROTOCOL_AUTO || bytes == 0) return;
    if (opt_protocol == GDTE_PROTOCOL_AUTO && bytes <= 8192) return; /* eager */
    CHECK(s->protocol == opt_expect, "%s: moved by %s, expected %s", what, gdte_protocol_name(s->protocol),
          gdte_protocol_name(opt_expect));
}

/* ---- random: batches of messages both ways, posted and completed in random orders ---------- */
typedef struct {
    ttype_t st, rt;   /* types of the message this rank receives (sender's, ours) */
    ttype_t myst;     /* type of the message this rank sends */
    buf_t sbuf, rbuf;
    unsigned char *exp;
    gdte_msg_req_h sreq, rreq;
    gdte_msg_params_t sp, rp;
    int sdone, rdone;
} msg_t;

static void shuffle(rng_t *r, int *a, int n)
{
    for (int i = 0; i < n; i++) a[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rint_(r, 0, i), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static const int64_t sizes_dbl[] = {0, 1, 7, 100, 1000, 5000, 40000, 150000};

/* Types, data and parameters of the message sent by rank `from` in case `c`. */
static void gen_case(unsigned seed, int c, int from, ttype_t *st, ttype_t *rt, unsigned char **data,
                     gdte_msg_params_t *sp, gdte_msg_params_t *rp)
{
    rng_t r = {seed * 1000003ull + (uint64_t)c * 2 + (uint64_t)from};
    int64_t n = sizes_dbl[rint_(&r, 0, 7)];
    rng_t r0 = r;
    random_ttype(&r, n, st);
    if (opt_same_type) random_ttype(&r0, n, rt); /* the same type again, a handle of its own */
    else random_ttype(&r, n, rt);
    *data = malloc((size_t)st->span + GUARD);
    fill(&r, *data, st->span + GUARD);
    *sp = msg_params(&r, st->size);
    *rp = msg_params(&r, st->size);
}

/* A message's buffers: mine to send (device or emulated memory as under test), the receive buffer
 * poisoned, and the oracle's expected receive buffer from the peer's data. Frees the data. */
static void msg_buffers(msg_t *x, unsigned char *mine, unsigned char *theirs)
{
    buf_alloc(&x->sbuf, x->myst.span);
    memcpy(x->sbuf.host, mine, (size_t)x->sbuf.bytes);
    buf_push(&x->sbuf);
    buf_alloc(&x->rbuf, x->rt.span);
    memset(x->rbuf.host, POISON, (size_t)x->rbuf.bytes);
    buf_push(&x->rbuf);
    x->exp = malloc((size_t)x->rbuf.bytes);
    oracle(theirs, &x->st, &x->rt, x->exp, x->rbuf.bytes);
    free(mine);
    free(theirs);
}

static int test_random(void)
{
    int peer = 1 - rank;
    int c = 0, batch_no = 0;
    int64_t total_bytes = 0;
    while (c < opt_cases) {
        rng_t br = {opt_seed * 7919ull + (uint64_t)batch_no++};
        static const int sizes[] = {1, 2, 4, 16};
        int B = sizes[rint_(&br, 0, 3)];
        if (B > opt_cases - c) B = opt_cases - c;
        msg_t *m = calloc((size_t)B, sizeof *m);
        for (int i = 0; i < B; i++) {
            unsigned char *mine, *theirs;
            ttype_t dummy_rt;
            gdte_msg_params_t dummy;
            /* What I send. */
            gen_case(opt_seed, c + i, rank, &m[i].myst, &dummy_rt, &mine, &m[i].sp, &dummy);
            gdte_type_free(&dummy_rt.type);
            /* What I receive: the peer's message, generated the same way here. */
            gen_case(opt_seed, c + i, peer, &m[i].st, &m[i].rt, &theirs, &dummy, &m[i].rp);
            msg_buffers(&m[i], mine, theirs);
        }
        int order[16];
        shuffle(&br, order, B);
        for (int i = 0; i < B; i++) {
            msg_t *x = &m[order[i]];
            OK(gdte_msg_irecv(comm, x->rbuf.user, x->rt.count, x->rt.type, peer, (uint64_t)(c + order[i]), &x->rp,
                              &x->rreq));
        }
        shuffle(&br, order, B);
        for (int i = 0; i < B; i++) {
            msg_t *x = &m[order[i]];
            OK(gdte_msg_isend(comm, x->sbuf.user, x->myst.count, x->myst.type, peer, (uint64_t)(c + order[i]),
                              &x->sp, &x->sreq));
        }
        /* Complete in yet another order, polling: requests finish out of order. */
        shuffle(&br, order, B);
        int left = 2 * B;
        while (left > 0) {
            for (int i = 0; i < B; i++) {
                msg_t *x = &m[order[i]];
                gdte_msg_status_t s;
                if (!x->rdone) {
                    gdte_status_t st = gdte_msg_test(&x->rreq, &s);
                    if (st != GDTE_INPROGRESS) {
                        x->rdone = 1;
                        left--;
                        CHECK(st == GDTE_OK, "case %d recv: %s (send %s, recv %s)", c + order[i],
                              gdte_status_name(st), x->st.desc, x->rt.desc);
                        CHECK(s.bytes == x->st.size, "case %d: %lld bytes, expected %lld", c + order[i],
                              (long long)s.bytes, (long long)x->st.size);
                        CHECK(s.peer == peer && s.tag == (uint64_t)(c + order[i]), "case %d: status peer/tag",
                              c + order[i]);
                        check_protocol(&s, x->st.size, "recv");
                        buf_pull(&x->rbuf);
                        int64_t d = first_diff(x->rbuf.host, x->exp, x->rbuf.bytes);
                        CHECK(d < 0, "case %d: byte %lld of %lld differs (got %02x want %02x); send %s frag %lld depth %d; "
                                     "recv %s frag %lld depth %d",
                              c + order[i], (long long)d, (long long)x->rbuf.bytes, d >= 0 ? x->rbuf.host[d] : 0,
                              d >= 0 ? x->exp[d] : 0, x->st.desc, (long long)x->rp.frag_size, x->rp.depth,
                              x->rt.desc, (long long)x->rp.frag_size, x->rp.depth);
                        total_bytes += x->st.size;
                    }
                }
                if (!x->sdone) {
                    gdte_status_t st = gdte_msg_test(&x->sreq, &s);
                    if (st != GDTE_INPROGRESS) {
                        x->sdone = 1;
                        left--;
                        CHECK(st == GDTE_OK, "case %d send: %s", c + order[i], gdte_status_name(st));
                        check_protocol(&s, x->myst.size, "send");
                    }
                }
            }
        }
        for (int i = 0; i < B; i++) {
            gdte_type_free(&m[i].st.type);
            gdte_type_free(&m[i].rt.type);
            gdte_type_free(&m[i].myst.type);
            buf_free(&m[i].sbuf);
            buf_free(&m[i].rbuf);
            free(m[i].exp);
        }
        free(m);
        c += B;
    }
    if (rank == 0) printf("random: %d messages each way, %lld bytes received by rank 0\n", opt_cases, (long long)total_bytes);
    return 0;
}

/* ---- semantics ---------------------------------------------------------------------------- */
static gdte_msg_params_t proto_params(void)
{
    gdte_msg_params_t p = {.field_mask = opt_knobs ? 0 : GDTE_MSG_FIELD_PROTOCOL, .protocol = opt_protocol};
    return p;
}

static gdte_type_h contig_of(gdte_basic_t b, int64_t n)
{
    gdte_type_h t;
    OK(gdte_type_create_contiguous(n, gdte_type_predefined(b), &t));
    OK(gdte_type_commit(t));
    return t;
}

static void exchange_barrier(void) { tp_barrier(); }

/* Sender rank 1, receiver rank 0: n doubles sent, received as rcount of rbasic, in elements of
 * `rblock` (0: one element of rcount). */
static void one_way(int64_t n, gdte_basic_t rbasic, int64_t rcount, int64_t rblock, gdte_status_t want_recv,
                    gdte_status_t want_send, uint64_t flags, const char *what)
{
    rng_t r = {opt_seed + (uint64_t)n * 31 + (uint64_t)rcount};
    int64_t sbytes = 8 * n, rbytes = 8 * rcount; /* every basic used here is 8 bytes */
    gdte_msg_params_t p = proto_params();
    p.field_mask |= GDTE_MSG_FIELD_FLAGS;
    p.flags = flags;
    unsigned char *data = malloc((size_t)sbytes + 1);
    fill(&r, data, sbytes);
    if (rank == 1) {
        gdte_type_h t = contig_of(GDTE_BASIC_DOUBLE, n);
        buf_t b;
        buf_alloc(&b, sbytes);
        memcpy(b.host, data, (size_t)sbytes);
        buf_push(&b);
        gdte_msg_req_h q;
        gdte_msg_status_t s;
        OK(gdte_msg_isend(comm, b.user, 1, t, 0, 42, &p, &q));
        gdte_status_t st = gdte_msg_wait(&q, &s);
        CHECK(st == want_send, "%s: send completed with %s, expected %s", what, gdte_status_name(st),
              gdte_status_name(want_send));
        buf_free(&b);
        gdte_type_free(&t);
    } else {
        if (rblock <= 0) rblock = rcount > 0 ? rcount : 1;
        gdte_type_h t = contig_of(rbasic, rblock);
        buf_t b;
        buf_alloc(&b, rbytes);
        memset(b.host, POISON, (size_t)b.bytes);
        buf_push(&b);
        gdte_msg_req_h q;
        gdte_msg_status_t s;
        OK(gdte_msg_irecv(comm, b.user, rcount / rblock, t, 1, 42, &p, &q));
        gdte_status_t st = gdte_msg_wait(&q, &s);
        CHECK(st == want_recv, "%s: receive completed with %s, expected %s", what, gdte_status_name(st),
              gdte_status_name(want_recv));
        buf_pull(&b);
        unsigned char *exp = malloc((size_t)b.bytes);
        memset(exp, POISON, (size_t)b.bytes);
        int64_t deliver = want_recv == GDTE_ERR_MISMATCH ? 0 : (sbytes < rbytes ? sbytes : rbytes);
        memcpy(exp, data, (size_t)deliver);
        if (want_recv != GDTE_ERR_MISMATCH)
            CHECK(s.bytes == deliver, "%s: status bytes %lld, expected %lld", what, (long long)s.bytes,
                  (long long)deliver);
        int64_t d = first_diff(b.host, exp, b.bytes);
        CHECK(d < 0, "%s: byte %lld of the receive buffer (%lld + %d guard) is wrong", what, (long long)d,
              (long long)rbytes, GUARD);
        free(exp);
        buf_free(&b);
        gdte_type_free(&t);
    }
    free(data);
    exchange_barrier();
}

static int test_semantics(void)
{
    int peer = 1 - rank;
    /* A handshake-only message (eager in auto) cannot report a receiver's verdict to its
     * sender: it completed first. */
    int eager_small = opt_protocol == GDTE_PROTOCOL_AUTO;

    /* Sizes that fit, truncate, fall short; a signature mismatch; the same sizes large. */
    for (int big = 0; big < 2; big++) {
        int64_t n = big ? 100000 : 300;
        gdte_status_t mm_send = (eager_small && !big) ? GDTE_OK : GDTE_ERR_MISMATCH;
        const char *sz = big ? " (large)" : " (small)";
        char w[64];
#define W(x) (snprintf(w, sizeof w, "%s%s", x, sz), w)
        one_way(n, GDTE_BASIC_DOUBLE, n, 1, GDTE_OK, GDTE_OK, 0, W("exact"));
        one_way(n, GDTE_BASIC_DOUBLE, n, 0, GDTE_OK, GDTE_OK, 0, W("exact, one element"));
        one_way(n, GDTE_BASIC_DOUBLE, n / 3, 1, GDTE_ERR_TRUNCATE, GDTE_OK, 0, W("truncate"));
        one_way(n, GDTE_BASIC_DOUBLE, n / 3, 0, GDTE_ERR_TRUNCATE, GDTE_OK, 0, W("truncate, one element"));
        one_way(n / 2, GDTE_BASIC_DOUBLE, n, 1, GDTE_OK, GDTE_OK, 0, W("shorter"));
        one_way(n / 2, GDTE_BASIC_DOUBLE, n, 0, GDTE_OK, GDTE_OK, 0, W("shorter, inside an element"));
        one_way(n, GDTE_BASIC_INT64, n, 1, GDTE_ERR_MISMATCH, mm_send, 0, W("mismatch"));
        one_way(n, GDTE_BASIC_INT64, n, 0, GDTE_ERR_MISMATCH, mm_send, 0, W("mismatch, one element"));
        one_way(n / 2, GDTE_BASIC_INT64, n, 1, GDTE_ERR_MISMATCH, mm_send, 0, W("shorter mismatch"));
        one_way(n, GDTE_BASIC_INT64, n, 1, GDTE_OK, GDTE_OK, GDTE_MSG_FLAG_ANY_SIGNATURE, W("any signature"));
        one_way(n, GDTE_BASIC_DOUBLE, 0, 1, GDTE_ERR_TRUNCATE, GDTE_OK, 0, W("into nothing"));
#undef W
    }
    one_way(0, GDTE_BASIC_DOUBLE, 0, 1, GDTE_OK, GDTE_OK, 0, "zero bytes into zero");
    one_way(0, GDTE_BASIC_DOUBLE, 10, 1, GDTE_OK, GDTE_OK, 0, "zero bytes into ten elements");

    /* Non-overtaking: five messages with one tag arrive in send order; sizes differ so a
     * wrong match shows. */
    {
        gdte_msg_params_t p = proto_params();
        int64_t lens[5] = {10, 20000, 0, 7, 50000};
        gdte_msg_req_h sq[5], rq[5];
        double *sb[5], *rb[5];
        gdte_type_h t[5];
        for (int i = 0; i < 5; i++) {
            t[i] = contig_of(GDTE_BASIC_DOUBLE, lens[i]);
            sb[i] = malloc(8 * (size_t)lens[i] + 8);
            rb[i] = malloc(8 * (size_t)lens[i] + 8);
            for (int64_t j = 0; j < lens[i]; j++) sb[i][j] = 1000.0 * i + (double)j + 0.5 * rank;
        }
        double *dev_s[5], *dev_r[5];
        for (int i = 0; i < 5; i++) {
            dev_s[i] = dmalloc(8 * (size_t)lens[i] + 8);
            dev_r[i] = dmalloc(8 * (size_t)lens[i] + 8);
            dput(dev_s[i], sb[i], 8 * (size_t)lens[i]);
        }
        for (int i = 0; i < 5; i++) OK(gdte_msg_irecv(comm, dev_r[i], lens[i], dbl(), peer, 7, &p, &rq[i]));
        for (int i = 0; i < 5; i++) OK(gdte_msg_isend(comm, dev_s[i], lens[i], dbl(), peer, 7, &p, &sq[i]));
        for (int i = 4; i >= 0; i--) {
            gdte_msg_status_t s;
            CHECK(gdte_msg_wait(&rq[i], &s) == GDTE_OK && s.bytes == 8 * lens[i], "ordered message %d", i);
            CHECK(gdte_msg_wait(&sq[i], &s) == GDTE_OK, "ordered send %d", i);
            dget(rb[i], dev_r[i], 8 * (size_t)lens[i]);
            for (int64_t j = 0; j < lens[i]; j++)
                if (rb[i][j] != 1000.0 * i + (double)j + 0.5 * peer) {
                    CHECK(0, "ordered message %d element %lld", i, (long long)j);
                    break;
                }
        }
        for (int i = 0; i < 5; i++) {
            dfree(dev_s[i]);
            dfree(dev_r[i]);
            free(sb[i]);
            free(rb[i]);
            gdte_type_free(&t[i]);
        }
        exchange_barrier();
    }

    /* Wildcards, probe and cancel. */
    {
        double v[3] = {1, 2, 3}, w[3] = {0};
        void *vu = dmalloc(sizeof v), *wu = dmalloc(sizeof w);
        dput(vu, v, sizeof v);
        gdte_msg_params_t p = proto_params();
        gdte_msg_req_h q;
        gdte_msg_status_t s;
        if (rank == 1) {
            OK(gdte_msg_isend(comm, vu, 3, dbl(), 0, 0x500000077ull, &p, &q));
            CHECK(gdte_msg_wait(&q, &s) == GDTE_OK, "probe send");
            OK(gdte_msg_isend(comm, vu, 3, dbl(), 0, 0x12345ull, &p, &q));
            CHECK(gdte_msg_wait(&q, &s) == GDTE_OK, "wildcard send");
        } else {
            int flag = 0;
            double t0 = tp_time();
            while (!flag && tp_time() - t0 < 30) OK(gdte_msg_iprobe(comm, GDTE_ANY_PEER, 0x77, 0xffffffffull, &flag, &s));
            CHECK(flag && s.peer == 1 && s.tag == 0x500000077ull && s.bytes == 24, "probe found %d peer %d tag %llx",
                  flag, s.peer, (unsigned long long)s.tag);
            gdte_msg_params_t pm = p;
            pm.field_mask |= GDTE_MSG_FIELD_TAG_MASK;
            pm.tag_mask = 0xffffffffull;
            OK(gdte_msg_irecv(comm, wu, 3, dbl(), GDTE_ANY_PEER, 0x77, &pm, &q));
            CHECK(gdte_msg_wait(&q, &s) == GDTE_OK && s.tag == 0x500000077ull && s.peer == 1, "masked receive");
            pm.tag_mask = 0;
            OK(gdte_msg_irecv(comm, wu, 3, dbl(), GDTE_ANY_PEER, 0, &pm, &q));
            CHECK(gdte_msg_wait(&q, &s) == GDTE_OK && s.tag == 0x12345ull && s.peer == 1, "any-tag receive");
            dget(w, wu, sizeof w);
            CHECK(w[0] == 1 && w[1] == 2 && w[2] == 3, "wildcard data");
            /* A receive nobody sends to can be canceled; a matched one cannot. */
            OK(gdte_msg_irecv(comm, wu, 3, dbl(), 1, 999, &p, &q));
            CHECK(gdte_msg_cancel(q) == GDTE_OK, "cancel");
            CHECK(gdte_msg_wait(&q, &s) == GDTE_ERR_CANCELED && q == NULL, "canceled receive completes");
        }
        dfree(vu);
        dfree(wu);
        exchange_barrier();
    }

    /* A process sends to itself (a vector received as contiguous), small and large. */
    for (int big = 0; big < 2; big++) {
        int64_t n = big ? 60000 : 40;
        gdte_type_h vt, ct;
        OK(gdte_type_create_vector(n, 1, 3, dbl(), &vt));
        OK(gdte_type_commit(vt));
        ct = contig_of(GDTE_BASIC_DOUBLE, n);
        size_t sspan = (size_t)(3 * (n - 1) + 1) * 8;
        double *h = malloc(sspan), *r = malloc((size_t)n * 8);
        for (int64_t i = 0; i < 3 * (n - 1) + 1; i++) h[i] = (double)i + 0.25 * rank;
        void *du = dmalloc(sspan), *dr = dmalloc((size_t)n * 8);
        dput(du, h, sspan);
        gdte_msg_params_t p = proto_params();
        gdte_msg_req_h sq, rq;
        gdte_msg_status_t s;
        OK(gdte_msg_irecv(comm, dr, 1, ct, rank, 99, &p, &rq));
        OK(gdte_msg_isend(comm, du, 1, vt, rank, 99, &p, &sq));
        CHECK(gdte_msg_wait(&sq, &s) == GDTE_OK, "send to self (%lld)", (long long)n);
        CHECK(gdte_msg_wait(&rq, &s) == GDTE_OK && s.peer == rank && s.bytes == 8 * n, "receive from self (%lld)",
              (long long)n);
        dget(r, dr, (size_t)n * 8);
        for (int64_t i = 0; i < n; i++)
            if (r[i] != h[3 * i]) {
                CHECK(0, "self message (%lld) element %lld", (long long)n, (long long)i);
                break;
            }
        dfree(du);
        dfree(dr);
        free(h);
        free(r);
        gdte_type_free(&vt);
        gdte_type_free(&ct);
    }
    exchange_barrier();

    /* Bad arguments fail at once and make no request. */
    {
        gdte_msg_req_h q = NULL;
        gdte_type_h t = contig_of(GDTE_BASIC_DOUBLE, 4);
        gdte_type_h unc;
        OK(gdte_type_create_contiguous(4, dbl(), &unc));
        double x[4];
        CHECK(gdte_msg_isend(comm, x, 1, t, 2, 0, NULL, &q) == GDTE_ERR_INVALID_ARG && !q, "peer out of range");
        CHECK(gdte_msg_isend(comm, x, 1, t, GDTE_ANY_PEER, 0, NULL, &q) == GDTE_ERR_INVALID_ARG, "send to any peer");
        CHECK(gdte_msg_isend(comm, NULL, 1, t, peer, 0, NULL, &q) == GDTE_ERR_NULL_BUFFER, "NULL buffer");
        CHECK(gdte_msg_isend(comm, x, -1, t, peer, 0, NULL, &q) == GDTE_ERR_COUNT, "negative count");
        CHECK(gdte_msg_irecv(comm, x, 1, unc, peer, 0, NULL, &q) == GDTE_ERR_NOT_COMMITTED, "uncommitted type");
        gdte_msg_params_t bad = {.field_mask = GDTE_MSG_FIELD_DEPTH, .depth = 0};
        CHECK(gdte_msg_irecv(comm, x, 1, t, peer, 0, &bad, &q) == GDTE_ERR_INVALID_ARG, "depth 0");
        gdte_type_free(&t);
        gdte_type_free(&unc);
        exchange_barrier();
    }
    if (rank == 0) printf("semantics: done\n");
    return 0;
}

/* ---- a peer dies in the middle of a message ------------------------------------------------ */
static int test_kill(int victim_is_receiver)
{
    /* Both ranks leave MPI first: mpirun would otherwise kill the survivor with the victim. */
    int victim = 1;
    int sender = victim_is_receiver ? 0 : 1;
    int64_t n = 4 << 20; /* 32 MiB of doubles in 8 KiB fragments, one in flight at a time */
    gdte_type_h t;
    OK(gdte_type_create_vector(n / 2, 1, 2, dbl(), &t));
    OK(gdte_type_commit(t));
    buf_t b;
    buf_alloc(&b, 16 * n);
    memset(b.host, 1, (size_t)b.bytes);
    buf_push(&b);
    gdte_msg_params_t p = {.field_mask = GDTE_MSG_FIELD_PROTOCOL | GDTE_MSG_FIELD_FRAG_SIZE | GDTE_MSG_FIELD_DEPTH,
                           .protocol = opt_protocol == GDTE_PROTOCOL_AUTO ? GDTE_PROTOCOL_COPYINOUT : opt_protocol,
                           .frag_size = 8192,
                           .depth = 1};
    tp_leave();
    gdte_msg_req_h q;
    if (rank == sender) OK(gdte_msg_isend(comm, b.user, 2, t, 1 - rank, 5, &p, &q));
    else OK(gdte_msg_irecv(comm, b.user, 2, t, 1 - rank, 5, &p, &q));
    if (rank == victim) {
        gdte_proto_ctx_attr_t a = {.field_mask = GDTE_PROTO_CTX_ATTR_FIELD_STATS};
        for (;;) {
            gdte_comm_progress(comm);
            gdte_proto_ctx_query(comm, &a);
            if (a.stats.frags_sent + a.stats.frags_recvd >= 20) break;
        }
        fprintf(stderr, "[rank %d] exiting in the middle of the message (%lld fragments moved)\n", rank,
                (long long)(a.stats.frags_sent + a.stats.frags_recvd));
        _exit(0);
    }
    double t0 = tp_time();
    gdte_msg_status_t s;
    gdte_status_t st = gdte_msg_wait(&q, &s);
    double dt = tp_time() - t0;
    printf("survivor: request failed with %s after %.1f s\n", gdte_status_name(st), dt);
    CHECK(st == GDTE_ERR_PEER_FAILED || st == GDTE_ERR_TRANSPORT || st == GDTE_ERR_TIMEOUT,
          "the survivor's request ended with %s", gdte_status_name(st));
    /* The failed peer is refused at once from now on. */
    gdte_msg_req_h q2 = NULL;
    gdte_status_t st2 = gdte_msg_isend(comm, b.user, 1, t, 1 - rank, 6, &p, &q2);
    CHECK(st2 == GDTE_ERR_PEER_FAILED || st2 == GDTE_ERR_TRANSPORT, "send to a failed peer: %s", gdte_status_name(st2));
    OK(gdte_comm_destroy(comm));
    comm = NULL;
    buf_free(&b);
    gdte_type_free(&t);
    if (!nfail) printf("kill: survivor ok\n");
    return nfail;
}

/* ---- a receive posted for a peer that is then killed ------------------------------------------ */
/* Fork mode only: rank 1 is rank 0's child and dies of SIGKILL before sending anything. A
 * receive posted for it is not a stalled message (nothing was ever announced), so GDTE_TIMEOUT
 * (set high by the test) does not end it; UCX's shared memory reports nothing either. The
 * request must still fail with GDTE_ERR_PEER_FAILED, soon. */
static int test_kill_posted(void)
{
    gdte_type_h t;
    OK(gdte_type_create_vector(1024, 1, 2, dbl(), &t));
    OK(gdte_type_commit(t));
    buf_t b;
    buf_alloc(&b, 16 * 1024);
    tp_leave();
    if (rank == 1) {
        fprintf(stderr, "[rank 1] killing myself before sending\n");
        raise(SIGKILL);
    }
    gdte_msg_req_h q;
    OK(gdte_msg_irecv(comm, b.user, 1, t, 1, 9, NULL, &q));
    double t0 = tp_time();
    gdte_msg_status_t s;
    gdte_status_t st = gdte_msg_wait(&q, &s);
    double dt = tp_time() - t0;
    printf("kill-posted: the posted receive ended with %s after %.1f s\n", gdte_status_name(st), dt);
    CHECK(st == GDTE_ERR_PEER_FAILED, "the posted receive ended with %s", gdte_status_name(st));
    CHECK(dt < 30, "it took %.1f s", dt);
    if (tp.child > 0 && waitpid(tp.child, NULL, 0) == tp.child) tp.child = 0; /* reaped here: killed on purpose */
    OK(gdte_comm_destroy(comm));
    comm = NULL;
    buf_free(&b);
    gdte_type_free(&t);
    return nfail;
}

/* ---- an injected UCX error (GDTE_FAULT_UCX_ERROR) fails the message, not the process -------- */
static int test_inject_ucx(void)
{
    /* The sender's K-th fragment fails as a UCX endpoint error would: its request ends with
     * GDTE_ERR_TRANSPORT, the receiver's fails too (peer failure or GDTE_TIMEOUT, never a
     * hang), and a new communicator between the same processes works afterwards. */
    int64_t n = 1 << 20;
    gdte_type_h t;
    OK(gdte_type_create_vector(n / 2, 1, 2, dbl(), &t));
    OK(gdte_type_commit(t));
    double *a = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) a[i] = (double)i;
    gdte_msg_params_t p = {.field_mask = GDTE_MSG_FIELD_PROTOCOL | GDTE_MSG_FIELD_FRAG_SIZE | GDTE_MSG_FIELD_DEPTH,
                           .protocol = GDTE_PROTOCOL_COPYINOUT,
                           .frag_size = 8192,
                           .depth = 2};
    gdte_msg_req_h q;
    if (rank == 0) OK(gdte_msg_isend(comm, a, 1, t, 1, 9, &p, &q));
    else OK(gdte_msg_irecv(comm, a, 1, t, 0, 9, &p, &q));
    double t0 = tp_time();
    gdte_status_t st = gdte_msg_wait(&q, NULL);
    printf("[rank %d] request ended with %s after %.1f s\n", rank, gdte_status_name(st), tp_time() - t0);
    if (rank == 0) CHECK(st == GDTE_ERR_TRANSPORT, "sender: %s, expected GDTE_ERR_TRANSPORT", gdte_status_name(st));
    else
        CHECK(st == GDTE_ERR_PEER_FAILED || st == GDTE_ERR_TRANSPORT || st == GDTE_ERR_TIMEOUT,
              "receiver: %s, expected a failure", gdte_status_name(st));
    /* The library keeps working: a new communicator carries a message intact. */
    OK(gdte_comm_destroy(comm));
    comm = NULL;
    gdte_comm_params_t cp = {.field_mask = GDTE_COMM_FIELD_RANK | GDTE_COMM_FIELD_SIZE | GDTE_COMM_FIELD_ALLGATHER,
                             .rank = rank,
                             .size = 2,
                             .allgather = tp_allgather};
    OK(gdte_comm_create(&cp, &comm));
    if (rank == 1)
        for (int64_t i = 0; i < n; i++) a[i] = -1.0;
    if (rank == 0) OK(gdte_msg_isend(comm, a, 1, t, 1, 10, &p, &q));
    else OK(gdte_msg_irecv(comm, a, 1, t, 0, 10, &p, &q));
    st = gdte_msg_wait(&q, NULL);
    CHECK(st == GDTE_OK, "message after the injected error: %s", gdte_status_name(st));
    if (rank == 1)
        for (int64_t i = 0; i < n; i++)
            if (a[i] != (i % 2 ? -1.0 : (double)i)) {
                CHECK(0, "byte at element %lld wrong after the injected error", (long long)i);
                break;
            }
    free(a);
    gdte_type_free(&t);
    if (!nfail) printf("inject-ucx: failure reported on both sides, next communicator ok\n");
    return nfail;
}

/* ---- a process that leaves with a send in flight revokes its handshake ---------------------- */
static int test_revoke(void)
{
    int64_t n = 100000; /* far above the eager size: the send waits for a CTS that never comes */
    gdte_type_h t = contig_of(GDTE_BASIC_DOUBLE, n);
    buf_t b;
    buf_alloc(&b, 8 * n);
    memset(b.host, 3, (size_t)b.bytes);
    buf_push(&b);
    gdte_msg_params_t p = proto_params();
    gdte_msg_status_t s;
    int flag = 0;
    double token = 0;
    gdte_msg_req_h tq;
    if (rank == 1) {
        gdte_msg_req_h q;
        OK(gdte_msg_isend(comm, b.user, 1, t, 0, 555, &p, &q));
        /* Waiting in gdte (not in a barrier) progresses the handshake out. */
        OK(gdte_msg_irecv(comm, &token, 1, dbl(), 0, 556, NULL, &tq));
        OK(gdte_msg_wait(&tq, NULL)); /* rank 0 has seen the handshake */
        OK(gdte_comm_destroy(comm));
        comm = NULL;
        gdte_status_t st = gdte_msg_test(&q, &s);
        CHECK(st == GDTE_ERR_CANCELED && q == NULL, "send at destruction: %s", gdte_status_name(st));
        tp_barrier();
    } else {
        double t0 = tp_time();
        while (!flag && tp_time() - t0 < 30) OK(gdte_msg_iprobe(comm, 1, 555, ~0ull, &flag, &s));
        CHECK(flag, "the handshake never arrived");
        OK(gdte_msg_isend(comm, &token, 1, dbl(), 1, 556, NULL, &tq));
        OK(gdte_msg_wait(&tq, NULL));
        tp_barrier(); /* rank 1 is gone */
        t0 = tp_time();
        while (flag && tp_time() - t0 < 5) OK(gdte_msg_iprobe(comm, 1, 555, ~0ull, &flag, &s));
        CHECK(!flag, "a revoked message is still offered");
    }
    buf_free(&b);
    gdte_type_free(&t);
    if (rank == 0 && !nfail) printf("revoke: ok\n");
    return 0;
}

/* ---- burst: the RDMA ring with the local copy, messages back to back -------------------------- */
/* Both ranks send each other `msgs` messages at once, non-contiguous on both sides (so they go
 * through the sender's fragment ring), each of many fragments, for every depth 1..8. With
 * GDTE_RDMA_LOCAL_COPY=1 (two GPUs, or the emulation) the receiver returns a ring slot as soon
 * as its copy is done, while the slot's unpack still runs: the sender then announces the next
 * fragment before the receiver has a free slot for it. With the emulation's delayed events
 * (--emu-delay) that interleaving happens here as it does on a GPU. */
static int test_burst(void)
{
    int peer = 1 - rank;
    const int msgs = 4;
    for (int depth = 1; depth <= 8; depth++) {
        msg_t m[4];
        memset(m, 0, sizeof m);
        for (int i = 0; i < msgs; i++) {
            /* Send: columns of 61 doubles, 64 apart; receive: columns of 41, 45 apart. The
             * same 61*41*k doubles, about 40 fragments of 4 KiB to 12 KiB. */
            int64_t n = 61 * 41 * (int64_t)(8 + i);
            gdte_type_h sv, sv2, rv;
            OK(gdte_type_create_vector(n / 61, 61, 64, dbl(), &sv));
            OK(gdte_type_create_vector(n / 61, 61, 64, dbl(), &sv2)); /* the peer's, for the oracle */
            OK(gdte_type_create_vector(n / 41, 41, 45, dbl(), &rv));
            m[i].myst.type = sv;
            m[i].st.type = sv2;
            m[i].rt.type = rv;
            ttype_t *tts[3] = {&m[i].myst, &m[i].st, &m[i].rt};
            for (int j = 0; j < 3; j++) {
                gdte_type_info_t ti;
                OK(gdte_type_commit(tts[j]->type));
                OK(gdte_type_get_info(tts[j]->type, &ti));
                tts[j]->count = 1;
                tts[j]->span = ti.true_lb + ti.true_extent;
                OK(gdte_type_pack_size(1, tts[j]->type, &tts[j]->size));
                snprintf(tts[j]->desc, sizeof tts[j]->desc, "%s", j == 2 ? "vector(41 of 45)" : "vector(61 of 64)");
            }
            unsigned char *mine = malloc((size_t)m[i].myst.span + GUARD), *theirs = malloc((size_t)m[i].st.span + GUARD);
            rng_t r1 = {opt_seed * 31ull + (uint64_t)(depth * 16 + i) * 2 + (uint64_t)rank};
            rng_t r2 = {opt_seed * 31ull + (uint64_t)(depth * 16 + i) * 2 + (uint64_t)peer};
            fill(&r1, mine, m[i].myst.span + GUARD);
            fill(&r2, theirs, m[i].st.span + GUARD);
            msg_buffers(&m[i], mine, theirs);
            gdte_msg_params_t p = {.field_mask = GDTE_MSG_FIELD_PROTOCOL | GDTE_MSG_FIELD_DEPTH |
                                                 GDTE_MSG_FIELD_FRAG_SIZE,
                                   .protocol = opt_protocol,
                                   .depth = depth,
                                   .frag_size = 4096 << (i % 2)};
            m[i].sp = m[i].rp = p;
        }
        for (int i = 0; i < msgs; i++)
            OK(gdte_msg_irecv(comm, m[i].rbuf.user, 1, m[i].rt.type, peer, (uint64_t)(1000 + i), &m[i].rp, &m[i].rreq));
        for (int i = 0; i < msgs; i++)
            OK(gdte_msg_isend(comm, m[i].sbuf.user, 1, m[i].myst.type, peer, (uint64_t)(1000 + i), &m[i].sp,
                              &m[i].sreq));
        for (int i = 0; i < msgs; i++) {
            gdte_msg_status_t s;
            gdte_status_t st = gdte_msg_wait(&m[i].rreq, &s);
            CHECK(st == GDTE_OK, "depth %d message %d recv: %s", depth, i, gdte_status_name(st));
            CHECK(s.bytes == m[i].st.size, "depth %d message %d: %lld bytes, expected %lld", depth, i,
                  (long long)s.bytes, (long long)m[i].st.size);
            check_protocol(&s, m[i].st.size, "recv");
            buf_pull(&m[i].rbuf);
            int64_t d = first_diff(m[i].rbuf.host, m[i].exp, m[i].rbuf.bytes);
            CHECK(d < 0, "depth %d message %d: byte %lld differs", depth, i, (long long)d);
            st = gdte_msg_wait(&m[i].sreq, &s);
            CHECK(st == GDTE_OK, "depth %d message %d send: %s", depth, i, gdte_status_name(st));
            check_protocol(&s, m[i].myst.size, "send");
        }
        for (int i = 0; i < msgs; i++) {
            gdte_type_free(&m[i].st.type);
            gdte_type_free(&m[i].rt.type);
            gdte_type_free(&m[i].myst.type);
            buf_free(&m[i].sbuf);
            buf_free(&m[i].rbuf);
            free(m[i].exp);
        }
    }
    if (rank == 0) printf("burst: %d messages each way at each depth 1..8\n", msgs);
    return 0;
}

/* ---- ipcshare: several buffers of one allocation, mapped once ----------------------------------- */
/* CUDA maps a peer's allocation into a process once (a second open fails with
 * cudaErrorAlreadyMapped, which the emulation reproduces): messages whose buffers lie in one
 * allocation of the peer (slices of one slab) must share one mapping. Rank 1 sends contiguous
 * slices of one allocation (rank 0 reads them straight from it), then receives into contiguous
 * slices of one allocation (rank 0 writes straight into them); each side must have opened the
 * other's slab once, whatever the order. */
static int test_ipcshare(void)
{
    const int nsl = 6;
    const int64_t per = 20000; /* doubles per slice: far above the eager size */
    int peer = 1 - rank;
    size_t bytes = (size_t)(nsl * per + 16) * 8;
    unsigned char *slab = dmalloc(bytes), *host = malloc(bytes), *back = malloc(bytes);
    gdte_type_h c = contig_of(GDTE_BASIC_DOUBLE, per), v;
    OK(gdte_type_create_vector(per / 100, 100, 103, dbl(), &v));
    OK(gdte_type_commit(v));
    gdte_type_info_t vi;
    OK(gdte_type_get_info(v, &vi));
    unsigned char *other = dmalloc((size_t)(vi.true_lb + vi.true_extent) * nsl);
    gdte_proto_ctx_attr_t a0 = {.field_mask = GDTE_PROTO_CTX_ATTR_FIELD_STATS}, a1 = a0;
    gdte_proto_ctx_query(comm, &a0);
    for (int round = 0; round < 2; round++) {
        int sender = round == 0 ? 1 : 0; /* round 0: rank 1's slab is read; round 1: written */
        gdte_msg_req_h q[8];
        gdte_msg_params_t p = proto_params();
        for (size_t i = 0; i < bytes; i++) host[i] = (unsigned char)(i * 7 + (size_t)round);
        if (rank == 1) {
            dput(slab, host, bytes);
            for (int i = 0; i < nsl; i++) {
                /* Slices at odd offsets inside the slab: every one is a different pointer. */
                unsigned char *sl = slab + 8 * ((int64_t)i * per + i);
                if (sender == 1) OK(gdte_msg_isend(comm, sl, 1, c, peer, (uint64_t)(2000 + i), &p, &q[i]));
                else OK(gdte_msg_irecv(comm, sl, 1, c, peer, (uint64_t)(2000 + i), &p, &q[i]));
            }
        } else {
            size_t ob = (size_t)(vi.true_lb + vi.true_extent) * nsl;
            unsigned char *oh = malloc(ob);
            for (size_t i = 0; i < ob; i++) oh[i] = (unsigned char)(i * 13 + (size_t)round);
            dput(other, oh, ob);
            free(oh);
            for (int i = 0; i < nsl; i++) {
                unsigned char *sl = other + (vi.true_lb + vi.true_extent) * i;
                if (sender == 1) OK(gdte_msg_irecv(comm, sl, 1, v, peer, (uint64_t)(2000 + i), &p, &q[i]));
                else OK(gdte_msg_isend(comm, sl, 1, v, peer, (uint64_t)(2000 + i), &p, &q[i]));
            }
        }
        for (int i = 0; i < nsl; i++) {
            gdte_msg_status_t s;
            gdte_status_t st = gdte_msg_wait(&q[i], &s);
            CHECK(st == GDTE_OK, "round %d slice %d: %s", round, i, gdte_status_name(st));
            check_protocol(&s, 8 * per, rank == sender ? "send" : "recv");
        }
        /* Check the contiguous side's slices: round 0 rank 0 unpacked them, round 1 rank 1 got them. */
        if (rank == 1 && sender == 0) {
            dget(back, slab, bytes);
            size_t ob = (size_t)(vi.true_lb + vi.true_extent) * nsl;
            unsigned char *oh = malloc(ob), *packed = malloc((size_t)per * 8);
            for (size_t i = 0; i < ob; i++) oh[i] = (unsigned char)(i * 13 + (size_t)round);
            for (int i = 0; i < nsl; i++) {
                int64_t got;
                gdte_pack_params_t hp = {.field_mask = GDTE_PACK_FIELD_FLAGS, .flags = GDTE_PACK_FLAG_HOST};
                OK(gdte_pack(oh + (vi.true_lb + vi.true_extent) * i, 1, v, packed, per * 8, &hp, &got));
                CHECK(!memcmp(back + 8 * ((int64_t)i * per + i), packed, (size_t)per * 8), "round %d slice %d: wrong bytes",
                      round, i);
            }
            free(oh);
            free(packed);
        }
        tp_barrier();
    }
    gdte_proto_ctx_query(comm, &a1);
    /* Rank 0 opened rank 1's slab (round 0) and its ring at most: never one mapping per slice. */
    if (opt_emu || opt_device) {
        int64_t opens = a1.stats.ipc_opens - a0.stats.ipc_opens;
        if (rank == 0 && opt_expect == GDTE_PROTOCOL_RDMA)
            CHECK(opens == 1, "rank 0 opened rank 1's slab %lld times for %d slices", (long long)opens, nsl);
        if (rank == 1 && opt_expect == GDTE_PROTOCOL_RDMA)
            CHECK(opens == 0, "rank 1 opened %lld mappings of rank 0's memory (expected none)", (long long)opens);
    }
    dfree(slab);
    dfree(other);
    free(host);
    free(back);
    gdte_type_free(&c);
    gdte_type_free(&v);
    if (rank == 0) printf("ipcshare: %d slices of one allocation each way\n", nsl);
    return 0;
}

/* ---- main ----------------------------------------------------------------------------------- */
static gdte_protocol_t parse_protocol(const char *s)
{
    if (!strcmp(s, "copyinout")) return GDTE_PROTOCOL_COPYINOUT;
    if (!strcmp(s, "rdma")) return GDTE_PROTOCOL_RDMA;
    if (!strcmp(s, "eager")) return GDTE_PROTOCOL_EAGER;
    return GDTE_PROTOCOL_AUTO;
}

int main(int argc, char **argv)
{
    tp_init(&argc, &argv);
    rank = tp.rank;
    int size = tp.size, opt_gpus = 1;
    if (size != 2 || argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: [mpirun -np 2] proto_test random|semantics|burst|ipcshare|revoke|inject-ucx|kill-receiver|kill-sender [opts]\n");
        return tp_finalize(2);
    }
    const char *mode = argv[1];
    /* Flags without a value first, taken out of argv. */
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--same-type")) {
            opt_same_type = 1;
            for (int j = i; j + 1 < argc; j++) argv[j] = argv[j + 1];
            argc--;
            i--;
        }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--protocol")) opt_protocol = parse_protocol(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect-protocol")) opt_expect = parse_protocol(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect-pulls"))
            opt_expect_pulls = !strcmp(argv[i + 1], "same") ? 2 : !strcmp(argv[i + 1], "yes");

        else if (!strcmp(argv[i], "--mem")) {
            opt_device = !strcmp(argv[i + 1], "device");
            opt_emu = !strcmp(argv[i + 1], "emu");
        }
        else if (!strcmp(argv[i], "--cases")) opt_cases = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) opt_seed = (unsigned)strtoul(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--gpus")) opt_gpus = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--params")) opt_knobs = !strcmp(argv[i + 1], "none");
        else if (!strcmp(argv[i], "--emu-delay")) opt_emu_delay = atoi(argv[i + 1]);
    }
    gdte_init_params_t ip = {.field_mask = 0};
    if (opt_device) {
        ip.field_mask = GDTE_INIT_FIELD_DEVICE;
        ip.device = opt_gpus > 1 ? rank : 0;
    }
    OK(gdte_init(&ip));
    if (opt_device && (!gdte_gpu_available() || (opt_gpus > 1 && gdte_gpu_device_count() < 2))) {
        if (rank == 0) printf("device mode needs %d GPU(s): skipped\n", opt_gpus);
        gdte_finalize();
        return tp_finalize(77);
    }
    if (opt_emu) {
        gdte_proto_test_emulate_ipc(1);
        gdte_proto_test_emulate_delay(opt_emu_delay);
    }
    gdte_comm_params_t cp = {.field_mask = GDTE_COMM_FIELD_RANK | GDTE_COMM_FIELD_SIZE | GDTE_COMM_FIELD_ALLGATHER,
                             .rank = rank,
                             .size = size,
                             .allgather = tp_allgather};
    OK(gdte_comm_create(&cp, &comm));
    /* What the messages travel on (shared memory or TCP): in the log, for the record. */
    if (rank == 0) gdte_proto_print_transports(comm, 1, stdout);
    unsigned seed = opt_seed;
    tp_bcast(&seed, sizeof seed);
    opt_seed = seed;
    if (!strcmp(mode, "kill-posted")) {
        if (tp.mpi) {
            printf("kill-posted runs in fork mode only: skipped\n");
            tp_finalize(0);
            return 77;
        }
        int f = test_kill_posted();
        gdte_finalize();
        return tp_finalize(f ? 1 : 0);
    }
    if (!strncmp(mode, "kill-", 5)) {
        int f = test_kill(!strcmp(mode, "kill-receiver"));
        gdte_finalize();
        return tp_finalize(f ? 1 : 0);
    }
    double t0 = tp_time();
    if (!strcmp(mode, "random")) test_random();
    else if (!strcmp(mode, "semantics")) test_semantics();
    else if (!strcmp(mode, "revoke")) test_revoke();
    else if (!strcmp(mode, "burst")) test_burst();
    else if (!strcmp(mode, "ipcshare")) test_ipcshare();
    else if (!strcmp(mode, "inject-ucx")) test_inject_ucx();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        nfail++;
    }
    tp_barrier();
    if (comm && opt_expect_pulls >= 0) {
        /* Which RDMA mode moved the messages: pulls are counted by the receiver. */
        gdte_proto_ctx_attr_t a = {.field_mask = GDTE_PROTO_CTX_ATTR_FIELD_STATS};
        gdte_proto_ctx_query(comm, &a);
        int pulls = tp_sum((int)a.stats.pulls), same = tp_sum((int)a.stats.pulls_same);
        if (rank == 0) {
            printf("RDMA pulls (all ranks): %d, of them between identical irregular types: %d\n", pulls, same);
            if (opt_expect_pulls == 2) CHECK(same > 0, "no pull between identical irregular types");
            if (opt_expect_pulls) CHECK(pulls > 0, "no message was pulled (GDTE_RDMA_PULL=%s)", getenv("GDTE_RDMA_PULL") ? getenv("GDTE_RDMA_PULL") : "default");
            else CHECK(pulls == 0, "%d messages were pulled with GDTE_RDMA_PULL=0", pulls);
        }
    }
    if (rank == 0 && comm) {
        gdte_proto_ctx_attr_t a = {.field_mask = GDTE_PROTO_CTX_ATTR_FIELD_STATS};
        gdte_proto_ctx_query(comm, &a);
        printf("%s (%s, %s%s): %.2f s; rank 0 completed eager %lld, copyinout %lld, rdma %lld; fragments sent %lld, "
               "received %lld; staging peak %lld bytes in %lld buffers; IPC opens %lld, rings %lld\n",
               mode, gdte_protocol_name(opt_protocol), opt_device ? "device" : "host", tp.mpi ? ", mpirun" : ", fork",
               tp_time() - t0, (long long)a.stats.msgs[GDTE_PROTOCOL_EAGER],
               (long long)a.stats.msgs[GDTE_PROTOCOL_COPYINOUT], (long long)a.stats.msgs[GDTE_PROTOCOL_RDMA],
               (long long)a.stats.frags_sent, (long long)a.stats.frags_recvd, (long long)a.stats.staging_peak,
               (long long)a.stats.staging_allocs, (long long)a.stats.ipc_opens, (long long)a.stats.ring_allocs);
        /* Staging never exceeds its bound (a plain number in the environment here). */
        const char *smax = getenv("GDTE_STAGING_MAX");
        if (smax && strspn(smax, "0123456789") == strlen(smax))
            CHECK(a.stats.staging_peak <= atoll(smax), "staging peak %lld over GDTE_STAGING_MAX=%s",
                  (long long)a.stats.staging_peak, smax);
        /* RDMA rings are exposed and opened once per peer, never per message. */
        if (opt_expect == GDTE_PROTOCOL_RDMA)
            CHECK(a.stats.ring_allocs <= 1 && a.stats.ring_opens <= 1, "%lld rings exposed to one peer, %lld opened",
                  (long long)a.stats.ring_allocs, (long long)a.stats.ring_opens);
    }
    tp_barrier();
    if (comm) OK(gdte_comm_destroy(comm));
    int all = tp_sum(nfail);
    gdte_finalize();
    if (rank == 0) printf("%s\n", all ? "FAILED" : "PASSED");
    return tp_finalize(all ? 1 : 0);
}
