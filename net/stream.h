/*
 * stream.h - the client core every transport is built on (tcp, shm, rdma):
 * one socket to the server carries the frames; a sender thread writes
 * queued requests, a receiver thread reads replies (straight into the
 * callers' buffers, for tcp) and completes requests. A transport is its
 * struct stream_hooks, named with its registration in its ops table
 * (zs_connect, zs_post_read, zs_post_write, zs_conn_close are the core's).
 * Internal to net/ and the transports; callers use net/transport.h.
 */
#ifndef ZS_STREAM_H
#define ZS_STREAM_H

#include <stdbool.h>

#include "net/transport.h"

/*
 * What a stream transport fills in: how its bytes move. The core keeps the
 * frames (HELLO, GATHER, PUSH_BEGIN / PUSH_SLOT, PUSH, PUSH_ACK, ERROR), the
 * request lifecycle and the threads; it knows no transport by name.
 *
 * With inline_data (tcp) the bytes travel inside the frames. Otherwise the
 * server answers a GATHER or a PUSH_BEGIN with an offset into its region
 * (HELLO_OK says how large it is) and the transport's move() carries the
 * bytes: shm copies through the mapped region, rdma reads and writes it
 * one-sided. While a move is under way its request completes only when the
 * move has (and the sender is done with its frame), so a caller never gets
 * back a buffer the transport may still touch.
 */
struct stream_hooks {
	bool unix_addr;      /* dials an abstract unix socket ("@name"), else HOST:PORT */
	bool inline_data;    /* the bytes travel in the frames */
	bool hello_fd;       /* HELLO_OK carries a file descriptor (SCM_RIGHTS) */
	bool encrypts;       /* a job's data_tls encrypts it (net/dtls.h); the
			      * others' bytes do not leave the host (shm) or
			      * are the fabric's to keep (rdma) */
	bool push_notifies;  /* a push's move() notifies the server itself (rdma's
			      * WRITE_WITH_IMM); else the core sends PUSH after it */
	uint16_t hello_flags; /* the ZS_WF_* flags the HELLO carries */
	/*
	 * After HELLO_OK, the socket still the caller's alone (blocking, with
	 * timeout_ms on it): addr the server's address as dialed, region_len
	 * the size of the server's region, fd the descriptor HELLO_OK carried
	 * (hello_fd; attach owns it). Sets *ctx.
	 */
	enum zs_status (*attach)(struct zs_conn *c, const char *addr, int sock,
				 uint64_t region_len, int fd, void **ctx, struct zs_error *err);
	/*
	 * Moves r's bytes between buf and the server's region at off (the core
	 * checked the bounds). ZS_OK: done; ZS_EAGAIN: under way, the transport
	 * calls stream_moved() when it is done, from any thread; anything else:
	 * not started, err says why.
	 */
	enum zs_status (*move)(void *ctx, struct zs_req *r, bool write, void *buf, size_t bytes,
			       uint64_t off, struct zs_error *err);
	/* The server's answer (op, len <= 64 bytes of payload) to a frame the
	 * transport sent with stream_send_control(). Optional. */
	void (*control)(void *ctx, uint16_t op, const uint8_t *payload, size_t len);
	/* The connection broke: fail what is under way now. Optional. */
	void (*flush)(void *ctx);
	/* After the threads stopped: wait for every move, then free ctx. */
	void (*detach)(void *ctx);
};

/* A move that returned ZS_EAGAIN ended (st, msg): a gather completes; a
 * push goes on (a PUSH frame, or the PUSH_ACK its notification brings). */
void stream_moved(struct zs_conn *c, struct zs_req *r, enum zs_status st, const char *msg);
/* Queues a frame of the transport's own (op, payload of len bytes, at most
 * 64); the server's answer goes to hooks->control. */
enum zs_status stream_send_control(struct zs_conn *c, uint16_t op, const void *payload,
				   size_t len);
/* The transport's context (attach's *ctx). */
void *stream_ctx(struct zs_conn *c);
uint64_t stream_req_id(const struct zs_req *r);

/* Registration: the stream transports move bytes with the CPU, so a region
 * is only remembered (its bounds), never pinned. */
enum zs_status stream_reg(struct zs_conn *c, void *buf, size_t len, struct zs_mr **mr,
			  struct zs_error *err);
void stream_dereg(struct zs_mr *mr);

#endif
