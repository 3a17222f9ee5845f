/*
 * rpc.c - gRPC core glue (see rpc.h).
 *
 * Server call sequence, per armed call:
 *   request_registered_call -> [new call event: re-arm, run handler]
 *   -> handler answers: one batch SEND_INITIAL_METADATA + SEND_MESSAGE +
 *      SEND_STATUS_FROM_SERVER + RECV_CLOSE_ON_SERVER
 *   -> [batch event: free everything]
 * Shutdown (driven by the CQ thread itself, so re-arming never races it):
 *   shutdown_and_notify + cancel_all_calls -> drain until the shutdown tag
 *   -> grpc_server_destroy -> cq shutdown -> drain to QUEUE_SHUTDOWN.
 */
#include "ctrl/rpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <errno.h>
#include <netdb.h>
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
#include "ctrl/tls.h"

#define ARMED_PER_METHOD 4

enum tag_kind { TAG_NEW_CALL, TAG_UNKNOWN_CALL, TAG_REPLY_DONE, TAG_SHUTDOWN };

struct zs_rpc_call {
	enum tag_kind kind;
	struct zs_rpc_server *srv;
	size_t method; /* index, for TAG_NEW_CALL */
	grpc_call *call;
	gpr_timespec deadline;
	grpc_metadata_array md;
	grpc_call_details details; /* for unknown methods */
	grpc_byte_buffer *payload;
	grpc_byte_buffer *reply;
	int cancelled;
	atomic_int answered;
	int64_t t0_ns; /* when the handler got it (for the observer) */
};

struct zs_rpc_server {
	grpc_server *server;
	grpc_completion_queue *cq;
	const struct zs_rpc_method *methods;
	size_t n_methods;
	void **handles;
	void *ctx;
	pthread_t thread;
	atomic_int stop;
	int shutting_down;
	struct zs_rpc_call shutdown_tag;
	_Atomic(zs_rpc_observe_fn) observe;
	void *observe_ctx;
	_Atomic(zs_rpc_gate_fn) gate;
	void *gate_ctx;
};

/* the trailing metadata key a standby names the leader under */
#define LEADER_MD "zshard-leader"

#define CQ_POOL 8

struct zs_rpc_client {
	grpc_channel *ch;
	char target[256];
	/* idle pluck queues, reused across calls (creating one per call
	 * roughly doubled the latency of a small call) */
	pthread_mutex_t mu;
	grpc_completion_queue *idle[CQ_POOL];
	int n_idle;
};

static void cq_destroy(grpc_completion_queue *cq)
{
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME),
					   NULL).type != GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

static grpc_completion_queue *cq_get(struct zs_rpc_client *c)
{
	grpc_completion_queue *cq = NULL;

	pthread_mutex_lock(&c->mu);
	if (c->n_idle)
		cq = c->idle[--c->n_idle];
	pthread_mutex_unlock(&c->mu);
	return cq ? cq : grpc_completion_queue_create_for_pluck(NULL);
}

