/*
 * test_phase.c - engine/phase.c: a shard's step as a state machine. Every
 * (phase, event) pair: the ones in the table move a shard there, the
 * others are refused and change nothing; the table is the one
 * docs/DESIGN.md draws, cell by cell; every phase is reachable from EMPTY
 * and every one leads back to LANDING.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"
#include "tests/unit/design_table.h"

/* Each pair through eng_phase_go on a shard: the table's target, or
 * refused with the phase as it was. */
static void test_every_pair(void **st)
{
	unsigned legal = 0;
	(void)st;

	for (int p = 0; p < PH_COUNT; p++)
		for (int ev = 0; ev < EV_COUNT; ev++) {
			struct eshard s = {.phase = (enum eng_phase)p};
			enum eng_phase to = eng_phase_next((enum eng_phase)p, (enum eng_event)ev);
			bool ok = eng_phase_go(&s, (enum eng_event)ev);
			if (to == PH_COUNT) {
				assert_false(ok);
				assert_int_equal(s.phase, p);
			} else {
				assert_true(ok);
				assert_int_equal(s.phase, to);
				legal++;
			}
		}
	size_t n;
	eng_phase_table(&n);
	assert_int_equal(legal, n); /* no pair twice in the table */
	/* the names are there for every phase and event */
	for (int p = 0; p < PH_COUNT; p++)
		assert_string_not_equal(eng_phase_name((enum eng_phase)p), "?");
	for (int ev = 0; ev < EV_COUNT; ev++)
		assert_string_not_equal(eng_event_name((enum eng_event)ev), "?");
	assert_string_equal(eng_phase_name(PH_COUNT), "?");
}

static const char *phase_name(int p) { return eng_phase_name((enum eng_phase)p); }
static const char *event_name(int ev) { return eng_event_name((enum eng_event)ev); }

static const char *target(int p, int ev)
{
	enum eng_phase to = eng_phase_next((enum eng_phase)p, (enum eng_event)ev);
	return to == PH_COUNT ? "·" : eng_phase_name(to);
}

/* DESIGN.md's table (its phases markers): a row per phase, a column per
 * event, the target or "·". */
static void test_design_draws_the_table(void **st)
{
	(void)st;
	design_table_check("phases", PH_COUNT, EV_COUNT, phase_name, event_name, target);
}

/* From EMPTY every phase can be reached, and from every phase LANDING
 * (no phase a shard cannot leave but by a reset). */
static void test_no_dead_end(void **st)
{
	bool seen[PH_COUNT] = {[PH_EMPTY] = true};
	(void)st;

	for (int round = 0; round < PH_COUNT; round++)
		for (int p = 0; p < PH_COUNT; p++)
			for (int ev = 0; seen[p] && ev < EV_COUNT; ev++) {
				enum eng_phase to = eng_phase_next((enum eng_phase)p, (enum eng_event)ev);
				if (to != PH_COUNT)
					seen[to] = true;
			}
	for (int p = 0; p < PH_COUNT; p++)
		if (!seen[p])
			fail_msg("phase %s cannot be reached from EMPTY", eng_phase_name((enum eng_phase)p));
	for (int p = 0; p < PH_COUNT; p++) {
		bool out = false;
		for (int ev = 0; ev < EV_COUNT && !out; ev++)
			out = ev != EV_RESET && ev != EV_RESTORE &&
			      eng_phase_next((enum eng_phase)p, (enum eng_event)ev) == PH_LANDING;
		if (p != PH_EMPTY && !out)
			fail_msg("phase %s has no way to LANDING but a restore",
				 eng_phase_name((enum eng_phase)p));
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
