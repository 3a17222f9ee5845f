/*
 * world.c - the trainer's side of zshardctl job resize: the job's world
 * size by step, as the coordinator says it (the join's job, each step
 * boundary's answer), told to every server on each data connection (a
 * WORLD frame) before any push of a step a change names, so that each
 * shard's step waits for the pushes of that step's ranks and takes their
 * mean (engine/world.c). The step driver refuses a step whose world does
 * not hold this rank (driver.c): the rank leaves there.
 */
#include "client/trainer.h"

#include "base/log.h"

enum zs_status tr_world_to_new(zs_trainer *t, struct zs_conn *c, struct zs_error *err)
{
	uint8_t payload[ZS_WORLDS_BYTES(ZS_WORLD_HIST)];
	struct zs_req *r;
	enum zs_status st;

	if (!t->worlds.n || t->job.spec.collective)
		return ZS_OK;
	st = zs_post_world(c, payload, zs_worlds_encode(&t->worlds, payload), &r, err);
	if (!st)
		st = zs_req_wait(r, t->timeout_ms, err);
	if (st)
		zs_error_prefix(err, "the job's world size to a server connected to now");
	else
		t->said = t->worlds;
	return st;
}

enum zs_status tr_world_take(zs_trainer *t, const struct zs_worlds *w, struct zs_error *err)
{
	uint8_t payload[ZS_WORLDS_BYTES(ZS_WORLD_HIST)];
	enum zs_status st = ZS_OK;
	size_t len;

	if (zs_worlds_same(w, &t->worlds) && zs_worlds_same(w, &t->said))
		return ZS_OK;
	t->worlds = *w;
	if (!w->n || t->job.spec.collective) {
		t->said = *w;
		return ZS_OK;
	}
	len = zs_worlds_encode(w, payload);
	for (uint32_t i = 0; i < t->n_srv && !st; i++) {
		struct zs_req *r;
		if (!t->conn[i])
			continue;
		if (!(st = zs_post_world(t->conn[i], payload, len, &r, err)))
			st = zs_req_wait(r, t->timeout_ms, err);
		if (st == ZS_EUNAVAIL || st == ZS_ECANCELED)
			st = ZS_OK; /* a lost server: its successor's connection is told */
	}
	if (st) {
		zs_error_prefix(err, "telling the servers job '%s''s world size", t->job.spec.name);
		return st;
	}
	t->said = *w;
	zs_debug("rank %u of job '%s': world size %u from step %llu", t->rank, t->job.spec.name,
		 w->v[w->n - 1].world, (unsigned long long)w->v[w->n - 1].step);
	return ZS_OK;
}
