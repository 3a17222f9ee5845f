/*
 * ckpt.c - the third simulated world: is a committed checkpoint whole, and
 * does a rollback restore the right one? A job on 2 to 4 servers (a shard
 * each) trains 12 to 40 steps and takes a checkpoint every 2 to 4; each
 * server polls the coordinator for its tasks, captures a checkpoint's step,
 * writes it to its disk and reports it durable; the coordinator commits it
 * once every server of the job is, and a server that restarts (its live
 * state gone) rolls the job back to its way back, every server restoring
 * from its records. The coordinator's decisions are the real core
 * (model/commit.c), run as coord/ckpt_tasks.c runs it: a report counted,
 * the commit, the way back, a restore's verdict and the fall back.
 *
 * Faults: servers killed (a write under way lost; back after a while), the
 * coordinator killed (its tasks in memory lost, rebuilt from its catalog
 * when it is back; reports to it meanwhile lost), a record flipped on a
 * server's disk (its checksum fails when read), the job deleted (its
 * committed checkpoints kept) and created again under its name, messages
 * delayed so that a server takes a task from a listing fetched before its
 * report landed and reports twice.
 *
 * Invariants:
 *   - a checkpoint commits only with its step's record durable, as
 *     written, on every server of the job
 *   - a restore done is of a committed checkpoint of the job as it is now
 *     (never an earlier job's of the name), the newest that is not known
 *     bad, and leaves every server with that step's state
 *   - a restore's failure on a record its checksum caught falls back
 *     (there is no operator here to ask)
 *   - the job trains all its steps once the faults stop
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/commit.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define MS 1000
#define RUN_MS 60000
#define CK_MAX_S 4
#define CK_MAX_K 96  /* checkpoints in the catalog */
#define CK_MAX_REC 96 /* records on one server's disk */
#define JOB "j"

enum ck_kind {
	CK_TRAIN,   /* the trainers' next step */
	CK_CREATE,  /* a: step. The coordinator is asked for a checkpoint */
	CK_POLL,    /* who: server; a: its incarnation. It asks for its tasks */
	CK_DO,      /* who; a: inc; b: kind; c: id; d: step. A task taken */
	CK_WRITTEN, /* who; a: inc; c: id; d: step. A snapshot's write is durable */
	CK_REPORT,  /* who; b: kind; c: id; d: status. At the coordinator */
	CK_KILL,    /* who: a server dies */
	CK_RESTART, /* who: it is back, its live state gone, its disk kept */
	CK_COORD_DOWN,
	CK_COORD_UP,
	CK_FLIP,    /* who; a: a record's index on its disk */
	CK_RECREATE, /* the job deleted (committed checkpoints kept) and created again */
};

struct ck_rec {
	uint64_t id, step, value;
	bool flipped;
};

struct ck_srv {
	bool alive, live;
	uint64_t inc;              /* its process: events of an earlier one are dropped */
	uint64_t step, since, job; /* its live state: at step, unbroken since, of job incarnation */
	bool restoring; /* a restore taken, its report not answered: no listing meanwhile
			 * (srvd_refresh_tasks runs a listing's tasks, then fetches the next) */
	struct ck_rec rec[CK_MAX_REC];
	int n_rec;
};

struct cworld {
	struct sim s;
	struct sim_stats *st;
	int S;
	uint64_t T, every;
	int64_t fault_end_us;
	struct ck_srv srv[CK_MAX_S];
	/* the coordinator: its catalog (durable) and its tasks (memory) */
	bool up;
	struct zs_checkpoint ck[CK_MAX_K];
	uint64_t dur[CK_MAX_K][CK_MAX_S + 1];
	size_t n_ck;
	uint64_t next_id, inc, restore, restored; /* the job's record */
	uint64_t restore_step;
	bool task;                 /* a restore task in memory */
	bool pending[CK_MAX_S];    /* ... the servers still to restore */
	uint64_t t;                /* the step the trainers are at */
	bool training;             /* their next step is queued */
	uint64_t ids[CK_MAX_S];
};

static void trainers_on(struct cworld *w);

