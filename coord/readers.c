/*
 * readers.c - the weight readers' registry (include/zshard_reader.h): each
 * reader calls Reader when it opens a job, pins a version, finds its parent
 * gone, and within its lease; the answer places it in the job's relay tree.
 * The tree of a version is its pinned readers that serve a relay, in the
 * order they first called (ids grow): reader i of them reads from reader
 * (i - 1) / fanout, the first from the servers, so each server sends each
 * byte of a version once whatever the number of readers. A reader not
 * heard from within its lease is dropped, and so is a parent a child
 * reports lost: the children it had move up to the next ones of the order.
 * A live step is of the job's timeline when a reader first registered it
 * (the reader keeps it and says it again): a rollback's step of the same
 * number is another version, and its readers another tree. A version that
 * is a checkpoint (ZS_VERSION_CKPT | id) is registered only while the
 * checkpoint is committed and the job's, and retirement passes by one a
 * reader pins (coord_reader_holds); the call that lets it go retires it
 * if its time came meanwhile.
 * Kept in memory: a coordinator's restart forgets them, and each reader's
 * next call (within its lease) registers it again under its id.
 */
#include "coord/rpc.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "coord/session.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "ctrl/codec.h"
#include "model/relaytree.h"

#define READER_LEASE_MS 10000

static void drop_where(struct coord *c, const char *job, uint64_t id, int64_t older_than)
{
	for (struct rdr **p = &c->readers; *p;) {
		struct rdr *r = *p;
		if ((!job || !strcmp(r->job, job)) && (r->i.id == id || r->seen_ms < older_than)) {
			*p = r->next;
			free(r);
			continue;
		}
		p = &r->next;
	}
}

void coord_drop_readers(struct coord *c, const char *job)
{
	for (struct rdr **p = &c->readers; *p;) {
		struct rdr *r = *p;
		if (!job || !strcmp(r->job, job)) {
			*p = r->next;
			free(r);
			continue;
		}
		p = &r->next;
	}
}

bool coord_reader_holds(struct coord *c, const char *job, uint64_t version)
{
	int64_t since = zs_now_ms() - READER_LEASE_MS;

	for (struct rdr *r = c->readers; r; r = r->next)
		if (r->i.pinned && r->i.step == version && r->seen_ms >= since &&
		    !strcmp(r->job, job))
			return true;
	return false;
}

/* A reader may pin checkpoint version v of j only while it is committed
 * and j's own (its incarnation's). */
static bool ckpt_pinnable(struct coord *c, const struct zs_job *j, uint64_t v,
			  struct zs_error *err)
{
	uint64_t id = v & ~ZS_VERSION_CKPT;

	for (size_t i = 0; i < c->ck.n; i++) {
		const struct zs_checkpoint *k = &c->ck.list[i];
		if (k->id != id || !coord_ckpt_of(k, j))
			continue;
		if (k->state == ZS_CKPT_COMMITTED)
			return true;
		zs_fail(err, ZS_ESTATE, "checkpoint %llu of job '%s' is %s, not committed",
			(unsigned long long)id, j->spec.name, zs_ckpt_state_name(k->state));
		return false;
	}
	zs_fail(err, ZS_ENOTFOUND,
		"job '%s' has no checkpoint %llu (retired, deleted, or another job's)", j->spec.name,
		(unsigned long long)id);
	return false;
}

static struct rdr *find(struct coord *c, const char *job, uint64_t id)
{
	for (struct rdr *r = c->readers; r; r = r->next)
		if (r->i.id == id && !strcmp(r->job, job))
			return r;
	return NULL;
}

/* me's parent (model/relaytree.c) among its job's readers; NULL: the
 * servers (or out of memory: the servers then). */
static struct rdr *parent_of(struct coord *c, struct rdr *me, uint32_t fanout)
{
	struct zs_reader_info *v = NULL;
	struct rdr **who = NULL;
	uint32_t n = 0, at = 0;
	struct rdr *par = NULL;
	int k;

