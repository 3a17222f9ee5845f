/*
 * snapshot.c - checkpoints on the engine's side: each shard captured as it
 * reaches the checkpoint's step (training goes on), the finished snapshot
 * handed to the writer, and restore from a checkpoint's records.
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"

/* ------------------------------------------------------------ checkpoints */

void engine_snaps_free(struct engine_snap *s, uint32_t n)
{
	for (uint32_t i = 0; s && i < n; i++) {
		free(s[i].master);
		free(s[i].s0);
		free(s[i].s1);
	}
	free(s);
}

/* The job (*j, referenced) and a zeroed snapshot per shard of it here
 * (*v), for a restore or a capture. */
static enum zs_status job_with_snaps(struct engine *e, const char *job, struct ejob **j,
				     struct engine_snap **v, uint32_t *n, struct zs_error *err)
{
	if (!(*j = eng_job_by_name(e, job)))
		return zs_fail(err, ZS_ENOTFOUND, "this server holds no shard of job '%s'", job);
	*n = (*j)->n_shards; /* those here now (a rebuild may add more) */
	*v = calloc(*n ? *n : 1, sizeof **v);
	if (!*v) {
		eng_job_unref(e, *j);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	return ZS_OK;
}

void engine_cancel_snapshot(struct engine *e, const char *job, uint64_t id)
{
	struct ejob *j = eng_job_by_name(e, job);
	struct epending *gone = NULL;

	if (!j)
		return;
	pthread_mutex_lock(&j->cmu);
	for (struct epending **pp = &j->pend; *pp;) {
		struct epending *p = *pp;
		if (p->id != id) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		p->next = gone;
		gone = p;
	}
	pthread_mutex_unlock(&j->cmu);
	while (gone) {
		struct epending *p = gone;
		gone = p->next;
		engine_snaps_free(p->snaps, p->n_shards);
		p->done(p->ctx, p->job, p->id, p->step, NULL, p->n_shards, ZS_ECANCELED,
			"the checkpoint was deleted");
		free(p->got);
		free(p);
	}
	eng_job_unref(e, j);
}

enum zs_status engine_snapshot(struct engine *e, const char *job, uint64_t id,
			       uint64_t step, engine_snap_done done, void *ctx,
			       struct zs_error *err)
{
	struct ejob *j = eng_job_by_name(e, job);
	struct epending *p, *whole = NULL;
	enum zs_status st = ZS_OK;
	uint32_t n;

