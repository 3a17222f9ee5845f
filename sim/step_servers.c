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
 *   engine/epoch.c     a new placement taken in place (eng_copies_replan;
 *                      a promoted copy's catch-up, eng_copy_catchup_take)
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

/* When the coordinator hears what a server records for its next
 * heartbeat: mostly soon, a fifth of the time up to half a second. */
static int64_t heartbeat(struct sworld *w)
{
	return sim_range(&w->s, 5 * MS, sim_chance(&w->s, 0.2) ? 500 * MS : 50 * MS);
}

/* A copy's answer on the wire: slow while the copy is (a busy or
 * descheduled server: its primary's tasks queue up behind it). */
static int64_t reply_lat(struct sworld *w, int who)
{
	if (who == w->slow_srv && w->s.now_us >= w->slow_from && w->s.now_us < w->slow_until)
		return sim_range(&w->s, 10 * MS, 100 * MS);
	return sw_lat(w);
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
				sim_fail(&w->s,
					"server %d applied step %llu with rank %d's micro-batch %d in its sum %d times (each rank's term goes in once)",
					who, (unsigned long long)sv->version, r, m, sv->sum[r][m]);
		}
}

static void forward_step(struct sworld *w, int who, int to)
{
	struct sw_server *sv = &w->srv[who];

	sw_send(w, who, to, SW_FWD_STEP, (int64_t)sv->version - 1, (int64_t)sv->gen,
		w->slow_fwd ? sim_range(&w->s, 5 * MS, 400 * MS) : 0);
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
	w->st->checks++;
	if (sv->landing_fwd)
		sim_fail(&w->s, "server %d reduced step %llu into its mean gradient while a forward of it lands there (two writers)",
			who, (unsigned long long)sv->version);
	sim_log(&w->s, "server %d applies step %llu", who, (unsigned long long)sv->version);
	sw_hp_applied(w, who, sv->version);
	sv->acc_of = sv->version + 1;
	sv->version++;
	sv->prev_of = sv->prev_holds = sv->version; /* eng_prev_save, then step.c */
	w->st->steps++;
	eng_in_clear(&sv->in);
	memset(sv->sum, 0, sizeof sv->sum);
	w->slow_fwd = ++w->applies == w->kill_after && sv->n_peers;
	if (sv->n_peers)
		queue_forward(w, who);
	else
		flush(w, sv);
	if (w->slow_fwd) /* its forwards just sent, slow on the wire: it dies */
		sw_ev(w, sim_range(&w->s, 0, 2 * MS), SW_KILL_SERVER, who, 2, 0);
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
		sim_fail(&w->s, "server %d: more than %d forwards of partial pushes under way", who,
			SW_MAX_ACKS);
		return;
	}
	sv->fwd[sv->n_fwd++] = id;
	w->push[id].fwd_left = sv->n_peers;
	for (int q = 0; q < sv->n_peers; q++)
		sw_send(w, who, sv->peer[q], SW_FWD_PUSH, id, w->push[id].fwd_round, 0);
}

