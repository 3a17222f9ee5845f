/*
 * charlm.c - a character-level language model trained through zshard.
 *
 * The model: the previous CTX bytes -> embeddings (256 x D) concatenated ->
 * tanh(W0 x + b0) -> --depth more tanh(W h + b) of width --hidden ->
 * softmax(Wh h + bh) over the next byte. By default (depth 1, width 256,
 * one layer per unit) four units (embed, h0, h1, head) as in
 * examples/charlm.json; --print-spec writes the job spec of any other
 * shape. Matrix products through OpenBLAS. Text: a file every Debian
 * machine has.
 *
 * Biases are in an optimizer group without weight decay, and every step
 * sets its learning rate (warmup, then cosine decay: --schedule).
 *
 * Through the service, with libzshard's step driver (the ZeRO stage from the
 * job, --prefetch units gathered ahead, bounded by --max-live-bytes):
 *   charlm [--coordinator ADDR] --job charlm --rank R [--steps N] [--batch B]
 *          [--transport auto|tcp|shm] [--print-every K] [--dump FILE]
 * Rank 0 uploads the initial parameters, unless the job was restored from a
 * checkpoint (zshardctl checkpoint restore): then every rank resumes at the
 * checkpoint's step. --dump writes the final ones.
 *
 * Without the service, the same R ranks in one process, their gradients
 * reduced in rank order and the same optimizer applied (the oracle):
 *   charlm --reference --spec examples/charlm.json --world R --steps N --dump FILE
 * With --worlds S:N[,S:N...] the reference's world is N ranks from step S
 * on (a job resized: zshardctl job resize).
 */
#include <cblas.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "math/optim.h"
#include "model/spec_json.h"
#include <zshard.h>

#include "examples/charlm_model.h"

/* micro-batches per step (--micro-batches): all but the last pushed as
 * partial (gradient accumulation), each a batch of its own */
static int MB = 1;
/* --exit-on-resume: a rollback ends this process (status 3) rather than
 * resume in it, as a script whose exception ends it does; its supervisor
 * starts it again, and it resumes at its join */
static int exit_on_resume;
/* --lag-ms: this rank sleeps so long each step before its backward pushes
 * (the others end their steps that much earlier: a fault test's window) */
static int lag_ms;
/* --die-after-push S:U: a process that began before step S kills itself
 * (SIGKILL) 300 ms after posting unit U's last push of step S, its other
 * units' pushes of S not sent: a fault test's exact point (a replacement,
 * which begins at S, does not) */
static long long die_step = -1;
static int die_unit = -1;

/* ------------------------------------------------------ without service */

/* The spec's k-th tensor, counting through its units in order. */
static const struct zs_tensor *spec_tensor(const struct zs_job_spec *s, int k)
{
	for (uint32_t u = 0; u < s->layout.n_units; u++) {
		if ((uint32_t)k < s->layout.units[u].n_tensors)
			return &s->layout.units[u].tensors[k];
		k -= (int)s->layout.units[u].n_tensors;
	}
	fprintf(stderr, "charlm: the spec has fewer tensors than the model\n");
	exit(1);
}

/* --worlds: the reference's world size from each step on */
static struct { uint64_t step; unsigned world; } worlds[8];
static int n_worlds;

static int parse_worlds(const char *s)
{
	for (n_worlds = 0; *s && n_worlds < 8; n_worlds++) {
		char *end;
		worlds[n_worlds].step = strtoull(s, &end, 10);
		if (*end != ':')
			return -1;
		worlds[n_worlds].world = (unsigned)strtoul(end + 1, &end, 10);
		if (!worlds[n_worlds].world || (*end && *end != ','))
			return -1;
		if (n_worlds && worlds[n_worlds].step <= worlds[n_worlds - 1].step)
			return -1;
		s = *end ? end + 1 : end;
	}
	return *s ? -1 : 0;
}

