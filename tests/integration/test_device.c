/*
 * test_device.c - the step driver's device mode (zs_trainer_set_device):
 * trainers whose unit buffers are device memory train the oracle through
 * the real service, bitwise equal to the single-process reference.
 *
 * The trainers' "kernels" are copies queued on their compute stream: the
 * forward reads each unit's parameters back, the backward reads them,
 * computes the oracle's gradient on the host and writes it into the
 * driver's device buffer, all without waiting, so the driver's own waits
 * (the compute stream on each gather's copy; the copy stream on the
 * gradient's writes; buffers reused after their last reader) are what keep
 * the bytes right. On the emulated device every stream is a thread that
 * runs each copy after a random delay, and copies are cut into 1000-byte
 * chunks ($ZSHARD_COPY_CHUNK), so a missing wait or a chunk put in the
 * wrong place shows as wrong bits. Where a CUDA device is (make test-gpu),
 * the same runs on it; elsewhere that case is skipped with the reason.
 */
#include "tests/integration/train_common.h"

#include "gpu/coll.h"
#include "gpu/dev.h"

#define MAXU 8
#define BUSY (4u << 20)

struct dev_rank {
	zs_trainer *t;
	int device;        /* for zs_trainer_set_device */
	bool own_stream;   /* a compute stream of its own (else NULL) */
	struct zs_policy pol;
	int rc;
	char why[512];
	unsigned long long peak_params;
	struct zs_dev *dev; /* the rank's own handle on the device, and */
	zs_dev_stream s;    /* its compute stream: closed after the trainer */
};

#define FAIL(x, ...) \
	do { \
		if (!(x)->rc) \
			(x)->rc = -1; \
		snprintf((x)->why, sizeof (x)->why, __VA_ARGS__); \
		goto out; \
	} while (0)

