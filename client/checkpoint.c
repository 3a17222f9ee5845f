/*
 * checkpoint.c - a trainer's checkpoints: asked of the coordinator, armed
 * on every server at once when this rank has not pushed the step yet (the
 * fan-out is ctrl/ckpt_arm.c's, shared with zshardctl), the rank's blob
 * stored, and waited for until committed.
 */
#include "client/trainer.h"

#include "ctrl/ckpt_arm.h"

int zs_checkpoint(zs_trainer *t, unsigned long long step, const void *blob, unsigned len,
		  unsigned long long *id)
{
	struct zs_error err = {0};
	struct zs_checkpoint k;
	enum zs_status st = zs_coord_create_ckpt(t->coord, t->job.spec.name, step, &k, &err);

	if (st)
		return tr_fail(t, st, "%s", err.msg);
	if (id)
		*id = k.id;
	if (k.state == ZS_CKPT_PENDING) {
		/* this rank has not pushed step `step` yet, so no shard can pass
		 * it: tell every server now, before they could (a lost server
		 * waited for as the job's loss policy says) */
		st = zs_ckpt_arm(t->coord, &t->job, k.id, step, tr_loss(t)->arm_wait_ms, &err);
		if (st) {
			char msg[ZS_ERRMSG_MAX];
			zs_checkpoint_release(&k);
			zs_fmt(msg, sizeof msg, "checkpoint %llu: %s", (unsigned long long)k.id, err.msg);
			/* a server it cannot reach: lost, and the job may roll back */
			st = tr_verdict(t, st, msg, sizeof msg);
			return tr_fail(t, st, "%s", msg);
		}
	}
	if (blob || len) {
		if (len > ZS_BLOB_MAX) {
			zs_checkpoint_release(&k);
			return tr_fail(t, ZS_EINVAL, "a blob of %u bytes is over %u", len, ZS_BLOB_MAX);
		}
		st = zs_coord_put_blob(t->coord, t->job.spec.name, k.id, t->rank, blob, len, &err);
	}
	zs_checkpoint_release(&k);
	return st ? tr_fail(t, st, "%s", err.msg) : ZS_OK;
}

int zs_checkpoint_wait(zs_trainer *t, unsigned long long id, int timeout_ms)
{
	double t0 = tr_now_s();

	for (;;) {
		struct zs_error err = {0};
		struct zs_checkpoint k;
		enum zs_status st = zs_coord_get_ckpt(t->coord, t->job.spec.name, id, &k, &err);
		enum zs_ckpt_state state;
		if (st)
			return tr_fail(t, st, "%s", err.msg);
		state = k.state;
		if (state == ZS_CKPT_FAILED)
			tr_fail(t, ZS_EIO, "checkpoint %llu failed: %s", id, k.error);
		zs_checkpoint_release(&k);
		if (state == ZS_CKPT_COMMITTED)
			return ZS_OK;
		if (state == ZS_CKPT_FAILED) {
			/* abandoned by a rollback: the job's timeline says so */
			struct zs_job j;
			bool moved = false;
			if (!zs_coord_get_job(t->coord, t->job.spec.name, &j, &err)) {
				moved = j.timeline != t->timeline;
				zs_job_release(&j);
			}
			if (moved)
				return tr_fail(t, ZS_ERESUME,
					       "checkpoint %llu: job '%s' rolled back before it was durable: resume (zs_trainer_resume)",
					       id, t->job.spec.name);
			return ZS_EIO;
		}
		if (timeout_ms >= 0 && (tr_now_s() - t0) * 1000.0 >= timeout_ms)
			return tr_fail(t, ZS_EAGAIN, "checkpoint %llu is not committed after %d ms", id,
				    timeout_ms);
		{
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
}
