/*
 * norms.c - the fourth simulated world: does every server clip a step
 * alike? A clipping job's 2 to 6 shards on 2 to 4 servers (with a copy
 * each on another server in half the seeds) train 5 to 16 steps; each
 * server reduces its primaries' shards, reports their squared norms to
 * the coordinator and waits for the step's total, then applies the step
 * with it. The coordinator's decisions are the real core (model/normx.c),
 * run as coord/norms.c runs it: a report counted once, the total in the
 * shards' order, kept totals by timeline, a settled report checked; the
 * servers' side as engine/clip.c runs it: a report sent again when its
 * call fails, the totals answered kept, a settled report sent when a
 * heartbeat's want names a step it applied.
 *
 * Faults: the coordinator killed (its collections and kept totals lost;
 * the calls waiting fail and are sent again), killed as it answers a
 * step's callers after some and before the others (those answered applied
 * the step; the new coordinator asks them again through the heartbeats),
 * reports delivered twice, a server lost after or before it reported (its
 * shards' copies promoted report them; a third of the time the promoted
 * copy's reduction differs from its lost primary's, a replica that
 * diverged), and rollbacks (a new timeline, from a step up to two back,
 * whose norms differ).
 *
 * Invariants:
 *   - every server applies a step with the same total as every other, and
 *     with the exact sum in the shards' order of their norms unless a
 *     copy that diverged reported one
 *   - an exchange fails (or a report is refused) only where a copy that
 *     diverged reported: never when every server reduced the same bits
 *   - the job trains all its steps once the faults stop
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/answered.h"
#include "model/normx.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define MS 1000
#define RUN_MS 60000
#define NX_MAX_S 4
#define NX_MAX_G 6
#define NX_MAX_T 16
#define NX_MAX_TL 24 /* timelines a run may reach */
#define NX_KEPT 4    /* coord/norms.c NORMS_KEPT */

enum nx_kind {
	NX_REDUCE,  /* who: server; a: shard; b: step; c: timeline; d: a diverged copy's */
	NX_REPORT,  /* a: report. At the coordinator */
	NX_ANSWER,  /* a: report; b: ok; c: the total's bits */
	NX_RETRY,   /* a: report. Its call failed: sent again */
	NX_HB,      /* who: server. A heartbeat; its reply names the wants */
	NX_WANT,    /* who; a: step; b: timeline */
	NX_COORD_DOWN,
	NX_COORD_UP,
	NX_LOSE,    /* who: a server lost (its shards' copies promoted) */
	NX_ROLLBACK,
};

struct nx_rep {
	int srv;
	uint64_t step, tl;
	bool settled, live; /* live: its call waits for an answer */
	double applied;
	uint32_t n;
	uint32_t pos[NX_MAX_G];
	double v[NX_MAX_G];
};

struct nx_coll {
	bool open;
	uint64_t step;
	int64_t started_us;
	struct zs_nx x;
	int waits[64]; /* reports */
	int n_waits;
};

struct nworld {
	struct sim s;
	struct sim_stats *st;
	int S, G;
	bool replicas;
	uint64_t T;
	int64_t fault_end_us;
	/* the job: its placement and timeline (the catalog's: they outlive
	 * a coordinator) */
	int primary[NX_MAX_G], copy[NX_MAX_G];
	uint64_t tl;
	bool alive[NX_MAX_S];
	/* the coordinator's memory */
	bool up;
	struct nx_coll coll[4];
	struct zs_nx_done kept[NX_KEPT];
	int n_kept, next_kept;
	/* the step open, and what each shard applied at it */
	uint64_t t;
	bool applied[NX_MAX_G];
	int applied_by[NX_MAX_G]; /* the server answered for it */
	bool have_total;
	double total; /* the total the step was applied with first */
	bool diverged[NX_MAX_TL][NX_MAX_T + 1]; /* a diverged copy reported there */
	bool reduced[NX_MAX_G];
	bool reported[NX_MAX_G]; /* in a report already */
	double norm[NX_MAX_G]; /* what each shard's reduction gave */
	/* each server's exchanges answered (engine/answered.c, as clip.c
	 * keeps them; shard g is unit g) */
	struct eng_answers ans[NX_MAX_S];
	struct nx_rep *rep;
	int n_rep, cap_rep;
};

static void ev(struct nworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b,
	       int64_t c)
{
	sim_at(&w->s, delay_us, (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c});
}

