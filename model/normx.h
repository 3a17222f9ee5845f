/*
 * normx.h - clipping's norm exchange at the coordinator, as pure
 * decisions: no I/O, no lock, no clock. Each server reports the squared
 * norms of its primaries' shards for a step; the step's total goes out
 * once every shard of the job is in, summed in the order of the shards
 * (their place among the placement's primaries, whoever reported them:
 * after a failover the promoted copy reports its lost primary's shard,
 * and a norm the lost one had reported stands). A report sent again counts
 * once; one with another norm for a shard in is refused. A server that
 * applied the step already (answered by a coordinator that then died
 * before it answered the others) reports it again, settled, with the
 * total it applied: the step's total must be that one, or the exchange
 * fails loudly (the servers would not clip alike). Totals that went out
 * are kept a while, by timeline: a step of a rolled-back run is not this
 * one's.
 *
 * coord/norms.c is the shell (calls waiting, replies, the heartbeats'
 * wants, the bound); the simulator's norm world (sim/norms.c) runs the
 * same functions under coordinators killed between their answers,
 * primaries lost after they reported, reports sent twice and rollbacks.
 */
#ifndef ZS_MODEL_NORMX_H
#define ZS_MODEL_NORMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One step's collection: a norm per shard (n_shards: the job's
 * primaries), and a settled report's total when one joined. */
struct zs_nx {
	uint32_t n_shards, n_have;
	double *sumsq;
	bool *have;
	bool settled;
	double settled_total;
	uint64_t settled_by;
};

/* A total that went out, kept for a report of its step sent again. */
struct zs_nx_done {
	uint64_t timeline, step;
	double total;
	uint32_t n_shards;
};

enum zs_nx_verdict {
	ZS_NX_WAIT,      /* counted (or in already); other shards still to come */
	ZS_NX_COMPLETE,  /* every shard in: *total goes out to every caller */
	ZS_NX_NOT_FINITE, /* a norm that is not a finite number >= 0: refused */
	ZS_NX_OTHER_NORM, /* a shard in already with another norm: refused */
	ZS_NX_DIVERGED,  /* the total is not the one a server applied: failed */
	ZS_NX_OLD_TIMELINE, /* a settled report of a rolled-back run: refused */
	ZS_NX_ANSWER,    /* a settled report with nothing open: answered with its own */
};

/* Whether a report of timeline r (0: from a server that does not say) is
 * of the job's run now: one of a rolled-back run, still on its way when
 * the coordinator rolled the job back, would open the step's collection
 * with norms the re-run does not have. */
bool zs_nx_timeline_ok(uint64_t r, uint64_t now);

/* Makes nc for n_shards (0 on success, -1 out of memory); nx_free frees. */
int zs_nx_init(struct zs_nx *nc, uint32_t n_shards);
void zs_nx_free(struct zs_nx *nc);

/*
 * A report of n norms (sumsq[i] for the shard at place pos[i]; each place
 * below nc's n_shards) into nc, checked whole before anything changes.
 * ZS_NX_COMPLETE with *total, the sum in place order.
 */
enum zs_nx_verdict zs_nx_report(struct zs_nx *nc, const uint32_t *pos, const double *sumsq,
				uint32_t n, double *total);

/* The kept total of step on timeline (the job's now) among kept[0..n),
 * or NULL: a step of another timeline is not this one. */
const struct zs_nx_done *zs_nx_kept(const struct zs_nx_done *kept, size_t n, uint64_t timeline,
				    uint64_t step);

/*
 * A settled report (server by, which applied step with total applied, on
 * timeline r_timeline) where the job is on timeline now: checked against
 * the kept total of its step (kept: NULL when none) and the open
 * collection (nc: NULL when none), then joins nc (its norms as
 * zs_nx_report takes them). ZS_NX_ANSWER: answered with applied, nothing
 * open; ZS_NX_WAIT or ZS_NX_COMPLETE: answered with applied and counted;
 * ZS_NX_DIVERGED, ZS_NX_OLD_TIMELINE, or a report's refusal: failed.
 */
enum zs_nx_verdict zs_nx_settled(struct zs_nx *nc, const struct zs_nx_done *kept, uint64_t now,
				 uint64_t r_timeline, uint64_t by, double applied,
				 const uint32_t *pos, const double *sumsq, uint32_t n,
				 double *total);

#endif
