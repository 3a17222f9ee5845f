/*
 * test_replica.c - replicated shards (a job's "replicas": K): every shard
 * on K servers, the primary forwarding each step's reduced gradient to the
 * others. Training with replicas equals the single-process reference bit
 * for bit (every stage of the oracle's matrix that changes what is
 * forwarded: SGD and AdamW, f32 and bf16, accumulation, clipping, a
 * learning-rate schedule in optimizer groups), and every replica's fp32
 * state (master and optimizer state, read by an observer from the replica's
 * own server) equals its primary's bit for bit. The placement shows the
 * copies; a checkpoint is taken from primaries and restored onto every
 * copy; what a replica refuses.
 */
#include "tests/integration/train_common.h"

#include "net/transport.h"

/* Reads array a of shard sh from its server (observer connection c). */
static void read_array(struct zs_conn *c, const struct zs_shard *sh, int a, float *out,
		       uint64_t *version)
{
	struct zs_xfer x = {.unit = sh->unit, .offset = sh->offset, .length = sh->length,
			    .dtype = ZS_F32, .state_read = true, .state = a, .version = version};
	struct zs_error err = {0};
	struct zs_req *r;

	if (zs_post_read(c, &x, out, &r, &err) || zs_req_wait(r, 20000, &err))
		fail_msg("reading unit %u shard %u copy %u array %d from server %llu: %s", sh->unit,
			 sh->index, sh->copy, a, (unsigned long long)sh->server_id, err.msg);
}

struct observer {
	struct zs_job job;
	struct zs_server_info *s;
	uint32_t n_s;
	struct zs_conn *conn[8]; /* by o->s: those holding copies */
};

static void observe(struct observer *o, const char *job, uint32_t rank)
{
	struct zs_coord_client *c;
	struct zs_error err = {0};

	memset(o, 0, sizeof *o);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	if (zs_coord_get_job_token(c, job, &o->job, &err) ||
	    zs_coord_servers(c, &o->s, &o->n_s, &err))
		fail_msg("%s: %s", job, err.msg);
	zs_coord_close(c);
	assert_true(o->n_s <= 8);
	for (uint32_t i = 0; i < o->n_s; i++) {
		struct zs_conn_opts co = {.addr = o->s[i].data_addr, .job = job,
					  .token = o->job.token,
					  .incarnation = (uint64_t)o->job.created_ms,
					  .epoch = o->job.placement.epoch, .rank = rank,
					  .timeout_ms = 10000};
		enum zs_status st;
		bool holds = false;
		for (uint32_t k = 0; k < o->job.placement.n_shards; k++)
			holds |= o->job.placement.shards[k].server_id == o->s[i].id;
		if (!holds)
			continue;
		/* a server takes a new placement epoch at its next heartbeat */
		for (int k = 0; (st = zs_connect(&zs_tcp_transport, &co, &o->conn[i], &err)) ==
				    ZS_EAGAIN && k < 50; k++)
			usleep(100 * 1000);
		if (st)
			fail_msg("connecting to server %llu: %s", (unsigned long long)o->s[i].id,
				 err.msg);
	}
}

static struct zs_conn *conn_of(struct observer *o, uint64_t id)
{
	for (uint32_t i = 0; i < o->n_s; i++)
		if (o->s[i].id == id)
			return o->conn[i];
	fail_msg("server %llu is not listed", (unsigned long long)id);
	return NULL;
}

/* C.srv's index of the server with id (by its control address). */
static int srv_index(const struct observer *o, uint64_t id)
{
	for (uint32_t i = 0; i < o->n_s; i++)
		if (o->s[i].id == id)
			for (int k = 0; k < C.n; k++)
				if (!strcmp(C.srv_addr[k], o->s[i].addr))
					return k;
	fail_msg("server %llu is not one of the test's", (unsigned long long)id);
	return -1;
}

static void unobserve(struct observer *o)
{
	for (uint32_t i = 0; i < o->n_s; i++)
		zs_conn_close(o->conn[i]);
	free(o->s);
	zs_job_release(&o->job);
}

/*
 * Every copy of every shard of job holds the same fp32 state, at step,
 * bit for bit; with want (by unit, the masters expected, or NULL) the
 * masters equal it. Returns the number of shards checked.
 */
