/*
 * reduce.cu - the reduction's kernels on device memory (see gpu/gpu.h):
 * each rank's contribution converted to fp32 and added in rank order (one
 * launch per rank, so the order of the additions is the host's), the mean,
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

__global__ void reduce_kernel(float *acc, const void *x, enum zs_dtype dt, bool first, size_t n)
{
	GRID_STRIDE(i, n)
		acc[i] = first ? to_f32(x, dt, i) : acc[i] + to_f32(x, dt, i);
}

__global__ void mean_kernel(float *acc, float c, size_t n)
{
	GRID_STRIDE(i, n)
		acc[i] = acc[i] / c;
}

__global__ void scale_kernel(float *x, float coef, size_t n)
{
	GRID_STRIDE(i, n)
		x[i] *= coef;
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

enum zs_status zs_gpu_reduce(float *acc, const void *x, enum zs_dtype dt, bool first, size_t n,
			     char *why, size_t len)
{
	if (!known(dt, why, len))
		return ZS_EINVAL;
	if (n)
		reduce_kernel<<<zs_gpu_blocks(n), 256>>>(acc, x, dt, first, n);
	return zs_gpu_finish("the reduction kernel", why, len);
}

enum zs_status zs_gpu_mean(float *acc, uint32_t count, size_t n, char *why, size_t len)
{
	if (count > 1 && n) /* the host's zs_reduce_mean leaves one contribution alone */
		mean_kernel<<<zs_gpu_blocks(n), 256>>>(acc, (float)count, n);
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
