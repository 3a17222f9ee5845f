/*
 * codec.c - protobuf-c <-> zshard structs (see codec.h).
 *
 * Encoding builds a temporary protobuf-c message tree in an arena (every
 * allocation tracked, all freed after packing), so no encoder has a
 * hand-written free path. Decoding unpacks, copies into the zshard structs
 * with bounds checks, and frees the unpacked tree.
 */
#include "ctrl/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/zshard.pb-c.h"

/* ------------------------------------------------------------ arena */

struct arena {
	void **p;
	size_t n, cap;
	int failed;
};

static void *aalloc(struct arena *a, size_t size)
{
	void *m;

	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 32;
		void **g = realloc(a->p, nc * sizeof *g);
		if (!g) {
			a->failed = 1;
			return NULL;
		}
		a->p = g;
		a->cap = nc;
	}
	m = calloc(1, size ? size : 1);
	if (!m) {
		a->failed = 1;
		return NULL;
	}
	a->p[a->n++] = m;
	return m;
}

static void arena_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
}

/* Packs m into out and frees the arena; ZS_ENOMEM if anything failed. */
static enum zs_status pack(struct arena *a, const ProtobufCMessage *m,
			   struct zs_buf *out)
{
	enum zs_status st = ZS_ENOMEM;

	out->data = NULL;
	out->len = 0;
	if (!a->failed) {
		size_t n = protobuf_c_message_get_packed_size(m);
		out->data = malloc(n ? n : 1);
		if (out->data) {
			out->len = protobuf_c_message_pack(m, out->data);
			st = ZS_OK;
		}
	}
	arena_free(a);
	return st;
}

void zs_buf_release(struct zs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
}

/* --------------------------------------------------- domain: encoding */

#define NEW(a, T, init) ({ T *x_ = aalloc(a, sizeof(T)); if (x_) { T t_ = init; *x_ = t_; } x_; })

static Zshard__Layout *layout_pb(struct arena *a, const struct zs_layout *l)
{
	Zshard__Layout *pl = NEW(a, Zshard__Layout, ZSHARD__LAYOUT__INIT);
	if (!pl)
		return NULL;
	pl->n_units = l->n_units;
	pl->units = aalloc(a, l->n_units * sizeof *pl->units);
	if (!pl->units)
		return pl;
	for (uint32_t u = 0; u < l->n_units; u++) {
		const struct zs_unit *un = &l->units[u];
		Zshard__Unit *pu = NEW(a, Zshard__Unit, ZSHARD__UNIT__INIT);
		if (!pu)
			return pl;
		pl->units[u] = pu;
		pu->name = (char *)un->name;
		pu->dtype = (Zshard__DType)un->dtype;
		pu->n_tensors = un->n_tensors;
		pu->tensors = aalloc(a, un->n_tensors * sizeof *pu->tensors);
		if (!pu->tensors)
			return pl;
		for (uint32_t t = 0; t < un->n_tensors; t++) {
			const struct zs_tensor *te = &un->tensors[t];
			Zshard__Tensor *pt = NEW(a, Zshard__Tensor, ZSHARD__TENSOR__INIT);
			if (!pt)
				return pl;
			pu->tensors[t] = pt;
			pt->name = (char *)te->name;
			pt->n_shape = te->ndim;
			pt->shape = (uint64_t *)te->shape;
		}
	}
	return pl;
}

static Zshard__JobSpec *spec_pb(struct arena *a, const struct zs_job_spec *s)
{
	Zshard__JobSpec *ps = NEW(a, Zshard__JobSpec, ZSHARD__JOB_SPEC__INIT);
	Zshard__Optimizer *po = NEW(a, Zshard__Optimizer, ZSHARD__OPTIMIZER__INIT);
	if (!ps || !po)
		return ps;
	ps->name = (char *)s->name;
	ps->stage = s->stage;
	ps->world_size = s->world_size;
	ps->compute_dtype = (Zshard__DType)s->compute_dtype;
	ps->align_bytes = s->align_bytes;
	ps->keep_checkpoints = s->keep_checkpoints;
	ps->checkpoint_every = s->checkpoint_every;
	po->kind = (Zshard__OptimKind)s->optim.kind;
	po->lr = s->optim.lr;
	po->beta1 = s->optim.beta1;
	po->beta2 = s->optim.beta2;
	po->eps = s->optim.eps;
	po->weight_decay = s->optim.weight_decay;
	po->momentum = s->optim.momentum;
	po->clip_norm = s->optim.clip_norm;
	ps->optimizer = po;
	ps->layout = layout_pb(a, &s->layout);
	return ps;
}

static Zshard__Shard **shards_pb(struct arena *a, const struct zs_shard *sh,
				 uint32_t n)
{
	Zshard__Shard **v = aalloc(a, n * sizeof *v);
	for (uint32_t i = 0; v && i < n; i++) {
		Zshard__Shard *p = NEW(a, Zshard__Shard, ZSHARD__SHARD__INIT);
		if (!p)
			return v;
		p->unit = sh[i].unit;
		p->index = sh[i].index;
		p->server_id = sh[i].server_id;
		p->offset = sh[i].offset;
		p->length = sh[i].length;
		p->padded = sh[i].padded;
		v[i] = p;
	}
	return v;
}

static Zshard__Job *job_pb(struct arena *a, const struct zs_job *j)
{
	Zshard__Job *pj = NEW(a, Zshard__Job, ZSHARD__JOB__INIT);
	Zshard__Placement *pp = NEW(a, Zshard__Placement, ZSHARD__PLACEMENT__INIT);
	if (!pj || !pp)
		return pj;
	pj->spec = spec_pb(a, &j->spec);
	pp->epoch = j->placement.epoch;
	pp->n_shards = j->placement.n_shards;
	pp->shards = shards_pb(a, j->placement.shards, j->placement.n_shards);
	pj->placement = pp;
	pj->created_ms = j->created_ms;
	pj->restored_id = j->restored_id;
	pj->restored_step = j->restored_step;
	pj->restore_pending = j->restore_pending;
	pj->restore_error = (char *)j->restore_error;
	pj->n_trainers = j->n_trainers;
	pj->trainers = aalloc(a, j->n_trainers * sizeof *pj->trainers);
	for (uint32_t i = 0; pj->trainers && i < j->n_trainers; i++) {
		Zshard__Trainer *pt = NEW(a, Zshard__Trainer, ZSHARD__TRAINER__INIT);
		if (!pt)
			break;
		pt->rank = j->trainers[i].rank;
		pt->host = (char *)j->trainers[i].host;
		pt->joined_ms = j->trainers[i].joined_ms;
		pj->trainers[i] = pt;
	}
	return pj;
}

static Zshard__ServerInfo *server_pb(struct arena *a, const struct zs_server_info *s)
{
	Zshard__ServerInfo *p = NEW(a, Zshard__ServerInfo, ZSHARD__SERVER_INFO__INIT);
	if (!p)
		return NULL;
	p->id = s->id;
	p->addr = (char *)s->addr;
	p->data_addr = (char *)s->data_addr;
	p->shm_addr = (char *)s->shm_addr;
	p->host = (char *)s->host;
	p->capacity = s->capacity;
	p->transports = s->transports;
	p->up = s->up;
	p->used = s->used;
	p->last_seen_ms = s->last_seen_ms;
	return p;
}

