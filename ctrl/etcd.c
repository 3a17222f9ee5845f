/* etcd.c - etcd v3 over gRPC: ranges, fenced transactions, leases (see etcd.h). */
#include "ctrl/etcd.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "ctrl/rpc.h"
#include "ctrl/tls.h"
#include "gen/etcd.pb-c.h"

#define MAX_ENDPOINTS 16

struct zs_etcd {
	struct zs_rpc_client *rpc[MAX_ENDPOINTS];
	size_t n;
	atomic_size_t cur; /* the endpoint that last answered */
	int timeout_ms;
	char endpoints[1024];
};

enum zs_status zs_etcd_open(const char *endpoints, int timeout_ms, struct zs_etcd **out,
			    struct zs_error *err)
{
	struct zs_etcd *e;
	char list[1024], *save = NULL;
	enum zs_status st = ZS_OK;

	if (!endpoints || !*endpoints)
		return zs_fail(err, ZS_EINVAL, "no etcd endpoint given");
	if (strlen(endpoints) >= sizeof list)
		return zs_fail(err, ZS_EINVAL, "the etcd endpoint list is too long");
	if (!(e = calloc(1, sizeof *e)))
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	snprintf(list, sizeof list, "%s", endpoints);
	snprintf(e->endpoints, sizeof e->endpoints, "%s", endpoints);
	e->timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
	for (char *t = strtok_r(list, ",", &save); t && !st; t = strtok_r(NULL, ",", &save)) {
		bool tls = false;
		while (*t == ' ')
			t++;
		/* etcd's own form: https:// with this process's TLS identity
		 * (its CA must sign etcd's certificate, etcd's CA this one's),
		 * http:// or none for plaintext */
		if (!strncmp(t, "https://", 8)) {
			t += 8;
			tls = true;
		} else if (!strncmp(t, "http://", 7)) {
			t += 7;
		}
		if (e->n == MAX_ENDPOINTS)
			st = zs_fail(err, ZS_EINVAL, "more than %d etcd endpoints", MAX_ENDPOINTS);
		else if (tls && !zs_tls_on())
			st = zs_fail(err, ZS_EINVAL,
				     "etcd endpoint 'https://%s' needs this process's TLS identity (--tls-ca, --tls-cert, --tls-key)",
				     t);
		else if (!(st = tls ? zs_rpc_client_open(t, &e->rpc[e->n], err)
				    : zs_rpc_client_open_plain(t, &e->rpc[e->n], err)))
			e->n++;
		else
			zs_error_prefix(err, "etcd endpoint '%s'", t);
	}
	if (!st && !e->n)
		st = zs_fail(err, ZS_EINVAL, "no etcd endpoint in '%s'", endpoints);
	if (st) {
		zs_etcd_close(e);
		return st;
	}
	*out = e;
	return ZS_OK;
}

void zs_etcd_close(struct zs_etcd *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		zs_rpc_client_free(e->rpc[i]);
	free(e);
}

const char *zs_etcd_endpoints(const struct zs_etcd *e)
{
	return e->endpoints;
}

/* Packs m into *b (malloc'd). */
static enum zs_status pack(const ProtobufCMessage *m, struct zs_buf *b, struct zs_error *err)
{
	b->len = protobuf_c_message_get_packed_size(m);
	b->data = malloc(b->len ? b->len : 1);
	if (!b->data)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	protobuf_c_message_pack(m, b->data);
	return ZS_OK;
}

/* Answers that say the member cannot serve now (down, cut off from its
 * quorum, too slow): the next endpoint may. */
static bool try_next(enum zs_status st)
{
	return st == ZS_EUNAVAIL || st == ZS_ETIMEDOUT || st == ZS_EINTERNAL || st == ZS_EAGAIN;
}

/* Calls method (e.g. "/etcdserverpb.KV/Txn") with m at each endpoint in turn
 * from the last good one until one answers; the reply's bytes into resp. */
static enum zs_status call(struct zs_etcd *e, const char *method, const ProtobufCMessage *m,
			   struct zs_buf *resp, struct zs_error *err)
{
	struct zs_buf req;
	enum zs_status st = pack(m, &req, err);
	size_t first = atomic_load(&e->cur);

