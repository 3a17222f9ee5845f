/*
 * verdict.c - what a lost server means to a rank that waits, decided
 * (model/verdict.h).
 */
#include "model/verdict.h"

#include "base/mutant.h"

void zs_opw_start(struct zs_opwait *w, int64_t now, int bound_ms)
{
	*w = (struct zs_opwait){.deadline = now + bound_ms};
}

enum zs_lv_act zs_opw_slice(struct zs_opwait *w, int64_t now, bool lost, bool replicated,
			    bool failover_resume)
{
	if (now >= w->deadline)
		return ZS_LV_TIMEDOUT;
	if (lost) {
		if (replicated) /* its failover failed: why is the answer */
			return failover_resume && !ZS_MUTANT(ZS_MUT_FAILOVER_RESUME_LOST)
				       ? ZS_LV_RESUME
				       : ZS_LV_FAIL;
		w->down = true;
	}
	return w->down ? ZS_LV_ASK : ZS_LV_WAIT;
}

enum zs_lv_act zs_opw_told(struct zs_opwait *w, bool rolled_back)
{
	(void)w;
	return rolled_back ? ZS_LV_RESUME : ZS_LV_WAIT;
}

enum zs_lv_act zs_fo_look(int64_t now, int64_t deadline, bool answered, uint64_t timeline,
			  uint64_t job_timeline, bool moved, bool back)
{
	if (answered && job_timeline != timeline)
		return ZS_LV_RESUME;
	if (answered && moved)
		return ZS_LV_TAKE;
	/* the old rule: wait for a placement that no loss will bring */
	if (back && !ZS_MUTANT(ZS_MUT_BACK_AWAITED))
		return ZS_LV_BACK;
	if (!answered)
		return now > deadline ? ZS_LV_FAIL : ZS_LV_WAIT;
	return now > deadline ? ZS_LV_TIMEDOUT : ZS_LV_WAIT;
}

enum zs_lv_act zs_vd_start(struct zs_vdwait *w, const struct zs_verdict *v, enum zs_status st,
			   bool coord, uint64_t timeline, int64_t now, int bound_ms)
{
	if (st != ZS_EUNAVAIL || !coord)
		return ZS_LV_FAIL;
	*w = (struct zs_vdwait){.t0 = now, .deadline = now + bound_ms, .timeline = timeline,
				.once = v->given_up1 == timeline + 1};
	/* the old rule: given up once, the status stands without a look */
	if (w->once && ZS_MUTANT(ZS_MUT_GIVEN_UP_UNASKED))
		return ZS_LV_FAIL;
	return ZS_LV_ASK;
}

enum zs_lv_act zs_vd_told(struct zs_vdwait *w, struct zs_verdict *v, int64_t now,
			  bool rolled_back, bool loss)
{
	if (rolled_back)
		return ZS_LV_RESUME;
	if (w->once) /* its rollback, had it come, would show now */
		return ZS_LV_FAIL;
	if (loss)
		w->seen = true;
	if (!w->seen && now - w->t0 >= ZS_VERDICT_SHOW_MS)
		return ZS_LV_FAIL; /* no server lost: the status is the answer */
	if (now >= w->deadline) {
		v->given_up1 = w->timeline + 1;
		return ZS_LV_TIMEDOUT;
	}
	return ZS_LV_WAIT;
}
