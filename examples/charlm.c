/*
 * charlm.c - a character-level language model trained through zshard.
 *
 * The model: the previous CTX bytes -> embeddings (256 x D) concatenated ->
 * tanh(W1 x + b1) -> tanh(W2 h + b2) -> softmax(W3 h + b3) over the next
 * byte. Four units (embed, h0, h1, head) as in examples/charlm.json; matrix
 * products through OpenBLAS. Text: a file every Debian machine has.
 *
 * Through the service, with libzshard's step driver (the ZeRO stage from the
 * job, --prefetch units gathered ahead, bounded by --max-live-bytes):
 *   charlm --coordinator ADDR --job charlm --rank R [--steps N] [--batch B]
 *          [--transport auto|tcp|shm] [--print-every K] [--dump FILE]
 * Rank 0 uploads the initial parameters. --dump writes the final ones.
 *
 * Without the service, the same R ranks in one process, their gradients
 * reduced in rank order and the same optimizer applied (the oracle):
 *   charlm --reference --spec examples/charlm.json --world R --steps N --dump FILE
 */
#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optim.h"
#include "spec_json.h"
#include "zshard.h"

enum { V = 256, D = 64, CTX = 3, IN = CTX * D, H = 256, NU = 4 };

static const unsigned long long unit_numel[NU] = {V * D, IN * H + H, H * H + H, H * V + V};

struct data {
	unsigned char *text;
	size_t len;
};

/* Activations and gradients of one rank's batch. */
struct work {
	int B;
	int *ctx, *tgt;
	float *X, *H1, *H2, *P;          /* forward */
	float *dL, *dH2, *dA2, *dH1, *dA1, *dX; /* backward */
};

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void load_text(struct data *d, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "charlm: cannot read %s\n", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	d->len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	d->text = malloc(d->len);
	if (fread(d->text, 1, d->len, f) != d->len) {
		fprintf(stderr, "charlm: short read of %s\n", path);
		exit(1);
	}
	fclose(f);
}

/* The batch of rank r at step t: the same in every mode. */
static void sample(struct work *w, const struct data *d, unsigned r, uint64_t t)
{
	uint64_t s = 0x5eed0000ULL + (t << 16) + r;
	for (int b = 0; b < w->B; b++) {
		size_t p = CTX + splitmix(&s) % (d->len - CTX);
		for (int c = 0; c < CTX; c++)
			w->ctx[b * CTX + c] = d->text[p - CTX + (size_t)c];
		w->tgt[b] = d->text[p];
	}
}

static void work_free(struct work *w)
{
	void *v[] = {w->ctx, w->tgt, w->X, w->H1, w->H2, w->P, w->dL, w->dH2, w->dA2,
		     w->dH1, w->dA1, w->dX};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		free(v[i]);
}

static void work_init(struct work *w, int B)
{
	w->B = B;
	w->ctx = malloc(sizeof(int) * B * CTX);
	w->tgt = malloc(sizeof(int) * B);
	w->X = malloc(sizeof(float) * B * IN);
	w->H1 = malloc(sizeof(float) * B * H);
	w->H2 = malloc(sizeof(float) * B * H);
	w->P = malloc(sizeof(float) * B * V);
	w->dL = malloc(sizeof(float) * B * V);
	w->dH2 = malloc(sizeof(float) * B * H);
	w->dA2 = malloc(sizeof(float) * B * H);
	w->dH1 = malloc(sizeof(float) * B * H);
	w->dA1 = malloc(sizeof(float) * B * H);
	w->dX = malloc(sizeof(float) * B * IN);
}

/* y = tanh(x W + b), rows of x are examples */
static void dense_tanh(const float *x, int B, int n_in, int n_out, const float *W,
		       const float *b, float *y)
{
	for (int i = 0; i < B; i++)
		memcpy(y + (size_t)i * n_out, b, sizeof(float) * n_out);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, n_out, n_in, 1.0f, x, n_in,
		    W, n_out, 1.0f, y, n_out);
	for (int i = 0; i < B * n_out; i++)
		y[i] = tanhf(y[i]);
}

