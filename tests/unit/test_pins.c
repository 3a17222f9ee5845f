/*
 * test_pins.c - versions readers pin (engine/pins.c), through real engines
 * behind tcp listeners while trainer threads train: every step pinned
 * before training reaches it reads, after training ended, exactly the
 * oracle's parameters of that step (the copies taken as each shard
 * passed the step); a reader that pins "the latest" over and over while
 * training goes on never reads two steps mixed; the step just before a
 * shard's version is still pinned (from what a server keeps of it), two
 * before is gone; the job's bound on pins, its idle bound, a restore
 * dropping them, a pin saying its run and a new run dropping the old's; a version read over shm from the servers' arenas (where
 * the copies live) as over tcp; the refusals: a trainer's token, a job
 * that allows none, a wrong dtype, a range of no pinned shard, a step not
 * pinned.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "engine/engine.h"
#include "net/hello.h"
#include "base/util.h"
#include "tests/oracle.h"
#include "tests/unit/engine_cluster.h"

#define RTOKEN "fedcba9876543210fedcba9876543210"

static struct zs_conn *rconn(struct cluster *c, int s, const struct zs_transport_ops *t,
			     const char *token, bool reader, struct zs_error *err)
{
	struct zs_conn_opts o = {.addr = t == &zs_shm_transport ? c->shm[s] : c->tcp[s],
				 .job = "t", .token = token, .reader = reader,
				 .rank = ZS_RANK_OBSERVER, .timeout_ms = 5000};
	struct zs_conn *conn = NULL;

	return zs_connect(t, &o, &conn, err) ? NULL : conn;
}

/* One PIN of verb at step on server s's connection. */
static enum zs_status pin1(struct zs_conn *rc, uint64_t step, uint32_t verb,
			   struct zs_pin_ans *a, struct zs_error *err)
{
	struct zs_req *q;
	enum zs_status st = zs_post_pin(rc, step, verb, a, &q, err);

	return st ? st : zs_req_wait(q, 10000, err);
}

/* PIN on every server; the first failure. */
static enum zs_status pin_all(struct cluster *c, struct zs_conn **rc, uint64_t step,
			      uint32_t verb, struct zs_pin_ans *lo, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	struct zs_pin_ans a;

	if (lo)
		lo->lo = UINT64_MAX;
	for (int s = 0; s < c->S && !st; s++) {
		st = pin1(rc[s], step, verb, &a, err);
		if (!st && lo && a.lo < lo->lo)
			lo->lo = a.lo;
	}
	return st;
}

/* Reads unit u of the version pinned at step into out (f32), checking
 * each range's CRC32C; the first failure's status. */
static enum zs_status read_unit(struct cluster *c, struct zs_conn **rc, uint32_t u,
				uint64_t step, float *out, struct zs_error *err)
{
	const struct zs_unit *un = &c->job.spec.layout.units[u];
	size_t dsz = zs_dtype_size(un->dtype);
	uint8_t *raw = malloc(un->numel * dsz);
	enum zs_status st = ZS_OK;

	for (uint32_t k = 0; k < c->job.placement.n_shards && !st; k++) {
		const struct zs_shard *sh = &c->job.placement.shards[k];
		uint32_t crc = 0;
		struct zs_req *q;
		if (sh->unit != u)
			continue;
		struct zs_xfer x = {.unit = u, .offset = sh->offset, .length = sh->length,
				    .step = step, .dtype = un->dtype, .pinned = true, .crc = &crc};
		st = zs_post_read(rc[sh->server_id - 1], &x, raw + sh->offset * dsz, &q, err);
		if (!st)
			st = zs_req_wait(q, 10000, err);
		if (!st && crc != zs_crc32c(0, raw + sh->offset * dsz, sh->length * dsz))
			st = zs_fail(err, ZS_EIO, "unit %u shard %u: CRC32C %08x, the bytes' %08x", u,
				     sh->index, crc,
				     zs_crc32c(0, raw + sh->offset * dsz, sh->length * dsz));
	}
	zs_convert_to_f32(out, raw, un->dtype, un->numel);
	free(raw);
	return st;
}

