/*
 * test_norms.c - the coordinator's global-norm exchange for clipping, as a
 * server that sends its report again meets it (its call broke with the
 * connection to a coordinator that restarted or lost the lead): the same
 * report again waits with the first and is counted once; a report of a
 * step whose total already went out gets that total at once; another norm
 * for a shard already in is refused. And a report sent again settled (the
 * server was answered by a coordinator that died before answering the
 * others): asked for by the heartbeat, counted, checked against the total,
 * refused from another timeline; and a report of a rolled-back run,
 * landing late, refused. A real coordinator; the servers are
 * registered by the test, which reports for them.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrl/coord_client.h"
#include "model/spec_json.h"
#include "tests/harness.h"

static struct {
	char *dir;
	pid_t coord;
	char addr[64];
	struct zs_coord_client *c;
	uint64_t ids[2];
	struct zs_job job;
} C;

static const char *spec =
	"{\"name\": \"clipped\", \"stage\": 3, \"world_size\": 1,\n"
	" \"optimizer\": {\"kind\": \"adamw\", \"lr\": 0.001, \"clip_norm\": 1.0},\n"
	" \"units\": [{\"name\": \"a\", \"tensors\": [{\"name\": \"w\", \"shape\": [1000, 600]}]},\n"
	"           {\"name\": \"b\", \"tensors\": [{\"name\": \"w\", \"shape\": [700, 900]}]}]}\n";

static int setup(void **st)
{
	char data[512], pf[512], log[512];
	struct zs_error err = {0};
	(void)st;

	C.dir = h_tmpdir("norms");
	snprintf(data, sizeof data, "%s/coord", C.dir);
	snprintf(pf, sizeof pf, "%s/coord.addr", C.dir);
	snprintf(log, sizeof log, "%s/coordinator.log", C.dir);
	char *argv[] = {(char *)h_bin("zshard-coordinator"), "--listen", "127.0.0.1:0",
			"--data-dir", data, "--port-file", pf, "--lease-ms", "60000", NULL};
	C.coord = h_spawn(argv, log);
	if (C.coord <= 0 || !h_wait_file(pf, 10000, C.addr, sizeof C.addr) ||
	    zs_coord_open(C.addr, 10000, 1, &C.c, &err))
		return -1;
	for (int i = 0; i < 2; i++) {
		struct zs_server_info me = {.capacity = 1ull << 30};
		uint32_t lease;
		snprintf(me.addr, sizeof me.addr, "127.0.0.1:%d", 9 + i);
		snprintf(me.data_addr, sizeof me.data_addr, "127.0.0.1:%d", 19 + i);
		if (zs_coord_register(C.c, &me, &C.ids[i], &lease, &err))
			return -1;
	}
	if (zs_coord_create_job_json(C.c, spec, &C.job, &err)) {
		fprintf(stderr, "create: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	zs_job_release(&C.job);
	zs_coord_close(C.c);
	if (C.coord > 0)
		h_stop(C.coord, SIGTERM, 10000);
	h_rmtree(C.dir);
	free(C.dir);
	return 0;
}

/* Server s's report for step: each of its shards' norm is its position
 * in the placement + 1 (+ bias), so that totals are known. */
struct report {
	struct zs_norm_report r;
	struct zs_shard_norm nv[64];
	double total;
	enum zs_status st;
	pthread_t t;
};

static void make(struct report *x, int s, uint64_t step, double bias)
{
	memset(x, 0, sizeof *x);
	snprintf(x->r.job, sizeof x->r.job, "clipped");
	x->r.step = step;
	x->r.server_id = C.ids[s];
	x->r.norms = x->nv;
	for (uint32_t k = 0; k < C.job.placement.n_shards; k++) {
		const struct zs_shard *sh = &C.job.placement.shards[k];
		if (sh->server_id == C.ids[s] && x->r.n < 64)
			x->nv[x->r.n++] = (struct zs_shard_norm){sh->unit, sh->index, k + 1.0 + bias};
	}
}

