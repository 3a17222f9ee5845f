/*
 * test_promote.c - a replicated shard's copy promoted over in-process
 * engines behind real tcp listeners, the test playing the coordinator
 * (each placement epoch handed to each server in turn): a copy seeded
 * since it last applied a step has no mean gradient to send its copies
 * again, and sends its state instead (ER_CATCH_UP, engine/copies.h),
 * which a copy behind it takes and one at its step keeps out. Found by
 * the simulator (seed 297397 of sim/step.c): without it, a copy stayed a
 * step behind while the trainers were answered for that step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/engine_cluster.h"
#include "tests/oracle.h"
#include "base/util.h"

#define WAIT_MS 20000 /* a generous bound on what a test waits for */

static enum zs_status peer_addr(void *ctx, uint64_t id, char *addr, size_t len,
				struct zs_error *err)
{
	struct cluster *c = ctx;

	if (id < 1 || id > (uint64_t)c->S)
		return zs_fail(err, ZS_ENOTFOUND, "no server %llu here", (unsigned long long)id);
	snprintf(addr, len, "%s", c->tcp[id - 1]);
	return ZS_OK;
}

/* Job "t" at epoch: every shard on servers on[0..n) in that order (the
 * first its primary), fresh (not seeded yet) where fresh names it. */
static void placed(struct zs_job *j, uint64_t epoch, const uint64_t *on, uint32_t n,
		   uint64_t fresh)
{
	struct zs_shard *sh;
	uint32_t ns;

	make_job(j, 1, 1, ZS_ADAMW, ZS_F32);
	ns = j->placement.n_shards;
	sh = calloc((size_t)ns * n, sizeof *sh);
	assert_non_null(sh);
	for (uint32_t i = 0; i < ns; i++)
		for (uint32_t k = 0; k < n; k++) {
			sh[i * n + k] = j->placement.shards[i];
			sh[i * n + k].server_id = on[k];
			sh[i * n + k].copy = k;
			sh[i * n + k].copies = n;
			sh[i * n + k].fresh = on[k] == fresh;
		}
	free(j->placement.shards);
	j->placement.shards = sh;
	j->placement.n_shards = ns * n;
	j->placement.epoch = epoch;
	j->spec.replicas = 3;
	j->incarnation = 7;
}

/* Hands job epoch to the servers in order, then releases it. */
static void take(struct cluster *c, struct zs_job *j, const int *servers, int n)
{
	struct zs_error err = {0};

	for (int k = 0; k < n; k++)
		if (engine_add_job(c->e[servers[k]], j, (uint64_t)servers[k] + 1, &err))
			fail_msg("server %d cannot take epoch %llu: %s", servers[k] + 1,
				 (unsigned long long)j->placement.epoch, err.msg);
	zs_job_release(j);
}

/* Every shard of server s captured at step; the master arrays into out
 * (by unit), or fails after WAIT_MS saying what it waited for. */
static void captured(struct cluster *c, int s, uint64_t step, float **out)
{
	struct engine_snap *sn = NULL;
	struct zs_error err = {0};
	uint64_t at = 0;
	uint32_t n = 0;

	for (int64_t t0 = zs_now_ms();; usleep(10 * 1000)) {
		if (!engine_capture_now(c->e[s], "t", &sn, &n, &at, &err) && at == step)
			break;
		if (!err.code)
			engine_snaps_free(sn, n);
		if (zs_now_ms() - t0 > WAIT_MS)
			fail_msg("server %d is not at step %llu within %d ms (%s; at %llu)", s + 1,
				 (unsigned long long)step, WAIT_MS, err.code ? err.msg : "whole",
				 (unsigned long long)at);
		err = (struct zs_error){0};
	}
	for (uint32_t i = 0; out && i < n; i++)
		memcpy(out[sn[i].unit] + sn[i].offset, sn[i].master, sn[i].length * 4);
	engine_snaps_free(sn, n);
}

/* Server s's primaries have seeded every shard's new copy (its heartbeat
 * would say so), within WAIT_MS. */
static void seeded(struct cluster *c, int s, uint32_t shards)
{
	struct zs_seeded got[64];
	uint32_t n = 0;

	for (int64_t t0 = zs_now_ms(); n < shards; usleep(10 * 1000)) {
		n += engine_take_seeded(c->e[s], got, 64);
		if (zs_now_ms() - t0 > WAIT_MS)
			fail_msg("server %d seeded %u of %u new copies within %d ms", s + 1, n,
				 shards, WAIT_MS);
	}
}

/* The gradients of pushes not waited for, by unit: theirs until they end
 * (and a failover's to send again). */
static float *held[16];

static void held_free(void)
{
	for (uint32_t u = 0; u < sizeof held / sizeof held[0]; u++) {
		free(held[u]);
		held[u] = NULL;
	}
}

