/*
 * liveness.c - the first simulated world: is a trainer alive? One
 * coordinator, S servers and T trainer ranks, in one thread, on the
 * simulator's clock (sim/kernel.h), running the real cores: the
 * coordinator's judgement (model/liveness.c) and each server's count of a
 * rank's connections and its notes (engine/conns.c). What the daemons'
 * shells do around them is modelled here as the code does it:
 *
 *   trainer   renews its lease every second (its own connection: renewals
 *             may overtake each other); now and then resumes: a renewal
 *             with its reconnect count odd, its data connections closed
 *             and made again, a renewal with it even (client/resume.c,
 *             client/lease.c); reconnects to a restarted server
 *   server    counts each rank's connections (HELLO, bye), polls its notes
 *             every 50 ms and sends them, one batch at a time, giving back
 *             a batch the coordinator did not answer (server/member.c)
 *   coord     takes renewals and notes as they come, judges every member
 *             every 500 ms (coord/recovery.c); a member judged gone or
 *             lapsed is dropped, and a replacement process joins
 *
 * Faults (sim/world.h): trainers stopped for less than their lease (at a
 * random time, or right after one of their own actions), killed,
 * partitioned from the coordinator (for seconds, or past the lease);
 * servers partitioned from it, restarted; the coordinator restarted (its
 * liveness marks are not persisted); single messages delayed.
 *
 * Invariants, checked as the run goes and at its end:
 *   - a live process is never taken for gone (a stop shorter than the
 *     lease costs nothing), unless it was cut off from the coordinator
 *     past its lease (out either way), or the network ended one of its
 *     data connections and it has not made it again, or not renewed a
 *     renewal period after (to the coordinator, what a death looks like:
 *     the fast path's price, a step redone, never a wrong bit);
 *     lapsed only when the coordinator really heard no renewal of it for
 *     the lease
 *   - a dead process is judged within its lease (plus a sweep), and, when
 *     it held a data connection, its count even and heard by the
 *     coordinator, and no restart stood between its servers and the
 *     coordinator (a partition delays it to its healing), taken for gone
 *     within gone_ms (plus a sweep): its replacement redoes a step, no
 *     rollback
 *   - a member's reconnect count, as the coordinator holds it, never
 *     goes back
 */
#include "sim/live.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lw_ev4(struct world *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b,
		int64_t c, int64_t d)
{
	sim_at(&w->s, delay_us,
	       (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c, .d = d});
}

void lw_ev(struct world *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b, int64_t c)
{
	lw_ev4(w, delay_us, kind, who, a, b, c, 0);
}

int64_t lw_now_ms(const struct world *w)
{
	return w->s.now_us / MS;
}

/* A message's time on the wire: mostly a fraction of a millisecond; a
 * delayed one (the SF_SLOW fault) up to 400 ms, so that messages sent on
 * different connections overtake each other. */
int64_t lw_lat(struct world *w)
{
	if (sim_chance(&w->s, 0.03)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 20 * MS, 400 * MS);
	}
	return sim_range(&w->s, 50, 2 * MS);
}

bool lw_tr_cut(const struct world *w, int r)
{
	return w->s.now_us < w->t[r].cut_until || w->s.now_us < w->t[r].long_cut_until;
}

/* Whether a restart overlaps [from, to]; *healed: the latest end of a cut
 * that does (0: none). */
bool lw_noisy(const struct world *w, int64_t from, int64_t to, int64_t *healed)
{
	bool restart = false;

	*healed = 0;
	for (int i = 0; i < w->n_noisy; i++)
		if (w->noisy[i].from <= to && w->noisy[i].to >= from) {
			restart |= w->noisy[i].restart;
			if (!w->noisy[i].restart && w->noisy[i].to > *healed)
				*healed = w->noisy[i].to;
		}
	return restart;
}

void lw_add_noisy(struct world *w, int64_t from, int64_t to, bool restart)
{
	if (w->n_noisy < (int)(sizeof w->noisy / sizeof w->noisy[0]))
		w->noisy[w->n_noisy++] = (struct window){from, to, restart};
	else /* full: everything from here on is excused */
		w->noisy[w->n_noisy - 1] = (struct window){from, INT64_MAX / 2, true};
}

/* --------------------------------------------------------------- faults */

static void fault(struct world *w, int k)
{
	int r = (int)sim_below(&w->s, (uint64_t)w->n_tr);
	int s = (int)sim_below(&w->s, (uint64_t)w->n_srv);
	struct trainer *t = &w->t[r];

	w->st->faults[k]++;
	switch (k) {
	case SF_PAUSE:
		if (!t->alive || t->paused_until > w->s.now_us)
			break;
		/* shorter than the lease by a renewal and more: it costs
		 * nothing */
		t->paused_until = w->s.now_us + sim_range(&w->s, 500 * MS, 6500 * MS);
		sim_log(&w->s, "FAULT rank %d stopped for %" PRId64 " ms", r,
			(t->paused_until - w->s.now_us) / MS);
		lw_ev(w, t->paused_until - w->s.now_us, E_UNPAUSE, r, 0, 0, 0);
		break;
	case SF_PAUSE_AFTER:
		t->pause_after = true;
		break;
	case SF_KILL:
		sim_log(&w->s, "FAULT rank %d killed", r);
		lw_kill_trainer(w, r);
		break;
	case SF_CUT_TRAINER: {
		bool lng = sim_chance(&w->s, 0.2);
		int64_t d = lng ? sim_range(&w->s, 12000 * MS, 20000 * MS)
				: sim_range(&w->s, 200 * MS, 2500 * MS);
		sim_log(&w->s, "FAULT rank %d partitioned from the coordinator for %" PRId64 " ms", r,
			d / MS);
		if (lng)
			t->long_cut_until = w->s.now_us + d;
		else
			t->cut_until = w->s.now_us + d;
		break;
	}
	case SF_CUT_SERVER: {
		int64_t d = sim_range(&w->s, 200 * MS, 5000 * MS);
		sim_log(&w->s, "FAULT server %d partitioned from the coordinator for %" PRId64 " ms",
			s, d / MS);
		w->sv[s].cut_until = w->s.now_us + d;
		lw_add_noisy(w, w->s.now_us, w->s.now_us + d, false);
		break;
	}
	case SF_RESET: { /* the network ends one connection: both sides see it */
		struct conn *c = &t->c[s];
		if (!t->alive || !c->id || !c->acked)
			break;
		sim_log(&w->s, "FAULT rank %d's connection to server %d reset", r, s);
		t->reset_us = w->s.now_us;
		t->reset_open |= 1u << s;
		lw_ev(w, lw_lat(w), E_S_BYE, s, r, 0, c->id);
		lw_ev(w, lw_lat(w), E_BROKEN, r, t->proc, s, c->id);
		break;
	}
	case SF_SERVER_RESTART:
		if (w->sv[s].up)
			lw_server_restart(w, s);
		break;
	case SF_COORD_RESTART:
		if (w->co.up)
			lw_coord_restart(w);
		break;
	}
}

