/*
 * engine.h - the shard server's step engine: the zs_target behind the
 * data-plane listener.
 *
 * For each shard it owns: fp32 master parameters, optimizer state (AdamW
 * m and v, or SGD momentum), a compute-dtype copy served to gathers (the
 * master itself for fp32 units), one staging slot per trainer, and a
 * version (the number of optimizer steps applied).
 *
 * Step protocol per shard (docs/DESIGN.md section 3):
 *   gather(step t): served when version == t; held when version < t (until
 *     the update that makes t); refused when version > t (t is gone).
 *   push(step t, rank r): lands in r's slot when version == t and r has not
 *     pushed t; acknowledged once landed. When the last of the R ranks has
 *     landed, the slots are reduced in rank order in fp32 (whatever order
 *     they arrived in), averaged, the optimizer applied with t + 1, the
 *     compute copy refreshed, version = t + 1, and held gathers released.
 *   init (rank 0, step 0, fp32): writes the masters before the first step.
 *
 * Gradient accumulation: a push marked partial is added to its rank's fp32
 * sum (in arrival order, which is the rank's own order) and acknowledged;
 * the rank's final push completes its contribution. The mean is over
 * ranks: a trainer scales each micro-batch's loss by 1/K, as in PyTorch.
 *
 * Global-norm clipping (a job's clip_norm > 0): a server first reduces
 * every shard of the job it holds for the step, then hands their sums of
 * squares to the norm exchange (the coordinator, in zshard-server), which
 * returns the job's total over all servers, summed in placement order; the
 * coefficient is PyTorch's clip_grad_norm_ one, and the updates follow.
 */
#ifndef ZS_ENGINE_H
#define ZS_ENGINE_H

#include <stdint.h>

#include "model/model.h"
#include "base/status.h"
#include "net/listener.h"

struct engine;

struct engine_stats {
	uint32_t jobs, shards;
	uint64_t bytes;         /* allocated for shard state */
	uint64_t steps_applied; /* shard updates */
	uint64_t bytes_in, bytes_out;
	uint64_t held;          /* gathers waiting now */
	uint64_t pipelined;     /* elements updated while their last push landed */
	uint32_t tiered;        /* shards whose state lives in tier files */
	uint32_t on_device;     /* shards whose state lives on the device */
	uint64_t device_bytes;  /* of masters and state there */
	uint64_t tier_read, tier_written; /* bytes */
	uint64_t landing_bytes; /* of pushes landing now */
	uint64_t landing_kept;  /* landing buffers held, busy or for reuse */
	uint64_t landing_waits; /* pushes told to wait for landing room */
	uint64_t repl_bytes;    /* forwarded to replicas */
	uint64_t repl_steps;    /* shard updates every replica acknowledged */
	double reduce_seconds;  /* every shard update's reduction (finishing the sum), summed */
	double optim_seconds;   /* and its optimizer */
};

/*
 * nthreads: threads for one shard's optimizer update (1 or more).
 * step_timeout_ms: a gather held longer than this fails with ZS_ETIMEDOUT
 * and a message naming the ranks that have not pushed (0: 60 s).
 */
enum zs_status engine_create(unsigned nthreads, uint32_t step_timeout_ms,
			     struct engine **out, struct zs_error *err);
/*
 * The norm exchange: given this server's shard norms for a job's step,
 * returns the job's total sum of squares. Called without locks from the
 * thread that completed the server's last shard; may block (bounded).
 */
typedef enum zs_status (*engine_norm_fn)(void *ctx, const char *job, uint64_t timeline,
					 uint64_t step, const struct zs_shard_norm *norms,
					 uint32_t n, double *total, struct zs_error *err);
/* Without one, jobs that clip are refused. Set before adding jobs. */
void engine_set_norm_exchange(struct engine *e, engine_norm_fn fn, void *ctx);
/*
 * The norms this server reported for job's step and the total it was
 * answered and applied, if it was one of the last few (none since a
 * restore): *norms (n of them, malloc'd) and *total. ZS_ENOTFOUND when not
 * kept. For a coordinator that asks again (it took over from one that died
 * before answering every server).
 */
enum zs_status engine_norms_answered(struct engine *e, const char *job, uint64_t step,
				     struct zs_shard_norm **norms, uint32_t *n, double *total);

