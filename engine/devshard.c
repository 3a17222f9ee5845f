/*
 * devshard.c - GPU-resident shards (engine_set_device, zshard-server
 * --gpu): a shard's fp32 master, optimizer state and reduction buffer live
 * in device memory; each push goes from its landing buffer in the arena
 * to the device as it lands and into the reduction there (math/bsum.h:
 * exact, so arrival order does not matter); the optimizer and the compute-dtype copy run as kernels and
 * the copy comes back to the arena, where gathers read it. The kernels are
 * gpu/kern.h's (CUDA, or the host's on the emulated device), all running
 * math/elem.h's arithmetic: the bits are the host engine's.
 *
 * Copies and kernels are synchronous here (the shard's mutex is held, as
 * for the host kernels): overlap comes from shards and steps in flight on
 * other threads, not from streams.
 */
#include "engine/jobs.h"
#include "engine/store.h"

#include "gpu/dev.h"
#include "gpu/kern.h"

/* The shard's state is no longer known: stop, so that the job rolls back. */
static void die(struct engine *e, const char *what, const char *why)
{
	zs_error("device %s: %s: %s; stopping so that this server's jobs roll back to their last checkpoint",
		 zs_dev_name(e->gpu.dev), what, why);
	abort();
}

/* e->gpu.kern->fn(..., why, len), stopping on its failure */
#define KCALL(e, what, fn, ...)                                                     \
	do {                                                                        \
		char why_[256];                                                     \
		if ((e)->gpu.kern->fn(__VA_ARGS__, why_, sizeof why_))              \
			die(e, what, why_);                                         \
	} while (0)

static void copy(struct engine *e, void *dst, const void *src, size_t n, enum zs_dev_dir dir)
{
	if (n && zs_dev_copy_sync(e->gpu.dev, dst, src, n, dir))
		die(e, dir == ZS_DEV_H2D ? "a copy to the device" : "a copy from the device",
		    zs_dev_error(e->gpu.dev));
}

enum zs_status engine_set_device(struct engine *e, int device, uint64_t budget,
				 struct zs_error *err)
{
	char why[256];
	enum zs_status st;

	if (e->jobs)
		return zs_fail(err, ZS_ESTATE, "the device is set before any job is added");
	st = zs_dev_open(device, &e->gpu.dev, why, sizeof why);
	if (st)
		return zs_fail(err, st, "%s", why);
	e->gpu.kern = zs_dev_emulated(e->gpu.dev) ? zs_kern_host() : zs_kern_cuda(why, sizeof why);
	if (!e->gpu.kern) {
		zs_dev_close(e->gpu.dev);
		e->gpu.dev = NULL;
		return zs_fail(err, ZS_EUNAVAIL, "%s", why);
	}
	e->gpu.budget = budget;
	zs_info("shards live on %s (its kernels: %s) up to %s", zs_dev_name(e->gpu.dev), e->gpu.kern->name,
		budget ? "the --gpu-budget" : "its memory");
	return ZS_OK;
}

const char *engine_device(const struct engine *e)
{
	return e->gpu.dev ? zs_dev_name(e->gpu.dev) : NULL;
}

static float *dalloc(struct engine *e, size_t bytes, bool zero)
{
	void *p = zs_dev_alloc(e->gpu.dev, bytes);
	if (p && zero &&
	    (zs_dev_zero(e->gpu.dev, p, bytes, NULL) || zs_dev_stream_sync(e->gpu.dev, NULL))) {
		zs_dev_free(e->gpu.dev, p);
		p = NULL;
	}
	return p;
}

enum zs_status eng_dev_shard_init(struct engine *e, struct eshard *s, size_t pad,
				  unsigned arrays, struct zs_error *err)
{
	s->dev.on = true;
	s->master = NULL;
	s->copy = zs_listener_alloc(e->l, pad * s->dsz); /* what gathers read */
	if (!s->copy)
		return zs_fail(err, ZS_ENOSPC, "the shard arena is full: unit %u shard %u needs %zu bytes",
			       s->sh.unit, s->sh.index, pad * s->dsz);
	s->dev.master = dalloc(e, pad * 4, false);
	s->dev.s0 = arrays > 1 ? dalloc(e, pad * 4, true) : NULL;
	s->dev.s1 = arrays > 2 ? dalloc(e, pad * 4, true) : NULL;
	s->dev.acc = dalloc(e, pad * 4, false);
	s->dev.bacc = (struct zs_bacc *)dalloc(e, pad * sizeof *s->dev.bacc, true);
	s->dev.x = dalloc(e, pad * 4, false); /* one push: f32 at most */
	s->dev.copy = s->dt == ZS_F32 ? NULL : dalloc(e, pad * s->dsz, false);
	if (!s->dev.master || (arrays > 1 && !s->dev.s0) || (arrays > 2 && !s->dev.s1) || !s->dev.acc ||
	    !s->dev.bacc || !s->dev.x || (s->dt != ZS_F32 && !s->dev.copy))
		return zs_fail(err, ZS_ENOSPC, "no room on %s for unit %u shard %u: %s",
			       zs_dev_name(e->gpu.dev), s->sh.unit, s->sh.index, zs_dev_error(e->gpu.dev));
	e->gpu.resident += pad * 4 * arrays;
	return ZS_OK;
}

