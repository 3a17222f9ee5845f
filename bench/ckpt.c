/*
 * ckpt.c - checkpoint write and restore bandwidth against the disk, in one
 * run: the records a server writes for BYTES of shard state (master + AdamW
 * m and v, 4 MiB shards) in one LMDB transaction with a synchronous commit,
 * against a plain sequential write + fsync of the same bytes to a file in
 * the same directory; restore (reading and checking every record) against a
 * sequential read of that file. With and without MDB_WRITEMAP. Medians of
 * REPS runs.
 *
 *   bench_ckpt DIR [MIB] [REPS]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/baselines.h"
#include "storage/ckpt.h"
#include "storage/kv.h"
#include "bench/timing.h"

#define SHARD (1u << 20) /* floats: 4 MiB per array */

int main(int argc, char **argv)
{
	static const char *const tables[] = {"ckpt"};
	const char *dir = argc > 1 ? argv[1] : "/tmp";
	size_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
	int reps = argc > 3 ? atoi(argv[3]) : 5;
	uint32_t shards = (uint32_t)(mib / 12 ? mib / 12 : 1); /* 3 arrays x 4 MiB each */
	size_t bytes = (size_t)shards * 3 * SHARD * 4;
	float *buf = malloc(SHARD * 4);
	double w_file[16], r_file[16], w_kv[2][16], r_kv[2][16];
	char file[1024], envdir[1024];

	if (reps < 1 || reps > 16)
		reps = 5;
	for (uint32_t i = 0; i < SHARD; i++)
		buf[i] = (float)i * 1e-3f;
	snprintf(file, sizeof file, "%s/zshard-bench-seq.bin", dir);
	for (int r = 0; r < reps; r++) {
		w_file[r] = bench_write_fsync(file, buf, SHARD * 4, bytes);
		r_file[r] = bench_read_seq(file, buf, SHARD * 4, bytes);
		for (int wm = 0; wm < 2; wm++) {
			struct zs_kv *kv;
			struct zs_kv_txn *t;
			struct zs_error err = {0};
			double t0;
			char cmd[1100];
			snprintf(envdir, sizeof envdir, "%s/zshard-bench-lmdb-%d", dir, wm);
			snprintf(cmd, sizeof cmd, "rm -rf %s", envdir);
			if (system(cmd))
				return 1;
			if (zs_kv_open(envdir, (uint64_t)bytes * 2 + (64u << 20), tables, 1,
				       wm ? ZS_KV_WRITEMAP : 0, &kv, &err)) {
				fprintf(stderr, "%s\n", err.msg);
				return 1;
			}
			t0 = bench_now();
			if (zs_kv_begin(kv, true, &t, &err))
				return 1;
			for (uint32_t s = 0; s < shards; s++)
				for (int k = 0; k < 3; k++)
					if (ckpt_put(t, 0, "bench", 1, 0, s,
						     k == 0 ? CKPT_MASTER : k == 1 ? CKPT_STATE0 : CKPT_STATE1,
						     7, buf, SHARD, &err))
						return 1;
			if (zs_kv_commit(t, &err)) {
				fprintf(stderr, "%s\n", err.msg);
				return 1;
			}
			w_kv[wm][r] = (double)bytes / (bench_now() - t0) / 1e9;
			t0 = bench_now();
			if (zs_kv_begin(kv, false, &t, &err))
				return 1;
			for (uint32_t s = 0; s < shards; s++)
				for (int k = 0; k < 3; k++) {
					uint64_t step;
					if (ckpt_get(t, 0, "bench", 1, 0, s,
						     k == 0 ? CKPT_MASTER : k == 1 ? CKPT_STATE0 : CKPT_STATE1,
						     &step, buf, SHARD, &err)) {
						fprintf(stderr, "%s\n", err.msg);
						return 1;
					}
				}
			zs_kv_abort(t);
			r_kv[wm][r] = (double)bytes / (bench_now() - t0) / 1e9;
			zs_kv_close(kv);
			snprintf(cmd, sizeof cmd, "rm -rf %s", envdir);
			if (system(cmd))
				return 1;
		}
	}
	unlink(file);
	{
		double wf = bench_median(w_file, reps), rf = bench_median(r_file, reps);
		printf("| %zu MiB of shard state (%u shards x 3 arrays) | GB/s (median of %d) | ratio to the plain file |\n"
		       "|---|---|---|\n", bytes >> 20, shards, reps);
		printf("| sequential write + fsync | %.2f | 1.00 |\n", wf);
		for (int wm = 0; wm < 2; wm++) {
			double w = bench_median(w_kv[wm], reps);
			printf("| checkpoint write, LMDB %s, commit | %.2f | %.2f |\n",
			       wm ? "with WRITEMAP (the server's)" : "without WRITEMAP", w, w / wf);
		}
		printf("| sequential read (page cache warm) | %.2f | 1.00 |\n", rf);
		for (int wm = 0; wm < 2; wm++) {
			double r = bench_median(r_kv[wm], reps);
			printf("| restore read + CRC check, LMDB %s | %.2f | %.2f |\n",
			       wm ? "with WRITEMAP" : "without WRITEMAP", r, r / rf);
		}
	}
	free(buf);
	return 0;
}
