/*
 * stream.c - client core of the stream transports (see stream.h).
 *
 * Request life: post -> queued (sendq) -> sent (waiting, matched by req_id)
 * -> done (status kept until the caller's test/wait returns it, then freed).
 * Where the bytes do not travel inline, a gather is GATHER -> GATHER_DATA
 * (an offset: the transport moves the bytes) and a push is PUSH_BEGIN ->
 * PUSH_SLOT (the transport moves the bytes) -> queued again as PUSH (unless
 * the move notified the server itself) -> PUSH_ACK.
 * One mutex per connection guards the lists; the receiver writes into a
 * request's buffer without it, which is safe because a request that is not
 * done is never freed.
 */
#include "net/stream_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/le.h"
#include "model/hparams.h"
#include "net/dtls.h"
#include "net/sockio.h"
#include "base/util.h"
#include "net/wire.h"

const struct zs_transport_ops *zs_conn_transport(const struct zs_conn *c)
{
	return c->ops;
}

const char *zs_conn_encryption(const struct zs_conn *c)
{
	return c->io.rec ? zs_dtls_mode(c->io.rec) : NULL;
}

/* ------------------------------------------------------------- requests */

/*
 * Marks r done (caller holds mu, r is in no queue) - unless the sender is
 * still writing from its buffer or the transport still moving its bytes:
 * then r completes when the last of them is done, so the caller never gets
 * its buffer (or the request) back while the transport still uses it.
 */
static void finish(struct zs_req *r, enum zs_status st, const char *msg)
{
	r->status = st;
	if (msg != r->msg)
		zs_fmt(r->msg, sizeof r->msg, "%s", msg ? msg : "");
	if (r->in_send || r->in_move) {
		r->deferred = true;
		return;
	}
	r->state = R_DONE;
	if (!r->internal)
		r->c->inflight--;
	pthread_cond_broadcast(&r->c->cv);
}

/* The sender is done with r's buffer; caller holds mu. */
static void send_done(struct zs_req *r)
{
	r->in_send = false;
	if (r->deferred && !r->in_move) {
		r->deferred = false;
		finish(r, r->status, r->msg);
	}
}

static void unlink_waiting(struct zs_conn *c, struct zs_req *r)
{
	for (struct zs_req **p = &c->waiting; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			r->next = NULL;
			return;
		}
}

/* r answered: out of the waiting list, done (caller holds nothing). */
static void answered_ok(struct zs_conn *c, struct zs_req *r)
{
	pthread_mutex_lock(&c->mu);
	unlink_waiting(c, r);
	finish(r, ZS_OK, NULL);
	pthread_mutex_unlock(&c->mu);
}

