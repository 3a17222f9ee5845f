/*
 * main.c - zshard-server: options, start and stop (see daemon.h).
 *
 * Sequence:  bind -> "listening on" -> Register (retry until
 * --coordinator-timeout-ms) -> every lease/3: Heartbeat; on a new
 * assignment generation: GetAssignments; on "not registered": Register;
 * on a new task generation: ServerTasks.
 */
#include "server/daemon.h"

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

int main(int argc, char **argv)
{
	struct option opts[64];
	static const char *const tables[] = {"meta", "ckpt", "live"};
	const char *coord_addr = zs_env("ZSHARD_COORDINATOR");
	const char *listen = "127.0.0.1:0", *data_dir = NULL, *port_file = NULL;
	const char *data_listen = NULL, *metrics = NULL, *advertise = NULL, *data_advertise = NULL;
	char bound_ctl[ZS_ADDR_MAX], bound_data[ZS_ADDR_MAX];
	const char *tls[3] = {NULL, NULL, NULL};
	uint32_t step_timeout_ms = 60000;
	uint64_t memory_budget = 0, landing_budget = 256u << 20;
	const char *rdma_mode = "auto";
	int gpu = -1; /* --gpu: a CUDA device, ZS_DEV_EMULATED, or none */
	uint64_t gpu_budget = 0;
	bool rdma = false;
	char data_default[ZS_ADDR_MAX];
	struct zs_listener *dp = NULL;
	struct srvd d = {.wait_ms = 300000};
	struct zs_rpc_server *rpc = NULL;
	struct zs_error err = {0};
	struct sigaction sa;
	pthread_t hb;
	int lock_fd = -1, rc = 1, o, li = 0;

	zs_log_init("server");
	/* a --config file's settings first: the flags after them win */
	if (zs_config_daemon("server", &argc, &argv, &err)) {
		fprintf(stderr, "zshard-server: %s\n", err.msg);
		return 2;
	}
	pthread_mutex_init(&d.mu, NULL);
	d.me.capacity = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 2;
	/* flags, --help and each value's check from one table (base/opts.h),
	 * the one zshardctl config check checks a file's keys with */
	zs_opts_getopt(zs_opts_server, opts, sizeof opts / sizeof opts[0]);
	while ((o = getopt_long(argc, argv, "", opts, &li)) != -1) {
		if (o != '?' && optarg && zs_opt_flag("zshard-server", zs_opts_server, opts[li].name, optarg))
			return 2;
		switch (o) {
		case 'c': coord_addr = optarg; break;
		case 'l': listen = optarg; break;
		case 'd': data_dir = optarg; break;
		case 'p': port_file = optarg; break;
		/* the values the table took (zs_opt_flag above): converted only */
		case 'R': rdma_mode = optarg; break;
		case 'D': data_listen = optarg; break;
		case 'm': metrics = optarg; break;
		case 'a': advertise = optarg; break;
		case 1: case 2: case 3: tls[o - 1] = optarg; break;
		case 4: break; /* read before the other flags */
		case 'A': data_advertise = optarg; break;
		case 'B': zs_parse_size(optarg, &gpu_budget, NULL); break;
		case 'G': gpu = strcmp(optarg, "emulated") ? atoi(optarg) : ZS_DEV_EMULATED; break;
		case 'M': zs_parse_size(optarg, &memory_budget, NULL); break;
		case 'T': step_timeout_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'C': zs_parse_size(optarg, &d.me.capacity, NULL); break;
		case 'L': zs_parse_size(optarg, &landing_budget, NULL); break;
		case 'w': d.wait_ms = (int64_t)strtoull(optarg, NULL, 10); break;
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
	if (!coord_addr || !data_dir) {
		fprintf(stderr, "zshard-server: --coordinator and --data-dir are required\n");
		return 2;
	}
	if (zs_tls_setup(tls[0], tls[1], tls[2], &err)) {
		fprintf(stderr, "zshard-server: %s\n", err.msg);
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
	/* a virtual reservation; written through the map (about 5x faster for
	 * checkpoint records here), so data.mdb is a sparse file of that size */
	if (zs_kv_open(data_dir, d.me.capacity * 8 > (1ULL << 30) ? d.me.capacity * 8 : 1ULL << 30,
		       tables, sizeof tables / sizeof tables[0], ZS_KV_WRITEMAP, &d.kv, &err))
		goto clean_lock;
	pthread_cond_init(&d.wcv, NULL);
	if (pthread_create(&d.writer, NULL, srvd_writer_main, &d)) {
		zs_fail(&err, ZS_ENOMEM, "cannot start the checkpoint writer");
		goto clean_kv;
	}
	d.me.id = srvd_load_id(&d);
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
	d.data_dir = data_dir;
	engine_set_landing(d.engine, landing_budget);
	engine_set_norm_exchange(d.engine, srvd_exchange_norms, &d);
	engine_set_peer_resolver(d.engine, srvd_peer_addr, &d);
	engine_set_stale_check(d.engine, srvd_stale, &d);
	if (gpu == -1 && gpu_budget) {
		fprintf(stderr, "zshard-server: --gpu-budget without --gpu\n");
		return 2;
	}
	if (gpu != -1 && engine_set_device(d.engine, gpu, gpu_budget, &err))
		goto clean_engine;
	if (memory_budget) {
		char tier[1024];
		zs_fmt(tier, sizeof tier, "%s/tier", data_dir);
		if (engine_set_tier(d.engine, tier, memory_budget, &err))
			goto clean_engine;
	}
	/* rdma: offered only where a device works and the arena can be pinned;
	 * otherwise said plainly, once, here and in Status */
	if (strcmp(rdma_mode, "off")) {
		rdma = !zs_rdma_probe(d.me.capacity + landing_budget, d.rdma_note, sizeof d.rdma_note);
		if (!rdma && !strcmp(rdma_mode, "on")) {
			zs_fail(&err, ZS_EUNAVAIL, "--rdma on, but RDMA cannot work here: %s",
				d.rdma_note);
			goto clean_engine;
		}
		if (!rdma)
			zs_info("rdma not offered: %s", d.rdma_note);
	} else {
		snprintf(d.rdma_note, sizeof d.rdma_note, "turned off (--rdma off)");
	}
	{
		struct zs_listener_opts lo = {
			.at = {{&zs_tcp_endpoint, data_listen, bound_data},
			       {&zs_shm_endpoint, NULL, d.me.shm_addr}},
			.path = rdma ? &zs_rdma_path : NULL,
			/* the shards' arrays and, beside them, the landing room */
			.arena_bytes = d.me.capacity + landing_budget,
			.wait_ms = step_timeout_ms,
			.observe = srvd_metrics_op,
			.observe_ctx = &d};
		enum zs_status lst = zs_listener_start(&lo, engine_target(d.engine), &dp, &err);
		if (lst && rdma && strcmp(rdma_mode, "on")) {
			/* registering the arena failed after all: serve without rdma */
			zs_warn("rdma not offered: %s", err.msg);
			zs_fmt(d.rdma_note, sizeof d.rdma_note, "%s", err.msg);
			rdma = false;
			lo.path = NULL;
			lst = zs_listener_start(&lo, engine_target(d.engine), &dp, &err);
		}
		if (lst)
			goto clean_engine;
		engine_set_listener(d.engine, dp);
		d.me.transports = ZS_TRANSPORT_TCP | ZS_TRANSPORT_SHM | (rdma ? ZS_TRANSPORT_RDMA : 0);
		if (rdma)
			zs_info("rdma offered on %s (the %llu-byte shard arena is registered)",
				d.rdma_note, (unsigned long long)d.me.capacity);
	}
	if (metrics && srvd_metrics_start(&d, metrics, &err))
		goto clean_dp;
	/* a short per-call deadline; do_register bounds the whole wait */
	if (zs_coord_open(coord_addr, 2000, 1, &d.coord, &err))
		goto clean_dp;
	if (zs_rpc_server_start(listen, srvd_methods, srvd_n_methods, &d, &rpc, bound_ctl,
				sizeof bound_ctl, &err))
		goto clean_coord;
	/* what the coordinator, the trainers and Prometheus are told */
	if (zs_advertise_addr(advertise, bound_ctl, false, d.me.addr, sizeof d.me.addr, "control",
			      &err) ||
	    zs_advertise_addr(data_advertise ? data_advertise : advertise, bound_data,
			      !data_advertise, d.me.data_addr, sizeof d.me.data_addr, "data-plane",
			      &err))
		goto clean_rpc;
	if (d.me.metrics_addr[0]) {
		char m[ZS_ADDR_MAX];
		snprintf(m, sizeof m, "%s", d.me.metrics_addr);
		if (zs_advertise_addr(advertise, m, true, d.me.metrics_addr, sizeof d.me.metrics_addr,
				      "metrics", &err))
			goto clean_rpc;
	}
	if (port_file && zs_write_file_atomic(port_file, bound_ctl, &err))
		goto clean_rpc;
	printf("listening on %s\n", bound_ctl);
	fflush(stdout);
	zs_info("zshard-server %s listening on %s (data %s, %s), data dir %s, capacity %llu bytes%s",
		ZS_VERSION, bound_ctl, bound_data, d.me.shm_addr, data_dir,
		(unsigned long long)d.me.capacity, d.me.id ? "" : " (new)");
	if (strcmp(bound_ctl, d.me.addr) || strcmp(bound_data, d.me.data_addr))
		zs_info("advertised as %s (data %s)", d.me.addr, d.me.data_addr);

	srvd_live_claims(&d);
	if (srvd_do_register(&d, &err))
		goto clean_rpc;
	srvd_refresh_assignments(&d);
	srvd_live_load(&d);
	/* a restore asked while we were away is waiting */
	d.task_gen = (uint64_t)-1;
	if (pthread_create(&hb, NULL, srvd_heartbeat, &d)) {
		zs_fail(&err, ZS_ENOMEM, "cannot start the heartbeat thread");
		goto clean_rpc;
	}
	while (!srvd_stop)
		zs_sleep_ms(200, (volatile const int *)&srvd_stop);
	zs_info("shutting down");
	srvd_metrics_stop(&d); /* no scrape reads the engine from here on */
	pthread_join(hb, NULL);
	/* the writer finishes what it writes, and reports it, while the
	 * coordinator client is still open; then the engine goes (its
	 * cancelled snapshots are reported the same way) */
	pthread_mutex_lock(&d.mu);
	d.wstop = true;
	pthread_cond_signal(&d.wcv);
	pthread_mutex_unlock(&d.mu);
	pthread_join(d.writer, NULL);
	d.writer = 0;
	/* no trainer can move a shard now: keep what is between steps */
	zs_listener_stop(dp);
	unsigned lost = srvd_live_persist(&d);
	zs_rpc_server_free(rpc);
	rpc = NULL;
	engine_free(d.engine);
	d.engine = NULL;
	/* a stop that could not keep what it promised says so in its status */
	rc = lost ? 1 : 0;
	if (lost)
		zs_error("stopped; the live state of %u jobs could not be kept (see above)", lost);

clean_rpc:
	zs_rpc_server_free(rpc);
clean_coord:
	zs_coord_close(d.coord);
clean_dp:
	srvd_metrics_stop(&d);
	/* no more calls into the engine, then the engine answers what it
	 * holds (into closed connections), then the arena goes */
	zs_listener_stop(dp);
	engine_free(d.engine);
	d.engine = NULL;
	zs_listener_free(dp);
clean_engine:
	engine_free(d.engine);
clean_kv:
	pthread_mutex_lock(&d.mu);
	d.wstop = true;
	pthread_cond_signal(&d.wcv);
	pthread_mutex_unlock(&d.mu);
	if (d.writer) {
		pthread_join(d.writer, NULL);
		d.writer = 0;
	}
	while (d.wq) {
		struct snapjob *sj = d.wq;
		d.wq = sj->next;
		engine_snaps_free(sj->snaps, sj->n);
		free(sj);
	}
	free(d.busy);
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
	srvd_metrics_free(&d);
	pthread_mutex_destroy(&d.mu);
	return rc;
}
