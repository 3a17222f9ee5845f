/*
 * test_train.c - training through the whole service: jobs created through
 * the coordinator, R trainers that gather, compute the oracle's synthetic
 * gradient and push for several steps. The parameters they then gather
 * must equal the single-process reference to the bit, for R in {1, 2, 3},
 * tcp and shm (and rdma under make test-rdma), SGD and AdamW, f32 and
 * bf16. Also: an operator's stage change reaches trainers at their next
 * refresh, a trainer that asks for a step that is not there yet is held,
 * then served, and the step driver's memory follows the stage and the plan.
 */
#include <dirent.h>

#include "tests/integration/train_common.h"

static void run_clip(const char *name, uint32_t R, const char *transport,
		     enum zs_optim_kind kind, enum zs_dtype dt, uint32_t K, double clip)
{
	train_oracle(name, R, transport, kind, dt, K, clip, 0);
}

static void run(const char *name, uint32_t R, const char *transport,
		enum zs_optim_kind kind, enum zs_dtype dt, uint32_t K)
{
	run_clip(name, R, transport, kind, dt, K, 0.0);
}

/*
 * A learning-rate schedule and optimizer groups: every rank sets each
 * step's values (warmup, cosine decay; a group without weight decay, one at
 * a third of the lr; a clipping norm that changes) before its pushes; the
 * result equals the reference that updates each tensor with its group's
 * values of that step, to the bit. Then what the servers refuse.
 */
static void test_schedule_and_groups(void **st)
{
	struct zs_job_spec spec;
	struct zs_hparams h[3];
	zs_trainer *a, *b;
	double clip;

	(void)st;
	train_oracle("hp1", 2, "tcp", ZS_ADAMW, ZS_F32, 1, 0.0, 1);
	train_oracle("hp2", 3, "shm", ZS_ADAMW, ZS_BF16, 1, 0.5, 1); /* clipping per step */
	train_oracle("hp3", 2, "auto", ZS_SGD, ZS_F32, 3, 0.0, 1);   /* momentum, accumulation */

	oracle_spec(&spec, "hp4", 2, ZS_ADAMW, ZS_F32);
	oracle_spec_groups(&spec);
	create_job(&spec);
	a = join("hp4", 0, "tcp");
	b = join("hp4", 1, "tcp");
	assert_int_equal(zs_trainer_groups(a), 3);
	assert_int_equal(zs_trainer_hparams(a, 1, &h[1], &clip), ZS_OK);
	assert_true(h[1].weight_decay == 0.0 && h[1].lr == spec.optim.lr && clip == 0.0);
	assert_int_equal(zs_trainer_hparams(a, 3, &h[0], NULL), ZS_EINVAL);
	for (int g = 0; g < 3; g++)
		assert_int_equal(zs_trainer_hparams(a, (unsigned)g, &h[g], NULL), ZS_OK);
	/* a count, a value or a clipping the job does not have: refused here */
	assert_int_equal(zs_set_hparams(a, 0, h, 2, 0.0), ZS_EINVAL);
	assert_non_null(strstr(zs_trainer_error(a), "2 optimizer groups"));
	h[2].lr = -1.0;
	assert_int_equal(zs_set_hparams(a, 0, h, 3, 0.0), ZS_EINVAL);
	assert_non_null(strstr(zs_trainer_error(a), "group 2: learning rate"));
	h[2].lr = 1e-3;
	assert_int_equal(zs_set_hparams(a, 0, h, 3, 1.0), ZS_EINVAL);
	assert_non_null(strstr(zs_trainer_error(a), "turn clipping on"));
	/* set, then a rank that disagrees for the same step is refused by
	 * the servers, naming the value; steps do not go back */
	assert_int_equal(zs_set_hparams(a, 1, h, 3, 0.0), ZS_OK);
	assert_int_equal(zs_trainer_hparams(a, 2, &h[0], NULL), ZS_OK);
	assert_true(h[0].lr == 1e-3);
	for (int g = 0; g < 3; g++)
		zs_trainer_hparams(a, (unsigned)g, &h[g], NULL);
	h[0].weight_decay = 0.5;
	assert_int_equal(zs_set_hparams(b, 1, h, 3, 0.0), ZS_EINVAL);
	assert_non_null(strstr(zs_trainer_error(b), "group 0 weight_decay 0.5"));
	h[0].weight_decay = spec.optim.weight_decay;
	assert_int_equal(zs_set_hparams(b, 1, h, 3, 0.0), ZS_OK);
	assert_int_equal(zs_set_hparams(a, 0, h, 3, 0.0), ZS_EINVAL);
	assert_non_null(strstr(zs_trainer_error(a), "steps only go forward"));
	zs_trainer_close(a);
	zs_trainer_close(b);
	zs_job_spec_release(&spec);
}

