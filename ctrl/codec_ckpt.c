/*
 * codec_ckpt.c - the messages of step reports, checkpoints, server tasks,
 * rebalancing and checkpoint reads between servers (see codec.h).
 */
#include "ctrl/pb.h"

#include "base/crc32c.h"

/* ---------------------------------------------------------- step reports */

static Zshard__StepReport *step_report_pb(struct arena *a, const struct zs_step_report *r)
{
	Zshard__StepReport *e = NEW(a, Zshard__StepReport, ZSHARD__STEP_REPORT__INIT);
	if (!e)
		return NULL;
	e->rank = r->rank;
	e->step = r->step;
	e->stage = r->stage;
	e->prefetch = r->prefetch;
	e->seconds = r->seconds;
	e->compute_seconds = r->compute_seconds;
	e->gather_wait_seconds = r->gather_wait_seconds;
	e->push_wait_seconds = r->push_wait_seconds;
	e->control_seconds = r->control_seconds;
	e->bytes_gathered = r->bytes_gathered;
	e->bytes_pushed = r->bytes_pushed;
	e->peak_param_bytes = r->peak_param_bytes;
	e->peak_grad_bytes = r->peak_grad_bytes;
	e->rss_peak_bytes = r->rss_peak_bytes;
	e->reported_ms = r->reported_ms;
	e->world = r->world;
	return e;
}

static void step_report_from(const Zshard__StepReport *e, struct zs_step_report *r)
{
	*r = (struct zs_step_report){
		.rank = e->rank, .stage = e->stage, .prefetch = e->prefetch, .step = e->step,
		.seconds = e->seconds, .compute_seconds = e->compute_seconds,
		.gather_wait_seconds = e->gather_wait_seconds,
		.push_wait_seconds = e->push_wait_seconds,
		.control_seconds = e->control_seconds, .bytes_gathered = e->bytes_gathered,
		.bytes_pushed = e->bytes_pushed, .peak_param_bytes = e->peak_param_bytes,
		.peak_grad_bytes = e->peak_grad_bytes, .rss_peak_bytes = e->rss_peak_bytes,
		.reported_ms = e->reported_ms, .world = e->world};
}

enum zs_status zs_enc_report_step(const char *job, uint32_t rank,
				  const struct zs_step_report *r, const struct zs_step_state *begun,
				  struct zs_buf *out)
{
	Zshard__ReportStepRequest m = ZSHARD__REPORT_STEP_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.rank = rank;
	if (r)
		m.report = step_report_pb(&a, r);
	if (begun) {
		m.begun = true;
		m.begun_step = begun->step;
		m.begun_timeline = begun->timeline;
		m.state = (ProtobufCBinaryData){begun->len, begun->data};
	}
	return pb_pack(&a, &m.base, out);
}

/* A step state's bytes, copied (len over ZS_BLOB_MAX: refused). */
static enum zs_status state_from(ProtobufCBinaryData b, uint64_t step, struct zs_step_state *s,
				 struct zs_error *err)
{
	*s = (struct zs_step_state){.step = step};
	if (b.len > ZS_BLOB_MAX)
		return zs_fail(err, ZS_EINVAL, "a rank's step state of %zu bytes (at most %u)", b.len,
			       ZS_BLOB_MAX);
	if (!b.len)
		return ZS_OK;
	if (!(s->data = malloc(b.len)))
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	memcpy(s->data, b.data, b.len);
	s->len = (uint32_t)b.len;
	return ZS_OK;
}

enum zs_status zs_dec_report_step(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
				  uint32_t *rank, struct zs_step_report *r, bool *has_report,
				  struct zs_step_state *begun, bool *has_begun,
				  struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReportStepRequest, report_step_request, p, n, err);
	*rank = m->rank;
	*has_report = m->report != NULL;
	memset(r, 0, sizeof *r);
	if (m->report)
		step_report_from(m->report, r);
	*has_begun = m->begun;
	*begun = (struct zs_step_state){0};
	st = pb_cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
	if (!st && m->begun) {
		st = state_from(m->state, m->begun_step, begun, err);
		begun->timeline = m->begun_timeline;
	}
	DONE(report_step_request);
	return st;
}