void eng_dev_pin(struct engine *e, struct eshard *s)
{
	/* what the copies touch, page-locked for the link's speed (landing
	 * buffers: landing.c); unpinned it still works, only slower: say so
	 * once */
	static atomic_int warned;
	if (zs_dev_host_register(e->gpu.dev, s->copy, s->sh.padded * s->dsz)) {
		if (!atomic_exchange(&warned, 1))
			zs_warn("cannot pin the arena for %s (%s): copies go through pageable memory",
				zs_dev_name(e->gpu.dev), zs_dev_error(e->gpu.dev));
		return;
	}
	s->dev.pinned = true;
}

void eng_dev_free(struct engine *e)
{
	zs_dev_close(e->gpu.dev);
	e->gpu.dev = NULL;
}

void eng_dev_shard_release(struct engine *e, struct eshard *s)
{
	if (!s->dev.on)
		return;
	if (s->dev.pinned) {
		zs_dev_host_unregister(e->gpu.dev, s->copy);
		s->dev.pinned = false;
	}
	if (s->dev.master)
		e->gpu.resident -= s->sh.padded * 4 * s->n_arrays;
	zs_dev_free(e->gpu.dev, s->dev.master);
	zs_dev_free(e->gpu.dev, s->dev.s0);
	zs_dev_free(e->gpu.dev, s->dev.s1);
	zs_dev_free(e->gpu.dev, s->dev.acc);
	zs_dev_free(e->gpu.dev, s->dev.bacc);
	zs_dev_free(e->gpu.dev, s->dev.x);
	zs_dev_free(e->gpu.dev, s->dev.copy);
	s->dev.master = s->dev.s0 = s->dev.s1 = s->dev.acc = s->dev.x = NULL;
	s->dev.bacc = NULL;
	s->dev.copy = NULL;
}

void eng_dev_deposit(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt,
		     size_t a, size_t b, bool on_device)
{
	size_t dsz = zs_dtype_size(dt);

	zs_dev_bind(e->gpu.dev);
	if (on_device) { /* a trainer's memory on this device: read in place */
		KCALL(e, "the reduction", deposit, s->dev.bacc + a, (const uint8_t *)x + a * dsz, dt,
		      b - a);
		return;
	}
	copy(e, s->dev.x, (const uint8_t *)x + a * dsz, (b - a) * dsz, ZS_DEV_H2D);
	KCALL(e, "the reduction", deposit, s->dev.bacc + a, s->dev.x, dt, b - a);
}

/* ------------------------------------- pushes from a trainer's device memory */

uint32_t eng_t_dev_ident(void *ctx)
{
	struct engine *e = ctx;
	return e->gpu.dev ? zs_dev_ident(e->gpu.dev) : 0;
}

enum zs_status eng_t_dev_map(void *ctx, const unsigned char handle[64], void **base,
			     uint64_t *size, struct zs_error *err)
{
	struct engine *e = ctx; /* on a device: only then offered (eng_t_dev_ident) */
	size_t n = 0;

	if (zs_dev_map(e->gpu.dev, handle, base, &n))
		return zs_fail(err, ZS_EUNAVAIL, "%s", zs_dev_error(e->gpu.dev));
	*size = n;
	return ZS_OK;
}

void eng_t_dev_unmap(void *ctx, void *base, uint64_t size)
{
	struct engine *e = ctx;
	zs_dev_unmap(e->gpu.dev, base, size);
}

enum zs_status eng_dev_take(struct engine *e, const struct zs_xfer *x, void *dst,
			    struct zs_error *err)
{
	size_t bytes = x->length * zs_dtype_size(x->dtype);

	zs_dev_bind(e->gpu.dev);
	if (zs_dev_copy_sync(e->gpu.dev, dst, x->dsrc, bytes, ZS_DEV_D2H))
		return zs_fail(err, ZS_EIO, "copying a push from the trainer's device memory: %s",
			       zs_dev_error(e->gpu.dev));
	return ZS_OK;
}

