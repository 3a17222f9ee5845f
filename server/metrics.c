/*
 * metrics.c - zshard-server's Prometheus metrics (--metrics HOST:PORT):
 * the data plane's operations by transport (counted and timed as the
 * listener answers them), the engine's reduction and optimizer time, each
 * job's latest step, shard memory, landing room and the NVMe tier,
 * heartbeats (the server's lease), checkpoint tasks, and the process.
 */
#include "server/daemon.h"

#include "metrics/metrics.h"

/* tcp, shm, rdma: the listener's endpoints and path; device: pushes a
 * server on a device took from the trainer's memory on it */
enum { N_TR = 4 };
static const char *const tr_name[N_TR] = {"tcp", "shm", "rdma", "device"};
static const char *const kind_name[] = {"", "snapshot", "restore", "delete"};

struct srvd_metrics {
	struct zs_metrics *m;
	struct zs_metrics_http *http;
	char addr[ZS_ADDR_MAX];
	/* [transport][push] */
	struct zs_series *ops[N_TR][2], *errs[N_TR][2], *bytes[N_TR][2], *secs[N_TR][2];
	struct zs_series *hb, *hb_fail, *hb_secs;
	struct zs_series *tasks[4][2], *task_secs[4], *ckpt_bytes;
	/* set at each scrape from the engine */
	struct zs_series *reduce, *optim, *updates, *jobs, *shards, *state_bytes, *capacity,
		*device_bytes, *tiered, *tier_read, *tier_written, *landing, *landing_kept,
		*landing_waits, *held, *lease, *registered, *repl_bytes;
};

static void collect(void *ctx, struct zs_metrics *m)
{
	struct srvd *d = ctx;
	struct srvd_metrics *x = d->metrics;
	struct engine_stats es;
	struct zs_job_step_stats js[64];
	uint32_t n;

	if (!d->engine)
		return;
	engine_stats(d->engine, &es);
	zs_series_set(x->reduce, es.reduce_seconds);
	zs_series_set(x->optim, es.optim_seconds);
	zs_series_set(x->updates, (double)es.steps_applied);
	zs_series_set(x->repl_bytes, (double)es.repl_bytes);
	zs_series_set(x->jobs, es.jobs);
	zs_series_set(x->shards, es.shards);
	zs_series_set(x->state_bytes, (double)es.bytes);
	zs_series_set(x->capacity, (double)d->me.capacity);
	zs_series_set(x->device_bytes, (double)es.device_bytes);
	zs_series_set(x->tiered, es.tiered);
	zs_series_set(x->tier_read, (double)es.tier_read);
	zs_series_set(x->tier_written, (double)es.tier_written);
	zs_series_set(x->landing, (double)es.landing_bytes);
	zs_series_set(x->landing_kept, (double)es.landing_kept);
	zs_series_set(x->landing_waits, (double)es.landing_waits);
	zs_series_set(x->held, (double)es.held);
	pthread_mutex_lock(&d->mu);
	zs_series_set(x->lease, (double)d->lease_ms * 1e-3);
	zs_series_set(x->registered, d->registered ? 1 : 0);
	pthread_mutex_unlock(&d->mu);
	/* the jobs of now: a deleted job's series go with it */
	zs_metrics_forget(m, "zshard_server_job_step");
	zs_metrics_forget(m, "zshard_server_job_step_reduce_seconds");
	zs_metrics_forget(m, "zshard_server_job_step_optimizer_seconds");
	n = engine_job_steps(d->engine, js, sizeof js / sizeof js[0]);
	for (uint32_t i = 0; i < n; i++) {
		char l[ZS_JOB_NAME_MAX * 2 + 16];
		zs_metrics_label(l, sizeof l, "zshard_job", js[i].job);
		zs_series_set(zs_metrics_gauge(m, "zshard_server_job_step",
					       "The latest step every shard of the job on this server applied.",
					       l),
			      (double)js[i].step);
		zs_series_set(zs_metrics_gauge(m, "zshard_server_job_step_reduce_seconds",
					       "That step's reduction time, summed over the job's shards here.",
					       l),
			      js[i].reduce_seconds);
		zs_series_set(zs_metrics_gauge(m, "zshard_server_job_step_optimizer_seconds",
					       "That step's optimizer time, summed over the job's shards here.",
					       l),
			      js[i].optim_seconds);
	}
}

#define G(name, help) zs_metrics_gauge(m, name, help, "")
#define C(name, help) zs_metrics_counter(m, name, help, "")