enum zs_status zs_enc_report_step_reply(const struct zs_step_answer *an,
					const struct zs_step_state *redo, struct zs_buf *out)
{
	Zshard__ReportStepReply m = ZSHARD__REPORT_STEP_REPLY__INIT;
	struct arena a = {0};
	m.stage = an->stage;
	m.checkpoint_every = an->checkpoint_every;
	m.stop_before = an->stop_before;
	m.n_worlds = an->worlds.n;
	m.worlds = pb_worlds_pb(&a, &an->worlds);
	if (redo) {
		m.redo = true;
		m.redo_step = redo->step;
		m.redo_state = (ProtobufCBinaryData){redo->len, redo->data};
	}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_report_step_reply(const uint8_t *p, size_t n, struct zs_step_answer *an,
					struct zs_step_state *redo, bool *has_redo,
					struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__ReportStepReply, report_step_reply, p, n, err);
	*an = (struct zs_step_answer){.stage = m->stage, .checkpoint_every = m->checkpoint_every,
				      .stop_before = m->stop_before};
	st = pb_worlds_from(m->worlds, m->n_worlds, &an->worlds, err);
	if (redo && !st) {
		*has_redo = m->redo;
		*redo = (struct zs_step_state){0};
		if (m->redo)
			st = state_from(m->redo_state, m->redo_step, redo, err);
	}
	DONE(report_step_reply);
	return st;
}

enum zs_status zs_enc_step_reports(const struct zs_step_report *r, uint32_t n_r,
				   struct zs_buf *out)
{
	Zshard__StepReportsReply m = ZSHARD__STEP_REPORTS_REPLY__INIT;
	struct arena a = {0};
	m.n_reports = n_r;
	m.reports = pb_aalloc(&a, n_r * sizeof *m.reports);
	for (uint32_t i = 0; m.reports && i < n_r; i++)
		if (!(m.reports[i] = step_report_pb(&a, &r[i])))
			break;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_step_reports(const uint8_t *p, size_t n, struct zs_step_report **r,
				   uint32_t *n_r, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__StepReportsReply, step_reports_reply, p, n, err);
	*r = NULL;
	*n_r = 0;
	if (m->n_reports > ZS_MAX_WORLD) {
		st = zs_fail(err, ZS_EINVAL, "too many step reports (%zu)", m->n_reports);
	} else if (m->n_reports) {
		*r = calloc(m->n_reports, sizeof **r);
		if (!*r)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		for (size_t i = 0; !st && i < m->n_reports; i++)
			step_report_from(m->reports[i], &(*r)[i]);
		if (!st)
			*n_r = (uint32_t)m->n_reports;
	}
	DONE(step_reports_reply);
	return st;
}

/* ----------------------------------------------------------- checkpoints */

