/*
 * step.c - a shard's step: the reduction, the optimizer (in memory or
 * through the tier), the compute-dtype copy, and the gathers and
 * snapshots it releases (clipping's exchange between reduction and update:
 * clip.c; a step's completion and its effects carried out: fx.c).
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"

/* the monotonic clock, as the shards' unsigned nanosecond counters take it */
static uint64_t now_ns(void) { return (uint64_t)zs_now_ns(); }

/* Elements [a, b) of a push into the reduction: exact and independent of
 * the order pushes arrive in (math/bsum.h), so each goes in as it lands. */
void eng_deposit(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt, size_t a,
		 size_t b)
{
	uint64_t t0 = now_ns();

	if (s->dev.on)
		eng_dev_deposit(e, s, x, dt, a, b, false);
	else
		zs_bsum_deposit(s->bacc + a, (const uint8_t *)x + a * zs_dtype_size(dt), dt, b - a);
	s->open.red_ns += now_ns() - t0;
}

void eng_deposit_mapped(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt,
			size_t a, size_t b)
{
	uint64_t t0 = now_ns();

	eng_dev_deposit(e, s, x, dt, a, b, true);
	s->open.red_ns += now_ns() - t0;
}

void eng_finish_range(struct ejob *j, struct eshard *s, size_t a, size_t b)
{
	uint64_t t0 = now_ns();

	if (s->dev.on)
		eng_dev_finish(j, s, a, b);
	else
		zs_bsum_finish(s->acc + a, s->bacc + a, eng_world_at(j, s->version), b - a);
	s->open.red_ns += now_ns() - t0;
}

void eng_reduction_clear(struct engine *e, struct eshard *s)
{
	if (s->dev.on)
		eng_dev_clear(e, s);
	else if (s->in.terms || s->open.piped)
		memset(s->bacc, 0, (s->lay.marks ? ZS_MARK_LEN : s->sh.padded) * sizeof *s->bacc);
	eng_in_terms_cleared(&s->in);
	s->open.piped = 0;
}

void eng_partial_in(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
		    const struct zs_xfer *x, const void *dst)
{
	const struct eng_push p = eng_push_of(x, rank);
	const struct eng_at at = eng_at_of(j, s, x);

	if (eng_in_forwarded(&s->in, &at, &p))
		eng_deposit(e, s, dst, x->dtype, s->open.piped, s->lay.glen);
}

void eng_step_discard(struct engine *e, struct ejob *j, struct eshard *s)
{
	eng_reduction_clear(e, s);
	eng_in_clear(&s->in);
	s->repl.seed_gap = 0;
	s->acc_of = 0;
	eng_phase_go(s, EV_DISCARD);
	pthread_mutex_lock(&j->cmu);
	s->clip.at = 0; /* no exchange may take its old norm */
	pthread_mutex_unlock(&j->cmu);
}

/* The optimizer on elements [a, b) of acc (scaled by coef), and the copy. */
void eng_apply_range(struct engine *e, struct ejob *j, struct eshard *s, float coef,
			size_t a, size_t b)
{
	struct zs_optim_step steps[ZS_MAX_GROUPS];
	uint64_t t0 = now_ns();

	if (s->lay.marks) /* a frozen shard: nothing changes */
		return;
	eng_prev_save(s, a, b); /* a replacement may redo this step */
	/* the optimizer's step: an imported state's steps count first */
	eng_hp_steps(j, s->version, j->spec.optim.steps_taken + s->version + 1, steps, NULL);
	if (s->dev.on) {
		eng_dev_apply(e, s, steps, coef, a, b);
		s->open.opt_ns += now_ns() - t0;
		return;
	}
	if (coef != 1.0f)
		zs_scale(s->acc + a, coef, b - a);
	if (s->tier.fd >= 0) {
		eng_tier_update(e, s, steps, a, b);
	} else {
		eng_optim_run(e, s, steps, s->master + a, s->s0 ? s->s0 + a : NULL,
			      s->s1 ? s->s1 + a : NULL, s->acc + a, a, b);
		if (s->copy != s->master)
			zs_convert_from_f32((uint8_t *)s->copy + a * s->dsz, s->dt,
					    s->master + a, b - a);
	}
	s->open.opt_ns += now_ns() - t0;
}

/* Adds shard s's time on step v (just applied) to its job's account
 * (caller holds s->mu; s->mu before j->cmu is the order). */
static void account_step(struct ejob *j, struct eshard *s, uint64_t v)
{
	pthread_mutex_lock(&j->cmu);
	typeof(j->rep.acct[0]) *a = &j->rep.acct[v & 1];
	if (a->step != v || !a->n)
		*a = (typeof(*a)){.step = v};
	a->red_ns += s->open.red_ns;
	a->opt_ns += s->open.opt_ns;
	atomic_fetch_add(&j->e->ctr.red_ns, s->open.red_ns);
	atomic_fetch_add(&j->e->ctr.opt_ns, s->open.opt_ns);
	if (++a->n == j->n_primary) {
		j->rep.last = (struct zs_job_step_stats){.step = v, .shards = a->n,
						   .reduce_seconds = (double)a->red_ns * 1e-9,
						   .optim_seconds = (double)a->opt_ns * 1e-9};
		j->rep.have_last = true;
		a->n = 0;
	}
	pthread_mutex_unlock(&j->cmu);
	s->open.red_ns = s->open.opt_ns = 0;
}

/*
 * Applies the optimizer to acc (scaled by coef when clipping), refreshes
 * the copy, opens the next step and adds the gathers it releases and the
 * snapshots it completes to fx (caller holds s->mu; eng_fx_run after).
 */
void eng_apply(struct engine *e, struct ejob *j, struct eshard *s, float coef,
	       struct eng_fx *fx)
{
	if (!eng_phase_go(s, EV_APPLIED))
		return; /* refused, named: nothing is applied */
	/* what pipelining has not done yet */
	eng_apply_range(e, j, s, coef, s->open.piped, s->lay.glen);
	s->open.piped = 0;
	if (!s->sh.copy) /* a replica's time is its primary's step's too */
		account_step(j, s, s->version);
	else
		s->open.red_ns = s->open.opt_ns = 0;
	s->acc_of = s->version + 1;
	s->version++;
	if (s->prev.p)
		s->prev.of = s->version; /* 1 + the step it holds */
	eng_capture_due(j, s, &fx->done);
	eng_pins_due(j, s);
	eng_in_clear(&s->in);
	s->repl.seed_gap = eng_copy_gap_after(s->repl.seed_gap, s->version);
	atomic_fetch_add(&e->ctr.steps, 1);
	if (s->repl.n_peers) /* on every copy before a gather sees it */
		eng_repl_queue(e, j, s, false, NULL);
	else
		eng_acks_flush(s);
	if (!s->repl.wait)
		eng_take_released(s, &fx->rel, &fx->n_rel);
}

void eng_fx_release(struct engine *e, struct eshard *s, struct eng_fx *fx)
{
	eng_serve_released(e, s, fx->rel, fx->n_rel);
	eng_deliver(fx->done);
	fx->rel = NULL;
	fx->n_rel = 0;
	fx->done = NULL;
}
