/* train_common.c - the training tests' cluster and helpers (train_common.h). */
#include "tests/integration/train_common.h"

struct train_cluster C;

bool text_in_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t n = 0, cap = 0;
	bool has = false;

	if (!f)
		return false;
	for (;;) { /* the whole file */
		if (n == cap) {
			char *g = realloc(buf, cap + 65536 + 1);
			if (!g)
				break;
			buf = g;
			cap += 65536;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		if (!got)
			break;
		n += got;
	}
	fclose(f);
	if (buf) {
		buf[n] = 0;
		has = strstr(buf, text) != NULL;
	}
	free(buf);
	return has;
}

/*
 * Starts server i (its data dir, log and port file under C.dir) with
 * capacity, fault in $ZSHARD_FAULT when not NULL, and what the environment
 * asks of every test server: $ZSHARD_TEST_SERVER_GPU, its --gpu (checked in
 * its log); $ZSHARD_TEST_SERVER_ARGS, up to 6 more options, blank-separated.
 * 0 once it listens.
 */
static int spawn_server(int i, const char *capacity, const char *fault)
{
	char log[1024], data[1024], port[1024], got[128];
	const char *gpu = getenv("ZSHARD_TEST_SERVER_GPU");
	const char *more = getenv("ZSHARD_TEST_SERVER_ARGS");
	char extra[512], *save = NULL;

	snprintf(log, sizeof log, "%s/server-%d.log", C.dir, i);
	snprintf(data, sizeof data, "%s/server-%d", C.dir, i);
	snprintf(port, sizeof port, "%s/server-%d.addr", C.dir, i);
	char *sargv[24] = {(char *)h_bin("zshard-server"), "--coordinator", C.addr,
			   "--data-dir", data, "--capacity", (char *)capacity,
			   "--port-file", port, "--step-timeout-ms", "3000"};
	int na = 11;
	if (gpu) {
		sargv[na++] = "--gpu";
		sargv[na++] = (char *)gpu;
	}
	snprintf(extra, sizeof extra, "%s", more ? more : "");
	for (char *a = strtok_r(extra, " ", &save); a && na < 19; a = strtok_r(NULL, " ", &save))
		sargv[na++] = a;
	sargv[na] = NULL;
	unlink(port);
	if (fault)
		setenv("ZSHARD_FAULT", fault, 1);
	C.srv[i] = h_spawn(sargv, log);
	unsetenv("ZSHARD_FAULT");
	/* generous: a loaded machine, or qemu's emulated one (Soft-RoCE),
	 * starts a server in seconds (a 10 s bound gave up there) */
	if (!h_wait_file(port, 60000, got, sizeof got)) {
		fprintf(stderr, "server %d did not listen within 60 s (see %s)\n", i, log);
		return -1;
	}
	got[strcspn(got, "\n")] = '\0';
	snprintf(C.srv_addr[i], sizeof C.srv_addr[i], "%s", got);
	if (gpu && !text_in_file(log, "shards live on")) {
		fprintf(stderr, "server %d was asked for --gpu %s and did not say so in %s\n", i,
			gpu, log);
		return -1;
	}
	return 0;
}

int start_coordinator(const char *listen)
{
	char pf[1024], log[1024], data[1024];
	snprintf(pf, sizeof pf, "%s/coordinator.addr", C.dir);
	unlink(pf);
	snprintf(log, sizeof log, "%s/coordinator.log", C.dir);
	snprintf(data, sizeof data, "%s/coordinator", C.dir);
	char *cargv[] = {(char *)h_bin("zshard-coordinator"), "--listen", (char *)listen,
			 "--data-dir", data, "--port-file", pf, "--lease-ms", "1500",
			 "--trainer-lease-ms", "3000", NULL};
	C.coord = h_spawn(cargv, log);
	if (h_wait_file(pf, 60000, C.addr, sizeof C.addr))
		return 0;
	fprintf(stderr, "the coordinator did not listen within 60 s (see %s)\n", log);
	return -1;
}

