/*
 * coord.c - the coordinator's life (start, stop), its RPC method table,
 * and the lookups and replies every handler shares (see state.h).
 *
 * Catalog tables: meta ("next_server_id", "assign_gen": u64 LE),
 * servers (u64 BE id -> ServerInfo), jobs (name -> Job), ckpts.
 */
#include "coord/state.h"

#include <time.h>

struct srv *coord_find_srv(struct coord *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_srvs; i++)
		if (c->srvs[i].info.id == id)
			return &c->srvs[i];
	return NULL;
}

struct zs_job *coord_find_job(struct coord *c, const char *name)
{
	for (size_t i = 0; i < c->n_jobs; i++)
		if (!strcmp(c->jobs[i].spec.name, name))
			return &c->jobs[i];
	return NULL;
}

/* "server ID (ADDR)" for messages an operator acts on: the address says
 * which process, the id alone does not. Returns buf. */
const char *coord_server_name(struct coord *c, uint64_t id, char *buf, size_t len)
{
	struct srv *s = coord_find_srv(c, id);

	if (s)
		snprintf(buf, len, "server %llu (%s)", (unsigned long long)id, s->info.addr);
	else
		snprintf(buf, len, "server %llu", (unsigned long long)id);
	return buf;
}

/* The job named, or NULL after failing call with ZS_ENOTFOUND. */
struct zs_job *coord_job_or_fail(struct coord *c, struct zs_rpc_call *call, const char *name)
{
	struct zs_job *j = coord_find_job(c, name);

	if (!j)
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", name);
	return j;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

bool coord_placement_servers(const struct zs_placement *pl, uint64_t **ids, uint32_t *n)
{
	uint64_t *v;
	uint32_t m = 0;

	*ids = NULL;
	*n = 0;
	if (!pl->n_shards)
		return true;
	v = malloc(pl->n_shards * sizeof *v);
	if (!v)
		return false;
	for (uint32_t i = 0; i < pl->n_shards; i++)
		v[i] = pl->shards[i].server_id;
	qsort(v, pl->n_shards, sizeof *v, cmp_u64);
	for (uint32_t i = 0; i < pl->n_shards; i++)
		if (!m || v[m - 1] != v[i])
			v[m++] = v[i];
	*ids = v;
	*n = m;
	return true;
}

bool coord_id_in(const uint64_t *ids, uint32_t n, uint64_t sid)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ids[mid] == sid)
			return true;
		if (ids[mid] < sid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool coord_job_servers(struct coord *c, const struct zs_job *j, const uint64_t **ids,
		       uint32_t *n)
{
	struct jobsrv *s;

	for (s = c->jobsrvs; s; s = s->next)
		if (!strcmp(s->job, j->spec.name))
			break;
	if (!s) {
		s = calloc(1, sizeof *s);
		if (!s)
			return false;
		snprintf(s->job, sizeof s->job, "%s", j->spec.name);
		s->next = c->jobsrvs;
		c->jobsrvs = s;
	} else if (s->incarnation == j->incarnation && s->epoch == j->placement.epoch &&
		   s->shards == j->placement.shards && s->n_shards == j->placement.n_shards) {
		goto out;
	}
	free(s->ids);
	s->ids = NULL;
	s->n_shards = 0;
	s->shards = NULL;
	if (!coord_placement_servers(&j->placement, &s->ids, &s->n))
		return false;
	s->incarnation = j->incarnation;
	s->epoch = j->placement.epoch;
	s->shards = j->placement.shards;
	s->n_shards = j->placement.n_shards;
out:
	*ids = s->ids;
	*n = s->n;
	return true;
}

void coord_jobsrv_free(struct coord *c)
{
	while (c->jobsrvs) {
		struct jobsrv *s = c->jobsrvs;
		c->jobsrvs = s->next;
		free(s->ids);
		free(s);
	}
}

/* Bytes placements hold on server id, over all jobs except skip. */
uint64_t coord_used_on(struct coord *c, uint64_t id, const struct zs_job *skip)
{
	uint64_t b = 0;
	for (size_t i = 0; i < c->n_jobs; i++)
		if (&c->jobs[i] != skip)
			b += place_bytes_on(&c->jobs[i].spec, &c->jobs[i].placement, id);
	return b;
}

/* Encodes and sends a job, or fails the call. */
void coord_reply_job(struct zs_rpc_call *call, const struct zs_job *j)
{
	struct zs_job v = *j;
	struct zs_buf b;

	v.token[0] = '\0'; /* a listing, not a credential */
	if (zs_enc_job(&v, &b)) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
		return;
	}
	zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
}