static enum zs_status make_series(struct srvd_metrics *x, struct zs_error *err)
{
	struct zs_metrics *m = x->m;
	const double *b = zs_metrics_seconds_buckets;
	unsigned nb = zs_metrics_n_seconds_buckets;
	char l[96];
	bool ok = true;

	for (int t = 0; t < N_TR; t++)
		for (int p = 0; p < 2; p++) {
			snprintf(l, sizeof l, "transport=\"%s\",op=\"%s\"", tr_name[t],
				 p ? "push" : "gather");
			x->ops[t][p] = zs_metrics_counter(m, "zshard_server_data_ops_total",
							  "Gathers and pushes answered, by transport.", l);
			x->errs[t][p] = zs_metrics_counter(m, "zshard_server_data_errors_total",
							   "Gathers and pushes answered with an error.", l);
			x->bytes[t][p] = zs_metrics_counter(m, "zshard_server_data_bytes_total",
							    "Bytes gathered and pushed, by transport.", l);
			x->secs[t][p] = zs_metrics_histogram(
				m, "zshard_server_data_op_duration_seconds",
				"From a gather's or push's first frame to its answer (a gather's wait for its step included).",
				l, b, nb);
			ok &= x->ops[t][p] && x->errs[t][p] && x->bytes[t][p] && x->secs[t][p];
		}
	x->hb = C("zshard_server_heartbeats_total", "Heartbeats (lease renewals) sent to the coordinator.");
	x->hb_fail = C("zshard_server_heartbeat_failures_total", "Heartbeats that failed.");
	x->hb_secs = zs_metrics_histogram(m, "zshard_server_heartbeat_duration_seconds",
					  "A heartbeat's round trip to the coordinator.", "", b, nb);
	for (int k = 1; k < 4; k++) {
		for (int o = 0; o < 2; o++) {
			snprintf(l, sizeof l, "kind=\"%s\",outcome=\"%s\"", kind_name[k],
				 o ? "ok" : "failed");
			x->tasks[k][o] = zs_metrics_counter(m, "zshard_server_checkpoint_tasks_total",
							    "Checkpoint tasks done, by kind and outcome.", l);
			ok &= x->tasks[k][o] != NULL;
		}
		snprintf(l, sizeof l, "kind=\"%s\"", kind_name[k]);
		x->task_secs[k] = zs_metrics_histogram(
			m, "zshard_server_checkpoint_task_duration_seconds",
			"A checkpoint task's time on this server, from taking it to reporting it.", l, b, nb);
		ok &= x->task_secs[k] != NULL;
	}
	x->ckpt_bytes = C("zshard_server_checkpoint_written_bytes_total",
			  "Bytes of checkpoint records written durably.");
	x->reduce = C("zshard_server_reduce_seconds_total",
		      "Time spent reducing pushes (depositing them and finishing the sums).");
	x->optim = C("zshard_server_optimizer_seconds_total", "Time spent in optimizer updates.");
	x->updates = C("zshard_server_shard_updates_total", "Shard updates (one per shard per step).");
	x->repl_bytes = C("zshard_server_replica_bytes_total",
			  "Bytes of updates forwarded to shard replicas (every copy acknowledged).");
	x->jobs = G("zshard_server_jobs", "Jobs with shards on this server.");
	x->shards = G("zshard_server_shards", "Shards held.");
	x->state_bytes = G("zshard_server_shard_state_bytes",
			   "Bytes allocated for shard state (masters, optimizer state, copies).");
	x->capacity = G("zshard_server_capacity_bytes", "Memory offered for shards (--capacity).");
	x->device_bytes = G("zshard_server_device_state_bytes", "Bytes of shard state on the GPU.");
	x->tiered = G("zshard_server_tiered_shards", "Shards whose state lives in NVMe tier files.");
	x->tier_read = C("zshard_server_tier_read_bytes_total", "Bytes read from the NVMe tier.");
	x->tier_written = C("zshard_server_tier_written_bytes_total", "Bytes written to the NVMe tier.");
	x->landing = G("zshard_server_landing_bytes", "Bytes of pushes landing now.");
	x->landing_kept = G("zshard_server_landing_kept_bytes",
			    "Landing buffers held, busy or kept for reuse (--landing-budget bounds them).");
	x->landing_waits = C("zshard_server_landing_waits_total",
			     "Pushes that waited for landing room.");
	x->held = G("zshard_server_gathers_held", "Gathers waiting for their step now.");
	x->lease = G("zshard_server_lease_seconds", "The lease the coordinator grants this server.");
	x->registered = G("zshard_server_registered", "1 while registered with the coordinator.");
	ok &= x->hb && x->hb_fail && x->hb_secs && x->ckpt_bytes && x->reduce && x->optim &&
	      x->updates && x->repl_bytes && x->jobs && x->shards && x->state_bytes && x->capacity &&
	      x->device_bytes && x->tiered && x->tier_read && x->tier_written && x->landing &&
	      x->landing_kept && x->landing_waits && x->held && x->lease && x->registered;
	return ok ? ZS_OK : zs_fail(err, ZS_ENOMEM, "out of memory");
}

