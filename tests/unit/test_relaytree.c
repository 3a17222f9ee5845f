/*
 * test_relaytree.c - the weight readers' relay tree, decided
 * (model/relaytree.c): the timeline a live step is filed under (the
 * servers' stamp kept; unsaid, the one given before while the job is on
 * that run, else the run now), and each reader's parent (by id, fanout,
 * one tree per version and run, relays only). The simulator's reader
 * world runs the same rules under rollbacks and restarts (sim/readers.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "model/relaytree.h"

static struct zs_reader_info rd(uint64_t id, uint64_t step, uint64_t tl, bool relay)
{
	struct zs_reader_info i = {.id = id, .pinned = true, .step = step, .timeline = tl};

	if (relay)
		strcpy(i.relay_addr, "r");
	return i;
}

static void test_timeline(void **st)
{
	struct zs_reader_info said = rd(1, 10, 0, true), known = rd(1, 10, 3, true);

	(void)st;
	assert_int_equal(zs_rt_timeline(&said, NULL, 2), 3); /* new: the run now, + 1 */
	assert_int_equal(zs_rt_timeline(&said, &known, 2), 3); /* a renewal before its answer */
	assert_int_equal(zs_rt_timeline(&said, &known, 5), 6); /* rolled back since: the new run */
	known.step = 9;
	assert_int_equal(zs_rt_timeline(&said, &known, 2), 3); /* another step: the run now */
	said.timeline = 2; /* the servers' stamp (or its own, said again) */
	assert_int_equal(zs_rt_timeline(&said, &known, 7), 2);
	said.step = ZS_VERSION_CKPT | 4;
	assert_int_equal(zs_rt_timeline(&said, &known, 7), 0);
	said.pinned = false;
	assert_int_equal(zs_rt_timeline(&said, &known, 7), 0);
}

static void test_parents(void **st)
{
	/* five relays of step 10 run 2 (ids 1..5), a reader relaying nothing,
	 * a reader of the same step of another run, one of another step */
	struct zs_reader_info v[] = {rd(4, 10, 2, true), rd(2, 10, 2, true), rd(5, 10, 2, true),
				     rd(1, 10, 2, true), rd(3, 10, 2, true), rd(9, 10, 2, false),
				     rd(6, 10, 3, true), rd(7, 11, 2, true)};
	const uint64_t want[] = {2, 1, 2, 0, 1, 3, 0, 0}; /* parents' ids (0: the servers) */

	(void)st;
	for (uint32_t i = 0; i < 8; i++) {
		int p = zs_rt_parent(v, 8, i, 2);
		assert_int_equal(p < 0 ? 0 : v[p].id, want[i]);
	}
	/* fanout 1: a chain */
	assert_int_equal(v[zs_rt_parent(v, 8, 2, 1)].id, 4);
	/* nothing pinned: the servers */
	v[0].pinned = false;
	assert_int_equal(zs_rt_parent(v, 8, 0, 2), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_timeline),
	    cmocka_unit_test(test_parents),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
