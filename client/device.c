/*
 * device.c - the step driver's device mode (zs_trainer_set_device): unit
 * buffers in device memory, gathers landing in pinned host staging and
 * copied to the device on the library's copy stream as each shard's bytes
 * arrive, gradients copied back to staging on that stream before their
 * push goes out. The caller's compute stream and the copy stream order
 * each other by events, never by the host waiting, except where a buffer
 * leaves the library for good.
 *
 * Each unit has three events: h2d (its parameters are on the device),
 * gready (the compute stream's work up to its push: its gradient is
 * written) and d2h (its gradient is in staging). Freed device buffers keep
 * an event of the stream that last used them; the next user's stream
 * waits for it before touching the buffer.
 */
#include "client/trainer.h"

#include "gpu/coll.h"
#include "gpu/dev.h"
#include "gpu/kern.h"
#include "base/env.h"

/* the public device numbers are gpu/dev.h's */
_Static_assert(ZS_DEVICE_EMULATED == ZS_DEV_EMULATED, "ZS_DEVICE_EMULATED");

#define DV_CHUNK_DEFAULT (8u << 20)
#define DV_CACHE 8

struct tr_dev {
	struct zs_dev *dev;
	zs_dev_stream copy;    /* the library's */
	zs_dev_stream compute; /* the caller's */
	size_t chunk;          /* the largest single copy */
	bool direct_ok;        /* pushes may go from device memory (tr_dv_direct) */
	struct dv_unit {
		zs_dev_event h2d, gready, d2h;
		bool h2d_recorded;
	} *ev; /* per unit */
	/* freed device buffers, each with the event its last user recorded */
	struct { void *p; size_t n; zs_dev_event ev; bool used; } cache[DV_CACHE];
	/* a collective job (coll.c): the communicator of this timeline, the
	 * kernels that add what the all-to-all brings, their scratch */
	struct zs_coll *coll;
	uint64_t coll_timeline;
	const struct zs_kern *kern;
	void *drecv;  /* every rank's piece of my slice, for the largest unit */
	float *dsum;  /* their sum */
	struct zs_bacc *dbsum; /* the sum's reduction state (math/bsum.h) */
};

/* Device bytes of unit u's buffers: a collective job's are R slices of
 * zs_slice_len elements (the last one's tail unused), else the unit. */
static size_t dbytes(const zs_trainer *t, uint32_t u)
{
	const struct zs_unit *un = &t->job.spec.layout.units[u];
	uint32_t R = t->job.spec.world_size;
	if (!t->job.spec.collective)
		return t->drv.du[u].bytes;
	return (size_t)R * zs_slice_len(un->numel, R) * zs_dtype_size(un->dtype);
}

/* Bytes of a collective job's f32 slice sum of unit u (zs_slice_len
 * elements; the last slice's tail unused). */
static size_t sbytes(const zs_trainer *t, uint32_t u)
{
	return zs_slice_len(t->job.spec.layout.units[u].numel, t->job.spec.world_size) * 4;
}

/* Host bytes of unit u's gradient staging: the unit's, or a collective
 * job's f32 slice sum if larger. */
static size_t gbytes(const zs_trainer *t, uint32_t u)
{
	size_t b = t->drv.du[u].bytes, f = t->job.spec.collective ? sbytes(t, u) : 0;
	return f > b ? f : b;
}

static int dv_fail(zs_trainer *t, const char *what, unsigned u)
{
	return tr_fail(t, ZS_EIO, "device mode, unit %u: %s: %s", u, what, zs_dev_error(t->dv->dev));
}

/* A device buffer of n bytes; the cache's waits for its last user on the
 * stream s that uses it next. */
static void *dbuf_get(zs_trainer *t, size_t n, zs_dev_stream s)
{
	struct tr_dev *v = t->dv;
	for (unsigned i = 0; i < DV_CACHE; i++)
		if (v->cache[i].p && v->cache[i].n == n) {
			void *p = v->cache[i].p;
			if (v->cache[i].used && zs_dev_wait(v->dev, s, v->cache[i].ev))
				zs_dev_sync(v->dev, v->cache[i].ev); /* the host then */
			v->cache[i].p = NULL;
			return p;
		}
	return zs_dev_alloc(v->dev, n);
}

