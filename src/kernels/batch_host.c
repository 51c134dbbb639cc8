/* Host side of the batched executor (kernels.h): the work list both executors walk
 * (batch_plan.h), the pieces of one collective call moved in one pass by the host executor (the
 * fake device's "launch"), the batch counters, and the GPU entry points of builds without a GPU
 * backend. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "batch_plan.h"

static _Atomic int64_t batches[2];

void gdte_exec_batch_note(gdte_dir_t dir) { atomic_fetch_add_explicit(&batches[dir != GDTE_DIR_PACK], 1, memory_order_relaxed); }

int64_t gdte_exec_batch_count(gdte_dir_t dir) { return atomic_load_explicit(&batches[dir != GDTE_DIR_PACK], memory_order_relaxed); }

/* The lowest set bit of x, at most 16. */
static int lowbit16(uint64_t x)
{
    x |= 16;
    return (int)(x & (~x + 1));
}

gdte_status_t gdte_batch_plan(const gdte_batch_piece_t *pieces, int n, void *packed, gdte_batch_item_t *items,
                              int64_t *nchunks_p)
{
    int64_t nch = 0;
    *nchunks_p = 0;
    if (n > 0 && (!pieces || !items)) return GDTE_ERR_INVALID_ARG;
    for (int i = 0; i < n; i++) {
        const gdte_batch_piece_t *p = &pieces[i];
        gdte_batch_item_t *it = &items[i];
        memset(it, 0, sizeof *it);
        it->L = p->L;
        it->user = p->user;
        it->packed = packed ? (char *)packed + p->packed : (char *)(uintptr_t)p->packed;
        it->chunk0 = nch;
        it->mirror = p->mirror != 0;
        int64_t t = p->L.total > 0 && p->L.kind != GDTE_LAYOUT_KIND_EMPTY ? p->L.total : 0;
        if (t > 0 && p->L.kind == GDTE_LAYOUT_KIND_UNITS && (!p->L.units || p->L.nunits <= 0 || p->L.rep_bytes <= 0))
            return GDTE_ERR_INVALID_ARG;
        it->L.total = t;
        if (p->L.kind == GDTE_LAYOUT_KIND_STRIDED) {
            /* Every block start, on both sides, is a multiple of the layout's alignment plus the
             * base addresses; chunk starts are multiples of GDTE_BATCH_CHUNK. */
            int w = p->L.align > 0 ? p->L.align : 1;
            it->word = lowbit16((uint64_t)w | (uint64_t)(uintptr_t)p->user | (uint64_t)(uintptr_t)it->packed |
                                (uint64_t)p->L.blocklen);
        }
        nch += (t + GDTE_BATCH_CHUNK - 1) / GDTE_BATCH_CHUNK;
    }
    *nchunks_p = nch;
    return GDTE_OK;
}

/* Bytes [lo, hi) (at most one chunk) of a mirror piece: from the second buffer to the user's
 * (UNPACK) or back, through their packed bytes. */
static void mirror_move(const gdte_layout_t *L, gdte_dir_t dir, char *user, char *second, int64_t lo, int64_t hi)
{
    static _Thread_local unsigned char tmp[GDTE_BATCH_CHUNK];
    char *from = dir == GDTE_DIR_UNPACK ? second : user, *to = dir == GDTE_DIR_UNPACK ? user : second;
    gdte_host_exec(L, GDTE_DIR_PACK, from, tmp, lo, hi - lo);
    gdte_host_exec(L, GDTE_DIR_UNPACK, to, tmp, lo, hi - lo);
}

void gdte_host_exec_batch(const gdte_batch_piece_t *pieces, int n, gdte_dir_t dir, void *packed)
{
    gdte_batch_item_t small[16], *items = n <= 16 ? small : malloc((size_t)n * sizeof *items);
    int64_t nch = 0;
    if (!items || gdte_batch_plan(pieces, n, packed, items, &nch) != GDTE_OK) {
        /* No room for the list (or a piece the kernel would refuse): piece by piece. */
        int64_t any = 0;
        for (int i = 0; i < n; i++) {
            const gdte_batch_piece_t *p = &pieces[i];
            if (p->L.total <= 0 || p->L.kind == GDTE_LAYOUT_KIND_EMPTY) continue;
            char *at = packed ? (char *)packed + p->packed : (char *)(uintptr_t)p->packed;
            if (p->mirror)
                for (int64_t lo = 0; lo < p->L.total; lo += GDTE_BATCH_CHUNK)
                    mirror_move(&p->L, dir, p->user, at, lo,
                                lo + GDTE_BATCH_CHUNK < p->L.total ? lo + GDTE_BATCH_CHUNK : p->L.total);
            else
                gdte_host_exec(&p->L, dir, p->user, at, 0, p->L.total);
            any += p->L.total;
        }
        if (items != small) free(items);
        if (any) gdte_exec_batch_note(dir);
        return;
    }
    /* The kernel's chunks, in order: each found in the list as a thread block finds it. */
    for (int64_t c = 0; c < nch; c++) {
        const gdte_batch_item_t *it = &items[gdte_batch_find(items, n, c)];
        int64_t lo, hi;
        gdte_batch_chunk(it, c, &lo, &hi);
        if (it->mirror)
            mirror_move(&it->L, dir, it->user, it->packed, lo, hi);
        else
            gdte_host_exec(&it->L, dir, it->user, it->packed + lo, lo, hi - lo);
    }
    if (items != small) free(items);
    if (nch) gdte_exec_batch_note(dir);
}

#ifdef GDTE_BATCH_NO_GPU
size_t gdte_gpu_exec_batch_scratch(int n)
{
    (void)n;
    return 0;
}
gdte_status_t gdte_gpu_exec_batch(const gdte_batch_piece_t *pieces, int n, gdte_dir_t dir, void *packed,
                                  void *dscratch, gdte_stream_t stream)
{
    (void)pieces; (void)n; (void)dir; (void)packed; (void)dscratch; (void)stream;
    return GDTE_ERR_NO_DEVICE;
}
#endif
