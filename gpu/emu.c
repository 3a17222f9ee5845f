/*
 * emu.c - the emulated device (gpu/dev.h): host memory for the device's, a
 * thread per stream running its queue in order, each copy and zeroing after
 * a random delay (up to $ZSHARD_DEV_EMU_DELAY_US, default 300 us), so work
 * queued without the waits it needs reads or writes bytes at the wrong
 * time and a test sees it. The NULL stream is the calling thread.
 */
#include "gpu/dev_int.h"
#include "gpu/emu_shm.h"
#include "base/env.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct emu_event {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t gen;  /* records so far */
	uint64_t done; /* the last record completed */
};

enum item_kind { IT_COPY, IT_ZERO, IT_SIGNAL, IT_WAIT };

struct item {
	enum item_kind kind;
	void *dst;
	const void *src;
	size_t n;
	struct emu_event *ev;
	uint64_t gen;
	struct item *next;
};

struct emu;

struct emu_stream {
	struct emu *e;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item *head, *tail;
	uint64_t queued, finished;
	bool stop;
	unsigned seed;
};

struct emu {
	unsigned max_delay_us;
	atomic_ullong copies;
	atomic_uint seeds;
	struct emu_shms shms; /* shareable allocations (emu_shm.c) */
};

static void ev_complete(struct emu_event *ev, uint64_t gen)
{
	pthread_mutex_lock(&ev->mu);
	if (gen > ev->done)
		ev->done = gen;
	pthread_cond_broadcast(&ev->cv);
	pthread_mutex_unlock(&ev->mu);
}

static void ev_wait(struct emu_event *ev, uint64_t gen)
{
	pthread_mutex_lock(&ev->mu);
	while (ev->done < gen)
		pthread_cond_wait(&ev->cv, &ev->mu);
	pthread_mutex_unlock(&ev->mu);
}

static uint64_t ev_target(struct emu_event *ev, bool next)
{
	uint64_t g;
	pthread_mutex_lock(&ev->mu);
	g = next ? ++ev->gen : ev->gen;
	pthread_mutex_unlock(&ev->mu);
	return g;
}

static void delay(struct emu_stream *s)
{
	unsigned max = s->e->max_delay_us;
	if (max && rand_r(&s->seed) % 2)
		usleep((useconds_t)(rand_r(&s->seed) % (max + 1)));
}

static void run_item(struct emu_stream *s, struct item *it)
{
	switch (it->kind) {
	case IT_COPY:
		if (s)
			delay(s);
		memcpy(it->dst, it->src, it->n);
		break;
	case IT_ZERO:
		if (s)
			delay(s);
		memset(it->dst, 0, it->n);
		break;
	case IT_SIGNAL:
		ev_complete(it->ev, it->gen);
		break;
	case IT_WAIT:
		ev_wait(it->ev, it->gen);
		break;
	}
}

static void *stream_main(void *arg)
{
	struct emu_stream *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct item *it;
		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->head)
			break;
		it = s->head;
		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->mu);
		run_item(s, it);
		free(it);
		pthread_mutex_lock(&s->mu);
		s->finished++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Queues it on s, or runs it now on the NULL stream (the caller's thread). */
static enum zs_status put(struct zs_dev *d, zs_dev_stream stream, struct item it)
{
	struct emu_stream *s = stream;
	struct item *p;

	if (it.kind == IT_COPY || it.kind == IT_ZERO)
		atomic_fetch_add(&((struct emu *)d->impl)->copies, 1);
	if (!s) {
		run_item(NULL, &it);
		return ZS_OK;
	}
	p = malloc(sizeof *p);
	if (!p)
		return zs_dev_fail(d, ZS_ENOMEM, "out of memory queuing on an emulated stream");
	*p = it;
	p->next = NULL;
	pthread_mutex_lock(&s->mu);
	if (s->tail)
		s->tail->next = p;
	else
		s->head = p;
	s->tail = p;
	s->queued++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return ZS_OK;
}

static void *emu_host_alloc(struct zs_dev *d, size_t n)
{
	void *p = malloc(n);
	if (!p)
		zs_dev_fail(d, ZS_ENOMEM, "out of memory for %zu bytes of emulated device memory", n);
	return p;
}

static void emu_host_free(struct zs_dev *d, void *p)
{
	(void)d;
	free(p);
}

static void *emu_alloc(struct zs_dev *d, size_t n)
{
	struct emu *e = d->impl;
	return d->shareable ? emu_shm_alloc(d, &e->shms, n) : emu_host_alloc(d, n);
}

static void emu_free(struct zs_dev *d, void *p)
{
	struct emu *e = d->impl;
	if (!emu_shm_free(&e->shms, p))
		free(p);
}

static enum zs_status emu_share(struct zs_dev *d, const void *p, void **base, size_t *size,
				unsigned char handle[ZS_DEV_HANDLE_BYTES])
{
	struct emu *e = d->impl;
	return emu_shm_share(d, &e->shms, p, base, size, handle);
}

static enum zs_status emu_host_register(struct zs_dev *d, void *p, size_t n)
{
	(void)d;
	(void)p;
	(void)n;
	return ZS_OK; /* host memory is all alike here */
}

static void emu_host_unregister(struct zs_dev *d, void *p)
{
	(void)d;
	(void)p;
}

static enum zs_status emu_stream_create(struct zs_dev *d, zs_dev_stream *out)
{
	struct emu *e = d->impl;
	struct emu_stream *s = calloc(1, sizeof *s);

	if (!s)
		return zs_dev_fail(d, ZS_ENOMEM, "out of memory for an emulated stream");
	s->e = e;
	s->seed = 0x5eed0000u + atomic_fetch_add(&e->seeds, 1);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->th, NULL, stream_main, s)) {
		free(s);
		return zs_dev_fail(d, ZS_ENOMEM, "no thread for an emulated stream");
	}
	*out = s;
	return ZS_OK;
}