/* The state of step of the job's incarnation inc (training repeats: the
 * same step gives the same state). */
static uint64_t value(uint64_t inc, uint64_t step)
{
	uint64_t z = inc * 0x9E3779B97F4A7C15ull + step + 1;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	return z ^ (z >> 31);
}

static void ev(struct cworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b,
	       int64_t c, int64_t d)
{
	sim_at(&w->s, delay_us,
	       (struct sim_ev){.kind = kind, .who = who, .a = a, .b = b, .c = c, .d = d});
}

/* A message's way: mostly under a millisecond, 5% up to 80 ms. */
static int64_t lat(struct cworld *w)
{
	if (w->s.now_us < w->fault_end_us && sim_chance(&w->s, 0.05)) {
		w->st->faults[SF_SLOW]++;
		return sim_range(&w->s, 1 * MS, 80 * MS);
	}
	return sim_range(&w->s, 50, 900);
}

static struct zs_checkpoint *find(struct cworld *w, uint64_t id)
{
	for (size_t i = 0; i < w->n_ck; i++)
		if (w->ck[i].id == id)
			return &w->ck[i];
	return NULL;
}

static const struct ck_rec *record(const struct ck_srv *v, uint64_t id)
{
	for (int i = 0; i < v->n_rec; i++)
		if (v->rec[i].id == id)
			return &v->rec[i];
	return NULL;
}

/* ------------------------------------------------------ the coordinator */

/* Restore tasks for every server (coord_add_ctask). */
static void restore_task(struct cworld *w)
{
	w->task = true;
	for (int i = 0; i < w->S; i++)
		w->pending[i] = true;
}

/* The job back to its way back (coord_rollback): the pending checkpoints
 * abandoned, a restore task for every server; during one, the lost server
 * restores again. */
static void rollback(struct cworld *w, int lost, const char *why)
{
	const struct zs_checkpoint *k;

	if (w->restore) {
		if (lost >= 0 && w->task)
			w->pending[lost] = true;
		sim_log(&w->s, "coord: %s, during the rollback (which goes on)", why);
		return;
	}
	w->restore = zs_ck_way_back(w->ck, w->n_ck, JOB, w->inc, w->restored);
	k = w->restore == ZS_CKPT_RESET ? NULL : find(w, w->restore);
	w->restore_step = k ? k->step : 0;
	for (size_t i = 0; i < w->n_ck; i++)
		if (zs_ck_of(&w->ck[i], JOB, w->inc) && w->ck[i].state == ZS_CKPT_PENDING)
			w->ck[i].state = ZS_CKPT_FAILED;
	restore_task(w);
	w->st->restores++;
	sim_log(&w->s, "coord: %s: back to checkpoint %s%" PRIu64 " (step %" PRIu64 ")", why,
		k ? "" : "none: a reset, ", k ? k->id : 0, w->restore_step);
}

/* A committed checkpoint: every server of the job has its step, as
 * written, on disk. */
static void check_commit(struct cworld *w, const struct zs_checkpoint *k)
{
	w->st->checks++;
	for (int i = 0; i < w->S; i++) {
		const struct ck_rec *r = record(&w->srv[i], k->id);
		if (!r || r->step != k->step || r->value != value(k->incarnation, k->step))
			sim_fail(&w->s, "checkpoint %" PRIu64 " (step %" PRIu64 ") committed, and server %d has %s",
				 k->id, k->step, i + 1, r ? "another state in its record" : "no record of it");
	}
}