/* Whether every server of the cluster is registered and up. */
static bool all_up(void *arg)
{
	struct zs_coord_client *c = arg;
	struct zs_server_info *s;
	uint32_t n, up = 0;

	if (zs_coord_servers(c, &s, &n, NULL))
		return false;
	for (int i = 0; i < C.n; i++)
		for (uint32_t k = 0; k < n; k++)
			up += s[k].up && !strcmp(s[k].addr, C.srv_addr[i]);
	free(s);
	return up == (uint32_t)C.n;
}

int start_servers(void)
{
	for (int i = 0; i < C.n; i++)
		if (spawn_server(i, C.capacity, NULL))
			return -1;
	/* listening is not registered: a job created before every server is
	 * up is placed on fewer of them (a test then raced its own fixture,
	 * under load) */
	return wait_servers_up();
}

int wait_servers_up(void)
{
	struct zs_coord_client *c;
	bool up;

	if (zs_coord_open(C.addr, 10000, 1, &c, NULL))
		return -1;
	up = h_poll(all_up, c, 60000);
	zs_coord_close(c);
	if (!up)
		fprintf(stderr, "the %d servers were not all registered and up within 60 s (see %s)\n",
			C.n, C.dir);
	return up ? 0 : -1;
}

int start_cluster(const char *listen)
{
	return start_coordinator(listen) || start_servers() ? -1 : 0;
}

int group_setup(void **st)
{
	const char *n = getenv("ZSHARD_TEST_SERVERS");
	(void)st;
	C.n = n && atoi(n) >= 1 && atoi(n) <= MAXSERV ? atoi(n) : MAXSERV;
	C.capacity = getenv("ZSHARD_TEST_CAPACITY") ? getenv("ZSHARD_TEST_CAPACITY") : "256M";
	C.dir = h_tmpdir("train");
	return start_cluster("127.0.0.1:0");
}

int group_teardown(void **st)
{
	(void)st;
	for (int i = 0; i < C.n; i++)
		h_stop(C.srv[i], SIGTERM, 5000);
	h_stop(C.coord, SIGTERM, 5000);
	h_rmtree(C.dir);
	free(C.dir);
	return 0;
}

/* Creates a job. A server whose heartbeat was late on a loaded machine
 * (the fixture's lease is 1.5 s) is not live for a moment: a job that
 * needs it is refused for want of live servers, and tried again until the
 * server is back (bounded: 30 s, then the refusal is the failure). */
void create_job(struct zs_job_spec *spec)
{
	struct zs_coord_client *c;
	struct zs_error err = {0};
	struct zs_job j;
	int64_t deadline = zs_now_ms() + 30000;

	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	while (zs_coord_create_job(c, spec, &j, &err)) {
		if (err.code != ZS_ENOSPC || !strstr(err.msg, "live server") ||
		    zs_now_ms() > deadline)
			fail_msg("create job: %s", err.msg);
		usleep(100 * 1000);
		memset(&err, 0, sizeof err);
	}
	zs_job_release(&j);
	zs_coord_close(c);
}

/* Joins (the library waits for servers still loading the job). */
zs_trainer *join(const char *job, unsigned rank, const char *transport)
{
	char err[512];
	zs_trainer *t = NULL;
	int rc = zs_trainer_join(C.addr, job, rank, transport, 60000, &t, err, sizeof err);

	if (rc)
		fail_msg("join %s rank %u: %s", job, rank, err);
	return t;
}

/* Rank 0's upload of the oracle's initial parameters. */
void upload_init(zs_trainer *t)
{
	for (unsigned u = 0; u < zs_trainer_units(t); u++) {
		unsigned long long ne = zs_unit_numel(t, u);
		float *p = malloc(ne * 4);
		for (unsigned long long i = 0; i < ne; i++)
			p[i] = oracle_init(u, i);
		if (zs_init_unit(t, u, p))
			fail_msg("init: %s", zs_trainer_error(t));
		free(p);
	}
}

