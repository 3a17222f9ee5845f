/*
 * dev.c - a device handle (gpu/dev.h): opens the backend the device number
 * names and passes each call to its table.
 */
#include "gpu/dev_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum zs_status zs_dev_open(int device, struct zs_dev **out, char *why, size_t len)
{
	struct zs_dev *d;
	enum zs_status st;

	*out = NULL;
	if (device < 0 && device != ZS_DEV_EMULATED) {
		if (why && len)
			snprintf(why, len, "no device %d: a CUDA ordinal (0, 1, ...) or the emulator (%d)",
				 device, ZS_DEV_EMULATED);
		return ZS_EINVAL;
	}
	d = calloc(1, sizeof *d);
	if (!d) {
		if (why && len)
			snprintf(why, len, "out of memory");
		return ZS_ENOMEM;
	}
	d->number = device;
	pthread_mutex_init(&d->smu, NULL);
	st = device == ZS_DEV_EMULATED ? zs_dev_emu_open(d, why, len)
				       : zs_dev_cuda_open(d, device, why, len);
	if (st) {
		pthread_mutex_destroy(&d->smu);
		free(d);
		return st;
	}
	*out = d;
	return ZS_OK;
}

void zs_dev_close(struct zs_dev *d)
{
	if (!d)
		return;
	d->ops->close(d);
	while (d->shared) {
		struct zs_dev_shared *x = d->shared;
		d->shared = x->next;
		free(x);
	}
	pthread_mutex_destroy(&d->smu);
	free(d);
}

const char *zs_dev_name(const struct zs_dev *d) { return d->name; }
int zs_dev_number(const struct zs_dev *d) { return d->number; }
bool zs_dev_emulated(const struct zs_dev *d) { return d->number == ZS_DEV_EMULATED; }
const char *zs_dev_error(const struct zs_dev *d) { return d->err; }

void *zs_dev_alloc(struct zs_dev *d, size_t n) { return d->ops->alloc(d, n ? n : 1); }

void zs_dev_free(struct zs_dev *d, void *p)
{
	struct zs_dev_shared **pp, *x;

	if (!p)
		return;
	pthread_mutex_lock(&d->smu);
	for (pp = &d->shared; (x = *pp);) {
		if (x->base == p) {
			*pp = x->next;
			free(x);
		} else {
			pp = &x->next;
		}
	}
	pthread_mutex_unlock(&d->smu);
	d->ops->free(d, p);
}

void *zs_dev_host_alloc(struct zs_dev *d, size_t n) { return d->ops->host_alloc(d, n ? n : 1); }

void zs_dev_host_free(struct zs_dev *d, void *p)
{
	if (p)
		d->ops->host_free(d, p);
}

enum zs_status zs_dev_host_register(struct zs_dev *d, void *p, size_t n)
{
	return n ? d->ops->host_register(d, p, n) : ZS_OK;
}

void zs_dev_host_unregister(struct zs_dev *d, void *p)
{
	if (p)
		d->ops->host_unregister(d, p);
}

enum zs_status zs_dev_stream_create(struct zs_dev *d, zs_dev_stream *s)
{
	return d->ops->stream_create(d, s);
}

void zs_dev_stream_destroy(struct zs_dev *d, zs_dev_stream s)
{
	if (s)
		d->ops->stream_destroy(d, s);
}

enum zs_status zs_dev_event_create(struct zs_dev *d, zs_dev_event *e)
{
	return d->ops->event_create(d, e);
}

void zs_dev_event_destroy(struct zs_dev *d, zs_dev_event e)
{
	if (e)
		d->ops->event_destroy(d, e);
}

enum zs_status zs_dev_copy(struct zs_dev *d, void *dst, const void *src, size_t n,
			   enum zs_dev_dir dir, zs_dev_stream s)
{
	return n ? d->ops->copy(d, dst, src, n, dir, s) : ZS_OK;
}

enum zs_status zs_dev_zero(struct zs_dev *d, void *dst, size_t n, zs_dev_stream s)
{
	return n ? d->ops->zero(d, dst, n, s) : ZS_OK;
}

enum zs_status zs_dev_record(struct zs_dev *d, zs_dev_event e, zs_dev_stream s)
{
	return d->ops->record(d, e, s);
}

enum zs_status zs_dev_wait(struct zs_dev *d, zs_dev_stream s, zs_dev_event e)
{
	return d->ops->wait(d, s, e);
}

enum zs_status zs_dev_query(struct zs_dev *d, zs_dev_event e) { return d->ops->query(d, e); }
enum zs_status zs_dev_sync(struct zs_dev *d, zs_dev_event e) { return d->ops->sync(d, e); }

enum zs_status zs_dev_stream_sync(struct zs_dev *d, zs_dev_stream s)
{
	return d->ops->stream_sync(d, s);
}

enum zs_status zs_dev_bind(struct zs_dev *d) { return d->ops->bind(d); }

enum zs_status zs_dev_copy_sync(struct zs_dev *d, void *dst, const void *src, size_t n,
				enum zs_dev_dir dir)
{
	enum zs_status st = zs_dev_copy(d, dst, src, n, dir, NULL);
	return st ? st : zs_dev_stream_sync(d, NULL);
}

unsigned long long zs_dev_emu_copies(const struct zs_dev *d)
{
	return zs_dev_emulated(d) ? zs_dev_emu_count(d) : 0;
}

/* -------------------------------------------------------------- sharing */

void zs_dev_set_shareable(struct zs_dev *d) { d->shareable = true; }

unsigned zs_dev_ident(const struct zs_dev *d) { return d->ident; }

enum zs_status zs_dev_share(struct zs_dev *d, const void *p, struct zs_dev_share *out)
{
	static atomic_ullong serials;
	struct zs_dev_shared *x;
	enum zs_status st = ZS_OK;
	const unsigned char *c = p;

	pthread_mutex_lock(&d->smu);
	for (x = d->shared; x; x = x->next)
		if (c >= (unsigned char *)x->base && c < (unsigned char *)x->base + x->size)
			break;
	if (!x) {
		x = calloc(1, sizeof *x);
		if (!x)
			st = zs_dev_fail(d, ZS_ENOMEM, "out of memory");
		else if ((st = d->ops->share(d, p, &x->base, &x->size, x->handle))) {
			free(x);
			x = NULL;
		} else {
			x->serial = atomic_fetch_add(&serials, 1) + 1;
			x->next = d->shared;
			d->shared = x;
		}
	}
	if (x) {
		memcpy(out->handle, x->handle, sizeof out->handle);
		out->serial = x->serial;
		out->offset = (unsigned long long)(c - (unsigned char *)x->base);
	}
	pthread_mutex_unlock(&d->smu);
	return st;
}

enum zs_status zs_dev_map(struct zs_dev *d, const unsigned char handle[ZS_DEV_HANDLE_BYTES],
			  void **base, size_t *size)
{
	return d->ops->map(d, handle, base, size);
}

void zs_dev_unmap(struct zs_dev *d, void *base, size_t size)
{
	if (base)
		d->ops->unmap(d, base, size);
}
