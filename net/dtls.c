/*
 * dtls.c - the data plane's TLS 1.3 handshake (OpenSSL, an external PSK
 * with ECDHE) and the records that follow it: the kernel's where it can,
 * else user space's (net/dtls.h).
 */
#include "net/dtls.h"

#include <errno.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>

#include "base/env.h"
#include "base/log.h"
#include "base/util.h"

#ifndef SOL_TLS
#define SOL_TLS 282
#endif

#define PSK_LABEL "zshard data-plane tls psk v1"
#define EXPORT_LABEL "EXPORTER-zshard data-plane records v1"
#define SUITE "TLS_AES_256_GCM_SHA384"

static atomic_bool said_no_kernel;

int zs_dtls_psk(const char *secret, const char *job, bool reader, uint8_t out[ZS_DTLS_PSK])
{
	uint8_t msg[sizeof PSK_LABEL + 2 + 256];
	size_t jl = strnlen(job, 255), n = 0;
	unsigned len = ZS_DTLS_PSK;

	memcpy(msg, PSK_LABEL, sizeof PSK_LABEL); /* with its NUL */
	n += sizeof PSK_LABEL;
	msg[n++] = reader ? 'r' : 't';
	msg[n++] = '\0';
	memcpy(msg + n, job, jl);
	n += jl;
	return HMAC(EVP_sha256(), secret, (int)strlen(secret), msg, n, out, &len) &&
			       len == ZS_DTLS_PSK
		       ? 0
		       : -1;
}

/* -------------------------------------------------------- the handshake */

struct hs {
	char identity[8 + 256];
	const uint8_t *psk;
};

static SSL_SESSION *psk_session(SSL *ssl, const uint8_t *psk)
{
	static const unsigned char id[2] = {0x13, 0x02}; /* TLS_AES_256_GCM_SHA384 */
	const SSL_CIPHER *c = SSL_CIPHER_find(ssl, id);
	SSL_SESSION *s = c ? SSL_SESSION_new() : NULL;

	if (s && SSL_SESSION_set1_master_key(s, psk, ZS_DTLS_PSK) && SSL_SESSION_set_cipher(s, c) &&
	    SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION))
		return s;
	SSL_SESSION_free(s);
	return NULL;
}

/* client: the PSK it offers (OpenSSL takes the session's reference) */
static int use_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
		   SSL_SESSION **sess)
{
	struct hs *h = SSL_get_app_data(ssl);

	*sess = NULL;
	if (md && md != EVP_sha384()) /* a retry for another hash: none offered */
		return 1;
	if (!(*sess = psk_session(ssl, h->psk)))
		return 0;
	*id = (const unsigned char *)h->identity;
	*idlen = strlen(h->identity);
	return 1;
}

/* server: the PSK of the identity it expects, none for any other */
static int find_psk(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
	struct hs *h = SSL_get_app_data(ssl);

	*sess = NULL;
	if (idlen != strlen(h->identity) || memcmp(id, h->identity, idlen))
		return 1; /* the handshake fails: the server has no certificate */
	return (*sess = psk_session(ssl, h->psk)) != NULL;
}

static SSL_CTX *ctxs[2]; /* the client's, the server's */
static pthread_once_t ctxs_once = PTHREAD_ONCE_INIT;

static void ctxs_init(void)
{
	for (int i = 0; i < 2; i++) {
		SSL_CTX *c = SSL_CTX_new(i ? TLS_server_method() : TLS_client_method());
		/* TLS 1.3 alone, its AES-256-GCM suite, no tickets (each
		 * connection's handshake is its own) */
		if (c && (!SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) ||
			  !SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION) ||
			  !SSL_CTX_set_ciphersuites(c, SUITE) || !SSL_CTX_set_num_tickets(c, 0))) {
			SSL_CTX_free(c);
			c = NULL;
		}
		if (c)
			SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
		ctxs[i] = c;
	}
}

static SSL_CTX *ctx_of(bool server)
{
	pthread_once(&ctxs_once, ctxs_init);
	return ctxs[server];
}

