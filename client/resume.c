/*
 * resume.c - a trainer's way back onto its job's timeline: after a restore
 * or an automatic rollback (the job lost a process), after a clean stop,
 * or at the start of a process that replaces a lost one. zs_trainer_resume
 * takes the rank again if its lease lapsed, waits for the restore under
 * way, reconnects (connections of an earlier timeline get ZS_ERESUME) and
 * says where the job's state is.
 */
#include "client/trainer.h"

#include "base/log.h"
#include "model/resume.h"

/* Whether t's session still holds a rank in job j: its own, or the one a
 * shrink gave it (rank_lost: shrink moves the highest ranks into the
 * places of those lost: t takes it). */
static bool holds_rank(zs_trainer *t, const struct zs_job *j)
{
	for (uint32_t i = 0; i < j->n_trainers; i++)
		if (j->trainers[i].session == t->ls.session) {
			if (j->trainers[i].rank != t->rank) {
				zs_info("rank %u of job '%s' is rank %u now: the job's world shrank without a rank lost (rank_lost: shrink)",
					t->rank, j->spec.name, j->trainers[i].rank);
				t->rank = j->trainers[i].rank;
			}
			return true;
		}
	return false;
}

/* Takes t's rank again (its lease lapsed, or it was evicted), waiting
 * until deadline for a rank another lost process still holds. */
static enum zs_status rejoin(zs_trainer *t, int64_t deadline, struct zs_error *err)
{
	struct zs_join_req req = {.rank = t->rank, .session = t->ls.session};
	struct zs_job nj;
	enum zs_status st;

	snprintf(req.job, sizeof req.job, "%s", t->job.spec.name);
	gethostname(req.host, sizeof req.host - 1);
	/* the job of that name must still be the one this trainer trains */
	req.layout_digest = zs_layout_digest(&t->job.spec.layout);
	tr_lease_stop(t);
	while ((st = zs_coord_join(t->coord, &req, &nj, err)) == ZS_EEXIST &&
	       zs_now_ms() < deadline)
		zs_sleep_ms(200, NULL);
	if (st)
		return st;
	zs_job_release(&t->job);
	t->job = nj;
	t->worlds = nj.worlds;
	if ((st = tr_take_placement(t, &t->job.placement)))
		return zs_fail(err, st, "out of memory");
	zs_info("rank %u rejoined job '%s' (its lease had lapsed, or it was evicted)", t->rank,
		nj.spec.name);
	return tr_lease_start(t, err); /* clears evicted */
}

/*
 * Brings t onto the job's current timeline: rejoins if its rank lapsed,
 * waits (within t->timeout_ms) for a restore or rollback under way, and
 * reconnects to every server (connections of an earlier timeline get
 * ZS_ERESUME). *j: the job as it is now (the caller releases it).
 */
static enum zs_status catch_up(zs_trainer *t, struct zs_job *j, struct zs_error *err)
{
	int64_t deadline = zs_now_ms() + t->timeout_ms;
	bool rejoined = false;
	enum zs_status st;

	for (;;) {
		if ((st = zs_coord_get_job(t->coord, t->job.spec.name, j, err)))
			return st;
		if (!rejoined && (atomic_load(&t->ls.evicted) || !holds_rank(t, j))) {
			zs_job_release(j);
			if ((st = rejoin(t, deadline, err)))
				return st;
			rejoined = true;
			continue;
		}
		if (!j->restore_pending)
			break;
		zs_job_release(j);
		if (zs_now_ms() >= deadline)
			return zs_fail(err, ZS_ESTATE, "job '%s' is still being restored (waited %d ms)",
				       t->job.spec.name, t->timeout_ms);
		zs_sleep_ms(50, NULL);
	}
	if (j->restore_error[0]) {
		st = zs_fail(err, ZS_EIO, "job '%s' could not be restored: %s", j->spec.name,
			     j->restore_error);
		zs_job_release(j);
		return st;
	}
	/* the placement may have moved with the restore: take the job's */
	if ((st = tr_take_placement(t, &j->placement))) {
		zs_job_release(j);
		return zs_fail(err, st, "out of memory");
	}
	/* the end of these connections is not this process's (said first:
	 * stopped before its reconnect, it must not be taken for gone) */
	tr_lease_reconnecting(t, true);
	tr_disconnect(t);
	tr_driver_reset(t);
	t->worlds = j->worlds; /* said again on every new connection */
	t->said = (struct zs_worlds){0};
	t->hps.set = false; /* the new timeline starts from the spec's values */
	t->hps.n_hist = 0;
	st = tr_reconnect(t, err);
	tr_lease_reconnecting(t, false);
	if (st) {
		zs_job_release(j);
		return st;
	}
	t->timeline = j->timeline;
	atomic_store(&t->ls.seen_timeline, j->timeline);
	/* a boundary answer of the ended timeline (its stop, its world) says
	 * nothing of this one: the next boundary asks again */
	pthread_mutex_lock(&t->ls.down_mu);
	zs_bm_drop(&t->ls.bm); /* one on its way: its answer is dropped */
	pthread_mutex_unlock(&t->ls.down_mu);
	return ZS_OK;
}

