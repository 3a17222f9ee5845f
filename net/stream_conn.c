/*
 * stream_conn.c - a stream transport's connection made and closed: the
 * HELLO (the job's token, the transport's own handshake), the sender and
 * receiver threads, and the close that answers every request still open.
 */
#include "net/stream_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "base/le.h"
#include "base/util.h"
#include "net/dtls.h"
#include "net/hello.h"
#include "net/sockio.h"
#include "net/wire.h"

/* -------------------------------------------------------- connect, close */

/* An ERROR frame f's message (its payload, cut to ZS_WIRE_MAX_ERR bytes)
 * into msg; its status. */
static enum zs_status error_frame(struct zs_conn *c, const struct zs_frame *f,
				  char msg[ZS_WIRE_MAX_ERR + 1])
{
	size_t n = f->payload_len < ZS_WIRE_MAX_ERR ? f->payload_len : ZS_WIRE_MAX_ERR;

	msg[0] = '\0';
	if (!zs_io_read(&c->io, msg, n))
		msg[n] = '\0';
	return f->status > 0 && f->status < ZS_STATUS_COUNT ? (enum zs_status)f->status : ZS_EPROTO;
}

/* The server's first frame: the nonce this connection's HELLO proves the
 * token over (net/hello.h). */
static enum zs_status nonce_of(struct zs_conn *c, uint8_t nonce[ZS_NONCE_LEN],
			       struct zs_error *err)
{
	uint8_t h[ZS_WIRE_HDR];
	struct zs_frame f;

	if (zs_io_read(&c->io, h, sizeof h))
		return zs_fail(err, errno == EAGAIN ? ZS_ETIMEDOUT : ZS_EUNAVAIL,
			       "%s sent no nonce: %s", c->addr,
			       errno ? strerror(errno) : "connection closed");
	if (zs_wire_decode(h, &f, err))
		return err ? err->code : ZS_EPROTO;
	if (f.op == ZS_OP_ERROR) { /* refused before any HELLO (shm: who we are) */
		char msg[ZS_WIRE_MAX_ERR + 1];
		enum zs_status st = error_frame(c, &f, msg);
		return zs_fail(err, st, "%s refused this connection: %s", c->addr, msg);
	}
	if (f.op != ZS_OP_NONCE || f.payload_len != ZS_NONCE_LEN)
		return zs_fail(err, ZS_EPROTO,
			       "%s began with %s, not a nonce (a server older than the token's proof?)",
			       c->addr, zs_op_name(f.op));
	if (zs_io_read(&c->io, nonce, ZS_NONCE_LEN))
		return zs_fail(err, ZS_EUNAVAIL, "%s: the nonce was cut short", c->addr);
	return ZS_OK;
}

/*
 * Asks for the rest of the connection encrypted (net/dtls.h): STARTTLS,
 * the server's STARTTLS_OK, the handshake keyed by the job's secret; then
 * the server's nonce again, inside.
 */
static enum zs_status start_tls(struct zs_conn *c, const struct zs_conn_opts *o,
				uint8_t nonce[ZS_NONCE_LEN], struct zs_error *err)
{
	size_t jl = strlen(o->job);
	uint8_t h[ZS_WIRE_HDR], psk[ZS_DTLS_PSK];
	struct zs_frame f = {.op = ZS_OP_STARTTLS, .payload_len = jl + 1, .rank = o->rank,
			     .flags = o->reader ? ZS_WF_READER : 0};
	struct iovec iov[2] = {{h, sizeof h}, {(void *)o->job, jl + 1}};
	enum zs_status st;

	if (!o->token || !o->token[0])
		return zs_fail(err, ZS_EINVAL,
			       "job '%s' has no data-plane token to key its encryption (data_tls)",
			       o->job);
	zs_wire_encode(&f, h);
	if (zs_io_writev(&c->io, iov, 2) || zs_io_read(&c->io, h, sizeof h))
		return zs_fail(err, errno == EAGAIN ? ZS_ETIMEDOUT : ZS_EUNAVAIL,
			       "%s did not answer STARTTLS: %s", c->addr,
			       errno ? strerror(errno) : "connection closed");
	if (zs_wire_decode(h, &f, err))
		return err ? err->code : ZS_EPROTO;
	if (f.op == ZS_OP_ERROR) {
		char msg[ZS_WIRE_MAX_ERR + 1];
		st = error_frame(c, &f, msg);
		return zs_fail(err, st, "%s refused to encrypt job '%s': %s", c->addr, o->job, msg);
	}
	if (f.op != ZS_OP_STARTTLS_OK)
		return zs_fail(err, ZS_EPROTO,
			       "%s answered STARTTLS with %s (a server older than data_tls?)", c->addr,
			       zs_op_name(f.op));
	if (zs_dtls_psk(o->token, o->job, o->reader, psk))
		return zs_fail(err, ZS_ENOMEM, "cannot derive the handshake's key (OpenSSL)");
	st = zs_dtls_handshake(c->io.fd, false, o->job, o->reader, psk, &c->io.rec, err);
	OPENSSL_cleanse(psk, sizeof psk);
	if (st) {
		zs_error_prefix(err, "%s", c->addr);
		return st;
	}
	return nonce_of(c, nonce, err);
}

