/*
 * conns.h - which trainer ranks hold data connections to a server, and
 * what the coordinator must be told of it: a pure state machine.
 *
 * Its events: a connection of a rank began (a HELLO the engine took) or
 * ended (the listener's bye); the daemon took the notes to send, or gave
 * back those the coordinator did not take. It reads no clock, takes no
 * lock and does no I/O; engine/ranks.c is its shell (the engine's mutex,
 * the job's table), server/member.c sends the notes, and sim/liveness.c
 * runs it under simulated faults.
 *
 * A rank whose last connection ends is noted dropped (the coordinator
 * takes a dropped rank that also stops renewing its lease for gone, in
 * seconds). A live process closes its connections too (a resume, a
 * failover reconnect), so a dropped rank that connects again is noted
 * back; a drop and a back never sent cancel out. Notes the daemon took and
 * could not send (the coordinator away, or its answer lost) are given
 * back, kept: they may have reached it, so a newer note never cancels one;
 * it follows it, and the coordinator takes them in order.
 */
#ifndef ZS_ENGINE_CONNS_H
#define ZS_ENGINE_CONNS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

/* One rank of one job on this server. */
struct zs_conns {
	uint32_t conns; /* its data connections here now */
	bool dropped;   /* its last one ended, and it has not connected since */
	/* the newest of its connections since its last drop (the highest
	 * reconnect count of the latest process's session): the end of them
	 * all is that reconnect's, of that process (an older connection whose
	 * end comes last says nothing of when the newer ones began) */
	uint64_t newest, session;
};

enum zs_conns_note { ZS_CONNS_NONE, ZS_CONNS_DROPPED, ZS_CONNS_BACK };

/* A connection of the rank began, its HELLO saying reconnect count count
 * and session session: ZS_CONNS_BACK when it had been noted dropped.
 * *note_count, *note_session: what to note. */
enum zs_conns_note zs_conns_up(struct zs_conns *r, uint64_t count, uint64_t session,
			       uint64_t *note_count, uint64_t *note_session);
/* A connection of the rank ended (*note_count: its HELLO's count):
 * ZS_CONNS_DROPPED when it was its last (none when it had none counted);
 * *note_count and *note_session become the newest connection's (what the
 * note says). */
enum zs_conns_note zs_conns_down(struct zs_conns *r, uint64_t *note_count, uint64_t *note_session);

/* The notes for the coordinator, oldest first (the coordinator ignores
 * the end of a connection made before a reconnect the trainer told it
 * of: the count says which reconnect each belonged to, model/liveness.h).
 * The coordinator's mark of a rank follows the last note it takes (a back
 * clears, a drop marks), so a rank has at most one note waiting, the
 * latest word, besides one in the batch on its way. A batch stays until
 * it is settled: not sent, it goes again, before anything newer (it may
 * have reached the coordinator whatever the answer). "A drop and a back
 * cancel out" was wrong: with an earlier drop on its way and lost, the
 * drop went again last and a live rank stayed marked (sim/liveness.c). */
struct zs_notes {
	struct zs_dropped *v;
	uint32_t n, cap;
	uint32_t flight; /* the first flight notes are taken and not settled */
};

/* Notes rank of job (incarnation inc) dropped or back, with the newest
 * reconnect count of its connections: it replaces the rank's note waiting,
 * if any. false: out of memory, nothing noted (the rank's lease still
 * bounds). */
bool zs_notes_add(struct zs_notes *l, const char *job, uint64_t inc, uint32_t rank, bool back,
		  uint64_t reconnects, uint64_t session);
/* Takes up to max notes, oldest first, into out (none while a batch is
 * taken and not settled): how many. They stay until zs_notes_settle. */
uint32_t zs_notes_take(struct zs_notes *l, struct zs_dropped *out, uint32_t max);
/* The batch taken: sent (the coordinator answered: dropped from the list)
 * or not (kept, in front, to be taken again). */
void zs_notes_settle(struct zs_notes *l, bool sent);
void zs_notes_free(struct zs_notes *l);

#endif
