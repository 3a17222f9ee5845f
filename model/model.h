/*
 * model.h - zshard's own types for what the control plane talks about:
 * model layouts (units of named tensors), job specs, placements, servers.
 *
 * These are the types the daemons, the CLI and libzshard work with; the
 * protobuf encoding lives behind ctrl/codec.h and never leaks out of ctrl/.
 * Arrays inside these structs are malloc'd and owned by the struct: release
 * them with the matching *_release(), which leaves the struct zeroed.
 * Strings are fixed arrays, so a struct can be copied field by field.
 *
 * Validation here is the one place that says what a well-formed layout or
 * job is; both the coordinator (on every RPC) and the clients (before
 * sending) call it, so an invalid job never reaches LMDB.
 */
#ifndef ZS_MODEL_H
#define ZS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "model/liveness.h"

#define ZS_NAME_MAX 256      /* tensor and unit names, with the NUL */
#define ZS_JOB_NAME_MAX 64   /* job names: [A-Za-z0-9._-], 1..63 chars */
#define ZS_ADDR_MAX 256
#define ZS_TOKEN_MAX 40 /* a job's data-plane token: 32 hex digits, NUL */
#define ZS_TOKEN_SEALED_MAX 80 /* its sealed form in the catalog (ctrl/seal.h) */
#define ZS_HOST_NAME 64 /* a host name, as gethostname gives it */
#define ZS_MAX_DIMS 8
#define ZS_MAX_UNITS 65536
#define ZS_MAX_TENSORS 4096          /* per unit */
#define ZS_MAX_ALIASES 4096          /* per layout */
#define ZS_MAX_WORLD 65536
#define ZS_MAX_NUMEL (1ULL << 48)    /* per unit */
#define ZS_DEFAULT_ALIGN 256         /* bytes */
#define ZS_MAX_GROUPS 64             /* optimizer groups per job */

/* torch.optim's updates the servers run (math/optim.h): AdamW (decay
 * decoupled), SGD, Adam (weight decay as L2 added to the gradient),
 * Adagrad. Values are the wire's (proto/zshard.proto OptimKind). */
enum zs_optim_kind { ZS_OPTIM_UNSET = 0, ZS_SGD = 1, ZS_ADAMW = 2, ZS_ADAM = 3, ZS_ADAGRAD = 4 };
/* AdamW and Adam: betas and eps, two state arrays (m, v) */
#define ZS_OPTIM_ADAM_FAMILY(k) ((k) == ZS_ADAMW || (k) == ZS_ADAM)

/* Transports a server offers, as bits of ServerInfo.transports. */
enum zs_transport_bit {
	ZS_TRANSPORT_TCP = 1u << 0,
	ZS_TRANSPORT_SHM = 1u << 1,
	ZS_TRANSPORT_RDMA = 1u << 2,
	ZS_TRANSPORT_NCCL = 1u << 3,
};

struct zs_tensor {
	char name[ZS_NAME_MAX];
	uint32_t ndim;
	uint64_t shape[ZS_MAX_DIMS];
	uint64_t offset; /* derived: elements from the unit's start */
	uint64_t numel;  /* derived: product of shape (1 for ndim 0) */
	uint32_t group;  /* its optimizer group (0 unless the spec says) */
	bool frozen;     /* held and gathered, never updated (requires_grad=False) */
};

struct zs_unit {
	char name[ZS_NAME_MAX];
	enum zs_dtype dtype; /* UNSET until zs_job_spec_normalize() */
	uint32_t n_tensors;
	struct zs_tensor *tensors;
	uint64_t numel; /* derived: sum of the tensors' numel */
};

/* Another name a tensor is known by (a tied parameter's other state_dict
 * names): an export by bare names writes the tensor under each, an import
 * takes it under one. Names only: not part of the layout's identity
 * (zs_layout_equal, zs_layout_digest). */
struct zs_alias {
	uint32_t unit, tensor;
	char name[ZS_NAME_MAX];
};

struct zs_layout {
	uint32_t n_units;
	struct zs_unit *units;
	uint32_t n_aliases; /* at most ZS_MAX_ALIASES */
	struct zs_alias *aliases;
};

/* One optimizer group's hyperparameters (a torch param_groups entry). */
struct zs_hp {
	double lr, weight_decay, beta1, beta2, eps, momentum;
};

