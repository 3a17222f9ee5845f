/*
 * rdma.c - the ibverbs transport (see rdma.h), built where libibverbs is
 * present; rdma/none.c stands in for it otherwise.
 */
#include "rdma/rdma.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/le.h"
#include "base/util.h"
#include "net/sockio.h"
#include "net/stream.h"
#include "net/wire.h"

/* ---------------------------------------------- the process's device */

static struct {
	pthread_mutex_t mu;
	int refs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	uint8_t port_num;
	int gid_index;
	union ibv_gid gid;
	char name[64];
} G = {.mu = PTHREAD_MUTEX_INITIALIZER};

static unsigned env_uint(const char *name, unsigned def, unsigned lo, unsigned hi)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return def;
	x = strtoul(v, &end, 10);
	return *end || x < lo || x > hi ? def : (unsigned)x;
}

static bool ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(g->raw, pre, sizeof pre);
}

/* Opens the device (once per process); caller holds G.mu. */
static enum zs_status dev_open_locked(char *why, size_t wl)
{
	struct ibv_device **list;
	const char *want = getenv("ZSHARD_RDMA_DEV");
	int n = 0, pick = -1;

	if (G.refs++)
		return ZS_OK;
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list || n == 0) { /* NULL with ENOSYS where the kernel has no RDMA */
		snprintf(why, wl, "no RDMA device found (ibv_get_device_list: %s)",
			 list ? "none" : strerror(errno ? errno : ENODEV));
		goto fail_list;
	}
	for (int i = 0; i < n && pick < 0; i++)
		if (!want || !*want || !strcmp(ibv_get_device_name(list[i]), want))
			pick = i;
	if (pick < 0) {
		snprintf(why, wl, "no RDMA device named '%s' (ZSHARD_RDMA_DEV)", want);
		goto fail_list;
	}
	snprintf(G.name, sizeof G.name, "%s", ibv_get_device_name(list[pick]));
	G.ctx = ibv_open_device(list[pick]);
	if (!G.ctx) {
		snprintf(why, wl, "cannot open RDMA device %s: %s", G.name, strerror(errno));
		goto fail_list;
	}
	ibv_free_device_list(list);
	list = NULL;
	G.port_num = (uint8_t)env_uint("ZSHARD_RDMA_PORT", 1, 1, 255);
	if (ibv_query_device(G.ctx, &G.dev) || ibv_query_port(G.ctx, G.port_num, &G.port)) {
		snprintf(why, wl, "cannot query RDMA device %s port %u: %s", G.name, G.port_num,
			 strerror(errno));
		goto fail_ctx;
	}
	if (G.port.state != IBV_PORT_ACTIVE) {
		snprintf(why, wl, "port %u of RDMA device %s is down (state %s)", G.port_num, G.name,
			 ibv_port_state_str(G.port.state));
		goto fail_ctx;
	}
	G.gid_index = -1;
	if (getenv("ZSHARD_RDMA_GID") && *getenv("ZSHARD_RDMA_GID")) {
		G.gid_index = (int)env_uint("ZSHARD_RDMA_GID", 0, 0, 1023);
		if (ibv_query_gid(G.ctx, G.port_num, G.gid_index, &G.gid)) {
			snprintf(why, wl, "GID index %d of %s: %s", G.gid_index, G.name,
				 strerror(errno));
			goto fail_ctx;
		}
	} else {
		for (int i = 0; i < G.port.gid_tbl_len && G.gid_index < 0; i++) {
			union ibv_gid g;
			if (!ibv_query_gid(G.ctx, G.port_num, i, &g) && ipv4_mapped(&g)) {
				G.gid_index = i;
				G.gid = g;
			}
		}
		if (G.gid_index < 0) {
			G.gid_index = 0;
			ibv_query_gid(G.ctx, G.port_num, 0, &G.gid);
		}
	}
	G.pd = ibv_alloc_pd(G.ctx);
	if (!G.pd) {
		snprintf(why, wl, "cannot allocate a protection domain on %s: %s", G.name,
			 strerror(errno));
		goto fail_ctx;
	}
	return ZS_OK;
