/*
 * lease.c - a trainer's lease on its rank. A thread renews it every second
 * over a coordinator connection of its own (the trainer's calls are the
 * caller's thread's), so a trainer that computes for minutes keeps its
 * rank, and one that dies or stops loses it after the coordinator's
 * --trainer-lease-ms: the job then rolls back and the rank is free for the
 * process that replaces it. Each renewal also brings the job's timeline,
 * which tells the step driver at its next boundary that the job rolled back.
 *
 * The same thread sends the step boundary's report (tr_boundary_post), so
 * that a boundary waits on no coordinator round trip: the report posted at
 * boundary b is answered while step b runs, and its answer (the stage, the
 * checkpoint interval, the step to stop before) applies at boundary b + 1.
 * The coordinator puts a stop three steps past the latest report it has,
 * which no rank can have begun and whose boundary every rank meets with an
 * answer given after the stop was set (docs/DESIGN.md, the control plane).
 */
#include "client/trainer.h"

#include "base/log.h"
#include "model/liveness.h"

#define LEASE_RENEW_MS ZS_LIVE_RENEW_MS

/* Keeps the servers the coordinator marks down (it stops hearing from one
 * stopped or cut off within its lease; the renewal's reply lists them),
 * for the step driver's waits. */
static void note_down(zs_trainer *t, const struct zs_server_info *s, uint32_t n)
{
	pthread_mutex_lock(&t->ls.down_mu);
	t->ls.n_down = 0;
	for (uint32_t i = 0; i < n && t->ls.n_down < 8; i++) {
		if (s[i].up)
			continue;
		t->ls.down[t->ls.n_down].id = s[i].id;
		t->ls.down[t->ls.n_down].silent_ms = s[i].last_seen_ms;
		snprintf(t->ls.down[t->ls.n_down].addr, sizeof t->ls.down[0].addr, "%s", s[i].addr);
		t->ls.n_down++;
	}
	pthread_mutex_unlock(&t->ls.down_mu);
}

bool tr_server_down(zs_trainer *t, char *buf, size_t len)
{
	uint64_t id;
	return tr_server_down_id(t, &id, buf, len);
}

bool tr_server_marked_down(zs_trainer *t, uint64_t id)
{
	bool down = false;

	if (!t->ls.running)
		return false;
	pthread_mutex_lock(&t->ls.down_mu);
	for (uint32_t i = 0; i < t->ls.n_down && !down; i++)
		down = t->ls.down[i].id == id;
	pthread_mutex_unlock(&t->ls.down_mu);
	return down;
}

bool tr_server_down_id(zs_trainer *t, uint64_t *id, char *buf, size_t len)
{
	bool down = false;

	if (!t->ls.running)
		return false;
	pthread_mutex_lock(&t->ls.down_mu);
	for (uint32_t i = 0; i < t->ls.n_down && !down; i++)
		for (uint32_t k = 0; k < t->n_srv && !down; k++)
			if (t->srv_id[k] == t->ls.down[i].id) {
				down = true;
				*id = t->ls.down[i].id;
				snprintf(buf, len,
					 "server %llu (%s) is down: the coordinator has not heard from it for %lld ms",
					 (unsigned long long)t->ls.down[i].id, t->ls.down[i].addr,
					 (long long)t->ls.down[i].silent_ms);
			}
	pthread_mutex_unlock(&t->ls.down_mu);
	return down;
}

/* A posted boundary report on its way: what was posted, and the answer. */
struct boundary {
	uint64_t seq; /* its number (model/boundary.h) */
	struct zs_step_report r;
	bool has;
	struct zs_step_state begun; /* the step begun and the rank's state: freed after */
	bool bbegun;
	enum zs_status st;
	struct zs_step_answer an;
	struct zs_error err;
};

/* Takes the posted report, if one waits to be sent (caller holds
 * down_mu): false when none does. */
static bool boundary_take(zs_trainer *t, struct boundary *b)
{
	uint64_t seq = zs_bm_pick(&t->ls.bm);

	if (!seq)
		return false;
	*b = (struct boundary){.seq = seq, .r = t->ls.brep, .has = t->ls.bhas,
			       .begun = t->ls.begun, .bbegun = t->ls.bbegun};
	t->ls.begun = (struct zs_step_state){0};
	t->ls.bbegun = false;
	return true;
}

/* Sends it over c (no lock held): a coordinator restarting is ridden out
 * within the call's bound, as the trainer's own calls do. */
