/*
 * step.c - the second simulated world: is every rank's term of a step in
 * its sum once? One shard of a job on 1 to 3 copies (replicas), the first
 * its primary, and 1 to 4 trainer ranks, each pushing 1 to 3 micro-batches a step
 * (gradient accumulation: all but the last partial), for 4 to 10 steps,
 * through the real cores of a shard's open step (engine/intake.c) and of
 * its copies (engine/copies.c), run by the servers as the engine's shells
 * run them (sim/step_servers.c; the trainers: sim/step_trainer.c).
 *
 * Faults: trainer processes killed at random (up to 4; a replacement joins
 * after the coordinator's verdict and redoes the step the coordinator's
 * record has its rank in, model/redo.c, every push of it marked redo; a
 * rank's boundaries reach the coordinator late, a tenth of them up to
 * 300 ms), a second kill while a replacement redoes; with
 * replicas, up to replicas - 1 servers killed, the primary or a copy, a
 * second while the first is recovered (the coordinator places the shard
 * without them, the first copy left its primary, in a new epoch that each
 * server takes in its own time; forwards of another epoch are refused;
 * each trainer, told, sends the push it waits on again), and messages
 * delayed so that they overtake each other.
 *
 * Invariants:
 *   - every step a server applies (the primary's update, or a promoted
 *     copy's) has each rank's every micro-batch in its sum exactly once
 *   - a last push answered (with replicas) has its step on every live copy
 *   - a copy is never forwarded a step ahead of it, nor refuses one for
 *     long
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

#include "model/failover.h"
#include "sim/step.h"

#define RUN_MS 60000 /* a run's bound: every rank must be done by then */

void sw_ev4(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b,
	    int64_t c, int64_t d)
{
	sim_at(&w->s, delay_us,
	       (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c, .d = d});
}

void sw_ev(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b)
{
	sw_ev4(w, delay_us, kind, who, a, b, 0, 0);
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

int64_t sw_coord_lat(struct sworld *w)
{
	return sim_chance(&w->s, 0.1) ? sim_range(&w->s, 20 * MS, 300 * MS) : sw_lat(w);
}

/* coord/redo.c coord_step_begun: a rank's boundary, from the process that
 * holds the rank (a replaced one's is refused: its session is not the
 * rank's), taken into its record; answered. */
static void boundary(struct sworld *w, int r, uint64_t step, int proc)
{
	if (proc != w->t[r].proc)
		return;
	if (!zs_rstep_begun(&w->rec[r], step))
		return; /* a replacement's before the step it redoes */
	sim_log(&w->s, "coordinator: rank %d (process %d) began step %llu", r, proc,
		(unsigned long long)step);
	sw_ev(w, sw_coord_lat(w), SW_KNOWN, r, (int64_t)step, proc);
}

static void kill_trainer(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];

	if (!t->alive || t->step >= w->S)
		return;
	/* lost before the coordinator heard it begin a step, its job rolls
	 * back (zs_rstep_lose): a world this one does not model */
	if (!w->rec[r].known)
		return;
	t->alive = false;
	t->deaths++;
	w->st->faults[SF_KILL]++;
	sim_log(&w->s, "rank %d's process %d killed in step %llu", r, t->proc,
		(unsigned long long)t->step);
	/* the coordinator's verdict (the fast path: its connections ended) */
	sw_ev(w, sim_range(&w->s, 20 * MS, 400 * MS), SW_REPLACE, r, 0, 0);
}

/* The coordinator's verdict (coord/redo.c coord_rank_lost), and the
 * process that takes the rank next: it redoes the step the coordinator
 * has it lost in (coord_redo_of). */