int zs_trainer_resume(zs_trainer *t, unsigned long long *step, void *blob, unsigned cap,
		      unsigned *len)
{
	struct zs_error err = {0};
	struct zs_checkpoint k;
	struct zs_job j;
	unsigned no_len;
	enum zs_status st;
	bool redo = false;
	uint64_t rs = 0;

	if (!len) /* no blob wanted */
		len = &no_len;
	t->resumed = ZS_RESUMED_NONE;
	t->resumed_ckpt = 0;
	st = catch_up(t, &j, &err);
	if (st)
		return tr_fail(t, st, "%s", err.msg);
	/* this process replaces a rank lost mid-step: it redoes that step */
	st = tr_redo_ask(t, &redo, &rs, blob, cap, len, &err);
	if (st) {
		zs_job_release(&j);
		return tr_fail(t, st, "%s", err.msg);
	}
	{
		struct zs_resume_in in = {.redo = redo, .redo_step = rs,
					  .stopped_step = j.stopped_step,
					  .world_size = j.spec.world_size, .worlds = &j.worlds,
					  .restored_id = j.restored_id,
					  .restored_step = j.restored_step};
		uint64_t at;
		t->resumed = zs_resume_where(&in, t->rank, &at);
		*step = t->wstep = at;
	}
	switch (t->resumed) {
	case ZS_RESUMED_REDO: /* the blob is the rank's state then (tr_redo_ask) */
		zs_job_release(&j);
		return ZS_OK;
	case ZS_RESUMED_STOPPED: /* every rank left there; the servers kept it */
		*len = 0;
		zs_job_release(&j);
		return ZS_OK;
	case ZS_RESUMED_RESIZE:
		*len = 0;
		zs_info("rank %u of job '%s' is new with the resize: it begins at step %llu",
			t->rank, j.spec.name, (unsigned long long)*step);
		zs_job_release(&j);
		return ZS_OK;
	case ZS_RESUMED_NONE:
		st = tr_fail(t, ZS_ENOTFOUND,
			     "job '%s' was never restored from a checkpoint: it starts at step 0",
			     j.spec.name);
		zs_job_release(&j);
		return st;
	default:
		break;
	}
	*len = 0;
	t->resumed_ckpt = j.restored_id;
	st = zs_coord_get_ckpt(t->coord, j.spec.name, j.restored_id, &k, &err);
	zs_job_release(&j);
	if (st)
		return tr_fail(t, st, "%s", err.msg);
	for (uint32_t i = 0; i < k.n_blobs; i++)
		if (k.blobs[i].rank == t->rank) {
			*len = k.blobs[i].len;
			if (blob)
				memcpy(blob, k.blobs[i].data, k.blobs[i].len < cap ? k.blobs[i].len : cap);
		}
	zs_checkpoint_release(&k);
	return ZS_OK;
}

int zs_trainer_resumed_from(const zs_trainer *t, unsigned long long *checkpoint)
{
	if (checkpoint)
		*checkpoint = t->resumed == ZS_RESUMED_CHECKPOINT ? t->resumed_ckpt : 0;
	return t->resumed;
}
