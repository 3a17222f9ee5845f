/*
 * test_resize.c - a job's world size changed at a step boundary
 * (model/resize.c): the step a resize names, what it refuses and why, a
 * change named and not yet run, and rank_lost: shrink's renumbering.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "model/model.h"
#include "model/resize.h"

/* Ranks in, step 10 the latest report, the world 4: a resize names step
 * 14 (three past, as a stop, and one more); with no rank in, the step the
 * job resumes at. */
static void test_step_named(void **st)
{
	struct zs_rs_in in = {.want = 2, .last = 4, .n_trainers = 4, .have_top = true, .top = 10};
	uint64_t at;

	(void)st;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_ADD);
	assert_int_equal(at, 14);
	in.want = 8;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_ADD);
	assert_int_equal(at, 14);
	in = (struct zs_rs_in){.want = 2, .last = 4, .resume_step = 30};
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_ADD);
	assert_int_equal(at, 30);
	in.want = 4; /* the world it has */
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_SAME);
}

/* What is refused, each for its own reason, before anything else. */
static void test_refused(void **st)
{
	struct zs_rs_in in = {.want = 0, .last = 4, .n_trainers = 4, .have_top = true, .top = 10};
	uint64_t at;

	(void)st;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_BAD_WORLD);
	in.want = ZS_MAX_WORLD + 1;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_BAD_WORLD);
	in.want = 2;
	in.collective = true;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_COLLECTIVE);
	in.collective = false;
	in.restoring = true;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_BUSY);
	in.restoring = false;
	in.stopping = true;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_BUSY);
	in.stopping = false;
	in.have_top = false; /* ranks in, none has finished a step */
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_NO_REPORT);
}

/* A change named and not run yet stays: the same world again is no
 * change; another waits until that step has run; once run, a new one. */
static void test_named_not_run(void **st)
{
	struct zs_rs_in in = {.want = 2, .last = 2, .n_trainers = 4, .have_top = true, .top = 11,
			      .named = true, .named_step = 14};
	uint64_t at;

	(void)st;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_SAME);
	in.want = 3;
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_PENDING);
	assert_int_equal(at, 14);
	in.top = 14; /* step 14 reported: run */
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_ADD);
	assert_int_equal(at, 18);
	/* no rank in: a change named before does not hold it */
	in = (struct zs_rs_in){.want = 3, .last = 2, .named = true, .named_step = 14,
			       .resume_step = 12};
	assert_int_equal(zs_resize_decide(&in, &at), ZS_RS_ADD);
	assert_int_equal(at, 12);
}

/* A stop's step: three past the latest report; with a change named and
 * not yet run, two past the change's step (a grow's new ranks begin at
 * it as they join, and their next answer may predate the stop). */
static void test_stop_step(void **st)
{
	(void)st;
	assert_int_equal(zs_stop_step(10, false, 0), 13);
	assert_int_equal(zs_stop_step(10, true, 8), 13);  /* run already */
	assert_int_equal(zs_stop_step(10, true, 14), 16); /* named at 14 */
	assert_int_equal(zs_stop_step(11, true, 14), 16);
	assert_int_equal(zs_stop_step(13, true, 14), 16);
	assert_int_equal(zs_stop_step(14, true, 14), 17); /* run: three past */
}

/* rank_lost: shrink: the ranks above the new world take the numbers of
 * those away below it, in rank order. */
static void test_shrink(void **st)
{
	uint32_t ranks[6] = {0, 2, 4, 5}, away[3] = {3, 1};

	(void)st;
	/* world 6, ranks 1 and 3 away: 4 and 5 take 1 and 3 */
	assert_int_equal(zs_shrink_ranks(6, away, 2, ranks, 4), 4);
	assert_int_equal(ranks[0], 0);
	assert_int_equal(ranks[1], 2);
	assert_int_equal(ranks[2], 1);
	assert_int_equal(ranks[3], 3);
	/* the top ranks away: nobody moves */
	{
		uint32_t r[3] = {0, 1, 2}, a[1] = {3};
		assert_int_equal(zs_shrink_ranks(4, a, 1, r, 3), 3);
		assert_int_equal(r[0], 0);
		assert_int_equal(r[1], 1);
		assert_int_equal(r[2], 2);
	}
	/* away ranks outside the world do not count */
	{
		uint32_t r[2] = {0, 1}, a[1] = {7};
		assert_int_equal(zs_shrink_ranks(2, a, 1, r, 2), 2);
	}
	/* everyone away: no world to shrink to */
	{
		uint32_t a[2] = {0, 1};
		assert_int_equal(zs_shrink_ranks(2, a, 2, NULL, 0), 0);
	}
	/* rank 0 away, rank 3 and 2 in above: 3 takes 0 */
	{
		uint32_t r[3] = {1, 2, 3}, a[1] = {0};
		assert_int_equal(zs_shrink_ranks(4, a, 1, r, 3), 3);
		assert_int_equal(r[0], 1);
		assert_int_equal(r[1], 2);
		assert_int_equal(r[2], 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step_named),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_named_not_run),
		cmocka_unit_test(test_stop_step),
		cmocka_unit_test(test_shrink),
	};
	return cmocka_run_group_tests_name("resize", tests, NULL, NULL);
}
