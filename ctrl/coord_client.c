/* coord_client.c - typed coordinator calls (see coord_client.h). */
#include "ctrl/coord_client.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/methods.h"
#include "ctrl/rpc.h"
#include "base/util.h"

#define MAX_COORDS 8

/*
 * A client of one coordinator, or of several (HA on etcd: one leads, the
 * others refuse every call naming the leader). With several, a call goes
 * to the one that last answered; when that one refuses (a standby) or
 * cannot be reached, the call moves to the leader it named or to the next
 * in the list, and is sent again when that is safe: a standby's refusal
 * was never carried out; a call is only sent to a connected channel, so
 * an unreachable coordinator never got it; one that broke in flight is
 * sent again only when idempotent. Waiting for a coordinator (the
 * wait_for_ready flag) is then done here, over the list, not by gRPC.
 */
struct zs_coord_client {
	struct zs_rpc_client *rpc[MAX_COORDS];
	size_t n;
	atomic_size_t cur;
	int timeout_ms;
	int flags;
	char addrs[ZS_ADDR_MAX];
};

enum zs_status zs_coord_open(const char *addr, int timeout_ms, int wait_for_ready,
			     struct zs_coord_client **out, struct zs_error *err)
{
	struct zs_coord_client *c = calloc(1, sizeof *c);
	char list[ZS_ADDR_MAX], *save = NULL;
	enum zs_status st = ZS_OK;

	if (!c)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	if (!addr || strlen(addr) >= sizeof list) {
		free(c);
		return zs_fail(err, ZS_EINVAL, "the coordinator list is %s",
			       addr ? "too long" : "missing");
	}
	snprintf(list, sizeof list, "%s", addr);
	snprintf(c->addrs, sizeof c->addrs, "%s", addr);
	for (char *t = strtok_r(list, ",", &save); t && !st; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		if (c->n == MAX_COORDS)
			st = zs_fail(err, ZS_EINVAL, "more than %d coordinators in '%s'", MAX_COORDS,
				     addr);
		else if (!(st = zs_rpc_client_open(t, &c->rpc[c->n], err)))
			c->n++;
	}
	if (!st && !c->n)
		st = zs_fail(err, ZS_EINVAL, "no coordinator address in '%s'", addr);
	if (st) {
		zs_coord_close(c);
		return st;
	}
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
	c->flags = wait_for_ready ? ZS_RPC_WAIT_FOR_READY : 0;
	*out = c;
	return ZS_OK;
}

void zs_coord_set_wait_for_ready(struct zs_coord_client *c, int wait_for_ready)
{
	c->flags = wait_for_ready ? ZS_RPC_WAIT_FOR_READY : 0;
}

void zs_coord_close(struct zs_coord_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		zs_rpc_client_free(c->rpc[i]);
	free(c);
}

const char *zs_coord_addr(const struct zs_coord_client *c)
{
	return c->n > 1 ? c->addrs : zs_rpc_client_target(c->rpc[0]);
}

/*
 * Calls that may be repeated without changing their outcome: reads, and
 * writes the coordinator makes idempotent (one checkpoint per step, a
 * rank's blob or step report overwritten, a stage set, a norm report
 * sent again). Join, Leave,
 * CreateJob, DeleteJob, Rebalance, Restore and TaskDone are not.
 */
