/*
 * coord_client.h - typed calls to the coordinator (and a shard server's
 * status), for zshardctl, zshard-server, tests and libzshard.
 *
 * Each call is a blocking unary RPC bounded by the client's timeout. Errors
 * come back as the coordinator's status and message (ZS_ENOTFOUND "no job
 * 'x'", ...) or, when it cannot be reached, ZS_EUNAVAIL / ZS_ETIMEDOUT with
 * the address in the message. Output structs are owned by the caller and
 * released with model.h's *_release (arrays: release each, then free()).
 * Thread-safe: several threads may share one client.
 */
#ifndef ZS_COORD_CLIENT_H
#define ZS_COORD_CLIENT_H

#include <stdint.h>

#include "ctrl/codec.h"
#include "model/model.h"
#include "base/status.h"

struct zs_coord_client;

/* timeout_ms bounds every call; wait_for_ready makes calls wait (until that
 * timeout) for a coordinator that is not up yet instead of failing at once */
enum zs_status zs_coord_open(const char *addr, int timeout_ms, int wait_for_ready,
			     struct zs_coord_client **out, struct zs_error *err);
/* Changes wait_for_ready for the calls that follow (a trainer, once joined,
 * rides out a coordinator's restart within each call's bound). */
void zs_coord_set_wait_for_ready(struct zs_coord_client *c, int wait_for_ready);
void zs_coord_close(struct zs_coord_client *c);
const char *zs_coord_addr(const struct zs_coord_client *c);

enum zs_status zs_coord_register(struct zs_coord_client *c,
				 const struct zs_server_info *me, uint64_t *id,
				 uint32_t *lease_ms, struct zs_error *err);
/* Trainer ranks of this server (id) whose data connections all ended
 * (coord/recovery.c: one that stops renewing its lease is taken for gone
 * at once); *marked (may be NULL): how many were current members. */
enum zs_status zs_coord_report_dropped(struct zs_coord_client *c, uint64_t id,
				      const struct zs_dropped *d, uint32_t n, uint32_t *marked,
				      struct zs_error *err);
/* health: "" when well; else what fails on the server (its disk). */
/* The same with the rebuilt copies this server's primaries seeded; the
 * whole reply in *r (with the norm reports the coordinator wants again). */
enum zs_status zs_coord_heartbeat_ex(struct zs_coord_client *c, uint64_t id, const char *health,
				     const struct zs_seeded *seeded, uint32_t n_seeded,
				     struct zs_hb_reply *r, struct zs_error *err);
enum zs_status zs_coord_heartbeat(struct zs_coord_client *c, uint64_t id, const char *health,
				  uint32_t *lease_ms, uint64_t *gen, uint64_t *task_gen,
				  struct zs_error *err);
enum zs_status zs_coord_assignments(struct zs_coord_client *c, uint64_t id,
				    uint64_t *gen, struct zs_assignment **a,
				    uint32_t *n_a, struct zs_error *err);
enum zs_status zs_coord_servers(struct zs_coord_client *c,
				struct zs_server_info **s, uint32_t *n_s,
				struct zs_error *err);
enum zs_status zs_coord_create_job(struct zs_coord_client *c,
				   const struct zs_job_spec *spec,
				   struct zs_job *job, struct zs_error *err);
enum zs_status zs_coord_get_job(struct zs_coord_client *c, const char *name,
				struct zs_job *job, struct zs_error *err);
/* The same with the job's data-plane token (GetJob omits it): for an
 * observer's data-plane connections (zshardctl export / import). */
enum zs_status zs_coord_get_job_token(struct zs_coord_client *c, const char *name,
				      struct zs_job *job, struct zs_error *err);
enum zs_status zs_coord_jobs(struct zs_coord_client *c, struct zs_job **jobs,
			     uint32_t *n_jobs, struct zs_error *err);
/* Removes server id from the cluster for good (it must be down and hold
 * nothing a job needs: the coordinator says what); drop: the checkpoints
 * with records on it are deleted (listed into dropped, cap bytes). */
enum zs_status zs_coord_remove_server(struct zs_coord_client *c, uint64_t id, bool drop,
				      char *dropped, size_t cap, uint32_t *n_dropped,
				      struct zs_error *err);
/* Deletes a job and its checkpoints (their records on the servers too). */
enum zs_status zs_coord_delete_job(struct zs_coord_client *c, const char *name,
				   struct zs_job *job, struct zs_error *err);
/* The same; keep_ckpts keeps the checkpoints (no later job of the name
 * sees them: zs_coord_list_ckpts_ex with all lists them, a restore by id
 * reads one). *deleted / *kept (may be NULL): how many. */
enum zs_status zs_coord_delete_job_ex(struct zs_coord_client *c, const char *name,
				      bool keep_ckpts, struct zs_job *job, uint32_t *deleted,
				      uint32_t *kept, struct zs_error *err);