static void boundary_send(zs_trainer *t, struct zs_coord_client *c, struct boundary *b)
{
	int64_t deadline = zs_now_ms() + t->timeout_ms;

	zs_coord_set_wait_for_ready(c, 1);
	while ((b->st = zs_coord_report_step_ex(c, t->job.spec.name, t->rank, b->has ? &b->r : NULL,
						b->bbegun ? &b->begun : NULL, &b->an, NULL, NULL,
						&b->err)) &&
	       (b->st == ZS_EUNAVAIL || b->st == ZS_ETIMEDOUT) && zs_now_ms() < deadline &&
	       !atomic_load(&t->ls.stop))
		zs_sleep_ms(100, (volatile const int *)&t->ls.stop);
	zs_coord_set_wait_for_ready(c, 0);
	free(b->begun.data);
	b->begun.data = NULL;
}

/* Keeps the answer for the step driver, if it is still the one awaited
 * (caller holds down_mu): not when a later report was posted meanwhile
 * (the driver gave up on this one and asked itself), nor when it was
 * dropped (the lease stopped; a resume to a new timeline). */
static void boundary_keep(zs_trainer *t, const struct boundary *b)
{
	if (!b->st && b->bbegun) {
		tr_step_known(t, b->begun.step);
		pthread_cond_broadcast(&t->ls.bcv); /* a push waiting for it */
	}
	if (!zs_bm_answered(&t->ls.bm, b->seq))
		return;
	t->ls.bst = b->st;
	t->ls.bans = b->an;
	snprintf(t->ls.bwhy, sizeof t->ls.bwhy, "%s", b->st ? b->err.msg : "");
	pthread_cond_broadcast(&t->ls.bcv);
}

void tr_boundary_post(zs_trainer *t, const struct zs_step_report *r,
		      struct zs_step_state *begun)
{
	pthread_mutex_lock(&t->ls.down_mu);
	t->ls.bhas = r != NULL;
	if (r)
		t->ls.brep = *r;
	free(t->ls.begun.data);
	t->ls.begun = begun ? *begun : (struct zs_step_state){0};
	t->ls.bbegun = begun != NULL;
	if (begun)
		*begun = (struct zs_step_state){0};
	zs_bm_post(&t->ls.bm);
	pthread_cond_broadcast(&t->ls.bcv);
	pthread_mutex_unlock(&t->ls.down_mu);
}

/* What the boundary finds (down_mu held): the answer, or the report still
 * awaited waited for within t->timeout_ms (model/boundary.h); take: as the
 * boundary that uses it, else left for it. A stopped lease thread answers
 * nothing more: what was posted is dropped. */
static enum zs_bm_take await_answer(zs_trainer *t, bool take)
{
	int64_t deadline = zs_now_ms() + t->timeout_ms;
	enum zs_bm_take k;

	if (!t->ls.running) {
		zs_bm_drop(&t->ls.bm);
		return ZS_BM_ASK;
	}
	for (;;) {
		bool expired = zs_now_ms() >= deadline;
		k = take ? zs_bm_take(&t->ls.bm, expired) : zs_bm_peek(&t->ls.bm, expired);
		if (k != ZS_BM_WAIT)
			return k;
		struct timespec ts = zs_deadline_in(50);
		pthread_cond_timedwait(&t->ls.bcv, &t->ls.down_mu, &ts);
	}
}

bool tr_boundary_peek(zs_trainer *t, struct zs_step_answer *a)
{
	bool got = false;

	pthread_mutex_lock(&t->ls.down_mu);
	if (await_answer(t, false) == ZS_BM_TAKE && !t->ls.bst) {
		*a = t->ls.bans;
		got = true;
	}
	pthread_mutex_unlock(&t->ls.down_mu);
	return got;
}

bool tr_boundary_take(zs_trainer *t, enum zs_status *st, struct zs_step_answer *a,
		      struct zs_error *err)
{
	bool took = true;

	pthread_mutex_lock(&t->ls.down_mu);
	switch (await_answer(t, true)) {
	case ZS_BM_TAKE:
		*st = t->ls.bst;
		*a = t->ls.bans;
		if (t->ls.bst)
			zs_fail(err, t->ls.bst, "%s", t->ls.bwhy);
		break;
	case ZS_BM_TIMEDOUT: /* its answer, coming later, is dropped */
		*st = zs_fail(err, ZS_ETIMEDOUT,
			      "the coordinator did not answer rank %u's step report within %d ms",
			      t->rank, t->timeout_ms);
		break;
	default:
		took = false;
	}
	pthread_mutex_unlock(&t->ls.down_mu);
	return took;
}

