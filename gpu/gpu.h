/*
 * gpu.h - the shard math's CUDA kernels (gpu/optim.cu, built by nvcc on
 * every machine: the toolkit is part of this project's machines). They run
 * the per-element arithmetic of math/elem.h, so on a device they give the
 * host kernels' bits. Plain C for its callers; nothing here needs a device
 * to link, and every call says plainly when there is none.
 *
 * First piece of GPU-resident shards (issue 13): the optimizer, reduction
 * and conversion kernels on device memory (optim.cu, reduce.cu), and what
 * the tests need to compare them with the host's.
 */
#ifndef ZS_GPU_H
#define ZS_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "base/dtype.h"
#include "include/zshard_status.h"
#include "math/bsum.h"
#include "math/elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether a CUDA device is usable here: true, or false with the reason
 * (no driver, no device) in why. */
bool zs_gpu_available(char *why, size_t len);

/* Device memory (bytes), or NULL with why. */
void *zs_gpu_alloc(size_t bytes, char *why, size_t len);
void zs_gpu_free(void *p);
/* A synchronous copy between host and device memory (to_device: dst is
 * the device's). ZS_OK, or ZS_EIO with why. */
enum zs_status zs_gpu_copy(void *dst, const void *src, size_t bytes, bool to_device, char *why,
			   size_t len);

/* One optimizer update of n elements held in device memory (buf, m, v may
 * be NULL where the update uses none), on the default stream, waited for.
 * ZS_OK, or ZS_EIO with why. */
enum zs_status zs_gpu_adamw(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			    size_t n, char *why, size_t len);
enum zs_status zs_gpu_sgd(struct zs_sgd_k k, float *p, float *buf, const float *g, size_t n,
			  char *why, size_t len);
/* Adam with weight decay (zs_adam_elem; without, zs_gpu_adamw does it) */
enum zs_status zs_gpu_adam(struct zs_adamw_k k, float *p, float *m, float *v, const float *g,
			   size_t n, char *why, size_t len);
enum zs_status zs_gpu_adagrad(struct zs_adagrad_k k, float *p, float *sum, const float *g,
			      size_t n, char *why, size_t len);

/* The reduction and the copies around it, on device memory, as
 * math/optim.h's zs_bsum_deposit (x in dt), zs_bsum_finish, zs_scale and
 * base/dtype.h's zs_convert_from_f32 do them on the host (the same integer
 * code and conversions: nvcc compiles math/bsum.h and base/dtype.h).
 * ZS_OK, or ZS_EIO with why. */
enum zs_status zs_gpu_bsum_deposit(struct zs_bacc *acc, const void *x, enum zs_dtype dt,
				   size_t n, char *why, size_t len);
enum zs_status zs_gpu_bsum_finish(float *out, struct zs_bacc *acc, uint32_t count, size_t n,
				  char *why, size_t len);
enum zs_status zs_gpu_scale(float *x, float coef, size_t n, char *why, size_t len);
enum zs_status zs_gpu_from_f32(void *dst, enum zs_dtype dt, const float *src, size_t n,
			       char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif
