/*
 * redo.c - a lost trainer costs one step, not a rollback: each rank says,
 * at every step boundary, the step it begins and its state then (its RNG
 * and data position: zs_set_step_state), which the coordinator keeps in
 * memory, the latest per rank. When a rank is gone (its data connections
 * ended and it went silent: recovery.c's sweep), the job does not roll
 * back: the rank is freed, marked lost in the step it had begun, and the
 * process that takes it next (a supervisor's restart) is told, at its
 * resume, to redo that step from that state. The servers keep what it
 * needs (engine/redo.c); the other ranks wait at their next gather.
 *
 * What the coordinator cannot be sure of rolls back as before: a rank
 * whose step it does not know (a coordinator restarted or taken over
 * since), a collective job (its ranks reduce among themselves), a job being
 * restored or stopping, a stopped job's rank that had not begun a step of
 * the run continuing it, and a rank that only missed its lease (a
 * stopped process or a partition: alive, it could push again; the
 * rollback's new timeline fences it).
 */
#include "coord/recovery.h"

#include "model/redo.h"

/* A job's ranks' step states. */
struct rsteps {
	char job[ZS_JOB_NAME_MAX];
	uint64_t incarnation;
	uint32_t n; /* ranks held (the job's largest world) */
	struct rstep {
		struct zs_rstep d; /* decided by model/redo.c; s is of step d.step */
		int64_t lost_ms;   /* lost since when (a warning's: since it) */
		struct zs_step_state s;
	} *r;
	struct rsteps *next;
};

static struct rsteps *find(struct coord *c, const struct zs_job *j)
{
	for (struct rsteps *x = c->rsteps; x; x = x->next)
		if (!strcmp(x->job, j->spec.name) && x->incarnation == j->incarnation)
			return x;
	return NULL;
}

void coord_steps_forget(struct coord *c, const char *job)
{
	for (struct rsteps **pp = &c->rsteps; *pp;) {
		struct rsteps *x = *pp;
		if (job && strcmp(x->job, job)) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		for (uint32_t r = 0; r < x->n; r++)
			free(x->r[r].s.data);
		free(x->r);
		free(x);
	}
}

void coord_step_begun(struct coord *c, const struct zs_job *j, uint32_t rank,
		      struct zs_step_state *s)
{
	struct rsteps *x = find(c, j);
	struct rstep *r;

	if (!x) {
		coord_steps_forget(c, j->spec.name); /* another incarnation's */
		if (!(x = calloc(1, sizeof *x)))
			return; /* not kept: a loss of the rank rolls back */
		snprintf(x->job, sizeof x->job, "%s", j->spec.name);
		x->incarnation = j->incarnation;
		x->next = c->rsteps;
		c->rsteps = x;
	}
	if (rank >= x->n) { /* the first report, or a resize's new ranks */
		uint32_t n = zs_world_max(&j->spec, &j->worlds);
		struct rstep *g = rank < n ? realloc(x->r, n * sizeof *g) : NULL;
		if (!g)
			return; /* not kept: a loss of the rank rolls back */
		memset(g + x->n, 0, (n - x->n) * sizeof *g);
		x->r = g;
		x->n = n;
	}
	r = &x->r[rank];
	{
		const bool was_lost = r->d.lost;
		const uint64_t redoes = r->d.step;
		if (!zs_rstep_begun(&r->d, s->step)) {
			/* a replacement's boundary before the step it redoes (it
			 * cannot be: it begins there); the lost mark stays */
			free(s->data);
			s->data = NULL;
			return;
		}
		if (was_lost)
			zs_info("job '%s': rank %u's replacement began step %llu (it redoes step %llu)",
				j->spec.name, rank, (unsigned long long)s->step,
				(unsigned long long)redoes);
	}
	free(r->s.data);
	r->s = *s;
	*s = (struct zs_step_state){0};
}

bool coord_redo_of(struct coord *c, const struct zs_job *j, uint32_t rank,
		   struct zs_step_state *out)
{
	struct rsteps *x = find(c, j);
	struct rstep *r = x && rank < x->n ? &x->r[rank] : NULL;

	if (!r || !r->d.lost)
		return false;
	*out = r->s; /* borrowed: encoded under c->mu */
	return true;
}

bool coord_rank_lost(struct coord *c, const struct zs_job *j, uint32_t rank, const char *why)
{
	struct rsteps *x = find(c, j);
	struct rstep *r = x && rank < x->n ? &x->r[rank] : NULL;
	const struct zs_redo_job f = {.collective = j->spec.collective,
				      .settling = j->restore_pending || j->leaving_step ||
						  j->stop_before,
				      .stopped_step = j->stopped_step};
	const char *no = zs_rstep_lose(r ? &r->d : NULL, &f);

	if (no) {
		zs_info("job '%s': %s; no replacement can redo its step: %s", j->spec.name, why, no);
		return false;
	}
	r->lost_ms = zs_now_ms();
	zs_warn("job '%s': %s: its replacement redoes step %llu, the other ranks wait (no rollback)",
		j->spec.name, why, (unsigned long long)r->d.step);
	return true;
}

bool coord_rank_left_world(struct coord *c, const struct zs_job *j, uint32_t rank)
{
	struct rsteps *x = find(c, j);
	struct rstep *r = x && rank < x->n ? &x->r[rank] : NULL;

	return r && r->d.known && !r->d.lost &&
	       rank >= zs_world_at(&j->spec, &j->worlds, r->d.step + 1);
}

uint32_t coord_ranks_away(struct coord *c, const struct zs_job *j, int64_t now, int64_t bound,
			  uint32_t *out, uint32_t max)
{
	struct rsteps *x = find(c, j);
	uint32_t n = 0;

	for (uint32_t r = 0; x && r < x->n && n < max; r++) {
		bool held = false;
		if (!x->r[r].d.lost || now - x->r[r].lost_ms < bound)
			continue;
		for (uint32_t i = 0; i < j->n_trainers && !held; i++)
			held = j->trainers[i].rank == r; /* its replacement is in */
		if (!held)
			out[n++] = r;
	}
	return n;
}

void coord_rank_away_again(struct coord *c, const struct zs_job *j, uint32_t rank, int64_t now)
{
	struct rsteps *x = find(c, j);

	if (x && rank < x->n)
		x->r[rank].lost_ms = now;
}
