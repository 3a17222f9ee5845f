/*
 * live_trainer.c - the liveness world's trainers, as client/lease.c and
 * client/conns.c behave: a renewal every second on its own connection; a
 * reconnect (a start's, a resume's) says its count odd first, tried until
 * the coordinator takes it, closes and makes its connections again (a new
 * odd count for each try, all of them made or none), then says it even;
 * a restarted server's connection made again. And the checks a death
 * leaves: judged within its lease, or gone within gone_ms.
 */
#include "sim/live.h"

#include "base/mutant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An event of a stopped process waits for it to continue. */
static bool stopped(struct world *w, const struct sim_ev *e)
{
	struct trainer *t = &w->t[e->who];

	if (w->s.now_us >= t->paused_until)
		return false;
	sim_at(&w->s, t->paused_until - w->s.now_us, *e);
	return true;
}

/* After one of its actions: the armed stop, if any. */
static void acted(struct world *w, int r)
{
	struct trainer *t = &w->t[r];

	if (!t->pause_after)
		return;
	t->pause_after = false;
	t->paused_until = w->s.now_us + sim_range(&w->s, 3500 * MS, 6500 * MS);
	sim_log(&w->s, "FAULT rank %d stopped right after its action, %" PRId64 " ms", r,
		(t->paused_until - w->s.now_us) / MS);
}

static void renew(struct world *w, int r, int sync)
{
	struct trainer *t = &w->t[r];

	if (lw_tr_cut(w, r) || !w->co.up) {
		if (sync) /* not said: the RPC's deadline */
			lw_ev(w, DEADLINE_MS * MS, E_SYNC_DONE, r, t->proc, sync >> 1, 0);
		return;
	}
	lw_ev(w, lw_lat(w), E_C_RENEW, r, t->proc, (int64_t)t->reconnects, sync);
}

static void close_conn(struct world *w, int r, int s);

static void hello(struct world *w, int r, int s)
{
	struct trainer *t = &w->t[r];
	int64_t l = lw_lat(w);

	close_conn(w, r, s); /* one connection per server */
	t->c[s] = (struct conn){.id = ++w->next_conn, .arrive_us = w->s.now_us + l,
				.inc = w->sv[s].inc};
	/* made to the server's incarnation now: one restarted before the
	 * HELLO arrives reset it (its E_BROKEN tells the trainer) */
	lw_ev4(w, l, E_S_HELLO, s, r, t->proc, t->c[s].id,
	       (int64_t)(t->reconnects | (uint64_t)t->c[s].inc << HELLO_INC_SHIFT));
}

static void close_conn(struct world *w, int r, int s)
{
	struct trainer *t = &w->t[r];
	struct conn *c = &t->c[s];
	int64_t at;

	if (!c->id)
		return;
	/* the bye follows its HELLO on the wire */
	at = w->s.now_us + lw_lat(w);
	if (at <= c->arrive_us)
		at = c->arrive_us + 1;
	lw_ev(w, at - w->s.now_us, E_S_BYE, s, r, 0, c->id);
	*c = (struct conn){0};
}

static void connect_all(struct world *w, int r)
{
	w->t[r].want = w->n_srv;
	for (int s = 0; s < w->n_srv; s++)
		hello(w, r, s);
}

/* client/conns.c tr_reconnect (a start's, a resume's): the odd count said
 * (tried until taken, within its bound), then every connection closed and
 * made again, then the even count. */
static void begin_reconnect(struct world *w, int r)
{
	struct trainer *t = &w->t[r];

	if (!(t->reconnects & 1))
		t->reconnects++;
	t->phase = 1;
	t->resume_us = w->s.now_us;
	renew(w, r, 1 | 2);
}

