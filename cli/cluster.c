/*
 * cluster.c - zshardctl servers, status, rdma and gpu: the shard servers,
 * the coordinator's or one server's status, and whether rdma works on a
 * host, and what GPU work it can do.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"
#include "ctrl/tls.h"
#include "gpu/coll.h"
#include "gpu/dev.h"
#include "rdma/rdma.h"

/* ------------------------------------------------------------- servers */

/* servers remove ID [--drop-checkpoints] */
static int remove_server(struct ctx *x, const struct cli_args *ca)
{
	struct zs_error err = {0};
	char dropped[4096];
	uint32_t n = 0;
	uint64_t id;
	int r;

	if (ca->n_pos != 2 || strcmp(ca->pos[0], "remove"))
		return cli_usage_err("servers", "want: servers [--json], or servers remove ID");
	if (zs_parse_u64(ca->pos[1], 1, UINT64_MAX, &id, &err))
		return cli_usage_err("servers", "remove: the server's id: %s", err.msg);
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_remove_server(x->c, id, cli_get(&cmd_servers, ca, "drop-checkpoints") != NULL,
				   dropped, sizeof dropped, &n, &err))
		return cli_die("%s", err.msg);
	printf("server %llu removed from the cluster for good", (unsigned long long)id);
	if (n)
		printf("; checkpoints deleted with it: %s", dropped);
	printf("\n");
	return 0;
}

static int c_servers(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_server_info *s;
	uint32_t n;
	struct cli_args ca;
	int json, r;

	if ((r = cli_parse(&cmd_servers, argc, argv, 2, &ca)))
		return r < 0 ? 0 : r;
	if (ca.n_pos)
		return remove_server(x, &ca);
	json = cli_get(&cmd_servers, &ca, "json") != NULL;
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_servers(x->c, &s, &n, &err))
		return cli_die("%s", err.msg);
	if (json) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < n; i++) {
			char tr[64];
			json_array_append_new(
				a, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:I, s:s}",
					     "id", (json_int_t)s[i].id, "addr", s[i].addr,
					     "metrics_addr", s[i].metrics_addr,
					     "data_addr", s[i].data_addr, "shm_addr", s[i].shm_addr,
					     "host", s[i].host,
					     "state", cli_state_name(&s[i]),
					     "capacity", (json_int_t)s[i].capacity,
					     "used", (json_int_t)s[i].used,
					     "transports", zs_transports_fmt(s[i].transports, tr, sizeof tr),
					     "last_seen_ms", (json_int_t)s[i].last_seen_ms,
					     "health", s[i].health));
		}
		cli_json_print(json_pack("{s:o}", "servers", a));
	} else {
		printf("%-4s %-22s %-6s %12s %12s %-10s %s\n", "ID", "ADDRESS", "STATE",
		       "CAPACITY", "USED", "TRANSPORTS", "LAST SEEN");
		for (uint32_t i = 0; i < n; i++) {
			char cap[32], used[32], tr[64], seen[32];
			if (s[i].last_seen_ms < 0)
				snprintf(seen, sizeof seen, "never");
			else
				snprintf(seen, sizeof seen, "%.1f s ago",
					 (double)s[i].last_seen_ms / 1000.0);
			printf("%-4llu %-22s %-6s %12s %12s %-10s %s\n",
			       (unsigned long long)s[i].id, s[i].addr, cli_state_name(&s[i]),
			       zs_fmt_bytes(s[i].capacity, cap, sizeof cap),
			       zs_fmt_bytes(s[i].used, used, sizeof used),
			       zs_transports_fmt(s[i].transports, tr, sizeof tr), seen);
			if (s[i].health[0])
				printf("     %s\n", s[i].health);
		}
	}
	free(s);
	return 0;
}

/* --------------------------------------------------------------- status */

