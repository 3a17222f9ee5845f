/* etcd.c - etcd v3 over gRPC: ranges, fenced transactions, leases (see etcd.h). */
#include "ctrl/etcd.h"
#include "ctrl/etcd_dec.h"

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

/* answer b decoded by dec (etcd_dec.c), then released */
#define DECODED(b, call)                                                                  \
	do {                                                                              \
		st = (call);                                                              \
		zs_buf_release(b);                                                        \
	} while (0)

enum zs_status zs_etcd_lease_grant(struct zs_etcd *e, int64_t ttl_s, int64_t *id,
				   int64_t *ttl_out, struct zs_error *err)
{
	Etcdserverpb__LeaseGrantRequest q = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	struct zs_buf b;
	enum zs_status st;

	q.ttl = ttl_s;
	if ((st = call(e, "/etcdserverpb.Lease/LeaseGrant", &q.base, &b, err)))
		return st;
	DECODED(&b, zs_etcd_dec_lease_grant(b.data, b.len, id, ttl_out, err));
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
	DECODED(&b, zs_etcd_dec_keepalive(b.data, b.len, ttl, err));
	return st;
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
	DECODED(&b, zs_etcd_dec_get(b.data, b.len, val, create_rev, err));
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
	DECODED(&b, zs_etcd_dec_create(b.data, b.len, lease, won, create_rev, err));
	return st;
}

enum zs_status zs_etcd_range_prefix(struct zs_etcd *e, const void *prefix, size_t plen,
				    int64_t *rev, zs_etcd_visit fn, void *ctx,
				    struct zs_error *err)
{
	Etcdserverpb__RangeRequest q = ETCDSERVERPB__RANGE_REQUEST__INIT;
	uint8_t *end = malloc(plen + 1);
	struct zs_buf from = {0};
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
		struct zs_buf b, next;
		if ((st = call(e, "/etcdserverpb.KV/Range", &q.base, &b, err)))
			break;
		DECODED(&b, zs_etcd_dec_range_page(b.data, b.len, fn, ctx, &q.revision, &next, err));
		zs_buf_release(&from); /* the page's first key, read */
		from = next;
		more = !st && from.len;
		q.key = bin(from.data, from.len);
	}
	*rev = q.revision;
	free(end);
	zs_buf_release(&from);
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
	DECODED(&b, zs_etcd_dec_txn(b.data, b.len, err));
out:
	for (size_t i = 0; o && i < n; i++)
		free(o[i].end);
	free(o);
	free(rop);
	return st;
}
