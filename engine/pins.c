/*
 * pins.c - versions readers pinned (docs/DESIGN.md, "Weight readers"): a
 * reader's PIN of step t keeps a copy of every shard here at version t, in
 * the unit's dtype (what trainers gather), taken from the shard's copy
 * when it is at t (the part of it an update under way already rewrote
 * from the step before's, which the server keeps: redo.c), from the step
 * before's when it is one past t, and at its update for a shard still
 * below t (a step gone, or not reached yet, is ZS_ESTATE: the wrong
 * moment). Once taken a copy never changes: reads of the pinned version
 * never mix steps, whatever training, a failover or a rollback does
 * meanwhile. A rollback drops every pin of the job (what was pending
 * would be another timeline's). A pin goes when every HOLD of it is
 * released, or when no reader touched it for the spec's idle bound.
 *
 * A copy lives in the listener's arena within the reader budget
 * (engine_set_reader_budget), so that readers addressing the arena (shm on this host,
 * rdma's one-sided path) take its bytes without this server's CPU; else in
 * malloc's memory, read over tcp alone (such a read from a peer that
 * addresses the arena is ZS_ENOSPC: the reader reads it over tcp). Bytes
 * read from the arena after their pin went (a rollback's drop) fail the
 * CRC32C the answer carried, and the reader asks again.
 */
#include "engine/jobs.h"

#include "engine/kept.h"

#include "base/crc32c.h"

/* One shard's range of its unit at the pin's step (buf NULL: not yet). */
struct epin_part {
	uint32_t unit;
	uint64_t offset, length;
	enum zs_dtype dt;
	void *buf;
	bool want;  /* a shard with parameters when the pin was taken */
	bool lost;  /* its copy could not be taken (out of memory) */
	bool arena; /* buf is the listener's arena's */
};

struct epin {
	uint64_t step;
	/* its run: 1 + the job's timeline when it was taken (under pins.mu;
	 * engine_set_timeline drops the older ones), said in PIN_OK so that
	 * the readers' registry files the version under the run its bytes are
	 * of (a step of one number before and after a rollback is two) */
	uint64_t run;
	uint32_t holds;   /* HOLDs not released */
	uint32_t reading; /* reads sending from it now */
	bool dropped;     /* out of the list: the last read frees it */
	bool building;    /* its parts being made (pin_new): not read yet */
	int64_t used_ms;  /* the last HOLD or read */
	uint32_t n;
	struct epin_part *p;
	struct epin *next;
};

void engine_set_reader_budget(struct engine *e, uint64_t budget) { e->pin_budget = budget; }

/* Gives b (len bytes) back to where it came from. */
static void buf_free(struct ejob *j, void *b, size_t len, bool arena)
{
	if (arena) {
		zs_listener_release(j->e->l, b);
		atomic_fetch_sub(&j->e->pin_arena, len);
	} else {
		free(b);
	}
}

/* Spare i of the job's, taken out of the list (caller holds j->pins.mu). */
static void *spare_take(struct ejob *j, uint32_t i, bool *arena)
{
	void *b = j->pins.sp[i].b;

	*arena = j->pins.sp[i].arena;
	j->pins.sp[i] = j->pins.sp[--j->pins.n_sp];
	return b;
}

/* A buffer of len bytes (*arena: the listener's), the arena's first: a
 * spare one of a pin freed before when there is one of that size (a
 * reader pulling every version would otherwise map and fault in fresh
 * pages for each), else a new one within the reader budget; else a
 * malloc'd spare, else malloc's (caller holds j->pins.mu). */
static void *buf_get(struct ejob *j, size_t len, bool *arena)
{
	struct engine *e = j->e;
	uint32_t in = j->pins.n_sp, out = j->pins.n_sp;
	void *b;

	for (uint32_t i = 0; i < j->pins.n_sp; i++)
		if (j->pins.sp[i].len == len)
			*(j->pins.sp[i].arena ? &in : &out) = i;
	if (in < j->pins.n_sp)
		return spare_take(j, in, arena);
	if (e->l && atomic_fetch_add(&e->pin_arena, len) + len <= e->pin_budget &&
	    (b = zs_listener_alloc(e->l, len ? len : 1))) {
		*arena = true;
		return b;
	}
	if (e->l)
		atomic_fetch_sub(&e->pin_arena, len);
	if (out < j->pins.n_sp)
		return spare_take(j, out, arena);
	*arena = false;
	return malloc(len ? len : 1);
}

