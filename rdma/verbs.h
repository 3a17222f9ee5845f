/*
 * verbs.h - what rdma/'s files share, internal to rdma/: the process's
 * device, opened once and counted (every connection and the server's path
 * use the one protection domain), and the queue-pair steps both sides take.
 * Only rdma/ includes <infiniband/verbs.h>. libibverbs is loaded, not
 * linked (ibv.c): the ibv_ functions rdma/ calls are the table's.
 */
#ifndef ZS_RDMA_VERBS_H
#define ZS_RDMA_VERBS_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>

#include "rdma/rdma.h"

/* libibverbs' entry points, loaded by rdma_ibv_load (ibv.c) */
struct rdma_ibv {
	bool loaded;
	struct ibv_device **(*get_device_list)(int *n);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
	int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *ch, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned n);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	const char *(*wc_status_str)(enum ibv_wc_status status);
	const char *(*port_state_str)(enum ibv_port_state state);
};
extern struct rdma_ibv rdma_ibv;

/* Loads libibverbs.so.1 once per process; ZS_EUNAVAIL with the reason in
 * why where the machine has none (or one without what rdma/ calls). Every
 * ibv_ call below comes after it (rdma_dev_open). */
enum zs_status rdma_ibv_load(char *why, size_t wl);

/* the ibv_ names rdma/ calls, onto the table (some are the header's macros) */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#define ibv_get_device_list (*rdma_ibv.get_device_list)
#define ibv_free_device_list (*rdma_ibv.free_device_list)
#define ibv_get_device_name (*rdma_ibv.get_device_name)
#define ibv_open_device (*rdma_ibv.open_device)
#define ibv_close_device (*rdma_ibv.close_device)
#define ibv_query_device (*rdma_ibv.query_device)
#define ibv_query_port (*rdma_ibv.query_port)
#define ibv_query_gid (*rdma_ibv.query_gid)
#define ibv_alloc_pd (*rdma_ibv.alloc_pd)
#define ibv_dealloc_pd (*rdma_ibv.dealloc_pd)
#define ibv_reg_mr (*rdma_ibv.reg_mr)
#define ibv_dereg_mr (*rdma_ibv.dereg_mr)
#define ibv_create_comp_channel (*rdma_ibv.create_comp_channel)
#define ibv_destroy_comp_channel (*rdma_ibv.destroy_comp_channel)
#define ibv_create_cq (*rdma_ibv.create_cq)
#define ibv_destroy_cq (*rdma_ibv.destroy_cq)
#define ibv_get_cq_event (*rdma_ibv.get_cq_event)
#define ibv_ack_cq_events (*rdma_ibv.ack_cq_events)
#define ibv_create_qp (*rdma_ibv.create_qp)
#define ibv_modify_qp (*rdma_ibv.modify_qp)
#define ibv_destroy_qp (*rdma_ibv.destroy_qp)
#define ibv_wc_status_str (*rdma_ibv.wc_status_str)
#define ibv_port_state_str (*rdma_ibv.port_state_str)

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
