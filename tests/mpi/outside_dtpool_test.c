/*
 * A pool of datatypes, every constructor MPI has, exchanged point-to-point between layouts of
 * one type signature, the way an outside program's test suite drives an MPI: each rank sends to
 * its right neighbour and receives from its left (np 2: a pair, np 3: an odd ring).
 *
 * The pool (built identically on every rank from --seed): contiguous, vector (negative stride
 * too), hvector (negative byte stride), indexed (unsorted), hindexed (negative displacements,
 * all before buf), indexed_block, hindexed_block, struct (mixed fields, padding, bounds moved
 * with MPI_Type_create_resized as MPI_LB/MPI_UB once did), subarray (C and Fortran order),
 * darray (block and cyclic), resized (negative lb, larger extent, smaller extent: elements
 * interleaved), dup; each over a basic type, then nestings of depth 3 and 4 of them. Every
 * entry keeps its type signature (runs of basic types), from which its flattened form (a
 * contiguous, or a struct of packed runs) is built.
 *
 * A case: send `ca` of A, receive `cb` of B, B of the same signature and another layout (A's
 * flattened form, or another pool entry of the same basic type: then the receive may be longer
 * than the message and MPI_Get_count MPI_UNDEFINED); one call pattern (Send/Recv,
 * Isend/Irecv + Waitall, Sendrecv, persistent Send_init/Recv_init + Startall twice with new
 * data, Probe + Get_count/Get_elements + Recv, Mprobe/Mrecv, Isend/Irecv at MPI_BOTTOM with the
 * addresses of device memory); run on host->host, host->device, device->host, device->device.
 * Buffers are cut to the bytes the type map touches plus a poisoned margin, so `buf` lies outside
 * its allocation whenever the data starts past it or ends before it. Receive buffers are
 * poisoned; the oracle is the MPI's own MPI_Pack of the sender's host image with A and
 * MPI_Unpack into a poisoned host image with B, and every byte of the allocation is compared.
 * The statuses (MPI_Get_count in bytes and in B, MPI_Get_elements, of the probe too) must equal
 * those of the host->host run.
 *
 * Then: truncated receives past the eager size (MPI_ERR_TRUNCATE, the same class on host and
 * device, no byte of a device receive outside its type map written), and MPI_Pack/MPI_Unpack of
 * several items into one buffer at running positions from an odd start, device and host,
 * against the all-host result byte for byte (MPI_Pack_size too; an outsize too small gives the
 * host's error class).
 *
 * Fixed regressions first: (h)vectors of stride -1 byte, which Open MPI reads its own way.
 *
 * Usage: outside_dtpool_test [--seed S] [--cases N] [--only regress|xchg|trunc|pack] [--wide] [--verbose]
 */
#include <stddef.h>
#include "mpitest.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

#define MARGIN 48
#define POISON 0xA5
#define MAXRUN 24
#define MAXPOOL 96
#define MAX_SPAN (192 << 10)  /* bytes one element of a pool type may span */
#define MAX_SIZE (24 << 10)   /* bytes one element of a pool type may hold */

static int left, right, verbose;
static int64_t rr(int64_t lo, int64_t hi) { return lo + (int64_t)(mt_rnd() % (uint64_t)(hi - lo + 1)); }

/* ---- type signatures ---------------------------------------------------------------------- */

/* One element's signature as runs of basic types; `bad` once it outgrows MAXRUN. */
typedef struct {
    MPI_Datatype b[MAXRUN];
    long k[MAXRUN];
    int n, bad;
} tsig_t;

static void sig_add(tsig_t *s, MPI_Datatype b, long k)
{
    if (k <= 0) return;
    if (s->n && s->b[s->n - 1] == b) {
        s->k[s->n - 1] += k;
        return;
    }
    if (s->n == MAXRUN) {
        s->bad = 1;
        return;
    }
    s->b[s->n] = b;
    s->k[s->n++] = k;
}
static void sig_cat(tsig_t *d, const tsig_t *s, long times)
{
    if (s->bad) d->bad = 1;
    if (s->n == 1) { /* a single run repeats into one run */
        sig_add(d, s->b[0], s->k[0] * times);
        return;
    }
    for (long t = 0; t < times && !d->bad; t++)
        for (int i = 0; i < s->n; i++) sig_add(d, s->b[i], s->k[i]);
}
/* ---- the pool ----------------------------------------------------------------------------- */

typedef struct {
    MPI_Datatype t;
    tsig_t s;
    int depth;
    unsigned recv_ok; /* bit c: `c` elements have no overlapping bytes (may be received into) */
    char desc[480];
} ent_t;

static ent_t pool[MAXPOOL];
static int npool;

/* --wide: the basic types also include long double, its 32-byte complex, C_BOOL and the pair
 * types (MPI_2INT, MPI_SHORT_INT with its hole, ...), as other MPIs' type pools use them. */
static int wide;
static const MPI_Datatype *basics(int *n)
{
    static MPI_Datatype b[12];
    b[0] = MPI_INT, b[1] = MPI_DOUBLE, b[2] = MPI_SHORT, b[3] = MPI_CHAR;
    b[4] = MPI_LONG_DOUBLE, b[5] = MPI_C_LONG_DOUBLE_COMPLEX, b[6] = MPI_2INT, b[7] = MPI_DOUBLE_INT;
    b[8] = MPI_SHORT_INT, b[9] = MPI_FLOAT_INT, b[10] = MPI_LONG_DOUBLE_INT, b[11] = MPI_C_BOOL;
    *n = wide ? 12 : 4;
    return b;
}
static const char *bname(MPI_Datatype b)
{
    static const char *names[12] = {"int", "double", "short", "char", "long double", "ld complex",
                                    "2int", "double_int", "short_int", "float_int", "ld_int", "bool"};
    int nb;
    const MPI_Datatype *bs = basics(&nb);
    for (int i = 0; i < 12; i++)
        if (bs[i] == b) return names[i];
    return "?";
}

/* `count` elements of `t` touch size*count distinct bytes (no byte twice: a valid receive),
 * told by the MPI itself: 0xFF bytes unpacked into zeros, then the 0xFF bytes counted. */
