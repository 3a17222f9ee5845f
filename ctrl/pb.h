/*
 * pb.h - what ctrl/'s codec files share, internal to ctrl/: the arena that
 * every encoder builds its temporary protobuf-c tree in (every allocation
 * tracked and freed after packing, so no encoder has a free path of its
 * own), the conversions between zshard's structs and their protobuf-c
 * trees (pb.c), and the unpack / free macros of the decoders.
 *
 * Files: pb.c (arena, struct <-> tree), codec_coord.c (membership, jobs,
 * status, norms), codec_ckpt.c (step reports, checkpoints, server tasks,
 * rebalance, checkpoint reads).
 */
#ifndef ZS_CTRL_PB_H
#define ZS_CTRL_PB_H

#include "ctrl/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/zshard.pb-c.h"

struct arena {
	void **p;
	size_t n, cap;
	int failed;
};

#define NEW(a, T, init) ({ T *x_ = pb_aalloc(a, sizeof(T)); if (x_) { T t_ = init; *x_ = t_; } x_; })

/* Unpacks bytes into message type T, or fails naming it. */
#define UNPACK(T, lower, p, n, err)                                               \
	T *m = zshard__##lower##__unpack(NULL, n, p);                             \
	if (!m)                                                                   \
		return zs_fail(err, ZS_EPROTO, "malformed %s message", #lower);
#define DONE(lower) zshard__##lower##__free_unpacked(m, NULL)

/* pb.c */
void *pb_aalloc(struct arena *a, size_t size);
void pb_arena_free(struct arena *a);
/* Packs m into out and frees the arena; ZS_ENOMEM if anything failed. */
enum zs_status pb_pack(struct arena *a, const ProtobufCMessage *m,
			   struct zs_buf *out);
Zshard__Layout *pb_layout_pb(struct arena *a, const struct zs_layout *l);
Zshard__JobSpec *pb_spec_pb(struct arena *a, const struct zs_job_spec *s);
Zshard__Shard **pb_shards_pb(struct arena *a, const struct zs_shard *sh,
				 uint32_t n);
Zshard__Job *pb_job_pb(struct arena *a, const struct zs_job *j);
/* A job's world changes, both ways (at most ZS_WORLD_HIST, each 1..ZS_MAX_WORLD,
 * steps increasing: else ZS_EINVAL). */
Zshard__WorldChange **pb_worlds_pb(struct arena *a, const struct zs_worlds *w);
enum zs_status pb_worlds_from(Zshard__WorldChange *const *v, size_t n, struct zs_worlds *w,
			      struct zs_error *err);
Zshard__ServerInfo *pb_server_pb(struct arena *a, const struct zs_server_info *s);
Zshard__Assignment **pb_assignments_pb(struct arena *a,
					   const struct zs_assignment *as,
					   uint32_t n);
enum zs_status pb_cpy(char *dst, size_t cap, const char *src,
			  const char *field, struct zs_error *err);
enum zs_status pb_layout_from(const Zshard__Layout *pl, struct zs_layout *l,
				  struct zs_error *err);
enum zs_status pb_spec_from(const Zshard__JobSpec *ps, struct zs_job_spec *s,
				struct zs_error *err);
enum zs_status pb_shards_from(Zshard__Shard *const *ps, size_t n,
				  struct zs_shard **out, uint32_t *n_out,
				  struct zs_error *err);
enum zs_status pb_job_from(const Zshard__Job *pj, struct zs_job *j,
			       struct zs_error *err);
enum zs_status pb_server_from(const Zshard__ServerInfo *p,
				  struct zs_server_info *s, struct zs_error *err);
/* n of them, into *s (malloc'd, *n_s set; NULL and 0 on failure). */
enum zs_status pb_servers_from(Zshard__ServerInfo **v, size_t n, struct zs_server_info **s,
			       uint32_t *n_s, struct zs_error *err);
enum zs_status pb_assignments_from(Zshard__Assignment *const *pa, size_t n,
				       struct zs_assignment **out, uint32_t *n_out,
				       struct zs_error *err);

#endif
