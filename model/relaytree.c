/*
 * relaytree.c - the weight readers' relay tree (see relaytree.h).
 */
#include "model/relaytree.h"

#include "base/mutant.h"

uint64_t zs_rt_timeline(const struct zs_reader_info *said, const struct zs_reader_info *known,
			uint64_t job_tl)
{
	if (!said->pinned || (said->step & ZS_VERSION_CKPT))
		return 0;
	if (said->timeline)
		return said->timeline;
	/* a renewal sent before the answer to its pin came: the one given,
	 * while it is still the job's run (after a rollback the same step
	 * number is another version: a new pin of it is the new run's) */
	if (known && known->pinned && known->timeline && known->step == said->step &&
	    known->timeline == job_tl + 1)
		return known->timeline;
	return job_tl + 1;
}

static bool same_tree(const struct zs_reader_info *a, const struct zs_reader_info *b)
{
	return b->pinned && b->step == a->step &&
	       (b->timeline == a->timeline || ZS_MUTANT(ZS_MUT_TREE_ANY_TIMELINE)) &&
	       (b->relay_addr[0] || ZS_MUTANT(ZS_MUT_TREE_NON_RELAY));
}

int zs_rt_parent(const struct zs_reader_info *v, uint32_t n, uint32_t me, uint32_t fanout)
{
	uint32_t p = 0, k = 0;

	if (!v[me].pinned || !fanout)
		return -1;
	/* me's place: the relaying readers of its tree with smaller ids
	 * (a reader relaying nothing comes after them all) */
	for (uint32_t i = 0; i < n; i++)
		if (i != me && same_tree(&v[me], &v[i]) &&
		    (v[i].id < v[me].id || !v[me].relay_addr[0]))
			p++;
	if (!p)
		return -1;
	/* the (p - 1) / fanout-th of them by id */
	const uint32_t want = (p - 1) / fanout;
	uint64_t last = 0;
	for (;;) {
		int best = -1;
		for (uint32_t i = 0; i < n; i++)
			if (i != me && same_tree(&v[me], &v[i]) && v[i].id > last &&
			    (best < 0 || v[i].id < v[best].id))
				best = (int)i;
		if (best < 0)
			return -1;
		if (k++ == want)
			return best;
		last = v[best].id;
	}
}
