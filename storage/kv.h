/*
 * kv.h - a small LMDB environment wrapper: named tables, transactions,
 * errors mapped into enum zs_status with a message.
 *
 * One environment per process and data dir (LMDB's rule: never share an
 * environment handle across fork(), never open one file twice in a process).
 * Writes are durable when zs_kv_commit() returns ZS_OK: the environment is
 * opened with synchronous commits, so a SIGKILL after commit loses nothing
 * and a SIGKILL before it leaves the previous state whole.
 *
 * Values returned by zs_kv_get() and zs_kv_foreach() point into the map and
 * are valid only until the transaction ends: copy (or decode) first.
 * Storage never includes the network.
 */
#ifndef ZS_KV_H
#define ZS_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ZS_KV_MAX_TABLES 16

struct zs_kv;
struct zs_kv_txn;

/*
 * Opens (creating if needed) the environment in directory dir with the given
 * tables. map_size is a virtual reservation (the file grows as used); 0
 * means 1 GiB. Errors: ZS_EIO (unreadable, not an LMDB env, locked by a
 * version mismatch), ZS_ENOSPC, ZS_EINVAL (too many tables).
 */
enum {
	/* write through the map (LMDB's MDB_WRITEMAP): about 5x faster for
	 * large values here; the data file is then as large as map_size,
	 * sparse */
	ZS_KV_WRITEMAP = 1,
};
enum zs_status zs_kv_open(const char *dir, uint64_t map_size,
			  const char *const *tables, unsigned n_tables, unsigned flags,
			  struct zs_kv **out, struct zs_error *err);
/* Closes the environment; no transaction may be open. NULL is fine. */
void zs_kv_close(struct zs_kv *kv);
/*
 * Rewrites the data file with its live pages alone (LMDB's compacting
 * copy, put in place by a rename), so that nothing a freed page held (a
 * record overwritten since, such as a token sealed since) stays in it;
 * *kv is closed and opened again on it (tables: as at the open). No
 * transaction may be open, nor another process have it open.
 */
enum zs_status zs_kv_compact(struct zs_kv **kv, const char *const *tables,
			     struct zs_error *err);

/* Begins a transaction; a write transaction blocks other writers. In a
 * write-map environment a write transaction begins only with room on the
 * disk for its first megabytes (ZS_ENOSPC otherwise, nothing written). */
enum zs_status zs_kv_begin(struct zs_kv *kv, bool write, struct zs_kv_txn **out,
			   struct zs_error *err);
/*
 * In a write-map environment, where a store into a page the disk has no
 * block for is a SIGBUS, not an error: allocates the data file's blocks
 * for bytes more than is committed (what write transaction t will have
 * written in all, counted from its beginning), or fails with ZS_ENOSPC
 * naming the room wanted, before anything is written. Call it before
 * writes of more than a few megabytes; a no-op otherwise.
 */
enum zs_status zs_kv_room(struct zs_kv_txn *t, uint64_t bytes, struct zs_error *err);
/* Commits (durably for a write txn) and frees the txn, even on failure. */
enum zs_status zs_kv_commit(struct zs_kv_txn *t, struct zs_error *err);
/* Aborts and frees; NULL is fine. */
void zs_kv_abort(struct zs_kv_txn *t);

/* Puts key -> val in table (an index into the open's table list). */
enum zs_status zs_kv_put(struct zs_kv_txn *t, unsigned table, const void *key,
			 size_t klen, const void *val, size_t vlen,
			 struct zs_error *err);
/*
 * Reserves vlen bytes for key and points *val at them, to be filled before
 * the transaction commits (no intermediate copy). Lifetime as for get.
 */
enum zs_status zs_kv_reserve(struct zs_kv_txn *t, unsigned table, const void *key,
			     size_t klen, size_t vlen, void **val, struct zs_error *err);

/* Deletes every key that starts with prefix. */
enum zs_status zs_kv_del_prefix(struct zs_kv_txn *t, unsigned table, const void *prefix,
				size_t plen, struct zs_error *err);

/* Gets key; ZS_ENOTFOUND (with no message) when absent. See lifetime above. */
enum zs_status zs_kv_get(struct zs_kv_txn *t, unsigned table, const void *key,
			 size_t klen, const void **val, size_t *vlen,
			 struct zs_error *err);
/* Deletes key; ZS_ENOTFOUND when absent. */
enum zs_status zs_kv_del(struct zs_kv_txn *t, unsigned table, const void *key,
			 size_t klen, struct zs_error *err);

/* Called for each entry in key order; a non-OK return stops the walk. */
typedef enum zs_status (*zs_kv_visit)(void *ctx, const void *key, size_t klen,
				      const void *val, size_t vlen);
enum zs_status zs_kv_foreach(struct zs_kv_txn *t, unsigned table,
			     zs_kv_visit fn, void *ctx, struct zs_error *err);

/* Little-endian u64 helpers for counters stored as values. */
void zs_kv_u64_enc(uint64_t v, uint8_t out[8]);
uint64_t zs_kv_u64_dec(const uint8_t in[8]);

#endif
