/*
 * tls.h - mutual TLS on the control plane (gRPC's SSL credentials): one
 * identity per process (a certificate, its key, and the CA that signs every
 * peer's), used both by the gRPC servers it runs and by every channel it
 * opens. Each side presents its certificate and checks the other's against
 * the CA; a server refuses clients without one. Off unless configured, by
 * flags (daemons, zshardctl: zs_tls_configure) or, in libzshard, by the
 * environment (ZSHARD_TLS_CA, ZSHARD_TLS_CERT, ZSHARD_TLS_KEY). Key
 * material is never logged or put in an error message: files are named.
 */
#ifndef ZS_CTRL_TLS_H
#define ZS_CTRL_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/*
 * Reads the three PEM files (all three, or none: every argument NULL turns
 * TLS off). Fails with ZS_EINVAL naming the file that is missing, unreadable
 * or not PEM of the kind expected; nothing changes then.
 */
enum zs_status zs_tls_configure(const char *ca_file, const char *cert_file, const char *key_file,
				struct zs_error *err);
/* From ZSHARD_TLS_CA / _CERT / _KEY, unless zs_tls_configure ran. */
enum zs_status zs_tls_from_env(struct zs_error *err);
/* A program's flags (any of them given: zs_tls_configure), else the
 * environment's. */
enum zs_status zs_tls_setup(const char *ca_file, const char *cert_file, const char *key_file,
			    struct zs_error *err);
bool zs_tls_on(void);
/* Copies of this process's CA, certificate and key (PEM), for a server of
 * its own (the metrics endpoint); all NULL when TLS is off. Give them back
 * with zs_tls_identity_free (the key is wiped). */
enum zs_status zs_tls_identity(char **ca, char **cert, char **key, struct zs_error *err);
void zs_tls_identity_free(char *ca, char *cert, char *key);
/* When the (first) certificate of pem stops being valid: *not_after, Unix
 * seconds (the metrics' zshard_tls_certificate_expiry_timestamp_seconds,
 * which an alert watches). ZS_EINVAL when pem holds none. */
enum zs_status zs_tls_cert_expiry(const char *pem, int64_t *not_after, struct zs_error *err);

/* Calls fn with this process's PEM strings (all NULL when TLS is off),
 * under the configuration's lock: fn copies what it needs. */
void zs_tls_use(void (*fn)(const char *ca, const char *cert, const char *key, void *arg),
		void *arg);

/*
 * After a connection to addr ("host:port") failed in a way TLS can cause
 * (gRPC's "Socket closed", a failed handshake): a handshake of this
 * process's own with addr, in the connection's mode (tls: with this
 * process's identity; otherwise none, as a plaintext channel, such as one
 * to an http:// etcd endpoint, would be, whatever the process has) (bounded: 5 s, a fraction of a second when
 * the peer answers) says whether TLS is why.
 * ZS_EPROTO with why (which side refused what: the peer speaks no TLS,
 * speaks it to a process without an identity, refused our certificate
 * naming its alert, or we refused its certificate naming the check that
 * failed); ZS_OK with why empty when TLS is not the cause or it cannot
 * tell (ctrl/tls_probe.c).
 */
enum zs_status zs_tls_diagnose(const char *addr, bool tls, char *why, size_t len);

/* For ctrl/rpc.c: the credentials to serve and to connect with (insecure
 * ones when TLS is off). Release with grpc's *_credentials_release. */
struct grpc_server_credentials;
struct grpc_channel_credentials;
struct grpc_server_credentials *zs_tls_server_creds(void);
struct grpc_channel_credentials *zs_tls_channel_creds(void);

#endif
