/*
 * rpc.c - gRPC core glue (see rpc.h): initialization and logging, status
 * codes, byte buffers, and the server side (the client is rpc_client.c).
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
#include "ctrl/rpc_int.h"
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

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* What a TLS listener's failed handshake means, from OpenSSL's words in
 * gRPC's line ("" when none of these). */
static const char *handshake_meaning(const char *m)
{
	if (!strstr(m, "andshake failed"))
		return "";
	if (strstr(m, "wrong version number") || strstr(m, "http request") ||
	    strstr(m, "packet length too long"))
		return "TLS: a client spoke plaintext to this TLS listener, refused (it needs "
		       "--tls-ca, --tls-cert and --tls-key): ";
	if (strstr(m, "peer did not return a certificate"))
		return "TLS: refused a client that presented no certificate: ";
	if (strstr(m, "certificate verify failed"))
		return "TLS: refused a client's certificate (not signed by this process's "
		       "--tls-ca CA): ";
	if (strstr(m, "alert"))
		return "TLS: a peer refused this process's certificate: ";
	return "TLS: ";
}

/* gRPC's own log lines go through ours, at debug unless they are errors */
static void grpc_log_fn(gpr_log_func_args *a)
{
	if (a->severity == GPR_LOG_SEVERITY_ERROR)
		zs_warn("%sgrpc: %s", handshake_meaning(a->message), a->message);
	else
		zs_debug("grpc: %s", a->message);
}

static void setup_logging(void) { gpr_set_log_function(grpc_log_fn); }

void rpc_init(void)
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
	case ZS_EPERM: return GRPC_STATUS_PERMISSION_DENIED;
	default: return GRPC_STATUS_INTERNAL;
	}
}

enum zs_status rpc_from_grpc(grpc_status_code c)
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
	case GRPC_STATUS_PERMISSION_DENIED: return ZS_EPERM;
	case GRPC_STATUS_UNIMPLEMENTED: return ZS_EPROTO;
	default: return ZS_EINTERNAL;
	}
}

grpc_channel_args *rpc_msg_size_args(void)
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
	const grpc_channel_args *base = rpc_msg_size_args();

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

grpc_byte_buffer *rpc_bb_from(const void *p, size_t len)
{
	grpc_slice s = grpc_slice_from_copied_buffer(p ? p : "", len);
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s); /* the buffer took its own reference */
	return bb;
}

/* Copies a received byte buffer into a malloc'd array (NULL for empty). */
int rpc_bb_to(grpc_byte_buffer *bb, uint8_t **out, size_t *len)
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
		c->reply = rpc_bb_from(resp, len);
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

const char *zs_rpc_call_method(const struct zs_rpc_call *call)
{
	return call->srv->methods[call->method].path;
}

/* The value of "OU=" in an RFC 2253 subject ("CN=a,OU=trainer,O=b"). */
static int subject_ou(const char *v, size_t n, char *role, size_t len)
{
	for (size_t i = 0; i + 3 <= n; i++) {
		size_t k = 0;
		if ((i && v[i - 1] != ',' && v[i - 1] != '/') || strncmp(v + i, "OU=", 3))
			continue;
		i += 3;
		while (i + k < n && v[i + k] != ',' && v[i + k] != '/' && k + 1 < len) {
			role[k] = v[i + k];
			k++;
		}
		role[k] = '\0';
		return k > 0;
	}
	return 0;
}

int zs_rpc_call_role(struct zs_rpc_call *call, char *role, size_t len)
{
	static const char uri[] = "zshard:role:";
	grpc_auth_context *ctx = grpc_call_auth_context(call->call);
	grpc_auth_property_iterator it;
	const grpc_auth_property *p;
	int found = 0;

	if (!ctx)
		return -1;
	if (!grpc_auth_context_peer_is_authenticated(ctx)) {
		grpc_auth_context_release(ctx);
		return -1;
	}
	it = grpc_auth_context_find_properties_by_name(ctx, GRPC_PEER_URI_PROPERTY_NAME);
	while (!found && (p = grpc_auth_property_iterator_next(&it)))
		if (p->value_length > sizeof uri - 1 && p->value_length - (sizeof uri - 1) < len &&
		    !strncmp(p->value, uri, sizeof uri - 1)) {
			size_t n = p->value_length - (sizeof uri - 1);
			memcpy(role, p->value + sizeof uri - 1, n);
			role[n] = '\0';
			found = 1;
		}
	it = grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_SUBJECT_PROPERTY_NAME);
	while (!found && (p = grpc_auth_property_iterator_next(&it)))
		found = subject_ou(p->value, p->value_length, role, len);
	grpc_auth_context_release(ctx);
	return found;
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
		if (rpc_bb_to(c->payload, &req, &len)) {
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

