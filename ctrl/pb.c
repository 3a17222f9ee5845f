/*
 * pb.c - the arena and the conversions between zshard's structs and their
 * protobuf-c trees (see pb.h). Decoding copies into the zshard structs
 * with bounds checks; the caller frees the unpacked tree.
 */
#include "ctrl/pb.h"

/* ------------------------------------------------------------ arena */

void *pb_aalloc(struct arena *a, size_t size)
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

void pb_arena_free(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
}

/* Packs m into out and frees the arena; ZS_ENOMEM if anything failed. */
enum zs_status pb_pack(struct arena *a, const ProtobufCMessage *m,
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
	pb_arena_free(a);
	return st;
}

void zs_buf_release(struct zs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
}

/* --------------------------------------------------- domain: encoding */

Zshard__Layout *pb_layout_pb(struct arena *a, const struct zs_layout *l)
{
	Zshard__Layout *pl = NEW(a, Zshard__Layout, ZSHARD__LAYOUT__INIT);
	if (!pl)
		return NULL;
	pl->n_units = l->n_units;
	pl->units = pb_aalloc(a, l->n_units * sizeof *pl->units);
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
		pu->tensors = pb_aalloc(a, un->n_tensors * sizeof *pu->tensors);
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
			pt->group = te->group;
			pt->frozen = te->frozen;
		}
	}
	pl->aliases = pb_aalloc(a, (l->n_aliases + 1) * sizeof *pl->aliases);
	for (uint32_t i = 0; pl->aliases && i < l->n_aliases; i++) {
		Zshard__Alias *pa = NEW(a, Zshard__Alias, ZSHARD__ALIAS__INIT);
		if (!pa)
			return pl;
		pa->unit = l->aliases[i].unit;
		pa->tensor = l->aliases[i].tensor;
		pa->name = (char *)l->aliases[i].name;
		pl->aliases[pl->n_aliases++] = pa;
	}
	return pl;
}

Zshard__JobSpec *pb_spec_pb(struct arena *a, const struct zs_job_spec *s)
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
	ps->collective = s->collective;
	ps->replicas = s->replicas > 1 ? s->replicas : 0;
	ps->rank_lost = (Zshard__RankLost)s->rank_lost;
	ps->rank_wait_ms = s->rank_wait_ms;
	ps->data_tls = s->data_tls;
	ps->reader_pins = s->reader_pins;
	ps->reader_idle_ms = s->reader_idle_ms;
	ps->buffers = s->buffers;
	if (s->n_rank_hosts && (ps->rank_hosts = pb_aalloc(a, s->n_rank_hosts * sizeof(char *)))) {
		ps->n_rank_hosts = s->n_rank_hosts;
		for (uint32_t r = 0; r < s->n_rank_hosts; r++)
			ps->rank_hosts[r] = (char *)s->rank_hosts[r];
	}
	po->kind = (Zshard__OptimKind)s->optim.kind;
	po->lr = s->optim.lr;
	po->beta1 = s->optim.beta1;
	po->beta2 = s->optim.beta2;
	po->eps = s->optim.eps;
	po->weight_decay = s->optim.weight_decay;
	po->momentum = s->optim.momentum;
	po->clip_norm = s->optim.clip_norm;
	po->steps_taken = s->optim.steps_taken;
	po->groups = pb_aalloc(a, s->optim.n_groups * sizeof *po->groups + 1);
	for (uint32_t g = 0; po->groups && g < s->optim.n_groups; g++) {
		const struct zs_hp *h = &s->optim.groups[g];
		Zshard__OptimGroup *pg = NEW(a, Zshard__OptimGroup, ZSHARD__OPTIM_GROUP__INIT);
		if (!pg)
			break;
		pg->lr = h->lr;
		pg->weight_decay = h->weight_decay;
		pg->beta1 = h->beta1;
		pg->beta2 = h->beta2;
		pg->eps = h->eps;
		pg->momentum = h->momentum;
		po->groups[po->n_groups++] = pg;
	}
	ps->optimizer = po;
	ps->layout = pb_layout_pb(a, &s->layout);
	return ps;
}

