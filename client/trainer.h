/*
 * trainer.h - a trainer handle's state, internal to client/ (the API is
 * include/zshard.h). One handle is used by one thread at a time, so nothing
 * here is locked, except what the lease thread shares (atomics, down_mu).
 *
 * Files, each calling only those after it but for two circles of its own:
 * zshard.c (the handle: join, close, what it tells of its job's units),
 * resume.c (back onto the job's timeline after a rollback, a restore or a
 * stop); driver.c (the step driver: the stage's resharding policy, the
 * prefetch window, bounded pushes, the step report) and device.c (its
 * device mode: buffers in GPU memory), which call each other;
 * checkpoint.c, xfer.c (ops that fan a unit's gather or push out over its
 * shards), hparams.c; failover.c (a lost server's shards taken over from
 * their replicas), conns.c (the data-plane connections) and op.c (an op's
 * requests waited for), which call each other; lease.c (the rank's lease,
 * renewed by a thread of its own), unit.c (a unit's two state machines),
 * handle.c (the error, the clock, the driver's host buffers).
 */
#ifndef ZS_CLIENT_TRAINER_H
#define ZS_CLIENT_TRAINER_H

#include "include/zshard.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "ctrl/coord_client.h"
#include "model/boundary.h"
#include "model/hparams.h"
#include "model/verdict.h"

/* tables a trainer keeps to send a server it connects to later: the
 * steps that may have pushes in flight (push_depth and the window) */
#define TR_HP_KEEP 4
#include "model/model.h"
#include "net/transport.h"
#include "base/util.h"
#include "client/unit.h"

/* The step driver's view of one unit. */
struct dunit {
	enum tr_pphase pp; /* where its parameters are (client/unit.h) */
	void *params;      /* not NONE: its buffer */
	zs_op *gather;     /* ASKED, AHEAD: in flight */
	enum tr_uphase up; /* where its gradient is on its way (client/unit.h) */
	void *grad;        /* not NONE: its buffer */
	zs_op *push;       /* POSTED: in flight */
	bool pushed;       /* its gradient of the current step went out */
	uint64_t last_push; /* 1 + the last step whose push of it completed (0: none) */
	uint64_t push_seq;  /* its last push's place in the trainer's order (n_pushed) */
	size_t bytes;      /* numel * dtype size */
	/* device mode (device.c): params and grad are device memory */
	void *stage;       /* pinned staging of the gather, until its copy is done */
	void *gstage;      /* pinned staging of the gradient's push */
	bool direct;       /* its push goes from device memory (tr_dv_direct) */
	void *dsend;       /* a collective job's direct push: the slice's sum */
};

struct tr_dev;

