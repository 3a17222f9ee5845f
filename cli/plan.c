/*
 * plan.c - zshardctl plan: the memory a setup needs before running it, by
 * the ZeRO paper's accounting and zshard's trainer / server split.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"
#include "model/placement.h"
#include "model/plan.h"

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

/* What zshardctl plan was asked: the planner's input and the limits to
 * check it against. */
struct plan_opts {
	struct zs_plan_in in;
	const char *job;
	uint64_t gpu, host, largest;
	bool have_params, have_world, have_stage, have_dtype, have_optim, have_replicas, have_pins;
	int json;
};

/* A job's frozen shards (their master alone), and its fullest server's
 * state as placed now. */
struct plan_frozen {
	uint64_t elems, placed_max;
	uint32_t shards;
};

static const struct zs_opt plan_flags[] = {
	{"params", ZS_OPT_WORD, 0, 0, NULL, false, 0, "N", "parameters (a count: 125M, 7.5B)"},
	{"world", ZS_OPT_NUM, 1, ZS_MAX_WORLD, NULL, false, 0, "N", "data-parallel trainers"},
	{"job", ZS_OPT_WORD, 0, 0, NULL, false, 0, "JOB", "a job's own layout and settings"},
	{"units", ZS_OPT_NUM, 1, ZS_MAX_UNITS, NULL, false, 0, "U", "uniform units (32)"},
	{"largest-unit", ZS_OPT_WORD, 0, 0, NULL, false, 0, "N", "units of at most N parameters"},
	{"stage", ZS_OPT_NUM, 1, 3, NULL, false, 0, "1|2|3", "the ZeRO stage (3)"},
	{"servers", ZS_OPT_NUM, 1, ZS_MAX_WORLD, NULL, false, 0, "S", "shard servers (the world)"},
	{"dtype", ZS_OPT_WORD, 0, 0, NULL, false, 0, "bf16|f16|f32", "the compute dtype (bf16)"},
	{"optimizer", ZS_OPT_WORD, 0, 0, NULL, false, 0, "NAME",
	 "adamw, adam, adagrad, sgd or sgd-momentum (adamw)"},
	{"prefetch", ZS_OPT_NUM, 0, 64, NULL, false, 0, "P", "units gathered ahead (1)"},
	{"push-depth", ZS_OPT_NUM, 1, 64, NULL, false, 0, "D", "pushes in flight per trainer (1)"},
	{"replicas", ZS_OPT_NUM, 1, ZS_MAX_REPLICAS, NULL, false, 0, "K", "copies of each shard (1)"},
	{"keep-until-backward", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL,
	 "units stay gathered from forward to backward"},
	{"gpu-mem", ZS_OPT_SIZE, 0, 0, NULL, false, 0, "SIZE", "a GPU's memory: does it fit"},
	{"host-mem", ZS_OPT_SIZE, 0, 0, NULL, false, 0, "SIZE", "a server's memory: does it fit"},
	{"server-gpu", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL,
	 "servers keep their shards on the trainers' GPUs"},
	{"landing-budget", ZS_OPT_SIZE, 1, 0, NULL, false, 0, "SIZE", "a server's (256M)"},
	{"reader-pins", ZS_OPT_NUM, 0, ZS_MAX_READER_PINS, NULL, false, 0, "N",
	 "versions weight readers may pin at once (the job's readers.pins; 0)"},
	CLI_FLAG_JSON,
	{0},
};

/* Parses plan's options into o: 0, -1 after --help, or the exit status of
 * bad usage. */
