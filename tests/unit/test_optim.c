/*
 * test_optim.c - the server's math against an independent reference:
 * optimizer updates bitwise equal to PyTorch's formulas evaluated by numpy
 * (tests/ref/optim_ref.py), fp16 conversion equal to numpy's, bf16 by its
 * rounding rule, clipping, and the threaded update (the reduction:
 * test_bsum.c)
 * bitwise equal to the serial one.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "math/optim.h"

#define PY "/usr/bin/python3"

static uint32_t rng = 2463534242u;
static float frand(void) /* xorshift, in [-1, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return (float)((double)rng / 2147483648.0 - 1.0);
}

static char ref_script[1024];

static int have_numpy(void)
{
	static int cached = -1;
	if (cached < 0) {
		const char *root = getenv("ZSHARD_ROOT");
		snprintf(ref_script, sizeof ref_script, "%s/tests/ref/optim_ref.py",
			 root ? root : ".");
		cached = system(PY " -c 'import numpy' 2>/dev/null") == 0;
		if (!cached)
			printf("[  SKIP    ] no numpy for %s: install python3-numpy "
			       "(make check does)\n", PY);
	}
	return cached;
}

static void write_f32(const char *path, const float *x, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(x, 4, n, f), n);
	fclose(f);
}

static void read_all(const char *path, void *x, size_t bytes)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	assert_int_equal(fread(x, 1, bytes, f), bytes);
	fclose(f);
}

/* Runs STEPS updates in C and in the reference; demands equal bits. */
static void check_against_ref(const struct zs_optim_step *cfg, unsigned steps, size_t n)
{
	char in[] = "/tmp/zshard-optin-XXXXXX", out[] = "/tmp/zshard-optout-XXXXXX";
	char cmd[2048];
	float *p = malloc(n * 4), *s0 = calloc(n, 4), *s1 = calloc(n, 4);
	float *buf = malloc((steps + 1) * n * 4), *ref = malloc(3 * n * 4);
	struct zs_optim_step s = *cfg;
	size_t diff = 0;

	close(mkstemp(in));
	close(mkstemp(out));
	for (size_t i = 0; i < n; i++)
		p[i] = buf[i] = frand() * 2.0f;
	for (unsigned t = 0; t < steps; t++)
		for (size_t i = 0; i < n; i++)
			/* grads of several magnitudes, some exactly zero */
			buf[(t + 1) * n + i] = i % 97 == 0 ? 0.0f : frand() * (i % 3 ? 1e-3f : 5.0f);
	write_f32(in, buf, (steps + 1) * n);
	for (unsigned t = 1; t <= steps; t++) {
		s.t = t;
		zs_optim_apply(&s, p, s0, s1, buf + t * n, n);
	}
	snprintf(cmd, sizeof cmd, PY " %s optim %s %.17g %.17g %.17g %.17g %.17g %.17g %u %zu %s %s",
		 ref_script, zs_optim_name(cfg->kind), cfg->lr, cfg->beta1,
		 cfg->beta2, cfg->eps, cfg->weight_decay, cfg->momentum, steps, n, in, out);
	assert_int_equal(system(cmd), 0);
	read_all(out, ref, 3 * n * 4);
	for (size_t i = 0; i < n; i++) {
		diff += memcmp(&p[i], &ref[i], 4) != 0;
		if (cfg->kind != ZS_SGD || cfg->momentum != 0.0)
			diff += memcmp(&s0[i], &ref[n + i], 4) != 0;
		if (ZS_OPTIM_ADAM_FAMILY(cfg->kind))
			diff += memcmp(&s1[i], &ref[2 * n + i], 4) != 0;
	}
	if (diff) {
		for (size_t i = 0; i < n; i++)
			if (memcmp(&p[i], &ref[i], 4)) {
				fail_msg("%zu values differ; first: param[%zu] = %.9g, reference %.9g",
					 diff, i, p[i], ref[i]);
			}
		fail_msg("%zu optimizer-state values differ from the reference", diff);
	}
	unlink(in);
	unlink(out);
	free(p);
	free(s0);
	free(s1);
	free(buf);
	free(ref);
}

static void test_adamw_matches_reference(void **st)
{
	struct zs_optim_step s = {.kind = ZS_ADAMW, .lr = 1e-3, .beta1 = 0.9,
				  .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01};
	(void)st;
	if (!have_numpy())
		skip();
	check_against_ref(&s, 7, 4099);
	s.lr = 0.3;
	s.beta1 = 0.5;
	s.beta2 = 0.75;
	s.eps = 1e-3;
	s.weight_decay = 0.0;
	check_against_ref(&s, 3, 1000);
}

static void test_sgd_matches_reference(void **st)
{
	struct zs_optim_step s = {.kind = ZS_SGD, .lr = 0.05, .momentum = 0.9,
				  .weight_decay = 1e-4};
	(void)st;
	if (!have_numpy())
		skip();
	check_against_ref(&s, 6, 4099);
	s.momentum = 0.0;
	s.weight_decay = 0.0;
	check_against_ref(&s, 4, 513);
}

