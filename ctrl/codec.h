/*
 * codec.h - control-plane messages as zshard structs <-> bytes.
 *
 * The only place (with rpc.c) that knows the wire encoding: protobuf-c
 * generated from proto/zshard.proto. Everything outside ctrl/ sees the
 * structs of model.h and the ones below.
 *
 * Encoders fill a struct zs_buf with a malloc'd buffer (free with
 * zs_buf_release). Decoders check every bound a struct has (string lengths,
 * counts, ndim) and fail with ZS_EPROTO for bytes that do not parse and
 * ZS_EINVAL for a field out of bounds, naming the field; on failure the
 * output is left empty. Decoding does not validate semantics (that is
 * model.h's job).
 */
#ifndef ZS_CODEC_H
#define ZS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "base/status.h"

struct zs_buf {
	uint8_t *data;
	size_t len;
};
void zs_buf_release(struct zs_buf *b);

struct zs_join_req {
	char job[ZS_JOB_NAME_MAX];
	uint32_t rank;
	char host[ZS_ADDR_MAX];
	struct zs_layout layout; /* 0 units: none (the digest, if any, is checked) */
	uint64_t layout_digest;  /* zs_layout_digest of the trainer's layout; 0: none */
	uint64_t session; /* the trainer process's; 0: none (no lease renewal) */
};

struct zs_coord_status {
	char version[64];
	char addr[ZS_ADDR_MAX];
	char data_dir[512];
	char metrics_addr[ZS_ADDR_MAX]; /* "" without --metrics */
	int64_t uptime_ms;
	uint32_t lease_ms;
	uint32_t servers_up, servers_down, jobs;
	uint64_t assign_gen;
};

struct zs_server_status {
	uint64_t id;
	char addr[ZS_ADDR_MAX];
	char coordinator[ZS_ADDR_MAX];
	int registered;
	uint64_t capacity, assigned_bytes, assign_gen;
	int64_t uptime_ms;
	uint32_t n_assignments;
	struct zs_assignment *assignments;
	uint32_t jobs_held, shards;
	uint64_t state_bytes, steps_applied, bytes_in, bytes_out, gathers_waiting;
	char data_addr[ZS_ADDR_MAX], shm_addr[ZS_ADDR_MAX];
	uint64_t rss_bytes, rss_peak_bytes;
	char rdma[256]; /* "offered: DEVICE ..." or "not offered: why" */
	char device[96]; /* --gpu's device, "" without one */
	uint32_t shards_on_device, shards_tiered; /* the rest: in host memory */
	uint64_t device_bytes;
	uint64_t replica_bytes; /* forwarded to its shards' replicas */
	uint32_t n_job_steps;
	struct zs_job_step_stats *job_steps; /* malloc'd by the decoder */
};
void zs_server_status_release(struct zs_server_status *s);

struct zs_norm_report {
	char job[ZS_JOB_NAME_MAX];
	uint64_t step;
	uint64_t server_id;
	uint32_t n;
	struct zs_shard_norm *norms; /* malloc'd by the decoder (free) */
	/* sent again when the coordinator asked (struct zs_norm_want): the
	 * server was answered settled_total for the step and applied it */
	bool settled;
	double settled_total;
	uint64_t timeline; /* the want's, with settled */
};

/* A step whose norm exchange waits for a server's shards (a heartbeat's
 * reply names at most ZS_NORM_WANTS of them). */
#define ZS_NORM_WANTS 8
struct zs_norm_want {
	char job[ZS_JOB_NAME_MAX];
	uint64_t step;
	uint64_t timeline;
};

/* Heartbeat's reply. */
struct zs_hb_reply {
	uint32_t lease_ms;
	uint64_t assign_gen, task_gen;
	uint32_t n_wants;
	struct zs_norm_want wants[ZS_NORM_WANTS];
};

enum zs_status zs_enc_norm_report(const struct zs_norm_report *r, struct zs_buf *out);
enum zs_status zs_dec_norm_report(const uint8_t *p, size_t n, struct zs_norm_report *r,
				  struct zs_error *err);
enum zs_status zs_enc_norm_reply(double total, uint32_t shards, struct zs_buf *out);
enum zs_status zs_dec_norm_reply(const uint8_t *p, size_t n, double *total,
				 uint32_t *shards, struct zs_error *err);

