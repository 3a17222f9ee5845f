/*
 * transport_toy.c - the toy target the transport conformance suite runs
 * against (transport_toy.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tests/unit/transport_toy.h"
#include "gpu/dev.h"
#include "rdma/rdma.h"
#include "base/status.h"
#include "net/dtls.h"
#include "net/sockio.h"
#include "net/wire.h"

const char *addr_of(struct fixture *f)
{
	return f->t == &zs_shm_transport ? f->shm_name : f->tcp_addr;
}

static enum zs_status toy_hello(void *ctx, const struct zs_hello *hl, uint32_t *h,
				struct zs_error *err)
{
	const char *job = hl->job;
	uint32_t rank = hl->rank;

	(void)ctx;
	if (strcmp(job, "job"))
		return zs_fail(err, ZS_ENOTFOUND, "no job '%s' here", job);
	if (!zs_hello_proves(hl, "tok"))
		return zs_fail(err, ZS_EINVAL, "bad token for job '%s'", job);
	if (rank >= 4)
		return zs_fail(err, ZS_EINVAL, "rank %u >= world size 4", rank);
	*h = JOB_HANDLE;
	return ZS_OK;
}

static bool in_range(const struct zs_xfer *x)
{
	return x->unit == 0 && x->dtype == ZS_F32 && x->offset <= NELEM &&
	       x->length <= NELEM - x->offset;
}

static void toy_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		     const struct zs_xfer *x)
{
	struct toy *t = ctx;
	(void)job;
	(void)rank;
	if (x->unit == 7) { /* a "try again" answer (the core makes it ZS_ESTATE) */
		zs_sop_fail(op, ZS_EAGAIN, "unit 7: not now, try again");
		return;
	}
	if (!in_range(x)) {
		zs_sop_fail(op, ZS_EINVAL, "range [%llu, +%llu) is outside unit %u",
			    (unsigned long long)x->offset, (unsigned long long)x->length,
			    x->unit);
		return;
	}
	pthread_mutex_lock(&t->mu);
	if (x->step > t->ready_step && t->n_held < 256) {
		t->held_x[t->n_held] = *x;
		t->held[t->n_held++] = op;
		pthread_mutex_unlock(&t->mu);
		return;
	}
	pthread_mutex_unlock(&t->mu);
	zs_sop_read_ready(op, t->served + x->offset);
}

static enum zs_status toy_write_begin(void *ctx, uint32_t job, uint32_t rank,
				      const struct zs_xfer *x, void **dst,
				      struct zs_error *err)
{
	struct toy *t = ctx;
	(void)job;
	(void)rank;
	if (!in_range(x))
		return zs_fail(err, ZS_EINVAL, "push outside unit 0");
	*dst = t->staging + x->offset;
	return ZS_OK;
}

static void toy_write_done(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			   const struct zs_xfer *x, void *dst)
{
	struct toy *t = ctx;
	(void)job; (void)rank;
	if (x->device) /* the bytes are in the peer's device memory: take them */
		memcpy(dst, x->dsrc, x->length * 4);
	pthread_mutex_lock(&t->mu);
	t->writes_done++;
	pthread_mutex_unlock(&t->mu);
	zs_sop_done(op);
}

static uint32_t toy_dev_ident(void *ctx)
{
	struct toy *t = ctx;
	return t->dev ? zs_dev_ident(t->dev) : 0;
}

static enum zs_status toy_dev_map(void *ctx, const unsigned char handle[64], void **base,
				  uint64_t *size, struct zs_error *err)
{
	struct toy *t = ctx;
	size_t n;
	if (zs_dev_map(t->dev, handle, base, &n))
		return zs_fail(err, ZS_EUNAVAIL, "%s", zs_dev_error(t->dev));
	*size = n;
	pthread_mutex_lock(&t->mu);
	t->maps++;
	pthread_mutex_unlock(&t->mu);
	return ZS_OK;
}

static void toy_dev_unmap(void *ctx, void *base, uint64_t size)
{
	struct toy *t = ctx;
	zs_dev_unmap(t->dev, base, size);
	pthread_mutex_lock(&t->mu);
	t->unmaps++;
	pthread_mutex_unlock(&t->mu);
}

