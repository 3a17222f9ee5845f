/*
 * test_collective.c - collective jobs (DESIGN, data plane): trainers in
 * device mode form one communicator through the coordinator, reduce each
 * gradient among themselves and push only their own slice's sum to its
 * server; a gather is the slice from its server and an all-gather. On the
 * emulated device and communicator everywhere, bitwise the reference;
 * through NCCL where two GPUs are (make test-gpu), else skipped with the
 * reason.
 */
#include "tests/integration/dev_common.h"

#include "gpu/coll.h"

/* One rank of a communicator formed through the coordinator. */
struct comm_rank {
	int device; /* ZS_DEV_EMULATED or a CUDA ordinal */
	const char *job;
	uint64_t timeline;
	int rank, nranks;
	int rc;
	char why[512];
};

static void *comm_rank_main(void *arg)
{
	struct comm_rank *x = arg;
	struct zs_coord_client *c = NULL;
	struct zs_dev *d = NULL;
	struct zs_coll *k = NULL;
	struct zs_error err = {0};
	uint8_t id[ZS_COLL_ID_BYTES];
	const size_t n = 1000; /* bytes per rank: odd on purpose */
	uint8_t *send = NULL, *recv = NULL, *h = NULL;
	size_t all = n * (size_t)x->nranks;
	char why[256] = "";

	x->rc = -1;
	if (zs_coord_open(C.addr, 5000, 0, &c, &err)) {
		snprintf(x->why, sizeof x->why, "coordinator: %.400s", err.msg);
		goto out;
	}
	if (zs_dev_open(x->device, &d, why, sizeof why)) {
		snprintf(x->why, sizeof x->why, "device: %s", why);
		goto out;
	}
	if (x->rank == 0) {
		uint8_t back[ZS_COLL_ID_BYTES];
		if (zs_coll_new_id(d, id, why, sizeof why) ||
		    zs_coord_comm_id(c, x->job, x->timeline, 0, id, back, &err) ||
		    memcmp(id, back, sizeof id)) {
			snprintf(x->why, sizeof x->why, "offer: %.200s%.200s", why, err.msg);
			goto out;
		}
	} else {
		int64_t until = zs_now_ms() + 10000;
		enum zs_status st;
		while ((st = zs_coord_comm_id(c, x->job, x->timeline, (uint32_t)x->rank, NULL, id,
					      &err)) == ZS_EAGAIN &&
		       zs_now_ms() < until)
			usleep(20000);
		if (st) {
			snprintf(x->why, sizeof x->why, "ask: %.400s", err.msg);
			goto out;
		}
	}
	if (zs_coll_open(d, id, x->nranks, x->rank, 10000, &k, why, sizeof why)) {
		snprintf(x->why, sizeof x->why, "open: %s", why);
		goto out;
	}
	send = zs_dev_alloc(d, all);
	recv = zs_dev_alloc(d, all);
	h = malloc(all);
	/* every rank's send: byte i of the piece for rank q is f(me, q, i) */
	for (size_t i = 0; i < all; i++)
		h[i] = (uint8_t)(x->rank * 31 + (int)(i / n) * 7 + (int)(i % n % 251));
	if (!send || !recv || !h || zs_dev_copy_sync(d, send, h, all, ZS_DEV_H2D)) {
		snprintf(x->why, sizeof x->why, "buffers: %s", zs_dev_error(d));
		goto out;
	}
	/* all-to-all: piece r of recv is rank r's piece for me */
	if (zs_coll_all_to_all(k, send, recv, n, NULL) || zs_dev_stream_sync(d, NULL) ||
	    zs_dev_copy_sync(d, h, recv, all, ZS_DEV_D2H)) {
		snprintf(x->why, sizeof x->why, "all-to-all: %s", zs_coll_error(k));
		goto out;
	}
	for (size_t i = 0; i < all; i++)
		if (h[i] != (uint8_t)((int)(i / n) * 31 + x->rank * 7 + (int)(i % n % 251))) {
			snprintf(x->why, sizeof x->why, "all-to-all: byte %zu is wrong", i);
			goto out;
		}
	/* all-gather in place: my piece is (me, i); afterwards piece r is r's */
	for (size_t i = 0; i < n; i++)
		h[i] = (uint8_t)(x->rank * 13 + (int)(i % 241));
	if (zs_dev_copy_sync(d, recv + (size_t)x->rank * n, h, n, ZS_DEV_H2D) ||
	    zs_coll_all_gather(k, recv + (size_t)x->rank * n, recv, n, NULL) ||
	    zs_dev_stream_sync(d, NULL) || zs_dev_copy_sync(d, h, recv, all, ZS_DEV_D2H)) {
		snprintf(x->why, sizeof x->why, "all-gather: %s", zs_coll_error(k));
		goto out;
	}
	for (size_t i = 0; i < all; i++)
		if (h[i] != (uint8_t)((int)(i / n) * 13 + (int)(i % n % 241))) {
			snprintf(x->why, sizeof x->why, "all-gather: byte %zu is wrong", i);
			goto out;
		}
	x->rc = 0;
out:
	free(h);
	if (d) {
		zs_dev_free(d, send);
		zs_dev_free(d, recv);
	}
	zs_coll_close(k);
	zs_dev_close(d);
	zs_coord_close(c);
	return NULL;
}

