/*
 * state.h - the coordinator's state and the helpers its files share,
 * internal to coord/. One mutex (coord.mu) guards it all; RPC handlers run
 * on the RPC server's CQ thread, the lease reaper on its own. Every change
 * is built aside, committed to LMDB (catalog.c) and only then swapped into
 * memory, so a failed commit changes nothing and a SIGKILL at any point
 * leaves the old or the new record.
 *
 * Files: coord.c (life, the method table), lookup.c (shared lookups and
 * replies),
 * catalog.c (the LMDB catalog: records in and out), members.c (servers:
 * registration, heartbeats, leases, assignments), jobs.c (jobs, stage,
 * placement, trainer joins), ckpts.c (checkpoints in the catalog),
 * ckpt_tasks.c (the server tasks that take, restore and delete them, a
 * rollback to the latest committed one, and
 * the commit), norms.c (the global-norm exchange for
 * clipping), reports.c (per-rank step reports), recovery.c (trainer
 * leases, and the rollback of a job that lost a process).
 */
#ifndef ZS_COORD_STATE_H
#define ZS_COORD_STATE_H

#include "coord/coord.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrl/codec.h"
#include "storage/kv.h"
#include "base/log.h"
#include "ctrl/methods.h"
#include "model/model.h"
#include "model/placement.h"
#include "ctrl/rpc.h"
#include "base/util.h"
#include "base/version.h"

/* members: one record per joined trainer (key: job name, NUL, rank big
 * endian), so that a join or a leave commits O(1) bytes; a job's record
 * holds everything else. A checkpoint's record (ckpts: key job name, NUL,
 * id big endian) holds what changes as servers report; what it was taken
 * on (ckplace: the placement, written once) and each rank's blob
 * (ckblobs: the checkpoint's key, rank big endian) are records of their
 * own, so that a server's report commits O(servers) bytes, not the
 * placement (O(shards)) and every blob again */
enum { T_META, T_SERVERS, T_JOBS, T_CKPTS, T_MEMBERS, T_CKPLACE, T_CKBLOBS, N_TABLES };
static const char *const tables[] = {"meta",    "servers", "jobs",  "ckpts",
				     "members", "ckplace", "ckblobs"};

/* A job's record as last committed (catalog.c), for the replies to joins. */
struct jobrec {
	char name[ZS_JOB_NAME_MAX];
	struct zs_buf b;
	struct jobrec *next;
};

struct srv {
	struct zs_server_info info; /* as registered (up/used/last_seen derived) */
	int64_t last_hb_ms;         /* monotonic; 0: never since our start */
	bool up;
};

/* A step's norm collection for global-norm clipping (see h_report_norm). */
struct norm_wait {
	struct zs_rpc_call *call;
	uint64_t server_id;
};

struct norm_coll {
	char job[ZS_JOB_NAME_MAX];
	uint64_t step;
	int64_t started_ms;
	int64_t serving_since_ms; /* the start, or the takeover with etcd */
	uint32_t n_shards, n_have; /* primaries (a replica reports no norm) */
	double *sumsq; /* by the shard's place among the placement's primaries */
	bool *have;
	struct norm_wait *waits;
	size_t n_waits;
	/* a server's settled report joined: the total it applied already
	 * (sent by a coordinator that died before it answered the others) */
	bool settled;
	double settled_total;
	uint64_t settled_by;
	/* the servers owning shards not in, sorted (NULL: not listed yet), as
	 * of n_have == miss_have and placement epoch miss_epoch (the
	 * heartbeats' wants look them up; listed again as reports come or the
	 * placement changes) */
	uint64_t *miss;
	uint32_t n_miss, miss_have;
	uint64_t miss_epoch;
	struct norm_coll *next;
};

/* A step's total, kept after it went out (norms.c). */
struct norm_done {
	char job[ZS_JOB_NAME_MAX];
	uint64_t timeline, step;
	double total;
	uint32_t n_shards;
	struct norm_done *next;
};

