/*
 * step.h - the step world's state (sim/step.c, sim/step_servers.c,
 * sim/step_trainer.c): one shard of a job on 1 to 3 copies (the first its
 * primary), and R trainer ranks pushing its steps through the real cores
 * of a shard's open step (engine/intake.c) and of its copies
 * (engine/copies.c), under trainer deaths and servers lost.
 */
#ifndef ZS_SIM_STEP_H
#define ZS_SIM_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/copies.h"
#include "engine/intake.h"
#include "model/model.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define SW_MAX_R 4
#define SW_MAX_C 3
#define SW_MAX_K 3
#define SW_MAX_PUSH 4096
#define SW_MAX_ACKS 64
#define MS 1000

enum sw_kind {
	SW_WAKE,       /* who: rank; a: process. The trainer's next action */
	SW_BEGIN,      /* who: server; a: push. A push arrives */
	SW_LAND,       /* who: server; a: push. Its bytes are in */
	SW_ACK,        /* who: rank; a: push; b: status. The server's answer */
	SW_FWD_PUSH,   /* who: copy; a: push; b: epoch; c: from; d: round. A partial push forwarded */
	SW_FWD_PUSH_OK, /* who: primary; a: push; b: refused (then sent again); c: from; d: round */
	SW_FWD_STEP,   /* who: copy; a: step; b: epoch; c: from; d: gen. A step's mean */
	SW_FWD_LAND,   /* who: copy; a: step; c: from; d: gen. Its bytes are in */
	SW_FWD_STEP_OK, /* who: primary; a: step; b: refused; c: from; d: gen */
	SW_KILL,       /* who: rank. Its process dies (SIGKILL) */
	SW_REPLACE,    /* who: rank. Its replacement joins and redoes its step */
	SW_KILL_SERVER, /* a server dies (the primary or a copy) */
	SW_MARK_DOWN,  /* who: server. The coordinator marks it down */
	SW_FAILOVER,   /* who: server. The coordinator takes it for lost: a new placement */
	SW_TAKE,       /* who: server. It takes the newest placement */
	SW_TOLD,       /* who: rank. It takes the new placement */
};

/* One push a trainer sent: a record, never reused within a run. */
struct sw_push {
	struct eng_push p;
	int proc;       /* the trainer process that sent it */
	int server;     /* where to */
	int fwd_left;   /* copies whose answer to its forward the primary waits for */
	int fwd_round;  /* its forwards sent anew (a new placement): answers of an earlier round ignored */
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
	uint64_t acc_of; /* 1 + the step its mean gradient is of (0: none) */
	/* a primary's copies: the servers it forwards to; wait: the update
	 * that made version not on all of them yet (wait_left answers to
	 * come, of forward generation gen); behind: every push of the open
	 * step in, waiting for that */
	int peer[SW_MAX_C - 1];
	int n_peers;
	bool wait, behind;
	int wait_left;
	uint64_t gen;
	int refused;       /* forwards refused in a row */
	bool landing_fwd;  /* a copy: a forward of its open step lands */
	struct { int push; uint64_t step; } acks[SW_MAX_ACKS]; /* durable, not yet answered */
	int n_acks;
	int fwd[SW_MAX_ACKS]; /* partial pushes whose forward is under way */
	int n_fwd;
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
	/* the coordinator's placement: its servers in order (the first the
	 * primary), its epoch */
	int plc[SW_MAX_C];      /* its servers, by plc_sh */
	struct zs_shard plc_sh[SW_MAX_C]; /* server_id: the server's index + 1 */
	int n_plc;
	bool down[SW_MAX_C];    /* servers the coordinator marks down */
	uint64_t epoch;
	int primary;
	int kills_left;    /* servers that may still be killed */
	/* a primary killed right after it applies its kill_after-th step
	 * and forwards it (0: none): the forward in flight as it dies */
	uint64_t kill_after, applies;
	bool slow_fwd;
	int next_proc;
	int64_t fault_end_us;
	struct sw_server srv[SW_MAX_C];
	struct sw_trainer t[SW_MAX_R];
	struct sw_push push[SW_MAX_PUSH];
	int n_push;
};

void sw_ev(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b);
void sw_fail(struct sworld *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int64_t sw_lat(struct sworld *w);
void sw_ev4(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b,
	    int64_t c, int64_t d);
/* sim/step_servers.c: the servers, running the cores as engine/face.c,
 * engine/replica.c, engine/replica_in.c, engine/acks.c and engine/epoch.c
 * do; a server takes the newest placement */
void sw_server_event(struct sworld *w, const struct sim_ev *ev);
void sw_take_placement(struct sworld *w, int who);
/* sim/step_trainer.c: the trainers (client/driver.c, client/failover.c,
 * client/redo.c) */
void sw_trainer_event(struct sworld *w, const struct sim_ev *ev);

#endif
