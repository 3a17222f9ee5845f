/*
 * etcd.h - a small client of etcd's v3 API (gRPC, plain TCP) for the
 * coordinator's replicated catalog and its leader election: key ranges,
 * fenced transactions and leases. Nothing else in zshard talks to etcd.
 *
 * A client holds every endpoint of the etcd cluster ("HOST:PORT,...";
 * "https://HOST:PORT" for TLS with the process's own identity, ctrl/tls.h):
 * each call goes to the endpoint that last answered and, when that one
 * cannot be reached or does not answer within the call's bound, to the
 * next, each once. Every call here may be sent twice without harm (a
 * transaction's puts and deletes are absolute, and a fenced one is
 * refused once the fence moved), which is what makes that safe.
 *
 * Thread-safe: the election thread and the RPC handlers share a client.
 */
#ifndef ZS_ETCD_H
#define ZS_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "ctrl/codec.h" /* struct zs_buf */

struct zs_etcd;

/* timeout_ms bounds one try at one endpoint. Errors: ZS_EINVAL (a bad
 * endpoint list: names the entry). Connects lazily. */
enum zs_status zs_etcd_open(const char *endpoints, int timeout_ms, struct zs_etcd **out,
			    struct zs_error *err);
void zs_etcd_close(struct zs_etcd *e); /* NULL is fine */
const char *zs_etcd_endpoints(const struct zs_etcd *e);

/* A lease of ttl_s seconds; *ttl_out: what etcd granted (it may raise it). */
enum zs_status zs_etcd_lease_grant(struct zs_etcd *e, int64_t ttl_s, int64_t *id,
				   int64_t *ttl_out, struct zs_error *err);
/* Renews lease id: *ttl its seconds from now, 0 when it has expired. */
enum zs_status zs_etcd_lease_keepalive(struct zs_etcd *e, int64_t id, int64_t *ttl,
				       struct zs_error *err);
/* Revokes lease id (its keys go with it); an unknown one is fine. */
enum zs_status zs_etcd_lease_revoke(struct zs_etcd *e, int64_t id, struct zs_error *err);

/*
 * key's value into *val (malloc'd; release it) and its create revision:
 * ZS_ENOTFOUND when absent (no message).
 */
enum zs_status zs_etcd_get(struct zs_etcd *e, const void *key, size_t klen,
			   struct zs_buf *val, int64_t *create_rev, struct zs_error *err);

/*
 * Creates key = val bound to lease unless key exists, in one transaction.
 * *won: whether the key is ours: this call created it, or an earlier one
 * with the same lease did (its answer lost); *create_rev: the key's
 * create revision either way (the fence of whoever holds it).
 */
enum zs_status zs_etcd_create(struct zs_etcd *e, const void *key, size_t klen, const void *val,
			      size_t vlen, int64_t lease, bool *won, int64_t *create_rev,
			      struct zs_error *err);

/* Called per key in key order; a non-OK return stops the walk with it. */
typedef enum zs_status (*zs_etcd_visit)(void *ctx, const uint8_t *key, size_t klen,
					const uint8_t *val, size_t vlen);
/*
 * Visits every key that starts with prefix as of revision *rev (0: now;
 * set to the revision read, so that several ranges read one snapshot).
 */
enum zs_status zs_etcd_range_prefix(struct zs_etcd *e, const void *prefix, size_t plen,
				    int64_t *rev, zs_etcd_visit fn, void *ctx,
				    struct zs_error *err);

enum zs_etcd_op_kind { ZS_ETCD_PUT, ZS_ETCD_DEL, ZS_ETCD_DEL_PREFIX };

struct zs_etcd_op {
	enum zs_etcd_op_kind kind;
	const void *key;
	size_t klen;
	const void *val; /* ZS_ETCD_PUT */
	size_t vlen;
};

/*
 * Applies ops atomically, in order, if fence_key's create revision is
 * fence_rev (the holder of an election key: a deposed leader's writes are
 * refused); fence_key NULL: unconditionally. ZS_ESTATE when fenced out.
 */
enum zs_status zs_etcd_txn(struct zs_etcd *e, const void *fence_key, size_t fence_klen,
			   int64_t fence_rev, const struct zs_etcd_op *ops, size_t n,
			   struct zs_error *err);

#endif
