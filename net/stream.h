/*
 * stream.h - the client core shared by the stream transports (tcp, shm):
 * a sender thread writes queued requests, a receiver thread reads replies
 * straight into the callers' buffers and completes requests. tcp.c and
 * shm.c differ only in how they dial and where payload bytes travel.
 * Internal to common/; callers use transport.h.
 */
#ifndef ZS_STREAM_H
#define ZS_STREAM_H

#include "net/transport.h"

enum stream_mode { STREAM_INLINE, STREAM_SHM, STREAM_RDMA };

/*
 * The rdma data path (rdma.c) plugs into the stream core: the tcp
 * connection carries the frames, as for shm, and the hooks move the bytes.
 * While a request's transfer is on the wire it completes only when the
 * transfer has (and the sender is done with its frame), so a caller never
 * gets a buffer back that the adapter may still touch.
 */
struct stream_rdma_ops {
	/* After HELLO_OK, the socket still synchronous: set up the queue pair. */
	enum zs_status (*setup)(struct zs_conn *c, int fd, uint64_t arena_len, int timeout_ms,
				void **ctx, struct zs_error *err);
	/* Moves r's bytes from / to the arena at off; completion comes through
	 * stream_rdma_done, from any thread. Nonzero: not started (why). */
	enum zs_status (*read)(void *ctx, struct zs_req *r, void *dst, size_t bytes,
			       uint64_t off, struct zs_error *err);
	enum zs_status (*write)(void *ctx, struct zs_req *r, const void *src, size_t bytes,
				uint64_t off, struct zs_error *err);
	/* The server's RDMA_QP reply to a queue pair re-established. */
	void (*qp_reply)(void *ctx, const uint8_t *info);
	/* The connection broke: fail what is on the wire (flush). */
	void (*flush)(void *ctx);
	/* After the threads stopped: flush, wait for every transfer, free. */
	void (*close)(void *ctx);
};
enum zs_status stream_connect_rdma(const struct zs_transport_ops *ops,
				   const struct stream_rdma_ops *rops,
				   const struct zs_conn_opts *o, struct zs_conn **out,
				   struct zs_error *err);
/* A request's transfer ended (st, msg): a gather completes; a push, whose
 * last piece notified the server, waits for its PUSH_ACK. */
void stream_rdma_done(struct zs_conn *c, struct zs_req *r, enum zs_status st, const char *msg);
/* Queues a control frame (op, payload of len bytes, at most 64) to send. */
enum zs_status stream_send_control(struct zs_conn *c, uint16_t op, const void *payload,
				   size_t len);
void *stream_rdma_ctx(struct zs_conn *c);
uint64_t stream_req_id(const struct zs_req *r);

/* Dials addr, says HELLO, starts the threads. */
enum zs_status stream_connect(const struct zs_transport_ops *ops, enum stream_mode mode,
			      const struct zs_conn_opts *o, struct zs_conn **out,
			      struct zs_error *err);
enum zs_status stream_post_read(struct zs_conn *c, const struct zs_xfer *x, void *dst,
				struct zs_req **out, struct zs_error *err);
enum zs_status stream_post_write(struct zs_conn *c, const struct zs_xfer *x,
				 const void *src, struct zs_req **out,
				 struct zs_error *err);
void stream_close(struct zs_conn *c);
/* Registration: the stream transports move bytes with the CPU, so a region
 * is only remembered (its bounds), never pinned. */
enum zs_status stream_reg(struct zs_conn *c, void *buf, size_t len, struct zs_mr **mr,
			  struct zs_error *err);
void stream_dereg(struct zs_mr *mr);

#endif