/*
 * The job's optimizer. The top-level values are the defaults of every
 * group; groups[g] are what tensors of group g are updated with unless the
 * trainers set others for a step (model/hparams.h). A spec without groups
 * has one, of the top-level values (zs_job_spec_normalize fills it in).
 */
/* steps_taken's bound: t stays exact in a double (Adam's pow) */
#define ZS_MAX_STEPS_TAKEN ((uint64_t)1 << 40)

struct zs_optim {
	enum zs_optim_kind kind;
	double lr, beta1, beta2, eps, weight_decay, momentum;
	double clip_norm; /* 0: off (then no step may turn it on) */
	/* optimizer steps taken before the job's step 0 (a state imported
	 * with its parameters): the update of version v is step
	 * steps_taken + v + 1 (Adam's bias correction; SGD's momentum
	 * buffer is new only at step 1) */
	uint64_t steps_taken;
	uint32_t n_groups;
	struct zs_hp groups[ZS_MAX_GROUPS];
};

struct zs_job_spec {
	char name[ZS_JOB_NAME_MAX];
	uint32_t stage;      /* 1, 2, 3 */
	uint32_t world_size; /* R */
	enum zs_dtype compute_dtype;
	struct zs_optim optim;
	struct zs_layout layout;
	uint32_t align_bytes;
	uint32_t keep_checkpoints; /* committed ones kept; 0 -> 3 */
	uint32_t checkpoint_every; /* steps; 0: no automatic checkpoints */
	/* the trainers reduce among themselves (the NCCL path, in device
	 * mode): each unit is cut into world_size slices, slice r owned by one
	 * shard that rank r alone pushes to, with every rank's sum */
	bool collective;
	/* a collective job's optional trainer hosts, rank by rank (what the
	 * launcher knows): rank r's slices go to a server on rank_hosts[r].
	 * n_rank_hosts is 0 (slice r on server r mod S) or world_size. Owned
	 * (zs_job_spec_release frees it). */
	char (*rank_hosts)[ZS_HOST_NAME];
	uint32_t n_rank_hosts;
	/* copies of every shard, each on another server (another host where
	 * the placement knows hosts): 1 (0 in a spec) to ZS_MAX_REPLICAS.
	 * The first copy (the primary) takes the trainers' pushes and
	 * forwards each step's reduced gradient to the others */
	uint32_t replicas;
	/* a rank lost mid-step whose replacement does not join within
	 * rank_wait_ms (0: ZS_RANK_WAIT_MS): the job waits on (a warning),
	 * shrinks its world without it, or rolls back (coord/resize.c) */
	enum zs_rank_lost { ZS_LOST_WAIT = 0, ZS_LOST_SHRINK, ZS_LOST_ROLLBACK } rank_lost;
	uint32_t rank_wait_ms;
	/* the tcp data plane encrypted (net/dtls.h): the job's servers take
	 * no tcp connection of it that is not (shm's bytes do not leave the
	 * host; rdma's are the fabric's to keep) */
	bool data_tls;
	/* weight readers (client/reader.c): how many live versions (steps)
	 * readers may pin at once on each server (0: none; they read
	 * committed checkpoints alone), each a copy of the job's parameters
	 * in the compute dtype there; and how long a pin no reader touches
	 * is kept (0: ZS_READER_IDLE_MS) */
	uint32_t reader_pins;
	uint32_t reader_idle_ms;
	/* how many persistent buffers the model has (a BatchNorm's running
	 * statistics): they live in the trainers, and an export takes them
	 * from a checkpoint's blob (zshard.torch says; 0: none, or not said) */
	uint32_t buffers;
};

#define ZS_MAX_REPLICAS 3
#define ZS_MAX_READER_PINS 16
#define ZS_READER_IDLE_MS 60000
#define ZS_RANK_WAIT_MS 30000
/* "wait", "shrink", "rollback" */
const char *zs_rank_lost_name(enum zs_rank_lost k);

/* A collective job's slice length for a unit of numel elements: slice r is
 * [r * q, min(numel, (r + 1) * q)). */
static inline uint64_t zs_slice_len(uint64_t numel, uint32_t world)
{
	return (numel + world - 1) / world;
}

