/*
 * zshardctl - the operator CLI. Every command is one or two coordinator
 * RPCs and a table (or --json). Exit status: 0 on success, 1 with one line
 * on stderr when the coordinator says no or cannot be reached, 2 for bad
 * usage.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctrl/coord_client.h"
#include "cli/jobio.h"
#include "model/plan.h"
#include "rdma/rdma.h"
#include "storage/safetensors.h"
#include "base/log.h"
#include "model/model.h"
#include "model/spec_json.h"
#include "base/util.h"

struct ctx {
	const char *coordinator;
	int timeout_ms;
	struct zs_coord_client *c;
};

struct cmd {
	const char *name;
	const char *args;
	const char *help;
	int (*fn)(struct ctx *, int, char **);
};

static const struct cmd cmds[];

static int die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die(const char *fmt, ...)
{
	va_list ap;
	fputs("zshardctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static int usage_err(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int usage_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "zshardctl %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see zshardctl %s --help)\n", cmd);
	return 2;
}

static int open_coord(struct ctx *x)
{
	struct zs_error err = {0};

	if (!x->coordinator)
		return die("no coordinator: give --coordinator HOST:PORT or set ZSHARD_COORDINATOR");
	if (zs_coord_open(x->coordinator, x->timeout_ms, 0, &x->c, &err))
		return die("%s", err.msg);
	return 0;
}

/* Parses a command's own flags: --json and --help; returns the positionals. */
static int flags(const struct cmd *cmd, int argc, char **argv, int *json,
		 char **pos, int max_pos, int *n_pos)
{
	*n_pos = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zshardctl %s %s\n\n%s\n", cmd->name, cmd->args,
			       cmd->help);
			return -1;
		}
		if (json && !strcmp(argv[i], "--json")) {
			*json = 1;
			continue;
		}
		if (argv[i][0] == '-' && argv[i][1])
			return usage_err(cmd->name, "unknown option '%s'", argv[i]);
		if (*n_pos == max_pos)
			return usage_err(cmd->name, "unexpected argument '%s'", argv[i]);
		pos[(*n_pos)++] = argv[i];
	}
	return 0;
}

static void json_print(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	json_decref(j);
}

static const char *state_name(const struct zs_server_info *s)
{
	return s->up ? "up" : "down";
}

/* ------------------------------------------------------------- servers */

static int c_servers(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_server_info *s;
	uint32_t n;
	char *pos[1];
	int json = 0, np, r;

	if ((r = flags(&cmds[0], argc, argv, &json, pos, 0, &np)))
		return r < 0 ? 0 : r;
	if ((r = open_coord(x)))
		return r;
	if (zs_coord_servers(x->c, &s, &n, &err))
		return die("%s", err.msg);
	if (json) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < n; i++) {
			char tr[64];
			json_array_append_new(
				a, json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:I}",
					     "id", (json_int_t)s[i].id, "addr", s[i].addr,
					     "data_addr", s[i].data_addr, "shm_addr", s[i].shm_addr,
					     "host", s[i].host,
					     "state", state_name(&s[i]),
					     "capacity", (json_int_t)s[i].capacity,
					     "used", (json_int_t)s[i].used,
					     "transports", zs_transports_fmt(s[i].transports, tr, sizeof tr),
					     "last_seen_ms", (json_int_t)s[i].last_seen_ms));
		}
		json_print(json_pack("{s:o}", "servers", a));
	} else {
		printf("%-4s %-22s %-5s %12s %12s %-10s %s\n", "ID", "ADDRESS", "STATE",
		       "CAPACITY", "USED", "TRANSPORTS", "LAST SEEN");
		for (uint32_t i = 0; i < n; i++) {
			char cap[32], used[32], tr[64], seen[32];
			if (s[i].last_seen_ms < 0)
				snprintf(seen, sizeof seen, "never");
			else
				snprintf(seen, sizeof seen, "%.1f s ago",
					 (double)s[i].last_seen_ms / 1000.0);
			printf("%-4llu %-22s %-5s %12s %12s %-10s %s\n",
			       (unsigned long long)s[i].id, s[i].addr, state_name(&s[i]),
			       zs_fmt_bytes(s[i].capacity, cap, sizeof cap),
			       zs_fmt_bytes(s[i].used, used, sizeof used),
			       zs_transports_fmt(s[i].transports, tr, sizeof tr), seen);
		}
	}
	free(s);
	return 0;
}

/* ----------------------------------------------------------------- jobs */

static json_t *job_json_brief(const struct zs_job *j)
{
	return json_pack("{s:s, s:i, s:i, s:s, s:s, s:i, s:I, s:I, s:i, s:i}",
			 "name", j->spec.name, "stage", (int)j->spec.stage,
			 "world_size", (int)j->spec.world_size,
			 "compute_dtype", zs_dtype_name(j->spec.compute_dtype),
			 "optimizer", zs_optim_name(j->spec.optim.kind),
			 "units", (int)j->spec.layout.n_units,
			 "numel", (json_int_t)zs_layout_numel(&j->spec.layout),
			 "epoch", (json_int_t)j->placement.epoch,
			 "shards", (int)j->placement.n_shards,
			 "trainers", (int)j->n_trainers);
}

static int c_jobs(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job *j;
	uint32_t n;
	char *pos[1];
	int json = 0, np, r;

	if ((r = flags(&cmds[1], argc, argv, &json, pos, 0, &np)))
		return r < 0 ? 0 : r;
	if ((r = open_coord(x)))
		return r;
	if (zs_coord_jobs(x->c, &j, &n, &err))
		return die("%s", err.msg);
	if (json) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < n; i++)
			json_array_append_new(a, job_json_brief(&j[i]));
		json_print(json_pack("{s:o}", "jobs", a));
	} else {
		printf("%-20s %-5s %-6s %-6s %-6s %6s %14s %6s %7s %8s\n", "JOB", "STAGE",
		       "WORLD", "DTYPE", "OPTIM", "UNITS", "PARAMS", "EPOCH", "SHARDS",
		       "TRAINERS");
		for (uint32_t i = 0; i < n; i++)
			printf("%-20s %-5u %-6u %-6s %-6s %6u %14llu %6llu %7u %5u/%u\n",
			       j[i].spec.name, j[i].spec.stage, j[i].spec.world_size,
			       zs_dtype_name(j[i].spec.compute_dtype),
			       zs_optim_name(j[i].spec.optim.kind), j[i].spec.layout.n_units,
			       (unsigned long long)zs_layout_numel(&j[i].spec.layout),
			       (unsigned long long)j[i].placement.epoch,
			       j[i].placement.n_shards, j[i].n_trainers,
			       j[i].spec.world_size);
	}
	for (uint32_t i = 0; i < n; i++)
		zs_job_release(&j[i]);
	free(j);
	return 0;
}

static void print_job(const struct zs_job *j)
{
	printf("job %s: stage %u, world size %u, compute %s, optimizer %s (lr %g), %u units, %llu parameters, placement epoch %llu, %u shards, %u/%u trainers joined\n",
	       j->spec.name, j->spec.stage, j->spec.world_size,
	       zs_dtype_name(j->spec.compute_dtype), zs_optim_name(j->spec.optim.kind),
	       j->spec.optim.lr, j->spec.layout.n_units,
	       (unsigned long long)zs_layout_numel(&j->spec.layout),
	       (unsigned long long)j->placement.epoch, j->placement.n_shards,
	       j->n_trainers, j->spec.world_size);
}

