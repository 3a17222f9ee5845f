/*
 * zsbench.c - zshard's optimizer kernel and the memory-bound baselines as a
 * shared library (build/lib/libzsbench.so) for bench/adamw_peers.py, which
 * times them interleaved with today's peers (torch, DeepSpeed) in one
 * process: the same arrays' sizes, threads and moment of the run.
 */
#include <stddef.h>

#include "bench/baselines.h"
#include "bench/timing.h"
#include "math/optim.h"

#define ZSB_API __attribute__((visibility("default")))

/* One AdamW step (t, 1-based) over n parameters on th threads: G params/s. */
ZSB_API double zsb_adamw(float *p, float *m, float *v, const float *g, size_t n, unsigned th,
			 unsigned long long t)
{
	struct zs_optim_step s = {.kind = ZS_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999,
				  .eps = 1e-8, .weight_decay = 0.01, .t = t};
	double t0 = bench_now();

	zs_optim_apply_parallel(&s, p, m, v, g, n, th);
	return (double)n / (bench_now() - t0) / 1e9;
}

/* The STREAM-style triad's GB/s (12 B per element). */
ZSB_API double zsb_triad(float *a, const float *b, const float *c, size_t n, unsigned th)
{
	return bench_triad(a, b, c, n, th);
}

/* AdamW's traffic at memory speed, GB/s (28 B per element). */
ZSB_API double zsb_traffic(float *p, float *m, float *v, const float *g, size_t n, unsigned th)
{
	return bench_adamw_traffic(p, m, v, g, n, th);
}