struct zs_shard {
	uint32_t unit;
	uint32_t index;
	uint64_t server_id;
	uint64_t offset; /* elements */
	uint64_t length; /* elements owned */
	uint64_t padded; /* elements allocated */
	uint32_t copy;   /* 0: the primary; 1..: a replica (spec.replicas) */
	uint32_t copies; /* how many copies the shard has (0 without replicas) */
	uint32_t fresh;  /* a rebuilt copy not seeded yet: never promoted */
	uint32_t reserved;
	/* a rebuilt copy: the placement epoch that placed it (0: an original
	 * one). A seed sent in an earlier epoch went to a copy lost since
	 * (its server restarted, and the copy was placed on it anew) */
	uint64_t placed;
};

/* A rebuilt copy that its primary seeded (a server's heartbeat says). */
struct zs_seeded {
	char job[ZS_JOB_NAME_MAX];
	uint32_t unit, index;
	uint64_t server_id;
	uint64_t epoch; /* the placement epoch the seed was sent in */
};

/* A trainer rank whose data connections to a server all ended. */
struct zs_dropped {
	char job[ZS_JOB_NAME_MAX];
	uint64_t incarnation;
	uint32_t rank;
	bool back; /* connected again after its drop was told */
	/* the trainer's reconnect count as its connection's HELLO said it
	 * (the newest connection's), and its process's session */
	uint64_t reconnects;
	uint64_t session;
};

/* A shard's gradient sum of squares (global-norm clipping). */
struct zs_shard_norm {
	uint32_t unit, index;
	double sumsq;
};

struct zs_placement {
	uint64_t epoch;
	uint32_t n_shards;
	struct zs_shard *shards; /* sorted by (unit, index) */
};

struct zs_member {
	uint32_t rank;
	char host[ZS_ADDR_MAX];
	int64_t joined_ms;
	uint64_t session;   /* the trainer process's (random, at its join) */
	/* is it alive (model/liveness.h; the coordinator's monotonic clock;
	 * not persisted) */
	struct zs_live live;
};

/*
 * The job's world size by step (zshardctl job resize): each change names
 * the first step of its world; steps before the first change have the
 * spec's world_size. A job keeps its last ZS_WORLD_HIST changes (enough
 * for every step a rank or a shard can still be in: they are a step or two
 * apart, and a resize names a step three past the latest report).
 */
#define ZS_WORLD_HIST 4
struct zs_worlds {
	uint32_t n;
	struct zs_world_change {
		uint64_t step; /* the first step of this world */
		uint32_t world;
	} v[ZS_WORLD_HIST];
};
/* The world size of step under w (s's world_size before w's first). */
uint32_t zs_world_at(const struct zs_job_spec *s, const struct zs_worlds *w, uint64_t step);
/* The largest world of w's changes and the spec's: ranks below it may join. */
uint32_t zs_world_max(const struct zs_job_spec *s, const struct zs_worlds *w);
/* Whether a and b name the same changes. */
bool zs_worlds_same(const struct zs_worlds *a, const struct zs_worlds *b);
/* The latest world w names (the spec's without changes). */
uint32_t zs_world_last(const struct zs_job_spec *s, const struct zs_worlds *w);
/* Adds a change of world at step to w (the oldest goes when full);
 * changes at or past step are replaced (a restore's). */
void zs_worlds_add(struct zs_worlds *w, uint64_t step, uint32_t world);
/* w as a WORLD frame's payload (net/wire.h: u32 n, then n of u64 step,
 * u32 world, little-endian) into out (4 + 12 * ZS_WORLD_HIST bytes);
 * returns its size. */
#define ZS_WORLDS_BYTES(n) (4u + 12u * (n))
size_t zs_worlds_encode(const struct zs_worlds *w, uint8_t *out);
/* Parses such a payload: ZS_EPROTO for a wrong size, ZS_EINVAL for a
 * world out of 1..ZS_MAX_WORLD or steps not increasing. */
enum zs_status zs_worlds_decode(const uint8_t *in, size_t len, struct zs_worlds *w,
				struct zs_error *err);

