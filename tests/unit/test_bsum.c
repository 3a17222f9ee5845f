/*
 * test_bsum.c - the gradient reduction (math/bsum.h): bitwise equal to its
 * definition evaluated by an independent reference (tests/ref/bsum_ref.py,
 * Python integers), the same state and bits whatever order the terms
 * arrive in, exact where no term is truncated, and no overflow at the
 * largest number of terms it takes.
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
#include <unistd.h>

#include "math/optim.h"

#define PY "/usr/bin/python3"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) /* xorshift64 */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* A random fp32 of any magnitude: normal, subnormal, near the top. */
static float any_float(void)
{
	return zs_f32_from_bits(rnd() % 0x7f800000u | (rnd() & 1u) << 31);
}

/*
 * Element i of n gets R terms meant to hurt: mixed exponents, exact
 * cancellation, sums at the overflow edge, subnormals, ties at the
 * rounding point, zeros and signed zeros, and non-finite terms.
 */
static void adversarial(float *x, unsigned R, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned kind = (unsigned)(i % 12);
		for (unsigned r = 0; r < R; r++) {
			float *v = &x[(size_t)r * n + i];
			uint32_t e = 1 + rnd() % 253;
			switch (kind) {
			case 0: /* anything */
				*v = any_float();
				break;
			case 1: /* one exponent band, the usual gradient */
				*v = zs_f32_from_bits((115u << 23 | (rnd() & 0x7fffff)) | (rnd() & 1u) << 31);
				break;
			case 2: /* cancellation: +a, -a pairs and one small term */
				*v = r == R - 1 ? zs_f32_from_bits(60u << 23 | (rnd() & 0x7fffff))
				     : (r & 1) ? -x[(size_t)(r - 1) * n + i] : any_float();
				break;
			case 3: /* at the overflow edge */
				*v = FLT_MAX * (r % 3 ? 0.75f : -0.25f);
				break;
			case 4: /* subnormals */
				*v = zs_f32_from_bits((rnd() % 0x800000u) | (rnd() & 1u) << 31);
				break;
			case 5: /* ties: 2^24 + 1 style sums */
				*v = r == 0 ? 16777216.0f : r == 1 ? 1.0f : r == 2 ? -0.0f : 0.0f;
				break;
			case 6: /* two magnitudes 40 bits apart: truncation */
				*v = zs_f32_from_bits((r ? e : (e + 40 < 254 ? e + 40 : 254)) << 23 |
					       (rnd() & 0x7fffff));
				break;
			case 7: /* zeros, both signs */
				*v = r & 1 ? -0.0f : 0.0f;
				break;
			case 8: /* a NaN among them */
				*v = r == R / 2 ? NAN : any_float();
				break;
			case 9: /* +inf */
				*v = r == 1 ? INFINITY : any_float();
				break;
			case 10: /* both infinities */
				*v = r == 0 ? -INFINITY : r == R - 1 ? INFINITY : any_float();
				break;
			default: /* exponents one bin apart, both signs */
				*v = zs_f32_from_bits(((e % 30) + 30 * (r % 3) + 1) << 23 | (rnd() & 0x7fffff) |
					       (r & 1u) << 31);
			}
		}
	}
}

/* Sums the R terms of each element, term by term in order[] (R entries). */
static void sum_in(const float *x, unsigned R, size_t n, const unsigned *order,
		   struct zs_bacc *acc, float *out)
{
	memset(acc, 0, n * sizeof *acc);
	for (unsigned k = 0; k < R; k++)
		zs_bsum_deposit(acc, x + (size_t)order[k] * n, ZS_F32, n);
	zs_bsum_finish(out, acc, 1, n);
}

static void shuffle(unsigned *o, unsigned R)
{
	for (unsigned k = R - 1; k > 0; k--) {
		unsigned j = rnd() % (k + 1), t = o[k];
		o[k] = o[j];
		o[j] = t;
	}
}

