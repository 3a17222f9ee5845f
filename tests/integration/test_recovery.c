/*
 * test_recovery.c - the coordinator's bookkeeping of where a job's ranks
 * left it, against rollbacks, through real RPCs (catalog_common.h): each
 * transition of the state machine docs/DESIGN.md lists ("Where a job
 * stands"), in the orders leaves and rollbacks can arrive in, on LMDB and
 * on etcd. A leave from a timeline that has ended must not say where the
 * job stands: counted, a job being restored to step c recorded "every
 * rank left before step k", its ranks resumed at k and the servers at c,
 * and both waited out the step timeout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness.h"
#include "base/util.h"
#include "tests/integration/catalog_common.h"

static void join_rank(const char *job, uint32_t rank, uint64_t session, struct zs_job *out)
{
	struct zs_join_req r = {.rank = rank, .session = session};
	struct zs_error err = {0};

	snprintf(r.job, sizeof r.job, "%s", job);
	snprintf(r.host, sizeof r.host, "test");
	if (zs_coord_join(C.c, &r, out, &err))
		fail_msg("join %s rank %u: %s", job, rank, err.msg);
}

/* A lease renewed: the test's ranks never lapse while it runs. */
/* A renewal of rank; reconnects: its count of reconnects begun and ended */
static void beat_ex(const char *job, uint32_t rank, uint64_t session, uint64_t reconnects)
{
	uint64_t timeline;
	struct zs_server_info *down = NULL;
	uint32_t n_down = 0;

	assert_int_equal(zs_coord_trainer_heartbeat(C.c, job, rank, session, reconnects, &timeline,
						    &down, &n_down, NULL),
			 ZS_OK);
	free(down);
}

static void beat(const char *job, uint32_t rank, uint64_t session)
{
	beat_ex(job, rank, session, 0);
}

static void leave(const char *job, uint32_t rank, uint64_t session, bool abandoned,
		  uint64_t next, const uint64_t *timeline)
{
	struct zs_job j;
	struct zs_error err = {0};
	enum zs_status st =
		timeline ? zs_coord_leave_at(C.c, job, rank, session, abandoned, next, *timeline,
					     &j, &err)
			 : zs_coord_leave(C.c, job, rank, session, abandoned, next, &j, &err);
	if (st)
		fail_msg("rank %u leaves %s: %s", rank, job, err.msg);
	zs_job_release(&j);
}

/* create_wide_job's job of units units at world size R, into *j. */
static void create_job_of(const char *name, unsigned units, uint32_t R, struct zs_job *j)
{
	struct zs_error err = {0};
	struct zs_job r;

	create_wide_job(name, units, j);
	j->spec.world_size = R;
	assert_int_equal(zs_coord_delete_job(C.c, name, &r, NULL), ZS_OK);
	zs_job_release(&r);
	if (zs_coord_create_job(C.c, &j->spec, &r, &err))
		fail_msg("create: %s", err.msg);
	zs_job_release(j);
	*j = r;
}

static struct zs_job show(const char *job)
{
	struct zs_job j;
	assert_int_equal(zs_coord_get_job(C.c, job, &j, NULL), ZS_OK);
	return j;
}

/* Every server of j carries the pending restore of checkpoint id out. */
static void finish_restore(const struct zs_job *j, uint64_t id, uint64_t step)
{
	uint64_t srv[64];
	uint32_t n = servers_of(j, srv);

	for (uint32_t i = 0; i < n; i++)
		report(j->spec.name, ZS_TASK_RESTORE, id, step, srv[i], true, ZS_OK);
}

/*
 * The orders of a rank lost mid-step (an abandoned leave rolls the job
 * back to its checkpoint of step 2) and the other rank's clean leave:
 *  - after the rollback, saying its ended timeline: not counted;
 *  - after it, saying no timeline (an older library) while the restore
 *    is pending: not counted;
 *  - before the rollback (its own timeline): counted as leaving, then the
 *    rollback forgets it;
 * and on the job's timeline now, every rank leaving at one step: counted.
 */
