/*
 * stats.c - zshardctl stats: per server, or a job's step reports by rank
 * beside each server's update time.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"

/* ---------------------------------------------------------------- stats */

static json_t *report_json(const struct zs_step_report *r, int64_t now_ms)
{
	return json_pack("{s:i, s:I, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I}",
			 "rank", (int)r->rank, "step", (json_int_t)r->step, "stage", (int)r->stage,
			 "world_size", (int)r->world,
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
/* Each rank's latest step report: a table, or into ranks. */
static void stats_ranks(const char *name, const struct zs_job *j, const struct zs_step_report *r,
			uint32_t n_r, int64_t now, int json, json_t *ranks)
{
	if (!json) {
		printf("job %s: stage %u, world size %u, %u of %u ranks reporting\n", name,
		       j->spec.stage, zs_world_last(&j->spec, &j->worlds), n_r,
		       zs_world_last(&j->spec, &j->worlds));
		printf("%-5s %8s %5s %5s %3s %9s %9s %9s %9s %9s %10s %10s %10s %10s %10s %7s\n",
		       "RANK", "STEP", "STAGE", "WORLD", "PF", "STEP-MS", "COMPUTE", "GATHER-W", "PUSH-W",
		       "CONTROL", "GATHERED", "PUSHED", "PEAK-PAR", "PEAK-GRAD", "PEAK-RSS",
		       "AGE-S");
	}
	for (uint32_t i = 0; i < n_r; i++) {
		char b[5][32];
		if (json) {
			json_array_append_new(ranks, report_json(&r[i], now));
			continue;
		}
		printf("%-5u %8llu %5u %5u %3u %9.3f %9.3f %9.3f %9.3f %9.3f %10s %10s %10s %10s %10s %7.1f\n",
		       r[i].rank, (unsigned long long)r[i].step, r[i].stage, r[i].world, r[i].prefetch,
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
}

/* Server s's latest step of job name (when it holds some of j): a table
 * row, or into servers. 1 when it did not answer. */
static int stats_server(struct ctx *x, const struct zs_server_info *s, const struct zs_job *j,
			const char *name, int json, json_t *servers)
{
	struct zs_error err = {0};
	struct zs_server_status st;
	const struct zs_job_step_stats *js = NULL;
	bool used = false;
	char b1[32], b2[32];

	for (uint32_t k = 0; k < j->placement.n_shards; k++)
		used |= j->placement.shards[k].server_id == s->id;
	if (!used)
		return 0;
	if (!s->up || zs_server_status_query(s->addr, x->timeout_ms, &st, &err)) {
		if (json)
			json_array_append_new(servers, json_pack("{s:I, s:s, s:s}", "id",
								 (json_int_t)s->id, "addr",
								 s->addr, "state", "down"));
		else
			printf("%-4llu %-22s down\n", (unsigned long long)s->id, s->addr);
		return 1;
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
	return 0;
}

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
		return cli_die("%s", err.msg);
	if (zs_coord_step_reports(x->c, name, &r, &n_r, &err) ||
	    zs_coord_servers(x->c, &s, &n_s, &err)) {
		zs_job_release(&j);
		free(r);
		return cli_die("%s", err.msg);
	}
	ranks = json_array();
	servers = json_array();
	stats_ranks(name, &j, r, n_r, now, json, ranks);
	if (!json)
		printf("\n%-4s %-22s %8s %6s %10s %10s %10s %10s\n", "ID", "SERVER", "STEP",
		       "SHARDS", "REDUCE-MS", "OPTIM-MS", "RSS", "PEAK-RSS");
	for (uint32_t i = 0; i < n_s; i++)
		r_ |= stats_server(x, &s[i], &j, name, json, servers);
	if (json)
		cli_json_print(json_pack("{s:s, s:i, s:i, s:o, s:o}", "job", name, "stage",
				     (int)j.spec.stage, "world_size", (int)zs_world_last(&j.spec, &j.worlds),
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
	char **pos;
	struct cli_args ca;
	int json = 0, np, r;
	json_t *arr;

	if ((r = cli_parse(&cmd_stats, argc, argv, 1, &ca)))
		return r < 0 ? 0 : r;
	pos = ca.pos;
	np = ca.n_pos;
	json = cli_get(&cmd_stats, &ca, "json") != NULL;
	if (np == 1)
		return cli_open_coord(x) ? 1 : stats_job(x, pos[0], json);
	arr = json_array();
	if ((r = cli_open_coord(x)) || (r = zs_coord_servers(x->c, &s, &n, &err) ? cli_die("%s", err.msg) : 0)) {
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
				arr, json_pack("{s:I, s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I}",
					       "id", (json_int_t)st.id, "addr", st.addr, "state", "up",
					       "data_addr", st.data_addr, "shm_addr", st.shm_addr,
					       "jobs", (int)st.jobs_held, "shards", (int)st.shards,
					       "state_bytes", (json_int_t)st.state_bytes,
					       "steps_applied", (json_int_t)st.steps_applied,
					       "bytes_in", (json_int_t)st.bytes_in,
					       "bytes_out", (json_int_t)st.bytes_out,
					       "replica_bytes", (json_int_t)st.replica_bytes,
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
		cli_json_print(json_pack("{s:o}", "servers", arr));
	else
		json_decref(arr);
	free(s);
	return 0;
}

static const struct zs_opt stats_flags[] = {CLI_FLAG_JSON, {0}};

const struct cmd cmd_stats = {"stats", "[JOB] [--json]", "Per shard server: jobs and shards held, bytes of shard state, shard\nupdates applied, bytes in and out, gathers waiting for other ranks.\nWith JOB: each rank's latest step report (step time split into compute,\nwaiting on gathers, waiting on pushes and coordinator calls; bytes\ngathered and pushed; peak live parameters and gradients; peak resident\nmemory), and each server's reduce and optimizer time on the job's latest\nstep with its resident memory.", c_stats, stats_flags};
