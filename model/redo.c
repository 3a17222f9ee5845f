/*
 * redo.c - a lost trainer's step, decided (model/redo.h).
 */
#include "model/redo.h"

#include <stddef.h>

#include "base/mutant.h"

bool zs_rstep_begun(struct zs_rstep *r, uint64_t step)
{
	if (r->lost && step < r->step)
		return false;
	r->step = step;
	r->known = true;
	r->lost = false;
	return true;
}

const char *zs_rstep_lose(struct zs_rstep *r, const struct zs_redo_job *j)
{
	if (j->collective)
		return "its ranks reduce among themselves (a collective job)";
	if (j->settling)
		return "the job is being restored or is stopping";
	if (!r || !r->known)
		return "the coordinator does not know the step it was in (it restarted, or took over, since)";
	/* a run that continues a stopped job redoes like any other once the
	 * rank began one of its steps; before, it is the stop's */
	if (j->stopped_step && r->step < j->stopped_step)
		return "the job is stopped, and the rank had begun none of its steps since";
	r->lost = true;
	return NULL;
}

bool zs_redo_push_waits(uint64_t known1, uint64_t step)
{
	return known1 < step + 1 && !ZS_MUTANT(ZS_MUT_PUSH_BEFORE_KNOWN);
}