/* A shard server's own status (status --server). */
static int server_status(struct ctx *x, const char *addr, int json)
{
	struct zs_error err = {0};
	struct zs_server_status s;

	if (zs_server_status_query(addr, x->timeout_ms, &s, &err))
		return cli_die("%s", err.msg);
	if (json) {
		json_t *a = json_array();
		for (uint32_t k = 0; k < s.n_assignments; k++)
			json_array_append_new(
				a, json_pack("{s:s, s:I, s:i, s:I}", "job",
					     s.assignments[k].job, "epoch",
					     (json_int_t)s.assignments[k].epoch,
					     "shards", (int)s.assignments[k].n_shards,
					     "bytes", (json_int_t)s.assignments[k].bytes));
		cli_json_print(json_pack("{s:I, s:s, s:s, s:s, s:i, s:I, s:i, s:i, s:s, s:b, s:I, s:I, s:I, s:o}",
				     "id", (json_int_t)s.id, "addr", s.addr,
				     "rdma", s.rdma, "device", s.device,
				     "shards_on_device", (int)s.shards_on_device,
				     "device_bytes", (json_int_t)s.device_bytes,
				     "shards_tiered", (int)s.shards_tiered,
				     "shards", (int)s.shards,
				     "coordinator", s.coordinator, "registered",
				     s.registered, "capacity",
				     (json_int_t)s.capacity, "assigned_bytes",
				     (json_int_t)s.assigned_bytes, "uptime_ms",
				     (json_int_t)s.uptime_ms, "assignments", a));
	} else {
		char c1[32], c2[32];
		printf("server %llu at %s: %s with %s, up %.1f s, capacity %s, assigned %s in %u jobs\n",
		       (unsigned long long)s.id, s.addr,
		       s.registered ? "registered" : "not registered",
		       s.coordinator, (double)s.uptime_ms / 1000.0,
		       zs_fmt_bytes(s.capacity, c1, sizeof c1),
		       zs_fmt_bytes(s.assigned_bytes, c2, sizeof c2),
		       s.n_assignments);
		printf("  rdma %s\n", s.rdma[0] ? s.rdma : "(not reported)");
		printf("  shards: %u, state on %s: %u (%s), in the NVMe tier: %u, in host memory: %u\n",
		       s.shards, s.device[0] ? s.device : "no device", s.shards_on_device,
		       zs_fmt_bytes(s.device_bytes, c1, sizeof c1), s.shards_tiered,
		       s.shards - s.shards_on_device - s.shards_tiered);
		for (uint32_t k = 0; k < s.n_assignments; k++)
			printf("  job %s: %u shards, epoch %llu, %s\n",
			       s.assignments[k].job, s.assignments[k].n_shards,
			       (unsigned long long)s.assignments[k].epoch,
			       zs_fmt_bytes(s.assignments[k].bytes, c1, sizeof c1));
	}
	zs_server_status_release(&s);
	return 0;
}

static const struct zs_opt status_flags[] = {
	CLI_FLAG_JSON,
	{"server", ZS_OPT_ADDR, 0, 0, NULL, false, 0, "HOST:PORT", "a shard server's status"},
	{0},
};

static int c_status(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct cli_args ca;
	int json, r;

	if ((r = cli_parse(&cmd_status, argc, argv, 0, &ca)))
		return r < 0 ? 0 : r;
	json = cli_get(&cmd_status, &ca, "json") != NULL;
	if (cli_get(&cmd_status, &ca, "server"))
		return server_status(x, cli_get(&cmd_status, &ca, "server"), json);
	if ((r = cli_open_coord(x)))
		return r;
	{
		struct zs_coord_status s;
		if (zs_coord_status(x->c, &s, &err))
			return cli_die("%s", err.msg);
		if (json)
			cli_json_print(json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:I}",
					     "version", s.version, "addr", s.addr,
					     "metrics_addr", s.metrics_addr,
					     "data_dir", s.data_dir, "uptime_ms",
					     (json_int_t)s.uptime_ms, "lease_ms",
					     (int)s.lease_ms, "servers_up", (int)s.servers_up,
					     "servers_down", (int)s.servers_down, "jobs",
					     (int)s.jobs, "assign_gen",
					     (json_int_t)s.assign_gen));
		else
			printf("coordinator %s (zshard %s), up %.1f s, %s %s\n"
			       "servers: %u up, %u down (lease %u ms); jobs: %u; assignment generation %llu\n",
			       s.addr, s.version, (double)s.uptime_ms / 1000.0,
			       /* "etcd ENDPOINTS": the leader of those sharing it */
			       strncmp(s.data_dir, "etcd ", 5) ? "data dir" : "leading, catalog in",
			       s.data_dir,
			       s.servers_up, s.servers_down, s.lease_ms, s.jobs,
			       (unsigned long long)s.assign_gen);
		if (!json && s.metrics_addr[0])
			/* with mutual TLS the daemons serve them over https only */
			printf("metrics: %s://%s/metrics\n", zs_tls_on() ? "https" : "http",
			       s.metrics_addr);
	}
	return 0;
}

/* ----------------------------------------------------------------- rdma */

static int c_rdma(struct ctx *x, int argc, char **argv)
{
	uint64_t lock = 1ULL << 30;
	struct cli_args ca;
	char note[256];
	int json, r;
	enum zs_status st;

	(void)x;
	if ((r = cli_parse(&cmd_rdma, argc, argv, 0, &ca)))
		return r < 0 ? 0 : r;
	json = cli_get(&cmd_rdma, &ca, "json") != NULL;
	lock = cli_get_u64(&cmd_rdma, &ca, "lock", lock);
	st = zs_rdma_probe(lock, note, sizeof note);
	if (json)
		cli_json_print(json_pack("{s:b, s:s}", "usable", !st, "note", note));
	else
		printf("rdma %s: %s\n", st ? "cannot work on this host" : "works on this host", note);
	return st ? 1 : 0;
}