static void trainer_exit(struct world *w, int r, const char *how)
{
	struct trainer *t = &w->t[r];

	sim_log(&w->s, "rank %d (process %" PRId64 ") %s", r, t->proc, how);
	for (int s = 0; s < w->n_srv; s++)
		close_conn(w, r, s);
	t->alive = false;
	t->paused_until = 0;
	t->pause_after = false;
	t->killed_us = w->s.now_us;
	t->killed_count = t->reconnects;
}

void lw_kill_trainer(struct world *w, int r)
{
	struct trainer *t = &w->t[r];
	bool held = false;
	int64_t fast = (GONE_MS + SWEEP_MS + 1500) * MS;

	if (!t->alive)
		return;
	/* held: a server counts one of its connections (a restarted one
	 * forgot those it had), or will (a HELLO on its way to one up) */
	for (int s = 0; s < w->n_srv; s++) {
		const struct conn *c = &t->c[s];
		if (!c->id)
			continue;
		for (int k = 0; k < MAXC; k++)
			held |= w->sv[s].open[r][k] == c->id;
		held |= !c->acked && c->arrive_us > w->s.now_us && w->sv[s].up &&
			c->inc == w->sv[s].inc;
	}
	trainer_exit(w, r, held ? "killed (SIGKILL), holding data connections" : "killed (SIGKILL)");
	/* the lease bounds every death; a connection dropped with the count
	 * even, the gone bound */
	lw_ev(w, (LEASE_MS + SWEEP_MS + 1500) * MS, E_CHECK_DEAD, r, t->proc, 0, 0);
	if (held && !(t->reconnects & 1))
		lw_ev(w, fast, E_CHECK_DEAD, r, t->proc, 1, 0);
	else
		w->st->lease_only++;
}

void lw_check_dead(struct world *w, int r, int64_t proc, bool fast)
{
	struct member *m = &w->co.m[r];
	int64_t since = w->s.now_us - w->t[r].killed_us;

	w->st->checks++;
	if (!m->held || m->proc != proc) {
		w->st->fast_checked += fast;
		return;
	}
	if (fast) {
		int64_t healed, due;
		if (lw_noisy(w, w->t[r].killed_us - DEADLINE_MS * MS, w->s.now_us, &healed))
			return; /* a note lost with a restart: the lease bounds */
		/* a note that waited out a cut goes at the first poll after
		 * its send's deadline once healed */
		due = healed + (DEADLINE_MS + POLL_MS + SWEEP_MS + 1500) * MS;
		if (healed && due > w->s.now_us) {
			lw_ev(w, due - w->s.now_us, E_CHECK_DEAD, r, proc, 1, 0);
			return;
		}
		if (m->live.reconnects < w->t[r].killed_count)
			return; /* its last count never reached the coordinator (cut
				 * off as it reconnected, or said before the
				 * coordinator restarted): the lease bounds */
		sim_fail(&w->s, "rank %d's process %" PRId64 " died %" PRId64 " ms ago holding data connections, and the coordinator has not taken it for gone (gone bound %d ms)",
		     r, proc, since / MS, GONE_MS);
		return;
	}
	if (!w->co.up || w->s.now_us < w->co_up_us + (LEASE_MS + SWEEP_MS + 1500) * MS) {
		/* the coordinator restarted since: a lease from its start */
		int64_t at = w->co_up_us + (LEASE_MS + SWEEP_MS + 1500) * MS;
		lw_ev(w, (w->co.up && at > w->s.now_us ? at - w->s.now_us : 1000 * MS), E_CHECK_DEAD, r,
		   proc, 0, 0);
		return;
	}
	sim_fail(&w->s, "rank %d's process %" PRId64 " died %" PRId64 " ms ago and is still a member (lease %d ms)",
	     r, proc, since / MS, LEASE_MS);
}

