/*
 * server_main.c - zshard-server: a shard server's membership side.
 *
 * It binds its control address, registers with the coordinator (waiting,
 * bounded, for one that is not up yet), renews its lease by heartbeat, keeps
 * the shard assignments the coordinator gives it, and answers Status. Its id
 * is kept in LMDB under its data dir, so a restarted server is the same
 * server to the coordinator.
 *
 * Sequence:  bind -> "listening on" -> Register (retry until
 * --coordinator-timeout-ms) -> every lease/3: Heartbeat; on a new
 * assignment generation: GetAssignments; on "not registered": Register.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "coord_client.h"
#include "engine.h"
#include "kv.h"
#include "log.h"
#include "methods.h"
#include "model.h"
#include "rpc.h"
#include "util.h"
#include "version.h"

static volatile sig_atomic_t stop;

struct srvd {
	pthread_mutex_t mu;
	struct zs_coord_client *coord;
	struct zs_kv *kv;
	struct zs_server_info me;
	int registered;
	uint32_t lease_ms;
	uint64_t gen;
	struct zs_assignment *as;
	uint32_t n_as;
	int64_t started_ms;
	int64_t wait_ms; /* bound on waiting for the coordinator */
	struct engine *engine;
	uint32_t step_timeout_ms;
};

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void h_status(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct srvd *d = ctx;
	struct zs_server_status s = {0};
	struct zs_buf b;
	enum zs_status st;

	(void)p;
	(void)n;
	pthread_mutex_lock(&d->mu);
	s.id = d->me.id;
	snprintf(s.addr, sizeof s.addr, "%s", d->me.addr);
	snprintf(s.coordinator, sizeof s.coordinator, "%s", zs_coord_addr(d->coord));
	s.registered = d->registered;
	s.capacity = d->me.capacity;
	s.assign_gen = d->gen;
	s.uptime_ms = zs_now_ms() - d->started_ms;
	s.n_assignments = d->n_as;
	s.assignments = d->as; /* borrowed for encoding */
	for (uint32_t i = 0; i < d->n_as; i++)
		s.assigned_bytes += d->as[i].bytes;
	snprintf(s.data_addr, sizeof s.data_addr, "%s", d->me.data_addr);
	snprintf(s.shm_addr, sizeof s.shm_addr, "%s", d->me.shm_addr);
	{
		struct engine_stats es;
		engine_stats(d->engine, &es);
		s.jobs_held = es.jobs;
		s.shards = es.shards;
		s.state_bytes = es.bytes;
		s.steps_applied = es.steps_applied;
		s.bytes_in = es.bytes_in;
		s.bytes_out = es.bytes_out;
		s.gathers_waiting = es.held;
	}
	st = zs_enc_server_status(&s, &b);
	pthread_mutex_unlock(&d->mu);
	if (st) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode status");
		return;
	}
	zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
}

/* The engine's norm exchange: the coordinator sums every server's norms. */
static enum zs_status exchange_norms(void *ctx, const char *job, uint64_t step,
				     const struct zs_shard_norm *norms, uint32_t n,
				     double *total, struct zs_error *err)
{
	struct srvd *d = ctx;
	struct zs_norm_report r = {.step = step, .server_id = d->me.id, .n = n,
				   .norms = (struct zs_shard_norm *)norms};

	snprintf(r.job, sizeof r.job, "%s", job);
	return zs_coord_report_norm(d->coord, &r, (int)d->step_timeout_ms, total, err);
}

static const struct zs_rpc_method methods[] = {
	{ZS_M_SERVER_STATUS, h_status},
};

static enum zs_status save_id(struct srvd *d, uint64_t id, struct zs_error *err)
{
	struct zs_kv_txn *t;
	uint8_t b[8];
	enum zs_status st = zs_kv_begin(d->kv, true, &t, err);

	if (st)
		return st;
	zs_kv_u64_enc(id, b);
	st = zs_kv_put(t, 0, "server_id", 9, b, 8, err);
	if (st) {
		zs_kv_abort(t);
		return st;
	}
	return zs_kv_commit(t, err);
}

static uint64_t load_id(struct srvd *d)
{
	struct zs_kv_txn *t;
	const void *v;
	size_t vl;
	uint64_t id = 0;

	if (zs_kv_begin(d->kv, false, &t, NULL))
		return 0;
	if (!zs_kv_get(t, 0, "server_id", 9, &v, &vl, NULL) && vl == 8)
		id = zs_kv_u64_dec(v);
	zs_kv_abort(t);
	return id;
}