int fetch(zs_trainer *t, unsigned u, uint64_t step, float *out)
{
	unsigned long long n = zs_unit_numel(t, u);
	int dt = zs_unit_dtype(t, u);
	void *raw = malloc(n * (dt == ZS_F32 ? 4 : 2));
	zs_op *op;
	int rc = zs_gather(t, u, step, raw, &op);

	if (!rc)
		rc = zs_op_wait(op, 20000);
	if (!rc)
		zs_convert_to_f32(out, raw, (enum zs_dtype)dt, n);
	free(raw);
	return rc;
}

void *train(void *arg)
{
	struct rank_ctx *x = arg;
	zs_trainer *t = x->t;
	unsigned rank = zs_trainer_rank(t);

	uint64_t t1 = x->t1 ? x->t1 : STEPS;
	for (uint64_t step = x->t0; step < t1 && !x->rc; step++) {
		zs_op *ops[8];
		void *bufs[8];
		int n_ops = 0;
		if (x->sched) {
			struct zs_hp_table hp;
			struct zs_hparams g[ZS_MAX_GROUPS];
			oracle_hparams(x->spec, step, &hp);
			for (uint32_t k = 0; k < hp.n_groups; k++)
				g[k] = (struct zs_hparams){hp.g[k].lr, hp.g[k].weight_decay,
							   hp.g[k].beta1, hp.g[k].beta2,
							   hp.g[k].eps, hp.g[k].momentum};
			if ((x->rc = zs_set_hparams(t, step, g, hp.n_groups, hp.clip_norm))) {
				zs_fmt(x->why, sizeof x->why, "set_hparams: %s", zs_trainer_error(t));
				break;
			}
		}
		/* backward order; pushes stay in flight until the step's end */
		for (int u = (int)zs_trainer_units(t) - 1; u >= 0 && !x->rc; u--) {
			unsigned long long n = zs_unit_numel(t, (unsigned)u);
			enum zs_dtype dt = (enum zs_dtype)zs_unit_dtype(t, (unsigned)u);
			float *p = malloc(n * 4);
			void *g = malloc(n * 4);
			if ((x->rc = fetch(t, (unsigned)u, step, p))) {
				zs_fmt(x->why, sizeof x->why, "gather: %s", zs_trainer_error(t));
				free(p);
				free(g);
				break;
			}
			/* micro-batches before the last are partial pushes, each
			 * waited so that they are added in order */
			for (uint32_t mb = 0; mb + 1 < x->K && !x->rc; mb++) {
				zs_op *pp;
				float *gm = malloc(n * 4);
				for (unsigned long long i = 0; i < n; i++)
					gm[i] = oracle_grad_mb(p[i], (uint32_t)u, i, rank, step, mb);
				zs_convert_from_f32(g, dt, gm, n);
				free(gm);
				if ((x->rc = zs_push_partial(t, (unsigned)u, step, g, &pp)) ||
				    (x->rc = zs_op_wait(pp, 20000)))
					zs_fmt(x->why, sizeof x->why, "partial push: %s",
					       zs_trainer_error(t));
			}
			for (unsigned long long i = 0; i < n; i++)
				p[i] = x->K == 1 ? oracle_grad(p[i], (uint32_t)u, i, rank, step)
						 : oracle_grad_mb(p[i], (uint32_t)u, i, rank, step,
								  x->K - 1);
			zs_convert_from_f32(g, dt, p, n);
			free(p);
			if (x->rc) {
				free(g);
				break;
			}
			if (x->delay_ms) {
				unsigned d = x->delay_ms(rank, step, (unsigned)u);
				if (d)
					usleep(d * 1000u);
			}
			if ((x->rc = zs_push(t, (unsigned)u, step, g, &ops[n_ops]))) {
				zs_fmt(x->why, sizeof x->why, "push: %s", zs_trainer_error(t));
				free(g);
				break;
			}
			bufs[n_ops++] = g;
		}
		for (int k = 0; k < n_ops; k++) {
			int rc = zs_op_wait(ops[k], 20000);
			if (rc && !x->rc) {
				x->rc = rc;
				zs_fmt(x->why, sizeof x->why, "push: %s", zs_trainer_error(t));
			}
			free(bufs[k]);
		}
	}
	return NULL;
}

