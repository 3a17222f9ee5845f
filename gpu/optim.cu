/*
 * optim.cu - the optimizer kernels on device memory (see gpu/gpu.h): one
 * thread per element in a grid-stride loop, math/elem.h's arithmetic.
 * Built with -fmad=false -prec-div=true -prec-sqrt=true -ftz=false (the
 * Makefile): the host kernels' IEEE operations, in their order.
 */
#include "gpu/gpu.h"

#include <cuda_runtime.h>
#include <stdio.h>

static enum zs_status fail(cudaError_t e, const char *what, char *why, size_t len)
{
	if (why && len)
		snprintf(why, len, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	return ZS_EIO;
}

bool zs_gpu_available(char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		fail(e, "no CUDA device usable (cudaGetDeviceCount)", why, len);
		return false;
	}
	if (n == 0) {
		if (why && len)
			snprintf(why, len, "no CUDA device on this machine");
		return false;
	}
	return true;
}

void *zs_gpu_alloc(size_t bytes, char *why, size_t len)
{
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);

	if (e != cudaSuccess) {
		fail(e, "cudaMalloc", why, len);
		return NULL;
	}
	return p;
}

void zs_gpu_free(void *p)
{
	if (p)
		cudaFree(p);
}

enum zs_status zs_gpu_copy(void *dst, const void *src, size_t bytes, bool to_device, char *why,
			   size_t len)
{
	cudaError_t e = cudaMemcpy(dst, src, bytes,
				   to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
	return e == cudaSuccess ? ZS_OK : fail(e, "cudaMemcpy", why, len);
}

__global__ void adamw_kernel(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			     size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		zs_adamw_elem(k, &p[i], &m[i], &v[i], g[i]);
}

__global__ void sgd_kernel(struct zs_sgd_k k, float *p, float *buf, const float *g, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		zs_sgd_elem(k, &p[i], buf ? &buf[i] : NULL, g[i]);
}

/* Blocks of 256 threads, enough to cover n, at most 65535 (grid-stride). */
static unsigned blocks(size_t n)
{
	size_t b = (n + 255) / 256;
	return (unsigned)(b == 0 ? 1 : b > 65535 ? 65535 : b);
}

static enum zs_status finish(const char *what, char *why, size_t len)
{
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	return e == cudaSuccess ? ZS_OK : fail(e, what, why, len);
}

enum zs_status zs_gpu_adamw(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			    size_t n, char *why, size_t len)
{
	if (n)
		adamw_kernel<<<blocks(n), 256>>>(k, p, m, v, g, n);
	return finish("the AdamW kernel", why, len);
}

enum zs_status zs_gpu_sgd(struct zs_sgd_k k, float *p, float *buf, const float *g, size_t n,
			  char *why, size_t len)
{
	if (n)
		sgd_kernel<<<blocks(n), 256>>>(k, p, buf, g, n);
	return finish("the SGD kernel", why, len);
}
