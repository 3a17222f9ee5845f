/*
 * listener_hello.c - a connection's control frames that the listener
 * answers itself with the target's help: the HELLO (its proof of the job's
 * token over the connection's nonce, net/hello.h), a step's optimizer
 * hyperparameters (HPARAMS) and the job's world size by step (WORLD).
 */
#include "net/listener_int.h"

#include <stdio.h>
#include <string.h>

#include "model/hparams.h"
#include "net/sockio.h"

#define MAX_HELLO 1024

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
	if (zs_read_full(c->fd, buf, f->payload_len))
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
	h = (struct zs_hello){.job = buf, .proof = (const uint8_t *)end + 1, .nonce = c->nonce,
			      .incarnation = f->step, .epoch = f->aux, .rank = f->rank,
			      .flags = f->flags, .reader = &c->reader};
	if (l->t.hello(l->t.ctx, &h, &job, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return -1;
	}
	c->hello = true;
	c->job = r.job = job;
	c->rank = f->rank;
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
	if (zs_read_full(c->fd, in, f->payload_len))
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
	if (zs_read_full(c->fd, in, f->payload_len))
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
