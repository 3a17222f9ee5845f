/*
 * boundary.c - a rank's step boundary mailbox (model/boundary.h).
 */
#include "model/boundary.h"

#include "base/mutant.h"

enum zs_begin_act zs_begin_decide(const struct zs_job_spec *spec, const struct zs_step_answer *an,
				  uint32_t rank, uint64_t step, uint32_t *world, bool *checkpoint)
{
	*world = zs_world_at(spec, &an->worlds, step);
	*checkpoint = false;
	if (an->stop_before && step >= an->stop_before)
		return ZS_BEGIN_STOP;
	if (rank >= *world)
		return ZS_BEGIN_LEAVE;
	*checkpoint = rank == 0 && an->checkpoint_every && step && step % an->checkpoint_every == 0;
	return ZS_BEGIN_STEP;
}

uint64_t zs_bm_post(struct zs_bmail *m)
{
	m->st = ZS_BM_POSTED;
	return ++m->seq;
}

uint64_t zs_bm_pick(struct zs_bmail *m)
{
	if (m->st != ZS_BM_POSTED || m->sending) /* one on its way at a time */
		return 0;
	m->sending = m->seq;
	return m->seq;
}

bool zs_bm_answered(struct zs_bmail *m, uint64_t seq)
{
	if (m->sending == seq)
		m->sending = 0;
	/* the old rule: whatever is awaited takes the answer that comes */
	if (m->st != ZS_BM_POSTED || (seq != m->seq && !ZS_MUTANT(ZS_MUT_STALE_ANSWER)))
		return false;
	m->st = ZS_BM_ANSWERED;
	return true;
}

enum zs_bm_take zs_bm_peek(const struct zs_bmail *m, bool expired)
{
	switch (m->st) {
	case ZS_BM_ANSWERED:
		return ZS_BM_TAKE;
	case ZS_BM_POSTED:
		return expired ? ZS_BM_TIMEDOUT : ZS_BM_WAIT;
	default:
		return ZS_BM_ASK;
	}
}

enum zs_bm_take zs_bm_take(struct zs_bmail *m, bool expired)
{
	enum zs_bm_take k = zs_bm_peek(m, expired);

	if (k == ZS_BM_TAKE || k == ZS_BM_TIMEDOUT)
		m->st = ZS_BM_NONE;
	return k;
}

void zs_bm_drop(struct zs_bmail *m)
{
	m->st = ZS_BM_NONE;
}

void zs_btop_heard(struct zs_btop *t, uint64_t timeline, uint64_t step)
{
	if (t->timeline != timeline)
		*t = (struct zs_btop){.timeline = timeline};
	/* the old rule: the report that came last is the rank's latest */
	if (step + 1 > t->top1 || ZS_MUTANT(ZS_MUT_LATEST_NOT_HIGHEST))
		t->top1 = step + 1;
}

bool zs_btop_latest(const struct zs_btop *t, uint64_t timeline, uint64_t *top)
{
	*top = 0;
	if (t->timeline != timeline || !t->top1)
		return false;
	*top = t->top1 - 1;
	return true;
}
