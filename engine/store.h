/*
 * store.h - where a shard's arrays live when not in host memory: the
 * NVMe tier (tier.c) and the engine's device (devshard.c). Internal to the
 * engine.
 */
#ifndef ZS_ENGINE_STORE_H
#define ZS_ENGINE_STORE_H

#include "engine/state.h"

/* tier.c */
/* Elements [a, b) of array k of a shard whose state is not in memory (the
 * tier's or the device's) into dst. */
enum zs_status eng_array_read(struct engine *e, struct eshard *s, unsigned k, size_t a, size_t b,
			      float *dst);
/* Whole arrays of a shard, resident or tiered, into or out of the buffers
 * given (NULL skips an array). */
enum zs_status eng_arrays_io(struct engine *e, struct eshard *s, bool wr, float *m,
				float *s0, float *s1);
/*
 * A tiered shard's update of [a, b), chunk by chunk through a double
 * buffer: while chunk c is computed in one set, a helper thread writes
 * chunk c-1 back from the other and reads chunk c+1 into it.
 */
void eng_tier_update(struct engine *e, struct eshard *s, const struct zs_optim_step *steps,
			uint64_t a, uint64_t b);

/* devshard.c: a shard's arrays, reduction and update on the engine's
 * device. A device error stops the server (its jobs roll back to their
 * last checkpoint): the shard's state is not known any more. */
enum zs_status eng_dev_shard_init(struct engine *e, struct eshard *s, size_t pad,
				  unsigned arrays, struct zs_error *err);
void eng_dev_shard_release(struct engine *e, struct eshard *s);
/* Page-locks the shard's copy (gathers read it; the device writes it). */
void eng_dev_pin(struct engine *e, struct eshard *s);
/* Closes the engine's device (its shards released first). */
void eng_dev_free(struct engine *e);
/* Elements [a, b) of a push (x: its element 0, in dt; on_device: in the
 * device's memory, a trainer's mapped) into the reduction; the
 * reduction's [a, b) to the mean gradient. */
void eng_dev_deposit(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt,
		     size_t a, size_t b, bool on_device);
/* Pushes from a trainer's device memory (the listener's dev_* calls). */
uint32_t eng_t_dev_ident(void *ctx);
enum zs_status eng_t_dev_map(void *ctx, const unsigned char handle[64], void **base,
			     uint64_t *size, struct zs_error *err);
void eng_t_dev_unmap(void *ctx, void *base, uint64_t size);
/* A device push's bytes (x->dsrc) copied to dst in host memory (for a
 * shard that is not on the device). */
enum zs_status eng_dev_take(struct engine *e, const struct zs_xfer *x, void *dst,
			    struct zs_error *err);
void eng_dev_finish(struct ejob *j, struct eshard *s, size_t a, size_t b);
void eng_dev_clear(struct engine *e, struct eshard *s);
void eng_dev_apply(struct engine *e, struct eshard *s, const struct zs_optim_step *steps,
		   float coef, size_t a, size_t b);
/* The mean gradient (as the update consumed it) out to s->acc, or in from it. */
void eng_dev_acc_out(struct engine *e, struct eshard *s);
void eng_dev_acc_in(struct engine *e, struct eshard *s);
/* Whole arrays in or out (NULL skips one); elements [a, b) of array k out. */
enum zs_status eng_dev_arrays_io(struct engine *e, struct eshard *s, bool wr, float *m,
				 float *s0, float *s1);
enum zs_status eng_dev_array_read(struct engine *e, struct eshard *s, unsigned k, size_t a,
				  size_t b, float *dst);

#endif
