/*
 * Random nested datatypes through the interposer, checked against the MPI's own MPI_Pack /
 * MPI_Unpack on host copies.
 *
 * Every case is generated from (seed, case) alone, identically on both ranks: a random type of
 * depth >= 3 (contiguous, vector, hvector, indexed, hindexed, indexed_block, hindexed_block,
 * struct with mixed fields, subarray in C and Fortran order, resized with positive and negative
 * bounds, dup), a count, a receive type of the same signature (the same type, a dense or
 * scattered hindexed of the base type, or fewer elements than sent: truncation), a pairing
 * (device to device, device to host, host to device, host to host), a call pattern (blocking,
 * nonblocking with each completion call, synchronous, Sendrecv, persistent, matched probe), and
 * an addressing mode (buf inside its allocation, buf outside it because the type's true lower
 * bound is far from 0, or MPI_BOTTOM with absolute addresses). Buffers are cut to exactly the
 * bytes the type touches plus a small poisoned margin, so a byte written or read outside is
 * caught (in fake mode) or faults (on a GPU, under compute-sanitizer).
 *
 * The receiver knows what the sender sent (same seed): it builds the expected buffer with
 * MPI_Pack of the sender's host copy and MPI_Unpack into a poisoned host copy of its own
 * buffer, and compares every byte of its allocation, gaps and margins included. A truncated
 * receive must end in MPI_ERR_TRUNCATE with no byte outside the receive type's map changed.
 *
 * Every fourth case the sender also packs its buffer with MPI_Pack_external and unpacks the
 * stream with MPI_Unpack_external, against the MPI's own on host copies (external_check), and
 * every fourth (without --threads) writes it to a file and reads it back by one of 14 MPI-IO
 * call forms, against the same calls on host copies (io_check).
 *
 * Usage: random_test [--cases N] [--seed S] [--first K] [--max-bytes B] [--verbose] [--kinds]
 *                    [--no-external] [--no-io]
 * Rank 0 and 1 exchange; further ranks only take part in the closing reduction.
 */
#include <pthread.h>
#include <stdarg.h>
#include <unistd.h>
#include "mpitest.h"

/* Type descriptions nest into fixed buffers: cutting a deep one short is intended. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

static int64_t rr(int64_t lo, int64_t hi) { return lo + (int64_t)(mt_rnd() % (uint64_t)(hi - lo + 1)); }
static int chance(int pct) { return (int)(mt_rnd() % 100) < pct; }

static int verbose;
static int64_t max_bytes = 96 * 1024; /* packed bytes of one message */

/* ---- random types ------------------------------------------------------------------------ */
#define MAX_FREE 256
static _Thread_local MPI_Datatype to_free[MAX_FREE];
static _Thread_local int nfree;
static MPI_Datatype keep(MPI_Datatype t)
{
    if (nfree < MAX_FREE) to_free[nfree++] = t;
    return t;
}
static void free_all(void)
{
    for (int i = 0; i < nfree; i++) MPI_Type_free(&to_free[i]);
    nfree = 0;
}

typedef struct {
    MPI_Datatype t;
    int base;      /* index into bases[] when every element is that type, -1 when mixed */
    char desc[512];
} rtype_t;

static const struct {
    MPI_Datatype t;
    const char *name;
    int size;
} bases[] = {{MPI_CHAR, "char", 1}, {MPI_SHORT, "short", 2}, {MPI_INT, "int", 4}, {MPI_DOUBLE, "double", 8},
             {MPI_FLOAT, "float", 4}};
#define NBASES 5

static void bounds(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *ext, MPI_Aint *tlb, MPI_Aint *text, int *size)
{
    MPI_Type_get_extent(t, lb, ext);
    MPI_Type_get_true_extent(t, tlb, text);
    MPI_Type_size(t, size);
}

/* Invariant of every generated type: its data lies within [lb, ub) and no two of its bytes
 * overlap, so copies at multiples of the extent never overlap either. */
static int fits(MPI_Datatype t)
{
    MPI_Aint lb, ext, tlb, text;
    int size;
    bounds(t, &lb, &ext, &tlb, &text, &size);
    return size > 0 && size <= 64 * 1024 && ext <= 512 * 1024 && tlb >= lb && tlb + text <= lb + ext;
}

static void gen(int depth, rtype_t *out);

static void leaf(rtype_t *out)
{
    int b = (int)rr(0, NBASES - 1);
    out->t = bases[b].t;
    out->base = b;
    snprintf(out->desc, sizeof out->desc, "%s", bases[b].name);
}

