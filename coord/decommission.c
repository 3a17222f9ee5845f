/*
 * decommission.c - a shard server removed from the cluster for good
 * (zshardctl servers remove ID): its record leaves the catalog. Nothing may
 * still need it: it must be down (a live one would register again at its
 * next heartbeat), hold no job's shards (rebalance moves them off it), and
 * hold no records of checkpoints a rollback or a restore would read there
 * (zshardctl rebalance takes a checkpoint on the job's new servers; the
 * older ones are deleted, or dropped here when the operator says so). A
 * refusal names each job and checkpoint and what to do, and changes
 * nothing. Delete tasks pending on the server are struck off it.
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* Whether placement p puts a shard on server id. */
static bool on_server(const struct zs_placement *p, uint64_t id)
{
	for (uint32_t i = 0; p && i < p->n_shards; i++)
		if (p->shards[i].server_id == id)
			return true;
	return false;
}

/* Whether checkpoint k has records on server id: its own placement, else
 * (older records) its job's. */
static bool ckpt_on(struct coord *c, const struct zs_checkpoint *k, uint64_t id)
{
	const struct zs_job *j = coord_find_job(c, k->job);

	for (uint32_t i = 0; i < k->n_durable; i++)
		if (k->durable[i] == id)
			return true;
	return on_server(k->placement.n_shards ? &k->placement : j ? &j->placement : NULL, id);
}

/* names (cap bytes), ", "-joined, with "..." past it */
static void add_name(char *names, size_t cap, const char *what)
{
	size_t at = strlen(names);

	if (at + strlen(what) + 8 >= cap) {
		if (!strstr(names, "..."))
			snprintf(names + at, cap - at, ", ...");
		return;
	}
	snprintf(names + at, cap - at, "%s%s", at ? ", " : "", what);
}

/* Forgets server id for good: its catalog record, then memory (it leaves
 * c->srvs), and the tasks pending on it are struck off it (it reports
 * none of them). */
static enum zs_status forget_server(struct coord *c, uint64_t id, struct zs_error *err)
{
	enum zs_status st;

	if ((st = coord_delete_server(c, id, err)))
		return st;
	for (size_t i = 0; i < c->n_srvs; i++)
		if (c->srvs[i].info.id == id) {
			memmove(c->srvs + i, c->srvs + i + 1, (c->n_srvs - i - 1) * sizeof *c->srvs);
			c->n_srvs--;
			break;
		}
	for (struct ctask **pp = &c->ck.tasks; *pp;) {
		struct ctask *ct = *pp;
		for (uint32_t q = 0; q < ct->n_pending; q++)
			if (ct->pending[q] == id)
				ct->pending[q--] = ct->pending[--ct->n_pending];
		if (ct->n_pending == 0 && ct->t.kind == ZS_TASK_DELETE) {
			*pp = ct->next;
			coord_ctask_free(ct);
			c->task_gen++;
			continue;
		}
		pp = &ct->next;
	}
	return ZS_OK;
}

void coord_h_remove_server(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	char jobs[512] = "", ckpts[1024] = "", who[ZS_ADDR_MAX + 32];
	char **dropped = NULL;
	uint32_t n_dropped = 0;
	uint64_t id, *ids = NULL;
	size_t n_ids = 0;
	struct srv *s;
	bool drop;
	struct zs_buf b;

	if (zs_dec_remove_server(p, n, &id, &drop, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	s = coord_find_srv(c, id);
	if (!s) {
		zs_rpc_fail(call, ZS_ENOTFOUND, "server %llu is not registered (zshardctl servers lists them)",
			    (unsigned long long)id);
		goto out;
	}
	coord_server_name(c, id, who, sizeof who);
	if (zs_mbr_up(&s->m)) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "%s is up: stop its process first (its lease lapses %u ms later), then remove it",
			    who, c->cfg.lease_ms);
		goto out;
	}
	for (size_t i = 0; i < c->n_jobs; i++)
		if (on_server(&c->jobs[i].placement, id))
			add_name(jobs, sizeof jobs, c->jobs[i].spec.name);
	if (jobs[0]) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "%s holds shards of job(s) %s: move each off it first (zshardctl job stop JOB; zshardctl rebalance JOB --servers ID,...: its state moves, and a checkpoint is taken on its new servers), then remove it",
			    who, jobs);
		goto out;
	}
	if (!(ids = malloc((c->ck.n ? c->ck.n : 1) * sizeof *ids))) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < c->ck.n; i++) {
		const struct zs_checkpoint *k = &c->ck.list[i];
		const struct zs_job *j = coord_find_job(c, k->job);
		char what[ZS_JOB_NAME_MAX + 64];
		if (!ckpt_on(c, k, id))
			continue;
		if (j && j->restore_pending == k->id) {
			zs_rpc_fail(call, ZS_ESTATE,
				    "job '%s' is being restored from checkpoint %llu, whose records %s holds: start it again, or wait for the restore's end",
				    k->job, (unsigned long long)k->id, who);
			goto out;
		}
		snprintf(what, sizeof what, "%s checkpoint %llu (step %llu, %s)", k->job,
			 (unsigned long long)k->id, (unsigned long long)k->step,
			 zs_ckpt_state_name(k->state));
		add_name(ckpts, sizeof ckpts, what);
		ids[n_ids++] = k->id;
	}
	if (n_ids && !drop) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "%s holds records of %s: a rollback or a restore would read them there. zshardctl rebalance takes a checkpoint on a job's new servers; delete these (zshardctl checkpoint delete JOB ID), or remove the server with --drop-checkpoints to delete them with it",
			    who, ckpts);
		goto out;
	}
	if (n_ids && !(dropped = calloc(n_ids, sizeof *dropped))) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n_ids; i++) {
		struct zs_checkpoint *k = NULL, gone;
		for (size_t q = 0; q < c->ck.n && !k; q++)
			if (c->ck.list[q].id == ids[i] && ckpt_on(c, &c->ck.list[q], id))
				k = &c->ck.list[q];
		if (!k)
			continue;
		if (coord_forget_ckpt(c, coord_find_job(c, k->job), k, &gone, &e)) {
			coord_reply_err(call, &e);
			goto out;
		}
		dropped[n_dropped] = malloc(ZS_JOB_NAME_MAX + 64);
		if (dropped[n_dropped])
			snprintf(dropped[n_dropped++], ZS_JOB_NAME_MAX + 64,
				 "%s checkpoint %llu (step %llu)", gone.job,
				 (unsigned long long)gone.id, (unsigned long long)gone.step);
		zs_info("job '%s': checkpoint %llu of step %llu deleted with server %llu", gone.job,
			(unsigned long long)gone.id, (unsigned long long)gone.step,
			(unsigned long long)id);
		zs_checkpoint_release(&gone);
	}
	if (forget_server(c, id, &e)) {
		coord_reply_err(call, &e);
		goto out;
	}
	zs_info("%s removed from the cluster for good", who);
	coord_reply_buf(call, zs_enc_removed(dropped, n_dropped, &b), &b);
out:
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; i < n_dropped; i++)
		free(dropped[i]);
	free(dropped);
	free(ids);
}
