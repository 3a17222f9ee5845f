/*
 * hparams.c - per-step optimizer hyperparameters: checks and the HPARAMS
 * payload (see hparams.h).
 */
#include "model/hparams.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/le.h"

static int finite_nonneg(double x) { return isfinite(x) && x >= 0.0; }

enum zs_status zs_hp_check(enum zs_optim_kind kind, const struct zs_hp *h, const char *what,
			   struct zs_error *err)
{
	if (!isfinite(h->lr) || h->lr < 0.0)
		return zs_fail(err, ZS_EINVAL, "%s: learning rate %g is invalid (finite, >= 0)",
			       what, h->lr);
	if (!finite_nonneg(h->weight_decay))
		return zs_fail(err, ZS_EINVAL, "%s: weight_decay %g is invalid (finite, >= 0)",
			       what, h->weight_decay);
	if (!(finite_nonneg(h->momentum) && h->momentum < 1.0))
		return zs_fail(err, ZS_EINVAL, "%s: momentum %g is invalid (in [0, 1))", what,
			       h->momentum);
	if (ZS_OPTIM_ADAM_FAMILY(kind) &&
	    (!(h->beta1 >= 0.0 && h->beta1 < 1.0) || !(h->beta2 >= 0.0 && h->beta2 < 1.0) ||
	     !isfinite(h->eps) || h->eps <= 0.0))
		return zs_fail(err, ZS_EINVAL,
			       "%s: %s needs betas in [0, 1) and eps > 0 (betas %g, %g; eps %g)",
			       what, kind == ZS_ADAM ? "Adam" : "AdamW", h->beta1, h->beta2, h->eps);
	if (kind == ZS_ADAGRAD && (!isfinite(h->eps) || h->eps <= 0.0))
		return zs_fail(err, ZS_EINVAL, "%s: Adagrad needs eps > 0 (eps %g)", what, h->eps);
	return ZS_OK;
}

enum zs_status zs_hp_table_check(const struct zs_job_spec *s, const struct zs_hp_table *t,
				 struct zs_error *err)
{
	const struct zs_optim *o = &s->optim;

	if (t->n_groups != o->n_groups)
		return zs_fail(err, ZS_EINVAL,
			       "hyperparameters for %u optimizer groups, job '%s' has %u",
			       t->n_groups, s->name, o->n_groups);
	if (!finite_nonneg(t->clip_norm))
		return zs_fail(err, ZS_EINVAL, "clip_norm %g is invalid (finite, >= 0)",
			       t->clip_norm);
	if ((t->clip_norm > 0.0) != (o->clip_norm > 0.0))
		return zs_fail(err, ZS_EINVAL,
			       "clip_norm %g: job '%s' %s gradients (its spec's clip_norm is %g); a "
			       "step may change the norm, not turn clipping %s",
			       t->clip_norm, s->name, o->clip_norm > 0.0 ? "clips" : "does not clip",
			       o->clip_norm, o->clip_norm > 0.0 ? "off" : "on");
	for (uint32_t g = 0; g < t->n_groups; g++) {
		char what[48];
		enum zs_status st;
		snprintf(what, sizeof what, "optimizer group %u", g);
		if ((st = zs_hp_check(o->kind, &t->g[g], what, err)))
			return st;
	}
	return ZS_OK;
}

void zs_hp_of_spec(const struct zs_job_spec *s, struct zs_hp_table *t)
{
	memset(t, 0, sizeof *t);
	t->n_groups = s->optim.n_groups;
	t->clip_norm = s->optim.clip_norm;
	memcpy(t->g, s->optim.groups, t->n_groups * sizeof t->g[0]);
}

static void put_f64(uint8_t *p, double v)
{
	uint64_t u;
	memcpy(&u, &v, 8);
	zs_put64(p, u);
}

static double get_f64(const uint8_t *p)
{
	uint64_t u = zs_get64(p);
	double v;
	memcpy(&v, &u, 8);
	return v;
}

size_t zs_hp_encode(const struct zs_hp_table *t, uint8_t *out)
{
	uint8_t *p = out + 12;

	zs_put32(out, t->n_groups);
	put_f64(out + 4, t->clip_norm);
	for (uint32_t g = 0; g < t->n_groups; g++) {
		const struct zs_hp *h = &t->g[g];
		const double v[6] = {h->lr, h->weight_decay, h->beta1, h->beta2, h->eps,
				     h->momentum};
		for (int k = 0; k < 6; k++, p += 8)
			put_f64(p, v[k]);
	}
	return ZS_HP_BYTES(t->n_groups);
}

enum zs_status zs_hp_decode(const uint8_t *in, size_t len, struct zs_hp_table *t,
			    struct zs_error *err)
{
	uint32_t n;
	const uint8_t *p = in + 12;

	if (len < ZS_HP_BYTES(0))
		return zs_fail(err, ZS_EPROTO, "a HPARAMS payload of %zu bytes is too short", len);
	n = zs_get32(in);
	if (n == 0 || n > ZS_MAX_GROUPS || len != ZS_HP_BYTES(n))
		return zs_fail(err, ZS_EPROTO,
			       "a HPARAMS payload of %zu bytes for %u groups (1..%d, %zu bytes)", len,
			       n, ZS_MAX_GROUPS, n <= ZS_MAX_GROUPS ? ZS_HP_BYTES(n) : 0);
	memset(t, 0, sizeof *t);
	t->n_groups = n;
	t->clip_norm = get_f64(in + 4);
	for (uint32_t g = 0; g < n; g++, p += 48)
		t->g[g] = (struct zs_hp){get_f64(p), get_f64(p + 8), get_f64(p + 16),
					 get_f64(p + 24), get_f64(p + 32), get_f64(p + 40)};
	return ZS_OK;
}
