/*
 * check-nccl-abi.c - gpu/nccl.c declares the NCCL calls itself (libzshard
 * builds without NCCL); compiled against the toolkit's nccl.h with -Werror,
 * this fails when a declaration or constant differs from the header's.
 * tests/gpu/check-cuda-abi.sh compiles it where nccl.h is.
 */
#include <cuda.h>
#include <nccl.h>
#include <stddef.h>

#define ZS_ncclResult_t ncclResult_t
#define ZS_ncclComm_t ncclComm_t
#define ZS_ncclDataType_t ncclDataType_t
#define ZS_ncclUniqueId ncclUniqueId
#define ZS_cudaStream_t cudaStream_t
#include "gpu/nccl_abi.h"

#define X(name, params) ncclResult_t (*const check_##name) params = name;
ZS_NCCL_FUNCS(X)
#undef X
const char *(*const check_error_string)(ncclResult_t) = ncclGetErrorString;

_Static_assert(ZS_NCCL_SUCCESS == ncclSuccess, "ncclSuccess");
_Static_assert(ZS_NCCL_UINT8 == ncclUint8, "ncclUint8");
_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId");