/* A run's faults: a handful of each kind a seed draws, at random times. */
static void plan_faults(struct world *w)
{
	static const int weight[SF_COUNT] = {[SF_PAUSE] = 6, [SF_PAUSE_AFTER] = 8, [SF_KILL] = 3,
					     [SF_CUT_TRAINER] = 2, [SF_CUT_SERVER] = 3,
					     [SF_SERVER_RESTART] = 1, [SF_COORD_RESTART] = 1,
					     [SF_RESET] = 3};
	int total = 0, n = (int)sim_range(&w->s, 8, 24);

	for (int k = 0; k < SF_COUNT; k++)
		total += weight[k];
	for (int i = 0; i < n; i++) {
		int x = (int)sim_below(&w->s, (uint64_t)total), k = 0;
		while (x >= weight[k])
			x -= weight[k++];
		lw_ev(w, sim_range(&w->s, 2000 * MS, (RUN_MS - 15000) * MS), E_FAULT, k, 0, 0, 0);
	}
}

int live_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	struct world *w = calloc(1, sizeof *w);
	struct sim_ev e;
	int rc;

	if (!w) {
		snprintf(why, why_n, "out of memory");
		return 1;
	}
	sim_init(&w->s, seed, tracing, why, why_n);
	w->st = st;
	w->s.now_us = 1000 * MS; /* the coordinator's clock is never 0 */
	w->n_srv = (int)sim_range(&w->s, 1, MAXS);
	w->n_tr = (int)sim_range(&w->s, 1, MAXT);
	sim_log(&w->s, "seed %" PRIu64 ": %d server(s), %d trainer rank(s); lease %d ms, gone %d ms",
		seed, w->n_srv, w->n_tr, LEASE_MS, GONE_MS);
	w->co.up = true;
	w->co_up_us = w->s.now_us;
	for (int s = 0; s < w->n_srv; s++) {
		w->sv[s].up = true;
		w->sv[s].inc = 1;
		lw_ev(w, sim_range(&w->s, 0, POLL_MS * MS), E_S_POLL, s, 1, 0, 0);
	}
	lw_ev(w, SWEEP_MS * MS, E_C_SWEEP, 0, 0, 0, 0);
	for (int r = 0; r < w->n_tr; r++)
		lw_ev(w, sim_range(&w->s, 0, 500 * MS), E_START, r, 0, 0, 0);
	plan_faults(w);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < (RUN_MS + 1000) * MS) {
		switch (e.kind) {
		case E_C_RENEW: lw_coord_renew(w, e.who, e.a, (uint64_t)e.b, (int)e.c); break;
		case E_C_JOIN: lw_coord_join(w, e.who, e.a); break;
		case E_C_NOTES: lw_coord_notes(w, e.who, (int)e.a); break;
		case E_C_SWEEP: lw_coord_sweep(w, (int)e.a); break;
		case E_C_UP: lw_coord_up(w); break;
		case E_S_HELLO: lw_server_hello(w, e.who, (int)e.a, e.b, e.c, (uint64_t)e.d); break;
		case E_S_BYE: lw_server_bye(w, e.who, (int)e.a, e.c); break;
		case E_S_POLL: lw_server_poll(w, e.who, (int)e.a); break;
		case E_S_SENT: lw_server_sent(w, e.who, (int)e.a, e.b != 0); break;
		case E_S_UP:
			w->sv[e.who].up = true;
			lw_ev(w, 0, E_S_POLL, e.who, w->sv[e.who].inc, 0, 0);
			break;
		case E_FAULT: fault(w, e.who); break;
		case E_CHECK_DEAD: lw_check_dead(w, e.who, e.a, e.b != 0); break;
		case E_UNPAUSE: break; /* the process's own events wait for it */
		default: lw_trainer_event(w, &e); break;
		}
	}
	for (int s = 0; s < MAXS; s++)
		zs_notes_free(&w->sv[s].notes);
	rc = sim_end(&w->s, &st->events);
	free(w);
	return rc;
}

const char *sim_fault_name(int k)
{
	static const char *const names[SF_COUNT] = {
	    "pause", "pause-after-action", "kill", "cut-trainer", "cut-server", "slow-message",
	    "server-restart", "coordinator-restart", "connection-reset", "failover",
	    "record-flipped", "job-recreated", "rollback", "stop"};

	return k >= 0 && k < SF_COUNT ? names[k] : "?";
}
