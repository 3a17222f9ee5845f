/*
 * zshard.c - libzshard (see include/zshard.h): a trainer's handle, joined
 * through the coordinator (its connections: conns.c) and closed, and what
 * it tells about its job's units (the ops that fan a unit's gather or push
 * out over its shards: xfer.c, waited for in op.c; checkpoints:
 * checkpoint.c).
 */
#include "client/trainer.h"

#include <sys/random.h>

#include "base/config.h"
#include "base/env.h"
#include "base/log.h"
#include "ctrl/tls.h"












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
	if (!st) { /* the world it joins: the latest one named */
		t->worlds = t->job.worlds;
		t->wstep = t->worlds.n ? t->worlds.v[t->worlds.n - 1].step : 0;
	}
	return st;
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
	t->on_conn = tr_hp_to_new; /* a server connected to later gets the tables */
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

/* A client of the coordinator a join would find (launch_defaults), for
 * the calls outside a trainer (zs_create_job, zs_resize_job, a reader). */
enum zs_status tr_launch_coord(const char *coordinator, int timeout_ms,
			       struct zs_coord_client **c, struct zs_error *err)
{
	struct zs_config cfg = {0};
	char first[ZS_ADDR_MAX];
	enum zs_status st = launch_defaults(&coordinator, &cfg, first, sizeof first, err);

	if (!st)
		st = zs_coord_open(coordinator, timeout_ms, 0, c, err);
	zs_config_release(&cfg);
	return st;
}

/* st's message into errbuf ("" on success), and st. */
static int said(enum zs_status st, const struct zs_error *err, char *errbuf, size_t errlen)
{
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", st ? err->msg : "");
	return st;
}

int zs_create_job(const char *coordinator, const char *spec_json, int timeout_ms, char *errbuf,
		  size_t errlen)
{
	struct zs_error err = {0};
	struct zs_coord_client *c = NULL;
	struct zs_job j;
	enum zs_status st;

	if (!spec_json)
		st = zs_fail(&err, ZS_EINVAL, "no spec");
	else if (!(st = tr_launch_coord(coordinator, timeout_ms, &c, &err)) &&
		 !(st = zs_coord_create_job_json(c, spec_json, &j, &err)))
		zs_job_release(&j);
	zs_coord_close(c);
	return said(st, &err, errbuf, errlen);
}

int zs_resize_job(const char *coordinator, const char *job, unsigned world, int timeout_ms,
		  unsigned long long *from_step, char *errbuf, size_t errlen)
{
	struct zs_error err = {0};
	struct zs_coord_client *c = NULL;
	struct zs_job j;
	enum zs_status st;

	if (!job)
		st = zs_fail(&err, ZS_EINVAL, "no job named");
	else if (!(st = tr_launch_coord(coordinator, timeout_ms, &c, &err)) &&
		 !(st = zs_coord_resize_job(c, job, world, &j, &err))) {
		if (from_step)
			*from_step = j.worlds.n ? j.worlds.v[j.worlds.n - 1].step : 0;
		zs_job_release(&j);
	}
	zs_coord_close(c);
	return said(st, &err, errbuf, errlen);
}

int zs_delete_job(const char *coordinator, const char *job, int keep_checkpoints, int timeout_ms,
		  char *errbuf, size_t errlen)
{
	struct zs_error err = {0};
	struct zs_coord_client *c = NULL;
	uint32_t deleted, kept;
	struct zs_job j;
	enum zs_status st;

	if (!job)
		st = zs_fail(&err, ZS_EINVAL, "no job named");
	else if (!(st = tr_launch_coord(coordinator, timeout_ms, &c, &err)) &&
		 !(st = zs_coord_delete_job_ex(c, job, keep_checkpoints != 0, &j, &deleted, &kept,
					       &err)))
		zs_job_release(&j);
	zs_coord_close(c);
	return said(st, &err, errbuf, errlen);
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
	if (t->coord) /* best effort from here: a coordinator away is not waited for */
		zs_coord_set_wait_for_ready(t->coord, 0);
	if (t->joined && t->rep.have_last && !t->rep.last_sent) { /* stats only: errors do not matter */
		struct zs_step_answer an;
		zs_coord_report_step(t->coord, t->job.spec.name, t->rank, &t->rep.last, &an, &err);
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
	/* renewed until it leaves: its servers tell the coordinator that its
	 * connections ended, and a rank that stops renewing then is gone
	 * (a rollback), not a rank that leaves */
	tr_lease_stop(t);
	if (t->joined && !atomic_load(&t->ls.evicted) &&
	    !zs_coord_leave_at(t->coord, t->job.spec.name, t->rank, t->ls.session, abandoned,
			       abandoned ? 0 : next, t->timeline, &j, &err))
		zs_job_release(&j);
	zs_coord_close(t->coord);
	zs_job_release(&t->job);
	free(t->drv.regs);
	free(t->drv.micro);
	tr_state_free(t);
	pthread_mutex_destroy(&t->ls.down_mu);
	pthread_cond_destroy(&t->ls.bcv);
	free(t);
}

const char *zs_trainer_error(const zs_trainer *t) { return t->err; }
unsigned zs_trainer_rank(const zs_trainer *t) { return t->rank; }
unsigned zs_trainer_world_size(const zs_trainer *t)
{
	return zs_world_at(&t->job.spec, &t->worlds, t->wstep);
}
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
