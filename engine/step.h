/*
 * step.h - a shard's step: a push landing (landing.c, upload.c for the
 * initial state), the reduction and the update (step.c), clipping's norm
 * exchange (clip.c), the gathers held until their step (held.c), the
 * snapshots captured at it (capture.c), the step before kept for a
 * replacement (redo.c), and what a transition leaves to do once the
 * shard's lock is let go, carried out (fx.c). Internal to the engine.
 */
#ifndef ZS_ENGINE_STEP_H
#define ZS_ENGINE_STEP_H

#include "engine/state.h"

/*
 * What a change of a shard's step leaves to be done once its lock is let
 * go: no function unlocks a lock its caller took, and nothing travels on
 * the side. A transition (eng_step_complete, eng_apply, the captures of
 * snapshots) fills one under s->mu; the caller unlocks, then eng_fx_run
 * answers the gathers it released, hands over the snapshots it completed
 * and starts clipping's norm exchange for the step it marked reduced.
 */
struct eng_fx {
	struct held *rel; /* held gathers released: answered */
	size_t n_rel;
	struct epending *done; /* snapshots with every shard: handed over */
	bool clip;             /* s reduced step clip_t, clipping on: the exchange */
	uint64_t clip_t;
};
/* fx.c: carries out fx's effects for s (no locks held) and empties fx. */
void eng_fx_run(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);
/* fx.c: the step's completion once every push of it is in (caller holds
 * s->mu, and keeps it; eng_fx_run after): the reduction finished, then s
 * marked for clipping's exchange, or the update. */
void eng_step_complete(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);

/* step.c */
/* Elements [a, b) of a push (x: its element 0, in dt) into s's reduction;
 * eng_deposit_mapped: x in the device's memory (a device push to a shard
 * on the device). */
void eng_deposit(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt, size_t a,
		 size_t b);
void eng_deposit_mapped(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt,
			size_t a, size_t b);
/* The reduction's elements [a, b) to the step's mean gradient (acc); the
 * reduction there is empty again. */
void eng_finish_range(struct ejob *j, struct eshard *s, size_t a, size_t b);
/* A replicated job's partial push from rank, landed at dst, into s's
 * reduction, unless its term is in already (caller holds s->mu). */
void eng_partial_in(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
		    const struct zs_xfer *x, const void *dst);
/* Empties the reduction (a restore discards the open step's pushes). */
void eng_reduction_clear(struct engine *e, struct eshard *s);
/* Drops s's open step: its pushes, its reduction, clipping's marks
 * (caller holds s->mu; a restore, a stale copy placed anew). */
void eng_step_discard(struct engine *e, struct ejob *j, struct eshard *s);
/* The optimizer on elements [a, b) of acc (scaled by coef), and the copy. */
void eng_apply_range(struct engine *e, struct ejob *j, struct eshard *s, float coef,
			size_t a, size_t b);
/*
 * Applies the optimizer to acc (scaled by coef when clipping), refreshes
 * the copy, opens the next step and adds the gathers it releases and the
 * snapshots it completes to fx (caller holds s->mu; eng_fx_run after).
 */
void eng_apply(struct engine *e, struct ejob *j, struct eshard *s, float coef,
	       struct eng_fx *fx);
/* fx's released gathers answered and completed snapshots handed over (no
 * locks held): eng_fx_run's part below the step, for the update that
 * clipping's exchange applies (it marks no exchange). */
void eng_fx_release(struct engine *e, struct eshard *s, struct eng_fx *fx);

/* held.c */
/* Where gather x of s's version reads in s's compute copy. */
const void *eng_served(struct eshard *s, const struct zs_xfer *x);
/* The held gathers of s's version, out of s->hold.q and added to *rel
 * (caller holds s->mu, serves them unlocked: eng_serve_released). */
void eng_take_released(struct eshard *s, struct held **rel, size_t *n_rel);
void eng_serve_released(struct engine *e, struct eshard *s, struct held *rel, size_t n);

/* clip.c */
/* Primary s has reduced its open step (caller holds s->mu): its norm, and
 * fx->clip set for eng_clip_exchange (by eng_fx_run, unlocked). */
void eng_clip_reduced(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);
/* The exchange of every primary here that reduced step t, once none is
 * still reducing it (each reduced shard looks); applied after. */
void eng_clip_exchange(struct engine *e, struct ejob *j, struct eshard *s, uint64_t t);
/* Stops the exchanges' threads (what is queued runs first). */
void eng_clip_stop(struct engine *e);
/* Drops the exchanges j was answered (a restore, the job's end). */
void eng_clip_forget(struct ejob *j);

/* landing.c */
/* A landing buffer of at least bytes, or NULL: no room now (the budget,
 * unless over_budget, or the arena); eng_land_put gives it back and wakes
 * waiting pushes. */
void *eng_land_get(struct engine *e, size_t bytes, bool over_budget);
void eng_land_put(struct engine *e, void *p);
void eng_land_free_all(struct engine *e);

/* upload.c */
/* Whether s holds its optimizer state whole: every array a job with
 * steps_taken needs was uploaded, or came whole (a seed, a restore). */
bool eng_state_whole(const struct eshard *s);
/* An initial upload's destination (caller holds s->mu): the masters, or a
 * landing buffer when they are in the tier or on the device. */
enum zs_status eng_init_begin(struct engine *e, struct ejob *j, struct eshard *s,
			      const struct zs_xfer *x, void **dst, struct zs_error *err);

/* redo.c */
/* Shard s's buffer for its previous step's parameters (pad elements), and
 * its release. */
void eng_prev_init(struct engine *e, struct eshard *s, size_t pad);
void eng_prev_release(struct engine *e, struct eshard *s);
/* Elements [a, b) of the copy are about to change: kept (caller holds
 * s->mu); eng_apply marks them whole (prev.of) once the update is done. */
void eng_prev_save(struct eshard *s, size_t a, size_t b);
/* Where gather x of the step before s's version reads (*src), or why it
 * cannot (offsets: the connection reads the arena). Caller holds s->mu. */
enum zs_status eng_prev_served(struct eshard *s, const struct zs_xfer *x, bool offsets,
			       const void **src, struct zs_error *err);

/* capture.c */
/* Snapshot arrays for s's state at step (zeroed if zero); false when out
 * of memory (what was allocated stays in sn for engine_snaps_free). */
bool eng_snap_alloc(const struct eshard *s, uint64_t step, bool zero, struct engine_snap *sn);
/* Shard s's state as it is now, into sn (caller holds s->mu). */
enum zs_status eng_snap_read(struct ejob *j, struct eshard *s, struct engine_snap *sn,
			     struct zs_error *err);
/* j's snapshots that have every shard they wait for, moved to *done
 * (caller holds j->cmu). */
void eng_take_whole(struct ejob *j, struct epending **done);
/* After s reached a new version: capture it for snapshots of that step;
 * those it completes go on *done (caller holds s->mu; eng_deliver after). */
void eng_capture_due(struct ejob *j, struct eshard *s, struct epending **done);
/* s will not reach the step of the snapshots waiting for it (a stale copy
 * that waits for a seed): they stop waiting for it, and those that have
 * all they wait for now go on *done (caller holds s->mu). */
void eng_capture_skip(struct ejob *j, struct eshard *s, struct epending **done);
/* Hands completed snapshots to their callbacks (no locks held). */
void eng_deliver(struct epending *done);

#endif
