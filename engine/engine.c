/*
 * engine.c - the shard step engine's life: jobs and their shards (arena
 * buffers, placement), stats, and the sweeper that fails gathers whose step
 * does not come within the step timeout (see engine.h, state.h).
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"
#include "engine/face.h"
#include "base/env.h"

static void job_free(struct engine *e, struct ejob *j)
{
	eng_repl_close(j);
	for (uint32_t i = 0; i < j->n_shards; i++) {
		eng_shard_release(e, j->shards[i]);
		free(j->shards[i]);
	}
	while (j->pend) {
		struct epending *p = j->pend;
		j->pend = p->next;
		p->done(p->ctx, j->name, p->id, p->step, NULL, 0, ZS_ECANCELED,
			"the job was dropped from this server");
		engine_snaps_free(p->snaps, p->n_shards);
		free(p->got);
		free(p);
	}
	free(j->shards);
	eng_ranks_free(j);
	eng_clip_forget(j);
	zs_job_spec_release(&j->spec);
	pthread_mutex_destroy(&j->cmu);
	pthread_mutex_destroy(&j->hps.mu);
	pthread_mutex_destroy(&j->wd.mu);
	eng_pins_free(j);
	free(j);
}

/* The shards of job that placement puts on this server, in j (with room
 * for one copy of each of the job's shards: a rebuild may add replicas
 * here in place); what was taken stays in j for job_free on failure. */
static enum zs_status take_shards(struct engine *e, struct ejob *j, const struct zs_job *job,
				  uint64_t server_id, struct zs_error *err)
{
	enum zs_status st;
	uint32_t n = 0;

	for (uint32_t i = 0; i < job->placement.n_shards; i++)
		n += job->placement.shards[i].server_id == server_id;
	j->cap_shards = j->spec.replicas > 1 ? zs_placement_groups(&job->placement) : n;
	if (j->cap_shards < n)
		j->cap_shards = n;
	j->shards = calloc(j->cap_shards ? j->cap_shards : 1, sizeof *j->shards);
	if (!j->shards)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < job->placement.n_shards; i++) {
		const struct zs_shard *sh = &job->placement.shards[i];
		struct eshard *s;
		if (sh->server_id != server_id)
			continue;
		if (sh->unit >= j->spec.layout.n_units)
			return zs_fail(err, ZS_EINVAL, "placement names unit %u of %u", sh->unit,
				       j->spec.layout.n_units);
		if (!(s = calloc(1, sizeof *s)))
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		s->idx = j->n_shards;
		j->shards[j->n_shards++] = s;
		if ((st = eng_shard_init(e, j, s, sh, err)))
			return st;
		j->n_primary += sh->copy == 0;
		eng_shard_peers(s, &job->placement);
	}
	return ZS_OK;
}

