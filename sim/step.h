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
#include "engine/kept.h"
#include "model/model.h"
#include "model/hptables.h"
#include "model/redo.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define SW_MAX_R 4
#define SW_MAX_C 3
#define SW_MAX_SRV 6 /* the first copies, and rebuilt ones on servers added */
#define SW_MAX_K 3
#define SW_MAX_PUSH 4096
#define SW_MAX_ACKS 64
#define SW_MAX_Q 96 /* tasks queued from a primary to one copy */
#define SW_MAX_STEPS 10
#define SW_HP_KEEP 8 /* engine/state.h EJOB_HP_KEEP */
#define MS 1000
/* a seed's a: its step, the table (sim/step_hp.c) << 32, and 1 + the step
 * of the parameters before it sent with it << SEED_PREV_SHIFT */
#define SEED_PREV_SHIFT 48
/* a seed's d: taken mid-step; sent again, taken only without state */
#define SEED_MID 1
#define SEED_IF_EMPTY 2
/* its answer's d: the epoch it was taken in, above those */
#define SEED_EPOCH_SHIFT 2

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
	SW_REBUILD,    /* the coordinator adds a new copy where one was lost */
	SW_SEED,       /* who: copy; a: step; b: epoch; c: from; d: SEED_*. The shard's state */
	SW_SEED_OK,    /* who: primary; a: step; b: refused; c: from; d: SEED_* */
	SW_SEEDED,     /* who: copy; a: its primary; b: the seed's epoch. The coordinator hears it is whole */
	SW_CATCH_UP,   /* who: copy; a: step; b: epoch; c: from; d: gen. A promoted copy's state */
	SW_CATCH_UP_OK, /* who: primary; a: step; b: refused; c: from; d: gen */
	SW_BOUNDARY,   /* who: rank; a: step; b: process. The coordinator hears it begin step */
	SW_KNOWN,      /* who: rank; a: step; b: process. Its boundary's answer */
	SW_HP,         /* who: server; a: rank; b: process; c: the table's step; d: round << 1 | being set */
	SW_HP_OK,      /* who: rank; a: process; b: the table's step; c: server; d: as SW_HP's */
};

/* One push a trainer sent: a record, never reused within a run. */
struct sw_push {
	struct eng_push p;
	int proc;       /* the trainer process that sent it */
	uint64_t conn_seq; /* its trainer's connection's (sw_trainer) */
	int server;     /* where to */
	int fwd_left;   /* copies whose answer to its forward the primary waits for */
	int fwd_round;  /* its forwards sent anew (a new placement): answers of an earlier round ignored */
	bool began;     /* the server took it (its landing counted) */
	bool ended;     /* landed or aborted */
	int64_t acked_to; /* 0, or the time the trainer saw its answer */
};

struct sw_server {
	bool alive, primary;
	bool ready;      /* it has state (a new copy: once seeded) */
	uint64_t seed_gap; /* 1 + the step its seed lacks terms of (0: none) */
	/* seeded mid-step: the copy, the step, the epoch the seed was sent in */
	struct { int peer; uint64_t step, epoch; } unsettled[SW_MAX_C];
	int n_unsettled;
	uint64_t seeded[SW_MAX_C]; /* copies it seeded in this epoch (server index) */
	uint32_t n_seeded;

	uint64_t version, epoch;
	struct eng_intake in;
	/* the reduction: how many times each rank's micro-batch is in it
	 * (m = K - 1: its last push) */
	int sum[SW_MAX_R][SW_MAX_K];
	uint64_t acc_of; /* 1 + the step its mean gradient is of (0: none) */
	/* the step before's copy (engine/redo.c): prev_of, as the engine
	 * marks it (1 + the step it holds whole; 0: none whole, as after a
	 * seed), and what it holds in truth (1 + that step; 0: nothing) */
	uint64_t prev_of, prev_holds;
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
	struct zs_hp_table hp[SW_HP_KEEP]; /* its hyperparameter tables (sim/step_hp.c) */
	uint32_t n_hp;
};