/* Posts unit u's push of step t, g, to its primaries (r keeps them). */
static void post(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t, const float *g,
		 struct zs_req **r, uint32_t *nr)
{
	struct zs_error err = {0};

	for (uint32_t i = 0; i < c->job.placement.n_shards; i++) {
		const struct zs_shard *sh = &c->job.placement.shards[i];
		struct zs_xfer x = {.unit = u, .offset = sh->offset, .length = sh->length,
				    .step = t, .dtype = ZS_F32};
		if (sh->unit == u &&
		    zs_post_write(conn[sh->server_id - 1], &x, g + sh->offset, &r[(*nr)++], &err))
			fail_msg("step %llu: %s", (unsigned long long)t, err.msg);
	}
}

/* Posts step t's push of every unit (backward order, after its gather)
 * on conn; waits for their answers unless wait is false (r keeps them,
 * held their bytes). */
static void step(struct cluster *c, struct zs_conn **conn, uint64_t t, bool wait,
		 struct zs_req **r, uint32_t *nr)
{
	const struct zs_layout *l = &c->job.spec.layout;
	char why[512];

	assert_true(l->n_units <= sizeof held / sizeof held[0]);
	for (int u = (int)l->n_units - 1; u >= 0; u--) {
		const struct zs_unit *un = &l->units[u];
		float *p = malloc(un->numel * 4), *g = malloc(un->numel * 4);
		assert_true(p && g);
		if (gather_unit(c, conn, (uint32_t)u, t, p, why))
			fail_msg("step %llu: %s", (unsigned long long)t, why);
		for (uint64_t i = 0; i < un->numel; i++)
			g[i] = oracle_grad(p[i], (uint32_t)u, i, 0, t);
		if (wait && push_unit(c, conn, (uint32_t)u, t, g, ZS_F32, false, why))
			fail_msg("step %llu: %s", (unsigned long long)t, why);
		free(p);
		if (wait) {
			free(g);
		} else {
			post(c, conn, (uint32_t)u, t, g, r, nr);
			held[u] = g;
		}
	}
}

/* The promoted copy, seeded at step + 1, serves step (the step before its
 * version: a lost rank's replacement's gather) bitwise the reference: its
 * seed brought that step's parameters too (ZS_WF_PREV; found by the
 * simulator: without them, the replacement's redo became a rollback). */
static void prev_served(struct cluster *c, struct zs_conn **conn, uint64_t step)
{
	const struct zs_layout *l = &c->job.spec.layout;
	float *ref[4], *got;
	char why[512];

	assert_true(l->n_units <= 4);
	for (uint32_t u = 0; u < l->n_units; u++)
		assert_non_null(ref[u] = malloc(l->units[u].numel * 4));
	oracle_reference_full(&c->job.spec, &c->job.placement, step, 1, ref);
	for (uint32_t u = 0; u < l->n_units; u++) {
		assert_non_null(got = malloc(l->units[u].numel * 4));
		if (gather_unit(c, conn, u, step, got, why))
			fail_msg("the step before the promoted copy's (%llu): %s",
				 (unsigned long long)step, why);
		for (uint64_t i = 0; i < l->units[u].numel; i++)
			if (memcmp(&got[i], &ref[u][i], 4))
				fail_msg("step %llu from the promoted copy: unit %u element %llu is %.9g, the reference %.9g",
					 (unsigned long long)step, u, (unsigned long long)i, got[i],
					 ref[u][i]);
		free(got);
		free(ref[u]);
	}
}

/*
 * Servers 1, 2, 3 hold every shard (1 its primary) and train steps 0, 1
 * and 2; with behind, server 2 refuses step 2's forward (the fault
 * repl-refuse), so server 1 waits for it, the rank unanswered.
 * Server 3 lost: server 4 is a new copy, seeded by server 1 at step 3.
 * Server 1 lost: server 4 promoted, seeded since its last step; the rank
 * sends its unanswered pushes of step 2 again there. Server 2, a step
 * behind, must take server 4's state before the rank is answered, and
 * server 4 serve step 2 (the step before the state it was seeded with);
 * at the step already, server 2 keeps its own and training goes on
 * through both.
 */