enum zs_status engine_add_job(struct engine *e, const struct zs_job *job,
			      uint64_t server_id, struct zs_error *err)
{
	struct ejob *j, *old;
	enum zs_status st;

	if (job->spec.optim.clip_norm > 0.0 && !e->norm.fn)
		return zs_fail(err, ZS_ESTATE,
			       "job '%s' clips gradients, and this server has no norm exchange",
			       job->spec.name);
	pthread_mutex_lock(&e->mu);
	for (old = e->jobs; old && strcmp(old->name, job->spec.name); old = old->next)
		;
	if (old && old->epoch == job->placement.epoch && old->incarnation == job->incarnation) {
		pthread_mutex_unlock(&e->mu);
		return ZS_OK;
	}
	if (old && old->incarnation == job->incarnation && job->spec.replicas > 1) {
		/* a failover's new epoch: the same shards here, other roles */
		atomic_fetch_add(&old->refs, 1);
		pthread_mutex_unlock(&e->mu);
		st = eng_reassign(e, old, job, server_id);
		eng_job_unref(e, old);
		if (!st)
			return ZS_OK;
	} else {
		pthread_mutex_unlock(&e->mu);
	}
	if (old)
		engine_remove_job(e, job->spec.name); /* a new epoch or job: start over */

	j = calloc(1, sizeof *j);
	if (!j)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	snprintf(j->name, sizeof j->name, "%s", job->spec.name);
	j->e = e;
	pthread_mutex_init(&j->cmu, NULL);
	pthread_mutex_init(&j->hps.mu, NULL);
	pthread_mutex_init(&j->wd.mu, NULL);
	pthread_mutex_init(&j->pins.mu, NULL);
	j->wd.cap = job->spec.world_size;
	j->epoch = job->placement.epoch;
	j->incarnation = job->incarnation;
	/* a job here already rises only by its restore task
	 * (engine_set_timeline): the record fetched at the task's start
	 * says the new timeline while the old run's exchanges may still
	 * send their norms */
	atomic_init(&j->timeline, job->timeline);
	memcpy(j->token, job->token, sizeof j->token);
	memcpy(j->reader_token, job->reader_token, sizeof j->reader_token);
	atomic_init(&j->refs, 1);
	j->spec = job->spec;
	j->spec.rank_hosts = NULL; /* the coordinator's placement used them */
	j->spec.n_rank_hosts = 0;
	if (zs_layout_copy(&j->spec.layout, &job->spec.layout)) {
		free(j);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	zs_layout_derive(&j->spec.layout);
	if ((st = take_shards(e, j, job, server_id, err)))
		goto fail;
	if (j->spec.replicas > 1) { /* its primaries forward (now or once promoted) */
		if (!e->rp.peer_fn) {
			st = zs_fail(err, ZS_ESTATE,
				     "job '%s' keeps replicas, and this server cannot reach its peers (no peer resolver)",
				     j->name);
			goto fail;
		}
		if ((st = eng_repl_start(e, err)))
			goto fail;
	}
	pthread_mutex_lock(&e->mu);
	j->hdl.cur = ++e->next_handle;
	j->next = e->jobs;
	e->jobs = j;
	pthread_mutex_unlock(&e->mu);
	if (j->n_shards > j->n_primary)
		zs_info("holding %u shards of job '%s' (epoch %llu), %u of them replicas", j->n_shards,
			j->name, (unsigned long long)j->epoch, j->n_shards - j->n_primary);
	else
		zs_info("holding %u shards of job '%s' (epoch %llu)", j->n_shards, j->name,
			(unsigned long long)j->epoch);
	return ZS_OK;
fail:
	job_free(e, j);
	return st;
}

bool engine_has_job(struct engine *e, const char *name, uint64_t epoch, uint64_t incarnation)
{
	bool has = false;
	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j; j = j->next)
		has |= !strcmp(j->name, name) && j->epoch == epoch && j->incarnation == incarnation;
	pthread_mutex_unlock(&e->mu);
	return has;
}

bool engine_shard_marks(struct engine *e, const char *name, const struct zs_shard *sh)
{
	bool marks = false;
	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j; j = j->next)
		if (!strcmp(j->name, name))
			marks = zs_shard_marks(&j->spec, sh);
	pthread_mutex_unlock(&e->mu);
	return marks;
}

void engine_remove_job(struct engine *e, const char *name)
{
	struct ejob **p, *j = NULL;

	pthread_mutex_lock(&e->mu);
	for (p = &e->jobs; *p; p = &(*p)->next)
		if (!strcmp((*p)->name, name)) {
			j = *p;
			*p = j->next;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	if (!j)
		return;
	zs_info("dropping job '%s'", name);
	atomic_store(&j->removed, true); /* its forwards stop (replica.c) */
	eng_job_unref(e, j);
}

uint32_t engine_job_names(struct engine *e, char (*names)[ZS_JOB_NAME_MAX], uint32_t max)
{
	uint32_t n = 0;
	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j && n < max; j = j->next)
		snprintf(names[n++], ZS_JOB_NAME_MAX, "%s", j->name);
	pthread_mutex_unlock(&e->mu);
	return n;
}

