/*
 * pool.h - a small pool of worker threads for background work, and a latch
 * to wait for a group of tasks.
 *
 * Tasks run in the order queued. A task queued when no idle thread is left
 * for it starts one, up to the pool's bound; with no bound (0) every queued
 * task has a thread of its own to run on, for tasks that may wait for a
 * task queued after them (clipping's norm exchanges: one step's waits at
 * the coordinator for another's). Idle threads stay until the pool is
 * freed, which runs what is queued first and joins them.
 */
#ifndef ZS_POOL_H
#define ZS_POOL_H

#include <pthread.h>
#include <stdbool.h>

struct zs_pool;

/* A pool whose threads are named name (up to 15 characters shown, as
 * top -H and gdb list them) and number at most max (0: no bound); no
 * thread starts before the first task. NULL when out of memory. */
struct zs_pool *zs_pool_new(const char *name, unsigned max);

/* Queues fn(arg). False, with nothing queued, when the pool has no thread
 * and cannot start one (or is out of memory): the caller runs it itself. */
bool zs_pool_submit(struct zs_pool *p, void (*fn)(void *), void *arg);

/* Threads started so far (for tests and the stop's log). */
unsigned zs_pool_threads(struct zs_pool *p);

/* Runs what is queued, joins the threads and frees the pool (NULL: none).
 * No task may be submitted once it began. */
void zs_pool_free(struct zs_pool *p);

/* A count of tasks to wait for: each calls zs_latch_done once; the waiter
 * returns once every one has (and the latch may go). */
struct zs_latch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned left;
};
void zs_latch_init(struct zs_latch *l, unsigned n);
void zs_latch_done(struct zs_latch *l);
/* Waits for the count to reach zero, then destroys the latch. */
void zs_latch_wait(struct zs_latch *l);

#endif
