/*
 * gpu.c - the GPU rows of make bench (issue 13), where a CUDA device is:
 *
 *   staging: the bytes of one 256 MiB unit copied host-to-device the way
 *     libzshard's device mode does (pinned staging, $ZSHARD_COPY_CHUNK
 *     pieces on a stream of its own), against one pinned copy of the same
 *     bytes (the link's speed);
 *   the step: a trainer in device mode against the same trainer with host
 *     buffers, one job of one 64 MiB bf16 unit on the local cluster, stage
 *     3, the step's time (gather to the device, gradient back, push);
 *   the optimizer: zshard's AdamW kernel (gpu/optim.cu) on 64 M fp32
 *     parameters, as GB/s at 28 bytes per parameter, against a
 *     device-to-device copy (the memory's bound).
 *
 * Medians of REPS runs. The ratio column: staging, the pinned copy's time
 * over the staged copies' (1: staging costs nothing); the step, device
 * mode's time over host buffers' (the copies' cost); the optimizer, the
 * kernel's GB/s over the copy's (1: at the memory's speed). Without a
 * device it prints why and nothing else.
 *
 *   bench_gpu COORDINATOR REPS   (markdown on stdout)
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/timing.h"
#include "gpu/dev.h"
#include "gpu/gpu.h"
#include "include/zshard.h"

#define MAXREPS 64

static double gbs(double bytes, double s) { return bytes / s / 1e9; }

/* staging: chunked copies on a stream against one copy, the same bytes */
static void staging(struct zs_dev *d, int reps)
{
	size_t n = 256u << 20, chunk = 8u << 20;
	void *h = zs_dev_host_alloc(d, n), *dv = zs_dev_alloc(d, n);
	zs_dev_stream s = NULL;
	zs_dev_event ev = NULL;
	double one[MAXREPS], cut[MAXREPS], lo, hi, lo2, hi2;

	if (!h || !dv || zs_dev_stream_create(d, &s) || zs_dev_event_create(d, &ev)) {
		printf("(staging: %s)\n", zs_dev_error(d));
		return;
	}
	memset(h, 1, n);
	for (int r = 0; r <= reps; r++) {
		double t0 = bench_now();
		zs_dev_copy(d, dv, h, n, ZS_DEV_H2D, s);
		zs_dev_stream_sync(d, s);
		double t1 = bench_now();
		for (size_t o = 0; o < n; o += chunk)
			zs_dev_copy(d, (char *)dv + o, (char *)h + o, chunk, ZS_DEV_H2D, s);
		zs_dev_record(d, ev, s);
		zs_dev_sync(d, ev);
		double t2 = bench_now();
		if (r) { /* the first is a warm-up */
			one[r - 1] = t1 - t0;
			cut[r - 1] = t2 - t1;
		}
	}
	double m1 = bench_spread(one, reps, &lo, &hi), m2 = bench_spread(cut, reps, &lo2, &hi2);
	printf("| host to device, 256 MiB | one pinned copy | %.1f GB/s | staged in 8 MiB pieces | %.1f GB/s | %.2f |\n",
	       gbs((double)n, m1), gbs((double)n, m2), m1 / m2);
	zs_dev_event_destroy(d, ev);
	zs_dev_stream_destroy(d, s);
	zs_dev_free(d, dv);
	zs_dev_host_free(d, h);
}

/* One trainer's steps on job, device mode or not: the median step time. */
static double steps(const char *coord, const char *job, int device, int reps)
{
	char err[512];
	zs_trainer *t = NULL;
	double v[MAXREPS];
	unsigned long long start = 0;
	unsigned len;

	if (zs_trainer_join(coord, job, 0, "auto", 10000, &t, err, sizeof err)) {
		fprintf(stderr, "bench_gpu: join: %s\n", err);
		return 0;
	}
	if (zs_trainer_resume(t, &start, NULL, 0, &len) == ZS_ENOTFOUND) {
		float *p = calloc(zs_unit_numel(t, 0), 4);
		zs_init_unit(t, 0, p);
		free(p);
		start = 0;
	}
	if (device != ZS_DEVICE_HOST && zs_trainer_set_device(t, device, NULL)) {
		fprintf(stderr, "bench_gpu: %s\n", zs_trainer_error(t));
		zs_trainer_close(t);
		return 0;
	}
	for (int r = 0; r <= reps; r++) {
		const void *p;
		void *g;
		double t0 = bench_now();
		if (zs_step_begin(t, start + r) || zs_unit_params(t, 0, 0, &p) ||
		    zs_unit_forward_done(t, 0) || zs_unit_params(t, 0, 1, &p) ||
		    zs_unit_grad(t, 0, &g) || zs_unit_push(t, 0) || zs_step_end(t)) {
			fprintf(stderr, "bench_gpu: step: %s\n", zs_trainer_error(t));
			zs_trainer_close(t);
			return 0;
		}
		if (device != ZS_DEVICE_HOST)
			cudaDeviceSynchronize(); /* the copies the step queued */
		if (r)
			v[r - 1] = bench_now() - t0;
	}
	zs_trainer_close(t);
	return bench_median(v, reps);
}

