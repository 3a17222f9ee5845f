/*
 * relay.c - a weight reader's relay (see relay.h): a data-plane target
 * (net/listener.h) serving the copies of its pinned version from the
 * listener's arena, requests for tensors not read yet kept until they are
 * (or until the parent stalls) and then sent by a pool's threads (never by
 * the reader's, which reads on meanwhile), and the child's side.
 */
#include "client/relay.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "base/util.h"
#include "net/dtls.h"
#include "net/hello.h"
#include "net/listener.h"
#include "rdma/rdma.h"

/* A parent whose own reads add nothing for this long while a child waits
 * does not read what the child asks for: the child reads it from the
 * servers. */
#define STALL_MS 3000
#define RELAY_JOB 1 /* the handle of the one job a relay serves */
#define RELAY_SENDERS 8 /* threads sending tensors kept to children waiting */

struct rtens {
	uint8_t *b; /* in the arena */
	size_t len;
	uint32_t crc;
	bool have;
};

/* A child's request for a tensor the parent has not read yet. */
struct rwait {
	struct zs_sop *op;
	uint32_t i;
	uint64_t step, timeline;
	int64_t since;
	struct rwait *next;
};

struct relay {
	struct zs_listener *l;
	struct zs_pool *send;
	pthread_t tick_th;
	char job[ZS_JOB_NAME_MAX];
	char token[ZS_TOKEN_MAX];
	bool tls;
	int timeout_ms;
	struct relay_tensor *ts;
	atomic_uint_fast64_t served;
	pthread_mutex_t mu; /* all below */
	pthread_cond_t cv;
	bool stop;
	uint64_t step;
	/* the run of the pinned step, as the registry labelled it (0: not yet
	 * answered, or a checkpoint's): the same step number before and
	 * after a rollback is two versions, and a child of the other run is
	 * refused, never served the other's bytes */
	uint64_t timeline;
	bool held;
	uint32_t n, busy;    /* tensors; tcp sends from the copy under way */
	int64_t grew_ms;     /* the last relay_put */
	struct rtens *t;
	struct rwait *waits;
};

/* Answers op with tensor t (caller counted it in busy). */
static void serve(struct relay *rl, struct zs_sop *op, const struct rtens *t)
{
	zs_sop_set_aux(op, t->crc);
	zs_sop_read_ready(op, t->b);
	pthread_mutex_lock(&rl->mu);
	rl->busy--;
	pthread_cond_broadcast(&rl->cv);
	pthread_mutex_unlock(&rl->mu);
}

/* A request answered from a pool's thread. */
struct rserve {
	struct relay *rl;
	struct zs_sop *op;
	struct rtens t;
};

static void serve_task(void *arg)
{
	struct rserve *s = arg;

	serve(s->rl, s->op, &s->t);
	free(s);
}

/* Fails every request in list with code and why. */
static void fail_all(struct rwait *list, enum zs_status code, const char *why)
{
	for (struct rwait *w; (w = list);) {
		list = w->next;
		zs_sop_fail(w->op, code, "%s", why);
		free(w);
	}
}

/* ---------------------------------------------------------- the copy */

void relay_version(struct relay *rl, uint64_t step, bool held)
{
	struct rwait *gone = NULL;

	if (!rl)
		return;
	pthread_mutex_lock(&rl->mu);
	while (rl->busy) /* a child being sent the version that goes */
		pthread_cond_wait(&rl->cv, &rl->mu);
	/* a new pin is a new version, even of the same step: after a
	 * rollback its bytes are another run's */
	for (uint32_t i = 0; i < rl->n; i++) {
		zs_listener_release(rl->l, rl->t[i].b);
		rl->t[i] = (struct rtens){0};
	}
	rl->step = step;
	rl->timeline = 0;
	rl->held = held;
	rl->grew_ms = zs_now_ms();
	/* requests for another version: not here */
	for (struct rwait **pp = &rl->waits; *pp;) {
		struct rwait *w = *pp;
		if (held && w->step == step) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->next = gone;
		gone = w;
	}
	pthread_mutex_unlock(&rl->mu);
	fail_all(gone, ZS_ENOTFOUND, "the relay moved on to another version");
}

void relay_timeline(struct relay *rl, uint64_t step, uint64_t timeline)
{
	struct rwait *gone = NULL;

	if (!rl)
		return;
	pthread_mutex_lock(&rl->mu);
	if (rl->step == step)
		rl->timeline = timeline;
	for (struct rwait **pp = &rl->waits; *pp;) {
		struct rwait *w = *pp;
		if (!w->timeline || !rl->timeline || w->timeline == rl->timeline) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->next = gone;
		gone = w;
	}
	pthread_mutex_unlock(&rl->mu);
	fail_all(gone, ZS_ENOTFOUND, "the relay holds that step of another run (a rollback came between)");
}