/* The oracle's parameters after each step 0 .. STEPS: ref[t][u]. */
static float *ref[STEPS + 1][4];

static void refs(struct cluster *c)
{
	const struct zs_layout *l = &c->job.spec.layout;

	for (uint64_t t = 0; t <= STEPS; t++) {
		for (uint32_t u = 0; u < l->n_units; u++)
			ref[t][u] = malloc(l->units[u].numel * 4);
		oracle_reference_full(&c->job.spec, &c->job.placement, t, 1, ref[t]);
	}
}

static void refs_free(void)
{
	for (uint64_t t = 0; t <= STEPS; t++)
		for (uint32_t u = 0; u < 4; u++) {
			free(ref[t][u]);
			ref[t][u] = NULL;
		}
}

/* Every unit of the version pinned at step against the oracle's step. */
static void check_version(struct cluster *c, struct zs_conn **rc, uint64_t step,
			  const char *what)
{
	const struct zs_layout *l = &c->job.spec.layout;
	struct zs_error err = {0};

	for (uint32_t u = 0; u < l->n_units; u++) {
		float *got = malloc(l->units[u].numel * 4);
		if (read_unit(c, rc, u, step, got, &err))
			fail_msg("%s: step %llu unit %u: %s", what, (unsigned long long)step, u,
				 err.msg);
		for (uint64_t i = 0; i < l->units[u].numel; i++)
			if (memcmp(&got[i], &ref[step][u][i], 4))
				fail_msg("%s: step %llu unit %u element %llu: %.9g, the oracle's %.9g",
					 what, (unsigned long long)step, u, (unsigned long long)i,
					 got[i], ref[step][u][i]);
		free(got);
	}
}

/* A reader pinning the latest step over and over while training runs. */
struct latest {
	struct cluster *c;
	volatile int *done;
	unsigned versions, reads;
	char why[600];
};

static void *latest_main(void *arg)
{
	struct latest *lt = arg;
	struct cluster *c = lt->c;
	struct zs_conn *rc[MAXS];
	struct zs_error err = {0};
	const struct zs_layout *l = &c->job.spec.layout;
	uint64_t seen = UINT64_MAX;

	for (int s = 0; s < c->S; s++)
		rc[s] = rconn(c, s, &zs_tcp_transport, RTOKEN, true, &err);
	while (!lt->why[0]) {
		int finished = *lt->done;
		struct zs_pin_ans a;
		if (pin_all(c, rc, 0, ZS_PIN_QUERY, &a, &err) ||
		    (a.lo != seen && pin_all(c, rc, a.lo, ZS_PIN_HOLD, NULL, &err) == ZS_ESTATE))
			; /* moved on meanwhile: ask again */
		else if (err.code)
			zs_fmt(lt->why, sizeof lt->why, "pin %llu: %s", (unsigned long long)a.lo,
			       err.msg);
		if (!err.code && a.lo != seen) {
			/* read it whole, slowly: training goes on meanwhile */
			for (uint32_t u = 0; u < l->n_units && !lt->why[0]; u++) {
				float *got = malloc(l->units[u].numel * 4);
				if (read_unit(c, rc, u, a.lo, got, &err))
					zs_fmt(lt->why, sizeof lt->why, "read %llu: %s",
					       (unsigned long long)a.lo, err.msg);
				for (uint64_t i = 0; !lt->why[0] && i < l->units[u].numel; i++)
					if (memcmp(&got[i], &ref[a.lo][u][i], 4))
						zs_fmt(lt->why, sizeof lt->why,
						       "step %llu unit %u element %llu: %.9g, the oracle's %.9g",
						       (unsigned long long)a.lo, u,
						       (unsigned long long)i, got[i],
						       ref[a.lo][u][i]);
				free(got);
				lt->reads++;
			}
			pin_all(c, rc, a.lo, ZS_PIN_RELEASE, NULL, &err);
			seen = a.lo;
			lt->versions++;
		}
		err = (struct zs_error){0};
		if (finished)
			break;
	}
	for (int s = 0; s < c->S; s++)
		zs_conn_close(rc[s]);
	return NULL;
}