static void begin(struct sworld *w, int who, int id)
{
	struct sw_server *sv = &w->srv[who];
	struct sw_push *x = &w->push[id];
	struct eng_at at;
	struct zs_error err = {0};
	enum eng_take take;
	enum zs_status st;

	if (!sv->alive || w->born_seq[who] > x->conn_seq)
		return; /* its connection is gone: the failover sends it again */
	if (!sv->primary && w->primary == who)
		sw_take_placement(w, who); /* eng_promoted_since */
	if (!sv->primary) {
		sim_fail(&w->s, "push %d reached server %d, a copy (the trainers push to the primary)", id,
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
		sim_fail(&w->s, "server %d: more than %d durable answers waiting", who, SW_MAX_ACKS);
	}
	if (fx.flush)
		flush(w, sv);
	if (fx.complete && eng_copies_hold(sv->wait, sv->landing_fwd))
		sv->behind = true; /* phase WAITING */
	else if (fx.complete)
		apply(w, who);
}

/* engine/replica_in.c: a copy takes a forward of its primary's epoch. */
/* A copy refused a message of a newer epoch than it took: its heartbeat
 * may bring that epoch any moment, the next message of the batch already
 * on the wire (half the time: within 300 us). */
static void epoch_behind(struct sworld *w, const struct sim_ev *ev)
{
	if ((uint64_t)ev->b > w->srv[ev->who].epoch && sim_chance(&w->s, 0.5))
		sw_ev(w, sim_range(&w->s, 0, 300), SW_TAKE, ev->who, 0, 0);
}

static void copy_event(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];
	int from = (int)ev->c;
	struct zs_error err = {0};
	enum eng_fwd_take take;
	/* a deposed primary, or an epoch apart: refused (RF_AGAIN) */
	int refused = (uint64_t)ev->b != sv->epoch ? RF_AGAIN : RF_OK;

	if (refused)
		epoch_behind(w, ev);

	if (!sv->alive)
		return;
	if (ev->kind == SW_FWD_PUSH) {
		struct sw_push *x = &w->push[ev->a];
		struct eng_at at = at_of(w, sv);
		enum eng_part_take pt;
		if (!refused && !sv->ready) /* ZS_ENOTFOUND: its primary seeds it, then again */
			refused = RF_NO_STATE;
		if (!refused && eng_copy_partial_take(sv->version, sv->seed_gap, x->p.step, &pt, &err)) {
			sim_fail(&w->s, "copy %d refused a partial push forwarded: %s", ev->who, err.msg);
			return;
		}
		/* partial_begin: a micro-batch before the one it follows is
		 * refused (sent again, in the engine until the step timeout) */
		if (!refused && pt == EP_COUNT && eng_in_partial_check(&sv->in, &at, &x->p, NULL, &err))
			refused = RF_AGAIN;
		if (!refused && pt == EP_COUNT && eng_in_forwarded(&sv->in, &at, &x->p))
			sv->sum[x->p.rank][term_of(w, &x->p)]++;
		sw_ev4(w, reply_lat(w, ev->who), SW_FWD_PUSH_OK, from, ev->a, refused, ev->who, ev->d);
		return;
	}
	if (!refused) {
		enum zs_status st = eng_copy_take(sv->version, sv->ready, sv->landing_fwd,
						  (uint64_t)ev->a, &take, &err);
		refused = st == ZS_ENOTFOUND ? RF_NO_STATE : st ? RF_AGAIN : RF_OK;
	}
	sim_log(&w->s, "copy %d: forward of step %llu from server %d (gen %lld): %s%s", ev->who,
		(unsigned long long)ev->a, from, (long long)(ev->d & 0xffffffff),
		refused ? "refused " : take == EF_APPLY ? "lands" : "applied already",
		refused ? err.msg : "");
	if (!refused && take == EF_APPLY) {
		sv->landing_fwd = true;
		/* its bytes take a while: a large shard's, a fifth of the time */
		sw_ev4(w, sim_range(&w->s, 100, sim_chance(&w->s, 0.2) ? 100 * MS : 4 * MS), SW_FWD_LAND,
		       ev->who, ev->a, 0, from, ev->d);
		return;
	}
	sw_ev4(w, reply_lat(w, ev->who), SW_FWD_STEP_OK, from, ev->a, refused, ev->who, ev->d);
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
		sv->behind = false; /* WAITING -> LANDING: its own sum of the step dropped */
		sw_hp_applied(w, ev->who, sv->version);
		sv->acc_of = sv->version + 1;
		sv->version++;
		sv->prev_of = sv->prev_holds = sv->version;
		sv->seed_gap = eng_copy_gap_after(sv->seed_gap, sv->version);
		eng_in_clear(&sv->in); /* partial pushes' terms: the mean has them */
		memset(sv->sum, 0, sizeof sv->sum);
		/* eng_apply: a copy promoted while it landed forwards it in turn */
		if (sv->n_peers)
			queue_forward(w, ev->who);
		else
			flush(w, sv);
	} else { /* eng_repl_unlanded: of its open step at its begin, applied since */
		sv->landing_fwd = false;
		if (sv->behind && !eng_copies_hold(sv->wait, false)) {
			sv->behind = false;
			apply(w, ev->who);
		}
	}
	sw_ev4(w, reply_lat(w, ev->who), SW_FWD_STEP_OK, (int)ev->c, ev->a, 0, ev->who, ev->d);
}

