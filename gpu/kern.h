/*
 * kern.h - the shard math on a device's memory, as one table: the CUDA
 * kernels of gpu/gpu.h where this build has them (nvcc found), or the
 * host's kernels for the emulated device (gpu/dev.h), whose "device"
 * memory is host memory. Both run math/elem.h's arithmetic, so both give
 * the host kernels' bits. Each call is complete when it returns; ZS_OK or
 * ZS_EIO with why.
 */
#ifndef ZS_GPU_KERN_H
#define ZS_GPU_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "include/zshard_status.h"
#include "math/bsum.h"
#include "math/elem.h"

struct zs_kern {
	const char *name;
	/* math/optim.h's zs_bsum_deposit (x in dt) and zs_bsum_finish */
	enum zs_status (*deposit)(struct zs_bacc *acc, const void *x, enum zs_dtype dt, size_t n,
				  char *why, size_t len);
	enum zs_status (*finish)(float *out, struct zs_bacc *acc, uint32_t count, size_t n,
				 char *why, size_t len);
	enum zs_status (*scale)(float *x, float coef, size_t n, char *why, size_t len);
	enum zs_status (*adamw)(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
				size_t n, char *why, size_t len);
	enum zs_status (*sgd)(struct zs_sgd_k k, float *p, float *buf, const float *g, size_t n,
			      char *why, size_t len);
	enum zs_status (*adam)(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			       size_t n, char *why, size_t len);
	enum zs_status (*adagrad)(struct zs_adagrad_k k, float *p, float *sum, const float *g,
				  size_t n, char *why, size_t len);
	enum zs_status (*from_f32)(void *dst, enum zs_dtype dt, const float *src, size_t n,
				   char *why, size_t len);
};

/* The CUDA kernels, or NULL when this build has none (why says so). */
const struct zs_kern *zs_kern_cuda(char *why, size_t len);
/* The host's kernels, for the emulated device. */
const struct zs_kern *zs_kern_host(void);

#endif
