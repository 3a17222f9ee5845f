/*
 * reader_tree.c - a weight reader's place in its job's relay tree: its
 * registration with the coordinator (coord/readers.c), renewed by a thread
 * of its own within the lease; the parent the coordinator names for the
 * version it pins, read from before the servers; a parent that does not
 * serve reported lost (the coordinator routes around it); and its relay,
 * which keeps what it read for its own children (relay.c).
 */
#include "client/reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/util.h"
#include "client/relay.h"
#include "ctrl/codec.h"
#include "ctrl/coord_client.h"

/* One call of the registry with r's state now (leave, lost: what it
 * says); the answer's parent taken when take_parent. */
static enum zs_status call_registry(zs_reader *r, bool leave, uint64_t lost, bool take_parent,
				    struct zs_error *err)
{
	struct zs_coord_client *c = NULL;
	struct zs_reader_req q = {.leave = leave, .lost = lost};
	struct zs_reader_ans a = {0};
	enum zs_status st;

	pthread_mutex_lock(&r->tr.mu);
	snprintf(q.job, sizeof q.job, "%s", r->job.spec.name);
	r->tr.me.served = relay_served(r->tr.relay);
	q.me = r->tr.me;
	q.fanout = r->tr.fanout;
	pthread_mutex_unlock(&r->tr.mu);
	st = zs_coord_open(r->coord, r->timeout_ms, 0, &c, err);
	if (!st)
		st = zs_coord_reader(c, &q, &a, err);
	zs_coord_close(c);
	if (st)
		return st;
	pthread_mutex_lock(&r->tr.mu);
	r->tr.me.id = a.id;
	/* the timeline of the version this call said, if it is still the
	 * one pinned (a renewal's answer may come after a new pin's) */
	if (r->tr.me.pinned == q.me.pinned && r->tr.me.step == q.me.step) {
		r->tr.me.timeline = a.timeline;
		relay_timeline(r->tr.relay, q.me.step, a.timeline);
	}
	r->tr.lease_ms = a.lease_ms ? a.lease_ms : 10000;
	if (take_parent && (a.parent != r->tr.parent || strcmp(a.parent_addr, r->tr.parent_addr))) {
		zs_conn_close(r->tr.pc);
		r->tr.pc = NULL;
		r->tr.parent = a.parent;
		snprintf(r->tr.parent_addr, sizeof r->tr.parent_addr, "%s", a.parent_addr);
	}
	pthread_mutex_unlock(&r->tr.mu);
	return ZS_OK;
}

/* Renews the registration a third of the lease apart until stopped. */
static void *renew_main(void *arg)
{
	zs_reader *r = arg;

	pthread_mutex_lock(&r->tr.mu);
	while (!r->tr.stop) {
		struct timespec ts = zs_deadline_in(r->tr.lease_ms / 3);
		if (pthread_cond_timedwait(&r->tr.cv, &r->tr.mu, &ts) != ETIMEDOUT || r->tr.stop)
			continue;
		pthread_mutex_unlock(&r->tr.mu);
		/* a coordinator away for a while: the next renewal tries again */
		call_registry(r, false, 0, false, NULL);
		pthread_mutex_lock(&r->tr.mu);
	}
	pthread_mutex_unlock(&r->tr.mu);
	return NULL;
}

enum zs_status rd_tree_start(zs_reader *r, struct zs_error *err)
{
	enum zs_status st;
	char host[ZS_ADDR_MAX] = "";

	pthread_mutex_init(&r->tr.mu, NULL);
	pthread_cond_init(&r->tr.cv, NULL);
	r->tr.pc = NULL;
	r->tr.fanout = 2;
	gethostname(host, sizeof host - 1);
	snprintf(r->tr.me.host, sizeof r->tr.me.host, "%s", host);
	if ((st = call_registry(r, false, 0, false, err)))
		return st;
	if (pthread_create(&r->tr.th, NULL, renew_main, r))
		return zs_fail(err, ZS_ENOMEM, "cannot start the reader's renewal thread");
	r->tr.th_on = true;
	return ZS_OK;
}

void rd_tree_stop(zs_reader *r)
{
	if (!r->tr.th_on)
		return;
	pthread_mutex_lock(&r->tr.mu);
	r->tr.stop = true;
	pthread_cond_broadcast(&r->tr.cv);
	pthread_mutex_unlock(&r->tr.mu);
	pthread_join(r->tr.th, NULL);
	r->tr.th_on = false;
	call_registry(r, true, 0, false, NULL);
	relay_stop(r->tr.relay);
	r->tr.relay = NULL;
	zs_conn_close(r->tr.pc);
	r->tr.pc = NULL;
	pthread_cond_destroy(&r->tr.cv);
	pthread_mutex_destroy(&r->tr.mu);
}

enum zs_status rd_tree_pinned(zs_reader *r, struct zs_error *err)
{
	pthread_mutex_lock(&r->tr.mu);
	r->tr.me.pinned = r->have_pin;
	r->tr.me.step = r->pin;
	/* a version new to it: the run its servers stamped their pins with
	 * (engine/pins.c); 0 from servers that do not say: the coordinator's
	 * word then */
	r->tr.me.timeline = r->have_pin && !(r->pin & ZS_VERSION_CKPT) ? r->pin_run : 0;
	pthread_mutex_unlock(&r->tr.mu);
	relay_version(r->tr.relay, r->pin, r->have_pin);
	return call_registry(r, false, 0, true, err);
}

