/*
 * forward.h - a replicated shard's forwards as tasks: queued under the
 * shard's lock (engine/replica.c), sent by a job's drain on the
 * replicator's pool (engine/forward.c). Internal to the engine.
 */
#ifndef ZS_ENGINE_FORWARD_H
#define ZS_ENGINE_FORWARD_H

#include "engine/state.h"

struct rtask {
	struct ejob *j; /* referenced */
	uint32_t shard;
	uint64_t step, gen;
	bool init;
	bool seed;  /* the shard's whole state at step, to one new copy */
	bool seed_mid; /* a seed taken after partial pushes of its step */
	bool catchup;  /* a seed to every copy, taken by those behind it */
	bool seed_prev; /* a seed with the step before's parameters after the state */
	bool if_empty;  /* a seed sent again: taken only by a copy with no state */
	uint64_t epoch; /* a seed: the placement epoch it was last sent in */
	uint64_t restores; /* a seed: its shard's restores when its state was read */
	uint64_t run;      /* and the timeline its shard's last restore began */
	/* a trainer's partial push (gradient accumulation): its landing
	 * buffer (given back at the end), whose acknowledgement waits */
	bool partial;
	void *buf;
	enum zs_dtype dt;
	uint32_t from, micro;
	struct zs_sop *ack;
	uint64_t peer_gen;
	float *own; /* the initial parameters when they are not in s->master;
		     * a seed's arrays */
	/* the copies it goes to, as they were when it was posted */
	uint64_t peer[ZS_MAX_REPLICAS - 1];
	uint32_t n_peers;
	uint64_t empty; /* a copy that answered it has no state (0: none) */
	int64_t deadline_ms;
	struct rtask *next;
};

#define REPL_THREADS 16

/* The forwards queued, in order; a job with some has one drain task in
 * the pool (its rc.busy), so that its forwards go in order, one batch at a
 * time, and jobs take turns. */
struct erepl {
	pthread_mutex_t mu;
	struct rtask *head, **tail;
	struct zs_pool *pool;
	bool stop;
};

/* Queues r for shard s of j (caller holds s->mu): a drain of j is in the
 * pool while j has tasks queued. */
void eng_fwd_enqueue(struct engine *e, struct ejob *j, struct eshard *s, struct rtask *r);
/* A seed of s's whole state at its version for peer (caller holds s->mu),
 * not queued yet; NULL when it cannot be read (said why). */
struct rtask *eng_fwd_seed_task(struct engine *e, struct ejob *j, struct eshard *s,
				 uint64_t peer);
/* Job j's drain (arg: j, referenced; the reference goes with it): sends
 * a batch of its forwards, then queues itself again behind the other
 * jobs' or, with none left, ends. */
void eng_fwd_drain(void *arg);

#endif
