/* baselines.c - the physical limits the benchmarks compare with (see
 * baselines.h). */
#include "bench/baselines.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "net/sockio.h"
#include "bench/timing.h"

struct sink_arg {
	int fd;
	size_t bytes;
	int reps;
	bool full; /* receive into a buffer of the transfer's size */
};

static void *sink(void *arg)
{
	struct sink_arg *a = arg;
	int c = accept(a->fd, NULL, NULL);
	size_t blen = a->full ? a->bytes : (size_t)1 << 20;
	char *b = malloc(blen);

	zs_tune_tcp(c); /* the same socket settings as the transport's */
	memset(b, 0, blen);
	for (size_t left = a->bytes * (size_t)(a->reps + 1); left;) {
		size_t at = a->full ? (a->bytes - left % a->bytes) % a->bytes : 0;
		size_t want = left % a->bytes ? left % a->bytes : a->bytes;
		ssize_t n = recv(c, b + at, a->full ? want : (left < blen ? left : blen), 0);
		if (n <= 0)
			break;
		left -= (size_t)n;
		if ((left % a->bytes) == 0) {
			char ack = 1;
			if (send(c, &ack, 1, 0) != 1)
				break;
		}
	}
	free(b);
	close(c);
	return NULL;
}

double bench_tcp_stream(size_t bytes, int reps, bool full, double *v)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof a;
	struct sink_arg sa = {.bytes = bytes, .reps = reps, .full = full};
	size_t slen = full ? bytes : (size_t)1 << 20;
	pthread_t th;
	char *src = malloc(slen), ack;
	double gbs[64], med = 0;
	int s;

	if (reps > 64)
		reps = sa.reps = 64;
	memset(src, 1, slen);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(sa.fd, (struct sockaddr *)&a, sizeof a) || listen(sa.fd, 1) ||
	    getsockname(sa.fd, (struct sockaddr *)&a, &al))
		goto out;
	pthread_create(&th, NULL, sink, &sa);
	s = socket(AF_INET, SOCK_STREAM, 0);
	zs_tune_tcp(s);
	if (connect(s, (struct sockaddr *)&a, sizeof a))
		goto out;
	for (int r = 0; r < reps + 1; r++) {
		double t0 = bench_now();
		for (size_t off = 0; off < bytes; off += 1 << 20) {
			struct iovec iv = {src + (full ? off : 0),
					   bytes - off < (1 << 20) ? bytes - off : (1 << 20)};
			zs_writev_full(s, &iv, 1);
		}
		if (recv(s, &ack, 1, MSG_WAITALL) != 1)
			break;
		if (r > 0) /* the first run warms the connection */
			gbs[r - 1] = (double)bytes / (bench_now() - t0) / 1e9;
	}
	close(s);
	pthread_join(th, NULL);
	if (v)
		memcpy(v, gbs, (size_t)reps * sizeof *v);
	med = bench_median(gbs, reps);
out:
	close(sa.fd);
	free(src);
	return med;
}

double bench_memcpy(size_t bytes, int reps, double *v)
{
	char *a = malloc(bytes), *b = malloc(bytes);
	double gbs[64];

	if (reps > 64)
		reps = 64;
	memset(a, 1, bytes);
	memset(b, 2, bytes);
	for (int r = 0; r < reps; r++) {
		double t0 = bench_now();
		memcpy(b, a, bytes);
		gbs[r] = (double)bytes / (bench_now() - t0) / 1e9;
		a[r] = b[bytes - 1 - (size_t)r];
	}
	free(a);
	free(b);
	if (v)
		memcpy(v, gbs, (size_t)reps * sizeof *v);
	return bench_median(gbs, reps);
}

struct triad {
	float *a;
	const float *b, *c;
	size_t n;
};

BENCH_CLONES
static void *triad_part(void *arg)
{
	struct triad *t = arg;
	for (size_t i = 0; i < t->n; i++)
		t->a[i] = t->b[i] + 1.5f * t->c[i];
	return NULL;
}

double bench_triad(float *a, const float *b, const float *c, size_t n, unsigned th)
{
	pthread_t t[2];
	struct triad p[2];
	size_t per;
	double t0 = bench_now();

	th = th < 1 ? 1 : th > 2 ? 2 : th;
	per = n / th;
	for (unsigned i = 0; i < th; i++) {
		p[i] = (struct triad){a + i * per, b + i * per, c + i * per,
				      i + 1 == th ? n - i * per : per};
		if (i)
			pthread_create(&t[i], NULL, triad_part, &p[i]);
	}
	triad_part(&p[0]);
	for (unsigned i = 1; i < th; i++)
		pthread_join(t[i], NULL);
	return 12.0 * (double)n / (bench_now() - t0) / 1e9;
}

struct traffic {
	float *p, *m, *v;
	const float *g;
	size_t n;
};

BENCH_CLONES
static void *traffic_part(void *arg)
{
	struct traffic *t = arg;
	for (size_t i = 0; i < t->n; i++) {
		float gi = t->g[i];
		t->p[i] += gi;
		t->m[i] += gi;
		t->v[i] += gi;
	}
	return NULL;
}

double bench_adamw_traffic(float *p, float *m, float *v, const float *g, size_t n,
			   unsigned th)
{
	struct traffic t[2];
	pthread_t tid;
	size_t per;
	double t0 = bench_now();

	th = th < 1 ? 1 : th > 2 ? 2 : th;
	per = n / th;
	for (unsigned i = 0; i < th; i++)
		t[i] = (struct traffic){p + i * per, m + i * per, v + i * per, g + i * per,
					i + 1 == th ? n - i * per : per};
	if (th == 2 && pthread_create(&tid, NULL, traffic_part, &t[1]))
		th = 1, traffic_part(&t[1]);
	traffic_part(&t[0]);
	if (th == 2)
		pthread_join(tid, NULL);
	return 28.0 * (double)n / (bench_now() - t0) / 1e9;
}

double bench_write_fsync(const char *path, const void *buf, size_t chunk, size_t bytes)
{
	double t0 = bench_now();
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return 0;
	for (size_t off = 0; off < bytes;) {
		ssize_t w = write(fd, buf, bytes - off < chunk ? bytes - off : chunk);
		if (w <= 0) {
			close(fd);
			return 0;
		}
		off += (size_t)w;
	}
	fsync(fd);
	close(fd);
	return (double)bytes / (bench_now() - t0) / 1e9;
}

double bench_read_seq(const char *path, void *buf, size_t chunk, size_t bytes)
{
	double t0 = bench_now();
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return 0;
	for (size_t off = 0; off < bytes;) {
		ssize_t r = read(fd, buf, chunk);
		if (r <= 0) {
			close(fd);
			return 0;
		}
		off += (size_t)r;
	}
	close(fd);
	return (double)bytes / (bench_now() - t0) / 1e9;
}
