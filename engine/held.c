/*
 * held.c - gathers held until their step exists: the ones a new version
 * releases, taken out under the shard's lock and served outside it.
 */
#include "engine/step.h"

const void *eng_served(struct eshard *s, const struct zs_xfer *x)
{
	return (const uint8_t *)s->copy + (x->offset - s->sh.offset) * s->dsz;
}

/* The held gathers of s's version, out of s->hold.q and added to *rel
 * (caller holds s->mu, serves them unlocked: eng_serve_released). */
void eng_take_released(struct eshard *s, struct held **rel, size_t *n_rel)
{
	size_t keep = 0;
	struct held *r;

	if (!s->hold.n || !eng_ready(s) || !(r = realloc(*rel, (*n_rel + s->hold.n) * sizeof *r)))
		return; /* out of memory: they stay held (and time out) */
	*rel = r;
	for (size_t h = 0; h < s->hold.n; h++)
		if (s->hold.q[h].x.step == s->version)
			r[(*n_rel)++] = s->hold.q[h];
		else
			s->hold.q[keep++] = s->hold.q[h];
	s->hold.n = keep;
}

void eng_serve_released(struct engine *e, struct eshard *s, struct held *rel, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		atomic_fetch_add(&e->ctr.bytes_out, rel[i].x.length * s->dsz);
		zs_sop_read_ready(rel[i].op, eng_served(s, &rel[i].x));
	}
	free(rel);
}