static void gen(int depth, rtype_t *out)
{
    if (depth == 0) {
        leaf(out);
        return;
    }
    rtype_t c;
    gen(depth - 1, &c);
    MPI_Aint lb, ext, tlb, text;
    int size;
    bounds(c.t, &lb, &ext, &tlb, &text, &size);
    MPI_Datatype t = MPI_DATATYPE_NULL;
    char d[512];
    int base = c.base;
    for (int attempt = 0; attempt < 8 && t == MPI_DATATYPE_NULL; attempt++) {
        int k = (int)rr(0, 10);
        switch (k) {
        case 0: {
            int n = (int)rr(1, 5);
            MPI_Type_contiguous(n, c.t, &t);
            snprintf(d, sizeof d, "contig(%d,%s)", n, c.desc);
            break;
        }
        case 1: {
            int n = (int)rr(1, 5), bl = (int)rr(1, 3), st = (int)rr(bl, bl + 3);
            /* Negative strides keep a gap: Open MPI 4.1 packs blocks that are adjacent in
             * reverse order as one forward block (and reports bounds to match), which gdte's
             * import refuses as inconsistent rather than follow. */
            if (chance(25)) st = -(int)rr(bl + 1, bl + 3);
            MPI_Type_vector(n, bl, st, c.t, &t);
            snprintf(d, sizeof d, "vector(%d,%d,%d,%s)", n, bl, st, c.desc);
            break;
        }
        case 2: {
            int n = (int)rr(1, 4), bl = (int)rr(1, 3);
            MPI_Aint st = bl * ext + rr(0, 24);
            if (chance(25)) st = -(bl * ext + rr(1, 24)); /* with a gap, as for vector */
            MPI_Type_create_hvector(n, bl, st, c.t, &t);
            snprintf(d, sizeof d, "hvector(%d,%d,%ld,%s)", n, bl, (long)st, c.desc);
            break;
        }
        case 3:
        case 4: { /* indexed / hindexed, blocks in random order, gaps, negative displacements */
            int n = (int)rr(1, 6), len[6];
            MPI_Aint disp[6];
            int dsp[6];
            int64_t at = chance(30) ? -rr(1, 4) * (int64_t)(n * 3) : 0; /* in elements */
            int order = chance(30);
            for (int i = 0; i < n; i++) {
                len[i] = (int)rr(0, 3);
                dsp[i] = (int)at;
                at += len[i] + rr(0, 2);
            }
            if (order)
                for (int i = 0; i < n / 2; i++) { /* reversed: memory order differs from type order */
                    int tl = len[i], td = dsp[i];
                    len[i] = len[n - 1 - i];
                    dsp[i] = dsp[n - 1 - i];
                    len[n - 1 - i] = tl;
                    dsp[n - 1 - i] = td;
                }
            int total = 0;
            for (int i = 0; i < n; i++) total += len[i];
            if (total == 0) len[0] = 1;
            if (k == 3) {
                MPI_Type_indexed(n, len, dsp, c.t, &t);
                snprintf(d, sizeof d, "indexed(%d%s,%s)", n, order ? ",rev" : "", c.desc);
            } else {
                for (int i = 0; i < n; i++) disp[i] = (MPI_Aint)dsp[i] * ext;
                MPI_Type_create_hindexed(n, len, disp, c.t, &t);
                snprintf(d, sizeof d, "hindexed(%d%s,%s)", n, order ? ",rev" : "", c.desc);
            }
            break;
        }
        case 5: {
            int n = (int)rr(1, 5), bl = (int)rr(1, 3), dsp[5];
            MPI_Aint disp[5];
            int at = chance(30) ? -(int)rr(1, 3) * n * bl * 2 : 0;
            for (int i = 0; i < n; i++) {
                dsp[i] = at;
                disp[i] = (MPI_Aint)at * ext;
                at += bl + (int)rr(0, 2);
            }
            if (chance(50)) {
                MPI_Type_create_indexed_block(n, bl, dsp, c.t, &t);
                snprintf(d, sizeof d, "indexed_block(%d,%d,%s)", n, bl, c.desc);
            } else {
                MPI_Type_create_hindexed_block(n, bl, disp, c.t, &t);
                snprintf(d, sizeof d, "hindexed_block(%d,%d,%s)", n, bl, c.desc);
            }
            break;
        }
        case 6: { /* struct: the child and one or two other fields, negative displacements too */
            int n = (int)rr(1, 3), len[3];
            MPI_Datatype ts[3];
            MPI_Aint disp[3];
            rtype_t f[3];
            f[0] = c;
            for (int i = 1; i < n; i++) gen(chance(50) ? depth - 1 : 0, &f[i]);
            MPI_Aint at = chance(30) ? -(MPI_Aint)rr(1, 64) * 8 : 0;
            int b = f[0].base;
            for (int i = 0; i < n; i++) {
                MPI_Aint flb, fext, ftlb, ftext;
                int fsize;
                bounds(f[i].t, &flb, &fext, &ftlb, &ftext, &fsize);
                len[i] = (int)rr(1, 2);
                ts[i] = f[i].t;
                at = (at + 7) & ~(MPI_Aint)7;
                disp[i] = at - flb; /* field data starts at `at` */
                at += len[i] * fext + rr(0, 16);
                if (f[i].base != b) b = -1;
            }
            MPI_Type_create_struct(n, len, disp, ts, &t);
            snprintf(d, sizeof d, "struct(%d,%s%s)", n, c.desc, n > 1 ? ",..." : "");
            base = b;
            break;
        }
        case 7:
        case 8: { /* subarray, C or Fortran order, of a child whose lb is 0 */
            if (lb != 0) break;
            int nd = (int)rr(1, 4), sizes[4], sub[4], starts[4];
            int order = chance(50) ? MPI_ORDER_C : MPI_ORDER_FORTRAN;
            for (int i = 0; i < nd; i++) {
                sizes[i] = (int)rr(1, 6);
                sub[i] = (int)rr(1, sizes[i]);
                starts[i] = (int)rr(0, sizes[i] - sub[i]);
            }
            MPI_Type_create_subarray(nd, sizes, sub, starts, order, c.t, &t);
            snprintf(d, sizeof d, "subarray%dd(%s,%s)", nd, order == MPI_ORDER_C ? "C" : "F", c.desc);
            break;
        }
        case 9: { /* resized: lb moved below the data, extent grown (positive or negative lb) */
            MPI_Aint nlb = tlb - rr(0, 3) * 8 - (chance(30) ? 4096 : 0);
            MPI_Aint next = tlb + text - nlb + rr(0, 4) * 8;
            MPI_Type_create_resized(c.t, nlb, next, &t);
            snprintf(d, sizeof d, "resized(%ld,%ld,%s)", (long)nlb, (long)next, c.desc);
            break;
        }
        default:
            MPI_Type_dup(c.t, &t);
            snprintf(d, sizeof d, "dup(%s)", c.desc);
            break;
        }
        if (t != MPI_DATATYPE_NULL) {
            keep(t);
            if (!fits(t)) t = MPI_DATATYPE_NULL;
        }
    }
    if (t == MPI_DATATYPE_NULL) {
        *out = c;
        return;
    }
    out->t = t;
    out->base = base;
    snprintf(out->desc, sizeof out->desc, "%s", d);
}

/* A type of `n` elements of base `b` scattered by an hindexed with gaps (1 block: dense). */
static MPI_Datatype scattered(int b, int64_t n, int dense)
{
    int nb = dense ? 1 : (int)rr(1, 16);
    if (nb > n) nb = (int)n;
    int len[16];
    MPI_Aint disp[16];
    int64_t left = n, at = chance(30) ? -(int64_t)n - 64 : 0;
    for (int i = 0; i < nb; i++) {
        len[i] = i == nb - 1 ? (int)left : (int)rr(1, left - (nb - 1 - i));
        left -= len[i];
        disp[i] = (MPI_Aint)at * bases[b].size;
        at += len[i] + (dense ? 0 : rr(0, 5));
    }
    MPI_Datatype t;
    MPI_Type_create_hindexed(nb, len, disp, bases[b].t, &t);
    keep(t);
    return t;
}

/* ---- buffers ----------------------------------------------------------------------------- */
/* The bytes (buf, count, t) touches: [lo, hi) relative to buf. */
static void span(MPI_Datatype t, int count, int64_t *lo, int64_t *hi)
{
    MPI_Aint lb, ext, tlb, text;
    int size;
    bounds(t, &lb, &ext, &tlb, &text, &size);
    int64_t a = tlb, b = tlb + (int64_t)(count - 1) * ext;
    *lo = a < b ? a : b;
    *hi = (a > b ? a : b) + text;
}

#define MARGIN 64
typedef struct {
    int dev;
    unsigned char *alloc; /* device or host */
    unsigned char *host;  /* host image of the whole allocation */
    size_t len;
    unsigned char *buf;   /* what the MPI call gets (may lie outside the allocation) */
    int64_t lo;
    int kind;             /* --kinds: which allocator (rbuf_make_kind) */
} rbuf_t;

/* --kinds (cuda mode): the buffers come from every allocator an application may use. Device:
 * cudaMalloc, cudaMallocManaged, cudaMallocAsync (a stream-ordered pool, which CUDA IPC cannot
 * export), the driver's cuMemCreate + cuMemMap (VMM, not exportable either); host: malloc, cudaMallocHost (pinned), malloc + cudaHostRegister. Picked per buffer
 * by the case number. Elsewhere (fake mode, or without the option) cudaMalloc and malloc. */