static Zshard__Assignment **assignments_pb(struct arena *a,
					   const struct zs_assignment *as,
					   uint32_t n)
{
	Zshard__Assignment **v = aalloc(a, n * sizeof *v);
	for (uint32_t i = 0; v && i < n; i++) {
		Zshard__Assignment *p = NEW(a, Zshard__Assignment, ZSHARD__ASSIGNMENT__INIT);
		if (!p)
			break;
		p->job = (char *)as[i].job;
		p->epoch = as[i].epoch;
		p->created_ms = as[i].created_ms;
		p->bytes = as[i].bytes;
		p->n_shards = as[i].n_shards;
		p->shards = shards_pb(a, as[i].shards, as[i].n_shards);
		v[i] = p;
	}
	return v;
}

/* --------------------------------------------------- domain: decoding */

static enum zs_status cpy(char *dst, size_t cap, const char *src,
			  const char *field, struct zs_error *err)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= cap)
		return zs_fail(err, ZS_EINVAL, "%s is too long (%zu bytes, max %zu)",
			       field, n, cap - 1);
	memcpy(dst, src ? src : "", n + 1);
	return ZS_OK;
}

static enum zs_status layout_from(const Zshard__Layout *pl, struct zs_layout *l,
				  struct zs_error *err)
{
	memset(l, 0, sizeof *l);
	if (!pl)
		return ZS_OK;
	if (pl->n_units > ZS_MAX_UNITS)
		return zs_fail(err, ZS_EINVAL, "layout has %zu units (max %d)",
			       pl->n_units, ZS_MAX_UNITS);
	if (!pl->n_units)
		return ZS_OK;
	l->units = calloc(pl->n_units, sizeof *l->units);
	if (!l->units)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	l->n_units = (uint32_t)pl->n_units;
	for (size_t u = 0; u < pl->n_units; u++) {
		const Zshard__Unit *pu = pl->units[u];
		struct zs_unit *un = &l->units[u];
		if (cpy(un->name, sizeof un->name, pu->name, "unit name", err))
			goto fail;
		if (pu->n_tensors > ZS_MAX_TENSORS) {
			zs_fail(err, ZS_EINVAL, "unit '%s' has %zu tensors (max %d)",
				un->name, pu->n_tensors, ZS_MAX_TENSORS);
			goto fail;
		}
		un->dtype = (enum zs_dtype)pu->dtype;
		if (!pu->n_tensors)
			continue;
		un->tensors = calloc(pu->n_tensors, sizeof *un->tensors);
		if (!un->tensors) {
			zs_fail(err, ZS_ENOMEM, "out of memory");
			goto fail;
		}
		un->n_tensors = (uint32_t)pu->n_tensors;
		for (size_t t = 0; t < pu->n_tensors; t++) {
			const Zshard__Tensor *pt = pu->tensors[t];
			struct zs_tensor *te = &un->tensors[t];
			if (cpy(te->name, sizeof te->name, pt->name, "tensor name", err))
				goto fail;
			if (pt->n_shape > ZS_MAX_DIMS) {
				zs_fail(err, ZS_EINVAL,
					"tensor '%s' has %zu dimensions (max %d)",
					te->name, pt->n_shape, ZS_MAX_DIMS);
				goto fail;
			}
			te->ndim = (uint32_t)pt->n_shape;
			if (pt->n_shape)
				memcpy(te->shape, pt->shape,
				       pt->n_shape * sizeof te->shape[0]);
		}
	}
	zs_layout_derive(l);
	return ZS_OK;
fail:
	zs_layout_release(l);
	return err ? err->code : ZS_EINVAL;
}

static enum zs_status spec_from(const Zshard__JobSpec *ps, struct zs_job_spec *s,
				struct zs_error *err)
{
	memset(s, 0, sizeof *s);
	if (!ps)
		return zs_fail(err, ZS_EINVAL, "job spec is missing");
	if (cpy(s->name, sizeof s->name, ps->name, "job name", err))
		return err ? err->code : ZS_EINVAL;
	s->stage = ps->stage;
	s->world_size = ps->world_size;
	s->compute_dtype = (enum zs_dtype)ps->compute_dtype;
	s->align_bytes = ps->align_bytes;
	s->keep_checkpoints = ps->keep_checkpoints;
	s->checkpoint_every = ps->checkpoint_every;
	if (ps->optimizer) {
		const Zshard__Optimizer *o = ps->optimizer;
		s->optim = (struct zs_optim){
			.kind = (enum zs_optim_kind)o->kind, .lr = o->lr,
			.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
			.weight_decay = o->weight_decay, .momentum = o->momentum,
			.clip_norm = o->clip_norm,
		};
	}
	return layout_from(ps->layout, &s->layout, err);
}

static enum zs_status shards_from(Zshard__Shard *const *ps, size_t n,
				  struct zs_shard **out, uint32_t *n_out,
				  struct zs_error *err)
{
	*out = NULL;
	*n_out = 0;
	if (n > UINT32_MAX / 2)
		return zs_fail(err, ZS_EINVAL, "too many shards (%zu)", n);
	if (!n)
		return ZS_OK;
	*out = malloc(n * sizeof **out);
	if (!*out)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		(*out)[i] = (struct zs_shard){
			.unit = ps[i]->unit, .index = ps[i]->index,
			.server_id = ps[i]->server_id, .offset = ps[i]->offset,
			.length = ps[i]->length, .padded = ps[i]->padded,
		};
	*n_out = (uint32_t)n;
	return ZS_OK;
}

static enum zs_status job_from(const Zshard__Job *pj, struct zs_job *j,
			       struct zs_error *err)
{
	enum zs_status st;

	memset(j, 0, sizeof *j);
	st = spec_from(pj->spec, &j->spec, err);
	if (st)
		return st;
	j->created_ms = pj->created_ms;
	j->restored_id = pj->restored_id;
	j->restored_step = pj->restored_step;
	j->restore_pending = pj->restore_pending;
	st = cpy(j->restore_error, sizeof j->restore_error, pj->restore_error, "restore error",
		 err);
	if (st)
		goto fail;
	if (pj->placement) {
		j->placement.epoch = pj->placement->epoch;
		st = shards_from(pj->placement->shards, pj->placement->n_shards,
				 &j->placement.shards, &j->placement.n_shards, err);
		if (st)
			goto fail;
	}
	if (pj->n_trainers > ZS_MAX_WORLD) {
		st = zs_fail(err, ZS_EINVAL, "too many trainers (%zu)", pj->n_trainers);
		goto fail;
	}
	if (pj->n_trainers) {
		j->trainers = calloc(pj->n_trainers, sizeof *j->trainers);
		if (!j->trainers) {
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
			goto fail;
		}
		j->n_trainers = (uint32_t)pj->n_trainers;
		for (size_t i = 0; i < pj->n_trainers; i++) {
			j->trainers[i].rank = pj->trainers[i]->rank;
			j->trainers[i].joined_ms = pj->trainers[i]->joined_ms;
			st = cpy(j->trainers[i].host, sizeof j->trainers[i].host,
				 pj->trainers[i]->host, "trainer host", err);
			if (st)
				goto fail;
		}
	}
	return ZS_OK;
fail:
	zs_job_release(j);
	return st;
}