static void test_matches_reference(void **st)
{
	enum { R = 7, N = 6000 };
	char in[] = "/tmp/zshard-bsumin-XXXXXX", outp[] = "/tmp/zshard-bsumout-XXXXXX";
	char cmd[2048];
	const char *root = getenv("ZSHARD_ROOT");
	float *x = malloc(sizeof(float) * R * N), *out = malloc(N * 4);
	uint32_t *ref = malloc(N * 4);
	struct zs_bacc *acc = malloc(N * sizeof *acc);
	unsigned order[R] = {0, 1, 2, 3, 4, 5, 6};
	FILE *f;
	size_t diff = 0;

	(void)st;
	if (system(PY " -c 'import numpy' 2>/dev/null") != 0) {
		printf("[  SKIP    ] no numpy for %s: install python3-numpy (make check does)\n", PY);
		skip();
	}
	adversarial(x, R, N);
	close(mkstemp(in));
	close(mkstemp(outp));
	f = fopen(in, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(x, 4, (size_t)R * N, f), (size_t)R * N);
	fclose(f);
	snprintf(cmd, sizeof cmd, PY " %s/tests/ref/bsum_ref.py %d %d %s %s", root ? root : ".", R,
		 N, in, outp);
	assert_int_equal(system(cmd), 0);
	f = fopen(outp, "rb");
	assert_non_null(f);
	assert_int_equal(fread(ref, 4, N, f), N);
	fclose(f);
	shuffle(order, R); /* any order: the reference has none */
	sum_in(x, R, N, order, acc, out);
	for (size_t i = 0; i < N; i++)
		if (zs_f32_bits(out[i]) != ref[i] && diff++ < 5)
			printf("element %zu (kind %zu): 0x%08x, reference 0x%08x\n", i, i % 12,
			       zs_f32_bits(out[i]), ref[i]);
	unlink(in);
	unlink(outp);
	assert_int_equal(diff, 0);
	free(x);
	free(out);
	free(ref);
	free(acc);
}

/* Forward, reverse, and random orders; also split by elements. */
static void test_order_independent(void **st)
{
	enum { R = 64, N = 1200 };
	float *x = malloc(sizeof(float) * R * N), *first = malloc(N * 4), *out = malloc(N * 4);
	struct zs_bacc *acc = malloc(N * sizeof *acc), *state0 = malloc(N * sizeof *acc);
	unsigned order[R];

	(void)st;
	adversarial(x, R, N);
	for (unsigned r = 0; r < R; r++)
		order[r] = r;
	/* the state itself, before rounding, is the same in any order */
	memset(state0, 0, N * sizeof *acc);
	for (unsigned k = 0; k < R; k++)
		zs_bsum_deposit(state0, x + (size_t)k * N, ZS_F32, N);
	sum_in(x, R, N, order, acc, first);
	for (int trial = 0; trial < 24; trial++) {
		if (trial == 0) {
			for (unsigned r = 0; r < R; r++)
				order[r] = R - 1 - r;
		} else if (trial == 1) { /* the largest-magnitude rank last */
			for (unsigned r = 0; r < R; r++)
				order[r] = (r + 1) % R;
		} else {
			shuffle(order, R);
		}
		memset(acc, 0, N * sizeof *acc);
		/* element ranges in a different order per rank: any interleaving */
		for (unsigned k = 0; k < R; k++) {
			size_t cut = rnd() % N;
			const float *c = x + (size_t)order[k] * N;
			zs_bsum_deposit(acc + cut, c + cut, ZS_F32, N - cut);
			zs_bsum_deposit(acc, c, ZS_F32, cut);
		}
		assert_memory_equal(acc, state0, N * sizeof *acc);
		zs_bsum_finish(out, acc, 1, N);
		assert_memory_equal(out, first, N * 4);
		for (size_t i = 0; i < N; i++) /* finish leaves it empty */
			assert_true(acc[i].hi == 0 && acc[i].lo == 0);
	}
	free(x);
	free(first);
	free(out);
	free(acc);
	free(state0);
}