static void cq_put(struct zs_rpc_client *c, grpc_completion_queue *cq)
{
	pthread_mutex_lock(&c->mu);
	if (c->n_idle < CQ_POOL) {
		c->idle[c->n_idle++] = cq;
		cq = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (cq)
		cq_destroy(cq);
}

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* gRPC's own log lines go through ours, at debug unless they are errors */
static void grpc_log_fn(gpr_log_func_args *a)
{
	if (a->severity == GPR_LOG_SEVERITY_ERROR)
		zs_warn("grpc: %s", a->message);
	else
		zs_debug("grpc: %s", a->message);
}

static void setup_logging(void) { gpr_set_log_function(grpc_log_fn); }

static void rpc_init(void)
{
	pthread_once(&log_once, setup_logging);
	grpc_init();
}

static grpc_status_code to_grpc(enum zs_status s)
{
	switch (s) {
	case ZS_OK: return GRPC_STATUS_OK;
	case ZS_EINVAL: return GRPC_STATUS_INVALID_ARGUMENT;
	case ZS_ENOTFOUND: return GRPC_STATUS_NOT_FOUND;
	case ZS_EEXIST: return GRPC_STATUS_ALREADY_EXISTS;
	case ZS_ENOSPC: return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case ZS_EUNAVAIL: return GRPC_STATUS_UNAVAILABLE;
	case ZS_ETIMEDOUT: return GRPC_STATUS_DEADLINE_EXCEEDED;
	case ZS_EIO: return GRPC_STATUS_DATA_LOSS;
	case ZS_ENOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
	case ZS_EPROTO: return GRPC_STATUS_INVALID_ARGUMENT;
	case ZS_ESTATE: return GRPC_STATUS_FAILED_PRECONDITION;
	case ZS_ECANCELED: return GRPC_STATUS_CANCELLED;
	case ZS_EAGAIN: return GRPC_STATUS_ABORTED;
	default: return GRPC_STATUS_INTERNAL;
	}
}

static enum zs_status from_grpc(grpc_status_code c)
{
	switch (c) {
	case GRPC_STATUS_OK: return ZS_OK;
	case GRPC_STATUS_INVALID_ARGUMENT:
	case GRPC_STATUS_OUT_OF_RANGE: return ZS_EINVAL;
	case GRPC_STATUS_NOT_FOUND: return ZS_ENOTFOUND;
	case GRPC_STATUS_ALREADY_EXISTS: return ZS_EEXIST;
	case GRPC_STATUS_RESOURCE_EXHAUSTED: return ZS_ENOSPC;
	case GRPC_STATUS_UNAVAILABLE: return ZS_EUNAVAIL;
	case GRPC_STATUS_DEADLINE_EXCEEDED: return ZS_ETIMEDOUT;
	case GRPC_STATUS_DATA_LOSS: return ZS_EIO;
	case GRPC_STATUS_FAILED_PRECONDITION: return ZS_ESTATE;
	case GRPC_STATUS_CANCELLED: return ZS_ECANCELED;
	case GRPC_STATUS_ABORTED: return ZS_EAGAIN;
	case GRPC_STATUS_UNIMPLEMENTED: return ZS_EPROTO;
	default: return ZS_EINTERNAL;
	}
}

static grpc_channel_args *msg_size_args(void)
{
	static grpc_arg a[4];
	static grpc_channel_args args = {4, a};

	a[0].type = GRPC_ARG_INTEGER;
	a[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	a[0].value.integer = (int)ZS_RPC_MAX_MSG;
	a[1].type = GRPC_ARG_INTEGER;
	a[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	a[1].value.integer = (int)ZS_RPC_MAX_MSG;
	/* a peer that comes back (a coordinator restarted, a standby that
	 * now leads) is reached again within a second, not after gRPC's
	 * default backoff of up to two minutes */
	a[2].type = GRPC_ARG_INTEGER;
	a[2].key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
	a[2].value.integer = 1000;
	a[3].type = GRPC_ARG_INTEGER;
	a[3].key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;
	a[3].value.integer = 100;
	return &args;
}

/* A server's: the channel's, and its port its own. gRPC sets SO_REUSEPORT
 * by default, so a second daemon on a port in use bound it too and took
 * half the calls (two coordinators with two catalogs, clients split
 * between them; a server on the coordinator's port calling itself). */
static grpc_channel_args *server_args(void)
{
	static grpc_arg a[5];
	static grpc_channel_args args = {5, a};
	const grpc_channel_args *base = msg_size_args();

	for (size_t i = 0; i < 4; i++)
		a[i] = base->args[i];
	a[4].type = GRPC_ARG_INTEGER;
	a[4].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
	a[4].value.integer = 0;
	return &args;
}

/* Why listen (HOST:PORT) cannot be bound, as bind(2) says it, after gRPC
 * refused it without a reason: "" when a plain bind works (gRPC's reason
 * was another). */
static void bind_reason(const char *host, uint16_t port, char *out, size_t len)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE}, *res = NULL;
	char ps[8];
	int rc;

	out[0] = '\0';
	snprintf(ps, sizeof ps, "%u", port);
	rc = getaddrinfo(host, ps, &hints, &res);
	if (rc) {
		snprintf(out, len, "%s", gai_strerror(rc));
		return;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol), one = 1;
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1)) {
			int e = errno;
			snprintf(out, len, "%s",
				 e == EADDRINUSE ? "the address is in use: another process listens there"
						 : strerror(e));
			close(fd);
			break;
		}
		close(fd);
	}
	freeaddrinfo(res);
}

