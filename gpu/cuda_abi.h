/*
 * cuda_abi.h - the CUDA driver API calls gpu/cudadrv.c loads at run time,
 * as one list over type names the includer defines: cudadrv.c with plain C
 * types (no CUDA header needed to build), tests/gpu/check-cuda-abi.c with
 * cuda.h's own, so that a compiler checks every signature against the
 * header wherever the toolkit is (make check does).
 *
 * X(name, (parameters)): every call returns ZS_CUresult.
 */
#ifndef ZS_GPU_CUDA_ABI_H
#define ZS_GPU_CUDA_ABI_H

#define ZS_CU_FUNCS(X)                                                                       \
	X(cuInit, (unsigned int flags))                                                      \
	X(cuDeviceGetCount, (int *count))                                                    \
	X(cuDeviceGet, (ZS_CUdevice * dev, int ordinal))                                     \
	X(cuDeviceGetName, (char *name, int len, ZS_CUdevice dev))                           \
	X(cuDevicePrimaryCtxRetain, (ZS_CUcontext * ctx, ZS_CUdevice dev))                   \
	X(cuDevicePrimaryCtxRelease_v2, (ZS_CUdevice dev))                                   \
	X(cuCtxSetCurrent, (ZS_CUcontext ctx))                                               \
	X(cuMemAlloc_v2, (ZS_CUdeviceptr * p, size_t n))                                     \
	X(cuMemFree_v2, (ZS_CUdeviceptr p))                                                  \
	X(cuMemHostAlloc, (void **p, size_t n, unsigned int flags))                          \
	X(cuMemFreeHost, (void *p))                                                          \
	X(cuMemHostRegister_v2, (void *p, size_t n, unsigned int flags))                     \
	X(cuMemHostUnregister, (void *p))                                                    \
	X(cuStreamCreate, (ZS_CUstream * s, unsigned int flags))                             \
	X(cuStreamDestroy_v2, (ZS_CUstream s))                                               \
	X(cuEventCreate, (ZS_CUevent * e, unsigned int flags))                               \
	X(cuEventDestroy_v2, (ZS_CUevent e))                                                 \
	X(cuMemcpyHtoDAsync_v2, (ZS_CUdeviceptr dst, const void *src, size_t n, ZS_CUstream s)) \
	X(cuMemcpyDtoHAsync_v2, (void *dst, ZS_CUdeviceptr src, size_t n, ZS_CUstream s))    \
	X(cuMemsetD8Async, (ZS_CUdeviceptr dst, unsigned char v, size_t n, ZS_CUstream s))   \
	X(cuEventRecord, (ZS_CUevent e, ZS_CUstream s))                                      \
	X(cuStreamWaitEvent, (ZS_CUstream s, ZS_CUevent e, unsigned int flags))              \
	X(cuEventQuery, (ZS_CUevent e))                                                      \
	X(cuEventSynchronize, (ZS_CUevent e))                                                \
	X(cuStreamSynchronize, (ZS_CUstream s))                                              \
	X(cuGetErrorString, (ZS_CUresult r, const char **s))                                 \
	X(cuGetErrorName, (ZS_CUresult r, const char **s))                                   \
	X(cuDeviceGetUuid_v2, (ZS_CUuuid * uuid, ZS_CUdevice dev))                           \
	X(cuMemGetAddressRange_v2, (ZS_CUdeviceptr * base, size_t *size, ZS_CUdeviceptr p))  \
	X(cuIpcGetMemHandle, (ZS_CUipcMemHandle * h, ZS_CUdeviceptr p))                      \
	X(cuIpcOpenMemHandle_v2, (ZS_CUdeviceptr * p, ZS_CUipcMemHandle h, unsigned int flags)) \
	X(cuIpcCloseMemHandle, (ZS_CUdeviceptr p))

/* the constants used (checked against cuda.h the same way) */
#define ZS_CUDA_SUCCESS 0
#define ZS_CUDA_ERROR_NOT_READY 600
#define ZS_CU_STREAM_NON_BLOCKING 0x1
#define ZS_CU_EVENT_DISABLE_TIMING 0x2
#define ZS_CU_MEMHOSTALLOC_PORTABLE 0x1
#define ZS_CU_MEMHOSTREGISTER_PORTABLE 0x1
#define ZS_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
#define ZS_CU_IPC_HANDLE_SIZE 64

#endif
