/*
 * live_nodes.c - the liveness world's servers and coordinator: the real
 * cores (engine/conns.c: a server's count of a rank's connections and its
 * notes; model/liveness.c: the coordinator's judgement) in the shells the
 * daemons give them (server/member.c polls and sends the notes, one batch
 * at a time, every 50 ms; coord/recovery.c takes renewals and notes and
 * judges every member each sweep).
 */
#include "sim/live.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A process's session is its number (the daemons': a random 64-bit one). */
static void server_note(struct world *w, int s, int r, enum zs_conns_note what, uint64_t count,
			uint64_t session)
{
	if (what == ZS_CONNS_NONE)
		return;
	sim_log(&w->s, "server %d: rank %d %s (connection of process %" PRIu64 ", count %" PRIu64 ")",
		s, r, what == ZS_CONNS_BACK ? "back" : "dropped", session, count);
	zs_notes_add(&w->sv[s].notes, "job", 1, (uint32_t)r, what == ZS_CONNS_BACK, count, session);
}

void lw_server_hello(struct world *w, int s, int r, int64_t proc, int64_t id, uint64_t count)
{
	struct server *v = &w->sv[s];
	struct trainer *t = &w->t[r];
	const int inc = (int)(count >> HELLO_INC_SHIFT);
	int k;

	count &= (1ull << HELLO_INC_SHIFT) - 1;
	if (inc != v->inc)
		return; /* its connection was reset by the restart since: it never arrives */
	if (!v->up) {
		lw_ev(w, lw_lat(w), E_HELLO_FAIL, r, proc, s, id);
		return;
	}
	for (k = 0; k < MAXC && v->open[r][k]; k++)
		;
	if (k == MAXC) {
		sim_fail(&w->s, "server %d holds %d connections of rank %d (a leak in the model)", s, MAXC, r);
		return;
	}
	v->open[r][k] = id;
	v->open_count[r][k] = count;
	v->open_session[r][k] = (uint64_t)proc;
	uint64_t session = (uint64_t)proc;
	enum zs_conns_note what = zs_conns_up(&v->rc[r], count, session, &count, &session);
	server_note(w, s, r, what, count, session);
	if (t->proc != proc || !t->alive) { /* its process died: the kernel closes it */
		lw_ev(w, lw_lat(w), E_S_BYE, s, r, 0, id);
		return;
	}
	lw_ev(w, lw_lat(w), E_HELLO_ACK, r, proc, s, id);
}

/* A connection ended: one this incarnation counted (a restart forgets
 * the earlier one's), by its id. */
void lw_server_bye(struct world *w, int s, int r, int64_t id)
{
	struct server *v = &w->sv[s];

	if (!v->up)
		return;
	for (int k = 0; k < MAXC; k++)
		if (v->open[r][k] == id) {
			uint64_t count = v->open_count[r][k], session;
			v->open[r][k] = 0;
			enum zs_conns_note what = zs_conns_down(&v->rc[r], &count, &session);
			server_note(w, s, r, what, count, session);
			return;
		}
}

void lw_server_poll(struct world *w, int s, int inc)
{
	struct server *v = &w->sv[s];

	if (!v->up || v->inc != inc)
		return;
	lw_ev(w, POLL_MS * MS, E_S_POLL, s, inc, 0, 0);
	if (v->sending || !v->notes.n)
		return;
	v->n_flight = zs_notes_take(&v->notes, v->flight, 64);
	if (!v->n_flight)
		return;
	v->sending = true;
	sim_log(&w->s, "server %d: sends %u note(s)", s, v->n_flight);
	if (!w->co.up || w->s.now_us < v->cut_until) {
		lw_ev(w, DEADLINE_MS * MS, E_S_SENT, s, inc, 0, 0);
		return;
	}
	lw_ev(w, lw_lat(w), E_C_NOTES, s, inc, 0, 0);
}

void lw_server_sent(struct world *w, int s, int inc, bool ok)
{
	struct server *v = &w->sv[s];

	if (!v->up || v->inc != inc)
		return;
	v->sending = false;
	sim_log(&w->s, "server %d: %u note(s) %s", s, v->n_flight,
		ok ? "taken" : "not answered: given back");
	zs_notes_settle(&v->notes, ok);
	v->n_flight = 0;
}

