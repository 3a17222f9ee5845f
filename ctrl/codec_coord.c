/*
 * codec_coord.c - the coordinator's messages for trainers and operators:
 * members, jobs, joins and leaves, communicator ids, stages, the
 * coordinator's status (see codec.h; a server's own: codec_server.c).
 */
#include "ctrl/pb.h"

/* ------------------------------------------------------------ messages */

enum zs_status zs_enc_member(const struct zs_member *mb, struct zs_buf *out)
{
	Zshard__Trainer m = ZSHARD__TRAINER__INIT;
	struct arena a = {0};
	m.rank = mb->rank;
	m.host = (char *)mb->host;
	m.joined_ms = mb->joined_ms;
	m.session = mb->session;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_member(const uint8_t *p, size_t n, struct zs_member *mb,
			     struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__Trainer, trainer, p, n, err);
	memset(mb, 0, sizeof *mb);
	mb->rank = m->rank;
	mb->joined_ms = m->joined_ms;
	mb->session = m->session;
	st = pb_cpy(mb->host, sizeof mb->host, m->host, "trainer host", err);
	DONE(trainer);
	return st;
}

enum zs_status zs_enc_trainer_hb_reply(uint64_t timeline, const struct zs_server_info *down,
				       uint32_t n_down, struct zs_buf *out)
{
	Zshard__TrainerHeartbeatReply m = ZSHARD__TRAINER_HEARTBEAT_REPLY__INIT;
	struct arena a = {0};
	m.timeline = timeline;
	m.n_down = n_down;
	m.down = pb_aalloc(&a, (n_down ? n_down : 1) * sizeof *m.down);
	for (uint32_t i = 0; m.down && i < n_down; i++)
		m.down[i] = pb_server_pb(&a, &down[i]);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_trainer_hb_reply(const uint8_t *p, size_t n, uint64_t *timeline,
				       struct zs_server_info **down, uint32_t *n_down,
				       struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__TrainerHeartbeatReply, trainer_heartbeat_reply, p, n, err);
	*timeline = m->timeline;
	st = pb_servers_from(m->down, m->n_down, down, n_down, err);
	DONE(trainer_heartbeat_reply);
	return st;
}