/*
 * The job's trainer communicator id for timeline: rank 0 offers id (128
 * bytes, kept for the timeline; offering it again is fine, another is
 * ZS_EEXIST); other ranks pass id NULL and get it into out, ZS_EAGAIN
 * while rank 0 has not offered one. ZS_ESTATE: the job is on another
 * timeline (it rolled back: resume); ZS_ENOTFOUND: no such job.
 */
/* A weight reader's registration (ctrl/codec.h's zs_reader_req): joins
 * (me.id 0), renews, reports a lost parent or leaves; *ans its id, its
 * parent in the job's relay tree and its lease. */
struct zs_reader_req;
struct zs_reader_ans;
enum zs_status zs_coord_reader(struct zs_coord_client *c, const struct zs_reader_req *q,
			       struct zs_reader_ans *ans, struct zs_error *err);
/* The job's readers (malloc'd, *n of them). */
enum zs_status zs_coord_readers(struct zs_coord_client *c, const char *job,
				struct zs_reader_info **v, uint32_t *n, struct zs_error *err);
enum zs_status zs_coord_comm_id(struct zs_coord_client *c, const char *job, uint64_t timeline,
				uint32_t rank, const uint8_t *id, uint8_t out[128],
				struct zs_error *err);
enum zs_status zs_coord_set_stage(struct zs_coord_client *c, const char *name,
				  uint32_t stage, struct zs_job *job,
				  struct zs_error *err);
/* Re-places the job over servers[0..n) (n 0: every live server). */
enum zs_status zs_coord_rebalance(struct zs_coord_client *c, const char *name,
				  const uint64_t *servers, uint32_t n, struct zs_job *job,
				  struct zs_error *err);
/* Joins req->rank; *job: the job as committed, without its trainers list
 * (GetJob has it), so that a join costs the coordinator no encoding. */
enum zs_status zs_coord_join(struct zs_coord_client *c,
			     const struct zs_join_req *req, struct zs_job *job,
			     struct zs_error *err);
/* session 0: an operator's eviction; abandoned: the trainer leaves in the
 * middle of a step (either way the job rolls back); next_step: it leaves
 * between steps, every one before next_step finished (0: unknown) */
enum zs_status zs_coord_leave(struct zs_coord_client *c, const char *name,
			      uint32_t rank, uint64_t session, bool abandoned,
			      uint64_t next_step, struct zs_job *job, struct zs_error *err);
/* The same from a trainer that ran on the job's timeline: a leave of a
 * timeline that has ended (a rollback came meanwhile) frees the rank and
 * says nothing about where the job stands. */
enum zs_status zs_coord_leave_at(struct zs_coord_client *c, const char *name, uint32_t rank,
				 uint64_t session, bool abandoned, uint64_t next_step,
				 uint64_t timeline, struct zs_job *job, struct zs_error *err);
/* Renews rank's lease; ZS_ENOTFOUND when session no longer holds the rank
 * (its lease lapsed or it was evicted). *timeline: the job's now; *down
 * (malloc'd, free it): the servers the coordinator marks down, 8 at most. */
enum zs_status zs_coord_trainer_heartbeat(struct zs_coord_client *c, const char *name,
					  uint32_t rank, uint64_t session, uint64_t reconnects,
					  uint64_t *timeline,
					  struct zs_server_info **down, uint32_t *n_down,
					  struct zs_error *err);
enum zs_status zs_coord_status(struct zs_coord_client *c,
			       struct zs_coord_status *st, struct zs_error *err);

/*
 * Reports a server's shard norms for a step and waits (up to timeout_ms,
 * beyond the client's usual bound) for the job's total sum of squares. A
 * settled report (r->settled: sent again for a heartbeat's want) does not
 * wait: ZS_OK once counted and checked against its settled total;
 * ZS_ESTALE when the job's timeline is no longer the want's.
 */
enum zs_status zs_coord_report_norm(struct zs_coord_client *c,
				    const struct zs_norm_report *r, int timeout_ms,
				    double *total, struct zs_error *err);

/* Checkpoints: create (idempotent per job and step), get, list, trainer
 * blobs, restore (id 0: the latest committed), and the servers' tasks. */
/*
 * A trainer's step boundary: sends the previous step's report (r NULL
 * before the first) and learns the stage and checkpoint interval that apply
 * from this boundary on.
 */
enum zs_status zs_coord_report_step(struct zs_coord_client *c, const char *job,
				    uint32_t rank, const struct zs_step_report *r,
				    struct zs_step_answer *a, struct zs_error *err);
/* The same, saying the step the rank begins and its state then (begun
 * NULL: not said), and learning (redo not NULL) whether the rank is a lost
 * one's replacement: *has_redo, redo->data malloc'd. */
enum zs_status zs_coord_report_step_ex(struct zs_coord_client *c, const char *job,
				       uint32_t rank, const struct zs_step_report *r,
				       const struct zs_step_state *begun, struct zs_step_answer *a,
				       struct zs_step_state *redo, bool *has_redo,
				       struct zs_error *err);
