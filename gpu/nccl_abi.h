/*
 * nccl_abi.h - the NCCL calls gpu/nccl.c loads at run time, over type names
 * the includer defines (as gpu/cuda_abi.h): nccl.c with plain C types,
 * tests/gpu/check-nccl-abi.c with nccl.h's own. Every call returns
 * ZS_ncclResult_t except ncclGetErrorString.
 */
#ifndef ZS_GPU_NCCL_ABI_H
#define ZS_GPU_NCCL_ABI_H

#define ZS_NCCL_FUNCS(X)                                                                     \
	X(ncclGetUniqueId, (ZS_ncclUniqueId * id))                                           \
	X(ncclCommInitRank, (ZS_ncclComm_t * comm, int nranks, ZS_ncclUniqueId id, int rank)) \
	X(ncclCommDestroy, (ZS_ncclComm_t comm))                                             \
	X(ncclCommAbort, (ZS_ncclComm_t comm))                                               \
	X(ncclCommGetAsyncError, (ZS_ncclComm_t comm, ZS_ncclResult_t * err))                \
	X(ncclAllGather, (const void *send, void *recv, size_t count, ZS_ncclDataType_t type, \
			  ZS_ncclComm_t comm, ZS_cudaStream_t s))                            \
	X(ncclSend, (const void *send, size_t count, ZS_ncclDataType_t type, int peer,        \
		     ZS_ncclComm_t comm, ZS_cudaStream_t s))                                 \
	X(ncclRecv, (void *recv, size_t count, ZS_ncclDataType_t type, int peer,              \
		     ZS_ncclComm_t comm, ZS_cudaStream_t s))                                 \
	X(ncclGroupStart, (void))                                                            \
	X(ncclGroupEnd, (void))

#define ZS_NCCL_SUCCESS 0
#define ZS_NCCL_UINT8 1

#endif
