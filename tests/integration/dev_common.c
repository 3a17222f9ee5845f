/*
 * dev_common.c - device-mode ranks that train the oracle, and the run that
 * checks them against the reference (dev_common.h).
 */
#include "tests/integration/dev_common.h"

#define MAXU 8
#define BUSY (4u << 20)

#define FAIL(x, ...) \
	do { \
		if (!(x)->rc) \
			(x)->rc = -1; \
		snprintf((x)->why, sizeof (x)->why, __VA_ARGS__); \
		goto out; \
	} while (0)


/* One rank's steps, its kernels queued on its compute stream. */
void *dev_train(void *arg)
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
/* Whether device is the test servers' own ($ZSHARD_TEST_SERVER_GPU) and
 * transport reaches them through shared memory: pushes from device memory. */
static bool servers_on(const char *transport, int device)
{
	const char *gpu = getenv("ZSHARD_TEST_SERVER_GPU");
	if (!gpu || strcmp(transport, "shm"))
		return false;
	return !strcmp(gpu, "emulated") ? device == ZS_DEVICE_EMULATED
					: device >= 0 && device == atoi(gpu);
}

void dev_run_sizes(const char *name, uint32_t R, const char *transport, unsigned stage,
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
	/* a rank on the servers' own device pushed every gradient from device
	 * memory over shm (the server took it there), any other none */
	for (uint32_t r = 0; r < R; r++) {
		struct zs_trainer_counters k;
		unsigned long long init = 0;
		bool direct = servers_on(transport, x[r].device);
		for (uint32_t u = 0; u < U && r == 0; u++)
			init += sizes[u] * 4; /* rank 0's upload: through the arena */
		zs_trainer_counters(x[r].t, &k);
		if (direct ? k.bytes_pushed_device == 0 || k.bytes_pushed_device + init != k.bytes_pushed
			   : k.bytes_pushed_device != 0)
			fail_msg("%s rank %u (%s): %llu of %llu bytes pushed from device memory, expected %s",
				 name, r, transport, k.bytes_pushed_device, k.bytes_pushed,
				 direct ? "all but the upload" : "none");
		if (direct && r == 0)
			printf("%s: rank 0 pushed %llu bytes from device memory to servers on its device\n",
			       name, k.bytes_pushed_device);
	}
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

