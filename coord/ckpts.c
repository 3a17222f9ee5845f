/*
 * ckpts.c - checkpoints in the catalog: create, list, get, delete,
 * trainer blobs, restore; what a job keeps of them (keep_checkpoints, the
 * failed ones) and what its deletion does to them. The tasks servers
 * carry them out by, and the commit, are in ckpt_tasks.c.
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "coord/recovery.h"
#include "coord/session.h"

/*
 * Forgets checkpoint k of job j (NULL: a job gone): the catalog first
 * (failing that, nothing changes), then a delete task for the servers of
 * the placement it was taken on, then memory. The record moves into *gone
 * (the caller releases it).
 */
enum zs_status coord_forget_ckpt(struct coord *c, struct zs_job *j, struct zs_checkpoint *k,
				 struct zs_checkpoint *gone, struct zs_error *err)
{
	size_t i = (size_t)(k - c->ck.list);
	enum zs_status st = coord_save_ckpt(c, k, true, err);
	const struct zs_placement *pl = k->placement.n_shards ? &k->placement
				       : j			 ? &j->placement
								 : NULL;

	if (st)
		return st;
	if (!pl)
		zs_warn("job '%s': checkpoint %llu forgotten; where its records are is not known (a record from before checkpoints kept their placement): its servers keep them",
			k->job, (unsigned long long)k->id);
	else if (coord_add_ctask_on(c, k->job, pl, ZS_TASK_DELETE, k->id, k->step))
		zs_warn("job '%s': checkpoint %llu forgotten, but its servers could not be told to drop it (out of memory)",
			k->job, (unsigned long long)k->id);
	*gone = *k;
	memmove(k, k + 1, (c->ck.n - i - 1) * sizeof *k);
	c->ck.n--;
	return ZS_OK;
}

/* How many committed checkpoints of j are newer than id. */
static uint32_t newer_committed(const struct coord *c, const struct zs_job *j, uint64_t id)
{
	uint32_t n = 0;

	for (size_t i = 0; i < c->ck.n; i++)
		n += coord_ckpt_of(&c->ck.list[i], j) && c->ck.list[i].state == ZS_CKPT_COMMITTED &&
		     c->ck.list[i].id > id;
	return n;
}

/*
 * Retires the committed checkpoints of j that keep_checkpoints newer ones
 * follow and that no weight reader pins (one a reader pins goes at the
 * first enforcement after it is let go: a commit, or that reader's next
 * call), and every failed one older than the newest committed (kept until
 * then so that an operator sees why it failed): the catalog forgets each,
 * and a delete task removes what the servers wrote of it.
 */
void coord_enforce_keep(struct coord *c, struct zs_job *j)
{
	uint64_t newest = 0;

	for (size_t i = 0; i < c->ck.n; i++)
		if (coord_ckpt_of(&c->ck.list[i], j) && c->ck.list[i].state == ZS_CKPT_COMMITTED)
			newest = c->ck.list[i].id > newest ? c->ck.list[i].id : newest;
	for (size_t i = 0; i < c->ck.n;) {
		struct zs_checkpoint *k = &c->ck.list[i], gone;
		struct zs_error e = {0};
		bool old = k->state == ZS_CKPT_COMMITTED && coord_ckpt_of(k, j) &&
			   newer_committed(c, j, k->id) >= j->spec.keep_checkpoints &&
			   !coord_reader_holds(c, j->spec.name, ZS_VERSION_CKPT | k->id);
		bool failed = k->state == ZS_CKPT_FAILED && k->id < newest;
		if (!coord_ckpt_of(k, j) || !(old || failed)) {
			i++;
			continue;
		}
		if (coord_forget_ckpt(c, j, k, &gone, &e)) {
			zs_warn("cannot retire checkpoint %llu of job '%s': %s",
				(unsigned long long)k->id, k->job, e.msg);
			return;
		}
		if (old)
			zs_info("job '%s': checkpoint %llu retired (keeping %u)", gone.job,
				(unsigned long long)gone.id, j->spec.keep_checkpoints);
		else
			zs_info("job '%s': failed checkpoint %llu pruned (%llu committed since)",
				gone.job, (unsigned long long)gone.id, (unsigned long long)newest);
		zs_checkpoint_release(&gone);
	}
}

