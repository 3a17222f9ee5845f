/*
 * recovery.h - a member lost and what the job does: a replicated job's
 * failover and rebuilt copies (failover.c), trainer leases, a rollback or
 * a clean leave (recovery.c), a lost rank's redo (redo.c), the world
 * resized (resize.c). Internal to coord/.
 */
#ifndef ZS_COORD_RECOVERY_H
#define ZS_COORD_RECOVERY_H

#include "coord/state.h"

/* failover.c */
/* A replicated job j lost server sid (why: how): promotes the replicas of
 * its shards in a new placement epoch. False when the job cannot go on
 * that way (not replicated, no live copy of some shard, restoring,
 * clipping): the caller's rollback path applies. Caller holds mu. */
bool coord_failover(struct coord *c, struct zs_job *j, uint64_t sid, const char *why);

/* A replicated job's shards with fewer copies than it keeps get new ones
 * on live servers with room, in a new placement epoch (true: some did).
 * Caller holds mu. */
bool coord_rebuild(struct coord *c, struct zs_job *j);
void coord_rebuild_all(struct coord *c);
/* A server came up: each replicated job still holding a server that is
 * down fails over from it where it can now (its shards' other copies were
 * on a server down too when it was lost: two at once). Caller holds mu. */
void coord_fail_over_down(struct coord *c);

/* Rebuilt copies their primaries seeded, as server reporter says: they may
 * be promoted now (only a shard's current primary's word is taken). */
void coord_seeded(struct coord *c, uint64_t reporter, const struct zs_seeded *v, uint32_t n);

/* Every job's failover for server sid, marked down (caller holds mu). */
void coord_server_lost(struct coord *c, uint64_t sid, const char *why);

/* recovery.c */
/* A trainer whose data connections to a server all ended (DroppedRanks)
 * and that has not renewed its lease for this long (by default;
 * --trainer-gone-ms) is gone: a process alive renews every second
 * (client/lease.c), so three renewals missed. */
#define COORD_GONE_QUIET_MS 3000

/* A server registered fresh (restarted): every job it holds rolls back,
 * but for those whose live state it kept (in->live) at the step where
 * every rank had left the job cleanly (Job.stopped_step). */
void coord_server_restarted(struct coord *c, uint64_t sid, const struct zs_server_info *in);

/* Rank left job j (already dropped and committed) cleanly before step
 * next (0: it pushed nothing). When the last rank leaves and all agreed,
 * the job's stopped_step records it; ranks that disagree roll it back. */
void coord_clean_leave(struct coord *c, struct zs_job *j, uint32_t rank, uint64_t next);

/* Drops the trainer at j->trainers[pos] and commits (nothing changes on
 * failure). */
enum zs_status coord_drop_trainer(struct coord *c, struct zs_job *j, uint32_t pos,
				  struct zs_error *e);

/* The latest step any trainer of j reported finished (*top), false if
 * none has: three past it, no rank has begun (c->mu held). */
bool coord_latest_report(struct coord *c, const struct zs_job *j, uint64_t *top);

/* Drops trainers whose lease lapsed, rolling their jobs back. */
void coord_trainer_sweep(struct coord *c, int64_t now);

/*
 * The committed checkpoint that holds job j's state as it is now (between
 * runs: no trainer joined), for a rebalance to restore onto the new
 * placement: the one of its stopped step, or the one it was last restored
 * from; 0 when it has no state to keep (never trained). UINT64_MAX after
 * failing call: its state is at a step no checkpoint holds (the reply says
 * how to take one).
 */
uint64_t coord_state_checkpoint(struct coord *c, const struct zs_job *j,
				struct zs_rpc_call *call);

/* resize.c */
uint32_t coord_world_now(struct coord *c, const struct zs_job *j);

/* What j's rank_lost says for ranks away past its bound */
void coord_away_sweep(struct coord *c, struct zs_job *j, int64_t now);

/* redo.c */
/* Whether rank is out of j's world at the step after the last it
 * began (a resize left it out: its loss costs nothing) */
bool coord_rank_left_world(struct coord *c, const struct zs_job *j, uint32_t rank);

/* The ranks of j lost for bound ms or more (since coord_rank_lost, or the
 * last coord_rank_away_again) that no trainer holds again, at most max */
uint32_t coord_ranks_away(struct coord *c, const struct zs_job *j, int64_t now, int64_t bound,
			  uint32_t *out, uint32_t max);
void coord_rank_away_again(struct coord *c, const struct zs_job *j, uint32_t rank, int64_t now);

/* The step each rank began last and its state then (in memory) */
/* Keeps rank's step begun and state (taken: s->data is the table's after). */
void coord_step_begun(struct coord *c, const struct zs_job *j, uint32_t rank,
		      struct zs_step_state *s);

/* Whether rank was lost and its replacement redoes a step: *out (borrowed,
 * valid under c->mu). */
bool coord_redo_of(struct coord *c, const struct zs_job *j, uint32_t rank,
		   struct zs_step_state *out);

/* Rank is gone (why): true when its replacement redoes its step (marked,
 * logged); false when the job must roll back (logged why). */
bool coord_rank_lost(struct coord *c, const struct zs_job *j, uint32_t rank, const char *why);

/* Forgets job's step states (NULL: every job's): its timeline ended. */
void coord_steps_forget(struct coord *c, const char *job);

#endif
