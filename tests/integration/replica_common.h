/*
 * replica_common.h - what the replicated-shard tests share (test_replica.c):
 * an observer that connects to every server holding a job's copies and
 * reads their fp32 state, the check that every copy equals its primary bit
 * for bit, and the check of a run against the reference at a step.
 */
#ifndef ZS_TESTS_REPLICA_COMMON_H
#define ZS_TESTS_REPLICA_COMMON_H

#include "tests/integration/train_common.h"

#include "net/transport.h"

struct observer {
	struct zs_job job;
	struct zs_server_info *s;
	uint32_t n_s;
	struct zs_conn *conn[8]; /* by o->s: those holding copies */
};

/* Reads array a of shard sh from its server (observer connection c). */
void read_array(struct zs_conn *c, const struct zs_shard *sh, int a, float *out,
		uint64_t *version);
/* Connects o, as rank, to every server holding a copy of job's shards. */
void observe(struct observer *o, const char *job, uint32_t rank);
struct zs_conn *conn_of(struct observer *o, uint64_t id);
/*
 * Waits (30 s at most, then fails naming what is pending) until what the
 * tests before set going has ended: every test server up at the
 * coordinator, every job's copies on servers that are up, no restore
 * under way, and job's copies (NULL: no job's) seeded (a job that never
 * uploaded parameters has nothing to seed its new copies with). A test
 * that picks shards by their placement, or stops a server, starts with it.
 */
void settle_cluster(const char *job);
/* C.srv's index of the server with id (by its control address). */
int srv_index(const struct observer *o, uint64_t id);
void unobserve(struct observer *o);
/* C.srv's index of the server holding the most primaries of job name (-1:
 * none listed). */
int busiest_server(const char *name);
/*
 * Every copy of every shard of job holds the same fp32 state, at step,
 * bit for bit; with want (by unit, the masters expected, or NULL) the
 * masters equal it. Returns the number of shards checked.
 */
uint32_t check_copies(const char *job, uint64_t step, float **want);
/* What t gathers at step n equals the reference after n steps (K
 * micro-batches; prim: the job's first primaries, its norms' order; sched:
 * oracle_hparams set at every step, as train_oracle's). */
void check_reference_at(const char *name, const struct zs_job_spec *spec,
			const struct zs_placement *prim, uint64_t n, uint32_t K, int sched,
			zs_trainer *t);

#endif
