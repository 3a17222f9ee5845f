/*
 * members.c - shard servers as members: registration, heartbeats, the lease
 * reaper that marks a silent server down, and each server's assignments.
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/recovery.h"
#include "coord/session.h"

/* ----------------------------------------------------- server membership */

void coord_h_register(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		       size_t n)
{
	struct coord *c = ctx;
	struct zs_server_info in;
	struct zs_error e = {0};
	char host[ZS_HOST_MAX];
	uint16_t port;
	struct srv *s;
	uint64_t id, next;
	uint64_t used;
	unsigned fx;

	if (zs_dec_register(p, n, &in, &e))
		return coord_reply_err(call, &e);
	if (zs_parse_hostport(in.addr, host, &port, &e) || port == 0)
		return zs_rpc_fail(call, ZS_EINVAL,
				   "server address '%s' must be HOST:PORT with a real port",
				   in.addr);
	if (in.data_addr[0] && zs_parse_hostport(in.data_addr, host, &port, &e))
		return zs_rpc_fail(call, ZS_EINVAL, "bad data address: %s", e.msg);
	if (in.metrics_addr[0] &&
	    (zs_parse_hostport(in.metrics_addr, host, &port, &e) || port == 0))
		return zs_rpc_fail(call, ZS_EINVAL,
				   "metrics address '%s' must be HOST:PORT with a real port",
				   in.metrics_addr);
	if (in.shm_addr[0] && (in.shm_addr[0] != '@' || !in.shm_addr[1]))
		return zs_rpc_fail(call, ZS_EINVAL, "shm address '%s' must be '@name'",
				   in.shm_addr);
	if (in.capacity == 0)
		return zs_rpc_fail(call, ZS_EINVAL, "server capacity must be > 0 bytes");
	if (in.transports & ~0xfu)
		return zs_rpc_fail(call, ZS_EINVAL, "unknown transport bits 0x%x",
				   in.transports & ~0xfu);

	pthread_mutex_lock(&c->mu);
	id = in.id ? in.id : c->next_server_id;
	next = id >= c->next_server_id ? id + 1 : c->next_server_id;
	used = coord_used_on(c, id, NULL);
	if (used > in.capacity) {
		char a[32], b[32];
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOSPC,
				   "server %llu holds %s of placements but offers only %s",
				   (unsigned long long)id, zs_fmt_bytes(used, a, sizeof a),
				   zs_fmt_bytes(in.capacity, b, sizeof b));
	}
	s = coord_find_srv(c, id);
	if (!s) {
		struct srv *g = realloc(c->srvs, (c->n_srvs + 1) * sizeof *g);
		if (!g) {
			pthread_mutex_unlock(&c->mu);
			return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
		}
		c->srvs = g;
	}
	in.id = id;
	if (coord_save_server(c, &in, next, &e)) {
		pthread_mutex_unlock(&c->mu);
		zs_error("cannot record server %llu: %s", (unsigned long long)id, e.msg);
		return coord_reply_err(call, &e);
	}
	if (!s) {
		s = &c->srvs[c->n_srvs++];
		memset(s, 0, sizeof *s);
	}
	s->info = in;
	fx = zs_mbr_registered(&s->m, zs_now_ms(), in.fresh);
	if (fx & ZS_MBR_CAME_UP)
		zs_info("server %llu up at %s (capacity %llu bytes)",
			(unsigned long long)id, in.addr,
			(unsigned long long)in.capacity);
	c->next_server_id = next;
	if (fx & ZS_MBR_RESTARTED) /* its jobs' shards are gone with its last process */
		coord_server_restarted(c, id, &in);
	if (fx & ZS_MBR_CAME_UP)
		coord_fail_over_down(c);
	coord_rebuild_all(c); /* a server to put lost copies on */
	pthread_mutex_unlock(&c->mu);

	struct zs_buf b;
	coord_reply_buf(call, zs_enc_register_reply(id, c->cfg.lease_ms, &b), &b);
}

void coord_h_heartbeat(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_buf b;
	struct srv *s;
	uint64_t id;
	char health[sizeof s->info.health];
	struct zs_hb_reply r = {0};
	bool heard;

	struct zs_seeded *seeded = NULL;
	uint32_t n_seeded = 0;

	if (zs_dec_heartbeat_ex(p, n, &id, health, sizeof health, &seeded, &n_seeded, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	coord_seeded(c, id, seeded, n_seeded);
	free(seeded);
	s = coord_find_srv(c, id);
	if (!s) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOTFOUND,
				   "server %llu is not registered; register again",
				   (unsigned long long)id);
	}
	heard = s->m.last_hb_ms != 0;
	if (zs_mbr_heartbeat(&s->m, zs_now_ms()) & ZS_MBR_CAME_UP) {
		zs_info("server %llu (%s) up %s", (unsigned long long)id, s->info.addr,
			heard ? "again" : "(its first heartbeat since this coordinator began to serve)");
		coord_fail_over_down(c);
		coord_rebuild_all(c);
	}
	if (strcmp(health, s->info.health)) {
		if (health[0])
			zs_warn("server %llu (%s) reports: %s", (unsigned long long)id, s->info.addr,
				health);
		else
			zs_info("server %llu (%s) is well again", (unsigned long long)id,
				s->info.addr);
		snprintf(s->info.health, sizeof s->info.health, "%s", health);
	}
	r.lease_ms = c->cfg.lease_ms;
	r.assign_gen = c->assign_gen;
	r.task_gen = c->task_gen;
	coord_norm_wants(c, id, &r);
	pthread_mutex_unlock(&c->mu);
	coord_reply_buf(call, zs_enc_heartbeat_reply(&r, &b), &b);
}