	if (!j)
		return zs_fail(err, ZS_ENOTFOUND, "this server holds no shard of job '%s'", job);
	p = calloc(1, sizeof *p);
	if (p) {
		p->n_shards = j->n_shards; /* those here now */
		p->got = calloc(p->n_shards ? p->n_shards : 1, sizeof *p->got);
		p->snaps = calloc(p->n_shards ? p->n_shards : 1, sizeof *p->snaps);
	}
	if (!p || !p->got || !p->snaps) {
		if (p) {
			free(p->got);
			free(p->snaps);
		}
		free(p);
		eng_job_unref(e, j);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	snprintf(p->job, sizeof p->job, "%s", j->name);
	p->want = 0; /* counted with the checks below: replicas take none */
	p->id = id;
	p->step = step;
	p->done = done;
	p->ctx = ctx;
	/* check every shard before registering: past the step or empty is final */
	for (uint32_t k = 0; k < p->n_shards && !st; k++) {
		struct eshard *s = j->shards[k];
		pthread_mutex_lock(&s->mu);
		/* every copy that has its state writes records: a restore reads
		 * them from whichever copy is there (a new copy not seeded yet
		 * is left out) */
		bool empty_copy = s->sh.copy && !eng_ready(s);
		p->got[k] = empty_copy; /* not waited for */
		p->want += !empty_copy;
		if (empty_copy)
			;
		else if (!eng_ready(s))
			st = zs_fail(err, ZS_ESTATE, "unit '%s' has no parameters to checkpoint yet",
				     eng_unit_name(j, s->sh.unit));
		else if (s->version > step)
			st = zs_fail(err, ZS_ESTATE,
				     "unit '%s' is at step %llu: step %llu can no longer be checkpointed",
				     eng_unit_name(j, s->sh.unit), (unsigned long long)s->version,
				     (unsigned long long)step);
		pthread_mutex_unlock(&s->mu);
	}
	if (st) {
		free(p->got);
		free(p->snaps);
		free(p);
		eng_job_unref(e, j);
		return st;
	}
	n = p->n_shards; /* once registered, p is another thread's to finish */
	pthread_mutex_lock(&j->cmu);
	p->next = j->pend;
	j->pend = p;
	eng_take_whole(j, &whole); /* nothing to wait for here (new copies not seeded yet) */
	pthread_mutex_unlock(&j->cmu);
	/* capture the shards already at step (the rest on their update) */
	for (uint32_t k = 0; k < n; k++) {
		struct eshard *s = j->shards[k];
		pthread_mutex_lock(&s->mu);
		if (s->version == step)
			eng_capture_due(j, s, &whole);
		pthread_mutex_unlock(&s->mu);
	}
	eng_deliver(whole);
	eng_job_unref(e, j);
	return ZS_OK;
}

/* Retires j's handle: the connections of the timeline a restore ends get
 * ZS_ERESUME from now on; new HELLOs get the new handle. */
static void retire_handle(struct engine *e, struct ejob *j)
{
	pthread_mutex_lock(&e->mu);
	j->hdl.retired[j->hdl.n_retired++ % 16] = j->hdl.cur;
	j->hdl.cur = ++e->next_handle;
	pthread_mutex_unlock(&e->mu);
	/* the new timeline's trainers set their own hyperparameters again */
	pthread_mutex_lock(&j->hps.mu);
	j->hps.n = 0;
	pthread_mutex_unlock(&j->hps.mu);
	eng_worlds_clear(j); /* and say their world again */
}

/* A push of the ended timeline still landing after this long is one whose
 * trainer hangs (stopped, cut off): its connections are cut. */
#define STUCK_MS 2000

/* Waits (within the step timeout) until nothing of j is moving: no push or
 * initial upload landing, no norm exchange under way (one that waits for
 * its turn, other shards here not reduced yet, never comes: the restore
 * drops it). */
static enum zs_status wait_quiet(struct engine *e, struct ejob *j, struct zs_error *err)
{
	int64_t start = zs_now_ms(), deadline = start + e->step_timeout_ms;
	bool cut = false;

	for (;;) {
		const char *what = NULL;
		struct eshard *busy = NULL;
		for (uint32_t k = 0; k < j->n_shards && !busy; k++) {
			struct eshard *s = j->shards[k];
			bool landing, exchanging;
			pthread_mutex_lock(&s->mu);
			landing = s->open.init_landing || s->in.landing || s->repl.landing;
			pthread_mutex_lock(&j->cmu);
			exchanging = s->phase == PH_CLIPPING && s->clip.claimed;
			pthread_mutex_unlock(&j->cmu);
			if (landing || exchanging) {
				busy = s;
				what = landing ? "receiving a push of" : "applying";
			}
			pthread_mutex_unlock(&s->mu);
		}
		if (!busy)
			return ZS_OK;
		if (!cut && e->l && zs_now_ms() - start > STUCK_MS) {
			uint32_t old[16];
			unsigned n;
			pthread_mutex_lock(&e->mu);
			n = j->hdl.n_retired < 16 ? j->hdl.n_retired : 16;
			memcpy(old, j->hdl.retired, n * sizeof *old);
			pthread_mutex_unlock(&e->mu);
			zs_warn("job '%s': unit '%s' is still %s step %llu from before the restore: cutting the old connections",
				j->name, eng_unit_name(j, busy->sh.unit), what,
				(unsigned long long)busy->version);
			for (unsigned i = 0; i < n; i++)
				zs_listener_end_job(e->l, old[i]);
			cut = true;
		}
		if (zs_now_ms() > deadline)
			return zs_fail(err, ZS_ETIMEDOUT,
				       "unit '%s' was still %s step %llu after %u ms",
				       eng_unit_name(j, busy->sh.unit), what,
				       (unsigned long long)busy->version, e->step_timeout_ms);
		zs_sleep_ms(5, NULL);
	}
}

/* Every shard's state of the checkpoint (load; zeros for a reset) into
 * tmp, all of one step, *at, before anything changes. */
static enum zs_status restore_load(struct ejob *j, struct engine_snap *tmp, uint32_t ns,
				   engine_loader load, void *ctx, uint64_t *at,
				   struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	for (uint32_t k = 0; k < ns && !st; k++) {
		/* a reset writes zeros: no parameters, and optimizer state as a
		 * fresh job has it (what the lost timeline's updates left goes) */
		if (!eng_snap_alloc(j->shards[k], 0, true, &tmp[k])) {
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
			break;
		}
		if (load)
			st = load(ctx, &tmp[k], tmp[k].master, tmp[k].s0, tmp[k].s1, &tmp[k].step,
				  err);
		if (!st && k > 0 && tmp[k].step != *at)
			st = zs_fail(err, ZS_EIO, "the checkpoint's shards disagree on the step (%llu, %llu)",
				     (unsigned long long)*at, (unsigned long long)tmp[k].step);
		*at = tmp[k].step;
	}
	return st;
}

enum zs_status engine_restore(struct engine *e, const char *job, engine_loader load,
			      void *ctx, bool rollback, uint64_t timeline, uint64_t *step,
			      struct zs_error *err)
{
	struct engine_snap *tmp;
	struct ejob *j;
	uint32_t ns = 0;
	enum zs_status st = job_with_snaps(e, job, &j, &tmp, &ns, err);
	uint64_t at = 0;

