/*
 * live.h - the liveness world's state (sim/liveness.c): its processes, the
 * events between them, and what its files share. Internal to sim/.
 *
 * Files: liveness.c (the run: its loop, faults, the helpers below),
 * live_nodes.c (servers and the coordinator, around engine/conns.c and
 * model/liveness.c), live_trainer.c (trainers, as client/lease.c and
 * client/conns.c behave, and the checks of a dead one).
 */
#ifndef ZS_SIM_LIVE_H
#define ZS_SIM_LIVE_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/conns.h"
#include "model/liveness.h"
#include "sim/kernel.h"
#include "sim/world.h"

#define MS ((int64_t)1000) /* the clock is in microseconds */
#define MAXS 4
#define MAXT 4
#define MAXC 16 /* connections a server holds per rank at once */

enum { LEASE_MS = 10000, GONE_MS = 3000, RENEW_MS = ZS_LIVE_RENEW_MS, SWEEP_MS = 500, POLL_MS = 50,
       DEADLINE_MS = 1000, RUN_MS = 120000 };

enum kind {
	E_RENEW,        /* who: rank; a: process; the lease thread's timer */
	E_RESUME,       /* who: rank; a: process; the step driver resumes */
	E_SYNC_DONE,    /* who: rank; a: process; b: 1 odd, 0 even renewal; c: 1 taken */
	E_HELLO_ACK,    /* who: rank; a: process; b: server; c: connection */
	E_HELLO_FAIL,   /* who: rank; a: process; b: server; c: connection */
	E_BROKEN,       /* who: rank; a: process; b: server (restarted); c: connection */
	E_RETRY,        /* who: rank; a: process; b: server: connect again */
	E_RETRY_ODD,    /* who: rank; a: process: say the odd count again */
	E_START,        /* who: rank: a replacement process starts */
	E_JOINED,       /* who: rank; a: process; b: 1 joined, 0 refused */
	E_EVICTED,      /* who: rank; a: process: its renewal answered "not a member" */
	E_UNPAUSE,      /* who: rank */
	E_C_RENEW,      /* who: rank; a: process; b: count; c: 1 sync (odd/even) + 2*odd */
	E_C_JOIN,       /* who: rank; a: process */
	E_C_NOTES,      /* who: server; a: its incarnation */
	E_C_SWEEP,      /* a: coordinator incarnation */
	E_C_UP,         /* the coordinator back from a restart */
	E_S_HELLO,      /* who: server; a: rank; b: process; c: connection; d: its count,
			 * and the server's incarnation it was made to << HELLO_INC_SHIFT */
	E_S_BYE,        /* who: server; a: rank; c: connection */
	E_S_POLL,       /* who: server; a: incarnation */
	E_S_SENT,       /* who: server; a: incarnation; b: 1 answered */
	E_S_UP,         /* who: server, back from a restart */
	E_FAULT,        /* who: enum sim_fault */
	E_CHECK_DEAD,   /* who: rank; a: process; b: 1 the fast bound */
};

struct conn {
	int64_t id;        /* 0: none */
	int64_t arrive_us; /* when its HELLO reaches (reached) the server */
	int inc;           /* the server's incarnation it was made to */
	bool acked;
};

struct trainer {
	int64_t proc;        /* the process (1, 2, ...); 0: none yet */
	bool alive;
	int64_t paused_until;
	bool pause_after;    /* stop right after its next action */
	uint64_t reconnects;
	int phase;           /* 0 training, 1 odd renewal sent, 2 reconnecting, 3 even sent, 5 joining */
	int want;            /* HELLOs not yet answered */
	int64_t resume_us;   /* when its resume began */
	struct conn c[MAXS];
	int64_t cut_until, long_cut_until; /* its link to the coordinator */
	int64_t killed_us;
	uint64_t killed_count; /* its reconnect count when it died */
	int64_t reset_us; /* when the network last ended one of its connections */
	int64_t taken_us; /* when the coordinator last took a renewal of it (a restart aside) */
	unsigned reset_open; /* servers whose connection the network ended, not made again yet */
};

struct server {
	int inc;
	bool up;
	struct zs_conns rc[MAXT];
	int64_t open[MAXT][MAXC]; /* the connections counted, by id */
	uint64_t open_count[MAXT][MAXC]; /* the reconnect count each one's HELLO said */
	uint64_t open_session[MAXT][MAXC]; /* and its process (session) */
	struct zs_notes notes;
	struct zs_dropped flight[64];
	uint32_t n_flight;
	bool sending;
	int64_t cut_until;
};

struct member {
	bool held;
	int64_t proc;
	struct zs_live live;
	int64_t heard_us; /* the world's own record of its last renewal taken */
};

/* A fault between servers and the coordinator: a restart (its notes, or
 * its marks, lost: the lease bounds a death in it) or a cut (the notes
 * wait: a death in it is taken for gone once it heals). */
struct window { int64_t from, to; bool restart; };

struct world {
	struct sim s;
	struct sim_stats *st;
	int n_srv, n_tr;
	struct trainer t[MAXT];
	struct server sv[MAXS];
	struct {
		bool up;
		int inc;
		struct member m[MAXT];
	} co;
	int64_t next_conn;
	int64_t co_up_us; /* when the coordinator last came up */
	struct window noisy[64]; /* faults between servers and the coordinator */
	int n_noisy;
};

/* liveness.c: queue an event (ev4 with a fourth argument); break an
 * invariant (the first one broken ends the run); the coordinator's clock;
 * a message's time on the wire; whether rank r is cut off from the
 * coordinator; the faults between servers and the coordinator */
void lw_ev4(struct world *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b, int64_t c,
	    int64_t d);
void lw_ev(struct world *w, int64_t delay_us, int kind, int who, int64_t a, int64_t b, int64_t c);
int64_t lw_now_ms(const struct world *w);
int64_t lw_lat(struct world *w);
bool lw_tr_cut(const struct world *w, int r);
bool lw_noisy(const struct world *w, int64_t from, int64_t to, int64_t *healed);
void lw_add_noisy(struct world *w, int64_t from, int64_t to, bool restart);

/* live_nodes.c: a server's events, and the coordinator's */
#define HELLO_INC_SHIFT 40
void lw_server_hello(struct world *w, int s, int r, int64_t proc, int64_t id, uint64_t count);
void lw_server_bye(struct world *w, int s, int r, int64_t id);
void lw_server_poll(struct world *w, int s, int inc);
void lw_server_sent(struct world *w, int s, int inc, bool ok);
void lw_server_restart(struct world *w, int s);
void lw_coord_renew(struct world *w, int r, int64_t proc, uint64_t count, int sync);
void lw_coord_join(struct world *w, int r, int64_t proc);
void lw_coord_notes(struct world *w, int s, int inc);
void lw_coord_sweep(struct world *w, int inc);
void lw_coord_restart(struct world *w);
void lw_coord_up(struct world *w);

/* live_trainer.c: a trainer's events; a kill, and the checks it leaves */
void lw_trainer_event(struct world *w, const struct sim_ev *e);
void lw_kill_trainer(struct world *w, int r);
void lw_check_dead(struct world *w, int r, int64_t proc, bool fast);

#endif