static void start_pins(struct cluster *c, enum zs_dtype dt, uint32_t pins, uint32_t idle_ms)
{
	struct zs_conn *conn[MAXS];
	char why[512];

	job_token = "0123456789abcdef0123456789abcdef";
	job_reader_token = RTOKEN;
	job_reader_pins = pins;
	job_reader_idle_ms = idle_ms;
	start(c, 3, 2, ZS_ADAMW, dt, &zs_tcp_transport);
	for (int s = 0; s < c->S; s++)
		conn[s] = conn_to(c, s, 0);
	if (upload_init(c, conn, why))
		fail_msg("upload: %s", why);
	for (int s = 0; s < c->S; s++)
		zs_conn_close(conn[s]);
	refs(c);
}

static void stop_pins(struct cluster *c)
{
	stop(c);
	refs_free();
	job_token = job_reader_token = "";
	job_reader_pins = job_reader_idle_ms = 0;
}

/* Every step pinned before training reaches it; a reader of the latest. */
static void run_versions(enum zs_dtype dt)
{
	struct cluster c;
	struct zs_conn *rc[MAXS];
	struct zs_error err = {0};
	struct trainer tr[2];
	pthread_t th[2], lth;
	volatile int done = 0;
	struct latest lt = {.c = &c, .done = &done};

	start_pins(&c, dt, 4, 0);
	for (int s = 0; s < c.S; s++)
		assert_non_null(rc[s] = rconn(&c, s, &zs_tcp_transport, RTOKEN, true, &err));
	/* the even steps pinned ahead (copies taken as the shards pass them);
	 * the odd ones are left to the reader of the latest (copies taken
	 * from the live shards, whatever their update is doing) */
	for (uint64_t t = 0; t <= STEPS; t += 2)
		if (pin_all(&c, rc, t, ZS_PIN_HOLD, NULL, &err))
			fail_msg("pin step %llu ahead of training: %s", (unsigned long long)t, err.msg);
	/* a step not reached: its reads say so (ZS_ESTATE), nothing wrong */
	{
		float *got = malloc(c.job.spec.layout.units[0].numel * 4);
		assert_int_equal(read_unit(&c, rc, 0, 2, got, &err), ZS_ESTATE);
		assert_non_null(strstr(err.msg, "has not reached step 2"));
		free(got);
	}
	pthread_create(&lth, NULL, latest_main, &lt);
	for (uint32_t r = 0; r < 2; r++) {
		tr[r] = (struct trainer){.c = &c, .rank = r, .K = 1};
		pthread_create(&th[r], NULL, trainer_main, &tr[r]);
	}
	for (uint32_t r = 0; r < 2; r++) {
		pthread_join(th[r], NULL);
		if (tr[r].failed)
			fail_msg("rank %u: %s", r, tr[r].why);
	}
	done = 1;
	pthread_join(lth, NULL);
	if (lt.why[0])
		fail_msg("the latest's reader: %s", lt.why);
	print_message("the latest's reader read %u versions whole while training ran\n",
		      lt.versions);
	assert_true(lt.versions >= 1);
	for (uint64_t t = 0; t <= STEPS; t += 2)
		check_version(&c, rc, t, "pinned ahead");

	/* the bound: 3 held and one more fits; then none */
	assert_int_equal(pin_all(&c, rc, STEPS + 7, ZS_PIN_HOLD, NULL, &err), ZS_OK);
	assert_int_equal(pin_all(&c, rc, STEPS + 8, ZS_PIN_HOLD, NULL, &err), ZS_ENOSPC);
	assert_non_null(strstr(err.msg, "readers.pins"));
	assert_int_equal(pin_all(&c, rc, STEPS + 7, ZS_PIN_RELEASE, NULL, &err), ZS_OK);
	/* the step before the shards' version is pinned late from what the
	 * servers keep of it; two before is gone */
	{
		float *got = malloc(c.job.spec.layout.units[0].numel * 4);
		assert_int_equal(read_unit(&c, rc, 0, STEPS - 1, got, &err), ZS_ENOTFOUND);
		free(got);
	}
	assert_int_equal(pin_all(&c, rc, STEPS - 1, ZS_PIN_HOLD, NULL, &err), ZS_OK);
	check_version(&c, rc, STEPS - 1, "pinned one step late");
	assert_int_equal(pin_all(&c, rc, STEPS - 1, ZS_PIN_RELEASE, NULL, &err), ZS_OK);
	assert_int_equal(pin_all(&c, rc, STEPS - 3, ZS_PIN_HOLD, NULL, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "is gone"));
	/* a pin says its run (1 + the job's timeline here); a restore task's
	 * timeline drops the pins of the run before, and a new pin says the
	 * new one */
	{
		struct zs_pin_ans a = {0};
		float *got = malloc(c.job.spec.layout.units[0].numel * 4);
		assert_int_equal(pin1(rc[0], STEPS, ZS_PIN_HOLD, &a, &err), ZS_OK);
		assert_int_equal(a.timeline, c.job.timeline + 1);
		assert_int_equal(pin1(rc[0], STEPS, ZS_PIN_RELEASE, &a, &err), ZS_OK);
		for (int s = 0; s < c.S; s++)
			engine_set_timeline(c.e[s], "t", c.job.timeline + 4);
		assert_int_equal(read_unit(&c, rc, 0, STEPS, got, &err), ZS_ENOTFOUND);
		assert_non_null(strstr(err.msg, "run a restore ended"));
		assert_int_equal(pin_all(&c, rc, STEPS, ZS_PIN_HOLD, NULL, &err), ZS_OK);
		assert_int_equal(pin1(rc[0], STEPS, ZS_PIN_QUERY, &a, &err), ZS_OK);
		assert_int_equal(pin1(rc[0], STEPS, ZS_PIN_HOLD, &a, &err), ZS_OK);
		assert_int_equal(a.timeline, c.job.timeline + 5);
		check_version(&c, rc, STEPS, "pinned again on the new run");
		free(got);
	}
	/* a restore drops every pin: a read of one says why */
	for (int s = 0; s < c.S; s++) {
		uint64_t at;
		assert_int_equal(engine_restore(c.e[s], "t", NULL, NULL, false, 0, &at, &err), ZS_OK);
	}
	{
		float *got = malloc(c.job.spec.layout.units[0].numel * 4);
		assert_int_equal(read_unit(&c, rc, 0, STEPS, got, &err), ZS_ENOTFOUND);
		assert_non_null(strstr(err.msg, "restore"));
		free(got);
	}
	for (int s = 0; s < c.S; s++)
		zs_conn_close(rc[s]);
	stop_pins(&c);
}

