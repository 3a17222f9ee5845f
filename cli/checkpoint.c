/*
 * checkpoint.c - zshardctl checkpoint create | list | restore.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "base/util.h"
#include "ctrl/ckpt_arm.h"

/* ----------------------------------------------------------- checkpoint */

static void sleep_100ms(void)
{
	struct timespec ts = {0, 100 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

/* Whose a checkpoint is: the job's now, or an earlier job's of its name
 * (deleted with its checkpoints kept). */
static const char *owner(const struct zs_checkpoint *k, const struct zs_job *j, char *b,
			 size_t len)
{
	if (j && k->incarnation == j->incarnation)
		return "this job";
	if (!k->incarnation)
		return "an earlier job";
	snprintf(b, len, "earlier %016llx", (unsigned long long)k->incarnation);
	return b;
}

static void print_ckpt(const struct zs_checkpoint *k, const struct zs_job *j, bool all)
{
	char b[32], when[32], o[40];
	printf("%-6llu %-8llu %-10s %-21s %12s %7u %6u ", (unsigned long long)k->id,
	       (unsigned long long)k->step, zs_ckpt_state_name(k->state),
	       cli_time(k->created_ms, when, sizeof when), zs_fmt_bytes(k->bytes, b, sizeof b),
	       k->n_durable, k->n_blobs);
	if (all)
		printf("%-24s ", owner(k, j, o, sizeof o));
	printf("%s\n", k->error);
}

/*
 * Tells every server of the job about checkpoint k now, rather than at
 * its next heartbeat: a step just ahead of the trainers can then still be
 * captured (each server arms the capture before the step's update).
 */
static int arm(struct ctx *x, const char *job, const struct zs_checkpoint *k)
{
	struct zs_error err = {0};
	struct zs_job j;
	enum zs_status st;

	if ((st = zs_coord_get_job(x->c, job, &j, &err)) == ZS_OK) {
		st = zs_ckpt_arm(x->c, &j, k->id, k->step, x->timeout_ms, &err);
		zs_job_release(&j);
	}
	return st ? cli_die("checkpoint %llu: %s", (unsigned long long)k->id, err.msg) : 0;
}

/* checkpoint delete JOB ID */
static int ckpt_delete(struct ctx *x, const char *job, const char *which)
{
	struct zs_error err = {0};
	int r;
	uint64_t id;
	struct zs_checkpoint k;

	if (!which || zs_parse_u64(which, 1, UINT64_MAX, &id, &err))
		return cli_usage_err("checkpoint", "delete needs a checkpoint id");
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_delete_ckpt(x->c, job, id, &k, &err))
		return cli_die("%s", err.msg);
	printf("checkpoint %llu of job %s at step %llu (%s) deleted\n",
	       (unsigned long long)k.id, job, (unsigned long long)k.step,
	       zs_ckpt_state_name(k.state));
	zs_checkpoint_release(&k);
	return 0;
}

/* checkpoint list JOB [--all] [--json] */
static int ckpt_list(struct ctx *x, const char *job, bool all, int json)
{
	struct zs_error err = {0};
	struct zs_checkpoint *v;
	struct zs_job j = {0};
	bool has_job;
	uint32_t n;
	char o[40];

	if (zs_coord_list_ckpts_ex(x->c, job, all, &v, &n, &err))
		return cli_die("%s", err.msg);
	/* whose each one is: the job's now or an earlier one's */
	has_job = all && !zs_coord_get_job(x->c, job, &j, NULL);
	if (json) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < n; i++) {
			json_t *e = json_pack("{s:I, s:I, s:s, s:I, s:I, s:i, s:i, s:s}", "id",
					      (json_int_t)v[i].id, "step", (json_int_t)v[i].step,
					      "state", zs_ckpt_state_name(v[i].state),
					      "created_ms", (json_int_t)v[i].created_ms, "bytes",
					      (json_int_t)v[i].bytes, "servers",
					      (int)v[i].n_durable, "blobs", (int)v[i].n_blobs,
					      "error", v[i].error);
			snprintf(o, sizeof o, "%016llx", (unsigned long long)v[i].incarnation);
			json_object_set_new(e, "incarnation", json_string(o));
			if (v[i].world) /* 0: taken before worlds were recorded */
				json_object_set_new(e, "world_size", json_integer(v[i].world));
			if (all)
				json_object_set_new(e, "this_job",
						    json_boolean(has_job && v[i].incarnation ==
									j.incarnation));
			json_array_append_new(a, e);
		}
		cli_json_print(json_pack("{s:s, s:o}", "job", job, "checkpoints", a));
	} else {
		printf("%-6s %-8s %-10s %-21s %12s %7s %6s ", "ID", "STEP", "STATE", "CREATED",
		       "BYTES", "SERVERS", "BLOBS");
		if (all)
			printf("%-24s ", "WHOSE");
		printf("ERROR\n");
		for (uint32_t i = 0; i < n; i++)
			print_ckpt(&v[i], has_job ? &j : NULL, all);
	}
	if (has_job)
		zs_job_release(&j);
	for (uint32_t i = 0; i < n; i++)
		zs_checkpoint_release(&v[i]);
	free(v);
	return 0;
}

