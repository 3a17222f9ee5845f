/*
 * driver.c - the step driver (zs_step_begin ... zs_step_end): which units
 * a rank holds by the stage's resharding policy, the prefetch window
 * bounded by live bytes, pushes bounded by push_depth, reused buffers
 * (registered once where the transport wants it), and the step report.
 */
#include "client/trainer.h"

#include "base/log.h"

/* ------------------------------------------------------------ step driver */

int zs_trainer_set_policy(zs_trainer *t, const struct zs_policy *p)
{
	if (t->drv.in_step)
		return tr_fail(t, ZS_ESTATE, "the policy changes between steps, not within one");
	t->drv.pol = *p;
	return ZS_OK;
}

void zs_trainer_policy(const zs_trainer *t, struct zs_policy *p) { *p = t->drv.pol; }

/* *live += delta; the overall peak and this step's follow it. */
static void live_add(unsigned long long *live, unsigned long long *peak, uint64_t *step_peak,
		     long long delta)
{
	*live += (unsigned long long)delta;
	if (*live > *peak)
		*peak = *live;
	if (*live > *step_peak)
		*step_peak = *live;
}

static void live_params(zs_trainer *t, long long delta)
{
	live_add(&t->ctr.live_param_bytes, &t->ctr.peak_param_bytes, &t->rep.cur.peak_param_bytes,
		 delta);
}

static void live_grads(zs_trainer *t, long long delta)
{
	live_add(&t->ctr.live_grad_bytes, &t->ctr.peak_grad_bytes, &t->rep.cur.peak_grad_bytes, delta);
}

/*
 * Waits for *op within the policy's bound. Done: *op is NULL and its final
 * status returned. Still running at the bound: *op stays (it owns its
 * buffer until it completes or the trainer closes) and ZS_ETIMEDOUT says
 * what it waited for.
 *
 * In slices, watching for a lost server between them (tr_loss): a
 * replicated job fails over from it at once; otherwise a server the
 * coordinator marks down (stopped, cut off, killed) is waited for, since it
 * may continue where it was (a stop, a partition healed) or be started
 * again without its state, and then the coordinator rolls the job back:
 * ZS_ERESUME, whatever this wait was for. Failing at the mark instead ended
 * ranks that a pause of a server, or the rollback after its loss, would
 * have let go on.
 */
static int wait_op(zs_trainer *t, zs_op **op)
{
	int bound = tr_op_timeout(t);
	struct zs_opwait w;
	char why[ZS_ERRMSG_MAX], down[ZS_ERRMSG_MAX] = "";
	int rc;

	zs_opw_start(&w, zs_now_ms(), bound);
	for (;;) {
		int64_t left = w.deadline - zs_now_ms();
		rc = zs_op_wait(*op, left <= 0 ? 0 : left < 250 ? (int)left : 250);
		if (rc != ZS_EAGAIN) {
			*op = NULL;
			return rc;
		}
		struct zs_error ferr = {0};
		bool lost = zs_now_ms() < w.deadline && tr_loss(t)->lost(t, why, sizeof why, &ferr);
		enum zs_lv_act act = zs_opw_slice(&w, zs_now_ms(), lost, tr_loss(t)->resends,
						  ferr.code == ZS_ERESUME);
		switch (act) {
		case ZS_LV_RESUME: /* a failover met the rollback instead */
		case ZS_LV_FAIL:   /* a failover that failed */
			return tr_fail(t, act == ZS_LV_RESUME ? ZS_ERESUME : ZS_EUNAVAIL,
				       "%s; waited for it %lld ms%s%s", why,
				       (long long)(bound - (w.deadline - zs_now_ms())),
				       ferr.msg[0] ? ", and " : "", ferr.msg);
		case ZS_LV_TIMEDOUT: {
			char was[ZS_ERRMSG_MAX];
			memcpy(was, t->err, sizeof was);
			if (down[0])
				return tr_fail(t, ZS_ETIMEDOUT,
					       "%s; %s; %d ms in all (the step driver's bound, zs_policy.op_timeout_ms)",
					       was, down, bound);
			return tr_fail(t, ZS_ETIMEDOUT,
				       "%s; %d ms in all (the step driver's bound, zs_policy.op_timeout_ms)",
				       was, bound);
		}
		case ZS_LV_ASK:
			if (lost && !down[0])
				zs_info("rank %u of job '%s': %s; waiting for it, or for the coordinator to roll the job back, up to %lld ms",
					t->rank, t->job.spec.name, why,
					(long long)(w.deadline - zs_now_ms()));
			if (lost)
				snprintf(down, sizeof down, "%s", why);
			if (zs_opw_told(&w, tr_rolled_back(t, why, sizeof why)) == ZS_LV_RESUME)
				return tr_fail(t, ZS_ERESUME,
					       "job '%s' rolled back (%s) while rank %u waited: resume (zs_trainer_resume); what it met: %s",
					       t->job.spec.name, why, t->rank, down);
			break;
		default:
			break;
		}
	}
}