static void test_versions_bf16(void **st)
{
	(void)st;
	run_versions(ZS_BF16);
}

static void test_versions_f32(void **st)
{
	(void)st;
	run_versions(ZS_F32);
}

static void test_refusals(void **st)
{
	struct cluster c;
	struct zs_conn *rc[MAXS], *sc[MAXS], *full;
	struct zs_error err = {0};
	struct zs_pin_ans a;
	float *got;
	uint32_t crc;
	struct zs_req *q;
	uint16_t tmp[8];

	(void)st;
	start_pins(&c, ZS_BF16, 1, 3000);
	for (int s = 0; s < c.S; s++) /* room in the arenas for the copies */
		engine_set_reader_budget(c.e[s], 4u << 20);
	got = malloc(c.job.spec.layout.units[0].numel * 4);
	for (int s = 0; s < c.S; s++)
		assert_non_null(rc[s] = rconn(&c, s, &zs_tcp_transport, RTOKEN, true, &err));
	/* the trainers' token: no pins, no pinned reads */
	assert_non_null(full = rconn(&c, 0, &zs_tcp_transport, job_token, false, &err));
	assert_int_equal(pin1(full, 0, ZS_PIN_HOLD, &a, &err), ZS_EPERM);
	assert_non_null(strstr(err.msg, "not its reader token"));
	struct zs_xfer x = {.unit = 0, .offset = 0, .length = 8, .step = 0, .dtype = ZS_BF16,
			    .pinned = true, .crc = &crc};
	err = (struct zs_error){0};
	assert_int_equal(zs_post_read(full, &x, tmp, &q, &err), ZS_OK);
	assert_int_equal(zs_req_wait(q, 5000, &err), ZS_EPERM);
	zs_conn_close(full);
	/* a step never pinned */
	assert_int_equal(read_unit(&c, rc, 0, 0, got, &err), ZS_ENOTFOUND);
	assert_non_null(strstr(err.msg, "not pinned"));
	assert_int_equal(pin_all(&c, rc, 0, ZS_PIN_HOLD, NULL, &err), ZS_OK);
	/* shm: the copies live in the arena, and a reader on the servers'
	 * host takes them from it: the bytes and CRC32Cs tcp gives */
	float *via = malloc(c.job.spec.layout.units[0].numel * 4);
	for (int s = 0; s < c.S; s++)
		assert_non_null(sc[s] = rconn(&c, s, &zs_shm_transport, RTOKEN, true, &err));
	assert_int_equal(read_unit(&c, rc, 0, 0, got, &err), ZS_OK);
	assert_int_equal(read_unit(&c, sc, 0, 0, via, &err), ZS_OK);
	assert_memory_equal(got, via, c.job.spec.layout.units[0].numel * 4);
	for (int s = 0; s < c.S; s++)
		zs_conn_close(sc[s]);
	free(via);
	/* the unit's dtype only (the library converts), a range of no shard */
	for (uint32_t k = 0; k < c.job.placement.n_shards; k++) /* unit 2 is bf16 */
		if (c.job.placement.shards[k].unit == 2)
			x = (struct zs_xfer){.unit = 2, .offset = c.job.placement.shards[k].offset,
					     .length = 8, .step = 0, .dtype = ZS_F32, .pinned = true,
					     .crc = &crc, .from = (uint32_t)c.job.placement.shards[k].server_id};
	assert_int_equal(zs_post_read(rc[x.from - 1], &x, got, &q, &err), ZS_OK);
	if (zs_req_wait(q, 5000, &err) != ZS_EINVAL || !strstr(err.msg, "is bf16"))
		fail_msg("an f32 read of a bf16 unit: %s", err.msg);
	x = (struct zs_xfer){.unit = 9, .offset = 0, .length = 8, .step = 0, .dtype = ZS_BF16,
			     .pinned = true, .crc = &crc};
	assert_int_equal(zs_post_read(rc[0], &x, tmp, &q, &err), ZS_OK);
	assert_int_equal(zs_req_wait(q, 5000, &err), ZS_EINVAL);
	/* the bound is one pin; the idle bound drops it: its room comes back
	 * (HOLDs of another step do not touch it; waited for, bounded) */
	assert_int_equal(pin_all(&c, rc, 1, ZS_PIN_HOLD, NULL, &err), ZS_ENOSPC);
	check_version(&c, rc, 0, "pinned at step 0");
	{
		int64_t deadline = zs_now_ms() + 30000;
		enum zs_status r;
		while ((r = pin_all(&c, rc, 1, ZS_PIN_HOLD, NULL, &err)) == ZS_ENOSPC &&
		       zs_now_ms() < deadline)
			zs_sleep_ms(50, NULL);
		if (r)
			fail_msg("the idle pin was not dropped within 30 s: %s", err.msg);
	}
	assert_int_equal(read_unit(&c, rc, 0, 0, got, &err), ZS_ENOTFOUND);
	assert_non_null(strstr(err.msg, "untouched"));
	for (int s = 0; s < c.S; s++)
		zs_conn_close(rc[s]);
	free(got);
	stop_pins(&c);

	/* a job whose spec allows none */
	start_pins(&c, ZS_F32, 0, 0);
	assert_non_null(rc[0] = rconn(&c, 0, &zs_tcp_transport, RTOKEN, true, &err));
	assert_int_equal(pin1(rc[0], 0, ZS_PIN_HOLD, &a, &err), ZS_EPERM);
	assert_non_null(strstr(err.msg, "readers.pins is 0"));
	/* asking which steps it has is fine */
	assert_int_equal(pin1(rc[0], 0, ZS_PIN_QUERY, &a, &err), ZS_OK);
	assert_int_equal(a.lo, 0);
	zs_conn_close(rc[0]);
	stop_pins(&c);
}

