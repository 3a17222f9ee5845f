/*
 * optim.c - the AdamW kernel against the memory bandwidth this machine
 * gives, in the same run. AdamW moves 28 bytes per parameter (read p, g, m,
 * v; write p, m, v). Two bounds: a STREAM-style triad (12 bytes per element
 * as STREAM counts them; its bound is triad_GBps / 28 parameters per
 * second), and AdamW's own traffic with no arithmetic to speak of (the
 * same four reads and three writes, adds only): what the kernel would do
 * at memory speed. Medians of REPS runs over N elements, 1 and 2 threads.
 *
 *   bench_optim [N] [REPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/baselines.h"
#include "math/optim.h"
#include "bench/timing.h"

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)32 << 20;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	float *p = malloc(n * 4), *g = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
	double tri[2][64], ad[2][64], tr[2][64];
	struct zs_optim_step s = {.kind = ZS_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999,
				  .eps = 1e-8, .weight_decay = 0.01};

	if (reps < 1 || reps > 64)
		reps = 5;
	/* touch every page before timing: first touch costs ~0.33 GB/s here */
	for (size_t i = 0; i < n; i++) {
		p[i] = (float)(i % 1000) * 1e-3f;
		g[i] = (float)(i % 77) * 1e-2f - 0.3f;
		m[i] = 0;
		v[i] = 0;
	}
	for (unsigned th = 1; th <= 2; th++)
		for (int r = 0; r < reps; r++) {
			double t0;
			tri[th - 1][r] = bench_triad(m, p, g, n, th);
			tr[th - 1][r] = bench_adamw_traffic(p, m, v, g, n, th);
			memset(m, 0, n * 4);
			memset(v, 0, n * 4);
			s.t = (uint64_t)r + 1;
			t0 = bench_now();
			zs_optim_apply_parallel(&s, p, m, v, g, n, th);
			ad[th - 1][r] = (double)n / (bench_now() - t0) / 1e9;
		}
	printf("| threads | fp32 triad GB/s | triad bound G params/s (/28 B) | AdamW traffic GB/s | traffic bound G params/s | AdamW G params/s | to the triad bound | to the traffic bound |\n"
	       "|---|---|---|---|---|---|---|---|\n");
	for (unsigned th = 1; th <= 2; th++) {
		double t = bench_median(tri[th - 1], reps), a = bench_median(ad[th - 1], reps);
		double f = bench_median(tr[th - 1], reps);
		printf("| %u | %.1f | %.2f | %.1f | %.2f | %.2f | %.2f | %.2f |\n", th, t, t / 28.0,
		       f, f / 28.0, a, a / (t / 28.0), a / (f / 28.0));
	}
	printf("\n(%zu parameters, medians of %d runs; AdamW in PyTorch's operation order, -ffp-contract=off)\n",
	       n, reps);
	free(p);
	free(g);
	free(m);
	free(v);
	return 0;
}
