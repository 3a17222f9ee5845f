/*
 * losses.c - the seventh simulated world: does a lost server reach every
 * waiting rank as a failover or a rollback, never as a failure? 2 or 3
 * servers hold a job's shards, one copy each or two (replicas), and 1 to
 * 3 ranks run 30 ops each (a gather or a push of one shard, to its primary
 * in the rank's placement), each waited for as the step driver waits
 * (client/driver.c wait_op: in slices, watching for a lost server between
 * them), a request that fails handed to its failover (client/failover.c:
 * the coordinator's placement without the server, polled, its request sent
 * again to the new primary) or to the coordinator's verdict
 * (client/verdict.c), all three deciding through the real core
 * (model/verdict.c). The coordinator marks a server down when its lease
 * passes and fails a replicated job over from it, or waits for it; a
 * server restarted without its state fails the job over, or rolls it back
 * when a shard has no copy left on a server up (a new timeline; the
 * servers refuse requests of the old one): its verdicts are the real core
 * (model/failover.h zs_loss_verdict); ranks told to resume take the new
 * timeline once its restore is done, and go on.
 *
 * Faults: servers killed (restarted 0.3 to 2 s later, without their
 * state), servers stopped for 0.5 to 5 s (back with their state: a lease
 * passed meanwhile fails a replicated job over from them), a second server
 * lost while the first is recovered, and ranks cut off from the coordinator
 * for 1 to 15 s (its verdicts unheard; the step driver's bound is 10 s).
 *
 * Invariants:
 *   - the job rolls back only when a copy of its placement lost its state
 *     (a server only stopped is waited for)
 *   - a rank told to resume (ZS_ERESUME) is on a timeline the job left
 *   - a rank's wait fails (any status but ZS_ERESUME) only when the rank
 *     could not hear the coordinator during it: a rollback it can hear
 *     of is never lost in a status
 *   - every rank ends its ops once the faults end
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/failover.h"
#include "model/verdict.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define MS 1000
#define RUN_MS 150000
#define FAULTS_MS 60000
#define NS 3
#define NR 3
#define OPS 30
#define BOUND_MS 10000 /* the step driver's bound (zs_policy.op_timeout_ms, scaled) */
#define LEASE_MS 3000  /* a server's lease at the coordinator */
#define SLICE_MS 250
#define POLL_MS 100
#define CALL_MS 500    /* a coordinator call that gets no answer fails after this */

enum lw_kind {
	LW_HB,       /* who: server. Its heartbeat, every 500 ms */
	LW_SWEEP,    /* the coordinator's reaper */
	LW_KILL,     /* who: server */
	LW_RESTART,  /* who: server */
	LW_PAUSE,    /* who: server; a: for how long */
	LW_CONT,     /* who: server; a: its pause's number */
	LW_CUT,      /* who: rank; a: for how long */
	LW_SERVE,    /* who: server; a: rank; b: request; c: its incarnation */
	LW_REPLY,    /* who: rank; a: request; b: status */
	LW_TICK,     /* who: rank; a: its epoch. A slice, a poll, the next op */
	LW_LOOK,     /* who: rank; a: its epoch. Its question at the coordinator */
	LW_ANSWER,   /* who: rank; a: epoch; b: answered; c: the job's timeline; d: moved */
	LW_RENEW,    /* who: rank; a: 0 (send) or 1 + the job's timeline (the reply) */
};

struct lw_server {
	bool alive;
	int inc;             /* its incarnation: a connection is to one */
	int64_t paused_until;
	int pauses;
	/* the coordinator's view */
	int64_t last_hb;
	bool up;
	/* requests held while stopped: rank, request */
	int held[NR * 4][2];
	int n_held;
};

enum lw_phase { LP_IDLE, LP_OP, LP_FO, LP_VD, LP_RESUME, LP_DONE };
enum lw_from { LF_SLICE, LF_REQ };

