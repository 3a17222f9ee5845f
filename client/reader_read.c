/*
 * reader_read.c - a weight reader's reads (include/zshard_reader.h): a
 * tensor of the pinned version from its parent in the relay tree, else
 * from the primaries of its unit's shards, range by range, each checked
 * against the CRC32C its sender took; converted to the dtype asked for.
 */
#include "client/reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/util.h"

/* One range of a read: a primary's part of the tensor. */
struct rpart {
	struct zs_req *q;
	uint64_t sid, off, len; /* elements from the tensor's start */
	uint32_t crc;
	bool one_sided; /* from the server's arena (shm, rdma) */
	enum zs_status st;
	char msg[ZS_ERRMSG_MAX];
};

/* Waits for part x (within the handle's bound): its status in x->st. A
 * server that does not answer in time has its connection closed (the
 * request's buffer is the caller's again only then). */
static void finish_part(zs_reader *r, struct rpart *x)
{
	struct zs_error e = {0};

	if (!x->q)
		return;
	x->st = zs_req_wait(x->q, r->timeout_ms, &e);
	if (x->st == ZS_EUNAVAIL) { /* broken: a failover may follow */
		rd_lose(r, x->sid);
	} else if (x->st == ZS_ENOSPC) { /* a copy not in its arena: tcp */
		rd_tcp_only(r, x->sid);
		x->st = ZS_EUNAVAIL;
	} else if (x->st == ZS_EAGAIN) {
		rd_lose(r, x->sid);
		x->st = ZS_ETIMEDOUT;
		snprintf(e.msg, sizeof e.msg, "server %llu did not answer a read within %d ms",
			 (unsigned long long)x->sid, r->timeout_ms);
	}
	snprintf(x->msg, sizeof x->msg, "%s", e.msg);
	x->q = NULL;
}

/* Posts the pinned reads of te's elements from unit u's primaries into
 * buf (the unit's dtype), one per shard it crosses: p[0 .. *np). */
static enum zs_status post_parts(zs_reader *r, uint32_t u, const struct zs_tensor *te,
				 uint8_t *buf, struct rpart *p, uint32_t *np, struct zs_error *err)
{
	const struct zs_placement *pl = &r->job.placement;
	enum zs_dtype dt = r->job.spec.layout.units[u].dtype;
	size_t dsz = zs_dtype_size(dt);
	uint64_t a0 = te->offset, a1 = te->offset + te->numel;
	uint32_t oldest = 0;

	for (uint32_t k = 0; k < pl->n_shards; k++) {
		const struct zs_shard *sh = &pl->shards[k];
		uint64_t lo = sh->offset > a0 ? sh->offset : a0;
		uint64_t hi = sh->offset + sh->length < a1 ? sh->offset + sh->length : a1;
		struct zs_conn *c = rd_conn_of(r, sh->server_id);
		enum zs_status st;
		if (sh->unit != u || sh->copy || lo >= hi)
			continue;
		if (!c)
			return zs_fail(err, ZS_EUNAVAIL, "no connection to server %llu",
				       (unsigned long long)sh->server_id);
		struct rpart *x = &p[*np];
		*x = (struct rpart){.sid = sh->server_id, .off = lo - a0, .len = hi - lo,
				    .one_sided = zs_conn_transport(c) != &zs_tcp_transport};
		struct zs_xfer xf = {.unit = u, .offset = lo, .length = hi - lo, .step = r->pin,
				     .dtype = dt, .pinned = true, .crc = &x->crc};
		/* back-pressure: the oldest of this read's done first */
		while ((st = zs_post_read(c, &xf, buf + x->off * dsz, &x->q, err)) == ZS_EAGAIN &&
		       oldest < *np)
			finish_part(r, &p[oldest++]);
		if (st)
			return st;
		(*np)++;
	}
	return ZS_OK;
}

/* Reads te's parts p[0 .. *np) of unit u at the pinned step into buf; a
 * shard that has not reached the step yet (ZS_ESTATE) or a server lost is
 * asked again until deadline. */
static enum zs_status read_parts(zs_reader *r, uint32_t u, const struct zs_tensor *te,
				 uint8_t *buf, struct rpart *p, uint32_t *np, int64_t deadline,
				 struct zs_error *err)
{
	enum zs_status st;