void lw_server_restart(struct world *w, int s)
{
	struct server *v = &w->sv[s];
	int64_t down = sim_range(&w->s, 300 * MS, 2000 * MS);

	sim_log(&w->s, "FAULT server %d restarts (down %" PRId64 " ms)", s, down / MS);
	lw_add_noisy(w, w->s.now_us, w->s.now_us + down + 2 * DEADLINE_MS * MS, true);
	zs_notes_free(&v->notes);
	memset(v->rc, 0, sizeof v->rc);
	memset(v->open, 0, sizeof v->open);
	v->up = false;
	v->sending = false;
	v->n_flight = 0;
	v->inc++;
	for (int r = 0; r < w->n_tr; r++) /* their connections break */
		if (w->t[r].alive && w->t[r].c[s].id)
			lw_ev(w, lw_lat(w), E_BROKEN, r, w->t[r].proc, s, w->t[r].c[s].id);
	lw_ev(w, down, E_S_UP, s, 0, 0, 0);
}

/* ---------------------------------------------------------- coordinator */

void lw_coord_renew(struct world *w, int r, int64_t proc, uint64_t count, int sync)
{
	struct member *m = &w->co.m[r];
	bool ok = w->co.up && !lw_tr_cut(w, r);

	bool taken = ok && m->held && m->proc == proc;

	if (taken) {
		w->t[r].taken_us = w->s.now_us;
		uint64_t before = m->live.reconnects;
		zs_live_renewed(&m->live, lw_now_ms(w), count);
		m->heard_us = w->s.now_us;
		w->st->checks++;
		if (m->live.reconnects < before)
			sim_fail(&w->s, "rank %d's reconnect count went back from %" PRIu64 " to %" PRIu64
				" (a late renewal's taken)",
			     r, before, m->live.reconnects);
		sim_log(&w->s, "coord: rank %d (process %" PRId64 ") renews, count %" PRIu64 "%s", r,
			proc, count, sync ? " (before/after its reconnect)" : "");
	} else if (ok) {
		lw_ev(w, lw_lat(w), E_EVICTED, r, proc, 0, 0);
	}
	if (sync)
		lw_ev(w, ok ? lw_lat(w) : DEADLINE_MS * MS, E_SYNC_DONE, r, proc, sync >> 1, taken);
}

void lw_coord_join(struct world *w, int r, int64_t proc)
{
	struct member *m = &w->co.m[r];
	bool ok = w->co.up && !lw_tr_cut(w, r) && !m->held;

	if (ok) {
		m->held = true;
		m->proc = proc;
		zs_live_joined(&m->live, lw_now_ms(w));
		w->t[r].taken_us = w->s.now_us;
		m->heard_us = w->s.now_us;
		sim_log(&w->s, "coord: rank %d joins (process %" PRId64 ")", r, proc);
	}
	lw_ev(w, ok ? lw_lat(w) : DEADLINE_MS * MS, E_JOINED, r, proc, ok, 0);
}

void lw_coord_notes(struct world *w, int s, int inc)
{
	struct server *v = &w->sv[s];
	bool ok = w->co.up && w->s.now_us >= v->cut_until;

	if (!v->up || v->inc != inc)
		return;
	for (uint32_t i = 0; ok && i < v->n_flight; i++) {
		struct member *m = &w->co.m[v->flight[i].rank];
		if (!m->held)
			continue;
		enum zs_live_mark mk = zs_live_connections(&m->live, lw_now_ms(w), v->flight[i].back,
							   v->flight[i].reconnects, v->flight[i].session,
							   (uint64_t)m->proc);
		sim_log(&w->s, "coord: server %d says rank %u %s (count %" PRIu64 ")%s", s,
			v->flight[i].rank, v->flight[i].back ? "back" : "dropped",
			v->flight[i].reconnects,
			mk == ZS_LIVE_MARKED ? ": marked" : mk == ZS_LIVE_CLEARED ? ": cleared" : "");
	}
	/* the answer may be lost on the way back: the server gives the
	 * batch back, though it was taken */
	ok = ok && w->s.now_us >= v->cut_until && !sim_chance(&w->s, 0.02);
	lw_ev(w, ok ? lw_lat(w) : DEADLINE_MS * MS, E_S_SENT, s, inc, ok, 0);
}

