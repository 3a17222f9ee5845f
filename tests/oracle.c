/* oracle.c - synthetic model and reference for the oracle tests. */
#include "tests/oracle.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math/optim.h"

float oracle_init(uint32_t u, uint64_t i)
{
	return (float)sin((double)(u * 131 + i) * 0.37) * 0.5f;
}

float oracle_grad(float p, uint32_t u, uint64_t i, uint32_t rank, uint64_t t)
{
	return p * (0.3f + 0.1f * (float)rank) + (float)((i * 7 + u * 3 + t) % 11) * 0.01f -
	       0.05f * (float)rank;
}

float oracle_grad_mb(float p, uint32_t u, uint64_t i, uint32_t rank, uint64_t t,
		     uint32_t mb)
{
	return oracle_grad(p, u, i, rank, t) * (1.0f + 0.25f * (float)mb) - 0.003f * (float)mb;
}

void oracle_spec(struct zs_job_spec *s, const char *name, uint32_t R,
		 enum zs_optim_kind kind, enum zs_dtype dt)
{
	static const uint64_t sizes[] = {1000, 1, 4099, 64};
	oracle_spec_sizes(s, name, R, kind, dt, sizes, 4);
}

void oracle_spec_sizes(struct zs_job_spec *s, const char *name, uint32_t R,
		       enum zs_optim_kind kind, enum zs_dtype dt, const uint64_t *sizes,
		       uint32_t n_units)
{
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", name);
	s->stage = 3;
	s->world_size = R;
	s->compute_dtype = dt;
	s->optim = (struct zs_optim){.kind = kind, .lr = kind == ZS_SGD ? 0.05 : 1e-2,
				     .weight_decay = 0.01,
				     .momentum = kind == ZS_SGD ? 0.9 : 0.0};
	s->layout.n_units = n_units;
	s->layout.units = calloc(n_units, sizeof(struct zs_unit));
	for (uint32_t u = 0; u < n_units; u++) {
		struct zs_unit *un = &s->layout.units[u];
		snprintf(un->name, sizeof un->name, "u%u", u);
		un->dtype = u == 0 ? ZS_F32 : ZS_DTYPE_UNSET;
		un->n_tensors = 1;
		un->tensors = calloc(1, sizeof(struct zs_tensor));
		strcpy(un->tensors[0].name, "w");
		un->tensors[0].ndim = 1;
		un->tensors[0].shape[0] = sizes[u];
	}
	if (zs_job_spec_normalize(s, NULL))
		abort();
}

float oracle_round(enum zs_dtype d, float x)
{
	if (d == ZS_BF16)
		return zs_bf16_to_f32(zs_f32_to_bf16(x));
	if (d == ZS_F16)
		return zs_f16_to_f32(zs_f32_to_f16(x));
	return x;
}

/*
 * The reduction (math/bsum.h) from its definition, computed another way
 * than the library: the top bin from frexp over all the terms first, each
 * term truncated in double, the exact sum in 128 bits, then rounded to
 * odd at 53 bits and converted (round to odd, then to nearest at 24 bits
 * or fewer, is the correct rounding).
 */
float oracle_bsum(const float *v, uint32_t n)
{
	bool nan = false, pinf = false, ninf = false;
	int t = -1, g, nb = 0, scale = 0;
	__int128 T = 0;
	unsigned __int128 mag;
	uint64_t top;
	double d;

	for (uint32_t k = 0; k < n; k++) {
		int e;
		if (isnan(v[k]))
			nan = true;
		else if (isinf(v[k]))
			*(v[k] > 0 ? &pinf : &ninf) = true;
		else if (v[k] != 0.0f && (frexp(fabs((double)v[k]), &e), (e - 1 + 149) / 30 > t))
			t = (e - 1 + 149) / 30;
	}
	if (nan || (pinf && ninf))
		return NAN;
	if (pinf || ninf)
		return pinf ? INFINITY : -INFINITY;
	if (t < 0)
		return 0.0f;
	g = (t - 1) * 30 - 149;
	for (uint32_t k = 0; k < n; k++)
		T += (int64_t)trunc(ldexp((double)v[k], -g));
	if (!T)
		return 0.0f;
	mag = T < 0 ? (unsigned __int128)-T : (unsigned __int128)T;
	while (nb < 128 && (mag >> nb))
		nb++;
	if (nb > 53) {
		scale = nb - 53;
		top = (uint64_t)(mag >> scale) | ((mag & (((unsigned __int128)1 << scale) - 1)) != 0);
	} else {
		top = (uint64_t)mag;
	}
	d = ldexp((double)top, g + scale);
	return (float)(T < 0 ? -d : d);
}

