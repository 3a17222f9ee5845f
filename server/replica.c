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
 * next step's update (repl_wait, apply_wait): so no step a trainer has
 * seen the result of exists on fewer than K servers. The initial upload is
 * forwarded the same way.
 *
 * Why the gradient and not the state: it is 4 bytes per element, where the
 * state an update changes is 12 (master and AdamW's two moments), and the
 * update is a pure function of (state, gradient, step, table), the same
 * on every server (math/optim.c; elem.h on a device).
 *
 * One thread sends every forward of this server, in the order the steps
 * were applied; the forwards it takes at once are posted together and
 * then waited for. A forward that fails is sent again on a new connection
 * until the step timeout; past it, the shard's gathers fail naming the
 * replica that did not answer (the job then rolls back as after a lost
 * server).
 */
#include "server/engine_int.h"

#include "model/hparams.h"
#include "net/transport.h"

struct rtask {
	struct ejob *j; /* referenced */
	uint32_t shard;
	uint64_t step, gen;
	bool init;
	float *own; /* the initial parameters when they are not in s->master */
	int64_t deadline_ms;
	struct rtask *next;
};

struct erepl {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rtask *head, **tail;
	pthread_t th;
	bool stop;
};

/* ------------------------------------------------------------- sending */

/* The connection to peer server id for j (made when missing), or NULL. */
static struct zs_conn *peer_conn(struct engine *e, struct ejob *j, uint64_t id,
				 struct zs_error *err)
{
	struct zs_conn_opts o = {.job = j->name, .token = j->token, .epoch = j->epoch,
				 .incarnation = (uint64_t)j->created_ms, .rank = ZS_RANK_PEER,
				 .timeout_ms = 5000};
	char addr[ZS_ADDR_MAX];
	unsigned k;

	for (k = 0; k < j->n_peerc; k++)
		if (j->peerc[k].id == id && j->peerc[k].c && !j->peerc[k].broken)
			return j->peerc[k].c;
		else if (j->peerc[k].id == id && j->peerc[k].broken) {
			/* reaped (and made again) after this batch */
			zs_fail(err, ZS_EUNAVAIL, "the connection to server %llu broke",
				(unsigned long long)id);
			return NULL;
		}
	for (k = 0; k < j->n_peerc && j->peerc[k].id != id; k++)
		;
	if (k == j->n_peerc) {
		if (k == sizeof j->peerc / sizeof j->peerc[0]) {
			zs_fail(err, ZS_ENOSPC, "job '%s' has replicas on more than %u servers here",
				j->name, k);
			return NULL;
		}
		j->peerc[j->n_peerc++].id = id;
	}
	if (e->peer_fn(e->peer_ctx, id, addr, sizeof addr, err))
		return NULL;
	o.addr = addr;
	if (zs_connect(&zs_tcp_transport, &o, &j->peerc[k].c, err)) {
		zs_error_prefix(err, "server %llu (%s)", (unsigned long long)id, addr);
		j->peerc[k].c = NULL;
		return NULL;
	}
	return j->peerc[k].c;
}

/* Marks the connection to peer id broken: closed (and every request still
 * on it freed) by peers_reap once nothing waits on its requests. */
static void peer_broken(struct ejob *j, uint64_t id)
{
	for (unsigned k = 0; k < j->n_peerc; k++)
		if (j->peerc[k].id == id)
			j->peerc[k].broken = true;
}

static void peers_reap(struct ejob *j)
{
	for (unsigned k = 0; k < j->n_peerc; k++)
		if (j->peerc[k].broken) {
			zs_conn_close(j->peerc[k].c);
			j->peerc[k].c = NULL;
			j->peerc[k].broken = false;
		}
}

void eng_repl_close(struct ejob *j)
{
	for (unsigned k = 0; k < j->n_peerc; k++)
		zs_conn_close(j->peerc[k].c);
	j->n_peerc = 0;
}

/* The hyperparameter table in force at step (false: none, the spec's). */
static bool table_at(struct ejob *j, uint64_t step, struct zs_hp_table *t)
{
	bool have = false;

	pthread_mutex_lock(&j->hpmu);
	for (int k = (int)j->n_hp - 1; k >= 0 && !have; k--)
		if (j->hp[k].step <= step) {
			*t = j->hp[k];
			have = true;
		}
	pthread_mutex_unlock(&j->hpmu);
	return have;
}

/* Posts task r's forward to every peer of its shard (reqs: one per peer,
 * and each peer's table before it: 2 * n_peers); the first failure in
 * err. Requests are left NULL where nothing was posted. */
static enum zs_status post_task(struct engine *e, struct rtask *r, struct zs_req **reqs,
				struct zs_error *err)
{
	struct eshard *s = &r->j->shards[r->shard];
	struct zs_xfer x = {.unit = s->sh.unit, .offset = s->sh.offset,
			    .length = s->sh.length, .step = r->step, .dtype = ZS_F32,
			    .init = r->init, .replica = true, .epoch = r->j->epoch};
	const float *src = r->init ? (r->own ? r->own : s->master) : s->acc;
	uint8_t hp[ZS_HP_MAX_BYTES];
	struct zs_hp_table t;
	size_t hlen = !r->init && table_at(r->j, r->step, &t) ? zs_hp_encode(&t, hp) : 0;
	enum zs_status st = ZS_OK;

	for (uint32_t p = 0; p < s->n_peers && !st; p++) {
		struct zs_conn *c = peer_conn(e, r->j, s->peer[p], err);
		if (!c)
			st = err->code ? err->code : ZS_EUNAVAIL;
		else if (hlen && (st = zs_post_hparams(c, t.step, hp, hlen, &reqs[2 * p], err)))
			peer_broken(r->j, s->peer[p]);
		else if ((st = zs_post_write(c, &x, src, &reqs[2 * p + 1], err)))
			peer_broken(r->j, s->peer[p]);
	}
	return st;
}

/* Waits for r's requests (within its deadline); the first failure in err. */
static enum zs_status wait_task(struct engine *e, struct rtask *r, struct zs_req **reqs,
				struct zs_error *err)
{
	struct eshard *s = &r->j->shards[r->shard];
	enum zs_status st = ZS_OK, w;

	for (uint32_t i = 0; i < 2 * s->n_peers; i++) {
		if (!reqs[i])
			continue;
		while ((w = zs_req_wait(reqs[i], 100, st ? NULL : err)) == ZS_EAGAIN) {
			if (atomic_load(&e->stop) || zs_now_ms() > r->deadline_ms) {
				/* closing the connection (peers_reap) ends it */
				peer_broken(r->j, s->peer[i / 2]);
				w = ZS_ETIMEDOUT;
				if (!st)
					zs_fail(err, w, "server %llu did not acknowledge within %u ms",
						(unsigned long long)s->peer[i / 2],
						e->step_timeout_ms);
				break;
			}
		}
		reqs[i] = NULL;
		if (w) {
			st = st ? st : w;
			peer_broken(r->j, s->peer[i / 2]);
		}
	}
	return st;
}

/* The held gathers of s's version, out of s->held (caller holds s->mu,
 * serves them unlocked: eng_serve_released). */
static void take_released(struct eshard *s, struct held **rel, size_t *n_rel)
{
	size_t keep = 0;

	*rel = NULL;
	*n_rel = 0;
	if (!s->n_held || !s->ready || !(*rel = malloc(s->n_held * sizeof **rel)))
		return;
	for (size_t h = 0; h < s->n_held; h++)
		if (s->held[h].x.step == s->version)
			(*rel)[(*n_rel)++] = s->held[h];
		else
			s->held[keep++] = s->held[h];
	s->n_held = keep;
}

/* Every copy has r's step (st ZS_OK), or will not (why): the shard goes on
 * (gathers of its version served, a deferred update run) or says why. */
static void task_end(struct engine *e, struct rtask *r, enum zs_status st, const char *why)
{
	struct ejob *j = r->j;
	struct eshard *s = &j->shards[r->shard];
	struct held *rel = NULL;
	size_t n_rel = 0;

	pthread_mutex_lock(&s->mu);
	if (r->gen != s->repl_gen || !s->repl_wait) { /* a restore came between */
		pthread_mutex_unlock(&s->mu);
		return;
	}
	if (st) {
		char msg[ZS_ERRMSG_MAX];
		zs_fmt(msg, sizeof msg, "step %llu of unit '%s' shard %u is not on its replica: %s",
		       (unsigned long long)s->version, eng_unit_name(j, s->sh.unit), s->sh.index,
		       why);
		free(s->repl_err);
		s->repl_err = strdup(msg);
		for (size_t h = 0; h < s->n_held; h++)
			zs_sop_fail(s->held[h].op, ZS_EUNAVAIL, "%s", msg);
		s->n_held = 0;
		eng_acks_fail(s, ZS_EUNAVAIL, msg);
		pthread_mutex_unlock(&s->mu);
		zs_error("job '%s': %s", j->name, msg);
		return;
	}
	s->repl_wait = false;
	atomic_fetch_add(&e->repl_steps, 1);
	atomic_fetch_add(&e->repl_bytes, (uint64_t)s->sh.length * 4 * s->n_peers);
	eng_acks_flush(s);
	if (s->apply_wait) { /* the next step's pushes are all in */
		eng_step_complete(e, j, s); /* unlocks */
		return;
	}
	take_released(s, &rel, &n_rel);
	pthread_mutex_unlock(&s->mu);
	eng_serve_released(e, s, rel, n_rel);
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
			peers_reap(r->j);
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
		peers_reap(r->j);
	for (r = batch, i = 0; r; r = r->next, i++) {
		/* again, alone, until it lands or its time is up */
		while (st[i] && !atomic_load(&e->stop) && zs_now_ms() < r->deadline_ms) {
			struct eshard *s = &r->j->shards[r->shard];
			bool moot;
			pthread_mutex_lock(&s->mu);
			moot = r->gen != s->repl_gen;
			pthread_mutex_unlock(&s->mu);
			if (moot)
				break;
			zs_sleep_ms(100, NULL);
			memset(reqs[i], 0, sizeof reqs[i]);
			errs[i] = (struct zs_error){0};
			st[i] = post_task(e, r, reqs[i], &errs[i]);
			enum zs_status w = wait_task(e, r, reqs[i], st[i] ? NULL : &errs[i]);
			if (!st[i])
				st[i] = w;
			peers_reap(r->j);
		}
		task_end(e, r, st[i], errs[i].msg[0] ? errs[i].msg : "stopped");
	}
	free(reqs);
	free(st);
	free(errs);
}

#define BATCH 24

static void *repl_main(void *arg)
{
	struct engine *e = arg;
	struct erepl *q = e->repl;

	for (;;) {
		struct rtask *batch;
		pthread_mutex_lock(&q->mu);
		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cv, &q->mu);
		/* at most BATCH at once: their requests stay within a
		 * connection's 64 in flight */
		batch = q->head;
		{
			struct rtask *last = batch;
			for (int k = 1; last && k < BATCH; k++)
				last = last->next;
			if (last && last->next) {
				q->head = last->next;
				last->next = NULL;
			} else {
				q->head = NULL;
				q->tail = &q->head;
			}
		}
		pthread_mutex_unlock(&q->mu);
		if (!batch)
			break; /* stopping, nothing left */
		run_batch(e, batch);
		while (batch) {
			struct rtask *r = batch;
			batch = r->next;
			task_free(e, r);
		}
	}
	return NULL;
}

