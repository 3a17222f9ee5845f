/*
 * test_etcd.c - zshard's etcd v3 client (ctrl/etcd.h) against a real etcd
 * (Debian's etcd-server, one member on loopback, started here): leases,
 * the election's create-if-absent, fenced transactions refused once the
 * fence moved, prefix ranges read in pages at one revision, prefix
 * deletes, and an endpoint list whose first member is down. Skips, saying
 * why, where etcd is not installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrl/etcd.h"
#include "tests/harness.h"

static struct {
	char *dir;
	pid_t pid;
	char ep[64];
	bool up;
} E;

static bool etcd_answers(void *arg)
{
	struct zs_etcd *e = arg;
	struct zs_buf v;
	int64_t rev;
	enum zs_status st = zs_etcd_get(e, "probe", 5, &v, &rev, NULL);

	zs_buf_release(&v);
	return st == ZS_OK || st == ZS_ENOTFOUND;
}

static int setup(void **state)
{
	struct zs_etcd *e;
	(void)state;

	E.dir = h_tmpdir("etcd");
	E.pid = h_start_etcd(E.dir, E.ep, sizeof E.ep);
	if (E.pid == 0) {
		print_message("etcd tests: skipped: no etcd (Debian's etcd-server)\n");
		return 0;
	}
	if (E.pid < 0 || zs_etcd_open(E.ep, 2000, &e, NULL))
		return -1;
	E.up = h_poll(etcd_answers, e, 20000);
	zs_etcd_close(e);
	return E.up ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (E.pid > 0)
		h_stop(E.pid, SIGTERM, 10000);
	if (E.dir) {
		h_rmtree(E.dir);
		free(E.dir);
	}
	return 0;
}

#define NEED_ETCD()                                                     \
	do {                                                            \
		if (!E.up) {                                            \
			skip();                                         \
		}                                                       \
	} while (0)

static struct zs_etcd *client(const char *eps)
{
	struct zs_etcd *e = NULL;
	struct zs_error err = {0};

	if (zs_etcd_open(eps, 2000, &e, &err))
		fail_msg("zs_etcd_open(%s): %s", eps, err.msg);
	return e;
}

/* The election: one creates the key, the next finds it held, and gets it
 * once the holder's lease is revoked; keepalive says 0 for a lease gone. */
static void test_lease_and_election(void **st)
{
	struct zs_etcd *e;
	struct zs_error err = {0};
	int64_t l1, l2, ttl, r1, r2, r3;
	bool won;
	(void)st;
	NEED_ETCD();
	e = client(E.ep);
	assert_int_equal(zs_etcd_lease_grant(e, 5, &l1, &ttl, &err), ZS_OK);
	assert_true(ttl >= 5);
	assert_int_equal(zs_etcd_lease_grant(e, 5, &l2, &ttl, &err), ZS_OK);
	assert_true(l1 != l2);
	assert_int_equal(zs_etcd_create(e, "/t/leader", 9, "a", 1, l1, &won, &r1, &err), ZS_OK);
	assert_true(won);
	assert_true(r1 > 0);
	assert_int_equal(zs_etcd_create(e, "/t/leader", 9, "b", 1, l2, &won, &r2, &err), ZS_OK);
	assert_false(won);
	assert_int_equal(r2, r1); /* the holder's fence */
	/* the holder's create sent again (its first answer lost, a timeout
	 * after etcd applied it): the key is its own, at the same fence; a
	 * coordinator that took it for another's stood by behind itself */
	won = false;
	assert_int_equal(zs_etcd_create(e, "/t/leader", 9, "a", 1, l1, &won, &r2, &err), ZS_OK);
	assert_true(won);
	assert_int_equal(r2, r1);
	assert_int_equal(zs_etcd_create(e, "/t/leader", 9, "b", 1, l2, &won, &r2, &err), ZS_OK);
	assert_false(won); /* still not the other lease's */
	assert_int_equal(zs_etcd_lease_keepalive(e, l1, &ttl, &err), ZS_OK);
	assert_true(ttl > 0);
	assert_int_equal(zs_etcd_lease_revoke(e, l1, &err), ZS_OK);
	assert_int_equal(zs_etcd_lease_keepalive(e, l1, &ttl, &err), ZS_OK);
	assert_int_equal(ttl, 0);
	assert_int_equal(zs_etcd_lease_revoke(e, l1, &err), ZS_OK); /* again: fine */
	assert_int_equal(zs_etcd_create(e, "/t/leader", 9, "b", 1, l2, &won, &r3, &err), ZS_OK);
	assert_true(won);
	assert_true(r3 > r1);
	struct zs_buf v;
	int64_t crev;
	assert_int_equal(zs_etcd_get(e, "/t/leader", 9, &v, &crev, &err), ZS_OK);
	assert_int_equal(v.len, 1);
	assert_memory_equal(v.data, "b", 1);
	assert_int_equal(crev, r3);
	zs_buf_release(&v);
	assert_int_equal(zs_etcd_lease_revoke(e, l2, &err), ZS_OK);
	assert_int_equal(zs_etcd_get(e, "/t/leader", 9, &v, &crev, &err), ZS_ENOTFOUND);
	zs_etcd_close(e);
}

