/*
 * records.h - an encrypted data-plane connection's byte stream: TLS 1.3
 * application-data records (RFC 8446 section 5.2; AES-256-GCM, a 5-byte
 * header as the additional data, the per-record nonce the direction's IV
 * xor its sequence number, the inner content type after the data), each
 * direction keyed on its own (net/dtls.h makes the keys).
 *
 * A direction the kernel took (kernel TLS: TCP_ULP "tls", TLS_TX/TLS_RX)
 * needs nothing here: the socket's own reads and writes are the records.
 * Where the kernel has no TLS (CONFIG_TLS unset, as on this project's
 * build machines), the same records are made and opened here with
 * OpenSSL's AES-GCM: the two ends need not agree on which of them does
 * it, the wire is the same.
 *
 * Each direction has one user at a time (a connection's sender thread, or
 * its writer under a lock; its receiver thread): the two directions share
 * nothing.
 *
 * Keys are renewed before AES-GCM's limit (RFC 8446 5.5: 2^24.5 full
 * records per key): a direction sends a KeyUpdate (TLS 1.3's handshake
 * message inside a record, section 4.6.3) as the last record of each
 * 2^24 (zs_records_set_limit), then seals under the next key, derived as
 * TLS 1.3 derives it (section 7.2: the next traffic secret from this one by
 * HKDF-Expand-Label "traffic upd", its key and IV by "key" and "iv"; the
 * first secret an HKDF-Extract of the handshake's exported key and IV).
 * The receiver takes the next key at the KeyUpdate, and refuses records
 * past the limit under one key. A direction the kernel does cannot send
 * a KeyUpdate here: at the limit it ends the connection (EKEYEXPIRED), and
 * the next connection's handshake brings new keys.
 */
#ifndef ZS_NET_RECORDS_H
#define ZS_NET_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define ZS_REC_KEY 32
#define ZS_REC_IV 12
#define ZS_REC_MAX 16384 /* plaintext bytes per record (TLS's bound) */

struct zs_records;

/* A direction's keys: its AES-256 key and its IV; sequence numbers start
 * at 0 (the handshake's records are OpenSSL's, not these). */
struct zs_rec_keys {
	uint8_t key[ZS_REC_KEY];
	uint8_t iv[ZS_REC_IV];
};

/* The record layer of a connection whose sending (tx) and receiving (rx)
 * directions are here unless the kernel took them (tx_kernel, rx_kernel):
 * NULL when out of memory. */
struct zs_records *zs_records_new(const struct zs_rec_keys *tx, bool tx_kernel,
				  const struct zs_rec_keys *rx, bool rx_kernel);
void zs_records_free(struct zs_records *r);
/* The records sealed under one key before it is renewed (default and
 * bound: 2^24; tests lower it; at least 2), for records made after. */
void zs_records_set_limit(struct zs_records *r, uint64_t records);
/* How many times each direction renewed its key. */
uint64_t zs_records_tx_updates(const struct zs_records *r);
uint64_t zs_records_rx_updates(const struct zs_records *r);
/* Which directions the kernel does. */
bool zs_records_tx_kernel(const struct zs_records *r);
bool zs_records_rx_kernel(const struct zs_records *r);

/* zs_writev_full's and zs_read_full's contracts (net/sockio.h), over the
 * records of fd: -1 with errno; EBADMSG for a record that does not open
 * (tampered with, or made under another key: the connection is over). */
int zs_records_writev(struct zs_records *r, int fd, struct iovec *iov, int n);
int zs_records_read(struct zs_records *r, int fd, void *buf, size_t len);

/* A data-plane connection's socket and, once it is encrypted, its records
 * (NULL: plain). Its reads and writes go through these, whichever. */
struct zs_io {
	int fd;
	struct zs_records *rec;
};
int zs_io_read(const struct zs_io *io, void *buf, size_t len);
int zs_io_writev(const struct zs_io *io, struct iovec *iov, int n);
/* Reads and drops len bytes. */
int zs_io_drain(const struct zs_io *io, size_t len);

#endif
