/*
 * Batched MPI_Pack / MPI_Unpack on device buffers (issue 13, item 5): several MPI_Pack calls of
 * different derived types (vector, indexed, struct, subarray, contiguous, an hvector of
 * structs; counts above 1; positions not aligned) into one device buffer, one MPI_Send of it as
 * MPI_PACKED, an MPI_Recv into a device buffer at the other rank and MPI_Unpack piece by piece
 * into device buffers. The result is checked against the MPI's own MPI_Pack/MPI_Unpack on host
 * copies (seeded data, poisoned outputs, every byte of every allocation compared).
 *
 * Rounds, each with its own seed, piece order, counts and starting position:
 *  - dd:      every buffer device memory (cudaMalloc). Between two device buffers the calls are
 *             deferred: K calls cost no synchronisation, the MPI_Send after them one (counter
 *             pack_syncs), and on the receiver the K unpacks none until the next MPI call. The
 *             sender overwrites its data with a copy on the default stream right after the
 *             packs and the receiver reads its buffers back with copies on the default stream
 *             before any MPI call: both must be ordered after the deferred kernels;
 *  - mixed:   user buffers host or device at random, packed buffer on the device;
 *  - hostpk:  device user buffers, packed buffer in host memory: every call waits inside itself;
 *  - managed: (cuda mode) user and packed buffers in managed memory, read by the CPU right
 *             after the calls with no runtime call in between: every call waits inside itself.
 * Then, on each rank: MPI_ERR_TRUNCATE for a too small outsize/insize on device buffers while
 * deferred work is pending, position unchanged, nothing written; a count of 0.
 *
 * In fake mode (GDTE_FAKE_DEVICE=1) the device is host memory and the calls run synchronously,
 * but the deferral bookkeeping (pending flag, flush, counter) is the same and is asserted.
 *
 * Usage: pack_batch_test [--rounds N] [--seed S]
 */
#include "mpitest.h"

enum { K_DD, K_MIXED, K_HOSTPK, K_MANAGED, K_COUNT };
static const char *kind_names[] = {"dd", "mixed", "hostpk", "managed"};
/* Where a buffer lives. */
enum { M_HOST, M_DEV, M_MANAGED };

static int rr(int lo, int hi) { return lo + (int)(mt_rnd() % (uint64_t)(hi - lo + 1)); }

/* ---- the pieces ---------------------------------------------------------------------------- */
#define NTYPES 8
#define MAXP 11 /* pieces in one buffer */
static MPI_Datatype types[NTYPES];
static const char *type_names[NTYPES] = {"vector", "indexed", "struct", "subarray3d", "charvector", "subarray2dF",
                                         "contig", "hvector(struct)"};
static const int max_count[NTYPES] = {3, 3, 3, 2, 3, 2, 3, 2};

