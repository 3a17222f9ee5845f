/*
 * test_driver.c - the step driver (zs_step_begin .. zs_step_end) through
 * the whole service: what a trainer holds follows the stage, the policy and
 * `zshardctl plan` (parameters and gradients, push_depth counted in the
 * order pushes start), the prefetch window runs on into the next step and
 * is parked when that step is not next, tcp gathers travel on their own
 * connection, calls it gets wrong are refused, and a step boundary waits on
 * no coordinator round trip.
 */
#include <dirent.h>

#include "tests/integration/train_common.h"

/* Rank 0 over tcp of a new 1-rank oracle job name (SGD, f32; stage 0:
 * the spec's), its spec in *spec. */
static zs_trainer *one_rank(struct zs_job_spec *spec, const char *name, unsigned stage)
{
	oracle_spec(spec, name, 1, ZS_SGD, ZS_F32);
	if (stage)
		spec->stage = stage;
	create_job(spec);
	return join(name, 0, "tcp");
}

/* Begins step step and runs its forward pass through the step driver. */
static void driver_forward(zs_trainer *t, unsigned long long step)
{
	const void *p;

	assert_int_equal(zs_step_begin(t, step), ZS_OK);
	for (unsigned u = 0; u < zs_trainer_units(t); u++) {
		assert_int_equal(zs_unit_params(t, u, 0, &p), ZS_OK);
		assert_int_equal(zs_unit_forward_done(t, u), ZS_OK);
	}
}

/* Step step through the step driver, zero gradients, pushing units U - 1
 * down to lowest (0: all); zs_step_end's status. */
static int driver_backward(zs_trainer *t, unsigned lowest)
{
	unsigned U = zs_trainer_units(t);
	const void *p;
	void *g;

	for (unsigned u = U; u-- > lowest;) {
		assert_int_equal(zs_unit_params(t, u, 1, &p), ZS_OK);
		assert_int_equal(zs_unit_grad(t, u, &g), ZS_OK);
		assert_int_equal(zs_unit_push(t, u), ZS_OK);
	}
	return zs_step_end(t);
}

static int driver_step_to(zs_trainer *t, unsigned long long step, unsigned lowest)
{
	driver_forward(t, step);
	return driver_backward(t, lowest);
}

static void driver_step(zs_trainer *t, unsigned long long step)
{
	assert_int_equal(driver_step_to(t, step, 0), ZS_OK);
}

/*
 * The window runs on into the next step at the backward pass's end: unit 1
 * of step 1 is asked for once its step-0 gradient is pushed, and held by
 * its server until every rank's push of it is in (rank 1 never pushes
 * here). A step begun that is not the next one (step 0 again) must not
 * wait for it: the gather is parked with its buffer until the trainer
 * closes, and the unit is gathered for the step begun.
 */
static void test_window_ahead_parked(void **st)
{
	struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1};
	struct zs_trainer_counters c;
	struct zs_job_spec spec;
	const void *p;
	void *g;
	zs_trainer *t;

	(void)st;
	oracle_spec(&spec, "ahead", 2, ZS_SGD, ZS_F32);
	spec.stage = 3;
	create_job(&spec);
	t = join("ahead", 0, "tcp");
	assert_int_equal(zs_trainer_set_policy(t, &pol), ZS_OK);
	upload_init(t);
	assert_int_equal(zs_step_begin(t, 0), ZS_OK);
	for (unsigned u = 0; u < 4; u++) {
		assert_int_equal(zs_unit_params(t, u, 0, &p), ZS_OK);
		assert_int_equal(zs_unit_forward_done(t, u), ZS_OK);
	}
	for (int u = 3; u >= 0; u--) {
		if (zs_unit_params(t, (unsigned)u, 1, &p) || zs_unit_grad(t, (unsigned)u, &g) ||
		    zs_unit_push(t, (unsigned)u))
			fail_msg("%s", zs_trainer_error(t));
	}
	if (zs_step_end(t))
		fail_msg("%s", zs_trainer_error(t));
	zs_trainer_counters(t, &c);
	assert_int_equal(c.live_param_bytes, 4); /* unit 1 of step 1, held */
	double t0 = zs_now_ms();
	assert_int_equal(zs_step_begin(t, 0), ZS_OK);
	/* at once: not when the server gives up holding it (--step-timeout-ms
	 * 3000 here), nor at the op's bound (120 s) */
	assert_true(zs_now_ms() - t0 < 2000);
	/* step 0's unit 1, not the parked step 1's */
	assert_int_equal(zs_unit_params(t, 0, 0, &p), ZS_OK);
	assert_int_equal(zs_unit_forward_done(t, 0), ZS_OK);
	assert_int_equal(zs_unit_params(t, 1, 0, &p), ZS_OK);
	assert_true(((const float *)p)[0] == oracle_init(1, 0));
	zs_trainer_counters(t, &c);
	assert_int_equal(c.live_param_bytes, 4 + 16396); /* unit 1 and the window's 2 */
	zs_trainer_close(t); /* mid-step: the parked gather and its buffer go */
	zs_job_spec_release(&spec);
}