/* checkpoint create JOB --step N [--wait MS] */
static int ckpt_create(struct ctx *x, const char *job, uint64_t step, uint64_t wait_ms)
{
	struct zs_error err = {0};
	int r;
	struct zs_checkpoint k;
	uint64_t id;

	if (zs_coord_create_ckpt(x->c, job, step, &k, &err))
		return cli_die("%s", err.msg);
	id = k.id;
	if (k.state == ZS_CKPT_PENDING && (r = arm(x, job, &k))) {
		zs_checkpoint_release(&k);
		return r;
	}
	for (uint64_t t = 0; k.state == ZS_CKPT_PENDING && t < wait_ms; t += 100) {
		zs_checkpoint_release(&k);
		sleep_100ms();
		if (zs_coord_get_ckpt(x->c, job, id, &k, &err))
			return cli_die("%s", err.msg);
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

/* checkpoint restore JOB ID|latest [--wait MS] */
static int ckpt_restore(struct ctx *x, const char *job, const char *which, uint64_t wait_ms)
{
	struct zs_error err = {0};
	int r;
	struct zs_job j;
	uint64_t id = 0;

	if (strcmp(which, "latest") && zs_parse_u64(which, 1, UINT64_MAX, &id, &err))
		return cli_usage_err("checkpoint", "'%s' is not a checkpoint id or 'latest'", which);
	if (zs_coord_restore(x->c, job, id, &j, &err))
		return cli_die("%s", err.msg);
	id = j.restore_pending;
	for (uint64_t t = 0; j.restore_pending && t < wait_ms; t += 100) {
		zs_job_release(&j);
		sleep_100ms();
		if (zs_coord_get_job(x->c, job, &j, &err))
			return cli_die("%s", err.msg);
	}
	if (j.restore_pending) {
		printf("job %s: restoring checkpoint %llu\n", job, (unsigned long long)id);
		r = wait_ms ? cli_die("the restore of checkpoint %llu has not finished",
				  (unsigned long long)id) : 0;
	} else if (j.restore_error[0]) {
		r = cli_die("restore of checkpoint %llu failed: %s", (unsigned long long)id,
			j.restore_error);
	} else {
		printf("job %s: restored checkpoint %llu, trainers resume at step %llu\n", job,
		       (unsigned long long)j.restored_id, (unsigned long long)j.restored_step);
		r = 0;
	}
	zs_job_release(&j);
	return r;
}

static int c_checkpoint(struct ctx *x, int argc, char **argv)
{
	const char *sub, *job, *which;
	int have_step, all, r;
	struct cli_args ca;

	if ((r = cli_parse(&cmd_checkpoint, argc, argv, 3, &ca)))
		return r < 0 ? 0 : r;
	sub = ca.pos[0];
	job = ca.pos[1];
	which = ca.pos[2];
	all = cli_get(&cmd_checkpoint, &ca, "all") != NULL;
	have_step = cli_get(&cmd_checkpoint, &ca, "step") != NULL;
	if (!sub || !job ||
	    (strcmp(sub, "create") && strcmp(sub, "list") && strcmp(sub, "restore") &&
	     strcmp(sub, "delete")))
		return cli_usage_err("checkpoint", "want create, list, restore or delete, and a job");
	if (!strcmp(sub, "delete"))
		return ckpt_delete(x, job, which);
	if (!strcmp(sub, "create") && !have_step)
		return cli_usage_err("checkpoint", "create needs --step N (the step whose parameters to keep)");
	if (!strcmp(sub, "restore") && !which)
		return cli_usage_err("checkpoint", "restore needs a checkpoint id or 'latest'");
	if ((r = cli_open_coord(x)))
		return r;
	if (all && strcmp(sub, "list"))
		return cli_usage_err("checkpoint", "--all goes with list");
	if (!strcmp(sub, "list"))
		return ckpt_list(x, job, all, cli_get(&cmd_checkpoint, &ca, "json") != NULL);
	if (!strcmp(sub, "create"))
		return ckpt_create(x, job, cli_get_u64(&cmd_checkpoint, &ca, "step", 0),
				   cli_get_u64(&cmd_checkpoint, &ca, "wait", 0));
	return ckpt_restore(x, job, which, cli_get_u64(&cmd_checkpoint, &ca, "wait", 0));
}

static const struct zs_opt checkpoint_flags[] = {
	{"step", ZS_OPT_NUM, 0, 0, NULL, false, 0, "N", "create: the step to take it at"},
	{"wait", ZS_OPT_NUM, 0, 86400000, NULL, false, 0, "MS",
	 "create, restore: wait up to MS for the outcome"},
	{"all", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL,
	 "list: with the kept checkpoints of deleted jobs of the name"},
	CLI_FLAG_JSON,
	{0},
};

const struct cmd cmd_checkpoint = {
	"checkpoint",
	"create JOB --step N [--wait MS] | list JOB [--all] [--json] |\n"
	"                  restore JOB ID|latest [--wait MS] | delete JOB ID",
	"Checkpoints are taken at a step: every server captures its shards\n"
	"when they reach it and writes them to its LMDB; the coordinator\n"
	"commits the checkpoint once all are durable. restore puts a\n"
	"committed one back (trainers stopped), and trainers resume from its\n"
	"step. delete forgets one (a pending one that no trainer will reach,\n"
	"a failed or an old one) and its servers drop what they hold of it.\n"
	"--wait waits up to MS for the outcome.\n\n"
	"A job deleted with --keep-checkpoints leaves its committed ones: no\n"
	"later job of its name sees them (latest, rollbacks), 'list --all'\n"
	"shows them beside the job's own, and a restore or delete by id\n"
	"reaches one (a restore only into a job of the same layout).",
	c_checkpoint,
	checkpoint_flags,
};
