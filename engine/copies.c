/*
 * copies.c - a replicated shard's copies, decided (engine/copies.h).
 */
#include "engine/copies.h"

#include "base/mutant.h"

enum zs_status eng_copy_take(uint64_t version, bool ready, bool landing, uint64_t step,
			     enum eng_fwd_take *take, struct zs_error *err)
{
	*take = EF_APPLY;
	if (!ready) /* its primary seeds it, then sends again */
		return zs_fail(err, ZS_ENOTFOUND, "no state here yet (a new or restarted copy)");
	if (step < version && step + (ZS_MUTANT(ZS_MUT_AHEAD_REFUSES) ? 1 : 2) >= version) {
		/* sent again to a copy that applied it (a failover moved the
		 * primary while its acknowledgement was on the way); or the
		 * step before it: a promoted copy sends its last step again,
		 * and its fellow may be a step ahead of it, the lost
		 * primary's last forward having reached that one alone; the
		 * trainers push that step again to the new primary, whose
		 * forward of it then finds it applied here, as above */
		*take = EF_APPLIED;
		return ZS_OK;
	}
	if (step != version)
		return zs_fail(err, ZS_ESTATE, "a forward of step %llu, which is at step %llu",
			       (unsigned long long)step, (unsigned long long)version);
	if (landing)
		return zs_fail(err, ZS_EEXIST, "taking a forward already");
	return ZS_OK;
}

bool eng_copy_apply(uint64_t version, bool landing, uint64_t step)
{
	return step == version && landing;
}

enum zs_status eng_copy_seed_take(bool landing, bool ready, uint64_t version, uint64_t step,
				  bool if_empty, uint64_t run, uint64_t own_run,
				  struct zs_error *err)
{
	if (run < own_run)
		return zs_fail(err, ZS_EEXIST,
			       "its state of run %llu; the seed is of run %llu, which a restore ended",
			       (unsigned long long)own_run, (unsigned long long)run);
	if (if_empty && ready)
		return zs_fail(err, ZS_EEXIST, "its state of step %llu already (a seed sent again, of step %llu)",
			       (unsigned long long)version, (unsigned long long)step);
	/* one with state takes it too unless that state is of a later step:
	 * a primary promoted after its predecessor seeded the copy (the
	 * coordinator did not hear of it) seeds it again */
	if (landing || (ready && step < version))
		return zs_fail(err, ZS_EEXIST, "its state of step %llu already (a seed of step %llu)",
			       (unsigned long long)version, (unsigned long long)step);
	return ZS_OK;
}

uint64_t eng_copy_seed_gap(bool mid, uint64_t step)
{
	return mid ? step + 1 : 0;
}

uint64_t eng_copy_gap_after(uint64_t gap, uint64_t version)
{
	return gap && gap < version + 1 ? 0 : gap; /* the step it lacked terms of is applied */
}

enum zs_status eng_copy_partial_take(uint64_t version, uint64_t gap, uint64_t step,
				     enum eng_part_take *take, struct zs_error *err)
{
	*take = EP_DROP;
	if (step > version)
		return zs_fail(err, ZS_ESTATE, "a partial push of step %llu, which is at step %llu",
			       (unsigned long long)step, (unsigned long long)version);
	/* one of an applied step, of the step it was seeded in past (its
	 * terms are in the seed's state's future), or in already: taken and
	 * dropped at its landing */
	if (step == version && (gap != step + 1 || ZS_MUTANT(ZS_MUT_SEED_GAP_IGNORED)))
		*take = EP_COUNT;
	return ZS_OK;
}

enum zs_status eng_copy_catchup_take(bool landing, bool ready, uint64_t version, uint64_t step,
				     struct zs_error *err)
{
	if (landing) /* sent again once that lands: then it may be at step */
		return zs_fail(err, ZS_ESTATE, "taking a forward or a seed already");
	if (ready && version >= step)
		return zs_fail(err, ZS_EEXIST, "at step %llu already (a catch-up of step %llu)",
			       (unsigned long long)version, (unsigned long long)step);
	return ZS_OK; /* behind its primary, or no state: the state of step is its own now */
}

enum eng_reseed eng_copy_reseed(const uint64_t *seeded, uint32_t n, uint64_t peer)
{
	for (uint32_t i = 0; i < n; i++)
		if (seeded[i] == peer)
			return ES_IF_EMPTY;
	return ES_SEED;
}

bool eng_copy_placed_anew(bool fresh, uint64_t placed, uint64_t was_epoch)
{
	return fresh && placed > was_epoch && !ZS_MUTANT(ZS_MUT_PLACED_ANEW_KEPT);
}

bool eng_copy_seed_whole(bool mid)
{
	return !mid || ZS_MUTANT(ZS_MUT_SETTLED_AT_SEED);
}

bool eng_copies_settled(uint64_t seeded_step, bool init, uint64_t fwd_step)
{
	return !init && seeded_step <= fwd_step;
}

uint64_t eng_acks_frontier(uint64_t version, bool wait)
{
	if (ZS_MUTANT(ZS_MUT_FRONTIER_AT_VERSION))
		return version;
	return version - (wait && version ? 1 : 0);
}

bool eng_copies_settles(bool wait, uint64_t gen_now, uint64_t gen, uint64_t made, uint64_t version)
{
	if (!wait || gen != gen_now) /* a restore or a new placement came between */
		return false;
	if (ZS_MUTANT(ZS_MUT_OLDER_FORWARD_SETTLES))
		return true;
	return made == version;
}

bool eng_copies_hold(bool wait, bool landing)
{
	return wait || (landing && !ZS_MUTANT(ZS_MUT_LANDING_NOT_HELD));
}

enum eng_replan eng_copies_replan(bool wait, uint32_t peers, bool promoted, bool ready,
				  uint64_t version, uint64_t acc_of)
{
	if (wait) /* the forward under way went to the old copies */
		return peers ? ER_FORWARD_AGAIN : ER_DONE;
	/* its last step, again, to every copy: one that missed it (the lost
	 * primary died forwarding it; with three copies) applies it, the
	 * others acknowledge it as applied; until then the next step's
	 * update waits, as after any step */
	if (!promoted || !peers || !ready || !version)
		return ER_NOTHING;
	if (acc_of == version)
		return ZS_MUTANT(ZS_MUT_PROMOTED_SENDS_NOTHING) ? ER_NOTHING : ER_LAST_AGAIN;
	/* a copy seeded since it last applied a step has no mean gradient to
	 * send again: its state instead, which a copy behind it takes (the
	 * lost primary's last step reached this one, and not that one) */
	return ZS_MUTANT(ZS_MUT_SEEDED_SENDS_NOTHING) ? ER_NOTHING : ER_CATCH_UP;
}
