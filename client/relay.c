/*
 * relay.c - a weight reader's relay (see relay.h): the copy of its pinned
 * version it serves to its children, a thread accepting them and one per
 * child, and the child's side of the wire.
 */
#include "client/relay.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/le.h"
#include "base/log.h"
#include "base/util.h"
#include "model/model.h"
#include "net/dtls.h"
#include "net/hello.h"
#include "net/listener.h"
#include "net/sockio.h"
#include "net/transport.h"

#define RELAY_MAGIC 0x3152535au /* "ZSR1" */
#define RELAY_FLAG 0x8000       /* the proof's flags: a relay's, not a HELLO's */
/* A parent whose own reads add nothing for this long while a child waits
 * does not read what the child asks for: the child reads it from the
 * servers. */
#define STALL_MS 3000

struct rtens {
	uint8_t *b;
	size_t len;
	uint32_t crc;
	bool have;
};

struct rconn {
	int fd;
	pthread_t th;
	struct relay *rl;
	atomic_bool done;
	struct rconn *next;
};

struct relay {
	int lfd;
	pthread_t accept_th;
	atomic_int stop;
	char job[ZS_JOB_NAME_MAX];
	char token[ZS_TOKEN_MAX];
	bool tls;
	int timeout_ms;
	atomic_uint_fast64_t served;
	pthread_mutex_t mu; /* all below */
	pthread_cond_t cv;
	uint64_t step;
	bool held;
	uint32_t n, busy;    /* tensors; sends from the copy under way */
	int64_t grew_ms;     /* the last relay_put */
	struct rtens *t;
	struct rconn *conns;
};

/* ---------------------------------------------------------- the copy */

void relay_version(struct relay *rl, uint64_t step, bool held)
{
	if (!rl)
		return;
	pthread_mutex_lock(&rl->mu);
	while (rl->busy) /* a child being sent the version that goes */
		pthread_cond_wait(&rl->cv, &rl->mu);
	if (rl->step != step || !held)
		for (uint32_t i = 0; i < rl->n; i++) {
			free(rl->t[i].b);
			rl->t[i] = (struct rtens){0};
		}
	rl->step = step;
	rl->held = held;
	rl->grew_ms = zs_now_ms();
	pthread_cond_broadcast(&rl->cv);
	pthread_mutex_unlock(&rl->mu);
}

void relay_put(struct relay *rl, uint32_t i, const void *bytes, size_t len, uint32_t crc)
{
	uint8_t *b;

	if (!rl || i >= rl->n || !(b = malloc(len ? len : 1)))
		return; /* out of memory: the children read it from the servers */
	memcpy(b, bytes, len);
	pthread_mutex_lock(&rl->mu);
	if (rl->t[i].have) {
		free(b);
	} else {
		rl->t[i] = (struct rtens){b, len, crc, true};
		rl->grew_ms = zs_now_ms();
		pthread_cond_broadcast(&rl->cv);
	}
	pthread_mutex_unlock(&rl->mu);
}

uint64_t relay_served(const struct relay *rl) { return rl ? atomic_load(&rl->served) : 0; }

/* ------------------------------------------------------ the parent's side */

static int put_status(struct zs_io *io, uint32_t st, uint32_t crc, uint64_t len, const void *b)
{
	uint8_t h[16];
	struct iovec iov[2] = {{h, sizeof h}, {(void *)b, len}};

	zs_put32(h, st);
	zs_put32(h + 4, crc);
	zs_put64(h + 8, len);
	return zs_io_writev(io, iov, b ? 2 : 1);
}

/* The child's proof of the reader token over nonce; 0 when it holds. */
static int accept_child(struct relay *rl, struct zs_io *io)
{
	uint8_t nonce[ZS_NONCE_LEN], h[8], proof[ZS_PROOF_LEN];
	char job[ZS_JOB_NAME_MAX];
	struct iovec iov = {nonce, sizeof nonce};
	struct zs_error err = {0};
	uint32_t jl;

	if (rl->tls) {
		uint8_t psk[ZS_DTLS_PSK];
		if (zs_dtls_psk(rl->token, rl->job, true, psk) ||
		    zs_dtls_handshake(io->fd, true, rl->job, true, psk, &io->rec, &err))
			return -1;
	}
	if (zs_hello_nonce(nonce) || zs_io_writev(io, &iov, 1) || zs_io_read(io, h, sizeof h) ||
	    zs_get32(h) != RELAY_MAGIC || (jl = zs_get32(h + 4)) >= sizeof job ||
	    zs_io_read(io, job, jl) || zs_io_read(io, proof, sizeof proof))
		return -1;
	job[jl] = '\0';
	struct zs_hello hl = {.job = job, .proof = proof, .nonce = nonce,
			      .rank = ZS_RANK_OBSERVER, .flags = RELAY_FLAG};
	bool ok = !strcmp(job, rl->job) && zs_hello_proves(&hl, rl->token);
	if (put_status(io, ok ? ZS_OK : ZS_EPERM, 0, 0, NULL) || !ok)
		return -1;
	return 0;
}

