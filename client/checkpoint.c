/*
 * checkpoint.c - a trainer's checkpoints: asked of the coordinator, armed
 * on every server at once when this rank has not pushed the step yet (the
 * fan-out is ctrl/ckpt_arm.c's, shared with zshardctl), the rank's blob
 * stored, and waited for until committed.
 */
#include "client/trainer.h"

#include "ctrl/ckpt_arm.h"

#include "base/log.h"

/*
 * Arms checkpoint id of step on every server. One it cannot reach
 * (refused, unreachable, silent: stopped, cut off, killed) is asked again
 * until it answers, the job rolls back (ZS_ERESUME) or the step driver's
 * bound passes: a server cut off is marked down only when its lease at
 * the coordinator passes, later than a loss may take to show
 * (ZS_VERDICT_SHOW_MS), and one that comes back with its state brings no
 * verdict at all. (The first failure went to the verdict: a rank arming
 * in a partition's first seconds exited; found by faults.py's partition
 * trials.) Another failure: the verdict's (verdict.c).
 */
static enum zs_status arm(zs_trainer *t, uint64_t id, uint64_t step, char *msg, size_t len)
{
	int bound = tr_op_timeout(t);
	int64_t t0 = zs_now_ms();
	bool said = false;

	for (;;) {
		struct zs_error err = {0};
		char why[ZS_ERRMSG_MAX];
		enum zs_status st = zs_ckpt_arm(t->coord, &t->job, id, step, tr_loss(t)->arm_wait_ms,
						&err);
		if (!st)
			return ZS_OK;
		zs_fmt(msg, len, "checkpoint %llu: %s", (unsigned long long)id, err.msg);
		if (st != ZS_EUNAVAIL && st != ZS_ETIMEDOUT)
			return tr_verdict(t, st, msg, len);
		if (tr_rolled_back(t, why, sizeof why)) {
			char was[ZS_ERRMSG_MAX];
			snprintf(was, sizeof was, "%s", msg);
			zs_fmt(msg, len,
			       "job '%s' rolled back (%s) while rank %u armed a checkpoint: resume (zs_trainer_resume); what it met: %s",
			       t->job.spec.name, why, t->rank, was);
			return ZS_ERESUME;
		}
		if (zs_now_ms() - t0 >= bound) {
			size_t m = strlen(msg);
			snprintf(msg + m, len - m,
				 "; asked again for %d ms (the step driver's bound, zs_policy.op_timeout_ms)",
				 bound);
			return st;
		}
		if (!said)
			zs_info("rank %u of job '%s': %s; asking again until it answers or the job rolls back, up to %d ms",
				t->rank, t->job.spec.name, msg, bound);
		said = true;
		zs_sleep_ms(250, NULL);
	}
}

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
		char msg[ZS_ERRMSG_MAX];
		if ((st = arm(t, k.id, step, msg, sizeof msg))) {
			zs_checkpoint_release(&k);
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
