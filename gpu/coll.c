/*
 * coll.c - communicators (gpu/coll.h): the dispatch, and the emulated
 * backend: ranks are threads of one process that meet in a group found by
 * the id; each collective is two barriers around the copies (every rank's
 * buffer posted; every rank done reading), bounded by the open's timeout.
 */
#include "gpu/coll_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

enum zs_status zs_coll_fail(struct zs_coll *c, enum zs_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
	return st;
}

static const char EMU_MAGIC[8] = "zsemucol";

struct group {
	uint8_t id[ZS_COLL_ID_BYTES];
	int nranks, joined, open;
	uint64_t gen;     /* barriers passed */
	int arrived;
	const void **send;
	pthread_cond_t cv;
	struct group *next;
};

static pthread_mutex_t groups_mu = PTHREAD_MUTEX_INITIALIZER;
static struct group *groups;

/* Waits until every rank of g arrived (groups_mu held); false at the
 * deadline (the arrival is taken back). */
static bool barrier(struct group *g, const struct timespec *deadline)
{
	uint64_t gen = g->gen;
	if (++g->arrived == g->nranks) {
		g->arrived = 0;
		g->gen++;
		pthread_cond_broadcast(&g->cv);
		return true;
	}
	while (g->gen == gen)
		if (pthread_cond_timedwait(&g->cv, &groups_mu, deadline) == ETIMEDOUT &&
		    g->gen == gen) {
			g->arrived--;
			return false;
		}
	return true;
}

