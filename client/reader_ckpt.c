/*
 * reader_ckpt.c - a weight reader's versions that are committed
 * checkpoints (include/zshard_reader.h): listed and waited for at the
 * coordinator, pinned there (its registry keeps a checkpoint a reader pins
 * from retirement: coord/readers.c), and read from the records the job's
 * servers wrote of it (in their LMDB: no copy held in memory), wherever the
 * placement has moved since: each tensor assembled from the checkpoint's
 * own placement, a shard's part from its primary's server else from a
 * copy's, over the servers' ReadCheckpoint, every slice checked against
 * the CRC32C its server took; the f32 masters rounded to the unit's dtype
 * as the servers round them for trainers (the version's bits are a live
 * pin's of the same step).
 */
#include "client/reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/util.h"
#include "ctrl/codec.h"
#include "ctrl/coord_client.h"
#include "ctrl/rpc.h"

/* The job's committed checkpoints (*v malloc'd, by id), asked of c. */
static enum zs_status committed(zs_reader *r, struct zs_coord_client *c,
				struct zs_checkpoint **v, uint32_t *n, struct zs_error *err)
{
	struct zs_checkpoint *all = NULL;
	uint32_t na = 0;
	enum zs_status st = zs_coord_list_ckpts(c, r->job.spec.name, &all, &na, err);

	*v = NULL;
	*n = 0;
	if (st)
		return st;
	for (uint32_t i = 0; i < na; i++) {
		if (all[i].state == ZS_CKPT_COMMITTED && all[i].incarnation == r->job.incarnation)
			all[(*n)++] = all[i];
		else
			zs_checkpoint_release(&all[i]);
	}
	/* by id (insertion: a job keeps a few) */
	for (uint32_t i = 1; i < *n; i++)
		for (uint32_t k = i; k > 0 && all[k - 1].id > all[k].id; k--) {
			struct zs_checkpoint t = all[k];
			all[k] = all[k - 1];
			all[k - 1] = t;
		}
	*v = all;
	return ZS_OK;
}

static void free_list(struct zs_checkpoint *v, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		zs_checkpoint_release(&v[i]);
	free(v);
}

int zs_reader_checkpoints(zs_reader *r, unsigned long long *ids, unsigned long long *steps,
			  unsigned cap, unsigned *n)
{
	struct zs_error err = {0};
	struct zs_coord_client *c = NULL;
	struct zs_checkpoint *v;
	uint32_t nv;
	enum zs_status st = zs_coord_open(r->coord, r->timeout_ms, 0, &c, &err);

	if (!st)
		st = committed(r, c, &v, &nv, &err);
	zs_coord_close(c);

	for (uint32_t i = 0; !st && i < nv && i < cap; i++) {
		if (ids)
			ids[i] = v[i].id;
		if (steps)
			steps[i] = v[i].step;
	}
	if (!st && n)
		*n = nv;
	if (!st)
		free_list(v, nv);
	return rd_said(r, st, &err);
}

int zs_reader_wait_checkpoint(zs_reader *r, unsigned long long after, int timeout_ms,
			      unsigned long long *id, unsigned long long *step)
{
	struct zs_error err = {0};
	int bound = timeout_ms < 0 ? r->timeout_ms : timeout_ms;
	int64_t deadline = zs_now_ms() + bound;
	struct zs_coord_client *c = NULL;
	enum zs_status st = zs_coord_open(r->coord, r->timeout_ms, 0, &c, &err);

	/* the catalog asked every 100 ms (a commit is a few a job's run) */
	while (!st) {
		struct zs_checkpoint *v;
		uint32_t nv;
		if ((st = committed(r, c, &v, &nv, &err)))
			break;
		bool found = nv && v[nv - 1].id > after;
		if (found) {
			*id = v[nv - 1].id;
			*step = v[nv - 1].step;
		}
		free_list(v, nv);
		if (found)
			break;
		if (zs_now_ms() >= deadline) {
			st = zs_fail(&err, ZS_ETIMEDOUT,
				     "job '%s' committed no checkpoint after %llu within %d ms",
				     r->job.spec.name, after, bound);
			break;
		}
		zs_sleep_ms(100, NULL);
	}
	zs_coord_close(c);
	return rd_said(r, st, &err);
}

