/*
 * lookup.h - what every part of the coordinator looks up and answers
 * with: servers and jobs by id and name, the servers of a placement,
 * replies (lookup.c), fresh tokens (jobs.c), the caller's role (roles.c),
 * and the events metrics count (metrics.c). Internal to coord/.
 */
#ifndef ZS_COORD_LOOKUP_H
#define ZS_COORD_LOOKUP_H

#include "coord/state.h"

/* lookup.c */
/* A fresh data-plane token: 32 hex digits of the system's randomness. */
void coord_new_token(char out[ZS_TOKEN_MAX]);

/* A fresh incarnation: 64 random bits, never 0. */
uint64_t coord_new_incarnation(void);
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

/* j's record as committed (the job without its trainers): a join's reply,
 * encoded once per change of the job, not once per join. NULL: no memory. */
const struct zs_buf *coord_job_record(struct coord *c, const struct zs_job *j);
void coord_records_free(struct coord *c);

/* The record's bytes: the job without its trainers (they have their own). */
enum zs_status coord_enc_record(const struct zs_job *j, struct zs_buf *b);

/* Keeps b (taken) as name's committed record; b NULL: forgets it. */
void coord_record_set(struct coord *c, const char *name, struct zs_buf *b);

/* metrics.c */
/* --metrics HOST:PORT, Prometheus text at /metrics */
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

/* jobs.c */
/* Decodes a job name and finds the job; on failure the call is answered. */
struct zs_job *coord_lookup(struct coord *c, struct zs_rpc_call *call,
			     const uint8_t *p, size_t n, char name[ZS_JOB_NAME_MAX]);

/* roles.c */
/* Whether the caller's role may make call (false: answered);
 * whether it may only gather on the data plane (a reader, an operator:
 * GetJob hands it the reader token, ctrl/token.h) */
bool coord_role_ok(struct coord *c, struct zs_rpc_call *call);
bool coord_role_gathers_only(struct zs_rpc_call *call);

#endif
