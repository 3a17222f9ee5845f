/* optim.c - optimizer, norm and clipping kernels (see optim.h; the
 * reduction's: bsum.c). */
#include "math/optim.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

/*
 * Each elementwise kernel is compiled twice, for AVX2 and for baseline
 * x86-64, and the loader picks one per machine. The arithmetic is the same
 * IEEE operations per element (-ffp-contract=off forbids FMA), so both
 * clones give the same bits; only the speed differs.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ZS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ZS_CLONES
#endif

struct zs_sgd_k zs_sgd_consts(const struct zs_optim_step *s)
{
	return (struct zs_sgd_k){(float)s->lr, (float)s->weight_decay, (float)s->momentum,
				 s->t == 1};
}

struct zs_adagrad_k zs_adagrad_consts(const struct zs_optim_step *s)
{
	return (struct zs_adagrad_k){(float)s->lr, (float)s->weight_decay, (float)s->eps};
}

struct zs_adamw_k zs_adamw_consts(const struct zs_optim_step *s)
{
	const double bc1 = 1.0 - pow(s->beta1, (double)s->t);
	const double bc2 = 1.0 - pow(s->beta2, (double)s->t);
	const bool adam = s->kind == ZS_ADAM;

	return (struct zs_adamw_k){
		.decay = adam ? 1.0f : (float)(1.0 - s->lr * s->weight_decay),
		.l2 = adam ? (float)s->weight_decay : 0.0f,
		.b1 = (float)s->beta1, .b2 = (float)s->beta2,
		.one_b1 = (float)(1.0 - s->beta1), .one_b2 = (float)(1.0 - s->beta2),
		.step = (float)(-(s->lr / bc1)), .bc2_sqrt = (float)sqrt(bc2),
		.eps = (float)s->eps,
	};
}

/* The loops: math/elem.h's arithmetic per element, each momentum case its
 * own loop so that the compiler sees no branch inside. */
ZS_CLONES
static void sgd(const struct zs_sgd_k k, float *restrict p, float *restrict buf,
		const float *restrict g, size_t n)
{
	if (k.mom == 0.0f) {
		for (size_t i = 0; i < n; i++)
			zs_sgd_elem(k, &p[i], NULL, g[i]);
	} else if (k.first) {
		for (size_t i = 0; i < n; i++)
			zs_sgd_elem(k, &p[i], &buf[i], g[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			zs_sgd_elem(k, &p[i], &buf[i], g[i]);
	}
}

ZS_CLONES
static void adamw(const struct zs_adamw_k k, float *restrict p, float *restrict m,
		  float *restrict v, const float *restrict g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		zs_adamw_elem(k, &p[i], &m[i], &v[i], g[i]);
}

ZS_CLONES
static void adam(const struct zs_adamw_k k, float *restrict p, float *restrict m,
		 float *restrict v, const float *restrict g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		zs_adam_elem(k, &p[i], &m[i], &v[i], g[i]);
}

ZS_CLONES
static void adagrad(const struct zs_adagrad_k k, float *restrict p, float *restrict sum,
		    const float *restrict g, size_t n)
{
	if (k.wd != 0.0f) {
		for (size_t i = 0; i < n; i++)
			zs_adagrad_elem(k, &p[i], &sum[i], g[i] + k.wd * p[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			zs_adagrad_elem(k, &p[i], &sum[i], g[i]);
	}
}

void zs_optim_apply(const struct zs_optim_step *s, float *param, float *state0,
		    float *state1, const float *grad, size_t n)
{
	struct zs_adamw_k k;

	switch (s->kind) {
	case ZS_ADAMW:
	case ZS_ADAM: /* without an L2 term (AdamW, Adam without decay): AdamW's loop */
		k = zs_adamw_consts(s);
		(k.l2 != 0.0f ? adam : adamw)(k, param, state0, state1, grad, n);
		break;
	case ZS_ADAGRAD:
		adagrad(zs_adagrad_consts(s), param, state0, grad, n);
		break;
	default:
		sgd(zs_sgd_consts(s), param, state0, grad, n);
	}
}

struct part {
	const struct zs_optim_step *s;
	float *p, *s0, *s1;
	const float *g;
	size_t n;
};

static void *run_part(void *arg)
{
	struct part *x = arg;
	zs_optim_apply(x->s, x->p, x->s0, x->s1, x->g, x->n);
	return NULL;
}

void zs_optim_apply_parallel(const struct zs_optim_step *s, float *param,
			     float *state0, float *state1, const float *grad, size_t n,
			     unsigned nthreads)
{
	enum { MAX_T = 16, MIN_PER_THREAD = 1 << 16 };
	pthread_t th[MAX_T];
	struct part parts[MAX_T];
	bool started[MAX_T] = {false};
	size_t k = nthreads > MAX_T ? MAX_T : nthreads, per;

	if (k > n / MIN_PER_THREAD)
		k = n / MIN_PER_THREAD;
	if (k <= 1) {
		zs_optim_apply(s, param, state0, state1, grad, n);
		return;
	}
	/* whole cache lines per part; the math is elementwise, so any split
	 * gives the same bits */
	per = ((n + k - 1) / k + 15) & ~(size_t)15; /* k parts cover n */
	for (size_t i = 0; i < k; i++) {
		size_t off = per * i < n ? per * i : n;
		size_t len = n - off < per ? n - off : per;
		parts[i] = (struct part){s, param + off, state0 ? state0 + off : NULL,
					 state1 ? state1 + off : NULL, grad + off, len};
	}
	for (size_t i = 1; i < k; i++)
		started[i] = pthread_create(&th[i], NULL, run_part, &parts[i]) == 0;
	run_part(&parts[0]);
	for (size_t i = 1; i < k; i++) {
		if (started[i])
			pthread_join(th[i], NULL);
		else
			run_part(&parts[i]); /* no thread: do it here */
	}
}

/* ------------------------------------------------------- norm and clip */

double zs_sumsq(const float *x, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)x[i] * (double)x[i];
	return s;
}

void zs_scale(float *x, float coef, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = zs_f32_canon(x[i] * coef);
}

float zs_clip_coef(double total_sumsq, double max_norm)
{
	double c;
	if (max_norm <= 0.0)
		return 1.0f;
	c = max_norm / (sqrt(total_sumsq) + 1e-6);
	return c < 1.0 ? (float)c : 1.0f;
}