/* Forward pass of one unit; returns the loss for the head. */
static double forward(int u, const float *p, struct work *w)
{
	int B = w->B;
	if (u == 0) {
		for (int b = 0; b < B; b++)
			for (int c = 0; c < CTX; c++)
				memcpy(w->X + (size_t)b * IN + c * D, p + (size_t)w->ctx[b * CTX + c] * D,
				       sizeof(float) * D);
	} else if (u == 1) {
		dense_tanh(w->X, B, IN, H, p, p + IN * H, w->H1);
	} else if (u == 2) {
		dense_tanh(w->H1, B, H, H, p, p + H * H, w->H2);
	} else {
		double loss = 0;
		for (int b = 0; b < B; b++)
			memcpy(w->P + (size_t)b * V, p + H * V, sizeof(float) * V);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, V, H, 1.0f, w->H2, H, p,
			    V, 1.0f, w->P, V);
		for (int b = 0; b < B; b++) {
			float *row = w->P + (size_t)b * V, mx = row[0], sum = 0;
			for (int k = 1; k < V; k++)
				mx = row[k] > mx ? row[k] : mx;
			for (int k = 0; k < V; k++)
				sum += (row[k] = expf(row[k] - mx));
			for (int k = 0; k < V; k++)
				row[k] /= sum;
			loss -= log((double)row[w->tgt[b]] + 1e-30);
		}
		return loss / B;
	}
	return 0;
}

/* Backward pass of one unit: its gradient into g (numel floats). */
static void backward(int u, const float *p, struct work *w, float *g)
{
	int B = w->B;
	memset(g, 0, sizeof(float) * unit_numel[u]);
	if (u == 3) {
		for (int b = 0; b < B; b++)
			for (int k = 0; k < V; k++)
				w->dL[b * V + k] = (w->P[b * V + k] - (k == w->tgt[b])) / (float)B;
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, V, B, 1.0f, w->H2, H, w->dL,
			    V, 0.0f, g, V);
		for (int b = 0; b < B; b++)
			for (int k = 0; k < V; k++)
				g[H * V + k] += w->dL[b * V + k];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, H, V, 1.0f, w->dL, V, p, V,
			    0.0f, w->dH2, H);
	} else if (u == 2 || u == 1) {
		int n_in = u == 2 ? H : IN;
		const float *x = u == 2 ? w->H1 : w->X, *y = u == 2 ? w->H2 : w->H1;
		const float *dy = u == 2 ? w->dH2 : w->dH1;
		float *dA = u == 2 ? w->dA2 : w->dA1, *dx = u == 2 ? w->dH1 : w->dX;
		for (int i = 0; i < B * H; i++)
			dA[i] = dy[i] * (1.0f - y[i] * y[i]);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n_in, H, B, 1.0f, x, n_in, dA,
			    H, 0.0f, g, H);
		for (int b = 0; b < B; b++)
			for (int k = 0; k < H; k++)
				g[n_in * H + k] += dA[b * H + k];
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, n_in, H, 1.0f, dA, H, p, H,
			    0.0f, dx, n_in);
	} else {
		for (int b = 0; b < B; b++)
			for (int c = 0; c < CTX; c++) {
				float *row = g + (size_t)w->ctx[b * CTX + c] * D;
				const float *dx = w->dX + (size_t)b * IN + c * D;
				for (int k = 0; k < D; k++)
					row[k] += dx[k];
			}
	}
}

static void init_params(float **p)
{
	uint64_t s = 42;
	static const int fan_in[NU] = {1, IN, H, H};
	for (int u = 0; u < NU; u++) {
		float a = u == 0 ? 0.5f : 1.0f / sqrtf((float)fan_in[u]);
		for (unsigned long long i = 0; i < unit_numel[u]; i++)
			p[u][i] = (float)((double)(splitmix(&s) >> 11) / 9007199254740992.0 * 2 - 1) * a;
	}
	/* biases start at zero */
	memset(p[1] + IN * H, 0, sizeof(float) * H);
	memset(p[2] + H * H, 0, sizeof(float) * H);
	memset(p[3] + H * V, 0, sizeof(float) * V);
}