/* Creates a job from its spec as JSON (model/spec_json.h). */
enum zs_status zs_coord_create_job_json(struct zs_coord_client *c, const char *json,
					struct zs_job *job, struct zs_error *err);
/* zshardctl job resize: the world size from a step the coordinator names
 * (job->worlds says which). */
enum zs_status zs_coord_resize_job(struct zs_coord_client *c, const char *name, uint32_t world,
				   struct zs_job *job, struct zs_error *err);
/* zshardctl job stop: every rank leaves before one step, all the same. */
enum zs_status zs_coord_stop_job(struct zs_coord_client *c, const char *name,
				 struct zs_job *job, struct zs_error *err);
/* The latest report of each rank of job (*r malloc'd, by rank; free). */
enum zs_status zs_coord_step_reports(struct zs_coord_client *c, const char *job,
				     struct zs_step_report **r, uint32_t *n_r,
				     struct zs_error *err);
enum zs_status zs_coord_create_ckpt(struct zs_coord_client *c, const char *job,
				    uint64_t step, struct zs_checkpoint *out,
				    struct zs_error *err);
enum zs_status zs_coord_get_ckpt(struct zs_coord_client *c, const char *job, uint64_t id,
				 struct zs_checkpoint *out, struct zs_error *err);
/* Forgets checkpoint id of job (its record as it was into *out, which may
 * be NULL); its servers drop what they hold of it. ZS_ENOTFOUND; ZS_ESTATE
 * while it is being restored. */
enum zs_status zs_coord_delete_ckpt(struct zs_coord_client *c, const char *job, uint64_t id,
				    struct zs_checkpoint *out, struct zs_error *err);
/* The job's checkpoints (this incarnation's); with all, every checkpoint
 * kept under the name, of the job and of earlier, deleted jobs of the
 * name (no job of the name is needed then). */
enum zs_status zs_coord_list_ckpts(struct zs_coord_client *c, const char *job,
				   struct zs_checkpoint **v, uint32_t *n,
				   struct zs_error *err);
enum zs_status zs_coord_list_ckpts_ex(struct zs_coord_client *c, const char *job, bool all,
				      struct zs_checkpoint **v, uint32_t *n,
				      struct zs_error *err);
enum zs_status zs_coord_put_blob(struct zs_coord_client *c, const char *job, uint64_t id,
				 uint32_t rank, const void *data, uint32_t len,
				 struct zs_error *err);
enum zs_status zs_coord_restore(struct zs_coord_client *c, const char *job, uint64_t id,
				struct zs_job *out, struct zs_error *err);
enum zs_status zs_coord_server_tasks(struct zs_coord_client *c, uint64_t server_id,
				     struct zs_task **v, uint32_t *n, struct zs_error *err);
enum zs_status zs_coord_task_done(struct zs_coord_client *c, uint64_t server_id,
				  const struct zs_task *t, bool ok, const char *why,
				  uint64_t bytes, struct zs_error *err);
/* The same, saying why a failed task failed (code; ZS_OK: done): a restore
 * failing with ZS_EIO or ZS_ENOTFOUND found the checkpoint's records bad. */
enum zs_status zs_coord_task_done_code(struct zs_coord_client *c, uint64_t server_id,
				       const struct zs_task *t, enum zs_status code,
				       const char *why, uint64_t bytes, struct zs_error *err);

/* ---- a shard server's own service (server_client.c) ---- */

/* Asks a shard server at addr for its status (a one-off connection). */
enum zs_status zs_server_status_query(const char *addr, int timeout_ms,
				      struct zs_server_status *st,
				      struct zs_error *err);

/* Reads a slice of a checkpoint record from the server at addr, checked
 * against the CRC32C the server took of it (ZS_EIO). r->length may be any:
 * read in calls of 4 Mi elements (16 MiB) each; *step, the record's. */
enum zs_status zs_server_read_ckpt(const char *addr, int timeout_ms,
				   const struct zs_read_ckpt *r, float *out, uint64_t *step,
				   struct zs_error *err);
/* The same over rc, a channel to the server the caller keeps for many
 * reads (zs_rpc_client_open; one per read costs a connection each). */
struct zs_rpc_client;
enum zs_status zs_server_read_ckpt_on(struct zs_rpc_client *rc, int timeout_ms,
				      const struct zs_read_ckpt *r, float *out, uint64_t *step,
				      struct zs_error *err);

/* Asks the shard server at addr to start a snapshot task now. */
enum zs_status zs_server_snapshot(const char *addr, int timeout_ms, const struct zs_task *t,
				  struct zs_error *err);

/* Sends raw bytes to a coordinator method (tests of malformed requests). */
enum zs_status zs_coord_raw(struct zs_coord_client *c, const char *path,
			    const void *req, size_t len, struct zs_error *err);

#endif