void lw_trainer_event(struct world *w, const struct sim_ev *e)
{
	int r = e->who;
	struct trainer *t = &w->t[r];

	if (e->kind == E_START) {
		*t = (struct trainer){.proc = t->proc + 1, .alive = true, .phase = 5,
				      .cut_until = t->cut_until, .long_cut_until = t->long_cut_until};
		sim_log(&w->s, "rank %d: process %" PRId64 " starts", r, t->proc);
		lw_ev(w, lw_lat(w), E_C_JOIN, r, t->proc, 0, 0);
		return;
	}
	if (e->a != t->proc || !t->alive)
		return; /* an earlier process's */
	if (stopped(w, e))
		return;
	switch (e->kind) {
	case E_RENEW:
		renew(w, r, 0);
		lw_ev(w, RENEW_MS * MS, E_RENEW, r, t->proc, 0, 0);
		break;
	case E_JOINED:
		if (!e->b) { /* not taken (cut off, or the rank still held): it
			      * exits, and another process tries */
			trainer_exit(w, r, "could not join: exits");
			lw_ev(w, RENEW_MS * MS, E_START, r, 0, 0, 0);
			return;
		}
		lw_ev(w, RENEW_MS * MS, E_RENEW, r, t->proc, 0, 0);
		begin_reconnect(w, r);
		break;
	case E_RESUME:
		if (!t->phase)
			begin_reconnect(w, r);
		break;
	case E_SYNC_DONE:
		/* client/lease.c tr_lease_reconnecting: the odd count is said
		 * again until the coordinator takes it (within its bound) */
		if (e->b && t->phase == 1 && !e->c &&
		    w->s.now_us - t->resume_us < ZS_LIVE_RECONNECTING_WAIT_MS * MS &&
		    !ZS_MUTANT(ZS_MUT_ODD_NOT_AWAITED)) {
			lw_ev(w, 200 * MS, E_RETRY_ODD, r, t->proc, 0, 0);
			break;
		}
		if (e->b && t->phase == 1) { /* said odd: close, connect again */
			for (int s = 0; s < w->n_srv; s++)
				close_conn(w, r, s);
			t->phase = 2;
			connect_all(w, r);
		} else if (!e->b && t->phase == 3) {
			t->phase = 0;
			lw_ev(w, sim_range(&w->s, 1000 * MS, 6000 * MS), E_RESUME, r, t->proc, 0, 0);
		}
		break;
	case E_HELLO_ACK:
		if (t->c[e->b].id != e->c)
			break; /* an earlier connection's */
		t->c[e->b].acked = true;
		t->reset_open &= ~(1u << e->b);
		if (--t->want > 0)
			break;
		if (t->phase == 2) {
			t->reconnects++;
			t->phase = 3;
			renew(w, r, 1);
		}
		break;
	case E_HELLO_FAIL: /* the server down: again in 200 ms */
	case E_BROKEN:     /* a restarted server's, or one reset: connect again */
		if (t->c[e->b].id != e->c)
			break; /* an earlier connection's */
		if (e->kind == E_HELLO_FAIL && t->phase == 2) {
			/* client/conns.c tr_reconnect: a server not ready
			 * fails the whole connect; a new odd count is said
			 * (tr_lease_reconnect_again), every connection made
			 * so far closed, and all made again */
			t->reconnects += 2;
			t->phase = 1;
			t->resume_us = w->s.now_us;
			lw_ev(w, 50 * MS, E_RETRY_ODD, r, t->proc, 0, 0); /* its 50 ms sleep */
			break;
		}
		if (t->c[e->b].acked)
			t->want++;
		t->c[e->b] = (struct conn){0};
		lw_ev(w, 200 * MS, E_RETRY, r, t->proc, e->b, 0);
		break;
	case E_RETRY:
		if (!t->c[e->b].id)
			hello(w, r, (int)e->b);
		break;
	case E_RETRY_ODD:
		if (t->phase == 1)
			renew(w, r, 1 | 2);
		break;
	case E_EVICTED:
		trainer_exit(w, r, "was told it is no member (taken for lost): exits");
		lw_ev(w, sim_range(&w->s, 500 * MS, 3000 * MS), E_START, r, 0, 0, 0);
		break;
	}
	acted(w, r);
}