/*
 * Replicas (a job's spec.replicas > 1): the data-plane address (tcp,
 * HOST:PORT) of server id, where a primary sends its copies' updates.
 * Called from the replicator's thread without locks; may block (bounded).
 * Without one, jobs with replicas are refused. Set before adding jobs.
 */
typedef enum zs_status (*engine_peer_fn)(void *ctx, uint64_t id, char *addr, size_t len,
					 struct zs_error *err);
void engine_set_peer_resolver(struct engine *e, engine_peer_fn fn, void *ctx);
/*
 * A trainer reached a replica of a replicated job: whether the
 * coordinator's placement of job is newer than epoch (a failover made that
 * replica a primary), and if so this server's assignments brought up to
 * date before it returns. Called from a connection's thread without locks;
 * may block (bounded). Without one, such a request is refused at once.
 */
typedef bool (*engine_stale_fn)(void *ctx, const char *job, uint64_t epoch);
/* The new copies this server's primaries seeded (a rebuild) since the last
 * call, for the coordinator (up to max into out; returns how many; the
 * rest stay for the next call). */
uint32_t engine_take_seeded(struct engine *e, struct zs_seeded *out, uint32_t max);
/* Trainer ranks each of whose data connections to this server ended, or
 * began again after that was noted (up to max into out; returns how many;
 * 0 while the last batch taken is not settled). */
uint32_t engine_take_dropped(struct engine *e, struct zs_dropped *out, uint32_t max);
/* The batch taken: sent (the coordinator answered) or not (kept, and
 * taken again before any newer note: engine/conns.h). */
void engine_dropped_settle(struct engine *e, bool sent);
void engine_set_stale_check(struct engine *e, engine_stale_fn fn, void *ctx);

/*
 * The NVMe tier: shards added after budget bytes of masters and optimizer
 * state are resident keep them in files under dir instead (O_DIRECT, one
 * per shard), and every update streams them through aligned chunks.
 * Gathers still read an in-memory compute copy. Set before adding jobs.
 */
enum zs_status engine_set_tier(struct engine *e, const char *dir, uint64_t budget,
			       struct zs_error *err);

/*
 * GPU-resident shards: shards added after this keep their fp32 master,
 * optimizer state and reduction in device memory (a CUDA ordinal, or
 * ZS_DEV_EMULATED: gpu/dev.h), reduced and updated by gpu/kern.h's kernels,
 * bitwise as on the host; gathers read a compute-dtype copy in the arena.
 * budget: bytes of masters and state the device takes (0: as many as it
 * allocates); the shards past it stay in host memory, and past the tier's
 * budget in its files, as without a device. Set before adding jobs: ZS_OK;
 * ZS_EUNAVAIL (no such device, no CUDA driver, a build without kernels:
 * the message says which); ZS_ESTATE (jobs were added).
 */
enum zs_status engine_set_device(struct engine *e, int device, uint64_t budget,
				 struct zs_error *err);
/*
 * Pushes land in arena buffers taken as each begins and given back once it
 * is in the reduction; budget bounds their bytes together (default 256
 * MiB): a push past it waits for room (one push always may land).
 */
void engine_set_landing(struct engine *e, uint64_t budget);
/*
 * Readers' pinned copies are taken in the arena up to budget bytes
 * together (default 0: none), so that readers addressing it (shm, rdma)
 * take them without the server's CPU; past it they are malloc'd and read
 * over tcp alone.
 */
void engine_set_reader_budget(struct engine *e, uint64_t budget);
/* The device's name, or NULL when shards are in host memory. */
const char *engine_device(const struct engine *e);

/* The target to give zs_listener_start (ctx is the engine). */
const struct zs_target *engine_target(struct engine *e);
/* Must be called once, before any job is added. */
void engine_set_listener(struct engine *e, struct zs_listener *l);

/*
 * Takes the shards of job that placement puts on server_id. A job already
 * held at the same epoch is left as it is. Errors: ZS_ENOSPC (arena full),
 * ZS_ESTATE (a feature the engine does not have yet), ZS_EINVAL.
 */
enum zs_status engine_add_job(struct engine *e, const struct zs_job *job,
			      uint64_t server_id, struct zs_error *err);
/* True if the engine holds job name at epoch. */
bool engine_has_job(struct engine *e, const char *name, uint64_t epoch, uint64_t incarnation);
/* Whether sh, a shard of job name (of any placement of its layout), is a
 * frozen shard (zs_shard_marks): it has no optimizer state. False when the
 * job is not held. */
