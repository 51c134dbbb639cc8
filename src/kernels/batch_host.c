/* Host side of the batched executor (kernels.h): the pieces of one collective call moved in one
 * pass by the host executor (the fake device's "launch"), the batch counters, and the GPU entry
 * points of builds without a GPU backend. */
#include <stdatomic.h>
#include "kernels.h"

static _Atomic int64_t batches[2];

void gdte_exec_batch_note(gdte_dir_t dir) { atomic_fetch_add_explicit(&batches[dir != GDTE_DIR_PACK], 1, memory_order_relaxed); }

int64_t gdte_exec_batch_count(gdte_dir_t dir) { return atomic_load_explicit(&batches[dir != GDTE_DIR_PACK], memory_order_relaxed); }

void gdte_host_exec_batch(const gdte_batch_piece_t *pieces, int n, gdte_dir_t dir, void *packed)
{
    int64_t any = 0;
    for (int i = 0; i < n; i++) {
        const gdte_batch_piece_t *p = &pieces[i];
        if (p->L.total <= 0) continue;
        gdte_host_exec(&p->L, dir, p->user, (char *)packed + p->packed, 0, p->L.total);
        any += p->L.total;
    }
    if (any) gdte_exec_batch_note(dir);
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
