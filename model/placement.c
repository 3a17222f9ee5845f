/* placement.c - striping with alignment and capacity (see placement.h). */
#include "model/placement.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static int cmp_id(const void *a, const void *b)
{
	const struct place_server *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

static uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint64_t place_bytes_on(const struct zs_job_spec *spec,
			const struct zs_placement *p, uint64_t server_id)
{
	uint64_t b = 0;

	for (uint32_t i = 0; i < p->n_shards; i++) {
		const struct zs_shard *s = &p->shards[i];
		if (s->server_id == server_id && s->unit < spec->layout.n_units)
			b += zs_shard_state_bytes(spec, s);
	}
	return b;
}

/*
 * A collective job with rank_hosts: rank r's slices on a server of host
 * rank_hosts[r], the ranks of one host spread over its servers in rank
 * order. ZS_ENOSPC naming the host when none of its servers is live.
 */
static enum zs_status ranks_on_hosts(const struct zs_job_spec *spec,
				     const struct place_server *sv, size_t n, size_t **out,
				     struct zs_error *err)
{
	size_t *k = calloc(spec->world_size, sizeof *k);
	if (!k)
		return zs_fail(err, ZS_ENOMEM, "out of memory placing a job");
	for (uint32_t r = 0; r < spec->world_size; r++) {
		size_t on_host = 0, before = 0;
		for (size_t i = 0; i < n; i++)
			on_host += sv[i].host && !strcmp(sv[i].host, spec->rank_hosts[r]);
		if (!on_host) {
			free(k);
			return zs_fail(err, ZS_ENOSPC,
				       "job '%s': rank %u runs on host '%s', which has no live shard server for its slices",
				       spec->name, r, spec->rank_hosts[r]);
		}
		for (uint32_t q = 0; q < r; q++)
			before += !strcmp(spec->rank_hosts[q], spec->rank_hosts[r]);
		before %= on_host;
		for (size_t i = 0; i < n; i++)
			if (sv[i].host && !strcmp(sv[i].host, spec->rank_hosts[r]) && before-- == 0) {
				k[r] = i;
				break;
			}
	}
	*out = k;
	return ZS_OK;
}

/* Whether servers a and b may hold two copies of one shard: not the same
 * server, and not the same host when hosts must differ. */
static bool apart(const struct place_server *a, const struct place_server *b, bool hosts)
{
	if (a->id == b->id)
		return false;
	return !hosts || !a->host || !b->host || strcmp(a->host, b->host);
}

/* Distinct hosts among sv (a server whose host is unknown counts as its own). */
static size_t n_hosts(const struct place_server *sv, size_t n)
{
	size_t h = 0;
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t k = 0; k < i && !seen && sv[i].host; k++)
			seen = sv[k].host && !strcmp(sv[k].host, sv[i].host);
		h += !seen;
	}
	return h;
}

/*
 * The servers of copies 1..K-1 of a shard whose primary is at position k:
 * the next ones after k in the rotation that are apart from every copy
 * chosen so far (on other hosts where there are K hosts, else on other
 * servers). Fills at[0..K) with positions (at[0] = k).
 */
static void pick_copies(const struct place_server *sv, size_t n, size_t k, uint32_t K,
			bool hosts, size_t *at)
{
	uint32_t got = 1;

	at[0] = k;
	for (size_t step = 1; step < n && got < K; step++) {
		size_t c = (k + step) % n;
		bool ok = true;
		for (uint32_t q = 0; q < got && ok; q++)
			ok = apart(&sv[at[q]], &sv[c], hosts);
		if (ok)
			at[got++] = c;
	}
}

/* The end of the run of tensors starting at element r0 of u that are all
 * frozen or all trained. */
static uint64_t run_end(const struct zs_unit *u, uint64_t r0)
{
	int want = -1;

	for (uint32_t i = 0; i < u->n_tensors; i++) {
		const struct zs_tensor *t = &u->tensors[i];
		if (t->offset + t->numel <= r0)
			continue;
		if (want < 0)
			want = t->frozen;
		else if (t->frozen != (bool)want)
			return t->offset;
	}
	return u->numel;
}

/* a unit is spread over at least this many servers (all of them when
 * fewer), and over one more per this many bytes */
#define PLACE_SPLIT_MIN 8
#define PLACE_SHARD_TARGET (4ull << 20)

/* The shards placed so far, growing. */
struct shard_list {
	struct zs_shard *sh;
	size_t n, cap;
};

/* Where a job's shards may go: servers sv (sorted by id), K copies of
 * each on as many servers (on as many hosts when there are, hosts), a
 * collective job's rank r's slices on rank_srv[r] when its hosts are
 * named. */
struct place_where {
	const struct place_server *sv;
	size_t n;
	uint32_t K;
	bool hosts;
	const size_t *rank_srv;
};

/* Unit u's shards added to L, and what each server is charged for them to
 * charge: each run of frozen or of trained tensors striped on its own; a
 * collective job's slices one per rank. */