fail_ctx:
	ibv_close_device(G.ctx);
	G.ctx = NULL;
fail_list:
	if (list)
		ibv_free_device_list(list);
	G.refs--;
	return ZS_EUNAVAIL;
}

static enum zs_status dev_open(char *why, size_t wl)
{
	enum zs_status st;
	pthread_mutex_lock(&G.mu);
	st = dev_open_locked(why, wl);
	pthread_mutex_unlock(&G.mu);
	return st;
}

static void dev_close(void)
{
	pthread_mutex_lock(&G.mu);
	if (G.refs > 0 && --G.refs == 0) {
		ibv_dealloc_pd(G.pd);
		ibv_close_device(G.ctx);
		G.pd = NULL;
		G.ctx = NULL;
	}
	pthread_mutex_unlock(&G.mu);
}

enum zs_status zs_rdma_probe(uint64_t lock_bytes, char *note, size_t len)
{
	struct rlimit rl;
	char why[256];
	enum zs_status st = dev_open(why, sizeof why);

	if (st) {
		snprintf(note, len, "%s", why);
		return st;
	}
	if (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < lock_bytes) {
		char a[32], b[32];
		snprintf(note, len,
			 "the memlock limit (%s) is below the %s the shard arena registers: raise it (ulimit -l, LimitMEMLOCK=) or lower --capacity",
			 zs_fmt_bytes(rl.rlim_cur, a, sizeof a), zs_fmt_bytes(lock_bytes, b, sizeof b));
		dev_close();
		return ZS_EUNAVAIL;
	}
	snprintf(note, len, "%s port %u (%s, GID index %d, active MTU %d)", G.name, G.port_num,
		 G.port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
		 G.gid_index, 128 << G.port.active_mtu);
	dev_close();
	return ZS_OK;
}

/* ---------------------------------------------------- queue-pair steps */

static struct ibv_qp *qp_create(struct ibv_cq *cq, unsigned depth, unsigned rdepth,
				struct zs_error *err)
{
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				     .cap = {.max_send_wr = depth, .max_recv_wr = rdepth,
					     .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = G.port_num,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_WRITE};
	struct ibv_qp *qp = ibv_create_qp(G.pd, &a);

	if (!qp) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a queue pair on %s: %s", G.name,
			strerror(errno));
		return NULL;
	}
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS)) {
		zs_fail(err, ZS_EUNAVAIL, "cannot initialize a queue pair on %s: %s", G.name,
			strerror(errno));
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

static void my_info(struct ibv_qp *qp, struct zs_rdma_info *i)
{
	memset(i, 0, sizeof *i);
	i->qpn = qp->qp_num;
	i->psn = qp->qp_num & 0xffffff; /* any 24-bit start; distinct per QP */
	i->lid = G.port.lid;
	i->mtu = (uint8_t)G.port.active_mtu;
	memcpy(i->gid, G.gid.raw, 16);
}

/* INIT -> RTR -> RTS towards peer. */
static enum zs_status qp_connect(struct ibv_qp *qp, const struct zs_rdma_info *me,
				 const struct zs_rdma_info *peer, struct zs_error *err)
{
	int rd = G.dev.max_qp_rd_atom > 0 ? G.dev.max_qp_rd_atom : 1;
	int rd_in = G.dev.max_qp_init_rd_atom > 0 ? G.dev.max_qp_init_rd_atom : 1;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = (enum ibv_mtu)(peer->mtu < me->mtu ? peer->mtu : me->mtu),
				.dest_qp_num = peer->qpn, .rq_psn = peer->psn,
				.max_dest_rd_atomic = (uint8_t)(rd > 16 ? 16 : rd),
				.min_rnr_timer = 12};
	bool global = false;

	for (int k = 0; k < 16; k++)
		global |= peer->gid[k] != 0;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.port_num = G.port_num;
	if (global || G.port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)G.gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
		return zs_fail(err, ZS_EUNAVAIL, "queue pair to RTR failed on %s: %s", G.name,
			       strerror(errno));
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14; /* 4.096 us << 14 = 67 ms per try */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = (uint8_t)(rd_in > 16 ? 16 : rd_in);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return zs_fail(err, ZS_EUNAVAIL, "queue pair to RTS failed on %s: %s", G.name,
			       strerror(errno));
	return ZS_OK;
}

