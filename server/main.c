/*
 * server_main.c - zshard-server: a shard server's membership side.
 *
 * It binds its control address, registers with the coordinator (waiting,
 * bounded, for one that is not up yet), renews its lease by heartbeat, keeps
 * the shard assignments the coordinator gives it, and answers Status. Its id
 * is kept in LMDB under its data dir, so a restarted server is the same
 * server to the coordinator.
 *
 * Sequence:  bind -> "listening on" -> Register (retry until
 * --coordinator-timeout-ms) -> every lease/3: Heartbeat; on a new
 * assignment generation: GetAssignments; on "not registered": Register.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <errno.h>

#include "storage/ckpt.h"
#include "ctrl/codec.h"
#include "ctrl/coord_client.h"
#include "server/engine.h"
#include "storage/kv.h"
#include "base/log.h"
#include "ctrl/methods.h"
#include "model/model.h"
#include "rdma/rdma.h"
#include "ctrl/rpc.h"
#include "base/util.h"
#include "base/version.h"

static volatile sig_atomic_t stop;

struct srvd {
	pthread_mutex_t mu;
	struct zs_coord_client *coord;
	struct zs_kv *kv;
	struct zs_server_info me;
	int registered;
	uint32_t lease_ms;
	uint64_t gen;
	struct zs_assignment *as;
	uint32_t n_as;
	int64_t started_ms;
	int64_t wait_ms; /* bound on waiting for the coordinator */
	struct engine *engine;
	uint32_t step_timeout_ms;
	const char *data_dir;
	/* checkpoint tasks */
	uint64_t task_gen;
	struct zs_task *busy; /* started, not reported yet */
	uint32_t n_busy;
	pthread_t writer;
	pthread_cond_t wcv;
	struct snapjob *wq; /* snapshots waiting to be written */
	bool wstop;
	char rdma_note[256]; /* why rdma is (not) offered, for Status */
};

/* A captured snapshot on its way to LMDB. */
struct snapjob {
	struct zs_task task;
	struct engine_snap *snaps;
	uint32_t n;
	struct snapjob *next;
};

enum { KV_META, KV_CKPT };

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void run_task(struct srvd *d, const struct zs_task *t);
static void refresh_assignments(struct srvd *d);
static bool same_task(const struct zs_task *a, const struct zs_task *b);

static void h_status(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct srvd *d = ctx;
	struct zs_server_status s = {0};
	struct zs_job_step_stats js[64];
	struct zs_buf b;
	enum zs_status st;

	(void)p;
	(void)n;
	pthread_mutex_lock(&d->mu);
	s.id = d->me.id;
	snprintf(s.addr, sizeof s.addr, "%s", d->me.addr);
	snprintf(s.coordinator, sizeof s.coordinator, "%s", zs_coord_addr(d->coord));
	s.registered = d->registered;
	s.capacity = d->me.capacity;
	s.assign_gen = d->gen;
	s.uptime_ms = zs_now_ms() - d->started_ms;
	s.n_assignments = d->n_as;
	s.assignments = d->as; /* borrowed for encoding */
	for (uint32_t i = 0; i < d->n_as; i++)
		s.assigned_bytes += d->as[i].bytes;
	snprintf(s.data_addr, sizeof s.data_addr, "%s", d->me.data_addr);
	snprintf(s.shm_addr, sizeof s.shm_addr, "%s", d->me.shm_addr);
	{
		struct engine_stats es;
		engine_stats(d->engine, &es);
		s.jobs_held = es.jobs;
		s.shards = es.shards;
		s.state_bytes = es.bytes;
		s.steps_applied = es.steps_applied;
		s.bytes_in = es.bytes_in;
		s.bytes_out = es.bytes_out;
		s.gathers_waiting = es.held;
	}
	zs_rss(&s.rss_bytes, &s.rss_peak_bytes);
	zs_fmt(s.rdma, sizeof s.rdma, "%s%s", d->me.transports & ZS_TRANSPORT_RDMA ? "offered: " : "not offered: ",
		 d->rdma_note);
	s.job_steps = js;
	s.n_job_steps = engine_job_steps(d->engine, js, sizeof js / sizeof js[0]);
	st = zs_enc_server_status(&s, &b);
	pthread_mutex_unlock(&d->mu);
	if (st) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode status");
		return;
	}
	zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
}

/* The engine's norm exchange: the coordinator sums every server's norms. */
static enum zs_status exchange_norms(void *ctx, const char *job, uint64_t step,
				     const struct zs_shard_norm *norms, uint32_t n,
				     double *total, struct zs_error *err)
{
	struct srvd *d = ctx;
	struct zs_norm_report r = {.step = step, .server_id = d->me.id, .n = n,
				   .norms = (struct zs_shard_norm *)norms};

	snprintf(r.job, sizeof r.job, "%s", job);
	return zs_coord_report_norm(d->coord, &r, (int)d->step_timeout_ms, total, err);
}

