/*
 * client.c - the trainer's side of rdma: the zs_rdma_transport ops table on
 * the stream core (net/stream.h). The tcp connection of the server's data
 * address carries the frames; the queue pair reads gathers from and writes
 * pushes into the server's registered arena, a push's last piece WITH_IMM.
 */
#include "rdma/verbs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include "base/env.h"
#include "base/util.h"
#include "net/sockio.h"
#include "net/stream.h"
#include "net/wire.h"

/* Regions the caller registered (zs_mem_register): one process-wide list,
 * since every connection shares the protection domain. */
struct zs_mr {
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	struct zs_mr *next;
};
static struct zs_mr *regions;
static pthread_mutex_t regions_mu = PTHREAD_MUTEX_INITIALIZER;

/* One transfer (a request's bytes), posted in chunks. */
struct rop {
	struct zs_req *r;
	bool write;
	uint8_t *local;
	size_t bytes, posted;
	uint64_t roff;
	uint32_t lkey;
	struct ibv_mr *own; /* registered for this transfer only */
	unsigned inflight;
	enum zs_status st;
	char msg[ZS_ERRMSG_MAX];
	uint64_t bad_off;
	uint32_t bad_key;
	uint32_t imm; /* writes: the request's id, carried by the last piece */
	struct rop *next; /* pending */
};

struct rconn {
	struct zs_conn *c;
	char addr[ZS_ADDR_MAX];
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct zs_rdma_info me, srv;
	unsigned depth;
	size_t chunk;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned outstanding;    /* work requests posted, not completed */
	struct rop *pending, *pending_tail; /* waiting for the queue pair or room */
	bool qp_ok;              /* RTS, no failure seen */
	bool reconnecting;       /* a new queue pair waits for the server's reply */
	bool broken, stop;
	char last_err[ZS_ERRMSG_MAX];
	uint64_t bad_off;
	uint32_t bad_key;
	pthread_t th;
};

static struct zs_mr *region_of(const void *p, size_t n)
{
	const uint8_t *b = p;
	struct zs_mr *m;

	pthread_mutex_lock(&regions_mu);
	for (m = regions; m; m = m->next)
		if (b >= m->buf && b + n <= m->buf + m->len)
			break;
	pthread_mutex_unlock(&regions_mu);
	return m;
}

static enum zs_status rdma_reg(struct zs_conn *c, void *buf, size_t len, struct zs_mr **out,
			       struct zs_error *err)
{
	struct zs_mr *m;
	char why[256];

	(void)c;
	if (!buf || !len)
		return zs_fail(err, ZS_EINVAL, "an empty region cannot be registered");
	if (rdma_dev_open(why, sizeof why))
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	m = calloc(1, sizeof *m);
	if (!m) {
		rdma_dev_close();
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	m->mr = ibv_reg_mr(rdma_dev.pd, buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!m->mr) {
		free(m);
		rdma_dev_close();
		return zs_fail(err, ZS_EUNAVAIL, "cannot register %zu bytes with %s: %s", len,
			       rdma_dev.name, strerror(errno));
	}
	m->buf = buf;
	m->len = len;
	pthread_mutex_lock(&regions_mu);
	m->next = regions;
	regions = m;
	pthread_mutex_unlock(&regions_mu);
	*out = m;
	return ZS_OK;
}

static void rdma_dereg(struct zs_mr *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&regions_mu);
	for (struct zs_mr **p = &regions; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			break;
		}
	pthread_mutex_unlock(&regions_mu);
	ibv_dereg_mr(m->mr);
	free(m);
	rdma_dev_close();
}

/* Posts what fits of the pending transfers; caller holds rc->mu. A
 * transfer that cannot be posted at all joins *done (finish it unlocked). */
