/*
 * replica_in.c - a copy's side of replication: the forwards of its
 * shard's primary (rank ZS_RANK_PEER; fenced by placement epoch) land in
 * the mean gradient and are applied with the primary's code, then
 * acknowledged; a forward sent again for a step already applied is
 * acknowledged at once; a seed (a rebuild) brings a new copy's whole
 * state at a step. A trainer's partial push (gradient accumulation),
 * forwarded as it landed, goes into the copy's own reduction, as it did
 * into the primary's: a promoted copy has every term acknowledged.
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"

/* A forwarded partial push's destination (caller holds s->mu). */
static enum zs_status partial_begin(struct engine *e, struct ejob *j, struct eshard *s,
				    const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	struct zs_error why = {0};
	enum eng_part_take take;
	enum zs_status st;

	if (x->dtype != s->dt)
		return zs_fail(err, ZS_EINVAL, "unit '%s' takes %s gradients, not %s",
			       eng_unit_name(j, x->unit), zs_dtype_name(s->dt),
			       zs_dtype_name(x->dtype));
	if (!eng_ready(s)) /* ZS_ENOTFOUND: its primary seeds it, then again */
		return zs_fail(err, ZS_ENOTFOUND,
			       "unit '%s' shard %u has no state here yet (a new or restarted copy)",
			       eng_unit_name(j, x->unit), s->sh.index);
	if ((st = eng_copy_partial_take(s->version, s->repl.seed_gap, x->step, &take, &why)))
		return zs_fail(err, st, "unit '%s' shard %u: %s", eng_unit_name(j, x->unit),
			       s->sh.index, why.msg);
	/* counted: in order (one in already is taken and dropped at its
	 * landing, as one the copy drops) */
	if (take == EP_COUNT) {
		const struct eng_push p = eng_push_of(x, x->from);
		const struct eng_at at = eng_at_of(j, s, x);
		if ((st = eng_in_partial_check(&s->in, &at, &p, NULL, err)))
			return st;
	}
	if (!(*dst = eng_land_get(e, s->lay.glen * s->dsz, true)))
		return zs_fail(err, ZS_ENOMEM, "out of memory for a push of unit '%s'",
			       eng_unit_name(j, x->unit));
	return ZS_OK;
}

/* A forward of a step's mean gradient: where it lands (engine/copies.c
 * decides; caller holds s->mu). Applied here already (sent again after a
 * failover, or a promoted copy's last step to a fellow a step ahead): the
 * shard's landing buffer takes it, dropped at its end. */
static enum zs_status step_begin(struct engine *e, struct ejob *j, struct eshard *s,
				 const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	struct zs_error why = {0};
	enum eng_fwd_take take;
	enum zs_status st = eng_copy_take(s->version, eng_ready(s), s->repl.landing, x->step,
					  &take, &why);

	if (st) /* ZS_ENOTFOUND (no state): its primary seeds it, then again */
		return zs_fail(err, st, "unit '%s' shard %u: %s", eng_unit_name(j, x->unit),
			       s->sh.index, why.msg);
	if (take == EF_APPLIED) {
		if (!s->landing && !(s->landing = zs_listener_alloc(e->l, s->sh.padded * 4)))
			return zs_fail(err, ZS_ENOSPC, "no arena room to receive unit '%s'",
				       eng_unit_name(j, x->unit));
		*dst = s->landing;
		return ZS_OK;
	}
	/* straight into the mean gradient: nothing else writes it here */
	*dst = s->acc;
	s->repl.landing = true;
	return ZS_OK;
}

enum zs_status eng_repl_begin(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
			      const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	uint64_t epoch;

	if (rank != ZS_RANK_PEER || !x->replica)
		return zs_fail(err, ZS_EINVAL,
			       "only a shard's primary forwards to its replicas, and only forwards");
	/* a trainer's partial push from a resize's new rank: its arrays */
	if (x->partial && x->from < ZS_MAX_WORLD && (st = eng_ranks_ensure(j, x->from + 1, err)))
		return st;
	if (!s || x->offset != s->sh.offset ||
	    x->length != (x->seed ? s->sh.length * (s->n_arrays + x->with_prev)
			  : x->init ? s->sh.length : s->lay.glen))
		return zs_fail(err, ZS_EINVAL,
			       "a forward covers exactly one shard: unit %u [%llu, +%llu) is not a shard of job '%s' here",
			       x->unit, (unsigned long long)x->offset,
			       (unsigned long long)x->length, j->name);
	if (!s->sh.copy)
		return zs_fail(err, ZS_EINVAL,
			       "unit '%s' shard %u is the primary here, not a replica: placements disagree",
			       eng_unit_name(j, x->unit), s->sh.index);
	if ((x->dtype != ZS_F32 && !(x->partial && !x->seed)) || (x->partial && x->init))
		return zs_fail(err, ZS_EINVAL, "a forward is f32, whole");
	pthread_mutex_lock(&e->mu);
	epoch = j->epoch;
	pthread_mutex_unlock(&e->mu);
	if (x->partial && !x->seed) /* a trainer's partial push: 32 bits of it */
		epoch &= 0xffffffffu;
	if (x->epoch != epoch) /* a deposed primary (cut off, then back) */
		return zs_fail(err, ZS_ESTATE,
			       "a forward of placement epoch %llu: this server holds epoch %llu of job '%s'",
			       (unsigned long long)x->epoch, (unsigned long long)epoch, j->name);
	if (e->rp.fault_refuse && !x->init && !x->seed && !x->partial && x->step >= 2)
		return zs_fail(err, ZS_ESTATE,
			       "fault injection: this server's copies refuse step forwards (repl-refuse)");
	pthread_mutex_lock(&s->mu);
	if (x->partial && !x->seed) {
		st = partial_begin(e, j, s, x, dst, err);
	} else if (x->seed) {
		/* a new copy's whole state (a rebuild). One with state takes it
		 * too unless that state is of a later step: a primary promoted
		 * after its predecessor seeded the copy (the coordinator did not
		 * hear of it) seeds it again, and the fenced epoch makes the
		 * sender this shard's primary. A catch-up (a promoted copy's
		 * state, sent to every copy): taken by one behind it alone */
		struct zs_error why = {0};
		bool landing = s->repl.landing || s->open.init_landing;
		if (x->catchup && (st = eng_copy_catchup_take(landing, eng_ready(s), s->version,
							      x->step, &why)))
			st = zs_fail(err, st, "unit '%s' shard %u: %s", eng_unit_name(j, x->unit),
				     s->sh.index, why.msg);
		else if (!x->catchup &&
			 eng_copy_seed_take(landing, eng_ready(s), s->version, x->step, x->if_empty,
					    x->timeline, s->repl.run, &why))
			st = zs_fail(err, ZS_EEXIST, "unit '%s' shard %u has %s",
				     eng_unit_name(j, x->unit), s->sh.index, why.msg);
		else if (!(s->repl.seed = malloc(x->length * 4)))
			st = zs_fail(err, ZS_ENOMEM, "out of memory for unit '%s'",
				     eng_unit_name(j, x->unit));
		else {
			*dst = s->repl.seed;
			s->repl.landing = true;
		}
	} else if (x->init)
		st = eng_init_begin(e, j, s, x, dst, err);
	else
		st = step_begin(e, j, s, x, dst, err);
	pthread_mutex_unlock(&s->mu);
	return st;
}