struct zs_job {
	struct zs_job_spec spec;
	struct zs_placement placement;
	uint32_t n_trainers;
	struct zs_member *trainers; /* sorted by rank */
	int64_t created_ms;
	uint64_t incarnation;                /* this creation of the job: random,
					      * never 0, new each time a job is
					      * created under its name; what its
					      * checkpoints, live state, shards and
					      * connections carry */
	uint64_t restored_id, restored_step; /* the last restore (id 0: none) */
	uint64_t restore_pending;            /* checkpoint id being restored
					      * (ZS_CKPT_RESET: a reset) */
	char restore_error[256];             /* why the last restore failed */
	uint64_t timeline;                   /* grows at every restore or rollback */
	uint64_t stopped_step;               /* every rank left cleanly before it */
	uint64_t leaving_step;               /* what the ranks that left agreed on */
	uint64_t stop_before;                /* stopping: ranks leave before it */
	char rollback_reason[256];           /* why the last rollback, "" if none */
	char token[ZS_TOKEN_MAX];            /* data-plane credential ("" in listings) */
	bool token_reader;                   /* token is the job's reader token
					      * (handed to a reader's certificate) */
	/* in the catalog's record alone: the token sealed (then token is "") */
	uint8_t token_sealed[ZS_TOKEN_SEALED_MAX];
	uint32_t token_sealed_len;
	/* in a server's memory alone (never encoded): the reader token its
	 * HELLOs may prove instead, for gathers only (ctrl/token.h) */
	char reader_token[ZS_TOKEN_MAX];
	struct zs_worlds worlds;             /* the world size's changes */
};

/* One trainer's account of one step (libzshard's step driver; see
 * StepReport in proto/zshard.proto for each field). */
struct zs_step_report {
	uint32_t rank, stage, prefetch;
	uint32_t world; /* the step's world size */
	uint64_t step;
	double seconds, compute_seconds, gather_wait_seconds, push_wait_seconds,
		control_seconds;
	uint64_t bytes_gathered, bytes_pushed;
	uint64_t peak_param_bytes, peak_grad_bytes, rss_peak_bytes;
	int64_t reported_ms;
};

/* What a step boundary's report is answered (ReportStepReply): what the
 * rank follows from its next boundary on. */
struct zs_step_answer {
	uint32_t stage;
	uint64_t checkpoint_every;
	uint64_t stop_before; /* 0: not stopping */
	struct zs_worlds worlds;
};

/* A server's time on a job's latest step that all its shards applied. */
struct zs_job_step_stats {
	char job[ZS_JOB_NAME_MAX];
	uint64_t step;
	uint32_t shards;
	double reduce_seconds, optim_seconds;
};

enum zs_ckpt_state { ZS_CKPT_PENDING = 1, ZS_CKPT_COMMITTED = 2, ZS_CKPT_FAILED = 3 };

/* A restore task's checkpoint id that means a reset: a job rolled back with
 * no committed checkpoint starts again from step 0. */
#define ZS_CKPT_RESET UINT64_MAX

struct zs_blob {
	uint32_t rank;
	uint32_t len;
	uint8_t *data; /* malloc'd */
};

#define ZS_BLOB_MAX (1u << 20)

/* A rank's state as of the start of a step (zs_set_step_state: its RNG,
 * its data position), which the coordinator keeps so that a replacement
 * of the rank redoes that step (data malloc'd; len 0: none given). */
struct zs_step_state {
	uint64_t step;
	uint32_t len;
	uint8_t *data;
	uint64_t timeline; /* a step begun: the job's timeline it was begun on */
};

struct zs_checkpoint {
	uint64_t id;
	char job[ZS_JOB_NAME_MAX];
	uint64_t incarnation;   /* the job's when taken (0: an earlier one
				 * of unknown identity, from before) */
	uint64_t layout_digest; /* the job's layout's (zs_layout_digest) */
	uint64_t step, epoch, bytes;
	uint32_t world;         /* the world size of its step */
	enum zs_ckpt_state state;
	int64_t created_ms;
	uint32_t n_durable;
	uint64_t *durable; /* malloc'd server ids */
	char error[256];
	uint32_t n_blobs;
	struct zs_blob *blobs; /* malloc'd, sorted by rank */
	struct zs_placement placement; /* where its records are */
};
void zs_checkpoint_release(struct zs_checkpoint *c);
const char *zs_ckpt_state_name(enum zs_ckpt_state s);

enum zs_task_kind { ZS_TASK_SNAPSHOT = 1, ZS_TASK_RESTORE = 2, ZS_TASK_DELETE = 3 };

struct zs_task {
	enum zs_task_kind kind;
	char job[ZS_JOB_NAME_MAX];
	uint64_t id, step;
	uint64_t timeline; /* a restore's: the job's timeline from it on (0: not said) */
};

/* A server's claim, at its first registration, that it brought back a
 * job's live state from a clean stop (see server/live.c). */
