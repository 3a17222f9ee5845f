/*
 * test_commit.c - a checkpoint's two-phase commit and a job's way back,
 * decided (model/commit.c), case by case: which report counts, when a
 * checkpoint commits (a job over more servers than any fixed array), which
 * checkpoint a rollback restores (never an earlier job's of the name), and
 * when a restore's failure condemns its checkpoint. The simulator's
 * checkpoint world runs the same rules under crashes and flipped records
 * (sim/ckpt.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "model/commit.h"

static struct zs_checkpoint ck(uint64_t id, const char *job, uint64_t inc,
			       enum zs_ckpt_state state)
{
	struct zs_checkpoint k = {.id = id, .incarnation = inc, .state = state, .step = id * 10};

	strcpy(k.job, job);
	return k;
}

/* Two servers: the first durable report counts, its second does not, a
 * server of no shard of the job never counts, the last one commits. */
static void test_two_servers(void **st)
{
	const uint64_t ids[] = {3, 7};
	uint64_t out[3];
	struct zs_checkpoint k = ck(1, "j", 5, ZS_CKPT_PENDING);

	(void)st;
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 2, 7, true, out), ZS_CK_DURABLE);
	assert_int_equal(out[0], 7);
	k.durable = out;
	k.n_durable = 1;
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 2, 7, true, out + 1), ZS_CK_AGAIN);
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 2, 9, true, out + 1),
			 ZS_CK_NOT_HOLDER);
	uint64_t out2[2];
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 2, 3, true, out2), ZS_CK_COMMIT);
	assert_int_equal(out2[0], 3); /* kept sorted */
	assert_int_equal(out2[1], 7);
	/* a failure of a server of the job fails it; of another, nothing */
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 2, 3, false, out2), ZS_CK_FAILED);
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 2, 9, false, out2),
			 ZS_CK_NOT_HOLDER);
}

/* Committed, failed, an earlier job's, or none: refused. */
static void test_not_pending(void **st)
{
	const uint64_t ids[] = {1};
	uint64_t out[1];
	struct zs_checkpoint k = ck(1, "j", 5, ZS_CKPT_COMMITTED);

	(void)st;
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 1, 1, true, out), ZS_CK_NOT_PENDING);
	k.state = ZS_CKPT_FAILED;
	assert_int_equal(zs_ck_snapshot_report(&k, true, ids, 1, 1, true, out), ZS_CK_NOT_PENDING);
	k.state = ZS_CKPT_PENDING;
	assert_int_equal(zs_ck_snapshot_report(&k, false, ids, 1, 1, true, out), ZS_CK_NOT_PENDING);
	assert_int_equal(zs_ck_snapshot_report(NULL, true, ids, 1, 1, true, out), ZS_CK_NOT_PENDING);
	assert_true(zs_ck_of(&k, "j", 5));
	assert_false(zs_ck_of(&k, "j", 6)); /* the job created again */
	assert_false(zs_ck_of(&k, "other", 5));
	assert_false(zs_ck_of(NULL, "j", 5));
}

/* A job over 1,000 servers commits with its last, in any order, and not
 * one report before. */
static void test_many_servers(void **st)
{
	enum { N = 1000 };
	uint64_t *ids = malloc(N * sizeof *ids), *a = malloc((N + 1) * sizeof *a),
		 *b = malloc((N + 1) * sizeof *b);
	struct zs_checkpoint k = ck(1, "j", 5, ZS_CKPT_PENDING);

	(void)st;
	for (uint32_t i = 0; i < N; i++)
		ids[i] = 10 + 3 * i;
	for (uint32_t i = 0; i < N; i++) {
		uint64_t sid = ids[(i * 389) % N]; /* 389 is prime to 1000: each once */
		enum zs_ck_take t = zs_ck_snapshot_report(&k, true, ids, N, sid, true, a);
		assert_int_equal(t, i == N - 1 ? ZS_CK_COMMIT : ZS_CK_DURABLE);
		memcpy(b, a, (i + 1) * sizeof *b); /* a: the new list; b: the checkpoint's */
		k.durable = b;
		k.n_durable = i + 1;
	}
	for (uint32_t i = 1; i < N; i++)
		assert_true(k.durable[i - 1] < k.durable[i]);
	assert_true(zs_ck_all_durable(ids, N, k.durable, N));
	assert_false(zs_ck_all_durable(ids, N, k.durable + 1, N - 1));
	free(ids);
	free(a);
	free(b);
}