/* With mutual TLS: when the daemon's certificate expires, which an alert
 * watches (deploy/prometheus/zshard-alerts.yml) */
#define CERT_EXPIRY "zshard_tls_certificate_expiry_timestamp_seconds", \
	"When this daemon's TLS certificate (--tls-cert) stops being valid (Unix seconds)."

enum zs_status srvd_metrics_start(struct srvd *d, const char *addr, bool certified,
				  struct zs_error *err)
{
	struct srvd_metrics *x = calloc(1, sizeof *x);
	char *ca = NULL, *cert = NULL, *key = NULL; /* with mTLS on: https, by its identity */
	enum zs_status st;

	if (!x || !(x->m = zs_metrics_new())) {
		free(x);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	if ((st = make_series(x, err)) || (st = zs_metrics_add_process(x->m, err)) ||
	    (st = zs_metrics_add_collector(x->m, collect, d, err)) ||
	    (st = zs_tls_identity(&ca, &cert, &key, err)) ||
	    (certified && !cert &&
	     (st = zs_fail(err, ZS_EINVAL,
			   "--metrics-clients certified needs mutual TLS (--tls-ca, --tls-cert, --tls-key)"))) ||
	    (st = zs_metrics_http_start(x->m, addr,
					cert ? &(struct zs_metrics_tls){cert, key, certified ? ca : NULL}
					     : NULL,
					x->addr, sizeof x->addr, &x->http, err))) {
		zs_tls_identity_free(ca, cert, key);
		zs_metrics_free(x->m);
		free(x);
		return st;
	}
	int64_t until;
	if (cert && !zs_tls_cert_expiry(cert, &until, err))
		zs_series_set(zs_metrics_gauge(x->m, CERT_EXPIRY, ""), (double)until);
	d->metrics = x;
	snprintf(d->me.metrics_addr, sizeof d->me.metrics_addr, "%s", x->addr);
	zs_info("metrics at %s://%s/metrics%s", cert ? "https" : "http", x->addr,
		certified ? " (for clients with a certificate of the CA)" : "");
	zs_tls_identity_free(ca, cert, key);
	return ZS_OK;
}

void srvd_metrics_stop(struct srvd *d)
{
	if (d->metrics) {
		zs_metrics_http_stop(d->metrics->http); /* no scrape runs after this */
		d->metrics->http = NULL;
	}
}

void srvd_metrics_free(struct srvd *d)
{
	struct srvd_metrics *x = d->metrics;

	if (!x)
		return;
	srvd_metrics_stop(d);
	d->metrics = NULL;
	zs_metrics_free(x->m);
	free(x);
}

void srvd_metrics_op(void *ctx, const char *transport, bool push, uint64_t bytes, double seconds,
		     bool ok)
{
	struct srvd *d = ctx;
	struct srvd_metrics *x = d->metrics;
	int t = 0;

	if (!x)
		return;
	while (t < N_TR && strcmp(tr_name[t], transport))
		t++;
	if (t == N_TR)
		return;
	zs_series_add(x->ops[t][push], 1);
	if (ok)
		zs_series_add(x->bytes[t][push], (double)bytes);
	else
		zs_series_add(x->errs[t][push], 1);
	zs_series_observe(x->secs[t][push], seconds);
}

void srvd_metrics_heartbeat(struct srvd *d, double seconds, bool ok)
{
	struct srvd_metrics *x = d->metrics;

	if (!x)
		return;
	zs_series_add(x->hb, 1);
	if (!ok)
		zs_series_add(x->hb_fail, 1);
	zs_series_observe(x->hb_secs, seconds);
}

void srvd_metrics_task(struct srvd *d, const struct zs_task *t, bool ok, uint64_t bytes,
		       double seconds)
{
	struct srvd_metrics *x = d->metrics;
	int k = (int)t->kind;

	if (!x || k < 1 || k > 3)
		return;
	zs_series_add(x->tasks[k][ok], 1);
	if (ok && k == ZS_TASK_SNAPSHOT)
		zs_series_add(x->ckpt_bytes, (double)bytes);
	if (seconds >= 0)
		zs_series_observe(x->task_secs[k], seconds);
}