static int64_t lat(struct nworld *w)
{
	if (w->s.now_us < w->fault_end_us && sim_chance(&w->s, 0.05)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 1 * MS, 60 * MS);
	}
	return sim_range(&w->s, 50, 900);
}

/* Shard g's squared norm at step t of timeline tl: any double (the sum's
 * order shows in its bits). */
static double norm_of(uint64_t tl, uint64_t t, int g)
{
	uint64_t z = tl * 0x9E3779B97F4A7C15ull ^ (t << 8) ^ (uint64_t)g;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53 * 100.0;
}

static int new_rep(struct nworld *w)
{
	if (w->n_rep == w->cap_rep) {
		int nc = w->cap_rep ? 2 * w->cap_rep : 256;
		struct nx_rep *r = realloc(w->rep, (size_t)nc * sizeof *r);
		if (!r) {
			sim_fail(&w->s, "out of memory");
			return -1;
		}
		w->rep = r;
		w->cap_rep = nc;
	}
	w->rep[w->n_rep] = (struct nx_rep){0};
	return w->n_rep++;
}

/* ------------------------------------------------------ the coordinator */

static struct nx_coll *coll_of(struct nworld *w, uint64_t step, bool make)
{
	struct nx_coll *free_one = NULL;

	for (int i = 0; i < 4; i++) {
		if (w->coll[i].open && w->coll[i].step == step)
			return &w->coll[i];
		if (!w->coll[i].open && !free_one)
			free_one = &w->coll[i];
	}
	if (!make || !free_one || zs_nx_init(&free_one->x, (uint32_t)w->G))
		return NULL;
	free_one->open = true;
	free_one->step = step;
	free_one->started_us = w->s.now_us;
	free_one->n_waits = 0;
	return free_one;
}

static void coll_close(struct nx_coll *c)
{
	zs_nx_free(&c->x);
	c->open = false;
}

static void answer(struct nworld *w, int rep, bool ok, double total)
{
	int64_t bits;

	memcpy(&bits, &total, sizeof bits);
	ev(w, lat(w), NX_ANSWER, w->rep[rep].srv, rep, ok, bits);
}

/* The coordinator dies: what it held in memory goes, the calls that
 * wait on it fail. */
static void coord_down(struct nworld *w)
{
	w->up = false;
	for (int i = 0; i < 4; i++) {
		for (int k = 0; w->coll[i].open && k < w->coll[i].n_waits; k++)
			ev(w, sim_range(&w->s, 5 * MS, 30 * MS), NX_RETRY, w->rep[w->coll[i].waits[k]].srv,
			   w->coll[i].waits[k], 0, 0);
		if (w->coll[i].open)
			coll_close(&w->coll[i]);
	}
	w->n_kept = w->next_kept = 0;
	w->st->faults[SF_COORD_RESTART]++;
	ev(w, sim_range(&w->s, 20 * MS, 300 * MS), NX_COORD_UP, 0, 0, 0, 0);
	sim_log(&w->s, "coordinator killed");
}

static void keep(struct nworld *w, uint64_t step, double total)
{
	w->kept[w->next_kept] = (struct zs_nx_done){.timeline = w->tl, .step = step, .total = total,
						    .n_shards = (uint32_t)w->G};
	w->next_kept = (w->next_kept + 1) % NX_KEPT;
	if (w->n_kept < NX_KEPT)
		w->n_kept++;
}

static void rollback(struct nworld *w, const char *why);

/* An exchange failed or a report was refused: only a diverged copy may
 * cause it; the step cannot finish and the job rolls back. */
static void exchange_failed(struct nworld *w, uint64_t step, const char *why)
{
	w->st->checks++;
	w->st->exchange_fails++;
	if (!w->diverged[w->tl][step])
		sim_fail(&w->s, "step %" PRIu64 "'s exchange failed (%s) though every server reduced the same bits",
			 step, why);
	sim_log(&w->s, "coord: step %" PRIu64 ": %s: the job rolls back", step, why);
	rollback(w, why);
}

/* Every shard in: the total to every caller (or, the fault, to some of
 * them before the coordinator dies). */
