/*
 * unit.c - a unit's parameters and its gradient in the step driver as two
 * state machines (client/unit.h): the transitions, written once.
 * docs/DESIGN.md draws both tables (test_unit checks that it does).
 */
#include "client/unit.h"

#include "base/log.h"

static const struct zs_fsm_edge params_table[] = {
	/* asked */
	{PP_NONE, PE_ASK, PP_ASKED},
	{PP_NONE, PE_ASK_AHEAD, PP_AHEAD},
	{PP_LIVE, PE_REFRESH, PP_ASKED},
	/* there */
	{PP_ASKED, PE_GATHERED, PP_LIVE},
	{PP_AHEAD, PE_GATHERED, PP_LIVE_AHEAD},
	/* the next step's become this step's */
	{PP_AHEAD, PE_BEGIN, PP_ASKED},
	{PP_LIVE_AHEAD, PE_BEGIN, PP_LIVE},
	/* gone */
	{PP_LIVE, PE_DROP, PP_NONE},
	{PP_LIVE_AHEAD, PE_DROP, PP_NONE},
	{PP_AHEAD, PE_PARK, PP_NONE},
	{PP_NONE, PE_RESET, PP_NONE},
	{PP_ASKED, PE_RESET, PP_NONE},
	{PP_AHEAD, PE_RESET, PP_NONE},
	{PP_LIVE, PE_RESET, PP_NONE},
	{PP_LIVE_AHEAD, PE_RESET, PP_NONE},
};

static const struct zs_fsm_edge push_table[] = {
	/* the caller writes it and pushes it */
	{UP_NONE, UE_WRITE, UP_WRITTEN},
	{UP_WRITTEN, UE_WRITE, UP_WRITTEN},
	{UP_WRITTEN, UE_POST, UP_POSTED},
	{UP_WRITTEN, UE_HOLD, UP_HELD},
	{UP_HELD, UE_WRITE, UP_HELD}, /* written again before the step's end */
	{UP_HELD, UE_HOLD, UP_HELD},  /* pushed again before the step's end */
	{UP_WRITTEN, UE_COPY, UP_COPYING},
	{UP_WRITTEN, UE_COPY_HOLD, UP_COPYING_HELD},
	/* the step's end */
	{UP_HELD, UE_POST, UP_POSTED},
	{UP_COPYING_HELD, UE_RELEASE, UP_COPYING},
	/* device mode: the copy done, the push goes */
	{UP_COPYING, UE_COPIED, UP_WRITTEN},
	/* the push acknowledged */
	{UP_POSTED, UE_DONE, UP_NONE},
	{UP_NONE, UE_RESET, UP_NONE},
	{UP_WRITTEN, UE_RESET, UP_NONE},
	{UP_HELD, UE_RESET, UP_NONE},
	{UP_COPYING, UE_RESET, UP_NONE},
	{UP_COPYING_HELD, UE_RESET, UP_NONE},
	{UP_POSTED, UE_RESET, UP_NONE},
};

static const char *const pphase_names[PP_COUNT] = {"NONE", "ASKED", "AHEAD", "LIVE",
						   "LIVE_AHEAD"};
static const char *const pevent_names[PE_COUNT] = {"ask", "ask_ahead", "refresh", "gathered",
						   "begin", "drop", "park", "reset"};
static const char *const uphase_names[UP_COUNT] = {"NONE", "WRITTEN", "HELD", "COPYING",
						   "COPYING_HELD", "POSTED"};
static const char *const uevent_names[UE_COUNT] = {"write", "hold", "copy", "copy_hold",
						   "release", "copied", "post", "done", "reset"};

const struct zs_fsm tr_params_fsm = {"a unit's parameters", params_table,
				     ZS_FSM_LEN(params_table), pphase_names, PP_COUNT,
				     pevent_names, PE_COUNT};
const struct zs_fsm tr_push_fsm = {"a unit's push", push_table, ZS_FSM_LEN(push_table),
				   uphase_names, UP_COUNT, uevent_names, UE_COUNT};

/* *phase moved by ev in m, or refused (false) and named. */
static bool go(const struct zs_fsm *m, int *phase, unsigned unit, int ev)
{
	int to = zs_fsm_next(m, *phase, ev);

	if (to < 0) {
		zs_error("unit %u: event '%s' in phase %s is not a transition of %s (a bug); refused",
			 unit, zs_fsm_event(m, ev), zs_fsm_state(m, *phase), m->what);
		return false;
	}
	*phase = to;
	return true;
}

bool tr_params_go(enum tr_pphase *phase, unsigned unit, enum tr_pevent ev)
{
	int p = (int)*phase;
	bool ok = go(&tr_params_fsm, &p, unit, (int)ev);

	*phase = (enum tr_pphase)p;
	return ok;
}

bool tr_unit_go(enum tr_uphase *phase, unsigned unit, enum tr_uevent ev)
{
	int p = (int)*phase;
	bool ok = go(&tr_push_fsm, &p, unit, (int)ev);

	*phase = (enum tr_uphase)p;
	return ok;
}
