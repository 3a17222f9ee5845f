/*
 * test_copies.c - a replicated shard's copies, decided (engine/copies.c),
 * case by case: what a copy does with a forward, which durable answers
 * may go, what a new placement does to the update on its way. The step
 * world of the simulator (sim/step.c) runs the same rules under faults.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "engine/copies.h"

static enum zs_status take(uint64_t version, bool ready, bool landing, uint64_t step,
			   enum eng_fwd_take *t)
{
	struct zs_error err = {0};

	return eng_copy_take(version, ready, landing, step, t, &err);
}

/* Its open step lands and is applied; one applied already (sent again
 * after a failover), or the step before it (a promoted copy's last step,
 * to a fellow a step ahead), is answered as applied; a later one, one two
 * steps back, a second one at once, or a copy with no state: refused. */
static void test_copy_takes(void **st)
{
	enum eng_fwd_take t;

	(void)st;
	assert_int_equal(take(5, true, false, 5, &t), ZS_OK);
	assert_int_equal(t, EF_APPLY);
	assert_true(eng_copy_apply(5, true, 5));
	assert_false(eng_copy_apply(6, false, 5)); /* it landed twice: applied once */
	assert_int_equal(take(5, true, false, 4, &t), ZS_OK);
	assert_int_equal(t, EF_APPLIED);
	assert_int_equal(take(5, true, false, 3, &t), ZS_OK);
	assert_int_equal(t, EF_APPLIED);
	assert_int_equal(take(5, true, false, 2, &t), ZS_ESTATE);
	assert_int_equal(take(5, true, false, 6, &t), ZS_ESTATE);
	assert_int_equal(take(5, true, true, 5, &t), ZS_EEXIST);
	assert_int_equal(take(0, false, false, 0, &t), ZS_ENOTFOUND);
}

/* A push of step t is answered once the update of t is on every copy. */
static void test_frontier(void **st)
{
	(void)st;
	assert_int_equal(eng_acks_frontier(5, false), 5);
	assert_int_equal(eng_acks_frontier(5, true), 4);
	assert_int_equal(eng_acks_frontier(0, true), 0);
}

/* A new placement: a forward under way goes to the copies left, or with
 * none left is done; a promoted copy sends its last step again (with
 * copies, state and a last step whose mean it holds), or, seeded since,
 * its state as a catch-up. */
static void test_replan(void **st)
{
	(void)st;
	assert_int_equal(eng_copies_replan(true, 1, false, true, 5, 5), ER_FORWARD_AGAIN);
	assert_int_equal(eng_copies_replan(true, 0, false, true, 5, 5), ER_DONE);
	assert_int_equal(eng_copies_replan(false, 1, true, true, 5, 5), ER_LAST_AGAIN);
	assert_int_equal(eng_copies_replan(false, 0, true, true, 5, 5), ER_NOTHING);
	/* seeded since its last step: no mean to send; its state, to those behind */
	assert_int_equal(eng_copies_replan(false, 1, true, true, 5, 0), ER_CATCH_UP);
	assert_int_equal(eng_copies_replan(false, 1, true, true, 5, 4), ER_CATCH_UP);
	assert_int_equal(eng_copies_replan(false, 1, true, false, 5, 0), ER_NOTHING);
	assert_int_equal(eng_copies_replan(false, 1, true, true, 0, 0), ER_NOTHING);
	assert_int_equal(eng_copies_replan(false, 1, false, true, 5, 5), ER_NOTHING);
}

/* Only the forward of the update that made the version settles the wait:
 * found by the simulator (seed 7052 of sim/step.c), where an older step's
 * forward (a promoted copy's last step sent again) ended first and the
 * trainers were answered for a step one copy lacked. */
static void test_settles(void **st)
{
	(void)st;
	assert_true(eng_copies_settles(true, 3, 3, 7, 7));  /* step 6's forward */
	assert_false(eng_copies_settles(true, 3, 3, 6, 7)); /* older: the newer settles */
	assert_false(eng_copies_settles(true, 3, 2, 7, 7)); /* a new placement came */
	assert_false(eng_copies_settles(false, 3, 3, 7, 7)); /* settled already */
	assert_true(eng_copies_settles(true, 0, 0, 0, 0));   /* the initial upload */
	assert_false(eng_copies_settles(true, 0, 0, 0, 1));
}

/* A new copy's seed: taken unless something lands or its state is later;
 * taken mid-step, the copy drops that step's micro-batches (their earlier
 * terms are not in its state) and is whole once the step's forward is
 * applied there; a copy this primary seeded is not seeded again for a
 * forward it refused before its seed came (found by the simulator: taken
 * again mid-step, it dropped terms it was reported whole with). */
