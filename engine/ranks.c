/*
 * ranks.c - which trainer ranks hold data connections to this server: the
 * shell of engine/conns.h's state machine. A HELLO the engine takes and a
 * connection that said one ending (face.c: the target's hello and bye)
 * are its events, under the engine mutex; its notes (a rank whose last
 * connection ended: dropped; one that connected again: back) wait in e->dr
 * for the daemon (engine_take_dropped, sent within 50 ms), which settles
 * each batch: sent, or kept to be sent again.
 */
#include "engine/jobs.h"

/* Notes rank of j (caller holds e->mu); out of memory, the note is lost
 * and the rank's lease still bounds. */
static void note(struct engine *e, const struct ejob *j, uint32_t rank, enum zs_conns_note what,
		 uint64_t reconnects, uint64_t session)
{
	if (what == ZS_CONNS_NONE)
		return;
	zs_debug(what == ZS_CONNS_BACK ? "job '%s': rank %u connected again"
				       : "job '%s': rank %u has no data connection to this server any more",
		 j->name, rank);
	if (!zs_notes_add(&e->dr, j->name, j->incarnation, rank, what == ZS_CONNS_BACK, reconnects,
			  session))
		zs_warn("job '%s': rank %u's connections here: no memory to tell the coordinator (its lease still tells it)",
			j->name, rank);
}

void eng_rank_in(struct engine *e, struct ejob *j, uint32_t rank, uint64_t reconnects,
		 uint64_t session)
{
	enum zs_conns_note what;

	if (rank >= ZS_MAX_WORLD) /* an observer's, a peer's */
		return;
	if (rank >= j->rk.n) { /* the first HELLO, or a resize's new rank */
		uint32_t n = rank < j->spec.world_size ? j->spec.world_size : rank + 1;
		struct zs_conns *g = realloc(j->rk.live, n * sizeof *g);
		if (!g)
			return; /* not counted: never listed (the lease still bounds) */
		memset(g + j->rk.n, 0, (n - j->rk.n) * sizeof *g);
		j->rk.live = g;
		j->rk.n = n;
	}
	what = zs_conns_up(&j->rk.live[rank], reconnects, session, &reconnects, &session);
	note(e, j, rank, what, reconnects, session);
}

void eng_rank_out(struct engine *e, struct ejob *j, uint32_t rank, uint64_t reconnects,
		  uint64_t session)
{
	enum zs_conns_note what;

	if (rank >= j->rk.n)
		return;
	what = zs_conns_down(&j->rk.live[rank], &reconnects, &session);
	if (!atomic_load(&j->removed)) /* a job dropped here: nobody to tell */
		note(e, j, rank, what, reconnects, session);
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
	n = zs_notes_take(&e->dr, out, max);
	pthread_mutex_unlock(&e->mu);
	return n;
}

void engine_dropped_settle(struct engine *e, bool sent)
{
	pthread_mutex_lock(&e->mu);
	zs_notes_settle(&e->dr, sent);
	pthread_mutex_unlock(&e->mu);
}
