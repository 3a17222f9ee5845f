/*
 * server.c - the shard server's side of rdma: the listener's one-sided path
 * (zs_rdma_path, net/listener.h). The whole arena is registered once, at
 * start; each trainer's queue pair is made when its RDMA_QP control frame
 * comes (again after a failure); a thread takes the pushes' notifications
 * (WRITE_WITH_IMM: the request id) off the one completion queue and hands
 * them to the listener.
 */
#include "rdma/verbs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include "base/util.h"
#include "net/wire.h"

#define SRV_RECVS 256 /* notifications a queue pair can take before reposting */

struct sqp {
	struct ibv_qp *qp;
	void *owner;
};

struct zs_rdma_srv {
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq; /* the pushes' notifications, of every queue pair */
	void *arena;
	size_t len;
	pthread_mutex_t mu; /* qps */
	struct sqp *qps;
	size_t n_qps;
	pthread_t th;
	volatile int stop;
};

static int post_recv(struct ibv_qp *qp)
{
	struct ibv_recv_wr wr = {.wr_id = qp->qp_num, .num_sge = 0}, *bad = NULL;
	return ibv_post_recv(qp, &wr, &bad);
}

static void srv_handle(struct zs_rdma_srv *s, const struct ibv_wc *wc, int n)
{
	for (int i = 0; i < n; i++) {
		void *owner = NULL;
		pthread_mutex_lock(&s->mu);
		for (size_t k = 0; k < s->n_qps; k++)
			if (s->qps[k].qp->qp_num == wc[i].qp_num) {
				owner = s->qps[k].owner;
				if (wc[i].status == IBV_WC_SUCCESS)
					post_recv(s->qps[k].qp); /* its replacement */
				break;
			}
		if (owner && wc[i].status == IBV_WC_SUCCESS &&
		    wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM)
			zs_lconn_hold(owner);
		else
			owner = NULL; /* a flush: the queue pair is going away */
		pthread_mutex_unlock(&s->mu);
		if (owner)
			zs_lconn_landed(owner, ntohl(wc[i].imm_data));
	}
}

/* Takes notifications off the completion queue: polls while they come,
 * then sleeps on the channel (bounded, to see stop). */
static void *srv_main(void *arg)
{
	struct zs_rdma_srv *s = arg;
	unsigned idle = 0;

	while (!s->stop) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(s->cq, 16, wc);
		if (n > 0) {
			srv_handle(s, wc, n);
			idle = 0;
			continue;
		}
		if (n < 0 || ++idle < 200)
			continue;
		if (ibv_req_notify_cq(s->cq, 0))
			break;
		n = ibv_poll_cq(s->cq, 16, wc); /* any that came before arming */
		if (n > 0)
			srv_handle(s, wc, n);
		else
			rdma_wait_channel(s->ch);
		idle = 0;
	}
	return NULL;
}

static enum zs_status srv_open(void *arena, size_t len, void **out, struct zs_error *err)
{
	struct zs_rdma_srv *s;
	char why[256];
	int fl;

	*out = NULL;
	if (rdma_dev_open(why, sizeof why))
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	s = calloc(1, sizeof *s);
	if (!s) {
		rdma_dev_close();
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	s->arena = arena;
	s->len = len;
	pthread_mutex_init(&s->mu, NULL);
	/* once, for every shard it will ever hold: no per-message handshake */
	s->mr = ibv_reg_mr(rdma_dev.pd, arena, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr) {
		char b[32];
		zs_fail(err, ZS_EUNAVAIL,
			"cannot register the %s shard arena with %s: %s%s",
			zs_fmt_bytes(len, b, sizeof b), rdma_dev.name, strerror(errno),
			errno == ENOMEM || errno == EPERM ? " (the memlock limit? ulimit -l)" : "");
		goto fail;
	}
	s->ch = ibv_create_comp_channel(rdma_dev.ctx);
	s->cq = s->ch ? ibv_create_cq(rdma_dev.ctx, 4096, s, s->ch, 0) : NULL;
	if (!s->cq) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a completion queue on %s: %s", rdma_dev.name,
			strerror(errno));
		goto fail;
	}
	fl = fcntl(s->ch->fd, F_GETFL);
	fcntl(s->ch->fd, F_SETFL, fl | O_NONBLOCK);
	if (ibv_req_notify_cq(s->cq, 0) || pthread_create(&s->th, NULL, srv_main, s)) {
		zs_fail(err, ZS_ENOMEM, "cannot start the rdma completion thread");
		goto fail;
	}
	*out = s;
	return ZS_OK;
