/*
 * optim.cu - the optimizer kernels on device memory (see gpu/gpu.h): one
 * thread per element in a grid-stride loop, math/elem.h's arithmetic.
 * Built with -fmad=false -prec-div=true -prec-sqrt=true -ftz=false (the
 * Makefile): the host kernels' IEEE operations, in their order.
 */
#include "gpu/launch.cuh"

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

__global__ void adam_kernel(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			    size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		zs_adam_elem(k, &p[i], &m[i], &v[i], g[i]);
}

__global__ void adagrad_kernel(struct zs_adagrad_k k, float *p, float *sum, const float *g,
			       size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		zs_adagrad_elem(k, &p[i], &sum[i], k.wd != 0.0f ? g[i] + k.wd * p[i] : g[i]);
}

enum zs_status zs_gpu_adam(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			   size_t n, char *why, size_t len)
{
	if (n)
		adam_kernel<<<zs_gpu_blocks(n), 256>>>(k, p, m, v, g, n);
	return zs_gpu_finish("the Adam kernel", why, len);
}

enum zs_status zs_gpu_adagrad(struct zs_adagrad_k k, float *p, float *sum, const float *g,
			      size_t n, char *why, size_t len)
{
	if (n)
		adagrad_kernel<<<zs_gpu_blocks(n), 256>>>(k, p, sum, g, n);
	return zs_gpu_finish("the Adagrad kernel", why, len);
}

enum zs_status zs_gpu_adamw(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			    size_t n, char *why, size_t len)
{
	if (n)
		adamw_kernel<<<zs_gpu_blocks(n), 256>>>(k, p, m, v, g, n);
	return zs_gpu_finish("the AdamW kernel", why, len);
}

enum zs_status zs_gpu_sgd(struct zs_sgd_k k, float *p, float *buf, const float *g, size_t n,
			  char *why, size_t len)
{
	if (n)
		sgd_kernel<<<zs_gpu_blocks(n), 256>>>(k, p, buf, g, n);
	return zs_gpu_finish("the SGD kernel", why, len);
}
