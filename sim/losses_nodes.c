/*
 * losses_nodes.c - the loss world's coordinator and servers (sim/losses.c
 * is the world): leases and the reaper's sweep, a lost server's failover
 * or rollback by the real verdict (model/failover.h zs_loss_verdict), the
 * restore, requests served or refused, and the faults (kills, restarts,
 * stops, ranks cut off, the coordinator restarted). The coordinator
 * judges its servers by the real core (model/membership.h), as
 * coord/members.c runs it: registrations, heartbeats, the reaper's sweep.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mutant.h"
#include "model/failover.h"
#include "sim/losses.h"

void lx_ev(struct lworld *w, int64_t d, int kind, int who, int64_t a, int64_t b, int64_t c,
	   int64_t dd)
{
	sim_at(&w->s, d, (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c, .d = dd});
}

int64_t lx_lat(struct lworld *w)
{
	if (w->s.now_us < FAULTS_MS * (int64_t)MS && sim_chance(&w->s, 0.03)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 5 * MS, 200 * MS);
	}
	return sim_range(&w->s, 100, 2 * MS);
}

bool lx_paused(const struct lworld *w, int s)
{
	return w->sv[s].paused_until > w->s.now_us;
}

bool lx_cut(const struct lworld *w, int i)
{
	return w->r[i].cut_until > w->s.now_us || w->coord_down;
}

/* ------------------------------------------------------ the coordinator */

/* Each shard's copies as placed: shard k on server k, its replica on the
 * next server; each copy's state that of its server's incarnation then. */
void lx_place(struct lworld *w)
{
	for (int k = 0; k < w->S; k++) {
		w->copies[k][0] = k;
		w->copies[k][1] = w->replicated ? (k + 1) % w->S : -1;
		for (int c = 0; c < 2; c++)
			w->copy_inc[k][c] = w->copies[k][c] < 0 ? 0 : w->sv[w->copies[k][c]].inc;
	}
}

/* Whether some copy of the placement lost its state (its server killed
 * since it was placed there). */
static bool state_lost(const struct lworld *w)
{
	for (int k = 0; k < w->S; k++)
		for (int c = 0; c < 2; c++)
			if (w->copies[k][c] >= 0 && w->sv[w->copies[k][c]].inc != w->copy_inc[k][c])
				return true;
	return false;
}

static void rollback(struct lworld *w, const char *why)
{
	if (w->restoring) { /* coord_rollback: during its rollback, which goes on */
		sim_log(&w->s, "coordinator: %s, during the rollback (which goes on)", why);
		return;
	}
	w->st->checks++;
	if (!state_lost(w))
		return sim_fail(&w->s, "the job rolls back (%s) though no copy of it lost its state",
				why);
	w->tl++;
	w->rolled_at = w->s.now_us;
	w->st->faults[SF_ROLLBACK]++;
	lx_place(w); /* restored: every copy rebuilt, once each server answers */
	w->restoring = true;
	sim_log(&w->s, "coordinator: %s: rollback, timeline %" PRIu64, why, w->tl);
}

/* coord/failover.c coord_failover: the placement without server s, the
 * copy left of each shard its primary, committed only when each shard has
 * one on a server up; then coord/recovery.c's verdict (model/failover.h). */
static void server_lost(struct lworld *w, int s, bool restarted)
{
	struct zs_loss l = {.restarted = restarted, .restore_pending = w->restoring};
	int np[NS][2], ni[NS][2];
	bool held = false, whole = true;

	for (int k = 0; k < w->S; k++)
		for (int c = 0; c < 2; c++)
			held |= w->copies[k][c] == s;
	if (!held)
		return;
	for (int k = 0; k < w->S; k++) {
		int n = 0;
		np[k][0] = np[k][1] = -1;
		for (int c = 0; c < 2; c++)
			if (w->copies[k][c] >= 0 && w->copies[k][c] != s) {
				ni[k][n] = w->copy_inc[k][c];
				np[k][n++] = w->copies[k][c];
			}
		whole &= n > 0 && zs_mbr_up(&w->sv[np[k][0]].m);
	}
	if (w->replicated && whole && !w->restoring) { /* no failover during a restore */
		memcpy(w->copies, np, sizeof np);
		memcpy(w->copy_inc, ni, sizeof ni);
		l.failed_over = true;
	}
	switch (zs_loss_verdict(&l)) {
	case ZS_LOSS_FAILED_OVER:
		w->st->faults[SF_FAILOVER]++;
		sim_log(&w->s, "coordinator: server %d %s: failed over", s,
			restarted ? "restarted without its state" : "missed its lease");
		return;
	case ZS_LOSS_ROLLBACK:
		return rollback(w, restarted ? "a server restarted without its state"
					     : "a server missed its lease");
	default:
		return;
	}
}