void eng_repl_queue(struct engine *e, struct ejob *j, struct eshard *s, bool init, const float *m)
{
	struct rtask *r = calloc(1, sizeof *r);

	s->repl_wait = true;
	free(s->repl_err);
	s->repl_err = NULL;
	if (r && init && m != s->master && (r->own = malloc(s->sh.length * 4)))
		memcpy(r->own, m, s->sh.length * 4);
	if (!r || !e->repl || (init && m != s->master && !r->own)) {
		char msg[ZS_ERRMSG_MAX];
		free(r);
		zs_fmt(msg, sizeof msg, "out of memory forwarding unit '%s' to its replicas",
		       eng_unit_name(j, s->sh.unit));
		s->repl_err = strdup(msg);
		zs_error("job '%s': %s", j->name, msg);
		return;
	}
	if (!init && s->gpu)
		eng_dev_acc_out(e, s); /* what the device's update consumed */
	atomic_fetch_add(&j->refs, 1);
	r->j = j;
	r->shard = (uint32_t)(s - j->shards);
	r->step = init ? 0 : s->version - 1;
	r->gen = s->repl_gen;
	r->init = init;
	r->deadline_ms = zs_now_ms() + e->step_timeout_ms;
	pthread_mutex_lock(&e->repl->mu);
	*e->repl->tail = r;
	e->repl->tail = &r->next;
	pthread_cond_signal(&e->repl->cv);
	pthread_mutex_unlock(&e->repl->mu);
}

