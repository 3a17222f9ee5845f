/* kv.c - the LMDB environment wrapper (see kv.h). */
#include "storage/kv.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/le.h"
#include "base/util.h"

struct zs_kv {
	MDB_env *env;
	unsigned n_tables;
	MDB_dbi dbi[ZS_KV_MAX_TABLES];
	char dir[512];
	bool writemap;
	uint64_t map_size;
	uint64_t reserved; /* [0, reserved) of the data file has its blocks */
};

/* Room every write transaction of a write-map environment has before it
 * begins: its branch and leaf pages copied on write, the free list */
#define KV_MARGIN (512u << 10)

struct zs_kv_txn {
	struct zs_kv *kv;
	MDB_txn *txn;
};

static enum zs_status map_rc(int rc)
{
	switch (rc) {
	case MDB_SUCCESS: return ZS_OK;
	case MDB_NOTFOUND: return ZS_ENOTFOUND;
	case MDB_KEYEXIST: return ZS_EEXIST;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
	case ENOSPC: return ZS_ENOSPC;
	case ENOMEM: return ZS_ENOMEM;
	case EINVAL:
	case MDB_BAD_VALSIZE: return ZS_EINVAL;
	default: return ZS_EIO;
	}
}

static enum zs_status kv_fail(struct zs_error *err, int rc, const char *what,
			      const char *dir)
{
	return zs_fail(err, map_rc(rc), "LMDB %s in %s: %s", what, dir,
		       mdb_strerror(rc));
}

enum zs_status zs_kv_open(const char *dir, uint64_t map_size,
			  const char *const *tables, unsigned n_tables, unsigned flags,
			  struct zs_kv **out, struct zs_error *err)
{
	struct zs_kv *kv;
	MDB_txn *txn;
	enum zs_status st;
	int rc;

	if (n_tables > ZS_KV_MAX_TABLES)
		return zs_fail(err, ZS_EINVAL, "too many LMDB tables (%u)", n_tables);
	st = zs_mkdir_p(dir, err);
	if (st)
		return st;
	kv = calloc(1, sizeof *kv);
	if (!kv)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	snprintf(kv->dir, sizeof kv->dir, "%s", dir);
	kv->n_tables = n_tables;
	kv->writemap = flags & ZS_KV_WRITEMAP;
	kv->map_size = map_size ? map_size : (1ULL << 30);

	rc = mdb_env_create(&kv->env);
	if (rc)
		goto clean_kv;
	/* mapsize must be set before open; it only reserves address space */
	rc = mdb_env_set_mapsize(kv->env, map_size ? map_size : (1ULL << 30));
	if (!rc)
		rc = mdb_env_set_maxdbs(kv->env, ZS_KV_MAX_TABLES);
	if (!rc)
		rc = mdb_env_open(kv->env, dir,
				  MDB_NOTLS | (flags & ZS_KV_WRITEMAP ? MDB_WRITEMAP : 0), 0600);
	if (rc)
		goto clean_env;
	/* clear reader slots left by crashed processes */
	mdb_reader_check(kv->env, NULL);

	rc = mdb_txn_begin(kv->env, NULL, 0, &txn);
	if (rc)
		goto clean_env;
	for (unsigned i = 0; i < n_tables; i++) {
		rc = mdb_dbi_open(txn, tables[i], MDB_CREATE, &kv->dbi[i]);
		if (rc) {
			mdb_txn_abort(txn);
			goto clean_env;
		}
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		goto clean_env;
	*out = kv;
	return ZS_OK;

clean_env:
	mdb_env_close(kv->env);
clean_kv:
	st = kv_fail(err, rc, "open", dir);
	free(kv);
	return st;
}

void zs_kv_close(struct zs_kv *kv)
{
	if (!kv)
		return;
	mdb_env_close(kv->env);
	free(kv);
}

enum zs_status zs_kv_compact(struct zs_kv **kvp, const char *const *tables,
			     struct zs_error *err)
{
	struct zs_kv *kv = *kvp;
	char dir[512], tmp[600], from[640], to[600];
	uint64_t map_size = kv->map_size;
	unsigned n = kv->n_tables, flags = kv->writemap ? ZS_KV_WRITEMAP : 0;
	enum zs_status st = ZS_OK, st2;
	int rc, fd;

