/*
 * zshard.c - libzshard (see include/zshard.h): join through the
 * coordinator, one data-plane connection per server that holds a shard,
 * checkpoints (the ops that fan a unit's gather or push out over its
 * shards: xfer.c, waited for in op.c).
 */
#include "client/trainer.h"

#include <sys/random.h>

#include "base/config.h"
#include "base/env.h"
#include "base/log.h"
#include "ctrl/ckpt_arm.h"
#include "ctrl/tls.h"

int tr_fail(zs_trainer *t, enum zs_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->err, sizeof t->err, fmt, ap);
	va_end(ap);
	return st;
}

double tr_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A buffer for the step driver: where registering pays (rdma), registered
 * once here (a failed registration leaves it unregistered: the transport
 * then registers it per transfer). */
void *tr_buf_alloc(zs_trainer *t, size_t n)
{
	void *p = t->dv ? tr_dv_host_alloc(t, n ? n : 1) : malloc(n ? n : 1);
	struct zs_mr *mr;
	void *g;

	if (!p || !t->drv.reg_conn || zs_mem_register(t->drv.reg_conn, p, n ? n : 1, &mr, NULL))
		return p;
	g = realloc(t->drv.regs, (t->drv.n_regs + 1) * sizeof *t->drv.regs);
	if (!g) {
		t->drv.reg_ops->dereg(mr);
		return p;
	}
	t->drv.regs = g;
	t->drv.regs[t->drv.n_regs].p = p;
	t->drv.regs[t->drv.n_regs++].mr = mr;
	return p;
}

void tr_buf_free(zs_trainer *t, void *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < t->drv.n_regs; i++)
		if (t->drv.regs[i].p == p) {
			/* through the ops table: the connection may be closed by now */
			t->drv.reg_ops->dereg(t->drv.regs[i].mr);
			t->drv.regs[i] = t->drv.regs[--t->drv.n_regs];
			break;
		}
	if (t->dv)
		tr_dv_host_free(t, p);
	else
		free(p);
}

struct zs_conn *tr_conn(zs_trainer *t, uint64_t server_id, bool gather)
{
	for (uint32_t i = 0; i < t->n_srv; i++)
		if (t->srv_id[i] == server_id)
			return gather && t->gconn[i] ? t->gconn[i] : t->conn[i];
	return NULL;
}

static struct zs_conn *conn_of(zs_trainer *t, uint64_t server_id)
{
	return tr_conn(t, server_id, false);
}

void tr_disconnect(zs_trainer *t)
{
	tr_live_forget(t); /* their requests go with the connections */
	t->fo.lost_tried = 0;
	for (uint32_t i = 0; i < t->n_srv; i++) {
		zs_conn_close(t->conn[i]);
		zs_conn_close(t->gconn[i]);
	}
	for (uint32_t i = 0; i < t->fo.n_dead; i++)
		zs_conn_close(t->fo.dead[i]);
	free(t->fo.dead);
	t->fo.dead = NULL;
	t->fo.n_dead = 0;
	t->n_srv = 0;
	t->drv.reg_conn = NULL;
	free(t->srv_id);
	free(t->conn);
	free(t->gconn);
	t->srv_id = NULL;
	t->conn = NULL;
	t->gconn = NULL;
}

/* Connects to every server holding a shard of the job. */
static enum zs_status connect_all(zs_trainer *t, const char *transport, int timeout_ms,
				  struct zs_error *err)
{
	struct zs_server_info *s = NULL;
	char host[ZS_ADDR_MAX] = "";
	struct zs_transport_probe probe = {0};
	uint32_t n_s;
	enum zs_status st = zs_coord_servers(t->coord, &s, &n_s, err);

