/*
 * rpc_client.c - gRPC core glue, the client side (see rpc.h): channels,
 * blocking calls on pooled pluck queues, a standby's redirect, and what a
 * connection refused by TLS means (ctrl/tls_probe.c).
 */
#include "ctrl/rpc.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "ctrl/rpc_int.h"
#include "ctrl/tls.h"

#define CQ_POOL 8

struct zs_rpc_client {
	grpc_channel *ch;
	bool plain; /* opened plaintext whatever the process's TLS */
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
	c->plain = plain;
	pthread_mutex_init(&c->mu, NULL);
	rpc_init();
	cr = plain ? grpc_insecure_credentials_create() : zs_tls_channel_creds();
	if (!cr) {
		pthread_mutex_destroy(&c->mu);
		free(c);
		return zs_fail(err, ZS_EINVAL, "the TLS certificate or key is not usable (gRPC refused them)");
	}
	c->ch = grpc_channel_create(target, cr, rpc_msg_size_args());
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
/* A connection TLS refused (gRPC says "Socket closed" or that a handshake
 * failed; d NULL: a call waiting for a channel that keeps failing): which
 * side refused what (ctrl/tls_probe.c), an error that
 * waiting does not mend (ZS_EPROTO); ZS_OK when TLS is not why. */
static enum zs_status tls_explains(const struct zs_rpc_client *c, const char *d,
				   struct zs_error *err)
{
	char why[ZS_ERRMSG_MAX / 2];

	if (d && !strstr(d, "Socket closed") && !strstr(d, "andshake"))
		return ZS_OK;
	if (zs_tls_diagnose(c->target, !c->plain, why, sizeof why) == ZS_OK)
		return ZS_OK;
	return zs_fail(err, ZS_EPROTO, "cannot reach %s: %s", c->target, why);
}

enum zs_status zs_rpc_client_refused(struct zs_rpc_client *c, struct zs_error *err)
{
	if (grpc_channel_check_connectivity_state(c->ch, 0) != GRPC_CHANNEL_TRANSIENT_FAILURE)
		return ZS_OK;
	return tls_explains(c, NULL, err);
}

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

/* A call's non-OK status as the caller's error, said plainly: a standby
 * coordinator's refusal (refused: in its own words), TLS refusing the
 * channel, an unreachable target, a deadline (bound ms), a method the
 * target does not serve. */
static enum zs_status status_error(struct zs_rpc_client *c, const char *path,
				   grpc_status_code code, grpc_slice details, bool refused,
				   int flags, int bound, struct zs_error *err)
{
	char *d = grpc_slice_to_c_string(details);
	enum zs_status st = rpc_from_grpc(code), tst;

	if (refused)
		zs_fail(err, st, "%s", d); /* a standby's own words */
	else if (code == GRPC_STATUS_UNAVAILABLE && (tst = tls_explains(c, d, err)))
		st = tst;
	else if (code == GRPC_STATUS_UNAVAILABLE)
		zs_fail(err, st, "cannot reach %s: %s", c->target, d);
	else if (code == GRPC_STATUS_DEADLINE_EXCEEDED && (flags & ZS_RPC_WAIT_FOR_READY) &&
		 grpc_channel_check_connectivity_state(c->ch, 0) ==
			 GRPC_CHANNEL_TRANSIENT_FAILURE &&
		 (tst = tls_explains(c, NULL, err)))
		st = tst;
	else if (code == GRPC_STATUS_DEADLINE_EXCEEDED)
		zs_fail(err, st, "%s did not answer %s within %d ms",
			c->target, path, bound);
	else if (code == GRPC_STATUS_UNIMPLEMENTED)
		zs_fail(err, st, "%s does not serve %s (wrong address?)",
			c->target, path);
	else
		zs_fail(err, st, "%s", d);
	gpr_free(d);
	return st;
}

enum zs_status zs_rpc_invoke_ex(struct zs_rpc_client *c, const char *path,
				const void *req, size_t req_len, uint8_t **resp,
				size_t *resp_len, int timeout_ms, int flags, bool *standby,
				char *leader, size_t leader_len, struct zs_error *err)
{
	const int bound = timeout_ms; /* what the caller gave, for its message */
	grpc_completion_queue *cq = cq_get(c);
	grpc_metadata_array init_md, trail_md;
	grpc_byte_buffer *send = NULL, *recv = NULL;
	grpc_status_code code = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	const char *error_string = NULL;
	enum zs_status st = ZS_OK, tst;
	grpc_call *call;
	grpc_op ops[6];
	grpc_event ev;

	*resp = NULL;
	*resp_len = 0;
	if (leader && leader_len)
		leader[0] = '\0';
	if (standby)
		*standby = false;
	/* a call that waits for its channel would wait out its bound on one
	 * that TLS refuses: seen within a second, and said (a plaintext
	 * daemon dialling a TLS coordinator waited 5 minutes before) */
	if ((flags & ZS_RPC_WAIT_FOR_READY) &&
	    grpc_channel_check_connectivity_state(c->ch, 0) != GRPC_CHANNEL_READY) {
		int64_t t0 = zs_now_ms();
		if (zs_rpc_client_ready(c, timeout_ms < 1000 ? timeout_ms : 1000) &&
		    grpc_channel_check_connectivity_state(c->ch, 0) ==
			    GRPC_CHANNEL_TRANSIENT_FAILURE &&
		    (tst = tls_explains(c, NULL, err))) {
			cq_put(c, cq);
			return tst;
		}
		/* the call's bound includes this look */
		timeout_ms -= (int)(zs_now_ms() - t0);
		if (timeout_ms < 1)
			timeout_ms = 1;
	}
	send = rpc_bb_from(req, req_len);
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
		/* a standby coordinator names the leader in its trailers */
		bool refused = code == GRPC_STATUS_UNAVAILABLE &&
			       standby_leader(&trail_md, leader, leader_len);
		if (standby)
			*standby = refused;
		st = status_error(c, path, code, details, refused, flags, bound, err);
	}
	if (!st && rpc_bb_to(recv, resp, resp_len))
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
