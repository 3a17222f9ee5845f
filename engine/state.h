/*
 * state.h - the shard engine's state, internal to the engine (its API is
 * engine/engine.h): the engine, its jobs and their shards, the types every
 * engine file reads. What each part does with them is declared by concern:
 * engine/jobs.h (a job here: lookups and references, its world, ranks,
 * hyperparameters, shards' memory, readers' pins), engine/step.h (a
 * shard's step: landing, reduction, update, clipping, held gathers,
 * captures, the step before, effects), engine/repl.h (replicas: forwards
 * queued and taken, acknowledgements, peers, placement epochs),
 * engine/store.h (where a shard's arrays live: the NVMe tier, the
 * device) and engine/face.h (the listener's callbacks).
 *
 * Locking: the engine mutex guards the job list; each shard has its own
 * mutex for its version, push marks and held gathers. Data is served and
 * updated outside the engine mutex; a job is never freed while a callback
 * uses it because callbacks hold a reference (refs) taken under the engine
 * mutex.
 */
#ifndef ZS_ENGINE_STATE_H
#define ZS_ENGINE_STATE_H

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
#include "engine/answered.h"
#include "engine/conns.h"
#include "engine/copies.h"
#include "engine/intake.h"
#include "engine/phase.h"

/* hyperparameter tables a job keeps (those still ahead of or at its
 * slowest shard's step) */
#define EJOB_HP_KEEP 8

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
		struct { uint64_t peer, step, epoch; } unsettled[ZS_MAX_REPLICAS - 1];
		uint32_t n_unsettled;
		/* the copies this primary seeded in this placement epoch: one
		 * that refuses a forward for want of state is seeded again
		 * only while it has none (eng_copy_reseed) */
		uint64_t seeded[ZS_MAX_REPLICAS - 1];
		uint32_t n_seeded;
		uint64_t peer_gen;
		/* restores of this shard: a seed whose state was read before
		 * one is of the run it ended, and is not sent; run: the job's
		 * timeline its state is of (as the job came here, its last
		 * restore's, or the seed's it took), which a seed carries, and
		 * a copy refuses a seed of an earlier one */
		uint64_t restores, run;
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
	/* the coordinator's timeline of the job as this server last heard it
	 * (its record when the job came here, then each restore task once
	 * done): said in its norm reports, so that a report of an ended
	 * timeline still on its way is refused */
	atomic_uint_fast64_t timeline;
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
	/* the norm exchanges answered lately (engine/answered.h; clip.c,
	 * under cmu); gen grows at every restore, which empties it */
	struct eng_answers answered;
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

/* Whether s has parameters (caller holds s->mu). */
static inline bool eng_ready(const struct eshard *s)
{
	return s->phase != PH_EMPTY;
}

#endif