/* Waits for a parameter gather of the step driver, timing it. */
static int wait_gather(zs_trainer *t, zs_op **op)
{
	double t0 = tr_now_s();
	int rc = wait_op(t, op);
	t->rep.cur.gather_wait_seconds += tr_now_s() - t0;
	return rc;
}

void tr_driver_reset(zs_trainer *t)
{
	if (t->dv)
		tr_dv_reset(t, true);
	for (uint32_t u = 0; t->drv.du && u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->drv.du[u];
		size_t bytes = d->bytes;
		free(d->gather); /* ops only: their requests died with the conns */
		free(d->push);
		tr_stage_put(t, d->params, bytes);
		tr_stage_put(t, d->grad, bytes);
		tr_params_go(&d->pp, u, PE_RESET);
		tr_unit_go(&d->up, u, UE_RESET);
		*d = (struct dunit){.bytes = bytes, .pp = d->pp, .up = d->up};
	}
	t->ctr.live_param_bytes = 0;
	t->ctr.live_grad_bytes = 0;
	t->drv.in_step = false;
}

/*
 * Stages 1 and 2 keep a replica of every unit and refresh it each step; a
 * unit's frozen shards never change, so a resident replica of the step
 * just before (host memory) is refreshed in place: its other shards
 * gathered into it, its frozen ones kept, as torch's optimizers and
 * DeepSpeed's stage 1 and 2 never gather frozen parameters again. False:
 * gather it whole (not resident, a gather in flight, device mode, stage 3).
 */
static bool refresh_in_place(zs_trainer *t, unsigned u)
{
	struct dunit *d = &t->drv.du[u];
	bool frozen = false;

	if (t->drv.stage == 3 || t->dv || d->pp != PP_LIVE)
		return false;
	for (uint32_t i = 0; i < t->job.placement.n_shards && !frozen; i++)
		frozen = t->job.placement.shards[i].unit == u &&
			 zs_shard_marks(&t->job.spec, &t->job.placement.shards[i]);
	if (!frozen || tr_gather_trained(t, u, d->params, &d->gather) != ZS_OK)
		return false;
	if (d->gather) /* else every shard of it is frozen: it stays */
		tr_params_go(&d->pp, u, PE_REFRESH);
	return true;
}

/* Unit u's parameters (LIVE or LIVE_AHEAD) freed. */
static void free_params(zs_trainer *t, unsigned u)
{
	struct dunit *d = &t->drv.du[u];

	if (t->dv)
		tr_dv_drop_params(t, u);
	else
		tr_stage_put(t, d->params, d->bytes);
	d->params = NULL;
	live_params(t, -(long long)d->bytes);
	tr_params_go(&d->pp, u, PE_DROP);
}

/* Unit u's parameters of this step (or the step before) go, if resident
 * and not on their way. */
static void drop_params(zs_trainer *t, unsigned u)
{
	if (t->drv.du[u].pp == PP_LIVE)
		free_params(t, u);
}