/* A restore or a delete some servers still have to carry out (in memory). */
/* A weight reader as registered (readers.c; metrics.c counts them). */
struct rdr {
	char job[ZS_JOB_NAME_MAX];
	struct zs_reader_info i;
	int64_t seen_ms;
	struct rdr *next;
};

struct ctask {
	struct zs_task t;
	uint64_t *pending; /* server ids */
	uint32_t n_pending;
	struct ctask *next;
};

/* The distinct servers of a job's placement, sorted (lookup.c): computed
 * once per placement, not at every checkpoint report. */
struct jobsrv {
	char job[ZS_JOB_NAME_MAX];
	uint64_t incarnation;
	uint64_t epoch;
	const struct zs_shard *shards; /* the placement it was computed from */
	uint32_t n_shards;
	uint64_t *ids;
	uint32_t n;
	struct jobsrv *next;
};

/* The latest step report of each rank of a job (in memory only). */
struct sreports {
	char job[ZS_JOB_NAME_MAX];
	uint32_t n;               /* the job's world size */
	struct zs_step_report *r; /* by rank; reported_ms 0: none yet */
	struct sreports *next;
};

struct coord {
	pthread_mutex_t mu;
	struct zs_kv *kv;
	struct zs_rpc_server *rpc;
	pthread_t reaper;
	atomic_int stop;
	int lock_fd;
	int64_t started_ms;
	int64_t serving_since_ms; /* the start, or the takeover with etcd */
	/* as configured */
	struct coord_cfg {
		uint32_t lease_ms;
		uint32_t trainer_lease_ms;
		uint32_t trainer_gone_ms; /* recovery.c */
		bool tls_roles_required;  /* roles.c */
		bool data_tls;            /* jobs.c: every job encrypted */
		char addr[ZS_ADDR_MAX];
		char adv[ZS_ADDR_MAX]; /* the address Status reports (--advertise) */
		char data_dir[512];
	} cfg;

	uint64_t next_server_id;
	uint64_t assign_gen;
	uint64_t task_gen; /* grows when server tasks change; not persisted: it
			    * starts at the wall clock's microseconds */
	struct srv *srvs;
	size_t n_srvs;
	struct zs_job *jobs;
	size_t n_jobs;
	/* clipping's norm exchanges (norms.c): those open, the totals that
	 * went out (the last few per job), the bound of an open one */
	struct coord_nx {
		struct norm_coll *colls;
		struct norm_done *done;
		uint32_t timeout_ms;
	} nx;
	/* checkpoints: the catalog (in id order) and the work in flight */
	struct coord_ck {
		uint64_t next_id;
		struct zs_checkpoint *list;
		size_t n;
		struct ctask *tasks;
	} ck;
	struct sreports *reports;
	struct rsteps *rsteps; /* the ranks' step states (redo.c) */
	struct comm *comms; /* trainers' communicator ids (comms.c) */
	struct rdr *readers; /* weight readers (readers.c) */
	uint64_t next_reader;
	struct jobrec *recs;
	struct jobsrv *jobsrvs;
	struct coord_metrics *metrics; /* NULL without --metrics */
	/* the secret key the catalog's job tokens are sealed with (ctrl/seal.h;
	 * catalog.c): on unless the catalog is in etcd and no --secret-key */
	struct coord_seal {
		bool on;
		uint8_t key[32];
		char path[4096]; /* its file, for messages */
		uint32_t resealed; /* tokens found in the clear at load, sealed */
	} seal;

	/* etcd (lead.c): the catalog there, one of several coordinators
	 * leading; etcd NULL: LMDB under data_dir, and this one always leads */
	struct coord_ha {
		struct zs_etcd *etcd;
		char prefix[128];
		char key[160];    /* PREFIX/leader */
		int64_t fence;    /* that key's create revision while we lead */
		int64_t lease;    /* our etcd lease (0: none) */
		/* our lease may end then, less a margin (our clock, ms): a
		 * leader serves until */
		_Atomic int64_t until;
		uint32_t ttl_s;
		atomic_int leading; /* serving; without etcd always */
		atomic_int lost;    /* lost the lead: the process ends */
		pthread_mutex_t mu;
		char leader[ZS_ADDR_MAX]; /* who leads, as last read (mu) */
		pthread_t elector;
		bool elector_started;
		/* a commit found another leader's fence (store.c): the lead is
		 * lost (lead.c's coord_lead_lost) */
		void (*fenced)(struct coord *c, const char *why);
	} ha;
};

