/* charlm_model.c - charlm's model (see charlm_model.h). */
#include "examples/charlm_model.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int H = 256, LPU = 1, NL = 4;

unsigned long long layer_numel(int l)
{
	const unsigned long long h = (unsigned long long)H;
	return l == 0 ? V * D : l == 1 ? IN * h + h : l < NL - 1 ? h * h + h : h * V + V;
}

int n_units(void) { return (NL + LPU - 1) / LPU; }

/* Unit u's layers are [first_layer(u), first_layer(u + 1)). */
int first_layer(int u) { return u * LPU < NL ? u * LPU : NL; }

unsigned long long unit_numel(int u)
{
	unsigned long long n = 0;
	for (int l = first_layer(u); l < first_layer(u + 1); l++)
		n += layer_numel(l);
	return n;
}


static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void load_text(struct data *d, const char *path)
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
void sample(struct work *w, const struct data *d, unsigned r, uint64_t t)
{
	uint64_t s = 0x5eed0000ULL + (t << 16) + r;
	for (int b = 0; b < w->B; b++) {
		size_t p = CTX + splitmix(&s) % (d->len - CTX);
		for (int c = 0; c < CTX; c++)
			w->ctx[b * CTX + c] = d->text[p - CTX + (size_t)c];
		w->tgt[b] = d->text[p];
	}
}

void work_free(struct work *w)
{
	void *v[] = {w->ctx, w->tgt, w->X, w->P, w->dL, w->dA, w->d[0], w->d[1]};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		free(v[i]);
	for (int l = 1; l < NL - 1; l++)
		free(w->act[l]);
}

void work_init(struct work *w, int B)
{
	int wide = H > IN ? H : IN;
	memset(w, 0, sizeof *w);
	w->B = B;
	w->ctx = malloc(sizeof(int) * B * CTX);
	w->tgt = malloc(sizeof(int) * B);
	w->X = malloc(sizeof(float) * B * IN);
	for (int l = 1; l < NL - 1; l++)
		w->act[l] = malloc(sizeof(float) * B * H);
	w->P = malloc(sizeof(float) * B * V);
	w->dL = malloc(sizeof(float) * B * V);
	w->dA = malloc(sizeof(float) * B * H);
	w->d[0] = malloc(sizeof(float) * B * wide);
	w->d[1] = malloc(sizeof(float) * B * wide);
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
double forward(int u, const float *p, struct work *w)
{
	int B = w->B;
	if (u == 0) {
		for (int b = 0; b < B; b++)
			for (int c = 0; c < CTX; c++)
				memcpy(w->X + (size_t)b * IN + c * D, p + (size_t)w->ctx[b * CTX + c] * D,
				       sizeof(float) * D);
	} else if (u < NL - 1) {
		int n_in = u == 1 ? IN : H;
		dense_tanh(u == 1 ? w->X : w->act[u - 1], B, n_in, H, p, p + n_in * H, w->act[u]);
	} else {
		double loss = 0;
		for (int b = 0; b < B; b++)
			memcpy(w->P + (size_t)b * V, p + H * V, sizeof(float) * V);
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, V, H, 1.0f, w->act[NL - 2],
			    H, p, V, 1.0f, w->P, V);
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
void backward(int u, const float *p, struct work *w, float *g)
{
	int B = w->B;
	memset(g, 0, sizeof(float) * layer_numel(u));
	if (u == NL - 1) {
		for (int b = 0; b < B; b++)
			for (int k = 0; k < V; k++)
				w->dL[b * V + k] = (w->P[b * V + k] - (k == w->tgt[b])) / (float)B;
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, H, V, B, 1.0f, w->act[NL - 2], H,
			    w->dL, V, 0.0f, g, V);
		for (int b = 0; b < B; b++)
			for (int k = 0; k < V; k++)
				g[H * V + k] += w->dL[b * V + k];
		w->cur = 0;
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, H, V, 1.0f, w->dL, V, p, V,
			    0.0f, w->d[0], H);
	} else if (u >= 1) {
		int n_in = u == 1 ? IN : H;
		const float *x = u == 1 ? w->X : w->act[u - 1], *y = w->act[u];
		const float *dy = w->d[w->cur];
		float *dA = w->dA, *dx = w->d[w->cur ^ 1];
		w->cur ^= 1;
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
				const float *dx = w->d[w->cur] + (size_t)b * IN + c * D;
				for (int k = 0; k < D; k++)
					row[k] += dx[k];
			}
	}
}

void init_params(float **p)
{
	uint64_t s = 42;
	for (int u = 0; u < NL; u++) {
		int fan_in = u == 0 ? 1 : u == 1 ? IN : H, n_out = u == NL - 1 ? V : H;
		float a = u == 0 ? 0.5f : 1.0f / sqrtf((float)fan_in);
		for (unsigned long long i = 0; i < layer_numel(u); i++)
			p[u][i] = (float)((double)(splitmix(&s) >> 11) / 9007199254740992.0 * 2 - 1) * a;
		if (u) /* biases start at zero */
			memset(p[u] + (size_t)fan_in * n_out, 0, sizeof(float) * n_out);
	}
}

void dump(const char *path, float **p)
{
	FILE *f = fopen(path, "wb");
	for (int u = 0; u < NL && f; u++)
		fwrite(p[u], sizeof(float), layer_numel(u), f);
	if (!f || fclose(f)) {
		fprintf(stderr, "charlm: cannot write %s\n", path);
		exit(1);
	}
}

/*
 * The learning-rate schedule (--schedule): "cosine" (the default) warms up
 * linearly over --warmup steps (default a tenth of --steps), then decays
 * along a cosine to a tenth at --total (default --steps: a run resumed with
 * more steps than it began with says --total to keep its schedule);
 * "constant" keeps the spec's lr.
 * Every group's lr is scaled by it; the spec's groups keep their weight
 * decay (biases in a group without it, examples/charlm.json).
 */
int COSINE = 1;
uint64_t WARMUP = UINT64_MAX, TOTAL = 300;

double lr_factor(uint64_t t)
{
	uint64_t warm = WARMUP == UINT64_MAX ? TOTAL / 10 : WARMUP;
	double prog;

	if (!COSINE)
		return 1.0;
	if (t < warm)
		return (double)(t + 1) / (double)warm;
	prog = TOTAL > warm ? (double)(t - warm) / (double)(TOTAL - warm) : 1.0;
	return 0.1 + 0.45 * (1.0 + cos(3.141592653589793 * (prog < 1.0 ? prog : 1.0)));
}

double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