struct zs_live_claim {
	char job[ZS_JOB_NAME_MAX];
	uint64_t incarnation;
	uint64_t epoch, step;
};
#define ZS_LIVE_MAX 16

/* A weight reader's version that is a committed checkpoint: its id with
 * this bit (a step never has it), so that readers of a checkpoint and of
 * a live step of the same number are never one version. */
#define ZS_VERSION_CKPT (1ULL << 63)

/* A weight reader as the coordinator keeps it (coord/readers.c). */
struct zs_reader_info {
	uint64_t id;
	bool pinned;
	uint64_t step;   /* the version pinned: a step, or ZS_VERSION_CKPT | id */
	uint64_t parent; /* the reader it reads from; 0: the servers */
	char relay_addr[ZS_ADDR_MAX];
	char host[ZS_ADDR_MAX];
	uint64_t from_servers, from_relay, served; /* bytes */
	int64_t age_ms;  /* listings: since its last call */
	/* the job's timeline when it pinned a step (0: the coordinator gives
	 * it): a step of one number before and after a rollback is two
	 * versions, never one tree */
	uint64_t timeline;
};

struct zs_server_info {
	uint64_t id;
	char addr[ZS_ADDR_MAX];
	char data_addr[ZS_ADDR_MAX]; /* tcp data plane */
	char shm_addr[ZS_ADDR_MAX];  /* shm socket name, same host only */
	char host[ZS_ADDR_MAX];
	char metrics_addr[ZS_ADDR_MAX]; /* its Prometheus endpoint; "" none */
	uint64_t capacity;
	uint64_t used;
	uint32_t transports;
	bool up;
	int64_t last_seen_ms; /* ms since the last heartbeat */
	char health[192];     /* "" when well; else what fails (its disk) */
	bool fresh;           /* registering: just started */
	uint32_t n_live;      /* registering fresh: the jobs whose live state it */
	struct zs_live_claim live[ZS_LIVE_MAX]; /* brought back from its disk */
};

struct zs_assignment {
	char job[ZS_JOB_NAME_MAX];
	uint64_t epoch;
	uint64_t incarnation; /* the job's: a job re-created under its name differs */
	char token[ZS_TOKEN_MAX]; /* the job's data-plane token */
	uint64_t bytes;
	uint32_t n_shards;
	struct zs_shard *shards;
};

const char *zs_optim_name(enum zs_optim_kind k);
enum zs_status zs_optim_parse(const char *s, enum zs_optim_kind *out,
			      struct zs_error *err);
/* Writes "tcp,shm" style names of a transport mask into buf. */
const char *zs_transports_fmt(uint32_t mask, char *buf, unsigned len);

/* A job name is 1..63 characters of [A-Za-z0-9._-] not starting with '.'. */
bool zs_job_name_valid(const char *name);

/*
 * Checks a layout and fills its derived fields (tensor offset and numel,
 * unit numel). Fails with ZS_EINVAL and a message naming the first bad unit
 * or tensor: no units, too many, an empty or over-long or duplicate name,
 * ndim > ZS_MAX_DIMS, a zero dimension, numel overflow, an unknown dtype.
 */
enum zs_status zs_layout_validate(struct zs_layout *l, struct zs_error *err);

/*
 * Fills the derived fields (offsets, numel) of a decoded layout without
 * judging it; sums saturate instead of overflowing. Validation does the same
 * and more: use this only on layouts that came from a trusted peer.
 */
void zs_layout_derive(struct zs_layout *l);

/*
 * Validates a job spec (name, stage 1..3, world size 1..ZS_MAX_WORLD,
 * dtype, optimizer and its hyper-parameters, alignment, the layout) and
 * fills defaults: align_bytes 256, each unit's dtype from compute_dtype,
 * AdamW betas (0.9, 0.999) and eps 1e-8 when left zero.
 */
enum zs_status zs_job_spec_normalize(struct zs_job_spec *s,
				     struct zs_error *err);

/*
 * A 64-bit digest (FNV-1a) of what zs_layout_equal compares: the units'
 * names and dtypes, their tensors' names, shapes and optimizer groups, in
 * order. Never 0. A join sends it instead of the layout itself (O(1)
 * bytes at any model size); it tells layouts apart, it is no protection
 * against a forger.
 */
uint64_t zs_layout_digest(const struct zs_layout *l);

