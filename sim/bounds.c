/*
 * bounds.c - the sixth simulated world: does every rank take, at each step
 * boundary, the coordinator's answer to its own latest report, so that an
 * operator's stop reaches every rank at the same step? 1 to 4 ranks run
 * 20 to 60 steps through the step driver's boundary as client/driver.c and
 * client/lease.c run it, on the real core (model/boundary.c): a rank posts
 * its report at boundary b (the step it finished, and the one it begins),
 * its lease thread sends it while step b runs, and boundary b + 1 takes
 * the answer, waiting within its bound; past the bound the call fails, and
 * the caller calls again, which asks the coordinator itself and posts
 * anew. The coordinator keeps each rank's latest report as coord/reports.c
 * does, sets a stop three steps past the latest report (coord/recovery.c,
 * zshardctl job stop), and rolls the job back (a new timeline, the stop
 * cleared), which each rank sees in a renewal and resumes from.
 *
 * Resizes (zshardctl job resize): the coordinator decides by the real core
 * (model/resize.c) as coord/resize.c runs it, naming a change four past
 * the latest report; each answer carries the job's world changes, and a
 * rank takes its world of a step from the answer its boundary took
 * (client/driver.c: zs_world_at), leaving at a step whose world has no
 * room for it; a grow's new ranks join at the step named.
 *
 * Faults: the coordinator's answers delayed past a boundary's bound (a
 * descheduled coordinator, a slow link), in either direction; rollbacks;
 * the stop asked at any time, late or not at all; up to three resizes
 * asked at any time.
 *
 * Invariants:
 *   - the answer a boundary takes is the coordinator's to the rank's latest
 *     request on its timeline (never to a report given up on, nor to one
 *     of a timeline a resume left)
 *   - no rank begins a step at or past its timeline's stop; every rank
 *     leaves at the stop's step
 *   - every rank ends its steps or leaves at the stop, once the faults end
 *   - a rank begins step b knowing the world of b and of b + 1 as the job
 *     has them (its data loader knows the next step's world as this one
 *     ends), leaves at b exactly when its rank is outside b's world, and
 *     no change is named for a step a rank of the timeline may have begun
 *     without it
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/boundary.h"
#include "model/model.h"
#include "model/resize.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define MS 1000
#define RUN_MS 60000
#define BW_MAX 4
#define BOUND_MS 300 /* a boundary's wait (the trainer's timeout_ms, scaled) */
#define RENEW_MS 1000

enum bw_kind {
	BW_ACT,     /* who: rank; a: its epoch. The driver's next action */
	BW_SEND,    /* who; a: seq (0: the driver's own ask); b: request. At the coordinator */
	BW_REPLY,   /* who; a: seq (0: the ask's); b: request; c: stop */
	BW_RENEW,   /* who: the rank's lease renewal, with the coordinator's timeline (a) */
	BW_STOP,    /* zshardctl job stop */
	BW_ROLLBACK,
	BW_RESIZE,  /* zshardctl job resize; a: the world asked */
};

/* What a request said, at the coordinator. */
struct bw_req {
	bool has;          /* a report: the step it finished */
	uint64_t reported; /* that step */
	uint64_t tl;       /* the rank's timeline when it asked */
};

enum bw_phase { BP_BOUNDARY, BP_ASKING, BP_STEP, BP_DONE };

struct bw_rank {
	enum bw_phase ph;
	int epoch;          /* a wake of an earlier phase is dropped */
	uint64_t step;      /* the step whose boundary it is at, or runs */
	uint64_t tl, seen_tl;
	int64_t deadline_us; /* this call's bound on the boundary's wait */
	bool have_last, last_sent;
	uint64_t last;       /* the step it finished last */
	uint64_t last_req;   /* the latest request it made (posted or asked) */
	struct zs_bmail bm;
	/* the post's request (its contents: w->req, what boundary_take copies) */
	uint64_t post_req;
	/* the answer kept for the next boundary (what boundary_keep copies) */
	uint64_t ans_req, ans_stop;
	int ans_wv;          /* the world changes its answer carried (a version) */
	bool sender_busy;
	bool stopped;        /* left at the stop */
	bool left;           /* left at a step whose world has no room for it */
	bool joined;         /* in the job (from the start, or a grow's new rank) */
	uint64_t first_req;  /* this process's first request: older answers are another's */
};