static void qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	if (qp)
		ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* Sleeps until the armed completion queue of ch has an event, at most
 * 100 ms (so that its thread sees a stop). */
static void wait_channel(struct ibv_comp_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *cq;
	void *ctx;

	if (poll(&p, 1, 100) > 0 && !ibv_get_cq_event(ch, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
}

/* ---------------------------------------------------------- the server */

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
	struct zs_rdma_srv_hooks h;
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
			s->h.hold(owner);
		else
			owner = NULL; /* a flush: the queue pair is going away */
		pthread_mutex_unlock(&s->mu);
		if (owner)
			s->h.imm(owner, ntohl(wc[i].imm_data));
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
			wait_channel(s->ch);
		idle = 0;
	}
	return NULL;
}

enum zs_status zs_rdma_srv_open(void *arena, size_t len, const struct zs_rdma_srv_hooks *h,
				struct zs_rdma_srv **out, struct zs_error *err)
{
	struct zs_rdma_srv *s;
	char why[256];
	int fl;

	*out = NULL;
	if (dev_open(why, sizeof why))
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	s = calloc(1, sizeof *s);
	if (!s) {
		dev_close();
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	s->arena = arena;
	s->len = len;
	s->h = *h;
	pthread_mutex_init(&s->mu, NULL);
	/* once, for every shard it will ever hold: no per-message handshake */
	s->mr = ibv_reg_mr(G.pd, arena, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr) {
		char b[32];
		zs_fail(err, ZS_EUNAVAIL,
			"cannot register the %s shard arena with %s: %s%s",
			zs_fmt_bytes(len, b, sizeof b), G.name, strerror(errno),
			errno == ENOMEM || errno == EPERM ? " (the memlock limit? ulimit -l)" : "");
		goto fail;
	}
	s->ch = ibv_create_comp_channel(G.ctx);
	s->cq = s->ch ? ibv_create_cq(G.ctx, 4096, s, s->ch, 0) : NULL;
	if (!s->cq) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a completion queue on %s: %s", G.name,
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
	dev_close();
	return err ? err->code : ZS_EUNAVAIL;
}

enum zs_status zs_rdma_srv_accept(struct zs_rdma_srv *s, const struct zs_rdma_info *peer,
				  void *owner, struct zs_rdma_info *mine, void **qp_out,
				  struct zs_error *err)
{
	struct ibv_qp *qp = qp_create(s->cq, 1, SRV_RECVS, err);
	struct sqp *g;

