/*
 * listener.h - the server side of the data plane: a listener accepts the
 * trainers' connections on every endpoint it is given (the server half of
 * each stream transport: tcp; shm, whose HELLO hands over the arena's
 * memfd) and serves a one-sided path (rdma) on them when it is given one,
 * and turns their frames into calls on a struct zs_target
 * (the shard engine). The target answers each read or write exactly once,
 * at once or later from any thread (a gather of step t waits until step t's
 * parameters exist). Memory the target serves reads from or receives
 * writes into must come from zs_listener_alloc(): the arena, which shm
 * peers map and a one-sided path registers.
 *
 * Lifecycle (the shard server, the tests and the benchmarks all follow it):
 *   zs_listener_start(opts, engine_target(e)) -> serve ->
 *   zs_listener_stop(l)   every connection closed, every call into the
 *                         target returned, every notification handled;
 *   engine_free(e)        the target may go now: answers to operations it
 *                         still holds go nowhere;
 *   zs_listener_free(l)   the arena goes last, as the engine's buffers live
 *                         in it.
 */
#ifndef ZS_LISTENER_H
#define ZS_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "net/hello.h"
#include "net/transport.h"

struct zs_listener;
struct zs_sop; /* one server-side operation awaiting the target's answer */

struct zs_target {
	void *ctx;
	/* Checks a HELLO (incarnation and epoch 0: any; see zs_conn_opts):
	 * its proof of the job's token over the connection's nonce
	 * (zs_hello_proves); on success sets *job_handle (never 0). */
	enum zs_status (*hello)(void *ctx, const struct zs_hello *h, uint32_t *job_handle,
				struct zs_error *err);
	/*
	 * Optional (without it no connection is encrypted): the key of job's
	 * TLS handshake for the role (reader: its reader token's), as
	 * net/dtls.h's zs_dtls_psk makes it. ZS_EAGAIN: the job is not here
	 * yet; ZS_EINVAL: it has no token to key it.
	 */
	enum zs_status (*tls_key)(void *ctx, const char *job, bool reader, uint8_t key[32],
				  struct zs_error *err);
	/* A read: answer with zs_sop_read_ready() or zs_sop_fail(), now or later. */
	void (*read)(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		     const struct zs_xfer *x);
	/*
	 * A write is about to land: return where its bytes go (from
	 * zs_listener_alloc memory), or fail; no state may change yet.
	 * ZS_EAGAIN: no room for it now; the listener asks again when the
	 * target calls zs_listener_kick, for up to the listener's wait.
	 */
	enum zs_status (*write_begin)(void *ctx, uint32_t job, uint32_t rank,
				      const struct zs_xfer *x, void **dst,
				      struct zs_error *err);
	/* The bytes have landed: answer with zs_sop_done() or zs_sop_fail(). */
	void (*write_done)(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			   const struct zs_xfer *x, void *dst);
	/* A write that began will not be completed (peer gone mid-transfer). */
	void (*write_abort)(void *ctx, uint32_t job, uint32_t rank,
			    const struct zs_xfer *x, void *dst);
	/*
	 * Optional: the first `bytes` of a write have landed (called as it is
	 * received, piece by piece, so the target can reduce while it
	 * receives). No answer is due; write_done or write_abort follows.
	 */
	void (*write_progress)(void *ctx, uint32_t job, uint32_t rank,
			       const struct zs_xfer *x, void *dst, uint64_t bytes);
	/*
	 * The optimizer's hyperparameters from step on (a HPARAMS frame's
	 * payload, len <= ZS_HP_MAX_BYTES, model/hparams.h), before the
	 * connection's pushes of that step. Answered by the return: ZS_OK, or
	 * a failure err explains (the connection goes on).
	 */
	enum zs_status (*hparams)(void *ctx, uint32_t job, uint32_t rank, uint64_t step,
				  const uint8_t *payload, size_t len, struct zs_error *err);
	/*
	 * Optional: the job's world size by step (a WORLD frame's payload,
	 * net/wire.h), before the connection's pushes of the steps it names.
	 * Answered like hparams.
	 */
	enum zs_status (*world)(void *ctx, uint32_t job, uint32_t rank, const uint8_t *payload,
				size_t len, struct zs_error *err);
	/*
	 * Optional, pushes from a trainer's device memory (shm peers on the
	 * target's own device): the identity of the device the target keeps
	 * shards on (gpu/dev.h's zs_dev_ident; 0: none, no such pushes);
	 * mapping a trainer's allocation by its handle (its base and size) and
	 * undoing it. Such a write comes with x->device and x->dsrc (its bytes
	 * in the mapping), valid until write_done or write_abort returns: the
	 * target takes the bytes by then (write_begin may return dsrc itself
	 * as dst). The listener keeps a connection's mappings for its next
	 * pushes and undoes them when it ends.
	 */
	uint32_t (*dev_ident)(void *ctx);
	enum zs_status (*dev_map)(void *ctx, const unsigned char handle[64], void **base,
				  uint64_t *size, struct zs_error *err);
	void (*dev_unmap)(void *ctx, void *base, uint64_t size);
	/*
	 * Optional (without it every PIN is refused): a reader's PIN of job's
	 * version at step (verb ZS_PIN_HOLD, ZS_PIN_RELEASE, ZS_PIN_QUERY;
	 * net/wire.h), answered by the return and *ans. Reads of a pinned
	 * version come to read with x->pinned.
	 */
	enum zs_status (*pin)(void *ctx, uint32_t job, uint64_t step, uint32_t verb,
			      struct zs_pin_ans *ans, struct zs_error *err);
	/* Whether the copies pinned reads are served from live in the arena
	 * (a reader's relay, client/relay.c), so that peers addressing it
	 * (rdma's one-sided path) may read them too; else such reads are
	 * refused (a shard server's copies are its own memory). */
	bool pins_in_arena;
	/*
	 * Optional: a connection whose HELLO the target took (job, rank, the
	 * trainer's reconnect count and session it said) has ended, by either
	 * side, after every operation of it was answered or aborted.
	 */
	void (*bye)(void *ctx, uint32_t job, uint32_t rank, uint64_t reconnects, uint64_t session);
};

