/*
 * test_membership.c - the coordinator's judgement of a shard server
 * (model/membership.c), event by event: registered, heartbeats, the lease
 * missed, up again, restarted without its state, and a server the catalog
 * holds but this coordinator has not heard from since it began to serve
 * (a restart, a takeover), which gets a lease from the first sweep and is
 * lost when it misses it (before, it never was: a server that died while
 * no coordinator served was never failed over from).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "model/membership.h"

enum { LEASE = 3000 };

static unsigned judge(struct zs_mbr *m, int64_t now)
{
	int64_t quiet;

	return zs_mbr_judge(m, now, LEASE, &quiet);
}

/* Registered: up; heartbeats keep it up; silent past its lease: lost,
 * once; a heartbeat brings it up again. */
static void test_lease(void **st)
{
	struct zs_mbr m;
	int64_t quiet;

	(void)st;
	zs_mbr_loaded(&m);
	assert_int_equal(zs_mbr_registered(&m, 1000, false), ZS_MBR_CAME_UP);
	assert_true(zs_mbr_up(&m));
	assert_false(zs_mbr_down(&m));
	assert_int_equal(zs_mbr_heartbeat(&m, 2000), 0); /* already up */
	assert_int_equal(judge(&m, 5000), 0);            /* 3000 ms: within */
	assert_int_equal(zs_mbr_judge(&m, 5001, LEASE, &quiet), ZS_MBR_LOST);
	assert_int_equal(quiet, 3001);
	assert_false(zs_mbr_up(&m));
	assert_true(zs_mbr_down(&m));
	assert_int_equal(zs_mbr_seen_ago(&m, 6000), 4000);
	assert_int_equal(judge(&m, 9000), 0); /* lost once */
	assert_int_equal(zs_mbr_heartbeat(&m, 9500), ZS_MBR_CAME_UP);
	assert_true(zs_mbr_up(&m));
	assert_int_equal(judge(&m, 12000), 0);
}

/* A registration of a fresh process says its state is gone, up or not. */
static void test_restarted(void **st)
{
	struct zs_mbr m;

	(void)st;
	zs_mbr_loaded(&m);
	assert_int_equal(zs_mbr_registered(&m, 1000, true), ZS_MBR_CAME_UP | ZS_MBR_RESTARTED);
	/* back sooner than its lease: up all along, its state gone all the same */
	assert_int_equal(zs_mbr_registered(&m, 2000, true), ZS_MBR_RESTARTED);
	assert_int_equal(zs_mbr_registered(&m, 2500, false), 0);
	assert_true(zs_mbr_up(&m));
}

/* In the catalog, not heard since the coordinator began to serve: neither
 * up nor down; a lease from the first sweep; heard within it, up and
 * nothing lost; not heard, lost as an up server that missed its lease. */
static void test_unheard(void **st)
{
	struct zs_mbr m;
	int64_t quiet;

	(void)st;
	zs_mbr_loaded(&m);
	assert_false(zs_mbr_up(&m));
	assert_false(zs_mbr_down(&m)); /* trainers are not told it is down */
	assert_int_equal(zs_mbr_seen_ago(&m, 100), -1);
	assert_int_equal(judge(&m, 700), 0); /* its lease begins */
	assert_int_equal(judge(&m, 3700), 0);
	assert_int_equal(zs_mbr_judge(&m, 3701, LEASE, &quiet), ZS_MBR_LOST);
	assert_int_equal(quiet, 3001);
	assert_true(zs_mbr_down(&m));
	assert_int_equal(zs_mbr_seen_ago(&m, 4000), -1);
	assert_int_equal(judge(&m, 8000), 0);
	/* heard at last: up */
	assert_int_equal(zs_mbr_heartbeat(&m, 9000), ZS_MBR_CAME_UP);
	assert_true(zs_mbr_up(&m));

	/* heard within its lease: up, no loss */
	zs_mbr_loaded(&m);
	assert_int_equal(judge(&m, 700), 0);
	assert_int_equal(zs_mbr_heartbeat(&m, 2000), ZS_MBR_CAME_UP);
	assert_int_equal(judge(&m, 4000), 0);
	assert_int_equal(judge(&m, 5000), 0);
	/* the coordinator restarts again: unheard, a new lease */
	zs_mbr_loaded(&m);
	assert_int_equal(judge(&m, 20000), 0);
	assert_int_equal(judge(&m, 23000), 0);
	assert_int_equal(judge(&m, 23001), ZS_MBR_LOST);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lease),
		cmocka_unit_test(test_restarted),
		cmocka_unit_test(test_unheard),
	};
	return cmocka_run_group_tests_name("membership", tests, NULL, NULL);
}
