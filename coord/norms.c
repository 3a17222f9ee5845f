/*
 * norms.c - the global-norm exchange for clipping: each server reports its
 * shards' squared norms for a step; the call is answered, for every server
 * at once, when the job's last shard is in (or failed after the bound).
 *
 * A trainer asks for a step's total with a report from server 0 (none has
 * that id) of no norms: answered with the servers, or at once for one of
 * the last NORMS_KEPT steps; ZS_EAGAIN while no server has reported it.
 *
 * A step's norms are kept by shard (its position among the placement's
 * primaries, which no new placement epoch reorders), not by server: after
 * a failover the promoted copy of a lost primary's shard reports it, and
 * a norm the lost one had reported already stands (the same pushes reduce
 * to the same bits). The total is summed in that order, whoever reported.
 *
 * Collections live in this coordinator's memory. One that dies (or loses
 * the lead) after answering some servers and not others leaves those
 * others sending their report again to the next leader, which never
 * hears from the answered ones (they applied the step and wait for the
 * next): each heartbeat's reply names the open steps that wait for the
 * heartbeating server's shards (coord_norm_wants), and a server that was
 * answered one of them sends its report again, settled: counted, answered
 * at once, and its total checked against the new one (norm_settled).
 */
#include "coord/rpc.h"
#include "coord/lookup.h"
#include "coord/session.h"
#include "base/env.h"

/* ------------------------------------------------ global-norm clipping */

static void norm_free(struct norm_coll *n)
{
	free(n->miss);
	zs_nx_free(&n->x);
	free(n->waits);
	free(n);
}

/* Fails every server waiting on n (caller holds mu and unlinks n). */
void coord_norm_fail(struct norm_coll *n, enum zs_status code, const char *why)
{
	for (size_t i = 0; i < n->n_waits; i++)
		zs_rpc_fail(n->waits[i].call, code, "%s", why);
	norm_free(n);
}

/* Lists, once each, the servers owning shards not yet reported. */
static void norm_missing(const struct zs_job *j, const struct norm_coll *n, char *buf,
			 size_t len)
{
	const struct zs_placement *p = &j->placement;
	size_t k = 0;

	buf[0] = '\0';
	for (uint32_t i = 0, g = 0; i < p->n_shards && k < len; i++) {
		uint64_t id = p->shards[i].server_id;
		bool listed = false;
		if (p->shards[i].copy)
			continue;
		g++; /* shard i is the (g - 1)th primary */
		if (g <= n->x.n_shards && n->x.have[g - 1])
			continue;
		for (uint32_t q = 0, h = 0; q < i && !listed; q++) {
			if (p->shards[q].copy)
				continue;
			listed = h < n->x.n_shards && !n->x.have[h] && p->shards[q].server_id == id;
			h++;
		}
		if (!listed)
			k += (size_t)snprintf(buf + k, len - k, "%s%llu", k ? ", " : "",
					      (unsigned long long)id);
	}
}


/* The job's latest totals, NORMS_KEPT at most: a server whose answer was
 * lost asks again and gets the same total. */
#define NORMS_KEPT 4
static void norm_remember(struct coord *c, const char *job, uint64_t timeline, uint64_t step,
			  double total, uint32_t n_shards)
{
	struct norm_done *d = calloc(1, sizeof *d), **pp;
	unsigned kept = 0;

	if (!d)
		return; /* a repeat then waits for its bound: not worse */
	snprintf(d->job, sizeof d->job, "%s", job);
	d->d = (struct zs_nx_done){.timeline = timeline, .step = step, .total = total,
				   .n_shards = n_shards};
	d->next = c->nx.done;
	c->nx.done = d;
	for (pp = &c->nx.done; *pp;) {
		struct norm_done *x = *pp;
		if (!strcmp(x->job, job) && ++kept > NORMS_KEPT) {
			*pp = x->next;
			free(x);
		} else {
			pp = &x->next;
		}
	}
}

void coord_drop_norms_done(struct coord *c, const char *job)
{
	for (struct norm_done **pp = &c->nx.done; *pp;) {
		struct norm_done *x = *pp;
		if (!job || !strcmp(x->job, job)) {
			*pp = x->next;
			free(x);
		} else {
			pp = &x->next;
		}
	}
}

