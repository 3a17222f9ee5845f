/*
 * epoch.c - a replicated job's new placement epoch, taken in place: after a
 * failover (a replica promoted, a lost server's copies gone) or a rebuild
 * (a new copy added), the shards here keep their state and change role
 * and peers; a new copy is added as an empty shard that its primary seeds
 * (replica.c); a primary with a new peer seeds it. Also how a replica
 * reached by a trainer finds out it was promoted.
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"

void eng_shard_peers(struct eshard *s, const struct zs_placement *p)
{
	s->repl.n_peers = 0;
	for (uint32_t q = 0; s->sh.copy == 0 && q < p->n_shards; q++) {
		const struct zs_shard *o = &p->shards[q];
		if (o->unit == s->sh.unit && o->index == s->sh.index && o->copy &&
		    s->repl.n_peers < ZS_MAX_REPLICAS - 1)
			s->repl.peer[s->repl.n_peers++] = o->server_id;
	}
}

bool eng_promoted_since(struct engine *e, struct ejob *j, struct eshard *s)
{
	uint64_t epoch;
	bool primary;

	pthread_mutex_lock(&e->mu);
	epoch = j->epoch;
	pthread_mutex_unlock(&e->mu);
	if (j->spec.replicas < 2 || !e->rp.stale_fn)
		return false;
	/* catches up when the coordinator is ahead; either way the role is
	 * read after (a heartbeat may have taken the new epoch meanwhile) */
	e->rp.stale_fn(e->rp.stale_ctx, j->name, epoch);
	pthread_mutex_lock(&s->mu);
	primary = !s->sh.copy;
	pthread_mutex_unlock(&s->mu);
	return primary;
}

/*
 * Shard s, held here from an earlier placement, is placed here anew as a
 * fresh copy (this server was lost, stopped or cut off, and came back with
 * the job still in memory; the others moved on): its state is stale, so it
 * waits for its primary's seed like any new copy (caller holds s->mu).
 */
static void forget_state(struct engine *e, struct ejob *j, struct eshard *s,
			 struct epending **done)
{
	if (s->repl.landing || s->open.init_landing || s->in.landing) {
		zs_warn("job '%s': unit '%s' shard %u is placed here anew while something lands in it: kept",
			j->name, eng_unit_name(j, s->sh.unit), s->sh.index);
		return;
	}
	for (size_t h = 0; h < s->hold.n; h++)
		zs_sop_fail(s->hold.q[h].op, ZS_ECANCELED,
			    "unit '%s' shard %u moved: this server's copy is stale", eng_unit_name(j, s->sh.unit),
			    s->sh.index);
	s->hold.n = 0;
	eng_acks_fail(s, ZS_ECANCELED, "this server's copy of the shard is stale");
	eng_step_discard(e, j, s);
	eng_capture_skip(j, s, done); /* a checkpoint under way takes the other copies' */
	s->repl.wait = false;
	free(s->repl.err);
	s->repl.err = NULL;
	eng_phase_go(s, EV_RESET);
	s->state_in = 0;
	zs_info("job '%s': unit '%s' shard %u: this server's copy of step %llu is stale: it waits for its primary's seed",
		j->name, eng_unit_name(j, s->sh.unit), s->sh.index, (unsigned long long)s->version);
	s->version = 0;
}

static bool in_list(const uint64_t *v, uint32_t n, uint64_t id)
{
	for (uint32_t i = 0; i < n; i++)
		if (v[i] == id)
			return true;
	return false;
}

/* The entry of placement p for shard s on server id, or NULL. */
static const struct zs_shard *entry(const struct zs_placement *p, const struct eshard *s,
				    uint64_t id)
{
	for (uint32_t i = 0; i < p->n_shards; i++) {
		const struct zs_shard *o = &p->shards[i];
		if (o->server_id == id && o->unit == s->sh.unit && o->index == s->sh.index &&
		    o->offset == s->sh.offset && o->length == s->sh.length &&
		    o->padded == s->sh.padded)
			return o;
	}
	return NULL;
}

/* The new copies placed here (a rebuild), empty until their primary
 * seeds them, after the held ones: how many were taken. */