/* Keeps a device buffer for reuse; s: the stream that used it last (NULL
 * when its last use is known complete). A full cache frees its oldest
 * after that one's last use. */
static void dbuf_put(zs_trainer *t, void *p, size_t n, zs_dev_stream s, bool pending)
{
	struct tr_dev *v = t->dv;
	unsigned slot = 0;
	if (!p)
		return;
	for (unsigned i = 0; i < DV_CACHE; i++)
		if (!v->cache[i].p) {
			slot = i;
			goto put;
		}
	slot = (unsigned)(((uintptr_t)p >> 8) % DV_CACHE); /* any: all are full */
	if (v->cache[slot].used)
		zs_dev_sync(v->dev, v->cache[slot].ev);
	zs_dev_free(v->dev, v->cache[slot].p);
put:
	v->cache[slot].p = p;
	v->cache[slot].n = n;
	v->cache[slot].used = pending && zs_dev_record(v->dev, v->cache[slot].ev, s) == ZS_OK;
	if (pending && !v->cache[slot].used)
		zs_dev_stream_sync(v->dev, s); /* could not record: wait here */
}

/* Queues the copy of bytes [off, off + n) of a unit between its device
 * buffer and staging, in chunks of at most v->chunk. */
static enum zs_status copy_range(struct tr_dev *v, uint8_t *dbuf, uint8_t *host, size_t off,
				 size_t n, enum zs_dev_dir dir)
{
	for (size_t done = 0; done < n;) {
		size_t c = n - done < v->chunk ? n - done : v->chunk;
		uint8_t *d = dbuf + off + done, *h = host + off + done;
		enum zs_status st = dir == ZS_DEV_H2D ? zs_dev_copy(v->dev, d, h, c, dir, v->copy)
						      : zs_dev_copy(v->dev, h, d, c, dir, v->copy);
		if (st)
			return st;
		done += c;
	}
	return ZS_OK;
}

/* The i-th shard of unit u (in placement order): a gather's i-th request. */
static const struct zs_shard *shard_of(const zs_trainer *t, uint32_t u, uint32_t i)
{
	for (uint32_t k = 0; k < t->job.placement.n_shards; k++)
		if (t->job.placement.shards[k].unit == u && i-- == 0)
			return &t->job.placement.shards[k];
	return NULL;
}

/* A gather's request i arrived in staging: its bytes go to the device. */
static void h2d_request(zs_op *op, uint32_t i)
{
	zs_trainer *t = op->t;
	struct dunit *d = &t->drv.du[op->unit];
	const struct zs_shard *sh = shard_of(t, op->unit, op->only >= 0 ? (uint32_t)op->only : i);
	size_t dsz = zs_dtype_size(t->job.spec.layout.units[op->unit].dtype);

	if (!sh || copy_range(t->dv, d->params, d->stage, sh->offset * dsz, sh->length * dsz,
			      ZS_DEV_H2D)) {
		op->status = ZS_EIO;
		zs_fmt(op->msg, sizeof op->msg, "device mode, unit %u: the copy to the device: %s",
		       op->unit, sh ? zs_dev_error(t->dv->dev) : "no such shard");
	}
}

/* Staging of unit u back to the cache once its copy to the device is done
 * (wait: the host waits for it). */
static void stage_release(zs_trainer *t, uint32_t u, bool wait)
{
	struct dunit *d = &t->drv.du[u];
	struct tr_dev *v = t->dv;
	if (!d->stage || d->gather)
		return;
	if (!v->ev[u].h2d_recorded) {
		if (zs_dev_record(v->dev, v->ev[u].h2d, v->copy))
			wait = true, zs_dev_stream_sync(v->dev, v->copy);
		v->ev[u].h2d_recorded = true;
	}
	if (wait ? zs_dev_sync(v->dev, v->ev[u].h2d) : zs_dev_query(v->dev, v->ev[u].h2d))
		return;
	tr_stage_put(t, d->stage, d->bytes);
	d->stage = NULL;
}

