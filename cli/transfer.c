/*
 * transfer.c - zshardctl export and import: a job's parameters (and
 * optimizer state) to and from one safetensors file, over the data plane.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/dtype.h"
#include "base/util.h"
#include "cli/buffers.h"
#include "cli/jobio.h"
#include "storage/safetensors.h"

/* ------------------------------------------------------- export, import */

static void show_progress(uint64_t done, uint64_t total)
{
	if (isatty(2))
		fprintf(stderr, "\rwriting %5.1f%%", total ? 100.0 * (double)done / (double)total : 100.0);
	if (done == total && isatty(2))
		fputc('\n', stderr);
}

/* What an export gathers: the units' arrays read, the file's tensors
 * pointing into them (and the model's buffers'), the step they are of. */
struct export {
	const struct zs_job *j;
	bool bare;
	float **arr;
	uint32_t n_arr;
	struct st_tensor *t;
	uint32_t nt;
	uint64_t version;
};

/* One more tensor of the file: te's elements of buf, named name. */
static struct st_tensor *export_tensor(struct export *ex, const char *name,
				       const struct zs_tensor *te, float *buf)
{
	struct st_tensor *o = &ex->t[ex->nt++];

	snprintf(o->name, sizeof o->name, "%s", name);
	o->dtype = ZS_F32;
	o->ndim = te->ndim;
	memcpy(o->shape, te->shape, sizeof o->shape);
	o->data = buf + te->offset;
	o->bytes = te->numel * 4;
	return o;
}

/* Array a of unit u read into a buffer of its own and named in the file:
 * 0, or 1 after saying why (every unit must be at the first one's step). */
static int export_array(struct export *ex, struct jobio *io, uint32_t u, uint32_t a)
{
	const struct zs_job *j = ex->j;
	const struct zs_unit *un = &j->spec.layout.units[u];
	struct zs_error err = {0};
	float *buf = malloc(un->numel * 4);
	char name[sizeof ex->t[0].name];
	uint64_t v;

	ex->arr[ex->n_arr++] = buf;
	if (!buf)
		return cli_die("out of memory");
	if (jobio_read(io, u, (int)a, buf, &v, &err))
		return cli_die("%s", err.msg);
	if (u == 0 && a == 0)
		ex->version = v;
	else if (v != ex->version)
		return cli_die("the job is mid-step (units at steps %llu and %llu): export between steps",
			       (unsigned long long)ex->version, (unsigned long long)v);
	for (uint32_t k = 0; k < un->n_tensors; k++) {
		const struct zs_tensor *te = &un->tensors[k];
		snprintf(name, sizeof name, "%s%s%s%s", ex->bare ? "" : un->name,
			 ex->bare ? "" : ".", te->name, zs_optim_state_suffix(j->spec.optim.kind, a));
		for (uint32_t q = 0; ex->bare && q < ex->nt; q++)
			if (!strcmp(ex->t[q].name, name))
				return cli_die("--bare-names: two units have a tensor '%s'; export "
					       "without it", name);
		export_tensor(ex, name, te, buf);
	}
	/* a tied parameter under each of its state_dict names */
	for (uint32_t i = 0; ex->bare && a == 0 && i < j->spec.layout.n_aliases; i++) {
		const struct zs_alias *al = &j->spec.layout.aliases[i];
		if (al->unit == u)
			export_tensor(ex, al->name, &un->tensors[al->tensor], buf);
	}
	return 0;
}

/* A PyTorch model's persistent buffers of the export's step, as the file's
 * last tensors (nbuf says which, or why none): 0, or 1 after saying why. */
static int export_buffers(struct ctx *x, struct export *ex, const char *job, const char *out,
			  struct cli_buffers *bufs, char *nbuf, size_t nlen)
{
	struct zs_error err = {0};
	struct st_tensor *g;