Zshard__Shard **pb_shards_pb(struct arena *a, const struct zs_shard *sh,
				 uint32_t n)
{
	Zshard__Shard **v = pb_aalloc(a, n * sizeof *v);
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
		p->copy = sh[i].copy;
		p->copies = sh[i].copies;
		p->fresh = sh[i].fresh != 0;
		p->placed = sh[i].placed;
		v[i] = p;
	}
	return v;
}

Zshard__Job *pb_job_pb(struct arena *a, const struct zs_job *j)
{
	Zshard__Job *pj = NEW(a, Zshard__Job, ZSHARD__JOB__INIT);
	Zshard__Placement *pp = NEW(a, Zshard__Placement, ZSHARD__PLACEMENT__INIT);
	if (!pj || !pp)
		return pj;
	pj->spec = pb_spec_pb(a, &j->spec);
	pp->epoch = j->placement.epoch;
	pp->n_shards = j->placement.n_shards;
	pp->shards = pb_shards_pb(a, j->placement.shards, j->placement.n_shards);
	pj->placement = pp;
	pj->created_ms = j->created_ms;
	pj->restored_id = j->restored_id;
	pj->restored_step = j->restored_step;
	pj->restore_pending = j->restore_pending;
	pj->restore_error = (char *)j->restore_error;
	pj->timeline = j->timeline;
	pj->stopped_step = j->stopped_step;
	pj->leaving_step = j->leaving_step;
	pj->stop_before = j->stop_before;
	pj->rollback_reason = (char *)j->rollback_reason;
	pj->token = (char *)j->token;
	pj->token_reader = j->token_reader;
	pj->token_sealed.data = (uint8_t *)j->token_sealed;
	pj->token_sealed.len = j->token_sealed_len;
	pj->incarnation = j->incarnation;
	pj->n_worlds = j->worlds.n;
	pj->worlds = pb_worlds_pb(a, &j->worlds);
	pj->n_trainers = j->n_trainers;
	pj->trainers = pb_aalloc(a, j->n_trainers * sizeof *pj->trainers);
	for (uint32_t i = 0; pj->trainers && i < j->n_trainers; i++) {
		Zshard__Trainer *pt = NEW(a, Zshard__Trainer, ZSHARD__TRAINER__INIT);
		if (!pt)
			break;
		pt->rank = j->trainers[i].rank;
		pt->host = (char *)j->trainers[i].host;
		pt->joined_ms = j->trainers[i].joined_ms;
		pt->session = j->trainers[i].session;
		pj->trainers[i] = pt;
	}
	return pj;
}

Zshard__ServerInfo *pb_server_pb(struct arena *a, const struct zs_server_info *s)
{
	Zshard__ServerInfo *p = NEW(a, Zshard__ServerInfo, ZSHARD__SERVER_INFO__INIT);
	if (!p)
		return NULL;
	p->id = s->id;
	p->addr = (char *)s->addr;
	p->data_addr = (char *)s->data_addr;
	p->shm_addr = (char *)s->shm_addr;
	p->host = (char *)s->host;
	p->metrics_addr = (char *)s->metrics_addr;
	p->capacity = s->capacity;
	p->transports = s->transports;
	p->up = s->up;
	p->used = s->used;
	p->last_seen_ms = s->last_seen_ms;
	p->health = (char *)s->health;
	return p;
}

Zshard__Assignment **pb_assignments_pb(struct arena *a,
					   const struct zs_assignment *as,
					   uint32_t n)
{
	Zshard__Assignment **v = pb_aalloc(a, n * sizeof *v);
	for (uint32_t i = 0; v && i < n; i++) {
		Zshard__Assignment *p = NEW(a, Zshard__Assignment, ZSHARD__ASSIGNMENT__INIT);
		if (!p)
			break;
		p->job = (char *)as[i].job;
		p->epoch = as[i].epoch;
		p->incarnation = as[i].incarnation;
		p->token = (char *)as[i].token;
		p->bytes = as[i].bytes;
		p->n_shards = as[i].n_shards;
		p->shards = pb_shards_pb(a, as[i].shards, as[i].n_shards);
		v[i] = p;
	}
	return v;
}

/* --------------------------------------------------- domain: decoding */

enum zs_status pb_cpy(char *dst, size_t cap, const char *src,
			  const char *field, struct zs_error *err)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= cap)
		return zs_fail(err, ZS_EINVAL, "%s is too long (%zu bytes, max %zu)",
			       field, n, cap - 1);
	memcpy(dst, src ? src : "", n + 1);
	return ZS_OK;
}