/* Tensor i of step into *out (busy counted), or why not. */
static uint32_t wait_tensor(struct relay *rl, uint32_t i, uint64_t step, struct rtens *out)
{
	int64_t since = zs_now_ms(), deadline = since + rl->timeout_ms;
	uint32_t st = ZS_OK;

	pthread_mutex_lock(&rl->mu);
	for (;;) {
		/* stalled: nothing new since the later of this request and the
		 * last tensor kept (a parent that pinned long ago and reads now
		 * is not one) */
		int64_t now = zs_now_ms(), moved = rl->grew_ms > since ? rl->grew_ms : since;
		if (i >= rl->n) {
			st = ZS_EINVAL;
		} else if (!rl->held || rl->step != step || atomic_load(&rl->stop)) {
			st = ZS_ENOTFOUND;
		} else if (rl->t[i].have) {
			*out = rl->t[i];
			rl->busy++;
		} else if (now > deadline || now - moved > STALL_MS) {
			st = ZS_ETIMEDOUT;
		} else {
			struct timespec ts = zs_deadline_in(50);
			pthread_cond_timedwait(&rl->cv, &rl->mu, &ts);
			continue;
		}
		break;
	}
	pthread_mutex_unlock(&rl->mu);
	return st;
}

static void *child_main(void *arg)
{
	struct rconn *k = arg;
	struct relay *rl = k->rl;
	struct zs_io io = {.fd = k->fd};
	uint8_t q[12];

	zs_sock_timeout(k->fd, rl->timeout_ms);
	if (accept_child(rl, &io) == 0) {
		/* requests come when the child reads: no bound on waiting for
		 * one; sends keep theirs */
		struct timeval none = {0};
		setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
		while (!atomic_load(&rl->stop) && zs_io_read(&io, q, sizeof q) == 0) {
			struct rtens t = {0};
			uint32_t st = wait_tensor(rl, zs_get32(q), zs_get64(q + 4), &t);
			int bad = put_status(&io, st, t.crc, st ? 0 : t.len, st ? NULL : t.b);
			if (!st) {
				atomic_fetch_add(&rl->served, t.len);
				pthread_mutex_lock(&rl->mu);
				rl->busy--;
				pthread_cond_broadcast(&rl->cv);
				pthread_mutex_unlock(&rl->mu);
			}
			if (bad)
				break;
		}
	}
	shutdown(k->fd, SHUT_RDWR);
	zs_records_free(io.rec);
	atomic_store(&k->done, true);
	return NULL;
}

/* Joins the threads of children gone (caller holds rl->mu). */
static void reap(struct relay *rl, bool all)
{
	for (struct rconn **p = &rl->conns; *p;) {
		struct rconn *k = *p;
		if (!all && !atomic_load(&k->done)) {
			p = &k->next;
			continue;
		}
		*p = k->next;
		shutdown(k->fd, SHUT_RDWR);
		pthread_mutex_unlock(&rl->mu);
		pthread_join(k->th, NULL);
		pthread_mutex_lock(&rl->mu);
		close(k->fd);
		free(k);
	}
}

static void *accept_main(void *arg)
{
	struct relay *rl = arg;

	while (!atomic_load(&rl->stop)) {
		int fd = accept4(rl->lfd, NULL, NULL, SOCK_CLOEXEC);
		struct rconn *k;
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break; /* shut down */
		}
		zs_tune_tcp(fd);
		pthread_mutex_lock(&rl->mu);
		reap(rl, false);
		k = calloc(1, sizeof *k);
		if (k) {
			*k = (struct rconn){.fd = fd, .rl = rl, .next = rl->conns};
			if (pthread_create(&k->th, NULL, child_main, k)) {
				free(k);
				k = NULL;
			} else {
				rl->conns = k;
			}
		}
		pthread_mutex_unlock(&rl->mu);
		if (!k)
			close(fd);
	}
	return NULL;
}

enum zs_status relay_start(const char *listen_addr, const char *job, const char *token,
			   bool tls, uint32_t n, int timeout_ms, struct relay **out, char *addr,
			   struct zs_error *err)
{
	struct relay *rl = calloc(1, sizeof *rl);

