/*
 * store.c - where the catalog's records live: LMDB under the data dir (one
 * coordinator), or etcd (several, one leading: see lead.c). catalog.c
 * writes through a batch that commits as one LMDB transaction or one etcd
 * transaction; in etcd the transaction carries the leader's fence (the
 * create revision of the election key), so a coordinator that lost the
 * lead cannot write, whatever it still believes.
 *
 * etcd keys: PREFIX/catalog/TABLE/KEY, the key's bytes as in LMDB.
 */
#include "coord/catalog.h"

#include "ctrl/etcd.h"

#define MAX_OPS 4

struct cstore_txn {
	struct coord *c;
	struct zs_kv_txn *kv; /* LMDB */
	/* etcd: the writes, keys and values copied */
	struct zs_etcd_op ops[MAX_OPS];
	uint8_t *bufs[2 * MAX_OPS];
	size_t n_ops, n_bufs;
};

/* PREFIX/catalog/TABLE/ + key into a malloc'd buffer (NULL: no memory). */
static uint8_t *etcd_key(const struct coord *c, unsigned table, const void *key, size_t kl,
			 size_t *out_len)
{
	char head[256];
	int hn = snprintf(head, sizeof head, "%s/catalog/%s/", c->ha.prefix, tables[table]);
	uint8_t *k = malloc((size_t)hn + kl + 1);

	if (!k)
		return NULL;
	memcpy(k, head, (size_t)hn);
	if (kl)
		memcpy(k + hn, key, kl);
	*out_len = (size_t)hn + kl;
	return k;
}

enum zs_status cstore_begin(struct coord *c, struct cstore_txn **out, struct zs_error *err)
{
	struct cstore_txn *t = calloc(1, sizeof *t);
	enum zs_status st;

	if (!t)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	t->c = c;
	if (!c->ha.etcd && (st = zs_kv_begin(c->kv, true, &t->kv, err))) {
		free(t);
		return st;
	}
	*out = t;
	return ZS_OK;
}

void cstore_abort(struct cstore_txn *t)
{
	if (!t)
		return;
	zs_kv_abort(t->kv);
	for (size_t i = 0; i < t->n_bufs; i++)
		free(t->bufs[i]);
	free(t);
}

/* An etcd write of kind on table/key (value val for a put). */
static enum zs_status add_op(struct cstore_txn *t, enum zs_etcd_op_kind kind, unsigned table,
			     const void *key, size_t kl, const void *val, size_t vl,
			     struct zs_error *err)
{
	struct zs_etcd_op *o = &t->ops[t->n_ops];
	uint8_t *k, *v = NULL;
	size_t klen;

	if (t->n_ops == MAX_OPS)
		return zs_fail(err, ZS_EINTERNAL, "too many writes in one catalog change");
	if (!(k = etcd_key(t->c, table, key, kl, &klen)) ||
	    (kind == ZS_ETCD_PUT && !(v = malloc(vl ? vl : 1)))) {
		free(k);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	if (v && vl)
		memcpy(v, val, vl);
	t->bufs[t->n_bufs++] = k;
	if (v)
		t->bufs[t->n_bufs++] = v;
	*o = (struct zs_etcd_op){.kind = kind, .key = k, .klen = klen, .val = v, .vlen = vl};
	t->n_ops++;
	return ZS_OK;
}

enum zs_status cstore_put(struct cstore_txn *t, unsigned table, const void *key, size_t kl,
			  const void *val, size_t vl, struct zs_error *err)
{
	if (t->kv)
		return zs_kv_put(t->kv, table, key, kl, val, vl, err);
	return add_op(t, ZS_ETCD_PUT, table, key, kl, val, vl, err);
}

/* An absent key is fine (etcd does not say; LMDB's ZS_ENOTFOUND is dropped). */
enum zs_status cstore_del(struct cstore_txn *t, unsigned table, const void *key, size_t kl,
			  struct zs_error *err)
{
	enum zs_status st;

	if (!t->kv)
		return add_op(t, ZS_ETCD_DEL, table, key, kl, NULL, 0, err);
	st = zs_kv_del(t->kv, table, key, kl, err);
	return st == ZS_ENOTFOUND ? ZS_OK : st;
}

enum zs_status cstore_del_prefix(struct cstore_txn *t, unsigned table, const void *prefix,
				 size_t pl, struct zs_error *err)
{
	if (t->kv)
		return zs_kv_del_prefix(t->kv, table, prefix, pl, err);
	return add_op(t, ZS_ETCD_DEL_PREFIX, table, prefix, pl, NULL, 0, err);
}

enum zs_status cstore_commit(struct cstore_txn *t, struct zs_error *err)
{
	struct coord *c = t->c;
	enum zs_status st;

	if (t->kv) {
		st = zs_kv_commit(t->kv, err);
		t->kv = NULL;
	} else {
		st = zs_etcd_txn(c->ha.etcd, c->ha.key, strlen(c->ha.key), c->ha.fence, t->ops,
				 t->n_ops, err);
		if (st == ZS_ESTATE && c->ha.fenced) /* another leads: stop acting as leader now */
			c->ha.fenced(c, err->msg);
	}
	cstore_abort(t);
	return st;
}

struct etcd_visit {
	size_t head;
	zs_kv_visit fn;
	void *ctx;
	enum zs_status failed; /* what the visitor said */
};

static enum zs_status visit_etcd(void *ctx, const uint8_t *key, size_t klen, const uint8_t *val,
				 size_t vlen)
{
	struct etcd_visit *v = ctx;
	if (klen < v->head)
		return v->failed = ZS_EIO;
	return v->failed = v->fn(v->ctx, key + v->head, klen - v->head, val, vlen);
}

enum zs_status cstore_read_begin(struct coord *c, struct cstore_read *r, struct zs_error *err)
{
	r->kv = NULL;
	r->rev = 0;
	return c->ha.etcd ? ZS_OK : zs_kv_begin(c->kv, false, &r->kv, err);
}

enum zs_status cstore_foreach(struct coord *c, struct cstore_read *r, unsigned table,
			      zs_kv_visit fn, void *ctx, struct zs_error *err)
{
	struct etcd_visit v = {.fn = fn, .ctx = ctx};
	uint8_t *prefix;
	enum zs_status st;

	if (!c->ha.etcd)
		return zs_kv_foreach(r->kv, table, fn, ctx, err);
	if (!(prefix = etcd_key(c, table, NULL, 0, &v.head)))
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	/* the first table read fixes the revision the others are read at */
	st = zs_etcd_range_prefix(c->ha.etcd, prefix, v.head, &r->rev, visit_etcd, &v, err);
	free(prefix);
	if (st && v.failed)
		zs_fail(err, st, "reading %s from etcd: a stored record is unreadable",
			tables[table]);
	return st;
}

void cstore_read_end(struct cstore_read *r)
{
	zs_kv_abort(r->kv);
	r->kv = NULL;
}