struct bworld {
	struct sim s;
	struct sim_stats *st;
	int R;
	uint64_t S;
	int64_t fault_end_us;
	struct bw_rank r[BW_MAX];
	uint64_t next_req;
	struct bw_req req[4096];
	/* the coordinator: its timeline, its stop, the step reported */
	uint64_t tl, stop;
	struct zs_btop top;
	uint64_t back_to; /* the step a rollback resumes at */
	/* the job's world changes: each version the coordinator made, the
	 * newest last (an answer names the one it carried) */
	struct zs_job_spec spec; /* its world_size: the world before any change */
	struct zs_worlds wv[4];
	int n_wv;
	uint64_t rs_rng; /* the resizes' own chances: a run without them runs as before */
};

/* The resizes' chances (splitmix64), apart from the run's. */
static uint64_t rs_next(struct bworld *w)
{
	uint64_t z = (w->rs_rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void ev(struct bworld *w, int64_t d, int kind, int who, int64_t a, int64_t b, int64_t c,
	       int64_t dd)
{
	sim_at(&w->s, d, (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c, .d = dd});
}

static int64_t lat(struct bworld *w)
{
	if (w->s.now_us < w->fault_end_us && sim_chance(&w->s, 0.08)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 50 * MS, 800 * MS);
	}
	return sim_range(&w->s, 100, 2 * MS);
}

static void wake(struct bworld *w, int i, int64_t d)
{
	ev(w, d, BW_ACT, i, w->r[i].epoch, 0, 0, 0);
}

static uint64_t new_req(struct bworld *w, int i, bool has, uint64_t reported)
{
	uint64_t id = ++w->next_req;

	if (id >= sizeof w->req / sizeof w->req[0]) {
		sim_fail(&w->s, "more than %zu requests in one run", sizeof w->req / sizeof w->req[0]);
		return 0;
	}
	w->req[id] = (struct bw_req){.has = has, .reported = reported, .tl = w->r[i].tl};
	w->r[i].last_req = id;
	return id;
}

/* --------------------------------------------------------- the sender */

/* client/lease.c lease_main: the posted report, if one waits, on its way. */
static void sender(struct bworld *w, int i)
{
	struct bw_rank *r = &w->r[i];
	uint64_t seq;

	if (r->sender_busy || !(seq = zs_bm_pick(&r->bm)))
		return;
	r->sender_busy = true;
	ev(w, lat(w), BW_SEND, i, (int64_t)seq, (int64_t)r->post_req, 0, 0);
}

/* --------------------------------------------------------- the coordinator */

/* coord/reports.c coord_h_report_step: the report heard, the answer with
 * the job's stop and timeline. */
static void coordinator(struct bworld *w, const struct sim_ev *e)
{
	const struct bw_req *q = &w->req[e->b];

	if (q->has)
		zs_btop_heard(&w->top, w->tl, q->reported);
	sim_log(&w->s, "coordinator: rank %d's request %" PRId64 " (%s%" PRIu64 "), answered: stop %" PRIu64,
		e->who, e->b, q->has ? "finished step " : "no report; ", q->has ? q->reported : 0, w->stop);
	ev(w, lat(w), BW_REPLY, e->who, e->a, e->b, (int64_t)w->stop, w->n_wv - 1);
}

static int active(const struct bworld *w)
{
	int n = 0;

	for (int i = 0; i < BW_MAX; i++)
		n += w->r[i].joined && w->r[i].ph != BP_DONE;
	return n;
}

static void join(struct bworld *w, int i, uint64_t at)
{
	/* a new process: the earlier one's wakes and answers are not its */
	w->r[i] = (struct bw_rank){.tl = w->tl, .seen_tl = w->tl, .ph = BP_BOUNDARY, .step = at,
				   .joined = true, .deadline_us = w->s.now_us + BOUND_MS * MS,
				   .epoch = w->r[i].epoch + 1000, .first_req = w->next_req + 1};
	sim_log(&w->s, "rank %d joins at step %" PRIu64 " (timeline %" PRIu64 ")", i, at, w->tl);
	wake(w, i, sim_range(&w->s, 1 * MS, 30 * MS));
	ev(w, sim_range(&w->s, 0, RENEW_MS * MS), BW_RENEW, i, 0, 0, 0, 0);
}

/* coord/resize.c coord_h_resize_job: the real core decides; a grow's new
 * ranks join at the step named (zs_trainer_resume says where). */
static void resize(struct bworld *w, uint32_t want)
{
	const struct zs_worlds *cur = &w->wv[w->n_wv - 1];
	struct zs_rs_in in = {.want = want, .last = zs_world_last(&w->spec, cur),
			      .stopping = w->stop != 0, .n_trainers = (uint32_t)active(w),
			      .named = cur->n > 0, .named_step = cur->n ? cur->v[cur->n - 1].step : 0};
	uint64_t at;
	enum zs_rs_act a;

	if (!in.n_trainers || w->n_wv == 4)
		return;
	in.have_top = zs_btop_latest(&w->top, w->tl, &in.top);
	a = zs_resize_decide(&in, &at);
	if (a == ZS_RS_NO_REPORT || a == ZS_RS_PENDING) { /* "try again" */
		ev(w, 100 * MS, BW_RESIZE, 0, want, 0, 0, 0);
		return;
	}
	if (a != ZS_RS_ADD)
		return;
	for (int i = 0; i < BW_MAX; i++) {
		const struct bw_rank *r = &w->r[i];
		w->st->checks++;
		/* a rank of the timeline that began step at - 1 (or at)
		 * without it: its data loader took the old world (one at a
		 * boundary is checked as it begins) */
		if (r->joined && r->ph == BP_STEP && r->tl == w->tl && r->step + 1 >= at)
			return sim_fail(&w->s, "a resize to %u ranks is named at step %" PRIu64 " while rank %d is at step %" PRIu64,
					want, at, i, r->step);
	}
	w->wv[w->n_wv] = *cur;
	zs_worlds_add(&w->wv[w->n_wv], at, want);
	w->n_wv++;
	w->st->resizes++;
	sim_log(&w->s, "resize: %u ranks from step %" PRIu64 " (was %u)", want, at, in.last);
	for (uint32_t i = in.last; i < want && i < BW_MAX; i++)
		if (!w->r[i].joined || w->r[i].ph == BP_DONE)
			join(w, (int)i, at);
}

/* coord/recovery.c coord_h_stop_job: three past the latest report. */
static void stop(struct bworld *w)
{
	uint64_t top;

	if (w->stop)
		return;
	if (!zs_btop_latest(&w->top, w->tl, &top)) { /* "try again in a moment" */
		ev(w, 50 * MS, BW_STOP, 0, 0, 0, 0, 0);
		return;
	}
	{ /* coord/recovery.c coord_h_stop_job */
		const struct zs_worlds *cur = &w->wv[w->n_wv - 1];
		w->stop = zs_stop_step(top, cur->n > 0, cur->n ? cur->v[cur->n - 1].step : 0);
	}
	w->st->faults[SF_STOP]++;
	sim_log(&w->s, "stop: every rank leaves before step %" PRIu64 " (timeline %" PRIu64 ")",
		w->stop, w->tl);
	for (int i = 0; i < BW_MAX; i++) {
		const struct bw_rank *r = &w->r[i];
		w->st->checks++;
		if (r->joined && r->ph == BP_STEP && r->tl == w->tl && r->step >= w->stop)
			return sim_fail(&w->s, "the stop before step %" PRIu64 " is set while rank %d runs step %" PRIu64,
					w->stop, i, r->step);
	}
}

static void rollback(struct bworld *w)
{
	uint64_t low = UINT64_MAX;

	if (w->stop)
		return;
	for (int i = 0; i < BW_MAX; i++)
		if (w->r[i].joined && w->r[i].ph != BP_DONE && w->r[i].step < low)
			low = w->r[i].step;
	if (low == UINT64_MAX)
		return;
	w->tl++;
	w->back_to = low / 2;
	w->st->faults[SF_ROLLBACK]++;
	sim_log(&w->s, "rollback: timeline %" PRIu64 ", from step %" PRIu64, w->tl, w->back_to);
}

/* ----------------------------------------------------------- the driver */

/* zs_step_begin past its answer (stop_before, and wv: the world changes
 * it carried), by the driver's real decision (model/boundary.h
 * zs_begin_decide): the stop, the world's, or the step begun. */
static void begin(struct bworld *w, int i, uint64_t stop_before, int wv)
{
	struct bw_rank *r = &w->r[i];
	const struct zs_worlds *job = &w->wv[w->n_wv - 1];
	struct zs_step_answer an = {.stop_before = stop_before, .worlds = w->wv[wv]};
	uint32_t mine;
	bool ckpt;
	enum zs_begin_act act = zs_begin_decide(&w->spec, &an, (uint32_t)i, r->step, &mine, &ckpt);

	w->st->checks++;
	if (r->tl == w->tl &&
	    (mine != zs_world_at(&w->spec, job, r->step) ||
	     zs_world_at(&w->spec, &w->wv[wv], r->step + 1) != zs_world_at(&w->spec, job, r->step + 1)))
		return sim_fail(&w->s, "rank %d begins step %" PRIu64 " taking a world of %u then %u ranks; the job's are %u then %u",
				i, r->step, mine, zs_world_at(&w->spec, &w->wv[wv], r->step + 1),
				zs_world_at(&w->spec, job, r->step), zs_world_at(&w->spec, job, r->step + 1));
	if (act == ZS_BEGIN_LEAVE) {
		r->ph = BP_DONE;
		r->left = true;
		zs_bm_drop(&r->bm);
		sim_log(&w->s, "rank %d leaves before step %" PRIu64 ": its world is %u ranks", i,
			r->step, mine);
		return;
	}
	if (act == ZS_BEGIN_STOP) {
		r->ph = BP_DONE;
		r->stopped = true;
		zs_bm_drop(&r->bm);
		sim_log(&w->s, "rank %d leaves before step %" PRIu64, i, r->step);
		return;
	}
	if (w->stop && r->tl == w->tl && r->step >= w->stop)
		return sim_fail(&w->s, "rank %d begins step %" PRIu64 " on timeline %" PRIu64 ", past the stop before step %" PRIu64 " (its answer said %s)",
				i, r->step, r->tl, w->stop, stop_before ? "another stop" : "none");
	r->ph = BP_STEP;
	r->epoch++;
	w->st->bounds++;
	wake(w, i, sim_range(&w->s, 5 * MS, 40 * MS));
}

/* Posts this boundary's report (the step finished, if not told yet). */
static void post(struct bworld *w, int i)
{
	struct bw_rank *r = &w->r[i];
	bool has = r->have_last && !r->last_sent;

	r->post_req = new_req(w, i, has, r->last);
	zs_bm_post(&r->bm);
	sim_log(&w->s, "rank %d posts request %" PRIu64 " at step %" PRIu64 "'s boundary (%s%" PRIu64 ")", i,
		r->post_req, r->step, has ? "finished step " : "no report; ", has ? r->last : 0);
	r->last_sent = true;
	sender(w, i);
}

/* The answer is to this rank's latest request, on its timeline. */
static bool fresh(struct bworld *w, int i, uint64_t req)
{
	const struct bw_rank *r = &w->r[i];

	w->st->checks++;
	if (req != r->last_req) {
		sim_fail(&w->s, "rank %d at step %" PRIu64 "'s boundary takes the answer to request %" PRIu64 " (timeline %" PRIu64 "), not to its latest, %" PRIu64,
			 i, r->step, req, w->req[req].tl, r->last_req);
		return false;
	}
	return true;
}

static void boundary(struct bworld *w, int i)
{
	struct bw_rank *r = &w->r[i];

	if (r->seen_tl != r->tl) { /* zs_trainer_resume: a new timeline, nothing posted */
		r->tl = r->seen_tl;
		r->step = w->back_to;
		r->have_last = false;
		zs_bm_drop(&r->bm);
		r->deadline_us = w->s.now_us + BOUND_MS * MS;
		sim_log(&w->s, "rank %d resumes at step %" PRIu64 " on timeline %" PRIu64, i, r->step, r->tl);
	}
	switch (zs_bm_take(&r->bm, w->s.now_us >= r->deadline_us)) {
	case ZS_BM_WAIT:
		wake(w, i, r->deadline_us - w->s.now_us);
		return;
	case ZS_BM_TIMEDOUT: /* ZS_ETIMEDOUT; the caller calls again */
		w->st->bound_timeouts++;
		sim_log(&w->s, "rank %d: step %" PRIu64 "'s boundary timed out", i, r->step);
		r->deadline_us = w->s.now_us + BOUND_MS * MS + 5 * MS;
		wake(w, i, sim_range(&w->s, 1 * MS, 5 * MS));
		return;
	case ZS_BM_ASK: { /* zs_coord_report_step_ex, waited for */
		bool has = r->have_last && !r->last_sent;
		uint64_t q = new_req(w, i, has, r->last);
		r->ph = BP_ASKING;
		r->epoch++;
		sim_log(&w->s, "rank %d at step %" PRIu64 "'s boundary asks the coordinator: request %" PRIu64,
			i, r->step, q);
		ev(w, lat(w), BW_SEND, i, 0, (int64_t)q, 0, 0);
		return;
	}
	case ZS_BM_TAKE:
		sim_log(&w->s, "rank %d at step %" PRIu64 "'s boundary takes the answer to request %" PRIu64 " (stop %" PRIu64 ")",
			i, r->step, r->ans_req, r->ans_stop);
		if (!fresh(w, i, r->ans_req))
			return;
		post(w, i);
		begin(w, i, r->ans_stop, r->ans_wv);
		return;
	}
}

static void act(struct bworld *w, int i, int epoch)
{
	struct bw_rank *r = &w->r[i];

	if (epoch != r->epoch)
		return;
	if (r->ph == BP_STEP && r->first_req) {
		/* a rank that joined at a grow runs ahead of nobody: its
		 * step's pushes complete once every rank in has begun it
		 * (the ranks from the start are not held to it here) */
		for (int k = 0; k < BW_MAX; k++) {
			const struct bw_rank *o = &w->r[k];
			if (k != i && o->joined && o->ph != BP_DONE && o->tl == r->tl &&
			    (o->step < r->step || (o->step == r->step && o->ph != BP_STEP))) {
				wake(w, i, 5 * MS);
				return;
			}
		}
	}
	if (r->ph == BP_STEP) { /* zs_step_end: the next boundary */
		r->last = r->step;
		r->have_last = true;
		r->last_sent = false;
		r->step++;
		if (r->step >= w->S) {
			r->ph = BP_DONE;
			return;
		}
		r->ph = BP_BOUNDARY;
		r->deadline_us = w->s.now_us + BOUND_MS * MS;
	}
	if (r->ph == BP_BOUNDARY)
		boundary(w, i);
}

static void reply(struct bworld *w, const struct sim_ev *e)
{
	struct bw_rank *r = &w->r[e->who];
	int i = e->who;

	if ((uint64_t)e->b < r->first_req)
		return; /* to an earlier process of the rank */
	if (!e->a) { /* the driver's own ask */
		if (r->ph != BP_ASKING || (uint64_t)e->b != r->last_req)
			return;
		if (!fresh(w, i, (uint64_t)e->b))
			return;
		r->last_sent = true;
		r->ph = BP_BOUNDARY;
		post(w, i);
		begin(w, i, (uint64_t)e->c, (int)e->d);
		return;
	}
	r->sender_busy = false; /* client/lease.c boundary_keep */
	if (zs_bm_answered(&r->bm, (uint64_t)e->a)) {
		r->ans_req = (uint64_t)e->b;
		r->ans_stop = (uint64_t)e->c;
		r->ans_wv = (int)e->d;
		if (r->ph == BP_BOUNDARY)
			wake(w, i, 0);
	}
	sender(w, i);
}

static void renew(struct bworld *w, const struct sim_ev *e)
{
	struct bw_rank *r = &w->r[e->who];

	if (e->a) { /* the reply: the job's timeline */
		if ((uint64_t)e->a > r->seen_tl)
			r->seen_tl = (uint64_t)e->a;
		return;
	}
	if (r->ph != BP_DONE)
		ev(w, RENEW_MS * MS, BW_RENEW, e->who, 0, 0, 0, 0);
	ev(w, lat(w), BW_RENEW, e->who, (int64_t)w->tl, 0, 0, 0);
}

/* ----------------------------------------------------------------- a run */

static void check_end(struct bworld *w)
{
	for (int i = 0; i < BW_MAX; i++) {
		const struct bw_rank *r = &w->r[i];
		if (!r->joined)
			continue;
		w->st->checks++;
		if (r->ph != BP_DONE)
			return sim_fail(&w->s, "rank %d never ended: at step %" PRIu64 " (%s) when the run ended",
					i, r->step, r->ph == BP_STEP ? "running it" : r->ph == BP_ASKING ? "asking the coordinator" : "at its boundary");
		if (w->stop && r->tl == w->tl && r->stopped && r->step != w->stop)
			return sim_fail(&w->s, "rank %d left before step %" PRIu64 ", the stop is before %" PRIu64,
					i, r->step, w->stop);
		if (w->stop && r->tl == w->tl && !r->stopped && !r->left && w->stop < w->S)
			return sim_fail(&w->s, "rank %d ran every step past the stop before step %" PRIu64, i, w->stop);
	}
}

int bounds_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	struct bworld *w = calloc(1, sizeof *w);
	struct sim_ev e;
	int rc;

	if (!w) {
		snprintf(why, why_n, "out of memory");
		return 1;
	}
	sim_init(&w->s, seed ^ 0x424f554e44415259ull, tracing, why, why_n);
	w->st = st;
	w->R = (int)sim_range(&w->s, 1, BW_MAX);
	w->S = (uint64_t)sim_range(&w->s, 20, 60);
	w->fault_end_us = (RUN_MS - 20000) * (int64_t)MS;
	w->tl = 1;
	sim_log(&w->s, "seed %" PRIu64 ": %d ranks, %" PRIu64 " steps", seed, w->R, w->S);
	w->spec.world_size = (uint32_t)w->R;
	w->n_wv = 1;
	for (int i = 0; i < w->R; i++) {
		w->r[i] = (struct bw_rank){.tl = 1, .seen_tl = 1, .ph = BP_BOUNDARY, .joined = true,
					   .deadline_us = BOUND_MS * MS};
		wake(w, i, sim_range(&w->s, 0, 20 * MS));
		ev(w, sim_range(&w->s, 0, RENEW_MS * MS), BW_RENEW, i, 0, 0, 0, 0);
	}
	for (int i = 0, n = (int)sim_range(&w->s, 0, 2); i < n; i++)
		ev(w, sim_range(&w->s, 0, 1500 * MS), BW_ROLLBACK, 0, 0, 0, 0, 0);
	if (sim_chance(&w->s, 0.8))
		ev(w, sim_range(&w->s, 200 * MS, 3000 * MS), BW_STOP, 0, 0, 0, 0, 0);
	w->rs_rng = seed ^ 0x524553495a455321ull;
	if (rs_next(w) % 2) /* half the runs: 1 to 3 resizes */
		for (int i = 0, n = 1 + (int)(rs_next(w) % 3); i < n; i++)
			ev(w, (int64_t)(rs_next(w) % (2500 * MS)), BW_RESIZE, 0,
			   1 + (int64_t)(rs_next(w) % BW_MAX), 0, 0, 0);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * MS) {
		switch (e.kind) {
		case BW_ACT: act(w, e.who, (int)e.a); break;
		case BW_SEND: coordinator(w, &e); break;
		case BW_REPLY: reply(w, &e); break;
		case BW_RENEW: renew(w, &e); break;
		case BW_STOP: stop(w); break;
		case BW_ROLLBACK: rollback(w); break;
		case BW_RESIZE: resize(w, (uint32_t)e.a); break;
		}
	}
	if (!w->s.failed)
		check_end(w);
	rc = sim_end(&w->s, &st->events);
	free(w);
	return rc;
}
