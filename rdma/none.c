/*
 * none.c - the rdma transport of a build without libibverbs: the build
 * picks this file instead of the verbs ones (Makefile: RDMA_SRC), so every
 * entry point exists and says plainly why rdma is not there.
 */
#include "rdma/rdma.h"

#include <stdio.h>

#include "net/stream.h"

#define NO_RDMA "this zshard was built without RDMA (libibverbs-dev was not found at build time)"

enum zs_status zs_rdma_probe(uint64_t lock_bytes, char *note, size_t len)
{
	(void)lock_bytes;
	snprintf(note, len, "%s", NO_RDMA);
	return ZS_EUNAVAIL;
}

static enum zs_status no_open(void *arena, size_t len, void **ctx, struct zs_error *err)
{
	(void)arena;
	(void)len;
	*ctx = NULL;
	return zs_fail(err, ZS_EUNAVAIL, "%s", NO_RDMA);
}

const struct zs_listener_path zs_rdma_path = {
	.name = "rdma",
	.open = no_open,
};


void zs_rdma_debug_corrupt_next(struct zs_conn *c, uint64_t bad_offset, uint32_t bad_key)
{
	(void)c;
	(void)bad_offset;
	(void)bad_key;
}

static bool rdma_available(char *why, size_t len) { return !zs_rdma_probe(0, why, len); }

const struct zs_transport_ops zs_rdma_transport = {
	.name = "rdma",
	.caps = ZS_CAP_ONE_SIDED | ZS_CAP_REGISTER,
	.bit = ZS_TRANSPORT_RDMA,
	.available = rdma_available, /* says why: no hooks, no connection */
	.reg = stream_reg,
	.dereg = stream_dereg,
};