static void test_seeds(void **st)
{
	struct zs_error err = {0};
	enum eng_part_take pt;
	const uint64_t seeded[2] = {7, 9};

	(void)st;
	assert_int_equal(eng_copy_seed_take(false, false, 0, 4, false, 0, 0, &err), ZS_OK);
	assert_int_equal(eng_copy_seed_take(true, false, 0, 4, false, 0, 0, &err), ZS_EEXIST);
	assert_int_equal(eng_copy_seed_take(false, true, 5, 4, false, 0, 0, &err), ZS_EEXIST);
	/* a new primary's */
	assert_int_equal(eng_copy_seed_take(false, true, 4, 4, false, 0, 0, &err), ZS_OK);
	/* sent again (the copy said it had none): taken only without state,
	 * whatever step it holds (its first seed came after it said so) */
	assert_int_equal(eng_copy_seed_take(false, false, 0, 4, true, 0, 0, &err), ZS_OK);
	assert_int_equal(eng_copy_seed_take(false, true, 4, 4, true, 0, 0, &err), ZS_EEXIST);
	assert_non_null(strstr(err.msg, "sent again"));
	assert_int_equal(eng_copy_seed_take(false, true, 3, 4, true, 0, 0, &err), ZS_EEXIST);
	assert_int_equal(eng_copy_seed_take(true, false, 0, 4, true, 0, 0, &err), ZS_EEXIST);
	/* a seed of a run a restore of the copy ended (its state read before
	 * that restore): refused, whatever the copy holds; of its own run or
	 * a later one (the copy not restored yet), taken */
	assert_int_equal(eng_copy_seed_take(false, true, 10, 17, false, 2, 3, &err), ZS_EEXIST);
	assert_non_null(strstr(err.msg, "which a restore ended"));
	assert_int_equal(eng_copy_seed_take(false, false, 0, 17, false, 2, 3, &err), ZS_EEXIST);
	assert_int_equal(eng_copy_seed_take(false, true, 10, 12, false, 3, 3, &err), ZS_OK);
	assert_int_equal(eng_copy_seed_take(false, false, 0, 12, false, 3, 0, &err), ZS_OK);
	assert_int_equal(eng_copy_seed_gap(true, 4), 5);
	assert_int_equal(eng_copy_seed_gap(false, 4), 0);
	assert_int_equal(eng_copy_partial_take(4, 5, 4, &pt, &err), ZS_OK);
	assert_int_equal(pt, EP_DROP);
	assert_int_equal(eng_copy_partial_take(4, 0, 4, &pt, &err), ZS_OK);
	assert_int_equal(pt, EP_COUNT);
	assert_int_equal(eng_copy_partial_take(5, 0, 4, &pt, &err), ZS_OK); /* applied */
	assert_int_equal(pt, EP_DROP);
	assert_int_equal(eng_copy_partial_take(4, 0, 5, &pt, &err), ZS_ESTATE);
	assert_int_equal(eng_copy_gap_after(5, 5), 0); /* step 4 applied: whole */
	assert_int_equal(eng_copy_gap_after(5, 4), 5);
	assert_false(eng_copy_seed_whole(true));
	assert_true(eng_copy_seed_whole(false));
	assert_true(eng_copies_settled(4, false, 4));
	assert_false(eng_copies_settled(4, false, 3));
	assert_false(eng_copies_settled(0, true, 0));
	/* a copy it seeded in this epoch that says it has no state: again,
	 * taken only while it has none (its server restarted, and the
	 * primary took the copy gone and placed anew in one epoch) */
	assert_int_equal(eng_copy_reseed(seeded, 2, 9), ES_IF_EMPTY);
	assert_int_equal(eng_copy_reseed(seeded, 2, 8), ES_SEED);
	assert_int_equal(eng_copy_reseed(seeded, 0, 9), ES_SEED);
	/* a copy it had, placed anew in an epoch it never took (epoch 8
	 * placed it, the primary held 6 and takes 9): another copy; one placed
	 * in the epoch it held, or seeded (not fresh), the same */
	assert_true(eng_copy_placed_anew(true, 8, 6));
	assert_false(eng_copy_placed_anew(true, 6, 6));
	assert_false(eng_copy_placed_anew(false, 8, 6));
	assert_false(eng_copy_placed_anew(true, 0, 6));
}

/* A promoted copy's catch-up (its state, from a copy seeded since its
 * last step): taken by a copy behind it or with no state, kept out by one
 * at its step or past it, sent again while something lands there. Found
 * by the simulator (seed 297397): a copy a step behind its promoted
 * fellow stayed behind while the trainers were answered for that step. */
static void test_catchup(void **st)
{
	struct zs_error err = {0};

	(void)st;
	assert_int_equal(eng_copy_catchup_take(false, true, 4, 5, &err), ZS_OK);
	assert_int_equal(eng_copy_catchup_take(false, false, 0, 5, &err), ZS_OK);
	assert_int_equal(eng_copy_catchup_take(false, true, 5, 5, &err), ZS_EEXIST);
	assert_int_equal(eng_copy_catchup_take(false, true, 6, 5, &err), ZS_EEXIST);
	assert_int_equal(eng_copy_catchup_take(true, true, 4, 5, &err), ZS_ESTATE);
	assert_true(eng_copies_settles(true, 2, 2, 5, 5)); /* a catch-up of step 5 */
}

/* A shard with every push of its step in waits while the update before is
 * on its way, or while a forward of that step lands in its mean gradient
 * (found by the simulator: a copy promoted as it landed reduced the step
 * into the same buffer, two writers). */
static void test_hold(void **st)
{
	(void)st;
	assert_true(eng_copies_hold(true, false));
	assert_true(eng_copies_hold(false, true));
	assert_false(eng_copies_hold(false, false));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_copy_takes),
	    cmocka_unit_test(test_frontier),
	    cmocka_unit_test(test_replan),
	    cmocka_unit_test(test_settles),
	    cmocka_unit_test(test_catchup),
	    cmocka_unit_test(test_seeds),
	    cmocka_unit_test(test_hold),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