int tr_dv_gather(zs_trainer *t, uint32_t u)
{
	struct dunit *d = &t->drv.du[u];
	struct tr_dev *v = t->dv;
	int rc;

	stage_release(t, u, true); /* an earlier gather's, if still there */
	d->params = dbuf_get(t, dbytes(t, u), v->copy);
	if (!d->params)
		return dv_fail(t, "device memory for its parameters", u);
	d->stage = tr_stage_get(t, d->bytes);
	if (!d->stage) {
		dbuf_put(t, d->params, dbytes(t, u), NULL, false);
		d->params = NULL;
		return tr_fail(t, ZS_ENOMEM, "device mode: out of pinned memory for unit %u's staging", u);
	}
	v->ev[u].h2d_recorded = false;
	/* a collective job: this rank's slice; the all-gather brings the rest */
	rc = t->job.spec.collective ? tr_gather_slice(t, u, d->stage, &d->gather)
				    : zs_gather(t, u, t->step, d->stage, &d->gather);
	if (rc) {
		tr_stage_put(t, d->stage, d->bytes);
		d->stage = NULL;
		dbuf_put(t, d->params, dbytes(t, u), NULL, false);
		d->params = NULL;
		return rc;
	}
	d->gather->on_req = h2d_request;
	return ZS_OK;
}

int tr_dv_params_ready(zs_trainer *t, uint32_t u)
{
	struct tr_dev *v = t->dv;
	if (!v->ev[u].h2d_recorded) {
		if (t->job.spec.collective) { /* every rank's slice from its owner */
			const struct zs_unit *un = &t->job.spec.layout.units[u];
			size_t piece = zs_slice_len(un->numel, t->job.spec.world_size) *
				       zs_dtype_size(un->dtype);
			enum zs_status st = zs_coll_all_gather(
				v->coll, (uint8_t *)t->drv.du[u].params + t->rank * piece,
				t->drv.du[u].params, piece, v->copy);
			if (st)
				return tr_fail(t, st, "unit %u: the all-gather of its slices: %s", u,
					       zs_coll_error(v->coll));
		}
		if (zs_dev_record(v->dev, v->ev[u].h2d, v->copy))
			return dv_fail(t, "recording its copy's event", u);
		v->ev[u].h2d_recorded = true;
	}
	/* the caller's kernels run after the copy; the host goes on */
	if (zs_dev_wait(v->dev, v->compute, v->ev[u].h2d))
		return dv_fail(t, "the compute stream's wait for its copy", u);
	return ZS_OK;
}

void tr_dv_poll(zs_trainer *t)
{
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		if (t->drv.du[u].gather)
			tr_poll(t->drv.du[u].gather);
		stage_release(t, u, false);
	}
}

void tr_dv_drop_params(zs_trainer *t, uint32_t u)
{
	struct dunit *d = &t->drv.du[u];
	stage_release(t, u, true);
	/* the caller's kernels queued so far may still read it */
	dbuf_put(t, d->params, dbytes(t, u), t->dv->compute, true);
	d->params = NULL;
}

void *tr_dv_grad_buf(zs_trainer *t, uint32_t u)
{
	void *p = dbuf_get(t, dbytes(t, u), t->dv->compute);
	if (!p)
		dv_fail(t, "device memory for its gradient", u);
	return p;
}

int tr_dv_zero_grad(zs_trainer *t, uint32_t u)
{
	struct dunit *d = &t->drv.du[u];
	if (zs_dev_zero(t->dv->dev, d->grad, dbytes(t, u), t->dv->compute))
		return dv_fail(t, "zeroing its gradient", u);
	return ZS_OK;
}