static grpc_byte_buffer *bb_from(const void *p, size_t len)
{
	grpc_slice s = grpc_slice_from_copied_buffer(p ? p : "", len);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s); /* the buffer took its own reference */
	return bb;
}

/* Copies a received byte buffer into a malloc'd array (NULL for empty). */
static int bb_to(grpc_byte_buffer *bb, uint8_t **out, size_t *len)
{
	grpc_byte_buffer_reader r;
	grpc_slice s;

	*out = NULL;
	*len = 0;
	if (!bb)
		return 0;
	if (!grpc_byte_buffer_reader_init(&r, bb))
		return -1;
	s = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	*len = GRPC_SLICE_LENGTH(s);
	if (*len) {
		*out = malloc(*len);
		if (!*out) {
			grpc_slice_unref(s);
			return -1;
		}
		memcpy(*out, GRPC_SLICE_START_PTR(s), *len);
	}
	grpc_slice_unref(s);
	return 0;
}

/* ---------------------------------------------------------------- server */

static void call_free(struct zs_rpc_call *c)
{
	if (c->payload)
		grpc_byte_buffer_destroy(c->payload);
	if (c->reply)
		grpc_byte_buffer_destroy(c->reply);
	grpc_metadata_array_destroy(&c->md);
	grpc_call_details_destroy(&c->details);
	if (c->call)
		grpc_call_unref(c->call);
	free(c);
}

static int arm(struct zs_rpc_server *s, size_t m)
{
	struct zs_rpc_call *c = calloc(1, sizeof *c);
	grpc_call_error e;

	if (!c)
		return -1;
	c->srv = s;
	c->method = m;
	grpc_metadata_array_init(&c->md);
	grpc_call_details_init(&c->details);
	if (m == s->n_methods) {
		c->kind = TAG_UNKNOWN_CALL;
		e = grpc_server_request_call(s->server, &c->call, &c->details,
					     &c->md, s->cq, s->cq, c);
	} else {
		c->kind = TAG_NEW_CALL;
		e = grpc_server_request_registered_call(
			s->server, s->handles[m], &c->call, &c->deadline, &c->md,
			&c->payload, s->cq, s->cq, c);
	}
	if (e != GRPC_CALL_OK) {
		zs_error("rpc: cannot arm a call (grpc error %d)", (int)e);
		call_free(c);
		return -1;
	}
	return 0;
}