static void test_oracle_through_the_service(void **st)
{
	(void)st;
	run("o1", 1, "tcp", ZS_SGD, ZS_F32, 1);
	run("o2", 2, "shm", ZS_ADAMW, ZS_BF16, 1);
	run("o3", 3, "tcp", ZS_ADAMW, ZS_BF16, 1);
	run("o4", 3, "shm", ZS_SGD, ZS_F32, 1);
	run("o5", 2, "auto", ZS_ADAMW, ZS_F32, 1);
	run("o6", 2, "tcp", ZS_ADAMW, ZS_BF16, 3); /* gradient accumulation */
	/* global-norm clipping through the coordinator's norm exchange */
	run_clip("o7", 2, "shm", ZS_ADAMW, ZS_F32, 1, 0.5);
	run_clip("o8", 3, "tcp", ZS_SGD, ZS_BF16, 3, 0.5);
}

/*
 * The oracle over rdma: stage 3, 2 trainers, every byte of every gather and
 * push by RDMA READ and WRITE between the trainers' buffers and the servers'
 * registered arenas; the parameters equal the single-process reference bit
 * for bit. make test-rdma runs it on Soft-RoCE in a qemu guest; without an
 * RDMA device it says why and skips (not a pass).
 */
static const char *drv_transport = "tcp"; /* the rdma test sets "rdma" */
static void driver_run(const char *name, unsigned stage, const struct zs_policy *pol,
		       struct zs_trainer_counters *ctr, struct zs_step_stats *last);

static void test_oracle_over_rdma(void **st)
{
	char note[256];

	(void)st;
	if (zs_rdma_probe(0, note, sizeof note)) {
		printf("test_oracle_over_rdma: skipped: %s (make test-rdma runs it on Soft-RoCE)\n",
		       note);
		skip();
	}
	printf("test_oracle_over_rdma: on %s, %d servers\n", note, C.n);
	run("rd1", 2, "rdma", ZS_ADAMW, ZS_F32, 1);
	run("rd2", 2, "rdma", ZS_SGD, ZS_BF16, 3); /* accumulation, bf16 */
	/* optimizer groups and a schedule set each step (HPARAMS frames on
	 * the rdma connections' stream), with clipping */
	train_oracle("rd4", 2, "rdma", ZS_ADAMW, ZS_F32, 1, 0.5, 1);
	{ /* the step driver, its buffers registered once */
		struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1};
		struct zs_trainer_counters c;
		struct zs_step_stats s;
		drv_transport = "rdma";
		driver_run("rd3", 3, &pol, &c, &s);
		drv_transport = "tcp";
		assert_int_equal(s.peak_param_bytes, 16396 + 256);
	}
}

/*
 * A job deleted and created again under its name, at once: its trainers
 * must not reach the old job's state, which servers drop only at their next
 * assignments; they wait for the new one and train from its step 0.
 */
static void test_recreated_job(void **st)
{
	struct zs_coord_client *c;
	struct zs_job j;

	(void)st;
	run("again", 2, "tcp", ZS_ADAMW, ZS_F32, 1);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_delete_job(c, "again", &j, NULL), ZS_OK);
	zs_job_release(&j);
	zs_coord_close(c);
	run("again", 2, "shm", ZS_ADAMW, ZS_F32, 1);
}

