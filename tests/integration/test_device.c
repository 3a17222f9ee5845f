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
#include "tests/integration/dev_common.h"

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

/*
 * Servers on the emulated device with a budget: the first shards of each
 * server on the device, the next in host memory, the rest in the NVMe
 * tier, in one job; device-mode trainers against them (over shm their
 * pushes go from device memory: the server reads those to its device in
 * place and copies those to host or tier shards), AdamW with groups, a
 * schedule and clipping, SGD with accumulation in bf16: bitwise.
 */
static void test_servers_device_host_and_tier(void **st)
{
	(void)st;
	dev_run("sdv3", 2, "tcp", 3, ZS_F32, ZS_DEVICE_EMULATED, true, 1, NULL);
	dev_run("sdm3", 2, "shm", 3, ZS_F32, ZS_DEVICE_EMULATED, true, 1, NULL);
	dev_run("sdm2", 2, "shm", 2, ZS_BF16, ZS_DEVICE_EMULATED, true, 2, NULL);
	/* with frozen tensors: their shards stay in host memory */
	train_oracle("sdvs", 2, "shm", ZS_ADAMW, ZS_F32, 1, 0.5, 2);
	train_oracle("sdvk", 3, "tcp", ZS_SGD, ZS_BF16, 3, 0.0, 0);
	/* Adam (L2 decay) and Adagrad on device shards: the device's kernels */
	train_oracle("sdva", 2, "tcp", ZS_ADAM, ZS_F32, 1, 0.5, 0);
	train_oracle("sdvg", 2, "shm", ZS_ADAGRAD, ZS_BF16, 3, 0.0, 0);
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