/*
 * Registers, retrying while the coordinator is unreachable, for at most
 * d->wait_ms. Other errors (a bad address, capacity refused) are final.
 */
static enum zs_status do_register(struct srvd *d, struct zs_error *err)
{
	int64_t t0 = zs_now_ms(), last_note = t0;
	enum zs_status st;
	uint64_t id;
	uint32_t lease;

	for (;;) {
		st = zs_coord_register(d->coord, &d->me, &id, &lease, err);
		if (st != ZS_EUNAVAIL && st != ZS_ETIMEDOUT)
			break;
		if (stop)
			return zs_fail(err, ZS_ECANCELED, "stopped while waiting");
		if (zs_now_ms() - t0 >= d->wait_ms)
			return zs_fail(err, ZS_ETIMEDOUT,
				       "no coordinator answered at %s within %lld ms (%s)",
				       zs_coord_addr(d->coord), (long long)d->wait_ms,
				       err->msg);
		if (zs_now_ms() - last_note >= 5000) {
			zs_info("waiting for the coordinator at %s (%lld s so far)",
				zs_coord_addr(d->coord),
				(long long)((zs_now_ms() - t0) / 1000));
			last_note = zs_now_ms();
		}
		zs_sleep_ms(200, (volatile const int *)&stop);
	}
	if (st)
		return st;
	if (id != d->me.id) {
		st = save_id(d, id, err);
		if (st)
			return st;
	}
	pthread_mutex_lock(&d->mu);
	d->me.id = id;
	d->lease_ms = lease;
	d->registered = 1;
	pthread_mutex_unlock(&d->mu);
	zs_info("registered with %s as server %llu (lease %u ms)",
		zs_coord_addr(d->coord), (unsigned long long)id, lease);
	return ZS_OK;
}

static void refresh_assignments(struct srvd *d)
{
	struct zs_error err = {0};
	struct zs_assignment *as, *old;
	uint32_t n_as, n_old;
	uint64_t gen, bytes = 0;

	if (zs_coord_assignments(d->coord, d->me.id, &gen, &as, &n_as, &err)) {
		zs_warn("cannot fetch assignments: %s", err.msg);
		return;
	}
	pthread_mutex_lock(&d->mu);
	old = d->as;
	n_old = d->n_as;
	d->as = as;
	d->n_as = n_as;
	d->gen = gen;
	pthread_mutex_unlock(&d->mu);
	for (uint32_t i = 0; i < n_old; i++)
		zs_assignment_release(&old[i]);
	free(old);
	for (uint32_t i = 0; i < n_as; i++) {
		struct zs_job job;
		bytes += as[i].bytes;
		if (engine_has_job(d->engine, as[i].job, as[i].epoch))
			continue;
		zs_info("assigned %u shards of job '%s' (epoch %llu, %llu bytes)",
			as[i].n_shards, as[i].job, (unsigned long long)as[i].epoch,
			(unsigned long long)as[i].bytes);
		if (zs_coord_get_job(d->coord, as[i].job, &job, &err)) {
			zs_warn("cannot fetch job '%s': %s", as[i].job, err.msg);
			continue;
		}
		if (engine_add_job(d->engine, &job, d->me.id, &err))
			zs_error("cannot hold job '%s': %s", as[i].job, err.msg);
		zs_job_release(&job);
	}
	{
		/* drop jobs that are no longer assigned here */
		char names[64][ZS_JOB_NAME_MAX];
		uint32_t n = engine_job_names(d->engine, names, 64);
		for (uint32_t k = 0; k < n; k++) {
			bool kept = false;
			for (uint32_t i = 0; i < n_as; i++)
				kept |= !strcmp(names[k], as[i].job);
			if (!kept)
				engine_remove_job(d->engine, names[k]);
		}
	}
	zs_info("assignment generation %llu: %u jobs, %llu bytes in all",
		(unsigned long long)gen, n_as, (unsigned long long)bytes);
}

