/* Host executor: runs a layout on the CPU. CI's engine and the path for host memory; it reads
 * the layout through layout.h exactly as the GPU kernels do. */
#include <stdlib.h>
#include <string.h>
#include "callprof.h"
#include "kernels.h"

/* The user's address `off` bytes from `u`, in integer arithmetic: `u` may be MPI_BOTTOM (NULL)
 * with absolute displacements, or a base placed so that a mirror's first byte is the lowest one
 * a type touches (interpose_pack.c), which lies outside any object; pointer arithmetic on it is
 * undefined in C even where the address reached is valid. */
#define UAT(off) ((char *)((uintptr_t)u + (uintptr_t)(int64_t)(off)))

/* The per-call profile (callprof.h). */
int gdte_callprof_on;
static __thread gdte_callprof_t callprof;
__attribute__((constructor)) static void callprof_init(void)
{
    const char *e = getenv("GDTETEST_PROFILE_CALLS");
    gdte_callprof_on = e && !strcmp(e, "1");
}
void gdte_callprof_enable(int on) { gdte_callprof_on = on != 0; }
void gdte_callprof_add(gdte_cp_stage_t stage, double sec)
{
    if ((unsigned)stage < GDTE_CP_COUNT_) callprof.sec[stage] += sec;
}
void gdte_callprof_call(void) { callprof.calls++; }
void gdte_callprof_take(gdte_callprof_t *p)
{
    *p = callprof;
    memset(&callprof, 0, sizeof callprof);
}

/* Fixed-size copies compile to single moves; the variable case goes to memcpy. */
static inline void copy_n(char *dst, const char *src, int64_t n)
{
    switch (n) {
    case 1: *dst = *src; return;
    case 2: memcpy(dst, src, 2); return;
    case 4: memcpy(dst, src, 4); return;
    case 8: memcpy(dst, src, 8); return;
    case 12: memcpy(dst, src, 12); return;
    case 16: memcpy(dst, src, 16); return;
    case 32: memcpy(dst, src, 32); return;
    default: memcpy(dst, src, (size_t)n);
    }
}

/* Any length, fastest for the short blocks of irregular types: up to 64 bytes in two
 * overlapping moves of a fixed size (both loaded before either is stored), so a unit costs
 * a couple of branches instead of a memcpy call. */
