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
 * copy; what a replica refuses; failovers (a server killed at a random
 * moment, a primary lost mid-forward, a hyperparameter table in flight).
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
		check_reference_at(name, &spec, &prim[0], N, K, 0, x[1].t); /* no step lost */
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
		check_reference_at(name, &spec, &prim[0], N + 4, K, 0, x[0].t);
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

/* Kills k->victim after k->delay_ms and starts it again, empty. */
static void *respawn_later(void *arg)
{
	struct killer *k = arg;
	usleep(k->delay_ms * 1000);
	if (respawn_server(k->victim))
		print_message("server %d did not start again\n", k->victim);
	return NULL;
}

/*
 * A learning-rate schedule through a failover that connects the trainer to
 * a server it had no connection to, while the table of the step is on its
 * way: server 0 restarted empty (its primaries promoted to server P, their
 * new copies seeded on server 0, which then holds copies only, and a
 * trainer connects only to servers with primaries), then P stopped before
 * a step's zs_set_hparams, killed 300 ms into it and started again. The
 * failover inside that call promotes the copies on server 0 and connects
 * to it: it must get the table being set too, not only those set before
 * (it applied the step at the step before's learning rate: other bits,
 * silently; found by faults.py's reseed trials, 1 in 40). Bitwise the
 * reference after (without the fix: other bits in 3 runs of 3).
 */
static void test_table_in_flight_at_failover(void **st)
{
	enum { N = 7, K_STEP = 3 };
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_placement prim;
	struct rank_ctx x;
	struct killer k;
	struct zs_job j;
	pthread_t th;
	int p;

	(void)st;
	if (C.n < 3) {
		print_message("skipped: needs 3 servers ($ZSHARD_TEST_SERVERS is %d)\n", C.n);
		skip();
	}
	settle_cluster(NULL);
	oracle_spec(&spec, "rhp", 1, ZS_ADAMW, ZS_F32);
	oracle_spec_groups(&spec);
	spec.replicas = 2;
	/* every primary applies a step once the norms are in: server 0's own
	 * at once, before the table comes with another primary's forward */
	spec.optim.clip_norm = 0.05;
	create_job(&spec);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, "rhp", &j, NULL), ZS_OK);
	zs_coord_close(c);
	assert_int_equal(zs_placement_primaries(&prim, &j.placement), ZS_OK);
	zs_job_release(&j);
	x = (struct rank_ctx){.t = join("rhp", 0, "tcp"), .K = 1, .spec = &spec, .sched = 1,
			      .t1 = 2};
	upload_init(x.t);
	train(&x);
	assert_int_equal(x.rc, 0);
	/* server 0 back empty: copies only, seeded from the step after (a
	 * step fails the trainer over from it) */
	restart_server(0, NULL);
	x.t0 = 2;
	x.t1 = K_STEP;
	train(&x);
	assert_int_equal(x.rc, 0);
	settle_cluster("rhp");
	p = busiest_server("rhp");
	if (p <= 0)
		fail_msg("no server holds server 0's promoted primaries besides their own (%d)", p);
	/* P takes nothing from now on; killed while the step's table waits
	 * for it (the trainer's first request of the step), and started
	 * again at once: the new copies go to it, not to server 0 (a seed
	 * brings the table in force with it) */
	if (!h_pause(C.srv[p], 5000))
		fail_msg("server %d did not stop", p);
	k = (struct killer){.victim = p, .delay_ms = 300};
	pthread_create(&th, NULL, respawn_later, &k);
	x.t0 = K_STEP;
	x.t1 = N;
	train(&x);
	pthread_join(th, NULL);
	if (x.rc)
		fail_msg("training through the failover: %s", x.why);
	check_reference_at("rhp", &spec, &prim, N, 1, 1, x.t);
	zs_trainer_close(x.t);
	zs_placement_release(&prim);
	zs_job_spec_release(&spec);
	restart_server(p, NULL); /* the cluster whole again, waited for */
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
	check_reference_at("midfwd", &spec, &prim, N, 1, 0, x[1].t);
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

/*
 * A copy that its primary cannot reach while its server stays up (the
 * fault repl-refuse: that server's copies refuse step forwards from step
 * 2 on): the primary sends the step again until its step timeout (3 s for
 * the test servers), then answers the trainer's push that the step is not on its
 * replica. The trainer takes that answer at once, naming it: the primary
 * is up, so no failover would ever move its shards (before, it waited its
 * whole failover bound, then said the coordinator did not move them).
 */
static void test_live_primary_answers(void **st)
{
	const int f = C.n - 1;
	struct zs_policy pol;
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct rank_ctx x;
	struct zs_job j;
	bool copy_there = false;
	int64_t t0, ms;

	(void)st;
	if (C.n < 2) {
		print_message("skipped: a copy needs 2 servers ($ZSHARD_TEST_SERVERS is %d)\n", C.n);
		skip();
	}
	restart_server(f, "repl-refuse");
	oracle_spec(&spec, "refuse", 1, ZS_SGD, ZS_F32);
	spec.replicas = 2;
	create_job(&spec);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, "refuse", &j, NULL), ZS_OK);
	{
		struct observer o;
		observe(&o, "refuse", ZS_RANK_OBSERVER);
		for (uint32_t k = 0; k < j.placement.n_shards; k++)
			copy_there |= j.placement.shards[k].copy &&
				      srv_index(&o, j.placement.shards[k].server_id) == f;
		unobserve(&o);
	}
	zs_job_release(&j);
	zs_coord_close(c);
	if (!copy_there)
		fail_msg("no copy of job refuse on server %d: the test's fault would not bite", f);
	x = (struct rank_ctx){.t = join("refuse", 0, "tcp"), .t1 = 6};
	zs_trainer_policy(x.t, &pol);
	pol.op_timeout_ms = 40000; /* the failover's bound, were it taken */
	assert_int_equal(zs_trainer_set_policy(x.t, &pol), ZS_OK);
	upload_init(x.t);
	t0 = zs_now_ms();
	train(&x);
	ms = zs_now_ms() - t0;
	print_message("the trainer's error after %lld ms: %s\n", (long long)ms, x.why);
	assert_int_not_equal(x.rc, 0);
	if (!strstr(x.why, "which is up, answered") || !strstr(x.why, "is not on its replica"))
		fail_msg("not the primary's answer: %s", x.why);
	/* within the primary's step timeout and its sending again, not the
	 * failover's 40 s */
	assert_true(ms < 30000);
	zs_trainer_close(x.t);
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
		cmocka_unit_test(test_table_in_flight_at_failover),
		cmocka_unit_test(test_primary_lost_mid_forward),
		cmocka_unit_test(test_live_primary_answers),
	};
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("replica", tests, group_setup, group_teardown);
}
