/*
 * listener.c - the server side of the data plane (see transport.h).
 *
 * One accept thread polls the listening sockets of every endpoint (each
 * stream transport's server half: net/tcp.c, net/shm.c); each accepted
 * connection gets a thread that reads frames and calls the target. Replies
 * may come from any thread (a deferred gather is answered by whoever makes
 * the step's parameters), so writes to a connection go under its write
 * lock, and a connection lives until its thread and every operation it
 * handed to the target are done (a reference count).
 *
 * Per connection:  HELLO -> (GATHER | PUSH | PUSH_BEGIN, PUSH)*  -> EOF.
 * A frame that does not decode, a payload of the wrong size or a peer that
 * closes mid-frame ends that connection only; the target sees write_abort
 * for a write that began, and nothing else changes. A one-sided path's
 * control frames and landing notifications: listener_path.c; what a
 * connection sends and the target's answers: listener_conn.c.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "net/arena.h"
#include "net/sockio.h"
#include "net/listener.h"
#include "net/listener_int.h"
#include "model/hparams.h"
#include "base/util.h"
#include "net/wire.h"


/* ----------------------------------------------------------------- arena */

void *zs_listener_alloc(struct zs_listener *l, size_t bytes)
{
	uint64_t off, dirty;
	void *p = NULL;

	pthread_mutex_lock(&l->mu);
	if (zs_arena_take(&l->ar.map, bytes, &off, &dirty)) {
		p = l->ar.base + off;
		if (dirty) /* bytes of a buffer given back: zeroed */
			memset(p, 0, dirty);
	}
	pthread_mutex_unlock(&l->mu);
	return p;
}

void zs_listener_release(struct zs_listener *l, void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&l->mu);
	if ((uint8_t *)p < l->ar.base || (uint8_t *)p >= l->ar.base + l->ar.len ||
	    !zs_arena_give(&l->ar.map, (uint64_t)((uint8_t *)p - l->ar.base)))
		zs_error("data plane: a buffer given back to the arena was not taken from it (bug)");
	pthread_mutex_unlock(&l->mu);
}

void zs_listener_arena(struct zs_listener *l, uint64_t *len, uint64_t *taken, uint64_t *largest)
{
	pthread_mutex_lock(&l->mu);
	*len = l->ar.map.len;
	*taken = l->ar.map.taken;
	*largest = zs_arena_largest(&l->ar.map);
	pthread_mutex_unlock(&l->mu);
}

static enum zs_status check_xfer(const struct zs_frame *f, struct zs_xfer *x,
				 struct zs_error *err)
{
	unsigned dsz = zs_dtype_size((enum zs_dtype)f->dtype);

