/*
 * readers.c - zshardctl readers JOB: the job's weight readers (the
 * coordinator's registry, coord/readers.c): which version each holds
 * pinned (a step, or "ckpt ID": a committed checkpoint), the bytes it
 * read from the servers and from its parent and sent to its children,
 * and the relay tree they form.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "base/util.h"

/* The subtree of reader v[i], indented by depth. */
static void tree(const struct zs_reader_info *v, uint32_t n, uint64_t parent, int depth)
{
	for (uint32_t i = 0; i < n; i++) {
		if (v[i].parent != parent || (!v[i].pinned && parent))
			continue;
		printf("  %*s%s reader %llu%s%s\n", depth * 2, "", parent ? "<-" : "servers <-",
		       (unsigned long long)v[i].id, v[i].relay_addr[0] ? " relays at " : "",
		       v[i].relay_addr);
		if (depth < 64)
			tree(v, n, v[i].id, depth + 1);
	}
}

static int c_readers(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_reader_info *v = NULL;
	struct cli_args ca;
	uint32_t n = 0;
	int r;

	if ((r = cli_parse(&cmd_readers, argc, argv, 1, &ca)))
		return r < 0 ? 0 : r;
	if (ca.n_pos != 1)
		return cli_usage_err("readers", "want a job name");
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_readers(x->c, ca.pos[0], &v, &n, &err))
		return cli_die("%s", err.msg);
	if (cli_get(&cmd_readers, &ca, "json")) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < n; i++)
			json_array_append_new(
				a, json_pack("{s:I, s:b, s:o, s:o, s:I, s:s, s:s, s:I, s:I, s:I, s:I}", "id",
					     (json_int_t)v[i].id, "pinned", v[i].pinned, "step",
					     v[i].pinned && !(v[i].step & ZS_VERSION_CKPT)
						     ? json_integer((json_int_t)v[i].step)
						     : json_null(),
					     "checkpoint",
					     v[i].pinned && (v[i].step & ZS_VERSION_CKPT)
						     ? json_integer((json_int_t)(v[i].step & ~ZS_VERSION_CKPT))
						     : json_null(),
					     "parent", (json_int_t)v[i].parent,
					     "relay_addr", v[i].relay_addr, "host", v[i].host,
					     "bytes_from_servers", (json_int_t)v[i].from_servers,
					     "bytes_from_relay", (json_int_t)v[i].from_relay,
					     "bytes_served", (json_int_t)v[i].served, "age_ms",
					     (json_int_t)v[i].age_ms));
		cli_json_print(json_pack("{s:s, s:o}", "job", ca.pos[0], "readers", a));
		free(v);
		return 0;
	}
	printf("job %s: %u readers\n", ca.pos[0], n);
	if (n)
		printf("%-6s %-8s %-6s %-22s %-20s %10s %10s %10s %6s\n", "ID", "VERSION", "PARENT",
		       "RELAY", "HOST", "SERVERS", "RELAYED", "SERVED", "AGE-S");
	for (uint32_t i = 0; i < n; i++) {
		char b[3][32], step[32] = "-", par[24] = "servers";
		if (v[i].pinned && (v[i].step & ZS_VERSION_CKPT))
			snprintf(step, sizeof step, "ckpt %llu",
				 (unsigned long long)(v[i].step & ~ZS_VERSION_CKPT));
		else if (v[i].pinned)
			snprintf(step, sizeof step, "%llu", (unsigned long long)v[i].step);
		if (v[i].parent)
			snprintf(par, sizeof par, "%llu", (unsigned long long)v[i].parent);
		printf("%-6llu %-8s %-6s %-22s %-20s %10s %10s %10s %6.1f\n",
		       (unsigned long long)v[i].id, step, v[i].pinned ? par : "-",
		       v[i].relay_addr[0] ? v[i].relay_addr : "-", v[i].host[0] ? v[i].host : "-",
		       zs_fmt_bytes(v[i].from_servers, b[0], sizeof b[0]),
		       zs_fmt_bytes(v[i].from_relay, b[1], sizeof b[1]),
		       zs_fmt_bytes(v[i].served, b[2], sizeof b[2]), (double)v[i].age_ms / 1e3);
	}
	if (n) {
		printf("relay tree:\n");
		tree(v, n, 0, 0);
	}
	free(v);
	return 0;
}

static const struct zs_opt json_only[] = {CLI_FLAG_JSON, {0}};

const struct cmd cmd_readers = {"readers", "JOB [--json]",
				"The job's weight readers: the version each holds pinned, bytes read\n"
				"from the servers and from its parent, bytes sent to its children, and\n"
				"the relay tree (each version's first reader reads from the servers).",
				c_readers, json_only};
