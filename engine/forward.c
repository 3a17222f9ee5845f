/*
 * forward.c - a replicated shard's forwards sent: a job's drain (a task of
 * the replicator's pool) takes its queued forwards in order, a batch at a
 * time, posts each to every copy over the data plane, waits for their
 * acknowledgements within the step timeout, sends again alone what failed,
 * seeds a copy that answers it has no state, and ends each: the shard goes
 * on (gathers of its version served, a deferred step completed) or says
 * why (queued by replica.c, which says what a forward is and why).
 */
#include "engine/jobs.h"
#include "engine/repl.h"

#include "engine/forward.h"

#include "model/hparams.h"
#include "model/hptables.h"
#include "net/transport.h"

#include <signal.h>

/* A copy answered forward f that it has no state: its seed, sent now. */
static void seed_now(struct engine *e, struct rtask *f);
static bool moot(struct rtask *r);

/* The hyperparameter table in force at step (false: none, the spec's). */
static bool table_at(struct ejob *j, uint64_t step, struct zs_hp_table *t)
{
	const struct zs_hp_table *in;

	pthread_mutex_lock(&j->hps.mu);
	if ((in = zs_hp_list_at(j->hps.t, j->hps.n, step)))
		*t = *in;
	pthread_mutex_unlock(&j->hps.mu);
	return in != NULL;
}

/* Posts task r's forward to every peer of its shard (reqs: one per peer,
 * and each peer's table before it: 2 * n_peers); the first failure in
 * err. Requests are left NULL where nothing was posted. */
static enum zs_status post_task(struct engine *e, struct rtask *r, struct zs_req **reqs,
				struct zs_error *err)
{
	struct eshard *s = r->j->shards[r->shard];
	/* the parameters (an initial upload), the whole state (a seed), or
	 * a step's mean gradient or partial push (a mark's, frozen) */
	struct zs_xfer x = {.unit = s->sh.unit, .offset = s->sh.offset,
			    .length = r->init ? s->sh.length : s->lay.glen, .step = r->step,
			    .dtype = r->partial ? r->dt : ZS_F32, .init = r->init, .replica = true,
			    .seed = r->seed, .catchup = r->catchup, .with_prev = r->seed_prev,
			    .if_empty = r->if_empty, .timeline = r->seed ? r->run : 0,
			    .partial = r->partial || r->seed_mid,
			    .from = r->from, .micro = r->micro};
	const void *src = r->partial ? r->buf
			  : r->init || r->seed ? (const void *)(r->own ? r->own : s->master)
					       : s->acc;
	uint8_t hp[ZS_HP_MAX_BYTES];
	struct zs_hp_table t;
	size_t hlen;
	enum zs_status st = ZS_OK;
	bool one;

	if (r->seed && !r->catchup && moot(r)) /* not even once */
		return zs_fail(err, ZS_ECANCELED,
			       "its state was read before a restore, or server %llu is no longer a copy of it",
			       (unsigned long long)r->peer[0]);
	pthread_mutex_lock(&r->j->e->mu);
	x.epoch = r->j->epoch;
	pthread_mutex_unlock(&r->j->e->mu);
	r->epoch = x.epoch;
	if (r->seed) /* master and the optimizer's arrays, one after the other */
		x.length = s->sh.length * (s->n_arrays + r->seed_prev);
	hlen = !r->init && !r->partial && table_at(r->j, r->step, &t) ? zs_hp_encode(&t, hp) : 0;
	/* the fault (e->rp.fault_one_copy): a step's forward from step 3 on, to
	 * two copies or more, goes to the last alone, which applies it, and
	 * this server dies: a primary lost mid-forward */
	one = e->rp.fault_one_copy && !r->init && !r->seed && !r->partial && r->n_peers > 1 &&
	      r->step >= 3;
	for (uint32_t p = one ? r->n_peers - 1 : 0; p < r->n_peers && !st; p++) {
		struct zs_conn *c = eng_peer_conn(e, r->j, r->peer[p], err);
		if (!c)
			st = err->code ? err->code : ZS_EUNAVAIL;
		else if (hlen && (st = zs_post_hparams(c, t.step, hp, hlen, &reqs[2 * p], err)))
			eng_peer_broken(r->j, r->peer[p]);
		else if ((st = zs_post_write(c, &x, src, &reqs[2 * p + 1], err)))
			eng_peer_broken(r->j, r->peer[p]);
	}
	if (one && !st) {
		for (uint32_t i = 2 * r->n_peers - 2; i < 2 * r->n_peers; i++)
			if (reqs[i])
				zs_req_wait(reqs[i], 5000, NULL);
		zs_error("fault injection: dying at repl-one-copy (step %llu of unit '%s' shard %u went to server %llu alone)",
			 (unsigned long long)r->step, eng_unit_name(r->j, s->sh.unit), s->sh.index,
			 (unsigned long long)r->peer[r->n_peers - 1]);
		raise(SIGKILL);
	}
	return st;
}