static void snapshot_report(struct cworld *w, int who, uint64_t id, bool ok)
{
	struct zs_checkpoint *k = find(w, id);
	uint64_t out[CK_MAX_S + 1];
	enum zs_ck_take t;

	if (k)
		zs_ck_sort_durable(k->durable, k->n_durable);
	t = zs_ck_snapshot_report(k, zs_ck_of(k, JOB, w->inc), w->ids, (uint32_t)w->S,
				  w->ids[who], ok, out);
	if (t == ZS_CK_FAILED) {
		k->state = ZS_CKPT_FAILED;
	} else if (t == ZS_CK_DURABLE || t == ZS_CK_COMMIT) {
		size_t x = (size_t)(k - w->ck);
		w->st->checks++;
		for (uint32_t i = 1; i <= k->n_durable; i++)
			if (out[i - 1] >= out[i])
				return sim_fail(&w->s, "checkpoint %" PRIu64 "'s durable servers list server %" PRIu64 " twice",
						id, out[i]);
		memcpy(w->dur[x], out, (k->n_durable + 1) * sizeof *out);
		k->durable = w->dur[x];
		k->n_durable++;
		if (t == ZS_CK_COMMIT) {
			k->state = ZS_CKPT_COMMITTED;
			w->st->commits++;
			check_commit(w, k);
		}
	}
	sim_log(&w->s, "coord: server %d's snapshot of %" PRIu64 " (%s): %s", who + 1, id,
		ok ? "durable" : "failed",
		(const char *[]){"not pending", "again", "not a holder", "failed", "durable",
				 "committed"}[t]);
}

/* The restore is done: of a committed checkpoint of the job as it is now,
 * the newest not known bad, every server at its step's state. */
static void check_restored(struct cworld *w, uint64_t id)
{
	const struct zs_checkpoint *k = id == ZS_CKPT_RESET ? NULL : find(w, id);
	uint64_t step = k ? k->step : 0;

	w->st->checks++;
	if (k && (k->state != ZS_CKPT_COMMITTED || !zs_ck_of(k, JOB, w->inc) ||
		  k->incarnation != w->inc))
		sim_fail(&w->s, "restored checkpoint %" PRIu64 ", %s", id,
			 k->incarnation != w->inc ? "an earlier job's of the name" : "not committed");
	for (size_t i = 0; i < w->n_ck; i++)
		if (w->ck[i].incarnation == w->inc && w->ck[i].state == ZS_CKPT_COMMITTED &&
		    w->ck[i].step > step)
			sim_fail(&w->s, "restored step %" PRIu64 ", though checkpoint %" PRIu64
				 " of step %" PRIu64 " is committed and not known bad",
				 step, w->ck[i].id, w->ck[i].step);
	for (int i = 0; i < w->S; i++) {
		const struct ck_srv *v = &w->srv[i];
		if (v->alive && (!v->live || v->step != step || v->job != w->inc))
			sim_fail(&w->s, "restore of step %" PRIu64 " done, and server %d is %s", step,
				 i + 1, !v->live ? "without state" : "at another state");
	}
}

static void restore_report(struct cworld *w, int who, uint64_t id, enum zs_status code)
{
	struct zs_checkpoint *k = id == ZS_CKPT_RESET ? NULL : find(w, id);
	uint32_t left = 0;

	if (!w->task || id != w->restore || !w->pending[who])
		return; /* a task of an earlier rollback, or struck off already */
	w->pending[who] = false;
	for (int i = 0; i < w->S; i++)
		left += w->pending[i];
	switch (zs_ck_restore_report(code == ZS_OK, code, id,
				     k && k->state == ZS_CKPT_COMMITTED, left)) {
	case ZS_CKR_WAIT:
		break;
	case ZS_CKR_DONE:
		w->task = false;
		w->restore = 0;
		w->restored = id == ZS_CKPT_RESET ? 0 : id;
		w->t = w->restore_step;
		sim_log(&w->s, "coord: the restore of step %" PRIu64 " is done", w->t);
		check_restored(w, id);
		trainers_on(w);
		break;
	case ZS_CKR_BAD: /* fall_back: marked failed, the job back again */
		w->task = false;
		w->restore = 0;
		k->state = ZS_CKPT_FAILED;
		w->st->fallbacks++;
		rollback(w, -1, "a checkpoint's records failed their checksum");
		break;
	case ZS_CKR_FAILED:
		sim_fail(&w->s, "the restore of checkpoint %" PRIu64 " failed on server %d (%s) and the job stops there: a record its checksum caught must fall back",
			 id, who + 1, zs_strerror(code));
		break;
	}
}

