/*
 * test_gpu.c - the CUDA kernels (gpu/) against the host kernels
 * (math/optim.c, base/dtype.c), bit for bit: AdamW over several steps, SGD
 * with and without momentum (its first step and later ones), the binned
 * reduction in each dtype (its state, terms deposited in another order,
 * and its rounding) with the mean, the clipping scale and the
 * compute-dtype copy, over awkward sizes
 * (0, 1, a warp less one, block boundaries, more than one grid-stride
 * pass) and awkward values (zeros, subnormals, large and tiny gradients,
 * a NaN with a payload, an infinity).
 * Without a CUDA device each test says why and is skipped (not passed);
 * make test-gpu runs it where a device is.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "math/optim.h"

static const size_t sizes[] = {0, 1, 31, 255, 256, 257, 4099, 65536 * 3 + 5,
			       65535ull * 256 + 1000};

static uint32_t rng = 2463534242u;
static float frand(void) /* xorshift, in [-1, 1), with awkward values now and then */
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	switch (rng % 61) {
	case 0: return 0.0f;
	case 1: return -0.0f;
	case 2: return FLT_MIN / 8; /* subnormal */
	case 3: return 3e4f;
	case 4: return 1e-20f;
	case 5: { /* a NaN with a sign and a payload: the kernels write 0x7fc00000 */
		uint32_t u = 0xffc00123u;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	case 6: return INFINITY;
	default: return (float)((double)rng / 2147483648.0 - 1.0);
	}
}

static void need_device(void)
{
	char why[256];
	if (!zs_gpu_available(why, sizeof why)) {
		printf("test_gpu: skipped: %s (make test-gpu runs it where a device is)\n", why);
		skip();
	}
}

/* k host arrays h[] of n floats (random; zeros where bit i of zeros is
 * set: optimizer state) and their copies on the device, d[]. */
static void arrays(float **h, float **d, int k, size_t n, unsigned zeros)
{
	char why[256];
	for (int i = 0; i < k; i++) {
		h[i] = malloc(n * 4 + 4);
		for (size_t e = 0; e < n; e++)
			h[i][e] = zeros >> i & 1 ? 0.0f : frand();
		d[i] = zs_gpu_alloc(n * 4, why, sizeof why);
		if (!d[i] || zs_gpu_copy(d[i], h[i], n * 4, true, why, sizeof why))
			fail_msg("%s", why);
	}
}

static void arrays_free(float **h, float **d, int k)
{
	for (int i = 0; i < k; i++) {
		zs_gpu_free(d[i]);
		free(h[i]);
	}
}

static void same(float *dev, const float *host, size_t n, const char *what, size_t size,
		 uint64_t t)
{
	char why[256];
	float *back = malloc(n * 4 + 4);
	if (zs_gpu_copy(back, dev, n * 4, false, why, sizeof why))
		fail_msg("%s", why);
	for (size_t i = 0; i < n; i++)
		if (memcmp(&back[i], &host[i], 4))
			fail_msg("%s, %zu elements, step %llu: element %zu is %.9g on the device, "
				 "%.9g on the host", what, size, (unsigned long long)t, i, back[i],
				 host[i]);
	free(back);
}

static void test_adamw_bitwise(void **st)
{
	(void)st;
	need_device();
	for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
		size_t n = sizes[z];
		float *h[4], *d[4];
		char why[256];
		arrays(h, d, 4, n, 1u << 1 | 1u << 2); /* p, m = 0, v = 0, g */
		for (uint64_t t = 1; t <= 3; t++) {
			struct zs_optim_step s = {.kind = ZS_ADAMW, .lr = 1e-3 * (double)t,
						  .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
						  .weight_decay = 0.1, .t = t};
			zs_optim_apply(&s, h[0], h[1], h[2], h[3], n);
			if (zs_gpu_adamw(zs_adamw_consts(&s), d[0], d[1], d[2], d[3], n, why,
					 sizeof why))
				fail_msg("%s", why);
			same(d[0], h[0], n, "AdamW parameters", n, t);
			same(d[1], h[1], n, "AdamW first moment", n, t);
			same(d[2], h[2], n, "AdamW second moment", n, t);
		}
		arrays_free(h, d, 4);
	}
}

