/*
 * phase.c - a shard's step as a state machine: the transitions, written
 * once. docs/DESIGN.md draws this table (test_phase checks that it does);
 * every change of a shard's phase goes through eng_phase_go.
 */
#include "engine/state.h"

static const struct zs_fsm_edge table[] = {
	/* parameters come */
	{PH_EMPTY, EV_PARAMS, PH_LANDING},
	{PH_LANDING, EV_PARAMS, PH_LANDING}, /* an upload or seed sent again */
	/* a step's pushes are all in */
	{PH_LANDING, EV_BEHIND, PH_WAITING},
	{PH_LANDING, EV_REDUCED, PH_CLIPPING},
	{PH_LANDING, EV_APPLIED, PH_LANDING},
	{PH_WAITING, EV_REDUCED, PH_CLIPPING},
	{PH_WAITING, EV_APPLIED, PH_LANDING},
	/* the coordinator's total */
	{PH_CLIPPING, EV_APPLIED, PH_LANDING},
	{PH_CLIPPING, EV_FAILED, PH_STUCK},
	/* the open step dropped (a restore, a copy's new epoch) */
	{PH_LANDING, EV_DISCARD, PH_LANDING},
	{PH_WAITING, EV_DISCARD, PH_LANDING},
	{PH_CLIPPING, EV_DISCARD, PH_LANDING},
	{PH_STUCK, EV_DISCARD, PH_LANDING},
	{PH_EMPTY, EV_DISCARD, PH_EMPTY},
	/* a restore brings any phase to the restored version */
	{PH_EMPTY, EV_RESTORE, PH_LANDING},
	{PH_LANDING, EV_RESTORE, PH_LANDING},
	{PH_WAITING, EV_RESTORE, PH_LANDING},
	{PH_CLIPPING, EV_RESTORE, PH_LANDING},
	{PH_STUCK, EV_RESTORE, PH_LANDING},
	{PH_EMPTY, EV_RESET, PH_EMPTY},
	{PH_LANDING, EV_RESET, PH_EMPTY},
	{PH_WAITING, EV_RESET, PH_EMPTY},
	{PH_CLIPPING, EV_RESET, PH_EMPTY},
	{PH_STUCK, EV_RESET, PH_EMPTY},
};

static const char *const phase_names[PH_COUNT] = {"EMPTY", "LANDING", "WAITING", "CLIPPING",
						  "STUCK"};
static const char *const event_names[EV_COUNT] = {"params", "restore", "reset", "behind",
						  "reduced", "applied", "failed", "discard"};

const struct zs_fsm eng_phase_fsm = {"a shard's step", table, ZS_FSM_LEN(table), phase_names,
				     PH_COUNT, event_names, EV_COUNT};

const char *eng_phase_name(enum eng_phase p) { return zs_fsm_state(&eng_phase_fsm, (int)p); }

const char *eng_event_name(enum eng_event ev) { return zs_fsm_event(&eng_phase_fsm, (int)ev); }

enum eng_phase eng_phase_next(enum eng_phase from, enum eng_event ev)
{
	int to = zs_fsm_next(&eng_phase_fsm, (int)from, (int)ev);

	return to < 0 ? PH_COUNT : (enum eng_phase)to;
}

bool eng_phase_go(struct eshard *s, enum eng_event ev)
{
	enum eng_phase to = eng_phase_next(s->phase, ev);

	if (to == PH_COUNT) {
		zs_error("unit %u shard %u (copy %u) at step %llu: event '%s' in phase %s is not a transition (a bug); refused",
			 s->sh.unit, s->sh.index, s->sh.copy, (unsigned long long)s->version,
			 eng_event_name(ev), eng_phase_name(s->phase));
		return false;
	}
	s->phase = to;
	if (ev == EV_PARAMS || ev == EV_RESTORE || ev == EV_RESET)
		s->prev.of = 0; /* other parameters: no step before them here */
	return true;
}
