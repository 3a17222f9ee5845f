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
 * mid-step, and it is not whole until that step is applied there.
 */
bool zs_placement_seeded(struct zs_placement *p, uint64_t reporter, uint32_t unit, uint32_t index,
			 uint64_t copy_server);

#endif
