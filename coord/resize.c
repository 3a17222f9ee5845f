/*
 * resize.c - zshardctl job resize: a job's world size changes at a step
 * boundary the coordinator names (its decisions: model/resize.h; this is
 * their shell). The step is four past the latest step
 * report (a stop's is three: coord_latest_report): no rank can have begun
 * it, and every rank ends the step before it with an answer naming the
 * change (client/driver.c), so its data loader knows the new world.
 * There, ranks at or above the new world leave (their Leave is no stop:
 * coord_h_leave), the servers hear the step's world
 * from every rank before its pushes (engine/world.c) and each shard's
 * mean is over that step's ranks; new ranks join and begin at that step
 * (zs_trainer_resume says where).
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "coord/recovery.h"

#include "base/log.h"
#include "ctrl/codec.h"
#include "model/resize.h"

uint32_t coord_world_now(struct coord *c, const struct zs_job *j)
{
	uint64_t top = 0;
	uint32_t a, b = zs_world_last(&j->spec, &j->worlds);

	/* a shrink named but not reached: its leaving ranks are in still */
	coord_latest_report(c, j, &top);
	a = zs_world_at(&j->spec, &j->worlds, top + 2);
	return a > b ? a : b;
}

void coord_h_resize_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_job *j, old;
	struct zs_rs_in in = {0};
	uint64_t at;

	if (zs_dec_resize(p, n, name, &in.want, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (!j)
		goto out;
	in.last = zs_world_last(&j->spec, &j->worlds);
	in.collective = j->spec.collective;
	in.restoring = j->restore_pending;
	in.stopping = j->stop_before != 0;
	in.n_trainers = j->n_trainers;
	in.have_top = j->n_trainers && coord_latest_report(c, j, &in.top);
	in.resume_step = j->stopped_step ? j->stopped_step : j->restored_step;
	in.named = j->worlds.n > 0;
	in.named_step = in.named ? j->worlds.v[j->worlds.n - 1].step : 0;
	switch (zs_resize_decide(&in, &at)) {
	case ZS_RS_BAD_WORLD:
		zs_rpc_fail(call, ZS_EINVAL, "a world size of %u: 1 to %d ranks", in.want,
			    ZS_MAX_WORLD);
		goto out;
	case ZS_RS_COLLECTIVE:
		zs_rpc_fail(call, ZS_EINVAL,
			    "job '%s' is collective: its ranks reduce among themselves over slices cut by its world size; restore a checkpoint into a job of another world size instead",
			    name);
		goto out;
	case ZS_RS_BUSY:
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' is %s: resize it once that is done", name,
			    in.restoring ? "being restored" : "stopping");
		goto out;
	case ZS_RS_NO_REPORT:
		zs_rpc_fail(call, ZS_ESTATE,
			    "no rank of job '%s' has finished a step through the step driver yet: try again in a moment",
			    name);
		goto out;
	case ZS_RS_PENDING:
		zs_rpc_fail(call, ZS_ESTATE,
			    "job '%s' is resizing to %u ranks at step %llu already: ask again once that step has run",
			    name, in.last, (unsigned long long)at);
		goto out;
	case ZS_RS_SAME:
		coord_reply_job(call, j);
		goto out;
	case ZS_RS_ADD:
		break;
	}
	old = *j;
	zs_worlds_add(&j->worlds, at, in.want);
	if (coord_save_job(c, j, false, false, &e)) {
		*j = old;
		coord_reply_err(call, &e);
		goto out;
	}
	zs_info("job '%s': resized from %u to %u ranks from step %llu on", name, in.last, in.want,
		(unsigned long long)at);
	coord_reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

static int by_rank(const void *a, const void *b)
{
	const struct zs_member *x = a, *y = b;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/*
 * rank_lost shrink: the world without the ranks away, from the last
 * checkpoint. The lost ranks' step cannot finish without them (some
 * shards have their pushes, others wait for them), and the others' steps
 * since are built on it: so the job rolls back, and the highest ranks
 * still in take the numbers of those away (their trainers learn it at
 * their resume), leaving the world's ranks 0..N-1.
 */
static void shrink(struct coord *c, struct zs_job *j, const uint32_t *away, uint32_t n_away,
		   const char *why)
{
	uint32_t w = zs_world_last(&j->spec, &j->worlds), nw, *ranks;
	struct zs_error e = {0};
	uint64_t top = 0;
	char say[256];

	ranks = malloc((j->n_trainers ? j->n_trainers : 1) * sizeof *ranks);
	if (!ranks) {
		zs_error("job '%s': %s, and no memory to shrink its world: it rolls back",
			 j->spec.name, why);
		coord_rollback(c, j, 0, why);
		return;
	}
	for (uint32_t i = 0; i < j->n_trainers; i++)
		ranks[i] = j->trainers[i].rank;
	nw = zs_shrink_ranks(w, away, n_away, ranks, j->n_trainers);
	if (nw == w) { /* none of them in the world */
		free(ranks);
		return;
	}
	if (!nw) {
		free(ranks);
		coord_rollback(c, j, 0, why);
		return;
	}
	for (uint32_t i = 0; i < j->n_trainers; i++) {
		struct zs_member *m = &j->trainers[i], old = *m;
		if (ranks[i] == m->rank)
			continue;
		m->rank = ranks[i];
		if (coord_save_member(c, j, &old, true, &e) || coord_save_member(c, j, m, false, &e))
			zs_error("job '%s': cannot record rank %u as rank %u: %s", j->spec.name,
				 old.rank, m->rank, e.msg);
		zs_info("job '%s': rank %u's trainer takes rank %u (the world shrinks to %u)",
			j->spec.name, old.rank, m->rank, nw);
	}
	free(ranks);
	qsort(j->trainers, j->n_trainers, sizeof *j->trainers, by_rank);
	coord_latest_report(c, j, &top);
	/* the restore's end makes it the world from the step restored */
	zs_worlds_add(&j->worlds, top + 4, nw);
	zs_fmt(say, sizeof say, "%s: the world shrinks from %u to %u ranks (rank_lost: shrink)", why,
	       w, nw);
	coord_rollback(c, j, 0, say);
}

void coord_away_sweep(struct coord *c, struct zs_job *j, int64_t now)
{
	int64_t bound = j->spec.rank_wait_ms ? j->spec.rank_wait_ms : ZS_RANK_WAIT_MS;
	uint32_t away[64], n;
	char why[160];

	if (j->spec.collective || j->restore_pending ||
	    !(n = coord_ranks_away(c, j, now, bound, away, 64)))
		return;
	zs_fmt(why, sizeof why, "rank %u%s was lost and not replaced within %lld ms", away[0],
	       n > 1 ? " and others" : "", (long long)bound);
	switch (j->spec.rank_lost) {
	case ZS_LOST_WAIT:
		for (uint32_t i = 0; i < n; i++) {
			zs_warn("job '%s': rank %u was lost and is not replaced yet (%lld ms more): the job waits for it (rank_lost: wait; shrink or rollback act instead)",
				j->spec.name, away[i], (long long)bound);
			coord_rank_away_again(c, j, away[i], now);
		}
		break;
	case ZS_LOST_ROLLBACK:
		coord_rollback(c, j, 0, why);
		break;
	case ZS_LOST_SHRINK:
		shrink(c, j, away, n, why);
		break;
	}
}
