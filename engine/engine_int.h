/*
 * engine_int.h - the shard engine's state, internal to server/ (the API is
 * engine.h).
 *
 * Locking: the engine mutex guards the job list; each shard has its own
 * mutex for its version, push marks and held gathers. Data is served and
 * updated outside the engine mutex; a job is never freed while a callback
 * uses it because callbacks hold a reference (refs) taken under the engine
 * mutex.
 *
 * Files: engine.c (life, jobs and their shards, stats, the sweeper),
 * face.c (the data-plane face: the listener's target callbacks), step.c
 * (the reduction, clipping and the optimizer step of a shard), tier.c (the
 * NVMe tier's file I/O and double buffer), snapshot.c (capture at a
 * checkpoint's step, snapshots and restore), landing.c (the buffers pushes
 * land in), replica.c (a primary's forwards to its shard's other copies,
 * partial pushes included, and seeds of new copies), acks.c (a replicated
 * job's durable acknowledgements), replica_in.c (a copy taking the
 * forwards), epoch.c (a new placement epoch taken
 * in place: failover, rebuild), clip.c (global-norm clipping: the norm
 * exchange and the update it lets go), redo.c (what a lost rank's
 * replacement needs: the step before, pushes counted once), world.c (the
 * world size by step: zshardctl job resize).
 */
#ifndef ZS_ENGINE_INT_H
#define ZS_ENGINE_INT_H

#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/pool.h"
#include "math/optim.h"
#include "model/hparams.h"
#include "base/util.h"
#include "engine/conns.h"
#include "engine/copies.h"
#include "engine/intake.h"
#include "engine/phase.h"

/* hyperparameter tables a job keeps (those still ahead of or at its
 * slowest shard's step) */
#define EJOB_HP_KEEP 8

/* A norm exchange this server was answered and applied (clip.c), kept for
 * the last EJOB_ANSWERED_KEEP until a restore: the coordinator that
 * answered may die before it answers the other servers, and the next one
 * then asks for the norms again (engine_norms_answered). */
#define EJOB_ANSWERED_KEEP 8
struct eng_answered {
	uint64_t step;
	double total;
	uint32_t n;
	struct zs_shard_norm *nv;
};

struct held {
	struct zs_sop *op;
	struct zs_xfer x;
	int64_t since_ms;
	uint32_t rank;
};