/* Forms a communicator of R ranks on device through the coordinator. */
static void comm_run(const char *name, int R, int device)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_job j;
	struct comm_rank x[4];
	pthread_t th[4];

	oracle_spec(&spec, name, (uint32_t)R, ZS_SGD, ZS_F32);
	create_job(&spec);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, name, &j, NULL), ZS_OK);
	for (int r = 0; r < R; r++) {
		x[r] = (struct comm_rank){.device = device == ZS_DEV_EMULATED ? device : device + r,
					  .job = name, .timeline = j.timeline,
					  .rank = r, .nranks = R};
		pthread_create(&th[r], NULL, comm_rank_main, &x[r]);
	}
	for (int r = 0; r < R; r++)
		pthread_join(th[r], NULL);
	for (int r = 0; r < R; r++)
		if (x[r].rc)
			fail_msg("%s rank %d: %s", name, r, x[r].why);
	zs_job_release(&j);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/*
 * The trainers' communicator: its id handed out through the coordinator
 * (rank 0 offers, the others ask; refusals say why), an all-to-all and an
 * in-place all-gather among 3 ranks on the emulated device; NCCL where two
 * GPUs are.
 */
static void test_communicator(void **st)
{
	struct zs_coord_client *c;
	struct zs_error err = {0};
	struct zs_job j;
	uint8_t id[ZS_COLL_ID_BYTES] = {1}, other[ZS_COLL_ID_BYTES] = {2}, out[ZS_COLL_ID_BYTES];

	(void)st;
	comm_run("comm3", 3, ZS_DEV_EMULATED);
	/* refusals, and nothing kept from them */
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, "comm3", &j, NULL), ZS_OK);
	assert_int_equal(zs_coord_comm_id(c, "nojob", 1, 0, id, out, &err), ZS_ENOTFOUND);
	assert_int_equal(zs_coord_comm_id(c, "comm3", j.timeline + 1, 0, id, out, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "rolled back"));
	assert_int_equal(zs_coord_comm_id(c, "comm3", j.timeline, 1, id, out, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "rank 0 makes it"));
	assert_int_equal(zs_coord_comm_id(c, "comm3", j.timeline, 0, other, out, &err), ZS_EEXIST);
	zs_job_release(&j);
	zs_coord_close(c);
}

/*
 * A collective job: the trainers reduce among themselves (an all-to-all of
 * each gradient's slices, each rank adding the pieces of its own slice in
 * rank order) and each pushes only its slice's sum, to its slice's server;
 * a gather is each rank's slice from its server and an all-gather. On the
 * emulated device and communicator: bitwise the reference, R = 2 and 3,
 * stages 3 and 1, tcp and shm, f32 and bf16.
 */
static const uint64_t coll_sizes[] = {1000, 7, 4099, 64};

static void test_collective(void **st)
{
	(void)st;
	dev_run_sizes("cl3", 2, "tcp", 3, ZS_F32, ZS_DEVICE_EMULATED, true, 1, coll_sizes, 4, true,
		      NULL);
	dev_run_sizes("cl1", 3, "shm", 1, ZS_BF16, ZS_DEVICE_EMULATED, true, 2, coll_sizes, 4, true,
		      NULL);
	dev_run_sizes("cl2", 3, "tcp", 2, ZS_BF16, ZS_DEVICE_EMULATED, false, 1, coll_sizes, 4,
		      true, NULL);
}

