/*
 * face.h - the listener's callbacks into the engine (net/listener.h's
 * struct zs_target, filled by engine.c): HELLO, bye, a connection's key,
 * gathers and pushes (face.c). Internal to the engine.
 */
#ifndef ZS_ENGINE_FACE_H
#define ZS_ENGINE_FACE_H

#include "engine/state.h"

/* face.c: the listener's bye (a connection that said HELLO ended) */
void eng_t_bye(void *ctx, uint32_t job, uint32_t rank, uint64_t reconnects, uint64_t session);
enum zs_status eng_t_hello(void *ctx, const struct zs_hello *h, uint32_t *handle,
			   struct zs_error *err);
/* face.c: the key of job's encrypted connections for the role (net/dtls.h) */
enum zs_status eng_t_tls_key(void *ctx, const char *job, bool reader, uint8_t key[32],
			     struct zs_error *err);
void eng_t_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		   const struct zs_xfer *x);
enum zs_status eng_t_write_begin(void *ctx, uint32_t job, uint32_t rank,
				    const struct zs_xfer *x, void **dst,
				    struct zs_error *err);
/*
 * The last rank's push is landing: reduce and apply what has landed, so the
 * update overlaps the reception. Only when nothing else can still change
 * those elements: every other push in, none other landing, no clipping.
 */
void eng_t_write_progress(void *ctx, uint32_t job, uint32_t rank,
			     const struct zs_xfer *x, void *dst, uint64_t bytes);
void eng_t_write_abort(void *ctx, uint32_t job, uint32_t rank,
			  const struct zs_xfer *x, void *dst);
void eng_t_write_done(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			 const struct zs_xfer *x, void *dst);

#endif
