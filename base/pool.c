/*
 * pool.c - worker threads that take queued tasks in order, started as
 * tasks need them, and a latch for fork and join (base/pool.h).
 */
#include "base/pool.h"

#include <stdio.h>
#include <stdlib.h>

struct task {
	void (*fn)(void *);
	void *arg;
	struct task *next;
};

struct zs_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct task *head, **tail;
	pthread_t *th;
	unsigned n_th, cap_th, max, n_idle, n_queued;
	bool stop;
	char name[16];
};

struct zs_pool *zs_pool_new(const char *name, unsigned max)
{
	struct zs_pool *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->tail = &p->head;
	p->max = max;
	snprintf(p->name, sizeof p->name, "%s", name);
	return p;
}

static void *worker(void *arg)
{
	struct zs_pool *p = arg;

	pthread_setname_np(pthread_self(), p->name);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct task *t;
		while (!p->head && !p->stop) {
			p->n_idle++;
			pthread_cond_wait(&p->cv, &p->mu);
			p->n_idle--;
		}
		if (!p->head) /* stopping, the queue run empty */
			break;
		t = p->head;
		p->head = t->next;
		if (!p->head)
			p->tail = &p->head;
		p->n_queued--;
		pthread_mutex_unlock(&p->mu);
		t->fn(t->arg);
		free(t);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* One more thread, when the queued tasks outnumber the idle threads and
 * the bound allows (caller holds p->mu). */
static void grow(struct zs_pool *p)
{
	if (p->n_queued <= p->n_idle || (p->max && p->n_th >= p->max))
		return;
	if (p->n_th == p->cap_th) {
		unsigned nc = p->cap_th ? 2 * p->cap_th : 4;
		pthread_t *g = realloc(p->th, nc * sizeof *g);
		if (!g)
			return;
		p->th = g;
		p->cap_th = nc;
	}
	if (!pthread_create(&p->th[p->n_th], NULL, worker, p))
		p->n_th++;
}

bool zs_pool_submit(struct zs_pool *p, void (*fn)(void *), void *arg)
{
	struct task *t = p ? malloc(sizeof *t) : NULL;

	if (!t)
		return false;
	*t = (struct task){fn, arg, NULL};
	pthread_mutex_lock(&p->mu);
	*p->tail = t;
	p->tail = &t->next;
	p->n_queued++;
	grow(p);
	if (!p->n_th) {
		/* nothing would ever run it: taken back (it is alone in the
		 * queue, as each task before it was taken back too) */
		p->head = NULL;
		p->tail = &p->head;
		p->n_queued = 0;
		pthread_mutex_unlock(&p->mu);
		free(t);
		return false;
	}
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return true;
}

unsigned zs_pool_threads(struct zs_pool *p)
{
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->n_th;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void zs_pool_free(struct zs_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->n_th; i++) /* the queue runs empty first */
		pthread_join(p->th[i], NULL);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->th);
	free(p);
}

void zs_latch_init(struct zs_latch *l, unsigned n)
{
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	l->left = n;
}

void zs_latch_done(struct zs_latch *l)
{
	pthread_mutex_lock(&l->mu);
	if (!--l->left)
		pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}

void zs_latch_wait(struct zs_latch *l)
{
	pthread_mutex_lock(&l->mu);
	while (l->left)
		pthread_cond_wait(&l->cv, &l->mu);
	pthread_mutex_unlock(&l->mu);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
}