static struct zs_req *find_waiting(struct zs_conn *c, uint64_t id)
{
	for (struct zs_req *r = c->waiting; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

/* Fails every queued and waiting request; caller holds mu. */
static void break_conn(struct zs_conn *c, enum zs_status code, const char *why)
{
	if (!c->broken) {
		c->broken = true;
		c->why_code = code;
		zs_fmt(c->why, sizeof c->why, "%s", why);
	}
	while (c->sendq) {
		struct zs_req *r = c->sendq;
		c->sendq = r->next;
		r->next = NULL;
		finish(r, c->why_code, c->why);
	}
	c->sendq_tail = NULL;
	while (c->waiting) {
		struct zs_req *r = c->waiting;
		c->waiting = r->next;
		r->next = NULL;
		finish(r, c->why_code, c->why);
	}
	pthread_cond_broadcast(&c->cv);
}

static void enqueue(struct zs_conn *c, struct zs_req *r, bool front)
{
	r->state = R_QUEUED;
	if (front) {
		r->next = c->sendq;
		c->sendq = r;
		if (!c->sendq_tail)
			c->sendq_tail = r;
	} else {
		r->next = NULL;
		if (c->sendq_tail)
			c->sendq_tail->next = r;
		else
			c->sendq = r;
		c->sendq_tail = r;
	}
	pthread_cond_broadcast(&c->cv);
}

/* Queues a request of op for x; own > 0: a payload of own bytes at src
 * that the request copies and carries (no transfer of a unit's range,
 * unless x is a device push: its payload says where the range is). */
static enum zs_status post(struct zs_conn *c, uint16_t op, const struct zs_xfer *x,
			   void *dst, const void *src, size_t own, struct zs_req **out,
			   struct zs_error *err)
{
	unsigned dsz = zs_dtype_size(x->dtype);
	struct zs_req *r;

	if (op != ZS_OP_PIN && (!own || x->device) &&
	    (!dsz || x->length == 0 || x->length > ZS_MAX_NUMEL))
		return zs_fail(err, ZS_EINVAL, "bad transfer: %llu elements of dtype %d",
			       (unsigned long long)x->length, (int)x->dtype);
	pthread_mutex_lock(&c->mu);
	if (c->broken || c->closing) {
		enum zs_status st = zs_fail(err, c->broken ? c->why_code : ZS_ECANCELED,
					    "%s", c->broken ? c->why : "connection closing");
		pthread_mutex_unlock(&c->mu);
		return st;
	}
	if (c->inflight >= c->max_inflight) {
		pthread_mutex_unlock(&c->mu);
		return ZS_EAGAIN; /* back-pressure, not an error */
	}
	r = calloc(1, sizeof *r + own);
	if (!r) {
		pthread_mutex_unlock(&c->mu);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	*r = (struct zs_req){.c = c, .id = ++c->next_id, .op = op, .x = *x, .dst = dst,
			     .src = src, .bytes = own ? own : x->length * dsz};
	if (own) {
		memcpy(r->own, src, own);
		r->src = r->own;
	}
	r->all_next = c->all;
	if (c->all)
		c->all->all_prev = r;
	c->all = r;
	c->inflight++;
	enqueue(c, r, false);
	pthread_mutex_unlock(&c->mu);
	*out = r;
	return ZS_OK;
}

enum zs_status zs_post_read(struct zs_conn *c, const struct zs_xfer *x, void *dst,
			    struct zs_req **out, struct zs_error *err)
{
	return post(c, ZS_OP_GATHER, x, dst, NULL, 0, out, err);
}

enum zs_status zs_post_write(struct zs_conn *c, const struct zs_xfer *x, const void *src,
			     struct zs_req **out, struct zs_error *err)
{
	return post(c, c->h->inline_data ? ZS_OP_PUSH : ZS_OP_PUSH_BEGIN, x, NULL, src, 0, out,
		    err);
}

enum zs_status zs_post_write_device(struct zs_conn *c, const struct zs_xfer *x,
				    const struct zs_dev_src *src, struct zs_req **out,
				    struct zs_error *err)
{
	struct zs_xfer d = *x;
	uint8_t pl[ZS_WIRE_DEV_SRC];

	if (!c->dev_ident)
		return zs_fail(err, ZS_EINVAL, "%s takes no pushes from device memory", c->addr);
	if (x->init || x->replica)
		return zs_fail(err, ZS_EINVAL,
			       "initial parameters and replicas' pushes do not come from device memory");
	memcpy(pl, src->handle, 64);
	zs_put64(pl + 64, src->serial);
	zs_put64(pl + 72, src->offset);
	d.device = true;
	return post(c, ZS_OP_PUSH, &d, NULL, pl, sizeof pl, out, err);
}

uint32_t zs_conn_device(const struct zs_conn *c) { return c->dev_ident; }

enum zs_status zs_post_hparams(struct zs_conn *c, uint64_t step, const void *payload,
			       size_t len, struct zs_req **out, struct zs_error *err)
{
	struct zs_xfer x = {.step = step};

	if (!len || len > ZS_HP_MAX_BYTES)
		return zs_fail(err, ZS_EINVAL, "a HPARAMS payload of %zu bytes", len);
	return post(c, ZS_OP_HPARAMS, &x, NULL, payload, len, out, err);
}

enum zs_status zs_post_world(struct zs_conn *c, const void *payload, size_t len,
			     struct zs_req **out, struct zs_error *err)
{
	struct zs_xfer x = {0};

	if (len < ZS_WORLDS_BYTES(1) || len > ZS_WORLDS_BYTES(ZS_WORLD_HIST))
		return zs_fail(err, ZS_EINVAL, "a WORLD payload of %zu bytes", len);
	return post(c, ZS_OP_WORLD, &x, NULL, payload, len, out, err);
}

enum zs_status zs_post_pin(struct zs_conn *c, uint64_t step, uint32_t verb,
			   struct zs_pin_ans *ans, struct zs_req **out, struct zs_error *err)
{
	struct zs_xfer x = {.step = step, .verb = verb};

	if (verb > ZS_PIN_QUERY)
		return zs_fail(err, ZS_EINVAL, "PIN verb %u", verb);
	return post(c, ZS_OP_PIN, &x, ans, NULL, 0, out, err);
}

enum zs_status stream_send_control(struct zs_conn *c, uint16_t op, const void *payload,
				   size_t len)
{
	struct zs_req *r;

	if (len > sizeof r->ctl)
		return ZS_EINVAL;
	r = calloc(1, sizeof *r);
	if (!r)
		return ZS_ENOMEM;
	pthread_mutex_lock(&c->mu);
	if (c->broken || c->closing) {
		pthread_mutex_unlock(&c->mu);
		free(r);
		return ZS_EUNAVAIL;
	}
	r->c = c;
	r->id = ++c->next_id;
	r->op = op;
	r->internal = true;
	memcpy(r->ctl, payload, len);
	r->src = r->ctl;
	r->bytes = len;
	r->all_next = c->all;
	if (c->all)
		c->all->all_prev = r;
	c->all = r;
	enqueue(c, r, false);
	pthread_mutex_unlock(&c->mu);
	return ZS_OK;
}

void *stream_ctx(struct zs_conn *c) { return c->ctx; }
uint64_t stream_req_id(const struct zs_req *r) { return r->id; }

void stream_moved(struct zs_conn *c, struct zs_req *r, enum zs_status st, const char *msg)
{
	pthread_mutex_lock(&c->mu);
	r->in_move = false;
	if (r->deferred) { /* answered meanwhile (a PUSH_ACK, a broken connection) */
		if (!r->in_send) {
			r->deferred = false;
			finish(r, r->status, r->msg);
		}
	} else if (st || r->op == ZS_OP_GATHER) {
		unlink_waiting(c, r);
		finish(r, st, msg);
	} else if (!c->h->push_notifies) { /* the bytes are in: say PUSH */
		unlink_waiting(c, r);
		enqueue(c, r, true);
	}
	/* else a push whose move notified the server: PUSH_ACK completes it */
	pthread_mutex_unlock(&c->mu);
}

/* Returns a done request's status and frees it; caller holds mu. */
static enum zs_status reap(struct zs_req *r, struct zs_error *err)
{
	struct zs_conn *c = r->c;
	enum zs_status st = r->status;

	if (st && err)
		zs_fail(err, st, "%s", r->msg);
	if (r->all_prev)
		r->all_prev->all_next = r->all_next;
	else
		c->all = r->all_next;
	if (r->all_next)
		r->all_next->all_prev = r->all_prev;
	free(r);
	return st;
}

enum zs_status zs_req_test(struct zs_req *r, struct zs_error *err)
{
	struct zs_conn *c = r->c;
	enum zs_status st = ZS_EAGAIN;

	pthread_mutex_lock(&c->mu);
	if (r->state == R_DONE)
		st = reap(r, err);
	pthread_mutex_unlock(&c->mu);
	return st;
}

enum zs_status zs_req_wait(struct zs_req *r, int timeout_ms, struct zs_error *err)
{
	struct zs_conn *c = r->c;
	struct timespec dl;
	enum zs_status st;

	if (timeout_ms >= 0)
		dl = zs_deadline_in(timeout_ms);
	pthread_mutex_lock(&c->mu);
	while (r->state != R_DONE) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&c->cv, &c->mu);
		} else if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT &&
			   r->state != R_DONE) {
			pthread_mutex_unlock(&c->mu);
			/* still in progress: EAGAIN, as test() says it */
			zs_fail(err, ZS_EAGAIN,
				"no answer from %s for unit %u step %llu within %d ms",
				c->addr, r->x.unit, (unsigned long long)r->x.step, timeout_ms);
			return ZS_EAGAIN;
		}
	}
	st = reap(r, err);
	pthread_mutex_unlock(&c->mu);
	return st;
}