static void complete(struct nworld *w, struct nx_coll *c, enum zs_nx_verdict v, double total)
{
	int upto = c->n_waits;

	if (v == ZS_NX_DIVERGED) {
		coll_close(c);
		return exchange_failed(w, c->step, "a server applied it with another total");
	}
	if (c->n_waits > 1 && w->s.now_us < w->fault_end_us && sim_chance(&w->s, 0.2))
		upto = (int)sim_range(&w->s, 1, c->n_waits - 1);
	for (int k = 0; k < upto; k++)
		answer(w, c->waits[k], true, total);
	if (upto < c->n_waits) {
		sim_log(&w->s, "coord: step %" PRIu64 " answered to %d of %d callers, then killed",
			c->step, upto, c->n_waits);
		c->n_waits -= upto;
		memmove(c->waits, c->waits + upto, (size_t)c->n_waits * sizeof *c->waits);
		return coord_down(w); /* the rest of the calls fail */
	}
	keep(w, c->step, total);
	coll_close(c);
}

static void report_in(struct nworld *w, int id)
{
	struct nx_rep *r = &w->rep[id];
	struct nx_coll *c;
	const struct zs_nx_done *kept;
	enum zs_nx_verdict v;
	double total = 0.0;

	if (!w->up) { /* the call fails: sent again */
		ev(w, sim_range(&w->s, 5 * MS, 30 * MS), NX_RETRY, r->srv, id, 0, 0);
		return;
	}
	if (r->settled) {
		c = coll_of(w, r->step, false);
		kept = c ? NULL : zs_nx_kept(w->kept, (size_t)w->n_kept, w->tl, r->step);
		v = zs_nx_settled(c ? &c->x : NULL, kept, w->tl, r->tl, (uint64_t)r->srv, r->applied,
				  r->pos, r->v, r->n, &total);
		sim_log(&w->s, "coord: server %d's settled report of step %" PRIu64 ": %d", r->srv + 1,
			r->step, (int)v);
		if (v == ZS_NX_OLD_TIMELINE)
			return;
		if (v == ZS_NX_COMPLETE)
			complete(w, c, v, total);
		else if (v != ZS_NX_WAIT && v != ZS_NX_ANSWER) { /* refused, or totals differ */
			if (c)
				coll_close(c);
			exchange_failed(w, r->step, "a settled report disagrees");
		}
		return;
	}
	if (!zs_nx_timeline_ok(r->tl, w->tl))
		return; /* a rolled-back run's, late: refused */
	kept = zs_nx_kept(w->kept, (size_t)w->n_kept, w->tl, r->step);
	if (kept) { /* an answer lost on its way: the same total */
		answer(w, id, true, kept->total);
		return;
	}
	if (!(c = coll_of(w, r->step, true))) {
		sim_fail(&w->s, "the world's collections are full");
		return;
	}
	v = zs_nx_report(&c->x, r->pos, r->v, r->n, &total);
	sim_log(&w->s, "coord: server %d's report of step %" PRIu64 " (%u shards): %u of %u in",
		r->srv + 1, r->step, r->n, c->x.n_have, c->x.n_shards);
	if (v == ZS_NX_NOT_FINITE || v == ZS_NX_OTHER_NORM) {
		coll_close(c);
		return exchange_failed(w, r->step, "a shard reported with another norm");
	}
	if (c->n_waits < 64)
		c->waits[c->n_waits++] = id;
	if (v == ZS_NX_COMPLETE || v == ZS_NX_DIVERGED)
		complete(w, c, v, total);
}

/*
 * The bound (coord_norm_sweep): a collection open this long fails. Only
 * for the one double fault the exchange does not survive: the coordinator
 * died between its answers, and a server it answered was lost before the
 * next one collected; the copies promoted in its place applied the step
 * from its forward and have no norm of its shards to send (a settled
 * report carries only the norms a server was answered for). The job rolls
 * back: loud, a rollback's cost. Any other shard missing is a server that
 * never reported: a bug.
 */
static void sweep(struct nworld *w)
{
	for (int i = 0; w->up && i < 4; i++) {
		struct nx_coll *c = &w->coll[i];
		if (!c->open || w->s.now_us - c->started_us < 2000 * MS)
			continue;
		w->st->checks++;
		for (int g = 0; g < w->G; g++)
			if (!c->x.have[g] && !(c->step == w->t && w->applied[g] &&
					       !w->alive[w->applied_by[g]]))
				return sim_fail(&w->s, "step %" PRIu64 "'s exchange waited 2 s for shard %d, whose primary (server %d) never reported it",
						c->step, g, w->primary[g] + 1);
		w->st->norm_gaps++;
		coll_close(c);
		sim_log(&w->s, "coord: step %" PRIu64 ": no norm of shards a lost server applied: the bound fails it", c->step);
		rollback(w, "the norm exchange's bound");
		return;
	}
}

/* A heartbeat's wants: the open steps, older than 250 ms, that wait for
 * a shard of this server's (coord_norm_wants). */