static void *heartbeat(void *arg)
{
	struct srvd *d = arg;
	int lost = 0;

	while (!stop) {
		struct zs_error err = {0};
		uint32_t lease;
		uint64_t gen;
		enum zs_status st;

		zs_sleep_ms(d->lease_ms / 3 ? d->lease_ms / 3 : 100,
			    (volatile const int *)&stop);
		if (stop)
			break;
		st = zs_coord_heartbeat(d->coord, d->me.id, &lease, &gen, &err);
		if (st == ZS_ENOTFOUND) {
			zs_warn("coordinator does not know server %llu: registering again",
				(unsigned long long)d->me.id);
			st = do_register(d, &err);
			if (!st)
				st = zs_coord_heartbeat(d->coord, d->me.id, &lease, &gen,
							&err);
		}
		if (st) {
			if (!lost)
				zs_warn("heartbeat to %s failed: %s (retrying every %u ms)",
					zs_coord_addr(d->coord), err.msg, d->lease_ms / 3);
			lost = 1;
			continue;
		}
		if (lost)
			zs_info("coordinator %s reachable again", zs_coord_addr(d->coord));
		lost = 0;
		d->lease_ms = lease;
		if (gen != d->gen)
			refresh_assignments(d);
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zshard-server --coordinator ADDR --data-dir DIR [options]\n"
		"\n"
		"A zshard shard server: registers with the coordinator, renews its lease,\n"
		"holds the shards the coordinator assigns it.\n"
		"\n"
		"  --coordinator ADDR   coordinator HOST:PORT (or $ZSHARD_COORDINATOR)\n"
		"  --listen HOST:PORT   control address (default 127.0.0.1:0, a free port)\n"
		"  --data-dir DIR       state directory (created if missing)\n"
		"  --capacity BYTES     memory offered for shards, e.g. 512M, 8G\n"
		"                       (default: half of physical memory)\n"
		"  --data-listen HOST:PORT\n"
		"                       data-plane (tcp) address (default: the control\n"
		"                       address's host, a free port); same-host trainers\n"
		"                       also get shared memory\n"
		"  --step-timeout-ms MS a gather waiting longer for the other ranks fails,\n"
		"                       naming the ranks it waits for (default 60000)\n"
		"  --port-file FILE     also write the bound HOST:PORT to FILE\n"
		"  --coordinator-timeout-ms MS\n"
		"                       how long to wait for the coordinator at start\n"
		"                       (default 300000)\n"
		"  --log-level LEVEL    debug, info, warn, error (default info)\n"
		"  --version, --help\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"coordinator", required_argument, NULL, 'c'},
		{"listen", required_argument, NULL, 'l'},
		{"data-dir", required_argument, NULL, 'd'},
		{"capacity", required_argument, NULL, 'C'},
		{"port-file", required_argument, NULL, 'p'},
		{"data-listen", required_argument, NULL, 'D'},
		{"step-timeout-ms", required_argument, NULL, 'T'},
		{"coordinator-timeout-ms", required_argument, NULL, 'w'},
		{"log-level", required_argument, NULL, 'v'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	static const char *const tables[] = {"meta"};
	const char *coord_addr = getenv("ZSHARD_COORDINATOR");
	const char *listen = "127.0.0.1:0", *data_dir = NULL, *port_file = NULL;
	const char *data_listen = NULL;
	uint32_t step_timeout_ms = 60000;
	char data_default[ZS_ADDR_MAX];
	struct zs_listener *dp = NULL;
	struct srvd d = {.wait_ms = 300000};
	struct zs_rpc_server *rpc = NULL;
	struct zs_error err = {0};
	struct sigaction sa;
	pthread_t hb;
	int lock_fd = -1, rc = 1, o;
	uint64_t v;

	zs_log_init("server");
	pthread_mutex_init(&d.mu, NULL);
	d.me.capacity = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'c': coord_addr = optarg; break;
		case 'l': listen = optarg; break;
		case 'd': data_dir = optarg; break;
		case 'p': port_file = optarg; break;
		case 'D': data_listen = optarg; break;
		case 'T':
			if (zs_parse_u64(optarg, 100, 86400000, &v, &err)) {
				fprintf(stderr, "zshard-server: --step-timeout-ms: %s\n", err.msg);
				return 2;
			}
			step_timeout_ms = (uint32_t)v;
			break;
		case 'C':
			if (zs_parse_size(optarg, &d.me.capacity, &err) || !d.me.capacity) {
				fprintf(stderr, "zshard-server: --capacity: %s\n",
					d.me.capacity ? err.msg : "must be > 0");
				return 2;
			}
			break;
		case 'w':
			if (zs_parse_u64(optarg, 0, 86400000, &v, &err)) {
				fprintf(stderr, "zshard-server: --coordinator-timeout-ms: %s\n", err.msg);
				return 2;
			}
			d.wait_ms = (int64_t)v;
			break;
		case 'v':
			if (!strcmp(optarg, "debug")) zs_log_set_level(ZS_LOG_DEBUG);
			else if (!strcmp(optarg, "info")) zs_log_set_level(ZS_LOG_INFO);
			else if (!strcmp(optarg, "warn")) zs_log_set_level(ZS_LOG_WARN);
			else if (!strcmp(optarg, "error")) zs_log_set_level(ZS_LOG_ERROR);
			else {
				fprintf(stderr, "zshard-server: --log-level: '%s' is not one of debug, info, warn, error\n", optarg);
				return 2;
			}
			break;
		case 'V': printf("zshard-server %s\n", ZS_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zshard-server: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!coord_addr || !data_dir) {
		fprintf(stderr, "zshard-server: --coordinator and --data-dir are required\n");
		return 2;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	d.started_ms = zs_now_ms();
	gethostname(d.me.host, sizeof d.me.host - 1);

	if (zs_mkdir_p(data_dir, &err) ||
	    zs_lock_dir(data_dir, "server.lock", &lock_fd, &err))
		goto fail;
	if (zs_kv_open(data_dir, 0, tables, 1, &d.kv, &err))
		goto clean_lock;
	d.me.id = load_id(&d);
	if (!data_listen) {
		char host[ZS_HOST_MAX];
		uint16_t port;
		if (zs_parse_hostport(listen, host, &port, &err))
			goto clean_kv;
		zs_fmt(data_default, sizeof data_default, "%s:0", host);
		data_listen = data_default;
	}
	if (engine_create(2, step_timeout_ms, &d.engine, &err))
		goto clean_kv;
	d.step_timeout_ms = step_timeout_ms;
	engine_set_norm_exchange(d.engine, exchange_norms, &d);
	{
		struct zs_listener_opts lo = {.tcp_listen = data_listen, .shm = true,
					      .arena_bytes = d.me.capacity};
		if (zs_listener_start(&lo, engine_target(d.engine), &dp, d.me.data_addr,
				      d.me.shm_addr, &err))
			goto clean_engine;
		engine_set_listener(d.engine, dp);
		d.me.transports = ZS_TRANSPORT_TCP | ZS_TRANSPORT_SHM;
	}
	/* a short per-call deadline; do_register bounds the whole wait */
	if (zs_coord_open(coord_addr, 2000, 1, &d.coord, &err))
		goto clean_dp;
	if (zs_rpc_server_start(listen, methods, 1, &d, &rpc, d.me.addr,
				sizeof d.me.addr, &err))
		goto clean_coord;
	if (port_file && zs_write_file_atomic(port_file, d.me.addr, &err))
		goto clean_rpc;
	printf("listening on %s\n", d.me.addr);
	fflush(stdout);
	zs_info("zshard-server %s listening on %s (data %s, %s), data dir %s, capacity %llu bytes%s",
		ZS_VERSION, d.me.addr, d.me.data_addr, d.me.shm_addr, data_dir,
		(unsigned long long)d.me.capacity, d.me.id ? "" : " (new)");

	if (do_register(&d, &err))
		goto clean_rpc;
	refresh_assignments(&d);
	if (pthread_create(&hb, NULL, heartbeat, &d)) {
		zs_fail(&err, ZS_ENOMEM, "cannot start the heartbeat thread");
		goto clean_rpc;
	}
	while (!stop)
		zs_sleep_ms(200, (volatile const int *)&stop);
	zs_info("shutting down");
	pthread_join(hb, NULL);
	rc = 0;

clean_rpc:
	zs_rpc_server_free(rpc);
clean_coord:
	zs_coord_close(d.coord);
clean_dp:
	/* the engine answers what it holds before the listener goes */
	engine_free(d.engine);
	d.engine = NULL;
	zs_listener_free(dp);
clean_engine:
	engine_free(d.engine);
clean_kv:
	zs_kv_close(d.kv);
clean_lock:
	close(lock_fd);
fail:
	if (rc)
		zs_error("%s", err.msg);
	else
		zs_info("stopped");
	for (uint32_t i = 0; i < d.n_as; i++)
		zs_assignment_release(&d.as[i]);
	free(d.as);
	pthread_mutex_destroy(&d.mu);
	return rc;
}
