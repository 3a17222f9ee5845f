/*
 * tls_probe.c - why a control-plane connection failed, when TLS is why
 * (see ctrl/tls.h): gRPC says "Socket closed" when a plaintext client meets
 * a TLS daemon and when a daemon refuses a client's certificate, and
 * "failed to connect to all addresses" around either. A handshake of our
 * own with the peer, with this process's identity (bounded: PROBE_MS, a
 * few milliseconds when the peer answers), tells the cases apart: the peer speaks no TLS, speaks TLS to a
 * process that has none, refused our certificate (its alert, by name), or
 * we refused its certificate (the verification's error, by name).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "base/util.h"
#include "ctrl/tls.h"

#define PROBE_MS 5000 /* connect and handshake (a loaded machine may be slow) */
#define ALERT_MS 500  /* a TLS 1.3 server's verdict on our certificate, after it */

/* host and port of "host:port" or "[v6]:port"; false for other forms */
static bool split_addr(const char *addr, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon;

	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');
		if (!end || end[1] != ':' || (size_t)(end - addr - 1) >= hlen)
			return false;
		snprintf(host, hlen, "%.*s", (int)(end - addr - 1), addr + 1);
		snprintf(port, plen, "%s", end + 2);
		return true;
	}
	colon = strrchr(addr, ':');
	if (!colon || colon == addr || strchr(addr, '/') || (size_t)(colon - addr) >= hlen)
		return false;
	snprintf(host, hlen, "%.*s", (int)(colon - addr), addr);
	snprintf(port, plen, "%s", colon + 1);
	return port[0] != '\0';
}

static bool wait_fd(int fd, short ev, int64_t until)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int64_t left = until - zs_now_ms();

	return left > 0 && poll(&p, 1, (int)left) == 1;
}

static int connect_to(const char *host, const char *port, int64_t until)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *a;
	int fd = -1;

	if (getaddrinfo(host, port, &hints, &res))
		return -1;
	for (a = res; a && fd < 0; a = a->ai_next) {
		int e = 0;
		socklen_t el = sizeof e;
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) &&
		    (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, until) ||
		     getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) || e)) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	return fd;
}

/* this process's identity into a client context (under tls.h's lock) */
static void load_identity(const char *ca, const char *cert, const char *key, void *arg)
{
	SSL_CTX *x = arg;
	BIO *b;
	X509 *c;
	EVP_PKEY *k;

	if (!ca)
		return;
	if ((b = BIO_new_mem_buf(ca, -1))) {
		while ((c = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
			X509_STORE_add_cert(SSL_CTX_get_cert_store(x), c);
			X509_free(c);
		}
		BIO_free(b);
	}
	if ((b = BIO_new_mem_buf(cert, -1))) {
		if ((c = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
			SSL_CTX_use_certificate(x, c);
			X509_free(c);
		}
		BIO_free(b);
	}
	if ((b = BIO_new_mem_buf(key, -1))) {
		if ((k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL))) {
			SSL_CTX_use_PrivateKey(x, k);
			EVP_PKEY_free(k);
		}
		BIO_free(b);
	}
	SSL_CTX_set_verify(x, SSL_VERIFY_PEER, NULL);
	ERR_clear_error();
}

enum peer_tls { P_UNKNOWN, P_NOT_TLS, P_TLS_OK, P_WE_REFUSED, P_THEY_REFUSED, P_TLS_FAILED };

/* The handshake (and, after it, a moment for the peer's verdict). */
static enum peer_tls handshake(SSL *s, int fd, int64_t until, char *what, size_t len)
{
	unsigned long e;
	int rc, reason;
	char one;

	for (;;) {
		ERR_clear_error();
		rc = SSL_connect(s);
		if (rc == 1)
			break;
		int w = SSL_get_error(s, rc);
		if (w == SSL_ERROR_WANT_READ && wait_fd(fd, POLLIN, until))
			continue;
		if (w == SSL_ERROR_WANT_WRITE && wait_fd(fd, POLLOUT, until))
			continue;
		if (w == SSL_ERROR_WANT_READ || w == SSL_ERROR_WANT_WRITE)
			return P_UNKNOWN; /* no answer within the bound */
		e = ERR_peek_last_error();
		reason = ERR_GET_REASON(e);
		if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) {
			snprintf(what, len, "%s",
				 X509_verify_cert_error_string(SSL_get_verify_result(s)));
			return P_WE_REFUSED;
		}
		if (e && ERR_reason_error_string(e) && strstr(ERR_reason_error_string(e), "alert")) {
			snprintf(what, len, "%s", ERR_reason_error_string(e));
			return P_THEY_REFUSED;
		}
		/* no TLS record came back: a plaintext daemon's bytes, or a close */
		if (!e || reason == SSL_R_WRONG_VERSION_NUMBER ||
		    reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
		    reason == SSL_R_UNEXPECTED_EOF_WHILE_READING || reason == SSL_R_HTTP_REQUEST)
			return P_NOT_TLS;
		snprintf(what, len, "%s", ERR_reason_error_string(e) ? ERR_reason_error_string(e)
								      : "unknown");
		return P_TLS_FAILED;
	}
	/* TLS 1.3: the server checks our certificate after our Finished */
	for (int64_t verdict = zs_now_ms() + ALERT_MS;;) {
		ERR_clear_error();
		rc = SSL_read(s, &one, 1);
		if (rc > 0)
			return P_TLS_OK;
		int w = SSL_get_error(s, rc);
		if (w == SSL_ERROR_WANT_READ && wait_fd(fd, POLLIN, verdict))
			continue;
		if (w == SSL_ERROR_WANT_READ)
			return P_TLS_OK; /* no verdict: it took us */
		e = ERR_peek_last_error();
		snprintf(what, len, "%s",
			 e && ERR_GET_REASON(e) != SSL_R_UNEXPECTED_EOF_WHILE_READING &&
					 ERR_reason_error_string(e)
				 ? ERR_reason_error_string(e)
				 : "it closed the connection after the handshake");
		return P_THEY_REFUSED;
	}
}