static void pump(struct rconn *rc, struct rop **done)
{
	while (rc->pending && rc->qp_ok && !rc->stop && rc->outstanding < rc->depth) {
		struct rop *o = rc->pending;
		size_t n = o->bytes - o->posted < rc->chunk ? o->bytes - o->posted : rc->chunk;
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(o->local + o->posted),
				      .length = (uint32_t)n, .lkey = o->lkey};
		bool last = o->posted + n == o->bytes;
		struct ibv_send_wr wr = {.wr_id = (uint64_t)(uintptr_t)o, .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = !o->write ? IBV_WR_RDMA_READ
						 : last ? IBV_WR_RDMA_WRITE_WITH_IMM
							: IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad = NULL;
		if (o->write && last) /* the notification: lands after every piece (RC) */
			wr.imm_data = htonl(o->imm);
		wr.wr.rdma.remote_addr = rc->srv.addr + o->roff + o->posted + o->bad_off;
		wr.wr.rdma.rkey = rc->srv.rkey + o->bad_key;
		if (ibv_post_send(rc->qp, &wr, &bad)) {
			zs_fmt(o->msg, sizeof o->msg, "cannot post an RDMA %s to %s: %s",
			       o->write ? "write" : "read", rc->addr, strerror(errno));
			o->st = ZS_EIO;
			o->posted = o->bytes;
			rc->pending = o->next;
			if (!rc->pending)
				rc->pending_tail = NULL;
			o->next = NULL;
			if (!o->inflight) { /* nothing on the wire: done now */
				o->next = *done;
				*done = o;
			}
			continue;
		}
		o->posted += n;
		o->inflight++;
		rc->outstanding++;
		if (o->posted == o->bytes) {
			rc->pending = o->next;
			if (!rc->pending)
				rc->pending_tail = NULL;
			o->next = NULL;
		}
	}
}

static void rop_free_done(struct rconn *rc, struct rop *o)
{
	if (o->own)
		ibv_dereg_mr(o->own);
	stream_moved(rc->c, o->r, o->st, o->msg);
	free(o);
}

static void finish_all(struct rconn *rc, struct rop *list)
{
	while (list) {
		struct rop *o = list;
		list = o->next;
		rop_free_done(rc, o);
	}
}

/* Fails every transfer not yet on the wire; caller holds rc->mu. Returns
 * them as a list for rop_free_done outside the lock. */
static struct rop *fail_pending(struct rconn *rc, enum zs_status st, const char *why)
{
	struct rop *head = NULL;

	while (rc->pending) {
		struct rop *o = rc->pending;
		rc->pending = o->next;
		if (o->st == ZS_OK) {
			o->st = st;
			zs_fmt(o->msg, sizeof o->msg, "%s", why);
		}
		o->posted = o->bytes;
		if (o->inflight) { /* its completions finish it */
			o->next = NULL;
			continue;
		}
		o->next = head;
		head = o;
	}
	rc->pending_tail = NULL;
	return head;
}

/* After a failure, once nothing is on the wire: a new queue pair, offered
 * to the server over the control connection. Caller holds rc->mu; what
 * cannot wait for it any more joins *done. */
static void reconnect(struct rconn *rc, struct rop **done)
{
	struct zs_error err = {0};
	uint8_t info[ZS_RDMA_INFO];
	struct rop *failed;

	if (rc->reconnecting || rc->broken || rc->stop || rc->outstanding)
		return;
	ibv_destroy_qp(rc->qp);
	rc->qp = rdma_qp_create(rc->cq, rc->depth, 1, &err);
	if (rc->qp) {
		rdma_my_info(rc->qp, &rc->me);
		zs_rdma_info_pack(&rc->me, info);
		if (!stream_send_control(rc->c, ZS_OP_RDMA_QP, info, sizeof info)) {
			rc->reconnecting = true;
			return;
		}
		zs_fmt(err.msg, sizeof err.msg, "the connection to %s is closing", rc->addr);
	}
	rc->broken = true;
	zs_fmt(rc->last_err, sizeof rc->last_err, "cannot replace the failed queue pair: %s",
	       err.msg);
	failed = fail_pending(rc, ZS_EUNAVAIL, rc->last_err);
	while (failed) {
		struct rop *o = failed;
		failed = o->next;
		o->next = *done;
		*done = o;
	}
}

static const char *op_name(const struct rop *o) { return o->write ? "write" : "read"; }

