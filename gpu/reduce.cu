/*
 * reduce.cu - the reduction's kernels on device memory (see gpu/gpu.h):
 * each push converted to fp32 and deposited into the exact binned sum
 * (math/bsum.h, the host's integer code), its rounding and the mean,
 * clipping's scale, and the compute-dtype copy, with base/dtype.h's
 * conversions.
 */
#include "gpu/launch.cuh"

#include <stdio.h>

#define GRID_STRIDE(i, n)                                                              \
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);       \
	     i += (size_t)gridDim.x * blockDim.x)

__device__ static float to_f32(const void *x, enum zs_dtype dt, size_t i)
{
	if (dt == ZS_F32)
		return ((const float *)x)[i];
	if (dt == ZS_BF16)
		return zs_bf16_to_f32(((const uint16_t *)x)[i]);
	return zs_f16_to_f32(((const uint16_t *)x)[i]);
}

__global__ void deposit_kernel(struct zs_bacc *acc, const void *x, enum zs_dtype dt, size_t n)
{
	GRID_STRIDE(i, n)
		zs_bsum_add(&acc[i], to_f32(x, dt, i));
}

__global__ void finish_kernel(float *out, struct zs_bacc *acc, uint32_t count, size_t n)
{
	const float c = (float)count;
	GRID_STRIDE(i, n)
	{
		float v = zs_bsum_value(&acc[i]);
		out[i] = zs_f32_canon(count > 1 ? v / c : v); /* as the host's zs_bsum_finish */
		acc[i].hi = 0;
		acc[i].lo = 0;
	}
}

__global__ void scale_kernel(float *x, float coef, size_t n)
{
	GRID_STRIDE(i, n)
		x[i] = zs_f32_canon(x[i] * coef);
}

__global__ void from_f32_kernel(void *dst, enum zs_dtype dt, const float *src, size_t n)
{
	GRID_STRIDE(i, n)
	{
		if (dt == ZS_F32)
			((float *)dst)[i] = src[i];
		else if (dt == ZS_BF16)
			((uint16_t *)dst)[i] = zs_f32_to_bf16(src[i]);
		else
			((uint16_t *)dst)[i] = zs_f32_to_f16(src[i]);
	}
}

static bool known(enum zs_dtype dt, char *why, size_t len)
{
	if (dt == ZS_F32 || dt == ZS_BF16 || dt == ZS_F16)
		return true;
	if (why && len)
		snprintf(why, len, "unknown dtype %d", (int)dt);
	return false;
}

enum zs_status zs_gpu_bsum_deposit(struct zs_bacc *acc, const void *x, enum zs_dtype dt,
				   size_t n, char *why, size_t len)
{
	if (!known(dt, why, len))
		return ZS_EINVAL;
	if (n)
		deposit_kernel<<<zs_gpu_blocks(n), 256>>>(acc, x, dt, n);
	return zs_gpu_finish("the reduction kernel", why, len);
}

enum zs_status zs_gpu_bsum_finish(float *out, struct zs_bacc *acc, uint32_t count, size_t n,
				  char *why, size_t len)
{
	if (n)
		finish_kernel<<<zs_gpu_blocks(n), 256>>>(out, acc, count, n);
	return zs_gpu_finish("the mean kernel", why, len);
}

enum zs_status zs_gpu_scale(float *x, float coef, size_t n, char *why, size_t len)
{
	if (n)
		scale_kernel<<<zs_gpu_blocks(n), 256>>>(x, coef, n);
	return zs_gpu_finish("the scale kernel", why, len);
}

enum zs_status zs_gpu_from_f32(void *dst, enum zs_dtype dt, const float *src, size_t n,
			       char *why, size_t len)
{
	if (!known(dt, why, len))
		return ZS_EINVAL;
	if (n)
		from_f32_kernel<<<zs_gpu_blocks(n), 256>>>(dst, dt, src, n);
	return zs_gpu_finish("the conversion kernel", why, len);
}