/* A server's poll: its tasks as the coordinator lists them now, each
 * taken in its own time (a listing fetched before a report lands). */
static void poll(struct cworld *w, int who, uint64_t inc)
{
	for (size_t i = 0; i < w->n_ck; i++) {
		const struct zs_checkpoint *k = &w->ck[i];
		if (k->state == ZS_CKPT_PENDING && zs_ck_of(k, JOB, w->inc))
			ev(w, lat(w), CK_DO, who, (int64_t)inc, ZS_TASK_SNAPSHOT, (int64_t)k->id,
			   (int64_t)k->step);
	}
	if (w->task && w->pending[who]) {
		w->srv[who].restoring = true;
		ev(w, lat(w), CK_DO, who, (int64_t)inc, ZS_TASK_RESTORE, (int64_t)w->restore,
		   (int64_t)w->restore_step);
	}
}

static void create(struct cworld *w, uint64_t step)
{
	struct zs_checkpoint *k;

	if (!w->up || w->restore || step != w->t || w->n_ck == CK_MAX_K)
		return;
	k = &w->ck[w->n_ck++];
	*k = (struct zs_checkpoint){.id = ++w->next_id, .incarnation = w->inc, .step = step,
				    .state = ZS_CKPT_PENDING};
	snprintf(k->job, sizeof k->job, "%s", JOB);
	w->st->ckpts++;
	sim_log(&w->s, "coord: checkpoint %" PRIu64 " of step %" PRIu64, k->id, step);
}

/* ---------------------------------------------------------- the servers */

static void take(struct cworld *w, int who, const struct sim_ev *e)
{
	struct ck_srv *v = &w->srv[who];
	const uint64_t id = (uint64_t)e->c, step = (uint64_t)e->d;
	const struct ck_rec *r = record(v, id);

	if (!v->alive || (uint64_t)e->a != v->inc)
		return;
	if (e->b == ZS_TASK_SNAPSHOT) {
		if (r) /* written before: durable */
			ev(w, lat(w), CK_REPORT, who, 0, ZS_TASK_SNAPSHOT, (int64_t)id, ZS_OK);
		else if (!v->live || v->since > step || v->step < step)
			ev(w, lat(w), CK_REPORT, who, 0, ZS_TASK_SNAPSHOT, (int64_t)id, ZS_ESTATE);
		else /* its state of that step, written out */
			ev(w, sim_range(&w->s, 1 * MS, 30 * MS), CK_WRITTEN, who, (int64_t)v->inc, 0,
			   (int64_t)id, (int64_t)step);
		return;
	}
	enum zs_status st = ZS_OK;
	if (id == ZS_CKPT_RESET) {
		v->step = v->since = 0;
	} else if (!r) {
		st = ZS_ENOTFOUND;
	} else if (r->flipped) {
		st = ZS_EIO;
	} else {
		v->step = v->since = r->step;
		v->job = w->inc; /* its record's: a wrong incarnation shows in the check */
		for (uint64_t inc = 1; inc <= w->inc; inc++)
			if (value(inc, r->step) == r->value)
				v->job = inc;
	}
	if (!st) {
		v->live = true;
		if (id == ZS_CKPT_RESET)
			v->job = w->inc;
	}
	ev(w, lat(w), CK_REPORT, who, 0, ZS_TASK_RESTORE, (int64_t)id, st);
}

static void written(struct cworld *w, int who, const struct sim_ev *e)
{
	struct ck_srv *v = &w->srv[who];
	const uint64_t id = (uint64_t)e->c, step = (uint64_t)e->d;

	if (!v->alive || (uint64_t)e->a != v->inc || record(v, id) || v->n_rec == CK_MAX_REC)
		return; /* the process that wrote it died first: nothing on disk */
	v->rec[v->n_rec++] = (struct ck_rec){id, step, value(v->job, step), false};
	ev(w, lat(w), CK_REPORT, who, 0, ZS_TASK_SNAPSHOT, (int64_t)id, ZS_OK);
}

/* ------------------------------------------------------------- the run */

