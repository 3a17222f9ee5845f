/*
 * device.c - the process's RDMA device (opened once, shared by every
 * connection and the server's path, counted) and the queue-pair steps both
 * sides take (see verbs.h).
 */
#include "rdma/verbs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/resource.h>

#include "base/env.h"
#include "base/util.h"

struct rdma_device rdma_dev = {.mu = PTHREAD_MUTEX_INITIALIZER};


static bool ipv4_mapped(const union ibv_gid *g)
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(g->raw, pre, sizeof pre);
}

/* Opens the device (once per process); caller holds rdma_dev.mu. */
static enum zs_status dev_open_locked(char *why, size_t wl)
{
	struct ibv_device **list;
	const char *want = zs_env("ZSHARD_RDMA_DEV");
	int n = 0, pick = -1;

	if (rdma_dev.refs) {
		rdma_dev.refs++;
		return ZS_OK;
	}
	if (rdma_ibv_load(why, wl)) /* libibverbs: loaded, not linked */
		return ZS_EUNAVAIL;
	rdma_dev.refs++;
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
	snprintf(rdma_dev.name, sizeof rdma_dev.name, "%s", ibv_get_device_name(list[pick]));
	rdma_dev.ctx = ibv_open_device(list[pick]);
	if (!rdma_dev.ctx) {
		snprintf(why, wl, "cannot open RDMA device %s: %s", rdma_dev.name, strerror(errno));
		goto fail_list;
	}
	ibv_free_device_list(list);
	list = NULL;
	rdma_dev.port_num = (uint8_t)zs_env_uint("ZSHARD_RDMA_PORT", 1, 1, 255);
	if (ibv_query_device(rdma_dev.ctx, &rdma_dev.dev) || ibv_query_port(rdma_dev.ctx, rdma_dev.port_num, &rdma_dev.port)) {
		snprintf(why, wl, "cannot query RDMA device %s port %u: %s", rdma_dev.name, rdma_dev.port_num,
			 strerror(errno));
		goto fail_ctx;
	}
	if (rdma_dev.port.state != IBV_PORT_ACTIVE) {
		snprintf(why, wl, "port %u of RDMA device %s is down (state %s)", rdma_dev.port_num, rdma_dev.name,
			 ibv_port_state_str(rdma_dev.port.state));
		goto fail_ctx;
	}
	rdma_dev.gid_index = -1;
	if (zs_env("ZSHARD_RDMA_GID")) {
		rdma_dev.gid_index = (int)zs_env_uint("ZSHARD_RDMA_GID", 0, 0, 1023);
		if (ibv_query_gid(rdma_dev.ctx, rdma_dev.port_num, rdma_dev.gid_index, &rdma_dev.gid)) {
			snprintf(why, wl, "GID index %d of %s: %s", rdma_dev.gid_index, rdma_dev.name,
				 strerror(errno));
			goto fail_ctx;
		}
	} else {
		for (int i = 0; i < rdma_dev.port.gid_tbl_len && rdma_dev.gid_index < 0; i++) {
			union ibv_gid g;
			if (!ibv_query_gid(rdma_dev.ctx, rdma_dev.port_num, i, &g) && ipv4_mapped(&g)) {
				rdma_dev.gid_index = i;
				rdma_dev.gid = g;
			}
		}
		if (rdma_dev.gid_index < 0) {
			rdma_dev.gid_index = 0;
			ibv_query_gid(rdma_dev.ctx, rdma_dev.port_num, 0, &rdma_dev.gid);
		}
	}
	rdma_dev.pd = ibv_alloc_pd(rdma_dev.ctx);
	if (!rdma_dev.pd) {
		snprintf(why, wl, "cannot allocate a protection domain on %s: %s", rdma_dev.name,
			 strerror(errno));
		goto fail_ctx;
	}
	return ZS_OK;
fail_ctx:
	ibv_close_device(rdma_dev.ctx);
	rdma_dev.ctx = NULL;
fail_list:
	if (list)
		ibv_free_device_list(list);
	rdma_dev.refs--;
	return ZS_EUNAVAIL;
}

enum zs_status rdma_dev_open(char *why, size_t wl)
{
	enum zs_status st;
	pthread_mutex_lock(&rdma_dev.mu);
	st = dev_open_locked(why, wl);
	pthread_mutex_unlock(&rdma_dev.mu);
	return st;
}

