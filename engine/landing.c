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
#include "engine/step.h"

#include "gpu/dev.h"

void engine_set_landing(struct engine *e, uint64_t budget)
{
	e->land.budget = budget;
}

void *eng_land_get(struct engine *e, size_t bytes, bool over_budget)
{
	size_t need = (bytes + 4095) & ~(size_t)4095;
	struct landbuf *b = NULL;

	pthread_mutex_lock(&e->land.mu);
	if (!over_budget && e->land.busy && e->land.busy + need > e->land.budget) {
		e->land.waits++;
		pthread_mutex_unlock(&e->land.mu);
		return NULL;
	}
	for (size_t i = 0; i < e->land.n && !b; i++)
		if (!e->land.buf[i].busy && e->land.buf[i].bytes == need)
			b = &e->land.buf[i];
	if (!b) {
		struct landbuf *g = realloc(e->land.buf, (e->land.n + 1) * sizeof *g);
		void *p = g ? zs_listener_alloc(e->l, need) : NULL;
		if (g)
			e->land.buf = g;
		if (!p) {
			pthread_mutex_unlock(&e->land.mu);
			return NULL;
		}
		b = &e->land.buf[e->land.n++];
		*b = (struct landbuf){.p = p, .bytes = need};
		/* copies to the device run at the link's speed from pinned pages */
		b->pinned = e->gpu.dev && !zs_dev_host_register(e->gpu.dev, p, need);
		e->land.total += need;
	}
	b->busy = true;
	e->land.busy += need;
	pthread_mutex_unlock(&e->land.mu);
	return b->p;
}

static void drop(struct engine *e, size_t i)
{
	if (e->land.buf[i].pinned)
		zs_dev_host_unregister(e->gpu.dev, e->land.buf[i].p);
	zs_listener_release(e->l, e->land.buf[i].p);
	e->land.total -= e->land.buf[i].bytes;
	e->land.buf[i] = e->land.buf[--e->land.n];
}

void eng_land_put(struct engine *e, void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&e->land.mu);
	for (size_t i = 0; i < e->land.n; i++) {
		if (e->land.buf[i].p != p)
			continue;
		e->land.buf[i].busy = false;
		e->land.busy -= e->land.buf[i].bytes;
		if (e->land.total > 2 * e->land.budget)
			drop(e, i);
		break;
	}
	pthread_mutex_unlock(&e->land.mu);
	zs_listener_kick(e->l); /* a push may be waiting for that room */
}

void eng_land_free_all(struct engine *e)
{
	pthread_mutex_lock(&e->land.mu);
	while (e->land.n)
		drop(e, e->land.n - 1);
	free(e->land.buf);
	e->land.buf = NULL;
	pthread_mutex_unlock(&e->land.mu);
}