/*
 * A one-sided data path that rides on the listener's tcp connections
 * (rdma/: zs_rdma_path). A trainer asks for it in its HELLO
 * (ZS_WF_ONE_SIDED); the listener keeps the frames and answers GATHER and
 * PUSH_BEGIN with offsets into the arena, and the path moves the bytes
 * without the server's CPU. A push's bytes have landed when the path says
 * so (zs_lconn_landed), from its own thread; workers of the listener then
 * hand them to the target, so reductions run in parallel as tcp ones do.
 */
struct zs_lconn; /* one data-plane connection, as a path sees it */
#define ZS_PATH_CTL_MAX 64 /* bytes of a control frame's payload */
struct zs_listener_path {
	const char *name;
	uint16_t control_op; /* frames of this op go to control() */
	/* At start: the arena (all memory gathers read and pushes land in)
	 * exists; set up whatever serves it. Blocking; fails the start. */
	enum zs_status (*open)(void *arena, size_t len, void **ctx, struct zs_error *err);
	/*
	 * A control frame (in, len <= ZS_PATH_CTL_MAX bytes) from c: fill the
	 * answer (out, *out_len <= ZS_PATH_CTL_MAX) and keep c's state in
	 * *state (NULL at first). Failing ends the connection with err.
	 */
	enum zs_status (*control)(void *ctx, struct zs_lconn *c, void **state, const uint8_t *in,
				  size_t len, uint8_t *out, size_t *out_len, struct zs_error *err);
	/* c ends: after this returns, no zs_lconn_landed() names it. */
	void (*conn_end)(void *ctx, void *state);
	/* After every connection ended: free ctx. */
	void (*close)(void *ctx);
};
/* For a path, from any thread: keep c alive for a notification (under the
 * path's own lock, so c cannot end in between) ... */
void zs_lconn_hold(struct zs_lconn *c);
/* ... then: the push c asked for as request id has landed. Releases the
 * hold; never blocks on the target. */
void zs_lconn_landed(struct zs_lconn *c, uint32_t id);

/*
 * An endpoint: a kind of socket the listener accepts trainers on, the
 * server half of a stream transport (zs_tcp_endpoint in net/tcp.c,
 * zs_shm_endpoint in net/shm.c). It says how its peers see the data: with
 * offsets, a peer addresses the arena itself and replies carry offsets
 * into it (shm); without, bytes travel in the frames (tcp, unless the peer
 * asks for the one-sided path).
 */
struct zs_endpoint_ops {
	const char *name;
	bool offsets;    /* its peers address the arena: replies give offsets */
	bool pass_arena; /* HELLO_OK hands the peer the arena's memfd */
	bool encrypts;   /* its peers may ask for STARTTLS (tcp); the others'
			  * bytes do not leave the host (shm) */
	/* Binds and listens at addr (its own syntax; NULL: the transport's
	 * default) and writes the address to advertise into bound (ZS_ADDR_MAX
	 * bytes). The listening socket, or -1 with err. */
	int (*listen)(const char *addr, char *bound, struct zs_error *err);
	/* Tunes a socket just accepted. Optional. */
	void (*accepted)(int fd);
	/* Whether the peer of a socket just accepted may talk to the server
	 * (false: why, ZS_ERRMSG_MAX bytes, is sent to it and it is closed).
	 * Optional: shm's checks the peer's credentials (SO_PEERCRED). */
	bool (*peer_ok)(int fd, char *why);
};
extern const struct zs_endpoint_ops zs_tcp_endpoint; /* net/tcp.c */
extern const struct zs_endpoint_ops zs_shm_endpoint; /* net/shm.c */
/* shm peers whose (primary) group is gid may connect too, besides the
 * server's user and root (zshard-server --shm-group); (gid_t)-1: none. */
