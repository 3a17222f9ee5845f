/* jobio.c - observer connections to a job's servers (see jobio.h). */
#include "cli/jobio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "ctrl/coord_client.h"
#include "net/transport.h"

struct jobio {
	struct zs_job job;
	uint32_t n;
	uint64_t *id;
	struct zs_conn **conn;
	int timeout_ms;
};

static struct zs_conn *conn_of(struct jobio *io, uint64_t sid)
{
	for (uint32_t i = 0; i < io->n; i++)
		if (io->id[i] == sid)
			return io->conn[i];
	return NULL;
}

enum zs_status jobio_open(const char *coordinator, const char *job, int timeout_ms,
			  struct jobio **out, struct zs_error *err)
{
	struct zs_coord_client *c;
	struct zs_server_info *s = NULL;
	struct jobio *io = calloc(1, sizeof *io);
	uint32_t n_s = 0;
	enum zs_status st;

	if (!io)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	io->timeout_ms = timeout_ms;
	st = zs_coord_open(coordinator, timeout_ms, 0, &c, err);
	if (st) {
		free(io);
		return st;
	}
	if (!(st = zs_coord_get_job_token(c, job, &io->job, err)))
		st = zs_coord_servers(c, &s, &n_s, err);
	zs_coord_close(c);
	if (!st) {
		io->id = calloc(n_s ? n_s : 1, sizeof *io->id);
		io->conn = calloc(n_s ? n_s : 1, sizeof *io->conn);
		if (!io->id || !io->conn)
			st = zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; !st && i < n_s; i++) {
		struct zs_conn_opts o = {.addr = s[i].data_addr, .job = job, .token = io->job.token,
					 .incarnation = io->job.incarnation,
					 .epoch = io->job.placement.epoch,
					 .rank = ZS_RANK_OBSERVER, .tls = io->job.spec.data_tls,
					 .reader = io->job.token_reader, .timeout_ms = timeout_ms};
		int64_t deadline = zs_now_ms() + timeout_ms;
		bool used = false;
		/* reads and the initial upload go to primaries alone */
		for (uint32_t k = 0; k < io->job.placement.n_shards; k++)
			used |= io->job.placement.shards[k].server_id == s[i].id &&
				!io->job.placement.shards[k].copy;
		if (!used)
			continue;
		/* a server takes a new placement epoch (a failover, a rebuild)
		 * at its next heartbeat: until then it answers ZS_EAGAIN */
		while ((st = zs_connect(&zs_tcp_transport, &o, &io->conn[io->n], err)) == ZS_EAGAIN &&
		       zs_now_ms() < deadline)
			zs_sleep_ms(100, NULL);
		if (!st)
			io->id[io->n++] = s[i].id;
	}
	free(s);
	if (st) {
		jobio_close(io);
		return st;
	}
	*out = io;
	return ZS_OK;
}

void jobio_close(struct jobio *io)
{
	if (!io)
		return;
	for (uint32_t i = 0; i < io->n; i++)
		zs_conn_close(io->conn[i]);
	free(io->conn);
	free(io->id);
	zs_job_release(&io->job);
	free(io);
}

const struct zs_job *jobio_job(const struct jobio *io) { return &io->job; }

/* Posts one request per shard of unit and waits for all. */
static enum zs_status fan_out(struct jobio *io, uint32_t unit, int array, float *out,
			      const float *in, uint64_t *version, struct zs_error *err)
{
	const struct zs_placement *p = &io->job.placement;
	struct zs_req **r = calloc(p->n_shards ? p->n_shards : 1, sizeof *r);
	uint64_t *ver = calloc(p->n_shards ? p->n_shards : 1, sizeof *ver);
	uint32_t n = 0;
	enum zs_status st = ZS_OK, w;

	if (!r || !ver) {
		free(r);
		free(ver);
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < p->n_shards && !st; i++) {
		const struct zs_shard *sh = &p->shards[i];
		struct zs_xfer x = {.unit = unit, .offset = sh->offset, .length = sh->length,
				    .dtype = ZS_F32, .init = in != NULL,
				    .state_read = in == NULL || array > 0, .state = array,
				    .version = &ver[n]};
		if (sh->unit != unit || sh->copy) /* a replica follows its primary */
			continue;
		if (in && array > 0 && zs_shard_marks(&io->job.spec, sh))
			continue; /* frozen tensors alone: no optimizer state */
		st = in ? zs_post_write(conn_of(io, sh->server_id), &x, in + sh->offset, &r[n], err)
			: zs_post_read(conn_of(io, sh->server_id), &x, out + sh->offset, &r[n], err);
		if (!st)
			n++;
	}
	for (uint32_t i = 0; i < n; i++)
		if ((w = zs_req_wait(r[i], -1, st ? NULL : err)) && !st)
			st = w;
	for (uint32_t i = 1; !st && !in && i < n; i++)
		if (ver[i] != ver[0])
			st = zs_fail(err, ZS_ESTATE,
				     "unit '%s' is mid-step (its shards are at steps %llu and %llu): export between steps",
				     io->job.spec.layout.units[unit].name,
				     (unsigned long long)ver[0], (unsigned long long)ver[i]);
	if (!st && version)
		*version = n ? ver[0] : 0;
	free(r);
	free(ver);
	return st;
}

enum zs_status jobio_read(struct jobio *io, uint32_t unit, int array, float *out,
			  uint64_t *version, struct zs_error *err)
{
	return fan_out(io, unit, array, out, NULL, version, err);
}

enum zs_status jobio_init(struct jobio *io, uint32_t unit, const float *in,
			  struct zs_error *err)
{
	return fan_out(io, unit, 0, NULL, in, NULL, err);
}

enum zs_status jobio_init_state(struct jobio *io, uint32_t unit, int array, const float *in,
				struct zs_error *err)
{
	return fan_out(io, unit, array, NULL, in, NULL, err);
}
