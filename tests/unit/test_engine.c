/*
 * test_engine.c - the shard step engine behind real listeners, driven by R
 * trainer threads over tcp or shm (engine_cluster.h), against a
 * single-process reference that reduces by the reduction's definition
 * (tests/oracle.c): the parameters after T steps must be equal to the
 * bit, for S in {1, 2, 3}, R in {1, 2, 3}, SGD and AdamW, f32 and bf16
 * units, units whose size does not divide by S and a one-element unit.
 * Also: protocol refusals (a push twice, for a closed step, off a shard,
 * an init after training, a gather of a step that is gone) change nothing,
 * and a gather asked early is held until its step exists.
 *
 * The gradient is a deterministic function of the gathered parameters,
 * the rank and the step, so the test isolates the service from any model.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/ckpt.h"
#include "engine/engine.h"
#include "storage/kv.h"
#include "tests/oracle.h"
#include "base/util.h"
#include "math/optim.h"
#include "model/placement.h"
#include "net/listener.h"
#include "tests/unit/engine_cluster.h"


static void test_oracle_matrix(void **st)
{
	/* a covering set: every S, R, transport, optimizer, dtype,
	 * accumulation and clipping setting at least once, and the pairs that
	 * interact (S x R, transport x dtype, accumulation x R and dtype,
	 * clipping x S and K). clip 0.5 clips every step here; 100 never. */
	static const struct { int S; uint32_t R; int shm; enum zs_optim_kind k; enum zs_dtype d; uint32_t K; double clip; } m[] = {
		{1, 1, 0, ZS_SGD, ZS_F32, 1, 0},      {1, 2, 1, ZS_ADAMW, ZS_BF16, 1, 0.5},
		{1, 3, 0, ZS_ADAMW, ZS_F32, 3, 0},    {2, 1, 1, ZS_SGD, ZS_F32, 3, 0.5},
		{2, 2, 0, ZS_ADAMW, ZS_BF16, 3, 0},   {2, 3, 1, ZS_SGD, ZS_BF16, 1, 100},
		{3, 1, 0, ZS_ADAMW, ZS_BF16, 1, 0},   {3, 2, 1, ZS_ADAMW, ZS_F32, 1, 0.5},
		{3, 3, 0, ZS_SGD, ZS_F32, 1, 0},      {3, 3, 1, ZS_ADAMW, ZS_BF16, 3, 0.5},
	};
	(void)st;
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
		run_oracle(m[i].S, m[i].R, m[i].k, m[i].d,
			   m[i].shm ? &zs_shm_transport : &zs_tcp_transport, m[i].K, m[i].clip);
	/* optimizer groups: shards cut through tensors of different groups,
	 * SGD with momentum in one group and not in another */
	with_groups = 1;
	run_oracle(3, 2, ZS_ADAMW, ZS_BF16, &zs_tcp_transport, 1, 0.5);
	run_oracle(2, 3, ZS_SGD, ZS_F32, &zs_shm_transport, 3, 0);
	/* frozen tensors (one mid-unit, between two trained ones): their
	 * shards (placement cuts them apart) take step marks, are never
	 * changed, nor counted in the norm */
	with_groups = 2;
	run_oracle(3, 2, ZS_ADAMW, ZS_BF16, &zs_tcp_transport, 1, 0.5);
	run_oracle(2, 1, ZS_SGD, ZS_F32, &zs_shm_transport, 3, 0.5);
	with_groups = 0;
	/* Adam (L2 decay, two moments) and Adagrad (one state array) */
	run_oracle(2, 3, ZS_ADAM, ZS_BF16, &zs_tcp_transport, 3, 0.5);
	run_oracle(3, 2, ZS_ADAGRAD, ZS_F32, &zs_shm_transport, 1, 0);
}

