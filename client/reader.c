/*
 * reader.c - a weight reader (include/zshard_reader.h): a job opened
 * read-only, a version pinned on every server holding a copy of its shards
 * (engine/pins.c), tensors of it read by name from the primaries, each
 * range checked against the CRC32C its server took (a checkpoint's
 * version: reader_ckpt.c).
 */
#include "client/reader.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/util.h"
#include "client/trainer.h"
#include "ctrl/coord_client.h"
#include "ctrl/token.h"
#include "net/transport.h"

int rd_said(zs_reader *r, enum zs_status st, const struct zs_error *err)
{
	snprintf(r->err, sizeof r->err, "%s", st ? err->msg : "");
	return st;
}

const char *zs_reader_error(const zs_reader *r) { return r ? r->err : "no reader"; }

struct zs_conn *rd_conn_of(zs_reader *r, uint64_t sid)
{
	for (uint32_t i = 0; i < r->n_srv; i++)
		if (r->srv[i].id == sid)
			return r->srv[i].c;
	return NULL;
}

/* The tensor table: bare names, UNIT.NAME for a name two units share. */
static enum zs_status name_tensors(zs_reader *r, struct zs_error *err)
{
	const struct zs_layout *l = &r->job.spec.layout;
	uint32_t n = 0;

	for (uint32_t u = 0; u < l->n_units; u++)
		n += l->units[u].n_tensors;
	if (!(r->t = calloc(n ? n : 1, sizeof *r->t)))
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (uint32_t u = 0; u < l->n_units; u++)
		for (uint32_t k = 0; k < l->units[u].n_tensors; k++) {
			const char *bare = l->units[u].tensors[k].name;
			bool shared = false;
			for (uint32_t v = 0; v < l->n_units && !shared; v++)
				for (uint32_t q = 0; q < l->units[v].n_tensors && !shared; q++)
					shared = (v != u || q != k) &&
						 !strcmp(l->units[v].tensors[q].name, bare);
			struct rtensor *t = &r->t[r->n_t++];
			t->unit = u;
			t->tensor = k;
			if (shared)
				snprintf(t->name, sizeof t->name, "%s.%s", l->units[u].name, bare);
			else
				snprintf(t->name, sizeof t->name, "%s", bare);
		}
	return ZS_OK;
}

/* The tensor name names: its listed name, UNIT.NAME, or an alias. */
const struct rtensor *rd_find(const zs_reader *r, const char *name)
{
	const struct zs_layout *l = &r->job.spec.layout;

	for (uint32_t i = 0; i < r->n_t; i++)
		if (!strcmp(r->t[i].name, name))
			return &r->t[i];
	for (uint32_t i = 0; i < r->n_t; i++) {
		const char *un = l->units[r->t[i].unit].name;
		size_t n = strlen(un);
		if (!strncmp(name, un, n) && name[n] == '.' &&
		    !strcmp(name + n + 1, l->units[r->t[i].unit].tensors[r->t[i].tensor].name))
			return &r->t[i];
	}
	for (uint32_t a = 0; a < l->n_aliases; a++)
		if (!strcmp(l->aliases[a].name, name))
			for (uint32_t i = 0; i < r->n_t; i++)
				if (r->t[i].unit == l->aliases[a].unit &&
				    r->t[i].tensor == l->aliases[a].tensor)
					return &r->t[i];
	return NULL;
}

/* The reader token (derived here from the token when the coordinator
 * handed that: a reader never proves more than it needs). */
static void reader_token(zs_reader *r)
{
	if (r->job.token_reader)
		snprintf(r->rtoken, sizeof r->rtoken, "%s", r->job.token);
	else
		zs_reader_token(r->job.token, r->rtoken);
}

/* Connects to server s: over shm on this host, else over rdma where both
 * ends can and the job does not encrypt its data plane (a trainer's auto:
 * net/transport.c), so that the server sends nothing (the reader takes its
 * pinned copies from its arena); else, or tcp_only, over tcp. */
static enum zs_status dial(zs_reader *r, const struct zs_server_info *s, bool tcp_only,
			   struct zs_conn **c, struct zs_error *err)
{
	struct zs_conn_opts o = {.job = r->job.spec.name, .token = r->rtoken,
				 .incarnation = r->job.incarnation, .rank = ZS_RANK_OBSERVER,
				 .tls = r->job.spec.data_tls, .reader = true,
				 .timeout_ms = r->timeout_ms};
	struct zs_transport_offer offer = {.bits = tcp_only ? ZS_TRANSPORT_TCP : s->transports,
					   .addr = s->data_addr, .local_addr = s->shm_addr};
	struct zs_transport_probe probe = {0};
	uint32_t skip0 = r->job.spec.data_tls ? ZS_TRANSPORT_RDMA : 0;
	const struct zs_transport_ops *ops;
	enum zs_status st = ZS_EUNAVAIL;
	char host[ZS_ADDR_MAX] = "";

