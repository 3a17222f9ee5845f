/*
 * coord.c - the coordinator (see coord.h).
 *
 * Concurrency: RPC handlers run on the RPC server's one CQ thread; the lease
 * reaper runs on its own. One mutex guards the in-memory state. Every
 * mutation follows the same order: build the new record aside, commit it to
 * LMDB, and only then swap it into memory, so a failed commit changes
 * nothing and a SIGKILL at any point leaves LMDB with either the old or the
 * new record.
 *
 * Catalog tables: meta ("next_server_id", "assign_gen": u64 LE),
 * servers (u64 BE id -> ServerInfo), jobs (name -> Job).
 */
#include "coord/coord.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrl/codec.h"
#include "storage/kv.h"
#include "base/log.h"
#include "ctrl/methods.h"
#include "model/model.h"
#include "model/placement.h"
#include "ctrl/rpc.h"
#include "base/util.h"
#include "base/version.h"

enum { T_META, T_SERVERS, T_JOBS, T_CKPTS };
static const char *const tables[] = {"meta", "servers", "jobs", "ckpts"};

struct srv {
	struct zs_server_info info; /* as registered (up/used/last_seen derived) */
	int64_t last_hb_ms;         /* monotonic; 0: never since our start */
	bool up;
};

/* A step's norm collection for global-norm clipping (see h_report_norm). */
struct norm_wait {
	struct zs_rpc_call *call;
	uint64_t server_id;
};

struct norm_coll {
	char job[ZS_JOB_NAME_MAX];
	uint64_t step;
	int64_t started_ms;
	uint32_t n_shards, n_have;
	double *sumsq; /* by position in the job's placement */
	bool *have;
	struct norm_wait *waits;
	size_t n_waits;
	struct norm_coll *next;
};

/* A restore or a delete some servers still have to carry out (in memory). */
struct ctask {
	struct zs_task t;
	uint64_t *pending; /* server ids */
	uint32_t n_pending;
	struct ctask *next;
};

/* The latest step report of each rank of a job (in memory only). */
struct sreports {
	char job[ZS_JOB_NAME_MAX];
	uint32_t n;               /* the job's world size */
	struct zs_step_report *r; /* by rank; reported_ms 0: none yet */
	struct sreports *next;
};

struct coord {
	pthread_mutex_t mu;
	struct zs_kv *kv;
	struct zs_rpc_server *rpc;
	pthread_t reaper;
	atomic_int stop;
	int lock_fd;
	uint32_t lease_ms;
	int64_t started_ms;
	char addr[ZS_ADDR_MAX];
	char data_dir[512];

	uint64_t next_server_id;
	uint64_t assign_gen;
	uint64_t task_gen; /* grows when server tasks change (not persisted) */
	struct srv *srvs;
	size_t n_srvs;
	struct zs_job *jobs;
	size_t n_jobs;
	struct norm_coll *norms;
	uint32_t norm_timeout_ms;
	/* checkpoints: the catalog (in id order) and the work in flight */
	uint64_t next_ckpt_id;
	struct zs_checkpoint *ckpts;
	size_t n_ckpts;
	struct ctask *ctasks;
	struct sreports *reports;
};

/* ------------------------------------------------------------ helpers */

static void id_key(uint64_t id, uint8_t k[8])
{
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(id >> (56 - 8 * i));
}

static struct srv *find_srv(struct coord *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_srvs; i++)
		if (c->srvs[i].info.id == id)
			return &c->srvs[i];
	return NULL;
}

static struct zs_job *find_job(struct coord *c, const char *name)
{
	for (size_t i = 0; i < c->n_jobs; i++)
		if (!strcmp(c->jobs[i].spec.name, name))
			return &c->jobs[i];
	return NULL;
}

/* Bytes placements hold on server id, over all jobs except skip. */
static uint64_t used_on(struct coord *c, uint64_t id, const struct zs_job *skip)
{
	uint64_t b = 0;
	for (size_t i = 0; i < c->n_jobs; i++)
		if (&c->jobs[i] != skip)
			b += place_bytes_on(&c->jobs[i].spec, &c->jobs[i].placement, id);
	return b;
}

static enum zs_status put_u64(struct zs_kv_txn *t, const char *key, uint64_t v,
			      struct zs_error *err)
{
	uint8_t b[8];
	zs_kv_u64_enc(v, b);
	return zs_kv_put(t, T_META, key, strlen(key), b, 8, err);
}

/*
 * Commits a job record (or its deletion when del) and, when bump, the next
 * assignment generation, in one transaction.
 */
static enum zs_status save_job(struct coord *c, const struct zs_job *j, bool del,
			       bool bump, struct zs_error *err)
{
	struct zs_kv_txn *t;
	struct zs_buf b = {0};
	enum zs_status st;
	const char *name = j->spec.name;

	if (!del && zs_enc_job(j, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode job record");
	st = zs_kv_begin(c->kv, true, &t, err);
	if (st)
		goto out;
	if (del)
		st = zs_kv_del(t, T_JOBS, name, strlen(name), err);
	else
		st = zs_kv_put(t, T_JOBS, name, strlen(name), b.data, b.len, err);
	if (!st && bump)
		st = put_u64(t, "assign_gen", c->assign_gen + 1, err);
	if (st) {
		zs_kv_abort(t);
		goto out;
	}
	st = zs_kv_commit(t, err);
	if (!st && bump)
		c->assign_gen++;
out:
	zs_buf_release(&b);
	return st;
}

static enum zs_status save_server(struct coord *c, const struct zs_server_info *s,
				  uint64_t next_id, struct zs_error *err)
{
	struct zs_server_info rec = *s;
	struct zs_kv_txn *t;
	struct zs_buf b;
	uint8_t k[8];
	enum zs_status st;

	/* liveness is not persisted */
	rec.up = false;
	rec.used = 0;
	rec.last_seen_ms = 0;
	if (zs_enc_server_info(&rec, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode server record");
	id_key(s->id, k);
	st = zs_kv_begin(c->kv, true, &t, err);
	if (!st) {
		st = zs_kv_put(t, T_SERVERS, k, 8, b.data, b.len, err);
		if (!st)
			st = put_u64(t, "next_server_id", next_id, err);
		if (st)
			zs_kv_abort(t);
		else
			st = zs_kv_commit(t, err);
	}
	zs_buf_release(&b);
	return st;
}

/* Encodes and sends a job, or fails the call. */
static void reply_job(struct zs_rpc_call *call, const struct zs_job *j)
{
	struct zs_buf b;

	if (zs_enc_job(j, &b)) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
		return;
	}
	zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
}

static void reply_buf(struct zs_rpc_call *call, enum zs_status enc_st,
		      struct zs_buf *b)
{
	if (enc_st)
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
	else
		zs_rpc_reply(call, b->data, b->len);
	zs_buf_release(b);
}

static void reply_err(struct zs_rpc_call *call, const struct zs_error *e)
{
	zs_rpc_fail(call, e->code, "%s", e->msg);
}

/* Fills the live servers with their free bytes (excluding job skip). */
static size_t live_servers(struct coord *c, const struct zs_job *skip,
			   struct place_server *out)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_srvs; i++) {
		struct srv *s = &c->srvs[i];
		uint64_t used = used_on(c, s->info.id, skip);
		if (!s->up)
			continue;
		out[n++] = (struct place_server){
			.id = s->info.id,
			.free_bytes = s->info.capacity > used ? s->info.capacity - used : 0,
			.addr = s->info.addr,
		};
	}
	return n;
}

/* ----------------------------------------------------- server membership */

static void h_register(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		       size_t n)
{
	struct coord *c = ctx;
	struct zs_server_info in;
	struct zs_error e = {0};
	char host[ZS_HOST_MAX];
	uint16_t port;
	struct srv *s;
	uint64_t id, next;
	uint64_t used;

	if (zs_dec_register(p, n, &in, &e))
		return reply_err(call, &e);
	if (zs_parse_hostport(in.addr, host, &port, &e) || port == 0)
		return zs_rpc_fail(call, ZS_EINVAL,
				   "server address '%s' must be HOST:PORT with a real port",
				   in.addr);
	if (in.data_addr[0] && zs_parse_hostport(in.data_addr, host, &port, &e))
		return zs_rpc_fail(call, ZS_EINVAL, "bad data address: %s", e.msg);
	if (in.shm_addr[0] && (in.shm_addr[0] != '@' || !in.shm_addr[1]))
		return zs_rpc_fail(call, ZS_EINVAL, "shm address '%s' must be '@name'",
				   in.shm_addr);
	if (in.capacity == 0)
		return zs_rpc_fail(call, ZS_EINVAL, "server capacity must be > 0 bytes");
	if (in.transports & ~0xfu)
		return zs_rpc_fail(call, ZS_EINVAL, "unknown transport bits 0x%x",
				   in.transports & ~0xfu);

	pthread_mutex_lock(&c->mu);
	id = in.id ? in.id : c->next_server_id;
	next = id >= c->next_server_id ? id + 1 : c->next_server_id;
	used = used_on(c, id, NULL);
	if (used > in.capacity) {
		char a[32], b[32];
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOSPC,
				   "server %llu holds %s of placements but offers only %s",
				   (unsigned long long)id, zs_fmt_bytes(used, a, sizeof a),
				   zs_fmt_bytes(in.capacity, b, sizeof b));
	}
	s = find_srv(c, id);
	if (!s) {
		struct srv *g = realloc(c->srvs, (c->n_srvs + 1) * sizeof *g);
		if (!g) {
			pthread_mutex_unlock(&c->mu);
			return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		}
		c->srvs = g;
	}
	in.id = id;
	if (save_server(c, &in, next, &e)) {
		pthread_mutex_unlock(&c->mu);
		zs_error("cannot record server %llu: %s", (unsigned long long)id, e.msg);
		return reply_err(call, &e);
	}
	if (!s) {
		s = &c->srvs[c->n_srvs++];
		memset(s, 0, sizeof *s);
	}
	s->info = in;
	s->last_hb_ms = zs_now_ms();
	if (!s->up)
		zs_info("server %llu up at %s (capacity %llu bytes)",
			(unsigned long long)id, in.addr,
			(unsigned long long)in.capacity);
	s->up = true;
	c->next_server_id = next;
	pthread_mutex_unlock(&c->mu);

	struct zs_buf b;
	reply_buf(call, zs_enc_register_reply(id, c->lease_ms, &b), &b);
}