struct eshard {
	uint64_t counted; /* what it adds to engine.bytes (0: nothing yet) */
	pthread_mutex_t mu;
	uint32_t idx; /* in its job's shards */
	struct zs_shard sh;
	enum zs_dtype dt;
	unsigned dsz;
	float *master;   /* arena: init writes land here */
	void *copy;      /* arena: what gathers read (== master for f32) */
	float *s0, *s1;  /* optimizer state */
	float *acc;      /* the step's mean gradient (bacc finished) */
	struct zs_bacc *bacc; /* the reduction (math/bsum.h): 16 B/element */
	/* the open step's pushes, counted (engine/intake.h: its only writer) */
	struct eng_intake in;
	struct eshard_open {
		uint32_t init_landing; /* initial uploads landing now */
		uint64_t piped; /* elements already reduced and applied while the
				 * last push was landing */
		uint64_t red_ns, opt_ns; /* its reduce and optimizer time */
	} open;
	/* bit k: optimizer array k is in (an imported state's upload, or
	 * whole from a seed or a restore); a job with steps_taken trains
	 * from step 0 only with every array in (eng_state_whole) */
	uint8_t state_in;
	uint64_t version;
	/* where step version is (engine/phase.h): changed by eng_phase_go
	 * alone. Not EMPTY: it has parameters (eng_ready); CLIPPING: acc
	 * holds the step's mean gradient, reduced; WAITING: every push is in
	 * and the last update is not on every copy yet */
	enum eng_phase phase;
	/* clipping (clip.c): the reduced step's squared norm; under j->cmu:
	 * reduced at step at - 1 and not applied yet (0: none), claimed by
	 * an exchange */
	struct eshard_clip {
		double sumsq;
		uint64_t at;
		bool claimed;
	} clip;
	/* the NVMe tier: master, s0, s1 in the file at path (then those
	 * pointers are NULL; fd -1 without one); arrays at 4 KiB-aligned
	 * offsets */
	struct eshard_tier {
		int fd;
		uint64_t arr_bytes; /* per array, rounded up to 4 KiB */
		char path[600];
	} tier;
	unsigned n_arrays;  /* 1 + optimizer arrays */
	float *landing;     /* arena: where an initial upload lands */
	/* its elements by optimizer group: segs [a, b) from the shard's
	 * start, adjacent tensors of one group merged (one segment for most
	 * jobs); a frozen tensor's segment is never updated and adds nothing
	 * to the clipping norm (frozen: the shard has such a segment). A
	 * frozen shard (marks, zs_shard_marks): every push of it is a step
	 * mark of glen = ZS_MARK_LEN elements; acc and bacc hold that much,
	 * no optimizer state, never on the device. Else glen = sh.length */
	struct eshard_lay {
		struct eseg { uint64_t a, b; uint32_t group; bool frozen; } *segs;
		uint32_t n_segs;
		bool frozen;
		bool marks;
		uint64_t glen;
	} lay;
	/* GPU-resident (devshard.c; master, s0, s1, bacc then NULL): the
	 * arrays, the reduction, one push at a time (x), the compute-dtype
	 * copy; on: the shard is there; pinned: the host copy page-locked */
	struct eshard_dev {
		bool on, pinned;
		float *master, *s0, *s1, *acc, *x;
		struct zs_bacc *bacc;
		void *copy;
	} dev;
	/* the parameters of the step before version, in the compute dtype,
	 * for a lost rank's replacement that redoes that step (engine/redo.c):
	 * p is the arena's (arena) or, where it had no room, the heap's (then
	 * served over tcp only); of is 1 + the step they are (0: none, or an
	 * update under way has overwritten part of them). A frozen shard has
	 * none: its copy never changes */
	struct eshard_prev {
		void *p;
		bool arena;
		uint64_t of;
	} prev;
	/* gathers held until their step is served */
	struct eshard_hold {
		struct held *q;
		size_t n, cap;
	} hold;
	/* 1 + the step whose mean gradient acc holds, as the optimizer took
	 * it (0: none known; a seed, a restore): a copy promoted sends its
	 * last step again, from acc, to a fellow copy that missed it */
	uint64_t acc_of;
	/*
	 * Replicas (replica.c, replica_in.c, acks.c, epoch.c). A primary: the
	 * servers of its other copies (peer); wait while the update that made
	 * version (or the initial upload) is not yet applied by every one of
	 * them: gathers of version wait, and so does the next step's update
	 * (phase WAITING: every push of it is in); err: why a copy failed to
	 * take it. gen grows at every restore (a forward of the earlier
	 * timeline then changes nothing). A replica (sh.copy > 0): landing
	 * while its primary's forward lands in acc; seed: a new copy's whole
	 * state, landing (a rebuild).
	 * acks: a replicated job's pushes of the open step (or of the step
	 * being forwarded) that landed, acknowledged once every copy has
	 * applied their step, so that a trainer can send again to a replica
	 * whatever a lost primary was not done with.
	 * Gradient accumulation: every copy puts each partial push in its
	 * reduction (its primary forwards them), counted in in.pcount, so
	 * that one sent again goes in once. seed_gap (a copy): 1 + the step it was
	 * seeded in after partial pushes of that step (their terms are not
	 * here; 0: none). A primary: the copies it seeded so (unsettled),
	 * reported seeded once that step's forward has reached them; peer_gen
	 * grows at every new placement epoch (a partial push's forward then
	 * goes to the peers of the new one).
	 */
	struct eshard_repl {
		uint64_t peer[ZS_MAX_REPLICAS - 1];
		uint32_t n_peers;
		bool wait, landing;
		uint64_t gen;
		char *err;
		float *seed;
		struct eack { struct zs_sop *op; uint64_t step; } *acks;
		size_t n_acks, cap_acks;
		uint64_t seed_gap;
		struct { uint64_t peer, step; } unsettled[ZS_MAX_REPLICAS - 1];
		uint32_t n_unsettled;
		/* the copies this primary seeded in this placement epoch: a
		 * forward one refused for want of state goes again, unseeded
		 * (eng_copy_seed_again) */
		uint64_t seeded[ZS_MAX_REPLICAS - 1];
		uint32_t n_seeded;
		uint64_t peer_gen;
	} repl;
};