/* Waits for unit u's gather (ASKED or AHEAD); done (even failed), its
 * parameters are there. Still running at the bound: ZS_ETIMEDOUT. */
static int await_params(zs_trainer *t, unsigned u)
{
	struct dunit *d = &t->drv.du[u];
	int rc = wait_gather(t, &d->gather);

	if (!d->gather)
		tr_params_go(&d->pp, u, PE_GATHERED);
	return rc;
}

/* Starts unit u's gather of this step (ahead: of the next one) if it is
 * neither resident nor in flight. must: the unit is needed now (the memory
 * bound cannot refuse it). */
static int want_at(zs_trainer *t, unsigned u, bool must, bool ahead)
{
	struct dunit *d = &t->drv.du[u];
	int rc;

	if (d->pp != PP_NONE)
		return ZS_OK;
	if (!must && t->drv.pol.max_live_bytes &&
	    t->ctr.live_param_bytes + d->bytes > t->drv.pol.max_live_bytes)
		return ZS_OK; /* the window waits for memory */
	if (t->dv) { /* into staging, then to the device */
		if ((rc = tr_dv_gather(t, u)))
			return rc;
		live_params(t, (long long)d->bytes);
		tr_params_go(&d->pp, u, PE_ASK);
		return ZS_OK;
	}
	d->params = tr_stage_get(t, d->bytes);
	if (!d->params)
		return tr_fail(t, ZS_ENOMEM, "out of memory for unit %u's parameters", u);
	live_params(t, (long long)d->bytes);
	rc = zs_gather(t, u, t->step + ahead, d->params, &d->gather);
	if (rc) {
		tr_stage_put(t, d->params, d->bytes);
		d->params = NULL;
		live_params(t, -(long long)d->bytes);
		return rc;
	}
	tr_params_go(&d->pp, u, ahead ? PE_ASK_AHEAD : PE_ASK);
	return ZS_OK;
}

static int want(zs_trainer *t, unsigned u, bool must) { return want_at(t, u, must, false); }

/*
 * Unit u's parameters of the next step, gathered ahead, go: at a step
 * that is not the next one, or asked for again in this one after its push.
 * In flight, the op is waited for (this rank has pushed u, so the update
 * it waits for comes with the other ranks' pushes) or, at a step that is
 * not the next one (which may never come), parked with its buffer until
 * the trainer closes.
 */
static int drop_ahead(zs_trainer *t, unsigned u, bool park)
{
	struct dunit *d = &t->drv.du[u];
	int rc = ZS_OK;

	if (d->pp == PP_AHEAD && park) {
		tr_park(t, d->gather, d->params);
		d->gather = NULL;
		d->params = NULL;
		live_params(t, -(long long)d->bytes);
		tr_params_go(&d->pp, u, PE_PARK);
		return ZS_OK;
	}
	if (d->pp == PP_AHEAD) {
		rc = await_params(t, u);
		if (d->gather) /* still running at the bound: it keeps its buffer */
			return rc;
	}
	if (d->pp == PP_LIVE_AHEAD)
		free_params(t, u);
	return rc;
}

/* Unit d's push completed: its gradient buffer goes back to the cache. */
static void push_done(zs_trainer *t, struct dunit *d)
{
	tr_unit_go(&d->up, (unsigned)(d - t->drv.du), UE_DONE);
	if (t->dv)
		tr_dv_push_done(t, (uint32_t)(d - t->drv.du));
	else
		tr_stage_put(t, d->grad, d->bytes);
	d->grad = NULL;
	live_grads(t, -(long long)d->bytes);
}

/* Reaps finished pushes (stage 2, 3 free their gradients then). */
static int reap(zs_trainer *t, bool wait)
{
	double t0 = wait ? tr_now_s() : 0.0;
	int first = ZS_OK;
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->drv.du[u];
		int rc;
		if (!d->push)
			continue;
		if (wait) {
			rc = wait_op(t, &d->push);
			if (d->push) { /* still running at the bound: keep its buffer */
				if (!first)
					first = rc;
				continue;
			}
		} else {
			rc = zs_op_test(d->push);
			if (rc == ZS_EAGAIN)
				continue;
			d->push = NULL;
		}
		push_done(t, d);
		if (rc && !first)
			first = rc;
	}
	if (wait)
		t->rep.cur.push_wait_seconds += tr_now_s() - t0;
	return first;
}