static enum zs_status server_from(const Zshard__ServerInfo *p,
				  struct zs_server_info *s, struct zs_error *err)
{
	enum zs_status st;

	memset(s, 0, sizeof *s);
	s->id = p->id;
	s->capacity = p->capacity;
	s->transports = p->transports;
	s->up = p->up;
	s->used = p->used;
	s->last_seen_ms = p->last_seen_ms;
	if ((st = cpy(s->addr, sizeof s->addr, p->addr, "server address", err)) ||
	    (st = cpy(s->data_addr, sizeof s->data_addr, p->data_addr,
		      "server data address", err)) ||
	    (st = cpy(s->shm_addr, sizeof s->shm_addr, p->shm_addr, "server shm address",
		      err)) ||
	    (st = cpy(s->host, sizeof s->host, p->host, "server host", err)))
		return st;
	return ZS_OK;
}

static enum zs_status assignments_from(Zshard__Assignment *const *pa, size_t n,
				       struct zs_assignment **out, uint32_t *n_out,
				       struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	*out = NULL;
	*n_out = 0;
	if (!n)
		return ZS_OK;
	*out = calloc(n, sizeof **out);
	if (!*out)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !st; i++) {
		struct zs_assignment *a = &(*out)[i];
		a->epoch = pa[i]->epoch;
		a->created_ms = pa[i]->created_ms;
		a->bytes = pa[i]->bytes;
		st = cpy(a->job, sizeof a->job, pa[i]->job, "job name", err);
		if (!st)
			st = shards_from(pa[i]->shards, pa[i]->n_shards, &a->shards,
					 &a->n_shards, err);
		*n_out = (uint32_t)(i + 1);
	}
	if (st) {
		for (uint32_t i = 0; i < *n_out; i++)
			zs_assignment_release(&(*out)[i]);
		free(*out);
		*out = NULL;
		*n_out = 0;
	}
	return st;
}

