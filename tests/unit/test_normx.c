/*
 * test_normx.c - clipping's norm exchange at the coordinator, decided
 * (model/normx.c), case by case: a report sent again counts once, another
 * norm for a shard in is refused, the total is summed in the shards'
 * order whoever reported them, a settled server's total must be the
 * step's, and a kept total answers its own timeline only. The simulator's
 * norm world runs the same rules under coordinators killed between their
 * answers (sim/norms.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <math.h>
#include <cmocka.h>

#include "model/normx.h"

/* Three shards from two servers, one report twice: the total once, in
 * place order. */
static void test_counted_once(void **st)
{
	struct zs_nx nc;
	const uint32_t p0[] = {2, 0}, p1[] = {1};
	const double v0[] = {0.25, 1.0}, v1[] = {0.5};
	double total = -1;

	(void)st;
	assert_int_equal(zs_nx_init(&nc, 3), 0);
	assert_int_equal(zs_nx_report(&nc, p0, v0, 2, &total), ZS_NX_WAIT);
	assert_int_equal(zs_nx_report(&nc, p0, v0, 2, &total), ZS_NX_WAIT); /* again */
	assert_int_equal(nc.n_have, 2);
	assert_int_equal(zs_nx_report(&nc, p1, v1, 1, &total), ZS_NX_COMPLETE);
	assert_true(total == (1.0 + 0.5) + 0.25); /* place 0, 1, 2 */
	zs_nx_free(&nc);
}

/* Another norm for a shard in, or one that is not finite: refused, and
 * nothing of the report counted. */
static void test_refused_whole(void **st)
{
	struct zs_nx nc;
	const uint32_t p[] = {0}, q[] = {1, 0};
	const double v[] = {1.0}, w[] = {2.0, 3.0}, bad[] = {NAN}, inf[] = {INFINITY},
		     neg[] = {-1.0};
	double total;

	(void)st;
	assert_int_equal(zs_nx_init(&nc, 2), 0);
	assert_int_equal(zs_nx_report(&nc, p, v, 1, &total), ZS_NX_WAIT);
	assert_int_equal(zs_nx_report(&nc, q, w, 2, &total), ZS_NX_OTHER_NORM);
	assert_int_equal(nc.n_have, 1); /* shard 1 not taken either */
	assert_int_equal(zs_nx_report(&nc, q + 0, bad, 1, &total), ZS_NX_NOT_FINITE);
	assert_int_equal(zs_nx_report(&nc, q + 0, inf, 1, &total), ZS_NX_NOT_FINITE);
	assert_int_equal(zs_nx_report(&nc, q + 0, neg, 1, &total), ZS_NX_NOT_FINITE);
	assert_int_equal(nc.n_have, 1);
	zs_nx_free(&nc);
}

/* A settled server joins: the step's total must be the one it applied. */
static void test_settled(void **st)
{
	struct zs_nx nc;
	const uint32_t p0[] = {0}, p1[] = {1};
	const double v0[] = {1.0}, v1[] = {2.0};
	double total;

	(void)st;
	assert_int_equal(zs_nx_init(&nc, 2), 0);
	assert_int_equal(zs_nx_settled(&nc, NULL, 4, 3, 7, 3.0, p0, v0, 1, &total),
			 ZS_NX_OLD_TIMELINE);
	assert_int_equal(zs_nx_settled(&nc, NULL, 4, 4, 7, 3.0, p0, v0, 1, &total), ZS_NX_WAIT);
	assert_true(total == 3.0);
	assert_int_equal(zs_nx_settled(&nc, NULL, 4, 4, 8, 5.0, p1, v1, 1, &total),
			 ZS_NX_DIVERGED); /* two servers, two totals */
	assert_int_equal(zs_nx_report(&nc, p1, v1, 1, &total), ZS_NX_COMPLETE);
	assert_true(total == 3.0);
	zs_nx_free(&nc);
	/* the shards sum to another total than the settled one: failed */
	assert_int_equal(zs_nx_init(&nc, 2), 0);
	assert_int_equal(zs_nx_settled(&nc, NULL, 4, 4, 7, 9.0, p0, v0, 1, &total), ZS_NX_WAIT);
	assert_int_equal(zs_nx_report(&nc, p1, v1, 1, &total), ZS_NX_DIVERGED);
	zs_nx_free(&nc);
	/* nothing open: answered with its own, unless a kept total differs */
	const struct zs_nx_done kept = {.timeline = 4, .step = 9, .total = 3.0, .n_shards = 2};
	assert_int_equal(zs_nx_settled(NULL, NULL, 4, 4, 7, 3.0, p0, v0, 1, &total), ZS_NX_ANSWER);
	assert_int_equal(zs_nx_settled(NULL, &kept, 4, 4, 7, 3.0, p0, v0, 1, &total), ZS_NX_ANSWER);
	assert_int_equal(zs_nx_settled(NULL, &kept, 4, 4, 7, 2.5, p0, v0, 1, &total),
			 ZS_NX_DIVERGED);
}

/* A kept total answers its step of its timeline only. */
static void test_kept(void **st)
{
	const struct zs_nx_done k[] = {{.timeline = 1, .step = 5, .total = 1.0},
				       {.timeline = 2, .step = 5, .total = 2.0},
				       {.timeline = 2, .step = 6, .total = 3.0}};

	(void)st;
	assert_true(zs_nx_kept(k, 3, 2, 5)->total == 2.0);
	assert_true(zs_nx_kept(k, 3, 1, 5)->total == 1.0);
	assert_null(zs_nx_kept(k, 3, 3, 5)); /* rolled back since: not this run's */
	assert_null(zs_nx_kept(k, 3, 1, 6));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counted_once),
	    cmocka_unit_test(test_refused_whole),
	    cmocka_unit_test(test_settled),
	    cmocka_unit_test(test_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
