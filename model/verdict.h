/*
 * verdict.h - what a lost server means to a rank that waits, decided: the
 * step driver's wait on an op, a replicated job's failover, and the wait
 * for the coordinator's verdict on a loss, as pure state machines (no
 * lock, no I/O, no clock: the time is an argument, and what the shell
 * looked at, a connection or the coordinator, is an event). Their shells
 * are client/driver.c (wait_op), client/failover.c (tr_failover) and
 * client/verdict.c (tr_verdict); sim/losses.c runs them under servers
 * killed, restarted and stopped, with replicas and without.
 *
 * What they keep true: a server lost, with or without replicas, reaches a
 * waiting rank as a failover (the wait goes on, its requests sent again
 * to the new primaries) or as a rollback (ZS_ERESUME: resume in the same
 * process), whatever the rank waited on, once the coordinator says so
 * within the step driver's bound; a status never loses the fact that the
 * job rolled back; a server that only paused, back within the bound,
 * costs nothing; and no wait lasts past its bound.
 */
#ifndef ZS_MODEL_VERDICT_H
#define ZS_MODEL_VERDICT_H

#include <stdbool.h>
#include <stdint.h>

#include "include/zshard_status.h"

/* What the shell does next. */
enum zs_lv_act {
	ZS_LV_WAIT,     /* wait on: another slice, or look again after the poll period */
	ZS_LV_ASK,      /* ask the coordinator whether the job rolled back, then tell */
	ZS_LV_RESUME,   /* the job rolled back: ZS_ERESUME */
	ZS_LV_TAKE,     /* (a failover) the placement without the lost server: take it */
	ZS_LV_BACK,     /* (a failover) the server is back: nothing to fail over from */
	ZS_LV_FAIL,     /* the status stands */
	ZS_LV_TIMEDOUT, /* the bound passed */
};

/* ---------------------------------------------------- the driver's wait */

/* One op's wait (wait_op), in slices. */
struct zs_opwait {
	int64_t deadline;
	bool down; /* a server of the placement lost: waited for, or for the rollback */
};
void zs_opw_start(struct zs_opwait *w, int64_t now, int bound_ms);
/*
 * A slice ended at now with the op still running. lost: the shell saw a
 * server lost between the slices (replicated: a broken connection or a
 * server marked down whose failover failed, failover_resume saying whether
 * because the job rolled back instead; else: a server marked down).
 * WAIT, ASK (then zs_opw_told), RESUME, FAIL (a failover that failed:
 * ZS_EUNAVAIL) or TIMEDOUT.
 */
enum zs_lv_act zs_opw_slice(struct zs_opwait *w, int64_t now, bool lost, bool replicated,
			    bool failover_resume);
/* The coordinator's word, asked after a slice: WAIT or RESUME. */
enum zs_lv_act zs_opw_told(struct zs_opwait *w, bool rolled_back);

/* ------------------------------------------------- a replicated failover */

/*
 * tr_failover's poll, at now against its deadline: answered, whether the
 * coordinator answered (else the call's status stands past the deadline);
 * then the job's timeline there against the rank's, and whether its
 * placement has no primary on the lost server any more; back, whether the
 * server is whole again as the rank sees it (its connection unbroken, and
 * the latest renewal no longer marks it down: a mark the rank held from
 * before a rollback's restore, which put its shards back there, or a
 * server that paused). RESUME (rolled back instead), TAKE, BACK (the wait
 * goes on), WAIT (poll again), FAIL (the call's status) or TIMEDOUT.
 */
enum zs_lv_act zs_fo_look(int64_t now, int64_t deadline, bool answered, uint64_t timeline,
			  uint64_t job_timeline, bool moved, bool back);

/* ----------------------------------------- the coordinator's verdict */

/* How long a failure may take to show as a loss (a peer's FIN read by the
 * connection's thread, the coordinator's word in a renewal). */
#define ZS_VERDICT_SHOW_MS 2000

/* A trainer's: 1 + the timeline whose verdict it waited for in vain. */
struct zs_verdict {
	uint64_t given_up1;
};
/* One wait for it (tr_verdict). */
struct zs_vdwait {
	int64_t t0, deadline;
	uint64_t timeline;
	bool seen; /* a loss seen */
	bool once; /* given up on this timeline before: look once, then the status stands */
};
/*
 * A wait failed with st at now: ASK (then zs_vd_told) when st says a
 * server was lost (ZS_EUNAVAIL) and the trainer has a coordinator to ask;
 * else FAIL (st stands).
 */
enum zs_lv_act zs_vd_start(struct zs_vdwait *w, const struct zs_verdict *v, enum zs_status st,
			   bool coord, uint64_t timeline, int64_t now, int bound_ms);
/*
 * What the look found at now: rolled_back (the job's timeline moved, or the
 * rank was evicted), loss (the trainer sees a server lost). RESUME; FAIL
 * (no loss shown within ZS_VERDICT_SHOW_MS: a live server's refusal, or
 * given up on before); WAIT (look again after the poll period); TIMEDOUT
 * (no verdict within the bound: given up on this timeline, the status
 * stands).
 */
enum zs_lv_act zs_vd_told(struct zs_vdwait *w, struct zs_verdict *v, int64_t now,
			  bool rolled_back, bool loss);

#endif
