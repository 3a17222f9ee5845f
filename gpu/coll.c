/*
 * coll.c - communicators (gpu/coll.h): the dispatch to NCCL's backend
 * (nccl.c) or the emulated one (coll_emu.c).
 */
#include "gpu/coll_int.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum zs_status zs_coll_new_id(struct zs_dev *d, uint8_t id[ZS_COLL_ID_BYTES], char *why,
			      size_t len)
{
	return zs_dev_emulated(d) ? zs_emu_coll_new_id(id, why, len) : zs_nccl_new_id(id, why, len);
}

enum zs_status zs_coll_open(struct zs_dev *d, const uint8_t id[ZS_COLL_ID_BYTES], int nranks,
			    int rank, int timeout_ms, struct zs_coll **out, char *why, size_t len)
{
	struct zs_coll *c;
	enum zs_status st;

	*out = NULL;
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		if (why && len)
			snprintf(why, len, "rank %d of %d ranks", rank, nranks);
		return ZS_EINVAL;
	}
	c = calloc(1, sizeof *c);
	if (!c)
		return ZS_ENOMEM;
	c->dev = d;
	c->rank = rank;
	c->nranks = nranks;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
	c->nccl = !zs_dev_emulated(d);
	st = c->nccl ? zs_nccl_open(c, id, why, len) : zs_emu_coll_open(c, id, why, len);
	if (st) {
		free(c);
		return st;
	}
	*out = c;
	return ZS_OK;
}

void zs_coll_close(struct zs_coll *c)
{
	if (!c)
		return;
	if (c->nccl)
		zs_nccl_close(c);
	else
		zs_emu_coll_close(c);
	free(c);
}

const char *zs_coll_error(const struct zs_coll *c) { return c->err; }
int zs_coll_rank(const struct zs_coll *c) { return c->rank; }
int zs_coll_size(const struct zs_coll *c) { return c->nranks; }

enum zs_status zs_coll_wait(struct zs_coll *c, zs_dev_stream s)
{
	enum zs_status st;
	if (c->nccl)
		return zs_nccl_wait(c, s);
	/* emulated collectives are complete when they return */
	st = zs_dev_stream_sync(c->dev, s);
	return st ? zs_coll_fail(c, st, "%s", zs_dev_error(c->dev)) : ZS_OK;
}

enum zs_status zs_coll_all_gather(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s)
{
	return c->nccl ? zs_nccl_all_gather(c, send, recv, n, s)
		       : zs_emu_coll_exchange(c, send, recv, n, s, false);
}

enum zs_status zs_coll_all_to_all(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s)
{
	return c->nccl ? zs_nccl_all_to_all(c, send, recv, n, s)
		       : zs_emu_coll_exchange(c, send, recv, n, s, true);
}