static Zshard__Checkpoint *ckpt_pb(struct arena *a, const struct zs_checkpoint *c)
{
	Zshard__Checkpoint *p = NEW(a, Zshard__Checkpoint, ZSHARD__CHECKPOINT__INIT);
	if (!p)
		return NULL;
	p->id = c->id;
	p->job = (char *)c->job;
	p->step = c->step;
	p->state = (Zshard__CheckpointState)c->state;
	p->created_ms = c->created_ms;
	p->n_durable = c->n_durable;
	p->durable = c->durable;
	p->bytes = c->bytes;
	p->error = (char *)c->error;
	p->epoch = c->epoch;
	p->incarnation = c->incarnation;
	p->layout_digest = c->layout_digest;
	p->world = c->world;
	p->placement = NEW(a, Zshard__Placement, ZSHARD__PLACEMENT__INIT);
	if (p->placement) {
		p->placement->epoch = c->placement.epoch;
		p->placement->n_shards = c->placement.n_shards;
		p->placement->shards = pb_shards_pb(a, c->placement.shards, c->placement.n_shards);
	}
	p->n_blobs = c->n_blobs;
	p->blobs = pb_aalloc(a, c->n_blobs * sizeof *p->blobs);
	for (uint32_t i = 0; p->blobs && i < c->n_blobs; i++) {
		Zshard__TrainerBlob *b = NEW(a, Zshard__TrainerBlob, ZSHARD__TRAINER_BLOB__INIT);
		if (!b)
			break;
		b->rank = c->blobs[i].rank;
		b->data.len = c->blobs[i].len;
		b->data.data = c->blobs[i].data;
		p->blobs[i] = b;
	}
	return p;
}

static enum zs_status ckpt_from(const Zshard__Checkpoint *p, struct zs_checkpoint *c,
				struct zs_error *err)
{
	enum zs_status st;

	memset(c, 0, sizeof *c);
	c->id = p->id;
	c->step = p->step;
	c->state = (enum zs_ckpt_state)p->state;
	c->created_ms = p->created_ms;
	c->bytes = p->bytes;
	c->epoch = p->epoch;
	c->incarnation = p->incarnation;
	c->layout_digest = p->layout_digest;
	c->world = p->world;
	if ((st = pb_cpy(c->job, sizeof c->job, p->job, "job name", err)) ||
	    (st = pb_cpy(c->error, sizeof c->error, p->error, "checkpoint error", err)))
		return st;
	if (p->n_durable > (1u << 20) || p->n_blobs > ZS_MAX_WORLD)
		return zs_fail(err, ZS_EINVAL, "checkpoint record too large");
	if (p->placement) {
		c->placement.epoch = p->placement->epoch;
		st = pb_shards_from(p->placement->shards, p->placement->n_shards,
				 &c->placement.shards, &c->placement.n_shards, err);
		if (st)
			return st;
	}
	if (p->n_durable) {
		c->durable = malloc(p->n_durable * sizeof *c->durable);
		if (!c->durable)
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		memcpy(c->durable, p->durable, p->n_durable * sizeof *c->durable);
		c->n_durable = (uint32_t)p->n_durable;
	}
	if (p->n_blobs) {
		c->blobs = calloc(p->n_blobs, sizeof *c->blobs);
		if (!c->blobs)
			goto nomem;
		for (size_t i = 0; i < p->n_blobs; i++) {
			if (p->blobs[i]->data.len > ZS_BLOB_MAX) {
				zs_checkpoint_release(c);
				return zs_fail(err, ZS_EINVAL, "a trainer blob is over %u bytes",
					       ZS_BLOB_MAX);
			}
			c->blobs[i].rank = p->blobs[i]->rank;
			c->blobs[i].len = (uint32_t)p->blobs[i]->data.len;
			c->blobs[i].data = malloc(c->blobs[i].len ? c->blobs[i].len : 1);
			c->n_blobs = (uint32_t)i + 1;
			if (!c->blobs[i].data)
				goto nomem;
			if (c->blobs[i].len) /* an empty bytes field has no data pointer */
				memcpy(c->blobs[i].data, p->blobs[i]->data.data, c->blobs[i].len);
		}
	}
	return ZS_OK;
nomem:
	zs_checkpoint_release(c);
	return zs_fail(err, ZS_ENOMEM, "out of memory");
}

enum zs_status zs_enc_checkpoint(const struct zs_checkpoint *c, struct zs_buf *out)
{
	Zshard__CheckpointReply m = ZSHARD__CHECKPOINT_REPLY__INIT;
	struct arena a = {0};
	m.checkpoint = ckpt_pb(&a, c);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_checkpoint(const uint8_t *p, size_t n, struct zs_checkpoint *c,
				 struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__CheckpointReply, checkpoint_reply, p, n, err);
	st = m->checkpoint ? ckpt_from(m->checkpoint, c, err)
			   : zs_fail(err, ZS_EPROTO, "reply carries no checkpoint");
	DONE(checkpoint_reply);
	return st;
}