static void test_leaves_and_rollbacks(void **st)
{
	struct zs_job j, r;
	uint64_t ck, tl0;

	(void)st;
	NEED_COORD();
	create_job_of("lv", 3, 2, &j);
	ck = commit_ckpt(&j, 2);

	for (int order = 0; order < 3; order++) {
		struct zs_job now = show("lv");
		tl0 = now.timeline;
		zs_job_release(&now);
		join_rank("lv", 0, 100 + (uint64_t)order, &r);
		zs_job_release(&r);
		join_rank("lv", 1, 200 + (uint64_t)order, &r);
		zs_job_release(&r);
		beat("lv", 0, 100 + (uint64_t)order);
		if (order == 2) /* rank 0 leaves first, on its own timeline */
			leave("lv", 0, 100 + (uint64_t)order, false, 5, &tl0);
		/* rank 1 lost in the middle of step 5: back to step 2 */
		leave("lv", 1, 200 + (uint64_t)order, true, 0, &tl0);
		now = show("lv");
		assert_int_equal(now.restore_pending, ck);
		assert_int_equal(now.timeline, tl0 + 1);
		zs_job_release(&now);
		if (order == 0) /* rank 0, of the ended timeline, leaves cleanly */
			leave("lv", 0, 100 + (uint64_t)order, false, 5, &tl0);
		else if (order == 1) /* the same from a library that does not say */
			leave("lv", 0, 100 + (uint64_t)order, false, 5, NULL);
		now = show("lv");
		if (now.stopped_step)
			fail_msg("order %d: a leave of the ended timeline set the job's stopped step to %llu while it is restored to step 2",
				 order, (unsigned long long)now.stopped_step);
		assert_int_equal(now.n_trainers, 0);
		assert_int_equal(now.restore_pending, ck);
		zs_job_release(&now);
		finish_restore(&j, ck, 2);
		now = show("lv");
		assert_int_equal(now.restore_pending, 0);
		assert_int_equal(now.restored_step, 2);
		assert_int_equal(now.stopped_step, 0);
		zs_job_release(&now);
	}

	/* on the job's timeline now, both ranks leaving before step 4: the
	 * job stands there; one saying another step rolls it back */
	struct zs_job now = show("lv");
	uint64_t tl = now.timeline;
	zs_job_release(&now);
	join_rank("lv", 0, 300, &r);
	zs_job_release(&r);
	join_rank("lv", 1, 301, &r);
	zs_job_release(&r);
	leave("lv", 0, 300, false, 4, &tl);
	leave("lv", 1, 301, false, 4, &tl);
	now = show("lv");
	assert_int_equal(now.stopped_step, 4);
	assert_int_equal(now.restore_pending, 0);
	zs_job_release(&now);
	join_rank("lv", 0, 400, &r);
	zs_job_release(&r);
	join_rank("lv", 1, 401, &r);
	zs_job_release(&r);
	leave("lv", 0, 400, false, 6, &tl);
	leave("lv", 1, 401, false, 7, &tl);
	now = show("lv");
	assert_int_equal(now.stopped_step, 0);
	assert_int_equal(now.restore_pending, ck);
	assert_non_null(strstr(now.rollback_reason, "left before step 7"));
	zs_job_release(&now);
	finish_restore(&j, ck, 2);
	zs_job_release(&j);
	assert_int_equal(zs_coord_delete_job(C.c, "lv", &r, NULL), ZS_OK);
	zs_job_release(&r);
}

/* A server's report that rank's data connections all ended (back: that
 * it connected again); how many current members it marked. */
/* A server's word that rank's connections, the newest made at reconnect
 * count count, all ended (or, back, began again). */
static uint32_t dropped_ex(const char *job, uint64_t incarnation, uint32_t rank, bool back,
			   uint64_t count)
{
	struct zs_dropped d = {.incarnation = incarnation, .rank = rank, .back = back,
			       .reconnects = count};
	struct zs_error err = {0};
	uint32_t marked = 99;

	snprintf(d.job, sizeof d.job, "%s", job);
	if (zs_coord_report_dropped(C.c, 1, &d, 1, &marked, &err))
		fail_msg("DroppedRanks: %s", err.msg);
	return marked;
}

static uint32_t dropped(const char *job, uint64_t incarnation, uint32_t rank)
{
	return dropped_ex(job, incarnation, rank, false, 0);
}

/* Rank 1 of job marked dropped, then back (it reconnected), then silent
 * while rank 0 renews, until past the gone bound (1.5 s) by half a second:
 * whether it is still a member. -1: not known (this process was held up
 * past rank 1's 3 s lease, which would end it anyway: try again). */