static int map_ok(MPI_Datatype t, int count)
{
    ptrdiff_t lo, hi;
    int size;
    mt_span(t, count, &lo, &hi);
    MPI_Type_size(t, &size);
    if (!size || !count) return 1;
    size_t n = (size_t)(hi - lo), touched = 0;
    unsigned char *img = calloc(1, n), *p = malloc((size_t)size * count);
    memset(p, 0xFF, (size_t)size * count);
    int pos = 0;
    MPI_Unpack(p, size * count, &pos, img - lo, count, t, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) touched += img[i] == 0xFF;
    free(img);
    free(p);
    return touched == (size_t)size * count;
}

typedef struct {
    MPI_Datatype t;
    tsig_t s;
    char d[480];
} node_t;

static node_t leaf(MPI_Datatype b)
{
    node_t n = {b, {{0}, {0}, 0, 0}, ""};
    sig_add(&n.s, b, 1);
    snprintf(n.d, sizeof n.d, "%s", bname(b));
    return n;
}

/* Non-overlapping positions for `n` blocks of `bl[i]` units (gaps of 0..2 units), in a shuffled
 * order, shifted by `shift` units. */
static void positions(int n, int *bl, long shift, long *pos)
{
    long at = 0;
    for (int i = 0; i < n; i++) {
        at += rr(0, 2);
        pos[i] = at + shift;
        at += bl[i];
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rr(0, i);
        long t = pos[i];
        pos[i] = pos[j], pos[j] = t;
        int tb = bl[i]; /* block lengths go with their positions */
        bl[i] = bl[j], bl[j] = tb;
    }
}

enum {
    K_CONTIG, K_VECTOR, K_HVECTOR, K_INDEXED, K_HINDEXED, K_INDEXED_BLOCK, K_HINDEXED_BLOCK, K_STRUCT, K_SUBARRAY,
    K_DARRAY, K_RESIZED, K_DUP, K_NKINDS
};
static const char *kname[K_NKINDS] = {"contig", "vector", "hvector", "indexed", "hindexed", "indexed_block",
                                      "hindexed_block", "struct", "subarray", "darray", "resized", "dup"};

/* One constructor `k` over child `c` (variant `v` picks sign and shape choices). The child is
 * not freed: the caller owns it. */
