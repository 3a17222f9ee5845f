/*
 * rpc.h - the coordinator's RPC methods (the handlers coord.c's method table
 * names, each in the file of its concern) and the lease reaper's thread.
 * Internal to coord/.
 */
#ifndef ZS_COORD_RPC_H
#define ZS_COORD_RPC_H

#include "coord/state.h"

/* decommission.c: RemoveServer */
void coord_h_remove_server(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_register(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		       size_t n);
void coord_h_heartbeat(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n);
void coord_h_assignments(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			  size_t n);
void coord_h_servers(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n);
void *coord_reaper(void *arg);
void coord_h_create_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			 size_t n);

/* The same from the spec as JSON (model/spec_json.h). */
void coord_h_create_job_json(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_get_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n);
void coord_h_jobs(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_delete_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			 size_t n);
void coord_h_set_stage(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n);
void coord_h_rebalance(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n);
void coord_h_join(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_status(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		     size_t n);
void coord_h_create_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_get_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_delete_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_list_ckpts(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_put_blob(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_restore(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_server_tasks(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_task_done(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_dropped_ranks(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_trainer_heartbeat(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);

/* A trainer leaves (or an operator evicts it, session 0): cleanly between
 * steps, or rolling the job back. */
void coord_h_leave(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_stop_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);

/* resize.c: zshardctl job resize; whether a rank may join j now (below
 * the world of its latest steps or of the one it resizes to) */
void coord_h_resize_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_report_norm(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);

/* readers.c: the weight readers' registry */
void coord_h_reader(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_readers(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_comm_id(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_step_reports(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);

#endif
