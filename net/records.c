/*
 * records.c - TLS 1.3 application-data records made and opened in user
 * space (net/records.h), where the kernel has no TLS of its own.
 */
#include "net/records.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/env.h"
#include "base/log.h"
#include "net/sockio.h"

#define HDR 5
#define TAG 16
#define CT_DATA 0x17              /* application_data */
#define CT_HANDSHAKE 0x16         /* a KeyUpdate travels as one */
#define KEY_UPDATE 24             /* its handshake message type */
#define SECRET 32                 /* a traffic secret: SHA-256's length */
#define LIMIT_MAX (1ull << 24)    /* records per key: below 2^24.5 (RFC 8446 5.5) */
#define WIRE_MAX (ZS_REC_MAX + 256) /* a record's body at most (RFC 8446 5.2) */
#define BATCH 16                  /* records sent per write */

struct dir {
	EVP_CIPHER_CTX *ctx; /* keyed per generation; the nonce set per record */
	uint8_t iv[ZS_REC_IV];
	uint8_t secret[SECRET]; /* this generation's, from which the next comes */
	uint64_t seq;           /* records under this key (kernel: a bound on them) */
	uint64_t limit;         /* records a key seals */
	uint64_t updates;       /* keys renewed */
	int enc;
	bool kernel;
};

struct zs_records {
	struct dir tx, rx;
	uint8_t *tbuf;     /* sealed records on their way out */
	uint8_t *rbuf;     /* one record's body as it came */
	uint8_t *pt;       /* one record's plaintext, when the caller wanted less */
	size_t pt_off, pt_len;
};

/* HKDF-Expand-Label(secret, label, "", len) of RFC 8446 7.1 (SHA-256; len
 * at most one block) into out; -1 when OpenSSL fails. */
static int expand_label(const uint8_t secret[SECRET], const char *label, size_t len,
			uint8_t *out)
{
	uint8_t info[64], mac[SECRET];
	size_t ll = strlen(label), n = 0;
	unsigned ml = 0;

	info[n++] = (uint8_t)(len >> 8);
	info[n++] = (uint8_t)len;
	info[n++] = (uint8_t)(6 + ll);
	memcpy(info + n, "tls13 ", 6);
	n += 6;
	memcpy(info + n, label, ll);
	n += ll;
	info[n++] = 0;    /* no context */
	info[n++] = 0x01; /* HKDF-Expand's first (only) block */
	if (!HMAC(EVP_sha256(), secret, SECRET, info, n, mac, &ml) || ml != SECRET)
		return -1;
	memcpy(out, mac, len);
	OPENSSL_cleanse(mac, sizeof mac);
	return 0;
}

/* The next generation of d's keys (RFC 8446 7.2): its secret from this
 * one, its key and IV from it; the sequence starts again. */
static int next_key(struct dir *d)
{
	uint8_t key[ZS_REC_KEY];
	int rc = -1;

	if (!expand_label(d->secret, "traffic upd", SECRET, d->secret) &&
	    !expand_label(d->secret, "key", ZS_REC_KEY, key) &&
	    !expand_label(d->secret, "iv", ZS_REC_IV, d->iv) &&
	    EVP_CipherInit_ex(d->ctx, NULL, NULL, key, NULL, d->enc)) {
		d->seq = 0;
		d->updates++;
		rc = 0;
	}
	OPENSSL_cleanse(key, sizeof key);
	return rc;
}

static int dir_init(struct dir *d, const struct zs_rec_keys *k, bool kernel, int enc)
{
	uint8_t ikm[ZS_REC_KEY + ZS_REC_IV];
	unsigned ml = 0;

	d->kernel = kernel;
	d->enc = enc;
	d->limit = zs_env_uint("ZSHARD_TLS_RECORDS_PER_KEY", (unsigned)LIMIT_MAX, 2,
			       (unsigned)LIMIT_MAX);
	if (kernel)
		return 0;
	/* the first secret: HKDF-Extract of what the handshake exported */
	memcpy(ikm, k->key, ZS_REC_KEY);
	memcpy(ikm + ZS_REC_KEY, k->iv, ZS_REC_IV);
	if (!HMAC(EVP_sha256(), "zshard records", 14, ikm, sizeof ikm, d->secret, &ml))
		return -1;
	OPENSSL_cleanse(ikm, sizeof ikm);
	memcpy(d->iv, k->iv, ZS_REC_IV);
	d->ctx = EVP_CIPHER_CTX_new();
	if (!d->ctx || !EVP_CipherInit_ex(d->ctx, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) ||
	    !EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_SET_IVLEN, ZS_REC_IV, NULL) ||
	    !EVP_CipherInit_ex(d->ctx, NULL, NULL, k->key, NULL, enc))
		return -1;
	return 0;
}

