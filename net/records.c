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

#include "base/log.h"
#include "net/sockio.h"

#define HDR 5
#define TAG 16
#define CT_DATA 0x17              /* application_data */
#define WIRE_MAX (ZS_REC_MAX + 256) /* a record's body at most (RFC 8446 5.2) */
#define BATCH 16                  /* records sent per write */

struct dir {
	EVP_CIPHER_CTX *ctx; /* keyed once; the nonce set per record */
	uint8_t iv[ZS_REC_IV];
	uint64_t seq;
	bool kernel;
};

struct zs_records {
	struct dir tx, rx;
	uint8_t *tbuf;     /* sealed records on their way out */
	uint8_t *rbuf;     /* one record's body as it came */
	uint8_t *pt;       /* one record's plaintext, when the caller wanted less */
	size_t pt_off, pt_len;
};

static int dir_init(struct dir *d, const struct zs_rec_keys *k, bool kernel, int enc)
{
	d->kernel = kernel;
	if (kernel)
		return 0;
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
	OPENSSL_cleanse(r->tx.iv, sizeof r->tx.iv);
	OPENSSL_cleanse(r->rx.iv, sizeof r->rx.iv);
	if (r->pt)
		OPENSSL_cleanse(r->pt, WIRE_MAX);
	free(r->tbuf);
	free(r->rbuf);
	free(r->pt);
	free(r);
}

bool zs_records_tx_kernel(const struct zs_records *r) { return r->tx.kernel; }
bool zs_records_rx_kernel(const struct zs_records *r) { return r->rx.kernel; }

/* The record's nonce: the direction's IV xor its sequence number. */
static void nonce_of(const struct dir *d, uint8_t n[ZS_REC_IV])
{
	memcpy(n, d->iv, ZS_REC_IV);
	for (int i = 0; i < 8; i++)
		n[ZS_REC_IV - 1 - i] ^= (uint8_t)(d->seq >> (8 * i));
}

/* Seals the next take bytes of *iov (advanced past them) as one record at
 * out; its length on the wire, or 0 when OpenSSL fails. */
static size_t seal(struct dir *d, struct iovec **iov, size_t take, uint8_t *out)
{
	size_t body = take + 1 + TAG;
	uint8_t nonce[ZS_REC_IV], ct = CT_DATA, *p = out + HDR;
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

	if (r->tx.kernel)
		return zs_writev_full(fd, iov, n);
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	while (total) {
		size_t used = 0;
		struct iovec w;
		for (int b = 0; b < BATCH && total; b++) {
			size_t take = total < ZS_REC_MAX ? total : ZS_REC_MAX, k;
			if (!(k = seal(&r->tx, &iov, take, r->tbuf + used))) {
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