static void h_heartbeat(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_buf b;
	struct srv *s;
	uint64_t id, gen;

	if (zs_dec_server_id(p, n, &id, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	s = find_srv(c, id);
	if (!s) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOTFOUND,
				   "server %llu is not registered; register again",
				   (unsigned long long)id);
	}
	s->last_hb_ms = zs_now_ms();
	if (!s->up)
		zs_info("server %llu (%s) up again", (unsigned long long)id,
			s->info.addr);
	s->up = true;
	gen = c->assign_gen;
	pthread_mutex_unlock(&c->mu);
	reply_buf(call, zs_enc_heartbeat_reply(c->lease_ms, gen, c->task_gen, &b), &b);
}

static void h_assignments(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			  size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_assignment *as;
	struct zs_buf b;
	uint32_t n_as = 0;
	uint64_t id;
	enum zs_status st = ZS_OK;

	if (zs_dec_server_id(p, n, &id, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	if (!find_srv(c, id)) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOTFOUND, "server %llu is not registered",
				   (unsigned long long)id);
	}
	as = calloc(c->n_jobs ? c->n_jobs : 1, sizeof *as);
	for (size_t j = 0; as && j < c->n_jobs && !st; j++) {
		const struct zs_job *job = &c->jobs[j];
		struct zs_assignment *a = &as[n_as];
		uint32_t k = 0;

		for (uint32_t i = 0; i < job->placement.n_shards; i++)
			k += job->placement.shards[i].server_id == id;
		if (!k)
			continue;
		a->shards = malloc(k * sizeof *a->shards);
		if (!a->shards) {
			st = ZS_ENOMEM;
			break;
		}
		for (uint32_t i = 0; i < job->placement.n_shards; i++)
			if (job->placement.shards[i].server_id == id)
				a->shards[a->n_shards++] = job->placement.shards[i];
		snprintf(a->job, sizeof a->job, "%s", job->spec.name);
		a->epoch = job->placement.epoch;
		a->created_ms = job->created_ms;
		a->bytes = place_bytes_on(&job->spec, &job->placement, id);
		n_as++;
	}
	if (!as || st) {
		st = ZS_ENOMEM;
	} else {
		st = zs_enc_assignments(c->assign_gen, as, n_as, &b);
	}
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; i < n_as; i++)
		zs_assignment_release(&as[i]);
	free(as);
	if (st)
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	reply_buf(call, ZS_OK, &b);
}

static void h_servers(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n)
{
	struct coord *c = ctx;
	struct zs_server_info *v;
	struct zs_buf b;
	int64_t now = zs_now_ms();
	enum zs_status st;

	(void)p;
	(void)n;
	pthread_mutex_lock(&c->mu);
	v = calloc(c->n_srvs ? c->n_srvs : 1, sizeof *v);
	for (size_t i = 0; v && i < c->n_srvs; i++) {
		struct srv *s = &c->srvs[i];
		v[i] = s->info;
		v[i].up = s->up;
		v[i].used = used_on(c, s->info.id, NULL);
		v[i].last_seen_ms = s->last_hb_ms ? now - s->last_hb_ms : -1;
	}
	st = v ? zs_enc_servers(v, (uint32_t)c->n_srvs, &b) : ZS_ENOMEM;
	pthread_mutex_unlock(&c->mu);
	free(v);
	reply_buf(call, st, &b);
}

/* ------------------------------------------------------------------ jobs */