/* A checkpoint without its placement: what a call that changes it gets */
void coord_job_deleted(struct coord *c, struct zs_job *j, bool keep, uint32_t *deleted,
		       uint32_t *kept)
{
	*deleted = *kept = 0;
	/* a restore still to carry out would restore a later job of the name */
	for (struct ctask **pp = &c->ck.tasks; *pp;) {
		struct ctask *t = *pp;
		if (t->t.kind != ZS_TASK_RESTORE || strcmp(t->t.job, j->spec.name)) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		coord_ctask_free(t);
		c->task_gen++;
	}
	if (keep)
		coord_fail_pending(c, j, "the job was deleted");
	for (size_t i = 0; i < c->ck.n;) {
		struct zs_checkpoint *k = &c->ck.list[i], gone;
		struct zs_error e = {0};
		if (!coord_ckpt_of(k, j) || (keep && k->state == ZS_CKPT_COMMITTED)) {
			*kept += coord_ckpt_of(k, j);
			i++;
			continue;
		}
		if (coord_forget_ckpt(c, j, k, &gone, &e)) {
			zs_warn("job '%s' deleted, but its checkpoint %llu cannot be: %s (it stays, out of any later job's reach)",
				k->job, (unsigned long long)k->id, e.msg);
			(*kept)++;
			i++;
			continue;
		}
		*deleted += gone.state == ZS_CKPT_COMMITTED;
		zs_checkpoint_release(&gone);
	}
}

/* A job keeps this many failed checkpoints at most (the newest: an
 * operator sees why they failed); older ones are pruned even before a
 * checkpoint commits, so a disk full while trainers restart cannot grow
 * the catalog without bound. */
#define KEEP_FAILED 8

void coord_prune_failed(struct coord *c, struct zs_job *j)
{
	uint32_t failed = 0;

	for (size_t i = 0; i < c->ck.n; i++)
		failed += coord_ckpt_of(&c->ck.list[i], j) && c->ck.list[i].state == ZS_CKPT_FAILED;
	for (size_t i = 0; failed > KEEP_FAILED && i < c->ck.n;) {
		struct zs_checkpoint *k = &c->ck.list[i], gone;
		struct zs_error e = {0};
		if (!coord_ckpt_of(k, j) || k->state != ZS_CKPT_FAILED) {
			i++;
			continue;
		}
		if (coord_forget_ckpt(c, j, k, &gone, &e)) {
			zs_warn("cannot prune failed checkpoint %llu of job '%s': %s",
				(unsigned long long)k->id, k->job, e.msg);
			return;
		}
		zs_info("job '%s': failed checkpoint %llu pruned (%u failed ones are kept)",
			gone.job, (unsigned long long)gone.id, KEEP_FAILED);
		zs_checkpoint_release(&gone);
		failed--;
	}
}

void coord_reply_ckpt(struct zs_rpc_call *call, const struct zs_checkpoint *k)
{
	struct zs_buf b;
	coord_reply_buf(call, coord_enc_ckpt_brief(k, &b), &b);
}