/* coord/failover.c coord_fail_over_down: a server came up; each server
 * still down is failed over from where the job can now. */
static void fail_over_down(struct lworld *w)
{
	for (int s = 0; s < w->S; s++)
		if (w->replicated && !w->restoring && zs_mbr_down(&w->sv[s].m) &&
		    !ZS_MUTANT(ZS_MUT_DOWN_NOT_RETRIED))
			server_lost(w, s, false);
}

/* server/member.c: a server started again registers (fresh: without
 * its state), again at each tick until the coordinator takes it; then
 * heartbeats. coord/members.c: the coordinator's core takes them. */
static void beat(struct lworld *w, int s)
{
	struct lw_server *v = &w->sv[s];
	int64_t now = w->s.now_us / MS;
	unsigned fx;

	if (!v->alive || lx_paused(w, s) || w->coord_down)
		return;
	if (!v->registering) {
		fx = zs_mbr_heartbeat(&v->m, now);
	} else {
		v->registering = false;
		fx = zs_mbr_registered(&v->m, now, true);
		if (fx & ZS_MBR_RESTARTED)
			server_lost(w, s, true);
	}
	if (fx & ZS_MBR_CAME_UP)
		fail_over_down(w);
}

void lx_heartbeat(struct lworld *w, int s)
{
	lx_ev(w, 500 * MS, LW_HB, s, 0, 0, 0, 0);
	beat(w, s);
}

bool lx_restored(const struct lworld *w)
{
	for (int k = 0; k < w->S; k++)
		for (int c = 0; c < 2; c++) {
			int s = w->copies[k][c];
			if (s >= 0 && (!w->sv[s].alive || !zs_mbr_up(&w->sv[s].m) || lx_paused(w, s)))
				return false;
		}
	return true;
}

/* The restore done once every server of the placement answers: each
 * copy's state is that of its server's incarnation now. */
void lx_settle(struct lworld *w)
{
	if (w->coord_down || !w->restoring || !lx_restored(w))
		return;
	w->restoring = false;
	lx_place(w);
	sim_log(&w->s, "coordinator: the restore of timeline %" PRIu64 " is done", w->tl);
}

void lx_sweep(struct lworld *w)
{
	lx_ev(w, 250 * MS, LW_SWEEP, 0, 0, 0, 0, 0);
	if (w->coord_down)
		return;
	lx_settle(w);
	for (int s = 0; s < w->S; s++) {
		int64_t quiet;
		bool heard = w->sv[s].m.last_hb_ms != 0;
		if (zs_mbr_judge(&w->sv[s].m, w->s.now_us / MS, LEASE_MS, &quiet) & ZS_MBR_LOST) {
			if (!heard)
				w->st->loss_unheard++;
			sim_log(&w->s, "coordinator: server %d %s for %" PRId64 " ms: marked down", s,
				heard ? "silent" : "unheard since its start", quiet);
			server_lost(w, s, false);
		}
	}
}

/* At the coordinator: the job as it is (a question of a rank cut off
 * meanwhile is not answered). */
void lx_at_coordinator(struct lworld *w, const struct sim_ev *e)
{
	struct lw_rank *r = &w->r[e->who];
	bool moved = true;

	if (lx_cut(w, e->who)) {
		lx_ev(w, CALL_MS * MS, LW_ANSWER, e->who, e->a, 0, 0, 0);
		return;
	}
	for (int k = 0; k < w->S; k++)
		moved &= w->copies[k][0] != r->fo_lost;
	lx_ev(w, lx_lat(w), LW_ANSWER, e->who, e->a, 1, (int64_t)w->tl, moved);
}