	gethostname(host, sizeof host - 1);
	offer.same_host = !strcmp(s->host, host);
	/* one that does not take it (shm to a server in another network
	 * namespace, or of another user: an inference worker's) gives way to
	 * the next, tcp last; a server without the job yet says so */
	for (uint32_t skip = skip0;; skip |= ops->bit) {
		struct zs_error why = {0};
		if (zs_transport_choose("auto", &offer, &probe, skip, &ops, &o.addr, &why))
			return skip == skip0 ? zs_fail(err, why.code, "%s", why.msg) : st;
		st = zs_connect(ops, &o, c, err);
		if (!st || st == ZS_EAGAIN || ops == &zs_tcp_transport)
			return st;
		zs_debug("reader of job '%s': server %llu: %s does not take it (%s), trying the next transport",
			 r->job.spec.name, (unsigned long long)s->id, ops->name, err->msg);
		*err = (struct zs_error){0};
	}
}

/* Connects to every server holding a copy of a shard of the job that has
 * no connection yet; strict: each must connect (at open), else one that
 * does not is left without (a lost server: reads wait for a failover). */
static enum zs_status connect_new(zs_reader *r, const struct zs_server_info *s, uint32_t n_s,
				  bool strict, struct zs_error *err)
{
	enum zs_status st = ZS_OK;
	struct rsrv *v = realloc(r->srv, (r->n_srv + n_s + 1) * sizeof *v);

	if (!v)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	r->srv = v;
	for (uint32_t i = 0; i < n_s && !st; i++) {
		int64_t deadline = zs_now_ms() + r->timeout_ms;
		struct zs_conn *c = NULL;
		bool used = false;
		uint32_t k = 0;
		for (uint32_t u = 0; u < r->job.placement.n_shards; u++)
			used |= r->job.placement.shards[u].server_id == s[i].id;
		if (!used || rd_conn_of(r, s[i].id) || (!strict && !s[i].up))
			continue;
		while (k < r->n_srv && r->srv[k].id != s[i].id)
			k++;
		bool tcp_only = k < r->n_srv && r->srv[k].tcp_only;
		/* a server takes a new placement at its next heartbeat */
		while ((st = dial(r, &s[i], tcp_only, &c, err)) == ZS_EAGAIN &&
		       zs_now_ms() < deadline)
			zs_sleep_ms(50, NULL);
		if (!st) {
			r->srv[k] = (struct rsrv){s[i].id, c, tcp_only};
			r->n_srv += k == r->n_srv;
		} else if (!strict) {
			st = ZS_OK;
		}
	}
	return st;
}

/* After a server was lost: the coordinator's placement now (a failover
 * made copies of its shards primaries, which hold this reader's pin as
 * every copy does) and connections to its servers not connected. */
enum zs_status rd_refresh(zs_reader *r, struct zs_error *err)
{
	struct zs_coord_client *c = NULL;
	struct zs_server_info *s = NULL;
	struct zs_job j = {0};
	uint32_t n_s = 0;
	enum zs_status st = zs_coord_open(r->coord, r->timeout_ms, 0, &c, err);

	if (!st && !(st = zs_coord_get_job_token(c, r->job.spec.name, &j, err)))
		st = zs_coord_servers(c, &s, &n_s, err);
	zs_coord_close(c);
	if (!st && j.incarnation != r->job.incarnation)
		st = zs_fail(err, ZS_ENOTFOUND,
			     "job '%s' was deleted (and created again) while this reader read it",
			     r->job.spec.name);
	if (!st) {
		/* the same incarnation: its layout is the one reads point
		 * into; the placement alone is new */
		zs_placement_release(&r->job.placement);
		r->job.placement = j.placement;
		j.placement = (struct zs_placement){0};
		st = connect_new(r, s, n_s, false, err);
	}
	zs_job_release(&j);
	free(s);
	return st;
}

