/*
 * hparams.h - optimizer hyperparameters per step: what trainers set (an
 * lr schedule, per-group weight decay), how it travels on the data plane
 * (a HPARAMS frame's payload, net/wire.h) and the checks both ends share.
 *
 * A table holds every group's values and the clipping norm, in force from
 * its step on until the next table. Values are checked like the spec's.
 */
#ifndef ZS_HPARAMS_H
#define ZS_HPARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

struct zs_hp_table {
	uint64_t step; /* in force from this step on */
	uint32_t n_groups;
	double clip_norm;
	struct zs_hp g[ZS_MAX_GROUPS];
};

/* The payload's size for n groups: u32 n, f64 clip, n x 6 f64. */
#define ZS_HP_BYTES(n) (4u + 8u + (size_t)(n) * 48u)
#define ZS_HP_MAX_BYTES ZS_HP_BYTES(ZS_MAX_GROUPS)

/* Checks one group's values for an optimizer kind; what names it in err. */
enum zs_status zs_hp_check(enum zs_optim_kind kind, const struct zs_hp *h, const char *what,
			   struct zs_error *err);
/* Checks a table against a job's spec: as many groups as the job has,
 * values in range, clipping on only where the job clips. */
enum zs_status zs_hp_table_check(const struct zs_job_spec *s, const struct zs_hp_table *t,
				 struct zs_error *err);
/* The spec's own values as a table (step 0). */
void zs_hp_of_spec(const struct zs_job_spec *s, struct zs_hp_table *t);

/* Writes t's payload (little-endian) into out, ZS_HP_BYTES(t->n_groups)
 * bytes; returns that size. */
size_t zs_hp_encode(const struct zs_hp_table *t, uint8_t *out);
/* Parses a payload (the step comes from the frame); ZS_EPROTO if its size
 * or group count is wrong. */
enum zs_status zs_hp_decode(const uint8_t *in, size_t len, struct zs_hp_table *t,
			    struct zs_error *err);

#endif
