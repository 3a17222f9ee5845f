/*
 * live.c - a server's live state across a clean stop.
 *
 * On SIGTERM, with the data plane stopped, every job that is between steps
 * (each shard with parameters at one version, no push in) is written to the
 * "live" table in one transaction: its shards' masters and optimizer state
 * as the records of a checkpoint with id 0, and a marker in "meta" (the
 * job's incarnation, placement epoch and step). Each job's records get
 * their disk blocks before they are written (zs_kv_room): a full disk
 * keeps the jobs that fit and says why the others are not kept, where a
 * store through LMDB's map would have been a SIGBUS. At the next start the
 * server claims those jobs in its first registration and, once the job is
 * assigned to it again at the same epoch, loads them back and deletes them
 * (a later crash must not find them). The coordinator accepts a claim only
 * where every rank left the job cleanly at that very step (see
 * coord/recovery.c); otherwise the job rolls back, and the checkpoint's
 * restore overwrites what was loaded here.
 */
#include "server/daemon.h"

#include "base/le.h"
#include "storage/ckpt.h"

#define LIVE_PREFIX "live/"
#define LIVE_ID 0 /* the checkpoint id the live records go under */

/* A marker's key: "live/JOB". */
static size_t marker_key(char *k, size_t cap, const char *job)
{
	return (size_t)snprintf(k, cap, LIVE_PREFIX "%s", job);
}

/* Puts job a's live state into t, which has written *written bytes of
 * records before it (this job's are added). */
static enum zs_status put_job(struct srvd *d, struct zs_kv_txn *t, const struct zs_assignment *a,
			      uint64_t *written, struct zs_error *err)
{
	struct engine_snap *s = NULL;
	uint32_t n = 0;
	uint64_t step, bytes = 0;
	uint8_t v[24];
	char k[ZS_JOB_NAME_MAX + 8];
	enum zs_status st = engine_capture_now(d->engine, a->job, &s, &n, &step, err);

	if (st)
		return st;
	for (uint32_t i = 0; i < n; i++)
		bytes += (s[i].length * 4 + CKPT_HDR + 64) * (1 + !!s[i].s0 + !!s[i].s1);
	/* the disk's blocks for them first: a full disk is an error here,
	 * where a store through LMDB's map would be a SIGBUS */
	st = zs_kv_room(t, *written + bytes, err);
	if (st)
		zs_error_prefix(err, "its live state (%llu bytes)", (unsigned long long)bytes);
	else
		*written += bytes;
	for (uint32_t i = 0; i < n && !st; i++) {
		st = ckpt_put(t, KV_LIVE, a->job, LIVE_ID, s[i].unit, s[i].index, CKPT_MASTER,
			      step, s[i].master, s[i].length, err);
		if (!st && s[i].s0)
			st = ckpt_put(t, KV_LIVE, a->job, LIVE_ID, s[i].unit, s[i].index,
				      CKPT_STATE0, step, s[i].s0, s[i].length, err);
		if (!st && s[i].s1)
			st = ckpt_put(t, KV_LIVE, a->job, LIVE_ID, s[i].unit, s[i].index,
				      CKPT_STATE1, step, s[i].s1, s[i].length, err);
	}
	engine_snaps_free(s, n);
	zs_put64(v, a->incarnation);
	zs_put64(v + 8, a->epoch);
	zs_put64(v + 16, step);
	if (!st)
		st = zs_kv_put(t, KV_META, k, marker_key(k, sizeof k, a->job), v, sizeof v, err);
	if (!st)
		zs_info("job '%s': its live state at step %llu kept for the next start", a->job,
			(unsigned long long)step);
	return st;
}

unsigned srvd_live_persist(struct srvd *d)
{
	struct zs_error err = {0};
	struct zs_kv_txn *t;
	unsigned kept = 0, lost = 0;
	uint64_t written = 0;

	if (!d->n_as)
		return 0;
	if (zs_kv_begin(d->kv, true, &t, &err)) {
		zs_error("cannot keep the live state of its %u jobs: %s (they roll back to their latest checkpoints at the next start)",
			 d->n_as, err.msg);
		return d->n_as;
	}
	for (uint32_t i = 0; i < d->n_as; i++) {
		struct zs_error e = {0};
		if (put_job(d, t, &d->as[i], &written, &e)) {
			if (e.code == ZS_ESTATE) {
				zs_warn("job '%s' is not kept: %s (it rolls back to its latest checkpoint at the next start)",
					d->as[i].job, e.msg);
			} else {
				zs_error("job '%s' is not kept: %s (it rolls back to its latest checkpoint at the next start)",
					 d->as[i].job, e.msg);
				lost++;
			}
			continue;
		}
		kept++;
	}
	if (!kept) {
		zs_kv_abort(t);
		return lost;
	}
	if (zs_kv_commit(t, &err)) {
		zs_error("cannot keep the live state of %u jobs: %s (they roll back to their latest checkpoints at the next start)",
			 kept, err.msg);
		lost += kept;
	}
	srvd_note_storage(d, err.code, err.msg);
	return lost;
}