enum zs_status rd_tree_lost(zs_reader *r, struct zs_error *err)
{
	uint64_t lost = r->tr.parent;

	return call_registry(r, false, lost, true, err);
}

/* Tensor t as its relay serves it. */
static struct relay_tensor relay_tensor_of(const zs_reader *r, const struct rtensor *t)
{
	const struct zs_unit *u = &r->job.spec.layout.units[t->unit];

	return (struct relay_tensor){t->unit, u->tensors[t->tensor].offset,
				     u->tensors[t->tensor].numel, u->dtype};
}

enum zs_status rd_tree_fetch(zs_reader *r, uint32_t i, void *dst, size_t len, uint32_t *crc,
			     struct zs_error *err)
{
	struct relay_tensor t = relay_tensor_of(r, &r->t[i]);
	enum zs_status st = ZS_OK;
	bool rdma = false;

	if (!r->tr.parent)
		return zs_fail(err, ZS_ESTATE, "no parent");
	/* over rdma the bytes are read from the parent's copy after its
	 * answer: a copy it let go meanwhile (it moved on to another
	 * version) fails the CRC32C, and the second try says so */
	for (int tries = 0; tries < 2; tries++) {
		if (!r->tr.pc &&
		    (st = relay_dial(r->tr.parent_addr, r->job.spec.name, r->rtoken,
				     r->job.spec.data_tls, r->timeout_ms, &r->tr.pc, err)))
			return st;
		rdma = !strcmp(zs_conn_transport(r->tr.pc)->name, "rdma");
		pthread_mutex_lock(&r->tr.mu);
		const uint64_t tl = r->tr.me.timeline;
		pthread_mutex_unlock(&r->tr.mu);
		st = relay_fetch(&r->tr.pc, &t, r->pin, tl, dst, crc, r->timeout_ms, err);
		if (!st && zs_crc32c(0, dst, len) != *crc)
			st = zs_fail(err, ZS_EIO,
				     "the relay's bytes of tensor '%s' do not match their CRC32C",
				     r->t[i].name);
		if (st != ZS_EIO || !rdma)
			break;
	}
	if (r->tr.pc && (st == ZS_EIO || st == ZS_EPROTO)) {
		/* bytes that do not hold: drop the connection */
		zs_conn_close(r->tr.pc);
		r->tr.pc = NULL;
	}
	if (!st && rdma) {
		pthread_mutex_lock(&r->tr.mu);
		r->tr.from_relay_rdma += len;
		pthread_mutex_unlock(&r->tr.mu);
	}
	return st;
}

void rd_tree_got(zs_reader *r, uint32_t i, const void *b, size_t len, uint32_t crc,
		 bool from_relay)
{
	relay_put(r->tr.relay, i, b, len, crc);
	pthread_mutex_lock(&r->tr.mu);
	if (from_relay)
		r->tr.me.from_relay += len;
	else
		r->tr.me.from_servers += len;
	pthread_mutex_unlock(&r->tr.mu);
}

int zs_reader_relay(zs_reader *r, const char *listen_addr, unsigned fanout)
{
	struct zs_error err = {0};
	char addr[ZS_ADDR_MAX];
	struct relay *rl = NULL;
	enum zs_status st;

	if (r->tr.relay)
		return rd_said(r, zs_fail(&err, ZS_ESTATE, "this reader relays already"), &err);
	if (fanout > 64)
		return rd_said(r, zs_fail(&err, ZS_EINVAL, "a fanout of %u (1 to 64)", fanout),
			       &err);
	struct relay_tensor *ts = calloc(r->n_t ? r->n_t : 1, sizeof *ts);
	if (!ts)
		return rd_said(r, zs_fail(&err, ZS_ENOMEM, "out of memory"), &err);
	for (uint32_t i = 0; i < r->n_t; i++)
		ts[i] = relay_tensor_of(r, &r->t[i]);
	st = relay_start(listen_addr ? listen_addr : "0.0.0.0:0", r->job.spec.name, r->rtoken,
			 r->job.spec.data_tls, ts, r->n_t, r->timeout_ms, &rl, addr, &err);
	free(ts);
	if (st)
		return rd_said(r, st, &err);
	relay_version(rl, r->pin, r->have_pin);
	pthread_mutex_lock(&r->tr.mu);
	r->tr.relay = rl;
	r->tr.fanout = fanout ? fanout : 2;
	snprintf(r->tr.me.relay_addr, sizeof r->tr.me.relay_addr, "%s", addr);
	pthread_mutex_unlock(&r->tr.mu);
	return rd_said(r, call_registry(r, false, 0, true, &err), &err);
}

const char *zs_reader_relay_addr(const zs_reader *r)
{
	return r && r->tr.relay ? r->tr.me.relay_addr : "";
}

void zs_reader_stats(const zs_reader *r, struct zs_reader_stats *s)
{
	zs_reader *w = (zs_reader *)r;

	pthread_mutex_lock(&w->tr.mu);
	*s = (struct zs_reader_stats){.id = r->tr.me.id, .parent = r->tr.parent,
				      .bytes_from_servers = r->tr.me.from_servers,
				      .bytes_from_relay = r->tr.me.from_relay,
				      .bytes_from_relay_rdma = r->tr.from_relay_rdma,
				      .bytes_from_servers_one_sided = r->tr.from_servers_one_sided,
				      .bytes_served = relay_served(r->tr.relay)};
	pthread_mutex_unlock(&w->tr.mu);
}