enum zs_status pb_layout_from(const Zshard__Layout *pl, struct zs_layout *l,
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
		if (pb_cpy(un->name, sizeof un->name, pu->name, "unit name", err))
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
			if (pb_cpy(te->name, sizeof te->name, pt->name, "tensor name", err))
				goto fail;
			if (pt->n_shape > ZS_MAX_DIMS) {
				zs_fail(err, ZS_EINVAL,
					"tensor '%s' has %zu dimensions (max %d)",
					te->name, pt->n_shape, ZS_MAX_DIMS);
				goto fail;
			}
			te->ndim = (uint32_t)pt->n_shape;
			te->group = pt->group;
			te->frozen = pt->frozen;
			if (pt->n_shape)
				memcpy(te->shape, pt->shape,
				       pt->n_shape * sizeof te->shape[0]);
		}
	}
	if (pl->n_aliases > ZS_MAX_ALIASES) {
		zs_fail(err, ZS_EINVAL, "%zu tensor aliases (max %d)", pl->n_aliases,
			ZS_MAX_ALIASES);
		goto fail;
	}
	if (pl->n_aliases && !(l->aliases = calloc(pl->n_aliases, sizeof *l->aliases))) {
		zs_fail(err, ZS_ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < pl->n_aliases; i++) {
		struct zs_alias *x = &l->aliases[l->n_aliases++];
		x->unit = pl->aliases[i]->unit;
		x->tensor = pl->aliases[i]->tensor;
		if (pb_cpy(x->name, sizeof x->name, pl->aliases[i]->name, "alias", err))
			goto fail;
	}
	zs_layout_derive(l);
	return ZS_OK;
fail:
	zs_layout_release(l);
	return err ? err->code : ZS_EINVAL;
}

static enum zs_status spec_from(const Zshard__JobSpec *ps, struct zs_job_spec *s,
				struct zs_error *err);

/* A spec that fails half-way gives back what it took (the RPC fuzzer found
 * rank hosts kept when a later field was refused). */
enum zs_status pb_spec_from(const Zshard__JobSpec *ps, struct zs_job_spec *s,
				struct zs_error *err)
{
	enum zs_status st = spec_from(ps, s, err);
	if (st)
		zs_job_spec_release(s);
	return st;
}