/* This process's TCP connections to port (its sockets in /proc/net/tcp). */
static unsigned conns_to(unsigned port)
{
	unsigned long inodes[256];
	unsigned n_in = 0, n = 0;
	char line[512], path[300], link[64];
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *de;
	FILE *f;

	assert_non_null(dir);
	while ((de = readdir(dir)) && n_in < 256) {
		ssize_t k;
		snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
		k = readlink(path, link, sizeof link - 1);
		if (k > 0) {
			link[k] = '\0';
			if (sscanf(link, "socket:[%lu]", &inodes[n_in]) == 1)
				n_in++;
		}
	}
	closedir(dir);
	f = fopen("/proc/net/tcp", "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		unsigned rport, st;
		unsigned long inode;
		if (sscanf(line, " %*u: %*x:%*x %*x:%x %x %*x:%*x %*x:%*x %*x %*u %*u %lu", &rport,
			   &st, &inode) != 3 || rport != port || st != 1 /* ESTABLISHED */)
			continue;
		for (unsigned i = 0; i < n_in; i++)
			n += inodes[i] == inode;
	}
	fclose(f);
	return n;
}

/*
 * Over tcp a trainer keeps two connections to each server of its job:
 * pushes (and HPARAMS frames) on one, gathers on the other, so that a
 * gather's request and data never wait behind a push's payload in one
 * byte stream (bench/link.sh measures what that gains).
 */
static void test_tcp_gather_lane(void **st)
{
	struct zs_coord_client *c;
	struct zs_server_info *s;
	struct zs_job_spec spec;
	uint32_t n_s;
	zs_trainer *t;

	(void)st;
	t = one_rank(&spec, "lanes", 0);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_servers(c, &s, &n_s, NULL), ZS_OK);
	for (uint32_t i = 0; i < n_s; i++) {
		const char *colon = strrchr(s[i].data_addr, ':');
		assert_non_null(colon);
		assert_int_equal(conns_to((unsigned)atoi(colon + 1)), 2);
	}
	free(s);
	zs_coord_close(c);
	/* and the job trains through them as ever */
	upload_init(t);
	zs_trainer_close(t);
	train_oracle("lanes2", 1, "tcp", ZS_ADAMW, ZS_F32, 1, 0.0, 0);
	zs_job_spec_release(&spec);
}

/* A step report's times add up and none is negative. */
static void check_split(const struct zs_step_stats *s, unsigned stage, unsigned prefetch)
{
	double sum = s->compute_seconds + s->gather_wait_seconds + s->push_wait_seconds +
		     s->control_seconds;
	assert_int_equal(s->step, STEPS - 1);
	assert_int_equal(s->stage, stage);
	assert_int_equal(s->prefetch, prefetch);
	assert_true(s->seconds > 0 && s->compute_seconds >= 0 && s->gather_wait_seconds >= 0 &&
		    s->push_wait_seconds >= 0 && s->control_seconds > 0);
	assert_true(sum > s->seconds * 0.999 && sum < s->seconds * 1.001);
	assert_true(s->rss_peak_bytes > 1 << 20);
}

/* What the operator sees of job name after its trainer left: the rank's
 * last report as the trainer had it, and each server's time on the step. */