static void handle_wc(struct rconn *rc, const struct ibv_wc *wc, struct rop **done)
{
	struct rop *o = (struct rop *)(uintptr_t)wc->wr_id;

	rc->outstanding--;
	o->inflight--;
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR || !rc->last_err[0])
			zs_fmt(rc->last_err, sizeof rc->last_err,
			       "RDMA %s of %zu bytes at offset %llu of %s's registered region failed: %s",
			       op_name(o), o->bytes, (unsigned long long)o->roff, rc->addr,
			       ibv_wc_status_str(wc->status));
		if (o->st == ZS_OK) {
			o->st = wc->status == IBV_WC_REM_ACCESS_ERR ||
					wc->status == IBV_WC_REM_INV_REQ_ERR ||
					wc->status == IBV_WC_LOC_PROT_ERR
				? ZS_EINVAL : ZS_EIO;
			zs_fmt(o->msg, sizeof o->msg, "%s", rc->last_err);
		}
		rc->qp_ok = false; /* the queue pair is in error: replaced once drained */
		o->posted = o->bytes; /* nothing more of it is posted */
		for (struct rop **p = &rc->pending; *p; p = &(*p)->next)
			if (*p == o) {
				*p = o->next;
				if (rc->pending_tail == o) {
					rc->pending_tail = NULL;
					for (struct rop *q = rc->pending; q; q = q->next)
						rc->pending_tail = q;
				}
				break;
			}
	}
	if (!o->inflight && o->posted == o->bytes) {
		o->next = *done;
		*done = o;
	}
}

/* Handles n completions (none is fine): finishes transfers, replaces a
 * failed queue pair once it is drained, posts what waits. True once the
 * connection stops with nothing on the wire. */
static bool cq_handle(struct rconn *rc, const struct ibv_wc *wc, int n)
{
	struct rop *done = NULL;
	bool end;

	pthread_mutex_lock(&rc->mu);
	for (int i = 0; i < n; i++)
		handle_wc(rc, &wc[i], &done);
	if (n > 0) {
		if (!rc->qp_ok && !rc->outstanding && !rc->broken && !rc->stop)
			reconnect(rc, &done);
		pump(rc, &done);
	}
	end = rc->stop && !rc->outstanding && !done;
	pthread_cond_broadcast(&rc->cv);
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, done);
	return end;
}

static void *cq_main(void *arg)
{
	struct rconn *rc = arg;
	unsigned idle = 0;

	for (;;) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(rc->cq, 16, wc);

		if (n < 0 || cq_handle(rc, wc, n))
			break;
		if (n > 0) {
			idle = 0;
			continue;
		}
		if (++idle < 200) /* a short spin: completions come back in microseconds */
			continue;
		/* idle: sleep on the completion channel (bounded, to see stop) */
		if (ibv_req_notify_cq(rc->cq, 0))
			break;
		n = ibv_poll_cq(rc->cq, 16, wc); /* any that came before arming */
		if (n > 0) {
			if (cq_handle(rc, wc, n))
				break;
		} else {
			rdma_wait_channel(rc->ch);
		}
		idle = 0;
	}
	return NULL;
}

static void r_flush(void *ctx);

static enum zs_status start(void *ctx, struct zs_req *r, bool write, void *local,
			    size_t bytes, uint64_t off, struct zs_error *err)
{
	struct rconn *rc = ctx;
	struct zs_mr *m = region_of(local, bytes);
	struct rop *o = calloc(1, sizeof *o);

	if (!o)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	*o = (struct rop){.r = r, .write = write, .local = local, .bytes = bytes, .roff = off,
			  .imm = (uint32_t)stream_req_id(r)};
	if (m) {
		o->lkey = m->mr->lkey;
	} else { /* not registered by the caller: for this transfer only */
		o->own = ibv_reg_mr(rdma_dev.pd, local, bytes, IBV_ACCESS_LOCAL_WRITE);
		if (!o->own) {
			free(o);
			return zs_fail(err, ZS_EUNAVAIL, "cannot register %zu bytes with %s: %s",
				       bytes, rdma_dev.name, strerror(errno));
		}
		o->lkey = o->own->lkey;
	}
	pthread_mutex_lock(&rc->mu);
	if (rc->broken || rc->stop) {
		pthread_mutex_unlock(&rc->mu);
		if (o->own)
			ibv_dereg_mr(o->own);
		free(o);
		return zs_fail(err, ZS_EUNAVAIL, "the RDMA connection to %s is down: %s", rc->addr,
			       rc->last_err[0] ? rc->last_err : "closed");
	}
	if (!write && (rc->bad_off || rc->bad_key)) {
		o->bad_off = rc->bad_off;
		o->bad_key = rc->bad_key;
		rc->bad_off = 0;
		rc->bad_key = 0;
	}
	if (rc->pending_tail)
		rc->pending_tail->next = o;
	else
		rc->pending = o;
	rc->pending_tail = o;
	{
		struct rop *done = NULL;
		pump(rc, &done);
		pthread_mutex_unlock(&rc->mu);
		finish_all(rc, done);
	}
	return ZS_EAGAIN; /* under way: stream_moved() says when it is done */
}