/* A task a primary queued for a copy (sim/step_chan.c). */
struct sw_msg {
	int kind;
	int to;        /* the copy */
	int64_t a, d;
	int64_t lat;   /* its first time on the wire (0: as any) */
	uint32_t seq;  /* its number on the channel: its answer names it */
	bool answered; /* ans holds the copy's answer */
	bool wired;    /* on the wire, its answer to come */
	struct sim_ev ans;
};
struct sw_chan {
	struct sw_msg q[SW_MAX_Q];
	int n;
	int nb;         /* the batch posted: q[0, nb) (0: none) */
	int cur;        /* the task being ended (-1: answers awaited) */
	uint32_t seq;
	int64_t wire_at[SW_MAX_SRV]; /* when the last one posted to each copy arrives */
};

struct sw_trainer {
	int proc;          /* its process now (a replacement's is new) */
	/* the queue's count when it last connected to its primary (its join,
	 * a placement telling it of another): a server restarted since is not
	 * that connection's, which ended with the earlier process */
	uint64_t conn_seq;
	bool alive;
	uint64_t step;     /* the step it is in (told the coordinator it began) */
	uint32_t micro;    /* its next push of the step: micro-batch micro */
	uint64_t redo;     /* 1 + the step its process redoes (0: none) */
	bool gathered;     /* it has the step's parameters */
	int pending;       /* the push it waits on (-1: none) */
	int primary;       /* the shard's primary, as its placement says */
	int deaths;
	int again;         /* its push refused "still landing", in a row */
	uint64_t posted1;  /* 1 + the step whose boundary it posted last */
	uint64_t known1;   /* 1 + the latest step the coordinator answered it began */
	/* its hyperparameter tables (sim/step_hp.c): the last it set, the one
	 * being set (of sending_step), answers awaited before a push (of
	 * round: a failover's sends start a new one), and the push that waits
	 * for them to go again to the new primary */
	struct zs_hp_table hist[4];
	uint32_t n_hist;
	bool sending, resend, hp_early; /* hp_early: the step's table set before its gathers */
	uint64_t sending_step, hp_set1;
	int hp_wait;
	int64_t hp_round;
};

struct sworld {
	struct sim s;
	struct sim_stats *st;
	int R, K, C;       /* ranks, micro-batches a step, copies */
	uint64_t S;        /* steps to train */
	/* the coordinator's placement: its servers in order (the first the
	 * primary), its epoch */
	int plc[SW_MAX_C];      /* its servers, by plc_sh */
	struct zs_shard plc_sh[SW_MAX_C]; /* server_id: the server's index + 1; fresh: not seeded */
	int n_plc;
	bool down[SW_MAX_SRV];  /* servers the coordinator marks down */
	int n_srv;              /* servers so far (a rebuild adds one) */
	/* what each primary sends its copies (sim/step_chan.c) */
	struct sw_chan chan[SW_MAX_SRV];
	uint64_t epoch;
	int primary;
	int kills_left;    /* servers that may still be killed */
	int rebuilds;      /* copies added after a loss */
	/* a lost server back, empty, the lost copy placed on it again
	 * (sim/step.c rebuild): the queue's count when it came back (what was
	 * sent to, or due in, its earlier process before that is lost), and
	 * the world's own stream of chances for it, so that runs where no
	 * server comes back go as they went before it could */
	uint64_t born_seq[SW_MAX_SRV];
	uint64_t rb_rng;
	/* a primary killed right after it applies its kill_after-th step
	 * and forwards it (0: none): the forward in flight as it dies */
	uint64_t kill_after, applies;
	bool slow_fwd;
	/* a server slow to answer in [slow_from, slow_until) (SF_SLOW) */
	int slow_srv;
	int64_t slow_from, slow_until;
	int next_proc;
	int64_t fault_end_us;
	struct sw_server srv[SW_MAX_SRV];
	struct sw_trainer t[SW_MAX_R];
	/* the coordinator's record of each rank's step (model/redo.c) */
	struct zs_rstep rec[SW_MAX_R];
	bool hp_at[SW_MAX_STEPS]; /* the trainers set a table of that step */
	struct sw_push push[SW_MAX_PUSH];
	int n_push;
};