/* Claims a task: false if it is already under way here. */
static bool claim(struct srvd *d, const struct zs_task *t)
{
	struct zs_task *g = NULL;
	bool busy = false;

	pthread_mutex_lock(&d->mu);
	for (uint32_t k = 0; k < d->n_busy && !busy; k++)
		busy = same_task(&d->busy[k], t);
	if (!busy && (g = realloc(d->busy, (d->n_busy + 1) * sizeof *g))) {
		d->busy = g;
		g[d->n_busy++] = *t;
	}
	pthread_mutex_unlock(&d->mu);
	return g != NULL;
}

static void h_snapshot(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct srvd *d = ctx;
	struct zs_error err = {0};
	struct zs_task t;

	if (zs_dec_task(p, n, &t, &err))
		return zs_rpc_fail(call, err.code, "%s", err.msg);
	if (t.kind != ZS_TASK_SNAPSHOT)
		return zs_rpc_fail(call, ZS_EINVAL, "only snapshots are asked this way");
	if (claim(d, &t))
		run_task(d, &t);
	zs_rpc_reply(call, NULL, 0);
}

static void h_read_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct srvd *d = ctx;
	struct zs_error err = {0};
	struct zs_read_ckpt r;
	struct zs_kv_txn *t;
	struct zs_buf b;
	uint64_t step;
	float *out;
	static const enum ckpt_kind kinds[3] = {CKPT_MASTER, CKPT_STATE0, CKPT_STATE1};

	if (zs_dec_read_ckpt(p, n, &r, &err))
		return zs_rpc_fail(call, err.code, "%s", err.msg);
	out = malloc(r.length ? r.length * 4 : 1);
	if (!out)
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	if (zs_kv_begin(d->kv, false, &t, &err) ||
	    ckpt_get_slice(t, KV_CKPT, r.job, r.id, r.unit, r.index, kinds[r.array], r.offset,
			   r.length, &step, out, &err)) {
		zs_kv_abort(t);
		free(out);
		return zs_rpc_fail(call, err.code, "%s", err.msg);
	}
	zs_kv_abort(t);
	if (zs_enc_read_ckpt_reply(step, out, r.length, &b))
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	else
		zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
	free(out);
}

static const struct zs_rpc_method methods[] = {
	{ZS_M_SERVER_STATUS, h_status},
	{ZS_M_SERVER_SNAPSHOT, h_snapshot},
	{ZS_M_SERVER_READ_CKPT, h_read_ckpt},
};

static enum zs_status save_id(struct srvd *d, uint64_t id, struct zs_error *err)
{
	struct zs_kv_txn *t;
	uint8_t b[8];
	enum zs_status st = zs_kv_begin(d->kv, true, &t, err);

	if (st)
		return st;
	zs_kv_u64_enc(id, b);
	st = zs_kv_put(t, KV_META, "server_id", 9, b, 8, err);
	if (st) {
		zs_kv_abort(t);
		return st;
	}
	return zs_kv_commit(t, err);
}

static uint64_t load_id(struct srvd *d)
{
	struct zs_kv_txn *t;
	const void *v;
	size_t vl;
	uint64_t id = 0;

	if (zs_kv_begin(d->kv, false, &t, NULL))
		return 0;
	if (!zs_kv_get(t, KV_META, "server_id", 9, &v, &vl, NULL) && vl == 8)
		id = zs_kv_u64_dec(v);
	zs_kv_abort(t);
	return id;
}

/*
 * Registers, retrying while the coordinator is unreachable, for at most
 * d->wait_ms. Other errors (a bad address, capacity refused) are final.
 */
static enum zs_status do_register(struct srvd *d, struct zs_error *err)
{
	int64_t t0 = zs_now_ms(), last_note = t0;
	enum zs_status st;
	uint64_t id;
	uint32_t lease;

	for (;;) {
		st = zs_coord_register(d->coord, &d->me, &id, &lease, err);
		if (st != ZS_EUNAVAIL && st != ZS_ETIMEDOUT)
			break;
		if (stop)
			return zs_fail(err, ZS_ECANCELED, "stopped while waiting");
		if (zs_now_ms() - t0 >= d->wait_ms)
			return zs_fail(err, ZS_ETIMEDOUT,
				       "no coordinator answered at %s within %lld ms (%s)",
				       zs_coord_addr(d->coord), (long long)d->wait_ms,
				       err->msg);
		if (zs_now_ms() - last_note >= 5000) {
			zs_info("waiting for the coordinator at %s (%lld s so far)",
				zs_coord_addr(d->coord),
				(long long)((zs_now_ms() - t0) / 1000));
			last_note = zs_now_ms();
		}
		zs_sleep_ms(200, (volatile const int *)&stop);
	}
	if (st)
		return st;
	if (id != d->me.id) {
		st = save_id(d, id, err);
		if (st)
			return st;
	}
	pthread_mutex_lock(&d->mu);
	d->me.id = id;
	d->lease_ms = lease;
	d->registered = 1;
	pthread_mutex_unlock(&d->mu);
	zs_info("registered with %s as server %llu (lease %u ms)",
		zs_coord_addr(d->coord), (unsigned long long)id, lease);
	return ZS_OK;
}