void rd_ckpt_free(struct rd_ckpt *c)
{
	zs_checkpoint_release(&c->k);
	for (uint32_t i = 0; c->rc && i < c->n_srv; i++)
		zs_rpc_client_free(c->rc[i]);
	free(c->rc);
	free(c->srv);
	memset(c, 0, sizeof *c);
}

/* Checkpoint id as it is now (committed, this job's, of its layout) with
 * the servers' addresses, into *ck. */
static enum zs_status load(zs_reader *r, uint64_t id, struct rd_ckpt *ck, struct zs_error *err)
{
	const struct zs_checkpoint *k = &ck->k;
	struct zs_coord_client *c = NULL;
	enum zs_status st = zs_coord_open(r->coord, r->timeout_ms, 0, &c, err);

	if (!st)
		st = zs_coord_get_ckpt(c, r->job.spec.name, id, &ck->k, err);
	if (!st)
		st = zs_coord_servers(c, &ck->srv, &ck->n_srv, err);
	zs_coord_close(c);
	if (!st && !(ck->rc = calloc(ck->n_srv + 1, sizeof *ck->rc)))
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	if (st)
		return st;
	if (k->incarnation != r->job.incarnation)
		return zs_fail(err, ZS_ENOTFOUND,
			       "checkpoint %llu is an earlier job's of the name '%s', not this one's",
			       (unsigned long long)id, r->job.spec.name);
	if (k->state != ZS_CKPT_COMMITTED)
		return zs_fail(err, ZS_ESTATE, "checkpoint %llu of job '%s' is %s, not committed",
			       (unsigned long long)id, r->job.spec.name,
			       zs_ckpt_state_name(k->state));
	if (k->layout_digest != zs_layout_digest(&r->job.spec.layout))
		return zs_fail(err, ZS_ESTATE,
			       "checkpoint %llu of job '%s' was taken on another layout (digest %016llx, the job's %016llx)",
			       (unsigned long long)id, r->job.spec.name,
			       (unsigned long long)k->layout_digest,
			       (unsigned long long)zs_layout_digest(&r->job.spec.layout));
	if (!k->placement.n_shards)
		return zs_fail(err, ZS_ESTATE,
			       "checkpoint %llu of job '%s' does not say where its records are (a catalog record from before placements were kept)",
			       (unsigned long long)id, r->job.spec.name);
	return ZS_OK;
}

int zs_reader_pin_checkpoint(zs_reader *r, unsigned long long id, unsigned long long *step)
{
	struct zs_error err = {0};
	uint64_t v = ZS_VERSION_CKPT | id;
	enum zs_status st = ZS_OK;

	if (!id || (id & ZS_VERSION_CKPT))
		return rd_said(r, zs_fail(&err, ZS_EINVAL, "%llu is not a checkpoint id", id), &err);
	if (r->have_pin && r->pin == v) {
		if (step)
			*step = r->ck.k.step;
		return ZS_OK;
	}
	/* the one pinned before is let go once the new one holds */
	struct rd_ckpt was_ck = r->ck;
	bool had = r->have_pin;
	uint64_t was = r->pin;
	memset(&r->ck, 0, sizeof r->ck);
	st = load(r, id, &r->ck, &err);
	if (!st) {
		/* held at the coordinator: retirement passes it by from now */
		r->have_pin = true;
		r->pin = v;
		st = rd_tree_pinned(r, &err);
	}
	if (st) {
		rd_ckpt_free(&r->ck);
		r->ck = was_ck;
		r->have_pin = had;
		r->pin = was;
		rd_tree_pinned(r, NULL);
		return rd_said(r, st, &err);
	}
	/* the version before: a live step's pins released on the servers,
	 * a checkpoint's state freed */
	if (had && !(was & ZS_VERSION_CKPT))
		rd_release_step(r, was);
	rd_ckpt_free(&was_ck);
	if (step)
		*step = r->ck.k.step;
	return ZS_OK;
}