/* A server serves a request: of the job's timeline, to a shard it holds. */
void lx_serve(struct lworld *w, const struct sim_ev *e)
{
	struct lw_server *v = &w->sv[e->who];
	const struct lw_rank *r = &w->r[e->a];
	enum zs_status st = ZS_OK;
	int k = r->shard;

	if (!v->alive || v->inc != (int)e->c)
		return; /* the connection broke: the kill fails it */
	if (lx_paused(w, e->who)) {
		if (v->n_held < (int)(sizeof v->held / sizeof v->held[0])) {
			v->held[v->n_held][0] = (int)e->a;
			v->held[v->n_held++][1] = (int)e->b;
		}
		return;
	}
	if (r->tl != w->tl)
		st = ZS_EUNAVAIL; /* restored to another timeline: the connection closed */
	else if (w->copies[k][0] != e->who)
		st = ZS_ENOTFOUND; /* not the shard's primary (deposed) */
	/* served: a gather of a unit, a push reduced (tens to hundreds of ms) */
	lx_ev(w, lx_lat(w) + (st ? 0 : sim_range(&w->s, 20 * MS, 500 * MS)), LW_REPLY, (int)e->a, e->b, st,
	   0, 0);
}

/* Whether each shard with a copy on server s has one on a server up
 * beside it: a job that can fail over from s. */
static bool spared(const struct lworld *w, int s)
{
	for (int k = 0; k < w->S; k++) {
		bool on_s = false, other = false;
		for (int c = 0; c < 2; c++) {
			int q = w->copies[k][c];
			on_s |= q == s;
			other |= q >= 0 && q != s && w->sv[q].alive && zs_mbr_up(&w->sv[q].m);
		}
		if (on_s && !other)
			return false;
	}
	return true;
}

void lx_fault(struct lworld *w, const struct sim_ev *e)
{
	struct lw_server *v = &w->sv[e->who];

	switch (e->kind) {
	case LW_KILL:
		if (!v->alive)
			return;
		v->alive = false;
		v->inc++;
		v->n_held = 0;
		w->st->faults[SF_SERVER_RESTART]++;
		sim_log(&w->s, "server %d killed", e->who);
		for (int i = 0; i < w->R; i++) /* its connections end: the FIN */
			if (w->r[i].ph == LP_OP && w->r[i].server == e->who)
				lx_ev(w, lx_lat(w), LW_REPLY, i, w->r[i].req, ZS_EUNAVAIL, 0, 0);
		/* back 0.3 to 2 s later, or when said (a host slow to return)
		 * if its job can fail over from it: else no rank could go on
		 * without it, and each would rightly fail at its bound */
		lx_ev(w, e->a && spared(w, e->who) ? e->a : sim_range(&w->s, 300 * MS, 2000 * MS),
		      LW_RESTART, e->who, 0, 0, 0, 0);
		return;
	case LW_RESTART:
		v->alive = true;
		v->paused_until = 0;
		v->registering = true;
		sim_log(&w->s, "server %d restarted", e->who);
		beat(w, e->who); /* its registration */
		return;
	case LW_COORD_KILL:
		if (w->coord_down)
			return;
		w->coord_down = true;
		w->st->faults[SF_COORD_RESTART]++;
		sim_log(&w->s, "coordinator killed");
		lx_ev(w, e->a, LW_COORD_START, 0, 0, 0, 0, 0);
		return;
	case LW_COORD_START:
		/* its catalog (the placement, the timeline, a restore under
		 * way) persisted; its servers' liveness not: each unheard */
		w->coord_down = false;
		for (int s = 0; s < w->S; s++)
			zs_mbr_loaded(&w->sv[s].m);
		sim_log(&w->s, "coordinator started again");
		return;
	case LW_PAUSE:
		if (!v->alive || lx_paused(w, e->who))
			return;
		v->paused_until = w->s.now_us + e->a;
		w->st->faults[SF_PAUSE]++;
		sim_log(&w->s, "server %d stopped for %" PRId64 " ms", e->who, e->a / MS);
		lx_ev(w, e->a, LW_CONT, e->who, ++v->pauses, 0, 0, 0);
		return;
	case LW_CONT:
		if (e->a != v->pauses || !v->alive)
			return;
		sim_log(&w->s, "server %d continues", e->who);
		for (int h = 0; h < v->n_held; h++)
			lx_ev(w, 0, LW_SERVE, e->who, v->held[h][0], v->held[h][1], v->inc, 0);
		v->n_held = 0;
		return;
	case LW_CUT:
		w->r[e->who].cut_until = w->s.now_us + e->a;
		w->st->faults[SF_CUT_TRAINER]++;
		sim_log(&w->s, "rank %d cut off from the coordinator for %" PRId64 " ms", e->who, e->a / MS);
		return;
	}
}
