/*
 * test_metrics.c - the metrics registry and its endpoint: the exposition
 * text (HELP, TYPE, labels escaped, cumulative histogram buckets, _sum and
 * _count), exact counts under concurrent updates, collectors and forgotten
 * families, refused names and types, and the HTTP endpoint over a real
 * socket (200, 404, 405, a port in use, nothing left open after a stop).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/util.h"
#include "metrics/metrics.h"
#include "tests/unit/fixtures.h"

static char *render(struct zs_metrics *m)
{
	size_t len;
	char *t = zs_metrics_render(m, &len);
	assert_non_null(t);
	assert_int_equal(strlen(t), len);
	return t;
}

static void test_exposition(void **st)
{
	struct zs_metrics *m = zs_metrics_new();
	const double b[] = {0.1, 1, 10};
	struct zs_series *c, *g, *h, *h2;
	char l[128], *t;

	(void)st;
	c = zs_metrics_counter(m, "zs_test_ops_total", "Ops.", "op=\"push\"");
	g = zs_metrics_gauge(m, "zs_test_bytes", "Bytes now.", "");
	h = zs_metrics_histogram(m, "zs_test_seconds", "Latency.", "op=\"gather\"", b, 3);
	assert_non_null(c);
	assert_non_null(g);
	assert_non_null(h);
	/* the same name and labels: the same series */
	assert_ptr_equal(zs_metrics_counter(m, "zs_test_ops_total", "Ops.", "op=\"push\""), c);
	zs_series_add(c, 2);
	zs_series_add(c, 3);
	zs_series_add(c, -1); /* a counter never goes down */
	zs_series_set(g, 1e12);
	zs_series_observe(h, 0.05);
	zs_series_observe(h, 0.1); /* le is inclusive */
	zs_series_observe(h, 5);
	zs_series_observe(h, 100);
	t = render(m);
	assert_non_null(strstr(t, "# HELP zs_test_ops_total Ops.\n# TYPE zs_test_ops_total counter\n"
				  "zs_test_ops_total{op=\"push\"} 5\n"));
	assert_non_null(strstr(t, "# TYPE zs_test_bytes gauge\nzs_test_bytes 1000000000000\n"));
	assert_non_null(strstr(t, "# TYPE zs_test_seconds histogram\n"
				  "zs_test_seconds_bucket{op=\"gather\",le=\"0.1\"} 2\n"
				  "zs_test_seconds_bucket{op=\"gather\",le=\"1\"} 2\n"
				  "zs_test_seconds_bucket{op=\"gather\",le=\"10\"} 3\n"
				  "zs_test_seconds_bucket{op=\"gather\",le=\"+Inf\"} 4\n"
				  "zs_test_seconds_sum{op=\"gather\"} 105.15\n"
				  "zs_test_seconds_count{op=\"gather\"} 4\n"));
	free(t);

	/* a label value with quotes, a backslash and a newline is escaped */
	zs_metrics_label(l, sizeof l, "zshard_job", "a\"b\\c\nd");
	assert_string_equal(l, "zshard_job=\"a\\\"b\\\\c\\nd\"");
	zs_metrics_label(l, 20, "zshard_job", "far too long a value");
	assert_string_equal(l, "zshard_job=\"\""); /* never half an escape */
	zs_metrics_label(l, 24, "k", "\"\"\"\"\"\"\"\"\"\"\"\"");
	assert_string_equal(l, "k=\"\"");

	/* a bad name, another type under a name, unsorted buckets: refused */
	assert_null(zs_metrics_counter(m, "9lives", "x", ""));
	assert_null(zs_metrics_counter(m, "bad-name", "x", ""));
	assert_null(zs_metrics_gauge(m, "zs_test_ops_total", "x", "op=\"pull\""));
	const double unsorted[] = {1, 0.5};
	assert_null(zs_metrics_histogram(m, "zs_test_other_seconds", "x", "", unsorted, 2));
	/* and an update of a series that could not be made does nothing */
	zs_series_add(NULL, 1);
	zs_series_observe(NULL, 1);
	h2 = zs_metrics_histogram(m, "zs_test_seconds", "Latency.", "op=\"push\"", b, 3);
	uint64_t n;
	double sum;
	zs_series_histogram(h2, &n, &sum);
	assert_int_equal(n, 0);
	zs_series_histogram(h, &n, &sum);
	assert_int_equal(n, 4);
	assert_true(sum == 105.15);
	zs_metrics_free(m);
}

