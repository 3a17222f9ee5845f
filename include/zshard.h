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
 * (enum zs_status in zshard_status.h, 0 = ZS_OK), with no callbacks, so Python
 * (ctypes, cffi) and other languages bind it without a compiler.
 *
 * Threads: one trainer handle may be used by one thread at a time; ops may
 * be tested or waited from that thread only. Several trainers may live in
 * one process (each joins as its own rank).
 *
 * Errors: every call that fails returns a status and leaves a one-line
 * message in zs_trainer_error(t) (or, for zs_trainer_join, in err). Every
 * function below lists the statuses it returns; besides those, any call
 * that talks to the service may return ZS_EUNAVAIL (a peer unreachable or
 * gone: the message names it), ZS_ETIMEDOUT (a bound ran out) and
 * ZS_ENOMEM. A call that fails with ZS_EINVAL or ZS_ESTATE changed nothing.
 *
 * Recovery: a trainer holds its rank by a lease the library renews every
 * second (a thread of its own). When a process of the job is lost (a
 * trainer's lease lapses, or it leaves mid-step, or is evicted; a server
 * restarts), the coordinator rolls the job back to its latest committed
 * checkpoint by itself. Every op and driver call may then return
 * ZS_ERESUME: call zs_trainer_resume() and go on from the step it gives.
 * A server lost while a call waits on it (its connection broken, the
 * coordinator marking it down, a checkpoint's arming that cannot reach
 * it) is the coordinator's to judge: the call waits, within the driver's
 * bound (zs_policy.op_timeout_ms), for a server marked down to come back
 * or for the job's failover or rollback, and returns ZS_ERESUME when the
 * job rolled back, whatever the call waited on; ZS_EUNAVAIL or
 * ZS_ETIMEDOUT only when no verdict came.
 *
 * Ownership: the library owns every handle and buffer it returns and says
 * how long each stays valid; the caller owns what it passes in, except
 * buffers handed to an op, which the op uses until it completes.
 *
 * Link with `pkg-config --cflags --libs zshard` (make install puts zshard.pc
 * there); the library exports exactly the functions declared here.
 */
#ifndef ZSHARD_H
#define ZSHARD_H

#include <stddef.h>

#include "zshard_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

typedef struct zs_trainer zs_trainer;
typedef struct zs_op zs_op;

/*
 * Joins job as rank over transport, connecting to every server that holds a
 * shard: "auto" picks per server the first it offers of shm (same host),
 * rdma (where this host has a working device), tcp; "tcp", "shm" or "rdma"
 * asks for one. timeout_ms bounds each control call and each connection.
 * coordinator NULL: $ZSHARD_CONFIG's (a launch configuration, see
 * zshardctl config --help), else $ZSHARD_COORDINATOR, else the local
 * cluster's that `zshard-local start` runs in its default folder
 * ($ZSHARD_LOCAL_DIR, else ~/.local/state/zshard/local); transport NULL: the
 * configuration's, else "auto"; the configuration's prefetch, push_depth,
 * max_live_bytes and TLS files become the defaults. On success *out is a handle the caller frees with zs_trainer_close().
 * On failure *out is NULL and err (errlen bytes, may be NULL) says why:
 *   ZS_EINVAL     an unknown transport, a bad job name, rank >= world size
 *   ZS_ENOTFOUND  no such job
 *   ZS_EEXIST     this rank is held by another trainer (it must leave, or
 *                 its lease lapse: that is waited for within timeout_ms)
 *   ZS_ESTATE     a server does not offer the transport asked for
 *   ZS_ETIMEDOUT  a server had not loaded the job (its placement comes with
 *                 the server's next heartbeat) within timeout_ms: the join
 *                 waits for that, so a trainer may join right after the
 *                 job is created
 *   ZS_EUNAVAIL   the coordinator or a server is unreachable
 */
int zs_trainer_join(const char *coordinator, const char *job, unsigned rank,
		    const char *transport, int timeout_ms, zs_trainer **out, char *err,
		    size_t errlen);

