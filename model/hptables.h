/*
 * hptables.h - hyperparameter tables by step, decided: which table a
 * server keeps when one arrives (and which it drops), which is in force at
 * a step (what a step is applied with, and what a forward of that step
 * carries to the copies), and which tables a trainer sends a server it
 * connects to now (a failover's new primary). Pure (no lock, no I/O):
 * engine/hparams.c, engine/replica.c and client/hparams.c are its shells,
 * and the simulator's step world runs it as they do.
 */
#ifndef ZS_MODEL_HPTABLES_H
#define ZS_MODEL_HPTABLES_H

#include <stdint.h>

#include "model/hparams.h"

/* Whether two tables say the same (bitwise; steps aside). */
int zs_hp_same(const struct zs_hp_table *a, const struct zs_hp_table *b);

/* What a table put into a server's list did. */
enum zs_hp_put {
	ZS_HP_PUT_NEW,     /* kept (*at: its index) */
	ZS_HP_PUT_SAME,    /* one of its step is there already, with the same values */
	ZS_HP_PUT_DIFFERS, /* one of its step is there, with other values (*at) */
	ZS_HP_PUT_FULL,    /* cap tables are kept, each still read */
};

/* Puts t into v[0, *n) (sorted by step; cap at most), first dropping the
 * tables no step from `low` on reads (each followed by one in force at low). */
enum zs_hp_put zs_hp_list_put(struct zs_hp_table *v, uint32_t *n, uint32_t cap,
			      const struct zs_hp_table *t, uint64_t low, uint32_t *at);

/* The table in force at step in v[0, n) (the last of a step at or before
 * it); NULL: none (the spec's values). */
const struct zs_hp_table *zs_hp_list_at(const struct zs_hp_table *v, uint32_t n, uint64_t step);

/* The tables a server connected to now gets, in order, into out (n + 1 at
 * most): those set (hist[0, n)), then the one being set (sending, NULL:
 * none), whose step's pushes go there after. How many. */
uint32_t zs_hp_for_new(const struct zs_hp_table *hist, uint32_t n,
		       const struct zs_hp_table *sending, const struct zs_hp_table **out);

#endif