/* One rank's steps, its kernels queued on its compute stream. */
static void *dev_train(void *arg)
{
	struct dev_rank *x = arg;
	zs_trainer *t = x->t;
	unsigned U = zs_trainer_units(t), rank = zs_trainer_rank(t);
	struct zs_dev *dev = NULL;
	zs_dev_stream s = NULL;
	void *fwd[MAXU] = {0}, *bwd[MAXU] = {0}, *gh[MAXU] = {0};
	void *busy_d = NULL, *busy_h = NULL;
	char why[256];

	if (zs_dev_open(x->device, &dev, why, sizeof why)) /* the same numbers */
		FAIL(x, "open: %s", why);
	if (x->own_stream && zs_dev_stream_create(dev, &s))
		FAIL(x, "stream: %s", zs_dev_error(dev));
	if ((x->rc = zs_trainer_set_device(t, x->device, s)) ||
	    (x->rc = zs_trainer_set_policy(t, &x->pol)))
		FAIL(x, "set_device: %s", zs_trainer_error(t));
	/* a "kernel" that keeps the stream busy for a while (a 4 MiB copy) */
	if (!(busy_d = zs_dev_alloc(dev, BUSY)) || !(busy_h = zs_dev_host_alloc(dev, BUSY)))
		FAIL(x, "busy buffers: %s", zs_dev_error(dev));
	for (unsigned u = 0; u < U; u++) {
		size_t b = zs_unit_numel(t, u) * (zs_unit_dtype(t, u) == ZS_F32 ? 4 : 2);
		fwd[u] = malloc(b);
		bwd[u] = malloc(b);
		gh[u] = malloc(b);
	}
	for (uint64_t step = 0; step < STEPS; step++) {
		const void *p;
		void *g;
		if ((x->rc = zs_step_begin(t, step)))
			FAIL(x, "step_begin: %s", zs_trainer_error(t));
		/* forward: each unit's parameters read by a "kernel" that runs
		 * whenever the stream gets to it, after the driver let go */
		for (unsigned u = 0; u < U; u++) {
			size_t b = zs_unit_numel(t, u) * (zs_unit_dtype(t, u) == ZS_F32 ? 4 : 2);
			if ((x->rc = zs_unit_params(t, u, 0, &p)))
				FAIL(x, "params: %s", zs_trainer_error(t));
			if (zs_dev_copy(dev, busy_h, busy_d, BUSY, ZS_DEV_D2H, s) ||
			    zs_dev_copy(dev, fwd[u], p, b, ZS_DEV_D2H, s))
				FAIL(x, "read: %s", zs_dev_error(dev));
			if ((x->rc = zs_unit_forward_done(t, u)))
				FAIL(x, "forward_done: %s", zs_trainer_error(t));
		}
		for (int u = (int)U - 1; u >= 0; u--) {
			unsigned long long n = zs_unit_numel(t, (unsigned)u);
			enum zs_dtype dt = (enum zs_dtype)zs_unit_dtype(t, (unsigned)u);
			size_t b = n * zs_dtype_size(dt);
			float *pf = malloc(n * 4);
			if ((x->rc = zs_unit_params(t, (unsigned)u, 1, &p)))
				FAIL(x, "params: %s", zs_trainer_error(t));
			if (zs_dev_copy(dev, bwd[u], p, b, ZS_DEV_D2H, s) || zs_dev_stream_sync(dev, s))
				FAIL(x, "read: %s", zs_dev_error(dev));
			/* the forward saw the same parameters as the backward */
			if (memcmp(fwd[u], bwd[u], b))
				FAIL(x, "step %llu unit %d: the forward read other parameters than the backward",
				     (unsigned long long)step, u);
			zs_convert_to_f32(pf, bwd[u], dt, n);
			for (unsigned long long i = 0; i < n; i++)
				pf[i] = oracle_grad(pf[i], (uint32_t)u, i, rank, step);
			/* the last write into gh[u] must be copied before this
			 * step's write: the host buffer is the test's */
			if (zs_dev_stream_sync(dev, s))
				FAIL(x, "sync: %s", zs_dev_error(dev));
			zs_convert_from_f32(gh[u], dt, pf, n);
			free(pf);
			if ((x->rc = zs_unit_grad(t, (unsigned)u, &g)))
				FAIL(x, "grad: %s", zs_trainer_error(t));
			if (zs_dev_copy(dev, busy_h, busy_d, BUSY, ZS_DEV_D2H, s) ||
			    zs_dev_copy(dev, g, gh[u], b, ZS_DEV_H2D, s))
				FAIL(x, "write: %s", zs_dev_error(dev));
			if ((x->rc = zs_unit_push(t, (unsigned)u)))
				FAIL(x, "push: %s", zs_trainer_error(t));
		}
		if ((x->rc = zs_step_end(t)))
			FAIL(x, "step_end: %s", zs_trainer_error(t));
		{
			struct zs_step_stats st;
			zs_last_step(t, &st);
			x->peak_params = st.peak_param_bytes;
		}
	}
out:
	if (dev && s)
		zs_dev_stream_sync(dev, s);
	if (dev) {
		zs_dev_free(dev, busy_d);
		zs_dev_host_free(dev, busy_h);
	}
	for (unsigned u = 0; u < MAXU; u++) {
		free(fwd[u]);
		free(bwd[u]);
		free(gh[u]);
	}
	/* the trainer uses s until it leaves device mode (at its close) */
	x->dev = dev;
	x->s = s;
	return NULL;
}

/* Trains the oracle job name with R device-mode ranks over transport and
 * checks it bitwise. */