/* Keeps b as a spare, up to a pinned version's worth (caller holds
 * j->pins.mu, or nothing at the job's end). */
static void buf_put(struct ejob *j, void *b, size_t len, bool arena)
{
	if (!b)
		return;
	if (j->pins.n_sp == j->pins.cap_sp) {
		uint32_t nc = j->pins.cap_sp ? j->pins.cap_sp * 2 : 16;
		void *v = nc <= j->n_shards + 16 ? realloc(j->pins.sp, nc * sizeof *j->pins.sp)
						      : NULL;
		if (!v) {
			buf_free(j, b, len, arena);
			return;
		}
		j->pins.sp = v;
		j->pins.cap_sp = nc;
	}
	j->pins.sp[j->pins.n_sp].b = b;
	j->pins.sp[j->pins.n_sp].arena = arena;
	j->pins.sp[j->pins.n_sp++].len = len;
}

static void pin_free(struct ejob *j, struct epin *p)
{
	for (uint32_t k = 0; p && k < p->n; k++)
		buf_put(j, p->p[k].buf, p->p[k].length * zs_dtype_size(p->p[k].dt),
			p->p[k].arena);
	if (p)
		free(p->p);
	free(p);
}

/* Unlinks p (caller holds j->pins.mu); freed now or by its last read. */
static void pin_drop(struct ejob *j, struct epin *p)
{
	for (struct epin **pp = &j->pins.list; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			j->pins.n--;
			break;
		}
	p->dropped = true;
	if (!p->reading)
		pin_free(j, p);
}

enum pin_src { PIN_TAKEN, PIN_PENDING, PIN_GONE, PIN_NOMEM };

/* Copies version t of shard s's compute copy into part q (caller holds
 * s->mu and j->pins.mu). */
static enum pin_src pin_take(struct ejob *j, struct eshard *s, uint64_t t, struct epin_part *q)
{
	size_t n = s->sh.length, dsz = s->dsz, piped = s->open.piped;
	const uint8_t *copy = s->copy, *prev = s->prev.p;

	switch (eng_kept_at(s->lay.marks, s->version, t, prev != NULL, s->prev.of, piped > 0)) {
	case EK_LATER:
		return PIN_PENDING;
	case EK_GONE:
		return PIN_GONE;
	case EK_PREV:
		copy = prev, piped = 0; /* the step before's, whole */
		break;
	case EK_NOW:
		break;
	}
	if (!(q->buf = buf_get(j, n * dsz, &q->arena)))
		return PIN_NOMEM;
	/* a frozen shard is the same at every step; an update under way has
	 * rewritten [0, piped) of the copy, kept in prev first */
	if (s->lay.marks)
		piped = 0;
	memcpy(q->buf, prev, piped * dsz);
	memcpy((uint8_t *)q->buf + piped * dsz, copy + piped * dsz, (n - piped) * dsz);
	return PIN_TAKEN;
}

/* Whether part q was made for shard s (a placement changed in place
 * since the pin might have put another shard at its place). */
static bool part_of(const struct epin_part *q, const struct eshard *s)
{
	return q->unit == s->sh.unit && q->offset == s->sh.offset && q->length == s->sh.length;
}

void eng_pins_due(struct ejob *j, struct eshard *s)
{
	pthread_mutex_lock(&j->pins.mu);
	for (struct epin *p = j->pins.list; p; p = p->next)
		if (p->step == s->version && s->idx < p->n && p->p[s->idx].want &&
		    !p->p[s->idx].buf && !p->p[s->idx].lost && part_of(&p->p[s->idx], s) &&
		    (p->p[s->idx].lost = pin_take(j, s, p->step, &p->p[s->idx]) != PIN_TAKEN))
			zs_error("job '%s': out of memory taking a reader's copy of unit '%s' at step %llu",
				 j->name, eng_unit_name(j, s->sh.unit), (unsigned long long)p->step);
	pthread_mutex_unlock(&j->pins.mu);
}