static void check_reported(const char *name, const struct zs_step_stats *s)
{
	char *argv[] = {(char *)h_bin("zshardctl"), "--coordinator", C.addr, "stats",
			(char *)name, "--json", NULL};
	char *out = NULL, *errs = NULL;
	json_error_t je;
	json_t *j, *r, *servers, *v;
	size_t i;

	assert_int_equal(h_run(argv, &out, &errs), 0);
	j = json_loads(out, 0, &je);
	if (!j)
		fail_msg("stats --json printed no JSON (%s): %s", je.text, out);
	r = json_array_get(json_object_get(j, "ranks"), 0);
	assert_non_null(r);
	assert_int_equal(json_array_size(json_object_get(j, "ranks")), 1);
	assert_int_equal(json_integer_value(json_object_get(r, "step")), s->step);
	assert_int_equal(json_integer_value(json_object_get(r, "bytes_gathered")), s->bytes_gathered);
	assert_int_equal(json_integer_value(json_object_get(r, "bytes_pushed")), s->bytes_pushed);
	assert_int_equal(json_integer_value(json_object_get(r, "peak_param_bytes")),
			 s->peak_param_bytes);
	assert_true(json_real_value(json_object_get(r, "seconds")) == s->seconds);
	assert_true(json_real_value(json_object_get(r, "gather_wait_seconds")) ==
		    s->gather_wait_seconds);
	servers = json_object_get(j, "servers");
	assert_true(json_array_size(servers) >= 1);
	json_array_foreach(servers, i, v) {
		json_t *ls = json_object_get(v, "last_step");
		assert_non_null(ls);
		assert_int_equal(json_integer_value(json_object_get(ls, "step")), STEPS - 1);
		assert_true(json_real_value(json_object_get(ls, "optim_seconds")) > 0);
		assert_true(json_integer_value(json_object_get(v, "rss_peak_bytes")) > 1 << 20);
	}
	json_decref(j);
	free(out);
	free(errs);
}

/* The trainer parameter bytes `zshardctl plan --job` predicts for a job. */
static long long planned(const char *job, const char *opt, const char *prefetch)
{
	char *argv[] = {(char *)h_bin("zshardctl"), "--coordinator", C.addr, "plan", "--job",
			(char *)job, "--prefetch", (char *)prefetch, "--json", (char *)opt, NULL};
	char *out = NULL, *errs = NULL;
	json_error_t je;
	json_t *j;
	long long v;

	if (!strcmp(opt, "--prefetch"))
		argv[9] = NULL;
	assert_int_equal(h_run(argv, &out, &errs), 0);
	j = json_loads(out, 0, &je);
	if (!j)
		fail_msg("plan --json printed no JSON (%s): %s", je.text, out);
	assert_int_equal(json_integer_value(json_object_get(j, "world")), 1);
	v = json_integer_value(json_object_get(json_object_get(j, "trainer"), "param_bytes"));
	json_decref(j);
	free(out);
	free(errs);
	return v;
}

static void test_step_driver_memory(void **st)
{
	struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1};
	struct zs_trainer_counters c;
	struct zs_step_stats s;
	const unsigned long long total = 4000 + 4 + 16396 + 256;

	(void)st;
	/* stage 1: the full replica and every gradient until the step's end */
	driver_run("drv1", 1, "tcp", &pol, &c, &s);
	assert_int_equal(c.peak_param_bytes, total);
	assert_int_equal(c.peak_grad_bytes, total);
	/* the step report: each unit gathered and pushed once per step */
	check_split(&s, 1, 1);
	assert_int_equal(s.bytes_gathered, total);
	assert_int_equal(s.bytes_pushed, total);
	assert_int_equal(s.peak_param_bytes, total);
	assert_int_equal(s.peak_grad_bytes, total);
	check_reported("drv1", &s);
	/* frozen tensors at stage 1: the replica refreshed in place, its frozen
	 * shards kept, so each step after the first gathers the trained
	 * elements alone (units 0 and 2 each hold one frozen tensor: 400 and
	 * 99 elements), and pushes them alone; the same bits as the reference */
	driver_frozen = 1;
	driver_run("drv1f", 1, "tcp", &pol, &c, &s);
	driver_frozen = 0;
	assert_int_equal(s.bytes_gathered, total - 4 * (400 + 99));
	assert_int_equal(s.bytes_pushed, total - 4 * (400 + 99));
	assert_int_equal(c.bytes_gathered, STEPS * total - (STEPS - 1) * 4 * (400 + 99));
	/* stage 3 under a bound of the largest unit plus the head: never more */
	pol.max_live_bytes = 16396 + 256;
	driver_run("drv3", 3, "tcp", &pol, &c, &s);
	assert_true(c.peak_param_bytes <= pol.max_live_bytes);
	assert_true(c.peak_param_bytes >= 16396);
	/* after the step: the window's one unit of the next step, asked for
	 * at the backward pass's end (unit 1: unit 0 waits for this push) */
	assert_int_equal(c.live_param_bytes, 4);
	assert_int_equal(c.live_grad_bytes, 0);
	/* freed after forward: all but the head gathered again for backward */
	check_split(&s, 3, 1);
	assert_int_equal(s.bytes_gathered, total + total - 256);
	assert_int_equal(s.bytes_pushed, total);
	assert_true(s.peak_param_bytes <= pol.max_live_bytes);
	check_reported("drv3", &s);
	/* stage 3 keeping units until their backward holds more */
	pol = (struct zs_policy){.prefetch = 2, .reshard_after_forward = 0};
	driver_run("drv3k", 3, "tcp", &pol, &c, &s);
	assert_true(c.peak_param_bytes > 16396 + 256);
	check_split(&s, 3, 2);
	assert_int_equal(s.bytes_gathered, total);
	assert_int_equal(s.peak_param_bytes, planned("drv3k", "--keep-until-backward", "2"));
	/* stage 3 with one unit of prefetch and no bound: the plan's window */
	pol = (struct zs_policy){.prefetch = 1, .reshard_after_forward = 1};
	driver_run("drv3p", 3, "tcp", &pol, &c, &s);
	assert_int_equal(s.peak_param_bytes, 16396 + 256);
	assert_int_equal(s.peak_param_bytes, planned("drv3p", "--prefetch", "1"));
	/* beside the gradient being written, only the last push started (in
	 * flight or not): never more, whichever push finishes first */
	assert_true(c.peak_grad_bytes <= 16396 + 256);
	/* two in flight: up to three units */
	pol.push_depth = 2;
	driver_run("drv3d", 3, "tcp", &pol, &c, &s);
	assert_true(c.peak_grad_bytes <= 4000 + 4 + 16396 && c.peak_grad_bytes >= 16396);
}