/*
 * Creates a job from its spec as JSON, the format zshardctl job create
 * reads (in the source: model/spec_json.h; example: examples/charlm.json):
 * name, stage, world_size, compute_dtype, optimizer, units and their
 * tensors. The coordinator places it over the live servers. ZS_OK;
 * ZS_EEXIST (a job of that name exists: join it; the join checks that its
 * layout is the trainer's); ZS_EINVAL (the spec, and why: its JSON, a key,
 * a value); ZS_ENOSPC (the servers' capacity); ZS_EUNAVAIL. err (errlen
 * bytes, may be NULL) gets the message. coordinator NULL: the one
 * zs_trainer_join would find ($ZSHARD_CONFIG's, $ZSHARD_COORDINATOR, the
 * local cluster's), with the configuration's TLS files.
 */
int zs_create_job(const char *coordinator, const char *spec_json, int timeout_ms, char *err,
		  size_t errlen);
/*
 * Changes a job's world size to world ranks (zshardctl job resize) from a
 * step boundary the coordinator names (*from_step when not NULL): ranks
 * at or above world leave there (their zs_step_begin says
 * ZS_ECANCELED), new ranks join and begin there (zs_trainer_resume says
 * the step), and each step's mean is over that step's ranks. The same
 * coordinator as zs_create_job. ZS_EINVAL for a collective job or a world
 * out of 1..65536; ZS_ESTATE while another resize is named for the same
 * step, or the job is stopping or being restored.
 */
int zs_resize_job(const char *coordinator, const char *job, unsigned world, int timeout_ms,
		  unsigned long long *from_step, char *err, size_t errlen);
/*
 * Deletes a job (zshardctl job delete): its state on the servers and, unless
 * keep_checkpoints, its checkpoints; a job created again under the name is
 * a new one (it never sees these). Trainers still joined to it fail their
 * next call. The same coordinator as zs_create_job. ZS_ENOTFOUND: no such
 * job.
 */
int zs_delete_job(const char *coordinator, const char *job, int keep_checkpoints, int timeout_ms,
		  char *err, size_t errlen);

/* Leaves the job and frees the handle; ops not yet completed are dropped
 * (their buffers are the caller's again once this returns). Leaving in the
 * middle of a step (some of this step's pushes done, not all) rolls the
 * job back; leaving between steps tells the coordinator before which step,
 * and when every rank left before the same one the job resumes there.
 * NULL is fine. */
void zs_trainer_close(zs_trainer *t);

/* The last failure's message on this trainer ("" if none). Valid until the
 * next call on t. */
const char *zs_trainer_error(const zs_trainer *t);

/* This trainer's rank and the job's world size at the step it began last
 * (or resumes at; the spec's before either; zshardctl job resize changes
 * it between steps); never fail. */
unsigned zs_trainer_rank(const zs_trainer *t);
unsigned zs_trainer_world_size(const zs_trainer *t);
/* The ZeRO stage as of the last zs_trainer_refresh() (1, 2 or 3). */
unsigned zs_trainer_stage(const zs_trainer *t);
/* Re-reads the job's stage from the coordinator: call at step boundaries
 * (the step driver does it at every zs_step_begin). ZS_OK; ZS_ENOTFOUND
 * when the job was deleted; ZS_EUNAVAIL. */
int zs_trainer_refresh(zs_trainer *t);

/* The job's number of units; never fails. */
unsigned zs_trainer_units(const zs_trainer *t);
/* Name, element count and dtype (1 f32, 2 bf16, 3 f16) of a unit; the
 * name is the library's, valid while t is. Out-of-range units give
 * NULL / 0 / 0. */
const char *zs_unit_name(const zs_trainer *t, unsigned unit);
unsigned long long zs_unit_numel(const zs_trainer *t, unsigned unit);
int zs_unit_dtype(const zs_trainer *t, unsigned unit);
/* A unit's number of tensors (0 out of range), and tensor i's name (the
 * library's, valid while t is), offset in the unit's elements, and shape
 * (up to cap dimensions into shape; *ndim the tensor's own count). ZS_OK;
 * ZS_EINVAL: out of range. So a binding can check its model against the
 * job's layout tensor by tensor, not only by element count. */
