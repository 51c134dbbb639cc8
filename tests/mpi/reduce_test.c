/*
 * Reductions on device buffers, checked against the MPI's own reduction of the same inputs on
 * host buffers (which gdte hands to the MPI untouched).
 *
 * For every pair of a predefined operation and a datatype MPI allows it on (the C integer types,
 * the fixed-width ones, float, double, C bool, byte, the five pair types with MINLOC/MAXLOC,
 * Fortran INTEGER and DOUBLE PRECISION), and a user-defined operation on a contiguous type of
 * doubles and on a vector of ints with gaps, each of Reduce, Allreduce, Reduce_scatter,
 * Reduce_scatter_block, Scan, Exscan and Reduce_local runs once on device buffers and once on
 * host buffers with the same seeded inputs; every choice is drawn from one seed shared by the
 * ranks: count (zero included), root, blocking or nonblocking (completed by each of the eight
 * completion calls in turn), MPI_IN_PLACE, which buffers are on the device. Receive buffers are
 * poisoned; the device result must equal the host one on every byte of the datatype's map, and
 * every byte outside the map (gaps, a margin past the end, a non-root's receive buffer, rank 0's
 * of Exscan) must still hold the poison. Send buffers must be unchanged. Then intercommunicator
 * Allreduce and Reduce (MPI_ROOT, MPI_PROC_NULL) and errors (an operation the datatype does not
 * take, MPI_ERR_OP from the MPI on every rank; a buffer half host half device in
 * MPI_Reduce_local, MPI_ERR_BUFFER).
 *
 * With GDTE_MPI_REDUCE_NODE_MIN set (small), every blocking call whose buffers are all device
 * memory on every rank, with a predefined operation on a predefined datatype without padding,
 * must be carried GPU to GPU within the node (counter reduce_node), and no other.
 *
 * Usage: reduce_test [--seed S] [--maxc N (elements per rank and block at most, default 29)]
 */
#include "mpitest.h"

extern int64_t gdte_mpi_reduce_counter(const char *name) __attribute__((weak));
static int64_t red_counter(const char *n) { return gdte_mpi_reduce_counter ? gdte_mpi_reduce_counter(n) : 0; }

#define POISON 0xA5
#define MARGIN 24 /* poisoned bytes past every buffer's span */
static int maxc = 29; /* elements per rank and block at most (--maxc) */
#define MAXC maxc
/* GDTE_MPI_REDUCE_NODE_MIN set (to at most MAXC elements of the smallest type): the blocking
 * calls whose buffers are all device memory must go GPU to GPU within the node (reduce_node). */
static int node_mode;

static int gpu_aware; /* GDTE_MPI_GPU_AWARE=1: the MPI reads device memory, gdte passes calls on */
static uint64_t data_state;
static uint64_t drnd(void)
{
    uint64_t z = (data_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- datatypes and their values ---- */
typedef enum { V_INT, V_F32, V_F64, V_BOOL, V_PAIR_F, V_PAIR_D, V_PAIR_L, V_PAIR_I, V_PAIR_S } vkind_t;
enum { C_CINT = 1, C_FINT = 2, C_FLOAT = 4, C_BOOL = 8, C_BYTE = 16, C_PAIR = 32, C_USER = 64 };

typedef struct {
    const char *name;
    MPI_Datatype dt;
    vkind_t vk;
    int vsize; /* bytes of one value of kind V_INT */
    int cls;
    int dense; /* predefined, size == extent: the node path takes it with a predefined operation */
} tdesc_t;

static tdesc_t types[40];
static int ntypes;
static MPI_Op user_op;

static void add_type(const char *name, MPI_Datatype dt, vkind_t vk, int vsize, int cls)
{
    int sz = 0;
    MPI_Aint lb, ext;
    MPI_Type_size(dt, &sz);
    MPI_Type_get_extent(dt, &lb, &ext);
    types[ntypes++] = (tdesc_t){name, dt, vk, vsize, cls, cls != C_USER && lb == 0 && ext == sz};
}

/* A commutative user operation: element-wise sum, as MPI_SUM would give, on the two derived
 * datatypes below (Open MPI takes predefined operations on predefined datatypes only). */
static MPI_Datatype c3_type, vec_type;
static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt == c3_type) {
        double *a = in, *b = inout;
        for (int i = 0; i < 3 * *len; i++) b[i] += a[i];
        return;
    }
    /* 2 blocks of 2 ints at a stride of 3 ints, extent 6 ints. */
    int *a = in, *b = inout;
    for (int e = 0; e < *len; e++)
        for (int blk = 0; blk < 2; blk++)
            for (int j = 0; j < 2; j++) {
                int at = e * 6 + blk * 3 + j;
                b[at] = (int)((unsigned)a[at] + (unsigned)b[at]);
            }
}