/* ReportStep: the previous step's report (r NULL: none yet), the step
 * begun with the rank's state (NULL: none said), and the reply (redo NULL:
 * not this rank's replacement's step) */
enum zs_status zs_enc_report_step(const char *job, uint32_t rank,
				  const struct zs_step_report *r, const struct zs_step_state *begun,
				  struct zs_buf *out);
/* *has_report, *has_begun say whether r, begun were filled (begun->data
 * malloc'd) */
enum zs_status zs_dec_report_step(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
				  uint32_t *rank, struct zs_step_report *r, bool *has_report,
				  struct zs_step_state *begun, bool *has_begun,
				  struct zs_error *err);
enum zs_status zs_enc_report_step_reply(const struct zs_step_answer *a,
					const struct zs_step_state *redo, struct zs_buf *out);
/* redo may be NULL (not wanted); else *has_redo says whether it was
 * filled (redo->data malloc'd) */
enum zs_status zs_dec_report_step_reply(const uint8_t *p, size_t n, struct zs_step_answer *a,
					struct zs_step_state *redo, bool *has_redo,
					struct zs_error *err);
/* StepReportsReply: *r is malloc'd (free) */
enum zs_status zs_enc_step_reports(const struct zs_step_report *r, uint32_t n_r,
				   struct zs_buf *out);
enum zs_status zs_dec_step_reports(const uint8_t *p, size_t n, struct zs_step_report **r,
				   uint32_t *n_r, struct zs_error *err);

/* RegisterServer: request carries id, addr, data_addr, host, capacity, transports */
enum zs_status zs_enc_register(const struct zs_server_info *s, struct zs_buf *out);
enum zs_status zs_dec_register(const uint8_t *p, size_t n, struct zs_server_info *s,
			       struct zs_error *err);
enum zs_status zs_enc_register_reply(uint64_t id, uint32_t lease_ms, struct zs_buf *out);
enum zs_status zs_dec_register_reply(const uint8_t *p, size_t n, uint64_t *id,
				     uint32_t *lease_ms, struct zs_error *err);

/* Heartbeat and GetAssignments requests: one server id */
enum zs_status zs_enc_server_id(uint64_t id, struct zs_buf *out);
/* A server's heartbeat: its id and health ("" when well). */
enum zs_status zs_enc_heartbeat(uint64_t id, const char *health, struct zs_buf *out);
/* The same with the rebuilt copies seeded since the last one; decoded:
 * *seeded malloc'd (NULL when none), the caller frees it. */
enum zs_status zs_enc_heartbeat_ex(uint64_t id, const char *health, const struct zs_seeded *seeded,
				   uint32_t n_seeded, struct zs_buf *out);
enum zs_status zs_dec_heartbeat_ex(const uint8_t *p, size_t n, uint64_t *id, char *health,
				   size_t cap, struct zs_seeded **seeded, uint32_t *n_seeded,
				   struct zs_error *err);
enum zs_status zs_dec_heartbeat(const uint8_t *p, size_t n, uint64_t *id, char *health,
				size_t cap, struct zs_error *err);
/* DroppedRanks: a server's trainer ranks whose data connections all ended
 * (*d malloc'd, n_d of them), and the reply (how many were marked). */
enum zs_status zs_enc_dropped(uint64_t server_id, const struct zs_dropped *d, uint32_t n,
			      struct zs_buf *out);
enum zs_status zs_dec_dropped(const uint8_t *p, size_t n, uint64_t *server_id,
			      struct zs_dropped **d, uint32_t *n_d, struct zs_error *err);
enum zs_status zs_enc_dropped_reply(uint32_t marked, struct zs_buf *out);
enum zs_status zs_dec_dropped_reply(const uint8_t *p, size_t n, uint32_t *marked,
				    struct zs_error *err);
enum zs_status zs_dec_server_id(const uint8_t *p, size_t n, uint64_t *id,
				struct zs_error *err);
enum zs_status zs_enc_heartbeat_reply(const struct zs_hb_reply *r, struct zs_buf *out);
enum zs_status zs_dec_heartbeat_reply(const uint8_t *p, size_t n, struct zs_hb_reply *r,
				      struct zs_error *err);

enum zs_status zs_enc_assignments(uint64_t gen, const struct zs_assignment *a,
				  uint32_t n_a, struct zs_buf *out);
