/* timing.h - the clock and the median the benchmarks share. */
#ifndef ZS_BENCH_TIMING_H
#define ZS_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

/* Memory-bound baselines are compiled as the kernels they bound are: -O3
 * (the Makefile) and one clone per vector width, the loader picking. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define BENCH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BENCH_CLONES
#endif

static inline double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, bench_cmp);
	return v[n / 2];
}

/* The median of v[0..n) and its spread, the min and max (sorts v). */
static inline double bench_spread(double *v, int n, double *lo, double *hi)
{
	double med = bench_median(v, n);
	*lo = v[0];
	*hi = v[n - 1];
	return med;
}

#endif
