/*
 * baselines.h - the physical limits every benchmark measures itself
 * against, in the same run: a raw loopback TCP stream, memcpy, an fp32
 * triad, a sequential write + fsync and a sequential read of a file.
 * Each returns GB/s of one run (the TCP stream and memcpy: medians of reps
 * runs, with the samples in v when v is not NULL).
 */
#ifndef ZS_BENCH_BASELINES_H
#define ZS_BENCH_BASELINES_H

#include <stdbool.h>
#include <stddef.h>

/* bytes through one loopback connection (1 MiB writes, the transport's
 * socket settings), acknowledged by the receiver; full: sent from and
 * received into buffers of bytes (what a transfer does), else one 1 MiB
 * buffer reused at each end (cache-hot: the loopback's own ceiling) */
double bench_tcp_stream(size_t bytes, int reps, bool full, double *v);
double bench_memcpy(size_t bytes, int reps, double *v);
/* a[i] = b[i] + 1.5 c[i] over n floats on th threads (1 or 2): 12 B/element */
double bench_triad(float *a, const float *b, const float *c, size_t n, unsigned th);
/* AdamW's memory traffic (read p, g, m, v; write p, m, v) with adds only,
 * over n floats on th threads (1 or 2): GB/s counting 28 B per element */
double bench_adamw_traffic(float *p, float *m, float *v, const float *g, size_t n,
			   unsigned th);
/* bytes written in chunk-sized writes from buf (repeated), then fsync */
double bench_write_fsync(const char *path, const void *buf, size_t chunk, size_t bytes);
/* the file read back sequentially in chunk-sized reads into buf */
double bench_read_seq(const char *path, void *buf, size_t chunk, size_t bytes);

#endif
