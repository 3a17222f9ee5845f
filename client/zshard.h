/*
 * zshard.h - libzshard, the trainer's side of zshard.
 *
 * A trainer joins a job as one rank, then for every step t:
 *   forward:  zs_gather(u, t) each unit (post the next ones early: that is
 *             the prefetch), compute, release per the resharding policy;
 *   backward: gather again where released, compute the unit's gradients,
 *             zs_push(u, t);
 *   the step: wait for every push of t. The servers reduce the R ranks'
 *             gradients in rank order, apply the optimizer and serve step
 *             t + 1's parameters to zs_gather(u, t + 1).
 * Rank 0 uploads the initial parameters with zs_init_unit() before step 0.
 *
 * Everything here is plain C types, opaque handles and int status codes
 * (enum zs_status in status.h, 0 = ZS_OK), with no callbacks, so Python
 * (ctypes, cffi) and other languages bind it without a compiler.
 *
 * Threads: one trainer handle may be used by one thread at a time; ops may
 * be tested or waited from that thread only. Several trainers may live in
 * one process (each joins as its own rank).
 *
 * Errors: every call that fails returns a status and leaves a one-line
 * message in zs_trainer_error(t) (or, for zs_trainer_join, in err).
 */
#ifndef ZSHARD_H
#define ZSHARD_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zs_trainer zs_trainer;
typedef struct zs_op zs_op;

/*
 * Joins job as rank over transport ("auto": shm to servers on this host,
 * tcp otherwise; "tcp"; "shm"), connecting to every server that holds a
 * shard. timeout_ms bounds each control call and each connection. On
 * failure *out is NULL and err (errlen bytes, may be NULL) says why:
 * ZS_ENOTFOUND (no such job), ZS_EINVAL (rank out of range), ZS_EEXIST
 * (rank joined already), ZS_EUNAVAIL (coordinator or a server unreachable).
 */
int zs_trainer_join(const char *coordinator, const char *job, unsigned rank,
		    const char *transport, int timeout_ms, zs_trainer **out, char *err,
		    size_t errlen);

/* Leaves the job and frees the handle; ops not yet completed are dropped. */
void zs_trainer_close(zs_trainer *t);

/* The last failure's message on this trainer ("" if none). Valid until the
 * next call on t. */
const char *zs_trainer_error(const zs_trainer *t);

unsigned zs_trainer_rank(const zs_trainer *t);
unsigned zs_trainer_world_size(const zs_trainer *t);
/* The ZeRO stage as of the last zs_trainer_refresh() (1, 2 or 3). */
unsigned zs_trainer_stage(const zs_trainer *t);
/* Re-reads the job's stage from the coordinator: call at step boundaries. */
int zs_trainer_refresh(zs_trainer *t);

unsigned zs_trainer_units(const zs_trainer *t);
/* Name, element count and dtype (1 f32, 2 bf16, 3 f16) of a unit; the
 * name is valid while t is. Out-of-range units give NULL / 0. */
const char *zs_unit_name(const zs_trainer *t, unsigned unit);
unsigned long long zs_unit_numel(const zs_trainer *t, unsigned unit);
int zs_unit_dtype(const zs_trainer *t, unsigned unit);

/* Uploads unit's initial fp32 parameters (numel floats); blocking. Only
 * before step 0; any rank may, rank 0 by convention. */
int zs_init_unit(zs_trainer *t, unsigned unit, const float *params);

/*
 * Starts a gather of unit at step into dst (numel elements of the unit's
 * dtype), or a push of grad (same shape) for step. Returns ZS_OK with *op,
 * or ZS_EAGAIN when too much is in flight (test or wait an op, retry).
 * dst / grad belong to the op until it completes.
 */
int zs_gather(zs_trainer *t, unsigned unit, unsigned long long step, void *dst, zs_op **op);
int zs_push(zs_trainer *t, unsigned unit, unsigned long long step, const void *grad,
	    zs_op **op);

/* ZS_EAGAIN while in progress; else the final status, and op is freed. */
int zs_op_test(zs_op *op);
/* Waits up to timeout_ms (-1: unbounded); ZS_ETIMEDOUT leaves op alive. */
int zs_op_wait(zs_op *op, int timeout_ms);

/* Bytes moved and time spent waiting by this trainer so far. */
struct zs_trainer_counters {
	unsigned long long bytes_gathered, bytes_pushed;
	unsigned long long gathers, pushes;
	double wait_seconds;
};
void zs_trainer_counters(const zs_trainer *t, struct zs_trainer_counters *c);

#ifdef __cplusplus
}
#endif
#endif
