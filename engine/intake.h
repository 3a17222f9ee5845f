/*
 * intake.h - a shard's open step, counted: which push goes into its
 * reduction, which is in already (one sent again after a failover, a lost
 * rank's replacement's of what the rank pushed), which is refused, and
 * when every rank's last push is in. Internal to the engine.
 *
 * A pure core: it takes the shard's counts, what the shard and its job say
 * (struct eng_at) and an event (a push begins, lands or ends unlanded; a
 * copy takes a forwarded partial push; the step opens anew), and returns
 * what to do (struct eng_in_fx); it reads no clock, takes no lock and
 * touches no buffer. engine/face.c and engine/replica_in.c are its shells
 * (under the shard's lock, with the landing buffers and the answers), and
 * the simulator runs it as they do (sim/step.c).
 *
 * Each rank's term of a step is counted once: a rank's last push of the
 * step fills its slot (SLOT_FULL), and its partial pushes (gradient
 * accumulation: micro-batches 0, 1, ...) are counted in pcount.
 */
#ifndef ZS_ENGINE_INTAKE_H
#define ZS_ENGINE_INTAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

enum slot_state { SLOT_EMPTY, SLOT_LANDING, SLOT_FULL };

struct eng_intake {
	uint8_t *slot;    /* enum slot_state per rank: its last push of the step */
	uint32_t *pcount; /* per rank: its partial pushes in the reduction */
	uint32_t nr;      /* ranks slot and pcount hold */
	uint32_t full;    /* ranks whose last push is in */
	uint32_t terms;   /* pushes in the reduction (partial ones too) */
	uint32_t landing; /* counted pushes landing now */
	uint32_t pterms;  /* partial pushes in the reduction, all ranks' */
};

/* A trainer's push of one shard, as the core reads it. */
struct eng_push {
	uint64_t step;
	uint32_t rank;
	uint32_t micro; /* a partial push's micro-batch */
	bool partial;   /* one micro-batch of gradient accumulation */
	bool redo;      /* from a lost rank's replacement */
};

/* What the shard and its job say, at the event. */
struct eng_at {
	uint64_t version;      /* the shard's open step */
	uint32_t replicas;     /* copies of each shard of the job */
	uint32_t contributors; /* ranks whose last push completes the open step */
	uint32_t world;        /* the job's world size at the push's step */
	const char *unit;      /* the unit's name, for messages */
};

/* Where a push that may begin lands. */
enum eng_take {
	EI_COUNTED, /* into the reduction at its landing (its slot LANDING) */
	EI_AGAIN,   /* in already: landed, then dropped and acknowledged */
};

/* What the shell does with a push that landed. */
enum eng_ack { EI_ACK_NOW, EI_ACK_DURABLE /* once its step is on every copy */ };
struct eng_in_fx {
	bool deposit;   /* its bytes into the reduction */
	bool forward;   /* a partial push: to the copies, acknowledged once they have it */
	bool give_back; /* its landing buffer goes back (after the deposit) */
	enum eng_ack ack; /* when not forwarded */
	bool flush;     /* answer the durable acknowledgements due */
	bool complete;  /* every rank's last push is in: the step completes */
};

/* Room for nr ranks, all empty; -1 when out of memory (nothing changes). */
int eng_in_init(struct eng_intake *in, uint32_t nr);
int eng_in_grow(struct eng_intake *in, uint32_t nr);
void eng_in_free(struct eng_intake *in);

/* Whether push p may begin landing: ZS_OK and *take, or why not. */
enum zs_status eng_in_begin(const struct eng_intake *in, const struct eng_at *at,
			    const struct eng_push *p, enum eng_take *take, struct zs_error *err);
/* p began landing as *take says (its landing buffer is the shell's). */
void eng_in_began(struct eng_intake *in, const struct eng_push *p, enum eng_take take);
/* p landed: the counts moved, and what to do (*fx). */
void eng_in_landed(struct eng_intake *in, const struct eng_at *at, const struct eng_push *p,
		   struct eng_in_fx *fx);
/* p began and will not land (aborted): true when its landing buffer goes back. */
bool eng_in_unlanded(struct eng_intake *in, const struct eng_at *at, const struct eng_push *p);

/* A replacement's push p: ZS_OK with *dup when its rank's term is in
 * already, ZS_OK to land it, or why not. */
enum zs_status eng_in_redo_check(const struct eng_intake *in, const struct eng_at *at,
				 const struct eng_push *p, bool *dup, struct zs_error *err);
/* Partial push p of the open step, in order: ZS_OK (*dup, where asked:
 * its term is in), or why not (a micro-batch before the one it follows). */
enum zs_status eng_in_partial_check(const struct eng_intake *in, const struct eng_at *at,
				    const struct eng_push *p, bool *dup, struct zs_error *err);
/* A copy takes its primary's forward of partial push p: true when it goes
 * into the reduction (counted), false when its term is in already. */
bool eng_in_forwarded(struct eng_intake *in, const struct eng_at *at, const struct eng_push *p);
/* The open step's pushes dropped or applied: every count empty (those
 * landing still land, into the next step's accounting). */
void eng_in_clear(struct eng_intake *in);
/* The reduction emptied (its terms dropped; the slots stay). */
void eng_in_terms_cleared(struct eng_intake *in);

#endif