static void heartbeat(struct nworld *w, int srv)
{
	if (!w->alive[srv])
		return;
	sweep(w);
	for (int i = 0; w->up && i < 4; i++) {
		const struct nx_coll *c = &w->coll[i];
		bool waits = false;
		for (int g = 0; c->open && g < w->G; g++)
			waits |= w->primary[g] == srv && !c->x.have[g];
		if (waits && w->s.now_us - c->started_us >= 250 * MS)
			ev(w, lat(w), NX_WANT, srv, (int64_t)c->step, (int64_t)w->tl, 0);
	}
	ev(w, sim_range(&w->s, 50 * MS, 150 * MS), NX_HB, srv, 0, 0, 0);
}

/* ----------------------------------------------------------- the servers */

static void open_step(struct nworld *w)
{
	w->have_total = false;
	for (int g = 0; g < w->G; g++) {
		w->applied[g] = w->reduced[g] = w->reported[g] = false;
		ev(w, sim_range(&w->s, 1 * MS, 20 * MS), NX_REDUCE, w->primary[g], g, (int64_t)w->t,
		   (int64_t)w->tl);
	}
}

/* Server srv's primaries at the step are all reduced: the ones in no
 * report yet go to the coordinator together (the last to reduce claims
 * the others, engine/clip.c). */
static void report_out(struct nworld *w, int srv)
{
	int id;
	struct nx_rep *r;

	for (int g = 0; g < w->G; g++)
		if (w->primary[g] == srv && !w->applied[g] && !w->reduced[g])
			return; /* another is still reducing: it claims this one */
	if ((id = new_rep(w)) < 0)
		return;
	r = &w->rep[id];
	*r = (struct nx_rep){.srv = srv, .step = w->t, .tl = w->tl, .live = true};
	for (int g = 0; g < w->G; g++)
		if (w->primary[g] == srv && !w->applied[g] && !w->reported[g]) {
			r->pos[r->n] = (uint32_t)g;
			r->v[r->n++] = w->norm[g];
			w->reported[g] = true;
		}
	if (!r->n) {
		r->live = false;
		return;
	}
	ev(w, lat(w), NX_REPORT, 0, id, 0, 0);
	if (w->s.now_us < w->fault_end_us && sim_chance(&w->s, 0.03)) /* delivered twice */
		ev(w, lat(w), NX_REPORT, 0, id, 0, 0);
}

static void reduce(struct nworld *w, int srv, int g, uint64_t step, uint64_t tl, bool diverges)
{
	if (step != w->t || tl != w->tl || w->primary[g] != srv || !w->alive[srv] || w->applied[g])
		return;
	w->norm[g] = norm_of(tl, step, g);
	if (diverges) /* a copy whose reduction differs from its lost primary's */
		w->norm[g] += 0x1.0p-20;
	w->reduced[g] = true;
	report_out(w, srv);
}

/* The sum of the step's norms in the shards' order, as every server must
 * apply it (a diverged copy aside). */
static double expected(struct nworld *w)
{
	double t = 0.0;

	for (int g = 0; g < w->G; g++)
		t += norm_of(w->tl, w->t, g);
	return t;
}

static void applied(struct nworld *w, int id, double total)
{
	struct nx_rep *r = &w->rep[id];
	struct zs_shard_norm *nv = malloc(r->n * sizeof *nv);
	bool all = true;

	for (uint32_t i = 0; nv && i < r->n; i++)
		nv[i] = (struct zs_shard_norm){.unit = r->pos[i], .sumsq = r->v[i]};
	free(eng_ans_keep(&w->ans[r->srv], w->ans[r->srv].gen, r->step, total, nv, r->n));
	w->st->checks++;
	if (w->have_total && total != w->total)
		sim_fail(&w->s, "server %d applied step %" PRIu64 " with total %a, another server with %a",
			 r->srv + 1, r->step, total, w->total);
	else if (!w->diverged[w->tl][w->t] && total != expected(w))
		sim_fail(&w->s, "server %d applied step %" PRIu64 " with total %a, not the shards' sum %a",
			 r->srv + 1, r->step, total, expected(w));
	w->have_total = true;
	w->total = total;
	for (uint32_t i = 0; i < r->n; i++)
		if (w->primary[r->pos[i]] == r->srv) {
			w->applied[r->pos[i]] = true;
			w->applied_by[r->pos[i]] = r->srv;
		}
	for (int g = 0; g < w->G; g++)
		all &= w->applied[g];
	if (!all)
		return;
	w->st->clipped++;
	sim_log(&w->s, "step %" PRIu64 " applied everywhere with total %a", w->t, total);
	if (++w->t <= w->T) {
		open_step(w);
	}
}

