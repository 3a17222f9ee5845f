/*
 * tasks.c - the tasks the coordinator hands a server: take a checkpoint,
 * restore one (each new shard assembled from the checkpoint's records, this
 * server's or other servers' over ReadCheckpoint), delete one.
 */
#include "server/daemon.h"

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
			       "server %llu, which holds unit %u shard %u of checkpoint %llu, is not registered (removed from the cluster?): restore a checkpoint whose servers are all up (zshardctl checkpoint list %s; checkpoint restore %s ID)",
			       (unsigned long long)os->server_id, os->unit, os->index,
			       (unsigned long long)x->t->id, x->t->job, x->t->job);
	struct zs_read_ckpt r = {.id = x->t->id, .offset = off, .length = len,
				 .unit = os->unit, .index = os->index, .array = array};
	snprintf(r.job, sizeof r.job, "%s", x->t->job);
	enum zs_status st = zs_server_read_ckpt(addr, 30000, &r, out, step, err);
	if (st == ZS_EUNAVAIL)
		zs_error_prefix(err,
				"checkpoint %llu's records of unit %u shard %u are on server %llu, which cannot be reached: start it again, or restore a checkpoint whose servers are all up (zshardctl checkpoint list %s; checkpoint restore %s ID)",
				(unsigned long long)x->t->id, os->unit, os->index,
				(unsigned long long)os->server_id, x->t->job, x->t->job);
	else if (st)
		zs_error_prefix(err, "reading the checkpoint from server %llu",
				(unsigned long long)os->server_id);
	return st;
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
		if (os->unit != w->unit || os->copy) /* its copies: below */
			continue;
		lo = os->offset > w->offset ? os->offset : w->offset;
		hi = os->offset + os->length < w->offset + w->length ? os->offset + os->length
								     : w->offset + w->length;
		if (lo >= hi)
			continue;
		/* a frozen shard's records have no optimizer state: what its
		 * elements read is zeros (restored into a shard of a collective
		 * job, whose slices do not follow frozen runs), as a fresh job's */
		bool frozen = engine_shard_marks(x->d->engine, x->t->job, os);
		for (uint32_t a = 0; a < 3; a++) {
			uint64_t sstep;
			enum zs_status st;
			if (!arrays[a] || (a && frozen))
				continue;
			/* from the first copy that has its records (a replicated
			 * job's copies each wrote them) */
			st = ZS_ENOTFOUND;
			for (uint32_t c = i; st && c < x->old->n_shards &&
					     x->old->shards[c].unit == os->unit &&
					     x->old->shards[c].index == os->index;
			     c++) {
				struct zs_error why = {0};
				st = slice(x, &x->old->shards[c], a, lo - os->offset, hi - lo,
					   arrays[a] + (lo - w->offset), &sstep, &why);
				if (st && c + 1 < x->old->n_shards &&
				    x->old->shards[c + 1].unit == os->unit &&
				    x->old->shards[c + 1].index == os->index)
					zs_warn("restore: %s; reading its next copy", why.msg);
				else if (st)
					*err = why;
			}
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

void srvd_run_task(struct srvd *d, const struct zs_task *t)
{
	struct zs_error err = {0};
	enum zs_status st = ZS_OK;
	struct zs_kv_txn *txn;
	uint64_t step;

	switch (t->kind) {
	case ZS_TASK_SNAPSHOT:
		st = engine_snapshot(d->engine, t->job, t->id, t->step, srvd_snap_done, d, &err);
		if (st)
			srvd_task_finish(d, t, st, err.msg, 0);
		return; /* the writer reports it */
	case ZS_TASK_RESTORE: {
		struct restore_ctx x = {d, t, NULL, NULL, NULL, 0};
		struct zs_checkpoint k = {0};
		struct zs_server_info *srv = NULL;
		uint32_t n_srv = 0;
		/* the shards to restore into are those of the job's placement now */
		srvd_refresh_assignments(d);
		if (t->id == ZS_CKPT_RESET) { /* a rollback with no checkpoint to go to */
			st = engine_restore(d->engine, t->job, NULL, NULL, true, t->timeline, &step, &err);
			break;
		}
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
			st = engine_restore(d->engine, t->job, load_shard, &x, true, t->timeline,
					    &step, &err);
			zs_kv_abort(txn);
		}
		free(srv);
		zs_checkpoint_release(&k);
		break;
	}
	case ZS_TASK_DELETE:
		/* a capture still waiting for its step, a snapshot queued for
		 * the writer, and (checked by the writer inside its own write
		 * transaction) one being written go too */
		engine_cancel_snapshot(d->engine, t->job, t->id);
		pthread_mutex_lock(&d->mu);
		{
			unsigned k = d->wr.n_deleted++ % 16;
			snprintf(d->wr.deleted[k].job, sizeof d->wr.deleted[k].job, "%s", t->job);
			d->wr.deleted[k].id = t->id;
		}
		struct snapjob *dropped = NULL;
		for (struct snapjob **pp = &d->wr.q; *pp;) {
			struct snapjob *sj = *pp;
			if (sj->task.id != t->id || strcmp(sj->task.job, t->job)) {
				pp = &sj->next;
				continue;
			}
			*pp = sj->next;
			sj->next = dropped;
			dropped = sj;
		}
		pthread_mutex_unlock(&d->mu);
		while (dropped) { /* its snapshot task ends, unreported as done */
			struct snapjob *sj = dropped;
			dropped = sj->next;
			engine_snaps_free(sj->snaps, sj->n);
			srvd_task_finish(d, &sj->task, ZS_ECANCELED, "the checkpoint was deleted", 0);
			free(sj);
		}
		st = zs_kv_begin(d->kv, true, &txn, &err);
		if (!st) {
			st = ckpt_delete(txn, KV_CKPT, t->job, t->id, &err);
			if (st)
				zs_kv_abort(txn);
			else
				st = zs_kv_commit(txn, &err);
		}
		if (!st)
			zs_info("checkpoint %llu of job '%s' dropped", (unsigned long long)t->id,
				t->job);
		else
			zs_warn("cannot drop checkpoint %llu of job '%s': %s",
				(unsigned long long)t->id, t->job, err.msg);
		break;
	default:
		st = zs_fail(&err, ZS_EINVAL, "unknown task kind %d", (int)t->kind);
	}
	/* restored: the old timeline's work is discarded; its norm reports
	 * still on their way are refused from now on (coord/norms.c) */
	if (!st && t->kind == ZS_TASK_RESTORE && t->timeline)
		engine_set_timeline(d->engine, t->job, t->timeline);
	srvd_task_finish(d, t, st, st ? err.msg : NULL, 0);
}

void srvd_refresh_tasks(struct srvd *d, uint64_t gen)
{
	struct zs_error err = {0};
	struct zs_task *v;
	uint32_t n;

	if (zs_coord_server_tasks(d->coord, d->me.id, &v, &n, &err)) {
		zs_warn("cannot fetch checkpoint tasks: %s", err.msg);
		return;
	}
	d->tk.gen = gen;
	for (uint32_t i = 0; i < n; i++)
		if (srvd_claim(d, &v[i]))
			srvd_run_task(d, &v[i]);
	free(v);
}