static int c_job(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job j = {0};
	char *pos[2];
	int json = 0, np, r;
	enum zs_status st;

	if ((r = flags(&cmds[2], argc, argv, &json, pos, 2, &np)))
		return r < 0 ? 0 : r;
	if (np != 2 || (strcmp(pos[0], "create") && strcmp(pos[0], "show") &&
			strcmp(pos[0], "delete")))
		return usage_err("job", "want 'create FILE', 'show NAME' or 'delete NAME'");
	if (!strcmp(pos[0], "create")) {
		struct zs_job_spec spec;
		if (zs_spec_load(pos[1], &spec, &err))
			return die("%s", err.msg);
		/* check here too, so a bad file fails without a round trip */
		if (zs_job_spec_normalize(&spec, &err)) {
			zs_job_spec_release(&spec);
			return die("%s: %s", pos[1], err.msg);
		}
		if ((r = open_coord(x))) {
			zs_job_spec_release(&spec);
			return r;
		}
		st = zs_coord_create_job(x->c, &spec, &j, &err);
		zs_job_spec_release(&spec);
	} else if ((r = open_coord(x))) {
		return r;
	} else if (!strcmp(pos[0], "show")) {
		st = zs_coord_get_job(x->c, pos[1], &j, &err);
	} else {
		st = zs_coord_delete_job(x->c, pos[1], &j, &err);
	}
	if (st)
		return die("%s", err.msg);
	if (json)
		json_print(job_json_brief(&j));
	else if (!strcmp(pos[0], "delete"))
		printf("job %s deleted\n", j.spec.name);
	else
		print_job(&j);
	zs_job_release(&j);
	return 0;
}

/* ------------------------------------------------------------ placement */

static const char *addr_of(const struct zs_server_info *s, uint32_t n, uint64_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (s[i].id == id)
			return s[i].addr;
	return "?";
}

static int c_placement(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_server_info *s = NULL;
	struct zs_job j;
	uint32_t n_s = 0;
	char *pos[1];
	int json = 0, np, r;

	if ((r = flags(&cmds[3], argc, argv, &json, pos, 1, &np)))
		return r < 0 ? 0 : r;
	if (np != 1)
		return usage_err("placement", "want a job name");
	if ((r = open_coord(x)))
		return r;
	if (zs_coord_get_job(x->c, pos[0], &j, &err))
		return die("%s", err.msg);
	if (zs_coord_servers(x->c, &s, &n_s, &err)) {
		zs_job_release(&j);
		return die("%s", err.msg);
	}
	if (json) {
		json_t *units = json_array(), *shards = json_array();
		for (uint32_t u = 0; u < j.spec.layout.n_units; u++) {
			const struct zs_unit *un = &j.spec.layout.units[u];
			json_array_append_new(units,
					      json_pack("{s:i, s:s, s:s, s:I}", "index", (int)u,
							"name", un->name, "dtype",
							zs_dtype_name(un->dtype), "numel",
							(json_int_t)un->numel));
		}
		for (uint32_t i = 0; i < j.placement.n_shards; i++) {
			const struct zs_shard *sh = &j.placement.shards[i];
			const struct zs_unit *un = &j.spec.layout.units[sh->unit];
			json_array_append_new(
				shards,
				json_pack("{s:i, s:s, s:i, s:I, s:s, s:I, s:I, s:I, s:I}",
					  "unit", (int)sh->unit, "unit_name", un->name,
					  "shard", (int)sh->index,
					  "server", (json_int_t)sh->server_id,
					  "server_addr", addr_of(s, n_s, sh->server_id),
					  "offset", (json_int_t)sh->offset,
					  "length", (json_int_t)sh->length,
					  "padded", (json_int_t)sh->padded,
					  "bytes", (json_int_t)(sh->length * zs_dtype_size(un->dtype))));
		}
		json_print(json_pack("{s:s, s:I, s:i, s:o, s:o}", "job", j.spec.name,
				     "epoch", (json_int_t)j.placement.epoch, "stage",
				     (int)j.spec.stage, "units", units, "shards", shards));
	} else {
		printf("job %s, placement epoch %llu, %u shards\n", j.spec.name,
		       (unsigned long long)j.placement.epoch, j.placement.n_shards);
		printf("%-24s %5s %6s %-22s %12s %12s %12s\n", "UNIT", "SHARD", "SERVER",
		       "ADDRESS", "OFFSET", "LENGTH", "BYTES");
		for (uint32_t i = 0; i < j.placement.n_shards; i++) {
			const struct zs_shard *sh = &j.placement.shards[i];
			const struct zs_unit *un = &j.spec.layout.units[sh->unit];
			char b[32];
			printf("%-24.24s %5u %6llu %-22s %12llu %12llu %12s\n", un->name,
			       sh->index, (unsigned long long)sh->server_id,
			       addr_of(s, n_s, sh->server_id),
			       (unsigned long long)sh->offset,
			       (unsigned long long)sh->length,
			       zs_fmt_bytes(sh->length * zs_dtype_size(un->dtype), b, sizeof b));
		}
	}
	free(s);
	zs_job_release(&j);
	return 0;
}

/* ---------------------------------------------------------------- stage */

static int c_stage(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job j;
	char *pos[2];
	uint64_t stage = 0;
	int np, r;

	if ((r = flags(&cmds[4], argc, argv, NULL, pos, 2, &np)))
		return r < 0 ? 0 : r;
	if (np < 1)
		return usage_err("stage", "want a job name");
	if (np == 2 && zs_parse_u64(pos[1], 1, 3, &stage, &err))
		return usage_err("stage", "stage must be 1, 2 or 3, not '%s'", pos[1]);
	if ((r = open_coord(x)))
		return r;
	if (np == 2 ? zs_coord_set_stage(x->c, pos[0], (uint32_t)stage, &j, &err)
		    : zs_coord_get_job(x->c, pos[0], &j, &err))
		return die("%s", err.msg);
	printf("%u\n", j.spec.stage);
	zs_job_release(&j);
	return 0;
}

/* ------------------------------------------------------------- trainers */

static int c_trainers(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job j;
	char *pos[1];
	int json = 0, np, r;

	if ((r = flags(&cmds[5], argc, argv, &json, pos, 1, &np)))
		return r < 0 ? 0 : r;
	if (np != 1)
		return usage_err("trainers", "want a job name");
	if ((r = open_coord(x)))
		return r;
	if (zs_coord_get_job(x->c, pos[0], &j, &err))
		return die("%s", err.msg);
	if (json) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < j.n_trainers; i++)
			json_array_append_new(a, json_pack("{s:i, s:s, s:I}", "rank",
							   (int)j.trainers[i].rank, "host",
							   j.trainers[i].host, "joined_ms",
							   (json_int_t)j.trainers[i].joined_ms));
		json_print(json_pack("{s:s, s:i, s:o}", "job", j.spec.name, "world_size",
				     (int)j.spec.world_size, "trainers", a));
	} else {
		printf("job %s: %u of %u ranks joined\n%-6s %s\n", j.spec.name,
		       j.n_trainers, j.spec.world_size, "RANK", "HOST");
		for (uint32_t i = 0; i < j.n_trainers; i++)
			printf("%-6u %s\n", j.trainers[i].rank, j.trainers[i].host);
	}
	zs_job_release(&j);
	return 0;
}

/* ------------------------------------------------------------ rebalance */