static void test_stage_and_held_gather(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_job j;
	zs_trainer *t;
	zs_op *early, *op;
	float p[1000], g[1000] = {0};

	(void)st;
	oracle_spec(&spec, "stage", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	t = join("stage", 0, "tcp");
	assert_int_equal(zs_trainer_stage(t), 3);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_set_stage(c, "stage", 1, &j, NULL), ZS_OK);
	zs_job_release(&j);
	assert_int_equal(zs_trainer_stage(t), 3); /* not before the step boundary */
	assert_int_equal(zs_trainer_refresh(t), ZS_OK);
	assert_int_equal(zs_trainer_stage(t), 1);
	assert_int_equal(zs_init_unit(t, 0, g), ZS_OK);
	/* step 1 asked before step 0 is pushed: held, then served */
	assert_int_equal(zs_gather(t, 0, 1, p, &early), ZS_OK);
	usleep(100 * 1000);
	assert_int_equal(zs_op_test(early), ZS_EAGAIN);
	assert_int_equal(zs_push(t, 0, 0, g, &op), ZS_OK);
	assert_int_equal(zs_op_wait(op, 5000), ZS_OK);
	assert_int_equal(zs_op_wait(early, 5000), ZS_OK);
	/* a push for a step already applied is refused with a reason */
	assert_int_equal(zs_push(t, 0, 0, g, &op), ZS_OK);
	assert_int_equal(zs_op_wait(op, 5000), ZS_ESTATE);
	assert_non_null(strstr(zs_trainer_error(t), "open step is 1"));
	/* rank 0 is taken while t holds it */
	{
		char err[256];
		zs_trainer *t2;
		assert_int_equal(zs_trainer_join(C.addr, "stage", 0, "tcp", 5000, &t2, err,
						 sizeof err), ZS_EEXIST);
		assert_null(t2);
	}
	zs_trainer_close(t);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/*
 * The real model: examples/charlm trained by two trainer processes through
 * the servers equals its single-process reference to the bit, over tcp at
 * stage 3 and over shm at stage 1 (the stage changes what a trainer keeps,
 * never the result).
 */
static void charlm_run(const char *name, unsigned stage, const char *transport)
{
	const char *root = getenv("ZSHARD_ROOT");
	char spec_path[1024], d0[1024], d1[1024], dref[1024], log[1024], stage_s[8];
	struct zs_coord_client *c;
	struct zs_job_spec spec;
	struct zs_error err = {0};
	struct zs_job j;
	char *out, *errs;
	pid_t r1;
	int rc;

	snprintf(spec_path, sizeof spec_path, "%s/examples/charlm.json", root ? root : ".");
	assert_int_equal(zs_spec_load(spec_path, &spec, NULL), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&spec, NULL), ZS_OK);
	snprintf(spec.name, sizeof spec.name, "%s", name);
	create_job(&spec);
	zs_job_spec_release(&spec);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	if (zs_coord_set_stage(c, name, stage, &j, &err))
		fail_msg("%s", err.msg);
	zs_job_release(&j);
	zs_coord_close(c);

	snprintf(d0, sizeof d0, "%s/%s-0.bin", C.dir, name);
	snprintf(d1, sizeof d1, "%s/%s-1.bin", C.dir, name);
	snprintf(dref, sizeof dref, "%s/%s-ref.bin", C.dir, name);
	snprintf(log, sizeof log, "%s/%s-rank1.log", C.dir, name);
	snprintf(stage_s, sizeof stage_s, "%u", stage);
	char *a1[] = {(char *)h_bin("charlm"), "--coordinator", C.addr, "--job", (char *)name,
		      "--rank", "1", "--steps", "40", "--transport", (char *)transport,
		      "--print-every", "0", "--dump", d1, NULL};
	r1 = h_spawn(a1, log);
	char *a0[] = {(char *)h_bin("charlm"), "--coordinator", C.addr, "--job", (char *)name,
		      "--rank", "0", "--steps", "40", "--transport", (char *)transport,
		      "--print-every", "0", "--dump", d0, NULL};
	rc = h_run(a0, &out, &errs);
	if (rc)
		fail_msg("charlm rank 0: rc %d: %s", rc, errs);
	free(out);
	free(errs);
	assert_int_equal(h_stop(r1, 0, 60000), 0);
	char *ar[] = {(char *)h_bin("charlm"), "--reference", "--spec", spec_path, "--world",
		      "2", "--steps", "40", "--dump", dref, NULL};
	assert_int_equal(h_run(ar, &out, &errs), 0);
	free(out);
	free(errs);
	char *c0[] = {"cmp", d0, dref, NULL}, *c1[] = {"cmp", d1, dref, NULL};
	if (h_run(c0, &out, &errs) != 0)
		fail_msg("%s: rank 0's parameters differ from the reference: %s", name, out);
	free(out);
	free(errs);
	assert_int_equal(h_run(c1, &out, &errs), 0);
	free(out);
	free(errs);
}

