/*
 * redo.c - what a server keeps so that a lost trainer's replacement redoes
 * only the lost rank's step (docs/DESIGN.md, "A lost trainer costs one
 * step"): each shard's parameters of the step before its version (the
 * replacement gathers the step it redoes, which units already updated
 * have left behind). Which of a rank's pushes of the open step are in (a
 * push the replacement sends again is dropped, once: the sum counts each
 * rank's term of a step once) is engine/intake.c's (eng_in_redo_check).
 *
 * Why one step back is enough: a rank lost in step t had told the
 * coordinator it began t before its first push of t (client/lease.c), and
 * no shard applies step t + 1 without that rank's push of it; so every
 * shard is at version t or t + 1, and version t is its copy or its prev.
 */
#include "engine/step.h"

#include "engine/kept.h"

void eng_prev_init(struct engine *e, struct eshard *s, size_t pad)
{
	if (s->lay.marks)
		return; /* a frozen shard's copy never changes: served from it */
	s->prev.p = zs_listener_alloc(e->l, pad * s->dsz);
	s->prev.arena = s->prev.p != NULL;
	if (!s->prev.p) /* the arena is full: served over tcp only */
		s->prev.p = calloc(pad ? pad : 1, s->dsz);
}

void eng_prev_release(struct engine *e, struct eshard *s)
{
	if (s->prev.arena && e->l)
		zs_listener_release(e->l, s->prev.p);
	else if (!s->prev.arena)
		free(s->prev.p);
	s->prev = (struct eshard_prev){0};
}

void eng_prev_save(struct eshard *s, size_t a, size_t b)
{
	if (!s->prev.p)
		return;
	s->prev.of = 0; /* part old, part new until the update is done */
	memcpy((uint8_t *)s->prev.p + a * s->dsz, (const uint8_t *)s->copy + a * s->dsz,
	       (b - a) * s->dsz);
}

enum zs_status eng_prev_served(struct eshard *s, const struct zs_xfer *x, bool offsets,
			       const void **src, struct zs_error *err)
{
	const char *why = NULL;

	enum eng_kept k = eng_kept_at(s->lay.marks, s->version, x->step, s->prev.p != NULL,
				      s->prev.of, false);

	if (k == EK_NOW)
		*src = eng_served(s, x); /* frozen: every version is the same */
	else if (k != EK_PREV)
		why = "it is not kept (a server keeps the step before a shard's version, for a lost rank's replacement)";
	else if (offsets && !s->prev.arena)
		why = "it is kept outside the shared arena (the arena was full), and this connection reads the arena: use tcp";
	else
		*src = (const uint8_t *)s->prev.p + (x->offset - s->sh.offset) * s->dsz;
	if (why)
		return zs_fail(err, ZS_ESTATE, "shard %u is at step %llu: step %llu is gone: %s",
			       s->sh.index, (unsigned long long)s->version,
			       (unsigned long long)x->step, why);
	return ZS_OK;
}