/* Unit u's push, posted (ZS_EAGAIN: no room for it yet): its gradient
 * from host memory; in device mode from staging or (direct) device memory,
 * a collective job's the slice's sum. */
static int post(zs_trainer *t, uint32_t u, struct dunit *d)
{
	bool coll = t->job.spec.collective;
	int rc;

	if (!t->dv)
		rc = tr_push_via(t, u, d->grad, false, &tr_host_sender, &d->push);
	else if (d->direct)
		rc = tr_push_via(t, u, coll ? d->dsend : d->grad, coll, &tr_device_sender, &d->push);
	else
		rc = tr_push_via(t, u, d->gstage, coll, &tr_host_sender, &d->push);
	if (d->push)
		tr_unit_go(&d->up, u, UE_POST);
	return rc;
}

/* Whether unit d's gradient is being copied to the host (device mode). */
static bool copying(const struct dunit *d)
{
	return d->up == UP_COPYING || d->up == UP_COPYING_HELD;
}

/* Whether unit d's parameters are the next step's (asked or there). */
static bool ahead(const struct dunit *d)
{
	return d->pp == PP_AHEAD || d->pp == PP_LIVE_AHEAD;
}

/* Device mode: unit u's gradient is in staging (wait: once it is): its
 * push goes out. ZS_EAGAIN while its copy runs. */
static int push_copied(zs_trainer *t, uint32_t u, bool wait)
{
	struct dunit *d = &t->drv.du[u];
	int rc = tr_dv_copied(t, u, wait);

	if (rc)
		return rc;
	while ((rc = post(t, u, d)) == ZS_EAGAIN)
		if ((rc = reap(t, true)))
			break;
	return rc;
}

/* Device mode: starts the pushes whose copies are done (wait: all of
 * them, once done); stage 1's wait for the step's end. */
static int start_copied(zs_trainer *t, bool wait)
{
	int first = ZS_OK;
	for (uint32_t u = 0; t->dv && u < t->job.spec.layout.n_units; u++) {
		int rc;
		if (t->drv.du[u].up != UP_COPYING) /* held ones go at the step's end */
			continue;
		rc = push_copied(t, u, wait);
		if (rc && rc != ZS_EAGAIN && !first)
			first = rc;
	}
	return first;
}

/* Starts what device mode has copied, then reaps finished pushes. */
static int reap_pushes(zs_trainer *t, bool wait)
{
	double t0 = wait ? tr_now_s() : 0.0;
	int rc = start_copied(t, wait), r;

	if (wait)
		t->rep.cur.push_wait_seconds += tr_now_s() - t0;
	r = reap(t, wait);
	return rc ? rc : r;
}

