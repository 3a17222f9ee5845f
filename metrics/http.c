/*
 * http.c - the metrics endpoint: libmicrohttpd serves GET (or HEAD)
 * /metrics from one internal polling thread; any other path is 404, any
 * other method 405. The listening socket is ours (bound to exactly the
 * address given, so a port of 0 can be read back); connections are bounded
 * in number (in all, and from one address) and idle time, so a stuck or
 * hostile client cannot hold the daemon nor its scrapers out; a connection
 * refused for that is counted (zshard_metrics_refused_connections_total),
 * and said in the log once a minute at most, with the count, not once each.
 * With the daemon's certificate (mTLS on) it serves https only (GnuTLS,
 * libmicrohttpd's TLS), and with a clients' CA it answers only a client
 * whose certificate that CA signed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "metrics/metrics.h"

#define HTTP_TIMEOUT_S 5
#define HTTP_MAX_CONNS 64
#define HTTP_PER_IP 8
#define REFUSED_LOG_MS 60000
/* GnuTLS's names for what the control plane accepts (ctrl/tls.c): TLS 1.3,
 * or 1.2 with ECDHE and AES-GCM */
#define TLS_PRIORITIES                                                                        \
	"SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:" \
	"+CHACHA20-POLY1305:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA"

struct zs_metrics_http {
	struct MHD_Daemon *d;
	struct zs_metrics *m;
	struct zs_series *refused;
	bool certified; /* clients must show a certificate of the CA */
	/* refusals since the last line said them, and when it was */
	atomic_uint_fast64_t unsaid;
	_Atomic int64_t said_ms;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type, char *body,
			     size_t len, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result rc;

	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

/* Whether c's client showed a certificate the clients' CA signed (GnuTLS
 * checked it against the trust libmicrohttpd was given). */
static bool client_certified(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
	unsigned status = 1, n = 0;

	return s && gnutls_certificate_get_peers(s, &n) && n &&
	       gnutls_certificate_verify_peers2(s, &status) == GNUTLS_E_SUCCESS && status == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_len, void **state)
{
	struct zs_metrics_http *h = cls;
	static const char text[] = "text/plain; charset=utf-8";
	char *body;
	size_t len;

	(void)version;
	(void)upload;
	if (!*state) { /* the headers: answer once the (empty) body is read */
		*state = h;
		return MHD_YES;
	}
	if (h->certified && !client_certified(c)) {
		zs_series_add(h->refused, 1);
		return reply(c, MHD_HTTP_FORBIDDEN, text,
			     (char *)"this endpoint answers clients with a certificate of the cluster's CA\n",
			     70, MHD_RESPMEM_PERSISTENT);
	}
	if (*upload_len) { /* a body nobody asked for: ignored */
		*upload_len = 0;
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, (char *)"only GET and HEAD\n", 18,
			     MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND, text,
			     (char *)"zshard serves its metrics at /metrics\n", 38,
			     MHD_RESPMEM_PERSISTENT);
	body = zs_metrics_render(h->m, &len);
	if (!body)
		return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, (char *)"out of memory\n", 14,
			     MHD_RESPMEM_PERSISTENT);
	return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
		     MHD_RESPMEM_MUST_FREE);
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
	struct zs_metrics_http *h = cls;
	char msg[512];

	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	/* a connection refused at a limit: counted, said once a minute */
	if (h && (strstr(msg, "connection limit") || strstr(msg, "per IP") ||
		  strstr(msg, "too many connections"))) {
		int64_t now = zs_now_ms(), last = atomic_load(&h->said_ms);
		uint64_t n = atomic_fetch_add(&h->unsaid, 1) + 1;
		zs_series_add(h->refused, 1);
		if ((!last || now - last >= REFUSED_LOG_MS) &&
		    atomic_compare_exchange_strong(&h->said_ms, &last, now)) {
			atomic_fetch_sub(&h->unsaid, n);
			zs_warn("metrics endpoint: %llu connection(s) refused at its limits (%d in all, %d from one address, %d s idle) since the last such line: %s",
				(unsigned long long)n, HTTP_MAX_CONNS, HTTP_PER_IP, HTTP_TIMEOUT_S, msg);
		}
		return;
	}
	zs_warn("metrics endpoint: %s", msg);
}