void check_oracle(zs_trainer *t, const struct zs_job_spec *spec, uint64_t steps)
{
	float *ref[4];
	oracle_reference(spec, steps, (ref[0] = malloc(4000), ref[1] = malloc(4),
				       ref[2] = malloc(16396), ref[3] = malloc(256), ref));
	for (unsigned u = 0; u < 4; u++) {
		float *got = malloc(zs_unit_numel(t, u) * 4);
		if (fetch(t, u, steps, got))
			fail_msg("gather: %s", zs_trainer_error(t));
		if (memcmp(got, ref[u], zs_unit_numel(t, u) * 4))
			fail_msg("unit %u after %llu steps differs from the reference", u,
				 (unsigned long long)steps);
		free(got);
		free(ref[u]);
	}
}

void train_ranks(struct rank_ctx *x, uint32_t R, uint64_t t0, uint64_t t1)
{
	train_ranks_k(x, R, t0, t1, 1);
}

void train_ranks_k(struct rank_ctx *x, uint32_t R, uint64_t t0, uint64_t t1, uint32_t K)
{
	pthread_t *th = calloc(R, sizeof *th);
	for (uint32_t r = 0; r < R; r++) {
		x[r].t0 = t0;
		x[r].t1 = t1;
		x[r].K = K;
		pthread_create(&th[r], NULL, train, &x[r]);
	}
	for (uint32_t r = 0; r < R; r++) {
		pthread_join(th[r], NULL);
		if (x[r].rc)
			fail_msg("rank %u: %s", r, x[r].why);
	}
	free(th);
}

void fetch_all(zs_trainer *t, uint64_t step, float **out)
{
	for (unsigned u = 0; u < 4; u++) {
		out[u] = malloc(zs_unit_numel(t, u) * 4);
		if (fetch(t, u, step, out[u]))
			fail_msg("gather: %s", zs_trainer_error(t));
	}
}

void wait_restored(struct zs_coord_client *c, const char *job, struct zs_job *j)
{
	for (int i = 0; i < 300; i++) {
		assert_int_equal(zs_coord_get_job(c, job, j, NULL), ZS_OK);
		if (!j->restore_pending)
			return;
		zs_job_release(j);
		usleep(50 * 1000);
	}
	fail_msg("the restore of job '%s' did not finish within 15 s", job);
}
/* Restarts server i, with ZSHARD_FAULT=fault when not NULL. */
int respawn_server(int i)
{
	if (C.srv[i] > 0 && h_alive(C.srv[i]))
		h_stop(C.srv[i], SIGKILL, 5000);
	return spawn_server(i, C.capacity, NULL);
}

void restart_server(int i, const char *fault)
{
	struct zs_coord_client *c;
	int64_t deadline;
	bool up = false;

	/* one still running would be left behind, untracked, by the new one */
	if (C.srv[i] > 0 && h_alive(C.srv[i]))
		h_stop(C.srv[i], SIGKILL, 5000);
	assert_int_equal(spawn_server(i, C.capacity, fault), 0);
	/* listening is not registered: wait until the coordinator lists it up,
	 * so that a placement made next (a restore) can use it */
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &c, NULL), ZS_OK);
	for (deadline = zs_now_ms() + 20000; !up && zs_now_ms() < deadline;) {
		struct zs_server_info *s;
		uint32_t n;
		if (!zs_coord_servers(c, &s, &n, NULL)) {
			for (uint32_t k = 0; k < n; k++)
				up |= s[k].up && !strcmp(s[k].addr, C.srv_addr[i]);
			free(s);
		}
		if (!up)
			usleep(50 * 1000);
	}
	zs_coord_close(c);
	if (!up)
		fail_msg("server %d (%s) did not come up at the coordinator within 20 s", i,
			 C.srv_addr[i]);
}
/* Restores checkpoint id (0: latest) of job and waits for it. */
void restore(struct zs_coord_client *c, const char *job, uint64_t id)
{
	struct zs_error err = {0};
	struct zs_job j;

	if (zs_coord_restore(c, job, id, &j, &err))
		fail_msg("restore %s: %s", job, err.msg);
	zs_job_release(&j);
	wait_restored(c, job, &j);
	if (j.restore_error[0])
		fail_msg("restore of %s failed: %s", job, j.restore_error);
	zs_job_release(&j);
}

