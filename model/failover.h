/*
 * failover.h - a replicated job's placement without a lost server: the
 * coordinator's failover decision as a pure function (no lock, no I/O),
 * which coord/failover.c runs under its lock and the simulator's step
 * world runs as the coordinator does (sim/step.c).
 */
#ifndef ZS_MODEL_FAILOVER_H
#define ZS_MODEL_FAILOVER_H

#include <stdbool.h>

#include "model/model.h"

/* Whether copy sh can take over (its server up, its state whole: not a
 * rebuilt copy its primary has not seeded yet), as the caller knows it. */
typedef bool (*zs_copy_live_fn)(void *ctx, const struct zs_shard *sh);

/*
 * The placement p without server sid's copies, in the next epoch: the first
 * live copy left of each shard its primary (copies renumbered after it);
 * ZS_ESTATE, naming the shard, when one would have no live copy left (a
 * rollback's case), ZS_ENOMEM; out empty then.
 */
enum zs_status zs_placement_without(const struct zs_placement *p, uint64_t sid,
				    zs_copy_live_fn live, void *ctx, struct zs_placement *out,
				    struct zs_error *err);

/*
 * Copy (unit, index) on server copy_server is seeded, as server reporter
 * says: no longer fresh (it may take over), when reporter is that shard's
 * primary in p; true when that changed p. A report from a primary since
 * deposed is not taken: the new primary may have seeded the copy again,
 * mid-step, and it is not whole until that step is applied there. Nor one
 * of a seed sent in an epoch before the copy was placed (epoch < its
 * placed): that seed went to a copy lost since, its server restarted and
 * the copy placed on it anew, empty (the report came a heartbeat late).
 */
bool zs_placement_seeded(struct zs_placement *p, uint64_t reporter, uint32_t unit, uint32_t index,
			 uint64_t copy_server, uint64_t epoch);


/*
 * What a job makes of a server of it lost, the coordinator's verdict
 * (coord/recovery.c runs it for each job the server holds a copy of, the
 * simulator's loss world as the coordinator does): its replicas took over
 * (the failover above, committed); else a server marked down (its lease
 * passed) is waited for, since it may continue where it was (stopped, cut
 * off); a server back without its state, or with a state other than the
 * one every rank left the job at, rolls the job back.
 */
struct zs_loss {
	bool failed_over;      /* the placement without it was committed */
	bool restarted;        /* it registered again (else: marked down) */
	bool claim;            /* it claims the job's state, of its incarnation and epoch */
	uint64_t claim_step;   /* the step of that state */
	uint64_t stopped_step; /* every rank left the job there (0: not stopped) */
	bool restore_pending;
};
enum zs_loss_act {
	ZS_LOSS_FAILED_OVER, /* its replicas took over: no rollback */
	ZS_LOSS_WAIT,        /* marked down: waited for (the trainers bound it) */
	ZS_LOSS_KEEP,        /* back with its state of the step every rank left at */
	ZS_LOSS_ROLLBACK,    /* its state gone, or not where the ranks left it */
};
enum zs_loss_act zs_loss_verdict(const struct zs_loss *l);

#endif