unsigned zs_unit_tensors(const zs_trainer *t, unsigned unit);
int zs_unit_tensor(const zs_trainer *t, unsigned unit, unsigned i, const char **name,
		   unsigned long long *offset, unsigned *ndim, unsigned long long *shape,
		   unsigned cap);
/* 1 when tensor i of unit is frozen (held and gathered, never updated: the
 * spec's "frozen": true), 0 when trained, -1 out of range. */
int zs_unit_tensor_frozen(const zs_trainer *t, unsigned unit, unsigned i);

/* Uploads unit's initial fp32 parameters (numel floats, the caller's);
 * blocking. Only before step 0; any rank may, rank 0 by convention.
 * ZS_OK; ZS_EINVAL (unit out of range); ZS_ESTATE (the job has begun
 * training); ZS_EUNAVAIL. */
int zs_init_unit(zs_trainer *t, unsigned unit, const float *params);

/* Uploads unit's optimizer array (1 or 2: AdamW's and Adam's exp_avg and
 * exp_avg_sq, SGD's momentum buffer, Adagrad's sum; numel floats, the
 * caller's) imported with its parameters, after zs_init_unit and before
 * step 0; blocking. The job's spec must say at which optimizer step the
 * state was taken ("steps_taken"), so that the next update is that step
 * plus one. Shards of frozen tensors alone are skipped. ZS_OK; ZS_EINVAL
 * (unit or array out of range; a replicated job: the upload would reach
 * one copy); ZS_ESTATE (no steps_taken in the spec, the parameters not
 * uploaded yet, or the job has begun training); ZS_EUNAVAIL. */
int zs_init_unit_state(zs_trainer *t, unsigned unit, unsigned array, const float *state);

/*
 * Starts a gather of unit at step into dst (numel elements of the unit's
 * dtype), or a push of grad (same shape) for step. ZS_EINVAL for a NULL
 * buffer. Returns ZS_OK with *op
 * (the library's, freed when zs_op_test or zs_op_wait returns its final
 * status), ZS_EAGAIN when too much is in flight (test or wait an op,
 * retry), ZS_EINVAL (unit out of range), ZS_EUNAVAIL (a server's
 * connection is broken). dst / grad belong to the op until it completes.
 * The op's final status: ZS_OK; ZS_ETIMEDOUT when the ranks a gather needs
 * did not push within the server's step timeout (the message names them);
 * ZS_EINVAL / ZS_ESTATE when a server refused it (a step out of order, a
 * push twice); ZS_EUNAVAIL when a server went away; ZS_ERESUME when the
 * job rolled back (a gather waiting for its step gets it at once).
 */
int zs_gather(zs_trainer *t, unsigned unit, unsigned long long step, void *dst, zs_op **op);
int zs_push(zs_trainer *t, unsigned unit, unsigned long long step, const void *grad,
	    zs_op **op);

/*
 * Gradient accumulation: push a micro-batch's gradient as partial; the
 * server adds it to the step's reduction for (unit, step), and the rank's
 * next plain zs_push completes its share. Partial pushes of one unit must
 * not overlap in flight (wait each before the next): each carries its
 * index among the rank's micro-batches of the step. In a replicated job
 * the op completes once every copy has the term, so a lost server loses
 * none (the trainer sends what was unacknowledged again after a failover).
 */
int zs_push_partial(zs_trainer *t, unsigned unit, unsigned long long step,
		    const void *grad, zs_op **op);

/* ZS_EAGAIN while in progress; else the op's final status (see zs_gather),
 * and op is freed: it must not be used again. */
int zs_op_test(zs_op *op);
/* Waits up to timeout_ms (-1: unbounded). If the bound passes first it
 * returns ZS_EAGAIN and op is still alive; any other return is final. */
int zs_op_wait(zs_op *op, int timeout_ms);