static void refresh_assignments(struct srvd *d)
{
	struct zs_error err = {0};
	struct zs_assignment *as, *old;
	uint32_t n_as, n_old;
	uint64_t gen, bytes = 0;

	if (zs_coord_assignments(d->coord, d->me.id, &gen, &as, &n_as, &err)) {
		zs_warn("cannot fetch assignments: %s", err.msg);
		return;
	}
	pthread_mutex_lock(&d->mu);
	old = d->as;
	n_old = d->n_as;
	d->as = as;
	d->n_as = n_as;
	d->gen = gen;
	pthread_mutex_unlock(&d->mu);
	for (uint32_t i = 0; i < n_old; i++)
		zs_assignment_release(&old[i]);
	free(old);
	for (uint32_t i = 0; i < n_as; i++) {
		struct zs_job job;
		bytes += as[i].bytes;
		if (engine_has_job(d->engine, as[i].job, as[i].epoch, as[i].created_ms))
			continue;
		zs_info("assigned %u shards of job '%s' (epoch %llu, %llu bytes)",
			as[i].n_shards, as[i].job, (unsigned long long)as[i].epoch,
			(unsigned long long)as[i].bytes);
		if (zs_coord_get_job(d->coord, as[i].job, &job, &err)) {
			zs_warn("cannot fetch job '%s': %s", as[i].job, err.msg);
			continue;
		}
		if (engine_add_job(d->engine, &job, d->me.id, &err))
			zs_error("cannot hold job '%s': %s", as[i].job, err.msg);
		zs_job_release(&job);
	}
	{
		/* drop jobs that are no longer assigned here */
		char names[64][ZS_JOB_NAME_MAX];
		uint32_t n = engine_job_names(d->engine, names, 64);
		for (uint32_t k = 0; k < n; k++) {
			bool kept = false;
			for (uint32_t i = 0; i < n_as; i++)
				kept |= !strcmp(names[k], as[i].job);
			if (!kept)
				engine_remove_job(d->engine, names[k]);
		}
	}
	zs_info("assignment generation %llu: %u jobs, %llu bytes in all",
		(unsigned long long)gen, n_as, (unsigned long long)bytes);
}

/* ---------------------------------------------------- checkpoint tasks */

static bool same_task(const struct zs_task *a, const struct zs_task *b)
{
	return a->kind == b->kind && a->id == b->id && !strcmp(a->job, b->job);
}

/* Reports a task and forgets it (caller does not hold mu). */
static void task_finish(struct srvd *d, const struct zs_task *t, bool ok, const char *why,
			uint64_t bytes)
{
	struct zs_error err = {0};

	if (zs_coord_task_done(d->coord, d->me.id, t, ok, why, bytes, &err))
		zs_warn("cannot report %s of checkpoint %llu of job '%s': %s",
			t->kind == ZS_TASK_SNAPSHOT ? "the snapshot" :
			t->kind == ZS_TASK_RESTORE ? "the restore" : "the deletion",
			(unsigned long long)t->id, t->job, err.msg);
	pthread_mutex_lock(&d->mu);
	for (uint32_t i = 0; i < d->n_busy; i++)
		if (same_task(&d->busy[i], t)) {
			d->busy[i] = d->busy[--d->n_busy];
			break;
		}
	pthread_mutex_unlock(&d->mu);
}

/* Called by the engine when every shard of a snapshot is captured. */
static void snap_done(void *ctx, const char *job, uint64_t id, uint64_t step,
		      struct engine_snap *snaps, uint32_t n, enum zs_status st, const char *why)
{
	struct srvd *d = ctx;
	struct snapjob *sj;
	struct zs_task t = {.kind = ZS_TASK_SNAPSHOT, .id = id, .step = step};

	snprintf(t.job, sizeof t.job, "%s", job);
	if (st) {
		task_finish(d, &t, false, why, 0);
		return;
	}
	sj = calloc(1, sizeof *sj);
	if (!sj) {
		engine_snaps_free(snaps, n);
		task_finish(d, &t, false, "out of memory", 0);
		return;
	}
	*sj = (struct snapjob){t, snaps, n, NULL};
	pthread_mutex_lock(&d->mu);
	sj->next = d->wq;
	d->wq = sj;
	pthread_cond_signal(&d->wcv);
	pthread_mutex_unlock(&d->mu);
}