static uint32_t check_copies(const char *job, uint64_t step, float **want)
{
	struct observer o;
	uint32_t checked = 0;

	/* a copy rebuilt by a failover (of any job: every job on a lost
	 * server moves) is compared once its primary has seeded it */
	for (int w = 0;; w++) {
		bool fresh = false;
		observe(&o, job, ZS_RANK_OBSERVER);
		for (uint32_t i = 0; i < o.job.placement.n_shards; i++)
			fresh |= o.job.placement.shards[i].fresh != 0;
		if (!fresh)
			break;
		unobserve(&o);
		if (w == 100)
			fail_msg("job %s: its new copies were not seeded within 10 s", job);
		usleep(100 * 1000);
	}
	unsigned arrays = 1 + zs_optim_state_arrays(&o.job.spec.optim);
	for (uint32_t i = 0; i < o.job.placement.n_shards; i++) {
		const struct zs_shard *p = &o.job.placement.shards[i];
		/* the job's copies, fewer where a failover left fewer */
		uint32_t K = p->copies ? p->copies : 1;
		if (p->copy)
			continue;
		assert_true(K <= (o.job.spec.replicas ? o.job.spec.replicas : 1));
		for (unsigned a = 0; a < arrays; a++) {
			float *ref = malloc(p->length * 4), *got = malloc(p->length * 4);
			uint64_t v0 = 0;
			uint32_t copies = 1;
			read_array(conn_of(&o, p->server_id), p, (int)a, ref, &v0);
			assert_int_equal(v0, step);
			if (want && a == 0 && memcmp(ref, want[p->unit] + p->offset, p->length * 4))
				fail_msg("job %s unit %u shard %u: the master is not the one expected",
					 job, p->unit, p->index);
			for (uint32_t q = 0; q < o.job.placement.n_shards; q++) {
				const struct zs_shard *r = &o.job.placement.shards[q];
				uint64_t v = 0;
				if (!r->copy || r->unit != p->unit || r->index != p->index)
					continue;
				assert_int_not_equal(r->server_id, p->server_id);
				read_array(conn_of(&o, r->server_id), r, (int)a, got, &v);
				assert_int_equal(v, step);
				for (uint64_t e = 0; e < p->length; e++)
					if (memcmp(&got[e], &ref[e], 4))
						fail_msg("job %s unit %u shard %u array %u element %llu: replica on server %llu has %.9g, the primary on %llu %.9g",
							 job, p->unit, p->index, a,
							 (unsigned long long)e,
							 (unsigned long long)r->server_id, got[e],
							 (unsigned long long)p->server_id, ref[e]);
				copies++;
			}
			assert_int_equal(copies, K);
			free(ref);
			free(got);
		}
		checked++;
	}
	unobserve(&o);
	return checked;
}

static void run_k(uint32_t K, const char *name, uint32_t R, const char *transport,
		  enum zs_optim_kind kind, enum zs_dtype dt, uint32_t acc, double clip, int sched)
{
	oracle_replicas = K;
	train_oracle(name, R, transport, kind, dt, acc, clip, sched);
	oracle_replicas = 0;
	assert_true(check_copies(name, STEPS, NULL) > 0);
}

static void test_replicas_train_bitwise(void **st)
{
	(void)st;
	run_k(2, "r1", 2, "tcp", ZS_SGD, ZS_F32, 1, 0.0, 0);
	run_k(2, "r2", 3, "shm", ZS_ADAMW, ZS_BF16, 1, 0.0, 0);
	run_k(2, "r3", 2, "tcp", ZS_ADAMW, ZS_BF16, 3, 0.0, 0); /* accumulation */
	run_k(2, "r4", 2, "shm", ZS_ADAMW, ZS_F32, 1, 0.5, 0);  /* clipping */
	run_k(2, "r5", 2, "tcp", ZS_ADAMW, ZS_BF16, 1, 0.0, 1); /* schedule, groups */
	run_k(3, "r6", 2, "tcp", ZS_ADAMW, ZS_BF16, 1, 0.3, 0); /* every server */
}

/* zshardctl shows each shard's copies and their roles; plan counts them;
 * a job that wants more copies than servers, or than zshard keeps, is
 * refused. */