/* Terms within 2^6 of each other lose nothing: the correctly rounded sum. */
static void test_exact_when_close(void **st)
{
	enum { R = 9, N = 4000 };
	float x[R], out;
	struct zs_bacc a;
	uint16_t h[R];

	(void)st;
	for (size_t i = 0; i < N; i++) {
		uint32_t e = 1 + rnd() % 240;
		double exact = 0.0;
		memset(&a, 0, sizeof a);
		for (unsigned r = 0; r < R; r++) {
			x[r] = zs_f32_from_bits((e + rnd() % 7) << 23 | (rnd() & 0x7fffff) | (rnd() & 1u) << 31);
			exact += x[r]; /* exact in double: 24 + 6 + 4 bits */
			zs_bsum_add(&a, x[r]);
		}
		zs_bsum_finish(&out, &a, 1, 1);
		assert_true(zs_f32_bits(out) == zs_f32_bits((float)exact) || (exact == 0.0 && out == 0.0f));
	}
	/* bf16 and f16 terms are widened exactly first */
	for (unsigned r = 0; r < R; r++)
		x[r] = (float)r * 0.375f - 1.0f;
	zs_convert_from_f32(h, ZS_BF16, x, R);
	memset(&a, 0, sizeof a);
	for (unsigned r = 0; r < R; r++)
		zs_bsum_deposit(&a, &h[r], ZS_BF16, 1);
	zs_bsum_finish(&out, &a, 3, 1);
	assert_true(out == 1.5f); /* (0.375 * 36 - 9) / 3 */
}

/*
 * Deposits of whole arrays take a vectorized loop for blocks of normal and
 * zero terms: it must leave the state zs_bsum_add leaves, bins moving up
 * included, also when the same elements take the other path in another
 * push (a subnormal or non-finite term in the block).
 */
static void test_block_path_is_zs_bsum_add(void **st)
{
	enum { R = 12, N = 5000 };
	float *x = malloc(sizeof(float) * R * N);
	struct zs_bacc *a = calloc(N, sizeof *a), *b = calloc(N, sizeof *b);

	(void)st;
	for (unsigned r = 0; r < R; r++)
		for (size_t i = 0; i < N; i++) {
			float *v = &x[(size_t)r * N + i];
			uint32_t e = rnd() % 3 == 0 ? 1 + rnd() % 254 : 100 + r * 5 + rnd() % 4;
			*v = rnd() % 17 == 0 ? 0.0f
					      : zs_f32_from_bits(e << 23 | (rnd() & 0x7fffff) | (rnd() & 1u) << 31);
			/* pushes 3 and 7: a subnormal or an infinity in some blocks */
			if ((r == 3 || r == 7) && i % 700 == 5)
				*v = r == 3 ? zs_f32_from_bits(0x1234u) : -INFINITY;
		}
	for (unsigned r = 0; r < R; r++) {
		zs_bsum_deposit(a, x + (size_t)r * N, ZS_F32, N);
		for (size_t i = 0; i < N; i++)
			zs_bsum_add(&b[i], x[(size_t)r * N + i]);
		assert_memory_equal(a, b, N * sizeof *a);
	}
	free(x);
	free(a);
	free(b);
}

/*
 * zs_bsum_finish rounds most elements in a vectorized loop (the integer sum
 * converted once, then scaled) and leaves the rest to zs_bsum_value: every
 * state must give zs_bsum_value's bits divided by the count, whichever way
 * it goes. States drawn near every edge: sums of either sign past 64 bits
 * or near it, results near the bottom of the normal range (subnormal or
 * rounding up into it), near the top (rounding up to infinity), ties, zero
 * with any bin, the non-finite flags; mixed in one block.
 */