static void answer(struct zs_rpc_call *c, enum zs_status st, grpc_status_code code,
		   const char *msg, const void *resp, size_t len, const char *leader)
{
	grpc_op ops[4];
	grpc_slice details;
	grpc_metadata md;
	grpc_call_error e;
	size_t n = 0;
	zs_rpc_observe_fn obs;

	if (atomic_exchange(&c->answered, 1)) {
		zs_error("rpc: a call was answered twice (bug)");
		return;
	}
	if (c->kind == TAG_NEW_CALL && (obs = atomic_load(&c->srv->observe)))
		obs(c->srv->observe_ctx, c->method, st, (double)(zs_now_ns() - c->t0_ns) * 1e-9);
	/* every op zeroed: gRPC validates reserved fields and flags */
	memset(ops, 0, sizeof ops);
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (code == GRPC_STATUS_OK) {
		c->reply = bb_from(resp, len);
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->reply;
	}
	details = grpc_slice_from_copied_string(msg ? msg : "");
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = code;
	ops[n].data.send_status_from_server.status_details = &details;
	if (leader) {
		memset(&md, 0, sizeof md);
		md.key = grpc_slice_from_static_string(LEADER_MD);
		md.value = grpc_slice_from_copied_string(leader);
		ops[n].data.send_status_from_server.trailing_metadata_count = 1;
		ops[n].data.send_status_from_server.trailing_metadata = &md;
	}
	n++;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
	c->kind = TAG_REPLY_DONE;
	e = grpc_call_start_batch(c->call, ops, n, c, NULL);
	grpc_slice_unref(details); /* needed only through start_batch */
	if (leader)
		grpc_slice_unref(md.value);
	if (e != GRPC_CALL_OK) {
		zs_error("rpc: cannot send a reply (grpc error %d)", (int)e);
		call_free(c);
	}
}

void zs_rpc_reply(struct zs_rpc_call *c, const void *resp, size_t len)
{
	answer(c, ZS_OK, GRPC_STATUS_OK, NULL, resp, len, NULL);
}

void zs_rpc_fail(struct zs_rpc_call *c, enum zs_status code, const char *fmt, ...)
{
	char msg[ZS_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (code == ZS_OK)
		code = ZS_EINTERNAL;
	answer(c, code, to_grpc(code), msg, NULL, 0, NULL);
}

void zs_rpc_redirect(struct zs_rpc_call *c, const char *leader, const char *fmt, ...)
{
	char msg[ZS_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	answer(c, ZS_EUNAVAIL, GRPC_STATUS_UNAVAILABLE, msg, NULL, 0, leader ? leader : "");
}

void zs_rpc_server_gate(struct zs_rpc_server *s, zs_rpc_gate_fn fn, void *ctx)
{
	s->gate_ctx = ctx;
	atomic_store(&s->gate, fn);
}

static void handle_event(struct zs_rpc_server *s, grpc_event ev)
{
	struct zs_rpc_call *c = ev.tag;
	uint8_t *req;
	size_t len;

	switch (c->kind) {
	case TAG_NEW_CALL:
		if (!ev.success) { /* server shutting down */
			call_free(c);
			return;
		}
		if (!s->shutting_down)
			arm(s, c->method); /* re-arm before handling */
		c->t0_ns = zs_now_ns();
		if (bb_to(c->payload, &req, &len)) {
			zs_rpc_fail(c, ZS_ENOMEM, "cannot read request");
			return;
		}
		{
			zs_rpc_gate_fn gate = atomic_load(&s->gate);
			if (gate && !gate(s->gate_ctx, c->method, c)) {
				free(req);
				return;
			}
		}
		s->methods[c->method].fn(s->ctx, c, req, len);
		free(req);
		return;
	case TAG_UNKNOWN_CALL:
		if (!ev.success) {
			call_free(c);
			return;
		}
		if (!s->shutting_down)
			arm(s, s->n_methods);
		{
			char *m = grpc_slice_to_c_string(c->details.method);
			zs_debug("rpc: unknown method %s", m);
			answer(c, ZS_EPROTO, GRPC_STATUS_UNIMPLEMENTED, "no such method", NULL, 0, NULL);
			gpr_free(m);
		}
		return;
	case TAG_REPLY_DONE:
		call_free(c);
		return;
	case TAG_SHUTDOWN:
		break;
	}
}

static void *cq_thread(void *arg)
{
	struct zs_rpc_server *s = arg;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
			s->cq,
			gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				     gpr_time_from_millis(100, GPR_TIMESPAN)),
			NULL);

		if (atomic_load(&s->stop) && !s->shutting_down) {
			s->shutting_down = 1;
			s->shutdown_tag.kind = TAG_SHUTDOWN;
			grpc_server_shutdown_and_notify(s->server, s->cq,
							&s->shutdown_tag);
			/* without this, calls in flight hold the shutdown
			 * until their deadlines */
			grpc_server_cancel_all_calls(s->server);
		}
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		if (ev.tag == &s->shutdown_tag) {
			grpc_server_destroy(s->server);
			s->server = NULL;
			grpc_completion_queue_shutdown(s->cq);
			continue;
		}
		handle_event(s, ev);
	}
	return NULL;
}