/* Whether r is no longer wanted: a restore or a new epoch changed its
 * shard's forwards (a seed: its copy is no longer one, or a restore came
 * since its state was read: that state is of the run the restore ended,
 * and the restore brought the copy its own; sent, a copy restored already
 * took it: a forward of the restored step was refused "at step 17", and
 * the step stood until its timeout; faults.py --replicas 2 --servers 3
 * --clip --accum 3 --seed 11 --trial server2:16, 4 runs in 10). */
static bool moot(struct rtask *r)
{
	struct eshard *s = r->j->shards[r->shard];
	bool m;

	if (atomic_load(&r->j->removed)) /* the job was dropped here */
		return true;
	pthread_mutex_lock(&s->mu);
	m = r->gen != s->repl.gen || (r->partial && r->peer_gen != s->repl.peer_gen);
	if (r->seed && !r->catchup) {
		bool is_peer = false;
		for (uint32_t q = 0; q < s->repl.n_peers; q++)
			is_peer |= s->repl.peer[q] == r->peer[0];
		m = !is_peer || r->restores != s->repl.restores;
	}
	pthread_mutex_unlock(&s->mu);
	return m;
}

/* Waits for r's requests (within its deadline); the first failure in err. */
static enum zs_status wait_task(struct engine *e, struct rtask *r, struct zs_req **reqs,
				struct zs_error *err)
{
	enum zs_status st = ZS_OK, w;

	for (uint32_t i = 0; i < 2 * r->n_peers; i++) {
		if (!reqs[i])
			continue;
		while ((w = zs_req_wait(reqs[i], 100, st ? NULL : err)) == ZS_EAGAIN) {
			if (moot(r)) { /* a new epoch or a restore: no longer wanted */
				eng_peer_broken(r->j, r->peer[i / 2]);
				w = ZS_ECANCELED;
				if (!st)
					zs_fail(err, w, "server %llu is no longer a copy of it",
						(unsigned long long)r->peer[i / 2]);
				break;
			}
			if (atomic_load(&e->stop) || zs_now_ms() > r->deadline_ms) {
				/* closing the connection (peers_reap) ends it */
				eng_peer_broken(r->j, r->peer[i / 2]);
				w = ZS_ETIMEDOUT;
				if (!st)
					zs_fail(err, w, "server %llu did not acknowledge within %u ms",
						(unsigned long long)r->peer[i / 2],
						e->step_timeout_ms);
				break;
			}
		}
		reqs[i] = NULL;
		if (w == ZS_ENOTFOUND && !r->seed && !r->init) {
			r->empty = r->peer[i / 2]; /* to seed, not a broken link */
			st = st ? st : w;
		} else if (w) {
			st = st ? st : w;
			eng_peer_broken(r->j, r->peer[i / 2]);
		}
	}
	return st;
}

/* Copy peer of shard s has its state: told to the coordinator at the next
 * heartbeat (from then on it may be promoted). */
static void record_seeded(struct engine *e, struct ejob *j, struct eshard *s, uint64_t peer,
			  uint64_t epoch)
{
	pthread_mutex_lock(&e->mu);
	if (e->rp.n_seeded == e->rp.cap_seeded) {
		uint32_t nc = e->rp.cap_seeded ? e->rp.cap_seeded * 2 : 16;
		struct zs_seeded *g = realloc(e->rp.seeded, nc * sizeof *g);
		if (g) {
			e->rp.seeded = g;
			e->rp.cap_seeded = nc;
		}
	}
	if (e->rp.n_seeded < e->rp.cap_seeded) {
		struct zs_seeded *d = &e->rp.seeded[e->rp.n_seeded++];
		snprintf(d->job, sizeof d->job, "%s", j->name);
		d->unit = s->sh.unit;
		d->index = s->sh.index;
		d->server_id = peer;
		d->epoch = epoch;
	}
	pthread_mutex_unlock(&e->mu);
}

/* The end of a partial push's forward: acknowledged when every copy has
 * it; after a new placement epoch, sent to the copies of the new one
 * (those that have it already take it once); else it fails. */
