/* ckpt.c - shard state records with headers and checksums (see ckpt.h). */
#include "storage/ckpt.h"

#include <stdbool.h>
#include <string.h>

#include "base/le.h"

#include "base/crc32c.h"

static size_t prefix(uint8_t *k, const char *job, uint64_t id)
{
	size_t n = strnlen(job, 63);
	memcpy(k, job, n);
	k[n++] = 0;
	for (int i = 0; i < 8; i++)
		k[n++] = (uint8_t)(id >> (56 - 8 * i));
	return n;
}

size_t ckpt_key(uint8_t k[CKPT_KEY_MAX], const char *job, uint64_t id, uint32_t unit,
		uint32_t index, enum ckpt_kind kind)
{
	size_t n = prefix(k, job, id);
	for (int i = 0; i < 4; i++)
		k[n++] = (uint8_t)(unit >> (24 - 8 * i));
	for (int i = 0; i < 4; i++)
		k[n++] = (uint8_t)(index >> (24 - 8 * i));
	k[n++] = (uint8_t)kind;
	return n;
}

enum zs_status ckpt_put(struct zs_kv_txn *t, unsigned table, const char *job, uint64_t id,
			uint32_t unit, uint32_t index, enum ckpt_kind kind, uint64_t step,
			const float *data, uint64_t numel, struct zs_error *err)
{
	uint8_t key[CKPT_KEY_MAX], *v;
	size_t kl = ckpt_key(key, job, id, unit, index, kind), bytes = numel * 4;
	enum zs_status st = zs_kv_reserve(t, table, key, kl, CKPT_HDR + bytes, (void **)&v, err);

	if (st)
		return st;
	/* little-endian on disk: x86-64 floats are already */
	memcpy(v + CKPT_HDR, data, bytes);
	memcpy(v, "ZSC2", 4);
	zs_put32(v + 4, 1);
	zs_put64(v + 8, numel);
	zs_put64(v + 16, step);
	/* the header's fields too: a flipped step or size is caught as well */
	zs_put32(v + 24, zs_crc32c(zs_crc32c(0, v, 24), v + CKPT_HDR, bytes));
	zs_put32(v + 28, 0);
	return ZS_OK;
}

/* Finds and checks a record; *v points at it, *numel its elements. */
static enum zs_status record(struct zs_kv_txn *t, unsigned table, const char *job,
			     uint64_t id, uint32_t unit, uint32_t index, enum ckpt_kind kind,
			     const uint8_t **v, uint64_t *numel, struct zs_error *err)
{
	uint8_t key[CKPT_KEY_MAX];
	size_t kl = ckpt_key(key, job, id, unit, index, kind), vl;
	enum zs_status st = zs_kv_get(t, table, key, kl, (const void **)v, &vl, err);
	bool v1;

	if (st == ZS_ENOTFOUND)
		return zs_fail(err, st, "checkpoint %llu of job '%s' has no record of unit %u shard %u (%c)",
			       (unsigned long long)id, job, unit, index, kind);
	if (st)
		return st;
	*numel = vl >= CKPT_HDR ? zs_get64(*v + 8) : 0;
	v1 = vl >= CKPT_HDR && !memcmp(*v, "ZSC1", 4);
	if (vl < CKPT_HDR || (memcmp(*v, "ZSC2", 4) && !v1) || zs_get32(*v + 4) != 1 ||
	    *numel > (vl - CKPT_HDR) / 4 || vl != CKPT_HDR + *numel * 4)
		return zs_fail(err, ZS_EIO,
			       "checkpoint %llu of job '%s', unit %u shard %u (%c): bad header or size",
			       (unsigned long long)id, job, unit, index, kind);
	if (zs_get32(*v + 24) !=
	    zs_crc32c(v1 ? 0 : zs_crc32c(0, *v, 24), *v + CKPT_HDR, *numel * 4))
		return zs_fail(err, ZS_EIO,
			       "checkpoint %llu of job '%s', unit %u shard %u (%c): checksum mismatch",
			       (unsigned long long)id, job, unit, index, kind);
	return ZS_OK;
}

enum zs_status ckpt_get(struct zs_kv_txn *t, unsigned table, const char *job, uint64_t id,
			uint32_t unit, uint32_t index, enum ckpt_kind kind, uint64_t *step,
			float *out, uint64_t numel, struct zs_error *err)
{
	const uint8_t *v;
	uint64_t have;
	enum zs_status st = record(t, table, job, id, unit, index, kind, &v, &have, err);

	if (st)
		return st;
	if (have != numel)
		return zs_fail(err, ZS_EIO,
			       "checkpoint %llu of job '%s', unit %u shard %u (%c): %llu elements, %llu expected",
			       (unsigned long long)id, job, unit, index, kind,
			       (unsigned long long)have, (unsigned long long)numel);
	memcpy(out, v + CKPT_HDR, numel * 4);
	*step = zs_get64(v + 16);
	return ZS_OK;
}

enum zs_status ckpt_get_slice(struct zs_kv_txn *t, unsigned table, const char *job,
			      uint64_t id, uint32_t unit, uint32_t index, enum ckpt_kind kind,
			      uint64_t off, uint64_t len, uint64_t *step, float *out,
			      struct zs_error *err)
{
	const uint8_t *v;
	uint64_t have;
	enum zs_status st = record(t, table, job, id, unit, index, kind, &v, &have, err);

	if (st)
		return st;
	if (off > have || len > have - off)
		return zs_fail(err, ZS_EINVAL, "slice [%llu, +%llu) is outside the record (%llu elements)",
			       (unsigned long long)off, (unsigned long long)len,
			       (unsigned long long)have);
	memcpy(out, v + CKPT_HDR + off * 4, len * 4);
	*step = zs_get64(v + 16);
	return ZS_OK;
}

enum zs_status ckpt_delete(struct zs_kv_txn *t, unsigned table, const char *job,
			   uint64_t id, struct zs_error *err)
{
	uint8_t key[CKPT_KEY_MAX];
	size_t n = prefix(key, job, id);
	return zs_kv_del_prefix(t, table, key, n, err);
}