static void dump(const char *path, float **p)
{
	FILE *f = fopen(path, "wb");
	for (int u = 0; u < NU && f; u++)
		fwrite(p[u], sizeof(float), unit_numel[u], f);
	if (!f || fclose(f)) {
		fprintf(stderr, "charlm: cannot write %s\n", path);
		exit(1);
	}
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------ without service */

static int reference(const char *spec_path, unsigned R, uint64_t steps, int B,
		     const struct data *d, const char *out)
{
	struct zs_job_spec spec;
	struct zs_error err = {0};
	float *p[NU], *m[NU], *v[NU], *acc[NU], *g[NU];
	struct work w;

	if (zs_spec_load(spec_path, &spec, &err) || zs_job_spec_normalize(&spec, &err)) {
		fprintf(stderr, "charlm: %s\n", err.msg);
		return 1;
	}
	work_init(&w, B);
	for (int u = 0; u < NU; u++) {
		p[u] = malloc(sizeof(float) * unit_numel[u]);
		m[u] = calloc(unit_numel[u], sizeof(float));
		v[u] = calloc(unit_numel[u], sizeof(float));
		acc[u] = malloc(sizeof(float) * unit_numel[u]);
		g[u] = malloc(sizeof(float) * unit_numel[u]);
	}
	init_params(p);
	for (uint64_t t = 0; t < steps; t++) {
		double loss = 0;
		for (unsigned r = 0; r < R; r++) {
			sample(&w, d, r, t);
			for (int u = 0; u < NU; u++)
				loss += forward(u, p[u], &w);
			for (int u = NU - 1; u >= 0; u--) {
				backward(u, p[u], &w, g[u]);
				for (unsigned long long i = 0; i < unit_numel[u]; i++)
					acc[u][i] = r == 0 ? g[u][i] : acc[u][i] + g[u][i];
			}
		}
		for (int u = 0; u < NU; u++) {
			const struct zs_optim *o = &spec.optim;
			struct zs_optim_step st = {o->kind, o->lr, o->beta1, o->beta2, o->eps,
						   o->weight_decay, o->momentum, t + 1};
			zs_reduce_mean(acc[u], R, unit_numel[u]);
			zs_optim_apply(&st, p[u], m[u], v[u], acc[u], unit_numel[u]);
		}
		if (t == 0 || t + 1 == steps)
			printf("reference step %llu loss %.4f\n", (unsigned long long)t, loss / R);
	}
	if (out)
		dump(out, p);
	for (int u = 0; u < NU; u++) {
		free(p[u]);
		free(m[u]);
		free(v[u]);
		free(acc[u]);
		free(g[u]);
	}
	work_free(&w);
	zs_job_spec_release(&spec);
	return 0;
}

/* ------------------------------------------------------- through zshard */

static int train(zs_trainer *t, uint64_t steps, int B, int print_every,
		 const struct data *d, const char *out, const struct zs_policy *pol)
{
	unsigned rank = zs_trainer_rank(t);
	struct work w;
	double t0 = now(), first_loss = -1, loss = 0;

	if (zs_trainer_units(t) != NU) {
		fprintf(stderr, "charlm: the job has %u units, this model %d\n", zs_trainer_units(t), NU);
		return 1;
	}
	for (int u = 0; u < NU; u++)
		if (zs_unit_numel(t, (unsigned)u) != unit_numel[u] || zs_unit_dtype(t, (unsigned)u) != 1) {
			fprintf(stderr, "charlm: unit %d of the job is %llu elements of dtype %d; the model needs %llu f32\n",
				u, zs_unit_numel(t, (unsigned)u), zs_unit_dtype(t, (unsigned)u),
				unit_numel[u]);
			return 1;
		}
	work_init(&w, B);
	if (zs_trainer_set_policy(t, pol))
		goto fail;
	if (rank == 0) {
		float *init[NU];
		for (int u = 0; u < NU; u++)
			init[u] = malloc(sizeof(float) * unit_numel[u]);
		init_params(init);
		for (int u = 0; u < NU; u++) {
			int rc = zs_init_unit(t, (unsigned)u, init[u]);
			free(init[u]);
			if (rc) {
				for (int k = u + 1; k < NU; k++)
					free(init[k]);
				goto fail;
			}
		}
	}
	for (uint64_t step = 0; step < steps; step++) {
		const void *p;
		void *g;
		loss = 0;
		sample(&w, d, rank, step);
		if (zs_step_begin(t, step))
			goto fail;
		for (int u = 0; u < NU; u++) { /* forward: the window gathers ahead */
			if (zs_unit_params(t, (unsigned)u, 0, &p))
				goto fail;
			loss += forward(u, p, &w);
			if (zs_unit_forward_done(t, (unsigned)u))
				goto fail;
		}
		for (int u = NU - 1; u >= 0; u--) { /* backward: push as we go */
			if (zs_unit_params(t, (unsigned)u, 1, &p) || zs_unit_grad(t, (unsigned)u, &g))
				goto fail;
			backward(u, p, &w, g);
			if (zs_unit_push(t, (unsigned)u))
				goto fail;
		}
		if (zs_step_end(t)) /* every push acknowledged */
			goto fail;
		if (first_loss < 0)
			first_loss = loss;
		if (print_every && (step % (uint64_t)print_every == 0 || step + 1 == steps))
			printf("rank %u step %4llu loss %.4f\n", rank, (unsigned long long)step, loss);
		fflush(stdout);
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
		float *p[NU] = {0};
		int bad = 0;
		for (int u = 0; u < NU && !bad; u++) {
			zs_op *op;
			p[u] = malloc(sizeof(float) * unit_numel[u]);
			bad = zs_gather(t, (unsigned)u, steps, p[u], &op) || zs_op_wait(op, 120000);
		}
		if (!bad)
			dump(out, p);
		for (int u = 0; u < NU; u++)
			free(p[u]);
		if (bad)
			goto fail;
	}
	work_free(&w);
	return 0;
fail:
	fprintf(stderr, "charlm rank %u: %s\n", rank, zs_trainer_error(t));
	work_free(&w);
	return 1;
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
		{"help", no_argument, NULL, 'h'},              {0},
	};
	const char *coord = getenv("ZSHARD_COORDINATOR"), *job = "charlm", *transport = "auto";
	const char *out = NULL, *spec = "examples/charlm.json";
	const char *text = "/usr/share/common-licenses/GPL-3";
	unsigned rank = 0, world = 1;
	uint64_t steps = 300;
	int B = 64, print_every = 50, ref = 0, o, rc;
	struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1};
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
		case 'x': text = optarg; break;
		case 'P': pol.prefetch = (unsigned)atoi(optarg); break;
		case 'M': pol.max_live_bytes = strtoull(optarg, NULL, 10); break;
		case 'K': pol.reshard_after_forward = 0; break;
		case 'h':
			printf("usage: charlm --coordinator ADDR [--job charlm] --rank R [--steps N] [--batch B]\n"
			       "              [--transport auto|tcp|shm] [--print-every K] [--dump FILE]\n"
			       "              [--prefetch N] [--max-live-bytes B] [--keep-until-backward]\n"
			       "       charlm --reference [--spec FILE] --world R [--steps N] [--dump FILE]\n");
			return 0;
		default: return 2;
		}
	}
	if (B < 1 || B > 4096 || world < 1) {
		fprintf(stderr, "charlm: bad --batch or --world\n");
		return 2;
	}
	openblas_set_num_threads(1); /* one per rank: deterministic and fair */
	load_text(&d, text);
	if (ref) {
		rc = reference(spec, world, steps, B, &d, out);
		free(d.text);
		return rc;
	}
	if (!coord) {
		fprintf(stderr, "charlm: give --coordinator or set ZSHARD_COORDINATOR\n");
		free(d.text);
		return 2;
	}
	for (int i = 0;; i++) {
		rc = zs_trainer_join(coord, job, rank, transport, 10000, &t, err, sizeof err);
		/* servers learn a new job at their next heartbeat */
		if (rc != ZS_ENOTFOUND || !strstr(err, "holds no shard") || i == 200)
			break;
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (rc) {
		fprintf(stderr, "charlm: cannot join job '%s' as rank %u: %s\n", job, rank, err);
		free(d.text);
		return 1;
	}
	rc = train(t, steps, B, print_every, &d, out, &pol);
	zs_trainer_close(t);
	free(d.text);
	return rc;
}