static struct timespec deadline_in(int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

enum zs_status zs_coll_new_id(struct zs_dev *d, uint8_t id[ZS_COLL_ID_BYTES], char *why,
			      size_t len)
{
	if (!zs_dev_emulated(d))
		return zs_nccl_new_id(id, why, len);
	memset(id, 0, ZS_COLL_ID_BYTES);
	memcpy(id, EMU_MAGIC, sizeof EMU_MAGIC);
	if (getrandom(id + sizeof EMU_MAGIC, 16, 0) != 16) {
		if (why && len)
			snprintf(why, len, "getrandom: %s", strerror(errno));
		return ZS_EIO;
	}
	return ZS_OK;
}

/* One rank leaves g (groups_mu held): the last frees it. */
static void group_put(struct group *g)
{
	if (--g->open > 0)
		return;
	for (struct group **p = &groups; *p; p = &(*p)->next)
		if (*p == g) {
			*p = g->next;
			break;
		}
	pthread_cond_destroy(&g->cv);
	free(g->send);
	free(g);
}

static void emu_close(struct zs_coll *c)
{
	pthread_mutex_lock(&groups_mu);
	group_put(c->impl);
	pthread_mutex_unlock(&groups_mu);
}

static enum zs_status emu_open(struct zs_coll *c, const uint8_t id[ZS_COLL_ID_BYTES], char *why,
			       size_t len)
{
	struct timespec dl = deadline_in(c->timeout_ms);
	struct group *g;

	if (memcmp(id, EMU_MAGIC, sizeof EMU_MAGIC)) {
		if (why && len)
			snprintf(why, len, "not an emulated communicator's id (one made for NCCL?)");
		return ZS_EINVAL;
	}
	pthread_mutex_lock(&groups_mu);
	for (g = groups; g && memcmp(g->id, id, ZS_COLL_ID_BYTES); g = g->next)
		;
	if (!g) {
		g = calloc(1, sizeof *g);
		if (g)
			g->send = calloc((size_t)c->nranks, sizeof *g->send);
		if (!g || !g->send) {
			free(g);
			pthread_mutex_unlock(&groups_mu);
			return ZS_ENOMEM;
		}
		memcpy(g->id, id, ZS_COLL_ID_BYTES);
		g->nranks = c->nranks;
		pthread_cond_init(&g->cv, NULL);
		g->next = groups;
		groups = g;
	}
	if (g->nranks != c->nranks) {
		pthread_mutex_unlock(&groups_mu);
		if (why && len)
			snprintf(why, len, "rank %d opens a communicator of %d ranks as one of %d",
				 c->rank, g->nranks, c->nranks);
		return ZS_EINVAL;
	}
	g->open++;
	c->impl = g;
	/* every rank in before the first collective */
	if (!barrier(g, &dl)) {
		int got = g->arrived + 1;
		group_put(g);
		pthread_mutex_unlock(&groups_mu);
		if (why && len)
			snprintf(why, len, "rank %d waited %d ms for the communicator's %d ranks: %d came",
				 c->rank, c->timeout_ms, c->nranks, got);
		c->impl = NULL;
		return ZS_ETIMEDOUT;
	}
	pthread_mutex_unlock(&groups_mu);
	return ZS_OK;
}



/* One collective: post send, meet, copy what this rank receives, meet. */
static enum zs_status emu_exchange(struct zs_coll *c, const void *send, void *recv, size_t n,
				   zs_dev_stream s, bool transpose)
{
	struct group *g = c->impl;
	struct timespec dl = deadline_in(c->timeout_ms);
	enum zs_status st = zs_dev_stream_sync(c->dev, s); /* its earlier work first */

	if (st)
		return zs_coll_fail(c, st, "%s", zs_dev_error(c->dev));
	pthread_mutex_lock(&groups_mu);
	g->send[c->rank] = send;
	if (!barrier(g, &dl)) {
		pthread_mutex_unlock(&groups_mu);
		return zs_coll_fail(c, ZS_ETIMEDOUT,
				    "rank %d waited %d ms for the other ranks' %s",
				    c->rank, c->timeout_ms, transpose ? "all-to-all" : "all-gather");
	}
	pthread_mutex_unlock(&groups_mu);
	for (int r = 0; r < c->nranks; r++) {
		const uint8_t *src = (const uint8_t *)g->send[r] + (transpose ? (size_t)c->rank * n : 0);
		uint8_t *dst = (uint8_t *)recv + (size_t)r * n;
		if (dst != src)
			memmove(dst, src, n);
	}
	pthread_mutex_lock(&groups_mu);
	if (!barrier(g, &dl)) {
		pthread_mutex_unlock(&groups_mu);
		return zs_coll_fail(c, ZS_ETIMEDOUT, "rank %d waited %d ms for the other ranks' copies",
				    c->rank, c->timeout_ms);
	}
	pthread_mutex_unlock(&groups_mu);
	return ZS_OK;
}

enum zs_status zs_coll_open(struct zs_dev *d, const uint8_t id[ZS_COLL_ID_BYTES], int nranks,
			    int rank, int timeout_ms, struct zs_coll **out, char *why, size_t len)
{
	struct zs_coll *c;
	enum zs_status st;

	*out = NULL;
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		if (why && len)
			snprintf(why, len, "rank %d of %d ranks", rank, nranks);
		return ZS_EINVAL;
	}
	c = calloc(1, sizeof *c);
	if (!c)
		return ZS_ENOMEM;
	c->dev = d;
	c->rank = rank;
	c->nranks = nranks;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
	c->nccl = !zs_dev_emulated(d);
	st = c->nccl ? zs_nccl_open(c, id, why, len) : emu_open(c, id, why, len);
	if (st) {
		free(c);
		return st;
	}
	*out = c;
	return ZS_OK;
}

void zs_coll_close(struct zs_coll *c)
{
	if (!c)
		return;
	if (c->nccl)
		zs_nccl_close(c);
	else
		emu_close(c);
	free(c);
}

const char *zs_coll_error(const struct zs_coll *c) { return c->err; }
int zs_coll_rank(const struct zs_coll *c) { return c->rank; }
int zs_coll_size(const struct zs_coll *c) { return c->nranks; }

enum zs_status zs_coll_wait(struct zs_coll *c, zs_dev_stream s)
{
	enum zs_status st;
	if (c->nccl)
		return zs_nccl_wait(c, s);
	/* emulated collectives are complete when they return */
	st = zs_dev_stream_sync(c->dev, s);
	return st ? zs_coll_fail(c, st, "%s", zs_dev_error(c->dev)) : ZS_OK;
}

enum zs_status zs_coll_all_gather(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s)
{
	return c->nccl ? zs_nccl_all_gather(c, send, recv, n, s)
		       : emu_exchange(c, send, recv, n, s, false);
}

enum zs_status zs_coll_all_to_all(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s)
{
	return c->nccl ? zs_nccl_all_to_all(c, send, recv, n, s)
		       : emu_exchange(c, send, recv, n, s, true);
}