struct zs_trainer {
	struct zs_coord_client *coord;
	struct zs_job job;
	uint32_t rank;
	bool joined;
	uint32_t n_srv;
	uint64_t *srv_id;
	struct zs_conn **conn;
	/* a transport with ZS_CAP_LANES: each server's second connection, for
	 * gathers (NULL: they go on conn[i]); pushes, partial pushes and
	 * HPARAMS frames stay on conn[i], in their order */
	struct zs_conn **gconn;
	char err[ZS_ERRMSG_MAX];
	struct zs_trainer_counters ctr;
	uint64_t step;
	/* how it joined, for zs_trainer_resume's reconnect and rejoin */
	char transport[16];
	bool tls_said; /* how an encrypted job's data plane is, logged once */
	int timeout_ms;
	uint64_t timeline; /* the job's timeline this trainer's connections belong to */
	/* 1 + the step this process computes again for the rank's lost
	 * process (its pushes say so: in once); 0: none (redo.c) */
	uint64_t redo_step1;
	/* the job's world size by step (world.c): as the coordinator last
	 * said it (worlds), as every connection was told it (said); the step
	 * zs_trainer_world_size reports the world of */
	struct zs_worlds worlds, said;
	uint64_t wstep;
	/* why the last zs_trainer_resume started where it did (enum
	 * zs_resumed), and the checkpoint it started from */
	int resumed;
	uint64_t resumed_ckpt;
	/* what a server connected to is handed first (NULL: nothing) */
	enum zs_status (*on_conn)(zs_trainer *t, struct zs_conn *c, struct zs_error *err);
	/* the step driver (driver.c) */
	struct tr_drv {
		struct zs_policy pol;
		/* freed unit buffers kept for reuse: fresh pages cost a page
		 * fault each (about 0.33 GB/s on these VMs), reused ones nothing */
		struct { void *p; size_t n; } cache[8];
		unsigned n_cache;
		/* where registration pays (rdma), the step driver's buffers are
		 * registered once, when made, with any connection of that
		 * transport (they share the device) */
		struct zs_conn *reg_conn;
		const struct zs_transport_ops *reg_ops;
		struct { void *p; struct zs_mr *mr; } *regs;
		unsigned n_regs;
		/* device mode: the host buffers are this device's pinned memory */
		struct zs_dev *pin;
		struct dunit *du;
		uint64_t n_pushed; /* pushes the step driver started, ever */
		bool in_step;
		unsigned stage; /* for this step */
		zs_op *strays; /* ops whose wait timed out while their requests live */
		/* per unit, 1 + the step of its last partial push (0: none) and
		 * the partial pushes of that step so far: a push's micro-batch
		 * index, which a server counts to take one sent again only once */
		struct tr_micro { uint64_t step1; uint32_t n; } *micro;
	} drv;
	/* the step report: the step in progress, and the last one finished
	 * (sent to the coordinator at the next boundary or at close) */
	struct tr_rep {
		struct zs_step_report cur, last;
		bool have_last, last_sent;
		double t0;
		unsigned long long g0, p0;
	} rep;
	/* the lease (lease.c): a thread renews the rank every second over its
	 * own coordinator connection */
	struct tr_lease {
		uint64_t session;
		char coord_addr[ZS_ADDR_MAX];
		pthread_t thread;
		bool running;
		atomic_int stop;
		_Atomic uint64_t seen_timeline; /* the job's, at the last renewal */
		atomic_int evicted;             /* the rank is no longer this trainer's */
		/* reconnects begun and ended (resume.c): odd while one is */
		_Atomic uint64_t reconnects;
		/* servers the coordinator marks down, as of the last renewal */
		pthread_mutex_t down_mu;
		uint32_t n_down;
		struct { uint64_t id; int64_t silent_ms; char addr[ZS_ADDR_MAX]; } down[8];
		/* the step boundary's report, sent by the lease thread: posted
		 * at one boundary, its answer used at the next (down_mu) */
		pthread_cond_t bcv;
		struct zs_bmail bm; /* what is posted, on its way, answered (model/boundary.h) */
		struct zs_step_report brep;
		bool bhas;     /* brep holds a report (else the call only asks) */
		struct zs_step_answer bans;
		enum zs_status bst;
		char bwhy[ZS_ERRMSG_MAX];
		/* the step begun at the posted boundary and the rank's state
		 * then (redo.c): begun.step + 1 once the coordinator has it
		 * (known1); the state set for a step to come (next, next1) */
		struct zs_step_state begun;
		bool bbegun;
		_Atomic uint64_t known1;
		struct zs_step_state next;
		uint64_t next1;
	} ls;
	/* hyperparameters set for a step on (hparams.c) */
	struct tr_hps {
		struct zs_hp_table now;
		bool set; /* any */
		/* the last tables set, oldest first: a server connected to later
		 * (a failover's new primary) gets them before any push */
		struct zs_hp_table hist[TR_HP_KEEP];
		uint32_t n_hist;
		/* the table zs_set_hparams is sending (NULL: none): a server a
		 * failover connects to meanwhile gets it after the history,
		 * since the lost server's request for it is not sent again */
		const struct zs_hp_table *sending;
	} hps;
	/* device mode (device.c); NULL: the driver's buffers are host memory */
	struct tr_dev *dv;
	/* failover (failover.c) */
	struct tr_fo {
		/* connections to lost servers, shut down and closed with the
		 * others (ops may still hold their requests): both lanes */
		struct zs_conn **dead;
		uint32_t n_dead;
		/* the ops whose requests may be sent again (those with rq),
		 * until their last wait or the connections close: a failover
		 * sends all that were on the lost server again at once */
		zs_op *live;
		uint64_t lost_tried; /* a server whose failover failed (tr_watch_lost) */
	} fo;
	/* the coordinator's verdict on a loss (verdict.c, model/verdict.h) */
	struct zs_verdict vd;
};

