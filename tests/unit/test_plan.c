/*
 * test_plan.c - the memory plan (zshardctl plan): the ZeRO paper's own
 * figures, zshard's trainer and server accounting for a job's units, the
 * largest model that fits, and bad input.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "model/plan.h"

/* Figure 1 of the ZeRO paper: 7.5B parameters, N = 64, K = 12, per GPU
 * 120 GB, 31.4 GB, 16.6 GB and 1.9 GB. */
static void test_zero_paper_figure(void **st)
{
	struct zs_plan_in in = {.params = 7500000000ULL, .n_units = 1, .world = 64, .stage = 3,
				.dtype = ZS_BF16, .optim = ZS_ADAMW};
	struct zs_plan p;

	(void)st;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.b, 2);
	assert_int_equal(p.K, 12);
	assert_true(fabs(p.zero[0] - 120e9) < 1e6);
	assert_true(fabs(p.zero[1] - 31.4e9) < 0.05e9);
	assert_true(fabs(p.zero[2] - 16.6e9) < 0.05e9);
	assert_true(fabs(p.zero[3] - 1.9e9) < 0.05e9);
	/* fp32 training: no separate master; Adam's two moments */
	in.dtype = ZS_F32;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.K, 8);
	/* SGD, with and without momentum, in bf16 */
	in.dtype = ZS_BF16;
	in.optim = ZS_SGD;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.K, 4);
	in.momentum = true;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.K, 8);
}

/* The step driver's holdings for the integration tests' job (f32 units of
 * 1000, 1, 4099 and 64 elements), stage by stage. */
static void test_trainer_and_server(void **st)
{
	static const uint64_t units[4] = {1000, 1, 4099, 64};
	const uint64_t total = 4 * (1000 + 1 + 4099 + 64);
	struct zs_plan_in in = {.n_units = 4, .unit_numel = units, .world = 2, .servers = 3,
				.stage = 1, .dtype = ZS_F32, .optim = ZS_ADAMW, .prefetch = 1};
	struct zs_plan p;

	(void)st;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.params, 5164);
	assert_int_equal(p.largest_unit, 4099);
	assert_int_equal(p.trainer_params, total);
	assert_int_equal(p.trainer_grads, total);
	/* stage 2: the replica, two units of gradients (the largest pair) */
	in.stage = 2;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.trainer_params, total);
	assert_int_equal(p.trainer_grads, 4 * (4099 + 64));
	in.push_depth = 2; /* two pushes in flight: three units of gradients */
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.trainer_grads, 4 * (1000 + 1 + 4099));
	in.push_depth = 0;
	/* stage 3: the window of 1 + prefetch consecutive units */
	in.stage = 3;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.trainer_params, 4 * (4099 + 64));
	in.prefetch = 2;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.trainer_params, 4 * (1000 + 1 + 4099)); /* units 0..2 */
	in.prefetch = 9; /* more than there are units: all of them */
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.trainer_params, total);
	in.prefetch = 1;
	in.keep_until_backward = true;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.trainer_params, total);
	/* a server: master 4 + reduction 16 + mean gradient 4 + Adam 8 + the
	 * previous step's copy 4 (a lost rank's redo), and its landing
	 * budget */
	assert_int_equal(p.server_per_elem, 4 + 16 + 4 + 8 + 4);
	assert_int_equal(p.server_landing, 256u << 20);
	assert_int_equal(p.server_total, (5164 + 2) / 3 * 36 + (256u << 20));
	/* the same at any world size */
	in.world = 1024;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.server_per_elem, 36);
	in.world = 2;
	in.landing = 1u << 20;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.server_total, (5164 + 2) / 3 * 36 + (1u << 20));
	/* replicas: each server owns its share of every copy */
	in.replicas = 2;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.server_total, (2 * 5164 + 2) / 3 * 36 + (1u << 20));
	in.replicas = 0;
	/* bf16: and the compute copy (and the previous step's, bf16 too) */
	in.dtype = ZS_BF16;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.server_per_elem, 4 + 16 + 4 + 8 + 2 + 2);
	assert_int_equal(p.server_dev_total, 0);
	assert_int_equal(zs_plan_gpu_bytes(&p), p.trainer_total);
	/* servers on their GPU: master 4 + Adam 8 + reduction 16 + mean
	 * gradient 4 + a push 4 + the bf16 copy 2 there; the copy gathers
	 * read + clipping's copy 4 + the previous step's 2 on the host */
	in.server_gpu = true;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.server_dev_per_elem, 4 + 8 + 16 + 4 + 4 + 2);
	assert_int_equal(p.server_per_elem, 2 + 4 + 2);
	assert_int_equal(p.server_dev_total, (5164 + 2) / 3 * 38);
	assert_int_equal(zs_plan_gpu_bytes(&p), p.trainer_total + p.server_dev_total);
	/* f32, SGD with momentum: no device copy, one state array */
	in.dtype = ZS_F32;
	in.optim = ZS_SGD;
	in.momentum = true;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_int_equal(p.server_dev_per_elem, 4 + 4 + 16 + 4 + 4);
	assert_int_equal(p.server_per_elem, 4 + 4 + 4);
}

