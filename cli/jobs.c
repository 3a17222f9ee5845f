/*
 * jobs.c - zshardctl jobs, job, placement, stage, trainers and rebalance:
 * the jobs, their placement and their ZeRO stage.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"
#include "model/spec_json.h"

/* ----------------------------------------------------------------- jobs */

static const char *incarnation_hex(uint64_t v)
{
	static char b[17];
	snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
	return b;
}

static json_t *job_json_base(const struct zs_job *j);

static json_t *job_json_worlds(const struct zs_job *j)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < j->worlds.n; i++)
		json_array_append_new(a, json_pack("{s:I, s:i}", "step",
						   (json_int_t)j->worlds.v[i].step, "world_size",
						   (int)j->worlds.v[i].world));
	return a;
}

static json_t *job_json_brief(const struct zs_job *j)
{
	json_t *o = job_json_base(j);

	json_object_set_new(o, "rank_lost", json_string(zs_rank_lost_name(j->spec.rank_lost)));
	json_object_set_new(o, "rank_wait_ms",
			    json_integer(j->spec.rank_wait_ms ? j->spec.rank_wait_ms : ZS_RANK_WAIT_MS));
	json_object_set_new(o, "data_tls", json_boolean(j->spec.data_tls));
	json_object_set_new(o, "buffers", json_integer(j->spec.buffers));
	json_object_set_new(o, "restore_error", json_string(j->restore_error));
	json_object_set_new(o, "readers",
			    json_pack("{s:i, s:i}", "pins", (int)j->spec.reader_pins, "idle_ms",
				      (int)(j->spec.reader_idle_ms ? j->spec.reader_idle_ms
								   : ZS_READER_IDLE_MS)));
	return o;
}

static json_t *job_json_base(const struct zs_job *j)
{
	return json_pack("{s:s, s:s, s:I, s:i, s:s, s:i, s:i, s:o, s:s, s:s, s:i, s:I, s:i, s:I, s:I, s:i, s:i, s:I, s:I, s:I, s:b, s:s}",
			 "name", j->spec.name, "incarnation", incarnation_hex(j->incarnation),
			 "created_ms", (json_int_t)j->created_ms,
			 "replicas", (int)(j->spec.replicas ? j->spec.replicas : 1),
			 "collective", j->spec.collective ? "nccl" : "none",
			 "stage", (int)j->spec.stage,
			 "world_size", (int)zs_world_last(&j->spec, &j->worlds),
			 "world_changes", job_json_worlds(j),
			 "compute_dtype", zs_dtype_name(j->spec.compute_dtype),
			 "optimizer", zs_optim_name(j->spec.optim.kind),
			 "optimizer_groups", (int)j->spec.optim.n_groups,
			 "optimizer_steps_taken", (json_int_t)j->spec.optim.steps_taken,
			 "units", (int)j->spec.layout.n_units,
			 "numel", (json_int_t)zs_layout_numel(&j->spec.layout),
			 "epoch", (json_int_t)j->placement.epoch,
			 "shards", (int)j->placement.n_shards,
			 "trainers", (int)j->n_trainers,
			 "timeline", (json_int_t)j->timeline,
			 "restored_checkpoint", (json_int_t)j->restored_id,
			 "restored_step", (json_int_t)j->restored_step,
			 "restoring", (int)(j->restore_pending != 0),
			 "rollback_reason", j->rollback_reason);
}