static void h_create_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			 size_t n)
{
	struct coord *c = ctx;
	struct zs_job job = {0};
	struct zs_error e = {0};
	struct place_server *ps;
	struct zs_job *g;
	size_t n_live;

	if (zs_dec_create_job(p, n, &job.spec, &e))
		return reply_err(call, &e);
	if (zs_job_spec_normalize(&job.spec, &e)) {
		zs_job_release(&job);
		return reply_err(call, &e);
	}
	pthread_mutex_lock(&c->mu);
	if (find_job(c, job.spec.name)) {
		zs_fail(&e, ZS_EEXIST, "job '%s' already exists", job.spec.name);
		goto fail;
	}
	ps = malloc((c->n_srvs ? c->n_srvs : 1) * sizeof *ps);
	if (!ps) {
		zs_fail(&e, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	n_live = live_servers(c, NULL, ps);
	if (place_job(&job.spec, ps, n_live, NULL, &job.placement, &e)) {
		free(ps);
		goto fail;
	}
	free(ps);
	job.created_ms = zs_wall_ms();
	g = realloc(c->jobs, (c->n_jobs + 1) * sizeof *g);
	if (!g) {
		zs_fail(&e, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	c->jobs = g;
	if (save_job(c, &job, false, true, &e))
		goto fail;
	{
		size_t pos = 0;
		while (pos < c->n_jobs && strcmp(c->jobs[pos].spec.name, job.spec.name) < 0)
			pos++;
		memmove(c->jobs + pos + 1, c->jobs + pos,
			(c->n_jobs - pos) * sizeof *c->jobs);
		c->jobs[pos] = job;
		c->n_jobs++;
	}
	zs_info("job '%s' created: stage %u, R=%u, %u units, %llu elements, %u shards on %zu servers (epoch %llu)",
		job.spec.name, job.spec.stage, job.spec.world_size,
		job.spec.layout.n_units,
		(unsigned long long)zs_layout_numel(&job.spec.layout),
		job.placement.n_shards, n_live,
		(unsigned long long)job.placement.epoch);
	reply_job(call, &job);
	pthread_mutex_unlock(&c->mu);
	return;
fail:
	pthread_mutex_unlock(&c->mu);
	zs_job_release(&job);
	reply_err(call, &e);
}

/* Decodes a job name and finds the job; on failure the call is answered. */
static struct zs_job *lookup(struct coord *c, struct zs_rpc_call *call,
			     const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX])
{
	struct zs_error e = {0};
	struct zs_job *j;

	if (zs_dec_job_name(p, n, name, &e)) {
		reply_err(call, &e);
		return NULL;
	}
	j = find_job(c, name);
	if (!j)
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", name);
	return j;
}

static void h_get_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_job *j;

	pthread_mutex_lock(&c->mu);
	j = lookup(c, call, p, n, name);
	if (j)
		reply_job(call, j);
	pthread_mutex_unlock(&c->mu);
}

static void h_jobs(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_buf b;
	enum zs_status st;

	(void)p;
	(void)n;
	pthread_mutex_lock(&c->mu);
	st = zs_enc_jobs(c->jobs, (uint32_t)c->n_jobs, &b);
	pthread_mutex_unlock(&c->mu);
	reply_buf(call, st, &b);
}

static void drop_reports(struct coord *c, const char *job)
{
	for (struct sreports **pp = &c->reports; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->job, job)) {
			struct sreports *x = *pp;
			*pp = x->next;
			free(x->r);
			free(x);
			return;
		}
}

static void h_delete_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			 size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_job *j;

	pthread_mutex_lock(&c->mu);
	j = lookup(c, call, p, n, name);
	if (!j)
		goto out;
	if (save_job(c, j, true, true, &e)) {
		reply_err(call, &e);
		goto out;
	}
	reply_job(call, j);
	drop_reports(c, name);
	zs_info("job '%s' deleted (%u trainers were joined)", name, j->n_trainers);
	zs_job_release(j);
	/* keep jobs in name order, as they load from the catalog */
	memmove(j, j + 1, (size_t)(c->jobs + c->n_jobs - (j + 1)) * sizeof *j);
	c->n_jobs--;
out:
	pthread_mutex_unlock(&c->mu);
}

static void h_set_stage(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_job *j;
	uint32_t stage, old;

	if (zs_dec_set_stage(p, n, name, &stage, &e))
		return reply_err(call, &e);
	if (stage < 1 || stage > 3)
		return zs_rpc_fail(call, ZS_EINVAL, "stage %u is invalid (1, 2 or 3)",
				   stage);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, name);
	if (!j) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", name);
		goto out;
	}
	old = j->spec.stage;
	j->spec.stage = stage;
	if (save_job(c, j, false, false, &e)) {
		j->spec.stage = old;
		reply_err(call, &e);
		goto out;
	}
	if (old != stage)
		zs_info("job '%s': stage %u -> %u (from the next step boundary)",
			name, old, stage);
	reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

static void h_rebalance(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_placement np;
	struct place_server *ps;
	struct zs_placement old;
	struct zs_job *j;
	uint64_t *want = NULL;
	uint32_t n_want = 0;
	size_t n_live;

	if (zs_dec_rebalance(p, n, name, &want, &n_want, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, name);
	if (!j) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", name);
		goto out;
	}
	for (uint32_t i = 0; i < n_want; i++) {
		struct srv *sv = find_srv(c, want[i]);
		if (!sv || !sv->up) {
			zs_rpc_fail(call, ZS_EINVAL, "server %llu is %s", (unsigned long long)want[i],
				    sv ? "down" : "not registered");
			goto out;
		}
	}
	if (j->n_trainers) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "job '%s' has %u joined trainers: moving live shard state is not supported; rebalance before trainers join",
			    name, j->n_trainers);
		goto out;
	}
	ps = malloc((c->n_srvs ? c->n_srvs : 1) * sizeof *ps);
	if (!ps) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	n_live = live_servers(c, j, ps);
	if (n_want) { /* only the servers asked for */
		size_t k = 0;
		for (size_t i = 0; i < n_live; i++)
			for (uint32_t w = 0; w < n_want; w++)
				if (ps[i].id == want[w]) {
					ps[k++] = ps[i];
					break;
				}
		n_live = k;
	}
	if (place_job(&j->spec, ps, n_live, &j->placement, &np, &e)) {
		free(ps);
		reply_err(call, &e);
		goto out;
	}
	free(ps);
	if (np.epoch == j->placement.epoch) {
		zs_placement_release(&np);
		reply_job(call, j);
		goto out;
	}
	old = j->placement;
	j->placement = np;
	if (save_job(c, j, false, true, &e)) {
		j->placement = old;
		zs_placement_release(&np);
		reply_err(call, &e);
		goto out;
	}
	zs_placement_release(&old);
	zs_info("job '%s' rebalanced over %zu servers: epoch %llu", name, n_live,
		(unsigned long long)j->placement.epoch);
	reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
	free(want);
}

static void h_join(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_join_req r;
	struct zs_error e = {0};
	struct zs_member *nt;
	struct zs_job *j;
	char why[ZS_ERRMSG_MAX / 2];
	uint32_t pos;

	if (zs_dec_join(p, n, &r, &e))
		return reply_err(call, &e);
	if (zs_layout_validate(&r.layout, &e)) {
		zs_layout_release(&r.layout);
		return zs_rpc_fail(call, ZS_EINVAL, "trainer's layout is invalid: %s",
				   e.msg);
	}
	pthread_mutex_lock(&c->mu);
	j = find_job(c, r.job);
	if (!j) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", r.job);
		goto out;
	}
	if (r.rank >= j->spec.world_size) {
		zs_rpc_fail(call, ZS_EINVAL, "rank %u is out of range: job '%s' has world size %u",
			    r.rank, r.job, j->spec.world_size);
		goto out;
	}
	if (!zs_layout_equal(&r.layout, &j->spec.layout, why, sizeof why)) {
		zs_rpc_fail(call, ZS_EINVAL, "layout differs from job '%s': %s", r.job,
			    why);
		goto out;
	}
	for (pos = 0; pos < j->n_trainers && j->trainers[pos].rank < r.rank; pos++)
		;
	if (pos < j->n_trainers && j->trainers[pos].rank == r.rank) {
		zs_rpc_fail(call, ZS_EEXIST,
			    "rank %u already joined job '%s' (from %s); it must leave first",
			    r.rank, r.job, j->trainers[pos].host);
		goto out;
	}
	nt = malloc((j->n_trainers + 1) * sizeof *nt);
	if (!nt) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	if (j->n_trainers) {
		memcpy(nt, j->trainers, pos * sizeof *nt);
		memcpy(nt + pos + 1, j->trainers + pos,
		       (j->n_trainers - pos) * sizeof *nt);
	}
	nt[pos] = (struct zs_member){.rank = r.rank, .joined_ms = zs_wall_ms()};
	snprintf(nt[pos].host, sizeof nt[pos].host, "%s", r.host);
	{
		struct zs_member *old = j->trainers;
		j->trainers = nt;
		j->n_trainers++;
		if (save_job(c, j, false, false, &e)) {
			j->trainers = old;
			j->n_trainers--;
			free(nt);
			reply_err(call, &e);
			goto out;
		}
		free(old);
	}
	zs_info("job '%s': rank %u joined from %s (%u of %u)", r.job, r.rank,
		r.host[0] ? r.host : "?", j->n_trainers, j->spec.world_size);
	reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
	zs_layout_release(&r.layout);
}

