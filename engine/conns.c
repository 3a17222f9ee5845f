/*
 * conns.c - a server's count of each rank's data connections and its
 * notes for the coordinator: pure (engine/conns.h).
 */
#include "engine/conns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mutant.h"

enum zs_conns_note zs_conns_up(struct zs_conns *r, uint64_t count, uint64_t session,
			       uint64_t *note_count, uint64_t *note_session)
{
	if (!r->conns || session != r->session || count > r->newest) {
		r->newest = count; /* a new process's connection is the newest */
		r->session = session;
	}
	*note_count = r->newest;
	*note_session = r->session;
	if (r->conns++ || !r->dropped)
		return ZS_CONNS_NONE;
	r->dropped = false;
	return ZS_CONNS_BACK;
}

enum zs_conns_note zs_conns_down(struct zs_conns *r, uint64_t *note_count, uint64_t *note_session)
{
	if (!ZS_MUTANT(ZS_MUT_OLDEST_COUNT))
		*note_count = r->newest; /* else the caller's: the one that ended */
	*note_session = r->session;
	if (!r->conns || --r->conns)
		return ZS_CONNS_NONE;
	if (ZS_MUTANT(ZS_MUT_DROP_UNLISTED))
		return ZS_CONNS_NONE;
	r->dropped = true;
	return ZS_CONNS_DROPPED;
}

static bool same(const struct zs_dropped *d, const char *job, uint64_t inc, uint32_t rank)
{
	return d->rank == rank && d->incarnation == inc && !strcmp(d->job, job);
}

static bool grow(struct zs_notes *l, uint32_t more)
{
	struct zs_dropped *g;
	uint32_t cap = l->cap ? l->cap : 16;

	while (cap < l->n + more)
		cap *= 2;
	if (cap == l->cap)
		return true;
	if (!(g = realloc(l->v, cap * sizeof *g)))
		return false;
	l->v = g;
	l->cap = cap;
	return true;
}

bool zs_notes_add(struct zs_notes *l, const char *job, uint64_t inc, uint32_t rank, bool back,
		  uint64_t reconnects, uint64_t session)
{
	struct zs_dropped *g;

	/* the rank's latest note, if not on its way: what the coordinator
	 * does with the notes of a rank depends on the last alone (a back
	 * clears, a drop marks), so it becomes this one */
	for (uint32_t i = l->n; i-- > l->flight;)
		if (same(&l->v[i], job, inc, rank)) {
			if (ZS_MUTANT(ZS_MUT_PAIR_CANCELLED) && l->v[i].back != back) {
				/* "a drop and a back cancel out": not when
				 * an earlier note of the rank is on its way */
				memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
				l->n--;
				return true;
			}
			l->v[i].back = back;
			l->v[i].reconnects = reconnects;
			l->v[i].session = session;
			return true;
		}
	if (!grow(l, 1))
		return false;
	g = &l->v[l->n++];
	memset(g, 0, sizeof *g);
	snprintf(g->job, sizeof g->job, "%s", job);
	g->incarnation = inc;
	g->rank = rank;
	g->back = back;
	g->reconnects = reconnects;
	g->session = session;
	return true;
}

uint32_t zs_notes_take(struct zs_notes *l, struct zs_dropped *out, uint32_t max)
{
	uint32_t n = l->n < max ? l->n : max;

	if (l->flight)
		return 0;
	if (n) /* (no list at all yet: v is NULL) */
		memcpy(out, l->v, n * sizeof *out);
	l->flight = n;
	return n;
}

void zs_notes_settle(struct zs_notes *l, bool sent)
{
	if (l->flight && (sent || ZS_MUTANT(ZS_MUT_UNSENT_LOST))) {
		memmove(l->v, l->v + l->flight, (l->n - l->flight) * sizeof *l->v);
		l->n -= l->flight;
	}
	l->flight = 0;
}

void zs_notes_free(struct zs_notes *l)
{
	free(l->v);
	*l = (struct zs_notes){0};
}