	if (st)
		return st;
	gethostname(host, sizeof host - 1);
	{ /* room for every server listed, beside those connected already */
		size_t room = t->n_srv + n_s + 1;
		uint64_t *ids = realloc(t->srv_id, room * sizeof *ids);
		struct zs_conn **cs = ids ? realloc(t->conn, room * sizeof *cs) : NULL;
		struct zs_conn **gs = cs ? realloc(t->gconn, room * sizeof *gs) : NULL;
		if (ids)
			t->srv_id = ids;
		if (cs)
			t->conn = cs;
		if (gs)
			t->gconn = gs;
		if (!ids || !cs || !gs) {
			free(s);
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		}
	}
	for (uint32_t i = 0; i < n_s && !st; i++) {
		bool used = false;
		const struct zs_transport_ops *ops;
		struct zs_conn_opts o = {.job = t->job.spec.name, .token = t->job.token, .rank = t->rank,
					 .incarnation = t->job.incarnation,
					 .epoch = t->job.placement.epoch,
					 .timeout_ms = timeout_ms};
		struct zs_transport_offer offer = {.bits = s[i].transports,
						   .same_host = !strcmp(s[i].host, host),
						   .addr = s[i].data_addr,
						   .local_addr = s[i].shm_addr};
		for (uint32_t k = 0; k < t->job.placement.n_shards; k++)
			used |= t->job.placement.shards[k].server_id == s[i].id;
		if (!used || conn_of(t, s[i].id))
			continue;
		/* under auto, a transport that does not reach the server (shm to
		 * a server in another network namespace) gives way to the next */
		for (uint32_t skip = 0;; skip |= ops->bit) {
			struct zs_error why = {0};
			st = zs_transport_choose(transport, &offer, &probe, skip, &ops, &o.addr,
						 skip ? &why : err);
			if (st) {
				if (skip) /* nothing left: the last connect's error */
					st = err->code;
				else
					zs_error_prefix(err, "server %llu (%s)",
							(unsigned long long)s[i].id, s[i].addr);
				break;
			}
			t->gconn[t->n_srv] = NULL;
			st = zs_connect(ops, &o, &t->conn[t->n_srv], err);
			if (!st && (ops->caps & ZS_CAP_LANES) &&
			    (st = zs_connect(ops, &o, &t->gconn[t->n_srv], err)))
				zs_conn_close(t->conn[t->n_srv]); /* both lanes or none */
			if (st != ZS_EUNAVAIL || !zs_transport_is_auto(transport))
				break;
			zs_debug("server %llu: %s does not reach it (%s), trying the next transport",
			       (unsigned long long)s[i].id, ops->name, err->msg);
		}
		if ((st == ZS_EUNAVAIL || st == ZS_ETIMEDOUT) && !s[i].up) {
			/* a server the coordinator has not heard from since its
			 * own restart (or since the lease lapsed) is listed at
			 * the address it had: wait for it to register again */
			zs_error_prefix(err, "server %llu, not registered since the coordinator's start or its lease's lapse",
					(unsigned long long)s[i].id);
			st = ZS_EAGAIN;
		}
		/* a server connected to now (a failover's new primary, which
		 * trainers did not push to) has none of the tables the others
		 * got: the steps in flight are applied with them, not with the
		 * last table its primary forwarded (a promoted copy applied a
		 * step at the step before's learning rate: wrong bits) */
		if (!st && (t->hps.n_hist || t->hps.sending) &&
		    (st = tr_hp_to_new(t, t->conn[t->n_srv], err))) {
			zs_conn_close(t->conn[t->n_srv]);
			if (t->gconn[t->n_srv])
				zs_conn_close(t->gconn[t->n_srv]);
		}
		if (!st) {
			if ((ops->caps & ZS_CAP_REGISTER) && !t->drv.reg_conn) {
				t->drv.reg_conn = t->conn[t->n_srv];
				t->drv.reg_ops = ops;
			}
			t->srv_id[t->n_srv++] = s[i].id;
		}
	}
	for (uint32_t k = 0; !st && k < t->job.placement.n_shards; k++)
		if (!conn_of(t, t->job.placement.shards[k].server_id))
			st = zs_fail(err, ZS_EUNAVAIL, "server %llu, which holds shards, is not listed",
				     (unsigned long long)t->job.placement.shards[k].server_id);
	free(s);
	return st;
}

enum zs_status tr_connect_new(zs_trainer *t, struct zs_error *err)
{
	return connect_all(t, t->transport, t->timeout_ms, err);
}

/*
 * A server said ZS_EAGAIN: it may be behind t's placement (it takes the
 * new epoch at its next heartbeat: waited for) or ahead of it (the job
 * was re-placed since t read it: a failover or a rebuild between the
 * job's creation and this join). The coordinator's placement of the same
 * timeline, when newer, is taken; one of another timeline is left to
 * catch_up (resume.c).
 */
