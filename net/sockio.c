/* sockio.c - socket helpers (see sockio.h). */
#include "net/sockio.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/util.h"

int zs_read_full(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, p + got, len - got, 0);
		if (n > 0) {
			got += (size_t)n;
		} else if (n == 0) {
			errno = got ? ECONNRESET : 0;
			return -1;
		} else if (errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

int zs_writev_full(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

void zs_tune_tcp(int fd)
{
	int one = 1, sz = 4 << 20, idle = 10, intvl = 5, cnt = 3, user_ms = 30000;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
	/* a peer that vanishes (a partition, a host gone) breaks the
	 * connection within about 25 s idle, or 30 s with data unacknowledged,
	 * instead of leaving it open for hours */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof user_ms);
}

void zs_sock_timeout(int fd, int ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int finish_connect(int fd, const struct sockaddr *sa, socklen_t len,
			  int timeout_ms)
{
	int fl = fcntl(fd, F_GETFL), e = 0;
	socklen_t el = sizeof e;
	struct pollfd p = {.fd = fd, .events = POLLOUT};

	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	if (connect(fd, sa, len) && errno != EINPROGRESS)
		return -1;
	if (poll(&p, 1, timeout_ms) != 1) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) || e) {
		errno = e ? e : errno;
		return -1;
	}
	fcntl(fd, F_SETFL, fl);
	return 0;
}

int zs_listen_on(int family, const struct sockaddr *a, socklen_t al, const char *name,
		 struct zs_error *err)
{
	int one = 1, fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return zs_fail(err, ZS_EUNAVAIL, "cannot make a socket: %s", strerror(errno)), -1;
	if (family != AF_UNIX)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, a, al) || listen(fd, 128)) {
		zs_fail(err, ZS_EUNAVAIL, "cannot listen on %s: %s", name, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int zs_dial(const char *addr, int timeout_ms, struct zs_error *err)
{
	int fd;

	if (addr[0] == '@') {
		struct sockaddr_un un = {.sun_family = AF_UNIX};
		size_t n = strlen(addr);
		if (n >= sizeof un.sun_path) {
			zs_fail(err, ZS_EINVAL, "socket name '%s' is too long", addr);
			return -1;
		}
		memcpy(un.sun_path + 1, addr + 1, n - 1); /* abstract namespace */
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && finish_connect(fd, (struct sockaddr *)&un,
					      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n),
					      timeout_ms) == 0)
			return fd;
	} else {
		char host[ZS_HOST_MAX], port[8];
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
		uint16_t p;
		int rc;

		if (zs_parse_hostport(addr, host, &p, err))
			return -1;
		snprintf(port, sizeof port, "%u", p);
		rc = getaddrinfo(host, port, &hints, &ai);
		if (rc) {
			zs_fail(err, ZS_EUNAVAIL, "cannot resolve %s: %s", addr, gai_strerror(rc));
			return -1;
		}
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && finish_connect(fd, ai->ai_addr, ai->ai_addrlen, timeout_ms) == 0) {
			freeaddrinfo(ai);
			zs_tune_tcp(fd);
			return fd;
		}
		freeaddrinfo(ai);
	}
	zs_fail(err, errno == ETIMEDOUT ? ZS_ETIMEDOUT : ZS_EUNAVAIL,
		"cannot connect to %s: %s", addr, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

int zs_send_with_fd(int sock, const void *buf, size_t len, int fd)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {(void *)buf, len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof ctl};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	ssize_t n;

	memset(ctl, 0, sizeof ctl);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if ((size_t)n < len) { /* the fd went with the first bytes */
		struct iovec rest = {(char *)buf + n, len - (size_t)n};
		return zs_writev_full(sock, &rest, 1);
	}
	return 0;
}

int zs_recv_with_fd(int sock, void *buf, size_t len, int *fd)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {buf, len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof ctl};
	ssize_t n;

	*fd = -1;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		if (n == 0)
			errno = 0;
		return -1;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(c), sizeof *fd);
	if ((size_t)n < len)
		return zs_read_full(sock, (char *)buf + n, len - (size_t)n);
	return 0;
}
