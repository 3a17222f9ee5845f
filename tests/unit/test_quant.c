/*
 * test_quant.c - block quantization (math/quant.c) against an independent
 * reference: E4M3FN decoded from its definition in doubles for all 256
 * codes, and encoded by searching every finite code for the nearest value
 * (ties to the even code), over every exact value, every tie, the values
 * a hair off each tie, saturation and a million random floats across the
 * range; int8 and E4M3 blocks within half a step of their inputs, a
 * short last block, a zero block, non-finite values refused, the same
 * bytes every time; error feedback losing nothing over many pushes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "math/quant.h"

/* E4M3FN by its definition (no code shared with math/quant.h). */
static double ref_decode(unsigned b)
{
	const int s = b >> 7, E = (b >> 3) & 15, m = b & 7;
	double v;

	if (E == 15 && m == 7)
		return NAN;
	v = E ? ldexp(1.0 + m / 8.0, E - 7) : ldexp(m / 8.0, -6);
	return s ? -v : v;
}

/* The nearest finite code to x (ties: the even code), saturating. */
static unsigned ref_encode(float x)
{
	const double a = fabs((double)x);
	const unsigned s = signbit(x) ? 0x80 : 0;
	unsigned best = 0;
	double bd = INFINITY;

	if (isnan(x))
		return s | 0x7f;
	for (unsigned c = 0; c <= 0x7e; c++) {
		const double d = fabs(ref_decode(c) - a);
		if (d < bd || (d == bd && !(c & 1))) {
			bd = d;
			best = c;
		}
	}
	return s | best;
}

static uint32_t bits(float v)
{
	uint32_t u;
	memcpy(&u, &v, 4);
	return u;
}

static void test_e4m3_decode(void **st)
{
	(void)st;
	for (unsigned b = 0; b < 256; b++) {
		const double r = ref_decode(b);
		const float v = zs_e4m3_to_f32((uint8_t)b);
		if (isnan(r))
			assert_true(isnan(v));
		else
			assert_true(bits(v) == bits((float)r));
	}
	assert_true(zs_e4m3_to_f32(0x7e) == 448.0f);
	assert_true(zs_e4m3_to_f32(0x01) == 0x1p-9f);
}

static void check_encode(float x)
{
	const unsigned got = zs_e4m3_from_f32(x), want = ref_encode(x);

	if (got != want)
		fail_msg("e4m3(%a) = 0x%02x, the nearest code is 0x%02x", (double)x, got, want);
}

static void test_e4m3_encode(void **st)
{
	(void)st;
	for (unsigned c = 0; c < 0x7e; c++) {
		const double lo = ref_decode(c), hi = ref_decode(c + 1), mid = (lo + hi) / 2;
		const float f = (float)mid; /* the ties are exact in fp32 */
		for (int sgn = 0; sgn < 2; sgn++) {
			const float k = sgn ? -1.0f : 1.0f;
			check_encode(k * (float)lo);
			check_encode(k * f);
			check_encode(k * nextafterf(f, 0.0f));
			check_encode(k * nextafterf(f, INFINITY));
		}
	}
	const float edge[] = {0.0f, -0.0f, 0x1p-10f, 0x1p-11f, 0x1.0p-10f * 1.5f, 448.0f, 449.0f,
			      463.9f, 464.0f, 465.0f, 1e30f, INFINITY, -INFINITY, 0x1p-149f,
			      0x1p-126f};
	for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
		check_encode(edge[i]);
	srand(7);
	for (int i = 0; i < 1000000; i++) {
		const float x = ldexpf((float)rand() / (float)RAND_MAX, rand() % 24 - 14) *
				(rand() & 1 ? 1.0f : -1.0f);
		check_encode(x);
	}
}

static float *random_block(size_t n, unsigned seed, float amp)
{
	float *x = malloc(n * sizeof *x);

	srand(seed);
	for (size_t i = 0; i < n; i++)
		x[i] = amp * (2.0f * (float)rand() / (float)RAND_MAX - 1.0f);
	return x;
}

