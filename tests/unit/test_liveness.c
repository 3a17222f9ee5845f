/*
 * test_liveness.c - the liveness protocol's pure cores, event by event:
 * model/liveness.c (the coordinator's judgement of a trainer) and
 * engine/conns.c (a server's count of a rank's connections and its notes).
 * Each case is one of the interleavings the simulator (sim/liveness.c)
 * found or must keep: written out here so that a reader sees the rule and
 * a change that breaks it fails by name.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "engine/conns.h"
#include "model/liveness.h"

static const struct zs_live_cfg cfg = {.lease_ms = 10000, .gone_ms = 3000};

static enum zs_live_verdict judge(struct zs_live *m, int64_t now)
{
	int64_t quiet;

	return zs_live_judge(m, now, &cfg, &quiet);
}

/* A renewing member is fine; silent past gone_ms with a drop: gone;
 * silent past the lease: lapsed. */
static void test_verdicts(void **st)
{
	struct zs_live m;

	(void)st;
	zs_live_joined(&m, 1000);
	assert_int_equal(judge(&m, 5000), ZS_LIVE_OK); /* silent, no drop: the lease */
	assert_int_equal(zs_live_connections(&m, 1500, false, 0, 7, 7), ZS_LIVE_MARKED);
	assert_int_equal(judge(&m, 3900), ZS_LIVE_OK);
	assert_int_equal(judge(&m, 4001), ZS_LIVE_GONE);
	zs_live_joined(&m, 1000);
	assert_int_equal(judge(&m, 11001), ZS_LIVE_LAPSED);
	/* never renewed since the coordinator's start: a lease from now */
	m = (struct zs_live){0};
	assert_int_equal(judge(&m, 50000), ZS_LIVE_OK);
	assert_int_equal(judge(&m, 60001), ZS_LIVE_LAPSED);
}

/* A resume says its count odd, then closes: the end of the connections
 * made before (count 0) is the reconnect's, never a mark. */
static void test_reconnect_drop_is_not_a_death(void **st)
{
	struct zs_live m;

	(void)st;
	zs_live_joined(&m, 1000);
	zs_live_renewed(&m, 2000, 1); /* odd: reconnecting */
	assert_int_equal(zs_live_connections(&m, 2001, false, 0, 7, 7), ZS_LIVE_SAME);
	assert_int_equal(m.dropped_ms, 0);
	/* one made during this reconnect ending (a retry) while still odd:
	 * marked, but not gone while odd */
	assert_int_equal(zs_live_connections(&m, 2002, false, 1, 7, 7), ZS_LIVE_MARKED);
	assert_int_equal(judge(&m, 8000), ZS_LIVE_OK);
}

/* A dead process's last renewal arriving after its servers' word does not
 * clear the drop (its death would wait for the lease); one a renewal
 * period later, or one saying a newer reconnect, does. */
static void test_late_renewal_keeps_the_drop(void **st)
{
	struct zs_live m;

	(void)st;
	zs_live_joined(&m, 1000);
	zs_live_renewed(&m, 2000, 2); /* its connections made at count 1 */
	zs_live_connections(&m, 3000, false, 1, 7, 7);
	zs_live_renewed(&m, 3200, 2); /* sent before it died */
	assert_int_equal(m.dropped_ms, 3000);
	assert_int_equal(judge(&m, 6201), ZS_LIVE_GONE);
	zs_live_renewed(&m, 4000, 2); /* alive a renewal period later */
	assert_int_equal(m.dropped_ms, 0);
	zs_live_connections(&m, 5000, false, 1, 7, 7);
	zs_live_renewed(&m, 5100, 3); /* a newer reconnect began */
	assert_int_equal(m.dropped_ms, 0);
}

/* The count only grows (renewals overtake each other); a back clears; a
 * drop of newer connections marks again, with the newer count. */
static void test_counts_and_backs(void **st)
{
	struct zs_live m;

	(void)st;
	zs_live_joined(&m, 1000);
	zs_live_renewed(&m, 1100, 4);
	zs_live_renewed(&m, 1101, 3);
	assert_int_equal(m.reconnects, 4);
	assert_int_equal(zs_live_connections(&m, 1200, false, 3, 7, 7), ZS_LIVE_MARKED);
	assert_int_equal(zs_live_connections(&m, 1300, false, 3, 7, 7), ZS_LIVE_SAME);
	/* newer connections ended: marked again, with their count */
	assert_int_equal(zs_live_connections(&m, 1400, false, 5, 7, 7), ZS_LIVE_MARKED);
	assert_int_equal(m.dropped_count, 5);
	assert_int_equal(zs_live_connections(&m, 1500, true, 5, 7, 7), ZS_LIVE_CLEARED);
	assert_int_equal(zs_live_connections(&m, 1600, true, 5, 7, 7), ZS_LIVE_SAME);
	/* an earlier process's connections (session 6; the member is 7):
	 * nothing of this one; a server that does not say (0): taken */
	assert_int_equal(zs_live_connections(&m, 1700, false, 9, 6, 7), ZS_LIVE_SAME);
	assert_int_equal(zs_live_connections(&m, 1700, false, 9, 0, 7), ZS_LIVE_MARKED);
}