static unsigned world_at(unsigned R, uint64_t t)
{
	for (int i = 0; i < n_worlds && worlds[i].step <= t; i++)
		R = worlds[i].world;
	return R;
}

static int reference(const char *spec_path, unsigned R0, uint64_t steps, int B,
		     const struct data *d, const char *out)
{
	struct zs_job_spec spec;
	struct zs_error err = {0};
	float *p[MAXL], *m[MAXL], *v[MAXL], *acc[MAXL], *g[MAXL];
	struct zs_bacc *sum[MAXL]; /* the servers' reduction (math/bsum.h) */
	struct work w;

	if (zs_spec_load(spec_path, &spec, &err) || zs_job_spec_normalize(&spec, &err)) {
		fprintf(stderr, "charlm: %s\n", err.msg);
		return 1;
	}
	work_init(&w, B);
	for (int u = 0; u < NL; u++) {
		p[u] = malloc(sizeof(float) * layer_numel(u));
		m[u] = calloc(layer_numel(u), sizeof(float));
		v[u] = calloc(layer_numel(u), sizeof(float));
		acc[u] = malloc(sizeof(float) * layer_numel(u));
		sum[u] = calloc(layer_numel(u), sizeof *sum[u]);
		g[u] = malloc(sizeof(float) * layer_numel(u));
	}
	init_params(p);
	for (uint64_t t = 0; t < steps; t++) {
		double loss = 0;
		unsigned R = world_at(R0, t);
		for (unsigned r = 0; r < R; r++) {
			sample(&w, d, r, t);
			for (int u = 0; u < NL; u++)
				loss += forward(u, p[u], &w);
			for (int u = NL - 1; u >= 0; u--) {
				backward(u, p[u], &w, g[u]);
				zs_bsum_deposit(sum[u], g[u], ZS_F32, layer_numel(u));
			}
		}
		/* layer by layer, tensor by tensor (the spec's, in order: a
		 * layer is its weight, then its bias), each with its group's
		 * values of step t */
		for (int u = 0, k = 0; u < NL; u++) {
			unsigned long long off = 0, n;
			zs_bsum_finish(acc[u], sum[u], R, layer_numel(u));
			for (; off < layer_numel(u); off += n, k++) {
				const struct zs_tensor *te = spec_tensor(&spec, k);
				const struct zs_hp *h = &spec.optim.groups[te->group];
				struct zs_optim_step st = {spec.optim.kind, h->lr * lr_factor(t),
							   h->beta1, h->beta2, h->eps,
							   h->weight_decay, h->momentum, t + 1};
				n = te->numel;
				zs_optim_apply(&st, p[u] + off, m[u] + off, v[u] + off, acc[u] + off, n);
			}
		}
		if (t == 0 || t + 1 == steps)
			printf("reference step %llu loss %.4f\n", (unsigned long long)t, loss / R);
	}
	if (out)
		dump(out, p);
	for (int u = 0; u < NL; u++) {
		free(p[u]);
		free(m[u]);
		free(v[u]);
		free(acc[u]);
		free(sum[u]);
		free(g[u]);
	}
	work_free(&w);
	zs_job_spec_release(&spec);
	return 0;
}

/* ------------------------------------------------------- through zshard */

/* Points lp[l] at layer l's part of unit u's buffer (layers of u only). */
static void layer_ptrs(int u, const void *unit, float **lp)
{
	unsigned long long off = 0;
	for (int l = first_layer(u); l < first_layer(u + 1); l++) {
		lp[l] = (float *)unit + off;
		off += layer_numel(l);
	}
}

/* One line per step of the step driver's report (see zs_last_step). */
static void log_step(FILE *f, zs_trainer *t)
{
	struct zs_step_stats s;
	if (!f || zs_last_step(t, &s))
		return;
	fprintf(f, "%llu %u %u %.9f %.9f %.9f %.9f %.9f %llu %llu %llu %llu %llu\n", s.step,
		s.stage, s.prefetch, s.seconds, s.compute_seconds, s.gather_wait_seconds,
		s.push_wait_seconds, s.control_seconds, s.bytes_gathered, s.bytes_pushed,
		s.peak_param_bytes, s.peak_grad_bytes, s.rss_peak_bytes);
}