/* Each reported shard's place among j's primaries into pos (and its norm
 * into v), checked before anything changes: placed on the reporting
 * server. False after failing the call. */
static bool norm_places(const struct zs_job *j, const struct zs_norm_report *r, uint32_t *pos,
			double *v, struct zs_rpc_call *call)
{
	for (uint32_t i = 0; i < r->n; i++) {
		uint32_t k, g = 0; /* g: the shard's place among the primaries */
		for (k = 0; k < j->placement.n_shards; k++) {
			if (j->placement.shards[k].copy)
				continue;
			if (j->placement.shards[k].unit == r->norms[i].unit &&
			    j->placement.shards[k].index == r->norms[i].index)
				break;
			g++;
		}
		if (k == j->placement.n_shards || j->placement.shards[k].server_id != r->server_id) {
			zs_rpc_fail(call, ZS_EINVAL,
				    "unit %u shard %u of job '%s' is not placed on server %llu",
				    r->norms[i].unit, r->norms[i].index, r->job,
				    (unsigned long long)r->server_id);
			return false;
		}
		pos[i] = g;
		v[i] = r->norms[i].sumsq;
	}
	return true;
}

/* The kept total of r's step of j's timeline (model/normx.c), or NULL. */
static const struct zs_nx_done *norm_kept(struct coord *c, const struct zs_job *j,
					  const struct zs_norm_report *r)
{
	const struct zs_nx_done *k = NULL;

	for (struct norm_done *d = c->nx.done; d && !k; d = d->next)
		if (!strcmp(d->job, r->job))
			k = zs_nx_kept(&d->d, 1, j->timeline, r->step);
	return k;
}

/* Fails call with why a report was refused (v: its verdict). */
static void norm_refuse(struct zs_rpc_call *call, const struct zs_norm_report *r,
			enum zs_nx_verdict v)
{
	if (v == ZS_NX_NOT_FINITE)
		zs_rpc_fail(call, ZS_EINVAL, "job '%s' step %llu: a norm of server %llu is not finite",
			    r->job, (unsigned long long)r->step, (unsigned long long)r->server_id);
	else /* ZS_NX_OTHER_NORM */
		zs_rpc_fail(call, ZS_EEXIST,
			    "job '%s' step %llu: a shard of server %llu was reported already, with another norm",
			    r->job, (unsigned long long)r->step, (unsigned long long)r->server_id);
}

/* Answers the call from the totals kept when r's step of j's timeline went
 * out already (an answer lost on its way); false when it did not. */
static bool norm_answer_kept(struct coord *c, const struct zs_job *j,
			     const struct zs_norm_report *r, struct zs_rpc_call *call)
{
	/* a step of an earlier timeline is not this one */
	const struct zs_nx_done *d = norm_kept(c, j, r);
	struct zs_buf b;

	if (!d)
		return false;
	if (zs_enc_norm_reply(d->total, d->n_shards, &b))
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode the norm reply");
	else
		zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
	return true;
}

/* A new collection of r's step, first in c's list; NULL when out of memory. */
static struct norm_coll *norm_coll_new(struct coord *c, const struct zs_job *j,
				       const struct zs_norm_report *r)
{
	struct norm_coll *nc = calloc(1, sizeof *nc);

	if (!nc || zs_nx_init(&nc->x, zs_placement_groups(&j->placement))) {
		free(nc);
		return NULL;
	}
	snprintf(nc->job, sizeof nc->job, "%s", r->job);
	nc->step = r->step;
	nc->started_ms = zs_now_ms();
	nc->next = c->nx.colls;
	c->nx.colls = nc;
	return nc;
}

/* The test fault coord-norm-forget: the first step that two servers wait
 * for is answered to one of them and forgotten, as by a coordinator that
 * dies between the answers; the others' calls break. True when it struck. */