void oracle_reference(const struct zs_job_spec *s, uint64_t steps, float **out)
{
	oracle_reference_k(s, steps, 1, out);
}

void oracle_reference_k(const struct zs_job_spec *s, uint64_t steps, uint32_t K,
			float **out)
{
	oracle_reference_full(s, NULL, steps, K, out);
}

void oracle_spec_groups(struct zs_job_spec *s)
{
	static const struct { uint32_t unit, n; struct zs_tensor t[3]; } split[] = {
		{0, 2, {{"w", 2, {30, 20}, 0, 0, 0}, {"b", 1, {400}, 0, 0, 1}}},
		{2, 3, {{"a", 1, {2000}, 0, 0, 1}, {"b", 1, {99}, 0, 0, 0}, {"c", 1, {2000}, 0, 0, 2}}},
	};
	struct zs_optim *o = &s->optim;

	for (unsigned k = 0; k < 2; k++) {
		struct zs_unit *un = &s->layout.units[split[k].unit];
		free(un->tensors);
		un->tensors = calloc(split[k].n, sizeof *un->tensors);
		memcpy(un->tensors, split[k].t, split[k].n * sizeof *un->tensors);
		un->n_tensors = split[k].n;
	}
	o->n_groups = 3;
	o->groups[1] = o->groups[0];
	o->groups[1].weight_decay = 0.0;
	o->groups[2] = o->groups[0];
	o->groups[2].lr = o->groups[0].lr / 3.0;
	o->groups[2].momentum = 0.0; /* SGD: a group without momentum */
	zs_layout_derive(&s->layout);
	if (zs_job_spec_normalize(s, NULL))
		abort();
}

void oracle_spec_frozen(struct zs_job_spec *s)
{
	oracle_spec_groups(s);
	s->layout.units[0].tensors[1].frozen = true; /* b [400], group 1 */
	s->layout.units[2].tensors[1].frozen = true; /* b [99], group 0, between a and c */
}

void oracle_hparams(const struct zs_job_spec *s, uint64_t step, struct zs_hp_table *out)
{
	double warm = step < 2 ? (double)(step + 1) / 2.0 : 1.0;
	double decay = 0.5 + 0.5 * cos(3.141592653589793 * (double)step / 8.0);

	zs_hp_of_spec(s, out);
	out->step = step;
	for (uint32_t g = 0; g < out->n_groups; g++)
		out->g[g].lr *= warm * decay;
	if (out->clip_norm > 0.0)
		out->clip_norm *= 1.0 + 0.1 * (double)step;
}

/* A shard's squared norm as the servers take it: zs_sumsq over each run
 * of elements of trained (not frozen) tensors, summed in order. */
static double trained_sumsq(const struct zs_unit *un, const float *acc, uint64_t off,
			    uint64_t len)
{
	double sum = 0.0;
	uint64_t run = off; /* where the current run of trained elements began */
	bool in_run = false;

	for (uint32_t k = 0; k < un->n_tensors; k++) {
		const struct zs_tensor *te = &un->tensors[k];
		uint64_t a = te->offset > off ? te->offset : off;
		uint64_t b = te->offset + te->numel < off + len ? te->offset + te->numel
								 : off + len;
		if (a >= b)
			continue;
		if (te->frozen && in_run) {
			sum += zs_sumsq(acc + run, a - run);
			in_run = false;
		} else if (!te->frozen && !in_run) {
			run = a;
			in_run = true;
		}
	}
	if (in_run)
		sum += zs_sumsq(acc + run, off + len - run);
	return sum;
}

void oracle_reference_full(const struct zs_job_spec *s, const struct zs_placement *pl,
			   uint64_t steps, uint32_t K, float **out)
{
	oracle_reference_sched(s, pl, steps, K, 0, out);
}