/* A snapshot in progress: shards are captured as they reach step. */
struct epending {
	char job[ZS_JOB_NAME_MAX];
	uint32_t n_shards; /* of the job here (snaps, got: by shard) */
	uint32_t want;     /* its primaries: what the snapshot takes */
	uint64_t id, step;
	uint32_t n_got;
	bool *got;
	struct engine_snap *snaps;
	engine_snap_done done;
	void *ctx;
	struct epending *next;
};

struct ejob {
	struct engine *e;
	pthread_mutex_t cmu; /* clipping's marks and answers, snapshots in progress */
	struct epending *pend;
	/* the step report: time of the steps being applied (by step parity)
	 * and of the latest one every shard here has applied */
	struct ejob_rep {
		struct { uint64_t step, red_ns, opt_ns; uint32_t n; } acct[2];
		struct zs_job_step_stats last;
		bool have_last;
	} rep;
	char name[ZS_JOB_NAME_MAX];
	char token[ZS_TOKEN_MAX]; /* what a HELLO for it must carry */
	/* or this, for a connection that may only gather ("": none) */
	char reader_token[ZS_TOKEN_MAX];
	/* the handle trainers' connections carry (cur), and those given out
	 * before a restore (the connections of an earlier timeline): their
	 * requests are refused with ZS_ERESUME */
	struct ejob_hdl {
		uint32_t cur;
		uint32_t retired[16];
		unsigned n_retired;
	} hdl;
	uint64_t epoch;
	uint64_t incarnation; /* with the name and epoch: which job this is */
	struct zs_job_spec spec;
	/* the shards here, each allocated once (a pointer to one stays good
	 * while the job lives); the array has room for one copy of every
	 * shard of the job, so a new replica (a rebuild) is added in place:
	 * filled in, then counted (n_shards, atomic) */
	_Atomic uint32_t n_shards;
	uint32_t cap_shards;
	struct eshard **shards;
	uint32_t n_primary; /* shards here that are their shard's primary */
	/* the replicator's connections to the servers of this job's other
	 * copies (replica.c; only the worker running the job's forwards,
	 * busy under the queue's lock, touches them) */
	struct ejob_rc {
		struct { uint64_t id; struct zs_conn *c; bool broken; } peer[8];
		unsigned n;
		bool busy;
	} rc;
	/* the hyperparameters trainers set (engine/hparams.c): tables by
	 * step, ascending; none: the spec's values */
	struct ejob_hps {
		pthread_mutex_t mu;
		struct zs_hp_table t[EJOB_HP_KEEP];
		unsigned n;
	} hps;
	/* the world size by step, as trainers say it (world.c; none: the
	 * spec's), and the ranks every shard's per-rank arrays hold (cap,
	 * grown before a change that needs it is taken; mu) */
	struct ejob_wd {
		pthread_mutex_t mu;
		struct zs_worlds w;
		uint32_t cap;
	} wd;
	/* the norm exchanges answered lately, a ring (clip.c; under cmu);
	 * gen grows at every restore, which empties it */
	struct { struct eng_answered ring[EJOB_ANSWERED_KEEP]; unsigned next; uint64_t gen; } answered;
	/* the trainers' data connections to this server, per rank (ranks.c;
	 * e->mu): n ranks counted, allocated at the first HELLO; each
	 * rank's count, and whether its drop was noted (engine/conns.h) */
	struct { struct zs_conns *live; uint32_t n; } rk;
	/* versions readers pinned (pins.c): the list, its length, and why
	 * the last drop of them all happened ("": none yet) */
	struct ejob_pins {
		pthread_mutex_t mu;
		struct epin *list;
		uint32_t n;
		char why[160];
		/* buffers of pins freed, kept for the next (pins.c); arena:
		 * the listener's (else malloc's) */
		struct { void *b; size_t len; bool arena; } *sp;
		uint32_t n_sp, cap_sp;
	} pins;
	atomic_int refs;
	atomic_bool removed; /* dropped from the engine (its last reference frees it) */
	struct ejob *next;
};

