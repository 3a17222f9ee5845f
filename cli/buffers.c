/*
 * buffers.c - a PyTorch model's persistent buffers for zshardctl export.
 *
 * Buffers (a BatchNorm's running statistics, ...) live in the trainers, not
 * on the servers. zshard.torch frames every checkpoint blob it writes with
 * the rank's persistent buffers (python/zshard/torch/blob.py: b"ZSB1", the
 * length of a safetensors file as 8 little-endian bytes, that file, the
 * caller's blob). An export of a job's parameters at step n takes rank 0's
 * buffers from the job's committed checkpoint of step n: buffers of
 * another step would not be the parameters' (a BatchNorm's statistics of
 * other weights), so an export with none of step n says so and leaves
 * them out rather than write stale ones.
 */
#include "cli/buffers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/le.h"
#include "ctrl/coord_client.h"

void cli_buffers_free(struct cli_buffers *b)
{
	st_close(&b->st);
	for (uint32_t i = 0; i < b->n_ckpt; i++)
		zs_checkpoint_release(&b->ckpt[i]);
	free(b->ckpt);
	memset(b, 0, sizeof *b);
}

enum zs_status cli_buffers_at(struct zs_coord_client *c, const char *job, uint64_t step,
			      struct cli_buffers *out, struct zs_error *err)
{
	enum zs_status st;
	uint64_t newest = 0;
	bool any = false;

	memset(out, 0, sizeof *out);
	if ((st = zs_coord_list_ckpts(c, job, &out->ckpt, &out->n_ckpt, err)))
		return st;
	for (uint32_t i = 0; i < out->n_ckpt; i++) {
		const struct zs_checkpoint *k = &out->ckpt[i];
		const struct zs_blob *b = k->n_blobs && k->blobs[0].rank == 0 ? &k->blobs[0] : NULL;
		uint64_t len;
		if (k->state != ZS_CKPT_COMMITTED || !b || b->len < 12 ||
		    memcmp(b->data, "ZSB1", 4))
			continue;
		if (!any || k->step > newest)
			newest = k->step;
		any = true;
		if (k->step != step)
			continue;
		len = zs_get64(b->data + 4);
		if (len > b->len - 12)
			return zs_fail(err, ZS_EINVAL,
				       "checkpoint %llu's blob of rank 0 is cut short (its buffers want %llu bytes, it has %u)",
				       (unsigned long long)k->id, (unsigned long long)len, b->len - 12);
		snprintf(out->what, sizeof out->what, "checkpoint %llu's buffers of rank 0",
			 (unsigned long long)k->id);
		if ((st = st_parse_mem(b->data + 12, len, out->what, &out->st, err)))
			return st;
		out->found = true;
		out->id = k->id;
		return ZS_OK;
	}
	if (any)
		snprintf(out->why, sizeof out->why,
			 "the newest checkpoint holding them is of step %llu, the parameters are of step %llu",
			 (unsigned long long)newest, (unsigned long long)step);
	else
		snprintf(out->why, sizeof out->why,
			 "no committed checkpoint holds them (zshard.torch records them in each "
			 "zshard_checkpoint)");
	return ZS_OK;
}
