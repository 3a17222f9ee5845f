/*
 * world.c - a job's world size by step: the changes zshardctl job resize
 * makes (model/model.h, struct zs_worlds), as the coordinator, the trainers
 * and the servers all read them.
 */
#include "model/model.h"

#include <string.h>

#include "base/le.h"

uint32_t zs_world_at(const struct zs_job_spec *s, const struct zs_worlds *w, uint64_t step)
{
	uint32_t n = s->world_size;

	for (uint32_t i = 0; w && i < w->n && w->v[i].step <= step; i++)
		n = w->v[i].world;
	return n;
}

uint32_t zs_world_max(const struct zs_job_spec *s, const struct zs_worlds *w)
{
	uint32_t n = s->world_size;

	for (uint32_t i = 0; w && i < w->n; i++)
		if (w->v[i].world > n)
			n = w->v[i].world;
	return n;
}

bool zs_worlds_same(const struct zs_worlds *a, const struct zs_worlds *b)
{
	if (a->n != b->n)
		return false;
	for (uint32_t i = 0; i < a->n; i++)
		if (a->v[i].step != b->v[i].step || a->v[i].world != b->v[i].world)
			return false;
	return true;
}

uint32_t zs_world_last(const struct zs_job_spec *s, const struct zs_worlds *w)
{
	return w && w->n ? w->v[w->n - 1].world : s->world_size;
}

void zs_worlds_add(struct zs_worlds *w, uint64_t step, uint32_t world)
{
	while (w->n && w->v[w->n - 1].step >= step)
		w->n--;
	if (w->n == ZS_WORLD_HIST) {
		memmove(w->v, w->v + 1, (ZS_WORLD_HIST - 1) * sizeof w->v[0]);
		w->n--;
	}
	w->v[w->n++] = (struct zs_world_change){step, world};
}

size_t zs_worlds_encode(const struct zs_worlds *w, uint8_t *out)
{
	zs_put32(out, w->n);
	for (uint32_t i = 0; i < w->n; i++) {
		zs_put64(out + 4 + 12 * i, w->v[i].step);
		zs_put32(out + 12 + 12 * i, w->v[i].world);
	}
	return 4 + 12 * (size_t)w->n;
}

enum zs_status zs_worlds_decode(const uint8_t *in, size_t len, struct zs_worlds *w,
				struct zs_error *err)
{
	uint32_t n;

	memset(w, 0, sizeof *w);
	if (len < 4 || (n = zs_get32(in)) > ZS_WORLD_HIST || len != 4 + 12 * (size_t)n)
		return zs_fail(err, ZS_EPROTO, "a world size payload of %zu bytes", len);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t step = zs_get64(in + 4 + 12 * i);
		uint32_t world = zs_get32(in + 12 + 12 * i);
		if (world < 1 || world > ZS_MAX_WORLD)
			return zs_fail(err, ZS_EINVAL, "a world size of %u (1..%d)", world,
				       ZS_MAX_WORLD);
		if (i && step <= w->v[i - 1].step)
			return zs_fail(err, ZS_EINVAL, "world size changes out of step order");
		w->v[i] = (struct zs_world_change){step, world};
	}
	w->n = n;
	return ZS_OK;
}

const char *zs_rank_lost_name(enum zs_rank_lost k)
{
	return k == ZS_LOST_SHRINK ? "shrink" : k == ZS_LOST_ROLLBACK ? "rollback" : "wait";
}