static void h_leave(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_member gone;
	struct zs_job *j;
	uint32_t rank, pos;

	if (zs_dec_leave(p, n, name, &rank, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, name);
	if (!j) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", name);
		goto out;
	}
	for (pos = 0; pos < j->n_trainers && j->trainers[pos].rank != rank; pos++)
		;
	if (pos == j->n_trainers) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "rank %u has not joined job '%s'", rank,
			    name);
		goto out;
	}
	gone = j->trainers[pos];
	memmove(j->trainers + pos, j->trainers + pos + 1,
		(j->n_trainers - pos - 1) * sizeof *j->trainers);
	j->n_trainers--;
	if (save_job(c, j, false, false, &e)) {
		memmove(j->trainers + pos + 1, j->trainers + pos,
			(j->n_trainers - pos) * sizeof *j->trainers);
		j->trainers[pos] = gone;
		j->n_trainers++;
		reply_err(call, &e);
		goto out;
	}
	zs_info("job '%s': rank %u left", name, rank);
	reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

static void h_status(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		     size_t n)
{
	struct coord *c = ctx;
	struct zs_coord_status s = {0};
	struct zs_buf b;

	(void)p;
	(void)n;
	snprintf(s.version, sizeof s.version, "%s", ZS_VERSION);
	snprintf(s.addr, sizeof s.addr, "%s", c->addr);
	snprintf(s.data_dir, sizeof s.data_dir, "%s", c->data_dir);
	pthread_mutex_lock(&c->mu);
	s.uptime_ms = zs_now_ms() - c->started_ms;
	s.lease_ms = c->lease_ms;
	for (size_t i = 0; i < c->n_srvs; i++)
		c->srvs[i].up ? s.servers_up++ : s.servers_down++;
	s.jobs = (uint32_t)c->n_jobs;
	s.assign_gen = c->assign_gen;
	pthread_mutex_unlock(&c->mu);
	reply_buf(call, zs_enc_coord_status(&s, &b), &b);
}

/* ------------------------------------------------------------ checkpoints */

static size_t ckpt_key(const char *job, uint64_t id, uint8_t *k)
{
	size_t n = strlen(job);
	memcpy(k, job, n);
	k[n++] = 0;
	for (int i = 0; i < 8; i++)
		k[n++] = (uint8_t)(id >> (56 - 8 * i));
	return n;
}

static struct zs_checkpoint *find_ckpt(struct coord *c, const char *job, uint64_t id)
{
	for (size_t i = 0; i < c->n_ckpts; i++)
		if (c->ckpts[i].id == id && !strcmp(c->ckpts[i].job, job))
			return &c->ckpts[i];
	return NULL;
}

/* Commits a checkpoint record (or its deletion) with the id counter. */
static enum zs_status save_ckpt(struct coord *c, const struct zs_checkpoint *k, bool del,
				struct zs_error *err)
{
	struct zs_kv_txn *t;
	struct zs_buf b = {0};
	uint8_t key[ZS_JOB_NAME_MAX + 9];
	size_t kl = ckpt_key(k->job, k->id, key);
	enum zs_status st;

	if (!del && zs_enc_checkpoint(k, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode a checkpoint record");
	st = zs_kv_begin(c->kv, true, &t, err);
	if (!st) {
		st = del ? zs_kv_del(t, T_CKPTS, key, kl, err)
			 : zs_kv_put(t, T_CKPTS, key, kl, b.data, b.len, err);
		if (!st)
			st = put_u64(t, "next_ckpt_id", c->next_ckpt_id, err);
		if (st)
			zs_kv_abort(t);
		else
			st = zs_kv_commit(t, err);
	}
	zs_buf_release(&b);
	return st;
}

/* The distinct servers holding shards of j. */
static uint32_t job_servers(const struct zs_job *j, uint64_t *out, uint32_t max)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < j->placement.n_shards; i++) {
		uint64_t id = j->placement.shards[i].server_id;
		bool seen = false;
		for (uint32_t k = 0; k < n && !seen; k++)
			seen = out[k] == id;
		if (!seen && n < max)
			out[n++] = id;
	}
	return n;
}

/* A task for every server that holds shards in placement pl. */
static enum zs_status add_ctask_on(struct coord *c, const char *job,
				   const struct zs_placement *pl, enum zs_task_kind kind,
				   uint64_t id, uint64_t step)
{
	struct ctask *t = calloc(1, sizeof *t);
	uint32_t n = pl->n_shards;
	struct zs_job view = {.placement = *pl};

	if (!t || !(t->pending = malloc((n ? n : 1) * sizeof *t->pending))) {
		free(t);
		return ZS_ENOMEM;
	}
	t->t = (struct zs_task){.kind = kind, .id = id, .step = step};
	snprintf(t->t.job, sizeof t->t.job, "%s", job);
	t->n_pending = job_servers(&view, t->pending, n);
	t->next = c->ctasks;
	c->ctasks = t;
	c->task_gen++;
	return ZS_OK;
}

static enum zs_status add_ctask(struct coord *c, const struct zs_job *j, enum zs_task_kind kind,
				uint64_t id, uint64_t step)
{
	return add_ctask_on(c, j->spec.name, &j->placement, kind, id, step);
}

static void ctask_free(struct ctask *t)
{
	free(t->pending);
	free(t);
}

/* Drops committed checkpoints of job beyond its keep count (oldest first). */
static void enforce_keep(struct coord *c, struct zs_job *j)
{
	uint32_t committed = 0;

	for (size_t i = 0; i < c->n_ckpts; i++)
		committed += !strcmp(c->ckpts[i].job, j->spec.name) &&
			     c->ckpts[i].state == ZS_CKPT_COMMITTED;
	for (size_t i = 0; i < c->n_ckpts && committed > j->spec.keep_checkpoints;) {
		struct zs_checkpoint *k = &c->ckpts[i];
		struct zs_error e = {0};
		if (strcmp(k->job, j->spec.name) || k->state != ZS_CKPT_COMMITTED) {
			i++;
			continue;
		}
		/* the catalog forgets it first; the servers' records follow */
		/* the records are where the checkpoint was taken */
		if (save_ckpt(c, k, true, &e) ||
		    add_ctask_on(c, k->job, k->placement.n_shards ? &k->placement : &j->placement,
				 ZS_TASK_DELETE, k->id, k->step)) {
			zs_warn("cannot retire checkpoint %llu of job '%s': %s",
				(unsigned long long)k->id, k->job, e.msg);
			return;
		}
		zs_info("job '%s': checkpoint %llu retired (keeping %u)", k->job,
			(unsigned long long)k->id, j->spec.keep_checkpoints);
		zs_checkpoint_release(k);
		memmove(k, k + 1, (c->n_ckpts - i - 1) * sizeof *k);
		c->n_ckpts--;
		committed--;
	}
}