/* lead.c */
/* Starts campaigning (a thread): endpoints "HOST:PORT,...", keys under
 * prefix (NULL: /zshard), a lease of lease_s seconds (0: 5). */
enum zs_status coord_lead_start(struct coord *c, const char *endpoints, const char *prefix,
				uint32_t lease_s, struct zs_error *err);
/* Stops campaigning; a leader hands over (revokes its lease). The etcd
 * client stays for a call still being handled: coord_lead_close, once the
 * RPC server is gone. */
void coord_lead_stop(struct coord *c);
void coord_lead_close(struct coord *c);
/* The RPC gate: a standby refuses every call, naming the leader. */
bool coord_gate(void *ctx, size_t method, struct zs_rpc_call *call);
/* The lead is gone (a fenced write, a lease not renewed): stop serving. */
void coord_lead_lost(struct coord *c, const char *why);

/* store.c: the catalog's records in LMDB or etcd (see store.c) */
struct cstore_txn;
struct cstore_read {
	struct zs_kv_txn *kv;
	int64_t rev;
};
enum zs_status cstore_begin(struct coord *c, struct cstore_txn **out, struct zs_error *err);
enum zs_status cstore_put(struct cstore_txn *t, unsigned table, const void *key, size_t kl,
			  const void *val, size_t vl, struct zs_error *err);
enum zs_status cstore_del(struct cstore_txn *t, unsigned table, const void *key, size_t kl,
			  struct zs_error *err);
enum zs_status cstore_del_prefix(struct cstore_txn *t, unsigned table, const void *prefix,
				 size_t pl, struct zs_error *err);
/* Commits (durably) and frees the batch, even on failure. */
enum zs_status cstore_commit(struct cstore_txn *t, struct zs_error *err);
void cstore_abort(struct cstore_txn *t); /* NULL is fine */
/* Reads every table from one snapshot. */
enum zs_status cstore_read_begin(struct coord *c, struct cstore_read *r, struct zs_error *err);
enum zs_status cstore_foreach(struct coord *c, struct cstore_read *r, unsigned table,
			      zs_kv_visit fn, void *ctx, struct zs_error *err);
void cstore_read_end(struct cstore_read *r);

/* jobs.c */
/* A fresh data-plane token: 32 hex digits of the system's randomness. */
void coord_new_token(char out[ZS_TOKEN_MAX]);
/* A fresh incarnation: 64 random bits, never 0. */
uint64_t coord_new_incarnation(void);

/* Whether checkpoint k was taken by job j as it is now: its name and its
 * incarnation (a job deleted and created again under the name has
 * another, and never sees, restores or rolls back to the earlier one's). */
static inline bool coord_ckpt_of(const struct zs_checkpoint *k, const struct zs_job *j)
{
	return j && k->incarnation == j->incarnation && !strcmp(k->job, j->spec.name);
}

/* metrics.c: --metrics HOST:PORT, Prometheus text at /metrics */
enum coord_event { COORD_EV_SERVER_LAPSE, COORD_EV_TRAINER_LAPSE, COORD_EV_ROLLBACK,
		   COORD_EV_FAILOVER, COORD_EV_BAD_CKPT };
/* advertise: --advertise (its host replaces the bound one in what Status
 * says), or NULL; certified: only clients with a certificate of the CA */
enum zs_status coord_metrics_start(struct coord *c, const char *addr, const char *advertise,
				   bool certified, const struct zs_rpc_method *methods,
				   size_t n_methods, struct zs_error *err);