/* ---------------------------------------------------------------------
 * Hyperparameters per step: a learning-rate schedule, per-group weight
 * decay (torch's param_groups). A job's tensors are in optimizer groups
 * (its spec's "groups"; one group without them), each with its lr,
 * weight_decay, betas, eps and momentum; the spec gives their first values.
 * --------------------------------------------------------------------- */
struct zs_hparams {
	double lr, weight_decay, beta1, beta2, eps, momentum;
};
/* The job's optimizer groups (at least 1). */
unsigned zs_trainer_groups(const zs_trainer *t);
/* Group's values in force for this trainer's next step (the last set,
 * else the spec's) and, if clip_norm is not NULL, the clipping norm (0:
 * the job does not clip). ZS_OK; ZS_EINVAL (group out of range). */
int zs_trainer_hparams(const zs_trainer *t, unsigned group, struct zs_hparams *h,
		       double *clip_norm);
/*
 * Sets every group's values (n_groups of them, in group order) and the
 * clipping norm for the updates of step and the steps after it, until set
 * again: call before this trainer's first push of step (zs_step_begin and
 * the forward pass may come first). Every rank may set them, each the same
 * (a schedule computed from the step); the servers refuse values that
 * differ from another rank's for the same step. A job whose spec does not
 * clip cannot clip at one step, nor the other way round (clip_norm 0 iff
 * the spec's is). Waits (bounded by the policy's op timeout) until every
 * server has them. A restore or rollback forgets them (the servers and
 * zs_trainer_resume alike): set them again for the step resumed from.
 * ZS_OK; ZS_EINVAL (a count or value out of range, a step before the last
 * one set, or another rank's values differ: the message says which);
 * ZS_ETIMEDOUT; a server's failure.
 */
int zs_set_hparams(zs_trainer *t, unsigned long long step, const struct zs_hparams *groups,
		   unsigned n_groups, double clip_norm);

/*
 * The global gradient norm of step (the L2 norm of its mean gradient over
 * every trained element, before clipping: what torch's clip_grad_norm_
 * returns) into *norm, as the job's servers computed it to clip: waits
 * until every server has reported it (at most timeout_ms; <= 0: 60 s).
 * Only for a job that clips (the servers compute no norm otherwise), and
 * for one of its latest steps (the coordinator keeps the last 4 totals).
 * ZS_OK; ZS_ESTATE (the job does not clip); ZS_ETIMEDOUT (naming the
 * servers not reported); ZS_ECANCELED (the step was abandoned: a rollback).
 */
int zs_step_grad_norm(zs_trainer *t, unsigned long long step, int timeout_ms, double *norm);

/* ---------------------------------------------------------------------
 * The step driver: prefetch, resharding and the stage's memory rules, so a
 * trainer only says which unit it computes next. Per step t:
 *
 *   zs_step_begin(t, step)
 *   for u in 0..U-1:   zs_unit_params(t, u, 0, &p); forward; zs_unit_forward_done(t, u)
 *   for u in U-1..0:   zs_unit_params(t, u, 1, &p); zs_unit_grad(t, u, &g);
 *                      backward into g; zs_unit_push(t, u)
 *   zs_step_end(t)
 *
 * What the trainer holds follows the stage (docs/DESIGN.md in the source, section 4), read from
 * the coordinator at every zs_step_begin:
 *   stage 3: a unit's parameters only while in use (+ the prefetch window):
 *            freed after its forward (or kept until its backward when
 *            reshard_after_forward is 0) and after its backward; the
 *            window's units of the next step stay between steps (a step
 *            begun that is not the next one drops them);
 *            a gradient until its push completes (push_depth + 1 at most).
 *   stage 2: the full replica for the step (refreshed by gathering every
 *            unit at zs_step_begin); a gradient until its push completes.
 *   stage 1: the full replica; every gradient until zs_step_end, which
 *            pushes them all.
 * Buffers belong to the library; pointers stay valid until the unit's
 * parameters or gradient are released as above.
 * --------------------------------------------------------------------- */