static void replace(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];
	const char *no = zs_rstep_lose(&w->rec[r], &(struct zs_redo_job){0});

	if (no) {
		sim_fail(&w->s, "rank %d is lost and no replacement can redo its step: %s", r, no);
		return;
	}
	*t = (struct sw_trainer){.proc = w->next_proc++, .alive = true, .step = w->rec[r].step,
				 .redo = w->rec[r].step + 1, .pending = -1, .primary = w->primary,
				 .conn_seq = w->s.seq,
				 .deaths = t->deaths};
	w->st->redos++;
	sim_log(&w->s, "rank %d's replacement, process %d, redoes step %llu", r, t->proc,
		(unsigned long long)t->step);
	sw_ev(w, 0, SW_WAKE, r, t->proc, 0);
}

bool sw_fresh(const struct sworld *w, int who)
{
	for (int i = 0; i < w->n_plc; i++)
		if (w->plc[i] == who)
			return w->plc_sh[i].fresh;
	return false;
}

bool sw_placed_anew(const struct sworld *w, int who, uint64_t was_epoch)
{
	for (int i = 0; i < w->n_plc; i++)
		if (w->plc[i] == who)
			return w->plc_sh[i].copy &&
			       eng_copy_placed_anew(w->plc_sh[i].fresh, w->plc_sh[i].placed, was_epoch);
	return false;
}

/* Whether killing server who leaves a whole copy of the shard alive: the
 * world keeps to failovers (a shard with no copy left rolls back, which
 * the real-process fault matrix tests). */
static bool spare(const struct sworld *w, int who)
{
	for (int i = 0; i < w->n_plc; i++) {
		const struct sw_server *o = &w->srv[w->plc[i]];
		if (w->plc[i] != who && o->alive && o->ready && !w->plc_sh[i].fresh)
			return true;
	}
	return false;
}

/* A server dies (what: 0 the primary now, 1 a server of the placement at
 * random, 2 server who): the coordinator, after its verdict, places the
 * shard without it (a copy promoted when it was the primary). */
static void kill_server(struct sworld *w, int what, int who)
{
	struct sw_server *sv;

	if (what == 0)
		who = w->primary;
	else if (what == 1)
		who = w->plc[sim_below(&w->s, (uint64_t)w->n_plc)];
	sv = &w->srv[who];
	if (!sv->alive || w->kills_left <= 0 || !spare(w, who))
		return;
	w->kills_left--;
	sv->alive = false;
	w->st->faults[SF_FAILOVER]++;
	sim_log(&w->s, "server %d (%s, at step %llu) killed", who, sv->primary ? "the primary" : "a copy",
		(unsigned long long)sv->version);
	/* the coordinator marks it down (heartbeats missed), and takes it
	 * for lost (its verdict) in its own time: another server's failover
	 * may come between, with it known down or not */
	sw_ev(w, sim_range(&w->s, 5 * MS, 150 * MS), SW_MARK_DOWN, who, 0, 0);
	sw_ev(w, sim_range(&w->s, 10 * MS, 300 * MS), SW_FAILOVER, who, 0, 0);
}

static void take_all(struct sworld *w)
{
	for (int i = 0; i < w->n_plc; i++)
		sw_ev(w, sim_range(&w->s, 0, sim_chance(&w->s, 0.2) ? 100 * MS : 20 * MS), SW_TAKE,
		      w->plc[i], 0, 0);
}