/* Adam with its L2 term (without, zs_gpu_adamw runs it) and Adagrad, with
 * and without weight decay. */
static void test_adam_adagrad_bitwise(void **st)
{
	(void)st;
	need_device();
	for (double wd = 0.0; wd < 0.2; wd += 0.1)
		for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
			size_t n = sizes[z];
			float *h[4], *d[4];
			char why[256];
			arrays(h, d, 4, n, 1u << 1 | 1u << 2); /* p, m = 0, v = 0, g */
			for (uint64_t t = 1; t <= 3; t++) {
				struct zs_optim_step s = {.kind = ZS_ADAM, .lr = 1e-3 * (double)t,
							  .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
							  .weight_decay = 0.1, .t = t};
				zs_optim_apply(&s, h[0], h[1], h[2], h[3], n);
				if (zs_gpu_adam(zs_adamw_consts(&s), d[0], d[1], d[2], d[3], n, why,
						sizeof why))
					fail_msg("%s", why);
				same(d[0], h[0], n, "Adam parameters", n, t);
				same(d[1], h[1], n, "Adam first moment", n, t);
				same(d[2], h[2], n, "Adam second moment", n, t);
			}
			arrays_free(h, d, 4);
			arrays(h, d, 3, n, 1u << 1); /* p, sum = 0, g */
			for (uint64_t t = 1; t <= 3; t++) {
				struct zs_optim_step s = {.kind = ZS_ADAGRAD, .lr = 1e-2 / (double)t,
							  .eps = 1e-10, .weight_decay = wd, .t = t};
				zs_optim_apply(&s, h[0], h[1], NULL, h[2], n);
				if (zs_gpu_adagrad(zs_adagrad_consts(&s), d[0], d[1], d[2], n, why,
						   sizeof why))
					fail_msg("%s", why);
				same(d[0], h[0], n, "Adagrad parameters", n, t);
				same(d[1], h[1], n, "Adagrad sum", n, t);
			}
			arrays_free(h, d, 3);
		}
}

static void test_sgd_bitwise(void **st)
{
	(void)st;
	need_device();
	for (double mom = 0.0; mom < 1.0; mom += 0.9)
		for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
			size_t n = sizes[z];
			float *h[3], *d[3];
			char why[256];
			arrays(h, d, 3, n, 1u << 1); /* p, buf = 0, g */
			for (uint64_t t = 1; t <= 3; t++) {
				struct zs_optim_step s = {.kind = ZS_SGD, .lr = 0.05, .momentum = mom,
							  .weight_decay = 1e-3, .t = t};
				zs_optim_apply(&s, h[0], mom != 0.0 ? h[1] : NULL, NULL, h[2], n);
				if (zs_gpu_sgd(zs_sgd_consts(&s), d[0], mom != 0.0 ? d[1] : NULL, d[2],
					       n, why, sizeof why))
					fail_msg("%s", why);
				same(d[0], h[0], n, mom != 0.0 ? "SGD (momentum) parameters"
							       : "SGD parameters", n, t);
				if (mom != 0.0)
					same(d[1], h[1], n, "SGD momentum buffer", n, t);
			}
			arrays_free(h, d, 3);
		}
}

/* The reduction of 3 ranks' contributions in each dtype, the mean, the
 * clipping scale and the compute-dtype copy, device against host. (Finite
 * values only: a NaN's payload is the one thing CUDA and x86 propagate
 * differently.) */