/* A wait's bound when no policy says (zs_policy.op_timeout_ms). */
#define TR_OP_TIMEOUT_MS 120000

struct zs_op {
	zs_trainer *t;
	uint32_t unit;
	uint64_t step;
	bool final_push; /* a gradient push that completes the rank's (unit, step) */
	zs_op *stray_next; /* an op given up on (t->drv.strays): freed at close */
	void *own;         /* a parked op's buffer (tr_buf_alloc'd), freed with it */
	zs_op *live_prev, *live_next; /* in t->fo.live (listed) */
	bool listed;
	uint32_t n, done;
	/* called as request i completes without error, in order (device.c
	 * copies that shard's bytes to the device) */
	void (*on_req)(zs_op *op, uint32_t i);
	int only; /* the unit's shard of that index alone (-1: all of them) */
	enum zs_status status;
	char msg[ZS_ERRMSG_MAX];
	/* what each request was, to send it again to another copy of its
	 * shard when its server is lost (failover.c); NULL: not sent again */
	struct tr_rq {
		uint64_t server;
		struct zs_xfer x;
		void *dst;
		const void *src;
		bool hparams; /* a HPARAMS frame: the lost server needs it no more */
		/* finished ahead of its turn (a failover's sweep): req is
		 * NULL, fst its status (a failure is the op's already) */
		bool fin;
		enum zs_status fst;
	} *rq;
	struct zs_req *req[];
};

/* failover.c */
/*
 * What a trainer does about a lost server: its job's replication, as a
 * policy the driver, the ops and the checkpoint's fan-out ask (tr_loss),
 * not the job's spec. Replicated: the lost server's shards move to their
 * replicas and what was on it is sent there again; else the wait fails,
 * naming the server, and the job resumes from a checkpoint.
 */
struct tr_loss {
	/* ops keep what each request was (zs_op.rq), to send it again; a
	 * push from device memory cannot be, so none goes that way */
	bool resends;
	/* a push is answered once its step is on every copy: a job that
	 * clips applies a step only with every unit's gradient in, so the
	 * driver holds them all (no push_depth bound) */
	bool late_acks;
	/* how long a checkpoint's fan-out waits for a lost server */
	int arm_wait_ms;
	/*
	 * Between the slices of a wait: whether a server is lost (its
	 * connection broke, the coordinator marks it down) such that the
	 * wait must fail; why into why, and into err what a failover that
	 * failed said. Replicated: a failover and its sweep first (false
	 * once they succeed).
	 */
	bool (*lost)(zs_trainer *t, char *why, size_t len, struct zs_error *err);
};
const struct tr_loss *tr_loss(const zs_trainer *t);
/*
 * A replicated job's server lost (its connection broke, or the coordinator
 * marks it down): waits, within the step driver's bound, for the
 * coordinator's placement without it, takes it, shuts its connection down
 * (what is on it fails; nothing more lands) and connects to the servers the
 * placement adds. ZS_OK; ZS_ERESUME (the job rolled back instead),
 * ZS_ETIMEDOUT, or another error: the caller keeps its own. Unless
 * refused (the server answered that it holds the job no more), a server
 * whole again meanwhile (model/verdict.h zs_fo_look) is not failed over
 * from: ZS_OK, nothing taken.
 */
enum zs_status tr_failover(zs_trainer *t, uint64_t lost, bool refused, struct zs_error *err);
/*
 * Request i of op failed with *st: when the job is replicated and its
 * server was lost, sends it again to its shard's primary now (true:
 * op->req[i] is the new request, or a HPARAMS that needs no sending).
 * False: *st stands (why, when a failover was tried and failed, into err),
 * or is ZS_ERESUME where the coordinator rolled the job back instead.
 */
bool tr_failover_req(zs_op *op, uint32_t i, enum zs_status *st, struct zs_error *err);
/*
 * After a failover from server lost: every listed op's requests that were
 * on it go again now, not at their turn in their op's wait. A replicated
 * job's push is acknowledged once its step is on every copy, and a job
 * that clips gradients applies a step only with every shard's pushes in:
 * one request sent again at a time, in wait order, would wait for one
 * not sent yet.
 */
