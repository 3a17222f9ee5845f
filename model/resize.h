/*
 * resize.h - a job's world size changed at a step boundary: zshardctl job
 * resize, and rank_lost: shrink. The coordinator's decisions as pure
 * functions: no clock, no lock, no I/O; coord/resize.c is their shell (the
 * RPC, the mutex, the catalog, the rollback a shrink leads to).
 *
 * The step a resize names is four past the latest step report (a stop's
 * is three): no rank can have begun it, and the answer to a report posted
 * at the step before names it, so each rank knows the world of that step
 * as the one before ends, before its data. With no rank in, the change
 * is where the job resumes. One named and not yet reached stays (any rank
 * may have its answer): asked again, the same world is no change, another
 * waits until that step has run.
 */
#ifndef ZS_MODEL_RESIZE_H
#define ZS_MODEL_RESIZE_H

#include <stdbool.h>
#include <stdint.h>

/* What a resize is asked of, as the coordinator holds the job. */
struct zs_rs_in {
	uint32_t want;       /* the world size asked */
	uint32_t last;       /* the job's world from its last change on */
	bool collective;     /* its ranks reduce among themselves: no resize */
	bool restoring;      /* a restore under way */
	bool stopping;       /* a stop named */
	uint32_t n_trainers; /* ranks in */
	bool have_top;       /* a step reported through the step driver */
	uint64_t top;        /* the latest one */
	uint64_t resume_step; /* no rank in: where the job resumes */
	bool named;          /* the job has a world change */
	uint64_t named_step; /* the newest one's step */
};

enum zs_rs_act {
	ZS_RS_ADD,        /* a change to want from *at on */
	ZS_RS_SAME,       /* nothing changes (want is the world, or is named already) */
	ZS_RS_BAD_WORLD,  /* want out of 1..ZS_MAX_WORLD */
	ZS_RS_COLLECTIVE, /* a collective job: restore into a job of another size */
	ZS_RS_BUSY,       /* restoring or stopping: once that is done */
	ZS_RS_NO_REPORT,  /* ranks in, none has finished a step yet: in a moment */
	ZS_RS_PENDING,    /* another change named and not run yet (at *at) */
};

enum zs_rs_act zs_resize_decide(const struct zs_rs_in *in, uint64_t *at);

/*
 * zshardctl job stop: the step every rank leaves before. Three past the
 * latest report (top): no rank has begun it. With a world change named
 * and not yet run (at named_step > top), two past that step: a grow's new
 * ranks begin at the change's step as soon as they join, before the ranks
 * in reach it, and the report they post there says no step finished, so
 * the answer they take at the step after may be older than the stop. A
 * stop before either left them in a step the others never ran
 * (sim/bounds.c found both).
 */
uint64_t zs_stop_step(uint64_t top, bool named, uint64_t named_step);

/*
 * rank_lost: shrink. The world w without the ranks away (away[], any
 * order, those at or above w not counted): the ranks in at or above the
 * new world take, in rank order, the numbers of those away below it, so
 * the world's ranks are 0..N-1 again. ranks[] (n, in rank order) is
 * renumbered in place. Returns the new world: w (nobody away), 0
 * (everyone: no world to shrink to).
 */
uint32_t zs_shrink_ranks(uint32_t w, const uint32_t *away, uint32_t n_away, uint32_t *ranks,
			 uint32_t n);

#endif