static bool idempotent(const char *path)
{
	static const char *const ok[] = {
		ZS_M_HEARTBEAT, ZS_M_ASSIGNMENTS, ZS_M_SERVERS,   ZS_M_GET_JOB,
		ZS_M_JOBS,      ZS_M_SET_STAGE,   ZS_M_COORD_STATUS, ZS_M_CREATE_CKPT,
		ZS_M_GET_CKPT,  ZS_M_LIST_CKPTS,  ZS_M_PUT_BLOB,  ZS_M_SERVER_TASKS,
		ZS_M_REPORT_STEP, ZS_M_STEP_REPORTS, ZS_M_TRAINER_HB,
		/* the same norms again wait with the first, or get the total
		 * that went out (coord/norms.c) */
		ZS_M_REPORT_NORM,
		/* a rank marked once stays marked until it renews */
		ZS_M_DROPPED_RANKS,
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
		if (!strcmp(path, ok[i]))
			return true;
	return false;
}

/* One coordinator: gRPC waits for it (wait_for_ready), and an idempotent
 * call that meets its restart is sent again within the bound. */
static enum zs_status invoke_one(struct zs_coord_client *c, const char *path, const void *req,
				 size_t len, uint8_t **resp, size_t *resp_len, int timeout_ms,
				 struct zs_error *err)
{
	enum zs_status st = zs_rpc_invoke(c->rpc[0], path, req, len, resp, resp_len, timeout_ms,
					  c->flags, err);
	/* a coordinator that restarts: a call may go out on the old, dead
	 * connection (or meet the reset of one) and fail at once; with
	 * wait_for_ready an idempotent call is sent again until the new one
	 * answers, within the call's bound */
	if (st == ZS_EUNAVAIL && (c->flags & ZS_RPC_WAIT_FOR_READY) && idempotent(path)) {
		int64_t deadline = zs_now_ms() + timeout_ms;
		while (st == ZS_EUNAVAIL && zs_now_ms() < deadline) {
			free(*resp);
			*resp = NULL;
			*resp_len = 0;
			zs_sleep_ms(100, NULL);
			st = zs_rpc_invoke(c->rpc[0], path, req, len, resp, resp_len, timeout_ms,
					   c->flags, err);
		}
	}
	return st;
}

/* The next coordinator to try after i: the leader a standby named when it
 * is in the list, else the one after i. */
static void move_on(struct zs_coord_client *c, size_t i, const char *leader)
{
	size_t next = (i + 1) % c->n;

	for (size_t k = 0; leader && leader[0] && k < c->n; k++)
		if (k != i && !strcmp(zs_rpc_client_target(c->rpc[k]), leader))
			next = k;
	atomic_compare_exchange_strong(&c->cur, &i, next);
}

/* Sends req to the coordinator that leads (see the struct's comment),
 * within timeout_ms; *resp (malloc'd) gets the answer. */
static enum zs_status invoke(struct zs_coord_client *c, const char *path, const void *req,
			     size_t len, uint8_t **resp, size_t *resp_len, int timeout_ms,
			     struct zs_error *err)
{
	int64_t deadline = zs_now_ms() + timeout_ms;
	bool wait = c->flags & ZS_RPC_WAIT_FOR_READY, idem = idempotent(path), heard = false;
	enum zs_status st;

	*resp = NULL;
	*resp_len = 0;
	if (c->n == 1)
		return invoke_one(c, path, req, len, resp, resp_len, timeout_ms, err);
	for (size_t tries = 1;; tries++) {
		size_t i = atomic_load(&c->cur);
		int64_t left = deadline - zs_now_ms();
		char leader[ZS_ADDR_MAX] = "";
		bool standby = false;

		if (left < 1)
			left = 1;
		/* an idempotent call is given a third of its bound, 1 to 2 s,
		 * at one coordinator, and then sent again (to the leader a
		 * standby names): one that is stopped, not dead, holds its
		 * connection open and would take it all */
		int64_t try_ms = timeout_ms / 3 < 1000 ? 1000 : timeout_ms / 3 > 2000 ? 2000 : timeout_ms / 3;
		if (!idem || try_ms > left)
			try_ms = left;
		if (zs_rpc_client_ready(c->rpc[i], left < 1000 ? (int)left : 1000)) {
			st = zs_rpc_client_refused(c->rpc[i], err);
			if (st) /* TLS refused it: no waiting mends that */
				break;
			st = zs_fail(err, ZS_EUNAVAIL, "cannot reach coordinator %s",
				     zs_rpc_client_target(c->rpc[i]));
		} else {
			st = zs_rpc_invoke_ex(c->rpc[i], path, req, len, resp, resp_len, (int)try_ms, 0,
					      &standby, leader, sizeof leader, err);
			/* one that does not answer in time (stopped, cut off):
			 * another is tried, now for an idempotent call (within
			 * its bound), for the next call otherwise */
			bool slow = st == ZS_ETIMEDOUT;
			if (slow && !idem) {
				move_on(c, i, NULL);
				return st;
			}
			if (slow && zs_now_ms() >= deadline) {
				/* the bound is spent: the error says that none
				 * answered, as a refusal's does (not only that the
				 * last had the call's remaining milliseconds) */
				move_on(c, i, NULL);
				break;
			}
			if (!slow && st != ZS_EUNAVAIL)
				return st;
			if (!slow && !standby && !idem) /* it may have been carried out */
				return st;
			heard |= standby || slow;
		}
		move_on(c, i, leader);
		free(*resp);
		*resp = NULL;
		*resp_len = 0;
		/* without waiting: each coordinator once, unless a standby
		 * answered (a takeover under way is waited out to the bound) */
		if (zs_now_ms() >= deadline || (!wait && !heard && tries >= c->n))
			break;
		if (tries % c->n == 0 || (standby && !leader[0]))
			zs_sleep_ms(100, NULL);
	}
	if (c->n > 1)
		zs_error_prefix(err, "no coordinator of %s leads or answers (the last said)",
				c->addrs);
	return st;
}

/* Sends an encoded request (released here) and returns the reply bytes. */
static enum zs_status call(struct zs_coord_client *c, const char *path,
			   enum zs_status enc_st, struct zs_buf *req,
			   struct zs_buf *resp, struct zs_error *err)
{
	enum zs_status st;

	resp->data = NULL;
	resp->len = 0;
	if (enc_st) {
		zs_buf_release(req);
		return zs_fail(err, enc_st, "cannot encode request for %s", path);
	}
	st = invoke(c, path, req->data, req->len, &resp->data, &resp->len, c->timeout_ms, err);
	zs_buf_release(req);
	return st;
}

/* Calls path and decodes a JobReply into *job. */
static enum zs_status job_call(struct zs_coord_client *c, const char *path,
			       enum zs_status enc_st, struct zs_buf *req,
			       struct zs_job *job, struct zs_error *err)
{
	struct zs_buf resp;
	enum zs_status st = call(c, path, enc_st, req, &resp, err);

	if (!st)
		st = zs_dec_job(resp.data, resp.len, job, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_register(struct zs_coord_client *c,
				 const struct zs_server_info *me, uint64_t *id,
				 uint32_t *lease_ms, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_REGISTER, zs_enc_register(me, &req), &req,
				 &resp, err);
	if (!st)
		st = zs_dec_register_reply(resp.data, resp.len, id, lease_ms, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_heartbeat(struct zs_coord_client *c, uint64_t id, const char *health,
				  uint32_t *lease_ms, uint64_t *gen, uint64_t *task_gen,
				  struct zs_error *err)
{
	struct zs_hb_reply r;
	enum zs_status st = zs_coord_heartbeat_ex(c, id, health, NULL, 0, &r, err);

	if (!st) {
		*lease_ms = r.lease_ms;
		*gen = r.assign_gen;
		*task_gen = r.task_gen;
	}
	return st;
}

enum zs_status zs_coord_heartbeat_ex(struct zs_coord_client *c, uint64_t id, const char *health,
				     const struct zs_seeded *seeded, uint32_t n_seeded,
				     struct zs_hb_reply *r, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_HEARTBEAT,
				 zs_enc_heartbeat_ex(id, health, seeded, n_seeded, &req), &req, &resp,
				 err);
	if (!st)
		st = zs_dec_heartbeat_reply(resp.data, resp.len, r, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_report_dropped(struct zs_coord_client *c, uint64_t id,
				      const struct zs_dropped *d, uint32_t n, uint32_t *marked,
				      struct zs_error *err)
{
	struct zs_buf req, resp;
	uint32_t k = 0;
	enum zs_status st = call(c, ZS_M_DROPPED_RANKS, zs_enc_dropped(id, d, n, &req), &req, &resp,
				 err);

	if (!st)
		st = zs_dec_dropped_reply(resp.data, resp.len, &k, err);
	if (marked)
		*marked = st ? 0 : k;
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_assignments(struct zs_coord_client *c, uint64_t id,
				    uint64_t *gen, struct zs_assignment **a,
				    uint32_t *n_a, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_ASSIGNMENTS, zs_enc_server_id(id, &req),
				 &req, &resp, err);
	if (!st)
		st = zs_dec_assignments(resp.data, resp.len, gen, a, n_a, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_servers(struct zs_coord_client *c,
				struct zs_server_info **s, uint32_t *n_s,
				struct zs_error *err)
{
	struct zs_buf req = {0}, resp;
	enum zs_status st = call(c, ZS_M_SERVERS, ZS_OK, &req, &resp, err);
	if (!st)
		st = zs_dec_servers(resp.data, resp.len, s, n_s, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_create_job(struct zs_coord_client *c,
				   const struct zs_job_spec *spec,
				   struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_CREATE_JOB, zs_enc_create_job(spec, &req), &req,
			job, err);
}

enum zs_status zs_coord_get_job(struct zs_coord_client *c, const char *name,
				struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_GET_JOB, zs_enc_job_name(name, &req), &req, job, err);
}

enum zs_status zs_coord_get_job_token(struct zs_coord_client *c, const char *name,
				      struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_GET_JOB, zs_enc_job_request(name, ZS_JR_TOKEN, &req), &req, job, err);
}

enum zs_status zs_coord_jobs(struct zs_coord_client *c, struct zs_job **jobs,
			     uint32_t *n_jobs, struct zs_error *err)
{
	struct zs_buf req = {0}, resp;
	enum zs_status st = call(c, ZS_M_JOBS, ZS_OK, &req, &resp, err);
	if (!st)
		st = zs_dec_jobs(resp.data, resp.len, jobs, n_jobs, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_delete_job(struct zs_coord_client *c, const char *name,
				   struct zs_job *job, struct zs_error *err)
{
	return zs_coord_delete_job_ex(c, name, false, job, NULL, NULL, err);
}

enum zs_status zs_coord_delete_job_ex(struct zs_coord_client *c, const char *name,
				      bool keep_ckpts, struct zs_job *job, uint32_t *deleted,
				      uint32_t *kept, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_DELETE_JOB,
				 zs_enc_job_request(name, keep_ckpts ? ZS_JR_KEEP_CKPTS : 0, &req),
				 &req, &resp, err);

	if (!st)
		st = zs_dec_job_deleted(resp.data, resp.len, job, deleted, kept, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_reader(struct zs_coord_client *c, const struct zs_reader_req *q,
			       struct zs_reader_ans *ans, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_READER, zs_enc_reader_req(q, &req), &req, &resp, err);

	if (!st)
		st = zs_dec_reader_ans(resp.data, resp.len, ans, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_readers(struct zs_coord_client *c, const char *job,
				struct zs_reader_info **v, uint32_t *n, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_READERS, zs_enc_job_name(job, &req), &req, &resp, err);

	if (!st)
		st = zs_dec_readers(resp.data, resp.len, v, n, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_comm_id(struct zs_coord_client *c, const char *job, uint64_t timeline,
				uint32_t rank, const uint8_t *id, uint8_t out[128],
				struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_COMM_ID, zs_enc_comm_id_req(job, timeline, rank, id, &req),
				 &req, &resp, err);
	if (!st)
		st = zs_dec_comm_id(resp.data, resp.len, out, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_set_stage(struct zs_coord_client *c, const char *name,
				  uint32_t stage, struct zs_job *job,
				  struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_SET_STAGE, zs_enc_set_stage(name, stage, &req), &req,
			job, err);
}

enum zs_status zs_coord_rebalance(struct zs_coord_client *c, const char *name,
				  const uint64_t *servers, uint32_t n, struct zs_job *job,
				  struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_REBALANCE, zs_enc_rebalance(name, servers, n, &req), &req, job,
			err);
}

enum zs_status zs_coord_join(struct zs_coord_client *c,
			     const struct zs_join_req *r, struct zs_job *job,
			     struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_JOIN, zs_enc_join(r, &req), &req, job, err);
}

enum zs_status zs_coord_leave(struct zs_coord_client *c, const char *name,
			      uint32_t rank, uint64_t session, bool abandoned,
			      uint64_t next_step, struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_LEAVE,
			zs_enc_leave(name, rank, session, abandoned, next_step, NULL, &req), &req,
			job, err);
}

enum zs_status zs_coord_leave_at(struct zs_coord_client *c, const char *name, uint32_t rank,
				 uint64_t session, bool abandoned, uint64_t next_step,
				 uint64_t timeline, struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_LEAVE,
			zs_enc_leave(name, rank, session, abandoned, next_step, &timeline, &req),
			&req, job, err);
}

enum zs_status zs_coord_trainer_heartbeat(struct zs_coord_client *c, const char *name,
					  uint32_t rank, uint64_t session, uint64_t reconnects,
					  uint64_t *timeline, struct zs_server_info **down,
					  uint32_t *n_down, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_TRAINER_HB,
				 zs_enc_trainer_hb(name, rank, session, reconnects, &req), &req,
				 &resp, err);
	if (!st)
		st = zs_dec_trainer_hb_reply(resp.data, resp.len, timeline, down, n_down, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_status(struct zs_coord_client *c,
			       struct zs_coord_status *s, struct zs_error *err)
{
	struct zs_buf req = {0}, resp;
	enum zs_status st = call(c, ZS_M_COORD_STATUS, ZS_OK, &req, &resp, err);
	if (!st)
		st = zs_dec_coord_status(resp.data, resp.len, s, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_report_norm(struct zs_coord_client *c,
				    const struct zs_norm_report *r, int timeout_ms,
				    double *total, struct zs_error *err)
{
	struct zs_buf req, resp = {0};
	uint32_t shards;
	enum zs_status st = zs_enc_norm_report(r, &req);

	if (st)
		return zs_fail(err, st, "cannot encode a norm report");
	st = invoke(c, ZS_M_REPORT_NORM, req.data, req.len, &resp.data, &resp.len, timeout_ms, err);
	zs_buf_release(&req);
	if (!st)
		st = zs_dec_norm_reply(resp.data, resp.len, total, &shards, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_report_step_ex(struct zs_coord_client *c, const char *job,
				       uint32_t rank, const struct zs_step_report *r,
				       const struct zs_step_state *begun, struct zs_step_answer *a,
				       struct zs_step_state *redo, bool *has_redo,
				       struct zs_error *err)
{
	struct zs_buf req, resp = {0};
	enum zs_status st = call(c, ZS_M_REPORT_STEP, zs_enc_report_step(job, rank, r, begun, &req),
				 &req, &resp, err);

	if (!st)
		st = zs_dec_report_step_reply(resp.data, resp.len, a, redo, has_redo, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_report_step(struct zs_coord_client *c, const char *job,
				    uint32_t rank, const struct zs_step_report *r,
				    struct zs_step_answer *a, struct zs_error *err)
{
	return zs_coord_report_step_ex(c, job, rank, r, NULL, a, NULL, NULL, err);
}

enum zs_status zs_coord_create_job_json(struct zs_coord_client *c, const char *json,
					struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_CREATE_JOB_JSON, zs_enc_create_job_json(json, &req), &req, job,
			err);
}

enum zs_status zs_coord_resize_job(struct zs_coord_client *c, const char *name, uint32_t world,
				   struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_RESIZE_JOB, zs_enc_resize(name, world, &req), &req, job, err);
}

enum zs_status zs_coord_stop_job(struct zs_coord_client *c, const char *name,
				 struct zs_job *job, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_STOP_JOB, zs_enc_job_name(name, &req), &req, job, err);
}

enum zs_status zs_coord_step_reports(struct zs_coord_client *c, const char *job,
				     struct zs_step_report **r, uint32_t *n_r,
				     struct zs_error *err)
{
	struct zs_buf req, resp = {0};
	enum zs_status st = zs_enc_job_name(job, &req);

	*r = NULL;
	*n_r = 0;
	if (st)
		return zs_fail(err, st, "cannot encode a job name");
	st = invoke(c, ZS_M_STEP_REPORTS, req.data, req.len, &resp.data, &resp.len, c->timeout_ms,
		    err);
	zs_buf_release(&req);
	if (!st)
		st = zs_dec_step_reports(resp.data, resp.len, r, n_r, err);
	zs_buf_release(&resp);
	return st;
}

static enum zs_status ckpt_call(struct zs_coord_client *c, const char *path,
				enum zs_status enc_st, struct zs_buf *req,
				struct zs_checkpoint *out, struct zs_error *err)
{
	struct zs_buf resp;
	struct zs_checkpoint tmp;
	enum zs_status st = call(c, path, enc_st, req, &resp, err);

	if (!st)
		st = zs_dec_checkpoint(resp.data, resp.len, out ? out : &tmp, err);
	if (!st && !out)
		zs_checkpoint_release(&tmp);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_create_ckpt(struct zs_coord_client *c, const char *job,
				    uint64_t step, struct zs_checkpoint *out,
				    struct zs_error *err)
{
	struct zs_buf req;
	return ckpt_call(c, ZS_M_CREATE_CKPT, zs_enc_ckpt_req(job, step, true, &req), &req, out,
			 err);
}

enum zs_status zs_coord_get_ckpt(struct zs_coord_client *c, const char *job, uint64_t id,
				 struct zs_checkpoint *out, struct zs_error *err)
{
	struct zs_buf req;
	return ckpt_call(c, ZS_M_GET_CKPT, zs_enc_ckpt_req(job, id, false, &req), &req, out,
			 err);
}

enum zs_status zs_coord_delete_ckpt(struct zs_coord_client *c, const char *job, uint64_t id,
				    struct zs_checkpoint *out, struct zs_error *err)
{
	struct zs_buf req;
	return ckpt_call(c, ZS_M_DELETE_CKPT, zs_enc_ckpt_req(job, id, false, &req), &req, out,
			 err);
}

enum zs_status zs_coord_list_ckpts(struct zs_coord_client *c, const char *job,
				   struct zs_checkpoint **v, uint32_t *n,
				   struct zs_error *err)
{
	return zs_coord_list_ckpts_ex(c, job, false, v, n, err);
}

enum zs_status zs_coord_list_ckpts_ex(struct zs_coord_client *c, const char *job, bool all,
				      struct zs_checkpoint **v, uint32_t *n,
				      struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_LIST_CKPTS,
				 zs_enc_job_request(job, all ? ZS_JR_ALL : 0, &req), &req, &resp,
				 err);
	if (!st)
		st = zs_dec_checkpoints(resp.data, resp.len, v, n, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_put_blob(struct zs_coord_client *c, const char *job, uint64_t id,
				 uint32_t rank, const void *data, uint32_t len,
				 struct zs_error *err)
{
	struct zs_buf req;
	return ckpt_call(c, ZS_M_PUT_BLOB, zs_enc_put_blob(job, id, rank, data, len, &req), &req,
			 NULL, err);
}

enum zs_status zs_coord_restore(struct zs_coord_client *c, const char *job, uint64_t id,
				struct zs_job *out, struct zs_error *err)
{
	struct zs_buf req;
	return job_call(c, ZS_M_RESTORE, zs_enc_ckpt_req(job, id, false, &req), &req, out, err);
}

enum zs_status zs_coord_server_tasks(struct zs_coord_client *c, uint64_t server_id,
				     struct zs_task **v, uint32_t *n, struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_SERVER_TASKS, zs_enc_server_id(server_id, &req), &req,
				 &resp, err);
	if (!st)
		st = zs_dec_tasks(resp.data, resp.len, v, n, err);
	zs_buf_release(&resp);
	return st;
}

enum zs_status zs_coord_task_done(struct zs_coord_client *c, uint64_t server_id,
				  const struct zs_task *t, bool ok, const char *why,
				  uint64_t bytes, struct zs_error *err)
{
	return zs_coord_task_done_code(c, server_id, t, ok ? ZS_OK : ZS_EINTERNAL, why, bytes,
				       err);
}

enum zs_status zs_coord_task_done_code(struct zs_coord_client *c, uint64_t server_id,
				       const struct zs_task *t, enum zs_status code,
				       const char *why, uint64_t bytes, struct zs_error *err)
{
	struct zs_buf req;
	return ckpt_call(c, ZS_M_TASK_DONE,
			 zs_enc_task_done(server_id, t, code, why, bytes, &req), &req, NULL, err);
}

enum zs_status zs_coord_raw(struct zs_coord_client *c, const char *path,
			    const void *data, size_t len, struct zs_error *err)
{
	uint8_t *resp;
	size_t resp_len;
	enum zs_status st = invoke(c, path, data, len, &resp, &resp_len, c->timeout_ms, err);
	free(resp);
	return st;
}

enum zs_status zs_coord_remove_server(struct zs_coord_client *c, uint64_t id, bool drop,
				      char *dropped, size_t cap, uint32_t *n_dropped,
				      struct zs_error *err)
{
	struct zs_buf req, resp;
	enum zs_status st = call(c, ZS_M_REMOVE_SERVER, zs_enc_remove_server(id, drop, &req), &req,
				 &resp, err);
	if (!st)
		st = zs_dec_removed(resp.data, resp.len, dropped, cap, n_dropped, err);
	zs_buf_release(&resp);
	return st;
}
