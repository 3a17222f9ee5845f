/*
 * unit.h - where a unit's gradient is on its way to the servers, in the
 * step driver: one state machine, its table in client/unit.c, changed by
 * tr_unit_go alone. Internal to libzshard.
 *
 *   NONE          nothing of it on its way (written or not)
 *   HELD          stage 1: pushed by the caller, held for the step's end
 *   COPYING       device mode: its copy to the host queued; the push
 *                 goes out once it is there
 *   COPYING_HELD  device mode at stage 1: copying, and held
 *   POSTED        its push is in flight (dunit.push)
 *
 * The parameters' side (gather asked, live, freed) is the unit's params
 * and gather pointers; the step's mark (pushed this step) is dunit.pushed.
 */
#ifndef ZS_CLIENT_UNIT_H
#define ZS_CLIENT_UNIT_H

#include <stdbool.h>
#include <stddef.h>

enum tr_uphase { UP_NONE, UP_HELD, UP_COPYING, UP_COPYING_HELD, UP_POSTED, UP_COUNT };

enum tr_uevent {
	UE_HOLD,      /* pushed at stage 1 (host memory): held */
	UE_COPY,      /* pushed in device mode: the copy to the host queued */
	UE_COPY_HOLD, /* the same at stage 1: copying, and held */
	UE_RELEASE,   /* the step's end: a held copy's push may go */
	UE_COPIED,    /* the copy is there: the push goes out next */
	UE_POST,      /* its push started */
	UE_DONE,      /* its push completed (or failed) */
	UE_RESET,     /* the driver's buffers reset (a resume, a close) */
	UE_COUNT
};

struct tr_utransition {
	enum tr_uphase from;
	enum tr_uevent ev;
	enum tr_uphase to;
};

/* The target of (from, ev), or UP_COUNT when it is not a transition. */
enum tr_uphase tr_unit_next(enum tr_uphase from, enum tr_uevent ev);
/*
 * Moves *phase by ev: true; false for a pair not in the table (a bug):
 * logged, naming the unit, the phase and the event, and nothing changes.
 */
bool tr_unit_go(enum tr_uphase *phase, unsigned unit, enum tr_uevent ev);
const char *tr_uphase_name(enum tr_uphase p);
const char *tr_uevent_name(enum tr_uevent ev);
const struct tr_utransition *tr_unit_table(size_t *n);

#endif
