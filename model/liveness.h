/*
 * liveness.h - is a trainer alive? The coordinator's judgement of one
 * member of a job, as a pure state machine.
 *
 * Its events: a renewal (the trainer's lease heartbeat, with its reconnect
 * count), a server's word that the rank's data connections there all ended
 * or began again (DroppedRanks), and the sweep's tick. Time is an input:
 * it reads no clock, takes no lock, does no I/O and is the only writer of
 * a struct zs_live. coord/recovery.c is its shell (the RPCs, the mutex,
 * the clock, the drop or rollback a verdict leads to); sim/liveness.c runs
 * it under simulated faults.
 *
 * The verdicts:
 *   GONE    its process ended: a server saw its connections end and it has
 *           not renewed for gone_ms (a live process renews every second);
 *           not while its last count was odd (it said it was making its
 *           connections again: a resume), so a process stopped between its
 *           close and its reconnect is bounded by its lease alone; nor
 *           while the connections that ended are of a reconnect it has
 *           not heard of (the coordinator restarted: counts are not
 *           persisted)
 *   LAPSED  not renewed for lease_ms: silent (stopped, partitioned) or dead
 * Each data connection's HELLO says the trainer's reconnect count, and
 * the server's word says it: the end of a connection made before a
 * reconnect the coordinator was told of is that reconnect's, not a death
 * (not marked at all). A server's "back" clears the mark: the process is
 * alive. So does a renewal whose count shows a reconnect begun since the
 * ended connection's, or one that arrives a renewal period or more after
 * the mark; not one sooner, which may have been sent before the process
 * died (renewals travel on their own connection: a dead process's last
 * one, late, made its death wait for the lease, and a rollback instead of
 * a redo; sim/liveness.c found it).
 */
#ifndef ZS_MODEL_LIVENESS_H
#define ZS_MODEL_LIVENESS_H

#include <stdbool.h>
#include <stdint.h>

/* How often a trainer renews its lease (client/lease.c), and how long it
 * tries to say it begins a reconnect before it closes its connections
 * anyway (tr_lease_reconnecting). */
#define ZS_LIVE_RENEW_MS 1000
#define ZS_LIVE_RECONNECTING_WAIT_MS 10000

struct zs_live {
	/* the coordinator's monotonic clock; 0: never since its start (the
	 * next judgement starts a lease from then) */
	int64_t last_hb_ms;
	/* when a server said its data connections all ended; 0: none since
	 * its last renewal or "back" */
	int64_t dropped_ms;
	uint64_t dropped_count; /* the reconnect count of the connection that ended */
	/* the highest reconnect count its renewals said: odd, it is making
	 * its connections again */
	uint64_t reconnects;
};

struct zs_live_cfg {
	uint32_t lease_ms; /* --trainer-lease-ms */
	uint32_t gone_ms;  /* --trainer-gone-ms */
};

enum zs_live_verdict { ZS_LIVE_OK, ZS_LIVE_GONE, ZS_LIVE_LAPSED };

/* What a server's word did to the mark (for the shell's log). */
enum zs_live_mark { ZS_LIVE_SAME, ZS_LIVE_MARKED, ZS_LIVE_CLEARED };

/* A member that joined at now. */
void zs_live_joined(struct zs_live *m, int64_t now);
/* A renewal at now, saying reconnects (an older renewal's lower count,
 * arriving late, changes nothing of the count). */
void zs_live_renewed(struct zs_live *m, int64_t now, uint64_t reconnects);
/* A server's word at now: back, the rank connected there again; else its
 * connections there all ended, the newest made at reconnect count count,
 * by the process of session session (0: not said, by an older server).
 * member: the session of the process holding the rank now; a word of
 * another process of the rank says nothing of it. */
enum zs_live_mark zs_live_connections(struct zs_live *m, int64_t now, bool back, uint64_t count,
				      uint64_t session, uint64_t member);
/* The sweep at now: the verdict, and *quiet the ms since its last
 * renewal. A member never renewed since the coordinator's start gets a
 * lease from now. */
enum zs_live_verdict zs_live_judge(struct zs_live *m, int64_t now, const struct zs_live_cfg *cfg,
				   int64_t *quiet);
const char *zs_live_verdict_name(enum zs_live_verdict v);

#endif