static void make_types(void)
{
    MPI_Type_vector(5, 3, 7, MPI_DOUBLE, &types[0]);
    /* Blocks out of memory order, gaps between them. */
    int il[4] = {2, 1, 3, 1}, id[4] = {0, 9, 4, 15};
    MPI_Type_indexed(4, il, id, MPI_INT, &types[1]);
    /* {char, double, short[3]}: 15 bytes of data in an extent of 32 (resized), so the packed
     * positions after it are odd. */
    int sl[3] = {1, 1, 3};
    MPI_Aint sd[3] = {0, 8, 18};
    MPI_Datatype st[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, s0;
    MPI_Type_create_struct(3, sl, sd, st, &s0);
    MPI_Type_create_resized(s0, 0, 32, &types[2]);
    MPI_Type_free(&s0);
    /* A y-face of a 24^3 block of doubles one plane inside the halo, as a 3-D halo sends. */
    int sz[3] = {24, 24, 24}, sub[3] = {24, 1, 24}, start[3] = {0, 1, 0};
    MPI_Type_create_subarray(3, sz, sub, start, MPI_ORDER_C, MPI_DOUBLE, &types[3]);
    MPI_Type_vector(3, 3, 5, MPI_CHAR, &types[4]);
    int fz[2] = {17, 9}, fs[2] = {5, 4}, ft[2] = {3, 2};
    MPI_Type_create_subarray(2, fz, fs, ft, MPI_ORDER_FORTRAN, MPI_FLOAT, &types[5]);
    MPI_Type_contiguous(5, MPI_INT, &types[6]);
    MPI_Type_create_hvector(3, 1, 48, types[2], &types[7]);
    for (int i = 0; i < NTYPES; i++) MPI_Type_commit(&types[i]);
}

/* A buffer holding `count` elements of `t` (or `bytes` plain bytes when t is MPI_DATATYPE_NULL),
 * cut to the bytes touched plus a poisoned margin either side, with a host image. */
#define MARGIN 48
typedef struct {
    int mem;
    unsigned char *alloc, *host;
    size_t len;
    unsigned char *buf; /* what the MPI call gets */
} tbuf_t;

static void *mem_alloc(int mem, size_t n)
{
    if (mem == M_HOST) return malloc(n);
    if (mem == M_MANAGED) return mt_dev_alloc(n);
    return mt_devmem_alloc(n);
}
static void mem_free(int mem, void *p)
{
    if (mem == M_HOST) free(p);
    else if (mem == M_MANAGED) mt_dev_free(p);
    else mt_devmem_free(p);
}

static void tbuf_make(tbuf_t *b, int mem, MPI_Datatype t, int count, size_t bytes)
{
    int64_t lo = 0, hi = (int64_t)bytes;
    if (t != MPI_DATATYPE_NULL) {
        MPI_Aint lb, ext, tlb, text;
        MPI_Type_get_extent(t, &lb, &ext);
        MPI_Type_get_true_extent(t, &tlb, &text);
        int64_t a = tlb, z = tlb + (int64_t)(count - 1) * ext;
        lo = a < z ? a : z;
        hi = (a > z ? a : z) + text;
    }
    b->mem = mem;
    b->len = (size_t)(hi - lo) + 2 * MARGIN;
    b->alloc = mem_alloc(mem, b->len);
    b->host = malloc(b->len);
    b->buf = b->alloc + MARGIN - lo;
}
/* Host image to the buffer and back. Device memory through copies on the default stream (the
 * ordering under test); host and managed memory by the CPU directly. */
static void tbuf_upload(tbuf_t *b)
{
    if (b->mem == M_DEV) mt_put(b->alloc, b->host, b->len);
    else memcpy(b->alloc, b->host, b->len);
}
static void tbuf_download(tbuf_t *b)
{
    if (b->mem == M_DEV) mt_get(b->host, b->alloc, b->len);
    else memcpy(b->host, b->alloc, b->len);
}
static void tbuf_free(tbuf_t *b)
{
    mem_free(b->mem, b->alloc);
    free(b->host);
}
static unsigned char *user_ptr(const tbuf_t *b, unsigned char *image) { return image + (b->buf - b->alloc); }

static void poison(unsigned char *p, size_t n, unsigned salt)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(0xA5 ^ (i * 7) ^ salt);
}

static int64_t syncs(void) { return mt_counter("pack_syncs"); }

/* ---- one round ----------------------------------------------------------------------------- */
typedef struct {
    int kind;
    int npieces;
    int type[MAXP];
    int count[MAXP];
    int user_mem[MAXP];
    int packed_mem;
    int start; /* first packed position */
    int total; /* packed bytes after the last piece */
    unsigned seed;
} plan_t;

