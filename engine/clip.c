/*
 * clip.c - global-norm clipping on a server. A primary that has reduced
 * step t keeps its mean gradient (phase CLIPPING) until the coordinator has
 * the squared norm of every shard of the job for t; then it is applied,
 * scaled by the clipping coefficient of the total.
 *
 * The primaries here that reduced t go to the coordinator together, in one
 * report, once none of this server's primaries at t is still reducing: the
 * last to finish claims the others (under j->cmu) and queues the exchange.
 * A replica promoted during the step (a failover) reduces later, from the
 * pushes its trainers send again, and reports on its own; the coordinator
 * counts shards, not servers, so its total is the same either way. A
 * promoted copy one step behind (its lost primary's last forward never
 * came) reports that step, which the coordinator answers from the totals
 * it keeps.
 *
 * The exchanges answered and applied are kept (the last few, until a
 * restore): a coordinator that dies between its answers to the servers
 * leaves the unanswered ones sending their reports to the next, which
 * asks this server for its norms again (engine_norms_answered).
 *
 * Exchanges run on their own threads (a pool that grows to as many as have
 * waited at once, and stays), never on the connection or replicator thread
 * that finished a reduction: an exchange waits at the coordinator for
 * every shard, and a promoted replica's pushes may come over the very
 * connection whose thread would otherwise wait. Nor is the pool bounded:
 * an exchange queued behind busy ones could be the one they wait for
 * (another job's, through another server).
 */
#include "engine/jobs.h"
#include "engine/step.h"
#include "engine/store.h"

struct ctask {
	struct engine *e;
	struct ejob *j; /* a reference */
	uint64_t t;
	uint32_t n;
	struct eshard **set;
};

/* Keeps nv (n norms, step t of j, answered total) unless j was restored
 * since gen; returns what the caller frees (NULL when kept). */
static struct zs_shard_norm *answered_keep(struct ejob *j, uint64_t gen, uint64_t t, double total,
					   struct zs_shard_norm *nv, uint32_t n)
{
	pthread_mutex_lock(&j->cmu);
	nv = eng_ans_keep(&j->answered, gen, t, total, nv, n); /* engine/answered.c */
	pthread_mutex_unlock(&j->cmu);
	return nv;
}

void eng_clip_forget(struct ejob *j)
{
	pthread_mutex_lock(&j->cmu);
	eng_ans_forget(&j->answered);
	pthread_mutex_unlock(&j->cmu);
}

enum zs_status engine_norms_answered(struct engine *e, const char *job, uint64_t step,
				     struct zs_shard_norm **norms, uint32_t *n, double *total)
{
	struct ejob *j = eng_job_by_name(e, job);
	enum zs_status st;

	*norms = NULL;
	*n = 0;
	if (!j)
		return ZS_ENOTFOUND;
	pthread_mutex_lock(&j->cmu);
	st = eng_ans_of(&j->answered, step, norms, n, total);
	pthread_mutex_unlock(&j->cmu);
	eng_job_unref(e, j);
	return st;
}

/*
 * Exchanges the norms of set (primaries here that reduced step t) and
 * applies them; a failed exchange fails the gathers waiting for step t + 1
 * with its reason.
 */
static void clip_and_apply(struct engine *e, struct ejob *j, uint64_t t, struct eshard **set,
			   uint32_t n)
{
	struct zs_shard_norm *nv = malloc((n ? n : 1) * sizeof *nv);
	struct zs_error err = {0};
	double total = 0.0, clip;
	enum zs_status st;
	bool applied = false;
	uint64_t gen;
	float coef;

	pthread_mutex_lock(&j->cmu);
	gen = j->answered.gen; /* a restore meanwhile: the answer is not kept */
	pthread_mutex_unlock(&j->cmu);
	if (!nv) {
		st = zs_fail(&err, ZS_ENOMEM, "out of memory");
	} else {
		for (uint32_t i = 0; i < n; i++)
			nv[i] = (struct zs_shard_norm){set[i]->sh.unit, set[i]->sh.index,
						       set[i]->clip.sumsq};
		st = e->norm.fn(e->norm.ctx, j->name, atomic_load(&j->timeline), t, nv, n, &total,
				&err);
	}
	eng_hp_steps(j, t, t + 1, NULL, &clip);
	coef = st ? 1.0f : zs_clip_coef(total, clip);
	for (uint32_t i = 0; i < n; i++) {
		struct eshard *s = set[i];
		struct eng_fx fx = {0};
		pthread_mutex_lock(&s->mu);
		if (st) {
			/* the step cannot finish: say why to whoever waits on it;
			 * its gradient goes (a restore need not wait for it) */
			for (size_t h = 0; h < s->hold.n; h++)
				zs_sop_fail(s->hold.q[h].op, st, "step %llu of job '%s' cannot finish: %s",
					    (unsigned long long)t, j->name, err.msg);
			s->hold.n = 0;
			if (s->version == t && s->phase == PH_CLIPPING)
				eng_phase_go(s, EV_FAILED);
		} else if (s->phase == PH_CLIPPING && s->version == t) { /* not restored meanwhile */
			eng_apply(e, j, s, coef, &fx);
			applied = true;
		}
		pthread_mutex_lock(&j->cmu);
		s->clip.at = 0;
		s->clip.claimed = false;
		pthread_mutex_unlock(&j->cmu);
		pthread_mutex_unlock(&s->mu);
		eng_fx_release(e, s, &fx); /* eng_apply sets no exchange */
	}
	if (applied)
		nv = answered_keep(j, gen, t, total, nv, n);
	free(nv);
	if (st)
		zs_error("job '%s' step %llu: %s", j->name, (unsigned long long)t, err.msg);
}