enum zs_status eng_repl_start(struct engine *e, struct zs_error *err)
{
	struct erepl *q;

	pthread_mutex_lock(&e->mu);
	if (e->repl) {
		pthread_mutex_unlock(&e->mu);
		return ZS_OK;
	}
	q = calloc(1, sizeof *q);
	if (!q) {
		pthread_mutex_unlock(&e->mu);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->tail = &q->head;
	e->repl = q;
	if (pthread_create(&q->th, NULL, repl_main, e)) {
		e->repl = NULL;
		pthread_mutex_unlock(&e->mu);
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->mu);
		free(q);
		return zs_fail(err, ZS_ENOMEM, "cannot start the replicator's thread");
	}
	pthread_mutex_unlock(&e->mu);
	return ZS_OK;
}

void eng_repl_stop(struct engine *e)
{
	struct erepl *q = e->repl;

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->th, NULL);
	e->repl = NULL;
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

/* ---------------------------------------------------------- new epochs */

void eng_shard_peers(struct eshard *s, const struct zs_placement *p)
{
	s->n_peers = 0;
	for (uint32_t q = 0; s->sh.copy == 0 && q < p->n_shards; q++) {
		const struct zs_shard *o = &p->shards[q];
		if (o->unit == s->sh.unit && o->index == s->sh.index && o->copy &&
		    s->n_peers < ZS_MAX_REPLICAS - 1)
			s->peer[s->n_peers++] = o->server_id;
	}
}

