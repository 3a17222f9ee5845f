/*
 * dev_int.h - a device handle and its backend's table (gpu/dev.h is the
 * API): dev.c dispatches, cudadrv.c is the CUDA driver API's backend,
 * emu.c the emulator's.
 */
#ifndef ZS_GPU_DEV_INT_H
#define ZS_GPU_DEV_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "gpu/dev.h"

struct zs_dev_ops {
	void *(*alloc)(struct zs_dev *d, size_t n);
	void (*free)(struct zs_dev *d, void *p);
	void *(*host_alloc)(struct zs_dev *d, size_t n);
	void (*host_free)(struct zs_dev *d, void *p);
	enum zs_status (*host_register)(struct zs_dev *d, void *p, size_t n);
	void (*host_unregister)(struct zs_dev *d, void *p);
	enum zs_status (*stream_create)(struct zs_dev *d, zs_dev_stream *s);
	void (*stream_destroy)(struct zs_dev *d, zs_dev_stream s);
	enum zs_status (*event_create)(struct zs_dev *d, zs_dev_event *e);
	void (*event_destroy)(struct zs_dev *d, zs_dev_event e);
	enum zs_status (*copy)(struct zs_dev *d, void *dst, const void *src, size_t n,
			       enum zs_dev_dir dir, zs_dev_stream s);
	enum zs_status (*zero)(struct zs_dev *d, void *dst, size_t n, zs_dev_stream s);
	enum zs_status (*record)(struct zs_dev *d, zs_dev_event e, zs_dev_stream s);
	enum zs_status (*wait)(struct zs_dev *d, zs_dev_stream s, zs_dev_event e);
	enum zs_status (*query)(struct zs_dev *d, zs_dev_event e);
	enum zs_status (*sync)(struct zs_dev *d, zs_dev_event e);
	enum zs_status (*stream_sync)(struct zs_dev *d, zs_dev_stream s);
	enum zs_status (*bind)(struct zs_dev *d);
	void (*close)(struct zs_dev *d);
	/* sharing (dev.c keeps the serials): the allocation holding p, its
	 * base and size, and its handle */
	enum zs_status (*share)(struct zs_dev *d, const void *p, void **base, size_t *size,
				unsigned char handle[ZS_DEV_HANDLE_BYTES]);
	enum zs_status (*map)(struct zs_dev *d, const unsigned char handle[ZS_DEV_HANDLE_BYTES],
			      void **base, size_t *size);
	void (*unmap)(struct zs_dev *d, void *base, size_t size);
};

/* an allocation shared so far (zs_dev_share), until it is freed */
struct zs_dev_shared {
	void *base;
	size_t size;
	unsigned long long serial;
	unsigned char handle[ZS_DEV_HANDLE_BYTES];
	struct zs_dev_shared *next;
};

struct zs_dev {
	const struct zs_dev_ops *ops;
	int number;
	char name[96];
	char err[256];
	void *impl; /* the backend's */
	bool shareable;  /* zs_dev_set_shareable */
	unsigned ident;  /* zs_dev_ident */
	pthread_mutex_t smu; /* shared */
	struct zs_dev_shared *shared;
};

/* Leaves the reason in d->err and returns st (here, with the handle:
 * the backends call it, and the front calls them). */
__attribute__((format(printf, 3, 4))) static inline enum zs_status
zs_dev_fail(struct zs_dev *d, enum zs_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->err, sizeof d->err, fmt, ap);
	va_end(ap);
	return st;
}


/* The backends' openers: fill d (ops, name, impl) or fail with why. */
enum zs_status zs_dev_cuda_open(struct zs_dev *d, int device, char *why, size_t len);
enum zs_status zs_dev_emu_open(struct zs_dev *d, char *why, size_t len);
unsigned long long zs_dev_emu_count(const struct zs_dev *d);

#endif