/*
 * A collective job's push of unit u: an all-to-all gives this rank every
 * rank's piece of its slice; they go into the exact reduction (math/bsum.h,
 * the servers' own kernels) and its sum, rounded once, is queued to
 * staging, whence the driver sends it (tr_push_via) to the slice's server: one f32
 * term there, so the servers' result is the reduction of every rank's
 * piece, the bits of a job that pushes them all.
 */
static int slice_sum(zs_trainer *t, uint32_t u)
{
	struct tr_dev *v = t->dv;
	struct dunit *d = &t->drv.du[u];
	const struct zs_unit *un = &t->job.spec.layout.units[u];
	uint32_t R = t->job.spec.world_size;
	size_t q = zs_slice_len(un->numel, R), dsz = zs_dtype_size(un->dtype);
	const struct zs_shard *mine = shard_of(t, u, t->rank);
	enum zs_status st;
	char why[256];

	if (!mine)
		return tr_fail(t, ZS_EINTERNAL, "unit %u has no slice for rank %u", u, t->rank);
	if ((st = zs_coll_all_to_all(v->coll, d->grad, v->drecv, q * dsz, v->copy)))
		return tr_fail(t, st, "unit %u: the all-to-all of its gradient: %s", u,
			       zs_coll_error(v->coll));
	/* the kernels run once the pieces are in (and the last sum is out);
	 * the wait is bounded: a rank gone would hold it forever */
	if ((st = zs_coll_wait(v->coll, v->copy)))
		return tr_fail(t, st, "unit %u: the all-to-all of its gradient: %s", u,
			       zs_coll_error(v->coll));
	if (zs_dev_bind(v->dev))
		return dv_fail(t, "the all-to-all", u);
	for (uint32_t r = 0; r < R; r++)
		if (v->kern->deposit(v->dbsum, (uint8_t *)v->drecv + r * q * dsz, un->dtype, q, why,
				     sizeof why))
			return tr_fail(t, ZS_EIO, "unit %u: adding rank %u's piece: %s", u, r, why);
	if (d->direct) { /* the server reads the sum where it is */
		/* the kernel writes q elements; the push sends the slice's */
		if (!d->dsend && !(d->dsend = dbuf_get(t, sbytes(t, u), v->copy)))
			return dv_fail(t, "a buffer for its slice's sum", u);
		/* its last user is done before the kernel (not on a stream) writes it */
		if (zs_dev_stream_sync(v->dev, v->copy))
			return dv_fail(t, "a buffer for its slice's sum", u);
	}
	if (v->kern->finish(d->direct ? d->dsend : v->dsum, v->dbsum, 1, q, why, sizeof why))
		return tr_fail(t, ZS_EIO, "unit %u: rounding its slice's sum: %s", u, why);
	if (!d->direct &&
	    zs_dev_copy(v->dev, d->gstage, v->dsum, mine->length * 4, ZS_DEV_D2H, v->copy))
		return dv_fail(t, "the copy of its slice's sum to the host", u);
	return ZS_OK;
}