static int kinds;
static _Atomic int64_t n_kind[2][4];
static int (*k_malloc_host)(void **, size_t), (*k_free_host)(void *);
static int (*k_host_register)(void *, size_t, unsigned), (*k_host_unregister)(void *);
static void kinds_init(void)
{
    if (!kinds || !mt_cuda()) {
        kinds = 0;
        return;
    }
    k_malloc_host = (int (*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMallocHost");
    k_free_host = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaFreeHost");
    k_host_register = (int (*)(void *, size_t, unsigned))dlsym(RTLD_DEFAULT, "cudaHostRegister");
    k_host_unregister = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaHostUnregister");
    MT_CHECK(k_malloc_host && k_free_host && k_host_register && k_host_unregister,
             "--kinds: the CUDA runtime's allocators not found");
}

static void rbuf_make_kind(rbuf_t *b, int dev, MPI_Datatype t, int count, int kind)
{
    int64_t lo, hi;
    span(t, count, &lo, &hi);
    b->dev = dev;
    b->lo = lo;
    b->len = (size_t)(hi - lo) + 2 * MARGIN;
    b->kind = kinds ? (dev ? kind % 4 : kind % 3) : 0;
    void *p = NULL;
    switch (dev * 3 + b->kind) {
    case 0: p = malloc(b->len); break;
    case 1: MT_CHECK(k_malloc_host(&p, b->len) == 0 && p, "cudaMallocHost %zu", b->len); break;
    case 2:
        p = malloc(b->len);
        MT_CHECK(p && k_host_register(p, b->len, 0) == 0, "cudaHostRegister %zu", b->len);
        break;
    case 3: p = mt_devmem_alloc(b->len); break;
    case 4: p = mt_dev_alloc(b->len); break;
    case 5: p = mt_async_alloc(b->len); break;
    default: p = mt_vmm_alloc(b->len); break;
    }
    n_kind[dev][b->kind]++;
    b->alloc = p;
    b->host = malloc(b->len);
    b->buf = b->alloc + MARGIN - lo;
}
static void rbuf_upload(rbuf_t *b)
{
    if (b->dev || b->kind) mt_put(b->alloc, b->host, b->len);
    else memcpy(b->alloc, b->host, b->len);
}
static void rbuf_download(rbuf_t *b)
{
    if (b->dev || b->kind) mt_get(b->host, b->alloc, b->len);
    else memcpy(b->host, b->alloc, b->len);
}
static void rbuf_free(rbuf_t *b)
{
    switch (b->dev * 3 + b->kind) {
    case 0: free(b->alloc); break;
    case 1: k_free_host(b->alloc); break;
    case 2:
        k_host_unregister(b->alloc);
        free(b->alloc);
        break;
    case 3: mt_devmem_free(b->alloc); break;
    case 4: mt_dev_free(b->alloc); break;
    case 5: mt_async_free(b->alloc); break;
    default: mt_vmm_free(b->alloc); break;
    }
    free(b->host);
}

static _Atomic long n_skipped;

/* A poisoned buffer of (st, sc) of kind `dev` for a check's read-back, the host image it must
 * equal if nothing is written (returned), and what the call is given: the buffer, or MPI_BOTTOM
 * with a struct of absolute addresses in mode 2 (*bot, freed by the caller). */
static unsigned char *poisoned(rbuf_t *ub, int dev, const rtype_t *st, int sc, int mode, unsigned char poison,
                               void **buf, MPI_Datatype *use, int *cnt, MPI_Datatype *bot)
{
    rbuf_make_kind(ub, dev, st->t, sc, 0);
    for (size_t j = 0; j < ub->len; j++) ub->host[j] = (unsigned char)(poison ^ (j * 13));
    unsigned char *want = malloc(ub->len);
    memcpy(want, ub->host, ub->len);
    rbuf_upload(ub);
    *buf = ub->buf;
    *use = st->t;
    *cnt = sc;
    *bot = MPI_DATATYPE_NULL;
    if (mode == 2) {
        *bot = mt_bottom_type(ub->buf, sc, st->t);
        *use = *bot;
        *cnt = 1;
        *buf = MPI_BOTTOM;
    }
    return want;
}

/* ---- MPI_Pack_external / MPI_Unpack_external (local, on the sender) ----------------------
 * The external32 stream of the case's send buffer, packed at a random position into an output
 * buffer of either kind, against the MPI's own MPI_Pack_external of the host copy; then
 * unpacked from that stream into a poisoned buffer of the same type and kind, against the MPI's
 * MPI_Unpack_external into a poisoned host copy (every byte compared, gaps and margins
 * included). One case in eight gives an output or input one byte short: the error class and
 * the untouched bytes must be the MPI's on host memory. */
static _Atomic long n_external;
static int external = 1; /* --no-external: skip it */
static void external_check(int64_t k, const rtype_t *st, int sc, rbuf_t *sb, void *sbuf, MPI_Datatype s_use, int s_cnt,
                           int mode)
{
    int sdev = sb->dev;
    int odev = (int)((k >> 4) & 1), shorted = k / 8 % 8 == 1;
    MPI_Aint need = 0, off = (MPI_Aint)(k % 7);
    MT_MPI(MPI_Pack_external_size("external32", sc, st->t, &need));
    size_t olen = (size_t)(off + need + 16);
    MPI_Aint osize = off + need - (shorted ? 1 : 0);
    unsigned char *want = malloc(olen), *got = malloc(olen);
    for (size_t i = 0; i < olen; i++) want[i] = (unsigned char)(0x5A ^ i);
    unsigned char *out = odev ? mt_dev_alloc(olen) : malloc(olen);
    if (odev) mt_put(out, want, olen);
    else memcpy(out, want, olen);
    MPI_Aint wpos = off, gpos = off;
    int wrc = MPI_Pack_external("external32", sb->host + MARGIN - sb->lo, sc, st->t, want, osize, &wpos);
    int64_t c0 = mt_counter("packs_external");
    int grc = MPI_Pack_external("external32", sbuf, s_cnt, s_use, out, osize, &gpos);
    if (odev) mt_get(got, out, olen);
    else memcpy(got, out, olen);
    int carried = (sdev || odev) && mt_expect_gdte();
    MT_CHECK(mt_eclass(grc) == mt_eclass(wrc) && gpos == wpos,
             "case %lld: MPI_Pack_external (buffer %s, output %s%s): class %d position %ld, the MPI on host memory: "
             "class %d position %ld",
             (long long)k, sdev ? "device" : "host", odev ? "device" : "host", shorted ? ", one byte short" : "",
             mt_eclass(grc), (long)gpos, mt_eclass(wrc), (long)wpos);
    size_t i = 0;
    while (i < olen && got[i] == want[i]) i++;
    MT_CHECK(i == olen, "case %lld: MPI_Pack_external (buffer %s, output %s, mode %d): byte %zu is %d, want %d",
             (long long)k, sdev ? "device" : "host", odev ? "device" : "host", mode, i, i < olen ? got[i] : 0,
             i < olen ? want[i] : 0);
    if (carried && wrc == MPI_SUCCESS)
        MT_CHECK(mt_counter("packs_external") > c0, "case %lld: MPI_Pack_external on device memory not carried by gdte",
                 (long long)k);
    if (wrc == MPI_SUCCESS) {
        /* Back into a poisoned buffer of the same type and kind, from the stream (device or host). */
        rbuf_t ub = {0};
        void *ubuf;
        MPI_Datatype u_use, bot;
        int u_cnt;
        unsigned char *uwant = poisoned(&ub, sdev, st, sc, mode, 0xC3, &ubuf, &u_use, &u_cnt, &bot);
        MPI_Aint isize = off + need - (k / 8 % 8 == 4 ? 1 : 0);
        wpos = gpos = off;
        wrc = MPI_Unpack_external("external32", want, isize, &wpos, uwant + MARGIN - ub.lo, sc, st->t);
        c0 = mt_counter("unpacks_external");
        grc = MPI_Unpack_external("external32", out, isize, &gpos, ubuf, u_cnt, u_use);
        rbuf_download(&ub);
        MT_CHECK(mt_eclass(grc) == mt_eclass(wrc) && gpos == wpos,
                 "case %lld: MPI_Unpack_external (buffer %s, input %s): class %d position %ld, the MPI on host memory: "
                 "class %d position %ld",
                 (long long)k, sdev ? "device" : "host", odev ? "device" : "host", mt_eclass(grc), (long)gpos,
                 mt_eclass(wrc), (long)wpos);
        i = 0;
        while (i < ub.len && ub.host[i] == uwant[i]) i++;
        MT_CHECK(i == ub.len,
                 "case %lld: MPI_Unpack_external (buffer %s, input %s, mode %d): byte %zu (offset %lld from buf) is %d, "
                 "want %d",
                 (long long)k, sdev ? "device" : "host", odev ? "device" : "host", mode, i,
                 (long long)i - MARGIN + (long long)ub.lo, i < ub.len ? ub.host[i] : 0, i < ub.len ? uwant[i] : 0);
        if (carried && wrc == MPI_SUCCESS)
            MT_CHECK(mt_counter("unpacks_external") > c0,
                     "case %lld: MPI_Unpack_external on device memory not carried by gdte", (long long)k);
        if (bot != MPI_DATATYPE_NULL) MPI_Type_free(&bot);
        free(uwant);
        rbuf_free(&ub);
    }
    n_external++;
    if (odev) mt_dev_free(out);
    else free(out);
    free(want);
    free(got);
}

/* ---- MPI-IO (local files, on the sender) --------------------------------------------------
 * The case's send buffer written by one of 14 call forms (explicit offsets, individual and
 * shared file pointers, blocking, nonblocking, split collectives) to a file of this process
 * (MPI_COMM_SELF), and its host copy by the same form to a second file: the two files must be
 * byte for byte the same. Then the second file read back by the same form into a poisoned
 * buffer of the send buffer's kind and into a poisoned host copy: every byte the same, and the
 * statuses' counts; one read in three starts halfway through the written bytes, so the end of
 * the file stops it early (only what the MPI read may be written). */
static _Atomic long n_io;
static int io_on = 1; /* --no-io: skip it */
static MPI_File io_fa = MPI_FILE_NULL, io_fb = MPI_FILE_NULL;
enum { IO_FORMS = 14 };
static const char *io_names[IO_FORMS] = {"at", "at_all", "iat", "iat_all", "at_all_begin", "fp", "all",
                                         "all_begin", "shared", "ordered", "ordered_begin", "ifp", "iall", "ishared"};

/* 0 when this MPI opens no file here (then io_check is skipped, said once). */
static int io_open(void)
{
    if (io_fa != MPI_FILE_NULL) return 1;
    const char *tmp = getenv("TMPDIR");
    char path[512];
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof path, "%s/gdte_random_io_%ld_%c", tmp && *tmp ? tmp : "/tmp", (long)getpid(), 'a' + f);
        int rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                               MPI_INFO_NULL, f ? &io_fb : &io_fa);
        if (rc != MPI_SUCCESS) {
            printf("random_test: MPI_File_open(%s) failed (class %d): MPI-IO checks skipped\n", path, mt_eclass(rc));
            if (f) MPI_File_close(&io_fa);
            io_on = 0;
            return 0;
        }
        MPI_File_set_errhandler(f ? io_fb : io_fa, MPI_ERRORS_RETURN);
    }
    return 1;
}
static void io_close(void)
{
    if (io_fa != MPI_FILE_NULL) MPI_File_close(&io_fa);
    if (io_fb != MPI_FILE_NULL) MPI_File_close(&io_fb);
}