static uint32_t take_new_copies(struct engine *e, struct ejob *j, const struct zs_job *job,
				uint64_t server_id, uint32_t held)
{
	struct zs_error err = {0};
	uint32_t added = 0;

	for (uint32_t i = 0; i < job->placement.n_shards; i++) {
		const struct zs_shard *sh = &job->placement.shards[i];
		struct eshard *s;
		bool have = false;
		if (sh->server_id != server_id)
			continue;
		for (uint32_t k = 0; k < held && !have; k++)
			have = entry(&job->placement, j->shards[k], server_id) == sh;
		if (have)
			continue;
		if (!sh->copy || !(s = calloc(1, sizeof *s))) {
			zs_error("job '%s': cannot take unit %u shard %u as a new %s here",
				 j->name, sh->unit, sh->index, sh->copy ? "copy (no memory)" : "primary");
			continue;
		}
		s->idx = j->n_shards;
		if (eng_shard_init(e, j, s, sh, &err)) {
			zs_error("job '%s': cannot take a new copy of unit %u shard %u: %s", j->name,
				 sh->unit, sh->index, err.msg);
			eng_shard_release(e, s);
			free(s);
			continue;
		}
		j->shards[s->idx] = s;
		j->n_shards = s->idx + 1; /* atomic: the shard is whole first */
		added++;
	}
	return added;
}

/* Shard s takes its role in the new placement (sh: its entry): a stale
 * copy forgets its state, its peers are the placement's, a forward under
 * way goes to the copies left (or the update it held back runs), a
 * promoted primary sends its last step again. Whether s was promoted. */
static bool reassign_shard(struct engine *e, struct ejob *j, const struct zs_job *job,
			   struct eshard *s, const struct zs_shard *sh, bool skipped,
			   uint64_t was_epoch)
{
	struct eng_fx fx = {0};
	uint64_t was[ZS_MAX_REPLICAS - 1];
	uint32_t n_was;
	bool now_primary;

	pthread_mutex_lock(&s->mu);
	now_primary = s->sh.copy && !sh->copy;
	/* a fresh copy in the new placement that this server had state
	 * for: stale, unless it is the seeded copy the coordinator has
	 * not marked so yet (fresh in the epoch before, none skipped;
	 * forgetting a good one only costs a seed: its forwards ask) */
	if (sh->fresh && eng_ready(s) && sh->copy && (!s->sh.fresh || skipped))
		forget_state(e, j, s, &fx.done);
	s->sh.fresh = sh->fresh;
	s->sh.copy = sh->copy;
	s->sh.copies = sh->copies;
	n_was = s->repl.n_peers;
	memcpy(was, s->repl.peer, sizeof was);
	eng_shard_peers(s, &job->placement);
	/* copies it had before that are others now: placed anew, in epochs
	 * it never took; as good as new ones (engine/copies.h) */
	for (uint32_t q = 0; q < n_was; q++) {
		const struct zs_shard *o = entry(&job->placement, s, was[q]);
		if (o && o->copy && eng_copy_placed_anew(o->fresh, o->placed, was_epoch))
			was[q] = 0; /* no server's id */
	}
	{ /* the copies it seeded that stay its copies stay seeded */
		uint32_t keep = 0;
		for (uint32_t i = 0; i < s->repl.n_seeded; i++)
			if (in_list(was, n_was, s->repl.seeded[i]) &&
			    in_list(s->repl.peer, s->repl.n_peers, s->repl.seeded[i]))
				s->repl.seeded[keep++] = s->repl.seeded[i];
		s->repl.n_seeded = keep;
		keep = 0;
		for (uint32_t i = 0; i < s->repl.n_unsettled; i++)
			if (in_list(was, n_was, s->repl.unsettled[i].peer))
				s->repl.unsettled[keep++] = s->repl.unsettled[i];
		s->repl.n_unsettled = keep;
	}
	{ /* other peers: partial pushes' forwards go to the new ones */
		bool same = n_was == s->repl.n_peers;
		for (uint32_t q = 0; q < s->repl.n_peers && same; q++)
			same = in_list(was, n_was, s->repl.peer[q]);
		if (!same)
			s->repl.peer_gen++;
	}
	/* a new copy of a primary with parameters: its whole state first,
	 * ahead of the forwards that follow on the same connection. New:
	 * fresh in the placement (a copy that was one before, the
	 * promoted replica's fellow, has the state), and not this
	 * primary's peer already (its seed is under way) */
	for (uint32_t q = 0; q < s->repl.n_peers && eng_ready(s); q++) {
		const struct zs_shard *o = entry(&job->placement, s, s->repl.peer[q]);
		if (o && o->fresh && !in_list(was, n_was, s->repl.peer[q]))
			eng_repl_seed(e, j, s, s->repl.peer[q]);
	}
	switch (eng_copies_replan(s->repl.wait, s->repl.n_peers, now_primary, eng_ready(s),
				  s->version, s->acc_of)) {
	case ER_FORWARD_AGAIN: { /* the forward under way: to the copies left */
		float *m = NULL;
		s->repl.gen++;
		s->repl.wait = false;
		if (!s->version && !s->master && (m = malloc(s->sh.length * 4)) &&
		    eng_arrays_io(e, s, false, m, NULL, NULL)) {
			free(m);
			m = NULL;
		}
		eng_repl_queue(e, j, s, !s->version, s->version ? NULL : m ? m : s->master);
		free(m);
		break;
	}
	case ER_DONE: /* no copy left: the update it held back runs */
		s->repl.gen++;
		s->repl.wait = false;
		eng_acks_flush(s);
		if (s->phase != PH_WAITING)
			eng_take_released(s, &fx.rel, &fx.n_rel);
		else if (!eng_copies_hold(false, s->repl.landing))
			eng_step_complete(e, j, s, &fx);
		break;
	case ER_LAST_AGAIN: /* promoted: its last step again, to every copy */
		eng_repl_queue(e, j, s, false, NULL);
		break;
	case ER_CATCH_UP: /* promoted, seeded since its last step: its state */
		eng_repl_catchup(e, j, s);
		break;
	case ER_NOTHING:
		break;
	}
	pthread_mutex_unlock(&s->mu);
	eng_fx_run(e, j, s, &fx); /* with snapshots that waited for a stale copy */
	return now_primary;
}

