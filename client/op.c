/*
 * op.c - an op's requests as its trainer waits for them: in order, the
 * first failure kept as the op's, a replicated job's wait in slices that
 * watch for a lost server, and a request on a lost server sent again to
 * its shard's new primary (failover.c). An op given up on at its bound is
 * parked until the trainer closes (its requests may still write to its
 * buffer).
 */
#include "client/trainer.h"

#include <stdlib.h>

#include "base/log.h"

/* op's next request completed with st: the op's first failure is kept,
 * a success goes to on_req. */
static void req_done(zs_op *op, enum zs_status st, const struct zs_error *err)
{
	if (st && !op->status) {
		op->status = st;
		zs_fmt(op->msg, sizeof op->msg, "%s", err->msg);
	}
	if (!st && !op->status && op->on_req)
		op->on_req(op, op->done);
	op->done++;
}

/* The status of op's next request: waited for up to timeout_ms (< 0:
 * without bound, 0: tested), or as a failover's sweep left it. */
static enum zs_status next_status(zs_op *op, int timeout_ms, struct zs_error *err)
{
	uint32_t i = op->done;

	if (op->rq && op->rq[i].fin) /* a failure is the op's already */
		return op->rq[i].fst;
	if (!op->req[i]) /* never sent: its server was gone */
		return zs_fail(err, ZS_EUNAVAIL, "server %llu is gone",
			       (unsigned long long)op->rq[i].server);
	return timeout_ms == 0 ? zs_req_test(op->req[i], err)
			       : zs_req_wait(op->req[i], timeout_ms, err);
}

/* Advances op's requests; timeout_ms < 0 waits without bound, 0 only tests. */
int tr_progress(zs_op *op, int timeout_ms)
{
	zs_trainer *t = op->t;
	double t0 = tr_now_s();
	int rc;

	while (op->done < op->n) {
		struct zs_error err = {0};
		enum zs_status st;
		int left = timeout_ms < 0 ? -1
					  : timeout_ms - (int)((tr_now_s() - t0) * 1000.0);
		if (timeout_ms >= 0 && left < 0)
			left = 0;
		/* replicated: in slices, watching for a lost server between them */
		int slice = op->rq && (left < 0 || left > 250) ? 250 : left;
		st = next_status(op, timeout_ms == 0 ? 0 : slice, &err);
		if (st == ZS_EAGAIN && slice != left) {
			char why[ZS_ERRMSG_MAX];
			struct zs_error ferr = {0};
			if (tr_watch_lost(t, why, sizeof why, &ferr))
				zs_warn("rank %u of job '%s': %s; no failover: %s", t->rank,
					t->job.spec.name, why, ferr.msg);
			continue;
		}
		if (st == ZS_EAGAIN) { /* in progress (or the wait's bound passed) */
			t->ctr.wait_seconds += tr_now_s() - t0;
			if (timeout_ms != 0)
				tr_fail(t, st, "%s", err.msg);
			return ZS_EAGAIN;
		}
		if (st && !(op->rq && op->rq[op->done].fin) &&
		    tr_failover_req(op, op->done, &st, &err)) {
			if (op->req[op->done])
				continue; /* sent again: wait for that */
			st = ZS_OK;       /* a HPARAMS the lost server needs no more */
		}
		req_done(op, st, &err);
	}
	t->ctr.wait_seconds += tr_now_s() - t0;
	rc = op->status;
	if (rc) {
		/* a lost server: the coordinator says what it means */
		rc = tr_verdict(t, (enum zs_status)rc, op->msg, sizeof op->msg);
		tr_fail(t, (enum zs_status)rc, "%s", op->msg);
	}
	else if (op->final_push && t->drv.du && op->step + 1 > t->drv.du[op->unit].last_push)
		t->drv.du[op->unit].last_push = op->step + 1;
	tr_live_del(t, op);
	free(op);
	return rc;
}

void tr_poll(zs_op *op)
{
	while (op->done < op->n) {
		struct zs_error err = {0};
		enum zs_status st = next_status(op, 0, &err);
		if (st == ZS_EAGAIN)
			return;
		if (st && !(op->rq && op->rq[op->done].fin) &&
		    tr_failover_req(op, op->done, &st, &err)) {
			if (op->req[op->done])
				continue;
			st = ZS_OK;
		}
		req_done(op, st, &err);
	}
}

int zs_op_test(zs_op *op) { return tr_progress(op, 0); }
int zs_op_wait(zs_op *op, int timeout_ms) { return tr_progress(op, timeout_ms); }


void tr_park(zs_trainer *t, zs_op *op, void *own)
{
	op->own = own;
	op->stray_next = t->drv.strays;
	t->drv.strays = op;
}

int tr_wait_or_park(zs_trainer *t, zs_op *op, int timeout_ms)
{
	int rc = zs_op_wait(op, timeout_ms);

	if (rc == ZS_EAGAIN) { /* its requests still live: freed at close */
		char why[ZS_ERRMSG_MAX];
		memcpy(why, t->err, sizeof why);
		tr_park(t, op, NULL);
		return tr_fail(t, ZS_ETIMEDOUT, "%s", why);
	}
	return rc;
}

/* The live list, for a failover's sweep (failover.c). */

void tr_live_add(zs_trainer *t, zs_op *op)
{
	op->live_prev = NULL;
	op->live_next = t->fo.live;
	if (t->fo.live)
		t->fo.live->live_prev = op;
	t->fo.live = op;
	op->listed = true;
}

void tr_live_del(zs_trainer *t, zs_op *op)
{
	if (!op->listed)
		return;
	if (op->live_prev)
		op->live_prev->live_next = op->live_next;
	else
		t->fo.live = op->live_next;
	if (op->live_next)
		op->live_next->live_prev = op->live_prev;
	op->listed = false;
}

void tr_live_forget(zs_trainer *t)
{
	while (t->fo.live)
		tr_live_del(t, t->fo.live);
}
