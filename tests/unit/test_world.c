/*
 * test_world.c - a shard server's world size by step (zshardctl job
 * resize; engine/world.c), through real engines over tcp.
 *
 * The oracle's job of 2 ranks trains step 0 with 2, step 1 with 1 and
 * steps 2 and 3 with 3 (a rank beyond the spec's world), each step's
 * ranks saying the changes on their connections (WORLD frames) before
 * their pushes: every unit ends bitwise the reference whose world changes
 * at the same steps. Refused, each naming why and changing nothing: a
 * push from a rank outside its step's world, a change that says another
 * world for a step than one said, a change that would alter the world of
 * a step whose pushes are in already, a malformed payload.
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

#define MAXR 3

/* Says w on c; the answer's status (err: why). */
static enum zs_status say(struct zs_conn *c, const struct zs_worlds *w, struct zs_error *err)
{
	uint8_t payload[ZS_WORLDS_BYTES(ZS_WORLD_HIST)];
	struct zs_req *r;
	enum zs_status st = zs_post_world(c, payload, zs_worlds_encode(w, payload), &r, err);

	return st ? st : zs_req_wait(r, 5000, err);
}

/* Rank r's step t: every unit gathered at t, its oracle gradient pushed. */
static void rank_step(struct cluster *c, struct zs_conn *conn, uint32_t r, uint64_t t)
{
	char why[512];
	static float p[4099], g[4099];

	for (uint32_t u = 0; u < c->job.spec.layout.n_units; u++) {
		uint64_t n = c->job.spec.layout.units[u].numel;
		if (gather_unit(c, &conn, u, t, p, why))
			fail_msg("rank %u step %llu gather of unit %u: %s", r, (unsigned long long)t,
				 u, why);
		for (uint64_t i = 0; i < n; i++)
			g[i] = oracle_grad(p[i], u, i, r, t);
		if (push_unit(c, &conn, u, t, g, ZS_F32, false, why))
			fail_msg("rank %u step %llu push of unit %u: %s", r, (unsigned long long)t,
				 u, why);
	}
}

static uint64_t applied(struct cluster *c)
{
	struct engine_stats es;

	engine_stats(c->e[0], &es);
	return es.steps_applied;
}

static void test_world_by_step(void **st)
{
	struct cluster c;
	struct zs_conn *conn[MAXR];
	struct zs_error err = {0};
	struct zs_worlds w = {0}, bad;
	char why[512];
	uint64_t before;
	float *ref[4], got[4099];
	static float g[4099];

	(void)st;
	start(&c, 1, 2, ZS_ADAMW, ZS_F32, &zs_tcp_transport);
	for (uint32_t r = 0; r < MAXR; r++) /* rank 2: beyond the spec's world */
		conn[r] = conn_to(&c, 0, r);
	if (upload_init(&c, conn, why))
		fail_msg("init: %s", why);

	/* step 0 at the spec's 2; a change saying step 0 has 1, once rank 0's
	 * pushes are in: refused, naming the step (rank 0 pushed for 2) */
	rank_step(&c, conn[0], 0, 0);
	bad = (struct zs_worlds){1, {{0, 1}}};
	assert_int_equal(say(conn[1], &bad, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "has pushes of it in already"));
	rank_step(&c, conn[1], 1, 0);

	/* 1 rank from step 1, 3 from step 2: said by ranks 0 and 1 */
	zs_worlds_add(&w, 1, 1);
	zs_worlds_add(&w, 2, 3);
	assert_int_equal(say(conn[0], &w, &err), ZS_OK);
	assert_int_equal(say(conn[1], &w, &err), ZS_OK);
	/* another world for step 2: refused, naming both */
	bad = (struct zs_worlds){1, {{2, 2}}};
	assert_int_equal(say(conn[1], &bad, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "from step 2 is 2; another rank said 3"));
	/* malformed: out of order, a world of 0, a payload of the wrong size */
	{
		uint8_t pl[ZS_WORLDS_BYTES(ZS_WORLD_HIST)];
		struct zs_req *r;
		struct zs_worlds o = {2, {{5, 2}, {4, 2}}};
		assert_int_equal(zs_post_world(conn[0], pl, zs_worlds_encode(&o, pl), &r, &err), ZS_OK);
		assert_int_equal(zs_req_wait(r, 5000, &err), ZS_EINVAL);
		assert_non_null(strstr(err.msg, "out of step order"));
		o = (struct zs_worlds){1, {{5, 0}}};
		assert_int_equal(zs_post_world(conn[0], pl, zs_worlds_encode(&o, pl), &r, &err), ZS_OK);
		assert_int_equal(zs_req_wait(r, 5000, &err), ZS_EINVAL);
		assert_non_null(strstr(err.msg, "a world size of 0"));
		o = (struct zs_worlds){1, {{5, 2}}};
		assert_int_equal(zs_post_world(conn[0], pl, zs_worlds_encode(&o, pl) + 4, &r, &err),
				 ZS_OK);
		assert_int_equal(zs_req_wait(r, 5000, &err), ZS_EPROTO);
	}

	/* step 1: rank 1 is out (refused, nothing counted), rank 0 alone
	 * completes it */
	before = applied(&c);
	memset(g, 0, sizeof g);
	assert_int_equal(push_unit(&c, &conn[1], 0, 1, g, ZS_F32, false, why), -1);
	assert_non_null(strstr(why, "not in step 1's world of 1 ranks"));
	assert_int_equal(applied(&c), before);
	rank_step(&c, conn[0], 0, 1);
	assert_int_equal(applied(&c), before + c.job.placement.n_shards);

	/* steps 2 and 3: three ranks; without rank 2's pushes no shard
	 * applies (it says the change too, on its own connection) */
	assert_int_equal(say(conn[2], &w, &err), ZS_OK);
	for (uint64_t t = 2; t < 4; t++) {
		before = applied(&c);
		rank_step(&c, conn[0], 0, t);
		rank_step(&c, conn[1], 1, t);
		assert_int_equal(applied(&c), before);
		rank_step(&c, conn[2], 2, t);
	}

	/* bitwise the reference resized at the same steps */
	for (uint32_t u = 0; u < 4; u++)
		ref[u] = malloc(c.job.spec.layout.units[u].numel * sizeof(float));
	oracle_reference_worlds(&c.job.spec, &w, 4, ref);
	for (uint32_t u = 0; u < 4; u++) {
		if (gather_unit(&c, conn, u, 4, got, why))
			fail_msg("gather of unit %u at step 4: %s", u, why);
		assert_memory_equal(got, ref[u], c.job.spec.layout.units[u].numel * sizeof(float));
		free(ref[u]);
	}
	/* and not the one that never resized (the check can tell) */
	for (uint32_t u = 0; u < 4; u++)
		ref[u] = malloc(c.job.spec.layout.units[u].numel * sizeof(float));
	oracle_reference(&c.job.spec, 4, ref);
	assert_true(memcmp(got, ref[3], c.job.spec.layout.units[3].numel * sizeof(float)) != 0);
	for (uint32_t u = 0; u < 4; u++)
		free(ref[u]);
	for (uint32_t r = 0; r < MAXR; r++)
		zs_conn_close(conn[r]);
	stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_world_by_step),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
