/*
 * step.c - the second simulated world: is every rank's term of a step in
 * its sum once? One shard of a job, its primary and (replicas 2) a copy,
 * and 1 to 4 trainer ranks, each pushing 1 to 3 micro-batches a step
 * (gradient accumulation: all but the last partial), for 4 to 10 steps,
 * through the real core of a shard's open step (engine/intake.c), run by
 * the servers as the engine's shells run it (sim/step_nodes.c).
 *
 * Faults: trainer processes killed at random (up to 4; a replacement joins
 * after the coordinator's verdict and redoes its rank's step, every push
 * of it marked redo), a second kill while a replacement redoes; with
 * replicas, the primary's server killed once (the coordinator promotes the
 * copy; forwards of the deposed primary's epoch are refused; each trainer,
 * told, sends the push it waits on again), and messages delayed so that
 * they overtake each other.
 *
 * Invariants:
 *   - every step a server applies (the primary's update, or a promoted
 *     copy's) has each rank's every micro-batch in its sum exactly once
 *   - no push of a correct trainer is refused (but for "its predecessor's
 *     push is still landing", which it sends again)
 *   - a replacement finds the step it redoes (a server keeps one back)
 *   - the counts stay sane (no more pushes landing than sent, no more
 *     full slots than ranks)
 *   - every rank trains all its steps once the faults stop (nothing waits
 *     forever)
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/step.h"

#define RUN_MS 60000 /* a run's bound: every rank must be done by then */

void sw_ev(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b)
{
	sim_at(&w->s, delay_us, (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b});
}

void sw_fail(struct sworld *w, const char *fmt, ...)
{
	va_list ap;

	if (w->failed)
		return;
	w->failed = true;
	va_start(ap, fmt);
	vsnprintf(w->why, w->why_n, fmt, ap);
	va_end(ap);
	sim_log(&w->s, "INVARIANT BROKEN: %s", w->why);
}

/* Mostly a fraction of a millisecond; 3% delayed up to 50 ms (SF_SLOW). */
int64_t sw_lat(struct sworld *w)
{
	if (sim_chance(&w->s, 0.03)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 5 * MS, 50 * MS);
	}
	return sim_range(&w->s, 50, 2 * MS);
}

static void kill_trainer(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];

	if (!t->alive || t->step >= w->S)
		return;
	t->alive = false;
	t->deaths++;
	w->st->faults[SF_KILL]++;
	sim_log(&w->s, "rank %d's process %d killed in step %llu", r, t->proc,
		(unsigned long long)t->step);
	/* the coordinator's verdict (the fast path: its connections ended) */
	sw_ev(w, sim_range(&w->s, 20 * MS, 400 * MS), SW_REPLACE, r, 0, 0);
}

static void replace(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];

	*t = (struct sw_trainer){.proc = w->next_proc++, .alive = true, .step = t->step,
				 .redo = t->step + 1, .pending = -1, .primary = w->primary,
				 .deaths = t->deaths};
	w->st->redos++;
	sim_log(&w->s, "rank %d's replacement, process %d, redoes step %llu", r, t->proc,
		(unsigned long long)t->step);
	sw_ev(w, 0, SW_WAKE, r, t->proc, 0);
}

static void kill_primary(struct sworld *w)
{
	struct sw_server *sv = &w->srv[w->primary];

	if (w->C < 2 || !sv->alive || !w->srv[1 - w->primary].alive)
		return;
	sv->alive = false;
	w->st->faults[SF_FAILOVER]++;
	sim_log(&w->s, "server %d (the primary, at step %llu) killed", w->primary,
		(unsigned long long)sv->version);
	sw_ev(w, sim_range(&w->s, 10 * MS, 300 * MS), SW_PROMOTE, 0, 0, 0);
}

/* coord/failover.c: the copy is the primary, in a new placement epoch. */
static void promote(struct sworld *w)
{
	struct sw_server *sv = &w->srv[1 - w->primary];

	w->primary = 1 - w->primary;
	sv->primary = true;
	sv->epoch++;
	sv->peer = false;
	sim_log(&w->s, "server %d promoted (at step %llu)", w->primary,
		(unsigned long long)sv->version);
	for (int r = 0; r < w->R; r++)
		sw_ev(w, sim_range(&w->s, MS, 50 * MS), SW_TOLD, r, 0, 0);
}