static bool norm_forget(struct norm_coll *nc, const struct zs_buf *b)
{
	static atomic_bool struck;

	if (nc->n_waits < 2 || nc->step < 2 || atomic_load(&struck) ||
	    !zs_fault("coord-norm-forget"))
		return false;
	atomic_store(&struck, true);
	zs_warn("fault coord-norm-forget: job '%s' step %llu answered to server %llu only, then forgotten",
		nc->job, (unsigned long long)nc->step, (unsigned long long)nc->waits[0].server_id);
	zs_rpc_reply(nc->waits[0].call, b->data, b->len);
	for (size_t i = 1; i < nc->n_waits; i++)
		zs_rpc_fail(nc->waits[i].call, ZS_EUNAVAIL,
			    "the coordinator forgot step %llu's norms (fault coord-norm-forget)",
			    (unsigned long long)nc->step);
	norm_free(nc);
	return true;
}

/* Every shard of nc (linked at *pp) is in (v: ZS_NX_COMPLETE with the
 * total, summed in placement order, or ZS_NX_DIVERGED: a server that
 * applied the step already was answered another): the total answers every
 * call that waits, and is kept for those asking again; or no one is. */
static void norm_complete(struct coord *c, const struct zs_job *j, struct norm_coll *nc,
			  struct norm_coll **pp, enum zs_nx_verdict v, double total)
{
	struct zs_buf b;

	*pp = nc->next;
	if (v == ZS_NX_DIVERGED) {
		char why[ZS_ERRMSG_MAX];
		zs_fmt(why, sizeof why,
		       "job '%s' step %llu: the shards' norms sum to %a, but server %llu applied the step with %a, answered before: the step would not be clipped alike on every server",
		       nc->job, (unsigned long long)nc->step, total,
		       (unsigned long long)nc->x.settled_by, nc->x.settled_total);
		zs_error("%s", why);
		coord_norm_fail(nc, ZS_EINTERNAL, why);
		return;
	}
	if (zs_enc_norm_reply(total, nc->x.n_shards, &b)) {
		coord_norm_fail(nc, ZS_ENOMEM, "cannot encode the norm reply");
		return;
	}
	if (norm_forget(nc, &b)) {
		zs_buf_release(&b);
		return;
	}
	for (size_t i = 0; i < nc->n_waits; i++)
		zs_rpc_reply(nc->waits[i].call, b.data, b.len);
	zs_buf_release(&b);
	norm_remember(c, nc->job, j->timeline, nc->step, total, nc->x.n_shards);
	zs_debug("job '%s' step %llu: gradient norm %g (sumsq %a) over %u shards", nc->job,
		 (unsigned long long)nc->step, sqrt(total), total, nc->x.n_shards);
	norm_free(nc);
}

/*
 * A settled report: its server applied the step with r->settled_total,
 * answered by a coordinator that then died before it answered the others
 * (which sent theirs here again). Answered at once: nothing opens for it
 * nor waits; its norms (pos, v) join the open collection nc (linked at
 * *pp), whose total must then be the same. Of another timeline (the job
 * rolled back since the want): refused (model/normx.c decides).
 */
static void norm_settled(struct coord *c, const struct zs_job *j, const struct zs_norm_report *r,
			 const uint32_t *pos, const double *v, struct norm_coll *nc,
			 struct norm_coll **pp, struct zs_rpc_call *call)
{
	const struct zs_nx_done *kept = nc ? NULL : norm_kept(c, j, r);
	const bool had = nc && nc->x.settled;
	const double before = had ? nc->x.settled_total : 0.0;
	double total = 0.0;
	struct zs_buf b;
	enum zs_nx_verdict vd = zs_nx_settled(nc ? &nc->x : NULL, kept, j->timeline, r->timeline,
					      r->server_id, r->settled_total, pos, v, r->n, &total);

