/*
 * resume.c - where a trainer resumes (model/resume.h).
 */
#include "model/resume.h"

#include "include/zshard.h"

int zs_resume_where(const struct zs_resume_in *in, uint32_t rank, uint64_t *step)
{
	const struct zs_worlds *w = in->worlds;

	*step = 0;
	if (in->redo) {
		*step = in->redo_step;
		return ZS_RESUMED_REDO;
	}
	if (in->stopped_step) {
		*step = in->stopped_step;
		return ZS_RESUMED_STOPPED;
	}
	/* a resize's new rank: the newest change it is in and was not
	 * before, unless a checkpoint restored since holds its state */
	for (uint32_t i = w ? w->n : 0; i-- > 0;) {
		uint32_t before = i ? w->v[i - 1].world : in->world_size;
		if (rank >= w->v[i].world)
			break; /* not in the latest world of all */
		if (rank < before)
			continue;
		if (in->restored_id && in->restored_step >= w->v[i].step)
			break;
		*step = w->v[i].step;
		return ZS_RESUMED_RESIZE;
	}
	if (!in->restored_id)
		return ZS_RESUMED_NONE;
	*step = in->restored_step;
	return ZS_RESUMED_CHECKPOINT;
}
