/*
 * tier.c - the NVMe tier: fp32 masters and optimizer state of shards past
 * the memory budget in O_DIRECT files, streamed through a double buffer
 * for each update (the next chunk read and the last written back by a
 * helper while this one is updated).
 */
#include "engine/jobs.h"
#include "engine/store.h"

/* ------------------------------------------------------------ NVMe tier */

#define TIER_CHUNK (1u << 18) /* floats: 1 MiB, a multiple of 4 KiB */

static float *eng_tier_buf(void)
{
	void *p = NULL;
	return posix_memalign(&p, 4096, TIER_CHUNK * 4) ? NULL : p;
}

/* Reads or writes elements [a, b) of array k of a tiered shard through the
 * aligned bounce buffer bb (O_DIRECT wants aligned offsets and sizes). */
static enum zs_status eng_tier_io(struct engine *e, struct eshard *s, bool wr, unsigned k,
				  uint64_t a, uint64_t b, float *data, float *bb)
{
	for (uint64_t c = a - a % TIER_CHUNK; c < b; c += TIER_CHUNK) {
		uint64_t lo = c > a ? c : a, hi = c + TIER_CHUNK < b ? c + TIER_CHUNK : b;
		uint64_t span = ((hi - c) * 4 + 4095) & ~(uint64_t)4095;
		off_t off = (off_t)(k * s->tier.arr_bytes + c * 4);
		bool whole;
		if (c * 4 + span > s->tier.arr_bytes)
			span = s->tier.arr_bytes - c * 4;
		/* a write covering the whole span needs no read first */
		whole = wr && lo == c && (hi - lo) * 4 == span;
		if (!whole) {
			if (pread(s->tier.fd, bb, span, off) != (ssize_t)span)
				return ZS_EIO;
			atomic_fetch_add(&e->ctr.tier_read, span);
		}
		if (wr) {
			memcpy(bb + (lo - c), data + (lo - a), (hi - lo) * 4);
			if (pwrite(s->tier.fd, bb, span, off) != (ssize_t)span)
				return ZS_EIO;
			atomic_fetch_add(&e->ctr.tier_written, span);
		} else {
			memcpy(data + (lo - a), bb + (lo - c), (hi - lo) * 4);
		}
	}
	return ZS_OK;
}

/* Elements [a, b) of array k of a shard whose state is not in memory (the
 * tier's or the device's) into dst. */
enum zs_status eng_array_read(struct engine *e, struct eshard *s, unsigned k, size_t a, size_t b,
			      float *dst)
{
	float *bb;
	enum zs_status st;

	if (s->dev.on)
		return eng_dev_array_read(e, s, k, a, b, dst);
	if (!(bb = eng_tier_buf()))
		return ZS_ENOMEM;
	st = eng_tier_io(e, s, false, k, a, b, dst, bb);
	free(bb);
	return st;
}

/* Whole arrays of a shard, resident or tiered, into or out of the buffers
 * given (NULL skips an array). */