/* The largest model in given limits: it fits, one more parameter's worth
 * of units does not. */
static void test_max_params(void **st)
{
	struct zs_plan_in in = {.params = 1, .n_units = 8, .world = 4, .stage = 2,
				.dtype = ZS_BF16, .optim = ZS_ADAMW, .prefetch = 1};
	const uint64_t gpu = 16ULL << 30, host = 64ULL << 30;
	struct zs_plan p;
	uint64_t m;

	(void)st;
	m = zs_plan_max_params(&in, gpu, host);
	assert_true(m > 1000000 && m < (1ULL << 40));
	in.params = m;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_true(p.trainer_total <= gpu && p.server_total <= host);
	in.params = m + 8;
	assert_int_equal(zs_plan_compute(&in, &p, NULL), ZS_OK);
	assert_true(p.trainer_total > gpu || p.server_total > host);
	/* stage 2 keeps the replica: the GPU binds at about 16 GiB / 2 B /
	 * (1 + 2/8) */
	in.params = 1;
	assert_true(zs_plan_max_params(&in, gpu, 0) > (uint64_t)(0.99 * 16 * 1073741824.0 / 2.5));
	/* no limits: nothing bounds it */
	assert_true(zs_plan_max_params(&in, 0, 0) == UINT64_MAX);
}

static void test_bad_input(void **st)
{
	struct zs_plan_in ok = {.params = 100, .n_units = 2, .world = 2, .stage = 3,
				.dtype = ZS_F32, .optim = ZS_SGD}, in;
	struct zs_error err = {0};
	struct zs_plan p;

	(void)st;
	in = ok, in.stage = 4;
	assert_int_equal(zs_plan_compute(&in, &p, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "stage"));
	in = ok, in.world = 0;
	assert_int_equal(zs_plan_compute(&in, &p, &err), ZS_EINVAL);
	in = ok, in.n_units = 0;
	assert_int_equal(zs_plan_compute(&in, &p, &err), ZS_EINVAL);
	in = ok, in.params = 0;
	assert_int_equal(zs_plan_compute(&in, &p, &err), ZS_EINVAL);
	in = ok, in.dtype = ZS_DTYPE_UNSET;
	assert_int_equal(zs_plan_compute(&in, &p, &err), ZS_EINVAL);
	in = ok, in.optim = ZS_OPTIM_UNSET;
	assert_int_equal(zs_plan_compute(&in, &p, &err), ZS_EINVAL);
	in = ok, in.servers = 2, in.replicas = 3; /* more copies than servers */
	assert_int_equal(zs_plan_compute(&in, &p, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "replicas 3"));
	assert_int_equal(zs_plan_compute(&ok, &p, &err), ZS_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zero_paper_figure),
		cmocka_unit_test(test_trainer_and_server),
		cmocka_unit_test(test_max_params),
		cmocka_unit_test(test_bad_input),
	};
	return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
