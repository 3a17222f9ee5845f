/*
 * reduce.c - the servers' reduction against the memory bandwidth of this
 * machine and against the kernel it replaced, in the same run: R pushes of
 * N bf16 elements each (what R ranks send for one shard) reduced to the
 * fp32 mean gradient,
 *
 *  - rank order (before): every rank's push kept in a slot of its own
 *    (R x 2 bytes per element, the memory that grew with the world) and
 *    added in rank order in fp32, one pass per rank;
 *  - binned, as pushes land (now, math/bsum.h): each push deposited into
 *    16 bytes of state per element as it arrives, in any order, then one
 *    pass rounds it; the same bits whatever the order.
 *
 * Reported as pushed bytes reduced per second (R * N * 2 / time), beside an
 * fp32 triad (12 B per element) over the same threads, and each kernel's
 * own traffic bound: the triad's bandwidth divided by the bytes the kernel
 * moves per pushed byte (rank order: the push 2 + the fp32 sum read and
 * written 8 per element and rank, 5 B per pushed byte; binned: the push 2
 * + its state read and written 32, 17 B per pushed byte; the rounding pass
 * adds to both). Medians of REPS runs, 1 and 2 threads.
 *
 *   bench_reduce [N] [R] [REPS]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/baselines.h"
#include "bench/timing.h"
#include "math/optim.h"

struct job {
	int kind; /* 0 rank order, 1 binned */
	uint16_t **push;
	unsigned R;
	float *acc;
	struct zs_bacc *bacc;
	size_t a, b;
};

static void rank_order(float *restrict acc, uint16_t **push, unsigned R, size_t a, size_t b)
{
	for (size_t i = a; i < b; i++)
		acc[i] = zs_bf16_to_f32(push[0][i]);
	for (unsigned r = 1; r < R; r++) {
		const uint16_t *restrict h = push[r];
		for (size_t i = a; i < b; i++)
			acc[i] += zs_bf16_to_f32(h[i]);
	}
	for (size_t i = a; i < b; i++)
		acc[i] = acc[i] / (float)R;
}

static void *run(void *arg)
{
	struct job *j = arg;
	size_t n = j->b - j->a;

	if (j->kind == 0) {
		rank_order(j->acc, j->push, j->R, j->a, j->b);
		return NULL;
	}
	for (unsigned r = 0; r < j->R; r++) /* as each push lands */
		zs_bsum_deposit(j->bacc + j->a, j->push[r] + j->a, ZS_BF16, n);
	zs_bsum_finish(j->acc + j->a, j->bacc + j->a, j->R, n);
	return NULL;
}

/* GB/s of pushed bytes, kind over th threads */
static double timed(int kind, uint16_t **push, unsigned R, float *acc, struct zs_bacc *bacc,
		    size_t n, unsigned th)
{
	struct job jobs[2];
	pthread_t t;
	double t0 = bench_now();

	for (unsigned k = 0; k < th; k++)
		jobs[k] = (struct job){kind, push, R, acc, bacc, n * k / th, n * (k + 1) / th};
	if (th > 1)
		pthread_create(&t, NULL, run, &jobs[1]);
	run(&jobs[0]);
	if (th > 1)
		pthread_join(t, NULL);
	return (double)R * (double)n * 2.0 / (bench_now() - t0) / 1e9;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)4 << 20;
	unsigned R = argc > 2 ? (unsigned)atoi(argv[2]) : 16;
	int reps = argc > 3 ? atoi(argv[3]) : 5;
	uint16_t **push = calloc(R ? R : 1, sizeof *push);
	float *acc = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4), *ref = malloc(n * 4);
	struct zs_bacc *bacc = calloc(n, sizeof *bacc);
	double tri[2][64], ro[2][64], bs[2][64];

	if (reps < 1 || reps > 64)
		reps = 5;
	if (R < 1 || R > 1024)
		R = 16;
	for (unsigned r = 0; r < R; r++) {
		push[r] = malloc(n * 2);
		for (size_t i = 0; i < n; i++)
			push[r][i] = zs_f32_to_bf16(((float)((i * 7 + r * 13) % 1001) - 500.0f) *
						    1e-4f * (float)(1 + r % 5));
	}
	for (size_t i = 0; i < n; i++) {
		b[i] = (float)(i % 1000);
		c[i] = 1.0f;
	}
	memset(acc, 0, n * 4);
	for (unsigned th = 1; th <= 2; th++)
		for (int k = 0; k < reps; k++) {
			tri[th - 1][k] = bench_triad(acc, b, c, n, th);
			ro[th - 1][k] = timed(0, push, R, acc, bacc, n, th);
			bs[th - 1][k] = timed(1, push, R, acc, bacc, n, th);
		}
	/* the two are different sums, close for these values; the binned one
	 * does not depend on the order: pushed in reverse, the same bits */
	memcpy(ref, acc, n * 4);
	for (unsigned r = R; r-- > 0;)
		zs_bsum_deposit(bacc, push[r], ZS_BF16, n);
	zs_bsum_finish(acc, bacc, R, n);
	if (memcmp(acc, ref, n * 4)) {
		fprintf(stderr, "bench_reduce: the binned sum changed with the order (a bug)\n");
		return 1;
	}
	printf("| threads | fp32 triad GB/s | rank order: pushed GB/s | to its traffic bound (triad / 5) | binned: pushed GB/s | to its traffic bound (triad / 17) | binned / rank order |\n"
	       "|---|---|---|---|---|---|---|\n");
	for (unsigned th = 1; th <= 2; th++) {
		double t = bench_median(tri[th - 1], reps), o = bench_median(ro[th - 1], reps);
		double s = bench_median(bs[th - 1], reps);
		printf("| %u | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", th, t, o, o / (t / 5.0), s,
		       s / (t / 17.0), s / o);
	}
	printf("\n(%u pushes of %zu bf16 elements, medians of %d runs; state: rank order %u B per element, binned 16 B at any R)\n",
	       R, n, reps, R * 2 + 4);
	for (unsigned r = 0; r < R; r++)
		free(push[r]);
	free(push);
	free(acc);
	free(b);
	free(c);
	free(ref);
	free(bacc);
	return 0;
}
