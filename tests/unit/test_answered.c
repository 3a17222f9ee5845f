/*
 * test_answered.c - the norm exchanges a server was answered, kept
 * (engine/answered.c): the newest 8, none begun before a restore, and a
 * want of a step gets every exchange of it (a promoted copy's primaries
 * reported on their own) with the total applied. The simulator's norm
 * world keeps each server's with the same code (sim/norms.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <cmocka.h>

#include "engine/answered.h"

static struct zs_shard_norm *norms(uint32_t unit, uint32_t n)
{
	struct zs_shard_norm *v = malloc(n * sizeof *v);

	for (uint32_t i = 0; v && i < n; i++)
		v[i] = (struct zs_shard_norm){unit + i, 0, 1.0 + unit + i};
	return v;
}

static void test_kept_and_wanted(void **st)
{
	struct eng_answers a = {0};
	struct zs_shard_norm *out;
	uint32_t n;
	double total = 0;

	(void)st;
	assert_null(eng_ans_keep(&a, 0, 5, 7.5, norms(0, 2), 2));
	assert_null(eng_ans_keep(&a, 0, 5, 7.5, norms(4, 1), 1)); /* a promoted copy's */
	assert_null(eng_ans_keep(&a, 0, 6, 9.0, norms(0, 2), 2));
	assert_int_equal(eng_ans_of(&a, 5, &out, &n, &total), ZS_OK);
	assert_int_equal(n, 3);
	assert_true(total == 7.5);
	assert_int_equal(out[0].unit, 0);
	assert_int_equal(out[2].unit, 4);
	free(out);
	assert_int_equal(eng_ans_of(&a, 4, &out, &n, &total), ZS_ENOTFOUND);
	assert_null(out);
	/* an exchange begun before a restore is not kept; after it, none is */
	uint64_t gen = a.gen;
	eng_ans_forget(&a);
	struct zs_shard_norm *v = norms(0, 1);
	assert_ptr_equal(eng_ans_keep(&a, gen, 7, 1.0, v, 1), v);
	free(v);
	assert_int_equal(eng_ans_of(&a, 6, &out, &n, &total), ZS_ENOTFOUND);
	eng_ans_forget(&a);
}

/* The ninth exchange pushes out the first. */
static void test_newest_eight(void **st)
{
	struct eng_answers a = {0};
	struct zs_shard_norm *out;
	uint32_t n;
	double total;

	(void)st;
	for (uint64_t s = 1; s <= ENG_ANSWERED_KEEP + 1; s++)
		assert_null(eng_ans_keep(&a, 0, s, (double)s, norms(0, 1), 1));
	assert_int_equal(eng_ans_of(&a, 1, &out, &n, &total), ZS_ENOTFOUND);
	assert_int_equal(eng_ans_of(&a, 2, &out, &n, &total), ZS_OK);
	assert_true(total == 2.0);
	free(out);
	eng_ans_forget(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kept_and_wanted),
	    cmocka_unit_test(test_newest_eight),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