	switch (vd) {
	case ZS_NX_OLD_TIMELINE:
		return zs_rpc_fail(call, ZS_ESTATE,
				   "job '%s' is on timeline %llu, not %llu: step %llu's settled norms are of a rolled-back run",
				   r->job, (unsigned long long)j->timeline,
				   (unsigned long long)r->timeline, (unsigned long long)r->step);
	case ZS_NX_NOT_FINITE:
	case ZS_NX_OTHER_NORM:
		return norm_refuse(call, r, vd);
	case ZS_NX_DIVERGED:
		if (!nc) { /* the servers' updates differ */
			zs_error("job '%s' step %llu: server %llu applied the step with total %a, the others with %a",
				 r->job, (unsigned long long)r->step,
				 (unsigned long long)r->server_id, r->settled_total, kept->total);
			return zs_rpc_fail(call, ZS_EINTERNAL,
					   "step %llu's total was %a here, not %a: the servers clipped it differently",
					   (unsigned long long)r->step, kept->total, r->settled_total);
		}
		if (had && before != r->settled_total) {
			*pp = nc->next;
			zs_error("job '%s' step %llu: servers %llu and %llu applied the step with totals %a and %a",
				 r->job, (unsigned long long)r->step,
				 (unsigned long long)nc->x.settled_by, (unsigned long long)r->server_id,
				 before, r->settled_total);
			zs_rpc_fail(call, ZS_EINTERNAL,
				    "another server applied step %llu with another total",
				    (unsigned long long)r->step);
			return coord_norm_fail(nc, ZS_EINTERNAL,
					       "the servers applied the step with different gradient norms");
		}
		break; /* it joined, and the total differs: answered, then failed below */
	default:
		break;
	}
	if (nc)
		zs_info("job '%s' step %llu: server %llu applied the step already (with total %a, answered before this coordinator led or after it forgot): its norms join the exchange",
			r->job, (unsigned long long)r->step, (unsigned long long)r->server_id,
			r->settled_total);
	if (zs_enc_norm_reply(r->settled_total, nc ? nc->x.n_shards : 0, &b)) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode the norm reply");
	} else {
		zs_rpc_reply(call, b.data, b.len);
		zs_buf_release(&b);
	}
	if (vd == ZS_NX_COMPLETE || vd == ZS_NX_DIVERGED)
		norm_complete(c, j, nc, pp, vd, total);
}

