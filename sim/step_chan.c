/*
 * step_chan.c - what a primary sends its copies (seeds, a step's mean, a
 * trainer's partial push), as engine/replica.c sends it: one worker per
 * job takes up to a batch of the tasks queued for any copy, in order,
 * posts them together (in order on each copy's connection), waits for
 * every answer, then, in order, sends each refused one again, alone, until
 * it ends, and ends each (task_end) before the next; then the next batch.
 * So a copy may refuse a later task of a batch for what an earlier one,
 * refused at first, brings when it is sent again (a seed); and no task of
 * a later batch reaches a copy before an earlier batch has ended. A task
 * for a copy that is no longer one ends as moot (engine/replica.c moot()).
 */
#include <string.h>

#include "sim/step.h"

#define BATCH 6 /* engine/replica.c takes up to 24 (a job's shards'); one shard's here */

/* d of a message: the task's own (a generation, a round, a seed's mid)
 * under the task's number on its channel (its answer names it) */
#define D_OWN(d) ((d) & 0xffffffffll)
#define D_SEQ(d) ((uint32_t)((uint64_t)(d) >> 32))

static int64_t d_of(const struct sw_msg *m)
{
	return (int64_t)((uint64_t)m->seq << 32 | (uint64_t)D_OWN(m->d));
}

static void transmit(struct sworld *w, int who, int i, int64_t lat)
{
	struct sw_chan *c = &w->chan[who];
	struct sw_msg *m = &c->q[i];
	int64_t at = w->s.now_us + lat, a = m->a;

	if (at <= c->wire_at[m->to]) /* one connection a copy: in the order posted */
		at = c->wire_at[m->to] + 1;
	c->wire_at[m->to] = at;
	m->answered = false;
	m->wired = true;
	/* a step's forward, a seed: the table in force at its step, before
	 * it on the connection (engine/replica.c post_task) */
	if (m->kind == SW_FWD_STEP || m->kind == SW_SEED || m->kind == SW_CATCH_UP)
		a |= (int64_t)sw_hp_carry(w, who, (uint64_t)m->a & 0xffffffff) << 32;
	sw_ev4(w, at - w->s.now_us, m->kind, m->to, a, (int64_t)w->srv[who].epoch, who, d_of(m));
}

static void post_batch(struct sworld *w, int who)
{
	struct sw_chan *c = &w->chan[who];

	c->nb = c->n < BATCH ? c->n : BATCH;
	c->cur = -1; /* posting: every answer awaited */
	for (int i = 0; i < c->nb; i++)
		transmit(w, who, i, c->q[i].lat ? c->q[i].lat : sw_lat(w));
}

void sw_send(struct sworld *w, int who, int to, int kind, int64_t a, int64_t d, int64_t lat)
{
	struct sw_chan *c = &w->chan[who];

	if (c->n == SW_MAX_Q) {
		sim_fail(&w->s, "server %d: more than %d tasks queued for its copies", who, SW_MAX_Q);
		return;
	}
	c->q[c->n++] = (struct sw_msg){.kind = kind, .to = to, .a = a, .d = d, .lat = lat,
				       .seq = ++c->seq};
	if (!c->nb)
		post_batch(w, who);
}

void sw_send_first(struct sworld *w, int who, int to, int kind, int64_t a, int64_t d)
{
	struct sw_chan *c = &w->chan[who];

	if (c->n == SW_MAX_Q || c->cur < 0) {
		sim_fail(&w->s, "server %d: a task for copy %d put first out of turn", who, to);
		return;
	}
	memmove(&c->q[c->cur + 1], &c->q[c->cur], (size_t)(c->n - c->cur) * sizeof c->q[0]);
	c->q[c->cur] = (struct sw_msg){.kind = kind, .to = to, .a = a, .d = d, .seq = ++c->seq};
	c->n++;
	c->nb++;
	/* the task it goes before is sent again once it has ended */
	c->q[c->cur + 1].answered = false;
	c->q[c->cur + 1].wired = false;
}

/* Ends the batch's tasks in order: each answered one to its handler. */
static void deliver(struct sworld *w, int who)
{
	struct sw_chan *c = &w->chan[who];

	if (c->cur < c->nb && c->q[c->cur].answered) {
		struct sim_ev ev = c->q[c->cur].ans;
		sw_task_answer(w, &ev);
	} else if (c->cur < c->nb && !c->q[c->cur].wired) {
		transmit(w, who, c->cur, sim_range(&w->s, MS, 5 * MS));
	}
}