/* One read or write of (buf, cnt, t) at byte `off` of fh by form `iv`. */
static int io_do(MPI_File fh, int rd, int iv, MPI_Offset off, void *buf, int cnt, MPI_Datatype t, MPI_Status *st)
{
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS, flag = 0;
    if (iv >= 5 && iv != 8 && iv != 9 && iv != 10 && iv != 13) rc = MPI_File_seek(fh, off, MPI_SEEK_SET);
    if (iv == 8 || iv == 9 || iv == 10 || iv == 13) rc = MPI_File_seek_shared(fh, off, MPI_SEEK_SET);
    if (rc != MPI_SUCCESS) return rc;
    switch (iv) {
    case 0: return rd ? MPI_File_read_at(fh, off, buf, cnt, t, st) : MPI_File_write_at(fh, off, buf, cnt, t, st);
    case 1: return rd ? MPI_File_read_at_all(fh, off, buf, cnt, t, st) : MPI_File_write_at_all(fh, off, buf, cnt, t, st);
    case 2:
        rc = rd ? MPI_File_iread_at(fh, off, buf, cnt, t, &q) : MPI_File_iwrite_at(fh, off, buf, cnt, t, &q);
        while (rc == MPI_SUCCESS && !flag) rc = MPI_Test(&q, &flag, st);
        return rc;
    case 3:
        rc = rd ? MPI_File_iread_at_all(fh, off, buf, cnt, t, &q) : MPI_File_iwrite_at_all(fh, off, buf, cnt, t, &q);
        return rc == MPI_SUCCESS ? MPI_Wait(&q, st) : rc;
    case 4:
        rc = rd ? MPI_File_read_at_all_begin(fh, off, buf, cnt, t) : MPI_File_write_at_all_begin(fh, off, buf, cnt, t);
        if (rc != MPI_SUCCESS) return rc;
        return rd ? MPI_File_read_at_all_end(fh, buf, st) : MPI_File_write_at_all_end(fh, buf, st);
    case 5: return rd ? MPI_File_read(fh, buf, cnt, t, st) : MPI_File_write(fh, buf, cnt, t, st);
    case 6: return rd ? MPI_File_read_all(fh, buf, cnt, t, st) : MPI_File_write_all(fh, buf, cnt, t, st);
    case 7:
        rc = rd ? MPI_File_read_all_begin(fh, buf, cnt, t) : MPI_File_write_all_begin(fh, buf, cnt, t);
        if (rc != MPI_SUCCESS) return rc;
        return rd ? MPI_File_read_all_end(fh, buf, st) : MPI_File_write_all_end(fh, buf, st);
    case 8: return rd ? MPI_File_read_shared(fh, buf, cnt, t, st) : MPI_File_write_shared(fh, buf, cnt, t, st);
    case 9: return rd ? MPI_File_read_ordered(fh, buf, cnt, t, st) : MPI_File_write_ordered(fh, buf, cnt, t, st);
    case 10:
        rc = rd ? MPI_File_read_ordered_begin(fh, buf, cnt, t) : MPI_File_write_ordered_begin(fh, buf, cnt, t);
        if (rc != MPI_SUCCESS) return rc;
        return rd ? MPI_File_read_ordered_end(fh, buf, st) : MPI_File_write_ordered_end(fh, buf, st);
    case 11:
        rc = rd ? MPI_File_iread(fh, buf, cnt, t, &q) : MPI_File_iwrite(fh, buf, cnt, t, &q);
        return rc == MPI_SUCCESS ? MPI_Wait(&q, st) : rc;
    case 12:
        rc = rd ? MPI_File_iread_all(fh, buf, cnt, t, &q) : MPI_File_iwrite_all(fh, buf, cnt, t, &q);
        return rc == MPI_SUCCESS ? MPI_Wait(&q, st) : rc;
    default:
        rc = rd ? MPI_File_iread_shared(fh, buf, cnt, t, &q) : MPI_File_iwrite_shared(fh, buf, cnt, t, &q);
        return rc == MPI_SUCCESS ? MPI_Wait(&q, st) : rc;
    }
}