static int plan_args(int argc, char **argv, struct plan_opts *o)
{
	struct zs_plan_in *in = &o->in;
	struct zs_error err = {0};
	struct cli_args ca;
	const char *v;
	int r;

	if ((r = cli_parse(&cmd_plan, argc, argv, 0, &ca)))
		return r;
#define GET(name) cli_get(&cmd_plan, &ca, name)
#define NUM(name, dst, have)                                              \
	do {                                                                \
		if (GET(name)) {                                            \
			dst = (typeof(dst))cli_get_u64(&cmd_plan, &ca, name, 0); \
			have;                                               \
		}                                                           \
	} while (0)
	o->json = GET("json") != NULL;
	in->server_gpu = GET("server-gpu") != NULL;
	in->keep_until_backward = GET("keep-until-backward") != NULL;
	o->job = GET("job");
	if ((v = GET("params"))) {
		if (parse_count(v, &in->params))
			return cli_usage_err("plan", "--params '%s' is not a count (e.g. 125M, 7.5B)", v);
		o->have_params = true;
	}
	if ((v = GET("largest-unit")) && parse_count(v, &o->largest))
		return cli_usage_err("plan", "--largest-unit '%s' is not a count", v);
	NUM("world", in->world, o->have_world = true);
	NUM("servers", in->servers, (void)0);
	NUM("stage", in->stage, o->have_stage = true);
	NUM("prefetch", in->prefetch, (void)0);
	NUM("push-depth", in->push_depth, (void)0);
	NUM("replicas", in->replicas, o->have_replicas = true);
	NUM("units", in->n_units, (void)0);
	NUM("gpu-mem", o->gpu, (void)0);
	NUM("host-mem", o->host, (void)0);
	NUM("landing-budget", in->landing, (void)0);
	NUM("reader-pins", in->reader_pins, o->have_pins = true);
#undef NUM
	if ((v = GET("dtype"))) {
		if (zs_dtype_parse(v, &in->dtype, &err))
			return cli_usage_err("plan", "--dtype: %s", err.msg);
		o->have_dtype = true;
	}
	if ((v = GET("optimizer"))) {
		if (!strcmp(v, "sgd-momentum")) {
			in->optim = ZS_SGD;
			in->momentum = true;
		} else if (zs_optim_parse(v, &in->optim, &err)) {
			return cli_usage_err("plan", "--optimizer: %s", err.msg);
		}
		o->have_optim = true;
	}
#undef GET
	return 0;
}

/* The frozen shards of job j and its fullest server's bytes as placed. */
static void plan_frozen_of(const struct zs_job *j, struct plan_frozen *fr)
{
	uint64_t *ids;
	uint32_t n_ids = 0;

	for (uint32_t k = 0; k < j->placement.n_shards; k++)
		if (!j->placement.shards[k].copy && zs_shard_marks(&j->spec, &j->placement.shards[k])) {
			fr->elems += j->placement.shards[k].length;
			fr->shards++;
		}
	if (!fr->shards)
		return;
	/* each server of the placement once */
	ids = malloc(j->placement.n_shards * sizeof *ids);
	for (uint32_t k = 0; ids && k < j->placement.n_shards; k++) {
		uint32_t q = 0;
		while (q < n_ids && ids[q] != j->placement.shards[k].server_id)
			q++;
		if (q == n_ids)
			ids[n_ids++] = j->placement.shards[k].server_id;
	}
	for (uint32_t q = 0; q < n_ids; q++) {
		uint64_t on = place_bytes_on(&j->spec, &j->placement, ids[q]);
		fr->placed_max = on > fr->placed_max ? on : fr->placed_max;
	}
	free(ids);
}

/* The job's layout, stage, world, dtype, optimizer and servers into o->in
 * (what the options did not set); *numel: its units' sizes (free it). */
static int plan_from_job(struct ctx *x, struct plan_opts *o, uint64_t **numel,
			 struct plan_frozen *fr)
{
	struct zs_plan_in *in = &o->in;
	struct zs_error err = {0};
	struct zs_job j;
	uint32_t n_srv = 0;
	uint64_t seen[256];
	int rc;

	if ((rc = cli_open_coord(x)))
		return rc;
	if (zs_coord_get_job(x->c, o->job, &j, &err))
		return cli_die("%s", err.msg);
	in->n_units = j.spec.layout.n_units;
	*numel = calloc(in->n_units ? in->n_units : 1, sizeof **numel);
	if (!*numel) {
		zs_job_release(&j);
		return cli_die("out of memory");
	}
	for (uint32_t u = 0; u < in->n_units; u++)
		(*numel)[u] = j.spec.layout.units[u].numel;
	in->unit_numel = *numel;
	if (!o->have_world)
		in->world = j.spec.world_size;
	if (!o->have_stage)
		in->stage = j.spec.stage;
	if (!o->have_replicas)
		in->replicas = j.spec.replicas;
	if (!o->have_pins)
		in->reader_pins = j.spec.reader_pins;
	if (!o->have_dtype)
		in->dtype = j.spec.compute_dtype;
	if (!o->have_optim) {
		in->optim = j.spec.optim.kind;
		in->momentum = j.spec.optim.kind == ZS_SGD && zs_optim_state_arrays(&j.spec.optim) == 1;
	}
	for (uint32_t k = 0; !in->servers && k < j.placement.n_shards; k++) {
		uint32_t q = 0;
		while (q < n_srv && seen[q] != j.placement.shards[k].server_id)
			q++;
		if (q == n_srv && n_srv < 256)
			seen[n_srv++] = j.placement.shards[k].server_id;
	}
	if (!in->servers)
		in->servers = n_srv;
	plan_frozen_of(&j, fr);
	zs_job_release(&j);
	return 0;
}

