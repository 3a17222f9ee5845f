/*
 * copies.h - a replicated shard's copies, decided: what a copy does with
 * its primary's forward of a step, which durable answers may go, and what
 * a new placement (a failover, a copy lost) does to the update on its way
 * to the copies. Internal to the engine.
 *
 * A pure core, as engine/intake.h: it takes what the shard says and
 * returns a verdict; no clock, no lock, no buffer. engine/replica_in.c,
 * engine/acks.c and engine/epoch.c are its shells, and the simulator's
 * step world runs it as they do (sim/step_nodes.c).
 */
#ifndef ZS_ENGINE_COPIES_H
#define ZS_ENGINE_COPIES_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

/* What a copy does with a forward of step `step`. */
enum eng_fwd_take {
	EF_APPLY,   /* its open step: lands in the mean gradient, then applied */
	EF_APPLIED, /* applied here already: landed aside, answered as applied */
};

/* A copy at version (ready: it has state; landing: a forward lands now)
 * takes its primary's forward of step: ZS_OK and *take, or why not
 * (ZS_ENOTFOUND: no state yet, its primary seeds it). */
enum zs_status eng_copy_take(uint64_t version, bool ready, bool landing, uint64_t step,
			     enum eng_fwd_take *take, struct zs_error *err);
/* The forward of step landed: true when it is applied now (its open step,
 * and the one that began landing), false when it was applied already. */
bool eng_copy_apply(uint64_t version, bool landing, uint64_t step);

/* A copy takes its primary's seed of the shard's whole state at step (a
 * new copy, a rebuild): ZS_OK, or ZS_EEXIST when something lands in it or
 * its own state is of a later step (landing: a forward or a seed lands;
 * ready: it has state, at version); if_empty: a seed sent again to a copy
 * that said it had none (eng_copy_reseed), ZS_EEXIST too when it has state
 * now, whatever its step (the first seed came after it said so); and
 * when the seed is of a run (run: the job's timeline its primary's last
 * restore began) before the copy's own (own_run): its state was read
 * before a restore the copy has had, and is of the run that restore
 * ended. Taken, the copy would stand at the old run's step; within two
 * steps of the restored one, forwards of the steps between are taken for
 * applied, and the copy diverges from its primary, silently. */
enum zs_status eng_copy_seed_take(bool landing, bool ready, uint64_t version, uint64_t step,
				  bool if_empty, uint64_t run, uint64_t own_run,
				  struct zs_error *err);
/* 1 + the step a seed taken at step lacks terms of (mid: taken after
 * partial pushes of that step, whose terms are not in its state), 0: none. */
uint64_t eng_copy_seed_gap(bool mid, uint64_t step);
/* The gap once the copy applied a step and is at version. */
uint64_t eng_copy_gap_after(uint64_t gap, uint64_t version);

/* What a copy does with a partial push of step forwarded to it. */
enum eng_part_take {
	EP_COUNT, /* into its reduction, once (eng_in_forwarded) */
	EP_DROP,  /* of an applied step, or of the step its seed came in past */
};
/* ZS_OK and *take, or ZS_ESTATE for a step ahead of the copy. */
enum zs_status eng_copy_partial_take(uint64_t version, uint64_t gap, uint64_t step,
				     enum eng_part_take *take, struct zs_error *err);

/* A copy takes a promoted primary's catch-up, its whole state at step
 * (ER_CATCH_UP): ZS_OK when it is behind step or has no state (it takes
 * it as a seed, whole at once: the primary's step is applied on it);
 * ZS_EEXIST when it is at step or past it (it keeps its own: done);
 * ZS_ESTATE while a forward or a seed lands in it (sent again). */
enum zs_status eng_copy_catchup_take(bool landing, bool ready, uint64_t version, uint64_t step,
				     struct zs_error *err);

/* How a copy that answered a forward it has no state is seeded now. */
enum eng_reseed {
	ES_SEED,     /* not one this primary seeded in this placement epoch */
	ES_IF_EMPTY, /* one it seeded (seeded[n]): again, taken only while the
		      * copy has no state. Its seed may have come after the
		      * forward was refused: seeded again whatever it held, it
		      * would take the state anew mid-step and drop the step's
		      * terms it had taken since, though reported whole
		      * (promoted, its sum would lack terms the trainers were
		      * answered for). Or it lost the state the first brought
		      * (a copy placed anew that its primary did not see so:
		      * eng_copy_placed_anew covers what the placement shows).
		      * Before, it was never seeded again: the copy refused
		      * every forward, and the job stood */
};
enum eng_reseed eng_copy_reseed(const uint64_t *seeded, uint32_t n, uint64_t peer);

/* Whether a copy a primary had before (in the epoch it held, was_epoch)
 * and has in the placement it takes now is another copy: placed anew, in
 * an epoch this primary never took (fresh, placed after was_epoch; its
 * server restarted, and the coordinator took it for lost and placed the
 * copy there again in one go). Seeded as a new copy; what it seeded there
 * before is forgotten. */
bool eng_copy_placed_anew(bool fresh, uint64_t placed, uint64_t was_epoch);

/* Whether a copy whose seed it took is whole at once (may be promoted):
 * not one seeded mid-step, which is whole once that step's forward has
 * reached it (eng_copies_settled). */
bool eng_copy_seed_whole(bool mid);
/* Whether a copy seeded at seeded_step (mid-step) is settled (whole: it
 * may be promoted) by a forward of fwd_step it took (init: the initial
 * upload's). */
bool eng_copies_settled(uint64_t seeded_step, bool init, uint64_t fwd_step);

/* The durable answers due: those of pushes of a step before the frontier
 * (the update that made version on every copy unless wait). */
uint64_t eng_acks_frontier(uint64_t version, bool wait);

/* A task to every copy that brings them to version made (the initial
 * upload: 0; a forward of step t: t + 1; a catch-up of step t: t), of
 * forward generation gen, ended: whether it settles the wait of the shard
 * now at version (wait, generation gen_now). Only the one that brings the
 * copies to version does: an older forward (a promoted copy's last step
 * sent again while its deposed primary's forward still landed there,
 * applied since and forwarded in turn) leaves the wait to the newer one. */
bool eng_copies_settles(bool wait, uint64_t gen_now, uint64_t gen, uint64_t made, uint64_t version);

/* Whether a shard whose pushes of the open step are all in waits to
 * complete it: the update before it not yet on every copy (wait), or a
 * forward of that very step landing in its mean gradient (landing: a copy
 * promoted while its deposed primary's forward lands; the forward applies
 * the step, or, ended unlanded, lets the shard complete it). */
bool eng_copies_hold(bool wait, bool landing);

/* A new placement, as a shard here takes it. */
enum eng_replan {
	ER_NOTHING,
	ER_FORWARD_AGAIN, /* the forward under way: again, to the copies left */
	ER_DONE,          /* no copy left: the update is on every copy */
	ER_LAST_AGAIN,    /* promoted: its last step again, to every copy */
	ER_CATCH_UP,      /* promoted with no mean gradient of its last step (a
			   * seeded copy): its state, to every copy, taken by
			   * those behind it (eng_copy_catchup_take) */
};
/* wait: a forward under way; peers: the copies the new placement gives
 * it; promoted: a copy made primary; acc_of: 1 + the step its mean
 * gradient is of (0: none). Whether a forward under way is abandoned
 * (its answers of an earlier generation ignored) is ER_FORWARD_AGAIN and
 * ER_DONE. */
enum eng_replan eng_copies_replan(bool wait, uint32_t peers, bool promoted, bool ready,
				  uint64_t version, uint64_t acc_of);

#endif