struct zs_policy {
	unsigned prefetch;                  /* units gathered ahead (default 1): the
					     * next ones in the step's order (forward,
					     * then backward from the unit before the
					     * last, then the next step's from unit 1
					     * on once pushed; stage 3, host buffers),
					     * asked for before zs_unit_params waits
					     * for its own */
	unsigned long long max_live_bytes;  /* gathered parameter bytes alive at once,
					     * prefetch included; 0: no bound */
	int reshard_after_forward;          /* stage 3: 1 (default) frees after forward */
	unsigned push_depth;                /* stage 2, 3: gradient pushes in flight at once
					     * (0: 1); the trainer holds at most
					     * push_depth + 1 gradients, those of its
					     * last pushes: zs_unit_grad waits for
					     * any push older than the last push_depth
					     * (not in a replicated job that clips:
					     * its pushes complete with the step) */
	int op_timeout_ms;                  /* the longest the driver waits for one
					     * gather or push (0: 120000, twice the
					     * servers' default step timeout); past it
					     * the call fails with ZS_ETIMEDOUT naming
					     * the server, unit and step it waited for */
};
/* Sets the policy (copied) for the next steps: ZS_OK; ZS_ESTATE inside a
 * step (between zs_step_begin and zs_step_end). */
int zs_trainer_set_policy(zs_trainer *t, const struct zs_policy *p);
/* The policy in force: after the join, the defaults (prefetch 1, reshard
 * after forward) with what $ZSHARD_CONFIG sets. */
void zs_trainer_policy(const zs_trainer *t, struct zs_policy *p);

/*
 * Device mode: the step driver's buffers in GPU memory. From the next step
 * zs_unit_params and zs_unit_grad return device pointers (CUdeviceptr) on
 * CUDA device `device` (its primary context, the one the CUDA runtime and
 * torch use). A gather lands in pinned host staging and goes to the device
 * on the library's own copy stream as each shard's bytes arrive; `stream`,
 * the caller's compute stream (a CUstream / cudaStream_t, e.g. torch's
 * torch.cuda.current_stream().cuda_stream; NULL: the legacy default
 * stream), is made to wait for that copy before zs_unit_params returns,
 * so the host never waits for a copy. zs_unit_grad's buffer is zeroed on
 * `stream`; zs_unit_push queues the gradient's copy to staging after the
 * work queued on `stream` so far and the push goes out once it is there.
 * A buffer the driver releases is reused only after the work `stream` had
 * queued when it was released. The prefetch window and max_live_bytes
 * count device bytes. zs_gather and zs_push themselves take host memory,
 * as ever.
 *
 * device: a CUDA ordinal; ZS_DEVICE_HOST, back to host buffers (stream
 * NULL); or ZS_DEVICE_EMULATED: host memory stands in for the device, a
 * thread for the copy stream, and the calling thread for `stream` (NULL),
 * with random delays before each copy: the device mode's staging and
 * event order, run where there is no GPU (tests, CI). $ZSHARD_COPY_CHUNK
 * sets the largest single copy (bytes; default 8 MiB).
 *
 * The CUDA driver (libcuda.so.1) is loaded by this call: libzshard itself
 * does not link CUDA. ZS_OK; ZS_ESTATE inside a step; ZS_EINVAL (a bad
 * device number); ZS_EUNAVAIL (no CUDA driver, no such device: the message
 * says which); ZS_EIO (a device error).
 */
#define ZS_DEVICE_HOST (-1)
#define ZS_DEVICE_EMULATED (-2)
int zs_trainer_set_device(zs_trainer *t, int device, void *stream);

/* Begins step: reads the stage and checkpoint interval from the
 * coordinator (sending the last step's report) and starts the first
 * gathers. ZS_OK; ZS_ESTATE (the previous step has not ended); ZS_ERESUME
 * (the job rolled back since this trainer's last resume, or its rank's
 * lease lapsed); ZS_ECANCELED (the job is stopping before this step,
 * zshardctl job stop: leave with zs_trainer_close, nothing is lost); a
 * gather's or the coordinator's failure. */