enum zs_status eng_arrays_io(struct engine *e, struct eshard *s, bool wr, float *m,
				float *s0, float *s1)
{
	float *dst[3] = {m, s0, s1}, *res[3] = {s->master, s->s0, s->s1}, *bb;
	enum zs_status st = ZS_OK;

	if (s->dev.on)
		return eng_dev_arrays_io(e, s, wr, m, s0, s1);
	if (s->tier.fd < 0) {
		for (int k = 0; k < 3; k++)
			if (dst[k] && res[k])
				memcpy(wr ? res[k] : dst[k], wr ? dst[k] : res[k], s->sh.length * 4);
		return ZS_OK;
	}
	bb = eng_tier_buf();
	if (!bb)
		return ZS_ENOMEM;
	for (unsigned k = 0; k < s->n_arrays && !st; k++)
		if (dst[k])
			st = eng_tier_io(e, s, wr, k, 0, s->sh.length, dst[k], bb);
	free(bb);
	return st;
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

static void tier_job_run(void *arg)
{
	struct tier_job *j = arg;
	for (unsigned k = 0; k < j->s->n_arrays && j->ok && j->wr_a < j->wr_b; k++)
		j->ok = !eng_tier_io(j->e, j->s, true, k, j->wr_a, j->wr_b, j->set->arr[k], j->set->bb);
	for (unsigned k = 0; k < j->s->n_arrays && j->ok && j->rd_a < j->rd_b; k++)
		j->ok = !eng_tier_io(j->e, j->s, false, k, j->rd_a, j->rd_b, j->set->arr[k], j->set->bb);
}

/* A helper's job done: the update waiting for it may go on. */
struct tier_task {
	struct tier_job *job;
	struct zs_latch done;
};

static void tier_task_run(void *arg)
{
	struct tier_task *t = arg;

	tier_job_run(t->job);
	zs_latch_done(&t->done);
}

/*
 * A tiered shard's update of [a, b), chunk by chunk through a double
 * buffer: while chunk c is computed in one set, a helper (the tier's
 * pool) writes chunk c-1 back from the other and reads chunk c+1 into it.
 */
void eng_tier_update(struct engine *e, struct eshard *s, const struct zs_optim_step *steps,
			uint64_t a, uint64_t b)
{
	struct tier_set set[2] = {0};
	uint64_t prev_a = 0, prev_b = 0;
	bool ok = true;
	int cur = 0;

	for (int i = 0; i < 2 && ok; i++) {
		ok = (set[i].bb = eng_tier_buf()) != NULL;
		for (unsigned k = 0; k < s->n_arrays && ok; k++)
			ok = (set[i].arr[k] = malloc(TIER_CHUNK * 4)) != NULL;
	}
	/* the first chunk, read in turn */
	for (unsigned k = 0; k < s->n_arrays && ok && a < b; k++)
		ok = !eng_tier_io(e, s, false, k, a, b - a < TIER_CHUNK ? b : a + TIER_CHUNK,
			      set[0].arr[k], set[0].bb);
	for (uint64_t c = a; c < b && ok; c += TIER_CHUNK) {
		uint64_t d = b - c < TIER_CHUNK ? b - c : TIER_CHUNK;
		uint64_t n_a = c + d, n_b = b - n_a < TIER_CHUNK ? b : n_a + TIER_CHUNK;
		struct tier_job job = {e, s, &set[!cur], prev_a, prev_b, n_a, n_a < b ? n_b : n_a,
				       true};
		struct tier_task task = {&job};
		bool threaded = job.wr_a < job.wr_b || job.rd_a < job.rd_b;
		if (threaded) {
			zs_latch_init(&task.done, 1);
			threaded = zs_pool_submit(e->tier.pool, tier_task_run, &task);
			if (!threaded) { /* the latch goes unused */
				zs_latch_done(&task.done);
				zs_latch_wait(&task.done);
			}
		}
		if (!threaded)
			tier_job_run(&job); /* nothing to overlap, or no thread */
		eng_optim_run(NULL, s, steps, set[cur].arr[0], set[cur].arr[1], set[cur].arr[2],
			      s->acc + c, c, c + d);
		zs_convert_from_f32((uint8_t *)s->copy + c * s->dsz, s->dt, set[cur].arr[0], d);
		if (threaded)
			zs_latch_wait(&task.done);
		ok = job.ok;
		prev_a = c;
		prev_b = c + d;
		cur = !cur;
	}
	/* the last chunk computed goes back */
	for (unsigned k = 0; k < s->n_arrays && ok && prev_a < prev_b; k++)
		ok = !eng_tier_io(e, s, true, k, prev_a, prev_b, set[!cur].arr[k], set[!cur].bb);
	if (!ok)
		zs_error("tier I/O failed for unit %u shard %u (%s): %s", s->sh.unit, s->sh.index,
			 s->tier.path, strerror(errno));
	for (int i = 0; i < 2; i++) {
		free(set[i].bb);
		for (unsigned k = 0; k < 3; k++)
			free(set[i].arr[k]);
	}
}
