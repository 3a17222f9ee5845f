/*
 * test_arena.c - the arena's allocator (net/arena.h) against a model of
 * its pages: 1,000 random cycles of jobs of random shapes taking buffers
 * and giving them back in random orders. After every call: no two buffers
 * overlap, the bytes taken are exact, a take fails only when no run of
 * free pages is long enough (the largest it reports is the model's), and
 * what it says may be dirty covers every page an earlier buffer had. With
 * everything given back the arena is one free region again, whatever the
 * history: a buffer of its whole length is taken.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "net/arena.h"

#define PAGE 4096u
#define PAGES 8192u /* 32 MiB */
#define JOBS 5
#define MAXB 32

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

struct model {
	uint8_t owner[PAGES]; /* 0 free, else the job + 1 */
	uint8_t ever[PAGES];  /* handed out at some time */
	uint64_t taken;
};

struct job {
	uint64_t off[MAXB], pages[MAXB];
	uint32_t n;
	bool live;
};

static uint64_t largest_run(const struct model *m)
{
	uint64_t best = 0, run = 0;
	for (uint32_t p = 0; p < PAGES; p++) {
		run = m->owner[p] ? 0 : run + 1;
		best = run > best ? run : best;
	}
	return best * PAGE;
}

/* false: refused, rightly */
static bool take(struct zs_arena_map *a, struct model *m, struct job *j, uint32_t id,
		 uint64_t bytes)
{
	uint64_t off, dirty, need = bytes ? (bytes + PAGE - 1) / PAGE : 1;
	uint64_t largest = largest_run(m);

	assert_int_equal(zs_arena_largest(a), largest);
	if (!zs_arena_take(a, bytes, &off, &dirty)) {
		/* refused only when no run of free pages is long enough */
		if (need * PAGE <= largest)
			fail_msg("a take of %llu pages refused with a run of %llu free",
				 (unsigned long long)need, (unsigned long long)(largest / PAGE));
		return false;
	}
	assert_int_equal(off % PAGE, 0);
	assert_true(off / PAGE + need <= PAGES);
	for (uint64_t p = off / PAGE; p < off / PAGE + need; p++) {
		if (m->owner[p])
			fail_msg("page %llu handed out twice", (unsigned long long)p);
		/* every page an earlier buffer had is within what must be zeroed */
		if (m->ever[p] && (p - off / PAGE) * PAGE >= dirty)
			fail_msg("page %llu held earlier bytes beyond the %llu to zero",
				 (unsigned long long)p, (unsigned long long)dirty);
		m->owner[p] = (uint8_t)(id + 1);
		m->ever[p] = 1;
	}
	m->taken += need * PAGE;
	j->off[j->n] = off;
	j->pages[j->n++] = need;
	assert_int_equal(a->taken, m->taken);
	return true;
}

static void give_all(struct zs_arena_map *a, struct model *m, struct job *j)
{
	/* in a random order */
	while (j->n) {
		uint32_t i = (uint32_t)(next() % j->n);
		assert_true(zs_arena_give(a, j->off[i]));
		for (uint64_t p = j->off[i] / PAGE; p < j->off[i] / PAGE + j->pages[i]; p++)
			m->owner[p] = 0;
		m->taken -= j->pages[i] * PAGE;
		j->off[i] = j->off[j->n - 1];
		j->pages[i] = j->pages[--j->n];
		assert_int_equal(a->taken, m->taken);
	}
	j->live = false;
}

static void test_random_cycles(void **st)
{
	static struct model m;
	static struct job jobs[JOBS];
	struct zs_arena_map a;
	uint64_t off, dirty, seed = (uint64_t)time(NULL);
	unsigned refused = 0;

	(void)st;
	if (getenv("ZSHARD_TEST_SEED"))
		seed = strtoull(getenv("ZSHARD_TEST_SEED"), NULL, 10);
	printf("arena: seed %llu (ZSHARD_TEST_SEED repeats it)\n", (unsigned long long)seed);
	rng = seed * 2654435761u + 1;
	memset(&m, 0, sizeof m);
	memset(jobs, 0, sizeof jobs);
	zs_arena_map_init(&a, (uint64_t)PAGES * PAGE);
	for (int cycle = 0; cycle < 1000; cycle++) {
		uint32_t id = (uint32_t)(next() % JOBS);
		struct job *j = &jobs[id];
		if (j->live) { /* deleted */
			give_all(&a, &m, j);
			continue;
		}
		/* created: a shape of its own, buffers from a page to 1.5 MiB,
		 * some odd sizes, some of zero bytes */
		uint32_t n = 1 + (uint32_t)(next() % MAXB);
		bool all = true;
		j->live = true;
		for (uint32_t b = 0; b < n; b++) {
			uint64_t bytes = next() % 4 == 0 ? next() % 5000 : next() % (3u << 19);
			all &= take(&a, &m, j, id, bytes);
		}
		refused += !all;
	}
	for (uint32_t id = 0; id < JOBS; id++)
		give_all(&a, &m, &jobs[id]);
	printf("arena: 1000 cycles; %u creations found the arena too full for all their buffers\n",
	       refused);
	/* empty again: one region of its whole length */
	assert_int_equal(a.taken, 0);
	assert_int_equal(a.used, 0);
	assert_int_equal(a.n, 0);
	assert_int_equal(zs_arena_largest(&a), (uint64_t)PAGES * PAGE);
	assert_true(zs_arena_take(&a, (uint64_t)PAGES * PAGE, &off, &dirty));
	assert_int_equal(off, 0);
	assert_int_equal(dirty, (uint64_t)PAGES * PAGE);
	assert_false(zs_arena_take(&a, 1, &off, &dirty));
	assert_true(zs_arena_give(&a, 0));
	zs_arena_map_release(&a);
}

/* Giving back what was not taken changes nothing. */
static void test_bad_gives(void **st)
{
	struct zs_arena_map a;
	uint64_t o1, o2, d;

	(void)st;
	zs_arena_map_init(&a, 1u << 20);
	assert_true(zs_arena_take(&a, 10000, &o1, &d));
	assert_true(zs_arena_take(&a, 4096, &o2, &d));
	assert_int_equal(o2, 12288);
	assert_false(zs_arena_give(&a, 4096)); /* inside a buffer */
	assert_false(zs_arena_give(&a, 1u << 19)); /* past the end */
	assert_true(zs_arena_give(&a, o1));
	assert_false(zs_arena_give(&a, o1)); /* twice */
	assert_int_equal(a.taken, 4096);
	/* the gap is reused first, and said dirty */
	assert_true(zs_arena_take(&a, 100, &o1, &d));
	assert_int_equal(o1, 0);
	assert_int_equal(d, 4096);
	assert_false(zs_arena_take(&a, UINT64_MAX - 100, &o1, &d)); /* wraps */
	zs_arena_map_release(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_cycles),
		cmocka_unit_test(test_bad_gives),
	};
	return cmocka_run_group_tests_name("arena", tests, NULL, NULL);
}
