/* test_kv.c - the LMDB store and the coordinator's catalog records: write,
 * reopen, read back; aborted writes leave nothing; a full map says so. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <unistd.h>

#include "ctrl/codec.h"
#include "tests/unit/fixtures.h"
#include "base/crc32c.h"
#include "base/le.h"
#include "storage/ckpt.h"
#include "storage/kv.h"
#include "base/util.h"

static const char *const tables[] = {"meta", "jobs"};

static int setup(void **st)
{
	char *d = strdup("/tmp/zshard-kv-XXXXXX");
	if (!mkdtemp(d))
		return -1;
	*st = d;
	return 0;
}

static int teardown(void **st)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf %s", (char *)*st);
	if (system(cmd))
		return -1;
	free(*st);
	return 0;
}

static enum zs_status count(void *ctx, const void *k, size_t kl, const void *v, size_t vl)
{
	(void)k; (void)kl; (void)v; (void)vl;
	(*(int *)ctx)++;
	return ZS_OK;
}

static void test_catalog_reopen(void **st)
{
	const char *dir = *st;
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	struct zs_job j = {0}, k;
	struct zs_buf b;
	const void *v;
	size_t vl;
	uint8_t n8[8];

	fixture_spec(&j.spec, "catalog");
	assert_int_equal(zs_job_spec_normalize(&j.spec, NULL), ZS_OK);
	j.created_ms = 42;
	assert_int_equal(zs_kv_open(dir, 0, tables, 2, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_enc_job(&j, &b), ZS_OK);
	assert_int_equal(zs_kv_put(t, 1, "catalog", 7, b.data, b.len, NULL), ZS_OK);
	zs_kv_u64_enc(0x0102030405060708ULL, n8);
	assert_int_equal(zs_kv_put(t, 0, "gen", 3, n8, 8, NULL), ZS_OK);
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	zs_buf_release(&b);
	zs_kv_close(kv);

	/* a new environment handle on the same files sees the records */
	assert_int_equal(zs_kv_open(dir, 0, tables, 2, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, false, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_get(t, 1, "catalog", 7, &v, &vl, NULL), ZS_OK);
	assert_int_equal(zs_dec_job(v, vl, &k, NULL), ZS_OK);
	assert_string_equal(k.spec.name, "catalog");
	assert_int_equal(k.created_ms, 42);
	assert_int_equal(k.spec.layout.n_units, 3);
	assert_int_equal(zs_kv_get(t, 0, "gen", 3, &v, &vl, NULL), ZS_OK);
	assert_int_equal(vl, 8);
	assert_int_equal(zs_kv_u64_dec(v), 0x0102030405060708ULL);
	assert_int_equal(zs_kv_get(t, 1, "nope", 4, &v, &vl, NULL), ZS_ENOTFOUND);
	zs_kv_abort(t);
	zs_kv_close(kv);
	zs_job_release(&k);
	zs_job_release(&j);
}