enum zs_status zs_enc_create_job_json(const char *json, struct zs_buf *out)
{
	Zshard__CreateJobJsonRequest m = ZSHARD__CREATE_JOB_JSON_REQUEST__INIT;
	struct arena a = {0};
	m.spec_json = (char *)json;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_create_job_json(const uint8_t *p, size_t n, char **json,
				      struct zs_error *err)
{
	UNPACK(Zshard__CreateJobJsonRequest, create_job_json_request, p, n, err);
	*json = strdup(m->spec_json ? m->spec_json : "");
	DONE(create_job_json_request);
	return *json ? ZS_OK : zs_fail(err, ZS_ENOMEM, "out of memory");
}

enum zs_status zs_enc_create_job(const struct zs_job_spec *spec, struct zs_buf *out)
{
	Zshard__CreateJobRequest m = ZSHARD__CREATE_JOB_REQUEST__INIT;
	struct arena a = {0};
	m.spec = pb_spec_pb(&a, spec);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_create_job(const uint8_t *p, size_t n, struct zs_job_spec *spec,
				 struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__CreateJobRequest, create_job_request, p, n, err);
	st = pb_spec_from(m->spec, spec, err);
	DONE(create_job_request);
	return st;
}

enum zs_status zs_enc_job(const struct zs_job *j, struct zs_buf *out)
{
	return zs_enc_job_deleted(j, 0, 0, out);
}

enum zs_status zs_enc_job_deleted(const struct zs_job *j, uint32_t deleted, uint32_t kept,
				  struct zs_buf *out)
{
	Zshard__JobReply m = ZSHARD__JOB_REPLY__INIT;
	struct arena a = {0};
	m.job = pb_job_pb(&a, j);
	m.checkpoints_deleted = deleted;
	m.checkpoints_kept = kept;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_job_deleted(const uint8_t *p, size_t n, struct zs_job *j,
				  uint32_t *deleted, uint32_t *kept, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JobReply, job_reply, p, n, err);
	if (m->job)
		st = pb_job_from(m->job, j, err);
	else
		st = zs_fail(err, ZS_EPROTO, "reply carries no job");
	if (deleted)
		*deleted = m->checkpoints_deleted;
	if (kept)
		*kept = m->checkpoints_kept;
	DONE(job_reply);
	return st;
}

enum zs_status zs_dec_job(const uint8_t *p, size_t n, struct zs_job *j,
			  struct zs_error *err)
{
	return zs_dec_job_deleted(p, n, j, NULL, NULL, err);
}

enum zs_status zs_enc_jobs(const struct zs_job *j, uint32_t n_j, struct zs_buf *out)
{
	Zshard__ListJobsReply m = ZSHARD__LIST_JOBS_REPLY__INIT;
	struct arena a = {0};
	m.n_jobs = n_j;
	m.jobs = pb_aalloc(&a, n_j * sizeof *m.jobs);
	for (uint32_t i = 0; m.jobs && i < n_j; i++)
		m.jobs[i] = pb_job_pb(&a, &j[i]);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_jobs(const uint8_t *p, size_t n, struct zs_job **j,
			   uint32_t *n_j, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	size_t i;
	UNPACK(Zshard__ListJobsReply, list_jobs_reply, p, n, err);
	*n_j = 0;
	*j = calloc(m->n_jobs ? m->n_jobs : 1, sizeof **j);
	if (!*j)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (i = 0; !st && i < m->n_jobs; i++)
		st = pb_job_from(m->jobs[i], &(*j)[i], err);
	if (st && *j) {
		for (size_t k = 0; k + 1 < i; k++)
			zs_job_release(&(*j)[k]);
		free(*j);
		*j = NULL;
	} else if (!st) {
		*n_j = (uint32_t)m->n_jobs;
	}
	DONE(list_jobs_reply);
	return st;
}

enum zs_status zs_enc_job_name(const char *name, struct zs_buf *out)
{
	return zs_enc_job_request(name, 0, out);
}

enum zs_status zs_enc_job_request(const char *name, unsigned flags, struct zs_buf *out)
{
	Zshard__JobRequest m = ZSHARD__JOB_REQUEST__INIT;
	struct arena a = {0};
	m.name = (char *)name;
	m.with_token = flags & ZS_JR_TOKEN;
	m.keep_checkpoints = flags & ZS_JR_KEEP_CKPTS;
	m.all = flags & ZS_JR_ALL;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_job_request(const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX],
				  unsigned *flags, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JobRequest, job_request, p, n, err);
	*flags = (m->with_token ? ZS_JR_TOKEN : 0) | (m->keep_checkpoints ? ZS_JR_KEEP_CKPTS : 0) |
		 (m->all ? ZS_JR_ALL : 0);
	st = pb_cpy(name, ZS_JOB_NAME_MAX, m->name, "job name", err);
	DONE(job_request);
	return st;
}

enum zs_status zs_dec_job_name(const uint8_t *p, size_t n,
			       char name[ZS_JOB_NAME_MAX], struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JobRequest, job_request, p, n, err);
	st = pb_cpy(name, ZS_JOB_NAME_MAX, m->name, "job name", err);
	DONE(job_request);
	return st;
}

enum zs_status zs_enc_comm_id_req(const char *job, uint64_t timeline, uint32_t rank,
				  const uint8_t *id, struct zs_buf *out)
{
	Zshard__CommIdRequest m = ZSHARD__COMM_ID_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.timeline = timeline;
	m.rank = rank;
	if (id) {
		m.id.data = (uint8_t *)id;
		m.id.len = ZS_COMM_ID_BYTES;
	}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_comm_id_req(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
				  uint64_t *timeline, uint32_t *rank, uint8_t id[ZS_COMM_ID_BYTES],
				  bool *offered, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__CommIdRequest, comm_id_request, p, n, err);
	st = pb_cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
	*timeline = m->timeline;
	*rank = m->rank;
	*offered = m->id.len > 0;
	if (!st && m->id.len && m->id.len != ZS_COMM_ID_BYTES)
		st = zs_fail(err, ZS_EINVAL, "a communicator id is %zu bytes, not %d",
			     m->id.len, ZS_COMM_ID_BYTES);
	if (!st && m->id.len)
		memcpy(id, m->id.data, ZS_COMM_ID_BYTES);
	DONE(comm_id_request);
	return st;
}