struct zs_records *zs_records_new(const struct zs_rec_keys *tx, bool tx_kernel,
				  const struct zs_rec_keys *rx, bool rx_kernel)
{
	struct zs_records *r = calloc(1, sizeof *r);

	if (!r)
		return NULL;
	if (dir_init(&r->tx, tx, tx_kernel, 1) || dir_init(&r->rx, rx, rx_kernel, 0) ||
	    (!tx_kernel && !(r->tbuf = malloc((size_t)BATCH * (HDR + ZS_REC_MAX + 1 + TAG)))) ||
	    (!rx_kernel && (!(r->rbuf = malloc(WIRE_MAX)) || !(r->pt = malloc(WIRE_MAX))))) {
		zs_records_free(r);
		return NULL;
	}
	return r;
}

void zs_records_free(struct zs_records *r)
{
	if (!r)
		return;
	EVP_CIPHER_CTX_free(r->tx.ctx); /* wipes the key schedule */
	EVP_CIPHER_CTX_free(r->rx.ctx);
	OPENSSL_cleanse(&r->tx, sizeof r->tx);
	OPENSSL_cleanse(&r->rx, sizeof r->rx);
	if (r->pt)
		OPENSSL_cleanse(r->pt, WIRE_MAX);
	free(r->tbuf);
	free(r->rbuf);
	free(r->pt);
	free(r);
}

void zs_records_set_limit(struct zs_records *r, uint64_t records)
{
	records = records < 2 ? 2 : records > LIMIT_MAX ? LIMIT_MAX : records;
	r->tx.limit = r->rx.limit = records;
}

uint64_t zs_records_tx_updates(const struct zs_records *r) { return r->tx.updates; }
uint64_t zs_records_rx_updates(const struct zs_records *r) { return r->rx.updates; }

bool zs_records_tx_kernel(const struct zs_records *r) { return r->tx.kernel; }
bool zs_records_rx_kernel(const struct zs_records *r) { return r->rx.kernel; }

/* The record's nonce: the direction's IV xor its sequence number. */
static void nonce_of(const struct dir *d, uint8_t n[ZS_REC_IV])
{
	memcpy(n, d->iv, ZS_REC_IV);
	for (int i = 0; i < 8; i++)
		n[ZS_REC_IV - 1 - i] ^= (uint8_t)(d->seq >> (8 * i));
}

/* Seals the next take bytes of *iov (advanced past them) as one record of
 * inner type ct at out; its length on the wire, or 0 when OpenSSL fails. */
static size_t seal(struct dir *d, struct iovec **iov, size_t take, uint8_t ct, uint8_t *out)
{
	size_t body = take + 1 + TAG;
	uint8_t nonce[ZS_REC_IV], *p = out + HDR;
	int o;

	out[0] = CT_DATA;
	out[1] = out[2] = 3; /* legacy_record_version 0x0303 */
	out[3] = (uint8_t)(body >> 8);
	out[4] = (uint8_t)body;
	nonce_of(d, nonce);
	if (!EVP_EncryptInit_ex(d->ctx, NULL, NULL, NULL, nonce) ||
	    !EVP_EncryptUpdate(d->ctx, NULL, &o, out, HDR))
		return 0;
	while (take) {
		size_t k = take < (*iov)->iov_len ? take : (*iov)->iov_len;
		if (k && !EVP_EncryptUpdate(d->ctx, p, &o, (*iov)->iov_base, (int)k))
			return 0;
		p += k;
		take -= k;
		(*iov)->iov_base = (uint8_t *)(*iov)->iov_base + k;
		(*iov)->iov_len -= k;
		if (!(*iov)->iov_len)
			(*iov)++;
	}
	if (!EVP_EncryptUpdate(d->ctx, p, &o, &ct, 1) || !EVP_EncryptFinal_ex(d->ctx, p + 1, &o) ||
	    !EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_GET_TAG, TAG, p + 1))
		return 0;
	d->seq++;
	return HDR + body;
}

int zs_records_writev(struct zs_records *r, int fd, struct iovec *iov, int n)
{
	size_t total = 0;

	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (r->tx.kernel) {
		/* the kernel's records: at most one per 16 KiB and per write
		 * of it; at the limit this connection ends, and the next one's
		 * handshake brings new keys (the kernel sends no KeyUpdate here) */
		r->tx.seq += total / ZS_REC_MAX + (uint64_t)n + 1;
		if (r->tx.seq >= r->tx.limit) {
			zs_info("data plane: this connection's kernel TLS key sealed its %llu records: it ends, and the next one is keyed anew",
				(unsigned long long)r->tx.limit);
			errno = EKEYEXPIRED;
			return -1;
		}
		return zs_writev_full(fd, iov, n);
	}
	while (total) {
		size_t used = 0;
		struct iovec w;
		for (int b = 0; b < BATCH && total; b++) {
			size_t take = total < ZS_REC_MAX ? total : ZS_REC_MAX, k;
			if (r->tx.seq + 1 >= r->tx.limit) {
				/* the key's last record: a KeyUpdate, then the next key */
				uint8_t ku[5] = {KEY_UPDATE, 0, 0, 1, 0}; /* update_not_requested */
				struct iovec kv = {ku, sizeof ku}, *kp = &kv;
				if (!(k = seal(&r->tx, &kp, sizeof ku, CT_HANDSHAKE, r->tbuf + used)) ||
				    next_key(&r->tx)) {
					errno = ENOMEM;
					return -1;
				}
				used += k;
				continue; /* (a slot of the batch: it is smaller than a record) */
			}
			if (!(k = seal(&r->tx, &iov, take, CT_DATA, r->tbuf + used))) {
				errno = ENOMEM;
				return -1;
			}
			used += k;
			total -= take;
		}
		w = (struct iovec){r->tbuf, used};
		if (zs_writev_full(fd, &w, 1))
			return -1;
	}
	return 0;
}