void rebalance(struct zs_coord_client *c, const char *job, const uint64_t *ids,
		      uint32_t n, uint32_t want_servers)
{
	struct zs_error err = {0};
	struct zs_job j;
	uint64_t seen[8];
	uint32_t n_seen = 0;

	if (zs_coord_rebalance(c, job, ids, n, &j, &err))
		fail_msg("rebalance %s: %s", job, err.msg);
	for (uint32_t i = 0; i < j.placement.n_shards; i++) {
		bool dup = false;
		for (uint32_t k = 0; k < n_seen; k++)
			dup |= seen[k] == j.placement.shards[i].server_id;
		if (!dup && n_seen < 8)
			seen[n_seen++] = j.placement.shards[i].server_id;
	}
	assert_int_equal(n_seen, want_servers);
	zs_job_release(&j);
}
int ctl(char **out, char **errs, const char *a1, const char *a2, const char *a3,
	       const char *a4, const char *a5)
{
	char *argv[] = {(char *)h_bin("zshardctl"), "--coordinator", C.addr, (char *)a1,
			(char *)a2, (char *)a3, (char *)a4, (char *)a5, NULL};
	return h_run(argv, out, errs);
}

/* Trains the oracle job and checks it bitwise; sched: in 3 optimizer
 * groups (oracle_spec_groups) with oracle_hparams set at every step. */
void check_reference(zs_trainer *t, const struct zs_job_spec *spec,
		     const struct zs_placement *pl, uint32_t K, int sched, const char *what)
{
	uint32_t U = spec->layout.n_units;
	float **ref = calloc(U, sizeof *ref);

	for (uint32_t u = 0; u < U; u++)
		ref[u] = malloc(spec->layout.units[u].numel * 4);
	oracle_reference_sched(spec, pl, STEPS, K, sched, ref);
	for (unsigned u = 0; u < U; u++) {
		unsigned long long n = spec->layout.units[u].numel;
		float *got = malloc(n * 4);
		if (fetch(t, u, STEPS, got))
			fail_msg("%s: final gather: %s", what, zs_trainer_error(t));
		for (unsigned long long i = 0; i < n; i++)
			if (memcmp(&got[i], &ref[u][i], 4))
				fail_msg("%s: unit %u element %llu is %.9g, the reference %.9g", what, u,
					 i, got[i], ref[u][i]);
		free(got);
		free(ref[u]);
	}
	free(ref);
}

uint32_t oracle_replicas;
bool oracle_data_tls;

