/*
 * transport.h - the data plane: how a trainer reads shard ranges from a
 * shard server and writes gradients into it. One ops table per transport
 * (tcp, shm; rdma and nccl later), chosen per connection from what the
 * server advertises. Callers go through the inline wrappers at the bottom,
 * never through ->ops directly.
 *
 * Client side (a trainer's connection to one server):
 *   - connect() says HELLO (job, rank, token) and returns a connection, or a
 *     clear error, within opts->timeout_ms.
 *   - post_read() / post_write() never block on the network: they queue the
 *     operation and return a request, or ZS_EAGAIN when opts->max_inflight
 *     requests are outstanding (back-pressure: test or wait one, retry).
 *   - A request completes exactly once: test() returns ZS_EAGAIN while it is
 *     in progress; any other return is its final status, after which the
 *     request is freed and must not be used again. wait() is test() with a
 *     bounded sleep; when its bound passes it returns ZS_EAGAIN too (the
 *     request is still alive), so ZS_ETIMEDOUT is only ever a final status.
 *   - Buffers handed to post_*() belong to the transport until the request
 *     completes (the receive path writes straight into dst: no extra copy).
 *
 * Server side: a listener accepts connections for every transport it offers
 * and turns frames into calls on a struct zs_target (the shard engine). The
 * target answers each read or write exactly once, at once or later from any
 * thread (a gather of step t waits until step t's parameters exist).
 * Memory the target serves reads from or receives writes into must come from
 * zs_listener_alloc(): for shm it lives in a shared mapping the trainer maps.
 */
#ifndef ZS_TRANSPORT_H
#define ZS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "base/status.h"

struct zs_conn;
struct zs_req;
struct zs_mr; /* a registered memory region */

/* What a transfer addresses: a range of a unit's flat buffer at a step. */
struct zs_xfer {
	uint32_t unit;
	uint64_t offset; /* elements from the unit's start */
	uint64_t length; /* elements */
	uint64_t step;
	enum zs_dtype dtype;
	bool partial; /* a gradient-accumulation push that is not the last */
	bool init;    /* a write of initial fp32 parameters (step 0) */
	int state;    /* reads: -1 (or 0 when zeroed and not state_read): the
		       * compute copy; with state_read, 0 master, 1 and 2 the
		       * optimizer's arrays, as fp32, at the shard's version */
	bool state_read;
	uint64_t *version; /* state reads: receives the shard's version */
};

/* The rank an exporter says HELLO with: it may read, never push. */
#define ZS_RANK_OBSERVER 0xffffffffu

struct zs_conn_opts {
	const char *addr;  /* tcp: HOST:PORT; shm: the server's socket name */
	const char *job;
	const char *token; /* "" if the job has none */
	uint64_t incarnation; /* the job's creation time (zs_job.created_ms):
			       * refused by a server still holding an earlier
			       * job of that name; 0 accepts any */
	uint32_t rank;
	int timeout_ms;        /* connect + HELLO */
	unsigned max_inflight; /* 0: 64 */
};

enum {
	ZS_CAP_ONE_SIDED = 1 << 0, /* data moves without the server's CPU */
	ZS_CAP_SAME_HOST = 1 << 1, /* only between processes of one host */
};

struct zs_transport_ops {
	const char *name;
	uint32_t caps;
	uint32_t bit; /* its ZS_TRANSPORT_* bit in ServerInfo.transports */

	/* Connects and completes HELLO; blocking, bounded by o->timeout_ms. */
	enum zs_status (*connect)(const struct zs_conn_opts *o, struct zs_conn **out,
				  struct zs_error *err);
	/*
	 * Registers [buf, buf + len) for transfers on c, once, before posting
	 * operations on it (RDMA pins and keys it; tcp and shm need nothing and
	 * return a handle all the same). The region must outlive its use;
	 * deregister releases the handle (NULL is fine).
	 */
	enum zs_status (*reg)(struct zs_conn *c, void *buf, size_t len, struct zs_mr **mr,
			      struct zs_error *err);
	void (*dereg)(struct zs_mr *mr);
	/*
	 * Queues a read of x from the server into dst (x->length elements of
	 * x->dtype). ZS_EAGAIN: too many in flight; ZS_EUNAVAIL: the
	 * connection is broken (err says why).
	 */
	enum zs_status (*post_read)(struct zs_conn *c, const struct zs_xfer *x, void *dst,
				    struct zs_req **out, struct zs_error *err);
	/* Queues a write of src into the server's staging slot for x. */
	enum zs_status (*post_write)(struct zs_conn *c, const struct zs_xfer *x,
				     const void *src, struct zs_req **out,
				     struct zs_error *err);
	/* ZS_EAGAIN while in progress; else the final status (req freed). */
	enum zs_status (*test)(struct zs_req *r, struct zs_error *err);
	/* Waits up to timeout_ms (-1: no bound) for test() to be final; when
	 * the bound passes first it returns ZS_EAGAIN and r is still alive. */
	enum zs_status (*wait)(struct zs_req *r, int timeout_ms, struct zs_error *err);
	/*
	 * Closes the connection: requests still in flight fail with
	 * ZS_ECANCELED and are freed, so the caller must not use them after.
	 * Blocks until the connection's threads have exited.
	 */
	void (*close)(struct zs_conn *c);
};