/* Each value within half a step of its input; the same bytes twice. */
static void round_trip(enum zs_qfmt f, size_t n, uint32_t block)
{
	float *x = random_block(n, (unsigned)n + block, 3.5f), *y = malloc(n * sizeof *y);
	size_t nb = zs_q_bytes(f, n, block);
	uint8_t *q = malloc(nb), *q2 = malloc(nb);

	x[0] = -7.25f; /* the first block's max: -127 or -448 exactly */
	assert_int_equal(zs_q_encode(f, x, n, block, q), 0);
	assert_int_equal(zs_q_encode(f, x, n, block, q2), 0);
	assert_memory_equal(q, q2, nb);
	zs_q_decode(f, q, n, block, y);
	assert_true(y[0] == -7.25f);
	for (size_t i = 0; i < n; i++) {
		float scale;
		memcpy(&scale, q + (i / block) * 4, 4);
		/* int8: half a code; e4m3: half an ulp of 3 bits (1/16 of the
		 * value) or half the least subnormal */
		const double bound = f == ZS_Q_INT8 ? 0.5 * scale * 1.0001
					 : fmax(fabs(x[i]) / 16.0 * 1.0001, scale * 0x1p-10);
		if (fabs((double)x[i] - y[i]) > bound)
			fail_msg("%s block %u: x[%zu] = %a came back %a", zs_qfmt_name(f), block, i,
				 (double)x[i], (double)y[i]);
	}
	free(x);
	free(y);
	free(q);
	free(q2);
}

static void test_blocks(void **st)
{
	(void)st;
	for (int f = ZS_Q_INT8; f <= ZS_Q_E4M3; f++) {
		round_trip((enum zs_qfmt)f, 4096, 128);
		round_trip((enum zs_qfmt)f, 1000, 128); /* a short last block */
		round_trip((enum zs_qfmt)f, 7, 256);    /* one short block */
		round_trip((enum zs_qfmt)f, 513, 1);
	}
	assert_int_equal(zs_q_bytes(ZS_Q_INT8, 1000, 128), 8 * 4 + 1000);
	assert_int_equal(zs_q_bytes(ZS_Q_NONE, 1000, 128), 0);
}

/* A zero block: scale 0, codes 0, zeros back. A NaN or an infinity: refused. */
static void test_zero_and_refused(void **st)
{
	float x[300] = {0}, y[300];
	uint8_t q[3 * 4 + 300];

	(void)st;
	for (int f = ZS_Q_INT8; f <= ZS_Q_E4M3; f++) {
		x[200] = 1.0f;
		assert_int_equal(zs_q_encode((enum zs_qfmt)f, x, 300, 128, q), 0);
		for (int i = 0; i < 128; i++)
			assert_int_equal(q[12 + i], 0);
		zs_q_decode((enum zs_qfmt)f, q, 300, 128, y);
		assert_true(y[5] == 0.0f && y[200] == 1.0f);
		x[17] = NAN;
		assert_int_equal(zs_q_encode((enum zs_qfmt)f, x, 300, 128, q), -1);
		x[17] = INFINITY;
		assert_int_equal(zs_q_encode((enum zs_qfmt)f, x, 300, 128, q), -1);
		x[17] = 0.0f;
	}
	assert_int_equal(zs_qfmt_parse("int8"), ZS_Q_INT8);
	assert_int_equal(zs_qfmt_parse("e4m3"), ZS_Q_E4M3);
	assert_int_equal(zs_qfmt_parse("none"), ZS_Q_NONE);
	assert_int_equal(zs_qfmt_parse("int4"), -1);
}

/* Error feedback: what a push leaves out goes with the next, so the sum
 * of K pushes of x comes to K x but for the last residual; and it is the
 * same every time. */
static void test_error_feedback(void **st)
{
	enum { N = 1024, K = 64 };
	float *x = random_block(N, 11, 0.01f), r[N] = {0}, r2[N] = {0}, scratch[N], y[N];
	double sum[N] = {0};
	uint8_t q[8 * 4 + N], q2[8 * 4 + N];

	(void)st;
	x[3] = 1.0f; /* a large value beside small ones: most of the block's codes round to 0 */
	for (int k = 0; k < K; k++) {
		assert_int_equal(zs_q_encode_ef(ZS_Q_INT8, x, r, N, 128, q, scratch), 0);
		assert_int_equal(zs_q_encode_ef(ZS_Q_INT8, x, r2, N, 128, q2, scratch), 0);
		assert_memory_equal(q, q2, sizeof q);
		zs_q_decode(ZS_Q_INT8, q, N, 128, y);
		for (int i = 0; i < N; i++)
			sum[i] += y[i];
	}
	for (int i = 0; i < N; i++)
		if (fabs(sum[i] + r[i] - (double)K * x[i]) > 1e-4 * (1.0 + K * fabs(x[i])))
			fail_msg("element %d: %d pushes of %a sum to %a, residual %a", i, K, (double)x[i],
				 sum[i], (double)r[i]);
	free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_e4m3_decode),      cmocka_unit_test(test_e4m3_encode),
	    cmocka_unit_test(test_blocks),           cmocka_unit_test(test_zero_and_refused),
	    cmocka_unit_test(test_error_feedback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