	resp->data = NULL;
	resp->len = 0;
	if (st)
		return st;
	for (size_t k = 0; k < e->n; k++) {
		size_t i = (first + k) % e->n;
		st = zs_rpc_invoke(e->rpc[i], method, req.data, req.len, &resp->data, &resp->len,
				   e->timeout_ms, 0, err);
		if (!st) {
			atomic_store(&e->cur, i);
			break;
		}
		if (!try_next(st))
			break;
	}
	if (st)
		zs_error_prefix(err, "etcd");
	zs_buf_release(&req);
	return st;
}

#define UNPACKED(T, lower, b, err)                                                        \
	T *r = etcdserverpb__##lower##__unpack(NULL, (b)->len, (b)->data);               \
	zs_buf_release(b);                                                                \
	if (!r)                                                                           \
		return zs_fail(err, ZS_EPROTO, "etcd sent a malformed " #lower " message");

enum zs_status zs_etcd_lease_grant(struct zs_etcd *e, int64_t ttl_s, int64_t *id,
				   int64_t *ttl_out, struct zs_error *err)
{
	Etcdserverpb__LeaseGrantRequest q = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	struct zs_buf b;
	enum zs_status st;

	q.ttl = ttl_s;
	if ((st = call(e, "/etcdserverpb.Lease/LeaseGrant", &q.base, &b, err)))
		return st;
	UNPACKED(Etcdserverpb__LeaseGrantResponse, lease_grant_response, &b, err);
	if (r->error && *r->error)
		st = zs_fail(err, ZS_EUNAVAIL, "etcd refused a lease: %s", r->error);
	else if (!r->id)
		st = zs_fail(err, ZS_EPROTO, "etcd granted lease 0");
	*id = r->id;
	*ttl_out = r->ttl;
	etcdserverpb__lease_grant_response__free_unpacked(r, NULL);
	return st;
}

/* LeaseKeepAlive is a stream in etcd's API; one request and the end of the
 * stream from here make it a unary call: etcd answers, then sees the end. */
enum zs_status zs_etcd_lease_keepalive(struct zs_etcd *e, int64_t id, int64_t *ttl,
				       struct zs_error *err)
{
	Etcdserverpb__LeaseKeepAliveRequest q = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
	struct zs_buf b;
	enum zs_status st;

	q.id = id;
	if ((st = call(e, "/etcdserverpb.Lease/LeaseKeepAlive", &q.base, &b, err)))
		return st;
	if (!b.len) { /* the stream ended without an answer */
		zs_buf_release(&b);
		return zs_fail(err, ZS_EUNAVAIL, "etcd did not answer a lease renewal");
	}
	UNPACKED(Etcdserverpb__LeaseKeepAliveResponse, lease_keep_alive_response, &b, err);
	*ttl = r->ttl > 0 ? r->ttl : 0;
	etcdserverpb__lease_keep_alive_response__free_unpacked(r, NULL);
	return ZS_OK;
}

enum zs_status zs_etcd_lease_revoke(struct zs_etcd *e, int64_t id, struct zs_error *err)
{
	Etcdserverpb__LeaseRevokeRequest q = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	struct zs_buf b;
	enum zs_status st;

	q.id = id;
	st = call(e, "/etcdserverpb.Lease/LeaseRevoke", &q.base, &b, err);
	zs_buf_release(&b);
	return st == ZS_ENOTFOUND ? ZS_OK : st;
}

static ProtobufCBinaryData bin(const void *p, size_t n)
{
	return (ProtobufCBinaryData){.len = n, .data = (uint8_t *)(uintptr_t)p};
}

enum zs_status zs_etcd_get(struct zs_etcd *e, const void *key, size_t klen,
			   struct zs_buf *val, int64_t *create_rev, struct zs_error *err)
{
	Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
	struct zs_buf b;
	enum zs_status st;

	val->data = NULL;
	val->len = 0;
	q.key = bin(key, klen);
	if ((st = call(e, "/etcdserverpb.KV/Range", &q.base, &b, err)))
		return st;
	UNPACKED(Etcdserverpb__RangeResponse, range_response, &b, err);
	if (!r->n_kvs) {
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

/* The end of the range of keys that start with p: p with its last byte
 * below 0xff raised by one, the bytes after it dropped. */
static size_t prefix_end(const uint8_t *p, size_t n, uint8_t *end)
{
	memcpy(end, p, n);
	while (n && end[n - 1] == 0xff)
		n--;
	if (!n) { /* every key from p on */
		end[0] = 0;
		return 1;
	}
	end[n - 1]++;
	return n;
}

enum zs_status zs_etcd_create(struct zs_etcd *e, const void *key, size_t klen, const void *val,
			      size_t vlen, int64_t lease, bool *won, int64_t *create_rev,
			      struct zs_error *err)
{
	Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmps[1] = {&cmp};
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__RangeRequest get = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RequestOp on_ok = ETCDSERVERPB__REQUEST_OP__INIT, *oks[2] = {&on_ok, NULL};
	Etcdserverpb__RequestOp then_get = ETCDSERVERPB__REQUEST_OP__INIT, *fails[1] = {&then_get};
	Etcdserverpb__TxnRequest q = ETCDSERVERPB__TXN_REQUEST__INIT;
	struct zs_buf b;
	enum zs_status st;

	/* absent: create revision 0 */
	cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
	cmp.key = bin(key, klen);
	cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
	cmp.create_revision = 0;
	put.key = bin(key, klen);
	put.value = bin(val, vlen);
	put.lease = lease;
	on_ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	on_ok.request_put = &put;
	get.key = bin(key, klen);
	then_get.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	then_get.request_range = &get;
	/* the put, then a read of what it wrote (its create revision) */
	oks[1] = &then_get;
	q.n_compare = 1;
	q.compare = cmps;
	q.n_success = 2;
	q.success = oks;
	q.n_failure = 1;
	q.failure = fails;
	if ((st = call(e, "/etcdserverpb.KV/Txn", &q.base, &b, err)))
		return st;
	UNPACKED(Etcdserverpb__TxnResponse, txn_response, &b, err);
	*won = r->succeeded;
	*create_rev = 0;
	/* the last response is the read */
	if (r->n_responses) {
		Etcdserverpb__ResponseOp *o = r->responses[r->n_responses - 1];
		if (o->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
		    o->response_range->n_kvs) {
			*create_rev = o->response_range->kvs[0]->create_revision;
			/* there, bound to our own lease: our earlier create,
			 * whose answer was lost (a call that timed out after
			 * etcd applied it). Only the lease's holder binds a key
			 * to it: the key is ours (a coordinator that took this
			 * for another's stood by behind itself for good) */
			if (lease && o->response_range->kvs[0]->lease == lease)
				*won = true;
		}
	}
	etcdserverpb__txn_response__free_unpacked(r, NULL);
	if (!*create_rev) /* gone again at once (its lease ended): no holder */
		*won = false;
	return ZS_OK;
}

enum zs_status zs_etcd_range_prefix(struct zs_etcd *e, const void *prefix, size_t plen,
				    int64_t *rev, zs_etcd_visit fn, void *ctx,
				    struct zs_error *err)
{
	Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
	uint8_t *end = malloc(plen + 1), *from = NULL;
	enum zs_status st = ZS_OK;
	bool more = true;

	if (!end)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	q.key = bin(prefix, plen);
	q.range_end = bin(end, prefix_end(prefix, plen, end));
	q.revision = *rev;
	/* in pages, so that no answer is larger than etcd's own limits */
	q.limit = 512;
	while (!st && more) {
		struct zs_buf b;
		if ((st = call(e, "/etcdserverpb.KV/Range", &q.base, &b, err)))
			break;
		Etcdserverpb__RangeResponse *r =
			etcdserverpb__range_response__unpack(NULL, b.len, b.data);
		zs_buf_release(&b);
		if (!r) {
			st = zs_fail(err, ZS_EPROTO, "etcd sent a malformed range answer");
			break;
		}
		if (!q.revision && r->header) /* the pages after read the same revision */
			q.revision = r->header->revision;
		for (size_t i = 0; !st && i < r->n_kvs; i++)
			st = fn(ctx, r->kvs[i]->key.data, r->kvs[i]->key.len, r->kvs[i]->value.data,
				r->kvs[i]->value.len);
		more = r->more && r->n_kvs;
		if (!st && more) { /* the next page starts past the last key */
			const ProtobufCBinaryData *k = &r->kvs[r->n_kvs - 1]->key;
			uint8_t *nf = realloc(from, k->len + 1);
			if (!nf) {
				st = zs_fail(err, ZS_ENOMEM, "out of memory");
			} else {
				from = nf;
				memcpy(from, k->data, k->len);
				from[k->len] = 0;
				q.key = bin(from, k->len + 1);
			}
		}
		etcdserverpb__range_response__free_unpacked(r, NULL);
	}
	*rev = q.revision;
	free(end);
	free(from);
	return st;
}

/* One write of a transaction as etcd's messages, with the end of its
 * range when it deletes a prefix. */
struct txn_op {
	Etcdserverpb__RequestOp ro;
	Etcdserverpb__PutRequest put;
	Etcdserverpb__DeleteRangeRequest del;
	uint8_t *end;
};

enum zs_status zs_etcd_txn(struct zs_etcd *e, const void *fence_key, size_t fence_klen,
			   int64_t fence_rev, const struct zs_etcd_op *ops, size_t n,
			   struct zs_error *err)
{
	Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmps[1] = {&cmp};
	Etcdserverpb__TxnRequest q = ETCDSERVERPB__TXN_REQUEST__INIT;
	struct txn_op *o = calloc(n ? n : 1, sizeof *o);
	Etcdserverpb__RequestOp **rop = calloc(n ? n : 1, sizeof *rop);
	enum zs_status st = ZS_OK;
	struct zs_buf b;

	if (!o || !rop) {
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		etcdserverpb__request_op__init(&o[i].ro);
		rop[i] = &o[i].ro;
		if (ops[i].kind == ZS_ETCD_PUT) {
			etcdserverpb__put_request__init(&o[i].put);
			o[i].put.key = bin(ops[i].key, ops[i].klen);
			o[i].put.value = bin(ops[i].val, ops[i].vlen);
			o[i].ro.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
			o[i].ro.request_put = &o[i].put;
			continue;
		}
		etcdserverpb__delete_range_request__init(&o[i].del);
		o[i].del.key = bin(ops[i].key, ops[i].klen);
		if (ops[i].kind == ZS_ETCD_DEL_PREFIX) {
			if (!(o[i].end = malloc(ops[i].klen + 1))) {
				st = zs_fail(err, ZS_ENOMEM, "out of memory");
				goto out;
			}
			o[i].del.range_end =
				bin(o[i].end, prefix_end(ops[i].key, ops[i].klen, o[i].end));
		}
		o[i].ro.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
		o[i].ro.request_delete_range = &o[i].del;
	}
	if (fence_key) {
		cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
		cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
		cmp.key = bin(fence_key, fence_klen);
		cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
		cmp.create_revision = fence_rev;
		q.n_compare = 1;
		q.compare = cmps;
	}
	q.n_success = n;
	q.success = rop;
	if ((st = call(e, "/etcdserverpb.KV/Txn", &q.base, &b, err)))
		goto out;
	Etcdserverpb__TxnResponse *r = etcdserverpb__txn_response__unpack(NULL, b.len, b.data);
	zs_buf_release(&b);
	if (!r)
		st = zs_fail(err, ZS_EPROTO, "etcd sent a malformed txn_response message");
	else if (!r->succeeded)
		st = zs_fail(err, ZS_ESTATE, "etcd refused the write: this coordinator no longer leads");
	etcdserverpb__txn_response__free_unpacked(r, NULL);
out:
	for (size_t i = 0; o && i < n; i++)
		free(o[i].end);
	free(o);
	free(rop);
	return st;
}
