/*
 * metrics.c - the coordinator's Prometheus metrics (--metrics HOST:PORT):
 * every RPC by method and status, timed; membership (servers up and down,
 * leases that lapsed); each job's trainers, stage, timeline and latest
 * reported step; rollbacks; checkpoints by state and the time from a
 * checkpoint's start to its commit or failure; and the process.
 */
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "ctrl/tls.h"

#include "metrics/metrics.h"

struct coord_metrics {
	struct zs_metrics *m;
	struct zs_metrics_http *http;
	char addr[ZS_ADDR_MAX]; /* as bound */
	char adv[ZS_ADDR_MAX];  /* as told (Status) */
	struct zs_series *lapse_srv, *lapse_tr, *rollbacks, *failovers, *bad_ckpts, *ckpt_secs[2];
	struct zs_series *srv_up, *srv_down, *jobs, *ckpts[4], *leader;
	/* by method index, made at start: an RPC's answer touches only atomics */
	const struct zs_rpc_method *methods;
	size_t n_methods;
	struct zs_series **ok, **secs;
};

/* the method's last path element: "/zshard.Coordinator/Join" -> "Join" */
static const char *method_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* a status as a label value: "not found" -> "not_found" */
static void code_name(enum zs_status st, char *buf, size_t len)
{
	const char *s = zs_strerror(st);
	size_t o = 0;

	for (; *s && o + 1 < len; s++) {
		bool word = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9');
		if (word)
			buf[o++] = (char)(*s >= 'A' && *s <= 'Z' ? *s + 32 : *s);
		else if (o && buf[o - 1] != '_')
			buf[o++] = '_';
	}
	while (o && buf[o - 1] == '_')
		o--;
	buf[o] = '\0';
}

/* With mutual TLS: when the daemon's certificate expires, which an alert
 * watches (deploy/prometheus/zshard-alerts.yml) */
#define CERT_EXPIRY "zshard_tls_certificate_expiry_timestamp_seconds", \
	"When this daemon's TLS certificate (--tls-cert) stops being valid (Unix seconds)."

#define RPCS_TOTAL "zshard_coordinator_rpcs_total", "RPCs answered, by method and status."

static struct zs_series *rpcs_total(struct zs_metrics *m, const char *path, enum zs_status st)
{
	char l[160], code[40];

	code_name(st, code, sizeof code);
	snprintf(l, sizeof l, "method=\"%s\",code=\"%s\"", method_name(path), code);
	return zs_metrics_counter(m, RPCS_TOTAL, l);
}

static void on_rpc(void *ctx, size_t i, enum zs_status st, double seconds)
{
	struct coord_metrics *x = ctx;

	if (i >= x->n_methods)
		return;
	/* a failure's series is looked up (and made once): failures are rare */
	zs_series_add(st ? rpcs_total(x->m, x->methods[i].path, st) : x->ok[i], 1);
	zs_series_observe(x->secs[i], seconds);
}

static void job_gauge(struct zs_metrics *m, const char *name, const char *help, const char *l,
		      double v)
{
	zs_series_set(zs_metrics_gauge(m, name, help, l), v);
}

/* A job's shards with fewer live, seeded copies than its replicas (a
 * server down, a rebuilt copy not seeded yet): the next loss of one of
 * them rolls the job back. 0 without replicas. */
static uint32_t degraded(const struct coord *c, const struct zs_job *j)
{
	const struct zs_placement *p = &j->placement;
	uint32_t n = 0;

	if (j->spec.replicas < 2)
		return 0;
	for (uint32_t i = 0; i < p->n_shards; i++) {
		const struct zs_shard *a = &p->shards[i];
		uint32_t live = 0;
		bool first = true;
		for (uint32_t k = 0; k < p->n_shards && first; k++) /* count each shard once */
			first = !(k < i && p->shards[k].unit == a->unit && p->shards[k].index == a->index);
		if (!first)
			continue;
		for (uint32_t k = 0; k < p->n_shards; k++) {
			const struct zs_shard *b = &p->shards[k];
			if (b->unit != a->unit || b->index != a->index || b->fresh)
				continue;
			for (size_t s = 0; s < c->n_srvs; s++)
				live += c->srvs[s].info.id == b->server_id && zs_mbr_up(&c->srvs[s].m);
		}
		n += live < j->spec.replicas;
	}
	return n;
}

/* The job's registered readers, and the versions they hold pinned (each
 * version once); caller holds c->mu. */