static void plan_faults(struct sworld *w)
{
	int kills = (int)sim_range(&w->s, 0, 4);

	for (int i = 0; i < kills; i++)
		sw_ev(w, sim_range(&w->s, 0, w->fault_end_us), SW_KILL, (int)sim_below(&w->s, (uint64_t)w->R),
		      0, 0);
	if (w->C > 1 && sim_chance(&w->s, 0.7))
		sw_ev(w, sim_range(&w->s, 0, w->fault_end_us), SW_KILL_PRIMARY, 0, 0, 0);
}

static void check_counts(struct sworld *w)
{
	for (int i = 0; i < w->C; i++) {
		const struct sw_server *sv = &w->srv[i];
		w->st->checks++;
		if (sv->in.landing > (uint32_t)w->n_push || sv->in.full > (uint32_t)w->R)
			sw_fail(w, "server %d's counts are off: %u pushes landing, %u ranks' last push in",
				i, sv->in.landing, sv->in.full);
	}
}

static void check_done(struct sworld *w)
{
	for (int r = 0; r < w->R; r++) {
		const struct sw_trainer *t = &w->t[r];
		w->st->checks++;
		if (t->step < w->S)
			sw_fail(w,
				"rank %d (process %d%s) is at step %llu micro-batch %u of %llu when the run ends (waiting on push %d; the primary, server %d, at step %llu)",
				r, t->proc, t->alive ? "" : ", dead", (unsigned long long)t->step, t->micro,
				(unsigned long long)w->S, t->pending, w->primary,
				(unsigned long long)w->srv[w->primary].version);
	}
}

int step_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	struct sworld *w = calloc(1, sizeof *w);
	struct sim_ev e;
	int rc;

	if (!w) {
		snprintf(why, why_n, "out of memory");
		return 1;
	}
	/* its own random stream: the liveness world's choices stay as they were */
	sim_init(&w->s, seed ^ 0x5354455057524c44ull, tracing);
	w->st = st;
	w->why = why;
	w->why_n = why_n;
	w->R = (int)sim_range(&w->s, 1, SW_MAX_R);
	w->K = (int)sim_range(&w->s, 1, SW_MAX_K);
	w->C = (int)sim_range(&w->s, 1, 2);
	w->S = (uint64_t)sim_range(&w->s, 4, 10);
	w->fault_end_us = (int64_t)w->S * 40 * MS;
	sim_log(&w->s, "seed %" PRIu64 ": %d rank(s), %d micro-batch(es) a step, %d cop%s, %llu steps",
		seed, w->R, w->K, w->C, w->C > 1 ? "ies" : "y", (unsigned long long)w->S);
	for (int i = 0; i < w->C; i++) {
		w->srv[i].alive = true;
		w->srv[i].primary = i == 0;
		w->srv[i].peer = i == 0 && w->C > 1;
		w->srv[i].epoch = 1;
		if (eng_in_init(&w->srv[i].in, (uint32_t)w->R))
			sw_fail(w, "out of memory");
	}
	for (int r = 0; r < w->R; r++) {
		w->t[r] = (struct sw_trainer){.proc = w->next_proc++, .alive = true, .pending = -1};
		sw_ev(w, sim_range(&w->s, 0, 5 * MS), SW_WAKE, r, w->t[r].proc, 0);
	}
	plan_faults(w);
	while (!w->failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * MS) {
		switch (e.kind) {
		case SW_WAKE:
		case SW_ACK:
		case SW_TOLD:
			sw_trainer_event(w, &e);
			break;
		case SW_KILL: kill_trainer(w, e.who); break;
		case SW_REPLACE: replace(w, e.who); break;
		case SW_KILL_PRIMARY: kill_primary(w); break;
		case SW_PROMOTE: promote(w); break;
		default: sw_server_event(w, &e); break;
		}
		check_counts(w);
	}
	if (!w->failed)
		check_done(w);
	st->events += w->s.fired;
	rc = w->failed;
	if (tracing && w->s.trace)
		fputs(w->s.trace, stdout);
	for (int i = 0; i < 2; i++)
		eng_in_free(&w->srv[i].in);
	sim_free(&w->s);
	free(w);
	return rc;
}
