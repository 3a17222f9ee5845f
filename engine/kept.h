/*
 * kept.h - which of a shard's versions a server can serve, decided: its
 * own (the compute copy), the step before it (kept whole after each
 * update, for a lost rank's replacement and for readers' pins), one not
 * reached yet, or one gone. Internal to the engine.
 *
 * A pure core, as engine/intake.h: engine/redo.c (a gather of the step
 * before) and engine/pins.c (a reader's pin) are its shells, and the
 * simulator's step world runs it for its trainers' gathers.
 */
#ifndef ZS_ENGINE_KEPT_H
#define ZS_ENGINE_KEPT_H

#include <stdbool.h>
#include <stdint.h>

enum eng_kept {
	EK_NOW,   /* its version: the compute copy (the part an update under
		   * way rewrote: in the step before's copy) */
	EK_PREV,  /* the step before its version, kept whole */
	EK_LATER, /* not reached yet: the update that makes it brings it */
	EK_GONE,  /* older than the step before, or not kept (the shard's
		   * parameters came since by a seed, a restore, a reset) */
};

/* Where version t of a shard at version is. frozen: a shard no update
 * changes (every version the same); have_prev: the step before's copy
 * exists; prev_of: 1 + the step whose parameters it holds whole (0: none
 * whole: an update half done, or parameters that came by a seed, a
 * restore, a reset, with no step before them here); piped: an update
 * under way has rewritten part of the compute copy (kept in prev first). */
enum eng_kept eng_kept_at(bool frozen, uint64_t version, uint64_t t, bool have_prev,
			  uint64_t prev_of, bool piped);

/* Whether a seed of a shard at version carries the step before's
 * parameters (ZS_WF_PREV): when kept whole here. Without them, a copy
 * seeded at version and promoted before it applies a step cannot serve a
 * lost rank's replacement the step it redoes (found by the simulator: the
 * redo became a rollback). */
bool eng_kept_seed_prev(bool have_prev, uint64_t prev_of, uint64_t version);

#endif
