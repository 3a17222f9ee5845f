/*
 * ckpt.h - a job's checkpoints: the catalog's view and its commit
 * (ckpts.c), the servers' tasks that take, restore and delete them and a
 * rollback to the latest committed one (ckpt_tasks.c). Internal to
 * coord/.
 */
#ifndef ZS_COORD_CKPT_H
#define ZS_COORD_CKPT_H

#include "coord/state.h"
#include "model/commit.h"

/* ckpts.c */
/* Whether checkpoint k was taken by job j as it is now: its name and its
 * incarnation (a job deleted and created again under the name has
 * another, and never sees, restores or rolls back to the earlier one's). */
static inline bool coord_ckpt_of(const struct zs_checkpoint *k, const struct zs_job *j)
{
	return j && zs_ck_of(k, j->spec.name, j->incarnation); /* model/commit.c */
}

/* Forgets checkpoint k of job j (NULL: a job gone): the catalog first
 * (failing that, nothing changes), then a delete task for its servers,
 * then memory; the record moves into *gone (the caller releases it). */
enum zs_status coord_forget_ckpt(struct coord *c, struct zs_job *j, struct zs_checkpoint *k,
				 struct zs_checkpoint *gone, struct zs_error *err);

/* Job j is being deleted: its checkpoints go too (the catalog's records,
 * and delete tasks for their servers), or with keep its committed ones
 * stay (failed and pending ones go), reachable by id only; restores still
 * to carry out for its name are dropped. Counts what went and what stayed.
 * Caller holds mu. */
void coord_job_deleted(struct coord *c, struct zs_job *j, bool keep, uint32_t *deleted,
		       uint32_t *kept);

/* J's failed checkpoints beyond the newest few are pruned; its
 * committed ones beyond keep_checkpoints retired, and failed ones older
 * than its newest committed; a checkpoint's reply (without placement) */
void coord_prune_failed(struct coord *c, struct zs_job *j);
void coord_enforce_keep(struct coord *c, struct zs_job *j);
void coord_reply_ckpt(struct zs_rpc_call *call, const struct zs_checkpoint *k);

/* Fails j's pending checkpoints, saying why. */
void coord_fail_pending(struct coord *c, struct zs_job *j, const char *why);

/* Marks j as being restored to checkpoint id (ZS_CKPT_RESET: a reset): a
 * new timeline; its open steps' norm exchanges fail at once. The caller
 * commits it (and restores the old record if the commit fails), then
 * queues the restore task. */
void coord_mark_restore(struct coord *c, struct zs_job *j, uint64_t id);

/* The latest committed checkpoint of job j's incarnation (NULL: none). */
struct zs_checkpoint *coord_latest_ckpt(struct coord *c, const struct zs_job *j);

/* ckpt_tasks.c */
enum zs_status coord_add_ctask(struct coord *c, const struct zs_job *j, enum zs_task_kind kind,
				uint64_t id, uint64_t step);
void coord_ctask_free(struct ctask *t);

/* Every task dropped (the coordinator's end). */
void coord_ctasks_free(struct coord *c);

/* A restore that was in flight when the coordinator stopped: its task
 * again, for the servers to take (after coord_load). */
enum zs_status coord_resume_restores(struct coord *c, struct zs_error *err);

/* A task for every server holding shards in placement pl */
enum zs_status coord_add_ctask_on(struct coord *c, const char *job,
				  const struct zs_placement *pl, enum zs_task_kind kind,
				  uint64_t id, uint64_t step);

/* Whether server_id holds shards (any copy) of j. */
bool coord_holds(struct coord *c, const struct zs_job *j, uint64_t server_id);

/*
 * Rolls job j back to its latest committed checkpoint (or resets it, with
 * none): a restore task for its servers, its pending checkpoints abandoned,
 * its timeline advanced, committed before it returns. lost_server (0: none)
 * is a server that lost its shards: during a rollback already under way it
 * is asked to restore again. Caller holds mu.
 */
enum zs_status coord_rollback(struct coord *c, struct zs_job *j, uint64_t lost_server,
			      const char *why);

#endif