enum zs_status zs_enc_comm_id(const uint8_t id[ZS_COMM_ID_BYTES], struct zs_buf *out)
{
	Zshard__CommIdReply m = ZSHARD__COMM_ID_REPLY__INIT;
	struct arena a = {0};
	m.id.data = (uint8_t *)id;
	m.id.len = ZS_COMM_ID_BYTES;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_comm_id(const uint8_t *p, size_t n, uint8_t id[ZS_COMM_ID_BYTES],
			      struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__CommIdReply, comm_id_reply, p, n, err);
	if (m->id.len != ZS_COMM_ID_BYTES)
		st = zs_fail(err, ZS_EPROTO, "the coordinator sent a %zu-byte communicator id",
			     m->id.len);
	else
		memcpy(id, m->id.data, ZS_COMM_ID_BYTES);
	DONE(comm_id_reply);
	return st;
}

enum zs_status zs_enc_set_stage(const char *name, uint32_t stage, struct zs_buf *out)
{
	Zshard__SetStageRequest m = ZSHARD__SET_STAGE_REQUEST__INIT;
	struct arena a = {0};
	m.name = (char *)name;
	m.stage = stage;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_set_stage(const uint8_t *p, size_t n,
				char name[ZS_JOB_NAME_MAX], uint32_t *stage,
				struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__SetStageRequest, set_stage_request, p, n, err);
	st = pb_cpy(name, ZS_JOB_NAME_MAX, m->name, "job name", err);
	*stage = m->stage;
	DONE(set_stage_request);
	return st;
}

enum zs_status zs_enc_resize(const char *name, uint32_t world, struct zs_buf *out)
{
	Zshard__ResizeRequest m = ZSHARD__RESIZE_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)name;
	m.world = world;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_resize(const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX],
			     uint32_t *world, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ResizeRequest, resize_request, p, n, err);
	st = pb_cpy(name, ZS_JOB_NAME_MAX, m->job, "job name", err);
	*world = m->world;
	DONE(resize_request);
	return st;
}

enum zs_status zs_enc_join(const struct zs_join_req *r, struct zs_buf *out)
{
	Zshard__JoinRequest m = ZSHARD__JOIN_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)r->job;
	m.rank = r->rank;
	m.host = (char *)r->host;
	m.session = r->session;
	m.layout_digest = r->layout_digest;
	if (r->layout.n_units)
		m.layout = pb_layout_pb(&a, &r->layout);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_join(const uint8_t *p, size_t n, struct zs_join_req *r,
			   struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JoinRequest, join_request, p, n, err);
	memset(r, 0, sizeof *r);
	r->rank = m->rank;
	r->session = m->session;
	r->layout_digest = m->layout_digest;
	if (!(st = pb_cpy(r->job, sizeof r->job, m->job, "job name", err)) &&
	    !(st = pb_cpy(r->host, sizeof r->host, m->host, "trainer host", err)))
		st = pb_layout_from(m->layout, &r->layout, err);
	DONE(join_request);
	return st;
}