static void reply_ckpt(struct zs_rpc_call *call, const struct zs_checkpoint *k)
{
	struct zs_buf b;
	reply_buf(call, zs_enc_checkpoint(k, &b), &b);
}

static void h_create_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint k = {0}, *g;
	struct zs_job *j;
	uint64_t step;

	if (zs_dec_ckpt_req(p, n, true, job, &step, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, job);
	if (!j) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", job);
		goto out;
	}
	if (j->restore_pending) {
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' is being restored", job);
		goto out;
	}
	/* every rank may ask for the same step: one checkpoint */
	for (size_t i = 0; i < c->n_ckpts; i++)
		if (!strcmp(c->ckpts[i].job, job) && c->ckpts[i].step == step &&
		    c->ckpts[i].state != ZS_CKPT_FAILED) {
			reply_ckpt(call, &c->ckpts[i]);
			goto out;
		}
	g = realloc(c->ckpts, (c->n_ckpts + 1) * sizeof *g);
	if (!g) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	c->ckpts = g;
	k.id = c->next_ckpt_id++;
	snprintf(k.job, sizeof k.job, "%s", job);
	k.step = step;
	k.epoch = j->placement.epoch;
	if (zs_placement_copy(&k.placement, &j->placement)) {
		c->next_ckpt_id--;
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	k.state = ZS_CKPT_PENDING;
	k.created_ms = zs_wall_ms();
	if (save_ckpt(c, &k, false, &e)) {
		c->next_ckpt_id--;
		zs_checkpoint_release(&k);
		reply_err(call, &e);
		goto out;
	}
	c->ckpts[c->n_ckpts++] = k;
	c->task_gen++;
	zs_info("job '%s': checkpoint %llu of step %llu requested", job, (unsigned long long)k.id,
		(unsigned long long)step);
	reply_ckpt(call, &k);
out:
	pthread_mutex_unlock(&c->mu);
}

static void h_get_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint *k;
	uint64_t id;

	if (zs_dec_ckpt_req(p, n, false, job, &id, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	k = find_ckpt(c, job, id);
	if (k)
		reply_ckpt(call, k);
	else
		zs_rpc_fail(call, ZS_ENOTFOUND, "job '%s' has no checkpoint %llu", job,
			    (unsigned long long)id);
	pthread_mutex_unlock(&c->mu);
}

static void h_list_ckpts(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint *v;
	uint32_t m = 0;
	struct zs_buf b;

	if (zs_dec_job_name(p, n, job, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	if (!find_job(c, job)) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", job);
		goto out;
	}
	v = malloc((c->n_ckpts ? c->n_ckpts : 1) * sizeof *v);
	if (!v) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < c->n_ckpts; i++)
		if (!strcmp(c->ckpts[i].job, job))
			v[m++] = c->ckpts[i]; /* shallow: encoded before anything changes */
	reply_buf(call, zs_enc_checkpoints(v, m, &b), &b);
	free(v);
out:
	pthread_mutex_unlock(&c->mu);
}

static void h_put_blob(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_blob b;
	struct zs_checkpoint *k, nk;
	struct zs_job *j;
	uint64_t id;

	if (zs_dec_put_blob(p, n, job, &id, &b, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, job);
	k = find_ckpt(c, job, id);
	if (!j || !k) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "job '%s' has no checkpoint %llu", job,
			    (unsigned long long)id);
		goto out;
	}
	if (b.rank >= j->spec.world_size) {
		zs_rpc_fail(call, ZS_EINVAL, "rank %u is out of range (world size %u)", b.rank,
			    j->spec.world_size);
		goto out;
	}
	/* the new record, with this rank's blob replaced or added */
	nk = *k;
	nk.blobs = calloc(k->n_blobs + 1, sizeof *nk.blobs);
	if (!nk.blobs) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	nk.n_blobs = 0;
	for (uint32_t i = 0; i < k->n_blobs; i++)
		if (k->blobs[i].rank != b.rank)
			nk.blobs[nk.n_blobs++] = k->blobs[i];
	nk.blobs[nk.n_blobs++] = b;
	if (save_ckpt(c, &nk, false, &e)) {
		free(nk.blobs);
		reply_err(call, &e);
		goto out;
	}
	for (uint32_t i = 0; i < k->n_blobs; i++)
		if (k->blobs[i].rank == b.rank)
			free(k->blobs[i].data);
	free(k->blobs);
	*k = nk;
	b.data = NULL;
	reply_ckpt(call, k);
out:
	pthread_mutex_unlock(&c->mu);
	free(b.data);
}

static void h_restore(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint *k = NULL;
	struct zs_job *j;
	uint64_t id;

	if (zs_dec_ckpt_req(p, n, false, job, &id, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, job);
	if (!j) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", job);
		goto out;
	}
	if (id == 0) { /* the latest committed */
		for (size_t i = 0; i < c->n_ckpts; i++)
			if (!strcmp(c->ckpts[i].job, job) && c->ckpts[i].state == ZS_CKPT_COMMITTED)
				k = &c->ckpts[i];
	} else {
		k = find_ckpt(c, job, id);
	}
	if (!k) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "job '%s' has no %s checkpoint%s", job,
			    id ? "such" : "committed", id ? "" : " to restore");
		goto out;
	}
	if (k->state != ZS_CKPT_COMMITTED) {
		zs_rpc_fail(call, ZS_ESTATE, "checkpoint %llu of job '%s' is %s, not committed",
			    (unsigned long long)k->id, job, zs_ckpt_state_name(k->state));
		goto out;
	}
	if (k->epoch != j->placement.epoch && !k->placement.n_shards) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "checkpoint %llu was taken at placement epoch %llu without a record of it; the job is at %llu",
			    (unsigned long long)k->id, (unsigned long long)k->epoch,
			    (unsigned long long)j->placement.epoch);
		goto out;
	}
	if (j->restore_pending) {
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' is already being restored", job);
		goto out;
	}
	j->restore_pending = k->id;
	j->restore_error[0] = '\0';
	if (save_job(c, j, false, false, &e)) {
		j->restore_pending = 0;
		reply_err(call, &e);
		goto out;
	}
	if (add_ctask(c, j, ZS_TASK_RESTORE, k->id, k->step)) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	zs_info("job '%s': restoring checkpoint %llu (step %llu)", job, (unsigned long long)k->id,
		(unsigned long long)k->step);
	reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

static bool holds(const struct zs_job *j, uint64_t server_id)
{
	for (uint32_t i = 0; i < j->placement.n_shards; i++)
		if (j->placement.shards[i].server_id == server_id)
			return true;
	return false;
}