static void answered(struct nworld *w, int id, bool ok, int64_t bits)
{
	struct nx_rep *r = &w->rep[id];
	double total;

	memcpy(&total, &bits, sizeof total);
	if (!ok || !r->live || !w->alive[r->srv] || r->settled)
		return;
	r->live = false;
	if (r->tl != w->tl || r->step != w->t)
		return; /* of a step rolled back since */
	applied(w, id, total);
}

static void retry(struct nworld *w, int id)
{
	struct nx_rep *r = &w->rep[id];
	int nid;

	if (!r->live || !w->alive[r->srv] || r->tl != w->tl || r->step != w->t)
		return;
	r->live = false;
	if ((nid = new_rep(w)) < 0)
		return;
	w->rep[nid] = w->rep[id]; /* w->rep may have moved */
	w->rep[nid].live = true;
	ev(w, lat(w), NX_REPORT, 0, nid, 0, 0);
}

/* A want names a step this server may have applied: its settled report,
 * with the total it applied and the norms of every exchange of that step
 * it was answered (engine_norms_answered: a promoted copy's went on their
 * own). A want of another timeline finds nothing: a restore forgot them. */
static void want(struct nworld *w, int srv, uint64_t step, uint64_t tl)
{
	struct zs_shard_norm *nv;
	uint32_t n;
	double total = 0.0;
	int id;

	if (!w->alive[srv] || tl != w->tl ||
	    eng_ans_of(&w->ans[srv], step, &nv, &n, &total) != ZS_OK)
		return;
	if ((id = new_rep(w)) >= 0) {
		w->rep[id] = (struct nx_rep){.srv = srv, .step = step, .tl = tl, .settled = true,
					     .applied = total};
		for (uint32_t i = 0; i < n && i < NX_MAX_G; i++) {
			w->rep[id].pos[i] = nv[i].unit;
			w->rep[id].v[i] = nv[i].sumsq;
		}
		w->rep[id].n = n < NX_MAX_G ? n : NX_MAX_G;
		w->st->settled_reports++;
		ev(w, lat(w), NX_REPORT, 0, id, 0, 0);
	}
	free(nv);
}

/* ------------------------------------------------------------- faults */

static void rollback(struct nworld *w, const char *why)
{
	if (w->tl + 1 >= NX_MAX_TL)
		return sim_fail(&w->s, "more rollbacks than the world keeps (%s)", why);
	w->tl++;
	for (int i = 0; i < 4; i++) /* coord_norms_fail_job: their calls fail */
		if (w->coll[i].open)
			coll_close(&w->coll[i]);
	for (int i = 0; i < w->S; i++) /* a restore forgets them (eng_clip_forget) */
		eng_ans_forget(&w->ans[i]);
	w->t = w->t > 1 + 2 ? w->t - (uint64_t)sim_range(&w->s, 0, 2) : 1;
	if (w->t > w->T)
		w->t = w->T;
	w->st->norm_rollbacks++;
	sim_log(&w->s, "rollback (%s): timeline %" PRIu64 ", from step %" PRIu64, why, w->tl, w->t);
	open_step(w);
}

static int other_live(struct nworld *w, int not1, int not2)
{
	for (int k = 0, i = (int)sim_below(&w->s, (uint64_t)w->S); k < w->S; k++, i = (i + 1) % w->S)
		if (w->alive[i] && i != not1 && i != not2)
			return i;
	return -1;
}

/* Server srv lost: its primaries' copies promoted (a third of them
 * diverged), copies made anew where it held one. */
static void lose(struct nworld *w, int srv)
{
	int live = 0;

	for (int i = 0; i < w->S; i++)
		live += w->alive[i];
	if (!w->replicas || !w->alive[srv] || live < 3 || w->t > w->T)
		return;
	for (int g = 0; g < w->G; g++)
		if (w->primary[g] == srv && (w->copy[g] < 0 || !w->alive[w->copy[g]]))
			return; /* no copy to promote: not this fault's */
	w->alive[srv] = false;
	w->st->faults[SF_FAILOVER]++;
	sim_log(&w->s, "server %d lost", srv + 1);
	for (int g = 0; g < w->G; g++) {
		if (w->copy[g] == srv)
			w->copy[g] = other_live(w, w->primary[g], srv);
		if (w->primary[g] != srv)
			continue;
		w->primary[g] = w->copy[g];
		w->copy[g] = other_live(w, w->primary[g], srv);
		if (w->applied[g])
			continue;
		bool div = sim_chance(&w->s, 0.35);
		if (div)
			w->diverged[w->tl][w->t] = true;
		w->reduced[g] = false;
		w->reported[g] = false;
		sim_at(&w->s, sim_range(&w->s, 1 * MS, 20 * MS),
		       (struct sim_ev){.kind = NX_REDUCE, .who = w->primary[g], .a = g,
				       .b = (int64_t)w->t, .c = (int64_t)w->tl, .d = div});
	}
}