void relay_put(struct relay *rl, uint32_t i, const void *bytes, size_t len, uint32_t crc)
{
	struct rwait *due = NULL;
	struct rtens t;
	uint8_t *b;

	/* no room: the children read it from the servers */
	if (!rl || i >= rl->n || !(b = zs_listener_alloc(rl->l, len ? len : 1)))
		return;
	memcpy(b, bytes, len);
	pthread_mutex_lock(&rl->mu);
	if (rl->t[i].have || !rl->held) {
		zs_listener_release(rl->l, b);
		pthread_mutex_unlock(&rl->mu);
		return;
	}
	t = rl->t[i] = (struct rtens){b, len, crc, true};
	rl->grew_ms = zs_now_ms();
	for (struct rwait **pp = &rl->waits; *pp;) {
		struct rwait *w = *pp;
		if (w->i != i || w->step != rl->step) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->next = due;
		due = w;
		rl->busy++;
	}
	pthread_mutex_unlock(&rl->mu);
	for (struct rwait *w; (w = due);) {
		struct rserve *s = malloc(sizeof *s);
		due = w->next;
		if (s)
			*s = (struct rserve){rl, w->op, t};
		if (!s || !zs_pool_submit(rl->send, serve_task, s)) {
			free(s);
			serve(rl, w->op, &t); /* no thread to send it: here */
		}
		free(w);
	}
}

uint64_t relay_served(const struct relay *rl) { return rl ? atomic_load(&rl->served) : 0; }

/* Fails the requests that waited past the stall bound or the relay's own
 * bound, every 50 ms until the relay stops. */
static void *tick_main(void *arg)
{
	struct relay *rl = arg;

	pthread_mutex_lock(&rl->mu);
	while (!rl->stop) {
		struct timespec ts = zs_deadline_in(50);
		struct rwait *late = NULL;
		int64_t now = zs_now_ms();
		pthread_cond_timedwait(&rl->cv, &rl->mu, &ts);
		for (struct rwait **pp = &rl->waits; *pp;) {
			struct rwait *w = *pp;
			/* stalled: nothing new since the later of the request
			 * and the last tensor kept (a parent that pinned long
			 * ago and reads now is not one) */
			int64_t moved = rl->grew_ms > w->since ? rl->grew_ms : w->since;
			if (now - moved <= STALL_MS && now - w->since <= rl->timeout_ms) {
				pp = &w->next;
				continue;
			}
			*pp = w->next;
			w->next = late;
			late = w;
		}
		if (late) {
			pthread_mutex_unlock(&rl->mu);
			fail_all(late, ZS_ETIMEDOUT, "the relay does not read the tensor");
			pthread_mutex_lock(&rl->mu);
		}
	}
	pthread_mutex_unlock(&rl->mu);
	return NULL;
}

/* ------------------------------------------------- the data-plane target */

static enum zs_status t_hello(void *ctx, const struct zs_hello *h, uint32_t *job,
			      struct zs_error *err)
{
	struct relay *rl = ctx;

	if (strcmp(h->job, rl->job))
		return zs_fail(err, ZS_EINVAL, "this relay serves job '%s', not '%s'", rl->job,
			       h->job);
	if (!h->reader || !zs_hello_proves(h, rl->token))
		return zs_fail(err, ZS_EPERM,
			       "job '%s': the HELLO does not prove the job's reader token (a relay serves readers alone)",
			       rl->job);
	*h->reader = true;
	if (rl->tls && !h->covered)
		return zs_fail(err, ZS_EPERM,
			       "job '%s' encrypts its data plane (data_tls): this connection to its relay is not encrypted",
			       rl->job);
	*job = RELAY_JOB;
	return ZS_OK;
}

static enum zs_status t_tls_key(void *ctx, const char *job, bool reader, uint8_t key[32],
				struct zs_error *err)
{
	struct relay *rl = ctx;

	if (!reader || strcmp(job, rl->job))
		return zs_fail(err, ZS_EINVAL, "this relay serves job '%s' to its readers alone",
			       rl->job);
	if (zs_dtls_psk(rl->token, rl->job, true, key))
		return zs_fail(err, ZS_ENOMEM, "cannot derive the handshake's key (OpenSSL)");
	return ZS_OK;
}