enum zs_status zs_rpc_server_start(const char *listen,
				   const struct zs_rpc_method *methods,
				   size_t n_methods, void *ctx,
				   struct zs_rpc_server **out, char *bound,
				   size_t bound_len, struct zs_error *err)
{
	struct zs_rpc_server *s;
	grpc_server_credentials *cr;
	char host[ZS_HOST_MAX];
	uint16_t port;
	enum zs_status st;
	int p;

	st = zs_parse_hostport(listen, host, &port, err);
	if (st)
		return st;
	s = calloc(1, sizeof *s);
	if (!s)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	s->handles = calloc(n_methods ? n_methods : 1, sizeof *s->handles);
	if (!s->handles) {
		free(s);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	s->methods = methods;
	s->n_methods = n_methods;
	s->ctx = ctx;
	rpc_init();
	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(server_args(), NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	for (size_t i = 0; i < n_methods; i++)
		s->handles[i] = grpc_server_register_method(
			s->server, methods[i].path, NULL,
			GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
	cr = zs_tls_server_creds(); /* mutual TLS when configured (ctrl/tls.h) */
	if (!cr) {
		st = zs_fail(err, ZS_EINVAL, "the TLS certificate or key is not usable (gRPC refused them)");
		goto clean_server;
	}
	p = grpc_server_add_http2_port(s->server, listen, cr);
	grpc_server_credentials_release(cr);
	if (p == 0) {
		char why[160];
		bind_reason(host, port, why, sizeof why);
		st = zs_fail(err, ZS_EUNAVAIL, "cannot listen on %s: %s", listen,
			     why[0] ? why : "gRPC refused the address (not local?)");
		goto clean_server;
	}
	grpc_server_start(s->server);
	for (size_t i = 0; i <= n_methods; i++)
		for (int k = 0; k < (i == n_methods ? 1 : ARMED_PER_METHOD); k++)
			if (arm(s, i)) {
				st = zs_fail(err, ZS_EINTERNAL,
					     "cannot arm RPC method");
				goto clean_started;
			}
	if (pthread_create(&s->thread, NULL, cq_thread, s)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot start the RPC thread");
		goto clean_started;
	}
	if (bound)
		snprintf(bound, bound_len, "%s:%d", host, p);
	*out = s;
	return ZS_OK;

clean_started:
	/* run the same shutdown the thread would, inline */
	atomic_store(&s->stop, 1);
	cq_thread(s);
	goto clean_cq;
clean_server:
	/* never started and no listener: destroy needs no shutdown */
	grpc_server_destroy(s->server);
	grpc_completion_queue_shutdown(s->cq);
	while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
					  NULL).type != GRPC_QUEUE_SHUTDOWN)
		;
clean_cq:
	grpc_completion_queue_destroy(s->cq);
	grpc_shutdown();
	free(s->handles);
	free(s);
	return st;
}

void zs_rpc_server_observe(struct zs_rpc_server *s, zs_rpc_observe_fn fn, void *ctx)
{
	s->observe_ctx = ctx;
	atomic_store(&s->observe, fn);
}

void zs_rpc_server_free(struct zs_rpc_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, 1);
	pthread_join(s->thread, NULL);
	grpc_completion_queue_destroy(s->cq);
	grpc_shutdown();
	free(s->handles);
	free(s);
}

/* ---------------------------------------------------------------- client */

static enum zs_status client_open(const char *target, bool plain, struct zs_rpc_client **out,
				  struct zs_error *err)
{
	struct zs_rpc_client *c;
	grpc_channel_credentials *cr;
	char host[ZS_HOST_MAX];
	uint16_t port;
	enum zs_status st;