static unsigned char *io_slurp(MPI_File fh, MPI_Offset *size)
{
    MT_MPI(MPI_File_sync(fh));
    MT_MPI(MPI_File_get_size(fh, size));
    unsigned char *b = malloc((size_t)*size + 1);
    MPI_Status st;
    if (*size > 0) MT_MPI(MPI_File_read_at(fh, 0, b, (int)*size, MPI_BYTE, &st));
    return b;
}

static void io_check(int64_t k, const rtype_t *st, int sc, rbuf_t *sb, void *sbuf, MPI_Datatype s_use, int s_cnt,
                     int mode)
{
    if (!io_open()) return;
    int iv = (int)(k / 8 % IO_FORMS), sdev = sb->dev;
    int carried = sdev && mt_expect_gdte();
    MPI_Offset off = (MPI_Offset)((k * 37) % 4096);
    MT_MPI(MPI_File_set_size(io_fa, 0));
    MT_MPI(MPI_File_set_size(io_fb, 0));
    MPI_Status sa, sbst;
    int64_t w0 = mt_counter("io_writes"), r0 = mt_counter("io_reads");
    int rca = io_do(io_fa, 0, iv, off, sbuf, s_cnt, s_use, &sa);
    int rcb = io_do(io_fb, 0, iv, off, sb->host + MARGIN - sb->lo, sc, st->t, &sbst);
    MT_CHECK(rca == MPI_SUCCESS && rcb == MPI_SUCCESS, "case %lld: MPI_File write (%s, buffer %s, mode %d): %d / %d",
             (long long)k, io_names[iv], sdev ? "device" : "host", mode, rca, rcb);
    if (carried) MT_CHECK(mt_counter("io_writes") > w0, "case %lld: MPI-IO write of device memory not carried", (long long)k);
    MPI_Offset za, zb;
    unsigned char *fa = io_slurp(io_fa, &za), *fb = io_slurp(io_fb, &zb);
    MT_CHECK(za == zb && !memcmp(fa, fb, (size_t)za), "case %lld: MPI_File write (%s, buffer %s, mode %d): %lld bytes "
             "in the file, the host copy's %lld%s", (long long)k, io_names[iv], sdev ? "device" : "host", mode,
             (long long)za, (long long)zb, za == zb ? " (different bytes)" : "");
    free(fa);
    free(fb);

    /* Back from the host copy's file into a poisoned buffer of the same kind, and into a host one. */
    rbuf_t ub = {0};
    void *ubuf;
    MPI_Datatype u_use, bot;
    int u_cnt, size;
    unsigned char *uwant = poisoned(&ub, sdev, st, sc, mode, 0x3C, &ubuf, &u_use, &u_cnt, &bot);
    MPI_Type_size(st->t, &size);
    /* Only the blocking forms: Open MPI 4.1's ompio waits forever in MPI_File_read_at_all_end or
     * MPI_Wait for a split collective or nonblocking read that the end of the file stops early,
     * on host buffers too (its asynchronous reads are retried without end). */
    int blocking = iv <= 1 || iv == 5 || iv == 6 || iv == 8 || iv == 9;
    MPI_Offset roff = off + (k / 8 % 3 == 1 && blocking ? (MPI_Offset)size * sc / 2 : 0);
    rca = io_do(io_fb, 1, iv, roff, ubuf, u_cnt, u_use, &sa);
    rcb = io_do(io_fb, 1, iv, roff, uwant + MARGIN - ub.lo, sc, st->t, &sbst);
    rbuf_download(&ub);
    MT_CHECK(rca == MPI_SUCCESS && rcb == MPI_SUCCESS, "case %lld: MPI_File read (%s, buffer %s, mode %d): %d / %d",
             (long long)k, io_names[iv], sdev ? "device" : "host", mode, rca, rcb);
    if (carried) MT_CHECK(mt_counter("io_reads") > r0, "case %lld: MPI-IO read into device memory not carried", (long long)k);
    MPI_Count ea = -1, eb = -2;
    MPI_Get_elements_x(&sa, MPI_BYTE, &ea);
    MPI_Get_elements_x(&sbst, MPI_BYTE, &eb);
    MT_CHECK(ea == eb, "case %lld: MPI_File read (%s, buffer %s): %lld bytes read, the host copy %lld", (long long)k,
             io_names[iv], sdev ? "device" : "host", (long long)ea, (long long)eb);
    size_t i = 0;
    while (i < ub.len && ub.host[i] == uwant[i]) i++;
    MT_CHECK(i == ub.len,
             "case %lld: MPI_File read (%s, buffer %s, mode %d, from %lld of %lld): byte %zu (offset %lld from buf) is "
             "%d, want %d",
             (long long)k, io_names[iv], sdev ? "device" : "host", mode, (long long)roff, (long long)zb, i,
             (long long)i - MARGIN + (long long)ub.lo, i < ub.len ? ub.host[i] : 0, i < ub.len ? uwant[i] : 0);
    if (bot != MPI_DATATYPE_NULL) MPI_Type_free(&bot);
    free(uwant);
    rbuf_free(&ub);
    n_io++;
}

/* ---- one case ---------------------------------------------------------------------------- */
enum { CALL_SEND_RECV, CALL_ISEND_IRECV_WAIT, CALL_SSEND_IRECV_TEST, CALL_SENDRECV, CALL_PERSISTENT,
       CALL_MPROBE, CALL_WAITANY, CALL_WAITSOME, CALL_COUNT };