int zs_step_begin(zs_trainer *t, unsigned long long step)
{
	uint32_t n = t->job.spec.layout.n_units;
	int rc;

	struct zs_error err = {0};
	struct zs_step_answer an = {0};
	uint32_t stage, world;
	enum zs_begin_act act;
	bool ckpt;
	double t0 = tr_now_s();
	bool next; /* the step after the last one begun (no jump: no resume) */

	if (t->drv.in_step)
		return tr_fail(t, ZS_ESTATE, "step %llu has not ended", (unsigned long long)t->step);
	/* the job rolled back since this trainer's connections were made */
	if (atomic_load(&t->ls.seen_timeline) != t->timeline || atomic_load(&t->ls.evicted))
		return tr_fail(t, ZS_ERESUME,
			       atomic_load(&t->ls.evicted)
				       ? "rank %u lost its lease on job '%s' and the job rolled back: resume (zs_trainer_resume)"
				       : "rank %u: job '%s' rolled back to a checkpoint: resume (zs_trainer_resume)",
			       t->rank, t->job.spec.name);
	/*
	 * The last step's report goes to the coordinator, and what an operator
	 * set (the stage, the checkpoint interval, a stop) comes back: without
	 * a round trip here, the lease thread sends the report posted at the
	 * last boundary while that step ran and this boundary takes its answer
	 * (lease.c); the first boundary of a lease asks and waits.
	 */
	/* with the step this rank begins and its state then (redo.c) */
	struct zs_step_state begun = tr_state_take(t, step);
	bool told = false;
	{
		enum zs_status bst;
		if (t->ls.running && tr_boundary_take(t, &bst, &an, &err)) {
			rc = bst;
		} else {
			rc = zs_coord_report_step_ex(t->coord, t->job.spec.name, t->rank,
						     t->rep.have_last && !t->rep.last_sent ? &t->rep.last
											   : NULL,
						     &begun, &an, NULL, NULL, &err);
			if (!rc) {
				t->rep.last_sent = told = true;
				tr_step_known(t, step);
			}
		}
	}
	if (rc) {
		free(begun.data);
		return tr_fail(t, (enum zs_status)rc, "%s", err.msg);
	}
	if (t->ls.running) {
		tr_boundary_post(t, t->rep.have_last && !t->rep.last_sent ? &t->rep.last : NULL,
				 told ? NULL : &begun);
		t->rep.last_sent = true; /* posted: the lease thread sends it */
	}
	free(begun.data);
	stage = an.stage;
	/* what the answer means for this step (model/boundary.h): a stop
	 * (every rank stops here: a clean stop), a resize (zshardctl job
	 * resize: the answer names its step before any rank can begin it;
	 * this rank leaves there, or every server hears the step's world
	 * before this rank's pushes), the job's checkpoint */
	act = zs_begin_decide(&t->job.spec, &an, t->rank, step, &world, &ckpt);
	if (act == ZS_BEGIN_STOP)
		return tr_fail(t, ZS_ECANCELED,
			       "job '%s' is stopping before step %llu (zshardctl job stop): leave it (zs_trainer_close); it resumes there",
			       t->job.spec.name, (unsigned long long)step);
	t->wstep = step;
	if (act == ZS_BEGIN_LEAVE) {
		t->worlds = an.worlds;
		return tr_fail(t, ZS_ECANCELED,
			       "rank %u is not in job '%s' from step %llu on: its world is %u ranks (zshardctl job resize): leave it (zs_trainer_close)",
			       t->rank, t->job.spec.name, (unsigned long long)step, world);
	}
	if ((rc = tr_world_take(t, &an.worlds, &err)))
		return tr_fail(t, (enum zs_status)rc, "%s", err.msg);
	/* a collective job: every rank's communicator, formed once a timeline */
	if ((rc = tr_dv_collective(t)))
		return rc;
	t->job.spec.stage = stage;
	t->job.spec.checkpoint_every = an.checkpoint_every;
	t->drv.stage = stage;
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		t->drv.du[u].pushed = false;
		if (step != t->step + 1) /* gathered ahead for another step */
			drop_ahead(t, u, true);
	}
	next = step == t->step + 1;
	t->step = step;
	t->drv.in_step = true;
	t->rep.cur = (struct zs_step_report){.rank = t->rank, .step = step, .stage = stage,
					 .world = world,
					 .prefetch = t->drv.pol.prefetch,
					 .peak_param_bytes = t->ctr.live_param_bytes,
					 .peak_grad_bytes = t->ctr.live_grad_bytes};
	t->rep.t0 = t0;
	t->rep.g0 = t->ctr.bytes_gathered;
	t->rep.p0 = t->ctr.bytes_pushed;
	/* the job's automatic checkpoints: rank 0 asks at the boundary */
	if (ckpt && (rc = zs_checkpoint(t, step, NULL, 0, NULL))) {
		t->drv.in_step = false;
		return rc;
	}
	t->rep.cur.control_seconds = tr_now_s() - t0;
	for (uint32_t u = 0; u < n; u++) {
		if (ahead(&t->drv.du[u])) /* gathered ahead: this step's */
			tr_params_go(&t->drv.du[u].pp, u, PE_BEGIN);
		else if (!next || !refresh_in_place(t, u)) /* last step's are stale */
			drop_params(t, u);
	}
	if (t->drv.stage < 3) {
		/* the replica: every unit, refreshed once per step */
		for (uint32_t u = 0; u < n; u++)
			if ((rc = want(t, u, true)))
				return rc;
		return ZS_OK;
	}
	for (uint32_t u = 0; u < n && u <= t->drv.pol.prefetch; u++)
		if ((rc = want(t, u, u == 0)))
			return rc;
	return ZS_OK;
}