	if (st)
		return st;
	/* load and check everything first: nothing half-applied */
	st = restore_load(j, tmp, ns, load, ctx, &at, err);
	/*
	 * The restore ends the job's timeline: the trainers' connections of it
	 * get ZS_ERESUME from here on (their gathers held now too), a push
	 * still landing is waited for and discarded, and so is a step some
	 * ranks pushed and others never will (a trainer died in it).
	 */
	if (!st) /* and again below: a pin taken meanwhile would mix the two */
		eng_pins_drop(j, "its versions pinned here were dropped by a restore");
	if (!st && rollback)
		retire_handle(e, j);
	if (!st) /* the steps answered before are not this state's */
		eng_clip_forget(j);
	if (!st)
		st = wait_quiet(e, j, err);
	for (uint32_t k = 0; k < ns && !st; k++) {
		struct eshard *s = j->shards[k];
		struct held *gone = NULL, *rel = NULL;
		size_t n = s->sh.length, n_gone = 0, n_rel = 0;
		pthread_mutex_lock(&s->mu);
		if (s->hold.n && !rollback && !(rel = malloc(s->hold.n * sizeof *rel))) {
			pthread_mutex_unlock(&s->mu);
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
			break;
		}
		if (eng_arrays_io(e, s, true, tmp[k].master, tmp[k].s0, tmp[k].s1))
			zs_error("restore: cannot write unit %u shard %u to %s", s->sh.unit,
				 s->sh.index, s->tier.path);
		if (s->copy != s->master)
			zs_convert_from_f32(s->copy, s->dt, tmp[k].master, n);
		if (s->in.full)
			zs_info("job '%s': unit '%s' shard %u: the half-finished step %llu (%u of %u ranks pushed) is discarded",
				j->name, eng_unit_name(j, s->sh.unit), s->sh.index,
				(unsigned long long)s->version, s->in.full, eng_world_at(j, s->version));
		s->version = at;
		/* a reset waits for new initial parameters */
		eng_phase_go(s, load ? EV_RESTORE : EV_RESET);
		s->state_in = load ? 0xff : 0; /* and a new imported state */
		eng_step_discard(e, j, s); /* the discarded step's pushes */
		/* every copy is restored to the same state: nothing to forward,
		 * nor a seed read before (engine/forward.c moot) */
		s->repl.gen++;
		s->repl.restores++;
		if (s->repl.run < timeline)
			s->repl.run = timeline;
		s->repl.wait = false;
		eng_acks_fail(s, rollback ? ZS_ERESUME : ZS_ECANCELED,
			      "the job was restored before this push's step was on every copy");
		free(s->repl.err);
		s->repl.err = NULL;
		if (s->hold.n && (gone = malloc(s->hold.n * sizeof *gone))) {
			size_t keep = 0;
			for (size_t h = 0; h < s->hold.n; h++) {
				if (rollback) /* every one: they belong to the old timeline */
					gone[n_gone++] = s->hold.q[h];
				else if (s->hold.q[h].x.step == at && eng_ready(s))
					rel[n_rel++] = s->hold.q[h];
				else
					s->hold.q[keep++] = s->hold.q[h];
			}
			s->hold.n = keep;
		}
		pthread_mutex_unlock(&s->mu);
		eng_serve_released(e, s, rel, n_rel);
		rel = NULL;
		for (size_t h = 0; h < n_gone; h++)
			zs_sop_fail(gone[h].op, ZS_ERESUME,
				    "job '%s' was rolled back to step %llu while this gather of step %llu waited: resume",
				    j->name, (unsigned long long)at,
				    (unsigned long long)gone[h].x.step);
		free(gone);
	}
	engine_snaps_free(tmp, ns);
	if (!st) {
		char why[128];
		snprintf(why, sizeof why, "its versions pinned here were dropped by a restore %s step %llu",
			 load ? "to" : "that reset its parameters at", (unsigned long long)at);
		eng_pins_drop(j, why);
		*step = at;
		if (load)
			zs_info("job '%s': %u shards restored at step %llu", j->name, ns,
				(unsigned long long)at);
		else
			zs_info("job '%s': %u shards reset: no parameters until rank 0 uploads them",
				j->name, ns);
	}
	eng_job_unref(e, j);
	return st;
}

enum zs_status engine_capture_now(struct engine *e, const char *job, struct engine_snap **snaps,
				  uint32_t *n, uint64_t *step, struct zs_error *err)
{
	struct engine_snap *v;
	struct ejob *j;
	uint32_t ns = 0;
	enum zs_status st = job_with_snaps(e, job, &j, &v, &ns, err);

	if (st)
		return st;
	for (uint32_t k = 0; k < ns && !st; k++) {
		struct eshard *s = j->shards[k];
		bool busy;
		pthread_mutex_lock(&s->mu);
		busy = s->in.full || s->in.terms || s->in.landing ||
		       s->phase == PH_CLIPPING || s->open.init_landing;
		if (!eng_ready(s))
			st = zs_fail(err, ZS_ESTATE, "unit '%s' has no parameters",
				     eng_unit_name(j, s->sh.unit));
		else if (busy)
			st = zs_fail(err, ZS_ESTATE, "unit '%s' is in the middle of step %llu",
				     eng_unit_name(j, s->sh.unit), (unsigned long long)s->version);
		else if (k > 0 && s->version != v[0].step)
			st = zs_fail(err, ZS_ESTATE, "its units are at different steps (%llu, %llu)",
				     (unsigned long long)v[0].step, (unsigned long long)s->version);
		if (!st)
			st = eng_snap_read(j, s, &v[k], err);
		pthread_mutex_unlock(&s->mu);
	}
	if (st) {
		engine_snaps_free(v, ns);
	} else {
		*snaps = v;
		*n = ns;
		*step = ns ? v[0].step : 0;
	}
	eng_job_unref(e, j);
	return st;
}

/* j's timeline becomes timeline when that is later (never back). */
static void eng_timeline_raise(struct ejob *j, uint64_t timeline)
{
	uint_fast64_t at = atomic_load(&j->timeline);

	while (at < timeline && !atomic_compare_exchange_weak(&j->timeline, &at, timeline))
		;
}

/* A restore task told this server the job's timeline from now on: raised,
 * and a pin taken since the restore ended under the old one goes. */
void engine_set_timeline(struct engine *e, const char *job, uint64_t timeline)
{
	struct ejob *j = eng_job_by_name(e, job);

	if (j) {
		eng_timeline_raise(j, timeline);
		eng_pins_drop_before(j, atomic_load(&j->timeline) + 1,
				     "its versions pinned here were of the run a restore ended");
		eng_job_unref(e, j);
	}
}