static void h_server_tasks(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_task *v;
	uint32_t m = 0, cap;
	struct zs_buf b;
	uint64_t sid;

	if (zs_dec_server_id(p, n, &sid, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	cap = (uint32_t)c->n_ckpts + 1;
	for (struct ctask *t = c->ctasks; t; t = t->next)
		cap++;
	v = calloc(cap, sizeof *v);
	if (!v) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < c->n_ckpts; i++) {
		struct zs_checkpoint *k = &c->ckpts[i];
		struct zs_job *j = find_job(c, k->job);
		bool done = false;
		if (k->state != ZS_CKPT_PENDING || !j || !holds(j, sid))
			continue;
		for (uint32_t d = 0; d < k->n_durable; d++)
			done |= k->durable[d] == sid;
		if (!done)
			v[m++] = (struct zs_task){ZS_TASK_SNAPSHOT, "", k->id, k->step};
		if (!done)
			snprintf(v[m - 1].job, sizeof v[m - 1].job, "%s", k->job);
	}
	for (struct ctask *t = c->ctasks; t; t = t->next)
		for (uint32_t q = 0; q < t->n_pending; q++)
			if (t->pending[q] == sid)
				v[m++] = t->t;
	reply_buf(call, zs_enc_tasks(v, m, &b), &b);
	pthread_mutex_unlock(&c->mu);
	free(v);
}

static void h_task_done(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_task t;
	char why[256];
	bool ok;
	uint64_t sid, bytes;
	struct zs_checkpoint *k;
	struct zs_job *j;

	if (zs_dec_task_done(p, n, &sid, &t, &ok, why, sizeof why, &bytes, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, t.job);
	k = find_ckpt(c, t.job, t.id);
	if (t.kind == ZS_TASK_SNAPSHOT) {
		struct zs_checkpoint nk;
		uint64_t ids[256];
		uint32_t n_ids;
		if (!j || !k || k->state != ZS_CKPT_PENDING) {
			zs_rpc_fail(call, ZS_ESTATE, "checkpoint %llu of job '%s' is not pending",
				    (unsigned long long)t.id, t.job);
			goto out;
		}
		nk = *k;
		if (!ok) {
			nk.state = ZS_CKPT_FAILED;
			zs_fmt(nk.error, sizeof nk.error, "server %llu: %s", (unsigned long long)sid, why);
		} else {
			uint64_t *d = malloc((k->n_durable + 1) * sizeof *d);
			if (!d) {
				zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
				goto out;
			}
			if (k->n_durable)
				memcpy(d, k->durable, k->n_durable * sizeof *d);
			d[k->n_durable] = sid;
			nk.durable = d;
			nk.n_durable = k->n_durable + 1;
			nk.bytes += bytes;
			n_ids = job_servers(j, ids, 256);
			if (nk.n_durable >= n_ids)
				nk.state = ZS_CKPT_COMMITTED; /* every server durable */
		}
		/* fault injection for the crash tests: die before recording it */
		if (nk.state == ZS_CKPT_COMMITTED && getenv("ZSHARD_FAULT") &&
		    !strcmp(getenv("ZSHARD_FAULT"), "coord-before-commit")) {
			zs_error("fault injection: dying at coord-before-commit");
			raise(SIGKILL);
		}
		if (save_ckpt(c, &nk, false, &e)) {
			if (nk.durable != k->durable)
				free(nk.durable);
			reply_err(call, &e);
			goto out;
		}
		if (nk.durable != k->durable)
			free(k->durable);
		*k = nk;
		c->task_gen++;
		if (k->state != ZS_CKPT_PENDING)
			zs_info("job '%s': checkpoint %llu of step %llu %s%s%s", k->job,
				(unsigned long long)k->id, (unsigned long long)k->step,
				zs_ckpt_state_name(k->state), k->error[0] ? ": " : "", k->error);
		reply_ckpt(call, k);
		if (k->state == ZS_CKPT_COMMITTED)
			enforce_keep(c, j);
		goto out;
	}
	/* restore and delete: strike this server off the task */
	for (struct ctask **pp = &c->ctasks; *pp; pp = &(*pp)->next) {
		struct ctask *ct = *pp;
		if (ct->t.kind != t.kind || ct->t.id != t.id || strcmp(ct->t.job, t.job))
			continue;
		for (uint32_t q = 0; q < ct->n_pending; q++)
			if (ct->pending[q] == sid)
				ct->pending[q--] = ct->pending[--ct->n_pending];
		if (t.kind == ZS_TASK_RESTORE && j && (!ok || ct->n_pending == 0)) {
			if (!ok)
				zs_fmt(j->restore_error, sizeof j->restore_error, "server %llu: %s",
				       (unsigned long long)sid, why);
			else {
				j->restored_id = t.id;
				j->restored_step = t.step;
			}
			j->restore_pending = 0;
			if (save_job(c, j, false, false, &e))
				zs_error("cannot record the restore of job '%s': %s", j->spec.name, e.msg);
			zs_info("job '%s': restore of checkpoint %llu %s%s", j->spec.name,
				(unsigned long long)t.id, ok ? "done" : "failed: ", ok ? "" : why);
			ct->n_pending = 0;
		}
		if (ct->n_pending == 0) {
			*pp = ct->next;
			ctask_free(ct);
			c->task_gen++;
		}
		break;
	}
	if (k)
		reply_ckpt(call, k);
	else {
		struct zs_checkpoint gone = {.id = t.id, .step = t.step};
		snprintf(gone.job, sizeof gone.job, "%s", t.job);
		reply_ckpt(call, &gone);
	}
out:
	pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------ global-norm clipping */

static void norm_free(struct norm_coll *n)
{
	free(n->sumsq);
	free(n->have);
	free(n->waits);
	free(n);
}

/* Fails every server waiting on n (caller holds mu and unlinks n). */
static void norm_fail(struct norm_coll *n, enum zs_status code, const char *why)
{
	for (size_t i = 0; i < n->n_waits; i++)
		zs_rpc_fail(n->waits[i].call, code, "%s", why);
	norm_free(n);
}

/* Lists, once each, the servers owning shards not yet reported. */
static void norm_missing(const struct zs_job *j, const struct norm_coll *n, char *buf,
			 size_t len)
{
	size_t k = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < j->placement.n_shards && k < len; i++) {
		uint64_t id = j->placement.shards[i].server_id;
		bool listed = false;
		if (n->have[i])
			continue;
		for (uint32_t q = 0; q < i && !listed; q++)
			listed = !n->have[q] && j->placement.shards[q].server_id == id;
		if (!listed)
			k += (size_t)snprintf(buf + k, len - k, "%s%llu", k ? ", " : "",
					      (unsigned long long)id);
	}
}

/* ------------------------------------------------------- step reports */

static void h_report_step(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_step_report r;
	struct zs_error e = {0};
	struct sreports *sr;
	struct zs_buf b;
	struct zs_job *j;
	uint32_t rank, stage;
	uint64_t every;
	bool has;

	if (zs_dec_report_step(p, n, job, &rank, &r, &has, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, job);
	if (!j) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", job);
	}
	if (rank >= j->spec.world_size) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_EINVAL, "rank %u is out of range for job '%s' (world size %u)",
				   rank, job, j->spec.world_size);
	}
	stage = j->spec.stage;
	every = j->spec.checkpoint_every;
	for (sr = c->reports; sr && strcmp(sr->job, job); sr = sr->next)
		;
	if (has && !sr) {
		sr = calloc(1, sizeof *sr);
		if (sr && !(sr->r = calloc(j->spec.world_size, sizeof *sr->r))) {
			free(sr);
			sr = NULL;
		}
		if (sr) {
			snprintf(sr->job, sizeof sr->job, "%s", job);
			sr->n = j->spec.world_size;
			sr->next = c->reports;
			c->reports = sr;
		}
	}
	if (has && sr) { /* a report that cannot be kept is dropped: stats only */
		r.rank = rank;
		r.reported_ms = zs_now_ms();
		sr->r[rank] = r;
	}
	pthread_mutex_unlock(&c->mu);
	reply_buf(call, zs_enc_report_step_reply(stage, every, &b), &b);
}