static int c_rebalance(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job j;
	char *pos[1];
	int np, r;

	uint64_t ids[256];
	uint32_t n_ids = 0;

	/* --servers ID,ID,... before the shared flag parsing */
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--servers")) {
			char *list = argv[i + 1], *tok, *save = NULL;
			for (tok = strtok_r(list, ",", &save); tok && n_ids < 256;
			     tok = strtok_r(NULL, ",", &save))
				if (zs_parse_u64(tok, 1, UINT64_MAX, &ids[n_ids++], &err))
					return usage_err("rebalance", "--servers: %s", err.msg);
			memmove(argv + i, argv + i + 2, (size_t)(argc - i - 2) * sizeof *argv);
			argc -= 2;
			break;
		}
	if ((r = flags(&cmds[6], argc, argv, NULL, pos, 1, &np)))
		return r < 0 ? 0 : r;
	if (np != 1)
		return usage_err("rebalance", "want a job name");
	if ((r = open_coord(x)))
		return r;
	if (zs_coord_rebalance(x->c, pos[0], ids, n_ids, &j, &err))
		return die("%s", err.msg);
	printf("job %s: placement epoch %llu, %u shards\n", j.spec.name,
	       (unsigned long long)j.placement.epoch, j.placement.n_shards);
	zs_job_release(&j);
	return 0;
}

/* --------------------------------------------------------------- status */

static int c_status(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	int json = 0, r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zshardctl status [--server HOST:PORT] [--json]\n\n%s\n",
			       cmds[7].help);
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--server") && i + 1 < argc) {
			struct zs_server_status s;
			const char *addr = argv[++i];
			if (zs_server_status_query(addr, x->timeout_ms, &s, &err))
				return die("%s", err.msg);
			if (json) {
				json_t *a = json_array();
				for (uint32_t k = 0; k < s.n_assignments; k++)
					json_array_append_new(
						a, json_pack("{s:s, s:I, s:i, s:I}", "job",
							     s.assignments[k].job, "epoch",
							     (json_int_t)s.assignments[k].epoch,
							     "shards", (int)s.assignments[k].n_shards,
							     "bytes", (json_int_t)s.assignments[k].bytes));
				json_print(json_pack("{s:I, s:s, s:s, s:s, s:b, s:I, s:I, s:I, s:o}",
						     "id", (json_int_t)s.id, "addr", s.addr,
						     "rdma", s.rdma,
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
				for (uint32_t k = 0; k < s.n_assignments; k++)
					printf("  job %s: %u shards, epoch %llu, %s\n",
					       s.assignments[k].job, s.assignments[k].n_shards,
					       (unsigned long long)s.assignments[k].epoch,
					       zs_fmt_bytes(s.assignments[k].bytes, c1, sizeof c1));
			}
			zs_server_status_release(&s);
			return 0;
		} else {
			return usage_err("status", "unknown argument '%s'", argv[i]);
		}
	}
	if ((r = open_coord(x)))
		return r;
	{
		struct zs_coord_status s;
		if (zs_coord_status(x->c, &s, &err))
			return die("%s", err.msg);
		if (json)
			json_print(json_pack("{s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:I}",
					     "version", s.version, "addr", s.addr,
					     "data_dir", s.data_dir, "uptime_ms",
					     (json_int_t)s.uptime_ms, "lease_ms",
					     (int)s.lease_ms, "servers_up", (int)s.servers_up,
					     "servers_down", (int)s.servers_down, "jobs",
					     (int)s.jobs, "assign_gen",
					     (json_int_t)s.assign_gen));
		else
			printf("coordinator %s (zshard %s), up %.1f s, data dir %s\n"
			       "servers: %u up, %u down (lease %u ms); jobs: %u; assignment generation %llu\n",
			       s.addr, s.version, (double)s.uptime_ms / 1000.0, s.data_dir,
			       s.servers_up, s.servers_down, s.lease_ms, s.jobs,
			       (unsigned long long)s.assign_gen);
	}
	return 0;
}

/* ---------------------------------------------------------------- stats */

static json_t *report_json(const struct zs_step_report *r, int64_t now_ms)
{
	return json_pack("{s:i, s:I, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "rank", (int)r->rank, "step", (json_int_t)r->step, "stage", (int)r->stage,
			 "prefetch", (int)r->prefetch, "seconds", r->seconds, "compute_seconds",
			 r->compute_seconds, "gather_wait_seconds", r->gather_wait_seconds,
			 "push_wait_seconds", r->push_wait_seconds, "control_seconds",
			 r->control_seconds, "bytes_gathered", (json_int_t)r->bytes_gathered,
			 "bytes_pushed", (json_int_t)r->bytes_pushed, "peak_param_bytes",
			 (json_int_t)r->peak_param_bytes, "peak_grad_bytes",
			 (json_int_t)r->peak_grad_bytes, "rss_peak_bytes",
			 (json_int_t)r->rss_peak_bytes, "age_ms",
			 (json_int_t)(now_ms - r->reported_ms));
}

/* stats JOB: the latest step report of each rank, and each server's time
 * on the job's latest step with its memory. */
static int stats_job(struct ctx *x, const char *name, int json)
{
	struct zs_error err = {0};
	struct zs_step_report *r = NULL;
	struct zs_server_info *s = NULL;
	uint32_t n_r = 0, n_s = 0;
	struct zs_job j;
	json_t *ranks, *servers;
	int64_t now = zs_now_ms();
	int r_ = 0;

	if (zs_coord_get_job(x->c, name, &j, &err))
		return die("%s", err.msg);
	if (zs_coord_step_reports(x->c, name, &r, &n_r, &err) ||
	    zs_coord_servers(x->c, &s, &n_s, &err)) {
		zs_job_release(&j);
		free(r);
		return die("%s", err.msg);
	}
	ranks = json_array();
	servers = json_array();
	if (!json) {
		printf("job %s: stage %u, world size %u, %u of %u ranks reporting\n", name,
		       j.spec.stage, j.spec.world_size, n_r, j.spec.world_size);
		printf("%-5s %8s %5s %3s %9s %9s %9s %9s %9s %10s %10s %10s %10s %10s %7s\n",
		       "RANK", "STEP", "STAGE", "PF", "STEP-MS", "COMPUTE", "GATHER-W", "PUSH-W",
		       "CONTROL", "GATHERED", "PUSHED", "PEAK-PAR", "PEAK-GRAD", "PEAK-RSS",
		       "AGE-S");
	}
	for (uint32_t i = 0; i < n_r; i++) {
		char b[5][32];
		if (json) {
			json_array_append_new(ranks, report_json(&r[i], now));
			continue;
		}
		printf("%-5u %8llu %5u %3u %9.3f %9.3f %9.3f %9.3f %9.3f %10s %10s %10s %10s %10s %7.1f\n",
		       r[i].rank, (unsigned long long)r[i].step, r[i].stage, r[i].prefetch,
		       r[i].seconds * 1e3, r[i].compute_seconds * 1e3,
		       r[i].gather_wait_seconds * 1e3, r[i].push_wait_seconds * 1e3,
		       r[i].control_seconds * 1e3,
		       zs_fmt_bytes(r[i].bytes_gathered, b[0], sizeof b[0]),
		       zs_fmt_bytes(r[i].bytes_pushed, b[1], sizeof b[1]),
		       zs_fmt_bytes(r[i].peak_param_bytes, b[2], sizeof b[2]),
		       zs_fmt_bytes(r[i].peak_grad_bytes, b[3], sizeof b[3]),
		       zs_fmt_bytes(r[i].rss_peak_bytes, b[4], sizeof b[4]),
		       (double)(now - r[i].reported_ms) / 1000.0);
	}
	if (!json)
		printf("\n%-4s %-22s %8s %6s %10s %10s %10s %10s\n", "ID", "SERVER", "STEP",
		       "SHARDS", "REDUCE-MS", "OPTIM-MS", "RSS", "PEAK-RSS");
	for (uint32_t i = 0; i < n_s; i++) {
		struct zs_server_status st;
		const struct zs_job_step_stats *js = NULL;
		bool used = false;
		char b1[32], b2[32];
		for (uint32_t k = 0; k < j.placement.n_shards; k++)
			used |= j.placement.shards[k].server_id == s[i].id;
		if (!used)
			continue;
		if (!s[i].up || zs_server_status_query(s[i].addr, x->timeout_ms, &st, &err)) {
			if (json)
				json_array_append_new(servers, json_pack("{s:I, s:s, s:s}", "id",
									 (json_int_t)s[i].id, "addr",
									 s[i].addr, "state", "down"));
			else
				printf("%-4llu %-22s down\n", (unsigned long long)s[i].id, s[i].addr);
			r_ = 1;
			continue;
		}
		for (uint32_t k = 0; k < st.n_job_steps; k++)
			if (!strcmp(st.job_steps[k].job, name))
				js = &st.job_steps[k];
		if (json) {
			json_t *o = json_pack("{s:I, s:s, s:s, s:I, s:I}", "id", (json_int_t)st.id,
					      "addr", st.addr, "state", "up", "rss_bytes",
					      (json_int_t)st.rss_bytes, "rss_peak_bytes",
					      (json_int_t)st.rss_peak_bytes);
			if (js)
				json_object_set_new(o, "last_step",
						    json_pack("{s:I, s:i, s:f, s:f}", "step",
							      (json_int_t)js->step, "shards",
							      (int)js->shards, "reduce_seconds",
							      js->reduce_seconds, "optim_seconds",
							      js->optim_seconds));
			json_array_append_new(servers, o);
		} else if (js) {
			printf("%-4llu %-22s %8llu %6u %10.3f %10.3f %10s %10s\n",
			       (unsigned long long)st.id, st.addr, (unsigned long long)js->step,
			       js->shards, js->reduce_seconds * 1e3, js->optim_seconds * 1e3,
			       zs_fmt_bytes(st.rss_bytes, b1, sizeof b1),
			       zs_fmt_bytes(st.rss_peak_bytes, b2, sizeof b2));
		} else {
			printf("%-4llu %-22s %8s %6s %10s %10s %10s %10s\n", (unsigned long long)st.id,
			       st.addr, "-", "-", "-", "-", zs_fmt_bytes(st.rss_bytes, b1, sizeof b1),
			       zs_fmt_bytes(st.rss_peak_bytes, b2, sizeof b2));
		}
		zs_server_status_release(&st);
	}
	if (json)
		json_print(json_pack("{s:s, s:i, s:i, s:o, s:o}", "job", name, "stage",
				     (int)j.spec.stage, "world_size", (int)j.spec.world_size,
				     "ranks", ranks, "servers", servers));
	else {
		json_decref(ranks);
		json_decref(servers);
	}
	if (r_)
		fprintf(stderr, "zshardctl: some servers of job '%s' did not answer\n", name);
	zs_job_release(&j);
	free(r);
	free(s);
	return r_;
}

