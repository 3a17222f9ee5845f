/*
 * optim.h - the math the shard servers run: optimizer updates, the
 * order-independent gradient reduction (math/bsum.h), squared norms (conversions: base/dtype.h). Pure
 * functions of plain arrays and a config: no I/O, no locks, no allocation
 * (the parallel wrapper only starts threads).
 *
 * Reproducibility: every kernel is elementwise, sums in a fixed order, or
 * sums exactly (the reduction), and the build uses -ffp-contract=off, so results are bitwise the same on any
 * x86-64 whatever S, the arrival order of pushes, or the thread count.
 *
 * Update formulas are PyTorch's (torch.optim.SGD, torch.optim.AdamW, 1.13
 * single-tensor implementation), in the same operation order, in fp32 with
 * the step-dependent scalars computed in double and rounded once:
 *
 *   SGD:   g = grad + wd * p;  b = (t == 1) ? g : momentum * b + g;
 *          p = p - lr * (momentum ? b : g)
 *   AdamW: p = p * (1 - lr * wd);  m = m * b1 + g * (1 - b1);
 *          v = v * b2 + g * g * (1 - b2);
 *          p = p + (-lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *   Adam:  g = grad + wd * p (when wd != 0); then AdamW's without the decay
 *   Adagrad: g = grad + wd * p (when wd != 0);  sum = sum + g * g;
 *          p = p + (-lr) * g / (sqrt(sum) + eps)
 *          (lr is torch's clr = lr / (1 + (t - 1) * lr_decay): the trainer
 *          sends it so, step by step; initial_accumulator_value is 0)
 */
#ifndef ZS_OPTIM_H
#define ZS_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "math/bsum.h"
#include "math/elem.h"
#include "model/model.h"

struct zs_optim_step {
	enum zs_optim_kind kind;
	double lr, beta1, beta2, eps, weight_decay, momentum;
	uint64_t t; /* 1-based step number of this update */
};

/* The per-update scalars math/elem.h's element functions take (the same
 * for the host and the CUDA kernels). */
struct zs_adamw_k zs_adamw_consts(const struct zs_optim_step *s); /* AdamW and Adam */
struct zs_adagrad_k zs_adagrad_consts(const struct zs_optim_step *s);
struct zs_sgd_k zs_sgd_consts(const struct zs_optim_step *s);

/*
 * One optimizer update of n elements: param (fp32 master) in place, state
 * in place (AdamW and Adam: state0 = m, state1 = v; SGD with momentum: state0
 * = momentum buffer; Adagrad: state0 = the sum of squares; unused
 * otherwise, may be NULL), grad read only (already
 * reduced, averaged and clipped).
 */
void zs_optim_apply(const struct zs_optim_step *s, float *param, float *state0,
		    float *state1, const float *grad, size_t n);

/* The same, split over nthreads threads for large n (bitwise identical). */
void zs_optim_apply_parallel(const struct zs_optim_step *s, float *param,
			     float *state0, float *state1, const float *grad, size_t n,
			     unsigned nthreads);

/*
 * The reduction (math/bsum.h): acc[i] takes x[i] (in dtype) as one more
 * term; any order of deposits gives the same state. finish: out[i] = the
 * sum of acc[i]'s terms rounded to fp32, divided by count when count > 1
 * (the mean over contributions), and acc[i] empty again. acc may be
 * zeroed memory (an empty accumulator is all zeros).
 */
void zs_bsum_deposit(struct zs_bacc *acc, const void *x, enum zs_dtype dt, size_t n);
void zs_bsum_finish(float *out, struct zs_bacc *acc, uint32_t count, size_t n);

/* Sum of squares of x[0..n) accumulated in double in index order. */
double zs_sumsq(const float *x, size_t n);
/* x[i] *= coef (gradient clipping). */
void zs_scale(float *x, float coef, size_t n);
/*
 * PyTorch's clip_grad_norm_ coefficient: min(1, max_norm / (norm + 1e-6)),
 * computed in double and rounded to float; 1 when max_norm is 0 (no clip).
 */
float zs_clip_coef(double total_sumsq, double max_norm);

#endif