static void plan_faults(struct nworld *w)
{
	const int64_t end = w->fault_end_us;

	for (int i = 0, n = (int)sim_range(&w->s, 0, 3); i < n; i++)
		ev(w, sim_range(&w->s, 0, end), NX_COORD_DOWN, 0, 0, 0, 0);
	for (int i = 0, n = (int)sim_range(&w->s, 0, 2); i < n; i++)
		ev(w, sim_range(&w->s, 0, end), NX_LOSE, (int)sim_below(&w->s, (uint64_t)w->S), 0, 0,
		   0);
	for (int i = 0, n = (int)sim_range(&w->s, 0, 1); i < n; i++)
		ev(w, sim_range(&w->s, 0, end), NX_ROLLBACK, 0, 0, 0, 0);
}

static void check_done(struct nworld *w)
{
	w->st->checks++;
	if (w->t <= w->T)
		sim_fail(&w->s, "the job did not finish: at step %" PRIu64 " of %" PRIu64, w->t, w->T);
}

int norms_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	struct nworld *w = calloc(1, sizeof *w);
	struct sim_ev e;
	int rc;

	if (!w) {
		snprintf(why, why_n, "out of memory");
		return 1;
	}
	sim_init(&w->s, seed ^ 0x4e4f524d53574c44ull, tracing, why, why_n);
	w->st = st;
	w->S = (int)sim_range(&w->s, 2, NX_MAX_S);
	w->G = (int)sim_range(&w->s, 2, NX_MAX_G);
	w->replicas = w->S > 2 && sim_chance(&w->s, 0.5);
	w->T = (uint64_t)sim_range(&w->s, 5, NX_MAX_T);
	w->fault_end_us = (int64_t)w->T * 40 * MS;
	w->up = true;
	w->tl = 1;
	w->t = 1;
	sim_log(&w->s, "seed %" PRIu64 ": %d shards on %d servers%s, %" PRIu64 " steps", seed, w->G,
		w->S, w->replicas ? " with a copy each" : "", w->T);
	for (int i = 0; i < w->S; i++) {
		w->alive[i] = true;
		ev(w, sim_range(&w->s, 0, 100 * MS), NX_HB, i, 0, 0, 0);
	}
	for (int g = 0; g < w->G; g++) {
		w->primary[g] = g % w->S;
		w->copy[g] = w->replicas ? (g + 1) % w->S : -1;
	}
	open_step(w);
	plan_faults(w);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * MS && w->t <= w->T) {
		switch (e.kind) {
		case NX_REDUCE:
			reduce(w, e.who, (int)e.a, (uint64_t)e.b, (uint64_t)e.c, e.d != 0);
			break;
		case NX_REPORT: report_in(w, (int)e.a); break;
		case NX_ANSWER: answered(w, (int)e.a, e.b != 0, e.c); break;
		case NX_RETRY: retry(w, (int)e.a); break;
		case NX_HB: heartbeat(w, e.who); break;
		case NX_WANT: want(w, e.who, (uint64_t)e.a, (uint64_t)e.b); break;
		case NX_COORD_DOWN:
			if (w->up)
				coord_down(w);
			break;
		case NX_COORD_UP:
			w->up = true;
			sim_log(&w->s, "coordinator back");
			break;
		case NX_LOSE: lose(w, e.who); break;
		case NX_ROLLBACK:
			if (w->t <= w->T)
				rollback(w, "a process lost");
			break;
		}
	}
	if (!w->s.failed)
		check_done(w);
	for (int i = 0; i < 4; i++)
		if (w->coll[i].open)
			coll_close(&w->coll[i]);
	for (int i = 0; i < NX_MAX_S; i++)
		eng_ans_forget(&w->ans[i]);
	free(w->rep);
	rc = sim_end(&w->s, &st->events);
	free(w);
	return rc;
}