static void train(struct cworld *w)
{
	bool all = !w->restore;

	for (int i = 0; i < w->S && all; i++)
		all = w->srv[i].alive && w->srv[i].live && w->srv[i].step == w->t;
	if (all && w->t < w->T) {
		w->t++;
		for (int i = 0; i < w->S; i++)
			w->srv[i].step = w->t;
		if (w->t % w->every == 0)
			ev(w, lat(w), CK_CREATE, 0, (int64_t)w->t, 0, 0, 0);
	}
	w->training = w->t < w->T || w->restore;
	if (w->training)
		ev(w, sim_range(&w->s, 2 * MS, 12 * MS), CK_TRAIN, 0, 0, 0, 0, 0);
}

/* The trainers go on (the job set back: a restore, created again). */
static void trainers_on(struct cworld *w)
{
	if (!w->training) {
		w->training = true;
		ev(w, sim_range(&w->s, 2 * MS, 12 * MS), CK_TRAIN, 0, 0, 0, 0, 0);
	}
}

static void plan_faults(struct cworld *w)
{
	const int64_t end = w->fault_end_us;

	for (int i = 0, n = (int)sim_range(&w->s, 0, 3); i < n; i++)
		ev(w, sim_range(&w->s, 0, end), CK_KILL, (int)sim_below(&w->s, (uint64_t)w->S), 0, 0,
		   0, 0);
	for (int i = 0, n = (int)sim_range(&w->s, 0, 2); i < n; i++)
		ev(w, sim_range(&w->s, 0, end), CK_COORD_DOWN, 0, 0, 0, 0, 0);
	for (int i = 0, n = (int)sim_range(&w->s, 0, 2); i < n; i++)
		ev(w, sim_range(&w->s, 0, end), CK_FLIP, (int)sim_below(&w->s, (uint64_t)w->S),
		   (int64_t)sim_below(&w->s, 8), 0, 0, 0);
	if (sim_chance(&w->s, 0.3))
		ev(w, sim_range(&w->s, 0, end), CK_RECREATE, 0, 0, 0, 0, 0);
}

static void fault(struct cworld *w, const struct sim_ev *e)
{
	struct ck_srv *v = &w->srv[e->who];

	switch (e->kind) {
	case CK_KILL:
		if (!v->alive)
			return;
		w->st->faults[SF_SERVER_RESTART]++;
		v->alive = v->live = false;
		ev(w, sim_range(&w->s, 20 * MS, 400 * MS), CK_RESTART, e->who, 0, 0, 0, 0);
		sim_log(&w->s, "server %d killed", e->who + 1);
		return;
	case CK_RESTART:
		if (!w->up) { /* it registers once the coordinator is back */
			ev(w, sim_range(&w->s, 50 * MS, 200 * MS), CK_RESTART, e->who, 0, 0, 0, 0);
			return;
		}
		v->alive = true;
		v->restoring = false;
		v->inc++;
		ev(w, 0, CK_POLL, e->who, (int64_t)v->inc, 0, 0, 0);
		sim_log(&w->s, "server %d back, its live state gone", e->who + 1);
		rollback(w, e->who, "a server restarted"); /* what it held is gone */
		return;
	case CK_COORD_DOWN:
		if (!w->up)
			return;
		w->st->faults[SF_COORD_RESTART]++;
		w->up = false;
		w->task = false; /* its memory */
		ev(w, sim_range(&w->s, 20 * MS, 500 * MS), CK_COORD_UP, 0, 0, 0, 0, 0);
		sim_log(&w->s, "coordinator killed");
		return;
	case CK_COORD_UP:
		w->up = true;
		if (w->restore) /* coord_resume_restores */
			restore_task(w);
		sim_log(&w->s, "coordinator back");
		return;
	case CK_FLIP:
		if (w->restore || !v->n_rec)
			return; /* flipped at rest, found by the next restore */
		v->rec[e->a % v->n_rec].flipped = true;
		w->st->faults[SF_FLIP]++;
		sim_log(&w->s, "server %d: record of checkpoint %" PRIu64 " flipped", e->who + 1,
			v->rec[e->a % v->n_rec].id);
		return;
	case CK_RECREATE:
		if (!w->up || w->restore)
			return;
		w->st->faults[SF_RECREATE]++;
		for (size_t i = 0; i < w->n_ck; i++) /* kept: the committed ones */
			if (w->ck[i].state != ZS_CKPT_COMMITTED)
				w->ck[i].state = ZS_CKPT_FAILED;
		w->inc++;
		w->restored = 0;
		w->t = 0;
		for (int i = 0; i < w->S; i++)
			if (w->srv[i].alive) { /* the new job's initial upload */
				w->srv[i].live = true;
				w->srv[i].step = w->srv[i].since = 0;
				w->srv[i].job = w->inc;
			}
		sim_log(&w->s, "the job deleted and created again (incarnation %" PRIu64 ")", w->inc);
		trainers_on(w);
		return;
	}
}

