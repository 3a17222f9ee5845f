/*
 * state.h - the coordinator's state, internal to coord/: the types every
 * part reads. One mutex (coord.mu) guards it all; RPC handlers run on the
 * RPC server's CQ thread, the lease reaper on its own. Every change is
 * built aside, committed to LMDB (catalog.c) and only then swapped into
 * memory, so a failed commit changes nothing and a SIGKILL at any point
 * leaves the old or the new record.
 *
 * What the parts do with it is declared by concern: coord/rpc.h (the RPC
 * methods coord.c's table names), coord/catalog.h (leadership, the store,
 * the catalog's records), coord/lookup.h (lookups, replies, roles,
 * metrics' events), coord/ckpt.h (checkpoints, their tasks, rollback),
 * coord/recovery.h (failover, leases, redo, resize) and coord/session.h
 * (norm exchanges, step reports, communicators, readers: memory only).
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
#include "model/membership.h"
#include "storage/kv.h"
#include "base/log.h"
#include "ctrl/methods.h"
#include "model/boundary.h"
#include "model/model.h"
#include "model/normx.h"
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
	struct zs_mbr m;         /* is it up? (model/membership.h) */
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
	/* the norms by the shard's place among the placement's primaries (a
	 * replica reports none), and a settled report's total: model/normx.c */
	struct zs_nx x;
	struct norm_wait *waits;
	size_t n_waits;
	/* the servers owning shards not in, sorted (NULL: not listed yet), as
	 * of x.n_have == miss_have and placement epoch miss_epoch (the
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
	struct zs_nx_done d;
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
	struct zs_btop top;       /* the highest step reported on the job's timeline */
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
	uint64_t next_reader; /* the last reader id given (from the start's second << 20) */
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

#endif