int zs_step_begin(zs_trainer *t, unsigned long long step);
/* Waits for unit's parameters of the current step (starting the next
 * gathers of the window) and points *params at them: the library's buffer,
 * valid until the unit's parameters are released (see above). backward:
 * 0 or 1. ZS_OK; ZS_ESTATE outside a step; ZS_EINVAL (unit out of range);
 * a gather's final status (see zs_gather). */
int zs_unit_params(zs_trainer *t, unsigned unit, int backward, const void **params);
/* The forward pass of unit is done (stage 3 may free its parameters).
 * ZS_OK; ZS_EINVAL (unit out of range). */
int zs_unit_forward_done(zs_trainer *t, unsigned unit);
/* A zeroed buffer for unit's gradient (numel elements of its dtype), the
 * library's, valid until the unit's push completes (stage 2, 3) or
 * zs_step_end (stage 1). It may wait for pushes older than the last push_depth.
 * ZS_OK; ZS_EINVAL (unit out of range); ZS_ESTATE (its gradient is being
 * pushed); ZS_ENOMEM; a push's final status. */
int zs_unit_grad(zs_trainer *t, unsigned unit, void **grad);
/* Pushes the gradient written into zs_unit_grad's buffer (stage 2, 3: now,
 * asynchronously; stage 1: at zs_step_end). ZS_OK; ZS_EINVAL (no gradient:
 * zs_unit_grad first); a push's failure to start. */
int zs_unit_push(zs_trainer *t, unsigned unit);
/* Returns once every push of the step is acknowledged, and takes the
 * step's checkpoint when checkpoint_every says so. ZS_OK; ZS_ESTATE (no
 * step begun, or a unit's gradient was not pushed in the step: the
 * servers need every unit each step); a push's final status (the message
 * names the step). The step ends in any case. */
int zs_step_end(zs_trainer *t);

/* ---------------------------------------------------------------------
 * Checkpoints. A checkpoint of step t holds the parameters and optimizer
 * state every shard has after t updates (each server captures its shards
 * as they reach t, so training goes on), and one opaque blob per rank
 * (data-loader position, RNG state). Call it at a step boundary, before
 * pushing step t; every rank may, each with its own blob: they share one
 * checkpoint. It is usable once committed (every server durable).
 * --------------------------------------------------------------------- */
/* blob (len bytes, the caller's, copied) may be NULL. *id gets the
 * checkpoint's id. ZS_OK; ZS_EINVAL (a blob over 1 MiB, or rank out of
 * range); ZS_ENOTFOUND (the job is gone); ZS_ESTATE (the job is being
 * restored). */
int zs_checkpoint(zs_trainer *t, unsigned long long step, const void *blob, unsigned len,
		  unsigned long long *id);
/* ZS_OK once committed; ZS_EIO if it failed (zs_trainer_error says why,
 * e.g. a server's disk is full); ZS_ERESUME if the job rolled back before
 * it was durable; ZS_EAGAIN if timeout_ms passed first; ZS_ENOTFOUND (no
 * such checkpoint). */
int zs_checkpoint_wait(zs_trainer *t, unsigned long long id, int timeout_ms);
/*
 * Brings the trainer onto the job's current timeline and says where it
 * starts: call it at start (a restarted process) and after ZS_ERESUME. It
 * takes the rank again if its lease lapsed (waiting, within the join's
 * timeout, for a rank still held by a lost process), waits for a restore
 * or rollback under way, reconnects to every server and forgets the step
 * driver's step in progress. ZS_OK: start at *step: every rank left the
 * job cleanly before it (the servers kept it; *len is 0), or the job's
 * state is the checkpoint of *step (an operator's restore or an automatic
 * rollback), and this rank's blob is copied (up to cap bytes into the
 * caller's blob; *len gets its full size, which may exceed cap; len may be
 * NULL, with blob NULL, when no blob is wanted); or this process replaces a
 * rank lost in the middle of step *step: the job did not roll back, and
 * the blob is the lost rank's state as of that step (zs_set_step_state):
 * compute *step again from it (its pushes count once).
 * ZS_ENOTFOUND: the job has no state to come from (new, or reset with no
 * checkpoint): start at step 0, rank 0 uploading the initial parameters. ZS_ESTATE: a restore still under way after the
 * timeout (retry); ZS_EIO: the restore failed (the message says why);
 * ZS_EEXIST: another trainer took the rank.
 */