/*
 * Gradient accumulation (--micro-batches K > 1): the step's first K - 1
 * micro-batches, each a forward and backward over the units gathered
 * apart from the step driver, its gradient pushed partial (each waited,
 * so that a unit's go in in order); then the last one's batch is sampled
 * for the step driver. A micro-batch's data depends on rank, step and
 * index only. pu, gu: NU unit buffers each.
 */
static int partial_passes(zs_trainer *t, uint64_t step, struct work *w, const struct data *d,
			  float **pu, float **gu)
{
	unsigned rank = zs_trainer_rank(t);
	float *lp[MAXL], *lg[MAXL];
	int rc = 0, NU = n_units();

	for (int mb = 0; mb + 1 < MB && !rc; mb++) {
		sample(w, d, rank, step * (uint64_t)MB + (uint64_t)mb);
		for (int u = 0; u < NU && !rc; u++) {
			zs_op *op;
			if (!(rc = zs_gather(t, (unsigned)u, step, pu[u], &op)))
				rc = zs_op_wait(op, -1);
			layer_ptrs(u, pu[u], lp);
			layer_ptrs(u, gu[u], lg);
		}
		for (int l = 0; !rc && l < NL; l++)
			forward(l, lp[l], w);
		for (int l = NL - 1; !rc && l >= 0; l--)
			backward(l, lp[l], w, lg[l]);
		for (int u = NU - 1; u >= 0 && !rc; u--) {
			zs_op *op;
			if (!(rc = zs_push_partial(t, (unsigned)u, step, gu[u], &op)))
				rc = zs_op_wait(op, -1);
		}
	}
	if (!rc)
		sample(w, d, rank, step * (uint64_t)MB + (uint64_t)MB - 1);
	return rc;
}

/* compute: 0 runs the step driver alone (gathers and pushes of zero
 * gradients, no model): the step's communication without its compute */