struct lw_rank {
	enum lw_phase ph;
	int ep;               /* its timers and questions of an earlier phase are dropped */
	uint64_t tl, seen_tl;
	int primary[NS];      /* its placement: each shard's primary (-1: none) */
	int conn_inc[NS];     /* the incarnation each connection is to */
	bool down[NS];        /* marked down, as of its last renewal */
	int64_t cut_until;
	bool cut_in_wait;     /* it could not hear the coordinator during this wait */
	int ops;
	/* the op; its request's answer, come while a failover ran (0: none) */
	int shard, server, req;
	int kept_st1;
	struct zs_opwait w;
	/* a failover: from a slice or a request; the lost server; its deadline */
	enum lw_from fo_from;
	int fo_lost, lost_tried;
	bool fo_refused; /* the server answered that it holds the shard no more */
	int64_t fo_deadline;
	/* the verdict */
	struct zs_verdict v;
	struct zs_vdwait vw;
	enum zs_status vst;
	int64_t wait_t0;
};

struct lworld {
	struct sim s;
	struct sim_stats *st;
	int S, R;
	bool replicated;
	struct lw_server sv[NS];
	struct lw_rank r[NR];
	int next_req;
	/* the coordinator: its timeline (and when it last moved), each shard's
	 * copies (-1: none), primary first */
	uint64_t tl;
	int64_t rolled_at;
	int copies[NS][2];
	int copy_inc[NS][2]; /* the incarnation of each copy's server when placed */
	bool restoring;      /* a rollback's restore, until every server of it answers */
	int kills;
};

static void ev(struct lworld *w, int64_t d, int kind, int who, int64_t a, int64_t b, int64_t c,
	       int64_t dd)
{
	sim_at(&w->s, d, (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c, .d = dd});
}

static int64_t lat(struct lworld *w)
{
	if (w->s.now_us < FAULTS_MS * (int64_t)MS && sim_chance(&w->s, 0.03)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 5 * MS, 200 * MS);
	}
	return sim_range(&w->s, 100, 2 * MS);
}

static bool paused(const struct lworld *w, int s)
{
	return w->sv[s].paused_until > w->s.now_us;
}

static bool cut(const struct lworld *w, int i)
{
	return w->r[i].cut_until > w->s.now_us;
}

/* ------------------------------------------------------ the coordinator */

/* Each shard's copies as placed: shard k on server k, its replica on the
 * next server; each copy's state that of its server's incarnation then. */
static void place(struct lworld *w)
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
	place(w); /* restored: every copy rebuilt, once each server answers */
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
		whole &= n > 0 && w->sv[np[k][0]].up;
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

static void heartbeat(struct lworld *w, int s)
{
	struct lw_server *v = &w->sv[s];

	if (v->alive && !paused(w, s)) {
		v->last_hb = w->s.now_us;
		v->up = true;
	}
	ev(w, 500 * MS, LW_HB, s, 0, 0, 0, 0);
}

static bool restored(const struct lworld *w)
{
	for (int k = 0; k < w->S; k++)
		for (int c = 0; c < 2; c++) {
			int s = w->copies[k][c];
			if (s >= 0 && (!w->sv[s].alive || !w->sv[s].up || paused(w, s)))
				return false;
		}
	return true;
}

/* The restore done once every server of the placement answers: each
 * copy's state is that of its server's incarnation now. */
static void settle(struct lworld *w)
{
	if (!w->restoring || !restored(w))
		return;
	w->restoring = false;
	place(w);
	sim_log(&w->s, "coordinator: the restore of timeline %" PRIu64 " is done", w->tl);
}

static void sweep(struct lworld *w)
{
	settle(w);
	for (int s = 0; s < w->S; s++)
		if (w->sv[s].up && w->s.now_us - w->sv[s].last_hb > LEASE_MS * MS) {
			w->sv[s].up = false;
			server_lost(w, s, false);
		}
	ev(w, 250 * MS, LW_SWEEP, 0, 0, 0, 0, 0);
}

/* ------------------------------------------------------------ the ranks */

static void rank_wait(struct lworld *w, int i, int64_t d)
{
	ev(w, d, LW_TICK, i, w->r[i].ep, 0, 0, 0);
}

