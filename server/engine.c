/*
 * engine.c - the shard step engine (see engine.h).
 *
 * Locking: the engine mutex guards the job list; each shard has its own
 * mutex for its version, push marks and held gathers. Data is served and
 * updated outside the engine mutex; a job is never freed while a callback
 * uses it because callbacks hold a reference (refs) taken under the engine
 * mutex.
 */
#include "server/engine.h"

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
#include "math/optim.h"
#include "base/util.h"

enum slot_state { SLOT_EMPTY, SLOT_LANDING, SLOT_FULL };

struct held {
	struct zs_sop *op;
	struct zs_xfer x;
	int64_t since_ms;
	uint32_t rank;
};

struct eshard {
	pthread_mutex_t mu;
	struct zs_shard sh;
	enum zs_dtype dt;
	unsigned dsz;
	float *master;   /* arena: init writes land here */
	void *copy;      /* arena: what gathers read (== master for f32) */
	float *s0, *s1;  /* optimizer state */
	float *acc;      /* reduction buffer */
	uint8_t *staging; /* arena: R slots of padded * dsz bytes */
	uint8_t *slot;   /* enum slot_state per rank */
	uint32_t full;   /* ranks whose slot is full */
	float **racc;    /* per rank: fp32 sum of its partial pushes (lazy) */
	uint32_t n_ranks;
	uint32_t *nacc;  /* per rank: partial pushes folded this step */
	uint64_t version;
	bool ready;   /* has parameters: initialized (or, later, restored) */
	bool reduced; /* clipping: acc holds step version's mean gradient */
	double sumsq;
	uint64_t piped; /* elements of the open step already reduced and
			 * applied while the last push was landing */
	uint64_t red_ns, opt_ns; /* the open step's reduce and optimizer time */
	/* the NVMe tier: master, s0, s1 in a file (then those pointers are
	 * NULL); arrays at 4 KiB-aligned offsets */
	int fd;
	uint64_t arr_bytes; /* per array, rounded up to 4 KiB */
	unsigned n_arrays;  /* 1 + optimizer arrays */
	float *landing;     /* arena: where an initial upload lands */
	char path[600];
	struct held *held;
	size_t n_held, cap_held;
};

/* A snapshot in progress: shards are captured as they reach step. */
struct epending {
	char job[ZS_JOB_NAME_MAX];
	uint32_t n_shards;
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
	pthread_mutex_t cmu; /* clipping counter, snapshots in progress */
	uint32_t n_reduced;
	struct epending *pend;
	/* the step report: time of the steps being applied (by step parity)
	 * and of the latest one every shard here has applied */
	struct { uint64_t step, red_ns, opt_ns; uint32_t n; } acct[2];
	struct zs_job_step_stats last;
	bool have_last;
	char name[ZS_JOB_NAME_MAX];
	uint32_t handle;
	uint64_t epoch;
	int64_t created_ms; /* with the name and epoch: which job this is */
	struct zs_job_spec spec;
	uint32_t n_shards;
	struct eshard *shards;
	atomic_int refs;
	bool removed;
	struct ejob *next;
};

struct engine {
	pthread_mutex_t mu;
	struct zs_target target;
	struct zs_listener *l;
	unsigned nthreads;
	uint32_t next_handle;
	struct ejob *jobs;
	atomic_uint_fast64_t steps, bytes_in, bytes_out, piped;
	uint64_t bytes;
	uint32_t step_timeout_ms;
	char tier_dir[512];
	uint64_t tier_budget, resident; /* bytes of master + state */
	atomic_uint_fast64_t tier_read, tier_written;
	engine_norm_fn norm_fn;
	void *norm_ctx;
	pthread_t sweeper;
	atomic_int stop;
};

/* ------------------------------------------------------------- lookups */

static float *tier_buf(void);
static enum zs_status tier_io(struct engine *e, struct eshard *s, bool wr, unsigned k,
			      uint64_t a, uint64_t b, float *data, float *bb);

static void job_unref(struct engine *e, struct ejob *j);

static struct ejob *job_by_handle(struct engine *e, uint32_t h)
{
	struct ejob *j;
	pthread_mutex_lock(&e->mu);
	for (j = e->jobs; j && j->handle != h; j = j->next)
		;
	if (j)
		atomic_fetch_add(&j->refs, 1);
	pthread_mutex_unlock(&e->mu);
	return j;
}

/* The shard of j holding [x->offset, x->offset + x->length) of x->unit. */
static struct eshard *shard_for(struct ejob *j, const struct zs_xfer *x)
{
	for (uint32_t i = 0; i < j->n_shards; i++) {
		struct eshard *s = &j->shards[i];
		if (s->sh.unit == x->unit && x->offset >= s->sh.offset &&
		    x->offset - s->sh.offset < s->sh.length &&
		    x->length <= s->sh.length - (x->offset - s->sh.offset))
			return s;
	}
	return NULL;
}

static const char *unit_name(struct ejob *j, uint32_t u)
{
	return u < j->spec.layout.n_units ? j->spec.layout.units[u].name : "?";
}

/* -------------------------------------------------------------- target */

static enum zs_status t_hello(void *ctx, const char *job, const char *token,
			      uint64_t incarnation, uint32_t rank, uint32_t *handle,
			      struct zs_error *err)
{
	struct engine *e = ctx;
	struct ejob *j;
	enum zs_status st = ZS_OK;

	(void)token; /* job tokens arrive with the security work (DESIGN 9) */
	pthread_mutex_lock(&e->mu);
	for (j = e->jobs; j && strcmp(j->name, job); j = j->next)
		;
	if (!j)
		st = zs_fail(err, ZS_ENOTFOUND, "this server holds no shard of job '%s'", job);
	else if (incarnation && (uint64_t)j->created_ms != incarnation)
		/* the job was deleted and created again; the new one arrives
		 * with this server's next assignments */
		st = zs_fail(err, ZS_ENOTFOUND,
			     "this server holds no shard of job '%s' as created at %llu ms yet (it holds an earlier job of that name)",
			     job, (unsigned long long)incarnation);
	else if (rank >= j->spec.world_size && rank != ZS_RANK_OBSERVER)
		st = zs_fail(err, ZS_EINVAL, "rank %u is out of range: job '%s' has world size %u",
			     rank, job, j->spec.world_size);
	else
		*handle = j->handle;
	pthread_mutex_unlock(&e->mu);
	return st;
}

static const void *served(struct eshard *s, const struct zs_xfer *x)
{
	return (const uint8_t *)s->copy + (x->offset - s->sh.offset) * s->dsz;
}