static inline void copy_any(char *dst, const char *src, int64_t n)
{
    if (n > 64) {
        memcpy(dst, src, (size_t)n);
    } else if (n >= 32) {
        char a[32], b[32];
        memcpy(a, src, 32);
        memcpy(b, src + n - 32, 32);
        memcpy(dst, a, 32);
        memcpy(dst + n - 32, b, 32);
    } else if (n >= 16) {
        char a[16], b[16];
        memcpy(a, src, 16);
        memcpy(b, src + n - 16, 16);
        memcpy(dst, a, 16);
        memcpy(dst + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n > 0) {
        char a = src[0], b = src[n / 2], c = src[n - 1];
        dst[0] = a;
        dst[n / 2] = b;
        dst[n - 1] = c;
    }
}

#define MOVE(ubuf, pbuf, n)                                                                     \
    do {                                                                                        \
        if (dir == GDTE_DIR_PACK) copy_n((pbuf), (ubuf), (n)); else copy_n((ubuf), (pbuf), (n)); \
    } while (0)

/* Whole blocks of a fixed size along dimension 0: the hot loop, specialised by size. */
#define ROW_LOOP(BL)                                                                             \
    for (int64_t i = 0; i < rows; i++, off += s0, pk += (BL)) {                                  \
        if (dir == GDTE_DIR_PACK) memcpy(pk, UAT(off), (BL)); else memcpy(UAT(off), pk, (BL));     \
    }

/* Tiles for transposes: when dimension 0 jumps far (a column of a row-major matrix) and
 * dimension 1 steps by a few bytes (the next column), T columns are moved together, row by
 * row: the reads of a row hit one or two cache lines and one page instead of T pages, and
 * the writes go to T sequential streams. Only whole columns are tiled; a fragment that
 * starts or ends inside one takes the plain path for that part. */
#define TILE_COLS 32
#define TILE_MAX_BLOCK 32
#define TILE_MAX_STEP 64
#define TILE_MIN_JUMP 1024

static int tileable(const gdte_layout_t *L)
{
    return L->ndims >= 2 && L->blocklen <= TILE_MAX_BLOCK && L->count[0] >= 16 && L->count[1] >= 2 &&
           L->stride[1] > 0 && L->stride[1] <= TILE_MAX_STEP &&
           (L->stride[0] >= TILE_MIN_JUMP || L->stride[0] <= -TILE_MIN_JUMP);
}

#define TILE_LOOP(BL)                                                                           \
    for (int64_t i0 = 0; i0 < c0; i0++, row += s0)                                             \
        for (int t = 0; t < T; t++) {                                                           \
            char *p_ = pk + ((int64_t)t * c0 + i0) * (BL);                                      \
            if (dir == GDTE_DIR_PACK) memcpy(p_, row + t * s1, (BL)); else memcpy(row + t * s1, p_, (BL)); \
        }

/* Columns idx1 .. idx1 + T - 1, whole, starting at user offset `off`. */
static void tile(gdte_dir_t dir, char *u, char *pk, int64_t off, int64_t bl, int64_t c0, int64_t s0, int64_t s1, int T)
{
    char *row = UAT(off);
    switch (bl) {
    case 4: TILE_LOOP(4); break;
    case 8: TILE_LOOP(8); break;
    case 16: TILE_LOOP(16); break;
    default:
        for (int64_t i0 = 0; i0 < c0; i0++, row += s0)
            for (int t = 0; t < T; t++) {
                char *p_ = pk + ((int64_t)t * c0 + i0) * bl;
                if (dir == GDTE_DIR_PACK) memcpy(p_, row + t * s1, (size_t)bl); else memcpy(row + t * s1, p_, (size_t)bl);
            }
    }
}

static void strided(const gdte_layout_t *L, gdte_dir_t dir, char *u, char *pk, int64_t offset, int64_t len)
{
    const int64_t bl = L->blocklen;
    int64_t b = offset / bl, r = offset - b * bl;
    int64_t idx[GDTE_MAX_DIMS], off = L->disp;
    for (int k = 0; k < L->ndims; k++) {
        idx[k] = b % L->count[k];
        b /= L->count[k];
        off += idx[k] * L->stride[k];
    }
    const int64_t s0 = L->stride[0], c0 = L->count[0];
    const int can_tile = tileable(L);
    while (len > 0) {
        if (can_tile && r == 0 && idx[0] == 0) {
            /* at the top of a column: take as many whole columns as fit, TILE_COLS at a time */
            int64_t T = L->count[1] - idx[1], col = c0 * bl;
            if (T > TILE_COLS) T = TILE_COLS;
            if (T >= 2 && len >= T * col) {
                tile(dir, u, pk, off, bl, c0, s0, L->stride[1], (int)T);
                pk += T * col;
                len -= T * col;
                idx[1] += T;
                off += T * L->stride[1];
                if (idx[1] < L->count[1]) continue;
                off -= idx[1] * L->stride[1];
                idx[1] = 0;
                for (int k = 2; k < L->ndims; k++) {
                    off += L->stride[k];
                    if (++idx[k] < L->count[k]) break;
                    off -= idx[k] * L->stride[k];
                    idx[k] = 0;
                }
                continue;
            }
        }
        if (r == 0 && len >= bl) {
            /* as many whole blocks of this row as remain */
            int64_t rows = c0 - idx[0];
            if (rows > len / bl) rows = len / bl;
            int64_t start = off;
            switch (bl) {
            case 4: ROW_LOOP(4); break;
            case 8: ROW_LOOP(8); break;
            case 16: ROW_LOOP(16); break;
            case 32: ROW_LOOP(32); break;
            case 64: ROW_LOOP(64); break;
            default:
                if (bl <= 64 && dir == GDTE_DIR_PACK)
                    for (int64_t i = 0; i < rows; i++, off += s0, pk += bl) copy_any(pk, UAT(off), bl);
                else if (bl <= 64)
                    for (int64_t i = 0; i < rows; i++, off += s0, pk += bl) copy_any(UAT(off), pk, bl);
                else
                    for (int64_t i = 0; i < rows; i++, off += s0, pk += bl) MOVE(UAT(off), pk, bl);
            }
            (void)start;
            len -= rows * bl;
            idx[0] += rows;
            if (idx[0] < c0) continue; /* stopped inside the row: len is now < bl */
            off -= c0 * s0;
            idx[0] = 0;
        } else {
            int64_t n = bl - r < len ? bl - r : len;
            MOVE(UAT(off + r), pk, n);
            pk += n;
            len -= n;
            r += n;
            if (r < bl) break; /* len exhausted mid-block */
            r = 0;
            off += s0;
            if (++idx[0] < c0) continue;
            off -= c0 * s0;
            idx[0] = 0;
        }
        /* carry into the outer dimensions */
        int k = 1;
        for (; k < L->ndims; k++) {
            off += L->stride[k];
            if (++idx[k] < L->count[k]) break;
            off -= idx[k] * L->stride[k];
            idx[k] = 0;
        }
    }
}

/* The unit walk, once per direction so the copy in the loop has no branch on it. */
#define UNITS_WALK(COPY)                                                                        \
    while (len > 0) {                                                                           \
        int64_t src = U[i].src + in, n = U[i].len - in;                                         \
        /* Units cut from one long block follow each other in memory too: one copy for all  \
         * of them (units are sized for GPU warps; a CPU copies long runs faster whole). */  \
        while (n < len && i + 1 < nu && U[i + 1].src == U[i].src + U[i].len) n += U[++i].len;    \
        if (n > len) n = len;                                                                   \
        COPY;                                                                                   \
        pk += n;                                                                                \
        len -= n;                                                                               \
        in = 0;                                                                                 \
        if (++i < nu) continue;                                                                 \
        i = 0;                                                                                  \
        for (int k = 0; k < L->ndims; k++) {                                                    \
            roff += L->stride[k];                                                               \
            if (++idx[k] < L->count[k]) break;                                                  \
            roff -= idx[k] * L->stride[k];                                                      \
            idx[k] = 0;                                                                         \
        }                                                                                       \
    }

static void units(const gdte_layout_t *L, gdte_dir_t dir, char *u, char *pk, int64_t offset, int64_t len)
{
    const gdte_unit_t *U = L->units;
    const int64_t nu = L->nunits;
    int64_t rep = offset / L->rep_bytes, q = offset - rep * L->rep_bytes;
    int64_t idx[GDTE_MAX_DIMS], roff = L->disp;
    for (int k = 0; k < L->ndims; k++) {
        idx[k] = rep % L->count[k];
        rep /= L->count[k];
        roff += idx[k] * L->stride[k];
    }
    int64_t i = gdte_layout_find_unit(U, nu, q);
    int64_t in = q - U[i].packed;
    if (dir == GDTE_DIR_PACK) {
        UNITS_WALK(copy_any(pk, UAT(roff + src), n))
    } else {
        UNITS_WALK(copy_any(UAT(roff + src), pk, n))
    }
}

void gdte_host_exec(const gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed, int64_t offset, int64_t len)
{
    char *u = (char *)user, *pk = (char *)packed;
    if (len <= 0) return;
    switch (L->kind) {
    case GDTE_LAYOUT_KIND_CONTIG: MOVE(UAT(L->disp + offset), pk, len); break;
    case GDTE_LAYOUT_KIND_STRIDED: strided(L, dir, u, pk, offset, len); break;
    case GDTE_LAYOUT_KIND_UNITS: units(L, dir, u, pk, offset, len); break;
    default: break;
    }
}
