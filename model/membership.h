/*
 * membership.h - is a shard server up? The coordinator's judgement of one
 * registered server, as a pure state machine.
 *
 * Its events: a registration (fresh: a process started without the state
 * of its last), a heartbeat, and the reaper's sweep. Time is an input: it
 * reads no clock, takes no lock, does no I/O and is the only writer of a
 * struct zs_mbr. coord/members.c is its shell (the RPCs, the mutex, the
 * clock, and what its effects lead to: a lost server's failover or its
 * job's rollback, lost copies rebuilt on one come up); sim/losses.c runs
 * it under simulated faults.
 *
 * States:
 *   UNHEARD  in the catalog, not heard from since this coordinator began
 *            to serve (liveness is not persisted: a restart, a takeover).
 *            Not up (nothing is placed on it) and not yet down: trainers
 *            are not told it is down, as it may be on its way. It gets a
 *            lease from the first sweep that finds it, and one that misses
 *            it is lost as an up server that missed its lease would be.
 *            (Before, an unheard server was never judged: one that died
 *            while no coordinator served was never failed over from, and
 *            the ranks that waited on it ran out their bound.)
 *   UP       heard within its lease
 *   DOWN     missed its lease; up again at its next heartbeat
 */
#ifndef ZS_MODEL_MEMBERSHIP_H
#define ZS_MODEL_MEMBERSHIP_H

#include <stdbool.h>
#include <stdint.h>

enum zs_mbr_state { ZS_MBR_UNHEARD, ZS_MBR_UP, ZS_MBR_DOWN };

struct zs_mbr {
	enum zs_mbr_state state;
	/* the coordinator's monotonic clock: its last heartbeat or
	 * registration (0: none since the coordinator began to serve), and,
	 * unheard, when its lease began (0: no sweep has found it yet) */
	int64_t last_hb_ms;
	int64_t unheard_since_ms;
};

/* The effects of an event, as bits, for the shell to carry out. */
enum {
	ZS_MBR_CAME_UP = 1u << 0,   /* up (first, or again): say so; put lost copies on it */
	ZS_MBR_RESTARTED = 1u << 1, /* its process began without its state: its copies are lost */
	ZS_MBR_LOST = 1u << 2,      /* it missed its lease: marked down; fail over from it */
};

/* A server as the catalog holds it (the coordinator's start, a takeover). */
void zs_mbr_loaded(struct zs_mbr *m);
/* Its registration at now; fresh: its process has none of its jobs' state. */
unsigned zs_mbr_registered(struct zs_mbr *m, int64_t now, bool fresh);
/* Its heartbeat at now. */
unsigned zs_mbr_heartbeat(struct zs_mbr *m, int64_t now);
/* The sweep at now, with a lease of lease_ms: LOST once, when it misses
 * it; *quiet: the ms since it was last heard (or since its lease began). */
unsigned zs_mbr_judge(struct zs_mbr *m, int64_t now, uint32_t lease_ms, int64_t *quiet);
/* Whether placements may use it (heard within its lease). */
bool zs_mbr_up(const struct zs_mbr *m);
/* Whether trainers waiting on it are told it is down. */
bool zs_mbr_down(const struct zs_mbr *m);
/* The ms since it was last heard at now; -1: not since the coordinator
 * began to serve. */
int64_t zs_mbr_seen_ago(const struct zs_mbr *m, int64_t now);

#endif
