/*
 * catalog.c - the coordinator's catalog: each record written in one
 * transaction (LMDB or etcd: store.c) before memory changes, and
 * everything read back at start, or when a coordinator takes the lead.
 */
#include "coord/catalog.h"
#include "coord/lookup.h"

#include <string.h>

#include "ctrl/seal.h"

static void id_key(uint64_t id, uint8_t k[8])
{
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(id >> (56 - 8 * i));
}

static enum zs_status put_u64(struct cstore_txn *t, const char *key, uint64_t v,
			      struct zs_error *err)
{
	uint8_t b[8];
	zs_kv_u64_enc(v, b);
	return cstore_put(t, T_META, key, strlen(key), b, 8, err);
}

/* The meta counters, as read at start (absent: their first values). */
static enum zs_status load_meta(void *ctx, const void *k, size_t kl, const void *v, size_t vl)
{
	struct coord *c = ctx;
	static const char *const names[] = {"next_server_id", "assign_gen", "next_ckpt_id"};
	uint64_t *dst[] = {&c->next_server_id, &c->assign_gen, &c->ck.next_id};

	for (size_t i = 0; i < 3; i++)
		if (kl == strlen(names[i]) && !memcmp(k, names[i], kl) && vl == 8)
			*dst[i] = zs_kv_u64_dec(v);
	return ZS_OK;
}

/*
 * The one way a record changes: b put under key in table (or, with b NULL,
 * the key deleted) and, when counter names one, that meta counter set to
 * value, in one transaction.
 */
static enum zs_status commit_record(struct coord *c, unsigned table, const void *key, size_t kl,
				    const struct zs_buf *b, const char *counter, uint64_t value,
				    struct zs_error *err)
{
	struct cstore_txn *t;
	enum zs_status st = cstore_begin(c, &t, err);

	if (st)
		return st;
	st = b ? cstore_put(t, table, key, kl, b->data, b->len, err)
	       : cstore_del(t, table, key, kl, err);
	if (!st && counter)
		st = put_u64(t, counter, value, err);
	if (st) {
		cstore_abort(t);
		return st;
	}
	return cstore_commit(t, err);
}

/* What a job's sealed token is bound to: its name and incarnation. */
static size_t seal_aad(const struct zs_job *j, uint8_t *aad)
{
	size_t n = strlen(j->spec.name) + 1;

	memcpy(aad, j->spec.name, n);
	for (int i = 0; i < 8; i++)
		aad[n + (size_t)i] = (uint8_t)(j->incarnation >> (8 * i));
	return n + 8;
}

/* j's record as the catalog keeps it (b): its token sealed (c->seal). */
static enum zs_status enc_stored(struct coord *c, const struct zs_job *j, struct zs_buf *b,
				 struct zs_error *err)
{
	uint8_t aad[ZS_JOB_NAME_MAX + 8];
	struct zs_job *v;
	size_t n = strlen(j->token);
	enum zs_status st = ZS_OK;

	if (!c->seal.on || !n)
		return coord_enc_record(j, b) ? zs_fail(err, ZS_ENOMEM, "cannot encode job record")
					      : ZS_OK;
	if (!(v = malloc(sizeof *v)))
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	*v = *j;
	if (!(st = zs_seal(c->seal.key, aad, seal_aad(j, aad), j->token, n, v->token_sealed,
			   err))) {
		v->token_sealed_len = (uint32_t)(n + ZS_SEAL_OVERHEAD);
		v->token[0] = '\0';
		if (coord_enc_record(v, b))
			st = zs_fail(err, ZS_ENOMEM, "cannot encode job record");
	}
	explicit_bzero(v, sizeof *v);
	free(v);
	return st;
}

/* Opens j's sealed token (as loaded) into j->token. */
static enum zs_status unseal_token(struct coord *c, struct zs_job *j, struct zs_error *err)
{
	uint8_t aad[ZS_JOB_NAME_MAX + 8];
	size_t n = j->token_sealed_len;
	enum zs_status st;

