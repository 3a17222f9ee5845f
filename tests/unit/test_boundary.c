/*
 * test_boundary.c - a rank's step boundary (model/boundary.c), case by
 * case: the answer a boundary takes is the one to the report posted last,
 * never one to a report given up on or dropped; and the step a stop is
 * set past is the highest reported on the job's timeline, whatever order
 * the reports came in. The simulator's boundary world runs the same core
 * under late answers, retries, stops and rollbacks (sim/bounds.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "model/boundary.h"

/* Post, send, answer, take: the pipelined boundary. */
static void test_posted_answered_taken(void **st)
{
	struct zs_bmail m = {0};

	(void)st;
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_ASK); /* nothing posted */
	assert_int_equal(zs_bm_pick(&m), 0);
	uint64_t a = zs_bm_post(&m);
	assert_int_equal(zs_bm_pick(&m), a);
	assert_int_equal(zs_bm_pick(&m), 0); /* on its way: not sent twice */
	assert_int_equal(zs_bm_peek(&m, false), ZS_BM_WAIT);
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_WAIT);
	assert_true(zs_bm_answered(&m, a));
	assert_int_equal(zs_bm_peek(&m, false), ZS_BM_TAKE); /* left for the boundary */
	assert_int_equal(zs_bm_peek(&m, true), ZS_BM_TAKE);
	assert_int_equal(zs_bm_take(&m, true), ZS_BM_TAKE);
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_ASK); /* taken once */
}

/* The boundary gives up on a report; the caller asks itself and posts
 * anew; the first report's answer, late, is not the new one's, and the
 * sender sends the new one next. */
static void test_given_up_answer_dropped(void **st)
{
	struct zs_bmail m = {0};

	(void)st;
	uint64_t a = zs_bm_post(&m);
	assert_int_equal(zs_bm_pick(&m), a);
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_WAIT);
	assert_int_equal(zs_bm_take(&m, true), ZS_BM_TIMEDOUT);
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_ASK); /* the call again: it asks */
	uint64_t b = zs_bm_post(&m);
	assert_int_not_equal(a, b);
	assert_int_equal(zs_bm_pick(&m), 0); /* the sender is still on a */
	assert_false(zs_bm_answered(&m, a)); /* a's answer: dropped */
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_WAIT);
	assert_int_equal(zs_bm_pick(&m), b);
	assert_true(zs_bm_answered(&m, b));
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_TAKE);
}

/* A report posted over one not sent yet: only the later one goes. */
static void test_superseded_before_sent(void **st)
{
	struct zs_bmail m = {0};

	(void)st;
	zs_bm_post(&m);
	uint64_t b = zs_bm_post(&m);
	assert_int_equal(zs_bm_pick(&m), b);
	assert_false(zs_bm_answered(&m, b - 1));
	assert_true(zs_bm_answered(&m, b));
}

/* A resume drops what was posted: its answer, late, is not taken, and a
 * post on the new timeline waits for its own. */
static void test_dropped_answer_not_taken(void **st)
{
	struct zs_bmail m = {0};

	(void)st;
	uint64_t a = zs_bm_post(&m);
	assert_int_equal(zs_bm_pick(&m), a);
	zs_bm_drop(&m);
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_ASK);
	assert_false(zs_bm_answered(&m, a)); /* nothing awaited */
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_ASK);
	uint64_t b = zs_bm_post(&m);
	assert_false(zs_bm_answered(&m, a)); /* late, after a new post */
	assert_int_equal(zs_bm_peek(&m, false), ZS_BM_WAIT);
	assert_int_equal(zs_bm_pick(&m), b);
	assert_true(zs_bm_answered(&m, b));
	assert_int_equal(zs_bm_take(&m, false), ZS_BM_TAKE);
}

