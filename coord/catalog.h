/*
 * catalog.h - what the coordinator keeps durable: its leadership among
 * standbys (lead.c), the store of records in LMDB or etcd (store.c), and
 * the catalog's records in and out (catalog.c). Internal to coord/.
 */
#ifndef ZS_COORD_CATALOG_H
#define ZS_COORD_CATALOG_H

#include "coord/state.h"

/* lead.c */
/* Starts campaigning (a thread): endpoints "HOST:PORT,...", keys under
 * prefix (NULL: /zshard), a lease of lease_s seconds (0: 5). */
enum zs_status coord_lead_start(struct coord *c, const char *endpoints, const char *prefix,
				uint32_t lease_s, struct zs_error *err);

/* Stops campaigning; a leader hands over (revokes its lease). The etcd
 * client stays for a call still being handled: coord_lead_close, once the
 * RPC server is gone. */
void coord_lead_stop(struct coord *c);
void coord_lead_close(struct coord *c);

/* The RPC gate: a standby refuses every call, naming the leader. */
bool coord_gate(void *ctx, size_t method, struct zs_rpc_call *call);

/* The lead is gone (a fenced write, a lease not renewed): stop serving. */
void coord_lead_lost(struct coord *c, const char *why);

/* store.c */
/* The catalog's records in LMDB or etcd (see store.c) */
struct cstore_txn;
struct cstore_read {
	struct zs_kv_txn *kv;
	int64_t rev;
};
enum zs_status cstore_begin(struct coord *c, struct cstore_txn **out, struct zs_error *err);
enum zs_status cstore_put(struct cstore_txn *t, unsigned table, const void *key, size_t kl,
			  const void *val, size_t vl, struct zs_error *err);
enum zs_status cstore_del(struct cstore_txn *t, unsigned table, const void *key, size_t kl,
			  struct zs_error *err);
enum zs_status cstore_del_prefix(struct cstore_txn *t, unsigned table, const void *prefix,
				 size_t pl, struct zs_error *err);

/* Commits (durably) and frees the batch, even on failure. */
enum zs_status cstore_commit(struct cstore_txn *t, struct zs_error *err);
void cstore_abort(struct cstore_txn *t); /* NULL is fine */
/* Reads every table from one snapshot. */
enum zs_status cstore_read_begin(struct coord *c, struct cstore_read *r, struct zs_error *err);
enum zs_status cstore_foreach(struct coord *c, struct cstore_read *r, unsigned table,
			      zs_kv_visit fn, void *ctx, struct zs_error *err);
void cstore_read_end(struct cstore_read *r);

/* catalog.c */
/*
 * Commits a job record (everything but its trainers) or, when del, its
 * deletion with its trainers' records, and, when bump, the next assignment
 * generation, in one transaction.
 */
enum zs_status coord_save_job(struct coord *c, const struct zs_job *j, bool del,
			       bool bump, struct zs_error *err);

/* Commits one trainer's record (or its deletion) of job j. */
enum zs_status coord_save_member(struct coord *c, const struct zs_job *j,
				  const struct zs_member *m, bool del, struct zs_error *err);
enum zs_status coord_save_server(struct coord *c, const struct zs_server_info *s,
				  uint64_t next_id, struct zs_error *err);

/* Deletes server id's record (decommission.c forgets the rest). */
enum zs_status coord_delete_server(struct coord *c, uint64_t id, struct zs_error *err);
struct zs_checkpoint *coord_find_ckpt(struct coord *c, const char *job, uint64_t id);

/* Commits a checkpoint's record, what changes as servers report (or its
 * deletion, with its placement and blobs), with the id counter. */
enum zs_status coord_save_ckpt(struct coord *c, const struct zs_checkpoint *k, bool del,
				struct zs_error *err);

/* Commits a new checkpoint whole: its record, placement and blobs. */
enum zs_status coord_save_ckpt_new(struct coord *c, const struct zs_checkpoint *k,
				    struct zs_error *err);

/* Commits one rank's blob of checkpoint k. */
enum zs_status coord_save_blob(struct coord *c, const struct zs_checkpoint *k,
				const struct zs_blob *b, struct zs_error *err);

/* Encodes k for a reply without its placement (O(shards)): what every
 * caller but a restore and a resume needs. */
enum zs_status coord_enc_ckpt_brief(const struct zs_checkpoint *k, struct zs_buf *b);
enum zs_status coord_load(struct coord *c, struct zs_error *err);

/* Frees what coord_load read (all of it or part), leaving none. */
void coord_free_state(struct coord *c);

#endif
