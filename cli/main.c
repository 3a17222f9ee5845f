/*
 * main.c - zshardctl, the operator CLI: global options, then one command.
 * Every command is one or two coordinator RPCs and a table (or --json);
 * each lives in the file of its group (cli.h lists them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/log.h"
#include "base/util.h"
#include "base/version.h"
#include "cli/cli.h"
#include "ctrl/tls.h"
#include "base/config.h"

const struct cmd *const cli_cmds[] = {
	&cmd_servers, &cmd_jobs, &cmd_job, &cmd_placement, &cmd_stage, &cmd_trainers,
	&cmd_rebalance, &cmd_status, &cmd_checkpoint, &cmd_export, &cmd_import, &cmd_stats,
	&cmd_plan, &cmd_rdma, &cmd_gpu, &cmd_scrape_targets, &cmd_config, &cmd_env, &cmd_readers,
	&cmd_man, NULL,
};

static void usage(FILE *f)
{
	fprintf(f, "usage: zshardctl [--version] [--coordinator HOST:PORT] [--timeout-ms MS]\n"
		   "                 [--tls-ca FILE --tls-cert FILE --tls-key FILE] [--config FILE]\n"
		   "                 COMMAND [ARGS]\n\n"
		   "The zshard operator CLI. The coordinator address may also come from\n"
		   "$ZSHARD_COORDINATOR. Commands (each takes --help):\n\n");
	for (const struct cmd *const *c = cli_cmds; *c; c++)
		fprintf(f, "  %-10s %s\n", (*c)->name, (*c)->args);
}

int main(int argc, char **argv)
{
	struct ctx x = {.coordinator = zs_env("ZSHARD_COORDINATOR"), .timeout_ms = 10000};
	struct zs_error err = {0};
	const char *tls_ca = NULL, *tls_cert = NULL, *tls_key = NULL, *config = zs_env("ZSHARD_CONFIG");
	static struct zs_config file; /* the strings above may point into it */
	static char first[ZS_ADDR_MAX], local[ZS_ADDR_MAX], ldir[512];
	int i = 1, rc;

	zs_log_init("zshardctl");
	zs_log_set_level(ZS_LOG_ERROR);
	for (; i < argc && argv[i][0] == '-'; i++) {
		uint64_t v;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
			printf("zshardctl %s\n", ZS_VERSION);
			return 0;
		} else if (!strcmp(argv[i], "--coordinator") && i + 1 < argc) {
			x.coordinator = argv[++i];
		} else if (!strncmp(argv[i], "--coordinator=", 14)) {
			x.coordinator = argv[i] + 14;
		} else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			config = argv[++i];
		} else if (!strcmp(argv[i], "--tls-ca") && i + 1 < argc) {
			tls_ca = argv[++i];
		} else if (!strcmp(argv[i], "--tls-cert") && i + 1 < argc) {
			tls_cert = argv[++i];
		} else if (!strcmp(argv[i], "--tls-key") && i + 1 < argc) {
			tls_key = argv[++i];
		} else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc) {
			if (zs_parse_u64(argv[++i], 1, 3600000, &v, &err)) {
				fprintf(stderr, "zshardctl: --timeout-ms: %s\n", err.msg);
				return 2;
			}
			x.timeout_ms = (int)v;
			x.timeout_set = true;
		} else {
			fprintf(stderr, "zshardctl: unknown option '%s' (see zshardctl --help)\n",
				argv[i]);
			return 2;
		}
	}
	if (i == argc) {
		usage(stderr);
		return 2;
	}
	/* a launch configuration fills in what neither the flags nor the
	 * environment say (config check reads its own file) */
	if (config && config[0] && strcmp(argv[i], "config")) {
		if (zs_config_load(config, &file, &err)) {
			fprintf(stderr, "zshardctl: %s\n", err.msg);
			return 2;
		}
		if (!x.coordinator)
			x.coordinator = zs_config_coordinator(&file, first, sizeof first);
		if (zs_config_get(&file, "stage")) /* checked at load: 1 to 3 */
			x.stage = (unsigned)atoi(zs_config_get(&file, "stage"));
		if (!tls_ca && !tls_cert && !tls_key && !zs_env("ZSHARD_TLS_CA")) {
			tls_ca = zs_config_get(&file, "tls_ca");
			tls_cert = zs_config_get(&file, "tls_cert");
			tls_key = zs_config_get(&file, "tls_key");
		}
	}
	if (!x.coordinator) /* else the local cluster of zshard-local's default folder */
		x.coordinator = zs_local_coordinator(local, sizeof local, ldir, sizeof ldir);
	/* mutual TLS to the coordinator and servers: the flags, else the
	 * environment (ZSHARD_TLS_CA, _CERT, _KEY) */
	if (zs_tls_setup(tls_ca, tls_cert, tls_key, &err)) {
		fprintf(stderr, "zshardctl: %s\n", err.msg);
		return 2;
	}
	for (const struct cmd *const *c = cli_cmds; *c; c++) {
		if (strcmp((*c)->name, argv[i]))
			continue;
		rc = (*c)->fn(&x, argc - i, argv + i);
		zs_coord_close(x.c);
		return rc;
	}
	fprintf(stderr, "zshardctl: unknown command '%s' (see zshardctl --help)\n", argv[i]);
	return 2;
}
