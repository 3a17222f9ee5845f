/*
 * step_trainer.c - the step world's trainers, as client/driver.c,
 * client/failover.c and client/redo.c behave: a rank gathers its step
 * (held until the shard is at it, and its update on every copy), pushes
 * its micro-batches one at a time, each waiting for its answer (with
 * replicas a last push is answered once its step is on every copy), and,
 * told of a new placement, sends the push it waits on again to the new
 * primary. A replacement redoes its rank's step, every push of it marked
 * redo. Each step begins with a boundary to the coordinator, posted; its
 * pushes wait until the coordinator has answered it (zs_redo_push_waits).
 */
#include <stdio.h>
#include <string.h>

#include "sim/step.h"

static void wake(struct sworld *w, int r, int64_t delay)
{
	sw_ev(w, delay, SW_WAKE, r, w->t[r].proc, 0);
}

static void send_push(struct sworld *w, int r, const struct eng_push *p)
{
	struct sw_trainer *t = &w->t[r];
	int id = w->n_push;

	if (id == SW_MAX_PUSH) {
		sim_fail(&w->s, "more than %d pushes in one run", SW_MAX_PUSH);
		return;
	}
	w->n_push++;
	w->push[id] = (struct sw_push){.p = *p, .proc = t->proc, .server = t->primary,
				       .conn_seq = t->conn_seq};
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
	if (t->posted1 < t->step + 1) { /* zs_step_begin: its boundary, posted */
		t->posted1 = t->step + 1;
		sw_ev(w, sw_coord_lat(w), SW_BOUNDARY, r, (int64_t)t->step, t->proc);
		/* zs_set_hparams of the step: before its gathers, or after */
		t->hp_early = sim_chance(&w->s, 0.5);
	}
	if (t->hp_early && sw_hp_before_push(w, r))
		return; /* its answer wakes it */
	if (!t->gathered) {
		/* engine/face.c: its version, or (engine/redo.c) the step before */
		enum eng_kept k = eng_kept_at(false, sv->version, t->step, sv->prev_holds != 0,
					      sv->prev_of, false);
		uint64_t got = k == EK_PREV ? sv->prev_holds - 1 : sv->version;
		if (!sv->alive || k == EK_LATER || sv->wait) {
			wake(w, r, sim_range(&w->s, 500, 3 * MS)); /* held: asked again */
			return;
		}
		if (k == EK_GONE) {
			sim_fail(&w->s, "rank %d's process %d gathers step %llu, but the shard is at %llu%s: the step is gone",
				r, t->proc, (unsigned long long)t->step, (unsigned long long)sv->version,
				sv->version == t->step + 1 ? " (seeded since, nothing before it kept)" : "");
			return;
		}
		w->st->checks++;
		if (got != t->step) {
			sim_fail(&w->s, "rank %d's process %d gathered step %llu from server %d and got step %llu's parameters",
				r, t->proc, (unsigned long long)t->step, t->primary,
				(unsigned long long)got);
			return;
		}
		t->gathered = true;
	}
	if (zs_redo_push_waits(t->known1, t->step)) { /* client/redo.c tr_wait_step_known */
		wake(w, r, sim_range(&w->s, 500, 3 * MS));
		return;
	}
	if (sw_hp_before_push(w, r)) /* its table first; its answer wakes it */
		return;
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
		sim_fail(&w->s, "rank %d's push %d (step %llu micro %u) was refused 200 times in a row (%s): what it waits for never ends",
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
		sim_fail(&w->s, "rank %d's push %d (step %llu micro %u) was refused (%s)", r, id,
			(unsigned long long)w->push[id].p.step, w->push[id].p.micro,
			zs_strerror(st));
		return;
	}
	for (int k = 0; w->C > 1 && k < w->n_plc && !w->push[id].p.partial; k++) {
		/* an answered last push is durable: its step on every whole
		 * copy (a fresh one is not promoted until it is) */
		int i = w->plc[k];
		w->st->checks++;
		if (w->srv[i].alive && !w->plc_sh[k].fresh &&
		    w->srv[i].version <= w->push[id].p.step)
			sim_fail(&w->s,
				"rank %d's last push of step %llu was answered while server %d is at step %llu: a failover to it loses that step",
				r, (unsigned long long)w->push[id].p.step, i,
				(unsigned long long)w->srv[i].version);
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

/* The push it waits on, again, to its primary now (client/failover.c):
 * one that went to another server, or to this one's earlier process (its
 * connection shut down; the new one is whole: ZS_LV_BACK, then sent
 * again). */
static void resend(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];
	const struct sw_push *x = t->pending >= 0 ? &w->push[t->pending] : NULL;

	if (x && (x->server != t->primary || x->conn_seq < w->born_seq[t->primary])) {
		struct eng_push p = w->push[t->pending].p;
		sim_log(&w->s, "rank %d sends push %d again to server %d", r, t->pending, t->primary);
		send_push(w, r, &p);
	}
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
	case SW_KNOWN: /* its boundary's answer: the coordinator heard it begin the step */
		if (t->alive && ev->b == t->proc && t->known1 < (uint64_t)ev->a + 1)
			t->known1 = (uint64_t)ev->a + 1;
		break;
	case SW_TOLD: /* the new placement: what waited on the lost server goes again */
		if (!t->alive || t->primary == w->primary)
			break;
		t->primary = w->primary;
		t->conn_seq = w->s.seq;
		/* client/hparams.c tr_hp_to_new: its tables first, each answered */
		t->resend = sw_hp_told(w, ev->who);
		if (!t->resend)
			resend(w, ev->who);
		wake(w, ev->who, 0);
		break;
	case SW_HP_OK:
		if (sw_hp_answered(w, ev->who, ev) && t->resend) {
			t->resend = false;
			resend(w, ev->who);
		}
		if (t->alive && ev->a == t->proc)
			wake(w, ev->who, sim_range(&w->s, 100, 2 * MS));
		break;
	}
}
