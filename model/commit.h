/*
 * commit.h - a checkpoint's two-phase commit and a job's way back to one,
 * as pure decisions: no I/O, no lock, no clock. Which server's report on
 * a snapshot counts, when the checkpoint commits, which checkpoint a
 * rollback restores, and when a restore's failure condemns the checkpoint
 * (then the job falls back to an older one).
 *
 * The coordinator's shells are coord/ckpt_tasks.c and coord/ckpts.c; the
 * simulator's checkpoint world (sim/ckpt.c) runs the same functions under
 * servers and coordinators killed, records flipped on disk, reports sent
 * twice or late, and a job created again under its name.
 */
#ifndef ZS_MODEL_COMMIT_H
#define ZS_MODEL_COMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

/* Whether checkpoint k was taken by the job named name as it is now (its
 * incarnation): a job deleted and created again under the name has
 * another, and never sees, restores or rolls back to the earlier one's. */
bool zs_ck_of(const struct zs_checkpoint *k, const char *name, uint64_t incarnation);

/* What a server's report on its snapshot of a checkpoint does. */
enum zs_ck_take {
	ZS_CK_NOT_PENDING, /* committed, failed, or an earlier job's: refused */
	ZS_CK_AGAIN,       /* its durable report came before: counted once */
	ZS_CK_NOT_HOLDER,  /* it holds no shard of the job: it does not count */
	ZS_CK_FAILED,      /* it could not take it: the checkpoint fails */
	ZS_CK_DURABLE,     /* counted; another server of the job is still to come */
	ZS_CK_COMMIT,      /* counted, and every server of the job is durable */
};

/*
 * Server sid's report (ok: its snapshot is durable) on checkpoint k (ours:
 * of the job as it is now) of a job whose servers (every copy's) are
 * ids[0..n), sorted. For ZS_CK_DURABLE and ZS_CK_COMMIT, out (room for
 * k->n_durable + 1) is k's new durable list, sorted, sid in it. k's list
 * is read as sorted (zs_ck_sort_durable).
 */
enum zs_ck_take zs_ck_snapshot_report(const struct zs_checkpoint *k, bool ours,
				      const uint64_t *ids, uint32_t n, uint64_t sid, bool ok,
				      uint64_t *out);
/* Sorts a durable list (one recorded before they were kept sorted);
 * sorted already costs one pass. */
void zs_ck_sort_durable(uint64_t *v, uint32_t n);
/* Whether every server of ids (sorted) is in the sorted list durable. */
bool zs_ck_all_durable(const uint64_t *ids, uint32_t n, const uint64_t *durable, uint32_t nd);

/*
 * The checkpoint a rollback of the job named name (its incarnation;
 * restored_from: the checkpoint an operator restored it from, 0: none)
 * goes back to, among list[0..n) in the order they were taken: the newest
 * committed of its own; with none, restored_from when it is committed
 * (the job's state started there, an earlier job's of the name perhaps);
 * else ZS_CKPT_RESET (step 0, fresh).
 */
uint64_t zs_ck_way_back(const struct zs_checkpoint *list, size_t n, const char *name,
			uint64_t incarnation, uint64_t restored_from);

/* What a server's report on a restore does. */
enum zs_ck_restore {
	ZS_CKR_WAIT,   /* restored here; other servers still to report */
	ZS_CKR_DONE,   /* every server restored it: the job goes on from its step */
	ZS_CKR_FAILED, /* this server could not (its moment: the job waits for an operator) */
	ZS_CKR_BAD,    /* the checkpoint's records are bad (a checksum failed, a
			* record gone): it is marked failed and the job falls back */
};

/*
 * A server's report on the restore of checkpoint id (ZS_CKPT_RESET: a
 * reset): ok, or code (ZS_EIO: a record failed its checksum; ZS_ENOTFOUND:
 * a record is gone; anything else is the server's moment); committed: the
 * checkpoint is; left: the servers still to report after this one.
 */
enum zs_ck_restore zs_ck_restore_report(bool ok, enum zs_status code, uint64_t id,
					bool committed, uint32_t left);

#endif
