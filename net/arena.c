/*
 * arena.c - first-fit over one region's offsets, free neighbours merged,
 * the free tail given back (see arena.h). Must never touch memory: the
 * listener zeroes what a take says may be dirty.
 */
#include "net/arena.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 4096u

void zs_arena_map_init(struct zs_arena_map *m, uint64_t len)
{
	memset(m, 0, sizeof *m);
	m->len = len & ~(uint64_t)(PAGE - 1);
}

void zs_arena_map_release(struct zs_arena_map *m)
{
	free(m->v);
	memset(m, 0, sizeof *m);
}

/* Room for one more block; false when out of memory. */
static bool reserve(struct zs_arena_map *m)
{
	struct zs_arena_block *g;
	size_t cap;

	if (m->n < m->cap)
		return true;
	cap = m->cap ? m->cap * 2 : 64;
	g = realloc(m->v, cap * sizeof *g);
	if (!g)
		return false;
	m->v = g;
	m->cap = cap;
	return true;
}

static void remove_at(struct zs_arena_map *m, size_t i)
{
	memmove(m->v + i, m->v + i + 1, (m->n - i - 1) * sizeof *m->v);
	m->n--;
}

bool zs_arena_take(struct zs_arena_map *m, uint64_t bytes, uint64_t *off, uint64_t *zero_len)
{
	uint64_t need = (bytes + PAGE - 1) & ~(uint64_t)(PAGE - 1);
	size_t i = m->n;

	if (!need)
		need = PAGE;
	if (need < bytes) /* wrapped */
		return false;
	for (size_t k = 0; m->n_free && k < m->n; k++)
		if (!m->v[k].used && m->v[k].size >= need) {
			i = k;
			break;
		}
	if (i < m->n) {
		if (m->v[i].size > need) { /* split: the rest stays a free gap */
			if (!reserve(m))
				return false;
			memmove(m->v + i + 2, m->v + i + 1, (m->n - i - 1) * sizeof *m->v);
			m->v[i + 1] = (struct zs_arena_block){m->v[i].off + need, m->v[i].size - need,
							      false};
			m->n++;
			m->v[i].size = need;
		} else {
			m->n_free--;
		}
		m->v[i].used = true;
	} else {
		if (need > m->len - m->used || !reserve(m))
			return false;
		m->v[m->n++] = (struct zs_arena_block){m->used, need, true};
		m->used += need;
	}
	*off = m->v[i].off;
	*zero_len = m->dirty > *off ? (m->dirty - *off < need ? m->dirty - *off : need) : 0;
	if (*off + need > m->dirty)
		m->dirty = *off + need;
	m->taken += need;
	return true;
}

bool zs_arena_give(struct zs_arena_map *m, uint64_t off)
{
	size_t lo = 0, hi = m->n, i;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	i = lo;
	if (i == m->n || m->v[i].off != off || !m->v[i].used)
		return false;
	m->v[i].used = false;
	m->taken -= m->v[i].size;
	m->n_free++;
	if (i + 1 < m->n && !m->v[i + 1].used) { /* merge the next gap in */
		m->v[i].size += m->v[i + 1].size;
		remove_at(m, i + 1);
		m->n_free--;
	}
	if (i > 0 && !m->v[i - 1].used) { /* into the gap before */
		m->v[i - 1].size += m->v[i].size;
		remove_at(m, i);
		m->n_free--;
		i--;
	}
	if (i + 1 == m->n) { /* the free tail goes back to the region */
		m->used = m->v[i].off;
		remove_at(m, i);
		m->n_free--;
	}
	return true;
}

uint64_t zs_arena_largest(const struct zs_arena_map *m)
{
	uint64_t best = m->len - m->used;

	for (size_t k = 0; m->n_free && k < m->n; k++)
		if (!m->v[k].used && m->v[k].size > best)
			best = m->v[k].size;
	return best;
}
