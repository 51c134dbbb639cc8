/*
 * What the halo3d benchmark needs from the memory it runs on: the CUDA backend
 * (halo3d_cuda.cu: cudaMalloc'd grids, hand-written pack kernels) or the host backend
 * (halo3d.c: fake device memory registered with libgdte_mpi.so, C pack loops), so the same
 * benchmark is exercised in CI and measured on the GPU machine.
 */
#ifndef HALO3D_BACKEND_H
#define HALO3D_BACKEND_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A face: the cells with coordinate `dim` == `at` and the other two in [1, n], of an
 * (n+2)^3 grid of doubles in C order. Packed order: C order over the face. */
typedef struct hb_face {
    int n, dim, at;
} hb_face_t;

int hb_init(int local_rank);          /* select the device; returns 0 on success */
const char *hb_device_name(void);
void *hb_dev_alloc(size_t bytes);      /* zeroed */
void hb_dev_free(void *p);
void *hb_pinned_alloc(size_t bytes);
void hb_pinned_free(void *p);
void hb_memcpy(void *dst, const void *src, size_t bytes); /* any direction, synchronous */
void hb_memcpy_async(void *dst, const void *src, size_t bytes);
void hb_sync(void);
/* The expert's hand-written kernels: gather a face of `grid` (device) into `buf` (device,
 * contiguous), or scatter it back; asynchronous on the backend's stream. */
void hb_pack_face(const double *grid, hb_face_t f, double *buf);
void hb_unpack_face(double *grid, hb_face_t f, const double *buf);

#ifdef __cplusplus
}
#endif
#endif