enum { ENG_TIER_THREADS = 8 };

struct engine {
	pthread_mutex_t mu;
	struct zs_target target;
	struct zs_listener *l;
	uint64_t pin_budget;        /* arena bytes readers' copies may take */
	atomic_uint_fast64_t pin_arena; /* ... and take now (spares included) */
	unsigned nthreads;
	uint32_t next_handle;
	struct ejob *jobs;
	/* a job's teardown, run by its last reference (jobs.c) */
	void (*job_release)(struct engine *e, struct ejob *j);
	uint32_t step_timeout_ms;
	pthread_t sweeper;
	atomic_int stop;
	/* what engine_stats reports, counted as it happens */
	struct eng_counters {
		atomic_uint_fast64_t steps, bytes_in, bytes_out, piped;
		atomic_uint_fast64_t red_ns, opt_ns; /* every update's, summed */
		/* the shards held now (zshardctl plan's bytes a shard element,
		 * each shard's counted once, added and dropped) */
		atomic_uint_fast64_t bytes;
		atomic_uint_fast64_t tier_read, tier_written;
		atomic_uint_fast64_t repl_bytes, repl_steps;
	} ctr;
	/* the NVMe tier (tier.c): its directory, the bytes of master + state
	 * kept in memory and their bound; the read-ahead and write-back pool
	 * (base/pool.h, made with the engine: as many threads as tiered
	 * updates overlap, up to ENG_TIER_THREADS; beyond, a chunk's helper
	 * waits its turn and its update for it) */
	struct eng_tier {
		char dir[512];
		uint64_t budget, resident;
		struct zs_pool *pool;
	} tier;
	/* GPU-resident shards (devshard.c): the device and its kernels, the
	 * device bytes of the shards' arrays and their bound (0: none) */
	struct eng_gpu {
		struct zs_dev *dev;
		const struct zs_kern *kern;
		uint64_t resident, budget;
	} gpu;
	/* landing.c: the buffers pushes land in, busy or kept for reuse */
	struct eng_land {
		pthread_mutex_t mu;
		struct landbuf { void *p; size_t bytes; bool busy, pinned; } *buf;
		size_t n;
		uint64_t busy, total, budget, waits;
	} land;
	/* clipping's norm exchange (clip.c): the coordinator's, and a pool
	 * (made with the engine, unbounded: one exchange may wait for
	 * another queued after it) */
	struct eng_norm {
		engine_norm_fn fn;
		void *ctx;
		struct zs_pool *pool;
	} norm;
	/* replicas (replica.c, replica_in.c): the peers' addresses, stale
	 * copies reported, the forwards (a queue of tasks, a worker per job
	 * with tasks in it), the seeds done for the coordinator
	 * (engine_take_seeded; mu). ZSHARD_FAULT=repl-one-copy, read once
	 * (test_replica): replica.c's primary dies after sending a step to
	 * its last copy alone; repl-refuse: replica_in.c's copies refuse step
	 * forwards from step 2 on (a copy alive to the coordinator that its
	 * primary cannot reach) */
	struct eng_rp {
		engine_peer_fn peer_fn;
		void *peer_ctx;
		engine_stale_fn stale_fn;
		void *stale_ctx;
		struct erepl *q;
		struct zs_seeded *seeded;
		uint32_t n_seeded, cap_seeded;
		bool fault_one_copy, fault_refuse;
	} rp;
	/* trainer ranks whose data connections all ended or began again,
	 * for the coordinator (ranks.c, engine_take_dropped; mu) */
	struct zs_notes dr;
};

/* The pushes a shard's step waits for: one per rank, or, in a collective
 * job (the trainers reduce among themselves), one: its slice's f32 sum
 * from rank sh.index. */
/* world.c: the world size of step here, the WORLD frame's target
 * callback, per-rank arrays for n ranks on every shard (ZS_ENOMEM), a
 * restore's clearing */
uint32_t eng_world_at(struct ejob *j, uint64_t step);
enum zs_status eng_t_world(void *ctx, uint32_t job, uint32_t rank, const uint8_t *payload,
			   size_t len, struct zs_error *err);