static void t_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		   const struct zs_xfer *x)
{
	struct engine *e = ctx;
	struct ejob *j = job_by_handle(e, job);
	struct eshard *s;

	if (!j) {
		zs_sop_fail(op, ZS_ENOTFOUND, "job handle %u is gone", job);
		return;
	}
	s = shard_for(j, x);
	if (!s) {
		zs_sop_fail(op, ZS_EINVAL,
			    "unit %u [%llu, +%llu) of job '%s' is not within a shard this server owns",
			    x->unit, (unsigned long long)x->offset,
			    (unsigned long long)x->length, j->name);
	} else if (x->state_read) {
		/* an exporter: fp32 state as it is now, its version with it */
		const float *a = x->state == 0 ? s->master : x->state == 1 ? s->s0 : s->s1;
		float *tmp = NULL;
		pthread_mutex_lock(&s->mu);
		if (s->fd >= 0 && (unsigned)x->state < s->n_arrays && s->ready) {
			float *bb = tier_buf();
			tmp = malloc(x->length * 4);
			if (!bb || !tmp ||
			    tier_io(e, s, false, (unsigned)x->state, x->offset - s->sh.offset,
				    x->offset - s->sh.offset + x->length, tmp, bb)) {
				free(tmp);
				tmp = NULL;
			}
			free(bb);
			/* served from tmp: offset it back for the common path */
			a = tmp ? tmp - (x->offset - s->sh.offset) : NULL;
		}
		if (!a || !s->ready) {
			pthread_mutex_unlock(&s->mu);
			zs_sop_fail(op, ZS_EINVAL, "unit '%s' has no %s", unit_name(j, x->unit),
				    !s->ready ? "parameters yet" : "such optimizer state");
		} else {
			zs_sop_set_step(op, s->version);
			atomic_fetch_add(&e->bytes_out, x->length * 4);
			/* sent under the lock: no update can change it meanwhile */
			zs_sop_read_ready(op, a + (x->offset - s->sh.offset));
			pthread_mutex_unlock(&s->mu);
		}
		free(tmp);
	} else if (x->dtype != s->dt) {
		zs_sop_fail(op, ZS_EINVAL, "unit '%s' is %s, the gather asked for %s",
			    unit_name(j, x->unit), zs_dtype_name(s->dt), zs_dtype_name(x->dtype));
	} else {
		pthread_mutex_lock(&s->mu);
		if (s->version == x->step && s->ready) {
			pthread_mutex_unlock(&s->mu);
			atomic_fetch_add(&e->bytes_out, x->length * s->dsz);
			zs_sop_read_ready(op, served(s, x));
		} else if (s->version > x->step) {
			uint64_t v = s->version;
			pthread_mutex_unlock(&s->mu);
			zs_sop_fail(op, ZS_ESTATE,
				    "unit '%s' is at step %llu: step %llu is gone",
				    unit_name(j, x->unit), (unsigned long long)v,
				    (unsigned long long)x->step);
		} else {
			/* asked early (or before the parameters exist): hold it until
			 * the update that makes step t, or the initial upload */
			if (s->n_held == s->cap_held) {
				size_t nc = s->cap_held ? s->cap_held * 2 : 8;
				struct held *g = realloc(s->held, nc * sizeof *g);
				if (!g) {
					pthread_mutex_unlock(&s->mu);
					zs_sop_fail(op, ZS_ENOMEM, "out of memory");
					job_unref(e, j);
					return;
				}
				s->held = g;
				s->cap_held = nc;
			}
			s->held[s->n_held++] = (struct held){op, *x, zs_now_ms(), rank};
			pthread_mutex_unlock(&s->mu);
		}
	}
	job_unref(e, j);
}

static enum zs_status t_write_begin(void *ctx, uint32_t job, uint32_t rank,
				    const struct zs_xfer *x, void **dst,
				    struct zs_error *err)
{
	struct engine *e = ctx;
	struct ejob *j = job_by_handle(e, job);
	struct eshard *s;
	enum zs_status st = ZS_OK;

	if (!j)
		return zs_fail(err, ZS_ENOTFOUND, "job handle %u is gone", job);
	if (rank >= j->spec.world_size && !x->init) {
		job_unref(e, j);
		return zs_fail(err, ZS_EINVAL, "an observer reads and uploads; it cannot push");
	}
	s = shard_for(j, x);
	if (!s || x->offset != s->sh.offset || x->length != s->sh.length) {
		st = zs_fail(err, ZS_EINVAL,
			     "a push must cover exactly one shard: unit %u [%llu, +%llu) is not a shard of job '%s' here",
			     x->unit, (unsigned long long)x->offset,
			     (unsigned long long)x->length, j->name);
		goto out;
	}
	if (x->partial && x->init) {
		st = zs_fail(err, ZS_EINVAL, "an initial upload cannot be partial");
		goto out;
	}
	pthread_mutex_lock(&s->mu);
	if (x->init) {
		if (x->dtype != ZS_F32)
			st = zs_fail(err, ZS_EINVAL, "initial parameters are sent as f32");
		else if (s->version != 0 || s->full || x->step != 0)
			st = zs_fail(err, ZS_ESTATE,
				     "unit '%s' has trained (step %llu): initial parameters come before step 0",
				     unit_name(j, x->unit), (unsigned long long)s->version);
		else if (s->fd < 0)
			*dst = s->master;
		else if (!s->landing &&
			 !(s->landing = zs_listener_alloc(e->l, s->sh.padded * 4)))
			st = zs_fail(err, ZS_ENOSPC, "no arena room to receive unit '%s'",
				     unit_name(j, x->unit));
		else
			*dst = s->landing; /* to the tier file when it has landed */
	} else if (x->dtype != s->dt) {
		st = zs_fail(err, ZS_EINVAL, "unit '%s' takes %s gradients, not %s",
			     unit_name(j, x->unit), zs_dtype_name(s->dt), zs_dtype_name(x->dtype));
	} else if (!s->ready) {
		st = zs_fail(err, ZS_ESTATE,
			     "unit '%s' has no parameters yet: rank 0 uploads them before step 0",
			     unit_name(j, x->unit));
	} else if (x->step != s->version) {
		st = zs_fail(err, ZS_ESTATE, "push for step %llu of unit '%s', whose open step is %llu",
			     (unsigned long long)x->step, unit_name(j, x->unit),
			     (unsigned long long)s->version);
	} else if (s->slot[rank] != SLOT_EMPTY) {
		st = zs_fail(err, ZS_EEXIST, "rank %u already pushed step %llu of unit '%s'", rank,
			     (unsigned long long)x->step, unit_name(j, x->unit));
	} else {
		s->slot[rank] = SLOT_LANDING;
		*dst = s->staging + (size_t)rank * s->sh.padded * s->dsz;
	}
	pthread_mutex_unlock(&s->mu);
out:
	job_unref(e, j);
	return st;
}

static void reduce_range(struct ejob *j, struct eshard *s, size_t a, size_t b);
static void apply_range(struct engine *e, struct ejob *j, struct eshard *s, float coef,
			size_t a, size_t b);

/*
 * The last rank's push is landing: reduce and apply what has landed, so the
 * update overlaps the reception. Only when nothing else can still change
 * those elements: every other rank in, no accumulation, no clipping.
 */