enum zs_status zs_enc_checkpoints(const struct zs_checkpoint *c, uint32_t n_c,
				  struct zs_buf *out)
{
	Zshard__ListCheckpointsReply m = ZSHARD__LIST_CHECKPOINTS_REPLY__INIT;
	struct arena a = {0};
	m.n_checkpoints = n_c;
	m.checkpoints = pb_aalloc(&a, n_c * sizeof *m.checkpoints);
	for (uint32_t i = 0; m.checkpoints && i < n_c; i++)
		m.checkpoints[i] = ckpt_pb(&a, &c[i]);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_checkpoints(const uint8_t *p, size_t n, struct zs_checkpoint **c,
				  uint32_t *n_c, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	size_t i;
	UNPACK(Zshard__ListCheckpointsReply, list_checkpoints_reply, p, n, err);
	*n_c = 0;
	*c = calloc(m->n_checkpoints ? m->n_checkpoints : 1, sizeof **c);
	if (!*c)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (i = 0; !st && i < m->n_checkpoints; i++)
		st = ckpt_from(m->checkpoints[i], &(*c)[i], err);
	if (st && *c) {
		for (size_t k = 0; k + 1 < i; k++)
			zs_checkpoint_release(&(*c)[k]);
		free(*c);
		*c = NULL;
	} else if (!st) {
		*n_c = (uint32_t)m->n_checkpoints;
	}
	DONE(list_checkpoints_reply);
	return st;
}

enum zs_status zs_enc_ckpt_req(const char *job, uint64_t id_or_step, bool create,
			       struct zs_buf *out)
{
	struct arena a = {0};
	if (create) {
		Zshard__CreateCheckpointRequest m = ZSHARD__CREATE_CHECKPOINT_REQUEST__INIT;
		m.job = (char *)job;
		m.step = id_or_step;
		return pb_pack(&a, &m.base, out);
	} else {
		Zshard__CheckpointRequest m = ZSHARD__CHECKPOINT_REQUEST__INIT;
		m.job = (char *)job;
		m.id = id_or_step;
		return pb_pack(&a, &m.base, out);
	}
}

enum zs_status zs_dec_ckpt_req(const uint8_t *p, size_t n, bool create,
			       char job[ZS_JOB_NAME_MAX], uint64_t *id_or_step,
			       struct zs_error *err)
{
	enum zs_status st;
	if (create) {
		UNPACK(Zshard__CreateCheckpointRequest, create_checkpoint_request, p, n, err);
		st = pb_cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
		*id_or_step = m->step;
		DONE(create_checkpoint_request);
	} else {
		UNPACK(Zshard__CheckpointRequest, checkpoint_request, p, n, err);
		st = pb_cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
		*id_or_step = m->id;
		DONE(checkpoint_request);
	}
	return st;
}

enum zs_status zs_enc_put_blob(const char *job, uint64_t id, uint32_t rank,
			       const void *data, uint32_t len, struct zs_buf *out)
{
	Zshard__PutBlobRequest m = ZSHARD__PUT_BLOB_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.id = id;
	m.rank = rank;
	m.data.len = len;
	m.data.data = (uint8_t *)data;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_put_blob(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
			       uint64_t *id, struct zs_blob *b, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__PutBlobRequest, put_blob_request, p, n, err);
	st = pb_cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
	*id = m->id;
	b->rank = m->rank;
	b->len = 0;
	b->data = NULL;
	if (!st && m->data.len > ZS_BLOB_MAX)
		st = zs_fail(err, ZS_EINVAL, "a trainer blob is %zu bytes (max %u)", m->data.len,
			     ZS_BLOB_MAX);
	if (!st) {
		b->data = malloc(m->data.len ? m->data.len : 1);
		if (!b->data)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		else {
			if (m->data.len) /* an empty bytes field has no data pointer */
				memcpy(b->data, m->data.data, m->data.len);
			b->len = (uint32_t)m->data.len;
		}
	}
	DONE(put_blob_request);
	return st;
}

static Zshard__ServerTask *task_pb(struct arena *a, const struct zs_task *t)
{
	Zshard__ServerTask *p = NEW(a, Zshard__ServerTask, ZSHARD__SERVER_TASK__INIT);
	if (!p)
		return NULL;
	p->kind = (Zshard__TaskKind)t->kind;
	p->job = (char *)t->job;
	p->id = t->id;
	p->step = t->step;
	p->timeline = t->timeline;
	return p;
}

static enum zs_status task_from(const Zshard__ServerTask *p, struct zs_task *t,
				struct zs_error *err)
{
	memset(t, 0, sizeof *t);
	if (!p)
		return zs_fail(err, ZS_EINVAL, "task missing");
	t->kind = (enum zs_task_kind)p->kind;
	t->id = p->id;
	t->step = p->step;
	t->timeline = p->timeline;
	return pb_cpy(t->job, sizeof t->job, p->job, "job name", err);
}

enum zs_status zs_enc_task(const struct zs_task *t, struct zs_buf *out)
{
	struct arena a = {0};
	Zshard__ServerTask *m = task_pb(&a, t);
	if (!m) {
		pb_arena_free(&a);
		return ZS_ENOMEM;
	}
	return pb_pack(&a, &m->base, out);
}

enum zs_status zs_dec_task(const uint8_t *p, size_t n, struct zs_task *t,
			   struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ServerTask, server_task, p, n, err);
	st = task_from(m, t, err);
	DONE(server_task);
	return st;
}

