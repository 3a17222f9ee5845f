/*
 * hparams.c - the optimizer's hyperparameters on a shard server: the
 * tables trainers send (a learning-rate schedule, per-group values) kept by
 * step, and the update each shard's tensors get at a step.
 *
 * Every rank sends the table it sets for a step before its pushes of that
 * step, on each connection, and a step is applied only once every rank
 * pushed: so the table of step t is here before step t is applied, whatever
 * the order of arrival, and the update is the same bits. Ranks that send a
 * table for the same step must send the same values; a rank that sends
 * none uses the others'. Without any table a step uses the spec's values.
 */
#include "engine/jobs.h"

#include "model/hptables.h"

/* The slowest shard's step here (tables before it are no longer read,
 * except the one in force there). */
static uint64_t slowest(struct ejob *j)
{
	uint64_t v = UINT64_MAX;

	for (uint32_t i = 0; i < j->n_shards; i++) {
		pthread_mutex_lock(&j->shards[i]->mu);
		/* a new copy not seeded yet reads no table of its own */
		if (j->shards[i]->version < v && (eng_ready(j->shards[i]) || !j->shards[i]->sh.copy))
			v = j->shards[i]->version;
		pthread_mutex_unlock(&j->shards[i]->mu);
	}
	return v;
}

/* Names the first value where a and b differ, into buf. */
static void first_difference(const struct zs_hp_table *a, const struct zs_hp_table *b,
			     char *buf, size_t len)
{
	static const char *const names[] = {"lr", "weight_decay", "beta1", "beta2", "eps",
					    "momentum"};
	if (memcmp(&a->clip_norm, &b->clip_norm, sizeof a->clip_norm)) {
		snprintf(buf, len, "clip_norm %.17g, not %.17g", a->clip_norm, b->clip_norm);
		return;
	}
	for (uint32_t g = 0; g < a->n_groups; g++) {
		const double *x = &a->g[g].lr, *y = &b->g[g].lr;
		for (int k = 0; k < 6; k++)
			if (memcmp(&x[k], &y[k], sizeof x[k])) {
				snprintf(buf, len, "group %u %s %.17g, not %.17g", g, names[k], x[k],
					 y[k]);
				return;
			}
	}
	snprintf(buf, len, "?");
}

enum zs_status eng_t_hparams(void *ctx, uint32_t job, uint32_t rank, uint64_t step,
			     const uint8_t *payload, size_t len, struct zs_error *err)
{
	struct engine *e = ctx;
	struct zs_hp_table t;
	enum zs_status st;
	uint64_t low;
	struct ejob *j;
	bool stale;
	uint32_t i;

	j = eng_job_by_handle(e, job, &stale);
	if (!j)
		return zs_fail(err, ZS_ENOTFOUND, "no job has handle %u here", job);
	if (stale) {
		eng_job_unref(e, j);
		return zs_fail(err, ZS_ERESUME, "job '%s' was restored: resume", j->name);
	}
	if ((st = zs_hp_decode(payload, len, &t, err)) || (st = zs_hp_table_check(&j->spec, &t, err))) {
		eng_job_unref(e, j);
		return st;
	}
	t.step = step;
	low = slowest(j);
	pthread_mutex_lock(&j->hps.mu);
	switch (zs_hp_list_put(j->hps.t, &j->hps.n, EJOB_HP_KEEP, &t, low, &i)) {
	case ZS_HP_PUT_DIFFERS: {
		char what[160];
		first_difference(&t, &j->hps.t[i], what, sizeof what);
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s': rank %u's hyperparameters for step %llu differ from "
			     "another rank's (%s): every rank must set the same",
			     j->name, rank, (unsigned long long)step, what);
		break;
	}
	case ZS_HP_PUT_FULL:
		st = zs_fail(err, ZS_ESTATE,
			     "job '%s': %d hyperparameter tables ahead of step %llu here; trainers "
			     "set them faster than the steps finish",
			     j->name, EJOB_HP_KEEP, (unsigned long long)low);
		break;
	case ZS_HP_PUT_NEW:
	case ZS_HP_PUT_SAME:
		break;
	}
	pthread_mutex_unlock(&j->hps.mu);
	eng_job_unref(e, j);
	return st;
}

void eng_hp_steps(struct ejob *j, uint64_t step, uint64_t t, struct zs_optim_step *steps,
		  double *clip_norm)
{
	const struct zs_optim *o = &j->spec.optim;
	const struct zs_hp *g = o->groups;
	double clip = o->clip_norm;
	const struct zs_hp_table *in;

	pthread_mutex_lock(&j->hps.mu);
	if ((in = zs_hp_list_at(j->hps.t, j->hps.n, step))) {
		g = in->g;
		clip = in->clip_norm;
	}
	for (uint32_t i = 0; steps && i < o->n_groups; i++)
		steps[i] = (struct zs_optim_step){.kind = o->kind, .lr = g[i].lr,
						  .beta1 = g[i].beta1, .beta2 = g[i].beta2,
						  .eps = g[i].eps, .weight_decay = g[i].weight_decay,
						  .momentum = g[i].momentum, .t = t};
	pthread_mutex_unlock(&j->hps.mu);
	if (clip_norm)
		*clip_norm = clip;
}

int eng_shard_segments(struct ejob *j, struct eshard *s)
{
	const struct zs_unit *u = &j->spec.layout.units[s->sh.unit];
	uint64_t lo = s->sh.offset, hi = s->sh.offset + s->sh.length;

	s->lay.segs = calloc(u->n_tensors ? u->n_tensors : 1, sizeof *s->lay.segs);
	if (!s->lay.segs)
		return -1;
	s->lay.n_segs = 0;
	for (uint32_t i = 0; i < u->n_tensors; i++) {
		const struct zs_tensor *te = &u->tensors[i];
		uint64_t a = te->offset > lo ? te->offset : lo;
		uint64_t b = te->offset + te->numel < hi ? te->offset + te->numel : hi;
		struct eseg *last = s->lay.n_segs ? &s->lay.segs[s->lay.n_segs - 1] : NULL;
		if (a >= b)
			continue;
		if (last && last->group == te->group && last->frozen == te->frozen &&
		    last->b == a - lo)
			last->b = b - lo;
		else
			s->lay.segs[s->lay.n_segs++] = (struct eseg){a - lo, b - lo, te->group, te->frozen};
		s->lay.frozen |= te->frozen;
	}
	return 0;
}

void eng_optim_run(struct engine *e, const struct eshard *s, const struct zs_optim_step *steps,
		   float *p, float *s0, float *s1, const float *g, uint64_t a, uint64_t b)
{
	for (uint32_t k = 0; k < s->lay.n_segs; k++) {
		uint64_t lo = s->lay.segs[k].a > a ? s->lay.segs[k].a : a;
		uint64_t hi = s->lay.segs[k].b < b ? s->lay.segs[k].b : b;
		if (lo >= hi || s->lay.segs[k].frozen)
			continue;
		zs_optim_apply_parallel(&steps[s->lay.segs[k].group], p + (lo - a),
					s0 ? s0 + (lo - a) : NULL, s1 ? s1 + (lo - a) : NULL,
					g + (lo - a), hi - lo, e ? e->nthreads : 1);
	}
}
