/*
 * ckpt_tasks.c - the tasks the servers carry checkpoints out by: snapshot
 * (each server of a pending checkpoint's job, until it reports durable),
 * restore and delete (a queue in memory, a server struck off as it
 * reports); the commit once every server of the job is durable; a
 * restore that finds a checkpoint bad falls back to an older one.
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "base/env.h"

/* A task for every server that holds shards in placement pl. */
enum zs_status coord_add_ctask_on(struct coord *c, const char *job,
				   const struct zs_placement *pl, enum zs_task_kind kind,
				   uint64_t id, uint64_t step)
{
	struct ctask *t = calloc(1, sizeof *t);

	if (!t || !coord_placement_servers(pl, &t->pending, &t->n_pending)) {
		free(t);
		return ZS_ENOMEM;
	}
	t->t = (struct zs_task){.kind = kind, .id = id, .step = step};
	snprintf(t->t.job, sizeof t->t.job, "%s", job);
	t->next = c->ck.tasks;
	c->ck.tasks = t;
	c->task_gen++;
	return ZS_OK;
}

enum zs_status coord_add_ctask(struct coord *c, const struct zs_job *j, enum zs_task_kind kind,
				uint64_t id, uint64_t step)
{
	enum zs_status st = coord_add_ctask_on(c, j->spec.name, &j->placement, kind, id, step);

	if (!st && kind == ZS_TASK_RESTORE) /* its servers' norm reports say it from then on */
		c->ck.tasks->t.timeline = j->timeline;
	return st;
}

void coord_ctask_free(struct ctask *t)
{
	free(t->pending);
	free(t);
}

/*
 * A restore of checkpoint k (committed) found its records bad (a checksum
 * that fails, a record gone: the server said so with sid's why): k is
 * marked failed, saying so, and the job rolls back again, to the newest
 * older committed checkpoint (the next restore verifies it as this one
 * was verified), or to a reset with none. Caller holds mu.
 */
static void fall_back(struct coord *c, struct zs_job *j, struct zs_checkpoint *k, uint64_t sid,
		      const char *why)
{
	struct zs_checkpoint nk = *k;
	struct zs_error e = {0};
	char who[ZS_ADDR_MAX + 32], reason[256];
	uint64_t id = k->id;

	nk.state = ZS_CKPT_FAILED;
	zs_fmt(nk.error, sizeof nk.error, "found bad by its restore: %s: %s",
	       coord_server_name(c, sid, who, sizeof who), why);
	if (coord_save_ckpt(c, &nk, false, &e)) {
		zs_error("job '%s': checkpoint %llu is bad (%s), and cannot be marked so: %s",
			 j->spec.name, (unsigned long long)id, why, e.msg);
		return;
	}
	*k = nk;
	c->task_gen++;
	coord_metrics_event(c, COORD_EV_BAD_CKPT);
	zs_fmt(reason, sizeof reason,
	       "checkpoint %llu failed its restore (%s: %s): back to the newest older checkpoint",
	       (unsigned long long)id, who, why);
	zs_warn("job '%s': %s", j->spec.name, reason);
	coord_rollback(c, j, 0, reason);
	coord_prune_failed(c, j);
}

bool coord_holds(struct coord *c, const struct zs_job *j, uint64_t server_id)
{
	const uint64_t *ids;
	uint32_t n;

	if (coord_job_servers(c, j, &ids, &n))
		return coord_id_in(ids, n, server_id);
	for (uint32_t i = 0; i < j->placement.n_shards; i++) /* out of memory */
		if (j->placement.shards[i].server_id == server_id)
			return true;
	return false;
}