void coord_h_create_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint k = {0}, *g;
	struct zs_job *j;
	uint64_t step;

	if (zs_dec_ckpt_req(p, n, true, job, &step, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, job);
	if (!j)
		goto out;
	if (j->restore_pending) {
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' is being restored", job);
		goto out;
	}
	/* every rank may ask for the same step: one checkpoint (of this
	 * incarnation: an earlier job's of the name at that step is not it;
	 * and of this placement: one of the step taken before a rebalance
	 * has its records on the servers the job left, and zshardctl
	 * rebalance asks for one on the new ones) */
	for (size_t i = 0; i < c->ck.n; i++)
		if (coord_ckpt_of(&c->ck.list[i], j) && c->ck.list[i].step == step &&
		    c->ck.list[i].epoch == j->placement.epoch &&
		    c->ck.list[i].state != ZS_CKPT_FAILED) {
			coord_reply_ckpt(call, &c->ck.list[i]);
			goto out;
		}
	g = realloc(c->ck.list, (c->ck.n + 1) * sizeof *g);
	if (!g) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	c->ck.list = g;
	k.id = c->ck.next_id++;
	snprintf(k.job, sizeof k.job, "%s", job);
	k.step = step;
	k.world = zs_world_at(&j->spec, &j->worlds, step);
	k.incarnation = j->incarnation;
	k.layout_digest = zs_layout_digest(&j->spec.layout);
	k.epoch = j->placement.epoch;
	/* where its records are: every copy's server writes them */
	if (zs_placement_copy(&k.placement, &j->placement)) {
		c->ck.next_id--;
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	k.state = ZS_CKPT_PENDING;
	k.created_ms = zs_wall_ms();
	if (coord_save_ckpt_new(c, &k, &e)) {
		c->ck.next_id--;
		zs_checkpoint_release(&k);
		coord_reply_err(call, &e);
		goto out;
	}
	c->ck.list[c->ck.n++] = k;
	c->task_gen++;
	zs_info("job '%s': checkpoint %llu of step %llu requested", job, (unsigned long long)k.id,
		(unsigned long long)step);
	coord_reply_ckpt(call, &k);
out:
	pthread_mutex_unlock(&c->mu);
}

/* Checkpoint id of job, or NULL after failing call with ZS_ENOTFOUND
 * (caller holds mu). */
static struct zs_checkpoint *ckpt_or_fail(struct coord *c, struct zs_rpc_call *call,
					  const char *job, uint64_t id)
{
	struct zs_checkpoint *k = coord_find_ckpt(c, job, id);

	if (!k)
		zs_rpc_fail(call, ZS_ENOTFOUND, "job '%s' has no checkpoint %llu", job,
			    (unsigned long long)id);
	return k;
}

/* Forgets a checkpoint: the catalog first, then a delete task for the
 * servers of its placement (they cancel a capture still waiting for its
 * step and drop the records). */
void coord_h_delete_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint *k, gone;
	struct zs_job *j;
	uint64_t id;

	if (zs_dec_ckpt_req(p, n, false, job, &id, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	/* a checkpoint kept from a job deleted is deleted by its id alone */
	j = coord_find_job(c, job);
	k = ckpt_or_fail(c, call, job, id);
	if (!k)
		goto out;
	if (j && j->restore_pending == id) {
		zs_rpc_fail(call, ZS_ESTATE, "checkpoint %llu of job '%s' is being restored",
			    (unsigned long long)id, job);
		goto out;
	}
	if (coord_forget_ckpt(c, j, k, &gone, &e)) {
		coord_reply_err(call, &e);
		goto out;
	}
	zs_info("job '%s': checkpoint %llu of step %llu (%s%s) deleted", job,
		(unsigned long long)gone.id, (unsigned long long)gone.step,
		zs_ckpt_state_name(gone.state), coord_ckpt_of(&gone, j) ? "" : ", an earlier job's");
	coord_reply_ckpt(call, &gone);
	zs_checkpoint_release(&gone);
out:
	pthread_mutex_unlock(&c->mu);
}

void coord_h_get_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint *k;
	uint64_t id;

	if (zs_dec_ckpt_req(p, n, false, job, &id, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	k = ckpt_or_fail(c, call, job, id);
	if (k) { /* whole: a restore reads where its records are */
		struct zs_buf b;
		coord_reply_buf(call, zs_enc_checkpoint(k, &b), &b);
	}
	pthread_mutex_unlock(&c->mu);
}

void coord_h_list_ckpts(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint *v;
	uint32_t m = 0;
	struct zs_buf b;

	unsigned flags;
	struct zs_job *j;

	if (zs_dec_job_request(p, n, job, &flags, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	/* the job's own; with all, every one kept under the name, the
	 * job's and earlier incarnations' (no job of the name is needed) */
	j = flags & ZS_JR_ALL ? coord_find_job(c, job) : coord_job_or_fail(c, call, job);
	if (!j && !(flags & ZS_JR_ALL))
		goto out;
	v = malloc((c->ck.n ? c->ck.n : 1) * sizeof *v);
	if (!v) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < c->ck.n; i++)
		if (flags & ZS_JR_ALL ? !strcmp(c->ck.list[i].job, job)
				      : coord_ckpt_of(&c->ck.list[i], j)) {
			v[m] = c->ck.list[i]; /* shallow: encoded before anything changes */
			v[m++].placement = (struct zs_placement){0}; /* O(shards) each */
		}
	coord_reply_buf(call, zs_enc_checkpoints(v, m, &b), &b);
	free(v);
out:
	pthread_mutex_unlock(&c->mu);
}

void coord_h_put_blob(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_blob b;
	struct zs_checkpoint *k;
	struct zs_job *j;
	uint64_t id;

	if (zs_dec_put_blob(p, n, job, &id, &b, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, job);
	k = j ? ckpt_or_fail(c, call, job, id) : NULL;
	if (!k)
		goto out;
	if (!coord_ckpt_of(k, j)) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "checkpoint %llu is an earlier job's of the name '%s': job '%s' now is another",
			    (unsigned long long)id, job, job);
		goto out;
	}
	if (b.rank >= zs_world_at(&j->spec, &j->worlds, k->step)) {
		zs_rpc_fail(call, ZS_EINVAL, "rank %u is out of range (world size %u at step %llu)",
			    b.rank, zs_world_at(&j->spec, &j->worlds, k->step),
			    (unsigned long long)k->step);
		goto out;
	}
	/* the blob is a record of its own: the checkpoint's is not written */
	if (coord_save_blob(c, k, &b, &e)) {
		coord_reply_err(call, &e);
		goto out;
	}
	{
		uint32_t at = 0;
		while (at < k->n_blobs && k->blobs[at].rank < b.rank)
			at++;
		if (at < k->n_blobs && k->blobs[at].rank == b.rank) {
			free(k->blobs[at].data);
		} else {
			struct zs_blob *g = realloc(k->blobs, (k->n_blobs + 1) * sizeof *g);
			if (!g) { /* committed: a restart reads it back */
				zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
				goto out;
			}
			k->blobs = g;
			memmove(g + at + 1, g + at, (k->n_blobs - at) * sizeof *g);
			k->n_blobs++;
		}
		k->blobs[at] = b;
		b.data = NULL;
	}
	coord_reply_ckpt(call, k);
out:
	pthread_mutex_unlock(&c->mu);
	free(b.data);
}

void coord_h_restore(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_checkpoint *k;
	struct zs_job *j;
	uint64_t id;

	if (zs_dec_ckpt_req(p, n, false, job, &id, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, job);
	if (!j)
		goto out;
	/* latest: this incarnation's; one of an earlier job of the name
	 * (deleted, its checkpoints kept) only when asked for by its id */
	k = id ? coord_find_ckpt(c, job, id) : coord_latest_ckpt(c, j);
	if (!k) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "job '%s' has no %s checkpoint%s", job,
			    id ? "such" : "committed", id ? "" : " to restore");
		goto out;
	}
	bool earlier = !coord_ckpt_of(k, j);
	if (earlier && k->layout_digest != zs_layout_digest(&j->spec.layout)) {
		if (k->layout_digest)
			zs_rpc_fail(call, ZS_ESTATE,
				    "checkpoint %llu is an earlier job's of the name '%s', whose layout differs from this job's (digest %016llx, this job's %016llx): it cannot be restored here",
				    (unsigned long long)k->id, job, (unsigned long long)k->layout_digest,
				    (unsigned long long)zs_layout_digest(&j->spec.layout));
		else
			zs_rpc_fail(call, ZS_ESTATE,
				    "checkpoint %llu is an earlier job's of the name '%s', from before checkpoints recorded their layout: it cannot be checked against this job's, and is not restored",
				    (unsigned long long)k->id, job);
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
	struct zs_job old = *j;
	coord_mark_restore(c, j, k->id);
	if (coord_save_job(c, j, false, false, &e)) {
		*j = old;
		coord_reply_err(call, &e);
		goto out;
	}
	if (coord_add_ctask(c, j, ZS_TASK_RESTORE, k->id, k->step)) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	zs_info("job '%s': restoring checkpoint %llu (step %llu)%s", job, (unsigned long long)k->id,
		(unsigned long long)k->step,
		earlier ? ", an earlier job's of the name, asked for by its id (the same layout)" : "");
	coord_reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

struct zs_checkpoint *coord_latest_ckpt(struct coord *c, const struct zs_job *j)
{
	uint64_t id = zs_ck_way_back(c->ck.list, c->ck.n, j->spec.name, j->incarnation, 0);

	return id == ZS_CKPT_RESET ? NULL : coord_find_ckpt(c, j->spec.name, id);
}

void coord_fail_pending(struct coord *c, struct zs_job *j, const char *why)
{
	for (size_t i = 0; i < c->ck.n; i++) {
		struct zs_checkpoint *k = &c->ck.list[i], nk;
		struct zs_error e = {0};
		if (!coord_ckpt_of(k, j) || k->state != ZS_CKPT_PENDING)
			continue;
		nk = *k;
		nk.state = ZS_CKPT_FAILED;
		zs_fmt(nk.error, sizeof nk.error, "abandoned: %s", why);
		if (coord_save_ckpt(c, &nk, false, &e)) {
			zs_error("job '%s': cannot record checkpoint %llu as abandoned: %s",
				 j->spec.name, (unsigned long long)k->id, e.msg);
			continue;
		}
		*k = nk;
		c->task_gen++;
	}
	coord_prune_failed(c, j);
}

void coord_mark_restore(struct coord *c, struct zs_job *j, uint64_t id)
{
	/* a step's norms of the ended timeline never come whole: the servers
	 * waiting on them let their shards go to the restore now */
	coord_norms_fail_job(c, j->spec.name, "the job is going back to a checkpoint");
	coord_steps_forget(c, j->spec.name); /* a new timeline: no step to redo */
	j->restore_pending = id;
	j->restore_error[0] = '\0';
	j->timeline++;
	/* where ranks stopped, or are to stop, belongs to the ended timeline */
	j->stopped_step = 0;
	j->leaving_step = 0;
	j->stop_before = 0;
}
