/*
 * train_common.h - what the training integration tests share: a real
 * coordinator and up to three real shard-server processes on loopback (one
 * cluster per test binary), jobs, trainers (threads, each its own libzshard
 * handle) that train the oracle's synthetic gradient, and the checks
 * against the single-process reference.
 *
 * Binaries: test_train (training at every stage, transport and policy),
 * test_driver (the step driver: memory, the prefetch window, lanes),
 * test_ckpt (checkpoints, restore anywhere, export and import), test_crash
 * (processes killed mid-checkpoint, a full disk, a dead trainer),
 * test_scale (64 ranks, pushes in adversarial orders, server memory).
 */
#ifndef ZS_TRAIN_COMMON_H
#define ZS_TRAIN_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctrl/coord_client.h"
#include "tests/harness.h"
#include "math/optim.h"
#include "tests/oracle.h"
#include "storage/safetensors.h"
#include "model/spec_json.h"
#include "base/util.h"
#include "rdma/rdma.h"
#include "include/zshard.h"
#include "include/zshard_reader.h"

#include <jansson.h>

#define MAXSERV 3
#define STEPS 3

struct train_cluster {
	char *dir;
	char addr[64];
	int n; /* servers: $ZSHARD_TEST_SERVERS (1..3), default 3 */
	const char *capacity; /* each: $ZSHARD_TEST_CAPACITY, default 256M */
	pid_t coord, srv[MAXSERV];
	char srv_addr[MAXSERV][128]; /* each server's control address */
};
extern struct train_cluster C;

struct rank_ctx {
	zs_trainer *t;
	uint32_t K; /* micro-batches per step (gradient accumulation) */
	const struct zs_job_spec *spec; /* with sched: sets oracle_hparams of */
	int sched;                       /* spec before each step's pushes */
	uint64_t t0, t1; /* steps [t0, t1); 0, 0: [0, STEPS) */
	/* optional: ms to wait before pushing unit u of step (an order of
	 * arrival the test wants) */
	unsigned (*delay_ms)(unsigned rank, uint64_t step, unsigned u);
	int rc;
	char why[512];
};

/* Start and stop the cluster: the cmocka group setup and teardown. */
int group_setup(void **st);
int group_teardown(void **st);

/* train_common.c */
int start_cluster(const char *listen);
/* start_cluster's two halves: the coordinator (its address in C.addr), then
 * the servers (a new port each) */
int start_coordinator(const char *listen);
int start_servers(void);
/* Waits (60 s at most) until every server is registered and up: 0, or -1
 * after saying so. */
int wait_servers_up(void);
/* Whether the file at path holds text. */
bool text_in_file(const char *path, const char *text);
/* Creates a job and waits (bounded) until every server holds its shards. */
void create_job(struct zs_job_spec *spec);
/* Joins, retrying while servers have not loaded the job yet. */
zs_trainer *join(const char *job, unsigned rank, const char *transport);
/* Rank 0's upload of the oracle's initial parameters. */
void upload_init(zs_trainer *t);
int fetch(zs_trainer *t, unsigned u, uint64_t step, float *out);
/* The step driver over transport: rank 0 of a 1-rank oracle job (units of
 * 4000, 4, 16396 and 256 bytes, f32) at stage, under pol, trains STEPS
 * steps through zs_step_begin .. zs_step_end and equals the reference;
 * its counters and last step report in ctr and last. */
/* when set, driver_run's job has frozen tensors (oracle_spec_frozen) */
extern int driver_frozen;
void driver_run(const char *name, unsigned stage, const char *transport,
		const struct zs_policy *pol, struct zs_trainer_counters *ctr,
		struct zs_step_stats *last);
void *train(void *arg);
/* Trains the oracle job name with R ranks (threads) and checks it bitwise;
 * K micro-batches, clip, sched: in 3 optimizer groups (oracle_spec_groups)
 * with oracle_hparams set at every step; 2: with frozen tensors too
 * (oracle_spec_frozen: their shards take step marks). */
/* The parameters t gathers after STEPS steps equal the reference's (over
 * placement pl; K micro-batches; sched as train_oracle), bit for bit; what
 * names the run in the failure. */
void check_reference(zs_trainer *t, const struct zs_job_spec *spec,
		     const struct zs_placement *pl, uint32_t K, int sched, const char *what);
/* spec.replicas of the jobs train_oracle creates (0: 1) */
extern uint32_t oracle_replicas;
/* spec.data_tls of the jobs train_oracle creates */
extern bool oracle_data_tls;
void train_oracle(const char *name, uint32_t R, const char *transport,
		  enum zs_optim_kind kind, enum zs_dtype dt, uint32_t K, double clip, int sched);
void check_oracle(zs_trainer *t, const struct zs_job_spec *spec, uint64_t steps);
void train_ranks(struct rank_ctx *x, uint32_t R, uint64_t t0, uint64_t t1);
/* The same with K micro-batches per step (K - 1 partial pushes, then the
 * last) */
void train_ranks_k(struct rank_ctx *x, uint32_t R, uint64_t t0, uint64_t t1, uint32_t K);
void fetch_all(zs_trainer *t, uint64_t step, float **out);
void wait_restored(struct zs_coord_client *c, const char *job, struct zs_job *j);
/* Restarts server i (killed first if it still runs), with
 * ZSHARD_FAULT=fault when not NULL. */
void restart_server(int i, const char *fault);
/* restart_server's kill -9 and start, without its wait nor its asserts (for
 * a thread other than the test's): 0, or -1 when it did not start. */
int respawn_server(int i);
/* Restores checkpoint id (0: latest) of job and waits for it. */
void restore(struct zs_coord_client *c, const char *job, uint64_t id);
void rebalance(struct zs_coord_client *c, const char *job, const uint64_t *ids,
		      uint32_t n, uint32_t want_servers);
int ctl(char **out, char **errs, const char *a1, const char *a2, const char *a3,
	       const char *a4, const char *a5);


#endif