static const char *ssl_why(char *buf, size_t len)
{
	unsigned long e = ERR_get_error();

	if (!e)
		return errno == EAGAIN || errno == EWOULDBLOCK ? "timed out"
		       : errno				       ? strerror(errno)
								       : "the peer closed the connection";
	ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

/* Installs direction which (TLS_TX or TLS_RX) of fd in the kernel. */
static bool kernel_dir(int fd, int which, const struct zs_rec_keys *k)
{
	struct tls12_crypto_info_aes_gcm_256 ci = {
		.info = {.version = TLS_1_3_VERSION, .cipher_type = TLS_CIPHER_AES_GCM_256}};
	bool ok;

	memcpy(ci.key, k->key, sizeof ci.key);
	memcpy(ci.salt, k->iv, sizeof ci.salt);
	memcpy(ci.iv, k->iv + sizeof ci.salt, sizeof ci.iv);
	/* rec_seq: 0, the first record after the handshake */
	ok = !setsockopt(fd, SOL_TLS, which, &ci, sizeof ci);
	OPENSSL_cleanse(&ci, sizeof ci);
	return ok;
}

enum zs_status zs_dtls_records(int fd, bool server, const uint8_t km[ZS_DTLS_KEYS], bool kernel,
			       struct zs_records **rec, struct zs_error *err)
{
	struct zs_rec_keys k[2]; /* the client's sending direction, the server's */
	bool tx_k = false, rx_k = false;

	for (int i = 0; i < 2; i++) {
		memcpy(k[i].key, km + i * (ZS_REC_KEY + ZS_REC_IV), ZS_REC_KEY);
		memcpy(k[i].iv, km + i * (ZS_REC_KEY + ZS_REC_IV) + ZS_REC_KEY, ZS_REC_IV);
	}
	/* the kernel's records where it has them (CONFIG_TLS) */
	if (kernel) {
		const char *what = "TCP_ULP tls";
		if (!setsockopt(fd, SOL_TCP, TCP_ULP, "tls", sizeof "tls")) {
			what = "TLS_TX";
			if ((tx_k = kernel_dir(fd, TLS_TX, &k[server])))
				what = "TLS_RX";
			rx_k = kernel_dir(fd, TLS_RX, &k[!server]);
		}
		if (!rx_k && !atomic_exchange(&said_no_kernel, true)) /* once a process */
			zs_info("data plane: no kernel TLS here (%s: %s): encrypted connections' records are made in user space",
				what, strerror(errno));
	}
	*rec = zs_records_new(&k[server], tx_k, &k[!server], rx_k);
	OPENSSL_cleanse(k, sizeof k);
	return *rec ? ZS_OK : zs_fail(err, ZS_ENOMEM, "out of memory (the connection's records)");
}

enum zs_status zs_dtls_handshake(int fd, bool server, const char *job, bool reader,
				 const uint8_t psk[ZS_DTLS_PSK], struct zs_records **rec,
				 struct zs_error *err)
{
	SSL_CTX *ctx = ctx_of(server);
	struct hs h = {.psk = psk};
	uint8_t km[ZS_DTLS_KEYS];
	char why[256];
	const char *env;
	enum zs_status st = ZS_OK;
	SSL *ssl;
	int rc;

	*rec = NULL;
	if (!ctx || !(ssl = SSL_new(ctx)))
		return zs_fail(err, ZS_ENOMEM, "cannot make a TLS context (OpenSSL)");
	snprintf(h.identity, sizeof h.identity, "%c:%.255s", reader ? 'r' : 't', job);
	SSL_set_app_data(ssl, &h);
	if (server)
		SSL_set_psk_find_session_callback(ssl, find_psk);
	else
		SSL_set_psk_use_session_callback(ssl, use_psk);
	SSL_set_fd(ssl, fd); /* a socket BIO that does not close fd */
	ERR_clear_error();
	errno = 0;
	rc = server ? SSL_accept(ssl) : SSL_connect(ssl);
	if (rc != 1) {
		st = zs_fail(err, errno == EAGAIN || errno == EWOULDBLOCK ? ZS_ETIMEDOUT : ZS_EINVAL,
			     "the data plane's TLS handshake for job '%s' (%s) failed: %s (both ends must hold the job's %s)",
			     job, reader ? "reader" : "trainer", ssl_why(why, sizeof why),
			     reader ? "reader token" : "token");
		goto out;
	}
	if (SSL_export_keying_material(ssl, km, sizeof km, EXPORT_LABEL, strlen(EXPORT_LABEL), NULL,
				       0, 0) != 1) {
		st = zs_fail(err, ZS_ENOMEM, "cannot export the TLS session's keys (OpenSSL)");
		goto out;
	}
	env = zs_env("ZSHARD_KTLS");
	st = zs_dtls_records(fd, server, km, !env || strcmp(env, "0"), rec, err);
out:
	OPENSSL_cleanse(km, sizeof km);
	SSL_set_quiet_shutdown(ssl, 1); /* no close_notify: the records carry on */
	SSL_free(ssl);
	return st;
}

const char *zs_dtls_mode(const struct zs_records *rec)
{
	bool t = zs_records_tx_kernel(rec), r = zs_records_rx_kernel(rec);

	return t && r ? "kernel TLS"
	       : t    ? "kernel TLS (sending; receiving in user space)"
	       : r    ? "kernel TLS (receiving; sending in user space)"
		      : "user-space records";
}