static void t_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		   const struct zs_xfer *x)
{
	struct relay *rl = ctx;
	struct rwait *w = NULL;
	struct rtens t = {0};
	uint32_t i = 0;

	(void)job;
	(void)rank;
	while (i < rl->n && (rl->ts[i].unit != x->unit || rl->ts[i].offset != x->offset ||
			     rl->ts[i].numel != x->length || rl->ts[i].dt != x->dtype))
		i++;
	if (!x->pinned || i == rl->n) {
		zs_sop_fail(op, ZS_EINVAL,
			    "unit %u [%llu, +%llu) is no tensor of the version this relay serves",
			    x->unit, (unsigned long long)x->offset, (unsigned long long)x->length);
		return;
	}
	pthread_mutex_lock(&rl->mu);
	if (rl->stop || !rl->held || rl->step != x->step) {
		pthread_mutex_unlock(&rl->mu);
		zs_sop_fail(op, ZS_ENOTFOUND, "the relay holds another version");
		return;
	}
	if (x->timeline && rl->timeline && x->timeline != rl->timeline) {
		pthread_mutex_unlock(&rl->mu);
		zs_sop_fail(op, ZS_ENOTFOUND,
			    "the relay holds step %llu of another run (timeline %llu, not %llu)",
			    (unsigned long long)x->step, (unsigned long long)rl->timeline,
			    (unsigned long long)x->timeline);
		return;
	}
	if (rl->t[i].have) {
		t = rl->t[i];
		rl->busy++;
	} else if ((w = calloc(1, sizeof *w))) {
		*w = (struct rwait){op, i, x->step, x->timeline, zs_now_ms(), rl->waits};
		rl->waits = w;
	}
	pthread_mutex_unlock(&rl->mu);
	if (t.have)
		serve(rl, op, &t);
	else if (!w)
		zs_sop_fail(op, ZS_ENOMEM, "out of memory");
}

static enum zs_status t_pin(void *ctx, uint32_t job, uint64_t step, uint32_t verb,
			    struct zs_pin_ans *ans, struct zs_error *err)
{
	(void)ctx, (void)job, (void)step, (void)verb, (void)ans;
	return zs_fail(err, ZS_EINVAL, "a relay holds the version its reader pinned: read it");
}

static enum zs_status t_write_begin(void *ctx, uint32_t job, uint32_t rank,
				    const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	(void)ctx, (void)job, (void)rank, (void)x, (void)dst;
	return zs_fail(err, ZS_EPERM, "a relay takes no writes");
}

static void t_write_done(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			 const struct zs_xfer *x, void *dst)
{
	(void)ctx, (void)job, (void)rank, (void)x, (void)dst;
	zs_sop_fail(op, ZS_EPERM, "a relay takes no writes");
}

static void t_write_abort(void *ctx, uint32_t job, uint32_t rank, const struct zs_xfer *x,
			  void *dst)
{
	(void)ctx, (void)job, (void)rank, (void)x, (void)dst;
}

static enum zs_status t_hparams(void *ctx, uint32_t job, uint32_t rank, uint64_t step,
				const uint8_t *payload, size_t len, struct zs_error *err)
{
	(void)ctx, (void)job, (void)rank, (void)step, (void)payload, (void)len;
	return zs_fail(err, ZS_EPERM, "a relay takes no hyperparameters");
}

static void observe(void *ctx, const char *transport, bool push, uint64_t bytes,
		    double seconds, bool ok)
{
	struct relay *rl = ctx;

	(void)transport, (void)seconds;
	if (ok && !push)
		atomic_fetch_add(&rl->served, bytes);
}

enum zs_status relay_start(const char *listen_addr, const char *job, const char *token,
			   bool tls, const struct relay_tensor *ts, uint32_t n, int timeout_ms,
			   struct relay **out, char *addr, struct zs_error *err)
{
	struct relay *rl = calloc(1, sizeof *rl);
	uint64_t arena = 1 << 16;
	char note[ZS_ERRMSG_MAX];
	enum zs_status st;