	if (!c->seal.on)
		return zs_fail(err, ZS_EINVAL,
			       "job '%s': its data-plane token is sealed in the catalog, and this coordinator has no secret key: give it --secret-key FILE, the key it was sealed with",
			       j->spec.name);
	if (n <= ZS_SEAL_OVERHEAD || n - ZS_SEAL_OVERHEAD >= sizeof j->token)
		return zs_fail(err, ZS_EIO, "job '%s': a sealed token of %zu bytes (damaged record)",
			       j->spec.name, n);
	if ((st = zs_unseal(c->seal.key, aad, seal_aad(j, aad), j->token_sealed, n, j->token, err)))
		return zs_fail(err, ZS_EINVAL,
			       "job '%s': its sealed data-plane token does not open with the secret key %s (sealed with another key, or the record was altered or is another job's): the key it was sealed with is needed",
			       j->spec.name, c->seal.path);
	j->token[n - ZS_SEAL_OVERHEAD] = '\0';
	memset(j->token_sealed, 0, sizeof j->token_sealed);
	j->token_sealed_len = 0;
	return ZS_OK;
}

enum zs_status coord_save_job(struct coord *c, const struct zs_job *j, bool del,
			       bool bump, struct zs_error *err)
{
	struct zs_buf b = {0}, sb = {0};
	const char *name = j->spec.name;
	size_t nl = strlen(name);
	struct cstore_txn *t;
	enum zs_status st;

	/* b: what joins are answered with; sb: what the catalog keeps */
	if (!del && coord_enc_record(j, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode job record");
	if (!del && (st = enc_stored(c, j, &sb, err))) {
		zs_buf_release(&b);
		return st;
	}
	if ((st = cstore_begin(c, &t, err))) {
		zs_buf_release(&b);
		zs_buf_release(&sb);
		return st;
	}
	if (del) { /* the job and its trainers' records, at once */
		st = cstore_del(t, T_JOBS, name, nl, err);
		if (!st)
			st = cstore_del_prefix(t, T_MEMBERS, name, nl + 1, err);
	} else {
		st = cstore_put(t, T_JOBS, name, nl, sb.data, sb.len, err);
	}
	zs_buf_release(&sb);
	if (!st && bump)
		st = put_u64(t, "assign_gen", c->assign_gen + 1, err);
	if (st)
		cstore_abort(t);
	else
		st = cstore_commit(t, err);
	if (!st && bump)
		c->assign_gen++;
	if (!st) /* what joins are answered with from now on */
		coord_record_set(c, name, del ? NULL : &b);
	zs_buf_release(&b);
	return st;
}

/* A trainer's key: the job's name, NUL, the rank big endian. */
static size_t member_key(const char *job, uint32_t rank, uint8_t *k)
{
	size_t n = strlen(job);
	memcpy(k, job, n + 1);
	for (int i = 0; i < 4; i++)
		k[n + 1 + i] = (uint8_t)(rank >> (24 - 8 * i));
	return n + 5;
}

enum zs_status coord_save_member(struct coord *c, const struct zs_job *j,
				  const struct zs_member *m, bool del, struct zs_error *err)
{
	uint8_t k[ZS_JOB_NAME_MAX + 5];
	size_t kl = member_key(j->spec.name, m->rank, k);
	struct zs_buf b = {0};
	enum zs_status st;

	if (del) /* an absent record is fine (one of before members had their own) */
		return commit_record(c, T_MEMBERS, k, kl, NULL, NULL, 0, err);
	if (zs_enc_member(m, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode a trainer's record");
	st = commit_record(c, T_MEMBERS, k, kl, &b, NULL, 0, err);
	zs_buf_release(&b);
	return st;
}

enum zs_status coord_save_server(struct coord *c, const struct zs_server_info *s,
				  uint64_t next_id, struct zs_error *err)
{
	struct zs_server_info rec = *s;
	struct zs_buf b;
	uint8_t k[8];
	enum zs_status st;

	/* liveness is not persisted */
	rec.up = false;
	rec.used = 0;
	rec.last_seen_ms = 0;
	if (zs_enc_server_info(&rec, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode server record");
	id_key(s->id, k);
	st = commit_record(c, T_SERVERS, k, 8, &b, "next_server_id", next_id, err);
	zs_buf_release(&b);
	return st;
}

enum zs_status coord_delete_server(struct coord *c, uint64_t id, struct zs_error *err)
{
	uint8_t k[8];

	id_key(id, k);
	return commit_record(c, T_SERVERS, k, 8, NULL, NULL, 0, err);
}

static size_t ckpt_key(const char *job, uint64_t id, uint8_t *k)
{
	size_t n = strlen(job);
	memcpy(k, job, n);
	k[n++] = 0;
	for (int i = 0; i < 8; i++)
		k[n++] = (uint8_t)(id >> (56 - 8 * i));
	return n;
}

struct zs_checkpoint *coord_find_ckpt(struct coord *c, const char *job, uint64_t id)
{
	for (size_t i = 0; i < c->ck.n; i++)
		if (c->ck.list[i].id == id && !strcmp(c->ck.list[i].job, job))
			return &c->ck.list[i];
	return NULL;
}

/* Commits a checkpoint record (or its deletion) with the id counter. */
/* The record's bytes: the checkpoint without its placement and blobs. */
static enum zs_status enc_ckpt_core(const struct zs_checkpoint *k, struct zs_buf *b)
{
	struct zs_checkpoint v = *k;
	v.placement = (struct zs_placement){0};
	v.blobs = NULL;
	v.n_blobs = 0;
	return zs_enc_checkpoint(&v, b);
}

enum zs_status coord_enc_ckpt_brief(const struct zs_checkpoint *k, struct zs_buf *b)
{
	struct zs_checkpoint v = *k;
	v.placement = (struct zs_placement){0};
	return zs_enc_checkpoint(&v, b);
}

static size_t blob_key(const uint8_t *ck, size_t kl, uint32_t rank, uint8_t *k)
{
	memcpy(k, ck, kl);
	for (int i = 0; i < 4; i++)
		k[kl + (size_t)i] = (uint8_t)(rank >> (24 - 8 * i));
	return kl + 4;
}

/* Puts k's record, and with whole its placement and every blob too. */
static enum zs_status put_ckpt(struct cstore_txn *t, const struct zs_checkpoint *k, bool whole,
			       struct zs_error *err)
{
	struct zs_buf b = {0};
	uint8_t key[ZS_JOB_NAME_MAX + 9], bk[ZS_JOB_NAME_MAX + 13];
	size_t kl = ckpt_key(k->job, k->id, key);
	enum zs_status st;

	if (enc_ckpt_core(k, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode a checkpoint record");
	st = cstore_put(t, T_CKPTS, key, kl, b.data, b.len, err);
	zs_buf_release(&b);
	if (st || !whole)
		return st;
	if (k->placement.n_shards) {
		struct zs_checkpoint p = {.id = k->id, .placement = k->placement};
		snprintf(p.job, sizeof p.job, "%s", k->job);
		if (zs_enc_checkpoint(&p, &b))
			return zs_fail(err, ZS_ENOMEM, "cannot encode a checkpoint's placement");
		st = cstore_put(t, T_CKPLACE, key, kl, b.data, b.len, err);
		zs_buf_release(&b);
	}
	for (uint32_t i = 0; !st && i < k->n_blobs; i++)
		st = cstore_put(t, T_CKBLOBS, bk, blob_key(key, kl, k->blobs[i].rank, bk),
				k->blobs[i].data, k->blobs[i].len, err);
	return st;
}

static enum zs_status save_ckpt(struct coord *c, const struct zs_checkpoint *k, bool del,
				bool whole, struct zs_error *err)
{
	uint8_t key[ZS_JOB_NAME_MAX + 9];
	size_t kl = ckpt_key(k->job, k->id, key);
	struct cstore_txn *t;
	enum zs_status st = cstore_begin(c, &t, err);

	if (st)
		return st;
	if (del) {
		st = cstore_del(t, T_CKPTS, key, kl, err);
		if (!st)
			st = cstore_del(t, T_CKPLACE, key, kl, err);
		if (!st)
			st = cstore_del_prefix(t, T_CKBLOBS, key, kl, err);
	} else {
		st = put_ckpt(t, k, whole, err);
	}
	if (!st)
		st = put_u64(t, "next_ckpt_id", c->ck.next_id, err);
	if (st) {
		cstore_abort(t);
		return st;
	}
	return cstore_commit(t, err);
}

enum zs_status coord_save_ckpt(struct coord *c, const struct zs_checkpoint *k, bool del,
				struct zs_error *err)
{
	return save_ckpt(c, k, del, false, err);
}

enum zs_status coord_save_ckpt_new(struct coord *c, const struct zs_checkpoint *k,
				    struct zs_error *err)
{
	return save_ckpt(c, k, false, true, err);
}

enum zs_status coord_save_blob(struct coord *c, const struct zs_checkpoint *k,
			       const struct zs_blob *b, struct zs_error *err)
{
	uint8_t key[ZS_JOB_NAME_MAX + 9], bk[ZS_JOB_NAME_MAX + 13];
	size_t kl = ckpt_key(k->job, k->id, key);
	struct zs_buf v = {.data = b->data, .len = b->len};

	return commit_record(c, T_CKBLOBS, bk, blob_key(key, kl, b->rank, bk), &v, NULL, 0, err);
}

/* One more zeroed element at the end of *arr (n elements of size each);
 * NULL when out of memory (then *arr is unchanged). */
static void *grow(void *arr, size_t n, size_t size, void **out)
{
	uint8_t *g = realloc(arr, (n + 1) * size);

	if (!g)
		return NULL;
	memset(g + n * size, 0, size);
	*out = g;
	return g + n * size;
}

static enum zs_status load_server(void *ctx, const void *k, size_t kl, const void *v,
				  size_t vl)
{
	struct coord *c = ctx;
	struct srv *g = grow(c->srvs, c->n_srvs, sizeof *g, (void **)&c->srvs);

	(void)k;
	(void)kl;
	if (!g)
		return ZS_ENOMEM;
	if (zs_dec_server_info(v, vl, &g->info, NULL))
		return ZS_EIO;
	zs_mbr_loaded(&g->m); /* liveness is not persisted */
	c->n_srvs++;
	return ZS_OK;
}

static enum zs_status load_job(void *ctx, const void *k, size_t kl, const void *v,
			       size_t vl)
{
	struct coord *c = ctx;
	struct zs_job *g = grow(c->jobs, c->n_jobs, sizeof *g, (void **)&c->jobs);

	(void)k;
	(void)kl;
	if (!g)
		return ZS_ENOMEM;
	if (zs_dec_job(v, vl, g, NULL))
		return ZS_EIO;
	/* derived fields (offsets, numel) are not stored */
	if (zs_layout_validate(&g->spec.layout, NULL)) {
		zs_job_release(g);
		return ZS_EIO;
	}
	c->n_jobs++;
	return ZS_OK;
}

/* A trainer's record: onto its job's list (sorted once all are in); one
 * of a job that is gone (a delete cut short) is left alone. */
static enum zs_status load_member(void *ctx, const void *k, size_t kl, const void *v,
				  size_t vl)
{
	struct coord *c = ctx;
	const uint8_t *key = k;
	const uint8_t *nul = memchr(key, 0, kl);
	char name[ZS_JOB_NAME_MAX];
	struct zs_member m, *g;
	struct zs_job *j;

	if (!nul || (size_t)(nul - key) >= sizeof name || kl != (size_t)(nul - key) + 5)
		return ZS_EIO;
	memcpy(name, key, (size_t)(nul - key));
	name[nul - key] = '\0';
	if (zs_dec_member(v, vl, &m, NULL))
		return ZS_EIO;
	if (!(j = coord_find_job(c, name)))
		return ZS_OK;
	g = realloc(j->trainers, (j->n_trainers + 1) * sizeof *g);
	if (!g)
		return ZS_ENOMEM;
	j->trainers = g;
	j->trainers[j->n_trainers++] = m;
	return ZS_OK;
}

static int cmp_member(const void *a, const void *b)
{
	const struct zs_member *x = a, *y = b;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Checkpoint records as read: the ids of those written before placements
 * and blobs had records of their own (they hold them: moved out below). */
struct ckload {
	struct coord *c;
	uint64_t *legacy;
	size_t n_legacy;
};

static enum zs_status load_ckpt(void *ctx, const void *k, size_t kl, const void *v,
				size_t vl)
{
	struct ckload *x = ctx;
	struct coord *c = x->c;
	struct zs_checkpoint *g = grow(c->ck.list, c->ck.n, sizeof *g, (void **)&c->ck.list);

	(void)k;
	(void)kl;
	if (!g)
		return ZS_ENOMEM;
	if (zs_dec_checkpoint(v, vl, g, NULL))
		return ZS_EIO;
	c->ck.n++;
	if (g->placement.n_shards || g->n_blobs) {
		uint64_t *l = realloc(x->legacy, (x->n_legacy + 1) * sizeof *l);
		if (!l)
			return ZS_ENOMEM;
		x->legacy = l;
		x->legacy[x->n_legacy++] = g->id;
	}
	return ZS_OK;
}

static int cmp_ckpt(const void *a, const void *b)
{
	const struct zs_checkpoint *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

/* The checkpoint a ckplace or ckblobs key names (job, NUL, id, then rest
 * bytes), by binary search in the sorted catalog; NULL: none (a record
 * of a checkpoint gone, left by a delete cut short: ignored). */
static struct zs_checkpoint *ckpt_of_key(struct coord *c, const uint8_t *key, size_t kl,
					 size_t rest)
{
	const uint8_t *nul = memchr(key, 0, kl);
	uint64_t id = 0;
	size_t lo = 0, hi = c->ck.n;

	if (!nul || kl != (size_t)(nul - key) + 9 + rest)
		return NULL;
	for (int i = 0; i < 8; i++)
		id = id << 8 | nul[1 + i];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->ck.list[mid].id == id)
			return strlen(c->ck.list[mid].job) == (size_t)(nul - key) &&
					       !memcmp(c->ck.list[mid].job, key, (size_t)(nul - key))
				       ? &c->ck.list[mid]
				       : NULL;
		if (c->ck.list[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static enum zs_status load_ckplace(void *ctx, const void *k, size_t kl, const void *v,
				   size_t vl)
{
	struct coord *c = ctx;
	struct zs_checkpoint *g = ckpt_of_key(c, k, kl, 0), p;

	if (!g || g->placement.n_shards)
		return ZS_OK;
	if (zs_dec_checkpoint(v, vl, &p, NULL))
		return ZS_EIO;
	g->placement = p.placement;
	p.placement = (struct zs_placement){0};
	zs_checkpoint_release(&p);
	return ZS_OK;
}

static int cmp_blob(const void *a, const void *b)
{
	const struct zs_blob *x = a, *y = b;
	return (x->rank > y->rank) - (x->rank < y->rank);
}

static enum zs_status load_ckblob(void *ctx, const void *k, size_t kl, const void *v,
				  size_t vl)
{
	struct coord *c = ctx;
	const uint8_t *key = k;
	struct zs_checkpoint *g = ckpt_of_key(c, key, kl, 4);
	struct zs_blob *b;
	uint32_t rank = 0;

	if (!g)
		return ZS_OK;
	if (vl > ZS_BLOB_MAX)
		return ZS_EIO;
	for (int i = 0; i < 4; i++)
		rank = rank << 8 | key[kl - 4 + (size_t)i];
	for (uint32_t i = 0; i < g->n_blobs; i++)
		if (g->blobs[i].rank == rank)
			return ZS_OK; /* the record's own (not moved out yet) */
	b = grow(g->blobs, g->n_blobs, sizeof *b, (void **)&g->blobs);
	if (!b)
		return ZS_ENOMEM;
	b->rank = rank;
	b->len = (uint32_t)vl;
	b->data = malloc(vl ? vl : 1);
	if (!b->data)
		return ZS_ENOMEM;
	if (vl)
		memcpy(b->data, v, vl);
	g->n_blobs++;
	return ZS_OK;
}

/* Job j as loaded, brought up to date: one trainer record per rank
 * (legacy: its trainers were in its own record, moved out now), a
 * data-plane token and an incarnation when it predates them. */
static enum zs_status upgrade_job(struct coord *c, struct zs_job *j, bool legacy,
				  struct zs_error *err)
{
	uint32_t keep = 0;
	enum zs_status st = ZS_OK;

	if (j->n_trainers > 1)
		qsort(j->trainers, j->n_trainers, sizeof *j->trainers, cmp_member);
	for (uint32_t k = 0; k < j->n_trainers; k++) /* one per rank */
		if (!keep || j->trainers[keep - 1].rank != j->trainers[k].rank)
			j->trainers[keep++] = j->trainers[k];
	j->n_trainers = keep;
	for (uint32_t k = 0; !st && legacy && k < j->n_trainers; k++)
		st = coord_save_member(c, j, &j->trainers[k], false, err);
	/* a sealed token opens with the coordinator's key (or the start
	 * fails, saying so: a new token would shut its trainers out); one
	 * kept in the clear is sealed now */
	bool clear = j->token[0] && c->seal.on;
	if (j->token_sealed_len && (st = unseal_token(c, j, err)))
		return st;
	/* a record from before data-plane tokens gets one now; its
	 * trainers take it at their next join */
	bool untokened = !j->token[0];
	if (untokened)
		coord_new_token(j->token);
	/* and one from before incarnations gets one: its creation
	 * time, which its servers' kept live state names it by */
	bool unnamed = !j->incarnation;
	if (unnamed)
		j->incarnation = j->created_ms > 0 ? (uint64_t)j->created_ms
						   : coord_new_incarnation();
	if (!st && (legacy || untokened || unnamed || clear))
		st = coord_save_job(c, j, false, false, err);
	if (!st && clear) {
		zs_info("job '%s': its data-plane token is sealed in the catalog now (%s)",
			j->spec.name, c->seal.path);
		c->seal.resealed++;
	}
	return st;
}

enum zs_status coord_load(struct coord *c, struct zs_error *err)
{
	struct cstore_read t;
	enum zs_status st = cstore_read_begin(c, &t, err);

	if (st)
		return st;
	c->next_server_id = 1;
	c->assign_gen = 0;
	c->ck.next_id = 1;
	bool *legacy = NULL;

	st = cstore_foreach(c, &t, T_META, load_meta, c, err);
	if (!st)
		st = cstore_foreach(c, &t, T_SERVERS, load_server, c, err);
	if (!st)
		st = cstore_foreach(c, &t, T_JOBS, load_job, c, err);
	/* a record written before trainers had records of their own holds
	 * them: noted, and moved out below */
	if (!st && c->n_jobs && !(legacy = calloc(c->n_jobs, sizeof *legacy)))
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < c->n_jobs; i++)
		legacy[i] = c->jobs[i].n_trainers != 0;
	if (!st)
		st = cstore_foreach(c, &t, T_MEMBERS, load_member, c, err);
	struct ckload ck = {c, NULL, 0};
	if (!st)
		st = cstore_foreach(c, &t, T_CKPTS, load_ckpt, &ck, err);
	if (!st && c->ck.n)
		qsort(c->ck.list, c->ck.n, sizeof *c->ck.list, cmp_ckpt);
	if (!st)
		st = cstore_foreach(c, &t, T_CKPLACE, load_ckplace, c, err);
	if (!st)
		st = cstore_foreach(c, &t, T_CKBLOBS, load_ckblob, c, err);
	cstore_read_end(&t);
	for (size_t i = 0; i < c->ck.n; i++)
		if (c->ck.list[i].n_blobs > 1)
			qsort(c->ck.list[i].blobs, c->ck.list[i].n_blobs, sizeof *c->ck.list[i].blobs,
			      cmp_blob);
	/* records from before placements and blobs had their own: moved out */
	for (size_t i = 0; !st && i < ck.n_legacy; i++) {
		struct zs_checkpoint *k = NULL;
		for (size_t q = 0; !k && q < c->ck.n; q++)
			k = c->ck.list[q].id == ck.legacy[i] ? &c->ck.list[q] : NULL;
		if (k)
			st = coord_save_ckpt_new(c, k, err);
	}
	free(ck.legacy);
	for (size_t i = 0; !st && i < c->n_jobs; i++)
		st = upgrade_job(c, &c->jobs[i], legacy[i], err);
	free(legacy);
	if (st)
		return st;
	/* a checkpoint from before incarnations: the job of its name's when
	 * taken after that job was created (an earlier job's otherwise, which
	 * no job sees but by its id) */
	for (size_t i = 0; !st && i < c->ck.n; i++) {
		struct zs_checkpoint *k = &c->ck.list[i];
		const struct zs_job *j = coord_find_job(c, k->job);
		if (k->incarnation || !j || k->created_ms < j->created_ms)
			continue;
		k->incarnation = j->incarnation;
		k->layout_digest = zs_layout_digest(&j->spec.layout);
		st = coord_save_ckpt(c, k, false, err);
	}
	if (st)
		return st;
	/* a restore that was in flight when we stopped: ask the servers again */
	return st;
}

void coord_free_state(struct coord *c)
{
	coord_records_free(c);
	coord_jobsrv_free(c);
	for (size_t i = 0; i < c->n_jobs; i++)
		zs_job_release(&c->jobs[i]);
	free(c->jobs);
	free(c->srvs);
	for (size_t i = 0; i < c->ck.n; i++)
		zs_checkpoint_release(&c->ck.list[i]);
	free(c->ck.list);
	c->jobs = NULL, c->n_jobs = 0;
	c->srvs = NULL, c->n_srvs = 0;
	c->ck.list = NULL, c->ck.n = 0;
}
