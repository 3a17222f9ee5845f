/*
 * read_weights.c - a weight reader as an inference worker writes one in C
 * (include/zshard_reader.h): opens a job, pins a version (the latest
 * finished step unless --step), reads every tensor in the dtype asked for,
 * and prints the step and each tensor's name, shape and CRC32C (of its
 * bytes in its unit's dtype). --checkpoint ID (or latest) reads a committed
 * checkpoint instead; --relay ADDR relays to the readers after it;
 * --follow N pins and reads the next N versions as training makes them.
 *
 *   read_weights --coordinator ADDR --job NAME [--step N | --checkpoint ID|latest]
 *                [--dtype f32|bf16|f16] [--relay HOST:PORT [--fanout K]] [--follow N]
 *                [--quiet]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zshard_reader.h"

static int read_all(zs_reader *r, int dtype, int quiet, unsigned long long step)
{
	unsigned n = zs_reader_tensors(r);
	unsigned long long total = 0;

	for (unsigned i = 0; i < n; i++) {
		const char *name;
		int udt;
		unsigned ndim, crc;
		unsigned long long shape[8], numel;
		size_t sz = dtype == 1 ? 4 : 2;
		void *buf;
		if (zs_reader_tensor(r, i, &name, &udt, &ndim, shape, 8, &numel))
			return -1;
		if (!(buf = malloc(numel * sz + 1)))
			return -1;
		if (zs_reader_read(r, name, dtype, buf, numel * sz, &crc)) {
			fprintf(stderr, "read_weights: %s: %s\n", name, zs_reader_error(r));
			free(buf);
			return -1;
		}
		total += numel * sz;
		if (!quiet) {
			printf("%s [", name);
			for (unsigned d = 0; d < ndim && d < 8; d++)
				printf("%s%llu", d ? ", " : "", shape[d]);
			printf("] crc32c %08x\n", crc);
		}
		free(buf);
	}
	printf("step %llu: %u tensors, %llu bytes\n", step, n, total);
	return 0;
}

/* The id of the job's newest committed checkpoint: 0, or -2 when it has
 * none, -1 on a failure (zs_reader_error says). */
static int newest_checkpoint(zs_reader *r, unsigned long long *id)
{
	unsigned n = 0, cap;
	unsigned long long *ids;

	if (zs_reader_checkpoints(r, NULL, NULL, 0, &n))
		return -1;
	if (!n)
		return -2;
	if (!(ids = calloc(cap = n, sizeof *ids)) || zs_reader_checkpoints(r, ids, NULL, cap, &n)) {
		free(ids);
		return -1;
	}
	*id = ids[(n < cap ? n : cap) - 1]; /* oldest first */
	free(ids);
	return n ? 0 : -2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"coordinator", required_argument, NULL, 'c'}, {"job", required_argument, NULL, 'j'},
		{"step", required_argument, NULL, 's'},	       {"dtype", required_argument, NULL, 'd'},
		{"relay", required_argument, NULL, 'r'},       {"fanout", required_argument, NULL, 'f'},
		{"follow", required_argument, NULL, 'F'},      {"quiet", no_argument, NULL, 'q'},
		{"checkpoint", required_argument, NULL, 'k'},  {0},
	};
	const char *coord = NULL, *job = NULL, *relay = NULL, *ckpt = NULL;
	unsigned long long step = ZS_READER_LATEST, pinned;
	int dtype = 1, quiet = 0, o, follow = 0;
	unsigned fanout = 0;
	char err[512];
	zs_reader *r;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'c': coord = optarg; break;
		case 'j': job = optarg; break;
		case 's': step = strtoull(optarg, NULL, 10); break;
		case 'd': dtype = !strcmp(optarg, "bf16") ? 2 : !strcmp(optarg, "f16") ? 3 : 1; break;
		case 'r': relay = optarg; break;
		case 'f': fanout = (unsigned)atoi(optarg); break;
		case 'F': follow = atoi(optarg); break;
		case 'q': quiet = 1; break;
		case 'k': ckpt = optarg; break;
		default:
			fprintf(stderr, "usage: read_weights --coordinator ADDR --job NAME [--step N | "
					"--checkpoint ID|latest] [--dtype f32|bf16|f16] "
					"[--relay HOST:PORT [--fanout K]] [--follow N] [--quiet]\n");
			return 2;
		}
	}
	if (!job) {
		fprintf(stderr, "read_weights: give --job\n");
		return 2;
	}
	if (zs_reader_open(coord, job, 30000, &r, err, sizeof err)) {
		fprintf(stderr, "read_weights: %s\n", err);
		return 1;
	}
	if (relay && zs_reader_relay(r, relay, fanout)) {
		fprintf(stderr, "read_weights: %s\n", zs_reader_error(r));
		zs_reader_close(r);
		return 1;
	}
	if (ckpt) { /* a committed checkpoint: the one named, or the newest */
		unsigned long long id = strtoull(ckpt, NULL, 10);
		int rc = strcmp(ckpt, "latest") ? 0 : newest_checkpoint(r, &id);
		int bad = rc || zs_reader_pin_checkpoint(r, id, &pinned) ||
			  read_all(r, dtype, quiet, pinned);
		if (bad)
			fprintf(stderr, "read_weights: %s\n",
				rc == -2 ? "the job has no committed checkpoint" : zs_reader_error(r));
		zs_reader_close(r);
		return bad;
	}
	for (int k = 0; k <= follow; k++) {
		if (k && zs_reader_wait(r, pinned, -1, &step)) {
			fprintf(stderr, "read_weights: %s\n", zs_reader_error(r));
			break;
		}
		if (zs_reader_pin(r, step, &pinned) || read_all(r, dtype, quiet, pinned)) {
			fprintf(stderr, "read_weights: %s\n", zs_reader_error(r));
			zs_reader_close(r);
			return 1;
		}
	}
	zs_reader_close(r);
	return 0;
}