static void partial_end(struct engine *e, struct rtask *r, enum zs_status st, const char *why)
{
	struct ejob *j = r->j;
	struct eshard *s = j->shards[r->shard];
	struct rtask *again = NULL;

	pthread_mutex_lock(&s->mu);
	if (st && r->gen == s->repl.gen && r->peer_gen != s->repl.peer_gen && !s->sh.copy) {
		if (s->repl.n_peers && (again = calloc(1, sizeof *again))) {
			*again = *r;
			again->next = NULL;
			again->n_peers = s->repl.n_peers;
			memcpy(again->peer, s->repl.peer, sizeof again->peer);
			again->peer_gen = s->repl.peer_gen;
			again->empty = 0;
			eng_fwd_enqueue(e, j, s, again); /* takes the buffer and the op */
			r->buf = NULL;
			r->ack = NULL;
		} else if (!s->repl.n_peers) {
			st = ZS_OK; /* no copy left to give it to */
		}
	}
	if (r->ack && !st) {
		atomic_fetch_add(&e->ctr.repl_bytes, (uint64_t)s->lay.glen * s->dsz * r->n_peers);
		zs_sop_done(r->ack);
	} else if (r->ack) {
		zs_sop_fail(r->ack, st == ZS_ECANCELED ? ZS_ECANCELED : ZS_EUNAVAIL,
			    "micro-batch %u of rank %u for unit '%s' shard %u is not on its replica: %s",
			    r->micro, r->from, eng_unit_name(j, s->sh.unit), s->sh.index, why);
	}
	pthread_mutex_unlock(&s->mu);
	if (r->buf)
		eng_land_put(e, r->buf);
	r->buf = NULL;
	r->ack = NULL;
}

/* Every copy has r's step (st ZS_OK), or will not (why): the shard goes on
 * (gathers of its version served, a deferred update run) or says why. */
