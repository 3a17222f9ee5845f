/*
 * seal.h - the coordinator's secret key and what it seals: each job's
 * data-plane token is kept in the catalog (LMDB or etcd) sealed with
 * AES-256-GCM under a 32-byte key that lives in a file of its own (0600;
 * systemd's LoadCredential=, a Kubernetes Secret), so a copy of the catalog
 * (a backup, an etcd snapshot, a reader of etcd) holds no credential. The
 * job's name and incarnation are authenticated with it: a sealed token
 * moved to another job's record does not open.
 */
#ifndef ZS_CTRL_SEAL_H
#define ZS_CTRL_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ZS_SEAL_KEY_LEN 32
/* what sealing adds to a plaintext: a 12-byte nonce and a 16-byte tag */
#define ZS_SEAL_OVERHEAD 28

/*
 * The key in path: 32 bytes, or 64 hex digits (a newline after them is
 * allowed). Refused, naming the file and why: missing, unreadable, of
 * another length, readable by others or writable by its group. create: a missing file
 * is made (0600, 32 random bytes) and said in the log.
 */
enum zs_status zs_seal_key_load(const char *path, int create, uint8_t key[ZS_SEAL_KEY_LEN],
				struct zs_error *err);

/* Seals pt (n bytes) into out (n + ZS_SEAL_OVERHEAD bytes), with aad
 * authenticated. */
enum zs_status zs_seal(const uint8_t key[ZS_SEAL_KEY_LEN], const void *aad, size_t aad_len,
		       const void *pt, size_t n, uint8_t *out, struct zs_error *err);
/* Opens what zs_seal made (len bytes) into out (len - ZS_SEAL_OVERHEAD
 * bytes); ZS_EPROTO when the key, the aad or the bytes are not the ones it
 * was sealed with. */
enum zs_status zs_unseal(const uint8_t key[ZS_SEAL_KEY_LEN], const void *aad, size_t aad_len,
			 const uint8_t *in, size_t len, void *out, struct zs_error *err);

#endif
