/*
 * repl.h - a shard's copies: a primary's forwards queued (replica.c; sent
 * by forward.c), a copy taking them (replica_in.c), the pushes
 * acknowledged once on every copy (acks.c), the connections to the
 * copies' servers (peers.c), and a new placement epoch taken in place
 * (epoch.c). Internal to the engine.
 */
#ifndef ZS_ENGINE_REPL_H
#define ZS_ENGINE_REPL_H

#include "engine/step.h"

/* acks.c */
/* A replicated job's push of step landed (caller holds s->mu): kept until
 * that step is on every copy; false when out of memory (answer it now). */
bool eng_ack_later(struct eshard *s, struct zs_sop *op, uint64_t step);
/* Acknowledges the kept pushes whose step every copy has applied (those
 * below version, or version - 1 while its forward is out). */
void eng_acks_flush(struct eshard *s);
/* Fails every kept push (a restore, a failed forward, the shard dropped). */
void eng_acks_fail(struct eshard *s, enum zs_status st, const char *why);

/* epoch.c: j's shards take placement job's roles in place (a replica promoted,
 * peers gone): ZS_OK; ZS_ESTATE when the shards here differ (the caller
 * then starts over). Caller holds no lock. */
enum zs_status eng_reassign(struct engine *e, struct ejob *j, const struct zs_job *job,
			    uint64_t server_id);
/* replica.c: a primary with replicas has reached a new version (init: its initial
 * parameters, m their fp32 values): queues the forward to every copy and
 * sets repl.wait (caller holds s->mu). */
void eng_repl_queue(struct engine *e, struct ejob *j, struct eshard *s, bool init, const float *m);
/* A new copy of primary s on server peer (a rebuild): queues the shard's
 * whole state at its version to it, ahead of the forwards after (caller
 * holds s->mu). */
void eng_repl_seed(struct engine *e, struct ejob *j, struct eshard *s, uint64_t peer);
/* A copy promoted with no mean gradient of its last step (ER_CATCH_UP):
 * queues its whole state to every copy, taken by one behind it, and sets
 * repl.wait until all have answered (caller holds s->mu). */
void eng_repl_catchup(struct engine *e, struct ejob *j, struct eshard *s);
/* replica_in.c: a replica's side of a forward: the write's destination (caller holds
 * nothing), and its landing (applies the step, then acknowledges). */
enum zs_status eng_repl_begin(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
			      const struct zs_xfer *x, void **dst, struct zs_error *err);
void eng_repl_landed(struct engine *e, struct ejob *j, struct eshard *s, const struct zs_xfer *x,
		     void *dst, struct zs_sop *op);
/* A replicated job's partial push (rank, x) landed in primary s at dst
 * (its term in the reduction already, unless dup): forwarded to every copy
 * from dst, acknowledged (op) and dst given back once all have it; at
 * once with no copy (caller holds s->mu). */
void eng_repl_partial(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
		      const struct zs_xfer *x, void *dst, struct zs_sop *op);
/* epoch.c: a trainer's request reached replica s of j: true when a newer placement
 * (now taken) made it its shard's primary (caller holds no lock). */
bool eng_promoted_since(struct engine *e, struct ejob *j, struct eshard *s);
/* A shard's peers: the servers of its other copies in placement p when it
 * is the primary there, none otherwise. */
void eng_shard_peers(struct eshard *s, const struct zs_placement *p);
/* replica.c: starts and stops the replicator's thread. */
enum zs_status eng_repl_start(struct engine *e, struct zs_error *err);
void eng_repl_stop(struct engine *e);

/* replica_in.c: the forward of s's open step that landed in its mean
 * gradient ends unapplied (aborted, or the step applied since): the
 * landing is over, and a step it held back completes (caller holds s->mu;
 * fx after). */
void eng_repl_unlanded(struct engine *e, struct ejob *j, struct eshard *s, struct eng_fx *fx);

/* peers.c: closes a job's connections to its copies' servers */
void eng_repl_close(struct ejob *j);
/* the connection to peer server id for j (made when missing), or
 * NULL (why in err); a connection marked broken (its requests fail) is
 * closed by eng_peers_reap once nothing waits on its requests (the
 * replicator's worker alone calls these). */
struct zs_conn *eng_peer_conn(struct engine *e, struct ejob *j, uint64_t id, struct zs_error *err);
void eng_peer_broken(struct ejob *j, uint64_t id);
void eng_peers_reap(struct ejob *j);

#endif