	st = zs_parse_hostport(target, host, &port, err);
	if (st)
		return st;
	if (port == 0)
		return zs_fail(err, ZS_EINVAL, "address %s has port 0", target);
	c = calloc(1, sizeof *c);
	if (!c)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	/* libzshard's processes take TLS from the environment; the daemons
	 * and zshardctl configured it from their flags already */
	if (!plain && (st = zs_tls_from_env(err))) {
		free(c);
		return st;
	}
	snprintf(c->target, sizeof c->target, "%s", target);
	pthread_mutex_init(&c->mu, NULL);
	rpc_init();
	cr = plain ? grpc_insecure_credentials_create() : zs_tls_channel_creds();
	if (!cr) {
		pthread_mutex_destroy(&c->mu);
		free(c);
		return zs_fail(err, ZS_EINVAL, "the TLS certificate or key is not usable (gRPC refused them)");
	}
	c->ch = grpc_channel_create(target, cr, msg_size_args());
	grpc_channel_credentials_release(cr);
	*out = c;
	return ZS_OK;
}

enum zs_status zs_rpc_client_open(const char *target, struct zs_rpc_client **out,
				  struct zs_error *err)
{
	return client_open(target, false, out, err);
}

enum zs_status zs_rpc_client_open_plain(const char *target, struct zs_rpc_client **out,
					struct zs_error *err)
{
	return client_open(target, true, out, err);
}

enum zs_status zs_rpc_client_ready(struct zs_rpc_client *c, int timeout_ms)
{
	gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					     gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
	grpc_connectivity_state s = grpc_channel_check_connectivity_state(c->ch, 1);
	grpc_completion_queue *cq;
	enum zs_status st = ZS_EUNAVAIL;

	if (s == GRPC_CHANNEL_READY)
		return ZS_OK;
	if (s == GRPC_CHANNEL_TRANSIENT_FAILURE) /* failed, backing off */
		return ZS_EUNAVAIL;
	cq = cq_get(c);
	/* each watch ends at a change of state or at the deadline */
	for (;;) {
		grpc_event ev;
		grpc_channel_watch_connectivity_state(c->ch, s, deadline, cq, c);
		ev = grpc_completion_queue_pluck(cq, c, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		s = grpc_channel_check_connectivity_state(c->ch, 1);
		if (s == GRPC_CHANNEL_READY) {
			st = ZS_OK;
			break;
		}
		/* the deadline, or a connection refused (it is not up) */
		if (ev.type != GRPC_OP_COMPLETE || !ev.success || s == GRPC_CHANNEL_SHUTDOWN ||
		    s == GRPC_CHANNEL_TRANSIENT_FAILURE)
			break;
	}
	cq_put(c, cq);
	return st;
}

void zs_rpc_client_free(struct zs_rpc_client *c)
{
	if (!c)
		return;
	grpc_channel_destroy(c->ch);
	while (c->n_idle)
		cq_destroy(c->idle[--c->n_idle]);
	pthread_mutex_destroy(&c->mu);
	grpc_shutdown();
	free(c);
}

const char *zs_rpc_client_target(const struct zs_rpc_client *c)
{
	return c->target;
}

enum zs_status zs_rpc_invoke(struct zs_rpc_client *c, const char *path,
			     const void *req, size_t req_len, uint8_t **resp,
			     size_t *resp_len, int timeout_ms, int flags,
			     struct zs_error *err)
{
	return zs_rpc_invoke_ex(c, path, req, req_len, resp, resp_len, timeout_ms, flags, NULL,
				NULL, 0, err);
}

/* The leader a standby named in its trailing metadata into out ("" when
 * none); true when the answer came from a standby. */
static bool standby_leader(const grpc_metadata_array *md, char *out, size_t len)
{
	for (size_t i = 0; i < md->count; i++) {
		if (!grpc_slice_str_cmp(md->metadata[i].key, LEADER_MD)) {
			size_t n = GRPC_SLICE_LENGTH(md->metadata[i].value);
			if (out && len) {
				n = n < len - 1 ? n : len - 1;
				memcpy(out, GRPC_SLICE_START_PTR(md->metadata[i].value), n);
				out[n] = '\0';
			}
			return true;
		}
	}
	return false;
}

enum zs_status zs_rpc_invoke_ex(struct zs_rpc_client *c, const char *path,
				const void *req, size_t req_len, uint8_t **resp,
				size_t *resp_len, int timeout_ms, int flags, bool *standby,
				char *leader, size_t leader_len, struct zs_error *err)
{
	grpc_completion_queue *cq = cq_get(c);
	grpc_metadata_array init_md, trail_md;
	grpc_byte_buffer *send = bb_from(req, req_len), *recv = NULL;
	grpc_status_code code = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	const char *error_string = NULL;
	enum zs_status st = ZS_OK;
	grpc_call *call;
	grpc_op ops[6];
	grpc_event ev;

	*resp = NULL;
	*resp_len = 0;
	if (leader && leader_len)
		leader[0] = '\0';
	if (standby)
		*standby = false;
	grpc_metadata_array_init(&init_md);
	grpc_metadata_array_init(&trail_md);
	call = grpc_channel_create_call(
		c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
		grpc_slice_from_static_string(path), NULL,
		gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
			     gpr_time_from_millis(timeout_ms, GPR_TIMESPAN)),
		NULL);
	memset(ops, 0, sizeof ops);
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (flags & ZS_RPC_WAIT_FOR_READY)
		ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY |
			       GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &trail_md;
	ops[5].data.recv_status_on_client.status = &code;
	ops[5].data.recv_status_on_client.status_details = &details;
	ops[5].data.recv_status_on_client.error_string = &error_string;

