/*
 * launch.cuh - what the CUDA sources of gpu/ share (internal to gpu/):
 * the launch shape and the error text.
 */
#ifndef ZS_GPU_LAUNCH_CUH
#define ZS_GPU_LAUNCH_CUH

#include <cuda_runtime.h>

#include "gpu/gpu.h"

/* Blocks of 256 threads enough to cover n, at most 65535 (the kernels
 * loop over a grid-stride). */
unsigned zs_gpu_blocks(size_t n);
/* Writes what failed and CUDA's words for e into why; ZS_EIO. */
enum zs_status zs_gpu_fail(cudaError_t e, const char *what, char *why, size_t len);
/* After a launch: its error, or the kernel's once it ran (waited for). */
enum zs_status zs_gpu_finish(const char *what, char *why, size_t len);

#endif