/* The plan as one JSON object. */
static void plan_json(const struct plan_opts *o, const struct zs_plan *pl,
		      const struct plan_frozen *fr, uint64_t max_p, uint32_t S, bool gpu_ok,
		      bool host_ok)
{
	const struct zs_plan_in *in = &o->in;
	json_t *j = json_pack(
		"{s:I, s:i, s:i, s:i, s:s, s:s, s:i, s:i, s:I, s:i, s:i,"
		" s:{s:f, s:f, s:f, s:f},"
		" s:{s:I, s:I, s:I}, s:{s:I, s:I}}",
		"params", (json_int_t)pl->params, "world", (int)in->world, "servers", (int)S,
		"stage", (int)in->stage, "dtype", zs_dtype_name(in->dtype), "optimizer",
		in->momentum ? "sgd-momentum" : zs_optim_name(in->optim), "prefetch",
		(int)in->prefetch, "units", (int)in->n_units, "largest_unit",
		(json_int_t)pl->largest_unit, "bytes_per_param_b", (int)pl->b,
		"optimizer_bytes_per_param_K", (int)pl->K,
		"zero_paper_per_gpu", "baseline", pl->zero[0], "stage1", pl->zero[1],
		"stage2", pl->zero[2], "stage3", pl->zero[3],
		"trainer", "param_bytes", (json_int_t)pl->trainer_params, "grad_bytes",
		(json_int_t)pl->trainer_grads, "total_bytes", (json_int_t)pl->trainer_total,
		"server", "bytes_per_element", (json_int_t)pl->server_per_elem,
		"total_bytes", (json_int_t)pl->server_total);

	json_object_set_new(json_object_get(j, "server"), "landing_bytes",
			    json_integer((json_int_t)pl->server_landing));
	json_object_set_new(json_object_get(j, "server"), "reader_pins_bytes",
			    json_integer((json_int_t)pl->server_pins));
	json_object_set_new(j, "reader_pins", json_integer(in->reader_pins));
	json_object_set_new(j, "push_depth", json_integer(in->push_depth ? in->push_depth : 1));
	json_object_set_new(j, "replicas", json_integer(in->replicas ? in->replicas : 1));
	if (in->server_gpu)
		json_object_set_new(j, "server_gpu",
				    json_pack("{s:I, s:I, s:I}", "bytes_per_element",
					      (json_int_t)pl->server_dev_per_elem, "total_bytes",
					      (json_int_t)pl->server_dev_total,
					      "gpu_bytes_with_trainer",
					      (json_int_t)zs_plan_gpu_bytes(pl)));
	if (o->gpu)
		json_object_set_new(j, "fits_gpu", json_boolean(gpu_ok));
	if (o->host)
		json_object_set_new(j, "fits_host", json_boolean(host_ok));
	if (fr->shards)
		json_object_set_new(j, "frozen",
				    json_pack("{s:I, s:i, s:I}", "elements", (json_int_t)fr->elems,
					      "shards", (int)fr->shards, "placed_max_server_bytes",
					      (json_int_t)fr->placed_max));
	if (max_p)
		json_object_set_new(j, "max_params",
				    max_p == UINT64_MAX ? json_null() : json_integer((json_int_t)max_p));
	cli_json_print(j);
}

