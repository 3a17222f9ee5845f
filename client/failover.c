/*
 * failover.c - a trainer's side of a replicated job (spec.replicas > 1)
 * losing a server: the coordinator moves the lost server's shards to their
 * replicas in a new placement epoch (coord/failover.c); the trainer waits
 * for that placement, takes it, and sends every request that was on the
 * lost server again, to its shard's new primary, from the same buffer:
 * those of every op in flight at once (the sweep), whichever request the
 * trainer is waiting on. It notices the loss when a request fails, or
 * between the slices of a replicated job's wait (tr_watch_lost: a broken
 * connection, a server the coordinator marks down).
 *
 * Nothing is lost that way: a replicated job's servers acknowledge a push
 * only once every copy has applied its step, so a push the lost server did
 * not acknowledge is still the op's (its buffer untouched) and goes again;
 * the new primary takes it as any push (or, if it applied that step as a
 * replica already, acknowledges it at once). A gather goes again and is
 * served at its step. A gradient-accumulation push is acknowledged once
 * every copy has its term in its reduction (engine/replica.c), so the new
 * primary has every partial push acknowledged before; it counts the
 * rank's micro-batches of the step, so one sent again that the lost
 * primary had forwarded before it died goes in once.
 */
#include "client/trainer.h"

#include "base/log.h"

/* Whether t's placement still puts a shard on server id. */
static bool holds(const zs_trainer *t, uint64_t id)
{
	for (uint32_t k = 0; k < t->job.placement.n_shards; k++)
		if (t->job.placement.shards[k].server_id == id)
			return true;
	return false;
}

/* Shuts server id's connection down and sets it aside (closed with the
 * others: ops may still hold requests of it). */
static void retire(zs_trainer *t, uint64_t id)
{
	for (uint32_t i = 0; i < t->n_srv; i++) {
		struct zs_conn **g;
		if (t->srv_id[i] != id)
			continue;
		zs_conn_shutdown(t->conn[i]);
		if (t->gconn[i])
			zs_conn_shutdown(t->gconn[i]);
		g = realloc(t->fo.dead, (t->fo.n_dead + 2) * sizeof *g);
		if (g) {
			t->fo.dead = g;
			t->fo.dead[t->fo.n_dead++] = t->conn[i];
			if (t->gconn[i])
				t->fo.dead[t->fo.n_dead++] = t->gconn[i];
		} /* else: left open, unused, until close (no memory to track it) */
		if (t->drv.reg_conn == t->conn[i])
			t->drv.reg_conn = NULL;
		t->srv_id[i] = t->srv_id[t->n_srv - 1];
		t->conn[i] = t->conn[t->n_srv - 1];
		t->gconn[i] = t->gconn[t->n_srv - 1];
		t->n_srv--;
		return;
	}
}

/* Whether server id is whole as t sees it: its connections not broken,
 * and the latest renewal does not mark it down. */
static bool whole(zs_trainer *t, uint64_t id)
{
	for (uint32_t i = 0; i < t->n_srv; i++)
		if (t->srv_id[i] == id)
			return !zs_conn_broken(t->conn[i], NULL, 0) &&
			       !(t->gconn[i] && zs_conn_broken(t->gconn[i], NULL, 0)) &&
			       !tr_server_marked_down(t, id);
	return false;
}

enum zs_status tr_failover(zs_trainer *t, uint64_t lost, bool refused, struct zs_error *err)
{
	int bound = tr_op_timeout(t);
	int64_t t0 = zs_now_ms(), deadline = t0 + bound;
	enum zs_status st;