	if (!rl || !(rl->t = calloc(n ? n : 1, sizeof *rl->t)) ||
	    !(rl->ts = calloc(n ? n : 1, sizeof *rl->ts))) {
		if (rl)
			free(rl->t);
		free(rl);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	if (n)
		memcpy(rl->ts, ts, n * sizeof *ts);
	/* room for one version, each tensor 4 KiB aligned */
	for (uint32_t i = 0; i < n; i++)
		arena += (ts[i].numel * zs_dtype_size(ts[i].dt) + 4095) / 4096 * 4096;
	snprintf(rl->job, sizeof rl->job, "%s", job);
	snprintf(rl->token, sizeof rl->token, "%s", token);
	rl->tls = tls;
	rl->n = n;
	rl->timeout_ms = timeout_ms;
	pthread_mutex_init(&rl->mu, NULL);
	pthread_cond_init(&rl->cv, NULL);
	static const struct zs_target tg = {
		.hello = t_hello, .tls_key = t_tls_key, .read = t_read, .pin = t_pin,
		.pins_in_arena = true, .write_begin = t_write_begin, .write_done = t_write_done,
		.write_abort = t_write_abort, .hparams = t_hparams};
	struct zs_target t = tg;
	t.ctx = rl;
	struct zs_listener_opts lo = {
		.at = {{&zs_tcp_endpoint, listen_addr, addr}},
		.path = zs_rdma_probe(arena, note, sizeof note) ? NULL : &zs_rdma_path,
		.arena_bytes = arena, .observe = observe, .observe_ctx = rl};
	st = zs_listener_start(&lo, &t, &rl->l, err);
	if (st && lo.path) { /* registering the arena failed: tcp alone */
		lo.path = NULL;
		*err = (struct zs_error){0};
		st = zs_listener_start(&lo, &t, &rl->l, err);
	}
	if (!st && !(rl->send = zs_pool_new("zs-relay", RELAY_SENDERS)))
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	if (!st && pthread_create(&rl->tick_th, NULL, tick_main, rl))
		st = zs_fail(err, ZS_ENOMEM, "cannot start the relay's thread");
	if (st) {
		zs_pool_free(rl->send);
		zs_listener_free(rl->l);
		pthread_mutex_destroy(&rl->mu);
		pthread_cond_destroy(&rl->cv);
		free(rl->ts);
		free(rl->t);
		free(rl);
		return st;
	}
	*out = rl;
	return ZS_OK;
}

void relay_stop(struct relay *rl)
{
	struct rwait *left;

	if (!rl)
		return;
	pthread_mutex_lock(&rl->mu);
	rl->stop = true;
	left = rl->waits;
	rl->waits = NULL;
	pthread_cond_broadcast(&rl->cv);
	pthread_mutex_unlock(&rl->mu);
	pthread_join(rl->tick_th, NULL);
	fail_all(left, ZS_EUNAVAIL, "the relay stops");
	zs_pool_free(rl->send); /* the sends queued, done */
	zs_listener_stop(rl->l);
	zs_listener_free(rl->l); /* the copies with the arena */
	pthread_mutex_destroy(&rl->mu);
	pthread_cond_destroy(&rl->cv);
	free(rl->ts);
	free(rl->t);
	free(rl);
}

/* ------------------------------------------------------- the child's side */

enum zs_status relay_dial(const char *addr, const char *job, const char *token, bool tls,
			  int timeout_ms, struct zs_conn **out, struct zs_error *err)
{
	struct zs_conn_opts o = {.addr = addr, .job = job, .token = token, .reader = true,
				 .rank = ZS_RANK_OBSERVER, .timeout_ms = timeout_ms};
	char why[ZS_ERRMSG_MAX];

	*out = NULL;
	/* rdma where this host has a device (not for a job that encrypts its
	 * data plane: as a trainer's transport auto, it leaves rdma's bytes
	 * out); a parent without one refuses the one-sided path, and tcp
	 * serves */
	if (!tls && zs_rdma_transport.available && zs_rdma_transport.available(why, sizeof why) &&
	    zs_connect(&zs_rdma_transport, &o, out, NULL) == ZS_OK)
		return ZS_OK;
	o.tls = tls;
	return zs_connect(&zs_tcp_transport, &o, out, err);
}

enum zs_status relay_fetch(struct zs_conn **c, const struct relay_tensor *t, uint64_t step,
			   uint64_t timeline, void *dst, uint32_t *crc, int timeout_ms,
			   struct zs_error *err)
{
	struct zs_xfer x = {.unit = t->unit, .offset = t->offset, .length = t->numel,
			    .step = step, .dtype = t->dt, .pinned = true, .crc = crc,
			    .timeline = timeline};
	struct zs_req *q;
	enum zs_status st = zs_post_read(*c, &x, dst, &q, err);

	if (st == ZS_EAGAIN)
		st = zs_fail(err, ZS_EUNAVAIL, "the relay's connection is busy");
	if (!st && (st = zs_req_wait(q, timeout_ms, err)) == ZS_EAGAIN)
		st = zs_fail(err, ZS_EUNAVAIL, "the relay did not answer within %d ms", timeout_ms);
	if (st == ZS_EUNAVAIL) { /* closed: the request's buffer is the caller's again */
		zs_conn_close(*c);
		*c = NULL;
	}
	return st;
}
