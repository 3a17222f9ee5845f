/*
 * kern.c - the two tables of gpu/kern.h. The CUDA one is linked in where
 * the build compiled the gpu/ .cu files into the program
 * (ZS_HAVE_CUDA_KERNELS: the daemons); elsewhere (libzshard, which links no
 * CUDA) it is loaded from libzsgpu.so ($ZSHARD_GPU_LIB, else the loader's
 * search path), the same kernels built as a library. The host one wraps
 * math/optim.h and base/dtype.h.
 */
#include "gpu/kern.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/env.h"
#include "math/optim.h"

#ifdef ZS_HAVE_CUDA_KERNELS
#include "gpu/gpu.h"

static const struct zs_kern cuda = {
	.name = "cuda", .deposit = zs_gpu_bsum_deposit, .finish = zs_gpu_bsum_finish,
	.scale = zs_gpu_scale, .adamw = zs_gpu_adamw, .sgd = zs_gpu_sgd, .from_f32 = zs_gpu_from_f32,
	.adam = zs_gpu_adam, .adagrad = zs_gpu_adagrad,
};
#endif

#ifndef ZS_HAVE_CUDA_KERNELS
static struct zs_kern loaded = {.name = "cuda (libzsgpu.so)"};
static char load_err[300];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	const char *path = zs_env("ZSHARD_GPU_LIB") ? zs_env("ZSHARD_GPU_LIB") : "libzsgpu.so";
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(load_err, sizeof load_err,
			 "no CUDA kernels: %s (make builds build/lib/libzsgpu.so; $ZSHARD_GPU_LIB names it)",
			 dlerror());
		return;
	}
	*(void **)&loaded.deposit = dlsym(h, "zs_gpu_bsum_deposit");
	*(void **)&loaded.finish = dlsym(h, "zs_gpu_bsum_finish");
	*(void **)&loaded.scale = dlsym(h, "zs_gpu_scale");
	*(void **)&loaded.adamw = dlsym(h, "zs_gpu_adamw");
	*(void **)&loaded.sgd = dlsym(h, "zs_gpu_sgd");
	*(void **)&loaded.from_f32 = dlsym(h, "zs_gpu_from_f32");
	*(void **)&loaded.adam = dlsym(h, "zs_gpu_adam");
	*(void **)&loaded.adagrad = dlsym(h, "zs_gpu_adagrad");
	if (!loaded.deposit || !loaded.finish || !loaded.scale || !loaded.adamw || !loaded.sgd ||
	    !loaded.from_f32 || !loaded.adam || !loaded.adagrad)
		snprintf(load_err, sizeof load_err, "%s lacks a kernel zshard needs", path);
}
#endif

const struct zs_kern *zs_kern_cuda(char *why, size_t len)
{
#ifdef ZS_HAVE_CUDA_KERNELS
	(void)why;
	(void)len;
	return &cuda;
#else
	pthread_once(&load_once, load);
	if (!load_err[0])
		return &loaded;
	if (why && len)
		snprintf(why, len, "%s", load_err);
	return NULL;
#endif
}

static enum zs_status h_deposit(struct zs_bacc *acc, const void *x, enum zs_dtype dt, size_t n,
				char *why, size_t len)
{
	(void)why;
	(void)len;
	zs_bsum_deposit(acc, x, dt, n);
	return ZS_OK;
}

static enum zs_status h_finish(float *out, struct zs_bacc *acc, uint32_t count, size_t n,
			       char *why, size_t len)
{
	(void)why;
	(void)len;
	zs_bsum_finish(out, acc, count, n);
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

static enum zs_status h_adam(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			     size_t n, char *why, size_t len)
{
	(void)why;
	(void)len;
	for (size_t i = 0; i < n; i++)
		zs_adam_elem(k, &p[i], &m[i], &v[i], g[i]);
	return ZS_OK;
}

static enum zs_status h_adagrad(struct zs_adagrad_k k, float *p, float *sum, const float *g,
				size_t n, char *why, size_t len)
{
	(void)why;
	(void)len;
	for (size_t i = 0; i < n; i++)
		zs_adagrad_elem(k, &p[i], &sum[i], k.wd != 0.0f ? g[i] + k.wd * p[i] : g[i]);
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
	.name = "host", .deposit = h_deposit, .finish = h_finish, .scale = h_scale,
	.adamw = h_adamw, .sgd = h_sgd, .from_f32 = h_from_f32, .adam = h_adam,
	.adagrad = h_adagrad,
};

const struct zs_kern *zs_kern_host(void) { return &host; }