/* *a is malloc'd; release each with zs_assignment_release, then free(*a) */
enum zs_status zs_dec_assignments(const uint8_t *p, size_t n, uint64_t *gen,
				  struct zs_assignment **a, uint32_t *n_a,
				  struct zs_error *err);

/* One joined trainer (the coordinator's catalog keeps each in a record). */
enum zs_status zs_enc_member(const struct zs_member *m, struct zs_buf *out);
enum zs_status zs_dec_member(const uint8_t *p, size_t n, struct zs_member *m,
			     struct zs_error *err);
/* TrainerHeartbeat's reply: the job's timeline and the servers down. */
enum zs_status zs_enc_trainer_hb_reply(uint64_t timeline, const struct zs_server_info *down,
				       uint32_t n_down, struct zs_buf *out);
enum zs_status zs_dec_trainer_hb_reply(const uint8_t *p, size_t n, uint64_t *timeline,
				       struct zs_server_info **down, uint32_t *n_down,
				       struct zs_error *err);
enum zs_status zs_enc_servers(const struct zs_server_info *s, uint32_t n_s,
			      struct zs_buf *out);
/* *s is malloc'd (free) */
enum zs_status zs_dec_servers(const uint8_t *p, size_t n, struct zs_server_info **s,
			      uint32_t *n_s, struct zs_error *err);

enum zs_status zs_enc_create_job(const struct zs_job_spec *spec, struct zs_buf *out);
/* A job spec as JSON text; the decoder's *json is malloc'd (free). */
enum zs_status zs_enc_create_job_json(const char *json, struct zs_buf *out);
enum zs_status zs_dec_create_job_json(const uint8_t *p, size_t n, char **json,
				      struct zs_error *err);
enum zs_status zs_dec_create_job(const uint8_t *p, size_t n, struct zs_job_spec *spec,
				 struct zs_error *err);

/* JobReply, and the coordinator's catalog record of a job */
enum zs_status zs_enc_job(const struct zs_job *j, struct zs_buf *out);
/* DeleteJob's reply: the job as it was, and its checkpoints deleted or kept */
enum zs_status zs_enc_job_deleted(const struct zs_job *j, uint32_t deleted, uint32_t kept,
				  struct zs_buf *out);
enum zs_status zs_dec_job_deleted(const uint8_t *p, size_t n, struct zs_job *j,
				  uint32_t *deleted, uint32_t *kept, struct zs_error *err);
enum zs_status zs_dec_job(const uint8_t *p, size_t n, struct zs_job *j,
			  struct zs_error *err);

enum zs_status zs_enc_jobs(const struct zs_job *j, uint32_t n_j, struct zs_buf *out);
/* *j is malloc'd: zs_job_release each, then free(*j) */
enum zs_status zs_dec_jobs(const uint8_t *p, size_t n, struct zs_job **j,
			   uint32_t *n_j, struct zs_error *err);

/* ReaderRequest, ReaderReply, ReadersReply (codec_reader.c): a weight
 * reader's registration and the job's readers. */
struct zs_reader_req {
	char job[ZS_JOB_NAME_MAX];
	struct zs_reader_info me;
	bool leave;
	uint64_t lost;   /* a parent that did not answer */
	uint32_t fanout; /* children per reader (0: 2) */
};
struct zs_reader_ans {
	uint64_t id, parent; /* parent 0: read from the servers */
	char parent_addr[ZS_ADDR_MAX];
	uint32_t lease_ms;
	uint64_t timeline; /* the one its pinned step is of */
};
enum zs_status zs_enc_reader_req(const struct zs_reader_req *q, struct zs_buf *out);
enum zs_status zs_dec_reader_req(const uint8_t *p, size_t n, struct zs_reader_req *q,
				 struct zs_error *err);
enum zs_status zs_enc_reader_ans(const struct zs_reader_ans *r, struct zs_buf *out);
enum zs_status zs_dec_reader_ans(const uint8_t *p, size_t n, struct zs_reader_ans *r,
				 struct zs_error *err);
enum zs_status zs_enc_readers(const struct zs_reader_info *v, uint32_t n, struct zs_buf *out);
enum zs_status zs_dec_readers(const uint8_t *p, size_t n, struct zs_reader_info **v,
			      uint32_t *nv, struct zs_error *err);

