/*
 * phase.h - where a shard's step is, as one state machine: its phases,
 * the events that move it and the table of transitions (engine/phase.c),
 * the only way a shard's phase changes. Internal to the engine.
 *
 * A shard holds parameters of one version v and takes the pushes of step
 * v. With every rank's last push in, the step is reduced and applied (v + 1
 * opens) under the shard's lock; two things can stand in between: the
 * previous update is not yet on every copy of the shard (WAITING: it is
 * applied once they acknowledge), or the job clips, and the reduced step
 * waits for the coordinator's total (CLIPPING). A replica's phase is its
 * primary's forwards: LANDING, then applied.
 *
 *   EMPTY     no parameters (until an initial upload, a seed or a restore)
 *   LANDING   version v served; pushes of step v land
 *   WAITING   every push of v in; the previous update not yet on every copy
 *   CLIPPING  v reduced; its norm exchange under way
 *   STUCK     v's norm exchange failed: nothing moves until a restore
 */
#ifndef ZS_ENGINE_PHASE_H
#define ZS_ENGINE_PHASE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/fsm.h"

enum eng_phase { PH_EMPTY, PH_LANDING, PH_WAITING, PH_CLIPPING, PH_STUCK, PH_COUNT };

enum eng_event {
	EV_PARAMS,   /* an initial upload or a seed landed: parameters of v */
	EV_RESTORE,  /* a restore (or an own state loaded at start): v's parameters */
	EV_RESET,    /* the parameters dropped (a reset, a copy emptied) */
	EV_BEHIND,   /* every push of v in; the copies lag one update */
	EV_REDUCED,  /* every push of v in and reduced; the job clips */
	EV_APPLIED,  /* v's update applied: v + 1 opens */
	EV_FAILED,   /* the norm exchange of v failed */
	EV_DISCARD,  /* the open step's pushes and reduction dropped */
	EV_COUNT
};

struct eshard;

/*
 * Moves s (caller holds s->mu) by ev: true, and s->phase is the table's
 * target; false for a pair that is not in the table (a bug): logged,
 * naming the shard, the phase and the event, and nothing changes.
 */
bool eng_phase_go(struct eshard *s, enum eng_event ev);
/* The target of (from, ev), or PH_COUNT when it is not a transition. */
enum eng_phase eng_phase_next(enum eng_phase from, enum eng_event ev);
const char *eng_phase_name(enum eng_phase p);
const char *eng_event_name(enum eng_event ev);
/* The machine: its table, in the order DESIGN.md draws it, and names. */
extern const struct zs_fsm eng_phase_fsm;

#endif
