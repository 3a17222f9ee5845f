/*
 * answered.h - the norm exchanges a server was answered and applied (for
 * clipping), kept a while as a ring, and what a coordinator's want of a
 * step gets from it: every exchange of that step (a promoted copy's
 * primaries go in one of their own), their norms and the total applied.
 * Pure: no lock (the engine holds its job's cmu around each call), no
 * I/O. engine/clip.c is its shell; the simulator's norm world keeps each
 * server's exchanges with it.
 *
 * Why kept: a coordinator that dies (or loses the lead) between its
 * answers leaves the servers it did not answer sending their reports to
 * the next one, which never hears from the answered ones unless it asks
 * (a heartbeat's want); they report again, settled, from here.
 */
#ifndef ZS_ENGINE_ANSWERED_H
#define ZS_ENGINE_ANSWERED_H

#include <stdint.h>

#include "base/status.h"
#include "model/model.h"

#define ENG_ANSWERED_KEEP 8

struct eng_answered {
	uint64_t step;
	double total;
	uint32_t n;
	struct zs_shard_norm *nv; /* malloc'd */
};

struct eng_answers {
	struct eng_answered ring[ENG_ANSWERED_KEEP];
	unsigned next;
	uint64_t gen; /* moves at every restore: an exchange begun before is not kept */
};

/*
 * Keeps an exchange of step (nv[0..n), taken; total) begun under
 * generation gen: NULL when kept (the oldest kept one goes), else nv back
 * for the caller to free (a restore came since: the step is not this
 * state's).
 */
struct zs_shard_norm *eng_ans_keep(struct eng_answers *a, uint64_t gen, uint64_t step,
				   double total, struct zs_shard_norm *nv, uint32_t n);
/* Drops every kept exchange (a restore, the job's end); the generation moves. */
void eng_ans_forget(struct eng_answers *a);
/*
 * Every kept exchange of step: their norms (*out, malloc'd; NULL with
 * none), how many, and the total applied. ZS_OK, ZS_ENOTFOUND (none kept),
 * ZS_ENOMEM.
 */
enum zs_status eng_ans_of(const struct eng_answers *a, uint64_t step, struct zs_shard_norm **out,
			  uint32_t *n, double *total);

#endif