static int c_jobs(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job *j;
	uint32_t n;
	struct cli_args ca;
	int json, r;

	if ((r = cli_parse(&cmd_jobs, argc, argv, 0, &ca)))
		return r < 0 ? 0 : r;
	json = cli_get(&cmd_jobs, &ca, "json") != NULL;
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_jobs(x->c, &j, &n, &err))
		return cli_die("%s", err.msg);
	if (json) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < n; i++)
			json_array_append_new(a, job_json_brief(&j[i]));
		cli_json_print(json_pack("{s:o}", "jobs", a));
	} else {
		printf("%-20s %-5s %-6s %-6s %-6s %6s %14s %6s %7s %8s\n", "JOB", "STAGE",
		       "WORLD", "DTYPE", "OPTIM", "UNITS", "PARAMS", "EPOCH", "SHARDS",
		       "TRAINERS");
		for (uint32_t i = 0; i < n; i++)
			printf("%-20s %-5u %-6u %-6s %-6s %6u %14llu %6llu %7u %5u/%u\n",
			       j[i].spec.name, j[i].spec.stage,
			       zs_world_last(&j[i].spec, &j[i].worlds),
			       zs_dtype_name(j[i].spec.compute_dtype),
			       zs_optim_name(j[i].spec.optim.kind), j[i].spec.layout.n_units,
			       (unsigned long long)zs_layout_numel(&j[i].spec.layout),
			       (unsigned long long)j[i].placement.epoch,
			       j[i].placement.n_shards, j[i].n_trainers,
			       zs_world_last(&j[i].spec, &j[i].worlds));
	}
	for (uint32_t i = 0; i < n; i++)
		zs_job_release(&j[i]);
	free(j);
	return 0;
}

static void print_job(const struct zs_job *j)
{
	char when[32];
	printf("job %s (incarnation %016llx, created %s): stage %u, world size %u, compute %s, optimizer %s (lr %g), %u units, %llu parameters, placement epoch %llu, %u shards, %u/%u trainers joined\n",
	       j->spec.name, (unsigned long long)j->incarnation,
	       cli_time(j->created_ms, when, sizeof when), j->spec.stage,
	       zs_world_last(&j->spec, &j->worlds),
	       zs_dtype_name(j->spec.compute_dtype), zs_optim_name(j->spec.optim.kind),
	       j->spec.optim.lr, j->spec.layout.n_units,
	       (unsigned long long)zs_layout_numel(&j->spec.layout),
	       (unsigned long long)j->placement.epoch, j->placement.n_shards,
	       j->n_trainers, zs_world_last(&j->spec, &j->worlds));
	for (uint32_t i = 0; i < j->worlds.n; i++)
		printf("  resized: %u ranks from step %llu on\n", j->worlds.v[i].world,
		       (unsigned long long)j->worlds.v[i].step);
	if (!j->spec.collective)
		printf("  a rank lost mid-step and not replaced within %u ms: %s\n",
		       j->spec.rank_wait_ms ? j->spec.rank_wait_ms : ZS_RANK_WAIT_MS,
		       j->spec.rank_lost == ZS_LOST_SHRINK
			       ? "the world shrinks without it (from the last checkpoint, the ranks above it taking its place)"
		       : j->spec.rank_lost == ZS_LOST_ROLLBACK ? "the job rolls back to its last checkpoint"
							: "the job waits for it");
	if (j->spec.replicas > 1)
		printf("  replicas %u: each shard on %u servers; the primary forwards each step's reduced gradient to the others\n",
		       j->spec.replicas, j->spec.replicas);
	if (j->spec.collective)
		printf("  collective (nccl): the trainers reduce among themselves; rank r pushes slice r of each unit, its sum\n");
	if (j->spec.data_tls)
		printf("  data_tls: its tcp data plane is encrypted (TLS 1.3 records, AES-256-GCM); shm's bytes stay on the host, rdma's are the fabric's to keep\n");
	if (j->spec.reader_pins)
		printf("  readers: up to %u live versions pinned at once (each a copy of the parameters on their servers), dropped after %u ms untouched\n",
		       j->spec.reader_pins,
		       j->spec.reader_idle_ms ? j->spec.reader_idle_ms : ZS_READER_IDLE_MS);
	else
		printf("  readers: no live version may be pinned (the spec's readers.pins is 0)\n");
	if (j->spec.optim.steps_taken)
		printf("  optimizer state imported after %llu steps: the update of step v is the optimizer's step %llu + v + 1\n",
		       (unsigned long long)j->spec.optim.steps_taken,
		       (unsigned long long)j->spec.optim.steps_taken);
	for (uint32_t g = 0; j->spec.optim.n_groups > 1 && g < j->spec.optim.n_groups; g++) {
		const struct zs_hp *h = &j->spec.optim.groups[g];
		uint32_t nt = 0;
		for (uint32_t u = 0; u < j->spec.layout.n_units; u++)
			for (uint32_t t = 0; t < j->spec.layout.units[u].n_tensors; t++)
				nt += j->spec.layout.units[u].tensors[t].group == g;
		if (ZS_OPTIM_ADAM_FAMILY(j->spec.optim.kind))
			printf("  optimizer group %u: lr %g, weight_decay %g, betas %g %g, eps %g; %u tensors\n",
			       g, h->lr, h->weight_decay, h->beta1, h->beta2, h->eps, nt);
		else if (j->spec.optim.kind == ZS_ADAGRAD)
			printf("  optimizer group %u: lr %g, weight_decay %g, eps %g; %u tensors\n", g,
			       h->lr, h->weight_decay, h->eps, nt);
		else
			printf("  optimizer group %u: lr %g, weight_decay %g, momentum %g; %u tensors\n", g,
			       h->lr, h->weight_decay, h->momentum, nt);
	}
	{
		uint32_t nf = 0, ns = 0;
		uint64_t ef = 0;
		for (uint32_t u = 0; u < j->spec.layout.n_units; u++)
			for (uint32_t t = 0; t < j->spec.layout.units[u].n_tensors; t++)
				if (j->spec.layout.units[u].tensors[t].frozen) {
					nf++;
					ef += j->spec.layout.units[u].tensors[t].numel;
				}
		for (uint32_t k = 0; nf && k < j->placement.n_shards; k++)
			ns += !j->placement.shards[k].copy &&
			      zs_shard_marks(&j->spec, &j->placement.shards[k]);
		if (nf)
			printf("  frozen: %u tensors, %llu elements (held and gathered, never updated);"
			       " %u frozen shards: no gradient, no optimizer state\n",
			       nf, (unsigned long long)ef, ns);
	}
	if (j->restore_pending == ZS_CKPT_RESET)
		printf("  resetting now (to step 0, no checkpoint to roll back to)\n");
	else if (j->restore_pending)
		printf("  restoring checkpoint %llu now\n", (unsigned long long)j->restore_pending);
	if (j->restored_id)
		printf("  timeline %llu: from checkpoint %llu (step %llu)\n",
		       (unsigned long long)j->timeline, (unsigned long long)j->restored_id,
		       (unsigned long long)j->restored_step);
	if (j->rollback_reason[0])
		printf("  last automatic rollback: %s\n", j->rollback_reason);
	if (j->restore_error[0])
		printf("  last restore failed: %s\n", j->restore_error);
}