static int back_then_silent(const char *job, uint64_t incarnation, bool reconnecting)
{
	struct zs_job r;
	int64_t t0;
	int kept;

	beat(job, 1, 501);
	t0 = zs_now_ms();
	if (reconnecting) {
		/* it says it reconnects (count 1); a renewal sent before that
		 * (count 0) arrives after; its servers say connections it made
		 * in this reconnect (a retry's) ended, and nothing more */
		beat_ex(job, 1, 501, 1);
		beat_ex(job, 1, 501, 0);
		assert_int_equal(dropped_ex(job, incarnation, 1, false, 1), 1);
	} else {
		assert_int_equal(dropped_ex(job, incarnation, 1, false, 0), 1);
		assert_int_equal(dropped_ex(job, incarnation, 1, true, 0), 1);
	}
	while (zs_now_ms() - t0 < 2000) {
		beat(job, 0, 500);
		usleep(50 * 1000);
	}
	r = show(job);
	kept = r.n_trainers == 2;
	zs_job_release(&r);
	if (zs_now_ms() - t0 >= 2800)
		return -1;
	beat_ex(job, 1, 501, reconnecting ? 2 : 0); /* (reconnected: count 2) */
	return kept;
}

struct gone {
	const char *job;
	uint64_t timeline, session0;
	uint32_t members; /* 0: wait for a rollback; else for this many members */
};

/* Rank 0 renewed; whether the job has rolled back since (a member gone),
 * or is down to g->members members. */
static bool gone_seen(void *arg)
{
	struct gone *g = arg;
	struct zs_job j = show(g->job);
	bool seen = g->members ? j.n_trainers == g->members : j.timeline != g->timeline;

	zs_job_release(&j);
	if (!seen)
		beat(g->job, 0, g->session0);
	return seen;
}

/*
 * A rank whose data connections a server says all ended and that stops
 * renewing its lease is gone within --trainer-gone-ms (1.5 s here), before
 * its lease's 3 s: the job rolls back, saying so. A rank that still renews
 * stays however long it is marked (a resume reconnects), and so does one
 * that stops renewing after a server said it connected again (a process
 * stopped right after its resume's reconnect: alive), or while it said it
 * is reconnecting (stopped between its close and its reconnect: alive; a
 * renewal of before that, arriving late, does not undo it); a report for
 * another incarnation of the name, or for a rank nobody holds, marks
 * nothing.
 */
static void test_dropped_rank_is_gone(void **st)
{
	struct zs_job j, r;
	struct gone g = {.job = "gone", .session0 = 500};
	int64_t t0;

	(void)st;
	NEED_COORD();
	create_job_of("gone", 2, 2, &j);
	join_rank("gone", 0, 500, &r);
	zs_job_release(&r);
	join_rank("gone", 1, 501, &r);
	zs_job_release(&r);
	assert_int_equal(dropped("gone", j.incarnation + 1, 1), 0);
	assert_int_equal(dropped("gone", j.incarnation, 7), 0);
	assert_int_equal(dropped("no-such-job", j.incarnation, 0), 0);
	/* both renew for twice the bound, one marked: nobody is gone */
	assert_int_equal(dropped("gone", j.incarnation, 0), 1);
	for (t0 = zs_now_ms(); zs_now_ms() - t0 < 3000;) {
		beat("gone", 0, 500);
		beat("gone", 1, 501);
		usleep(100 * 1000);
	}
	r = show("gone");
	assert_int_equal(r.n_trainers, 2);
	assert_int_equal(r.restore_pending, 0);
	g.timeline = r.timeline;
	zs_job_release(&r);
	/* rank 1 marked, then back, then silent past the gone bound: kept;
	 * and marked while it says it reconnects: kept */
	for (int reconnecting = 0; reconnecting < 2; reconnecting++)
		for (int k, tries = 0;; tries++) {
			if ((k = back_then_silent("gone", j.incarnation, reconnecting)) == 1)
				break;
			if (!k)
				fail_msg("rank 1, %s, was taken for gone",
					 reconnecting ? "saying it reconnects"
						      : "said to have connected again");
			if (tries == 4)
				fail_msg("this process was held up past the lease 5 times: nothing learned");
		}
	/* the end of connections it made before its reconnect (count 0,
	 * it said count 2 since): a reconnect's, not its death, and its
	 * renewal right after does not undo a drop of its newest ones
	 * (count 1: it may have left before them); rank 1 then silent:
	 * gone, rank 0 renewing all along */
	assert_int_equal(dropped("gone", j.incarnation, 1), 1);
	assert_int_equal(dropped_ex("gone", j.incarnation, 1, false, 1), 1);
	beat_ex("gone", 1, 501, 2);
	if (!h_poll(gone_seen, &g, 20000))
		fail_msg("rank 1 was not taken for gone within 20 s");
	r = show("gone");
	if (!strstr(r.rollback_reason, "rank 1 is gone"))
		fail_msg("the rollback says '%s', not that rank 1 is gone", r.rollback_reason);
	assert_int_equal(r.n_trainers, 1);
	assert_int_equal(r.trainers[0].rank, 0);
	finish_restore(&j, r.restore_pending, 0);
	zs_job_release(&r);
	zs_job_release(&j);
	assert_int_equal(zs_coord_delete_job(C.c, "gone", &r, NULL), ZS_OK);
	zs_job_release(&r);
}

