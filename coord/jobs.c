/*
 * jobs.c - jobs: create, show, list, delete; the ZeRO stage; placement and
 * rebalancing; trainers joining and leaving; the coordinator's status.
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "coord/recovery.h"
#include "coord/session.h"

#include <sys/random.h>

#include "ctrl/token.h"
#include "model/spec_json.h"

/* ------------------------------------------------------------------ jobs */

/* Creates the job whose spec is in job->spec (taken over) and answers. */
static void create(struct coord *c, struct zs_rpc_call *call, struct zs_job *jobp)
{
	struct zs_job job = *jobp;
	struct zs_error e = {0};
	struct place_server *ps;
	struct zs_job *g;
	size_t n_live;

	if (zs_job_spec_normalize(&job.spec, &e)) {
		zs_job_release(&job);
		return coord_reply_err(call, &e);
	}
	if (c->cfg.data_tls) /* the cluster's: every job's tcp data plane encrypted */
		job.spec.data_tls = true;
	pthread_mutex_lock(&c->mu);
	if (coord_find_job(c, job.spec.name)) {
		zs_fail(&e, ZS_EEXIST, "job '%s' already exists", job.spec.name);
		goto fail;
	}
	ps = malloc((c->n_srvs ? c->n_srvs : 1) * sizeof *ps);
	if (!ps) {
		zs_fail(&e, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	n_live = coord_live_servers(c, NULL, ps);
	if (place_job(&job.spec, ps, n_live, NULL, &job.placement, &e)) {
		free(ps);
		goto fail;
	}
	free(ps);
	job.created_ms = zs_wall_ms();
	coord_new_token(job.token); /* a job created again under this name gets another */
	job.incarnation = coord_new_incarnation(); /* and so does its identity */
	g = realloc(c->jobs, (c->n_jobs + 1) * sizeof *g);
	if (!g) {
		zs_fail(&e, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	c->jobs = g;
	if (coord_save_job(c, &job, false, true, &e))
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
	zs_info("job '%s' created: stage %u, R=%u, %u units, %llu elements, %u shards on %zu servers (epoch %llu)%s",
		job.spec.name, job.spec.stage, job.spec.world_size,
		job.spec.layout.n_units,
		(unsigned long long)zs_layout_numel(&job.spec.layout),
		job.placement.n_shards, n_live,
		(unsigned long long)job.placement.epoch,
		job.spec.data_tls ? ", its tcp data plane encrypted" : "");
	coord_reply_job(call, &job);
	pthread_mutex_unlock(&c->mu);
	return;
fail:
	pthread_mutex_unlock(&c->mu);
	zs_job_release(&job);
	coord_reply_err(call, &e);
}

void coord_h_create_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct zs_job job = {0};
	struct zs_error e = {0};

	if (zs_dec_create_job(p, n, &job.spec, &e))
		return coord_reply_err(call, &e);
	create(ctx, call, &job);
}

void coord_h_create_job_json(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct zs_job job = {0};
	struct zs_error e = {0};
	char *json = NULL;

	if (zs_dec_create_job_json(p, n, &json, &e))
		return coord_reply_err(call, &e);
	if (zs_spec_from_json(json, &job.spec, &e)) {
		free(json);
		if (strncmp(e.msg, "job spec", 8) && strncmp(e.msg, "a job spec", 10))
			zs_error_prefix(&e, "job spec"); /* said once */
		return coord_reply_err(call, &e);
	}
	free(json);
	create(ctx, call, &job);
}

/* Decodes a job name and finds the job; on failure the call is answered. */
struct zs_job *coord_lookup(struct coord *c, struct zs_rpc_call *call,
			     const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX])
{
	struct zs_error e = {0};

	if (zs_dec_job_name(p, n, name, &e)) {
		coord_reply_err(call, &e);
		return NULL;
	}
	return coord_job_or_fail(c, call, name);
}

void coord_h_get_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_job *j;
	struct zs_buf b;
	unsigned flags;

	if (zs_dec_job_request(p, n, name, &flags, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (j && (flags & ZS_JR_TOKEN) && coord_role_gathers_only(call)) {
		/* a reader's or an operator's: the reader token, which opens
		 * gathers alone (neither may change a job's parameters) */
		struct zs_job v = *j;
		zs_reader_token(j->token, v.token);
		v.token_reader = true;
		coord_reply_buf(call, zs_enc_job(&v, &b), &b);
		explicit_bzero(v.token, sizeof v.token);
	} else if (j && (flags & ZS_JR_TOKEN)) { /* an observer's: the whole job, token included */
		coord_reply_buf(call, zs_enc_job(j, &b), &b);
	} else if (j) {
		coord_reply_job(call, j);
	}
	pthread_mutex_unlock(&c->mu);
}

void coord_h_jobs(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_buf b;
	enum zs_status st;

	(void)p;
	(void)n;
	pthread_mutex_lock(&c->mu);
	{ /* a listing: the jobs without their data-plane tokens */
		struct zs_job *v = malloc((c->n_jobs ? c->n_jobs : 1) * sizeof *v);
		st = v ? ZS_OK : ZS_ENOMEM;
		for (size_t i = 0; v && i < c->n_jobs; i++) {
			v[i] = c->jobs[i];
			v[i].token[0] = '\0';
		}
		if (v)
			st = zs_enc_jobs(v, (uint32_t)c->n_jobs, &b);
		free(v);
	}
	pthread_mutex_unlock(&c->mu);
	coord_reply_buf(call, st, &b);
}


void coord_h_delete_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			 size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_job *j;
	uint32_t deleted, kept;
	unsigned flags;
	struct zs_buf b;

	if (zs_dec_job_request(p, n, name, &flags, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (!j)
		goto out;
	/* the job first (so that a crash between leaves checkpoints that no
	 * job of the name sees, never a job without some of its own) */
	if (coord_save_job(c, j, true, true, &e)) {
		coord_reply_err(call, &e);
		goto out;
	}
	coord_job_deleted(c, j, flags & ZS_JR_KEEP_CKPTS, &deleted, &kept);
	{
		struct zs_job v = *j;
		v.token[0] = '\0';
		coord_reply_buf(call, zs_enc_job_deleted(&v, deleted, kept, &b), &b);
	}
	coord_drop_reports(c, name);
	coord_steps_forget(c, name);
	coord_drop_comm(c, name);
	coord_drop_readers(c, name);
	coord_drop_norms_done(c, name);
	coord_norms_fail_job(c, name, "the job was deleted");
	zs_info("job '%s' deleted (%u trainers were joined); %u of its checkpoints deleted, %u kept",
		name, j->n_trainers, deleted, kept);
	zs_job_release(j);
	/* keep jobs in name order, as they load from the catalog */
	memmove(j, j + 1, (size_t)(c->jobs + c->n_jobs - (j + 1)) * sizeof *j);
	c->n_jobs--;
out:
	pthread_mutex_unlock(&c->mu);
}

void coord_h_set_stage(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_job *j;
	uint32_t stage, old;

	if (zs_dec_set_stage(p, n, name, &stage, &e))
		return coord_reply_err(call, &e);
	if (stage < 1 || stage > 3)
		return zs_rpc_fail(call, ZS_EINVAL, "stage %u is invalid (1, 2 or 3)",
				   stage);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (!j)
		goto out;
	old = j->spec.stage;
	j->spec.stage = stage;
	if (coord_save_job(c, j, false, false, &e)) {
		j->spec.stage = old;
		coord_reply_err(call, &e);
		goto out;
	}
	if (old != stage)
		zs_info("job '%s': stage %u -> %u (from the next step boundary)",
			name, old, stage);
	coord_reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
}

void coord_h_rebalance(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_error e = {0};
	struct zs_placement np;
	struct place_server *ps;
	struct zs_placement old;
	struct zs_job *j, was;
	uint64_t *want = NULL, carry;
	uint32_t n_want = 0;
	size_t n_live;

	if (zs_dec_rebalance(p, n, name, &want, &n_want, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (!j)
		goto out;
	for (uint32_t i = 0; i < n_want; i++) {
		struct srv *sv = coord_find_srv(c, want[i]);
		if (!sv || !zs_mbr_up(&sv->m)) {
			zs_rpc_fail(call, ZS_EINVAL, "server %llu is %s", (unsigned long long)want[i],
				    sv ? "down" : "not registered");
			goto out;
		}
	}
	if (j->n_trainers) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "job '%s' has %u joined trainers: stop it first (zshardctl job stop %s), then rebalance",
			    name, j->n_trainers, name);
		goto out;
	}
	if (j->restore_pending) {
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' is being restored: rebalance after that", name);
		goto out;
	}
	/* the state the job has goes with it, as a checkpoint of that very
	 * state restored onto the new placement: never dropped */
	if ((carry = coord_state_checkpoint(c, j, call)) == UINT64_MAX)
		goto out;
	ps = malloc((c->n_srvs ? c->n_srvs : 1) * sizeof *ps);
	if (!ps) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	n_live = coord_live_servers(c, j, ps);
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
		coord_reply_err(call, &e);
		goto out;
	}
	free(ps);
	if (np.epoch == j->placement.epoch) {
		zs_placement_release(&np);
		coord_reply_job(call, j);
		goto out;
	}
	old = j->placement;
	was = *j;
	j->placement = np;
	if (carry)
		coord_mark_restore(c, j, carry);
	if (coord_save_job(c, j, false, true, &e)) {
		*j = was;
		zs_placement_release(&np);
		coord_reply_err(call, &e);
		goto out;
	}
	zs_placement_release(&old);
	zs_info("job '%s' rebalanced over %zu servers: epoch %llu", name, n_live,
		(unsigned long long)j->placement.epoch);
	if (carry) {
		struct zs_checkpoint *k = coord_find_ckpt(c, name, carry);
		if (coord_add_ctask(c, j, ZS_TASK_RESTORE, carry, k ? k->step : 0))
			zs_error("job '%s': out of memory queueing the restore of its state", name);
		else
			zs_info("job '%s': its state moves to the new placement (checkpoint %llu, step %llu)",
				name, (unsigned long long)carry,
				(unsigned long long)(k ? k->step : 0));
	}
	coord_reply_job(call, j);
out:
	pthread_mutex_unlock(&c->mu);
	free(want);
}

void coord_h_join(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_join_req r;
	struct zs_error e = {0};
	struct zs_member *nt;
	struct zs_job *j;
	char why[ZS_ERRMSG_MAX / 2];
	uint32_t pos;

	if (zs_dec_join(p, n, &r, &e))
		return coord_reply_err(call, &e);
	if (r.layout.n_units && zs_layout_validate(&r.layout, &e)) {
		zs_layout_release(&r.layout);
		return zs_rpc_fail(call, ZS_EINVAL, "trainer's layout is invalid: %s",
				   e.msg);
	}
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, r.job);
	if (!j)
		goto out;
	if (r.rank >= coord_world_now(c, j)) {
		zs_rpc_fail(call, ZS_EINVAL, "rank %u is out of range: job '%s' has world size %u",
			    r.rank, r.job, coord_world_now(c, j));
		goto out;
	}
	if (r.layout.n_units &&
	    !zs_layout_equal(&r.layout, &j->spec.layout, why, sizeof why)) {
		zs_rpc_fail(call, ZS_EINVAL, "layout differs from job '%s': %s", r.job,
			    why);
		goto out;
	}
	if (!r.layout.n_units && r.layout_digest &&
	    r.layout_digest != zs_layout_digest(&j->spec.layout)) {
		zs_rpc_fail(call, ZS_EINVAL,
			    "layout differs from job '%s' (digest %016llx, the job's %016llx): was the job deleted and created again with another model?",
			    r.job, (unsigned long long)r.layout_digest,
			    (unsigned long long)zs_layout_digest(&j->spec.layout));
		goto out;
	}
	for (pos = 0; pos < j->n_trainers && j->trainers[pos].rank < r.rank; pos++)
		;
	if (pos < j->n_trainers && j->trainers[pos].rank == r.rank) {
		if (r.session && j->trainers[pos].session == r.session) {
			coord_reply_join(c, call, j); /* this trainer's join, sent again */
			goto out;
		}
		if (j->trainers[pos].session)
			zs_rpc_fail(call, ZS_EEXIST,
				    "rank %u already joined job '%s' (from %s); it must leave first, or its lease lapse (%u ms without a heartbeat)",
				    r.rank, r.job, j->trainers[pos].host, c->cfg.trainer_lease_ms);
		else
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
	if (!j->n_trainers && (j->leaving_step || j->stop_before)) {
		/* a new run: what the last one's ranks agreed on is done */
		struct zs_job old = *j;
		j->leaving_step = 0;
		j->stop_before = 0;
		if (coord_save_job(c, j, false, false, &e)) {
			*j = old;
			free(nt);
			coord_reply_err(call, &e);
			goto out;
		}
	}
	nt[pos] = (struct zs_member){.rank = r.rank, .joined_ms = zs_wall_ms(),
				     .session = r.session};
	zs_live_joined(&nt[pos].live, zs_now_ms());
	snprintf(nt[pos].host, sizeof nt[pos].host, "%s", r.host);
	/* the trainer's own record: a join commits O(1) bytes */
	if (coord_save_member(c, j, &nt[pos], false, &e)) {
		free(nt);
		coord_reply_err(call, &e);
		goto out;
	}
	free(j->trainers);
	j->trainers = nt;
	j->n_trainers++;
	zs_info("job '%s': rank %u joined from %s (%u of %u)", r.job, r.rank,
		r.host[0] ? r.host : "?", j->n_trainers, coord_world_now(c, j));
	coord_reply_join(c, call, j);
out:
	pthread_mutex_unlock(&c->mu);
	zs_layout_release(&r.layout);
}

void coord_h_status(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		     size_t n)
{
	struct coord *c = ctx;
	struct zs_coord_status s = {0};
	struct zs_buf b;

	(void)p;
	(void)n;
	snprintf(s.version, sizeof s.version, "%s", ZS_VERSION);
	snprintf(s.addr, sizeof s.addr, "%s", c->cfg.adv);
	snprintf(s.data_dir, sizeof s.data_dir, "%s", c->cfg.data_dir);
	snprintf(s.metrics_addr, sizeof s.metrics_addr, "%s", coord_metrics_addr(c));
	pthread_mutex_lock(&c->mu);
	s.uptime_ms = zs_now_ms() - c->started_ms;
	s.lease_ms = c->cfg.lease_ms;
	for (size_t i = 0; i < c->n_srvs; i++)
		zs_mbr_up(&c->srvs[i].m) ? s.servers_up++ : s.servers_down++;
	s.jobs = (uint32_t)c->n_jobs;
	s.assign_gen = c->assign_gen;
	pthread_mutex_unlock(&c->mu);
	coord_reply_buf(call, zs_enc_coord_status(&s, &b), &b);
}