/*
 * Fault injection for the crash tests: ZSHARD_FAULT=NAME kills this process
 * (SIGKILL, no cleanup) when it reaches the point NAME.
 */
static void fault_point(const char *name)
{
	const char *f = getenv("ZSHARD_FAULT");
	if (f && !strcmp(f, name)) {
		zs_error("fault injection: dying at %s", name);
		raise(SIGKILL);
	}
}

/*
 * The LMDB environment is written through its map, where a full disk is a
 * SIGBUS, not an error: so a checkpoint first checks that the data dir has
 * room for its records (with a margin for LMDB's pages) and fails cleanly
 * with ZS_ENOSPC when it has not.
 */
static enum zs_status space_for(struct srvd *d, const struct snapjob *sj,
				struct zs_error *err)
{
	struct statvfs vfs;
	uint64_t need = 16u << 20, avail;

	for (uint32_t i = 0; i < sj->n; i++)
		need += (sj->snaps[i].length * 4 + CKPT_HDR + 64) *
			(1 + !!sj->snaps[i].s0 + !!sj->snaps[i].s1) * 11 / 10;
	if (statvfs(d->data_dir, &vfs))
		return zs_fail(err, zs_status_from_errno(errno), "cannot stat %s: %s", d->data_dir,
			       strerror(errno));
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (avail < need) {
		char a[32], b[32];
		return zs_fail(err, ZS_ENOSPC,
			       "the data dir %s has %s free; checkpoint %llu needs about %s",
			       d->data_dir, zs_fmt_bytes(avail, a, sizeof a),
			       (unsigned long long)sj->task.id, zs_fmt_bytes(need, b, sizeof b));
	}
	return ZS_OK;
}