static void t_write_progress(void *ctx, uint32_t job, uint32_t rank,
			     const struct zs_xfer *x, void *dst, uint64_t bytes)
{
	struct engine *e = ctx;
	struct ejob *j;
	struct eshard *s;
	uint64_t upto;

	(void)dst;
	if (x->init || x->partial)
		return;
	j = job_by_handle(e, job);
	if (!j)
		return;
	s = shard_for(j, x);
	if (s && j->spec.optim.clip_norm <= 0.0) {
		pthread_mutex_lock(&s->mu);
		upto = bytes / s->dsz;
		upto -= upto % 1024; /* whole 4 KiB pieces of fp32 at least */
		if (s->slot[rank] == SLOT_LANDING && s->full + 1 == j->spec.world_size &&
		    upto > s->piped && upto <= s->sh.length) {
			bool accumulating = false;
			for (uint32_t r = 0; r < j->spec.world_size; r++)
				accumulating |= s->nacc[r] != 0;
			if (!accumulating) {
				reduce_range(j, s, s->piped, upto);
				apply_range(e, j, s, 1.0f, s->piped, upto);
				atomic_fetch_add(&e->piped, upto - s->piped);
				s->piped = upto;
			}
		}
		pthread_mutex_unlock(&s->mu);
	}
	job_unref(e, j);
}

static void t_write_abort(void *ctx, uint32_t job, uint32_t rank,
			  const struct zs_xfer *x, void *dst)
{
	struct engine *e = ctx;
	struct ejob *j = job_by_handle(e, job);
	struct eshard *s;

	(void)dst;
	if (!j)
		return;
	s = shard_for(j, x);
	if (s && !x->init) {
		pthread_mutex_lock(&s->mu);
		if (s->slot[rank] == SLOT_LANDING)
			s->slot[rank] = SLOT_EMPTY;
		pthread_mutex_unlock(&s->mu);
	}
	job_unref(e, j);
}

/* Rank r's contribution: its accumulated partial pushes, else its slot. */
static const void *contribution(struct eshard *s, uint32_t r, enum zs_dtype *dt)
{
	if (s->nacc[r]) {
		*dt = ZS_F32;
		return s->racc[r];
	}
	*dt = s->dt;
	return s->staging + (size_t)r * s->sh.padded * s->dsz;
}

/* Folds rank r's landed slot into its fp32 accumulator (caller holds mu). */
static bool fold(struct eshard *s, uint32_t r)
{
	const void *x = s->staging + (size_t)r * s->sh.padded * s->dsz;

	if (!s->racc[r]) {
		s->racc[r] = malloc(s->sh.padded * sizeof(float));
		if (!s->racc[r])
			return false;
	}
	if (s->nacc[r] == 0)
		zs_reduce_first(s->racc[r], x, s->dt, s->sh.length);
	else
		zs_reduce_add(s->racc[r], x, s->dt, s->sh.length);
	s->nacc[r]++;
	return true;
}

/* ------------------------------------------------------------ NVMe tier */

#define TIER_CHUNK (1u << 18) /* floats: 1 MiB, a multiple of 4 KiB */

static float *tier_buf(void)
{
	void *p = NULL;
	return posix_memalign(&p, 4096, TIER_CHUNK * 4) ? NULL : p;
}

/* Reads or writes elements [a, b) of array k of a tiered shard through the
 * aligned bounce buffer bb (O_DIRECT wants aligned offsets and sizes). */
static enum zs_status tier_io(struct engine *e, struct eshard *s, bool wr, unsigned k,
			      uint64_t a, uint64_t b, float *data, float *bb)
{
	for (uint64_t c = a - a % TIER_CHUNK; c < b; c += TIER_CHUNK) {
		uint64_t lo = c > a ? c : a, hi = c + TIER_CHUNK < b ? c + TIER_CHUNK : b;
		uint64_t span = ((hi - c) * 4 + 4095) & ~(uint64_t)4095;
		off_t off = (off_t)(k * s->arr_bytes + c * 4);
		bool whole;
		if (c * 4 + span > s->arr_bytes)
			span = s->arr_bytes - c * 4;
		/* a write covering the whole span needs no read first */
		whole = wr && lo == c && (hi - lo) * 4 == span;
		if (!whole) {
			if (pread(s->fd, bb, span, off) != (ssize_t)span)
				return ZS_EIO;
			atomic_fetch_add(&e->tier_read, span);
		}
		if (wr) {
			memcpy(bb + (lo - c), data + (lo - a), (hi - lo) * 4);
			if (pwrite(s->fd, bb, span, off) != (ssize_t)span)
				return ZS_EIO;
			atomic_fetch_add(&e->tier_written, span);
		} else {
			memcpy(data + (lo - a), bb + (lo - c), (hi - lo) * 4);
		}
	}
	return ZS_OK;
}

/* Whole arrays of a shard, resident or tiered, into or out of the buffers
 * given (NULL skips an array). */
static enum zs_status arrays_io(struct engine *e, struct eshard *s, bool wr, float *m,
				float *s0, float *s1)
{
	float *dst[3] = {m, s0, s1}, *res[3] = {s->master, s->s0, s->s1}, *bb;
	enum zs_status st = ZS_OK;

	if (s->fd < 0) {
		for (int k = 0; k < 3; k++)
			if (dst[k] && res[k])
				memcpy(wr ? res[k] : dst[k], wr ? dst[k] : res[k], s->sh.length * 4);
		return ZS_OK;
	}
	bb = tier_buf();
	if (!bb)
		return ZS_ENOMEM;
	for (unsigned k = 0; k < s->n_arrays && !st; k++)
		if (dst[k])
			st = tier_io(e, s, wr, k, 0, s->sh.length, dst[k], bb);
	free(bb);
	return st;
}

/* Copies shard s into snapshot p (caller holds s->mu and j->cmu). */
static bool capture(struct ejob *j, struct eshard *s, struct epending *p)
{
	size_t k = (size_t)(s - j->shards), n = s->sh.length;
	struct engine_snap *sn = &p->snaps[k];

	*sn = (struct engine_snap){s->sh.unit, s->sh.index, s->sh.offset, n, s->version,
				   malloc(n * 4), s->n_arrays > 1 ? malloc(n * 4) : NULL,
				   s->n_arrays > 2 ? malloc(n * 4) : NULL};
	if (!sn->master || (s->n_arrays > 1 && !sn->s0) || (s->n_arrays > 2 && !sn->s1))
		return false;
	if (arrays_io(j->e, s, false, sn->master, sn->s0, sn->s1))
		return false;
	p->got[k] = true;
	p->n_got++;
	return true;
}

/* Snapshots that completed, to hand over outside the locks. */
static __thread struct epending *finished;

/* After s reached a new version: capture it for snapshots of that step. */
static void capture_due(struct ejob *j, struct eshard *s)
{
	size_t k = (size_t)(s - j->shards);

	pthread_mutex_lock(&j->cmu);
	for (struct epending **pp = &j->pend; *pp;) {
		struct epending *p = *pp;
		if (p->step == s->version && !p->got[k] && !capture(j, s, p))
			zs_error("out of memory capturing a snapshot of job '%s'", j->name);
		if (p->n_got == j->n_shards) {
			*pp = p->next;
			p->next = finished;
			finished = p;
			continue;
		}
		pp = &p->next;
	}
	pthread_mutex_unlock(&j->cmu);
}

/* Hands completed snapshots to their callbacks (no locks held). */
static void deliver_finished(void)
{
	while (finished) {
		struct epending *p = finished;
		finished = p->next;
		p->done(p->ctx, p->job, p->id, p->step, p->snaps, p->n_shards, ZS_OK, NULL);
		free(p->got);
		free(p);
	}
}

