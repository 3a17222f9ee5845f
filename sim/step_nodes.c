/*
 * step_nodes.c - the step world's servers and trainers.
 *
 * A server runs the shard's open step through engine/intake.c exactly as
 * its shells do: engine/face.c (a push begins: eng_in_begin, then
 * eng_in_began; it lands: eng_in_landed and its effects; it ends
 * unlanded: eng_in_unlanded), engine/step.c (the step applied:
 * eng_in_clear), engine/replica.c and replica_in.c (a partial push
 * forwarded to the copy, which takes it once: eng_in_forwarded; the step's
 * mean forwarded, the durable acknowledgements answered once the copy has
 * applied it: engine/acks.c). The reduction is modelled as a count of
 * each rank's micro-batches in it, which is what the invariant reads.
 *
 * A trainer (client/driver.c, client/failover.c, client/redo.c) gathers
 * its step, pushes its micro-batches one at a time (each waits for its
 * answer; with replicas a last push is answered once its step is on every
 * copy), and, told of a failover, sends the push it waits on again to the
 * new primary. A replacement redoes its rank's step, every push of it
 * marked redo.
 */
#include <stdio.h>
#include <string.h>

#include "base/mutant.h"
#include "sim/step.h"

static struct eng_at at_of(const struct sworld *w, const struct sw_server *sv,
			   const struct eng_push *p)
{
	(void)p;
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
	uint64_t frontier = sv->version - (sv->wait && sv->version ? 1 : 0);
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

/* engine/step.c eng_apply: the update, the next step open, the copy told. */
static void apply(struct sworld *w, int who)
{
	struct sw_server *sv = &w->srv[who];

	check_sum(w, sv, who);
	sim_log(&w->s, "server %d applies step %llu", who, (unsigned long long)sv->version);
	sv->version++;
	w->st->steps++;
	eng_in_clear(&sv->in);
	memset(sv->sum, 0, sizeof sv->sum);
	if (sv->peer) {
		sv->wait = true;
		sw_ev(w, sw_lat(w), SW_FWD_STEP, 1 - who, (int64_t)sv->version - 1,
		      (int64_t)sv->epoch);
	} else {
		flush(w, sv);
	}
}

static void begin(struct sworld *w, int who, int id)
{
	struct sw_server *sv = &w->srv[who];
	struct sw_push *x = &w->push[id];
	struct eng_at at = at_of(w, sv, &x->p);
	struct zs_error err = {0};
	enum eng_take take;
	enum zs_status st;

	if (!sv->alive)
		return; /* its connection is gone: the failover sends it again */
	if (!sv->primary) {
		sw_fail(w, "push %d reached server %d, a copy (the trainers push to the primary)", id,
			who);
		return;
	}
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
	struct eng_at at = at_of(w, sv, &x->p);
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
		if (sv->peer)
			sw_ev(w, sw_lat(w), SW_FWD_PUSH, 1 - who, id, (int64_t)sv->epoch);
		else
			answer(w, id, ZS_OK);
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

	if (!sv->alive || (uint64_t)ev->b != sv->epoch)
		return; /* a deposed primary's forward: refused */
	if (ev->kind == SW_FWD_PUSH) {
		struct sw_push *x = &w->push[ev->a];
		struct eng_at at = at_of(w, sv, &x->p);
		if (x->p.step > sv->version) {
			sw_fail(w, "copy %d took a partial push of step %llu at step %llu", ev->who,
				(unsigned long long)x->p.step, (unsigned long long)sv->version);
			return;
		}
		if (x->p.step == sv->version && eng_in_forwarded(&sv->in, &at, &x->p))
			sv->sum[x->p.rank][term_of(w, &x->p)]++;
		sw_ev(w, sw_lat(w), SW_FWD_PUSH_OK, 1 - ev->who, ev->a, 0);
		return;
	}
	/* SW_FWD_STEP: the primary's mean gradient of step a, applied */
	if ((uint64_t)ev->a == sv->version) {
		sim_log(&w->s, "copy %d applies step %llu", ev->who, (unsigned long long)sv->version);
		sv->version++;
		eng_in_clear(&sv->in); /* partial pushes' terms: the mean has them */
		memset(sv->sum, 0, sizeof sv->sum);
	} else if ((uint64_t)ev->a > sv->version) {
		sw_fail(w, "copy %d at step %llu was forwarded step %llu", ev->who,
			(unsigned long long)sv->version, (unsigned long long)ev->a);
		return;
	}
	sw_ev(w, sw_lat(w), SW_FWD_STEP_OK, 1 - ev->who, ev->a, 0);
}

void sw_server_event(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];

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
	case SW_FWD_PUSH_OK: /* the copy has it: answered */
		if (sv->alive)
			answer(w, (int)ev->a, ZS_OK);
		break;
	case SW_FWD_STEP_OK:
		if (!sv->alive || (uint64_t)ev->a + 1 != sv->version)
			break;
		sv->wait = false;
		flush(w, sv);
		if (sv->behind) {
			sv->behind = false;
			apply(w, ev->who);
		}
		break;
	}
}