/* A question to the coordinator (get_job): its answer, or none. */
static void look(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];

	if (cut(w, i)) {
		r->cut_in_wait = true;
		ev(w, CALL_MS * MS, LW_ANSWER, i, r->ep, 0, 0, 0);
		return;
	}
	ev(w, lat(w), LW_LOOK, i, r->ep, 0, 0, 0);
}

static bool broken(const struct lworld *w, const struct lw_rank *r, int s)
{
	return !w->sv[s].alive || w->sv[s].inc != r->conn_inc[s];
}

static bool in_view(const struct lw_rank *r, int s, int S)
{
	for (int k = 0; k < S; k++)
		if (r->primary[k] == s)
			return true;
	return false;
}

/* client/verdict.c loss_seen: a connection broken, a server marked down. */
static bool loss_seen(const struct lworld *w, const struct lw_rank *r)
{
	for (int s = 0; s < w->S; s++)
		if (in_view(r, s, w->S) && (broken(w, r, s) || r->down[s]))
			return true;
	return false;
}

static void take_placement(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];

	for (int k = 0; k < w->S; k++) {
		r->primary[k] = w->copies[k][0];
		if (r->primary[k] >= 0 && broken(w, r, r->primary[k]) && w->sv[r->primary[k]].alive)
			r->conn_inc[r->primary[k]] = w->sv[r->primary[k]].inc; /* connected anew */
	}
}

static void send_req(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];
	int s = r->primary[r->shard];

	r->server = s;
	r->req = ++w->next_req;
	r->kept_st1 = 0;
	sim_log(&w->s, "rank %d: request %d, shard %d, to server %d", i, r->req, r->shard, s);
	if (s < 0 || broken(w, r, s)) { /* its connection broke: fails at once */
		ev(w, 0, LW_REPLY, i, r->req, ZS_EUNAVAIL, 0, 0);
		return;
	}
	ev(w, lat(w), LW_SERVE, s, i, r->req, w->sv[s].inc, 0);
}

static void next_op(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];

	r->ph = LP_OP;
	r->ep++;
	r->shard = (int)sim_below(&w->s, (uint64_t)w->S);
	r->cut_in_wait = cut(w, i);
	r->wait_t0 = w->s.now_us;
	zs_opw_start(&r->w, w->s.now_us / MS, BOUND_MS);
	send_req(w, i);
	rank_wait(w, i, SLICE_MS * MS);
}

/* The op's status reaches the caller. */
static void ret(struct lworld *w, int i, enum zs_status st, const char *how)
{
	struct lw_rank *r = &w->r[i];

	w->st->checks++;
	r->ep++;
	if (st == ZS_ERESUME) {
		if (w->tl == r->tl)
			return sim_fail(&w->s, "rank %d is told to resume (%s), but the job is on its timeline %" PRIu64,
					i, how, r->tl);
		w->st->loss_resumes++;
		sim_log(&w->s, "rank %d: resume (%s)", i, how);
		r->ph = LP_RESUME;
		rank_wait(w, i, POLL_MS * MS);
		return;
	}
	if (st != ZS_OK) {
		if (!r->cut_in_wait)
			return sim_fail(&w->s, "rank %d's op fails (%s, %s) though it could hear the coordinator throughout its wait of %" PRId64 " ms (timeline %" PRIu64 ", the job's %" PRIu64 "%s)",
					i, zs_strerror(st), how, (w->s.now_us - r->wait_t0) / MS, r->tl, w->tl,
					w->tl != r->tl ? ": the status lost the rollback" : "");
		w->st->loss_failures++;
		sim_log(&w->s, "rank %d: its op fails: %s (%s); its caller goes on", i,
			zs_strerror(st), how);
	} else {
		r->ops++;
	}
	if (r->ops >= OPS) {
		r->ph = LP_DONE;
		return;
	}
	r->ph = LP_IDLE;
	rank_wait(w, i, sim_range(&w->s, 100 * MS, 2500 * MS)); /* its compute */
}