enum zs_status eng_ranks_ensure(struct ejob *j, uint32_t n, struct zs_error *err);
void eng_worlds_clear(struct ejob *j);

static inline uint32_t eng_contributors(struct ejob *j, uint64_t step)
{
	return j->spec.collective ? 1 : eng_world_at(j, step);
}

/* shard.c: a shard's arrays and state for placement entry sh (s zeroed
 * but for idx), and their release. */
enum zs_status eng_shard_init(struct engine *e, struct ejob *j, struct eshard *s,
			      const struct zs_shard *sh, struct zs_error *err);
void eng_shard_release(struct engine *e, struct eshard *s);

/* acks.c */
/* A replicated job's push of step landed (caller holds s->mu): kept until
 * that step is on every copy; false when out of memory (answer it now). */
bool eng_ack_later(struct eshard *s, struct zs_sop *op, uint64_t step);
/* Acknowledges the kept pushes whose step every copy has applied (those
 * below version, or version - 1 while its forward is out). */
void eng_acks_flush(struct eshard *s);
/* Fails every kept push (a restore, a failed forward, the shard dropped). */
void eng_acks_fail(struct eshard *s, enum zs_status st, const char *why);

/* replica.c */
/* j's shards take placement job's roles in place (a replica promoted,
 * peers gone): ZS_OK; ZS_ESTATE when the shards here differ (the caller
 * then starts over). Caller holds no lock. */
enum zs_status eng_reassign(struct engine *e, struct ejob *j, const struct zs_job *job,
			    uint64_t server_id);
/* A primary with replicas has reached a new version (init: its initial
 * parameters, m their fp32 values): queues the forward to every copy and
 * sets repl.wait (caller holds s->mu). */
void eng_repl_queue(struct engine *e, struct ejob *j, struct eshard *s, bool init, const float *m);
/* A new copy of primary s on server peer (a rebuild): queues the shard's
 * whole state at its version to it, ahead of the forwards after (caller
 * holds s->mu). */
void eng_repl_seed(struct engine *e, struct ejob *j, struct eshard *s, uint64_t peer);
/* A copy promoted with no mean gradient of its last step (ER_CATCH_UP):
 * queues its whole state to every copy, taken by one behind it, and sets
 * repl.wait until all have answered (caller holds s->mu). */
void eng_repl_catchup(struct engine *e, struct ejob *j, struct eshard *s);
/* A replica's side of a forward: the write's destination (caller holds
 * nothing), and its landing (applies the step, then acknowledges). */
enum zs_status eng_repl_begin(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
			      const struct zs_xfer *x, void **dst, struct zs_error *err);
void eng_repl_landed(struct engine *e, struct ejob *j, struct eshard *s, const struct zs_xfer *x,
		     void *dst, struct zs_sop *op);
/* A replicated job's partial push (rank, x) landed in primary s at dst
 * (its term in the reduction already, unless dup): forwarded to every copy
 * from dst, acknowledged (op) and dst given back once all have it; at
 * once with no copy (caller holds s->mu). */
void eng_repl_partial(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
		      const struct zs_xfer *x, void *dst, struct zs_sop *op);
/* A trainer's request reached replica s of j: true when a newer placement
 * (now taken) made it its shard's primary (caller holds no lock). */
bool eng_promoted_since(struct engine *e, struct ejob *j, struct eshard *s);
/* A shard's peers: the servers of its other copies in placement p when it
 * is the primary there, none otherwise. */
void eng_shard_peers(struct eshard *s, const struct zs_placement *p);
/* Starts and stops the replicator's thread. */
enum zs_status eng_repl_start(struct engine *e, struct zs_error *err);
void eng_repl_stop(struct engine *e);
/* peers.c: closes a job's connections to its copies' servers */
void eng_repl_close(struct ejob *j);
/* the connection to peer server id for j (made when missing), or
 * NULL (why in err); a connection marked broken (its requests fail) is
 * closed by eng_peers_reap once nothing waits on its requests (the
 * replicator's worker alone calls these). */