	if (!x->c && cli_open_coord(x))
		return 1; /* it said why */
	if (cli_buffers_at(x->c, job, ex->version, bufs, &err))
		return cli_die("the model's buffers: %s", err.msg);
	if (!bufs->found) {
		if (ex->j->spec.buffers) /* a model without any is not told of them */
			fprintf(stderr, "note: the model's %u persistent buffers are not in %s: %s\n",
				ex->j->spec.buffers, out, bufs->why);
		return 0;
	}
	if (!(g = realloc(ex->t, (ex->nt + bufs->st.n + 1) * sizeof *g)))
		return cli_die("out of memory");
	ex->t = g;
	for (uint32_t i = 0; i < bufs->st.n; i++) {
		for (uint32_t q = 0; q < ex->nt; q++)
			if (!strcmp(ex->t[q].name, bufs->st.t[i].name))
				return cli_die("%s: buffer '%s' has a parameter's name", bufs->what,
					       bufs->st.t[i].name);
		ex->t[ex->nt++] = bufs->st.t[i];
	}
	snprintf(nbuf, nlen, "%u from checkpoint %llu", bufs->st.n, (unsigned long long)bufs->id);
	return 0;
}

/* With --optimizer: the job's optimizer groups as JSON (metadata
 * "optimizer_groups"): each group's values as the spec created them
 * (lr, weight_decay, beta1, beta2, eps, momentum) and its tensors' names as
 * the file names them, as a torch optimizer's param_groups would (zshard.dcp
 * writes them where get_state_dict puts them). NULL when out of memory. */
static char *groups_json(const struct export *ex)
{
	const struct zs_optim *o = &ex->j->spec.optim;
	json_t *a = json_array();
	char *s;

	for (uint32_t g = 0; a && g < (o->n_groups ? o->n_groups : 1); g++) {
		const struct zs_hp *h = &o->groups[g];
		json_t *names = json_array();
		for (uint32_t u = 0; names && u < ex->j->spec.layout.n_units; u++) {
			const struct zs_unit *un = &ex->j->spec.layout.units[u];
			for (uint32_t k = 0; k < un->n_tensors; k++) {
				char n[2 * ZS_NAME_MAX + 2];
				if (un->tensors[k].group != g)
					continue;
				if (ex->bare)
					snprintf(n, sizeof n, "%s", un->tensors[k].name);
				else
					snprintf(n, sizeof n, "%s.%s", un->name, un->tensors[k].name);
				json_array_append_new(names, json_string(n));
			}
		}
		json_array_append_new(a, json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:o}", "lr", h->lr,
						   "weight_decay", h->weight_decay, "beta1",
						   h->beta1, "beta2", h->beta2, "eps", h->eps,
						   "momentum", h->momentum, "params", names));
	}
	s = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return s;
}

