/*
 * readers.c - the fifth simulated world: does every weight reader read the
 * bytes of the version it pinned? 3 to 10 readers of a training job (some
 * relay, some do not) pin its latest step on the servers, register with
 * the coordinator and read from the parent it names or from the servers,
 * renew within their lease, report a parent that does not serve, leave
 * and come back; the job's steps go on. The coordinator's registry runs
 * the real core (model/relaytree.c) as coord/readers.c runs it: a live
 * step's timeline, a reader's parent; the registry's ids as it gives them.
 *
 * Faults: readers crashing (their entries lapse after the lease; their
 * children find them gone), the coordinator restarting (its registry
 * forgotten: each reader's next call registers it again under its id),
 * rollbacks (the job's timeline moves; the servers drop every pin, so a
 * reader whose pin went reads nothing more from the servers and pins
 * again), messages delayed.
 *
 * Invariants:
 *   - a reader's parent pinned its version of the same timeline, and relays
 *   - following parents from any reader ends at the servers; no reader
 *     has more than fanout relaying children
 *   - no two living readers share an id in the registry
 *   - the bytes a reader holds are of the timeline its version is
 *     registered with (never another run's step of the same number)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mutant.h"
#include "model/relaytree.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define MS 1000
#define RUN_MS 30000
#define RW_MAX 10
#define LEASE_MS 10000
#define FANOUT 2

enum rw_kind {
	RW_ACT,     /* who: reader; a: its process. Its next action */
	RW_CALL,    /* who; a: process; b: lost parent (0); c: leave. At the coordinator */
	RW_ANSWER,  /* who; a: process; b: id; c: parent; d: timeline */
	RW_STEP,    /* the job's next step */
	RW_ROLLBACK,
	RW_COORD_RESTART,
	RW_CRASH,   /* who: a reader's process dies */
	RW_RESTORED, /* the servers restored: their pins dropped, their timeline the job's */
};

struct rw_reader {
	bool alive;
	int proc;        /* its process: answers to an earlier one are dropped */
	uint64_t id;     /* 0: not registered */
	bool relay;
	bool pinned, waiting;
	uint64_t step;
	uint64_t pin_tl; /* the servers' timeline when it pinned */
	uint64_t label;  /* the timeline the registry gave its version */
	uint64_t parent; /* 0: the servers */
	bool has;        /* bytes of its version held */
	uint64_t bytes_tl;
};

struct rw_entry {
	struct zs_reader_info i;
	int who, proc;
	int64_t seen_us;
};

struct rworld {
	struct sim s;
	struct sim_stats *st;
	int R;
	uint64_t step, tl; /* the job's: its latest step, its timeline (the coordinator's) */
	uint64_t srv_tl;   /* the servers': a rollback reaches them when they restore */
	int64_t fault_end_us;
	struct rw_reader r[RW_MAX];
	int next_proc;
	/* the coordinator's registry (memory) and its next id */
	struct rw_entry reg[RW_MAX * 2];
	int n_reg;
	uint64_t next_id, id_base;
	bool up;
};

static void ev(struct rworld *w, int64_t d, int kind, int who, int64_t a, int64_t b, int64_t c,
	       int64_t dd)
{
	sim_at(&w->s, d, (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c, .d = dd});
}

static int64_t lat(struct rworld *w)
{
	if (w->s.now_us < w->fault_end_us && sim_chance(&w->s, 0.05)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 1 * MS, 300 * MS);
	}
	return sim_range(&w->s, 100, 2000);
}

static struct rw_entry *entry(struct rworld *w, uint64_t id)
{
	for (int i = 0; i < w->n_reg; i++)
		if (w->reg[i].i.id == id)
			return &w->reg[i];
	return NULL;
}

static void drop(struct rworld *w, int i)
{
	w->reg[i] = w->reg[--w->n_reg];
}

/* ------------------------------------------------------ the coordinator */

/* Every registered reader's parent, as the registry would name it now:
 * of its version and timeline, relaying; a path to the servers; fanout. */
