/*
 * recovery.c - what the coordinator does by itself when a process of a job
 * is lost: trainer leases (renewed by the trainer library's heartbeat, and
 * lapsing when a trainer dies or is stopped), and the rollback (its
 * mechanics: ckpt_tasks.c) of a job whose state is no longer whole (a rank
 * lost mid-step, a server restarted without its shards). Trainers of the
 * old timeline get ZS_ERESUME and resume from the step the job now
 * records.
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "coord/recovery.h"

#include "model/failover.h"
#include "model/resize.h"

void coord_server_restarted(struct coord *c, uint64_t sid, const struct zs_server_info *in)
{
	char who[ZS_ADDR_MAX + 32], why[ZS_ADDR_MAX + 160];

	coord_server_name(c, sid, who, sizeof who);
	for (size_t i = 0; i < c->n_jobs; i++) {
		struct zs_job *j = &c->jobs[i];
		const struct zs_live_claim *k = NULL;
		struct zs_loss l = {.restarted = true, .stopped_step = j->stopped_step,
				    .restore_pending = j->restore_pending};
		if (!coord_holds(c, j, sid))
			continue;
		/* back sooner than its lease: replicas take over as if it had
		 * been marked down (when the job has them) */
		{
			char lost[ZS_ADDR_MAX + 64];
			zs_fmt(lost, sizeof lost, "%s restarted without its shards", who);
			l.failed_over = coord_failover(c, j, sid, lost);
		}
		for (uint32_t q = 0; q < in->n_live && !k; q++)
			if (!strcmp(in->live[q].job, j->spec.name) &&
			    in->live[q].incarnation == j->incarnation &&
			    in->live[q].epoch == j->placement.epoch)
				k = &in->live[q];
		l.claim = k != NULL;
		l.claim_step = k ? k->step : 0;
		/* trainers may have joined again meanwhile: until they push,
		 * the job is still at the step they left it; one that pushed to
		 * the others and now finds this server gone leaves mid-step,
		 * which rolls the job back (model/failover.h zs_loss_verdict) */
		switch (zs_loss_verdict(&l)) {
		case ZS_LOSS_KEEP:
			zs_info("job '%s': %s came back with its state of step %llu, where every rank had left it",
				j->spec.name, who, (unsigned long long)k->step);
			continue;
		case ZS_LOSS_ROLLBACK:
			break;
		default:
			continue;
		}
		if (!k)
			zs_fmt(why, sizeof why, "%s restarted without its shards", who);
		else
			zs_fmt(why, sizeof why,
			       "%s came back with its state of step %llu, but the ranks had not all left the job there",
			       who, (unsigned long long)k->step);
		coord_rollback(c, j, sid, why);
	}
}

void coord_clean_leave(struct coord *c, struct zs_job *j, uint32_t rank, uint64_t next)
{
	struct zs_error e = {0};
	struct zs_job old = *j;

	if (next) {
		if (j->leaving_step && j->leaving_step != next) {
			char why[160];
			zs_fmt(why, sizeof why,
			       "rank %u left before step %llu, another rank before step %llu",
			       rank, (unsigned long long)next, (unsigned long long)j->leaving_step);
			coord_rollback(c, j, 0, why);
			return;
		}
		j->leaving_step = next;
	}
	/* a job being restored stands at the restore's step, whoever left */
	if (j->n_trainers || !j->leaving_step || j->restore_pending)
		goto save;
	j->stopped_step = j->leaving_step;
	j->leaving_step = 0;
	j->stop_before = 0;
	zs_info("job '%s': every rank left before step %llu: it resumes there", j->spec.name,
		(unsigned long long)j->stopped_step);
save:
	if (j->leaving_step == old.leaving_step && j->stopped_step == old.stopped_step &&
	    j->stop_before == old.stop_before)
		return;
	if (coord_save_job(c, j, false, false, &e)) {
		*j = old;
		zs_error("job '%s': cannot record where its ranks left: %s", j->spec.name, e.msg);
	}
}

/* ------------------------------------------------------- trainer leases */

enum zs_status coord_drop_trainer(struct coord *c, struct zs_job *j, uint32_t pos,
				  struct zs_error *e)
{
	struct zs_member gone = j->trainers[pos];

	memmove(j->trainers + pos, j->trainers + pos + 1,
		(j->n_trainers - pos - 1) * sizeof *j->trainers);
	j->n_trainers--;
	if (coord_save_member(c, j, &gone, true, e)) {
		memmove(j->trainers + pos + 1, j->trainers + pos,
			(j->n_trainers - pos) * sizeof *j->trainers);
		j->trainers[pos] = gone;
		j->n_trainers++;
		return e->code;
	}
	return ZS_OK;
}