/* ------------------------------------------------------------ trainers */

static void wake(struct sworld *w, int r, int64_t delay)
{
	sw_ev(w, delay, SW_WAKE, r, w->t[r].proc, 0);
}

static void send_push(struct sworld *w, int r, const struct eng_push *p)
{
	struct sw_trainer *t = &w->t[r];
	int id = w->n_push;

	if (id == SW_MAX_PUSH) {
		sw_fail(w, "more than %d pushes in one run", SW_MAX_PUSH);
		return;
	}
	w->n_push++;
	w->push[id] = (struct sw_push){.p = *p, .proc = t->proc, .server = t->primary};
	t->pending = id;
	sw_ev(w, sw_lat(w), SW_BEGIN, t->primary, id, 0);
}

/* Its next action: gather the step (held until the shard is at it), then
 * push its next micro-batch. */
static void act(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];
	const struct sw_server *sv = &w->srv[t->primary];

	if (t->pending >= 0 || t->step >= w->S)
		return;
	if (!t->gathered) {
		if (!sv->alive || sv->version < t->step || sv->wait) {
			wake(w, r, sim_range(&w->s, 500, 3 * MS)); /* held: asked again */
			return;
		}
		if (sv->version > t->step + 1) {
			/* engine/redo.c: a server keeps one step back */
			sw_fail(w, "rank %d's process %d gathers step %llu, but the shard is at %llu: the step is gone",
				r, t->proc, (unsigned long long)t->step, (unsigned long long)sv->version);
			return;
		}
		t->gathered = true;
	}
	send_push(w, r,
		  &(struct eng_push){.step = t->step, .rank = (uint32_t)r, .micro = t->micro,
				     .partial = (int)t->micro < w->K - 1,
				     .redo = t->redo == t->step + 1});
}

static void acked(struct sworld *w, int r, int id, enum zs_status st)
{
	struct sw_trainer *t = &w->t[r];

	if (id != t->pending)
		return; /* an answer to a push sent again since */
	if (st == ZS_EAGAIN && ++t->again > 200) {
		sw_fail(w, "rank %d's push %d (step %llu micro %u) was refused 200 times in a row (%s): what it waits for never ends",
			r, id, (unsigned long long)w->push[id].p.step, w->push[id].p.micro,
			zs_strerror(st));
		return;
	}
	if (st == ZS_EAGAIN) { /* its predecessor's push still landing: again */
		t->pending = -1;
		wake(w, r, sim_range(&w->s, MS, 5 * MS));
		return;
	}
	if (st) {
		sw_fail(w, "rank %d's push %d (step %llu micro %u) was refused (%s)", r, id,
			(unsigned long long)w->push[id].p.step, w->push[id].p.micro,
			zs_strerror(st));
		return;
	}
	w->push[id].acked_to = w->s.now_us;
	t->pending = -1;
	t->again = 0;
	if ((int)++t->micro == w->K) { /* the step's last push answered: the next */
		t->micro = 0;
		t->step++;
		t->gathered = false;
	}
	wake(w, r, sim_range(&w->s, 100, 2 * MS));
}

void sw_trainer_event(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_trainer *t = &w->t[ev->who];

	switch (ev->kind) {
	case SW_WAKE:
		if (t->alive && ev->a == t->proc)
			act(w, ev->who);
		break;
	case SW_ACK:
		if (t->alive && w->push[ev->a].proc == t->proc)
			acked(w, ev->who, (int)ev->a, (enum zs_status)ev->b);
		break;
	case SW_TOLD: /* the new placement: what waited on the lost server goes again */
		if (!t->alive || t->primary == w->primary)
			break;
		t->primary = w->primary;
		if (t->pending >= 0 && w->push[t->pending].server != t->primary) {
			struct eng_push p = w->push[t->pending].p;
			sim_log(&w->s, "rank %d sends push %d again to server %d", ev->who, t->pending,
				t->primary);
			send_push(w, ev->who, &p);
		}
		wake(w, ev->who, 0);
		break;
	}
}
