/*
 * config.c - zshardctl config check FILE: reads a launch configuration as
 * every program would (base/config.h) and says what each takes from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/opts.h"
#include "cli/cli.h"
#include "net/transport.h"

/* zshardctl config keys: every key a file may set, from the tables the
 * programs check their settings with */
static void print_keys(const char *prefix, const struct zs_opt *t, const char *who)
{
	for (const struct zs_opt *o = t; o->name; o++) {
		char key[64], range[160] = "", max[24] = "";
		if (!o->config)
			continue;
		snprintf(key, sizeof key, "%s%s", prefix, o->name);
		for (char *p = key; *p; p++)
			*p = *p == '-' ? '_' : *p;
		if (o->kind == ZS_OPT_CHOICE)
			snprintf(range, sizeof range, " %s", o->choices);
		else if ((o->kind == ZS_OPT_NUM || o->kind == ZS_OPT_SIZE) && (o->min || o->max)) {
			if (o->max)
				snprintf(max, sizeof max, "%llu", o->max);
			snprintf(range, sizeof range, " %llu..%s", o->min, max);
		}
		printf("%-32.32s %s%s  (%s)\n", key, zs_opt_kind_name(o->kind), range, who);
	}
}

static int c_config(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_config c;
	const char *who[] = {"server", "coordinator"};
	const char *tr;
	struct cli_args ca;
	const char *file;
	int r;

	(void)x;
	if ((r = cli_parse(&cmd_config, argc, argv, 2, &ca)))
		return r < 0 ? 0 : r;
	if (ca.n_pos == 1 && !strcmp(ca.pos[0], "keys")) {
		print_keys("", zs_opts_common, "everyone");
		print_keys("server.", zs_opts_server, "zshard-server --FLAG");
		print_keys("coordinator.", zs_opts_coordinator, "zshard-coordinator --FLAG");
		return 0;
	}
	if (ca.n_pos != 2 || strcmp(ca.pos[0], "check"))
		return cli_usage_err("config", "want: config check FILE, or config keys");
	file = ca.pos[1];
	if (zs_config_load(file, &c, &err))
		return cli_die("%s", err.msg);
	if ((tr = zs_config_get(&c, "transport")) && zs_transport_check_name(tr, &err)) {
		zs_config_release(&c);
		return cli_die("%s: transport: %s", file, err.msg);
	}
	int tls = !!zs_config_get(&c, "tls_ca") + !!zs_config_get(&c, "tls_cert") +
		  !!zs_config_get(&c, "tls_key");
	if (tls && tls != 3) {
		zs_config_release(&c);
		return cli_die("%s: TLS needs all of tls_ca, tls_cert and tls_key", file);
	}
	printf("%s: %zu settings, all valid\n", file, c.n);
	for (int w = 0; w < 2; w++) {
		char **v;
		int n;
		char *a0 = (char *)(w ? "zshard-coordinator" : "zshard-server");
		if (zs_config_argv(&c, who[w], 1, &a0, &v, &n, &err))
			return cli_die("%s", err.msg);
		printf("  %s takes:", a0);
		for (int i = 1; i < n; i++)
			printf(" %s", strncmp(v[i], "--tls-key=", 10) ? v[i] : "--tls-key=(a file)");
		printf("%s\n", n > 1 ? "" : " nothing");
		free(v);
	}
	printf("  trainers (ZSHARD_CONFIG) and zshardctl take:");
	for (size_t i = 0; i < c.n; i++)
		if (!strchr(c.e[i].key, '.'))
			printf(" %s=%s", c.e[i].key, c.e[i].value);
	printf("\n");
	zs_config_release(&c);
	return 0;
}

const struct cmd cmd_config = {"config", "check FILE | keys",
	 "Checks a launch configuration: \"key = value\" lines, '#' comments, each\n"
	 "value checked as the program that takes it checks its flag (one table\n"
	 "per program; config keys lists every key with its kind and bounds).\n"
	 "  coordinator = HOST:PORT[,HOST:PORT...]   everyone\n"
	 "  tls_ca, tls_cert, tls_key = FILE          everyone (mutual TLS)\n"
	 "  transport = auto|tcp|shm|rdma             trainers\n"
	 "  stage = 1|2|3           zshardctl job create, for a spec without one\n"
	 "  prefetch, push_depth = N; max_live_bytes = SIZE   trainers' step driver\n"
	 "  server.KEY = VALUE      a zshard-server flag (--KEY, '-' written '_'):\n"
	 "      listen data_listen advertise data_advertise data_dir capacity\n"
	 "      memory_budget gpu gpu_budget landing_budget metrics step_timeout_ms rdma\n"
	 "      coordinator_timeout_ms log_level\n"
	 "  coordinator.KEY = VALUE a zshard-coordinator flag: listen advertise\n"
	 "      data_dir metrics lease_ms trainer_lease_ms trainer_gone_ms etcd\n"
	 "      etcd_prefix etcd_lease_s\n"
	 "      log_level\n"
	 "The daemons read it with --config FILE, trainers (libzshard, Python) and\n"
	 "zshardctl with $ZSHARD_CONFIG (zshardctl also --config); flags and the\n"
	 "environment win over the file. Exit 0 when valid, 1 with FILE:LINE: why.",
	 c_config, NULL};
