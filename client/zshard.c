/*
 * zshard.c - libzshard (see zshard.h): join through the coordinator,
 * one data-plane connection per server that holds a shard, and ops that
 * fan a unit's gather or push out over its shards.
 */
#include "include/zshard.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ctrl/coord_client.h"
#include "model/model.h"
#include "net/transport.h"
#include "base/util.h"

/* The step driver's view of one unit. */
struct dunit {
	void *params;      /* NULL when not resident */
	zs_op *gather;     /* in flight */
	void *grad;
	zs_op *push;       /* in flight */
	bool grad_ready;   /* stage 1: written, to push at step end */
	size_t bytes;      /* numel * dtype size */
};

struct zs_trainer {
	struct zs_coord_client *coord;
	struct zs_job job;
	uint32_t rank;
	bool joined;
	uint32_t n_srv;
	uint64_t *srv_id;
	struct zs_conn **conn;
	char err[ZS_ERRMSG_MAX];
	struct zs_trainer_counters ctr;
	/* the step driver */
	struct zs_policy pol;
	/* freed unit buffers kept for reuse: fresh pages cost a page fault
	 * each (about 0.33 GB/s on these VMs), reused ones nothing */
	struct { void *p; size_t n; } cache[8];
	unsigned n_cache;
	/* where registration pays (rdma), the step driver's buffers are
	 * registered once, when made, with any connection of that transport
	 * (they share the device) */
	struct zs_conn *reg_conn;
	const struct zs_transport_ops *reg_ops;
	struct { void *p; struct zs_mr *mr; } *regs;
	unsigned n_regs;
	struct dunit *du;
	uint64_t step;
	bool in_step;
	unsigned stage; /* for this step */
	/* the step report: the step in progress, and the last one finished
	 * (sent to the coordinator at the next boundary or at close) */
	struct zs_step_report cur, last;
	bool have_last, last_sent;
	double step_t0;
	unsigned long long step_g0, step_p0;
};

struct zs_op {
	zs_trainer *t;
	uint32_t n, done;
	enum zs_status status;
	char msg[ZS_ERRMSG_MAX];
	struct zs_req *req[];
};

static int fail(zs_trainer *t, enum zs_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(zs_trainer *t, enum zs_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->err, sizeof t->err, fmt, ap);
	va_end(ap);
	return st;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A buffer for the step driver: where registering pays (rdma), registered
 * once here (a
 * failed registration leaves it unregistered: the transport then registers
 * it per transfer). */
static void *buf_alloc(zs_trainer *t, size_t n)
{
	void *p = malloc(n ? n : 1);
	struct zs_mr *mr;
	void *g;

	if (!p || !t->reg_conn || zs_mem_register(t->reg_conn, p, n ? n : 1, &mr, NULL))
		return p;
	g = realloc(t->regs, (t->n_regs + 1) * sizeof *t->regs);
	if (!g) {
		t->reg_ops->dereg(mr);
		return p;
	}
	t->regs = g;
	t->regs[t->n_regs].p = p;
	t->regs[t->n_regs++].mr = mr;
	return p;
}

static void buf_free(zs_trainer *t, void *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < t->n_regs; i++)
		if (t->regs[i].p == p) {
			/* through the ops table: the connection may be closed by now */
			t->reg_ops->dereg(t->regs[i].mr);
			t->regs[i] = t->regs[--t->n_regs];
			break;
		}
	free(p);
}