static void newer_placement(zs_trainer *t)
{
	struct zs_error e = {0};
	struct zs_job j;

	if (!t->coord || zs_coord_get_job(t->coord, t->job.spec.name, &j, &e))
		return;
	if (j.incarnation == t->job.incarnation && j.timeline == t->timeline &&
	    j.placement.epoch > t->job.placement.epoch && !tr_take_placement(t, &j.placement))
		zs_info("rank %u of job '%s': its placement moved to epoch %llu while it connected",
			t->rank, t->job.spec.name, (unsigned long long)t->job.placement.epoch);
	zs_job_release(&j);
}

enum zs_status tr_reconnect(zs_trainer *t, struct zs_error *err)
{
	int64_t deadline = zs_now_ms() + t->timeout_ms;
	enum zs_status st;

	tr_disconnect(t);
	while ((st = connect_all(t, t->transport, t->timeout_ms, err)) == ZS_EAGAIN &&
	       zs_now_ms() < deadline) {
		tr_disconnect(t);
		newer_placement(t);
		zs_sleep_ms(50, NULL);
	}
	if (st == ZS_EAGAIN)
		st = zs_fail(err, ZS_ETIMEDOUT, "%s (waited %d ms for it)", err->msg, t->timeout_ms);
	if (st)
		tr_disconnect(t);
	return st;
}

/*
 * Joins t's rank. A rank still held by a process that died is refused
 * until that process's lease lapses (and the job rolls back): that is
 * waited for, within t->timeout_ms.
 */
static enum zs_status join_rank(zs_trainer *t, const struct zs_join_req *req,
				struct zs_error *err)
{
	int64_t deadline = zs_now_ms() + t->timeout_ms;
	enum zs_status st;

	while ((st = zs_coord_join(t->coord, req, &t->job, err)) == ZS_EEXIST &&
	       zs_now_ms() < deadline)
		zs_sleep_ms(200, NULL);
	if (!st && (st = tr_take_placement(t, &t->job.placement)))
		zs_fail(err, st, "out of memory");
	return st;
}

enum zs_status tr_take_placement(zs_trainer *t, const struct zs_placement *p)
{
	struct zs_placement q;

	if (zs_placement_primaries(&q, p))
		return ZS_ENOMEM;
	zs_placement_release(&t->job.placement);
	t->job.placement = q;
	return ZS_OK;
}

/*
 * What a caller leaves out, from the launch configuration ($ZSHARD_CONFIG,
 * loaded into cfg): TLS (unless ZSHARD_TLS_* says), and the coordinator:
 * the configuration's, else $ZSHARD_COORDINATOR, else the local cluster's
 * (zshard-local start; buf holds it). A join and a job creation find the
 * same one. ZS_EINVAL naming where it looked when there is none.
 */
static enum zs_status launch_defaults(const char **coordinator, struct zs_config *cfg, char *buf,
				      size_t len, struct zs_error *err)
{
	const char *cpath = zs_env("ZSHARD_CONFIG");
	char ldir[512] = "";
	enum zs_status st;

	if (cpath && cpath[0] && (st = zs_config_load(cpath, cfg, err)))
		return st;
	if (!*coordinator)
		*coordinator = zs_config_coordinator(cfg, buf, len);
	if (!*coordinator)
		*coordinator = zs_env("ZSHARD_COORDINATOR");
	if (!*coordinator)
		*coordinator = zs_local_coordinator(buf, len, ldir, sizeof ldir);
	if (zs_config_get(cfg, "tls_ca") && !zs_env("ZSHARD_TLS_CA") &&
	    (st = zs_tls_configure(zs_config_get(cfg, "tls_ca"), zs_config_get(cfg, "tls_cert"),
				   zs_config_get(cfg, "tls_key"), err)))
		return st;
	if (!*coordinator)
		return zs_fail(err, ZS_EINVAL, "no coordinator: give one, set ZSHARD_COORDINATOR or a "
			       "coordinator in $ZSHARD_CONFIG, or start a local cluster (zshard-local "
			       "start; none runs in %s)", ldir);
	return ZS_OK;
}