static int c_stats(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_server_info *s;
	uint32_t n;
	char *pos[1];
	int json = 0, np, r;
	json_t *arr;

	if ((r = flags(&cmds[11], argc, argv, &json, pos, 1, &np)))
		return r < 0 ? 0 : r;
	if (np == 1)
		return open_coord(x) ? 1 : stats_job(x, pos[0], json);
	arr = json_array();
	if ((r = open_coord(x)) || (r = zs_coord_servers(x->c, &s, &n, &err) ? die("%s", err.msg) : 0)) {
		json_decref(arr);
		return r;
	}
	if (!json)
		printf("%-4s %-22s %-5s %5s %7s %12s %10s %12s %12s %8s\n", "ID", "ADDRESS",
		       "STATE", "JOBS", "SHARDS", "STATE-BYTES", "UPDATES", "BYTES-IN",
		       "BYTES-OUT", "WAITING");
	for (uint32_t i = 0; i < n; i++) {
		struct zs_server_status st;
		char b1[32], b2[32], b3[32];
		if (!s[i].up || zs_server_status_query(s[i].addr, x->timeout_ms, &st, &err)) {
			if (json)
				json_array_append_new(arr, json_pack("{s:I, s:s, s:s}", "id",
								     (json_int_t)s[i].id, "addr",
								     s[i].addr, "state", "down"));
			else
				printf("%-4llu %-22s %-5s\n", (unsigned long long)s[i].id, s[i].addr,
				       "down");
			continue;
		}
		if (json)
			json_array_append_new(
				arr, json_pack("{s:I, s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:I}",
					       "id", (json_int_t)st.id, "addr", st.addr, "state", "up",
					       "data_addr", st.data_addr, "shm_addr", st.shm_addr,
					       "jobs", (int)st.jobs_held, "shards", (int)st.shards,
					       "state_bytes", (json_int_t)st.state_bytes,
					       "steps_applied", (json_int_t)st.steps_applied,
					       "bytes_in", (json_int_t)st.bytes_in,
					       "bytes_out", (json_int_t)st.bytes_out,
					       "gathers_waiting", (json_int_t)st.gathers_waiting));
		else
			printf("%-4llu %-22s %-5s %5u %7u %12s %10llu %12s %12s %8llu\n",
			       (unsigned long long)st.id, st.addr, "up", st.jobs_held, st.shards,
			       zs_fmt_bytes(st.state_bytes, b1, sizeof b1),
			       (unsigned long long)st.steps_applied,
			       zs_fmt_bytes(st.bytes_in, b2, sizeof b2),
			       zs_fmt_bytes(st.bytes_out, b3, sizeof b3),
			       (unsigned long long)st.gathers_waiting);
		zs_server_status_release(&st);
	}
	if (json)
		json_print(json_pack("{s:o}", "servers", arr));
	else
		json_decref(arr);
	free(s);
	return 0;
}

/* ----------------------------------------------------------- checkpoint */

