/*
 * main.c - zshard-server: options, start and stop (see daemon.h).
 *
 * Sequence:  bind -> "listening on" -> Register (retry until
 * --coordinator-timeout-ms) -> every lease/3: Heartbeat; on a new
 * assignment generation: GetAssignments; on "not registered": Register;
 * on a new task generation: ServerTasks.
 */
#include "server/daemon.h"

#include <grp.h>
#include <sys/stat.h>

#include "base/env.h"
#include "base/opts.h"
#include "gpu/dev.h"

volatile sig_atomic_t srvd_stop;
static void on_signal(int sig)
{
	(void)sig;
	srvd_stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zshard-server --coordinator ADDR --data-dir DIR [options]\n"
		"\n"
		"A zshard shard server: registers with the coordinator, renews its lease,\n"
		"holds the shards the coordinator assigns it.\n"
		"\n");
	zs_opts_usage(f, zs_opts_server);
}

/* What the flags (and a --config file's settings) ask for. */
struct sopts {
	const char *coord_addr, *listen, *data_dir, *port_file, *data_listen, *metrics;
	bool metrics_certified; /* --metrics-clients certified */
	const char *advertise, *data_advertise, *rdma_mode, *shm_group;
	const char *tls[3];
	uint32_t step_timeout_ms;
	uint64_t memory_budget, landing_budget, reader_budget, gpu_budget;
	int gpu; /* --gpu: a CUDA device, ZS_DEV_EMULATED, or -1: none */
	char data_default[ZS_ADDR_MAX];
};

/* Parses the flags into o (and d's capacity and wait): -1 to go on, or the
 * exit status (0 after --help or --version). */
