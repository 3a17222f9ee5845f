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
 * Rebuilt: a shard left with fewer copies than the job keeps gets a new
 * one on a live server that holds none of it (another host where one
 * has room), in a new placement epoch, as soon as there is such a server
 * (right after the failover, or when one registers or comes back): its
 * primary sends it the shard's whole state (engine/replica.c, a seed),
 * then forwards every step to it as to the others, while training goes on.
 *
 * Not promoted (the job keeps today's path: the rollback to its last
 * checkpoint when the server comes back without its shards, or a trainer
 * gives up on it): a shard with no copy left on a live server (two servers
 * lost at once with two copies), and a job being restored. A job that
 * clips gradients fails over the same way: its step's norms are counted
 * by shard (norms.c), and a promoted copy reports its shard's.
 */
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "coord/recovery.h"

#include "model/failover.h"

/* Whether copy sh can take over: its server up, its state whole (not a
 * rebuilt copy its primary has not seeded yet). Caller holds c->mu. */
static bool live(void *ctx, const struct zs_shard *sh)
{
	struct srv *s = coord_find_srv(ctx, sh->server_id);
	return s && zs_mbr_up(&s->m) && !sh->fresh;
}

/* Whether server s, with used bytes held, may take a new copy of the
 * shard group at p[a, b): up, holding none of it, with room for bytes. */
static bool can_take(const struct srv *s, const struct zs_placement *p, uint32_t a, uint32_t b,
		     uint64_t bytes, uint64_t used)
{
	if (!zs_mbr_up(&s->m))
		return false;
	for (uint32_t k = a; k < b; k++)
		if (p->shards[k].server_id == s->info.id)
			return false;
	return used + bytes <= s->info.capacity;
}

/* Whether server s is on the host of a copy in p[a, b). */
static bool same_host(struct coord *c, const struct srv *s, const struct zs_placement *p,
		      uint32_t a, uint32_t b)
{
	for (uint32_t k = a; k < b; k++) {
		struct srv *o = coord_find_srv(c, p->shards[k].server_id);
		if (o && o->info.host[0] && !strcmp(o->info.host, s->info.host))
			return true;
	}
	return false;
}

bool coord_rebuild(struct coord *c, struct zs_job *j)
{
	uint32_t K = j->spec.replicas, added = 0, n = 0;
	const struct zs_placement *p = &j->placement;
	struct zs_placement np = {0}, old;
	struct zs_error e = {0};
	uint64_t *used; /* each server's, by c->srvs, with what this pass adds */

	if (K < 2 || j->restore_pending)
		return false;
	used = calloc(c->n_srvs ? c->n_srvs : 1, sizeof *used);
	np.shards = malloc((zs_placement_groups(p) * K + 1) * sizeof *np.shards);
	if (!used || !np.shards) {
		free(used);
		free(np.shards);
		return false;
	}
	for (size_t q = 0; q < c->n_srvs; q++)
		used[q] = coord_used_on(c, c->srvs[q].info.id, NULL);
	for (uint32_t i = 0; i < p->n_shards;) {
		uint32_t e2 = i, first = n;
		while (e2 < p->n_shards && p->shards[e2].unit == p->shards[i].unit &&
		       p->shards[e2].index == p->shards[i].index)
			e2++;
		for (uint32_t k = i; k < e2; k++)
			np.shards[n++] = p->shards[k];
		while (n - first < K) {
			const struct zs_shard *sh = &p->shards[i];
			uint64_t bytes = zs_shard_state_bytes(&j->spec, sh);
			size_t best = c->n_srvs;
			/* another host first, then the least used */
			for (int pass = 0; pass < 2 && best == c->n_srvs; pass++)
				for (size_t q = 0; q < c->n_srvs; q++) {
					struct srv *s = &c->srvs[q];
					if (!can_take(s, &np, first, n, bytes, used[q]) ||
					    (pass == 0 && same_host(c, s, &np, first, n)))
						continue;
					if (best == c->n_srvs || used[q] < used[best])
						best = q;
				}
			if (best == c->n_srvs)
				break; /* no server can take it now: later */
			np.shards[n] = *sh;
			np.shards[n].server_id = c->srvs[best].info.id;
			np.shards[n].copy = n - first;
			np.shards[n].fresh = 1; /* until its primary has seeded it */
			np.shards[n].placed = p->epoch + 1;
			used[best] += bytes;
			n++;
			added++;
		}
		for (uint32_t k = first; k < n; k++)
			np.shards[k].copies = n - first;
		i = e2;
	}
	free(used);
	if (!added) {
		free(np.shards);
		return false;
	}
	np.n_shards = n;
	np.epoch = p->epoch + 1;
	old = j->placement;
	j->placement = np;
	if (coord_save_job(c, j, false, true, &e)) {
		j->placement = old;
		zs_placement_release(&np);
		zs_error("job '%s': its new copies cannot be recorded: %s", j->spec.name, e.msg);
		return false;
	}
	zs_placement_release(&old);
	zs_info("job '%s': %u shard copies rebuilt from their primaries (placement epoch %llu)",
		j->spec.name, added, (unsigned long long)j->placement.epoch);
	return true;
}