static struct zs_conn *conn_of(zs_trainer *t, uint64_t server_id)
{
	for (uint32_t i = 0; i < t->n_srv; i++)
		if (t->srv_id[i] == server_id)
			return t->conn[i];
	return NULL;
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
	t->srv_id = calloc(n_s ? n_s : 1, sizeof *t->srv_id);
	t->conn = calloc(n_s ? n_s : 1, sizeof *t->conn);
	if (!t->srv_id || !t->conn) {
		free(s);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < n_s && !st; i++) {
		bool used = false;
		const struct zs_transport_ops *ops;
		struct zs_conn_opts o = {.job = t->job.spec.name, .token = "", .rank = t->rank,
					 .incarnation = (uint64_t)t->job.created_ms,
					 .timeout_ms = timeout_ms};
		struct zs_transport_offer offer = {.bits = s[i].transports,
						   .same_host = !strcmp(s[i].host, host),
						   .addr = s[i].data_addr,
						   .local_addr = s[i].shm_addr};
		for (uint32_t k = 0; k < t->job.placement.n_shards; k++)
			used |= t->job.placement.shards[k].server_id == s[i].id;
		if (!used)
			continue;
		st = zs_transport_choose(transport, &offer, &probe, &ops, &o.addr, err);
		if (st) {
			zs_error_prefix(err, "server %llu (%s)", (unsigned long long)s[i].id,
					s[i].addr);
			break;
		}
		st = zs_connect(ops, &o, &t->conn[t->n_srv], err);
		if (!st) {
			if ((ops->caps & ZS_CAP_REGISTER) && !t->reg_conn) {
				t->reg_conn = t->conn[t->n_srv];
				t->reg_ops = ops;
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

int zs_trainer_join(const char *coordinator, const char *job, unsigned rank,
		    const char *transport, int timeout_ms, zs_trainer **out, char *errbuf,
		    size_t errlen)
{
	struct zs_error err = {0};
	struct zs_join_req req = {.rank = rank};
	struct zs_job j;
	zs_trainer *t;
	enum zs_status st;

	*out = NULL;
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
	st = zs_coord_open(coordinator, timeout_ms, 0, &t->coord, &err);
	if (st)
		goto fail;
	st = zs_coord_get_job(t->coord, job, &j, &err);
	if (st)
		goto fail;
	snprintf(req.job, sizeof req.job, "%s", job);
	gethostname(req.host, sizeof req.host - 1);
	req.layout = j.spec.layout;
	st = zs_coord_join(t->coord, &req, &t->job, &err);
	zs_job_release(&j);
	if (st)
		goto fail;
	t->joined = true;
	t->pol = (struct zs_policy){.prefetch = 1, .reshard_after_forward = 1};
	t->du = calloc(t->job.spec.layout.n_units ? t->job.spec.layout.n_units : 1,
		       sizeof *t->du);
	if (!t->du) {
		st = zs_fail(&err, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++)
		t->du[u].bytes = t->job.spec.layout.units[u].numel *
				 zs_dtype_size(t->job.spec.layout.units[u].dtype);
	st = connect_all(t, transport, timeout_ms, &err);
	if (st)
		goto fail;
	*out = t;
	return ZS_OK;
fail:
	zs_trainer_close(t);
out:
	if (errbuf && errlen)
		snprintf(errbuf, errlen, "%s", err.msg);
	return st;
}

void zs_trainer_close(zs_trainer *t)
{
	struct zs_error err = {0};
	struct zs_job j;

	if (!t)
		return;
	if (t->joined && t->have_last && !t->last_sent) { /* stats only: errors do not matter */
		uint32_t stage;
		uint64_t every;
		zs_coord_report_step(t->coord, t->job.spec.name, t->rank, &t->last, &stage,
				     &every, &err);
	}
	/* connections first: they fail and free what is in flight */
	for (uint32_t i = 0; i < t->n_srv; i++)
		zs_conn_close(t->conn[i]);
	for (uint32_t u = 0; t->du && u < t->job.spec.layout.n_units; u++) {
		free(t->du[u].gather); /* ops only; their requests died with the conns */
		free(t->du[u].push);
		buf_free(t, t->du[u].params);
		buf_free(t, t->du[u].grad);
	}
	free(t->du);
	for (unsigned i = 0; i < t->n_cache; i++)
		buf_free(t, t->cache[i].p);
	if (t->joined && !zs_coord_leave(t->coord, t->job.spec.name, t->rank, &j, &err))
		zs_job_release(&j);
	zs_coord_close(t->coord);
	zs_job_release(&t->job);
	free(t->regs);
	free(t->srv_id);
	free(t->conn);
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
		return fail(t, st, "%s", err.msg);
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

int zs_unit_dtype(const zs_trainer *t, unsigned u)
{
	return u < t->job.spec.layout.n_units ? (int)t->job.spec.layout.units[u].dtype : 0;
}

/* Posts one transfer per shard of unit; on failure cancels nothing posted
 * (they complete on their own) but reports the error through the op. */
static int start(zs_trainer *t, unsigned u, unsigned long long step, void *dst,
		 const void *src, bool init, bool partial, zs_op **out)
{
	const struct zs_unit *un;
	enum zs_dtype dt;
	unsigned dsz;
	uint32_t n = 0;
	zs_op *op;

	*out = NULL;
	if (u >= t->job.spec.layout.n_units)
		return fail(t, ZS_EINVAL, "unit %u is out of range (%u units)", u,
			    t->job.spec.layout.n_units);
	un = &t->job.spec.layout.units[u];
	dt = init ? ZS_F32 : un->dtype;
	dsz = zs_dtype_size(dt);
	for (uint32_t i = 0; i < t->job.placement.n_shards; i++)
		n += t->job.placement.shards[i].unit == u;
	op = calloc(1, sizeof *op + n * sizeof op->req[0]);
	if (!op)
		return fail(t, ZS_ENOMEM, "out of memory");
	op->t = t;
	for (uint32_t i = 0; i < t->job.placement.n_shards; i++) {
		const struct zs_shard *sh = &t->job.placement.shards[i];
		struct zs_xfer x = {.unit = u, .offset = sh->offset, .length = sh->length,
				    .step = step, .dtype = dt, .init = init, .partial = partial};
		struct zs_error err = {0};
		enum zs_status st;
		if (sh->unit != u)
			continue;
		st = src ? zs_post_write(conn_of(t, sh->server_id), &x,
					 (const uint8_t *)src + sh->offset * dsz,
					 &op->req[op->n], &err)
			 : zs_post_read(conn_of(t, sh->server_id), &x,
					(uint8_t *)dst + sh->offset * dsz, &op->req[op->n], &err);
		if (st == ZS_EAGAIN && op->n == 0) {
			free(op);
			return fail(t, ZS_EAGAIN, "too many transfers in flight");
		}
		if (st) {
			/* what was posted still completes; the op reports this */
			op->status = st == ZS_EAGAIN ? ZS_EAGAIN : st;
			zs_fmt(op->msg, sizeof op->msg, "%s",
			       st == ZS_EAGAIN ? "too many transfers in flight" : err.msg);
			break;
		}
		op->n++;
	}
	if (src) {
		t->ctr.pushes++;
		t->ctr.bytes_pushed += un->numel * dsz;
	} else {
		t->ctr.gathers++;
		t->ctr.bytes_gathered += un->numel * dsz;
	}
	*out = op;
	return ZS_OK;
}

int zs_gather(zs_trainer *t, unsigned u, unsigned long long step, void *dst, zs_op **op)
{
	return start(t, u, step, dst, NULL, false, false, op);
}

int zs_push(zs_trainer *t, unsigned u, unsigned long long step, const void *grad,
	    zs_op **op)
{
	return start(t, u, step, NULL, grad, false, false, op);
}

int zs_push_partial(zs_trainer *t, unsigned u, unsigned long long step, const void *grad,
		    zs_op **op)
{
	return start(t, u, step, NULL, grad, false, true, op);
}

/* Advances op's requests; timeout_ms < 0 waits without bound, 0 only tests. */
static int progress(zs_op *op, int timeout_ms)
{
	zs_trainer *t = op->t;
	double t0 = now_s();
	int rc;

	while (op->done < op->n) {
		struct zs_error err = {0};
		enum zs_status st;
		int left = timeout_ms < 0 ? -1
					  : timeout_ms - (int)((now_s() - t0) * 1000.0);
		if (timeout_ms >= 0 && left < 0)
			left = 0;
		st = timeout_ms == 0 ? zs_req_test(op->req[op->done], &err)
				     : zs_req_wait(op->req[op->done], left, &err);
		if (st == ZS_EAGAIN) { /* in progress (or the wait's bound passed) */
			t->ctr.wait_seconds += now_s() - t0;
			if (timeout_ms != 0)
				fail(t, st, "%s", err.msg);
			return ZS_EAGAIN;
		}
		if (st && !op->status) {
			op->status = st;
			zs_fmt(op->msg, sizeof op->msg, "%s", err.msg);
		}
		op->done++;
	}
	t->ctr.wait_seconds += now_s() - t0;
	rc = op->status;
	if (rc)
		fail(t, (enum zs_status)rc, "%s", op->msg);
	free(op);
	return rc;
}

int zs_op_test(zs_op *op) { return progress(op, 0); }
int zs_op_wait(zs_op *op, int timeout_ms) { return progress(op, timeout_ms); }

int zs_init_unit(zs_trainer *t, unsigned u, const float *params)
{
	zs_op *op;
	int rc = start(t, u, 0, NULL, params, true, false, &op);
	return rc ? rc : zs_op_wait(op, -1);
}

void zs_trainer_counters(const zs_trainer *t, struct zs_trainer_counters *c)
{
	*c = t->ctr;
}

/* ------------------------------------------------------------ step driver */

int zs_trainer_set_policy(zs_trainer *t, const struct zs_policy *p)
{
	if (t->in_step)
		return fail(t, ZS_ESTATE, "the policy changes between steps, not within one");
	t->pol = *p;
	return ZS_OK;
}

/* *live += delta; the overall peak and this step's follow it. */
static void live_add(unsigned long long *live, unsigned long long *peak, uint64_t *step_peak,
		     long long delta)
{
	*live += (unsigned long long)delta;
	if (*live > *peak)
		*peak = *live;
	if (*live > *step_peak)
		*step_peak = *live;
}

static void live_params(zs_trainer *t, long long delta)
{
	live_add(&t->ctr.live_param_bytes, &t->ctr.peak_param_bytes, &t->cur.peak_param_bytes,
		 delta);
}

static void live_grads(zs_trainer *t, long long delta)
{
	live_add(&t->ctr.live_grad_bytes, &t->ctr.peak_grad_bytes, &t->cur.peak_grad_bytes, delta);
}

/* Waits for a parameter gather of the step driver, timing it. */
static int wait_gather(zs_trainer *t, zs_op *op)
{
	double t0 = now_s();
	int rc = zs_op_wait(op, -1);
	t->cur.gather_wait_seconds += now_s() - t0;
	return rc;
}

/* A buffer of n bytes, from the cache when one of that size is there. */
static void *buf_get(zs_trainer *t, size_t n)
{
	for (unsigned i = 0; i < t->n_cache; i++)
		if (t->cache[i].n == n) {
			void *p = t->cache[i].p;
			t->cache[i] = t->cache[--t->n_cache];
			return p;
		}
	return buf_alloc(t, n);
}

/* Keeps a buffer for reuse (the oldest goes when the cache is full). */
static void buf_put(zs_trainer *t, void *p, size_t n)
{
	if (!p)
		return;
	if (t->n_cache == sizeof t->cache / sizeof t->cache[0]) {
		buf_free(t, t->cache[0].p);
		t->cache[0] = t->cache[--t->n_cache];
	}
	t->cache[t->n_cache].p = p;
	t->cache[t->n_cache++].n = n;
}

static void drop_params(zs_trainer *t, unsigned u)
{
	struct dunit *d = &t->du[u];
	if (d->params && !d->gather) {
		buf_put(t, d->params, d->bytes);
		d->params = NULL;
		live_params(t, -(long long)d->bytes);
	}
}

/* Starts unit u's gather if it is neither resident nor in flight. must:
 * the unit is needed now (the memory bound cannot refuse it). */
static int want(zs_trainer *t, unsigned u, bool must)
{
	struct dunit *d = &t->du[u];
	int rc;

	if (d->params || d->gather)
		return ZS_OK;
	if (!must && t->pol.max_live_bytes &&
	    t->ctr.live_param_bytes + d->bytes > t->pol.max_live_bytes)
		return ZS_OK; /* the window waits for memory */
	d->params = buf_get(t, d->bytes);
	if (!d->params)
		return fail(t, ZS_ENOMEM, "out of memory for unit %u's parameters", u);
	live_params(t, (long long)d->bytes);
	rc = zs_gather(t, u, t->step, d->params, &d->gather);
	if (rc) {
		buf_put(t, d->params, d->bytes);
		d->params = NULL;
		live_params(t, -(long long)d->bytes);
	}
	return rc;
}

/* Reaps finished pushes (stage 2, 3 free their gradients then). */
static int reap_pushes(zs_trainer *t, bool wait)
{
	double t0 = wait ? now_s() : 0.0;
	int first = ZS_OK;
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->du[u];
		int rc;
		if (!d->push)
			continue;
		rc = wait ? zs_op_wait(d->push, -1) : zs_op_test(d->push);
		if (rc == ZS_EAGAIN)
			continue;
		d->push = NULL;
		buf_put(t, d->grad, d->bytes);
		d->grad = NULL;
		live_grads(t, -(long long)d->bytes);
		if (rc && !first)
			first = rc;
	}
	if (wait)
		t->cur.push_wait_seconds += now_s() - t0;
	return first;
}

int zs_step_begin(zs_trainer *t, unsigned long long step)
{
	uint32_t n = t->job.spec.layout.n_units;
	int rc;

	struct zs_error err = {0};
	uint32_t stage;
	uint64_t every;
	double t0 = now_s();

	if (t->in_step)
		return fail(t, ZS_ESTATE, "step %llu has not ended", (unsigned long long)t->step);
	/* the last step's report goes to the coordinator; the stage an
	 * operator set applies from this step boundary */
	rc = zs_coord_report_step(t->coord, t->job.spec.name, t->rank,
				  t->have_last && !t->last_sent ? &t->last : NULL, &stage, &every,
				  &err);
	if (rc)
		return fail(t, (enum zs_status)rc, "%s", err.msg);
	t->last_sent = true;
	t->job.spec.stage = stage;
	t->job.spec.checkpoint_every = every;
	t->stage = stage;
	t->step = step;
	t->in_step = true;
	t->cur = (struct zs_step_report){.rank = t->rank, .step = step, .stage = stage,
					 .prefetch = t->pol.prefetch,
					 .peak_param_bytes = t->ctr.live_param_bytes,
					 .peak_grad_bytes = t->ctr.live_grad_bytes};
	t->step_t0 = t0;
	t->step_g0 = t->ctr.bytes_gathered;
	t->step_p0 = t->ctr.bytes_pushed;
	/* the job's automatic checkpoints: rank 0 asks at the boundary */
	if (t->rank == 0 && t->job.spec.checkpoint_every && step &&
	    step % t->job.spec.checkpoint_every == 0 &&
	    (rc = zs_checkpoint(t, step, NULL, 0, NULL))) {
		t->in_step = false;
		return rc;
	}
	t->cur.control_seconds = now_s() - t0;
	for (uint32_t u = 0; u < n; u++) /* last step's parameters are stale */
		drop_params(t, u);
	if (t->stage < 3) {
		/* the replica: every unit, refreshed once per step */
		for (uint32_t u = 0; u < n; u++)
			if ((rc = want(t, u, true)))
				return rc;
		return ZS_OK;
	}
	for (uint32_t u = 0; u < n && u <= t->pol.prefetch; u++)
		if ((rc = want(t, u, u == 0)))
			return rc;
	return ZS_OK;
}

int zs_unit_params(zs_trainer *t, unsigned u, int backward, const void **params)
{
	uint32_t n = t->job.spec.layout.n_units;
	struct dunit *d;
	int rc;

	if (!t->in_step)
		return fail(t, ZS_ESTATE, "zs_unit_params outside a step");
	if (u >= n)
		return fail(t, ZS_EINVAL, "unit %u is out of range (%u units)", u, n);
	d = &t->du[u];
	if ((rc = want(t, u, true)))
		return rc;
	if (d->gather) {
		rc = wait_gather(t, d->gather);
		d->gather = NULL;
		if (rc)
			return rc;
	}
	/* the window: the next units in this pass's order */
	for (unsigned k = 1; k <= t->pol.prefetch; k++) {
		if (backward ? u < k : u + k >= n)
			break;
		if ((rc = want(t, backward ? u - k : u + k, false)))
			return rc;
	}
	reap_pushes(t, false);
	*params = d->params;
	return ZS_OK;
}

int zs_unit_forward_done(zs_trainer *t, unsigned u)
{
	if (u >= t->job.spec.layout.n_units)
		return fail(t, ZS_EINVAL, "unit %u is out of range", u);
	/* the last unit is the first of the backward pass: keep it */
	if (t->stage == 3 && t->pol.reshard_after_forward && u + 1 < t->job.spec.layout.n_units)
		drop_params(t, u);
	return ZS_OK;
}

/* Waits for the oldest push in flight (the backward pass pushes units in
 * descending order: the highest unit); ZS_OK if none. */
static int wait_oldest_push(zs_trainer *t)
{
	double t0 = now_s();
	struct dunit *d;
	int rc;

	for (uint32_t u = t->job.spec.layout.n_units; u-- > 0;) {
		d = &t->du[u];
		if (!d->push)
			continue;
		rc = zs_op_wait(d->push, -1);
		d->push = NULL;
		buf_put(t, d->grad, d->bytes);
		d->grad = NULL;
		live_grads(t, -(long long)d->bytes);
		t->cur.push_wait_seconds += now_s() - t0;
		return rc;
	}
	return ZS_OK;
}

int zs_unit_grad(zs_trainer *t, unsigned u, void **grad)
{
	unsigned depth = t->pol.push_depth ? t->pol.push_depth : 1;
	struct dunit *d;
	int rc;

	if (u >= t->job.spec.layout.n_units)
		return fail(t, ZS_EINVAL, "unit %u is out of range", u);
	d = &t->du[u];
	if (d->push)
		return fail(t, ZS_ESTATE, "unit %u's gradient is being pushed", u);
	if (!d->grad && t->in_step && t->stage > 1) {
		/* at most push_depth pushes in flight beside the gradient written */
		unsigned inflight = 0;
		if ((rc = reap_pushes(t, false)))
			return rc;
		for (uint32_t k = 0; k < t->job.spec.layout.n_units; k++)
			inflight += t->du[k].push != NULL;
		for (; inflight > depth; inflight--)
			if ((rc = wait_oldest_push(t)))
				return rc;
	}
	if (!d->grad) {
		d->grad = buf_get(t, d->bytes);
		if (!d->grad)
			return fail(t, ZS_ENOMEM, "out of memory for unit %u's gradient", u);
		live_grads(t, (long long)d->bytes);
	}
	memset(d->grad, 0, d->bytes);
	*grad = d->grad;
	return ZS_OK;
}

int zs_unit_push(zs_trainer *t, unsigned u)
{
	struct dunit *d;
	int rc;

	if (u >= t->job.spec.layout.n_units || !t->du[u].grad)
		return fail(t, ZS_EINVAL, "unit %u has no gradient (zs_unit_grad first)", u);
	d = &t->du[u];
	if (t->stage == 3)
		drop_params(t, u); /* its backward is done */
	if (t->stage == 1) {
		d->grad_ready = true; /* stage 1 pushes everything at the step's end */
		return ZS_OK;
	}
	while ((rc = zs_push(t, u, t->step, d->grad, &d->push)) == ZS_EAGAIN)
		if ((rc = reap_pushes(t, true)))
			return rc;
	return rc;
}

int zs_step_end(zs_trainer *t)
{
	int rc = ZS_OK, r;

	if (!t->in_step)
		return fail(t, ZS_ESTATE, "no step to end");
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->du[u];
		if (!d->grad_ready)
			continue;
		d->grad_ready = false;
		while ((r = zs_push(t, u, t->step, d->grad, &d->push)) == ZS_EAGAIN)
			if ((r = reap_pushes(t, true)))
				break;
		if (r && !rc)
			rc = r;
	}
	r = reap_pushes(t, true);
	if (r && !rc)
		rc = r;
	for (uint32_t u = 0; u < t->job.spec.layout.n_units; u++) {
		struct dunit *d = &t->du[u];
		if (d->gather) { /* a prefetch nobody used */
			r = wait_gather(t, d->gather);
			d->gather = NULL;
			if (r && !rc)
				rc = r;
		}
		if (t->stage == 3)
			drop_params(t, u);
	}
	t->in_step = false;
	{
		struct zs_step_report *c = &t->cur;
		c->seconds = now_s() - t->step_t0;
		c->compute_seconds = c->seconds - c->gather_wait_seconds - c->push_wait_seconds -
				     c->control_seconds;
		if (c->compute_seconds < 0)
			c->compute_seconds = 0;
		c->bytes_gathered = t->ctr.bytes_gathered - t->step_g0;
		c->bytes_pushed = t->ctr.bytes_pushed - t->step_p0;
		struct rusage ru; /* every step: a system call, not a /proc read */
		c->rss_peak_bytes = getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_maxrss * 1024;
		t->last = *c;
		t->have_last = true;
		t->last_sent = false;
	}
	if (rc) {
		char why[ZS_ERRMSG_MAX];
		memcpy(why, t->err, sizeof why);
		return fail(t, (enum zs_status)rc, "step %llu: %s", (unsigned long long)t->step,
			    why);
	}
	return ZS_OK;
}

int zs_last_step(const zs_trainer *t, struct zs_step_stats *s)
{
	const struct zs_step_report *r = &t->last;

	if (!t->have_last)
		return ZS_ENOTFOUND;
	*s = (struct zs_step_stats){
		.step = r->step, .stage = r->stage, .prefetch = r->prefetch,
		.seconds = r->seconds, .compute_seconds = r->compute_seconds,
		.gather_wait_seconds = r->gather_wait_seconds,
		.push_wait_seconds = r->push_wait_seconds, .control_seconds = r->control_seconds,
		.bytes_gathered = r->bytes_gathered, .bytes_pushed = r->bytes_pushed,
		.peak_param_bytes = r->peak_param_bytes, .peak_grad_bytes = r->peak_grad_bytes,
		.rss_peak_bytes = r->rss_peak_bytes};
	return ZS_OK;
}

/* ------------------------------------------------------------ checkpoints */

int zs_checkpoint(zs_trainer *t, unsigned long long step, const void *blob, unsigned len,
		  unsigned long long *id)
{
	struct zs_error err = {0};
	struct zs_checkpoint k;
	enum zs_status st = zs_coord_create_ckpt(t->coord, t->job.spec.name, step, &k, &err);

	if (st)
		return fail(t, st, "%s", err.msg);
	if (id)
		*id = k.id;
	if (k.state == ZS_CKPT_PENDING) {
		/* this rank has not pushed step `step` yet, so no shard can pass
		 * it: tell every server now, before they could */
		struct zs_server_info *s = NULL;
		uint32_t n_s = 0;
		struct zs_task task = {.kind = ZS_TASK_SNAPSHOT, .id = k.id, .step = step};
		snprintf(task.job, sizeof task.job, "%s", t->job.spec.name);
		st = zs_coord_servers(t->coord, &s, &n_s, &err);
		for (uint32_t i = 0; !st && i < n_s; i++)
			if (conn_of(t, s[i].id))
				st = zs_server_snapshot(s[i].addr, 10000, &task, &err);
		free(s);
		if (st) {
			zs_checkpoint_release(&k);
			return fail(t, st, "checkpoint %llu: %s", (unsigned long long)k.id, err.msg);
		}
	}
	if (blob || len) {
		if (len > ZS_BLOB_MAX) {
			zs_checkpoint_release(&k);
			return fail(t, ZS_EINVAL, "a blob of %u bytes is over %u", len, ZS_BLOB_MAX);
		}
		st = zs_coord_put_blob(t->coord, t->job.spec.name, k.id, t->rank, blob, len, &err);
	}
	zs_checkpoint_release(&k);
	return st ? fail(t, st, "%s", err.msg) : ZS_OK;
}

int zs_checkpoint_wait(zs_trainer *t, unsigned long long id, int timeout_ms)
{
	double t0 = now_s();

	for (;;) {
		struct zs_error err = {0};
		struct zs_checkpoint k;
		enum zs_status st = zs_coord_get_ckpt(t->coord, t->job.spec.name, id, &k, &err);
		enum zs_ckpt_state state;
		if (st)
			return fail(t, st, "%s", err.msg);
		state = k.state;
		if (state == ZS_CKPT_FAILED)
			fail(t, ZS_EIO, "checkpoint %llu failed: %s", id, k.error);
		zs_checkpoint_release(&k);
		if (state == ZS_CKPT_COMMITTED)
			return ZS_OK;
		if (state == ZS_CKPT_FAILED)
			return ZS_EIO;
		if (timeout_ms >= 0 && (now_s() - t0) * 1000.0 >= timeout_ms)
			return fail(t, ZS_EAGAIN, "checkpoint %llu is not committed after %d ms", id,
				    timeout_ms);
		{
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
}

int zs_trainer_resume(zs_trainer *t, unsigned long long *step, void *blob, unsigned cap,
		      unsigned *len)
{
	struct zs_error err = {0};
	struct zs_checkpoint k;
	struct zs_job j;
	enum zs_status st = zs_coord_get_job(t->coord, t->job.spec.name, &j, &err);

	if (st)
		return fail(t, st, "%s", err.msg);
	if (j.restore_pending || !j.restored_id) {
		st = fail(t, j.restore_pending ? ZS_ESTATE : ZS_ENOTFOUND,
			  j.restore_pending ? "job '%s' is being restored" : "job '%s' was never restored",
			  j.spec.name);
		zs_job_release(&j);
		return st;
	}
	*step = j.restored_step;
	*len = 0;
	st = zs_coord_get_ckpt(t->coord, j.spec.name, j.restored_id, &k, &err);
	zs_job_release(&j);
	if (st)
		return fail(t, st, "%s", err.msg);
	for (uint32_t i = 0; i < k.n_blobs; i++)
		if (k.blobs[i].rank == t->rank) {
			*len = k.blobs[i].len;
			if (blob)
				memcpy(blob, k.blobs[i].data, k.blobs[i].len < cap ? k.blobs[i].len : cap);
		}
	zs_checkpoint_release(&k);
	return ZS_OK;
}
