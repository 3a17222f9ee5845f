/*
 * codec_reader.c - the weight readers' registry messages (see codec.h):
 * a reader's call (Reader) and its answer, and the job's readers
 * (Readers).
 */
#include "ctrl/pb.h"

static Zshard__ReaderInfo *info_pb(struct arena *a, const struct zs_reader_info *r)
{
	Zshard__ReaderInfo *m = NEW(a, Zshard__ReaderInfo, ZSHARD__READER_INFO__INIT);

	if (!m)
		return NULL;
	m->id = r->id;
	m->pinned = r->pinned;
	m->step = r->step;
	m->parent = r->parent;
	m->relay_addr = (char *)r->relay_addr;
	m->host = (char *)r->host;
	m->from_servers = r->from_servers;
	m->from_relay = r->from_relay;
	m->served = r->served;
	m->age_ms = r->age_ms;
	m->timeline = r->timeline;
	return m;
}

static enum zs_status info_from(const Zshard__ReaderInfo *m, struct zs_reader_info *r,
				struct zs_error *err)
{
	enum zs_status st;

	*r = (struct zs_reader_info){.id = m->id, .pinned = m->pinned, .step = m->step,
				     .parent = m->parent, .from_servers = m->from_servers,
				     .from_relay = m->from_relay, .served = m->served,
				     .age_ms = m->age_ms, .timeline = m->timeline};
	if ((st = pb_cpy(r->relay_addr, sizeof r->relay_addr, m->relay_addr, "relay address",
			 err)))
		return st;
	return pb_cpy(r->host, sizeof r->host, m->host, "host", err);
}

enum zs_status zs_enc_reader_req(const struct zs_reader_req *q, struct zs_buf *out)
{
	Zshard__ReaderRequest m = ZSHARD__READER_REQUEST__INIT;
	struct arena a = {0};

	m.job = (char *)q->job;
	m.me = info_pb(&a, &q->me);
	m.leave = q->leave;
	m.lost = q->lost;
	m.fanout = q->fanout;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_reader_req(const uint8_t *p, size_t n, struct zs_reader_req *q,
				 struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReaderRequest, reader_request, p, n, err);
	*q = (struct zs_reader_req){.leave = m->leave, .lost = m->lost, .fanout = m->fanout};
	st = pb_cpy(q->job, sizeof q->job, m->job, "job name", err);
	if (!st && !m->me)
		st = zs_fail(err, ZS_EINVAL, "a reader's call without the reader");
	if (!st)
		st = info_from(m->me, &q->me, err);
	DONE(reader_request);
	return st;
}

enum zs_status zs_enc_reader_ans(const struct zs_reader_ans *r, struct zs_buf *out)
{
	Zshard__ReaderReply m = ZSHARD__READER_REPLY__INIT;
	struct arena a = {0};

	m.id = r->id;
	m.parent = r->parent;
	m.parent_addr = (char *)r->parent_addr;
	m.lease_ms = r->lease_ms;
	m.timeline = r->timeline;
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_reader_ans(const uint8_t *p, size_t n, struct zs_reader_ans *r,
				 struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReaderReply, reader_reply, p, n, err);
	*r = (struct zs_reader_ans){.id = m->id, .parent = m->parent, .lease_ms = m->lease_ms,
				    .timeline = m->timeline};
	st = pb_cpy(r->parent_addr, sizeof r->parent_addr, m->parent_addr, "parent address", err);
	DONE(reader_reply);
	return st;
}

enum zs_status zs_enc_readers(const struct zs_reader_info *v, uint32_t n, struct zs_buf *out)
{
	Zshard__ReadersReply m = ZSHARD__READERS_REPLY__INIT;
	struct arena a = {0};

	m.n_readers = n;
	m.readers = pb_aalloc(&a, (n ? n : 1) * sizeof *m.readers);
	for (uint32_t i = 0; m.readers && i < n; i++)
		m.readers[i] = info_pb(&a, &v[i]);
	return pb_pack(&a, &m.base, out);
}

enum zs_status zs_dec_readers(const uint8_t *p, size_t n, struct zs_reader_info **v,
			      uint32_t *nv, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__ReadersReply, readers_reply, p, n, err);
	*nv = 0;
	*v = calloc(m->n_readers ? m->n_readers : 1, sizeof **v);
	if (!*v)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < m->n_readers; i++)
		if (!(st = info_from(m->readers[i], &(*v)[i], err)))
			(*nv)++;
	if (st) {
		free(*v);
		*v = NULL;
		*nv = 0;
	}
	DONE(readers_reply);
	return st;
}
