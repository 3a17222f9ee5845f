/*
 * test_replica.c - replicated shards (a job's "replicas": K): every shard
 * on K servers, the primary forwarding each step's reduced gradient to the
 * others. Training with replicas equals the single-process reference bit
 * for bit (every stage of the oracle's matrix that changes what is
 * forwarded: SGD and AdamW, f32 and bf16, accumulation, clipping, a
 * learning-rate schedule in optimizer groups, the data plane encrypted),
 * and every replica's fp32
 * state (master and optimizer state, read by an observer from the replica's
 * own server) equals its primary's bit for bit. The placement shows the
 * copies; a checkpoint is taken from primaries and restored onto every
 * copy; what a replica refuses. Failovers: test_failover.c.
 */
#include "tests/integration/replica_common.h"

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
	/* frozen shards: step marks forwarded, micro-batches, clipping */
	run_k(2, "r7", 2, "tcp", ZS_ADAMW, ZS_BF16, 3, 0.5, 2);
	/* the data plane encrypted (data_tls): the trainers' connections and
	 * the primaries' forwards (a plaintext one would be refused) */
	oracle_data_tls = true;
	run_k(2, "r8", 2, "tcp", ZS_ADAMW, ZS_BF16, 3, 0.5, 0);
	oracle_data_tls = false;
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
	oracle_spec_frozen(&spec); /* frozen shards: a master alone, seeded so */
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
	/* the operator sees which shards are frozen */
	if (ctl(&out, &errs, "placement", "rckpt", NULL, NULL, NULL))
		fail_msg("placement: %s", errs);
	assert_non_null(strstr(out, " frozen\n"));
	assert_non_null(strstr(out, " trained\n"));
	free(out);
	free(errs);
	/* and plan counts them as what they are */
	if (ctl(&out, &errs, "plan", "--job", "rckpt", NULL, NULL))
		fail_msg("plan: %s", errs);
	if (!strstr(out, "shards hold their fp32 master (and copy) alone"))
		fail_msg("plan says: %s", out);
	free(out);
	free(errs);
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
	settle_cluster("r1"); /* r1's copies lost with a server before are rebuilt */
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
	const struct zs_shard *pick = NULL;
	zs_op *op;
	float *p, *g;

	(void)st;
	if (C.n < 2) {
		print_message("skipped: needs 2 servers ($ZSHARD_TEST_SERVERS is %d)\n", C.n);
		skip();
	}
	settle_cluster(NULL); /* no server's lease about to lapse, no seeding */
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
			pick = r;
		}
	}
	assert_true(u >= 0);
	unsigned long long n = zs_unit_numel(t, (unsigned)u);
	p = malloc(n * 4);
	g = malloc(n * 4);
	assert_int_equal(fetch(t, (unsigned)u, 0, p), ZS_OK);
	for (unsigned long long i = 0; i < n; i++)
		g[i] = oracle_grad(p[i], (uint32_t)u, i, 0, 0);
	/* stopped, every thread of it, before the push goes */
	if (!h_pause(C.srv[b], 10000))
		fail_msg("server %d (%s) did not stop within 10 s", b, C.srv_addr[b]);
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
			float *have = malloc(pick->length * 4);
			uint64_t v = 0;
			char cmd[1200];
			kill(C.srv[b], SIGCONT);
			/* what the stopped copy holds now, and what the daemons said */
			read_array(conn_of(&o, pick->server_id), pick, 0, have, &v);
			free(have);
			print_message("the copy on server %llu is at step %llu; the daemons' lines about the job:\n",
				      (unsigned long long)pick->server_id, (unsigned long long)v);
			snprintf(cmd, sizeof cmd, "grep -h \"'rwait'\" '%s'/*.log | tail -40 >&2", C.dir);
			if (system(cmd) < 0)
				print_message("(cannot run grep)\n");
			fail_msg("with the replica's server stopped (unit %d shard %u: its primary on server %llu, the copy on server %llu, test server %d; placement epoch %llu unchanged), the push returned %d and the gather of step 1 %d: %s",
				 u, pick->index,
				 (unsigned long long)(pick - pick->copy)->server_id,
				 (unsigned long long)pick->server_id, b,
				 (unsigned long long)epoch, rp, rc, zs_trainer_error(t));
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

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replicas_train_bitwise),
		cmocka_unit_test(test_placement_shows_copies),
		cmocka_unit_test(test_checkpoint_restores_every_copy),
		cmocka_unit_test(test_replica_refuses),
		cmocka_unit_test(test_gather_waits_for_replica),
	};
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("replica", tests, group_setup, group_teardown);
}
