/*
 * What bench/coll needs from a GPU: the CUDA backend (collbench_cuda.cu, CUDA builds) allocates
 * device memory, packs and unpacks 3-D boxes with hand-written kernels for the expert version,
 * and maps other processes' buffers by CUDA IPC; the host backend (collbench_host.c) does the
 * same on host memory, without IPC (the expert version then moves its dense buffers by MPI).
 */
#ifndef COLLBENCH_BACKEND_H
#define COLLBENCH_BACKEND_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CB_IPC_HANDLE_MAX 128

int cb_init(int rank);             /* the GPU used (rank % GPUs), or -1 without one */
int cb_has_ipc(void);              /* 1: the expert version moves data by IPC copies */
const char *cb_device_name(void);  /* "H100", ..., "host" */
void *cb_alloc(size_t bytes);
void cb_free(void *p);
void cb_put(void *dev, const void *host, size_t bytes); /* synchronous */
void cb_get(void *host, const void *dev, size_t bytes);
/* A box of a 3-D C-order array of `elem`-byte elements: sizes, subsizes, starts (dimension 0
 * slowest), between the array and a dense buffer; asynchronous on the backend's stream. */
void cb_box(int unpack, void *array, void *dense, const long sizes[3], const long sub[3], const long starts[3],
            int elem);
void cb_copy_async(void *dst, const void *src, size_t bytes);
/* out[i] = sum over r < nrows of rows[r * n + i] (doubles), asynchronous on the backend's stream. */
void cb_sum_rows(double *out, const double *rows, int nrows, long n);
void cb_sync(void);
size_t cb_ipc_handle_size(void);
int cb_ipc_get(void *p, void *handle);
void *cb_ipc_open(const void *handle);
void cb_ipc_close(void *p);

#ifdef __cplusplus
}
#endif
#endif