	*qp_out = NULL;
	if (!qp)
		return err ? err->code : ZS_EUNAVAIL;
	my_info(qp, mine);
	mine->rkey = s->mr->rkey;
	mine->addr = (uint64_t)(uintptr_t)s->arena;
	mine->len = s->len;
	for (int i = 0; i < SRV_RECVS; i++)
		if (post_recv(qp)) {
			zs_fail(err, ZS_EUNAVAIL, "cannot post receives on %s: %s", G.name,
				strerror(errno));
			ibv_destroy_qp(qp);
			return ZS_EUNAVAIL;
		}
	if (qp_connect(qp, mine, peer, err)) {
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

void zs_rdma_srv_qp_free(struct zs_rdma_srv *s, void *qp)
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

void zs_rdma_srv_close(struct zs_rdma_srv *s)
{
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
	dev_close();
}

/* ---------------------------------------------------------- the client */

/* Regions the caller registered (zs_mem_register): one process-wide list,
 * since every connection shares the protection domain. */
struct zs_mr {
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	struct zs_mr *next;
};
static struct zs_mr *regions;
static pthread_mutex_t regions_mu = PTHREAD_MUTEX_INITIALIZER;

/* One transfer (a request's bytes), posted in chunks. */
struct rop {
	struct zs_req *r;
	bool write;
	uint8_t *local;
	size_t bytes, posted;
	uint64_t roff;
	uint32_t lkey;
	struct ibv_mr *own; /* registered for this transfer only */
	unsigned inflight;
	enum zs_status st;
	char msg[ZS_ERRMSG_MAX];
	uint64_t bad_off;
	uint32_t bad_key;
	uint32_t imm; /* writes: the request's id, carried by the last piece */
	struct rop *next; /* pending */
};

struct rconn {
	struct zs_conn *c;
	char addr[ZS_ADDR_MAX];
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct zs_rdma_info me, srv;
	unsigned depth;
	size_t chunk;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned outstanding;    /* work requests posted, not completed */
	struct rop *pending, *pending_tail; /* waiting for the queue pair or room */
	bool qp_ok;              /* RTS, no failure seen */
	bool reconnecting;       /* a new queue pair waits for the server's reply */
	bool broken, stop;
	char last_err[ZS_ERRMSG_MAX];
	uint64_t bad_off;
	uint32_t bad_key;
	pthread_t th;
};

static struct zs_mr *region_of(const void *p, size_t n)
{
	const uint8_t *b = p;
	struct zs_mr *m;

	pthread_mutex_lock(&regions_mu);
	for (m = regions; m; m = m->next)
		if (b >= m->buf && b + n <= m->buf + m->len)
			break;
	pthread_mutex_unlock(&regions_mu);
	return m;
}

static enum zs_status rdma_reg(struct zs_conn *c, void *buf, size_t len, struct zs_mr **out,
			       struct zs_error *err)
{
	struct zs_mr *m;
	char why[256];

	(void)c;
	if (!buf || !len)
		return zs_fail(err, ZS_EINVAL, "an empty region cannot be registered");
	if (dev_open(why, sizeof why))
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	m = calloc(1, sizeof *m);
	if (!m) {
		dev_close();
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	m->mr = ibv_reg_mr(G.pd, buf, len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	if (!m->mr) {
		free(m);
		dev_close();
		return zs_fail(err, ZS_EUNAVAIL, "cannot register %zu bytes with %s: %s", len,
			       G.name, strerror(errno));
	}
	m->buf = buf;
	m->len = len;
	pthread_mutex_lock(&regions_mu);
	m->next = regions;
	regions = m;
	pthread_mutex_unlock(&regions_mu);
	*out = m;
	return ZS_OK;
}

static void rdma_dereg(struct zs_mr *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&regions_mu);
	for (struct zs_mr **p = &regions; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			break;
		}
	pthread_mutex_unlock(&regions_mu);
	ibv_dereg_mr(m->mr);
	free(m);
	dev_close();
}

/* Posts what fits of the pending transfers; caller holds rc->mu. A
 * transfer that cannot be posted at all joins *done (finish it unlocked). */
static void pump(struct rconn *rc, struct rop **done)
{
	while (rc->pending && rc->qp_ok && !rc->stop && rc->outstanding < rc->depth) {
		struct rop *o = rc->pending;
		size_t n = o->bytes - o->posted < rc->chunk ? o->bytes - o->posted : rc->chunk;
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)(o->local + o->posted),
				      .length = (uint32_t)n, .lkey = o->lkey};
		bool last = o->posted + n == o->bytes;
		struct ibv_send_wr wr = {.wr_id = (uint64_t)(uintptr_t)o, .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = !o->write ? IBV_WR_RDMA_READ
						 : last ? IBV_WR_RDMA_WRITE_WITH_IMM
							: IBV_WR_RDMA_WRITE,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad = NULL;
		if (o->write && last) /* the notification: lands after every piece (RC) */
			wr.imm_data = htonl(o->imm);
		wr.wr.rdma.remote_addr = rc->srv.addr + o->roff + o->posted + o->bad_off;
		wr.wr.rdma.rkey = rc->srv.rkey + o->bad_key;
		if (ibv_post_send(rc->qp, &wr, &bad)) {
			zs_fmt(o->msg, sizeof o->msg, "cannot post an RDMA %s to %s: %s",
			       o->write ? "write" : "read", rc->addr, strerror(errno));
			o->st = ZS_EIO;
			o->posted = o->bytes;
			rc->pending = o->next;
			if (!rc->pending)
				rc->pending_tail = NULL;
			o->next = NULL;
			if (!o->inflight) { /* nothing on the wire: done now */
				o->next = *done;
				*done = o;
			}
			continue;
		}
		o->posted += n;
		o->inflight++;
		rc->outstanding++;
		if (o->posted == o->bytes) {
			rc->pending = o->next;
			if (!rc->pending)
				rc->pending_tail = NULL;
			o->next = NULL;
		}
	}
}

static void rop_free_done(struct rconn *rc, struct rop *o)
{
	if (o->own)
		ibv_dereg_mr(o->own);
	stream_rdma_done(rc->c, o->r, o->st, o->msg);
	free(o);
}

static void finish_all(struct rconn *rc, struct rop *list)
{
	while (list) {
		struct rop *o = list;
		list = o->next;
		rop_free_done(rc, o);
	}
}

/* Fails every transfer not yet on the wire; caller holds rc->mu. Returns
 * them as a list for rop_free_done outside the lock. */
static struct rop *fail_pending(struct rconn *rc, enum zs_status st, const char *why)
{
	struct rop *head = NULL;

	while (rc->pending) {
		struct rop *o = rc->pending;
		rc->pending = o->next;
		if (o->st == ZS_OK) {
			o->st = st;
			zs_fmt(o->msg, sizeof o->msg, "%s", why);
		}
		o->posted = o->bytes;
		if (o->inflight) { /* its completions finish it */
			o->next = NULL;
			continue;
		}
		o->next = head;
		head = o;
	}
	rc->pending_tail = NULL;
	return head;
}

/* After a failure, once nothing is on the wire: a new queue pair, offered
 * to the server over the control connection. Caller holds rc->mu; what
 * cannot wait for it any more joins *done. */
static void reconnect(struct rconn *rc, struct rop **done)
{
	struct zs_error err = {0};
	uint8_t info[ZS_RDMA_INFO];
	struct rop *failed;

	if (rc->reconnecting || rc->broken || rc->stop || rc->outstanding)
		return;
	ibv_destroy_qp(rc->qp);
	rc->qp = qp_create(rc->cq, rc->depth, 1, &err);
	if (rc->qp) {
		my_info(rc->qp, &rc->me);
		zs_rdma_info_pack(&rc->me, info);
		if (!stream_send_control(rc->c, ZS_OP_RDMA_QP, info, sizeof info)) {
			rc->reconnecting = true;
			return;
		}
		zs_fmt(err.msg, sizeof err.msg, "the connection to %s is closing", rc->addr);
	}
	rc->broken = true;
	zs_fmt(rc->last_err, sizeof rc->last_err, "cannot replace the failed queue pair: %s",
	       err.msg);
	failed = fail_pending(rc, ZS_EUNAVAIL, rc->last_err);
	while (failed) {
		struct rop *o = failed;
		failed = o->next;
		o->next = *done;
		*done = o;
	}
}

static const char *op_name(const struct rop *o) { return o->write ? "write" : "read"; }

static void handle_wc(struct rconn *rc, const struct ibv_wc *wc, struct rop **done)
{
	struct rop *o = (struct rop *)(uintptr_t)wc->wr_id;

	rc->outstanding--;
	o->inflight--;
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR || !rc->last_err[0])
			zs_fmt(rc->last_err, sizeof rc->last_err,
			       "RDMA %s of %zu bytes at offset %llu of %s's registered region failed: %s",
			       op_name(o), o->bytes, (unsigned long long)o->roff, rc->addr,
			       ibv_wc_status_str(wc->status));
		if (o->st == ZS_OK) {
			o->st = wc->status == IBV_WC_REM_ACCESS_ERR ||
					wc->status == IBV_WC_REM_INV_REQ_ERR ||
					wc->status == IBV_WC_LOC_PROT_ERR
				? ZS_EINVAL : ZS_EIO;
			zs_fmt(o->msg, sizeof o->msg, "%s", rc->last_err);
		}
		rc->qp_ok = false; /* the queue pair is in error: replaced once drained */
		o->posted = o->bytes; /* nothing more of it is posted */
		for (struct rop **p = &rc->pending; *p; p = &(*p)->next)
			if (*p == o) {
				*p = o->next;
				if (rc->pending_tail == o) {
					rc->pending_tail = NULL;
					for (struct rop *q = rc->pending; q; q = q->next)
						rc->pending_tail = q;
				}
				break;
			}
	}
	if (!o->inflight && o->posted == o->bytes) {
		o->next = *done;
		*done = o;
	}
}

/* Handles n completions (none is fine): finishes transfers, replaces a
 * failed queue pair once it is drained, posts what waits. True once the
 * connection stops with nothing on the wire. */
static bool cq_handle(struct rconn *rc, const struct ibv_wc *wc, int n)
{
	struct rop *done = NULL;
	bool end;

	pthread_mutex_lock(&rc->mu);
	for (int i = 0; i < n; i++)
		handle_wc(rc, &wc[i], &done);
	if (n > 0) {
		if (!rc->qp_ok && !rc->outstanding && !rc->broken && !rc->stop)
			reconnect(rc, &done);
		pump(rc, &done);
	}
	end = rc->stop && !rc->outstanding && !done;
	pthread_cond_broadcast(&rc->cv);
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, done);
	return end;
}