/* CommIdRequest and CommIdReply: a communicator id of ZS_COMM_ID_BYTES
 * (an offer, or none: n 0) */
#define ZS_COMM_ID_BYTES 128
enum zs_status zs_enc_comm_id_req(const char *job, uint64_t timeline, uint32_t rank,
				  const uint8_t *id, struct zs_buf *out);
enum zs_status zs_dec_comm_id_req(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
				  uint64_t *timeline, uint32_t *rank, uint8_t id[ZS_COMM_ID_BYTES],
				  bool *offered, struct zs_error *err);
enum zs_status zs_enc_comm_id(const uint8_t id[ZS_COMM_ID_BYTES], struct zs_buf *out);
enum zs_status zs_dec_comm_id(const uint8_t *p, size_t n, uint8_t id[ZS_COMM_ID_BYTES],
			      struct zs_error *err);

/* JobRequest (a job name) and SetStageRequest (name, stage) */
enum zs_status zs_enc_job_name(const char *name, struct zs_buf *out);
enum zs_status zs_dec_job_name(const uint8_t *p, size_t n,
			       char name[ZS_JOB_NAME_MAX], struct zs_error *err);
/* A job's name and what the call should do besides (JobRequest) */
enum {
	ZS_JR_TOKEN = 1,      /* GetJob: the job's data-plane token too */
	ZS_JR_KEEP_CKPTS = 2, /* DeleteJob: keep its checkpoints */
	ZS_JR_ALL = 4,        /* ListCheckpoints: every incarnation's */
};
enum zs_status zs_enc_job_request(const char *name, unsigned flags, struct zs_buf *out);
enum zs_status zs_dec_job_request(const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX],
				  unsigned *flags, struct zs_error *err);
/* ResizeRequest: a job's name and its new world size */
enum zs_status zs_enc_resize(const char *name, uint32_t world, struct zs_buf *out);
enum zs_status zs_dec_resize(const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX],
			     uint32_t *world, struct zs_error *err);
enum zs_status zs_enc_set_stage(const char *name, uint32_t stage, struct zs_buf *out);
enum zs_status zs_dec_set_stage(const uint8_t *p, size_t n,
				char name[ZS_JOB_NAME_MAX], uint32_t *stage,
				struct zs_error *err);

enum zs_status zs_enc_join(const struct zs_join_req *r, struct zs_buf *out);
enum zs_status zs_dec_join(const uint8_t *p, size_t n, struct zs_join_req *r,
			   struct zs_error *err);
/* Leave and TrainerHeartbeat; session 0 in a Leave: an operator's eviction;
 * abandoned: the trainer leaves in the middle of a step; timeline (NULL:
 * not said) the job's timeline the trainer ran on */
enum zs_status zs_enc_leave(const char *job, uint32_t rank, uint64_t session, bool abandoned,
			    uint64_t next_step, const uint64_t *timeline, struct zs_buf *out);
/* A trainer's renewal (a LeaveRequest): reconnects, the count of its
 * reconnects begun and ended (odd: one under way) */
enum zs_status zs_enc_trainer_hb(const char *job, uint32_t rank, uint64_t session,
				 uint64_t reconnects, struct zs_buf *out);
/* A Leave or a renewal; reconnects (NULL: not wanted) a renewal's */
enum zs_status zs_dec_leave(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
			    uint32_t *rank, uint64_t *session, bool *abandoned,
			    uint64_t *next_step, uint64_t *timeline, bool *with_timeline,
			    uint64_t *reconnects, struct zs_error *err);

/* The coordinator's catalog record of a server (all of ServerInfo) */
enum zs_status zs_enc_server_info(const struct zs_server_info *s, struct zs_buf *out);
enum zs_status zs_dec_server_info(const uint8_t *p, size_t n,
				  struct zs_server_info *s, struct zs_error *err);

enum zs_status zs_enc_coord_status(const struct zs_coord_status *s, struct zs_buf *out);
enum zs_status zs_dec_coord_status(const uint8_t *p, size_t n,
				   struct zs_coord_status *s, struct zs_error *err);

enum zs_status zs_enc_server_status(const struct zs_server_status *s,
				    struct zs_buf *out);
enum zs_status zs_dec_server_status(const uint8_t *p, size_t n,
				    struct zs_server_status *s, struct zs_error *err);