/* The plan's zshard lines: per trainer, per server, frozen shards. */
static void plan_text_zshard(const struct zs_plan_in *in, const struct zs_plan *pl,
			     const struct plan_frozen *fr, uint32_t S)
{
	char b[4][32];
	/* the optimizer's bytes per element: two moments, one array, none */
	const unsigned opt = ZS_OPTIM_ADAM_FAMILY(in->optim) ? 8u
			     : in->optim == ZS_ADAGRAD || in->momentum ? 4u : 0u;

	printf("\nzshard at stage %u: the optimizer state and fp32 master live on the servers\n",
	       in->stage);
	printf("  per trainer (GPU):  %s = parameters %s (%s) + gradients %s (%s)\n",
	       zs_fmt_bytes(pl->trainer_total, b[0], sizeof b[0]),
	       zs_fmt_bytes(pl->trainer_params, b[1], sizeof b[1]),
	       in->stage < 3 || in->keep_until_backward ? "the replica"
							 : "the prefetch window: 1 + prefetch units",
	       zs_fmt_bytes(pl->trainer_grads, b[2], sizeof b[2]),
	       in->stage == 1 ? "every unit until the step's end"
			      : "1 + push depth units: one written, the rest being pushed");
	if (in->server_gpu) {
		printf("  per server (GPU):   %s = %s per owned element x %s elements\n"
		       "                      (fp32 master 4 + optimizer %u + reduction 16 + mean gradient 4 + a push 4 + compute copy %u)\n",
		       zs_fmt_bytes(pl->server_dev_total, b[0], sizeof b[0]),
		       zs_fmt_bytes(pl->server_dev_per_elem, b[1], sizeof b[1]),
		       fmt_count((pl->params * (in->replicas ? in->replicas : 1) + S - 1) / S, b[2],
				 sizeof b[2]),
		       opt, pl->b == 4 ? 0 : pl->b);
		printf("  per server (host):  %s = %s per owned element + landing %s\n"
		       "                      (the copy gathers read %u + clipping's copy 4 + the previous step's %u; pushes in flight)\n"
		       "  per GPU, a trainer and its co-located server: %s\n",
		       zs_fmt_bytes(pl->server_total, b[0], sizeof b[0]),
		       zs_fmt_bytes(pl->server_per_elem, b[1], sizeof b[1]),
		       zs_fmt_bytes(pl->server_landing, b[3], sizeof b[3]), pl->b, pl->b,
		       zs_fmt_bytes(zs_plan_gpu_bytes(pl), b[2], sizeof b[2]));
	} else {
		printf("  per server (host):  %s = %s per owned element x %s elements + landing %s%s\n"
		       "                      (fp32 master 4 + reduction 16 + mean gradient 4 + optimizer %u + compute copy %u\n"
		       "                      + the previous step's copy %u, for a lost rank's redo, at any world size;\n"
		       "                      landing: pushes in flight, --landing-budget)\n",
		       zs_fmt_bytes(pl->server_total, b[0], sizeof b[0]),
		       zs_fmt_bytes(pl->server_per_elem, b[1], sizeof b[1]),
		       fmt_count((pl->params * (in->replicas ? in->replicas : 1) + S - 1) / S, b[2],
				 sizeof b[2]),
		       zs_fmt_bytes(pl->server_landing, b[3], sizeof b[3]),
		       in->reader_pins ? " + readers' pins" : "", opt, pl->b == 4 ? 0 : pl->b, pl->b);
	}
	if (in->reader_pins)
		printf("  readers' pins: %u versions pinned at once add %s per server (each a compute\n"
		       "  copy, %u bytes per owned element); a committed checkpoint pinned is read\n"
		       "  from its records on disk and adds nothing\n",
		       in->reader_pins, zs_fmt_bytes(pl->server_pins, b[0], sizeof b[0]), pl->b);
	if (fr->shards)
		printf("  frozen: %s elements in %u shards hold their fp32 master (and copy) alone,\n"
		       "  no reduction or optimizer state: as placed now, the fullest server holds %s\n"
		       "  (+ landing), less than the per-element count above\n",
		       fmt_count(fr->elems, b[0], sizeof b[0]), fr->shards,
		       zs_fmt_bytes(fr->placed_max, b[1], sizeof b[1]));
}

