/*
 * mpibench_mem.h: the buffers of bench/mpi's programs (mpibench, packbatch, overlap). Device
 * memory through mpibench_backend.h (--mem device), or host memory (--mem host) that the
 * interposer, preloaded under GDTE_FAKE_DEVICE=1, takes as device memory once registered (how the
 * CI tests run them without a GPU). Header-only: mpibench.c is also built alone, from its own two
 * sources, against another MPI (tools/device_run.sh, section bench_mpi).
 */
#ifndef MPIBENCH_MEM_H
#define MPIBENCH_MEM_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mpibench_backend.h"

extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int gdte_fake_device_unregister(void *ptr) __attribute__((weak));

/* `n` bytes (host memory: page-aligned and zeroed); out of memory aborts the job, naming `prog`. */
static inline void *mbm_alloc(size_t n, int device, const char *prog)
{
    if (device) return mb_alloc(n);
    size_t r = (n + 4095) / 4096 * 4096;
    if (!r) r = 4096;
    void *p = aligned_alloc(4096, r);
    if (!p) {
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        fprintf(stderr, "[%d] %s: out of memory (%zu bytes)\n", rank, prog, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(p, 0, r);
    if (gdte_fake_device_register) gdte_fake_device_register(p, n ? n : 1);
    return p;
}

static inline void mbm_free(void *p, int device)
{
    if (!p) return;
    if (device) {
        mb_free(p);
        return;
    }
    if (gdte_fake_device_unregister) gdte_fake_device_unregister(p);
    free(p);
}

/* Synchronous copy between any two of the program's buffers and host memory. */
static inline void mbm_copy(void *dst, const void *src, size_t n, int device)
{
    if (device) mb_memcpy(dst, src, n);
    else memcpy(dst, src, n);
}

#endif