/* Writes snapshots into LMDB, one transaction each, off the data path. */
static void *writer_main(void *arg)
{
	struct srvd *d = arg;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		struct snapjob *sj;
		struct zs_kv_txn *t = NULL;
		struct zs_error err = {0};
		enum zs_status st;
		uint64_t bytes = 0;

		while (!d->wq && !d->wstop)
			pthread_cond_wait(&d->wcv, &d->mu);
		if (!d->wq)
			break;
		sj = d->wq;
		d->wq = sj->next;
		pthread_mutex_unlock(&d->mu);
		st = space_for(d, sj, &err);
		if (!st)
			st = zs_kv_begin(d->kv, true, &t, &err);
		else
			t = NULL;
		for (uint32_t i = 0; !st && i < sj->n; i++) {
			const struct engine_snap *s = &sj->snaps[i];
			st = ckpt_put(t, KV_CKPT, sj->task.job, sj->task.id, s->unit, s->index,
				      CKPT_MASTER, s->step, s->master, s->length, &err);
			if (!st && s->s0)
				st = ckpt_put(t, KV_CKPT, sj->task.job, sj->task.id, s->unit, s->index,
					      CKPT_STATE0, s->step, s->s0, s->length, &err);
			if (!st && s->s1)
				st = ckpt_put(t, KV_CKPT, sj->task.job, sj->task.id, s->unit, s->index,
					      CKPT_STATE1, s->step, s->s1, s->length, &err);
			bytes += s->length * 4 * (1 + !!s->s0 + !!s->s1);
		}
		if (!st)
			fault_point("ckpt-mid-write"); /* records written, not committed */
		if (st && t)
			zs_kv_abort(t);
		else if (!st)
			st = zs_kv_commit(t, &err); /* durable when this returns */
		if (!st)
			fault_point("ckpt-before-report"); /* durable, not reported */
		engine_snaps_free(sj->snaps, sj->n);
		if (!st)
			zs_info("checkpoint %llu of job '%s' (step %llu): %u shards, %llu bytes durable",
				(unsigned long long)sj->task.id, sj->task.job,
				(unsigned long long)sj->task.step, sj->n, (unsigned long long)bytes);
		else
			zs_error("checkpoint %llu of job '%s': %s", (unsigned long long)sj->task.id,
				 sj->task.job, err.msg);
		task_finish(d, &sj->task, !st, st ? err.msg : NULL, bytes);
		free(sj);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

struct restore_ctx {
	struct srvd *d;
	const struct zs_task *t;
	struct zs_kv_txn *txn;
	const struct zs_placement *old; /* where the checkpoint's records are */
	const struct zs_server_info *srv;
	uint32_t n_srv;
};

/* Copies [off, off + len) of one old shard's array into out, from this
 * server's records or from the server that wrote them. */
static enum zs_status slice(struct restore_ctx *x, const struct zs_shard *os, uint32_t array,
			    uint64_t off, uint64_t len, float *out, uint64_t *step,
			    struct zs_error *err)
{
	static const enum ckpt_kind kinds[3] = {CKPT_MASTER, CKPT_STATE0, CKPT_STATE1};
	const char *addr = NULL;

	if (os->server_id == x->d->me.id)
		return ckpt_get_slice(x->txn, KV_CKPT, x->t->job, x->t->id, os->unit, os->index,
				      kinds[array], off, len, step, out, err);
	for (uint32_t i = 0; i < x->n_srv; i++)
		if (x->srv[i].id == os->server_id)
			addr = x->srv[i].addr;
	if (!addr)
		return zs_fail(err, ZS_EUNAVAIL,
			       "server %llu, which holds unit %u shard %u of the checkpoint, is not registered",
			       (unsigned long long)os->server_id, os->unit, os->index);
	/* in pieces of 4 Mi elements (16 MiB) per call */
	for (uint64_t done = 0; done < len;) {
		uint64_t k = len - done < (4u << 20) ? len - done : (4u << 20);
		struct zs_read_ckpt r = {.id = x->t->id, .offset = off + done, .length = k,
					 .unit = os->unit, .index = os->index, .array = array};
		enum zs_status st;
		snprintf(r.job, sizeof r.job, "%s", x->t->job);
		st = zs_server_read_ckpt(addr, 30000, &r, out + done, step, err);
		if (st) {
			zs_error_prefix(err, "reading the checkpoint from server %llu",
					(unsigned long long)os->server_id);
			return st;
		}
		done += k;
	}
	return ZS_OK;
}

/* Assembles a shard of the current placement from the checkpoint's shards
 * that overlap it (the same shard when the placement did not change). */
static enum zs_status load_shard(void *ctx, const struct engine_snap *w, float *master,
				 float *s0, float *s1, uint64_t *step, struct zs_error *err)
{
	struct restore_ctx *x = ctx;
	float *arrays[3] = {master, s0, s1};
	uint64_t covered = 0, st_step = 0;
	bool first = true;

	for (uint32_t i = 0; i < x->old->n_shards; i++) {
		const struct zs_shard *os = &x->old->shards[i];
		uint64_t lo, hi;
		if (os->unit != w->unit)
			continue;
		lo = os->offset > w->offset ? os->offset : w->offset;
		hi = os->offset + os->length < w->offset + w->length ? os->offset + os->length
								     : w->offset + w->length;
		if (lo >= hi)
			continue;
		for (uint32_t a = 0; a < 3; a++) {
			uint64_t sstep;
			enum zs_status st;
			if (!arrays[a])
				continue;
			st = slice(x, os, a, lo - os->offset, hi - lo, arrays[a] + (lo - w->offset),
				   &sstep, err);
			if (st)
				return st;
			if (!first && sstep != st_step)
				return zs_fail(err, ZS_EIO, "the checkpoint's records disagree on the step");
			st_step = sstep;
			first = false;
		}
		covered += hi - lo;
	}
	if (covered != w->length)
		return zs_fail(err, ZS_EIO,
			       "the checkpoint covers %llu of the %llu elements of unit %u shard %u",
			       (unsigned long long)covered, (unsigned long long)w->length, w->unit,
			       w->index);
	*step = st_step;
	return ZS_OK;
}

static void run_task(struct srvd *d, const struct zs_task *t)
{
	struct zs_error err = {0};
	enum zs_status st = ZS_OK;
	struct zs_kv_txn *txn;
	uint64_t step;

	switch (t->kind) {
	case ZS_TASK_SNAPSHOT:
		st = engine_snapshot(d->engine, t->job, t->id, t->step, snap_done, d, &err);
		if (st)
			task_finish(d, t, false, err.msg, 0);
		return; /* the writer reports it */
	case ZS_TASK_RESTORE: {
		struct restore_ctx x = {d, t, NULL, NULL, NULL, 0};
		struct zs_checkpoint k = {0};
		struct zs_server_info *srv = NULL;
		uint32_t n_srv = 0;
		/* the shards to restore into are those of the job's placement now */
		refresh_assignments(d);
		st = zs_coord_get_ckpt(d->coord, t->job, t->id, &k, &err);
		if (!st)
			st = zs_coord_servers(d->coord, &srv, &n_srv, &err);
		if (!st)
			st = zs_kv_begin(d->kv, false, &txn, &err);
		if (!st) {
			x.txn = txn;
			x.old = &k.placement;
			x.srv = srv;
			x.n_srv = n_srv;
			st = engine_restore(d->engine, t->job, load_shard, &x, &step, &err);
			zs_kv_abort(txn);
		}
		free(srv);
		zs_checkpoint_release(&k);
		break;
	}
	case ZS_TASK_DELETE:
		st = zs_kv_begin(d->kv, true, &txn, &err);
		if (!st) {
			st = ckpt_delete(txn, KV_CKPT, t->job, t->id, &err);
			if (st)
				zs_kv_abort(txn);
			else
				st = zs_kv_commit(txn, &err);
		}
		break;
	default:
		st = zs_fail(&err, ZS_EINVAL, "unknown task kind %d", (int)t->kind);
	}
	task_finish(d, t, !st, st ? err.msg : NULL, 0);
}

static void refresh_tasks(struct srvd *d, uint64_t gen)
{
	struct zs_error err = {0};
	struct zs_task *v;
	uint32_t n;

	if (zs_coord_server_tasks(d->coord, d->me.id, &v, &n, &err)) {
		zs_warn("cannot fetch checkpoint tasks: %s", err.msg);
		return;
	}
	d->task_gen = gen;
	for (uint32_t i = 0; i < n; i++)
		if (claim(d, &v[i]))
			run_task(d, &v[i]);
	free(v);
}

static void *heartbeat(void *arg)
{
	struct srvd *d = arg;
	int lost = 0;

	while (!stop) {
		struct zs_error err = {0};
		uint32_t lease;
		uint64_t gen, task_gen;
		enum zs_status st;

		zs_sleep_ms(d->lease_ms / 3 ? d->lease_ms / 3 : 100,
			    (volatile const int *)&stop);
		if (stop)
			break;
		st = zs_coord_heartbeat(d->coord, d->me.id, &lease, &gen, &task_gen, &err);
		if (st == ZS_ENOTFOUND) {
			zs_warn("coordinator does not know server %llu: registering again",
				(unsigned long long)d->me.id);
			st = do_register(d, &err);
			if (!st)
				st = zs_coord_heartbeat(d->coord, d->me.id, &lease, &gen,
							&task_gen, &err);
		}
		if (st) {
			if (!lost)
				zs_warn("heartbeat to %s failed: %s (retrying every %u ms)",
					zs_coord_addr(d->coord), err.msg, d->lease_ms / 3);
			lost = 1;
			continue;
		}
		if (lost)
			zs_info("coordinator %s reachable again", zs_coord_addr(d->coord));
		lost = 0;
		d->lease_ms = lease;
		if (gen != d->gen)
			refresh_assignments(d);
		if (task_gen != d->task_gen)
			refresh_tasks(d, task_gen);
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: zshard-server --coordinator ADDR --data-dir DIR [options]\n"
		"\n"
		"A zshard shard server: registers with the coordinator, renews its lease,\n"
		"holds the shards the coordinator assigns it.\n"
		"\n"
		"  --coordinator ADDR   coordinator HOST:PORT (or $ZSHARD_COORDINATOR)\n"
		"  --listen HOST:PORT   control address (default 127.0.0.1:0, a free port)\n"
		"  --data-dir DIR       state directory (created if missing)\n"
		"  --capacity BYTES     memory offered for shards, e.g. 512M, 8G\n"
		"                       (default: half of physical memory)\n"
		"  --data-listen HOST:PORT\n"
		"                       data-plane (tcp) address (default: the control\n"
		"                       address's host, a free port); same-host trainers\n"
		"                       also get shared memory\n"
		"  --memory-budget BYTES\n"
		"                       masters and optimizer state beyond this stay in\n"
		"                       O_DIRECT files under DIR/tier, streamed for each\n"
		"                       update (default: all in memory)\n"
		"  --step-timeout-ms MS a gather waiting longer for the other ranks fails,\n"
		"                       naming the ranks it waits for (default 60000)\n"
		"  --port-file FILE     also write the bound HOST:PORT to FILE\n"
		"  --coordinator-timeout-ms MS\n"
		"                       how long to wait for the coordinator at start\n"
		"                       (default 300000)\n"
		"  --rdma auto|on|off   offer the rdma data path: auto (default) where an RDMA\n"
		"                       device works, on (refuse to start without one), off\n"
		"  --log-level LEVEL    debug, info, warn, error (default info)\n"
		"  --version, --help\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"coordinator", required_argument, NULL, 'c'},
		{"listen", required_argument, NULL, 'l'},
		{"data-dir", required_argument, NULL, 'd'},
		{"capacity", required_argument, NULL, 'C'},
		{"port-file", required_argument, NULL, 'p'},
		{"data-listen", required_argument, NULL, 'D'},
		{"step-timeout-ms", required_argument, NULL, 'T'},
		{"memory-budget", required_argument, NULL, 'M'},
		{"coordinator-timeout-ms", required_argument, NULL, 'w'},
		{"log-level", required_argument, NULL, 'v'},
		{"rdma", required_argument, NULL, 'R'},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	static const char *const tables[] = {"meta", "ckpt"};
	const char *coord_addr = getenv("ZSHARD_COORDINATOR");
	const char *listen = "127.0.0.1:0", *data_dir = NULL, *port_file = NULL;
	const char *data_listen = NULL;
	uint32_t step_timeout_ms = 60000;
	uint64_t memory_budget = 0;
	const char *rdma_mode = "auto";
	bool rdma = false;
	char data_default[ZS_ADDR_MAX];
	struct zs_listener *dp = NULL;
	struct srvd d = {.wait_ms = 300000};
	struct zs_rpc_server *rpc = NULL;
	struct zs_error err = {0};
	struct sigaction sa;
	pthread_t hb;
	int lock_fd = -1, rc = 1, o;
	uint64_t v;

	zs_log_init("server");
	pthread_mutex_init(&d.mu, NULL);
	d.me.capacity = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE) / 2;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'c': coord_addr = optarg; break;
		case 'l': listen = optarg; break;
		case 'd': data_dir = optarg; break;
		case 'p': port_file = optarg; break;
		case 'R':
			if (strcmp(optarg, "auto") && strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "zshard-server: --rdma: '%s' is not auto, on or off\n",
					optarg);
				return 2;
			}
			rdma_mode = optarg;
			break;
		case 'D': data_listen = optarg; break;
		case 'M':
			if (zs_parse_size(optarg, &memory_budget, &err)) {
				fprintf(stderr, "zshard-server: --memory-budget: %s\n", err.msg);
				return 2;
			}
			break;
		case 'T':
			if (zs_parse_u64(optarg, 100, 86400000, &v, &err)) {
				fprintf(stderr, "zshard-server: --step-timeout-ms: %s\n", err.msg);
				return 2;
			}
			step_timeout_ms = (uint32_t)v;
			break;
		case 'C':
			if (zs_parse_size(optarg, &d.me.capacity, &err) || !d.me.capacity) {
				fprintf(stderr, "zshard-server: --capacity: %s\n",
					d.me.capacity ? err.msg : "must be > 0");
				return 2;
			}
			break;
		case 'w':
			if (zs_parse_u64(optarg, 0, 86400000, &v, &err)) {
				fprintf(stderr, "zshard-server: --coordinator-timeout-ms: %s\n", err.msg);
				return 2;
			}
			d.wait_ms = (int64_t)v;
			break;
		case 'v': {
			enum zs_log_level lv;
			if (zs_log_parse_level(optarg, &lv)) {
				fprintf(stderr, "zshard-server: --log-level: '%s' is not one of debug, info, warn, error\n", optarg);
				return 2;
			}
			zs_log_set_level(lv);
			break;
		}
		case 'V': printf("zshard-server %s\n", ZS_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zshard-server: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!coord_addr || !data_dir) {
		fprintf(stderr, "zshard-server: --coordinator and --data-dir are required\n");
		return 2;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	d.started_ms = zs_now_ms();
	gethostname(d.me.host, sizeof d.me.host - 1);

	if (zs_mkdir_p(data_dir, &err) ||
	    zs_lock_dir(data_dir, "server.lock", &lock_fd, &err))
		goto fail;
	/* a virtual reservation; written through the map (about 5x faster for
	 * checkpoint records here), so data.mdb is a sparse file of that size */
	if (zs_kv_open(data_dir, d.me.capacity * 8 > (1ULL << 30) ? d.me.capacity * 8 : 1ULL << 30,
		       tables, 2, ZS_KV_WRITEMAP, &d.kv, &err))
		goto clean_lock;
	pthread_cond_init(&d.wcv, NULL);
	if (pthread_create(&d.writer, NULL, writer_main, &d)) {
		zs_fail(&err, ZS_ENOMEM, "cannot start the checkpoint writer");
		goto clean_kv;
	}
	d.me.id = load_id(&d);
	if (!data_listen) {
		char host[ZS_HOST_MAX];
		uint16_t port;
		if (zs_parse_hostport(listen, host, &port, &err))
			goto clean_kv;
		zs_fmt(data_default, sizeof data_default, "%s:0", host);
		data_listen = data_default;
	}
	if (engine_create(2, step_timeout_ms, &d.engine, &err))
		goto clean_kv;
	d.step_timeout_ms = step_timeout_ms;
	d.data_dir = data_dir;
	engine_set_norm_exchange(d.engine, exchange_norms, &d);
	if (memory_budget) {
		char tier[1024];
		zs_fmt(tier, sizeof tier, "%s/tier", data_dir);
		if (engine_set_tier(d.engine, tier, memory_budget, &err))
			goto clean_engine;
	}
	/* rdma: offered only where a device works and the arena can be pinned;
	 * otherwise said plainly, once, here and in Status */
	if (strcmp(rdma_mode, "off")) {
		rdma = !zs_rdma_probe(d.me.capacity, d.rdma_note, sizeof d.rdma_note);
		if (!rdma && !strcmp(rdma_mode, "on")) {
			zs_fail(&err, ZS_EUNAVAIL, "--rdma on, but RDMA cannot work here: %s",
				d.rdma_note);
			goto clean_engine;
		}
		if (!rdma)
			zs_info("rdma not offered: %s", d.rdma_note);
	} else {
		snprintf(d.rdma_note, sizeof d.rdma_note, "turned off (--rdma off)");
	}
	{
		struct zs_listener_opts lo = {.tcp_listen = data_listen, .shm = true,
					      .path = rdma ? &zs_rdma_path : NULL,
					      .arena_bytes = d.me.capacity};
		enum zs_status lst = zs_listener_start(&lo, engine_target(d.engine), &dp,
						       d.me.data_addr, d.me.shm_addr, &err);
		if (lst && rdma && strcmp(rdma_mode, "on")) {
			/* registering the arena failed after all: serve without rdma */
			zs_warn("rdma not offered: %s", err.msg);
			zs_fmt(d.rdma_note, sizeof d.rdma_note, "%s", err.msg);
			rdma = false;
			lo.path = NULL;
			lst = zs_listener_start(&lo, engine_target(d.engine), &dp, d.me.data_addr,
						d.me.shm_addr, &err);
		}
		if (lst)
			goto clean_engine;
		engine_set_listener(d.engine, dp);
		d.me.transports = ZS_TRANSPORT_TCP | ZS_TRANSPORT_SHM | (rdma ? ZS_TRANSPORT_RDMA : 0);
		if (rdma)
			zs_info("rdma offered on %s (the %llu-byte shard arena is registered)",
				d.rdma_note, (unsigned long long)d.me.capacity);
	}
	/* a short per-call deadline; do_register bounds the whole wait */
	if (zs_coord_open(coord_addr, 2000, 1, &d.coord, &err))
		goto clean_dp;
	if (zs_rpc_server_start(listen, methods, sizeof methods / sizeof methods[0], &d, &rpc,
				d.me.addr,
				sizeof d.me.addr, &err))
		goto clean_coord;
	if (port_file && zs_write_file_atomic(port_file, d.me.addr, &err))
		goto clean_rpc;
	printf("listening on %s\n", d.me.addr);
	fflush(stdout);
	zs_info("zshard-server %s listening on %s (data %s, %s), data dir %s, capacity %llu bytes%s",
		ZS_VERSION, d.me.addr, d.me.data_addr, d.me.shm_addr, data_dir,
		(unsigned long long)d.me.capacity, d.me.id ? "" : " (new)");

	if (do_register(&d, &err))
		goto clean_rpc;
	refresh_assignments(&d);
	/* a restore asked while we were away is waiting */
	d.task_gen = (uint64_t)-1;
	if (pthread_create(&hb, NULL, heartbeat, &d)) {
		zs_fail(&err, ZS_ENOMEM, "cannot start the heartbeat thread");
		goto clean_rpc;
	}
	while (!stop)
		zs_sleep_ms(200, (volatile const int *)&stop);
	zs_info("shutting down");
	pthread_join(hb, NULL);
	/* the writer finishes what it writes, and reports it, while the
	 * coordinator client is still open; then the engine goes (its
	 * cancelled snapshots are reported the same way) */
	pthread_mutex_lock(&d.mu);
	d.wstop = true;
	pthread_cond_signal(&d.wcv);
	pthread_mutex_unlock(&d.mu);
	pthread_join(d.writer, NULL);
	d.writer = 0;
	zs_rpc_server_free(rpc);
	rpc = NULL;
	engine_free(d.engine);
	d.engine = NULL;
	rc = 0;

clean_rpc:
	zs_rpc_server_free(rpc);
clean_coord:
	zs_coord_close(d.coord);
clean_dp:
	/* no more calls into the engine, then the engine answers what it
	 * holds (into closed connections), then the arena goes */
	zs_listener_stop(dp);
	engine_free(d.engine);
	d.engine = NULL;
	zs_listener_free(dp);
clean_engine:
	engine_free(d.engine);
clean_kv:
	pthread_mutex_lock(&d.mu);
	d.wstop = true;
	pthread_cond_signal(&d.wcv);
	pthread_mutex_unlock(&d.mu);
	if (d.writer) {
		pthread_join(d.writer, NULL);
		d.writer = 0;
	}
	while (d.wq) {
		struct snapjob *sj = d.wq;
		d.wq = sj->next;
		engine_snaps_free(sj->snaps, sj->n);
		free(sj);
	}
	free(d.busy);
	zs_kv_close(d.kv);
clean_lock:
	close(lock_fd);
fail:
	if (rc)
		zs_error("%s", err.msg);
	else
		zs_info("stopped");
	for (uint32_t i = 0; i < d.n_as; i++)
		zs_assignment_release(&d.as[i]);
	free(d.as);
	pthread_mutex_destroy(&d.mu);
	return rc;
}
