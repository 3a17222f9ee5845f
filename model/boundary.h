/*
 * boundary.h - a rank's step boundary without a round trip, as a pure
 * state machine: the mailbox between the step driver and the lease
 * thread that carries its reports (client/lease.c is its shell).
 *
 * The driver posts its report at boundary b; the sender (the lease
 * thread) sends it to the coordinator while step b runs; the driver takes
 * the answer (the stage, the checkpoint interval, the step to stop
 * before, the worlds) at boundary b + 1. The coordinator sets a stop
 * three steps past the latest report it has, so that every rank meets the
 * stop's boundary with an answer given after the stop was set
 * (docs/DESIGN.md, the control plane). That holds only if the answer
 * taken is the one to the report posted last: an answer to an earlier
 * report (one the driver gave up on when its bound passed, then asked
 * again and posted anew; one of a timeline a resume left) may be older
 * than the stop, and its rank would begin a step the others stop before.
 * So each post is numbered, and an answer is kept only for the number
 * posted last, while it is still awaited.
 *
 * No lock, no I/O, no clock (whether a wait's bound passed is an input):
 * the shell holds its mutex around each call and keeps the report and
 * the answer's contents; sim/bounds.c runs it under delayed answers,
 * retries, stops and rollbacks.
 */
#ifndef ZS_MODEL_BOUNDARY_H
#define ZS_MODEL_BOUNDARY_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

enum zs_bm_state {
	ZS_BM_NONE,     /* nothing posted that a boundary will take */
	ZS_BM_POSTED,   /* report seq posted, its answer awaited */
	ZS_BM_ANSWERED, /* report seq's answer is in, for the next boundary */
};

struct zs_bmail {
	enum zs_bm_state st;
	uint64_t seq;     /* the report posted last (1, 2, ...; 0: none yet) */
	uint64_t sending; /* the report the sender has on its way (0: none) */
};

/* The driver posts a report: any earlier one, sent or not, is superseded
 * (its answer will not be taken). Returns its number. */
uint64_t zs_bm_post(struct zs_bmail *m);
/* The sender's turn: the number of the report to send now, marked on its
 * way; 0 when there is none (nothing awaited), or while one is on its way
 * (the sender sends one at a time, and reports each one's answer). */
uint64_t zs_bm_pick(struct zs_bmail *m);
/* The sender has report seq's answer (or its failure): true when it is
 * kept for the next boundary; false when it is dropped (superseded by a
 * later post, which the sender picks next, or given up on). */
bool zs_bm_answered(struct zs_bmail *m, uint64_t seq);

enum zs_bm_take {
	ZS_BM_ASK,      /* nothing posted: ask the coordinator now, and wait */
	ZS_BM_WAIT,     /* posted, not answered yet, the bound not passed */
	ZS_BM_TAKE,     /* the answer kept is this boundary's */
	ZS_BM_TIMEDOUT, /* not answered within the bound: given up on */
};
/* The driver's boundary: expired says whether its wait's bound passed.
 * TAKE and TIMEDOUT leave nothing posted (an answer to the report given
 * up on, coming later, is dropped). */
enum zs_bm_take zs_bm_take(struct zs_bmail *m, bool expired);
/* The same, leaving the answer for the boundary (a step's end reads the
 * next step's worlds): TAKE, WAIT, or ASK when there is none to read
 * (nothing posted; or given up on, expired). */
enum zs_bm_take zs_bm_peek(const struct zs_bmail *m, bool expired);
/* Whatever was posted is dropped (the lease stopped; a resume to a new
 * timeline): an answer to it, coming later, is not taken. */
void zs_bm_drop(struct zs_bmail *m);

/*
 * What a rank does with the answer its boundary took, beginning step
 * (client/driver.c zs_step_begin): stop (a stop at or before the step:
 * every rank leaves there, and the job resumes there), leave (its rank is
 * outside the step's world: a shrink), or begin it in a world of *world
 * ranks, rank 0 asking for the job's checkpoint (*checkpoint) at a step
 * the answer's interval divides. sim/bounds.c runs it.
 */
enum zs_begin_act { ZS_BEGIN_STEP, ZS_BEGIN_STOP, ZS_BEGIN_LEAVE };
enum zs_begin_act zs_begin_decide(const struct zs_job_spec *spec, const struct zs_step_answer *an,
				  uint32_t rank, uint64_t step, uint32_t *world, bool *checkpoint);


/*
 * The coordinator's side: the step a stop (or a resize) is set past. The
 * argument above needs the latest step any rank reported on the job's
 * timeline, and reports do not arrive in their order: a rank's lease
 * thread may still be sending an older report (riding out a coordinator
 * restart) when the rank, its bound passed, asks with a newer one. Taking
 * the report that came last as the rank's latest set the stop one step
 * too early, and that rank began the stop's step (sim/bounds.c found it).
 * So the step kept is the highest heard on the timeline; a new timeline
 * (a rollback, a restore) starts again from its first report (a late
 * report of the timeline before only ever sets the stop later).
 */
struct zs_btop {
	uint64_t timeline; /* the timeline of the reports counted */
	uint64_t top1;     /* 1 + the highest step reported on it (0: none) */
};
/* A rank's report that it finished step, heard while the job is on
 * timeline. */
void zs_btop_heard(struct zs_btop *t, uint64_t timeline, uint64_t step);
/* The highest step reported on timeline, into *top: false when none. */
bool zs_btop_latest(const struct zs_btop *t, uint64_t timeline, uint64_t *top);

#endif
