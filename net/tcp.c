/*
 * tcp.c - the tcp transport: the default, always built. Frames and their
 * payloads go over one persistent TCP connection per server (TCP_NODELAY,
 * 4 MiB socket buffers); payloads are written from and read into the
 * callers' buffers directly. Two-sided: the server's CPU serves each request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/util.h"
#include "net/listener.h"
#include "net/sockio.h"
#include "net/stream.h"

static const struct stream_hooks tcp_hooks = {
	.inline_data = true,
	.encrypts = true,
};

const struct zs_transport_ops zs_tcp_transport = {
	.name = "tcp",
	.caps = ZS_CAP_LANES,
	.bit = ZS_TRANSPORT_TCP,
	.hooks = &tcp_hooks,
	.reg = stream_reg,
	.dereg = stream_dereg,
};

/* ------------------------------------------------------- the server half */

static int tcp_listen(const char *addr, char *bound, struct zs_error *err)
{
	char host[ZS_HOST_MAX];
	uint16_t port;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof a;
	int fd;

	if (!addr)
		return zs_fail(err, ZS_EINVAL, "a tcp endpoint needs HOST:PORT"), -1;
	if (zs_parse_hostport(addr, host, &port, err))
		return -1;
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
		return zs_fail(err, ZS_EINVAL, "data address '%s' must be an IPv4 literal", addr),
		       -1;
	a.sin_port = htons(port);
	fd = zs_listen_on(AF_INET, (struct sockaddr *)&a, sizeof a, addr, err);
	if (fd < 0)
		return -1;
	if (getsockname(fd, (struct sockaddr *)&a, &al)) {
		zs_fail(err, ZS_EUNAVAIL, "cannot listen on %s: %s", addr, strerror(errno));
		close(fd);
		return -1;
	}
	zs_fmt(bound, ZS_ADDR_MAX, "%s:%u", host, ntohs(a.sin_port));
	return fd;
}

const struct zs_endpoint_ops zs_tcp_endpoint = {
	.name = "tcp",
	.encrypts = true,
	.listen = tcp_listen,
	.accepted = zs_tune_tcp,
};