extern const struct zs_transport_ops zs_tcp_transport;
extern const struct zs_transport_ops zs_shm_transport;
extern const struct zs_transport_ops zs_rdma_transport; /* rdma.h */

/* The transport a connection was made with. */
const struct zs_transport_ops *zs_conn_transport(const struct zs_conn *c);

static inline enum zs_status zs_connect(const struct zs_transport_ops *t,
					const struct zs_conn_opts *o, struct zs_conn **c,
					struct zs_error *err)
{
	return t->connect(o, c, err);
}
static inline enum zs_status zs_post_read(struct zs_conn *c, const struct zs_xfer *x,
					  void *dst, struct zs_req **r,
					  struct zs_error *err)
{
	return zs_conn_transport(c)->post_read(c, x, dst, r, err);
}
static inline enum zs_status zs_post_write(struct zs_conn *c, const struct zs_xfer *x,
					   const void *src, struct zs_req **r,
					   struct zs_error *err)
{
	return zs_conn_transport(c)->post_write(c, x, src, r, err);
}
static inline enum zs_status zs_mem_register(struct zs_conn *c, void *buf, size_t len,
					     struct zs_mr **mr, struct zs_error *err)
{
	return zs_conn_transport(c)->reg(c, buf, len, mr, err);
}
static inline void zs_mem_deregister(struct zs_conn *c, struct zs_mr *mr)
{
	zs_conn_transport(c)->dereg(mr);
}
static inline void zs_conn_close(struct zs_conn *c)
{
	if (c)
		zs_conn_transport(c)->close(c);
}
/* test and wait are transport-independent (one request type). */
enum zs_status zs_req_test(struct zs_req *r, struct zs_error *err);
enum zs_status zs_req_wait(struct zs_req *r, int timeout_ms, struct zs_error *err);

/* ------------------------------------------------------------ server side */

struct zs_listener;
struct zs_sop; /* one server-side operation awaiting the target's answer */

struct zs_target {
	void *ctx;
	/* Checks a HELLO (incarnation 0: any; see zs_conn_opts); on success
	 * sets *job_handle (never 0). */
	enum zs_status (*hello)(void *ctx, const char *job, const char *token,
				uint64_t incarnation, uint32_t rank, uint32_t *job_handle,
				struct zs_error *err);
	/* A read: answer with zs_sop_read_ready() or zs_sop_fail(), now or later. */
	void (*read)(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		     const struct zs_xfer *x);
	/*
	 * A write is about to land: return where its bytes go (from
	 * zs_listener_alloc memory), or fail; no state may change yet.
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
};

struct zs_listener_opts {
	const char *tcp_listen; /* HOST:PORT (port 0: a free one); NULL: no tcp */
	bool shm;               /* also accept same-host shm connections */
	bool rdma;              /* also serve rdma peers (tcp HELLO asking for it):
				 * registers the arena with the RDMA device */
	uint64_t arena_bytes;   /* the memory zs_listener_alloc hands out */
};

/*
 * Starts listening. The target must outlive the listener. tcp_addr and
 * shm_name (each ZS_ADDR_MAX) receive the addresses to advertise.
 */
enum zs_status zs_listener_start(const struct zs_listener_opts *o,
				 const struct zs_target *t, struct zs_listener **out,
				 char *tcp_addr, char *shm_name, struct zs_error *err);
/*
 * Stops taking work: no new connection, every connection closed and its
 * thread joined, every notification handled. The target may be freed
 * after this (its pending ops answer into closed connections); the arena
 * stays until zs_listener_free.
 */
void zs_listener_stop(struct zs_listener *l);
/* Stops (if not yet), then frees the arena and the listener. */
void zs_listener_free(struct zs_listener *l);

/* Zeroed memory of at least bytes, 4 KiB aligned, valid until freed. */
void *zs_listener_alloc(struct zs_listener *l, size_t bytes);
void zs_listener_release(struct zs_listener *l, void *p);

/* Answers a read with the bytes at src (x->length elements); src must stay
 * valid and unchanged until the reply is sent, which this call does. */
void zs_sop_read_ready(struct zs_sop *op, const void *src);
/* For a state read: the version to report with the data (before ready). */
void zs_sop_set_step(struct zs_sop *op, uint64_t step);
void zs_sop_done(struct zs_sop *op);
void zs_sop_fail(struct zs_sop *op, enum zs_status code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
