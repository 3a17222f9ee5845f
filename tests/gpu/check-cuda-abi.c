/*
 * check-cuda-abi.c - gpu/cudadrv.c declares the CUDA driver calls itself
 * (so libzshard builds without CUDA); this file, compiled against the
 * toolkit's cuda.h with -Werror, fails when any of those declarations or
 * constants differ from the header's. make check compiles it where the
 * toolkit is (tests/gpu/check-cuda-abi.sh also finds every name in the
 * driver's stub library).
 */
#include <cuda.h>
#include <stddef.h>

#define ZS_CUresult CUresult
#define ZS_CUdevice CUdevice
#define ZS_CUcontext CUcontext
#define ZS_CUstream CUstream
#define ZS_CUevent CUevent
#define ZS_CUdeviceptr CUdeviceptr
#define ZS_CUuuid CUuuid
#define ZS_CUipcMemHandle CUipcMemHandle
#include "gpu/cuda_abi.h"

/* each name, taken with the parameter list cudadrv.c calls it with */
#define X(name, params) CUresult (*const check_##name) params = name;
ZS_CU_FUNCS(X)
#undef X

_Static_assert(ZS_CUDA_SUCCESS == CUDA_SUCCESS, "CUDA_SUCCESS");
_Static_assert(ZS_CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY");
_Static_assert(ZS_CU_STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING, "CU_STREAM_NON_BLOCKING");
_Static_assert(ZS_CU_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING, "CU_EVENT_DISABLE_TIMING");
_Static_assert(ZS_CU_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTALLOC_PORTABLE, "CU_MEMHOSTALLOC_PORTABLE");
_Static_assert(ZS_CU_MEMHOSTREGISTER_PORTABLE == CU_MEMHOSTREGISTER_PORTABLE,
	       "CU_MEMHOSTREGISTER_PORTABLE");
_Static_assert(ZS_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
	       "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS");
_Static_assert(ZS_CU_IPC_HANDLE_SIZE == CU_IPC_HANDLE_SIZE, "CU_IPC_HANDLE_SIZE");
_Static_assert(sizeof(CUipcMemHandle) == CU_IPC_HANDLE_SIZE, "CUipcMemHandle");
_Static_assert(sizeof(CUuuid) == 16, "CUuuid");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "CUdeviceptr");
_Static_assert(sizeof(CUdevice) == sizeof(int), "CUdevice");
_Static_assert(sizeof(CUresult) == sizeof(int), "CUresult");