static void toy_write_abort(void *ctx, uint32_t job, uint32_t rank,
			    const struct zs_xfer *x, void *dst)
{
	struct toy *t = ctx;
	(void)job; (void)rank; (void)x; (void)dst;
	pthread_mutex_lock(&t->mu);
	t->writes_aborted++;
	pthread_mutex_unlock(&t->mu);
}

/* Reads a counter the listener's threads update. */
int count(struct toy *t, const int *p)
{
	int v;
	pthread_mutex_lock(&t->mu);
	v = *p;
	pthread_mutex_unlock(&t->mu);
	return v;
}

/* Answers every held read (ready or failing). */
void toy_release(struct toy *t, bool fail)
{
	pthread_mutex_lock(&t->mu);
	t->ready_step = UINT64_MAX;
	for (int i = 0; i < t->n_held; i++) {
		if (fail)
			zs_sop_fail(t->held[i], ZS_ECANCELED, "server stopping");
		else
			zs_sop_read_ready(t->held[i], t->served + t->held_x[i].offset);
	}
	t->n_held = 0;
	pthread_mutex_unlock(&t->mu);
}

/* an encrypted connection's key: job "job"'s, its token "tok" */
static enum zs_status toy_tls_key(void *ctx, const char *job, bool reader, uint8_t key[32],
				  struct zs_error *err)
{
	(void)ctx;
	if (strcmp(job, "job"))
		return zs_fail(err, ZS_ENOTFOUND, "no job '%s' here", job);
	if (reader)
		return zs_fail(err, ZS_EINVAL, "the toy has no reader token");
	return zs_dtls_psk("tok", job, false, key) ? ZS_ENOMEM : ZS_OK;
}

struct zs_target toy_target(struct toy *t)
{
	return (struct zs_target){.ctx = t, .hello = toy_hello, .tls_key = toy_tls_key,
				  .read = toy_read,
				  .write_begin = toy_write_begin, .write_done = toy_write_done,
				  .write_abort = toy_write_abort, .dev_ident = toy_dev_ident,
				  .dev_map = toy_dev_map, .dev_unmap = toy_dev_unmap};
}

int start_toy(struct fixture *f)
{
	struct zs_target tg = toy_target(&f->toy);
	struct zs_listener_opts o = {.at = {{&zs_tcp_endpoint, "127.0.0.1:0", f->tcp_addr},
					    {&zs_shm_endpoint, NULL, f->shm_name}},
				     .path = f->t == &zs_rdma_transport ? &zs_rdma_path : NULL,
				     .arena_bytes = 2ull * NELEM * 4};
	struct zs_error err = {0};

	memset(&f->toy, 0, sizeof f->toy);
	pthread_mutex_init(&f->toy.mu, NULL);
	if (zs_dev_open(ZS_DEV_EMULATED, &f->toy.dev, NULL, 0))
		return -1;
	if (zs_listener_start(&o, &tg, &f->toy.l, &err)) {
		fprintf(stderr, "listener: %s\n", err.msg);
		return -1;
	}
	f->toy.served = zs_listener_alloc(f->toy.l, NELEM * 4);
	f->toy.staging = zs_listener_alloc(f->toy.l, NELEM * 4);
	if (!f->toy.served || !f->toy.staging)
		return -1;
	for (uint32_t i = 0; i < NELEM; i++)
		f->toy.served[i] = (float)i * 0.5f;
	return 0;
}

void stop_toy(struct fixture *f)
{
	toy_release(&f->toy, true);
	zs_listener_free(f->toy.l);
	zs_dev_close(f->toy.dev);
	pthread_mutex_destroy(&f->toy.mu);
}

int setup_tcp(void **st)
{
	static struct fixture f;
	f.t = &zs_tcp_transport;
	*st = &f;
	return start_toy(&f);
}

int setup_tcp_tls(void **st)
{
	static struct fixture f;
	f.t = &zs_tcp_transport;
	f.tls = true;
	*st = &f;
	return start_toy(&f);
}

