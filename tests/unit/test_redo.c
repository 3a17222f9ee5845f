/*
 * test_redo.c - a lost trainer's step, decided (model/redo.c), case by
 * case: which step its replacement redoes, when the job rolls back
 * instead, and when a trainer's push waits for the coordinator to have
 * heard it begin its step. The simulator's step world runs the same rules
 * with boundaries late and ranks killed at random (sim/step.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "model/redo.h"

/* Each boundary moves the record; a loss marks it; the replacement's
 * boundary of the step it redoes clears the mark, one before it cannot. */
static void test_begun_and_lost(void **st)
{
	struct zs_rstep r = {0};
	const struct zs_redo_job j = {0};

	(void)st;
	assert_true(zs_rstep_begun(&r, 0));
	assert_true(zs_rstep_begun(&r, 1));
	assert_true(r.known);
	assert_int_equal(r.step, 1);
	assert_null(zs_rstep_lose(&r, &j));
	assert_true(r.lost);
	assert_int_equal(r.step, 1); /* its replacement redoes step 1 */
	assert_false(zs_rstep_begun(&r, 0)); /* before the step it redoes */
	assert_true(r.lost);
	assert_null(zs_rstep_lose(&r, &j)); /* the replacement lost too: again */
	assert_int_equal(r.step, 1);
	assert_true(zs_rstep_begun(&r, 1));
	assert_false(r.lost);
	assert_true(zs_rstep_begun(&r, 2));
}

/* What the coordinator cannot be sure of rolls back, saying why. */
static void test_rollback_reasons(void **st)
{
	struct zs_rstep r = {0}, known = {.known = true, .step = 4};

	(void)st;
	assert_non_null(zs_rstep_lose(NULL, &(struct zs_redo_job){0}));
	assert_non_null(zs_rstep_lose(&r, &(struct zs_redo_job){0})); /* its step unknown */
	assert_false(r.lost);
	assert_non_null(zs_rstep_lose(&known, &(struct zs_redo_job){.collective = true}));
	assert_non_null(zs_rstep_lose(&known, &(struct zs_redo_job){.settling = true}));
	assert_non_null(zs_rstep_lose(&known, &(struct zs_redo_job){.stopped_step = 5}));
	assert_false(known.lost);
	assert_null(zs_rstep_lose(&known, &(struct zs_redo_job){.stopped_step = 4}));
	assert_true(known.lost);
}

/* A push of step t waits until the coordinator has heard the rank begin t
 * (known1: 1 + that step); pushed before, a loss would be redone from a
 * step the servers may have moved two past. */
static void test_push_waits(void **st)
{
	(void)st;
	assert_true(zs_redo_push_waits(0, 0));
	assert_false(zs_redo_push_waits(1, 0));
	assert_true(zs_redo_push_waits(3, 3));
	assert_false(zs_redo_push_waits(4, 3));
	assert_false(zs_redo_push_waits(5, 3)); /* a later one heard: so was this */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_begun_and_lost),
	    cmocka_unit_test(test_rollback_reasons),
	    cmocka_unit_test(test_push_waits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