enum zs_status eng_reassign(struct engine *e, struct ejob *j, const struct zs_job *job,
			    uint64_t server_id)
{
	struct zs_error err = {0};
	uint32_t n = 0, promoted = 0, primaries = 0, added = 0, held = j->n_shards;
	uint64_t was_epoch;
	/* epochs this server never took (stopped, cut off): a copy it holds
	 * may have been dropped and placed again in them */
	bool skipped;

	for (uint32_t i = 0; i < job->placement.n_shards; i++)
		n += job->placement.shards[i].server_id == server_id;
	/* every shard here stays (only the lost server loses some: it starts
	 * over), and the new ones fit the room kept for them */
	if (n < held || n > j->cap_shards)
		return ZS_ESTATE;
	for (uint32_t k = 0; k < held; k++)
		if (!entry(&job->placement, j->shards[k], server_id))
			return ZS_ESTATE;
	if (!e->rp.peer_fn || eng_repl_start(e, &err))
		return ZS_ESTATE;
	added = take_new_copies(e, j, job, server_id, held);
	pthread_mutex_lock(&e->mu);
	was_epoch = j->epoch;
	skipped = job->placement.epoch > j->epoch + 1;
	j->epoch = job->placement.epoch;
	pthread_mutex_unlock(&e->mu);
	for (uint32_t k = 0; k < j->n_shards; k++) {
		const struct zs_shard *sh = entry(&job->placement, j->shards[k], server_id);
		promoted += reassign_shard(e, j, job, j->shards[k], sh, skipped, was_epoch);
		primaries += !sh->copy;
	}
	j->n_primary = primaries;
	zs_info("job '%s': placement epoch %llu taken in place: %u shards here, %u primaries (%u promoted from replicas, %u new copies)",
		j->name, (unsigned long long)j->epoch, j->n_shards, primaries, promoted, added);
	return ZS_OK;
}