/* Adam: the L2 term added to the gradient (and, without it, AdamW's update
 * with no decay); numbers where p * wd matters against g. */
static void test_adam_matches_reference(void **st)
{
	struct zs_optim_step s = {.kind = ZS_ADAM, .lr = 1e-3, .beta1 = 0.9,
				  .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.05};
	(void)st;
	if (!have_numpy())
		skip();
	check_against_ref(&s, 7, 4099);
	s.lr = 0.2;
	s.beta1 = 0.6;
	s.beta2 = 0.8;
	s.weight_decay = 0.0;
	check_against_ref(&s, 3, 1000);
}

/* Adagrad: torch's defaults (eps 1e-10), then L2 decay and a larger eps. */
static void test_adagrad_matches_reference(void **st)
{
	struct zs_optim_step s = {.kind = ZS_ADAGRAD, .lr = 1e-2, .eps = 1e-10};
	(void)st;
	if (!have_numpy())
		skip();
	check_against_ref(&s, 6, 4099);
	s.lr = 0.5;
	s.eps = 1e-3;
	s.weight_decay = 0.1;
	check_against_ref(&s, 5, 1000);
}

static void test_parallel_bitwise(void **st)
{
	const size_t n = (1 << 18) + 37;
	float *p1 = malloc(n * 4), *p2 = malloc(n * 4), *m1 = calloc(n, 4), *m2 = calloc(n, 4);
	float *v1 = calloc(n, 4), *v2 = calloc(n, 4), *g = malloc(n * 4);
	struct zs_optim_step s = {.kind = ZS_ADAMW, .lr = 1e-3, .beta1 = 0.9,
				  .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};

	(void)st;
	for (size_t i = 0; i < n; i++) {
		p1[i] = p2[i] = frand();
		g[i] = frand();
	}
	for (s.t = 1; s.t <= 3; s.t++) {
		zs_optim_apply(&s, p1, m1, v1, g, n);
		zs_optim_apply_parallel(&s, p2, m2, v2, g, n, 3);
	}
	/* n / k a multiple of 16 with a remainder: the last part still
	 * reaches the end (2 * 74224 + 1) */
	for (s.t = 4; s.t <= 5; s.t++) {
		zs_optim_apply(&s, p1, m1, v1, g, 148449);
		zs_optim_apply_parallel(&s, p2, m2, v2, g, 148449, 2);
	}
	assert_memory_equal(p1, p2, n * 4);
	assert_memory_equal(m1, m2, n * 4);
	assert_memory_equal(v1, v2, n * 4);
	free(p1); free(p2); free(m1); free(m2); free(v1); free(v2); free(g);
}

static void test_f16_matches_numpy(void **st)
{
	char in[] = "/tmp/zshard-f16in-XXXXXX", out[] = "/tmp/zshard-f16out-XXXXXX";
	char cmd[2048];
	size_t n = 0, cap = 1 << 20;
	float *x = malloc(cap * 4);
	uint16_t *ref = malloc(cap * 2);

	(void)st;
	if (!have_numpy())
		skip();
	close(mkstemp(in));
	close(mkstemp(out));
	/* every binary16 value, the midpoints between neighbours (ties), and
	 * points just off them, plus overflow and underflow edges */
	for (uint32_t h = 0; h < 0x7c00; h++) {
		float a = zs_f16_to_f32((uint16_t)h), b = zs_f16_to_f32((uint16_t)(h + 1));
		float mid = (float)(((double)a + (double)b) / 2.0);
		x[n++] = a;
		x[n++] = -a;
		x[n++] = mid;
		x[n++] = nextafterf(mid, 0.0f);
		x[n++] = nextafterf(mid, INFINITY);
		x[n++] = -mid;
	}
	x[n++] = 65520.0f;
	x[n++] = 65519.99f;
	x[n++] = 1e10f;
	x[n++] = 1e-10f;
	x[n++] = INFINITY;
	x[n++] = -INFINITY;
	write_f32(in, x, n);
	snprintf(cmd, sizeof cmd, PY " %s f16 %s %s", ref_script, in, out);
	assert_int_equal(system(cmd), 0);
	read_all(out, ref, n * 2);
	for (size_t i = 0; i < n; i++) {
		uint16_t h = zs_f32_to_f16(x[i]);
		if (h != ref[i])
			fail_msg("f16(%a) = 0x%04x, numpy 0x%04x", (double)x[i], h, ref[i]);
		if ((h & 0x7c00) != 0x7c00) /* finite: back to f32 and again is exact */
			assert_int_equal(zs_f32_to_f16(zs_f16_to_f32(h)), h);
	}
	assert_true(isnan(zs_f16_to_f32(zs_f32_to_f16(NAN))));
	unlink(in);
	unlink(out);
	free(x);
	free(ref);
}