	if (!dsz)
		return zs_fail(err, ZS_EINVAL, "unknown dtype %u", f->dtype);
	if (f->length == 0 || f->length > ZS_MAX_NUMEL || f->offset > ZS_MAX_NUMEL)
		return zs_fail(err, ZS_EINVAL, "bad range: offset %llu length %llu",
			       (unsigned long long)f->offset,
			       (unsigned long long)f->length);
	*x = (struct zs_xfer){.unit = f->unit, .offset = f->offset, .length = f->length,
			      .step = f->step, .dtype = (enum zs_dtype)f->dtype,
			      .partial = f->flags & ZS_WF_PARTIAL,
			      .init = f->flags & ZS_WF_INIT,
			      .replica = f->flags & ZS_WF_REPLICA,
			      .seed = (f->flags & ZS_WF_SEED) && (f->flags & ZS_WF_REPLICA),
			      .catchup = (f->flags & ZS_WF_CATCHUP) && (f->flags & ZS_WF_SEED) &&
					 (f->flags & ZS_WF_REPLICA),
			      .with_prev = (f->flags & ZS_WF_PREV) && (f->flags & ZS_WF_SEED) &&
					   (f->flags & ZS_WF_REPLICA),
			      .if_empty = (f->flags & ZS_WF_EMPTY) && (f->flags & ZS_WF_SEED) &&
					  (f->flags & ZS_WF_REPLICA) && !(f->flags & ZS_WF_CATCHUP),
			      .epoch = (f->flags & ZS_WF_REPLICA) ? f->aux : 0,
			      .from = f->rank,
			      .state_read = f->flags & ZS_WF_STATE,
			      .state = (f->flags & ZS_WF_STATE) ? (int)(f->aux & 3) : -1,
			      .device = f->op == ZS_OP_PUSH && (f->flags & ZS_WF_DEVICE),
			      /* (a one-sided push's PUSH_BEGIN says it: its slot
			       * keeps this xfer for the PUSH that fills it) */
			      .redo = (f->op == ZS_OP_PUSH || f->op == ZS_OP_PUSH_BEGIN) &&
				      (f->flags & ZS_WF_REDO),
			      .pinned = f->op == ZS_OP_GATHER && (f->flags & ZS_WF_PIN),
			      .timeline = f->op == ZS_OP_GATHER && (f->flags & ZS_WF_PIN) ? f->aux : 0};
	if ((f->flags & ZS_WF_CATCHUP) && !x->catchup)
		return zs_fail(err, ZS_EINVAL, "a catch-up is a replica's seed (flags REPLICA and SEED)");
	if ((f->flags & ZS_WF_PREV) && !x->with_prev)
		return zs_fail(err, ZS_EINVAL,
			       "the step before's parameters go with a replica's seed (flags REPLICA and SEED)");
	if ((f->flags & ZS_WF_EMPTY) && !x->if_empty)
		return zs_fail(err, ZS_EINVAL,
			       "a seed sent again is a replica's seed, not a catch-up (flags REPLICA and SEED)");
	if (x->state_read && (f->aux > 2 || f->dtype != ZS_F32))
		return zs_fail(err, ZS_EINVAL, "a state read is of array 0, 1 or 2, as f32");
	if (f->op == ZS_OP_PUSH && x->state_read && (!x->init || x->replica || f->aux == 0))
		return zs_fail(err, ZS_EINVAL,
			       "a push of state is an initial upload of optimizer array 1 or 2 (flags INIT and STATE)");
	if (x->seed) { /* its state's run above the epoch */
		x->epoch = f->aux & 0xffffffffu;
		x->timeline = f->aux >> 32;
	} else if (x->partial && x->replica) { /* a forwarded partial push */
		x->epoch = f->aux & 0xffffffffu;
		x->micro = (uint32_t)(f->aux >> 32);
	} else if (x->partial && !x->replica) {
		x->micro = (uint32_t)f->aux;
	}
	return ZS_OK;
}

/* Handles one frame; nonzero ends the connection. */
/* A push whose payload went into the arena slot its PUSH_BEGIN took (a
 * peer that addresses the arena): the slot's, done. */
static int on_push_slot(struct zs_lconn *c, const struct zs_frame *f)
{
	struct zs_listener *l = c->l;

	pthread_mutex_lock(&c->sl.mu);
	for (size_t i = 0; i < c->sl.n; i++) {
		struct slot s = c->sl.v[i];
		struct zs_sop *op;
		if (s.req_id != f->req_id)
			continue;
		c->sl.v[i] = c->sl.v[--c->sl.n];
		pthread_mutex_unlock(&c->sl.mu);
		if (!(op = lsn_new_sop(c, f, &s.x, s.t0)))
			return -1;
		l->t.write_done(l->t.ctx, op, c->job, c->rank, &s.x, s.dst);
		return 0;
	}
	pthread_mutex_unlock(&c->sl.mu);
	lsn_send_error(c, f->req_id, ZS_EPROTO, "PUSH without PUSH_BEGIN");
	return -1;
}

/* A push with its payload on the stream: straight into the target's
 * landing buffer, no intermediate copy, in pieces the target may reduce
 * as they land. */