/* client/verdict.c tr_verdict: the op failed with st. */
static void verdict(struct lworld *w, int i, enum zs_status st)
{
	struct lw_rank *r = &w->r[i];

	if (zs_vd_start(&r->vw, &r->v, st, true, r->tl, w->s.now_us / MS, BOUND_MS) != ZS_LV_ASK)
		return ret(w, i, st, "the status stands");
	sim_log(&w->s, "rank %d: its op failed (%s): the coordinator's verdict awaited", i,
		zs_strerror(st));
	r->ph = LP_VD;
	r->vst = st;
	r->ep++;
	look(w, i);
}

/* client/failover.c tr_failover, from a request that failed or a slice. */
static void failover(struct lworld *w, int i, int lost, enum lw_from from, bool refused)
{
	struct lw_rank *r = &w->r[i];

	r->fo_refused = refused;
	sim_log(&w->s, "rank %d: server %d lost (%s): its failover", i, lost,
		from == LF_REQ ? "a request failed" : "seen between slices");
	r->fo_from = from;
	r->fo_lost = lost;
	r->fo_deadline = w->s.now_us / MS + BOUND_MS;
	r->ph = LP_FO;
	r->ep++;
	look(w, i);
}

/* The failover ended: act (TAKE, or how it failed). */
static void failover_end(struct lworld *w, int i, enum zs_lv_act act)
{
	struct lw_rank *r = &w->r[i];

	r->ph = LP_OP;
	r->ep++;
	sim_log(&w->s, "rank %d: its failover from server %d: %s", i, r->fo_lost,
		act == ZS_LV_TAKE ? "the placement taken" : act == ZS_LV_BACK ? "it is back" :
		act == ZS_LV_RESUME ? "rolled back instead" : "failed");
	if (act == ZS_LV_BACK) {
		if (r->fo_from == LF_REQ) /* what the server answered stands */
			return verdict(w, i, ZS_EUNAVAIL);
		if (r->kept_st1) /* the wait goes on, its request where it was */
			ev(w, 0, LW_REPLY, i, r->req, r->kept_st1 - 1, 0, 0);
		rank_wait(w, i, SLICE_MS * MS);
		return;
	}
	if (act == ZS_LV_TAKE) {
		take_placement(w, i);
		if (r->fo_from == LF_REQ || r->server == r->fo_lost) /* the sweep */
			send_req(w, i);
		else if (r->kept_st1) /* answered meanwhile: its wait takes it */
			ev(w, 0, LW_REPLY, i, r->req, r->kept_st1 - 1, 0, 0);
		rank_wait(w, i, SLICE_MS * MS);
		return;
	}
	if (r->fo_from == LF_REQ) /* tr_failover_req: ERESUME, else the request's own */
		return verdict(w, i, act == ZS_LV_RESUME ? ZS_ERESUME : ZS_EUNAVAIL);
	r->lost_tried = r->fo_lost;
	switch (zs_opw_slice(&r->w, w->s.now_us / MS, true, true, act == ZS_LV_RESUME)) {
	case ZS_LV_RESUME: return ret(w, i, ZS_ERESUME, "a failover met the rollback");
	case ZS_LV_FAIL: return ret(w, i, ZS_EUNAVAIL, "a failover that failed");
	case ZS_LV_TIMEDOUT: return ret(w, i, ZS_ETIMEDOUT, "the wait's bound");
	default: rank_wait(w, i, SLICE_MS * MS); return;
	}
}

/* A slice of the op's wait ended, the op still running. */
static void slice(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];
	bool lost = false;

	if (cut(w, i))
		r->cut_in_wait = true;
	if (w->s.now_us / MS < r->w.deadline) {
		for (int s = 0; s < w->S; s++) {
			if (!in_view(r, s, w->S) || s == r->lost_tried)
				continue;
			if (w->replicated && (broken(w, r, s) || r->down[s]))
				return failover(w, i, s, LF_SLICE, false); /* tr_watch_lost */
			if (!w->replicated && r->down[s])
				lost = true; /* lost_single */
		}
	}
	switch (zs_opw_slice(&r->w, w->s.now_us / MS, lost, w->replicated, false)) {
	case ZS_LV_TIMEDOUT: return ret(w, i, ZS_ETIMEDOUT, "the wait's bound");
	case ZS_LV_ASK: look(w, i); return;
	default: rank_wait(w, i, SLICE_MS * MS); return;
	}
}