	for (int pause = 2;; pause = pause < 50 ? pause * 2 : 50) {
		*np = 0;
		st = post_parts(r, u, te, buf, p, np, err);
		for (uint32_t i = 0; i < *np; i++) {
			finish_part(r, &p[i]);
			if (p[i].st && !st)
				st = zs_fail(err, p[i].st, "%s", p[i].msg);
		}
		/* ZS_ESTATE: a shard has not reached the step yet */
		if ((st != ZS_ESTATE && st != ZS_EUNAVAIL) || zs_now_ms() >= deadline)
			return st;
		zs_sleep_ms(pause, NULL);
		/* a server lost: the placement the failover makes */
		if (st == ZS_EUNAVAIL && (st = rd_refresh(r, err)))
			return st;
	}
}

/* The first of parts p[0 .. np) whose bytes in buf fail their CRC32C
 * (*got theirs), or np. */
static uint32_t bad_part(const struct rpart *p, uint32_t np, const uint8_t *buf, size_t dsz,
			 uint32_t *got)
{
	for (uint32_t i = 0; i < np; i++)
		if ((*got = zs_crc32c(0, buf + p[i].off * dsz, p[i].len * dsz)) != p[i].crc)
			return i;
	return np;
}

/* Reads te of unit u at the pinned step into buf (its unit's dtype),
 * checking each range's CRC32C, within the handle's bound. Bytes taken
 * from a server's arena (shm, rdma) that fail their CRC32C are asked for
 * once more: a copy its pin let go of (a rollback) while they were read,
 * which the server then says is gone. *whole: te's CRC32C when one range
 * was all of it (checked already), else unset. */
static enum zs_status read_tensor(zs_reader *r, uint32_t u, const struct zs_tensor *te,
				  uint8_t *buf, uint32_t *whole, bool *known, struct zs_error *err)
{
	size_t dsz = zs_dtype_size(r->job.spec.layout.units[u].dtype);
	struct rpart *p = calloc(r->job.placement.n_shards + 1, sizeof *p);
	int64_t deadline = zs_now_ms() + r->timeout_ms;
	enum zs_status st;
	uint32_t np, k, got = 0;

	if (!p)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	st = read_parts(r, u, te, buf, p, &np, deadline, err);
	k = st ? np : bad_part(p, np, buf, dsz, &got);
	if (k < np && p[k].one_sided) {
		st = read_parts(r, u, te, buf, p, &np, deadline, err);
		k = st ? np : bad_part(p, np, buf, dsz, &got);
	}
	if (k < np)
		st = zs_fail(err, ZS_EIO,
			     "tensor '%s': elements [%llu, +%llu) from server %llu do not match the CRC32C it sent (%08x, received %08x)",
			     te->name, (unsigned long long)p[k].off, (unsigned long long)p[k].len,
			     (unsigned long long)p[k].sid, p[k].crc, got);
	for (uint32_t i = 0; !st && i < np; i++)
		if (p[i].one_sided) {
			pthread_mutex_lock(&r->tr.mu);
			r->tr.from_servers_one_sided += p[i].len * dsz;
			pthread_mutex_unlock(&r->tr.mu);
		}
	if (!st && np == 1 && p[0].off == 0 && p[0].len == te->numel) {
		*whole = p[0].crc;
		*known = true;
	}
	free(p);
	return st;
}

/* Tensor t from the parent into buf, *crc its CRC32C (checked): ZS_OK,
 * or why the servers serve it (a parent that failed is reported lost, and
 * the next one tried). */
static enum zs_status via_tree(zs_reader *r, const struct rtensor *t, uint8_t *buf, size_t len,
			       uint32_t *crc)
{
	struct zs_error err = {0};
	enum zs_status st = ZS_ESTATE;

	for (int tries = 0; tries < 4; tries++) {
		st = rd_tree_fetch(r, (uint32_t)(t - r->t), buf, len, crc, &err);
		if (st != ZS_EUNAVAIL && st != ZS_EIO && st != ZS_EPROTO)
			break;
		zs_warn("reader of job '%s': its parent in the relay tree failed (%s): reported lost",
			r->job.spec.name, err.msg);
		if (rd_tree_lost(r, &err))
			break;
	}
	/* the servers serve it: a parent with another version or that does
	 * not read the tensor is as expected, anything else is said */
	if (st && st != ZS_ESTATE && st != ZS_ENOTFOUND && st != ZS_ETIMEDOUT && st != ZS_EUNAVAIL &&
	    st != ZS_EIO && st != ZS_EPROTO)
		zs_warn("reader of job '%s': its parent did not relay '%s' (%s): read from the servers",
			r->job.spec.name, t->name, err.msg);
	return st;
}

