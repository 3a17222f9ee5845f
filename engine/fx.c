/*
 * fx.c - a shard's step moved on: the completion of a step whose every
 * push is in (the reduction finished, then clipping's exchange or the
 * update), and what a transition leaves to be done once the shard's lock
 * is let go (struct eng_fx, engine/step.h), carried out.
 */
#include "engine/step.h"

void eng_step_complete(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx)
{
	eng_finish_range(j, s, s->open.piped, s->lay.glen);
	if (j->spec.optim.clip_norm > 0.0)
		eng_clip_reduced(e, j, s, fx);
	else
		eng_apply(e, j, s, 1.0f, fx);
}

void eng_fx_run(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx)
{
	eng_fx_release(e, s, fx);
	if (fx->clip)
		eng_clip_exchange(e, j, s, fx->clip_t);
	*fx = (struct eng_fx){0};
}
