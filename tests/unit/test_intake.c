/*
 * test_intake.c - a shard's open step, counted (engine/intake.c), event
 * by event: each case is an interleaving the step world of the simulator
 * (sim/step.c) runs, written out so that a reader sees the rule and a
 * change that breaks it fails by name. "in" counts a rank's term as the
 * sum would: the tests keep their own count of deposits and check it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "engine/intake.h"

struct shard {
	struct eng_intake in;
	struct eng_at at;
	int sum[4][3]; /* deposits of rank r's micro-batch m (m 2: its last push) */
};

static void open_shard(struct shard *s, uint32_t ranks, uint32_t replicas)
{
	memset(s, 0, sizeof *s);
	assert_int_equal(eng_in_init(&s->in, ranks), 0);
	s->at = (struct eng_at){.version = 0, .replicas = replicas, .contributors = ranks,
				.world = ranks, .unit = "u"};
}

static struct eng_push push(uint64_t step, uint32_t rank, int micro, bool redo)
{
	/* micro < 0: the rank's last push of the step */
	return (struct eng_push){.step = step, .rank = rank, .micro = micro < 0 ? 0 : (uint32_t)micro,
				 .partial = micro >= 0, .redo = redo};
}

static enum zs_status begin(struct shard *s, const struct eng_push *p, enum eng_take *take)
{
	struct zs_error err = {0};
	enum zs_status st = eng_in_begin(&s->in, &s->at, p, take, &err);

	if (!st)
		eng_in_began(&s->in, p, *take);
	return st;
}

static struct eng_in_fx land(struct shard *s, const struct eng_push *p)
{
	struct eng_in_fx fx;

	eng_in_landed(&s->in, &s->at, p, &fx);
	if (fx.deposit)
		s->sum[p->rank][p->partial ? p->micro : 2]++;
	return fx;
}

/* begin then land at once: the fx */
static struct eng_in_fx send(struct shard *s, const struct eng_push *p)
{
	enum eng_take take;

	assert_int_equal(begin(s, p, &take), ZS_OK);
	return land(s, p);
}

static void applied(struct shard *s)
{
	s->at.version++;
	eng_in_clear(&s->in);
	memset(s->sum, 0, sizeof s->sum);
}

/* Two ranks, one push each: the last completes the step; a second push of
 * a rank is refused, as is one of another step. */
static void test_a_step(void **st)
{
	struct shard s;
	enum eng_take take;
	struct eng_push p0 = push(0, 0, -1, false), p1 = push(0, 1, -1, false);

	(void)st;
	open_shard(&s, 2, 1);
	assert_false(send(&s, &p0).complete);
	assert_int_equal(begin(&s, &p0, &take), ZS_EEXIST);
	struct eng_push later = push(1, 1, -1, false);
	assert_int_equal(begin(&s, &later, &take), ZS_ESTATE);
	struct eng_in_fx fx = send(&s, &p1);
	assert_true(fx.complete && fx.deposit && fx.ack == EI_ACK_NOW);
	assert_int_equal(s.sum[0][2] + s.sum[1][2], 2);
	eng_in_free(&s.in);
}

/* A replacement redoes its rank's step: what the rank pushed goes in once
 * (its micro-batches by count, its last push by its slot), the rest is
 * counted. */
static void test_redo_counts_once(void **st)
{
	struct shard s;
	struct eng_push m0 = push(0, 0, 0, false);

	(void)st;
	open_shard(&s, 2, 1);
	send(&s, &m0); /* then rank 0's process died */
	struct eng_push r0 = push(0, 0, 0, true), r1 = push(0, 0, 1, true), rl = push(0, 0, -1, true);
	assert_false(send(&s, &r0).deposit);
	assert_true(send(&s, &r1).deposit);
	assert_true(send(&s, &rl).deposit);
	struct eng_push again = push(0, 0, -1, true); /* a second replacement */
	assert_false(send(&s, &again).deposit);
	assert_int_equal(s.sum[0][0], 1);
	assert_int_equal(s.sum[0][1], 1);
	assert_int_equal(s.sum[0][2], 1);
	eng_in_free(&s.in);
}

/* Found by the simulator (seed 37860 of sim/step.c): a replacement's push
 * in already began; then the replaced process's push, late on its
 * connection, began and took its rank's slot (LANDING); the replacement's
 * push, landing, was decided again by that slot, not in already: counted,
 * and its term was in the sum twice. It is decided by what made it in
 * already, which does not go back within a step. */
