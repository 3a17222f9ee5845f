/*
 * seal.c - the coordinator's secret key and AES-256-GCM sealing (see
 * ctrl/seal.h), by OpenSSL's EVP interface.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "ctrl/seal.h"

#define NONCE_LEN 12
#define TAG_LEN 16

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A new key file at path (it must not exist): 32 random bytes, 0600. */
static enum zs_status create_key(const char *path, struct zs_error *err)
{
	uint8_t k[ZS_SEAL_KEY_LEN];
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t w;

	if (fd < 0)
		return zs_fail(err, ZS_EIO, "cannot create the secret key %s: %s", path,
			       strerror(errno));
	if (zs_random_bytes(k, sizeof k)) {
		close(fd);
		unlink(path);
		return zs_fail(err, ZS_EIO, "no random bytes for the secret key: %s", strerror(errno));
	}
	w = write(fd, k, sizeof k);
	OPENSSL_cleanse(k, sizeof k);
	if (w != (ssize_t)sizeof k || fsync(fd)) {
		close(fd);
		unlink(path);
		return zs_fail(err, ZS_EIO, "cannot write the secret key %s", path);
	}
	close(fd);
	zs_info("made a secret key for the catalog's job tokens: %s (keep it with the catalog's backups, apart from them)",
		path);
	return ZS_OK;
}

enum zs_status zs_seal_key_load(const char *path, int create, uint8_t key[ZS_SEAL_KEY_LEN],
				struct zs_error *err)
{
	uint8_t buf[2 * ZS_SEAL_KEY_LEN + 2];
	struct stat sb;
	enum zs_status st;
	ssize_t n;
	int fd;

	if (create && access(path, F_OK) && errno == ENOENT && (st = create_key(path, err)))
		return st;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return zs_fail(err, ZS_EINVAL, "cannot read the secret key %s: %s", path,
			       strerror(errno));
	/* the owner's, or its group's to read (a Kubernetes Secret mounted
	 * 0440 for the pod's fsGroup); never others' */
	if (fstat(fd, &sb) || (sb.st_mode & 027)) {
		close(fd);
		return zs_fail(err, ZS_EINVAL,
			       "the secret key %s may be read by others or written by its group (mode %03o): make it 0600, 0400 or 0440",
			       path, (unsigned)(sb.st_mode & 0777));
	}
	n = read(fd, buf, sizeof buf);
	close(fd);
	if (n == ZS_SEAL_KEY_LEN) {
		memcpy(key, buf, ZS_SEAL_KEY_LEN);
	} else if (n == 2 * ZS_SEAL_KEY_LEN || (n == 2 * ZS_SEAL_KEY_LEN + 1 && buf[n - 1] == '\n')) {
		for (int i = 0; i < ZS_SEAL_KEY_LEN; i++) {
			int hi = hexval(buf[2 * i]), lo = hexval(buf[2 * i + 1]);
			if (hi < 0 || lo < 0) {
				OPENSSL_cleanse(buf, sizeof buf);
				OPENSSL_cleanse(key, ZS_SEAL_KEY_LEN);
				return zs_fail(err, ZS_EINVAL,
					       "the secret key %s is neither 32 bytes nor 64 hex digits",
					       path);
			}
			key[i] = (uint8_t)(hi << 4 | lo);
		}
	} else {
		OPENSSL_cleanse(buf, sizeof buf);
		return zs_fail(err, ZS_EINVAL,
			       "the secret key %s holds %zd bytes: it is 32 bytes, or 64 hex digits (head -c 32 /dev/urandom > FILE)",
			       path, n);
	}
	OPENSSL_cleanse(buf, sizeof buf);
	return ZS_OK;
}

/* One AES-256-GCM pass: enc 1 seals, 0 opens (tag: in or out). */
static int gcm(int enc, const uint8_t *key, const uint8_t *nonce, const void *aad, size_t aad_len,
	       const uint8_t *in, size_t n, uint8_t *out, uint8_t *tag)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int len = 0, ok;

	ok = x && EVP_CipherInit_ex(x, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
	     EVP_CipherInit_ex(x, NULL, NULL, key, nonce, enc) == 1 &&
	     EVP_CipherUpdate(x, NULL, &len, aad, (int)aad_len) == 1 &&
	     EVP_CipherUpdate(x, out, &len, in, (int)n) == 1 &&
	     (enc || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1) &&
	     EVP_CipherFinal_ex(x, out + len, &len) == 1 &&
	     (!enc || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1);
	EVP_CIPHER_CTX_free(x);
	return ok ? 0 : -1;
}

enum zs_status zs_seal(const uint8_t key[ZS_SEAL_KEY_LEN], const void *aad, size_t aad_len,
		       const void *pt, size_t n, uint8_t *out, struct zs_error *err)
{
	if (zs_random_bytes(out, NONCE_LEN))
		return zs_fail(err, ZS_EIO, "no random bytes for a nonce: %s", strerror(errno));
	if (gcm(1, key, out, aad, aad_len, pt, n, out + NONCE_LEN, out + NONCE_LEN + n))
		return zs_fail(err, ZS_EINTERNAL, "AES-256-GCM failed (OpenSSL)");
	return ZS_OK;
}

enum zs_status zs_unseal(const uint8_t key[ZS_SEAL_KEY_LEN], const void *aad, size_t aad_len,
			 const uint8_t *in, size_t len, void *out, struct zs_error *err)
{
	uint8_t tag[TAG_LEN];

	if (len < ZS_SEAL_OVERHEAD)
		return zs_fail(err, ZS_EPROTO, "a sealed value of %zu bytes (at least %d)", len,
			       ZS_SEAL_OVERHEAD);
	memcpy(tag, in + len - TAG_LEN, TAG_LEN);
	if (gcm(0, key, in, aad, aad_len, in + NONCE_LEN, len - ZS_SEAL_OVERHEAD, out, tag)) {
		OPENSSL_cleanse(out, len - ZS_SEAL_OVERHEAD);
		return zs_fail(err, ZS_EPROTO,
			       "it does not open with this key (sealed with another, or altered)");
	}
	return ZS_OK;
}
