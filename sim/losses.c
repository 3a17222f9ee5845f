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

#include "sim/losses.h"

/* ------------------------------------------------------------ the ranks */

static void rank_wait(struct lworld *w, int i, int64_t d)
{
	lx_ev(w, d, LW_TICK, i, w->r[i].ep, 0, 0, 0);
}

/* A question to the coordinator (get_job): its answer, or none. */
static void look(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];

	if (lx_cut(w, i)) {
		r->cut_in_wait = true;
		lx_ev(w, CALL_MS * MS, LW_ANSWER, i, r->ep, 0, 0, 0);
		return;
	}
	lx_ev(w, lx_lat(w), LW_LOOK, i, r->ep, 0, 0, 0);
}

static bool lx_broken(const struct lworld *w, const struct lw_rank *r, int s)
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
		if (in_view(r, s, w->S) && (lx_broken(w, r, s) || r->down[s]))
			return true;
	return false;
}

static void take_placement(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];

	for (int k = 0; k < w->S; k++) {
		r->primary[k] = w->copies[k][0];
		if (r->primary[k] >= 0 && lx_broken(w, r, r->primary[k]) && w->sv[r->primary[k]].alive)
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
	if (s < 0 || lx_broken(w, r, s)) { /* its connection broke: fails at once */
		lx_ev(w, 0, LW_REPLY, i, r->req, ZS_EUNAVAIL, 0, 0);
		return;
	}
	lx_ev(w, lx_lat(w), LW_SERVE, s, i, r->req, w->sv[s].inc, 0);
}

static void next_op(struct lworld *w, int i)
{
	struct lw_rank *r = &w->r[i];

	r->ph = LP_OP;
	r->ep++;
	r->shard = (int)sim_below(&w->s, (uint64_t)w->S);
	r->cut_in_wait = lx_cut(w, i);
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
			lx_ev(w, 0, LW_REPLY, i, r->req, r->kept_st1 - 1, 0, 0);
		rank_wait(w, i, SLICE_MS * MS);
		return;
	}
	if (act == ZS_LV_TAKE) {
		take_placement(w, i);
		if (r->fo_from == LF_REQ || r->server == r->fo_lost) /* the sweep */
			send_req(w, i);
		else if (r->kept_st1) /* answered meanwhile: its wait takes it */
			lx_ev(w, 0, LW_REPLY, i, r->req, r->kept_st1 - 1, 0, 0);
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

	if (lx_cut(w, i))
		r->cut_in_wait = true;
	if (w->s.now_us / MS < r->w.deadline) {
		for (int s = 0; s < w->S; s++) {
			if (!in_view(r, s, w->S) || s == r->lost_tried)
				continue;
			if (w->replicated && (lx_broken(w, r, s) || r->down[s]))
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
		lx_settle(w);
		if (lx_cut(w, i) || w->restoring) {
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
		bool back = !r->fo_refused && !lx_broken(w, r, r->fo_lost) && !r->down[r->fo_lost];
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
			      (st == ZS_EUNAVAIL && (lx_broken(w, r, r->server) || r->down[r->server]))))
		return failover(w, i, r->server, LF_REQ, st != ZS_EUNAVAIL);
	verdict(w, i, st);
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
		lx_ev(w, 1000 * MS, LW_RENEW, e->who, 0, 0, 0, 0);
	if (!lx_cut(w, e->who)) {
		int64_t down = 0;
		for (int s = 0; s < w->S; s++)
			if (zs_mbr_down(&w->sv[s].m))
				down |= 1 << s;
		lx_ev(w, lx_lat(w), LW_RENEW, e->who, (int64_t)w->tl + 1, down, 0, 0);
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
	lx_place(w);
	sim_log(&w->s, "seed %" PRIu64 ": %d servers, %d ranks, %s", seed, w->S, w->R,
		w->replicated ? "replicas 2" : "one copy");
	for (int s = 0; s < w->S; s++) {
		w->sv[s] = (struct lw_server){.alive = true};
		zs_mbr_registered(&w->sv[s].m, 1, false);
		lx_ev(w, sim_range(&w->s, 0, 500 * MS), LW_HB, s, 0, 0, 0, 0);
	}
	lx_ev(w, 250 * MS, LW_SWEEP, 0, 0, 0, 0, 0);
	for (int i = 0; i < w->R; i++) {
		struct lw_rank *r = &w->r[i];
		*r = (struct lw_rank){.ph = LP_IDLE, .tl = 1, .seen_tl = 1, .lost_tried = -1};
		take_placement(w, i);
		rank_wait(w, i, sim_range(&w->s, 0, 20 * MS));
		lx_ev(w, sim_range(&w->s, 0, 1000 * MS), LW_RENEW, i, 0, 0, 0, 0);
	}
	for (int n = (int)sim_range(&w->s, 1, 3), k = 0; k < n; k++) {
		int64_t at = sim_range(&w->s, 0, FAULTS_MS * (int64_t)MS);
		int s = (int)sim_below(&w->s, (uint64_t)w->S);
		if (sim_chance(&w->s, 0.5))
			lx_ev(w, at, LW_KILL, s, 0, 0, 0, 0);
		else
			lx_ev(w, at, LW_PAUSE, s, sim_range(&w->s, 500 * MS, 5000 * MS), 0, 0, 0);
		if (sim_chance(&w->s, 0.2)) /* a second loss while the first is recovered */
			lx_ev(w, at + sim_range(&w->s, 100 * MS, 3000 * MS), LW_KILL,
			   (s + 1) % w->S, 0, 0, 0, 0);
	}
	if (sim_chance(&w->s, 0.5)) { /* the coordinator killed, started again */
		int64_t at = sim_range(&w->s, 0, FAULTS_MS * (int64_t)MS);
		int64_t down = sim_range(&w->s, 300 * MS, 3000 * MS);
		lx_ev(w, at, LW_COORD_KILL, 0, down, 0, 0, 0);
		/* a server lost meanwhile; with replicas, back only after the
		 * ranks' bound (a host slow to return): its job fails over
		 * from it (one copy: no rank can go on without it, so it is
		 * back as soon as a killed server is) */
		if (sim_chance(&w->s, 0.6))
			lx_ev(w, at + sim_range(&w->s, 0, down), LW_KILL,
			      (int)sim_below(&w->s, (uint64_t)w->S),
			      w->replicated ? sim_range(&w->s, 5000 * MS, 25000 * MS) : 0, 0, 0, 0);
	}
	for (int n = (int)sim_range(&w->s, 0, 2), k = 0; k < n; k++)
		lx_ev(w, sim_range(&w->s, 0, FAULTS_MS * (int64_t)MS), LW_CUT,
		   (int)sim_below(&w->s, (uint64_t)w->R), sim_range(&w->s, 1000 * MS, 15000 * MS), 0, 0, 0);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * (int64_t)MS) {
		switch (e.kind) {
		case LW_HB: lx_heartbeat(w, e.who); break;
		case LW_SWEEP: lx_sweep(w); break;
		case LW_SERVE: lx_serve(w, &e); break;
		case LW_REPLY: reply(w, &e); break;
		case LW_TICK: tick(w, e.who, (int)e.a); break;
		case LW_LOOK: lx_at_coordinator(w, &e); break;
		case LW_ANSWER: answer(w, &e); break;
		case LW_RENEW: renew(w, &e); break;
		default: lx_fault(w, &e); break;
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