/* The server's RDMA_QP answer to a queue pair made again after a failure. */
static void r_qp_reply(void *ctx, uint16_t op, const uint8_t *info, size_t len)
{
	struct rconn *rc = ctx;
	struct zs_error err = {0};
	struct zs_rdma_info srv;
	struct rop *done = NULL;

	if (op != ZS_OP_RDMA_QP || len != ZS_RDMA_INFO) {
		r_flush(ctx);
		return;
	}
	zs_rdma_info_unpack(info, &srv);
	pthread_mutex_lock(&rc->mu);
	rc->reconnecting = false;
	rc->srv = srv;
	if (rdma_qp_connect(rc->qp, &rc->me, &srv, &err)) {
		rc->broken = true;
		zs_fmt(rc->last_err, sizeof rc->last_err, "%s", err.msg);
		done = fail_pending(rc, ZS_EUNAVAIL, rc->last_err);
	} else {
		rc->qp_ok = true;
		rc->last_err[0] = '\0';
		pump(rc, &done);
	}
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, done);
}

static void r_flush(void *ctx)
{
	struct rconn *rc = ctx;
	struct rop *list;

	pthread_mutex_lock(&rc->mu);
	rc->broken = true;
	rdma_qp_to_error(rc->qp); /* what is on the wire completes with a flush error */
	list = fail_pending(rc, ZS_EUNAVAIL, "the connection to the server broke");
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, list);
}

static void r_close(void *ctx)
{
	struct rconn *rc = ctx;
	struct rop *list;

	pthread_mutex_lock(&rc->mu);
	rc->stop = true;
	rdma_qp_to_error(rc->qp);
	list = fail_pending(rc, ZS_ECANCELED, "connection closed");
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, list);
	pthread_join(rc->th, NULL); /* it leaves once every work request completed */
	if (rc->qp)
		ibv_destroy_qp(rc->qp);
	ibv_destroy_cq(rc->cq);
	ibv_destroy_comp_channel(rc->ch);
	pthread_cond_destroy(&rc->cv);
	pthread_mutex_destroy(&rc->mu);
	free(rc);
	rdma_dev_close();
}

