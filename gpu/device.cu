/*
 * device.cu - the device the kernels run on (see gpu/gpu.h): whether there
 * is one, its memory, copies, and the launch helpers gpu/launch.cuh names.
 */
#include "gpu/launch.cuh"

#include <stdio.h>

enum zs_status zs_gpu_fail(cudaError_t e, const char *what, char *why, size_t len)
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
		zs_gpu_fail(e, "no CUDA device usable (cudaGetDeviceCount)", why, len);
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
		zs_gpu_fail(e, "cudaMalloc", why, len);
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
	return e == cudaSuccess ? ZS_OK : zs_gpu_fail(e, "cudaMemcpy", why, len);
}

unsigned zs_gpu_blocks(size_t n)
{
	size_t b = (n + 255) / 256;
	return (unsigned)(b == 0 ? 1 : b > 65535 ? 65535 : b);
}

enum zs_status zs_gpu_finish(const char *what, char *why, size_t len)
{
	cudaError_t e = cudaGetLastError();
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	return e == cudaSuccess ? ZS_OK : zs_gpu_fail(e, what, why, len);
}
