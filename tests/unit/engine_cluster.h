/*
 * engine_cluster.h - the engine tests' fixture (test_engine.c): S
 * in-process shard engines (engine/engine.h) behind real tcp and shm
 * listeners, the clipping norm exchange the coordinator would run, and R
 * trainer threads that gather and push every unit in backward order, each
 * step's gradient the oracle's (tests/oracle.h) deterministic function of
 * the gathered parameters, the rank and the step.
 */
#ifndef ZS_TESTS_ENGINE_CLUSTER_H
#define ZS_TESTS_ENGINE_CLUSTER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"
#include "net/listener.h"

#define MAXS  4
#define MAXR  3
#define STEPS 4

/*
 * The norm exchange of these in-process servers: what the coordinator
 * does, over the cluster's placement (every shard's norm, summed in
 * placement order, handed to every server of the step).
 */
struct exchange {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	const struct zs_placement *p;
	uint64_t step;
	double *sumsq;
	bool *have;
	uint32_t n_have;
	uint64_t done_step; /* steps whose total is ready: [0, done_step) */
	double total;
};

struct cluster {
	struct exchange ex;
	int S;
	struct engine *e[MAXS];
	struct zs_listener *l[MAXS];
	char tcp[MAXS][ZS_ADDR_MAX], shm[MAXS][ZS_ADDR_MAX];
	struct zs_job job;
	const struct zs_transport_ops *t;
};

struct trainer {
	struct cluster *c;
	uint64_t t0; /* first step */
	uint32_t rank;
	uint32_t K; /* micro-batches per step */
	int failed;
	char why[512];
};

/* When set, jobs split units 0 and 2 into tensors of 3 optimizer groups
 * (oracle_spec_groups): the optimizer runs segment by segment; 2: with
 * frozen tensors too (oracle_spec_frozen). */
extern int with_groups;
/* When set, servers keep state past this many bytes in tier files under
 * tier_dir/sS. */
extern uint64_t tier_budget;
extern char tier_dir[64];
/* When set, the servers' landing budget (pushes in flight). */
extern uint64_t land_budget;
/* The job's data-plane token (conn_to proves it) and reader token (""
 * unless set: none). */
extern const char *job_token, *job_reader_token;
/* The job spec's readers.pins and readers.idle_ms (0 unless set). */
extern uint32_t job_reader_pins, job_reader_idle_ms;

/* The oracle's job "t" for R ranks, placed on servers 1..S. */
void make_job(struct zs_job *j, int S, uint32_t R, enum zs_optim_kind kind,
	      enum zs_dtype dt);
/* Starts S engines serving that job (clip: its clip_norm), reached over
 * t; stop frees them. */
void start(struct cluster *c, int S, uint32_t R, enum zs_optim_kind kind,
	   enum zs_dtype dt, const struct zs_transport_ops *t);
void start_clip(struct cluster *c, int S, uint32_t R, enum zs_optim_kind kind,
		enum zs_dtype dt, const struct zs_transport_ops *t, double clip);
void stop(struct cluster *c);
/* A connection of rank to server s, over the cluster's transport. */
struct zs_conn *conn_to(struct cluster *c, int s, uint32_t rank);
/* Gathers unit u at step t into out (f32), over all shards; -1 and why
 * (512 bytes) on failure. */
int gather_unit(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t,
		float *out, char *why);
/* Pushes unit u's data of dtype dt for step t (init: its initial value;
 * partial: a micro-batch before the step's last), one transfer per shard. */
int push_unit_p(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t,
		const void *data, enum zs_dtype dt, bool init, bool partial, char *why);
int push_unit(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t,
	      const void *data, enum zs_dtype dt, bool init, char *why);
/* Uploads the oracle's initial parameters of every unit over conn (-1 and
 * why on failure). */
int upload_init(struct cluster *c, struct zs_conn **conn, char *why);
/* A struct trainer's thread: steps [t0, STEPS), K micro-batches each. */
void *trainer_main(void *arg);
/* Uploads the oracle's initial parameters, trains R ranks for STEPS steps
 * (K micro-batches, clip) and checks every unit against the reference,
 * bit for bit; also the landing and tier budgets' use when set. */
void run_oracle(int S, uint32_t R, enum zs_optim_kind kind, enum zs_dtype dt,
		const struct zs_transport_ops *t, uint32_t K, double clip);

#endif
