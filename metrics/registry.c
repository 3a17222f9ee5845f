/*
 * registry.c - the metrics registry and its text exposition (see
 * metrics/metrics.h). Families and series are kept in registration order
 * under one mutex, taken to register, forget and render; updates are
 * atomics on the series, values kept as the bits of a double.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "metrics/metrics.h"

enum mtype { COUNTER, GAUGE, HISTOGRAM };
static const char *const type_name[] = {"counter", "gauge", "histogram"};

struct zs_series {
	enum mtype type;
	char *labels;
	_Atomic uint64_t v; /* a double's bits: counter, gauge; a histogram's sum */
	/* histogram */
	unsigned n_bounds;
	double *bounds;
	_Atomic uint64_t *buckets; /* n_bounds + 1, not cumulative */
	struct zs_series *next;
};

struct family {
	char *name, *help;
	enum mtype type;
	struct zs_series *series, **tail;
	struct family *next;
};

struct collector {
	zs_metrics_collect_fn fn;
	void *ctx;
	struct collector *next;
};

struct zs_metrics {
	pthread_mutex_t mu;   /* families, series lists */
	pthread_mutex_t cmu;  /* one render (and its collectors) at a time */
	struct family *fams, **ftail;
	struct collector *cols, **ctail;
};

const double zs_metrics_seconds_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
					     0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
					     1,      2.5,     5,      10,    30,     60};
const unsigned zs_metrics_n_seconds_buckets =
	sizeof zs_metrics_seconds_buckets / sizeof zs_metrics_seconds_buckets[0];

static uint64_t bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

static double dbl(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

struct zs_metrics *zs_metrics_new(void)
{
	struct zs_metrics *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->cmu, NULL);
	m->ftail = &m->fams;
	m->ctail = &m->cols;
	return m;
}

static void series_free(struct zs_series *s)
{
	free(s->labels);
	free(s->bounds);
	free(s->buckets);
	free(s);
}

void zs_metrics_free(struct zs_metrics *m)
{
	if (!m)
		return;
	while (m->fams) {
		struct family *f = m->fams;
		m->fams = f->next;
		while (f->series) {
			struct zs_series *s = f->series;
			f->series = s->next;
			series_free(s);
		}
		free(f->name);
		free(f->help);
		free(f);
	}
	while (m->cols) {
		struct collector *c = m->cols;
		m->cols = c->next;
		free(c);
	}
	pthread_mutex_destroy(&m->mu);
	pthread_mutex_destroy(&m->cmu);
	free(m);
}

static bool good_name(const char *n)
{
	if (!n || !*n || (n[0] >= '0' && n[0] <= '9'))
		return false;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') ||
		      (*n >= '0' && *n <= '9') || *n == '_' || *n == ':'))
			return false;
	return true;
}

static struct zs_series *get(struct zs_metrics *m, enum mtype type, const char *name,
			     const char *help, const char *labels, const double *bounds,
			     unsigned n_bounds)
{
	struct family *f;
	struct zs_series *s = NULL;

	if (!m || !good_name(name))
		return NULL;
	if (!labels)
		labels = "";
	pthread_mutex_lock(&m->mu);
	for (f = m->fams; f && strcmp(f->name, name); f = f->next)
		;
	if (f && f->type != type) {
		zs_error("metrics: %s is a %s, not a %s (bug)", name, type_name[f->type],
			 type_name[type]);
		goto out;
	}
	if (!f) {
		if (!(f = calloc(1, sizeof *f)) || !(f->name = strdup(name)) ||
		    !(f->help = strdup(help ? help : ""))) {
			if (f)
				free(f->name);
			free(f);
			goto out;
		}
		f->type = type;
		f->tail = &f->series;
		*m->ftail = f;
		m->ftail = &f->next;
	}
	for (s = f->series; s && strcmp(s->labels, labels); s = s->next)
		;
	if (s)
		goto out;
	if (!(s = calloc(1, sizeof *s)) || !(s->labels = strdup(labels)))
		goto fail;
	s->type = type;
	if (type == HISTOGRAM) {
		s->n_bounds = n_bounds;
		s->bounds = malloc((n_bounds ? n_bounds : 1) * sizeof *s->bounds);
		s->buckets = calloc(n_bounds + 1, sizeof *s->buckets);
		if (!s->bounds || !s->buckets)
			goto fail;
		memcpy(s->bounds, bounds, n_bounds * sizeof *bounds);
	}
	*f->tail = s;
	f->tail = &s->next;
	goto out;
fail:
	if (s)
		series_free(s);
	s = NULL;
out:
	pthread_mutex_unlock(&m->mu);
	return s;
}

struct zs_series *zs_metrics_counter(struct zs_metrics *m, const char *name, const char *help,
				     const char *labels)
{
	return get(m, COUNTER, name, help, labels, NULL, 0);
}

struct zs_series *zs_metrics_gauge(struct zs_metrics *m, const char *name, const char *help,
				   const char *labels)
{
	return get(m, GAUGE, name, help, labels, NULL, 0);
}

struct zs_series *zs_metrics_histogram(struct zs_metrics *m, const char *name, const char *help,
				       const char *labels, const double *bounds, unsigned n_bounds)
{
	for (unsigned i = 1; i < n_bounds; i++)
		if (!(bounds[i] > bounds[i - 1]))
			return NULL;
	return get(m, HISTOGRAM, name, help, labels, bounds, n_bounds);
}

static void add_bits(_Atomic uint64_t *a, double v)
{
	uint64_t old = atomic_load_explicit(a, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(a, &old, bits(dbl(old) + v),
						      memory_order_relaxed, memory_order_relaxed))
		;
}

