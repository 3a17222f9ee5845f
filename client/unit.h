/*
 * unit.h - a unit's life in the step driver as two state machines, their
 * tables in client/unit.c, changed by tr_params_go and tr_unit_go alone.
 * Internal to libzshard.
 *
 * Its parameters (dunit.pp; dunit.params is a buffer iff not NONE,
 * dunit.gather an op iff ASKED or AHEAD):
 *
 *   NONE        not resident, nothing asked
 *   ASKED       this step's gather in flight (or a replica's refresh)
 *   AHEAD       the next step's gather in flight, asked at this one's end
 *   LIVE        resident: this step's, or the step before's until refreshed
 *               or dropped at the next begin
 *   LIVE_AHEAD  resident, the next step's
 *
 * Its gradient on its way to the servers (dunit.up; dunit.grad is a
 * buffer iff not NONE):
 *
 *   NONE          no gradient
 *   WRITTEN       its buffer handed out (zs_unit_grad), not pushed
 *   HELD          stage 1: pushed by the caller, held for the step's end
 *   COPYING       device mode: its copy to the host queued; the push
 *                 goes out once it is there
 *   COPYING_HELD  device mode at stage 1: copying, and held
 *   POSTED        its push is in flight (dunit.push), until acknowledged
 *
 * The step's mark (pushed this step) is dunit.pushed.
 */
#ifndef ZS_CLIENT_UNIT_H
#define ZS_CLIENT_UNIT_H

#include <stdbool.h>

#include "base/fsm.h"

enum tr_pphase { PP_NONE, PP_ASKED, PP_AHEAD, PP_LIVE, PP_LIVE_AHEAD, PP_COUNT };

enum tr_pevent {
	PE_ASK,       /* this step's gather started */
	PE_ASK_AHEAD, /* the next step's gather started (the window) */
	PE_REFRESH,   /* a resident replica's trained shards gathered into it */
	PE_GATHERED,  /* the gather completed (or failed: the step fails) */
	PE_BEGIN,     /* the step the next one's parameters were asked for began */
	PE_DROP,      /* the buffer freed (the policy's reshard, a stale one) */
	PE_PARK,      /* an ahead gather given up on, parked with its buffer */
	PE_RESET,     /* the driver's buffers reset (a resume, a close) */
	PE_COUNT
};

enum tr_uphase { UP_NONE, UP_WRITTEN, UP_HELD, UP_COPYING, UP_COPYING_HELD, UP_POSTED, UP_COUNT };

enum tr_uevent {
	UE_WRITE,     /* its gradient's buffer handed out (zeroed) */
	UE_HOLD,      /* pushed at stage 1 (host memory): held */
	UE_COPY,      /* pushed in device mode: the copy to the host queued */
	UE_COPY_HOLD, /* the same at stage 1: copying, and held */
	UE_RELEASE,   /* the step's end: a held copy's push may go */
	UE_COPIED,    /* the copy is there: the push goes out next */
	UE_POST,      /* its push started */
	UE_DONE,      /* its push acknowledged (or failed): the buffer freed */
	UE_RESET,     /* the driver's buffers reset (a resume, a close) */
	UE_COUNT
};

/* The machines: tables, in the order DESIGN.md draws them, and names. */
extern const struct zs_fsm tr_params_fsm, tr_push_fsm;

/*
 * Moves *phase by ev: true; false for a pair not in the table (a bug):
 * logged, naming the unit, the phase and the event, and nothing changes.
 */
bool tr_params_go(enum tr_pphase *phase, unsigned unit, enum tr_pevent ev);
bool tr_unit_go(enum tr_uphase *phase, unsigned unit, enum tr_uevent ev);

#endif