/* The world size from a step the coordinator names (four past the latest
 * step report); ranks at or above it leave there, new ones begin there. */
static int resize_job(struct ctx *x, const char *name, uint32_t world, int json)
{
	struct zs_error err = {0};
	struct zs_job j;
	const struct zs_world_change *c;

	if (zs_coord_resize_job(x->c, name, world, &j, &err))
		return cli_die("%s", err.msg);
	c = j.worlds.n ? &j.worlds.v[j.worlds.n - 1] : NULL;
	if (json)
		cli_json_print(json_pack("{s:s, s:i, s:I}", "job", name, "world_size",
					 (int)zs_world_last(&j.spec, &j.worlds), "from_step",
					 (json_int_t)(c ? c->step : 0)));
	else if (c && c->world == world)
		printf("job %s: %u ranks from step %llu on (ranks %u and up leave there; new ranks begin there: zs_trainer_resume says so)\n",
		       name, world, (unsigned long long)c->step, world);
	else
		printf("job %s: %u ranks already\n", name, world);
	zs_job_release(&j);
	return 0;
}

/* Every rank leaves before one step (the step driver sees it at its next
 * boundary); waits, within STOP_WAIT_MS, until they have. */
#define STOP_WAIT_MS 600000
static int stop_job(struct ctx *x, const char *name)
{
	struct zs_error err = {0};
	struct zs_job j;
	uint64_t before;

	if (zs_coord_stop_job(x->c, name, &j, &err))
		return cli_die("%s", err.msg);
	before = j.stop_before;
	zs_job_release(&j);
	printf("job %s: every rank leaves before step %llu\n", name, (unsigned long long)before);
	fflush(stdout);
	for (int64_t t0 = zs_now_ms();; zs_sleep_ms(200, NULL)) {
		if (zs_coord_get_job(x->c, name, &j, &err))
			return cli_die("%s", err.msg);
		if (!j.n_trainers || j.stop_before != before)
			break;
		if (zs_now_ms() - t0 > STOP_WAIT_MS) {
			int r = cli_die("%u rank(s) of job %s did not leave within %d s (rank %u first)",
					j.n_trainers, name, STOP_WAIT_MS / 1000, j.trainers[0].rank);
			zs_job_release(&j);
			return r;
		}
		zs_job_release(&j);
	}
	if (j.stopped_step)
		printf("job %s stopped before step %llu: its servers keep its state across a clean restart, and trainers resume there\n",
		       name, (unsigned long long)j.stopped_step);
	else
		printf("job %s did not stop cleanly (%s): it resumes from its latest checkpoint\n", name,
		       j.rollback_reason[0] ? j.rollback_reason : "its ranks left at different steps");
	zs_job_release(&j);
	return 0;
}

