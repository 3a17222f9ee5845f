/*
 * redo.h - a lost trainer's step, decided: the coordinator keeps, per
 * rank, the step it began last (its boundary), and when the rank is lost
 * either marks it lost in that step, which its replacement redoes, or
 * says why it cannot (the job rolls back); a trainer pushes a step only
 * once the coordinator has heard it begin it, so that a loss after its
 * push is redone from that step. Pure (no lock, no I/O, no clock):
 * coord/redo.c and client/redo.c are its shells, and the simulator's step
 * world runs it as they do (sim/step.c, sim/step_trainer.c).
 */
#ifndef ZS_MODEL_REDO_H
#define ZS_MODEL_REDO_H

#include <stdbool.h>
#include <stdint.h>

/* A rank's record at the coordinator. */
struct zs_rstep {
	bool known;    /* step is the one it began last */
	bool lost;     /* lost in step: its replacement redoes it */
	uint64_t step;
};

/* What the coordinator knows of the rank's job when it is lost. */
struct zs_redo_job {
	bool collective; /* its ranks reduce among themselves */
	bool settling;   /* being restored, or stopping */
	uint64_t stopped_step; /* a stopped job's run continued: its stop (0: none) */
};

/* The rank's process (the one holding it) says it begins step: taken
 * (true), or not (false) when it is a replacement's boundary before the
 * step it redoes (it begins there: the lost mark stays). */
bool zs_rstep_begun(struct zs_rstep *r, uint64_t step);

/* The rank is lost (r NULL: no record kept): NULL, and r marked lost in
 * its step (its replacement redoes it; the others wait), or why no
 * replacement can redo it (the job rolls back). */
const char *zs_rstep_lose(struct zs_rstep *r, const struct zs_redo_job *j);

/* Whether a trainer's push of step waits: the coordinator has not yet
 * heard it begin step (known1: 1 + the latest step it has heard). Pushed
 * before, and lost, the rank would be redone from the step before, which
 * the servers may have moved two steps past (they keep one back). */
bool zs_redo_push_waits(uint64_t known1, uint64_t step);

#endif