	for (struct rdr *r = c->readers; r; r = r->next)
		n += !strcmp(r->job, me->job);
	if (!(v = malloc(n * sizeof *v)) || !(who = malloc(n * sizeof *who))) {
		free(v);
		return NULL;
	}
	n = 0;
	for (struct rdr *r = c->readers; r; r = r->next) {
		if (strcmp(r->job, me->job))
			continue;
		if (r == me)
			at = n;
		who[n] = r;
		v[n++] = r->i;
	}
	if ((k = zs_rt_parent(v, n, at, fanout)) >= 0)
		par = who[k];
	free(v);
	free(who);
	return par;
}

void coord_h_reader(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_reader_req q;
	struct zs_reader_ans a = {.lease_ms = READER_LEASE_MS};
	struct zs_error e = {0};
	struct zs_buf b;
	struct rdr *me, *par;
	struct zs_job *j;
	bool let_go;
	int64_t now = zs_now_ms();

	if (zs_dec_reader_req(p, n, &q, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	if (!(j = coord_job_or_fail(c, call, q.job)))
		goto out;
	if (!q.leave && q.me.pinned && (q.me.step & ZS_VERSION_CKPT) &&
	    !ckpt_pinnable(c, j, q.me.step, &e)) {
		coord_reply_err(call, &e);
		goto out;
	}
	/* a checkpoint this reader let go may be one to retire now */
	me = q.me.id ? find(c, q.job, q.me.id) : NULL;
	let_go = me && me->i.pinned && (me->i.step & ZS_VERSION_CKPT) &&
		 (q.leave || !q.me.pinned || q.me.step != me->i.step);
	/* a live step's timeline: the job's (+ 1: never 0) when the step is
	 * new to the registry, what it was given after (a renewal sent
	 * before the answer came, or a restart's: the reader's own) */
	q.me.timeline = zs_rt_timeline(&q.me, me ? &me->i : NULL, j->timeline);
	drop_where(c, q.job, q.lost ? q.lost : UINT64_MAX, now - READER_LEASE_MS);
	if (q.leave) {
		drop_where(c, q.job, q.me.id, INT64_MIN);
		a.id = q.me.id;
	} else {
		if (!q.me.id || !(me = find(c, q.job, q.me.id))) {
			/* a new reader, or one a restart (or its lapse) forgot */
			if (!(me = calloc(1, sizeof *me))) {
				zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
				goto out;
			}
			snprintf(me->job, sizeof me->job, "%s", q.job);
			me->next = c->readers;
			c->readers = me;
			if (!q.me.id)
				q.me.id = ++c->next_reader;
			else if (q.me.id > c->next_reader)
				c->next_reader = q.me.id;
		}
		me->i = q.me;
		me->seen_ms = now;
		par = parent_of(c, me, q.fanout ? q.fanout : 2);
		me->i.parent = par ? par->i.id : 0;
		a.id = me->i.id;
		a.parent = me->i.parent;
		a.timeline = me->i.timeline;
		if (par)
			snprintf(a.parent_addr, sizeof a.parent_addr, "%s", par->i.relay_addr);
	}
	if (let_go)
		coord_enforce_keep(c, j);
	coord_reply_buf(call, zs_enc_reader_ans(&a, &b), &b);
out:
	pthread_mutex_unlock(&c->mu);
}

void coord_h_readers(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_reader_info *v = NULL;
	struct zs_error e = {0};
	struct zs_buf b;
	uint32_t nv = 0;
	int64_t now = zs_now_ms();

	if (zs_dec_job_name(p, n, name, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	if (!coord_job_or_fail(c, call, name))
		goto out;
	drop_where(c, name, UINT64_MAX, now - READER_LEASE_MS);
	for (struct rdr *r = c->readers; r; r = r->next)
		nv += !strcmp(r->job, name);
	if (!(v = calloc(nv ? nv : 1, sizeof *v))) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	nv = 0;
	for (struct rdr *r = c->readers; r; r = r->next)
		if (!strcmp(r->job, name)) {
			v[nv] = r->i;
			v[nv++].age_ms = now - r->seen_ms;
		}
	coord_reply_buf(call, zs_enc_readers(v, nv, &b), &b);
out:
	pthread_mutex_unlock(&c->mu);
	free(v);
}
