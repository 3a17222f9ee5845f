/* design_table.c - a table docs/DESIGN.md draws, against the code's. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tests/unit/design_table.h"

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

void design_table_check(const char *name, int rows, int cols, const char *(*row_name)(int),
			const char *(*col_name)(int), const char *(*want)(int, int))
{
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
				if (strcmp(cell[c + 1], col_name(c)))
					fail_msg("%s: the %s table's column %d is '%s', the code's '%s'",
						 PATH, name, c + 1, cell[c + 1], col_name(c));
			header = true;
			continue;
		}
		if (r == rows)
			fail_msg("%s: the %s table has more than %d rows", PATH, name, rows);
		assert_string_equal(cell[0], row_name(r));
		for (int c = 0; c < cols; c++)
			if (strcmp(cell[c + 1], want(r, c)))
				fail_msg("%s: %s, %s: the design says %s, the code %s", PATH, cell[0],
					 col_name(c), cell[c + 1], want(r, c));
		r++;
	}
	fclose(f);
	if (!in)
		fail_msg("%s: no '%s' table", PATH, name);
	assert_int_equal(r, rows);
}