enum zs_status zs_tls_diagnose(const char *addr, bool tls, char *why, size_t len)
{
	char host[256], port[32], what[256] = "";
	int64_t until = zs_now_ms() + PROBE_MS;
	enum peer_tls r = P_UNKNOWN;
	bool mine = tls && zs_tls_on(); /* the connection's own mode, not the process's */
	SSL_CTX *x;
	SSL *s = NULL;
	int fd;

	why[0] = '\0';
	if (!split_addr(addr, host, sizeof host, port, sizeof port))
		return ZS_OK;
	x = SSL_CTX_new(TLS_client_method());
	if (!x)
		return ZS_OK;
	SSL_CTX_set_verify(x, SSL_VERIFY_NONE, NULL);
	if (mine)
		zs_tls_use(load_identity, x);
	fd = connect_to(host, port, until);
	if (fd >= 0 && (s = SSL_new(x))) {
		struct in6_addr ip;
		/* the name check gRPC makes: the target's address or host */
		if (inet_pton(AF_INET, host, &ip) == 1 || inet_pton(AF_INET6, host, &ip) == 1)
			X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), host);
		else
			SSL_set1_host(s, host);
		SSL_set_fd(s, fd);
		r = handshake(s, fd, until, what, sizeof what);
	}
	SSL_free(s);
	if (fd >= 0)
		close(fd);
	SSL_CTX_free(x);
	ERR_clear_error();
	if (!mine && r != P_NOT_TLS && r != P_UNKNOWN) {
		if (zs_tls_on()) /* a plaintext connection of a process that has one */
			snprintf(why, len,
				 "%s speaks TLS and this connection to it is plaintext (an etcd "
				 "endpoint given as http:// or bare where https:// is meant?)",
				 addr);
		else
			snprintf(why, len,
				 "%s speaks TLS and this process has no TLS identity: give it "
				 "--tls-ca, --tls-cert and --tls-key (libzshard: $ZSHARD_TLS_CA, "
				 "_CERT and _KEY)",
				 addr);
		return ZS_EPROTO;
	}
	if (!mine)
		return ZS_OK;
	switch (r) {
	case P_NOT_TLS:
		snprintf(why, len,
			 "TLS: %s does not speak TLS (a daemon started without --tls-ca, "
			 "--tls-cert and --tls-key?); this process does",
			 addr);
		return ZS_EPROTO;
	case P_WE_REFUSED:
		snprintf(why, len,
			 "TLS: this process refused the certificate of %s (%s): it must be signed "
			 "by the CA of this process's --tls-ca and name the address dialled",
			 addr, what);
		return ZS_EPROTO;
	case P_THEY_REFUSED:
		snprintf(why, len,
			 "TLS: %s refused this process's certificate (%s): it must be signed by "
			 "the CA that peer trusts and allow client use",
			 addr, what);
		return ZS_EPROTO;
	case P_TLS_FAILED:
		snprintf(why, len, "TLS: the handshake with %s failed (%s)", addr, what);
		return ZS_EPROTO;
	default:
		return ZS_OK;
	}
}

enum zs_status zs_tls_cert_expiry(const char *pem, int64_t *not_after, struct zs_error *err)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
	const ASN1_TIME *t = x ? X509_get0_notAfter(x) : NULL;
	struct tm tm;
	enum zs_status st = ZS_OK;

	if (!t || !ASN1_TIME_to_tm(t, &tm))
		st = zs_fail(err, ZS_EINVAL, "the certificate (PEM) cannot be read");
	else
		*not_after = (int64_t)timegm(&tm);
	X509_free(x);
	BIO_free(b);
	return st;
}