static enum zs_status spec_from(const Zshard__JobSpec *ps, struct zs_job_spec *s,
				struct zs_error *err)
{
	memset(s, 0, sizeof *s);
	if (!ps)
		return zs_fail(err, ZS_EINVAL, "job spec is missing");
	if (pb_cpy(s->name, sizeof s->name, ps->name, "job name", err))
		return err ? err->code : ZS_EINVAL;
	s->stage = ps->stage;
	s->world_size = ps->world_size;
	s->compute_dtype = (enum zs_dtype)ps->compute_dtype;
	s->align_bytes = ps->align_bytes;
	s->keep_checkpoints = ps->keep_checkpoints;
	s->checkpoint_every = ps->checkpoint_every;
	s->collective = ps->collective;
	s->replicas = ps->replicas;
	if ((unsigned)ps->rank_lost > ZSHARD__RANK_LOST__RANK_LOST_ROLLBACK)
		return zs_fail(err, ZS_EINVAL, "rank_lost %d is not wait, shrink or rollback",
			       (int)ps->rank_lost);
	s->rank_lost = (enum zs_rank_lost)ps->rank_lost;
	s->rank_wait_ms = ps->rank_wait_ms;
	s->data_tls = ps->data_tls;
	s->reader_pins = ps->reader_pins;
	s->reader_idle_ms = ps->reader_idle_ms;
	s->buffers = ps->buffers;
	if (ps->n_rank_hosts) {
		if (ps->n_rank_hosts > ZS_MAX_WORLD)
			return zs_fail(err, ZS_EINVAL, "%zu rank hosts", ps->n_rank_hosts);
		s->rank_hosts = calloc(ps->n_rank_hosts, sizeof *s->rank_hosts);
		if (!s->rank_hosts)
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		s->n_rank_hosts = (uint32_t)ps->n_rank_hosts;
		for (uint32_t r = 0; r < s->n_rank_hosts; r++)
			if (pb_cpy(s->rank_hosts[r], ZS_HOST_NAME, ps->rank_hosts[r], "rank host", err))
				return err ? err->code : ZS_EINVAL;
	}
	if (ps->optimizer) {
		const Zshard__Optimizer *o = ps->optimizer;
		s->optim = (struct zs_optim){
			.kind = (enum zs_optim_kind)o->kind, .lr = o->lr,
			.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
			.weight_decay = o->weight_decay, .momentum = o->momentum,
			.clip_norm = o->clip_norm,
			.steps_taken = o->steps_taken,
		};
		if (o->steps_taken > ZS_MAX_STEPS_TAKEN)
			return zs_fail(err, ZS_EINVAL, "optimizer steps_taken %llu (at most %llu)",
				       (unsigned long long)o->steps_taken,
				       (unsigned long long)ZS_MAX_STEPS_TAKEN);
		if (o->n_groups > ZS_MAX_GROUPS)
			return zs_fail(err, ZS_EINVAL, "%zu optimizer groups (at most %d)",
				       o->n_groups, ZS_MAX_GROUPS);
		s->optim.n_groups = (uint32_t)o->n_groups;
		for (size_t g = 0; g < o->n_groups; g++)
			s->optim.groups[g] = (struct zs_hp){
				o->groups[g]->lr, o->groups[g]->weight_decay, o->groups[g]->beta1,
				o->groups[g]->beta2, o->groups[g]->eps, o->groups[g]->momentum};
	}
	/* a record from before groups (or without an optimizer at all): one
	 * group, of the top-level values, so that what is decoded encodes and
	 * decodes to itself (the RPC fuzzer found the absent case differing) */
	if (!s->optim.n_groups)
		s->optim.groups[s->optim.n_groups++] = (struct zs_hp){
			s->optim.lr, s->optim.weight_decay, s->optim.beta1, s->optim.beta2,
			s->optim.eps, s->optim.momentum};
	return pb_layout_from(ps->layout, &s->layout, err);
}

enum zs_status pb_shards_from(Zshard__Shard *const *ps, size_t n,
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
	for (size_t i = 0; i < n; i++) {
		uint32_t copies = ps[i]->copies;
		if (copies > ZS_MAX_REPLICAS || ps[i]->copy >= (copies ? copies : 1)) {
			free(*out);
			*out = NULL;
			return zs_fail(err, ZS_EINVAL, "shard %zu: copy %u of %u", i, ps[i]->copy,
				       copies);
		}
		(*out)[i] = (struct zs_shard){
			.unit = ps[i]->unit, .index = ps[i]->index,
			.server_id = ps[i]->server_id, .offset = ps[i]->offset,
			.length = ps[i]->length, .padded = ps[i]->padded,
			.copy = ps[i]->copy, .copies = copies, .fresh = ps[i]->fresh,
			.placed = ps[i]->placed,
		};
	}
	*n_out = (uint32_t)n;
	return ZS_OK;
}

enum zs_status pb_job_from(const Zshard__Job *pj, struct zs_job *j,
			       struct zs_error *err)
{
	enum zs_status st;

