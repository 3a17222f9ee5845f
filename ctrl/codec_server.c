/*
 * codec_server.c - the messages between a shard server and the
 * coordinator: registration, heartbeats (with the rebuilt copies seeded),
 * assignments, the server list and status, the norm exchange (see codec.h).
 */
#include "ctrl/pb.h"

enum zs_status zs_enc_register(const struct zs_server_info *s, struct zs_buf *out)
{
	Zshard__RegisterServerRequest m = ZSHARD__REGISTER_SERVER_REQUEST__INIT;
	struct arena a = {0};
	m.id = s->id;
	m.addr = (char *)s->addr;
	m.data_addr = (char *)s->data_addr;
	m.shm_addr = (char *)s->shm_addr;
	m.host = (char *)s->host;
	m.metrics_addr = (char *)s->metrics_addr;
	m.capacity = s->capacity;
	m.transports = s->transports;
	m.fresh = s->fresh;
	if (s->n_live) {
		m.live = pb_aalloc(&a, s->n_live * sizeof *m.live);
		if (!m.live) {
			pb_arena_free(&a);
			return ZS_ENOMEM;
		}
		for (uint32_t i = 0; i < s->n_live; i++) {
			Zshard__LiveJob *l = NEW(&a, Zshard__LiveJob, ZSHARD__LIVE_JOB__INIT);
			if (!l) {
				pb_arena_free(&a);
				return ZS_ENOMEM;
			}
			l->job = (char *)s->live[i].job;
			l->incarnation = s->live[i].incarnation;
			l->epoch = s->live[i].epoch;
			l->step = s->live[i].step;
			m.live[i] = l;
		}
		m.n_live = s->n_live;
	}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_register(const uint8_t *p, size_t n, struct zs_server_info *s,
			       struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__RegisterServerRequest, register_server_request, p, n, err);
	memset(s, 0, sizeof *s);
	s->id = m->id;
	s->capacity = m->capacity;
	s->transports = m->transports;
	s->fresh = m->fresh;
	if (m->n_live > ZS_LIVE_MAX) { /* the count is read before m is freed */
		st = zs_fail(err, ZS_EINVAL, "%zu live jobs claimed; at most %d", m->n_live,
			     ZS_LIVE_MAX);
		DONE(register_server_request);
		return st;
	}
	for (size_t i = 0; i < m->n_live; i++) {
		s->live[i].incarnation = m->live[i]->incarnation;
		s->live[i].epoch = m->live[i]->epoch;
		s->live[i].step = m->live[i]->step;
		if ((st = pb_cpy(s->live[i].job, sizeof s->live[i].job, m->live[i]->job,
				 "live job name", err))) {
			DONE(register_server_request);
			return st;
		}
	}
	s->n_live = (uint32_t)m->n_live;
	if (!(st = pb_cpy(s->addr, sizeof s->addr, m->addr, "server address", err)) &&
	    !(st = pb_cpy(s->data_addr, sizeof s->data_addr, m->data_addr,
		       "server data address", err)) &&
	    !(st = pb_cpy(s->shm_addr, sizeof s->shm_addr, m->shm_addr,
		       "server shm address", err)) &&
	    !(st = pb_cpy(s->metrics_addr, sizeof s->metrics_addr, m->metrics_addr,
			  "server metrics address", err)))
		st = pb_cpy(s->host, sizeof s->host, m->host, "server host", err);
	DONE(register_server_request);
	return st;
}

