/*
 * lookup.c - what every handler of the coordinator shares: its state
 * looked up (a job, a server, the servers a job's placement uses, the
 * bytes placed on one, the live ones), a job's committed record kept
 * encoded, a call's replies, and new tokens and incarnations (see
 * state.h).
 * Calls nothing else of coord/.
 */
#include "coord/lookup.h"


struct srv *coord_find_srv(struct coord *c, uint64_t id)
{
	for (size_t i = 0; i < c->n_srvs; i++)
		if (c->srvs[i].info.id == id)
			return &c->srvs[i];
	return NULL;
}

struct zs_job *coord_find_job(struct coord *c, const char *name)
{
	for (size_t i = 0; i < c->n_jobs; i++)
		if (!strcmp(c->jobs[i].spec.name, name))
			return &c->jobs[i];
	return NULL;
}

/* "server ID (ADDR)" for messages an operator acts on: the address says
 * which process, the id alone does not. Returns buf. */
const char *coord_server_name(struct coord *c, uint64_t id, char *buf, size_t len)
{
	struct srv *s = coord_find_srv(c, id);

	if (s)
		snprintf(buf, len, "server %llu (%s)", (unsigned long long)id, s->info.addr);
	else
		snprintf(buf, len, "server %llu", (unsigned long long)id);
	return buf;
}

/* The job named, or NULL after failing call with ZS_ENOTFOUND. */
struct zs_job *coord_job_or_fail(struct coord *c, struct zs_rpc_call *call, const char *name)
{
	struct zs_job *j = coord_find_job(c, name);

	if (!j)
		zs_rpc_fail(call, ZS_ENOTFOUND, "no job '%s'", name);
	return j;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

bool coord_placement_servers(const struct zs_placement *pl, uint64_t **ids, uint32_t *n)
{
	uint64_t *v;
	uint32_t m = 0;

	*ids = NULL;
	*n = 0;
	if (!pl->n_shards)
		return true;
	v = malloc(pl->n_shards * sizeof *v);
	if (!v)
		return false;
	for (uint32_t i = 0; i < pl->n_shards; i++)
		v[i] = pl->shards[i].server_id;
	qsort(v, pl->n_shards, sizeof *v, cmp_u64);
	for (uint32_t i = 0; i < pl->n_shards; i++)
		if (!m || v[m - 1] != v[i])
			v[m++] = v[i];
	*ids = v;
	*n = m;
	return true;
}

bool coord_id_in(const uint64_t *ids, uint32_t n, uint64_t sid)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ids[mid] == sid)
			return true;
		if (ids[mid] < sid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool coord_job_servers(struct coord *c, const struct zs_job *j, const uint64_t **ids,
		       uint32_t *n)
{
	struct jobsrv *s;

	for (s = c->jobsrvs; s; s = s->next)
		if (!strcmp(s->job, j->spec.name))
			break;
	if (!s) {
		s = calloc(1, sizeof *s);
		if (!s)
			return false;
		snprintf(s->job, sizeof s->job, "%s", j->spec.name);
		s->next = c->jobsrvs;
		c->jobsrvs = s;
	} else if (s->incarnation == j->incarnation && s->epoch == j->placement.epoch &&
		   s->shards == j->placement.shards && s->n_shards == j->placement.n_shards) {
		goto out;
	}
	free(s->ids);
	s->ids = NULL;
	s->n_shards = 0;
	s->shards = NULL;
	if (!coord_placement_servers(&j->placement, &s->ids, &s->n))
		return false;
	s->incarnation = j->incarnation;
	s->epoch = j->placement.epoch;
	s->shards = j->placement.shards;
	s->n_shards = j->placement.n_shards;
out:
	*ids = s->ids;
	*n = s->n;
	return true;
}

void coord_jobsrv_free(struct coord *c)
{
	while (c->jobsrvs) {
		struct jobsrv *s = c->jobsrvs;
		c->jobsrvs = s->next;
		free(s->ids);
		free(s);
	}
}

/* Bytes placements hold on server id, over all jobs except skip. */
uint64_t coord_used_on(struct coord *c, uint64_t id, const struct zs_job *skip)
{
	uint64_t b = 0;
	for (size_t i = 0; i < c->n_jobs; i++)
		if (&c->jobs[i] != skip)
			b += place_bytes_on(&c->jobs[i].spec, &c->jobs[i].placement, id);
	return b;
}

/* Encodes and sends a job, or fails the call. */
void coord_reply_job(struct zs_rpc_call *call, const struct zs_job *j)
{
	struct zs_job v = *j;
	struct zs_buf b;

	v.token[0] = '\0'; /* a listing, not a credential */
	if (zs_enc_job(&v, &b)) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
		return;
	}
	zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
}

