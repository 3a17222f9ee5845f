/*
 * listener_conn.c - what a connection of the data plane's server side sends
 * and the operations it hands the target (see listener.c): frames and
 * errors under the connection's write lock, its reference count, the
 * target's answers (zs_sop_*), and write_begin waiting for the target's
 * room. Every other listener file calls into this one; it calls none.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "model/hparams.h"
#include "net/listener.h"
#include "net/listener_int.h"
#include "net/sockio.h"
#include "net/wire.h"

/* ----------------------------------------------------------- connections */

void lsn_conn_unref(struct zs_lconn *c)
{
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	close(c->io.fd);
	zs_records_free(c->io.rec);
	free(c->sl.v);
	pthread_mutex_destroy(&c->sl.mu);
	pthread_mutex_destroy(&c->wmu);
	free(c);
}

/* Sends a frame (and payload) unless the connection is dead. */
int lsn_send_frame(struct zs_lconn *c, struct zs_frame *f, const void *payload, size_t len,
		   int pass_fd)
{
	uint8_t h[ZS_WIRE_HDR];
	struct iovec iov[2] = {{h, sizeof h}, {(void *)payload, len}};
	int rc = -1;

	f->payload_len = len;
	zs_wire_encode(f, h);
	pthread_mutex_lock(&c->wmu);
	if (!c->dead) {
		if (pass_fd >= 0)
			rc = zs_send_with_fd(c->io.fd, h, sizeof h, pass_fd);
		else
			rc = zs_io_writev(&c->io, iov, len ? 2 : 1);
		if (rc) {
			c->dead = true;
			shutdown(c->io.fd, SHUT_RDWR);
		}
	}
	pthread_mutex_unlock(&c->wmu);
	return rc;
}

void lsn_send_error(struct zs_lconn *c, uint64_t req_id, enum zs_status code,
		       const char *msg)
{
	struct zs_frame f = {.op = ZS_OP_ERROR, .req_id = req_id, .status = code};
	lsn_send_frame(c, &f, msg, strlen(msg), -1);
}

struct zs_sop *lsn_new_sop(struct zs_lconn *c, const struct zs_frame *f,
			      const struct zs_xfer *x, int64_t t0)
{
	struct zs_sop *op = malloc(sizeof *op);
	if (!op)
		return NULL;
	atomic_fetch_add(&c->refs, 1);
	*op = (struct zs_sop){c, f->req_id, f->op, *x, t0};
	return op;
}

static void sop_end(struct zs_sop *op, bool ok)
{
	struct zs_lconn *c = op->c;

	if (c->obs.fn) /* c's copies: the listener may be gone by now */
		c->obs.fn(c->obs.ctx,
			   op->x.device ? "device" : c->pth.on ? c->pth.name : c->ep->name,
			   op->op != ZS_OP_GATHER, op->x.length * zs_dtype_size(op->x.dtype),
			   (double)(zs_now_ns() - op->t0) * 1e-9, ok);
	lsn_conn_unref(c);
	free(op);
}

void zs_sop_read_ready(struct zs_sop *op, const void *src)
{
	struct zs_lconn *c = op->c;
	size_t bytes = op->x.length * zs_dtype_size(op->x.dtype);
	struct zs_frame f = {.op = ZS_OP_GATHER_DATA, .req_id = op->req_id,
			     .job = c->job, .unit = op->x.unit, .offset = op->x.offset,
			     .length = op->x.length, .step = op->x.step,
			     .dtype = (uint16_t)op->x.dtype};

	bool dead;

	pthread_mutex_lock(&c->wmu);
	dead = c->dead;
	pthread_mutex_unlock(&c->wmu);
	if (dead) {
		/* the peer is gone (or the listener closed): nothing to send */
	} else if (c->offsets) {
		const uint8_t *s = src, *a = c->l->ar.base;
		if (s < a || s + bytes > a + c->l->ar.len) {
			zs_error("data plane: target served memory outside the arena (bug)");
			lsn_send_error(c, op->req_id, ZS_EINTERNAL, "server memory error");
		} else {
			f.aux = (uint64_t)(s - a);
			if (op->x.pinned) /* its CRC32C: aux is the offset */
				f.rank = (uint32_t)op->aux;
			lsn_send_frame(c, &f, NULL, 0, -1);
		}
	} else {
		f.aux = op->aux;
		lsn_send_frame(c, &f, src, bytes, -1);
	}
	sop_end(op, !dead);
}

void zs_sop_set_step(struct zs_sop *op, uint64_t step) { op->x.step = step; }

void zs_sop_set_aux(struct zs_sop *op, uint64_t aux) { op->aux = aux; }

bool zs_sop_reads_arena(const struct zs_sop *op) { return op->c->offsets; }

void zs_sop_done(struct zs_sop *op)
{
	struct zs_frame f = {.op = ZS_OP_PUSH_ACK, .req_id = op->req_id,
			     .job = op->c->job, .unit = op->x.unit, .step = op->x.step};
	lsn_send_frame(op->c, &f, NULL, 0, -1);
	sop_end(op, true);
}

void zs_sop_fail(struct zs_sop *op, enum zs_status code, const char *fmt, ...)
{
	char msg[ZS_WIRE_MAX_ERR];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	lsn_send_error(op->c, op->req_id, code == ZS_OK ? ZS_EINTERNAL : code, msg);
	sop_end(op, false);
}

void zs_listener_kick(struct zs_listener *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->kick.mu);
	l->kick.gen++;
	pthread_cond_broadcast(&l->kick.cv);
	pthread_mutex_unlock(&l->kick.mu);
}

/*
 * write_begin, waiting while the target has no room, up to the
 * listener's wait. A shm connection that holds a slot does not
 * wait: what frees its slot is behind this frame on the same connection.
 */
enum zs_status lsn_begin_write(struct zs_lconn *c, struct zs_xfer *x, void **dst,
			       struct zs_error *err)
{
	struct zs_listener *l = c->l;
	int64_t start = zs_now_ms();
	enum zs_status st;

	for (;;) {
		uint64_t gen;
		bool holds;
		pthread_mutex_lock(&l->kick.mu);
		gen = l->kick.gen;
		pthread_mutex_unlock(&l->kick.mu);
		if ((st = l->t.write_begin(l->t.ctx, c->job, c->rank, x, dst, err)) != ZS_EAGAIN)
			return st;
		pthread_mutex_lock(&c->sl.mu);
		holds = c->offsets && !c->pth.on && c->sl.n;
		pthread_mutex_unlock(&c->sl.mu);
		if (holds && !x->over_budget) {
			x->over_budget = true;
			continue;
		}
		pthread_mutex_lock(&c->wmu);
		holds = c->dead; /* cut (a restore), or the listener stops */
		pthread_mutex_unlock(&c->wmu);
		if (holds || atomic_load(&l->stop) || zs_now_ms() - start >= (int64_t)l->kick.wait_ms) {
			char why[ZS_ERRMSG_MAX];
			snprintf(why, sizeof why, "%s", err->msg);
			return zs_fail(err, ZS_ETIMEDOUT, "%s (waited %lld ms for room)", why,
				       (long long)(zs_now_ms() - start));
		}
		pthread_mutex_lock(&l->kick.mu);
		if (l->kick.gen == gen) { /* nothing freed since: wait a while */
			struct timespec ts = zs_deadline_in(200);
			pthread_cond_timedwait(&l->kick.cv, &l->kick.mu, &ts);
		}
		pthread_mutex_unlock(&l->kick.mu);
	}
}