static void tick(struct lworld *w, int i, int epoch)
{
	struct lw_rank *r = &w->r[i];

	if (epoch != r->ep)
		return;
	switch (r->ph) {
	case LP_IDLE: next_op(w, i); return;
	case LP_OP: slice(w, i); return;
	case LP_FO: case LP_VD: look(w, i); return;
	case LP_RESUME: /* zs_trainer_resume: the job's timeline and placement,
			 * once its restore is done (every server of it answers) */
		settle(w);
		if (cut(w, i) || w->restoring) {
			rank_wait(w, i, POLL_MS * MS);
			return;
		}
		r->tl = r->seen_tl = w->tl;
		memset(r->down, 0, sizeof r->down);
		r->lost_tried = -1;
		for (int s = 0; s < w->S; s++) /* tr_reconnect: to the servers up */
			r->conn_inc[s] = w->sv[s].alive ? w->sv[s].inc : -1;
		take_placement(w, i);
		r->ph = LP_IDLE;
		rank_wait(w, i, 1 * MS);
		return;
	default: return;
	}
}

static void answer(struct lworld *w, const struct sim_ev *e)
{
	struct lw_rank *r = &w->r[e->who];
	int i = e->who;
	int64_t now = w->s.now_us / MS;
	bool answered = e->b != 0;
	uint64_t job_tl = (uint64_t)e->c;

	if (e->a != r->ep)
		return;
	if (!answered)
		r->cut_in_wait = true;
	if (r->ph == LP_FO) {
		bool back = !r->fo_refused && !broken(w, r, r->fo_lost) && !r->down[r->fo_lost];
		enum zs_lv_act a = zs_fo_look(now, r->fo_deadline, answered, r->tl, job_tl, e->d != 0,
					      back);
		if (a == ZS_LV_WAIT) {
			r->ep++;
			rank_wait(w, i, POLL_MS * MS);
			return;
		}
		return failover_end(w, i, a == ZS_LV_FAIL ? ZS_LV_TIMEDOUT : a);
	}
	/* client/verdict.c tr_rolled_back: the renewal's timeline, or the job's */
	bool back = r->seen_tl != r->tl || (answered && job_tl != r->tl);
	if (r->ph == LP_OP) {
		if (zs_opw_told(&r->w, back) == ZS_LV_RESUME)
			return ret(w, i, ZS_ERESUME, "rolled back while it waited");
		r->ep++;
		rank_wait(w, i, SLICE_MS * MS);
		return;
	}
	if (r->ph != LP_VD)
		return;
	switch (zs_vd_told(&r->vw, &r->v, now, back, !back && loss_seen(w, r))) {
	case ZS_LV_RESUME: return ret(w, i, ZS_ERESUME, "the coordinator's verdict");
	case ZS_LV_FAIL: return ret(w, i, r->vst, "no loss shown, or given up on before");
	case ZS_LV_TIMEDOUT: return ret(w, i, r->vst, "no verdict within the bound");
	default:
		r->ep++;
		rank_wait(w, i, POLL_MS * MS);
		return;
	}
}

/* At the coordinator: the job as it is (a question of a rank cut off
 * meanwhile is not answered). */
static void at_coordinator(struct lworld *w, const struct sim_ev *e)
{
	struct lw_rank *r = &w->r[e->who];
	bool moved = true;

	if (cut(w, e->who)) {
		ev(w, CALL_MS * MS, LW_ANSWER, e->who, e->a, 0, 0, 0);
		return;
	}
	for (int k = 0; k < w->S; k++)
		moved &= w->copies[k][0] != r->fo_lost;
	ev(w, lat(w), LW_ANSWER, e->who, e->a, 1, (int64_t)w->tl, moved);
}