static void *lease_main(void *arg)
{
	zs_trainer *t = arg;
	struct zs_coord_client *c = NULL;
	struct zs_error err = {0};
	int64_t last_note = 0;

	while (!atomic_load(&t->ls.stop)) {
		struct zs_server_info *down = NULL;
		uint32_t n_down = 0;
		uint64_t timeline = 0;
		enum zs_status st;
		if (!c && zs_coord_open(t->ls.coord_addr, LEASE_RENEW_MS * 2, 0, &c, &err))
			c = NULL;
		st = c ? zs_coord_trainer_heartbeat(c, t->job.spec.name, t->rank, t->ls.session,
						    atomic_load(&t->ls.reconnects), &timeline,
						    &down, &n_down, &err)
		       : err.code;
		if (st == ZS_OK) {
			atomic_store(&t->ls.seen_timeline, timeline);
			note_down(t, down, n_down);
			free(down);
		} else if (st == ZS_ENOTFOUND) {
			atomic_store(&t->ls.evicted, 1);
		} else if (zs_now_ms() - last_note > 10000) { /* the coordinator away */
			zs_debug("rank %u of job '%s': cannot renew its lease: %s", t->rank,
				 t->job.spec.name, err.msg);
			last_note = zs_now_ms();
		}
		/* until the next renewal: boundary reports as they are posted */
		{
			int64_t next = zs_now_ms() + LEASE_RENEW_MS;
			pthread_mutex_lock(&t->ls.down_mu);
			while (!atomic_load(&t->ls.stop) && zs_now_ms() < next) {
				if (t->ls.bm.st == ZS_BM_POSTED) {
					struct boundary b;
					if (!c && zs_coord_open(t->ls.coord_addr, LEASE_RENEW_MS * 2, 0, &c,
								&err))
						c = NULL;
					if (c && boundary_take(t, &b)) {
						pthread_mutex_unlock(&t->ls.down_mu);
						boundary_send(t, c, &b);
						pthread_mutex_lock(&t->ls.down_mu);
						boundary_keep(t, &b);
						continue;
					}
				}
				struct timespec ts = zs_deadline_in(50);
				pthread_cond_timedwait(&t->ls.bcv, &t->ls.down_mu, &ts);
			}
			pthread_mutex_unlock(&t->ls.down_mu);
		}
	}
	zs_coord_close(c);
	return NULL;
}

enum zs_status tr_lease_start(zs_trainer *t, struct zs_error *err)
{
	t->ls.n_down = 0;
	atomic_store(&t->ls.stop, 0);
	atomic_store(&t->ls.evicted, 0);
	atomic_store(&t->ls.seen_timeline, t->timeline);
	if (pthread_create(&t->ls.thread, NULL, lease_main, t))
		return zs_fail(err, ZS_ENOMEM, "cannot start the lease thread");
	t->ls.running = true;
	return ZS_OK;
}

/* Says count n (a renewal now); when it begins a reconnect (n odd), tried
 * until the coordinator takes it, within ZS_LIVE_RECONNECTING_WAIT_MS. */
static void say_count(zs_trainer *t, uint64_t n)
{
	struct zs_server_info *down = NULL;
	uint32_t n_down = 0;
	uint64_t timeline;
	struct zs_error err = {0};
	int64_t until = zs_now_ms() + ZS_LIVE_RECONNECTING_WAIT_MS;
	enum zs_status st;

	atomic_store(&t->ls.reconnects, n);
	if (!t->ls.running || !t->coord)
		return; /* the lease thread's first renewal says it */
	/* the end of its connections must not be taken for its death: it
	 * closes them only once the coordinator knows (the lease thread's
	 * renewals say the count after) */
	while ((st = zs_coord_trainer_heartbeat(t->coord, t->job.spec.name, t->rank, t->ls.session,
						n, &timeline, &down, &n_down, &err)) &&
	       (n & 1) && st != ZS_ENOTFOUND && zs_now_ms() < until)
		zs_sleep_ms(200, NULL);
	free(down);
	if (st)
		zs_debug("rank %u of job '%s': cannot say it %s: %s", t->rank, t->job.spec.name,
			 n & 1 ? "reconnects (its lease bounds it)" : "reconnected", err.msg);
}

void tr_lease_reconnecting(zs_trainer *t, bool on)
{
	uint64_t n = atomic_load(&t->ls.reconnects);

	if ((n & 1) == on) /* said already */
		return;
	say_count(t, n + 1);
}

void tr_lease_reconnect_again(zs_trainer *t)
{
	uint64_t n = atomic_load(&t->ls.reconnects);

	say_count(t, n & 1 ? n + 2 : n + 1);
}

void tr_lease_stop(zs_trainer *t)
{
	if (!t->ls.running)
		return;
	atomic_store(&t->ls.stop, 1);
	pthread_mutex_lock(&t->ls.down_mu);
	pthread_cond_broadcast(&t->ls.bcv);
	pthread_mutex_unlock(&t->ls.down_mu);
	pthread_join(t->ls.thread, NULL);
	pthread_mutex_lock(&t->ls.down_mu);
	t->ls.running = false;
	zs_bm_drop(&t->ls.bm); /* a report still posted is dropped */
	pthread_mutex_unlock(&t->ls.down_mu);
}