/* ------------------------------------------------------------- at start */

struct walk {
	struct zs_live_claim *v;
	uint32_t n, cap;
};

static enum zs_status visit(void *ctx, const void *key, size_t klen, const void *val,
			    size_t vlen)
{
	struct walk *w = ctx;
	size_t pl = sizeof LIVE_PREFIX - 1;
	struct zs_live_claim *c;

	if (klen <= pl || klen - pl >= ZS_JOB_NAME_MAX || memcmp(key, LIVE_PREFIX, pl) ||
	    vlen != 24 || w->n == w->cap)
		return ZS_OK;
	c = &w->v[w->n++];
	memset(c, 0, sizeof *c);
	memcpy(c->job, (const char *)key + pl, klen - pl);
	c->incarnation = zs_get64((const uint8_t *)val);
	c->epoch = zs_get64((const uint8_t *)val + 8);
	c->step = zs_get64((const uint8_t *)val + 16);
	return ZS_OK;
}

void srvd_live_claims(struct srvd *d)
{
	struct zs_error err = {0};
	struct zs_kv_txn *t;
	struct walk w = {d->me.live, 0, ZS_LIVE_MAX};

	d->me.n_live = 0;
	if (zs_kv_begin(d->kv, false, &t, &err)) {
		zs_warn("cannot read live state: %s", err.msg);
		return;
	}
	if (zs_kv_foreach(t, KV_META, visit, &w, &err))
		zs_warn("cannot read live state: %s", err.msg);
	zs_kv_abort(t);
	d->me.n_live = w.n;
	for (uint32_t i = 0; i < w.n; i++)
		zs_info("job '%s': live state of step %llu kept from the last stop",
			w.v[i].job, (unsigned long long)w.v[i].step);
}

struct live_load {
	struct zs_kv_txn *t;
	const char *job;
};

static enum zs_status load(void *ctx, const struct engine_snap *want, float *master, float *s0,
			   float *s1, uint64_t *step, struct zs_error *err)
{
	struct live_load *x = ctx;
	uint64_t other;
	enum zs_status st = ckpt_get(x->t, KV_LIVE, x->job, LIVE_ID, want->unit, want->index,
				     CKPT_MASTER, step, master, want->length, err);
	if (!st && s0)
		st = ckpt_get(x->t, KV_LIVE, x->job, LIVE_ID, want->unit, want->index, CKPT_STATE0,
			      &other, s0, want->length, err);
	if (!st && s1)
		st = ckpt_get(x->t, KV_LIVE, x->job, LIVE_ID, want->unit, want->index, CKPT_STATE1,
			      &other, s1, want->length, err);
	return st;
}

void srvd_live_load(struct srvd *d)
{
	struct zs_error err = {0};
	struct zs_kv_txn *t;

	if (!d->me.n_live)
		return;
	if (!zs_kv_begin(d->kv, false, &t, &err)) {
		for (uint32_t i = 0; i < d->me.n_live; i++) {
			const struct zs_live_claim *c = &d->me.live[i];
			struct live_load x = {t, c->job};
			uint64_t step;
			if (!engine_has_job(d->engine, c->job, c->epoch, c->incarnation)) {
				zs_info("job '%s': its kept state is not this server's any more (the job changed or moved)",
					c->job);
				continue;
			}
			if (engine_restore(d->engine, c->job, load, &x, false, 0, &step, &err))
				zs_error("job '%s': cannot load its kept state: %s", c->job,
					 err.msg);
			else
				zs_info("job '%s': live state of step %llu loaded", c->job,
					(unsigned long long)step);
		}
		zs_kv_abort(t);
	} else {
		zs_error("cannot read live state: %s", err.msg);
	}
	/* gone once loaded (or found stale): a later crash must not bring
	 * back a step the job has left */
	if (zs_kv_begin(d->kv, true, &t, &err)) {
		zs_error("cannot drop kept live state: %s", err.msg);
		return;
	}
	for (uint32_t i = 0; i < d->me.n_live && !err.code; i++) {
		char k[ZS_JOB_NAME_MAX + 8];
		if (!ckpt_delete(t, KV_LIVE, d->me.live[i].job, LIVE_ID, &err))
			zs_kv_del(t, KV_META, k, marker_key(k, sizeof k, d->me.live[i].job), NULL);
	}
	if (err.code)
		zs_kv_abort(t);
	if (err.code || zs_kv_commit(t, &err))
		zs_error("cannot drop kept live state: %s", err.msg);
	d->me.n_live = 0;
}