/* engine/replica.c seed_now: a copy that answered it has no state gets
 * the shard's whole state now, ahead of the forward sent again. */
static void seed_now(struct sworld *w, int who, int to)
{
	struct sw_server *sv = &w->srv[who];

	enum eng_reseed how = eng_copy_reseed(sv->seeded, sv->n_seeded, (uint64_t)to);

	sim_log(&w->s, "server %d seeds copy %d (it has no state) at step %llu%s", who, to,
		(unsigned long long)sv->version,
		how == ES_IF_EMPTY ? " again, if it has none still" : "");
	sw_send_first(w, who, to, SW_SEED, sw_seed_a(sv),
		      (sv->in.pterms > 0) | (how == ES_IF_EMPTY ? SEED_IF_EMPTY : 0));
}

/* Whether a refused task goes again: within its bound (the engine's step
 * timeout; here 200 refusals in a row fail the run). */
static bool again(struct sworld *w, int who, const char *what, long long step, int to)
{
	if (++w->srv[who].refused <= 200)
		return true;
	sim_fail(&w->s, "server %d's %s of step %lld was refused by copy %d 200 times in a row", who,
		what, step, to);
	return false;
}

/* A copy's answer to a partial push's forward: refused (an epoch apart),
 * it goes again while that copy is still one; the push is answered once
 * every copy has it. */
static void push_forwarded(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];
	struct sw_push *x = &w->push[ev->a];
	int to = (int)ev->c, i;
	int64_t round = sw_task_own(ev);

	if (!sv->alive || !sv->primary)
		return;
	for (i = 0; i < sv->n_fwd && sv->fwd[i] != (int)ev->a; i++)
		;
	if (i == sv->n_fwd || round != x->fwd_round || ev->b == RF_MOOT) {
		sw_next(w, ev->who); /* sent anew since, to a new placement's copies */
		return;
	}
	if (ev->b) {
		if (!again(w, ev->who, "partial push forward", (long long)x->p.step, to))
			return;
		if (ev->b == RF_NO_STATE)
			seed_now(w, ev->who, to);
		sw_again(w, ev->who);
		return;
	}
	sv->refused = 0;
	if (--x->fwd_left == 0) { /* every copy has it: answered */
		sv->fwd[i] = sv->fwd[--sv->n_fwd];
		answer(w, (int)ev->a, ZS_OK);
	}
	sw_next(w, ev->who); /* last: it ends the next task, whose handler runs now */
}

/* A copy's answer to a step's forward: refused, it goes again (a step
 * timeout in the engine; here 200 in a row fail the run); once every copy
 * has it, the answers due go and an update held back runs. */
static void step_forwarded(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];
	int to = (int)ev->c;
	int64_t gen = sw_task_own(ev);
	bool catchup = ev->kind == SW_CATCH_UP_OK;

	if (!sv->alive || !sv->primary)
		return;
	if (ev->b == RF_MOOT ||
	    !eng_copies_settles(sv->wait, sv->gen, (uint64_t)gen,
				(uint64_t)ev->a + (catchup ? 0 : 1), sv->version)) {
		sw_next(w, ev->who); /* a new placement came between, or a newer forward settles it */
		return;
	}
	if (ev->b) {
		if (!again(w, ev->who, catchup ? "catch-up" : "forward", (long long)ev->a, to))
			return;
		if (ev->b == RF_NO_STATE)
			seed_now(w, ev->who, to);
		sw_again(w, ev->who);
		return;
	}
	sv->refused = 0;
	if (--sv->wait_left > 0) {
		sw_next(w, ev->who);
		return;
	}
	sv->wait = false;
	for (int u = 0; u < sv->n_unsettled && !catchup;) { /* copies seeded mid-step */
		bool got = false;
		for (int q = 0; q < sv->n_peers; q++)
			got |= sv->peer[q] == sv->unsettled[u].peer;
		if (got && eng_copies_settled(sv->unsettled[u].step, false, (uint64_t)ev->a)) {
			sw_ev(w, heartbeat(w), SW_SEEDED, sv->unsettled[u].peer, ev->who,
			      (int64_t)sv->unsettled[u].epoch);
			sv->unsettled[u] = sv->unsettled[--sv->n_unsettled];
		} else {
			u++;
		}
	}
	flush(w, sv);
	if (sv->behind && !eng_copies_hold(false, sv->landing_fwd)) {
		sv->behind = false;
		apply(w, ev->who);
	}
	sw_next(w, ev->who);
}