enum zs_status zs_enc_register_reply(uint64_t id, uint32_t lease_ms, struct zs_buf *out)
{
	Zshard__RegisterServerReply m = ZSHARD__REGISTER_SERVER_REPLY__INIT;
	struct arena a = {0};
	m.id = id;
	m.lease_ms = lease_ms;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_register_reply(const uint8_t *p, size_t n, uint64_t *id,
				     uint32_t *lease_ms, struct zs_error *err)
{
	UNPACK(Zshard__RegisterServerReply, register_server_reply, p, n, err);
	*id = m->id;
	*lease_ms = m->lease_ms;
	DONE(register_server_reply);
	return ZS_OK;
}

enum zs_status zs_enc_server_id(uint64_t id, struct zs_buf *out)
{
	Zshard__HeartbeatRequest m = ZSHARD__HEARTBEAT_REQUEST__INIT;
	struct arena a = {0};
	m.id = id;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_server_id(const uint8_t *p, size_t n, uint64_t *id,
				struct zs_error *err)
{
	UNPACK(Zshard__HeartbeatRequest, heartbeat_request, p, n, err);
	*id = m->id;
	DONE(heartbeat_request);
	return ZS_OK;
}

enum zs_status zs_enc_heartbeat(uint64_t id, const char *health, struct zs_buf *out)
{
	return zs_enc_heartbeat_ex(id, health, NULL, 0, out);
}

enum zs_status zs_enc_heartbeat_ex(uint64_t id, const char *health, const struct zs_seeded *seeded,
				   uint32_t n_seeded, struct zs_buf *out)
{
	Zshard__HeartbeatRequest m = ZSHARD__HEARTBEAT_REQUEST__INIT;
	struct arena a = {0};
	m.id = id;
	m.health = (char *)health;
	if (n_seeded && (m.seeded = pb_aalloc(&a, n_seeded * sizeof *m.seeded))) {
		for (uint32_t i = 0; i < n_seeded; i++) {
			Zshard__SeededCopy *c = NEW(&a, Zshard__SeededCopy, ZSHARD__SEEDED_COPY__INIT);
			if (!c)
				break;
			c->job = (char *)seeded[i].job;
			c->unit = seeded[i].unit;
			c->index = seeded[i].index;
			c->server_id = seeded[i].server_id;
			c->epoch = seeded[i].epoch;
			m.seeded[m.n_seeded++] = c;
		}
	}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_heartbeat_ex(const uint8_t *p, size_t n, uint64_t *id, char *health,
				   size_t cap, struct zs_seeded **seeded, uint32_t *n_seeded,
				   struct zs_error *err)
{
	enum zs_status st;
	*seeded = NULL;
	*n_seeded = 0;
	UNPACK(Zshard__HeartbeatRequest, heartbeat_request, p, n, err);
	*id = m->id;
	st = pb_cpy(health, cap, m->health, "server health", err);
	if (!st && m->n_seeded > 4096)
		st = zs_fail(err, ZS_EINVAL, "%zu seeded copies in one heartbeat", m->n_seeded);
	if (!st && m->n_seeded && !(*seeded = calloc(m->n_seeded, sizeof **seeded)))
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < m->n_seeded; i++) {
		st = pb_cpy((*seeded)[i].job, sizeof (*seeded)[i].job, m->seeded[i]->job,
			    "job name", err);
		(*seeded)[i].unit = m->seeded[i]->unit;
		(*seeded)[i].index = m->seeded[i]->index;
		(*seeded)[i].server_id = m->seeded[i]->server_id;
		(*seeded)[i].epoch = m->seeded[i]->epoch;
		*n_seeded = (uint32_t)i + 1;
	}
	if (st) {
		free(*seeded);
		*seeded = NULL;
		*n_seeded = 0;
	}
	DONE(heartbeat_request);
	return st;
}

enum zs_status zs_dec_heartbeat(const uint8_t *p, size_t n, uint64_t *id, char *health,
				size_t cap, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__HeartbeatRequest, heartbeat_request, p, n, err);
	*id = m->id;
	st = pb_cpy(health, cap, m->health, "server health", err);
	DONE(heartbeat_request);
	return st;
}

enum zs_status zs_enc_heartbeat_reply(const struct zs_hb_reply *r, struct zs_buf *out)
{
	Zshard__HeartbeatReply m = ZSHARD__HEARTBEAT_REPLY__INIT;
	struct arena a = {0};
	m.lease_ms = r->lease_ms;
	m.assign_gen = r->assign_gen;
	m.task_gen = r->task_gen;
	m.n_norms_wanted = r->n_wants < ZS_NORM_WANTS ? r->n_wants : ZS_NORM_WANTS;
	m.norms_wanted = pb_aalloc(&a, (m.n_norms_wanted ? m.n_norms_wanted : 1) *
					   sizeof *m.norms_wanted);
	for (size_t i = 0; m.norms_wanted && i < m.n_norms_wanted; i++) {
		Zshard__NormWanted *w = NEW(&a, Zshard__NormWanted, ZSHARD__NORM_WANTED__INIT);
		if (!w)
			break;
		w->job = (char *)r->wants[i].job;
		w->step = r->wants[i].step;
		w->timeline = r->wants[i].timeline;
		m.norms_wanted[i] = w;
	}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_heartbeat_reply(const uint8_t *p, size_t n, struct zs_hb_reply *r,
				      struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__HeartbeatReply, heartbeat_reply, p, n, err);
	memset(r, 0, sizeof *r);
	r->lease_ms = m->lease_ms;
	r->assign_gen = m->assign_gen;
	r->task_gen = m->task_gen;
	/* more than the coordinator sends: the rest at the next heartbeat */
	for (size_t i = 0; !st && i < m->n_norms_wanted && i < ZS_NORM_WANTS; i++) {
		struct zs_norm_want *w = &r->wants[r->n_wants];
		st = pb_cpy(w->job, sizeof w->job, m->norms_wanted[i]->job, "job name", err);
		w->step = m->norms_wanted[i]->step;
		w->timeline = m->norms_wanted[i]->timeline;
		if (!st)
			r->n_wants++;
	}
	DONE(heartbeat_reply);
	return st;
}

enum zs_status zs_enc_assignments(uint64_t gen, const struct zs_assignment *as,
				  uint32_t n_a, struct zs_buf *out)
{
	Zshard__GetAssignmentsReply m = ZSHARD__GET_ASSIGNMENTS_REPLY__INIT;
	struct arena a = {0};
	m.assign_gen = gen;
	m.n_assignments = n_a;
	m.assignments = pb_assignments_pb(&a, as, n_a);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_assignments(const uint8_t *p, size_t n, uint64_t *gen,
				  struct zs_assignment **as, uint32_t *n_a,
				  struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__GetAssignmentsReply, get_assignments_reply, p, n, err);
	*gen = m->assign_gen;
	st = pb_assignments_from(m->assignments, m->n_assignments, as, n_a, err);
	DONE(get_assignments_reply);
	return st;
}

/* A message's server list into a malloc'd array (*s NULL on failure). */
enum zs_status zs_enc_servers(const struct zs_server_info *s, uint32_t n_s,
			      struct zs_buf *out)
{
	Zshard__ListServersReply m = ZSHARD__LIST_SERVERS_REPLY__INIT;
	struct arena a = {0};
	m.n_servers = n_s;
	m.servers = pb_aalloc(&a, n_s * sizeof *m.servers);
	for (uint32_t i = 0; m.servers && i < n_s; i++)
		m.servers[i] = pb_server_pb(&a, &s[i]);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_servers(const uint8_t *p, size_t n, struct zs_server_info **s,
			      uint32_t *n_s, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ListServersReply, list_servers_reply, p, n, err);
	st = pb_servers_from(m->servers, m->n_servers, s, n_s, err);
	DONE(list_servers_reply);
	return st;
}

enum zs_status zs_enc_server_info(const struct zs_server_info *s, struct zs_buf *out)
{
	struct arena a = {0};
	Zshard__ServerInfo *m = pb_server_pb(&a, s);
	if (!m) {
		pb_arena_free(&a);
		return ZS_ENOMEM;
	}
	return pb_pack(&a, &m->base, out);
}

enum zs_status zs_dec_server_info(const uint8_t *p, size_t n,
				  struct zs_server_info *s, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ServerInfo, server_info, p, n, err);
	st = pb_server_from(m, s, err);
	DONE(server_info);
	return st;
}

