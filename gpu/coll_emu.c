/*
 * coll_emu.c - the emulated communicator (gpu/coll.h) for the emulated
 * device: ranks are processes (or threads) of one host that meet in a
 * shared-memory segment named by the id (/dev/shm/zscoll-...). Each
 * collective copies this rank's bytes into the segment, meets the others
 * (a process-shared barrier, bounded by the open's timeout), copies out
 * what it receives and meets them again before the segment is reused. The
 * name is unlinked once every rank has opened it, so nothing outlives the
 * ranks.
 */
#include "gpu/coll_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"

static const char EMU_MAGIC[8] = "zsemucol";
#define HDR 4096
#define DATA (1ull << 30) /* virtual: tmpfs backs only what is touched */

struct seg {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_int ready; /* the creator initialized the above */
	int nranks;
	int arrived;
	uint64_t gen; /* barriers passed */
};

/* The segment's data, after its header. */
static uint8_t *seg_data(struct seg *s) { return (uint8_t *)s + HDR; }

static void seg_name(const uint8_t id[ZS_COLL_ID_BYTES], char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "/zscoll-");
	for (int i = 0; i < 16 && n + 2 < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%02x", id[sizeof EMU_MAGIC + i]);
}

static void lock(struct seg *s)
{
	if (pthread_mutex_lock(&s->mu) == EOWNERDEAD) /* a rank died in it */
		pthread_mutex_consistent(&s->mu);
}

/* Meets every rank (false past the deadline: the arrival is taken back). */
static bool barrier(struct seg *s, const struct timespec *deadline)
{
	bool ok = true;
	lock(s);
	uint64_t gen = s->gen;
	if (++s->arrived == s->nranks) {
		s->arrived = 0;
		s->gen++;
		pthread_cond_broadcast(&s->cv);
	} else {
		while (s->gen == gen) {
			int rc = pthread_cond_timedwait(&s->cv, &s->mu, deadline);
			if (rc == EOWNERDEAD)
				pthread_mutex_consistent(&s->mu);
			if (rc == ETIMEDOUT && s->gen == gen) {
				s->arrived--;
				ok = false;
				break;
			}
		}
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

enum zs_status zs_emu_coll_new_id(uint8_t id[ZS_COLL_ID_BYTES], char *why, size_t len)
{
	memset(id, 0, ZS_COLL_ID_BYTES);
	memcpy(id, EMU_MAGIC, sizeof EMU_MAGIC);
	if (getrandom(id + sizeof EMU_MAGIC, 16, 0) != 16) {
		if (why && len)
			snprintf(why, len, "getrandom: %s", strerror(errno));
		return ZS_EIO;
	}
	return ZS_OK;
}

static void init_seg(struct seg *s, int nranks)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&s->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	s->nranks = nranks;
	atomic_store(&s->ready, 1);
}

enum zs_status zs_emu_coll_open(struct zs_coll *c, const uint8_t id[ZS_COLL_ID_BYTES], char *why,
				size_t len)
{
	struct timespec dl = zs_deadline_in(c->timeout_ms);
	int64_t until = zs_now_ms() + c->timeout_ms;
	char name[64];
	struct seg *sg;
	bool creator = false;
	struct stat sb;
	int fd;
	void *m;

	if (memcmp(id, EMU_MAGIC, sizeof EMU_MAGIC)) {
		if (why && len)
			snprintf(why, len, "not an emulated communicator's id (one made for NCCL?)");
		return ZS_EINVAL;
	}
	seg_name(id, name, sizeof name);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd >= 0) {
		creator = true;
		if (ftruncate(fd, (off_t)(HDR + DATA))) {
			if (why && len)
				snprintf(why, len, "sizing %s: %s", name, strerror(errno));
			close(fd);
			shm_unlink(name);
			return ZS_EIO;
		}
	} else if (errno == EEXIST) {
		fd = shm_open(name, O_RDWR, 0600);
	}
	if (fd < 0) {
		if (why && len)
			snprintf(why, len, "opening %s: %s", name, strerror(errno));
		return errno == ENOENT ? ZS_ETIMEDOUT : ZS_EIO;
	}
	/* a joiner waits for the creator's size */
	while (!creator && (fstat(fd, &sb) || (uint64_t)sb.st_size < HDR + DATA)) {
		if (zs_now_ms() > until) {
			close(fd);
			if (why && len)
				snprintf(why, len, "%s was never sized by its creator", name);
			return ZS_ETIMEDOUT;
		}
		usleep(1000);
	}
	m = mmap(NULL, HDR + DATA, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		if (why && len)
			snprintf(why, len, "mapping %s: %s", name, strerror(errno));
		if (creator)
			shm_unlink(name);
		return ZS_EIO;
	}
	sg = m;
	if (creator)
		init_seg(sg, c->nranks);
	while (!atomic_load(&sg->ready) && zs_now_ms() <= until)
		usleep(1000);
	if (!atomic_load(&sg->ready) || sg->nranks != c->nranks || !barrier(sg, &dl)) {
		bool size = atomic_load(&sg->ready) && sg->nranks != c->nranks;
		if (why && len)
			snprintf(why, len, size ? "rank %d opens a communicator of %d ranks as one of %d"
					       : "rank %d waited %d ms for the communicator's %d ranks",
				 c->rank, size ? sg->nranks : c->timeout_ms, c->nranks);
		shm_unlink(name);
		munmap(m, HDR + DATA);
		return size ? ZS_EINVAL : ZS_ETIMEDOUT;
	}
	c->impl = sg;
	shm_unlink(name); /* every rank has it mapped: the name can go */
	return ZS_OK;
}

void zs_emu_coll_close(struct zs_coll *c)
{
	if (c->impl)
		munmap(c->impl, HDR + DATA);
}

enum zs_status zs_emu_coll_exchange(struct zs_coll *c, const void *send, void *recv, size_t n,
				    zs_dev_stream s, bool transpose)
{
	struct seg *sg = c->impl;
	struct timespec dl = zs_deadline_in(c->timeout_ms);
	size_t R = (size_t)c->nranks, me = (size_t)c->rank;
	size_t in = transpose ? R * n : n; /* what each rank puts in */
	enum zs_status st = zs_dev_stream_sync(c->dev, s); /* its earlier work first */

	if (st)
		return zs_coll_fail(c, st, "%s", zs_dev_error(c->dev));
	if (R * in > DATA)
		return zs_coll_fail(c, ZS_EINVAL,
				    "a collective of %zu bytes per rank is over the emulated communicator's %zu",
				    in, (size_t)(DATA / R));
	memcpy(seg_data(sg) + me * in, send, in);
	if (!barrier(sg, &dl))
		return zs_coll_fail(c, ZS_ETIMEDOUT, "rank %d waited %d ms for the other ranks' %s",
				    c->rank, c->timeout_ms, transpose ? "all-to-all" : "all-gather");
	for (size_t r = 0; r < R; r++)
		memcpy((uint8_t *)recv + r * n, seg_data(sg) + r * in + (transpose ? me * n : 0), n);
	if (!barrier(sg, &dl))
		return zs_coll_fail(c, ZS_ETIMEDOUT, "rank %d waited %d ms for the other ranks' copies",
				    c->rank, c->timeout_ms);
	return ZS_OK;
}
