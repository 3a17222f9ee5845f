/*
 * step_hp.c - the step world's hyperparameter tables, run through the real
 * core (model/hptables.c) as its shells run it:
 *
 *   client/hparams.c   a rank sets the table of a step before its pushes
 *                      of it (zs_set_hparams: sent, answered), keeps the
 *                      last TR_HP_KEEP it set, and sends a server it
 *                      connects to now (a failover's new primary) those
 *                      and the one being set (zs_hp_for_new), each
 *                      answered before its pushes go there again
 *   engine/hparams.c   a server keeps the tables by step (zs_hp_list_put,
 *                      its slowest shard's step the low mark) and applies
 *                      a step with the one in force (zs_hp_list_at)
 *   engine/replica.c   a step's forward (and a seed) carries the table in
 *                      force at its step as it is posted
 *
 * A table of step s says lr = s + 1 (every rank sets the same); the
 * invariant: every server applies every step with the table the trainers
 * set in force there.
 */
#include <stdio.h>
#include <string.h>

#include "sim/step.h"

#define TR_KEEP 4 /* client/trainer.h TR_HP_KEEP */

static struct zs_hp_table table_of(uint64_t step)
{
	struct zs_hp_table t = {.step = step, .n_groups = 1};

	t.g[0].lr = (double)step + 1.0;
	return t;
}

void sw_hp_plan(struct sworld *w)
{
	if (!sim_chance(&w->s, 0.6))
		return; /* the spec's values throughout */
	for (uint64_t s = 0; s < w->S && s < SW_MAX_STEPS; s++)
		w->hp_at[s] = sim_chance(&w->s, 0.35);
}

/* 1 + the step of the table the trainers set in force at step (0: none). */
static uint64_t want(const struct sworld *w, uint64_t step)
{
	for (uint64_t s = step + 1; s-- > 0;)
		if (s < SW_MAX_STEPS && w->hp_at[s])
			return s + 1;
	return 0;
}

uint64_t sw_hp_carry(const struct sworld *w, int who, uint64_t step)
{
	const struct sw_server *sv = &w->srv[who];
	const struct zs_hp_table *in = zs_hp_list_at(sv->hp, sv->n_hp, step);

	return in ? in->step + 1 : 0;
}

/* engine/hparams.c eng_t_hparams: server who takes the table of step
 * tstep1 - 1; false when it refuses it (said why). */
static bool take(struct sworld *w, int who, uint64_t tstep1)
{
	struct sw_server *sv = &w->srv[who];
	/* slowest(): a copy not seeded yet reads no table of its own */
	uint64_t low = sv->ready || sv->primary ? sv->version : UINT64_MAX;
	struct zs_hp_table t = table_of(tstep1 - 1);
	uint32_t at;

	switch (zs_hp_list_put(sv->hp, &sv->n_hp, SW_HP_KEEP, &t, low, &at)) {
	case ZS_HP_PUT_DIFFERS:
		sim_fail(&w->s, "server %d holds another table of step %llu", who,
			 (unsigned long long)t.step);
		return false;
	case ZS_HP_PUT_FULL:
		sim_fail(&w->s, "server %d refuses the table of step %llu: %d tables ahead of step %llu",
			 who, (unsigned long long)t.step, SW_HP_KEEP, (unsigned long long)low);
		return false;
	default:
		return true;
	}
}

void sw_hp_carried(struct sworld *w, int who, uint64_t tstep1)
{
	if (tstep1 && w->srv[who].alive)
		take(w, who, tstep1);
}

void sw_hp_applied(struct sworld *w, int who, uint64_t step)
{
	uint64_t got = sw_hp_carry(w, who, step), set = want(w, step);
	char g[48] = "no table", s[48] = "none";

	w->st->checks++;
	if (got == set)
		return;
	if (got)
		snprintf(g, sizeof g, "the table of step %llu", (unsigned long long)got - 1);
	if (set)
		snprintf(s, sizeof s, "the table of step %llu", (unsigned long long)set - 1);
	sim_fail(&w->s, "server %d applied step %llu with %s, where the trainers set %s", who,
		 (unsigned long long)step, g, s);
}

/* A table to the rank's primary (sending: the one zs_set_hparams sets). */
static void send(struct sworld *w, int r, uint64_t tstep, bool sending)
{
	struct sw_trainer *t = &w->t[r];

	t->hp_wait++;
	sw_ev4(w, sw_lat(w), SW_HP, t->primary, r, t->proc, (int64_t)tstep,
	       (int64_t)t->hp_round << 1 | sending);
}

bool sw_hp_before_push(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];

	if (t->hp_wait)
		return true;
	if (t->step < SW_MAX_STEPS && w->hp_at[t->step] && t->hp_set1 < t->step + 1 && !t->sending) {
		t->sending = true; /* zs_set_hparams of the step, before its pushes */
		t->sending_step = t->step;
		sim_log(&w->s, "rank %d sets the table of step %llu", r, (unsigned long long)t->step);
		w->st->tables++;
		send(w, r, t->step, true);
		return true;
	}
	return false;
}

bool sw_hp_told(struct sworld *w, int r)
{
	struct sw_trainer *t = &w->t[r];
	struct zs_hp_table sending = t->sending ? table_of(t->sending_step) : (struct zs_hp_table){0};
	const struct zs_hp_table *tabs[TR_KEEP + 1];
	uint32_t n = zs_hp_for_new(t->hist, t->n_hist, t->sending ? &sending : NULL, tabs);

	t->hp_round++; /* what the old primary answers no longer counts */
	t->hp_wait = 0;
	for (uint32_t i = 0; i < n; i++)
		send(w, r, tabs[i]->step, t->sending && tabs[i] == &sending);
	return n > 0;
}

void sw_hp_server_event(struct sworld *w, const struct sim_ev *ev)
{
	struct sw_server *sv = &w->srv[ev->who];

	if (!sv->alive || w->born_seq[ev->who] > w->t[ev->a].conn_seq)
		return; /* its connection is gone: the failover sends it again */
	if (!take(w, ev->who, (uint64_t)ev->c + 1))
		return;
	sw_ev4(w, sw_lat(w), SW_HP_OK, (int)ev->a, ev->b, ev->c, ev->who, ev->d);
}

/* The table's answer: the one being set is set (kept for a new server);
 * the last of them answered, the push that waited goes. */
bool sw_hp_answered(struct sworld *w, int r, const struct sim_ev *ev)
{
	struct sw_trainer *t = &w->t[r];

	if (!t->alive || ev->a != t->proc || (ev->d >> 1) != t->hp_round)
		return false;
	if ((ev->d & 1) && t->sending && (uint64_t)ev->b == t->sending_step) {
		t->sending = false;
		t->hp_set1 = t->sending_step + 1;
		if (t->n_hist == TR_KEEP)
			memmove(t->hist, t->hist + 1, (TR_KEEP - 1) * sizeof t->hist[0]);
		else
			t->n_hist++;
		t->hist[t->n_hist - 1] = table_of(t->sending_step);
	}
	return t->hp_wait && --t->hp_wait == 0;
}