struct adder {
	struct zs_series *c, *h;
};

static void *add_main(void *arg)
{
	struct adder *a = arg;
	for (int i = 0; i < 100000; i++) {
		zs_series_add(a->c, 1);
		zs_series_observe(a->h, (double)(i % 3));
	}
	return NULL;
}

static void test_concurrent_updates_are_exact(void **st)
{
	struct zs_metrics *m = zs_metrics_new();
	const double b[] = {0.5, 1.5};
	struct adder a = {zs_metrics_counter(m, "zs_test_total", "x", ""),
			  zs_metrics_histogram(m, "zs_test_h", "x", "", b, 2)};
	pthread_t th[4];
	uint64_t n;
	double sum;

	(void)st;
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, add_main, &a), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_true(zs_series_value(a.c) == 400000.0);
	zs_series_histogram(a.h, &n, &sum);
	assert_int_equal(n, 400000);
	/* 0, 1, 2 repeating: 33334 + 33333 + 33333 per thread */
	assert_true(sum == 4.0 * (33333.0 * 1 + 33333.0 * 2));
	zs_metrics_free(m);
}

static int runs;
static void collect(void *ctx, struct zs_metrics *m)
{
	char l[64];
	(void)ctx;
	runs++;
	zs_metrics_forget(m, "zs_test_job_step");
	snprintf(l, sizeof l, "zshard_job=\"run%d\"", runs);
	zs_series_set(zs_metrics_gauge(m, "zs_test_job_step", "Step.", l), runs * 10);
}

static void test_collectors_and_forgotten_families(void **st)
{
	struct zs_metrics *m = zs_metrics_new();
	char *t;

	(void)st;
	assert_int_equal(zs_metrics_add_collector(m, collect, NULL, NULL), ZS_OK);
	assert_int_equal(zs_metrics_add_process(m, NULL), ZS_OK);
	t = render(m);
	assert_non_null(strstr(t, "zs_test_job_step{zshard_job=\"run1\"} 10\n"));
	assert_non_null(strstr(t, "# TYPE process_resident_memory_bytes gauge\n"));
	assert_non_null(strstr(t, "# TYPE process_cpu_seconds_total counter\n"));
	assert_null(strstr(t, "process_resident_memory_bytes 0\n"));
	free(t);
	t = render(m);
	assert_null(strstr(t, "run1")); /* forgotten: gone from the text */
	assert_non_null(strstr(t, "zs_test_job_step{zshard_job=\"run2\"} 20\n"));
	free(t);
	zs_metrics_free(m);
}

