/*
 * step.h - the step world's state (sim/step.c, sim/step_nodes.c): one
 * shard of a job, on a primary and (replicas 2) a copy, and R trainer
 * ranks pushing its steps through the real core of a shard's open step
 * (engine/intake.c), under trainer deaths and the primary's loss.
 */
#ifndef ZS_SIM_STEP_H
#define ZS_SIM_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/intake.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define SW_MAX_R 4
#define SW_MAX_K 3
#define SW_MAX_PUSH 4096
#define SW_MAX_ACKS 64
#define MS 1000

enum sw_kind {
	SW_WAKE,       /* who: rank; a: process. The trainer's next action */
	SW_BEGIN,      /* who: server; a: push. A push arrives */
	SW_LAND,       /* who: server; a: push. Its bytes are in */
	SW_ACK,        /* who: rank; a: push; b: status. The server's answer */
	SW_FWD_PUSH,   /* who: copy; a: push; b: epoch. A partial push forwarded */
	SW_FWD_PUSH_OK, /* who: primary; a: push. The copy has it */
	SW_FWD_STEP,   /* who: copy; a: step; b: epoch. The step's mean gradient */
	SW_FWD_STEP_OK, /* who: primary; a: step. The copy applied it */
	SW_KILL,       /* who: rank. Its process dies (SIGKILL) */
	SW_REPLACE,    /* who: rank. Its replacement joins and redoes its step */
	SW_KILL_PRIMARY, /* the primary's server dies */
	SW_PROMOTE,    /* the coordinator makes the copy the primary */
	SW_TOLD,       /* who: rank. It takes the new placement */
};

/* One push a trainer sent: a record, never reused within a run. */
struct sw_push {
	struct eng_push p;
	int proc;       /* the trainer process that sent it */
	int server;     /* where to */
	bool began;     /* the server took it (its landing counted) */
	bool ended;     /* landed or aborted */
	int64_t acked_to; /* 0, or the time the trainer saw its answer */
};

struct sw_server {
	bool alive, primary;
	uint64_t version, epoch;
	struct eng_intake in;
	/* the reduction: how many times each rank's micro-batch is in it
	 * (m = K - 1: its last push) */
	int sum[SW_MAX_R][SW_MAX_K];
	bool wait;   /* the last update is not on the copy yet */
	bool behind; /* every push of the open step in, waiting for that */
	bool peer;   /* it has a copy to forward to */
	struct { int push; uint64_t step; } acks[SW_MAX_ACKS]; /* durable, not yet answered */
	int n_acks;
};

struct sw_trainer {
	int proc;          /* its process now (a replacement's is new) */
	bool alive;
	uint64_t step;     /* the step it is in (told the coordinator it began) */
	uint32_t micro;    /* its next push of the step: micro-batch micro */
	uint64_t redo;     /* 1 + the step its process redoes (0: none) */
	bool gathered;     /* it has the step's parameters */
	int pending;       /* the push it waits on (-1: none) */
	int primary;       /* the shard's primary, as its placement says */
	int deaths;
	int again;         /* its push refused "still landing", in a row */
};

struct sworld {
	struct sim s;
	struct sim_stats *st;
	bool failed;
	char *why;
	size_t why_n;
	int R, K, C;       /* ranks, micro-batches a step, copies */
	uint64_t S;        /* steps to train */
	int primary;       /* the coordinator's placement: the primary's server */
	int next_proc;
	int64_t fault_end_us;
	struct sw_server srv[2];
	struct sw_trainer t[SW_MAX_R];
	struct sw_push push[SW_MAX_PUSH];
	int n_push;
};

void sw_ev(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b);
void sw_fail(struct sworld *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int64_t sw_lat(struct sworld *w);
/* sim/step_nodes.c: the servers' shells (as engine/face.c and
 * engine/replica*.c run the core) and the trainers (client/driver.c,
 * client/failover.c, client/redo.c) */
void sw_server_event(struct sworld *w, const struct sim_ev *ev);
void sw_trainer_event(struct sworld *w, const struct sim_ev *ev);

#endif
