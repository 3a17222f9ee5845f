/*
 * xfer.c - libzshard's raw ops (see include/zshard.h): one transfer per
 * shard of a unit, fanned out over the servers that hold them (waited for
 * in op.c): a gather, a push (a frozen shard's a step mark), an initial
 * upload, a collective job's slice, a device push.
 */
#include "client/trainer.h"

/* Whether shard sh is one of unit u's that an op moves (only >= 0: the
 * shard of that index alone; TR_ONLY_TRAINED: those not frozen). */
static bool moves(const zs_trainer *t, const struct zs_shard *sh, unsigned u, int only)
{
	if (only == TR_ONLY_TRAINED)
		return sh->unit == u && !zs_shard_marks(&t->job.spec, sh);
	return sh->unit == u && (only < 0 || sh->index == (uint32_t)only);
}

/* What an op moves beyond its unit and step: init -1 (no initial
 * upload), 0 (the parameters) or k (optimizer array k); partial: a
 * micro-batch's push; only >= 0: the shard of that index alone
 * (TR_ONLY_TRAINED: those not frozen); slice: the caller's buffer holds
 * just that shard's f32 elements. */
struct xfer_what {
	int init;
	bool partial;
	int only;
	bool slice;
};

static enum zs_status host_post(zs_trainer *t, struct zs_conn *c, const struct zs_xfer *x,
				const uint8_t *src, struct zs_req **req, struct zs_error *err)
{
	(void)t;
	return zs_post_write(c, x, src, req, err);
}

const struct tr_sender tr_host_sender = {host_post, NULL};

/* A new op of unit u at step for the shards h moves (with room for their
 * requests, and for what a failover sends again); *moved: the elements
 * it moves (a frozen shard's push is a step mark: none). */
static zs_op *op_new(zs_trainer *t, unsigned u, unsigned long long step, bool push,
		     const struct xfer_what *h, uint64_t *moved)
{
	uint32_t n = 0;
	zs_op *op;

	*moved = 0;
	for (uint32_t i = 0; i < t->job.placement.n_shards; i++)
		if (moves(t, &t->job.placement.shards[i], u, h->only)) {
			n++;
			if (!push || h->init >= 0 ||
			    !zs_shard_marks(&t->job.spec, &t->job.placement.shards[i]))
				*moved += t->job.placement.shards[i].length;
		}
	op = calloc(1, sizeof *op + n * (sizeof op->req[0] + sizeof *op->rq));
	if (!op)
		return NULL;
	/* what each request is, to send it again after a failover */
	if (t->job.spec.replicas > 1)
		op->rq = (struct tr_rq *)&op->req[n];
	op->t = t;
	op->unit = u;
	op->step = step;
	op->final_push = push && h->init < 0 && !h->partial;
	op->only = h->only;
	return op;
}

/* Posts one transfer per shard of unit u that h moves (the gather into
 * dst, or the push or upload of src, sent as via says: NULL for a
 * gather); on failure cancels nothing posted (they complete on their own)
 * but reports the error through the op. */
static int start_ex(zs_trainer *t, unsigned u, unsigned long long step, void *dst,
		    const void *src, const struct xfer_what *h, const struct tr_sender *via,
		    zs_op **out)
{
	const struct zs_unit *un;
	enum zs_dtype dt;
	unsigned dsz;
	uint64_t moved; /* elements the op moves */
	zs_op *op;
	uint32_t micro = 0;

	*out = NULL;
	if (u >= t->job.spec.layout.n_units)
		return tr_fail(t, ZS_EINVAL, "unit %u is out of range (%u units)", u,
			    t->job.spec.layout.n_units);
	if (!dst && !src)
		return tr_fail(t, ZS_EINVAL, "unit %u: a NULL buffer", u);
	un = &t->job.spec.layout.units[u];
	dt = h->init >= 0 || h->slice ? ZS_F32 : un->dtype;
	dsz = zs_dtype_size(dt);
	if (!(op = op_new(t, u, step, src != NULL, h, &moved)))
		return tr_fail(t, ZS_ENOMEM, "out of memory");
	if (h->partial && src && !t->drv.micro &&
	    !(t->drv.micro = calloc(t->job.spec.layout.n_units, sizeof *t->drv.micro))) {
		free(op);
		return tr_fail(t, ZS_ENOMEM, "out of memory");
	}
	/* a step's push goes once the coordinator knows the step (redo.c) */
	if (src && h->init < 0 && t->drv.in_step && step == t->step)
		tr_wait_step_known(t, step);
	/* and once every server knows its world: a push made before the
	 * step's boundary (a micro-batch's) says a change the step before's
	 * end learned (world.c) */
	if (src && h->init < 0 && !zs_worlds_same(&t->worlds, &t->said)) {
		struct zs_error err = {0};
		struct zs_worlds w = t->worlds;
		enum zs_status st = tr_world_take(t, &w, &err);
		if (st) {
			free(op);
			return tr_fail(t, st, "%s", err.msg);
		}
	}
	if (h->partial && src) {
		if (t->drv.micro[u].step1 != step + 1)
			t->drv.micro[u] = (struct tr_micro){.step1 = step + 1};
		micro = t->drv.micro[u].n++;
	}
	for (uint32_t i = 0; i < t->job.placement.n_shards; i++) {
		const struct zs_shard *sh = &t->job.placement.shards[i];
		if (!moves(t, sh, u, h->only)) /* before the layout is read for it */
			continue;
		bool is_mark = src && h->init < 0 && zs_shard_marks(&t->job.spec, sh);
		struct zs_xfer x = {.unit = u, .offset = sh->offset,
				    .length = is_mark ? ZS_MARK_LEN : sh->length,
				    .step = step, .dtype = dt, .init = h->init >= 0,
				    .partial = h->partial, .state_read = h->init > 0,
				    .state = h->init > 0 ? h->init : -1, .micro = micro,
				    /* a lost rank's step, computed again */
				    .redo = src && h->init < 0 && t->redo_step1 == step + 1};
		const uint8_t *from = !src ? NULL : is_mark && via->mark ? via->mark
					: (const uint8_t *)src + (h->slice ? 0 : sh->offset * dsz);
		uint8_t *to = src ? NULL : (uint8_t *)dst + sh->offset * dsz;
		struct zs_error err = {0};
		enum zs_status st;
		if (op->rq)
			op->rq[op->n] = (struct tr_rq){.server = sh->server_id, .x = x, .dst = to,
						       .src = from};
		/* a step mark goes from host memory */
		st = from ? (is_mark ? &tr_host_sender : via)
				    ->post(t, tr_conn(t, sh->server_id, false), &x, from,
					   &op->req[op->n], &err)
			  : zs_post_read(tr_conn(t, sh->server_id, true), &x, to, &op->req[op->n],
					 &err);
		if (st == ZS_EAGAIN && op->n == 0) {
			if (h->partial && src) /* not sent: its index is the next one's */
				t->drv.micro[u].n--;
			free(op);
			return tr_fail(t, ZS_EAGAIN, "too many transfers in flight");
		}
		if ((st == ZS_EUNAVAIL || st == ZS_ECANCELED) && op->rq) {
			/* its server is gone: sent again once its shards have
			 * moved (the op's wait, tr_failover_req) */
			op->req[op->n++] = NULL;
			continue;
		}
		if (st) {
			/* what was posted still completes; the op reports this */
			op->status = st;
			zs_fmt(op->msg, sizeof op->msg, "%s",
			       st == ZS_EAGAIN ? "too many transfers in flight" : err.msg);
			break;
		}
		op->n++;
	}
	if (src) {
		t->ctr.pushes++;
		t->ctr.bytes_pushed += moved * dsz;
		if (via == &tr_device_sender)
			t->ctr.bytes_pushed_device += moved * dsz;
	} else {
		t->ctr.gathers++;
		t->ctr.bytes_gathered += moved * dsz;
	}
	if (op->rq)
		tr_live_add(t, op);
	*out = op;
	return ZS_OK;
}