/* Reduces elements [a, b) of the R contributions in rank order and
 * averages them, into acc. Elementwise: any split gives the same bits. */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void reduce_range(struct ejob *j, struct eshard *s, size_t a, size_t b)
{
	uint32_t R = j->spec.world_size;
	uint64_t t0 = now_ns();
	enum zs_dtype dt;
	const uint8_t *c;

	c = contribution(s, 0, &dt);
	zs_reduce_first(s->acc + a, c + a * zs_dtype_size(dt), dt, b - a);
	for (uint32_t r = 1; r < R; r++) {
		c = contribution(s, r, &dt);
		zs_reduce_add(s->acc + a, c + a * zs_dtype_size(dt), dt, b - a);
	}
	zs_reduce_mean(s->acc + a, R, b - a);
	s->red_ns += now_ns() - t0;
}

/* One set of chunk buffers of the tier's double buffer. */
struct tier_set {
	float *arr[3];
	float *bb; /* O_DIRECT bounce buffer */
};

/* The helper's job: write back one chunk, then read the next. */
struct tier_job {
	struct engine *e;
	struct eshard *s;
	struct tier_set *set;
	uint64_t wr_a, wr_b; /* [a, b) to write back, empty when a == b */
	uint64_t rd_a, rd_b; /* [a, b) to read ahead, empty when a == b */
	bool ok;
};

static void *tier_job_run(void *arg)
{
	struct tier_job *j = arg;
	for (unsigned k = 0; k < j->s->n_arrays && j->ok && j->wr_a < j->wr_b; k++)
		j->ok = !tier_io(j->e, j->s, true, k, j->wr_a, j->wr_b, j->set->arr[k], j->set->bb);
	for (unsigned k = 0; k < j->s->n_arrays && j->ok && j->rd_a < j->rd_b; k++)
		j->ok = !tier_io(j->e, j->s, false, k, j->rd_a, j->rd_b, j->set->arr[k], j->set->bb);
	return NULL;
}

/*
 * A tiered shard's update of [a, b), chunk by chunk through a double
 * buffer: while chunk c is computed in one set, a helper thread writes
 * chunk c-1 back from the other and reads chunk c+1 into it.
 */
static void tier_update(struct engine *e, struct eshard *s, const struct zs_optim_step *step,
			uint64_t a, uint64_t b)
{
	struct tier_set set[2] = {0};
	uint64_t prev_a = 0, prev_b = 0;
	bool ok = true;
	int cur = 0;

	for (int i = 0; i < 2 && ok; i++) {
		ok = (set[i].bb = tier_buf()) != NULL;
		for (unsigned k = 0; k < s->n_arrays && ok; k++)
			ok = (set[i].arr[k] = malloc(TIER_CHUNK * 4)) != NULL;
	}
	/* the first chunk, read in turn */
	for (unsigned k = 0; k < s->n_arrays && ok && a < b; k++)
		ok = !tier_io(e, s, false, k, a, b - a < TIER_CHUNK ? b : a + TIER_CHUNK,
			      set[0].arr[k], set[0].bb);
	for (uint64_t c = a; c < b && ok; c += TIER_CHUNK) {
		uint64_t d = b - c < TIER_CHUNK ? b - c : TIER_CHUNK;
		uint64_t n_a = c + d, n_b = b - n_a < TIER_CHUNK ? b : n_a + TIER_CHUNK;
		struct tier_job job = {e, s, &set[!cur], prev_a, prev_b, n_a, n_a < b ? n_b : n_a,
				       true};
		pthread_t th;
		bool threaded = (job.wr_a < job.wr_b || job.rd_a < job.rd_b) &&
				pthread_create(&th, NULL, tier_job_run, &job) == 0;
		if (!threaded)
			tier_job_run(&job); /* nothing to overlap, or no thread */
		zs_optim_apply(step, set[cur].arr[0], set[cur].arr[1], set[cur].arr[2],
			       s->acc + c, d);
		zs_convert_from_f32((uint8_t *)s->copy + c * s->dsz, s->dt, set[cur].arr[0], d);
		if (threaded)
			pthread_join(th, NULL);
		ok = job.ok;
		prev_a = c;
		prev_b = c + d;
		cur = !cur;
	}
	/* the last chunk computed goes back */
	for (unsigned k = 0; k < s->n_arrays && ok && prev_a < prev_b; k++)
		ok = !tier_io(e, s, true, k, prev_a, prev_b, set[!cur].arr[k], set[!cur].bb);
	if (!ok)
		zs_error("tier I/O failed for unit %u shard %u (%s): %s", s->sh.unit, s->sh.index,
			 s->path, strerror(errno));
	for (int i = 0; i < 2; i++) {
		free(set[i].bb);
		for (unsigned k = 0; k < 3; k++)
			free(set[i].arr[k]);
	}
}

/* The optimizer on elements [a, b) of acc (scaled by coef), and the copy. */
static void apply_range(struct engine *e, struct ejob *j, struct eshard *s, float coef,
			size_t a, size_t b)
{
	const struct zs_optim *o = &j->spec.optim;
	struct zs_optim_step step = {.kind = o->kind, .lr = o->lr, .beta1 = o->beta1,
				     .beta2 = o->beta2, .eps = o->eps,
				     .weight_decay = o->weight_decay,
				     .momentum = o->momentum, .t = s->version + 1};
	uint64_t t0 = now_ns();

	if (coef != 1.0f)
		zs_scale(s->acc + a, coef, b - a);
	if (s->fd >= 0) {
		tier_update(e, s, &step, a, b);
	} else {
		zs_optim_apply_parallel(&step, s->master + a, s->s0 ? s->s0 + a : NULL,
					s->s1 ? s->s1 + a : NULL, s->acc + a, b - a, e->nthreads);
		if (s->copy != s->master)
			zs_convert_from_f32((uint8_t *)s->copy + a * s->dsz, s->dt,
					    s->master + a, b - a);
	}
	s->opt_ns += now_ns() - t0;
}

/* Adds shard s's time on step v (just applied) to its job's account
 * (caller holds s->mu; s->mu before j->cmu is the order). */
static void account_step(struct ejob *j, struct eshard *s, uint64_t v)
{
	pthread_mutex_lock(&j->cmu);
	typeof(j->acct[0]) *a = &j->acct[v & 1];
	if (a->step != v || !a->n)
		*a = (typeof(*a)){.step = v};
	a->red_ns += s->red_ns;
	a->opt_ns += s->opt_ns;
	if (++a->n == j->n_shards) {
		j->last = (struct zs_job_step_stats){.step = v, .shards = a->n,
						   .reduce_seconds = (double)a->red_ns * 1e-9,
						   .optim_seconds = (double)a->opt_ns * 1e-9};
		j->have_last = true;
		a->n = 0;
	}
	pthread_mutex_unlock(&j->cmu);
	s->red_ns = s->opt_ns = 0;
}

/*
 * Applies the optimizer to acc (scaled by coef when clipping), refreshes
 * the copy, opens the next step and collects the gathers it releases into
 * *rel (caller holds s->mu, frees *rel).
 */
