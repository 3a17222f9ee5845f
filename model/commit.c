/*
 * commit.c - a checkpoint's two-phase commit and a job's way back to one
 * (see commit.h).
 */
#include "model/commit.h"

#include <string.h>

#include "base/mutant.h"

bool zs_ck_of(const struct zs_checkpoint *k, const char *name, uint64_t incarnation)
{
	if (ZS_MUTANT(ZS_MUT_ANY_INCARNATION))
		return k && !strcmp(k->job, name);
	return k && k->incarnation == incarnation && !strcmp(k->job, name);
}

void zs_ck_sort_durable(uint64_t *v, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t k = i; k && v[k - 1] > v[k]; k--) {
			uint64_t x = v[k];
			v[k] = v[k - 1];
			v[k - 1] = x;
		}
}

/* Whether sid is in the sorted v (binary search). */
static bool in_sorted(const uint64_t *v, uint32_t n, uint64_t sid)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (v[mid] < sid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == sid;
}

bool zs_ck_all_durable(const uint64_t *ids, uint32_t n, const uint64_t *durable, uint32_t nd)
{
	uint32_t d = 0;

	if (ZS_MUTANT(ZS_MUT_COMMIT_BEFORE_LAST) && n > 1)
		n--; /* the last server of the job is not waited for */
	for (uint32_t i = 0; i < n; i++) {
		while (d < nd && durable[d] < ids[i])
			d++;
		if (d == nd || durable[d] != ids[i])
			return false;
	}
	return true;
}

enum zs_ck_take zs_ck_snapshot_report(const struct zs_checkpoint *k, bool ours,
				      const uint64_t *ids, uint32_t n, uint64_t sid, bool ok,
				      uint64_t *out)
{
	uint32_t at = 0;

	if (!k || !ours || k->state != ZS_CKPT_PENDING)
		return ZS_CK_NOT_PENDING;
	/* a second durable report of the same snapshot (the server took the
	 * task again from a listing fetched before its first report landed)
	 * counts once: counted twice, a checkpoint commits with another
	 * server's shards not durable */
	if (ok && in_sorted(k->durable, k->n_durable, sid) && !ZS_MUTANT(ZS_MUT_DURABLE_TWICE))
		return ZS_CK_AGAIN;
	if (!in_sorted(ids, n, sid))
		return ZS_CK_NOT_HOLDER;
	if (!ok)
		return ZS_CK_FAILED;
	while (at < k->n_durable && k->durable[at] < sid)
		at++;
	if (at)
		memcpy(out, k->durable, at * sizeof *out);
	out[at] = sid;
	if (k->n_durable > at)
		memcpy(out + at + 1, k->durable + at, (k->n_durable - at) * sizeof *out);
	if (ZS_MUTANT(ZS_MUT_DURABLE_TWICE)) /* the old rule: reports counted */
		return k->n_durable + 1 >= n ? ZS_CK_COMMIT : ZS_CK_DURABLE;
	return zs_ck_all_durable(ids, n, out, k->n_durable + 1) ? ZS_CK_COMMIT : ZS_CK_DURABLE;
}

uint64_t zs_ck_way_back(const struct zs_checkpoint *list, size_t n, const char *name,
			uint64_t incarnation, uint64_t restored_from)
{
	const struct zs_checkpoint *k = NULL;

	for (size_t i = 0; i < n; i++)
		if (zs_ck_of(&list[i], name, incarnation) && list[i].state == ZS_CKPT_COMMITTED)
			k = &list[i];
	/* none of its own yet: the one an operator restored it from, by id
	 * (its state started there) */
	for (size_t i = 0; !k && restored_from && i < n; i++)
		if (list[i].id == restored_from && !strcmp(list[i].job, name) &&
		    list[i].state == ZS_CKPT_COMMITTED)
			k = &list[i];
	return k ? k->id : ZS_CKPT_RESET;
}

enum zs_ck_restore zs_ck_restore_report(bool ok, enum zs_status code, uint64_t id,
					bool committed, uint32_t left)
{
	if (ok)
		return left ? ZS_CKR_WAIT : ZS_CKR_DONE;
	if ((code == ZS_EIO || code == ZS_ENOTFOUND) && id != ZS_CKPT_RESET && committed &&
	    !ZS_MUTANT(ZS_MUT_BAD_NOT_FALLEN_BACK))
		return ZS_CKR_BAD;
	return ZS_CKR_FAILED;
}