void zs_shm_allow_group(gid_t gid);

#define ZS_LISTEN_MAX 4
struct zs_listen_at {
	const struct zs_endpoint_ops *ops; /* NULL ends the list */
	const char *addr;                  /* tcp: HOST:PORT (port 0: a free one);
					    * shm: NULL (a fresh name) */
	char *bound;                       /* receives the address to advertise */
};

struct zs_listener_opts {
	struct zs_listen_at at[ZS_LISTEN_MAX]; /* where to accept trainers */
	const struct zs_listener_path *path;   /* a one-sided path to offer, or NULL */
	uint64_t arena_bytes;                  /* what zs_listener_alloc hands out */
	uint32_t wait_ms; /* the longest a write waits for room (0: 60 s) */
	/*
	 * Optional, for metrics: called as each gather (push false) or push
	 * is answered, from any thread: the transport that carried it (an
	 * endpoint's or the path's name), its bytes, the seconds from its
	 * first frame to its answer (a gather's wait for its step included),
	 * and whether it succeeded.
	 */
	void (*observe)(void *ctx, const char *transport, bool push, uint64_t bytes,
			double seconds, bool ok);
	void *observe_ctx;
};

/*
 * Starts listening on every endpoint of o->at (each writes the address to
 * advertise into its bound). The target must outlive the listener. Fails
 * (ZS_EINVAL a bad address, ZS_EUNAVAIL cannot listen, ZS_ENOMEM no arena,
 * or the path's open failed) with nothing left behind.
 */
enum zs_status zs_listener_start(const struct zs_listener_opts *o,
				 const struct zs_target *t, struct zs_listener **out,
				 struct zs_error *err);
/*
 * Stops taking work: no new connection, every connection closed and its
 * thread joined, every notification handled. The target may be freed
 * after this (its pending ops answer into closed connections); the arena
 * stays until zs_listener_free.
 */
void zs_listener_stop(struct zs_listener *l);
/*
 * Cuts every connection that said job handle in its HELLO: its thread sees
 * the end at once, and a write still landing on it is aborted
 * (write_abort). For a target whose job moved on (a restore) and whose old
 * peers hang mid-transfer (a stopped trainer).
 */
void zs_listener_end_job(struct zs_listener *l, uint32_t job);
/* Stops (if not yet), then frees the arena and the listener. */
void zs_listener_free(struct zs_listener *l);

/*
 * From the target, any thread: room for writes was given back, so writes
 * waiting for it (write_begin said ZS_EAGAIN) try again. They wait in
 * their connection's thread; a shm write whose connection already holds a
 * slot does not (the frame that gives that slot back queues behind it on
 * the same connection): it asks again with x.over_budget set.
 */
void zs_listener_kick(struct zs_listener *l);

/* Zeroed memory of at least bytes, 4 KiB aligned, valid until given back;
 * NULL when no gap of the arena is large enough. Buffers given back merge
 * with their free neighbours (net/arena.h): an arena with nothing taken
 * hands out its whole length again, whatever was taken before. */
void *zs_listener_alloc(struct zs_listener *l, size_t bytes);
/* Gives p (from zs_listener_alloc; NULL is fine) back. */
void zs_listener_release(struct zs_listener *l, void *p);
/* The arena's length, the bytes taken, and the largest buffer that could
 * be taken now. */
void zs_listener_arena(struct zs_listener *l, uint64_t *len, uint64_t *taken, uint64_t *largest);

/* Answers a read with the bytes at src (x->length elements); src must stay
 * valid and unchanged until the reply is sent, which this call does. */
void zs_sop_read_ready(struct zs_sop *op, const void *src);
/* For a state read: the version to report with the data (before ready). */
void zs_sop_set_step(struct zs_sop *op, uint64_t step);
/* Sets the aux of a read's answer (a pinned read's CRC32C), before
 * zs_sop_read_ready. */
void zs_sop_set_aux(struct zs_sop *op, uint64_t aux);
/* Whether a read's connection takes arena offsets (shm, one-sided), not
 * bytes: what it is served must be the arena's. */
bool zs_sop_reads_arena(const struct zs_sop *op);
void zs_sop_done(struct zs_sop *op);
void zs_sop_fail(struct zs_sop *op, enum zs_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
