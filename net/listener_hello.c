/*
 * listener_hello.c - a connection's control frames that the listener
 * answers itself with the target's help: the HELLO (its proof of the job's
 * token over the connection's nonce, net/hello.h), a step's optimizer
 * hyperparameters (HPARAMS) and the job's world size by step (WORLD);
 * STARTTLS, which encrypts the rest of the connection (net/dtls.h).
 */
#include "net/listener_int.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/log.h"
#include "model/hparams.h"
#include "net/dtls.h"
#include "net/sockio.h"

#define MAX_HELLO 1024
#define TLS_HANDSHAKE_MS 10000

int lsn_on_hello(struct zs_lconn *c, const struct zs_frame *f)
{
	struct zs_listener *l = c->l;
	struct zs_error err = {0};
	char buf[MAX_HELLO + 1], *end;
	struct zs_frame r = {.op = ZS_OP_HELLO_OK, .req_id = f->req_id};
	struct zs_hello h;
	uint32_t job;

	if (c->hello || f->payload_len <= ZS_PROOF_LEN || f->payload_len > MAX_HELLO) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "bad HELLO");
		return -1;
	}
	if (zs_io_read(&c->io, buf, f->payload_len))
		return -1;
	buf[f->payload_len] = '\0';
	/* "job\0" and the proof, exactly (an older client's "job\0token\0"
	 * is refused here, its token unread) */
	end = memchr(buf, '\0', f->payload_len);
	if (!end || (size_t)(end - buf) + 1 + ZS_PROOF_LEN != f->payload_len) {
		lsn_send_error(c, f->req_id, ZS_EPROTO,
			       "a HELLO is the job's name and a proof of its token (a client older than the token's proof?)");
		return -1;
	}
	if ((f->flags & ZS_WF_ONE_SIDED) && (c->offsets || !l->path)) {
		lsn_send_error(c, f->req_id, ZS_EUNAVAIL, "this server offers no one-sided data path");
		return -1;
	}
	if (c->io.rec && strcmp(buf, c->tls_job)) {
		lsn_send_error(c, f->req_id, ZS_EINVAL,
			       "a HELLO for another job than the one its encryption was keyed for");
		return -1;
	}
	c->reader = c->tls_reader; /* keyed by the reader token: a reader's */
	h = (struct zs_hello){.job = buf, .proof = (const uint8_t *)end + 1, .nonce = c->nonce,
			      .incarnation = f->step, .epoch = f->aux, .rank = f->rank,
			      .reconnects = f->offset, .session = f->length,
			      .flags = f->flags, .reader = &c->reader,
			      .covered = c->io.rec || c->ep->pass_arena ||
					 (f->flags & ZS_WF_ONE_SIDED)};
	if (l->t.hello(l->t.ctx, &h, &job, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return -1;
	}
	c->hello = true;
	c->job = r.job = job;
	c->rank = f->rank;
	c->reconnects = f->offset;
	c->session = f->length;
	if (f->flags & ZS_WF_ONE_SIDED) /* the path's control frame follows */
		c->pth.on = c->offsets = true;
	if (c->offsets) /* the size of what its offsets address */
		r.aux = l->ar.len;
	if (c->ep->pass_arena && !c->pth.on && l->t.dev_ident && l->t.dev_map &&
	    (r.offset = l->t.dev_ident(l->t.ctx))) { /* shm: pushes from its device */
		r.flags = ZS_WF_DEVICE;
		c->dv.on = true;
	}
	return lsn_send_frame(c, &r, NULL, 0, c->ep->pass_arena ? l->ar.fd : -1);
}

/*
 * STARTTLS (net/dtls.h): the job's key for the role from the target, then
 * the handshake; a fresh nonce, inside, for the HELLO to prove over. Any
 * failure ends the connection (what OpenSSL read of it is gone).
 */
