/*
 * charlm_model.h - the model examples/charlm.c trains: the layers and how
 * they group into the job's units, the text and its batches, the forward
 * and backward passes (OpenBLAS), the initial parameters, the
 * learning-rate schedule. The same in every mode (through zshard, the
 * single-process reference, --local).
 */
#ifndef ZS_CHARLM_MODEL_H
#define ZS_CHARLM_MODEL_H

#include <stddef.h>
#include <stdint.h>

enum { V = 256, D = 64, CTX = 3, IN = CTX * D, MAXL = 64 };

/* The layers: embed, h0 (IN -> H), DEPTH hidden layers (H -> H), head;
 * NL = DEPTH + 3 (--depth, default 1: examples/charlm.json). H is the
 * hidden width (--hidden); each unit of the job holds LPU consecutive
 * layers (--layers-per-unit). */
extern int H, LPU, NL;

unsigned long long layer_numel(int l);
int n_units(void);
/* The first layer of unit u (NL past the last). */
int first_layer(int u);
unsigned long long unit_numel(int u);

struct data {
	unsigned char *text;
	size_t len;
};

/* Activations and gradients of one rank's batch. */
struct work {
	int B;
	int *ctx, *tgt;
	float *X, *act[MAXL], *P; /* forward: act[l] is hidden layer l's output */
	float *dL, *dA, *d[2];    /* backward: d[cur] the gradient of the layer's output */
	int cur;
};

/* Reads the text at path (exits on failure). */
void load_text(struct data *d, const char *path);
/* The batch of rank r at step t: the same in every mode. */
void sample(struct work *w, const struct data *d, unsigned r, uint64_t t);
void work_init(struct work *w, int B);
void work_free(struct work *w);
/* Layer l's forward pass (the head's returns the batch's mean loss, the
 * others 0) and backward pass (its gradient into g). */
double forward(int l, const float *p, struct work *w);
void backward(int l, const float *p, struct work *w, float *g);
/* The initial parameters, layer by layer; writes them to path (exits on
 * failure). */
void init_params(float **p);
void dump(const char *path, float **p);

/* The learning-rate schedule (--schedule, --warmup, --total): COSINE 0
 * keeps the spec's lr; lr_factor scales it at step t. */
extern int COSINE;
extern uint64_t WARMUP, TOTAL;
double lr_factor(uint64_t t);

/* The monotonic clock, in seconds. */
double now(void);

#endif