/* The world's own chances for servers coming back (splitmix64). */
static uint64_t rb_next(struct sworld *w)
{
	uint64_t z = (w->rb_rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A lost server (dead, out of the placement) that comes back now, empty,
 * for the rebuild to place the lost copy on (half the time there is one;
 * -1: none). coord/recovery.c coord_server_restarted takes a server back
 * sooner than its lease for lost, and coord_failover rebuilds at once: a
 * server may take both epochs as one, its copy there before and after. */
static int back_now(struct sworld *w)
{
	int cand[SW_MAX_SRV], n = 0;

	for (int i = 0; i < w->n_srv; i++) {
		bool placed = false;
		for (int k = 0; k < w->n_plc; k++)
			placed |= w->plc[k] == i;
		if (!w->srv[i].alive && !placed)
			cand[n++] = i;
	}
	if (!n || rb_next(w) % 2)
		return -1;
	return cand[rb_next(w) % (uint64_t)n];
}

/* Server who starts again, empty: what was sent to its earlier process,
 * or due in it, is lost (the events queued before now, sim/step.c
 * stale()), and what its primaries posted it without an answer on the
 * way fails as on a broken connection. */
static void restart_server(struct sworld *w, int who)
{
	struct sw_server *sv = &w->srv[who];

	eng_in_free(&sv->in);
	*sv = (struct sw_server){.alive = true};
	if (eng_in_init(&sv->in, (uint32_t)w->R)) {
		sim_fail(&w->s, "out of memory");
		return;
	}
	w->down[who] = false;
	w->born_seq[who] = w->s.seq;
	memset(&w->chan[who], 0, sizeof w->chan[who]);
	w->st->faults[SF_SERVER_RESTART]++;
	w->st->placed_back++;
	sim_log(&w->s, "server %d starts again, empty", who);
	for (int p = 0; p < w->n_srv; p++)
		if (p != who && w->srv[p].alive)
			sw_chan_broken(w, p, who);
}

/* coord/failover.c coord_rebuild: a shard left with fewer copies than the
 * job keeps gets a new one on a server that holds none of it (a server
 * added, or a lost one back: back_now), fresh (not promotable) until its
 * primary has seeded it, in a new epoch that it was placed in. */
static void rebuild(struct sworld *w)
{
	int n = w->n_plc < w->C ? back_now(w) : -1;
	struct sw_server *sv;

	if (w->n_plc >= w->C || (n < 0 && w->n_srv == SW_MAX_SRV))
		return;
	w->rebuilds++;
	if (n >= 0) {
		restart_server(w, n);
	} else {
		n = w->n_srv++;
		sv = &w->srv[n];
		*sv = (struct sw_server){.alive = true};
		if (eng_in_init(&sv->in, (uint32_t)w->R)) {
			sim_fail(&w->s, "out of memory");
			return;
		}
	}
	w->plc_sh[w->n_plc] = (struct zs_shard){.server_id = (uint64_t)n + 1, .fresh = 1,
						.placed = w->epoch + 1};
	w->plc[w->n_plc++] = n;
	for (int i = 0; i < w->n_plc; i++) {
		w->plc_sh[i].copy = (uint32_t)i;
		w->plc_sh[i].copies = (uint32_t)w->n_plc;
	}
	w->epoch++;
	sim_log(&w->s, "coordinator: a new copy on server %d, placement epoch %llu", n,
		(unsigned long long)w->epoch);
	take_all(w);
}

/* The coordinator hears (server reporter's heartbeat) that copy who is
 * whole: coord_seeded, zs_placement_seeded. */
static void seeded(struct sworld *w, int reporter, int who, uint64_t epoch)
{
	struct zs_placement p = {.epoch = w->epoch, .n_shards = (uint32_t)w->n_plc,
				 .shards = w->plc_sh};

	if (!zs_placement_seeded(&p, (uint64_t)reporter + 1, 0, 0, (uint64_t)who + 1, epoch))
		return;
	sim_log(&w->s, "coordinator: the copy on server %d is seeded (server %d says, of epoch %llu)",
		who, reporter, (unsigned long long)epoch);
	if (w->born_seq[who])
		w->st->seeded_back++;
	w->st->checks++;
	if (w->srv[who].alive && !w->srv[who].ready)
		sim_fail(&w->s,
			 "the coordinator took the copy on server %d for whole (server %d's seed of epoch %llu), and it has no state",
			 who, reporter, (unsigned long long)epoch);
}

/* The coordinator's view: a copy can take over where its server is not
 * known down and it is seeded (coord/failover.c live()). */
static bool known_live(void *ctx, const struct zs_shard *sh)
{
	const struct sworld *w = ctx;

	return !w->down[sh->server_id - 1] && !sh->fresh;
}

/* coord/failover.c: server who lost, the placement without it
 * (zs_placement_without: the first live copy left its primary, in a new
 * epoch); each server takes it (a heartbeat away, or at once when a
 * trainer's push reaches a copy made primary), and each trainer, told,
 * sends what it waits on again to the new primary. */
static void failover(struct sworld *w, int who)
{
	struct zs_placement p = {.epoch = w->epoch, .n_shards = (uint32_t)w->n_plc,
				 .shards = w->plc_sh}, np;
	struct zs_error err = {0};

	w->down[who] = true;
	if (zs_placement_without(&p, (uint64_t)who + 1, known_live, w, &np, &err)) {
		sim_fail(&w->s, "the coordinator cannot place the shard without server %d: %s", who,
			err.msg);
		return;
	}
	if (np.n_shards == p.n_shards) { /* not in the placement */
		free(np.shards);
		return;
	}
	w->n_plc = (int)np.n_shards;
	memcpy(w->plc_sh, np.shards, np.n_shards * sizeof *np.shards);
	free(np.shards);
	for (int i = 0; i < w->n_plc; i++)
		w->plc[i] = (int)w->plc_sh[i].server_id - 1;
	w->epoch = np.epoch;
	w->primary = w->plc[0];
	sim_log(&w->s, "coordinator: server %d lost: placement epoch %llu, server %d the primary, %d cop%s",
		who, (unsigned long long)w->epoch, w->primary, w->n_plc, w->n_plc == 1 ? "y" : "ies");
	take_all(w);
	for (int r = 0; r < w->R; r++)
		sw_ev(w, sim_range(&w->s, MS, 50 * MS), SW_TOLD, r, 0, 0);
	if (w->n_plc < w->C)
		sw_ev(w, sim_range(&w->s, 5 * MS, 100 * MS), SW_REBUILD, 0, 0, 0);
}

static void plan_faults(struct sworld *w)
{
	int kills = (int)sim_range(&w->s, 0, 4);

	for (int i = 0; i < kills; i++)
		sw_ev(w, sim_range(&w->s, 0, w->fault_end_us), SW_KILL, (int)sim_below(&w->s, (uint64_t)w->R),
		      0, 0);
	if (w->C > 1 && sim_chance(&w->s, 0.3)) /* a primary lost with its forward in flight */
		w->kill_after = (uint64_t)sim_range(&w->s, 1, (int64_t)w->S);
	if (w->C > 1 && sim_chance(&w->s, 0.5)) { /* a copy slow to answer for a while */
		w->slow_srv = (int)sim_range(&w->s, 1, SW_MAX_SRV - 1);
		w->slow_from = sim_range(&w->s, 0, w->fault_end_us);
		w->slow_until = w->slow_from + sim_range(&w->s, 200 * MS, 1000 * MS);
		w->st->faults[SF_SLOW]++;
	}
	for (int i = 0; i < w->C; i++) /* a second loss while the first is recovered, a third */
		if (sim_chance(&w->s, i ? 0.4 : 0.7))
			sw_ev(w, sim_range(&w->s, 0, w->fault_end_us), SW_KILL_SERVER,
			      0, sim_chance(&w->s, 0.6) ? 0 : 1, 0);
}

/* Whether ev went to (or was due in) a process of its server before the
 * one now: lost with it (a server restarted). Answers from a copy's
 * earlier process were sent before it died: they arrive. */
static bool stale(const struct sworld *w, const struct sim_ev *ev)
{
	switch (ev->kind) {
	case SW_BEGIN:
	case SW_LAND:
	case SW_FWD_PUSH:
	case SW_FWD_STEP:
	case SW_FWD_LAND:
	case SW_FWD_PUSH_OK:
	case SW_FWD_STEP_OK:
	case SW_SEED:
	case SW_SEED_OK:
	case SW_CATCH_UP:
	case SW_CATCH_UP_OK:
	case SW_TAKE:
	case SW_HP:
	case SW_MARK_DOWN:
	case SW_FAILOVER:
		return ev->seq < w->born_seq[ev->who];
	case SW_KILL_SERVER: /* the one chosen then (a primary right after it seeds) */
		return ev->a == 2 && ev->seq < w->born_seq[ev->who];
	default:
		return false;
	}
}

static void check_counts(struct sworld *w)
{
	for (int i = 0; i < w->n_srv; i++) {
		const struct sw_server *sv = &w->srv[i];
		w->st->checks++;
		if (sv->in.landing > (uint32_t)w->n_push || sv->in.full > (uint32_t)w->R)
			sim_fail(&w->s, "server %d's counts are off: %u pushes landing, %u ranks' last push in",
				i, sv->in.landing, sv->in.full);
	}
}

static void check_done(struct sworld *w)
{
	for (int r = 0; r < w->R; r++) {
		const struct sw_trainer *t = &w->t[r];
		w->st->checks++;
		if (t->step < w->S)
			sim_fail(&w->s,
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
	sim_init(&w->s, seed ^ 0x5354455057524c44ull, tracing, why, why_n);
	w->st = st;
	w->rb_rng = seed ^ 0x4241434b41474149ull;
	w->R = (int)sim_range(&w->s, 1, SW_MAX_R);
	w->K = (int)sim_range(&w->s, 1, SW_MAX_K);
	w->C = (int)sim_range(&w->s, 1, SW_MAX_C);
	w->S = (uint64_t)sim_range(&w->s, 4, 10);
	w->fault_end_us = (int64_t)w->S * 40 * MS;
	sim_log(&w->s, "seed %" PRIu64 ": %d rank(s), %d micro-batch(es) a step, %d cop%s, %llu steps",
		seed, w->R, w->K, w->C, w->C > 1 ? "ies" : "y", (unsigned long long)w->S);
	w->epoch = 1;
	w->kills_left = w->C > 1 ? w->C : 0;
	w->n_srv = w->C;
	for (int i = 0; i < w->C; i++) {
		struct sw_server *sv = &w->srv[i];
		sv->alive = true;
		sv->ready = true; /* rank 0's initial upload */
		sv->primary = i == 0;
		for (int q = 1; i == 0 && q < w->C; q++)
			sv->peer[sv->n_peers++] = q;
		sv->epoch = 1;
		w->plc_sh[w->n_plc] = (struct zs_shard){.server_id = (uint64_t)i + 1,
							.copy = (uint32_t)i,
							.copies = (uint32_t)w->C};
		w->plc[w->n_plc++] = i;
		if (eng_in_init(&sv->in, (uint32_t)w->R))
			sim_fail(&w->s, "out of memory");
	}
	for (int r = 0; r < w->R; r++) {
		w->t[r] = (struct sw_trainer){.proc = w->next_proc++, .alive = true, .pending = -1};
		sw_ev(w, sim_range(&w->s, 0, 5 * MS), SW_WAKE, r, w->t[r].proc, 0);
	}
	plan_faults(w);
	sw_hp_plan(w);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * MS) {
		if (stale(w, &e))
			continue;
		switch (e.kind) {
		case SW_WAKE:
		case SW_ACK:
		case SW_TOLD:
		case SW_KNOWN:
		case SW_HP_OK:
			sw_trainer_event(w, &e);
			break;
		case SW_BOUNDARY: boundary(w, e.who, (uint64_t)e.a, (int)e.b); break;
		case SW_KILL: kill_trainer(w, e.who); break;
		case SW_REPLACE: replace(w, e.who); break;
		case SW_KILL_SERVER: kill_server(w, (int)e.a, e.who); break;
		case SW_REBUILD: rebuild(w); break;
		case SW_SEEDED: seeded(w, (int)e.a, e.who, (uint64_t)e.b); break;
		case SW_MARK_DOWN: w->down[e.who] = true; break;
		case SW_FAILOVER: failover(w, e.who); break;
		default: sw_server_event(w, &e); break;
		}
		check_counts(w);
	}
	if (!w->s.failed)
		check_done(w);
	for (int i = 0; i < SW_MAX_SRV; i++)
		eng_in_free(&w->srv[i].in);
	rc = sim_end(&w->s, &st->events);
	free(w);
	return rc;
}