struct zs_conn *eng_peer_conn(struct engine *e, struct ejob *j, uint64_t id, struct zs_error *err);
void eng_peer_broken(struct ejob *j, uint64_t id);
void eng_peers_reap(struct ejob *j);
/*
 * What a change of a shard's step leaves to be done once its lock is let
 * go: no function unlocks a lock its caller took, and nothing travels on
 * the side. A transition (eng_step_complete, eng_apply, the captures of
 * snapshots) fills one under s->mu; the caller unlocks, then eng_fx_run
 * answers the gathers it released, hands over the snapshots it completed
 * and starts clipping's norm exchange for the step it marked reduced.
 */
struct eng_fx {
	struct held *rel; /* held gathers released: answered */
	size_t n_rel;
	struct epending *done; /* snapshots with every shard: handed over */
	bool clip;             /* s reduced step clip_t, clipping on: the exchange */
	uint64_t clip_t;
};
/* fx.c: carries out fx's effects for s (no locks held) and empties fx. */
void eng_fx_run(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);
/* fx.c: the step's completion once every push of it is in (caller holds
 * s->mu, and keeps it; eng_fx_run after): the reduction finished, then s
 * marked for clipping's exchange, or the update. */
void eng_step_complete(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);
/* The forward of s's open step that landed in its mean gradient ends
 * unapplied (aborted, or the step applied since): the landing is over,
 * and a step it held back completes (caller holds s->mu; fx after). */
void eng_repl_unlanded(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);
/* world.c: push x of rank, and what shard s of j says at it, as engine/intake.c
 * reads them (caller holds s->mu). */
struct eng_push eng_push_of(const struct zs_xfer *x, uint32_t rank);
struct eng_at eng_at_of(struct ejob *j, const struct eshard *s, const struct zs_xfer *x);

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

/* ranks.c: a HELLO of rank taken for j, and a connection that said one
 * ended, with the trainer's reconnect count and session it said (caller holds
 * e->mu); j's counts freed */
void eng_rank_in(struct engine *e, struct ejob *j, uint32_t rank, uint64_t reconnects,
		 uint64_t session);
void eng_rank_out(struct engine *e, struct ejob *j, uint32_t rank, uint64_t reconnects,
		  uint64_t session);
void eng_ranks_free(struct ejob *j);
/* face.c: the listener's bye (a connection that said HELLO ended) */
void eng_t_bye(void *ctx, uint32_t job, uint32_t rank, uint64_t reconnects, uint64_t session);
enum zs_status eng_t_hello(void *ctx, const struct zs_hello *h, uint32_t *handle,
			   struct zs_error *err);
/* face.c: the key of job's encrypted connections for the role (net/dtls.h) */
enum zs_status eng_t_tls_key(void *ctx, const char *job, bool reader, uint8_t key[32],
			     struct zs_error *err);
void eng_t_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		   const struct zs_xfer *x);
enum zs_status eng_t_write_begin(void *ctx, uint32_t job, uint32_t rank,
				    const struct zs_xfer *x, void **dst,
				    struct zs_error *err);
/*
 * The last rank's push is landing: reduce and apply what has landed, so the
 * update overlaps the reception. Only when nothing else can still change
 * those elements: every other push in, none other landing, no clipping.
 */
void eng_t_write_progress(void *ctx, uint32_t job, uint32_t rank,
			     const struct zs_xfer *x, void *dst, uint64_t bytes);
void eng_t_write_abort(void *ctx, uint32_t job, uint32_t rank,
			  const struct zs_xfer *x, void *dst);
void eng_t_write_done(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			 const struct zs_xfer *x, void *dst);

/* hparams.c */
/* The listener's HPARAMS callback: keeps a job's table from a step on. */
enum zs_status eng_t_hparams(void *ctx, uint32_t job, uint32_t rank, uint64_t step,
			     const uint8_t *payload, size_t len, struct zs_error *err);
/* Shard s's segments by optimizer group (at its creation): 0 or ENOMEM. */
int eng_shard_segments(struct ejob *j, struct eshard *s);
/* The update of step (t-th, 1-based) per optimizer group, steps[] with the
 * job's n_groups entries, and the clipping norm in force at step. */
void eng_hp_steps(struct ejob *j, uint64_t step, uint64_t t, struct zs_optim_step *steps,
		  double *clip_norm);
/* The optimizer on shard elements [a, b), group by group: p, s0, s1, g
 * point at element a of their arrays (s0, s1 may be NULL). */
