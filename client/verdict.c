/*
 * verdict.c - what a lost server means is the coordinator's to say, not
 * the trainer's. A rank that meets a loss (a data connection broken, a
 * server the coordinator marks down, a checkpoint's arming that cannot
 * reach one) while it waits on a gather, a push or a checkpoint does not
 * hand ZS_EUNAVAIL to its caller as the end of the story: the coordinator
 * answers the loss with a failover to replicas (the op's own failover
 * takes that, failover.c) or a rollback to a checkpoint, and a rollback
 * must reach every rank as ZS_ERESUME (resume, in the same process),
 * whatever the rank was waiting on. So the trainer asks the coordinator,
 * within the step driver's bound, until the job's timeline moves or this
 * rank is evicted (ZS_ERESUME, the loss named in the message), and keeps
 * its status when no loss shows (a live server's refusal) or no verdict
 * comes (said, once per timeline: the next failure does not wait again,
 * but looks once whether the job rolled back meanwhile). The decisions
 * are model/verdict.c's, which the simulator runs (sim/losses.c).
 */
#include "client/trainer.h"

#include "base/log.h"

/* Whether t sees a server of its placement lost: a connection broken, or
 * a server the coordinator marks down; what, in why. Not the connections a
 * failover retired (shut down by it: always broken), whose loss the
 * failover answered: counted, every refusal of a live server after a
 * rank's first failover waited out the whole bound for a verdict that
 * never came (sim/losses.c's loss_seen never counted them). */
static bool loss_seen(zs_trainer *t, char *why, size_t len)
{
	uint64_t id;

	for (uint32_t i = 0; i < t->n_srv; i++)
		if (zs_conn_broken(t->conn[i], why, len) ||
		    (t->gconn[i] && zs_conn_broken(t->gconn[i], why, len)))
			return true;
	return tr_server_down_id(t, &id, why, len);
}

bool tr_rolled_back(zs_trainer *t, char *why, size_t len)
{
	struct zs_job j;
	struct zs_error e = {0};
	bool moved = atomic_load(&t->ls.seen_timeline) != t->timeline;

	if (atomic_load(&t->ls.evicted)) {
		snprintf(why, len, "rank %u lost its lease", t->rank);
		return true;
	}
	if (zs_coord_get_job(t->coord, t->job.spec.name, &j, &e)) {
		if (moved) /* the last renewal saw it */
			snprintf(why, len, "a rollback");
		return moved;
	}
	if (j.timeline != t->timeline) {
		moved = true;
		snprintf(why, len, "%s",
			 j.rollback_reason[0] ? j.rollback_reason : "a restore");
	} else if (moved) {
		snprintf(why, len, "a rollback");
	}
	zs_job_release(&j);
	return moved;
}

enum zs_status tr_verdict(zs_trainer *t, enum zs_status st, char *msg, size_t len)
{
	int bound = tr_op_timeout(t);
	char was[ZS_ERRMSG_MAX], why[ZS_ERRMSG_MAX] = "";
	struct zs_vdwait w;
	bool said = false;

	if (zs_vd_start(&w, &t->vd, st, t->coord != NULL, t->timeline, zs_now_ms(), bound) !=
	    ZS_LV_ASK)
		return st;
	snprintf(was, sizeof was, "%s", msg);
	for (;;) {
		bool back = tr_rolled_back(t, why, sizeof why);
		bool loss = !back && !w.seen && loss_seen(t, why, sizeof why);
		switch (zs_vd_told(&w, &t->vd, zs_now_ms(), back, loss)) {
		case ZS_LV_RESUME:
			snprintf(msg, len,
				 "job '%s' rolled back (%s) while rank %u waited: resume "
				 "(zs_trainer_resume); what it met: %s",
				 t->job.spec.name, why, t->rank, was);
			return ZS_ERESUME;
		case ZS_LV_FAIL: /* no server lost: the status is the answer */
			return st;
		case ZS_LV_TIMEDOUT:
			snprintf(msg, len,
				 "%s; the coordinator did not roll job '%s' back within %d ms (the step "
				 "driver's bound, zs_policy.op_timeout_ms)",
				 was, t->job.spec.name, bound);
			return st;
		default:
			break;
		}
		if (w.seen && !said) {
			zs_info("rank %u of job '%s': %s; waiting up to %d ms for the "
				"coordinator's verdict (a failover or a rollback)",
				t->rank, t->job.spec.name, why, bound);
			said = true;
		}
		zs_sleep_ms(100, NULL);
	}
}