enum zs_status zs_enc_tasks(const struct zs_task *t, uint32_t n_t, struct zs_buf *out)
{
	Zshard__ServerTasksReply m = ZSHARD__SERVER_TASKS_REPLY__INIT;
	struct arena a = {0};
	m.n_tasks = n_t;
	m.tasks = pb_aalloc(&a, n_t * sizeof *m.tasks);
	for (uint32_t i = 0; m.tasks && i < n_t; i++)
		m.tasks[i] = task_pb(&a, &t[i]);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_tasks(const uint8_t *p, size_t n, struct zs_task **t, uint32_t *n_t,
			    struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__ServerTasksReply, server_tasks_reply, p, n, err);
	*n_t = 0;
	*t = calloc(m->n_tasks ? m->n_tasks : 1, sizeof **t);
	if (!*t)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < m->n_tasks; i++)
		st = task_from(m->tasks[i], &(*t)[i], err);
	if (st) {
		free(*t);
		*t = NULL;
	} else {
		*n_t = (uint32_t)m->n_tasks;
	}
	DONE(server_tasks_reply);
	return st;
}

enum zs_status zs_enc_task_done(uint64_t server_id, const struct zs_task *t,
				enum zs_status code, const char *error, uint64_t bytes,
				struct zs_buf *out)
{
	Zshard__TaskDoneRequest m = ZSHARD__TASK_DONE_REQUEST__INIT;
	struct arena a = {0};
	m.server_id = server_id;
	m.task = task_pb(&a, t);
	m.ok = code == ZS_OK;
	m.code = (uint32_t)code;
	m.error = (char *)(error ? error : "");
	m.bytes = bytes;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_task_done(const uint8_t *p, size_t n, uint64_t *server_id,
				struct zs_task *t, enum zs_status *code, char *error,
				size_t error_len, uint64_t *bytes, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__TaskDoneRequest, task_done_request, p, n, err);
	*server_id = m->server_id;
	*code = m->ok ? ZS_OK
		: m->code && m->code <= ZS_ERESUME ? (enum zs_status)m->code
						   : ZS_EINTERNAL;
	*bytes = m->bytes;
	st = task_from(m->task, t, err);
	if (!st)
		snprintf(error, error_len, "%s", m->error ? m->error : "");
	DONE(task_done_request);
	return st;
}