static void reply(struct lworld *w, const struct sim_ev *e)
{
	struct lw_rank *r = &w->r[e->who];
	int i = e->who;
	enum zs_status st = (enum zs_status)e->b;

	if (e->a != r->req)
		return;
	if (r->ph == LP_FO && r->fo_from == LF_SLICE) { /* the request holds it */
		r->kept_st1 = (int)st + 1;
		return;
	}
	if (r->ph != LP_OP)
		return;
	sim_log(&w->s, "rank %d: request %d answered: %s", i, r->req, zs_strerror(st));
	if (st == ZS_OK) {
		w->st->checks++;
		return ret(w, i, ZS_OK, "served");
	}
	/* client/failover.c tr_failover_req: a server lost (not one that is up
	 * and answered), failed over from */
	if (w->replicated && (st == ZS_ENOTFOUND ||
			      (st == ZS_EUNAVAIL && (broken(w, r, r->server) || r->down[r->server]))))
		return failover(w, i, r->server, LF_REQ, st != ZS_EUNAVAIL);
	verdict(w, i, st);
}

/* A server serves a request: of the job's timeline, to a shard it holds. */
static void serve(struct lworld *w, const struct sim_ev *e)
{
	struct lw_server *v = &w->sv[e->who];
	const struct lw_rank *r = &w->r[e->a];
	enum zs_status st = ZS_OK;
	int k = r->shard;

	if (!v->alive || v->inc != (int)e->c)
		return; /* the connection broke: the kill fails it */
	if (paused(w, e->who)) {
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
	ev(w, lat(w) + (st ? 0 : sim_range(&w->s, 20 * MS, 500 * MS)), LW_REPLY, (int)e->a, e->b, st,
	   0, 0);
}

static void renew(struct lworld *w, const struct sim_ev *e)
{
	struct lw_rank *r = &w->r[e->who];

	if (e->a) { /* its reply */
		if ((uint64_t)e->a - 1 > r->seen_tl)
			r->seen_tl = (uint64_t)e->a - 1;
		for (int s = 0; s < w->S; s++)
			r->down[s] = (e->b >> s) & 1;
		return;
	}
	if (r->ph != LP_DONE)
		ev(w, 1000 * MS, LW_RENEW, e->who, 0, 0, 0, 0);
	if (!cut(w, e->who)) {
		int64_t down = 0;
		for (int s = 0; s < w->S; s++)
			if (!w->sv[s].up)
				down |= 1 << s;
		ev(w, lat(w), LW_RENEW, e->who, (int64_t)w->tl + 1, down, 0, 0);
	}
}

static void fault(struct lworld *w, const struct sim_ev *e)
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
				ev(w, lat(w), LW_REPLY, i, w->r[i].req, ZS_EUNAVAIL, 0, 0);
		ev(w, sim_range(&w->s, 300 * MS, 2000 * MS), LW_RESTART, e->who, 0, 0, 0, 0);
		return;
	case LW_RESTART:
		v->alive = true;
		v->paused_until = 0;
		v->last_hb = w->s.now_us;
		v->up = true;
		sim_log(&w->s, "server %d restarted", e->who);
		server_lost(w, e->who, true);
		return;
	case LW_PAUSE:
		if (!v->alive || paused(w, e->who))
			return;
		v->paused_until = w->s.now_us + e->a;
		w->st->faults[SF_PAUSE]++;
		sim_log(&w->s, "server %d stopped for %" PRId64 " ms", e->who, e->a / MS);
		ev(w, e->a, LW_CONT, e->who, ++v->pauses, 0, 0, 0);
		return;
	case LW_CONT:
		if (e->a != v->pauses || !v->alive)
			return;
		sim_log(&w->s, "server %d continues", e->who);
		for (int h = 0; h < v->n_held; h++)
			ev(w, 0, LW_SERVE, e->who, v->held[h][0], v->held[h][1], v->inc, 0);
		v->n_held = 0;
		return;
	case LW_CUT:
		w->r[e->who].cut_until = w->s.now_us + e->a;
		w->st->faults[SF_CUT_TRAINER]++;
		sim_log(&w->s, "rank %d cut off from the coordinator for %" PRId64 " ms", e->who, e->a / MS);
		return;
	}
}