fail:
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->ch)
		ibv_destroy_comp_channel(s->ch);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	pthread_mutex_destroy(&s->mu);
	free(s);
	rdma_dev_close();
	return err ? err->code : ZS_EUNAVAIL;
}

static enum zs_status srv_accept(struct zs_rdma_srv *s, const struct zs_rdma_info *peer,
			       void *owner, struct zs_rdma_info *mine, void **qp_out,
			       struct zs_error *err)
{
	struct ibv_qp *qp = rdma_qp_create(s->cq, 1, SRV_RECVS, err);
	struct sqp *g;

	*qp_out = NULL;
	if (!qp)
		return err ? err->code : ZS_EUNAVAIL;
	rdma_my_info(qp, mine);
	mine->rkey = s->mr->rkey;
	mine->addr = (uint64_t)(uintptr_t)s->arena;
	mine->len = s->len;
	for (int i = 0; i < SRV_RECVS; i++)
		if (post_recv(qp)) {
			zs_fail(err, ZS_EUNAVAIL, "cannot post receives on %s: %s", rdma_dev.name,
				strerror(errno));
			ibv_destroy_qp(qp);
			return ZS_EUNAVAIL;
		}
	if (rdma_qp_connect(qp, mine, peer, err)) {
		ibv_destroy_qp(qp);
		return err ? err->code : ZS_EUNAVAIL;
	}
	pthread_mutex_lock(&s->mu);
	g = realloc(s->qps, (s->n_qps + 1) * sizeof *g);
	if (g) {
		s->qps = g;
		s->qps[s->n_qps++] = (struct sqp){qp, owner};
	}
	pthread_mutex_unlock(&s->mu);
	if (!g) {
		ibv_destroy_qp(qp);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	*qp_out = qp;
	return ZS_OK;
}

static void srv_qp_free(struct zs_rdma_srv *s, void *qp)
{
	if (!qp)
		return;
	pthread_mutex_lock(&s->mu);
	for (size_t k = 0; k < s->n_qps; k++)
		if (s->qps[k].qp == qp) {
			s->qps[k] = s->qps[--s->n_qps];
			break;
		}
	pthread_mutex_unlock(&s->mu);
	ibv_destroy_qp(qp);
}

static void srv_close(void *ctx)
{
	struct zs_rdma_srv *s = ctx;

	if (!s)
		return;
	s->stop = 1;
	pthread_join(s->th, NULL);
	ibv_destroy_cq(s->cq);
	ibv_destroy_comp_channel(s->ch);
	ibv_dereg_mr(s->mr);
	pthread_mutex_destroy(&s->mu);
	free(s->qps);
	free(s);
	rdma_dev_close();
}

/* A trainer's queue pair (again after a failure): ours in reply. */
static enum zs_status srv_control(void *ctx, struct zs_lconn *c, void **state, const uint8_t *in,
				  size_t len, uint8_t *out, size_t *out_len, struct zs_error *err)
{
	struct zs_rdma_srv *s = ctx;
	struct zs_rdma_info peer, mine;
	void *qp;
	enum zs_status st;

	if (len != ZS_RDMA_INFO)
		return zs_fail(err, ZS_EPROTO, "RDMA_QP carries %d bytes, not %zu", ZS_RDMA_INFO,
			       len);
	zs_rdma_info_unpack(in, &peer);
	if ((st = srv_accept(s, &peer, c, &mine, &qp, err)))
		return st;
	srv_qp_free(s, *state); /* the one that failed, if any */
	*state = qp;
	zs_rdma_info_pack(&mine, out);
	*out_len = ZS_RDMA_INFO;
	return ZS_OK;
}

static void srv_conn_end(void *ctx, void *state) { srv_qp_free(ctx, state); }

const struct zs_listener_path zs_rdma_path = {
	.name = "rdma",
	.control_op = ZS_OP_RDMA_QP,
	.open = srv_open,
	.control = srv_control,
	.conn_end = srv_conn_end,
	.close = srv_close,
};
