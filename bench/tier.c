/*
 * tier.c - the NVMe tier's cost: one trainer steps a job of N fp32
 * parameters (AdamW, one shard) on an in-process server, once with all
 * state in memory and once with it in O_DIRECT files under DIR; each step
 * is a gather of the parameters and a push of a gradient, whose update
 * streams the tiered state through the double buffer. Reports the median
 * step time of each and the bytes read and written per tiered step.
 *
 *   bench_tier DIR [MPARAMS] [STEPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "model/placement.h"
#include "bench/timing.h"
#include "net/listener.h"

static int run(const char *tier_dir, uint64_t n, int steps, double *med_s, uint64_t *rd,
	       uint64_t *wr)
{
	struct zs_job job = {0};
	struct engine *e;
	struct zs_listener *l;
	struct zs_conn *c;
	struct zs_error err = {0};
	struct place_server sv = {.id = 1, .free_bytes = UINT64_MAX};
	char tcp[ZS_ADDR_MAX];
	struct zs_listener_opts o = {.at = {{&zs_tcp_endpoint, "127.0.0.1:0", tcp}},
				     .arena_bytes = n * 4 * 3 + (64u << 20)};
	float *p = malloc(n * 4), *g = malloc(n * 4);
	double *t = malloc((size_t)steps * sizeof *t);
	struct engine_stats es0, es1;

	strcpy(job.spec.name, "b");
	job.spec.stage = 3;
	job.spec.world_size = 1;
	job.spec.compute_dtype = ZS_F32;
	job.spec.optim = (struct zs_optim){.kind = ZS_ADAMW, .lr = 1e-3};
	job.spec.layout.n_units = 1;
	job.spec.layout.units = calloc(1, sizeof(struct zs_unit));
	strcpy(job.spec.layout.units[0].name, "u");
	job.spec.layout.units[0].n_tensors = 1;
	job.spec.layout.units[0].tensors = calloc(1, sizeof(struct zs_tensor));
	strcpy(job.spec.layout.units[0].tensors[0].name, "w");
	job.spec.layout.units[0].tensors[0].ndim = 1;
	job.spec.layout.units[0].tensors[0].shape[0] = n;
	if (zs_job_spec_normalize(&job.spec, &err) ||
	    place_job(&job.spec, &sv, 1, NULL, &job.placement, &err) ||
	    engine_create(2, 0, &e, &err) ||
	    (tier_dir && engine_set_tier(e, tier_dir, 1, &err)) ||
	    zs_listener_start(&o, engine_target(e), &l, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	engine_set_listener(e, l);
	if (engine_add_job(e, &job, 1, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	{
		struct zs_conn_opts co = {.addr = tcp, .job = "b", .token = "", .rank = 0,
					  .timeout_ms = 10000};
		if (zs_connect(&zs_tcp_transport, &co, &c, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		p[i] = (float)(i % 1000) * 1e-3f;
		g[i] = (float)(i % 77) * 1e-2f - 0.3f;
	}
	{
		struct zs_xfer x = {.unit = 0, .offset = 0, .length = n, .dtype = ZS_F32, .init = true};
		struct zs_req *r;
		if (zs_post_write(c, &x, p, &r, &err) || zs_req_wait(r, -1, &err))
			return 1;
	}
	engine_stats(e, &es0);
	for (int s = 0; s <= steps; s++) {
		struct zs_xfer rx = {.unit = 0, .offset = 0, .length = n, .step = (uint64_t)s,
				     .dtype = ZS_F32};
		struct zs_xfer wx = rx;
		struct zs_req *r;
		double t0 = bench_now();
		if (zs_post_read(c, &rx, p, &r, &err) || zs_req_wait(r, -1, &err) ||
		    zs_post_write(c, &wx, g, &r, &err) || zs_req_wait(r, -1, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		if (s > 0) /* the first includes a cold start */
			t[s - 1] = bench_now() - t0;
		if (s == 0)
			engine_stats(e, &es0);
	}
	{ /* the last update has run once the next gather is served */
		struct zs_xfer rx = {.unit = 0, .offset = 0, .length = n,
				     .step = (uint64_t)steps + 1, .dtype = ZS_F32};
		struct zs_req *r;
		if (zs_post_read(c, &rx, p, &r, &err) || zs_req_wait(r, -1, &err))
			return 1;
	}
	engine_stats(e, &es1);
	*med_s = bench_median(t, steps);
	*rd = (es1.tier_read - es0.tier_read) / (uint64_t)steps;
	*wr = (es1.tier_written - es0.tier_written) / (uint64_t)steps;
	zs_conn_close(c);
	zs_listener_stop(l);
	engine_free(e);
	zs_listener_free(l);
	zs_job_release(&job);
	free(p);
	free(g);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	uint64_t n = (argc > 2 ? strtoull(argv[2], NULL, 10) : 16) << 20;
	int steps = argc > 3 ? atoi(argv[3]) : 5;
	char tier[1024];
	double mem_s, tier_s;
	uint64_t rd, wr, rd0, wr0;

	if (steps < 1)
		steps = 5;
	snprintf(tier, sizeof tier, "%s/zshard-bench-tier", dir);
	if (run(NULL, n, steps, &mem_s, &rd0, &wr0) || run(tier, n, steps, &tier_s, &rd, &wr))
		return 1;
	printf("| %llu M fp32 parameters, AdamW, 1 trainer, tcp | step time (median of %d) | ratio |\n"
	       "|---|---|---|\n", (unsigned long long)(n >> 20), steps);
	printf("| state in memory | %.1f ms | 1.00 |\n", mem_s * 1e3);
	printf("| state on the tier (O_DIRECT files, double buffer) | %.1f ms | %.2f |\n",
	       tier_s * 1e3, tier_s / mem_s);
	printf("\nper tiered step: %.1f MiB read, %.1f MiB written (state: %.1f MiB)\n",
	       (double)rd / 1048576.0, (double)wr / 1048576.0, (double)n * 12 / 1048576.0);
	{
		char cmd[1100];
		snprintf(cmd, sizeof cmd, "rm -rf %s", tier);
		if (system(cmd))
			return 1;
	}
	return 0;
}
