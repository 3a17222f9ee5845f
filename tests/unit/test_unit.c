/*
 * test_unit.c - client/unit.c: a unit's gradient on its way to the
 * servers as a state machine. Every (phase, event) pair: the ones in the
 * table move it there, the others are refused and change nothing; the
 * table is the one docs/DESIGN.md draws, cell by cell; every phase is
 * reachable from NONE and leads back to it without a reset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "client/unit.h"
#include "tests/unit/design_table.h"

static void test_every_pair(void **st)
{
	unsigned legal = 0;
	size_t n;
	(void)st;

	for (int p = 0; p < UP_COUNT; p++)
		for (int ev = 0; ev < UE_COUNT; ev++) {
			enum tr_uphase ph = (enum tr_uphase)p;
			enum tr_uphase to = tr_unit_next(ph, (enum tr_uevent)ev);
			bool ok = tr_unit_go(&ph, 7, (enum tr_uevent)ev);
			if (to == UP_COUNT) {
				assert_false(ok);
				assert_int_equal(ph, p);
			} else {
				assert_true(ok);
				assert_int_equal(ph, to);
				legal++;
			}
		}
	tr_unit_table(&n);
	assert_int_equal(legal, n); /* no pair twice in the table */
	for (int p = 0; p < UP_COUNT; p++)
		assert_string_not_equal(tr_uphase_name((enum tr_uphase)p), "?");
	for (int ev = 0; ev < UE_COUNT; ev++)
		assert_string_not_equal(tr_uevent_name((enum tr_uevent)ev), "?");
}

static const char *phase_name(int p) { return tr_uphase_name((enum tr_uphase)p); }
static const char *event_name(int ev) { return tr_uevent_name((enum tr_uevent)ev); }

static const char *target(int p, int ev)
{
	enum tr_uphase to = tr_unit_next((enum tr_uphase)p, (enum tr_uevent)ev);
	return to == UP_COUNT ? "·" : tr_uphase_name(to);
}

/* DESIGN.md's table (its "unit push" markers): a row per phase, a column
 * per event, the target or "·". */
static void test_design_draws_the_table(void **st)
{
	(void)st;
	design_table_check("unit push", UP_COUNT, UE_COUNT, phase_name, event_name, target);
}

/* Every phase is reached from NONE, and gets back to NONE by the push's
 * own events (not only by a reset). */
static void test_no_dead_end(void **st)
{
	bool seen[UP_COUNT] = {[UP_NONE] = true}, home[UP_COUNT] = {[UP_NONE] = true};
	(void)st;

	for (int round = 0; round < UP_COUNT; round++)
		for (int p = 0; p < UP_COUNT; p++)
			for (int ev = 0; ev < UE_COUNT; ev++) {
				enum tr_uphase to = tr_unit_next((enum tr_uphase)p, (enum tr_uevent)ev);
				if (to == UP_COUNT)
					continue;
				if (seen[p])
					seen[to] = true;
				if (ev != UE_RESET && home[to])
					home[p] = true;
			}
	for (int p = 0; p < UP_COUNT; p++) {
		if (!seen[p])
			fail_msg("phase %s cannot be reached from NONE", tr_uphase_name((enum tr_uphase)p));
		if (!home[p])
			fail_msg("phase %s gets back to NONE only by a reset",
				 tr_uphase_name((enum tr_uphase)p));
	}
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
