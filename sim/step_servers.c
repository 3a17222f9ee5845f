/*
 * step_servers.c - the step world's servers: one shard's copies, the
 * first of the placement its primary. Each runs the real cores as the
 * engine's shells do:
 *
 *   engine/face.c      a push begins (eng_in_begin, then eng_in_began),
 *                      lands (eng_in_landed and its effects) or ends
 *                      unlanded (eng_in_unlanded); a push reaching a copy
 *                      the coordinator made primary takes the placement
 *                      first (eng_promoted_since)
 *   engine/step.c      the step applied: eng_in_clear, then forwarded
 *   engine/replica.c   a partial push forwarded to every copy, answered
 *                      once all have it; a step's mean forwarded, the
 *                      shard waiting (gathers, the next update) until
 *                      every copy answers; a refused forward sent again
 *   engine/replica_in.c a copy takes a forward (eng_copy_take, then
 *                      eng_copy_apply; a partial push: eng_in_forwarded),
 *                      fenced by placement epoch
 *   engine/acks.c      durable answers due (eng_acks_frontier)
 *   engine/epoch.c     a new placement taken in place (eng_copies_replan)
 *
 * The reduction is modelled as a count of each rank's micro-batches in it,
 * which is what the invariant reads.
 */
#include <stdio.h>
#include <string.h>

#include "sim/step.h"

static struct eng_at at_of(const struct sworld *w, const struct sw_server *sv)
{
	return (struct eng_at){.version = sv->version, .replicas = (uint32_t)w->C,
			       .contributors = (uint32_t)w->R, .world = (uint32_t)w->R,
			       .unit = "u"};
}

static int term_of(const struct sworld *w, const struct eng_push *p)
{
	return p->partial ? (int)p->micro : w->K - 1;
}

static void answer(struct sworld *w, int push, enum zs_status st)
{
	sw_ev(w, sw_lat(w), SW_ACK, (int)w->push[push].p.rank, push, st);
}

/* engine/acks.c: the durable answers whose step is on every copy. */
static void flush(struct sworld *w, struct sw_server *sv)
{
	uint64_t frontier = eng_acks_frontier(sv->version, sv->wait);
	int keep = 0;

	for (int i = 0; i < sv->n_acks; i++)
		if (sv->acks[i].step < frontier)
			answer(w, sv->acks[i].push, ZS_OK);
		else
			sv->acks[keep++] = sv->acks[i];
	sv->n_acks = keep;
}

/* Every rank's every micro-batch in once: what the step's sum must be. */
static void check_sum(struct sworld *w, const struct sw_server *sv, int who)
{
	for (int r = 0; r < w->R; r++)
		for (int m = 0; m < w->K; m++) {
			w->st->checks++;
			if (sv->sum[r][m] != 1)
				sw_fail(w,
					"server %d applied step %llu with rank %d's micro-batch %d in its sum %d times (each rank's term goes in once)",
					who, (unsigned long long)sv->version, r, m, sv->sum[r][m]);
		}
}

static void forward_step(struct sworld *w, int who, int to)
{
	struct sw_server *sv = &w->srv[who];

	sw_ev4(w, w->slow_fwd ? sim_range(&w->s, 5 * MS, 400 * MS) : sw_lat(w), SW_FWD_STEP, to,
	       (int64_t)sv->version - 1, (int64_t)sv->epoch, who, (int64_t)sv->gen);
}

/* engine/replica.c eng_repl_queue: the step that made version, to every
 * copy; the shard waits for them all. */
static void queue_forward(struct sworld *w, int who)
{
	struct sw_server *sv = &w->srv[who];

	sv->wait = true;
	sv->wait_left = sv->n_peers;
	sv->refused = 0;
	for (int q = 0; q < sv->n_peers; q++)
		forward_step(w, who, sv->peer[q]);
}

