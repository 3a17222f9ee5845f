/* test_pool.c - base/pool.h: the worker pool and the latch. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "base/pool.h"

/* Waits for *flag, bounded (60 s: a pool that leaves a task unrun fails
 * here, not by hanging the suite). */
static bool wait_flag(atomic_int *flag)
{
	struct timespec ts = {0, 1000000};
	for (int i = 0; i < 60000; i++) {
		if (atomic_load(flag))
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

struct counter {
	atomic_int n;
	struct zs_latch *latch;
};

static void count(void *arg)
{
	struct counter *c = arg;
	atomic_fetch_add(&c->n, 1);
	if (c->latch)
		zs_latch_done(c->latch);
}

/* A bounded pool runs every task, on at most its bound of threads. */
static void test_bounded(void **st)
{
	struct zs_pool *p = zs_pool_new("test-bounded", 3);
	struct zs_latch l;
	struct counter c = {0, &l};

	(void)st;
	assert_non_null(p);
	assert_int_equal(zs_pool_threads(p), 0); /* none before a task */
	zs_latch_init(&l, 200);
	for (int i = 0; i < 200; i++)
		assert_true(zs_pool_submit(p, count, &c));
	zs_latch_wait(&l);
	assert_int_equal(atomic_load(&c.n), 200);
	assert_true(zs_pool_threads(p) >= 1 && zs_pool_threads(p) <= 3);
	zs_pool_free(p);
}

/* Tasks that wait for the one queued after them: without a bound each
 * has a thread, so the last one runs and releases the chain. */
struct link {
	atomic_int go, *next_go, done;
	struct zs_latch *latch;
};

static void chained(void *arg)
{
	struct link *k = arg;
	/* waits for its successor to have started (asserted on the test's
	 * thread: cmocka's asserts belong there) */
	bool ok = !k->next_go || wait_flag(k->next_go);
	atomic_store(&k->go, 1);
	atomic_store(&k->done, ok);
	zs_latch_done(k->latch);
}

static void started(void *arg)
{
	struct link *k = arg;
	atomic_store(&k->go, 1); /* started: its predecessor may finish */
	zs_latch_done(k->latch);
}

static void test_unbounded_chain(void **st)
{
	enum { N = 12 };
	struct zs_pool *p = zs_pool_new("test-chain", 0);
	struct link k[N] = {{0}};
	struct zs_latch l;

	(void)st;
	zs_latch_init(&l, N);
	for (int i = 0; i < N; i++) {
		k[i].latch = &l;
		k[i].next_go = i + 1 < N ? &k[i + 1].go : NULL;
	}
	for (int i = 0; i < N - 1; i++)
		assert_true(zs_pool_submit(p, chained, &k[i]));
	assert_true(zs_pool_submit(p, started, &k[N - 1]));
	zs_latch_wait(&l);
	for (int i = 0; i < N - 1; i++)
		assert_true(atomic_load(&k[i].done));
	assert_true(zs_pool_threads(p) >= N - 1);
	zs_pool_free(p);
}

/* One thread runs its tasks in the order queued; freeing runs what is
 * queued first. */
struct ordered {
	atomic_int gate;
	int seen[64], n;
};

struct step {
	struct ordered *o;
	int i;
};

static void in_order(void *arg)
{
	struct step *s = arg;
	if (s->i == 0 && !wait_flag(&s->o->gate)) /* the rest queue behind it */
		return;                                 /* (seen short: the test fails) */
	s->o->seen[s->o->n++] = s->i; /* one thread: no race */
}

static void test_order_and_drain(void **st)
{
	struct zs_pool *p = zs_pool_new("test-order", 1);
	struct ordered o = {0};
	struct step s[64];

	(void)st;
	for (int i = 0; i < 64; i++) {
		s[i] = (struct step){&o, i};
		assert_true(zs_pool_submit(p, in_order, &s[i]));
	}
	assert_int_equal(zs_pool_threads(p), 1);
	atomic_store(&o.gate, 1);
	zs_pool_free(p); /* returns once all 64 ran */
	assert_int_equal(o.n, 64);
	for (int i = 0; i < 64; i++)
		assert_int_equal(o.seen[i], i);
}

static void test_edges(void **st)
{
	struct zs_latch l;
	struct counter c = {0, NULL};

	(void)st;
	zs_latch_init(&l, 0);
	zs_latch_wait(&l); /* nothing to wait for */
	assert_false(zs_pool_submit(NULL, count, &c)); /* no pool: the caller runs it */
	zs_pool_free(NULL);
	assert_int_equal(atomic_load(&c.n), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_unbounded_chain),
		cmocka_unit_test(test_order_and_drain),
		cmocka_unit_test(test_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
