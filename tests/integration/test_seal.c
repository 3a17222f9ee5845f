/*
 * test_seal.c - the job tokens at rest: the coordinator's catalog keeps
 * each job's data-plane token sealed by its secret key (ctrl/seal.h), on
 * LMDB (the data dir's secret.key, made at the first start) and in etcd
 * (--secret-key). The catalog's files, and etcd's value, hold no token;
 * the token comes back the same through restarts; one kept in the clear
 * (a catalog from before) is sealed at the next start, and the file is
 * rewritten without the freed pages that held it; a coordinator
 * without the key, with another key or with a key others may read
 * refuses to start, saying why; a sealed token moved to another job's
 * record does not open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrl/codec.h"
#include "ctrl/etcd.h"
#include "storage/kv.h"
#include "tests/harness.h"
#include "tests/integration/catalog_common.h"

#define T_JOBS 2
static const char *const tables[] = {"meta",    "servers", "jobs",  "ckpts",
				     "members", "ckplace", "ckblobs"};

static char token[ZS_TOKEN_MAX]; /* what the callbacks look for */
static char other_job[32]; /* put_moved: whose sealed token to copy */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	if (n >= 0 && (b = malloc((size_t)n + 1)) && fread(b, 1, (size_t)n, f) == (size_t)n) {
		b[n] = '\0';
		*len = (size_t)n;
	} else {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

static void job_token(const char *name, char *out, size_t len)
{
	struct zs_job j;
	struct zs_error err = {0};

	if (zs_coord_get_job_token(C.c, name, &j, &err))
		fail_msg("the token of job '%s': %s", name, err.msg);
	assert_true(strlen(j.token) >= 16);
	snprintf(out, len, "%s", j.token);
	zs_job_release(&j);
}

/* Job name's record as the catalog keeps it (LMDB under data). */
static void stored_job(const char *data, const char *name, struct zs_job *j)
{
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	const void *v;
	size_t vl;

	assert_int_equal(zs_kv_open(data, 0, tables, 7, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, false, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_get(t, T_JOBS, name, strlen(name), &v, &vl, NULL), ZS_OK);
	assert_int_equal(zs_dec_job(v, vl, j, NULL), ZS_OK);
	zs_kv_abort(t);
	zs_kv_close(kv);
}

static void put_job(const char *data, const struct zs_job *j)
{
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	struct zs_buf b;

	assert_int_equal(zs_enc_job(j, &b), ZS_OK);
	assert_int_equal(zs_kv_open(data, 0, tables, 7, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_put(t, T_JOBS, j->spec.name, strlen(j->spec.name), b.data, b.len,
				   NULL), ZS_OK);
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	zs_kv_close(kv);
	zs_buf_release(&b);
}

/* The record of job "sealed" holds its token sealed, no file of the
 * catalog holds the token, and the key is the owner's alone. */
static void check_sealed(const char *data)
{
	static const char *const files[] = {"data.mdb", "lock.mdb", "secret.key"};
	struct zs_job j;
	struct stat sb;
	char path[600];

	stored_job(data, "sealed", &j);
	assert_string_equal(j.token, "");
	assert_int_equal(j.token_sealed_len, strlen(token) + 28);
	zs_job_release(&j);
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		size_t n = 0;
		char *b;
		snprintf(path, sizeof path, "%s/%s", data, files[i]);
		b = slurp(path, &n);
		if (!b)
			fail_msg("cannot read %s", path);
		if (memmem(b, n, token, strlen(token)))
			fail_msg("%s holds the job's token (at byte %zu)", path,
				 (size_t)((char *)memmem(b, n, token, strlen(token)) - b));
		free(b);
	}
	snprintf(path, sizeof path, "%s/secret.key", data);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(sb.st_size, 32);
}

/* A catalog from before sealing: the token in the clear. */
static void put_clear(const char *data)
{
	struct zs_job j;

	stored_job(data, "sealed", &j);
	snprintf(j.token, sizeof j.token, "%s", token);
	j.token_sealed_len = 0;
	put_job(data, &j);
	zs_job_release(&j);
}

/* Job "sealed" given the sealed token of other_job: it must not open. */
static void put_moved(const char *data)
{
	struct zs_job j, o;

	stored_job(data, "sealed", &j);
	stored_job(data, other_job, &o);
	memcpy(j.token_sealed, o.token_sealed, o.token_sealed_len);
	j.token_sealed_len = o.token_sealed_len;
	put_job(data, &j);
	zs_job_release(&j);
	zs_job_release(&o);
}

/* A coordinator on the catalog under data (extra: one more flag and its
 * value, or NULL) must exit at start with a log that says why. */
static void refused(const char *data, const char *flag, const char *val, const char *why)
{
	char log[600], *out;
	size_t n = 0;
	int rc;

	snprintf(log, sizeof log, "%s/refused.log", C.dir);
	unlink(log);
	char *argv[] = {(char *)h_bin("zshard-coordinator"), "--listen", "127.0.0.1:0",
			"--data-dir", (char *)data, (char *)flag, (char *)val, NULL};
	pid_t p = h_spawn(argv, log);
	assert_true(p > 0);
	rc = h_stop(p, 0, 30000);
	out = slurp(log, &n);
	if (rc == 0 || rc == -1 || !out || !strstr(out, why))
		fail_msg("a coordinator that should refuse (%s) exited %d: %s", why, rc,
			 out ? out : "(no log)");
	free(out);
}

static void stop_coord(void)
{
	zs_coord_close(C.c);
	C.c = NULL;
	assert_int_equal(h_stop(C.coord, SIGKILL, 20000), 128 + SIGKILL);
}

static void test_lmdb(void **st)
{
	struct zs_job j, o;
	char data[512], key[600], aside[600], again[64];

	(void)st;
	NEED_COORD();
	snprintf(data, sizeof data, "%s/coord", C.dir);
	snprintf(key, sizeof key, "%s/secret.key", data);
	snprintf(aside, sizeof aside, "%s/secret.key.orig", C.dir);
	create_wide_job("sealed", 3, &j);
	job_token("sealed", token, sizeof token);
	restart_coord(check_sealed);
	job_token("sealed", again, sizeof again);
	assert_string_equal(again, token);

	/* a catalog from before: sealed at the next start, the same token */
	snprintf(token, sizeof token, "0123456789abcdef0123456789abcdef");
	restart_coord(put_clear);
	job_token("sealed", again, sizeof again);
	assert_string_equal(again, token);
	restart_coord(check_sealed);

	/* another job's sealed token does not open in this job's record */
	create_wide_job("other", 3, &o);
	snprintf(other_job, sizeof other_job, "other");
	stop_coord();
	put_moved(data);
	refused(data, NULL, NULL, "job 'sealed': its sealed data-plane token does not open");
	/* the key gone: a new one is made, and the tokens do not open */
	assert_int_equal(rename(key, aside), 0);
	refused(data, NULL, NULL, "does not open with the secret key");
	/* the key readable by others */
	assert_int_equal(rename(aside, key), 0);
	assert_int_equal(chmod(key, 0644), 0);
	refused(data, NULL, NULL, "may be read by others or written by its group (mode 644)");
	/* a key of another size, named by --secret-key */
	snprintf(aside, sizeof aside, "%s/short.key", C.dir);
	FILE *f = fopen(aside, "w");
	assert_non_null(f);
	fputs("too short\n", f);
	fclose(f);
	assert_int_equal(chmod(aside, 0600), 0);
	refused(data, "--secret-key", aside, "holds 10 bytes: it is 32 bytes, or 64 hex digits");
	/* with its key and a record as before, it starts, the token the same */
	assert_int_equal(chmod(key, 0600), 0);
	put_clear(data);
	if (!start_coord())
		fail_msg("the coordinator did not come back with its key");
	for (uint32_t i = 0; i < C.n_srv; i++) {
		uint32_t lease;
		uint64_t gen, tgen;
		assert_int_equal(zs_coord_heartbeat(C.c, C.ids[i], "", &lease, &gen, &tgen, NULL),
				 ZS_OK);
	}
	job_token("sealed", again, sizeof again);
	assert_string_equal(again, token);
	zs_job_release(&j);
	zs_job_release(&o);
}

/* In etcd (--secret-key): the value holds the token sealed, and it comes
 * back the same after the coordinator is killed and another leads. */
static void test_etcd(void **st)
{
	struct zs_etcd *e;
	struct zs_buf v;
	struct zs_job j, rec;
	char again[64], k[128];
	int64_t rev;

	(void)st;
	NEED_COORD();
	create_wide_job("sealed", 3, &j);
	job_token("sealed", token, sizeof token);
	assert_int_equal(zs_etcd_open(C.etcd_ep, 5000, &e, NULL), ZS_OK);
	snprintf(k, sizeof k, "/zshard/catalog/jobs/sealed");
	assert_int_equal(zs_etcd_get(e, k, strlen(k), &v, &rev, NULL), ZS_OK);
	if (memmem(v.data, v.len, token, strlen(token)))
		fail_msg("etcd's value of %s holds the job's token", k);
	assert_int_equal(zs_dec_job(v.data, v.len, &rec, NULL), ZS_OK);
	assert_string_equal(rec.token, "");
	assert_int_equal(rec.token_sealed_len, strlen(token) + 28);
	zs_job_release(&rec);
	zs_buf_release(&v);
	zs_etcd_close(e);
	restart_coord(NULL);
	job_token("sealed", again, sizeof again);
	assert_string_equal(again, token);
	zs_job_release(&j);
}

static int setup_lmdb(void **st)
{
	(void)st;
	return setup_with(4, false);
}

static int setup_etcd_sealed(void **st)
{
	(void)st;
	C.secret_key = true; /* --secret-key, made by the fixture */
	return setup_with(4, true);
}

int main(void)
{
	const struct CMUnitTest lmdb[] = {cmocka_unit_test(test_lmdb)};
	const struct CMUnitTest etcd[] = {cmocka_unit_test(test_etcd)};

	return cmocka_run_group_tests_name("sealed tokens", lmdb, setup_lmdb, teardown) |
	       cmocka_run_group_tests_name("sealed tokens in etcd", etcd, setup_etcd_sealed,
					   teardown);
}