const char *coord_metrics_addr(struct coord *c); /* "" without */
void coord_metrics_event(struct coord *c, enum coord_event ev);
/* a checkpoint committed or failed, seconds after it started */
void coord_metrics_ckpt(struct coord *c, bool committed, double seconds);
/* Stops serving scrapes (before the state goes); free after the RPC server. */
void coord_metrics_stop(struct coord *c);
void coord_metrics_free(struct coord *c);

/* lookup.c */
struct srv *coord_find_srv(struct coord *c, uint64_t id);
struct zs_job *coord_find_job(struct coord *c, const char *name);
/* "server ID (ADDR)" into buf (len bytes), for messages; returns buf. */
const char *coord_server_name(struct coord *c, uint64_t id, char *buf, size_t len);
/* The job named, or NULL after failing call with ZS_ENOTFOUND. */
struct zs_job *coord_job_or_fail(struct coord *c, struct zs_rpc_call *call, const char *name);
/* The distinct servers holding shards (any copy) of j, sorted by id, in
 * *ids (valid until j's placement changes or the job goes); false when
 * out of memory. Cached by placement: O(shards log shards) once per
 * placement, O(1) after. */
bool coord_job_servers(struct coord *c, const struct zs_job *j, const uint64_t **ids,
		       uint32_t *n);
/* The distinct servers of placement pl, sorted, into a malloc'd *ids
 * (NULL when pl has none); false when out of memory. */
bool coord_placement_servers(const struct zs_placement *pl, uint64_t **ids, uint32_t *n);
/* Whether sid is in the sorted ids (binary search). */
bool coord_id_in(const uint64_t *ids, uint32_t n, uint64_t sid);
void coord_jobsrv_free(struct coord *c);
/* Bytes placements hold on server id, over all jobs except skip. */
uint64_t coord_used_on(struct coord *c, uint64_t id, const struct zs_job *skip);
/* Encodes and sends a job without its data-plane token, or fails the call. */
void coord_reply_job(struct zs_rpc_call *call, const struct zs_job *j);
/* The same with the token: a Join's answer, only. */
void coord_reply_join(struct coord *c, struct zs_rpc_call *call, const struct zs_job *j);
void coord_reply_buf(struct zs_rpc_call *call, enum zs_status enc_st,
		      struct zs_buf *b);
void coord_reply_err(struct zs_rpc_call *call, const struct zs_error *e);
/* Fills the live servers with their free bytes (excluding job skip). */
size_t coord_live_servers(struct coord *c, const struct zs_job *skip,
			   struct place_server *out);

/* catalog.c */
/*
 * Commits a job record (everything but its trainers) or, when del, its
 * deletion with its trainers' records, and, when bump, the next assignment
 * generation, in one transaction.
 */
enum zs_status coord_save_job(struct coord *c, const struct zs_job *j, bool del,
			       bool bump, struct zs_error *err);
/* Commits one trainer's record (or its deletion) of job j. */
enum zs_status coord_save_member(struct coord *c, const struct zs_job *j,
				  const struct zs_member *m, bool del, struct zs_error *err);
/* j's record as committed (the job without its trainers): a join's reply,
 * encoded once per change of the job, not once per join. NULL: no memory. */
const struct zs_buf *coord_job_record(struct coord *c, const struct zs_job *j);
void coord_records_free(struct coord *c);
/* The record's bytes: the job without its trainers (they have their own). */
enum zs_status coord_enc_record(const struct zs_job *j, struct zs_buf *b);
/* Keeps b (taken) as name's committed record; b NULL: forgets it. */
void coord_record_set(struct coord *c, const char *name, struct zs_buf *b);
enum zs_status coord_save_server(struct coord *c, const struct zs_server_info *s,
				  uint64_t next_id, struct zs_error *err);
/* Deletes server id's record (decommission.c forgets the rest). */
enum zs_status coord_delete_server(struct coord *c, uint64_t id, struct zs_error *err);
struct zs_checkpoint *coord_find_ckpt(struct coord *c, const char *job, uint64_t id);
/* Forgets checkpoint k of job j (NULL: a job gone): the catalog first
 * (failing that, nothing changes), then a delete task for its servers,
 * then memory; the record moves into *gone (the caller releases it). */
