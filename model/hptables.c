/*
 * hptables.c - hyperparameter tables by step, decided (model/hptables.h).
 */
#include "model/hptables.h"

#include <stddef.h>
#include <string.h>

#include "base/mutant.h"

int zs_hp_same(const struct zs_hp_table *a, const struct zs_hp_table *b)
{
	return a->n_groups == b->n_groups && !memcmp(&a->clip_norm, &b->clip_norm, sizeof a->clip_norm) &&
	       !memcmp(a->g, b->g, a->n_groups * sizeof a->g[0]);
}

enum zs_hp_put zs_hp_list_put(struct zs_hp_table *v, uint32_t *n, uint32_t cap,
			      const struct zs_hp_table *t, uint64_t low, uint32_t *at)
{
	uint32_t i, keep = 0;

	for (i = 0; i < *n && v[i].step < t->step; i++)
		;
	*at = i;
	if (i < *n && v[i].step == t->step)
		return zs_hp_same(&v[i], t) ? ZS_HP_PUT_SAME : ZS_HP_PUT_DIFFERS;
	/* tables no step here will read again: those followed by one in
	 * force at the slowest shard's step */
	for (uint32_t k = 0; k < *n; k++)
		if (k + 1 == *n || v[k + 1].step > low)
			v[keep++] = v[k];
		else if (k < i)
			i--;
	*n = keep;
	if (*n == cap)
		return ZS_HP_PUT_FULL;
	memmove(&v[i + 1], &v[i], (*n - i) * sizeof v[0]);
	v[i] = *t;
	(*n)++;
	*at = i;
	return ZS_HP_PUT_NEW;
}

const struct zs_hp_table *zs_hp_list_at(const struct zs_hp_table *v, uint32_t n, uint64_t step)
{
	for (int k = (int)n - 1; k >= 0; k--)
		if (v[k].step <= step)
			return &v[k];
	return NULL;
}

uint32_t zs_hp_for_new(const struct zs_hp_table *hist, uint32_t n,
		       const struct zs_hp_table *sending, const struct zs_hp_table **out)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++)
		out[k++] = &hist[i];
	if (sending && !ZS_MUTANT(ZS_MUT_SENDING_NOT_RESENT))
		out[k++] = sending;
	return k;
}