static void test_reduce_bitwise(void **st)
{
	static const enum zs_dtype dts[] = {ZS_F32, ZS_BF16, ZS_F16};
	(void)st;
	need_device();
	for (int d = 0; d < 3; d++)
		for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
			enum zs_dtype dt = dts[d];
			size_t n = sizes[z], dsz = zs_dtype_size(dt);
			float *acc = malloc(n * 4 + 4), *f = malloc(n * 4 + 4), *dacc, *back;
			uint8_t *x[3], *copy = malloc(n * 4 + 4);
			struct zs_bacc *bacc = calloc(n + 1, sizeof *bacc), *dbacc, *bstate;
			void *dx[3], *dcopy;
			char why[256];
			for (int r = 0; r < 3; r++) {
				x[r] = malloc(n * dsz + 4);
				/* magnitudes far apart too: the bins move */
				for (size_t i = 0; i < n; i++)
					f[i] = frand() * (float)(r + 1) * 100.0f *
					       ldexpf(1.0f, (int)(i % 13) * 7 - 40);
				zs_convert_from_f32(x[r], dt, f, n);
				if (!(dx[r] = zs_gpu_alloc(n * dsz, why, sizeof why)) ||
				    zs_gpu_copy(dx[r], x[r], n * dsz, true, why, sizeof why))
					fail_msg("%s", why);
			}
			dacc = zs_gpu_alloc(n * 4, why, sizeof why);
			dcopy = zs_gpu_alloc(n * 4, why, sizeof why);
			dbacc = zs_gpu_alloc(n * sizeof *dbacc, why, sizeof why);
			if (!dacc || !dcopy || !dbacc ||
			    zs_gpu_copy(dbacc, bacc, n * sizeof *dbacc, true, why, sizeof why))
				fail_msg("%s", why);
			/* the host in one order, the device in another */
			for (int r = 0; r < 3; r++)
				zs_bsum_deposit(bacc, x[r], dt, n);
			bstate = malloc((n + 1) * sizeof *bstate);
			memcpy(bstate, bacc, n * sizeof *bacc);
			zs_bsum_finish(acc, bacc, 3, n);
			zs_scale(acc, 0.37f, n);
			zs_convert_from_f32(copy, dt, acc, n);
			for (int r = 2; r >= 0; r--)
				if (zs_gpu_bsum_deposit(dbacc, dx[r], dt, n, why, sizeof why))
					fail_msg("%s", why);
			if (zs_gpu_copy(bacc, dbacc, n * sizeof *bacc, false, why, sizeof why))
				fail_msg("%s", why);
			if (memcmp(bacc, bstate, n * sizeof *bacc))
				fail_msg("the %s reduction state of %zu elements differs", zs_dtype_name(dt), n);
			free(bstate);
			if (zs_gpu_bsum_finish(dacc, dbacc, 3, n, why, sizeof why) ||
			    zs_gpu_scale(dacc, 0.37f, n, why, sizeof why) ||
			    zs_gpu_from_f32(dcopy, dt, dacc, n, why, sizeof why))
				fail_msg("%s", why);
			same(dacc, acc, n, zs_dtype_name(dt), n, 0);
			back = malloc(n * 4 + 4);
			if (zs_gpu_copy(back, dcopy, n * dsz, false, why, sizeof why))
				fail_msg("%s", why);
			if (memcmp(back, copy, n * dsz))
				fail_msg("the %s copy of %zu elements differs", zs_dtype_name(dt), n);
			free(back);
			for (int r = 0; r < 3; r++) {
				zs_gpu_free(dx[r]);
				free(x[r]);
			}
			zs_gpu_free(dacc);
			zs_gpu_free(dcopy);
			zs_gpu_free(dbacc);
			free(bacc);
			free(acc);
			free(f);
			free(copy);
		}
}

/* Without a device every call says so plainly, none crashes. */
static void test_no_device_is_plain(void **st)
{
	char why[256] = "";
	(void)st;
	if (zs_gpu_available(why, sizeof why)) {
		printf("test_gpu: skipped: a device is here (this checks the machines without)\n");
		skip();
	}
	assert_true(strlen(why) > 0);
	assert_null(zs_gpu_alloc(64, why, sizeof why));
	assert_true(strstr(why, "cudaMalloc") != NULL);
}

int main(int argc, char **argv)
{
	/* --probe: whether a device is here (tests/gpu/run.sh asks) */
	if (argc > 1 && !strcmp(argv[1], "--probe")) {
		char why[256];
		if (!zs_gpu_available(why, sizeof why)) {
			printf("%s\n", why);
			return 77;
		}
		return 0;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adamw_bitwise),
		cmocka_unit_test(test_sgd_bitwise),
		cmocka_unit_test(test_adam_adagrad_bitwise),
		cmocka_unit_test(test_reduce_bitwise),
		cmocka_unit_test(test_no_device_is_plain),
	};
	return cmocka_run_group_tests_name("gpu", tests, NULL, NULL);
}