void train_oracle(const char *name, uint32_t R, const char *transport,
		     enum zs_optim_kind kind, enum zs_dtype dt, uint32_t K, double clip, int sched)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_job placed;
	struct rank_ctx x[3];
	pthread_t th[3];

	oracle_spec(&spec, name, R, kind, dt);
	spec.optim.clip_norm = clip;
	spec.replicas = oracle_replicas;
	spec.data_tls = oracle_data_tls;
	if (sched == 2)
		oracle_spec_frozen(&spec); /* the groups, and frozen tensors */
	else if (sched)
		oracle_spec_groups(&spec);
	create_job(&spec);
	/* the reference sums norms over the placement the coordinator chose
	 * (its primaries: a replica's norm is its primary's) */
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, name, &placed, NULL), ZS_OK);
	zs_coord_close(c);
	{
		struct zs_placement prim;
		assert_int_equal(zs_placement_primaries(&prim, &placed.placement), ZS_OK);
		zs_placement_release(&placed.placement);
		placed.placement = prim;
	}
	for (uint32_t r = 0; r < R; r++)
		x[r] = (struct rank_ctx){.t = join(name, r, transport), .K = K, .spec = &spec,
					 .sched = sched};
	upload_init(x[0].t);
	for (uint32_t r = 0; r < R; r++)
		pthread_create(&th[r], NULL, train, &x[r]);
	for (uint32_t r = 0; r < R; r++) {
		pthread_join(th[r], NULL);
		if (x[r].rc)
			fail_msg("%s rank %u: %s", name, r, x[r].why);
	}
	{
		char what[256];
		snprintf(what, sizeof what, "%s (R=%u %s %s %s)", name, R, transport,
			 zs_optim_name(kind), zs_dtype_name(dt));
		check_reference(x[R - 1].t, &spec, &placed.placement, K, sched, what);
	}
	zs_job_release(&placed);
	for (uint32_t r = 0; r < R; r++)
		zs_trainer_close(x[r].t);
	zs_job_spec_release(&spec);
}

int driver_frozen;

void driver_run(const char *name, unsigned stage, const char *transport,
		const struct zs_policy *pol, struct zs_trainer_counters *ctr,
		struct zs_step_stats *last)
{
	struct zs_job_spec spec;
	zs_trainer *t;
	float *ref[4];

	oracle_spec(&spec, name, 1, ZS_SGD, ZS_F32);
	if (driver_frozen)
		oracle_spec_frozen(&spec);
	spec.stage = stage;
	create_job(&spec);
	t = join(name, 0, transport);
	assert_int_equal(zs_trainer_set_policy(t, pol), ZS_OK);
	upload_init(t);
	for (uint64_t step = 0; step < STEPS; step++) {
		const void *p;
		void *g;
		assert_int_equal(zs_step_begin(t, step), ZS_OK);
		for (unsigned u = 0; u < 4; u++) {
			assert_int_equal(zs_unit_params(t, u, 0, &p), ZS_OK);
			if (u == 3 && stage == 3 && pol->prefetch == 1 && pol->reshard_after_forward &&
			    !pol->max_live_bytes) {
				/* the window runs on into the backward pass: the
				 * last unit (kept) and the one before it, asked for
				 * again while the last one's forward runs */
				struct zs_trainer_counters now;
				zs_trainer_counters(t, &now);
				assert_int_equal(now.live_param_bytes, 256 + 16396);
			}
			assert_int_equal(zs_unit_forward_done(t, u), ZS_OK);
		}
		for (int u = 3; u >= 0; u--) {
			unsigned long long n = zs_unit_numel(t, (unsigned)u);
			if (zs_unit_params(t, (unsigned)u, 1, &p) || zs_unit_grad(t, (unsigned)u, &g))
				fail_msg("%s", zs_trainer_error(t));
			for (unsigned long long i = 0; i < n; i++)
				((float *)g)[i] = oracle_grad(((const float *)p)[i], (uint32_t)u, i, 0, step);
			assert_int_equal(zs_unit_push(t, (unsigned)u), ZS_OK);
		}
		if (zs_step_end(t))
			fail_msg("%s", zs_trainer_error(t));
	}
	zs_trainer_counters(t, ctr);
	assert_int_equal(zs_last_step(t, last), ZS_OK);
	oracle_reference(&spec, STEPS, (ref[0] = malloc(4000), ref[1] = malloc(4),
					 ref[2] = malloc(16396), ref[3] = malloc(256), ref));
	for (unsigned u = 0; u < 4; u++) {
		float got[4099];
		assert_int_equal(fetch(t, u, STEPS, got), ZS_OK);
		assert_memory_equal(got, ref[u], zs_unit_numel(t, u) * 4);
		free(ref[u]);
	}
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}
