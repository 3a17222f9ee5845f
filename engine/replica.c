/*
 * replica.c - shard replicas (a job's spec.replicas = K > 1): each shard
 * has K copies on distinct servers (model/placement.c). The trainers push
 * to the primary alone; it reduces and applies the step as without
 * replicas, then forwards what its copies need to reach the same bits: the
 * step's reduced fp32 gradient as the optimizer consumed it (clipping's
 * scale already in), with the table of hyperparameters in force, over the
 * data plane (a tcp connection per peer server, rank ZS_RANK_PEER). Each
 * copy applies it with the same code and acknowledges once applied. Until
 * every copy has, the primary holds the gathers of the new version and the
 * next step's update (repl.wait, phase WAITING): so no step a trainer has
 * seen the result of exists on fewer than K servers. The initial upload is
 * forwarded the same way.
 *
 * Why the gradient and not the state: it is 4 bytes per element, where the
 * state an update changes is 12 (master and AdamW's two moments), and the
 * update is a pure function of (state, gradient, step, table), the same
 * on every server (math/optim.c; elem.h on a device).
 *
 * A job's forwards are sent by one worker at a time, in the order the
 * steps were applied; the forwards it takes at once are posted together
 * and then waited for. Jobs do not wait on each other: a worker takes the
 * first queued job that no other worker holds, and the pool grows (to
 * REPL_THREADS) while another job has tasks and no worker is free (a
 * forward to a stopped server must not hold another job's back). A
 * forward that fails is sent again on a new connection until the step
 * timeout; past it, the shard's gathers fail naming the
 * replica that did not answer (the job then rolls back as after a lost
 * server). A new copy (a rebuild) gets a seed first: the shard's whole
 * state at its version, queued ahead of the forwards that follow; a copy
 * that answers a forward that it has no state is seeded then.
 *
 * A replicated job's pushes are acknowledged once their step is on every
 * copy (acks.c), so what a lost primary had not acknowledged is still the
 * trainer's to send again (client/failover.c). A partial push (gradient
 * accumulation) is forwarded as it landed and acknowledged once every
 * copy has its term (eng_repl_partial).
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"

#include "engine/forward.h"
#include "engine/kept.h"

/* Shard s waits for every copy to answer what it queues now (caller holds
 * s->mu); why: it could not be queued, said to what waits (NULL: it is). */
static void await_copies(struct ejob *j, struct eshard *s, const char *why)
{
	s->repl.wait = true;
	free(s->repl.err);
	s->repl.err = why ? strdup(why) : NULL;
	if (why)
		zs_error("job '%s': %s", j->name, why);
}

void eng_repl_queue(struct engine *e, struct ejob *j, struct eshard *s, bool init, const float *m)
{
	struct rtask *r = calloc(1, sizeof *r);

	if (r && init && m != s->master && (r->own = malloc(s->sh.length * 4)))
		memcpy(r->own, m, s->sh.length * 4);
	if (!r || !e->rp.q || (init && m != s->master && !r->own)) {
		char msg[ZS_ERRMSG_MAX];
		free(r);
		zs_fmt(msg, sizeof msg, "out of memory forwarding unit '%s' to its replicas",
		       eng_unit_name(j, s->sh.unit));
		await_copies(j, s, msg);
		return;
	}
	await_copies(j, s, NULL);
	if (!init && s->dev.on)
		eng_dev_acc_out(e, s); /* what the device's update consumed */
	r->step = init ? 0 : s->version - 1;
	r->init = init;
	r->n_peers = s->repl.n_peers;
	memcpy(r->peer, s->repl.peer, sizeof r->peer);
	eng_fwd_enqueue(e, j, s, r);
}

void eng_fwd_enqueue(struct engine *e, struct ejob *j, struct eshard *s, struct rtask *r)
{
	struct erepl *q = e->rp.q;
	bool drain_it;

	atomic_fetch_add(&j->refs, 1);
	r->j = j;
	r->shard = s->idx;
	r->gen = s->repl.gen;
	r->deadline_ms = zs_now_ms() + e->step_timeout_ms;
	pthread_mutex_lock(&q->mu);
	*q->tail = r;
	q->tail = &r->next;
	drain_it = !j->rc.busy;
	j->rc.busy = true;
	pthread_mutex_unlock(&q->mu);
	if (!drain_it)
		return;
	atomic_fetch_add(&j->refs, 1); /* the drain's */
	if (!zs_pool_submit(q->pool, eng_fwd_drain, j)) {
		/* never with a thread started (eng_repl_start): out of memory */
		zs_error("job '%s': out of memory queueing its forwards to the replicas; they go with its next",
			 j->name);
		pthread_mutex_lock(&q->mu);
		j->rc.busy = false;
		pthread_mutex_unlock(&q->mu);
		eng_job_unref(e, j);
	}
}

struct rtask *eng_fwd_seed_task(struct engine *e, struct ejob *j, struct eshard *s, uint64_t peer)
{
	struct rtask *r = calloc(1, sizeof *r);
	size_t n = s->sh.length;
	/* with the step before's parameters, kept whole here: a lost rank's
	 * replacement may gather them from the copy once it is promoted */
	const bool prev = eng_kept_seed_prev(s->prev.p != NULL, s->prev.of, s->version) && !s->dev.on;