static int c_export(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	const char *job, *out;
	int with_opt, rc = 1, r;
	struct cli_args ca;
	struct jobio *io = NULL;
	struct export ex = {0};
	uint32_t arrays, total = 0;
	char step[32], osteps[32], nbuf[64] = "none";
	struct cli_buffers bufs = {0};

	if ((r = cli_parse(&cmd_export, argc, argv, 1, &ca)))
		return r < 0 ? 0 : r;
	job = ca.pos[0];
	out = cli_get(&cmd_export, &ca, "out");
	with_opt = cli_get(&cmd_export, &ca, "optimizer") != NULL;
	ex.bare = cli_get(&cmd_export, &ca, "bare-names") != NULL;
	if (!job || !out)
		return cli_usage_err("export", "want a job and --out FILE");
	if (!x->coordinator)
		return cli_die(CLI_NO_COORDINATOR);
	if (jobio_open(x->coordinator, job, x->timeout_ms, &io, &err))
		return cli_die("%s", err.msg);
	ex.j = jobio_job(io);
	arrays = 1 + (with_opt ? zs_optim_state_arrays(&ex.j->spec.optim) : 0);
	ex.arr = calloc(ex.j->spec.layout.n_units * arrays, sizeof *ex.arr);
	for (uint32_t u = 0; u < ex.j->spec.layout.n_units; u++)
		total += ex.j->spec.layout.units[u].n_tensors;
	ex.t = calloc(total * arrays + ex.j->spec.layout.n_aliases + 1, sizeof *ex.t);
	if (!ex.arr || !ex.t) {
		cli_die("out of memory");
		goto out;
	}
	for (uint32_t u = 0; u < ex.j->spec.layout.n_units; u++)
		for (uint32_t a = 0; a < arrays; a++)
			if (export_array(&ex, io, u, a))
				goto out;
	snprintf(step, sizeof step, "%llu", (unsigned long long)ex.version);
	/* the optimizer's own count (an imported state's steps first): what
	 * import --optimizer and torch's "step" take */
	snprintf(osteps, sizeof osteps, "%llu",
		 (unsigned long long)(ex.j->spec.optim.steps_taken + ex.version));
	if (ex.bare && export_buffers(x, &ex, job, out, &bufs, nbuf, sizeof nbuf))
		goto out;
	{
		char *groups = with_opt ? groups_json(&ex) : NULL;
		const char *meta[14] = {"format", "zshard", "job", job, "step", step,
					"optimizer", zs_optim_name(ex.j->spec.optim.kind),
					"optimizer_steps", osteps};
		uint32_t n_meta = 5;
		if (ex.bare) {
			meta[2 * n_meta] = "buffers";
			meta[2 * n_meta++ + 1] = nbuf;
		}
		if (groups) {
			meta[2 * n_meta] = "optimizer_groups";
			meta[2 * n_meta++ + 1] = groups;
		}
		if (with_opt && !groups)
			r = cli_die("out of memory");
		else if (st_write(out, ex.t, ex.nt, meta, n_meta, show_progress, &err))
			r = cli_die("%s", err.msg);
		else
			r = 0;
		free(groups);
		if (r)
			goto out;
	}
	printf("exported job %s at step %llu: %u tensors to %s%s%s%s\n", job,
	       (unsigned long long)ex.version, ex.nt, out, ex.bare ? " (buffers: " : "",
	       ex.bare ? nbuf : "", ex.bare ? ")" : "");
	rc = 0;
out:
	for (uint32_t i = 0; i < ex.n_arr; i++)
		free(ex.arr[i]);
	free(ex.arr);
	free(ex.t);
	cli_buffers_free(&bufs);
	jobio_close(io);
	return rc;
}

/* A tensor of the job's layout in f: UNIT.TENSOR, TENSOR (export
 * --bare-names) or one of its aliases, each with suffix (an optimizer
 * array's: ".exp_avg", ...); its name in name. NULL if none. */
static const struct st_tensor *find_tensor(const struct st_file *f, const struct zs_job *j,
					   uint32_t u, uint32_t k, const char *suffix, char *name,
					   size_t cap)
{
	const struct zs_unit *un = &j->spec.layout.units[u];
	const struct zs_tensor *te = &un->tensors[k];
	const struct st_tensor *s;

	snprintf(name, cap, "%s.%s%s", un->name, te->name, suffix);
	if ((s = st_find(f, name)))
		return s;
	snprintf(name, cap, "%s%s", te->name, suffix);
	if ((s = st_find(f, name)))
		return s;
	for (uint32_t i = 0; i < j->spec.layout.n_aliases; i++) {
		const struct zs_alias *al = &j->spec.layout.aliases[i];
		/* a tied parameter under another of its names */
		snprintf(name, cap, "%s%s", al->name, suffix);
		if (al->unit == u && al->tensor == k && (s = st_find(f, name)))
			return s;
	}
	snprintf(name, cap, "%s.%s%s", un->name, te->name, suffix);
	return NULL;
}

/* A shape as [d0, d1, ...] ([] for a scalar). */
static void shape_str(const uint64_t *shape, uint32_t ndim, char *out, size_t cap)
{
	size_t n = 0;

	n += (size_t)snprintf(out, cap, "[");
	for (uint32_t d = 0; d < ndim && n < cap; d++)
		n += (size_t)snprintf(out + n, cap - n, "%s%llu", d ? ", " : "",
				      (unsigned long long)shape[d]);
	if (n < cap)
		snprintf(out + n, cap - n, "]");
}