enum zs_status zs_enc_server_status(const struct zs_server_status *s,
				    struct zs_buf *out)
{
	Zshard__ServerStatusReply m = ZSHARD__SERVER_STATUS_REPLY__INIT;
	struct arena a = {0};
	m.id = s->id;
	m.addr = (char *)s->addr;
	m.coordinator = (char *)s->coordinator;
	m.registered = s->registered;
	m.capacity = s->capacity;
	m.assigned_bytes = s->assigned_bytes;
	m.assign_gen = s->assign_gen;
	m.uptime_ms = s->uptime_ms;
	m.n_assignments = s->n_assignments;
	m.assignments = pb_assignments_pb(&a, s->assignments, s->n_assignments);
	m.jobs_held = s->jobs_held;
	m.shards = s->shards;
	m.state_bytes = s->state_bytes;
	m.steps_applied = s->steps_applied;
	m.bytes_in = s->bytes_in;
	m.bytes_out = s->bytes_out;
	m.gathers_waiting = s->gathers_waiting;
	m.data_addr = (char *)s->data_addr;
	m.shm_addr = (char *)s->shm_addr;
	m.rss_bytes = s->rss_bytes;
	m.rss_peak_bytes = s->rss_peak_bytes;
	m.rdma = (char *)s->rdma;
	m.device = (char *)s->device;
	m.shards_on_device = s->shards_on_device;
	m.device_bytes = s->device_bytes;
	m.shards_tiered = s->shards_tiered;
	m.replica_bytes = s->replica_bytes;
	m.n_job_steps = s->n_job_steps;
	m.job_steps = pb_aalloc(&a, s->n_job_steps * sizeof *m.job_steps);
	for (uint32_t i = 0; m.job_steps && i < s->n_job_steps; i++) {
		const struct zs_job_step_stats *js = &s->job_steps[i];
		Zshard__JobStepStats *e = NEW(&a, Zshard__JobStepStats, ZSHARD__JOB_STEP_STATS__INIT);
		if (!e)
			break;
		e->job = (char *)js->job;
		e->step = js->step;
		e->shards = js->shards;
		e->reduce_seconds = js->reduce_seconds;
		e->optim_seconds = js->optim_seconds;
		m.job_steps[i] = e;
	}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_server_status(const uint8_t *p, size_t n,
				    struct zs_server_status *s, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ServerStatusReply, server_status_reply, p, n, err);
	memset(s, 0, sizeof *s);
	s->id = m->id;
	s->registered = m->registered;
	s->capacity = m->capacity;
	s->assigned_bytes = m->assigned_bytes;
	s->assign_gen = m->assign_gen;
	s->uptime_ms = m->uptime_ms;
	s->jobs_held = m->jobs_held;
	s->shards = m->shards;
	s->state_bytes = m->state_bytes;
	s->steps_applied = m->steps_applied;
	s->bytes_in = m->bytes_in;
	s->bytes_out = m->bytes_out;
	s->gathers_waiting = m->gathers_waiting;
	s->rss_bytes = m->rss_bytes;
	s->rss_peak_bytes = m->rss_peak_bytes;
	s->shards_on_device = m->shards_on_device;
	s->device_bytes = m->device_bytes;
	s->shards_tiered = m->shards_tiered;
	s->replica_bytes = m->replica_bytes;
	if (m->n_job_steps > (1u << 16)) { /* the count is read before m is freed */
		enum zs_status bad = zs_fail(err, ZS_EINVAL, "too many job step stats (%zu)",
					     m->n_job_steps);
		DONE(server_status_reply);
		return bad;
	}
	if (m->n_job_steps) {
		s->job_steps = calloc(m->n_job_steps, sizeof *s->job_steps);
		if (!s->job_steps) {
			DONE(server_status_reply);
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		}
		s->n_job_steps = (uint32_t)m->n_job_steps;
	}
	st = ZS_OK;
	for (size_t i = 0; !st && i < m->n_job_steps; i++) {
		struct zs_job_step_stats *js = &s->job_steps[i];
		js->step = m->job_steps[i]->step;
		js->shards = m->job_steps[i]->shards;
		js->reduce_seconds = m->job_steps[i]->reduce_seconds;
		js->optim_seconds = m->job_steps[i]->optim_seconds;
		st = pb_cpy(js->job, sizeof js->job, m->job_steps[i]->job, "job name", err);
	}
	if (!st && !(st = pb_cpy(s->addr, sizeof s->addr, m->addr, "address", err)) &&
	    !(st = pb_cpy(s->rdma, sizeof s->rdma, m->rdma, "rdma note", err)) &&
	    !(st = pb_cpy(s->device, sizeof s->device, m->device, "device", err)) &&
	    !(st = pb_cpy(s->data_addr, sizeof s->data_addr, m->data_addr, "data address", err)) &&
	    !(st = pb_cpy(s->shm_addr, sizeof s->shm_addr, m->shm_addr, "shm address", err)) &&
	    !(st = pb_cpy(s->coordinator, sizeof s->coordinator, m->coordinator,
		       "coordinator", err)))
		st = pb_assignments_from(m->assignments, m->n_assignments,
				      &s->assignments, &s->n_assignments, err);
	if (st)
		zs_server_status_release(s);
	DONE(server_status_reply);
	return st;
}

