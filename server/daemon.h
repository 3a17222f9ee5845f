/*
 * daemon.h - zshard-server's process state, internal to server/: its
 * membership with the coordinator, its engine, and the checkpoint tasks it
 * carries out (one mutex, mu, guards it; the writer has its own queue).
 *
 * Files: main.c (options, start, stop), member.c (registration, heartbeats,
 * assignments and the Server RPC service: Status, Snapshot,
 * ReadCheckpoint), writer.c (the checkpoint writer: snapshots into LMDB,
 * durable, reported), tasks.c (the tasks the coordinator hands out: take
 * a checkpoint, restore one onto this server's shards, delete one).
 */
#ifndef ZS_SERVER_DAEMON_H
#define ZS_SERVER_DAEMON_H

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <errno.h>

#include "storage/ckpt.h"
#include "ctrl/codec.h"
#include "ctrl/coord_client.h"
#include "engine/engine.h"
#include "storage/kv.h"
#include "base/log.h"
#include "ctrl/methods.h"
#include "model/model.h"
#include "rdma/rdma.h"
#include "ctrl/rpc.h"
#include "ctrl/tls.h"
#include "base/config.h"
#include "base/util.h"
#include "base/version.h"

struct srvd {
	pthread_mutex_t mu;
	struct zs_coord_client *coord;
	struct zs_kv *kv;
	struct zs_server_info me;
	int registered;
	uint32_t lease_ms;
	uint64_t gen;
	struct zs_assignment *as;
	uint32_t n_as;
	int64_t started_ms;
	int64_t wait_ms; /* bound on waiting for the coordinator */
	struct engine *engine;
	uint32_t step_timeout_ms;
	const char *data_dir;
	/* checkpoint tasks: the generation last taken, those started and not
	 * reported yet */
	struct srvd_tasks {
		uint64_t gen;
		struct srvd_busy { struct zs_task task; int64_t t0_ms; } *busy;
		uint32_t n_busy;
	} tk;
	/* the writer thread: snapshots waiting to be written (q), and the
	 * checkpoints deleted lately: it checks, inside its LMDB write
	 * transaction, that what it is about to write is not among them */
	struct srvd_writer {
		pthread_t th;
		pthread_cond_t cv;
		struct snapjob *q;
		bool stop;
		struct { char job[ZS_JOB_NAME_MAX]; uint64_t id; } deleted[16];
		unsigned n_deleted;
	} wr;
	/* failed sends of the rank notes since the last one sent (the
	 * heartbeat thread's: member.c report_dropped) */
	unsigned dropped_unsent;
	char rdma_note[256]; /* why rdma is (not) offered, for Status */
	char health[192];    /* "" when well; else what fails (under mu) */
	struct srvd_metrics *metrics; /* NULL without --metrics */
};

/* A captured snapshot on its way to LMDB. */
struct snapjob {
	struct zs_task task;
	struct engine_snap *snaps;
	uint32_t n;
	struct snapjob *next;
};

enum { KV_META, KV_CKPT, KV_LIVE };

/* writer.c */
/* Records the outcome of a write to this server's disk: an I/O error or a
 * full disk makes the server report itself unwell in its heartbeats (the
 * coordinator shows it) until a write succeeds again. */
void srvd_note_storage(struct srvd *d, enum zs_status st, const char *why);

/* live.c */
/* At a clean stop (the data plane stopped): keeps every job that is
 * between steps on disk for the next start. */
/* Keeps the live state of the jobs between steps (SIGTERM, the data plane
 * stopped); returns how many jobs it could not keep for an error (a full
 * disk: said in the log, never a signal). */
unsigned srvd_live_persist(struct srvd *d);
/* At start, before registering: the jobs kept, as claims (d->me.live). */
void srvd_live_claims(struct srvd *d);
/* After the first assignments: loads the kept jobs still assigned here at
 * the same epoch, and deletes what was kept. */
void srvd_live_load(struct srvd *d);

/* member.c */
/* The engine's norm exchange: the coordinator sums every server's norms. */
bool srvd_stale(void *ctx, const char *job, uint64_t epoch);
enum zs_status srvd_peer_addr(void *ctx, uint64_t id, char *addr, size_t len,
			      struct zs_error *err);
enum zs_status srvd_exchange_norms(void *ctx, const char *job, uint64_t timeline,
				     uint64_t step, const struct zs_shard_norm *norms, uint32_t n,
				     double *total, struct zs_error *err);
uint64_t srvd_load_id(struct srvd *d);
/*
 * Registers, retrying while the coordinator is unreachable, for at most
 * d->wait_ms. Other errors (a bad address, capacity refused) are final.
 */
enum zs_status srvd_do_register(struct srvd *d, struct zs_error *err);
void srvd_refresh_assignments(struct srvd *d);
void *srvd_heartbeat(void *arg);

/* writer.c */
bool srvd_claim(struct srvd *d, const struct zs_task *t);
/* Reports a task (code ZS_OK: done; else why it failed) and forgets it
 * (caller does not hold mu). */
void srvd_task_finish(struct srvd *d, const struct zs_task *t, enum zs_status code,
		      const char *why, uint64_t bytes);
/* Called by the engine when every shard of a snapshot is captured. */
void srvd_snap_done(void *ctx, const char *job, uint64_t id, uint64_t step,
		      struct engine_snap *snaps, uint32_t n, enum zs_status st, const char *why);
/* Writes snapshots into LMDB, one transaction each, off the data path. */
void *srvd_writer_main(void *arg);

/* tasks.c */
void srvd_run_task(struct srvd *d, const struct zs_task *t);
void srvd_refresh_tasks(struct srvd *d, uint64_t gen);

/* metrics.c: --metrics HOST:PORT, Prometheus text at /metrics */
/* certified: only clients with a certificate of the CA (mTLS on) */
enum zs_status srvd_metrics_start(struct srvd *d, const char *addr, bool certified,
				  struct zs_error *err);
/* Stops serving scrapes (before the engine goes); the series stay for the
 * data plane's last answers until srvd_metrics_free, at the very end. */
void srvd_metrics_stop(struct srvd *d);
void srvd_metrics_free(struct srvd *d);
/* the data plane's observer (zs_listener_opts.observe; ctx: the srvd) */
void srvd_metrics_op(void *ctx, const char *transport, bool push, uint64_t bytes, double seconds,
		     bool ok);
void srvd_metrics_heartbeat(struct srvd *d, double seconds, bool ok);
/* a task reported: seconds since it was claimed (< 0: unknown) */
void srvd_metrics_task(struct srvd *d, const struct zs_task *t, bool ok, uint64_t bytes,
		       double seconds);

/* The Server RPC service (member.c). */
extern const struct zs_rpc_method srvd_methods[];
extern const size_t srvd_n_methods;

/* Set by SIGTERM / SIGINT (main.c): every loop of the daemon ends. */
extern volatile sig_atomic_t srvd_stop;

#endif