/* GET or POST path from addr; the status code, the body into buf */
static int http(const char *addr, const char *method, const char *path, char *buf, size_t len)
{
	char host[ZS_HOST_MAX], req[256];
	uint16_t port;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd, code = -1;
	size_t got = 0;
	ssize_t k;

	assert_int_equal(zs_parse_hostport(addr, host, &port, NULL), ZS_OK);
	sa.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, host, &sa.sin_addr), 1);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		 method, path);
	assert_true(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
	while (got + 1 < len && (k = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)k;
	buf[got] = '\0';
	close(fd);
	sscanf(buf, "HTTP/1.1 %d", &code);
	return code;
}

static void test_http_endpoint(void **st)
{
	struct zs_metrics *m = zs_metrics_new();
	struct zs_metrics_http *h, *h2;
	struct zs_error err = {0};
	char addr[64], addr2[64], *buf = malloc(1 << 16);
	int fds = fixture_open_fds();

	(void)st;
	zs_series_set(zs_metrics_gauge(m, "zs_test_up", "Up.", ""), 1);
	assert_int_equal(zs_metrics_http_start(m, "127.0.0.1:0", NULL, addr, sizeof addr, &h, &err), ZS_OK);
	assert_non_null(strstr(addr, "127.0.0.1:"));
	assert_int_equal(http(addr, "GET", "/metrics", buf, 1 << 16), 200);
	assert_non_null(strstr(buf, "Content-Type: text/plain; version=0.0.4"));
	assert_non_null(strstr(buf, "\r\n\r\n# HELP zs_test_up Up.\n# TYPE zs_test_up gauge\nzs_test_up 1\n"));
	assert_int_equal(http(addr, "GET", "/", buf, 1 << 16), 404);
	assert_int_equal(http(addr, "POST", "/metrics", buf, 1 << 16), 405);
	assert_non_null(strstr(buf, "Allow: GET, HEAD"));
	/* the same address again: a clear error, nothing started */
	assert_int_equal(zs_metrics_http_start(m, addr, NULL, addr2, sizeof addr2, &h2, &err), ZS_EUNAVAIL);
	assert_non_null(strstr(err.msg, "cannot serve metrics at"));
	assert_null(h2);
	assert_int_equal(zs_metrics_http_start(m, "no-port", NULL, addr2, sizeof addr2, &h2, &err), ZS_EINVAL);
	assert_int_equal(zs_metrics_http_start(m, "nonexistent.invalid:0", NULL, addr2, sizeof addr2, &h2,
					       &err),
			 ZS_EINVAL);
	zs_metrics_http_stop(h);
	assert_int_equal(fixture_open_fds(), fds); /* the listening socket went with it */
	zs_metrics_free(m);
	free(buf);
}

/* An idle connection to addr from src (127.0.0.x); -1 when refused at once. */
static int idle_from(const char *addr, const char *src)
{
	char host[ZS_HOST_MAX];
	uint16_t port;
	struct sockaddr_in sa = {.sin_family = AF_INET}, me = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(zs_parse_hostport(addr, host, &port, NULL), ZS_OK);
	sa.sin_port = htons(port);
	assert_int_equal(inet_pton(AF_INET, host, &sa.sin_addr), 1);
	assert_int_equal(inet_pton(AF_INET, src, &me.sin_addr), 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof me), 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Idle clients cannot lock scrapers out: 72 connections that say nothing,
 * from nine loopback addresses, fill the endpoint (64 in all, 8 from one
 * address); those past its limits are refused and counted (one log line,
 * not one each), and each idle one is closed after 5 s, after which a
 * scrape goes through, with the count.
 */
static void test_idle_clients_and_limits(void **st)
{
	struct zs_metrics *m = zs_metrics_new();
	struct zs_metrics_http *h;
	struct zs_error err = {0};
	char addr[64], src[32], *buf = malloc(1 << 16);
	int fd[72], n = 0, code = -1;
	int64_t deadline;

	(void)st;
	assert_int_equal(zs_metrics_http_start(m, "127.0.0.1:0", NULL, addr, sizeof addr, &h, &err), ZS_OK);
	for (int a = 2; a <= 10; a++)
		for (int k = 0; k < 8; k++) {
			snprintf(src, sizeof src, "127.0.0.%d", a);
			fd[n++] = idle_from(addr, src);
		}
	/* the endpoint takes a scrape again once the idle ones are closed */
	deadline = zs_now_ms() + 30000;
	while (zs_now_ms() < deadline && (code = http(addr, "GET", "/metrics", buf, 1 << 16)) != 200)
		usleep(100 * 1000);
	if (code != 200)
		fail_msg("no scrape went through within 30 s of 72 idle clients (last: %d)", code);
	{
		const char *v = strstr(buf, "\nzshard_metrics_refused_connections_total ");
		assert_non_null(v);
		assert_true(atof(v + strlen("\nzshard_metrics_refused_connections_total ")) >= 1);
	}
	/* the idle ones were closed by the endpoint: they read end of file */
	for (int i = 0; i < n; i++) {
		char c;
		if (fd[i] < 0)
			continue;
		struct timeval tv = {.tv_sec = 20};
		setsockopt(fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		assert_true(read(fd[i], &c, 1) <= 0);
		close(fd[i]);
	}
	zs_metrics_http_stop(h);
	zs_metrics_free(m);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_clients_and_limits),
		cmocka_unit_test(test_exposition),
		cmocka_unit_test(test_concurrent_updates_are_exact),
		cmocka_unit_test(test_collectors_and_forgotten_families),
		cmocka_unit_test(test_http_endpoint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
