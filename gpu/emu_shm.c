/*
 * emu_shm.c - the emulated device's shareable allocations (see emu_shm.h).
 */
#include "gpu/emu_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct emu_shm {
	void *p;
	size_t n;
	int fd;
	unsigned long long id;
	struct emu_shm *next;
};

/* what a handle holds (the rest of its 64 bytes zero) */
struct emu_handle {
	char magic[8];
	uint32_t pid;
	int32_t fd;
	uint64_t id;
	uint64_t size;
};
_Static_assert(sizeof(struct emu_handle) <= ZS_DEV_HANDLE_BYTES, "emu_handle");
static const char MAGIC[8] = "zsemu1";

static void name_of(char *out, size_t len, uint32_t pid, unsigned long long id)
{
	snprintf(out, len, "zsemu-%u-%llu", pid, id);
}

void emu_shm_init(struct emu_shms *m)
{
	pthread_mutex_init(&m->mu, NULL);
	m->list = NULL;
	m->next_id = 0;
}

void *emu_shm_alloc(struct zs_dev *d, struct emu_shms *m, size_t n)
{
	struct emu_shm *x = calloc(1, sizeof *x);
	char name[64];

	if (!x) {
		zs_dev_fail(d, ZS_ENOMEM, "out of memory");
		return NULL;
	}
	pthread_mutex_lock(&m->mu);
	x->id = ++m->next_id;
	pthread_mutex_unlock(&m->mu);
	name_of(name, sizeof name, (uint32_t)getpid(), x->id);
	x->n = n;
	x->fd = memfd_create(name, MFD_CLOEXEC);
	if (x->fd < 0 || ftruncate(x->fd, (off_t)n) ||
	    (x->p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0)) == MAP_FAILED) {
		zs_dev_fail(d, ZS_ENOMEM, "no shareable emulated device memory of %zu bytes: %s", n,
			    strerror(errno));
		if (x->fd >= 0)
			close(x->fd);
		free(x);
		return NULL;
	}
	pthread_mutex_lock(&m->mu);
	x->next = m->list;
	m->list = x;
	pthread_mutex_unlock(&m->mu);
	return x->p;
}

bool emu_shm_free(struct emu_shms *m, void *p)
{
	struct emu_shm **pp, *x;

	pthread_mutex_lock(&m->mu);
	for (pp = &m->list; (x = *pp) && x->p != p; pp = &x->next)
		;
	if (x)
		*pp = x->next;
	pthread_mutex_unlock(&m->mu);
	if (!x)
		return false;
	munmap(x->p, x->n);
	close(x->fd);
	free(x);
	return true;
}

void emu_shm_free_all(struct emu_shms *m)
{
	while (m->list)
		emu_shm_free(m, m->list->p);
	pthread_mutex_destroy(&m->mu);
}

enum zs_status emu_shm_share(struct zs_dev *d, struct emu_shms *m, const void *p, void **base,
			     size_t *size, unsigned char handle[ZS_DEV_HANDLE_BYTES])
{
	const uint8_t *c = p;
	struct emu_shm *x;
	struct emu_handle h = {0};

	pthread_mutex_lock(&m->mu);
	for (x = m->list; x; x = x->next)
		if (c >= (uint8_t *)x->p && c < (uint8_t *)x->p + x->n)
			break;
	if (x) {
		memcpy(h.magic, MAGIC, sizeof h.magic);
		h.pid = (uint32_t)getpid();
		h.fd = x->fd;
		h.id = x->id;
		h.size = x->n;
		*base = x->p;
		*size = x->n;
	}
	pthread_mutex_unlock(&m->mu);
	if (!x)
		return zs_dev_fail(d, ZS_EINVAL,
				   "%p is not shareable emulated device memory (allocated before zs_dev_set_shareable?)",
				   p);
	memset(handle, 0, ZS_DEV_HANDLE_BYTES);
	memcpy(handle, &h, sizeof h);
	return ZS_OK;
}

enum zs_status emu_map(struct zs_dev *d, const unsigned char handle[ZS_DEV_HANDLE_BYTES],
		       void **base, size_t *size)
{
	struct emu_handle h;
	char path[64], want[80], got[128];
	struct stat sb;
	ssize_t n;
	int fd;
	void *p;

	memcpy(&h, handle, sizeof h);
	if (memcmp(h.magic, MAGIC, sizeof MAGIC))
		return zs_dev_fail(d, ZS_EINVAL, "not a handle of an emulated device's memory");
	snprintf(path, sizeof path, "/proc/%u/fd/%d", h.pid, h.fd);
	name_of(want, sizeof want, h.pid, (unsigned long long)h.id);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return zs_dev_fail(d, ZS_ENOTFOUND,
				   "process %u's emulated device memory %s is gone (%s: %s)", h.pid,
				   want, path, strerror(errno));
	/* the descriptor may have been reused since: check it is that memfd */
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	n = readlink(path, got, sizeof got - 1);
	got[n > 0 ? n : 0] = '\0';
	if (strncmp(got, "/memfd:", 7) || strncmp(got + 7, want, strlen(want)) ||
	    (got[7 + strlen(want)] != '\0' && got[7 + strlen(want)] != ' ') || fstat(fd, &sb) ||
	    (uint64_t)sb.st_size != h.size || !h.size) {
		close(fd);
		return zs_dev_fail(d, ZS_ENOTFOUND,
				   "process %u's emulated device memory %s is gone (its descriptor %d is %s now)",
				   h.pid, want, h.fd, got[0] ? got : "closed");
	}
	p = mmap(NULL, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return zs_dev_fail(d, ZS_ENOMEM, "cannot map process %u's emulated device memory: %s",
				   h.pid, strerror(errno));
	*base = p;
	*size = h.size;
	return ZS_OK;
}

void emu_unmap(struct zs_dev *d, void *base, size_t size)
{
	(void)d;
	munmap(base, size);
}
