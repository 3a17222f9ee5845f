/*
 * devpush.c - pushes from device memory against pushes through host
 * staging (make bench): one trainer in device mode on DEVICE ("emulated"
 * or a CUDA ordinal) steps a job of one fp32 unit against a server that
 * keeps its shards on the same device, over shm, each step a gather and a
 * push, alternately with $ZSHARD_DEVICE_PUSH=0 (the gradient copied to
 * pinned staging, into the server's arena, back to its device) and without
 * (the server reads it in place). It checks that the direct steps pushed
 * from device memory and the staged ones did not.
 *
 * Medians of REPS steps each (interleaved, each after an untimed step of
 * its mode, which allocates the mode's buffers); the
 * ratio is the direct step's time over the staged one's. On the emulated
 * device the copies saved are the host's memcpys, on a GPU the link's.
 *
 *   bench_devpush COORDINATOR JOB DEVICE REPS   (a markdown row on stdout)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/timing.h"
#include "include/zshard.h"

#define MAXREPS 64

static zs_trainer *t;
static unsigned long long step;

/* Device mode on device with pushes from device memory or not. */
static int mode(int device, bool direct)
{
	setenv("ZSHARD_DEVICE_PUSH", direct ? "1" : "0", 1);
	if (zs_trainer_set_device(t, device, NULL)) {
		fprintf(stderr, "bench_devpush: %s\n", zs_trainer_error(t));
		return -1;
	}
	return 0;
}

/* One step (gather, gradient, push); its seconds, or -1. */
static double one_step(void)
{
	const void *p;
	void *g;
	double t0 = bench_now();

	if (zs_step_begin(t, step) || zs_unit_params(t, 0, 0, &p) || zs_unit_forward_done(t, 0) ||
	    zs_unit_params(t, 0, 1, &p) || zs_unit_grad(t, 0, &g) || zs_unit_push(t, 0) ||
	    zs_step_end(t)) {
		fprintf(stderr, "bench_devpush: step %llu: %s\n", step, zs_trainer_error(t));
		return -1;
	}
	step++;
	return bench_now() - t0;
}

int main(int argc, char **argv)
{
	double v[2][MAXREPS];
	unsigned long long dev_bytes[2] = {0, 0};
	char err[512];
	unsigned len;
	int device, reps;

	if (argc < 5) {
		fprintf(stderr, "usage: bench_devpush COORDINATOR JOB DEVICE REPS\n");
		return 2;
	}
	device = !strcmp(argv[3], "emulated") ? ZS_DEVICE_EMULATED : atoi(argv[3]);
	reps = atoi(argv[4]);
	if (reps < 1 || reps > MAXREPS)
		reps = 5;
	if (zs_trainer_join(argv[1], argv[2], 0, "shm", 10000, &t, err, sizeof err)) {
		fprintf(stderr, "bench_devpush: join: %s\n", err);
		return 1;
	}
	if (zs_trainer_resume(t, &step, NULL, 0, &len) == ZS_ENOTFOUND) {
		float *p = calloc(zs_unit_numel(t, 0), 4);
		if (!p || zs_init_unit(t, 0, p)) {
			fprintf(stderr, "bench_devpush: upload: %s\n", zs_trainer_error(t));
			return 1;
		}
		free(p);
		step = 0;
	}
	for (int r = 0; r < reps; r++)
		for (int direct = 0; direct < 2; direct++) {
			struct zs_trainer_counters a, b;
			double s;
			/* a mode's first step allocates its buffers: not timed */
			if (mode(device, direct) || one_step() < 0)
				return 1;
			zs_trainer_counters(t, &a);
			if ((s = one_step()) < 0)
				return 1;
			zs_trainer_counters(t, &b);
			dev_bytes[direct] += b.bytes_pushed_device - a.bytes_pushed_device;
			v[direct][r] = s;
		}
	zs_trainer_close(t);
	if (!dev_bytes[1] || dev_bytes[0]) {
		fprintf(stderr,
			"bench_devpush: %llu bytes went from device memory with ZSHARD_DEVICE_PUSH=0, %llu without: is the server on device %s?\n",
			dev_bytes[0], dev_bytes[1], argv[3]);
		return 1;
	}
	double staged = bench_median(v[0], reps), direct = bench_median(v[1], reps);
	printf("| a step of one 64 MiB fp32 unit, device %s, its server on it (shm) | push through host staging | %.1f ms | push from device memory | %.1f ms | %.2f |\n",
	       argv[3], staged * 1e3, direct * 1e3, direct / staged);
	return 0;
}
