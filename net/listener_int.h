/*
 * listener_int.h - the listener's state, internal to net/ (the API is
 * listener.h). listener.c: the arena, connections' threads and frames;
 * listener_conn.c: what a connection sends, its references and the
 * target's answers; listener_path.c: a one-sided path's control frames
 * and landing notifications; listener_hello.c: HELLO, HPARAMS and WORLD;
 * listener_dev.c: device pushes.
 */
#ifndef ZS_LISTENER_INT_H
#define ZS_LISTENER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/arena.h"
#include "net/listener.h"
#include "net/records.h"
#include "net/wire.h"

#define LANDED_WORKERS 2

struct note { /* a one-sided push's notification waiting for a worker */
	struct zs_lconn *c;
	uint32_t id;
	struct note *next;
};

struct slot { /* a write slot handed out by PUSH_SLOT (offset peers) */
	uint64_t req_id;
	struct zs_xfer x;
	void *dst;
	int64_t t0; /* its PUSH_BEGIN, for the push's latency (zs_now_ns) */
};

/* who hears of every transfer (zs_listener_observe) */
struct lsn_observe {
	void (*fn)(void *ctx, const char *transport, bool push, uint64_t bytes, double seconds,
		   bool ok);
	void *ctx;
};

struct zs_lconn {
	struct zs_listener *l;
	struct zs_io io; /* the socket, and its records once encrypted */
	const struct zs_endpoint_ops *ep; /* the endpoint it came in on */
	bool offsets; /* it addresses the arena itself (an offset endpoint, or
		       * the one-sided path): replies give offsets */
	/* on the one-sided path: its state for it (its queue pair), its name */
	struct {
		bool on;
		void *state;
		const char *name;
	} pth;
	atomic_int refs;
	atomic_bool ended;   /* its thread is done: the accept thread reaps it */
	/* the listener's observer, copied: answers may come after the
	 * listener is freed (they go nowhere then) */
	struct lsn_observe obs;
	pthread_mutex_t wmu; /* serializes writes; guards dead */
	bool dead;
	bool hello;
	bool reader; /* its HELLO proved the job's reader token: gathers only */
	/* after STARTTLS (io.rec set): the job and role its key was for */
	bool tls_reader;
	char tls_job[ZS_JOB_NAME_MAX];
	uint8_t nonce[ZS_NONCE_LEN]; /* sent first; its HELLO's proof covers it */
	uint32_t job, rank;
	uint64_t reconnects, session; /* its HELLO's: the trainer's reconnect count, session */
	pthread_t th;
	/* its slots (mu: a path's notifications come from another thread) */
	struct {
		pthread_mutex_t mu;
		struct slot *v;
		size_t n;
	} sl;
	/* device pushes (listener_dev.c): whether its HELLO_OK offered them,
	 * and the trainer's allocations mapped so far (its thread's alone) */
	struct {
		bool on;
		struct dmap *maps;
		size_t n;
		uint64_t clock;
	} dv;
	struct zs_lconn *next; /* listener's list */
};

struct zs_sop {
	struct zs_lconn *c;
	uint64_t req_id;
	uint16_t op;
	struct zs_xfer x;
	int64_t t0;   /* its first frame (zs_now_ns) */
	uint64_t aux; /* the GATHER_DATA's aux (a pinned read's CRC32C) */
};

struct zs_listener {
	struct zs_target t;
	int fds[ZS_LISTEN_MAX];
	const struct zs_endpoint_ops *eps[ZS_LISTEN_MAX];
	int n_fds;
	pthread_t accept_th;
	atomic_int stop;
	pthread_mutex_t mu; /* conns, map */
	struct zs_lconn *conns;
	/* the arena: a memfd that offset peers may map (pass_arena endpoints)
	 * and a one-sided path registers; inline peers never see it */
	struct lsn_arena {
		int fd;
		uint8_t *base;
		size_t len;
		struct zs_arena_map map; /* which of it is taken (arena.h) */
	} ar;
	const struct zs_listener_path *path; /* the one-sided path, when offered */
	void *pctx;
	/* its push notifications, handled by a few workers so that the
	 * reductions they start run in parallel, as tcp connections' do */
	struct lsn_notes {
		pthread_mutex_t mu;
		pthread_cond_t cv;
		struct note *head, *tail;
		bool stop;
		pthread_t th[LANDED_WORKERS];
		int n_th;
	} nt;
	/* writes waiting for the target's room: kicked when it frees some */
	struct lsn_kick {
		pthread_mutex_t mu;
		pthread_cond_t cv;
		uint64_t gen;
		uint32_t wait_ms;
	} kick;
	bool stopped;
	struct lsn_observe obs;
};

/* listener_conn.c */
void lsn_conn_unref(struct zs_lconn *c);
/* Sends a frame (and payload) unless the connection is dead. */
int lsn_send_frame(struct zs_lconn *c, struct zs_frame *f, const void *payload, size_t len,
		   int pass_fd);
void lsn_send_error(struct zs_lconn *c, uint64_t req_id, enum zs_status code, const char *msg);
/* An operation for the target (holds a reference on c), or NULL; t0:
 * when its first frame came (zs_now_ns). */
struct zs_sop *lsn_new_sop(struct zs_lconn *c, const struct zs_frame *f,
			   const struct zs_xfer *x, int64_t t0);

/* write_begin, waiting (in c's thread) while the target has no room. */
enum zs_status lsn_begin_write(struct zs_lconn *c, struct zs_xfer *x, void **dst,
			       struct zs_error *err);

/* listener_dev.c */
/* A PUSH with ZS_WF_DEVICE (x checked); nonzero ends the connection. */
int lsn_on_device_push(struct zs_lconn *c, const struct zs_frame *f, struct zs_xfer *x,
		       int64_t t0);
/* c ends: undo its mappings. */
void lsn_dev_conn_end(struct zs_lconn *c);

/* listener_path.c */
/* A control frame of the one-sided path; nonzero ends the connection. */
int lsn_on_control(struct zs_lconn *c, const struct zs_frame *f);
/* listener_hello.c: HELLO, HPARAMS and WORLD frames, answered (-1: the
 * connection ends) */
int lsn_on_hello(struct zs_lconn *c, const struct zs_frame *f);
int lsn_on_starttls(struct zs_lconn *c, const struct zs_frame *f);
int lsn_on_hparams(struct zs_lconn *c, const struct zs_frame *f);
int lsn_on_world(struct zs_lconn *c, const struct zs_frame *f);
/* The notification workers: started with the path, stopped after every
 * connection let it go (they finish what was notified). */
enum zs_status lsn_start_workers(struct zs_listener *l, struct zs_error *err);
void lsn_stop_workers(struct zs_listener *l);

#endif
