/*
 * jobs.h - a job on this server: found by name or handle and referenced
 * (jobs.c), its world size by step (world.c), its ranks' connections
 * (ranks.c), its hyperparameter tables and optimizer (hparams.c), its
 * shards' memory (shard.c) and the versions its readers pinned (pins.c).
 * Internal to the engine.
 */
#ifndef ZS_ENGINE_JOBS_H
#define ZS_ENGINE_JOBS_H

#include "engine/state.h"

/* jobs.c */
/* What a handle of a timeline a restore ended is told (ZS_ERESUME). */
#define ROLLED_BACK "job '%s' was rolled back to a checkpoint (a process of it was lost, or an operator restored it): resume"
/* The job of handle h (referenced: eng_job_unref), the current one or one
 * a restore retired (*stale true); NULL if no job has it. */
struct ejob *eng_job_by_handle(struct engine *e, uint32_t h, bool *stale);
/* The job of handle h, referenced (eng_job_unref), or NULL with err: gone,
 * or of a timeline a restore ended (ZS_ERESUME). */
struct ejob *eng_job_or_fail(struct engine *e, uint32_t h, struct zs_error *err);
/* The job named name, referenced (eng_job_unref), or NULL. */
struct ejob *eng_job_by_name(struct engine *e, const char *name);
/* Drops a reference; the last runs e->job_release. */
void eng_job_unref(struct engine *e, struct ejob *j);
const char *eng_unit_name(struct ejob *j, uint32_t u);

/* world.c: the world size of step here, the WORLD frame's target
 * callback, per-rank arrays for n ranks on every shard (ZS_ENOMEM), a
 * restore's clearing */
uint32_t eng_world_at(struct ejob *j, uint64_t step);
enum zs_status eng_t_world(void *ctx, uint32_t job, uint32_t rank, const uint8_t *payload,
			   size_t len, struct zs_error *err);
enum zs_status eng_ranks_ensure(struct ejob *j, uint32_t n, struct zs_error *err);
void eng_worlds_clear(struct ejob *j);

static inline uint32_t eng_contributors(struct ejob *j, uint64_t step)
{
	return j->spec.collective ? 1 : eng_world_at(j, step);
}

/* world.c: push x of rank, and what shard s of j says at it, as engine/intake.c
 * reads them (caller holds s->mu). */
struct eng_push eng_push_of(const struct zs_xfer *x, uint32_t rank);
struct eng_at eng_at_of(struct ejob *j, const struct eshard *s, const struct zs_xfer *x);

/* ranks.c: a HELLO of rank taken for j, and a connection that said one
 * ended, with the trainer's reconnect count and session it said (caller holds
 * e->mu); j's counts freed */
void eng_rank_in(struct engine *e, struct ejob *j, uint32_t rank, uint64_t reconnects,
		 uint64_t session);
void eng_rank_out(struct engine *e, struct ejob *j, uint32_t rank, uint64_t reconnects,
		  uint64_t session);
void eng_ranks_free(struct ejob *j);

/* hparams.c */
/* The listener's HPARAMS callback: keeps a job's table from a step on. */
enum zs_status eng_t_hparams(void *ctx, uint32_t job, uint32_t rank, uint64_t step,
			     const uint8_t *payload, size_t len, struct zs_error *err);
/* Shard s's segments by optimizer group (at its creation): 0 or ENOMEM. */
int eng_shard_segments(struct ejob *j, struct eshard *s);
/* The update of step (t-th, 1-based) per optimizer group, steps[] with the
 * job's n_groups entries, and the clipping norm in force at step. */
void eng_hp_steps(struct ejob *j, uint64_t step, uint64_t t, struct zs_optim_step *steps,
		  double *clip_norm);
/* The optimizer on shard elements [a, b), group by group: p, s0, s1, g
 * point at element a of their arrays (s0, s1 may be NULL). */
void eng_optim_run(struct engine *e, const struct eshard *s, const struct zs_optim_step *steps,
		   float *p, float *s0, float *s1, const float *g, uint64_t a, uint64_t b);

/* shard.c: a shard's arrays and state for placement entry sh (s zeroed
 * but for idx), and their release. */
enum zs_status eng_shard_init(struct engine *e, struct ejob *j, struct eshard *s,
			      const struct zs_shard *sh, struct zs_error *err);
void eng_shard_release(struct engine *e, struct eshard *s);

/* pins.c: versions readers pinned */
struct epin;
/* The target's PIN (net/listener.h). */
enum zs_status eng_t_pin(void *ctx, uint32_t job, uint64_t step, uint32_t verb,
			 struct zs_pin_ans *ans, struct zs_error *err);
/* A read of a pinned version (x->pinned), answered. */
void eng_pin_read(struct engine *e, struct ejob *j, struct zs_sop *op, const struct zs_xfer *x);
/* After s reached a new version: copies of it for the pins of that step
 * (caller holds s->mu). */
void eng_pins_due(struct ejob *j, struct eshard *s);
/* Every pin of j goes (a restore: what was pending would be another
 * timeline's); why is what later reads of them are told. */
void eng_pins_drop(struct ejob *j, const char *why);
/* The pins of j taken before run (1 + a timeline) go (a pin taken between
 * a restore's end and its timeline's raise was stamped with the old one). */
void eng_pins_drop_before(struct ejob *j, uint64_t run, const char *why);
/* Drops the pins no reader touched within the spec's idle bound. */
void eng_pins_sweep(struct ejob *j, int64_t now);
/* At the job's end (no other reference). */
void eng_pins_free(struct ejob *j);

#endif