void sw_take_placement(struct sworld *w, int who)
{
	struct sw_server *sv = &w->srv[who];
	bool promoted = !sv->primary && w->primary == who;
	bool had = sv->primary;

	if (!sv->alive || sv->epoch == w->epoch)
		return;
	int was[SW_MAX_C], n_was = sv->n_peers;
	uint64_t was_epoch = sv->epoch;

	memcpy(was, sv->peer, sizeof sv->peer);
	sv->epoch = w->epoch;
	sv->primary = w->primary == who;
	sv->n_peers = 0;
	for (int i = 0; sv->primary && i < w->n_plc; i++)
		if (w->plc[i] != who)
			sv->peer[sv->n_peers++] = w->plc[i];
	for (int k = 0; k < n_was; k++) { /* moot: what went to a copy no longer one */
		bool kept = false;
		for (int q = 0; q < sv->n_peers; q++)
			kept |= sv->peer[q] == was[k];
		if (!kept)
			sw_chan_drop(w, who, was[k]);
	}
	if (!sv->primary)
		return;
	/* copies it had before that are others now: placed anew, in epochs
	 * it never took; as good as new ones (engine/epoch.c) */
	for (int k = 0; k < n_was; k++)
		if (sw_placed_anew(w, was[k], was_epoch))
			was[k] = -1;
	{ /* the copies it seeded that stay its copies stay seeded */
		uint32_t keep = 0;
		for (uint32_t i = 0; i < sv->n_seeded; i++) {
			bool in_was = false, in_now = false;
			for (int k = 0; k < n_was; k++)
				in_was |= was[k] == (int)sv->seeded[i];
			for (int k = 0; k < sv->n_peers; k++)
				in_now |= sv->peer[k] == (int)sv->seeded[i];
			if (in_was && in_now)
				sv->seeded[keep++] = sv->seeded[i];
		}
		sv->n_seeded = keep;
		keep = 0;
		for (int u = 0; u < sv->n_unsettled; u++) {
			bool in_was = false;
			for (int k = 0; k < n_was; k++)
				in_was |= was[k] == sv->unsettled[u].peer;
			if (in_was)
				sv->unsettled[keep++] = sv->unsettled[u];
		}
		sv->n_unsettled = (int)keep;
	}
	/* a new copy: the shard's whole state first, ahead of the forwards
	 * that follow on the same connection (engine/epoch.c) */
	for (int q = 0; q < sv->n_peers && sv->ready; q++) {
		bool old = false;
		for (int k = 0; k < n_was; k++)
			old |= was[k] == sv->peer[q];
		if (!old && sw_fresh(w, sv->peer[q]))
			sw_send(w, who, sv->peer[q], SW_SEED, sw_seed_a(sv), sv->in.pterms > 0,
				0);
	}
	/* every copy not seeded yet that has no state has its seed on the way
	 * (one placed anew in epochs this primary never took, too) */
	for (int q = 0; q < sv->n_peers && sv->ready; q++) {
		int p = sv->peer[q];
		w->st->checks++;
		if (sw_fresh(w, p) && w->srv[p].alive && !w->srv[p].ready &&
		    !sw_chan_has(w, who, p, SW_SEED))
			sim_fail(&w->s,
				 "server %d took placement epoch %llu (it held %llu): its copy on server %d has no state, and no seed goes to it",
				 who, (unsigned long long)sv->epoch, (unsigned long long)was_epoch, p);
	}
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
		if (sv->behind && !eng_copies_hold(false, sv->landing_fwd)) {
			sv->behind = false;
			apply(w, who);
		}
		break;
	case ER_LAST_AGAIN:
		queue_forward(w, who);
		break;
	case ER_CATCH_UP: /* engine/replica.c eng_repl_catchup */
		sv->wait = true;
		sv->wait_left = sv->n_peers;
		sv->refused = 0;
		for (int q = 0; q < sv->n_peers; q++)
			sw_send(w, who, sv->peer[q], SW_CATCH_UP, sw_seed_a(sv),
				(int64_t)sv->gen, 0);
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
			sw_send(w, who, sv->peer[q], SW_FWD_PUSH, id, w->push[id].fwd_round, 0);
	}
	if (!sv->n_peers || !had)
		sv->n_fwd = 0;
}