static int train(zs_trainer *t, uint64_t steps, int B, int print_every,
		 const struct data *d, const char *out, const struct zs_policy *pol, int compute,
		 FILE *slog)
{
	unsigned rank = zs_trainer_rank(t);
	int NU = n_units();
	unsigned long long start = 0;
	int rc = 0, resumes = 0, fresh;
	struct work w;
	double t0 = now(), first_loss = -1, loss = 0;
	float *pu[MAXL] = {0}, *gu[MAXL] = {0}; /* the micro-batches' units */

	if ((int)zs_trainer_units(t) != NU) {
		fprintf(stderr, "charlm: the job has %u units, this model %d (--layers-per-unit %d)\n",
			zs_trainer_units(t), NU, LPU);
		return 1;
	}
	for (int u = 0; u < NU; u++)
		if (zs_unit_numel(t, (unsigned)u) != unit_numel(u) || zs_unit_dtype(t, (unsigned)u) != 1) {
			fprintf(stderr, "charlm: unit %d of the job is %llu elements of dtype %d; the model needs %llu f32 (--hidden %d, --layers-per-unit %d)\n",
				u, zs_unit_numel(t, (unsigned)u), zs_unit_dtype(t, (unsigned)u),
				unit_numel(u), H, LPU);
			return 1;
		}
	/* the spec's values, before this trainer sets any: the schedule
	 * scales each group's lr */
	struct zs_hparams base[64];
	double clip;
	unsigned n_groups = zs_trainer_groups(t);
	if (n_groups > 64) {
		fprintf(stderr, "charlm: the job has %u optimizer groups (at most 64 here)\n", n_groups);
		return 1;
	}
	for (unsigned k = 0; k < n_groups; k++)
		zs_trainer_hparams(t, k, &base[k], &clip);
	work_init(&w, B);
	for (int u = 0; MB > 1 && u < NU; u++) {
		pu[u] = malloc(sizeof(float) * unit_numel(u));
		gu[u] = malloc(sizeof(float) * unit_numel(u));
	}
	if (zs_trainer_set_policy(t, pol))
		goto fail;
	/* where the job's state comes from: a checkpoint it was restored or
	 * rolled back to (every rank continues from its step; the data a step
	 * samples depends only on the rank and the step, so the resumed run is
	 * the uninterrupted one), or nothing yet: rank 0 uploads the initial
	 * parameters. A job that rolls back while we train (a process of it
	 * was lost) says ZS_ERESUME, and we go back here. */
again:
	fresh = 0;
	for (int i = 0;; i++) {
		unsigned len;
		rc = zs_trainer_resume(t, &start, NULL, 0, &len);
		if (zs_trainer_rank(t) != rank) { /* a shrink gave it a lost rank's place */
			printf("rank %u is rank %u now\n", rank, zs_trainer_rank(t));
			rank = zs_trainer_rank(t);
		}
		if (rc == ZS_OK) { /* a checkpoint, a clean stop, or a lost rank's step to redo */
			printf("rank %u resumes at step %llu\n", rank,
			       (unsigned long long)start);
			break;
		}
		if (rc == ZS_ENOTFOUND) { /* nothing to resume: from step 0 */
			start = 0;
			rc = 0;
			fresh = 1;
			break;
		}
		if (rc != ZS_ESTATE || i == 20) /* ESTATE: a restore still under way */
			goto fail;
	}
	if (rank == 0 && fresh) {
		float *init[MAXL], *ub[MAXL] = {0};
		for (int u = 0; u < NU; u++) {
			ub[u] = malloc(sizeof(float) * unit_numel(u));
			layer_ptrs(u, ub[u], init);
		}
		init_params(init);
		for (int u = 0; u < NU && !rc; u++)
			rc = zs_init_unit(t, (unsigned)u, ub[u]);
		for (int u = 0; u < NU; u++)
			free(ub[u]);
		if (rc)
			goto fail;
	}
	for (uint64_t step = start; step < steps; step++) {
		const void *p;
		void *g;
		float *lp[MAXL], *lg[MAXL];
		loss = 0;
		sample(&w, d, rank, step);
		if ((rc = zs_step_begin(t, step)) == ZS_ECANCELED) {
			/* zshardctl job stop: every rank leaves before this step */
			printf("rank %u stops before step %llu: %s\n", rank,
			       (unsigned long long)step, zs_trainer_error(t));
			work_free(&w);
			return 0;
		}
		if (rc)
			goto fail;
		if (COSINE) { /* this step's values, before its first push */
			struct zs_hparams hp[64];
			for (unsigned k = 0; k < n_groups; k++) {
				hp[k] = base[k];
				hp[k].lr = base[k].lr * lr_factor(step);
			}
			if ((rc = zs_set_hparams(t, step, hp, n_groups, clip)))
				goto fail;
		}
		if (MB > 1 && compute && (rc = partial_passes(t, step, &w, d, pu, gu)))
			goto fail;
		for (int u = 0; u < NU; u++) { /* forward: the window gathers ahead */
			if ((rc = zs_unit_params(t, (unsigned)u, 0, &p)))
				goto fail;
			layer_ptrs(u, p, lp);
			for (int l = first_layer(u); compute && l < first_layer(u + 1); l++)
				loss += forward(l, lp[l], &w);
			if ((rc = zs_unit_forward_done(t, (unsigned)u)))
				goto fail;
		}
		if (lag_ms)
			usleep((useconds_t)lag_ms * 1000);
		for (int u = NU - 1; u >= 0; u--) { /* backward: push as we go */
			if ((rc = zs_unit_params(t, (unsigned)u, 1, &p)) ||
			    (rc = zs_unit_grad(t, (unsigned)u, &g)))
				goto fail;
			layer_ptrs(u, p, lp);
			layer_ptrs(u, g, lg);
			for (int l = first_layer(u + 1) - 1; compute && l >= first_layer(u); l--)
				backward(l, lp[l], &w, lg[l]);
			if ((rc = zs_unit_push(t, (unsigned)u)))
				goto fail;
			if ((long long)step == die_step && u == die_unit && start < step) {
				printf("rank %u: dies after its push of unit %d in step %llu (--die-after-push)\n",
				       rank, u, (unsigned long long)step);
				fflush(stdout);
				usleep(300 * 1000); /* the push lands meanwhile */
				raise(SIGKILL);
			}
		}
		{
			unsigned before = zs_trainer_world_size(t);
			if ((rc = zs_step_end(t))) /* every push acknowledged */
				goto fail;
			/* a resize: known as this step ends, before the next one's
			 * data (here a function of rank and step alone) */
			if (zs_trainer_world_size(t) != before)
				printf("rank %u: %u ranks from step %llu on\n", rank,
				       zs_trainer_world_size(t), (unsigned long long)step + 1);
		}
		log_step(slog, t);
		if (first_loss < 0)
			first_loss = loss;
		if (print_every && (step % (uint64_t)print_every == 0 || step + 1 == steps))
			printf("rank %u step %4llu loss %.4f\n", rank, (unsigned long long)step, loss);
		fflush(stdout);
	}
	/* the end: every rank asks for the final step's checkpoint (one for
	 * all) and waits for it to commit, so that no rank leaves before the
	 * job's last update is durable: a process lost after this rolls the
	 * job back to its end, one lost before it finds every rank there to
	 * resume */
	{
		unsigned long long id;
		/* a replicated job's failover abandons a checkpoint under way
		 * (ZS_EIO, the timeline unchanged): ask for it again */
		for (int tries = 0;; tries++) {
			if ((rc = zs_checkpoint(t, steps, NULL, 0, &id)) ||
			    (rc = zs_checkpoint_wait(t, id, 600000)) == ZS_OK)
				break;
			if (rc != ZS_EIO || tries == 3)
				break;
			fprintf(stderr, "charlm rank %u: %s: asking again\n", rank, zs_trainer_error(t));
		}
		if (rc)
			goto fail;
	}
	{
		struct zs_trainer_counters c;
		zs_trainer_counters(t, &c);
		printf("rank %u: %llu steps in %.2f s at stage %u; loss %.3f -> %.3f; gathered %.1f MiB, pushed %.1f MiB, waited %.2f s; peak parameters %.2f MiB, peak gradients %.2f MiB\n",
		       rank, (unsigned long long)steps, now() - t0, zs_trainer_stage(t), first_loss,
		       loss, (double)c.bytes_gathered / 1048576.0,
		       (double)c.bytes_pushed / 1048576.0, c.wait_seconds,
		       (double)c.peak_param_bytes / 1048576.0,
		       (double)c.peak_grad_bytes / 1048576.0);
	}
	if (out) {
		float *ub[MAXL] = {0}, *lp[MAXL];
		int bad = 0;
		for (int u = 0; u < NU && !bad; u++) {
			zs_op *op;
			ub[u] = malloc(sizeof(float) * unit_numel(u));
			bad = (rc = zs_gather(t, (unsigned)u, steps, ub[u], &op)) ||
			      (rc = zs_op_wait(op, 120000));
			layer_ptrs(u, ub[u], lp);
		}
		if (!bad)
			dump(out, lp);
		for (int u = 0; u < NU; u++)
			free(ub[u]);
		if (bad)
			goto fail;
	}
	for (int u = 0; u < NU; u++) {
		free(pu[u]);
		free(gu[u]);
	}
	work_free(&w);
	return 0;
fail:
	if (rc == ZS_ERESUME && exit_on_resume) {
		printf("rank %u: %s: exiting (--exit-on-resume)\n", rank, zs_trainer_error(t));
		fflush(stdout);
		for (int u = 0; u < NU; u++) {
			free(pu[u]);
			free(gu[u]);
		}
		work_free(&w);
		return 3;
	}
	if (rc == ZS_ERESUME && resumes++ < 100) {
		printf("rank %u: %s\n", rank, zs_trainer_error(t));
		fflush(stdout);
		goto again;
	}
	fprintf(stderr, "charlm rank %u: %s\n", rank, zs_trainer_error(t));
	for (int u = 0; u < NU; u++) {
		free(pu[u]);
		free(gu[u]);
	}
	work_free(&w);
	return 1;
}