/* One phase of a collective rank on the emulated device, the calling
 * thread its compute stream: steps [t0, t1), after resuming if asked. */
struct phase {
	zs_trainer *t;
	uint64_t t0, t1;
	bool resume;
	int rc;
	char why[512];
};

static void *phase_main(void *arg)
{
	struct phase *x = arg;
	zs_trainer *t = x->t;
	unsigned U = zs_trainer_units(t), rank = zs_trainer_rank(t);

	if (x->resume) {
		unsigned long long at;
		unsigned len;
		if ((x->rc = zs_trainer_resume(t, &at, NULL, 0, &len))) {
			snprintf(x->why, sizeof x->why, "resume: %.400s", zs_trainer_error(t));
			return NULL;
		}
		if (at != x->t0) {
			x->rc = -1;
			snprintf(x->why, sizeof x->why, "resumed at step %llu, not %llu", at,
				 (unsigned long long)x->t0);
			return NULL;
		}
	}
	for (uint64_t step = x->t0; step < x->t1; step++) {
		const void *p;
		void *g;
		if ((x->rc = zs_step_begin(t, step)))
			goto fail;
		for (unsigned u = 0; u < U; u++)
			if ((x->rc = zs_unit_params(t, u, 0, &p)) ||
			    (x->rc = zs_unit_forward_done(t, u)))
				goto fail;
		for (int u = (int)U - 1; u >= 0; u--) {
			unsigned long long n = zs_unit_numel(t, (unsigned)u);
			enum zs_dtype dt = (enum zs_dtype)zs_unit_dtype(t, (unsigned)u);
			float *pf = malloc(n * 4);
			if ((x->rc = zs_unit_params(t, (unsigned)u, 1, &p)) ||
			    (x->rc = zs_unit_grad(t, (unsigned)u, &g))) {
				free(pf);
				goto fail;
			}
			/* the emulated device's memory is the host's */
			zs_convert_to_f32(pf, p, dt, n);
			for (unsigned long long i = 0; i < n; i++)
				pf[i] = oracle_grad(pf[i], (uint32_t)u, i, rank, step);
			zs_convert_from_f32(g, dt, pf, n);
			free(pf);
			if ((x->rc = zs_unit_push(t, (unsigned)u)))
				goto fail;
		}
		if ((x->rc = zs_step_end(t)))
			goto fail;
	}
	return NULL;
fail:
	snprintf(x->why, sizeof x->why, "%.400s", zs_trainer_error(t));
	return NULL;
}

static void phases(struct phase *x, uint32_t R, uint64_t t0, uint64_t t1, bool resume)
{
	pthread_t th[3];
	for (uint32_t r = 0; r < R; r++) {
		x[r].t0 = t0;
		x[r].t1 = t1;
		x[r].resume = resume;
		pthread_create(&th[r], NULL, phase_main, &x[r]);
	}
	for (uint32_t r = 0; r < R; r++)
		pthread_join(th[r], NULL);
	for (uint32_t r = 0; r < R; r++)
		if (x[r].rc)
			fail_msg("rank %u, steps %llu..%llu: %s", r, (unsigned long long)t0,
				 (unsigned long long)t1, x[r].why);
}

/*
 * A collective job rolled back: a checkpoint at step 2, a step trained past
 * it, the checkpoint restored; every rank resumes on the new timeline, the
 * communicator is formed again, and training ends bitwise the reference.
 */
