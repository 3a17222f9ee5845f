/*
 * fsm.h - a state machine as a table: the transitions written once, looked
 * up by the machines of the step (engine/phase.c, client/unit.c), drawn in
 * docs/DESIGN.md and walked whole by their unit tests.
 *
 * States and events are small integers (each machine's enums); a pair not
 * in the table is not a transition, and the machine that asks refuses it.
 */
#ifndef ZS_BASE_FSM_H
#define ZS_BASE_FSM_H

#include <stddef.h>

struct zs_fsm_edge {
	int from, ev, to;
};

struct zs_fsm {
	const char *what; /* "a shard's step", for messages */
	const struct zs_fsm_edge *edges;
	size_t n_edges;
	const char *const *states; /* n_states names */
	int n_states;
	const char *const *events; /* n_events names */
	int n_events;
};

#define ZS_FSM_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The target of (from, ev), or -1 when the pair is not in m's table. */
int zs_fsm_next(const struct zs_fsm *m, int from, int ev);
/* A state's or an event's name; "?" out of range. */
const char *zs_fsm_state(const struct zs_fsm *m, int s);
const char *zs_fsm_event(const struct zs_fsm *m, int ev);

#endif
