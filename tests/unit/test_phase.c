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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

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

/* The cells of DESIGN.md's table (between its phases markers): a row per
 * phase, a column per event, the target or "·". */
static void test_design_draws_the_table(void **st)
{
	const char *path = "docs/DESIGN.md";
	FILE *f = fopen(path, "r");
	char line[1024];
	bool in = false;
	int rows = 0;
	(void)st;

	if (!f)
		fail_msg("cannot open %s (run from the source tree's root)", path);
	while (fgets(line, sizeof line, f)) {
		char *cell[EV_COUNT + 2], *save = NULL;
		int k = 0;
		if (strstr(line, "<!-- phases: begin")) {
			in = true;
			continue;
		}
		if (strstr(line, "<!-- phases: end"))
			break;
		if (!in || line[0] != '|' || strstr(line, "|---") || strstr(line, "phase \\"))
			continue;
		for (char *c = strtok_r(line, "|\n", &save); c && k < EV_COUNT + 2;
		     c = strtok_r(NULL, "|\n", &save)) {
			while (*c == ' ')
				c++;
			char *end = c + strlen(c);
			while (end > c && end[-1] == ' ')
				*--end = '\0';
			cell[k++] = c;
		}
		if (k != EV_COUNT + 1)
			fail_msg("%s: a row of the phases table has %d cells, not %d", path, k,
				 EV_COUNT + 1);
		assert_string_equal(cell[0], eng_phase_name((enum eng_phase)rows));
		for (int ev = 0; ev < EV_COUNT; ev++) {
			enum eng_phase to = eng_phase_next((enum eng_phase)rows, (enum eng_event)ev);
			const char *want = to == PH_COUNT ? "·" : eng_phase_name(to);
			if (strcmp(cell[ev + 1], want))
				fail_msg("%s: phase %s, event %s: the design says %s, the code %s", path,
					 cell[0], eng_event_name((enum eng_event)ev), cell[ev + 1], want);
		}
		rows++;
	}
	fclose(f);
	assert_int_equal(rows, PH_COUNT);
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