/* --------------------------------------------------------------- threads */

/* A request's aux (net/wire.h): a state read's array; a replica write's
 * placement epoch (a forwarded partial push: its low 32 bits, and the
 * micro-batch above); a partial push's micro-batch. */
static uint64_t wire_aux(const struct zs_xfer *x)
{
	if (x->state_read)
		return (uint64_t)x->state;
	if (x->verb)
		return x->verb;
	if (x->pinned)
		return x->timeline;
	if (x->replica && x->partial && !x->seed)
		return (x->epoch & 0xffffffffu) | (uint64_t)x->micro << 32;
	if (x->replica && x->seed) /* and the run its state is of */
		return (x->epoch & 0xffffffffu) | x->timeline << 32;
	if (x->replica)
		return x->epoch;
	return x->partial ? x->micro : 0;
}

void *stream_sender_main(void *arg)
{
	struct zs_conn *c = arg;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct zs_req *r;
		struct zs_frame f;
		uint8_t h[ZS_WIRE_HDR];
		struct iovec iov[2];
		bool with_payload;

		while (!c->sendq && !c->closing && !c->broken)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->closing || c->broken)
			break;
		r = c->sendq;
		c->sendq = r->next;
		if (!c->sendq)
			c->sendq_tail = NULL;
		/* waiting before sending: the reply may beat the send's return */
		r->state = R_SENT;
		r->next = c->waiting;
		c->waiting = r;
		f = (struct zs_frame){.op = r->op, .req_id = r->id, .job = c->job,
				      .unit = r->x.unit, .offset = r->x.offset,
				      .length = r->x.length, .step = r->x.step,
				      .rank = r->x.replica && r->x.partial && !r->x.seed
					      ? r->x.from : c->rank,
				      .dtype = (uint16_t)r->x.dtype,
				      .flags = (uint16_t)((r->x.partial ? ZS_WF_PARTIAL : 0) |
						   (r->x.init ? ZS_WF_INIT : 0) |
						   (r->x.replica ? ZS_WF_REPLICA : 0) |
						   (r->x.seed ? ZS_WF_SEED : 0) |
						   (r->x.catchup ? ZS_WF_CATCHUP : 0) |
						   (r->x.with_prev ? ZS_WF_PREV : 0) |
						   (r->x.if_empty ? ZS_WF_EMPTY : 0) |
						   (r->x.state_read ? ZS_WF_STATE : 0) |
						   (r->x.device ? ZS_WF_DEVICE : 0) |
						   (r->x.redo ? ZS_WF_REDO : 0) |
						   (r->x.pinned ? ZS_WF_PIN : 0)),
				      .aux = wire_aux(&r->x)};
		with_payload = (r->op == ZS_OP_PUSH && c->h->inline_data) || r->internal ||
			       r->op == ZS_OP_HPARAMS || r->op == ZS_OP_WORLD || r->x.device;
		f.payload_len = with_payload ? r->bytes : 0;
		zs_wire_encode(&f, h);
		iov[0] = (struct iovec){h, sizeof h};
		iov[1] = (struct iovec){(void *)r->src, r->bytes};
		r->in_send = true;
		pthread_mutex_unlock(&c->mu);
		/* the payload goes from the caller's buffer to the socket */
		if (zs_io_writev(&c->io, iov, with_payload ? 2 : 1)) {
			char why[ZS_ERRMSG_MAX];
			zs_fmt(why, sizeof why, "connection to %s lost while sending: %s",
				 c->addr, strerror(errno));
			pthread_mutex_lock(&c->mu);
			send_done(r);
			break_conn(c, ZS_EUNAVAIL, why);
			break;
		}
		pthread_mutex_lock(&c->mu);
		send_done(r);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/*
 * The server said where r's range is (f->aux, an offset into its region):
 * the transport moves the bytes, the request held like a send until it
 * has. A gather completes then; a push goes on (stream_moved).
 */