void coord_h_report_norm(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	struct zs_norm_report r;
	struct zs_error e = {0};
	struct zs_job *j;
	struct norm_coll *nc, **pp;
	struct norm_wait *g;
	uint32_t *pos = NULL;
	double *v = NULL, total = 0.0;
	enum zs_nx_verdict vd;

	if (zs_dec_norm_report(p, n, &r, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, r.job);
	if (!j)
		goto out;
	if (j->spec.optim.clip_norm <= 0.0) {
		zs_rpc_fail(call, ZS_ESTATE, "job '%s' does not clip gradients", r.job);
		goto out;
	}
	pos = malloc((r.n ? r.n : 1) * sizeof *pos);
	v = malloc((r.n ? r.n : 1) * sizeof *v);
	if (!pos || !v) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	for (pp = &c->nx.colls; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->job, r.job) && (*pp)->step == r.step)
			break;
	nc = *pp;
	if (!norm_places(j, &r, pos, v, call))
		goto out;
	for (uint32_t i = 0; i < r.n; i++)
		zs_debug("job '%s' step %llu: server %llu reports unit %u shard %u: sumsq %a", r.job,
			 (unsigned long long)r.step, (unsigned long long)r.server_id, r.norms[i].unit,
			 r.norms[i].index, r.norms[i].sumsq);
	if (r.settled) {
		norm_settled(c, j, &r, pos, v, nc, pp, call);
		goto out;
	}
	if (!zs_nx_timeline_ok(r.timeline, j->timeline)) {
		/* sent before the job rolled back, landing after: its norms
		 * are not the re-run's (model/normx.c) */
		zs_rpc_fail(call, ZS_ESTATE,
			    "job '%s' is on timeline %llu: step %llu's norms of timeline %llu are of a rolled-back run",
			    r.job, (unsigned long long)j->timeline, (unsigned long long)r.step,
			    (unsigned long long)r.timeline);
		goto out;
	}
	if (norm_answer_kept(c, j, &r, call))
		goto out;
	if (!nc && r.server_id == 0) {
		/* a trainer's question (no server has id 0, no norms): the
		 * total once a server reports; none has yet */
		zs_rpc_fail(call, ZS_EAGAIN, "job '%s' step %llu: no gradient norm reported yet",
			    r.job, (unsigned long long)r.step);
		goto out;
	}
	if (!nc && !(nc = norm_coll_new(c, j, &r))) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	if (nc == c->nx.colls)
		pp = &c->nx.colls;
	if (!(g = realloc(nc->waits, (nc->n_waits + 1) * sizeof *g))) {
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		goto out;
	}
	nc->waits = g;
	vd = zs_nx_report(&nc->x, pos, v, r.n, &total);
	if (vd == ZS_NX_NOT_FINITE || vd == ZS_NX_OTHER_NORM) {
		norm_refuse(call, &r, vd); /* nothing counted: it does not wait */
		if (!nc->n_waits) { /* opened for it alone: gone again */
			*pp = nc->next;
			norm_free(nc);
		}
		goto out;
	}
	g[nc->n_waits++] = (struct norm_wait){call, r.server_id};
	if (vd == ZS_NX_COMPLETE || vd == ZS_NX_DIVERGED)
		norm_complete(c, j, nc, pp, vd, total);
out:
	pthread_mutex_unlock(&c->mu);
	free(pos);
	free(v);
	free(r.norms);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Whether server id owns a primary of j that n has no norm of: the
 * missing servers are listed once per report that came or placement
 * (a heartbeat of each of a thousand servers looks them up); false when
 * out of memory. */
static bool norm_waits_for(const struct zs_job *j, struct norm_coll *n, uint64_t id)
{
	const struct zs_placement *p = &j->placement;

	if (!n->miss || n->miss_have != n->x.n_have || n->miss_epoch != p->epoch) {
		uint64_t *m = realloc(n->miss, (n->x.n_shards ? n->x.n_shards : 1) * sizeof *m);
		uint32_t k = 0;
		if (!m)
			return false;
		n->miss = m;
		for (uint32_t i = 0, g = 0; i < p->n_shards && g < n->x.n_shards; i++) {
			if (p->shards[i].copy)
				continue;
			if (!n->x.have[g])
				m[k++] = p->shards[i].server_id;
			g++;
		}
		qsort(m, k, sizeof *m, cmp_u64);
		n->n_miss = k;
		n->miss_have = n->x.n_have;
		n->miss_epoch = p->epoch;
	}
	return bsearch(&id, n->miss, n->n_miss, sizeof id, cmp_u64) != NULL;
}

/* A step open for less than this is not asked for again: its reports are
 * on their way (a want that crosses the answer costs a needless report). */
#define NORM_WANT_AFTER_MS 250

void coord_norm_wants(struct coord *c, uint64_t id, struct zs_hb_reply *r)
{
	int64_t now = zs_now_ms();

	for (struct norm_coll *n = c->nx.colls; n && r->n_wants < ZS_NORM_WANTS; n = n->next) {
		struct zs_job *j = coord_find_job(c, n->job);
		struct zs_norm_want *w = &r->wants[r->n_wants];
		if (!j || now - n->started_ms < NORM_WANT_AFTER_MS || !norm_waits_for(j, n, id))
			continue;
		snprintf(w->job, sizeof w->job, "%s", n->job);
		w->step = n->step;
		w->timeline = j->timeline;
		r->n_wants++;
	}
}

void coord_norms_fail_job(struct coord *c, const char *job, const char *why)
{
	for (struct norm_coll **pp = &c->nx.colls; *pp;) {
		struct norm_coll *n = *pp;
		char msg[ZS_ERRMSG_MAX];
		if (strcmp(n->job, job)) {
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		zs_fmt(msg, sizeof msg, "job '%s' step %llu: %s", job, (unsigned long long)n->step,
		       why);
		coord_norm_fail(n, ZS_ECANCELED, msg);
	}
}

/* Fails collections older than the bound (caller holds mu). */
void coord_norm_sweep(struct coord *c, int64_t now)
{
	for (struct norm_coll **pp = &c->nx.colls; *pp;) {
		struct norm_coll *n = *pp;
		struct zs_job *j = coord_find_job(c, n->job);
		char missing[256] = "", why[ZS_ERRMSG_MAX];
		if (j && now - n->started_ms < (int64_t)c->nx.timeout_ms) {
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		if (j) {
			norm_missing(j, n, missing, sizeof missing);
			zs_fmt(why, sizeof why,
			       "job '%s' step %llu: no gradient norm from server %s within %u ms",
			       n->job, (unsigned long long)n->step, missing, c->nx.timeout_ms);
		} else {
			zs_fmt(why, sizeof why, "job '%s' step %llu: the job was deleted", n->job,
			       (unsigned long long)n->step);
		}
		zs_warn("%s", why);
		coord_norm_fail(n, j ? ZS_ETIMEDOUT : ZS_ECANCELED, why);
	}
}