void eng_repl_unlanded(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx)
{
	s->repl.landing = false;
	if (s->phase == PH_WAITING && !eng_copies_hold(s->repl.wait, false))
		eng_step_complete(e, j, s, fx); /* the step it held back */
}

void eng_repl_landed(struct engine *e, struct ejob *j, struct eshard *s, const struct zs_xfer *x,
		     void *dst, struct zs_sop *op)
{
	struct eng_fx fx = {0};

	pthread_mutex_lock(&s->mu);
	if (x->partial && !x->seed) {
		/* not of an applied step, nor of one the seed came in past */
		enum eng_part_take take;
		if (!eng_copy_partial_take(s->version, s->repl.seed_gap, x->step, &take, NULL) &&
		    take == EP_COUNT)
			eng_partial_in(e, j, s, x->from, x, dst);
		pthread_mutex_unlock(&s->mu);
		eng_land_put(e, dst);
		zs_sop_done(op);
		return;
	}
	if (x->seed) {
		size_t n = s->sh.length;
		s->repl.landing = false;
		if (eng_arrays_io(e, s, true, s->repl.seed, s->n_arrays > 1 ? s->repl.seed + n : NULL,
				  s->n_arrays > 2 ? s->repl.seed + 2 * n : NULL)) {
			zs_sop_fail(op, ZS_EIO, "cannot write unit '%s' to %s",
				    eng_unit_name(j, x->unit), s->tier.path);
		} else {
			if (s->copy != s->master)
				zs_convert_from_f32(s->copy, s->dt, s->repl.seed, n);
			if (x->catchup && eng_ready(s))
				zs_info("job '%s': unit '%s' shard %u: caught up from step %llu to its promoted primary's %llu",
					j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
					(unsigned long long)s->version, (unsigned long long)x->step);
			else if (x->catchup)
				zs_info("job '%s': unit '%s' shard %u: took its promoted primary's state of step %llu (it had none)",
					j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
					(unsigned long long)x->step);
			s->version = x->step;
			if (s->repl.run < x->timeline) /* its state's run is its own now */
				s->repl.run = x->timeline;
			eng_phase_go(s, EV_PARAMS); /* no step before them here, */
			if (x->with_prev && s->prev.p && !s->dev.on) { /* but the one sent */
				zs_convert_from_f32(s->prev.p, s->dt, s->repl.seed + s->n_arrays * n, n);
				s->prev.of = x->step;
			}
			s->state_in = 0xff; /* whole */
			/* taken after partial pushes of its step: their terms are
			 * not here (the copy is not promoted until that step is) */
			eng_step_discard(e, j, s);
			s->repl.seed_gap = eng_copy_seed_gap(x->partial, x->step);
			zs_sop_done(op);
		}
		free(s->repl.seed);
		s->repl.seed = NULL;
		pthread_mutex_unlock(&s->mu);
		return;
	}
	if (!eng_copy_apply(s->version, s->repl.landing, x->step)) { /* sent again: applied already */
		if (dst == s->acc) /* of its open step at its begin: applied since (promoted) */
			eng_repl_unlanded(e, j, s, &fx);
		zs_sop_done(op);
		pthread_mutex_unlock(&s->mu);
		eng_fx_run(e, j, s, &fx);
		return;
	}
	s->repl.landing = false;
	if (s->dev.on)
		eng_dev_acc_in(e, s);
	if (s->in.terms) /* partial pushes' terms: the primary's mean has them */
		eng_reduction_clear(e, s);
	eng_apply(e, j, s, 1.0f, &fx);
	zs_sop_done(op); /* applied: now the primary may go on */
	pthread_mutex_unlock(&s->mu);
	eng_fx_run(e, j, s, &fx);
}