bool eng_promoted_since(struct engine *e, struct ejob *j, struct eshard *s)
{
	uint64_t epoch;
	bool primary;

	pthread_mutex_lock(&e->mu);
	epoch = j->epoch;
	pthread_mutex_unlock(&e->mu);
	if (j->spec.replicas < 2 || !e->stale_fn || !e->stale_fn(e->stale_ctx, j->name, epoch))
		return false;
	pthread_mutex_lock(&s->mu);
	primary = !s->sh.copy;
	pthread_mutex_unlock(&s->mu);
	return primary;
}

/* The entry of placement p for shard s on server id, or NULL. */
static const struct zs_shard *entry(const struct zs_placement *p, const struct eshard *s,
				    uint64_t id)
{
	for (uint32_t i = 0; i < p->n_shards; i++) {
		const struct zs_shard *o = &p->shards[i];
		if (o->server_id == id && o->unit == s->sh.unit && o->index == s->sh.index &&
		    o->offset == s->sh.offset && o->length == s->sh.length &&
		    o->padded == s->sh.padded)
			return o;
	}
	return NULL;
}

enum zs_status eng_reassign(struct engine *e, struct ejob *j, const struct zs_job *job,
			    uint64_t server_id)
{
	struct zs_error err = {0};
	uint32_t n = 0, promoted = 0, primaries = 0;

	for (uint32_t i = 0; i < job->placement.n_shards; i++)
		n += job->placement.shards[i].server_id == server_id;
	if (n != j->n_shards)
		return ZS_ESTATE;
	for (uint32_t k = 0; k < j->n_shards; k++)
		if (!entry(&job->placement, &j->shards[k], server_id))
			return ZS_ESTATE;
	if (!e->peer_fn || eng_repl_start(e, &err))
		return ZS_ESTATE;
	pthread_mutex_lock(&e->mu);
	j->epoch = job->placement.epoch;
	pthread_mutex_unlock(&e->mu);
	for (uint32_t k = 0; k < j->n_shards; k++) {
		struct eshard *s = &j->shards[k];
		const struct zs_shard *sh = entry(&job->placement, s, server_id);
		struct held *rel = NULL;
		size_t n_rel = 0;
		pthread_mutex_lock(&s->mu);
		promoted += s->sh.copy && !sh->copy;
		primaries += !sh->copy;
		s->sh.copy = sh->copy;
		s->sh.copies = sh->copies;
		eng_shard_peers(s, &job->placement);
		if (s->repl_wait) {
			/* the forward under way went to the old copies: to the
			 * ones left, or, with none left, it is done */
			s->repl_gen++;
			s->repl_wait = false;
			if (s->n_peers) {
				float *m = NULL;
				if (!s->version && !s->master && (m = malloc(s->sh.length * 4)) &&
				    eng_arrays_io(e, s, false, m, NULL, NULL)) {
					free(m);
					m = NULL;
				}
				eng_repl_queue(e, j, s, !s->version, s->version ? NULL : m ? m : s->master);
				free(m);
			} else {
				eng_acks_flush(s);
				if (s->apply_wait) {
					eng_step_complete(e, j, s); /* unlocks */
					continue;
				}
				take_released(s, &rel, &n_rel);
			}
		}
		pthread_mutex_unlock(&s->mu);
		eng_serve_released(e, s, rel, n_rel);
	}
	j->n_primary = primaries;
	zs_info("job '%s': placement epoch %llu taken in place: %u shards here, %u primaries (%u promoted from replicas)",
		j->name, (unsigned long long)j->epoch, j->n_shards, primaries, promoted);
	return ZS_OK;
}

/* ------------------------------------------------------------ the acks */