void coord_reply_join(struct coord *c, struct zs_rpc_call *call, const struct zs_job *j)
{
	/* the job as committed, without its trainers: encoded once per change */
	const struct zs_buf *rec = coord_job_record(c, j);
	struct zs_buf b;

	if (rec) {
		zs_rpc_reply(call, rec->data, rec->len);
	} else if (!zs_enc_job(j, &b)) {
		zs_rpc_reply(call, b.data, b.len);
		zs_buf_release(&b);
	} else {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
	}
}

void coord_reply_buf(struct zs_rpc_call *call, enum zs_status enc_st,
		      struct zs_buf *b)
{
	if (enc_st)
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
	else
		zs_rpc_reply(call, b->data, b->len);
	zs_buf_release(b);
}

void coord_reply_err(struct zs_rpc_call *call, const struct zs_error *e)
{
	zs_rpc_fail(call, e->code, "%s", e->msg);
}

/* Fills the live servers with their free bytes (excluding job skip). */
size_t coord_live_servers(struct coord *c, const struct zs_job *skip,
			   struct place_server *out)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_srvs; i++) {
		struct srv *s = &c->srvs[i];
		uint64_t used = coord_used_on(c, s->info.id, skip);
		if (!s->up)
			continue;
		out[n++] = (struct place_server){
			.id = s->info.id,
			.free_bytes = s->info.capacity > used ? s->info.capacity - used : 0,
			.addr = s->info.addr,
			.host = s->info.host,
		};
	}
	return n;
}

static const struct zs_rpc_method methods[] = {
	{ZS_M_REGISTER, coord_h_register},     {ZS_M_HEARTBEAT, coord_h_heartbeat},
	{ZS_M_ASSIGNMENTS, coord_h_assignments}, {ZS_M_SERVERS, coord_h_servers},
	{ZS_M_CREATE_JOB, coord_h_create_job}, {ZS_M_GET_JOB, coord_h_get_job},
	{ZS_M_JOBS, coord_h_jobs},             {ZS_M_DELETE_JOB, coord_h_delete_job},
	{ZS_M_SET_STAGE, coord_h_set_stage},   {ZS_M_REBALANCE, coord_h_rebalance},
	{ZS_M_JOIN, coord_h_join},             {ZS_M_LEAVE, coord_h_leave},
	{ZS_M_TRAINER_HB, coord_h_trainer_heartbeat},
	{ZS_M_STOP_JOB, coord_h_stop_job},
	{ZS_M_CREATE_JOB_JSON, coord_h_create_job_json},
	{ZS_M_COORD_STATUS, coord_h_status},   {ZS_M_REPORT_NORM, coord_h_report_norm},
	{ZS_M_REPORT_STEP, coord_h_report_step},  {ZS_M_STEP_REPORTS, coord_h_step_reports},
	{ZS_M_DELETE_CKPT, coord_h_delete_ckpt},
	{ZS_M_CREATE_CKPT, coord_h_create_ckpt}, {ZS_M_GET_CKPT, coord_h_get_ckpt},
	{ZS_M_LIST_CKPTS, coord_h_list_ckpts}, {ZS_M_PUT_BLOB, coord_h_put_blob},
	{ZS_M_RESTORE, coord_h_restore},       {ZS_M_SERVER_TASKS, coord_h_server_tasks},
	{ZS_M_TASK_DONE, coord_h_task_done},   {ZS_M_COMM_ID, coord_h_comm_id},
};

/* The configuration's bounds and what it must name. */
static enum zs_status config_check(const struct coord_config *cfg, struct zs_error *err)
{
	if (cfg->lease_ms < 100 || cfg->lease_ms > 3600 * 1000)
		return zs_fail(err, ZS_EINVAL, "lease %u ms is out of range [100, 3600000]",
			       cfg->lease_ms);
	if (cfg->trainer_lease_ms && (cfg->trainer_lease_ms < 3000 ||
				      cfg->trainer_lease_ms > 3600 * 1000))
		return zs_fail(err, ZS_EINVAL,
			       "trainer lease %u ms is out of range [3000, 3600000] (trainers renew it every second)",
			       cfg->trainer_lease_ms);
	if (!cfg->etcd && !cfg->data_dir)
		return zs_fail(err, ZS_EINVAL, "a data dir or etcd endpoints are needed");
	if (cfg->etcd_lease_s > 3600)
		return zs_fail(err, ZS_EINVAL, "etcd lease %u s is out of range [1, 3600]",
			       cfg->etcd_lease_s);
	return ZS_OK;
}

/* The catalog in cfg's data directory, locked, opened and loaded into c
 * (nothing kept open when it fails). */
static enum zs_status open_catalog(struct coord *c, const struct coord_config *cfg,
				   struct zs_error *err)
{
	enum zs_status st;

	if ((st = zs_mkdir_p(cfg->data_dir, err)) ||
	    (st = zs_lock_dir(cfg->data_dir, "coordinator.lock", &c->lock_fd, err)))
		return st;
	if (!(st = zs_kv_open(cfg->data_dir, 0, tables, N_TABLES, 0, &c->kv, err)) &&
	    !(st = coord_load(c, err)))
		return ZS_OK;
	zs_kv_close(c->kv);
	c->kv = NULL;
	close(c->lock_fd);
	c->lock_fd = -1;
	return st;
}