static int start(zs_trainer *t, unsigned u, unsigned long long step, void *dst,
		 const void *src, int init, bool partial, zs_op **out)
{
	return start_ex(t, u, step, dst, src, &(struct xfer_what){init, partial, -1, false},
			src ? &tr_host_sender : NULL, out);
}

int tr_gather_slice(zs_trainer *t, unsigned u, void *dst, zs_op **op)
{
	return start_ex(t, u, t->step, dst, NULL, &(struct xfer_what){-1, false, (int)t->rank, false},
			NULL, op);
}

int tr_gather_trained(zs_trainer *t, unsigned u, void *dst, zs_op **op)
{
	bool any = false;

	for (uint32_t i = 0; i < t->job.placement.n_shards && !any; i++)
		any = moves(t, &t->job.placement.shards[i], u, TR_ONLY_TRAINED);
	*op = NULL;
	return any ? start_ex(t, u, t->step, dst, NULL,
			      &(struct xfer_what){-1, false, TR_ONLY_TRAINED, false}, NULL, op)
		   : ZS_OK;
}

int tr_push_via(zs_trainer *t, unsigned u, const void *src, bool slice,
		const struct tr_sender *via, zs_op **op)
{
	return start_ex(t, u, t->step, NULL, src,
			&(struct xfer_what){-1, false, slice ? (int)t->rank : -1, slice}, via, op);
}

int zs_gather(zs_trainer *t, unsigned u, unsigned long long step, void *dst, zs_op **op)
{
	return start(t, u, step, dst, NULL, -1, false, op);
}

int zs_push(zs_trainer *t, unsigned u, unsigned long long step, const void *grad,
	    zs_op **op)
{
	return start(t, u, step, NULL, grad, -1, false, op);
}

int zs_push_partial(zs_trainer *t, unsigned u, unsigned long long step, const void *grad,
		    zs_op **op)
{
	return start(t, u, step, NULL, grad, -1, true, op);
}

int zs_init_unit(zs_trainer *t, unsigned u, const float *params)
{
	zs_op *op;
	int rc = start(t, u, 0, NULL, params, 0, false, &op);

	if (rc)
		return rc;
	return tr_wait_or_park(t, op, TR_OP_TIMEOUT_MS);
}

int zs_init_unit_state(zs_trainer *t, unsigned u, unsigned array, const float *state)
{
	unsigned n = zs_optim_state_arrays(&t->job.spec.optim);
	zs_op *op;
	int rc;

	if (array < 1 || array > n)
		return tr_fail(t, ZS_EINVAL,
			       "optimizer array %u: the optimizer of job '%s' (%s) keeps %u array%s",
			       array, t->job.spec.name, zs_optim_name(t->job.spec.optim.kind), n,
			       n == 1 ? "" : "s");
	/* shards of frozen tensors alone keep no optimizer state */
	if ((rc = start_ex(t, u, 0, NULL, state,
			   &(struct xfer_what){(int)array, false, TR_ONLY_TRAINED, false},
			   &tr_host_sender, &op)))
		return rc;
	return tr_wait_or_park(t, op, TR_OP_TIMEOUT_MS);
}

