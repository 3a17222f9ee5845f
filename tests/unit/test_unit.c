/*
 * test_unit.c - client/unit.c: a unit's parameters and its gradient in
 * the step driver as two state machines. Every (phase, event) pair of
 * each: the ones in the table move it there, the others are refused and
 * change nothing; each table is the one docs/DESIGN.md draws, cell by
 * cell; every phase is reachable from NONE and leads back to it without a
 * reset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "client/unit.h"
#include "tests/unit/fsm_check.h"

static bool params_go(int *phase, int ev)
{
	enum tr_pphase p = (enum tr_pphase)*phase;
	bool ok = tr_params_go(&p, 7, (enum tr_pevent)ev);

	*phase = (int)p;
	return ok;
}

static bool push_go(int *phase, int ev)
{
	enum tr_uphase p = (enum tr_uphase)*phase;
	bool ok = tr_unit_go(&p, 7, (enum tr_uevent)ev);

	*phase = (int)p;
	return ok;
}

static void test_every_pair(void **st)
{
	(void)st;
	fsm_check_pairs(&tr_params_fsm, params_go);
	fsm_check_pairs(&tr_push_fsm, push_go);
}

static void test_design_draws_the_tables(void **st)
{
	(void)st;
	fsm_check_design(&tr_params_fsm, "unit params");
	fsm_check_design(&tr_push_fsm, "unit push");
}

static void test_no_dead_end(void **st)
{
	static const int pskip[] = {PE_RESET}, uskip[] = {UE_RESET};
	(void)st;
	fsm_check_paths(&tr_params_fsm, PP_NONE, PP_NONE, pskip, 1);
	fsm_check_paths(&tr_push_fsm, UP_NONE, UP_NONE, uskip, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_pair),
		cmocka_unit_test(test_design_draws_the_tables),
		cmocka_unit_test(test_no_dead_end),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