int zs_reader_read(zs_reader *r, const char *name, int dtype, void *dst, size_t dst_bytes,
		   unsigned *crc)
{
	struct zs_error err = {0};
	const struct rtensor *t = name ? rd_find(r, name) : NULL;
	enum zs_status st = ZS_OK;

	if (!t)
		return rd_said(r, zs_fail(&err, ZS_EINVAL, "job '%s' has no tensor '%s'",
				       r->job.spec.name, name ? name : "(null)"), &err);
	const struct zs_unit *u = &r->job.spec.layout.units[t->unit];
	const struct zs_tensor *te = &u->tensors[t->tensor];
	size_t want = zs_dtype_size((enum zs_dtype)dtype), usz = zs_dtype_size(u->dtype);
	if (dtype < ZS_F32 || dtype > ZS_F16 || !want)
		return rd_said(r, zs_fail(&err, ZS_EINVAL, "dtype %d is none of 1 (f32), 2 (bf16), 3 (f16)",
				       dtype), &err);
	if (dst_bytes < te->numel * want)
		return rd_said(r, zs_fail(&err, ZS_EINVAL,
				       "tensor '%s' is %llu elements: %zu bytes as %s, the buffer has %zu",
				       t->name, (unsigned long long)te->numel, te->numel * want,
				       zs_dtype_name((enum zs_dtype)dtype), dst_bytes), &err);
	if (!r->have_pin)
		return rd_said(r, zs_fail(&err, ZS_ESTATE, "no version is pinned: zs_reader_pin first"),
			    &err);
	/* the unit's dtype straight into dst; another through a buffer */
	uint8_t *buf = (enum zs_dtype)dtype == u->dtype ? dst : malloc(te->numel * usz + 1);
	float *f32 = NULL;
	if (!buf)
		return rd_said(r, zs_fail(&err, ZS_ENOMEM, "out of memory"), &err);
	/* the tensor's CRC32C: its sender's where one range was all of it
	 * (checked against the bytes already), else taken here */
	uint32_t tcrc = 0;
	bool relayed = te->numel && !via_tree(r, t, buf, te->numel * usz, &tcrc), known = relayed;
	if (te->numel && !relayed)
		st = r->pin & ZS_VERSION_CKPT
			     ? rd_ckpt_read(r, t->unit, te, buf, &err)
			     : read_tensor(r, t->unit, te, buf, &tcrc, &known, &err);
	if (st == ZS_ERESUME) { /* the restore of a rollback dropped the version */
		uint64_t was = r->pin;
		rd_rejoin(r, NULL);
		st = zs_fail(&err, ZS_ENOTFOUND,
			     "job '%s' rolled back while step %llu was pinned: the version was dropped (pin one again)",
			     r->job.spec.name, (unsigned long long)was);
	}
	if (!st && !known)
		tcrc = zs_crc32c(0, buf, te->numel * usz);
	if (!st)
		rd_tree_got(r, (uint32_t)(t - r->t), buf, te->numel * usz, tcrc, relayed);
	if (!st && crc)
		*crc = tcrc;
	if (!st && buf != dst) {
		if (dtype == ZS_F32) {
			zs_convert_to_f32(dst, buf, u->dtype, te->numel);
		} else if (!(f32 = malloc(te->numel * 4 + 1))) {
			st = zs_fail(&err, ZS_ENOMEM, "out of memory");
		} else {
			zs_convert_to_f32(f32, buf, u->dtype, te->numel);
			zs_convert_from_f32(dst, (enum zs_dtype)dtype, f32, te->numel);
		}
	}
	free(f32);
	if (buf != dst)
		free(buf);
	return rd_said(r, st, &err);
}