/* The plan as text. */
static void plan_text(const struct plan_opts *o, const struct zs_plan *pl,
		      const struct plan_frozen *fr, uint64_t max_p, uint32_t S, bool gpu_ok,
		      bool host_ok)
{
	static const char *stage_names[4] = {"baseline (DDP)", "stage 1 (P_os)",
					     "stage 2 (P_os+g)", "stage 3 (P_os+g+p)"};
	const struct zs_plan_in *in = &o->in;
	char b[2][32];

	printf("plan: %s parameters in %u units (largest %s), %u trainers, %u servers, ZeRO stage %u, compute %s, %s, prefetch %u%s",
	       fmt_count(pl->params, b[0], sizeof b[0]), in->n_units,
	       fmt_count(pl->largest_unit, b[1], sizeof b[1]), in->world, S, in->stage,
	       zs_dtype_name(in->dtype), in->momentum ? "sgd-momentum" : zs_optim_name(in->optim),
	       in->prefetch, in->keep_until_backward ? ", kept until backward" : "");
	if (in->replicas > 1)
		printf(", %u copies of each shard", in->replicas);
	printf("\n");
	printf("\nthe ZeRO paper's accounting, per GPU (%u + %u + %u bytes per parameter):\n", pl->b,
	       pl->b, pl->K);
	for (int k = 0; k < 4; k++)
		printf("  %-20s %12s%s\n", stage_names[k],
		       zs_fmt_bytes((uint64_t)pl->zero[k], b[0], sizeof b[0]),
		       k == (int)in->stage ? "   <- this stage" : "");
	plan_text_zshard(in, pl, fr, S);
	printf("  not counted: activations and the trainer's process (libraries, connections;\n"
	       "  about 20 MiB resident for the example here), the servers' process\n");
	if (o->gpu)
		printf("\nGPU %s: %s (%s needed)\n", zs_fmt_bytes(o->gpu, b[0], sizeof b[0]),
		       gpu_ok ? "fits" : "DOES NOT FIT",
		       zs_fmt_bytes(zs_plan_gpu_bytes(pl), b[1], sizeof b[1]));
	if (o->host)
		printf("%shost %s per server: %s (%s needed)\n", o->gpu ? "" : "\n",
		       zs_fmt_bytes(o->host, b[0], sizeof b[0]), host_ok ? "fits" : "DOES NOT FIT",
		       zs_fmt_bytes(pl->server_total, b[1], sizeof b[1]));
	if (max_p == UINT64_MAX)
		printf("largest model in these limits: no bound below 2^50 parameters\n");
	else if (max_p)
		printf("largest model in these limits (%u uniform units): %s parameters\n",
		       in->n_units, fmt_count(max_p, b[0], sizeof b[0]));
}

static int c_plan(struct ctx *x, int argc, char **argv)
{
	struct plan_opts o = {.in = {.n_units = 32, .stage = 3, .dtype = ZS_BF16,
				     .optim = ZS_ADAMW, .prefetch = 1}};
	struct plan_frozen fr = {0};
	struct zs_error err = {0};
	struct zs_plan pl;
	uint64_t *numel = NULL, max_p;
	uint32_t S;
	bool gpu_ok, host_ok;
	int rc;

	if ((rc = plan_args(argc, argv, &o)))
		return rc < 0 ? 0 : rc;
	if (!o.job == !o.have_params)
		return cli_usage_err("plan", "give --params N or --job NAME (one of them)");
	if (o.job) {
		if ((rc = plan_from_job(x, &o, &numel, &fr)))
			return rc;
	} else {
		if (!o.have_world)
			return cli_usage_err("plan", "give --world N (data-parallel trainers)");
		if (o.largest) {
			if (o.largest > o.in.params)
				return cli_usage_err("plan", "--largest-unit is larger than --params");
			o.in.n_units = (uint32_t)((o.in.params + o.largest - 1) / o.largest);
		}
	}
	rc = zs_plan_compute(&o.in, &pl, &err);
	free(numel);
	if (rc)
		return cli_usage_err("plan", "%s", err.msg);
	max_p = (o.gpu || o.host) && !o.in.unit_numel ? zs_plan_max_params(&o.in, o.gpu, o.host) : 0;
	S = o.in.servers ? o.in.servers : o.in.world;
	gpu_ok = !o.gpu || zs_plan_gpu_bytes(&pl) <= o.gpu;
	host_ok = !o.host || pl.server_total <= o.host;
	if (o.json)
		plan_json(&o, &pl, &fr, max_p, S, gpu_ok, host_ok);
	else
		plan_text(&o, &pl, &fr, max_p, S, gpu_ok, host_ok);
	return 0;
}

const struct cmd cmd_plan = {"plan", "(--params N --world N | --job JOB) [FLAGS] [--json]",
	 "The memory a sharding setup needs, before running it: the ZeRO paper's\n"
	 "accounting per GPU for every stage (b + b + K bytes per parameter, K = 12\n"
	 "for mixed-precision Adam), and zshard's split: what each trainer holds\n"
	 "(parameters and gradients by the stage and the prefetch window) and\n"
	 "each server (master, reduction, optimizer state, copy; its landing budget\n"
	 "for pushes in flight, 256M unless given). With --job, the\n"
	 "job's own units, stage, world size, dtype and servers. With --gpu-mem\n"
	 "and --host-mem: whether it fits, and the largest model that would.\n"
	 "--server-gpu: the servers keep their shards on the GPU they share with a\n"
	 "trainer (zshard-server --gpu): their device share counts against --gpu-mem.\n"
	 "Counts take k, M, B/G, T (7.5B); sizes K, M, G, T (80G, powers of 1024).\n"
	 "Defaults: stage 3, bf16, adamw, prefetch 1, push depth 1, 32 uniform units.\n"
	 "Runs without a coordinator unless --job is given.", c_plan, plan_flags};