static void task_end(struct engine *e, struct rtask *r, enum zs_status st, const char *why)
{
	struct ejob *j = r->j;
	struct eshard *s = j->shards[r->shard];
	struct eng_fx fx = {0};
	uint64_t settled[ZS_MAX_REPLICAS - 1], settled_in[ZS_MAX_REPLICAS - 1];
	uint32_t n_settled = 0;

	if (r->partial) {
		partial_end(e, r, st, why);
		return;
	}
	if (r->catchup && st == ZS_EEXIST)
		st = ZS_OK; /* a copy at its step already (or past it) */
	if (r->seed && !r->catchup) { /* a new copy has the state (or not: its forwards say) */
		if (r->if_empty && st == ZS_EEXIST) {
			/* sent again, and it has the state: the first seed
			 * came after it refused the forward */
			zs_debug("job '%s': unit '%s' shard %u: the copy on server %llu has its seed already",
				 j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
				 (unsigned long long)r->peer[0]);
			return;
		}
		if (!st) {
			pthread_mutex_lock(&s->mu);
			if (eng_copy_reseed(s->repl.seeded, s->repl.n_seeded, r->peer[0]) == ES_SEED &&
			    s->repl.n_seeded < ZS_MAX_REPLICAS - 1)
				s->repl.seeded[s->repl.n_seeded++] = r->peer[0];
			pthread_mutex_unlock(&s->mu);
		}
		if (!st && !eng_copy_seed_whole(r->seed_mid)) {
			/* not whole until the step it was taken in is applied
			 * there: reported when that step's forward reaches it */
			pthread_mutex_lock(&s->mu);
			if (s->repl.n_unsettled < ZS_MAX_REPLICAS - 1)
				s->repl.unsettled[s->repl.n_unsettled++] =
					(typeof(s->repl.unsettled[0])){r->peer[0], r->step, r->epoch};
			pthread_mutex_unlock(&s->mu);
		} else if (!st) {
			record_seeded(e, j, s, r->peer[0], r->epoch);
		}
		if (st == ZS_ECANCELED)
			zs_info("job '%s': unit '%s' shard %u: no seed of step %llu for the copy on server %llu: %s",
				j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
				(unsigned long long)r->step, (unsigned long long)r->peer[0], why);
		else if (st)
			zs_error("job '%s': unit '%s' shard %u: the new copy on server %llu did not take its state: %s",
				 j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
				 (unsigned long long)r->peer[0], why);
		else
			zs_info("job '%s': unit '%s' shard %u: a new copy on server %llu has its state of step %llu%s%s",
				j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
				(unsigned long long)r->peer[0], (unsigned long long)r->step,
				r->if_empty ? " (seeded again: it said it had none)" : "",
				r->seed_mid ? " (taken mid-step: it may take over once that step is applied there)"
					    : "");
		return;
	}
	pthread_mutex_lock(&s->mu);
	if (!eng_copies_settles(s->repl.wait, s->repl.gen, r->gen,
				r->init ? 0 : r->catchup ? r->step : r->step + 1, s->version)) {
		/* a restore or a new placement came between, or a newer
		 * forward's end settles the wait (engine/copies.c) */
		pthread_mutex_unlock(&s->mu);
		return;
	}
	if (st) {
		char msg[ZS_ERRMSG_MAX];
		zs_fmt(msg, sizeof msg, "step %llu of unit '%s' shard %u is not on its replica: %s",
		       (unsigned long long)s->version, eng_unit_name(j, s->sh.unit), s->sh.index,
		       why);
		free(s->repl.err);
		s->repl.err = strdup(msg);
		for (size_t h = 0; h < s->hold.n; h++)
			zs_sop_fail(s->hold.q[h].op, ZS_EUNAVAIL, "%s", msg);
		s->hold.n = 0;
		eng_acks_fail(s, ZS_EUNAVAIL, msg);
		pthread_mutex_unlock(&s->mu);
		zs_error("job '%s': %s", j->name, msg);
		return;
	}
	s->repl.wait = false;
	for (uint32_t u = 0; u < s->repl.n_unsettled && !r->catchup;) { /* copies seeded mid-step */
		bool got = false;
		for (uint32_t q = 0; q < r->n_peers && !got; q++)
			got = r->peer[q] == s->repl.unsettled[u].peer;
		if (got && eng_copies_settled(s->repl.unsettled[u].step, r->init, r->step)) {
			settled_in[n_settled] = s->repl.unsettled[u].epoch;
			settled[n_settled++] = s->repl.unsettled[u].peer;
			s->repl.unsettled[u] = s->repl.unsettled[--s->repl.n_unsettled];
		} else {
			u++;
		}
	}
	if (!r->catchup) { /* a step's forward (a catch-up's bytes went to those behind alone) */
		atomic_fetch_add(&e->ctr.repl_steps, 1);
		atomic_fetch_add(&e->ctr.repl_bytes, (uint64_t)s->lay.glen * 4 * s->repl.n_peers);
	}
	eng_acks_flush(s);
	if (s->phase != PH_WAITING)
		eng_take_released(s, &fx.rel, &fx.n_rel);
	else if (!eng_copies_hold(false, s->repl.landing)) /* the next step's pushes are all in */
		eng_step_complete(e, j, s, &fx);
	pthread_mutex_unlock(&s->mu);
	eng_fx_run(e, j, s, &fx);
	for (uint32_t u = 0; u < n_settled; u++) /* e->mu: not under s->mu */
		record_seeded(e, j, s, settled[u], settled_in[u]);
}

static void task_free(struct engine *e, struct rtask *r)
{
	free(r->own);
	eng_job_unref(e, r->j);
	free(r);
}

/* Sends a batch of forwards: all posted, then each waited for; one that
 * failed is sent again alone until its deadline. */
static void run_batch(struct engine *e, struct rtask *batch)
{
	enum { MAXP = 2 * (ZS_MAX_REPLICAS - 1) };
	size_t n = 0, i = 0;
	struct rtask *r;
	struct zs_req *(*reqs)[MAXP];
	enum zs_status *st;
	struct zs_error *errs;

	for (r = batch; r; r = r->next)
		n++;
	reqs = calloc(n, sizeof *reqs);
	st = calloc(n, sizeof *st);
	errs = calloc(n, sizeof *errs);
	if (!reqs || !st || !errs) {
		/* one at a time then: nothing is posted ahead */
		free(reqs);
		free(st);
		free(errs);
		for (r = batch; r; r = r->next) {
			struct zs_req *one[MAXP] = {0};
			struct zs_error err = {0};
			enum zs_status s1 = post_task(e, r, one, &err);
			enum zs_status s2 = wait_task(e, r, one, s1 ? NULL : &err);
			eng_peers_reap(r->j);
			task_end(e, r, s1 ? s1 : s2, err.msg);
		}
		return;
	}
	for (r = batch, i = 0; r; r = r->next, i++)
		st[i] = post_task(e, r, reqs[i], &errs[i]);
	for (r = batch, i = 0; r; r = r->next, i++) {
		enum zs_status w = wait_task(e, r, reqs[i], st[i] ? NULL : &errs[i]);
		if (!st[i])
			st[i] = w;
	}
	for (r = batch; r; r = r->next)
		eng_peers_reap(r->j);
	for (r = batch, i = 0; r; r = r->next, i++) {
		/* again, alone, until it lands or its time is up */
		while (st[i] && !atomic_load(&e->stop) && zs_now_ms() < r->deadline_ms) {
			if (moot(r) || (r->seed && st[i] == ZS_EEXIST))
				break; /* a copy with state: its forwards go on */
			if (st[i] == ZS_ENOTFOUND && r->empty)
				seed_now(e, r); /* then the forward is one it applied */
			else
				zs_sleep_ms(100, NULL);
			memset(reqs[i], 0, sizeof reqs[i]);
			errs[i] = (struct zs_error){0};
			st[i] = post_task(e, r, reqs[i], &errs[i]);
			enum zs_status w = wait_task(e, r, reqs[i], st[i] ? NULL : &errs[i]);
			if (!st[i])
				st[i] = w;
			eng_peers_reap(r->j);
		}
		task_end(e, r, st[i], errs[i].msg[0] ? errs[i].msg : "stopped");
	}
	free(reqs);
	free(st);
	free(errs);
}