static void dev_run_sizes(const char *name, uint32_t R, const char *transport, unsigned stage,
			  enum zs_dtype dt, int device, bool own_stream, unsigned prefetch,
			  const uint64_t *sizes, uint32_t U, bool collective,
			  unsigned long long *peak)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_job placed;
	struct dev_rank x[3];
	pthread_t th[3];

	oracle_spec_sizes(&spec, name, R, ZS_ADAMW, dt, sizes, U);
	spec.stage = stage;
	spec.collective = collective;
	if (collective && zs_job_spec_normalize(&spec, NULL))
		fail_msg("%s: not a valid collective job", name);
	create_job(&spec);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, name, &placed, NULL), ZS_OK);
	zs_coord_close(c);
	for (uint32_t r = 0; r < R; r++)
		/* a collective job on CUDA: rank r on GPU r (NCCL wants one each) */
		x[r] = (struct dev_rank){.t = join(name, r, transport),
					 .device = collective && device >= 0 ? device + (int)r : device,
					 .own_stream = own_stream,
					 .pol = {.prefetch = prefetch, .reshard_after_forward = 1}};
	upload_init(x[0].t);
	for (uint32_t r = 0; r < R; r++)
		pthread_create(&th[r], NULL, dev_train, &x[r]);
	for (uint32_t r = 0; r < R; r++)
		pthread_join(th[r], NULL);
	for (uint32_t r = 0; r < R; r++)
		if (x[r].rc)
			fail_msg("%s rank %u (%s, stage %u): %s", name, r, transport, stage, x[r].why);
	/* (a failure leaves the trainers to the process's exit: the cluster
	 * is torn down by the group's teardown all the same) */
	{
		char what[256];
		snprintf(what, sizeof what, "%s (R=%u %s stage %u %s)", name, R, transport, stage,
			 zs_dtype_name(dt));
		check_reference(x[R - 1].t, &spec, &placed.placement, 1, 0, what);
	}
	zs_job_release(&placed);
	if (peak)
		*peak = x[0].peak_params;
	for (uint32_t r = 0; r < R; r++) {
		zs_trainer_close(x[r].t);
		if (x[r].dev) {
			zs_dev_stream_destroy(x[r].dev, x[r].s);
			zs_dev_close(x[r].dev);
		}
	}
	zs_job_spec_release(&spec);
}

/* The oracle's units: 4000, 4, 16396 and 256 bytes in f32. */
static void dev_run(const char *name, uint32_t R, const char *transport, unsigned stage,
		    enum zs_dtype dt, int device, bool own_stream, unsigned prefetch,
		    unsigned long long *peak)
{
	static const uint64_t sizes[] = {1000, 1, 4099, 64};
	dev_run_sizes(name, R, transport, stage, dt, device, own_stream, prefetch, sizes, 4, false,
		      peak);
}

/* Units of one size: every buffer the driver frees is the next unit's,
 * at once (the caches are by size), while the compute stream may still
 * read it and its staging's copy may still run. */
static void dev_run_equal(const char *name, const char *transport, unsigned stage, int device,
			  unsigned prefetch)
{
	static const uint64_t sizes[] = {1500, 1500, 1500, 1500, 1500, 1500};
	dev_run_sizes(name, 2, transport, stage, ZS_F32, device, true, prefetch, sizes, 6, false,
		      NULL);
}

/* The emulated device, a compute stream of each rank's own: stage 3 with
 * prefetch 1 and 2 over tcp, stage 2 and stage 1 over shm, bf16 too. */
static void test_emulated(void **st)
{
	unsigned long long peak = 0;
	(void)st;
	dev_run("dv3", 2, "tcp", 3, ZS_F32, ZS_DEVICE_EMULATED, true, 1, &peak);
	/* the window counts device bytes: the largest unit and the next */
	assert_int_equal(peak, 16396 + 256);
	dev_run("dv3p2", 2, "tcp", 3, ZS_BF16, ZS_DEVICE_EMULATED, true, 2, NULL);
	dev_run("dv2", 2, "shm", 2, ZS_F32, ZS_DEVICE_EMULATED, true, 1, NULL);
	dev_run("dv1", 2, "shm", 1, ZS_BF16, ZS_DEVICE_EMULATED, true, 1, NULL);
	dev_run_equal("dve3", "tcp", 3, ZS_DEVICE_EMULATED, 1);
	dev_run_equal("dve2", "shm", 2, ZS_DEVICE_EMULATED, 1);
}

/* The emulated device with the calling thread as the compute stream
 * (stream NULL), as an application without streams would use it. */
static void test_emulated_host_stream(void **st)
{
	(void)st;
	dev_run("dvh", 1, "tcp", 3, ZS_F32, ZS_DEVICE_EMULATED, false, 1, NULL);
}

