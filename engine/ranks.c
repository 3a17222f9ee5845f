/*
 * ranks.c - which trainer ranks hold data connections to this server: a
 * count per rank of each job, up at a HELLO the engine takes, down as such
 * a connection ends (face.c: the target's hello and bye). A rank whose last
 * connection ended is listed for the coordinator (engine_take_dropped,
 * sent by the daemon within 50 ms), which takes a rank that has also
 * stopped renewing its lease for gone in seconds, not at the lease's end.
 *
 * A live process closes its connections too: a resume or a failover
 * reconnects. So a rank listed as dropped that connects again is listed as
 * back (the coordinator forgets the drop: a process that connects is
 * alive, and one stopped right after its reconnect, a SIGSTOP, a long
 * compile, swap, was taken for gone before its next renewal could say so);
 * a drop and a back not yet sent cancel out. A rank that still renews is
 * never taken for gone by this either.
 */
#include "engine/engine_int.h"

/* Lists rank of j as dropped or back (caller holds e->mu): a listing of
 * the other kind not yet taken is withdrawn instead (they cancel), one of
 * the same kind is kept once. */
static void note(struct engine *e, const struct ejob *j, uint32_t rank, bool back)
{
	struct zs_dropped *g;

	for (uint32_t i = 0; i < e->dr.n; i++)
		if (e->dr.v[i].rank == rank && e->dr.v[i].incarnation == j->incarnation &&
		    !strcmp(e->dr.v[i].job, j->name)) {
			if (e->dr.v[i].back != back) { /* cancel: withdraw it */
				memmove(&e->dr.v[i], &e->dr.v[i + 1],
					(e->dr.n - i - 1) * sizeof *e->dr.v);
				e->dr.n--;
			}
			return;
		}
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
	g->back = back;
}

void eng_rank_in(struct engine *e, struct ejob *j, uint32_t rank)
{
	if (rank >= ZS_MAX_WORLD) /* an observer's, a peer's */
		return;
	if (rank >= j->rk.n) { /* the first HELLO, or a resize's new rank */
		uint32_t n = rank < j->spec.world_size ? j->spec.world_size : rank + 1;
		struct eng_rank *g = realloc(j->rk.live, n * sizeof *g);
		if (!g)
			return; /* not counted: never listed (the lease still bounds) */
		memset(g + j->rk.n, 0, (n - j->rk.n) * sizeof *g);
		j->rk.live = g;
		j->rk.n = n;
	}
	if (!j->rk.live[rank].conns++ && j->rk.live[rank].dropped) {
		j->rk.live[rank].dropped = false;
		zs_debug("job '%s': rank %u connected again", j->name, rank);
		note(e, j, rank, true);
	}
}

void eng_rank_out(struct engine *e, struct ejob *j, uint32_t rank)
{
	if (rank < j->rk.n && j->rk.live[rank].conns && !--j->rk.live[rank].conns &&
	    !atomic_load(&j->removed)) {
		zs_debug(
		    "job '%s': rank %u has no data connection to this server any more",
		    j->name, rank);
		j->rk.live[rank].dropped = true;
		note(e, j, rank, false);
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