static void test_collective_restore(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_job placed;
	struct phase x[3];
	unsigned long long id;
	const uint32_t R = 3;

	(void)st;
	oracle_spec_sizes(&spec, "clrs", R, ZS_ADAMW, ZS_BF16, coll_sizes, 4);
	spec.collective = true;
	create_job(&spec);
	for (uint32_t r = 0; r < R; r++) {
		x[r] = (struct phase){.t = join("clrs", r, r == 1 ? "shm" : "tcp")};
		assert_int_equal(zs_trainer_set_device(x[r].t, ZS_DEVICE_EMULATED, NULL), ZS_OK);
	}
	upload_init(x[0].t);
	phases(x, R, 0, 2, false);
	assert_int_equal(zs_checkpoint(x[0].t, 2, NULL, 0, &id), ZS_OK);
	assert_int_equal(zs_checkpoint_wait(x[0].t, id, 20000), ZS_OK);
	phases(x, R, 2, 3, false); /* to be undone */
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, "clrs", &placed, NULL), ZS_OK);
	uint64_t before = placed.timeline;
	zs_job_release(&placed);
	restore(c, "clrs", id);
	phases(x, R, 2, STEPS, true);
	assert_int_equal(zs_coord_get_job(c, "clrs", &placed, NULL), ZS_OK);
	{ /* the communicator was formed again, for the new timeline */
		uint8_t cid[128];
		struct zs_error err = {0};
		assert_true(placed.timeline != before);
		if (zs_coord_comm_id(c, "clrs", placed.timeline, 1, NULL, cid, &err))
			fail_msg("no communicator for timeline %llu: %s",
				 (unsigned long long)placed.timeline, err.msg);
	}
	check_reference(x[0].t, &spec, &placed.placement, 1, 0, "clrs (collective, restored)");
	zs_job_release(&placed);
	zs_coord_close(c);
	for (uint32_t r = 0; r < R; r++)
		zs_trainer_close(x[r].t);
	zs_job_spec_release(&spec);
}

/* A collective rank that stops after its forward pass. */
static void *forward_only(void *arg)
{
	struct phase *x = arg;
	const void *p;
	if ((x->rc = zs_step_begin(x->t, 0)))
		return NULL;
	for (unsigned u = 0; u < zs_trainer_units(x->t) && !x->rc; u++)
		x->rc = zs_unit_params(x->t, u, 0, &p);
	return NULL;
}

/*
 * A rank that stops taking part: the other's next collective (the push's
 * all-to-all) fails within the communicator's bound (the join's timeout),
 * naming what it waited for, instead of waiting forever.
 */
static void test_collective_rank_gone(void **st)
{
	struct zs_job_spec spec;
	struct phase x[2];
	pthread_t th[2];
	char err[512];

	(void)st;
	oracle_spec_sizes(&spec, "clgone", 2, ZS_SGD, ZS_F32, coll_sizes, 4);
	spec.collective = true;
	create_job(&spec);
	for (unsigned r = 0; r < 2; r++) {
		x[r] = (struct phase){.t0 = 0, .t1 = 1};
		if (zs_trainer_join(C.addr, "clgone", r, "tcp", 2000, &x[r].t, err, sizeof err))
			fail_msg("join: %s", err);
		assert_int_equal(zs_trainer_set_device(x[r].t, ZS_DEVICE_EMULATED, NULL), ZS_OK);
	}
	upload_init(x[0].t);
	int64_t t0 = zs_now_ms();
	pthread_create(&th[0], NULL, phase_main, &x[0]);
	pthread_create(&th[1], NULL, forward_only, &x[1]);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	assert_int_equal(x[1].rc, ZS_OK);
	if (x[0].rc != ZS_ETIMEDOUT || !strstr(x[0].why, "all-to-all"))
		fail_msg("rank 0: %d: %s", x[0].rc, x[0].why);
	assert_true(zs_now_ms() - t0 < 10000);
	printf("test_collective_rank_gone: rank 0 after %lld ms: %s\n",
	       (long long)(zs_now_ms() - t0), x[0].why);
	for (unsigned r = 0; r < 2; r++)
		zs_trainer_close(x[r].t);
	zs_job_spec_release(&spec);
}

