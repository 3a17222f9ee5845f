/*
 * coll.c - zshard's collectives through real shard servers, for the
 * comparison with MPI (bench/mpi_coll.c): two trainers (threads, each its
 * own libzshard handle and connections) on a job of one f32 unit of
 * MIB MiB striped over the servers, world size 2, SGD.
 *
 * Per repetition, the trainers in lockstep (a barrier before each part):
 *   G: zs_gather of the unit (each trainer receives MIB MiB, as each rank
 *      of an MPI_Allgather of MIB MiB in all);
 *   P: zs_push of an MIB MiB gradient until acknowledged (landed);
 *   Q: zs_gather of the next step (waits for the servers' rank-order
 *      reduction and update, then moves MIB MiB).
 * push + reduce = P + (Q - G): the push and the reduction it causes,
 * without the gather that follows; the step's communication = P + Q
 * (what MPI_Allreduce does). GB/s are MIB MiB per the time, the slowest
 * trainer's. Medians of REPS repetitions after one warm-up, min-max.
 *
 *   bench_coll COORDINATOR JOB TRANSPORT REPS   (markdown rows on stdout)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/timing.h"
#include "include/zshard.h"

#define MAXR 64

struct tr {
	const char *coord, *job, *transport;
	unsigned rank;
	int reps;
	pthread_barrier_t *bar;
	double g[MAXR + 1], p[MAXR + 1], q[MAXR + 1];
	int failed;
};

static int one(zs_trainer *t, int push, unsigned long long step, void *buf)
{
	zs_op *op;
	int rc = push ? zs_push(t, 0, step, buf, &op) : zs_gather(t, 0, step, buf, &op);
	return rc ? rc : zs_op_wait(op, 120000);
}

static void *trainer(void *arg)
{
	struct tr *x = arg;
	char err[512];
	zs_trainer *t = NULL;
	float *buf = NULL, *grad = NULL;
	size_t n = 0;
	int rc = 0;

	rc = zs_trainer_join(x->coord, x->job, x->rank, x->transport, 10000, &t, err, sizeof err);
	if (rc) {
		fprintf(stderr, "bench_coll: rank %u cannot join: %s\n", x->rank, err);
		x->failed = 1;
	} else {
		n = zs_unit_numel(t, 0);
		buf = malloc(n * 4);
		grad = malloc(n * 4);
		/* touch every page before timing: first touch costs ~0.33 GB/s here */
		for (size_t i = 0; i < n; i++) {
			buf[i] = (float)(i % 1000);
			grad[i] = 1e-3f * (float)((i + x->rank) % 7);
		}
		if (x->rank == 0 && zs_init_unit(t, 0, buf))
			x->failed = 1;
	}
	for (int r = 0; r <= x->reps; r++) {
		double t0;
		unsigned long long s = (unsigned long long)r;
		pthread_barrier_wait(x->bar);
		t0 = bench_now();
		if (!x->failed && one(t, 0, s, buf))
			x->failed = 1;
		x->g[r] = bench_now() - t0;
		pthread_barrier_wait(x->bar);
		t0 = bench_now();
		if (!x->failed && one(t, 1, s, grad))
			x->failed = 1;
		x->p[r] = bench_now() - t0;
		pthread_barrier_wait(x->bar);
		t0 = bench_now();
		if (!x->failed && one(t, 0, s + 1, buf))
			x->failed = 1;
		x->q[r] = bench_now() - t0;
	}
	if (x->failed && t)
		fprintf(stderr, "bench_coll: rank %u: %s\n", x->rank, zs_trainer_error(t));
	zs_trainer_close(t);
	free(buf);
	free(grad);
	return NULL;
}

static void row(const char *transport, const char *what, double mib, double *sec, int n)
{
	double gbs[MAXR] = {0}, lo, hi, med;
	if (n < 1 || n > MAXR)
		return;
	for (int i = 0; i < n; i++)
		gbs[i] = mib * 1048576.0 / sec[i] / 1e9;
	med = bench_spread(gbs, n, &lo, &hi);
	printf("| zshard %s | %s | %.0f MiB | %.2f | %.2f-%.2f |\n", transport, what, mib, med,
	       lo, hi);
}

int main(int argc, char **argv)
{
	struct tr x[2];
	pthread_t th[2];
	pthread_barrier_t bar;
	double g[MAXR], pr[MAXR], step[MAXR], mib;
	int reps;

	if (argc != 5) {
		fprintf(stderr, "usage: bench_coll COORDINATOR JOB TRANSPORT REPS\n");
		return 2;
	}
	reps = atoi(argv[4]);
	if (reps < 1 || reps > MAXR)
		reps = 5;
	pthread_barrier_init(&bar, NULL, 2);
	for (unsigned r = 0; r < 2; r++) {
		x[r] = (struct tr){.coord = argv[1], .job = argv[2], .transport = argv[3],
				   .rank = r, .reps = reps, .bar = &bar};
		pthread_create(&th[r], NULL, trainer, &x[r]);
	}
	for (int r = 0; r < 2; r++)
		pthread_join(th[r], NULL);
	if (x[0].failed || x[1].failed)
		return 1;
	for (int r = 0; r < reps; r++) { /* repetition 0 warms up */
		double G = x[0].g[r + 1] > x[1].g[r + 1] ? x[0].g[r + 1] : x[1].g[r + 1];
		double P = x[0].p[r + 1] > x[1].p[r + 1] ? x[0].p[r + 1] : x[1].p[r + 1];
		double Q = x[0].q[r + 1] > x[1].q[r + 1] ? x[0].q[r + 1] : x[1].q[r + 1];
		g[r] = G;
		pr[r] = P + (Q > G ? Q - G : 0);
		step[r] = P + Q;
	}
	{
		/* the unit's size, from the job name's convention coll-T-MIB */
		const char *d = strrchr(argv[2], '-');
		mib = d ? atof(d + 1) : 0;
	}
	row(argv[3], "gather (allgather)", mib, g, reps);
	row(argv[3], "push + reduce (reduce-scatter)", mib, pr, reps);
	row(argv[3], "push + gather (allreduce)", mib, step, reps);
	pthread_barrier_destroy(&bar);
	return 0;
}