/* A listening socket at addr; -1 with err. bound: HOST:PORT as bound. */
static int listen_at(const char *addr, char *bound, size_t bound_len, struct zs_error *err)
{
	char host[ZS_HOST_MAX], port_s[8], ip[INET6_ADDRSTRLEN];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	uint16_t port;
	int fd, one = 1, rc;

	if (zs_parse_hostport(addr, host, &port, err))
		return -1;
	snprintf(port_s, sizeof port_s, "%u", port);
	if ((rc = getaddrinfo(host, port_s, &hints, &ai))) {
		zs_fail(err, ZS_EINVAL, "metrics address '%s': %s", addr, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		zs_fail(err, ZS_EUNAVAIL, "cannot serve metrics at %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	if (sa.ss_family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
		snprintf(bound, bound_len, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
		snprintf(bound, bound_len, "%s:%u", ip, ntohs(s4->sin_port));
	}
	return fd;
}

enum zs_status zs_metrics_http_start(struct zs_metrics *m, const char *addr,
				     const struct zs_metrics_tls *tls, char *bound,
				     size_t bound_len, struct zs_metrics_http **out,
				     struct zs_error *err)
{
	struct zs_metrics_http *h;
	int fd;

	*out = NULL;
	if ((fd = listen_at(addr, bound, bound_len, err)) < 0)
		return err->code;
	if (!(h = calloc(1, sizeof *h))) {
		close(fd);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	h->m = m;
	h->refused = zs_metrics_counter(m, "zshard_metrics_refused_connections_total",
					"Connections to this endpoint refused at its limits, or "
					"without a client certificate where one is required.",
					"");
	if (tls && (!tls->cert || !tls->key)) {
		close(fd);
		free(h);
		return zs_fail(err, ZS_EINVAL, "metrics over TLS need a certificate and its key");
	}
	if (tls && !MHD_is_feature_supported(MHD_FEATURE_TLS)) {
		close(fd);
		free(h);
		return zs_fail(err, ZS_EUNAVAIL,
			       "cannot serve metrics over TLS at %s: this libmicrohttpd has no TLS", bound);
	}
	h->certified = tls && tls->clients_ca;
	/* the TLS options last (MHD_OPTION_END ends the list where tls is
	 * NULL); the PEMs are read here only (GnuTLS keeps its own
	 * credentials); a clients' CA makes GnuTLS ask clients for a
	 * certificate and check it against that CA */
	struct MHD_OptionItem tls_opts[] = {
		{MHD_OPTION_HTTPS_MEM_KEY, 0, tls ? (void *)tls->key : NULL},
		{MHD_OPTION_HTTPS_MEM_CERT, 0, tls ? (void *)tls->cert : NULL},
		{MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES},
		{h->certified ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, 0,
		 h->certified ? (void *)tls->clients_ca : NULL},
		{MHD_OPTION_END, 0, NULL},
	};
	h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
					(tls ? MHD_USE_TLS : 0),
				0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_log, h,
				MHD_OPTION_LISTEN_SOCKET, fd,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_PER_IP,
				tls ? MHD_OPTION_ARRAY : MHD_OPTION_END, tls_opts, MHD_OPTION_END);
	if (!h->d) {
		close(fd);
		free(h);
		return zs_fail(err, ZS_EUNAVAIL, "cannot serve metrics at %s (libmicrohttpd%s)", bound,
			       tls ? ": the certificate, its key or TLS could not be set up" : "");
	}
	*out = h;
	return ZS_OK;
}

void zs_metrics_http_stop(struct zs_metrics_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d); /* closes the listening socket it was given */
	free(h);
}
