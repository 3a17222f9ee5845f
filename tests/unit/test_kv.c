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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_catalog_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_changes_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_map_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_dir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_dir, setup, teardown),
	};
	return cmocka_run_group_tests_name("kv", tests, NULL, NULL);
}
