/*
 * sockio.h - blocking socket helpers shared by the data-plane client and
 * listener: full reads and writes (EINTR-safe, no SIGPIPE), bounded connect,
 * socket tuning, and passing a file descriptor over a Unix socket.
 */
#ifndef ZS_SOCKIO_H
#define ZS_SOCKIO_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "base/status.h"

/* 0 on success, -1 with errno (0 for a clean EOF before any byte). */
int zs_read_full(int fd, void *buf, size_t len);
/* Writes all iov entries (modified in place); 0 or -1 with errno. */
int zs_writev_full(int fd, struct iovec *iov, int n);

/* TCP_NODELAY, 4 MiB socket buffers (large transfers, small latency),
 * keepalive and a user timeout (a vanished peer breaks the connection). */
void zs_tune_tcp(int fd);

/* A listening stream socket of family bound to a (al bytes): the socket,
 * or -1 with err naming name and why (nothing left open). */
int zs_listen_on(int family, const struct sockaddr *a, socklen_t al, const char *name,
		 struct zs_error *err);

/* Connects to "HOST:PORT" (tcp) or "@name" (abstract Unix socket) within
 * timeout_ms; returns a blocking fd or -1 with err filled. */
int zs_dial(const char *addr, int timeout_ms, struct zs_error *err);

/* Sets SO_RCVTIMEO and SO_SNDTIMEO (0: none). */
void zs_sock_timeout(int fd, int ms);

/* Sends buf with fd attached (SCM_RIGHTS); 0 or -1. */
int zs_send_with_fd(int sock, const void *buf, size_t len, int fd);
/* Reads exactly len bytes, collecting one passed fd into *fd (-1 if none). */
int zs_recv_with_fd(int sock, void *buf, size_t len, int *fd);

#endif
