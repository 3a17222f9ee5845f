/*
 * resize.c - zshardctl job resize: a job's world size changes at a step
 * boundary the coordinator names. The step is four past the latest step
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
	uint64_t top = 0, at;
	uint32_t world, last;

	if (zs_dec_resize(p, n, name, &world, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (!j)
		goto out;
	last = zs_world_last(&j->spec, &j->worlds);
	if (world < 1 || world > ZS_MAX_WORLD) {
		zs_rpc_fail(call, ZS_EINVAL, "a world size of %u: 1 to %d ranks", world, ZS_MAX_WORLD);
		goto out;
	}
	if (j->spec.collective) {
		zs_rpc_fail(call, ZS_EINVAL,
			    "job '%s' is collective: its ranks reduce among themselves over slices cut by its world size; restore a checkpoint into a job of another world size instead",
			    name);
		goto out;
	}
	if (j->restore_pending || j->stop_before) {
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' is %s: resize it once that is done", name,
			    j->restore_pending ? "being restored" : "stopping");
		goto out;
	}
	if (j->n_trainers) {
		if (!coord_latest_report(c, j, &top)) {
			zs_rpc_fail(call, ZS_ESTATE,
				    "no rank of job '%s' has finished a step through the step driver yet: try again in a moment",
				    name);
			goto out;
		}
		/* three past, as a stop's (coord_latest_report), and one more:
		 * the answer to a report posted at the step before names it,
		 * so each rank knows the world of that step as the one before
		 * ends (client/driver.c's zs_step_end), before its data */
		at = top + 4;
	} else {
		/* no rank in: from where the job resumes */
		at = j->stopped_step ? j->stopped_step : j->restored_step;
	}
	if (j->n_trainers && j->worlds.n && j->worlds.v[j->worlds.n - 1].step > top) {
		/*
		 * One named and not run yet: any rank may have its answer, so
		 * it stays. One at a time keeps the few changes a job keeps
		 * enough: every step still open anywhere is at or past the
		 * latest report, and so is the change before the newest.
		 */
		if (world == last) {
			coord_reply_job(call, j);
			goto out;
		}
		zs_rpc_fail(call, ZS_ESTATE,
			    "job '%s' is resizing to %u ranks at step %llu already: ask again once that step has run",
			    name, last, (unsigned long long)j->worlds.v[j->worlds.n - 1].step);
		goto out;
	}
	if (world == last) { /* nothing changes */
		coord_reply_job(call, j);
		goto out;
	}
	old = *j;
	zs_worlds_add(&j->worlds, at, world);
	if (coord_save_job(c, j, false, false, &e)) {
		*j = old;
		coord_reply_err(call, &e);
		goto out;
	}
	zs_info("job '%s': resized from %u to %u ranks from step %llu on", name, last, world,
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
	uint32_t w = zs_world_last(&j->spec, &j->worlds), a = 0, nw, gap = 0;
	struct zs_error e = {0};
	uint64_t top = 0;
	char say[256];

	for (uint32_t i = 0; i < n_away; i++)
		a += away[i] < w;
	if (!a)
		return;
	nw = w - a;
	if (!nw) {
		coord_rollback(c, j, 0, why);
		return;
	}
	for (uint32_t i = 0; i < j->n_trainers; i++) {
		struct zs_member *m = &j->trainers[i], old = *m;
		if (m->rank < nw || m->rank >= w)
			continue;
		while (gap < n_away && away[gap] >= nw)
			gap++;
		if (gap == n_away)
			break; /* cannot be: as many ranks in above nw as away below */
		m->rank = away[gap++];
		if (coord_save_member(c, j, &old, true, &e) || coord_save_member(c, j, m, false, &e))
			zs_error("job '%s': cannot record rank %u as rank %u: %s", j->spec.name,
				 old.rank, m->rank, e.msg);
		zs_info("job '%s': rank %u's trainer takes rank %u (the world shrinks to %u)",
			j->spec.name, old.rank, m->rank, nw);
	}
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
