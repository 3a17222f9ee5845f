/*
 * cudadrv.c - the CUDA backend of gpu/dev.h over the driver API, loaded
 * from libcuda.so.1 when a device is first opened: libzshard needs no CUDA
 * to build or link, and a caller's CUstream from any runtime (torch's own
 * cudart) is a stream here. The device's primary context is made current
 * on the calling thread at every call, as the runtime does.
 */
#include "gpu/dev_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int ZS_CUresult;
typedef int ZS_CUdevice;
typedef void *ZS_CUcontext;
typedef void *ZS_CUstream;
typedef void *ZS_CUevent;
typedef unsigned long long ZS_CUdeviceptr;
typedef struct { char bytes[16]; } ZS_CUuuid;
typedef struct { char reserved[64]; } ZS_CUipcMemHandle;

#include "gpu/cuda_abi.h"

static struct {
#define X(name, params) ZS_CUresult (*name) params;
	ZS_CU_FUNCS(X)
#undef X
} cu;
static char load_err[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(load_err, sizeof load_err,
			 "no CUDA driver on this machine (dlopen libcuda.so.1: %s)", dlerror());
		return;
	}
#define X(name, params)                                                                  \
	if (!load_err[0] && !(*(void **)&cu.name = dlsym(h, #name)))                      \
		snprintf(load_err, sizeof load_err,                                      \
			 "the CUDA driver (libcuda.so.1) lacks %s: too old for zshard", #name);
	ZS_CU_FUNCS(X)
#undef X
	if (!load_err[0]) {
		ZS_CUresult r = cu.cuInit(0);
		const char *s = NULL;
		if (r != ZS_CUDA_SUCCESS) {
			cu.cuGetErrorString(r, &s);
			snprintf(load_err, sizeof load_err, "cuInit: %s (CUresult %d)",
				 s ? s : "unknown error", r);
		}
	}
}

struct cuda {
	ZS_CUdevice dev;
	ZS_CUcontext ctx;
};

/* r as d's error, naming the call. */
static enum zs_status cfail(struct zs_dev *d, ZS_CUresult r, const char *what)
{
	const char *s = NULL, *n = NULL;
	cu.cuGetErrorString(r, &s);
	cu.cuGetErrorName(r, &n);
	return zs_dev_fail(d, r == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? ZS_ENOMEM : ZS_EIO,
			   "%s on %s: %s (%s)", what, d->name, s ? s : "unknown error",
			   n ? n : "?");
}

static bool cur(struct zs_dev *d)
{
	struct cuda *c = d->impl;
	ZS_CUresult r = cu.cuCtxSetCurrent(c->ctx);
	if (r != ZS_CUDA_SUCCESS) {
		cfail(d, r, "cuCtxSetCurrent");
		return false;
	}
	return true;
}

#define CALL(d, what, expr)                                                             \
	do {                                                                            \
		ZS_CUresult r_;                                                         \
		if (!cur(d))                                                            \
			return ZS_EIO;                                                  \
		if ((r_ = (expr)) != ZS_CUDA_SUCCESS)                                   \
			return cfail(d, r_, what);                                      \
	} while (0)

static void *c_alloc(struct zs_dev *d, size_t n)
{
	ZS_CUdeviceptr p = 0;
	ZS_CUresult r;
	if (!cur(d))
		return NULL;
	if ((r = cu.cuMemAlloc_v2(&p, n)) != ZS_CUDA_SUCCESS) {
		cfail(d, r, "cuMemAlloc");
		return NULL;
	}
	return (void *)(uintptr_t)p;
}

static void c_free(struct zs_dev *d, void *p)
{
	if (cur(d))
		cu.cuMemFree_v2((ZS_CUdeviceptr)(uintptr_t)p);
}

static void *c_host_alloc(struct zs_dev *d, size_t n)
{
	void *p = NULL;
	ZS_CUresult r;
	if (!cur(d))
		return NULL;
	if ((r = cu.cuMemHostAlloc(&p, n, ZS_CU_MEMHOSTALLOC_PORTABLE)) != ZS_CUDA_SUCCESS) {
		cfail(d, r, "cuMemHostAlloc");
		return NULL;
	}
	return p;
}

static void c_host_free(struct zs_dev *d, void *p)
{
	if (cur(d))
		cu.cuMemFreeHost(p);
}

static enum zs_status c_host_register(struct zs_dev *d, void *p, size_t n)
{
	CALL(d, "cuMemHostRegister",
	     cu.cuMemHostRegister_v2(p, n, ZS_CU_MEMHOSTREGISTER_PORTABLE));
	return ZS_OK;
}

static void c_host_unregister(struct zs_dev *d, void *p)
{
	if (cur(d))
		cu.cuMemHostUnregister(p);
}

static enum zs_status c_stream_create(struct zs_dev *d, zs_dev_stream *s)
{
	CALL(d, "cuStreamCreate", cu.cuStreamCreate(s, ZS_CU_STREAM_NON_BLOCKING));
	return ZS_OK;
}

static void c_stream_destroy(struct zs_dev *d, zs_dev_stream s)
{
	if (cur(d))
		cu.cuStreamDestroy_v2(s);
}

static enum zs_status c_event_create(struct zs_dev *d, zs_dev_event *e)
{
	CALL(d, "cuEventCreate", cu.cuEventCreate(e, ZS_CU_EVENT_DISABLE_TIMING));
	return ZS_OK;
}

static void c_event_destroy(struct zs_dev *d, zs_dev_event e)
{
	if (cur(d))
		cu.cuEventDestroy_v2(e);
}

static enum zs_status c_copy(struct zs_dev *d, void *dst, const void *src, size_t n,
			     enum zs_dev_dir dir, zs_dev_stream s)
{
	if (dir == ZS_DEV_H2D)
		CALL(d, "cuMemcpyHtoDAsync",
		     cu.cuMemcpyHtoDAsync_v2((ZS_CUdeviceptr)(uintptr_t)dst, src, n, s));
	else
		CALL(d, "cuMemcpyDtoHAsync",
		     cu.cuMemcpyDtoHAsync_v2(dst, (ZS_CUdeviceptr)(uintptr_t)src, n, s));
	return ZS_OK;
}

static enum zs_status c_zero(struct zs_dev *d, void *dst, size_t n, zs_dev_stream s)
{
	CALL(d, "cuMemsetD8Async", cu.cuMemsetD8Async((ZS_CUdeviceptr)(uintptr_t)dst, 0, n, s));
	return ZS_OK;
}

static enum zs_status c_record(struct zs_dev *d, zs_dev_event e, zs_dev_stream s)
{
	CALL(d, "cuEventRecord", cu.cuEventRecord(e, s));
	return ZS_OK;
}

static enum zs_status c_wait(struct zs_dev *d, zs_dev_stream s, zs_dev_event e)
{
	CALL(d, "cuStreamWaitEvent", cu.cuStreamWaitEvent(s, e, 0));
	return ZS_OK;
}

static enum zs_status c_query(struct zs_dev *d, zs_dev_event e)
{
	ZS_CUresult r;
	if (!cur(d))
		return ZS_EIO;
	r = cu.cuEventQuery(e);
	if (r == ZS_CUDA_ERROR_NOT_READY)
		return ZS_EAGAIN;
	return r == ZS_CUDA_SUCCESS ? ZS_OK : cfail(d, r, "cuEventQuery");
}

static enum zs_status c_sync(struct zs_dev *d, zs_dev_event e)
{
	CALL(d, "cuEventSynchronize", cu.cuEventSynchronize(e));
	return ZS_OK;
}

static enum zs_status c_stream_sync(struct zs_dev *d, zs_dev_stream s)
{
	CALL(d, "cuStreamSynchronize", cu.cuStreamSynchronize(s));
	return ZS_OK;
}

static enum zs_status c_bind(struct zs_dev *d) { return cur(d) ? ZS_OK : ZS_EIO; }

static void c_close(struct zs_dev *d)
{
	struct cuda *c = d->impl;
	cu.cuDevicePrimaryCtxRelease_v2(c->dev);
	free(c);
}

/* sharing with another process of this host: CUDA IPC */
static enum zs_status c_share(struct zs_dev *d, const void *p, void **base, size_t *size,
			      unsigned char handle[ZS_DEV_HANDLE_BYTES])
{
	ZS_CUdeviceptr b = 0;
	ZS_CUipcMemHandle h;

	_Static_assert(sizeof h == ZS_DEV_HANDLE_BYTES, "CUipcMemHandle");
	CALL(d, "cuMemGetAddressRange",
	     cu.cuMemGetAddressRange_v2(&b, size, (ZS_CUdeviceptr)(uintptr_t)p));
	CALL(d, "cuIpcGetMemHandle", cu.cuIpcGetMemHandle(&h, b));
	memcpy(handle, &h, sizeof h);
	*base = (void *)(uintptr_t)b;
	return ZS_OK;
}

static enum zs_status c_map(struct zs_dev *d, const unsigned char handle[ZS_DEV_HANDLE_BYTES],
			    void **base, size_t *size)
{
	ZS_CUdeviceptr p = 0, b = 0;
	ZS_CUipcMemHandle h;

	memcpy(&h, handle, sizeof h);
	CALL(d, "cuIpcOpenMemHandle",
	     cu.cuIpcOpenMemHandle_v2(&p, h, ZS_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	if (cu.cuMemGetAddressRange_v2(&b, size, p) != ZS_CUDA_SUCCESS || b != p) {
		cu.cuIpcCloseMemHandle(p);
		return zs_dev_fail(d, ZS_EIO, "cuMemGetAddressRange on %s: an opened handle's size is unknown",
				   d->name);
	}
	*base = (void *)(uintptr_t)p;
	return ZS_OK;
}

static void c_unmap(struct zs_dev *d, void *base, size_t size)
{
	(void)size;
	if (cur(d))
		cu.cuIpcCloseMemHandle((ZS_CUdeviceptr)(uintptr_t)base);
}

static const struct zs_dev_ops cuda_ops = {
	.alloc = c_alloc, .free = c_free, .host_alloc = c_host_alloc, .host_free = c_host_free,
	.host_register = c_host_register, .host_unregister = c_host_unregister,
	.stream_create = c_stream_create, .stream_destroy = c_stream_destroy,
	.event_create = c_event_create, .event_destroy = c_event_destroy,
	.copy = c_copy, .zero = c_zero, .record = c_record, .wait = c_wait,
	.query = c_query, .sync = c_sync, .stream_sync = c_stream_sync, .bind = c_bind,
	.close = c_close, .share = c_share, .map = c_map, .unmap = c_unmap,
};

int zs_dev_count(char *why, size_t len)
{
	int count = 0;
	ZS_CUresult r;
	const char *s = NULL;

	pthread_once(&load_once, load);
	if (load_err[0]) {
		if (why && len)
			snprintf(why, len, "%s", load_err);
		return -1;
	}
	if ((r = cu.cuDeviceGetCount(&count)) != ZS_CUDA_SUCCESS) {
		cu.cuGetErrorString(r, &s);
		if (why && len)
			snprintf(why, len, "cuDeviceGetCount: %s", s ? s : "unknown error");
		return -1;
	}
	return count;
}

enum zs_status zs_dev_cuda_open(struct zs_dev *d, int device, char *why, size_t len)
{
	struct cuda *c;
	int count = 0;
	ZS_CUresult r;
	const char *s = NULL;
	char name[64] = "";

	pthread_once(&load_once, load);
	if (load_err[0]) {
		if (why && len)
			snprintf(why, len, "%s", load_err);
		return ZS_EUNAVAIL;
	}
	if ((r = cu.cuDeviceGetCount(&count)) != ZS_CUDA_SUCCESS || device >= count) {
		if (r != ZS_CUDA_SUCCESS)
			cu.cuGetErrorString(r, &s);
		if (why && len)
			snprintf(why, len, "no CUDA device %d (%s%d on this machine)", device,
				 s ? s : "", s ? 0 : count);
		return ZS_EUNAVAIL;
	}
	c = calloc(1, sizeof *c);
	if (!c)
		return ZS_ENOMEM;
	if ((r = cu.cuDeviceGet(&c->dev, device)) != ZS_CUDA_SUCCESS ||
	    (r = cu.cuDevicePrimaryCtxRetain(&c->ctx, c->dev)) != ZS_CUDA_SUCCESS) {
		cu.cuGetErrorString(r, &s);
		if (why && len)
			snprintf(why, len, "CUDA device %d: %s", device, s ? s : "unknown error");
		free(c);
		return ZS_EIO;
	}
	cu.cuDeviceGetName(name, (int)sizeof name, c->dev);
	{ /* the identity processes compare before sharing memory: its UUID's */
		ZS_CUuuid u;
		unsigned h = 2166136261u;
		if (cu.cuDeviceGetUuid_v2(&u, c->dev) == ZS_CUDA_SUCCESS)
			for (size_t i = 0; i < sizeof u.bytes; i++)
				h = (h ^ (unsigned char)u.bytes[i]) * 16777619u;
		else
			h = 0x43554400u + (unsigned)device; /* "CUD" and the ordinal */
		d->ident = h ? h : 1;
	}
	d->ops = &cuda_ops;
	d->impl = c;
	snprintf(d->name, sizeof d->name, "cuda:%d %s", device, name);
	return ZS_OK;
}
