/*
 * test_kept.c - which of a shard's versions a server can serve
 * (engine/kept.c), case by case, and when a seed carries the step before.
 * The simulator's step world runs the same rules for its trainers'
 * gathers, through seeds, catch-ups and failovers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/kept.h"

/* Its version; the step before, kept whole (prev_of: 1 + its step); a
 * later one comes; older ones, or the step before with nothing kept of it
 * (a seed, a restore since), are gone; a frozen shard is every step. */
static void test_kept_at(void **st)
{
	(void)st;
	assert_int_equal(eng_kept_at(false, 5, 5, true, 5, false), EK_NOW);
	assert_int_equal(eng_kept_at(false, 5, 4, true, 5, false), EK_PREV);
	assert_int_equal(eng_kept_at(false, 5, 4, true, 0, false), EK_GONE); /* seeded, no prev */
	assert_int_equal(eng_kept_at(false, 5, 4, true, 4, false), EK_GONE); /* an older one */
	assert_int_equal(eng_kept_at(false, 5, 4, false, 5, false), EK_GONE);
	assert_int_equal(eng_kept_at(false, 5, 3, true, 5, false), EK_GONE);
	assert_int_equal(eng_kept_at(false, 5, 6, true, 5, false), EK_LATER);
	assert_int_equal(eng_kept_at(false, 5, 5, false, 0, true), EK_GONE); /* half updated */
	assert_int_equal(eng_kept_at(false, 5, 5, true, 0, true), EK_NOW);   /* its rest in prev */
	assert_int_equal(eng_kept_at(true, 5, 1, false, 0, false), EK_NOW);
}

/* A seed carries the step before when it is kept whole (found by the
 * simulator: a copy seeded and promoted could not serve a lost rank's
 * replacement the step it redoes, and the redo became a rollback). */
static void test_seed_prev(void **st)
{
	(void)st;
	assert_true(eng_kept_seed_prev(true, 5, 5));
	assert_false(eng_kept_seed_prev(true, 0, 5)); /* itself seeded without */
	assert_false(eng_kept_seed_prev(false, 5, 5));
	assert_false(eng_kept_seed_prev(true, 0, 0)); /* nothing before step 0 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kept_at),
	    cmocka_unit_test(test_seed_prev),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
