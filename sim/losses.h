/*
 * losses.h - the loss world's state (sim/losses.c: the ranks and a run;
 * sim/losses_nodes.c: the coordinator and the servers).
 */
#ifndef ZS_SIM_LOSSES_H
#define ZS_SIM_LOSSES_H

#include <stdbool.h>
#include <stdint.h>

#include "model/membership.h"
#include "model/verdict.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define MS 1000
#define RUN_MS 150000
#define FAULTS_MS 60000
#define NS 3
#define NR 3
#define OPS 30
#define BOUND_MS 10000 /* the step driver's bound (zs_policy.op_timeout_ms, scaled) */
#define LEASE_MS 3000  /* a server's lease at the coordinator */
#define SLICE_MS 250
#define POLL_MS 100
#define CALL_MS 500    /* a coordinator call that gets no answer fails after this */

enum lw_kind {
	LW_HB,       /* who: server. Its heartbeat, every 500 ms */
	LW_SWEEP,    /* the coordinator's reaper */
	LW_KILL,     /* who: server */
	LW_RESTART,  /* who: server */
	LW_PAUSE,    /* who: server; a: for how long */
	LW_CONT,     /* who: server; a: its pause's number */
	LW_CUT,      /* who: rank; a: for how long */
	LW_SERVE,    /* who: server; a: rank; b: request; c: its incarnation */
	LW_REPLY,    /* who: rank; a: request; b: status */
	LW_TICK,     /* who: rank; a: its epoch. A slice, a poll, the next op */
	LW_LOOK,     /* who: rank; a: its epoch. Its question at the coordinator */
	LW_ANSWER,   /* who: rank; a: epoch; b: answered; c: the job's timeline; d: moved */
	LW_RENEW,    /* who: rank; a: 0 (send) or 1 + the job's timeline (the reply) */
	LW_COORD_KILL,  /* the coordinator killed (its liveness marks are not persisted) */
	LW_COORD_START, /* and started again: its catalog loaded, its restore resumed */
};

struct lw_server {
	bool alive;
	int inc;             /* its incarnation: a connection is to one */
	int64_t paused_until;
	int pauses;
	/* the coordinator's view: the real core (model/membership.h) */
	struct zs_mbr m;
	bool registering; /* started again, its registration not yet taken */
	/* requests held while stopped: rank, request */
	int held[NR * 4][2];
	int n_held;
};

enum lw_phase { LP_IDLE, LP_OP, LP_FO, LP_VD, LP_RESUME, LP_DONE };
enum lw_from { LF_SLICE, LF_REQ };

struct lw_rank {
	enum lw_phase ph;
	int ep;               /* its timers and questions of an earlier phase are dropped */
	uint64_t tl, seen_tl;
	int primary[NS];      /* its placement: each shard's primary (-1: none) */
	int conn_inc[NS];     /* the incarnation each connection is to */
	bool down[NS];        /* marked down, as of its last renewal */
	int64_t cut_until;
	bool cut_in_wait;     /* it could not hear the coordinator during this wait */
	int ops;
	/* the op; its request's answer, come while a failover ran (0: none) */
	int shard, server, req;
	int kept_st1;
	struct zs_opwait w;
	/* a failover: from a slice or a request; the lost server; its deadline */
	enum lw_from fo_from;
	int fo_lost, lost_tried;
	bool fo_refused; /* the server answered that it holds the shard no more */
	int64_t fo_deadline;
	/* the verdict */
	struct zs_verdict v;
	struct zs_vdwait vw;
	enum zs_status vst;
	int64_t wait_t0;
};

struct lworld {
	struct sim s;
	struct sim_stats *st;
	int S, R;
	bool replicated;
	struct lw_server sv[NS];
	struct lw_rank r[NR];
	int next_req;
	/* the coordinator: its timeline (and when it last moved), each shard's
	 * copies (-1: none), primary first */
	uint64_t tl;
	int64_t rolled_at;
	int copies[NS][2];
	int copy_inc[NS][2]; /* the incarnation of each copy's server when placed */
	bool restoring;      /* a rollback's restore, until every server of it answers */
	bool coord_down;     /* the coordinator killed, not yet started again */
	int kills;
};

/* sim/losses_nodes.c: an event, a message's latency, whether server s
 * is stopped, whether rank i is cut off from the coordinator (or it is
 * down) */
void lx_ev(struct lworld *w, int64_t d, int kind, int who, int64_t a, int64_t b, int64_t c,
	   int64_t dd);
int64_t lx_lat(struct lworld *w);
bool lx_paused(const struct lworld *w, int s);
bool lx_cut(const struct lworld *w, int i);
/* each shard's copies as first placed; whether a rollback's restore is
 * done (every server of it answers), and if so the job's copies settled */
void lx_place(struct lworld *w);
bool lx_restored(const struct lworld *w);
void lx_settle(struct lworld *w);
/* the coordinator's and servers' events */
void lx_heartbeat(struct lworld *w, int s);
void lx_sweep(struct lworld *w);
void lx_at_coordinator(struct lworld *w, const struct sim_ev *e);
void lx_serve(struct lworld *w, const struct sim_ev *e);
void lx_fault(struct lworld *w, const struct sim_ev *e);

#endif
