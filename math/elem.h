/*
 * elem.h - the optimizers' per-element arithmetic, one copy for every
 * compiler: the host kernels (math/optim.c) inline it into their loops, and
 * nvcc compiles the same functions into the CUDA kernels (gpu/optim.cu).
 * With FMA contraction off on both sides (-ffp-contract=off; nvcc
 * -fmad=false) and IEEE division and square root (nvcc -prec-div=true
 * -prec-sqrt=true, no flush to zero), each element gets the same IEEE
 * operations in the same order, so host and device give the same bits.
 *
 * The step-dependent scalars are computed once per update on the host, in
 * double and rounded to float once (zs_adamw_consts, zs_sgd_consts in
 * math/optim.h), and passed by value.
 */
#ifndef ZS_ELEM_H
#define ZS_ELEM_H

#include <math.h>

#ifdef __CUDACC__
#define ZS_ELEM __host__ __device__ __forceinline__
#else
#define ZS_ELEM static inline __attribute__((always_inline))
#endif

/* AdamW's per-update scalars (PyTorch's order; see math/optim.h). */
struct zs_adamw_k {
	float decay;    /* 1 - lr * wd */
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

ZS_ELEM void zs_adamw_elem(const struct zs_adamw_k k, float *p, float *m, float *v, float g)
{
	float mi = *m * k.b1 + k.one_b1 * g;
	float vi = *v * k.b2 + k.one_b2 * g * g; /* addcmul: value * t1 * t2 */
	float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
	*m = mi;
	*v = vi;
	*p = *p * k.decay + k.step * mi / denom;
}

/* buf may be NULL when mom is 0. */
ZS_ELEM void zs_sgd_elem(const struct zs_sgd_k k, float *p, float *buf, float g)
{
	float d = g + k.wd * *p;
	if (k.mom != 0.0f) {
		d = k.first ? d : *buf * k.mom + d;
		*buf = d;
	}
	*p = *p + (-k.lr) * d;
}

#endif