/* Unpacks bytes into message type T, or fails naming it. */
#define UNPACK(T, lower, p, n, err)                                               \
	T *m = zshard__##lower##__unpack(NULL, n, p);                             \
	if (!m)                                                                   \
		return zs_fail(err, ZS_EPROTO, "malformed %s message", #lower);
#define DONE(lower) zshard__##lower##__free_unpacked(m, NULL)

/* ------------------------------------------------------------ messages */

enum zs_status zs_enc_register(const struct zs_server_info *s, struct zs_buf *out)
{
	Zshard__RegisterServerRequest m = ZSHARD__REGISTER_SERVER_REQUEST__INIT;
	struct arena a = {0};
	m.id = s->id;
	m.addr = (char *)s->addr;
	m.data_addr = (char *)s->data_addr;
	m.shm_addr = (char *)s->shm_addr;
	m.host = (char *)s->host;
	m.capacity = s->capacity;
	m.transports = s->transports;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_register(const uint8_t *p, size_t n, struct zs_server_info *s,
			       struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__RegisterServerRequest, register_server_request, p, n, err);
	memset(s, 0, sizeof *s);
	s->id = m->id;
	s->capacity = m->capacity;
	s->transports = m->transports;
	if (!(st = cpy(s->addr, sizeof s->addr, m->addr, "server address", err)) &&
	    !(st = cpy(s->data_addr, sizeof s->data_addr, m->data_addr,
		       "server data address", err)) &&
	    !(st = cpy(s->shm_addr, sizeof s->shm_addr, m->shm_addr,
		       "server shm address", err)))
		st = cpy(s->host, sizeof s->host, m->host, "server host", err);
	DONE(register_server_request);
	return st;
}

enum zs_status zs_enc_register_reply(uint64_t id, uint32_t lease_ms, struct zs_buf *out)
{
	Zshard__RegisterServerReply m = ZSHARD__REGISTER_SERVER_REPLY__INIT;
	struct arena a = {0};
	m.id = id;
	m.lease_ms = lease_ms;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_register_reply(const uint8_t *p, size_t n, uint64_t *id,
				     uint32_t *lease_ms, struct zs_error *err)
{
	UNPACK(Zshard__RegisterServerReply, register_server_reply, p, n, err);
	*id = m->id;
	*lease_ms = m->lease_ms;
	DONE(register_server_reply);
	return ZS_OK;
}

enum zs_status zs_enc_server_id(uint64_t id, struct zs_buf *out)
{
	Zshard__HeartbeatRequest m = ZSHARD__HEARTBEAT_REQUEST__INIT;
	struct arena a = {0};
	m.id = id;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_server_id(const uint8_t *p, size_t n, uint64_t *id,
				struct zs_error *err)
{
	UNPACK(Zshard__HeartbeatRequest, heartbeat_request, p, n, err);
	*id = m->id;
	DONE(heartbeat_request);
	return ZS_OK;
}

enum zs_status zs_enc_heartbeat_reply(uint32_t lease_ms, uint64_t gen, uint64_t task_gen,
				      struct zs_buf *out)
{
	Zshard__HeartbeatReply m = ZSHARD__HEARTBEAT_REPLY__INIT;
	struct arena a = {0};
	m.lease_ms = lease_ms;
	m.assign_gen = gen;
	m.task_gen = task_gen;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_heartbeat_reply(const uint8_t *p, size_t n, uint32_t *lease_ms,
				      uint64_t *gen, uint64_t *task_gen, struct zs_error *err)
{
	UNPACK(Zshard__HeartbeatReply, heartbeat_reply, p, n, err);
	*lease_ms = m->lease_ms;
	*gen = m->assign_gen;
	*task_gen = m->task_gen;
	DONE(heartbeat_reply);
	return ZS_OK;
}

enum zs_status zs_enc_assignments(uint64_t gen, const struct zs_assignment *as,
				  uint32_t n_a, struct zs_buf *out)
{
	Zshard__GetAssignmentsReply m = ZSHARD__GET_ASSIGNMENTS_REPLY__INIT;
	struct arena a = {0};
	m.assign_gen = gen;
	m.n_assignments = n_a;
	m.assignments = assignments_pb(&a, as, n_a);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_assignments(const uint8_t *p, size_t n, uint64_t *gen,
				  struct zs_assignment **as, uint32_t *n_a,
				  struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__GetAssignmentsReply, get_assignments_reply, p, n, err);
	*gen = m->assign_gen;
	st = assignments_from(m->assignments, m->n_assignments, as, n_a, err);
	DONE(get_assignments_reply);
	return st;
}

enum zs_status zs_enc_servers(const struct zs_server_info *s, uint32_t n_s,
			      struct zs_buf *out)
{
	Zshard__ListServersReply m = ZSHARD__LIST_SERVERS_REPLY__INIT;
	struct arena a = {0};
	m.n_servers = n_s;
	m.servers = aalloc(&a, n_s * sizeof *m.servers);
	for (uint32_t i = 0; m.servers && i < n_s; i++)
		m.servers[i] = server_pb(&a, &s[i]);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_servers(const uint8_t *p, size_t n, struct zs_server_info **s,
			      uint32_t *n_s, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__ListServersReply, list_servers_reply, p, n, err);
	*s = calloc(m->n_servers ? m->n_servers : 1, sizeof **s);
	*n_s = 0;
	if (!*s)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < m->n_servers; i++)
		st = server_from(m->servers[i], &(*s)[i], err);
	if (st) {
		free(*s);
		*s = NULL;
	} else {
		*n_s = (uint32_t)m->n_servers;
	}
	DONE(list_servers_reply);
	return st;
}

enum zs_status zs_enc_create_job(const struct zs_job_spec *spec, struct zs_buf *out)
{
	Zshard__CreateJobRequest m = ZSHARD__CREATE_JOB_REQUEST__INIT;
	struct arena a = {0};
	m.spec = spec_pb(&a, spec);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_create_job(const uint8_t *p, size_t n, struct zs_job_spec *spec,
				 struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__CreateJobRequest, create_job_request, p, n, err);
	st = spec_from(m->spec, spec, err);
	DONE(create_job_request);
	return st;
}

enum zs_status zs_enc_job(const struct zs_job *j, struct zs_buf *out)
{
	Zshard__JobReply m = ZSHARD__JOB_REPLY__INIT;
	struct arena a = {0};
	m.job = job_pb(&a, j);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_job(const uint8_t *p, size_t n, struct zs_job *j,
			  struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JobReply, job_reply, p, n, err);
	if (m->job)
		st = job_from(m->job, j, err);
	else
		st = zs_fail(err, ZS_EPROTO, "reply carries no job");
	DONE(job_reply);
	return st;
}

enum zs_status zs_enc_jobs(const struct zs_job *j, uint32_t n_j, struct zs_buf *out)
{
	Zshard__ListJobsReply m = ZSHARD__LIST_JOBS_REPLY__INIT;
	struct arena a = {0};
	m.n_jobs = n_j;
	m.jobs = aalloc(&a, n_j * sizeof *m.jobs);
	for (uint32_t i = 0; m.jobs && i < n_j; i++)
		m.jobs[i] = job_pb(&a, &j[i]);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_jobs(const uint8_t *p, size_t n, struct zs_job **j,
			   uint32_t *n_j, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	size_t i;
	UNPACK(Zshard__ListJobsReply, list_jobs_reply, p, n, err);
	*n_j = 0;
	*j = calloc(m->n_jobs ? m->n_jobs : 1, sizeof **j);
	if (!*j)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (i = 0; !st && i < m->n_jobs; i++)
		st = job_from(m->jobs[i], &(*j)[i], err);
	if (st && *j) {
		for (size_t k = 0; k + 1 < i; k++)
			zs_job_release(&(*j)[k]);
		free(*j);
		*j = NULL;
	} else if (!st) {
		*n_j = (uint32_t)m->n_jobs;
	}
	DONE(list_jobs_reply);
	return st;
}

enum zs_status zs_enc_job_name(const char *name, struct zs_buf *out)
{
	Zshard__JobRequest m = ZSHARD__JOB_REQUEST__INIT;
	struct arena a = {0};
	m.name = (char *)name;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_job_name(const uint8_t *p, size_t n,
			       char name[ZS_JOB_NAME_MAX], struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JobRequest, job_request, p, n, err);
	st = cpy(name, ZS_JOB_NAME_MAX, m->name, "job name", err);
	DONE(job_request);
	return st;
}

enum zs_status zs_enc_set_stage(const char *name, uint32_t stage, struct zs_buf *out)
{
	Zshard__SetStageRequest m = ZSHARD__SET_STAGE_REQUEST__INIT;
	struct arena a = {0};
	m.name = (char *)name;
	m.stage = stage;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_set_stage(const uint8_t *p, size_t n,
				char name[ZS_JOB_NAME_MAX], uint32_t *stage,
				struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__SetStageRequest, set_stage_request, p, n, err);
	st = cpy(name, ZS_JOB_NAME_MAX, m->name, "job name", err);
	*stage = m->stage;
	DONE(set_stage_request);
	return st;
}

enum zs_status zs_enc_join(const struct zs_join_req *r, struct zs_buf *out)
{
	Zshard__JoinRequest m = ZSHARD__JOIN_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)r->job;
	m.rank = r->rank;
	m.host = (char *)r->host;
	m.layout = layout_pb(&a, &r->layout);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_join(const uint8_t *p, size_t n, struct zs_join_req *r,
			   struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JoinRequest, join_request, p, n, err);
	memset(r, 0, sizeof *r);
	r->rank = m->rank;
	if (!(st = cpy(r->job, sizeof r->job, m->job, "job name", err)) &&
	    !(st = cpy(r->host, sizeof r->host, m->host, "trainer host", err)))
		st = layout_from(m->layout, &r->layout, err);
	DONE(join_request);
	return st;
}

enum zs_status zs_enc_leave(const char *job, uint32_t rank, struct zs_buf *out)
{
	Zshard__LeaveRequest m = ZSHARD__LEAVE_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.rank = rank;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_leave(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
			    uint32_t *rank, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__LeaveRequest, leave_request, p, n, err);
	st = cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
	*rank = m->rank;
	DONE(leave_request);
	return st;
}

enum zs_status zs_enc_server_info(const struct zs_server_info *s, struct zs_buf *out)
{
	struct arena a = {0};
	Zshard__ServerInfo *m = server_pb(&a, s);
	if (!m) {
		arena_free(&a);
		return ZS_ENOMEM;
	}
	return pack(&a, &m->base, out);
}

enum zs_status zs_dec_server_info(const uint8_t *p, size_t n,
				  struct zs_server_info *s, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ServerInfo, server_info, p, n, err);
	st = server_from(m, s, err);
	DONE(server_info);
	return st;
}

enum zs_status zs_enc_coord_status(const struct zs_coord_status *s, struct zs_buf *out)
{
	Zshard__CoordinatorStatusReply m = ZSHARD__COORDINATOR_STATUS_REPLY__INIT;
	struct arena a = {0};
	m.version = (char *)s->version;
	m.addr = (char *)s->addr;
	m.data_dir = (char *)s->data_dir;
	m.uptime_ms = s->uptime_ms;
	m.lease_ms = s->lease_ms;
	m.servers_up = s->servers_up;
	m.servers_down = s->servers_down;
	m.jobs = s->jobs;
	m.assign_gen = s->assign_gen;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_coord_status(const uint8_t *p, size_t n,
				   struct zs_coord_status *s, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__CoordinatorStatusReply, coordinator_status_reply, p, n, err);
	memset(s, 0, sizeof *s);
	s->uptime_ms = m->uptime_ms;
	s->lease_ms = m->lease_ms;
	s->servers_up = m->servers_up;
	s->servers_down = m->servers_down;
	s->jobs = m->jobs;
	s->assign_gen = m->assign_gen;
	if (!(st = cpy(s->version, sizeof s->version, m->version, "version", err)) &&
	    !(st = cpy(s->addr, sizeof s->addr, m->addr, "address", err)))
		st = cpy(s->data_dir, sizeof s->data_dir, m->data_dir, "data dir", err);
	DONE(coordinator_status_reply);
	return st;
}

enum zs_status zs_enc_server_status(const struct zs_server_status *s,
				    struct zs_buf *out)
{
	Zshard__ServerStatusReply m = ZSHARD__SERVER_STATUS_REPLY__INIT;
	struct arena a = {0};
	m.id = s->id;
	m.addr = (char *)s->addr;
	m.coordinator = (char *)s->coordinator;
	m.registered = s->registered;
	m.capacity = s->capacity;
	m.assigned_bytes = s->assigned_bytes;
	m.assign_gen = s->assign_gen;
	m.uptime_ms = s->uptime_ms;
	m.n_assignments = s->n_assignments;
	m.assignments = assignments_pb(&a, s->assignments, s->n_assignments);
	m.jobs_held = s->jobs_held;
	m.shards = s->shards;
	m.state_bytes = s->state_bytes;
	m.steps_applied = s->steps_applied;
	m.bytes_in = s->bytes_in;
	m.bytes_out = s->bytes_out;
	m.gathers_waiting = s->gathers_waiting;
	m.data_addr = (char *)s->data_addr;
	m.shm_addr = (char *)s->shm_addr;
	m.rss_bytes = s->rss_bytes;
	m.rss_peak_bytes = s->rss_peak_bytes;
	m.rdma = (char *)s->rdma;
	m.n_job_steps = s->n_job_steps;
	m.job_steps = aalloc(&a, s->n_job_steps * sizeof *m.job_steps);
	for (uint32_t i = 0; m.job_steps && i < s->n_job_steps; i++) {
		const struct zs_job_step_stats *js = &s->job_steps[i];
		Zshard__JobStepStats *e = NEW(&a, Zshard__JobStepStats, ZSHARD__JOB_STEP_STATS__INIT);
		if (!e)
			break;
		e->job = (char *)js->job;
		e->step = js->step;
		e->shards = js->shards;
		e->reduce_seconds = js->reduce_seconds;
		e->optim_seconds = js->optim_seconds;
		m.job_steps[i] = e;
	}
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_server_status(const uint8_t *p, size_t n,
				    struct zs_server_status *s, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ServerStatusReply, server_status_reply, p, n, err);
	memset(s, 0, sizeof *s);
	s->id = m->id;
	s->registered = m->registered;
	s->capacity = m->capacity;
	s->assigned_bytes = m->assigned_bytes;
	s->assign_gen = m->assign_gen;
	s->uptime_ms = m->uptime_ms;
	s->jobs_held = m->jobs_held;
	s->shards = m->shards;
	s->state_bytes = m->state_bytes;
	s->steps_applied = m->steps_applied;
	s->bytes_in = m->bytes_in;
	s->bytes_out = m->bytes_out;
	s->gathers_waiting = m->gathers_waiting;
	s->rss_bytes = m->rss_bytes;
	s->rss_peak_bytes = m->rss_peak_bytes;
	if (m->n_job_steps > (1u << 16)) {
		DONE(server_status_reply);
		return zs_fail(err, ZS_EINVAL, "too many job step stats (%zu)", m->n_job_steps);
	}
	if (m->n_job_steps) {
		s->job_steps = calloc(m->n_job_steps, sizeof *s->job_steps);
		if (!s->job_steps) {
			DONE(server_status_reply);
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		}
		s->n_job_steps = (uint32_t)m->n_job_steps;
	}
	st = ZS_OK;
	for (size_t i = 0; !st && i < m->n_job_steps; i++) {
		struct zs_job_step_stats *js = &s->job_steps[i];
		js->step = m->job_steps[i]->step;
		js->shards = m->job_steps[i]->shards;
		js->reduce_seconds = m->job_steps[i]->reduce_seconds;
		js->optim_seconds = m->job_steps[i]->optim_seconds;
		st = cpy(js->job, sizeof js->job, m->job_steps[i]->job, "job name", err);
	}
	if (!st && !(st = cpy(s->addr, sizeof s->addr, m->addr, "address", err)) &&
	    !(st = cpy(s->rdma, sizeof s->rdma, m->rdma, "rdma note", err)) &&
	    !(st = cpy(s->data_addr, sizeof s->data_addr, m->data_addr, "data address", err)) &&
	    !(st = cpy(s->shm_addr, sizeof s->shm_addr, m->shm_addr, "shm address", err)) &&
	    !(st = cpy(s->coordinator, sizeof s->coordinator, m->coordinator,
		       "coordinator", err)))
		st = assignments_from(m->assignments, m->n_assignments,
				      &s->assignments, &s->n_assignments, err);
	if (st)
		zs_server_status_release(s);
	DONE(server_status_reply);
	return st;
}

void zs_server_status_release(struct zs_server_status *s)
{
	for (uint32_t i = 0; i < s->n_assignments; i++)
		zs_assignment_release(&s->assignments[i]);
	free(s->assignments);
	free(s->job_steps);
	memset(s, 0, sizeof *s);
}

enum zs_status zs_enc_norm_report(const struct zs_norm_report *r, struct zs_buf *out)
{
	Zshard__ReportNormRequest m = ZSHARD__REPORT_NORM_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)r->job;
	m.step = r->step;
	m.server_id = r->server_id;
	m.n_norms = r->n;
	m.norms = aalloc(&a, r->n * sizeof *m.norms);
	for (uint32_t i = 0; m.norms && i < r->n; i++) {
		Zshard__ShardNorm *e = NEW(&a, Zshard__ShardNorm, ZSHARD__SHARD_NORM__INIT);
		if (!e)
			break;
		e->unit = r->norms[i].unit;
		e->index = r->norms[i].index;
		e->sumsq = r->norms[i].sumsq;
		m.norms[i] = e;
	}
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_norm_report(const uint8_t *p, size_t n, struct zs_norm_report *r,
				  struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReportNormRequest, report_norm_request, p, n, err);
	memset(r, 0, sizeof *r);
	r->step = m->step;
	r->server_id = m->server_id;
	st = cpy(r->job, sizeof r->job, m->job, "job name", err);
	if (!st && m->n_norms > (1u << 24))
		st = zs_fail(err, ZS_EINVAL, "too many shard norms (%zu)", m->n_norms);
	if (!st && m->n_norms) {
		r->norms = malloc(m->n_norms * sizeof *r->norms);
		if (!r->norms)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		for (size_t i = 0; !st && i < m->n_norms; i++)
			r->norms[i] = (struct zs_shard_norm){m->norms[i]->unit, m->norms[i]->index,
							     m->norms[i]->sumsq};
		if (!st)
			r->n = (uint32_t)m->n_norms;
	}
	DONE(report_norm_request);
	return st;
}

enum zs_status zs_enc_norm_reply(double total, uint32_t shards, struct zs_buf *out)
{
	Zshard__ReportNormReply m = ZSHARD__REPORT_NORM_REPLY__INIT;
	struct arena a = {0};
	m.total_sumsq = total;
	m.shards = shards;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_norm_reply(const uint8_t *p, size_t n, double *total,
				 uint32_t *shards, struct zs_error *err)
{
	UNPACK(Zshard__ReportNormReply, report_norm_reply, p, n, err);
	*total = m->total_sumsq;
	*shards = m->shards;
	DONE(report_norm_reply);
	return ZS_OK;
}

/* ---------------------------------------------------------- step reports */

static Zshard__StepReport *step_report_pb(struct arena *a, const struct zs_step_report *r)
{
	Zshard__StepReport *e = NEW(a, Zshard__StepReport, ZSHARD__STEP_REPORT__INIT);
	if (!e)
		return NULL;
	e->rank = r->rank;
	e->step = r->step;
	e->stage = r->stage;
	e->prefetch = r->prefetch;
	e->seconds = r->seconds;
	e->compute_seconds = r->compute_seconds;
	e->gather_wait_seconds = r->gather_wait_seconds;
	e->push_wait_seconds = r->push_wait_seconds;
	e->control_seconds = r->control_seconds;
	e->bytes_gathered = r->bytes_gathered;
	e->bytes_pushed = r->bytes_pushed;
	e->peak_param_bytes = r->peak_param_bytes;
	e->peak_grad_bytes = r->peak_grad_bytes;
	e->rss_peak_bytes = r->rss_peak_bytes;
	e->reported_ms = r->reported_ms;
	return e;
}

static void step_report_from(const Zshard__StepReport *e, struct zs_step_report *r)
{
	*r = (struct zs_step_report){
		.rank = e->rank, .stage = e->stage, .prefetch = e->prefetch, .step = e->step,
		.seconds = e->seconds, .compute_seconds = e->compute_seconds,
		.gather_wait_seconds = e->gather_wait_seconds,
		.push_wait_seconds = e->push_wait_seconds,
		.control_seconds = e->control_seconds, .bytes_gathered = e->bytes_gathered,
		.bytes_pushed = e->bytes_pushed, .peak_param_bytes = e->peak_param_bytes,
		.peak_grad_bytes = e->peak_grad_bytes, .rss_peak_bytes = e->rss_peak_bytes,
		.reported_ms = e->reported_ms};
}

enum zs_status zs_enc_report_step(const char *job, uint32_t rank,
				  const struct zs_step_report *r, struct zs_buf *out)
{
	Zshard__ReportStepRequest m = ZSHARD__REPORT_STEP_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.rank = rank;
	if (r)
		m.report = step_report_pb(&a, r);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_report_step(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
				  uint32_t *rank, struct zs_step_report *r, bool *has_report,
				  struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReportStepRequest, report_step_request, p, n, err);
	*rank = m->rank;
	*has_report = m->report != NULL;
	memset(r, 0, sizeof *r);
	if (m->report)
		step_report_from(m->report, r);
	st = cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
	DONE(report_step_request);
	return st;
}

enum zs_status zs_enc_report_step_reply(uint32_t stage, uint64_t checkpoint_every,
					struct zs_buf *out)
{
	Zshard__ReportStepReply m = ZSHARD__REPORT_STEP_REPLY__INIT;
	struct arena a = {0};
	m.stage = stage;
	m.checkpoint_every = checkpoint_every;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_report_step_reply(const uint8_t *p, size_t n, uint32_t *stage,
					uint64_t *checkpoint_every, struct zs_error *err)
{
	UNPACK(Zshard__ReportStepReply, report_step_reply, p, n, err);
	*stage = m->stage;
	*checkpoint_every = m->checkpoint_every;
	DONE(report_step_reply);
	return ZS_OK;
}

enum zs_status zs_enc_step_reports(const struct zs_step_report *r, uint32_t n_r,
				   struct zs_buf *out)
{
	Zshard__StepReportsReply m = ZSHARD__STEP_REPORTS_REPLY__INIT;
	struct arena a = {0};
	m.n_reports = n_r;
	m.reports = aalloc(&a, n_r * sizeof *m.reports);
	for (uint32_t i = 0; m.reports && i < n_r; i++)
		if (!(m.reports[i] = step_report_pb(&a, &r[i])))
			break;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_step_reports(const uint8_t *p, size_t n, struct zs_step_report **r,
				   uint32_t *n_r, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__StepReportsReply, step_reports_reply, p, n, err);
	*r = NULL;
	*n_r = 0;
	if (m->n_reports > ZS_MAX_WORLD) {
		st = zs_fail(err, ZS_EINVAL, "too many step reports (%zu)", m->n_reports);
	} else if (m->n_reports) {
		*r = calloc(m->n_reports, sizeof **r);
		if (!*r)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		for (size_t i = 0; !st && i < m->n_reports; i++)
			step_report_from(m->reports[i], &(*r)[i]);
		if (!st)
			*n_r = (uint32_t)m->n_reports;
	}
	DONE(step_reports_reply);
	return st;
}

/* ----------------------------------------------------------- checkpoints */

static Zshard__Checkpoint *ckpt_pb(struct arena *a, const struct zs_checkpoint *c)
{
	Zshard__Checkpoint *p = NEW(a, Zshard__Checkpoint, ZSHARD__CHECKPOINT__INIT);
	if (!p)
		return NULL;
	p->id = c->id;
	p->job = (char *)c->job;
	p->step = c->step;
	p->state = (Zshard__CheckpointState)c->state;
	p->created_ms = c->created_ms;
	p->n_durable = c->n_durable;
	p->durable = c->durable;
	p->bytes = c->bytes;
	p->error = (char *)c->error;
	p->epoch = c->epoch;
	p->placement = NEW(a, Zshard__Placement, ZSHARD__PLACEMENT__INIT);
	if (p->placement) {
		p->placement->epoch = c->placement.epoch;
		p->placement->n_shards = c->placement.n_shards;
		p->placement->shards = shards_pb(a, c->placement.shards, c->placement.n_shards);
	}
	p->n_blobs = c->n_blobs;
	p->blobs = aalloc(a, c->n_blobs * sizeof *p->blobs);
	for (uint32_t i = 0; p->blobs && i < c->n_blobs; i++) {
		Zshard__TrainerBlob *b = NEW(a, Zshard__TrainerBlob, ZSHARD__TRAINER_BLOB__INIT);
		if (!b)
			break;
		b->rank = c->blobs[i].rank;
		b->data.len = c->blobs[i].len;
		b->data.data = c->blobs[i].data;
		p->blobs[i] = b;
	}
	return p;
}

static enum zs_status ckpt_from(const Zshard__Checkpoint *p, struct zs_checkpoint *c,
				struct zs_error *err)
{
	enum zs_status st;

	memset(c, 0, sizeof *c);
	c->id = p->id;
	c->step = p->step;
	c->state = (enum zs_ckpt_state)p->state;
	c->created_ms = p->created_ms;
	c->bytes = p->bytes;
	c->epoch = p->epoch;
	if ((st = cpy(c->job, sizeof c->job, p->job, "job name", err)) ||
	    (st = cpy(c->error, sizeof c->error, p->error, "checkpoint error", err)))
		return st;
	if (p->n_durable > (1u << 20) || p->n_blobs > ZS_MAX_WORLD)
		return zs_fail(err, ZS_EINVAL, "checkpoint record too large");
	if (p->placement) {
		c->placement.epoch = p->placement->epoch;
		st = shards_from(p->placement->shards, p->placement->n_shards,
				 &c->placement.shards, &c->placement.n_shards, err);
		if (st)
			return st;
	}
	if (p->n_durable) {
		c->durable = malloc(p->n_durable * sizeof *c->durable);
		if (!c->durable)
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		memcpy(c->durable, p->durable, p->n_durable * sizeof *c->durable);
		c->n_durable = (uint32_t)p->n_durable;
	}
	if (p->n_blobs) {
		c->blobs = calloc(p->n_blobs, sizeof *c->blobs);
		if (!c->blobs)
			goto nomem;
		for (size_t i = 0; i < p->n_blobs; i++) {
			if (p->blobs[i]->data.len > ZS_BLOB_MAX) {
				zs_checkpoint_release(c);
				return zs_fail(err, ZS_EINVAL, "a trainer blob is over %u bytes",
					       ZS_BLOB_MAX);
			}
			c->blobs[i].rank = p->blobs[i]->rank;
			c->blobs[i].len = (uint32_t)p->blobs[i]->data.len;
			c->blobs[i].data = malloc(c->blobs[i].len ? c->blobs[i].len : 1);
			c->n_blobs = (uint32_t)i + 1;
			if (!c->blobs[i].data)
				goto nomem;
			memcpy(c->blobs[i].data, p->blobs[i]->data.data, c->blobs[i].len);
		}
	}
	return ZS_OK;
nomem:
	zs_checkpoint_release(c);
	return zs_fail(err, ZS_ENOMEM, "out of memory");
}

enum zs_status zs_enc_checkpoint(const struct zs_checkpoint *c, struct zs_buf *out)
{
	Zshard__CheckpointReply m = ZSHARD__CHECKPOINT_REPLY__INIT;
	struct arena a = {0};
	m.checkpoint = ckpt_pb(&a, c);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_checkpoint(const uint8_t *p, size_t n, struct zs_checkpoint *c,
				 struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__CheckpointReply, checkpoint_reply, p, n, err);
	st = m->checkpoint ? ckpt_from(m->checkpoint, c, err)
			   : zs_fail(err, ZS_EPROTO, "reply carries no checkpoint");
	DONE(checkpoint_reply);
	return st;
}

enum zs_status zs_enc_checkpoints(const struct zs_checkpoint *c, uint32_t n_c,
				  struct zs_buf *out)
{
	Zshard__ListCheckpointsReply m = ZSHARD__LIST_CHECKPOINTS_REPLY__INIT;
	struct arena a = {0};
	m.n_checkpoints = n_c;
	m.checkpoints = aalloc(&a, n_c * sizeof *m.checkpoints);
	for (uint32_t i = 0; m.checkpoints && i < n_c; i++)
		m.checkpoints[i] = ckpt_pb(&a, &c[i]);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_checkpoints(const uint8_t *p, size_t n, struct zs_checkpoint **c,
				  uint32_t *n_c, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	size_t i;
	UNPACK(Zshard__ListCheckpointsReply, list_checkpoints_reply, p, n, err);
	*n_c = 0;
	*c = calloc(m->n_checkpoints ? m->n_checkpoints : 1, sizeof **c);
	if (!*c)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (i = 0; !st && i < m->n_checkpoints; i++)
		st = ckpt_from(m->checkpoints[i], &(*c)[i], err);
	if (st && *c) {
		for (size_t k = 0; k + 1 < i; k++)
			zs_checkpoint_release(&(*c)[k]);
		free(*c);
		*c = NULL;
	} else if (!st) {
		*n_c = (uint32_t)m->n_checkpoints;
	}
	DONE(list_checkpoints_reply);
	return st;
}

enum zs_status zs_enc_ckpt_req(const char *job, uint64_t id_or_step, bool create,
			       struct zs_buf *out)
{
	struct arena a = {0};
	if (create) {
		Zshard__CreateCheckpointRequest m = ZSHARD__CREATE_CHECKPOINT_REQUEST__INIT;
		m.job = (char *)job;
		m.step = id_or_step;
		return pack(&a, &m.base, out);
	} else {
		Zshard__CheckpointRequest m = ZSHARD__CHECKPOINT_REQUEST__INIT;
		m.job = (char *)job;
		m.id = id_or_step;
		return pack(&a, &m.base, out);
	}
}

enum zs_status zs_dec_ckpt_req(const uint8_t *p, size_t n, bool create,
			       char job[ZS_JOB_NAME_MAX], uint64_t *id_or_step,
			       struct zs_error *err)
{
	enum zs_status st;
	if (create) {
		UNPACK(Zshard__CreateCheckpointRequest, create_checkpoint_request, p, n, err);
		st = cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
		*id_or_step = m->step;
		DONE(create_checkpoint_request);
	} else {
		UNPACK(Zshard__CheckpointRequest, checkpoint_request, p, n, err);
		st = cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
		*id_or_step = m->id;
		DONE(checkpoint_request);
	}
	return st;
}

enum zs_status zs_enc_put_blob(const char *job, uint64_t id, uint32_t rank,
			       const void *data, uint32_t len, struct zs_buf *out)
{
	Zshard__PutBlobRequest m = ZSHARD__PUT_BLOB_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)job;
	m.id = id;
	m.rank = rank;
	m.data.len = len;
	m.data.data = (uint8_t *)data;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_put_blob(const uint8_t *p, size_t n, char job[ZS_JOB_NAME_MAX],
			       uint64_t *id, struct zs_blob *b, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__PutBlobRequest, put_blob_request, p, n, err);
	st = cpy(job, ZS_JOB_NAME_MAX, m->job, "job name", err);
	*id = m->id;
	b->rank = m->rank;
	b->len = 0;
	b->data = NULL;
	if (!st && m->data.len > ZS_BLOB_MAX)
		st = zs_fail(err, ZS_EINVAL, "a trainer blob is %zu bytes (max %u)", m->data.len,
			     ZS_BLOB_MAX);
	if (!st) {
		b->data = malloc(m->data.len ? m->data.len : 1);
		if (!b->data)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		else {
			memcpy(b->data, m->data.data, m->data.len);
			b->len = (uint32_t)m->data.len;
		}
	}
	DONE(put_blob_request);
	return st;
}

static Zshard__ServerTask *task_pb(struct arena *a, const struct zs_task *t)
{
	Zshard__ServerTask *p = NEW(a, Zshard__ServerTask, ZSHARD__SERVER_TASK__INIT);
	if (!p)
		return NULL;
	p->kind = (Zshard__TaskKind)t->kind;
	p->job = (char *)t->job;
	p->id = t->id;
	p->step = t->step;
	return p;
}

static enum zs_status task_from(const Zshard__ServerTask *p, struct zs_task *t,
				struct zs_error *err)
{
	memset(t, 0, sizeof *t);
	if (!p)
		return zs_fail(err, ZS_EINVAL, "task missing");
	t->kind = (enum zs_task_kind)p->kind;
	t->id = p->id;
	t->step = p->step;
	return cpy(t->job, sizeof t->job, p->job, "job name", err);
}

enum zs_status zs_enc_task(const struct zs_task *t, struct zs_buf *out)
{
	struct arena a = {0};
	Zshard__ServerTask *m = task_pb(&a, t);
	if (!m) {
		arena_free(&a);
		return ZS_ENOMEM;
	}
	return pack(&a, &m->base, out);
}

enum zs_status zs_dec_task(const uint8_t *p, size_t n, struct zs_task *t,
			   struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ServerTask, server_task, p, n, err);
	st = task_from(m, t, err);
	DONE(server_task);
	return st;
}

enum zs_status zs_enc_tasks(const struct zs_task *t, uint32_t n_t, struct zs_buf *out)
{
	Zshard__ServerTasksReply m = ZSHARD__SERVER_TASKS_REPLY__INIT;
	struct arena a = {0};
	m.n_tasks = n_t;
	m.tasks = aalloc(&a, n_t * sizeof *m.tasks);
	for (uint32_t i = 0; m.tasks && i < n_t; i++)
		m.tasks[i] = task_pb(&a, &t[i]);
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_tasks(const uint8_t *p, size_t n, struct zs_task **t, uint32_t *n_t,
			    struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__ServerTasksReply, server_tasks_reply, p, n, err);
	*n_t = 0;
	*t = calloc(m->n_tasks ? m->n_tasks : 1, sizeof **t);
	if (!*t)
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < m->n_tasks; i++)
		st = task_from(m->tasks[i], &(*t)[i], err);
	if (st) {
		free(*t);
		*t = NULL;
	} else {
		*n_t = (uint32_t)m->n_tasks;
	}
	DONE(server_tasks_reply);
	return st;
}

enum zs_status zs_enc_task_done(uint64_t server_id, const struct zs_task *t, bool ok,
				const char *error, uint64_t bytes, struct zs_buf *out)
{
	Zshard__TaskDoneRequest m = ZSHARD__TASK_DONE_REQUEST__INIT;
	struct arena a = {0};
	m.server_id = server_id;
	m.task = task_pb(&a, t);
	m.ok = ok;
	m.error = (char *)(error ? error : "");
	m.bytes = bytes;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_task_done(const uint8_t *p, size_t n, uint64_t *server_id,
				struct zs_task *t, bool *ok, char *error, size_t error_len,
				uint64_t *bytes, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__TaskDoneRequest, task_done_request, p, n, err);
	*server_id = m->server_id;
	*ok = m->ok;
	*bytes = m->bytes;
	st = task_from(m->task, t, err);
	if (!st)
		snprintf(error, error_len, "%s", m->error ? m->error : "");
	DONE(task_done_request);
	return st;
}

enum zs_status zs_enc_rebalance(const char *name, const uint64_t *servers, uint32_t n,
				struct zs_buf *out)
{
	Zshard__JobRequest m = ZSHARD__JOB_REQUEST__INIT;
	struct arena a = {0};
	m.name = (char *)name;
	m.n_servers = n;
	m.servers = (uint64_t *)servers;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_rebalance(const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX],
				uint64_t **servers, uint32_t *n_servers, struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__JobRequest, job_request, p, n, err);
	st = cpy(name, ZS_JOB_NAME_MAX, m->name, "job name", err);
	*servers = NULL;
	*n_servers = 0;
	if (!st && m->n_servers > 65536)
		st = zs_fail(err, ZS_EINVAL, "too many servers");
	if (!st && m->n_servers) {
		*servers = malloc(m->n_servers * sizeof **servers);
		if (!*servers)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
		else {
			memcpy(*servers, m->servers, m->n_servers * sizeof **servers);
			*n_servers = (uint32_t)m->n_servers;
		}
	}
	DONE(job_request);
	return st;
}