void tr_failover_sweep(zs_trainer *t, uint64_t lost);
/*
 * Between the slices of a replicated job's wait: a server whose connection
 * broke (killed, restarted) or that the coordinator marks down (stopped,
 * cut off) is failed over from, and every request on it swept, whichever
 * request the wait is on (that one may be waiting for them). ZS_OK: none
 * lost, or failed over; else the failover's error (err; what was lost in
 * why), once per server.
 */
enum zs_status tr_watch_lost(zs_trainer *t, char *why, size_t len, struct zs_error *err);
/*
 * verdict.c: a wait failed with st, its message in msg. Where st says a
 * server was lost (ZS_EUNAVAIL) and t sees the loss (a connection broken,
 * a server marked down, within 2 s), waits within the step driver's bound
 * for the coordinator's verdict: ZS_ERESUME, msg naming the rollback and
 * the loss, once the job rolled back or this rank was evicted; else st,
 * msg saying nothing came (not waited for again on this timeline).
 */
enum zs_status tr_verdict(zs_trainer *t, enum zs_status st, char *msg, size_t len);
/* Whether the job's timeline moved (a rollback, a restore) or this rank is
 * no longer this trainer's: the reason in why (asks the coordinator). */
bool tr_rolled_back(zs_trainer *t, char *why, size_t len);

/* hparams.c: the tables kept (hp_hist) to a server connected to now, on its
 * push connection c, waited for (before any push there): t->on_conn */
enum zs_status tr_hp_to_new(zs_trainer *t, struct zs_conn *c, struct zs_error *err);
/* world.c: the world changes to a server connected to now (before its
 * tables: tr_hp_to_new calls it); a boundary's worlds taken (a change no
 * connection was told yet is sent to every one, and waited for) */
enum zs_status tr_world_to_new(zs_trainer *t, struct zs_conn *c, struct zs_error *err);
enum zs_status tr_world_take(zs_trainer *t, const struct zs_worlds *w, struct zs_error *err);