/* A Leave or TrainerHeartbeat, decoded. */
struct leave {
	char job[ZS_JOB_NAME_MAX];
	uint32_t rank;
	uint64_t session;
	bool abandoned;
	uint64_t next;
	uint64_t timeline; /* with_timeline: the one the trainer ran on */
	bool with_timeline;
	uint64_t reconnects; /* a renewal's: odd, its connections are made again */
};

/*
 * Decodes a Leave or TrainerHeartbeat into lv: false, the call answered,
 * when it does not decode or its sender may not send it (an eviction, a
 * Leave without a session, is an operator's or an admin's, not a
 * trainer's: coord/roles.c).
 */
static bool decode_leave(struct zs_rpc_call *call, const uint8_t *p, size_t n, bool own,
			 struct leave *lv)
{
	struct zs_error e = {0};
	char role[64];

	if (zs_dec_leave(p, n, lv->job, &lv->rank, &lv->session, &lv->abandoned, &lv->next,
			 &lv->timeline, &lv->with_timeline, &lv->reconnects, &e)) {
		coord_reply_err(call, &e);
		return false;
	}
	if (!own && !lv->session && zs_rpc_call_role(call, role, sizeof role) > 0 &&
	    strcmp(role, "admin") && strcmp(role, "operator")) {
		zs_rpc_fail(call, ZS_EPERM,
			    "role '%s' may not evict rank %u of job '%s' (an operator or an admin may)",
			    role, lv->rank, lv->job);
		return false;
	}
	return true;
}

/*
 * Finds lv's rank in its job (*pos; caller holds mu). NULL, the call
 * answered, when the job or the rank is not there, or the rank is another
 * session's (session 0, an operator's, matches any unless own).
 */
static struct zs_job *find_member(struct coord *c, struct zs_rpc_call *call, bool own,
				  struct leave *lv, uint32_t *pos)
{
	struct zs_job *j = coord_job_or_fail(c, call, lv->job);

	if (!j)
		return NULL;
	{ /* trainers are kept in rank order: a binary search */
		uint32_t lo = 0, hi = j->n_trainers;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (j->trainers[mid].rank < lv->rank)
				lo = mid + 1;
			else
				hi = mid;
		}
		*pos = lo < j->n_trainers && j->trainers[lo].rank == lv->rank ? lo : j->n_trainers;
	}
	/* a shrink gave this trainer another rank (coord/resize.c): its
	 * session says it is the one until it resumes and learns it */
	if (lv->session && (*pos == j->n_trainers || j->trainers[*pos].session != lv->session))
		for (uint32_t i = 0; i < j->n_trainers; i++)
			if (j->trainers[i].session == lv->session) {
				*pos = i;
				lv->rank = j->trainers[i].rank;
				break;
			}
	if (*pos == j->n_trainers) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "rank %u has not joined job '%s'%s", lv->rank,
			    lv->job, own ? " (its lease lapsed, or an operator evicted it)" : "");
		return NULL;
	}
	if ((lv->session || own) && j->trainers[*pos].session != lv->session) {
		zs_rpc_fail(call, ZS_ENOTFOUND,
			    "rank %u of job '%s' is held by another trainer now (this one's lease lapsed, or it was evicted)",
			    lv->rank, lv->job);
		return NULL;
	}
	return j;
}

void coord_h_trainer_heartbeat(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct leave lv;
	uint32_t pos;
	struct zs_job *j;
	struct zs_server_info down[8];
	uint32_t n_down = 0;
	int64_t now = zs_now_ms();
	enum zs_status st;
	struct zs_buf b;

	if (!decode_leave(call, p, n, true, &lv))
		return;
	pthread_mutex_lock(&c->mu);
	if (!(j = find_member(c, call, true, &lv, &pos))) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	zs_live_renewed(&j->trainers[pos].live, now, lv.reconnects);
	/* a few bytes whatever the job's size: the timeline (a rollback) and
	 * the servers down, for the step driver's waits */
	for (size_t i = 0; i < c->n_srvs && n_down < 8; i++)
		/* one not heard from since we began to serve (a restart, a
		 * takeover) is not down before its lease has passed
		 * (model/membership.h), or trainers would give up on a server
		 * that is only on its way to us */
		if (zs_mbr_down(&c->srvs[i].m)) {
			struct srv *s = &c->srvs[i];
			down[n_down] = (struct zs_server_info){.id = s->info.id, .up = false,
							       .last_seen_ms = zs_mbr_seen_ago(&s->m, now)};
			snprintf(down[n_down].addr, sizeof down[n_down].addr, "%s", s->info.addr);
			n_down++;
		}
	st = zs_enc_trainer_hb_reply(j->timeline, down, n_down, &b);
	pthread_mutex_unlock(&c->mu);
	coord_reply_buf(call, st, &b);
}