void zs_server_status_release(struct zs_server_status *s)
{
	for (uint32_t i = 0; i < s->n_assignments; i++)
		zs_assignment_release(&s->assignments[i]);
	free(s->assignments);
	free(s->job_steps);
	memset(s, 0, sizeof *s);
}

enum zs_status zs_enc_norm_report(const struct zs_norm_report *r, struct zs_buf *out)
{
	Zshard__ReportNormRequest m = ZSHARD__REPORT_NORM_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)r->job;
	m.step = r->step;
	m.server_id = r->server_id;
	m.settled = r->settled;
	m.settled_total = r->settled_total;
	m.timeline = r->timeline;
	m.n_norms = r->n;
	m.norms = pb_aalloc(&a, r->n * sizeof *m.norms);
	for (uint32_t i = 0; m.norms && i < r->n; i++) {
		Zshard__ShardNorm *e = NEW(&a, Zshard__ShardNorm, ZSHARD__SHARD_NORM__INIT);
		if (!e)
			break;
		e->unit = r->norms[i].unit;
		e->index = r->norms[i].index;
		e->sumsq = r->norms[i].sumsq;
		m.norms[i] = e;
	}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_norm_report(const uint8_t *p, size_t n, struct zs_norm_report *r,
				  struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReportNormRequest, report_norm_request, p, n, err);
	memset(r, 0, sizeof *r);
	r->step = m->step;
	r->server_id = m->server_id;
	r->settled = m->settled;
	r->settled_total = m->settled_total;
	r->timeline = m->timeline;
	st = pb_cpy(r->job, sizeof r->job, m->job, "job name", err);
	if (!st && m->n_norms > (1u << 24))
		st = zs_fail(err, ZS_EINVAL, "too many shard norms (%zu)", m->n_norms);
	if (!st && m->n_norms) {
		r->norms = malloc(m->n_norms * sizeof *r->norms);
		if (!r->norms)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		for (size_t i = 0; !st && i < m->n_norms; i++)
			r->norms[i] = (struct zs_shard_norm){m->norms[i]->unit, m->norms[i]->index,
							     m->norms[i]->sumsq};
		if (!st)
			r->n = (uint32_t)m->n_norms;
	}
	DONE(report_norm_request);
	return st;
}