void eng_dev_finish(struct ejob *j, struct eshard *s, size_t a, size_t b)
{
	struct engine *e = j->e;

	zs_dev_bind(e->gpu.dev);
	KCALL(e, "the reduction's mean", finish, s->dev.acc + a, s->dev.bacc + a, eng_world_at(j, s->version),
	      b - a);
}

void eng_dev_clear(struct engine *e, struct eshard *s)
{
	zs_dev_bind(e->gpu.dev);
	if (zs_dev_zero(e->gpu.dev, s->dev.bacc, s->sh.padded * sizeof *s->dev.bacc, NULL) ||
	    zs_dev_stream_sync(e->gpu.dev, NULL))
		die(e, "clearing the reduction", zs_dev_error(e->gpu.dev));
}

void eng_dev_apply(struct engine *e, struct eshard *s, const struct zs_optim_step *steps,
		   float coef, size_t a, size_t b)
{
	zs_dev_bind(e->gpu.dev);
	if (coef != 1.0f)
		KCALL(e, "clipping's scale", scale, s->dev.acc + a, coef, b - a);
	for (uint32_t k = 0; k < s->lay.n_segs; k++) {
		uint64_t lo = s->lay.segs[k].a > a ? s->lay.segs[k].a : a;
		uint64_t hi = s->lay.segs[k].b < b ? s->lay.segs[k].b : b;
		const struct zs_optim_step *st = &steps[s->lay.segs[k].group];
		if (lo >= hi || s->lay.segs[k].frozen)
			continue;
		/* Adam with an L2 term its own kernel, without one AdamW's (optim.c) */
		if (ZS_OPTIM_ADAM_FAMILY(st->kind) && zs_adamw_consts(st).l2 != 0.0f)
			KCALL(e, "Adam", adam, zs_adamw_consts(st), s->dev.master + lo, s->dev.s0 + lo,
					      s->dev.s1 + lo, s->dev.acc + lo, hi - lo);
		else if (ZS_OPTIM_ADAM_FAMILY(st->kind))
			KCALL(e, "AdamW", adamw, zs_adamw_consts(st), s->dev.master + lo, s->dev.s0 + lo,
						 s->dev.s1 + lo, s->dev.acc + lo, hi - lo);
		else if (st->kind == ZS_ADAGRAD)
			KCALL(e, "Adagrad", adagrad, zs_adagrad_consts(st), s->dev.master + lo,
						     s->dev.s0 + lo, s->dev.acc + lo, hi - lo);
		else
			KCALL(e, "SGD", sgd, zs_sgd_consts(st), s->dev.master + lo,
					     s->dev.s0 ? s->dev.s0 + lo : NULL, s->dev.acc + lo, hi - lo);
	}
	/* the compute-dtype copy, back where gathers read it */
	if (s->dt == ZS_F32) {
		copy(e, (float *)s->copy + a, s->dev.master + a, (b - a) * 4, ZS_DEV_D2H);
	} else {
		uint8_t *dc = (uint8_t *)s->dev.copy + a * s->dsz;
		KCALL(e, "the compute-dtype copy", from_f32, dc, s->dt, s->dev.master + a, b - a);
		copy(e, (uint8_t *)s->copy + a * s->dsz, dc, (b - a) * s->dsz, ZS_DEV_D2H);
	}
}

void eng_dev_acc_out(struct engine *e, struct eshard *s)
{
	copy(e, s->acc, s->dev.acc, s->sh.length * 4, ZS_DEV_D2H);
}

void eng_dev_acc_in(struct engine *e, struct eshard *s)
{
	copy(e, s->dev.acc, s->acc, s->sh.length * 4, ZS_DEV_H2D);
}

enum zs_status eng_dev_arrays_io(struct engine *e, struct eshard *s, bool wr, float *m,
				 float *s0, float *s1)
{
	float *host[3] = {m, s0, s1}, *dev[3] = {s->dev.master, s->dev.s0, s->dev.s1};
	for (int k = 0; k < 3; k++)
		if (host[k] && dev[k])
			copy(e, wr ? (void *)dev[k] : host[k], wr ? host[k] : dev[k],
			     s->sh.length * 4, wr ? ZS_DEV_H2D : ZS_DEV_D2H);
	return ZS_OK;
}

enum zs_status eng_dev_array_read(struct engine *e, struct eshard *s, unsigned k, size_t a,
				  size_t b, float *dst)
{
	float *dev[3] = {s->dev.master, s->dev.s0, s->dev.s1};
	if (k > 2 || !dev[k])
		return ZS_EINVAL;
	copy(e, dst, dev[k] + a, (b - a) * 4, ZS_DEV_D2H);
	return ZS_OK;
}