static enum zs_status r_setup(struct zs_conn *c, const char *addr, int fd, uint64_t arena_len,
			      int passed_fd, void **out, struct zs_error *err)
{
	struct rconn *rc;
	uint8_t h[ZS_WIRE_HDR], info[ZS_RDMA_INFO];
	struct zs_frame f = {.op = ZS_OP_RDMA_QP, .payload_len = ZS_RDMA_INFO};
	struct iovec iov[2] = {{h, sizeof h}, {info, sizeof info}};
	char why[256];
	int fl;

	(void)passed_fd; /* rdma's HELLO_OK carries none */
	*out = NULL;
	if (rdma_dev_open(why, sizeof why))
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	rc = calloc(1, sizeof *rc);
	if (!rc) {
		rdma_dev_close();
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	rc->c = c;
	snprintf(rc->addr, sizeof rc->addr, "%s", addr);
	rc->depth = zs_env_uint("ZSHARD_RDMA_DEPTH", 128, 1, 16384);
	if (rc->depth > (unsigned)rdma_dev.dev.max_qp_wr && rdma_dev.dev.max_qp_wr > 0)
		rc->depth = (unsigned)rdma_dev.dev.max_qp_wr;
	rc->chunk = zs_env_uint("ZSHARD_RDMA_CHUNK", 1u << 20, 4096, 1u << 30);
	if (rdma_dev.port.max_msg_sz && rc->chunk > rdma_dev.port.max_msg_sz)
		rc->chunk = rdma_dev.port.max_msg_sz;
	pthread_mutex_init(&rc->mu, NULL);
	pthread_cond_init(&rc->cv, NULL);
	rc->ch = ibv_create_comp_channel(rdma_dev.ctx);
	if (!rc->ch) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a completion channel on %s: %s", rdma_dev.name,
			strerror(errno));
		goto fail;
	}
	fl = fcntl(rc->ch->fd, F_GETFL);
	fcntl(rc->ch->fd, F_SETFL, fl | O_NONBLOCK);
	rc->cq = ibv_create_cq(rdma_dev.ctx, (int)rc->depth + 1, rc, rc->ch, 0);
	if (!rc->cq) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a completion queue on %s: %s", rdma_dev.name,
			strerror(errno));
		goto fail;
	}
	rc->qp = rdma_qp_create(rc->cq, rc->depth, 1, err);
	if (!rc->qp)
		goto fail;
	rdma_my_info(rc->qp, &rc->me);
	zs_rdma_info_pack(&rc->me, info);
	zs_wire_encode(&f, h);
	if (zs_writev_full(fd, iov, 2) || zs_read_full(fd, h, sizeof h)) {
		zs_fail(err, ZS_EUNAVAIL, "the server did not answer RDMA_QP: %s",
			errno ? strerror(errno) : "connection closed");
		goto fail;
	}
	if (zs_wire_decode(h, &f, err))
		goto fail;
	if (f.op == ZS_OP_ERROR) {
		char msg[ZS_WIRE_MAX_ERR + 1] = "";
		size_t n = f.payload_len < ZS_WIRE_MAX_ERR ? f.payload_len : ZS_WIRE_MAX_ERR;
		if (!zs_read_full(fd, msg, n))
			msg[n] = '\0';
		zs_fail(err, f.status > 0 && f.status < ZS_STATUS_COUNT ? (enum zs_status)f.status
									 : ZS_EPROTO,
			"the server refused RDMA: %s", msg);
		goto fail;
	}
	if (f.op != ZS_OP_RDMA_QP || f.payload_len != ZS_RDMA_INFO ||
	    zs_read_full(fd, info, sizeof info)) {
		zs_fail(err, ZS_EPROTO, "the server answered RDMA_QP with %s", zs_op_name(f.op));
		goto fail;
	}
	zs_rdma_info_unpack(info, &rc->srv);
	if (rc->srv.len != arena_len || !rc->srv.addr) {
		zs_fail(err, ZS_EPROTO, "the server's registered region does not match its HELLO");
		goto fail;
	}
	if (rdma_qp_connect(rc->qp, &rc->me, &rc->srv, err))
		goto fail;
	rc->qp_ok = true;
	if (ibv_req_notify_cq(rc->cq, 0) || pthread_create(&rc->th, NULL, cq_main, rc)) {
		zs_fail(err, ZS_ENOMEM, "cannot start the completion thread");
		goto fail;
	}
	*out = rc;
	return ZS_OK;
fail:
	if (rc->qp)
		ibv_destroy_qp(rc->qp);
	if (rc->cq)
		ibv_destroy_cq(rc->cq);
	if (rc->ch)
		ibv_destroy_comp_channel(rc->ch);
	pthread_cond_destroy(&rc->cv);
	pthread_mutex_destroy(&rc->mu);
	free(rc);
	rdma_dev_close();
	return err ? err->code : ZS_EUNAVAIL;
}

/* The tcp connection of the server's data address carries the frames; the
 * queue pair moves the bytes, a push's last piece notifying the server. */
static const struct stream_hooks rdma_hooks = {
	.hello_flags = ZS_WF_ONE_SIDED,
	.push_notifies = true,
	.attach = r_setup,
	.move = start,
	.control = r_qp_reply,
	.flush = r_flush,
	.detach = r_close,
};

void zs_rdma_debug_corrupt_next(struct zs_conn *c, uint64_t bad_offset, uint32_t bad_key)
{
	struct rconn *rc = stream_ctx(c);
	pthread_mutex_lock(&rc->mu);
	rc->bad_off = bad_offset;
	rc->bad_key = bad_key;
	pthread_mutex_unlock(&rc->mu);
}

static bool rdma_available(char *why, size_t len) { return !zs_rdma_probe(0, why, len); }

const struct zs_transport_ops zs_rdma_transport = {
	.name = "rdma",
	.caps = ZS_CAP_ONE_SIDED | ZS_CAP_REGISTER,
	.bit = ZS_TRANSPORT_RDMA,
	.available = rdma_available,
	.hooks = &rdma_hooks,
	.reg = rdma_reg,
	.dereg = rdma_dereg,
};