/* engine/step.c eng_apply: the update, the next step open, the copies told. */
static void apply(struct sworld *w, int who)
{
	struct sw_server *sv = &w->srv[who];

	check_sum(w, sv, who);
	sim_log(&w->s, "server %d applies step %llu", who, (unsigned long long)sv->version);
	sv->acc_of = sv->version + 1;
	sv->version++;
	w->st->steps++;
	eng_in_clear(&sv->in);
	memset(sv->sum, 0, sizeof sv->sum);
	w->slow_fwd = ++w->applies == w->kill_after && sv->n_peers;
	if (sv->n_peers)
		queue_forward(w, who);
	else
		flush(w, sv);
	if (w->slow_fwd) /* its forwards just sent, slow on the wire: it dies */
		sw_ev(w, sim_range(&w->s, 0, 2 * MS), SW_KILL_SERVER, who, 0, 0);
	w->slow_fwd = false;
}

/* A partial push's forward, to every copy; answered once all have it. */
static void forward_push(struct sworld *w, int who, int id)
{
	struct sw_server *sv = &w->srv[who];

	if (!sv->n_peers) {
		answer(w, id, ZS_OK);
		return;
	}
	if (sv->n_fwd == SW_MAX_ACKS) {
		sw_fail(w, "server %d: more than %d forwards of partial pushes under way", who,
			SW_MAX_ACKS);
		return;
	}
	sv->fwd[sv->n_fwd++] = id;
	w->push[id].fwd_left = sv->n_peers;
	for (int q = 0; q < sv->n_peers; q++)
		sw_ev4(w, sw_lat(w), SW_FWD_PUSH, sv->peer[q], id, (int64_t)sv->epoch, who,
		       w->push[id].fwd_round);
}

static void begin(struct sworld *w, int who, int id)
{
	struct sw_server *sv = &w->srv[who];
	struct sw_push *x = &w->push[id];
	struct eng_at at;
	struct zs_error err = {0};
	enum eng_take take;
	enum zs_status st;

	if (!sv->alive)
		return; /* its connection is gone: the failover sends it again */
	if (!sv->primary && w->primary == who)
		sw_take_placement(w, who); /* eng_promoted_since */
	if (!sv->primary) {
		sw_fail(w, "push %d reached server %d, a copy (the trainers push to the primary)", id,
			who);
		return;
	}
	at = at_of(w, sv);
	st = eng_in_begin(&sv->in, &at, &x->p, &take, &err);
	sim_log(&w->s, "server %d: push %d (rank %u step %llu micro %u%s%s): %s%s", who, id,
		x->p.rank, (unsigned long long)x->p.step, x->p.micro, x->p.partial ? " partial" : "",
		x->p.redo ? " redo" : "", st ? "refused: " : take == EI_COUNTED ? "counted" : "again",
		st ? err.msg : "");
	if (st) {
		answer(w, id, st);
		return;
	}
	eng_in_began(&sv->in, &x->p, take);
	x->began = true;
	w->st->pushes++;
	w->st->again += take == EI_AGAIN;
	sw_ev(w, sim_range(&w->s, 200, 8 * MS), SW_LAND, who, id, 0);
}

static void landed(struct sworld *w, int who, int id)
{
	struct sw_server *sv = &w->srv[who];
	struct sw_push *x = &w->push[id];
	struct sw_trainer *t = &w->t[x->p.rank];
	struct eng_at at = at_of(w, sv);
	struct eng_in_fx fx;

	if (!sv->alive || x->ended)
		return;
	x->ended = true;
	if (!t->alive || t->proc != x->proc) {
		/* its sender died before its bytes were in: the connection
		 * ends, the push with it (eng_t_write_abort) */
		eng_in_unlanded(&sv->in, &at, &x->p);
		sim_log(&w->s, "server %d: push %d unlanded (its process died)", who, id);
		return;
	}
	eng_in_landed(&sv->in, &at, &x->p, &fx);
	if (fx.deposit)
		sv->sum[x->p.rank][term_of(w, &x->p)]++;
	sim_log(&w->s, "server %d: push %d landed:%s%s%s%s", who, id, fx.deposit ? " in the sum" : "",
		fx.forward ? " forwarded" : "", fx.complete ? " completes the step" : "",
		!fx.forward && fx.ack == EI_ACK_DURABLE ? " answered once on every copy" : "");
	if (fx.forward) {
		forward_push(w, who, id);
		return;
	}
	if (fx.ack == EI_ACK_NOW) {
		answer(w, id, ZS_OK);
	} else if (sv->n_acks < SW_MAX_ACKS) {
		sv->acks[sv->n_acks].push = id;
		sv->acks[sv->n_acks++].step = x->p.step;
	} else {
		sw_fail(w, "server %d: more than %d durable answers waiting", who, SW_MAX_ACKS);
	}
	if (fx.flush)
		flush(w, sv);
	if (fx.complete && sv->wait)
		sv->behind = true;
	else if (fx.complete)
		apply(w, who);
}

