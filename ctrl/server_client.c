/*
 * server_client.c - calls of a shard server's own RPC service (declared in
 * coord_client.h): its status, a snapshot asked now, and slices of the
 * checkpoint records it wrote.
 */
#include "ctrl/coord_client.h"

#include <stdlib.h>

#include "ctrl/methods.h"
#include "ctrl/rpc.h"

/* One call to a shard server's RPC service: open a client to addr, send
 * req (may be NULL), take the reply (*resp, malloc'ed; the caller frees it
 * even on failure), close. */
static enum zs_status server_call(const char *addr, const char *path, const struct zs_buf *req,
				  int timeout_ms, uint8_t **resp, size_t *len,
				  struct zs_error *err)
{
	struct zs_rpc_client *rc;
	enum zs_status st = zs_rpc_client_open(addr, &rc, err);

	*resp = NULL;
	*len = 0;
	if (st)
		return st;
	st = zs_rpc_invoke(rc, path, req ? req->data : NULL, req ? req->len : 0, resp, len,
			   timeout_ms, 0, err);
	zs_rpc_client_free(rc);
	return st;
}

enum zs_status zs_server_status_query(const char *addr, int timeout_ms,
				      struct zs_server_status *s,
				      struct zs_error *err)
{
	uint8_t *resp;
	size_t len;
	enum zs_status st = server_call(addr, ZS_M_SERVER_STATUS, NULL, timeout_ms, &resp, &len,
					err);

	if (!st)
		st = zs_dec_server_status(resp, len, s, err);
	free(resp);
	return st;
}

enum zs_status zs_server_snapshot(const char *addr, int timeout_ms, const struct zs_task *t,
				  struct zs_error *err)
{
	struct zs_buf req;
	uint8_t *resp;
	size_t len;
	enum zs_status st = zs_enc_task(t, &req);

	if (st)
		return zs_fail(err, st, "cannot encode a snapshot request");
	st = server_call(addr, ZS_M_SERVER_SNAPSHOT, &req, timeout_ms, &resp, &len, err);
	free(resp);
	zs_buf_release(&req);
	return st;
}

enum zs_status zs_server_read_ckpt_on(struct zs_rpc_client *rc, int timeout_ms,
				      const struct zs_read_ckpt *r, float *out, uint64_t *step,
				      struct zs_error *err)
{
	uint64_t done = 0;

	/* in pieces of 4 Mi elements (16 MiB) per call */
	do {
		struct zs_read_ckpt q = *r;
		struct zs_buf req;
		uint8_t *resp = NULL;
		size_t len = 0;
		q.offset = r->offset + done;
		q.length = r->length - done < (4u << 20) ? r->length - done : (4u << 20);
		enum zs_status st = zs_enc_read_ckpt(&q, &req);
		if (st)
			return zs_fail(err, st, "cannot encode a checkpoint read");
		st = zs_rpc_invoke(rc, ZS_M_SERVER_READ_CKPT, req.data, req.len, &resp, &len,
				   timeout_ms, 0, err);
		if (!st)
			st = zs_dec_read_ckpt_reply(resp, len, step, out + done, q.length, err);
		free(resp);
		zs_buf_release(&req);
		if (st)
			return st;
		done += q.length;
	} while (done < r->length);
	return ZS_OK;
}

enum zs_status zs_server_read_ckpt(const char *addr, int timeout_ms,
				   const struct zs_read_ckpt *r, float *out, uint64_t *step,
				   struct zs_error *err)
{
	struct zs_rpc_client *rc;
	enum zs_status st = zs_rpc_client_open(addr, &rc, err);

	if (st)
		return st;
	st = zs_server_read_ckpt_on(rc, timeout_ms, r, out, step, err);
	zs_rpc_client_free(rc);
	return st;
}
