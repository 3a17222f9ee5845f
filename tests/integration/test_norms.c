/*
 * test_norms.c - the coordinator's global-norm exchange for clipping, as a
 * server that sends its report again meets it (its call broke with the
 * connection to a coordinator that restarted or lost the lead): the same
 * report again waits with the first and is counted once; a report of a
 * step whose total already went out gets that total at once; another norm
 * for a shard already in is refused. A real coordinator; the servers are
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

static void test_report_sent_again(void **st)
{
	struct report a, again, b, late;
	(void)st;

	/* both servers hold shards, or this proves nothing */
	make(&a, 0, 7, 0);
	make(&b, 1, 7, 0);
	assert_true(a.r.n > 0 && b.r.n > 0);
	again = a;
	again.r.norms = again.nv;
	assert_int_equal(pthread_create(&a.t, NULL, send_report, &a), 0);
	usleep(200 * 1000);
	assert_int_equal(pthread_create(&again.t, NULL, send_report, &again), 0);
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

	make(&a, 0, 8, 0);
	assert_int_equal(pthread_create(&a.t, NULL, send_report, &a), 0);
	usleep(200 * 1000);
	make(&other, 0, 8, 0.5);
	assert_int_equal(zs_coord_report_norm(C.c, &other.r, 5000, &total, &err), ZS_EEXIST);
	assert_non_null(strstr(err.msg, "with another norm"));
	make(&b, 1, 8, 0);
	send_report(&b);
	pthread_join(a.t, NULL);
	assert_int_equal(a.st, ZS_OK);
	assert_true(a.total == expected()); /* the refused one changed nothing */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_sent_again),
		cmocka_unit_test(test_another_norm_is_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