static void emu_stream_destroy(struct zs_dev *d, zs_dev_stream stream)
{
	struct emu_stream *s = stream;
	(void)d;
	pthread_mutex_lock(&s->mu);
	s->stop = true; /* what is queued still runs */
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->th, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

static enum zs_status emu_event_create(struct zs_dev *d, zs_dev_event *out)
{
	struct emu_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return zs_dev_fail(d, ZS_ENOMEM, "out of memory for an emulated event");
	pthread_mutex_init(&ev->mu, NULL);
	pthread_cond_init(&ev->cv, NULL);
	*out = ev;
	return ZS_OK;
}

static void emu_event_destroy(struct zs_dev *d, zs_dev_event e)
{
	struct emu_event *ev = e;
	(void)d;
	pthread_mutex_destroy(&ev->mu);
	pthread_cond_destroy(&ev->cv);
	free(ev);
}

static enum zs_status emu_copy(struct zs_dev *d, void *dst, const void *src, size_t n,
			       enum zs_dev_dir dir, zs_dev_stream s)
{
	(void)dir;
	return put(d, s, (struct item){.kind = IT_COPY, .dst = dst, .src = src, .n = n});
}

static enum zs_status emu_zero(struct zs_dev *d, void *dst, size_t n, zs_dev_stream s)
{
	return put(d, s, (struct item){.kind = IT_ZERO, .dst = dst, .n = n});
}

static enum zs_status emu_record(struct zs_dev *d, zs_dev_event e, zs_dev_stream s)
{
	struct emu_event *ev = e;
	return put(d, s, (struct item){.kind = IT_SIGNAL, .ev = ev, .gen = ev_target(ev, true)});
}

static enum zs_status emu_wait(struct zs_dev *d, zs_dev_stream s, zs_dev_event e)
{
	struct emu_event *ev = e;
	return put(d, s, (struct item){.kind = IT_WAIT, .ev = ev, .gen = ev_target(ev, false)});
}

static enum zs_status emu_query(struct zs_dev *d, zs_dev_event e)
{
	struct emu_event *ev = e;
	bool done;
	(void)d;
	pthread_mutex_lock(&ev->mu);
	done = ev->done >= ev->gen;
	pthread_mutex_unlock(&ev->mu);
	return done ? ZS_OK : ZS_EAGAIN;
}

static enum zs_status emu_sync(struct zs_dev *d, zs_dev_event e)
{
	struct emu_event *ev = e;
	(void)d;
	ev_wait(ev, ev_target(ev, false));
	return ZS_OK;
}

static enum zs_status emu_stream_sync(struct zs_dev *d, zs_dev_stream stream)
{
	struct emu_stream *s = stream;
	uint64_t q;
	(void)d;
	if (!s)
		return ZS_OK;
	pthread_mutex_lock(&s->mu);
	q = s->queued;
	while (s->finished < q)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	return ZS_OK;
}

static void emu_close(struct zs_dev *d)
{
	struct emu *e = d->impl;
	emu_shm_free_all(&e->shms);
	free(e);
}

static enum zs_status emu_bind(struct zs_dev *d)
{
	(void)d;
	return ZS_OK;
}

static const struct zs_dev_ops emu_ops = {
	.alloc = emu_alloc, .free = emu_free, .host_alloc = emu_host_alloc,
	.host_free = emu_host_free,
	.host_register = emu_host_register, .host_unregister = emu_host_unregister,
	.stream_create = emu_stream_create, .stream_destroy = emu_stream_destroy,
	.event_create = emu_event_create, .event_destroy = emu_event_destroy,
	.copy = emu_copy, .zero = emu_zero, .record = emu_record, .wait = emu_wait,
	.query = emu_query, .sync = emu_sync, .stream_sync = emu_stream_sync, .bind = emu_bind,
	.close = emu_close, .share = emu_share, .map = emu_map, .unmap = emu_unmap,
};

enum zs_status zs_dev_emu_open(struct zs_dev *d, char *why, size_t len)
{
	struct emu *e = calloc(1, sizeof *e);
	const char *v = zs_env("ZSHARD_DEV_EMU_DELAY_US");

	if (!e) {
		if (why && len)
			snprintf(why, len, "out of memory");
		return ZS_ENOMEM;
	}
	e->max_delay_us = v && *v ? (unsigned)strtoul(v, NULL, 10) : 300;
	emu_shm_init(&e->shms);
	d->ident = EMU_IDENT;
	d->ops = &emu_ops;
	d->impl = e;
	snprintf(d->name, sizeof d->name, "emulated");
	return ZS_OK;
}

unsigned long long zs_dev_emu_count(const struct zs_dev *d)
{
	return atomic_load(&((struct emu *)d->impl)->copies);
}