/* Bad input changes nothing; without a CUDA driver the message says so. */
static void test_set_device_errors(void **st)
{
	struct zs_job_spec spec;
	struct zs_dev *dev;
	char why[256];
	zs_trainer *t;
	int rc;

	(void)st;
	oracle_spec(&spec, "dverr", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	t = join("dverr", 0, "tcp");
	assert_int_equal(zs_trainer_set_device(t, -7, NULL), ZS_EINVAL);
	assert_non_null(strstr(zs_trainer_error(t), "no device -7"));
	assert_int_equal(zs_trainer_set_device(t, ZS_DEVICE_HOST, (void *)8), ZS_EINVAL);
	rc = zs_trainer_set_device(t, 0, NULL);
	{ /* and zshardctl gpu says the same of this host */
		char *argv[] = {(char *)h_bin("zshardctl"), "gpu", "--json", NULL};
		char *out = NULL, *errs = NULL;
		json_error_t je;
		int ctl = h_run(argv, &out, &errs);
		json_t *j = json_loads(out ? out : "", 0, &je);
		bool have = zs_dev_open(0, &dev, why, sizeof why) == ZS_OK;
		if (!j)
			fail_msg("zshardctl gpu --json printed no JSON: %s %s", out, errs);
		assert_int_equal(ctl, have ? 0 : 1);
		assert_int_equal(json_array_size(json_object_get(j, "devices")) > 0, have);
		if (!have)
			assert_non_null(strstr(json_string_value(json_object_get(j, "cuda")), why));
		json_decref(j);
		free(out);
		free(errs);
		if (have) {
			zs_dev_close(dev);
			assert_int_equal(rc, ZS_OK);
		} else {
			assert_int_equal(rc, ZS_EUNAVAIL);
			assert_non_null(strstr(zs_trainer_error(t), "libcuda.so.1"));
		}
	}
	upload_init(t);
	assert_int_equal(zs_trainer_set_device(t, ZS_DEVICE_EMULATED, NULL), ZS_OK);
	assert_int_equal(zs_step_begin(t, 0), ZS_OK);
	assert_int_equal(zs_trainer_set_device(t, ZS_DEVICE_HOST, NULL), ZS_ESTATE);
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

/* The same on a CUDA device, where there is one (make test-gpu). */
static void test_cuda(void **st)
{
	struct zs_dev *dev;
	char why[256];

	(void)st;
	if (zs_dev_open(0, &dev, why, sizeof why)) {
		printf("test_cuda: skipped: %s (make test-gpu runs it where a device is)\n", why);
		skip();
	}
	printf("test_cuda: on %s\n", zs_dev_name(dev));
	zs_dev_close(dev);
	dev_run("dvc3", 2, "tcp", 3, ZS_F32, 0, true, 1, NULL);
	dev_run("dvc2", 2, "shm", 2, ZS_BF16, 0, true, 2, NULL);
	dev_run("dvc1", 2, "shm", 1, ZS_F32, 0, false, 1, NULL); /* the default stream */
	dev_run_equal("dvce3", "tcp", 3, 0, 1);
}

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

/*
 * Servers on the emulated device with a budget: the first shards of each
 * server on the device, the next in host memory, the rest in the NVMe
 * tier, in one job; device-mode trainers against them, AdamW with groups,
 * a schedule and clipping, SGD with accumulation in bf16: bitwise.
 */
static void test_servers_device_host_and_tier(void **st)
{
	(void)st;
	dev_run("sdv3", 2, "tcp", 3, ZS_F32, ZS_DEVICE_EMULATED, true, 1, NULL);
	train_oracle("sdvs", 2, "shm", ZS_ADAMW, ZS_F32, 1, 0.5, 1);
	train_oracle("sdvk", 3, "tcp", ZS_SGD, ZS_BF16, 3, 0.0, 0);
	/* where the shards' state lives, as an operator sees it */
	uint32_t dev = 0, tier = 0, host = 0;
	for (int i = 0; i < C.n; i++) {
		char pf[1024], addr[128];
		struct zs_server_status s;
		struct zs_error err = {0};
		snprintf(pf, sizeof pf, "%s/server-%d.addr", C.dir, i);
		assert_true(h_wait_file(pf, 1000, addr, sizeof addr));
		if (zs_server_status_query(addr, 5000, &s, &err))
			fail_msg("status of server %d: %s", i, err.msg);
		assert_string_equal(s.device, "emulated");
		dev += s.shards_on_device;
		tier += s.shards_tiered;
		host += s.shards - s.shards_on_device - s.shards_tiered;
		assert_true(s.device_bytes <= 24 * 1024);
		zs_server_status_release(&s);
	}
	printf("test_servers_device_host_and_tier: shards on the device %u, in host memory %u, in the tier %u\n",
	       dev, host, tier);
	assert_true(dev > 0 && host > 0 && tier > 0);
	/* the exporter reads each kind's fp32 state: what a gather gives */
	struct zs_coord_client *c;
	struct zs_job jb;
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	for (int i = 0; i < 2; i++) {
		const char *job = i ? "sdvs" : "sdv3";
		char out[1024], *o = NULL, *e = NULL;
		struct st_file f;
		struct zs_error err = {0};
		zs_trainer *t;
		snprintf(out, sizeof out, "%s/%s.safetensors", C.dir, job);
		if (ctl(&o, &e, "export", job, "--out", out, "--optimizer"))
			fail_msg("export %s: %s", job, e);
		free(o);
		free(e);
		if (st_open(out, &f, &err))
			fail_msg("%s: %s", out, err.msg);
		t = join(job, 0, "tcp");
		assert_int_equal(zs_coord_get_job(c, job, &jb, NULL), ZS_OK);
		for (unsigned u = 0; u < jb.spec.layout.n_units; u++) {
			const struct zs_unit *un = &jb.spec.layout.units[u];
			float *got = malloc(un->numel * 4);
			uint64_t off = 0;
			assert_int_equal(fetch(t, u, STEPS, got), ZS_OK);
			for (uint32_t k = 0; k < un->n_tensors; k++) {
				const struct zs_tensor *te = &un->tensors[k];
				char name[2 * ZS_NAME_MAX + 2];
				const struct st_tensor *w;
				snprintf(name, sizeof name, "%s.%s", un->name, te->name);
				w = st_find(&f, name);
				assert_non_null(w);
				assert_int_equal(w->bytes, te->numel * 4);
				if (memcmp(w->data, got + off, te->numel * 4))
					fail_msg("%s: the export's %s differs from what a gather gives",
						 job, name);
				off += te->numel;
			}
			free(got);
		}
		zs_job_release(&jb);
		zs_trainer_close(t);
		st_close(&f);
	}
	zs_coord_close(c);
}

static int budget_setup(void **st)
{
	setenv("ZSHARD_TEST_SERVER_GPU", "emulated", 1);
	setenv("ZSHARD_TEST_SERVER_ARGS", "--gpu-budget 24K --memory-budget 12K", 1);
	return group_setup(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_emulated),
		cmocka_unit_test(test_emulated_host_stream),
		cmocka_unit_test(test_set_device_errors),
		cmocka_unit_test(test_communicator),
		cmocka_unit_test(test_nccl),
		cmocka_unit_test(test_collective),
		cmocka_unit_test(test_collective_refusals),
		cmocka_unit_test(test_collective_restore),
		cmocka_unit_test(test_collective_rank_gone),
		cmocka_unit_test(test_collective_hosts),
		cmocka_unit_test(test_cuda),
	};
	const struct CMUnitTest budget[] = {
		cmocka_unit_test(test_servers_device_host_and_tier),
	};
	int rc;
	/* small chunks: every copy is cut, at odd boundaries */
	setenv("ZSHARD_COPY_CHUNK", "1000", 1);
	rc = cmocka_run_group_tests_name("device", tests, group_setup, group_teardown);
	return rc | cmocka_run_group_tests_name("servers-budget", budget, budget_setup,
						group_teardown);
}