void rdma_dev_close(void)
{
	pthread_mutex_lock(&rdma_dev.mu);
	if (rdma_dev.refs > 0 && --rdma_dev.refs == 0) {
		ibv_dealloc_pd(rdma_dev.pd);
		ibv_close_device(rdma_dev.ctx);
		rdma_dev.pd = NULL;
		rdma_dev.ctx = NULL;
	}
	pthread_mutex_unlock(&rdma_dev.mu);
}

enum zs_status zs_rdma_probe(uint64_t lock_bytes, char *note, size_t len)
{
	struct rlimit rl;
	char why[256];
	enum zs_status st = rdma_dev_open(why, sizeof why);

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
		rdma_dev_close();
		return ZS_EUNAVAIL;
	}
	snprintf(note, len, "%s port %u (%s, GID index %d, active MTU %d)", rdma_dev.name, rdma_dev.port_num,
		 rdma_dev.port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
		 rdma_dev.gid_index, 128 << rdma_dev.port.active_mtu);
	rdma_dev_close();
	return ZS_OK;
}

/* ---------------------------------------------------- queue-pair steps */

struct ibv_qp *rdma_qp_create(struct ibv_cq *cq, unsigned depth, unsigned rdepth,
				struct zs_error *err)
{
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				     .cap = {.max_send_wr = depth, .max_recv_wr = rdepth,
					     .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = rdma_dev.port_num,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_WRITE};
	struct ibv_qp *qp = ibv_create_qp(rdma_dev.pd, &a);

	if (!qp) {
		zs_fail(err, ZS_EUNAVAIL, "cannot create a queue pair on %s: %s", rdma_dev.name,
			strerror(errno));
		return NULL;
	}
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS)) {
		zs_fail(err, ZS_EUNAVAIL, "cannot initialize a queue pair on %s: %s", rdma_dev.name,
			strerror(errno));
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

void rdma_my_info(struct ibv_qp *qp, struct zs_rdma_info *i)
{
	memset(i, 0, sizeof *i);
	i->qpn = qp->qp_num;
	i->psn = qp->qp_num & 0xffffff; /* any 24-bit start; distinct per QP */
	i->lid = rdma_dev.port.lid;
	i->mtu = (uint8_t)rdma_dev.port.active_mtu;
	memcpy(i->gid, rdma_dev.gid.raw, 16);
}

/* INIT -> RTR -> RTS towards peer. */
enum zs_status rdma_qp_connect(struct ibv_qp *qp, const struct zs_rdma_info *me,
				 const struct zs_rdma_info *peer, struct zs_error *err)
{
	int rd = rdma_dev.dev.max_qp_rd_atom > 0 ? rdma_dev.dev.max_qp_rd_atom : 1;
	int rd_in = rdma_dev.dev.max_qp_init_rd_atom > 0 ? rdma_dev.dev.max_qp_init_rd_atom : 1;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = (enum ibv_mtu)(peer->mtu < me->mtu ? peer->mtu : me->mtu),
				.dest_qp_num = peer->qpn, .rq_psn = peer->psn,
				.max_dest_rd_atomic = (uint8_t)(rd > 16 ? 16 : rd),
				.min_rnr_timer = 12};
	bool global = false;

	for (int k = 0; k < 16; k++)
		global |= peer->gid[k] != 0;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.port_num = rdma_dev.port_num;
	if (global || rdma_dev.port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)rdma_dev.gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER))
		return zs_fail(err, ZS_EUNAVAIL, "queue pair to RTR failed on %s: %s", rdma_dev.name,
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
		return zs_fail(err, ZS_EUNAVAIL, "queue pair to RTS failed on %s: %s", rdma_dev.name,
			       strerror(errno));
	return ZS_OK;
}

void rdma_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	if (qp)
		ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* Sleeps until the armed completion queue of ch has an event, at most
 * 100 ms (so that its thread sees a stop). */
void rdma_wait_channel(struct ibv_comp_channel *ch)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *cq;
	void *ctx;

	if (poll(&p, 1, 100) > 0 && !ibv_get_cq_event(ch, &cq, &ctx))
		ibv_ack_cq_events(cq, 1);
}