/* The channel to server sid (opened at its first read). */
static enum zs_status channel(zs_reader *r, uint64_t sid, struct zs_rpc_client **out,
			      struct zs_error *err)
{
	for (uint32_t i = 0; i < r->ck.n_srv; i++) {
		if (r->ck.srv[i].id != sid)
			continue;
		if (!r->ck.rc[i]) {
			enum zs_status st = zs_rpc_client_open(r->ck.srv[i].addr, &r->ck.rc[i], err);
			if (st)
				return st;
		}
		*out = r->ck.rc[i];
		return ZS_OK;
	}
	return zs_fail(err, ZS_EUNAVAIL, "server %llu is not registered", (unsigned long long)sid);
}

/* Elements [lo, hi) of unit u as old shard k of the checkpoint holds them
 * (k the primary; its copies after it each wrote the records too) into
 * out: from the first of them that answers. */
static enum zs_status read_old(zs_reader *r, uint32_t k, uint64_t lo, uint64_t hi, float *out,
			       struct zs_error *err)
{
	const struct zs_placement *pl = &r->ck.k.placement;
	const struct zs_shard *os = &pl->shards[k];
	enum zs_status st = ZS_ENOTFOUND;

	for (uint32_t c = k; st && c < pl->n_shards && pl->shards[c].unit == os->unit &&
			     pl->shards[c].index == os->index;
	     c++) {
		const struct zs_shard *cs = &pl->shards[c];
		struct zs_read_ckpt q = {.id = r->ck.k.id, .unit = cs->unit, .index = cs->index,
					 .offset = lo - cs->offset, .length = hi - lo};
		struct zs_rpc_client *rc = NULL;
		uint64_t step = 0;
		snprintf(q.job, sizeof q.job, "%s", r->job.spec.name);
		if (!(st = channel(r, cs->server_id, &rc, err)))
			st = zs_server_read_ckpt_on(rc, r->timeout_ms, &q, out, &step, err);
		if (!st && step != r->ck.k.step)
			st = zs_fail(err, ZS_EIO, "a record of step %llu in checkpoint %llu of step %llu",
				     (unsigned long long)step, (unsigned long long)r->ck.k.id,
				     (unsigned long long)r->ck.k.step);
		if (st)
			zs_error_prefix(err, "checkpoint %llu, unit %u shard %u on server %llu",
					(unsigned long long)r->ck.k.id, cs->unit, cs->index,
					(unsigned long long)cs->server_id);
	}
	return st;
}

enum zs_status rd_ckpt_read(zs_reader *r, uint32_t u, const struct zs_tensor *te, uint8_t *buf,
			    struct zs_error *err)
{
	const struct zs_placement *pl = &r->ck.k.placement;
	enum zs_dtype dt = r->job.spec.layout.units[u].dtype;
	uint64_t a0 = te->offset, a1 = te->offset + te->numel, covered = 0;
	float *f32 = dt == ZS_F32 ? (float *)buf : malloc(te->numel * 4 + 1);
	enum zs_status st = ZS_OK;

	if (!f32)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (uint32_t k = 0; !st && k < pl->n_shards; k++) {
		const struct zs_shard *os = &pl->shards[k];
		uint64_t lo = os->offset > a0 ? os->offset : a0;
		uint64_t hi = os->offset + os->length < a1 ? os->offset + os->length : a1;
		if (os->unit != u || os->copy || lo >= hi)
			continue;
		st = read_old(r, k, lo, hi, f32 + (lo - a0), err);
		covered += hi - lo;
	}
	if (!st && covered != te->numel)
		st = zs_fail(err, ZS_EIO, "checkpoint %llu's placement covers %llu of the %llu elements of tensor '%s'",
			     (unsigned long long)r->ck.k.id, (unsigned long long)covered,
			     (unsigned long long)te->numel, te->name);
	if (!st && dt != ZS_F32)
		zs_convert_from_f32(buf, dt, f32, te->numel);
	if (f32 != (float *)buf)
		free(f32);
	return st;
}