static void test_bf16_rounding(void **st)
{
	(void)st;
	assert_int_equal(zs_f32_to_bf16(1.0f), 0x3f80);
	/* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0) */
	assert_int_equal(zs_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
	/* 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6: up */
	assert_int_equal(zs_f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
	assert_int_equal(zs_f32_to_bf16(nextafterf(1.0f + 1.0f / 256, 2.0f)), 0x3f81);
	assert_int_equal(zs_f32_to_bf16(-2.0f), 0xc000);
	assert_int_equal(zs_f32_to_bf16(INFINITY), 0x7f80);
	assert_true(isnan(zs_bf16_to_f32(zs_f32_to_bf16(NAN))));
	assert_true(zs_bf16_to_f32(zs_f32_to_bf16(3.0e38f)) == INFINITY ||
		    zs_bf16_to_f32(zs_f32_to_bf16(3.0e38f)) > 2.9e38f);
	for (uint32_t h = 0; h < 0x7f80; h += 7) /* exact round trip */
		assert_int_equal(zs_f32_to_bf16(zs_bf16_to_f32((uint16_t)h)), h);
}

static void test_clip(void **st)
{
	float x[4] = {3, 4, 0, 0};
	(void)st;
	assert_true(zs_sumsq(x, 4) == 25.0);
	assert_true(zs_clip_coef(25.0, 0.0) == 1.0f);
	assert_true(zs_clip_coef(25.0, 10.0) == 1.0f);
	assert_true(zs_clip_coef(25.0, 1.0) == (float)(1.0 / (5.0 + 1e-6)));
	zs_scale(x, 0.5f, 4);
	assert_true(x[0] == 1.5f && x[1] == 2.0f);
}

/* Every value the kernels write that is a NaN is 0x7fc00000, whatever NaN
 * went in (a sign, a payload, a signalling one): IEEE leaves a NaN result's
 * bits to the hardware, and the CUDA kernels must give the host's bits
 * (test_gpu holds them to these). Each optimizer, the reduction's mean and
 * the clipping scale, over lengths that reach the vector loops' tails. */
static int canonical(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], 4);
		if (x[i] != x[i] && u != 0x7fc00000u)
			return 0;
	}
	return 1;
}

static void test_nan_is_canonical(void **st)
{
	static const uint32_t nans[] = {0xffc00000u, 0x7fc00123u, 0xffffffffu, 0x7f800001u};
	static const enum zs_optim_kind kinds[] = {ZS_ADAMW, ZS_ADAM, ZS_SGD, ZS_ADAGRAD};
	enum { N = 77 };
	float p[N], s0[N], s1[N], g[N], out[N];
	struct zs_bacc acc[N];
	(void)st;
	for (int k = 0; k < 4; k++)
		for (uint64_t t = 1; t <= 2; t++) {
			struct zs_optim_step s = {.kind = kinds[k], .lr = 1e-2, .beta1 = 0.9,
						  .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1,
						  .momentum = 0.9, .t = t};
			for (size_t i = 0; i < N; i++) {
				p[i] = frand();
				s0[i] = t == 1 ? 0.0f : frand() * frand();
				s1[i] = t == 1 ? 0.0f : frand() * frand();
				g[i] = frand();
				if (i % 5 == 1)
					memcpy(&g[i], &nans[i % 4], 4);
				if (i % 7 == 3)
					memcpy(&p[i], &nans[(i + 1) % 4], 4);
			}
			zs_optim_apply(&s, p, s0, s1, g, N);
			if (!canonical(p, N) || !canonical(s0, N) || !canonical(s1, N))
				fail_msg("optimizer %d, step %llu: a NaN written is not 0x7fc00000",
					 (int)kinds[k], (unsigned long long)t);
			assert_true(p[1] != p[1]); /* a NaN gradient made a NaN */
		}
	/* the mean of terms with a NaN, and of both infinities */
	memset(acc, 0, sizeof acc);
	for (size_t i = 0; i < N; i++) {
		g[i] = frand();
		if (i % 5 == 1)
			memcpy(&g[i], &nans[i % 4], 4);
		if (i % 11 == 2)
			g[i] = INFINITY;
	}
	zs_bsum_deposit(acc, g, ZS_F32, N);
	for (size_t i = 0; i < N; i++)
		g[i] = i % 11 == 2 ? -INFINITY : frand();
	zs_bsum_deposit(acc, g, ZS_F32, N);
	zs_bsum_finish(out, acc, 2, N);
	assert_true(out[1] != out[1] && out[2] != out[2]);
	assert_true(canonical(out, N));
	for (size_t i = 0; i < N; i++)
		if (i % 3 == 0)
			memcpy(&out[i], &nans[i % 4], 4);
	zs_scale(out, 0.5f, N);
	assert_true(canonical(out, N));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_adamw_matches_reference),
		cmocka_unit_test(test_sgd_matches_reference),
		cmocka_unit_test(test_adam_matches_reference),
		cmocka_unit_test(test_adagrad_matches_reference),
		cmocka_unit_test(test_parallel_bitwise),
		cmocka_unit_test(test_f16_matches_numpy),
		cmocka_unit_test(test_bf16_rounding),
		cmocka_unit_test(test_clip),
		cmocka_unit_test(test_nan_is_canonical),
	};
	return cmocka_run_group_tests_name("optim", tests, NULL, NULL);
}
