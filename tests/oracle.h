/*
 * oracle.h - the training oracle's synthetic model and its single-process
 * reference (docs/DESIGN.md section 3). The gradient is a deterministic function
 * of the parameters a trainer gathered, its rank and the step, so a test of
 * the service does not depend on any model's numerics; the reference sums
 * every push of every rank by the reduction's definition (math/bsum.h),
 * which is what the servers must give whatever order pushes arrive in.
 */
#ifndef ZS_ORACLE_H
#define ZS_ORACLE_H

#include <stdint.h>

#include "model/hparams.h"
#include "model/model.h"

float oracle_init(uint32_t unit, uint64_t i);
/* x as a value of dtype d holds it (bf16, f16 rounded), as a float. */
float oracle_round(enum zs_dtype d, float x);
float oracle_grad(float p, uint32_t unit, uint64_t i, uint32_t rank, uint64_t step);
/* The gradient of micro-batch mb (of K per step; mb 0 is oracle_grad). */
float oracle_grad_mb(float p, uint32_t unit, uint64_t i, uint32_t rank, uint64_t step,
		     uint32_t mb);

/* A 4-unit job: f32 unit of 1000, a 1-element unit, 4099 (not divisible
 * by anything useful) and 64 elements; the last three in dt. Normalized. */
void oracle_spec(struct zs_job_spec *s, const char *name, uint32_t R,
		 enum zs_optim_kind kind, enum zs_dtype dt);
/* The same with units of the given sizes (1-D; unit 0 f32, the rest dt). */
void oracle_spec_sizes(struct zs_job_spec *s, const char *name, uint32_t R,
		       enum zs_optim_kind kind, enum zs_dtype dt, const uint64_t *sizes,
		       uint32_t n_units);

/* The reduction of n terms by its definition (evaluated independently of
 * math/bsum.h's incremental code). */
float oracle_bsum(const float *v, uint32_t n);

/* Parameters after steps updates, one array per unit (numel floats each),
 * as gathers of step `steps` return them (rounded to the unit's dtype). */
void oracle_reference(const struct zs_job_spec *s, uint64_t steps, float **out);
/* The same with K micro-batches per rank and step, each pushed in the
 * unit's dtype: R * K terms of the reduction. */
void oracle_reference_k(const struct zs_job_spec *s, uint64_t steps, uint32_t K,
			float **out);
/* With global-norm clipping (s->optim.clip_norm > 0): the norm is summed per
 * shard of placement p in element order, then over shards in placement
 * order, as the servers and the coordinator do. */
void oracle_reference_full(const struct zs_job_spec *s, const struct zs_placement *p,
			   uint64_t steps, uint32_t K, float **out);

/* Splits the oracle spec's units 0 and 2 into tensors of 3 optimizer
 * groups (group 1 without weight decay; group 2 at a third of the lr and,
 * for SGD, without momentum): unit 0: w [30, 20] group 0, b [400] group 1;
 * unit 2: a [2000] group 1, b [99] group 0, c [2000] group 2. Normalized
 * again. */
void oracle_spec_groups(struct zs_job_spec *s);
/* oracle_spec_groups with unit 0's b and unit 2's b frozen (held, never
 * updated, outside the clipping norm; their trainers push gradients). */
void oracle_spec_frozen(struct zs_job_spec *s);
/* The schedule the tests set with zs_set_hparams: warmup then cosine decay
 * of each group's lr, clip_norm growing with the step where the job clips. */
void oracle_hparams(const struct zs_job_spec *s, uint64_t step, struct zs_hp_table *out);
/* oracle_reference_full, each tensor updated with its group's values:
 * those of oracle_hparams at each step when sched, else the spec's. */
void oracle_reference_sched(const struct zs_job_spec *s, const struct zs_placement *p,
			    uint64_t steps, uint32_t K, int sched, float **out);
/* oracle_reference with the world size of each step from w (a resized
 * job: ranks 0..N-1 of step t's N push, the mean is over them). */
void oracle_reference_worlds(const struct zs_job_spec *s, const struct zs_worlds *w,
			     uint64_t steps, float **out);

#endif