bool engine_shard_marks(struct engine *e, const char *name, const struct zs_shard *sh);
/* Drops a job: held gathers fail with ZS_ECANCELED, memory is returned. */
void engine_remove_job(struct engine *e, const char *name);
/* Names of the jobs held, for reconciling with assignments (n at most max). */
uint32_t engine_job_names(struct engine *e, char (*names)[ZS_JOB_NAME_MAX], uint32_t max);

/* ------------------------------------------------------------ checkpoints */

/* One shard's state as captured (arrays malloc'd; s0, s1 may be NULL). */
struct engine_snap {
	uint32_t unit, index;
	uint64_t offset, length, step;
	float *master, *s0, *s1;
};
void engine_snaps_free(struct engine_snap *s, uint32_t n);
/* Cancels the snapshot id of job still waiting for its step: its done
 * callback runs now with ZS_ECANCELED. Nothing to cancel is fine. */
void engine_cancel_snapshot(struct engine *e, const char *job, uint64_t id);

/*
 * Called once per snapshot, from the thread that captured its last shard
 * (or that failed it): on ZS_OK it owns snaps (engine_snaps_free).
 */
typedef void (*engine_snap_done)(void *ctx, const char *job, uint64_t id, uint64_t step,
				 struct engine_snap *snaps, uint32_t n, enum zs_status st,
				 const char *why);

/*
 * Captures every shard of job at version step: a shard already there at
 * once, the others when their update reaches step (training goes on; the
 * copies are what gets written). ZS_ESTATE when a shard is past step or
 * has no parameters; ZS_ENOTFOUND for a job this engine does not hold.
 */
enum zs_status engine_snapshot(struct engine *e, const char *job, uint64_t id,
			       uint64_t step, engine_snap_done done, void *ctx,
			       struct zs_error *err);

/* Fills one shard's arrays (length floats each; s0, s1 NULL when the
 * optimizer has no such state) and its step. */
typedef enum zs_status (*engine_loader)(void *ctx, const struct engine_snap *want,
					float *master, float *s0, float *s1, uint64_t *step,
					struct zs_error *err);

/*
 * Restores every shard of job through load, all or nothing: every shard is
 * loaded and checked (one step for all) before any changes; load NULL
 * resets the job instead (step 0, no parameters until an initial upload).
 * rollback: the restore ends the job's timeline: the handle its trainers'
 * connections carry is retired (their requests, and the gathers they have
 * waiting, get ZS_ERESUME; they reconnect), pushes still landing are
 * waited for (within the step timeout, else ZS_ETIMEDOUT) and discarded
 * with any half-finished step. Without it (a server bringing back its own
 * live state at start) gathers waiting for the restored step are served.
 * *step receives the restored step. timeline: the job's timeline the
 * restore begins (a restore task's; 0: none said): each shard takes it
 * with its state, and refuses a seed of an earlier one from then on (its
 * state read before the restore, on its way: engine/copies.h).
 */
enum zs_status engine_restore(struct engine *e, const char *job, engine_loader load,
			      void *ctx, bool rollback, uint64_t timeline, uint64_t *step,
			      struct zs_error *err);
/*
 * Job's timeline from now on, as a restore task says it (it only grows):
 * the norm exchange says it (engine_norm_fn's timeline), so that the
 * coordinator refuses a report of an ended timeline still on its way.
 */
void engine_set_timeline(struct engine *e, const char *job, uint64_t timeline);

/*
 * Captures every shard of job as it is now, if the job is between steps:
 * every shard has parameters at one version, no push is in or landing.
 * ZS_OK: *snaps (n of them, engine_snaps_free) and *step; ZS_ESTATE (with
 * the reason) otherwise; ZS_ENOTFOUND. The caller keeps trainers away
 * (the listener stopped) so that the shards cannot move meanwhile.
 */
enum zs_status engine_capture_now(struct engine *e, const char *job, struct engine_snap **snaps,
				  uint32_t *n, uint64_t *step, struct zs_error *err);

void engine_stats(struct engine *e, struct engine_stats *st);

/* A job's latest step that every shard on this server applied, and the
 * server's time on it: reducing the ranks' gradients and the optimizer
 * (with the NVMe tier: its reads and writes too). Up to max jobs into out;
 * returns how many. */
uint32_t engine_job_steps(struct engine *e, struct zs_job_step_stats *out, uint32_t max);
/* Fails every held gather; the listener must be freed after this. */
void engine_free(struct engine *e);

#endif