static enum zs_status place_unit(const struct zs_job_spec *spec, uint32_t u,
				 const struct place_where *w, struct shard_list *L,
				 uint64_t *charge, struct zs_error *err)
{
	const struct place_server *sv = w->sv;
	const size_t n = w->n;
	const uint32_t K = w->K;
	const struct zs_unit *un = &spec->layout.units[u];
	unsigned dsz = zs_dtype_size(un->dtype ? un->dtype : spec->compute_dtype);
	uint64_t align = spec->align_bytes / dsz ? spec->align_bytes / dsz : 1;
	uint64_t parts = (un->numel * dsz + PLACE_SHARD_TARGET - 1) / PLACE_SHARD_TARGET;
	uint32_t i = 0; /* the unit's next shard index */

	if (parts < PLACE_SPLIT_MIN)
		parts = PLACE_SPLIT_MIN;
	if (parts > n)
		parts = n;
	/* each run of frozen or of trained tensors striped on its own
	 * (one run, the whole unit, without frozen tensors), so that no
	 * shard mixes them: a frozen shard takes no gradient */
	for (uint64_t r0 = 0, r1; r0 < un->numel; r0 = r1) {
		uint64_t rn, chunk;
		r1 = spec->collective ? un->numel : run_end(un, r0);
		rn = r1 - r0;
		/* a collective job: a slice per rank, rank r's on one
		 * server. A run gets the unit's parts in proportion */
		if (spec->collective)
			chunk = zs_slice_len(un->numel, spec->world_size);
		else if (rn == un->numel)
			chunk = round_up((rn + parts - 1) / parts, align);
		else {
			uint64_t p = (parts * rn + un->numel - 1) / un->numel;
			chunk = round_up((rn + p - 1) / p, align);
		}
		for (uint64_t off = r0; off < r1; off += chunk, i++) {
			uint64_t len = r1 - off < chunk ? r1 - off : chunk;
			size_t k = w->rank_srv ? w->rank_srv[i] : spec->collective ? i % n : (u + i) % n;
			size_t at[ZS_MAX_REPLICAS];

			pick_copies(sv, n, k, K, w->hosts, at);
			if (L->n + K > L->cap) {
				size_t nc = L->cap ? L->cap * 2 : 64;
				struct zs_shard *g = realloc(L->sh, nc * sizeof *g);
				if (!g)
					return zs_fail(err, ZS_ENOMEM, "out of memory placing a job");
				L->sh = g;
				L->cap = nc;
			}
			for (uint32_t c = 0; c < K; c++) {
				L->sh[L->n] = (struct zs_shard){
					.unit = u, .index = i, .server_id = sv[at[c]].id,
					.offset = off, .length = len,
					.padded = round_up(len, align),
					.copy = c, .copies = K > 1 ? K : 0,
				};
				charge[at[c]] += zs_shard_state_bytes(spec, &L->sh[L->n]);
				L->n++;
			}
		}
	}
	return ZS_OK;
}

/* Whether every server has room for what it was charged. */
static enum zs_status check_charge(const struct zs_job_spec *spec,
				   const struct place_server *sv, size_t n,
				   const uint64_t *charge, struct zs_error *err)
{
	for (size_t k = 0; k < n; k++) {
		char need[32], have[32];
		if (charge[k] <= sv[k].free_bytes)
			continue;
		return zs_fail(err, ZS_ENOSPC,
			       "server %llu%s%s%s cannot hold its share of job '%s': needs %s, has %s free",
			       (unsigned long long)sv[k].id, sv[k].addr ? " (" : "",
			       sv[k].addr ? sv[k].addr : "", sv[k].addr ? ")" : "",
			       spec->name, zs_fmt_bytes(charge[k], need, sizeof need),
			       zs_fmt_bytes(sv[k].free_bytes, have, sizeof have));
	}
	return ZS_OK;
}

enum zs_status place_job(const struct zs_job_spec *spec,
			 const struct place_server *servers, size_t n,
			 const struct zs_placement *prev,
			 struct zs_placement *out, struct zs_error *err)
{
	struct place_server *sv = NULL;
	uint64_t *charge = NULL;
	struct shard_list L = {0};
	size_t *rank_srv = NULL; /* a collective job's rank -> server, by host */
	enum zs_status st = ZS_OK;

	memset(out, 0, sizeof *out);
	if (n == 0)
		return zs_fail(err, ZS_ESTATE,
			       "no live shard server to place job '%s' on",
			       spec->name);
	sv = malloc(n * sizeof *sv);
	charge = calloc(n, sizeof *charge);
	if (!sv || !charge) {
		st = zs_fail(err, ZS_ENOMEM, "out of memory placing a job");
		goto clean;
	}
	memcpy(sv, servers, n * sizeof *sv);
	qsort(sv, n, sizeof *sv, cmp_id);
	uint32_t K = spec->replicas ? spec->replicas : 1;
	bool hosts = n_hosts(sv, n) >= K;
	if (K > n) {
		st = zs_fail(err, ZS_ENOSPC,
			     "job '%s' keeps %u copies of each shard, each on another server: %zu live server%s",
			     spec->name, K, n, n == 1 ? "" : "s");
		goto clean;
	}
	if (spec->collective && spec->n_rank_hosts &&
	    (st = ranks_on_hosts(spec, sv, n, &rank_srv, err)))
		goto clean;

	for (uint32_t u = 0; u < spec->layout.n_units && !st; u++)
		st = place_unit(spec, u, &(struct place_where){sv, n, K, hosts, rank_srv}, &L,
				charge, err);
	if (st || (st = check_charge(spec, sv, n, charge, err)))
		goto clean;
	out->shards = L.sh;
	out->n_shards = (uint32_t)L.n;
	L.sh = NULL;
	if (!prev)
		out->epoch = 1;
	else if (prev->n_shards == out->n_shards &&
		 !memcmp(prev->shards, out->shards,
			 out->n_shards * sizeof *out->shards))
		out->epoch = prev->epoch;
	else
		out->epoch = prev->epoch + 1;
clean:
	free(rank_srv);
	free(L.sh);
	free(charge);
	free(sv);
	return st;
}