	if (grpc_call_start_batch(call, ops, 6, call, NULL) != GRPC_CALL_OK) {
		st = zs_fail(err, ZS_EINTERNAL, "%s: cannot start call %s",
			     c->target, path);
		grpc_call_cancel(call, NULL);
	}
	/* the call's deadline bounds this wait */
	ev = grpc_completion_queue_pluck(cq, call,
					 gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (!st && (ev.type != GRPC_OP_COMPLETE || !ev.success))
		st = zs_fail(err, ZS_EINTERNAL, "%s: call %s did not complete",
			     c->target, path);
	if (!st && code != GRPC_STATUS_OK) {
		char *d = grpc_slice_to_c_string(details);
		st = from_grpc(code);
		bool refused = code == GRPC_STATUS_UNAVAILABLE &&
			       standby_leader(&trail_md, leader, leader_len);
		if (standby)
			*standby = refused;
		if (refused)
			zs_fail(err, st, "%s", d); /* a standby's own words */
		else if (code == GRPC_STATUS_UNAVAILABLE)
			zs_fail(err, st, "cannot reach %s: %s", c->target, d);
		else if (code == GRPC_STATUS_DEADLINE_EXCEEDED)
			zs_fail(err, st, "%s did not answer %s within %d ms",
				c->target, path, timeout_ms);
		else if (code == GRPC_STATUS_UNIMPLEMENTED)
			zs_fail(err, st, "%s does not serve %s (wrong address?)",
				c->target, path);
		else
			zs_fail(err, st, "%s", d);
		gpr_free(d);
	}
	if (!st && bb_to(recv, resp, resp_len))
		st = zs_fail(err, ZS_ENOMEM, "cannot read reply");

	gpr_free((void *)error_string);
	grpc_slice_unref(details);
	if (recv)
		grpc_byte_buffer_destroy(recv);
	grpc_byte_buffer_destroy(send);
	grpc_metadata_array_destroy(&init_md);
	grpc_metadata_array_destroy(&trail_md);
	grpc_call_unref(call);
	cq_put(c, cq);
	return st;
}
