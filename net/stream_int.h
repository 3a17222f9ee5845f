/*
 * stream_int.h - the stream core's state, internal to net/: a request and
 * a connection (see stream.c for their life), shared by stream.c
 * (requests and the connection's sender and receiver threads) and
 * stream_conn.c (connect and close).
 */
#ifndef ZS_NET_STREAM_INT_H
#define ZS_NET_STREAM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/records.h"
#include "net/stream.h"

enum rstate { R_QUEUED, R_SENT, R_DONE };

struct zs_req {
	struct zs_conn *c;
	uint64_t id;
	uint16_t op; /* the next frame to send for it */
	struct zs_xfer x;
	void *dst;
	const void *src;
	size_t bytes;
	enum rstate state;
	bool in_send;  /* the sender is writing from src right now */
	bool in_move;  /* the transport is moving its bytes (hooks->move) */
	bool deferred; /* answered while in_send or in_move: complete after */
	bool internal; /* a frame of the transport's own (stream_send_control) */
	uint8_t ctl[64];
	enum zs_status status;
	char msg[ZS_ERRMSG_MAX];
	struct zs_req *next;             /* in sendq or waiting */
	struct zs_req *all_prev, *all_next; /* every live request */
	uint8_t own[]; /* a payload the request carries itself (HPARAMS) */
};

struct zs_conn {
	const struct zs_transport_ops *ops;
	const struct stream_hooks *h;
	struct zs_io io; /* the socket, and its records once encrypted */
	uint64_t region_len; /* the server's region (not inline_data) */
	uint32_t dev_ident;  /* zs_conn_device */
	uint32_t job, rank;
	char addr[ZS_ADDR_MAX];

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct zs_req *sendq, *sendq_tail, *waiting, *all;
	unsigned inflight, max_inflight;
	uint64_t next_id;
	bool broken, closing;
	enum zs_status why_code;
	char why[ZS_ERRMSG_MAX];
	pthread_t sender, receiver;
	void *ctx; /* the transport's (hooks->attach) */
};

/* The connection's two threads (stream.c), started by zs_connect. */
void *stream_sender_main(void *arg);
void *stream_receiver_main(void *arg);

#endif