/*
 * A landing budget of one byte: one push lands at a time on each server
 * (one may always land). Directly at the engine: a second push is told to
 * wait (ZS_EAGAIN, naming the budget) until the first gives its buffer
 * back, and lands past the budget when the listener says so. Then whole
 * jobs through the listeners, whose pushes wait for each other's buffers
 * or, on a shm connection that already holds one, land past the budget:
 * the reference's bits, and every buffer back.
 */
static void test_landing_budget(void **st)
{
	struct cluster c;
	struct zs_conn *conn[1];
	struct zs_error err = {0};
	struct engine_stats es;
	const struct zs_target *t;
	const struct zs_shard *sh = NULL;
	uint32_t h0, h1;
	void *d0, *d1, *d2;
	char why[512];

	(void)st;
	land_budget = 1;
	start_clip(&c, 1, 3, ZS_SGD, ZS_F32, &zs_tcp_transport, 0);
	conn[0] = conn_to(&c, 0, 0);
	for (uint32_t u = 0; u < c.job.spec.layout.n_units; u++) {
		uint64_t n = c.job.spec.layout.units[u].numel;
		float *p = malloc(n * 4);
		for (uint64_t i = 0; i < n; i++)
			p[i] = oracle_init(u, i);
		if (push_unit(&c, conn, u, 0, p, ZS_F32, true, why))
			fail_msg("init: %s", why);
		free(p);
	}
	for (uint32_t k = 0; k < c.job.placement.n_shards; k++)
		if (c.job.placement.shards[k].unit == 2)
			sh = &c.job.placement.shards[k];
	t = engine_target(c.e[0]);
	{ /* HELLOs as the listener hands them: a proof of the token over a nonce */
		uint8_t nonce[ZS_NONCE_LEN] = {7}, proof[ZS_PROOF_LEN];
		struct zs_hello hl = {.job = "t", .nonce = nonce, .proof = proof};
		assert_int_equal(zs_hello_proof(&hl, "", proof), 0);
		assert_int_equal(t->hello(t->ctx, &hl, &h0, &err), ZS_OK);
		hl.rank = 1;
		assert_int_equal(zs_hello_proof(&hl, "", proof), 0);
		assert_int_equal(t->hello(t->ctx, &hl, &h1, &err), ZS_OK);
	}
	{
		struct zs_xfer x = {.unit = 2, .offset = sh->offset, .length = sh->length,
				    .dtype = ZS_F32};
		assert_int_equal(t->write_begin(t->ctx, h0, 0, &x, &d0, &err), ZS_OK);
		assert_int_equal(t->write_begin(t->ctx, h1, 1, &x, &d1, &err), ZS_EAGAIN);
		assert_non_null(strstr(err.msg, "landing budget"));
		engine_stats(c.e[0], &es);
		assert_int_equal(es.landing_waits, 1);
		assert_true(es.landing_bytes >= sh->length * 4);
		x.over_budget = true; /* the listener's call */
		assert_int_equal(t->write_begin(t->ctx, h1, 1, &x, &d1, &err), ZS_OK);
		t->write_abort(t->ctx, h1, 1, &x, d1);
		x.over_budget = false;
		assert_int_equal(t->write_begin(t->ctx, h1, 1, &x, &d2, &err), ZS_EAGAIN);
		t->write_abort(t->ctx, h0, 0, &x, d0); /* gives the buffer back */
		assert_int_equal(t->write_begin(t->ctx, h1, 1, &x, &d2, &err), ZS_OK);
		t->write_abort(t->ctx, h1, 1, &x, d2);
		engine_stats(c.e[0], &es);
		assert_int_equal(es.landing_bytes, 0);
	}
	zs_conn_close(conn[0]);
	stop(&c);
	run_oracle(2, 3, ZS_ADAMW, ZS_BF16, &zs_tcp_transport, 3, 0);
	run_oracle(1, 3, ZS_SGD, ZS_F32, &zs_shm_transport, 1, 0.5);
}