static const char *call_names[] = {"send/recv", "isend/irecv+wait", "ssend/irecv+test", "sendrecv",
                                   "persistent", "mprobe/mrecv", "waitany", "waitsome"};
static const char *pair_names[] = {"host->host", "device->host", "host->device", "device->device"};

static _Atomic long n_cases, n_trunc, n_bottom, n_outside, n_pair[4];

/* --threads T: T threads per rank run the cases (case k on thread k mod T), each on its own
 * duplicate of MPI_COMM_WORLD, all at once (MPI_THREAD_MULTIPLE): the interposer's state under
 * concurrent random traffic of every pairing. The checks on process-wide counters (a host
 * phase moved nothing through gdte, no request record left after a case) hold for one thread
 * only and are skipped. */
static int nthreads = 1;
static _Thread_local MPI_Comm tcomm;
static _Thread_local int tcomm_set;
static MPI_Comm rcomm(void) { return tcomm_set ? tcomm : MPI_COMM_WORLD; }

static void describe(int64_t k, const char *what, const rtype_t *st, int sc, const char *rdesc, int rc_, int pair,
                     int call, int mode)
{
    fprintf(stderr, "[rank %d] case %lld %s: send %d x %s; recv %d x %s; %s, %s, %s\n", mt_rank, (long long)k, what,
            sc, st->desc, rc_, rdesc, pair_names[pair], call_names[call],
            mode == 2 ? "MPI_BOTTOM" : mode == 1 ? "buf outside" : "buf inside");
}