static enum zs_status hello(struct zs_conn *c, const struct zs_conn_opts *o, int *fd,
			    struct zs_error *err)
{
	size_t jl = strlen(o->job);
	uint8_t payload[ZS_JOB_NAME_MAX + ZS_PROOF_LEN], nonce[ZS_NONCE_LEN];
	uint8_t h[ZS_WIRE_HDR];
	struct zs_frame f = {.op = ZS_OP_HELLO, .req_id = 0, .rank = o->rank,
			     .step = o->incarnation, .aux = o->epoch, .offset = o->reconnects,
			     .length = o->session,
			     .flags = c->h->hello_flags};
	struct zs_hello hl = {.job = o->job, .nonce = nonce, .incarnation = o->incarnation,
			      .epoch = o->epoch, .rank = o->rank, .flags = c->h->hello_flags};
	struct iovec iov[2];
	enum zs_status st;

	*fd = -1;
	if (jl + 1 > ZS_JOB_NAME_MAX)
		return zs_fail(err, ZS_EINVAL, "job name is too long");
	zs_sock_timeout(c->io.fd, o->timeout_ms);
	if ((st = nonce_of(c, nonce, err)))
		return st;
	if (o->tls && c->h->encrypts && (st = start_tls(c, o, nonce, err)))
		return st;
	/* the token itself never goes on the wire: its proof does */
	memcpy(payload, o->job, jl + 1);
	if (zs_hello_proof(&hl, o->token ? o->token : "", payload + jl + 1))
		return zs_fail(err, ZS_ENOMEM, "cannot compute the HELLO's proof (OpenSSL)");
	f.payload_len = jl + 1 + ZS_PROOF_LEN;
	zs_wire_encode(&f, h);
	iov[0] = (struct iovec){h, sizeof h};
	iov[1] = (struct iovec){payload, f.payload_len};
	if (zs_io_writev(&c->io, iov, 2) ||
	    (c->h->hello_fd ? zs_recv_with_fd(c->io.fd, h, sizeof h, fd)
			    : zs_io_read(&c->io, h, sizeof h)))
		return zs_fail(err, errno == EAGAIN ? ZS_ETIMEDOUT : ZS_EUNAVAIL,
			       "%s did not answer HELLO: %s", c->addr,
			       errno ? strerror(errno) : "connection closed");
	if (zs_wire_decode(h, &f, err))
		goto fail;
	if (f.op == ZS_OP_ERROR) {
		char msg[ZS_WIRE_MAX_ERR + 1];
		st = error_frame(c, &f, msg);
		zs_fail(err, st, "%s refused job '%s' rank %u: %s", c->addr, o->job, o->rank, msg);
		goto fail;
	}
	if (f.op != ZS_OP_HELLO_OK || f.job == 0) {
		zs_fail(err, ZS_EPROTO, "%s answered HELLO with %s", c->addr, zs_op_name(f.op));
		goto fail;
	}
	c->job = f.job;
	if (!c->h->inline_data) {
		if (f.aux == 0 || (c->h->hello_fd && *fd < 0)) {
			zs_fail(err, ZS_EPROTO, "%s sent no region for the %s data path", c->addr,
				c->ops->name);
			goto fail;
		}
		c->region_len = f.aux;
	}
	if (f.flags & ZS_WF_DEVICE) /* its shards' device, for device pushes */
		c->dev_ident = (uint32_t)f.offset;
	return ZS_OK;
fail:
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	return err ? err->code : ZS_EPROTO;
}