static int c_job(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job j = {0};
	char **pos;
	struct cli_args ca;
	int json = 0, np, r, keep;
	uint32_t deleted = 0, kept = 0;
	enum zs_status st;

	if ((r = cli_parse(&cmd_job, argc, argv, 2, &ca)))
		return r < 0 ? 0 : r;
	pos = ca.pos;
	np = ca.n_pos;
	json = cli_get(&cmd_job, &ca, "json") != NULL;
	keep = cli_get(&cmd_job, &ca, "keep-checkpoints") != NULL; /* delete's own */
	if (keep && (np < 1 || strcmp(pos[0], "delete")))
		return cli_usage_err("job", "--keep-checkpoints goes with 'delete NAME'");
	if (np != 2 || (strcmp(pos[0], "create") && strcmp(pos[0], "show") &&
			strcmp(pos[0], "delete") && strcmp(pos[0], "stop") &&
			strcmp(pos[0], "resize")))
		return cli_usage_err("job",
				     "want 'create FILE', 'show NAME', 'stop NAME', 'resize NAME --world N' or 'delete NAME'");
	if (!strcmp(pos[0], "resize") != (cli_get(&cmd_job, &ca, "world") != NULL))
		return cli_usage_err("job", "--world N goes with 'resize NAME', and resize wants it");
	if (!strcmp(pos[0], "create")) {
		struct zs_job_spec spec;
		if (zs_spec_load(pos[1], &spec, &err))
			return cli_die("%s", err.msg);
		if (!spec.stage && x->stage) /* the spec names none: the configuration's */
			spec.stage = x->stage;
		/* check here too, so a bad file fails without a round trip */
		if (zs_job_spec_normalize(&spec, &err)) {
			zs_job_spec_release(&spec);
			return cli_die("%s: %s", pos[1], err.msg);
		}
		if ((r = cli_open_coord(x))) {
			zs_job_spec_release(&spec);
			return r;
		}
		st = zs_coord_create_job(x->c, &spec, &j, &err);
		zs_job_spec_release(&spec);
	} else if ((r = cli_open_coord(x))) {
		return r;
	} else if (!strcmp(pos[0], "show")) {
		st = zs_coord_get_job(x->c, pos[1], &j, &err);
	} else if (!strcmp(pos[0], "stop")) {
		return stop_job(x, pos[1]);
	} else if (!strcmp(pos[0], "resize")) {
		return resize_job(x, pos[1], (uint32_t)cli_get_u64(&cmd_job, &ca, "world", 0), json);
	} else {
		st = zs_coord_delete_job_ex(x->c, pos[1], keep, &j, &deleted, &kept, &err);
	}
	if (st)
		return cli_die("%s", err.msg);
	if (json && !strcmp(pos[0], "delete")) {
		json_t *o = job_json_brief(&j);
		json_object_set_new(o, "checkpoints_deleted", json_integer(deleted));
		json_object_set_new(o, "checkpoints_kept", json_integer(kept));
		cli_json_print(o);
	} else if (json) {
		cli_json_print(job_json_brief(&j));
	} else if (!strcmp(pos[0], "delete") && kept) {
		printf("job %s deleted; its %u committed checkpoint%s kept (no job of the name sees them: 'zshardctl checkpoint list %s --all' lists them, 'zshardctl checkpoint restore %s ID' restores one into a job of the name and layout, 'zshardctl checkpoint delete %s ID' deletes one)\n",
		       j.spec.name, kept, kept == 1 ? "" : "s", j.spec.name, j.spec.name,
		       j.spec.name);
		if (deleted)
			printf("  %u failed or pending ones deleted\n", deleted);
	} else if (!strcmp(pos[0], "delete")) {
		printf("job %s deleted with its %u checkpoint%s (from the catalog now, from its servers as they next poll)\n",
		       j.spec.name, deleted, deleted == 1 ? "" : "s");
	} else
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
	char **pos;
	struct cli_args ca;
	int json = 0, np, r;

	if ((r = cli_parse(&cmd_placement, argc, argv, 1, &ca)))
		return r < 0 ? 0 : r;
	pos = ca.pos;
	np = ca.n_pos;
	json = cli_get(&cmd_placement, &ca, "json") != NULL;
	if (np != 1)
		return cli_usage_err("placement", "want a job name");
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_get_job(x->c, pos[0], &j, &err))
		return cli_die("%s", err.msg);
	if (zs_coord_servers(x->c, &s, &n_s, &err)) {
		zs_job_release(&j);
		return cli_die("%s", err.msg);
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
				json_pack("{s:i, s:s, s:i, s:s, s:I, s:s, s:I, s:I, s:I, s:I, s:b, s:b}",
					  "unit", (int)sh->unit, "unit_name", un->name,
					  "shard", (int)sh->index,
					  "role", sh->copy ? "replica" : "primary",
					  "server", (json_int_t)sh->server_id,
					  "server_addr", addr_of(s, n_s, sh->server_id),
					  "offset", (json_int_t)sh->offset,
					  "length", (json_int_t)sh->length,
					  "padded", (json_int_t)sh->padded,
					  "bytes", (json_int_t)(sh->length * zs_dtype_size(un->dtype)),
					  "frozen", zs_shard_marks(&j.spec, sh),
					  /* a rebuilt copy its primary has not seeded yet */
					  "seeding", sh->fresh != 0));
		}
		cli_json_print(json_pack("{s:s, s:I, s:i, s:o, s:o}", "job", j.spec.name,
				     "epoch", (json_int_t)j.placement.epoch, "stage",
				     (int)j.spec.stage, "units", units, "shards", shards));
	} else {
		printf("job %s, placement epoch %llu, %u shards\n", j.spec.name,
		       (unsigned long long)j.placement.epoch, j.placement.n_shards);
		printf("%-24s %5s %-8s %6s %-22s %12s %12s %12s %s\n", "UNIT", "SHARD", "ROLE",
		       "SERVER", "ADDRESS", "OFFSET", "LENGTH", "BYTES", "TENSORS");
		for (uint32_t i = 0; i < j.placement.n_shards; i++) {
			const struct zs_shard *sh = &j.placement.shards[i];
			const struct zs_unit *un = &j.spec.layout.units[sh->unit];
			char b[32];
			printf("%-24.24s %5u %-8s %6llu %-22s %12llu %12llu %12s %s\n", un->name,
			       sh->index, sh->fresh ? "seeding" : sh->copy ? "replica" : "primary",
			       (unsigned long long)sh->server_id,
			       addr_of(s, n_s, sh->server_id),
			       (unsigned long long)sh->offset,
			       (unsigned long long)sh->length,
			       zs_fmt_bytes(sh->length * zs_dtype_size(un->dtype), b, sizeof b),
			       zs_shard_marks(&j.spec, sh) ? "frozen" : "trained");
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
	char **pos;
	struct cli_args ca;
	uint64_t stage = 0;
	int np, r;

	if ((r = cli_parse(&cmd_stage, argc, argv, 2, &ca)))
		return r < 0 ? 0 : r;
	pos = ca.pos;
	np = ca.n_pos;
	if (np < 1)
		return cli_usage_err("stage", "want a job name");
	if (np == 2 && zs_parse_u64(pos[1], 1, 3, &stage, &err))
		return cli_usage_err("stage", "stage must be 1, 2 or 3, not '%s'", pos[1]);
	if ((r = cli_open_coord(x)))
		return r;
	if (np == 2 ? zs_coord_set_stage(x->c, pos[0], (uint32_t)stage, &j, &err)
		    : zs_coord_get_job(x->c, pos[0], &j, &err))
		return cli_die("%s", err.msg);
	printf("%u\n", j.spec.stage);
	zs_job_release(&j);
	return 0;
}

/* ------------------------------------------------------------- trainers */

/* trainers evict JOB RANK: the rank leaves as if its trainer had. */
static int evict(struct ctx *x, const char *job, const char *rank_s)
{
	struct zs_error err = {0};
	struct zs_job j;
	uint64_t rank;
	int r;

	if (zs_parse_u64(rank_s, 0, ZS_MAX_WORLD - 1, &rank, &err))
		return cli_usage_err("trainers", "evict: rank: %s", err.msg);
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_leave(x->c, job, (uint32_t)rank, 0, false, 0, &j, &err))
		return cli_die("%s", err.msg);
	printf("job %s: rank %u evicted (%u of %u ranks joined)\n", j.spec.name,
	       (unsigned)rank, j.n_trainers, j.spec.world_size);
	zs_job_release(&j);
	return 0;
}