/* After a coordinator restart (counts not persisted) the end of
 * connections of a reconnect it has not heard of is not a death by the
 * fast path: the lease bounds it, until a renewal says the count. */
static void test_unheard_reconnect(void **st)
{
	struct zs_live m = {0}; /* as the restarted coordinator loads it */

	(void)st;
	assert_int_equal(zs_live_connections(&m, 2000, false, 25, 7, 7), ZS_LIVE_MARKED);
	assert_int_equal(judge(&m, 2000), ZS_LIVE_OK);
	assert_int_equal(judge(&m, 9000), ZS_LIVE_OK);
	zs_live_renewed(&m, 2500, 26); /* heard: its count is past it */
	assert_int_equal(m.dropped_ms, 2000); /* a renewal period has not passed */
	assert_int_equal(judge(&m, 5501), ZS_LIVE_GONE);
}

/* A server's count: a drop when the last connection ends, a back when a
 * dropped rank connects again, each saying the newest count. */
static void test_conns(void **st)
{
	struct zs_conns r = {0};
	uint64_t c, sn;

	(void)st;
	assert_int_equal(zs_conns_up(&r, 1, 7, &c, &sn), ZS_CONNS_NONE);
	assert_int_equal(zs_conns_up(&r, 3, 7, &c, &sn), ZS_CONNS_NONE);
	c = 3;
	assert_int_equal(zs_conns_down(&r, &c, &sn), ZS_CONNS_NONE);
	c = 1; /* the older one ends last: the note says the newest */
	assert_int_equal(zs_conns_down(&r, &c, &sn), ZS_CONNS_DROPPED);
	assert_int_equal(c, 3);
	assert_int_equal(sn, 7);
	c = 0;
	assert_int_equal(zs_conns_down(&r, &c, &sn), ZS_CONNS_NONE); /* none counted */
	assert_int_equal(zs_conns_up(&r, 5, 7, &c, &sn), ZS_CONNS_BACK);
	assert_int_equal(c, 5);
	/* a new process's connection (count 1, session 8) while the old
	 * one's (count 5) is open: the newest is the new process's */
	assert_int_equal(zs_conns_up(&r, 1, 8, &c, &sn), ZS_CONNS_NONE);
	c = 1;
	assert_int_equal(zs_conns_down(&r, &c, &sn), ZS_CONNS_NONE);
	c = 5;
	assert_int_equal(zs_conns_down(&r, &c, &sn), ZS_CONNS_DROPPED);
	assert_int_equal(c, 1);
	assert_int_equal(sn, 8);
}

/* The notes: one waiting per rank, the latest word; a batch on its way
 * is never changed, and one not sent goes again before anything newer. */
static void test_notes(void **st)
{
	struct zs_notes l = {0};
	struct zs_dropped out[8];

	(void)st;
	/* nothing noted yet (no list at all): nothing taken, nothing settled */
	assert_int_equal(zs_notes_take(&l, out, 8), 0);
	zs_notes_settle(&l, true);
	assert_int_equal(l.n, 0);
	assert_true(zs_notes_add(&l, "j", 1, 0, false, 1, 7));
	assert_true(zs_notes_add(&l, "j", 1, 0, true, 3, 7)); /* the latest word: back */
	assert_true(zs_notes_add(&l, "j", 1, 1, false, 0, 7));
	assert_int_equal(l.n, 2);
	assert_true(l.v[0].back);
	assert_int_equal(zs_notes_take(&l, out, 8), 2);
	assert_int_equal(zs_notes_take(&l, out, 8), 0); /* one batch at a time */
	/* while it is on its way: rank 0 dropped again follows it */
	assert_true(zs_notes_add(&l, "j", 1, 0, false, 3, 7));
	assert_int_equal(l.n, 3);
	zs_notes_settle(&l, false); /* not answered: it goes again, first */
	assert_int_equal(zs_notes_take(&l, out, 8), 3);
	assert_true(out[0].back);
	assert_false(out[2].back);
	assert_int_equal(out[2].reconnects, 3);
	zs_notes_settle(&l, true);
	assert_int_equal(l.n, 0);
	/* another job's rank is another note */
	assert_true(zs_notes_add(&l, "j", 1, 0, false, 0, 7));
	assert_true(zs_notes_add(&l, "k", 1, 0, false, 0, 7));
	assert_true(zs_notes_add(&l, "j", 2, 0, false, 0, 7));
	assert_int_equal(l.n, 3);
	zs_notes_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_verdicts),
	    cmocka_unit_test(test_reconnect_drop_is_not_a_death),
	    cmocka_unit_test(test_late_renewal_keeps_the_drop),
	    cmocka_unit_test(test_counts_and_backs),
	    cmocka_unit_test(test_unheard_reconnect),
	    cmocka_unit_test(test_conns),
	    cmocka_unit_test(test_notes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
