/*
 * design_table.h - the unit tests' check that a state machine's table in
 * the code is the one docs/DESIGN.md draws (test_phase, test_unit).
 */
#ifndef ZS_TESTS_DESIGN_TABLE_H
#define ZS_TESTS_DESIGN_TABLE_H

/*
 * The markdown table between "<!-- NAME: begin" and "<!-- NAME: end" in
 * docs/DESIGN.md (read from the source tree's root): its header names the
 * columns col_name(0 ..) after one cell for the rows' names; then rows rows,
 * each row_name(r) and a cell per column, want(r, c) ("·": no transition).
 * Fails the test naming the first cell that differs.
 */
void design_table_check(const char *name, int rows, int cols, const char *(*row_name)(int),
			const char *(*col_name)(int), const char *(*want)(int, int));

#endif
