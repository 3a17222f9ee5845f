/* fsm_check.c - a state machine walked whole, and its table in docs/DESIGN.md. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/fsm_check.h"

#define PATH "docs/DESIGN.md"
#define MAX_CELLS 32

/* line's cells, trimmed, into cell (at most MAX_CELLS); their count. */
static int cells(char *line, char **cell)
{
	char *save = NULL;
	int k = 0;

	for (char *c = strtok_r(line, "|\n", &save); c && k < MAX_CELLS;
	     c = strtok_r(NULL, "|\n", &save)) {
		while (*c == ' ')
			c++;
		char *end = c + strlen(c);
		while (end > c && end[-1] == ' ')
			*--end = '\0';
		cell[k++] = c;
	}
	return k;
}

/* The target's name of (state, ev) in m, or "·". */
static const char *target(const struct zs_fsm *m, int state, int ev)
{
	int to = zs_fsm_next(m, state, ev);

	return to < 0 ? "·" : zs_fsm_state(m, to);
}

void fsm_check_design(const struct zs_fsm *m, const char *name)
{
	int rows = m->n_states, cols = m->n_events;
	char line[1024], begin[64], end[64];
	FILE *f = fopen(PATH, "r");
	bool in = false, header = false;
	int r = 0;

	if (!f)
		fail_msg("cannot open %s (run from the source tree's root)", PATH);
	snprintf(begin, sizeof begin, "<!-- %s: begin", name);
	snprintf(end, sizeof end, "<!-- %s: end", name);
	while (fgets(line, sizeof line, f)) {
		char *cell[MAX_CELLS] = {0};
		int k;
		if (strstr(line, begin)) {
			in = true;
			continue;
		}
		if (strstr(line, end))
			break;
		if (!in || line[0] != '|' || strstr(line, "|---"))
			continue;
		if ((k = cells(line, cell)) != cols + 1)
			fail_msg("%s: a row of the %s table has %d cells, not %d", PATH, name, k,
				 cols + 1);
		if (!header) { /* the events, in the code's order */
			for (int c = 0; c < cols; c++)
				if (strcmp(cell[c + 1], zs_fsm_event(m, c)))
					fail_msg("%s: the %s table's column %d is '%s', the code's '%s'",
						 PATH, name, c + 1, cell[c + 1], zs_fsm_event(m, c));
			header = true;
			continue;
		}
		if (r == rows)
			fail_msg("%s: the %s table has more than %d rows", PATH, name, rows);
		assert_string_equal(cell[0], zs_fsm_state(m, r));
		for (int c = 0; c < cols; c++)
			if (strcmp(cell[c + 1], target(m, r, c)))
				fail_msg("%s: %s, %s: the design says %s, the code %s", PATH, cell[0],
					 zs_fsm_event(m, c), cell[c + 1], target(m, r, c));
		r++;
	}
	fclose(f);
	if (!in)
		fail_msg("%s: no '%s' table", PATH, name);
	assert_int_equal(r, rows);
}

void fsm_check_pairs(const struct zs_fsm *m, bool (*go)(int *state, int ev))
{
	size_t legal = 0;

	for (int p = 0; p < m->n_states; p++)
		for (int ev = 0; ev < m->n_events; ev++) {
			int state = p, to = zs_fsm_next(m, p, ev);
			bool ok = go(&state, ev);
			if (to < 0) {
				if (ok || state != p)
					fail_msg("%s: %s in %s is no transition, yet taken", m->what,
						 zs_fsm_event(m, ev), zs_fsm_state(m, p));
				continue;
			}
			if (!ok || state != to)
				fail_msg("%s: %s in %s goes to %s, not taken so", m->what,
					 zs_fsm_event(m, ev), zs_fsm_state(m, p), zs_fsm_state(m, to));
			legal++;
		}
	assert_int_equal(legal, m->n_edges); /* no pair twice in the table */
	for (int p = 0; p < m->n_states; p++)
		assert_string_not_equal(zs_fsm_state(m, p), "?");
	for (int ev = 0; ev < m->n_events; ev++)
		assert_string_not_equal(zs_fsm_event(m, ev), "?");
	assert_string_equal(zs_fsm_state(m, m->n_states), "?");
}

void fsm_check_paths(const struct zs_fsm *m, int start, int home, const int *skip, int n_skip)
{
	bool seen[MAX_CELLS] = {0}, back[MAX_CELLS] = {0};

	assert_true(m->n_states <= MAX_CELLS);
	seen[start] = back[home] = true;
	for (int round = 0; round < m->n_states; round++)
		for (size_t i = 0; i < m->n_edges; i++) {
			const struct zs_fsm_edge *e = &m->edges[i];
			bool skipped = false;
			for (int k = 0; k < n_skip; k++)
				skipped |= e->ev == skip[k];
			if (seen[e->from])
				seen[e->to] = true;
			if (!skipped && back[e->to])
				back[e->from] = true;
		}
	for (int p = 0; p < m->n_states; p++) {
		if (!seen[p])
			fail_msg("%s: %s cannot be reached from %s", m->what, zs_fsm_state(m, p),
				 zs_fsm_state(m, start));
		if (p != start && !back[p])
			fail_msg("%s: %s has no way to %s but by a reset", m->what,
				 zs_fsm_state(m, p), zs_fsm_state(m, home));
	}
}
