/*
 * shm.c - the shared-memory transport, for a trainer on its server's host.
 * HELLO over an abstract Unix socket hands the trainer the server's arena
 * (a memfd) by SCM_RIGHTS, which it maps; a gather is a notification
 * answered with the range's place in the arena, which the trainer copies
 * from; a push asks for a staging slot, copies into it and says PUSH.
 * Only the small frames cross the socket.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/listener.h"
#include "net/sockio.h"
#include "net/stream.h"

struct shm_map {
	uint8_t *base;
	size_t len;
};

static enum zs_status shm_attach(struct zs_conn *c, const char *addr, int sock,
				 uint64_t region_len, int fd, void **ctx, struct zs_error *err)
{
	struct shm_map *m = calloc(1, sizeof *m);

	(void)c;
	(void)addr;
	(void)sock;
	if (!m) {
		close(fd);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	m->len = region_len;
	m->base = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m->base == MAP_FAILED) {
		free(m);
		return zs_fail(err, ZS_ENOMEM, "cannot map the server's shared region: %s",
			       strerror(errno));
	}
	*ctx = m;
	return ZS_OK;
}

/* The receiver thread copies, so the move is done when this returns. */
static enum zs_status shm_move(void *ctx, struct zs_req *r, bool write, void *buf,
			       size_t bytes, uint64_t off, struct zs_error *err)
{
	struct shm_map *m = ctx;

	(void)r;
	(void)err;
	if (write)
		memcpy(m->base + off, buf, bytes);
	else
		memcpy(buf, m->base + off, bytes);
	return ZS_OK;
}

static void shm_detach(void *ctx)
{
	struct shm_map *m = ctx;
	munmap(m->base, m->len);
	free(m);
}

static const struct stream_hooks shm_hooks = {
	.unix_addr = true,
	.hello_fd = true,
	.attach = shm_attach,
	.move = shm_move,
	.detach = shm_detach,
};

const struct zs_transport_ops zs_shm_transport = {
	.name = "shm",
	.caps = ZS_CAP_SAME_HOST,
	.bit = ZS_TRANSPORT_SHM,
	.hooks = &shm_hooks,
	.reg = stream_reg,
	.dereg = stream_dereg,
};

/* ------------------------------------------------------- the server half */

/* An abstract unix socket of a fresh name, "@zshard-PID-N": nothing on
 * disk to clean up, and gone with the process. */
static int shm_listen(const char *addr, char *bound, struct zs_error *err)
{
	static atomic_int seq;
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	char name[sizeof un.sun_path];
	int n, fd;

	(void)addr;
	n = snprintf(name, sizeof name, "@zshard-%d-%d", (int)getpid(), atomic_fetch_add(&seq, 1));
	memcpy(un.sun_path + 1, name + 1, (size_t)n - 1);
	fd = zs_listen_on(AF_UNIX, (struct sockaddr *)&un,
			  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n), name, err);
	if (fd < 0)
		return -1;
	snprintf(bound, ZS_ADDR_MAX, "%s", name);
	return fd;
}

/*
 * Who may map the arena: an abstract socket has no file mode, so anyone on
 * the host who finds its name could connect (and, before its HELLO proves
 * the token, read the arena's descriptor's size): the peer must be this
 * server's user, root, or of the group --shm-group names (its primary).
 */
static _Atomic long allowed_gid = -1;

void zs_shm_allow_group(gid_t gid)
{
	atomic_store(&allowed_gid, gid == (gid_t)-1 ? -1 : (long)gid);
}

static bool shm_peer_ok(int fd, char *why)
{
	struct ucred cr;
	socklen_t len = sizeof cr;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
		snprintf(why, ZS_ERRMSG_MAX, "shm: the peer's credentials are unknown (%s)",
			 strerror(errno));
		return false;
	}
	if (cr.uid == geteuid() || cr.uid == 0 ||
	    (atomic_load(&allowed_gid) >= 0 && (long)cr.gid == atomic_load(&allowed_gid)))
		return true;
	snprintf(why, ZS_ERRMSG_MAX,
		 "shm: process %d of user %u (group %u) may not use this server's shared memory (it runs as user %u%s): run the trainer as that user, give the server --shm-group, or use tcp",
		 (int)cr.pid, (unsigned)cr.uid, (unsigned)cr.gid, (unsigned)geteuid(),
		 atomic_load(&allowed_gid) >= 0 ? ", and admits one other group" : "");
	return false;
}

const struct zs_endpoint_ops zs_shm_endpoint = {
	.name = "shm",
	.offsets = true,
	.pass_arena = true,
	.listen = shm_listen,
	.peer_ok = shm_peer_ok,
};