/* Task i answered (ev): kept, and the batch goes on when it may. */
static void answered(struct sworld *w, int who, int i, const struct sim_ev *ev)
{
	struct sw_chan *c = &w->chan[who];

	c->q[i].answered = true;
	c->q[i].wired = false;
	c->q[i].ans = *ev;
	if (c->cur < 0) { /* posting: all answered, then ended in order */
		for (int k = 0; k < c->nb; k++)
			if (!c->q[k].answered)
				return;
		c->cur = 0;
	} else if (i != c->cur) {
		return;
	}
	deliver(w, who);
}

void sw_chan_answer(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_chan *c = &w->chan[ev->who];
	int i;

	for (i = 0; i < c->nb && c->q[i].seq != D_SEQ(ev->d); i++)
		;
	if (i == c->nb || c->q[i].answered)
		return; /* a task ended since (moot) */
	answered(w, ev->who, i, ev);
}

int64_t sw_task_own(const struct sim_ev *ev)
{
	return D_OWN(ev->d);
}

void sw_again(struct sworld *w, int who)
{
	struct sw_chan *c = &w->chan[who];

	transmit(w, who, c->cur, sim_range(&w->s, MS, 5 * MS));
}

void sw_next(struct sworld *w, int who)
{
	struct sw_chan *c = &w->chan[who];

	if (++c->cur < c->nb) {
		deliver(w, who);
		return;
	}
	memmove(&c->q[0], &c->q[c->nb], (size_t)(c->n - c->nb) * sizeof c->q[0]);
	c->n -= c->nb;
	c->nb = 0;
	if (c->n)
		post_batch(w, who);
}

static int answer_kind(int kind)
{
	return kind == SW_SEED ? SW_SEED_OK
	       : kind == SW_FWD_STEP ? SW_FWD_STEP_OK
	       : kind == SW_CATCH_UP ? SW_CATCH_UP_OK : SW_FWD_PUSH_OK;
}

/* Whether the copy's answer to m (from who's channel) is in the queue. */
static bool answer_queued(const struct sworld *w, int who, const struct sw_msg *m)
{
	for (size_t k = 0; k < w->s.n; k++) {
		const struct sim_ev *e = &w->s.heap[k];
		if (e->kind == answer_kind(m->kind) && e->who == who && e->c == m->to &&
		    D_SEQ(e->d) == m->seq)
			return true;
	}
	return false;
}

bool sw_chan_has(const struct sworld *w, int who, int to, int kind)
{
	const struct sw_chan *c = &w->chan[who];

	for (int i = 0; i < c->n; i++)
		if (c->q[i].to == to && c->q[i].kind == kind)
			return true;
	return false;
}

/* Ends who's posted tasks for copy to that no answer came for, each with
 * the answer code (and, broken: those whose answer is not on its way). */
static void end_unanswered(struct sworld *w, int who, int to, int code, bool broken)
{
	struct sw_chan *c = &w->chan[who];

	for (int i = 0; i < c->nb; i++) {
		struct sw_msg *m = &c->q[i];
		if (m->to != to || m->answered ||
		    (broken && (!m->wired || answer_queued(w, who, m))))
			continue;
		const struct sim_ev ev = {.kind = answer_kind(m->kind), .who = who,
					  .a = m->a & 0xffffffff, .b = code, .c = to,
					  .d = d_of(m)};
		answered(w, who, i, &ev);
		if (!c->nb || c->q[i].seq != D_SEQ(ev.d))
			break; /* the batch moved on meanwhile (its handlers ran) */
	}
}

void sw_chan_broken(struct sworld *w, int who, int to)
{
	end_unanswered(w, who, to, RF_AGAIN, true);
}

void sw_chan_drop(struct sworld *w, int who, int to)
{
	struct sw_chan *c = &w->chan[who];
	int keep = c->nb;

	/* queued, not posted: gone */
	for (int i = c->nb; i < c->n; i++)
		if (c->q[i].to != to)
			c->q[keep++] = c->q[i];
	c->n = keep;
	/* posted: moot, each ends with no answer from it */
	end_unanswered(w, who, to, RF_MOOT, false);
}
