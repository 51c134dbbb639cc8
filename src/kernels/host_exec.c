/* Host executor: runs a layout on the CPU. CI's engine and the path for host memory; it reads
 * the layout through layout.h exactly as the GPU kernels do. */
#include <string.h>
#include "kernels.h"

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

#define MOVE(ubuf, pbuf, n)                                                                     \
    do {                                                                                        \
        if (dir == GDTE_DIR_PACK) copy_n((pbuf), (ubuf), (n)); else copy_n((ubuf), (pbuf), (n)); \
    } while (0)

/* Whole blocks of a fixed size along dimension 0: the hot loop, specialised by size. */
#define ROW_LOOP(BL)                                                                             \
    for (int64_t i = 0; i < rows; i++, off += s0, pk += (BL)) {                                  \
        if (dir == GDTE_DIR_PACK) memcpy(pk, u + off, (BL)); else memcpy(u + off, pk, (BL));     \
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
    while (len > 0) {
        if (r == 0 && len >= bl) {
            /* as many whole blocks of this row as remain */
            int64_t rows = c0 - idx[0];
            if (rows > len / bl) rows = len / bl;
            int64_t start = off;
            switch (bl) {
            case 4: ROW_LOOP(4); break;
            case 8: ROW_LOOP(8); break;
            case 16: ROW_LOOP(16); break;
            default:
                for (int64_t i = 0; i < rows; i++, off += s0, pk += bl) MOVE(u + off, pk, bl);
            }
            (void)start;
            len -= rows * bl;
            idx[0] += rows;
            if (idx[0] < c0) continue; /* stopped inside the row: len is now < bl */
            off -= c0 * s0;
            idx[0] = 0;
        } else {
            int64_t n = bl - r < len ? bl - r : len;
            MOVE(u + off + r, pk, n);
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

static void units(const gdte_layout_t *L, gdte_dir_t dir, char *u, char *pk, int64_t offset, int64_t len)
{
    const gdte_unit_t *U = L->units;
    int64_t rep = offset / L->rep_bytes, q = offset - rep * L->rep_bytes;
    int64_t idx[GDTE_MAX_DIMS], roff = L->disp;
    for (int k = 0; k < L->ndims; k++) {
        idx[k] = rep % L->count[k];
        rep /= L->count[k];
        roff += idx[k] * L->stride[k];
    }
    int64_t i = gdte_layout_find_unit(U, L->nunits, q);
    int64_t in = q - U[i].packed;
    while (len > 0) {
        int64_t n = U[i].len - in;
        if (n > len) n = len;
        MOVE(u + roff + U[i].src + in, pk, n);
        pk += n;
        len -= n;
        in = 0;
        if (++i < L->nunits) continue;
        i = 0;
        for (int k = 0; k < L->ndims; k++) {
            roff += L->stride[k];
            if (++idx[k] < L->count[k]) break;
            roff -= idx[k] * L->stride[k];
            idx[k] = 0;
        }
    }
}

void gdte_host_exec(const gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed, int64_t offset, int64_t len)
{
    char *u = (char *)user, *pk = (char *)packed;
    if (len <= 0) return;
    switch (L->kind) {
    case GDTE_LAYOUT_KIND_CONTIG: MOVE(u + L->disp + offset, pk, len); break;
    case GDTE_LAYOUT_KIND_STRIDED: strided(L, dir, u, pk, offset, len); break;
    case GDTE_LAYOUT_KIND_UNITS: units(L, dir, u, pk, offset, len); break;
    default: break;
    }
}