static void check_tree(struct rworld *w)
{
	struct zs_reader_info v[RW_MAX * 2];
	int par[RW_MAX * 2], kids[RW_MAX * 2] = {0};

	for (int i = 0; i < w->n_reg; i++)
		v[i] = w->reg[i].i;
	for (int i = 0; i < w->n_reg; i++) {
		par[i] = zs_rt_parent(v, (uint32_t)w->n_reg, (uint32_t)i, FANOUT);
		w->st->checks++;
		if (par[i] < 0)
			continue;
		const struct zs_reader_info *p = &v[par[i]], *me = &v[i];
		if (p->step != me->step || p->timeline != me->timeline || !p->relay_addr[0])
			return sim_fail(&w->s, "reader %" PRIu64 " (step %" PRIu64 ", timeline %" PRIu64 ") is named parent %" PRIu64 " (step %" PRIu64 ", timeline %" PRIu64 "%s)",
					me->id, me->step, me->timeline, p->id, p->step, p->timeline,
					p->relay_addr[0] ? "" : ", relaying nothing");
		/* relaying children; the readers relaying nothing all read
		 * from the place after the relays (by design) */
		if (me->relay_addr[0] && ++kids[par[i]] > FANOUT)
			return sim_fail(&w->s, "reader %" PRIu64 " is parent of more than %d relaying readers",
					p->id, FANOUT);
	}
	for (int i = 0; i < w->n_reg; i++) {
		int k = i, hops = 0;
		while (par[k] >= 0 && hops <= w->n_reg)
			k = par[k], hops++;
		if (hops > w->n_reg)
			return sim_fail(&w->s, "reader %" PRIu64 "'s parents go round in a circle",
					v[i].id);
	}
}

/* A reader's call (coord_h_reader): registered (a new id, or its own
 * again), its timeline and parent answered. */
static void call(struct rworld *w, const struct sim_ev *e)
{
	struct rw_reader *r = &w->r[e->who];
	struct zs_reader_info me = {.id = r->id, .pinned = r->pinned, .step = r->step,
				    .timeline = r->label};
	struct rw_entry *known;
	int64_t now = w->s.now_us;
	int k;

	if (!w->up || !r->alive || e->a != r->proc)
		return; /* the call fails (the reader calls again), or its process died */
	if (r->relay)
		snprintf(me.relay_addr, sizeof me.relay_addr, "reader-%d", e->who);
	for (int i = 0; i < w->n_reg;) /* lapsed, or reported lost */
		if (w->reg[i].seen_us < now - (int64_t)LEASE_MS * MS ||
		    (e->b && w->reg[i].i.id == (uint64_t)e->b))
			drop(w, i);
		else
			i++;
	known = me.id ? entry(w, me.id) : NULL;
	w->st->checks++;
	if (known && (known->who != e->who || known->proc != (int)e->a) &&
	    w->r[known->who].alive && w->r[known->who].proc == known->proc &&
	    w->r[known->who].id == me.id)
		return sim_fail(&w->s, "readers %d and %d both hold id %" PRIu64 " in the registry",
				known->who, e->who, me.id);
	if (e->c) { /* leave */
		if (known)
			drop(w, (int)(known - w->reg));
		return;
	}
	me.timeline = zs_rt_timeline(&me, known ? &known->i : NULL, w->tl);
	if (!known) {
		if (w->n_reg == RW_MAX * 2)
			return;
		known = &w->reg[w->n_reg++];
		if (!me.id)
			me.id = ++w->next_id;
		else if (me.id > w->next_id)
			w->next_id = me.id;
	}
	known->i = me;
	known->who = e->who;
	known->proc = (int)e->a;
	known->seen_us = now;
	{
		struct zs_reader_info v[RW_MAX * 2];
		for (int i = 0; i < w->n_reg; i++)
			v[i] = w->reg[i].i;
		k = zs_rt_parent(v, (uint32_t)w->n_reg, (uint32_t)(known - w->reg), FANOUT);
	}
	ev(w, lat(w), RW_ANSWER, e->who, e->a, (int64_t)me.id, k >= 0 ? (int64_t)w->reg[k].i.id : 0,
	   (int64_t)me.timeline);
	check_tree(w);
}

/* ---------------------------------------------------------- the readers */

