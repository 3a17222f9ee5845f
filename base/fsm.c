/* fsm.c - a state machine's table, looked up (base/fsm.h). */
#include "base/fsm.h"

int zs_fsm_next(const struct zs_fsm *m, int from, int ev)
{
	for (size_t i = 0; i < m->n_edges; i++)
		if (m->edges[i].from == from && m->edges[i].ev == ev)
			return m->edges[i].to;
	return -1;
}

const char *zs_fsm_state(const struct zs_fsm *m, int s)
{
	return s >= 0 && s < m->n_states ? m->states[s] : "?";
}

const char *zs_fsm_event(const struct zs_fsm *m, int ev)
{
	return ev >= 0 && ev < m->n_events ? m->events[ev] : "?";
}