static void apply(struct engine *e, struct ejob *j, struct eshard *s, float coef,
		  struct held **rel, size_t *n_rel)
{
	size_t keep = 0;

	/* what pipelining has not done yet */
	apply_range(e, j, s, coef, s->piped, s->sh.length);
	s->piped = 0;
	account_step(j, s, s->version);
	s->version++;
	capture_due(j, s);
	s->full = 0;
	s->reduced = false;
	memset(s->slot, SLOT_EMPTY, j->spec.world_size);
	memset(s->nacc, 0, j->spec.world_size * sizeof *s->nacc);
	atomic_fetch_add(&e->steps, 1);
	*rel = NULL;
	*n_rel = 0;
	if (!s->n_held)
		return;
	*rel = malloc(s->n_held * sizeof **rel);
	for (size_t i = 0; i < s->n_held; i++) {
		if (*rel && s->held[i].x.step == s->version)
			(*rel)[(*n_rel)++] = s->held[i];
		else
			s->held[keep++] = s->held[i];
	}
	s->n_held = keep;
}

static void serve_released(struct engine *e, struct eshard *s, struct held *rel, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		atomic_fetch_add(&e->bytes_out, rel[i].x.length * s->dsz);
		zs_sop_read_ready(rel[i].op, served(s, &rel[i].x));
	}
	free(rel);
}

/*
 * Clipping: the last shard of the job on this server to reduce step t
 * exchanges the norms and applies every shard. A failed exchange fails the
 * gathers waiting for step t + 1 with its reason.
 */
static void clip_and_apply(struct engine *e, struct ejob *j, uint64_t t)
{
	struct zs_shard_norm *nv = malloc((j->n_shards ? j->n_shards : 1) * sizeof *nv);
	struct zs_error err = {0};
	double total = 0.0;
	enum zs_status st;
	float coef;

	if (!nv) {
		st = zs_fail(&err, ZS_ENOMEM, "out of memory");
	} else {
		for (uint32_t i = 0; i < j->n_shards; i++)
			nv[i] = (struct zs_shard_norm){j->shards[i].sh.unit, j->shards[i].sh.index,
						       j->shards[i].sumsq};
		st = e->norm_fn(e->norm_ctx, j->name, t, nv, j->n_shards, &total, &err);
	}
	free(nv);
	coef = st ? 1.0f : zs_clip_coef(total, j->spec.optim.clip_norm);
	for (uint32_t i = 0; i < j->n_shards; i++) {
		struct eshard *s = &j->shards[i];
		struct held *rel = NULL;
		size_t n_rel = 0;
		pthread_mutex_lock(&s->mu);
		if (st) {
			/* the step cannot finish: say why to whoever waits on it */
			for (size_t h = 0; h < s->n_held; h++)
				zs_sop_fail(s->held[h].op, st, "step %llu of job '%s' cannot finish: %s",
					    (unsigned long long)t, j->name, err.msg);
			s->n_held = 0;
		} else {
			apply(e, j, s, coef, &rel, &n_rel);
		}
		pthread_mutex_unlock(&s->mu);
		serve_released(e, s, rel, n_rel);
	}
	deliver_finished();
	if (st)
		zs_error("job '%s' step %llu: %s", j->name, (unsigned long long)t, err.msg);
}

static void t_write_done(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			 const struct zs_xfer *x, void *dst)
{
	struct engine *e = ctx;
	struct ejob *j = job_by_handle(e, job);
	struct eshard *s;
	struct held *release = NULL;
	size_t n_release = 0, keep = 0;

	(void)dst;
	if (!j) {
		zs_sop_fail(op, ZS_ENOTFOUND, "job handle %u is gone", job);
		return;
	}
	s = shard_for(j, x);
	atomic_fetch_add(&e->bytes_in, x->length * (x->init ? 4 : s->dsz));
	pthread_mutex_lock(&s->mu);
	if (x->init) {
		const float *m = s->fd >= 0 ? s->landing : s->master;
		if (s->fd >= 0 && arrays_io(e, s, true, s->landing, NULL, NULL)) {
			zs_sop_fail(op, ZS_EIO, "cannot write unit '%s' to %s: %s",
				    unit_name(j, x->unit), s->path, strerror(errno));
			goto release;
		}
		if (s->copy != m)
			zs_convert_from_f32(s->copy, s->dt, m, s->sh.length);
		if (s->fd >= 0) {
			zs_listener_release(e->l, s->landing);
			s->landing = NULL;
		}
		s->ready = true;
		zs_sop_done(op);
		goto release;
	}
	if (x->partial || s->nacc[rank]) {
		/* gradient accumulation: add this micro-batch to the rank's sum,
		 * in the order its pushes arrive (a rank pushes them in order) */
		if (!fold(s, rank)) {
			s->slot[rank] = SLOT_EMPTY;
			pthread_mutex_unlock(&s->mu);
			zs_sop_fail(op, ZS_ENOMEM, "out of memory accumulating a gradient");
			job_unref(e, j);
			return;
		}
		if (x->partial) {
			s->slot[rank] = SLOT_EMPTY; /* ready for the next micro-batch */
			zs_sop_done(op);
			pthread_mutex_unlock(&s->mu);
			job_unref(e, j);
			return;
		}
	}
	s->slot[rank] = SLOT_FULL;
	s->full++;
	zs_sop_done(op); /* landed: acknowledged; the update may follow */
	if (s->full == j->spec.world_size) {
		reduce_range(j, s, s->piped, s->sh.length);
		if (j->spec.optim.clip_norm > 0.0) {
			uint64_t t = s->version;
			bool last;
			s->sumsq = zs_sumsq(s->acc, s->sh.length);
			s->reduced = true;
			pthread_mutex_unlock(&s->mu);
			pthread_mutex_lock(&j->cmu);
			last = ++j->n_reduced == j->n_shards;
			if (last)
				j->n_reduced = 0;
			pthread_mutex_unlock(&j->cmu);
			if (last)
				clip_and_apply(e, j, t);
			job_unref(e, j);
			return;
		}
		apply(e, j, s, 1.0f, &release, &n_release);
		pthread_mutex_unlock(&s->mu);
		serve_released(e, s, release, n_release);
		deliver_finished();
		job_unref(e, j);
		return;
	}
release:
	if (s->ready && s->n_held) {
		/* the initial upload releases the gathers of step 0 */
		release = malloc(s->n_held * sizeof *release);
		for (size_t i = 0; i < s->n_held; i++) {
			if (release && s->held[i].x.step == s->version)
				release[n_release++] = s->held[i];
			else
				s->held[keep++] = s->held[i];
		}
		s->n_held = keep;
	}
	pthread_mutex_unlock(&s->mu);
	serve_released(e, s, release, n_release);
	job_unref(e, j);
}