static void run(bool behind)
{
	struct cluster c;
	struct zs_job j;
	struct zs_conn *conn[MAXS];
	struct zs_req *r[64];
	struct zs_error err = {0};
	uint32_t nr = 0, shards;
	const uint64_t steps = behind ? 3 : 5;
	float *ref[4], *got[4], *copy[4];
	char why[512];

	memset(&c, 0, sizeof c);
	pthread_mutex_init(&c.ex.mu, NULL);
	pthread_cond_init(&c.ex.cv, NULL);
	c.S = 4;
	c.t = &zs_tcp_transport;
	make_job(&c.job, 1, 1, ZS_ADAMW, ZS_F32); /* the rank's view: the primaries */
	c.job.incarnation = 7;
	shards = c.job.placement.n_shards;
	for (int s = 0; s < c.S; s++) {
		struct zs_listener_opts o = {.at = {{&zs_tcp_endpoint, "127.0.0.1:0", c.tcp[s]}},
					     .arena_bytes = 16u << 20};
		if (behind && s == 1)
			setenv("ZSHARD_FAULT", "repl-refuse", 1);
		/* behind: server 1 gives up on each forward server 2 refuses
		 * within a second, so that its next seeds go on */
		assert_int_equal(engine_create(2, behind && !s ? 1000 : 0, &c.e[s], NULL), ZS_OK);
		unsetenv("ZSHARD_FAULT");
		engine_set_peer_resolver(c.e[s], peer_addr, &c);
		if (zs_listener_start(&o, engine_target(c.e[s]), &c.l[s], &err))
			fail_msg("%s", err.msg);
		engine_set_listener(c.e[s], c.l[s]);
	}
	placed(&j, 1, (const uint64_t[]){1, 2, 3}, 3, 0);
	take(&c, &j, (const int[]){1, 2, 0}, 3);
	for (int s = 0; s < 3; s++)
		conn[s] = conn_to(&c, s, 0);
	conn[3] = NULL; /* server 4 holds nothing of the job yet */
	if (upload_init(&c, conn, why))
		fail_msg("init: %s", why);
	step(&c, conn, 0, true, r, &nr);
	step(&c, conn, 1, true, r, &nr);
	step(&c, conn, 2, !behind, r, &nr); /* behind: answered once on every copy */
	captured(&c, 0, 3, NULL);           /* server 1 applied step 2 */

	placed(&j, 2, (const uint64_t[]){1, 2, 4}, 3, 4);
	take(&c, &j, (const int[]){1, 3, 0}, 3);
	seeded(&c, 0, shards);

	placed(&j, 3, (const uint64_t[]){4, 2}, 2, 0);
	take(&c, &j, (const int[]){1, 3}, 2);
	zs_conn_close(conn[0]); /* server 1 is lost: the pushes it holds end */
	conn[0] = NULL;
	conn[3] = conn_to(&c, 3, 0);
	for (uint32_t i = 0; i < shards; i++)
		c.job.placement.shards[i].server_id = 4;
	if (behind) { /* its pushes of step 2, again, to the new primary: answered */
		nr = 0;
		for (int u = (int)c.job.spec.layout.n_units - 1; u >= 0; u--)
			post(&c, conn, (uint32_t)u, 2, held[u], r, &nr);
		for (uint32_t i = 0; i < nr; i++)
			if (zs_req_wait(r[i], WAIT_MS, &err))
				fail_msg("a push of step 2 sent again: %s", err.msg);
		held_free();
		prev_served(&c, conn, 2);
	}
	for (uint64_t t = 3; t < steps; t++)
		step(&c, conn, t, true, r, &nr);

	/* both copies at the last step, bitwise the reference */
	for (uint32_t u = 0; u < c.job.spec.layout.n_units; u++) {
		uint64_t n = c.job.spec.layout.units[u].numel;
		ref[u] = malloc(n * 4);
		got[u] = calloc(n, 4);
		copy[u] = calloc(n, 4);
	}
	oracle_reference_full(&c.job.spec, &c.job.placement, steps, 1, ref);
	captured(&c, 3, steps, got);
	captured(&c, 1, steps, copy);
	for (uint32_t u = 0; u < c.job.spec.layout.n_units; u++) {
		for (uint64_t i = 0; i < c.job.spec.layout.units[u].numel; i++) {
			if (memcmp(&got[u][i], &ref[u][i], 4))
				fail_msg("the promoted copy: unit %u element %llu is %.9g, the reference %.9g",
					 u, (unsigned long long)i, got[u][i], ref[u][i]);
			if (memcmp(&copy[u][i], &ref[u][i], 4))
				fail_msg("its fellow: unit %u element %llu is %.9g, the reference %.9g",
					 u, (unsigned long long)i, copy[u][i], ref[u][i]);
		}
		free(ref[u]);
		free(got[u]);
		free(copy[u]);
	}
	for (int s = 1; s < c.S; s++)
		zs_conn_close(conn[s]);
	stop(&c);
}

static void test_catchup_taken_behind(void **st)
{
	(void)st;
	run(true);
}

static void test_catchup_kept_at_step(void **st)
{
	(void)st;
	run(false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_catchup_taken_behind),
	    cmocka_unit_test(test_catchup_kept_at_step),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
