/*
 * stream.h - the client core shared by the stream transports (tcp, shm):
 * a sender thread writes queued requests, a receiver thread reads replies
 * straight into the callers' buffers and completes requests. tcp.c and
 * shm.c differ only in how they dial and where payload bytes travel.
 * Internal to common/; callers use transport.h.
 */
#ifndef ZS_STREAM_H
#define ZS_STREAM_H

#include "transport.h"

enum stream_mode { STREAM_INLINE, STREAM_SHM };

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