static void reference(const struct zs_job_spec *s, const struct zs_worlds *w,
		      const struct zs_placement *pl, uint64_t steps, uint32_t K, int sched,
		      float **out);

void oracle_reference_sched(const struct zs_job_spec *s, const struct zs_placement *pl,
			    uint64_t steps, uint32_t K, int sched, float **out)
{
	reference(s, NULL, pl, steps, K, sched, out);
}

void oracle_reference_worlds(const struct zs_job_spec *s, const struct zs_worlds *w,
			     uint64_t steps, float **out)
{
	reference(s, w, NULL, steps, 1, 0, out);
}

static void reference(const struct zs_job_spec *s, const struct zs_worlds *w,
		      const struct zs_placement *pl, uint64_t steps, uint32_t K, int sched,
		      float **out)
{
	const struct zs_optim *o = &s->optim;
	uint32_t R, U = s->layout.n_units;
	float *P[64], *M[64], *Vv[64], *A[64];

	/* units advance together: with clipping, a step needs every gradient */
	for (uint32_t u = 0; u < U; u++) {
		uint64_t n = s->layout.units[u].numel;
		P[u] = malloc(n * 4);
		M[u] = calloc(n, 4);
		Vv[u] = calloc(n, 4);
		A[u] = malloc(n * 4);
		for (uint64_t i = 0; i < n; i++)
			P[u][i] = oracle_init(u, i);
	}
	for (uint64_t t = 0; t < steps; t++) {
		struct zs_hp_table hp;
		float coef = 1.0f;

		R = zs_world_at(s, w, t);
		if (sched)
			oracle_hparams(s, t, &hp);
		else
			zs_hp_of_spec(s, &hp);
		for (uint32_t u = 0; u < U; u++) {
			const struct zs_unit *un = &s->layout.units[u];
			uint64_t n = un->numel;
			float *p = P[u], *acc = A[u], *terms = malloc((size_t)R * K * 4);
			/* trainers see the compute-dtype copy and push in that dtype;
			 * every push of every rank is one term of the reduction */
			for (uint64_t i = 0; i < n; i++) {
				float seen = oracle_round(un->dtype, p[i]);
				for (uint32_t r = 0; r < R; r++)
					for (uint32_t mb = 0; mb < K; mb++)
						terms[r * K + mb] = oracle_round(
							un->dtype, K == 1 ? oracle_grad(seen, u, i, r, t)
									  : oracle_grad_mb(seen, u, i, r, t, mb));
				acc[i] = oracle_bsum(terms, R * K);
				acc[i] = R > 1 ? acc[i] / (float)R : acc[i];
			}
			free(terms);
		}
		if (o->clip_norm > 0.0 && pl) {
			double total = 0.0;
			for (uint32_t k = 0; k < pl->n_shards; k++)
				total += trained_sumsq(&s->layout.units[pl->shards[k].unit],
						       A[pl->shards[k].unit], pl->shards[k].offset,
						       pl->shards[k].length);
			coef = zs_clip_coef(total, hp.clip_norm);
		}
		for (uint32_t u = 0; u < U; u++) {
			const struct zs_unit *un = &s->layout.units[u];
			if (coef != 1.0f)
				zs_scale(A[u], coef, un->numel);
			/* tensor by tensor, each with its group's values */
			for (uint32_t k = 0; k < un->n_tensors; k++) {
				const struct zs_tensor *te = &un->tensors[k];
				const struct zs_hp *h = &hp.g[te->group];
				if (te->frozen) /* never updated */
					continue;
				struct zs_optim_step st = {o->kind, h->lr, h->beta1, h->beta2, h->eps,
							   h->weight_decay, h->momentum, t + 1};
				zs_optim_apply(&st, P[u] + te->offset, M[u] + te->offset,
					       Vv[u] + te->offset, A[u] + te->offset, te->numel);
			}
		}
	}
	for (uint32_t u = 0; u < U; u++) {
		for (uint64_t i = 0; i < s->layout.units[u].numel; i++)
			out[u][i] = oracle_round(s->layout.units[u].dtype, P[u][i]);
		free(P[u]);
		free(M[u]);
		free(Vv[u]);
		free(A[u]);
	}
}