static void server_poll(struct cworld *w, int who, uint64_t inc)
{
	if (!w->srv[who].alive || inc != w->srv[who].inc)
		return;
	if (w->up && !w->srv[who].restoring)
		poll(w, who, inc);
	ev(w, sim_range(&w->s, 20 * MS, 100 * MS), CK_POLL, who, (int64_t)inc, 0, 0, 0);
}

static void report(struct cworld *w, const struct sim_ev *e)
{
	if (e->b == ZS_TASK_RESTORE) /* the call returns, answered or failed */
		w->srv[e->who].restoring = false;
	if (!w->up)
		return; /* lost: the server takes the task again from a later listing */
	if (e->b == ZS_TASK_SNAPSHOT)
		snapshot_report(w, e->who, (uint64_t)e->c, e->d == ZS_OK);
	else
		restore_report(w, e->who, (uint64_t)e->c, (enum zs_status)e->d);
}

/* Once the faults stop, the job trains all its steps. */
static void check_done(struct cworld *w)
{
	w->st->checks++;
	if (w->t < w->T || w->restore)
		sim_fail(&w->s, "the job did not finish: at step %" PRIu64 " of %" PRIu64 "%s", w->t,
			 w->T, w->restore ? ", a restore under way" : "");
}

int ckpt_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	struct cworld *w = calloc(1, sizeof *w);
	struct sim_ev e;
	int rc;

	if (!w) {
		snprintf(why, why_n, "out of memory");
		return 1;
	}
	/* its own random stream: the other worlds' choices stay as they were */
	sim_init(&w->s, seed ^ 0x434b50545752444cull, tracing, why, why_n);
	w->st = st;
	w->S = (int)sim_range(&w->s, 2, CK_MAX_S);
	w->T = (uint64_t)sim_range(&w->s, 12, 40);
	w->every = (uint64_t)sim_range(&w->s, 2, 4);
	w->fault_end_us = (int64_t)w->T * 10 * MS;
	w->up = true;
	w->inc = 1;
	sim_log(&w->s, "seed %" PRIu64 ": %d servers, %" PRIu64 " steps, a checkpoint every %" PRIu64,
		seed, w->S, w->T, w->every);
	for (int i = 0; i < w->S; i++) {
		w->ids[i] = (uint64_t)i + 1;
		w->srv[i] = (struct ck_srv){.alive = true, .live = true, .inc = 1, .job = 1};
		ev(w, sim_range(&w->s, 0, 50 * MS), CK_POLL, i, 1, 0, 0, 0);
	}
	trainers_on(w);
	plan_faults(w);
	while (!w->s.failed && sim_next(&w->s, &e) && e.at_us < RUN_MS * MS) {
		switch (e.kind) {
		case CK_TRAIN: train(w); break;
		case CK_CREATE: create(w, (uint64_t)e.a); break;
		case CK_POLL: server_poll(w, e.who, (uint64_t)e.a); break;
		case CK_DO: take(w, e.who, &e); break;
		case CK_WRITTEN: written(w, e.who, &e); break;
		case CK_REPORT: report(w, &e); break;
		default: fault(w, &e); break;
		}
	}
	if (!w->s.failed)
		check_done(w);
	rc = sim_end(&w->s, &st->events);
	free(w);
	return rc;
}