static void *send_report(void *arg)
{
	struct report *x = arg;
	struct zs_error err = {0};
	x->st = zs_coord_report_norm(C.c, &x->r, 10000, &x->total, &err);
	return NULL;
}

static double expected(void)
{
	double t = 0.0;
	for (uint32_t k = 0; k < C.job.placement.n_shards; k++)
		t += k + 1.0;
	return t;
}

/* The steps the coordinator's heartbeat reply to server s wants again. */
static uint32_t wants(int s, uint64_t step)
{
	struct zs_hb_reply r;
	struct zs_error err = {0};
	uint32_t k = 0;

	if (zs_coord_heartbeat_ex(C.c, C.ids[s], "", NULL, 0, &r, &err))
		fail_msg("heartbeat of server %d: %s", s, err.msg);
	for (uint32_t i = 0; i < r.n_wants; i++) {
		assert_string_equal(r.wants[i].job, "clipped");
		assert_int_equal(r.wants[i].timeline, C.job.timeline);
		k += r.wants[i].step == step;
	}
	return k;
}

static bool server1_wanted(void *arg)
{
	return wants(1, *(uint64_t *)arg) == 1;
}

/* Server 0's report of step waits (thread a) until the coordinator wants
 * server 1's. */
static void first_waits(struct report *a, uint64_t step)
{
	make(a, 0, step, 0);
	assert_int_equal(pthread_create(&a->t, NULL, send_report, a), 0);
	if (!h_poll(server1_wanted, &step, 10000))
		fail_msg("the heartbeat of server 1 never named step %llu", (unsigned long long)step);
	assert_int_equal(wants(0, step), 0); /* server 0's shards are in */
}

static void test_report_sent_again(void **st)
{
	struct report a, again, b, late;
	(void)st;

	/* both servers hold shards, or this proves nothing */
	first_waits(&a, 7); /* in, waiting */
	make(&b, 1, 7, 0);
	assert_true(a.r.n > 0 && b.r.n > 0);
	again = a;
	again.r.norms = again.nv;
	assert_int_equal(pthread_create(&again.t, NULL, send_report, &again), 0);
	/* not a wait for a condition: either order passes (after b, again
	 * gets the kept total); this only makes its waiting with a likely */
	usleep(200 * 1000);
	/* the last server in: every waiter gets the total, each shard once */
	send_report(&b);
	pthread_join(a.t, NULL);
	pthread_join(again.t, NULL);
	assert_int_equal(b.st, ZS_OK);
	assert_int_equal(a.st, ZS_OK);
	assert_int_equal(again.st, ZS_OK);
	assert_true(b.total == expected());
	assert_true(a.total == expected() && again.total == expected());
	/* after the total went out: the same total, at once */
	make(&late, 0, 7, 0);
	send_report(&late);
	assert_int_equal(late.st, ZS_OK);
	assert_true(late.total == expected());
}

static void test_another_norm_is_refused(void **st)
{
	struct report a, other, b;
	struct zs_error err = {0};
	double total;
	(void)st;

	first_waits(&a, 8);
	make(&other, 0, 8, 0.5);
	assert_int_equal(zs_coord_report_norm(C.c, &other.r, 5000, &total, &err), ZS_EEXIST);
	assert_non_null(strstr(err.msg, "with another norm"));
	make(&b, 1, 8, 0);
	send_report(&b);
	pthread_join(a.t, NULL);
	assert_int_equal(a.st, ZS_OK);
	assert_true(a.total == expected()); /* the refused one changed nothing */
}

static void make_settled(struct report *x, uint64_t step, double total, uint64_t timeline)
{
	make(x, 1, step, 0);
	x->r.settled = true;
	x->r.settled_total = total;
	x->r.timeline = timeline;
}