static void send_call(struct rworld *w, int who, uint64_t lost, bool leave)
{
	w->r[who].waiting = !leave;
	ev(w, lat(w), RW_CALL, who, w->r[who].proc, (int64_t)lost, leave, 0);
}

static void pin(struct rworld *w, int who)
{
	struct rw_reader *r = &w->r[who];

	r->pinned = true;
	r->step = w->step;
	r->pin_tl = w->srv_tl;
	/* the run the servers stamped the pin with (engine/pins.c) */
	r->label = ZS_MUTANT(ZS_MUT_PIN_UNSTAMPED) ? 0 : w->srv_tl + 1;
	r->has = false;
	r->parent = 0;
	send_call(w, who, 0, false);
}

/* The reader holds bytes of bytes_tl: they must be of its label's run. */
static void got(struct rworld *w, int who, uint64_t bytes_tl)
{
	struct rw_reader *r = &w->r[who];

	r->has = true;
	r->bytes_tl = bytes_tl;
	sim_log(&w->s, "reader %d (id %" PRIu64 ", step %" PRIu64 ", label %" PRIu64 ", parent %" PRIu64 ", pin_tl %" PRIu64 ") got bytes of tl %" PRIu64,
		who, r->id, r->step, r->label, r->parent, r->pin_tl, bytes_tl);
	w->st->checks++;
	w->st->reads++;
	if (r->label && bytes_tl + 1 != r->label)
		sim_fail(&w->s, "reader %" PRIu64 " holds step %" PRIu64 " of timeline %" PRIu64
			 ", registered as the step of timeline %" PRIu64,
			 r->id, r->step, bytes_tl + 1, r->label);
}

/* Reads its version: from its parent (which must hold it: else reported
 * lost), or from the servers (whose pin a rollback dropped: pin again). */
static void read_version(struct rworld *w, int who)
{
	struct rw_reader *r = &w->r[who];

	if (r->has || !r->pinned || r->waiting || !r->label)
		return;
	if (r->parent) {
		for (int k = 0; k < w->R; k++) {
			const struct rw_reader *p = &w->r[k];
			/* a relay serves its bytes of the step, of the run
			 * its pin was labelled with (client/relay.c) */
			if (p->alive && p->id == r->parent && p->has && p->relay &&
			    p->step == r->step &&
			    (p->label == r->label || ZS_MUTANT(ZS_MUT_RELAY_ANY_TIMELINE))) {
				got(w, who, p->bytes_tl);
				return;
			}
		}
		send_call(w, who, r->parent, false); /* its parent does not serve: lost */
		return;
	}
	if (r->pin_tl != w->srv_tl) {
		pin(w, who); /* the servers dropped the pin (ZS_ERESUME): a new one */
		return;
	}
	got(w, who, w->srv_tl);
}

static void answer(struct rworld *w, const struct sim_ev *e)
{
	struct rw_reader *r = &w->r[e->who];

	if (!r->alive || e->a != r->proc)
		return;
	r->waiting = false;
	sim_log(&w->s, "reader %d answered: id %" PRId64 ", parent %" PRId64 ", timeline %" PRId64, e->who, e->b, e->c, e->d);
	r->id = (uint64_t)e->b;
	r->label = (uint64_t)e->d;
	if (r->parent != (uint64_t)e->c) {
		r->parent = (uint64_t)e->c;
		if (!r->has)
			read_version(w, e->who);
	} else {
		read_version(w, e->who);
	}
}

static void act(struct rworld *w, int who, int proc)
{
	struct rw_reader *r = &w->r[who];
	const int64_t x = (int64_t)sim_below(&w->s, 100);

	if (!r->alive || proc != r->proc)
		return;
	ev(w, sim_range(&w->s, 200 * MS, 2000 * MS), RW_ACT, who, proc, 0, 0, 0);
	if (r->waiting)
		return;
	if (!r->pinned || x < 25) {
		pin(w, who); /* the latest step */
	} else if (x < 30) {
		send_call(w, who, 0, true); /* leaves, and comes back fresh */
		r->id = 0;
		r->pinned = r->has = false;
		r->label = 0;
	} else if (!r->has) {
		read_version(w, who);
	} else {
		send_call(w, who, 0, false); /* renews */
	}
}

