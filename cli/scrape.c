/*
 * scrape.c - zshardctl scrape-targets: the daemons' metrics endpoints as a
 * Prometheus file_sd_configs file (JSON), so that Prometheus follows the
 * cluster as servers come and go: the coordinator's endpoint, and each
 * server's, labelled with its id and host (and __scheme__ https when the
 * cluster runs mTLS). Rewrite the file from cron or a timer; Prometheus
 * rereads it when it changes.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "ctrl/tls.h"

static int c_scrape_targets(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_coord_status cs;
	struct zs_server_info *s;
	uint32_t n;
	struct cli_args ca;
	int r;
	json_t *groups;

	if ((r = cli_parse(&cmd_scrape_targets, argc, argv, 0, &ca)))
		return r < 0 ? 0 : r;
	/* --json: taken, as the output is JSON anyway */
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_status(x->c, &cs, &err) || zs_coord_servers(x->c, &s, &n, &err))
		return cli_die("%s", err.msg);
	groups = json_array();
	if (cs.metrics_addr[0])
		json_array_append_new(groups, json_pack("{s:[s], s:{s:s}}", "targets", cs.metrics_addr,
							"labels", "zshard_role", "coordinator"));
	for (uint32_t i = 0; i < n; i++) {
		char id[24];
		if (!s[i].metrics_addr[0])
			continue;
		snprintf(id, sizeof id, "%llu", (unsigned long long)s[i].id);
		json_array_append_new(groups,
				      json_pack("{s:[s], s:{s:s, s:s, s:s}}", "targets",
						s[i].metrics_addr, "labels", "zshard_role", "server",
						"zshard_server", id, "zshard_host", s[i].host));
	}
	/* a cluster on mTLS serves its metrics over https (the daemons'
	 * certificates): Prometheus takes the scheme from this label, the CA
	 * from its scrape job's tls_config */
	for (size_t i = 0; zs_tls_on() && i < json_array_size(groups); i++)
		json_object_set_new(json_object_get(json_array_get(groups, i), "labels"), "__scheme__",
				    json_string("https"));
	free(s);
	cli_json_print(groups);
	return 0;
}

static const struct zs_opt scrape_flags[] = {CLI_FLAG_JSON, {0}};

const struct cmd cmd_scrape_targets = {"scrape-targets", "[--json]",
	 "The metrics endpoints of the coordinator and of every server started\n"
	 "with --metrics, as a Prometheus file_sd_configs file (always JSON):\n"
	 "  zshardctl scrape-targets > /etc/prometheus/zshard.json\n"
	 "With --tls-* (mTLS) the daemons serve https with their certificates: the\n"
	 "targets say so (__scheme__), and the scrape job names the CA (tls_config).",
	 c_scrape_targets, scrape_flags};