enum zs_status coord_forget_ckpt(struct coord *c, struct zs_job *j, struct zs_checkpoint *k,
				 struct zs_checkpoint *gone, struct zs_error *err);
/* Commits a checkpoint's record, what changes as servers report (or its
 * deletion, with its placement and blobs), with the id counter. */
enum zs_status coord_save_ckpt(struct coord *c, const struct zs_checkpoint *k, bool del,
				struct zs_error *err);
/* Commits a new checkpoint whole: its record, placement and blobs. */
enum zs_status coord_save_ckpt_new(struct coord *c, const struct zs_checkpoint *k,
				    struct zs_error *err);
/* Commits one rank's blob of checkpoint k. */
enum zs_status coord_save_blob(struct coord *c, const struct zs_checkpoint *k,
				const struct zs_blob *b, struct zs_error *err);
/* Encodes k for a reply without its placement (O(shards)): what every
 * caller but a restore and a resume needs. */
enum zs_status coord_enc_ckpt_brief(const struct zs_checkpoint *k, struct zs_buf *b);
enum zs_status coord_load(struct coord *c, struct zs_error *err);
/* Frees what coord_load read (all of it or part), leaving none. */
void coord_free_state(struct coord *c);

/* members.c */
/* decommission.c: RemoveServer */
void coord_h_remove_server(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_register(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		       size_t n);
void coord_h_heartbeat(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n);
void coord_h_assignments(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			  size_t n);
void coord_h_servers(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n);
void *coord_reaper(void *arg);

/* jobs.c */
void coord_h_create_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			 size_t n);
/* The same from the spec as JSON (model/spec_json.h). */
void coord_h_create_job_json(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
/* Decodes a job name and finds the job; on failure the call is answered. */
struct zs_job *coord_lookup(struct coord *c, struct zs_rpc_call *call,
			     const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX]);
