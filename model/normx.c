/*
 * normx.c - clipping's norm exchange at the coordinator (see normx.h).
 */
#include "model/normx.h"

#include <math.h>
#include <stdlib.h>

#include "base/mutant.h"

bool zs_nx_timeline_ok(uint64_t r, uint64_t now)
{
	return !r || r == now || ZS_MUTANT(ZS_MUT_OLD_TIMELINE_COUNTED);
}

int zs_nx_init(struct zs_nx *nc, uint32_t n_shards)
{
	*nc = (struct zs_nx){.n_shards = n_shards};
	nc->sumsq = calloc(n_shards ? n_shards : 1, sizeof *nc->sumsq);
	nc->have = calloc(n_shards ? n_shards : 1, sizeof *nc->have);
	if (!nc->sumsq || !nc->have) {
		zs_nx_free(nc);
		return -1;
	}
	return 0;
}

void zs_nx_free(struct zs_nx *nc)
{
	free(nc->sumsq);
	free(nc->have);
	nc->sumsq = NULL;
	nc->have = NULL;
}

/* Whether the report can be taken whole (nothing changes otherwise). */
static enum zs_nx_verdict check(const struct zs_nx *nc, const uint32_t *pos, const double *sumsq,
				uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (!(sumsq[i] >= 0.0) || sumsq[i] == INFINITY)
			return ZS_NX_NOT_FINITE;
		/* the same report again (its server's call met a broken
		 * connection and was sent again) counts once; another norm
		 * for a shard in is a server that reduced otherwise */
		if (nc->have[pos[i]] && nc->sumsq[pos[i]] != sumsq[i])
			return ZS_NX_OTHER_NORM;
	}
	return ZS_NX_WAIT;
}

/* Every shard in: the total in place order, or a settled server's total
 * that differs from it. */
static enum zs_nx_verdict complete(const struct zs_nx *nc, double *total)
{
	double t = 0.0;

	for (uint32_t k = 0; k < nc->n_shards; k++)
		if (nc->have[k])
			t += nc->sumsq[k];
	*total = t;
	if (nc->settled && t != nc->settled_total && !ZS_MUTANT(ZS_MUT_SETTLED_UNCHECKED))
		return ZS_NX_DIVERGED;
	return ZS_NX_COMPLETE;
}

enum zs_nx_verdict zs_nx_report(struct zs_nx *nc, const uint32_t *pos, const double *sumsq,
				uint32_t n, double *total)
{
	enum zs_nx_verdict v = check(nc, pos, sumsq, n);

	if (v != ZS_NX_WAIT)
		return v;
	for (uint32_t i = 0; i < n; i++) {
		if (nc->have[pos[i]] && !ZS_MUTANT(ZS_MUT_NORM_COUNTED_TWICE))
			continue; /* sent again: counted once */
		if (nc->have[pos[i]]) { /* the mutant: its norm added again */
			nc->sumsq[pos[i]] += sumsq[i];
			continue;
		}
		nc->sumsq[pos[i]] = sumsq[i];
		nc->have[pos[i]] = true;
		nc->n_have++;
	}
	return nc->n_have == nc->n_shards ? complete(nc, total) : ZS_NX_WAIT;
}

const struct zs_nx_done *zs_nx_kept(const struct zs_nx_done *kept, size_t n, uint64_t timeline,
				    uint64_t step)
{
	for (size_t i = 0; i < n; i++)
		if (kept[i].step == step &&
		    (kept[i].timeline == timeline || ZS_MUTANT(ZS_MUT_KEPT_ANY_TIMELINE)))
			return &kept[i];
	return NULL;
}

enum zs_nx_verdict zs_nx_settled(struct zs_nx *nc, const struct zs_nx_done *kept, uint64_t now,
				 uint64_t r_timeline, uint64_t by, double applied,
				 const uint32_t *pos, const double *sumsq, uint32_t n,
				 double *total)
{
	enum zs_nx_verdict v;

	if (r_timeline != now)
		return ZS_NX_OLD_TIMELINE;
	if (kept && kept->total != applied) /* the servers' updates differ */
		return ZS_NX_DIVERGED;
	if (!nc) {
		*total = applied;
		return ZS_NX_ANSWER; /* nothing waits for it (any more) */
	}
	if (nc->settled && nc->settled_total != applied)
		return ZS_NX_DIVERGED;
	if ((v = check(nc, pos, sumsq, n)) != ZS_NX_WAIT)
		return v;
	nc->settled = true;
	nc->settled_total = applied;
	nc->settled_by = by;
	v = zs_nx_report(nc, pos, sumsq, n, total);
	if (v == ZS_NX_WAIT)
		*total = applied;
	return v;
}
