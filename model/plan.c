/* plan.c - memory accounting of a sharding setup (see plan.h). */
#include "model/plan.h"

#include <stdlib.h>

/* Element count of unit u of in (uniform units: the last takes the rest). */
static uint64_t unit_numel(const struct zs_plan_in *in, uint32_t u)
{
	uint64_t per;

	if (in->unit_numel)
		return in->unit_numel[u];
	per = (in->params + in->n_units - 1) / in->n_units;
	if ((uint64_t)u * per >= in->params)
		return 0;
	return u + 1 == in->n_units ? in->params - (uint64_t)u * per : per;
}

/* The largest sum of k consecutive units. */
static uint64_t max_window(const struct zs_plan_in *in, uint32_t k)
{
	uint64_t best = 0;

	if (k > in->n_units)
		k = in->n_units;
	if (!in->unit_numel) /* uniform: the first window is the largest */
		k = k ? k : 1;
	for (uint32_t a = 0; a + k <= in->n_units; a++) {
		uint64_t sum = 0;
		for (uint32_t u = a; u < a + k; u++)
			sum += unit_numel(in, u);
		if (sum > best)
			best = sum;
		if (!in->unit_numel)
			break;
	}
	return best;
}

enum zs_status zs_plan_compute(const struct zs_plan_in *in, struct zs_plan *out,
			       struct zs_error *err)
{
	struct zs_job_spec spec = {0};
	struct zs_unit unit = {0};
	uint32_t servers = in->servers ? in->servers : in->world;
	uint32_t K = in->replicas ? in->replicas : 1;
	double P, N;
	uint64_t master, owned;

	*out = (struct zs_plan){0};
	if (in->stage < 1 || in->stage > 3)
		return zs_fail(err, ZS_EINVAL, "stage %u is not 1, 2 or 3", in->stage);
	if (!in->world || in->world > ZS_MAX_WORLD)
		return zs_fail(err, ZS_EINVAL, "world size %u is not in 1..%u", in->world,
			       ZS_MAX_WORLD);
	if (!in->n_units || in->n_units > ZS_MAX_UNITS)
		return zs_fail(err, ZS_EINVAL, "unit count %u is not in 1..%u", in->n_units,
			       ZS_MAX_UNITS);
	if (in->dtype != ZS_F32 && in->dtype != ZS_BF16 && in->dtype != ZS_F16)
		return zs_fail(err, ZS_EINVAL, "no compute dtype");
	if (K > ZS_MAX_REPLICAS || K > servers)
		return zs_fail(err, ZS_EINVAL,
			       "replicas %u: each copy of a shard is on another server (1..%u here)",
			       K, servers < ZS_MAX_REPLICAS ? servers : ZS_MAX_REPLICAS);
	if (in->optim != ZS_ADAMW && in->optim != ZS_SGD && in->optim != ZS_ADAM &&
	    in->optim != ZS_ADAGRAD)
		return zs_fail(err, ZS_EINVAL, "no optimizer");
	out->params = 0;
	for (uint32_t u = 0; u < in->n_units; u++) {
		uint64_t n = in->unit_numel ? in->unit_numel[u] : 0;
		out->params += n;
		if (n > out->largest_unit)
			out->largest_unit = n;
	}
	if (!in->unit_numel) {
		out->params = in->params;
		out->largest_unit = unit_numel(in, 0);
	}
	if (!out->params || out->params > (1ULL << 50))
		return zs_fail(err, ZS_EINVAL, "parameter count %llu is not in 1..2^50",
			       (unsigned long long)out->params);

	/* the paper: b bytes of parameters and of gradients, K of optimizer
	 * state (the fp32 master when the compute dtype is narrower, and
	 * Adam's two moments or SGD's momentum) */
	out->b = zs_dtype_size(in->dtype);
	master = out->b == 4 ? 0 : 4;
	out->K = (unsigned)master + (ZS_OPTIM_ADAM_FAMILY(in->optim) ? 8
				     : in->optim == ZS_ADAGRAD || in->momentum ? 4 : 0);
	P = (double)out->params;
	N = (double)in->world;
	out->zero[0] = (2.0 * out->b + out->K) * P;
	out->zero[1] = 2.0 * out->b * P + out->K * P / N;
	out->zero[2] = out->b * P + (out->b + out->K) * P / N;
	out->zero[3] = (2.0 * out->b + out->K) * P / N;

	/* zshard's trainer: what the step driver holds */
	if (in->stage < 3)
		out->trainer_params = out->params * out->b;
	else if (in->keep_until_backward)
		out->trainer_params = out->params * out->b;
	else
		out->trainer_params = max_window(in, in->prefetch + 1) * out->b;
	out->trainer_grads = in->stage == 1 ? out->params * out->b
					     : max_window(in, (in->push_depth ? in->push_depth : 1) + 1) *
						       out->b;
	out->trainer_total = out->trainer_params + out->trainer_grads;

	/* zshard's servers: the engine's allocation per element owned */
	spec.world_size = in->world;
	spec.compute_dtype = in->dtype;
	spec.optim.kind = in->optim;
	spec.optim.momentum = in->momentum ? 0.9 : 0.0;
	unit.dtype = in->dtype;
	/* each server owns its share of every copy */
	owned = ((out->params * K) + servers - 1) / servers;
	if (in->server_gpu) {
		zs_server_bytes_per_elem_gpu(&spec, &unit, &out->server_per_elem,
					     &out->server_dev_per_elem);
		out->server_dev_total = owned * out->server_dev_per_elem;
	} else {
		out->server_per_elem = zs_server_bytes_per_elem(&spec, &unit);
	}
	out->server_landing = in->landing ? in->landing : 256ull << 20;
	out->server_pins = owned * out->b * in->reader_pins;
	out->server_total = owned * out->server_per_elem + out->server_landing + out->server_pins;
	return ZS_OK;
}

uint64_t zs_plan_gpu_bytes(const struct zs_plan *p) { return p->trainer_total + p->server_dev_total; }

static bool fits(const struct zs_plan_in *in, uint64_t params, uint64_t gpu, uint64_t host)
{
	struct zs_plan_in x = *in;
	struct zs_plan p;

	x.params = params;
	x.unit_numel = NULL;
	if (zs_plan_compute(&x, &p, NULL))
		return false;
	return (!gpu || zs_plan_gpu_bytes(&p) <= gpu) && (!host || p.server_total <= host);
}

uint64_t zs_plan_max_params(const struct zs_plan_in *in, uint64_t gpu, uint64_t host)
{
	uint64_t lo = 0, hi = 1ULL << 50;

	if (fits(in, hi, gpu, host))
		return UINT64_MAX;
	while (hi - lo > 1) { /* fits(lo) (or lo == 0), !fits(hi) */
		uint64_t mid = lo + (hi - lo) / 2;
		if (fits(in, mid, gpu, host))
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}