bool eng_ack_later(struct eshard *s, struct zs_sop *op, uint64_t step)
{
	if (s->n_acks == s->cap_acks) {
		size_t nc = s->cap_acks ? s->cap_acks * 2 : 8;
		struct eack *g = realloc(s->acks, nc * sizeof *g);
		if (!g)
			return false;
		s->acks = g;
		s->cap_acks = nc;
	}
	s->acks[s->n_acks++] = (struct eack){op, step};
	return true;
}

void eng_acks_flush(struct eshard *s)
{
	uint64_t frontier = s->version - (s->repl_wait && s->version ? 1 : 0);
	size_t keep = 0;

	for (size_t i = 0; i < s->n_acks; i++)
		if (s->acks[i].step < frontier)
			zs_sop_done(s->acks[i].op);
		else
			s->acks[keep++] = s->acks[i];
	s->n_acks = keep;
}

void eng_acks_fail(struct eshard *s, enum zs_status st, const char *why)
{
	for (size_t i = 0; i < s->n_acks; i++)
		zs_sop_fail(s->acks[i].op, st, "%s", why);
	s->n_acks = 0;
}

/* ------------------------------------------------------------ receiving */

enum zs_status eng_repl_begin(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
			      const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	if (rank != ZS_RANK_PEER || !x->replica)
		return zs_fail(err, ZS_EINVAL,
			       "only a shard's primary forwards to its replicas, and only forwards");
	if (!s || x->offset != s->sh.offset || x->length != s->sh.length)
		return zs_fail(err, ZS_EINVAL,
			       "a forward covers exactly one shard: unit %u [%llu, +%llu) is not a shard of job '%s' here",
			       x->unit, (unsigned long long)x->offset,
			       (unsigned long long)x->length, j->name);
	if (!s->sh.copy)
		return zs_fail(err, ZS_EINVAL,
			       "unit '%s' shard %u is the primary here, not a replica: placements disagree",
			       eng_unit_name(j, x->unit), s->sh.index);
	if (x->dtype != ZS_F32 || x->partial)
		return zs_fail(err, ZS_EINVAL, "a forward is f32, whole");
	if (x->epoch != j->epoch) /* a deposed primary (cut off, then back) */
		return zs_fail(err, ZS_ESTATE,
			       "a forward of placement epoch %llu: this server holds epoch %llu of job '%s'",
			       (unsigned long long)x->epoch, (unsigned long long)j->epoch, j->name);
	pthread_mutex_lock(&s->mu);
	if (x->init)
		st = eng_init_begin(e, j, s, x, dst, err);
	else if (!s->ready)
		st = zs_fail(err, ZS_ESTATE, "unit '%s' shard %u has no parameters yet",
			     eng_unit_name(j, x->unit), s->sh.index);
	else if (x->step + 1 == s->version && !x->init) {
		/* sent again to a replica that applied it (a failover moved the
		 * primary while its acknowledgement was on the way): done */
		if (!s->landing && !(s->landing = zs_listener_alloc(e->l, s->sh.padded * 4)))
			st = zs_fail(err, ZS_ENOSPC, "no arena room to receive unit '%s'",
				     eng_unit_name(j, x->unit));
		else
			*dst = s->landing;
	} else if (x->step != s->version)
		st = zs_fail(err, ZS_ESTATE,
			     "a forward of step %llu for unit '%s' shard %u, which is at step %llu",
			     (unsigned long long)x->step, eng_unit_name(j, x->unit), s->sh.index,
			     (unsigned long long)s->version);
	else if (s->repl_landing)
		st = zs_fail(err, ZS_EEXIST, "unit '%s' shard %u is taking a forward already",
			     eng_unit_name(j, x->unit), s->sh.index);
	else {
		/* straight into the mean gradient: nothing else writes it here */
		*dst = s->acc;
		s->repl_landing = true;
	}
	pthread_mutex_unlock(&s->mu);
	return st;
}

void eng_repl_landed(struct engine *e, struct ejob *j, struct eshard *s, const struct zs_xfer *x,
		     struct zs_sop *op)
{
	struct held *rel = NULL;
	size_t n_rel = 0;

	pthread_mutex_lock(&s->mu);
	if (x->step != s->version || !s->repl_landing) { /* sent again: applied already */
		zs_sop_done(op);
		pthread_mutex_unlock(&s->mu);
		return;
	}
	s->repl_landing = false;
	if (s->gpu)
		eng_dev_acc_in(e, s);
	eng_apply(e, j, s, 1.0f, &rel, &n_rel);
	zs_sop_done(op); /* applied: now the primary may go on */
	pthread_mutex_unlock(&s->mu);
	eng_serve_released(e, s, rel, n_rel);
	eng_deliver_finished();
}