static void sleep_100ms(void)
{
	struct timespec ts = {0, 100 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

static void print_ckpt(const struct zs_checkpoint *k)
{
	char b[32], when[32];
	time_t sec = (time_t)(k->created_ms / 1000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%-6llu %-8llu %-10s %-21s %12s %7u %6u %s\n", (unsigned long long)k->id,
	       (unsigned long long)k->step, zs_ckpt_state_name(k->state), when,
	       zs_fmt_bytes(k->bytes, b, sizeof b), k->n_durable, k->n_blobs, k->error);
}

static int c_checkpoint(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	const char *sub = NULL, *job = NULL, *which = NULL;
	uint64_t step = 0, wait_ms = 0;
	int have_step = 0, json = 0, r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zshardctl checkpoint create JOB --step N [--wait MS]\n"
			       "       zshardctl checkpoint list JOB [--json]\n"
			       "       zshardctl checkpoint restore JOB ID|latest [--wait MS]\n\n"
			       "Checkpoints are taken at a step: every server captures its shards\n"
			       "when they reach it and writes them to its LMDB; the coordinator\n"
			       "commits the checkpoint once all are durable. restore puts a\n"
			       "committed one back (trainers stopped), and trainers resume from its\n"
			       "step. --wait waits up to MS for the outcome.\n");
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--step") && i + 1 < argc) {
			if (zs_parse_u64(argv[++i], 0, UINT64_MAX, &step, &err))
				return usage_err("checkpoint", "--step: %s", err.msg);
			have_step = 1;
		} else if (!strcmp(argv[i], "--wait") && i + 1 < argc) {
			if (zs_parse_u64(argv[++i], 0, 86400000, &wait_ms, &err))
				return usage_err("checkpoint", "--wait: %s", err.msg);
		} else if (argv[i][0] == '-') {
			return usage_err("checkpoint", "unknown option '%s'", argv[i]);
		} else if (!sub) {
			sub = argv[i];
		} else if (!job) {
			job = argv[i];
		} else if (!which) {
			which = argv[i];
		} else {
			return usage_err("checkpoint", "unexpected argument '%s'", argv[i]);
		}
	}
	if (!sub || !job || (strcmp(sub, "create") && strcmp(sub, "list") && strcmp(sub, "restore")))
		return usage_err("checkpoint", "want create, list or restore, and a job");
	if (!strcmp(sub, "create") && !have_step)
		return usage_err("checkpoint", "create needs --step N (the step whose parameters to keep)");
	if (!strcmp(sub, "restore") && !which)
		return usage_err("checkpoint", "restore needs a checkpoint id or 'latest'");
	if ((r = open_coord(x)))
		return r;

	if (!strcmp(sub, "list")) {
		struct zs_checkpoint *v;
		uint32_t n;
		if (zs_coord_list_ckpts(x->c, job, &v, &n, &err))
			return die("%s", err.msg);
		if (json) {
			json_t *a = json_array();
			for (uint32_t i = 0; i < n; i++)
				json_array_append_new(
					a, json_pack("{s:I, s:I, s:s, s:I, s:I, s:i, s:i, s:s}", "id",
						     (json_int_t)v[i].id, "step", (json_int_t)v[i].step,
						     "state", zs_ckpt_state_name(v[i].state),
						     "created_ms", (json_int_t)v[i].created_ms, "bytes",
						     (json_int_t)v[i].bytes, "servers",
						     (int)v[i].n_durable, "blobs", (int)v[i].n_blobs,
						     "error", v[i].error));
			json_print(json_pack("{s:s, s:o}", "job", job, "checkpoints", a));
		} else {
			printf("%-6s %-8s %-10s %-21s %12s %7s %6s %s\n", "ID", "STEP", "STATE",
			       "CREATED", "BYTES", "SERVERS", "BLOBS", "ERROR");
			for (uint32_t i = 0; i < n; i++)
				print_ckpt(&v[i]);
		}
		for (uint32_t i = 0; i < n; i++)
			zs_checkpoint_release(&v[i]);
		free(v);
		return 0;
	}
	if (!strcmp(sub, "create")) {
		struct zs_checkpoint k;
		uint64_t id;
		if (zs_coord_create_ckpt(x->c, job, step, &k, &err))
			return die("%s", err.msg);
		id = k.id;
		for (uint64_t t = 0; k.state == ZS_CKPT_PENDING && t < wait_ms; t += 100) {
			zs_checkpoint_release(&k);
			sleep_100ms();
			if (zs_coord_get_ckpt(x->c, job, id, &k, &err))
				return die("%s", err.msg);
		}
		printf("checkpoint %llu of job %s at step %llu: %s", (unsigned long long)k.id, job,
		       (unsigned long long)k.step, zs_ckpt_state_name(k.state));
		if (k.state == ZS_CKPT_COMMITTED)
			printf(" (%llu bytes on %u servers)", (unsigned long long)k.bytes, k.n_durable);
		printf("%s%s\n", k.error[0] ? ": " : "", k.error);
		r = k.state == ZS_CKPT_FAILED || (wait_ms && k.state == ZS_CKPT_PENDING);
		if (r)
			fprintf(stderr, "zshardctl: checkpoint %llu is %s\n", (unsigned long long)k.id,
				zs_ckpt_state_name(k.state));
		zs_checkpoint_release(&k);
		return r;
	}
	{
		struct zs_job j;
		uint64_t id = 0;
		if (strcmp(which, "latest") && zs_parse_u64(which, 1, UINT64_MAX, &id, &err))
			return usage_err("checkpoint", "'%s' is not a checkpoint id or 'latest'", which);
		if (zs_coord_restore(x->c, job, id, &j, &err))
			return die("%s", err.msg);
		id = j.restore_pending;
		for (uint64_t t = 0; j.restore_pending && t < wait_ms; t += 100) {
			zs_job_release(&j);
			sleep_100ms();
			if (zs_coord_get_job(x->c, job, &j, &err))
				return die("%s", err.msg);
		}
		if (j.restore_pending) {
			printf("job %s: restoring checkpoint %llu\n", job, (unsigned long long)id);
			r = wait_ms ? die("the restore of checkpoint %llu has not finished",
					  (unsigned long long)id) : 0;
		} else if (j.restore_error[0]) {
			r = die("restore of checkpoint %llu failed: %s", (unsigned long long)id,
				j.restore_error);
		} else {
			printf("job %s: restored checkpoint %llu, trainers resume at step %llu\n", job,
			       (unsigned long long)j.restored_id, (unsigned long long)j.restored_step);
			r = 0;
		}
		zs_job_release(&j);
		return r;
	}
}

/* ------------------------------------------------------- export, import */

static void show_progress(uint64_t done, uint64_t total)
{
	if (isatty(2))
		fprintf(stderr, "\rwriting %5.1f%%", total ? 100.0 * (double)done / (double)total : 100.0);
	if (done == total && isatty(2))
		fputc('\n', stderr);
}

static int c_export(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	const char *job = NULL, *out = NULL;
	int with_opt = 0, rc = 1;
	struct jobio *io = NULL;
	const struct zs_job *j;
	struct st_tensor *t = NULL;
	float **arr = NULL;
	uint32_t nt = 0, n_arr = 0, arrays;
	uint64_t version = 0, v;
	char step[32];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zshardctl export JOB --out FILE.safetensors [--optimizer]\n\n"
			       "Writes the job's fp32 parameters (and with --optimizer its optimizer\n"
			       "state) as one safetensors file, tensors named UNIT.TENSOR. Run it\n"
			       "between steps: a job caught mid-step is refused.\n");
			return 0;
		} else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
			out = argv[++i];
		} else if (!strcmp(argv[i], "--optimizer")) {
			with_opt = 1;
		} else if (argv[i][0] != '-' && !job) {
			job = argv[i];
		} else {
			return usage_err("export", "unexpected argument '%s'", argv[i]);
		}
	}
	if (!job || !out)
		return usage_err("export", "want a job and --out FILE");
	if (!x->coordinator)
		return die("no coordinator: give --coordinator HOST:PORT or set ZSHARD_COORDINATOR");
	if (jobio_open(x->coordinator, job, x->timeout_ms, &io, &err))
		return die("%s", err.msg);
	j = jobio_job(io);
	arrays = 1 + (with_opt ? (j->spec.optim.kind == ZS_ADAMW ? 2 : j->spec.optim.momentum != 0 ? 1 : 0) : 0);
	arr = calloc(j->spec.layout.n_units * arrays, sizeof *arr);
	{
		uint32_t total = 0;
		for (uint32_t u = 0; u < j->spec.layout.n_units; u++)
			total += j->spec.layout.units[u].n_tensors;
		t = calloc(total * arrays + 1, sizeof *t);
	}
	if (!arr || !t) {
		die("out of memory");
		goto out;
	}
	for (uint32_t u = 0; u < j->spec.layout.n_units; u++) {
		const struct zs_unit *un = &j->spec.layout.units[u];
		for (uint32_t a = 0; a < arrays; a++) {
			static const char *const suffix[2][3] = {{"", ".exp_avg", ".exp_avg_sq"},
								 {"", ".momentum_buffer", ""}};
			float *buf = malloc(un->numel * 4);
			arr[n_arr++] = buf;
			if (!buf) {
				die("out of memory");
				goto out;
			}
			if (jobio_read(io, u, (int)a, buf, &v, &err)) {
				die("%s", err.msg);
				goto out;
			}
			if (u == 0 && a == 0)
				version = v;
			else if (v != version) {
				die("the job is mid-step (units at steps %llu and %llu): export between steps",
				    (unsigned long long)version, (unsigned long long)v);
				goto out;
			}
			for (uint32_t k = 0; k < un->n_tensors; k++) {
				const struct zs_tensor *te = &un->tensors[k];
				struct st_tensor *o = &t[nt++];
				snprintf(o->name, sizeof o->name, "%s.%s%s", un->name, te->name,
					 suffix[j->spec.optim.kind == ZS_ADAMW ? 0 : 1][a]);
				o->dtype = ZS_F32;
				o->ndim = te->ndim;
				memcpy(o->shape, te->shape, sizeof o->shape);
				o->data = buf + te->offset;
				o->bytes = te->numel * 4;
			}
		}
	}
	snprintf(step, sizeof step, "%llu", (unsigned long long)version);
	{
		const char *meta[] = {"format", "zshard", "job", job, "step", step,
				      "optimizer", zs_optim_name(j->spec.optim.kind)};
		if (st_write(out, t, nt, meta, 4, show_progress, &err)) {
			die("%s", err.msg);
			goto out;
		}
	}
	printf("exported job %s at step %llu: %u tensors to %s\n", job,
	       (unsigned long long)version, nt, out);
	rc = 0;