enum zs_status zs_enc_norm_reply(double total, uint32_t shards, struct zs_buf *out)
{
	Zshard__ReportNormReply m = ZSHARD__REPORT_NORM_REPLY__INIT;
	struct arena a = {0};
	m.total_sumsq = total;
	m.shards = shards;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_norm_reply(const uint8_t *p, size_t n, double *total,
				 uint32_t *shards, struct zs_error *err)
{
	UNPACK(Zshard__ReportNormReply, report_norm_reply, p, n, err);
	*total = m->total_sumsq;
	*shards = m->shards;
	DONE(report_norm_reply);
	return ZS_OK;
}

enum zs_status zs_enc_dropped(uint64_t server_id, const struct zs_dropped *d, uint32_t n,
			      struct zs_buf *out)
{
	Zshard__DroppedRanksRequest m = ZSHARD__DROPPED_RANKS_REQUEST__INIT;
	struct arena a = {0};

	m.server_id = server_id;
	if (n && (m.ranks = pb_aalloc(&a, n * sizeof *m.ranks)))
		for (uint32_t i = 0; i < n; i++) {
			Zshard__DroppedRank *r = NEW(&a, Zshard__DroppedRank, ZSHARD__DROPPED_RANK__INIT);
			if (!r)
				break;
			r->job = (char *)d[i].job;
			r->incarnation = d[i].incarnation;
			r->rank = d[i].rank;
			r->back = d[i].back;
			r->reconnects = d[i].reconnects;
			r->session = d[i].session;
			m.ranks[m.n_ranks++] = r;
		}
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_dropped(const uint8_t *p, size_t n, uint64_t *server_id,
			      struct zs_dropped **d, uint32_t *n_d, struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	*d = NULL;
	*n_d = 0;
	UNPACK(Zshard__DroppedRanksRequest, dropped_ranks_request, p, n, err);
	*server_id = m->server_id;
	if (m->n_ranks > 65536)
		st = zs_fail(err, ZS_EINVAL, "%zu dropped ranks in one report", m->n_ranks);
	else if (m->n_ranks && !(*d = calloc(m->n_ranks, sizeof **d)))
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < m->n_ranks; i++) {
		st = pb_cpy((*d)[i].job, sizeof (*d)[i].job, m->ranks[i]->job, "job name", err);
		(*d)[i].incarnation = m->ranks[i]->incarnation;
		(*d)[i].rank = m->ranks[i]->rank;
		(*d)[i].back = m->ranks[i]->back;
		(*d)[i].reconnects = m->ranks[i]->reconnects;
		(*d)[i].session = m->ranks[i]->session;
		*n_d = (uint32_t)i + 1;
	}
	if (st) {
		free(*d);
		*d = NULL;
		*n_d = 0;
	}
	DONE(dropped_ranks_request);
	return st;
}

enum zs_status zs_enc_dropped_reply(uint32_t marked, struct zs_buf *out)
{
	Zshard__DroppedRanksReply m = ZSHARD__DROPPED_RANKS_REPLY__INIT;
	struct arena a = {0};

	m.marked = marked;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_dropped_reply(const uint8_t *p, size_t n, uint32_t *marked,
				    struct zs_error *err)
{
	UNPACK(Zshard__DroppedRanksReply, dropped_ranks_reply, p, n, err);
	*marked = m->marked;
	DONE(dropped_ranks_reply);
	return ZS_OK;
}
