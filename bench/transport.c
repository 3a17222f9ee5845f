/*
 * transport.c - data-plane throughput in one run: gather and push through
 * the tcp and shm transports for 4 MiB and 64 MiB units, 1 and 2 servers,
 * 1 and 2 trainers, beside a raw loopback TCP stream (1 MiB writes, from
 * and into buffers of the unit's size, as a gather moves them; limits.md
 * also has the cache-hot stream) and memcpy of the same sizes measured by
 * this program; then tcp encrypted (data_tls) against plaintext, in turns
 * in the same run. Medians of REPS runs;
 * ratios are to the baseline of the same run. Servers are in-process
 * listeners serving a plain buffer (no optimizer), so this measures the
 * transport alone.
 *
 *   transport [REPS]   (markdown on stdout)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/baselines.h"
#include "bench/timing.h"
#include "net/dtls.h"
#include "net/listener.h"

#define MAXS 2
#define MAXT 2


/* ---- a server that serves one buffer and takes pushes into staging ---- */

struct srv {
	struct zs_listener *l;
	float *buf, *stage;
	char tcp[ZS_ADDR_MAX], shm[ZS_ADDR_MAX];
};

/* the job's token: the key of encrypted connections */
#define TOKEN "0123456789abcdef0123456789abcdef"

static enum zs_status b_tls_key(void *ctx, const char *job, bool reader, uint8_t key[32],
				struct zs_error *err)
{
	(void)ctx;
	(void)err;
	return zs_dtls_psk(TOKEN, job, reader, key) ? ZS_ENOMEM : ZS_OK;
}

static enum zs_status b_hello(void *ctx, const struct zs_hello *hl, uint32_t *h,
			      struct zs_error *err)
{
	(void)ctx; (void)hl; (void)err;
	*h = 1;
	return ZS_OK;
}

static void b_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		   const struct zs_xfer *x)
{
	struct srv *s = ctx;
	(void)job; (void)rank;
	zs_sop_read_ready(op, s->buf + x->offset);
}

static enum zs_status b_wbegin(void *ctx, uint32_t job, uint32_t rank,
			       const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	struct srv *s = ctx;
	(void)job; (void)err;
	/* one staging area per trainer, as the shard server keeps */
	*dst = s->stage + (size_t)rank * (64u << 18) + x->offset;
	return ZS_OK;
}

static void b_wdone(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		    const struct zs_xfer *x, void *dst)
{
	(void)ctx; (void)job; (void)rank; (void)x; (void)dst;
	zs_sop_done(op);
}

static void b_wabort(void *ctx, uint32_t job, uint32_t rank, const struct zs_xfer *x,
		     void *dst)
{
	(void)ctx; (void)job; (void)rank; (void)x; (void)dst;
}

/* ---- trainers ---- */

struct trainer {
	const struct zs_transport_ops *t;
	struct srv *srv;
	int n_srv, rank, push, reps, tls;
	size_t bytes;
	float *buf;
	pthread_barrier_t *bar;
	double *times;
};

static void *trainer_main(void *arg)
{
	struct trainer *tr = arg;
	struct zs_conn *c[MAXS];
	struct zs_error err = {0};
	size_t per = tr->bytes / 4 / (size_t)tr->n_srv;

	for (int s = 0; s < tr->n_srv; s++) {
		struct zs_conn_opts o = {.addr = tr->t == &zs_shm_transport ? tr->srv[s].shm
									   : tr->srv[s].tcp,
					 .job = "b", .token = TOKEN, .rank = (uint32_t)tr->rank,
					 .tls = tr->tls, .timeout_ms = 5000};
		if (zs_connect(tr->t, &o, &c[s], &err)) {
			fprintf(stderr, "connect: %s\n", err.msg);
			exit(1);
		}
	}
	for (int r = 0; r < tr->reps + 1; r++) {
		struct zs_req *q[MAXS];
		double t0;
		pthread_barrier_wait(tr->bar);
		t0 = bench_now();
		for (int s = 0; s < tr->n_srv; s++) {
			struct zs_xfer x = {.unit = 0, .offset = 0, .length = per,
					    .dtype = ZS_F32};
			float *p = tr->buf + (size_t)s * per;
			enum zs_status st = tr->push ? zs_post_write(c[s], &x, p, &q[s], &err)
						     : zs_post_read(c[s], &x, p, &q[s], &err);
			if (st) {
				fprintf(stderr, "post: %s\n", err.msg);
				exit(1);
			}
		}
		for (int s = 0; s < tr->n_srv; s++)
			if (zs_req_wait(q[s], 60000, &err)) {
				fprintf(stderr, "wait: %s\n", err.msg);
				exit(1);
			}
		pthread_barrier_wait(tr->bar);
		if (r > 0) /* the first run warms pages and connections */
			tr->times[r - 1] = bench_now() - t0;
	}
	for (int s = 0; s < tr->n_srv; s++)
		zs_conn_close(c[s]);
	return NULL;
}

/* GB/s of all trainers together for one configuration (median of reps);
 * tls: over encrypted connections (net/dtls.h). */