static void check_end(struct lworld *w)
{
	for (int i = 0; i < w->R; i++) {
		w->st->checks++;
		if (w->r[i].ph != LP_DONE)
			return sim_fail(&w->s, "rank %d never ended: %d of %d ops done, in phase %d when the run ended",
					i, w->r[i].ops, OPS, (int)w->r[i].ph);
	}
}

int losses_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	struct lworld *w = calloc(1, sizeof *w);
	struct sim_ev e;
	int rc;

	if (!w) {
		snprintf(why, why_n, "out of memory");
		return 1;
	}
	sim_init(&w->s, seed ^ 0x4c4f535345535321ull, tracing, why, why_n);
	w->st = st;
	w->S = (int)sim_range(&w->s, 2, NS);
	w->R = (int)sim_range(&w->s, 1, NR);
	w->replicated = sim_chance(&w->s, 0.5);
	w->tl = 1;
	place(w);
	sim_log(&w->s, "seed %" PRIu64 ": %d servers, %d ranks, %s", seed, w->S, w->R,
		w->replicated ? "replicas 2" : "one copy");
	for (int s = 0; s < w->S; s++) {
		w->sv[s] = (struct lw_server){.alive = true, .up = true};
		ev(w, sim_range(&w->s, 0, 500 * MS), LW_HB, s, 0, 0, 0, 0);
	}
	ev(w, 250 * MS, LW_SWEEP, 0, 0, 0, 0, 0);
	for (int i = 0; i < w->R; i++) {
		struct lw_rank *r = &w->r[i];
		*r = (struct lw_rank){.ph = LP_IDLE, .tl = 1, .seen_tl = 1, .lost_tried = -1};
		take_placement(w, i);
		rank_wait(w, i, sim_range(&w->s, 0, 20 * MS));
		ev(w, sim_range(&w->s, 0, 1000 * MS), LW_RENEW, i, 0, 0, 0, 0);
	}
	for (int n = (int)sim_range(&w->s, 1, 3), k = 0; k < n; k++) {
		int64_t at = sim_range(&w->s, 0, FAULTS_MS * (int64_t)MS);
		int s = (int)sim_below(&w->s, (uint64_t)w->S);
		if (sim_chance(&w->s, 0.5))
			ev(w, at, LW_KILL, s, 0, 0, 0, 0);
		else
			ev(w, at, LW_PAUSE, s, sim_range(&w->s, 500 * MS, 5000 * MS), 0, 0, 0);
		if (sim_chance(&w->s, 0.2)) /* a second loss while the first is recovered */
			ev(w, at + sim_range(&w->s, 100 * MS, 3000 * MS), LW_KILL,
			   (s + 1) % w->S, 0, 0, 0, 0);
	}
	for (int n = (int)sim_range(&w->s, 0, 2), k = 0; k < n; k++)
		ev(w, sim_range(&w->s, 0, FAULTS_MS * (int64_t)MS), LW_CUT,
		   (int)sim_below(&w->s, (uint64_t)w->R), sim_range(&w->s, 1000 * MS, 15000 * MS), 0, 0, 0);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * (int64_t)MS) {
		switch (e.kind) {
		case LW_HB: heartbeat(w, e.who); break;
		case LW_SWEEP: sweep(w); break;
		case LW_SERVE: serve(w, &e); break;
		case LW_REPLY: reply(w, &e); break;
		case LW_TICK: tick(w, e.who, (int)e.a); break;
		case LW_LOOK: at_coordinator(w, &e); break;
		case LW_ANSWER: answer(w, &e); break;
		case LW_RENEW: renew(w, &e); break;
		default: fault(w, &e); break;
		}
		if (w->s.now_us > FAULTS_MS * (int64_t)MS) {
			bool all = true;
			for (int i = 0; i < w->R; i++)
				all &= w->r[i].ph == LP_DONE;
			if (all)
				break;
		}
	}
	if (!w->s.failed)
		check_end(w);
	rc = sim_end(&w->s, &st->events);
	free(w);
	return rc;
}
