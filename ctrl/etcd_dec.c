/*
 * etcd_dec.c - what etcd's answers mean to the coordinator (see
 * etcd_dec.h): each decoder takes the bytes of one answer, as they came
 * off the network, and gives its values or ZS_EPROTO, never more than the
 * message holds. Pure (no I/O), so that tests/fuzz/fuzz_etcd.c can feed
 * them anything.
 */
#include "ctrl/etcd_dec.h"

#include <stdlib.h>
#include <string.h>

#include "gen/etcd.pb-c.h"

#define UNPACK(T, lower, p, n, what, err)                                                 \
	T *r = etcdserverpb__##lower##__unpack(NULL, (n), (p));                           \
	if (!r)                                                                           \
		return zs_fail(err, ZS_EPROTO, "etcd sent a malformed " what " answer");

enum zs_status zs_etcd_dec_lease_grant(const uint8_t *p, size_t n, int64_t *id, int64_t *ttl,
				       struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	UNPACK(Etcdserverpb__LeaseGrantResponse, lease_grant_response, p, n, "lease grant", err);
	if (r->error && *r->error)
		st = zs_fail(err, ZS_EUNAVAIL, "etcd refused a lease: %.200s", r->error);
	else if (!r->id)
		st = zs_fail(err, ZS_EPROTO, "etcd granted lease 0");
	*id = r->id;
	*ttl = r->ttl;
	etcdserverpb__lease_grant_response__free_unpacked(r, NULL);
	return st;
}

enum zs_status zs_etcd_dec_keepalive(const uint8_t *p, size_t n, int64_t *ttl,
				     struct zs_error *err)
{
	if (!n) /* the stream ended without an answer */
		return zs_fail(err, ZS_EUNAVAIL, "etcd did not answer a lease renewal");
	UNPACK(Etcdserverpb__LeaseKeepAliveResponse, lease_keep_alive_response, p, n,
	       "lease renewal", err);
	*ttl = r->ttl > 0 ? r->ttl : 0;
	etcdserverpb__lease_keep_alive_response__free_unpacked(r, NULL);
	return ZS_OK;
}

enum zs_status zs_etcd_dec_get(const uint8_t *p, size_t n, struct zs_buf *val, int64_t *create_rev,
			       struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	val->data = NULL;
	val->len = 0;
	UNPACK(Etcdserverpb__RangeResponse, range_response, p, n, "range", err);
	if (!r->n_kvs || !r->kvs[0]) {
		st = ZS_ENOTFOUND;
	} else {
		val->len = r->kvs[0]->value.len;
		if (!(val->data = malloc(val->len ? val->len : 1)))
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		else if (val->len)
			memcpy(val->data, r->kvs[0]->value.data, val->len);
		*create_rev = r->kvs[0]->create_revision;
	}
	etcdserverpb__range_response__free_unpacked(r, NULL);
	return st;
}

enum zs_status zs_etcd_dec_create(const uint8_t *p, size_t n, int64_t lease, bool *won,
				  int64_t *create_rev, struct zs_error *err)
{
	UNPACK(Etcdserverpb__TxnResponse, txn_response, p, n, "transaction", err);
	*won = r->succeeded;
	*create_rev = 0;
	/* the last response is the read of the key */
	if (r->n_responses && r->responses[r->n_responses - 1]) {
		const Etcdserverpb__ResponseOp *o = r->responses[r->n_responses - 1];
		const Etcdserverpb__RangeResponse *g =
			o->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE
				? o->response_range
				: NULL;
		if (g && g->n_kvs && g->kvs[0]) {
			*create_rev = g->kvs[0]->create_revision;
			/* there, bound to our own lease: our earlier create,
			 * whose answer was lost (a call that timed out after
			 * etcd applied it). Only the lease's holder binds a key
			 * to it: the key is ours (a coordinator that took this
			 * for another's stood by behind itself for good) */
			if (lease && g->kvs[0]->lease == lease)
				*won = true;
		}
	}
	etcdserverpb__txn_response__free_unpacked(r, NULL);
	if (!*create_rev) /* gone again at once (its lease ended): no holder */
		*won = false;
	return ZS_OK;
}

enum zs_status zs_etcd_dec_range_page(const uint8_t *p, size_t n, zs_etcd_visit fn, void *ctx,
				      int64_t *rev, struct zs_buf *next, struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	next->data = NULL;
	next->len = 0;
	UNPACK(Etcdserverpb__RangeResponse, range_response, p, n, "range", err);
	if (!*rev && r->header) /* the pages after read the same revision */
		*rev = r->header->revision;
	for (size_t i = 0; !st && i < r->n_kvs; i++)
		if (r->kvs[i])
			st = fn(ctx, r->kvs[i]->key.data, r->kvs[i]->key.len, r->kvs[i]->value.data,
				r->kvs[i]->value.len);
	if (!st && r->more && r->n_kvs && r->kvs[r->n_kvs - 1]) {
		/* the next page starts past the last key: it, then a zero byte */
		const ProtobufCBinaryData *k = &r->kvs[r->n_kvs - 1]->key;
		if (!(next->data = malloc(k->len + 1))) {
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		} else {
			if (k->len)
				memcpy(next->data, k->data, k->len);
			next->data[k->len] = 0;
			next->len = k->len + 1;
		}
	}
	etcdserverpb__range_response__free_unpacked(r, NULL);
	return st;
}

enum zs_status zs_etcd_dec_txn(const uint8_t *p, size_t n, struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	UNPACK(Etcdserverpb__TxnResponse, txn_response, p, n, "transaction", err);
	if (!r->succeeded)
		st = zs_fail(err, ZS_ESTATE, "etcd refused the write: this coordinator no longer leads");
	etcdserverpb__txn_response__free_unpacked(r, NULL);
	return st;
}