static void *cq_main(void *arg)
{
	struct rconn *rc = arg;
	unsigned idle = 0;

	for (;;) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(rc->cq, 16, wc);

		if (n < 0 || cq_handle(rc, wc, n))
			break;
		if (n > 0) {
			idle = 0;
			continue;
		}
		if (++idle < 200) /* a short spin: completions come back in microseconds */
			continue;
		/* idle: sleep on the completion channel (bounded, to see stop) */
		if (ibv_req_notify_cq(rc->cq, 0))
			break;
		n = ibv_poll_cq(rc->cq, 16, wc); /* any that came before arming */
		if (n > 0) {
			if (cq_handle(rc, wc, n))
				break;
		} else {
			wait_channel(rc->ch);
		}
		idle = 0;
	}
	return NULL;
}

static enum zs_status start(void *ctx, struct zs_req *r, bool write, void *local,
			    size_t bytes, uint64_t off, struct zs_error *err)
{
	struct rconn *rc = ctx;
	struct zs_mr *m = region_of(local, bytes);
	struct rop *o = calloc(1, sizeof *o);

	if (!o)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	*o = (struct rop){.r = r, .write = write, .local = local, .bytes = bytes, .roff = off,
			  .imm = (uint32_t)stream_req_id(r)};
	if (m) {
		o->lkey = m->mr->lkey;
	} else { /* not registered by the caller: for this transfer only */
		o->own = ibv_reg_mr(G.pd, local, bytes, IBV_ACCESS_LOCAL_WRITE);
		if (!o->own) {
			free(o);
			return zs_fail(err, ZS_EUNAVAIL, "cannot register %zu bytes with %s: %s",
				       bytes, G.name, strerror(errno));
		}
		o->lkey = o->own->lkey;
	}
	pthread_mutex_lock(&rc->mu);
	if (rc->broken || rc->stop) {
		pthread_mutex_unlock(&rc->mu);
		if (o->own)
			ibv_dereg_mr(o->own);
		free(o);
		return zs_fail(err, ZS_EUNAVAIL, "the RDMA connection to %s is down: %s", rc->addr,
			       rc->last_err[0] ? rc->last_err : "closed");
	}
	if (!write && (rc->bad_off || rc->bad_key)) {
		o->bad_off = rc->bad_off;
		o->bad_key = rc->bad_key;
		rc->bad_off = 0;
		rc->bad_key = 0;
	}
	if (rc->pending_tail)
		rc->pending_tail->next = o;
	else
		rc->pending = o;
	rc->pending_tail = o;
	{
		struct rop *done = NULL;
		pump(rc, &done);
		pthread_mutex_unlock(&rc->mu);
		finish_all(rc, done);
	}
	return ZS_OK;
}