void lw_coord_sweep(struct world *w, int inc)
{
	const struct zs_live_cfg cfg = {LEASE_MS, GONE_MS};

	if (!w->co.up || w->co.inc != inc)
		return;
	lw_ev(w, SWEEP_MS * MS, E_C_SWEEP, 0, inc, 0, 0);
	for (int r = 0; r < w->n_tr; r++) {
		struct member *m = &w->co.m[r];
		struct trainer *t = &w->t[r];
		int64_t quiet;
		if (!m->held)
			continue;
		enum zs_live_verdict v = zs_live_judge(&m->live, lw_now_ms(w), &cfg, &quiet);
		w->st->checks++;
		if (v == ZS_LIVE_OK)
			continue;
		bool live = t->proc == m->proc && t->alive;
		sim_log(&w->s, "coord: rank %d (process %" PRId64 ", %s) judged %s (quiet %" PRId64 " ms)",
			r, m->proc, live ? "alive" : "dead", zs_live_verdict_name(v), quiet);
		if (v == ZS_LIVE_GONE) {
			w->st->verdicts_gone++;
			/* cut off past its lease, it is out either way (its
			 * resume closes its connections once it has waited
			 * its bound to say so): not a stop that must cost nothing */
			bool excused = w->s.now_us < t->long_cut_until + DEADLINE_MS * MS ||
				       w->s.now_us - t->taken_us >= (LEASE_MS - RENEW_MS) * MS;
			/* a connection ended by the network, and no renewal
			 * since: to the coordinator that is a death, and the
			 * fast path's price (its replacement redoes a step; it
			 * exits when it continues), never a wrong bit */
			excused |= t->reset_open ||
				   m->heard_us < t->reset_us + (RENEW_MS + 500) * MS;
			if (live && !excused)
				sim_fail(&w->s, "rank %d's process %" PRId64 " is alive%s and was taken for gone (quiet %" PRId64 " ms, reconnect count %" PRIu64 ")",
				     r, m->proc, t->paused_until > w->s.now_us ? " (stopped)" : "", quiet,
				     m->live.reconnects);
		} else {
			w->st->verdicts_lapsed++;
			if (live && w->s.now_us - m->heard_us < (LEASE_MS - 1) * MS)
				sim_fail(&w->s, "rank %d's process %" PRId64 " was taken as lapsed, but its last renewal was taken %" PRId64 " ms ago (lease %d ms)",
				     r, m->proc, (w->s.now_us - m->heard_us) / MS, LEASE_MS);
		}
		m->held = false;
		if (!live) /* its replacement, after a process start */
			lw_ev(w, sim_range(&w->s, 500 * MS, 3000 * MS), E_START, r, 0, 0, 0);
	}
}

void lw_coord_restart(struct world *w)
{
	int64_t down = sim_range(&w->s, 500 * MS, 3000 * MS);

	sim_log(&w->s, "FAULT coordinator restarts (down %" PRId64 " ms)", down / MS);
	lw_add_noisy(w, w->s.now_us, w->s.now_us + down + 2 * DEADLINE_MS * MS, true);
	w->co.up = false;
	w->co.inc++;
	lw_ev(w, down, E_C_UP, 0, 0, 0, 0);
}

void lw_coord_up(struct world *w)
{
	w->co.up = true;
	w->co_up_us = w->s.now_us;
	/* members are persisted; their liveness is not: a lease from the
	 * first sweep */
	for (int r = 0; r < w->n_tr; r++) {
		w->co.m[r].live = (struct zs_live){0};
		w->co.m[r].heard_us = w->s.now_us;
	}
	sim_log(&w->s, "coord: serving again");
	lw_ev(w, SWEEP_MS * MS, E_C_SWEEP, 0, w->co.inc, 0, 0);
}