static void test_late_push_of_the_replaced_process(void **st)
{
	struct shard s;
	enum eng_take take;
	struct eng_push m0 = push(0, 1, 0, false), late = push(0, 1, 1, false);
	struct eng_push r0 = push(0, 1, 0, true);

	(void)st;
	open_shard(&s, 2, 1);
	send(&s, &m0);
	assert_int_equal(begin(&s, &r0, &take), ZS_OK);
	assert_int_equal(take, EI_AGAIN);
	assert_int_equal(begin(&s, &late, &take), ZS_OK); /* the dead process's, late */
	assert_int_equal(take, EI_COUNTED);
	assert_false(land(&s, &r0).deposit);
	assert_int_equal(s.sum[1][0], 1);
	/* the late push's bytes never all came: unlanded, its slot free; the
	 * replacement's own unlanded push in already frees nothing */
	assert_true(eng_in_unlanded(&s.in, &s.at, &late));
	assert_int_equal(s.in.landing, 0);
	assert_int_equal(begin(&s, &r0, &take), ZS_OK);
	struct eng_push r1 = push(0, 1, 1, true);
	assert_int_equal(begin(&s, &r1, &take), ZS_OK);
	assert_int_equal(take, EI_COUNTED);
	assert_true(eng_in_unlanded(&s.in, &s.at, &r0)); /* in already: the slot stays r1's */
	assert_int_equal(s.in.slot[1], SLOT_LANDING);
	assert_int_equal(s.in.landing, 1);
	assert_true(land(&s, &r1).deposit);
	assert_int_equal(s.sum[1][1], 1);
	eng_in_free(&s.in);
}

/* While the replaced process's push is landing, the replacement's waits
 * (ZS_EAGAIN), and goes in once after. */
static void test_redo_waits_for_the_landing(void **st)
{
	struct shard s;
	enum eng_take take;
	struct eng_push old = push(0, 0, -1, false), redo = push(0, 0, -1, true);

	(void)st;
	open_shard(&s, 1, 1);
	assert_int_equal(begin(&s, &old, &take), ZS_OK);
	assert_int_equal(begin(&s, &redo, &take), ZS_EAGAIN);
	assert_true(land(&s, &old).complete);
	applied(&s);
	assert_int_equal(begin(&s, &redo, &take), ZS_OK); /* its step applied: in already */
	assert_int_equal(take, EI_AGAIN);
	assert_false(land(&s, &redo).deposit);
	eng_in_free(&s.in);
}

/* Replicas: a last push is answered once its step is on every copy; a
 * push sent again after a failover to a copy that applied its step is in
 * already; a replacement's micro-batch with its rank's last push in is
 * forwarded (the copies take it once) and never frees the slot. */
static void test_replicas(void **st)
{
	struct shard s;
	enum eng_take take;
	struct eng_push m0 = push(0, 0, 0, false), last = push(0, 0, -1, false);

	(void)st;
	open_shard(&s, 2, 2);
	struct eng_in_fx fx = send(&s, &m0);
	assert_true(fx.forward && fx.deposit);
	fx = send(&s, &last);
	assert_int_equal(fx.ack, EI_ACK_DURABLE);
	struct eng_push r0 = push(0, 0, 0, true);
	assert_int_equal(begin(&s, &r0, &take), ZS_OK);
	assert_int_equal(take, EI_AGAIN);
	fx = land(&s, &r0);
	assert_true(fx.forward && !fx.deposit);
	assert_int_equal(s.in.slot[0], SLOT_FULL);
	struct eng_push rl = push(0, 0, -1, true);
	assert_false(send(&s, &rl).deposit);
	struct eng_push m1 = push(0, 1, 0, false), l1 = push(0, 1, -1, false);
	send(&s, &m1);
	assert_true(send(&s, &l1).complete);
	applied(&s);
	/* after a failover, the promoted copy applied step 0: sent again */
	assert_int_equal(begin(&s, &l1, &take), ZS_OK);
	assert_int_equal(take, EI_AGAIN);
	fx = land(&s, &l1);
	assert_true(!fx.deposit && fx.give_back && fx.flush && fx.ack == EI_ACK_DURABLE);
	/* a copy takes a forwarded micro-batch once */
	struct eng_push f = push(1, 1, 0, false);
	assert_true(eng_in_forwarded(&s.in, &s.at, &f));
	assert_false(eng_in_forwarded(&s.in, &s.at, &f));
	eng_in_free(&s.in);
}

/* A micro-batch before the one it follows is refused (replicas); a world
 * that grows keeps its counts. */
static void test_order_and_growth(void **st)
{
	struct shard s;
	enum eng_take take;
	struct eng_push m1 = push(0, 0, 1, false);

	(void)st;
	open_shard(&s, 1, 2);
	assert_int_equal(begin(&s, &m1, &take), ZS_ESTATE);
	struct eng_push m0 = push(0, 0, 0, false);
	send(&s, &m0);
	assert_int_equal(eng_in_grow(&s.in, 3), 0);
	assert_int_equal(s.in.pcount[0], 1);
	assert_int_equal(s.in.slot[2], SLOT_EMPTY);
	assert_int_equal(s.in.pcount[2], 0);
	eng_in_free(&s.in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_step),
	    cmocka_unit_test(test_redo_counts_once),
	    cmocka_unit_test(test_late_push_of_the_replaced_process),
	    cmocka_unit_test(test_redo_waits_for_the_landing),
	    cmocka_unit_test(test_replicas),
	    cmocka_unit_test(test_order_and_growth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