int zs_reader_open(const char *coordinator, const char *job, int timeout_ms, zs_reader **out,
		   char *errbuf, size_t errlen)
{
	struct zs_error err = {0};
	struct zs_coord_client *c = NULL;
	struct zs_server_info *s = NULL;
	uint32_t n_s = 0;
	zs_reader *r = calloc(1, sizeof *r);
	enum zs_status st;

	*out = NULL;
	if (!r)
		st = zs_fail(&err, ZS_ENOMEM, "out of memory");
	else if (!job || !job[0])
		st = zs_fail(&err, ZS_EINVAL, "a reader opens a job: give its name");
	else if (!(st = tr_launch_coord(coordinator, timeout_ms, &c, &err)) &&
		 !(st = zs_coord_get_job_token(c, job, &r->job, &err)))
		st = zs_coord_servers(c, &s, &n_s, &err);
	if (r && c)
		snprintf(r->coord, sizeof r->coord, "%s", zs_coord_addr(c));
	zs_coord_close(c);
	if (r) {
		r->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
		if (!st) {
			reader_token(r);
			st = name_tensors(r, &err);
		}
		if (!st)
			st = connect_new(r, s, n_s, true, &err);
		if (!st) /* the registry: a reader's own credential */
			st = rd_tree_start(r, &err);
	}
	free(s);
	if (st) {
		zs_reader_close(r);
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "%s", err.msg);
		return st;
	}
	*out = r;
	return ZS_OK;
}

void rd_tcp_only(zs_reader *r, uint64_t sid)
{
	for (uint32_t i = 0; i < r->n_srv; i++)
		if (r->srv[i].id == sid)
			r->srv[i].tcp_only = true;
	rd_lose(r, sid);
}

void rd_lose(zs_reader *r, uint64_t sid)
{
	for (uint32_t i = 0; i < r->n_srv; i++)
		if (r->srv[i].id == sid && r->srv[i].c) {
			zs_conn_close(r->srv[i].c);
			r->srv[i].c = NULL;
		}
}

/* Server i is lost to this reader (rd_lose); its answer is none. */
static void lose(zs_reader *r, uint32_t i, struct zs_pin_ans *ans, uint64_t step)
{
	rd_lose(r, r->srv[i].id);
	ans[i] = (struct zs_pin_ans){.step = step, .lo = UINT64_MAX};
}

/* One PIN of verb at step to every server (only: those only[i] says;
 * NULL: all); ans[i] their answers. On a failure the others' are still
 * waited for; *ok[i]: server i took it. A server whose connection broke is
 * lost (lose), not a failure: a replicated job's reads go on from the
 * copies. */
static enum zs_status pin_all(zs_reader *r, uint64_t step, uint32_t verb, const bool *only,
			      struct zs_pin_ans *ans, bool *ok, struct zs_error *err)
{
	struct zs_req **q = calloc(r->n_srv ? r->n_srv : 1, sizeof *q);
	enum zs_status st = ZS_OK, w;

	if (!q)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < r->n_srv; i++) {
		ok[i] = false;
		if (only && !only[i])
			continue;
		if (!r->srv[i].c) {
			lose(r, i, ans, step);
			continue;
		}
		w = zs_post_pin(r->srv[i].c, step, verb, &ans[i], &q[i], NULL);
		if (w == ZS_EUNAVAIL)
			lose(r, i, ans, step);
		else if (w && !st)
			st = zs_fail(err, w, "cannot ask server %llu for a PIN",
				     (unsigned long long)r->srv[i].id);
	}
	for (uint32_t i = 0; i < r->n_srv; i++) {
		if (!q[i]) {
			ok[i] = !r->srv[i].c && (!only || only[i]);
			continue;
		}
		struct zs_error e = {0};
		w = zs_req_wait(q[i], r->timeout_ms, &e);
		if (w == ZS_EUNAVAIL) { /* broke: lost */
			lose(r, i, ans, step);
			ok[i] = true;
			continue;
		}
		if (w == ZS_EAGAIN) {
			/* the bound passed: the request lives on, into ans[i],
			 * until its connection is closed (the server is lost
			 * to this reader; a failover may bring another) */
			lose(r, i, ans, step);
			w = zs_fail(&e, ZS_ETIMEDOUT, "server %llu did not answer a PIN within %d ms",
				    (unsigned long long)r->srv[i].id, r->timeout_ms);
		}
		ok[i] = w == ZS_OK;
		if (w && !st)
			st = zs_fail(err, w, "%s", e.msg);
	}
	free(q);
	return st;
}