/* A pin taken while the last push of a step is landing and the server
 * has already applied the part that landed (its update pipelined with the
 * push): the pin holds the step's values whole, the applied part taken
 * from the copy the server kept of it. The push is driven through the
 * engine's own data-plane face, as the listener calls it, so that it
 * stops halfway. */
static void test_pin_mid_update(void **st)
{
	struct cluster c;
	struct zs_conn *rc[MAXS];
	struct zs_error err = {0};
	const struct zs_target *t;
	const struct zs_shard *sh = NULL;
	struct engine_stats es;
	uint32_t h0 = 0;
	void *dst;
	char why[512];

	(void)st;
	job_token = "0123456789abcdef0123456789abcdef";
	job_reader_token = RTOKEN;
	job_reader_pins = 2;
	start(&c, 1, 1, ZS_SGD, ZS_F32, &zs_tcp_transport);
	{
		struct zs_conn *conn = conn_to(&c, 0, 0);
		if (upload_init(&c, &conn, why))
			fail_msg("upload: %s", why);
		zs_conn_close(conn);
	}
	refs(&c);
	for (uint32_t k = 0; k < c.job.placement.n_shards; k++)
		if (c.job.placement.shards[k].unit == 2)
			sh = &c.job.placement.shards[k];
	assert_non_null(sh);
	t = engine_target(c.e[0]);
	{
		uint8_t nonce[ZS_NONCE_LEN] = {9}, proof[ZS_PROOF_LEN];
		struct zs_hello hl = {.job = "t", .nonce = nonce, .proof = proof};
		assert_int_equal(zs_hello_proof(&hl, job_token, proof), 0);
		assert_int_equal(t->hello(t->ctx, &hl, &h0, &err), ZS_OK);
	}
	struct zs_xfer x = {.unit = 2, .offset = sh->offset, .length = sh->length,
			    .dtype = ZS_F32};
	assert_int_equal(t->write_begin(t->ctx, h0, 0, &x, &dst, &err), ZS_OK);
	for (uint64_t i = 0; i < sh->length; i++)
		((float *)dst)[i] = oracle_grad(ref[0][2][sh->offset + i], 2, sh->offset + i, 0, 0);
	/* half of it landed: the server reduces and applies that half now */
	t->write_progress(t->ctx, h0, 0, &x, dst, 2048 * 4);
	engine_stats(c.e[0], &es);
	assert_int_equal(es.pipelined, 2048);
	assert_non_null(rc[0] = rconn(&c, 0, &zs_tcp_transport, RTOKEN, true, &err));
	if (pin_all(&c, rc, 0, ZS_PIN_HOLD, NULL, &err))
		fail_msg("pin mid-update: %s", err.msg);
	check_version(&c, rc, 0, "pinned mid-update");
	t->write_abort(t->ctx, h0, 0, &x, dst);
	zs_conn_close(rc[0]);
	stop_pins(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_versions_bf16),
		cmocka_unit_test(test_versions_f32),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_pin_mid_update),
	};
	return cmocka_run_group_tests_name("pins", tests, NULL, NULL);
}
