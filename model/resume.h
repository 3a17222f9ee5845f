/*
 * resume.h - where a trainer resumes (zs_trainer_resume), decided: a pure
 * function of what the coordinator says of the job once the trainer is
 * back on its timeline (no lock, no I/O). client/resume.c is its shell.
 *
 * In order: a process that replaces a rank lost mid-step redoes that step
 * (model/redo.h); a job every rank left cleanly resumes at its stop; a
 * rank new with a resize (not in the world before the change that grew
 * the job past it, and no checkpoint restored since holds its state)
 * begins at that change's step; else the job's state is the checkpoint it
 * was restored from, at its step; a job never restored starts at step 0.
 */
#ifndef ZS_MODEL_RESUME_H
#define ZS_MODEL_RESUME_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

struct zs_resume_in {
	bool redo;              /* this process redoes the rank's lost step */
	uint64_t redo_step;
	uint64_t stopped_step;  /* every rank left the job there (0: not stopped) */
	uint32_t world_size;    /* the spec's (the world before any resize) */
	const struct zs_worlds *worlds;
	uint64_t restored_id;   /* the checkpoint the job was restored from (0: none) */
	uint64_t restored_step;
};

/* Where rank resumes: an enum zs_resumed (include/zshard.h) and *step
 * (ZS_RESUMED_NONE: never restored, step 0; the caller says so). */
int zs_resume_where(const struct zs_resume_in *in, uint32_t rank, uint64_t *step);

#endif