static int no_landing_budget(void **st)
{
	(void)st;
	land_budget = 0;
	return 0;
}

/*
 * Units of several MiB over tcp: the last rank's push is reduced and applied
 * piece by piece while it lands (the engine counts it), and the result is
 * still the reference's to the bit.
 */
static void test_pipelined_reduction(void **st)
{
	static const uint64_t sizes[] = {(3u << 20) + 777, 5000};
	struct cluster c;
	struct trainer tr[2];
	pthread_t th[2];
	struct zs_conn *conn[1];
	struct engine_stats es;
	float *ref[2], *got;
	char why[512];

	(void)st;
	memset(&c, 0, sizeof c);
	c.S = 1;
	c.t = &zs_tcp_transport;
	oracle_spec_sizes(&c.job.spec, "t", 2, ZS_ADAMW, ZS_BF16, sizes, 2);
	{
		struct place_server sv = {.id = 1, .free_bytes = UINT64_MAX};
		struct zs_listener_opts o = {.at = {{&zs_tcp_endpoint, "127.0.0.1:0", c.tcp[0]}},
					     .arena_bytes = 64u << 20};
		struct zs_error err = {0};
		assert_int_equal(place_job(&c.job.spec, &sv, 1, NULL, &c.job.placement, NULL), ZS_OK);
		pthread_mutex_init(&c.ex.mu, NULL);
		pthread_cond_init(&c.ex.cv, NULL);
		assert_int_equal(engine_create(2, 0, &c.e[0], NULL), ZS_OK);
		if (tier_budget) {
			char d[128];
			snprintf(d, sizeof d, "%s/big", tier_dir);
			assert_int_equal(engine_set_tier(c.e[0], d, tier_budget, NULL), ZS_OK);
		}
		if (zs_listener_start(&o, engine_target(c.e[0]), &c.l[0], &err))
			fail_msg("%s", err.msg);
		engine_set_listener(c.e[0], c.l[0]);
		if (engine_add_job(c.e[0], &c.job, 1, &err))
			fail_msg("%s", err.msg);
	}
	conn[0] = conn_to(&c, 0, 0);
	for (uint32_t u = 0; u < 2; u++) {
		float *p = malloc(sizes[u] * 4);
		for (uint64_t i = 0; i < sizes[u]; i++)
			p[i] = oracle_init(u, i);
		if (push_unit(&c, conn, u, 0, p, ZS_F32, true, why))
			fail_msg("init: %s", why);
		free(p);
	}
	for (uint32_t r = 0; r < 2; r++) {
		tr[r] = (struct trainer){.c = &c, .rank = r, .K = 1};
		pthread_create(&th[r], NULL, trainer_main, &tr[r]);
	}
	for (uint32_t r = 0; r < 2; r++) {
		pthread_join(th[r], NULL);
		if (tr[r].failed)
			fail_msg("rank %u: %s", r, tr[r].why);
	}
	engine_stats(c.e[0], &es);
	assert_true(es.pipelined > 0);
	if (tier_budget) /* the big unit is tiered: ~12 chunks through the double buffer */
		assert_true(es.tiered == 1 && es.tier_written >= 3 * 4 * sizes[0] * STEPS);
	ref[0] = malloc(sizes[0] * 4);
	ref[1] = malloc(sizes[1] * 4);
	oracle_reference(&c.job.spec, STEPS, ref);
	for (uint32_t u = 0; u < 2; u++) {
		got = malloc(sizes[u] * 4);
		if (gather_unit(&c, conn, u, STEPS, got, why))
			fail_msg("%s", why);
		if (memcmp(got, ref[u], sizes[u] * 4))
			fail_msg("unit %u differs from the reference", u);
		free(got);
		free(ref[u]);
	}
	zs_conn_close(conn[0]);
	stop(&c);
}