/* What a collective job refuses, each with its reason. */
static void test_collective_refusals(void **st)
{
	static const uint64_t small[] = {1000, 2};
	struct zs_job_spec spec;
	struct zs_error err = {0};
	zs_trainer *t;
	zs_op *op;
	float g[1000] = {0};

	(void)st;
	oracle_spec_sizes(&spec, "clbad", 3, ZS_SGD, ZS_F32, small, 2);
	spec.collective = true;
	assert_int_equal(zs_job_spec_normalize(&spec, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "cannot be cut into 3 slices"));
	zs_job_spec_release(&spec);
	oracle_spec_sizes(&spec, "clone", 1, ZS_SGD, ZS_F32, small, 2);
	spec.collective = true;
	assert_int_equal(zs_job_spec_normalize(&spec, &err), ZS_EINVAL);
	zs_job_spec_release(&spec);

	oracle_spec_sizes(&spec, "clref", 2, ZS_SGD, ZS_F32, coll_sizes, 4);
	spec.collective = true;
	create_job(&spec);
	t = join("clref", 0, "tcp");
	upload_init(t);
	/* outside device mode */
	assert_int_equal(zs_step_begin(t, 0), ZS_ESTATE);
	assert_non_null(strstr(zs_trainer_error(t), "device mode"));
	/* a plain push: not the slice's f32 sum */
	assert_int_equal(zs_push(t, 0, 0, g, &op), ZS_OK);
	assert_int_equal(zs_op_wait(op, 5000), ZS_EINVAL);
	assert_non_null(strstr(zs_trainer_error(t), "is collective"));
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

/*
 * rank_hosts: rank r's slices on a server of its host. Here every server is
 * on this host: the job places and trains bitwise; a host with no server
 * is refused at creation, naming it.
 */
static void test_collective_hosts(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_error err = {0};
	struct zs_job j;
	struct phase x[2];
	char me[ZS_HOST_NAME] = "";

	(void)st;
	gethostname(me, sizeof me - 1);
	oracle_spec_sizes(&spec, "clhost", 2, ZS_ADAMW, ZS_F32, coll_sizes, 4);
	spec.collective = true;
	spec.rank_hosts = calloc(2, sizeof *spec.rank_hosts);
	spec.n_rank_hosts = 2;
	snprintf(spec.rank_hosts[0], ZS_HOST_NAME, "%s", me);
	snprintf(spec.rank_hosts[1], ZS_HOST_NAME, "no-such-host");
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_create_job(c, &spec, &j, &err), ZS_ENOSPC);
	assert_non_null(strstr(err.msg, "rank 1 runs on host 'no-such-host'"));
	snprintf(spec.rank_hosts[1], ZS_HOST_NAME, "%s", me);
	create_job(&spec);
	for (uint32_t r = 0; r < 2; r++) {
		x[r] = (struct phase){.t = join("clhost", r, "shm")};
		assert_int_equal(zs_trainer_set_device(x[r].t, ZS_DEVICE_EMULATED, NULL), ZS_OK);
	}
	upload_init(x[0].t);
	phases(x, 2, 0, STEPS, false);
	assert_int_equal(zs_coord_get_job(c, "clhost", &j, NULL), ZS_OK);
	assert_int_equal(j.spec.n_rank_hosts, 2);
	assert_string_equal(j.spec.rank_hosts[1], me);
	check_reference(x[0].t, &spec, &j.placement, 1, 0, "clhost (collective, by host)");
	zs_job_release(&j);
	zs_coord_close(c);
	for (uint32_t r = 0; r < 2; r++)
		zs_trainer_close(x[r].t);
	zs_job_spec_release(&spec);
}

/* The same through NCCL, rank r on GPU r, where two GPUs are. */
static void test_nccl(void **st)
{
	struct zs_dev *d;
	char why[256];

	(void)st;
	if (zs_dev_open(1, &d, why, sizeof why)) {
		printf("test_nccl: skipped: NCCL needs two GPUs: %s\n", why);
		skip();
	}
	zs_dev_close(d);
	comm_run("commnccl", 2, 0);
	/* and a collective job trained through NCCL, rank r on GPU r */
	dev_run_sizes("clnccl", 2, "tcp", 3, ZS_BF16, 0, true, 1, coll_sizes, 4, true, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_communicator),
		cmocka_unit_test(test_nccl),
		cmocka_unit_test(test_collective),
		cmocka_unit_test(test_collective_refusals),
		cmocka_unit_test(test_collective_restore),
		cmocka_unit_test(test_collective_rank_gone),
		cmocka_unit_test(test_collective_hosts),
	};
	/* small chunks: every copy is cut, at odd boundaries */
	setenv("ZSHARD_COPY_CHUNK", "1000", 1);
	return cmocka_run_group_tests_name("collective", tests, group_setup, group_teardown);
}