static node_t build(int k, const node_t *c, int v)
{
    node_t n = {MPI_DATATYPE_NULL, {{0}, {0}, 0, 0}, ""};
    MPI_Aint clb, cext;
    MPI_Type_get_extent(c->t, &clb, &cext);
    int csize;
    MPI_Type_size(c->t, &csize);
    switch (k) {
    case K_CONTIG: {
        int cnt = (int)rr(1, 4);
        MPI_Type_contiguous(cnt, c->t, &n.t);
        sig_cat(&n.s, &c->s, cnt);
        snprintf(n.d, sizeof n.d, "contig(%d,%s)", cnt, c->d);
        break;
    }
    case K_VECTOR: {
        int cnt = (int)rr(1, 4), bl = (int)rr(1, 3), st = bl + (int)rr(0, 2);
        if (v & 1) st = -st;
        MPI_Type_vector(cnt, bl, st, c->t, &n.t);
        sig_cat(&n.s, &c->s, (long)cnt * bl);
        snprintf(n.d, sizeof n.d, "vector(%d,%d,%d,%s)", cnt, bl, st, c->d);
        break;
    }
    case K_HVECTOR: {
        int cnt = (int)rr(2, 4), bl = (int)rr(1, 2);
        MPI_Aint st = bl * cext + 4 * rr(0, 3);
        if (v & 1) st = -st;
        MPI_Type_create_hvector(cnt, bl, st, c->t, &n.t);
        sig_cat(&n.s, &c->s, (long)cnt * bl);
        snprintf(n.d, sizeof n.d, "hvector(%d,%d,%ld,%s)", cnt, bl, (long)st, c->d);
        break;
    }
    case K_INDEXED:
    case K_HINDEXED:
    case K_INDEXED_BLOCK:
    case K_HINDEXED_BLOCK: {
        int cnt = (int)rr(1, 4), bl[4], blk = (int)rr(1, 3), tot = 0;
        long pos[4];
        int blocked = k == K_INDEXED_BLOCK || k == K_HINDEXED_BLOCK, bytes = k == K_HINDEXED || k == K_HINDEXED_BLOCK;
        for (int i = 0; i < cnt; i++) bl[i] = blocked ? blk : (int)rr(i ? 0 : 1, 3); /* empty blocks too */
        /* indexed: displacements >= 0 (in extents); hindexed: some or all negative (bytes) */
        long shift = !bytes ? rr(0, 2) : (v & 1) ? -40 : -rr(0, 6);
        positions(cnt, bl, shift, pos);
        char dl[160] = "";
        for (int i = 0; i < cnt; i++) {
            tot += bl[i];
            size_t l = strlen(dl);
            snprintf(dl + l, sizeof dl - l, "%s%d:%ld", i ? " " : "", bl[i], pos[i]);
        }
        if (bytes) {
            MPI_Aint d[4];
            for (int i = 0; i < cnt; i++) d[i] = (MPI_Aint)pos[i] * cext;
            if (blocked) MPI_Type_create_hindexed_block(cnt, blk, d, c->t, &n.t);
            else MPI_Type_create_hindexed(cnt, bl, d, c->t, &n.t);
        } else {
            int d[4];
            for (int i = 0; i < cnt; i++) d[i] = (int)pos[i];
            if (blocked) MPI_Type_create_indexed_block(cnt, blk, d, c->t, &n.t);
            else MPI_Type_indexed(cnt, bl, d, c->t, &n.t);
        }
        sig_cat(&n.s, &c->s, tot);
        snprintf(n.d, sizeof n.d, "%s([%s]%s,%s)", kname[k], dl, bytes ? "x ext" : "", c->d);
        break;
    }
    case K_STRUCT: {
        /* child, basic, (child): padded between fields; maybe bounds moved (lb < 0, ub past) */
        int nb;
        const MPI_Datatype *bs = basics(&nb);
        int cnt = (int)rr(2, 3), bl[3];
        MPI_Datatype ty[3];
        MPI_Aint d[3], at = 0;
        char fl[400] = "";
        for (int i = 0; i < cnt; i++) {
            ty[i] = i == 1 ? bs[rr(0, nb - 1)] : c->t;
            bl[i] = (int)rr(1, 2);
            MPI_Aint flb, fext;
            MPI_Type_get_extent(ty[i], &flb, &fext);
            at = (at + 7) / 8 * 8 + 8 * rr(0, 1); /* padding */
            d[i] = at - flb;
            at += bl[i] * fext;
            if (i == 1) sig_add(&n.s, ty[i], bl[i]);
            else sig_cat(&n.s, &c->s, bl[i]);
            size_t l = strlen(fl);
            snprintf(fl + l, sizeof fl - l, "%s%d*%s@%ld", i ? " " : "", bl[i], i == 1 ? bname(ty[i]) : "c", (long)d[i]);
        }
        MPI_Datatype st;
        MPI_Type_create_struct(cnt, bl, d, ty, &st);
        if (v & 1) {
            MPI_Aint lb, ext;
            MPI_Type_get_extent(st, &lb, &ext);
            MPI_Aint nlb = lb - 8 * rr(1, 3), next = ext + (lb - nlb) + 8 * rr(0, 2);
            MPI_Type_create_resized(st, nlb, next, &n.t);
            MPI_Type_free(&st);
            snprintf(n.d, sizeof n.d, "struct{%s; lb %ld ext %ld}(c=%s)", fl, (long)nlb, (long)next, c->d);
        } else {
            n.t = st;
            snprintf(n.d, sizeof n.d, "struct{%s}(c=%s)", fl, c->d);
        }
        break;
    }
    case K_SUBARRAY: {
        int nd = (int)rr(2, 3), sz[3], sub[3], stt[3], order = (v & 1) ? MPI_ORDER_FORTRAN : MPI_ORDER_C;
        long tot = 1;
        for (int i = 0; i < nd; i++) {
            sz[i] = (int)rr(2, 4);
            sub[i] = (int)rr(1, sz[i]);
            stt[i] = (int)rr(0, sz[i] - sub[i]);
            tot *= sub[i];
        }
        MPI_Type_create_subarray(nd, sz, sub, stt, order, c->t, &n.t);
        sig_cat(&n.s, &c->s, tot);
        snprintf(n.d, sizeof n.d, "subarray%s(%dd %dx%dx%d sub %dx%dx%d at %d,%d,%d,%s)", order == MPI_ORDER_C ? "C" : "F",
                 nd, sz[0], sz[1], nd > 2 ? sz[2] : 1, sub[0], sub[1], nd > 2 ? sub[2] : 1, stt[0], stt[1],
                 nd > 2 ? stt[2] : 0, c->d);
        break;
    }
    case K_DARRAY: {
        int g[2] = {(int)rr(3, 6), (int)rr(3, 6)}, ps[2] = {(int)rr(1, 2), 2};
        int cyc = v & 1, dist[2] = {cyc ? MPI_DISTRIBUTE_CYCLIC : MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
        int darg[2] = {cyc ? (int)rr(1, 2) : MPI_DISTRIBUTE_DFLT_DARG, (int)rr(1, 2)};
        if (!cyc && (v & 2)) dist[1] = MPI_DISTRIBUTE_BLOCK, darg[1] = MPI_DISTRIBUTE_DFLT_DARG;
        int np = ps[0] * ps[1], rk = (int)rr(0, np - 1), order = (v & 4) ? MPI_ORDER_FORTRAN : MPI_ORDER_C;
        MPI_Type_create_darray(np, rk, 2, g, dist, darg, ps, order, c->t, &n.t);
        int size;
        MPI_Type_size(n.t, &size);
        sig_cat(&n.s, &c->s, csize ? size / csize : 0);
        snprintf(n.d, sizeof n.d, "darray%s(rank %d of %dx%d, %dx%d, %s/%d %s/%d,%s)", order == MPI_ORDER_C ? "C" : "F", rk,
                 ps[0], ps[1], g[0], g[1], cyc ? "cyc" : "blk", darg[0], dist[1] == MPI_DISTRIBUTE_CYCLIC ? "cyc" : "blk",
                 darg[1], c->d);
        break;
    }
    case K_RESIZED: {
        MPI_Aint lb = clb, ext = cext;
        int w = v % 3;
        if (w == 0) lb = clb - 4 * rr(1, 6), ext = cext + (clb - lb); /* negative lb */
        if (w == 1) ext = cext + 4 * rr(1, 8);                         /* larger extent */
        if (w == 2) lb = clb - 4 * rr(0, 2), ext = cext > 8 ? cext / 2 : cext; /* smaller: interleaves */
        MPI_Type_create_resized(c->t, lb, ext, &n.t);
        sig_cat(&n.s, &c->s, 1);
        snprintf(n.d, sizeof n.d, "resized(lb %ld ext %ld,%s)", (long)lb, (long)ext, c->d);
        break;
    }
    case K_DUP:
        MPI_Type_dup(c->t, &n.t);
        sig_cat(&n.s, &c->s, 1);
        snprintf(n.d, sizeof n.d, "dup(%s)", c->d);
        break;
    }
    return n;
}

static int is_basic(MPI_Datatype t)
{
    int nb;
    const MPI_Datatype *b = basics(&nb);
    for (int i = 0; i < nb; i++)
        if (b[i] == t) return 1;
    return 0;
}

/* A type of depth `depth` (a chain of constructors over a basic type); NULL type if too big. */
static node_t random_node(int depth, int basic_only)
{
    int nb;
    const MPI_Datatype *bs = basics(&nb);
    node_t c = leaf(bs[rr(0, basic_only ? 1 : nb - 1)]);
    for (int d = 0; d < depth; d++) {
        node_t n = build((int)rr(0, K_NKINDS - 1), &c, (int)rr(0, 7));
        if (!is_basic(c.t)) MPI_Type_free(&c.t);
        c = n;
        MPI_Aint lb, ext, tlb, text;
        int size;
        MPI_Type_get_extent(c.t, &lb, &ext);
        MPI_Type_get_true_extent(c.t, &tlb, &text);
        MPI_Type_size(c.t, &size);
        if (c.s.bad || size <= 0 || size > MAX_SIZE || text > MAX_SPAN || ext > MAX_SPAN || ext <= 0 ||
            labs((long)tlb) > MAX_SPAN) {
            MPI_Type_free(&c.t);
            c.t = MPI_DATATYPE_NULL;
            return c;
        }
    }
    return c;
}

static void pool_add(node_t n, int depth)
{
    if (npool == MAXPOOL) {
        MPI_Type_free(&n.t);
        return;
    }
    ent_t *e = &pool[npool++];
    MPI_Type_commit(&n.t);
    e->t = n.t;
    e->s = n.s;
    e->depth = depth;
    snprintf(e->desc, sizeof e->desc, "%s", n.d);
    e->recv_ok = 0;
    for (int c = 1; c <= 5; c++)
        if (map_ok(e->t, c)) e->recv_ok |= 1u << c;
}

static void make_pool(void)
{
    /* Every constructor over int and double, in each of its variants (sign of strides and
     * displacements, C/Fortran order, block/cyclic, the three resizes). */
    for (int k = 0; k < K_NKINDS; k++)
        for (int b = 0; b < 2; b++)
            for (int v = 0; v < (k == K_RESIZED ? 3 : k == K_DARRAY ? 4 : 2); v++) {
                node_t c = leaf(b ? MPI_DOUBLE : MPI_INT);
                int vv = k == K_DARRAY ? (v & 1) | ((v & 2) << 1) | (v & 2) : v;
                pool_add(build(k, &c, vv), 1);
            }
    /* Nestings of depth 3 and 4. */
    while (npool < MAXPOOL) {
        int depth = (int)rr(3, 4);
        node_t n = random_node(depth, 0);
        if (n.t != MPI_DATATYPE_NULL) pool_add(n, depth);
    }
}

/* The flattened form of `count` elements of `e`: one contiguous of a basic type, or a struct of
 * packed runs (struct vs flattened struct). Returns its count (1, or the number of basic
 * elements when it is the basic type itself). */
static int flatten(const ent_t *e, int count, MPI_Datatype *f, int as_basic)
{
    if (e->s.n == 1) {
        long n = e->s.k[0] * count;
        if (as_basic) {
            *f = e->s.b[0];
            return (int)n;
        }
        MPI_Type_contiguous((int)n, e->s.b[0], f);
        MPI_Type_commit(f);
        return 1;
    }
    int bl[MAXRUN];
    MPI_Aint d[MAXRUN], at = 0;
    MPI_Datatype ty[MAXRUN];
    for (int i = 0; i < e->s.n; i++) {
        /* runs one after another by extent: a pair type (--wide) has a hole inside its extent,
         * and runs placed by size would overlap, which a receive's type must not */
        MPI_Aint blb, bext;
        MPI_Type_get_extent(e->s.b[i], &blb, &bext);
        bl[i] = (int)e->s.k[i];
        d[i] = at;
        ty[i] = e->s.b[i];
        at += (MPI_Aint)bl[i] * bext;
    }
    MPI_Datatype st;
    MPI_Type_create_struct(e->s.n, bl, d, ty, &st);
    MPI_Type_create_resized(st, 0, at, f); /* no alignment padding between runs */
    MPI_Type_free(&st);
    MPI_Type_commit(f);
    return count;
}

/* ---- buffers ------------------------------------------------------------------------------ */

/* Buffers sized to a type map, MARGIN poisoned bytes each side (mpitest.h). */
typedef mt_ubuf_t ubuf_t;
#define ub_free mt_ubuf_free
#define ub_check mt_ubuf_check

static size_t host_slack; /* room past a buffer the MPI may write (truncation below) */
static ubuf_t ub_new(int dev, MPI_Datatype t, int count) { return mt_ubuf_new(dev, t, count, MARGIN, host_slack); }
static void ub_set(ubuf_t *u, unsigned seed) { mt_ubuf_set(u, seed, POISON); }

/* The oracle: `dimg` (poisoned image, user pointer at `doff`) after receiving `sc` of `st` from
 * the image `simg` (user pointer at `soff`) into `rc` of `rt`. The message may be shorter than the
 * receive: the MPI's MPI_Unpack refuses short input, so the packed bytes are padded twice, with
 * 0x00 and with 0xFF, and the bytes the padding reached (they differ) are poison again. */
static int oracle(const unsigned char *simg, ptrdiff_t soff, MPI_Datatype st, int sc, unsigned char *dimg, size_t dlen,
                  ptrdiff_t doff, MPI_Datatype rt, int rc)
{
    int psize = 0, pos = 0, rsize;
    MPI_Pack_size(sc, st, MPI_COMM_WORLD, &psize);
    MPI_Type_size(rt, &rsize);
    size_t need = (size_t)rsize * rc, cap = (size_t)psize > need ? (size_t)psize : need;
    unsigned char *p = malloc(cap ? cap : 1);
    MT_MPI(MPI_Pack(simg + soff, sc, st, p, psize, &pos, MPI_COMM_WORLD));
    int packed = pos;
    if ((size_t)packed >= need) {
        pos = 0;
        if (need) MT_MPI(MPI_Unpack(p, (int)need, &pos, dimg + doff, rc, rt, MPI_COMM_WORLD));
    } else {
        unsigned char *d2 = malloc(dlen);
        memcpy(d2, dimg, dlen);
        memset(p + packed, 0x00, need - packed);
        pos = 0;
        MT_MPI(MPI_Unpack(p, (int)need, &pos, dimg + doff, rc, rt, MPI_COMM_WORLD));
        memset(p + packed, 0xFF, need - packed);
        pos = 0;
        MT_MPI(MPI_Unpack(p, (int)need, &pos, d2 + doff, rc, rt, MPI_COMM_WORLD));
        for (size_t i = 0; i < dlen; i++)
            if (dimg[i] != d2[i]) dimg[i] = POISON;
        free(d2);
    }
    free(p);
    return packed;
}

/* ---- one case ----------------------------------------------------------------------------- */

enum { C_SENDRECV_BLOCK, C_WAITALL, C_SENDRECV, C_PERSIST, C_PROBE, C_MPROBE, C_BOTTOM, C_NCALLS };
static const char *cname[C_NCALLS] = {"Send/Recv", "Isend/Irecv+Waitall", "Sendrecv", "persistent",
                                      "Probe+Recv", "Mprobe/Mrecv", "MPI_BOTTOM"};
static const char *hdname[4] = {"h->h", "h->d", "d->h", "d->d"};

typedef struct {
    int bytes, count, elems, pbytes, pcount, pelems; /* of the receive; of the probe */
} stat_t;

static unsigned seed_of(int rank, int k, int round) { return 1u + (unsigned)rank * 7919u + (unsigned)k * 104729u + (unsigned)round * 31u; }

static stat_t stat_of(const MPI_Status *s, MPI_Datatype rt)
{
    stat_t r = {-7, -7, -7, 0, 0, 0};
    MPI_Get_count(s, MPI_BYTE, &r.bytes);
    MPI_Get_count(s, rt, &r.count);
    MPI_Get_elements(s, rt, &r.elems);
    return r;
}

/* Case k: every rank sends `sc` of `st` right and receives `rc` of `rt` from the left with call
 * `c`, buffers on host or device as `hd` says (bit 0: receive on device, bit 1: send). */
static void exchange(int k, const char *desc, MPI_Datatype st, int sc, MPI_Datatype rt, int rc, int c, int hd,
                     stat_t *ref)
{
    int sdev = (hd >> 1) & 1, rdev = hd & 1;
    char what[1200];
    snprintf(what, sizeof what, "case %d %s %s: %s", k, cname[c], hdname[hd], desc);
    if (verbose && mt_rank == 0) fprintf(stderr, "%s\n", what);
    const int tag = 10 + k % 1000;
    ubuf_t s = ub_new(sdev, st, sc), r = ub_new(rdev, rt, rc), l = ub_new(0, st, sc);
    MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Datatype sbt = MPI_DATATYPE_NULL, rbt = MPI_DATATYPE_NULL;
    int rounds = c == C_PERSIST ? 2 : 1;
    if (c == C_PERSIST) {
        MT_MPI(MPI_Send_init(s.buf, sc, st, right, tag, MPI_COMM_WORLD, &q[0]));
        MT_MPI(MPI_Recv_init(r.buf, rc, rt, left, tag, MPI_COMM_WORLD, &q[1]));
    }
    if (c == C_BOTTOM) {
        sbt = mt_bottom_type(s.buf, sc, st);
        rbt = mt_bottom_type(r.buf, rc, rt);
    }
    for (int round = 0; round < rounds; round++) {
        ub_set(&s, seed_of(mt_rank, k, round));
        ub_set(&l, seed_of(left, k, round));
        ub_set(&r, 0);
        oracle(l.img, l.buf - l.base, st, sc, r.img, r.len, r.buf - r.base, rt, rc);
        MPI_Status sts[2], ps;
        MPI_Status *rs = &sts[1];
        MPI_Message msg;
        stat_t got = {0};
        int first = mt_rank == 0;
        switch (c) {
        case C_SENDRECV_BLOCK:
            for (int step = 0; step < 2; step++) {
                if ((step == 0) == first) MT_MPI(MPI_Send(s.buf, sc, st, right, tag, MPI_COMM_WORLD));
                else MT_MPI(MPI_Recv(r.buf, rc, rt, left, tag, MPI_COMM_WORLD, rs));
            }
            break;
        case C_WAITALL:
            MT_MPI(MPI_Irecv(r.buf, rc, rt, left, tag, MPI_COMM_WORLD, &q[1]));
            MT_MPI(MPI_Isend(s.buf, sc, st, right, tag, MPI_COMM_WORLD, &q[0]));
            MT_MPI(MPI_Waitall(2, q, sts));
            break;
        case C_SENDRECV:
            MT_MPI(MPI_Sendrecv(s.buf, sc, st, right, tag, r.buf, rc, rt, left, tag, MPI_COMM_WORLD, rs));
            break;
        case C_PERSIST:
            MT_MPI(MPI_Startall(2, q));
            MT_MPI(MPI_Waitall(2, q, sts));
            break;
        case C_PROBE:
        case C_MPROBE:
            MT_MPI(MPI_Isend(s.buf, sc, st, right, tag, MPI_COMM_WORLD, &q[0]));
            if (c == C_PROBE) MT_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &ps));
            else MT_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &ps));
            {
                stat_t p = stat_of(&ps, rt);
                got.pbytes = p.bytes, got.pcount = p.count, got.pelems = p.elems;
            }
            MT_CHECK(ps.MPI_SOURCE == left && ps.MPI_TAG == tag, "%s: probe source %d tag %d", what, ps.MPI_SOURCE,
                     ps.MPI_TAG);
            if (c == C_PROBE) MT_MPI(MPI_Recv(r.buf, rc, rt, ps.MPI_SOURCE, ps.MPI_TAG, MPI_COMM_WORLD, rs));
            else MT_MPI(MPI_Mrecv(r.buf, rc, rt, &msg, rs));
            MT_MPI(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
            break;
        case C_BOTTOM:
            MT_MPI(MPI_Irecv(MPI_BOTTOM, 1, rbt, left, tag, MPI_COMM_WORLD, &q[1]));
            MT_MPI(MPI_Isend(MPI_BOTTOM, 1, sbt, right, tag, MPI_COMM_WORLD, &q[0]));
            MT_MPI(MPI_Waitall(2, q, sts));
            break;
        }
        int bad = !ub_check(&r, what);
        mt_fill(s.img, s.len, seed_of(mt_rank, k, round));
        bad |= !ub_check(&s, what);
        MT_CHECK(rs->MPI_SOURCE == left && rs->MPI_TAG == tag, "%s: source %d tag %d", what, rs->MPI_SOURCE, rs->MPI_TAG);
        stat_t g = stat_of(rs, c == C_BOTTOM ? rbt : rt);
        got.bytes = g.bytes, got.count = g.count, got.elems = g.elems;
        if (hd == 0 && round == 0) *ref = got;
        else
            MT_CHECK(!memcmp(&got, ref, sizeof got),
                     "%s: status bytes/count/elements %d/%d/%d probe %d/%d/%d; host run %d/%d/%d probe %d/%d/%d", what,
                     got.bytes, got.count, got.elems, got.pbytes, got.pcount, got.pelems, ref->bytes, ref->count,
                     ref->elems, ref->pbytes, ref->pcount, ref->pelems);
        if (bad && mt_failures < 40)
            fprintf(stderr, "[rank %d] failing case: --seed <S> --only xchg, case %d: send %d x %s\n", mt_rank, k, sc,
                    desc);
    }
    if (c == C_PERSIST) {
        MT_MPI(MPI_Request_free(&q[0]));
        MT_MPI(MPI_Request_free(&q[1]));
    }
    if (sbt != MPI_DATATYPE_NULL) MPI_Type_free(&sbt);
    if (rbt != MPI_DATATYPE_NULL) MPI_Type_free(&rbt);
    ub_free(&s);
    ub_free(&r);
    ub_free(&l);
}