static void test_charlm_equals_reference(void **st)
{
	(void)st;
	charlm_run("charlm-z3-tcp", 3, "tcp");
	charlm_run("charlm-z1-shm", 1, "shm");
}

/*
 * The step driver: what a trainer holds follows the stage and the policy,
 * and training through it still equals the oracle. Units are 4000, 4,
 * 16396 and 256 bytes (f32).
 */
static void driver_run(const char *name, unsigned stage, const struct zs_policy *pol,
		       struct zs_trainer_counters *ctr, struct zs_step_stats *last)
{
	struct zs_job_spec spec;
	zs_trainer *t;
	float *ref[4];

	oracle_spec(&spec, name, 1, ZS_SGD, ZS_F32);
	spec.stage = stage;
	create_job(&spec);
	t = join(name, 0, drv_transport);
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
	oracle_spec(&spec, "lanes", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	t = join("lanes", 0, "tcp");
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
	run("lanes2", 1, "tcp", ZS_ADAMW, ZS_F32, 1);
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
	driver_run("drv1", 1, &pol, &c, &s);
	assert_int_equal(c.peak_param_bytes, total);
	assert_int_equal(c.peak_grad_bytes, total);
	/* the step report: each unit gathered and pushed once per step */
	check_split(&s, 1, 1);
	assert_int_equal(s.bytes_gathered, total);
	assert_int_equal(s.bytes_pushed, total);
	assert_int_equal(s.peak_param_bytes, total);
	assert_int_equal(s.peak_grad_bytes, total);
	check_reported("drv1", &s);
	/* stage 3 under a bound of the largest unit plus the head: never more */
	pol.max_live_bytes = 16396 + 256;
	driver_run("drv3", 3, &pol, &c, &s);
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
	driver_run("drv3k", 3, &pol, &c, &s);
	assert_true(c.peak_param_bytes > 16396 + 256);
	check_split(&s, 3, 2);
	assert_int_equal(s.bytes_gathered, total);
	assert_int_equal(s.peak_param_bytes, planned("drv3k", "--keep-until-backward", "2"));
	/* stage 3 with one unit of prefetch and no bound: the plan's window */
	pol = (struct zs_policy){.prefetch = 1, .reshard_after_forward = 1};
	driver_run("drv3p", 3, &pol, &c, &s);
	assert_int_equal(s.peak_param_bytes, 16396 + 256);
	assert_int_equal(s.peak_param_bytes, planned("drv3p", "--prefetch", "1"));
	/* beside the gradient being written, only the last push started (in
	 * flight or not): never more, whichever push finishes first */
	assert_true(c.peak_grad_bytes <= 16396 + 256);
	/* two in flight: up to three units */
	pol.push_depth = 2;
	driver_run("drv3d", 3, &pol, &c, &s);
	assert_true(c.peak_grad_bytes <= 4000 + 4 + 16396 && c.peak_grad_bytes >= 16396);
}

/*
 * The example trainer resumes by itself: a job that checkpoints every 10
 * steps trains 20, the operator restores the checkpoint of step 10, and
 * the trainers started again with --steps 40 continue from step 10: the
 * result equals the reference's 40 steps, bit for bit.
 */
static void test_charlm_resumes(void **st)
{
	const char *root = getenv("ZSHARD_ROOT");
	char spec_path[1024], d[2][1024], dref[1024], log[1024];
	struct zs_coord_client *c;
	struct zs_job_spec spec;
	struct zs_checkpoint *v;
	uint32_t n;
	uint64_t id10 = 0;
	char *out, *errs;

	(void)st;
	snprintf(spec_path, sizeof spec_path, "%s/examples/charlm.json", root ? root : ".");
	assert_int_equal(zs_spec_load(spec_path, &spec, NULL), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&spec, NULL), ZS_OK);
	snprintf(spec.name, sizeof spec.name, "lmres");
	spec.checkpoint_every = 10;
	create_job(&spec);
	zs_job_spec_release(&spec);
	for (int pass = 0; pass < 2; pass++) {
		const char *steps = pass ? "40" : "20";
		pid_t r1;
		for (int r = 0; r < 2; r++)
			snprintf(d[r], sizeof d[r], "%s/lmres-%d.bin", C.dir, r);
		snprintf(log, sizeof log, "%s/lmres-rank1-%d.log", C.dir, pass);
		char *a1[] = {(char *)h_bin("charlm"), "--coordinator", C.addr, "--job", "lmres",
			      "--rank", "1", "--steps", (char *)steps, "--print-every", "0",
			      "--total", "40", "--dump", d[1], NULL};
		char *a0[] = {(char *)h_bin("charlm"), "--coordinator", C.addr, "--job", "lmres",
			      "--rank", "0", "--steps", (char *)steps, "--print-every", "0",
			      "--total", "40", "--dump", d[0], NULL};
		r1 = h_spawn(a1, log);
		if (h_run(a0, &out, &errs))
			fail_msg("charlm rank 0, pass %d: %s", pass, errs);
		if (pass)
			assert_non_null(strstr(out, "resumes at step 10"));
		free(out);
		free(errs);
		assert_int_equal(h_stop(r1, 0, 60000), 0);
		if (pass)
			break;
		/* the operator restores the checkpoint of step 10 */
		assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
		assert_int_equal(zs_coord_list_ckpts(c, "lmres", &v, &n, NULL), ZS_OK);
		for (uint32_t k = 0; k < n; k++)
			if (v[k].step == 10 && v[k].state == ZS_CKPT_COMMITTED)
				id10 = v[k].id;
		for (uint32_t k = 0; k < n; k++)
			zs_checkpoint_release(&v[k]);
		free(v);
		assert_true(id10 != 0);
		restore(c, "lmres", id10);
		zs_coord_close(c);
	}
	snprintf(dref, sizeof dref, "%s/lmres-ref.bin", C.dir);
	char *ar[] = {(char *)h_bin("charlm"), "--reference", "--spec", spec_path, "--world",
		      "2", "--steps", "40", "--dump", dref, NULL};
	assert_int_equal(h_run(ar, &out, &errs), 0);
	free(out);
	free(errs);
	for (int r = 0; r < 2; r++) {
		char *cm[] = {"cmp", d[r], dref, NULL};
		if (h_run(cm, &out, &errs) != 0)
			fail_msg("rank %d's parameters after resuming differ from the reference: %s",
				 r, out);
		free(out);
		free(errs);
	}
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
	const void *p;
	void *g;
	unsigned U;

