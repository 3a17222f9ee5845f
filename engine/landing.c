/*
 * landing.c - where pushes land: buffers of the arena, taken when a push
 * begins and given back as soon as its bytes are in the reduction, so a
 * server holds room for the pushes in flight, not a slot per rank. Their
 * bytes together stay within the landing budget (engine_set_landing); a
 * push that would pass it waits (the listener retries it when room is
 * given back: zs_listener_kick), except that one push may always land, so
 * a shard larger than the budget still moves. Buffers are kept for reuse
 * (page-locked once for the device when the shards live on one) up to
 * twice the budget.
 */
#include "engine/engine_int.h"

#include "gpu/dev.h"

void engine_set_landing(struct engine *e, uint64_t budget)
{
	e->land_budget = budget;
}

void *eng_land_get(struct engine *e, size_t bytes, bool over_budget)
{
	size_t need = (bytes + 4095) & ~(size_t)4095;
	struct landbuf *b = NULL;

	pthread_mutex_lock(&e->lmu);
	if (!over_budget && e->land_busy && e->land_busy + need > e->land_budget) {
		e->land_waits++;
		pthread_mutex_unlock(&e->lmu);
		return NULL;
	}
	for (size_t i = 0; i < e->n_land && !b; i++)
		if (!e->land[i].busy && e->land[i].bytes == need)
			b = &e->land[i];
	if (!b) {
		struct landbuf *g = realloc(e->land, (e->n_land + 1) * sizeof *g);
		void *p = g ? zs_listener_alloc(e->l, need) : NULL;
		if (g)
			e->land = g;
		if (!p) {
			pthread_mutex_unlock(&e->lmu);
			return NULL;
		}
		b = &e->land[e->n_land++];
		*b = (struct landbuf){.p = p, .bytes = need};
		/* copies to the device run at the link's speed from pinned pages */
		b->pinned = e->dev && !zs_dev_host_register(e->dev, p, need);
		e->land_total += need;
	}
	b->busy = true;
	e->land_busy += need;
	pthread_mutex_unlock(&e->lmu);
	return b->p;
}

static void drop(struct engine *e, size_t i)
{
	if (e->land[i].pinned)
		zs_dev_host_unregister(e->dev, e->land[i].p);
	zs_listener_release(e->l, e->land[i].p);
	e->land_total -= e->land[i].bytes;
	e->land[i] = e->land[--e->n_land];
}

void eng_land_put(struct engine *e, void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&e->lmu);
	for (size_t i = 0; i < e->n_land; i++) {
		if (e->land[i].p != p)
			continue;
		e->land[i].busy = false;
		e->land_busy -= e->land[i].bytes;
		if (e->land_total > 2 * e->land_budget)
			drop(e, i);
		break;
	}
	pthread_mutex_unlock(&e->lmu);
	zs_listener_kick(e->l); /* a push may be waiting for that room */
}

void eng_land_free_all(struct engine *e)
{
	pthread_mutex_lock(&e->lmu);
	while (e->n_land)
		drop(e, e->n_land - 1);
	free(e->land);
	e->land = NULL;
	pthread_mutex_unlock(&e->lmu);
}