static void clip_run(void *arg)
{
	struct ctask *c = arg;

	clip_and_apply(c->e, c->j, c->t, c->set, c->n);
	eng_job_unref(c->e, c->j);
	free(c->set);
	free(c);
}

/* Whether a primary of j here other than s is at step t and not reduced
 * yet (that one claims s when it is). */
static bool others_reducing(struct ejob *j, struct eshard *s, uint64_t t)
{
	uint32_t ns = atomic_load(&j->n_shards);
	bool open = false;

	for (uint32_t k = 0; k < ns && !open; k++) {
		struct eshard *o = j->shards[k];
		if (o == s)
			continue;
		pthread_mutex_lock(&o->mu);
		open = !o->sh.copy && eng_ready(o) && o->version == t && o->phase != PH_CLIPPING;
		if (open)
			zs_debug("job '%s' step %llu: unit %u shard %u reduced; its norm waits for unit %u shard %u here",
				 j->name, (unsigned long long)t, s->sh.unit, s->sh.index, o->sh.unit,
				 o->sh.index);
		pthread_mutex_unlock(&o->mu);
	}
	return open;
}

/* The squared norm of the step's mean gradient over the shard's trained
 * elements: a frozen tensor's count for nothing (its "gradient" is whatever
 * a trainer sent; torch's clip_grad_norm_ sees none). Summed by zs_sumsq
 * over each run of trained elements (adjacent segments of any group), in
 * order: a shard without frozen elements is one run, as before. */
static double trained_sumsq(struct engine *e, struct eshard *s)
{
	double sum = 0;

	if (s->dev.on)
		eng_dev_acc_out(e, s);
	if (!s->lay.frozen)
		return zs_sumsq(s->acc, s->sh.length);
	for (uint32_t k = 0; k < s->lay.n_segs;) {
		uint32_t m = k;
		if (s->lay.segs[k].frozen) {
			k++;
			continue;
		}
		while (m + 1 < s->lay.n_segs && !s->lay.segs[m + 1].frozen)
			m++;
		sum += zs_sumsq(s->acc + s->lay.segs[k].a, s->lay.segs[m].b - s->lay.segs[k].a);
		k = m + 1;
	}
	return sum;
}

void eng_clip_reduced(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx)
{
	if (!eng_phase_go(s, EV_REDUCED))
		return;
	s->clip.sumsq = trained_sumsq(e, s);
	pthread_mutex_lock(&j->cmu);
	s->clip.at = s->version + 1;
	pthread_mutex_unlock(&j->cmu);
	fx->clip = true;
	fx->clip_t = s->version;
}

void eng_clip_exchange(struct engine *e, struct ejob *j, struct eshard *s, uint64_t t)
{
	struct ctask *c;
	uint32_t ns;

	/* each reduced shard looks after marking itself, so the last of them
	 * to look sees every other one reduced */
	if (others_reducing(j, s, t))
		return;
	c = calloc(1, sizeof *c);
	ns = atomic_load(&j->n_shards);
	if (c)
		c->set = malloc(ns * sizeof *c->set);
	pthread_mutex_lock(&j->cmu);
	for (uint32_t k = 0; c && c->set && k < ns; k++) {
		struct eshard *o = j->shards[k];
		if (o->clip.at == t + 1 && !o->clip.claimed) {
			o->clip.claimed = true;
			c->set[c->n++] = o;
		}
	}
	pthread_mutex_unlock(&j->cmu);
	if (!c || !c->set || !c->n) {
		if (c && !c->set) /* the shards wait: held gathers time out */
			zs_error("job '%s' step %llu: out of memory for the norm exchange",
				 j->name, (unsigned long long)t);
		if (c)
			free(c->set);
		free(c);
		return;
	}
	zs_debug("job '%s' step %llu: the norms of %u shards here go to the coordinator", j->name,
		 (unsigned long long)t, c->n);
	c->e = e;
	c->j = j;
	c->t = t;
	atomic_fetch_add(&j->refs, 1);
	if (!zs_pool_submit(e->norm.pool, clip_run, c)) {
		zs_error("job '%s' step %llu: cannot start a thread for the norm exchange; it runs here",
			 j->name, (unsigned long long)t);
		clip_and_apply(e, j, t, c->set, c->n);
		eng_job_unref(e, j);
		free(c->set);
		free(c);
	}
}

void eng_clip_stop(struct engine *e)
{
	zs_pool_free(e->norm.pool); /* the queue runs empty first */
	e->norm.pool = NULL;
}
