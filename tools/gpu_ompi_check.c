/* Checks a CUDA-aware MPI with two ranks: device buffers (cudaMalloc) passed straight to
 * MPI_Send/MPI_Recv, both directions, 64 B / 64 KiB / 4 MiB, contents verified on the host,
 * then a short 4 MiB ping-pong for a bandwidth figure (CUDA IPC through btl smcuda gives
 * hundreds of GB/s, staging through host memory a few). Prints MPIX_Query_cuda_support().
 * Used by tools/device_run.sh (section gpuompi_check) with the Open MPI of
 * tools/build_gpu_ompi.sh; `gpu_ompi_check host` does the same on malloc'ed memory (no GPU).
 * Build: mpicc tools/gpu_ompi_check.c -I$CUDA/include -L$CUDA/lib64 -lcudart
 * Exit status 0 only if every message arrived intact (and, on device memory, if the library
 * says it is CUDA-aware). */
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BYTES (4u << 20)

static int use_host;

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_));              \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
    }                                                                                         \
  } while (0)

static void fill(uint32_t *h, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) h[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

static void to_buf(int rank, void *buf, const void *h, size_t bytes) {
  if (use_host) memcpy(buf, h, bytes);
  else CK(cudaMemcpy(buf, h, bytes, cudaMemcpyHostToDevice));
}

static void from_buf(int rank, void *h, const void *buf, size_t bytes) {
  if (use_host) memcpy(h, buf, bytes);
  else CK(cudaMemcpy(h, buf, bytes, cudaMemcpyDeviceToHost));
}

int main(int argc, char **argv) {
  int rank = 0, size = 0, bad = 0, support = -1, dev = -1, ndev = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  use_host = argc > 1 && strcmp(argv[1], "host") == 0;
  if (size != 2) {
    if (rank == 0) fprintf(stderr, "gpu_ompi_check: needs exactly 2 ranks (got %d)\n", size);
    MPI_Finalize();
    return 2;
  }
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  support = MPIX_Query_cuda_support();
#endif
  if (!use_host) {
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    CK(cudaGetDevice(&dev));
  }
  if (rank == 0)
    printf("gpu_ompi_check: MPIX_CUDA_AWARE_SUPPORT compiled %s, MPIX_Query_cuda_support() = %d, memory %s, %d GPU(s)\n",
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
           "1",
#else
           "0/undefined",
#endif
           support, use_host ? "host" : "device", ndev);

  void *buf;
  uint32_t *ref = malloc(MAX_BYTES), *got = malloc(MAX_BYTES);
  if (use_host) buf = malloc(MAX_BYTES);
  else CK(cudaMalloc(&buf, MAX_BYTES));

  static const size_t sizes[] = {64, 64u << 10, MAX_BYTES};
  for (int dir = 0; dir < 2; dir++) {
    int sender = dir, receiver = 1 - dir;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t bytes = sizes[k], n = bytes / 4;
      uint32_t seed = 0x9e3779b9u * (uint32_t)(k + 1) + (uint32_t)dir;
      fill(ref, n, seed);
      if (rank == sender) {
        to_buf(rank, buf, ref, bytes);
        MPI_Send(buf, (int)n, MPI_UINT32_T, receiver, (int)k, MPI_COMM_WORLD);
      } else {
        if (use_host) memset(buf, 0, bytes);
        else CK(cudaMemset(buf, 0, bytes));
        MPI_Recv(buf, (int)n, MPI_UINT32_T, sender, (int)k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        from_buf(rank, got, buf, bytes);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) wrong += got[i] != ref[i];
        printf("gpu_ompi_check: %d -> %d %8zu B on GPU %d: %s\n", sender, receiver, bytes, dev,
               wrong ? "WRONG" : "verified");
        if (wrong) {
          fprintf(stderr, "rank %d: %zu of %zu words wrong\n", rank, wrong, n);
          bad = 1;
        }
      }
    }
  }

  /* 4 MiB ping-pong: one-way bandwidth. */
  const int iters = 20;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < iters; i++) {
    if (rank == 0) {
      MPI_Send(buf, MAX_BYTES / 4, MPI_UINT32_T, 1, 100, MPI_COMM_WORLD);
      MPI_Recv(buf, MAX_BYTES / 4, MPI_UINT32_T, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf, MAX_BYTES / 4, MPI_UINT32_T, 0, 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, MAX_BYTES / 4, MPI_UINT32_T, 0, 101, MPI_COMM_WORLD);
    }
  }
  double dt = (MPI_Wtime() - t0) / (2.0 * iters);
  int all_bad = 0;
  MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("gpu_ompi_check: 4 MiB one-way %.1f us, %.2f GB/s (%s memory)\n", dt * 1e6, MAX_BYTES / dt / 1e9,
           use_host ? "host" : "device");
    int ok = !all_bad && (use_host || support == 1);
    printf("gpu_ompi_check: %s (data %s, cuda support %d)\n", ok ? "OK" : "FAIL", all_bad ? "WRONG" : "verified",
           support);
    all_bad = !ok;
  }
  MPI_Bcast(&all_bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (use_host) free(buf);
  else CK(cudaFree(buf));
  free(ref);
  free(got);
  MPI_Finalize();
  return all_bad ? 1 : 0;
}