int tr_dv_collective(zs_trainer *t)
{
	struct tr_dev *v = t->dv;
	uint32_t R = t->job.spec.world_size;
	uint8_t id[ZS_COLL_ID_BYTES];
	struct zs_error err = {0};
	enum zs_status st;
	size_t recv = 0, sum = 0;
	char why[256];

	if (!t->job.spec.collective)
		return ZS_OK;
	if (!v)
		return tr_fail(t, ZS_ESTATE,
			       "job '%s' is collective (its trainers reduce among themselves): its trainers run in device mode (zs_trainer_set_device)",
			       t->job.spec.name);
	if (v->coll && v->coll_timeline == t->timeline)
		return ZS_OK;
	zs_coll_close(v->coll); /* an earlier timeline's */
	v->coll = NULL;
	if (!v->kern && !(v->kern = zs_dev_emulated(v->dev) ? zs_kern_host()
							     : zs_kern_cuda(why, sizeof why)))
		return tr_fail(t, ZS_EUNAVAIL, "job '%s' is collective: %s", t->job.spec.name, why);
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		size_t q = zs_slice_len(t->job.spec.layout.units[u].numel, R);
		if (dbytes(t, u) > recv)
			recv = dbytes(t, u);
		if (q * 4 > sum)
			sum = q * 4;
	}
	if ((!v->drecv && !(v->drecv = zs_dev_alloc(v->dev, recv))) ||
	    (!v->dsum && !(v->dsum = zs_dev_alloc(v->dev, sum))) ||
	    (!v->dbsum && (!(v->dbsum = zs_dev_alloc(v->dev, sum * 4)) ||
			   zs_dev_zero(v->dev, v->dbsum, sum * 4, NULL) ||
			   zs_dev_stream_sync(v->dev, NULL))))
		return tr_fail(t, ZS_ENOMEM, "device mode: no room for the collective's scratch: %s",
			       zs_dev_error(v->dev));
	/* the id: rank 0 makes it, the coordinator hands it to the others */
	if (t->rank == 0) {
		uint8_t back[ZS_COLL_ID_BYTES];
		if ((st = zs_coll_new_id(v->dev, id, why, sizeof why)))
			return tr_fail(t, st, "job '%s': a communicator id: %s", t->job.spec.name, why);
		if ((st = zs_coord_comm_id(t->coord, t->job.spec.name, t->timeline, 0, id, back, &err)))
			return tr_fail(t, st, "%s", err.msg);
	} else {
		int64_t until = zs_now_ms() + t->timeout_ms;
		while ((st = zs_coord_comm_id(t->coord, t->job.spec.name, t->timeline, t->rank, NULL,
					      id, &err)) == ZS_EAGAIN && zs_now_ms() < until)
			zs_sleep_ms(20, NULL);
		if (st)
			return tr_fail(t, st, "%s%s", err.msg,
				       st == ZS_EAGAIN ? " (waited the join's timeout)" : "");
	}
	if ((st = zs_coll_open(v->dev, id, (int)R, (int)t->rank, t->timeout_ms, &v->coll, why,
			       sizeof why)))
		return tr_fail(t, st, "job '%s': the trainers' communicator: %s", t->job.spec.name,
			       why);
	v->coll_timeline = t->timeline;
	return ZS_OK;
}

int tr_dv_push_copy(zs_trainer *t, uint32_t u)
{
	struct dunit *d = &t->drv.du[u];
	struct tr_dev *v = t->dv;
	/* to servers on this device the push goes from device memory: no
	 * copy to the host (the event below then says the gradient is written) */
	d->direct = tr_dv_direct(t, u);
	if (!d->direct && !d->gstage && !(d->gstage = tr_stage_get(t, gbytes(t, u))))
		return tr_fail(t, ZS_ENOMEM, "device mode: out of pinned memory for unit %u's gradient",
			       u);
	/* after the caller's kernels that wrote it, on the copy stream */
	if (zs_dev_record(v->dev, v->ev[u].gready, v->compute) ||
	    zs_dev_wait(v->dev, v->copy, v->ev[u].gready))
		return dv_fail(t, "the copy stream's wait for its gradient", u);
	if (t->job.spec.collective) {
		int rc = slice_sum(t, u);
		if (rc)
			return rc;
	} else if (!d->direct && copy_range(v, d->grad, d->gstage, 0, d->bytes, ZS_DEV_D2H)) {
		return dv_fail(t, "the copy of its gradient to the host", u);
	}
	if (zs_dev_record(v->dev, v->ev[u].d2h, v->copy))
		return dv_fail(t, "the copy of its gradient to the host", u);
	return ZS_OK; /* the caller moves it to COPYING */
}