void eng_pins_drop(struct ejob *j, const char *why)
{
	pthread_mutex_lock(&j->pins.mu);
	while (j->pins.list)
		pin_drop(j, j->pins.list);
	snprintf(j->pins.why, sizeof j->pins.why, "%s", why);
	pthread_mutex_unlock(&j->pins.mu);
}

void eng_pins_drop_before(struct ejob *j, uint64_t run, const char *why)
{
	pthread_mutex_lock(&j->pins.mu);
	for (struct epin *p = j->pins.list, *next; p; p = next) {
		next = p->next;
		if (p->run < run)
			pin_drop(j, p);
	}
	snprintf(j->pins.why, sizeof j->pins.why, "%s", why);
	pthread_mutex_unlock(&j->pins.mu);
}

void eng_pins_sweep(struct ejob *j, int64_t now)
{
	uint32_t idle = j->spec.reader_idle_ms ? j->spec.reader_idle_ms : ZS_READER_IDLE_MS;

	pthread_mutex_lock(&j->pins.mu);
	for (struct epin *p = j->pins.list, *nx; p; p = nx) {
		nx = p->next;
		if (now - p->used_ms > (int64_t)idle) {
			zs_info("job '%s': the version of step %llu pinned by readers is dropped: no reader touched it for %u ms",
				j->name, (unsigned long long)p->step, idle);
			pin_drop(j, p);
		}
	}
	pthread_mutex_unlock(&j->pins.mu);
}

/* The lowest and highest version of j's shards here with parameters (0
 * and 0 when none has). */
static void versions(struct ejob *j, struct zs_pin_ans *a)
{
	a->lo = UINT64_MAX;
	a->hi = 0;
	for (uint32_t k = 0; k < j->n_shards; k++) {
		struct eshard *s = j->shards[k];
		pthread_mutex_lock(&s->mu);
		if (eng_ready(s) && !s->lay.marks) {
			a->lo = s->version < a->lo ? s->version : a->lo;
			a->hi = s->version > a->hi ? s->version : a->hi;
		}
		pthread_mutex_unlock(&s->mu);
	}
	if (a->lo == UINT64_MAX)
		a->lo = 0;
}

/* A new pin of step t (caller holds nothing): in the list first, so that
 * an update after a shard's check takes its copy (eng_pins_due). */
static enum zs_status pin_new(struct ejob *j, uint64_t t, uint64_t *run, struct zs_error *err)
{
	uint32_t n = j->n_shards;
	struct epin *p = calloc(1, sizeof *p);
	enum zs_status st = ZS_OK;
	enum pin_src src = PIN_PENDING;