static double run_tls(const struct zs_transport_ops *t, struct srv *srv, int n_srv, int n_tr,
		      int push, size_t bytes, int reps, float **bufs, int tls)
{
	pthread_t th[MAXT];
	struct trainer tr[MAXT];
	pthread_barrier_t bar;
	double times[MAXT][64], wall[64];

	pthread_barrier_init(&bar, NULL, (unsigned)n_tr);
	for (int i = 0; i < n_tr; i++) {
		tr[i] = (struct trainer){t, srv, n_srv, i, push, reps, tls, bytes, bufs[i], &bar,
					 times[i]};
		pthread_create(&th[i], NULL, trainer_main, &tr[i]);
	}
	for (int i = 0; i < n_tr; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	for (int r = 0; r < reps; r++) {
		wall[r] = times[0][r];
		for (int i = 1; i < n_tr; i++)
			if (times[i][r] > wall[r])
				wall[r] = times[i][r];
		wall[r] = (double)bytes * n_tr / wall[r] / 1e9;
	}
	return bench_median(wall, reps);
}

static double run(const struct zs_transport_ops *t, struct srv *srv, int n_srv, int n_tr,
		  int push, size_t bytes, int reps, float **bufs)
{
	return run_tls(t, srv, n_srv, n_tr, push, bytes, reps, bufs, 0);
}

/* How a connection's records are made here (kernel TLS or user space). */
static const char *tls_mode(struct srv *srv)
{
	static char mode[128];
	struct zs_conn_opts o = {.addr = srv->tcp, .job = "b", .token = TOKEN, .tls = true,
				 .timeout_ms = 5000};
	struct zs_conn *c;
	struct zs_error err = {0};

	if (zs_connect(&zs_tcp_transport, &o, &c, &err)) {
		fprintf(stderr, "connect: %s\n", err.msg);
		exit(1);
	}
	snprintf(mode, sizeof mode, "%s", zs_conn_encryption(c));
	zs_conn_close(c);
	return mode;
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? atoi(argv[1]) : 7;
	static const size_t sizes[] = {4u << 20, 64u << 20};
	struct srv srv[MAXS];
	float *bufs[MAXT];

	if (reps < 1 || reps > 63)
		reps = 7;
	for (int s = 0; s < MAXS; s++) {
		struct zs_target tg = {.ctx = &srv[s], .hello = b_hello, .tls_key = b_tls_key,
				       .read = b_read, .write_begin = b_wbegin,
				       .write_done = b_wdone, .write_abort = b_wabort};
		struct zs_listener_opts o = {.at = {{&zs_tcp_endpoint, "127.0.0.1:0", srv[s].tcp},
						    {&zs_shm_endpoint, NULL, srv[s].shm}},
					     .arena_bytes = (64u << 20) * (1 + MAXT)};
		struct zs_error err = {0};
		if (zs_listener_start(&o, &tg, &srv[s].l, &err)) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		srv[s].buf = zs_listener_alloc(srv[s].l, 64u << 20);
		srv[s].stage = zs_listener_alloc(srv[s].l, (64u << 20) * MAXT);
		memset(srv[s].buf, 3, 64u << 20);
		memset(srv[s].stage, 0, (64u << 20) * MAXT);
	}
	for (int i = 0; i < MAXT; i++) {
		bufs[i] = malloc(64u << 20);
		memset(bufs[i], 4, 64u << 20);
	}

	printf("| size | raw TCP stream GB/s | memcpy GB/s |\n|---|---|---|\n");
	double base_tcp[2], base_mem[2];
	for (int k = 0; k < 2; k++) {
		base_tcp[k] = bench_tcp_stream(sizes[k], reps, true, NULL);
		base_mem[k] = bench_memcpy(sizes[k], reps, NULL);
		printf("| %zu MiB | %.2f | %.2f |\n", sizes[k] >> 20, base_tcp[k], base_mem[k]);
	}
	printf("\n| transport | op | unit | servers | trainers | GB/s (median of %d) | ratio to %s |\n"
	       "|---|---|---|---|---|---|---|\n", reps, "raw TCP (tcp) / memcpy (shm)");
	for (int ti = 0; ti < 2; ti++) {
		const struct zs_transport_ops *t = ti ? &zs_shm_transport : &zs_tcp_transport;
		for (int push = 0; push < 2; push++)
			for (int k = 0; k < 2; k++)
				for (int ns = 1; ns <= MAXS; ns++)
					for (int nt = 1; nt <= MAXT; nt++) {
						double g = run(t, srv, ns, nt, push, sizes[k],
							       reps, bufs);
						double b = ti ? base_mem[k] : base_tcp[k];
						printf("| %s | %s | %zu MiB | %d | %d | %.2f | %.2f |\n",
						       t->name, push ? "push" : "gather",
						       sizes[k] >> 20, ns, nt, g, g / b);
						fflush(stdout);
					}
	}
	/* the same over encrypted tcp (data_tls), beside plaintext, in turns */
	printf("\n| encrypted tcp (data_tls: %s) | op | unit | trainers | plaintext GB/s | encrypted GB/s | encrypted / plaintext |\n"
	       "|---|---|---|---|---|---|---|\n", tls_mode(&srv[0]));
	for (int push = 0; push < 2; push++)
		for (int k = 0; k < 2; k++)
			for (int nt = 1; nt <= MAXT; nt++) {
				double p[3], e[3];
				for (int round = 0; round < 3; round++) {
					p[round] = run_tls(&zs_tcp_transport, srv, 1, nt, push,
							   sizes[k], reps, bufs, 0);
					e[round] = run_tls(&zs_tcp_transport, srv, 1, nt, push,
							   sizes[k], reps, bufs, 1);
				}
				double pm = bench_median(p, 3), em = bench_median(e, 3);
				printf("| tcp | %s | %zu MiB | %d | %.2f | %.2f | %.2f |\n",
				       push ? "push" : "gather", sizes[k] >> 20, nt, pm, em, em / pm);
				fflush(stdout);
			}
	for (int s = 0; s < MAXS; s++)
		zs_listener_free(srv[s].l);
	for (int i = 0; i < MAXT; i++)
		free(bufs[i]);
	return 0;
}