int zs_unit_params(zs_trainer *t, unsigned u, int backward, const void **params)
{
	uint32_t n = t->job.spec.layout.n_units;
	struct dunit *d;
	int rc;

	if (!t->drv.in_step)
		return tr_fail(t, ZS_ESTATE, "zs_unit_params outside a step");
	if (u >= n)
		return tr_fail(t, ZS_EINVAL, "unit %u is out of range (%u units)", u, n);
	d = &t->drv.du[u];
	/* asked for again after its push */
	if (ahead(d) && (rc = drop_ahead(t, u, false)))
		return rc;
	if ((rc = want(t, u, true)))
		return rc;
	/*
	 * The window, asked for before waiting on u, so that the link never
	 * idles between u's last byte and the next unit's first: the next
	 * units in the step's order (the forward pass, then the backward one
	 * from the unit before the last, which the forward pass keeps), and at
	 * the backward pass's end the next step's from unit 1 on (unit 0's
	 * update waits for this rank's last push): a unit whose gradient this
	 * step has pushed, gathered for the next step as soon as its server
	 * has updated it. Host buffers only (device mode's copies follow the
	 * step's own order).
	 */
	for (unsigned k = 1; k <= t->drv.pol.prefetch; k++) {
		long long next = backward ? (long long)u - k
			       : u + k < n ? (long long)(u + k) : 2LL * n - 2 - (u + k);
		if (next < 0) {
			unsigned v = (unsigned)-next;
			if (t->dv || t->drv.stage != 3 || v >= n || !t->drv.du[v].pushed)
				break;
			if ((rc = want_at(t, v, false, true)))
				return rc;
			continue;
		}
		/* a unit pushed already (a root whose parameters all come after
		 * the units, its gradient first of the backward pass): this
		 * step's parameters are on their way out, not to be gathered */
		if (t->drv.du[next].pushed)
			continue;
		if ((rc = want(t, (unsigned)next, false)))
			return rc;
	}
	if (d->pp == PP_ASKED && (rc = await_params(t, u)))
		return rc;
	if (t->dv && (rc = tr_dv_params_ready(t, u)))
		return rc;
	reap_pushes(t, false);
	if (t->dv)
		tr_dv_poll(t);
	*params = d->params;
	return ZS_OK;
}

int zs_unit_forward_done(zs_trainer *t, unsigned u)
{
	if (u >= t->job.spec.layout.n_units)
		return tr_fail(t, ZS_EINVAL, "unit %u is out of range", u);
	/* the last unit is the first of the backward pass: keep it */
	if (t->drv.stage == 3 && t->drv.pol.reshard_after_forward && u + 1 < t->job.spec.layout.n_units)
		drop_params(t, u);
	return ZS_OK;
}

/* Waits for every push in flight that started no later than the
 * seq-th (device mode: starting those still being copied); ZS_OK if none. */
