/*
 * The batched executor (src/kernels/batch_plan.h, batch_host.c, batch_kernels.cu) without a GPU.
 *
 * Seeded random batches of pieces: a random type of the engine (contiguous, vector, hvector,
 * indexed, struct, subarray, resized, nested: CONTIG, STRIDED and UNITS layouts), a count (0
 * included, and streams from a few bytes to several chunks, some exactly a multiple of
 * GDTE_BATCH_CHUNK), each piece at its own user buffer (misaligned base addresses included) and
 * its own offset in one packed buffer, with gaps between the pieces' streams.
 *
 *  - the work list (gdte_batch_plan): chunk numbers consecutive, each piece's count of chunks
 *    ceil(bytes / chunk), a piece without data none; every chunk found (gdte_batch_find) in the
 *    piece that holds it, the chunks of a piece covering its stream exactly once; a STRIDED
 *    piece's word a power of two <= 16 dividing the layout's alignment, both base addresses and
 *    the block length; a UNITS piece without units refused;
 *  - the batch, packing and unpacking, against the host executor piece by piece: every byte of
 *    the packed buffer (the gaps keep their poison) and of the user buffers (bytes outside the
 *    type map keep theirs), one batch counted per call with data, none without;
 *  - mirror pieces (one buffer of a layout to another of the same layout, no packed stream),
 *    both directions, against a host pack of one buffer unpacked into the other.
 * The executor under test is the host backend's batch (gdte_host_exec_batch, which walks the
 * work list chunk by chunk) or, built with BATCH_EMULATED, the GPU kernel itself on the CPU
 * emulator of tests/gpu/emu (gdte_gpu_exec_batch, thread blocks taking chunks grid-stride).
 *
 * Usage: batch_test [--batches N] [--seed S]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "batch_plan.h"
#include "engine/engine.h"
#include "check.h"

static uint64_t rs;
static uint64_t rnd(void)
{
    uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int64_t rr(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* ---- random types ---- */
static const gdte_basic_t bases[] = {GDTE_BASIC_CHAR, GDTE_BASIC_INT16, GDTE_BASIC_INT32, GDTE_BASIC_DOUBLE,
                                     GDTE_BASIC_COMPLEX_DOUBLE};

static gdte_type_h made[64];
static int nmade;
static gdte_type_h keep(gdte_type_h t)
{
    if (nmade < 64) made[nmade++] = t;
    return t;
}

static gdte_type_h gen(int depth)
{
    gdte_type_h b = gdte_type_predefined(bases[rr(0, 4)]);
    if (depth == 0) return b;
    gdte_type_h c = gen(depth - 1), t = NULL;
    gdte_type_info_t in;
    OK(gdte_type_commit(c));
    OK(gdte_type_get_info(c, &in));
    int64_t ext = in.extent > 0 ? in.extent : 1;
    switch (rr(0, 6)) {
    case 0: OK(gdte_type_create_contiguous(rr(1, 40), c, &t)); break;
    case 1: {
        int64_t bl = rr(1, 8);
        OK(gdte_type_create_vector(rr(1, 64), bl, bl + rr(0, 6), c, &t));
        break;
    }
    case 2: {
        int64_t bl = rr(1, 4);
        OK(gdte_type_create_hvector(rr(1, 40), bl, bl * ext + rr(0, 3) * rr(1, 8), c, &t));
        break;
    }
    case 3: {
        int64_t n = rr(1, 12), len[12], dsp[12], at = 0;
        for (int i = 0; i < n; i++) {
            len[i] = rr(1, 5);
            dsp[i] = at;
            at += len[i] + rr(0, 4);
        }
        OK(gdte_type_create_indexed(n, len, dsp, c, &t));
        break;
    }
    case 4: {
        int64_t len[3] = {1, rr(1, 3), 2}, dsp[3] = {0, ext + 8 * rr(0, 2), 0};
        dsp[2] = dsp[1] + len[1] * ext + rr(1, 7);
        gdte_type_h ts[3] = {c, c, gdte_type_predefined(GDTE_BASIC_INT16)};
        OK(gdte_type_create_struct(3, len, dsp, ts, &t));
        break;
    }
    case 5: {
        int64_t sizes[2] = {rr(2, 24), rr(2, 24)}, sub[2], st[2];
        for (int k = 0; k < 2; k++) {
            sub[k] = rr(1, sizes[k]);
            st[k] = rr(0, sizes[k] - sub[k]);
        }
        OK(gdte_type_create_subarray(2, sizes, sub, st, rr(0, 1) ? GDTE_ORDER_C : GDTE_ORDER_FORTRAN, c, &t));
        break;
    }
    default: OK(gdte_type_create_resized(c, -8 * rr(0, 2), in.true_extent + 8 * rr(0, 6), &t)); break;
    }
    keep(c);
    OK(gdte_type_commit(t));
    return keep(t);
}