static void test_abort_changes_nothing(void **st)
{
	const char *dir = *st;
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	const void *v;
	size_t vl;
	int n = 0;

	assert_int_equal(zs_kv_open(dir, 0, tables, 2, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_put(t, 1, "a", 1, "1", 1, NULL), ZS_OK);
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_put(t, 1, "b", 1, "2", 1, NULL), ZS_OK);
	assert_int_equal(zs_kv_del(t, 1, "a", 1, NULL), ZS_OK);
	zs_kv_abort(t);
	assert_int_equal(zs_kv_begin(kv, false, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_get(t, 1, "a", 1, &v, &vl, NULL), ZS_OK);
	assert_int_equal(zs_kv_get(t, 1, "b", 1, &v, &vl, NULL), ZS_ENOTFOUND);
	assert_int_equal(zs_kv_foreach(t, 1, count, &n, NULL), ZS_OK);
	assert_int_equal(n, 1);
	zs_kv_abort(t);
	zs_kv_close(kv);
}

static void test_map_full(void **st)
{
	const char *dir = *st;
	struct zs_error err = {0};
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	char *big = calloc(1, 4 << 20);
	enum zs_status s;

	assert_int_equal(zs_kv_open(dir, 1 << 20, tables, 2, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	s = zs_kv_put(t, 1, "big", 3, big, 4 << 20, &err);
	assert_int_equal(s, ZS_ENOSPC);
	assert_non_null(strstr(err.msg, dir));
	zs_kv_abort(t);
	zs_kv_close(kv);
	free(big);
}

static void test_not_a_dir(void **st)
{
	struct zs_error err = {0};
	struct zs_kv *kv;
	char path[512];
	FILE *f;

	snprintf(path, sizeof path, "%s/file", (char *)*st);
	f = fopen(path, "w");
	fputs("x", f);
	fclose(f);
	assert_int_not_equal(zs_kv_open(path, 0, tables, 2, 0, &kv, &err), ZS_OK);
	assert_non_null(strstr(err.msg, path));
}

static void test_lock_dir(void **st)
{
	struct zs_error err = {0};
	int fd1, fd2;

	assert_int_equal(zs_lock_dir(*st, "x.lock", &fd1, NULL), ZS_OK);
	/* flock conflicts between open file descriptions, even in one process */
	assert_int_equal(zs_lock_dir(*st, "x.lock", &fd2, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "in use by another process"));
	close(fd1);
	assert_int_equal(zs_lock_dir(*st, "x.lock", &fd2, NULL), ZS_OK);
	close(fd2);
}

/* A prefix delete takes every key under the prefix and nothing else,
 * also when they are the last keys of the table or all of it. */
static void test_del_prefix(void **st)
{
	const char *dir = *st;
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	int n = 0;

	assert_int_equal(zs_kv_open(dir, 0, tables, 2, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_put(t, 1, "a1", 2, "x", 1, NULL), ZS_OK);
	assert_int_equal(zs_kv_put(t, 1, "a2", 2, "x", 1, NULL), ZS_OK);
	assert_int_equal(zs_kv_put(t, 1, "b1", 2, "x", 1, NULL), ZS_OK);
	assert_int_equal(zs_kv_put(t, 1, "b2", 2, "x", 1, NULL), ZS_OK);
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_del_prefix(t, 1, "b", 1, NULL), ZS_OK); /* the last keys */
	assert_int_equal(zs_kv_foreach(t, 1, count, &n, NULL), ZS_OK);
	assert_int_equal(n, 2);
	assert_int_equal(zs_kv_del_prefix(t, 1, "a", 1, NULL), ZS_OK); /* all that is left */
	n = 0;
	assert_int_equal(zs_kv_foreach(t, 1, count, &n, NULL), ZS_OK);
	assert_int_equal(n, 0);
	assert_int_equal(zs_kv_del_prefix(t, 1, "a", 1, NULL), ZS_OK); /* nothing there */
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	zs_kv_close(kv);
}

/* Rewrites the stored value of a record with byte off xor-ed by mask
 * (the CRC left as it was: a bit flipped on disk). */
static void flip(struct zs_kv *kv, const uint8_t *key, size_t kl, size_t off, uint8_t mask)
{
	struct zs_kv_txn *t;
	const void *v;
	size_t vl;
	uint8_t *copy;

	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_get(t, 0, key, kl, &v, &vl, NULL), ZS_OK);
	copy = malloc(vl);
	memcpy(copy, v, vl);
	copy[off] ^= mask;
	assert_int_equal(zs_kv_put(t, 0, key, kl, copy, vl, NULL), ZS_OK);
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	free(copy);
}

static enum zs_status get(struct zs_kv *kv, uint64_t *step, float *out, struct zs_error *err)
{
	struct zs_kv_txn *t;
	enum zs_status st;

	assert_int_equal(zs_kv_begin(kv, false, &t, NULL), ZS_OK);
	st = ckpt_get(t, 0, "job", 7, 1, 2, CKPT_MASTER, step, out, 16, err);
	zs_kv_abort(t);
	return st;
}

/*
 * Checkpoint records: written and read back; a bit flipped in the array,
 * in the step or in the size is caught (the CRC covers the header too);
 * a record of the earlier format (CRC of the array alone) still reads.
 */
static void test_ckpt_records(void **st)
{
	const char *dir = *st;
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	struct zs_error err = {0};
	uint8_t key[CKPT_KEY_MAX];
	size_t kl = ckpt_key(key, "job", 7, 1, 2, CKPT_MASTER);
	float in[16], out[16];
	uint64_t step = 0;

	for (int i = 0; i < 16; i++)
		in[i] = (float)i * 0.5f;
	assert_int_equal(zs_kv_open(dir, 0, tables, 1, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(ckpt_put(t, 0, "job", 7, 1, 2, CKPT_MASTER, 42, in, 16, NULL), ZS_OK);
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	assert_int_equal(get(kv, &step, out, &err), ZS_OK);
	assert_int_equal(step, 42);
	assert_memory_equal(in, out, sizeof in);

	flip(kv, key, kl, CKPT_HDR + 5, 0x10); /* the array */
	assert_int_equal(get(kv, &step, out, &err), ZS_EIO);
	assert_non_null(strstr(err.msg, "checksum"));
	flip(kv, key, kl, CKPT_HDR + 5, 0x10);
	assert_int_equal(get(kv, &step, out, &err), ZS_OK);

	flip(kv, key, kl, 16, 0x01); /* the step: 42 -> 43 */
	assert_int_equal(get(kv, &step, out, &err), ZS_EIO);
	assert_non_null(strstr(err.msg, "checksum"));
	flip(kv, key, kl, 16, 0x01);

	flip(kv, key, kl, 15, 0x80); /* the size: caught before any read */
	assert_int_equal(get(kv, &step, out, &err), ZS_EIO);
	flip(kv, key, kl, 15, 0x80);

	{ /* the earlier format */
		uint8_t v1[CKPT_HDR + sizeof in];
		memcpy(v1, "ZSC1", 4);
		zs_put32(v1 + 4, 1);
		zs_put64(v1 + 8, 16);
		zs_put64(v1 + 16, 9);
		memcpy(v1 + CKPT_HDR, in, sizeof in);
		zs_put32(v1 + 24, zs_crc32c(0, v1 + CKPT_HDR, sizeof in));
		zs_put32(v1 + 28, 0);
		assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
		assert_int_equal(zs_kv_put(t, 0, key, kl, v1, sizeof v1, NULL), ZS_OK);
		assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
		assert_int_equal(get(kv, &step, out, &err), ZS_OK);
		assert_int_equal(step, 9);
		assert_memory_equal(in, out, sizeof in);
	}
	zs_kv_close(kv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_catalog_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ckpt_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_prefix, setup, teardown),
	};
	return cmocka_run_group_tests_name("kv", tests, NULL, NULL);
}
