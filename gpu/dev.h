/*
 * dev.h - a device's memory, streams and events, as the trainer's device
 * mode and the tests use them: device and pinned host memory, copies and
 * memsets queued on streams, events recorded on one stream and waited for
 * by another stream or by the host. Two backends behind one table:
 *
 *   cuda      the CUDA driver API (libcuda.so.1, loaded when a device is
 *             opened, so nothing here needs CUDA to build, link or run
 *             without a GPU); streams and events are CUstream / CUevent,
 *             so a caller's stream from any CUDA runtime (torch's) works;
 *   emulated  host memory for the device, a thread per stream that runs its
 *             queue in order after a random delay before each copy (so a
 *             missing wait shows as wrong bytes, not as luck): the device
 *             mode's staging and event order, tested without a GPU. Its
 *             NULL stream is the calling thread itself (work on it is done
 *             at once; waiting on it blocks the host until the event).
 *
 * Every call that can fail returns a zs_status (ZS_EIO for a device error,
 * ZS_ENOMEM for memory) and leaves the reason in zs_dev_error(d). One device
 * handle may be used from several threads (each stream from one at a time).
 */
#ifndef ZS_GPU_DEV_H
#define ZS_GPU_DEV_H

#include <stdbool.h>
#include <stddef.h>

#include "include/zshard_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* device numbers: >= 0 a CUDA device; this one the emulator */
#define ZS_DEV_EMULATED (-2)

struct zs_dev;
typedef void *zs_dev_stream; /* CUstream, or the emulator's; NULL: see above */
typedef void *zs_dev_event;

/* The CUDA devices here: their count, or -1 with why (no driver). */
int zs_dev_count(char *why, size_t len);

/* Opens device (a CUDA ordinal or ZS_DEV_EMULATED): ZS_OK and *out, or
 * ZS_EUNAVAIL (no driver, no such device) / ZS_EIO with why. */
enum zs_status zs_dev_open(int device, struct zs_dev **out, char *why, size_t len);
void zs_dev_close(struct zs_dev *d);
/* "cuda:0 NVIDIA H200" or "emulated"; the device number. */
const char *zs_dev_name(const struct zs_dev *d);
int zs_dev_number(const struct zs_dev *d);
bool zs_dev_emulated(const struct zs_dev *d);
const char *zs_dev_error(const struct zs_dev *d);

/* Makes the device current on the calling thread (CUDA: its primary
 * context, which the runtime's kernels then use too); every call here does
 * it itself. */
enum zs_status zs_dev_bind(struct zs_dev *d);

/* Device memory and pinned (page-locked) host memory; NULL with the reason
 * in zs_dev_error. Frees take NULL. */
void *zs_dev_alloc(struct zs_dev *d, size_t n);
void zs_dev_free(struct zs_dev *d, void *p);
void *zs_dev_host_alloc(struct zs_dev *d, size_t n);
void zs_dev_host_free(struct zs_dev *d, void *p);

/* Pins host memory the caller allocated (page-locked, for fast copies)
 * until unregistered; ZS_OK, or the device's error (the memory still
 * works, unpinned). */
enum zs_status zs_dev_host_register(struct zs_dev *d, void *p, size_t n);
void zs_dev_host_unregister(struct zs_dev *d, void *p);

enum zs_status zs_dev_stream_create(struct zs_dev *d, zs_dev_stream *s);
void zs_dev_stream_destroy(struct zs_dev *d, zs_dev_stream s);
enum zs_status zs_dev_event_create(struct zs_dev *d, zs_dev_event *e);
void zs_dev_event_destroy(struct zs_dev *d, zs_dev_event e);

enum zs_dev_dir { ZS_DEV_H2D, ZS_DEV_D2H };
/* Queues a copy of n bytes on s (H2D: dst is device memory, src host). */
enum zs_status zs_dev_copy(struct zs_dev *d, void *dst, const void *src, size_t n,
			   enum zs_dev_dir dir, zs_dev_stream s);
/* A synchronous copy (on the NULL stream, waited for). */
enum zs_status zs_dev_copy_sync(struct zs_dev *d, void *dst, const void *src, size_t n,
				enum zs_dev_dir dir);
/* Queues zeroing n bytes of device memory on s. */
enum zs_status zs_dev_zero(struct zs_dev *d, void *dst, size_t n, zs_dev_stream s);
/* e completes once everything queued on s so far has. */
enum zs_status zs_dev_record(struct zs_dev *d, zs_dev_event e, zs_dev_stream s);
/* Work queued on s from now on waits for e's last record. */
enum zs_status zs_dev_wait(struct zs_dev *d, zs_dev_stream s, zs_dev_event e);
/* ZS_OK when e's last record completed (or e was never recorded),
 * ZS_EAGAIN while not, ZS_EIO on a device error. */
enum zs_status zs_dev_query(struct zs_dev *d, zs_dev_event e);
/* The host waits for e / for everything queued on s. */
enum zs_status zs_dev_sync(struct zs_dev *d, zs_dev_event e);
enum zs_status zs_dev_stream_sync(struct zs_dev *d, zs_dev_stream s);

/*
 * Device memory shared with another process of this host (a trainer hands
 * its gradient to the shard server on its own device: CUDA IPC, or on the
 * emulator a memfd the other process opens through /proc).
 *
 * zs_dev_set_shareable: allocations from now on may be shared (CUDA: all
 * are; the emulator backs them with a memfd each). zs_dev_share: the
 * handle of the allocation that holds p, p's byte offset in it, and a
 * number this process gives that allocation, never reused while it runs
 * (so a mapping of an allocation since freed is never taken for a new
 * one with the same handle). zs_dev_map: maps another process's handle,
 * its base and size; zs_dev_unmap undoes it. zs_dev_ident: a nonzero
 * identity of the device; two processes of one host whose devices have the
 * same one map each other's handles (CUDA: from the device's UUID).
 */
#define ZS_DEV_HANDLE_BYTES 64
struct zs_dev_share {
	unsigned char handle[ZS_DEV_HANDLE_BYTES];
	unsigned long long serial;
	unsigned long long offset;
};
void zs_dev_set_shareable(struct zs_dev *d);
enum zs_status zs_dev_share(struct zs_dev *d, const void *p, struct zs_dev_share *out);
enum zs_status zs_dev_map(struct zs_dev *d, const unsigned char handle[ZS_DEV_HANDLE_BYTES],
			  void **base, size_t *size);
void zs_dev_unmap(struct zs_dev *d, void *base, size_t size);
unsigned zs_dev_ident(const struct zs_dev *d);

/* The emulator's copies: how many ran, and the longest delay before one
 * (microseconds; $ZSHARD_DEV_EMU_DELAY_US sets it, default 300). */
unsigned long long zs_dev_emu_copies(const struct zs_dev *d);

#ifdef __cplusplus
}
#endif
#endif