static void h_step_reports(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_step_report *out = NULL;
	uint32_t n_out = 0;
	struct sreports *sr;
	struct zs_buf b;

	pthread_mutex_lock(&c->mu);
	if (!lookup(c, call, p, n, name)) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	for (sr = c->reports; sr && strcmp(sr->job, name); sr = sr->next)
		;
	if (sr && !(out = malloc(sr->n * sizeof *out))) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; sr && i < sr->n; i++)
		if (sr->r[i].reported_ms)
			out[n_out++] = sr->r[i];
	pthread_mutex_unlock(&c->mu);
	reply_buf(call, zs_enc_step_reports(out, n_out, &b), &b);
	free(out);
}

static void h_report_norm(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_norm_report r;
	struct zs_error e = {0};
	struct zs_job *j;
	struct norm_coll *nc, **pp;
	uint32_t *pos = NULL;

	if (zs_dec_norm_report(p, n, &r, &e))
		return reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = find_job(c, r.job);
	if (!j) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", r.job);
		goto out;
	}
	if (j->spec.optim.clip_norm <= 0.0) {
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' does not clip gradients", r.job);
		goto out;
	}
	pos = malloc((r.n ? r.n : 1) * sizeof *pos);
	if (!pos) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	for (pp = &c->norms; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->job, r.job) && (*pp)->step == r.step)
			break;
	nc = *pp;
	/* check everything before changing anything */
	for (uint32_t i = 0; i < r.n; i++) {
		uint32_t k;
		for (k = 0; k < j->placement.n_shards; k++)
			if (j->placement.shards[k].unit == r.norms[i].unit &&
			    j->placement.shards[k].index == r.norms[i].index)
				break;
		if (k == j->placement.n_shards || j->placement.shards[k].server_id != r.server_id) {
			zs_rpc_fail(call, ZS_EINVAL,
				    "unit %u shard %u of job '%s' is not placed on server %llu",
				    r.norms[i].unit, r.norms[i].index, r.job,
				    (unsigned long long)r.server_id);
			goto out;
		}
		if (!(r.norms[i].sumsq >= 0.0) || r.norms[i].sumsq == INFINITY) {
			zs_rpc_fail(call, ZS_EINVAL, "the norm of unit %u shard %u is not finite",
				    r.norms[i].unit, r.norms[i].index);
			goto out;
		}
		if (nc && nc->have[k]) {
			zs_rpc_fail(call, ZS_EEXIST, "unit %u shard %u of step %llu was reported already",
				    r.norms[i].unit, r.norms[i].index, (unsigned long long)r.step);
			goto out;
		}
		pos[i] = k;
	}
	if (!nc) {
		nc = calloc(1, sizeof *nc);
		if (nc) {
			nc->sumsq = calloc(j->placement.n_shards, sizeof *nc->sumsq);
			nc->have = calloc(j->placement.n_shards, sizeof *nc->have);
		}
		if (!nc || !nc->sumsq || !nc->have) {
			if (nc)
				norm_free(nc);
			zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
			goto out;
		}
		snprintf(nc->job, sizeof nc->job, "%s", r.job);
		nc->step = r.step;
		nc->n_shards = j->placement.n_shards;
		nc->started_ms = zs_now_ms();
		nc->next = c->norms;
		c->norms = nc;
		pp = &c->norms;
	}
	{
		struct norm_wait *g = realloc(nc->waits, (nc->n_waits + 1) * sizeof *g);
		if (!g) {
			zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
			goto out;
		}
		nc->waits = g;
		g[nc->n_waits++] = (struct norm_wait){call, r.server_id};
	}
	for (uint32_t i = 0; i < r.n; i++) {
		nc->sumsq[pos[i]] = r.norms[i].sumsq;
		nc->have[pos[i]] = true;
		nc->n_have++;
	}
	if (nc->n_have == nc->n_shards) {
		/* every shard in: the total, summed in placement order */
		double total = 0.0;
		struct zs_buf b;
		for (uint32_t k = 0; k < nc->n_shards; k++)
			total += nc->sumsq[k];
		*pp = nc->next;
		if (zs_enc_norm_reply(total, nc->n_shards, &b)) {
			norm_fail(nc, ZS_ENOMEM, "cannot encode the norm reply");
			goto out;
		}
		for (size_t i = 0; i < nc->n_waits; i++)
			zs_rpc_reply(nc->waits[i].call, b.data, b.len);
		zs_buf_release(&b);
		zs_debug("job '%s' step %llu: gradient norm %g over %u shards", r.job,
			 (unsigned long long)r.step, sqrt(total), nc->n_shards);
		norm_free(nc);
	}
out:
	pthread_mutex_unlock(&c->mu);
	free(pos);
	free(r.norms);
}