static int wait_pushes_upto(zs_trainer *t, uint64_t seq)
{
	double t0 = tr_now_s();
	int rc = ZS_OK;

	for (uint32_t u = 0; !rc && u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->drv.du[u];
		if ((!d->push && !copying(d)) || d->push_seq > seq)
			continue;
		if (copying(d) && (rc = push_copied(t, u, true)))
			break;
		if (!d->push)
			continue;
		rc = wait_op(t, &d->push);
		if (!d->push) /* else still running at the bound: it keeps its buffer */
			push_done(t, d);
	}
	t->rep.cur.push_wait_seconds += tr_now_s() - t0;
	return rc;
}

int zs_unit_grad(zs_trainer *t, unsigned u, void **grad)
{
	unsigned depth = t->drv.pol.push_depth ? t->drv.pol.push_depth : 1;
	struct dunit *d;
	int rc;

	if (u >= t->job.spec.layout.n_units)
		return tr_fail(t, ZS_EINVAL, "unit %u is out of range", u);
	d = &t->drv.du[u];
	if (d->up == UP_POSTED || copying(d))
		return tr_fail(t, ZS_ESTATE, "unit %u's gradient is being pushed", u);
	/* at most push_depth pushes in flight beside the gradient written; not
	 * in a replicated job that clips gradients: a push of it is answered
	 * once its step is on every copy, and that step is applied only once
	 * every unit's gradient is in (the step's gradients stay, as DDP's) */
	if (d->up == UP_NONE && t->drv.in_step && t->drv.stage > 1 &&
	    !(tr_loss(t)->late_acks && t->job.spec.optim.clip_norm > 0.0)) {
		/* the last push_depth pushes, by the order they started in,
		 * may still run, not merely push_depth of any age: one that
		 * finished early (a small unit, another server) must not let
		 * an older, larger one stay beside the gradient written, so
		 * that what is held is 1 + push_depth consecutive units (plan.h) */
		if ((rc = reap_pushes(t, false)))
			return rc;
		if (t->drv.n_pushed > depth && (rc = wait_pushes_upto(t, t->drv.n_pushed - depth)))
			return rc;
	}
	if (d->up == UP_NONE) {
		d->grad = t->dv ? tr_dv_grad_buf(t, u) : tr_stage_get(t, d->bytes);
		if (!d->grad)
			return t->dv ? ZS_EIO
				     : tr_fail(t, ZS_ENOMEM, "out of memory for unit %u's gradient", u);
		live_grads(t, (long long)d->bytes);
	}
	tr_unit_go(&d->up, u, UE_WRITE);
	if (t->dv) { /* on the compute stream, before the kernels that write it */
		if ((rc = tr_dv_zero_grad(t, u)))
			return rc;
	} else {
		memset(d->grad, 0, d->bytes);
	}
	*grad = d->grad;
	return ZS_OK;
}

int zs_unit_push(zs_trainer *t, unsigned u)
{
	struct dunit *d;
	int rc;

	if (u >= t->job.spec.layout.n_units || t->drv.du[u].up == UP_NONE)
		return tr_fail(t, ZS_EINVAL, "unit %u has no gradient (zs_unit_grad first)", u);
	d = &t->drv.du[u];
	if (d->up == UP_POSTED || copying(d))
		return tr_fail(t, ZS_ESTATE, "unit %u's gradient is being pushed", u);
	d->pushed = true;
	d->push_seq = ++t->drv.n_pushed;
	if (t->drv.stage == 3)
		drop_params(t, u); /* its backward is done */
	if (t->dv) { /* to staging; the push goes out once it is there */
		if ((rc = tr_dv_push_copy(t, u)))
			return rc;
		tr_unit_go(&d->up, u, t->drv.stage == 1 ? UE_COPY_HOLD : UE_COPY);
		return start_copied(t, false);
	}
	if (t->drv.stage == 1) { /* stage 1 pushes everything at the step's end */
		tr_unit_go(&d->up, u, UE_HOLD);
		return ZS_OK;
	}
	while ((rc = post(t, u, d)) == ZS_EAGAIN)
		if ((rc = reap_pushes(t, true)))
			return rc;
	return rc;
}

