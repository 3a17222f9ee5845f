/*
 * capture.c - a checkpoint's shards captured as each reaches the
 * checkpoint's step (training goes on), and the finished snapshots handed
 * to their writer outside the locks (the requests and restores:
 * snapshot.c).
 */
#include "engine/jobs.h"
#include "engine/step.h"
#include "engine/store.h"

/* Gives sn the arrays of shard s (master, and the optimizer state it has),
 * zeroed if zero, at step; false when out of memory (what was allocated
 * stays in sn for engine_snaps_free). */
static float *snap_array(size_t n, bool zero)
{
	n = n ? n : 1;
	return zero ? calloc(n, 4) : malloc(n * 4);
}

bool eng_snap_alloc(const struct eshard *s, uint64_t step, bool zero, struct engine_snap *sn)
{
	size_t n = s->sh.length;

	*sn = (struct engine_snap){s->sh.unit, s->sh.index, s->sh.offset, n, step,
				   snap_array(n, zero),
				   s->n_arrays > 1 ? snap_array(n, zero) : NULL,
				   s->n_arrays > 2 ? snap_array(n, zero) : NULL};
	return sn->master && (s->n_arrays < 2 || sn->s0) && (s->n_arrays < 3 || sn->s1);
}

/* Copies shard s's state as it is now into sn (caller holds s->mu). */
enum zs_status eng_snap_read(struct ejob *j, struct eshard *s, struct engine_snap *sn,
				struct zs_error *err)
{
	if (!eng_snap_alloc(s, s->version, false, sn))
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	if (eng_arrays_io(j->e, s, false, sn->master, sn->s0, sn->s1))
		return zs_fail(err, ZS_EIO, "cannot read unit '%s' from %s",
			       eng_unit_name(j, s->sh.unit), s->tier.path);
	return ZS_OK;
}

/* Copies shard s into snapshot p (caller holds s->mu and j->cmu). */
static bool capture(struct ejob *j, struct eshard *s, struct epending *p)
{
	size_t k = (size_t)s->idx;

	if (eng_snap_read(j, s, &p->snaps[k], NULL))
		return false;
	p->got[k] = true;
	p->n_got++;
	return true;
}

/* Moves j's snapshots that have every shard they wait for to *done, to
 * hand over outside the locks (caller holds j->cmu). */
void eng_take_whole(struct ejob *j, struct epending **done)
{
	for (struct epending **pp = &j->pend; *pp;) {
		struct epending *p = *pp;
		if (p->n_got == p->want) {
			*pp = p->next;
			p->next = *done;
			*done = p;
			continue;
		}
		pp = &p->next;
	}
}

/* After s reached a new version: capture it for snapshots of that step. */
void eng_capture_due(struct ejob *j, struct eshard *s, struct epending **done)
{
	size_t k = (size_t)s->idx;

	pthread_mutex_lock(&j->cmu);
	for (struct epending *p = j->pend; p; p = p->next)
		if (p->step == s->version && k < p->n_shards && !p->got[k] && !capture(j, s, p))
			zs_error("out of memory capturing a snapshot of job '%s'", j->name);
	eng_take_whole(j, done);
	pthread_mutex_unlock(&j->cmu);
}

void eng_capture_skip(struct ejob *j, struct eshard *s, struct epending **done)
{
	size_t k = (size_t)s->idx;

	pthread_mutex_lock(&j->cmu);
	for (struct epending *p = j->pend; p; p = p->next)
		if (k < p->n_shards && !p->got[k]) {
			p->got[k] = true; /* not waited for any more */
			p->want--;
		}
	eng_take_whole(j, done);
	pthread_mutex_unlock(&j->cmu);
}

/* Hands completed snapshots to their callbacks (no locks held). */
void eng_deliver(struct epending *done)
{
	while (done) {
		struct epending *p = done;
		uint32_t n = 0;
		done = p->next;
		/* the shards' snapshots, in shard order, first (a copy left
		 * out has none) */
		for (uint32_t k = 0; k < p->n_shards; k++)
			if (p->got[k] && p->snaps[k].master) {
				struct engine_snap t = p->snaps[k];
				p->snaps[k] = (struct engine_snap){0};
				p->snaps[n++] = t;
			}
		p->done(p->ctx, p->job, p->id, p->step, p->snaps, n, ZS_OK, NULL);
		free(p->got);
		free(p);
	}
}