/* A list recorded unsorted is sorted; sorted, it stays. */
static void test_sort(void **st)
{
	uint64_t v[] = {9, 2, 5, 1, 8};

	(void)st;
	zs_ck_sort_durable(v, 5);
	assert_int_equal(v[0], 1);
	assert_int_equal(v[1], 2);
	assert_int_equal(v[2], 5);
	assert_int_equal(v[3], 8);
	assert_int_equal(v[4], 9);
}

/* The newest committed of the job's own incarnation; an earlier job's of
 * the name never, but the one an operator restored it from, by id; a
 * reset with neither. */
static void test_way_back(void **st)
{
	struct zs_checkpoint v[] = {
		ck(1, "j", 4, ZS_CKPT_COMMITTED), /* an earlier job's of the name */
		ck(2, "j", 5, ZS_CKPT_COMMITTED),
		ck(3, "x", 5, ZS_CKPT_COMMITTED), /* another job's */
		ck(4, "j", 5, ZS_CKPT_FAILED),
		ck(5, "j", 5, ZS_CKPT_PENDING),
		ck(6, "j", 4, ZS_CKPT_COMMITTED), /* newer, but the earlier job's */
	};

	(void)st;
	assert_int_equal(zs_ck_way_back(v, 6, "j", 5, 0), 2);
	assert_int_equal(zs_ck_way_back(v, 6, "j", 4, 0), 6);
	assert_int_equal(zs_ck_way_back(v, 6, "j", 7, 0), ZS_CKPT_RESET);
	assert_int_equal(zs_ck_way_back(v, 6, "j", 7, 1), 1); /* restored from it */
	assert_int_equal(zs_ck_way_back(v, 6, "j", 7, 4), ZS_CKPT_RESET); /* failed */
	assert_int_equal(zs_ck_way_back(v, 6, "j", 7, 3), ZS_CKPT_RESET); /* another job's */
	assert_int_equal(zs_ck_way_back(v, 6, "j", 5, 1), 2); /* its own first */
	v[1].state = ZS_CKPT_FAILED; /* found bad: the way back is older */
	assert_int_equal(zs_ck_way_back(v, 6, "j", 5, 0), ZS_CKPT_RESET);
}

/* A checksum that fails or a record gone condemns a committed checkpoint;
 * anything else, or a reset, is the server's moment. */
static void test_restore_report(void **st)
{
	(void)st;
	assert_int_equal(zs_ck_restore_report(true, ZS_OK, 2, true, 1), ZS_CKR_WAIT);
	assert_int_equal(zs_ck_restore_report(true, ZS_OK, 2, true, 0), ZS_CKR_DONE);
	assert_int_equal(zs_ck_restore_report(false, ZS_EIO, 2, true, 1), ZS_CKR_BAD);
	assert_int_equal(zs_ck_restore_report(false, ZS_ENOTFOUND, 2, true, 0), ZS_CKR_BAD);
	assert_int_equal(zs_ck_restore_report(false, ZS_ENOSPC, 2, true, 0), ZS_CKR_FAILED);
	assert_int_equal(zs_ck_restore_report(false, ZS_EIO, ZS_CKPT_RESET, true, 0),
			 ZS_CKR_FAILED);
	assert_int_equal(zs_ck_restore_report(false, ZS_EIO, 2, false, 0), ZS_CKR_FAILED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_servers),   cmocka_unit_test(test_not_pending),
	    cmocka_unit_test(test_many_servers),  cmocka_unit_test(test_sort),
	    cmocka_unit_test(test_way_back),      cmocka_unit_test(test_restore_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