/* A seed or a catch-up as it arrived: its step in a, *prev the step
 * before's parameters sent with it (1 + their step; 0: none). */
static struct sim_ev seed_of(const struct sim_ev *sent, uint64_t *prev)
{
	struct sim_ev e = *sent;

	*prev = (uint64_t)e.a >> SEED_PREV_SHIFT;
	e.a &= 0xffffffff;
	return e;
}

/* engine/replica_in.c eng_repl_landed: a copy takes a seed's state at
 * step (gap: eng_copy_seed_gap's), its reduction discarded; EV_PARAMS: no
 * step before it here, its copy of the step before left as it was, but
 * for the step before's parameters when they came with it (ZS_WF_PREV). */
static void state_taken(struct sw_server *sv, uint64_t step, uint64_t prev, uint64_t gap)
{
	sv->ready = true;
	sv->version = step;
	sv->acc_of = 0;
	sv->prev_of = prev ? step : 0;
	if (prev)
		sv->prev_holds = prev;
	eng_in_clear(&sv->in); /* eng_step_discard */
	memset(sv->sum, 0, sizeof sv->sum);
	sv->seed_gap = gap;
}

/* engine/replica.c seed_task: what a seed of its state says (its step,
 * and the step before's parameters when kept whole here). */
int64_t sw_seed_a(const struct sw_server *sv)
{
	bool prev = eng_kept_seed_prev(sv->prev_holds != 0, sv->prev_of, sv->version);

	return (int64_t)(sv->version | (prev ? sv->prev_holds << SEED_PREV_SHIFT : 0));
}

/* engine/replica_in.c: a new copy takes its primary's seed, the shard's
 * whole state at step (mid: taken after partial pushes of that step, whose
 * terms it lacks: it drops that step's partial forwards, and applies the
 * primary's mean of it). */
static void copy_seed(struct sworld *w, const struct sim_ev *sent)
{
	uint64_t prev;
	const struct sim_ev e = seed_of(sent, &prev), *ev = &e;
	struct sw_server *sv = &w->srv[ev->who];
	struct zs_error err = {0};
	int refused = (uint64_t)ev->b != sv->epoch ? RF_AGAIN : RF_OK;

	if (refused)
		epoch_behind(w, ev);

	if (!sv->alive)
		return;
	if (!refused && eng_copy_seed_take(sv->landing_fwd, sv->ready, sv->version, (uint64_t)ev->a,
					   (ev->d & SEED_IF_EMPTY) != 0, 0, 0, &err))
		refused = RF_HAS_STATE;
	sim_log(&w->s, "copy %d: seed of step %lld%s from server %lld: %s%s", ev->who,
		(long long)ev->a, (ev->d & SEED_MID) ? " (mid-step)" : "", (long long)ev->c,
		refused ? "refused " : "taken", refused ? err.msg : "");
	if (!refused)
		state_taken(sv, (uint64_t)ev->a, prev,
			    eng_copy_seed_gap((ev->d & SEED_MID) != 0, (uint64_t)ev->a));
	sw_ev4(w, reply_lat(w, ev->who), SW_SEED_OK, (int)ev->c, ev->a, refused, ev->who,
	       ev->d | (int64_t)(sv->epoch << SEED_EPOCH_SHIFT));
}

/* engine/replica_in.c: a copy takes a promoted copy's catch-up, its
 * whole state at step, when it is behind it (whole at once: the step is
 * applied there), or keeps its own at or past it. */
