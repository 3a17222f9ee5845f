/* resize.c - a job's world size changed at a step boundary (see resize.h). */
#include "model/resize.h"

#include "base/mutant.h"
#include "model/model.h"

enum zs_rs_act zs_resize_decide(const struct zs_rs_in *in, uint64_t *at)
{
	*at = 0;
	if (in->want < 1 || in->want > ZS_MAX_WORLD)
		return ZS_RS_BAD_WORLD;
	if (in->collective)
		return ZS_RS_COLLECTIVE;
	if (in->restoring || in->stopping)
		return ZS_RS_BUSY;
	if (in->n_trainers && !in->have_top)
		return ZS_RS_NO_REPORT;
	if (in->n_trainers && in->named && in->named_step > in->top) {
		/* one named and not run yet: any rank may have its answer */
		*at = in->named_step;
		return in->want == in->last ? ZS_RS_SAME : ZS_RS_PENDING;
	}
	if (in->want == in->last)
		return ZS_RS_SAME;
	/* three past the latest report, as a stop's, and one more: the
	 * answer to a report posted at the step before names it */
	*at = in->n_trainers ? in->top + (ZS_MUTANT(ZS_MUT_RESIZE_AT_THREE) ? 3 : 4) : in->resume_step;
	return ZS_RS_ADD;
}

uint64_t zs_stop_step(uint64_t top, bool named, uint64_t named_step)
{
	uint64_t at = top + 3;

	if (named && named_step > top && named_step + 2 > at &&
	    !ZS_MUTANT(ZS_MUT_STOP_BEFORE_GROW))
		at = named_step + 2;
	return at;
}

uint32_t zs_shrink_ranks(uint32_t w, const uint32_t *away, uint32_t n_away, uint32_t *ranks,
			 uint32_t n)
{
	uint32_t a = 0, nw, gap = 0, below[64], n_below = 0;

	for (uint32_t i = 0; i < n_away; i++)
		a += away[i] < w;
	if (!a || a > w)
		return a ? 0 : w;
	nw = w - a;
	/* the numbers to fill: those away below the new world, in order */
	for (uint32_t r = 0; r < nw && n_below < 64; r++)
		for (uint32_t i = 0; i < n_away; i++)
			if (away[i] == r) {
				below[n_below++] = r;
				break;
			}
	for (uint32_t i = 0; i < n && gap < n_below; i++)
		if (ranks[i] >= nw && ranks[i] < w)
			ranks[i] = below[gap++];
	return nw;
}