static void run_case(uint64_t seed, int64_t k)
{
    mt_rng_state = seed * 0x100000001B3ull + (uint64_t)k * 0x9E3779B97F4A7C15ull;
    rtype_t st;
    int depth = (int)rr(3, 4);
    gen(depth, &st);
    MPI_Type_commit(&st.t);
    int size;
    MPI_Type_size(st.t, &size);
    /* A count > 1 most of the time; a third of the messages above the eager limits. */
    int64_t maxc = max_bytes / size;
    if (maxc < 1) maxc = 1;
    int sc = (int)rr(1, maxc < 4 ? maxc : 4);
    if (chance(33) && maxc > 8) sc = (int)rr(maxc / 4 > 1 ? maxc / 4 : 1, maxc);
    int64_t nbytes = (int64_t)sc * size;
    if (!mt_consistent(st.t, sc)) { /* no oracle: skipped, identically on both ranks */
        n_skipped++;
        free_all();
        MPI_Barrier(rcomm());
        return;
    }

    /* Receive side: same type, the base type dense or scattered, or truncation. */
    int rcount = sc, trunc = 0;
    MPI_Datatype rt = st.t;
    char rdesc[560];
    snprintf(rdesc, sizeof rdesc, "(same)");
    int rk = (int)rr(0, 9);
    int pair = (int)rr(0, 3), call = (int)rr(0, CALL_COUNT - 1), mode = (int)rr(0, 2);
    int rdev_ = (pair >> 1) & 1;
    /* Truncation only into device receives: into a host buffer the MPI alone decides, and Open
     * MPI 4.1's shared-memory single-copy path writes a longer message past the receive's end
     * (plain MPI corrupts such a host buffer too). gdte's device receives stage before a guard. */
    if (rk <= 1 && sc >= 2 && rdev_) {
        trunc = 1;
        rcount = (int)rr(1, sc - 1);
        snprintf(rdesc, sizeof rdesc, "(same, truncated)");
    } else if (rk <= 5 && st.base >= 0) {
        int64_t elems = nbytes / bases[st.base].size;
        if (elems <= 1 << 20) {
            int dense = rk <= 3;
            rt = scattered(st.base, elems, dense);
            MPI_Type_commit(&rt);
            rcount = 1;
            snprintf(rdesc, sizeof rdesc, "%s %lld x %s", dense ? "dense" : "scattered", (long long)elems,
                     bases[st.base].name);
        }
    }
    int sender = (int)(k % 2), receiver = 1 - sender;
    int sdev = pair & 1, rdev = (pair >> 1) & 1;
    int tag = (int)(k % 30000);
    if (trunc && (call == CALL_SENDRECV)) call = CALL_SEND_RECV;

    /* MPI_BOTTOM addressing: a struct of one block of the type at the buffer's address. */
    MPI_Datatype s_use = st.t, r_use = rt;
    int s_cnt = sc, r_cnt = rcount;

    rbuf_t sb = {0}, rb = {0};
    int me_send = mt_rank == sender, me_recv = mt_rank == receiver;
    rbuf_make_kind(&sb, me_send ? sdev : 0, st.t, sc, (int)((k * 7 + 1) % 12));
    rbuf_make_kind(&rb, me_recv ? rdev : 0, rt, rcount, (int)((k * 5 + 2) / 3 % 12));
    if (mode == 1) n_outside += sb.buf < sb.alloc || sb.buf >= sb.alloc + sb.len;
    /* The sender's data: seeded bytes over the whole allocation (both ranks build it). */
    mt_fill(sb.host, sb.len, (unsigned)(seed ^ (uint64_t)k));
    for (size_t i = 0; i < rb.len; i++) rb.host[i] = (unsigned char)(0xA5 ^ (i * 7));
    unsigned char *rpoison = malloc(rb.len);
    memcpy(rpoison, rb.host, rb.len);
    if (me_send) rbuf_upload(&sb);
    if (me_recv) rbuf_upload(&rb);

    void *sbuf = sb.buf, *rbuf = rb.buf;
    MPI_Datatype bot_s = MPI_DATATYPE_NULL, bot_r = MPI_DATATYPE_NULL;
    if (mode == 2) {
        bot_s = mt_bottom_type(sb.buf, s_cnt, st.t);
        bot_r = mt_bottom_type(rb.buf, r_cnt, rt);
        s_use = bot_s;
        r_use = bot_r;
        s_cnt = r_cnt = 1;
        sbuf = rbuf = MPI_BOTTOM;
        n_bottom++;
    }

    int rc = MPI_SUCCESS;
    MPI_Status status;
    memset(&status, 0, sizeof status);
    mt_phase_t ph = mt_phase_begin((me_send && sdev) || (me_recv && rdev));
    if (me_send) {
        MPI_Request q;
        switch (call) {
        case CALL_SSEND_IRECV_TEST: rc = MPI_Ssend(sbuf, s_cnt, s_use, receiver, tag, rcomm()); break;
        case CALL_ISEND_IRECV_WAIT:
        case CALL_WAITANY:
            rc = MPI_Isend(sbuf, s_cnt, s_use, receiver, tag, rcomm(), &q);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
            break;
        case CALL_SENDRECV: {
            char dummy = 0;
            rc = MPI_Sendrecv(sbuf, s_cnt, s_use, receiver, tag, &dummy, 0, MPI_CHAR, receiver, tag, rcomm(),
                              MPI_STATUS_IGNORE);
            break;
        }
        case CALL_PERSISTENT:
            rc = MPI_Send_init(sbuf, s_cnt, s_use, receiver, tag, rcomm(), &q);
            if (rc == MPI_SUCCESS) rc = MPI_Start(&q);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
            MPI_Request_free(&q);
            break;
        default: rc = MPI_Send(sbuf, s_cnt, s_use, receiver, tag, rcomm()); break;
        }
        MT_CHECK(rc == MPI_SUCCESS, "case %lld: send failed (%d)", (long long)k, rc);
        /* A failed send still ends the receive (with a wrong count), so the run goes on. */
        if (rc != MPI_SUCCESS && call != CALL_SENDRECV) MPI_Send(NULL, 0, MPI_BYTE, receiver, tag, rcomm());
    } else if (me_recv) {
        MPI_Request q, qs[3];
        int idx, flag, outc, ind[3];
        MPI_Status sts[3];
        switch (call) {
        case CALL_ISEND_IRECV_WAIT:
            rc = MPI_Irecv(rbuf, r_cnt, r_use, sender, tag, rcomm(), &q);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, &status);
            break;
        case CALL_SSEND_IRECV_TEST:
            rc = MPI_Irecv(rbuf, r_cnt, r_use, sender, tag, rcomm(), &q);
            flag = 0;
            while (rc == MPI_SUCCESS && !flag) rc = MPI_Test(&q, &flag, &status);
            break;
        case CALL_SENDRECV: {
            char dummy = 0;
            rc = MPI_Sendrecv(&dummy, 0, MPI_CHAR, sender, tag, rbuf, r_cnt, r_use, sender, tag, rcomm(),
                              &status);
            break;
        }
        case CALL_PERSISTENT:
            rc = MPI_Recv_init(rbuf, r_cnt, r_use, sender, tag, rcomm(), &q);
            if (rc == MPI_SUCCESS) rc = MPI_Start(&q);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, &status);
            MPI_Request_free(&q);
            break;
        case CALL_MPROBE: {
            MPI_Message msg;
            rc = MPI_Mprobe(sender, tag, rcomm(), &msg, &status);
            if (rc == MPI_SUCCESS) rc = MPI_Mrecv(rbuf, r_cnt, r_use, &msg, &status);
            break;
        }
        case CALL_WAITANY:
        case CALL_WAITSOME: {
            /* The receive between two host requests that never complete until cancelled. */
            int dummy[2];
            MPI_Irecv(&dummy[0], 1, MPI_INT, sender, 32000, rcomm(), &qs[0]);
            rc = MPI_Irecv(rbuf, r_cnt, r_use, sender, tag, rcomm(), &qs[1]);
            MPI_Irecv(&dummy[1], 1, MPI_INT, sender, 32001, rcomm(), &qs[2]);
            if (rc == MPI_SUCCESS && call == CALL_WAITANY) {
                rc = MPI_Waitany(3, qs, &idx, &status);
                MT_CHECK(idx == 1, "case %lld: Waitany index %d", (long long)k, idx);
            } else if (rc == MPI_SUCCESS) {
                rc = MPI_Waitsome(3, qs, &outc, ind, sts);
                MT_CHECK(outc == 1 && ind[0] == 1, "case %lld: Waitsome %d/%d", (long long)k, outc, ind[0]);
                if (rc == MPI_ERR_IN_STATUS) rc = sts[0].MPI_ERROR;
                status = sts[0];
            }
            MPI_Cancel(&qs[0]);
            MPI_Cancel(&qs[2]);
            MPI_Wait(&qs[0], MPI_STATUS_IGNORE);
            MPI_Wait(&qs[2], MPI_STATUS_IGNORE);
            break;
        }
        default: rc = MPI_Recv(rbuf, r_cnt, r_use, sender, tag, rcomm(), &status); break;
        }
    }
    if ((me_send || me_recv) && nthreads == 1) mt_phase_end(ph, call_names[call]);

    if (me_recv) {
        rbuf_download(&rb);
        /* Expected: MPI_Pack of the sender's bytes, MPI_Unpack into the poisoned image. */
        int psize;
        MPI_Pack_size(sc, st.t, MPI_COMM_SELF, &psize);
        char *packed = malloc((size_t)psize + 1);
        int pos = 0;
        MPI_Pack(sb.host + MARGIN - sb.lo, sc, st.t, packed, psize, &pos, MPI_COMM_SELF);
        MT_CHECK(pos == nbytes, "case %lld: MPI_Pack made %d bytes, want %lld", (long long)k, pos, (long long)nbytes);
        unsigned char *want = malloc(rb.len);
        memcpy(want, rpoison, rb.len);
        if (!trunc) {
            pos = 0;
            MPI_Unpack(packed, (int)nbytes, &pos, want + MARGIN - rb.lo, rcount, rt, MPI_COMM_SELF);
            MT_CHECK(rc == MPI_SUCCESS, "case %lld: receive failed (class %d)", (long long)k, mt_eclass(rc));
            size_t i = 0;
            while (i < rb.len && rb.host[i] == want[i]) i++;
            MT_CHECK(i == rb.len, "case %lld: byte %lld of the receive buffer (offset %lld from buf) is %d, want %d",
                     (long long)k, (long long)i, (long long)i - MARGIN + (long long)rb.lo, i < rb.len ? rb.host[i] : 0,
                     i < rb.len ? want[i] : 0);
            if (i != rb.len || rc != MPI_SUCCESS) describe(k, "FAILED", &st, sc, rdesc, rcount, pair, call, mode);
            int cnt = -2;
            if (rc == MPI_SUCCESS) {
                MPI_Get_count(&status, r_use, &cnt);
                MT_CHECK(cnt == r_cnt, "case %lld: MPI_Get_count %d, want %d", (long long)k, cnt, r_cnt);
                MT_CHECK(status.MPI_SOURCE == sender && status.MPI_TAG == tag, "case %lld: status source/tag",
                         (long long)k);
            }
        } else {
            n_trunc++;
            MT_CHECK(mt_eclass(rc) == MPI_ERR_TRUNCATE, "case %lld: truncated receive gave class %d, want %d",
                     (long long)k, mt_eclass(rc), MPI_ERR_TRUNCATE);
            /* No byte outside the receive type's map may change: the map is where an
             * all-ones stream lands in a zeroed image. */
            int rsize;
            MPI_Type_size(rt, &rsize);
            int64_t rbytes = (int64_t)rsize * rcount;
            unsigned char *ones = malloc((size_t)rbytes + 1), *mask = calloc(1, rb.len);
            memset(ones, 0xFF, (size_t)rbytes);
            pos = 0;
            MPI_Unpack(ones, (int)rbytes, &pos, mask + MARGIN - rb.lo, rcount, rt, MPI_COMM_SELF);
            size_t bad = rb.len;
            for (size_t i = 0; i < rb.len && bad == rb.len; i++)
                if (!mask[i] && rb.host[i] != rpoison[i]) bad = i;
            MT_CHECK(bad == rb.len, "case %lld: truncated receive wrote byte %lld outside its type map", (long long)k,
                     (long long)bad);
            if (bad != rb.len || mt_eclass(rc) != MPI_ERR_TRUNCATE)
                describe(k, "FAILED", &st, sc, rdesc, rcount, pair, call, mode);
            free(ones);
            free(mask);
        }
        free(want);
        free(packed);
    }
    /* One case in four: the external32 round trip on the sender's buffer (local calls). */
    if (me_send && k % 8 / 2 == 1 && external) external_check(k, &st, sc, &sb, sbuf, s_use, s_cnt, mode);
    /* One case in four (the sender): MPI-IO of the sender's buffer, not with threads. */
    if (me_send && k % 8 / 2 == 2 && io_on && nthreads == 1) io_check(k, &st, sc, &sb, sbuf, s_use, s_cnt, mode);
    if (verbose && mt_rank == 0) describe(k, "ok", &st, sc, rdesc, rcount, pair, call, mode);
    /* Every request of the case is complete and freed: gdte must hold no record either. */
    if (nthreads == 1)
        MT_CHECK(mt_counter("requests_live") <= 0, "case %lld: %lld gdte request records left", (long long)k,
                 (long long)mt_counter("requests_live"));
    n_cases++;
    n_pair[pair]++;
    if (bot_s != MPI_DATATYPE_NULL) MPI_Type_free(&bot_s);
    if (bot_r != MPI_DATATYPE_NULL) MPI_Type_free(&bot_r);
    free(rpoison);
    rbuf_free(&sb);
    rbuf_free(&rb);
    free_all();
    /* Keep the two ranks in step: a failed case must not shift the next one's messages. */
    MPI_Barrier(rcomm());
}