/* handle.c */
/* Records the failure in t->err (zs_trainer_error) and returns st. */
int tr_fail(zs_trainer *t, enum zs_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
double tr_now_s(void);
/* A buffer for the step driver: where registering pays (rdma), registered
 * once here (a failed registration leaves it unregistered: the transport
 * then registers it per transfer). */
void *tr_buf_alloc(zs_trainer *t, size_t n);
void tr_buf_free(zs_trainer *t, void *p);
/* Server id's connection (NULL: none); gather: the one for gathers (its
 * second lane, or its only one). */
struct zs_conn *tr_conn(zs_trainer *t, uint64_t server_id, bool gather);
/* The driver's host buffers (pinned staging in device mode): one of n
 * bytes, from its cache when one of that size is there; back to the cache
 * (NULL is fine); the cache emptied. */
void *tr_stage_get(zs_trainer *t, size_t n);
void tr_stage_put(zs_trainer *t, void *p, size_t n);
void tr_cache_flush(zs_trainer *t);
/* The policy's bound on one op's wait. */
int tr_op_timeout(const zs_trainer *t);

/* conns.c */
/* Connects to the servers of t->job's placement not connected yet. */
enum zs_status tr_connect_new(zs_trainer *t, struct zs_error *err);
/* Closes every server connection; requests in flight fail and are freed.
 * reg_ops stays: buffers registered through it are deregistered with it. */
void tr_disconnect(zs_trainer *t);
/* Makes t->job's placement p's primaries: the copies a trainer gathers
 * from and pushes to (p may be t->job.placement). ZS_OK or ZS_ENOMEM. */
enum zs_status tr_take_placement(zs_trainer *t, const struct zs_placement *p);
/* (Re)connects to every server holding a shard of t->job over t->transport,
 * waiting (within t->timeout_ms) for servers that have not loaded the
 * job's placement yet; its reconnect count odd meanwhile, a new one for
 * each try (tr_lease_reconnecting). */
enum zs_status tr_reconnect(zs_trainer *t, struct zs_error *err);

/* A collective job's own slice of unit u at the current step: its gather
 * into dst (the unit's buffer: the slice lands at its offset), its push
 * of src (the slice's f32 sum over the ranks). */
int tr_gather_slice(zs_trainer *t, unsigned u, void *dst, zs_op **op);
/*
 * How a push's bytes leave the trainer: a policy the driver picks per
 * push. tr_host_sender (xfer.c): from host memory; tr_device_sender
 * (device.c): from device memory, which the server reads itself.
 */
struct tr_sender {
	enum zs_status (*post)(zs_trainer *t, struct zs_conn *c, const struct zs_xfer *x,
			       const uint8_t *src, struct zs_req **req, struct zs_error *err);
	/* a frozen shard's step mark: these bytes, from host memory (NULL:
	 * the first of the shard's own gradient) */
	const uint8_t *mark;
};
extern const struct tr_sender tr_host_sender, tr_device_sender;

/* An op's shards: every shard of the unit but its frozen ones (which a
 * replica refreshed in place keeps: they never change) */
#define TR_ONLY_TRAINED (-2)
/* Gathers unit u's shards of this step that are not frozen into dst (a
 * resident replica of the step before); *op NULL when it has none. */
int tr_gather_trained(zs_trainer *t, unsigned u, void *dst, zs_op **op);
/* Unit u's push (slice: a collective job's slice sum) from src, sent as
 * via says. */
int tr_push_via(zs_trainer *t, unsigned u, const void *src, bool slice,
		const struct tr_sender *via, zs_op **op);

/* op.c */
/* Lists op (one with rq) for a failover's sweep, and unlists it (at its
 * end); forget: none listed any more (the connections closed: their
 * requests are gone). */
void tr_live_add(zs_trainer *t, zs_op *op);
void tr_live_del(zs_trainer *t, zs_op *op);
void tr_live_forget(zs_trainer *t);
/* Advances op's requests; timeout_ms < 0 waits without bound, 0 only tests. */
int tr_progress(zs_op *op, int timeout_ms);
/* Advances the requests of op that have completed, without waiting and
 * without finishing op (tr_progress does that, op stays valid). */
void tr_poll(zs_op *op);
/* Parks op, given up on while its requests live, with own (a buffer they
 * may still write, tr_buf_alloc'd; NULL: none): both freed at close. */
void tr_park(zs_trainer *t, zs_op *op, void *own);
/* Waits for op within timeout_ms; past it the op is parked (its requests
 * still live, freed at close) and the call fails with ZS_ETIMEDOUT. */
int tr_wait_or_park(zs_trainer *t, zs_op *op, int timeout_ms);
/* driver.c */
/* Forgets the step in progress: its ops (their requests died with the
 * connections: call after closing them) and every buffer of the driver. */
void tr_driver_reset(zs_trainer *t);

/* device.c: the driver's device mode, called by driver.c where t->dv */
/* Starts unit u's gather into staging, its device buffer ready. */
int tr_dv_gather(zs_trainer *t, uint32_t u);
/* Unit u's gather completed: the compute stream waits for its copy. */
int tr_dv_params_ready(zs_trainer *t, uint32_t u);
/* Copies of gathers in flight that have bytes to the device; staging of
 * finished copies back to the cache. Never waits. */
void tr_dv_poll(zs_trainer *t);
/* Unit u's parameters go back to the device cache after the caller's
 * kernels queued so far. */
void tr_dv_drop_params(zs_trainer *t, uint32_t u);
/* A device buffer for unit u's gradient (NULL: the error is set); zeroing
 * it on the compute stream. */
void *tr_dv_grad_buf(zs_trainer *t, uint32_t u);
int tr_dv_zero_grad(zs_trainer *t, uint32_t u);
/* Queues unit u's gradient's copy to staging after the compute stream's
 * work so far; tr_dv_copied says (wait: waits) when it is there. */
int tr_dv_push_copy(zs_trainer *t, uint32_t u);
/* Whether unit u's push may go from device memory: every server it goes
 * to keeps shards on this trainer's device and takes pushes from it
 * (zs_conn_device), the job is not replicated, $ZSHARD_DEVICE_PUSH is not 0. */
bool tr_dv_direct(zs_trainer *t, uint32_t u);
int tr_dv_copied(zs_trainer *t, uint32_t u, bool wait);
/* Unit u's push completed: its buffers go back to the caches. */
void tr_dv_push_done(zs_trainer *t, uint32_t u);
/* Every device-mode buffer of the driver to the caches (to_cache) or
 * freed, after the copy stream's work. */
void tr_dv_reset(zs_trainer *t, bool to_cache);
/* A collective job: the trainers' communicator of this timeline, formed
 * (through the coordinator) when missing; ZS_ESTATE outside device mode. */
int tr_dv_collective(zs_trainer *t);
/* Leaves device mode: frees its buffers, streams, events, the device. */
void tr_dv_close(zs_trainer *t);

/* lease.c */
/* Starts renewing t's rank (t->ls.session, t->ls.coord_addr set). */
enum zs_status tr_lease_start(zs_trainer *t, struct zs_error *err);
/* Stops renewing (the rank lapses unless it leaves); fine if not started. */
void tr_lease_stop(zs_trainer *t);
/* Says (a renewal now, and every one after) whether t is making its data
 * connections again: while it is, the coordinator does not take their
 * end, as its servers report it, for t's (a process stopped between its
 * close and its reconnect is alive; its lease still bounds it). Saying it
 * begins is tried until the coordinator takes it (within
 * ZS_LIVE_RECONNECTING_WAIT_MS; an eviction ends it): closed without it, a
 * rank cut off from the coordinator and then stopped was taken for gone
 * (sim/liveness.c found it). */
void tr_lease_reconnecting(zs_trainer *t, bool on);
/* A reconnect tried again (its connections closed to be made again): a
 * new odd count, said as a reconnect's beginning is (the end of the
 * connections of the try before is then the coordinator's to ignore: a
 * retry's drop, arriving after the reconnect ended, took a live rank that
 * then stopped for gone; sim/liveness.c). */
void tr_lease_reconnect_again(zs_trainer *t);
/* Whether a server t is connected to is marked down by the coordinator;
 * if so, why (into buf) for an error message. */
bool tr_server_down(zs_trainer *t, char *buf, size_t len);
/* Whether the coordinator marks server id down. */
bool tr_server_marked_down(zs_trainer *t, uint64_t id);
/* The same, with the server's id. */
bool tr_server_down_id(zs_trainer *t, uint64_t *id, char *buf, size_t len);
/*
 * The step boundary without a round trip: tr_boundary_post hands the
 * lease thread a ReportStep (r NULL: only ask) to send now; at the next
 * boundary tr_boundary_take gives its answer (the stage, checkpoint
 * interval and stop step), waiting for it within t->timeout_ms. Returns
 * false (nothing taken) when no post is outstanding.
 */
void tr_boundary_post(zs_trainer *t, const struct zs_step_report *r,
		      struct zs_step_state *begun);
bool tr_boundary_take(zs_trainer *t, enum zs_status *st, struct zs_step_answer *a,
		      struct zs_error *err);
/* The answer the next boundary takes, left for it (waiting as take does);
 * false when there is none (no post, or it failed). */
bool tr_boundary_peek(zs_trainer *t, struct zs_step_answer *a);

/* redo.c */
/* The state set for step (zs_set_step_state; none: empty), taken. */
struct zs_step_state tr_state_take(zs_trainer *t, uint64_t step);
/* Frees the states kept (the trainer's close). */
void tr_state_free(zs_trainer *t);
/* The coordinator has heard the rank begin step; a step's first push
 * waits (bounded) until it has. */
void tr_step_known(zs_trainer *t, uint64_t step);
void tr_wait_step_known(zs_trainer *t, uint64_t step);
/* Whether this process replaces a rank lost mid-step (*redo): the step
 * (*step), its state into blob (cap; *len its size), and t->redo_step1. */
enum zs_status tr_redo_ask(zs_trainer *t, bool *redo, uint64_t *step, void *blob, unsigned cap,
			   unsigned *len, struct zs_error *err);

/* zshard.c: a client of the coordinator a join would find (NULL: the
 * launch configuration's, $ZSHARD_COORDINATOR, the local cluster's). */
enum zs_status tr_launch_coord(const char *coordinator, int timeout_ms,
			       struct zs_coord_client **c, struct zs_error *err);

#endif
