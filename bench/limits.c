/*
 * limits.c - the machine's physical limits, measured by the same make bench
 * run as everything compared with them: a raw loopback TCP stream, memcpy,
 * an fp32 triad on 1 and 2 threads, a sequential write + fsync and a
 * sequential read of a file in DIR (the data dir's disk). Medians of REPS
 * runs with their spread (min-max).
 *
 *   bench_limits DIR [REPS]   (markdown on stdout)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/baselines.h"
#include "bench/timing.h"

static void row(const char *what, const char *size, double *v, int n, const char *note)
{
	double lo, hi, med = bench_spread(v, n, &lo, &hi);
	printf("| %s | %s | %.2f | %.2f-%.2f | %s |\n", what, size, med, lo, hi, note);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	int reps = argc > 2 ? atoi(argv[2]) : 7;
	const size_t n = (size_t)32 << 20, disk = (size_t)256 << 20, chunk = 4u << 20;
	float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
	char *buf = malloc(chunk), path[1024];
	double v[64];

	if (reps < 3 || reps > 64)
		reps = 7;
	for (size_t i = 0; i < n; i++) { /* first touch costs ~0.33 GB/s here: not timed */
		a[i] = 0;
		b[i] = (float)(i % 1000);
		c[i] = (float)(i % 77);
	}
	memset(buf, 7, chunk);
	printf("| limit | size | GB/s (median of %d) | spread (min-max) | how |\n"
	       "|---|---|---|---|---|\n", reps);
	bench_tcp_stream(64u << 20, reps, false, v);
	row("raw loopback TCP stream, 1 MiB buffers reused", "64 MiB", v, reps,
	    "1 MiB writes, one connection, cache-hot buffers at both ends");
	bench_tcp_stream(64u << 20, reps, true, v);
	row("raw loopback TCP stream, 64 MiB buffers", "64 MiB", v, reps,
	    "the same from and into buffers of the transfer's size, as a gather moves");
	bench_memcpy(64u << 20, reps, v);
	row("memcpy", "64 MiB", v, reps, "one thread, warm pages");
	bench_memcpy(4u << 20, reps, v);
	row("memcpy", "4 MiB", v, reps, "one thread, cache-resident");
	for (unsigned th = 1; th <= 2; th++) {
		char what[64];
		for (int r = 0; r < reps; r++)
			v[r] = bench_triad(a, b, c, n, th);
		snprintf(what, sizeof what, "fp32 triad, %u thread%s", th, th > 1 ? "s" : "");
		row(what, "3 x 128 MiB", v, reps, "a = b + 1.5 c, 12 B per element");
	}
	snprintf(path, sizeof path, "%s/zshard-bench-limits.bin", dir);
	for (int r = 0; r < reps; r++)
		v[r] = bench_write_fsync(path, buf, chunk, disk);
	row("sequential write + fsync", "256 MiB", v, reps, "4 MiB writes to the data dir's disk");
	for (int r = 0; r < reps; r++)
		v[r] = bench_read_seq(path, buf, chunk, disk);
	row("sequential read", "256 MiB", v, reps, "4 MiB reads, page cache warm");
	unlink(path);
	free(a);
	free(b);
	free(c);
	free(buf);
	return 0;
}