int zs_trainer_join(const char *coordinator, const char *job, unsigned rank,
		    const char *transport, int timeout_ms, zs_trainer **out, char *errbuf,
		    size_t errlen)
{
	struct zs_error err = {0};
	struct zs_join_req req = {.rank = rank};
	struct zs_config cfg = {0};
	char first[ZS_ADDR_MAX];
	zs_trainer *t;
	enum zs_status st;

	*out = NULL;
	/* a launch configuration ($ZSHARD_CONFIG) fills in what the caller
	 * leaves out: the coordinator, TLS, the transport, the step driver's
	 * policy */
	if ((st = launch_defaults(&coordinator, &cfg, first, sizeof first, &err)))
		goto out;
	if (!transport)
		transport = zs_config_get(&cfg, "transport");
	if (!transport)
		transport = "auto";
	if ((st = zs_transport_check_name(transport, &err)))
		goto out;
	if (!job || strlen(job) >= ZS_JOB_NAME_MAX) {
		st = zs_fail(&err, ZS_EINVAL, "bad job name");
		goto out;
	}
	t = calloc(1, sizeof *t);
	if (!t) {
		st = zs_fail(&err, ZS_ENOMEM, "out of memory");
		goto out;
	}
	t->rank = rank;
	pthread_mutex_init(&t->ls.down_mu, NULL);
	pthread_cond_init(&t->ls.bcv, NULL);
	st = zs_coord_open(coordinator, timeout_ms, 0, &t->coord, &err);
	if (st)
		goto fail;
	/* no layout to check: the trainer takes the job's from the join's
	 * reply (its bindings check their model against it) */
	snprintf(req.job, sizeof req.job, "%s", job);
	gethostname(req.host, sizeof req.host - 1);
	/* this process's session: its lease, and its join sent again after a
	 * lost reply, are told from another process's for the same rank */
	while (!t->ls.session &&
	       getrandom(&t->ls.session, sizeof t->ls.session, 0) != sizeof t->ls.session)
		;
	req.session = t->ls.session;
	snprintf(t->ls.coord_addr, sizeof t->ls.coord_addr, "%s", coordinator);
	snprintf(t->transport, sizeof t->transport, "%s", transport);
	t->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
	st = join_rank(t, &req, &err);
	if (st)
		goto fail;
	t->joined = true;
	t->timeline = t->job.timeline;
	if ((st = tr_lease_start(t, &err)))
		goto fail;
	/* from here on the coordinator is known to exist: a call during its
	 * restart waits for it (within timeout_ms) instead of failing at once */
	zs_coord_set_wait_for_ready(t->coord, 1);
	t->drv.pol = (struct zs_policy){.prefetch = 1, .reshard_after_forward = 1};
	{ /* the configuration's policy, validated when it was read */
		uint64_t v;
		if (zs_config_get(&cfg, "prefetch") &&
		    !zs_parse_u64(zs_config_get(&cfg, "prefetch"), 0, 64, &v, NULL))
			t->drv.pol.prefetch = (unsigned)v;
		if (zs_config_get(&cfg, "push_depth") &&
		    !zs_parse_u64(zs_config_get(&cfg, "push_depth"), 0, 64, &v, NULL))
			t->drv.pol.push_depth = (unsigned)v;
		if (zs_config_get(&cfg, "max_live_bytes") &&
		    !zs_parse_size(zs_config_get(&cfg, "max_live_bytes"), &v, NULL))
			t->drv.pol.max_live_bytes = v;
	}
	t->drv.du = calloc(t->job.spec.layout.n_units ? t->job.spec.layout.n_units : 1,
		       sizeof *t->drv.du);
	if (!t->drv.du) {
		st = zs_fail(&err, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++)
		t->drv.du[u].bytes = t->job.spec.layout.units[u].numel *
				 zs_dtype_size(t->job.spec.layout.units[u].dtype);
	/* a server that has not loaded the job's placement yet (it comes
	 * with the server's next heartbeat) says ZS_EAGAIN: wait for it,
	 * within the join's bound */
	if ((st = tr_reconnect(t, &err)))
		goto fail;
	zs_config_release(&cfg);
	*out = t;
	return ZS_OK;
fail:
	zs_trainer_close(t);
out:
	zs_config_release(&cfg);
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", err.msg);
	return st;
}

int zs_create_job(const char *coordinator, const char *spec_json, int timeout_ms, char *errbuf,
		  size_t errlen)
{
	struct zs_error err = {0};
	struct zs_coord_client *c = NULL;
	struct zs_job j;
	struct zs_config cfg = {0};
	enum zs_status st;
	char first[ZS_ADDR_MAX];

	if (!spec_json)
		st = zs_fail(&err, ZS_EINVAL, "no spec");
	/* the coordinator a join of the job would find (launch_defaults) */
	else if (!(st = launch_defaults(&coordinator, &cfg, first, sizeof first, &err)) &&
		 !(st = zs_coord_open(coordinator, timeout_ms, 0, &c, &err)) &&
		 !(st = zs_coord_create_job_json(c, spec_json, &j, &err)))
		zs_job_release(&j);
	zs_coord_close(c);
	zs_config_release(&cfg);
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", st ? err.msg : "");
	return st;
}

void zs_trainer_close(zs_trainer *t)
{
	struct zs_error err = {0};
	struct zs_job j;
	bool abandoned = false;
	uint64_t next = 0;

	if (!t)
		return;
	/* where this trainer leaves the job: in the middle of a step (the job
	 * rolls back), or before the step its units were all pushed up to */
	for (uint32_t u = 0; t->drv.du && u < t->job.spec.layout.n_units; u++) {
		if (t->drv.du[u].last_push != t->drv.du[0].last_push)
			abandoned = true;
		next = t->drv.du[u].last_push;
	}
	abandoned |= t->drv.in_step;
	tr_lease_stop(t);
	if (t->coord) /* best effort from here: a coordinator away is not waited for */
		zs_coord_set_wait_for_ready(t->coord, 0);
	if (t->joined && t->rep.have_last && !t->rep.last_sent) { /* stats only: errors do not matter */
		uint32_t stage;
		uint64_t every, stop;
		zs_coord_report_step(t->coord, t->job.spec.name, t->rank, &t->rep.last, &stage,
				     &every, &stop, &err);
	}
	tr_disconnect(t); /* first: in-flight requests fail and are freed */
	tr_dv_close(t);   /* device mode's buffers, then its pinned staging */
	for (uint32_t u = 0; t->drv.du && u < t->job.spec.layout.n_units; u++) {
		free(t->drv.du[u].gather); /* ops only; their requests died with the conns */
		free(t->drv.du[u].push);
		tr_buf_free(t, t->drv.du[u].params);
		tr_buf_free(t, t->drv.du[u].grad);
	}
	free(t->drv.du);
	while (t->drv.strays) {
		zs_op *op = t->drv.strays;
		t->drv.strays = op->stray_next;
		tr_buf_free(t, op->own);
		free(op);
	}
	tr_cache_flush(t);
	if (t->joined && !atomic_load(&t->ls.evicted) &&
	    !zs_coord_leave_at(t->coord, t->job.spec.name, t->rank, t->ls.session, abandoned,
			       abandoned ? 0 : next, t->timeline, &j, &err))
		zs_job_release(&j);
	zs_coord_close(t->coord);
	zs_job_release(&t->job);
	free(t->drv.regs);
	free(t->drv.micro);
	pthread_mutex_destroy(&t->ls.down_mu);
	pthread_cond_destroy(&t->ls.bcv);
	free(t);
}

const char *zs_trainer_error(const zs_trainer *t) { return t->err; }
unsigned zs_trainer_rank(const zs_trainer *t) { return t->rank; }
unsigned zs_trainer_world_size(const zs_trainer *t) { return t->job.spec.world_size; }
unsigned zs_trainer_stage(const zs_trainer *t) { return t->job.spec.stage; }
unsigned zs_trainer_units(const zs_trainer *t) { return t->job.spec.layout.n_units; }

int zs_trainer_refresh(zs_trainer *t)
{
	struct zs_error err = {0};
	struct zs_job j;
	enum zs_status st = zs_coord_get_job(t->coord, t->job.spec.name, &j, &err);

	if (st)
		return tr_fail(t, st, "%s", err.msg);
	t->job.spec.stage = j.spec.stage;
	t->job.spec.checkpoint_every = j.spec.checkpoint_every;
	zs_job_release(&j);
	return ZS_OK;
}

const char *zs_unit_name(const zs_trainer *t, unsigned u)
{
	return u < t->job.spec.layout.n_units ? t->job.spec.layout.units[u].name : NULL;
}

unsigned long long zs_unit_numel(const zs_trainer *t, unsigned u)
{
	return u < t->job.spec.layout.n_units ? t->job.spec.layout.units[u].numel : 0;
}

unsigned zs_unit_tensors(const zs_trainer *t, unsigned u)
{
	return u < t->job.spec.layout.n_units ? t->job.spec.layout.units[u].n_tensors : 0;
}

int zs_unit_tensor(const zs_trainer *t, unsigned u, unsigned i, const char **name,
		   unsigned long long *offset, unsigned *ndim, unsigned long long *shape,
		   unsigned cap)
{
	const struct zs_tensor *x;

	if (u >= t->job.spec.layout.n_units || i >= t->job.spec.layout.units[u].n_tensors)
		return ZS_EINVAL;
	x = &t->job.spec.layout.units[u].tensors[i];
	if (name)
		*name = x->name;
	if (offset)
		*offset = x->offset;
	if (ndim)
		*ndim = x->ndim;
	for (unsigned d = 0; shape && d < x->ndim && d < cap; d++)
		shape[d] = x->shape[d];
	return ZS_OK;
}

int zs_unit_tensor_frozen(const zs_trainer *t, unsigned u, unsigned i)
{
	if (u >= t->job.spec.layout.n_units || i >= t->job.spec.layout.units[u].n_tensors)
		return -1;
	return t->job.spec.layout.units[u].tensors[i].frozen;
}

int zs_unit_dtype(const zs_trainer *t, unsigned u)
{
	return u < t->job.spec.layout.n_units ? (int)t->job.spec.layout.units[u].dtype : 0;
}

void zs_trainer_counters(const zs_trainer *t, struct zs_trainer_counters *c)
{
	*c = t->ctr;
}

/* ------------------------------------------------------------ checkpoints */

int zs_checkpoint(zs_trainer *t, unsigned long long step, const void *blob, unsigned len,
		  unsigned long long *id)
{
	struct zs_error err = {0};
	struct zs_checkpoint k;
	enum zs_status st = zs_coord_create_ckpt(t->coord, t->job.spec.name, step, &k, &err);

	if (st)
		return tr_fail(t, st, "%s", err.msg);
	if (id)
		*id = k.id;
	if (k.state == ZS_CKPT_PENDING) {
		/* this rank has not pushed step `step` yet, so no shard can pass
		 * it: tell every server now, before they could (a replicated
		 * job's lost server is waited for 2 s at most) */
		st = zs_ckpt_arm(t->coord, &t->job, k.id, step,
				 t->job.spec.replicas > 1 ? 2000 : 10000, &err);
		if (st) {
			zs_checkpoint_release(&k);
			return tr_fail(t, st, "checkpoint %llu: %s", (unsigned long long)k.id, err.msg);
		}
	}
	if (blob || len) {
		if (len > ZS_BLOB_MAX) {
			zs_checkpoint_release(&k);
			return tr_fail(t, ZS_EINVAL, "a blob of %u bytes is over %u", len, ZS_BLOB_MAX);
		}
		st = zs_coord_put_blob(t->coord, t->job.spec.name, k.id, t->rank, blob, len, &err);
	}
	zs_checkpoint_release(&k);
	return st ? tr_fail(t, st, "%s", err.msg) : ZS_OK;
}

int zs_checkpoint_wait(zs_trainer *t, unsigned long long id, int timeout_ms)
{
	double t0 = tr_now_s();

	for (;;) {
		struct zs_error err = {0};
		struct zs_checkpoint k;
		enum zs_status st = zs_coord_get_ckpt(t->coord, t->job.spec.name, id, &k, &err);
		enum zs_ckpt_state state;
		if (st)
			return tr_fail(t, st, "%s", err.msg);
		state = k.state;
		if (state == ZS_CKPT_FAILED)
			tr_fail(t, ZS_EIO, "checkpoint %llu failed: %s", id, k.error);
		zs_checkpoint_release(&k);
		if (state == ZS_CKPT_COMMITTED)
			return ZS_OK;
		if (state == ZS_CKPT_FAILED) {
			/* abandoned by a rollback: the job's timeline says so */
			struct zs_job j;
			bool moved = false;
			if (!zs_coord_get_job(t->coord, t->job.spec.name, &j, &err)) {
				moved = j.timeline != t->timeline;
				zs_job_release(&j);
			}
			if (moved)
				return tr_fail(t, ZS_ERESUME,
					       "checkpoint %llu: job '%s' rolled back before it was durable: resume (zs_trainer_resume)",
					       id, t->job.spec.name);
			return ZS_EIO;
		}
		if (timeout_ms >= 0 && (tr_now_s() - t0) * 1000.0 >= timeout_ms)
			return tr_fail(t, ZS_EAGAIN, "checkpoint %llu is not committed after %d ms", id,
				    timeout_ms);
		{
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
}