out:
	for (uint32_t i = 0; i < n_arr; i++)
		free(arr[i]);
	free(arr);
	free(t);
	jobio_close(io);
	return rc;
}

static int c_import(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	const char *job = NULL, *in = NULL;
	struct jobio *io = NULL;
	const struct zs_job *j;
	struct st_file f = {0};
	float **units = NULL;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zshardctl import JOB FILE.safetensors\n\n"
			       "Uploads a safetensors file as the initial parameters of a job that\n"
			       "has not trained yet: every UNIT.TENSOR of the job's layout must be\n"
			       "there with its shape (F32, BF16 or F16). Nothing is uploaded unless\n"
			       "the whole file fits the layout.\n");
			return 0;
		} else if (argv[i][0] != '-' && !job) {
			job = argv[i];
		} else if (argv[i][0] != '-' && !in) {
			in = argv[i];
		} else {
			return usage_err("import", "unexpected argument '%s'", argv[i]);
		}
	}
	if (!job || !in)
		return usage_err("import", "want a job and a file");
	if (!x->coordinator)
		return die("no coordinator: give --coordinator HOST:PORT or set ZSHARD_COORDINATOR");
	if (st_open(in, &f, &err))
		return die("%s", err.msg);
	if (jobio_open(x->coordinator, job, x->timeout_ms, &io, &err)) {
		st_close(&f);
		return die("%s", err.msg);
	}
	j = jobio_job(io);
	units = calloc(j->spec.layout.n_units, sizeof *units);
	/* check and convert everything before uploading anything */
	for (uint32_t u = 0; units && u < j->spec.layout.n_units; u++) {
		const struct zs_unit *un = &j->spec.layout.units[u];
		units[u] = malloc(un->numel * 4);
		if (!units[u]) {
			die("out of memory");
			goto out;
		}
		for (uint32_t k = 0; k < un->n_tensors; k++) {
			const struct zs_tensor *te = &un->tensors[k];
			char name[2 * ZS_NAME_MAX + 32];
			const struct st_tensor *s;
			snprintf(name, sizeof name, "%s.%s", un->name, te->name);
			s = st_find(&f, name);
			if (!s) {
				die("%s has no tensor '%s' (the job's layout needs it)", in, name);
				goto out;
			}
			if (s->ndim != te->ndim || memcmp(s->shape, te->shape, te->ndim * sizeof te->shape[0])) {
				die("tensor '%s' in %s has another shape than the job's", name, in);
				goto out;
			}
			zs_convert_to_f32(units[u] + te->offset, s->data, s->dtype, te->numel);
		}
	}
	if (!units) {
		die("out of memory");
		goto out;
	}
	for (uint32_t u = 0; u < j->spec.layout.n_units; u++)
		if (jobio_init(io, u, units[u], &err)) {
			die("unit '%s': %s", j->spec.layout.units[u].name, err.msg);
			goto out;
		}
	printf("imported %s into job %s (%u units)\n", in, job, j->spec.layout.n_units);
	rc = 0;
out:
	for (uint32_t u = 0; units && u < j->spec.layout.n_units; u++)
		free(units[u]);
	free(units);
	jobio_close(io);
	st_close(&f);
	return rc;
}

/* ----------------------------------------------------------------- rdma */

static int c_rdma(struct ctx *x, int argc, char **argv)
{
	uint64_t lock = 1ULL << 30;
	struct zs_error err = {0};
	char note[256];
	int json = 0;
	enum zs_status st;

	(void)x;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: zshardctl rdma [--lock SIZE] [--json]\n\n%s\n", cmds[13].help);
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--lock") && i + 1 < argc) {
			if (zs_parse_size(argv[++i], &lock, &err))
				return usage_err("rdma", "--lock: %s", err.msg);
		} else {
			return usage_err("rdma", "unknown argument '%s'", argv[i]);
		}
	}
	st = zs_rdma_probe(lock, note, sizeof note);
	if (json)
		json_print(json_pack("{s:b, s:s}", "usable", !st, "note", note));
	else
		printf("rdma %s: %s\n", st ? "cannot work on this host" : "works on this host", note);
	return st ? 1 : 0;
}

/* ----------------------------------------------------------------- plan */

/* A parameter count: "125M", "7.5B" (or G), "1.2T", "350k", or digits. */
static int parse_count(const char *s, uint64_t *out)
{
	char *end;
	double v, mul = 1;

	if (!s || !*s || !((*s >= '0' && *s <= '9') || *s == '.'))
		return -1;
	v = strtod(s, &end);
	switch (*end) {
	case 'k': case 'K': mul = 1e3; end++; break;
	case 'm': case 'M': mul = 1e6; end++; break;
	case 'b': case 'B': case 'g': case 'G': mul = 1e9; end++; break;
	case 't': case 'T': mul = 1e12; end++; break;
	default: break;
	}
	if (*end || !(v > 0) || v * mul > 1125899906842624.0 || v * mul < 1)
		return -1;
	*out = (uint64_t)(v * mul + 0.5);
	return 0;
}