static enum zs_status r_read(void *ctx, struct zs_req *r, void *dst, size_t bytes, uint64_t off,
			     struct zs_error *err)
{
	return start(ctx, r, false, dst, bytes, off, err);
}

static enum zs_status r_write(void *ctx, struct zs_req *r, const void *src, size_t bytes,
			      uint64_t off, struct zs_error *err)
{
	return start(ctx, r, true, (void *)src, bytes, off, err);
}

static void r_qp_reply(void *ctx, const uint8_t *info)
{
	struct rconn *rc = ctx;
	struct zs_error err = {0};
	struct zs_rdma_info srv;
	struct rop *done = NULL;

	zs_rdma_info_unpack(info, &srv);
	pthread_mutex_lock(&rc->mu);
	rc->reconnecting = false;
	rc->srv = srv;
	if (qp_connect(rc->qp, &rc->me, &srv, &err)) {
		rc->broken = true;
		zs_fmt(rc->last_err, sizeof rc->last_err, "%s", err.msg);
		done = fail_pending(rc, ZS_EUNAVAIL, rc->last_err);
	} else {
		rc->qp_ok = true;
		rc->last_err[0] = '\0';
		pump(rc, &done);
	}
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, done);
}

static void r_flush(void *ctx)
{
	struct rconn *rc = ctx;
	struct rop *list;

	pthread_mutex_lock(&rc->mu);
	rc->broken = true;
	qp_to_error(rc->qp); /* what is on the wire completes with a flush error */
	list = fail_pending(rc, ZS_EUNAVAIL, "the connection to the server broke");
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, list);
}