int zs_trainer_resume(zs_trainer *t, unsigned long long *step, void *blob, unsigned cap,
		      unsigned *len);
/* Why the last zs_trainer_resume started where it did: */
enum zs_resumed {
	ZS_RESUMED_NONE = 0,	   /* no state to come from (ZS_ENOTFOUND: step 0), or no
				    * resume yet */
	ZS_RESUMED_STOPPED = 1,	   /* every rank had left the job cleanly at that step: an
				    * earlier run of it ended there */
	ZS_RESUMED_CHECKPOINT = 2, /* the job's state is a checkpoint's (an operator's
				    * restore or an automatic rollback): its id in
				    * *checkpoint */
	ZS_RESUMED_REDO = 3,	   /* this process replaces a rank lost in the middle of
				    * that step, which it computes again */
	ZS_RESUMED_RESIZE = 4,	   /* a rank new with a resize: it begins where the world
				    * grew */
};
/* One of enum zs_resumed; *checkpoint (may be NULL) gets the checkpoint's id
 * for ZS_RESUMED_CHECKPOINT, else 0. Lets a training script tell a run that
 * continues an earlier, finished one (STOPPED) from recovery (the rest). */
int zs_trainer_resumed_from(const zs_trainer *t, unsigned long long *checkpoint);
/*
 * This rank's state as of the start of step (its RNG states, its data
 * loader's position: what it needs to compute that step again), len bytes
 * (at most 1 MiB) copied; call it before zs_step_begin(step). The step's
 * boundary hands it to the coordinator, which keeps each rank's latest.
 * When the rank is lost (its process killed: its data connections end),
 * the job does not roll back: the process that takes the rank next gets,
 * from zs_trainer_resume, the step it was lost in and this state (as its
 * *step and blob), computes that step again, and its pushes of it count
 * once; the other ranks wait at their next gather. A rank that sets none
 * is handed an empty blob (its step's data then depends on the step
 * alone). ZS_OK; ZS_EINVAL (over 1 MiB); ZS_ENOMEM.
 */
int zs_set_step_state(zs_trainer *t, unsigned long long step, const void *state, unsigned len);

/* Bytes moved, time spent waiting, and memory held by this trainer, copied
 * into the caller's *c; never fails. */
struct zs_trainer_counters {
	unsigned long long bytes_gathered, bytes_pushed;
	unsigned long long gathers, pushes;
	double wait_seconds;
	unsigned long long live_param_bytes, peak_param_bytes; /* step driver */
	unsigned long long live_grad_bytes, peak_grad_bytes;
	/* of bytes_pushed, those the server took from this trainer's device
	 * memory (device mode, a server on the same device over shm) */
	unsigned long long bytes_pushed_device;
};
void zs_trainer_counters(const zs_trainer *t, struct zs_trainer_counters *c);

/*
 * The step report: the account of the last step the step driver finished
 * (zs_step_begin entry to zs_step_end return). seconds splits into waiting
 * for parameters (gathers: includes the servers' update of the previous
 * step), waiting for gradient pushes, the coordinator calls at the boundary,
 * and the rest, the trainer's own compute. Peaks are of this step. Each
 * report also goes to the coordinator at the next boundary (or at close),
 * where `zshardctl stats JOB` shows it. Copied into the caller's *s.
 * ZS_OK; ZS_ENOTFOUND before the first step ended.
 */
struct zs_step_stats {
	unsigned long long step;
	unsigned stage, prefetch;
	double seconds, compute_seconds, gather_wait_seconds, push_wait_seconds,
		control_seconds;
	unsigned long long bytes_gathered, bytes_pushed;
	unsigned long long peak_param_bytes, peak_grad_bytes; /* live at once */
	unsigned long long rss_peak_bytes; /* the process's peak resident set */
};
int zs_last_step(const zs_trainer *t, struct zs_step_stats *s);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