/* One case on all four host/device pairings, h->h first (its statuses are the reference). */
static void run_case(int k, const char *desc, MPI_Datatype st, int sc, MPI_Datatype rt, int rc, int c)
{
    stat_t ref;
    for (int hd = 0; hd < 4; hd++) {
        exchange(k, desc, st, sc, rt, rc, c, hd, &ref);
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

static int max_bytes = 160 << 10;

static int too_big(MPI_Datatype t, int count)
{
    ptrdiff_t lo, hi;
    int size;
    mt_span(t, count, &lo, &hi);
    MPI_Type_size(t, &size);
    return hi - lo > 4 * max_bytes || (long)size * count > max_bytes;
}

/* Each pool entry against its flattened form, both ways; then `ncases` random pairings of pool
 * entries of one basic type (the receive may be longer than the message). */
static int ncase;
static void pool_exchanges(int ncases)
{
    for (int i = 0; i < npool; i++) {
        ent_t *e = &pool[i];
        int cnt = (int)rr(1, 5), c = (int)(ncase % C_NCALLS), way = (int)rr(0, 1);
        MPI_Datatype f;
        int as_basic = (int)rr(0, 1);
        if (too_big(e->t, cnt)) continue;
        int fc = flatten(e, cnt, &f, e->s.n == 1 && as_basic);
        char desc[1100];
        if (way == 1 && !(e->recv_ok >> cnt & 1)) way = 0;
        snprintf(desc, sizeof desc, "%s %d x [%s] %s %d x flattened (pool %d, depth %d)", way ? "recv" : "send", cnt,
                 e->desc, way ? "from" : "to", fc, i, e->depth);
        if (way == 0) run_case(ncase++, desc, e->t, cnt, f, fc, c);
        else run_case(ncase++, desc, f, fc, e->t, cnt, c);
        if (!is_basic(f)) MPI_Type_free(&f);
    }
    for (int n = 0; n < ncases; n++) {
        int a = (int)rr(0, npool - 1), b = (int)rr(0, npool - 1), tries = 0;
        while (pool[a].s.n != 1) a = (int)rr(0, npool - 1);
        /* same single basic type on both sides */
        while ((pool[a].s.n != 1 || pool[b].s.n != 1 || pool[a].s.b[0] != pool[b].s.b[0] || a == b) && tries++ < 200)
            b = (int)rr(0, npool - 1);
        if (tries >= 200) continue;
        ent_t *A = &pool[a], *B = &pool[b];
        int ca = (int)rr(1, 5);
        long tot = A->s.k[0] * ca, nb = B->s.k[0];
        int cb = (int)((tot + nb - 1) / nb);
        if (rr(0, 3) == 0) cb += (int)rr(1, 2); /* more room than the message */
        int c = (int)rr(0, C_NCALLS - 1);
        if (too_big(A->t, ca) || too_big(B->t, cb) || !map_ok(B->t, cb)) continue;
        char desc[1100];
        snprintf(desc, sizeof desc, "send %d x [%s] (pool %d) recv %d x [%s] (pool %d)", ca, A->desc, a, cb, B->desc, b);
        run_case(ncase++, desc, A->t, ca, B->t, cb, c);
    }
}

/* ---- fixed regressions -------------------------------------------------------------------- */

/* (h)vectors of stride -1 byte: Open MPI 4.1 reads that stride as one block's extent, and gdte's
 * import refused such a type on device buffers (the MPI's bounds disagreed with its reading:
 * MPI_ERR_INTERN where the host run went through). Found by seed 32 at np 3 (MPI_BOTTOM of
 * dup(resized(lb 0 ext 30,vector(2,1,-1,char)))). Every call, every pairing, both directions. */
static void regressions(void)
{
    MPI_Datatype t[4], u;
    MPI_Type_vector(2, 1, -1, MPI_CHAR, &t[0]);
    MPI_Type_create_hvector(3, 1, -1, MPI_CHAR, &t[1]);
    MPI_Type_vector(2, 2, -1, MPI_CHAR, &t[2]); /* send only: overlaps as the standard reads it */
    MPI_Type_vector(2, 1, -1, MPI_CHAR, &u);
    MPI_Type_create_resized(u, 0, 30, &t[3]);
    MPI_Type_free(&u);
    static const char *d[4] = {"vector(2,1,-1,char)", "hvector(3,1,-1B,char)", "vector(2,2,-1,char)",
                               "resized(lb 0 ext 30,vector(2,1,-1,char))"};
    for (int i = 0; i < 4; i++) {
        MPI_Type_commit(&t[i]);
        int size;
        MPI_Type_size(t[i], &size);
        for (int c = 0; c < C_NCALLS; c++)
            for (int way = 0; way < 2; way++) {
                int cnt = 1 + c % 3, n = size * cnt;
                if (way && !map_ok(t[i], cnt)) continue;
                char desc[200];
                snprintf(desc, sizeof desc, "regression: %s %d x %s %s %d chars", way ? "recv" : "send", cnt, d[i],
                         way ? "from" : "to", n);
                if (!way) run_case(ncase++, desc, t[i], cnt, MPI_CHAR, n, c);
                else run_case(ncase++, desc, MPI_CHAR, n, t[i], cnt, c);
            }
        MPI_Type_free(&t[i]);
    }
}

/* ---- truncation past the eager size -------------------------------------------------------- */

static void truncation(void)
{
    MPI_Datatype sv, rv;
    /* send: 24000 ints as a negative-stride hvector of pairs (96000 B); receive: a vector of
     * 3-int blocks every 5 ints, room for 18000 ints */
    MPI_Type_create_hvector(12000, 2, -12, MPI_INT, &sv);
    MPI_Type_vector(6000, 3, 5, MPI_INT, &rv);
    MPI_Type_commit(&sv);
    MPI_Type_commit(&rv);
    struct {
        MPI_Datatype st, rt;
        int sc, rc;
        const char *d;
    } tc[3] = {{sv, rv, 1, 1, "hvector(12000,2,-12) 96000 B into vector(6000,3,5) 72000 B"},
               {MPI_INT, rv, 40000, 1, "40000 ints 160000 B into vector(6000,3,5)"},
               {sv, MPI_INT, 1, 20000, "hvector 96000 B into 20000 ints"}};
    for (int t = 0; t < 3; t++)
        for (int way = 0; way < 4; way++)
            for (int hd = 0; hd < 4; hd++) {
                int sdev = (hd >> 1) & 1, rdev = hd & 1, rcode;
                char what[300];
                snprintf(what, sizeof what, "truncation %s way %d %s", tc[t].d, way, hdname[hd]);
                if (verbose && mt_rank == 0) fprintf(stderr, "%s\n", what);
                /* Open MPI 4.1's single-copy path writes a truncated contiguous host receive
                 * past its end, up to the message's length: room for it, not checked. So for a
                 * dense device receive that gdte hands to a GPU-aware MPI as it is (counter
                 * "direct"; in fake mode the MPI's single copy reaches it). */
                host_slack = 200000;
                ubuf_t s = ub_new(sdev, tc[t].st, tc[t].sc), r = ub_new(rdev, tc[t].rt, tc[t].rc),
                       l = ub_new(0, tc[t].st, tc[t].sc);
                host_slack = 0;
                ub_set(&s, seed_of(mt_rank, 7, t));
                ub_set(&l, seed_of(left, 7, t));
                ub_set(&r, 0);
                MPI_Request q, sq;
                MPI_Status st;
                MPI_Message m;
                MT_MPI(MPI_Isend(s.buf, tc[t].sc, tc[t].st, right, 900 + t, MPI_COMM_WORLD, &sq));
                int64_t direct = mt_counter("direct");
                switch (way) {
                case 0: rcode = MPI_Recv(r.buf, tc[t].rc, tc[t].rt, left, 900 + t, MPI_COMM_WORLD, &st); break;
                case 1:
                    MT_MPI(MPI_Irecv(r.buf, tc[t].rc, tc[t].rt, left, 900 + t, MPI_COMM_WORLD, &q));
                    rcode = MPI_Wait(&q, &st);
                    break;
                case 2:
                    MT_MPI(MPI_Mprobe(left, 900 + t, MPI_COMM_WORLD, &m, &st));
                    rcode = MPI_Mrecv(r.buf, tc[t].rc, tc[t].rt, &m, &st);
                    break;
                default:
                    MT_MPI(MPI_Mprobe(left, 900 + t, MPI_COMM_WORLD, &m, &st));
                    MT_MPI(MPI_Imrecv(r.buf, tc[t].rc, tc[t].rt, &m, &q));
                    rcode = MPI_Wait(&q, &st);
                    break;
                }
                direct = mt_counter("direct") - direct;
                MT_MPI(MPI_Wait(&sq, MPI_STATUS_IGNORE));
                MT_CHECK(mt_eclass(rcode) == MPI_ERR_TRUNCATE, "%s: error class %d, want MPI_ERR_TRUNCATE", what,
                         mt_eclass(rcode));
                /* The leading bytes of the message where the receive type puts them, nothing
                 * elsewhere. Host receives are the MPI's own (Open MPI may write a truncated
                 * contiguous receive past its end): only device receives are held to it. */
                if (rdev && mt_expect_gdte() && !direct) {
                    int psize, pos = 0, rsize;
                    MPI_Pack_size(tc[t].sc, tc[t].st, MPI_COMM_WORLD, &psize);
                    MPI_Type_size(tc[t].rt, &rsize);
                    unsigned char *p = malloc(psize);
                    MPI_Pack(l.buf, tc[t].sc, tc[t].st, p, psize, &pos, MPI_COMM_WORLD);
                    pos = 0;
                    MPI_Unpack(p, rsize * tc[t].rc, &pos, r.img + (r.buf - r.base), tc[t].rc, tc[t].rt, MPI_COMM_WORLD);
                    free(p);
                    ub_check(&r, what);
                }
                ub_free(&s), ub_free(&r), ub_free(&l);
                MPI_Barrier(MPI_COMM_WORLD);
            }
    MPI_Type_free(&sv);
    MPI_Type_free(&rv);
}

/* ---- MPI_Pack / MPI_Unpack at running positions -------------------------------------------- */

#define NITEMS 4
static void pack_items(int rounds)
{
    for (int round = 0; round < rounds; round++) {
        int it[NITEMS], cnt[NITEMS], psz[NITEMS], total = 0, start = (int)rr(0, 7);
        for (int i = 0; i < NITEMS; i++) {
            do {
                it[i] = (int)rr(0, npool - 1);
                cnt[i] = (int)rr(1, 5);
            } while (too_big(pool[it[i]].t, cnt[i]) || !(pool[it[i]].recv_ok >> cnt[i] & 1));
            MT_MPI(MPI_Pack_size(cnt[i], pool[it[i]].t, MPI_COMM_WORLD, &psz[i]));
            total += psz[i];
        }
        int outsize = start + total;
        unsigned char *ref = NULL, *refu[NITEMS] = {0};
        int refpos[NITEMS + 1], refcls = 0;
        char desc[2400];
        int dl = snprintf(desc, sizeof desc, "pack round %d start %d:", round, start);
        for (int i = 0; i < NITEMS; i++)
            dl += snprintf(desc + dl, sizeof desc - (size_t)dl, " [%d x %s]", cnt[i], pool[it[i]].desc);
        for (int hd = 0; hd < 4; hd++) {
            /* bit 1: the items on the device; bit 0: the packed buffer on the device */
            int idev = (hd >> 1) & 1, pdev = hd & 1;
            char what[2600];
            snprintf(what, sizeof what, "%s items %s packed %s", desc, idev ? "dev" : "host", pdev ? "dev" : "host");
            ubuf_t u[NITEMS];
            unsigned char *pk = pdev ? mt_devmem_alloc(outsize + MARGIN) : malloc(outsize + MARGIN);
            unsigned char *pimg = malloc(outsize + MARGIN);
            memset(pimg, POISON, outsize + MARGIN);
            mt_put(pk, pimg, outsize + MARGIN);
            int pos = start, posv[NITEMS + 1];
            for (int i = 0; i < NITEMS; i++) {
                u[i] = ub_new(idev, pool[it[i]].t, cnt[i]);
                ub_set(&u[i], seed_of(mt_rank, 1000 + round, i));
                MT_MPI(MPI_Pack(u[i].buf, cnt[i], pool[it[i]].t, pk, outsize, &pos, MPI_COMM_WORLD));
                posv[i] = pos;
            }
            unsigned char *got = malloc(outsize + MARGIN);
            mt_get(got, pk, outsize + MARGIN);
            if (!hd) {
                ref = got;
                memcpy(refpos, posv, sizeof posv);
            } else {
                for (int i = 0; i < NITEMS; i++)
                    MT_CHECK(posv[i] == refpos[i], "%s: position after item %d is %d, host %d", what, i, posv[i], refpos[i]);
                size_t j = 0;
                while (j < (size_t)outsize + MARGIN && got[j] == ref[j]) j++;
                MT_CHECK(j == (size_t)outsize + MARGIN, "%s: packed byte %zu is 0x%02x, host 0x%02x", what, j,
                         j < (size_t)outsize + MARGIN ? got[j] : 0, j < (size_t)outsize + MARGIN ? ref[j] : 0);
                free(got);
            }
            /* Unpack item by item from the same running positions into poisoned buffers. */
            pos = start;
            for (int i = 0; i < NITEMS; i++) {
                ub_set(&u[i], 0);
                MT_MPI(MPI_Unpack(pk, outsize, &pos, u[i].buf, cnt[i], pool[it[i]].t, MPI_COMM_WORLD));
                MT_CHECK(pos == refpos[i], "%s: unpack position after item %d is %d, want %d", what, i, pos, refpos[i]);
                unsigned char *ub = malloc(u[i].len);
                mt_get(ub, u[i].base, u[i].len);
                if (!hd) refu[i] = ub;
                else {
                    size_t j = 0;
                    while (j < u[i].len && ub[j] == refu[i][j]) j++;
                    MT_CHECK(j == u[i].len, "%s: unpacked item %d byte %zu is 0x%02x, host 0x%02x", what, i, j,
                             j < u[i].len ? ub[j] : 0, j < u[i].len ? refu[i][j] : 0);
                    free(ub);
                }
            }
            /* The last item into too small a buffer: the host's error class, nothing past it. */
            {
                mt_put(pk, pimg, outsize + MARGIN);
                int p2 = start, small = start + psz[NITEMS - 1] / 2;
                ub_set(&u[NITEMS - 1], seed_of(mt_rank, 1000 + round, NITEMS - 1));
                int cls = mt_eclass(MPI_Pack(u[NITEMS - 1].buf, cnt[NITEMS - 1], pool[it[NITEMS - 1]].t, pk, small, &p2,
                                             MPI_COMM_WORLD));
                if (!hd) refcls = cls;
                MT_CHECK(cls != MPI_SUCCESS && cls == refcls, "%s: pack into %d bytes: class %d, host %d", what, small, cls,
                         refcls);
                unsigned char *tail = malloc(outsize + MARGIN);
                mt_get(tail, pk, outsize + MARGIN);
                size_t j = small;
                while (j < (size_t)outsize + MARGIN && tail[j] == POISON) j++;
                MT_CHECK(j == (size_t)outsize + MARGIN, "%s: pack into %d bytes wrote byte %zu", what, small, j);
                free(tail);
            }
            for (int i = 0; i < NITEMS; i++) ub_free(&u[i]);
            if (pdev) mt_devmem_free(pk);
            else free(pk);
            free(pimg);
        }
        free(ref);
        for (int i = 0; i < NITEMS; i++) free(refu[i]);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    left = (mt_rank + mt_size - 1) % mt_size;
    right = (mt_rank + 1) % mt_size;
    uint64_t seed = 1;
    int ncases = 200, packs = 12;
    const char *only = "";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) ncases = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--verbose")) verbose = 1;
        else if (!strcmp(argv[i], "--wide")) wide = 1;
    }
    mt_rng_state = seed;
    make_pool();
    if (verbose && mt_rank == 0)
        for (int i = 0; i < npool; i++)
            fprintf(stderr, "pool %d (depth %d, recv %#x): %s\n", i, pool[i].depth, pool[i].recv_ok, pool[i].desc);
    if (!*only || strstr(only, "regress")) regressions();
    if (!*only || strstr(only, "xchg")) pool_exchanges(ncases);
    if (!*only || strstr(only, "trunc")) truncation();
    if (!*only || strstr(only, "pack")) pack_items(packs);
    for (int i = 0; i < npool; i++) MPI_Type_free(&pool[i].t);
    if (mt_rank == 0) printf("seed %llu: %d pool types, %d cases\n", (unsigned long long)seed, npool, ncase);
    return mt_finish("outside_dtpool_test");
}