/* A write fenced on the holder's create revision: applied while it holds,
 * refused (ZS_ESTATE, nothing written) once another holds the key. */
static void test_fenced_txn(void **st)
{
	struct zs_etcd *e;
	struct zs_error err = {0};
	int64_t l1, l2, ttl, fence, f2;
	bool won;
	struct zs_buf v;
	(void)st;
	NEED_ETCD();
	e = client(E.ep);
	assert_int_equal(zs_etcd_lease_grant(e, 5, &l1, &ttl, &err), ZS_OK);
	assert_int_equal(zs_etcd_create(e, "/f/leader", 9, "a", 1, l1, &won, &fence, &err), ZS_OK);
	assert_true(won);
	struct zs_etcd_op ops[] = {
		{ZS_ETCD_PUT, "/f/x", 4, "1", 1},
		{ZS_ETCD_PUT, "/f/y", 4, "2", 1},
	};
	assert_int_equal(zs_etcd_txn(e, "/f/leader", 9, fence, ops, 2, &err), ZS_OK);
	assert_int_equal(zs_etcd_get(e, "/f/y", 4, &v, &ttl, &err), ZS_OK);
	zs_buf_release(&v);
	/* deposed: the key's lease ends, another creates it */
	assert_int_equal(zs_etcd_lease_revoke(e, l1, &err), ZS_OK);
	assert_int_equal(zs_etcd_lease_grant(e, 5, &l2, &ttl, &err), ZS_OK);
	assert_int_equal(zs_etcd_create(e, "/f/leader", 9, "b", 1, l2, &won, &f2, &err), ZS_OK);
	assert_true(won);
	struct zs_etcd_op stale[] = {{ZS_ETCD_PUT, "/f/x", 4, "stale", 5}, {ZS_ETCD_DEL, "/f/y", 4}};
	assert_int_equal(zs_etcd_txn(e, "/f/leader", 9, fence, stale, 2, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "no longer leads"));
	assert_int_equal(zs_etcd_get(e, "/f/x", 4, &v, &ttl, &err), ZS_OK);
	assert_int_equal(v.len, 1); /* the stale write did not land */
	zs_buf_release(&v);
	assert_int_equal(zs_etcd_get(e, "/f/y", 4, &v, &ttl, &err), ZS_OK);
	zs_buf_release(&v);
	assert_int_equal(zs_etcd_txn(e, "/f/leader", 9, f2, stale, 2, &err), ZS_OK);
	assert_int_equal(zs_etcd_get(e, "/f/y", 4, &v, &ttl, &err), ZS_ENOTFOUND);
	assert_int_equal(zs_etcd_lease_revoke(e, l2, &err), ZS_OK);
	zs_etcd_close(e);
}

struct walk {
	int n;
	char last[64];
	bool ordered;
};

static enum zs_status count(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	struct walk *w = ctx;
	char key[64];

	(void)v;
	(void)vl;
	snprintf(key, sizeof key, "%.*s", (int)kl, (const char *)k);
	if (w->n && strcmp(w->last, key) >= 0)
		w->ordered = false;
	snprintf(w->last, sizeof w->last, "%s", key);
	w->n++;
	return ZS_OK;
}