/* engine/replica_in.c: a copy takes a forward of its primary's epoch. */
static void copy_event(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];
	int from = (int)ev->c;
	struct zs_error err = {0};
	enum eng_fwd_take take;
	bool refused = (uint64_t)ev->b != sv->epoch; /* a deposed primary, or an epoch apart */

	if (!sv->alive)
		return;
	if (ev->kind == SW_FWD_PUSH) {
		struct sw_push *x = &w->push[ev->a];
		struct eng_at at = at_of(w, sv);
		if (!refused && x->p.step > sv->version) {
			sw_fail(w, "copy %d took a partial push of step %llu at step %llu", ev->who,
				(unsigned long long)x->p.step, (unsigned long long)sv->version);
			return;
		}
		if (!refused && x->p.step == sv->version && eng_in_forwarded(&sv->in, &at, &x->p))
			sv->sum[x->p.rank][term_of(w, &x->p)]++;
		sw_ev4(w, sw_lat(w), SW_FWD_PUSH_OK, from, ev->a, refused, ev->who, ev->d);
		return;
	}
	if (!refused && eng_copy_take(sv->version, true, sv->landing_fwd, (uint64_t)ev->a, &take, &err))
		refused = true;
	sim_log(&w->s, "copy %d: forward of step %llu from server %d (gen %lld): %s%s", ev->who,
		(unsigned long long)ev->a, from, (long long)ev->d,
		refused ? "refused " : take == EF_APPLY ? "lands" : "applied already",
		refused ? err.msg : "");
	if (!refused && take == EF_APPLY) {
		sv->landing_fwd = true;
		sw_ev4(w, sim_range(&w->s, 100, 4 * MS), SW_FWD_LAND, ev->who, ev->a, 0, from, ev->d);
		return;
	}
	sw_ev4(w, sw_lat(w), SW_FWD_STEP_OK, from, ev->a, refused, ev->who, ev->d);
}

/* The forward's bytes are in: applied (its open step), or done already. */
static void copy_landed(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];

	if (!sv->alive)
		return;
	if (eng_copy_apply(sv->version, sv->landing_fwd, (uint64_t)ev->a)) {
		sim_log(&w->s, "%s %d applies step %llu", sv->primary ? "server" : "copy", ev->who,
			(unsigned long long)sv->version);
		sv->landing_fwd = false;
		sv->acc_of = sv->version + 1;
		sv->version++;
		eng_in_clear(&sv->in); /* partial pushes' terms: the mean has them */
		memset(sv->sum, 0, sizeof sv->sum);
		/* eng_apply: a copy promoted while it landed forwards it in turn */
		if (sv->n_peers)
			queue_forward(w, ev->who);
		else
			flush(w, sv);
	}
	sw_ev4(w, sw_lat(w), SW_FWD_STEP_OK, (int)ev->c, ev->a, 0, ev->who, ev->d);
}

/* A copy's answer to a partial push's forward: refused (an epoch apart),
 * it goes again while that copy is still one; the push is answered once
 * every copy has it. */
static void push_forwarded(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];
	struct sw_push *x = &w->push[ev->a];
	int to = (int)ev->c, i;

	if (!sv->alive || !sv->primary)
		return;
	for (i = 0; i < sv->n_fwd && sv->fwd[i] != (int)ev->a; i++)
		;
	if (i == sv->n_fwd || ev->d != x->fwd_round)
		return; /* sent again since, to the copies of a new placement */
	if (ev->b) {
		for (int q = 0; q < sv->n_peers; q++)
			if (sv->peer[q] == to) {
				sw_ev4(w, sim_range(&w->s, MS, 5 * MS), SW_FWD_PUSH, to, ev->a,
				       (int64_t)sv->epoch, ev->who, x->fwd_round);
				return;
			}
	}
	if (--x->fwd_left > 0)
		return;
	sv->fwd[i] = sv->fwd[--sv->n_fwd];
	answer(w, (int)ev->a, ZS_OK);
}