static int on_push(struct zs_lconn *c, const struct zs_frame *f, struct zs_xfer *x, int64_t t0)
{
	struct zs_listener *l = c->l;
	struct zs_error err = {0};
	struct zs_sop *op;
	void *dst;

	if (f->payload_len != x->length * zs_dtype_size(x->dtype)) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "PUSH payload size does not match its range");
		return -1;
	}
	if (lsn_begin_write(c, x, &dst, &err)) {
		if (zs_io_drain(&c->io, f->payload_len))
			return -1;
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return 0;
	}
	for (uint64_t got = 0; got < f->payload_len;) {
		uint64_t k = f->payload_len - got < (1u << 20) ? f->payload_len - got : (1u << 20);
		if (zs_io_read(&c->io, (uint8_t *)dst + got, k)) {
			l->t.write_abort(l->t.ctx, c->job, c->rank, x, dst);
			return -1;
		}
		got += k;
		if (l->t.write_progress && got < f->payload_len)
			l->t.write_progress(l->t.ctx, c->job, c->rank, x, dst, got);
	}
	if (!(op = lsn_new_sop(c, f, x, t0)))
		return -1;
	l->t.write_done(l->t.ctx, op, c->job, c->rank, x, dst);
	return 0;
}

/* A peer that addresses the arena asks for a landing buffer: its offset
 * in the arena, kept as a slot until the PUSH that fills it. */
static int on_push_begin(struct zs_lconn *c, const struct zs_frame *f, struct zs_xfer *x,
			 int64_t t0)
{
	struct zs_listener *l = c->l;
	struct zs_frame r = {.op = ZS_OP_PUSH_SLOT, .req_id = f->req_id, .job = c->job};
	struct zs_error err = {0};
	struct slot *g;
	void *dst;

	if (!(c->offsets) || f->payload_len) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "PUSH_BEGIN is for peers that address the arena");
		return -1;
	}
	if (lsn_begin_write(c, x, &dst, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return 0;
	}
	pthread_mutex_lock(&c->sl.mu);
	g = realloc(c->sl.v, (c->sl.n + 1) * sizeof *g);
	if (g) {
		c->sl.v = g;
		g[c->sl.n++] = (struct slot){f->req_id, *x, dst, t0};
	}
	pthread_mutex_unlock(&c->sl.mu);
	if (!g) {
		l->t.write_abort(l->t.ctx, c->job, c->rank, x, dst);
		return -1;
	}
	r.aux = (uint64_t)((uint8_t *)dst - l->ar.base);
	return lsn_send_frame(c, &r, NULL, 0, -1);
}

/* A reader's frames: a PIN, answered here, or a read of a pinned version
 * (the target's), from a connection that proved the reader token alone,
 * over tcp (its bytes travel in the frames), or addressing the arena
 * where the target keeps its pinned copies there. */
static int on_reader(struct zs_lconn *c, const struct zs_frame *f, int64_t t0)
{
	struct zs_listener *l = c->l;
	struct zs_frame r = {.op = ZS_OP_PIN_OK, .req_id = f->req_id, .job = c->job};
	struct zs_pin_ans ans = {0};
	struct zs_error err = {0};
	struct zs_xfer x;
	struct zs_sop *op;

	if (f->payload_len) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "a reader's frame with a payload");
		return -1;
	}
	if (!c->reader)
		zs_fail(&err, ZS_EPERM,
			"pinned versions are a reader's: this connection proved the job's token, not its reader token (a reader's credential)");
	else if (c->offsets && !l->t.pins_in_arena)
		zs_fail(&err, ZS_EINVAL, "pinned versions are read over tcp");
	else if (!l->t.pin)
		zs_fail(&err, ZS_EINVAL, "this server keeps no pinned versions");
	else if (f->op == ZS_OP_GATHER)
		check_xfer(f, &x, &err);
	if (!err.code && f->op == ZS_OP_GATHER) {
		if (!(op = lsn_new_sop(c, f, &x, t0)))
			return -1;
		l->t.read(l->t.ctx, op, c->job, c->rank, &x);
		return 0;
	}
	if (!err.code && l->t.pin(l->t.ctx, c->job, f->step, (uint32_t)f->aux, &ans, &err) == ZS_OK) {
		r.step = ans.step;
		r.offset = ans.lo;
		r.length = ans.hi;
		r.aux = ans.timeline;
		return lsn_send_frame(c, &r, NULL, 0, -1);
	}
	lsn_send_error(c, f->req_id, err.code ? err.code : ZS_EINTERNAL, err.msg);
	return 0;
}