enum zs_status coord_start(const struct coord_config *cfg, struct coord **out,
			   char *bound, size_t bound_len, struct zs_error *err)
{
	struct coord *c;
	enum zs_status st;

	if ((st = config_check(cfg, err)))
		return st;
	c = calloc(1, sizeof *c);
	if (!c)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->ha.mu, NULL);
	c->cfg.lease_ms = cfg->lease_ms;
	c->cfg.trainer_lease_ms = cfg->trainer_lease_ms ? cfg->trainer_lease_ms : 10000;
	c->nx.timeout_ms = cfg->norm_timeout_ms ? cfg->norm_timeout_ms : 60000;
	c->started_ms = c->serving_since_ms = zs_now_ms();
	{
		/* the task generation is not persisted: start it where no
		 * server's remembered value can be, or a server would take the
		 * restarted coordinator's first tasks for ones it has seen */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		c->task_gen = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	}
	c->lock_fd = -1;
	if (cfg->etcd) { /* the catalog is in etcd, loaded when we lead */
		snprintf(c->cfg.data_dir, sizeof c->cfg.data_dir, "etcd %s", cfg->etcd);
		goto serve;
	}
	snprintf(c->cfg.data_dir, sizeof c->cfg.data_dir, "%s", cfg->data_dir);

	if ((st = open_catalog(c, cfg, err)))
		goto clean_c;
	atomic_store(&c->ha.leading, 1);
	if (c->n_srvs || c->n_jobs)
		zs_info("catalog: %zu servers (down until they heartbeat), %zu jobs",
			c->n_srvs, c->n_jobs);
serve:
	st = zs_rpc_server_start(cfg->listen, methods,
				 sizeof methods / sizeof methods[0], c, &c->rpc,
				 c->cfg.addr, sizeof c->cfg.addr, err);
	if (st)
		goto clean_state;
	/* what Status says; a wildcard is kept there (clients are configured
	 * with the coordinator's address, they never learn it from it) */
	snprintf(c->cfg.adv, sizeof c->cfg.adv, "%s", c->cfg.addr);
	if (cfg->advertise && (st = zs_advertise_addr(cfg->advertise, c->cfg.addr, false, c->cfg.adv,
						      sizeof c->cfg.adv, "control", err)))
		goto clean_rpc;
	if (cfg->metrics && (st = coord_metrics_start(c, cfg->metrics, cfg->advertise, methods,
						      sizeof methods / sizeof methods[0], err)))
		goto clean_rpc;
	zs_rpc_server_gate(c->rpc, coord_gate, c);
	if (cfg->etcd && (st = coord_lead_start(c, cfg->etcd, cfg->etcd_prefix, cfg->etcd_lease_s,
						err)))
		goto clean_rpc;
	if (pthread_create(&c->reaper, NULL, coord_reaper, c)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot start the lease thread");
		atomic_store(&c->stop, 1);
		coord_lead_stop(c);
		goto clean_rpc;
	}
	if (bound)
		snprintf(bound, bound_len, "%s", c->cfg.addr);
	*out = c;
	return ZS_OK;

clean_rpc:
	coord_metrics_stop(c);
	zs_rpc_server_free(c->rpc);
	coord_lead_close(c);
	coord_metrics_free(c);
clean_state:
	coord_free_state(c);
	zs_kv_close(c->kv);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
clean_c:
	pthread_mutex_destroy(&c->ha.mu);
	pthread_mutex_destroy(&c->mu);
	free(c);
	return st;
}

void coord_free(struct coord *c)
{
	if (!c)
		return;
	atomic_store(&c->stop, 1);
	coord_metrics_stop(c); /* no scrape reads the state from here on */
	pthread_join(c->reaper, NULL);
	coord_lead_stop(c); /* a leader hands over now */
	/* deferred calls are answered before the RPC server goes */
	pthread_mutex_lock(&c->mu);
	while (c->nx.colls) {
		struct norm_coll *n = c->nx.colls;
		c->nx.colls = n->next;
		coord_norm_fail(n, ZS_EUNAVAIL, "the coordinator is stopping");
	}
	while (c->reports)
		coord_drop_reports(c, c->reports->job);
	coord_drop_norms_done(c, NULL);
	coord_drop_comms(c);
	pthread_mutex_unlock(&c->mu);
	zs_rpc_server_free(c->rpc);
	coord_lead_close(c); /* no call uses the etcd client any more */
	coord_metrics_free(c); /* the RPC server's observer is gone with it */
	zs_kv_close(c->kv);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	coord_free_state(c);
	pthread_mutex_destroy(&c->ha.mu);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
