/*
 * kern.c - the two tables of gpu/kern.h. The CUDA one exists where the
 * build compiled the gpu/ .cu files (ZS_HAVE_CUDA_KERNELS: the daemons that link
 * them); the host one wraps math/optim.h and base/dtype.h.
 */
#include "gpu/kern.h"

#include <stdio.h>

#include "math/optim.h"

#ifdef ZS_HAVE_CUDA_KERNELS
#include "gpu/gpu.h"

static const struct zs_kern cuda = {
	.name = "cuda", .reduce = zs_gpu_reduce, .mean = zs_gpu_mean, .scale = zs_gpu_scale,
	.adamw = zs_gpu_adamw, .sgd = zs_gpu_sgd, .from_f32 = zs_gpu_from_f32,
};
#endif

const struct zs_kern *zs_kern_cuda(char *why, size_t len)
{
#ifdef ZS_HAVE_CUDA_KERNELS
	(void)why;
	(void)len;
	return &cuda;
#else
	if (why && len)
		snprintf(why, len, "this build has no CUDA kernels (nvcc was not found when it was built)");
	return NULL;
#endif
}

static enum zs_status h_reduce(float *acc, const void *x, enum zs_dtype dt, bool first,
			       size_t n, char *why, size_t len)
{
	(void)why;
	(void)len;
	if (first)
		zs_reduce_first(acc, x, dt, n);
	else
		zs_reduce_add(acc, x, dt, n);
	return ZS_OK;
}

static enum zs_status h_mean(float *acc, uint32_t count, size_t n, char *why, size_t len)
{
	(void)why;
	(void)len;
	zs_reduce_mean(acc, count, n);
	return ZS_OK;
}

static enum zs_status h_scale(float *x, float coef, size_t n, char *why, size_t len)
{
	(void)why;
	(void)len;
	zs_scale(x, coef, n);
	return ZS_OK;
}

static enum zs_status h_adamw(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			      size_t n, char *why, size_t len)
{
	(void)why;
	(void)len;
	for (size_t i = 0; i < n; i++)
		zs_adamw_elem(k, &p[i], &m[i], &v[i], g[i]);
	return ZS_OK;
}

static enum zs_status h_sgd(struct zs_sgd_k k, float *p, float *buf, const float *g, size_t n,
			    char *why, size_t len)
{
	(void)why;
	(void)len;
	for (size_t i = 0; i < n; i++)
		zs_sgd_elem(k, &p[i], buf ? &buf[i] : NULL, g[i]);
	return ZS_OK;
}

static enum zs_status h_from_f32(void *dst, enum zs_dtype dt, const float *src, size_t n,
				 char *why, size_t len)
{
	(void)why;
	(void)len;
	zs_convert_from_f32(dst, dt, src, n);
	return ZS_OK;
}

static const struct zs_kern host = {
	.name = "host", .reduce = h_reduce, .mean = h_mean, .scale = h_scale,
	.adamw = h_adamw, .sgd = h_sgd, .from_f32 = h_from_f32,
};

const struct zs_kern *zs_kern_host(void) { return &host; }
