/*
 * fuzz_wire.c - libFuzzer target: the data plane as a shard server runs
 * it. A real listener (net/listener.c, the tcp endpoint, its connection
 * threads) serves a stub target on loopback; each input is the byte stream
 * one trainer connection sends: frame headers (net/wire.h), HELLO, GATHER,
 * PUSH and HPARAMS frames with their payloads. The harness writes it,
 * reads whatever the server answers, and closes; the server must survive
 * every stream (a crash, a sanitizer report or a leak is a finding) and
 * never hang: a connection that is not closed within 5 s traps.
 *
 * Bit 0 of the first byte: recompute each header's CRC, so that the
 * fuzzer gets past the checksum to the parser behind it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "base/crc32c.h"
#include "base/le.h"
#include "base/util.h"
#include "model/hparams.h"
#include "net/listener.h"
#include "net/wire.h"

#define ARENA (1u << 20)

static struct zs_listener *l;
static void *buf;
static char bound[ZS_ADDR_MAX];
static struct sockaddr_in to = {.sin_family = AF_INET};

static enum zs_status t_hello(void *ctx, const struct zs_hello *hl, uint32_t *h,
			      struct zs_error *err)
{
	(void)ctx;
	/* the proof is not checked: the fuzzer's bytes cannot know the nonce */
	if (strcmp(hl->job, "fz") || hl->rank > 7)
		return zs_fail(err, ZS_ENOTFOUND, "no job '%s' here", hl->job);
	*h = 1;
	return ZS_OK;
}

static bool fits(const struct zs_xfer *x)
{
	unsigned dsz = zs_dtype_size(x->dtype);
	return dsz && x->length <= ARENA / dsz;
}

static void t_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		   const struct zs_xfer *x)
{
	(void)ctx, (void)job, (void)rank;
	if (!fits(x))
		zs_sop_fail(op, ZS_EINVAL, "range too large");
	else
		zs_sop_read_ready(op, buf);
}

static enum zs_status t_write_begin(void *ctx, uint32_t job, uint32_t rank,
				    const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	(void)ctx, (void)job, (void)rank;
	if (!fits(x))
		return zs_fail(err, ZS_EINVAL, "range too large");
	*dst = buf;
	return ZS_OK;
}

static void t_write_done(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			 const struct zs_xfer *x, void *dst)
{
	(void)ctx, (void)job, (void)rank, (void)x, (void)dst;
	zs_sop_done(op);
}

static void t_write_abort(void *ctx, uint32_t job, uint32_t rank, const struct zs_xfer *x,
			  void *dst)
{
	(void)ctx, (void)job, (void)rank, (void)x, (void)dst;
}

static enum zs_status t_hparams(void *ctx, uint32_t job, uint32_t rank, uint64_t step,
				const uint8_t *payload, size_t len, struct zs_error *err)
{
	struct zs_hp_table t;
	(void)ctx, (void)job, (void)rank, (void)step;
	return zs_hp_decode(payload, len, &t, err);
}

static enum zs_status t_world(void *ctx, uint32_t job, uint32_t rank, const uint8_t *payload,
			      size_t len, struct zs_error *err)
{
	struct zs_worlds w;
	(void)ctx, (void)job, (void)rank;
	return zs_worlds_decode(payload, len, &w, err);
}

static const struct zs_target target = {
	.hello = t_hello, .read = t_read, .write_begin = t_write_begin,
	.write_done = t_write_done, .write_abort = t_write_abort, .hparams = t_hparams,
	.world = t_world,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct zs_listener_opts o = {.at = {{&zs_tcp_endpoint, "127.0.0.1:0", bound}},
				     .arena_bytes = ARENA + 4096,
				     .wait_ms = 1000};
	char host[ZS_HOST_MAX];
	uint16_t port;

	(void)argc, (void)argv;
	if (zs_listener_start(&o, &target, &l, NULL) || zs_parse_hostport(bound, host, &port, NULL))
		abort();
	buf = zs_listener_alloc(l, ARENA);
	if (!buf)
		abort();
	to.sin_port = htons(port);
	inet_pton(AF_INET, host, &to.sin_addr);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *in, sink[65536];
	size_t off = 0, sent = 0;
	bool shut = false;
	int fd;
	int64_t deadline = now_ms() + 5000;

	if (size < 1)
		return 0;
	in = malloc(size);
	memcpy(in, data + 1, size - 1);
	size--;
	while ((data[0] & 1) && off + ZS_WIRE_HDR <= size) {
		struct zs_frame f;
		zs_put32(in + off + 72, zs_crc32c(0, in + off, 72));
		if (zs_wire_decode(in + off, &f, NULL))
			break;
		off += ZS_WIRE_HDR;
		off += f.payload_len < size - off ? f.payload_len : size - off;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to)) {
		free(in);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd p = {fd, POLLIN | (shut ? 0 : POLLOUT), 0};
		if (now_ms() > deadline)
			__builtin_trap(); /* the server neither answered nor closed */
		if (poll(&p, 1, 100) < 0)
			continue;
		if (p.revents & POLLIN) {
			ssize_t k = read(fd, sink, sizeof sink);
			if (k == 0 || (k < 0 && errno != EAGAIN))
				break; /* the server closed (or reset) the connection */
		}
		if (!shut && (p.revents & POLLOUT)) {
			ssize_t k = sent < size ? write(fd, in + sent, size - sent) : 0;
			if (k > 0)
				sent += (size_t)k;
			if (sent == size || (k < 0 && errno != EAGAIN)) {
				shutdown(fd, SHUT_WR); /* the server sees the end */
				shut = true;
			}
		}
		if (p.revents & (POLLERR | POLLHUP) && !(p.revents & POLLIN))
			break;
	}
	close(fd);
	free(in);
	return 0;
}