/* A copy's answer to a step's forward: refused, it goes again (a step
 * timeout in the engine; here 200 in a row fail the run); once every copy
 * has it, the answers due go and an update held back runs. */
static void step_forwarded(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];

	if (!sv->alive || !sv->primary ||
	    !eng_copies_settles(sv->wait, sv->gen, (uint64_t)ev->d, false, (uint64_t)ev->a,
				sv->version))
		return; /* a new placement came between, or a newer forward settles it */
	if (ev->b) {
		if (++sv->refused > 200) {
			sw_fail(w, "server %d's forward of step %llu was refused by copy %lld 200 times in a row",
				ev->who, (unsigned long long)ev->a, (long long)ev->c);
			return;
		}
		sw_ev4(w, sim_range(&w->s, MS, 5 * MS), SW_FWD_STEP, (int)ev->c, ev->a,
		       (int64_t)sv->epoch, ev->who, (int64_t)sv->gen);
		return;
	}
	if (--sv->wait_left > 0)
		return;
	sv->wait = false;
	flush(w, sv);
	if (sv->behind) {
		sv->behind = false;
		apply(w, ev->who);
	}
}

void sw_take_placement(struct sworld *w, int who)
{
	struct sw_server *sv = &w->srv[who];
	bool promoted = !sv->primary && w->primary == who;
	bool had = sv->primary;

	if (!sv->alive || sv->epoch == w->epoch)
		return;
	sv->epoch = w->epoch;
	sv->primary = w->primary == who;
	sv->n_peers = 0;
	for (int i = 0; sv->primary && i < w->n_plc; i++)
		if (w->plc[i] != who)
			sv->peer[sv->n_peers++] = w->plc[i];
	if (!sv->primary)
		return;
	switch (eng_copies_replan(sv->wait, (uint32_t)sv->n_peers, promoted, true, sv->version,
				  sv->acc_of)) {
	case ER_FORWARD_AGAIN:
		sv->gen++;
		queue_forward(w, who);
		break;
	case ER_DONE:
		sv->gen++;
		sv->wait = false;
		flush(w, sv);
		if (sv->behind) {
			sv->behind = false;
			apply(w, who);
		}
		break;
	case ER_LAST_AGAIN:
		queue_forward(w, who);
		break;
	case ER_NOTHING:
		break;
	}
	sim_log(&w->s, "server %d takes placement epoch %llu: %s at step %llu, %d cop%s", who,
		(unsigned long long)sv->epoch, promoted ? "promoted" : had ? "primary" : "copy",
		(unsigned long long)sv->version, sv->n_peers, sv->n_peers == 1 ? "y" : "ies");
	/* partial pushes' forwards under way: to the copies of this one (a
	 * copy that has one takes it once) */
	for (int i = 0; had && i < sv->n_fwd; i++) {
		int id = sv->fwd[i];
		w->push[id].fwd_left = sv->n_peers;
		w->push[id].fwd_round++;
		if (!sv->n_peers)
			answer(w, id, ZS_OK);
		for (int q = 0; q < sv->n_peers; q++)
			sw_ev4(w, sw_lat(w), SW_FWD_PUSH, sv->peer[q], id, (int64_t)sv->epoch, who,
			       w->push[id].fwd_round);
	}
	if (!sv->n_peers || !had)
		sv->n_fwd = 0;
}

void sw_server_event(struct sworld *w, const struct sim_ev *ev)
{
	switch (ev->kind) {
	case SW_BEGIN:
		begin(w, ev->who, (int)ev->a);
		break;
	case SW_LAND:
		landed(w, ev->who, (int)ev->a);
		break;
	case SW_FWD_PUSH:
	case SW_FWD_STEP:
		copy_event(w, ev);
		break;
	case SW_FWD_LAND:
		copy_landed(w, ev);
		break;
	case SW_FWD_PUSH_OK:
		push_forwarded(w, ev);
		break;
	case SW_FWD_STEP_OK:
		step_forwarded(w, ev);
		break;
	case SW_TAKE:
		sw_take_placement(w, ev->who);
		break;
	}
}