enum zs_status zs_enc_leave(const char *job, uint32_t rank, uint64_t session, bool abandoned,
			    uint64_t next_step, const uint64_t *timeline, struct zs_buf *out)
{
	Zshard__LeaveRequest m = ZSHARD__LEAVE_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.rank = rank;
	m.session = session;
	m.abandoned = abandoned;
	m.next_step = next_step;
	m.with_timeline = timeline != NULL;
	m.timeline = timeline ? *timeline : 0;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_enc_trainer_hb(const char *job, uint32_t rank, uint64_t session,
				 uint64_t reconnects, struct zs_buf *out)
{
	Zshard__LeaveRequest m = ZSHARD__LEAVE_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.rank = rank;
	m.session = session;
	m.reconnects = reconnects;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_leave(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
			    uint32_t *rank, uint64_t *session, bool *abandoned,
			    uint64_t *next_step, uint64_t *timeline, bool *with_timeline,
			    uint64_t *reconnects, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__LeaveRequest, leave_request, p, n, err);
	st = pb_cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
	*rank = m->rank;
	*session = m->session;
	*abandoned = m->abandoned;
	*next_step = m->next_step;
	*timeline = m->timeline;
	*with_timeline = m->with_timeline;
	if (reconnects)
		*reconnects = m->reconnects;
	DONE(leave_request);
	return st;
}

enum zs_status zs_enc_coord_status(const struct zs_coord_status *s, struct zs_buf *out)
{
	Zshard__CoordinatorStatusReply m = ZSHARD__COORDINATOR_STATUS_REPLY__INIT;
	struct arena a = {0};
	m.version = (char *)s->version;
	m.addr = (char *)s->addr;
	m.data_dir = (char *)s->data_dir;
	m.metrics_addr = (char *)s->metrics_addr;
	m.uptime_ms = s->uptime_ms;
	m.lease_ms = s->lease_ms;
	m.servers_up = s->servers_up;
	m.servers_down = s->servers_down;
	m.jobs = s->jobs;
	m.assign_gen = s->assign_gen;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_coord_status(const uint8_t *p, size_t n,
				   struct zs_coord_status *s, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__CoordinatorStatusReply, coordinator_status_reply, p, n, err);
	memset(s, 0, sizeof *s);
	s->uptime_ms = m->uptime_ms;
	s->lease_ms = m->lease_ms;
	s->servers_up = m->servers_up;
	s->servers_down = m->servers_down;
	s->jobs = m->jobs;
	s->assign_gen = m->assign_gen;
	if (!(st = pb_cpy(s->version, sizeof s->version, m->version, "version", err)) &&
	    !(st = pb_cpy(s->addr, sizeof s->addr, m->addr, "address", err)) &&
	    !(st = pb_cpy(s->metrics_addr, sizeof s->metrics_addr, m->metrics_addr,
			  "metrics address", err)))
		st = pb_cpy(s->data_dir, sizeof s->data_dir, m->data_dir, "data dir", err);
	DONE(coordinator_status_reply);
	return st;
}

enum zs_status zs_enc_remove_server(uint64_t id, bool drop, struct zs_buf *out)
{
	Zshard__RemoveServerRequest m = ZSHARD__REMOVE_SERVER_REQUEST__INIT;
	struct arena a = {0};
	m.id = id;
	m.drop_checkpoints = drop;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_remove_server(const uint8_t *p, size_t n, uint64_t *id, bool *drop,
				    struct zs_error *err)
{
	UNPACK(Zshard__RemoveServerRequest, remove_server_request, p, n, err);
	*id = m->id;
	*drop = m->drop_checkpoints;
	DONE(remove_server_request);
	return ZS_OK;
}

enum zs_status zs_enc_removed(char *const *dropped, uint32_t n, struct zs_buf *out)
{
	Zshard__RemoveServerReply m = ZSHARD__REMOVE_SERVER_REPLY__INIT;
	struct arena a = {0};
	m.n_dropped = n;
	m.dropped = (char **)dropped;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_removed(const uint8_t *p, size_t n, char *text, size_t cap,
			      uint32_t *n_dropped, struct zs_error *err)
{
	size_t at = 0;

	UNPACK(Zshard__RemoveServerReply, remove_server_reply, p, n, err);
	*n_dropped = (uint32_t)m->n_dropped;
	text[0] = '\0';
	for (size_t i = 0; i < m->n_dropped && at < cap; i++)
		at += (size_t)snprintf(text + at, cap - at, "%s%s", i ? "; " : "",
				       m->dropped[i] ? m->dropped[i] : "");
	DONE(remove_server_reply);
	return ZS_OK;
}