static void make_types(void)
{
    add_type("MPI_INT", MPI_INT, V_INT, sizeof(int), C_CINT);
    add_type("MPI_UNSIGNED", MPI_UNSIGNED, V_INT, sizeof(unsigned), C_CINT);
    add_type("MPI_LONG", MPI_LONG, V_INT, sizeof(long), C_CINT);
    add_type("MPI_UNSIGNED_LONG", MPI_UNSIGNED_LONG, V_INT, sizeof(unsigned long), C_CINT);
    add_type("MPI_LONG_LONG", MPI_LONG_LONG, V_INT, sizeof(long long), C_CINT);
    add_type("MPI_UNSIGNED_LONG_LONG", MPI_UNSIGNED_LONG_LONG, V_INT, sizeof(unsigned long long), C_CINT);
    add_type("MPI_SHORT", MPI_SHORT, V_INT, sizeof(short), C_CINT);
    add_type("MPI_UNSIGNED_SHORT", MPI_UNSIGNED_SHORT, V_INT, sizeof(short), C_CINT);
    add_type("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, V_INT, 1, C_CINT);
    add_type("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, V_INT, 1, C_CINT);
    add_type("MPI_INT8_T", MPI_INT8_T, V_INT, 1, C_CINT);
    add_type("MPI_UINT8_T", MPI_UINT8_T, V_INT, 1, C_CINT);
    add_type("MPI_INT16_T", MPI_INT16_T, V_INT, 2, C_CINT);
    add_type("MPI_UINT16_T", MPI_UINT16_T, V_INT, 2, C_CINT);
    add_type("MPI_INT32_T", MPI_INT32_T, V_INT, 4, C_CINT);
    add_type("MPI_UINT32_T", MPI_UINT32_T, V_INT, 4, C_CINT);
    add_type("MPI_INT64_T", MPI_INT64_T, V_INT, 8, C_CINT);
    add_type("MPI_UINT64_T", MPI_UINT64_T, V_INT, 8, C_CINT);
    add_type("MPI_FLOAT", MPI_FLOAT, V_F32, 4, C_FLOAT);
    add_type("MPI_DOUBLE", MPI_DOUBLE, V_F64, 8, C_FLOAT);
    add_type("MPI_C_BOOL", MPI_C_BOOL, V_BOOL, 1, C_BOOL);
    add_type("MPI_BYTE", MPI_BYTE, V_INT, 1, C_BYTE);
    add_type("MPI_FLOAT_INT", MPI_FLOAT_INT, V_PAIR_F, 0, C_PAIR);
    add_type("MPI_DOUBLE_INT", MPI_DOUBLE_INT, V_PAIR_D, 0, C_PAIR);
    add_type("MPI_LONG_INT", MPI_LONG_INT, V_PAIR_L, 0, C_PAIR);
    add_type("MPI_2INT", MPI_2INT, V_PAIR_I, 0, C_PAIR);
    add_type("MPI_SHORT_INT", MPI_SHORT_INT, V_PAIR_S, 0, C_PAIR);
    add_type("MPI_INTEGER", MPI_INTEGER, V_INT, 4, C_FINT);
    add_type("MPI_DOUBLE_PRECISION", MPI_DOUBLE_PRECISION, V_F64, 8, C_FLOAT);
    MPI_Datatype v;
    MPI_Type_contiguous(3, MPI_DOUBLE, &c3_type);
    MPI_Type_commit(&c3_type);
    add_type("contiguous(3, MPI_DOUBLE)", c3_type, V_F64, 8, C_USER);
    /* Gaps inside and between elements: 2 blocks of 2 ints at a stride of 3, extent 6 ints. */
    MPI_Type_vector(2, 2, 3, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, 6 * sizeof(int), &vec_type);
    MPI_Type_free(&v);
    MPI_Type_commit(&vec_type);
    add_type("vector(2, 2, 3, MPI_INT) resized to 6 ints", vec_type, V_INT, sizeof(int), C_USER);
    MPI_Op_create(user_sum, 1, &user_op);
}

typedef struct {
    MPI_Op op;
    const char *name;
    int cls; /* classes of datatypes MPI allows it on */
} odesc_t;
static odesc_t ops[16];
static int nops;

static void make_ops(void)
{
    const int ints = C_CINT | C_FINT, arith = C_CINT | C_FINT | C_FLOAT;
    ops[nops++] = (odesc_t){MPI_SUM, "MPI_SUM", arith};
    ops[nops++] = (odesc_t){MPI_PROD, "MPI_PROD", arith};
    ops[nops++] = (odesc_t){MPI_MIN, "MPI_MIN", arith};
    ops[nops++] = (odesc_t){MPI_MAX, "MPI_MAX", arith};
    ops[nops++] = (odesc_t){MPI_LAND, "MPI_LAND", C_CINT | C_BOOL};
    ops[nops++] = (odesc_t){MPI_LOR, "MPI_LOR", C_CINT | C_BOOL};
    ops[nops++] = (odesc_t){MPI_LXOR, "MPI_LXOR", C_CINT | C_BOOL};
    ops[nops++] = (odesc_t){MPI_BAND, "MPI_BAND", ints | C_BYTE};
    ops[nops++] = (odesc_t){MPI_BOR, "MPI_BOR", ints | C_BYTE};
    ops[nops++] = (odesc_t){MPI_BXOR, "MPI_BXOR", ints | C_BYTE};
    ops[nops++] = (odesc_t){MPI_MINLOC, "MPI_MINLOC", C_PAIR};
    ops[nops++] = (odesc_t){MPI_MAXLOC, "MPI_MAXLOC", C_PAIR};
    ops[nops++] = (odesc_t){user_op, "user sum", C_USER};
}

/* Values: small enough that float sums and products are exact whatever the order, with zeros
 * (logical operations) and ties (MINLOC/MAXLOC) common. */
static void put_int(unsigned char *p, int size, uint64_t v) { memcpy(p, &v, (size_t)size); /* little-endian */ }
static void fill_values(unsigned char *b, size_t bytes, const tdesc_t *t)
{
    size_t i = 0;
    switch (t->vk) {
    case V_INT:
        for (; i + t->vsize <= bytes; i += t->vsize) put_int(b + i, t->vsize, drnd() % 4 == 0 ? 0 : drnd());
        break;
    case V_F32:
        for (; i + 4 <= bytes; i += 4) {
            float f = (float)((int)(drnd() % 41) - 20) / 4.0f;
            memcpy(b + i, &f, 4);
        }
        break;
    case V_F64:
        for (; i + 8 <= bytes; i += 8) {
            double d = (double)((int)(drnd() % 2001) - 1000) / 8.0;
            memcpy(b + i, &d, 8);
        }
        break;
    case V_BOOL:
        for (; i < bytes; i++) b[i] = (unsigned char)(drnd() % 2);
        break;
#define PAIR(kind, VT)                                         \
    case kind:                                                 \
        for (; i + sizeof(struct { VT v; int k; }) <= bytes; i += sizeof(struct { VT v; int k; })) { \
            struct {                                           \
                VT v;                                          \
                int k;                                         \
            } p;                                               \
            memset(&p, 0, sizeof p);                           \
            p.v = (VT)(drnd() % 5);                            \
            p.k = (int)(drnd() % 100);                         \
            memcpy(b + i, &p, sizeof p);                       \
        }                                                      \
        break;
        PAIR(V_PAIR_F, float)
        PAIR(V_PAIR_D, double)
        PAIR(V_PAIR_L, long)
        PAIR(V_PAIR_I, int)
        PAIR(V_PAIR_S, short)
#undef PAIR
    }
    for (; i < bytes; i++) b[i] = (unsigned char)drnd();
}

/* ---- buffers: a span of n elements plus a poisoned margin, in device or host memory ---- */
typedef struct {
    int dev;
    unsigned char *mem; /* allocation */
    size_t bytes;       /* span + margin */
} buf_t;

static size_t span(MPI_Datatype dt, int n)
{
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(dt, &lb, &ext);
    MPI_Type_get_true_extent(dt, &tlb, &text);
    return n > 0 ? (size_t)(tlb + (n - 1) * ext + text) : 0;
}

static buf_t buf_new(int dev, MPI_Datatype dt, int n)
{
    buf_t b = {dev, NULL, span(dt, n) + MARGIN};
    b.mem = dev ? mt_devmem_alloc(b.bytes) : malloc(b.bytes);
    unsigned char *tmp = malloc(b.bytes);
    memset(tmp, POISON, b.bytes);
    mt_put(b.mem, tmp, b.bytes);
    free(tmp);
    return b;
}
static void buf_free(buf_t *b)
{
    if (b->dev) mt_devmem_free(b->mem);
    else free(b->mem);
    b->mem = NULL;
}
/* Host copy of a buffer's bytes. */
static unsigned char *buf_read(const buf_t *b)
{
    unsigned char *h = malloc(b->bytes);
    mt_get(h, b->mem, b->bytes);
    return h;
}

/* Which bytes of n elements of dt its map covers: 1 in mask. */
static unsigned char *map_mask(MPI_Datatype dt, int n, size_t bytes)
{
    unsigned char *mask = calloc(1, bytes ? bytes : 1);
    int psize = 0;
    MPI_Pack_size(n, dt, MPI_COMM_WORLD, &psize);
    unsigned char *ones = malloc(psize ? psize : 1);
    memset(ones, 0xFF, psize);
    int pos = 0;
    if (n > 0) MPI_Unpack(ones, psize, &pos, mask, n, dt, MPI_COMM_WORLD);
    for (size_t i = 0; i < bytes; i++) mask[i] = mask[i] != 0;
    free(ones);
    return mask;
}

static int64_t ncases;
static char where[256];

/* The device result `d` (n elements written) against the host result `h`: equal on the map of
 * the first `n` elements, as they were before the call (`img`) everywhere else. */
static void compare(const buf_t *d, const buf_t *h, MPI_Datatype dt, int n, const unsigned char *img)
{
    unsigned char *dd = buf_read(d), *hh = buf_read(h), *mask = map_mask(dt, n, d->bytes);
    size_t bad = d->bytes;
    for (size_t i = 0; i < d->bytes && bad == d->bytes; i++)
        if (mask[i] ? dd[i] != hh[i] : dd[i] != img[i]) bad = i;
    MT_CHECK(bad == d->bytes, "%s: result byte %zu of %zu (%s the map) is %#x, want %#x", where, bad, d->bytes,
             bad < d->bytes && mask[bad] ? "in" : "outside", bad < d->bytes ? dd[bad] : 0,
             bad < d->bytes ? (mask[bad] ? hh[bad] : img[bad]) : 0);
    free(dd), free(hh), free(mask);
}

static void same_bytes(const buf_t *a, const unsigned char *want, const char *what)
{
    unsigned char *aa = buf_read(a);
    MT_CHECK(!memcmp(aa, want, a->bytes), "%s: %s changed", where, what);
    free(aa);
}

/* ---- completion: the eight calls in turn ---- */
/* `persistent`: the request stays allocated (inactive) after completion. */
static void complete_req(MPI_Request *req, int how, int persistent)
{
    MPI_Request two[2] = {MPI_REQUEST_NULL, *req};
    MPI_Status sts[2];
    int flag = 0, idx = -1, out = 0, ids[2];
    switch (how % 8) {
    case 0: MT_MPI(MPI_Wait(req, MPI_STATUS_IGNORE)); return;
    case 1:
        while (!flag) MT_MPI(MPI_Test(req, &flag, &sts[0]));
        return;
    case 2: MT_MPI(MPI_Waitall(2, two, sts)); break;
    case 3: MT_MPI(MPI_Waitany(2, two, &idx, MPI_STATUS_IGNORE)); MT_CHECK(idx == 1, "Waitany index %d", idx); break;
    case 4: MT_MPI(MPI_Waitsome(2, two, &out, ids, sts)); MT_CHECK(out == 1 && ids[0] == 1, "Waitsome %d", out); break;
    case 5:
        while (!flag) MT_MPI(MPI_Testall(2, two, &flag, MPI_STATUSES_IGNORE));
        break;
    case 6:
        while (!flag) MT_MPI(MPI_Testany(2, two, &idx, &flag, &sts[0]));
        MT_CHECK(idx == 1, "Testany index %d", idx);
        break;
    case 7:
        while (!out) MT_MPI(MPI_Testsome(2, two, &out, ids, MPI_STATUSES_IGNORE));
        MT_CHECK(out == 1 && ids[0] == 1, "Testsome %d", out);
        break;
    }
    if (persistent)
        MT_CHECK(two[1] == *req, "%s: completion %d changed a persistent request", where, how % 8);
    else
        MT_CHECK(two[1] == MPI_REQUEST_NULL, "%s: request not freed by completion %d", where, how % 8);
    *req = two[1];
}
static void complete(MPI_Request *req, int how) { complete_req(req, how, 0); }

/* ---- one case ---- */
typedef enum { K_REDUCE, K_ALLREDUCE, K_RSCAT, K_RSCATB, K_SCAN, K_EXSCAN, K_LOCAL, K_COUNT_ } call_t;
static const char *call_name[K_COUNT_][2] = {
    {"MPI_Reduce", "MPI_Ireduce"},     {"MPI_Allreduce", "MPI_Iallreduce"},
    {"MPI_Reduce_scatter", "MPI_Ireduce_scatter"}, {"MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block"},
    {"MPI_Scan", "MPI_Iscan"},         {"MPI_Exscan", "MPI_Iexscan"}, {"MPI_Reduce_local", "MPI_Reduce_local"}};

static uint64_t seed = 1;
static int completions;

/* The call on (s, r) in the form asked: `persistent` (an inactive request in *req), nonblocking
 * (req) or blocking (req NULL). */
static int run_call(call_t k, const void *s, void *r, int n, const int *rc, MPI_Datatype dt, MPI_Op op, int root,
                    MPI_Request *req, int persistent)
{
    MPI_Comm w = MPI_COMM_WORLD;
#ifdef HAVE_PINIT
#define P(name, ...) PINIT(name)(__VA_ARGS__, MPI_INFO_NULL, req)
#else
#define P(name, ...) MPI_ERR_INTERN
#endif
#define B(name, iname, ...) \
    (persistent ? P(name, __VA_ARGS__) : req ? MPI_##iname(__VA_ARGS__, req) : MPI_##name(__VA_ARGS__))
    switch (k) {
    case K_REDUCE: return B(Reduce, Ireduce, s, r, n, dt, op, root, w);
    case K_ALLREDUCE: return B(Allreduce, Iallreduce, s, r, n, dt, op, w);
    case K_RSCAT: return B(Reduce_scatter, Ireduce_scatter, s, r, rc, dt, op, w);
    case K_RSCATB: return B(Reduce_scatter_block, Ireduce_scatter_block, s, r, n, dt, op, w);
    case K_SCAN: return B(Scan, Iscan, s, r, n, dt, op, w);
    case K_EXSCAN: return B(Exscan, Iexscan, s, r, n, dt, op, w);
    default: return persistent ? MPI_ERR_INTERN : MPI_Reduce_local(s, r, n, dt, op);
    }
#undef B
#undef P
}

/* A case's choices shared by the ranks (`nb` drawn where not NULL), and the element counts they
 * give this rank: what its send side holds, what its receive side holds (in place: the input)
 * and what it receives; MPI_IN_PLACE only at the root of Reduce. */
typedef struct {
    int n, root, mix, inplace, ip, rcounts[64], total, s_n, r_n, r_out;
} shape_t;

static void draw_shape(call_t k, shape_t *c, int *nb)
{
    int np = mt_size, me = mt_rank;
    c->n = mt_rnd() % 8 == 0 ? 0 : 1 + (int)(mt_rnd() % MAXC);
    if (nb) *nb = k != K_LOCAL && mt_rnd() % 2;
    c->root = (int)(mt_rnd() % np);
    c->mix = (int)(mt_rnd() % 4); /* 0, 1: both buffers on the device; 2: send only; 3: receive only */
    c->inplace = k != K_LOCAL && mt_rnd() % 4 == 0;
    c->total = 0;
    for (int i = 0; i < np; i++) c->total += c->rcounts[i] = mt_rnd() % 5 == 0 ? 0 : (int)(mt_rnd() % MAXC);
    c->s_n = c->r_n = c->r_out = c->n;
    if (k == K_RSCAT) c->s_n = c->total, c->r_n = c->inplace ? c->total : c->rcounts[me], c->r_out = c->rcounts[me];
    if (k == K_RSCATB) c->s_n = c->n * np, c->r_n = c->inplace ? c->n * np : c->n;
    if (k == K_REDUCE && me != c->root) c->r_out = 0;
    c->ip = c->inplace && (k != K_REDUCE || me == c->root);
    if (k == K_EXSCAN && me == 0) c->r_out = 0;
}

static void one_case(call_t k, const tdesc_t *t, const odesc_t *o)
{
    int me = mt_rank, nb;
    shape_t shape;
    draw_shape(k, &shape, &nb);
    const int n = shape.n, root = shape.root, mix = shape.mix, ip = shape.ip, *rcounts = shape.rcounts;
    const int s_n = shape.s_n, r_n = shape.r_n, r_out = shape.r_out;
    int how = completions;
    if (nb) completions++;
    snprintf(where, sizeof where, "%s(%s, %s) n=%d%s%s root=%d mix=%d", call_name[k][nb], t->name, o->name, n,
             ip ? " in place" : "", nb ? " completion " : "", root, mix);
    if (nb) snprintf(where + strlen(where), sizeof where - strlen(where), " #%d", how % 8);

    int sdev = mix != 3, rdev = mix != 2;
    data_state = seed * 1000003u + (uint64_t)ncases * 7919u + (uint64_t)me * 104729u;
    buf_t sd = buf_new(sdev, t->dt, s_n), sh = buf_new(0, t->dt, s_n);
    buf_t rd = buf_new(rdev, t->dt, r_n), rh = buf_new(0, t->dt, r_n);
    unsigned char *simg = malloc(sd.bytes), *rimg = malloc(rd.bytes);
    memset(simg, POISON, sd.bytes);
    memset(rimg, POISON, rd.bytes);
    fill_values(simg, span(t->dt, s_n), t);
    if (ip || k == K_LOCAL) fill_values(rimg, span(t->dt, r_n), t);
    mt_put(sd.mem, simg, sd.bytes), mt_put(sh.mem, simg, sh.bytes);
    mt_put(rd.mem, rimg, rd.bytes), mt_put(rh.mem, rimg, rh.bytes);

    int64_t before = red_counter("reduce_staged") + red_counter("reduce_kernels");
    int64_t node0 = red_counter("reduce_node"), staged0 = red_counter("reduce_staged");
    const void *s_d = ip ? MPI_IN_PLACE : sd.mem, *s_h = ip ? MPI_IN_PLACE : sh.mem;
    int cnt = n;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = run_call(k, s_d, rd.mem, cnt, rcounts, t->dt, o->op, root, nb ? &req : NULL, 0);
    MT_CHECK(rc == MPI_SUCCESS, "%s: device call returned %d", where, rc);
    if (nb && rc == MPI_SUCCESS) complete(&req, how);
    int64_t node = red_counter("reduce_node") - node0, staged = red_counter("reduce_staged") - staged0;
    int64_t moved = red_counter("reduce_staged") + red_counter("reduce_kernels") - before + node;
    MT_MPI(run_call(k, s_h, rh.mem, cnt, rcounts, t->dt, o->op, root, NULL, 0));
    /* The node path: every blocking call whose buffers are all device memory on every rank (the
     * input: the receive buffer in place; the output where the rank has one), on a vector of
     * elements gdte has a rule for, and nothing else. */
    int vec = k == K_RSCAT ? shape.total : k == K_RSCATB ? n * mt_size : n;
    int dev_here = (ip ? rdev : sdev) && (r_out == 0 || rdev), dev_all = 0;
    MT_MPI(MPI_Allreduce(&dev_here, &dev_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    int want_node = node_mode && mt_expect_gdte() && !nb && k != K_LOCAL && dev_all && t->dense && o->op != user_op &&
                    vec > 0;
    MT_CHECK(node == want_node, "%s: %lld reductions GPU to GPU within the node, want %d", where, (long long)node,
             want_node);

    /* Whether this rank gave the MPI a device buffer it touches. */
    int sig = (sdev && !ip && s_n > 0 && k != K_LOCAL) || (rdev && (r_out > 0 || (ip && r_n > 0))) ||
              (k == K_LOCAL && n > 0 && (sdev || rdev));
    if (mt_expect_gdte() && (!gpu_aware || want_node) && sig)
        MT_CHECK(moved > 0, "%s: device buffers did not go through gdte", where);
    if (!sig || !mt_expect_gdte()) MT_CHECK(moved == 0, "%s: went through gdte (%lld)", where, (long long)moved);
    if (gpu_aware && k != K_LOCAL) MT_CHECK(staged == 0, "%s: staged under a GPU-aware MPI", where);

    if (r_out > 0) compare(&rd, &rh, t->dt, r_out, rimg);
    else same_bytes(&rd, rimg, "a receive buffer the MPI does not write");
    if (!ip) same_bytes(&sd, simg, "send buffer");
    buf_free(&sd), buf_free(&sh), buf_free(&rd), buf_free(&rh);
    free(simg), free(rimg);
    ncases++;
}

#ifdef HAVE_PINIT
#define ROUNDS 3 /* starts of one persistent request */

/* A persistent reduction on device buffers: set up once, started ROUNDS times (MPI_Start and
 * MPI_Startall in turn, completed by the completion calls in turn) with new inputs and a newly
 * poisoned receive buffer each round, each round against the MPI's blocking reduction of the same
 * inputs on host buffers; then the inactive request is freed. The init copies nothing; each start
 * stages once (reduce_staged moves by one) and moves exactly the bytes the rank's device buffers
 * give and take (reduce_bytes). */
static void persistent_case(call_t k, const tdesc_t *t, const odesc_t *o)
{
    int me = mt_rank;
    shape_t shape;
    draw_shape(k, &shape, NULL);
    const int n = shape.n, root = shape.root, mix = shape.mix, ip = shape.ip, *rcounts = shape.rcounts;
    const int s_n = shape.s_n, r_n = shape.r_n, r_out = shape.r_out;
    int how = completions;
    completions += ROUNDS;
    int sdev = mix != 3, rdev = mix != 2;
    snprintf(where, sizeof where, "persistent %s(%s, %s) n=%d%s root=%d mix=%d", call_name[k][0], t->name, o->name, n,
             ip ? " in place" : "", root, mix);
    int sig = (sdev && !ip && s_n > 0) || (rdev && (r_out > 0 || (ip && r_n > 0)));
    int staged = mt_expect_gdte() && !gpu_aware && sig;
    int esize = 0;
    MPI_Type_size(t->dt, &esize);
    int64_t want_bytes = (int64_t)esize * ((sdev && !ip ? s_n : 0) + (rdev ? (ip ? r_n : 0) + r_out : 0));

    buf_t sd = buf_new(sdev, t->dt, s_n), sh = buf_new(0, t->dt, s_n);
    buf_t rd = buf_new(rdev, t->dt, r_n), rh = buf_new(0, t->dt, r_n);
    unsigned char *simg = malloc(sd.bytes), *rimg = malloc(rd.bytes);
    const void *s_d = ip ? MPI_IN_PLACE : sd.mem, *s_h = ip ? MPI_IN_PLACE : sh.mem;
    int64_t live0 = mt_counter("requests_live"), st0 = red_counter("reduce_staged"), by0 = red_counter("reduce_bytes");
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = run_call(k, s_d, rd.mem, n, rcounts, t->dt, o->op, root, &req, 1);
    MT_CHECK(rc == MPI_SUCCESS && req != MPI_REQUEST_NULL, "%s: init returned %d", where, rc);
    MT_CHECK(red_counter("reduce_staged") == st0 && red_counter("reduce_bytes") == by0, "%s: the init staged data",
             where);
    MT_CHECK(mt_counter("requests_live") == live0 + (staged ? 1 : 0), "%s: %lld gdte requests after the init", where,
             (long long)(mt_counter("requests_live") - live0));
    size_t wlen = strlen(where);
    for (int round = 0; round < ROUNDS && req != MPI_REQUEST_NULL; round++) {
        snprintf(where + wlen, sizeof where - wlen, " round %d completion #%d", round, (how + round) % 8);
        data_state = seed * 1000003u + (uint64_t)ncases * 7919u + (uint64_t)me * 104729u + (uint64_t)round * 15485863u;
        memset(simg, POISON, sd.bytes);
        memset(rimg, POISON, rd.bytes);
        fill_values(simg, span(t->dt, s_n), t);
        if (ip) fill_values(rimg, span(t->dt, r_n), t);
        mt_put(sd.mem, simg, sd.bytes), mt_put(sh.mem, simg, sh.bytes);
        mt_put(rd.mem, rimg, rd.bytes), mt_put(rh.mem, rimg, rh.bytes);
        int64_t st = red_counter("reduce_staged"), by = red_counter("reduce_bytes");
        MT_MPI(round % 2 ? MPI_Startall(1, &req) : MPI_Start(&req));
        complete_req(&req, how + round, 1);
        int64_t moved = red_counter("reduce_staged") - st, bytes = red_counter("reduce_bytes") - by;
        MT_MPI(run_call(k, s_h, rh.mem, n, rcounts, t->dt, o->op, root, NULL, 0));
        MT_CHECK(moved == staged, "%s: staged %lld times, want %d", where, (long long)moved, staged);
        MT_CHECK(bytes == (staged ? want_bytes : 0), "%s: %lld bytes through the mirrors, want %lld", where,
                 (long long)bytes, (long long)(staged ? want_bytes : 0));
        if (r_out > 0) compare(&rd, &rh, t->dt, r_out, rimg);
        else same_bytes(&rd, rimg, "a receive buffer the MPI does not write");
        if (!ip) same_bytes(&sd, simg, "send buffer");
    }
    where[wlen] = 0;
    if (req != MPI_REQUEST_NULL) {
        /* Inactive: freed, gdte's record and mirrors with it. */
        MT_MPI(MPI_Request_free(&req));
        MT_CHECK(req == MPI_REQUEST_NULL, "%s: MPI_Request_free left the handle", where);
    }
    MT_CHECK(mt_counter("requests_live") == live0, "%s: %lld gdte requests left after MPI_Request_free", where,
             (long long)(mt_counter("requests_live") - live0));
    buf_free(&sd), buf_free(&sh), buf_free(&rd), buf_free(&rh);
    free(simg), free(rimg);
    ncases++;
}
#endif

/* Intercommunicator Allreduce, Reduce and Reduce_scatter_block: even ranks are group A, odd
 * ranks B. For Reduce, A's first rank is the root (MPI_ROOT), the others MPI_PROC_NULL; B's ranks
 * contribute. */
static void intercomm_cases(void)
{
    if (mt_size < 2) return;
    MPI_Comm half, inter;
    int a = mt_rank % 2 == 0, hr;
    MT_MPI(MPI_Comm_split(MPI_COMM_WORLD, a, mt_rank, &half));
    MPI_Comm_rank(half, &hr);
    MT_MPI(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, a ? 1 : 0, 41, &inter));
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    const tdesc_t *t = &types[19]; /* MPI_DOUBLE */
    for (int round = 0; round < 4; round++) {
        int n = 1 + (int)(mt_rnd() % MAXC), nb = round % 2;
        data_state = seed * 31u + (uint64_t)round * 977u + (uint64_t)mt_rank * 104729u;
        buf_t sd = buf_new(1, t->dt, n), sh = buf_new(0, t->dt, n), rd = buf_new(1, t->dt, n), rh = buf_new(0, t->dt, n);
        unsigned char *simg = malloc(sd.bytes), *rimg = malloc(rd.bytes);
        memset(simg, POISON, sd.bytes), memset(rimg, POISON, rd.bytes);
        fill_values(simg, span(t->dt, n), t);
        mt_put(sd.mem, simg, sd.bytes), mt_put(sh.mem, simg, sh.bytes);
        snprintf(where, sizeof where, "intercommunicator %s n=%d", nb ? "MPI_Iallreduce" : "MPI_Allreduce", n);
        MPI_Request q;
        if (nb) {
            MT_MPI(MPI_Iallreduce(sd.mem, rd.mem, n, t->dt, MPI_SUM, inter, &q));
            complete(&q, round);
        } else {
            MT_MPI(MPI_Allreduce(sd.mem, rd.mem, n, t->dt, MPI_SUM, inter));
        }
        MT_MPI(MPI_Allreduce(sh.mem, rh.mem, n, t->dt, MPI_SUM, inter));
        compare(&rd, &rh, t->dt, n, rimg);
        /* Reduce to group A's first rank. */
        buf_t rd2 = buf_new(1, t->dt, n), rh2 = buf_new(0, t->dt, n);
        int root = a ? (hr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        snprintf(where, sizeof where, "intercommunicator %s n=%d root=%d", nb ? "MPI_Ireduce" : "MPI_Reduce", n, root);
        if (nb) {
            MT_MPI(MPI_Ireduce(sd.mem, rd2.mem, n, t->dt, MPI_MAX, root, inter, &q));
            complete(&q, round + 3);
        } else {
            MT_MPI(MPI_Reduce(sd.mem, rd2.mem, n, t->dt, MPI_MAX, root, inter));
        }
        MT_MPI(MPI_Reduce(sh.mem, rh2.mem, n, t->dt, MPI_MAX, root, inter));
        if (root == MPI_ROOT) compare(&rd2, &rh2, t->dt, n, rimg);
        else same_bytes(&rd2, rimg, "a receive buffer the MPI does not write");
        same_bytes(&sd, simg, "send buffer");
        buf_free(&sd), buf_free(&sh), buf_free(&rd), buf_free(&rh), buf_free(&rd2), buf_free(&rh2);
        free(simg), free(rimg);
        /* Reduce_scatter_block: each process gives (its group's size) x recvcount elements; a
         * group's recvcount is the other group's size times k, so both groups' vectors have the
         * same length (the groups differ in size at odd np). */
        int size_a = (mt_size + 1) / 2, size_b = mt_size / 2, k = 1 + round;
        int rc = k * (a ? size_b : size_a), total = rc * (a ? size_a : size_b);
        buf_t bs = buf_new(1, t->dt, total), bsh = buf_new(0, t->dt, total), br = buf_new(1, t->dt, rc),
              brh = buf_new(0, t->dt, rc);
        simg = malloc(bs.bytes), rimg = malloc(br.bytes);
        memset(simg, POISON, bs.bytes), memset(rimg, POISON, br.bytes);
        fill_values(simg, span(t->dt, total), t);
        mt_put(bs.mem, simg, bs.bytes), mt_put(bsh.mem, simg, bsh.bytes);
        mt_put(br.mem, rimg, br.bytes), mt_put(brh.mem, rimg, brh.bytes);
        snprintf(where, sizeof where, "intercommunicator %s recvcount=%d (groups of %d and %d)",
                 nb ? "MPI_Ireduce_scatter_block" : "MPI_Reduce_scatter_block", rc, size_a, size_b);
        if (nb) {
            MT_MPI(MPI_Ireduce_scatter_block(bs.mem, br.mem, rc, t->dt, MPI_SUM, inter, &q));
            complete(&q, round + 5);
        } else {
            MT_MPI(MPI_Reduce_scatter_block(bs.mem, br.mem, rc, t->dt, MPI_SUM, inter));
        }
        MT_MPI(MPI_Reduce_scatter_block(bsh.mem, brh.mem, rc, t->dt, MPI_SUM, inter));
        compare(&br, &brh, t->dt, rc, rimg);
        same_bytes(&bs, simg, "send buffer");
        buf_free(&bs), buf_free(&bsh), buf_free(&br), buf_free(&brh);
        free(simg), free(rimg);
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

/* Errors: the MPI's own for an operation the datatype does not take (every rank, so nobody is
 * left waiting), and MPI_ERR_BUFFER for a buffer that is partly host memory. */
static void error_cases(void)
{
    double *s = mt_devmem_alloc(8 * sizeof(double)), *r = mt_devmem_alloc(8 * sizeof(double));
    snprintf(where, sizeof where, "MPI_Allreduce(MPI_DOUBLE, MPI_LAND)");
    int rc = MPI_Allreduce(s, r, 8, MPI_DOUBLE, MPI_LAND, MPI_COMM_WORLD);
    MT_CHECK(mt_eclass(rc) == MPI_ERR_OP, "%s on device buffers: error class %d, want MPI_ERR_OP", where, mt_eclass(rc));
    rc = MPI_Reduce_local(s, r, 8, MPI_DOUBLE, MPI_BXOR);
    MT_CHECK(mt_eclass(rc) == MPI_ERR_OP, "MPI_Reduce_local(MPI_DOUBLE, MPI_BXOR) on device buffers: error class %d",
             mt_eclass(rc));
    mt_devmem_free(s);
    mt_devmem_free(r);
    if (mt_fake() && gdte_fake_device_register) {
        /* 16 ints of which the first 8 are device memory; 4 from the 7th straddle the border. */
        int *m = calloc(16, sizeof(int)), in[4] = {1, 2, 3, 4};
        MT_CHECK(gdte_fake_device_register(m, 8 * sizeof(int)) == 0, "register");
        rc = MPI_Reduce_local(in, m + 6, 4, MPI_INT, MPI_SUM);
        MT_CHECK(mt_eclass(rc) == MPI_ERR_BUFFER, "MPI_Reduce_local on a half-device buffer: error class %d, want "
                 "MPI_ERR_BUFFER", mt_eclass(rc));
        MT_CHECK(m[6] == 0 && m[9] == 0, "a refused MPI_Reduce_local wrote its buffer");
        gdte_fake_device_unregister(m);
        free(m);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--maxc") && i + 1 < argc) maxc = atoi(argv[++i]);
    node_mode = getenv("GDTE_MPI_REDUCE_NODE_MIN") != NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *ga = getenv("GDTE_MPI_GPU_AWARE");
    gpu_aware = ga && !strcmp(ga, "1");
    mt_rng_state = seed;
    make_types();
    make_ops();
    /* Open MPI 4.1.4 compares MPI_UNSIGNED_LONG as signed in MPI_MIN/MPI_MAX. gdte's own
     * reduction (Reduce_local on device buffers) compares it as unsigned, so the MPI is no oracle
     * for those two pairs there; the collectives are (both sides use the MPI's operation). */
    unsigned long pa = 1ul << 63, pb = 1;
    MPI_Reduce_local(&pa, &pb, 1, MPI_UNSIGNED_LONG, MPI_MIN);
    int ulong_broken = pb != 1;
    if (ulong_broken && mt_rank == 0)
        printf("this MPI's MPI_MIN/MPI_MAX on MPI_UNSIGNED_LONG compare as signed: MPI_Reduce_local%s skips them\n",
               node_mode ? " and the node path" : "");
    int pairs = 0;
    for (int k = 0; k < K_COUNT_; k++)
        for (int ti = 0; ti < ntypes; ti++)
            for (int oi = 0; oi < nops; oi++)
                if (types[ti].cls & ops[oi].cls) {
                    if ((k == K_LOCAL || node_mode) && ulong_broken && types[ti].dt == MPI_UNSIGNED_LONG &&
                        (ops[oi].op == MPI_MIN || ops[oi].op == MPI_MAX))
                        continue;
                    one_case((call_t)k, &types[ti], &ops[oi]);
                    pairs += k == 0;
                }
    int npers = 0;
#ifdef HAVE_PINIT
    /* Persistent forms: every reduction with every datatype, one operation it allows each (a
     * different one per reduction). */
    for (int k = 0; k < K_LOCAL; k++)
        for (int ti = 0; ti < ntypes; ti++)
            for (int j = 0; j < nops; j++) {
                const odesc_t *o = &ops[(ti + k + j) % nops];
                if (!(types[ti].cls & o->cls)) continue;
                persistent_case((call_t)k, &types[ti], o);
                npers++;
                break;
            }
#endif
    intercomm_cases();
    error_cases();
    if (mt_rank == 0)
        printf("reduce_test: %d (operation, datatype) pairs, %lld cases (%d persistent); gdte staged %lld, reduced %lld "
               "locally, %lld GPU to GPU within the node\n",
               pairs, (long long)ncases, npers, (long long)red_counter("reduce_staged"),
               (long long)red_counter("reduce_kernels"), (long long)red_counter("reduce_node"));
    for (int ti = 0; ti < ntypes; ti++) {
        int c = 0, a, b, d;
        MPI_Type_get_envelope(types[ti].dt, &a, &b, &d, &c);
        if (c != MPI_COMBINER_NAMED) MPI_Type_free(&types[ti].dt);
    }
    MPI_Op_free(&user_op);
    return mt_finish("reduce_test");
}
