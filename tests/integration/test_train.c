/*
 * test_train.c - training through the whole service: jobs created through
 * the coordinator, R trainers that gather, compute the oracle's synthetic
 * gradient and push for several steps. The parameters they then gather
 * must equal the single-process reference to the bit, for R in {1, 2, 3},
 * tcp and shm (and rdma under make test-rdma), SGD and AdamW, f32 and
 * bf16. Also: an operator's stage change reaches trainers at their next
 * refresh, a trainer that asks for a step that is not there yet is held,
 * then served, and the example trainer equals the reference and resumes;
 * clipping survives a coordinator that forgets a step it answered.
 * The step driver's own tests are test_driver.c's.
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

/* Reader r's version: every tensor as f32 into a (room for n floats),
 * its CRC32Cs into crc; the floats read. */
static size_t read_version(zs_reader *r, float *a, size_t n, unsigned *crc)
{
	size_t at = 0;

	for (unsigned i = 0; i < zs_reader_tensors(r); i++) {
		const char *name;
		unsigned long long numel;
		int dt;
		if (zs_reader_tensor(r, i, &name, &dt, NULL, NULL, 0, &numel) || at + numel > n)
			fail_msg("tensor %u: %s", i, zs_reader_error(r));
		if (zs_reader_read(r, name, ZS_F32, a + at, (n - at) * 4, &crc[i]))
			fail_msg("read '%s': %s", name, zs_reader_error(r));
		at += numel;
	}
	return at;
}

/*
 * Weight readers relaying over rdma: a trainer trains a few steps (over
 * tcp: the relay is the first in the process to use the device); a
 * reader reads the last version from the servers and relays it; a
 * second reader of that version gets every byte from the first by RDMA
 * READ of its relay's registered arena, the same bits and CRC32Cs.
 * make test-rdma runs it on Soft-RoCE; without an RDMA device it says why
 * and skips (test_reader.py relays over tcp).
 */
static void test_relay_over_rdma(void **st)
{
	enum { ROOM = 1 << 16 };
	struct zs_job_spec spec;
	struct rank_ctx x[1] = {{0}};
	struct zs_reader_stats sa, sb;
	zs_reader *a = NULL, *b = NULL;
	unsigned long long pinned;
	unsigned ca[64], cb[64];
	float *va = calloc(ROOM, 4), *vb = calloc(ROOM, 4);
	char note[256], err[512];
	size_t na, nb;

	(void)st;
	if (zs_rdma_probe(0, note, sizeof note)) {
		printf("test_relay_over_rdma: skipped: %s (make test-rdma runs it on Soft-RoCE)\n",
		       note);
		free(va);
		free(vb);
		skip();
	}
	oracle_spec(&spec, "rly", 1, ZS_SGD, ZS_BF16);
	spec.reader_pins = 2;
	create_job(&spec);
	x[0].t = join("rly", 0, "tcp"); /* the relay the first to use the device */
	upload_init(x[0].t);
	train_ranks(x, 1, 0, STEPS);
	if (x[0].rc)
		fail_msg("training: %s", x[0].why);
	if (zs_reader_open(C.addr, "rly", 30000, &a, err, sizeof err) ||
	    zs_reader_open(C.addr, "rly", 30000, &b, err, sizeof err))
		fail_msg("open a reader: %s", err);
	assert_true(zs_reader_tensors(a) <= 64);
	if (zs_reader_relay(a, "127.0.0.1:0", 2) || zs_reader_pin(a, STEPS, &pinned))
		fail_msg("the first reader: %s", zs_reader_error(a));
	na = read_version(a, va, ROOM, ca);
	if (zs_reader_relay(b, "127.0.0.1:0", 2) || zs_reader_pin(b, STEPS, &pinned))
		fail_msg("the second reader: %s", zs_reader_error(b));
	nb = read_version(b, vb, ROOM, cb);
	zs_reader_stats(a, &sa);
	zs_reader_stats(b, &sb);
	printf("test_relay_over_rdma: on %s: %llu bytes from the servers, %llu relayed (%llu by rdma)\n",
	       note, sb.bytes_from_servers, sb.bytes_from_relay, sb.bytes_from_relay_rdma);
	assert_int_equal(na, nb);
	assert_memory_equal(va, vb, na * 4);
	assert_memory_equal(ca, cb, zs_reader_tensors(a) * sizeof *ca);
	assert_int_equal(sb.parent, sa.id);
	assert_int_equal(sb.bytes_from_servers, 0);
	assert_true(sb.bytes_from_relay > 0);
	assert_int_equal(sb.bytes_from_relay_rdma, sb.bytes_from_relay);
	assert_int_equal(sa.bytes_served, sb.bytes_from_relay);
	zs_reader_close(b);
	zs_reader_close(a);
	zs_trainer_close(x[0].t);
	free(va);
	free(vb);
}