static void free_types(void)
{
    for (int i = 0; i < nmade; i++)
        if (made[i]) gdte_type_free(&made[i]);
    nmade = 0;
}

/* ---- the executor under test ---- */
#ifdef BATCH_EMULATED
/* The kernel on the emulator: "device memory" is host memory there. */
static void run_batch(const gdte_batch_piece_t *p, int n, gdte_dir_t dir, void *packed)
{
    void *scratch = malloc(gdte_gpu_exec_batch_scratch(n));
    OK(gdte_gpu_exec_batch(p, n, dir, packed, scratch, NULL));
    free(scratch);
}
#define EXECUTOR "the GPU kernel on the CPU emulator"
#else
static void run_batch(const gdte_batch_piece_t *p, int n, gdte_dir_t dir, void *packed)
{
    gdte_host_exec_batch(p, n, dir, packed);
}
#define EXECUTOR "the host backend"
#endif

#define MAXP 24
#define POISON 0x5A

typedef struct {
    gdte_type_h t;
    int64_t count;
    unsigned char *mem; /* the user allocation */
    size_t bytes;
    char *user;         /* what the piece gets: mem + margin - true lb (+ a misalignment) */
} piece_t;

/* The work list's invariants. */
static void check_plan(const gdte_batch_piece_t *p, int n, unsigned char *packed, int b)
{
    gdte_batch_item_t items[MAXP];
    int64_t nch = -1;
    OK(gdte_batch_plan(p, n, packed, items, &nch));
    int64_t want = 0;
    for (int i = 0; i < n; i++) {
        int64_t t = p[i].L.kind == GDTE_LAYOUT_KIND_EMPTY ? 0 : p[i].L.total;
        CHECK(items[i].chunk0 == want, "batch %d piece %d: first chunk %lld, want %lld", b, i,
              (long long)items[i].chunk0, (long long)want);
        CHECK(items[i].L.total == t && items[i].packed == (char *)packed + p[i].packed && items[i].user == p[i].user,
              "batch %d piece %d: the list does not describe the piece", b, i);
        want += (t + GDTE_BATCH_CHUNK - 1) / GDTE_BATCH_CHUNK;
        if (p[i].L.kind == GDTE_LAYOUT_KIND_STRIDED) {
            /* The widest of 1..16 that divides them all. */
            uint64_t must = (uint64_t)(p[i].L.align > 0 ? p[i].L.align : 1) | (uint64_t)(uintptr_t)p[i].user |
                            (uint64_t)(uintptr_t)items[i].packed | (uint64_t)p[i].L.blocklen | 16u;
            int w = items[i].word, ww = (int)(must & (~must + 1));
            CHECK(w == ww, "batch %d piece %d: word %d for alignment %d, user %p, packed %p, block %lld, want %d", b, i,
                  w, p[i].L.align, (void *)p[i].user, (void *)items[i].packed, (long long)p[i].L.blocklen, ww);
        }
    }
    CHECK(nch == want, "batch %d: %lld chunks, want %lld", b, (long long)nch, (long long)want);
    /* Every chunk in the piece that holds it; a piece's chunks cover its stream once. */
    int64_t covered[MAXP] = {0}, next[MAXP] = {0};
    for (int64_t c = 0; c < nch; c++) {
        int i = gdte_batch_find(items, n, c);
        int64_t lo, hi;
        gdte_batch_chunk(&items[i], c, &lo, &hi);
        int64_t mine = (items[i].L.total + GDTE_BATCH_CHUNK - 1) / GDTE_BATCH_CHUNK;
        CHECK(i >= 0 && i < n && items[i].L.total > 0 && c >= items[i].chunk0 && c < items[i].chunk0 + mine,
              "batch %d: chunk %lld found in piece %d (chunks %lld..%lld)", b, (long long)c, i,
              (long long)items[i].chunk0, (long long)(items[i].chunk0 + mine - 1));
        CHECK(lo == next[i] && hi > lo && hi <= items[i].L.total, "batch %d chunk %lld: bytes [%lld, %lld) of piece %d",
              b, (long long)c, (long long)lo, (long long)hi, i);
        next[i] = hi;
        covered[i] += hi - lo;
    }
    for (int i = 0; i < n; i++)
        CHECK(covered[i] == items[i].L.total, "batch %d piece %d: chunks cover %lld of %lld bytes", b, i,
              (long long)covered[i], (long long)items[i].L.total);
}