static int handle(struct zs_lconn *c, const struct zs_frame *f)
{
	struct zs_listener *l = c->l;
	struct zs_error err = {0};
	struct zs_xfer x;
	struct zs_sop *op;
	int64_t t0 = zs_now_ns();

	if (f->op == ZS_OP_HELLO)
		return lsn_on_hello(c, f);
	if (f->op == ZS_OP_STARTTLS)
		return lsn_on_starttls(c, f);
	if (l->path && f->op == l->path->control_op)
		return lsn_on_control(c, f);
	if (!c->hello || f->job != c->job) {
		lsn_send_error(c, f->req_id, ZS_EPROTO,
			   c->hello ? "frame for another job" : "HELLO first");
		return -1;
	}
	if (f->op == ZS_OP_PIN || (f->op == ZS_OP_GATHER && (f->flags & ZS_WF_PIN)))
		return on_reader(c, f, t0);
	if (c->reader && f->op != ZS_OP_GATHER) {
		/* a reader's connection: nothing it sends changes the job */
		if (f->payload_len > ((uint64_t)1 << 40) || zs_io_drain(&c->io, f->payload_len))
			return -1;
		lsn_send_error(c, f->req_id, ZS_EPERM,
			       "this connection proved the job's reader token (a reader's certificate): it may gather, not push nor set a step's hyperparameters or world");
		return 0;
	}
	if (f->op == ZS_OP_HPARAMS)
		return lsn_on_hparams(c, f);
	if (f->op == ZS_OP_WORLD)
		return lsn_on_world(c, f);
	if (check_xfer(f, &x, &err)) {
		/* keep the stream in step if the payload is sane, else drop it */
		if (f->payload_len > ((uint64_t)1 << 40) || zs_io_drain(&c->io, f->payload_len))
			return -1;
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return 0;
	}
	switch (f->op) {
	case ZS_OP_GATHER:
		if (f->payload_len) {
			lsn_send_error(c, f->req_id, ZS_EPROTO, "GATHER with a payload");
			return -1;
		}
		op = lsn_new_sop(c, f, &x, t0);
		if (!op)
			return -1;
		l->t.read(l->t.ctx, op, c->job, c->rank, &x);
		return 0;
	case ZS_OP_PUSH:
		if (x.device)
			return lsn_on_device_push(c, f, &x, t0);
		return c->offsets ? on_push_slot(c, f) : on_push(c, f, &x, t0);
	case ZS_OP_PUSH_BEGIN:
		return on_push_begin(c, f, &x, t0);
	default:
		lsn_send_error(c, f->req_id, ZS_EPROTO, "unexpected frame op");
		return -1;
	}
}

static void *conn_main(void *arg)
{
	struct zs_lconn *c = arg;
	uint8_t h[ZS_WIRE_HDR];
	struct zs_frame f = {.op = ZS_OP_NONCE, .payload_len = ZS_NONCE_LEN};
	struct zs_error err = {0};

	/* a peer the endpoint refuses is told why */
	if (c->ep->peer_ok) {
		char why[ZS_ERRMSG_MAX];
		if (!c->ep->peer_ok(c->io.fd, why)) {
			zs_warn("data plane: refused a %s peer: %s", c->ep->name, why);
			lsn_send_error(c, 0, ZS_EINVAL, why);
			goto out;
		}
	}
	/* the server speaks first: the nonce this connection's HELLO proves
	 * the token over (net/hello.h) */
	if (zs_hello_nonce(c->nonce) || lsn_send_frame(c, &f, c->nonce, ZS_NONCE_LEN, -1))
		goto out;
	while (zs_io_read(&c->io, h, sizeof h) == 0) {
		if (zs_wire_decode(h, &f, &err)) {
			zs_warn("data plane: dropping a connection: %s", err.msg);
			lsn_send_error(c, 0, ZS_EPROTO, err.msg);
			break;
		}
		if (handle(c, &f))
			break;
	}
out:
	pthread_mutex_lock(&c->wmu);
	c->dead = true;
	shutdown(c->io.fd, SHUT_RDWR);
	pthread_mutex_unlock(&c->wmu);
	/* no notification reaches this connection after the path lets it go */
	if (c->pth.state)
		c->l->path->conn_end(c->l->pctx, c->pth.state);
	c->pth.state = NULL;
	pthread_mutex_lock(&c->sl.mu);
	for (size_t i = 0; i < c->sl.n; i++)
		c->l->t.write_abort(c->l->t.ctx, c->job, c->rank, &c->sl.v[i].x,
				    c->sl.v[i].dst);
	c->sl.n = 0;
	pthread_mutex_unlock(&c->sl.mu);
	lsn_dev_conn_end(c);
	if (c->hello && c->l->t.bye)
		c->l->t.bye(c->l->t.ctx, c->job, c->rank, c->reconnects, c->session);
	atomic_store(&c->ended, true);
	return NULL;
}