static void r_close(void *ctx)
{
	struct rconn *rc = ctx;
	struct rop *list;

	pthread_mutex_lock(&rc->mu);
	rc->stop = true;
	qp_to_error(rc->qp);
	list = fail_pending(rc, ZS_ECANCELED, "connection closed");
	pthread_mutex_unlock(&rc->mu);
	finish_all(rc, list);
	pthread_join(rc->th, NULL); /* it leaves once every work request completed */
	if (rc->qp)
		ibv_destroy_qp(rc->qp);
	ibv_destroy_cq(rc->cq);
	ibv_destroy_comp_channel(rc->ch);
	pthread_cond_destroy(&rc->cv);
	pthread_mutex_destroy(&rc->mu);
	free(rc);
	dev_close();
}

static enum zs_status r_setup(struct zs_conn *c, int fd, uint64_t arena_len, int timeout_ms,
			      void **out, struct zs_error *err)
{
	struct rconn *rc;
	uint8_t h[ZS_WIRE_HDR], info[ZS_RDMA_INFO];
	struct zs_frame f = {.op = ZS_OP_RDMA_QP, .payload_len = ZS_RDMA_INFO};
	struct iovec iov[2] = {{h, sizeof h}, {info, sizeof info}};
	char why[256];
	int fl;

	(void)timeout_ms;
	*out = NULL;
	if (dev_open(why, sizeof why))
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	rc = calloc(1, sizeof *rc);
	if (!rc) {
		dev_close();
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	rc->c = c;
	rc->depth = env_uint("ZSHARD_RDMA_DEPTH", 128, 1, 16384);
	if (rc->depth > (unsigned)G.dev.max_qp_wr && G.dev.max_qp_wr > 0)
		rc->depth = (unsigned)G.dev.max_qp_wr;
	rc->chunk = env_uint("ZSHARD_RDMA_CHUNK", 1u << 20, 4096, 1u << 30);
	if (G.port.max_msg_sz && rc->chunk > G.port.max_msg_sz)
		rc->chunk = G.port.max_msg_sz;
	pthread_mutex_init(&rc->mu, NULL);
	pthread_cond_init(&rc->cv, NULL);
	rc->ch = ibv_create_comp_channel(G.ctx);
	if (!rc->ch) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a completion channel on %s: %s", G.name,
			strerror(errno));
		goto fail;
	}
	fl = fcntl(rc->ch->fd, F_GETFL);
	fcntl(rc->ch->fd, F_SETFL, fl | O_NONBLOCK);
	rc->cq = ibv_create_cq(G.ctx, (int)rc->depth + 1, rc, rc->ch, 0);
	if (!rc->cq) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a completion queue on %s: %s", G.name,
			strerror(errno));
		goto fail;
	}
	rc->qp = qp_create(rc->cq, rc->depth, 1, err);
	if (!rc->qp)
		goto fail;
	my_info(rc->qp, &rc->me);
	zs_rdma_info_pack(&rc->me, info);
	zs_wire_encode(&f, h);
	if (zs_writev_full(fd, iov, 2) || zs_read_full(fd, h, sizeof h)) {
		zs_fail(err, ZS_EUNAVAIL, "the server did not answer RDMA_QP: %s",
			errno ? strerror(errno) : "connection closed");
		goto fail;
	}
	if (zs_wire_decode(h, &f, err))
		goto fail;
	if (f.op == ZS_OP_ERROR) {
		char msg[ZS_WIRE_MAX_ERR + 1] = "";
		size_t n = f.payload_len < ZS_WIRE_MAX_ERR ? f.payload_len : ZS_WIRE_MAX_ERR;
		if (!zs_read_full(fd, msg, n))
			msg[n] = '\0';
		zs_fail(err, f.status > 0 && f.status < ZS_STATUS_COUNT ? (enum zs_status)f.status
									 : ZS_EPROTO,
			"the server refused RDMA: %s", msg);
		goto fail;
	}
	if (f.op != ZS_OP_RDMA_QP || f.payload_len != ZS_RDMA_INFO ||
	    zs_read_full(fd, info, sizeof info)) {
		zs_fail(err, ZS_EPROTO, "the server answered RDMA_QP with %s", zs_op_name(f.op));
		goto fail;
	}
	zs_rdma_info_unpack(info, &rc->srv);
	if (rc->srv.len != arena_len || !rc->srv.addr) {
		zs_fail(err, ZS_EPROTO, "the server's registered region does not match its HELLO");
		goto fail;
	}
	if (qp_connect(rc->qp, &rc->me, &rc->srv, err))
		goto fail;
	rc->qp_ok = true;
	if (ibv_req_notify_cq(rc->cq, 0) || pthread_create(&rc->th, NULL, cq_main, rc)) {
		zs_fail(err, ZS_ENOMEM, "cannot start the completion thread");
		goto fail;
	}
	*out = rc;
	return ZS_OK;