/* More keys than one page (512), binary bytes in them, keys just outside
 * the prefix left out; a range at a past revision does not see later
 * writes; a prefix delete takes exactly the prefix. */
static void test_ranges_in_pages(void **st)
{
	struct zs_etcd *e;
	struct zs_error err = {0};
	struct walk w = {.ordered = true};
	int64_t rev = 0, rev2;
	char k[32];
	(void)st;
	NEED_ETCD();
	e = client(E.ep);
	for (int i = 0; i < 1300; i++) {
		snprintf(k, sizeof k, "/r/%05d", i);
		struct zs_etcd_op op = {ZS_ETCD_PUT, k, strlen(k), "v", 1};
		assert_int_equal(zs_etcd_txn(e, NULL, 0, 0, &op, 1, &err), ZS_OK);
	}
	struct zs_etcd_op outside[] = {{ZS_ETCD_PUT, "/r", 2, "x", 1}, {ZS_ETCD_PUT, "/s/0", 4, "x", 1},
				       {ZS_ETCD_PUT, "/r0", 3, "x", 1}};
	assert_int_equal(zs_etcd_txn(e, NULL, 0, 0, outside, 3, &err), ZS_OK);
	assert_int_equal(zs_etcd_range_prefix(e, "/r/", 3, &rev, count, &w, &err), ZS_OK);
	assert_int_equal(w.n, 1300);
	assert_true(w.ordered);
	assert_string_equal(w.last, "/r/01299");
	assert_true(rev > 0);
	/* later writes are not in the earlier revision */
	struct zs_etcd_op more = {ZS_ETCD_PUT, "/r/99999", 8, "v", 1};
	assert_int_equal(zs_etcd_txn(e, NULL, 0, 0, &more, 1, &err), ZS_OK);
	w = (struct walk){.ordered = true};
	rev2 = rev;
	assert_int_equal(zs_etcd_range_prefix(e, "/r/", 3, &rev2, count, &w, &err), ZS_OK);
	assert_int_equal(w.n, 1300);
	assert_int_equal(rev2, rev);
	/* a prefix delete: the prefix only */
	struct zs_etcd_op del = {ZS_ETCD_DEL_PREFIX, "/r/", 3};
	assert_int_equal(zs_etcd_txn(e, NULL, 0, 0, &del, 1, &err), ZS_OK);
	w = (struct walk){.ordered = true};
	rev = 0;
	assert_int_equal(zs_etcd_range_prefix(e, "/r", 2, &rev, count, &w, &err), ZS_OK);
	assert_int_equal(w.n, 2); /* "/r" and "/r0" */
	zs_etcd_close(e);
}

/* A list whose first endpoint is down: calls go to the next; a list of
 * none that answers fails within its bound, naming etcd. */
static void test_endpoint_list(void **st)
{
	struct zs_etcd *e;
	struct zs_error err = {0};
	char eps[160];
	int64_t l, ttl;
	(void)st;
	NEED_ETCD();
	snprintf(eps, sizeof eps, "127.0.0.1:%d, %s", h_free_port(), E.ep);
	e = client(eps);
	assert_int_equal(zs_etcd_lease_grant(e, 5, &l, &ttl, &err), ZS_OK);
	assert_int_equal(zs_etcd_lease_revoke(e, l, &err), ZS_OK);
	zs_etcd_close(e);
	snprintf(eps, sizeof eps, "127.0.0.1:%d", h_free_port());
	e = client(eps);
	assert_int_equal(zs_etcd_lease_grant(e, 5, &l, &ttl, &err), ZS_EUNAVAIL);
	assert_non_null(strstr(err.msg, "etcd"));
	zs_etcd_close(e);
	assert_int_equal(zs_etcd_open("", 1000, &e, &err), ZS_EINVAL);
	assert_int_equal(zs_etcd_open("host-without-port", 1000, &e, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "host-without-port"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lease_and_election),
		cmocka_unit_test(test_fenced_txn),
		cmocka_unit_test(test_ranges_in_pages),
		cmocka_unit_test(test_endpoint_list),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