/* --node-units yes: irregular device messages went GPU to GPU read in place (the node path's
 * UNITS shape), on a GPU some in one kernel between identical plans; no: none did. */
static int node_units = -1;

static void check_node_units(void)
{
    long long mine[3] = {mt_counter("node_units"), mt_counter("node_units_same"), mt_counter("node_sparse_packed")};
    long long all[3] = {0, 0, 0};
    MPI_Allreduce(mine, all, 3, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (mt_rank == 0) printf("node path: %lld irregular messages read in place, %lld of them buffer to buffer\n", all[0], all[1]);
    /* The same program runs with the node path off (GDTE_MPI_IPC=0): then nothing goes in place. */
    const char *ipc = getenv("GDTE_MPI_IPC");
    if (node_units == 1 && ipc && !strcmp(ipc, "0")) node_units = 0;
    /* Between two GPUs most random layouts have short blocks and go as packed copies
     * (node_sparse_packed): then the few read in place need not include a same-plan receive. */
    if (node_units == 1)
        MT_CHECK(all[0] > 0 && (all[1] > 0 || !mt_cuda() || all[2] > 0),
                 "node path in place: %lld sends, %lld same-plan receives (%lld packed for another GPU)", all[0], all[1],
                 all[2]);
    if (node_units == 0) MT_CHECK(all[0] == 0, "node path in place: %lld sends, want none", all[0]);
}

typedef struct {
    MPI_Comm comm;
    int t;
    int64_t first, cases;
    uint64_t seed;
} worker_t;

static void *worker(void *p)
{
    const worker_t *w = p;
    tcomm = w->comm;
    tcomm_set = 1;
    mt_thread_device();
    for (int64_t k = w->first + w->t; k < w->first + w->cases; k += nthreads) {
        if (mt_rank < 2) run_case(w->seed, k);
        else MPI_Barrier(tcomm);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[i + 1]);
    if (nthreads < 1 || nthreads > 64) nthreads = 1;
    if (nthreads > 1) {
        int provided = mt_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE);
        if (provided < MPI_THREAD_MULTIPLE) {
            if (mt_rank == 0) printf("random_test --threads: the MPI provides thread level %d only\n", provided);
            MT_CHECK(0, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
            return mt_finish("random_test");
        }
    } else {
        mt_init(&argc, &argv);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int64_t cases = 300, first = 0;
    uint64_t seed = 0x5eed1234;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--first") && i + 1 < argc) first = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) max_bytes = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--verbose")) verbose = 1;
        else if (!strcmp(argv[i], "--kinds")) kinds = 1;
        else if (!strcmp(argv[i], "--no-external")) external = 0;
        else if (!strcmp(argv[i], "--no-io")) io_on = 0;
        else if (!strcmp(argv[i], "--node-units") && i + 1 < argc) node_units = !strcmp(argv[++i], "yes") ? 1 : 0;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) i++; /* read above */
    }
    const char *env = getenv("GDTETEST_CASES");
    if (env && *env) cases = atoll(env);
    kinds_init();
    if (mt_size < 2) return mt_finish("random_test");
    if (nthreads > 1) {
        worker_t w[64];
        pthread_t th[64];
        for (int t = 0; t < nthreads; t++) {
            w[t] = (worker_t){MPI_COMM_NULL, t, first, cases, seed};
            MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
        }
        for (int t = 0; t < nthreads; t++) MT_CHECK(pthread_create(&th[t], NULL, worker, &w[t]) == 0, "thread %d", t);
        for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
        for (int t = 0; t < nthreads; t++) MPI_Comm_free(&w[t].comm);
    } else if (mt_rank < 2)
        for (int64_t k = first; k < first + cases; k++) run_case(seed, k);
    else
        for (int64_t k = first; k < first + cases; k++) MPI_Barrier(MPI_COMM_WORLD);
    char thr[32] = "";
    if (nthreads > 1) snprintf(thr, sizeof thr, " %d threads,", nthreads);
    if (mt_rank == 0)
        printf("random_test: seed 0x%llx,%s %ld cases (h->h %ld, d->h %ld, h->d %ld, d->d %ld), %ld truncated, %ld "
               "MPI_BOTTOM, %ld with buf outside the allocation; %ld skipped (the MPI contradicts its own bounds)\n",
               (unsigned long long)seed, thr, (long)n_cases,
               (long)n_pair[0], (long)n_pair[1], (long)n_pair[2], (long)n_pair[3], (long)n_trunc, (long)n_bottom,
               (long)n_outside, (long)n_skipped);
    if (mt_rank == 0 && external) printf("random_test: %ld external32 round trips on rank 0\n", (long)n_external);
    if (mt_rank == 0 && io_on && nthreads == 1)
        printf("random_test: %ld MPI-IO writes and reads on rank 0 (14 call forms)\n", (long)n_io);
    io_close();
    if (kinds && mt_rank == 0)
        printf("random_test --kinds (rank 0's buffers): host malloc %lld, cudaMallocHost %lld, cudaHostRegister %lld; "
               "device cudaMalloc %lld, cudaMallocManaged %lld, cudaMallocAsync %lld, cuMemCreate %lld\n",
               (long long)n_kind[0][0], (long long)n_kind[0][1], (long long)n_kind[0][2], (long long)n_kind[1][0],
               (long long)n_kind[1][1], (long long)n_kind[1][2], (long long)n_kind[1][3]);
    check_node_units();
    return mt_finish("random_test");
}