void eng_optim_run(struct engine *e, const struct eshard *s, const struct zs_optim_step *steps,
		   float *p, float *s0, float *s1, const float *g, uint64_t a, uint64_t b);

/* step.c */
/* Elements [a, b) of a push (x: its element 0, in dt) into s's reduction;
 * eng_deposit_mapped: x in the device's memory (a device push to a shard
 * on the device). */
void eng_deposit(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt, size_t a,
		 size_t b);
void eng_deposit_mapped(struct engine *e, struct eshard *s, const void *x, enum zs_dtype dt,
			size_t a, size_t b);
/* The reduction's elements [a, b) to the step's mean gradient (acc); the
 * reduction there is empty again. */
void eng_finish_range(struct ejob *j, struct eshard *s, size_t a, size_t b);
/* A replicated job's partial push from rank, landed at dst, into s's
 * reduction, unless its term is in already (caller holds s->mu). */
void eng_partial_in(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
		    const struct zs_xfer *x, const void *dst);
/* Empties the reduction (a restore discards the open step's pushes). */
void eng_reduction_clear(struct engine *e, struct eshard *s);
/* Drops s's open step: its pushes, its reduction, clipping's marks
 * (caller holds s->mu; a restore, a stale copy placed anew). */
void eng_step_discard(struct engine *e, struct ejob *j, struct eshard *s);
/* The optimizer on elements [a, b) of acc (scaled by coef), and the copy. */
void eng_apply_range(struct engine *e, struct ejob *j, struct eshard *s, float coef,
			size_t a, size_t b);
/*
 * Applies the optimizer to acc (scaled by coef when clipping), refreshes
 * the copy, opens the next step and adds the gathers it releases and the
 * snapshots it completes to fx (caller holds s->mu; eng_fx_run after).
 */
void eng_apply(struct engine *e, struct ejob *j, struct eshard *s, float coef,
	       struct eng_fx *fx);
/* fx's released gathers answered and completed snapshots handed over (no
 * locks held): eng_fx_run's part below the step, for the update that
 * clipping's exchange applies (it marks no exchange). */
void eng_fx_release(struct engine *e, struct eshard *s, struct eng_fx *fx);

/* Whether s has parameters (caller holds s->mu). */
static inline bool eng_ready(const struct eshard *s)
{
	return s->phase != PH_EMPTY;
}

/* redo.c */
/* Shard s's buffer for its previous step's parameters (pad elements), and
 * its release. */
void eng_prev_init(struct engine *e, struct eshard *s, size_t pad);
void eng_prev_release(struct engine *e, struct eshard *s);
/* Elements [a, b) of the copy are about to change: kept (caller holds
 * s->mu); eng_apply marks them whole (prev.of) once the update is done. */
void eng_prev_save(struct eshard *s, size_t a, size_t b);
/* Where gather x of the step before s's version reads (*src), or why it
 * cannot (offsets: the connection reads the arena). Caller holds s->mu. */
enum zs_status eng_prev_served(struct eshard *s, const struct zs_xfer *x, bool offsets,
			       const void **src, struct zs_error *err);
/* clip.c */
/* Primary s has reduced its open step (caller holds s->mu): its norm, and
 * fx->clip set for eng_clip_exchange (by eng_fx_run, unlocked). */
void eng_clip_reduced(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);
/* The exchange of every primary here that reduced step t, once none is
 * still reducing it (each reduced shard looks); applied after. */
void eng_clip_exchange(struct engine *e, struct ejob *j, struct eshard *s, uint64_t t);
/* Stops the exchanges' threads (what is queued runs first). */
void eng_clip_stop(struct engine *e);
/* Drops the exchanges j was answered (a restore, the job's end). */
void eng_clip_forget(struct ejob *j);

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

/* landing.c */
/* A landing buffer of at least bytes, or NULL: no room now (the budget,
 * unless over_budget, or the arena); eng_land_put gives it back and wakes
 * waiting pushes. */
void *eng_land_get(struct engine *e, size_t bytes, bool over_budget);
void eng_land_put(struct engine *e, void *p);
void eng_land_free_all(struct engine *e);

