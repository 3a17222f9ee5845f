/* coll_int.h - a communicator and its backends (gpu/coll.h is the API):
 * coll.c dispatches, coll_emu.c is the emulated one, nccl.c NCCL's. */
#ifndef ZS_GPU_COLL_INT_H
#define ZS_GPU_COLL_INT_H

#include <stdarg.h>
#include <stdio.h>

#include "gpu/coll.h"

struct zs_coll {
	struct zs_dev *dev;
	int rank, nranks;
	int timeout_ms;
	char err[256];
	void *impl;
	bool nccl;
	bool aborted; /* NCCL: after a wait ran out; every call fails */
};

/* Leaves the reason in c->err and returns st (here, with the handle:
 * the backends call it, and the front calls them). */
__attribute__((format(printf, 3, 4))) static inline enum zs_status
zs_coll_fail(struct zs_coll *c, enum zs_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
	return st;
}


/* coll_emu.c */
enum zs_status zs_emu_coll_new_id(uint8_t id[ZS_COLL_ID_BYTES], char *why, size_t len);
enum zs_status zs_emu_coll_open(struct zs_coll *c, const uint8_t id[ZS_COLL_ID_BYTES], char *why,
				size_t len);
void zs_emu_coll_close(struct zs_coll *c);
enum zs_status zs_emu_coll_exchange(struct zs_coll *c, const void *send, void *recv, size_t n,
				    zs_dev_stream s, bool transpose);

/* nccl.c */
enum zs_status zs_nccl_new_id(uint8_t id[ZS_COLL_ID_BYTES], char *why, size_t len);
enum zs_status zs_nccl_open(struct zs_coll *c, const uint8_t id[ZS_COLL_ID_BYTES], char *why,
			    size_t len);
void zs_nccl_close(struct zs_coll *c);
enum zs_status zs_nccl_wait(struct zs_coll *c, zs_dev_stream s);
enum zs_status zs_nccl_all_gather(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s);
enum zs_status zs_nccl_all_to_all(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s);

#endif