static void shard_release(struct engine *e, struct eshard *s)
{
	for (size_t i = 0; i < s->n_held; i++)
		zs_sop_fail(s->held[i].op, ZS_ECANCELED, "the shard was dropped from this server");
	free(s->held);
	if (e->l) {
		if (s->copy && s->copy != s->master)
			zs_listener_release(e->l, s->copy);
		if (s->master)
			zs_listener_release(e->l, s->master);
		if (s->staging)
			zs_listener_release(e->l, s->staging);
		if (s->landing)
			zs_listener_release(e->l, s->landing);
	}
	if (s->fd >= 0) {
		close(s->fd);
		unlink(s->path);
	} else if (s->master) {
		e->resident -= s->sh.padded * 4 * s->n_arrays;
	}
	free(s->s0);
	free(s->s1);
	free(s->acc);
	free(s->slot);
	for (uint32_t r = 0; s->racc && r < s->n_ranks; r++)
		free(s->racc[r]);
	free(s->racc);
	free(s->nacc);
	pthread_mutex_destroy(&s->mu);
}

static void job_free(struct engine *e, struct ejob *j)
{
	for (uint32_t i = 0; i < j->n_shards; i++)
		shard_release(e, &j->shards[i]);
	while (j->pend) {
		struct epending *p = j->pend;
		j->pend = p->next;
		p->done(p->ctx, j->name, p->id, p->step, NULL, 0, ZS_ECANCELED,
			"the job was dropped from this server");
		engine_snaps_free(p->snaps, j->n_shards);
		free(p->got);
		free(p);
	}
	free(j->shards);
	zs_job_spec_release(&j->spec);
	pthread_mutex_destroy(&j->cmu);
	free(j);
}

static void job_unref(struct engine *e, struct ejob *j)
{
	if (atomic_fetch_sub(&j->refs, 1) == 1)
		job_free(e, j);
}