int tr_dv_copied(zs_trainer *t, uint32_t u, bool wait)
{
	enum zs_status st = wait ? zs_dev_sync(t->dv->dev, t->dv->ev[u].d2h)
				 : zs_dev_query(t->dv->dev, t->dv->ev[u].d2h);
	if (st == ZS_EAGAIN)
		return ZS_EAGAIN;
	if (st)
		return dv_fail(t, "the copy of its gradient to the host", u);
	tr_unit_go(&t->drv.du[u].up, u, UE_COPIED);
	return ZS_OK;
}

void tr_dv_push_done(zs_trainer *t, uint32_t u)
{
	struct dunit *d = &t->drv.du[u];
	/* its copy to staging is complete (the push went out after it), or
	 * the server has read it from device memory (the push is done) */
	dbuf_put(t, d->grad, dbytes(t, u), NULL, false);
	dbuf_put(t, d->dsend, sbytes(t, u), NULL, false);
	tr_stage_put(t, d->gstage, gbytes(t, u));
	d->gstage = NULL;
	d->grad = NULL;
	d->dsend = NULL;
}

void tr_dv_reset(zs_trainer *t, bool to_cache)
{
	struct tr_dev *v = t->dv;
	/* nothing the copy stream still has queued may outlive its buffers */
	zs_dev_stream_sync(v->dev, v->copy);
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->drv.du[u];
		if (to_cache) {
			tr_stage_put(t, d->stage, d->bytes);
			tr_stage_put(t, d->gstage, gbytes(t, u));
			dbuf_put(t, d->params, dbytes(t, u), v->compute, true);
			dbuf_put(t, d->grad, dbytes(t, u), v->compute, true);
			dbuf_put(t, d->dsend, sbytes(t, u), NULL, false);
		} else {
			tr_buf_free(t, d->stage);
			tr_buf_free(t, d->gstage);
			zs_dev_free(v->dev, d->params);
			zs_dev_free(v->dev, d->grad);
			zs_dev_free(v->dev, d->dsend);
		}
		d->stage = d->gstage = d->params = d->grad = d->dsend = NULL;
		d->direct = false;
		tr_unit_go(&d->up, u, UE_RESET);
		tr_params_go(&d->pp, u, PE_RESET);
		v->ev[u].h2d_recorded = false;
	}
}

void tr_dv_close(zs_trainer *t)
{
	struct tr_dev *v = t->dv;
	if (!v)
		return;
	tr_dv_reset(t, false);
	/* the caller's stream may still use cached buffers it was handed */
	zs_dev_stream_sync(v->dev, v->compute);
	for (unsigned i = 0; i < DV_CACHE; i++) {
		zs_dev_free(v->dev, v->cache[i].p);
		zs_dev_event_destroy(v->dev, v->cache[i].ev);
	}
	for (uint32_t u = 0; v->ev && u < t->job.spec.layout.n_units; u++) {
		zs_dev_event_destroy(v->dev, v->ev[u].h2d);
		zs_dev_event_destroy(v->dev, v->ev[u].gready);
		zs_dev_event_destroy(v->dev, v->ev[u].d2h);
	}
	free(v->ev);
	zs_coll_close(v->coll);
	zs_dev_free(v->dev, v->drecv);
	zs_dev_free(v->dev, v->dsum);
	zs_dev_free(v->dev, v->dbsum);
	zs_dev_stream_destroy(v->dev, v->copy);
	/* staging cached by the driver is this device's pinned memory */
	tr_cache_flush(t);
	zs_dev_close(v->dev);
	free(v);
	t->dv = NULL;
	t->drv.pin = NULL;
}