void coord_seeded(struct coord *c, uint64_t reporter, const struct zs_seeded *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct zs_job *j = coord_find_job(c, v[i].job);
		struct zs_error e = {0};
		if (!j || !zs_placement_seeded(&j->placement, reporter, v[i].unit, v[i].index,
					       v[i].server_id, v[i].epoch))
			continue;
		/* the epoch stays: nothing about where shards are changed */
		if (coord_save_job(c, j, false, false, &e))
			zs_error("job '%s': cannot record a seeded copy: %s", j->spec.name, e.msg);
		else
			zs_info("job '%s': unit %u shard %u: the copy on server %llu is seeded",
				j->spec.name, v[i].unit, v[i].index,
				(unsigned long long)v[i].server_id);
	}
}

void coord_rebuild_all(struct coord *c)
{
	for (size_t i = 0; i < c->n_jobs; i++)
		coord_rebuild(c, &c->jobs[i]);
}

bool coord_failover(struct coord *c, struct zs_job *j, uint64_t sid, const char *why)
{
	struct zs_error e = {0};
	struct zs_placement np, old;
	uint32_t promoted = 0;

	if (j->spec.replicas < 2 || !coord_holds(c, j, sid))
		return false;
	if (j->restore_pending) {
		zs_info("job '%s': %s during a restore: no failover", j->spec.name, why);
		return false;
	}
	if (zs_placement_without(&j->placement, sid, live, c, &np, &e)) {
		zs_warn("job '%s': %s, and %s: no failover (a server lost is waited for, and the job rolls back if it returns without its state)",
			j->spec.name, why, e.msg);
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
	/* a step's norms (clipping) wait for the promoted copies from now */
	for (struct norm_coll *n = c->nx.colls; n; n = n->next)
		if (!strcmp(n->job, j->spec.name))
			n->started_ms = zs_now_ms();
	coord_metrics_event(c, COORD_EV_FAILOVER);
	zs_warn("job '%s': %s: its shards' replicas take over (%u shards promoted), placement epoch %llu, no rollback",
		j->spec.name, why, promoted, (unsigned long long)j->placement.epoch);
	coord_rebuild(c, j); /* where a server can take the lost copies now */
	return true;
}

void coord_fail_over_down(struct coord *c)
{
	for (size_t i = 0; i < c->n_jobs; i++) {
		struct zs_job *j = &c->jobs[i];
		if (j->spec.replicas < 2 || j->restore_pending)
			continue;
		for (size_t k = 0; k < c->n_srvs; k++) {
			struct srv *s = &c->srvs[k];
			struct zs_placement np;
			char why[ZS_ADDR_MAX + 96];
			if (!zs_mbr_down(&s->m) || !coord_holds(c, j, s->info.id))
				continue;
			/* still no copy up of one of its shards: it waits on */
			if (zs_placement_without(&j->placement, s->info.id, live, c, &np, NULL))
				continue;
			zs_placement_release(&np);
			zs_fmt(why, sizeof why,
			       "server %llu (%s), down, is failed over from now that another is up",
			       (unsigned long long)s->info.id, s->info.addr);
			coord_failover(c, j, s->info.id, why);
		}
	}
}

void coord_server_lost(struct coord *c, uint64_t sid, const char *why)
{
	for (size_t i = 0; i < c->n_jobs; i++) {
		struct zs_job *j = &c->jobs[i];
		struct zs_loss l = {0};
		if (!coord_holds(c, j, sid))
			continue;
		l.failed_over = coord_failover(c, j, sid, why);
		/* not failed over: waited for (model/failover.h) */
		if (zs_loss_verdict(&l) == ZS_LOSS_ROLLBACK)
			coord_rollback(c, j, sid, why);
	}
}
