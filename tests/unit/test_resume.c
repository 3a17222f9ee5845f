/*
 * test_resume.c - where a trainer resumes (model/resume.c), case by case:
 * a redo before a stop, a stop before a resize, a resize's new rank unless
 * a checkpoint restored since holds its state, the checkpoint, and a job
 * never restored. The integration suites resume through the shell
 * (client/resume.c): test_crash, test_recovery, resize.sh, lost.sh.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "include/zshard.h"
#include "model/resume.h"

static void test_order(void **st)
{
	struct zs_worlds w = {.n = 1, .v = {{.step = 12, .world = 4}}};
	struct zs_resume_in in = {.redo = true, .redo_step = 7, .stopped_step = 9,
				  .world_size = 2, .worlds = &w, .restored_id = 3,
				  .restored_step = 5};
	uint64_t step;

	(void)st;
	assert_int_equal(zs_resume_where(&in, 3, &step), ZS_RESUMED_REDO);
	assert_int_equal(step, 7);
	in.redo = false;
	assert_int_equal(zs_resume_where(&in, 3, &step), ZS_RESUMED_STOPPED);
	assert_int_equal(step, 9);
	in.stopped_step = 0;
	assert_int_equal(zs_resume_where(&in, 3, &step), ZS_RESUMED_RESIZE); /* new at 12 */
	assert_int_equal(step, 12);
	assert_int_equal(zs_resume_where(&in, 1, &step), ZS_RESUMED_CHECKPOINT); /* was in */
	assert_int_equal(step, 5);
	in.restored_step = 12; /* a checkpoint of the grown job holds its state */
	assert_int_equal(zs_resume_where(&in, 3, &step), ZS_RESUMED_CHECKPOINT);
	assert_int_equal(step, 12);
	in.restored_id = 0;
	assert_int_equal(zs_resume_where(&in, 1, &step), ZS_RESUMED_NONE);
	assert_int_equal(step, 0);
}

/* Grown twice, shrunk between: a rank is new with the change that took
 * it in last; beyond the latest world it is in none. */
static void test_worlds(void **st)
{
	struct zs_worlds w = {.n = 3,
			      .v = {{.step = 10, .world = 4}, {.step = 20, .world = 2},
				    {.step = 30, .world = 3}}};
	struct zs_resume_in in = {.world_size = 2, .worlds = &w, .restored_id = 1,
				  .restored_step = 4};
	uint64_t step;

	(void)st;
	assert_int_equal(zs_resume_where(&in, 2, &step), ZS_RESUMED_RESIZE);
	assert_int_equal(step, 30);
	assert_int_equal(zs_resume_where(&in, 3, &step), ZS_RESUMED_CHECKPOINT);
	assert_int_equal(zs_resume_where(&in, 0, &step), ZS_RESUMED_CHECKPOINT);
	assert_int_equal(step, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_worlds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