static int move_bytes(struct zs_conn *c, struct zs_req *r, const struct zs_frame *f, char *why,
		      size_t wl)
{
	struct zs_error e = {0};
	bool write = r->op == ZS_OP_PUSH_BEGIN;
	enum zs_status st;

	if (f->payload_len || f->aux > c->region_len || r->bytes > c->region_len - f->aux) {
		zs_fmt(why, wl, "%s pointed outside its region", c->addr);
		return -1;
	}
	if (!write && r->x.version)
		*r->x.version = f->step;
	if (!write && r->x.crc) /* a pinned read's: aux is the offset */
		*r->x.crc = f->rank;
	pthread_mutex_lock(&c->mu);
	r->in_move = true;
	if (write)
		r->op = ZS_OP_PUSH;
	pthread_mutex_unlock(&c->mu);
	st = c->h->move(c->ctx, r, write, write ? (void *)r->src : r->dst, r->bytes, f->aux, &e);
	if (st != ZS_EAGAIN)
		stream_moved(c, r, st, st ? e.msg : NULL);
	return 0;
}

/* Handles one reply frame; returns nonzero (with why) to break the connection. */
static int on_reply(struct zs_conn *c, const struct zs_frame *f, char *why, size_t wl)
{
	struct zs_req *r;
	char msg[ZS_WIRE_MAX_ERR + 1];

	pthread_mutex_lock(&c->mu);
	r = find_waiting(c, f->req_id);
	pthread_mutex_unlock(&c->mu);
	if (!r && f->op == ZS_OP_ERROR && f->req_id == 0) {
		size_t n = f->payload_len < ZS_WIRE_MAX_ERR ? f->payload_len : ZS_WIRE_MAX_ERR;
		msg[0] = '\0';
		if (!zs_io_read(&c->io, msg, n))
			msg[n] = '\0';
		zs_fmt(why, wl, "%s closed the connection: %s", c->addr, msg);
		return -1;
	}
	if (!r) {
		zs_fmt(why, wl, "%s answered request %llu, which is not outstanding",
			 c->addr, (unsigned long long)f->req_id);
		return -1;
	}
	if (r->internal && f->op != ZS_OP_ERROR) { /* the transport's own frame */
		uint8_t pl[64];
		if (f->payload_len > sizeof pl || zs_io_read(&c->io, pl, f->payload_len)) {
			zs_fmt(why, wl, "%s sent a bad %s", c->addr, zs_op_name(f->op));
			return -1;
		}
		if (c->h->control)
			c->h->control(c->ctx, f->op, pl, f->payload_len);
		answered_ok(c, r);
		return 0;
	}
	switch (f->op) {
	case ZS_OP_ERROR: {
		size_t n = f->payload_len < ZS_WIRE_MAX_ERR ? f->payload_len : ZS_WIRE_MAX_ERR;
		enum zs_status st = f->status > ZS_OK && f->status < ZS_STATUS_COUNT
					    ? (enum zs_status)f->status : ZS_EPROTO;
		/* never final ZS_EAGAIN: test and wait say that while a request
		 * is in flight (a caller would wait on it, freed) */
		if (st == ZS_EAGAIN)
			st = ZS_ESTATE;
		if (zs_io_read(&c->io, msg, n) || zs_io_drain(&c->io, f->payload_len - n)) {
			zs_fmt(why, wl, "connection to %s lost", c->addr);
			return -1;
		}
		msg[n] = '\0';
		pthread_mutex_lock(&c->mu);
		unlink_waiting(c, r);
		finish(r, st, msg);
		pthread_mutex_unlock(&c->mu);
		return 0;
	}
	case ZS_OP_GATHER_DATA:
		if (r->op != ZS_OP_GATHER)
			break;
		if (!c->h->inline_data)
			return move_bytes(c, r, f, why, wl);
		if (f->payload_len != r->bytes) {
			zs_fmt(why, wl, "%s sent %llu bytes for a %zu-byte gather", c->addr,
			       (unsigned long long)f->payload_len, r->bytes);
			return -1;
		}
		if (zs_io_read(&c->io, r->dst, r->bytes)) {
			zs_fmt(why, wl, "connection to %s lost mid-transfer", c->addr);
			return -1;
		}
		if (r->x.version)
			*r->x.version = f->step;
		if (r->x.crc)
			*r->x.crc = (uint32_t)f->aux;
		answered_ok(c, r);
		return 0;
	case ZS_OP_PIN_OK:
		if (r->op != ZS_OP_PIN || f->payload_len)
			break;
		*(struct zs_pin_ans *)r->dst =
			(struct zs_pin_ans){f->step, f->offset, f->length, f->aux};
		answered_ok(c, r);
		return 0;
	case ZS_OP_PUSH_SLOT:
		if (r->op != ZS_OP_PUSH_BEGIN || c->h->inline_data)
			break;
		return move_bytes(c, r, f, why, wl);
	case ZS_OP_PUSH_ACK:
		if (r->op != ZS_OP_PUSH && r->op != ZS_OP_HPARAMS && r->op != ZS_OP_WORLD)
			break;
		answered_ok(c, r);
		return 0;
	default:
		break;
	}
	zs_fmt(why, wl, "%s sent %s for a %s request", c->addr, zs_op_name(f->op),
		 zs_op_name(r->op));
	return -1;
}

void *stream_receiver_main(void *arg)
{
	struct zs_conn *c = arg;
	char why[ZS_ERRMSG_MAX];
	struct zs_error err = {0};

	for (;;) {
		uint8_t h[ZS_WIRE_HDR];
		struct zs_frame f;

		if (zs_io_read(&c->io, h, sizeof h)) {
			zs_fmt(why, sizeof why, "connection to %s lost: %s", c->addr,
				 errno ? strerror(errno) : "closed by the server");
			break;
		}
		if (zs_wire_decode(h, &f, &err)) {
			zs_fmt(why, sizeof why, "%s: %s", c->addr, err.msg);
			break;
		}
		if (on_reply(c, &f, why, sizeof why))
			break;
	}
	pthread_mutex_lock(&c->mu);
	break_conn(c, c->closing ? ZS_ECANCELED : ZS_EUNAVAIL,
		   c->closing ? "connection closed" : why);
	pthread_mutex_unlock(&c->mu);
	if (c->ctx && c->h->flush) /* what is under way fails now, not at its timeout */
		c->h->flush(c->ctx);
	return NULL;
}