static int c_trainers(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job j;
	char **pos;
	struct cli_args ca;
	int json = 0, np, r;

	if ((r = cli_parse(&cmd_trainers, argc, argv, 3, &ca)))
		return r < 0 ? 0 : r;
	pos = ca.pos;
	np = ca.n_pos;
	json = cli_get(&cmd_trainers, &ca, "json") != NULL;
	if (np >= 1 && !strcmp(pos[0], "evict")) {
		if (np != 3 || json)
			return cli_usage_err("trainers", "evict wants a job and a rank");
		return evict(x, pos[1], pos[2]);
	}
	if (np != 1)
		return cli_usage_err("trainers", "want a job name");
	if ((r = cli_open_coord(x)))
		return r;
	if (zs_coord_get_job(x->c, pos[0], &j, &err))
		return cli_die("%s", err.msg);
	if (json) {
		json_t *a = json_array();
		for (uint32_t i = 0; i < j.n_trainers; i++)
			json_array_append_new(a, json_pack("{s:i, s:s, s:I}", "rank",
							   (int)j.trainers[i].rank, "host",
							   j.trainers[i].host, "joined_ms",
							   (json_int_t)j.trainers[i].joined_ms));
		cli_json_print(json_pack("{s:s, s:i, s:o}", "job", j.spec.name, "world_size",
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

#define WAIT_MS 120000

/* How long a rebalance waits for the state's checkpoint and its move:
 * --timeout-ms when given, else WAIT_MS. */
static int64_t wait_ms(const struct ctx *x)
{
	return x->timeout_set ? x->timeout_ms : WAIT_MS;
}

/*
 * A job without replicas whose servers are not all up cannot move its
 * state (a checkpoint needs every one of them durable): said at once,
 * naming the server, rather than after the wait.
 */
static int servers_up(struct ctx *x, const char *name)
{
	struct zs_error err = {0};
	struct zs_server_info *s = NULL;
	struct zs_job j;
	uint32_t n = 0;
	int r = 0;

	if (zs_coord_get_job(x->c, name, &j, &err))
		return cli_die("%s", err.msg);
	if (j.spec.replicas > 1 || (!j.stopped_step && !j.restored_id)) {
		zs_job_release(&j); /* copies elsewhere, or no state to move */
		return 0;
	}
	if (zs_coord_servers(x->c, &s, &n, &err)) {
		zs_job_release(&j);
		return cli_die("%s", err.msg);
	}
	for (uint32_t i = 0; i < j.placement.n_shards && !r; i++)
		for (uint32_t q = 0; q < n && !r; q++)
			if (s[q].id == j.placement.shards[i].server_id && !s[q].up)
				r = cli_die("server %llu (%s), which holds shards of job %s (no replicas), is down: its state cannot move until it is back (or restore a checkpoint)",
					    (unsigned long long)s[q].id, s[q].addr, name);
	free(s);
	zs_job_release(&j);
	return r;
}

/* A checkpoint of the job's state at step (no trainer: its servers take it
 * at once), waited for until committed; why: what it is for. */
static int checkpoint_now(struct ctx *x, const char *name, uint64_t step, const char *why)
{
	struct zs_error err = {0};
	struct zs_checkpoint k;
	uint64_t id;
	int64_t t0 = zs_now_ms();

	if (zs_coord_create_ckpt(x->c, name, step, &k, &err))
		return cli_die("a checkpoint of step %llu %s: %s", (unsigned long long)step, why,
			       err.msg);
	id = k.id;
	while (k.state == ZS_CKPT_PENDING && zs_now_ms() - t0 < wait_ms(x)) {
		zs_checkpoint_release(&k);
		zs_sleep_ms(100, NULL);
		if (zs_coord_get_ckpt(x->c, name, id, &k, &err))
			return cli_die("%s", err.msg);
	}
	if (k.state != ZS_CKPT_COMMITTED) {
		int r = cli_die("checkpoint %llu of step %llu, %s, %s%s%s", (unsigned long long)id,
				(unsigned long long)step, why,
				k.state == ZS_CKPT_FAILED ? "failed" : "did not commit in time",
				k.error[0] ? ": " : "", k.error);
		zs_checkpoint_release(&k);
		return r;
	}
	zs_checkpoint_release(&k);
	printf("job %s: checkpoint %llu holds its state of step %llu (%s)\n", name,
	       (unsigned long long)id, (unsigned long long)step, why);
	return 0;
}

/*
 * A job stopped cleanly keeps its state on its servers only: before a
 * rebalance moves it, a checkpoint of that step (taken at once: the servers
 * are there) carries it. Waits for the checkpoint to commit.
 */
static int checkpoint_state(struct ctx *x, const char *name)
{
	struct zs_error err = {0};
	struct zs_job j;
	uint64_t step;

	if (zs_coord_get_job(x->c, name, &j, &err))
		return cli_die("%s", err.msg);
	step = j.n_trainers ? 0 : j.stopped_step; /* nothing to take, or refused below */
	zs_job_release(&j);
	return step ? checkpoint_now(x, name, step, "to carry the job's state") : 0;
}

static int c_rebalance(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	struct zs_job j;
	char **pos;
	struct cli_args ca;
	int np, r;

	uint64_t ids[256];
	uint32_t n_ids = 0;

	if ((r = cli_parse(&cmd_rebalance, argc, argv, 1, &ca)))
		return r < 0 ? 0 : r;
	pos = ca.pos;
	np = ca.n_pos;
	if (cli_get(&cmd_rebalance, &ca, "servers")) { /* ID,ID,... */
		char list[4096], *tok, *save = NULL;
		snprintf(list, sizeof list, "%s", cli_get(&cmd_rebalance, &ca, "servers"));
		for (tok = strtok_r(list, ",", &save); tok && n_ids < 256;
		     tok = strtok_r(NULL, ",", &save))
			if (zs_parse_u64(tok, 1, UINT64_MAX, &ids[n_ids++], &err))
				return cli_usage_err("rebalance", "--servers: %s", err.msg);
	}
	if (np != 1)
		return cli_usage_err("rebalance", "want a job name");
	if ((r = cli_open_coord(x)))
		return r;
	if ((r = servers_up(x, pos[0])) || (r = checkpoint_state(x, pos[0])))
		return r;
	if (zs_coord_rebalance(x->c, pos[0], ids, n_ids, &j, &err))
		return cli_die("%s", err.msg);
	printf("job %s: placement epoch %llu, %u shards\n", j.spec.name,
	       (unsigned long long)j.placement.epoch, j.placement.n_shards);
	if (j.restore_pending) { /* its state follows: wait for it */
		uint64_t id = j.restore_pending;
		int64_t t0 = zs_now_ms();
		zs_job_release(&j);
		for (;; zs_sleep_ms(100, NULL)) {
			if (zs_coord_get_job(x->c, pos[0], &j, &err))
				return cli_die("%s", err.msg);
			if (!j.restore_pending || zs_now_ms() - t0 > wait_ms(x))
				break;
			zs_job_release(&j);
		}
		if (j.restore_pending)
			r = cli_die("the state's move (checkpoint %llu) has not finished after %lld ms",
				    (unsigned long long)id, (long long)wait_ms(x));
		else if (j.restore_error[0])
			r = cli_die("the state's move failed: %s", j.restore_error);
		else {
			printf("job %s: its state of step %llu moved with it (checkpoint %llu)\n",
			       j.spec.name, (unsigned long long)j.restored_step,
			       (unsigned long long)id);
			/* the checkpoint it moved with has its records where the
			 * job was: one on its new servers is what a rollback reads
			 * from now on, so that the old ones can go */
			r = checkpoint_now(x, pos[0], j.restored_step, "on its new servers");
		}
	}
	zs_job_release(&j);
	return r;
}

static const struct zs_opt json_only[] = {CLI_FLAG_JSON, {0}};
static const struct zs_opt job_flags[] = {
	CLI_FLAG_JSON,
	{"keep-checkpoints", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL,
	 "delete: the job's committed checkpoints stay"},
	{"world", ZS_OPT_NUM, 1, 65536, NULL, false, 0, "N", "resize: the new world size"},
	{0},
};
static const struct zs_opt rebalance_flags[] = {
	{"servers", ZS_OPT_WORD, 0, 0, NULL, false, 0, "ID,ID...", "the servers to place it on"},
	{0},
};

const struct cmd cmd_jobs = {"jobs", "[--json]", "List jobs with stage, world size, size and placement epoch.", c_jobs, json_only};

const struct cmd cmd_job = {"job", "create FILE.json | show NAME | stop NAME | resize NAME --world N | delete NAME [--keep-checkpoints] [--json]",
	 "Create a job from a JSON spec ('-' reads stdin; its keys: man zshardctl,\n"
	 "JOB SPEC), show one, stop one, resize one, or delete one. Stop: every\n"
	 "rank of the job leaves cleanly before one step (waiting for them); a clean restart\n"
	 "of the servers then keeps its state, and trainers resume at that step.\n"
	 "Resize: the world size changes at a step the coordinator names (four\n"
	 "past the latest step report): ranks at or above N leave there, new\n"
	 "ranks join and begin there (zs_trainer_resume), each step's mean is\n"
	 "over its own ranks. Not for collective jobs.\n"
	 "Delete: the job's checkpoints go with it, unless --keep-checkpoints:\n"
	 "then its committed ones stay, seen by no later job of the name (each\n"
	 "creation of a job is an incarnation of its own), listed by\n"
	 "'checkpoint list NAME --all' and restored only by id, into a job of\n"
	 "the name with the same layout.", c_job, job_flags};

const struct cmd cmd_placement = {"placement", "JOB [--json]", "Show which server owns each shard of each unit: offset, length, bytes;\nwith replicas, each copy and its role (primary, replica, or seeding: a\nrebuilt copy its primary has not filled yet).", c_placement, json_only};

const struct cmd cmd_stage = {"stage", "JOB [1|2|3]", "Print the job's ZeRO stage, or set it (trainers pick it up at\ntheir next step boundary).", c_stage, NULL};

const struct cmd cmd_trainers = {"trainers", "JOB [--json] | evict JOB RANK",
	"List the ranks that joined the job, or evict one: the rank leaves as if\n"
	"its trainer had (a trainer killed without leaving keeps its rank joined,\n"
	"and a new process for that rank is refused until it is evicted).", c_trainers, json_only};

const struct cmd cmd_rebalance = {"rebalance", "JOB [--servers ID,ID...]",
	"Recompute the job's placement over the live servers, or the ones\n"
	"named (no trainers joined: zshardctl job stop first); the epoch grows if\n"
	"it changed. The job's state moves with it, bitwise: a job stopped\n"
	"cleanly gets a checkpoint of its step first, and the checkpoint it is at\n"
	"is restored onto the new placement (waited for). Trainers then resume\n"
	"there.", c_rebalance, rebalance_flags};