static void readers_count(const struct coord *c, const char *job, uint32_t *readers,
			  uint32_t *versions)
{
	*readers = *versions = 0;
	for (const struct rdr *r = c->readers; r; r = r->next) {
		bool seen = false;
		if (strcmp(r->job, job))
			continue;
		(*readers)++;
		if (!r->i.pinned)
			continue;
		for (const struct rdr *q = c->readers; q != r && !seen; q = q->next)
			seen = !strcmp(q->job, job) && q->i.pinned && q->i.step == r->i.step &&
			       q->i.timeline == r->i.timeline;
		*versions += !seen;
	}
}

/* The gauges an operator's dashboard and alerts need beyond the basics:
 * the newest committed checkpoint's time and the interval, replicas
 * degraded, weight readers and their versions, and the step's split (the
 * mean over the ranks' latest reports). names: per_job's from the 7th. */
static void job_more(struct coord *c, struct zs_metrics *m, const struct zs_job *j,
		     const char *l, const char *const *names)
{
	int64_t newest = 0;
	uint32_t readers = 0, versions = 0, n = 0;
	double part[5] = {0};
	static const char *const parts[5] = {"step", "compute", "gather_wait", "push_wait",
					     "coordinator"};

	for (size_t i = 0; i < c->ck.n; i++) {
		const struct zs_checkpoint *k = &c->ck.list[i];
		if (coord_ckpt_of(k, j) && k->state == ZS_CKPT_COMMITTED && k->created_ms > newest)
			newest = k->created_ms;
	}
	if (newest)
		job_gauge(m, names[0],
			  "When the job's newest committed checkpoint was taken (Unix seconds).", l,
			  (double)newest / 1000.0);
	job_gauge(m, names[1], "Steps between the job's automatic checkpoints (0: none).", l,
		  (double)j->spec.checkpoint_every);
	job_gauge(m, names[2],
		  "Shards with fewer live, seeded copies than the job's replicas (0 without replicas): the next loss of one rolls the job back.",
		  l, degraded(c, j));
	readers_count(c, j->spec.name, &readers, &versions);
	job_gauge(m, names[3], "Weight readers registered (include/zshard_reader.h).", l, readers);
	job_gauge(m, names[4], "Versions the job's readers hold pinned.", l, versions);
	for (struct sreports *r = c->reports; r; r = r->next) {
		if (strcmp(r->job, j->spec.name))
			continue;
		for (uint32_t k = 0; k < r->n; k++) {
			const struct zs_step_report *s = &r->r[k];
			if (!s->reported_ms)
				continue;
			n++;
			part[0] += s->seconds;
			part[1] += s->compute_seconds;
			part[2] += s->gather_wait_seconds;
			part[3] += s->push_wait_seconds;
			part[4] += s->control_seconds;
		}
	}
	for (int p = 0; n && p < 5; p++) {
		char lp[ZS_JOB_NAME_MAX * 2 + 48];
		snprintf(lp, sizeof lp, "%s,part=\"%s\"", l, parts[p]);
		job_gauge(m, names[5],
			  "The latest step's time and its split (compute, waiting on gathers, on pushes, on the coordinator), the mean over the ranks' latest reports.",
			  lp, part[p] / n);
	}
}

