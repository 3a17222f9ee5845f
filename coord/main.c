/*
 * main.c - zshard-coordinator: argument parsing, signals, the
 * "listening on" line. All the logic is in coord.c.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord.h"
#include "ctrl/tls.h"
#include "base/config.h"
#include "base/log.h"
#include "base/opts.h"
#include "base/util.h"
#include "base/version.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zshard-coordinator --data-dir DIR [options]\n"
		"       zshard-coordinator --etcd HOST:PORT,... [options]\n"
		"\n"
		"The zshard coordinator: shard-server membership, jobs, placement, stage.\n"
		"Its state lives in LMDB under DIR and survives restarts; or, with --etcd,\n"
		"in etcd, where several coordinators share it: one leads, the others stand\n"
		"by and take over within a lease period when it is lost. Clients take the\n"
		"list of all of them (--coordinator A,B,C) and follow the leader.\n"
		"\n");
	zs_opts_usage(f, zs_opts_coordinator);
}

int main(int argc, char **argv)
{
	struct option opts[64];
	struct coord_config cfg = {.listen = "127.0.0.1:7400", .lease_ms = 10000};
	const char *port_file = NULL, *tls[3] = {NULL, NULL, NULL};
	struct zs_error err = {0};
	char bound[ZS_HOST_MAX + 8];
	struct coord *c;
	struct sigaction sa;
	int o, li = 0;

	zs_log_init("coordinator");
	/* what it writes (its catalog, with every job's data-plane token; its
	 * port file) is its user's alone */
	umask(077);
	/* a --config file's settings first: the flags after them win */
	if (zs_config_daemon("coordinator", &argc, &argv, &err)) {
		fprintf(stderr, "zshard-coordinator: %s\n", err.msg);
		return 2;
	}
	/* flags, --help and each value's check from one table (base/opts.h),
	 * the one zshardctl config check checks a file's keys with */
	zs_opts_getopt(zs_opts_coordinator, opts, sizeof opts / sizeof opts[0]);
	while ((o = getopt_long(argc, argv, "", opts, &li)) != -1) {
		if (o != '?' && optarg && zs_opt_flag("zshard-coordinator", zs_opts_coordinator, opts[li].name, optarg))
			return 2;
		switch (o) {
		case 'l': cfg.listen = optarg; break;
		case 'd': cfg.data_dir = optarg; break;
		case 'm': cfg.metrics = optarg; break;
		case 'a': cfg.advertise = optarg; break;
		case 1: case 2: case 3: tls[o - 1] = optarg; break;
		case 4: break; /* read before the other flags */
		case 5: cfg.etcd = optarg; break;
		case 6: cfg.etcd_prefix = optarg; break;
		/* the values the table took (zs_opt_flag above): converted only */
		case 7: cfg.etcd_lease_s = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 8: cfg.tls_roles_required = !strcmp(optarg, "required"); break;
		case 9: cfg.secret_key = optarg; break;
		case 10: cfg.data_tls = !strcmp(optarg, "on"); break;
		case 12: cfg.metrics_certified = !strcmp(optarg, "certified"); break;
		case 'p': port_file = optarg; break;
		case 'L': cfg.lease_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'T': cfg.trainer_lease_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'G': cfg.trainer_gone_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'v':
			if (zs_log_level_option("zshard-coordinator", optarg))
				return 2;
			break;
		case 'V': printf("zshard-coordinator %s\n", ZS_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zshard-coordinator: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!cfg.data_dir && !cfg.etcd) {
		fprintf(stderr, "zshard-coordinator: --data-dir (or --etcd) is required\n");
		return 2;
	}
	if (cfg.data_dir && cfg.etcd) {
		fprintf(stderr, "zshard-coordinator: --data-dir and --etcd exclude each other (the catalog is in one of them)\n");
		return 2;
	}
	if (zs_tls_setup(tls[0], tls[1], tls[2], &err)) {
		fprintf(stderr, "zshard-coordinator: %s\n", err.msg);
		return 2;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (coord_start(&cfg, &c, bound, sizeof bound, &err)) {
		zs_error("cannot start: %s", err.msg);
		return 1;
	}
	if (port_file && zs_write_file_atomic(port_file, bound, &err)) {
		zs_error("%s", err.msg);
		coord_free(c);
		return 1;
	}
	printf("listening on %s\n", bound);
	fflush(stdout);
	if (cfg.etcd)
		zs_info("zshard-coordinator %s listening on %s, catalog in etcd %s, lease %u ms; standing by until it leads",
			ZS_VERSION, bound, cfg.etcd, cfg.lease_ms);
	else
		zs_info("zshard-coordinator %s listening on %s, data dir %s, lease %u ms",
			ZS_VERSION, bound, cfg.data_dir, cfg.lease_ms);

	while (!stop && !coord_lost(c))
		zs_sleep_ms(200, (volatile const int *)&stop);
	if (coord_lost(c)) { /* said why already */
		coord_free(c);
		return 1;
	}

	zs_info("shutting down");
	coord_free(c);
	zs_info("stopped");
	return 0;
}