static const char *fmt_count(uint64_t n, char *buf, size_t len)
{
	if (n >= 1000000000ULL)
		snprintf(buf, len, "%.2f G", (double)n / 1e9);
	else if (n >= 1000000ULL)
		snprintf(buf, len, "%.2f M", (double)n / 1e6);
	else if (n >= 1000ULL)
		snprintf(buf, len, "%.2f k", (double)n / 1e3);
	else
		snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

static int c_plan(struct ctx *x, int argc, char **argv)
{
	struct zs_plan_in in = {.n_units = 32, .stage = 3, .dtype = ZS_BF16, .optim = ZS_ADAMW,
				.prefetch = 1};
	struct zs_error err = {0};
	struct zs_plan pl;
	const char *job = NULL;
	uint64_t gpu = 0, host = 0, v, *numel = NULL, largest = 0;
	bool have_params = false, have_world = false, have_stage = false, have_dtype = false,
	     have_optim = false;
	int json = 0, rc;
	char b[8][32];
	static const char *stage_names[4] = {"baseline (DDP)", "stage 1 (P_os)",
					     "stage 2 (P_os+g)", "stage 3 (P_os+g+p)"};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = strcmp(a, "--json") && strcmp(a, "--keep-until-backward") &&
			     strcmp(a, "--help") && strcmp(a, "-h");
		if (takes && !val)
			return usage_err("plan", "%s wants a value", a);
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			printf("usage: zshardctl plan %s\n\n%s\n", cmds[12].args, cmds[12].help);
			return 0;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--keep-until-backward")) {
			in.keep_until_backward = true;
		} else if (!strcmp(a, "--params")) {
			if (parse_count(val, &in.params))
				return usage_err("plan", "--params '%s' is not a count (e.g. 125M, 7.5B)", val);
			have_params = true;
		} else if (!strcmp(a, "--job")) {
			job = val;
		} else if (!strcmp(a, "--world") || !strcmp(a, "--servers") ||
			   !strcmp(a, "--stage") || !strcmp(a, "--prefetch") ||
			   !strcmp(a, "--units") || !strcmp(a, "--push-depth")) {
			uint64_t hi = !strcmp(a, "--stage") ? 3 : !strcmp(a, "--prefetch") ? 64
				      : !strcmp(a, "--push-depth") ? 64
				      : !strcmp(a, "--units") ? ZS_MAX_UNITS : ZS_MAX_WORLD;
			uint64_t lo = !strcmp(a, "--prefetch") ? 0 : 1;
			if (zs_parse_u64(val, lo, hi, &v, &err))
				return usage_err("plan", "%s: %s", a, err.msg);
			if (!strcmp(a, "--world"))
				in.world = (uint32_t)v, have_world = true;
			else if (!strcmp(a, "--servers"))
				in.servers = (uint32_t)v;
			else if (!strcmp(a, "--stage"))
				in.stage = (unsigned)v, have_stage = true;
			else if (!strcmp(a, "--prefetch"))
				in.prefetch = (unsigned)v;
			else if (!strcmp(a, "--push-depth"))
				in.push_depth = (unsigned)v;
			else
				in.n_units = (uint32_t)v;
		} else if (!strcmp(a, "--largest-unit")) {
			if (parse_count(val, &largest))
				return usage_err("plan", "--largest-unit '%s' is not a count", val);
		} else if (!strcmp(a, "--dtype")) {
			if (zs_dtype_parse(val, &in.dtype, &err))
				return usage_err("plan", "--dtype: %s", err.msg);
			have_dtype = true;
		} else if (!strcmp(a, "--optimizer")) {
			if (!strcmp(val, "sgd-momentum")) {
				in.optim = ZS_SGD;
				in.momentum = true;
			} else if (zs_optim_parse(val, &in.optim, &err)) {
				return usage_err("plan", "--optimizer: %s", err.msg);
			}
			have_optim = true;
		} else if (!strcmp(a, "--gpu-mem") || !strcmp(a, "--host-mem")) {
			if (zs_parse_size(val, &v, &err))
				return usage_err("plan", "%s: %s", a, err.msg);
			*(!strcmp(a, "--gpu-mem") ? &gpu : &host) = v;
		} else {
			return usage_err("plan", "unknown option '%s'", a);
		}
		if (takes)
			i++;
	}
	if (!job == !have_params)
		return usage_err("plan", "give --params N or --job NAME (one of them)");
	if (job) { /* the job's layout, stage, world, dtype, optimizer, servers */
		struct zs_job j;
		uint32_t n_srv = 0;
		uint64_t seen[256];
		if ((rc = open_coord(x)))
			return rc;
		if (zs_coord_get_job(x->c, job, &j, &err))
			return die("%s", err.msg);
		in.n_units = j.spec.layout.n_units;
		numel = calloc(in.n_units ? in.n_units : 1, sizeof *numel);
		if (!numel) {
			zs_job_release(&j);
			return die("out of memory");
		}
		for (uint32_t u = 0; u < in.n_units; u++)
			numel[u] = j.spec.layout.units[u].numel;
		in.unit_numel = numel;
		if (!have_world)
			in.world = j.spec.world_size;
		if (!have_stage)
			in.stage = j.spec.stage;
		if (!have_dtype)
			in.dtype = j.spec.compute_dtype;
		if (!have_optim) {
			in.optim = j.spec.optim.kind;
			in.momentum = j.spec.optim.momentum != 0.0;
		}
		for (uint32_t k = 0; !in.servers && k < j.placement.n_shards; k++) {
			uint32_t q = 0;
			while (q < n_srv && seen[q] != j.placement.shards[k].server_id)
				q++;
			if (q == n_srv && n_srv < 256)
				seen[n_srv++] = j.placement.shards[k].server_id;
		}
		if (!in.servers)
			in.servers = n_srv;
		zs_job_release(&j);
	} else {
		if (!have_world)
			return usage_err("plan", "give --world N (data-parallel trainers)");
		if (largest) {
			if (largest > in.params)
				return usage_err("plan", "--largest-unit is larger than --params");
			in.n_units = (uint32_t)((in.params + largest - 1) / largest);
		}
	}
	if (zs_plan_compute(&in, &pl, &err)) {
		free(numel);
		return usage_err("plan", "%s", err.msg);
	}
	free(numel);
	{
		uint64_t max_p = (gpu || host) && !in.unit_numel ? zs_plan_max_params(&in, gpu, host) : 0;
		uint32_t S = in.servers ? in.servers : in.world;
		bool gpu_ok = !gpu || pl.trainer_total <= gpu, host_ok = !host || pl.server_total <= host;
		if (json) {
			json_t *o = json_pack(
				"{s:I, s:i, s:i, s:i, s:s, s:s, s:i, s:i, s:I, s:i, s:i,"
				" s:{s:f, s:f, s:f, s:f},"
				" s:{s:I, s:I, s:I}, s:{s:I, s:I}}",
				"params", (json_int_t)pl.params, "world", (int)in.world, "servers", (int)S,
				"stage", (int)in.stage, "dtype", zs_dtype_name(in.dtype), "optimizer",
				in.momentum ? "sgd-momentum" : zs_optim_name(in.optim), "prefetch",
				(int)in.prefetch, "units", (int)in.n_units, "largest_unit",
				(json_int_t)pl.largest_unit, "bytes_per_param_b", (int)pl.b,
				"optimizer_bytes_per_param_K", (int)pl.K,
				"zero_paper_per_gpu", "baseline", pl.zero[0], "stage1", pl.zero[1],
				"stage2", pl.zero[2], "stage3", pl.zero[3],
				"trainer", "param_bytes", (json_int_t)pl.trainer_params, "grad_bytes",
				(json_int_t)pl.trainer_grads, "total_bytes", (json_int_t)pl.trainer_total,
				"server", "bytes_per_element", (json_int_t)pl.server_per_elem,
				"total_bytes", (json_int_t)pl.server_total);
			json_object_set_new(o, "push_depth",
					    json_integer(in.push_depth ? in.push_depth : 1));
			if (gpu)
				json_object_set_new(o, "fits_gpu", json_boolean(gpu_ok));
			if (host)
				json_object_set_new(o, "fits_host", json_boolean(host_ok));
			if (max_p)
				json_object_set_new(o, "max_params",
						    max_p == UINT64_MAX ? json_null()
									: json_integer((json_int_t)max_p));
			json_print(o);
			return 0;
		}
		printf("plan: %s parameters in %u units (largest %s), %u trainers, %u servers, ZeRO stage %u, compute %s, %s, prefetch %u%s\n",
		       fmt_count(pl.params, b[0], sizeof b[0]), in.n_units,
		       fmt_count(pl.largest_unit, b[1], sizeof b[1]), in.world, S, in.stage,
		       zs_dtype_name(in.dtype), in.momentum ? "sgd-momentum" : zs_optim_name(in.optim),
		       in.prefetch, in.keep_until_backward ? ", kept until backward" : "");
		printf("\nthe ZeRO paper's accounting, per GPU (%u + %u + %u bytes per parameter):\n",
		       pl.b, pl.b, pl.K);
		for (int k = 0; k < 4; k++)
			printf("  %-20s %12s%s\n", stage_names[k],
			       zs_fmt_bytes((uint64_t)pl.zero[k], b[0], sizeof b[0]),
			       k == (int)in.stage ? "   <- this stage" : "");
		printf("\nzshard at stage %u: the optimizer state and fp32 master live on the servers\n",
		       in.stage);
		printf("  per trainer (GPU):  %s = parameters %s (%s) + gradients %s (%s)\n",
		       zs_fmt_bytes(pl.trainer_total, b[0], sizeof b[0]),
		       zs_fmt_bytes(pl.trainer_params, b[1], sizeof b[1]),
		       in.stage < 3 || in.keep_until_backward ? "the replica"
							       : "the prefetch window: 1 + prefetch units",
		       zs_fmt_bytes(pl.trainer_grads, b[2], sizeof b[2]),
		       in.stage == 1 ? "every unit until the step's end"
				     : "1 + push depth units: one written, the rest being pushed");
		printf("  per server (host):  %s = %s per owned element x %s elements\n"
		       "                      (fp32 master 4 + reduction 4 + optimizer %u + compute copy %u + %u ranks' staging slots x %u)\n",
		       zs_fmt_bytes(pl.server_total, b[0], sizeof b[0]),
		       zs_fmt_bytes(pl.server_per_elem, b[1], sizeof b[1]),
		       fmt_count((pl.params + S - 1) / S, b[2], sizeof b[2]),
		       in.optim == ZS_ADAMW ? 8 : in.momentum ? 4 : 0, pl.b == 4 ? 0 : pl.b,
		       in.world, pl.b);
		printf("  not counted: activations and the trainer's process (libraries, connections;\n"
		       "  about 20 MiB resident for the example here), the servers' process\n");
		if (gpu)
			printf("\nGPU %s: %s (%s needed)\n", zs_fmt_bytes(gpu, b[0], sizeof b[0]),
			       gpu_ok ? "fits" : "DOES NOT FIT",
			       zs_fmt_bytes(pl.trainer_total, b[1], sizeof b[1]));
		if (host)
			printf("%shost %s per server: %s (%s needed)\n", gpu ? "" : "\n",
			       zs_fmt_bytes(host, b[0], sizeof b[0]), host_ok ? "fits" : "DOES NOT FIT",
			       zs_fmt_bytes(pl.server_total, b[1], sizeof b[1]));
		if (max_p == UINT64_MAX)
			printf("largest model in these limits: no bound below 2^50 parameters\n");
		else if (max_p)
			printf("largest model in these limits (%u uniform units): %s parameters\n",
			       in.n_units, fmt_count(max_p, b[0], sizeof b[0]));
	}
	return 0;
}

