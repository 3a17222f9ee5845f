/*
 * session.h - what the coordinator keeps of a job's run in memory only:
 * clipping's norm exchanges (norms.c), step reports (reports.c), the
 * collective's communicator ids (comms.c), the weight readers' registry
 * (readers.c). Internal to coord/.
 */
#ifndef ZS_COORD_SESSION_H
#define ZS_COORD_SESSION_H

#include "coord/state.h"

/* norms.c */
/* Fails every server waiting on n (caller holds mu and unlinks n). */
void coord_norm_fail(struct norm_coll *n, enum zs_status code, const char *why);

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

/* readers.c */
void coord_drop_readers(struct coord *c, const char *job); /* NULL: every job's */
/* Whether a reader of job heard from within its lease pins version (a
 * checkpoint's: ZS_VERSION_CKPT | id): retirement passes it by. */
bool coord_reader_holds(struct coord *c, const char *job, uint64_t version);

/* comms.c */
void coord_drop_comm(struct coord *c, const char *job);
void coord_drop_comms(struct coord *c); /* every job's */
void coord_h_report_step(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n);

#endif
