/*
 * test_reader.c - a connection that proves the job's reader token
 * (ctrl/token.h) may gather and nothing else, through real engines over
 * tcp and shm: it reads the parameters the full token uploaded; its push,
 * an initial upload and a world change are each refused (ZS_EPERM, naming the reader token) and change nothing (the
 * full token's gathers see the same bits, its pushes still land); it
 * connects as an observer only (a rank's connection would keep that rank
 * counted as connected); another token opens nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/oracle.h"
#include "tests/unit/engine_cluster.h"

static struct zs_conn *reader_conn(struct cluster *c, const char *token, uint32_t rank,
				   struct zs_error *err)
{
	struct zs_conn_opts o = {.addr = c->t == &zs_shm_transport ? c->shm[0] : c->tcp[0],
				 .job = "t", .token = token, .rank = rank, .timeout_ms = 5000};
	struct zs_conn *conn = NULL;

	return zs_connect(c->t, &o, &conn, err) ? NULL : conn;
}

/* rc (-1: failed, why) is a refusal of the reader token's */
static void check_refused(int rc, const char *why, const char *what)
{
	if (!rc || !strstr(why, "proved the job's reader token"))
		fail_msg("a reader's %s: %s", what, rc ? why : "taken");
}

static void run(const struct zs_transport_ops *t)
{
	struct cluster c;
	struct zs_conn *full, *rd;
	struct zs_error err = {0};
	char why[512];
	static float p[4099], q[4099], g[4099];
	const struct zs_layout *l;
	uint8_t payload[ZS_WORLDS_BYTES(ZS_WORLD_HIST)];
	struct zs_worlds w = {0};
	struct zs_req *r;
	enum zs_status st;

	job_token = "0123456789abcdef0123456789abcdef";
	job_reader_token = "fedcba9876543210fedcba9876543210";
	start(&c, 1, 1, ZS_SGD, ZS_F32, t);
	l = &c.job.spec.layout;
	full = conn_to(&c, 0, 0);
	if (upload_init(&c, &full, why))
		fail_msg("upload: %s", why);

	/* the reader token as an observer: gathers what was uploaded */
	if (!(rd = reader_conn(&c, job_reader_token, ZS_RANK_OBSERVER, &err)))
		fail_msg("a reader could not connect: %s", err.msg);
	for (uint32_t u = 0; u < l->n_units; u++) {
		if (gather_unit(&c, &rd, u, 0, p, why))
			fail_msg("a reader's gather of unit %u: %s", u, why);
		for (uint64_t i = 0; i < l->units[u].numel; i++)
			assert_true(p[i] == oracle_init(u, i));
	}
	/* everything else refused, the connection still good for gathers */
	for (uint64_t i = 0; i < l->units[0].numel; i++)
		g[i] = 1.0f;
	check_refused(push_unit(&c, &rd, 0, 0, g, ZS_F32, false, why), why, "push");
	check_refused(push_unit(&c, &rd, 0, 0, g, ZS_F32, true, why), why, "initial upload");
	w.n = 1;
	w.v[0] = (struct zs_world_change){.step = 3, .world = 1};
	st = zs_post_world(rd, payload, zs_worlds_encode(&w, payload), &r, &err);
	if (!st)
		st = zs_req_wait(r, 5000, &err);
	assert_int_equal(st, ZS_EPERM);
	check_refused(-1, err.msg, "world change");
	if (gather_unit(&c, &rd, 0, 0, q, why))
		fail_msg("a reader's gather after its refusals: %s", why);
	if (gather_unit(&c, &full, 0, 0, p, why))
		fail_msg("the full token's gather: %s", why);
	assert_memory_equal(p, q, l->units[0].numel * sizeof *p);
	for (uint64_t i = 0; i < l->units[0].numel; i++)
		assert_true(p[i] == oracle_init(0, i)); /* nothing the reader sent landed */
	zs_conn_close(rd);

	/* the reader token as a rank's connection, and another token: refused */
	assert_null(reader_conn(&c, job_reader_token, 0, &err));
	assert_int_equal(err.code, ZS_EPERM);
	assert_non_null(strstr(err.msg, "an observer's, not rank 0's"));
	err = (struct zs_error){0};
	assert_null(reader_conn(&c, "00000000000000000000000000000000", ZS_RANK_OBSERVER, &err));
	assert_non_null(strstr(err.msg, "does not prove"));

	/* the full token's connection still trains: its step 0 lands */
	for (uint32_t u = 0; u < l->n_units; u++) {
		uint64_t n = l->units[u].numel;
		if (gather_unit(&c, &full, u, 0, p, why))
			fail_msg("gather of unit %u: %s", u, why);
		for (uint64_t i = 0; i < n; i++)
			g[i] = oracle_grad(p[i], u, i, 0, 0);
		if (push_unit(&c, &full, u, 0, g, ZS_F32, false, why))
			fail_msg("push of unit %u: %s", u, why);
	}
	zs_conn_close(full);
	stop(&c);
	job_token = job_reader_token = "";
}

static void test_reader_tcp(void **st)
{
	(void)st;
	run(&zs_tcp_transport);
}

static void test_reader_shm(void **st)
{
	(void)st;
	run(&zs_shm_transport);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reader_tcp),
		cmocka_unit_test(test_reader_shm),
	};
	return cmocka_run_group_tests_name("reader", tests, NULL, NULL);
}