void coord_h_leave(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct leave lv;
	uint32_t pos;
	uint64_t held;
	struct zs_job *j;

	if (!decode_leave(call, p, n, false, &lv))
		return;
	pthread_mutex_lock(&c->mu);
	if (!(j = find_member(c, call, false, &lv, &pos)))
		goto out;
	held = j->trainers[pos].session;
	/* a trainer of a timeline that has ended (a rollback came while it
	 * ran, or one is under way: a trainer that does not say its
	 * timeline): where it stopped, or that it stopped mid-step, is of that
	 * timeline, not of the job's now. Counted, it made a job being
	 * restored to step c record "every rank left before step k" (k > c):
	 * its ranks resumed at k, the servers at c, and both waited out the
	 * step timeout */
	bool ended = lv.session && (lv.with_timeline ? lv.timeline != j->timeline
						     : j->restore_pending != 0);
	if (coord_drop_trainer(c, j, pos, &e)) {
		coord_reply_err(call, &e);
		goto out;
	}
	if (!held && !lv.session) {
		/* joined and left without the library (no lease, no pushes it
		 * accounts for): a plain leave */
		zs_info("job '%s': rank %u left", lv.job, lv.rank);
	} else if (ended) {
		zs_info("job '%s': rank %u left, from timeline %llu (the job is on %llu%s): where it stopped does not count",
			lv.job, lv.rank, (unsigned long long)lv.timeline,
			(unsigned long long)j->timeline, j->restore_pending ? ", being restored" : "");
	} else if (lv.session && !lv.abandoned && lv.next &&
		   lv.rank >= zs_world_at(&j->spec, &j->worlds, lv.next)) {
		/* a resize left it out from there: no stop */
		zs_info("job '%s': rank %u left: the job's world is %u ranks from step %llu",
			lv.job, lv.rank, zs_world_at(&j->spec, &j->worlds, lv.next),
			(unsigned long long)lv.next);
	} else if (lv.session && !lv.abandoned) {
		zs_info("job '%s': rank %u left%s", lv.job, lv.rank,
			lv.next ? "" : " (it pushed nothing)");
		coord_clean_leave(c, j, lv.rank, lv.next);
	} else { /* the rank's step in flight is lost with it */
		char why[64];
		zs_fmt(why, sizeof why, lv.session ? "rank %u left in the middle of a step"
						 : "rank %u was evicted", lv.rank);
		coord_rollback(c, j, 0, why);
	}
	coord_reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

void coord_trainer_sweep(struct coord *c, int64_t now)
{
	const struct zs_live_cfg cfg = {c->cfg.trainer_lease_ms, c->cfg.trainer_gone_ms};

	for (size_t i = 0; i < c->n_jobs; i++) {
		struct zs_job *j = &c->jobs[i];
		for (uint32_t pos = 0; pos < j->n_trainers; pos++) {
			struct zs_member *m = &j->trainers[pos];
			struct zs_error e = {0};
			char why[128];
			int64_t quiet;
			if (!m->session) /* joined without a lease (no library) */
				continue;
			/* the judgement is model/liveness.c's: gone (its
			 * connections to a server ended, and it is silent), or
			 * lapsed (silent past its lease) */
			enum zs_live_verdict v = zs_live_judge(&m->live, now, &cfg, &quiet);
			bool gone = v == ZS_LIVE_GONE;
			if (v == ZS_LIVE_OK)
				continue;
			if (gone)
				zs_fmt(why, sizeof why,
				       "rank %u is gone (its data connections to a server ended %lld ms ago, and it has not renewed its lease for %lld ms)",
				       m->rank, (long long)(now - m->live.dropped_ms), (long long)quiet);
			else
				zs_fmt(why, sizeof why,
				       "rank %u missed its lease (%lld ms without a heartbeat)", m->rank,
				       (long long)quiet);
			coord_metrics_event(c, COORD_EV_TRAINER_LAPSE);
			uint32_t rank = m->rank;
			if (coord_drop_trainer(c, j, pos, &e)) {
				zs_error("job '%s': %s, but it cannot be dropped: %s", j->spec.name,
					 why, e.msg);
				continue;
			}
			pos--;
			if (coord_rank_left_world(c, j, rank)) {
				zs_info("job '%s': %s; it is not in the job's world any more (%u ranks): nothing is lost",
					j->spec.name, why, zs_world_last(&j->spec, &j->worlds));
				continue;
			}
			/* gone (its process ended): its replacement redoes its
			 * step; silent only (alive, it may push again): back */
			if (gone && coord_rank_lost(c, j, rank, why))
				continue;
			coord_rollback(c, j, 0, why);
		}
		coord_away_sweep(c, j, now);
	}
}

void coord_h_dropped_ranks(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_dropped *d;
	uint32_t n_d, marked = 0;
	uint64_t sid;
	struct zs_buf b;
	int64_t now = zs_now_ms();

	if (zs_dec_dropped(p, n, &sid, &d, &n_d, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	for (uint32_t i = 0; i < n_d; i++) {
		struct zs_job *j = coord_find_job(c, d[i].job);
		if (!j || j->incarnation != d[i].incarnation) /* another job of the name */
			continue;
		for (uint32_t pos = 0; pos < j->n_trainers; pos++) {
			struct zs_member *m = &j->trainers[pos];
			if (m->rank != d[i].rank || !m->session)
				continue;
			marked++;
			enum zs_live_mark mk = zs_live_connections(
			    &m->live, now, d[i].back, d[i].reconnects, d[i].session, m->session);
			if (mk == ZS_LIVE_CLEARED)
				zs_debug("job '%s': rank %u connected to server %llu again: not gone",
					 j->spec.name, m->rank, (unsigned long long)sid);
			if (mk != ZS_LIVE_MARKED)
				continue;
			/* also every reconnect's (a join's, a resume's): debug */
			zs_debug("job '%s': rank %u's data connections to server %llu ended: it is taken for gone unless it renews its lease within %u ms",
				j->spec.name, m->rank, (unsigned long long)sid, c->cfg.trainer_gone_ms);
		}
	}
	pthread_mutex_unlock(&c->mu);
	free(d);
	coord_reply_buf(call, zs_enc_dropped_reply(marked, &b), &b);
}

/* ------------------------------------------------------ a graceful stop */

bool coord_latest_report(struct coord *c, const struct zs_job *j, uint64_t *top)
{
	struct sreports *sr;

	/*
	 * Every rank reports the step it finished at each step boundary (the
	 * step driver does), and a rank passes boundary b only with the
	 * answer to the report it posted at b - 1 (the one of step b - 2:
	 * client/lease.c), or to the one it sent itself at b (of step b - 1).
	 * So the furthest any rank can have begun is two past the highest
	 * report of this timeline; three past it no rank has begun yet, and
	 * every rank meets that boundary with an answer given after this one,
	 * which names it. The highest, not the latest heard: reports overtake
	 * each other (model/boundary.h).
	 */
	for (sr = c->reports; sr && strcmp(sr->job, j->spec.name); sr = sr->next)
		;
	*top = 0;
	return sr && zs_btop_latest(&sr->top, j->timeline, top);
}

void coord_h_stop_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_job *j, old;
	uint64_t top = 0;

	if (zs_dec_job_name(p, n, name, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (!j)
		goto out;
	if (!j->n_trainers) {
		zs_rpc_fail(call, ZS_ESTATE, "no trainer is in job '%s': nothing to stop", name);
		goto out;
	}
	if (j->stop_before) { /* asked again: the same step */
		coord_reply_job(call, j);
		goto out;
	}
	if (!coord_latest_report(c, j, &top)) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "no rank of job '%s' has finished a step through the step driver yet: try again in a moment",
			    name);
		goto out;
	}
	old = *j;
	j->stop_before = zs_stop_step(top, j->worlds.n > 0,
				      j->worlds.n ? j->worlds.v[j->worlds.n - 1].step : 0);
	if (coord_save_job(c, j, false, false, &e)) {
		*j = old;
		coord_reply_err(call, &e);
		goto out;
	}
	zs_info("job '%s': stopping: every rank leaves before step %llu", name,
		(unsigned long long)j->stop_before);
	coord_reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

uint64_t coord_state_checkpoint(struct coord *c, const struct zs_job *j,
				struct zs_rpc_call *call)
{
	const char *name = j->spec.name;
	uint64_t step = j->stopped_step ? j->stopped_step : j->restored_step;
	struct zs_checkpoint *k = NULL;

	if (!j->stopped_step && !j->restored_id)
		return 0;
	/* this incarnation's, or the one it was restored from (an earlier
	 * incarnation's, when an operator asked for it by id) */
	for (size_t i = 0; i < c->ck.n; i++)
		if ((coord_ckpt_of(&c->ck.list[i], j) || c->ck.list[i].id == j->restored_id) &&
		    !strcmp(c->ck.list[i].job, name) && c->ck.list[i].state == ZS_CKPT_COMMITTED &&
		    c->ck.list[i].step == step)
			k = &c->ck.list[i];
	if (k && (k->epoch == j->placement.epoch || k->placement.n_shards))
		return k->id;
	zs_rpc_fail(call, ZS_ESTATE,
		    "job '%s' holds the state of step %llu, which no committed checkpoint has: take one first (zshardctl checkpoint create %s --step %llu --wait 60000; its servers capture it at once)",
		    name, (unsigned long long)step, name, (unsigned long long)step);
	return UINT64_MAX;
}