/*
 * True when a and b describe the same units and tensors (names, shapes,
 * dtypes, in order). On false, writes the first difference into why.
 */
bool zs_layout_equal(const struct zs_layout *a, const struct zs_layout *b,
		     char *why, unsigned why_len);

/* Deep copies; dst is overwritten (not released first). */
enum zs_status zs_layout_copy(struct zs_layout *dst, const struct zs_layout *src);
enum zs_status zs_placement_copy(struct zs_placement *dst,
				 const struct zs_placement *src);
/* The shards of p, each counted once whatever its copies. */
uint32_t zs_placement_groups(const struct zs_placement *p);
/* A copy of src with its primaries only (the shards trainers push to and
 * checkpoints are taken from): ZS_OK or ZS_ENOMEM (dst empty). */
enum zs_status zs_placement_primaries(struct zs_placement *dst,
				      const struct zs_placement *src);

/* Total elements of all units. */
uint64_t zs_layout_numel(const struct zs_layout *l);

/*
 * Bytes a shard server holds per allocated element of unit u of a job:
 * fp32 master (4) + optimizer state (AdamW m,v: 8; SGD momentum: 4) + the
 * reduction's state (ZS_REDUCE_BYTES, math/bsum.h, whatever the world
 * size) + the step's fp32 mean gradient (4) + a compute-dtype copy served
 * to gathers when the unit is not fp32. Placement charges capacity with
 * exactly this; pushes land in buffers beside it (the server's landing
 * budget, not per element).
 */
#define ZS_REDUCE_BYTES 16
/* fp32 arrays of optimizer state per element: AdamW 2, SGD 1 where any
 * group has momentum, else 0. */
unsigned zs_optim_state_arrays(const struct zs_optim *o);
/* torch's name of an optimizer's state array a (0: the parameter, ""; 1,
 * 2: ".exp_avg", ".exp_avg_sq" for AdamW and Adam, ".momentum_buffer" for
 * SGD, ".sum" for Adagrad), as a suffix of the parameter's name. */
const char *zs_optim_state_suffix(enum zs_optim_kind k, unsigned a);
uint64_t zs_server_bytes_per_elem(const struct zs_job_spec *s,
				  const struct zs_unit *u);
/*
 * The same for a shard on the server's GPU (zshard-server --gpu), split:
 * *device gets fp32 master 4 + optimizer state + the reduction's state
 * ZS_REDUCE_BYTES + the mean gradient 4 + one push in flight 4 + the
 * compute-dtype copy when not fp32; *host gets the copy gathers read
 * (size) + 4 for the mean gradient's copy clipping sums on the host.
 */
void zs_server_bytes_per_elem_gpu(const struct zs_job_spec *s, const struct zs_unit *u,
				  uint64_t *host, uint64_t *device);

/*
 * Frozen shards. Placement cuts a unit with frozen tensors where frozen and
 * trained tensors meet (model/placement.h), so a shard of a job that is not
 * collective is frozen whole or not at all. A frozen shard takes no
 * gradient: each rank's push of it is a step mark of ZS_MARK_LEN elements
 * (the server ignores its value), which keeps the shard in step with the
 * job (its version, snapshots, replicas) at no cost in bytes; it has no
 * reduction beyond that element and no optimizer state. A collective job's
 * slices are whole reduce-scatter outputs: never marks.
 */
#define ZS_MARK_LEN 1
/* Whether shard sh of s is a frozen shard: pushed as marks. */
bool zs_shard_marks(const struct zs_job_spec *s, const struct zs_shard *sh);
/* What a push of sh carries: ZS_MARK_LEN elements for a frozen shard, its
 * length otherwise. */
uint64_t zs_shard_push_len(const struct zs_job_spec *s, const struct zs_shard *sh);
/* The host bytes a server holds for sh: padded * zs_server_bytes_per_elem,
 * or for a frozen shard padded * (master 4 + the copy when not fp32) and
 * the mark's reduction (ZS_REDUCE_BYTES + 4). Placement charges this. */
uint64_t zs_shard_state_bytes(const struct zs_job_spec *s, const struct zs_shard *sh);

void zs_layout_release(struct zs_layout *l);
void zs_job_spec_release(struct zs_job_spec *s);
void zs_placement_release(struct zs_placement *p);
void zs_job_release(struct zs_job *j);
void zs_assignment_release(struct zs_assignment *a);

#endif