/* Checkpoints (CheckpointReply; also the catalog record) and their lists */
enum zs_status zs_enc_checkpoint(const struct zs_checkpoint *c, struct zs_buf *out);
enum zs_status zs_dec_checkpoint(const uint8_t *p, size_t n, struct zs_checkpoint *c,
				 struct zs_error *err);
enum zs_status zs_enc_checkpoints(const struct zs_checkpoint *c, uint32_t n_c,
				  struct zs_buf *out);
enum zs_status zs_dec_checkpoints(const uint8_t *p, size_t n, struct zs_checkpoint **c,
				  uint32_t *n_c, struct zs_error *err);
/* CreateCheckpointRequest (job, step) when create, else CheckpointRequest (job, id) */
enum zs_status zs_enc_ckpt_req(const char *job, uint64_t id_or_step, bool create,
			       struct zs_buf *out);
enum zs_status zs_dec_ckpt_req(const uint8_t *p, size_t n, bool create,
			       char job[ZS_JOB_NAME_MAX], uint64_t *id_or_step,
			       struct zs_error *err);
enum zs_status zs_enc_put_blob(const char *job, uint64_t id, uint32_t rank,
			       const void *data, uint32_t len, struct zs_buf *out);
/* b->data is malloc'd */
enum zs_status zs_dec_put_blob(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
			       uint64_t *id, struct zs_blob *b, struct zs_error *err);
enum zs_status zs_enc_task(const struct zs_task *t, struct zs_buf *out);
enum zs_status zs_dec_task(const uint8_t *p, size_t n, struct zs_task *t,
			   struct zs_error *err);
enum zs_status zs_enc_tasks(const struct zs_task *t, uint32_t n_t, struct zs_buf *out);
/* *t is malloc'd (free) */
enum zs_status zs_dec_tasks(const uint8_t *p, size_t n, struct zs_task **t, uint32_t *n_t,
			    struct zs_error *err);
/* A task's outcome: code ZS_OK when done, else why it failed (with error) */
enum zs_status zs_enc_task_done(uint64_t server_id, const struct zs_task *t,
				enum zs_status code, const char *error, uint64_t bytes,
				struct zs_buf *out);
/* *code: ZS_OK, the failure's, or ZS_EINTERNAL for a failure that did not
 * say which */
enum zs_status zs_dec_task_done(const uint8_t *p, size_t n, uint64_t *server_id,
				struct zs_task *t, enum zs_status *code, char *error,
				size_t error_len, uint64_t *bytes, struct zs_error *err);

/* Rebalance: a job name and, optionally, the servers to place it over */
/* RemoveServer: the server, and whether its checkpoints' records may go;
 * its reply: the checkpoints deleted, joined by "; " into text (cap). */
enum zs_status zs_enc_remove_server(uint64_t id, bool drop, struct zs_buf *out);
enum zs_status zs_dec_remove_server(const uint8_t *p, size_t n, uint64_t *id, bool *drop,
				    struct zs_error *err);
enum zs_status zs_enc_removed(char *const *dropped, uint32_t n, struct zs_buf *out);
enum zs_status zs_dec_removed(const uint8_t *p, size_t n, char *text, size_t cap,
			      uint32_t *n_dropped, struct zs_error *err);
enum zs_status zs_enc_rebalance(const char *name, const uint64_t *servers, uint32_t n,
				struct zs_buf *out);
enum zs_status zs_dec_rebalance(const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX],
				uint64_t **servers, uint32_t *n_servers, struct zs_error *err);

struct zs_read_ckpt {
	char job[ZS_JOB_NAME_MAX];
	uint64_t id, offset, length;
	uint32_t unit, index, array;
};
enum zs_status zs_enc_read_ckpt(const struct zs_read_ckpt *r, struct zs_buf *out);
enum zs_status zs_dec_read_ckpt(const uint8_t *p, size_t n, struct zs_read_ckpt *r,
				struct zs_error *err);
enum zs_status zs_enc_read_ckpt_reply(uint64_t step, const float *data, uint64_t len,
				      struct zs_buf *out);
/* out receives exactly len floats */
enum zs_status zs_dec_read_ckpt_reply(const uint8_t *p, size_t n, uint64_t *step,
				      float *out, uint64_t len, struct zs_error *err);

#endif