#define BATCH 24

/* Takes up to BATCH of job j's queued tasks, in order (caller holds q->mu). */
static struct rtask *take_job(struct erepl *q, struct ejob *j)
{
	struct rtask *batch = NULL, **bt = &batch, **pp = &q->head;
	int k = 0;

	/* at most BATCH at once: their requests stay within a connection's
	 * 64 in flight */
	while (*pp && k < BATCH) {
		struct rtask *r = *pp;
		if (r->j != j) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		r->next = NULL;
		*bt = r;
		bt = &r->next;
		k++;
	}
	q->tail = &q->head;
	while (*q->tail)
		q->tail = &(*q->tail)->next;
	return batch;
}

/* Whether job j has forwards queued (caller holds q->mu). */
static bool queued(const struct erepl *q, const struct ejob *j)
{
	for (const struct rtask *r = q->head; r; r = r->next)
		if (r->j == j)
			return true;
	return false;
}

/*
 * A job's drain, a task of the replicator's pool holding a reference to
 * the job: sends one batch of its forwards, then queues itself again
 * behind the other jobs' (once the replicator stops, or when the pool
 * cannot take it: goes on here) or, with none left, ends.
 */
void eng_fwd_drain(void *arg)
{
	struct ejob *j = arg;
	struct engine *e = j->e;
	struct erepl *q = e->rp.q;

	for (;;) {
		struct rtask *batch;
		bool more, again;
		pthread_mutex_lock(&q->mu);
		batch = take_job(q, j);
		pthread_mutex_unlock(&q->mu);
		run_batch(e, batch);
		while (batch) {
			struct rtask *r = batch;
			batch = r->next;
			task_free(e, r);
		}
		pthread_mutex_lock(&q->mu);
		more = queued(q, j);
		again = more && !q->stop;
		j->rc.busy = more;
		pthread_mutex_unlock(&q->mu);
		if (!more)
			break;
		if (again && zs_pool_submit(q->pool, eng_fwd_drain, j))
			return; /* the reference goes with it */
	}
	eng_job_unref(e, j);
}

static void seed_now(struct engine *e, struct rtask *f)
{
	struct eshard *s = f->j->shards[f->shard];
	struct zs_req *reqs[2 * (ZS_MAX_REPLICAS - 1)] = {0};
	struct zs_error err = {0};
	struct rtask *r = NULL;
	enum eng_reseed how;
	enum zs_status st;

	pthread_mutex_lock(&s->mu);
	how = eng_copy_reseed(s->repl.seeded, s->repl.n_seeded, f->empty);
	if (eng_ready(s))
		r = eng_fwd_seed_task(e, f->j, s, f->empty);
	if (r) {
		r->if_empty = how == ES_IF_EMPTY;
		atomic_fetch_add(&f->j->refs, 1);
		r->j = f->j;
		r->shard = s->idx;
		r->deadline_ms = f->deadline_ms;
	}
	pthread_mutex_unlock(&s->mu);
	f->empty = 0;
	if (!r)
		return;
	st = post_task(e, r, reqs, &err);
	if (!st)
		st = wait_task(e, r, reqs, &err);
	eng_peers_reap(r->j);
	task_end(e, r, st, err.msg);
	task_free(e, r);
}