static void collect(void *ctx, struct zs_metrics *m)
{
	struct coord *c = ctx;
	struct coord_metrics *x = c->metrics;
	uint32_t up = 0, n_state[4] = {0};
	static const char *const per_job[] = {"zshard_coordinator_job_trainers",
					      "zshard_coordinator_job_world_size",
					      "zshard_coordinator_job_stage", "zshard_coordinator_job_timeline",
					      "zshard_coordinator_job_step", "zshard_coordinator_job_info",
					      "zshard_coordinator_job_checkpoint_timestamp_seconds",
					      "zshard_coordinator_job_checkpoint_every",
					      "zshard_coordinator_job_degraded_shards",
					      "zshard_coordinator_job_readers",
					      "zshard_coordinator_job_reader_versions",
					      "zshard_coordinator_job_step_seconds"};

	for (size_t i = 0; i < sizeof per_job / sizeof per_job[0]; i++)
		zs_metrics_forget(m, per_job[i]);
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->n_srvs; i++)
		up += zs_mbr_up(&c->srvs[i].m);
	zs_series_set(x->srv_up, up);
	zs_series_set(x->srv_down, (double)(c->n_srvs - up));
	zs_series_set(x->jobs, (double)c->n_jobs);
	zs_series_set(x->leader, atomic_load(&c->ha.leading));
	for (size_t i = 0; i < c->ck.n; i++)
		if ((unsigned)c->ck.list[i].state < 4)
			n_state[c->ck.list[i].state]++;
	for (int s = 1; s < 4; s++)
		zs_series_set(x->ckpts[s], n_state[s]);
	for (size_t i = 0; i < c->n_jobs; i++) {
		const struct zs_job *j = &c->jobs[i];
		char l[ZS_JOB_NAME_MAX * 2 + 16];
		uint64_t top = 0;
		bool any = false;
		zs_metrics_label(l, sizeof l, "zshard_job", j->spec.name);
		job_gauge(m, per_job[0], "Trainer ranks joined (holding leases).", l, j->n_trainers);
		job_gauge(m, per_job[1], "The job's world size.", l, j->spec.world_size);
		job_gauge(m, per_job[2], "The job's ZeRO stage.", l, j->spec.stage);
		job_gauge(m, per_job[3], "Grows at every restore or rollback.", l, (double)j->timeline);
		{
			/* which creation of the job of this name: its incarnation */
			char li[sizeof l + 48];
			size_t at = (size_t)snprintf(li, sizeof li, "%s,", l);
			char inc[17];
			snprintf(inc, sizeof inc, "%016llx", (unsigned long long)j->incarnation);
			zs_metrics_label(li + at, sizeof li - at, "incarnation", inc);
			job_gauge(m, per_job[5],
				  "1 for the job's incarnation (each creation of a job under a name has one of its own).",
				  li, 1.0);
		}
		for (struct sreports *r = c->reports; r; r = r->next) {
			if (strcmp(r->job, j->spec.name))
				continue;
			for (uint32_t k = 0; k < r->n; k++)
				if (r->r[k].reported_ms) {
					any = true;
					top = r->r[k].step > top ? r->r[k].step : top;
				}
		}
		if (!any && j->stopped_step) { /* every rank left: steps before it are done */
			any = true;
			top = j->stopped_step - 1;
		}
		if (any)
			job_gauge(m, per_job[4],
				  "The latest step a trainer of the job reported (after a clean stop: the last step done).",
				  l, (double)top);
		job_more(c, m, j, l, per_job + 6);
	}
	pthread_mutex_unlock(&c->mu);
}

void coord_metrics_event(struct coord *c, enum coord_event ev)
{
	struct coord_metrics *x = c->metrics;

	if (!x)
		return;
	zs_series_add(ev == COORD_EV_SERVER_LAPSE    ? x->lapse_srv
		      : ev == COORD_EV_TRAINER_LAPSE ? x->lapse_tr
		      : ev == COORD_EV_FAILOVER      ? x->failovers
		      : ev == COORD_EV_BAD_CKPT      ? x->bad_ckpts
						     : x->rollbacks,
		      1);
}

void coord_metrics_ckpt(struct coord *c, bool committed, double seconds)
{
	if (c->metrics)
		zs_series_observe(c->metrics->ckpt_secs[committed], seconds);
}