	if (!r || !(r->own = malloc(n * 4 * (s->n_arrays + prev))) ||
	    eng_arrays_io(e, s, false, r->own, s->n_arrays > 1 ? r->own + n : NULL,
			  s->n_arrays > 2 ? r->own + 2 * n : NULL)) {
		zs_error("job '%s': unit '%s' shard %u: cannot read its state for a new copy on server %llu",
			 j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
			 (unsigned long long)peer);
		if (r)
			free(r->own);
		free(r);
		return NULL;
	}
	if (prev)
		zs_convert_to_f32(r->own + s->n_arrays * n, s->prev.p, s->dt, n);
	r->seed = true;
	r->restores = s->repl.restores;
	r->run = s->repl.run;
	r->seed_prev = prev;
	r->seed_mid = s->in.pterms > 0; /* their terms are not in the state */
	r->step = s->version;
	r->peer[0] = peer;
	r->n_peers = 1;
	return r;
}

void eng_repl_partial(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
		      const struct zs_xfer *x, void *dst, struct zs_sop *op)
{
	struct rtask *r = s->repl.n_peers && e->rp.q ? calloc(1, sizeof *r) : NULL;

	if (!s->repl.n_peers || !e->rp.q) { /* no copy (left): in, and done */
		eng_land_put(e, dst);
		zs_sop_done(op);
		return;
	}
	if (!r) {
		eng_land_put(e, dst);
		zs_sop_fail(op, ZS_ENOMEM, "out of memory forwarding a push of unit '%s'",
			    eng_unit_name(j, s->sh.unit));
		return;
	}
	r->partial = true;
	r->buf = dst;
	r->ack = op;
	r->dt = x->dtype;
	r->from = rank;
	r->micro = x->micro;
	r->step = x->step;
	r->n_peers = s->repl.n_peers;
	memcpy(r->peer, s->repl.peer, sizeof r->peer);
	r->peer_gen = s->repl.peer_gen;
	eng_fwd_enqueue(e, j, s, r);
}

void eng_repl_seed(struct engine *e, struct ejob *j, struct eshard *s, uint64_t peer)
{
	struct rtask *r = e->rp.q ? eng_fwd_seed_task(e, j, s, peer) : NULL;

	if (r)
		eng_fwd_enqueue(e, j, s, r);
}

void eng_repl_catchup(struct engine *e, struct ejob *j, struct eshard *s)
{
	struct rtask *r =
		e->rp.q && s->repl.n_peers ? eng_fwd_seed_task(e, j, s, s->repl.peer[0]) : NULL;

	if (!r) {
		char msg[ZS_ERRMSG_MAX];
		zs_fmt(msg, sizeof msg, "cannot send unit '%s' shard %u's state to its replicas",
		       eng_unit_name(j, s->sh.unit), s->sh.index);
		await_copies(j, s, msg);
		return;
	}
	await_copies(j, s, NULL);
	r->catchup = true;
	r->seed_mid = false; /* a copy behind takes it whole: the pushes of
			      * its step that were not on it are not
			      * acknowledged, and come again (forwarded) */
	r->n_peers = s->repl.n_peers;
	memcpy(r->peer, s->repl.peer, sizeof r->peer);
	eng_fwd_enqueue(e, j, s, r);
}
static void nothing(void *arg) { (void)arg; }

enum zs_status eng_repl_start(struct engine *e, struct zs_error *err)
{
	struct erepl *q;

	pthread_mutex_lock(&e->mu);
	if (e->rp.q) {
		pthread_mutex_unlock(&e->mu);
		return ZS_OK;
	}
	q = calloc(1, sizeof *q);
	if (!q || !(q->pool = zs_pool_new("zs-repl", REPL_THREADS)) ||
	    !zs_pool_submit(q->pool, nothing, NULL)) { /* a thread from now on */
		pthread_mutex_unlock(&e->mu);
		if (q)
			zs_pool_free(q->pool);
		free(q);
		return zs_fail(err, ZS_ENOMEM, "cannot start the replicator's thread");
	}
	pthread_mutex_init(&q->mu, NULL);
	q->tail = &q->head;
	e->rp.q = q;
	pthread_mutex_unlock(&e->mu);
	return ZS_OK;
}

uint32_t engine_take_seeded(struct engine *e, struct zs_seeded *out, uint32_t max)
{
	uint32_t n;

	pthread_mutex_lock(&e->mu);
	n = zs_take_front(e->rp.seeded, &e->rp.n_seeded, sizeof *out, out, max);
	pthread_mutex_unlock(&e->mu);
	return n;
}

void eng_repl_stop(struct engine *e)
{
	struct erepl *q = e->rp.q;

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true; /* the drains queued go on to their job's end */
	pthread_mutex_unlock(&q->mu);
	zs_pool_free(q->pool); /* what is queued runs first */
	e->rp.q = NULL;
	pthread_mutex_destroy(&q->mu);
	free(q);
}