/* ------------------------------------------------- compute alone, --local */

/* One rank's forward and backward with local parameters, no service: the
 * step's compute alone. Prints "seconds" per step to slog. */
static int local(uint64_t steps, int B, const struct data *d, FILE *slog)
{
	float *p[MAXL], *g[MAXL];
	struct work w;

	work_init(&w, B);
	for (int l = 0; l < NL; l++) {
		p[l] = malloc(sizeof(float) * layer_numel(l));
		g[l] = malloc(sizeof(float) * layer_numel(l));
	}
	init_params(p);
	for (uint64_t step = 0; step < steps; step++) {
		double t0 = now();
		sample(&w, d, 0, step);
		for (int l = 0; l < NL; l++)
			forward(l, p[l], &w);
		for (int l = NL - 1; l >= 0; l--)
			backward(l, p[l], &w, g[l]);
		if (slog)
			fprintf(slog, "%llu %.9f\n", (unsigned long long)step, now() - t0);
	}
	for (int l = 0; l < NL; l++) {
		free(p[l]);
		free(g[l]);
	}
	work_free(&w);
	return 0;
}

/* The job spec this model needs (--hidden, --layers-per-unit). */
static void print_spec(const char *job, unsigned world, unsigned stage)
{
	char lname[MAXL][16];
	for (int l = 1; l < NL - 1; l++)
		snprintf(lname[l], sizeof lname[l], "h%d", l - 1);
	snprintf(lname[0], sizeof lname[0], "embed");
	snprintf(lname[NL - 1], sizeof lname[NL - 1], "head");
	printf("{\n  \"name\": \"%s\",\n  \"stage\": %u,\n  \"world_size\": %u,\n"
	       "  \"compute_dtype\": \"f32\",\n"
	       "  \"optimizer\": {\"kind\": \"adamw\", \"lr\": 0.003, \"weight_decay\": 0.01,\n"
	       "                \"groups\": [{}, {\"weight_decay\": 0}]},\n"
	       "  \"units\": [\n", job, stage, world);
	for (int u = 0; u < n_units(); u++) {
		printf("    {\"name\": \"u%d\", \"tensors\": [", u);
		for (int l = first_layer(u); l < first_layer(u + 1); l++) {
			const char *sep = l > first_layer(u) ? ", " : "";
			if (l == 0)
				printf("%s{\"name\": \"%s.wte\", \"shape\": [%d, %d]}", sep, lname[l], V, D);
			else
				printf("%s{\"name\": \"%s.w\", \"shape\": [%d, %d]}, {\"name\": \"%s.b\", \"shape\": [%d], \"group\": 1}",
				       sep, lname[l], l == 1 ? IN : H, l == NL - 1 ? V : H, lname[l],
				       l == NL - 1 ? V : H);
		}
		printf("]}%s\n", u + 1 < n_units() ? "," : "");
	}
	printf("  ]\n}\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"coordinator", required_argument, NULL, 'c'}, {"job", required_argument, NULL, 'j'},
		{"rank", required_argument, NULL, 'r'},        {"steps", required_argument, NULL, 's'},
		{"batch", required_argument, NULL, 'b'},       {"transport", required_argument, NULL, 't'},
		{"print-every", required_argument, NULL, 'p'}, {"dump", required_argument, NULL, 'd'},
		{"reference", no_argument, NULL, 'R'},         {"spec", required_argument, NULL, 'S'},
		{"world", required_argument, NULL, 'w'},       {"text", required_argument, NULL, 'x'},
		{"prefetch", required_argument, NULL, 'P'},    {"max-live-bytes", required_argument, NULL, 'M'},
		{"keep-until-backward", no_argument, NULL, 'K'},
		{"hidden", required_argument, NULL, 'H'},      {"layers-per-unit", required_argument, NULL, 'L'},
		{"print-spec", no_argument, NULL, 'Z'},        {"stage", required_argument, NULL, 'g'},
		{"no-compute", no_argument, NULL, 'N'},        {"local", no_argument, NULL, 'l'},
		{"step-log", required_argument, NULL, 'o'},    {"depth", required_argument, NULL, 'e'},
		{"push-depth", required_argument, NULL, 'D'},
		{"schedule", required_argument, NULL, 'C'},    {"warmup", required_argument, NULL, 'W'},
		{"total", required_argument, NULL, 'T'},
		{"micro-batches", required_argument, NULL, 'm'},
		{"exit-on-resume", no_argument, NULL, 'X'},
		{"lag-ms", required_argument, NULL, 'G'},
		{"die-after-push", required_argument, NULL, 'Y'},
		{"worlds", required_argument, NULL, 'O'},
		{"help", no_argument, NULL, 'h'},              {0},
	};
	const char *coord = getenv("ZSHARD_COORDINATOR"), *job = "charlm", *transport = NULL;
	const char *out = NULL, *spec = "examples/charlm.json";
	const char *text = "/usr/share/common-licenses/GPL-3";
	unsigned rank = 0, world = 1;
	uint64_t steps = 300, total = 0;
	int B = 64, print_every = 50, ref = 0, o, rc, spec_only = 0, compute = 1, loc = 0;
	unsigned stage = 3;
	const char *slog_path = NULL;
	FILE *slog = NULL;
	struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1};
	unsigned given = 0; /* the policy's fields the flags set (the rest: the trainer's defaults) */
	struct data d;
	char err[512];
	zs_trainer *t;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'c': coord = optarg; break;
		case 'j': job = optarg; break;
		case 'r': rank = (unsigned)atoi(optarg); break;
		case 's': steps = strtoull(optarg, NULL, 10); break;
		case 'b': B = atoi(optarg); break;
		case 't': transport = optarg; break;
		case 'p': print_every = atoi(optarg); break;
		case 'd': out = optarg; break;
		case 'R': ref = 1; break;
		case 'S': spec = optarg; break;
		case 'w': world = (unsigned)atoi(optarg); break;
		case 'O':
			if (parse_worlds(optarg)) {
				fprintf(stderr, "charlm: --worlds is STEP:N[,STEP:N...] with steps increasing, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'x': text = optarg; break;
		case 'P': pol.prefetch = (unsigned)atoi(optarg); given |= 1; break;
		case 'M': pol.max_live_bytes = strtoull(optarg, NULL, 10); given |= 2; break;
		case 'K': pol.reshard_after_forward = 0; given |= 4; break;
		case 'H': H = atoi(optarg); break;
		case 'L': LPU = atoi(optarg); break;
		case 'Z': spec_only = 1; break;
		case 'g': stage = (unsigned)atoi(optarg); break;
		case 'N': compute = 0; break;
		case 'l': loc = 1; break;
		case 'o': slog_path = optarg; break;
		case 'e': NL = atoi(optarg) + 3; break;
		case 'D': pol.push_depth = (unsigned)atoi(optarg); given |= 8; break;
		case 'C':
			if (strcmp(optarg, "cosine") && strcmp(optarg, "constant")) {
				fprintf(stderr, "charlm: --schedule is cosine or constant, not '%s'\n", optarg);
				return 2;
			}
			COSINE = !strcmp(optarg, "cosine");
			break;
		case 'W': WARMUP = strtoull(optarg, NULL, 10); break;
		case 'T': total = strtoull(optarg, NULL, 10); break;
		case 'm': MB = atoi(optarg); break;
		case 'X': exit_on_resume = 1; break;
		case 'G': lag_ms = atoi(optarg); break;
		case 'Y':
			if (sscanf(optarg, "%lld:%d", &die_step, &die_unit) != 2 || die_step < 0 ||
			    die_unit < 0) {
				fprintf(stderr, "charlm: --die-after-push takes STEP:UNIT\n");
				return 2;
			}
			break;
		case 'h':
			printf("usage: charlm [--coordinator ADDR] [--job charlm] --rank R [--steps N] [--batch B]\n"
			       "              [--transport auto|tcp|shm] [--print-every K] [--dump FILE]\n"
			       "              [--prefetch N] [--max-live-bytes B] [--keep-until-backward]\n"
			       "              [--push-depth D] [--no-compute] [--step-log FILE]\n"
			       "              [--schedule cosine|constant] [--warmup N] [--total N]\n"
			       "              [--micro-batches K] [--exit-on-resume] [--lag-ms MS]\n"
			       "              [--die-after-push STEP:UNIT]\n"
			       "       charlm --reference [--spec FILE] --world R [--worlds S:N,...] [--steps N] [--dump FILE]\n"
			       "       charlm --local [--steps N] [--batch B] [--step-log FILE]\n"
			       "       charlm --print-spec [--job NAME] [--world R] [--stage S]\n"
			       "all take [--hidden H] [--depth N] [--layers-per-unit K] (default 256, 1, 1:\n"
			       "examples/charlm.json; the layers are embed, h0, N more hidden, head)\n");
			return 0;
		default: return 2;
		}
	}
	if (B < 1 || B > 4096 || world < 1 || H < 1 || H > 16384 || NL < 4 || NL > MAXL ||
	    LPU < 1 || LPU > NL || stage < 1 || stage > 3 || MB < 1 || MB > 64 || lag_ms < 0 ||
	    lag_ms > 60000) {
		fprintf(stderr, "charlm: bad --batch, --world, --hidden (1..16384), --depth (1..%d), --layers-per-unit (1..layers), --stage or --micro-batches (1..64)\n",
			MAXL - 3);
		return 2;
	}
	TOTAL = total ? total : steps;
	if (spec_only) {
		print_spec(job, world, stage);
		return 0;
	}
	if (slog_path && !(slog = fopen(slog_path, "w"))) {
		fprintf(stderr, "charlm: cannot write %s\n", slog_path);
		return 1;
	}
	openblas_set_num_threads(1); /* one per rank: deterministic and fair */
	load_text(&d, text);
	if (ref || loc) {
		rc = ref ? reference(spec, world, steps, B, &d, out) : local(steps, B, &d, slog);
		free(d.text);
		if (slog)
			fclose(slog);
		return rc;
	}
	/* no coordinator given: libzshard's ($ZSHARD_CONFIG's, else the local
	 * cluster's; it names where it looked when there is none) */
	/* the join waits (within its 10 s) for servers still loading the job */
	rc = zs_trainer_join(coord, job, rank, transport, 10000, &t, err, sizeof err);
	if (rc) {
		fprintf(stderr, "charlm: cannot join job '%s' as rank %u: %s\n", job, rank, err);
		free(d.text);
		return 1;
	}
	{ /* the flags over the trainer's defaults (which $ZSHARD_CONFIG may set) */
		struct zs_policy base;
		zs_trainer_policy(t, &base);
		if (given & 1)
			base.prefetch = pol.prefetch;
		if (given & 2)
			base.max_live_bytes = pol.max_live_bytes;
		if (given & 4)
			base.reshard_after_forward = 0;
		if (given & 8)
			base.push_depth = pol.push_depth;
		pol = base;
	}
	rc = train(t, steps, B, print_every, &d, out, &pol, compute, slog);
	zs_trainer_close(t);
	free(d.text);
	if (slog && fclose(slog)) {
		fprintf(stderr, "charlm: cannot write %s\n", slog_path);
		rc = 1;
	}
	return rc;
}