int zs_trainer_set_device(zs_trainer *t, int device, void *stream)
{
	uint32_t n = t->job.spec.layout.n_units;
	struct tr_dev *v;
	char why[256];
	const char *ch = zs_env("ZSHARD_COPY_CHUNK");
	enum zs_status st;

	if (t->drv.in_step)
		return tr_fail(t, ZS_ESTATE, "the device changes between steps, not within one");
	if (device < ZS_DEVICE_EMULATED)
		return tr_fail(t, ZS_EINVAL,
			       "no device %d: a CUDA ordinal, ZS_DEVICE_HOST (%d) or ZS_DEVICE_EMULATED (%d)",
			       device, ZS_DEVICE_HOST, ZS_DEVICE_EMULATED);
	if (device == ZS_DEVICE_HOST && stream)
		return tr_fail(t, ZS_EINVAL, "a stream without a device");
	/* what the driver holds was made for the old mode */
	tr_driver_reset(t);
	tr_dv_close(t);
	tr_cache_flush(t);
	if (device == ZS_DEVICE_HOST)
		return ZS_OK;
	v = calloc(1, sizeof *v);
	if (!v)
		return tr_fail(t, ZS_ENOMEM, "out of memory");
	st = zs_dev_open(device, &v->dev, why, sizeof why);
	if (st) {
		free(v);
		return tr_fail(t, st, "device mode: %s", why);
	}
	t->dv = v;
	t->drv.pin = v->dev;
	v->compute = stream;
	/* its buffers may be read by a server on the same device */
	zs_dev_set_shareable(v->dev);
	v->direct_ok = !zs_env("ZSHARD_DEVICE_PUSH") || strcmp(zs_env("ZSHARD_DEVICE_PUSH"), "0");
	v->chunk = ch && strtoull(ch, NULL, 10) > 0 ? (size_t)strtoull(ch, NULL, 10)
						      : DV_CHUNK_DEFAULT;
	v->ev = calloc(n ? n : 1, sizeof *v->ev);
	if (!v->ev) {
		tr_dv_close(t);
		return tr_fail(t, ZS_ENOMEM, "out of memory");
	}
	st = zs_dev_stream_create(v->dev, &v->copy);
	for (unsigned i = 0; !st && i < DV_CACHE; i++)
		st = zs_dev_event_create(v->dev, &v->cache[i].ev);
	for (uint32_t u = 0; !st && u < n; u++)
		if (!(st = zs_dev_event_create(v->dev, &v->ev[u].h2d)) &&
		    !(st = zs_dev_event_create(v->dev, &v->ev[u].gready)))
			st = zs_dev_event_create(v->dev, &v->ev[u].d2h);
	if (st) {
		snprintf(why, sizeof why, "%s", zs_dev_error(v->dev));
		tr_dv_close(t);
		return tr_fail(t, st, "device mode: %s", why);
	}
	return ZS_OK;
}

bool tr_dv_direct(zs_trainer *t, uint32_t u)
{
	struct tr_dev *v = t->dv;
	unsigned ident;
	bool any = false;

	if (!v || !v->direct_ok || tr_loss(t)->resends)
		return false;
	ident = zs_dev_ident(v->dev);
	for (uint32_t i = 0; i < t->job.placement.n_shards; i++) {
		const struct zs_shard *sh = &t->job.placement.shards[i];
		struct zs_conn *c;
		if (sh->unit != u || (t->job.spec.collective && sh->index != t->rank))
			continue;
		c = tr_conn(t, sh->server_id, false);
		if (!c || zs_conn_device(c) != ident)
			return false;
		any = true;
	}
	return any;
}

/* A push from device memory: the server reads it from where it is. */
static enum zs_status device_post(zs_trainer *t, struct zs_conn *c, const struct zs_xfer *x,
				  const uint8_t *src, struct zs_req **req, struct zs_error *err)
{
	struct zs_dev_share s;
	struct zs_dev_src ds;

	if (zs_dev_share(t->dv->dev, src, &s))
		return zs_fail(err, ZS_EIO, "sharing device memory with the server: %s",
			       zs_dev_error(t->dv->dev));
	memcpy(ds.handle, s.handle, sizeof ds.handle);
	ds.serial = s.serial;
	ds.offset = s.offset;
	return zs_post_write_device(c, x, &ds, req, err);
}

/* a step mark's value, which the server ignores (writable: an RDMA
 * transport registers what it sends) */
static uint8_t dev_mark[ZS_MARK_LEN * 8];

const struct tr_sender tr_device_sender = {device_post, dev_mark};