enum zs_status rd_rejoin(zs_reader *r, struct zs_error *err)
{
	for (uint32_t i = 0; i < r->n_srv; i++)
		rd_lose(r, r->srv[i].id);
	if (r->have_pin && !(r->pin & ZS_VERSION_CKPT)) { /* the restore dropped it */
		r->have_pin = false;
		rd_tree_pinned(r, NULL);
	}
	return rd_refresh(r, err);
}

static enum zs_status latest_once(zs_reader *r, uint64_t *step, struct zs_error *err)
{
	struct zs_pin_ans *a = calloc(r->n_srv ? r->n_srv : 1, sizeof *a);
	bool *ok = calloc(r->n_srv ? r->n_srv : 1, sizeof *ok);
	enum zs_status st = !a || !ok ? zs_fail(err, ZS_ENOMEM, "out of memory")
				      : pin_all(r, 0, ZS_PIN_QUERY, NULL, a, ok, err);
	uint64_t lo = UINT64_MAX;

	/* the lowest version over every server (0 before any update) */
	for (uint32_t i = 0; !st && i < r->n_srv; i++)
		lo = a[i].lo < lo ? a[i].lo : lo;
	if (lo == UINT64_MAX)
		lo = 0;
	free(a);
	free(ok);
	if (!st)
		*step = lo;
	return st;
}

/* The latest, asked again on new connections after a rollback. */
static enum zs_status latest(zs_reader *r, uint64_t *step, struct zs_error *err)
{
	enum zs_status st = latest_once(r, step, err);

	if (st == ZS_ERESUME && !(st = rd_rejoin(r, err)))
		st = latest_once(r, step, err);
	return st;
}

int zs_reader_latest(zs_reader *r, unsigned long long *step)
{
	struct zs_error err = {0};
	uint64_t s = 0;
	enum zs_status st = latest(r, &s, &err);

	if (!st)
		*step = s;
	return rd_said(r, st, &err);
}

int zs_reader_wait(zs_reader *r, unsigned long long after, int timeout_ms,
		   unsigned long long *step)
{
	struct zs_error err = {0};
	int64_t deadline = zs_now_ms() + (timeout_ms < 0 ? r->timeout_ms : timeout_ms);
	int pause = 2;
	uint64_t s = 0;
	enum zs_status st;

	/* the servers answer at once: asked again, a little less often each
	 * time (2 ms to 50 ms), until the bound */
	while (!(st = latest(r, &s, &err)) && s <= after) {
		if (zs_now_ms() >= deadline) {
			st = zs_fail(&err, ZS_ETIMEDOUT,
				     "job '%s' finished no step after %llu within %d ms (its latest: %llu)",
				     r->job.spec.name, after, timeout_ms < 0 ? r->timeout_ms : timeout_ms,
				     (unsigned long long)s);
			break;
		}
		zs_sleep_ms(pause, NULL);
		pause = pause < 50 ? pause * 2 : 50;
	}
	if (!st)
		*step = s;
	return rd_said(r, st, &err);
}

/* Releases step on the servers only says (NULL: every one). */
static void release(zs_reader *r, uint64_t step, const bool *only)
{
	struct zs_pin_ans *a = calloc(r->n_srv ? r->n_srv : 1, sizeof *a);
	bool *ok = calloc(r->n_srv ? r->n_srv : 1, sizeof *ok);

	if (a && ok)
		pin_all(r, step, ZS_PIN_RELEASE, only, a, ok, NULL);
	free(a);
	free(ok);
}

void rd_release_step(zs_reader *r, uint64_t step) { release(r, step, NULL); }

/* The version pinned let go: a live step's released on the servers, a
 * checkpoint's state freed (the registry hears of it from the caller). */
static void let_go(zs_reader *r)
{
	if (r->have_pin && (r->pin & ZS_VERSION_CKPT))
		rd_ckpt_free(&r->ck);
	else if (r->have_pin)
		release(r, r->pin, NULL);
	r->have_pin = false;
}

/* Holds step on every server, or on none (those that took it let go);
 * *run: the run the servers stamped their pins with (engine/pins.c; 0:
 * none said). Pins of two runs (a restore under way on some servers) are
 * let go: ZS_ERESUME, the caller rejoins and pins again. */
static enum zs_status hold(zs_reader *r, uint64_t step, uint64_t *run, struct zs_error *err)
{
	struct zs_pin_ans *a = calloc(r->n_srv ? r->n_srv : 1, sizeof *a);
	bool *ok = calloc(r->n_srv ? r->n_srv : 1, sizeof *ok);
	enum zs_status st = !a || !ok ? zs_fail(err, ZS_ENOMEM, "out of memory")
				      : pin_all(r, step, ZS_PIN_HOLD, NULL, a, ok, err);