int setup_shm(void **st)
{
	static struct fixture f;
	f.t = &zs_shm_transport;
	*st = &f;
	return start_toy(&f);
}

int setup_rdma(void **st)
{
	static struct fixture f;
	f.t = &zs_rdma_transport;
	*st = &f;
	return start_toy(&f);
}

int teardown(void **st)
{
	stop_toy(*st);
	return 0;
}

struct zs_conn *open_conn(struct fixture *f, unsigned max_inflight)
{
	struct zs_conn_opts o = {.addr = addr_of(f), .job = "job", .token = "tok",
				 .rank = 1, .tls = f->tls, .timeout_ms = 5000,
				 .max_inflight = max_inflight};
	struct zs_conn *c = NULL;
	struct zs_error err = {0};

	if (zs_connect(f->t, &o, &c, &err))
		fail_msg("%s connect: %s", f->t->name, err.msg);
	assert_ptr_equal(zs_conn_transport(c), f->t);
	assert_int_equal(zs_conn_encryption(c) != NULL, f->tls);
	return c;
}

struct zs_xfer xf(uint64_t off, uint64_t len, uint64_t step)
{
	return (struct zs_xfer){.unit = 0, .offset = off, .length = len, .step = step,
				.dtype = ZS_F32};
}

/* A raw peer's socket, the server's first frame (its nonce) read. */
int raw_dial(struct fixture *f, uint8_t nonce[ZS_NONCE_LEN])
{
	struct zs_error err = {0};
	int fd = zs_dial(addr_of(f), 5000, &err);
	uint8_t h[ZS_WIRE_HDR];
	struct zs_frame fr;

	assert_true(fd >= 0);
	assert_int_equal(zs_read_full(fd, h, sizeof h), 0);
	assert_int_equal(zs_wire_decode(h, &fr, NULL), ZS_OK);
	assert_int_equal(fr.op, ZS_OP_NONCE);
	assert_int_equal(fr.payload_len, ZS_NONCE_LEN);
	assert_int_equal(zs_read_full(fd, nonce, ZS_NONCE_LEN), 0);
	return fd;
}

/* Sends hello (its job "job", rank 2, its proof given) on fd; the answer's
 * op (its fd passed, if any, closed). */
uint16_t raw_hello_send(int fd, const uint8_t proof[ZS_PROOF_LEN])
{
	uint8_t payload[4 + ZS_PROOF_LEN], h[ZS_WIRE_HDR];
	struct zs_frame fr = {.op = ZS_OP_HELLO, .rank = 2, .payload_len = sizeof payload};
	struct iovec iov[2] = {{h, sizeof h}, {payload, sizeof payload}};
	int memfd = -1;

	memcpy(payload, "job", 4);
	memcpy(payload + 4, proof, ZS_PROOF_LEN);
	zs_wire_encode(&fr, h);
	assert_int_equal(zs_writev_full(fd, iov, 2), 0);
	assert_int_equal(zs_recv_with_fd(fd, h, sizeof h, &memfd), 0);
	if (memfd >= 0)
		close(memfd);
	assert_int_equal(zs_wire_decode(h, &fr, NULL), ZS_OK);
	return fr.op;
}

/* A raw peer that says HELLO properly, for the misbehaving-peer tests;
 * its proof into proof when not NULL. */
int raw_hello_proof(struct fixture *f, uint8_t *proof)
{
	uint8_t nonce[ZS_NONCE_LEN], p[ZS_PROOF_LEN];
	int fd = raw_dial(f, nonce);
	struct zs_hello hl = {.job = "job", .nonce = nonce, .rank = 2};

	assert_int_equal(zs_hello_proof(&hl, "tok", p), 0);
	assert_int_equal(raw_hello_send(fd, p), ZS_OP_HELLO_OK);
	if (proof)
		memcpy(proof, p, ZS_PROOF_LEN);
	return fd;
}

int raw_hello(struct fixture *f)
{
	return raw_hello_proof(f, NULL);
}