	snprintf(dir, sizeof dir, "%s", kv->dir);
	snprintf(tmp, sizeof tmp, "%s/compact.tmp", dir);
	snprintf(from, sizeof from, "%s/data.mdb", tmp);
	snprintf(to, sizeof to, "%s/data.mdb", dir);
	unlink(from); /* a copy an earlier try left */
	rmdir(tmp);
	if (mkdir(tmp, 0700) && errno != EEXIST)
		return zs_fail(err, ZS_EIO, "cannot make %s: %s", tmp, strerror(errno));
	/* the live pages alone: the freed ones, with what they held, stay
	 * behind in the old file */
	if ((rc = mdb_env_copy2(kv->env, tmp, MDB_CP_COMPACT))) {
		unlink(from);
		rmdir(tmp);
		return kv_fail(err, rc, "compact", dir);
	}
	zs_kv_close(kv);
	*kvp = NULL;
	if (rename(from, to))
		st = zs_fail(err, ZS_EIO, "cannot put the compacted %s in place: %s", from,
			     strerror(errno));
	unlink(from);
	rmdir(tmp);
	if (!st && ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fsync(fd)))
		st = zs_fail(err, ZS_EIO, "cannot sync %s: %s", dir, strerror(errno));
	if (!st)
		close(fd);
	/* open again either way (the old file, when the rename failed) */
	st2 = zs_kv_open(dir, map_size, tables, n, flags, kvp, st ? NULL : err);
	return st ? st : st2;
}

enum zs_status zs_kv_begin(struct zs_kv *kv, bool write, struct zs_kv_txn **out,
			   struct zs_error *err)
{
	struct zs_kv_txn *t = malloc(sizeof *t);
	int rc;

	if (!t)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	t->kv = kv;
	rc = mdb_txn_begin(kv->env, NULL, write ? 0 : MDB_RDONLY, &t->txn);
	if (rc) {
		free(t);
		return kv_fail(err, rc, "begin", kv->dir);
	}
	if (write) {
		enum zs_status st = zs_kv_room(t, 0, err);
		if (st) {
			zs_kv_abort(t);
			return st;
		}
	}
	*out = t;
	return ZS_OK;
}

enum zs_status zs_kv_room(struct zs_kv_txn *t, uint64_t bytes, struct zs_error *err)
{
	struct zs_kv *kv = t->kv;
	MDB_envinfo info;
	MDB_stat ms;
	uint64_t end;
	int fd, rc;

	if (!kv->writemap)
		return ZS_OK;
	if ((rc = mdb_env_info(kv->env, &info)) || (rc = mdb_env_stat(kv->env, &ms)) ||
	    (rc = mdb_env_get_fd(kv->env, &fd)))
		return kv_fail(err, rc, "reserve", kv->dir);
	/* what is committed, what this transaction writes (with a tenth
	 * more for its pages' headers and the tree), and the margin */
	end = ((uint64_t)info.me_last_pgno + 1) * ms.ms_psize + bytes + bytes / 10 + KV_MARGIN;
	if (end > kv->map_size)
		end = kv->map_size; /* past it LMDB says the map is full */
	if (end <= kv->reserved)
		return ZS_OK;
	/* the blocks the map may write into, allocated now: on a full disk
	 * this fails, where a store through the map would be a SIGBUS */
	rc = posix_fallocate(fd, (off_t)kv->reserved, (off_t)(end - kv->reserved));
	if (rc) {
		char need[32];
		return zs_fail(err, rc == ENOSPC ? ZS_ENOSPC : zs_status_from_errno(rc),
			       "%s has no room for %s more (%s): nothing was written", kv->dir,
			       zs_fmt_bytes(end - kv->reserved, need, sizeof need), strerror(rc));
	}
	kv->reserved = end;
	return ZS_OK;
}

enum zs_status zs_kv_commit(struct zs_kv_txn *t, struct zs_error *err)
{
	int rc = mdb_txn_commit(t->txn);
	enum zs_status st = rc ? kv_fail(err, rc, "commit", t->kv->dir) : ZS_OK;

	free(t);
	return st;
}

void zs_kv_abort(struct zs_kv_txn *t)
{
	if (!t)
		return;
	mdb_txn_abort(t->txn);
	free(t);
}

enum zs_status zs_kv_put(struct zs_kv_txn *t, unsigned table, const void *key,
			 size_t klen, const void *val, size_t vlen,
			 struct zs_error *err)
{
	MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
	int rc;

	if (table >= t->kv->n_tables)
		return zs_fail(err, ZS_EINVAL, "no such LMDB table %u", table);
	rc = mdb_put(t->txn, t->kv->dbi[table], &k, &v, 0);
	return rc ? kv_fail(err, rc, "put", t->kv->dir) : ZS_OK;
}