/* AdamW on n parameters against a device-to-device copy of its bytes. */
static void optimizer(int reps)
{
	size_t n = 64u << 20;
	float *a[4];
	double k[MAXREPS], c[MAXREPS], lo, hi;
	struct zs_adamw_k kk = {.decay = 0.999f, .b1 = 0.9f, .b2 = 0.999f, .one_b1 = 0.1f,
				.one_b2 = 0.001f, .step = -1e-3f, .bc2_sqrt = 0.03f, .eps = 1e-8f};
	char why[256];

	for (int i = 0; i < 4; i++)
		if (cudaMalloc((void **)&a[i], n * 4) != cudaSuccess ||
		    cudaMemset(a[i], 0, n * 4) != cudaSuccess) {
			printf("(optimizer: no room for 4 x %zu MiB)\n", n * 4 >> 20);
			return;
		}
	for (int r = 0; r <= reps; r++) {
		double t0 = bench_now();
		if (zs_gpu_adamw(kk, a[0], a[1], a[2], a[3], n, why, sizeof why)) {
			printf("(optimizer: %s)\n", why);
			return;
		}
		double t1 = bench_now();
		cudaMemcpy(a[1], a[0], n * 4, cudaMemcpyDeviceToDevice);
		cudaDeviceSynchronize();
		double t2 = bench_now();
		if (r) {
			k[r - 1] = t1 - t0;
			c[r - 1] = t2 - t1;
		}
	}
	double mk = bench_spread(k, reps, &lo, &hi), mc = bench_median(c, reps);
	/* a copy moves 2 x its bytes (read + write); AdamW 28 per parameter */
	double kg = gbs(28.0 * (double)n, mk), cg = gbs(8.0 * (double)n, mc);
	printf("| AdamW, 64 M fp32 parameters | device-to-device copy | %.0f GB/s | zshard's kernel (28 B/param) | %.0f GB/s | %.2f |\n",
	       cg, kg, kg / cg);
	for (int i = 0; i < 4; i++)
		cudaFree(a[i]);
}

int main(int argc, char **argv)
{
	struct zs_dev *d;
	char why[256];
	int reps = argc > 2 ? atoi(argv[2]) : 5;

	if (argc < 3) {
		fprintf(stderr, "usage: bench_gpu COORDINATOR REPS\n");
		return 2;
	}
	if (reps < 1 || reps > MAXREPS)
		reps = 5;
	if (zs_dev_open(0, &d, why, sizeof why)) {
		printf("(no GPU rows: %s)\n", why);
		return 0;
	}
	printf("On %s. Medians of %d runs.\n\n", zs_dev_name(d), reps);
	printf("| what | baseline | baseline speed | zshard | zshard speed | zshard / baseline |\n");
	printf("|---|---|---:|---|---:|---:|\n");
	staging(d, reps);  /* ratio: baseline time / staged time (1 = no cost) */
	{
		double host = steps(argv[1], "gpustep", ZS_DEVICE_HOST, reps);
		double dev = steps(argv[1], "gpustep", 0, reps);
		if (host > 0 && dev > 0)
			printf("| a step of one 64 MiB bf16 unit, stage 3, local server | host buffers | %.1f ms | device mode | %.1f ms | %.2f |\n",
			       host * 1e3, dev * 1e3, dev / host);
	}
	optimizer(reps);   /* ratio: kernel GB/s / copy GB/s */
	zs_dev_close(d);
	return 0;
}
