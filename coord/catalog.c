/*
 * catalog.c - the coordinator's LMDB catalog: each record written in one
 * transaction before memory changes, and everything read back at start.
 */
#include "coord/state.h"

static void id_key(uint64_t id, uint8_t k[8])
{
	for (int i = 0; i < 8; i++)
		k[i] = (uint8_t)(id >> (56 - 8 * i));
}

static enum zs_status put_u64(struct zs_kv_txn *t, const char *key, uint64_t v,
			      struct zs_error *err)
{
	uint8_t b[8];
	zs_kv_u64_enc(v, b);
	return zs_kv_put(t, T_META, key, strlen(key), b, 8, err);
}

static uint64_t get_u64(struct zs_kv_txn *t, const char *key, uint64_t def)
{
	const void *v;
	size_t vl;

	if (!zs_kv_get(t, T_META, key, strlen(key), &v, &vl, NULL) && vl == 8)
		return zs_kv_u64_dec(v);
	return def;
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
	struct zs_kv_txn *t;
	enum zs_status st = zs_kv_begin(c->kv, true, &t, err);

	if (st)
		return st;
	st = b ? zs_kv_put(t, table, key, kl, b->data, b->len, err)
	       : zs_kv_del(t, table, key, kl, err);
	if (!st && counter)
		st = put_u64(t, counter, value, err);
	if (st) {
		zs_kv_abort(t);
		return st;
	}
	return zs_kv_commit(t, err);
}

/*
 * Commits a job record (or its deletion when del) and, when bump, the next
 * assignment generation, in one transaction.
 */
enum zs_status coord_save_job(struct coord *c, const struct zs_job *j, bool del,
			       bool bump, struct zs_error *err)
{
	struct zs_buf b = {0};
	const char *name = j->spec.name;
	enum zs_status st;

	if (!del && zs_enc_job(j, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode job record");
	st = commit_record(c, T_JOBS, name, strlen(name), del ? NULL : &b,
			   bump ? "assign_gen" : NULL, c->assign_gen + 1, err);
	if (!st && bump)
		c->assign_gen++;
	zs_buf_release(&b);
	return st;
}

enum zs_status coord_save_job_reply(struct coord *c, const struct zs_job *j,
				     struct zs_rpc_call *call, struct zs_error *err)
{
	struct zs_buf b = {0};
	const char *name = j->spec.name;
	enum zs_status st;

	if (zs_enc_job(j, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode job record");
	st = commit_record(c, T_JOBS, name, strlen(name), &b, NULL, 0, err);
	if (!st)
		zs_rpc_reply(call, b.data, b.len);
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
	for (size_t i = 0; i < c->n_ckpts; i++)
		if (c->ckpts[i].id == id && !strcmp(c->ckpts[i].job, job))
			return &c->ckpts[i];
	return NULL;
}

/* Commits a checkpoint record (or its deletion) with the id counter. */
enum zs_status coord_save_ckpt(struct coord *c, const struct zs_checkpoint *k, bool del,
				struct zs_error *err)
{
	struct zs_buf b = {0};
	uint8_t key[ZS_JOB_NAME_MAX + 9];
	size_t kl = ckpt_key(k->job, k->id, key);
	enum zs_status st;

	if (!del && zs_enc_checkpoint(k, &b))
		return zs_fail(err, ZS_ENOMEM, "cannot encode a checkpoint record");
	st = commit_record(c, T_CKPTS, key, kl, del ? NULL : &b, "next_ckpt_id",
			   c->next_ckpt_id, err);
	zs_buf_release(&b);
	return st;
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

static enum zs_status load_ckpt(void *ctx, const void *k, size_t kl, const void *v,
				size_t vl)
{
	struct coord *c = ctx;
	struct zs_checkpoint *g = grow(c->ckpts, c->n_ckpts, sizeof *g, (void **)&c->ckpts);

	(void)k;
	(void)kl;
	if (!g)
		return ZS_ENOMEM;
	if (zs_dec_checkpoint(v, vl, g, NULL))
		return ZS_EIO;
	c->n_ckpts++;
	return ZS_OK;
}

static int cmp_ckpt(const void *a, const void *b)
{
	const struct zs_checkpoint *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

enum zs_status coord_load(struct coord *c, struct zs_error *err)
{
	struct zs_kv_txn *t;
	enum zs_status st = zs_kv_begin(c->kv, false, &t, err);

	if (st)
		return st;
	c->next_server_id = get_u64(t, "next_server_id", 1);
	c->assign_gen = get_u64(t, "assign_gen", 0);
	c->next_ckpt_id = get_u64(t, "next_ckpt_id", 1);
	st = zs_kv_foreach(t, T_SERVERS, load_server, c, err);
	if (!st)
		st = zs_kv_foreach(t, T_JOBS, load_job, c, err);
	if (!st)
		st = zs_kv_foreach(t, T_CKPTS, load_ckpt, c, err);
	zs_kv_abort(t);
	if (st)
		return st;
	if (c->n_ckpts)
		qsort(c->ckpts, c->n_ckpts, sizeof *c->ckpts, cmp_ckpt);
	/* a restore that was in flight when we stopped: ask the servers again */
	for (size_t i = 0; i < c->n_jobs; i++) {
		struct zs_checkpoint *k = coord_find_ckpt(c, c->jobs[i].spec.name,
						    c->jobs[i].restore_pending);
		bool reset = c->jobs[i].restore_pending == ZS_CKPT_RESET;
		if ((reset || (c->jobs[i].restore_pending && k)) &&
		    coord_add_ctask(c, &c->jobs[i], ZS_TASK_RESTORE, c->jobs[i].restore_pending,
				    reset ? 0 : k->step))
			return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	return ZS_OK;
}

void coord_free_state(struct coord *c)
{
	for (size_t i = 0; i < c->n_jobs; i++)
		zs_job_release(&c->jobs[i]);
	free(c->jobs);
	free(c->srvs);
	for (size_t i = 0; i < c->n_ckpts; i++)
		zs_checkpoint_release(&c->ckpts[i]);
	free(c->ckpts);
	while (c->ctasks) {
		struct ctask *t = c->ctasks;
		c->ctasks = t->next;
		coord_ctask_free(t);
	}
}