void engine_stats(struct engine *e, struct engine_stats *st)
{
	memset(st, 0, sizeof *st);
	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j; j = j->next) {
		st->jobs++;
		st->shards += j->n_shards;
		for (uint32_t i = 0; i < j->n_shards; i++) {
			pthread_mutex_lock(&j->shards[i]->mu);
			st->held += j->shards[i]->hold.n;
			st->tiered += j->shards[i]->tier.fd >= 0;
			st->on_device += j->shards[i]->dev.on;
			pthread_mutex_unlock(&j->shards[i]->mu);
		}
	}
	st->tier_read = atomic_load(&e->ctr.tier_read);
	st->device_bytes = e->gpu.resident;
	st->tier_written = atomic_load(&e->ctr.tier_written);
	st->bytes = atomic_load(&e->ctr.bytes);
	pthread_mutex_unlock(&e->mu);
	st->steps_applied = atomic_load(&e->ctr.steps);
	st->bytes_in = atomic_load(&e->ctr.bytes_in);
	st->bytes_out = atomic_load(&e->ctr.bytes_out);
	st->pipelined = atomic_load(&e->ctr.piped);
	st->repl_bytes = atomic_load(&e->ctr.repl_bytes);
	st->repl_steps = atomic_load(&e->ctr.repl_steps);
	st->reduce_seconds = (double)atomic_load(&e->ctr.red_ns) * 1e-9;
	st->optim_seconds = (double)atomic_load(&e->ctr.opt_ns) * 1e-9;
	pthread_mutex_lock(&e->land.mu);
	st->landing_bytes = e->land.busy;
	st->landing_kept = e->land.total;
	st->landing_waits = e->land.waits;
	pthread_mutex_unlock(&e->land.mu);
}

uint32_t engine_job_steps(struct engine *e, struct zs_job_step_stats *out, uint32_t max)
{
	uint32_t n = 0;

	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j && n < max; j = j->next) {
		pthread_mutex_lock(&j->cmu);
		if (j->rep.have_last && !j->removed) {
			out[n] = j->rep.last;
			snprintf(out[n].job, sizeof out[n].job, "%s", j->name);
			n++;
		}
		pthread_mutex_unlock(&j->cmu);
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* Says what a gather of step t held on s waits for (caller holds s->mu). */
static void waiting_for(struct ejob *j, struct eshard *s, uint64_t t, char *buf, size_t len)
{
	size_t n = 0;

	if (!eng_ready(s)) {
		zs_fmt(buf, len, "the initial parameters (rank 0 uploads them)");
		return;
	}
	if (s->phase == PH_CLIPPING) {
		zs_fmt(buf, len, "the gradient norms of the other servers (clipping)");
		return;
	}
	if (s->repl.wait && t == s->version) {
		if (s->repl.err)
			zs_fmt(buf, len, "its replicas: %s", s->repl.err);
		else
			zs_fmt(buf, len, "its replicas to apply step %llu (server %llu%s)",
			       (unsigned long long)t - 1, (unsigned long long)s->repl.peer[0],
			       s->repl.n_peers > 1 ? " and others" : "");
		return;
	}
	if (t > s->version + 1) {
		zs_fmt(buf, len, "step %llu, which is not reached (the shard is at step %llu)",
		       (unsigned long long)t - 1, (unsigned long long)s->version);
		return;
	}
	n += (size_t)snprintf(buf, len, "the push of step %llu from rank",
			      (unsigned long long)s->version);
	for (uint32_t r = 0, k = 0, w = eng_contributors(j, s->version); r < w && r < s->in.nr && n < len; r++)
		if (s->in.slot[r] != SLOT_FULL && (!j->spec.collective || r == s->sh.index))
			n += (size_t)snprintf(buf + n, len - n, "%s %u", k++ ? "," : "", r);
}

/* Fails gathers held past the step timeout, naming what they wait for. */
static void *sweeper_main(void *arg)
{
	struct engine *e = arg;

	while (!atomic_load(&e->stop)) {
		int64_t now = zs_now_ms();
		pthread_mutex_lock(&e->mu);
		for (struct ejob *j = e->jobs; j; j = j->next)
			eng_pins_sweep(j, now);
		for (struct ejob *j = e->jobs; j; j = j->next)
			for (uint32_t i = 0; i < j->n_shards; i++) {
				struct eshard *s = j->shards[i];
				size_t keep = 0;
				pthread_mutex_lock(&s->mu);
				for (size_t h = 0; h < s->hold.n; h++) {
					struct held *x = &s->hold.q[h];
					char why[256];
					if (now - x->since_ms < (int64_t)e->step_timeout_ms) {
						s->hold.q[keep++] = *x;
						continue;
					}
					waiting_for(j, s, x->x.step, why, sizeof why);
					zs_warn("job '%s' unit '%s': rank %u's gather of step %llu waited %lld ms for %s",
						j->name, eng_unit_name(j, x->x.unit), x->rank,
						(unsigned long long)x->x.step,
						(long long)(now - x->since_ms), why);
					zs_sop_fail(x->op, ZS_ETIMEDOUT,
						    "unit '%s' step %llu: waited %u ms for %s",
						    eng_unit_name(j, x->x.unit),
						    (unsigned long long)x->x.step,
						    e->step_timeout_ms, why);
				}
				s->hold.n = keep;
				pthread_mutex_unlock(&s->mu);
			}
		pthread_mutex_unlock(&e->mu);
		zs_sleep_ms(100, (volatile const int *)&e->stop);
	}
	return NULL;
}

enum zs_status engine_create(unsigned nthreads, uint32_t step_timeout_ms,
			     struct engine **out, struct zs_error *err)
{
	struct engine *e = calloc(1, sizeof *e);

	if (!e)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->land.mu, NULL);
	e->land.budget = 256u << 20;
	e->nthreads = nthreads ? nthreads : 1;
	e->step_timeout_ms = step_timeout_ms ? step_timeout_ms : 60000;
	e->job_release = job_free;
	e->rp.fault_one_copy = zs_fault("repl-one-copy");
	e->rp.fault_refuse = zs_fault("repl-refuse");
	atomic_init(&e->pin_arena, 0);
	e->target = (struct zs_target){.ctx = e, .hello = eng_t_hello, .tls_key = eng_t_tls_key,
				       .read = eng_t_read,
				       .write_begin = eng_t_write_begin,
				       .write_done = eng_t_write_done,
				       .write_abort = eng_t_write_abort,
				       .write_progress = eng_t_write_progress,
				       .hparams = eng_t_hparams, .world = eng_t_world,
				       .dev_ident = eng_t_dev_ident, .dev_map = eng_t_dev_map,
				       .dev_unmap = eng_t_dev_unmap, .bye = eng_t_bye,
				       .pin = eng_t_pin, .pins_in_arena = true};
	/* the pools, threadless until their first task: made here, never
	 * under a shard's lock (the sweeper takes e->mu, then shards') */
	e->norm.pool = zs_pool_new("zs-clip", 0);
	e->tier.pool = zs_pool_new("zs-tier", ENG_TIER_THREADS);
	if (!e->norm.pool || !e->tier.pool || pthread_create(&e->sweeper, NULL, sweeper_main, e)) {
		zs_pool_free(e->norm.pool);
		zs_pool_free(e->tier.pool);
		pthread_mutex_destroy(&e->mu);
		free(e);
		return zs_fail(err, ZS_ENOMEM, "cannot start the engine's timeout thread");
	}
	*out = e;
	return ZS_OK;
}