static void one_batch(int b)
{
    int n = (int)rr(1, MAXP);
    piece_t pc[MAXP];
    gdte_batch_piece_t p[MAXP];
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        piece_t *q = &pc[i];
        q->t = gen((int)rr(0, 3));
        gdte_type_info_t in;
        OK(gdte_type_get_info(q->t, &in));
        int64_t size = in.size > 0 ? in.size : 1;
        /* A few bytes to a few chunks; some streams exactly a multiple of a chunk. */
        int64_t target = rr(0, 3) == 0 ? 0 : rr(0, 1) ? rr(1, 4096) : rr(1, 3 * GDTE_BATCH_CHUNK);
        q->count = rr(0, 9) == 0 ? 0 : target / size + (target % size != 0);
        if (q->count > 0 && rr(0, 5) == 0 && GDTE_BATCH_CHUNK % size == 0)
            q->count = rr(1, 2) * (GDTE_BATCH_CHUNK / size);
        if (q->count > 20000) q->count = 20000;
        int64_t lb = in.true_lb + (q->count > 1 && in.extent < 0 ? (q->count - 1) * in.extent : 0);
        int64_t span = q->count > 0 ? in.true_extent + (q->count - 1) * (in.extent < 0 ? -in.extent : in.extent) : 0;
        int mis = (int)rr(0, 1) ? (int)rr(1, 7) : 0;
        q->bytes = (size_t)span + 64 + (size_t)mis;
        q->mem = malloc(q->bytes);
        memset(q->mem, POISON, q->bytes);
        q->user = (char *)q->mem + 32 + mis - lb;
        OK(gdte_engine_layout(q->t, q->count, &p[i].L));
        p[i].user = q->user;
        off += rr(0, 1) ? rr(0, 3) * 8 : rr(0, 9); /* a gap before the stream, aligned or not */
        p[i].packed = off;
        p[i].mirror = 0;
        off += q->count > 0 ? p[i].L.total : 0;
    }
    size_t pbytes = (size_t)off + 64;
    unsigned char *packed = malloc(pbytes), *ref = malloc(pbytes);
    check_plan(p, n, packed, b);

    /* Pack: the batch against the host executor piece by piece; the gaps keep their poison. */
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < pc[i].bytes; k++) pc[i].mem[k] = (unsigned char)(rnd() >> 13);
    memset(packed, POISON, pbytes);
    memset(ref, POISON, pbytes);
    int64_t any = 0;
    for (int i = 0; i < n; i++) {
        if (pc[i].count <= 0 || p[i].L.kind == GDTE_LAYOUT_KIND_EMPTY || p[i].L.total <= 0) continue;
        gdte_host_exec(&p[i].L, GDTE_DIR_PACK, pc[i].user, ref + p[i].packed, 0, p[i].L.total);
        any += p[i].L.total;
    }
    int64_t b0 = gdte_exec_batch_count(GDTE_DIR_PACK);
    run_batch(p, n, GDTE_DIR_PACK, packed);
    CHECK(gdte_exec_batch_count(GDTE_DIR_PACK) - b0 == (any > 0), "batch %d: %lld pack batches counted for %lld bytes",
          b, (long long)(gdte_exec_batch_count(GDTE_DIR_PACK) - b0), (long long)any);
    size_t bad = 0;
    while (bad < pbytes && packed[bad] == ref[bad]) bad++;
    CHECK(bad == pbytes, "batch %d (%d pieces): packed byte %zu of %zu is %#x, want %#x (%s)", b, n, bad, pbytes,
          bad < pbytes ? packed[bad] : 0, bad < pbytes ? ref[bad] : 0, EXECUTOR);

    /* Unpack the reference stream into poisoned user buffers, against the host executor. */
    unsigned char *want[MAXP];
    for (int i = 0; i < n; i++) {
        want[i] = malloc(pc[i].bytes);
        memset(want[i], POISON, pc[i].bytes);
        memset(pc[i].mem, POISON, pc[i].bytes);
        if (pc[i].count > 0 && p[i].L.kind != GDTE_LAYOUT_KIND_EMPTY && p[i].L.total > 0)
            gdte_host_exec(&p[i].L, GDTE_DIR_UNPACK, (char *)want[i] + (pc[i].user - (char *)pc[i].mem),
                           ref + p[i].packed, 0, p[i].L.total);
    }
    b0 = gdte_exec_batch_count(GDTE_DIR_UNPACK);
    run_batch(p, n, GDTE_DIR_UNPACK, ref);
    CHECK(gdte_exec_batch_count(GDTE_DIR_UNPACK) - b0 == (any > 0), "batch %d: unpack batches counted", b);
    for (int i = 0; i < n; i++) {
        size_t k = 0;
        while (k < pc[i].bytes && pc[i].mem[k] == want[i][k]) k++;
        CHECK(k == pc[i].bytes, "batch %d piece %d (count %lld, layout kind %d): unpacked byte %zu of %zu is %#x, want "
              "%#x (%s)", b, i, (long long)pc[i].count, p[i].L.kind, k, pc[i].bytes, k < pc[i].bytes ? pc[i].mem[k] : 0,
              k < pc[i].bytes ? want[i][k] : 0, EXECUTOR);
        free(want[i]);
        free(pc[i].mem);
    }
    free(packed);
    free(ref);
    free_types();
}