/* A peek past its bound says so, and changes nothing. */
static void test_peek_expired(void **st)
{
	struct zs_bmail m = {0};

	(void)st;
	zs_bm_post(&m);
	assert_int_equal(zs_bm_peek(&m, true), ZS_BM_TIMEDOUT);
	assert_int_equal(zs_bm_peek(&m, false), ZS_BM_WAIT); /* peek changes nothing */
}

/* The highest step, not the one heard last; none on a new timeline
 * until its first report; a late report of the old one counts up only. */
static void test_top_highest_per_timeline(void **st)
{
	struct zs_btop t = {0};
	uint64_t top;

	(void)st;
	assert_false(zs_btop_latest(&t, 1, &top));
	zs_btop_heard(&t, 1, 0);
	assert_true(zs_btop_latest(&t, 1, &top));
	assert_int_equal(top, 0);
	zs_btop_heard(&t, 1, 4);
	zs_btop_heard(&t, 1, 3); /* a report that was slower than its successor */
	assert_true(zs_btop_latest(&t, 1, &top));
	assert_int_equal(top, 4);
	assert_false(zs_btop_latest(&t, 2, &top)); /* rolled back: none yet */
	zs_btop_heard(&t, 2, 2);
	assert_true(zs_btop_latest(&t, 2, &top));
	assert_int_equal(top, 2);
	assert_false(zs_btop_latest(&t, 1, &top)); /* the old timeline is gone */
}

/* What a rank does with the answer it took: a stop at or before the step
 * first; then a rank outside the step's world leaves; else it begins in
 * that world, rank 0 asking for the checkpoint the interval names. */
static void test_begin_decide(void **st)
{
	struct zs_job_spec spec = {.world_size = 4};
	struct zs_step_answer an = {.checkpoint_every = 5};
	uint32_t world;
	bool ckpt;

	(void)st;
	assert_int_equal(zs_begin_decide(&spec, &an, 0, 10, &world, &ckpt), ZS_BEGIN_STEP);
	assert_int_equal(world, 4);
	assert_true(ckpt);
	assert_int_equal(zs_begin_decide(&spec, &an, 1, 10, &world, &ckpt), ZS_BEGIN_STEP);
	assert_false(ckpt); /* rank 0 asks */
	assert_int_equal(zs_begin_decide(&spec, &an, 0, 0, &world, &ckpt), ZS_BEGIN_STEP);
	assert_false(ckpt); /* step 0: nothing to keep */
	assert_int_equal(zs_begin_decide(&spec, &an, 0, 11, &world, &ckpt), ZS_BEGIN_STEP);
	assert_false(ckpt);
	zs_worlds_add(&an.worlds, 12, 2); /* a shrink to 2 from step 12 */
	assert_int_equal(zs_begin_decide(&spec, &an, 3, 11, &world, &ckpt), ZS_BEGIN_STEP);
	assert_int_equal(zs_begin_decide(&spec, &an, 3, 12, &world, &ckpt), ZS_BEGIN_LEAVE);
	assert_int_equal(world, 2);
	assert_int_equal(zs_begin_decide(&spec, &an, 1, 12, &world, &ckpt), ZS_BEGIN_STEP);
	an.stop_before = 12; /* a stop there: every rank stops, in or out */
	assert_int_equal(zs_begin_decide(&spec, &an, 3, 12, &world, &ckpt), ZS_BEGIN_STOP);
	assert_int_equal(zs_begin_decide(&spec, &an, 0, 13, &world, &ckpt), ZS_BEGIN_STOP);
	assert_int_equal(zs_begin_decide(&spec, &an, 0, 11, &world, &ckpt), ZS_BEGIN_STEP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_posted_answered_taken),
		cmocka_unit_test(test_given_up_answer_dropped),
		cmocka_unit_test(test_superseded_before_sent),
		cmocka_unit_test(test_dropped_answer_not_taken),
		cmocka_unit_test(test_peek_expired),
		cmocka_unit_test(test_top_highest_per_timeline),
		cmocka_unit_test(test_begin_decide),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