enum zs_status zs_enc_read_ckpt(const struct zs_read_ckpt *r, struct zs_buf *out)
{
	Zshard__ReadCheckpointRequest m = ZSHARD__READ_CHECKPOINT_REQUEST__INIT;
	struct arena a = {0};
	m.job = (char *)r->job;
	m.id = r->id;
	m.unit = r->unit;
	m.index = r->index;
	m.array = r->array;
	m.offset = r->offset;
	m.length = r->length;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_read_ckpt(const uint8_t *p, size_t n, struct zs_read_ckpt *r,
				struct zs_error *err)
{
	enum zs_status st;
	UNPACK(Zshard__ReadCheckpointRequest, read_checkpoint_request, p, n, err);
	memset(r, 0, sizeof *r);
	r->id = m->id;
	r->unit = m->unit;
	r->index = m->index;
	r->array = m->array;
	r->offset = m->offset;
	r->length = m->length;
	st = cpy(r->job, sizeof r->job, m->job, "job name", err);
	if (!st && (r->array > 2 || r->length > (64u << 20)))
		st = zs_fail(err, ZS_EINVAL, "bad checkpoint read (array %u, %llu elements)",
			     r->array, (unsigned long long)r->length);
	DONE(read_checkpoint_request);
	return st;
}

enum zs_status zs_enc_read_ckpt_reply(uint64_t step, const float *data, uint64_t len,
				      struct zs_buf *out)
{
	Zshard__ReadCheckpointReply m = ZSHARD__READ_CHECKPOINT_REPLY__INIT;
	struct arena a = {0};
	m.step = step;
	m.data.len = len * 4;
	m.data.data = (uint8_t *)data;
	return pack(&a, &m.base, out);
}

enum zs_status zs_dec_read_ckpt_reply(const uint8_t *p, size_t n, uint64_t *step,
				      float *out, uint64_t len, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	UNPACK(Zshard__ReadCheckpointReply, read_checkpoint_reply, p, n, err);
	*step = m->step;
	if (m->data.len != len * 4)
		st = zs_fail(err, ZS_EPROTO, "checkpoint slice of %zu bytes, %llu expected",
			     m->data.len, (unsigned long long)(len * 4));
	else
		memcpy(out, m->data.data, len * 4);
	DONE(read_checkpoint_reply);
	return st;
}