static int server_flags(int argc, char **argv, struct sopts *o, struct srvd *d)
{
	struct option opts[64];
	struct zs_error err = {0};
	int c, li = 0;

	/* flags, --help and each value's check from one table (base/opts.h),
	 * the one zshardctl config check checks a file's keys with */
	zs_opts_getopt(zs_opts_server, opts, sizeof opts / sizeof opts[0]);
	while ((c = getopt_long(argc, argv, "", opts, &li)) != -1) {
		if (c != '?' && optarg && zs_opt_flag("zshard-server", zs_opts_server, opts[li].name, optarg))
			return 2;
		switch (c) {
		case 'c': o->coord_addr = optarg; break;
		case 'l': o->listen = optarg; break;
		case 'd': o->data_dir = optarg; break;
		case 'p': o->port_file = optarg; break;
		/* the values the table took (zs_opt_flag above): converted only */
		case 'R': o->rdma_mode = optarg; break;
		case 'D': o->data_listen = optarg; break;
		case 'm': o->metrics = optarg; break;
		case 'a': o->advertise = optarg; break;
		case 1: case 2: case 3: o->tls[c - 1] = optarg; break;
		case 4: break; /* read before the other flags */
		case 'A': o->data_advertise = optarg; break;
		case 9: o->shm_group = optarg; break;
		case 12: o->metrics_certified = !strcmp(optarg, "certified"); break;
		case 'B': zs_parse_size(optarg, &o->gpu_budget, NULL); break;
		case 'G': o->gpu = strcmp(optarg, "emulated") ? atoi(optarg) : ZS_DEV_EMULATED; break;
		case 'M': zs_parse_size(optarg, &o->memory_budget, NULL); break;
		case 'T': o->step_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'C': zs_parse_size(optarg, &d->me.capacity, NULL); break;
		case 'L': zs_parse_size(optarg, &o->landing_budget, NULL); break;
		case 'P': zs_parse_size(optarg, &o->reader_budget, NULL); break;
		case 'w': d->wait_ms = (int64_t)strtoull(optarg, NULL, 10); break;
		case 'v':
			if (zs_log_level_option("zshard-server", optarg))
				return 2;
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
	if (!o->coord_addr || !o->data_dir) {
		fprintf(stderr, "zshard-server: --coordinator and --data-dir are required\n");
		return 2;
	}
	if (o->gpu == -1 && o->gpu_budget) {
		fprintf(stderr, "zshard-server: --gpu-budget without --gpu\n");
		return 2;
	}
	if (zs_tls_setup(o->tls[0], o->tls[1], o->tls[2], &err)) {
		fprintf(stderr, "zshard-server: %s\n", err.msg);
		return 2;
	}
	return -1;
}

/* The data directory locked, its LMDB file open and the checkpoint writer
 * started; d's id as stored there. */
static enum zs_status open_storage(struct srvd *d, const struct sopts *o, int *lock_fd,
				   struct zs_error *err)
{
	static const char *const tables[] = {"meta", "ckpt", "live"};

	if (zs_private_dir(o->data_dir, err) || zs_lock_dir(o->data_dir, "server.lock", lock_fd, err))
		return err->code;
	/* a virtual reservation; written through the map (about 5x faster for
	 * checkpoint records here), so data.mdb is a sparse file of that size */
	if (zs_kv_open(o->data_dir,
		       d->me.capacity * 8 > (1ULL << 30) ? d->me.capacity * 8 : 1ULL << 30, tables,
		       sizeof tables / sizeof tables[0], ZS_KV_WRITEMAP, &d->kv, err))
		return err->code;
	if (pthread_create(&d->wr.th, NULL, srvd_writer_main, d))
		return zs_fail(err, ZS_ENOMEM, "cannot start the checkpoint writer");
	d->me.id = srvd_load_id(d);
	return ZS_OK;
}

/* The engine, with its budgets, callbacks, device and tier. */
static enum zs_status start_engine(struct srvd *d, const struct sopts *o, struct zs_error *err)
{
	if (engine_create(2, o->step_timeout_ms, &d->engine, err))
		return err->code;
	d->step_timeout_ms = o->step_timeout_ms;
	d->data_dir = o->data_dir;
	engine_set_landing(d->engine, o->landing_budget);
	engine_set_reader_budget(d->engine, o->reader_budget);
	engine_set_norm_exchange(d->engine, srvd_exchange_norms, d);
	engine_set_peer_resolver(d->engine, srvd_peer_addr, d);
	engine_set_stale_check(d->engine, srvd_stale, d);
	if (o->gpu != -1 && engine_set_device(d->engine, o->gpu, o->gpu_budget, err))
		return err->code;
	if (o->memory_budget) {
		char tier[1024];
		zs_fmt(tier, sizeof tier, "%s/tier", o->data_dir);
		if (engine_set_tier(d->engine, tier, o->memory_budget, err))
			return err->code;
	}
	return ZS_OK;
}

/* The data plane: tcp and shm, and rdma where a device works and the arena
 * can be pinned (otherwise said plainly, once, here and in Status). */
static enum zs_status start_data_plane(struct srvd *d, struct sopts *o, struct zs_listener **dp,
				       char *bound_data, struct zs_error *err)
{
	bool rdma = false;
	enum zs_status st;

	if (!o->data_listen) {
		char host[ZS_HOST_MAX];
		uint16_t port;
		if (zs_parse_hostport(o->listen, host, &port, err))
			return err->code;
		zs_fmt(o->data_default, sizeof o->data_default, "%s:0", host);
		o->data_listen = o->data_default;
	}
	if (strcmp(o->rdma_mode, "off")) {
		rdma = !zs_rdma_probe(d->me.capacity + o->landing_budget + o->reader_budget, d->rdma_note,
				      sizeof d->rdma_note);
		if (!rdma && !strcmp(o->rdma_mode, "on"))
			return zs_fail(err, ZS_EUNAVAIL, "--rdma on, but RDMA cannot work here: %s",
				       d->rdma_note);
		if (!rdma)
			zs_info("rdma not offered: %s", d->rdma_note);
	} else {
		snprintf(d->rdma_note, sizeof d->rdma_note, "turned off (--rdma off)");
	}
	if (o->shm_group) { /* shm peers of this group may connect too (net/shm.c) */
		struct group *g = getgrnam(o->shm_group);
		char *end;
		unsigned long gid = strtoul(o->shm_group, &end, 10);
		if (!g && (*end || end == o->shm_group))
			return zs_fail(err, ZS_EINVAL, "--shm-group %s: no such group", o->shm_group);
		zs_shm_allow_group(g ? g->gr_gid : (gid_t)gid);
	}
	struct zs_listener_opts lo = {
		.at = {{&zs_tcp_endpoint, o->data_listen, bound_data},
		       {&zs_shm_endpoint, NULL, d->me.shm_addr}},
		.path = rdma ? &zs_rdma_path : NULL,
		/* the shards' arrays and, beside them, the landing room */
		.arena_bytes = d->me.capacity + o->landing_budget + o->reader_budget,
		.wait_ms = o->step_timeout_ms,
		.observe = srvd_metrics_op,
		.observe_ctx = d};
	st = zs_listener_start(&lo, engine_target(d->engine), dp, err);
	if (st && rdma && strcmp(o->rdma_mode, "on")) {
		/* registering the arena failed after all: serve without rdma */
		zs_warn("rdma not offered: %s", err->msg);
		zs_fmt(d->rdma_note, sizeof d->rdma_note, "%s", err->msg);
		rdma = false;
		lo.path = NULL;
		st = zs_listener_start(&lo, engine_target(d->engine), dp, err);
	}
	if (st)
		return st;
	engine_set_listener(d->engine, *dp);
	d->me.transports = ZS_TRANSPORT_TCP | ZS_TRANSPORT_SHM | (rdma ? ZS_TRANSPORT_RDMA : 0);
	if (rdma)
		zs_info("rdma offered on %s (the %llu-byte shard arena is registered)", d->rdma_note,
			(unsigned long long)d->me.capacity);
	return ZS_OK;
}

/* What the coordinator, the trainers and Prometheus are told: d->me's
 * addresses, from the bound ones and --advertise, --data-advertise. */
static enum zs_status advertise(struct srvd *d, const struct sopts *o, const char *bound_ctl,
				const char *bound_data, struct zs_error *err)
{
	if (zs_advertise_addr(o->advertise, bound_ctl, false, d->me.addr, sizeof d->me.addr,
			      "control", err) ||
	    zs_advertise_addr(o->data_advertise ? o->data_advertise : o->advertise, bound_data,
			      !o->data_advertise, d->me.data_addr, sizeof d->me.data_addr,
			      "data-plane", err))
		return err->code;
	if (d->me.metrics_addr[0]) {
		char m[ZS_ADDR_MAX];
		snprintf(m, sizeof m, "%s", d->me.metrics_addr);
		if (zs_advertise_addr(o->advertise, m, true, d->me.metrics_addr,
				      sizeof d->me.metrics_addr, "metrics", err))
			return err->code;
	}
	return ZS_OK;
}

/* Stops the checkpoint writer (it finishes what it writes first) and drops
 * what was still queued for it. */
static void writer_stop(struct srvd *d)
{
	pthread_mutex_lock(&d->mu);
	d->wr.stop = true;
	pthread_cond_signal(&d->wr.cv);
	pthread_mutex_unlock(&d->mu);
	if (d->wr.th) {
		pthread_join(d->wr.th, NULL);
		d->wr.th = 0;
	}
	while (d->wr.q) {
		struct snapjob *sj = d->wr.q;
		d->wr.q = sj->next;
		engine_snaps_free(sj->snaps, sj->n);
		free(sj);
	}
}

/*
 * A stop asked for (SIGTERM, SIGINT): the heartbeat ends, the writer
 * finishes what it writes and reports it while the coordinator client is
 * still open, then the engine goes (its cancelled snapshots are reported
 * the same way) once no trainer can move a shard: what is between steps
 * is kept. Returns the number of jobs whose live state could not be.
 */
static unsigned stop_serving(struct srvd *d, pthread_t hb, struct zs_listener *dp,
			     struct zs_rpc_server **rpc)
{
	unsigned lost;

	zs_info("shutting down");
	srvd_metrics_stop(d); /* no scrape reads the engine from here on */
	pthread_join(hb, NULL);
	writer_stop(d);
	zs_listener_stop(dp);
	lost = srvd_live_persist(d);
	zs_rpc_server_free(*rpc);
	*rpc = NULL;
	engine_free(d->engine);
	d->engine = NULL;
	if (lost)
		zs_error("stopped; the live state of %u jobs could not be kept (see above)", lost);
	return lost;
}

int main(int argc, char **argv)
{
	struct sopts o = {.coord_addr = zs_env("ZSHARD_COORDINATOR"), .listen = "127.0.0.1:0",
			  .rdma_mode = "auto", .step_timeout_ms = 60000,
			  .landing_budget = 256u << 20, .reader_budget = 256u << 20, .gpu = -1};
	char bound_ctl[ZS_ADDR_MAX], bound_data[ZS_ADDR_MAX];
	struct zs_listener *dp = NULL;
	struct srvd d = {.wait_ms = 300000};
	struct zs_rpc_server *rpc = NULL;
	struct zs_error err = {0};
	struct sigaction sa;
	pthread_t hb;
	int lock_fd = -1, rc = 1;

	zs_log_init("server");
	/* what it writes (its LMDB file of checkpoints and live state, its
	 * port file, tier files) is its user's alone */
	umask(077);
	/* a --config file's settings first: the flags after them win */
	if (zs_config_daemon("server", &argc, &argv, &err)) {
		fprintf(stderr, "zshard-server: %s\n", err.msg);
		return 2;
	}
	pthread_mutex_init(&d.mu, NULL);
	pthread_cond_init(&d.wr.cv, NULL);
	d.me.capacity = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 2;
	if ((rc = server_flags(argc, argv, &o, &d)) >= 0)
		return rc;
	rc = 1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	d.started_ms = zs_now_ms();
	gethostname(d.me.host, sizeof d.me.host - 1);

	if (open_storage(&d, &o, &lock_fd, &err) || start_engine(&d, &o, &err) ||
	    start_data_plane(&d, &o, &dp, bound_data, &err))
		goto clean;
	if (o.metrics && srvd_metrics_start(&d, o.metrics, o.metrics_certified, &err))
		goto clean;
	/* a short per-call deadline; do_register bounds the whole wait */
	if (zs_coord_open(o.coord_addr, 2000, 1, &d.coord, &err) ||
	    zs_rpc_server_start(o.listen, srvd_methods, srvd_n_methods, &d, &rpc, bound_ctl,
				sizeof bound_ctl, &err) ||
	    advertise(&d, &o, bound_ctl, bound_data, &err))
		goto clean;
	if (o.port_file && zs_write_file_atomic(o.port_file, bound_ctl, &err))
		goto clean;
	printf("listening on %s\n", bound_ctl);
	fflush(stdout);
	zs_info("zshard-server %s listening on %s (data %s, %s), data dir %s, capacity %llu bytes%s",
		ZS_VERSION, bound_ctl, bound_data, d.me.shm_addr, o.data_dir,
		(unsigned long long)d.me.capacity, d.me.id ? "" : " (new)");
	if (strcmp(bound_ctl, d.me.addr) || strcmp(bound_data, d.me.data_addr))
		zs_info("advertised as %s (data %s)", d.me.addr, d.me.data_addr);

	srvd_live_claims(&d);
	if (srvd_do_register(&d, &err))
		goto clean;
	srvd_refresh_assignments(&d);
	srvd_live_load(&d);
	/* a restore asked while we were away is waiting */
	d.tk.gen = (uint64_t)-1;
	if (pthread_create(&hb, NULL, srvd_heartbeat, &d)) {
		zs_fail(&err, ZS_ENOMEM, "cannot start the heartbeat thread");
		goto clean;
	}
	while (!srvd_stop)
		zs_sleep_ms(200, (volatile const int *)&srvd_stop);
	/* a stop that could not keep what it promised says so in its status */
	rc = stop_serving(&d, hb, dp, &rpc) ? 1 : 0;
clean: /* each part only if it was started (all of them NULL-safe) */
	zs_rpc_server_free(rpc);
	zs_coord_close(d.coord);
	srvd_metrics_stop(&d);
	/* no more calls into the engine, then the engine answers what it
	 * holds (into closed connections), then the arena goes */
	zs_listener_stop(dp);
	engine_free(d.engine);
	d.engine = NULL;
	zs_listener_free(dp);
	writer_stop(&d);
	free(d.tk.busy);
	zs_kv_close(d.kv);
	if (lock_fd >= 0)
		close(lock_fd);
	if (rc && err.msg[0])
		zs_error("%s", err.msg);
	else if (!rc)
		zs_info("stopped");
	for (uint32_t i = 0; i < d.n_as; i++)
		zs_assignment_release(&d.as[i]);
	free(d.as);
	srvd_metrics_free(&d);
	pthread_mutex_destroy(&d.mu);
	return rc;
}