/* A rank's step boundary: the step it begins with its state (NULL: only
 * asks); whether the coordinator says it redoes a step (*rd: then). */
static bool boundary(const char *job, uint32_t rank, const struct zs_step_state *begun,
		     struct zs_step_state *rd)
{
	struct zs_error err = {0};
	struct zs_step_answer an;
	bool redo = false;

	if (zs_coord_report_step_ex(C.c, job, rank, NULL, begun, &an, rd, &redo, &err))
		fail_msg("ReportStep: %s", err.msg);
	return redo;
}

/*
 * A gone rank whose step the coordinator knows costs that step, not a
 * rollback: it is freed, the job's timeline stays, and the rank's next
 * holder is told to redo the step from the state the rank said it began
 * with. A late report of the lost process (no member holds the rank) is
 * not taken for the replacement's; the replacement's own boundary ends the
 * redo. A job whose step no rank reported rolls back (above).
 */
static void test_gone_rank_redoes_its_step(void **st)
{
	struct zs_job j, r;
	struct gone g = {.job = "redo", .session0 = 600, .members = 1};
	struct zs_step_state s7 = {.step = 7, .len = 3, .data = (uint8_t *)"abc"}, rd;

	(void)st;
	NEED_COORD();
	create_job_of("redo", 2, 2, &j);
	join_rank("redo", 0, 600, &r);
	zs_job_release(&r);
	join_rank("redo", 1, 601, &r);
	zs_job_release(&r);
	r = show("redo");
	g.timeline = s7.timeline = r.timeline;
	zs_job_release(&r);
	/* a report of another timeline (sent before a rollback) is not kept */
	assert_false(boundary("redo", 1,
			      &(struct zs_step_state){.step = 9, .timeline = g.timeline + 1}, &rd));
	assert_false(boundary("redo", 0, &(struct zs_step_state){.step = 7, .timeline = g.timeline},
			  &rd));
	assert_false(boundary("redo", 1, &s7, &rd));
	/* rank 1's process ends in step 7 */
	assert_int_equal(dropped("redo", j.incarnation, 1), 1);
	if (!h_poll(gone_seen, &g, 20000))
		fail_msg("rank 1 was not taken for gone within 20 s");
	r = show("redo");
	assert_int_equal(r.timeline, g.timeline);
	assert_int_equal(r.restore_pending, 0);
	assert_string_equal(r.rollback_reason, "");
	zs_job_release(&r);
	/* its late report of step 8 (no member holds rank 1) changes nothing */
	assert_true(boundary("redo", 1, &(struct zs_step_state){.step = 8, .timeline = g.timeline},
			     &rd));
	assert_int_equal(rd.step, 7);
	free(rd.data);
	/* the replacement joins: it redoes step 7 from "abc" */
	join_rank("redo", 1, 602, &r);
	zs_job_release(&r);
	assert_true(boundary("redo", 1, NULL, &rd));
	assert_int_equal(rd.step, 7);
	assert_int_equal(rd.len, 3);
	assert_memory_equal(rd.data, "abc", 3);
	free(rd.data);
	/* killed before its first boundary: the next one redoes 7 too */
	assert_true(boundary("redo", 1, NULL, &rd));
	assert_int_equal(rd.step, 7);
	free(rd.data);
	/* its boundary of step 7 ends the redo */
	assert_false(boundary("redo", 1, &s7, &rd));
	r = show("redo");
	assert_int_equal(r.timeline, g.timeline);
	assert_int_equal(r.n_trainers, 2);
	zs_job_release(&r);
	zs_job_release(&j);
	assert_int_equal(zs_coord_delete_job(C.c, "redo", &r, NULL), ZS_OK);
	zs_job_release(&r);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_leaves_and_rollbacks),
		cmocka_unit_test(test_dropped_rank_is_gone),
		cmocka_unit_test(test_gone_rank_redoes_its_step),
	};
	int rc;

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	rc = cmocka_run_group_tests_name("recovery", tests, setup, teardown);
	return rc | cmocka_run_group_tests_name("recovery on etcd", tests, setup_etcd, teardown);
}