/*
 * The oracle over rdma: stage 3, 2 trainers, every byte of every gather and
 * push by RDMA READ and WRITE between the trainers' buffers and the servers'
 * registered arenas; the parameters equal the single-process reference bit
 * for bit. make test-rdma runs it on Soft-RoCE in a qemu guest; without an
 * RDMA device it says why and skips (not a pass).
 */
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
	/* frozen shards: their step marks are RDMA writes of one element */
	train_oracle("rd5", 2, "rdma", ZS_ADAMW, ZS_BF16, 3, 0.5, 2);
	{ /* the step driver, its buffers registered once */
		struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1};
		struct zs_trainer_counters c;
		struct zs_step_stats s;
		driver_run("rd3", 3, "rdma", &pol, &c, &s);
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

/* Starts the coordinator again at its address, with ZSHARD_FAULT=fault
 * (NULL: none), and waits for the servers to be up with it. */
static void restart_coordinator(const char *fault)
{
	char addr[64];

	assert_int_equal(h_stop(C.coord, SIGTERM, 10000), 0);
	snprintf(addr, sizeof addr, "%s", C.addr);
	if (fault)
		setenv("ZSHARD_FAULT", fault, 1);
	assert_int_equal(start_coordinator(addr), 0);
	unsetenv("ZSHARD_FAULT");
	assert_int_equal(wait_servers_up(), 0);
}

/*
 * A coordinator that answers a clipped step's total to one server and then
 * forgets the step (as one that dies, or loses the lead, between its
 * answers): the others send their norms again and wait; the heartbeat asks
 * the answered server for its norms, which it sends again, settled. The
 * step is applied once everywhere, with one total: the parameters equal
 * the reference's to the bit. (Without the settled report the others wait
 * out the step timeout and the job rolls back.)
 */
static void test_clip_after_a_lost_answer(void **st)
{
	char log[1024];

	(void)st;
	restart_coordinator("coord-norm-forget");
	run_clip("forget", 2, "tcp", ZS_ADAMW, ZS_F32, 1, 0.5);
	snprintf(log, sizeof log, "%s/coordinator.log", C.dir);
	/* the fault struck, and the answered server's norms came again */
	assert_true(text_in_file(log, "fault coord-norm-forget"));
	assert_true(text_in_file(log, "its norms join the exchange"));
	restart_coordinator(NULL);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oracle_through_the_service),
		cmocka_unit_test(test_oracle_over_rdma),
		cmocka_unit_test(test_relay_over_rdma),
		cmocka_unit_test(test_schedule_and_groups),
		cmocka_unit_test(test_recreated_job),
		cmocka_unit_test(test_stage_and_held_gather),
		cmocka_unit_test(test_charlm_equals_reference),
		cmocka_unit_test(test_charlm_resumes),
		cmocka_unit_test(test_clip_after_a_lost_answer),
	};
	if (argc > 1) /* e.g. test_train '*rdma*' */
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("train", tests, group_setup, group_teardown);
}
