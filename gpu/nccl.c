/*
 * nccl.c - NCCL's backend of gpu/coll.h, loaded from libnccl.so.2 when a
 * communicator is first made or opened (libzshard links no NCCL). The
 * device's context is made current first, as NCCL expects of its caller.
 * Not run yet: NCCL needs at least two GPUs.
 */
#include "gpu/coll_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

typedef int ZS_ncclResult_t;
typedef void *ZS_ncclComm_t;
typedef int ZS_ncclDataType_t;
typedef void *ZS_cudaStream_t;
typedef struct { char internal[ZS_COLL_ID_BYTES]; } ZS_ncclUniqueId;

#include "gpu/nccl_abi.h"

static struct {
#define X(name, params) ZS_ncclResult_t (*name) params;
	ZS_NCCL_FUNCS(X)
#undef X
	const char *(*ncclGetErrorString)(ZS_ncclResult_t r);
} nc;
static char load_err[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(load_err, sizeof load_err, "no NCCL on this machine (dlopen libnccl.so.2: %s)",
			 dlerror());
		return;
	}
#define X(name, params)                                                                  \
	if (!load_err[0] && !(*(void **)&nc.name = dlsym(h, #name)))                      \
		snprintf(load_err, sizeof load_err, "libnccl.so.2 lacks %s: too old for zshard", \
			 #name);
	ZS_NCCL_FUNCS(X)
	X(ncclGetErrorString, ())
#undef X
}

static const char *nerr(ZS_ncclResult_t r)
{
	const char *s = nc.ncclGetErrorString ? nc.ncclGetErrorString(r) : NULL;
	return s ? s : "unknown NCCL error";
}

/* Loads NCCL once: ZS_OK, or ZS_EUNAVAIL with why. */
static enum zs_status loaded(char *why, size_t len)
{
	pthread_once(&load_once, load);
	if (!load_err[0])
		return ZS_OK;
	if (why && len)
		snprintf(why, len, "%s", load_err);
	return ZS_EUNAVAIL;
}

bool zs_nccl_available(char *why, size_t len) { return loaded(why, len) == ZS_OK; }

enum zs_status zs_nccl_new_id(uint8_t id[ZS_COLL_ID_BYTES], char *why, size_t len)
{
	ZS_ncclUniqueId u;
	ZS_ncclResult_t r;

	if (loaded(why, len))
		return ZS_EUNAVAIL;
	if ((r = nc.ncclGetUniqueId(&u)) != ZS_NCCL_SUCCESS) {
		if (why && len)
			snprintf(why, len, "ncclGetUniqueId: %s", nerr(r));
		return ZS_EIO;
	}
	memcpy(id, u.internal, ZS_COLL_ID_BYTES);
	return ZS_OK;
}

enum zs_status zs_nccl_open(struct zs_coll *c, const uint8_t id[ZS_COLL_ID_BYTES], char *why,
			    size_t len)
{
	ZS_ncclUniqueId u;
	ZS_ncclResult_t r;

	if (loaded(why, len))
		return ZS_EUNAVAIL;
	if (zs_dev_bind(c->dev)) {
		if (why && len)
			snprintf(why, len, "%s", zs_dev_error(c->dev));
		return ZS_EIO;
	}
	memcpy(u.internal, id, ZS_COLL_ID_BYTES);
	if ((r = nc.ncclCommInitRank((ZS_ncclComm_t *)&c->impl, c->nranks, u, c->rank)) !=
	    ZS_NCCL_SUCCESS) {
		if (why && len)
			snprintf(why, len, "ncclCommInitRank (rank %d of %d): %s", c->rank, c->nranks,
				 nerr(r));
		return ZS_EIO;
	}
	return ZS_OK;
}

void zs_nccl_close(struct zs_coll *c)
{
	if (c->impl && !zs_dev_bind(c->dev))
		(c->aborted ? nc.ncclCommAbort : nc.ncclCommDestroy)(c->impl);
}

/* Stops the communicator: its queued work is dropped, later calls fail. */
static enum zs_status abort_with(struct zs_coll *c, enum zs_status st, const char *fmt,
				 const char *detail)
{
	if (!c->aborted && !zs_dev_bind(c->dev))
		nc.ncclCommAbort(c->impl);
	c->aborted = true;
	return zs_coll_fail(c, st, fmt, c->rank, detail);
}

enum zs_status zs_nccl_wait(struct zs_coll *c, zs_dev_stream s)
{
	zs_dev_event ev = NULL;
	int64_t deadline = zs_now_ms() + c->timeout_ms;
	enum zs_status st;
	ZS_ncclResult_t async = ZS_NCCL_SUCCESS;

	if (c->aborted)
		return zs_coll_fail(c, ZS_EIO, "the trainers' communicator was aborted: %s", c->err);
	if (zs_dev_event_create(c->dev, &ev) || zs_dev_record(c->dev, ev, s)) {
		zs_dev_event_destroy(c->dev, ev);
		return zs_coll_fail(c, ZS_EIO, "%s", zs_dev_error(c->dev));
	}
	for (;;) {
		st = zs_dev_query(c->dev, ev);
		if (st != ZS_EAGAIN)
			break;
		nc.ncclCommGetAsyncError(c->impl, &async);
		if (async != ZS_NCCL_SUCCESS) {
			zs_dev_event_destroy(c->dev, ev);
			return abort_with(c, ZS_EIO, "rank %d: NCCL failed: %s", nerr(async));
		}
		if (zs_now_ms() >= deadline) {
			zs_dev_event_destroy(c->dev, ev);
			return abort_with(c, ZS_ETIMEDOUT,
					  "rank %d waited past the bound for a collective of the trainers' communicator (%s): another rank is gone or stopped",
					  "NCCL");
		}
		struct timespec nap = {0, 200000}; /* 0.2 ms */
		nanosleep(&nap, NULL);
	}
	zs_dev_event_destroy(c->dev, ev);
	return st ? zs_coll_fail(c, st, "%s", zs_dev_error(c->dev)) : ZS_OK;
}

enum zs_status zs_nccl_all_gather(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s)
{
	ZS_ncclResult_t r;
	if (zs_dev_bind(c->dev))
		return zs_coll_fail(c, ZS_EIO, "%s", zs_dev_error(c->dev));
	r = nc.ncclAllGather(send, recv, n, ZS_NCCL_UINT8, c->impl, s);
	return r == ZS_NCCL_SUCCESS ? ZS_OK : zs_coll_fail(c, ZS_EIO, "ncclAllGather: %s", nerr(r));
}

enum zs_status zs_nccl_all_to_all(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s)
{
	ZS_ncclResult_t r, r2;
	if (zs_dev_bind(c->dev))
		return zs_coll_fail(c, ZS_EIO, "%s", zs_dev_error(c->dev));
	r = nc.ncclGroupStart();
	for (int p = 0; r == ZS_NCCL_SUCCESS && p < c->nranks; p++) {
		r = nc.ncclSend((const uint8_t *)send + (size_t)p * n, n, ZS_NCCL_UINT8, p, c->impl, s);
		if (r == ZS_NCCL_SUCCESS)
			r = nc.ncclRecv((uint8_t *)recv + (size_t)p * n, n, ZS_NCCL_UINT8, p, c->impl, s);
	}
	r2 = nc.ncclGroupEnd();
	if (r == ZS_NCCL_SUCCESS)
		r = r2;
	return r == ZS_NCCL_SUCCESS ? ZS_OK
				    : zs_coll_fail(c, ZS_EIO, "the all-to-all's sends and receives: %s",
						   nerr(r));
}