void coord_h_assignments(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
			  size_t n)
{
	struct coord *c = ctx;
	struct zs_error e = {0};
	struct zs_assignment *as;
	struct zs_buf b;
	uint32_t n_as = 0;
	uint64_t id;
	enum zs_status st = ZS_OK;

	if (zs_dec_server_id(p, n, &id, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	if (!coord_find_srv(c, id)) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOTFOUND, "server %llu is not registered",
				   (unsigned long long)id);
	}
	as = calloc(c->n_jobs ? c->n_jobs : 1, sizeof *as);
	for (size_t j = 0; as && j < c->n_jobs && !st; j++) {
		const struct zs_job *job = &c->jobs[j];
		struct zs_assignment *a = &as[n_as];
		uint32_t k = 0;

		for (uint32_t i = 0; i < job->placement.n_shards; i++)
			k += job->placement.shards[i].server_id == id;
		if (!k)
			continue;
		a->shards = malloc(k * sizeof *a->shards);
		if (!a->shards) {
			st = ZS_ENOMEM;
			break;
		}
		for (uint32_t i = 0; i < job->placement.n_shards; i++)
			if (job->placement.shards[i].server_id == id)
				a->shards[a->n_shards++] = job->placement.shards[i];
		snprintf(a->job, sizeof a->job, "%s", job->spec.name);
		a->epoch = job->placement.epoch;
		a->incarnation = job->incarnation;
		memcpy(a->token, job->token, sizeof a->token);
		a->bytes = place_bytes_on(&job->spec, &job->placement, id);
		n_as++;
	}
	if (!as || st) {
		st = ZS_ENOMEM;
	} else {
		st = zs_enc_assignments(c->assign_gen, as, n_as, &b);
	}
	pthread_mutex_unlock(&c->mu);
	for (uint32_t i = 0; i < n_as; i++)
		zs_assignment_release(&as[i]);
	free(as);
	if (st)
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	coord_reply_buf(call, ZS_OK, &b);
}

void coord_h_servers(void *ctx, struct zs_rpc_call *call, const uint8_t *p,
		      size_t n)
{
	struct coord *c = ctx;
	struct zs_server_info *v;
	struct zs_buf b;
	int64_t now = zs_now_ms();
	enum zs_status st;

	(void)p;
	(void)n;
	pthread_mutex_lock(&c->mu);
	v = calloc(c->n_srvs ? c->n_srvs : 1, sizeof *v);
	for (size_t i = 0; v && i < c->n_srvs; i++) {
		struct srv *s = &c->srvs[i];
		v[i] = s->info;
		v[i].up = zs_mbr_up(&s->m);
		v[i].used = coord_used_on(c, s->info.id, NULL);
		v[i].last_seen_ms = zs_mbr_seen_ago(&s->m, now);
	}
	st = v ? zs_enc_servers(v, (uint32_t)c->n_srvs, &b) : ZS_ENOMEM;
	pthread_mutex_unlock(&c->mu);
	free(v);
	coord_reply_buf(call, st, &b);
}

/* ------------------------------------------------------ lease, load, life */

void *coord_reaper(void *arg)
{
	struct coord *c = arg;
	int64_t tick = c->cfg.lease_ms / 4 < 500 ? c->cfg.lease_ms / 4 : 500;

	while (!atomic_load(&c->stop)) {
		int64_t now = zs_now_ms();
		pthread_mutex_lock(&c->mu);
		coord_norm_sweep(c, now);
		coord_trainer_sweep(c, now);
		for (size_t i = 0; i < c->n_srvs; i++) {
			struct srv *s = &c->srvs[i];
			int64_t quiet;
			if (zs_mbr_judge(&s->m, now, c->cfg.lease_ms, &quiet) & ZS_MBR_LOST) {
				char why[ZS_ADDR_MAX + 64];
				coord_metrics_event(c, COORD_EV_SERVER_LAPSE);
				if (s->m.last_hb_ms)
					zs_warn("server %llu (%s) missed its lease (%lld ms without a heartbeat): marked down",
						(unsigned long long)s->info.id, s->info.addr,
						(long long)quiet);
				else
					zs_warn("server %llu (%s) has not been heard from in the %lld ms since this coordinator began to serve (its lease): marked down",
						(unsigned long long)s->info.id, s->info.addr,
						(long long)quiet);
				zs_fmt(why, sizeof why, "server %llu (%s) was marked down",
				       (unsigned long long)s->info.id, s->info.addr);
				coord_server_lost(c, s->info.id, why);
			}
		}
		pthread_mutex_unlock(&c->mu);
		zs_sleep_ms(tick > 10 ? tick : 10, (volatile const int *)&c->stop);
	}
	return NULL;
}