/* Mirror pieces (a copy between two buffers of one layout, no packed stream, packed = NULL):
 * random types and counts, each piece between its own two allocations (base addresses
 * misaligned apart or together), both directions; against the host executor's pack of one
 * buffer unpacked into a poisoned copy of the other. Bytes outside the type map keep theirs. */
static void mirror_batch(int b)
{
    int n = (int)rr(1, MAXP);
    piece_t pc[MAXP], sec[MAXP];
    gdte_batch_piece_t p[MAXP];
    for (int i = 0; i < n; i++) {
        piece_t *q = &pc[i], *o = &sec[i];
        q->t = gen((int)rr(0, 3));
        gdte_type_info_t in;
        OK(gdte_type_get_info(q->t, &in));
        int64_t size = in.size > 0 ? in.size : 1;
        int64_t target = rr(0, 5) == 0 ? 0 : rr(0, 1) ? rr(1, 4096) : rr(1, 3 * GDTE_BATCH_CHUNK);
        q->count = target / size + (target % size != 0);
        if (q->count > 20000) q->count = 20000;
        int64_t lb = in.true_lb + (q->count > 1 && in.extent < 0 ? (q->count - 1) * in.extent : 0);
        int64_t span = q->count > 0 ? in.true_extent + (q->count - 1) * (in.extent < 0 ? -in.extent : in.extent) : 0;
        int mis = (int)rr(0, 1) ? (int)rr(1, 7) : 0, mis2 = rr(0, 1) ? mis : (int)rr(0, 7);
        q->bytes = o->bytes = (size_t)span + 64 + 8;
        q->mem = malloc(q->bytes);
        o->mem = malloc(o->bytes);
        q->user = (char *)q->mem + 32 + mis - lb;
        o->user = (char *)o->mem + 32 + mis2 - lb;
        OK(gdte_engine_layout(q->t, q->count, &p[i].L));
        p[i].user = q->user;
        p[i].packed = (int64_t)(uintptr_t)o->user;
        p[i].mirror = 1;
    }
    for (int d = 0; d < 2; d++) {
        gdte_dir_t dir = d ? GDTE_DIR_PACK : GDTE_DIR_UNPACK; /* UNPACK: second -> user */
        unsigned char *want[MAXP];
        for (int i = 0; i < n; i++) {
            piece_t *from = dir == GDTE_DIR_UNPACK ? &sec[i] : &pc[i], *to = dir == GDTE_DIR_UNPACK ? &pc[i] : &sec[i];
            for (size_t k = 0; k < from->bytes; k++) from->mem[k] = (unsigned char)(rnd() >> 13);
            memset(to->mem, POISON, to->bytes);
            want[i] = malloc(to->bytes);
            memset(want[i], POISON, to->bytes);
            int64_t t = p[i].L.kind == GDTE_LAYOUT_KIND_EMPTY ? 0 : p[i].L.total;
            if (pc[i].count > 0 && t > 0) {
                unsigned char *tmp = malloc((size_t)t);
                gdte_host_exec(&p[i].L, GDTE_DIR_PACK, from->user, tmp, 0, t);
                gdte_host_exec(&p[i].L, GDTE_DIR_UNPACK, (char *)want[i] + (to->user - (char *)to->mem), tmp, 0, t);
                free(tmp);
            }
        }
        run_batch(p, n, dir, NULL);
        for (int i = 0; i < n; i++) {
            piece_t *to = dir == GDTE_DIR_UNPACK ? &pc[i] : &sec[i];
            size_t k = 0;
            while (k < to->bytes && to->mem[k] == want[i][k]) k++;
            CHECK(k == to->bytes, "mirror batch %d piece %d (%s, count %lld, layout kind %d): byte %zu of %zu is %#x, want "
                  "%#x (%s)", b, i, d ? "pack" : "unpack", (long long)pc[i].count, p[i].L.kind, k, to->bytes,
                  k < to->bytes ? to->mem[k] : 0, k < to->bytes ? want[i][k] : 0, EXECUTOR);
            free(want[i]);
        }
    }
    for (int i = 0; i < n; i++) free(pc[i].mem), free(sec[i].mem);
    free_types();
}

/* A UNITS piece with data but no units: the list refuses it. */
static void invalid(void)
{
    gdte_batch_piece_t p;
    memset(&p, 0, sizeof p);
    p.L.kind = GDTE_LAYOUT_KIND_UNITS;
    p.L.total = 64;
    p.L.units = NULL;
    gdte_batch_item_t it;
    int64_t nch = 0;
    char buf[64];
    CHECK(gdte_batch_plan(&p, 1, buf, &it, &nch) == GDTE_ERR_INVALID_ARG, "a UNITS piece without units was accepted");
}

int main(int argc, char **argv)
{
    int batches = 300;
    uint64_t seed = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batches") && i + 1 < argc) batches = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    }
    rs = seed;
    invalid();
    for (int b = 0; b < batches; b++) one_batch(b);
    for (int b = 0; b < batches / 2; b++) mirror_batch(b);
    printf("batch_test (%s): %d batches, seed %llu: %d failures\n", EXECUTOR, batches, (unsigned long long)seed,
           failures);
    return failures ? 1 : 0;
}