/* The index in C.srv of the server the coordinator knows as id; -1 none. */
static int srv_index_of(uint64_t id)
{
	struct zs_coord_client *c;
	struct zs_server_info *s;
	uint32_t n;
	int at = -1;

	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_servers(c, &s, &n, NULL), ZS_OK);
	for (uint32_t k = 0; k < n; k++)
		for (int i = 0; s[k].id == id && i < C.n; i++)
			if (!strcmp(s[k].addr, C.srv_addr[i]))
				at = i;
	free(s);
	zs_coord_close(c);
	return at;
}

static void *continue_server(void *arg)
{
	usleep(400 * 1000); /* within the test cluster's leases (1.5 s, 3 s) */
	kill(*(pid_t *)arg, SIGCONT);
	return NULL;
}

/*
 * push_depth counts the last pushes started, not any push still running:
 * unit 2's push is held (a server that owns a part of it, and none of unit
 * 1, is stopped) while unit 1's, pushed after it, completes; unit 0's
 * gradient must then wait for unit 2's push (the plan's 1 + push_depth
 * consecutive units), not be handed out beside it: a peak of 16396 + 4000
 * bytes instead of at most 16396 + 256.
 */
static void test_push_depth_in_order(void **st)
{
	struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 0};
	struct zs_trainer_counters c;
	struct zs_coord_client *cc;
	struct zs_job_spec spec;
	struct zs_job j;
	zs_trainer *t;
	const void *p;
	void *g;
	pthread_t th;
	pid_t stopped;
	int b = -1;
	double t0, waited;

	(void)st;
	t = one_rank(&spec, "depth", 3);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &cc, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(cc, "depth", &j, NULL), ZS_OK);
	zs_coord_close(cc);
	for (uint32_t i = 0; b < 0 && i < j.placement.n_shards; i++) {
		bool has1 = false;
		if (j.placement.shards[i].unit != 2)
			continue;
		for (uint32_t k = 0; k < j.placement.n_shards; k++)
			has1 |= j.placement.shards[k].unit == 1 &&
				j.placement.shards[k].server_id == j.placement.shards[i].server_id;
		if (!has1)
			b = srv_index_of(j.placement.shards[i].server_id);
	}
	zs_job_release(&j);
	if (b < 0)
		fail_msg("no server holds a part of unit 2 and none of unit 1 (%d servers): the "
			 "test needs unit 2 split across them",
			 C.n);
	assert_int_equal(zs_trainer_set_policy(t, &pol), ZS_OK);
	upload_init(t);
	driver_forward(t, 0);
	for (unsigned u = 4; u-- > 1;) { /* kept since the forward pass: no gathers */
		assert_int_equal(zs_unit_params(t, u, 1, &p), ZS_OK);
		assert_int_equal(zs_unit_grad(t, u, &g), ZS_OK);
		if (u == 2) {
			stopped = C.srv[b];
			kill(stopped, SIGSTOP);
		}
		assert_int_equal(zs_unit_push(t, u), ZS_OK);
		usleep(100 * 1000); /* unit 3's push, then unit 1's, complete */
	}
	pthread_create(&th, NULL, continue_server, &stopped);
	assert_int_equal(zs_unit_params(t, 0, 1, &p), ZS_OK);
	t0 = zs_now_ms();
	assert_int_equal(zs_unit_grad(t, 0, &g), ZS_OK);
	waited = zs_now_ms() - t0;
	pthread_join(th, NULL);
	assert_int_equal(zs_unit_push(t, 0), ZS_OK);
	assert_int_equal(zs_step_end(t), ZS_OK);
	zs_trainer_counters(t, &c);
	if (c.peak_grad_bytes > 16396 + 256)
		fail_msg("%llu gradient bytes held at once (unit 0's beside unit 2's push, after "
			 "%.0f ms): push_depth 1 holds two consecutive units",
			 c.peak_grad_bytes, waited);
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