/* capture.c */
/* Snapshot arrays for s's state at step (zeroed if zero); false when out
 * of memory (what was allocated stays in sn for engine_snaps_free). */
bool eng_snap_alloc(const struct eshard *s, uint64_t step, bool zero, struct engine_snap *sn);
/* Shard s's state as it is now, into sn (caller holds s->mu). */
enum zs_status eng_snap_read(struct ejob *j, struct eshard *s, struct engine_snap *sn,
			     struct zs_error *err);
/* j's snapshots that have every shard they wait for, moved to *done
 * (caller holds j->cmu). */
void eng_take_whole(struct ejob *j, struct epending **done);
/* After s reached a new version: capture it for snapshots of that step;
 * those it completes go on *done (caller holds s->mu; eng_deliver after). */
void eng_capture_due(struct ejob *j, struct eshard *s, struct epending **done);
/* s will not reach the step of the snapshots waiting for it (a stale copy
 * that waits for a seed): they stop waiting for it, and those that have
 * all they wait for now go on *done (caller holds s->mu). */
void eng_capture_skip(struct ejob *j, struct eshard *s, struct epending **done);
/* Hands completed snapshots to their callbacks (no locks held). */
void eng_deliver(struct epending *done);

/* jobs.c */
/* What a handle of a timeline a restore ended is told (ZS_ERESUME). */
#define ROLLED_BACK "job '%s' was rolled back to a checkpoint (a process of it was lost, or an operator restored it): resume"
/* The job of handle h (referenced: eng_job_unref), the current one or one
 * a restore retired (*stale true); NULL if no job has it. */
struct ejob *eng_job_by_handle(struct engine *e, uint32_t h, bool *stale);
/* The job of handle h, referenced (eng_job_unref), or NULL with err: gone,
 * or of a timeline a restore ended (ZS_ERESUME). */
struct ejob *eng_job_or_fail(struct engine *e, uint32_t h, struct zs_error *err);
/* The job named name, referenced (eng_job_unref), or NULL. */
struct ejob *eng_job_by_name(struct engine *e, const char *name);
/* Drops a reference; the last runs e->job_release. */
void eng_job_unref(struct engine *e, struct ejob *j);
const char *eng_unit_name(struct ejob *j, uint32_t u);

/* held.c */
/* Where gather x of s's version reads in s's compute copy. */
const void *eng_served(struct eshard *s, const struct zs_xfer *x);
/* The held gathers of s's version, out of s->hold.q and added to *rel
 * (caller holds s->mu, serves them unlocked: eng_serve_released). */
void eng_take_released(struct eshard *s, struct held **rel, size_t *n_rel);
void eng_serve_released(struct engine *e, struct eshard *s, struct held *rel, size_t n);

/* upload.c */
/* Whether s holds its optimizer state whole: every array a job with
 * steps_taken needs was uploaded, or came whole (a seed, a restore). */
bool eng_state_whole(const struct eshard *s);
/* An initial upload's destination (caller holds s->mu): the masters, or a
 * landing buffer when they are in the tier or on the device. */
enum zs_status eng_init_begin(struct engine *e, struct ejob *j, struct eshard *s,
			      const struct zs_xfer *x, void **dst, struct zs_error *err);

/* pins.c: versions readers pinned */
struct epin;
/* The target's PIN (net/listener.h). */
enum zs_status eng_t_pin(void *ctx, uint32_t job, uint64_t step, uint32_t verb,
			 struct zs_pin_ans *ans, struct zs_error *err);
/* A read of a pinned version (x->pinned), answered. */
void eng_pin_read(struct engine *e, struct ejob *j, struct zs_sop *op, const struct zs_xfer *x);
/* After s reached a new version: copies of it for the pins of that step
 * (caller holds s->mu). */
void eng_pins_due(struct ejob *j, struct eshard *s);
/* Every pin of j goes (a restore: what was pending would be another
 * timeline's); why is what later reads of them are told. */
void eng_pins_drop(struct ejob *j, const char *why);
/* Drops the pins no reader touched within the spec's idle bound. */
void eng_pins_sweep(struct ejob *j, int64_t now);
/* At the job's end (no other reference). */
void eng_pins_free(struct ejob *j);

#endif