void coord_h_get_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n);
void coord_h_jobs(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_delete_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			 size_t n);
void coord_h_set_stage(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n);
void coord_h_rebalance(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n);
void coord_h_join(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_status(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		     size_t n);

/* ckpts.c */
enum zs_status coord_add_ctask(struct coord *c, const struct zs_job *j, enum zs_task_kind kind,
				uint64_t id, uint64_t step);
void coord_ctask_free(struct ctask *t);
/* Every task dropped (the coordinator's end). */
void coord_ctasks_free(struct coord *c);
/* A restore that was in flight when the coordinator stopped: its task
 * again, for the servers to take (after coord_load). */
enum zs_status coord_resume_restores(struct coord *c, struct zs_error *err);
/* Job j is being deleted: its checkpoints go too (the catalog's records,
 * and delete tasks for their servers), or with keep its committed ones
 * stay (failed and pending ones go), reachable by id only; restores still
 * to carry out for its name are dropped. Counts what went and what stayed.
 * Caller holds mu. */
void coord_job_deleted(struct coord *c, struct zs_job *j, bool keep, uint32_t *deleted,
		       uint32_t *kept);
void coord_h_create_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_get_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_delete_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_list_ckpts(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_put_blob(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_restore(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
/* failover.c */
/* A replicated job j lost server sid (why: how): promotes the replicas of
 * its shards in a new placement epoch. False when the job cannot go on
 * that way (not replicated, no live copy of some shard, restoring,
 * clipping): the caller's rollback path applies. Caller holds mu. */
bool coord_failover(struct coord *c, struct zs_job *j, uint64_t sid, const char *why);
/* A replicated job's shards with fewer copies than it keeps get new ones
 * on live servers with room, in a new placement epoch (true: some did).
 * Caller holds mu. */
bool coord_rebuild(struct coord *c, struct zs_job *j);
void coord_rebuild_all(struct coord *c);
/* Rebuilt copies their primaries seeded, as server reporter says: they may
 * be promoted now (only a shard's current primary's word is taken). */
void coord_seeded(struct coord *c, uint64_t reporter, const struct zs_seeded *v, uint32_t n);
/* Every job's failover for server sid, marked down (caller holds mu). */
void coord_server_lost(struct coord *c, uint64_t sid, const char *why);
/* ckpts.c: j's failed checkpoints beyond the newest few are pruned; its
 * committed ones beyond keep_checkpoints retired, and failed ones older
 * than its newest committed; a checkpoint's reply (without placement) */
void coord_prune_failed(struct coord *c, struct zs_job *j);
void coord_enforce_keep(struct coord *c, struct zs_job *j);
void coord_reply_ckpt(struct zs_rpc_call *call, const struct zs_checkpoint *k);
/* ckpt_tasks.c: a task for every server holding shards in placement pl */
enum zs_status coord_add_ctask_on(struct coord *c, const char *job,
				  const struct zs_placement *pl, enum zs_task_kind kind,
				  uint64_t id, uint64_t step);
/* ckpts.c: fails j's pending checkpoints, saying why. */
void coord_fail_pending(struct coord *c, struct zs_job *j, const char *why);
/* Whether server_id holds shards (any copy) of j. */
bool coord_holds(struct coord *c, const struct zs_job *j, uint64_t server_id);
void coord_h_server_tasks(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_task_done(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);

/* ckpt_tasks.c */
/*
 * Rolls job j back to its latest committed checkpoint (or resets it, with
 * none): a restore task for its servers, its pending checkpoints abandoned,
 * its timeline advanced, committed before it returns. lost_server (0: none)
 * is a server that lost its shards: during a rollback already under way it
 * is asked to restore again. Caller holds mu.
 */
enum zs_status coord_rollback(struct coord *c, struct zs_job *j, uint64_t lost_server,
			      const char *why);
/* ckpts.c */
/* Marks j as being restored to checkpoint id (ZS_CKPT_RESET: a reset): a
 * new timeline; its open steps' norm exchanges fail at once. The caller
 * commits it (and restores the old record if the commit fails), then
 * queues the restore task. */
void coord_mark_restore(struct coord *c, struct zs_job *j, uint64_t id);
/* The latest committed checkpoint of job j's incarnation (NULL: none). */
struct zs_checkpoint *coord_latest_ckpt(struct coord *c, const struct zs_job *j);

/* recovery.c */
/* A trainer whose data connections to a server all ended (DroppedRanks)
 * and that has not renewed its lease for this long (by default;
 * --trainer-gone-ms) is gone: a process alive renews every second
 * (client/lease.c), so three renewals missed. */
#define COORD_GONE_QUIET_MS 3000
void coord_h_dropped_ranks(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
/* A server registered fresh (restarted): every job it holds rolls back,
 * but for those whose live state it kept (in->live) at the step where
 * every rank had left the job cleanly (Job.stopped_step). */
void coord_server_restarted(struct coord *c, uint64_t sid, const struct zs_server_info *in);
/* Rank left job j (already dropped and committed) cleanly before step
 * next (0: it pushed nothing). When the last rank leaves and all agreed,
 * the job's stopped_step records it; ranks that disagree roll it back. */
void coord_clean_leave(struct coord *c, struct zs_job *j, uint32_t rank, uint64_t next);
/* Drops the trainer at j->trainers[pos] and commits (nothing changes on
 * failure). */
enum zs_status coord_drop_trainer(struct coord *c, struct zs_job *j, uint32_t pos,
				  struct zs_error *e);
void coord_h_trainer_heartbeat(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
/* A trainer leaves (or an operator evicts it, session 0): cleanly between
 * steps, or rolling the job back. */
void coord_h_leave(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_stop_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
/* The latest step any trainer of j reported finished (*top), false if
 * none has: three past it, no rank has begun (c->mu held). */
bool coord_latest_report(struct coord *c, const struct zs_job *j, uint64_t *top);
/* resize.c: zshardctl job resize; whether a rank may join j now (below
 * the world of its latest steps or of the one it resizes to) */
void coord_h_resize_job(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
/* roles.c: whether the caller's role may make call (false: answered);
 * whether it may only gather on the data plane (a reader, an operator:
 * GetJob hands it the reader token, ctrl/token.h) */
bool coord_role_ok(struct coord *c, struct zs_rpc_call *call);
bool coord_role_gathers_only(struct zs_rpc_call *call);
uint32_t coord_world_now(struct coord *c, const struct zs_job *j);
/* redo.c: whether rank is out of j's world at the step after the last it
 * began (a resize left it out: its loss costs nothing) */
bool coord_rank_left_world(struct coord *c, const struct zs_job *j, uint32_t rank);
/* The ranks of j lost for bound ms or more (since coord_rank_lost, or the
 * last coord_rank_away_again) that no trainer holds again, at most max */
uint32_t coord_ranks_away(struct coord *c, const struct zs_job *j, int64_t now, int64_t bound,
			  uint32_t *out, uint32_t max);
void coord_rank_away_again(struct coord *c, const struct zs_job *j, uint32_t rank, int64_t now);
/* resize.c: what j's rank_lost says for ranks away past its bound */
void coord_away_sweep(struct coord *c, struct zs_job *j, int64_t now);
/* Drops trainers whose lease lapsed, rolling their jobs back. */
void coord_trainer_sweep(struct coord *c, int64_t now);

/*
 * The committed checkpoint that holds job j's state as it is now (between
 * runs: no trainer joined), for a rebalance to restore onto the new
 * placement: the one of its stopped step, or the one it was last restored
 * from; 0 when it has no state to keep (never trained). UINT64_MAX after
 * failing call: its state is at a step no checkpoint holds (the reply says
 * how to take one).
 */
uint64_t coord_state_checkpoint(struct coord *c, const struct zs_job *j,
				struct zs_rpc_call *call);

/* norms.c */
/* Fails every server waiting on n (caller holds mu and unlinks n). */
void coord_norm_fail(struct norm_coll *n, enum zs_status code, const char *why);
void coord_h_report_norm(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
/* The open norm exchanges that wait for server id's shards, into r's wants
 * (caller holds mu). */
void coord_norm_wants(struct coord *c, uint64_t id, struct zs_hb_reply *r);
/* Forgets job's totals kept for repeats (NULL: every job's). */
void coord_drop_norms_done(struct coord *c, const char *job);
/* Fails collections older than the bound (caller holds mu). */
void coord_norm_sweep(struct coord *c, int64_t now);
/* Fails job's collections at once, saying why (caller holds mu). */
void coord_norms_fail_job(struct coord *c, const char *job, const char *why);

/* reports.c */
void coord_drop_reports(struct coord *c, const char *job);

/* redo.c: the step each rank began last and its state then (in memory) */
/* Keeps rank's step begun and state (taken: s->data is the table's after). */
void coord_step_begun(struct coord *c, const struct zs_job *j, uint32_t rank,
		      struct zs_step_state *s);
/* Whether rank was lost and its replacement redoes a step: *out (borrowed,
 * valid under c->mu). */
bool coord_redo_of(struct coord *c, const struct zs_job *j, uint32_t rank,
		   struct zs_step_state *out);
/* Rank is gone (why): true when its replacement redoes its step (marked,
 * logged); false when the job must roll back (logged why). */
bool coord_rank_lost(struct coord *c, const struct zs_job *j, uint32_t rank, const char *why);
/* Forgets job's step states (NULL: every job's): its timeline ended. */
void coord_steps_forget(struct coord *c, const char *job);

/* readers.c: the weight readers' registry */
void coord_h_reader(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_readers(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_drop_readers(struct coord *c, const char *job); /* NULL: every job's */
/* Whether a reader of job heard from within its lease pins version (a
 * checkpoint's: ZS_VERSION_CKPT | id): retirement passes it by. */
bool coord_reader_holds(struct coord *c, const char *job, uint64_t version);


/* comms.c */
void coord_h_comm_id(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_drop_comm(struct coord *c, const char *job);
void coord_drop_comms(struct coord *c); /* every job's */
void coord_h_report_step(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);
void coord_h_step_reports(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);

#endif
