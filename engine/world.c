/*
 * world.c - the world size by step on a shard server (zshardctl job
 * resize): the changes the trainers say on each data connection (a WORLD
 * frame, after their HELLO and before the first push of a step a change
 * names), the pushes each shard's step waits for (eng_contributors) and
 * the per-rank arrays grown for a larger world.
 *
 * Every rank meets the boundary a resize names with the coordinator's
 * answer naming it (coord/resize.c), and says it on every connection
 * before its pushes of that step: so a step's world is here before any of
 * its pushes counts, whatever the order of arrival. A change that would
 * alter the world of a step whose pushes are in already is refused (a
 * rank that did not know: its pushes would have gone into the wrong
 * mean), as is one that says another world for a step than one here.
 */
#include "engine/jobs.h"

uint32_t eng_world_at(struct ejob *j, uint64_t step)
{
	uint32_t n;

	if (j->spec.collective)
		return j->spec.world_size;
	pthread_mutex_lock(&j->wd.mu);
	n = zs_world_at(&j->spec, &j->wd.w, step);
	pthread_mutex_unlock(&j->wd.mu);
	return n;
}

enum zs_status eng_ranks_ensure(struct ejob *j, uint32_t n, struct zs_error *err)
{
	uint32_t cap;

	pthread_mutex_lock(&j->wd.mu);
	cap = j->wd.cap;
	pthread_mutex_unlock(&j->wd.mu);
	if (n <= cap)
		return ZS_OK;
	for (uint32_t i = 0; i < atomic_load(&j->n_shards); i++) {
		struct eshard *s = j->shards[i];
		pthread_mutex_lock(&s->mu);
		if (eng_in_grow(&s->in, n)) {
			pthread_mutex_unlock(&s->mu);
			return zs_fail(err, ZS_ENOMEM, "out of memory for %u ranks", n);
		}
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&j->wd.mu);
	if (j->wd.cap < n)
		j->wd.cap = n;
	pthread_mutex_unlock(&j->wd.mu);
	return ZS_OK;
}

/* Whether merging in into w keeps every step's world where both say one
 * (a change at the same step with another world: false, *at says). */
static bool merge(struct zs_worlds *w, const struct zs_worlds *in, uint64_t *at)
{
	struct zs_worlds m = *w;

	for (uint32_t i = 0; i < in->n; i++) {
		uint32_t k;
		for (k = 0; k < m.n && m.v[k].step < in->v[i].step; k++)
			;
		if (k < m.n && m.v[k].step == in->v[i].step) {
			if (m.v[k].world != in->v[i].world) {
				*at = in->v[i].step;
				return false;
			}
			continue;
		}
		if (m.n == ZS_WORLD_HIST) { /* the oldest goes */
			if (k == 0)
				continue; /* older than all kept: no step here reads it */
			memmove(m.v, m.v + 1, (ZS_WORLD_HIST - 1) * sizeof m.v[0]);
			m.n--;
			k--;
		}
		memmove(m.v + k + 1, m.v + k, (m.n - k) * sizeof m.v[0]);
		m.v[k] = in->v[i];
		m.n++;
	}
	*w = m;
	return true;
}

enum zs_status eng_t_world(void *ctx, uint32_t job, uint32_t rank, const uint8_t *payload,
			   size_t len, struct zs_error *err)
{
	struct engine *e = ctx;
	struct zs_worlds in, now;
	enum zs_status st;
	uint64_t at = 0;
	struct ejob *j = eng_job_or_fail(e, job, err);

	if (!j)
		return err->code;
	if ((st = zs_worlds_decode(payload, len, &in, err)))
		goto out;
	if (j->spec.collective) {
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s' is collective: its world size is its spec's (%u)", j->name,
			     j->spec.world_size);
		goto out;
	}
	if ((st = eng_ranks_ensure(j, zs_world_max(&j->spec, &in), err)))
		goto out;
	pthread_mutex_lock(&j->wd.mu);
	now = j->wd.w;
	if (!merge(&now, &in, &at)) {
		uint32_t had = zs_world_at(&j->spec, &j->wd.w, at);
		pthread_mutex_unlock(&j->wd.mu);
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s': rank %u says the world size from step %llu is %u; another rank said %u",
			     j->name, rank, (unsigned long long)at, zs_world_at(&j->spec, &in, at),
			     had);
		goto out;
	}
	pthread_mutex_unlock(&j->wd.mu);
	/* no shard's open step may have pushes in under another world */
	for (uint32_t i = 0; i < atomic_load(&j->n_shards) && !st; i++) {
		struct eshard *s = j->shards[i];
		pthread_mutex_lock(&s->mu);
		uint32_t old = eng_world_at(j, s->version), neu = zs_world_at(&j->spec, &now, s->version);
		if (old != neu && !s->sh.copy && (s->in.full || s->in.terms || s->in.landing))
			st = zs_fail(err, ZS_ESTATE,
				     "job '%s': rank %u says step %llu's world size is %u, and unit '%s' has pushes of it in already for a world of %u (a rank began it without knowing of the resize)",
				     j->name, rank, (unsigned long long)s->version, neu,
				     eng_unit_name(j, s->sh.unit), old);
		pthread_mutex_unlock(&s->mu);
	}
	if (!st) {
		pthread_mutex_lock(&j->wd.mu);
		if (!merge(&j->wd.w, &in, &at)) /* another rank's meanwhile */
			st = zs_fail(err, ZS_EINVAL,
				     "job '%s': rank %u's world size from step %llu differs from another rank's",
				     j->name, rank, (unsigned long long)at);
		pthread_mutex_unlock(&j->wd.mu);
	}
out:
	eng_job_unref(e, j);
	return st;
}

void eng_worlds_clear(struct ejob *j)
{
	pthread_mutex_lock(&j->wd.mu);
	j->wd.w.n = 0;
	pthread_mutex_unlock(&j->wd.mu);
}

struct eng_push eng_push_of(const struct zs_xfer *x, uint32_t rank)
{
	return (struct eng_push){.step = x->step, .rank = rank, .micro = x->micro,
				 .partial = x->partial, .redo = x->redo};
}

struct eng_at eng_at_of(struct ejob *j, const struct eshard *s, const struct zs_xfer *x)
{
	/* one look at the world (under its lock) for a push of the open step */
	uint32_t w = eng_world_at(j, s->version);

	return (struct eng_at){.version = s->version, .replicas = j->spec.replicas,
			       .contributors = j->spec.collective ? 1 : w,
			       .world = x->step == s->version ? w : eng_world_at(j, x->step),
			       .unit = eng_unit_name(j, x->unit)};
}