static const struct cmd cmds[] = {
	{"servers", "[--json]", "List shard servers: id, address, up/down, capacity, bytes placed, transports.", c_servers},
	{"jobs", "[--json]", "List jobs with stage, world size, size and placement epoch.", c_jobs},
	{"job", "create FILE.json | show NAME | delete NAME [--json]",
	 "Create a job from a JSON spec (see common/spec_json.h; '-' reads stdin),\nshow one, or delete one.", c_job},
	{"placement", "JOB [--json]", "Show which server owns each shard of each unit: offset, length, bytes.", c_placement},
	{"stage", "JOB [1|2|3]", "Print the job's ZeRO stage, or set it (trainers pick it up at\ntheir next step boundary).", c_stage},
	{"trainers", "JOB [--json]", "List the ranks that joined the job.", c_trainers},
	{"rebalance", "JOB [--servers ID,ID...]", "Recompute the job's placement over the live servers, or the ones\nnamed (no trainers joined); the epoch grows if it changed. A checkpoint\ntaken before restores onto the new placement.", c_rebalance},
	{"status", "[--server HOST:PORT] [--json]", "The coordinator's status, or a shard server's.", c_status},
	{"checkpoint", "create JOB --step N | list JOB | restore JOB ID|latest", "Take, list and restore checkpoints (see zshardctl checkpoint --help).", c_checkpoint},
	{"export", "JOB --out FILE [--optimizer]", "Write the job's parameters as safetensors.", c_export},
	{"import", "JOB FILE", "Upload a safetensors file as a new job's initial parameters.", c_import},
	{"stats", "[JOB] [--json]", "Per shard server: jobs and shards held, bytes of shard state, shard\nupdates applied, bytes in and out, gathers waiting for other ranks.\nWith JOB: each rank's latest step report (step time split into compute,\nwaiting on gathers, waiting on pushes and coordinator calls; bytes\ngathered and pushed; peak live parameters and gradients; peak resident\nmemory), and each server's reduce and optimizer time on the job's latest\nstep with its resident memory.", c_stats},
	{"plan", "(--params N --world N | --job JOB) [OPTIONS] [--json]",
	 "Options: [--units U | --largest-unit N] [--stage 1|2|3] [--servers S]\n"
	 "  [--dtype bf16|f16|f32] [--optimizer adamw|sgd|sgd-momentum] [--prefetch P]\n"
	 "  [--push-depth D] [--keep-until-backward] [--gpu-mem SIZE] [--host-mem SIZE]\n\n"
	 "The memory a sharding setup needs, before running it: the ZeRO paper's\n"
	 "accounting per GPU for every stage (b + b + K bytes per parameter, K = 12\n"
	 "for mixed-precision Adam), and zshard's split: what each trainer holds\n"
	 "(parameters and gradients by the stage and the prefetch window) and\n"
	 "each server (master, optimizer state, copy, staging). With --job, the\n"
	 "job's own units, stage, world size, dtype and servers. With --gpu-mem\n"
	 "and --host-mem: whether it fits, and the largest model that would.\n"
	 "Counts take k, M, B/G, T (7.5B); sizes K, M, G, T (80G, powers of 1024).\n"
	 "Defaults: stage 3, bf16, adamw, prefetch 1, push depth 1, 32 uniform units.\n"
	 "Runs without a coordinator unless --job is given.", c_plan},
	{"rdma", "[--lock SIZE] [--json]",
	 "Whether RDMA can work on this host, said plainly: an RDMA device, its\n"
	 "port up, and a memlock limit of at least SIZE (default 1G, what a shard\n"
	 "server registers: its --capacity). Exit 0 if it can, 1 with the reason\n"
	 "if not. Needs no coordinator; `status --server` says what a server offers.", c_rdma},
	{NULL, NULL, NULL, NULL},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: zshardctl [--coordinator HOST:PORT] [--timeout-ms MS] COMMAND [ARGS]\n\n"
		   "The zshard operator CLI. The coordinator address may also come from\n"
		   "$ZSHARD_COORDINATOR. Commands (each takes --help):\n\n");
	for (const struct cmd *c = cmds; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->args);
}

int main(int argc, char **argv)
{
	struct ctx x = {.coordinator = getenv("ZSHARD_COORDINATOR"), .timeout_ms = 10000};
	struct zs_error err = {0};
	int i = 1, rc;

	zs_log_init("zshardctl");
	zs_log_set_level(ZS_LOG_ERROR);
	for (; i < argc && argv[i][0] == '-'; i++) {
		uint64_t v;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--coordinator") && i + 1 < argc) {
			x.coordinator = argv[++i];
		} else if (!strncmp(argv[i], "--coordinator=", 14)) {
			x.coordinator = argv[i] + 14;
		} else if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc) {
			if (zs_parse_u64(argv[++i], 1, 3600000, &v, &err)) {
				fprintf(stderr, "zshardctl: --timeout-ms: %s\n", err.msg);
				return 2;
			}
			x.timeout_ms = (int)v;
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
	for (const struct cmd *c = cmds; c->name; c++) {
		if (strcmp(c->name, argv[i]))
			continue;
		rc = c->fn(&x, argc - i, argv + i);
		zs_coord_close(x.c);
		return rc;
	}
	fprintf(stderr, "zshardctl: unknown command '%s' (see zshardctl --help)\n", argv[i]);
	return 2;
}
