/*
 * test_verdict.c - what a lost server means to a rank that waits
 * (model/verdict.c), case by case: the driver's wait in slices, a
 * replicated failover's poll, and the wait for the coordinator's verdict.
 * The simulator's loss world runs the same core under servers killed,
 * stopped and lost twice over, and ranks cut off (sim/losses.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "model/verdict.h"

/* No loss: slices go on until the bound. A server marked down (one copy):
 * the coordinator is asked each slice; its rollback resumes the rank. */
static void test_opwait(void **st)
{
	struct zs_opwait w;

	(void)st;
	zs_opw_start(&w, 1000, 500);
	assert_int_equal(zs_opw_slice(&w, 1250, false, false, false), ZS_LV_WAIT);
	assert_int_equal(zs_opw_slice(&w, 1400, true, false, false), ZS_LV_ASK);
	assert_int_equal(zs_opw_told(&w, false), ZS_LV_WAIT);
	/* the mark stays: asked again though no new loss is seen */
	assert_int_equal(zs_opw_slice(&w, 1450, false, false, false), ZS_LV_ASK);
	assert_int_equal(zs_opw_told(&w, true), ZS_LV_RESUME);
	assert_int_equal(zs_opw_slice(&w, 1500, false, false, false), ZS_LV_TIMEDOUT);
}

/* Replicated: a failover that failed ends the wait; one that met the
 * rollback says resume, never "unavailable". */
static void test_opwait_replicated(void **st)
{
	struct zs_opwait w;

	(void)st;
	zs_opw_start(&w, 0, 10000);
	assert_int_equal(zs_opw_slice(&w, 250, true, true, false), ZS_LV_FAIL);
	zs_opw_start(&w, 0, 10000);
	assert_int_equal(zs_opw_slice(&w, 250, true, true, true), ZS_LV_RESUME);
}

/* The failover's poll: the rollback first, then the placement, then a
 * server whole again; without an answer, the call's status past the
 * deadline; with one, the bound. */
static void test_failover_look(void **st)
{
	(void)st;
	assert_int_equal(zs_fo_look(0, 100, true, 1, 2, true, true), ZS_LV_RESUME);
	assert_int_equal(zs_fo_look(0, 100, true, 1, 1, true, true), ZS_LV_TAKE);
	assert_int_equal(zs_fo_look(0, 100, true, 1, 1, false, true), ZS_LV_BACK);
	assert_int_equal(zs_fo_look(0, 100, false, 1, 0, false, true), ZS_LV_BACK);
	assert_int_equal(zs_fo_look(0, 100, true, 1, 1, false, false), ZS_LV_WAIT);
	assert_int_equal(zs_fo_look(101, 100, true, 1, 1, false, false), ZS_LV_TIMEDOUT);
	assert_int_equal(zs_fo_look(50, 100, false, 1, 0, false, false), ZS_LV_WAIT);
	assert_int_equal(zs_fo_look(101, 100, false, 1, 0, false, false), ZS_LV_FAIL);
}

/* The verdict: only a loss is waited on; a loss that never shows lets the
 * status stand after 2 s; one that shows waits for the rollback. */
static void test_verdict(void **st)
{
	struct zs_verdict v = {0};
	struct zs_vdwait w;

	(void)st;
	assert_int_equal(zs_vd_start(&w, &v, ZS_EINVAL, true, 1, 0, 10000), ZS_LV_FAIL);
	assert_int_equal(zs_vd_start(&w, &v, ZS_EUNAVAIL, false, 1, 0, 10000), ZS_LV_FAIL);
	assert_int_equal(zs_vd_start(&w, &v, ZS_EUNAVAIL, true, 1, 0, 10000), ZS_LV_ASK);
	assert_int_equal(zs_vd_told(&w, &v, 100, false, false), ZS_LV_WAIT);
	assert_int_equal(zs_vd_told(&w, &v, ZS_VERDICT_SHOW_MS, false, false), ZS_LV_FAIL);

	assert_int_equal(zs_vd_start(&w, &v, ZS_EUNAVAIL, true, 1, 0, 10000), ZS_LV_ASK);
	assert_int_equal(zs_vd_told(&w, &v, 100, false, true), ZS_LV_WAIT);
	assert_int_equal(zs_vd_told(&w, &v, 5000, false, false), ZS_LV_WAIT); /* seen: waits on */
	assert_int_equal(zs_vd_told(&w, &v, 6000, true, false), ZS_LV_RESUME);
	assert_int_equal(v.given_up1, 0);
}

/* No verdict within the bound: given up on this timeline; the next
 * failure looks once (a rollback since still resumes it), then stands. */
static void test_verdict_given_up(void **st)
{
	struct zs_verdict v = {0};
	struct zs_vdwait w;

	(void)st;
	assert_int_equal(zs_vd_start(&w, &v, ZS_EUNAVAIL, true, 3, 0, 10000), ZS_LV_ASK);
	assert_int_equal(zs_vd_told(&w, &v, 100, false, true), ZS_LV_WAIT);
	assert_int_equal(zs_vd_told(&w, &v, 10000, false, true), ZS_LV_TIMEDOUT);
	assert_int_equal(v.given_up1, 4);
	assert_int_equal(zs_vd_start(&w, &v, ZS_EUNAVAIL, true, 3, 20000, 10000), ZS_LV_ASK);
	assert_int_equal(zs_vd_told(&w, &v, 20010, false, true), ZS_LV_FAIL);
	assert_int_equal(zs_vd_start(&w, &v, ZS_EUNAVAIL, true, 3, 30000, 10000), ZS_LV_ASK);
	assert_int_equal(zs_vd_told(&w, &v, 30010, true, false), ZS_LV_RESUME);
	/* a new timeline waits in full again */
	assert_int_equal(zs_vd_start(&w, &v, ZS_EUNAVAIL, true, 4, 40000, 10000), ZS_LV_ASK);
	assert_int_equal(zs_vd_told(&w, &v, 40100, false, true), ZS_LV_WAIT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opwait),
		cmocka_unit_test(test_opwait_replicated),
		cmocka_unit_test(test_failover_look),
		cmocka_unit_test(test_verdict),
		cmocka_unit_test(test_verdict_given_up),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