static void plan_round(plan_t *p, uint64_t seed, int r, int kind)
{
    mt_rng_state = seed * 0x100000001B3ull + (uint64_t)r * 0x9E3779B97F4A7C15ull;
    p->kind = kind;
    p->seed = (unsigned)(seed ^ (uint64_t)r * 2654435761u);
    /* Every type, in a random order, then up to MAXP - NTYPES more at random. */
    int n = 0, order[NTYPES];
    for (int i = 0; i < NTYPES; i++) order[i] = i;
    for (int i = NTYPES - 1; i > 0; i--) {
        int j = rr(0, i), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    for (int i = 0; i < NTYPES; i++) p->type[n++] = order[i];
    for (int extra = rr(0, MAXP - NTYPES); extra > 0; extra--) p->type[n++] = rr(0, NTYPES - 1);
    p->npieces = n;
    p->start = rr(0, 7);
    p->total = p->start;
    int dev = kind == K_MANAGED ? M_MANAGED : M_DEV;
    p->packed_mem = kind == K_HOSTPK ? M_HOST : dev;
    for (int i = 0; i < n; i++) {
        p->count[i] = rr(1, max_count[p->type[i]]);
        p->user_mem[i] = kind == K_MIXED ? (rr(0, 1) ? M_DEV : M_HOST) : dev;
        int size;
        MPI_Type_size(types[p->type[i]], &size);
        p->total += size * p->count[i];
    }
}

/* The sender's data of piece i, identical on both ranks. */
static void piece_data(const plan_t *p, int i, tbuf_t *b) { mt_fill(b->host, b->len, p->seed * 31u + (unsigned)i); }

/* What MPI_Pack of the sender's host images produces, at p->start. */
static unsigned char *oracle_stream(const plan_t *p, tbuf_t *src)
{
    unsigned char *s = malloc((size_t)p->total + 1);
    memset(s, 0, (size_t)p->total + 1);
    int pos = p->start;
    for (int i = 0; i < p->npieces; i++)
        MPI_Pack(user_ptr(&src[i], src[i].host), p->count[i], types[p->type[i]], s, p->total, &pos, MPI_COMM_SELF);
    MT_CHECK(pos == p->total, "oracle packed %d bytes, want %d", pos, p->total);
    return s;
}

static void describe(const plan_t *p, int r, const char *what)
{
    fprintf(stderr, "[rank %d] round %d (%s, start %d, %d bytes) %s:", mt_rank, r, kind_names[p->kind], p->start,
            p->total, what);
    for (int i = 0; i < p->npieces; i++)
        fprintf(stderr, " %s x%d%s", type_names[p->type[i]], p->count[i], p->user_mem[i] == M_HOST ? "(host)" : "");
    fprintf(stderr, "\n");
}

static int gdte_counts(void) { return mt_expect_gdte() && gdte_mpi_counter; }

static void sender(const plan_t *p, int r, int peer)
{
    tbuf_t u[MAXP], pk;
    for (int i = 0; i < p->npieces; i++) {
        tbuf_make(&u[i], p->user_mem[i], types[p->type[i]], p->count[i], 0);
        piece_data(p, i, &u[i]);
        tbuf_upload(&u[i]);
    }
    tbuf_make(&pk, p->packed_mem, MPI_DATATYPE_NULL, 1, (size_t)p->total);
    poison(pk.host, pk.len, 1);
    tbuf_upload(&pk);

    int64_t s0 = syncs(), packs0 = mt_counter("packs");
    int pos = p->start, rc = MPI_SUCCESS;
    for (int i = 0; i < p->npieces && rc == MPI_SUCCESS; i++) {
        rc = MPI_Pack(u[i].buf, p->count[i], types[p->type[i]], pk.buf, p->total, &pos, MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "round %d: MPI_Pack of piece %d (%s) failed (class %d)", r, i,
                 type_names[p->type[i]], mt_eclass(rc));
    }
    MT_CHECK(pos == p->total, "round %d: position %d after the packs, want %d", r, pos, p->total);
    int64_t s1 = syncs();
    if (gdte_counts()) {
        MT_CHECK(mt_counter("packs") - packs0 == p->npieces, "round %d: %lld packs through gdte, want %d", r,
                 (long long)(mt_counter("packs") - packs0), p->npieces);
        if (p->kind == K_DD)
            MT_CHECK(s1 == s0, "round %d: %d MPI_Pack calls between device buffers synchronised %lld times, want 0",
                     r, p->npieces, (long long)(s1 - s0));
        if (p->kind == K_HOSTPK || (p->kind == K_MANAGED && mt_cuda()))
            MT_CHECK(s1 - s0 == p->npieces, "round %d (%s): %lld synchronisations for %d calls that must each wait", r,
                     kind_names[p->kind], (long long)(s1 - s0), p->npieces);
    }
    /* The packed buffer is complete for the CPU now when it is host or managed memory. */
    if (p->packed_mem != M_DEV) {
        unsigned char *want = oracle_stream(p, u);
        size_t i = (size_t)p->start;
        while (i < (size_t)p->total && pk.buf[i] == want[i]) i++;
        MT_CHECK(i == (size_t)p->total, "round %d: packed byte %zu read right after MPI_Pack differs", r, i);
        free(want);
    }
    /* Overwrite the data right away: a default-stream copy must wait for the deferred packs
     * (which read the old bytes); the CPU may write host and managed memory at once. */
    for (int i = 0; i < p->npieces; i++) {
        memset(u[i].host, 0xEE, u[i].len);
        tbuf_upload(&u[i]);
    }

    rc = MPI_Send(pk.buf, p->total, MPI_PACKED, peer, 100 + r, MPI_COMM_WORLD);
    MT_CHECK(rc == MPI_SUCCESS, "round %d: MPI_Send of the packed buffer failed (class %d)", r, mt_eclass(rc));
    int64_t s2 = syncs();
    if (gdte_counts() && p->kind == K_DD)
        MT_CHECK(s2 - s1 == 1, "round %d: %d MPI_Pack calls then one MPI_Send cost %lld synchronisations, want 1", r,
                 p->npieces, (long long)(s2 - s0));
    if (gdte_counts() && p->kind != K_MIXED)
        MT_CHECK(s2 - s1 <= 1, "round %d: the send synchronised %lld times", r, (long long)(s2 - s1));

    /* The bytes sent are the MPI's own packing of the original data, the poisoned prefix kept. */
    for (int i = 0; i < p->npieces; i++) piece_data(p, i, &u[i]);
    unsigned char *want = oracle_stream(p, u);
    unsigned char *pois = malloc(pk.len);
    poison(pois, pk.len, 1);
    memcpy(want, pois + MARGIN, (size_t)p->start);
    tbuf_download(&pk);
    unsigned char *got = pk.host + MARGIN;
    size_t k = 0;
    while (k < (size_t)p->total && got[k] == want[k]) k++;
    MT_CHECK(k == (size_t)p->total, "round %d: packed byte %zu is %d, MPI_Pack gives %d", r, k,
             k < (size_t)p->total ? got[k] : 0, k < (size_t)p->total ? want[k] : 0);
    size_t m = 0;
    while (m < MARGIN && pk.host[m] == pois[m] && pk.host[pk.len - 1 - m] == pois[pk.len - 1 - m]) m++;
    MT_CHECK(m == MARGIN, "round %d: MPI_Pack wrote outside the packed range", r);
    if (k != (size_t)p->total || m != MARGIN) describe(p, r, "FAILED (sender)");
    free(pois);
    free(want);
    tbuf_free(&pk);
    for (int j = 0; j < p->npieces; j++) tbuf_free(&u[j]);
}

static void receiver(const plan_t *p, int r, int peer)
{
    tbuf_t u[MAXP], src[MAXP], pk;
    for (int i = 0; i < p->npieces; i++) {
        tbuf_make(&u[i], p->user_mem[i], types[p->type[i]], p->count[i], 0);
        poison(u[i].host, u[i].len, (unsigned)i + 2);
        tbuf_upload(&u[i]);
        tbuf_make(&src[i], M_HOST, types[p->type[i]], p->count[i], 0);
        piece_data(p, i, &src[i]);
    }
    tbuf_make(&pk, p->packed_mem, MPI_DATATYPE_NULL, 1, (size_t)p->total);
    poison(pk.host, pk.len, 3);
    tbuf_upload(&pk);

    MPI_Status st;
    int rc = MPI_Recv(pk.buf, p->total, MPI_PACKED, peer, 100 + r, MPI_COMM_WORLD, &st);
    MT_CHECK(rc == MPI_SUCCESS, "round %d: MPI_Recv of the packed buffer failed (class %d)", r, mt_eclass(rc));
    int64_t s0 = syncs(), unpacks0 = mt_counter("unpacks");
    int pos = p->start;
    for (int i = 0; i < p->npieces && rc == MPI_SUCCESS; i++) {
        rc = MPI_Unpack(pk.buf, p->total, &pos, u[i].buf, p->count[i], types[p->type[i]], MPI_COMM_WORLD);
        MT_CHECK(rc == MPI_SUCCESS, "round %d: MPI_Unpack of piece %d (%s) failed (class %d)", r, i,
                 type_names[p->type[i]], mt_eclass(rc));
    }
    MT_CHECK(pos == p->total, "round %d: position %d after the unpacks, want %d", r, pos, p->total);
    int64_t s1 = syncs();
    if (gdte_counts()) {
        MT_CHECK(mt_counter("unpacks") - unpacks0 == p->npieces, "round %d: %lld unpacks through gdte, want %d", r,
                 (long long)(mt_counter("unpacks") - unpacks0), p->npieces);
        if (p->kind == K_DD)
            MT_CHECK(s1 == s0, "round %d: %d MPI_Unpack calls between device buffers synchronised %lld times, want 0",
                     r, p->npieces, (long long)(s1 - s0));
        if (p->kind == K_HOSTPK || (p->kind == K_MANAGED && mt_cuda()))
            MT_CHECK(s1 - s0 == p->npieces, "round %d (%s): %lld synchronisations for %d calls that must each wait", r,
                     kind_names[p->kind], (long long)(s1 - s0), p->npieces);
    }

    /* Read back before any MPI call: default-stream copies for device memory (ordered after the
     * deferred unpacks), the CPU for host and managed memory (the calls waited). */
    unsigned char *stream = oracle_stream(p, src);
    int bad = 0;
    for (int i = 0; i < p->npieces; i++) {
        tbuf_download(&u[i]);
        unsigned char *want = malloc(u[i].len);
        poison(want, u[i].len, (unsigned)i + 2);
        int at = 0;
        for (int j = 0; j < i; j++) {
            int size;
            MPI_Type_size(types[p->type[j]], &size);
            at += size * p->count[j];
        }
        int q = p->start + at;
        MPI_Unpack(stream, p->total, &q, user_ptr(&u[i], want), p->count[i], types[p->type[i]], MPI_COMM_SELF);
        size_t k = 0;
        while (k < u[i].len && u[i].host[k] == want[k]) k++;
        MT_CHECK(k == u[i].len, "round %d: piece %d (%s x%d): byte %zu of its allocation is %d, MPI_Unpack gives %d",
                 r, i, type_names[p->type[i]], p->count[i], k, k < u[i].len ? u[i].host[k] : 0,
                 k < u[i].len ? want[k] : 0);
        bad |= k != u[i].len;
        free(want);
    }
    if (bad) describe(p, r, "FAILED (receiver)");
    free(stream);

    /* The next intercepted call waits once for what is still deferred; the one after it does
     * not wait again. */
    MT_MPI(MPI_Sendrecv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    int64_t s2 = syncs();
    MT_MPI(MPI_Sendrecv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    if (gdte_counts()) {
        if (p->kind == K_DD)
            MT_CHECK(s2 - s1 == 1, "round %d: the first MPI call after the unpacks synchronised %lld times, want 1", r,
                     (long long)(s2 - s1));
        MT_CHECK(syncs() == s2, "round %d: a second MPI call synchronised again", r);
    }
    tbuf_free(&pk);
    for (int i = 0; i < p->npieces; i++) {
        tbuf_free(&u[i]);
        tbuf_free(&src[i]);
    }
}

/* ---- errors and edge cases, on one rank ---------------------------------------------------- */
static void local_checks(void)
{
    int size;
    MPI_Type_size(types[0], &size); /* vector: 120 bytes */
    tbuf_t u, big, pk;
    tbuf_make(&u, M_DEV, types[0], 2, 0);
    mt_fill(u.host, u.len, 99);
    tbuf_upload(&u);
    tbuf_make(&big, M_DEV, types[3], 1, 0);
    mt_fill(big.host, big.len, 98);
    tbuf_upload(&big);
    int cap = 2 * size + 5;
    tbuf_make(&pk, M_DEV, MPI_DATATYPE_NULL, 1, (size_t)cap);
    poison(pk.host, pk.len, 4);
    tbuf_upload(&pk);

    /* One deferred pack, then one that does not fit: MPI_ERR_TRUNCATE, position unchanged. */
    int pos = 3;
    MT_MPI(MPI_Pack(u.buf, 1, types[0], pk.buf, cap, &pos, MPI_COMM_WORLD));
    MT_CHECK(pos == 3 + size, "position %d after one vector, want %d", pos, 3 + size);
    int p2 = pos;
    int rc = MPI_Pack(u.buf, 2, types[0], pk.buf, cap, &p2, MPI_COMM_WORLD);
    MT_CHECK(mt_eclass(rc) == MPI_ERR_TRUNCATE && p2 == pos, "pack past the end: class %d position %d", mt_eclass(rc), p2);
    p2 = pos;
    rc = MPI_Pack(big.buf, 1, types[3], pk.buf, cap, &p2, MPI_COMM_WORLD);
    MT_CHECK(mt_eclass(rc) == MPI_ERR_TRUNCATE && p2 == pos, "subarray past the end: class %d position %d", mt_eclass(rc),
             p2);
    /* A count of 0 moves nothing. */
    p2 = pos;
    MT_MPI(MPI_Pack(u.buf, 0, types[0], pk.buf, cap, &p2, MPI_COMM_WORLD));
    MT_CHECK(p2 == pos, "count 0 moved the position to %d", p2);
    /* Unpack with an insize too small for what is asked. */
    tbuf_t o;
    tbuf_make(&o, M_DEV, types[0], 2, 0);
    poison(o.host, o.len, 5);
    tbuf_upload(&o);
    p2 = 3;
    rc = MPI_Unpack(pk.buf, 3 + size + 1, &p2, o.buf, 2, types[0], MPI_COMM_WORLD);
    MT_CHECK(mt_eclass(rc) == MPI_ERR_TRUNCATE && p2 == 3, "unpack past the end: class %d position %d", mt_eclass(rc), p2);
    /* What fits still unpacks: the vector packed above. */
    MT_MPI(MPI_Unpack(pk.buf, cap, &p2, o.buf, 1, types[0], MPI_COMM_WORLD));
    MT_CHECK(p2 == 3 + size, "position %d after one unpack", p2);

    /* Expected: the MPI's own pack of the host image, unpacked into a poisoned image. Nothing of
     * the failed calls may show: the packed bytes past the first vector keep their poison. */
    tbuf_download(&pk);
    tbuf_download(&o);
    unsigned char *stream = malloc((size_t)cap), *want = malloc(pk.len), *wo = malloc(o.len);
    poison(want, pk.len, 4);
    int q = 3;
    MPI_Pack(user_ptr(&u, u.host), 1, types[0], want + MARGIN, cap, &q, MPI_COMM_SELF);
    size_t k = 0;
    while (k < pk.len && pk.host[k] == want[k]) k++;
    MT_CHECK(k == pk.len, "packed buffer byte %zu after a failed MPI_Pack is %d, want %d", k,
             k < pk.len ? pk.host[k] : 0, k < pk.len ? want[k] : 0);
    poison(wo, o.len, 5);
    q = 3;
    MPI_Unpack(want + MARGIN, cap, &q, user_ptr(&o, wo), 1, types[0], MPI_COMM_SELF);
    k = 0;
    while (k < o.len && o.host[k] == wo[k]) k++;
    MT_CHECK(k == o.len, "unpacked byte %zu after a failed MPI_Unpack is %d, want %d", k, k < o.len ? o.host[k] : 0,
             k < o.len ? wo[k] : 0);
    free(stream);
    free(want);
    free(wo);
    tbuf_free(&o);
    tbuf_free(&pk);
    tbuf_free(&big);
    tbuf_free(&u);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rounds = 6;
    uint64_t seed = 0xb47c4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
    }
    make_types();
    if (mt_size >= 2 && mt_rank < 2) {
        for (int kind = 0; kind < K_COUNT; kind++) {
            if (kind == K_MANAGED && !mt_cuda()) continue;
            for (int r = 0; r < rounds; r++) {
                plan_t p;
                int rid = kind * 1000 + r;
                plan_round(&p, seed, rid, kind);
                int sender_rank = r % 2;
                if (mt_rank == sender_rank) sender(&p, rid % 1000 + kind * 50, 1 - sender_rank);
                else receiver(&p, rid % 1000 + kind * 50, sender_rank);
            }
        }
    }
    local_checks();
    if (mt_rank == 0 && gdte_mpi_counter)
        printf("pack_batch_test: %d rounds of each kind, %lld packs and %lld unpacks through gdte, %lld "
               "synchronisations\n",
               rounds, (long long)mt_counter("packs"), (long long)mt_counter("unpacks"), (long long)syncs());
    for (int i = 0; i < NTYPES; i++) MPI_Type_free(&types[i]);
    return mt_finish("pack_batch_test");
}