/* Unit u's tensors with suffix from f into out (numel floats, f32): every
 * one with the job's shape; a frozen tensor's optimizer array may be
 * absent (zeros: torch keeps none). Says why and returns -1 if not. */
static int read_unit(const struct st_file *f, const char *in, const struct zs_job *j, uint32_t u,
		     const char *suffix, float *out)
{
	const struct zs_unit *un = &j->spec.layout.units[u];

	for (uint32_t k = 0; k < un->n_tensors; k++) {
		const struct zs_tensor *te = &un->tensors[k];
		char name[2 * ZS_NAME_MAX + 48];
		const struct st_tensor *s = find_tensor(f, j, u, k, suffix, name, sizeof name);
		if (!s && *suffix && te->frozen) {
			memset(out + te->offset, 0, te->numel * 4);
			continue;
		}
		if (!s) { /* named as the model names it, not by the job's unit */
			cli_die("%s has no tensor '%s%s' (the job's layout needs it)", in, te->name,
				suffix);
			return -1;
		}
		if (s->ndim != te->ndim || memcmp(s->shape, te->shape, te->ndim * sizeof te->shape[0])) {
			char a[160], b[160];
			shape_str(s->shape, s->ndim, a, sizeof a);
			shape_str(te->shape, te->ndim, b, sizeof b);
			cli_die("tensor '%s' in %s has shape %s; the job's is %s", name, in, a, b);
			return -1;
		}
		zs_convert_to_f32(out + te->offset, s->data, s->dtype, te->numel);
	}
	return 0;
}

/* With --optimizer: the file's optimizer state must be of the job's
 * optimizer and of the step its spec says ("steps_taken"). */
static int state_fits(const struct st_file *f, const char *in, const struct zs_job *j)
{
	const char *kind = st_meta(f, "optimizer");
	const char *steps = st_meta(f, "optimizer_steps");
	unsigned long long n;
	char *end;

	if (!zs_optim_state_arrays(&j->spec.optim)) {
		cli_die("job %s's optimizer (%s) keeps no state: import without --optimizer",
			j->spec.name, zs_optim_name(j->spec.optim.kind));
		return -1;
	}
	if (kind && strcmp(kind, zs_optim_name(j->spec.optim.kind))) {
		cli_die("%s holds %s state; job %s's optimizer is %s", in, kind, j->spec.name,
			zs_optim_name(j->spec.optim.kind));
		return -1;
	}
	if (!steps) {
		cli_die("%s does not say at which optimizer step its state was taken (metadata 'optimizer_steps')",
			in);
		return -1;
	}
	errno = 0;
	n = strtoull(steps, &end, 10);
	if (errno || *end || end == steps || n == 0) {
		cli_die("%s: metadata 'optimizer_steps' is '%s', not a step count of at least 1", in,
			steps);
		return -1;
	}
	if (n != j->spec.optim.steps_taken) {
		cli_die("%s's optimizer state is at step %llu; job %s was created with optimizer steps_taken %llu: create it with \"steps_taken\": %llu",
			in, n, j->spec.name, (unsigned long long)j->spec.optim.steps_taken, n);
		return -1;
	}
	return 0;
}

