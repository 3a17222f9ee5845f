/*
 * test_scale.c - the reduction at a world size where per-rank state would
 * show: 64 trainer ranks (threads, half over tcp, half over shared memory)
 * train a small model on 2 real shard servers whose landing budget (8 MiB)
 * is smaller than one step's pushes, so pushes wait for landing room. The
 * parameters equal the single-process reference bit for bit when the
 * pushes arrive in rank order, in reverse, in random orders and with one
 * rank later than the rest by more than a second; the servers' resident
 * memory grows by no more than zshardctl plan's figure for their shards
 * plus the landing buffers, well under what a staging slot per rank and
 * element would take.
 */
#include "tests/integration/train_common.h"

#include "model/plan.h"

#define R 64
#define LANDING (8u << 20)

static uint32_t mix(uint32_t a, uint32_t b, uint32_t c)
{
	uint32_t h = a * 0x9e3779b1u ^ (b + 0x7f4a7c15u) * 0x85ebca77u ^ c * 0xc2b2ae3du;
	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	return h ^ (h >> 12);
}

/* step 0 in rank order, step 1 in reverse, step 2 at random; rank 17
 * pushes its step-1 units 1.2 s after the others */
static unsigned adversarial(unsigned rank, uint64_t step, unsigned u)
{
	if (step == 0)
		return rank * 2;
	if (step == 1)
		return (R - 1 - rank) * 2 + (rank == 17 ? 1200 : 0);
	return mix(rank, (uint32_t)step, u) % 60;
}

static uint64_t rss_of(pid_t pid)
{
	char path[64], line[256];
	uint64_t kb = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

static void test_64_ranks(void **st)
{
	static const uint64_t sizes[] = {2000, 400000, 400000, 300001};
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_job placed;
	struct rank_ctx *x = calloc(R, sizeof *x);
	uint64_t before = 0, after = 0, plan = 0, slots = 0;

	(void)st;
	for (int i = 0; i < C.n; i++)
		before += rss_of(C.srv[i]);
	oracle_spec_sizes(&spec, "wide", R, ZS_ADAMW, ZS_BF16, sizes, 4);
	create_job(&spec);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, "wide", &placed, NULL), ZS_OK);
	zs_coord_close(c);
	for (uint32_t k = 0; k < placed.placement.n_shards; k++) {
		const struct zs_shard *sh = &placed.placement.shards[k];
		const struct zs_unit *un = &spec.layout.units[sh->unit];
		uint64_t host = zs_server_bytes_per_elem(&spec, un), dev = 0;
		if (getenv("ZSHARD_TEST_SERVER_GPU")) /* emulated: its device is host memory */
			zs_server_bytes_per_elem_gpu(&spec, un, &host, &dev);
		plan += sh->padded * (host + dev);
		slots += sh->padded * R * zs_dtype_size(un->dtype);
	}
	for (uint32_t r = 0; r < R; r++)
		x[r] = (struct rank_ctx){.t = join("wide", r, r % 2 ? "shm" : "tcp"), .spec = &spec,
					 .delay_ms = adversarial};
	upload_init(x[0].t);
	train_ranks(x, R, 0, STEPS);
	check_reference(x[R - 1].t, &spec, &placed.placement, 1, 0,
			"64 ranks, pushes in rank order, reversed, one late, random");
	for (int i = 0; i < C.n; i++)
		after += rss_of(C.srv[i]);
	/* the plan's figure for the shards, each server's landing buffers
	 * (kept up to twice the budget) and 128 KiB for each connection's
	 * thread and buffers (a tcp rank keeps two to each server, gathers on
	 * their own; an shm rank one), twice that under AddressSanitizer
	 * (its shadow and fake stacks grow each thread) */
	{
		uint64_t conns = (uint64_t)C.n * (R / 2 * 2 + R / 2), per_conn = 128u << 10;
#if defined(__SANITIZE_ADDRESS__)
		per_conn *= 2;
#endif
		uint64_t bound = plan + (uint64_t)C.n * 2 * LANDING + conns * per_conn;
		printf("servers' RSS grew %.1f MiB: plan %.1f MiB + landing and connections; "
		       "per-rank slots alone would be %.1f MiB\n",
		       (double)(after - before) / 1048576.0, (double)plan / 1048576.0,
		       (double)slots / 1048576.0);
		assert_true(slots > bound); /* else this test could not tell */
		if (after > before + bound)
			fail_msg("the servers' RSS grew %llu bytes, over the plan's %llu + landing",
				 (unsigned long long)(after - before), (unsigned long long)plan);
	}
	for (uint32_t r = 0; r < R; r++)
		zs_trainer_close(x[r].t);
	free(x);
	zs_job_release(&placed);
	zs_job_spec_release(&spec);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_64_ranks),
	};
	/* 2 servers with a landing budget smaller than a step's pushes, and
	 * room in the step timeout for the late rank on a loaded machine */
	char args[512];
	snprintf(args, sizeof args, "%s --landing-budget 8M --step-timeout-ms 30000",
		 getenv("ZSHARD_TEST_SERVER_ARGS") ? getenv("ZSHARD_TEST_SERVER_ARGS") : "");
	setenv("ZSHARD_TEST_SERVERS", "2", 1);
	setenv("ZSHARD_TEST_SERVER_ARGS", args, 1);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("scale", tests, group_setup, group_teardown);
}