static void test_refusals_and_held_gather(void **st)
{
	struct cluster c;
	struct zs_conn *a, *b;
	struct zs_req *r, *held;
	struct zs_error err = {0};
	float buf[4096], p[4096];
	const struct zs_shard *sh = NULL;

	(void)st;
	start(&c, 1, 2, ZS_SGD, ZS_F32, &zs_tcp_transport);
	for (uint32_t i = 0; i < c.job.placement.n_shards; i++)
		if (c.job.placement.shards[i].unit == 0 &&
		    !zs_shard_marks(&c.job.spec, &c.job.placement.shards[i]))
			sh = &c.job.placement.shards[i];
	/* a trainer holding another placement epoch than the server's is
	 * refused at HELLO (it retries once the server has the new one) */
	{
		struct zs_conn_opts o = {.addr = c.tcp[0], .job = "t", .token = "", .rank = 0,
					 .timeout_ms = 5000, .epoch = c.job.placement.epoch + 1};
		struct zs_conn *stale = NULL;
		assert_int_equal(zs_connect(c.t, &o, &stale, &err), ZS_EAGAIN);
		assert_null(stale);
		assert_non_null(strstr(err.msg, "holds no shard"));
		assert_non_null(strstr(err.msg, "placement epoch"));
		o.epoch = c.job.placement.epoch;
		assert_int_equal(zs_connect(c.t, &o, &stale, &err), ZS_OK);
		zs_conn_close(stale);
	}
	a = conn_to(&c, 0, 0);
	b = conn_to(&c, 0, 1);
	struct zs_xfer x = {.unit = 0, .offset = sh->offset, .length = sh->length,
			    .step = 0, .dtype = ZS_F32};
	struct zs_req *before_init;
	char why[512];

	/* before rank 0's upload: pushes are refused, step-0 gathers held */
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "no parameters yet"));
	assert_int_equal(zs_post_read(b, &x, p, &before_init, &err), ZS_OK);
	usleep(50 * 1000);
	assert_int_equal(zs_req_test(before_init, &err), ZS_EAGAIN);
	{
		struct zs_conn *conn[1] = {a};
		if (upload_init(&c, conn, why))
			fail_msg("init: %s", why);
	}
	assert_int_equal(zs_req_wait(before_init, 5000, &err), ZS_OK);
	assert_true(p[0] == oracle_init(0, sh->offset));

	/* a gather of step 1 asked early is held */
	x.step = 1;
	assert_int_equal(zs_post_read(b, &x, p, &held, &err), ZS_OK);
	x.step = 0;
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
	/* rank 0 again: refused, nothing changes */
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_EEXIST);
	assert_non_null(strstr(err.msg, "rank 0 already pushed step 0"));
	/* a push for a step that is not open */
	x.step = 3;
	assert_int_equal(zs_post_write(b, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "open step is 0"));
	/* off a shard boundary */
	x.step = 0;
	x.length -= 1;
	assert_int_equal(zs_post_write(b, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "exactly one shard"));
	x.length += 1;
	/* the held gather is still waiting */
	assert_int_equal(zs_req_test(held, &err), ZS_EAGAIN);
	/* rank 1 completes step 0: the update runs, the gather is released */
	assert_int_equal(zs_post_write(b, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
	assert_int_equal(zs_req_wait(held, 5000, &err), ZS_OK);
	/* step 0 is kept one step more, for a lost rank's replacement that
	 * redoes it: its parameters as they were */
	memset(p, 0, sizeof p);
	assert_int_equal(zs_post_read(a, &x, p, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
	assert_true(p[0] == oracle_init(0, sh->offset));
	/* a replacement's push of step 0 (applied) is acknowledged and
	 * changes nothing; a plain one is refused */
	x.redo = true;
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
	x.redo = false;
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_ESTATE);
	/* step 1: rank 0's push, then its replacement's of the same: in
	 * once (counted twice, it would complete the step without rank 1) */
	x.step = 1;
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
	x.redo = true;
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
	x.redo = false;
	{
		struct engine_stats es;
		engine_stats(c.e[0], &es);
		assert_int_equal(es.steps_applied, 1);
	}
	assert_int_equal(zs_post_write(b, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
	/* step 0 is gone now (two back); an init after training is refused */
	x.step = 0;
	assert_int_equal(zs_post_read(a, &x, p, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "step 0 is gone"));
	x.init = true;
	assert_int_equal(zs_post_write(a, &x, buf, &r, &err), ZS_OK);
	assert_int_equal(zs_req_wait(r, 5000, &err), ZS_ESTATE);
	{
		struct engine_stats es;
		engine_stats(c.e[0], &es);
		assert_int_equal(es.steps_applied, 2);
		assert_int_equal(es.held, 0);
	}
	zs_conn_close(a);
	zs_conn_close(b);
	stop(&c);
}

/* ----------------------------------------------------- snapshot, restore */

struct store {
	struct zs_kv *kv;
	int captured;
	enum zs_status st;
	pthread_mutex_t mu;
};

static void snap_done(void *ctx, const char *job, uint64_t id, uint64_t step,
		      struct engine_snap *snaps, uint32_t n, enum zs_status st, const char *why)
{
	struct store *x = ctx;
	struct zs_kv_txn *t;

	(void)why;
	pthread_mutex_lock(&x->mu);
	if (st || zs_kv_begin(x->kv, true, &t, NULL)) {
		x->st = st ? st : ZS_EIO;
		pthread_mutex_unlock(&x->mu);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct engine_snap *sn = &snaps[i];
		if (ckpt_put(t, 0, job, id, sn->unit, sn->index, CKPT_MASTER, sn->step, sn->master,
			     sn->length, NULL) ||
		    (sn->s0 && ckpt_put(t, 0, job, id, sn->unit, sn->index, CKPT_STATE0, sn->step,
					sn->s0, sn->length, NULL)) ||
		    (sn->s1 && ckpt_put(t, 0, job, id, sn->unit, sn->index, CKPT_STATE1, sn->step,
					sn->s1, sn->length, NULL)))
			x->st = ZS_EIO;
		assert_int_equal(sn->step, step);
	}
	if (zs_kv_commit(t, NULL))
		x->st = ZS_EIO;
	x->captured++;
	pthread_mutex_unlock(&x->mu);
	engine_snaps_free(snaps, n);
}

struct loader_ctx {
	struct zs_kv *kv;
	uint64_t id;
};

static enum zs_status load(void *ctx, const struct engine_snap *w, float *master, float *s0,
			   float *s1, uint64_t *step, struct zs_error *err)
{
	struct loader_ctx *x = ctx;
	struct zs_kv_txn *t;
	uint64_t st2;
	enum zs_status st = zs_kv_begin(x->kv, false, &t, err);

	if (st)
		return st;
	st = ckpt_get(t, 0, "t", x->id, w->unit, w->index, CKPT_MASTER, step, master, w->length, err);
	if (!st && s0)
		st = ckpt_get(t, 0, "t", x->id, w->unit, w->index, CKPT_STATE0, &st2, s0, w->length, err);
	if (!st && s1)
		st = ckpt_get(t, 0, "t", x->id, w->unit, w->index, CKPT_STATE1, &st2, s1, w->length, err);
	zs_kv_abort(t);
	return st;
}

static void train_from(struct cluster *c, uint32_t R, uint64_t t0)
{
	struct trainer tr[MAXR];
	pthread_t th[MAXR];
	for (uint32_t r = 0; r < R; r++) {
		tr[r] = (struct trainer){.c = c, .t0 = t0, .rank = r, .K = 1};
		pthread_create(&th[r], NULL, trainer_main, &tr[r]);
	}
	for (uint32_t r = 0; r < R; r++) {
		pthread_join(th[r], NULL);
		if (tr[r].failed)
			fail_msg("rank %u: %s", r, tr[r].why);
	}
}

static void final_params(struct cluster *c, struct zs_conn **conn, float **out)
{
	char why[512];
	for (uint32_t u = 0; u < c->job.spec.layout.n_units; u++) {
		out[u] = malloc(c->job.spec.layout.units[u].numel * 4);
		if (gather_unit(c, conn, u, STEPS, out[u], why))
			fail_msg("%s", why);
	}
}

static void test_snapshot_and_restore(void **st)
{
	char dir[] = "/tmp/zshard-snap-XXXXXX", why[512];
	static const char *const tables[] = {"ckpt"};
	struct store sto[2];
	struct loader_ctx lc[2];
	struct cluster c;
	struct zs_conn *conn[2];
	struct zs_error err = {0};
	float *first[4], *second[4];
	uint64_t at;

	(void)st;
	assert_non_null(mkdtemp(dir));
	start(&c, 2, 2, ZS_ADAMW, ZS_BF16, &zs_tcp_transport);
	for (int s = 0; s < 2; s++) {
		char sub[600];
		snprintf(sub, sizeof sub, "%s/s%d", dir, s);
		memset(&sto[s], 0, sizeof sto[s]);
		pthread_mutex_init(&sto[s].mu, NULL);
		assert_int_equal(zs_kv_open(sub, 0, tables, 1, 0, &sto[s].kv, NULL), ZS_OK);
		conn[s] = conn_to(&c, s, 0);
	}
	for (uint32_t u = 0; u < 4; u++) {
		float *p = malloc(c.job.spec.layout.units[u].numel * 4);
		for (uint64_t i = 0; i < c.job.spec.layout.units[u].numel; i++)
			p[i] = oracle_init(u, i);
		if (push_unit(&c, conn, u, 0, p, ZS_F32, true, why))
			fail_msg("%s", why);
		free(p);
	}
	/* asked before training: each shard is captured as it passes step 2 */
	for (int s = 0; s < 2; s++)
		assert_int_equal(engine_snapshot(c.e[s], "t", 7, 2, snap_done, &sto[s], &err), ZS_OK);
	train_from(&c, 2, 0);
	for (int s = 0; s < 2; s++) {
		assert_int_equal(sto[s].captured, 1);
		assert_int_equal(sto[s].st, ZS_OK);
		/* too late now: the shards are at step 4 */
		assert_int_equal(engine_snapshot(c.e[s], "t", 8, 3, snap_done, &sto[s], &err),
				 ZS_ESTATE);
	}
	final_params(&c, conn, first);

	/* a restore from a checkpoint that is not there changes nothing */
	lc[0] = (struct loader_ctx){sto[0].kv, 99};
	assert_int_equal(engine_restore(c.e[0], "t", load, &lc[0], true, 0, &at, &err), ZS_ENOTFOUND);
	final_params(&c, conn, second);
	for (int u = 0; u < 4; u++) {
		assert_memory_equal(first[u], second[u], c.job.spec.layout.units[u].numel * 4);
		free(second[u]);
	}

	/* restore step 2 and train to step 4 again: the same bits */
	for (int s = 0; s < 2; s++) {
		lc[s] = (struct loader_ctx){sto[s].kv, 7};
		assert_int_equal(engine_restore(c.e[s], "t", load, &lc[s], true, 0, &at, &err), ZS_OK);
		assert_int_equal(at, 2);
	}
	/* the restore ended the timeline the old connections belong to: they
	 * are told to resume, new ones are served */
	{
		float *p = malloc(c.job.spec.layout.units[0].numel * 4);
		assert_int_equal(gather_unit(&c, conn, 0, 2, p, why), -1);
		assert_non_null(strstr(why, "rolled back"));
		free(p);
	}
	for (int s = 0; s < 2; s++) {
		zs_conn_close(conn[s]);
		conn[s] = conn_to(&c, s, 0);
	}
	train_from(&c, 2, 2);
	final_params(&c, conn, second);
	for (int u = 0; u < 4; u++) {
		assert_memory_equal(first[u], second[u], c.job.spec.layout.units[u].numel * 4);
		free(first[u]);
		free(second[u]);
	}
	for (int s = 0; s < 2; s++) {
		zs_conn_close(conn[s]);
		zs_kv_close(sto[s].kv);
		pthread_mutex_destroy(&sto[s].mu);
	}
	stop(&c);
	{
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		assert_int_equal(system(cmd), 0);
	}
}

/*
 * The NVMe tier: with a budget of a quarter of the state, most shards keep
 * their masters and optimizer state in O_DIRECT files and stream them for
 * every update; training gives the same bits as in memory.
 */
static void test_tier_equals_memory(void **st)
{
	/* AdamW f32 state: units of 1000, 1, 4099, 64 elements padded x 12 B */
	(void)st;
	snprintf(tier_dir, sizeof tier_dir, "/tmp/zshard-tier-XXXXXX");
	assert_non_null(mkdtemp(tier_dir));
	tier_budget = 16384; /* about a quarter of the state */
	run_oracle(2, 2, ZS_ADAMW, ZS_BF16, &zs_tcp_transport, 1, 0);
	run_oracle(1, 3, ZS_SGD, ZS_F32, &zs_shm_transport, 3, 0.5);
	run_oracle(3, 1, ZS_ADAMW, ZS_F32, &zs_tcp_transport, 1, 0.5);
	/* optimizer groups: tiered chunks split at tensors of other groups */
	with_groups = 1;
	run_oracle(2, 2, ZS_ADAMW, ZS_F32, &zs_tcp_transport, 1, 0);
	run_oracle(2, 2, ZS_SGD, ZS_F32, &zs_shm_transport, 1, 0);
	with_groups = 0;
	run_oracle(2, 2, ZS_ADAGRAD, ZS_BF16, &zs_tcp_transport, 1, 0.5);
	/* snapshots read tiered state, restores write it */
	test_snapshot_and_restore(st);
	/* a unit of many chunks, updated while its last push lands */
	tier_budget = 1u << 20;
	test_pipelined_reduction(st);
	tier_budget = 0;
	{
		char cmd[128];
		snprintf(cmd, sizeof cmd, "rm -rf %s", tier_dir);
		assert_int_equal(system(cmd), 0);
	}
}

static void test_refused_features(void **st)
{
	struct zs_job j;
	struct engine *e;
	struct zs_error err = {0};

	(void)st;
	make_job(&j, 1, 1, ZS_ADAMW, ZS_F32);
	j.spec.optim.clip_norm = 1.0;
	assert_int_equal(engine_create(1, 0, &e, NULL), ZS_OK);
	assert_int_equal(engine_add_job(e, &j, 1, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "no norm exchange"));
	engine_free(e);
	zs_job_release(&j);
}

/*
 * Server memory comes back: 1,000 random creations and deletions of jobs
 * of random shapes on one engine whose arena holds a few of them; the
 * state bytes it reports are exactly what its jobs hold after every one
 * (they only grew), and once every job is gone the arena is whole again:
 * a job needing all of it is held (exact-size reuse of buffers once left
 * an empty 32 MiB server refusing a 26 MiB job).
 */
static void test_arena_comes_back(void **st)
{
	char bound[ZS_ADDR_MAX];
	struct zs_listener_opts o = {.at = {{&zs_tcp_endpoint, "127.0.0.1:0", bound}},
				     .arena_bytes = 16u << 20};
	struct engine *e;
	struct zs_listener *l;
	struct zs_error err = {0};
	struct engine_stats es;
	struct place_server sv = {.id = 1, .free_bytes = UINT64_MAX};
	struct zs_job jobs[4];
	bool live[4] = {0};
	uint64_t rng = 88172645463325252ull, len, taken, largest, held = 0;
	unsigned refused = 0;

	(void)st;
	assert_int_equal(engine_create(1, 0, &e, NULL), ZS_OK);
	if (zs_listener_start(&o, engine_target(e), &l, &err))
		fail_msg("%s", err.msg);
	engine_set_listener(e, l);
	for (int cycle = 0; cycle < 1000; cycle++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		unsigned k = (unsigned)(rng % 4);
		char name[8];
		snprintf(name, sizeof name, "j%u", k);
		if (live[k]) {
			engine_remove_job(e, name);
			held -= place_bytes_on(&jobs[k].spec, &jobs[k].placement, 1);
			zs_job_release(&jobs[k]);
			live[k] = false;
		} else {
			uint64_t sizes[6];
			uint32_t n = 1 + (uint32_t)(rng >> 8) % 6;
			for (uint32_t u = 0; u < n; u++)
				sizes[u] = 1 + (rng >> (12 + 7 * u)) % 600000;
			memset(&jobs[k], 0, sizeof jobs[k]);
			oracle_spec_sizes(&jobs[k].spec, name, 1, (rng >> 4) & 1 ? ZS_ADAMW : ZS_SGD,
					  (rng >> 5) & 1 ? ZS_BF16 : ZS_F32, sizes, n);
			assert_int_equal(place_job(&jobs[k].spec, &sv, 1, NULL, &jobs[k].placement,
						   NULL),
					 ZS_OK);
			jobs[k].incarnation = (uint64_t)cycle + 1;
			if (engine_add_job(e, &jobs[k], 1, &err)) {
				/* too many jobs at once: nothing of it stays */
				assert_non_null(strstr(err.msg, "the shard arena is full"));
				zs_job_release(&jobs[k]);
				refused++;
			} else {
				held += place_bytes_on(&jobs[k].spec, &jobs[k].placement, 1);
				live[k] = true;
			}
		}
		engine_stats(e, &es);
		assert_int_equal(es.bytes, held);
	}
	for (unsigned k = 0; k < 4; k++)
		if (live[k]) {
			char name[8];
			snprintf(name, sizeof name, "j%u", k);
			engine_remove_job(e, name);
			zs_job_release(&jobs[k]);
		}
	engine_stats(e, &es);
	assert_int_equal(es.bytes, 0);
	zs_listener_arena(l, &len, &taken, &largest);
	assert_int_equal(taken, 0);
	assert_int_equal(largest, len);
	printf("arena: 1000 creations and deletions, %u refused while others held the arena\n",
	       refused);
	{
		/* one f32 unit whose master (its gathers' copy too) takes the
		 * whole arena but a page */
		uint64_t whole = len / 4 - 1024;
		memset(&jobs[0], 0, sizeof jobs[0]);
		oracle_spec_sizes(&jobs[0].spec, "whole", 1, ZS_SGD, ZS_F32, &whole, 1);
		assert_int_equal(place_job(&jobs[0].spec, &sv, 1, NULL, &jobs[0].placement, NULL),
				 ZS_OK);
		if (engine_add_job(e, &jobs[0], 1, &err))
			fail_msg("an empty server refused a job of its whole arena: %s", err.msg);
		engine_remove_job(e, "whole");
		zs_job_release(&jobs[0]);
	}
	zs_listener_stop(l);
	engine_free(e);
	zs_listener_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oracle_matrix),
		cmocka_unit_test(test_pipelined_reduction),
		cmocka_unit_test_teardown(test_landing_budget, no_landing_budget),
		cmocka_unit_test(test_tier_equals_memory),
		cmocka_unit_test(test_refusals_and_held_gather),
		cmocka_unit_test(test_snapshot_and_restore),
		cmocka_unit_test(test_refused_features),
		cmocka_unit_test(test_arena_comes_back),
	};
	return cmocka_run_group_tests_name("engine", tests, NULL, NULL);
}