/* ------------------------------------------------------------------ gpu */

static int c_gpu(struct ctx *x, int argc, char **argv)
{
	char why[256] = "", nwhy[256] = "";
	struct cli_args ca;
	int json, n, r;
	bool nccl;
	json_t *devs;

	(void)x;
	if ((r = cli_parse(&cmd_gpu, argc, argv, 0, &ca)))
		return r < 0 ? 0 : r;
	json = cli_get(&cmd_gpu, &ca, "json") != NULL;
	devs = json_array();
	n = zs_dev_count(why, sizeof why);
	for (int i = 0; i < n; i++) {
		struct zs_dev *d;
		char w[256];
		if (zs_dev_open(i, &d, w, sizeof w)) {
			json_array_append_new(devs, json_pack("{s:i, s:s}", "device", i, "error", w));
			continue;
		}
		json_array_append_new(devs, json_pack("{s:i, s:s}", "device", i, "name",
						      zs_dev_name(d)));
		zs_dev_close(d);
	}
	nccl = zs_nccl_available(nwhy, sizeof nwhy);
	if (json) {
		cli_json_print(json_pack("{s:o, s:s, s:b, s:s}", "devices", devs, "cuda",
					 n > 0 ? "" : n == 0 ? "no CUDA device on this machine" : why,
					 "nccl", nccl, "nccl_note", nwhy));
		return n > 0 ? 0 : 1;
	}
	if (n < 0)
		printf("cuda: no device usable: %s\n", why);
	else
		printf("cuda: %d device%s\n", n, n == 1 ? "" : "s");
	for (size_t i = 0; i < json_array_size(devs); i++) {
		json_t *o = json_array_get(devs, i);
		const char *name = json_string_value(json_object_get(o, "name"));
		printf("  %d: %s\n", (int)json_integer_value(json_object_get(o, "device")),
		       name ? name : json_string_value(json_object_get(o, "error")));
	}
	if (nccl)
		printf("nccl: loads (collective jobs can use it%s)\n",
		       n >= 2 ? "" : "; it needs two GPUs to run");
	else
		printf("nccl: does not load: %s\n", nwhy);
	printf("emulated device: always (trainers: ZS_DEVICE_EMULATED; zshard-server --gpu emulated)\n");
	json_decref(devs);
	return n > 0 ? 0 : 1;
}

static const struct zs_opt json_only[] = {CLI_FLAG_JSON, {0}};
static const struct zs_opt rdma_flags[] = {
	CLI_FLAG_JSON,
	{"lock", ZS_OPT_SIZE, 0, 0, NULL, false, 0, "SIZE", "the memlock limit wanted (1G)"},
	{0},
};

static const struct zs_opt servers_flags[] = {
	CLI_FLAG_JSON,
	{"drop-checkpoints", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL,
	 "remove: delete the checkpoints whose records it holds"},
	{0},
};

const struct cmd cmd_servers = {"servers", "[--json] | remove ID [--drop-checkpoints]",
	"List shard servers: id, address, up/down, capacity, bytes placed, transports.\n"
	"remove ID: take a server out of the cluster for good (a drained one: see\n"
	"the decommission runbook in docs/operations.md). Refused, naming what\n"
	"still needs it, while it is up, holds a job's shards (zshardctl rebalance\n"
	"moves them), or holds records of checkpoints a rollback or restore would\n"
	"read there (rebalance takes one on the job's new servers; delete the\n"
	"others, or --drop-checkpoints deletes them with it).", c_servers, servers_flags};

const struct cmd cmd_status = {"status", "[--server HOST:PORT] [--json]", "The coordinator's status, or a shard server's.", c_status, status_flags};

const struct cmd cmd_gpu = {"gpu", "[--json]",
	 "What GPU work this host can do, said plainly: the CUDA driver and its\n"
	 "devices (for trainers in device mode and zshard-server --gpu N), and\n"
	 "whether NCCL loads (collective jobs). Exit 0 with a device, 1 without.\n"
	 "Needs no coordinator.", c_gpu, json_only};

const struct cmd cmd_rdma = {"rdma", "[--lock SIZE] [--json]",
	 "Whether RDMA can work on this host, said plainly: an RDMA device, its\n"
	 "port up, and a memlock limit of at least SIZE (default 1G, what a shard\n"
	 "server registers: its --capacity). Exit 0 if it can, 1 with the reason\n"
	 "if not. Needs no coordinator; `status --server` says what a server offers.", c_rdma, rdma_flags};