enum zs_status coord_metrics_start(struct coord *c, const char *addr, const char *advertise,
				   bool certified, const struct zs_rpc_method *methods,
				   size_t n_methods, struct zs_error *err)
{
	struct coord_metrics *x = calloc(1, sizeof *x);
	struct zs_metrics *m;
	char *ca = NULL, *cert = NULL, *key = NULL;
	enum zs_status st;
	char l[64];

	if (!x || !(x->m = m = zs_metrics_new())) {
		free(x);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	x->lapse_srv = zs_metrics_counter(m, "zshard_coordinator_lease_lapses_total",
					  "Leases that lapsed: servers marked down, trainers dropped.",
					  "member=\"server\"");
	x->lapse_tr = zs_metrics_counter(m, "zshard_coordinator_lease_lapses_total",
					 "Leases that lapsed: servers marked down, trainers dropped.",
					 "member=\"trainer\"");
	x->rollbacks = zs_metrics_counter(m, "zshard_coordinator_rollbacks_total",
					  "Jobs rolled back to their latest checkpoint (a lost rank or server).",
					  "");
	x->failovers = zs_metrics_counter(m, "zshard_coordinator_failovers_total",
					  "Replicated jobs that lost a server and went on without a rollback (its shards' replicas promoted).",
					  "");
	x->bad_ckpts = zs_metrics_counter(m, "zshard_coordinator_checkpoints_bad_total",
					  "Committed checkpoints a restore found bad (a record failing its checksum, or gone): each is marked failed and the job falls back to the newest older one.",
					  "");
	for (int k = 0; k < 2; k++) {
		snprintf(l, sizeof l, "outcome=\"%s\"", k ? "committed" : "failed");
		x->ckpt_secs[k] = zs_metrics_histogram(
			m, "zshard_coordinator_checkpoint_duration_seconds",
			"From a checkpoint's start to its commit (every server durable) or failure.", l,
			zs_metrics_seconds_buckets, zs_metrics_n_seconds_buckets);
	}
	x->srv_up = zs_metrics_gauge(m, "zshard_coordinator_servers", "Shard servers, by state.",
				     "state=\"up\"");
	x->srv_down = zs_metrics_gauge(m, "zshard_coordinator_servers", "Shard servers, by state.",
				       "state=\"down\"");
	x->jobs = zs_metrics_gauge(m, "zshard_coordinator_jobs", "Jobs in the catalog.", "");
	x->leader = zs_metrics_gauge(m, "zshard_coordinator_leader",
				     "1 while this coordinator leads (always, without etcd); "
				     "a standby says 0 and holds no catalog.", "");
	for (int s = 1; s < 4; s++) {
		snprintf(l, sizeof l, "state=\"%s\"", zs_ckpt_state_name((enum zs_ckpt_state)s));
		x->ckpts[s] = zs_metrics_gauge(m, "zshard_coordinator_checkpoints",
					       "Checkpoints in the catalog, by state.", l);
	}
	x->methods = methods;
	x->n_methods = n_methods;
	x->ok = calloc(n_methods ? n_methods : 1, sizeof *x->ok);
	x->secs = calloc(n_methods ? n_methods : 1, sizeof *x->secs);
	st = ZS_OK;
	for (size_t i = 0; x->ok && x->secs && i < n_methods; i++) {
		snprintf(l, sizeof l, "method=\"%s\"", method_name(methods[i].path));
		x->ok[i] = rpcs_total(m, methods[i].path, ZS_OK);
		x->secs[i] = zs_metrics_histogram(m, "zshard_coordinator_rpc_duration_seconds",
						  "From an RPC's arrival at its handler to its answer.",
						  l, zs_metrics_seconds_buckets,
						  zs_metrics_n_seconds_buckets);
		if (!x->ok[i] || !x->secs[i])
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	if (!x->ok || !x->secs)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	if (!st && (!x->lapse_srv || !x->lapse_tr || !x->rollbacks || !x->failovers || !x->bad_ckpts || !x->ckpt_secs[0] ||
	    !x->ckpt_secs[1] || !x->srv_up || !x->srv_down || !x->jobs || !x->ckpts[1] ||
	    !x->ckpts[2] || !x->ckpts[3]))
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	if (st || (st = zs_metrics_add_process(m, err)) ||
	    (st = zs_metrics_add_collector(m, collect, c, err)) ||
	    (st = zs_tls_identity(&ca, &cert, &key, err)) || /* mTLS on: https */
	    (certified && !cert &&
	     (st = zs_fail(err, ZS_EINVAL,
			   "--metrics-clients certified needs mutual TLS (--tls-ca, --tls-cert, --tls-key)"))) ||
	    (st = zs_metrics_http_start(m, addr,
					cert ? &(struct zs_metrics_tls){cert, key, certified ? ca : NULL}
					     : NULL,
					x->addr, sizeof x->addr, &x->http, err)) ||
	    (st = zs_advertise_addr(advertise, x->addr, true, x->adv, sizeof x->adv, "metrics",
				    err))) {
		zs_tls_identity_free(ca, cert, key);
		zs_metrics_http_stop(x->http);
		zs_metrics_free(m);
		free(x->ok);
		free(x->secs);
		free(x);
		return st;
	}
	int64_t until;
	if (cert && !zs_tls_cert_expiry(cert, &until, err))
		zs_series_set(zs_metrics_gauge(m, CERT_EXPIRY, ""), (double)until);
	c->metrics = x;
	zs_rpc_server_observe(c->rpc, on_rpc, x);
	zs_info("metrics at %s://%s/metrics%s", cert ? "https" : "http", x->addr,
		certified ? " (for clients with a certificate of the CA)" : "");
	zs_tls_identity_free(ca, cert, key);
	return ZS_OK;
}

const char *coord_metrics_addr(struct coord *c)
{
	return c->metrics ? c->metrics->adv : "";
}

void coord_metrics_stop(struct coord *c)
{
	if (c->metrics && c->metrics->http) {
		zs_metrics_http_stop(c->metrics->http);
		c->metrics->http = NULL;
	}
}

void coord_metrics_free(struct coord *c)
{
	struct coord_metrics *x = c->metrics;

	if (!x)
		return;
	coord_metrics_stop(c);
	c->metrics = NULL;
	zs_metrics_free(x->m);
	free(x->ok);
	free(x->secs);
	free(x);
}