	memset(j, 0, sizeof *j);
	st = pb_spec_from(pj->spec, &j->spec, err);
	if (st)
		return st;
	j->created_ms = pj->created_ms;
	j->incarnation = pj->incarnation;
	j->restored_id = pj->restored_id;
	j->restored_step = pj->restored_step;
	j->restore_pending = pj->restore_pending;
	j->timeline = pj->timeline;
	j->stopped_step = pj->stopped_step;
	j->leaving_step = pj->leaving_step;
	j->stop_before = pj->stop_before;
	st = pb_cpy(j->restore_error, sizeof j->restore_error, pj->restore_error, "restore error",
		 err);
	if (!st)
		st = pb_cpy(j->rollback_reason, sizeof j->rollback_reason, pj->rollback_reason,
			    "rollback reason", err);
	if (!st)
		st = pb_cpy(j->token, sizeof j->token, pj->token, "job token", err);
	j->token_reader = pj->token_reader;
	if (!st && pj->token_sealed.len > sizeof j->token_sealed)
		st = zs_fail(err, ZS_EINVAL, "a sealed job token of %zu bytes (at most %zu)",
			     pj->token_sealed.len, sizeof j->token_sealed);
	if (st)
		goto fail;
	if (pj->token_sealed.len)
		memcpy(j->token_sealed, pj->token_sealed.data, pj->token_sealed.len);
	j->token_sealed_len = (uint32_t)pj->token_sealed.len;
	if (pj->placement) {
		j->placement.epoch = pj->placement->epoch;
		st = pb_shards_from(pj->placement->shards, pj->placement->n_shards,
				 &j->placement.shards, &j->placement.n_shards, err);
		if (st)
			goto fail;
	}
	if ((st = pb_worlds_from(pj->worlds, pj->n_worlds, &j->worlds, err)))
		goto fail;
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
			j->trainers[i].session = pj->trainers[i]->session;
			st = pb_cpy(j->trainers[i].host, sizeof j->trainers[i].host,
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

enum zs_status pb_server_from(const Zshard__ServerInfo *p,
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
	if ((st = pb_cpy(s->addr, sizeof s->addr, p->addr, "server address", err)) ||
	    (st = pb_cpy(s->data_addr, sizeof s->data_addr, p->data_addr,
		      "server data address", err)) ||
	    (st = pb_cpy(s->shm_addr, sizeof s->shm_addr, p->shm_addr, "server shm address",
		      err)) ||
	    (st = pb_cpy(s->host, sizeof s->host, p->host, "server host", err)) ||
	    (st = pb_cpy(s->metrics_addr, sizeof s->metrics_addr, p->metrics_addr,
			 "server metrics address", err)) ||
	    (st = pb_cpy(s->health, sizeof s->health, p->health, "server health", err)))
		return st;
	return ZS_OK;
}

enum zs_status pb_assignments_from(Zshard__Assignment *const *pa, size_t n,
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
		a->incarnation = pa[i]->incarnation;
		a->bytes = pa[i]->bytes;
		st = pb_cpy(a->job, sizeof a->job, pa[i]->job, "job name", err);
		if (!st)
			st = pb_cpy(a->token, sizeof a->token, pa[i]->token, "job token", err);
		if (!st)
			st = pb_shards_from(pa[i]->shards, pa[i]->n_shards, &a->shards,
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

enum zs_status pb_servers_from(Zshard__ServerInfo **v, size_t n, struct zs_server_info **s,
			       uint32_t *n_s, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	*s = calloc(n ? n : 1, sizeof **s);
	*n_s = 0;
	if (!*s)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (size_t i = 0; !st && i < n; i++)
		st = pb_server_from(v[i], &(*s)[i], err);
	if (st) {
		free(*s);
		*s = NULL;
	} else {
		*n_s = (uint32_t)n;
	}
	return st;
}

Zshard__WorldChange **pb_worlds_pb(struct arena *a, const struct zs_worlds *w)
{
	Zshard__WorldChange **v = pb_aalloc(a, (w->n ? w->n : 1) * sizeof *v);

	for (uint32_t i = 0; v && i < w->n; i++) {
		Zshard__WorldChange *c = NEW(a, Zshard__WorldChange, ZSHARD__WORLD_CHANGE__INIT);
		if (!c)
			return NULL;
		c->step = w->v[i].step;
		c->world = w->v[i].world;
		v[i] = c;
	}
	return v;
}

enum zs_status pb_worlds_from(Zshard__WorldChange *const *v, size_t n, struct zs_worlds *w,
			      struct zs_error *err)
{
	memset(w, 0, sizeof *w);
	if (n > ZS_WORLD_HIST)
		return zs_fail(err, ZS_EINVAL, "%zu world size changes (at most %d)", n,
			       ZS_WORLD_HIST);
	for (size_t i = 0; i < n; i++) {
		if (v[i]->world < 1 || v[i]->world > ZS_MAX_WORLD)
			return zs_fail(err, ZS_EINVAL, "a world size of %u (1..%d)", v[i]->world,
				       ZS_MAX_WORLD);
		if (i && v[i]->step <= v[i - 1]->step)
			return zs_fail(err, ZS_EINVAL, "world size changes out of step order");
		w->v[i] = (struct zs_world_change){v[i]->step, v[i]->world};
	}
	w->n = (uint32_t)n;
	return ZS_OK;
}