	if (t->job.spec.replicas < 2)
		return zs_fail(err, ZS_EUNAVAIL, "job '%s' has no replicas", t->job.spec.name);
	for (bool took = false; !took && holds(t, lost);) {
		struct zs_job j;
		bool moved = true, answered;
		st = zs_coord_get_job(t->coord, t->job.spec.name, &j, err);
		answered = st == ZS_OK;
		/* no primary there (a rebuild may put new copies back on it,
		 * restarted under the same id) */
		for (uint32_t k = 0; answered && k < j.placement.n_shards; k++)
			moved &= j.placement.shards[k].server_id != lost ||
				 j.placement.shards[k].copy != 0;
		switch (zs_fo_look(zs_now_ms(), deadline, answered, t->timeline,
				   answered ? j.timeline : 0, moved, !refused && whole(t, lost))) {
		case ZS_LV_FAIL: /* the coordinator away past the bound */
			return st;
		case ZS_LV_RESUME:
			st = zs_fail(err, ZS_ERESUME,
				     "job '%s' was rolled back instead (%s): resume",
				     j.spec.name, j.rollback_reason[0] ? j.rollback_reason : "a restore");
			zs_job_release(&j);
			return st;
		case ZS_LV_TAKE:
			st = tr_take_placement(t, &j.placement);
			zs_job_release(&j);
			if (st)
				return zs_fail(err, st, "out of memory");
			zs_info("rank %u of job '%s': server %llu was lost; its shards' replicas took over (placement epoch %llu, %lld ms)",
				t->rank, t->job.spec.name, (unsigned long long)lost,
				(unsigned long long)t->job.placement.epoch,
				(long long)(zs_now_ms() - t0));
			took = true;
			break;
		case ZS_LV_BACK:
			if (answered)
				zs_job_release(&j);
			zs_info("rank %u of job '%s': server %llu is back (its connection whole, not marked down): nothing to fail over from",
				t->rank, t->job.spec.name, (unsigned long long)lost);
			return ZS_OK;
		case ZS_LV_TIMEDOUT:
			zs_job_release(&j);
			return zs_fail(err, ZS_ETIMEDOUT,
				       "server %llu was lost, and the coordinator did not move its shards to their replicas within %d ms",
				       (unsigned long long)lost, bound);
		default:
			if (answered)
				zs_job_release(&j);
			zs_sleep_ms(100, NULL);
		}
	}
	retire(t, lost);
	/* a server takes the new epoch at its next heartbeat: until then it
	 * refuses a new connection with ZS_EAGAIN */
	while ((st = tr_connect_new(t, err)) == ZS_EAGAIN && zs_now_ms() < deadline)
		zs_sleep_ms(100, NULL);
	return st;
}

/* The server of t's placement that holds x's range now (0: none). */
static uint64_t primary_of(const zs_trainer *t, const struct zs_xfer *x)
{
	for (uint32_t k = 0; k < t->job.placement.n_shards; k++) {
		const struct zs_shard *sh = &t->job.placement.shards[k];
		if (sh->unit == x->unit && sh->offset == x->offset &&
		    (sh->length == x->length ||
		     (x->length == ZS_MARK_LEN && zs_shard_marks(&t->job.spec, sh))))
			return sh->server_id;
	}
	return 0;
}

/* Sends request i of op (its server lost, its request gone) to its shard's
 * primary in t's placement: true when sent, or a HPARAMS that needs no
 * sending (op->req[i] stays NULL). */
static bool resend(zs_op *op, uint32_t i, struct zs_error *err)
{
	zs_trainer *t = op->t;
	struct tr_rq *q = &op->rq[i];
	struct zs_error ferr = {0};
	enum zs_status st;
	struct zs_conn *c;
	uint64_t to;

	op->req[i] = NULL;
	if (q->hparams) /* the lost server needed it; the others have it (one
			 * connected to now got it from tr_hp_to_new) */
		return true;
	to = primary_of(t, &q->x);
	if (!to || !(c = tr_conn(t, to, !q->src))) {
		zs_error_prefix(err, "unit %u [%llu, +%llu) has no primary in placement epoch %llu",
				q->x.unit, (unsigned long long)q->x.offset,
				(unsigned long long)q->x.length,
				(unsigned long long)t->job.placement.epoch);
		return false;
	}
	st = q->src ? zs_post_write(c, &q->x, q->src, &op->req[i], &ferr)
		    : zs_post_read(c, &q->x, q->dst, &op->req[i], &ferr);
	if (st) {
		op->req[i] = NULL;
		zs_error_prefix(err, "sending it again to server %llu: %s", (unsigned long long)to,
				ferr.msg);
		return false;
	}
	q->server = to;
	return true;
}

bool tr_failover_req(zs_op *op, uint32_t i, enum zs_status *stp, struct zs_error *err)
{
	enum zs_status st = *stp;
	zs_trainer *t = op->t;
	struct tr_rq *q = op->rq ? &op->rq[i] : NULL;
	struct zs_error ferr = {0};
	enum zs_status fst;
	uint64_t lost;

	/* a broken connection (the server gone), one we shut down, or a
	 * server that dropped the job (a deposed primary back) */
	if (!q || (st != ZS_EUNAVAIL && st != ZS_ECANCELED && st != ZS_ENOTFOUND))
		return false;
	/* a live primary that says a copy of its shard is out of its reach
	 * (its forward timed out): not lost, so no failover moves its shards;
	 * its words are the answer, now rather than after the failover's bound */
	if (st == ZS_EUNAVAIL && whole(t, q->server)) {
		zs_error_prefix(err, "server %llu, which is up, answered",
				(unsigned long long)q->server);
		return false;
	}
	op->req[i] = NULL; /* its wait took it */
	lost = q->server;
	fst = tr_failover(t, lost, st != ZS_EUNAVAIL, &ferr);
	if (!fst && tr_conn(t, lost, false)) {
		/* whole again, nothing failed over from: what it answered stands */
		zs_error_prefix(err, "server %llu, which is up again, answered",
				(unsigned long long)lost);
		return false;
	}
	if (fst) {
		if (fst == ZS_ERESUME) { /* the coordinator's verdict: a rollback */
			char met[ZS_ERRMSG_MAX];
			snprintf(met, sizeof met, "%s", err->msg);
			*stp = ZS_ERESUME;
			zs_fmt(err->msg, sizeof err->msg, "%s (what this rank met: %s)", ferr.msg, met);
			return false;
		}
		zs_error_prefix(err, "%s; after which", ferr.msg);
		return false;
	}
	/* this one with the others, in the order they were made (a rank's
	 * partial pushes of a unit go in the order of their micro-batches) */
	tr_failover_sweep(t, lost);
	if (q->fin && q->fst)
		zs_fail(err, q->fst, "%s", op->msg);
	return op->req[i] || (q->fin && !q->fst);
}