/*
 * Joins the threads of connections that ended and drops the list's
 * reference (the socket closes with the last one: an operation still held
 * by the target keeps it). Without this a server kept a socket, a thread's
 * stack and the connection's memory for every connection it ever took, to
 * its stop (the data-plane fuzzer ran it out of descriptors in seconds).
 */
static void reap_ended(struct zs_listener *l)
{
	struct zs_lconn *done = NULL, **pp, *c;

	pthread_mutex_lock(&l->mu);
	for (pp = &l->conns; (c = *pp);) {
		if (atomic_load(&c->ended)) {
			*pp = c->next;
			c->next = done;
			done = c;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&l->mu);
	while ((c = done)) {
		done = c->next;
		pthread_join(c->th, NULL);
		lsn_conn_unref(c);
	}
}

static void *accept_main(void *arg)
{
	struct zs_listener *l = arg;

	while (!atomic_load(&l->stop)) {
		struct pollfd p[ZS_LISTEN_MAX];
		reap_ended(l);
		for (int i = 0; i < l->n_fds; i++)
			p[i] = (struct pollfd){.fd = l->fds[i], .events = POLLIN};
		if (poll(p, (nfds_t)l->n_fds, 100) <= 0)
			continue;
		for (int i = 0; i < l->n_fds; i++) {
			struct zs_lconn *c;
			int fd;
			if (!(p[i].revents & POLLIN))
				continue;
			fd = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			c = calloc(1, sizeof *c);
			if (!c) {
				close(fd);
				continue;
			}
			if (l->eps[i]->accepted)
				l->eps[i]->accepted(fd);
			c->l = l;
			c->io.fd = fd;
			c->ep = l->eps[i];
			c->offsets = c->ep->offsets;
			c->obs.fn = l->obs.fn;
			c->obs.ctx = l->obs.ctx;
			c->pth.name = l->path ? l->path->name : NULL;
			atomic_init(&c->refs, 1);
			pthread_mutex_init(&c->wmu, NULL);
			pthread_mutex_init(&c->sl.mu, NULL);
			if (pthread_create(&c->th, NULL, conn_main, c)) {
				close(fd);
				free(c);
				continue;
			}
			pthread_mutex_lock(&l->mu);
			c->next = l->conns;
			l->conns = c;
			pthread_mutex_unlock(&l->mu);
		}
	}
	return NULL;
}

static void close_fds(struct zs_listener *l)
{
	for (int i = 0; i < l->n_fds; i++)
		close(l->fds[i]);
	l->n_fds = 0;
}

enum zs_status zs_listener_start(const struct zs_listener_opts *o,
				 const struct zs_target *t, struct zs_listener **out,
				 struct zs_error *err)
{
	struct zs_listener *l = calloc(1, sizeof *l);
	enum zs_status st = ZS_OK;

	if (!l)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	l->t = *t;
	l->ar.fd = -1;
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_init(&l->nt.mu, NULL);
	pthread_cond_init(&l->nt.cv, NULL);
	pthread_mutex_init(&l->kick.mu, NULL);
	pthread_cond_init(&l->kick.cv, NULL);
	l->kick.wait_ms = o->wait_ms ? o->wait_ms : 60000;
	l->obs.fn = o->observe;
	l->obs.ctx = o->observe_ctx;
	l->ar.len = (o->arena_bytes + 4095) & ~(uint64_t)4095;
	zs_arena_map_init(&l->ar.map, l->ar.len);
	/* memfd pages are only allocated when touched: the arena is a reservation */
	l->ar.fd = memfd_create("zshard-arena", MFD_CLOEXEC);
	if (l->ar.fd < 0 || ftruncate(l->ar.fd, (off_t)l->ar.len)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot create the shard arena: %s", strerror(errno));
		goto fail;
	}
	l->ar.base = mmap(NULL, l->ar.len ? l->ar.len : 4096, PROT_READ | PROT_WRITE,
			MAP_SHARED, l->ar.fd, 0);
	if (l->ar.base == MAP_FAILED) {
		l->ar.base = NULL;
		st = zs_fail(err, ZS_ENOMEM, "cannot map the shard arena: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < ZS_LISTEN_MAX && o->at[i].ops; i++) {
		const struct zs_listen_at *at = &o->at[i];
		int fd = at->ops->listen(at->addr, at->bound, err);
		if (fd < 0) {
			st = err ? err->code : ZS_EUNAVAIL;
			goto fail;
		}
		l->eps[l->n_fds] = at->ops;
		l->fds[l->n_fds++] = fd;
	}
	if (o->path) {
		if ((st = o->path->open(l->ar.base, l->ar.len, &l->pctx, err)))
			goto fail;
		l->path = o->path;
		if ((st = lsn_start_workers(l, err)))
			goto fail;
	}
	if (pthread_create(&l->accept_th, NULL, accept_main, l)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot start the accept thread");
		goto fail;
	}
	*out = l;
	return ZS_OK;
fail:
	if (l->path) /* no connection uses it yet */
		l->path->close(l->pctx);
	lsn_stop_workers(l);
	pthread_cond_destroy(&l->nt.cv);
	pthread_mutex_destroy(&l->nt.mu);
	pthread_cond_destroy(&l->kick.cv);
	pthread_mutex_destroy(&l->kick.mu);
	close_fds(l);
	if (l->ar.base)
		munmap(l->ar.base, l->ar.len ? l->ar.len : 4096);
	if (l->ar.fd >= 0)
		close(l->ar.fd);
	pthread_mutex_destroy(&l->mu);
	free(l);
	return st;
}

void zs_listener_end_job(struct zs_listener *l, uint32_t job)
{
	pthread_mutex_lock(&l->mu);
	for (struct zs_lconn *c = l->conns; c; c = c->next) {
		if (c->job != job)
			continue;
		/* the list's reference keeps c->io.fd open until the stop */
		pthread_mutex_lock(&c->wmu);
		c->dead = true;
		shutdown(c->io.fd, SHUT_RDWR);
		pthread_mutex_unlock(&c->wmu);
	}
	pthread_mutex_unlock(&l->mu);
}

void zs_listener_stop(struct zs_listener *l)
{
	struct zs_lconn *c, *next;

	if (!l || l->stopped)
		return;
	l->stopped = true;
	atomic_store(&l->stop, 1);
	pthread_join(l->accept_th, NULL);
	close_fds(l);
	for (c = l->conns; c; c = next) {
		next = c->next;
		pthread_mutex_lock(&c->wmu);
		c->dead = true;
		shutdown(c->io.fd, SHUT_RDWR);
		pthread_mutex_unlock(&c->wmu);
		pthread_join(c->th, NULL);
		lsn_conn_unref(c);
	}
	l->conns = NULL;
	if (l->path) /* after the connections let it go */
		l->path->close(l->pctx);
	l->path = NULL;
	lsn_stop_workers(l);
}

void zs_listener_free(struct zs_listener *l)
{
	if (!l)
		return;
	zs_listener_stop(l);
	pthread_cond_destroy(&l->nt.cv);
	pthread_mutex_destroy(&l->nt.mu);
	pthread_cond_destroy(&l->kick.cv);
	pthread_mutex_destroy(&l->kick.mu);
	munmap(l->ar.base, l->ar.len ? l->ar.len : 4096);
	close(l->ar.fd);
	zs_arena_map_release(&l->ar.map);
	pthread_mutex_destroy(&l->mu);
	free(l);
}