enum zs_status zs_connect(const struct zs_transport_ops *ops, const struct zs_conn_opts *o,
			  struct zs_conn **out, struct zs_error *err)
{
	const struct stream_hooks *h = ops->hooks;
	struct zs_conn *c;
	enum zs_status st;
	int timeout = o->timeout_ms > 0 ? o->timeout_ms : 10000, fd = -1;

	*out = NULL;
	if (!h) { /* not in this build: it says why */
		char why[256] = "not in this build";
		if (ops->available)
			ops->available(why, sizeof why);
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	}
	if (h->unix_addr != (o->addr[0] == '@'))
		return zs_fail(err, ZS_EINVAL, "'%s' is not a %s address", o->addr, ops->name);
	c = calloc(1, sizeof *c);
	if (!c)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	c->ops = ops;
	c->h = h;
	c->rank = o->rank;
	c->max_inflight = o->max_inflight ? o->max_inflight : 64;
	snprintf(c->addr, sizeof c->addr, "%s", o->addr);
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->io.fd = zs_dial(o->addr, timeout, err);
	if (c->io.fd < 0) {
		st = err ? err->code : ZS_EUNAVAIL;
		goto clean_c;
	}
	{
		struct zs_conn_opts oo = *o;
		oo.timeout_ms = timeout;
		st = hello(c, &oo, &fd, err);
	}
	if (st)
		goto clean_fd;
	if (h->attach) { /* while the socket is still ours alone */
		st = h->attach(c, o->addr, c->io.fd, c->region_len, fd, &c->ctx, err);
		fd = -1;
		if (st)
			goto clean_fd;
	} else if (fd >= 0) {
		close(fd);
	}
	zs_sock_timeout(c->io.fd, 0);
	if (pthread_create(&c->receiver, NULL, stream_receiver_main, c)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot start a receiver thread");
		goto clean_ctx;
	}
	if (pthread_create(&c->sender, NULL, stream_sender_main, c)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot start a sender thread");
		shutdown(c->io.fd, SHUT_RDWR);
		pthread_join(c->receiver, NULL);
		goto clean_ctx;
	}
	*out = c;
	return ZS_OK;

clean_ctx:
	if (c->ctx)
		h->detach(c->ctx);
clean_fd:
	close(c->io.fd);
	zs_records_free(c->io.rec);
clean_c:
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
	return st;
}

void zs_conn_shutdown(struct zs_conn *c)
{
	if (c)
		shutdown(c->io.fd, SHUT_RDWR); /* the receiver ends and breaks it */
}

bool zs_conn_broken(struct zs_conn *c, char *why, size_t len)
{
	bool b;

	pthread_mutex_lock(&c->mu);
	b = c->broken;
	if (b && why)
		snprintf(why, len, "%s", c->why);
	pthread_mutex_unlock(&c->mu);
	return b;
}

void zs_conn_close(struct zs_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	shutdown(c->io.fd, SHUT_RDWR);
	pthread_join(c->sender, NULL);
	pthread_join(c->receiver, NULL);
	if (c->ctx) /* every move flushed and completed before the frees */
		c->h->detach(c->ctx);
	while (c->all) {
		struct zs_req *r = c->all;
		c->all = r->all_next;
		free(r);
	}
	close(c->io.fd);
	zs_records_free(c->io.rec);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

struct zs_mr {
	void *buf;
	size_t len;
};

enum zs_status stream_reg(struct zs_conn *c, void *buf, size_t len, struct zs_mr **mr,
			  struct zs_error *err)
{
	(void)c;
	if (!buf || !len)
		return zs_fail(err, ZS_EINVAL, "an empty region cannot be registered");
	*mr = malloc(sizeof **mr);
	if (!*mr)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	**mr = (struct zs_mr){buf, len};
	return ZS_OK;
}

void stream_dereg(struct zs_mr *mr) { free(mr); }