static void copy_catchup(struct sworld *w, const struct sim_ev *sent)
{
	uint64_t prev;
	const struct sim_ev e = seed_of(sent, &prev), *ev = &e;
	struct sw_server *sv = &w->srv[ev->who];
	struct zs_error err = {0};
	int refused = (uint64_t)ev->b != sv->epoch ? RF_AGAIN : RF_OK;
	enum zs_status st = ZS_OK;

	if (refused)
		epoch_behind(w, ev);
	if (!sv->alive)
		return;
	if (!refused) {
		st = eng_copy_catchup_take(sv->landing_fwd, sv->ready, sv->version,
					   (uint64_t)ev->a, &err);
		refused = st && st != ZS_EEXIST ? RF_AGAIN : RF_OK;
	}
	sim_log(&w->s, "copy %d: catch-up of step %lld from server %lld: %s%s", ev->who,
		(long long)ev->a, (long long)ev->c,
		refused ? "refused " : st ? "kept its own " : "taken", st ? err.msg : "");
	if (!refused && !st)
		state_taken(sv, (uint64_t)ev->a, prev, 0);
	sw_ev4(w, reply_lat(w, ev->who), SW_CATCH_UP_OK, (int)ev->c, ev->a, refused, ev->who, ev->d);
}

/* engine/replica.c task_end of a seed: the copy whole (reported at the
 * next heartbeat), or, seeded mid-step, once that step's forward reached
 * it. */
static void seed_answered(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];
	int to = (int)ev->c;
	int64_t own = sw_task_own(ev), mid = own & SEED_MID;
	uint64_t epoch = (uint64_t)own >> SEED_EPOCH_SHIFT; /* the copy's, taking it */

	if (!sv->alive || !sv->primary)
		return;
	if (ev->b == RF_AGAIN) { /* again, alone, until it ends */
		if (again(w, ev->who, "seed", (long long)ev->a, to))
			sw_again(w, ev->who);
		return;
	}
	if (!ev->b) { /* else a copy with state: its forwards go on */
		sv->refused = 0;
		if (eng_copy_reseed(sv->seeded, sv->n_seeded, (uint64_t)to) == ES_SEED &&
		    sv->n_seeded < SW_MAX_C)
			sv->seeded[sv->n_seeded++] = (uint64_t)to;
		if (eng_copy_seed_whole(mid != 0))
			sw_ev(w, heartbeat(w), SW_SEEDED, to, ev->who, (int64_t)epoch);
		if (sim_chance(&w->s, 0.3)) /* the primary lost right after it seeds a copy */
			sw_ev(w, sim_range(&w->s, 0, 60 * MS), SW_KILL_SERVER, ev->who, 2, 0);
		else if (sv->n_unsettled < SW_MAX_C)
			sv->unsettled[sv->n_unsettled++] =
				(typeof(sv->unsettled[0])){to, (uint64_t)ev->a, epoch};
	}
	sw_next(w, ev->who);
}

void sw_task_answer(struct sworld *w, const struct sim_ev *answer_ev)
{
	const struct sw_server *sv = &w->srv[answer_ev->who];
	struct sim_ev e = *answer_ev, *ev = &e;
	bool peer = false;

	for (int q = 0; q < sv->n_peers; q++)
		peer |= sv->peer[q] == (int)ev->c;
	if (!peer) /* engine/replica.c moot(): a copy no longer one */
		e.b = RF_MOOT;
	if (ev->kind == SW_FWD_PUSH_OK)
		push_forwarded(w, ev);
	else if (ev->kind == SW_FWD_STEP_OK || ev->kind == SW_CATCH_UP_OK)
		step_forwarded(w, ev);
	else
		seed_answered(w, ev);
}

void sw_server_event(struct sworld *w, const struct sim_ev *carried)
{
	struct sim_ev e = *carried, *ev = &e;

	if (ev->kind == SW_FWD_STEP || ev->kind == SW_SEED || ev->kind == SW_CATCH_UP) {
		/* the table before it on the connection (engine/hparams.c) */
		sw_hp_carried(w, ev->who, ((uint64_t)ev->a >> 32) & 0xffff);
		e.a &= ~(int64_t)0xffff00000000; /* a seed's step before: its handler's */
	}
	switch (ev->kind) {
	case SW_HP:
		sw_hp_server_event(w, ev);
		break;
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
	case SW_FWD_STEP_OK:
	case SW_SEED_OK:
	case SW_CATCH_UP_OK:
		if (w->srv[ev->who].alive && w->srv[ev->who].primary)
			sw_chan_answer(w, ev);
		break;
	case SW_TAKE:
		sw_take_placement(w, ev->who);
		break;
	case SW_SEED:
		copy_seed(w, ev);
		break;
	case SW_CATCH_UP:
		copy_catchup(w, ev);
		break;
	}
}