/* Request i of op, on lost server's connection (shut down: it fails
 * soon, if it has not finished), finished now or sent again. */
static void sweep_req(zs_op *op, uint32_t i)
{
	struct tr_rq *q = &op->rq[i];
	struct zs_error err = {0};
	enum zs_status st = ZS_EUNAVAIL;

	if (op->req[i]) {
		st = zs_req_wait(op->req[i], 2000, &err);
		if (st == ZS_EAGAIN)
			return; /* its turn in the op's wait will see to it */
		op->req[i] = NULL;
	}
	if (st == ZS_OK) {
		q->fin = true;
		q->fst = ZS_OK;
		return;
	}
	if ((st == ZS_EUNAVAIL || st == ZS_ECANCELED || st == ZS_ENOTFOUND) &&
	    resend(op, i, &err)) {
		if (!op->req[i]) { /* a HPARAMS: done */
			q->fin = true;
			q->fst = ZS_OK;
		}
		return;
	}
	q->fin = true;
	q->fst = st;
	if (!op->status) {
		op->status = st;
		zs_fmt(op->msg, sizeof op->msg, "%s", err.msg);
	}
}

void tr_failover_sweep(zs_trainer *t, uint64_t lost)
{
	zs_op *oldest = t->fo.live;

	while (oldest && oldest->live_next) /* the list is newest first */
		oldest = oldest->live_next;
	for (zs_op *op = oldest; op; op = op->live_prev)
		for (uint32_t i = op->done; i < op->n; i++)
			if (op->rq[i].server == lost && !op->rq[i].fin)
				sweep_req(op, i);
}

enum zs_status tr_watch_lost(zs_trainer *t, char *why, size_t len, struct zs_error *err)
{
	char b[ZS_ERRMSG_MAX] = "";
	uint64_t lost = 0;
	enum zs_status st;

	for (uint32_t i = 0; i < t->n_srv && !lost; i++)
		if (t->srv_id[i] != t->fo.lost_tried &&
		    (zs_conn_broken(t->conn[i], b, sizeof b) ||
		     (t->gconn[i] && zs_conn_broken(t->gconn[i], b, sizeof b)))) {
			lost = t->srv_id[i];
			snprintf(why, len, "server %llu's connection broke (%s)",
				 (unsigned long long)lost, b);
		}
	if (!lost && (!tr_server_down_id(t, &lost, why, len) || lost == t->fo.lost_tried))
		return ZS_OK;
	if ((st = tr_failover(t, lost, false, err))) {
		/* once: its requests fail in their turn, each saying why */
		t->fo.lost_tried = lost;
		return st;
	}
	if (!tr_conn(t, lost, false)) /* failed over from, not whole again */
		tr_failover_sweep(t, lost);
	return ZS_OK;
}




/* Replicated: a lost server is failed over from; the wait goes on. */
static bool lost_replicated(zs_trainer *t, char *why, size_t len, struct zs_error *err)
{
	return tr_watch_lost(t, why, len, err) != ZS_OK;
}

/* One copy of each shard: a server the coordinator marks down fails the
 * wait at once (a broken connection fails its requests on its own). */
static bool lost_single(zs_trainer *t, char *why, size_t len, struct zs_error *err)
{
	uint64_t id;

	(void)err;
	return tr_server_down_id(t, &id, why, len);
}

static const struct tr_loss replicated = {true, true, 2000, lost_replicated};
static const struct tr_loss single = {false, false, 10000, lost_single};

const struct tr_loss *tr_loss(const zs_trainer *t)
{
	return t->job.spec.replicas > 1 ? &replicated : &single;
}
