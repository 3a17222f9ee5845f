/*
 * world.h - what a simulated world gives sim/main.c: run one seed, count
 * what it did. sim/liveness.c is the first world: the trainers' liveness
 * protocol (model/liveness.c, engine/conns.c) among a coordinator, servers
 * and trainers under faults; sim/step.c the second: a shard's open step
 * (engine/intake.c) under trainer deaths, redos and failovers; sim/ckpt.c
 * the third: a checkpoint's commit and a job's way back (model/commit.c)
 * under servers and coordinators killed and records flipped; sim/norms.c
 * the fourth: clipping's norm exchange (model/normx.c) under coordinators
 * killed between their answers, failovers and rollbacks; sim/readers.c
 * the fifth: the weight readers' relay tree (model/relaytree.c);
 * sim/bounds.c the sixth: the step boundary's answers (model/boundary.c)
 * under late answers, retries, stops and rollbacks; sim/losses.c the
 * seventh: what a lost server means to a waiting rank (model/verdict.c).
 */
#ifndef ZS_SIM_WORLD_H
#define ZS_SIM_WORLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum sim_fault {
	SF_PAUSE,        /* a trainer stopped (SIGSTOP) for less than its lease */
	SF_PAUSE_AFTER,  /* one stopped right after its next action */
	SF_KILL,         /* a trainer killed (SIGKILL); a replacement joins */
	SF_CUT_TRAINER,  /* a trainer and the coordinator partitioned */
	SF_CUT_SERVER,   /* a server and the coordinator partitioned */
	SF_SLOW,         /* one message delayed (a queue, a descheduled thread) */
	SF_SERVER_RESTART,
	SF_COORD_RESTART,
	SF_RESET,        /* one trainer-server connection ended by the network */
	SF_FAILOVER,     /* (the step world) a shard's primary lost, its copy promoted */
	SF_FLIP,         /* (the checkpoint world) a record flipped on a server's disk */
	SF_RECREATE,     /* (the checkpoint world) a job deleted and created again */
	SF_ROLLBACK,     /* (the reader and boundary worlds) the job rolled back: a new timeline */
	SF_STOP,         /* (the boundary world) zshardctl job stop */
	SF_COUNT
};

struct sim_stats {
	uint64_t seeds, failed, events, checks;
	uint64_t faults[SF_COUNT];
	uint64_t verdicts_gone, verdicts_lapsed;
	/* deaths whose gone bound was checked (and held); deaths the lease
	 * alone could see (killed with no data connection, or mid-reconnect) */
	uint64_t fast_checked, lease_only;
	/* the step world: steps applied, pushes taken (again: in already),
	 * replacements that redid a step; copies placed back on their server
	 * started again empty, and of those seeded whole again */
	uint64_t steps, pushes, again, redos, tables, placed_back, seeded_back;
	/* the checkpoint world: checkpoints taken, committed, rollbacks,
	 * restores found bad and fallen back from */
	uint64_t ckpts, commits, restores, fallbacks;
	/* the norm world: steps clipped alike everywhere, settled reports,
	 * exchanges failed (a diverged copy's), rollbacks */
	uint64_t clipped, settled_reports, exchange_fails, norm_rollbacks;
	uint64_t norm_gaps; /* exchanges failed by the bound: a known double fault */
	uint64_t reads; /* the reader world: versions read whole (from a parent or the servers) */
	/* the boundary world: steps begun on a boundary's answer, boundaries
	 * whose wait passed its bound (the call made again) */
	uint64_t bounds, bound_timeouts;
	uint64_t resizes; /* the boundary world: resizes named */
	/* the loss world: ranks told to resume, ops failed (cut off from the
	 * coordinator past the bound) */
	uint64_t loss_resumes, loss_failures;
	uint64_t loss_unheard; /* servers marked down unheard since the coordinator's start */
};

/* Runs the liveness world from seed. 0: every invariant held; 1: one did
 * not, why says which (the first). The trace, when tracing, is printed to
 * stdout as it ends. */
int live_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
/* Runs the step world from seed (sim/step.c), as live_run. */
int step_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
/* Runs the checkpoint world from seed (sim/ckpt.c), as live_run. */
int ckpt_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
/* Runs the norm world from seed (sim/norms.c), as live_run. */
int norms_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
/* Runs the reader world from seed (sim/readers.c), as live_run. */
int readers_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
/* Runs the boundary world from seed (sim/bounds.c), as live_run. */
int bounds_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
/* Runs the loss world from seed (sim/losses.c), as live_run. */
int losses_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
/* Every world from seed, each while the ones before held: liveness, step,
 * checkpoint, norms, readers, boundaries, losses. */
int sim_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n);
const char *sim_fault_name(int k);
/* zshard-sim --fleet: the time model of a run at a fleet's failure rate
 * (sim/fleet.c); argv as main's. */
int fleet_main(int argc, char **argv);

#endif