static void fault(struct rworld *w, const struct sim_ev *e)
{
	switch (e->kind) {
	case RW_STEP:
		w->step++;
		if (w->s.now_us < RUN_MS * MS - 5000 * MS)
			ev(w, sim_range(&w->s, 50 * MS, 400 * MS), RW_STEP, 0, 0, 0, 0, 0);
		return;
	case RW_ROLLBACK:
		w->tl++;
		w->step = w->step > 3 ? w->step - 3 : 0; /* back to a checkpoint */
		w->st->faults[SF_ROLLBACK]++;
		ev(w, sim_range(&w->s, 20 * MS, 800 * MS), RW_RESTORED, 0, 0, 0, 0, 0);
		sim_log(&w->s, "rollback: timeline %" PRIu64 ", step %" PRIu64, w->tl, w->step);
		return;
	case RW_RESTORED:
		w->srv_tl = w->tl;
		return;
	case RW_COORD_RESTART:
		w->n_reg = 0; /* the registry is memory */
		w->next_id = w->id_base += 1000000; /* a later start's ids: beyond every earlier one */
		if (ZS_MUTANT(ZS_MUT_READER_IDS_RESTART))
			w->next_id = 0;
		w->st->faults[SF_COORD_RESTART]++;
		sim_log(&w->s, "coordinator restarted");
		return;
	case RW_CRASH: {
		struct rw_reader *r = &w->r[e->who];
		if (!r->alive)
			return;
		r->alive = false;
		w->st->faults[SF_KILL]++;
		/* a new process in its place, later: a reader new to the registry */
		*r = (struct rw_reader){.proc = ++w->next_proc, .relay = r->relay};
		r->alive = true;
		ev(w, sim_range(&w->s, 100 * MS, 3000 * MS), RW_ACT, e->who, r->proc, 0, 0, 0);
		return;
	}
	}
}

int readers_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	struct rworld *w = calloc(1, sizeof *w);
	struct sim_ev e;
	int rc;

	if (!w) {
		snprintf(why, why_n, "out of memory");
		return 1;
	}
	sim_init(&w->s, seed ^ 0x5245414445525357ull, tracing, why, why_n);
	w->st = st;
	w->R = (int)sim_range(&w->s, 3, RW_MAX);
	w->fault_end_us = (RUN_MS - 8000) * (int64_t)MS;
	w->tl = w->srv_tl = 1;
	w->step = 5;
	w->up = true;
	sim_log(&w->s, "seed %" PRIu64 ": %d readers", seed, w->R);
	for (int i = 0; i < w->R; i++) {
		w->r[i] = (struct rw_reader){.alive = true, .proc = ++w->next_proc,
					     .relay = sim_chance(&w->s, 0.7)};
		ev(w, sim_range(&w->s, 0, 500 * MS), RW_ACT, i, w->r[i].proc, 0, 0, 0);
	}
	ev(w, 100 * MS, RW_STEP, 0, 0, 0, 0, 0);
	for (int i = 0, n = (int)sim_range(&w->s, 0, 2); i < n; i++)
		ev(w, sim_range(&w->s, 0, w->fault_end_us), RW_ROLLBACK, 0, 0, 0, 0, 0);
	for (int i = 0, n = (int)sim_range(&w->s, 0, 2); i < n; i++)
		ev(w, sim_range(&w->s, 0, w->fault_end_us), RW_COORD_RESTART, 0, 0, 0, 0, 0);
	for (int i = 0, n = (int)sim_range(&w->s, 0, 3); i < n; i++)
		ev(w, sim_range(&w->s, 0, w->fault_end_us), RW_CRASH, (int)sim_below(&w->s, (uint64_t)w->R),
		   0, 0, 0, 0);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * MS) {
		switch (e.kind) {
		case RW_ACT: act(w, e.who, (int)e.a); break;
		case RW_CALL: call(w, &e); break;
		case RW_ANSWER: answer(w, &e); break;
		default: fault(w, &e); break;
		}
	}
	rc = sim_end(&w->s, &st->events);
	free(w);
	return rc;
}