	if (!rl || !(rl->t = calloc(n ? n : 1, sizeof *rl->t))) {
		free(rl);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	rl->lfd = zs_tcp_endpoint.listen(listen_addr, addr, err);
	if (rl->lfd < 0) {
		free(rl->t);
		free(rl);
		return err->code ? err->code : ZS_EUNAVAIL;
	}
	snprintf(rl->job, sizeof rl->job, "%s", job);
	snprintf(rl->token, sizeof rl->token, "%s", token);
	rl->tls = tls;
	rl->n = n;
	rl->timeout_ms = timeout_ms;
	pthread_mutex_init(&rl->mu, NULL);
	pthread_cond_init(&rl->cv, NULL);
	if (pthread_create(&rl->accept_th, NULL, accept_main, rl)) {
		close(rl->lfd);
		free(rl->t);
		free(rl);
		return zs_fail(err, ZS_ENOMEM, "cannot start the relay's thread");
	}
	*out = rl;
	return ZS_OK;
}

void relay_stop(struct relay *rl)
{
	if (!rl)
		return;
	atomic_store(&rl->stop, 1);
	shutdown(rl->lfd, SHUT_RDWR);
	pthread_join(rl->accept_th, NULL);
	close(rl->lfd);
	pthread_mutex_lock(&rl->mu);
	pthread_cond_broadcast(&rl->cv);
	reap(rl, true);
	pthread_mutex_unlock(&rl->mu);
	for (uint32_t i = 0; i < rl->n; i++)
		free(rl->t[i].b);
	free(rl->t);
	pthread_mutex_destroy(&rl->mu);
	pthread_cond_destroy(&rl->cv);
	free(rl);
}

/* ------------------------------------------------------- the child's side */

enum zs_status relay_dial(const char *addr, const char *job, const char *token, bool tls,
			  int timeout_ms, struct zs_io *io, struct zs_error *err)
{
	uint8_t nonce[ZS_NONCE_LEN], h[8], st[16];
	size_t jl = strlen(job);
	struct zs_hello hl = {.job = job, .nonce = nonce, .rank = ZS_RANK_OBSERVER,
			      .flags = RELAY_FLAG};
	uint8_t proof[ZS_PROOF_LEN];
	struct iovec iov[3] = {{h, sizeof h}, {(void *)job, jl}, {proof, sizeof proof}};
	int fd = zs_dial(addr, timeout_ms, err);

	*io = (struct zs_io){.fd = -1};
	if (fd < 0)
		return err->code ? err->code : ZS_EUNAVAIL;
	zs_tune_tcp(fd);
	zs_sock_timeout(fd, timeout_ms);
	io->fd = fd;
	if (tls) {
		uint8_t psk[ZS_DTLS_PSK];
		enum zs_status s = zs_dtls_psk(token, job, true, psk)
					   ? zs_fail(err, ZS_ENOMEM, "cannot derive the relay's key")
					   : zs_dtls_handshake(fd, false, job, true, psk, &io->rec, err);
		if (s) {
			close(fd);
			io->fd = -1;
			return s;
		}
	}
	zs_put32(h, RELAY_MAGIC);
	zs_put32(h + 4, (uint32_t)jl);
	if (zs_io_read(io, nonce, sizeof nonce) || zs_hello_proof(&hl, token, proof) ||
	    zs_io_writev(io, iov, 3) || zs_io_read(io, st, sizeof st) || zs_get32(st)) {
		enum zs_status s = zs_fail(err, ZS_EUNAVAIL, "the relay at %s refused or broke: %s",
					   addr, errno ? strerror(errno) : "closed");
		zs_records_free(io->rec);
		close(fd);
		*io = (struct zs_io){.fd = -1};
		return s;
	}
	return ZS_OK;
}

enum zs_status relay_fetch(struct zs_io *io, uint32_t i, uint64_t step, void *dst, size_t len,
			   uint32_t *crc, struct zs_error *err)
{
	uint8_t q[12], h[16];
	struct iovec iov = {q, sizeof q};
	uint32_t st;

	zs_put32(q, i);
	zs_put64(q + 4, step);
	if (zs_io_writev(io, &iov, 1) || zs_io_read(io, h, sizeof h))
		return zs_fail(err, ZS_EUNAVAIL, "the relay broke: %s",
			       errno ? strerror(errno) : "closed");
	st = zs_get32(h);
	if (st)
		return zs_fail(err, st < ZS_STATUS_COUNT ? (enum zs_status)st : ZS_EPROTO,
			       "the relay has not tensor %u of step %llu (%s)", i,
			       (unsigned long long)step,
			       st == ZS_ENOTFOUND ? "it holds another version"
			       : st == ZS_ETIMEDOUT ? "it does not read it" : "refused");
	if (zs_get64(h + 8) != len)
		return zs_fail(err, ZS_EPROTO, "the relay sent %llu bytes for a %zu-byte tensor",
			       (unsigned long long)zs_get64(h + 8), len);
	*crc = zs_get32(h + 4);
	if (zs_io_read(io, dst, len))
		return zs_fail(err, ZS_EUNAVAIL, "the relay broke mid-tensor");
	return ZS_OK;
}