static enum zs_status shard_init(struct engine *e, struct ejob *j, struct eshard *s,
				 const struct zs_shard *sh, struct zs_error *err)
{
	const struct zs_unit *u = &j->spec.layout.units[sh->unit];
	size_t pad = sh->padded;
	uint32_t R = j->spec.world_size;

	unsigned arrays = 1 + (j->spec.optim.kind == ZS_ADAMW ? 2
				 : j->spec.optim.momentum != 0.0 ? 1 : 0);
	uint64_t state = pad * 4 * arrays;

	pthread_mutex_init(&s->mu, NULL);
	s->sh = *sh;
	s->dt = u->dtype;
	s->dsz = zs_dtype_size(u->dtype);
	s->fd = -1;
	s->n_arrays = arrays;
	if (e->tier_dir[0] && e->resident + state > e->tier_budget) {
		/* past the budget: master and optimizer state live in a file */
		s->arr_bytes = (pad * 4 + 4095) & ~(uint64_t)4095;
		snprintf(s->path, sizeof s->path, "%s/%s-%llu-%u-%u.state", e->tier_dir, j->name,
			 (unsigned long long)j->epoch, sh->unit, sh->index);
		s->fd = open(s->path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
		if (s->fd < 0 && errno == EINVAL) {
			/* a filesystem without O_DIRECT (tmpfs): buffered, and say so */
			zs_warn("%s: no O_DIRECT on this filesystem; the tier goes through the page cache",
				e->tier_dir);
			s->fd = open(s->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		}
		if (s->fd < 0 || ftruncate(s->fd, (off_t)(s->arr_bytes * arrays)))
			return zs_fail(err, zs_status_from_errno(errno), "cannot create %s: %s",
				       s->path, strerror(errno));
		s->copy = zs_listener_alloc(e->l, pad * s->dsz);
		s->master = NULL;
	} else {
		e->resident += state;
		s->master = zs_listener_alloc(e->l, pad * 4);
		s->copy = s->dt == ZS_F32 ? (void *)s->master : zs_listener_alloc(e->l, pad * s->dsz);
	}
	s->staging = zs_listener_alloc(e->l, (size_t)R * pad * s->dsz);
	s->acc = calloc(pad, 4);
	s->slot = calloc(R, 1);
	s->n_ranks = R;
	s->racc = calloc(R, sizeof *s->racc);
	s->nacc = calloc(R, sizeof *s->nacc);
	if (s->fd < 0 && j->spec.optim.kind == ZS_ADAMW) {
		s->s0 = calloc(pad, 4);
		s->s1 = calloc(pad, 4);
	} else if (s->fd < 0 && j->spec.optim.momentum != 0.0) {
		s->s0 = calloc(pad, 4);
	}
	if ((s->fd < 0 && !s->master) || !s->copy || !s->staging)
		return zs_fail(err, ZS_ENOSPC,
			       "the shard arena is full: unit '%s' shard %u needs %zu bytes more",
			       u->name, sh->index, pad * (4 + s->dsz * (R + 1)));
	if (!s->acc || !s->slot || !s->racc || !s->nacc ||
	    (s->fd < 0 && j->spec.optim.kind == ZS_ADAMW && (!s->s0 || !s->s1)) ||
	    (s->fd < 0 && j->spec.optim.kind == ZS_SGD && j->spec.optim.momentum != 0.0 && !s->s0))
		return zs_fail(err, ZS_ENOMEM, "out of memory for unit '%s'", u->name);
	e->bytes += pad * zs_server_bytes_per_elem(&j->spec, u);
	return ZS_OK;
}

enum zs_status engine_add_job(struct engine *e, const struct zs_job *job,
			      uint64_t server_id, struct zs_error *err)
{
	struct ejob *j, *old;
	enum zs_status st;
	uint32_t n = 0;

	if (job->spec.optim.clip_norm > 0.0 && !e->norm_fn)
		return zs_fail(err, ZS_ESTATE,
			       "job '%s' clips gradients, and this server has no norm exchange",
			       job->spec.name);
	pthread_mutex_lock(&e->mu);
	for (old = e->jobs; old && strcmp(old->name, job->spec.name); old = old->next)
		;
	if (old && old->epoch == job->placement.epoch && old->created_ms == job->created_ms) {
		pthread_mutex_unlock(&e->mu);
		return ZS_OK;
	}
	pthread_mutex_unlock(&e->mu);
	if (old)
		engine_remove_job(e, job->spec.name); /* a new epoch or job: start over */

	j = calloc(1, sizeof *j);
	if (!j)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	snprintf(j->name, sizeof j->name, "%s", job->spec.name);
	j->e = e;
	pthread_mutex_init(&j->cmu, NULL);
	j->epoch = job->placement.epoch;
	j->created_ms = job->created_ms;
	atomic_init(&j->refs, 1);
	j->spec = job->spec;
	if (zs_layout_copy(&j->spec.layout, &job->spec.layout)) {
		free(j);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	zs_layout_derive(&j->spec.layout);
	for (uint32_t i = 0; i < job->placement.n_shards; i++)
		n += job->placement.shards[i].server_id == server_id;
	j->shards = calloc(n ? n : 1, sizeof *j->shards);
	if (!j->shards) {
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	for (uint32_t i = 0; i < job->placement.n_shards; i++) {
		const struct zs_shard *sh = &job->placement.shards[i];
		if (sh->server_id != server_id)
			continue;
		if (sh->unit >= j->spec.layout.n_units) {
			st = zs_fail(err, ZS_EINVAL, "placement names unit %u of %u", sh->unit,
				     j->spec.layout.n_units);
			goto fail;
		}
		st = shard_init(e, j, &j->shards[j->n_shards++], sh, err);
		if (st)
			goto fail;
	}
	pthread_mutex_lock(&e->mu);
	j->handle = ++e->next_handle;
	j->next = e->jobs;
	e->jobs = j;
	pthread_mutex_unlock(&e->mu);
	zs_info("holding %u shards of job '%s' (epoch %llu)", j->n_shards, j->name,
		(unsigned long long)j->epoch);
	return ZS_OK;
fail:
	job_free(e, j);
	return st;
}

bool engine_has_job(struct engine *e, const char *name, uint64_t epoch, int64_t created_ms)
{
	bool has = false;
	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j; j = j->next)
		has |= !strcmp(j->name, name) && j->epoch == epoch && j->created_ms == created_ms;
	pthread_mutex_unlock(&e->mu);
	return has;
}

void engine_remove_job(struct engine *e, const char *name)
{
	struct ejob **p, *j = NULL;

	pthread_mutex_lock(&e->mu);
	for (p = &e->jobs; *p; p = &(*p)->next)
		if (!strcmp((*p)->name, name)) {
			j = *p;
			*p = j->next;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	if (!j)
		return;
	zs_info("dropping job '%s'", name);
	job_unref(e, j);
}

uint32_t engine_job_names(struct engine *e, char (*names)[ZS_JOB_NAME_MAX], uint32_t max)
{
	uint32_t n = 0;
	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j && n < max; j = j->next)
		snprintf(names[n++], ZS_JOB_NAME_MAX, "%s", j->name);
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* ------------------------------------------------------------ checkpoints */

void engine_snaps_free(struct engine_snap *s, uint32_t n)
{
	for (uint32_t i = 0; s && i < n; i++) {
		free(s[i].master);
		free(s[i].s0);
		free(s[i].s1);
	}
	free(s);
}

static struct ejob *job_by_name(struct engine *e, const char *name)
{
	struct ejob *j;
	pthread_mutex_lock(&e->mu);
	for (j = e->jobs; j && strcmp(j->name, name); j = j->next)
		;
	if (j)
		atomic_fetch_add(&j->refs, 1);
	pthread_mutex_unlock(&e->mu);
	return j;
}

enum zs_status engine_snapshot(struct engine *e, const char *job, uint64_t id,
			       uint64_t step, engine_snap_done done, void *ctx,
			       struct zs_error *err)
{
	struct ejob *j = job_by_name(e, job);
	struct epending *p;
	enum zs_status st = ZS_OK;

	if (!j)
		return zs_fail(err, ZS_ENOTFOUND, "this server holds no shard of job '%s'", job);
	p = calloc(1, sizeof *p);
	if (p) {
		p->got = calloc(j->n_shards ? j->n_shards : 1, sizeof *p->got);
		p->snaps = calloc(j->n_shards ? j->n_shards : 1, sizeof *p->snaps);
	}
	if (!p || !p->got || !p->snaps) {
		if (p) {
			free(p->got);
			free(p->snaps);
		}
		free(p);
		job_unref(e, j);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	snprintf(p->job, sizeof p->job, "%s", j->name);
	p->n_shards = j->n_shards;
	p->id = id;
	p->step = step;
	p->done = done;
	p->ctx = ctx;
	/* check every shard before registering: past the step or empty is final */
	for (uint32_t k = 0; k < j->n_shards && !st; k++) {
		struct eshard *s = &j->shards[k];
		pthread_mutex_lock(&s->mu);
		if (!s->ready)
			st = zs_fail(err, ZS_ESTATE, "unit '%s' has no parameters to checkpoint yet",
				     unit_name(j, s->sh.unit));
		else if (s->version > step)
			st = zs_fail(err, ZS_ESTATE,
				     "unit '%s' is at step %llu: step %llu can no longer be checkpointed",
				     unit_name(j, s->sh.unit), (unsigned long long)s->version,
				     (unsigned long long)step);
		pthread_mutex_unlock(&s->mu);
	}
	if (st) {
		free(p->got);
		free(p->snaps);
		free(p);
		job_unref(e, j);
		return st;
	}
	pthread_mutex_lock(&j->cmu);
	p->next = j->pend;
	j->pend = p;
	pthread_mutex_unlock(&j->cmu);
	/* capture the shards already at step (the rest on their update) */
	for (uint32_t k = 0; k < j->n_shards; k++) {
		struct eshard *s = &j->shards[k];
		pthread_mutex_lock(&s->mu);
		if (s->version == step)
			capture_due(j, s);
		pthread_mutex_unlock(&s->mu);
	}
	deliver_finished();
	job_unref(e, j);
	return ZS_OK;
}

enum zs_status engine_restore(struct engine *e, const char *job, engine_loader load,
			      void *ctx, uint64_t *step, struct zs_error *err)
{
	struct ejob *j = job_by_name(e, job);
	struct engine_snap *tmp;
	enum zs_status st = ZS_OK;
	uint64_t at = 0;

	if (!j)
		return zs_fail(err, ZS_ENOTFOUND, "this server holds no shard of job '%s'", job);
	tmp = calloc(j->n_shards ? j->n_shards : 1, sizeof *tmp);
	if (!tmp) {
		job_unref(e, j);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	/* load and check everything first: nothing half-applied */
	for (uint32_t k = 0; k < j->n_shards && !st; k++) {
		struct eshard *s = &j->shards[k];
		size_t n = s->sh.length;
		tmp[k] = (struct engine_snap){s->sh.unit, s->sh.index, s->sh.offset, n, 0,
					      malloc(n * 4), s->n_arrays > 1 ? malloc(n * 4) : NULL,
					      s->n_arrays > 2 ? malloc(n * 4) : NULL};
		if (!tmp[k].master || (s->n_arrays > 1 && !tmp[k].s0) ||
		    (s->n_arrays > 2 && !tmp[k].s1)) {
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
			break;
		}
		st = load(ctx, &tmp[k], tmp[k].master, tmp[k].s0, tmp[k].s1, &tmp[k].step, err);
		if (!st && k > 0 && tmp[k].step != at)
			st = zs_fail(err, ZS_EIO, "the checkpoint's shards disagree on the step (%llu, %llu)",
				     (unsigned long long)at, (unsigned long long)tmp[k].step);
		at = tmp[k].step;
	}
	for (uint32_t k = 0; k < j->n_shards && !st; k++) {
		struct eshard *s = &j->shards[k];
		bool busy;
		pthread_mutex_lock(&s->mu);
		busy = s->full || s->reduced;
		for (uint32_t r = 0; r < j->spec.world_size; r++)
			busy |= s->nacc[r] || s->slot[r] != SLOT_EMPTY;
		if (busy) {
			st = zs_fail(err, ZS_ESTATE,
				     "unit '%s' has pushes of step %llu in: restore while no trainer is training",
				     unit_name(j, s->sh.unit), (unsigned long long)s->version);
		}
		pthread_mutex_unlock(&s->mu);
	}
	for (uint32_t k = 0; k < j->n_shards && !st; k++) {
		struct eshard *s = &j->shards[k];
		struct held *rel = NULL;
		size_t n = s->sh.length, n_rel = 0, keep = 0;
		pthread_mutex_lock(&s->mu);
		if (arrays_io(e, s, true, tmp[k].master, tmp[k].s0, tmp[k].s1))
			zs_error("restore: cannot write unit %u shard %u to %s", s->sh.unit,
				 s->sh.index, s->path);
		if (s->copy != s->master)
			zs_convert_from_f32(s->copy, s->dt, tmp[k].master, n);
		s->version = at;
		s->ready = true;
		memset(s->slot, SLOT_EMPTY, j->spec.world_size);
		memset(s->nacc, 0, j->spec.world_size * sizeof *s->nacc);
		if (s->n_held && (rel = malloc(s->n_held * sizeof *rel))) {
			for (size_t h = 0; h < s->n_held; h++) {
				if (s->held[h].x.step == at)
					rel[n_rel++] = s->held[h];
				else
					s->held[keep++] = s->held[h];
			}
			s->n_held = keep;
		}
		pthread_mutex_unlock(&s->mu);
		serve_released(e, s, rel, n_rel);
	}
	engine_snaps_free(tmp, j->n_shards);
	if (!st) {
		*step = at;
		zs_info("job '%s': %u shards restored at step %llu", j->name, j->n_shards,
			(unsigned long long)at);
	}
	job_unref(e, j);
	return st;
}

void engine_stats(struct engine *e, struct engine_stats *st)
{
	memset(st, 0, sizeof *st);
	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j; j = j->next) {
		st->jobs++;
		st->shards += j->n_shards;
		for (uint32_t i = 0; i < j->n_shards; i++) {
			pthread_mutex_lock(&j->shards[i].mu);
			st->held += j->shards[i].n_held;
			st->tiered += j->shards[i].fd >= 0;
			pthread_mutex_unlock(&j->shards[i].mu);
		}
	}
	st->tier_read = atomic_load(&e->tier_read);
	st->tier_written = atomic_load(&e->tier_written);
	st->bytes = e->bytes;
	pthread_mutex_unlock(&e->mu);
	st->steps_applied = atomic_load(&e->steps);
	st->bytes_in = atomic_load(&e->bytes_in);
	st->bytes_out = atomic_load(&e->bytes_out);
	st->pipelined = atomic_load(&e->piped);
}

uint32_t engine_job_steps(struct engine *e, struct zs_job_step_stats *out, uint32_t max)
{
	uint32_t n = 0;

	pthread_mutex_lock(&e->mu);
	for (struct ejob *j = e->jobs; j && n < max; j = j->next) {
		pthread_mutex_lock(&j->cmu);
		if (j->have_last && !j->removed) {
			out[n] = j->last;
			snprintf(out[n].job, sizeof out[n].job, "%s", j->name);
			n++;
		}
		pthread_mutex_unlock(&j->cmu);
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

/* Says what a gather of step t held on s waits for (caller holds s->mu). */
static void waiting_for(struct ejob *j, struct eshard *s, uint64_t t, char *buf, size_t len)
{
	size_t n = 0;

	if (!s->ready) {
		zs_fmt(buf, len, "the initial parameters (rank 0 uploads them)");
		return;
	}
	if (s->reduced) {
		zs_fmt(buf, len, "the gradient norms of the other servers (clipping)");
		return;
	}
	if (t > s->version + 1) {
		zs_fmt(buf, len, "step %llu, which is not reached (the shard is at step %llu)",
		       (unsigned long long)t - 1, (unsigned long long)s->version);
		return;
	}
	n += (size_t)snprintf(buf, len, "the push of step %llu from rank",
			      (unsigned long long)s->version);
	for (uint32_t r = 0, k = 0; r < j->spec.world_size && n < len; r++)
		if (s->slot[r] != SLOT_FULL)
			n += (size_t)snprintf(buf + n, len - n, "%s %u", k++ ? "," : "", r);
}

/* Fails gathers held past the step timeout, naming what they wait for. */
static void *sweeper_main(void *arg)
{
	struct engine *e = arg;

	while (!atomic_load(&e->stop)) {
		int64_t now = zs_now_ms();
		pthread_mutex_lock(&e->mu);
		for (struct ejob *j = e->jobs; j; j = j->next)
			for (uint32_t i = 0; i < j->n_shards; i++) {
				struct eshard *s = &j->shards[i];
				size_t keep = 0;
				pthread_mutex_lock(&s->mu);
				for (size_t h = 0; h < s->n_held; h++) {
					struct held *x = &s->held[h];
					char why[256];
					if (now - x->since_ms < (int64_t)e->step_timeout_ms) {
						s->held[keep++] = *x;
						continue;
					}
					waiting_for(j, s, x->x.step, why, sizeof why);
					zs_warn("job '%s' unit '%s': rank %u's gather of step %llu waited %lld ms for %s",
						j->name, unit_name(j, x->x.unit), x->rank,
						(unsigned long long)x->x.step,
						(long long)(now - x->since_ms), why);
					zs_sop_fail(x->op, ZS_ETIMEDOUT,
						    "unit '%s' step %llu: waited %u ms for %s",
						    unit_name(j, x->x.unit),
						    (unsigned long long)x->x.step,
						    e->step_timeout_ms, why);
				}
				s->n_held = keep;
				pthread_mutex_unlock(&s->mu);
			}
		pthread_mutex_unlock(&e->mu);
		zs_sleep_ms(100, (volatile const int *)&e->stop);
	}
	return NULL;
}

enum zs_status engine_create(unsigned nthreads, uint32_t step_timeout_ms,
			     struct engine **out, struct zs_error *err)
{
	struct engine *e = calloc(1, sizeof *e);

	if (!e)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	pthread_mutex_init(&e->mu, NULL);
	e->nthreads = nthreads ? nthreads : 1;
	e->step_timeout_ms = step_timeout_ms ? step_timeout_ms : 60000;
	e->target = (struct zs_target){e, t_hello, t_read, t_write_begin, t_write_done,
				       t_write_abort, t_write_progress};
	if (pthread_create(&e->sweeper, NULL, sweeper_main, e)) {
		pthread_mutex_destroy(&e->mu);
		free(e);
		return zs_fail(err, ZS_ENOMEM, "cannot start the engine's timeout thread");
	}
	*out = e;
	return ZS_OK;
}

const struct zs_target *engine_target(struct engine *e) { return &e->target; }

enum zs_status engine_set_tier(struct engine *e, const char *dir, uint64_t budget,
			       struct zs_error *err)
{
	enum zs_status st = zs_mkdir_p(dir, err);
	if (st)
		return st;
	snprintf(e->tier_dir, sizeof e->tier_dir, "%s", dir);
	e->tier_budget = budget;
	return ZS_OK;
}

void engine_set_norm_exchange(struct engine *e, engine_norm_fn fn, void *ctx)
{
	e->norm_fn = fn;
	e->norm_ctx = ctx;
}

void engine_set_listener(struct engine *e, struct zs_listener *l) { e->l = l; }

void engine_free(struct engine *e)
{
	if (!e)
		return;
	atomic_store(&e->stop, 1);
	pthread_join(e->sweeper, NULL);
	while (e->jobs)
		engine_remove_job(e, e->jobs->name);
	pthread_mutex_destroy(&e->mu);
	free(e);
}