enum zs_status engine_set_tier(struct engine *e, const char *dir, uint64_t budget,
			       struct zs_error *err)
{
	enum zs_status st = zs_mkdir_p(dir, err);
	if (st)
		return st;
	snprintf(e->tier.dir, sizeof e->tier.dir, "%s", dir);
	e->tier.budget = budget;
	return ZS_OK;
}

void engine_set_norm_exchange(struct engine *e, engine_norm_fn fn, void *ctx)
{
	e->norm.fn = fn;
	e->norm.ctx = ctx;
}

void engine_set_peer_resolver(struct engine *e, engine_peer_fn fn, void *ctx)
{
	e->rp.peer_fn = fn;
	e->rp.peer_ctx = ctx;
}

void engine_set_stale_check(struct engine *e, engine_stale_fn fn, void *ctx)
{
	e->rp.stale_fn = fn;
	e->rp.stale_ctx = ctx;
}

void engine_set_listener(struct engine *e, struct zs_listener *l) { e->l = l; }

void engine_free(struct engine *e)
{
	if (!e)
		return;
	atomic_store(&e->stop, 1);
	pthread_join(e->sweeper, NULL);
	eng_clip_stop(e); /* an update it lets go forwards to replicas */
	eng_repl_stop(e); /* its queued forwards hold job references */
	zs_pool_free(e->tier.pool); /* no update runs any more */
	while (e->jobs)
		engine_remove_job(e, e->jobs->name);
	if (e->l)
		eng_land_free_all(e); /* unpinned before the device closes */
	pthread_mutex_destroy(&e->land.mu);
	if (e->gpu.dev)
		eng_dev_free(e);
	free(e->rp.seeded);
	zs_notes_free(&e->dr);
	pthread_mutex_destroy(&e->mu);
	free(e);
}