int lsn_on_starttls(struct zs_lconn *c, const struct zs_frame *f)
{
	struct zs_listener *l = c->l;
	struct zs_frame r = {.op = ZS_OP_STARTTLS_OK, .req_id = f->req_id};
	struct zs_frame nf = {.op = ZS_OP_NONCE};
	struct zs_error err = {0};
	uint8_t key[ZS_DTLS_PSK];
	char job[ZS_JOB_NAME_MAX];
	bool reader = f->flags & ZS_WF_READER;
	enum zs_status st;

	if (c->hello || c->io.rec || !c->ep->encrypts || !l->t.tls_key || !f->payload_len ||
	    f->payload_len > sizeof job) {
		lsn_send_error(c, f->req_id, ZS_EPROTO,
			       c->hello || c->io.rec ? "STARTTLS comes once, before the HELLO"
			       : !c->ep->encrypts || !l->t.tls_key
				       ? "this endpoint does not encrypt (its bytes do not leave the host)"
				       : "a STARTTLS names the job");
		return -1;
	}
	if (zs_io_read(&c->io, job, f->payload_len))
		return -1;
	if (job[f->payload_len - 1] || strlen(job) + 1 != f->payload_len) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "a STARTTLS names the job");
		return -1;
	}
	if (l->t.tls_key(l->t.ctx, job, reader, key, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return -1;
	}
	if (lsn_send_frame(c, &r, NULL, 0, -1)) {
		OPENSSL_cleanse(key, sizeof key);
		return -1;
	}
	/* a peer that stops mid-handshake does not hold the thread for long */
	zs_sock_timeout(c->io.fd, TLS_HANDSHAKE_MS);
	st = zs_dtls_handshake(c->io.fd, true, job, reader, key, &c->io.rec, &err);
	OPENSSL_cleanse(key, sizeof key);
	zs_sock_timeout(c->io.fd, 0);
	if (st) {
		zs_warn("data plane: refused an encrypted connection: %s", err.msg);
		return -1;
	}
	c->tls_reader = reader;
	snprintf(c->tls_job, sizeof c->tls_job, "%s", job);
	if (zs_hello_nonce(c->nonce))
		return -1;
	nf.payload_len = ZS_NONCE_LEN;
	return lsn_send_frame(c, &nf, c->nonce, ZS_NONCE_LEN, -1);
}

/* The optimizer's hyperparameters from a step on: the target answers. */
int lsn_on_hparams(struct zs_lconn *c, const struct zs_frame *f)
{
	struct zs_listener *l = c->l;
	struct zs_frame r = {.op = ZS_OP_PUSH_ACK, .req_id = f->req_id, .job = c->job,
			     .step = f->step};
	uint8_t in[ZS_HP_MAX_BYTES];
	struct zs_error err = {0};

	if (f->payload_len > sizeof in) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "a HPARAMS payload over its maximum size");
		return -1;
	}
	if (zs_io_read(&c->io, in, f->payload_len))
		return -1;
	if (!l->t.hparams) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "this server takes no HPARAMS");
		return 0;
	}
	if (l->t.hparams(l->t.ctx, c->job, c->rank, f->step, in, f->payload_len, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return 0;
	}
	return lsn_send_frame(c, &r, NULL, 0, -1);
}

/* The job's world size by step: the target answers. */
int lsn_on_world(struct zs_lconn *c, const struct zs_frame *f)
{
	struct zs_listener *l = c->l;
	struct zs_frame r = {.op = ZS_OP_PUSH_ACK, .req_id = f->req_id, .job = c->job,
			     .step = f->step};
	uint8_t in[ZS_WORLDS_BYTES(ZS_WORLD_HIST)];
	struct zs_error err = {0};

	if (f->payload_len > sizeof in) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "a WORLD payload over its maximum size");
		return -1;
	}
	if (zs_io_read(&c->io, in, f->payload_len))
		return -1;
	if (!l->t.world) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "this server takes no WORLD");
		return 0;
	}
	if (l->t.world(l->t.ctx, c->job, c->rank, in, f->payload_len, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return 0;
	}
	return lsn_send_frame(c, &r, NULL, 0, -1);
}
