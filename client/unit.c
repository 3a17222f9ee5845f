/*
 * unit.c - a unit's gradient on its way to the servers as a state machine
 * (client/unit.h): the transitions, written once. docs/DESIGN.md draws
 * this table (test_unit checks that it does).
 */
#include "client/unit.h"

#include "base/log.h"

static const struct tr_utransition table[] = {
	/* the caller pushes it */
	{UP_NONE, UE_POST, UP_POSTED},
	{UP_NONE, UE_HOLD, UP_HELD},
	{UP_HELD, UE_HOLD, UP_HELD}, /* pushed again before the step's end */
	{UP_NONE, UE_COPY, UP_COPYING},
	{UP_NONE, UE_COPY_HOLD, UP_COPYING_HELD},
	/* the step's end */
	{UP_HELD, UE_POST, UP_POSTED},
	{UP_COPYING_HELD, UE_RELEASE, UP_COPYING},
	/* device mode: the copy done, the push goes */
	{UP_COPYING, UE_COPIED, UP_NONE},
	/* the push done */
	{UP_POSTED, UE_DONE, UP_NONE},
	{UP_NONE, UE_RESET, UP_NONE},
	{UP_HELD, UE_RESET, UP_NONE},
	{UP_COPYING, UE_RESET, UP_NONE},
	{UP_COPYING_HELD, UE_RESET, UP_NONE},
	{UP_POSTED, UE_RESET, UP_NONE},
};

static const char *const phase_names[UP_COUNT] = {"NONE", "HELD", "COPYING", "COPYING_HELD",
						  "POSTED"};
static const char *const event_names[UE_COUNT] = {"hold", "copy", "copy_hold", "release",
						  "copied", "post", "done", "reset"};

const char *tr_uphase_name(enum tr_uphase p)
{
	return (unsigned)p < UP_COUNT ? phase_names[p] : "?";
}

const char *tr_uevent_name(enum tr_uevent ev)
{
	return (unsigned)ev < UE_COUNT ? event_names[ev] : "?";
}

const struct tr_utransition *tr_unit_table(size_t *n)
{
	*n = sizeof table / sizeof table[0];
	return table;
}

enum tr_uphase tr_unit_next(enum tr_uphase from, enum tr_uevent ev)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (table[i].from == from && table[i].ev == ev)
			return table[i].to;
	return UP_COUNT;
}

bool tr_unit_go(enum tr_uphase *phase, unsigned unit, enum tr_uevent ev)
{
	enum tr_uphase to = tr_unit_next(*phase, ev);

	if (to == UP_COUNT) {
		zs_error("unit %u: event '%s' in phase %s is not a transition of its push (a bug); refused",
			 unit, tr_uevent_name(ev), tr_uphase_name(*phase));
		return false;
	}
	*phase = to;
	return true;
}
