/*
 * intake.c - a shard's open step, counted (engine/intake.h): the rules
 * for which push goes into the reduction, written once, for the engine and
 * the simulator alike. No clock, no lock, no buffer.
 */
#include "engine/intake.h"

#include <stdlib.h>
#include <string.h>

#include "base/mutant.h"
#include "math/bsum.h"

int eng_in_init(struct eng_intake *in, uint32_t nr)
{
	*in = (struct eng_intake){0};
	return eng_in_grow(in, nr);
}

int eng_in_grow(struct eng_intake *in, uint32_t nr)
{
	uint8_t *slot;
	uint32_t *pc;

	if (nr <= in->nr && in->slot)
		return 0;
	slot = realloc(in->slot, nr ? nr : 1);
	if (!slot)
		return -1;
	in->slot = slot;
	pc = realloc(in->pcount, (nr ? nr : 1) * sizeof *pc);
	if (!pc)
		return -1;
	in->pcount = pc;
	memset(slot + in->nr, SLOT_EMPTY, nr - in->nr);
	memset(pc + in->nr, 0, (nr - in->nr) * sizeof *pc);
	in->nr = nr;
	return 0;
}

void eng_in_free(struct eng_intake *in)
{
	free(in->slot);
	free(in->pcount);
	*in = (struct eng_intake){0};
}

enum zs_status eng_in_partial_check(const struct eng_intake *in, const struct eng_at *at,
				    const struct eng_push *p, bool *dup, struct zs_error *err)
{
	if (dup)
		*dup = false;
	if (p->rank >= in->nr)
		return zs_fail(err, ZS_EINVAL, "a partial push from rank %u of a job of %u", p->rank,
			       at->world);
	if (p->micro < in->pcount[p->rank]) { /* sent again: its term is in */
		if (dup)
			*dup = true;
		return ZS_OK;
	}
	if (p->micro > in->pcount[p->rank])
		return zs_fail(err, ZS_ESTATE,
			       "micro-batch %u of rank %u in step %llu of unit '%s' came before micro-batch %u",
			       p->micro, p->rank, (unsigned long long)p->step, at->unit,
			       in->pcount[p->rank]);
	return ZS_OK;
}

enum zs_status eng_in_redo_check(const struct eng_intake *in, const struct eng_at *at,
				 const struct eng_push *p, bool *dup, struct zs_error *err)
{
	*dup = false;
	if (p->step + 1 == at->version) { /* its step is applied: in already */
		*dup = true;
		return ZS_OK;
	}
	if (p->step != at->version)
		return zs_fail(err, ZS_ESTATE,
			       "a replacement's push for step %llu of unit '%s', whose open step is %llu",
			       (unsigned long long)p->step, at->unit,
			       (unsigned long long)at->version);
	if (in->slot[p->rank] == SLOT_FULL && !ZS_MUTANT(ZS_MUT_REDO_COUNTED_TWICE)) {
		*dup = true;
		return ZS_OK;
	}
	if (in->slot[p->rank] == SLOT_LANDING)
		return zs_fail(err, ZS_EAGAIN,
			       "rank %u's push of unit '%s' at step %llu is still landing from the process it replaces",
			       p->rank, at->unit, (unsigned long long)p->step);
	if (p->partial)
		return eng_in_partial_check(in, at, p, dup, err);
	return ZS_OK;
}

/* Whether p is a replicated job's partial push of the open step from a
 * rank whose last push of it is not in (its slot not full): one in
 * already lands as any other, and goes to the copies again before it is
 * acknowledged (they take it once: eng_in_forwarded), so that a copy
 * promoted before the first one's forward reached it has its term. With
 * the slot full the push is dropped: landing, it would empty the slot and
 * let the rank's last push in again, into the step's sum a second time. */
static bool repl_partial(const struct eng_intake *in, const struct eng_at *at,
			 const struct eng_push *p)
{
	return p->partial && at->replicas > 1 && p->step == at->version &&
	       (in->slot[p->rank] != SLOT_FULL || ZS_MUTANT(ZS_MUT_PARTIAL_EMPTIES_FULL));
}

enum zs_status eng_in_begin(const struct eng_intake *in, const struct eng_at *at,
			    const struct eng_push *p, enum eng_take *take, struct zs_error *err)
{
	enum zs_status st;
	bool dup = false;

	*take = EI_COUNTED;
	if (p->rank >= in->nr)
		return zs_fail(err, ZS_EINVAL, "rank %u is not in step %llu's world of %u ranks",
			       p->rank, (unsigned long long)p->step, at->world);
	if (p->redo) {
		/* a lost rank's replacement: what the rank pushed is in once */
		if ((st = eng_in_redo_check(in, at, p, &dup, err)))
			return st;
		*take = !dup || repl_partial(in, at, p) ? EI_COUNTED : EI_AGAIN;
	} else if (at->replicas > 1 && p->step + 1 == at->version) {
		/* sent again after a failover: its step is applied here (by
		 * this server as a replica); acknowledged once on every copy */
		*take = ZS_MUTANT(ZS_MUT_RESENT_COUNTED) ? EI_COUNTED : EI_AGAIN;
	} else if (p->step != at->version) {
		return zs_fail(err, ZS_ESTATE, "push for step %llu of unit '%s', whose open step is %llu",
			       (unsigned long long)p->step, at->unit,
			       (unsigned long long)at->version);
	} else if (in->slot[p->rank] != SLOT_EMPTY) {
		return zs_fail(err, ZS_EEXIST, "rank %u already pushed step %llu of unit '%s'",
			       p->rank, (unsigned long long)p->step, at->unit);
	} else if (p->partial && at->replicas > 1 &&
		   (st = eng_in_partial_check(in, at, p, NULL, err))) {
		return st; /* a micro-batch before the one it follows */
	}
	if (*take == EI_COUNTED && in->terms + in->landing >= ZS_BSUM_MAX_TERMS)
		return zs_fail(err, ZS_ENOSPC,
			       "unit '%s' has taken %u pushes in step %llu, the most one step's reduction takes",
			       at->unit, in->terms, (unsigned long long)p->step);
	return ZS_OK;
}

