/*
 * ranks.c - which trainer ranks hold data connections to this server: a
 * count per rank of each job, up at a HELLO the engine takes, down as such
 * a connection ends (face.c: the target's hello and bye). A rank whose last
 * connection ended is listed for the coordinator (engine_take_dropped,
 * sent by the daemon at once), which takes a rank that has also stopped
 * renewing its lease for gone in seconds, not at the lease's end. A rank
 * that reconnects (a resume, a failover) is counted again; one that still
 * renews is never taken for gone by this.
 */
#include "engine/engine_int.h"

void eng_rank_in(struct ejob *j, uint32_t rank)
{
	if (rank >= ZS_MAX_WORLD) /* an observer's, a peer's */
		return;
	if (rank >= j->rk.n) { /* the first HELLO, or a resize's new rank */
		uint32_t n = rank < j->spec.world_size ? j->spec.world_size : rank + 1;
		uint32_t *g = realloc(j->rk.live, n * sizeof *g);
		if (!g)
			return; /* not counted: never listed (the lease still bounds) */
		memset(g + j->rk.n, 0, (n - j->rk.n) * sizeof *g);
		j->rk.live = g;
		j->rk.n = n;
	}
	if (rank < j->rk.n)
		j->rk.live[rank]++;
}

/* Lists rank of j as dropped, once (caller holds e->mu). */
static void listed(struct engine *e, const struct ejob *j, uint32_t rank)
{
	struct zs_dropped *g;

	for (uint32_t i = 0; i < e->dr.n; i++)
		if (e->dr.v[i].rank == rank && e->dr.v[i].incarnation == j->incarnation &&
		    !strcmp(e->dr.v[i].job, j->name))
			return;
	if (e->dr.n == e->dr.cap) {
		uint32_t cap = e->dr.cap ? 2 * e->dr.cap : 16;
		if (!(g = realloc(e->dr.v, cap * sizeof *g)))
			return; /* out of memory: the lease still bounds */
		e->dr.v = g;
		e->dr.cap = cap;
	}
	g = &e->dr.v[e->dr.n++];
	snprintf(g->job, sizeof g->job, "%s", j->name);
	g->incarnation = j->incarnation;
	g->rank = rank;
}

void eng_rank_out(struct engine *e, struct ejob *j, uint32_t rank)
{
	if (rank < j->rk.n && j->rk.live[rank] && !--j->rk.live[rank] &&
	    !atomic_load(&j->removed)) {
		zs_debug("job '%s': rank %u has no data connection to this server any more",
			 j->name, rank);
		listed(e, j, rank);
	}
}

void eng_ranks_free(struct ejob *j)
{
	free(j->rk.live);
	j->rk.live = NULL;
	j->rk.n = 0;
}

uint32_t engine_take_dropped(struct engine *e, struct zs_dropped *out, uint32_t max)
{
	uint32_t n;

	pthread_mutex_lock(&e->mu);
	n = zs_take_front(e->dr.v, &e->dr.n, sizeof *out, out, max);
	pthread_mutex_unlock(&e->mu);
	return n;
}