/* Opens a record body of len bytes (rbuf) into out (len - TAG bytes);
 * the plaintext's length, or -1 (EBADMSG). */
static ssize_t open_into(struct zs_records *r, size_t len, uint8_t *out)
{
	struct dir *d = &r->rx;
	uint8_t nonce[ZS_REC_IV], hdr[HDR] = {CT_DATA, 3, 3, (uint8_t)(len >> 8), (uint8_t)len};
	size_t m = len - TAG;
	int o;

	if (d->seq >= d->limit) { /* the sender must have renewed its key by now */
		zs_warn("data plane: a record past the %llu a key may seal (the peer did not renew its key): the connection ends",
			(unsigned long long)d->limit);
		errno = EBADMSG;
		return -1;
	}
	nonce_of(d, nonce);
	if (!EVP_DecryptInit_ex(d->ctx, NULL, NULL, NULL, nonce) ||
	    !EVP_DecryptUpdate(d->ctx, NULL, &o, hdr, HDR) ||
	    !EVP_DecryptUpdate(d->ctx, out, &o, r->rbuf, (int)m) ||
	    !EVP_CIPHER_CTX_ctrl(d->ctx, EVP_CTRL_GCM_SET_TAG, TAG, r->rbuf + m) ||
	    EVP_DecryptFinal_ex(d->ctx, out + m, &o) <= 0)
		goto bad;
	d->seq++;
	while (m && !out[m - 1]) /* padding */
		m--;
	if (m == 6 && out[5] == CT_HANDSHAKE && out[0] == KEY_UPDATE && out[1] == 0 && out[2] == 0 &&
	    out[3] == 1 && out[4] <= 1) { /* the peer's next key, from the next record */
		if (next_key(d))
			goto bad;
		return 0;
	}
	if (!m || out[m - 1] != CT_DATA)
		goto bad;
	return (ssize_t)(m - 1);
bad:
	zs_warn("data plane: a record that does not open (tampered with, or sealed under another key): the connection ends");
	errno = EBADMSG;
	return -1;
}

int zs_records_read(struct zs_records *r, int fd, void *buf, size_t len)
{
	uint8_t *p = buf, h[HDR];
	size_t want = len;

	if (r->rx.kernel)
		return zs_read_full(fd, buf, len);
	while (want) {
		size_t body;
		ssize_t m;
		if (r->pt_len) {
			size_t k = r->pt_len < want ? r->pt_len : want;
			memcpy(p, r->pt + r->pt_off, k);
			r->pt_off += k;
			r->pt_len -= k;
			p += k;
			want -= k;
			continue;
		}
		if (zs_read_full(fd, h, HDR)) {
			if (!errno && want != len)
				errno = ECONNRESET;
			return -1;
		}
		body = (size_t)h[3] << 8 | h[4];
		if (h[0] != CT_DATA || h[1] != 3 || h[2] != 3 || body < TAG + 1 || body > WIRE_MAX) {
			zs_warn("data plane: not an application-data record (type %u, %zu bytes): the connection ends",
				h[0], body);
			errno = EBADMSG;
			return -1;
		}
		if (zs_read_full(fd, r->rbuf, body)) {
			if (!errno)
				errno = ECONNRESET;
			return -1;
		}
		/* straight into the caller's buffer when the record fits in
		 * what it wants (its inner type byte is overwritten next) */
		if (body - TAG <= want) {
			if ((m = open_into(r, body, p)) < 0)
				return -1;
			p += m;
			want -= (size_t)m;
		} else {
			if ((m = open_into(r, body, r->pt)) < 0)
				return -1;
			r->pt_off = 0;
			r->pt_len = (size_t)m;
		}
	}
	return 0;
}

/* ------------------------------------------------------- a connection's */

int zs_io_read(const struct zs_io *io, void *buf, size_t len)
{
	return io->rec ? zs_records_read(io->rec, io->fd, buf, len) : zs_read_full(io->fd, buf, len);
}

int zs_io_writev(const struct zs_io *io, struct iovec *iov, int n)
{
	return io->rec ? zs_records_writev(io->rec, io->fd, iov, n) : zs_writev_full(io->fd, iov, n);
}

int zs_io_drain(const struct zs_io *io, size_t len)
{
	char buf[16384];

	while (len) {
		size_t k = len < sizeof buf ? len : sizeof buf;
		if (zs_io_read(io, buf, k))
			return -1;
		len -= k;
	}
	return 0;
}