void eng_in_began(struct eng_intake *in, const struct eng_push *p, enum eng_take take)
{
	if (take != EI_COUNTED)
		return;
	in->slot[p->rank] = SLOT_LANDING;
	in->landing++;
}

/*
 * Whether a replacement's push p that began is of a term in already: what
 * made it so at its begin (eng_in_redo_check) still holds, since none of
 * it goes back within a step (its step applied; its rank's last push in;
 * its micro-batch counted). Not its slot LANDING: that is another push's,
 * which may have begun since (the replaced process's, late, or an earlier
 * replacement's), and deciding by it would count this one too.
 */
static bool redo_in_already(const struct eng_intake *in, const struct eng_at *at,
			    const struct eng_push *p)
{
	if (!p->redo || repl_partial(in, at, p))
		return false; /* a counted one: its slot is LANDING */
	if (ZS_MUTANT(ZS_MUT_LANDING_DECIDES)) { /* the rule before the simulator */
		struct zs_error err = {0};
		bool dup = false;
		return !eng_in_redo_check(in, at, p, &dup, &err) && dup;
	}
	if (p->step + 1 == at->version)
		return true;
	return p->step == at->version &&
	       (in->slot[p->rank] == SLOT_FULL ||
		(p->partial && p->micro < in->pcount[p->rank]));
}

bool eng_in_forwarded(struct eng_intake *in, const struct eng_at *at, const struct eng_push *p)
{
	bool dup = true;

	if ((eng_in_partial_check(in, at, p, &dup, NULL) || dup) && !ZS_MUTANT(ZS_MUT_FORWARD_TWICE))
		return false; /* in already (a gap cannot be: its begin checked) */
	in->terms++;
	in->pcount[p->rank]++;
	in->pterms++;
	return true;
}

void eng_in_landed(struct eng_intake *in, const struct eng_at *at, const struct eng_push *p,
		   struct eng_in_fx *fx)
{
	const enum eng_ack durable = at->replicas > 1 && !ZS_MUTANT(ZS_MUT_ACK_BEFORE_COPIES)
					     ? EI_ACK_DURABLE
					     : EI_ACK_NOW;

	*fx = (struct eng_in_fx){0};
	if (p->step < at->version || redo_in_already(in, at, p)) {
		/* a push sent again after a failover, or a replacement's of
		 * what its rank pushed: in already (its step applied, maybe) */
		if (p->partial && p->step == at->version && at->replicas > 1) {
			/* a replacement's micro-batch of the open step, its
			 * rank's last push in: to the copies (which take it
			 * once), acknowledged when they have it, not when the
			 * step is applied: the replacement waits for it before
			 * its next micro-batch, and with clipping the step
			 * waits for every server's norm, so for the
			 * replacement's pushes elsewhere */
			fx->forward = true;
		} else { /* acknowledged once its step is on every copy */
			fx->give_back = true;
			fx->ack = durable;
			fx->flush = true;
		}
		return;
	}
	if (p->partial && at->replicas > 1) {
		/* gradient accumulation with replicas: into the reduction
		 * (once: one sent again after a failover may be in already),
		 * then to every copy's before it is acknowledged */
		fx->deposit = eng_in_forwarded(in, at, p);
		in->landing--;
		in->slot[p->rank] = SLOT_EMPTY;
		fx->forward = true;
		return;
	}
	/* into the reduction at once, whoever it is from, and the landing
	 * buffer goes back */
	fx->deposit = fx->give_back = true;
	in->terms++;
	in->landing--;
	if (p->partial) {
		/* gradient accumulation: one more term, the rank's slot free
		 * for its next micro-batch */
		in->slot[p->rank] = SLOT_EMPTY;
		in->pcount[p->rank]++; /* a replacement's is not counted twice */
		in->pterms++;
		fx->ack = EI_ACK_NOW;
		return;
	}
	in->slot[p->rank] = SLOT_FULL;
	in->full++;
	/* landed: acknowledged (with replicas: once its step is on every
	 * copy); the update may follow */
	fx->ack = durable;
	fx->complete = in->full == at->contributors;
}

bool eng_in_unlanded(struct eng_intake *in, const struct eng_at *at, const struct eng_push *p)
{
	if (p->step < at->version || redo_in_already(in, at, p))
		return true; /* sent again (failover), or a replacement's in already */
	if (in->slot[p->rank] == SLOT_LANDING) {
		if (!ZS_MUTANT(ZS_MUT_ABORT_KEEPS_SLOT))
			in->slot[p->rank] = SLOT_EMPTY;
		in->landing--;
		return true;
	}
	return p->redo; /* a replacement's push that was in already */
}

void eng_in_clear(struct eng_intake *in)
{
	in->full = 0;
	in->terms = 0;
	memset(in->slot, SLOT_EMPTY, in->nr);
	if (in->pterms) {
		memset(in->pcount, 0, in->nr * sizeof *in->pcount);
		in->pterms = 0;
	}
}

void eng_in_terms_cleared(struct eng_intake *in)
{
	in->terms = 0;
}