static void test_finish_is_zs_bsum_value(void **st)
{
	enum { N = 20000 };
	struct zs_bacc *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
	float *out = malloc(N * sizeof *out);
	static const uint32_t counts[] = {1, 2, 3, 64, 1000};

	(void)st;
	for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; c++) {
		for (size_t i = 0; i < N; i++) {
			uint64_t t = rnd() % 10, fl = 0;
			int64_t hi, lo;
			switch (rnd() % 8) {
			case 0: /* anything up to 2^40 in the top bin */
				hi = (int64_t)(((uint64_t)rnd() << 8) ^ rnd()) - (1ll << 39);
				lo = (int64_t)rnd() - (1ll << 31);
				break;
			case 1: /* around 2^32 in the top bin: the 64-bit edge */
				hi = ((1ll << 32) - 4 + rnd() % 8) * (rnd() & 1 ? 1 : -1);
				lo = (int64_t)rnd() - (1ll << 31);
				break;
			case 2: /* a few units of the grid: subnormal for low bins */
				hi = 0;
				lo = (int64_t)(rnd() % (1u << 26)) - (1 << 25);
				t = rnd() % 3;
				break;
			case 3: /* 2^24 + 1 style: ties at the rounding point */
				hi = 0;
				lo = (int64_t)((1u << 24) + (rnd() % 4)) << (rnd() % 6);
				lo = rnd() & 1 ? lo : -lo;
				break;
			case 4: /* near the top: rounds to the largest float or past it */
				t = 9;
				hi = (int64_t)(0x7fffff8ull + rnd() % 16) << 20;
				lo = (int64_t)rnd() - (1ll << 31);
				break;
			case 5: /* zero, any bin */
				hi = lo = 0;
				break;
			case 6: /* a flag */
				hi = (int64_t)rnd() - (1ll << 31);
				lo = (int64_t)rnd();
				fl = (uint64_t)(1 + rnd() % 7) << 4;
				break;
			default: /* ordinary: both bins of one sign, or cancelling */
				hi = (int64_t)(rnd() % (1u << 30)) * (rnd() & 1 ? 1 : -1);
				lo = (int64_t)(rnd() % (1u << 30)) * (rnd() & 1 ? 1 : -1);
			}
			a[i].hi = hi;
			a[i].lo = (int64_t)(((uint64_t)lo << 8) | fl | t);
		}
		memcpy(b, a, N * sizeof *a);
		zs_bsum_finish(out, a, counts[c], N);
		for (size_t i = 0; i < N; i++) {
			float v = zs_bsum_value(&b[i]);
			if (counts[c] > 1)
				v /= (float)counts[c];
			if (zs_f32_bits(out[i]) != zs_f32_bits(v))
				fail_msg("count %u, state %zu (hi %lld, lo %lld): %08x, zs_bsum_value %08x",
					 counts[c], i, (long long)b[i].hi, (long long)b[i].lo,
					 zs_f32_bits(out[i]), zs_f32_bits(v));
			assert_true(a[i].hi == 0 && a[i].lo == 0); /* left empty */
		}
	}
	free(a);
	free(b);
	free(out);
}

/* The most terms an accumulator takes, each with full digits in both bins. */
static void test_max_terms(void **st)
{
	struct zs_bacc a = {0, 0};
	/* top bit at bin 5's top; 24 ones reaching into bin 4 */
	const float x = zs_f32_from_bits((uint32_t)(5 * ZS_BSUM_W + ZS_BSUM_W - 1 + 1) << 23 | 0x7fffff);
	float out;

	(void)st;
	for (uint32_t k = 0; k < ZS_BSUM_MAX_TERMS; k++)
		zs_bsum_add(&a, x);
	zs_bsum_finish(&out, &a, 1, 1);
	assert_true(out == x * (float)ZS_BSUM_MAX_TERMS); /* exact: a power of two times x */
	memset(&a, 0, sizeof a);
	for (uint32_t k = 0; k < ZS_BSUM_MAX_TERMS; k++)
		zs_bsum_add(&a, -x);
	zs_bsum_finish(&out, &a, 1, 1);
	assert_true(out == -x * (float)ZS_BSUM_MAX_TERMS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matches_reference),
		cmocka_unit_test(test_order_independent),
		cmocka_unit_test(test_exact_when_close),
		cmocka_unit_test(test_block_path_is_zs_bsum_add),
		cmocka_unit_test(test_finish_is_zs_bsum_value),
		cmocka_unit_test(test_max_terms),
	};
	return cmocka_run_group_tests_name("bsum", tests, NULL, NULL);
}
