/*
 * answered.c - the norm exchanges a server was answered, kept (see
 * answered.h).
 */
#include "engine/answered.h"

#include <stdlib.h>
#include <string.h>

struct zs_shard_norm *eng_ans_keep(struct eng_answers *a, uint64_t gen, uint64_t step,
				   double total, struct zs_shard_norm *nv, uint32_t n)
{
	struct eng_answered *e;

	if (a->gen != gen)
		return nv;
	e = &a->ring[a->next++ % ENG_ANSWERED_KEEP];
	free(e->nv);
	*e = (struct eng_answered){step, total, n, nv};
	return NULL;
}

void eng_ans_forget(struct eng_answers *a)
{
	for (unsigned i = 0; i < ENG_ANSWERED_KEEP; i++) {
		free(a->ring[i].nv);
		a->ring[i] = (struct eng_answered){0};
	}
	a->gen++;
}

enum zs_status eng_ans_of(const struct eng_answers *a, uint64_t step, struct zs_shard_norm **out,
			  uint32_t *n, double *total)
{
	uint32_t have = 0;

	*out = NULL;
	*n = 0;
	/* a step's primaries here may have gone in more than one exchange
	 * (a copy promoted during it reports on its own): all of them */
	for (unsigned i = 0; i < ENG_ANSWERED_KEEP; i++)
		if (a->ring[i].nv && a->ring[i].step == step)
			have += a->ring[i].n;
	if (!have)
		return ZS_ENOTFOUND;
	if (!(*out = malloc(have * sizeof **out)))
		return ZS_ENOMEM;
	for (unsigned i = 0; i < ENG_ANSWERED_KEEP; i++) {
		const struct eng_answered *e = &a->ring[i];
		if (!e->nv || e->step != step)
			continue;
		memcpy(*out + *n, e->nv, e->n * sizeof **out);
		*n += e->n;
		*total = e->total;
	}
	return ZS_OK;
}