static void test_settled_report(void **st)
{
	struct report a, s, late;
	struct zs_error err = {0};
	double total;
	(void)st;

	/* the coordinator lost step 20 after answering server 1: server 0
	 * sent its report again and waits; server 1's settled one completes it */
	first_waits(&a, 20);
	make_settled(&s, 20, expected(), C.job.timeline);
	send_report(&s); /* answered at once */
	assert_int_equal(s.st, ZS_OK);
	assert_true(s.total == expected());
	pthread_join(a.t, NULL);
	assert_int_equal(a.st, ZS_OK);
	assert_true(a.total == expected());
	assert_int_equal(wants(1, 20), 0);
	/* again, after the total went out: the same, at once */
	send_report(&s);
	assert_int_equal(s.st, ZS_OK);
	/* but not with another total: the servers would have diverged */
	make_settled(&late, 20, expected() + 1, C.job.timeline);
	assert_int_equal(zs_coord_report_norm(C.c, &late.r, 5000, &total, &err), ZS_EINTERNAL);
	assert_non_null(strstr(err.msg, "clipped it differently"));

	/* settled with a total the others' norms do not sum to: no one is
	 * answered a total (the step cannot be applied alike) */
	first_waits(&a, 21);
	make_settled(&s, 21, expected() + 0.5, C.job.timeline);
	send_report(&s);
	assert_int_equal(s.st, ZS_OK);
	pthread_join(a.t, NULL);
	assert_int_equal(a.st, ZS_EINTERNAL);

	/* from another timeline: refused, nothing counted; the waiting one is
	 * completed by server 1's own report */
	first_waits(&a, 22);
	make_settled(&s, 22, expected(), C.job.timeline + 1);
	assert_int_equal(zs_coord_report_norm(C.c, &s.r, 5000, &total, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "rolled-back run"));
	assert_int_equal(wants(1, 22), 1);
	make(&late, 1, 22, 0);
	send_report(&late);
	pthread_join(a.t, NULL);
	assert_int_equal(late.st, ZS_OK);
	assert_int_equal(a.st, ZS_OK);
	assert_true(a.total == expected());

	/* nothing open for it: answered, and nothing opened (a trainer's
	 * question still finds no report of step 23) */
	make_settled(&s, 23, expected(), C.job.timeline);
	send_report(&s);
	assert_int_equal(s.st, ZS_OK);
	struct zs_norm_report q = {.step = 23};
	snprintf(q.job, sizeof q.job, "clipped");
	assert_int_equal(zs_coord_report_norm(C.c, &q, 5000, &total, &err), ZS_EAGAIN);
}

/* A report of a rolled-back run (sent before the job rolled back, landing
 * after) is refused and opens nothing; one of the job's timeline, or of a
 * server that does not say (0), counts. */
static void test_report_of_an_ended_timeline(void **st)
{
	struct report a, old, b;
	struct zs_error err = {0};
	double total;
	(void)st;

	make(&old, 0, 30, 0.25);
	old.r.timeline = C.job.timeline + 7;
	assert_int_equal(zs_coord_report_norm(C.c, &old.r, 5000, &total, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "rolled-back run"));
	struct zs_norm_report q = {.step = 30};
	snprintf(q.job, sizeof q.job, "clipped");
	assert_int_equal(zs_coord_report_norm(C.c, &q, 5000, &total, &err), ZS_EAGAIN);
	/* the run's own reports: the one refused left nothing to disagree with */
	first_waits(&a, 30); /* timeline 0: not said */
	make(&b, 1, 30, 0);
	b.r.timeline = C.job.timeline;
	send_report(&b);
	pthread_join(a.t, NULL);
	assert_int_equal(b.st, ZS_OK);
	assert_int_equal(a.st, ZS_OK);
	assert_true(a.total == expected() && b.total == expected());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_sent_again),
		cmocka_unit_test(test_another_norm_is_refused),
		cmocka_unit_test(test_settled_report),
		cmocka_unit_test(test_report_of_an_ended_timeline),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