fail:
	if (rc->qp)
		ibv_destroy_qp(rc->qp);
	if (rc->cq)
		ibv_destroy_cq(rc->cq);
	if (rc->ch)
		ibv_destroy_comp_channel(rc->ch);
	pthread_cond_destroy(&rc->cv);
	pthread_mutex_destroy(&rc->mu);
	free(rc);
	dev_close();
	return err ? err->code : ZS_EUNAVAIL;
}

static const struct stream_rdma_ops rops = {
	.setup = r_setup,
	.read = r_read,
	.write = r_write,
	.qp_reply = r_qp_reply,
	.flush = r_flush,
	.close = r_close,
};

static enum zs_status rdma_connect(const struct zs_conn_opts *o, struct zs_conn **out,
				   struct zs_error *err)
{
	enum zs_status st = stream_connect_rdma(&zs_rdma_transport, &rops, o, out, err);
	if (!st) {
		struct rconn *rc = stream_rdma_ctx(*out);
		snprintf(rc->addr, sizeof rc->addr, "%s", o->addr);
	}
	return st;
}

void zs_rdma_debug_corrupt_next(struct zs_conn *c, uint64_t bad_offset, uint32_t bad_key)
{
	struct rconn *rc = stream_rdma_ctx(c);
	pthread_mutex_lock(&rc->mu);
	rc->bad_off = bad_offset;
	rc->bad_key = bad_key;
	pthread_mutex_unlock(&rc->mu);
}

const struct zs_transport_ops zs_rdma_transport = {
	.name = "rdma",
	.caps = ZS_CAP_ONE_SIDED,
	.bit = ZS_TRANSPORT_RDMA,
	.connect = rdma_connect,
	.reg = rdma_reg,
	.dereg = rdma_dereg,
	.post_read = stream_post_read,
	.post_write = stream_post_write,
	.test = zs_req_test,
	.wait = zs_req_wait,
	.close = stream_close,
};