enum zs_status zs_kv_reserve(struct zs_kv_txn *t, unsigned table, const void *key,
			     size_t klen, size_t vlen, void **val, struct zs_error *err)
{
	MDB_val k = {klen, (void *)key}, v = {vlen, NULL};
	int rc;

	if (table >= t->kv->n_tables)
		return zs_fail(err, ZS_EINVAL, "no such LMDB table %u", table);
	rc = mdb_put(t->txn, t->kv->dbi[table], &k, &v, MDB_RESERVE);
	if (rc)
		return kv_fail(err, rc, "reserve", t->kv->dir);
	*val = v.mv_data;
	return ZS_OK;
}

enum zs_status zs_kv_del_prefix(struct zs_kv_txn *t, unsigned table, const void *prefix,
				size_t plen, struct zs_error *err)
{
	MDB_cursor *c;
	MDB_val k = {plen, (void *)prefix}, v;
	int rc;

	if (table >= t->kv->n_tables)
		return zs_fail(err, ZS_EINVAL, "no such LMDB table %u", table);
	rc = mdb_cursor_open(t->txn, t->kv->dbi[table], &c);
	if (rc)
		return kv_fail(err, rc, "cursor", t->kv->dir);
	/* seek the prefix again after each delete: a cursor whose last item
	 * went is not positioned, and MDB_GET_CURRENT on it is EINVAL */
	for (;;) {
		k = (MDB_val){plen, (void *)prefix};
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (rc || k.mv_size < plen || memcmp(k.mv_data, prefix, plen))
			break;
		if ((rc = mdb_cursor_del(c, 0)))
			break;
	}
	mdb_cursor_close(c);
	if (rc && rc != MDB_NOTFOUND)
		return kv_fail(err, rc, "delete", t->kv->dir);
	return ZS_OK;
}

enum zs_status zs_kv_get(struct zs_kv_txn *t, unsigned table, const void *key,
			 size_t klen, const void **val, size_t *vlen,
			 struct zs_error *err)
{
	MDB_val k = {klen, (void *)key}, v;
	int rc;

	if (table >= t->kv->n_tables)
		return zs_fail(err, ZS_EINVAL, "no such LMDB table %u", table);
	rc = mdb_get(t->txn, t->kv->dbi[table], &k, &v);
	if (rc == MDB_NOTFOUND)
		return ZS_ENOTFOUND;
	if (rc)
		return kv_fail(err, rc, "get", t->kv->dir);
	*val = v.mv_data;
	*vlen = v.mv_size;
	return ZS_OK;
}

enum zs_status zs_kv_del(struct zs_kv_txn *t, unsigned table, const void *key,
			 size_t klen, struct zs_error *err)
{
	MDB_val k = {klen, (void *)key};
	int rc;

	if (table >= t->kv->n_tables)
		return zs_fail(err, ZS_EINVAL, "no such LMDB table %u", table);
	rc = mdb_del(t->txn, t->kv->dbi[table], &k, NULL);
	if (rc == MDB_NOTFOUND)
		return ZS_ENOTFOUND;
	return rc ? kv_fail(err, rc, "delete", t->kv->dir) : ZS_OK;
}

enum zs_status zs_kv_foreach(struct zs_kv_txn *t, unsigned table,
			     zs_kv_visit fn, void *ctx, struct zs_error *err)
{
	MDB_cursor *c;
	MDB_val k, v;
	enum zs_status st = ZS_OK;
	int rc;

	if (table >= t->kv->n_tables)
		return zs_fail(err, ZS_EINVAL, "no such LMDB table %u", table);
	rc = mdb_cursor_open(t->txn, t->kv->dbi[table], &c);
	if (rc)
		return kv_fail(err, rc, "cursor", t->kv->dir);
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0 && st == ZS_OK;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		st = fn(ctx, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
	mdb_cursor_close(c);
	if (st)
		return zs_fail(err, st, "reading %s: a stored record is unreadable",
			       t->kv->dir);
	if (rc != MDB_NOTFOUND)
		return kv_fail(err, rc, "cursor walk", t->kv->dir);
	return ZS_OK;
}

void zs_kv_u64_enc(uint64_t v, uint8_t out[8]) { zs_put64(out, v); }

uint64_t zs_kv_u64_dec(const uint8_t in[8]) { return zs_get64(in); }