void sw_ev(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b);
int64_t sw_lat(struct sworld *w);
void sw_ev4(struct sworld *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b,
	    int64_t c, int64_t d);
/* sim/step_servers.c: the servers, running the cores as engine/face.c,
 * engine/replica.c, engine/replica_in.c, engine/acks.c and engine/epoch.c
 * do; a server takes the newest placement */
void sw_server_event(struct sworld *w, const struct sim_ev *ev);
void sw_take_placement(struct sworld *w, int who);
int64_t sw_seed_a(const struct sw_server *sv);
/* Whether server who is a fresh copy in the coordinator's placement (not
 * seeded yet: it may not take over). */
bool sw_fresh(const struct sworld *w, int who);
/* Whether copy who, which a primary had in the epoch it held (was_epoch),
 * is placed anew in the coordinator's placement (eng_copy_placed_anew). */
bool sw_placed_anew(const struct sworld *w, int who, uint64_t was_epoch);
/* a copy's answer to a task: taken, refused (sent again), refused for
 * want of state (seeded first), a seed refused for state it has; moot: a
 * task for a copy no longer one, ended unanswered */
enum { RF_OK, RF_AGAIN, RF_NO_STATE, RF_HAS_STATE, RF_MOOT };
/* sim/step_chan.c: a primary's tasks for its copies, in batches; each task's
 * answer goes, in order, to sw_task_answer, which sends it again
 * (sw_again) or ends it (sw_next); a task put first (a seed before a
 * forward refused for want of state) is sent by the sw_again after. */
void sw_send(struct sworld *w, int who, int to, int kind, int64_t a, int64_t d, int64_t lat);
void sw_send_first(struct sworld *w, int who, int to, int kind, int64_t a, int64_t d);
void sw_chan_answer(struct sworld *w, const struct sim_ev *ev);
int64_t sw_task_own(const struct sim_ev *ev);
void sw_again(struct sworld *w, int who);
void sw_next(struct sworld *w, int who);
void sw_chan_drop(struct sworld *w, int who, int to);
/* Copy to restarted: what who sent its earlier process, and no answer is
 * on its way for, fails as a broken connection's requests do (RF_AGAIN:
 * sent again, to the new process). */
void sw_chan_broken(struct sworld *w, int who, int to);
/* Whether who has a task of kind for copy to queued or under way. */
bool sw_chan_has(const struct sworld *w, int who, int to, int kind);
/* sim/step_servers.c: a task's answer, its turn come */
void sw_task_answer(struct sworld *w, const struct sim_ev *ev);
/* sim/step_trainer.c: the trainers (client/driver.c, client/failover.c,
 * client/redo.c) */
void sw_trainer_event(struct sworld *w, const struct sim_ev *ev);
/* sim/step_hp.c: hyperparameter tables (model/hptables.c) */
void sw_hp_plan(struct sworld *w);
/* 1 + the step of the table in force at step on server who (0: none):
 * what a forward or a seed of step carries as it is posted */
uint64_t sw_hp_carry(const struct sworld *w, int who, uint64_t step);
/* A copy takes the table a forward or a seed carried (tstep1: as above) */
void sw_hp_carried(struct sworld *w, int who, uint64_t tstep1);
/* Server who applies step: with the table the trainers set in force? */
void sw_hp_applied(struct sworld *w, int who, uint64_t step);
/* Whether rank r's next push waits for a table (its step's, sent now) */
bool sw_hp_before_push(struct sworld *w, int r);
/* The rank told of a new primary: its tables to it; whether any went */
bool sw_hp_told(struct sworld *w, int r);
void sw_hp_server_event(struct sworld *w, const struct sim_ev *ev);
/* A table's answer; true when the last awaited came */
bool sw_hp_answered(struct sworld *w, int r, const struct sim_ev *ev);
/* How long a boundary (or its answer) takes: mostly a message's time; a
 * tenth of the time a coordinator slow to answer (up to 300 ms). */
int64_t sw_coord_lat(struct sworld *w);

#endif