int zs_step_end(zs_trainer *t)
{
	int rc = ZS_OK, r;

	if (!t->drv.in_step)
		return tr_fail(t, ZS_ESTATE, "no step to end");
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->drv.du[u];
		if (d->up == UP_COPYING_HELD) { /* reap_pushes starts it, copied */
			tr_unit_go(&d->up, u, UE_RELEASE);
			continue;
		}
		if (d->up != UP_HELD)
			continue;
		while ((r = post(t, u, d)) == ZS_EAGAIN)
			if ((r = reap_pushes(t, true)))
				break;
		if (r && !rc)
			rc = r;
	}
	r = reap_pushes(t, true);
	if (r && !rc)
		rc = r;
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->drv.du[u];
		if (d->pp == PP_ASKED) { /* a prefetch nobody used */
			r = await_params(t, u);
			if (r && !rc)
				rc = r;
		}
		if (t->drv.stage == 3)
			drop_params(t, u);
	}
	/* the servers finish a step only once every unit is pushed: a unit
	 * left out would hold the next step's gathers until their timeout */
	if (!rc) {
		char miss[256] = "";
		size_t ml = 0;
		uint32_t n_miss = 0;
		for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
			if (t->drv.du[u].pushed)
				continue;
			if (n_miss++ < 8 && ml < sizeof miss)
				ml += (size_t)snprintf(miss + ml, sizeof miss - ml, "%s'%s'",
						       ml ? ", " : "", t->job.spec.layout.units[u].name);
		}
		if (n_miss)
			rc = tr_fail(t, ZS_ESTATE,
				     "%u unit(s) were not pushed (%s%s): every unit's gradient must be pushed every step",
				     n_miss, miss, n_miss > 8 ? ", ..." : "");
	}
	t->drv.in_step = false;
	{
		struct zs_step_report *c = &t->rep.cur;
		c->seconds = tr_now_s() - t->rep.t0;
		c->compute_seconds = c->seconds - c->gather_wait_seconds - c->push_wait_seconds -
				     c->control_seconds;
		if (c->compute_seconds < 0)
			c->compute_seconds = 0;
		c->bytes_gathered = t->ctr.bytes_gathered - t->rep.g0;
		c->bytes_pushed = t->ctr.bytes_pushed - t->rep.p0;
		struct rusage ru; /* every step: a system call, not a /proc read */
		c->rss_peak_bytes = getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_maxrss * 1024;
		t->rep.last = *c;
		t->rep.have_last = true;
		t->rep.last_sent = false;
	}
	/* the next step's world, for the caller's data (zs_trainer_world_size):
	 * a resize names a step four past the latest report, so the answer to
	 * this boundary's report names it by the step before (coord/resize.c) */
	if (!rc) {
		struct zs_step_answer an;
		if (t->ls.running && tr_boundary_peek(t, &an))
			t->worlds = an.worlds;
		t->wstep = t->step + 1;
	}
	if (rc) {
		char why[ZS_ERRMSG_MAX];
		memcpy(why, t->err, sizeof why);
		return tr_fail(t, (enum zs_status)rc, "step %llu: %s", (unsigned long long)t->step,
			    why);
	}
	return ZS_OK;
}

int zs_last_step(const zs_trainer *t, struct zs_step_stats *s)
{
	const struct zs_step_report *r = &t->rep.last;

	if (!t->rep.have_last)
		return ZS_ENOTFOUND;
	*s = (struct zs_step_stats){
		.step = r->step, .stage = r->stage, .prefetch = r->prefetch,
		.seconds = r->seconds, .compute_seconds = r->compute_seconds,
		.gather_wait_seconds = r->gather_wait_seconds,
		.push_wait_seconds = r->push_wait_seconds, .control_seconds = r->control_seconds,
		.bytes_gathered = r->bytes_gathered, .bytes_pushed = r->bytes_pushed,
		.peak_param_bytes = r->peak_param_bytes, .peak_grad_bytes = r->peak_grad_bytes,
		.rss_peak_bytes = r->rss_peak_bytes};
	return ZS_OK;
}
