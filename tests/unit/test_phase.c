/*
 * test_phase.c - engine/phase.c: a shard's step as a state machine. Every
 * (phase, event) pair through eng_phase_go on a shard: the ones in the
 * table move it there, the others are refused and change nothing; the
 * table is the one docs/DESIGN.md draws, cell by cell; every phase is
 * reachable from EMPTY and every one leads back to LANDING but by a reset
 * or a restore.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/state.h"
#include "tests/unit/fsm_check.h"

static bool go(int *phase, int ev)
{
	struct eshard s = {.phase = (enum eng_phase)*phase};
	bool ok = eng_phase_go(&s, (enum eng_event)ev);

	*phase = (int)s.phase;
	return ok;
}

static void test_every_pair(void **st)
{
	(void)st;
	fsm_check_pairs(&eng_phase_fsm, go);
	assert_int_equal(eng_phase_next(PH_STUCK, EV_APPLIED), PH_COUNT);
	assert_string_equal(eng_phase_name(PH_COUNT), "?");
}

static void test_design_draws_the_table(void **st)
{
	(void)st;
	fsm_check_design(&eng_phase_fsm, "phases");
}

static void test_no_dead_end(void **st)
{
	static const int skip[] = {EV_RESET, EV_RESTORE};
	(void)st;
	fsm_check_paths(&eng_phase_fsm, PH_EMPTY, PH_LANDING, skip, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_pair),
		cmocka_unit_test(test_design_draws_the_table),
		cmocka_unit_test(test_no_dead_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