/*
 * Calls a trainer gets wrong are refused with a clear error: a NULL buffer
 * (before anything is sent), and a step that ends with a unit not pushed
 * (the servers need every unit each step). The join itself comes right
 * after the job's creation: the library waits for the servers to load it.
 */
static void test_bad_calls(void **st)
{
	struct zs_job_spec spec;
	zs_trainer *t;
	zs_op *op = NULL;

	(void)st;
	t = one_rank(&spec, "bad", 0);
	upload_init(t);
	assert_int_equal(zs_gather(t, 0, 0, NULL, &op), ZS_EINVAL);
	assert_null(op);
	assert_non_null(strstr(zs_trainer_error(t), "NULL"));
	assert_int_equal(zs_push(t, 0, 0, NULL, &op), ZS_EINVAL);
	assert_int_equal(zs_init_unit(t, 0, NULL), ZS_EINVAL);

	assert_true(zs_trainer_units(t) >= 2);
	/* unit 0's gradient is left out */
	assert_int_equal(driver_step_to(t, 0, 1), ZS_ESTATE);
	assert_non_null(strstr(zs_trainer_error(t), "not pushed"));
	assert_non_null(strstr(zs_trainer_error(t), zs_unit_name(t, 0)));
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

static void *resume_coordinator(void *arg)
{
	(void)arg;
	usleep(1000 * 1000); /* within the test cluster's leases (1.5 s, 3 s) */
	kill(C.coord, SIGCONT);
	return NULL;
}

/*
 * A step boundary waits on no coordinator round trip: with the
 * coordinator stopped (SIGSTOP), the next step still begins and gathers at
 * once (the answer to the report posted at the last boundary came while
 * that step ran); its first push waits until the coordinator has heard the
 * step begin (what a lost rank's replacement redoes: client/redo.c, within
 * 2 s), and the coordinator comes back.
 */
static void test_boundary_without_round_trip(void **st)
{
	struct zs_job_spec spec;
	pthread_t th;
	zs_trainer *t;
	double t0;

	(void)st;
	t = one_rank(&spec, "boundary", 0);
	upload_init(t);
	driver_step(t, 0);
	usleep(300 * 1000); /* the lease thread sends the boundary's report */
	kill(C.coord, SIGSTOP);
	pthread_create(&th, NULL, resume_coordinator, NULL);
	t0 = zs_now_ms();
	driver_forward(t, 1);
	{
		double took = zs_now_ms() - t0;
		if (took > 800) {
			pthread_join(th, NULL);
			fail_msg("step 1's boundary and forward took %.0f ms with the coordinator stopped: its boundary waited on it",
				 took);
		}
	}
	assert_int_equal(driver_backward(t, 0), ZS_OK); /* the coordinator is back within 1 s */
	driver_step(t, 2);
	pthread_join(th, NULL);
	driver_step(t, 3);
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step_driver_memory),
		cmocka_unit_test(test_push_depth_in_order),
		cmocka_unit_test(test_window_ahead_parked),
		cmocka_unit_test(test_tcp_gather_lane),
		cmocka_unit_test(test_bad_calls),
		cmocka_unit_test(test_boundary_without_round_trip),
	};
	if (argc > 1) /* e.g. test_driver '*window*' */
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("driver", tests, group_setup, group_teardown);
}