	(void)st;
	oracle_spec(&spec, "bad", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	t = join("bad", 0, "tcp");
	upload_init(t);
	assert_int_equal(zs_gather(t, 0, 0, NULL, &op), ZS_EINVAL);
	assert_null(op);
	assert_non_null(strstr(zs_trainer_error(t), "NULL"));
	assert_int_equal(zs_push(t, 0, 0, NULL, &op), ZS_EINVAL);
	assert_int_equal(zs_init_unit(t, 0, NULL), ZS_EINVAL);

	U = zs_trainer_units(t);
	assert_true(U >= 2);
	assert_int_equal(zs_step_begin(t, 0), ZS_OK);
	for (unsigned u = 0; u < U; u++) {
		assert_int_equal(zs_unit_params(t, u, 0, &p), ZS_OK);
		assert_int_equal(zs_unit_forward_done(t, u), ZS_OK);
	}
	for (unsigned u = U; u-- > 1;) { /* unit 0's gradient is left out */
		assert_int_equal(zs_unit_params(t, u, 1, &p), ZS_OK);
		assert_int_equal(zs_unit_grad(t, u, &g), ZS_OK);
		assert_int_equal(zs_unit_push(t, u), ZS_OK);
	}
	assert_int_equal(zs_step_end(t), ZS_ESTATE);
	assert_non_null(strstr(zs_trainer_error(t), "not pushed"));
	assert_non_null(strstr(zs_trainer_error(t), zs_unit_name(t, 0)));
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

/* One step through the step driver (zero gradients). */
static void driver_step(zs_trainer *t, unsigned long long step)
{
	unsigned U = zs_trainer_units(t);
	const void *p;
	void *g;

	assert_int_equal(zs_step_begin(t, step), ZS_OK);
	for (unsigned u = 0; u < U; u++) {
		assert_int_equal(zs_unit_params(t, u, 0, &p), ZS_OK);
		assert_int_equal(zs_unit_forward_done(t, u), ZS_OK);
	}
	for (unsigned u = U; u-- > 0;) {
		assert_int_equal(zs_unit_params(t, u, 1, &p), ZS_OK);
		assert_int_equal(zs_unit_grad(t, u, &g), ZS_OK);
		assert_int_equal(zs_unit_push(t, u), ZS_OK);
	}
	assert_int_equal(zs_step_end(t), ZS_OK);
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
 * coordinator stopped (SIGSTOP), the next step still begins at once (the
 * answer to the report posted at the last boundary came while that step
 * ran); the one after waits for the coordinator, which comes back.
 */
static void test_boundary_without_round_trip(void **st)
{
	struct zs_job_spec spec;
	pthread_t th;
	zs_trainer *t;
	double t0;

	(void)st;
	oracle_spec(&spec, "boundary", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	t = join("boundary", 0, "tcp");
	upload_init(t);
	driver_step(t, 0);
	usleep(300 * 1000); /* the lease thread sends the boundary's report */
	kill(C.coord, SIGSTOP);
	pthread_create(&th, NULL, resume_coordinator, NULL);
	t0 = zs_now_ms();
	driver_step(t, 1);
	{
		double took = zs_now_ms() - t0;
		if (took > 800) {
			pthread_join(th, NULL);
			fail_msg("step 1 took %.0f ms with the coordinator stopped: its boundary waited on it",
				 took);
		}
	}
	driver_step(t, 2); /* waits for the coordinator, back within 1 s */
	pthread_join(th, NULL);
	driver_step(t, 3);
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oracle_through_the_service),
		cmocka_unit_test(test_oracle_over_rdma),
		cmocka_unit_test(test_schedule_and_groups),
		cmocka_unit_test(test_recreated_job),
		cmocka_unit_test(test_stage_and_held_gather),
		cmocka_unit_test(test_charlm_equals_reference),
		cmocka_unit_test(test_step_driver_memory),
		cmocka_unit_test(test_window_ahead_parked),
		cmocka_unit_test(test_tcp_gather_lane),
		cmocka_unit_test(test_charlm_resumes),
		cmocka_unit_test(test_bad_calls),
		cmocka_unit_test(test_boundary_without_round_trip),
	};
	if (argc > 1) /* e.g. test_train '*rdma*' */
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("train", tests, group_setup, group_teardown);
}