	if (!p || !(p->p = calloc(n ? n : 1, sizeof *p->p))) {
		pin_free(j, p);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	p->step = t;
	p->n = n;
	p->holds = 1;
	p->reading = 1; /* this call's: a rollback meanwhile cannot free it */
	p->building = true;
	p->used_ms = zs_now_ms();
	pthread_mutex_lock(&j->pins.mu);
	p->run = atomic_load(&j->timeline) + 1;
	*run = p->run;
	p->next = j->pins.list;
	j->pins.list = p;
	j->pins.n++;
	pthread_mutex_unlock(&j->pins.mu);
	for (uint32_t k = 0; k < n && !st; k++) {
		struct eshard *s = j->shards[k];
		struct epin_part *q = &p->p[k];
		pthread_mutex_lock(&s->mu);
		pthread_mutex_lock(&j->pins.mu);
		*q = (struct epin_part){s->sh.unit, s->sh.offset, s->sh.length, s->dt, NULL,
					eng_ready(s)};
		if (p->dropped) /* a rollback meanwhile */
			st = zs_fail(err, ZS_ERESUME, "job '%s': %s", j->name, j->pins.why);
		else if (!q->want && !s->sh.copy)
			st = zs_fail(err, ZS_ESTATE, "unit '%s' has no parameters yet",
				     eng_unit_name(j, s->sh.unit));
		else if (q->want && (src = pin_take(j, s, t, q)) == PIN_NOMEM)
			st = zs_fail(err, ZS_ENOMEM,
				     "out of memory copying unit '%s' at step %llu for readers",
				     eng_unit_name(j, s->sh.unit), (unsigned long long)t);
		else if (q->want && src == PIN_GONE)
			st = zs_fail(err, ZS_ESTATE,
				     "unit '%s' is at step %llu here: step %llu is gone (a server keeps a shard's version and the step before)",
				     eng_unit_name(j, s->sh.unit), (unsigned long long)s->version,
				     (unsigned long long)t);
		pthread_mutex_unlock(&j->pins.mu);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_lock(&j->pins.mu);
	p->building = false;
	if (st && !p->dropped)
		pin_drop(j, p);
	if (!--p->reading && p->dropped)
		pin_free(j, p);
	pthread_mutex_unlock(&j->pins.mu);
	return st;
}

static struct epin *pin_at(struct ejob *j, uint64_t t)
{
	struct epin *p = j->pins.list;

	while (p && p->step != t)
		p = p->next;
	return p;
}

static enum zs_status pin_hold(struct ejob *j, uint64_t t, uint64_t *run, struct zs_error *err)
{
	struct epin *p;
	uint32_t have;

	if (!j->spec.reader_pins)
		return zs_fail(err, ZS_EPERM,
			       "job '%s' lets readers pin no live version (its spec's readers.pins is 0)",
			       j->name);
	pthread_mutex_lock(&j->pins.mu);
	if ((p = pin_at(j, t)) && p->building) {
		/* another reader's PIN of it is still taking the copies, and
		 * may yet fail: ask again */
		pthread_mutex_unlock(&j->pins.mu);
		return zs_fail(err, ZS_ESTATE, "step %llu is being pinned here by another reader",
			       (unsigned long long)t);
	}
	if (p) {
		p->holds++;
		p->used_ms = zs_now_ms();
		*run = p->run;
	}
	have = j->pins.n;
	pthread_mutex_unlock(&j->pins.mu);
	if (p)
		return ZS_OK;
	if (have >= j->spec.reader_pins)
		return zs_fail(err, ZS_ENOSPC,
			       "job '%s' has %u versions pinned here, its spec's readers.pins: a reader must release one (or let it pass its idle bound) first",
			       j->name, have);
	return pin_new(j, t, run, err);
}

enum zs_status eng_t_pin(void *ctx, uint32_t job, uint64_t step, uint32_t verb,
			 struct zs_pin_ans *ans, struct zs_error *err)
{
	struct engine *e = ctx;
	struct ejob *j = eng_job_or_fail(e, job, err);
	enum zs_status st = ZS_OK;

	if (!j)
		return err->code;
	*ans = (struct zs_pin_ans){.step = step};
	uint64_t run = 0;
	if (verb == ZS_PIN_HOLD) {
		st = pin_hold(j, step, &run, err);
	} else if (verb == ZS_PIN_RELEASE) {
		pthread_mutex_lock(&j->pins.mu);
		struct epin *p = pin_at(j, step);
		if (p && !--p->holds)
			pin_drop(j, p);
		pthread_mutex_unlock(&j->pins.mu);
	} else if (verb != ZS_PIN_QUERY) {
		st = zs_fail(err, ZS_EINVAL, "PIN verb %u", verb);
	}
	if (!st) {
		versions(j, ans);
		ans->timeline = run;
	}
	eng_job_unref(e, j);
	return st;
}

/* Why step t cannot be read here (caller holds j->pins.mu). */
static enum zs_status not_pinned(struct ejob *j, uint64_t t, struct zs_error *err)
{
	uint32_t idle = j->spec.reader_idle_ms ? j->spec.reader_idle_ms : ZS_READER_IDLE_MS;

	return zs_fail(err, ZS_ENOTFOUND,
		       "job '%s': step %llu is not pinned on this server (never held here, released, or dropped after %u ms untouched%s%s)",
		       j->name, (unsigned long long)t, idle, j->pins.why[0] ? "; " : "",
		       j->pins.why);
}

void eng_pin_read(struct engine *e, struct ejob *j, struct zs_sop *op, const struct zs_xfer *x)
{
	struct zs_error err = {0};
	struct epin_part *q = NULL;
	struct epin *p;
	const uint8_t *src = NULL;
	size_t bytes = 0;

	pthread_mutex_lock(&j->pins.mu);
	p = pin_at(j, x->step);
	for (uint32_t k = 0; p && k < p->n && !q; k++)
		if (p->p[k].unit == x->unit && x->offset >= p->p[k].offset &&
		    x->offset - p->p[k].offset < p->p[k].length &&
		    x->length <= p->p[k].length - (x->offset - p->p[k].offset) && p->p[k].want)
			q = &p->p[k];
	if (!p)
		not_pinned(j, x->step, &err);
	else if (p->building)
		zs_fail(&err, ZS_ESTATE, "step %llu is still being pinned on this server",
			(unsigned long long)x->step);
	else if (!q)
		zs_fail(&err, ZS_EINVAL,
			"unit %u [%llu, +%llu) is not within a shard this server pinned at step %llu",
			x->unit, (unsigned long long)x->offset, (unsigned long long)x->length,
			(unsigned long long)x->step);
	else if (q->lost)
		zs_fail(&err, ZS_ENOMEM,
			"this server ran out of memory copying unit '%s' at step %llu for readers",
			eng_unit_name(j, x->unit), (unsigned long long)x->step);
	else if (!q->buf)
		zs_fail(&err, ZS_ESTATE, "unit '%s' has not reached step %llu on this server yet",
			eng_unit_name(j, x->unit), (unsigned long long)x->step);
	else if (x->dtype != q->dt)
		zs_fail(&err, ZS_EINVAL,
			"unit '%s' is %s, the read asked for %s (a reader reads the unit's dtype and converts)",
			eng_unit_name(j, x->unit), zs_dtype_name(q->dt), zs_dtype_name(x->dtype));
	else if (zs_sop_reads_arena(op) && !q->arena)
		zs_fail(&err, ZS_ENOSPC,
			"this server's copy of unit '%s' at step %llu is not in its arena (past its --reader-budget): read it over tcp",
			eng_unit_name(j, x->unit), (unsigned long long)x->step);
	if (!err.code) {
		size_t dsz = zs_dtype_size(q->dt);
		src = (const uint8_t *)q->buf + (x->offset - q->offset) * dsz;
		bytes = x->length * dsz;
		p->reading++;
		p->used_ms = zs_now_ms();
	}
	pthread_mutex_unlock(&j->pins.mu);
	if (err.code) {
		zs_sop_fail(op, err.code, "%s", err.msg);
		return;
	}
	/* the copy never changes while read: no shard lock */
	zs_sop_set_aux(op, zs_crc32c(0, src, bytes));
	atomic_fetch_add(&e->ctr.bytes_out, bytes);
	zs_sop_read_ready(op, src);
	pthread_mutex_lock(&j->pins.mu);
	if (!--p->reading && p->dropped)
		pin_free(j, p);
	pthread_mutex_unlock(&j->pins.mu);
}

void eng_pins_free(struct ejob *j)
{
	while (j->pins.list) {
		struct epin *p = j->pins.list;
		j->pins.list = p->next;
		pin_free(j, p);
	}
	for (uint32_t i = 0; i < j->pins.n_sp; i++)
		buf_free(j, j->pins.sp[i].b, j->pins.sp[i].len, j->pins.sp[i].arena);
	free(j->pins.sp);
	pthread_mutex_destroy(&j->pins.mu);
}
