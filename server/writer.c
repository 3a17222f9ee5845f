/*
 * writer.c - the checkpoint writer: each finished snapshot goes into the
 * server's LMDB (after checking the data dir has room), is made durable,
 * and reported to the coordinator, on a thread of its own so training does
 * not wait.
 */
#include "server/daemon.h"
#include "base/env.h"

static bool same_task(const struct zs_task *a, const struct zs_task *b)
{
	return a->kind == b->kind && a->id == b->id && !strcmp(a->job, b->job);
}

/* Claims a task: false if it is already under way here. */
bool srvd_claim(struct srvd *d, const struct zs_task *t)
{
	struct srvd_busy *g = NULL;
	bool busy = false;

	pthread_mutex_lock(&d->mu);
	for (uint32_t k = 0; k < d->tk.n_busy && !busy; k++)
		busy = same_task(&d->tk.busy[k].task, t);
	if (!busy && (g = realloc(d->tk.busy, (d->tk.n_busy + 1) * sizeof *g))) {
		d->tk.busy = g;
		g[d->tk.n_busy++] = (struct srvd_busy){*t, zs_now_ms()};
	}
	pthread_mutex_unlock(&d->mu);
	return g != NULL;
}

/* Reports a task and forgets it (caller does not hold mu). */
void srvd_task_finish(struct srvd *d, const struct zs_task *t, enum zs_status code,
		      const char *why, uint64_t bytes)
{
	struct zs_error err = {0};
	double seconds = -1;
	bool ok = code == ZS_OK;

	if (zs_coord_task_done_code(d->coord, d->me.id, t, code, why, bytes, &err))
		zs_warn("cannot report %s of checkpoint %llu of job '%s': %s",
			t->kind == ZS_TASK_SNAPSHOT ? "the snapshot" :
			t->kind == ZS_TASK_RESTORE ? "the restore" : "the deletion",
			(unsigned long long)t->id, t->job, err.msg);
	pthread_mutex_lock(&d->mu);
	for (uint32_t i = 0; i < d->tk.n_busy; i++)
		if (same_task(&d->tk.busy[i].task, t)) {
			seconds = (double)(zs_now_ms() - d->tk.busy[i].t0_ms) * 1e-3;
			d->tk.busy[i] = d->tk.busy[--d->tk.n_busy];
			break;
		}
	pthread_mutex_unlock(&d->mu);
	srvd_metrics_task(d, t, ok, bytes, seconds);
}

/* Called by the engine when every shard of a snapshot is captured. */
void srvd_snap_done(void *ctx, const char *job, uint64_t id, uint64_t step,
		      struct engine_snap *snaps, uint32_t n, enum zs_status st, const char *why)
{
	struct srvd *d = ctx;
	struct snapjob *sj;
	struct zs_task t = {.kind = ZS_TASK_SNAPSHOT, .id = id, .step = step};

	snprintf(t.job, sizeof t.job, "%s", job);
	if (st) {
		srvd_task_finish(d, &t, st, why, 0);
		return;
	}
	sj = calloc(1, sizeof *sj);
	if (!sj) {
		engine_snaps_free(snaps, n);
		srvd_task_finish(d, &t, ZS_ENOMEM, "out of memory", 0);
		return;
	}
	*sj = (struct snapjob){t, snaps, n, NULL};
	pthread_mutex_lock(&d->mu);
	sj->next = d->wr.q;
	d->wr.q = sj;
	pthread_cond_signal(&d->wr.cv);
	pthread_mutex_unlock(&d->mu);
}

/*
 * Fault injection for the crash tests: ZSHARD_FAULT=NAME kills this process
 * (SIGKILL, no cleanup) when it reaches the point NAME.
 */
static void fault_point(const char *name)
{
	if (zs_fault(name)) {
		zs_error("fault injection: dying at %s", name);
		raise(SIGKILL);
	}
}

/* The bytes a checkpoint's records take (with their headers). */
static uint64_t records_bytes(const struct snapjob *sj)
{
	uint64_t need = 0;

	for (uint32_t i = 0; i < sj->n; i++)
		need += (sj->snaps[i].length * 4 + CKPT_HDR + 64) *
			(1 + !!sj->snaps[i].s0 + !!sj->snaps[i].s1);
	return need;
}

/*
 * The LMDB environment is written through its map, where a full disk is a
 * SIGBUS, not an error: so a checkpoint first checks that the data dir has
 * room for its records (with a margin for LMDB's pages) and fails cleanly
 * with ZS_ENOSPC when it has not, saying how much it has; its transaction
 * then allocates the blocks it writes into (zs_kv_room), which no other
 * process's writes can take from it meanwhile.
 */
static enum zs_status space_for(struct srvd *d, const struct snapjob *sj,
				struct zs_error *err)
{
	struct statvfs vfs;
	uint64_t need = (16u << 20) + records_bytes(sj) * 11 / 10, avail;

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

void srvd_note_storage(struct srvd *d, enum zs_status st, const char *why)
{
	pthread_mutex_lock(&d->mu);
	if (!st && d->health[0]) {
		zs_info("its disk writes again: well");
		d->health[0] = '\0';
	} else if (st == ZS_EIO || st == ZS_ENOSPC) {
		zs_fmt(d->health, sizeof d->health, "%s: %s",
		       st == ZS_EIO ? "disk I/O error" : "disk full", why);
	}
	pthread_mutex_unlock(&d->mu);
}

/* Writes snapshots into LMDB, one transaction each, off the data path. */
void *srvd_writer_main(void *arg)
{
	struct srvd *d = arg;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		struct snapjob *sj;
		struct zs_kv_txn *t = NULL;
		struct zs_error err = {0};
		enum zs_status st;
		uint64_t bytes = 0;

		while (!d->wr.q && !d->wr.stop)
			pthread_cond_wait(&d->wr.cv, &d->mu);
		if (!d->wr.q)
			break;
		sj = d->wr.q;
		d->wr.q = sj->next;
		pthread_mutex_unlock(&d->mu);
		st = space_for(d, sj, &err);
		if (!st)
			st = zs_kv_begin(d->kv, true, &t, &err);
		else
			t = NULL;
		if (!st)
			st = zs_kv_room(t, records_bytes(sj), &err);
		if (!st) { /* deleted meanwhile: LMDB's one writer orders this check */
			pthread_mutex_lock(&d->mu);
			for (unsigned k = 0; k < 16 && k < d->wr.n_deleted && !st; k++)
				if (d->wr.deleted[k].id == sj->task.id &&
				    !strcmp(d->wr.deleted[k].job, sj->task.job))
					st = zs_fail(&err, ZS_ECANCELED, "the checkpoint was deleted");
			pthread_mutex_unlock(&d->mu);
		}
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
		srvd_note_storage(d, st, err.msg);
		srvd_task_finish(d, &sj->task, st, st ? err.msg : NULL, bytes);
		free(sj);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}