void coord_reply_join(struct coord *c, struct zs_rpc_call *call, const struct zs_job *j)
{
	/* the job as committed, without its trainers: encoded once per change */
	const struct zs_buf *rec = coord_job_record(c, j);
	struct zs_buf b;

	if (rec) {
		zs_rpc_reply(call, rec->data, rec->len);
	} else if (!zs_enc_job(j, &b)) {
		zs_rpc_reply(call, b.data, b.len);
		zs_buf_release(&b);
	} else {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
	}
}

void coord_reply_buf(struct zs_rpc_call *call, enum zs_status enc_st,
		      struct zs_buf *b)
{
	if (enc_st)
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode reply");
	else
		zs_rpc_reply(call, b->data, b->len);
	zs_buf_release(b);
}

void coord_reply_err(struct zs_rpc_call *call, const struct zs_error *e)
{
	zs_rpc_fail(call, e->code, "%s", e->msg);
}

/* Fills the live servers with their free bytes (excluding job skip). */
size_t coord_live_servers(struct coord *c, const struct zs_job *skip,
			   struct place_server *out)
{
	size_t n = 0;
	for (size_t i = 0; i < c->n_srvs; i++) {
		struct srv *s = &c->srvs[i];
		uint64_t used = coord_used_on(c, s->info.id, skip);
		if (!zs_mbr_up(&s->m))
			continue;
		out[n++] = (struct place_server){
			.id = s->info.id,
			.free_bytes = s->info.capacity > used ? s->info.capacity - used : 0,
			.addr = s->info.addr,
			.host = s->info.host,
		};
	}
	return n;
}

/* ---------------------------------------------------- committed records */

/* The record's bytes: the job without its trainers (they have their own). */
enum zs_status coord_enc_record(const struct zs_job *j, struct zs_buf *b)
{
	struct zs_job v = *j;
	v.trainers = NULL;
	v.n_trainers = 0;
	return zs_enc_job(&v, b);
}

static struct jobrec **rec_slot(struct coord *c, const char *name)
{
	struct jobrec **p = &c->recs;
	while (*p && strcmp((*p)->name, name))
		p = &(*p)->next;
	return p;
}

/* Keeps b (taken) as name's committed record; b NULL: forgets it. */
void coord_record_set(struct coord *c, const char *name, struct zs_buf *b)
{
	struct jobrec **p = rec_slot(c, name), *r = *p;
	if (r) {
		zs_buf_release(&r->b);
		if (!b) {
			*p = r->next;
			free(r);
			return;
		}
	} else if (b && (r = calloc(1, sizeof *r))) {
		snprintf(r->name, sizeof r->name, "%s", name);
		*p = r;
	}
	if (r && b) {
		r->b = *b;
		*b = (struct zs_buf){0};
	} else if (b) {
		zs_buf_release(b);
	}
}

const struct zs_buf *coord_job_record(struct coord *c, const struct zs_job *j)
{
	struct jobrec *r = *rec_slot(c, j->spec.name);
	struct zs_buf b = {0};

	if (r)
		return &r->b;
	if (coord_enc_record(j, &b))
		return NULL;
	coord_record_set(c, j->spec.name, &b);
	r = *rec_slot(c, j->spec.name);
	return r ? &r->b : NULL;
}

void coord_records_free(struct coord *c)
{
	while (c->recs)
		coord_record_set(c, c->recs->name, NULL);
}

/* ------------------------------------------------------ tokens and names */

/* n bytes of the system's randomness into r (as before: until it gives
 * them; a blocking getrandom only fails for a bad buffer) */
static void random_bytes(uint8_t *r, size_t n)
{
	while (zs_random_bytes(r, n))
		;
}

uint64_t coord_new_incarnation(void)
{
	uint64_t v = 0;

	while (!v)
		random_bytes((uint8_t *)&v, sizeof v);
	return v;
}

void coord_new_token(char out[ZS_TOKEN_MAX])
{
	uint8_t r[16];

	random_bytes(r, sizeof r);
	for (size_t i = 0; i < sizeof r; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}