/* Fails collections older than the bound (caller holds mu). */
static void norm_sweep(struct coord *c, int64_t now)
{
	for (struct norm_coll **pp = &c->norms; *pp;) {
		struct norm_coll *n = *pp;
		struct zs_job *j = find_job(c, n->job);
		char missing[256] = "", why[ZS_ERRMSG_MAX];
		if (j && now - n->started_ms < (int64_t)c->norm_timeout_ms) {
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		if (j) {
			norm_missing(j, n, missing, sizeof missing);
			zs_fmt(why, sizeof why,
			       "job '%s' step %llu: no gradient norm from server %s within %u ms",
			       n->job, (unsigned long long)n->step, missing, c->norm_timeout_ms);
		} else {
			zs_fmt(why, sizeof why, "job '%s' step %llu: the job was deleted", n->job,
			       (unsigned long long)n->step);
		}
		zs_warn("%s", why);
		norm_fail(n, j ? ZS_ETIMEDOUT : ZS_ECANCELED, why);
	}
}

static const struct zs_rpc_method methods[] = {
	{ZS_M_REGISTER, h_register},     {ZS_M_HEARTBEAT, h_heartbeat},
	{ZS_M_ASSIGNMENTS, h_assignments}, {ZS_M_SERVERS, h_servers},
	{ZS_M_CREATE_JOB, h_create_job}, {ZS_M_GET_JOB, h_get_job},
	{ZS_M_JOBS, h_jobs},             {ZS_M_DELETE_JOB, h_delete_job},
	{ZS_M_SET_STAGE, h_set_stage},   {ZS_M_REBALANCE, h_rebalance},
	{ZS_M_JOIN, h_join},             {ZS_M_LEAVE, h_leave},
	{ZS_M_COORD_STATUS, h_status},   {ZS_M_REPORT_NORM, h_report_norm},
	{ZS_M_REPORT_STEP, h_report_step},  {ZS_M_STEP_REPORTS, h_step_reports},
	{ZS_M_CREATE_CKPT, h_create_ckpt}, {ZS_M_GET_CKPT, h_get_ckpt},
	{ZS_M_LIST_CKPTS, h_list_ckpts}, {ZS_M_PUT_BLOB, h_put_blob},
	{ZS_M_RESTORE, h_restore},       {ZS_M_SERVER_TASKS, h_server_tasks},
	{ZS_M_TASK_DONE, h_task_done},
};

/* ------------------------------------------------------ lease, load, life */

static void *reaper(void *arg)
{
	struct coord *c = arg;
	int64_t tick = c->lease_ms / 4 < 500 ? c->lease_ms / 4 : 500;

	while (!atomic_load(&c->stop)) {
		int64_t now = zs_now_ms();
		pthread_mutex_lock(&c->mu);
		norm_sweep(c, now);
		for (size_t i = 0; i < c->n_srvs; i++) {
			struct srv *s = &c->srvs[i];
			if (s->up && now - s->last_hb_ms > (int64_t)c->lease_ms) {
				s->up = false;
				zs_warn("server %llu (%s) missed its lease (%lld ms without a heartbeat): marked down",
					(unsigned long long)s->info.id, s->info.addr,
					(long long)(now - s->last_hb_ms));
			}
		}
		pthread_mutex_unlock(&c->mu);
		zs_sleep_ms(tick > 10 ? tick : 10, (volatile const int *)&c->stop);
	}
	return NULL;
}

static enum zs_status load_server(void *ctx, const void *k, size_t kl,
				  const void *v, size_t vl)
{
	struct coord *c = ctx;
	struct srv *g = realloc(c->srvs, (c->n_srvs + 1) * sizeof *g);

	(void)k;
	(void)kl;
	if (!g)
		return ZS_ENOMEM;
	c->srvs = g;
	memset(&g[c->n_srvs], 0, sizeof *g);
	if (zs_dec_server_info(v, vl, &g[c->n_srvs].info, NULL))
		return ZS_EIO;
	c->n_srvs++;
	return ZS_OK;
}

static enum zs_status load_job(void *ctx, const void *k, size_t kl, const void *v,
			       size_t vl)
{
	struct coord *c = ctx;
	struct zs_job *g = realloc(c->jobs, (c->n_jobs + 1) * sizeof *g);

	(void)k;
	(void)kl;
	if (!g)
		return ZS_ENOMEM;
	c->jobs = g;
	if (zs_dec_job(v, vl, &g[c->n_jobs], NULL))
		return ZS_EIO;
	/* derived fields (offsets, numel) are not stored */
	if (zs_layout_validate(&g[c->n_jobs].spec.layout, NULL)) {
		zs_job_release(&g[c->n_jobs]);
		return ZS_EIO;
	}
	c->n_jobs++;
	return ZS_OK;
}

static enum zs_status load_ckpt(void *ctx, const void *k, size_t kl, const void *v,
				size_t vl)
{
	struct coord *c = ctx;
	struct zs_checkpoint *g = realloc(c->ckpts, (c->n_ckpts + 1) * sizeof *g);

	(void)k;
	(void)kl;
	if (!g)
		return ZS_ENOMEM;
	c->ckpts = g;
	if (zs_dec_checkpoint(v, vl, &g[c->n_ckpts], NULL))
		return ZS_EIO;
	c->n_ckpts++;
	return ZS_OK;
}

static int cmp_ckpt(const void *a, const void *b)
{
	const struct zs_checkpoint *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

static enum zs_status load(struct coord *c, struct zs_error *err)
{
	struct zs_kv_txn *t;
	const void *v;
	size_t vl;
	enum zs_status st = zs_kv_begin(c->kv, false, &t, err);

	if (st)
		return st;
	c->next_server_id = 1;
	if (!zs_kv_get(t, T_META, "next_server_id", 14, &v, &vl, NULL) && vl == 8)
		c->next_server_id = zs_kv_u64_dec(v);
	if (!zs_kv_get(t, T_META, "assign_gen", 10, &v, &vl, NULL) && vl == 8)
		c->assign_gen = zs_kv_u64_dec(v);
	st = zs_kv_foreach(t, T_SERVERS, load_server, c, err);
	if (!st)
		st = zs_kv_foreach(t, T_JOBS, load_job, c, err);
	c->next_ckpt_id = 1;
	if (!zs_kv_get(t, T_META, "next_ckpt_id", 12, &v, &vl, NULL) && vl == 8)
		c->next_ckpt_id = zs_kv_u64_dec(v);
	if (!st)
		st = zs_kv_foreach(t, T_CKPTS, load_ckpt, c, err);
	zs_kv_abort(t);
	if (st)
		return st;
	if (c->n_ckpts)
		qsort(c->ckpts, c->n_ckpts, sizeof *c->ckpts, cmp_ckpt);
	/* a restore that was in flight when we stopped: ask the servers again */
	for (size_t i = 0; i < c->n_jobs; i++) {
		struct zs_checkpoint *k = find_ckpt(c, c->jobs[i].spec.name,
						    c->jobs[i].restore_pending);
		if (c->jobs[i].restore_pending && k &&
		    add_ctask(c, &c->jobs[i], ZS_TASK_RESTORE, k->id, k->step))
			return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	return ZS_OK;
}

static void free_state(struct coord *c)
{
	for (size_t i = 0; i < c->n_jobs; i++)
		zs_job_release(&c->jobs[i]);
	free(c->jobs);
	free(c->srvs);
	for (size_t i = 0; i < c->n_ckpts; i++)
		zs_checkpoint_release(&c->ckpts[i]);
	free(c->ckpts);
	while (c->ctasks) {
		struct ctask *t = c->ctasks;
		c->ctasks = t->next;
		ctask_free(t);
	}
}

enum zs_status coord_start(const struct coord_config *cfg, struct coord **out,
			   char *bound, size_t bound_len, struct zs_error *err)
{
	struct coord *c;
	enum zs_status st;

	if (cfg->lease_ms < 100 || cfg->lease_ms > 3600 * 1000)
		return zs_fail(err, ZS_EINVAL, "lease %u ms is out of range [100, 3600000]",
			       cfg->lease_ms);
	c = calloc(1, sizeof *c);
	if (!c)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	c->lease_ms = cfg->lease_ms;
	c->norm_timeout_ms = cfg->norm_timeout_ms ? cfg->norm_timeout_ms : 60000;
	c->started_ms = zs_now_ms();
	c->lock_fd = -1;
	snprintf(c->data_dir, sizeof c->data_dir, "%s", cfg->data_dir);

	st = zs_mkdir_p(cfg->data_dir, err);
	if (st)
		goto clean_c;
	st = zs_lock_dir(cfg->data_dir, "coordinator.lock", &c->lock_fd, err);
	if (st)
		goto clean_c;
	st = zs_kv_open(cfg->data_dir, 0, tables, 4, 0, &c->kv, err);
	if (st)
		goto clean_lock;
	st = load(c, err);
	if (st)
		goto clean_kv;
	if (c->n_srvs || c->n_jobs)
		zs_info("catalog: %zu servers (down until they heartbeat), %zu jobs",
			c->n_srvs, c->n_jobs);
	st = zs_rpc_server_start(cfg->listen, methods,
				 sizeof methods / sizeof methods[0], c, &c->rpc,
				 c->addr, sizeof c->addr, err);
	if (st)
		goto clean_state;
	if (pthread_create(&c->reaper, NULL, reaper, c)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot start the lease thread");
		goto clean_rpc;
	}
	if (bound)
		snprintf(bound, bound_len, "%s", c->addr);
	*out = c;
	return ZS_OK;

clean_rpc:
	zs_rpc_server_free(c->rpc);
clean_state:
	free_state(c);
clean_kv:
	zs_kv_close(c->kv);
clean_lock:
	close(c->lock_fd);
clean_c:
	pthread_mutex_destroy(&c->mu);
	free(c);
	return st;
}

void coord_free(struct coord *c)
{
	if (!c)
		return;
	atomic_store(&c->stop, 1);
	pthread_join(c->reaper, NULL);
	/* deferred calls are answered before the RPC server goes */
	pthread_mutex_lock(&c->mu);
	while (c->norms) {
		struct norm_coll *n = c->norms;
		c->norms = n->next;
		norm_fail(n, ZS_EUNAVAIL, "the coordinator is stopping");
	}
	while (c->reports)
		drop_reports(c, c->reports->job);
	pthread_mutex_unlock(&c->mu);
	zs_rpc_server_free(c->rpc);
	zs_kv_close(c->kv);
	close(c->lock_fd);
	free_state(c);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
