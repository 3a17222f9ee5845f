/*
 * dev.c - a device handle (gpu/dev.h): opens the backend the device number
 * names and passes each call to its table.
 */
#include "gpu/dev_int.h"

#include <stdio.h>
#include <stdlib.h>

enum zs_status zs_dev_fail(struct zs_dev *d, enum zs_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->err, sizeof d->err, fmt, ap);
	va_end(ap);
	return st;
}

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
	st = device == ZS_DEV_EMULATED ? zs_dev_emu_open(d, why, len)
				       : zs_dev_cuda_open(d, device, why, len);
	if (st) {
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
	free(d);
}

const char *zs_dev_name(const struct zs_dev *d) { return d->name; }
int zs_dev_number(const struct zs_dev *d) { return d->number; }
bool zs_dev_emulated(const struct zs_dev *d) { return d->number == ZS_DEV_EMULATED; }
const char *zs_dev_error(const struct zs_dev *d) { return d->err; }

void *zs_dev_alloc(struct zs_dev *d, size_t n) { return d->ops->alloc(d, n ? n : 1); }

void zs_dev_free(struct zs_dev *d, void *p)
{
	if (p)
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
