/*
 * metrics.h - a daemon's Prometheus metrics: a registry of counters,
 * gauges and histograms, rendered in Prometheus's text exposition format
 * (version 0.0.4) and served at /metrics by metrics/http.c.
 *
 * A series is one labelled time series of a family (a metric name with its
 * HELP and TYPE). Hot paths register their series once and update them
 * lock-free (atomics); values the daemon already keeps elsewhere (its
 * engine's bytes, its jobs' steps, the process's memory) are set by
 * collectors, which run at each scrape, before the text is rendered.
 *
 * Names follow Prometheus's conventions: zshard_<daemon>_<what>_<unit>,
 * base units (seconds, bytes), counters ending in _total. A zshard job is
 * labelled zshard_job (Prometheus's own "job" label names the scrape job).
 */
#ifndef ZS_METRICS_H
#define ZS_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/util.h"

struct zs_metrics;
struct zs_series;

struct zs_metrics *zs_metrics_new(void);
/* After every user (the HTTP server, the hot paths) is gone. */
void zs_metrics_free(struct zs_metrics *m);

/*
 * The series of family `name` with these labels ("" or `k="v",k2="v2"`,
 * values escaped with zs_metrics_label), made on first use. The same call
 * again returns the same series. NULL: out of memory, a malformed name, or
 * a family of that name of another type (a bug, logged).
 */
struct zs_series *zs_metrics_counter(struct zs_metrics *m, const char *name, const char *help,
				     const char *labels);
struct zs_series *zs_metrics_gauge(struct zs_metrics *m, const char *name, const char *help,
				   const char *labels);
/* bounds: the buckets' upper bounds, increasing (+Inf is implied). */
struct zs_series *zs_metrics_histogram(struct zs_metrics *m, const char *name, const char *help,
				       const char *labels, const double *bounds, unsigned n_bounds);

/* Updates; each is a no-op on NULL (a series that could not be made). */
void zs_series_add(struct zs_series *s, double v);     /* a counter: v >= 0 */
void zs_series_set(struct zs_series *s, double v);     /* a gauge, or a counter kept elsewhere */
void zs_series_observe(struct zs_series *s, double v); /* a histogram */
double zs_series_value(const struct zs_series *s);     /* a counter's or gauge's */
/* A histogram's observation count and the sum of what it observed. */
void zs_series_histogram(const struct zs_series *s, uint64_t *count, double *sum);

/* Latency buckets in seconds, 100 us to 60 s, for the daemons' histograms. */
extern const double zs_metrics_seconds_buckets[];
extern const unsigned zs_metrics_n_seconds_buckets;

/*
 * A collector sets the values the daemon keeps elsewhere; it runs at each
 * render (one render at a time), may create series and forget families.
 */
typedef void (*zs_metrics_collect_fn)(void *ctx, struct zs_metrics *m);
enum zs_status zs_metrics_add_collector(struct zs_metrics *m, zs_metrics_collect_fn fn, void *ctx,
					struct zs_error *err);
/* From a collector: drops every series of family name (e.g. the per-job
 * gauges, before the current jobs' are set). Never for a family whose
 * series a hot path holds. */
void zs_metrics_forget(struct zs_metrics *m, const char *name);

/* Writes `key="value"` into buf with value escaped (\\, \", \n). */
void zs_metrics_label(char *buf, size_t len, const char *key, const char *value);

/* The exposition text (malloc'd, NUL-terminated; *len without the NUL),
 * after running the collectors. NULL: out of memory. */
char *zs_metrics_render(struct zs_metrics *m, size_t *len);

/* The process_* metrics every Prometheus client exports (memory, CPU,
 * file descriptors, start time), from /proc (metrics/process.c). */
enum zs_status zs_metrics_add_process(struct zs_metrics *m, struct zs_error *err);

/*
 * The HTTP endpoint (metrics/http.c, libmicrohttpd): serves GET /metrics
 * at addr (HOST:PORT, port 0: a free one), in a thread of its own, with
 * bounded connection times. bound receives the address to scrape. With
 * tls (the daemon's certificate and key, PEM, read during the call only;
 * NULL: plain http) it serves https only, TLS 1.2 with ECDHE and AES-GCM or TLS 1.3, as the control
 * plane does; a plain request gets no answer. With tls->clients_ca too,
 * only a client presenting a certificate that CA signed is answered
 * (others get 403, saying so).
 */
struct zs_metrics_tls {
	const char *cert, *key;
	const char *clients_ca; /* NULL: any client */
};
struct zs_metrics_http;
enum zs_status zs_metrics_http_start(struct zs_metrics *m, const char *addr,
				     const struct zs_metrics_tls *tls, char *bound,
				     size_t bound_len, struct zs_metrics_http **out,
				     struct zs_error *err);
void zs_metrics_http_stop(struct zs_metrics_http *h);

#endif
