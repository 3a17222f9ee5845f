/*
 * ckpt.h - shard state at a checkpoint, in a server's LMDB environment.
 *
 * One record per (job, checkpoint id, unit, shard, array): the fp32 master,
 * and the optimizer state arrays. Each value is a 32-byte little-endian
 * header followed by the raw little-endian array:
 *
 *   off size field
 *     0    4 magic     "ZSC2"
 *     4    4 dtype     1 (f32)
 *     8    8 numel
 *    16    8 step      the version the state belongs to
 *    24    4 crc32c    of bytes 0..23 of the header, then of the array
 *    28    4 reserved  0
 *
 * A "ZSC1" record (written before the header was covered) has the CRC of
 * the array alone; it is still read.
 *
 * Keys: job NUL id(u64 BE) unit(u32 BE) index(u32 BE) kind(u8), so a
 * checkpoint's records are contiguous and deleting one is a prefix delete.
 * Reads check the header and the CRC; a damaged record is ZS_EIO naming it.
 * Storage never includes the network.
 */
#ifndef ZS_CKPT_H
#define ZS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "storage/kv.h"
#include "base/status.h"

enum ckpt_kind { CKPT_MASTER = 'p', CKPT_STATE0 = 'm', CKPT_STATE1 = 'v' };

#define CKPT_KEY_MAX (64 + 8 + 4 + 4 + 1)
#define CKPT_HDR 32

/* Builds the key; returns its length. */
size_t ckpt_key(uint8_t key[CKPT_KEY_MAX], const char *job, uint64_t id, uint32_t unit,
		uint32_t index, enum ckpt_kind kind);

/* Writes one array (numel floats) of a shard into txn's table. */
enum zs_status ckpt_put(struct zs_kv_txn *t, unsigned table, const char *job, uint64_t id,
			uint32_t unit, uint32_t index, enum ckpt_kind kind, uint64_t step,
			const float *data, uint64_t numel, struct zs_error *err);

/*
 * Reads one array into out (numel floats expected). ZS_ENOTFOUND when the
 * record is absent; ZS_EIO when its header, size or checksum is wrong.
 */
enum zs_status ckpt_get(struct zs_kv_txn *t, unsigned table, const char *job, uint64_t id,
			uint32_t unit, uint32_t index, enum ckpt_kind kind, uint64_t *step,
			float *out, uint64_t numel, struct zs_error *err);

/*
 * Reads elements [off, off + len) of one array (checked whole: header and
 * CRC) into out. ZS_EINVAL when the slice is outside the record.
 */
enum zs_status ckpt_get_slice(struct zs_kv_txn *t, unsigned table, const char *job,
			      uint64_t id, uint32_t unit, uint32_t index, enum ckpt_kind kind,
			      uint64_t off, uint64_t len, uint64_t *step, float *out,
			      struct zs_error *err);

/* Deletes every record of checkpoint id of job. */
enum zs_status ckpt_delete(struct zs_kv_txn *t, unsigned table, const char *job,
			   uint64_t id, struct zs_error *err);

#endif
