/*
 * coord_rpc.c - control-plane latency: round trips of small coordinator RPCs
 * (Status, GetJob, Heartbeat) against a raw TCP ping-pong of the same size
 * class measured in the same run, so the ratio says what gRPC and the
 * coordinator add. Medians of REPS runs of N calls each.
 *
 *   coord_rpc COORDINATOR_ADDR JOB SERVER_ID [N] [REPS]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ctrl/coord_client.h"
#include "bench/timing.h"

static double now_us(void) { return bench_now() * 1e6; }

static int lsock;

static void *echo_server(void *arg)
{
	int c = accept(lsock, NULL, NULL), one = 1;
	char buf[64];
	(void)arg;
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	for (;;) {
		ssize_t n = read(c, buf, sizeof buf);
		if (n <= 0 || write(c, buf, (size_t)n) != n)
			break;
	}
	close(c);
	return NULL;
}

/* Median per-call latency (us) of a raw TCP 32-byte ping-pong. */
static double tcp_rtt(int n)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof a;
	pthread_t t;
	char buf[32] = {0};
	double *lat = malloc((size_t)n * sizeof *lat), m;
	int s, one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lsock = socket(AF_INET, SOCK_STREAM, 0);
	bind(lsock, (struct sockaddr *)&a, sizeof a);
	listen(lsock, 1);
	getsockname(lsock, (struct sockaddr *)&a, &len);
	pthread_create(&t, NULL, echo_server, NULL);
	s = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (connect(s, (struct sockaddr *)&a, sizeof a))
		return -1;
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		if (write(s, buf, sizeof buf) != sizeof buf || read(s, buf, sizeof buf) <= 0)
			return -1;
		lat[i] = now_us() - t0;
	}
	close(s);
	pthread_join(t, NULL);
	close(lsock);
	m = bench_median(lat, n);
	free(lat);
	return m;
}

int main(int argc, char **argv)
{
	struct zs_coord_client *c;
	struct zs_error err = {0};
	int n = argc > 4 ? atoi(argv[4]) : 2000, reps = argc > 5 ? atoi(argv[5]) : 5;
	double *lat, st[3][64], base[64];
	const char *names[3] = {"Status", "GetJob", "Heartbeat"};
	uint64_t sid;

	if (argc < 4 || reps > 64 || n < 1) {
		fprintf(stderr, "usage: coord_rpc COORDINATOR_ADDR JOB SERVER_ID [N] [REPS<=64]\n");
		return 2;
	}
	sid = strtoull(argv[3], NULL, 10);
	if (zs_coord_open(argv[1], 5000, 1, &c, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	lat = malloc((size_t)n * sizeof *lat);
	for (int r = 0; r < reps; r++) {
		for (int k = 0; k < 3; k++) {
			for (int i = 0; i < n; i++) {
				struct zs_coord_status s;
				struct zs_job j;
				uint32_t lease;
				uint64_t gen;
				double t0 = now_us();
				enum zs_status e =
					k == 0 ? zs_coord_status(c, &s, &err)
					: k == 1 ? zs_coord_get_job(c, argv[2], &j, &err)
						 : zs_coord_heartbeat(c, sid, "", &lease, &gen, &gen, &err);
				lat[i] = now_us() - t0;
				if (e) {
					fprintf(stderr, "%s: %s\n", names[k], err.msg);
					return 1;
				}
				if (k == 1)
					zs_job_release(&j);
			}
			st[k][r] = bench_median(lat, n);
		}
		base[r] = tcp_rtt(n);
	}
	printf("| call | median of %d runs x %d calls (us) | ratio to raw TCP round trip |\n|---|---|---|\n",
	       reps, n);
	double b = bench_median(base, reps);
	printf("| raw TCP 32 B ping-pong | %.1f | 1.00 |\n", b);
	for (int k = 0; k < 3; k++) {
		double m = bench_median(st[k], reps);
		printf("| %s | %.1f | %.2f |\n", names[k], m, m / b);
	}
	free(lat);
	zs_coord_close(c);
	return 0;
}
