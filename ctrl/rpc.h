/*
 * rpc.h - zshard's control-plane RPC over gRPC core's C API, behind zshard's
 * own types. This file pair is the only one that includes <grpc/grpc.h>: a
 * gRPC upgrade touches ctrl/ alone. Messages are opaque bytes here; ctrl/
 * codec.h turns them into zshard structs.
 *
 * Server model: one completion-queue thread per server. Each registered
 * method keeps a few calls armed; when a request arrives its handler runs on
 * that thread with the request bytes. The handler must answer the call
 * exactly once with zs_rpc_reply() or zs_rpc_fail(), either before it
 * returns or later from any thread (a deferred answer, for requests that
 * wait on others). Unknown methods are answered UNIMPLEMENTED, never left to
 * their deadline.
 *
 * Client model: a client is a channel; zs_rpc_invoke() is a blocking unary
 * call with a deadline, safe to call from several threads at once.
 *
 * The pitfalls of Debian's gRPC 1.51 this wrapper handles: insecure
 * credentials through grpc_security.h, the 4 MiB default receive limit
 * (raised to ZS_RPC_MAX_MSG on both sides), the shutdown order
 * (shutdown_and_notify, cancel_all_calls, drain, destroy), and fork (spawn
 * other processes with exec, never use gRPC objects in a forked child).
 */
#ifndef ZS_RPC_H
#define ZS_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ZS_RPC_MAX_MSG (256u << 20)

struct zs_rpc_server;
struct zs_rpc_call;
struct zs_rpc_client;

/*
 * A method handler. req is valid only during the call of the handler; ctx is
 * the pointer given to zs_rpc_server_start(). Must not block for long: it
 * runs on the server's only completion-queue thread.
 */
typedef void (*zs_rpc_fn)(void *ctx, struct zs_rpc_call *call,
			  const uint8_t *req, size_t len);

struct zs_rpc_method {
	const char *path; /* "/zshard.Coordinator/Join" */
	zs_rpc_fn fn;
};

/*
 * Binds listen ("HOST:PORT", port 0 picks a free port), registers the
 * methods (the array must outlive the server) and starts the CQ thread.
 * bound receives "HOST:PORT" with the real port. Errors: ZS_EINVAL (bad
 * address), ZS_EUNAVAIL (cannot bind: in use, no such address).
 */
enum zs_status zs_rpc_server_start(const char *listen,
				   const struct zs_rpc_method *methods,
				   size_t n_methods, void *ctx,
				   struct zs_rpc_server **out, char *bound,
				   size_t bound_len, struct zs_error *err);

/*
 * Optional, for metrics: called as each call is answered (from the
 * answering thread): its method (the index into the methods given to
 * zs_rpc_server_start), its status, and the seconds since its handler got
 * it. Set once, before or while serving.
 */
typedef void (*zs_rpc_observe_fn)(void *ctx, size_t method, enum zs_status st, double seconds);
void zs_rpc_server_observe(struct zs_rpc_server *s, zs_rpc_observe_fn fn, void *ctx);

/*
 * Stops accepting, cancels calls in flight, waits for the CQ thread and frees
 * everything. Deferred calls still unanswered must be answered before this
 * (their answer then fails quietly). NULL is fine.
 */
void zs_rpc_server_free(struct zs_rpc_server *s);

/* Answers OK with resp (copied; may be NULL when len is 0). */
void zs_rpc_reply(struct zs_rpc_call *call, const void *resp, size_t len);
/* Answers with an error status and a one-line message. */
void zs_rpc_fail(struct zs_rpc_call *call, enum zs_status code,
		 const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/*
 * A standby's refusal: UNAVAILABLE with a message, naming the leader (its
 * address, "" when none is known) in the trailing metadata, where
 * zs_rpc_invoke_ex() finds it. The call was not carried out: a client may
 * send it again elsewhere, whatever it was.
 */
void zs_rpc_redirect(struct zs_rpc_call *call, const char *leader, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Optional: runs before every handler with the method's index; returns
 * false after answering the call itself (a standby refusing it), and the
 * handler is not run. Set once, before or while serving.
 */
typedef bool (*zs_rpc_gate_fn)(void *ctx, size_t method, struct zs_rpc_call *call);
/*
 * The role the caller's certificate names, into role (len bytes): a
 * subjectAltName URI "zshard:role:NAME", else the subject's OU. 1 when it
 * names one, 0 when the call came over TLS with a certificate naming none,
 * -1 when it came without TLS (no identity).
 */
int zs_rpc_call_role(struct zs_rpc_call *call, char *role, size_t len);
/* The path of the method the call is for ("/zshard.Coordinator/Join"). */
const char *zs_rpc_call_method(const struct zs_rpc_call *call);
void zs_rpc_server_gate(struct zs_rpc_server *s, zs_rpc_gate_fn fn, void *ctx);
/* Opens a channel to target ("HOST:PORT"); connects lazily. */
enum zs_status zs_rpc_client_open(const char *target, struct zs_rpc_client **out,
				  struct zs_error *err);
/* The same without TLS, whatever zshard's own channels use: for a peer
 * outside zshard that speaks plain gRPC (etcd on its client port). */
enum zs_status zs_rpc_client_open_plain(const char *target, struct zs_rpc_client **out,
					struct zs_error *err);
/*
 * Connects the channel if it is not, waiting at most timeout_ms: ZS_OK once
 * it is ready, ZS_EUNAVAIL when it is not by then. A call made right after
 * ZS_OK goes out on that connection; one made on a channel that never
 * connected is never sent (what a client following a list of servers
 * needs to know before it sends a call elsewhere).
 */
enum zs_status zs_rpc_client_ready(struct zs_rpc_client *c, int timeout_ms);
/* After zs_rpc_client_ready failed: ZS_EPROTO saying which side refused
 * what when TLS is why the channel fails (ctrl/tls_probe.c), else ZS_OK. */
enum zs_status zs_rpc_client_refused(struct zs_rpc_client *c, struct zs_error *err);
void zs_rpc_client_free(struct zs_rpc_client *c);
const char *zs_rpc_client_target(const struct zs_rpc_client *c);

enum {
	/* wait for the server to come up until the deadline instead of
	 * failing at once when it is unreachable */
	ZS_RPC_WAIT_FOR_READY = 1,
};

/*
 * Calls path with req and waits at most timeout_ms. On ZS_OK, *resp is a
 * malloc'd buffer of *resp_len bytes the caller frees (NULL when empty). On
 * failure err holds the server's message (or why the call did not reach it)
 * and the status mapped from gRPC's: UNAVAILABLE -> ZS_EUNAVAIL,
 * DEADLINE_EXCEEDED -> ZS_ETIMEDOUT, and each zshard status back to itself.
 */
enum zs_status zs_rpc_invoke(struct zs_rpc_client *c, const char *path,
			     const void *req, size_t req_len, uint8_t **resp,
			     size_t *resp_len, int timeout_ms, int flags,
			     struct zs_error *err);
/* The same; *standby says whether a standby refused the call (then it was
 * not carried out: zs_rpc_redirect), and leader (leader_len bytes) gets
 * the leader it named ("" when it named none). */
enum zs_status zs_rpc_invoke_ex(struct zs_rpc_client *c, const char *path,
				const void *req, size_t req_len, uint8_t **resp,
				size_t *resp_len, int timeout_ms, int flags, bool *standby,
				char *leader, size_t leader_len, struct zs_error *err);

#endif
