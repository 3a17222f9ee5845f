/*
 * kernel.h - the deterministic simulator's kernel: one thread, a clock
 * that is a number, a queue of events ordered by (time, the order they
 * were queued), a seeded random source, and a trace.
 *
 * Everything a run does follows from its seed: events fire in one order,
 * every random choice comes from sim_rand, nothing reads a real clock. A
 * world (sim/liveness.c) queues its events with sim_at and takes them
 * with sim_next; the cores it drives (model/liveness.c, engine/conns.c)
 * see time only as the argument it passes them.
 */
#ifndef ZS_SIM_KERNEL_H
#define ZS_SIM_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One event: what (kind, the world's), for whom, and its arguments. */
struct sim_ev {
	int64_t at_us;
	uint64_t seq; /* the order it was queued: ties fire in that order */
	int kind;
	int who;
	int64_t a, b, c, d;
};

struct sim {
	int64_t now_us;
	uint64_t seq, rng;
	struct sim_ev *heap;
	size_t n, cap;
	uint64_t fired;
	/* the first invariant a run broke: failed, and why (the world's
	 * buffer of why_n bytes) */
	bool failed;
	char *why;
	size_t why_n;
	/* the trace: kept (and printed on failure) only when asked, since a
	 * batch of seeds runs each one without it and replays a failing one */
	bool tracing;
	char *trace;
	size_t trace_len, trace_cap;
};

/* why: where sim_fail writes the first broken invariant (why_n bytes) */
void sim_init(struct sim *s, uint64_t seed, bool tracing, char *why, size_t why_n);
void sim_free(struct sim *s);
/* Queues ev to fire delay_us from now (0: after every event queued for
 * now so far). */
void sim_at(struct sim *s, int64_t delay_us, struct sim_ev ev);
/* The next event (the clock moves to it): false when none is left. */
bool sim_next(struct sim *s, struct sim_ev *out);

/* Random: 64 bits; in [0, n); in [lo, hi]; true with probability p. */
uint64_t sim_rand(struct sim *s);
uint64_t sim_below(struct sim *s, uint64_t n);
int64_t sim_range(struct sim *s, int64_t lo, int64_t hi);
bool sim_chance(struct sim *s, double p);

/* A run's end: its events counted into *events, its trace printed when
 * it was kept, its state freed; 1 when it broke an invariant, else 0. */
int sim_end(struct sim *s, uint64_t *events);

/* A run broke an invariant: the first one is kept (s->why, s->failed)
 * and traced; later ones are not. */
void sim_fail(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends a line to the trace, stamped with the simulated time. */
void sim_log(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