void coord_h_server_tasks(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_task *v;
	uint32_t m = 0, cap;
	struct zs_buf b;
	uint64_t sid;

	if (zs_dec_server_id(p, n, &sid, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	cap = (uint32_t)c->ck.n + 1;
	for (struct ctask *t = c->ck.tasks; t; t = t->next)
		cap++;
	v = calloc(cap, sizeof *v);
	if (!v) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < c->ck.n; i++) {
		struct zs_checkpoint *k = &c->ck.list[i];
		struct zs_job *j = coord_find_job(c, k->job);
		bool done = false;
		if (k->state != ZS_CKPT_PENDING || !coord_ckpt_of(k, j) || !coord_holds(c, j, sid))
			continue;
		zs_ck_sort_durable(k->durable, k->n_durable);
		done = coord_id_in(k->durable, k->n_durable, sid);
		if (!done)
			v[m++] = (struct zs_task){ZS_TASK_SNAPSHOT, "", k->id, k->step};
		if (!done)
			snprintf(v[m - 1].job, sizeof v[m - 1].job, "%s", k->job);
	}
	for (struct ctask *t = c->ck.tasks; t; t = t->next)
		for (uint32_t q = 0; q < t->n_pending; q++)
			if (t->pending[q] == sid)
				v[m++] = t->t;
	coord_reply_buf(call, zs_enc_tasks(v, m, &b), &b);
	pthread_mutex_unlock(&c->mu);
	free(v);
}

/* A server's report of a task: what it did, and how it went. */
struct task_report {
	struct zs_task t;
	uint64_t sid, bytes;
	enum zs_status code;
	bool ok;
	char why[256];
};

/* A server's snapshot of pending checkpoint k of job j is durable, or
 * failed: recorded (committed once every server of the job has it), and
 * the call answered (caller holds c->mu). */
static void snapshot_done(struct coord *c, struct zs_rpc_call *call, struct zs_job *j,
			  struct zs_checkpoint *k, const struct task_report *r)
{
	struct zs_error e = {0};
	struct zs_checkpoint nk;
	const uint64_t *ids = NULL;
	uint32_t n_ids = 0;
	uint64_t *durable = NULL;
	const bool ours = coord_ckpt_of(k, j);
	enum zs_ck_take take;

	if (ours && k->state == ZS_CKPT_PENDING &&
	    (!coord_job_servers(c, j, &ids, &n_ids) ||
	     !(durable = malloc((k->n_durable + 1) * sizeof *durable))))
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	/* the durable list is kept sorted: each report costs a search, the
	 * commit a merge with the job's servers, whatever their number
	 * (ids[256] once committed a checkpoint of a job over more than 256
	 * servers without the 257th) */
	if (ours)
		zs_ck_sort_durable(k->durable, k->n_durable);
	take = zs_ck_snapshot_report(k, ours, ids, n_ids, r->sid, r->ok, durable);
	if (take != ZS_CK_DURABLE && take != ZS_CK_COMMIT) {
		free(durable);
		durable = NULL;
	}
	switch (take) {
	case ZS_CK_NOT_PENDING:
		return zs_rpc_fail(call, ZS_ESTATE, "checkpoint %llu of job '%s' is not pending%s",
				   (unsigned long long)r->t.id, r->t.job,
				   k && !ours ? " (an earlier job's of the name)" : "");
	case ZS_CK_AGAIN: /* counted once (model/commit.c) */
		return coord_reply_ckpt(call, k);
	case ZS_CK_NOT_HOLDER:
		return zs_rpc_fail(call, ZS_ESTATE,
				   "server %llu holds no shard of job '%s': its snapshot does not count",
				   (unsigned long long)r->sid, r->t.job);
	default:
		break;
	}
	nk = *k;
	if (take == ZS_CK_FAILED) {
		char who[ZS_ADDR_MAX + 32];
		nk.state = ZS_CKPT_FAILED;
		zs_fmt(nk.error, sizeof nk.error, "%s: %s",
		       coord_server_name(c, r->sid, who, sizeof who), r->why);
	} else {
		nk.durable = durable;
		nk.n_durable = k->n_durable + 1;
		nk.bytes += r->bytes;
		if (take == ZS_CK_COMMIT)
			nk.state = ZS_CKPT_COMMITTED; /* every server durable */
	}
	/* fault injection for the crash tests: die before recording it */
	if (nk.state == ZS_CKPT_COMMITTED && zs_fault("coord-before-commit")) {
		zs_error("fault injection: dying at coord-before-commit");
		raise(SIGKILL);
	}
	if (coord_save_ckpt(c, &nk, false, &e)) {
		if (nk.durable != k->durable)
			free(nk.durable);
		return coord_reply_err(call, &e);
	}
	if (nk.durable != k->durable)
		free(k->durable);
	*k = nk;
	c->task_gen++;
	if (k->state != ZS_CKPT_PENDING) {
		coord_metrics_ckpt(c, k->state == ZS_CKPT_COMMITTED,
				   (double)(zs_wall_ms() - k->created_ms) * 1e-3);
		zs_info("job '%s': checkpoint %llu of step %llu %s%s%s", k->job,
			(unsigned long long)k->id, (unsigned long long)k->step,
			zs_ckpt_state_name(k->state), k->error[0] ? ": " : "", k->error);
	}
	coord_reply_ckpt(call, k);
	if (k->state == ZS_CKPT_COMMITTED)
		coord_enforce_keep(c, j);
	else if (k->state == ZS_CKPT_FAILED)
		coord_prune_failed(c, j);
}

/* The restore of job j is over (r: the last server's report, or the
 * first failed one): recorded. True when checkpoint k itself is bad
 * (its records failed their checksum or are gone): not the server's
 * moment, the caller falls back to an earlier one. */
static bool restore_over(struct coord *c, struct zs_job *j, const struct zs_checkpoint *k,
			 const struct task_report *r)
{
	struct zs_error e = {0};
	bool bad = false;

	if (!r->ok) {
		char who[ZS_ADDR_MAX + 32];
		zs_fmt(j->restore_error, sizeof j->restore_error, "%s: %s",
		       coord_server_name(c, r->sid, who, sizeof who), r->why);
		bad = zs_ck_restore_report(false, r->code, r->t.id,
					   k && k->state == ZS_CKPT_COMMITTED, 0) == ZS_CKR_BAD;
	} else if (r->t.id == ZS_CKPT_RESET) { /* from step 0, fresh */
		j->restored_id = 0;
		j->restored_step = 0;
	} else {
		j->restored_id = r->t.id;
		j->restored_step = r->t.step;
	}
	if (r->ok) {
		/* the world the job has now goes on from the step restored (a
		 * resize named past it comes forward; the servers forgot the
		 * ended timeline's changes, the trainers say these again) */
		uint32_t w = zs_world_last(&j->spec, &j->worlds);
		j->worlds.n = 0;
		if (w != j->spec.world_size)
			zs_worlds_add(&j->worlds, j->restored_step, w);
	}
	j->restore_pending = 0;
	/* every copy holds the checkpoint's state now */
	for (uint32_t q = 0; r->ok && q < j->placement.n_shards; q++)
		j->placement.shards[q].fresh = 0;
	if (coord_save_job(c, j, false, false, &e))
		zs_error("cannot record the restore of job '%s': %s", j->spec.name, e.msg);
	zs_info("job '%s': restore of checkpoint %llu %s%s", j->spec.name,
		(unsigned long long)r->t.id, r->ok ? "done" : "failed: ", r->ok ? "" : r->why);
	return bad;
}

/* A restore or delete task: this server struck off it, the task gone when
 * none is left (a restore's end recorded); true when the restored
 * checkpoint is bad (restore_over). */
static bool task_strike(struct coord *c, struct zs_job *j, const struct zs_checkpoint *k,
			const struct task_report *r)
{
	bool bad = false;

	for (struct ctask **pp = &c->ck.tasks; *pp; pp = &(*pp)->next) {
		struct ctask *ct = *pp;
		if (ct->t.kind != r->t.kind || ct->t.id != r->t.id || strcmp(ct->t.job, r->t.job))
			continue;
		for (uint32_t q = 0; q < ct->n_pending; q++)
			if (ct->pending[q] == r->sid)
				ct->pending[q--] = ct->pending[--ct->n_pending];
		if (r->t.kind == ZS_TASK_RESTORE && j && (!r->ok || ct->n_pending == 0)) {
			bad = restore_over(c, j, k, r);
			ct->n_pending = 0;
		}
		if (ct->n_pending == 0) {
			*pp = ct->next;
			coord_ctask_free(ct);
			c->task_gen++;
		}
		break;
	}
	return bad;
}

void coord_h_task_done(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct task_report r;
	struct zs_checkpoint *k;
	struct zs_job *j;

	if (zs_dec_task_done(p, n, &r.sid, &r.t, &r.code, r.why, sizeof r.why, &r.bytes, &e))
		return coord_reply_err(call, &e);
	r.ok = r.code == ZS_OK;
	pthread_mutex_lock(&c->mu);
	j = coord_find_job(c, r.t.job);
	k = coord_find_ckpt(c, r.t.job, r.t.id);
	if (r.t.kind == ZS_TASK_SNAPSHOT) {
		snapshot_done(c, call, j, k, &r);
	} else {
		bool bad = task_strike(c, j, k, &r);
		if (k) {
			coord_reply_ckpt(call, k);
		} else {
			struct zs_checkpoint gone = {.id = r.t.id, .step = r.t.step};
			snprintf(gone.job, sizeof gone.job, "%s", r.t.job);
			coord_reply_ckpt(call, &gone);
		}
		if (bad)
			fall_back(c, j, k, r.sid, r.why);
	}
	pthread_mutex_unlock(&c->mu);
}

/* A restore that was in flight when the coordinator stopped: its task
 * again, for the servers to take. */
enum zs_status coord_resume_restores(struct coord *c, struct zs_error *err)
{
	for (size_t i = 0; i < c->n_jobs; i++) {
		struct zs_checkpoint *k = coord_find_ckpt(c, c->jobs[i].spec.name,
						    c->jobs[i].restore_pending);
		bool reset = c->jobs[i].restore_pending == ZS_CKPT_RESET;
		if ((reset || (c->jobs[i].restore_pending && k)) &&
		    coord_add_ctask(c, &c->jobs[i], ZS_TASK_RESTORE, c->jobs[i].restore_pending,
				    reset ? 0 : k->step))
			return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	return ZS_OK;
}

void coord_ctasks_free(struct coord *c)
{
	while (c->ck.tasks) {
		struct ctask *t = c->ck.tasks;
		c->ck.tasks = t->next;
		coord_ctask_free(t);
	}
}

/* A rollback: the job back to its latest committed checkpoint (or a
 * reset), carried out by the servers as a restore task. */
enum zs_status coord_rollback(struct coord *c, struct zs_job *j, uint64_t lost_server,
			      const char *why)
{
	struct zs_checkpoint *k;
	struct zs_error e = {0};
	struct zs_job old = *j;
	uint64_t id, step;

	if (j->restore_pending) {
		/* already going back: a server that lost its shards meanwhile
		 * (restored them, then restarted) must restore them again */
		for (struct ctask *t = c->ck.tasks; lost_server && t; t = t->next) {
			bool there = false;
			uint64_t *g;
			if (t->t.kind != ZS_TASK_RESTORE || strcmp(t->t.job, j->spec.name))
				continue;
			for (uint32_t q = 0; q < t->n_pending; q++)
				there |= t->pending[q] == lost_server;
			if (there || !(g = realloc(t->pending, (t->n_pending + 1) * sizeof *g)))
				break;
			t->pending = g;
			t->pending[t->n_pending++] = lost_server;
			c->task_gen++;
			break;
		}
		zs_info("job '%s': %s, during its rollback (which goes on)", j->spec.name, why);
		return ZS_OK;
	}
	/* the newest committed of its own; none yet: the one an operator
	 * restored it from (model/commit.c) */
	id = zs_ck_way_back(c->ck.list, c->ck.n, j->spec.name, j->incarnation, j->restored_id);
	k = id == ZS_CKPT_RESET ? NULL : coord_find_ckpt(c, j->spec.name, id);
	step = k ? k->step : 0;
	coord_mark_restore(c, j, id);
	zs_fmt(j->rollback_reason, sizeof j->rollback_reason, "%s", why);
	if (coord_save_job(c, j, false, false, &e)) {
		*j = old;
		zs_error("job '%s': %s, but the rollback cannot be recorded: %s", j->spec.name, why,
			 e.msg);
		return e.code;
	}
	{
		char w[96];
		zs_fmt(w, sizeof w, "the job rolled back to step %llu before it was durable",
		       (unsigned long long)step);
		coord_fail_pending(c, j, w);
	}
	coord_metrics_event(c, COORD_EV_ROLLBACK);
	if (coord_add_ctask(c, j, ZS_TASK_RESTORE, id, step)) {
		zs_error("job '%s': out of memory queueing its rollback", j->spec.name);
		return ZS_ENOMEM;
	}
	/* (k may have moved: failed checkpoints were pruned above) */
	if (id != ZS_CKPT_RESET)
		zs_warn("job '%s': %s: rolling back to checkpoint %llu (step %llu)", j->spec.name,
			why, (unsigned long long)id, (unsigned long long)step);
	else
		zs_warn("job '%s': %s, and it has no committed checkpoint: it starts again from step 0",
			j->spec.name, why);
	return ZS_OK;
}