void zs_series_add(struct zs_series *s, double v)
{
	if (s && v >= 0)
		add_bits(&s->v, v);
}

void zs_series_set(struct zs_series *s, double v)
{
	if (s)
		atomic_store_explicit(&s->v, bits(v), memory_order_relaxed);
}

void zs_series_observe(struct zs_series *s, double v)
{
	unsigned i = 0;

	if (!s || s->type != HISTOGRAM || isnan(v))
		return;
	while (i < s->n_bounds && v > s->bounds[i])
		i++;
	add_bits(&s->v, v);
	atomic_fetch_add_explicit(&s->buckets[i], 1, memory_order_relaxed);
}

double zs_series_value(const struct zs_series *s)
{
	return s ? dbl(atomic_load_explicit(&((struct zs_series *)s)->v, memory_order_relaxed)) : 0;
}

void zs_series_histogram(const struct zs_series *s, uint64_t *count, double *sum)
{
	*count = 0;
	*sum = 0;
	if (!s || s->type != HISTOGRAM)
		return;
	for (unsigned i = 0; i <= s->n_bounds; i++)
		*count += atomic_load(&((struct zs_series *)s)->buckets[i]);
	*sum = zs_series_value(s);
}

enum zs_status zs_metrics_add_collector(struct zs_metrics *m, zs_metrics_collect_fn fn, void *ctx,
					struct zs_error *err)
{
	struct collector *c = calloc(1, sizeof *c);
	if (!c)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	*c = (struct collector){fn, ctx, NULL};
	pthread_mutex_lock(&m->mu);
	*m->ctail = c;
	m->ctail = &c->next;
	pthread_mutex_unlock(&m->mu);
	return ZS_OK;
}

void zs_metrics_forget(struct zs_metrics *m, const char *name)
{
	pthread_mutex_lock(&m->mu);
	for (struct family *f = m->fams; f; f = f->next) {
		if (strcmp(f->name, name))
			continue;
		while (f->series) {
			struct zs_series *s = f->series;
			f->series = s->next;
			series_free(s);
		}
		f->tail = &f->series;
	}
	pthread_mutex_unlock(&m->mu);
}

void zs_metrics_label(char *buf, size_t len, const char *key, const char *value)
{
	size_t o = 0;
	int k = snprintf(buf, len, "%s=\"", key);

	if (k < 0 || (size_t)k >= len)
		goto cut;
	o = (size_t)k;
	for (const char *v = value ? value : ""; *v; v++) {
		const char *e = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" : *v == '\n' ? "\\n" : NULL;
		size_t n = e ? 2 : 1;
		if (o + n + 2 > len)
			goto cut;
		memcpy(buf + o, e ? e : v, n);
		o += n;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return;
cut: /* never a half-escaped value: an empty one */
	if (len)
		snprintf(buf, len, "%s=\"\"", key);
}

struct out {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->oom)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->oom = true;
			return;
		}
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap * 2 + (size_t)n + 1;
		char *q = realloc(o->p, cap);
		if (!q) {
			o->oom = true;
			return;
		}
		o->p = q;
		o->cap = cap;
	}
}

/* a sample value as Prometheus reads it */
static void num(char *b, size_t len, double v)
{
	if (isnan(v))
		snprintf(b, len, "NaN");
	else if (isinf(v))
		snprintf(b, len, v > 0 ? "+Inf" : "-Inf");
	else if (v == (double)(int64_t)v && fabs(v) < 9e15)
		snprintf(b, len, "%lld", (long long)v);
	else {
		/* the shortest that reads back as v */
		for (int p = 6; p <= 17; p++) {
			snprintf(b, len, "%.*g", p, v);
			if (strtod(b, NULL) == v)
				break;
		}
	}
}

static void render_series(struct out *o, const struct family *f, struct zs_series *s)
{
	const char *l = s->labels, *sep = *l ? "," : "";
	char v[40];

	if (f->type != HISTOGRAM) {
		num(v, sizeof v, zs_series_value(s));
		put(o, *l ? "%s{%s} %s\n" : "%s%s %s\n", f->name, l, v);
		return;
	}
	uint64_t cum = 0;
	for (unsigned i = 0; i <= s->n_bounds; i++) {
		char le[40];
		cum += atomic_load(&s->buckets[i]);
		num(le, sizeof le, i < s->n_bounds ? s->bounds[i] : INFINITY);
		put(o, "%s_bucket{%s%sle=\"%s\"} %llu\n", f->name, l, sep, le,
		    (unsigned long long)cum);
	}
	num(v, sizeof v, zs_series_value(s));
	put(o, *l ? "%s_sum{%s} %s\n" : "%s_sum%s %s\n", f->name, l, v);
	put(o, *l ? "%s_count{%s} %llu\n" : "%s_count%s %llu\n", f->name, l,
	    (unsigned long long)cum);
}

char *zs_metrics_render(struct zs_metrics *m, size_t *len)
{
	struct out o = {0};

	pthread_mutex_lock(&m->cmu);
	for (struct collector *c = m->cols; c; c = c->next) /* the list only grows */
		c->fn(c->ctx, m);
	pthread_mutex_lock(&m->mu);
	o.cap = 4096;
	o.p = malloc(o.cap);
	o.oom = !o.p;
	for (struct family *f = m->fams; f; f = f->next) {
		if (!f->series)
			continue;
		put(&o, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name,
		    type_name[f->type]);
		for (struct zs_series *s = f->series; s; s = s->next)
			render_series(&o, f, s);
	}
	pthread_mutex_unlock(&m->mu);
	pthread_mutex_unlock(&m->cmu);
	if (o.oom) {
		free(o.p);
		return NULL;
	}
	*len = o.len;
	return o.p;
}
