/* src/kernels/batch_kernels.cu built for the CPU emulator (cuda_runtime_api.h in this folder). */
#include "kernels/batch_kernels.cu"
