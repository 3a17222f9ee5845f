/*
 * elem.h - the optimizers' per-element arithmetic, one copy for every
 * compiler: the host kernels (math/optim.c) inline it into their loops, and
 * nvcc compiles the same functions into the CUDA kernels (gpu/optim.cu).
 * With FMA contraction off on both sides (-ffp-contract=off; nvcc
 * -fmad=false) and IEEE division and square root (nvcc -prec-div=true
 * -prec-sqrt=true, no flush to zero), each element gets the same IEEE
 * operations in the same order, so host and device give the same bits.
 *
 * Every value written goes through zs_f32_canon (base/dtype.h): a NaN is
 * the same NaN on both (IEEE leaves its payload to the hardware).
 *
 * The step-dependent scalars are computed once per update on the host, in
 * double and rounded to float once (zs_adamw_consts, zs_sgd_consts in
 * math/optim.h), and passed by value.
 */
#ifndef ZS_ELEM_H
#define ZS_ELEM_H

#include <math.h>

#include "base/dtype.h"

#ifdef __CUDACC__
#define ZS_ELEM __host__ __device__ __forceinline__
#else
#define ZS_ELEM static inline __attribute__((always_inline))
#endif

/* AdamW's and Adam's per-update scalars (PyTorch's order; see
 * math/optim.h): AdamW decays the parameter (decay, l2 0), Adam adds the
 * L2 term to the gradient (decay 1, exact; l2 = wd). */
struct zs_adamw_k {
	float decay;    /* AdamW: 1 - lr * wd; Adam: 1 */
	float l2;       /* Adam: wd (zs_adam_elem); AdamW: 0 */
	float b1, b2, one_b1, one_b2;
	float step;     /* -lr / (1 - b1^t) */
	float bc2_sqrt; /* sqrt(1 - b2^t) */
	float eps;
};

/* SGD's: momentum 0 (plain), or the first step (the buffer starts as d). */
struct zs_sgd_k {
	float lr, wd, mom;
	int first;
};

/* Adagrad's: lr (already divided by 1 + (t - 1) * lr_decay, as the
 * trainer sends it), the L2 weight decay, eps. */
struct zs_adagrad_k {
	float lr, wd, eps;
};

ZS_ELEM void zs_adamw_elem(const struct zs_adamw_k k, float *p, float *m, float *v, float g)
{
	float mi = *m * k.b1 + k.one_b1 * g;
	float vi = *v * k.b2 + k.one_b2 * g * g; /* addcmul: value * t1 * t2 */
	float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
	*p = zs_f32_canon(*p * k.decay + k.step * mi / denom);
	*m = zs_f32_canon(mi);
	*v = zs_f32_canon(vi);
}

/* Adam with weight decay: torch's grad.add(param, alpha=wd), then AdamW's
 * update with decay 1 (p * 1 is p). Adam without decay is AdamW's update. */
ZS_ELEM void zs_adam_elem(const struct zs_adamw_k k, float *p, float *m, float *v, float g)
{
	zs_adamw_elem(k, p, m, v, g + k.l2 * *p);
}

/* buf may be NULL when mom is 0. */
ZS_ELEM void zs_sgd_elem(const struct zs_sgd_k k, float *p, float *buf, float g)
{
	float d = g + k.wd * *p;
	if (k.mom != 0.0f) {
		d = k.first ? d : *buf * k.mom + d;
		*buf = zs_f32_canon(d);
	}
	*p = zs_f32_canon(*p + (-k.lr) * d);
}

/* torch's: sum.addcmul_(g, g, value=1); std = sum.sqrt().add_(eps);
 * param.addcdiv_(g, std, value=-clr), where g already has its L2 term
 * (grad.add(param, alpha=wd), when wd != 0: the caller's loop adds it) */
ZS_ELEM void zs_adagrad_elem(const struct zs_adagrad_k k, float *p, float *sum, float g)
{
	float si = *sum + g * g;
	float std = sqrtf(si) + k.eps;
	*p = zs_f32_canon(*p + (-k.lr) * g / std);
	*sum = zs_f32_canon(si);
}

#endif