enum zs_status zs_enc_rebalance(const char *name, const uint64_t *servers, uint32_t n,
				struct zs_buf *out)
{
	Zshard__JobRequest m = ZSHARD__JOB_REQUEST__INIT;
	struct arena a = {0};
	m.name = (char *)name;
	m.n_servers = n;
	m.servers = (uint64_t *)servers;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_rebalance(const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX],
				uint64_t **servers, uint32_t *n_servers, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JobRequest, job_request, p, n, err);
	st = pb_cpy(name, ZS_JOB_NAME_MAX, m->name, "job name", err);
	*servers = NULL;
	*n_servers = 0;
	if (!st && m->n_servers > 65536)
		st = zs_fail(err, ZS_EINVAL, "too many servers");
	if (!st && m->n_servers) {
		*servers = malloc(m->n_servers * sizeof **servers);
		if (!*servers)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		else {
			memcpy(*servers, m->servers, m->n_servers * sizeof **servers);
			*n_servers = (uint32_t)m->n_servers;
		}
	}
	DONE(job_request);
	return st;
}

enum zs_status zs_enc_read_ckpt(const struct zs_read_ckpt *r, struct zs_buf *out)
{
	Zshard__ReadCheckpointRequest m = ZSHARD__READ_CHECKPOINT_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)r->job;
	m.id = r->id;
	m.unit = r->unit;
	m.index = r->index;
	m.array = r->array;
	m.offset = r->offset;
	m.length = r->length;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_read_ckpt(const uint8_t *p, size_t n, struct zs_read_ckpt *r,
				struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReadCheckpointRequest, read_checkpoint_request, p, n, err);
	memset(r, 0, sizeof *r);
	r->id = m->id;
	r->unit = m->unit;
	r->index = m->index;
	r->array = m->array;
	r->offset = m->offset;
	r->length = m->length;
	st = pb_cpy(r->job, sizeof r->job, m->job, "job name", err);
	if (!st && (r->array > 2 || r->length > (64u << 20)))
		st = zs_fail(err, ZS_EINVAL, "bad checkpoint read (array %u, %llu elements)",
			     r->array, (unsigned long long)r->length);
	DONE(read_checkpoint_request);
	return st;
}

enum zs_status zs_enc_read_ckpt_reply(uint64_t step, const float *data, uint64_t len,
				      struct zs_buf *out)
{
	Zshard__ReadCheckpointReply m = ZSHARD__READ_CHECKPOINT_REPLY__INIT;
	struct arena a = {0};
	m.step = step;
	m.data.len = len * 4;
	m.data.data = (uint8_t *)data;
	m.crc32c = zs_crc32c(0, data, len * 4);
	m.has_crc = true;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_read_ckpt_reply(const uint8_t *p, size_t n, uint64_t *step,
				      float *out, uint64_t len, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__ReadCheckpointReply, read_checkpoint_reply, p, n, err);
	*step = m->step;
	if (m->data.len != len * 4)
		st = zs_fail(err, ZS_EPROTO, "checkpoint slice of %zu bytes, %llu expected",
			     m->data.len, (unsigned long long)(len * 4));
	else if (m->has_crc && zs_crc32c(0, m->data.data, m->data.len) != m->crc32c)
		st = zs_fail(err, ZS_EIO,
			     "a checkpoint slice of %zu bytes does not match the CRC32C its server took (%08x)",
			     m->data.len, m->crc32c);
	else if (len)
		memcpy(out, m->data.data, len * 4);
	DONE(read_checkpoint_reply);
	return st;
}