	*run = 0;
	for (uint32_t i = 0; !st && i < r->n_srv; i++) {
		if (!ok[i] || !a[i].timeline)
			continue;
		if (*run && a[i].timeline != *run)
			st = zs_fail(err, ZS_ERESUME,
				     "the servers hold step %llu of two runs (%llu and %llu): a rollback is under way",
				     (unsigned long long)step, (unsigned long long)*run,
				     (unsigned long long)a[i].timeline);
		*run = a[i].timeline;
	}

	if (st && ok)
		release(r, step, ok);
	free(a);
	free(ok);
	return st;
}

int zs_reader_pin(zs_reader *r, unsigned long long step, unsigned long long *pinned)
{
	struct zs_error err = {0};
	enum zs_status st = ZS_OK;
	uint64_t t = step, run = 0;

	if (step != ZS_READER_LATEST && (step & ZS_VERSION_CKPT))
		return rd_said(r, zs_fail(&err, ZS_EINVAL, "%llu is not a step", step), &err);
	/* the latest: asked, then held; a server that moved two steps on
	 * meanwhile (ZS_ESTATE: gone) is asked again, a few times, and so is
	 * a step another reader is pinning at the same moment */
	for (int tries = 0; tries < 8; tries++) {
		if (step == ZS_READER_LATEST && (st = latest(r, &t, &err)))
			break;
		if (r->have_pin && r->pin == t)
			break; /* held already */
		st = hold(r, t, &run, &err);
		if (st == ZS_ERESUME && !(st = rd_rejoin(r, &err)))
			continue; /* rolled back: the version then, on new connections */
		if (st != ZS_ESTATE)
			break;
		/* moved on (the latest: ask again), or another reader's PIN
		 * of the step is taking its copies: a moment, then again */
		zs_sleep_ms(1 << tries, NULL);
	}
	if (st == ZS_ESTATE) /* gone, or no parameters yet: try again */
		st = ZS_EAGAIN;
	if (!st && (!r->have_pin || r->pin != t)) {
		let_go(r);
		r->have_pin = true;
		r->pin = t;
		r->pin_run = run;
		/* its parent for it (a coordinator away: the servers) */
		rd_tree_pinned(r, NULL);
	}
	if (!st && pinned)
		*pinned = t;
	return rd_said(r, st, &err);
}

int zs_reader_release(zs_reader *r)
{
	struct zs_error err = {0};

	if (!r->have_pin)
		return rd_said(r, zs_fail(&err, ZS_ESTATE, "no version is pinned"), &err);
	let_go(r);
	rd_tree_pinned(r, NULL);
	return rd_said(r, ZS_OK, &err);
}

void zs_reader_close(zs_reader *r)
{
	if (!r)
		return;
	rd_tree_stop(r);
	let_go(r);
	for (uint32_t i = 0; i < r->n_srv; i++)
		if (r->srv[i].c)
			zs_conn_close(r->srv[i].c);
	free(r->srv);
	free(r->t);
	zs_job_release(&r->job);
	free(r);
}

unsigned zs_reader_tensors(const zs_reader *r) { return r ? r->n_t : 0; }

int zs_reader_find(const zs_reader *r, const char *name, unsigned *i)
{
	const struct rtensor *t = r && name ? rd_find(r, name) : NULL;

	if (!t)
		return ZS_ENOTFOUND;
	*i = (unsigned)(t - r->t);
	return ZS_OK;
}

int zs_reader_tensor(const zs_reader *r, unsigned i, const char **name, int *dtype,
		     unsigned *ndim, unsigned long long *shape, unsigned cap,
		     unsigned long long *numel)
{
	if (!r || i >= r->n_t)
		return ZS_EINVAL;
	const struct zs_unit *u = &r->job.spec.layout.units[r->t[i].unit];
	const struct zs_tensor *te = &u->tensors[r->t[i].tensor];
	if (name)
		*name = r->t[i].name;
	if (dtype)
		*dtype = (int)u->dtype;
	if (ndim)
		*ndim = te->ndim;
	for (unsigned d = 0; shape && d < te->ndim && d < cap; d++)
		shape[d] = te->shape[d];
	if (numel)
		*numel = te->numel;
	return ZS_OK;
}