static void test_placement_shows_copies(void **st)
{
	char *out = NULL, *errs = NULL;
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_error err = {0};
	struct zs_job j;
	json_t *root, *shards;
	size_t i, prim = 0, repl = 0;

	(void)st;
	oracle_spec(&spec, "rshow", 2, ZS_ADAMW, ZS_BF16);
	spec.replicas = 2;
	create_job(&spec);
	if (ctl(&out, &errs, "placement", "rshow", "--json", NULL, NULL))
		fail_msg("placement: %s", errs);
	root = json_loads(out, 0, NULL);
	assert_non_null(root);
	shards = json_object_get(root, "shards");
	for (i = 0; i < json_array_size(shards); i++) {
		const char *role = json_string_value(json_object_get(json_array_get(shards, i), "role"));
		assert_non_null(role);
		prim += !strcmp(role, "primary");
		repl += !strcmp(role, "replica");
	}
	assert_true(prim > 0);
	assert_int_equal(prim, repl);
	json_decref(root);
	free(out);
	free(errs);
	if (ctl(&out, &errs, "placement", "rshow", NULL, NULL, NULL))
		fail_msg("placement: %s", errs);
	assert_non_null(strstr(out, "replica"));
	free(out);
	free(errs);
	if (ctl(&out, &errs, "plan", "--job", "rshow", NULL, NULL))
		fail_msg("plan: %s", errs);
	assert_non_null(strstr(out, "2 copies of each shard"));
	free(out);
	free(errs);
	/* more copies than zshard keeps, or than live servers */
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	zs_job_spec_release(&spec);
	oracle_spec(&spec, "rmany", 1, ZS_SGD, ZS_F32);
	spec.replicas = 4;
	assert_int_equal(zs_coord_create_job(c, &spec, &j, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "replicas 4"));
	if (C.n < 3) {
		spec.replicas = 3;
		err = (struct zs_error){0};
		assert_int_not_equal(zs_coord_create_job(c, &spec, &j, &err), ZS_OK);
		assert_non_null(strstr(err.msg, "3 copies"));
	}
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/* A checkpoint of a replicated job is taken from the primaries and restored
 * onto every copy: after training past it, a restore brings primaries and
 * replicas back to the checkpoint's state, bit for bit. */
static void test_checkpoint_restores_every_copy(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_checkpoint *v = NULL;
	struct rank_ctx x[2];
	char *out = NULL, *errs = NULL;
	float **at2;
	uint32_t n = 0, U;
	int state = 0;

	(void)st;
	oracle_spec(&spec, "rckpt", 2, ZS_ADAMW, ZS_BF16);
	spec.replicas = 2;
	create_job(&spec);
	for (uint32_t r = 0; r < 2; r++)
		x[r] = (struct rank_ctx){.t = join("rckpt", r, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 2, 0, 2);
	U = spec.layout.n_units;
	at2 = calloc(U, sizeof *at2);
	for (uint32_t u = 0; u < U; u++) {
		at2[u] = malloc(spec.layout.units[u].numel * 4);
		/* the masters at step 2, as the copies hold them (compared below) */
		struct observer o;
		observe(&o, "rckpt", ZS_RANK_OBSERVER);
		for (uint32_t i = 0; i < o.job.placement.n_shards; i++) {
			const struct zs_shard *p = &o.job.placement.shards[i];
			uint64_t ver;
			if (p->unit == u && !p->copy)
				read_array(conn_of(&o, p->server_id), p, 0, at2[u] + p->offset, &ver);
		}
		unobserve(&o);
	}
	check_copies("rckpt", 2, at2);
	if (ctl(&out, &errs, "checkpoint", "create", "rckpt", "--step", "2"))
		fail_msg("checkpoint create: %s", errs);
	free(out);
	free(errs);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	for (int i = 0; i < 200 && state != ZS_CKPT_COMMITTED; i++) {
		usleep(50 * 1000);
		assert_int_equal(zs_coord_list_ckpts(c, "rckpt", &v, &n, NULL), ZS_OK);
		assert_int_equal(n, 1);
		state = v[0].state;
		if (state == ZS_CKPT_FAILED)
			fail_msg("checkpoint failed: %s", v[0].error);
		/* every copy wrote its records: both are listed */
		if (state == ZS_CKPT_COMMITTED) {
			uint32_t copies = 0;
			for (uint32_t k = 0; k < v[0].placement.n_shards; k++)
				copies += v[0].placement.shards[k].copy != 0;
			assert_int_equal(copies * 2, v[0].placement.n_shards);
		}
		if (state != ZS_CKPT_COMMITTED)
			zs_checkpoint_release(&v[0]), free(v), v = NULL;
	}
	assert_int_equal(state, ZS_CKPT_COMMITTED);
	train_ranks(x, 2, 2, 4);
	check_copies("rckpt", 4, NULL);
	restore(c, "rckpt", v[0].id);
	check_copies("rckpt", 2, at2);
	/* the records of a server whose disk is gone are read from the other
	 * copy: kill -9 of a primary's server, its data dir wiped, started
	 * again (a new server); its copies fail over; the checkpoint still
	 * restores whole, bit for bit */
	if (C.n >= 3) {
		struct observer o;
		struct zs_job j;
		char cmd[1200];
		uint64_t gone;
		int victim;
		observe(&o, "rckpt", ZS_RANK_OBSERVER);
		gone = o.job.placement.shards[0].server_id; /* a primary's */
		victim = srv_index(&o, gone);
		unobserve(&o);
		h_stop(C.srv[victim], SIGKILL, 5000);
		snprintf(cmd, sizeof cmd, "rm -rf '%s/server-%d'", C.dir, victim);
		assert_int_equal(system(cmd), 0);
		restart_server(victim, NULL);
		for (int w = 0;; w++) { /* its copies moved (its lease lapsed) */
			bool there = false;
			assert_int_equal(zs_coord_get_job(c, "rckpt", &j, NULL), ZS_OK);
			for (uint32_t i = 0; i < j.placement.n_shards; i++)
				there |= j.placement.shards[i].server_id == gone;
			zs_job_release(&j);
			if (!there)
				break;
			if (w == 100)
				fail_msg("the wiped server's copies did not move within 10 s");
			usleep(100 * 1000);
		}
		restore(c, "rckpt", v[0].id);
		check_copies("rckpt", 2, at2);
	}
	zs_checkpoint_release(&v[0]);
	free(v);
	zs_coord_close(c);
	for (uint32_t r = 0; r < 2; r++)
		zs_trainer_close(x[r].t);
	for (uint32_t u = 0; u < U; u++)
		free(at2[u]);
	free(at2);
	zs_job_spec_release(&spec);
}

/* What a replica refuses: a trainer's push (pushes go to the primary), a
 * forward from anyone but a peer, a forward for a step it is not at; a
 * primary refuses a forward. Nothing changes: the copies stay equal. */
static void test_replica_refuses(void **st)
{
	struct zs_error err = {0};
	struct observer o;
	const struct zs_shard *prim = NULL, *rep = NULL;
	struct zs_req *r;
	float *buf;

	(void)st;
	observe(&o, "r1", 0);
	for (uint32_t i = 0; i < o.job.placement.n_shards && !rep; i++)
		if (o.job.placement.shards[i].copy)
			rep = &o.job.placement.shards[i], prim = rep - rep->copy;
	assert_non_null(rep);
	assert_int_equal(prim->copy, 0);
	buf = calloc(rep->length, 4);
	struct zs_xfer x = {.unit = rep->unit, .offset = rep->offset, .length = rep->length,
			    .step = STEPS, .dtype = ZS_F32};
	/* a trainer's push to a replica */
	if (!zs_post_write(conn_of(&o, rep->server_id), &x, buf, &r, &err))
		assert_int_equal(zs_req_wait(r, 10000, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "is a replica here"));
	/* a forward from a trainer's connection */
	err = (struct zs_error){0};
	x.replica = true;
	if (!zs_post_write(conn_of(&o, rep->server_id), &x, buf, &r, &err))
		assert_int_equal(zs_req_wait(r, 10000, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "only a shard's primary forwards"));
	unobserve(&o);
	/* a peer's forward for a step the replica is not at, and to a primary */
	observe(&o, "r1", ZS_RANK_PEER);
	for (uint32_t i = 0; i < o.job.placement.n_shards; i++)
		if (o.job.placement.shards[i].copy)
			rep = &o.job.placement.shards[i], prim = rep - rep->copy;
	x.step = STEPS + 5;
	x.epoch = o.job.placement.epoch;
	err = (struct zs_error){0};
	if (!zs_post_write(conn_of(&o, rep->server_id), &x, buf, &r, &err))
		assert_int_equal(zs_req_wait(r, 10000, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "which is at step"));
	/* from a primary of an earlier placement (fenced) */
	x.step = STEPS;
	x.epoch = o.job.placement.epoch - 1;
	err = (struct zs_error){0};
	if (!zs_post_write(conn_of(&o, rep->server_id), &x, buf, &r, &err))
		assert_int_equal(zs_req_wait(r, 10000, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "a forward of placement epoch"));
	x.epoch = o.job.placement.epoch;
	x.step = STEPS;
	err = (struct zs_error){0};
	if (!zs_post_write(conn_of(&o, prim->server_id), &x, buf, &r, &err))
		assert_int_equal(zs_req_wait(r, 10000, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "is the primary here"));
	unobserve(&o);
	free(buf);
	check_copies("r1", STEPS, NULL);
}

/*
 * No trainer sees a step that is not on every copy: with a replica's
 * server stopped, the primary applies the step but holds the gathers of
 * the new version until the replica has applied it too. Stopped past its
 * lease, the coordinator drops that server's copies (a new placement
 * epoch, the same timeline: no rollback) and the primary serves the
 * gather; the server, continued, holds nothing of the job any more.
 */
static void test_gather_waits_for_replica(void **st)
{
	struct zs_job_spec spec;
	struct observer o;
	zs_trainer *t;
	int u = -1, b = -1;
	zs_op *op;
	float *p, *g;

	(void)st;
	if (C.n < 2) {
		print_message("skipped: needs 2 servers ($ZSHARD_TEST_SERVERS is %d)\n", C.n);
		skip();
	}
	oracle_spec(&spec, "rwait", 1, ZS_SGD, ZS_F32);
	spec.replicas = 2;
	create_job(&spec);
	t = join("rwait", 0, "tcp");
	upload_init(t);
	/* a unit whose primaries are on other servers than one of its replicas */
	observe(&o, "rwait", ZS_RANK_OBSERVER);
	for (uint32_t i = 0; i < o.job.placement.n_shards && u < 0; i++) {
		const struct zs_shard *r = &o.job.placement.shards[i];
		bool alone = r->copy != 0;
		for (uint32_t q = 0; q < o.job.placement.n_shards && alone; q++)
			alone = o.job.placement.shards[q].unit != r->unit ||
				o.job.placement.shards[q].copy ||
				o.job.placement.shards[q].server_id != r->server_id;
		if (alone) {
			u = (int)r->unit;
			b = srv_index(&o, r->server_id);
		}
	}
	assert_true(u >= 0);
	unsigned long long n = zs_unit_numel(t, (unsigned)u);
	p = malloc(n * 4);
	g = malloc(n * 4);
	assert_int_equal(fetch(t, (unsigned)u, 0, p), ZS_OK);
	for (unsigned long long i = 0; i < n; i++)
		g[i] = oracle_grad(p[i], (uint32_t)u, i, 0, 0);
	assert_int_equal(kill(C.srv[b], SIGSTOP), 0);
	/* applied by the primary, not yet on the stopped replica (within the
	 * servers' 1.5 s lease): neither the push is acknowledged nor the
	 * next step served */
	zs_op *push;
	assert_int_equal(zs_push(t, (unsigned)u, 0, g, &push), ZS_OK);
	assert_int_equal(zs_gather(t, (unsigned)u, 1, p, &op), ZS_OK);
	int rc = zs_op_wait(op, 700), rp = zs_op_test(push);
	if (rc != ZS_EAGAIN || rp != ZS_EAGAIN) {
		/* done only if the lease lapsed already (a loaded machine: the
		 * stopped server's last heartbeat was late) and its copies went */
		struct zs_coord_client *c;
		struct zs_job j;
		uint64_t epoch;
		assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
		assert_int_equal(zs_coord_get_job(c, "rwait", &j, NULL), ZS_OK);
		epoch = j.placement.epoch;
		zs_job_release(&j);
		zs_coord_close(c);
		if (epoch == o.job.placement.epoch) {
			kill(C.srv[b], SIGCONT);
			fail_msg("with the replica's server stopped, the push returned %d and the gather of step 1 %d: %s",
				 rp, rc, zs_trainer_error(t));
		}
		print_message("the stopped server's lease lapsed within 700 ms (a loaded machine): the push and gather went on without its copies\n");
	}
	/* past the lease: the copies on the stopped server are dropped */
	if (rp == ZS_EAGAIN)
		rp = zs_op_wait(push, 15000);
	if (rp) {
		kill(C.srv[b], SIGCONT);
		fail_msg("the push with the replica's server stopped past its lease: %s",
			 zs_trainer_error(t));
	}
	if (rc == ZS_EAGAIN)
		rc = zs_op_wait(op, 15000);
	{
		struct zs_coord_client *c;
		struct zs_job j;
		bool there = false;
		assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
		assert_int_equal(zs_coord_get_job(c, "rwait", &j, NULL), ZS_OK);
		for (uint32_t i = 0; i < j.placement.n_shards; i++)
			there |= srv_index(&o, j.placement.shards[i].server_id) == b;
		kill(C.srv[b], SIGCONT);
		if (rc)
			fail_msg("the gather of step 1 with the replica's server stopped past its lease: %s",
				 zs_trainer_error(t));
		assert_false(there);
		assert_int_equal(j.timeline, 0);
		assert_true(j.placement.epoch > o.job.placement.epoch);
		zs_job_release(&j);
		zs_coord_close(c);
	}
	unobserve(&o);
	free(p);
	free(g);
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

/* What t gathers at step n equals the reference after n steps (K
 * micro-batches; prim: the job's first primaries, its norms' order). */
static void check_reference_at(const char *name, const struct zs_job_spec *spec,
			       const struct zs_placement *prim, uint64_t n, uint32_t K,
			       zs_trainer *t)
{
	uint32_t U = spec->layout.n_units;
	float **ref = calloc(U, sizeof *ref);

	for (uint32_t u = 0; u < U; u++)
		ref[u] = malloc(spec->layout.units[u].numel * 4);
	oracle_reference_sched(spec, prim, n, K, 0, ref);
	for (uint32_t u = 0; u < U; u++) {
		unsigned long long numel = spec->layout.units[u].numel;
		float *got = malloc(numel * 4);
		if (fetch(t, u, n, got))
			fail_msg("%s: gather of step %llu: %s", name, (unsigned long long)n,
				 zs_trainer_error(t));
		for (unsigned long long i = 0; i < numel; i++)
			if (memcmp(&got[i], &ref[u][i], 4))
				fail_msg("%s: step %llu: unit %u element %llu is %.9g, the reference %.9g",
					 name, (unsigned long long)n, u, i, got[i], ref[u][i]);
		free(got);
		free(ref[u]);
	}
	free(ref);
}

struct killer {
	int victim;
	unsigned delay_ms;
};

static void *kill_later(void *arg)
{
	struct killer *k = arg;
	usleep(k->delay_ms * 1000);
	kill(C.srv[k->victim], SIGKILL);
	return NULL;
}

/*
 * kill -9 of a random server at a random moment while two ranks train a
 * job with two copies of each shard: the coordinator promotes the lost
 * server's replicas, the trainers send what was in flight there again,
 * and the job goes on from where it was: no rollback (the timeline never
 * moves), and the parameters equal the single-process reference bit for
 * bit. The second trial clips gradients: the promoted copies report their
 * shards' norms for the step the lost server left; the third keeps three
 * copies on the three servers (a promoted primary's fellow copy keeps its
 * state; only the restarted server's are seeded); the fourth accumulates
 * gradients over three micro-batches (the partial pushes the lost primary
 * acknowledged are in its copies' reductions). The server, started
 * again, rolls nothing back; the lost copies are rebuilt from their
 * primaries (seeded with their whole state) and follow the steps after,
 * bit for bit.
 */
static void test_server_killed_no_rollback(void **st)
{
	enum { N = 30 };
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct rank_ctx x[2];
	struct killer k;
	pthread_t th;
	struct zs_job j;
	struct zs_placement prim[2];
	unsigned seed = (unsigned)time(NULL);
	char name[32];

	(void)st;
	if (C.n < 2) {
		print_message("skipped: needs 2 servers ($ZSHARD_TEST_SERVERS is %d)\n", C.n);
		skip();
	}
	if (getenv("ZSHARD_TEST_SEED"))
		seed = (unsigned)atoi(getenv("ZSHARD_TEST_SEED"));
	srand(seed);
	for (int trial = 0; trial < 4; trial++) {
		/* the fourth accumulates gradients: 3 micro-batches a step, the
		 * first two partial pushes (every copy has their terms) */
		uint32_t K = trial == 3 ? 3 : 1;
		if (trial == 2 && C.n < 3) {
			print_message("three copies: skipped, needs 3 servers ($ZSHARD_TEST_SERVERS is %d)\n",
				      C.n);
			continue;
		}
		snprintf(name, sizeof name, "rkill%d", trial);
		oracle_spec(&spec, name, 2, trial ? ZS_ADAMW : ZS_SGD,
			    trial == 1 || trial == 3 ? ZS_BF16 : ZS_F32);
		/* the third: three copies on three servers, every one of them
		 * on the restarted server rebuilt while its fellows keep theirs */
		spec.replicas = trial == 2 ? 3 : 2;
		/* clips at every step */
		spec.optim.clip_norm = trial == 1 || trial == 2 ? 0.05 : 0.0;
		create_job(&spec);
		/* the reference sums the norms over the shards in placement order,
		 * which a new epoch keeps */
		assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
		assert_int_equal(zs_coord_get_job(c, name, &j, NULL), ZS_OK);
		zs_coord_close(c);
		assert_int_equal(zs_placement_primaries(&prim[0], &j.placement), ZS_OK);
		zs_job_release(&j);
		for (uint32_t r = 0; r < 2; r++)
			x[r] = (struct rank_ctx){.t = join(name, r, "tcp")};
		upload_init(x[0].t);
		train_ranks_k(x, 2, 0, 2, K);
		k = (struct killer){.victim = rand() % C.n, .delay_ms = 1 + (unsigned)(rand() % 60)};
		print_message("seed %u trial %d: kill -9 of server %d after %u ms\n", seed, trial,
			      k.victim, k.delay_ms);
		pthread_create(&th, NULL, kill_later, &k);
		train_ranks_k(x, 2, 2, N, K);
		pthread_join(th, NULL);
		check_reference_at(name, &spec, &prim[0], N, K, x[1].t); /* no step lost */
		assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
		assert_int_equal(zs_coord_get_job(c, name, &j, NULL), ZS_OK);
		if (j.timeline != 0 || j.restored_id)
			fail_msg("%s: rolled back (%s)", name, j.rollback_reason);
		assert_true(j.placement.epoch > 1);
		assert_int_equal(zs_placement_primaries(&prim[1], &j.placement), ZS_OK);
		for (uint32_t i = 0; i < prim[0].n_shards; i++) /* the same order */
			assert_true(prim[1].shards[i].unit == prim[0].shards[i].unit &&
				    prim[1].shards[i].index == prim[0].shards[i].index);
		zs_placement_release(&prim[1]);
		zs_job_release(&j);
		zs_coord_close(c);
		/* the server comes back empty; nothing rolls back, and the
		 * lost copies are rebuilt (on it, or on another with room) */
		restart_server(k.victim, NULL);
		assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
		for (int w = 0;; w++) {
			bool whole = true;
			assert_int_equal(zs_coord_get_job(c, name, &j, NULL), ZS_OK);
			assert_int_equal(j.timeline, 0);
			for (uint32_t i = 0; i < j.placement.n_shards; i++)
				whole &= j.placement.shards[i].copies == spec.replicas;
			zs_job_release(&j);
			if (whole)
				break;
			if (w == 100)
				fail_msg("%s: its lost copies were not rebuilt within 10 s", name);
			usleep(100 * 1000);
		}
		zs_coord_close(c);
		/* training goes on; the new copies follow every step */
		train_ranks_k(x, 2, N, N + 4, K);
		check_copies(name, N + 4, NULL);
		check_reference_at(name, &spec, &prim[0], N + 4, K, x[0].t);
		for (uint32_t r = 0; r < 2; r++)
			zs_trainer_close(x[r].t);
		zs_placement_release(&prim[0]);
		zs_job_spec_release(&spec);
	}
	/* a primary seeds only new copies: one that kept its state (the
	 * promoted copy's fellow, with three) is never sent a seed */
	for (int i = 0; i < C.n; i++) {
		char log[1024];
		snprintf(log, sizeof log, "%s/server-%d.log", C.dir, i);
		if (access(log, R_OK)) /* else "not in it" would pass by itself */
			fail_msg("cannot read %s", log);
		if (text_in_file(log, "already (a seed of step"))
			fail_msg("%s: a primary sent a seed to a copy that had its state", log);
	}
}

/*
 * A primary lost mid-forward, its last forward on one of its two copies
 * alone (ZSHARD_FAULT=repl-one-copy: from step 3 on it sends a step to
 * its last copy, waits until that one applied it, and dies): the copy
 * promoted is then a step behind its fellow. Its forward of the step it
 * applied last, again, and then of the step the trainers push again, find
 * those applied there: training goes on, no rollback, every copy and the
 * parameters bitwise the reference.
 */
static void test_primary_lost_mid_forward(void **st)
{
	enum { N = 8 };
	const int f = C.n - 1;
	struct zs_job_spec spec;
	struct zs_placement prim;
	struct zs_coord_client *c;
	struct rank_ctx x[2];
	struct zs_job j;
	char log[1024];

	(void)st;
	if (C.n < 3) {
		print_message("skipped: three copies need 3 servers ($ZSHARD_TEST_SERVERS is %d)\n",
			      C.n);
		skip();
	}
	h_stop(C.srv[f], SIGKILL, 5000);
	/* placed only once the coordinator has marked that one down */
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	for (int w = 0, up = 1; up; w++) {
		struct zs_server_info *si;
		uint32_t n;
		assert_int_equal(zs_coord_servers(c, &si, &n, NULL), ZS_OK);
		up = 0;
		for (uint32_t k = 0; k < n; k++)
			up |= si[k].up && !strcmp(si[k].addr, C.srv_addr[f]);
		free(si);
		if (up && w == 200)
			fail_msg("server %d, killed, still up at the coordinator after 20 s", f);
		if (up)
			usleep(100 * 1000);
	}
	restart_server(f, "repl-one-copy");
	oracle_spec(&spec, "midfwd", 2, ZS_ADAMW, ZS_F32);
	spec.replicas = 3;
	create_job(&spec);
	assert_int_equal(zs_coord_get_job(c, "midfwd", &j, NULL), ZS_OK);
	assert_int_equal(zs_placement_primaries(&prim, &j.placement), ZS_OK);
	zs_job_release(&j);
	for (uint32_t r = 0; r < 2; r++)
		x[r] = (struct rank_ctx){.t = join("midfwd", r, "tcp")};
	upload_init(x[0].t);
	train_ranks_k(x, 2, 0, N, 1);
	snprintf(log, sizeof log, "%s/server-%d.log", C.dir, f);
	if (h_alive(C.srv[f]) || !text_in_file(log, "dying at repl-one-copy"))
		fail_msg("server %d did not die at its fault (repl-one-copy): see %s", f, log);
	check_reference_at("midfwd", &spec, &prim, N, 1, x[1].t);
	assert_true(check_copies("midfwd", N, NULL) > 0);
	assert_int_equal(zs_coord_get_job(c, "midfwd", &j, NULL), ZS_OK);
	if (j.timeline != 0 || j.restored_id)
		fail_msg("midfwd: rolled back (%s)", j.rollback_reason);
	assert_true(j.placement.epoch > 1);
	zs_job_release(&j);
	zs_coord_close(c);
	for (uint32_t r = 0; r < 2; r++)
		zs_trainer_close(x[r].t);
	zs_placement_release(&prim);
	zs_job_spec_release(&spec);
	restart_server(f, NULL); /* the cluster whole again, unarmed */
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replicas_train_bitwise),
		cmocka_unit_test(test_placement_shows_copies),
		cmocka_unit_test(test_checkpoint_restores_every_copy),
		cmocka_unit_test(test_replica_refuses),
		cmocka_unit_test(test_gather_waits_for_replica),
		cmocka_unit_test(test_server_killed_no_rollback),
		cmocka_unit_test(test_primary_lost_mid_forward),
	};
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("replica", tests, group_setup, group_teardown);
}
