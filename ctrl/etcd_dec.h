/*
 * etcd_dec.h - the decoding of etcd's answers (etcd.c's calls send the
 * requests): each takes one answer's bytes and gives what it says, or
 * ZS_EPROTO for a malformed one. Internal to ctrl/ (etcd.c) and the fuzzer.
 */
#ifndef ZS_ETCD_DEC_H
#define ZS_ETCD_DEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "ctrl/etcd.h"

/* LeaseGrant: the lease's id (never 0) and its ttl; etcd's refusal
 * ZS_EUNAVAIL. */
enum zs_status zs_etcd_dec_lease_grant(const uint8_t *p, size_t n, int64_t *id, int64_t *ttl,
				       struct zs_error *err);
/* LeaseKeepAlive: its ttl from now (0: expired); no answer ZS_EUNAVAIL. */
enum zs_status zs_etcd_dec_keepalive(const uint8_t *p, size_t n, int64_t *ttl,
				     struct zs_error *err);
/* Range of one key: its value (malloc'd) and create revision; ZS_ENOTFOUND. */
enum zs_status zs_etcd_dec_get(const uint8_t *p, size_t n, struct zs_buf *val, int64_t *create_rev,
			       struct zs_error *err);
/* zs_etcd_create's transaction: whether the key is ours (made now, or
 * bound to lease), and its create revision. */
enum zs_status zs_etcd_dec_create(const uint8_t *p, size_t n, int64_t lease, bool *won,
				  int64_t *create_rev, struct zs_error *err);
/* One page of a prefix range: fn for each key; *rev set from the answer
 * when 0; *next, the key the next page starts at (malloc'd; empty when
 * this was the last). */
enum zs_status zs_etcd_dec_range_page(const uint8_t *p, size_t n, zs_etcd_visit fn, void *ctx,
				      int64_t *rev, struct zs_buf *next, struct zs_error *err);
/* A fenced transaction: ZS_ESTATE when its fence moved (not the leader). */
enum zs_status zs_etcd_dec_txn(const uint8_t *p, size_t n, struct zs_error *err);

#endif