static int c_import(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	const char *job, *in;
	struct jobio *io = NULL;
	const struct zs_job *j;
	struct st_file f = {0};
	float **units = NULL;
	uint32_t n_units = 0, arrays = 1;
	int with_opt, rc = 1, r;
	struct cli_args ca;

	if ((r = cli_parse(&cmd_import, argc, argv, 2, &ca)))
		return r < 0 ? 0 : r;
	job = ca.pos[0];
	in = ca.pos[1];
	with_opt = cli_get(&cmd_import, &ca, "optimizer") != NULL;
	if (!job || !in)
		return cli_usage_err("import", "want a job and a file");
	if (!x->coordinator)
		return cli_die(CLI_NO_COORDINATOR);
	if (st_open(in, &f, &err))
		return cli_die("%s", err.msg);
	if (jobio_open(x->coordinator, job, x->timeout_ms, &io, &err)) {
		st_close(&f);
		return cli_die("%s", err.msg);
	}
	j = jobio_job(io);
	if (with_opt && state_fits(&f, in, j))
		goto out;
	arrays = 1 + (with_opt ? zs_optim_state_arrays(&j->spec.optim) : 0);
	n_units = j->spec.layout.n_units;
	units = calloc((size_t)n_units * arrays + 1, sizeof *units);
	if (!units) {
		cli_die("out of memory");
		goto out;
	}
	/* check and convert everything before uploading anything */
	for (uint32_t a = 0; a < arrays; a++)
		for (uint32_t u = 0; u < n_units; u++) {
			float **buf = &units[a * n_units + u];
			if (!(*buf = malloc(j->spec.layout.units[u].numel * 4 + 4))) {
				cli_die("out of memory");
				goto out;
			}
			if (read_unit(&f, in, j, u, zs_optim_state_suffix(j->spec.optim.kind, a), *buf))
				goto out;
		}
	/* the parameters first: a shard takes its optimizer state after them */
	for (uint32_t a = 0; a < arrays; a++)
		for (uint32_t u = 0; u < n_units; u++)
			if (a ? jobio_init_state(io, u, (int)a, units[a * n_units + u], &err)
			      : jobio_init(io, u, units[u], &err)) {
				cli_die("unit '%s'%s: %s", j->spec.layout.units[u].name,
					a ? " (optimizer state)" : "", err.msg);
				goto out;
			}
	printf("imported %s into job %s (%u units%s)\n", in, job, n_units,
	       with_opt ? ", with the optimizer's state" : "");
	rc = 0;
out:
	for (uint32_t i = 0; units && i < n_units * arrays; i++)
		free(units[i]);
	free(units);
	jobio_close(io);
	st_close(&f);
	return rc;
}

static const struct zs_opt export_flags[] = {
	{"out", ZS_OPT_PATH, 0, 0, NULL, false, 0, "FILE", "the safetensors file to write"},
	{"optimizer", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL, "the optimizer's state too"},
	{"bare-names", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL,
	 "tensors named TENSOR, not UNIT.TENSOR"},
	{0},
};

const struct cmd cmd_export = {
	"export",
	"JOB --out FILE.safetensors [--optimizer] [--bare-names]",
	"Writes the job's fp32 parameters (and with --optimizer its optimizer\n"
	"state) as one safetensors file, tensors named UNIT.TENSOR, or with\n"
	"--bare-names TENSOR (a PyTorch job's tensors carry their state_dict\n"
	"names, a tied parameter each of its names, and the model's\n"
	"persistent buffers as rank 0 checkpointed them at the same step:\n"
	"the file loads with load_state_dict(strict=True); without a\n"
	"checkpoint of that step the buffers are left out, and it says so).\n"
	"Run it between steps: a job caught mid-step is refused.",
	c_export,
	export_flags,
};

static const struct zs_opt import_flags[] = {
	{"optimizer", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL, "the optimizer's state too"},
	{0},
};

const struct cmd cmd_import = {
	"import",
	"JOB FILE.safetensors [--optimizer]",
	"Uploads a safetensors file as the initial parameters of a job that\n"
	"has not trained yet: every UNIT.TENSOR of the job's layout must be\n"
	"there (or TENSOR alone, as export --bare-names writes it, or one of\n"
	"the tensor's aliases) with its\n"
	"shape (F32, BF16 or F16). With --optimizer, the optimizer's state too\n"
	"(TENSOR.exp_avg and .exp_avg_sq, .momentum_buffer or .sum, as export\n"
	"--optimizer writes them; a frozen tensor's may be absent), of the step\n"
	"the file's metadata 'optimizer_steps' says, which must be the job\n"
	"spec's optimizer \"steps_taken\". Nothing is uploaded unless the whole\n"
	"file fits the job.",
	c_import,
	import_flags,
};
