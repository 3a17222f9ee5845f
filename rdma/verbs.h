/*
 * verbs.h - what rdma/'s files share, internal to rdma/: the process's
 * device, opened once and counted (every connection and the server's path
 * use the one protection domain), and the queue-pair steps both sides take.
 * Only rdma/ includes <infiniband/verbs.h>.
 */
#ifndef ZS_RDMA_VERBS_H
#define ZS_RDMA_VERBS_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>

#include "rdma/rdma.h"

struct rdma_device {
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
};
extern struct rdma_device rdma_dev;

/* An environment variable as an unsigned in [lo, hi], else def. */
unsigned rdma_env_uint(const char *name, unsigned def, unsigned lo, unsigned hi);
/* Opens the device (ZSHARD_RDMA_DEV, or the first) once per process and
 * counts the users; ZS_EUNAVAIL with a plain reason in why. */
enum zs_status rdma_dev_open(char *why, size_t wl);
/* Drops one use; the last closes the device. */
void rdma_dev_close(void);

/* An RC queue pair on cq with depth send and rdepth receive requests. */
struct ibv_qp *rdma_qp_create(struct ibv_cq *cq, unsigned depth, unsigned rdepth,
			      struct zs_error *err);
/* This side's description of qp (the arena fields are left to the server). */
void rdma_my_info(struct ibv_qp *qp, struct zs_rdma_info *i);
/* INIT -> RTR -> RTS towards peer. */
enum zs_status rdma_qp_connect(struct ibv_qp *qp, const struct zs_rdma_info *me,
			       const struct zs_rdma_info *peer, struct zs_error *err);
/* Moves qp to ERROR: what is on it completes with a flush error. */
void rdma_qp_to_error(struct ibv_qp *qp);
/* Sleeps on a completion channel until an event (bounded, so that a
 * thread sees its stop flag), then re-arms it. */
void rdma_wait_channel(struct ibv_comp_channel *ch);

#endif
