/*
 * dtls.h - the data plane encrypted (a job's data_tls): a tcp connection
 * that asks for it (a STARTTLS frame after the server's first nonce, the
 * job's name and the caller's role in it) runs a TLS 1.3 handshake by
 * OpenSSL keyed by the job's secret (an external PSK: HMAC-SHA256 of the
 * job's name and the role, keyed by the job's data-plane token, or by its
 * reader token for a reader), with an ECDHE exchange for forward secrecy
 * and no session tickets: each end proves it knows the secret, a
 * replayed handshake meets another server share and fails, and no one
 * without the secret can read or change what follows.
 *
 * After the handshake each direction's key and IV are exported from the
 * TLS session (SSL_export_keying_material) and the connection's bytes go
 * as TLS 1.3 records (net/records.h): in the kernel (kernel TLS) where it
 * has it, so sends and receives stay the socket's own, else in user space.
 * The HELLO and everything after it go inside.
 */
#ifndef ZS_NET_DTLS_H
#define ZS_NET_DTLS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "net/records.h"

#define ZS_DTLS_PSK 32

/* The handshake's key for job and role from secret (the job's token, or
 * for reader its reader token); -1 when OpenSSL fails. */
int zs_dtls_psk(const char *secret, const char *job, bool reader, uint8_t out[ZS_DTLS_PSK]);

/*
 * Runs the handshake on fd (blocking; bounded by fd's timeouts), as the
 * server (else the client) of the connection, keyed by psk for job and role;
 * then installs the records (the kernel's where it can) and sets
 * *rec. On failure nothing is left but the socket, which must be closed
 * (what OpenSSL read of it is gone); err says why.
 */
enum zs_status zs_dtls_handshake(int fd, bool server, const char *job, bool reader,
				 const uint8_t psk[ZS_DTLS_PSK], struct zs_records **rec,
				 struct zs_error *err);

/* The records of a connection (fd; server: its server's end) from the
 * keys the handshake exported, km: the client's sending key and IV, then
 * the server's; in the kernel where kernel is true and it can (it may
 * take one direction alone). ZS_ENOMEM, else ZS_OK. */
#define ZS_DTLS_KEYS (2 * (ZS_REC_KEY + ZS_REC_IV))
enum zs_status zs_dtls_records(int fd, bool server, const uint8_t km[ZS_DTLS_KEYS], bool kernel,
			       struct zs_records **rec, struct zs_error *err);

/* How a connection's records are made, for logs: "kernel TLS",
 * "user-space records" or, one direction each, "kernel TLS (send only)". */
const char *zs_dtls_mode(const struct zs_records *rec);

#endif
