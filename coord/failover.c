/*
 * failover.c - a replicated job (spec.replicas > 1) loses a server without
 * a rollback: every shard it held has another copy on a live server, so
 * the coordinator drops its copies from the placement, makes the first
 * surviving copy of each shard its primary, and commits that as a new
 * placement epoch. The servers take it in place (their shards keep their
 * state; a replica that becomes a primary takes pushes and gathers from
 * then on), and trainers send what was in flight on the lost server again
 * to the shards' new primaries (client/failover.c). A push is acknowledged
 * by a replicated job's servers only once every copy has applied its step,
 * so nothing a trainer was told is done can be lost with one server.
 *
 * Not promoted (the job keeps today's path: the rollback to its last
 * checkpoint when the server comes back without its shards, or a trainer
 * gives up on it): a shard with no copy left on a live server (two servers
 * lost at once with two copies), a job being restored, and a job that
 * clips gradients (its norm exchange counts the shards of one placement
 * per step; taking a new one mid-step is not done yet).
 */
#include "coord/state.h"

/* Whether server id is up. */
static bool srv_up(struct coord *c, uint64_t id)
{
	struct srv *s = coord_find_srv(c, id);
	return s && s->up;
}

/*
 * The placement of j without server sid's copies, the first remaining
 * copy of each shard its primary; ZS_ESTATE (why in err) when a shard
 * would have no copy on a live server.
 */
static enum zs_status without(struct coord *c, const struct zs_job *j, uint64_t sid,
			      struct zs_placement *out, struct zs_error *err)
{
	const struct zs_placement *p = &j->placement;
	uint32_t n = 0;

	memset(out, 0, sizeof *out);
	out->shards = malloc((p->n_shards ? p->n_shards : 1) * sizeof *out->shards);
	if (!out->shards)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < p->n_shards;) {
		uint32_t e = i, first = n, live = 0;
		while (e < p->n_shards && p->shards[e].unit == p->shards[i].unit &&
		       p->shards[e].index == p->shards[i].index)
			e++;
		for (uint32_t k = i; k < e; k++)
			if (p->shards[k].server_id != sid) {
				out->shards[n++] = p->shards[k];
				live += srv_up(c, p->shards[k].server_id);
			}
		if (!live) {
			free(out->shards);
			out->shards = NULL;
			return zs_fail(err, ZS_ESTATE,
				       "unit %u shard %u has no copy left on a live server",
				       p->shards[i].unit, p->shards[i].index);
		}
		/* a live copy first: it becomes the primary */
		for (uint32_t k = first; k < n; k++)
			if (srv_up(c, out->shards[k].server_id)) {
				struct zs_shard t = out->shards[first];
				out->shards[first] = out->shards[k];
				out->shards[k] = t;
				break;
			}
		for (uint32_t k = first; k < n; k++) {
			out->shards[k].copy = k - first;
			out->shards[k].copies = n - first;
		}
		i = e;
	}
	out->n_shards = n;
	out->epoch = p->epoch + 1;
	return ZS_OK;
}

bool coord_failover(struct coord *c, struct zs_job *j, uint64_t sid, const char *why)
{
	struct zs_error e = {0};
	struct zs_placement np, old;
	uint32_t promoted = 0;

	if (j->spec.replicas < 2 || !coord_holds(j, sid, false))
		return false;
	if (j->restore_pending) {
		zs_info("job '%s': %s during a restore: no failover", j->spec.name, why);
		return false;
	}
	if (j->spec.optim.clip_norm > 0.0) {
		zs_warn("job '%s': %s; it clips gradients, which failover does not do yet: it rolls back",
			j->spec.name, why);
		return false;
	}
	if (without(c, j, sid, &np, &e)) {
		zs_warn("job '%s': %s, and %s: it rolls back", j->spec.name, why, e.msg);
		return false;
	}
	for (uint32_t i = 0; i < j->placement.n_shards; i++)
		promoted += j->placement.shards[i].server_id == sid && !j->placement.shards[i].copy;
	old = j->placement;
	j->placement = np;
	if (coord_save_job(c, j, false, true, &e)) {
		j->placement = old;
		zs_placement_release(&np);
		zs_error("job '%s': %s, and its new placement cannot be recorded (%s): it rolls back",
			 j->spec.name, why, e.msg);
		return false;
	}
	zs_placement_release(&old);
	/* a checkpoint under way counted that server's shards: it cannot
	 * commit whole; the next one will */
	coord_fail_pending(c, j, "a server of the job was lost before it was durable");
	coord_metrics_event(c, COORD_EV_FAILOVER);
	zs_warn("job '%s': %s: its shards' replicas take over (%u shards promoted), placement epoch %llu, no rollback",
		j->spec.name, why, promoted, (unsigned long long)j->placement.epoch);
	return true;
}

void coord_server_lost(struct coord *c, uint64_t sid, const char *why)
{
	for (size_t i = 0; i < c->n_jobs; i++)
		coord_failover(c, &c->jobs[i], sid, why);
}
