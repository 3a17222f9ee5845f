/*
 * failover.c - a replicated job's placement without a lost server
 * (model/failover.h).
 */
#include "model/failover.h"

#include <stdlib.h>
#include <string.h>

#include "base/mutant.h"

bool zs_placement_seeded(struct zs_placement *p, uint64_t reporter, uint32_t unit, uint32_t index,
			 uint64_t copy_server, uint64_t epoch)
{
	bool primary = false, changed = false;

	for (uint32_t k = 0; k < p->n_shards; k++) {
		const struct zs_shard *sh = &p->shards[k];
		primary |= sh->unit == unit && sh->index == index && !sh->copy &&
			   sh->server_id == reporter;
	}
	if (!primary && !ZS_MUTANT(ZS_MUT_STALE_SEEDED))
		return false;
	for (uint32_t k = 0; k < p->n_shards; k++) {
		struct zs_shard *sh = &p->shards[k];
		if (sh->unit == unit && sh->index == index && sh->server_id == copy_server &&
		    sh->fresh && (epoch >= sh->placed || ZS_MUTANT(ZS_MUT_SEED_OF_LOST_TAKEN))) {
			sh->fresh = 0;
			changed = true;
		}
	}
	return changed;
}

enum zs_status zs_placement_without(const struct zs_placement *p, uint64_t sid,
				    zs_copy_live_fn live, void *ctx, struct zs_placement *out,
				    struct zs_error *err)
{
	uint32_t n = 0;

	memset(out, 0, sizeof *out);
	out->shards = malloc((p->n_shards ? p->n_shards : 1) * sizeof *out->shards);
	if (!out->shards)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < p->n_shards;) {
		uint32_t e = i, first = n, live_n = 0;
		while (e < p->n_shards && p->shards[e].unit == p->shards[i].unit &&
		       p->shards[e].index == p->shards[i].index)
			e++;
		for (uint32_t k = i; k < e; k++)
			if (p->shards[k].server_id != sid) {
				out->shards[n++] = p->shards[k];
				live_n += live(ctx, &p->shards[k]);
			}
		if (!live_n) {
			free(out->shards);
			out->shards = NULL;
			return zs_fail(err, ZS_ESTATE,
				       "unit %u shard %u has no copy left on a live server",
				       p->shards[i].unit, p->shards[i].index);
		}
		/* a live copy first: it becomes the primary */
		for (uint32_t k = first; k < n; k++)
			if (live(ctx, &out->shards[k])) {
				struct zs_shard t = out->shards[first];
				out->shards[first] = out->shards[k];
				out->shards[k] = t;
				break;
			}
		for (uint32_t k = first; k < n; k++) {
			out->shards[k].copy = k - first;
			out->shards[k].copies = n - first;
		}
		i = e;
	}
	out->n_shards = n;
	out->epoch = p->epoch + 1;
	return ZS_OK;
}

enum zs_loss_act zs_loss_verdict(const struct zs_loss *l)
{
	if (l->failed_over)
		return ZS_LOSS_FAILED_OVER;
	/* the planted bug: a server only stopped taken for one whose state is gone */
	if (!l->restarted && !ZS_MUTANT(ZS_MUT_DOWN_ROLLS_BACK))
		return ZS_LOSS_WAIT;
	if (l->restarted && l->claim && l->stopped_step && l->claim_step == l->stopped_step &&
	    !l->restore_pending)
		return ZS_LOSS_KEEP;
	return ZS_LOSS_ROLLBACK;
}
