/*
 * listener_dev.c - pushes from a trainer's device memory (ZS_WF_DEVICE):
 * a shm peer whose HELLO_OK said the server keeps shards on its own device
 * names the device allocation that holds a push's range (its handle, the
 * trainer's number for it, the range's offset) instead of copying the
 * bytes into the arena. The connection maps each allocation once (the
 * target's dev_map) and keeps up to DMAP_MAX mappings, the least recently
 * used undone first, all of them when it ends. A mapping is found by the
 * trainer's number as well as the handle: an allocation the trainer freed
 * and another it made at the same place are never taken for each other.
 */
#include "net/listener_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/le.h"
#include "net/sockio.h"

#define DMAP_MAX 16

struct dmap {
	uint64_t serial;
	unsigned char handle[64];
	void *base;
	uint64_t size;
	uint64_t used; /* c->dv.clock when last used */
};

/* The mapping of (handle, serial) on c, made now if it is not there. */
static struct dmap *dmap_get(struct zs_lconn *c, const unsigned char *handle, uint64_t serial,
			     struct zs_error *err)
{
	struct zs_listener *l = c->l;
	struct dmap *m = NULL;

	if (!c->dv.maps && !(c->dv.maps = calloc(DMAP_MAX, sizeof *c->dv.maps))) {
		zs_fail(err, ZS_ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < c->dv.n; i++)
		if (c->dv.maps[i].serial == serial && !memcmp(c->dv.maps[i].handle, handle, 64))
			m = &c->dv.maps[i];
	if (!m) {
		if (c->dv.n == DMAP_MAX) { /* undo the least recently used */
			m = &c->dv.maps[0];
			for (size_t i = 1; i < c->dv.n; i++)
				if (c->dv.maps[i].used < m->used)
					m = &c->dv.maps[i];
			l->t.dev_unmap(l->t.ctx, m->base, m->size);
			*m = c->dv.maps[--c->dv.n];
		}
		m = &c->dv.maps[c->dv.n];
		*m = (struct dmap){.serial = serial};
		memcpy(m->handle, handle, 64);
		if (l->t.dev_map(l->t.ctx, handle, &m->base, &m->size, err))
			return NULL;
		c->dv.n++;
	}
	m->used = ++c->dv.clock;
	return m;
}

int lsn_on_device_push(struct zs_lconn *c, const struct zs_frame *f, struct zs_xfer *x,
		       int64_t t0)
{
	struct zs_listener *l = c->l;
	struct zs_error err = {0};
	uint8_t pl[ZS_WIRE_DEV_SRC];
	uint64_t off, bytes = x->length * zs_dtype_size(x->dtype);
	struct dmap *m;
	struct zs_sop *op;
	void *dst;

	if (f->payload_len != sizeof pl || !c->dv.on) {
		lsn_send_error(c, f->req_id, ZS_EPROTO,
			       c->dv.on ? "a device push's payload is not a device range"
				      : "this connection takes no pushes from device memory");
		return -1;
	}
	if (zs_io_read(&c->io, pl, sizeof pl))
		return -1;
	if (x->init || x->replica) {
		lsn_send_error(c, f->req_id, ZS_EINVAL,
			       "initial parameters and replicas' pushes come through the arena, not from device memory");
		return 0;
	}
	m = dmap_get(c, pl, zs_get64(pl + 64), &err);
	if (!m) {
		zs_error_prefix(&err, "cannot map the trainer's device memory");
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return 0;
	}
	off = zs_get64(pl + 72);
	if (off > m->size || bytes > m->size - off) {
		lsn_send_error(c, f->req_id, ZS_EINVAL,
			       "a device push's range lies outside the allocation it names");
		return 0;
	}
	x->dsrc = (const uint8_t *)m->base + off;
	if (lsn_begin_write(c, x, &dst, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return 0;
	}
	op = lsn_new_sop(c, f, x, t0);
	if (!op) {
		l->t.write_abort(l->t.ctx, c->job, c->rank, x, dst);
		return -1;
	}
	l->t.write_done(l->t.ctx, op, c->job, c->rank, x, dst);
	return 0;
}

void lsn_dev_conn_end(struct zs_lconn *c)
{
	for (size_t i = 0; i < c->dv.n; i++)
		c->l->t.dev_unmap(c->l->t.ctx, c->dv.maps[i].base, c->dv.maps[i].size);
	free(c->dv.maps);
	c->dv.maps = NULL;
	c->dv.n = 0;
}
