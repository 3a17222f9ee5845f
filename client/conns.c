/*
 * conns.c - a trainer's data-plane connections: one per server that holds
 * a shard of its placement (two where the transport has lanes), made for
 * the whole placement (tr_reconnect) or for the servers it adds
 * (tr_connect_new, a failover's); the placement's primaries taken. A
 * server connected to is handed to t->on_conn first (hparams.c: the
 * tables set before it came).
 */
#include "client/trainer.h"

#include "base/log.h"

static struct zs_conn *conn_of(zs_trainer *t, uint64_t server_id)
{
	return tr_conn(t, server_id, false);
}

void tr_disconnect(zs_trainer *t)
{
	tr_live_forget(t); /* their requests go with the connections */
	t->fo.lost_tried = 0;
	for (uint32_t i = 0; i < t->n_srv; i++) {
		zs_conn_close(t->conn[i]);
		zs_conn_close(t->gconn[i]);
	}
	for (uint32_t i = 0; i < t->fo.n_dead; i++)
		zs_conn_close(t->fo.dead[i]);
	free(t->fo.dead);
	t->fo.dead = NULL;
	t->fo.n_dead = 0;
	t->n_srv = 0;
	t->drv.reg_conn = NULL;
	free(t->srv_id);
	free(t->conn);
	free(t->gconn);
	t->srv_id = NULL;
	t->conn = NULL;
	t->gconn = NULL;
}

/* Connects to every server holding a shard of the job. */
static enum zs_status connect_all(zs_trainer *t, const char *transport, int timeout_ms,
				  struct zs_error *err)
{
	struct zs_server_info *s = NULL;
	char host[ZS_ADDR_MAX] = "";
	struct zs_transport_probe probe = {0};
	uint32_t n_s;
	enum zs_status st = zs_coord_servers(t->coord, &s, &n_s, err);

	if (st)
		return st;
	gethostname(host, sizeof host - 1);
	{ /* room for every server listed, beside those connected already */
		size_t room = t->n_srv + n_s + 1;
		uint64_t *ids = realloc(t->srv_id, room * sizeof *ids);
		struct zs_conn **cs = ids ? realloc(t->conn, room * sizeof *cs) : NULL;
		struct zs_conn **gs = cs ? realloc(t->gconn, room * sizeof *gs) : NULL;
		if (ids)
			t->srv_id = ids;
		if (cs)
			t->conn = cs;
		if (gs)
			t->gconn = gs;
		if (!ids || !cs || !gs) {
			free(s);
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		}
	}
	for (uint32_t i = 0; i < n_s && !st; i++) {
		bool used = false;
		uint32_t skip0 = t->job.spec.data_tls && zs_transport_is_auto(transport)
					 ? ZS_TRANSPORT_RDMA
					 : 0;
		const struct zs_transport_ops *ops;
		struct zs_conn_opts o = {.job = t->job.spec.name, .token = t->job.token, .rank = t->rank,
					 .incarnation = t->job.incarnation,
					 .epoch = t->job.placement.epoch,
					 .reconnects = atomic_load(&t->ls.reconnects),
					 .session = t->ls.session,
					 .tls = t->job.spec.data_tls,
					 .reader = t->job.token_reader,
					 .timeout_ms = timeout_ms};
		struct zs_transport_offer offer = {.bits = s[i].transports,
						   .same_host = !strcmp(s[i].host, host),
						   .addr = s[i].data_addr,
						   .local_addr = s[i].shm_addr};
		for (uint32_t k = 0; k < t->job.placement.n_shards; k++)
			used |= t->job.placement.shards[k].server_id == s[i].id;
		if (!used || conn_of(t, s[i].id))
			continue;
		/* under auto, a transport that does not reach the server (shm to
		 * a server in another network namespace) gives way to the next;
		 * an encrypted job's auto leaves rdma out (its bytes would go
		 * in the clear: the fabric's isolation alone would keep them) */
		for (uint32_t skip = skip0;; skip |= ops->bit) {
			struct zs_error why = {0};
			st = zs_transport_choose(transport, &offer, &probe, skip, &ops, &o.addr,
						 skip != skip0 ? &why : err);
			if (st) {
				if (skip != skip0) /* nothing left: the last connect's error */
					st = err->code;
				else
					zs_error_prefix(err, "server %llu (%s)",
							(unsigned long long)s[i].id, s[i].addr);
				break;
			}
			t->gconn[t->n_srv] = NULL;
			st = zs_connect(ops, &o, &t->conn[t->n_srv], err);
			if (!st && (ops->caps & ZS_CAP_LANES) &&
			    (st = zs_connect(ops, &o, &t->gconn[t->n_srv], err)))
				zs_conn_close(t->conn[t->n_srv]); /* both lanes or none */
			if (st != ZS_EUNAVAIL || !zs_transport_is_auto(transport))
				break;
			zs_debug("server %llu: %s does not reach it (%s), trying the next transport",
			       (unsigned long long)s[i].id, ops->name, err->msg);
		}
		if ((st == ZS_EUNAVAIL || st == ZS_ETIMEDOUT) && !s[i].up) {
			/* a server the coordinator has not heard from since its
			 * own restart (or since the lease lapsed) is listed at
			 * the address it had: wait for it to register again */
			zs_error_prefix(err, "server %llu, not registered since the coordinator's start or its lease's lapse",
					(unsigned long long)s[i].id);
			st = ZS_EAGAIN;
		}
		/* a server connected to now (a failover's new primary, which
		 * trainers did not push to) has none of the tables the others
		 * got: the steps in flight are applied with them, not with the
		 * last table its primary forwarded (a promoted copy applied a
		 * step at the step before's learning rate: wrong bits) */
		if (!st && t->on_conn && (st = t->on_conn(t, t->conn[t->n_srv], err))) {
			zs_conn_close(t->conn[t->n_srv]);
			if (t->gconn[t->n_srv])
				zs_conn_close(t->gconn[t->n_srv]);
		}
		if (!st) {
			if ((ops->caps & ZS_CAP_REGISTER) && !t->drv.reg_conn) {
				t->drv.reg_conn = t->conn[t->n_srv];
				t->drv.reg_ops = ops;
			}
			if (t->job.spec.data_tls && !t->tls_said) {
				const char *how = zs_conn_encryption(t->conn[t->n_srv]);
				t->tls_said = true;
				if (how)
					zs_info("job '%s': the data plane is encrypted (TLS 1.3 records, AES-256-GCM; %s)",
						t->job.spec.name, how);
				else if (ops->caps & ZS_CAP_SAME_HOST)
					zs_info("job '%s': its data plane is encrypted over tcp; %s's bytes do not leave this host",
						t->job.spec.name, ops->name);
				else
					zs_warn("job '%s' encrypts its data plane (data_tls), but %s's bytes are not: the fabric's isolation alone keeps them (transport auto leaves %s out)",
						t->job.spec.name, ops->name, ops->name);
			}
			t->srv_id[t->n_srv++] = s[i].id;
		}
	}
	for (uint32_t k = 0; !st && k < t->job.placement.n_shards; k++)
		if (!conn_of(t, t->job.placement.shards[k].server_id))
			st = zs_fail(err, ZS_EUNAVAIL, "server %llu, which holds shards, is not listed",
				     (unsigned long long)t->job.placement.shards[k].server_id);
	free(s);
	return st;
}

enum zs_status tr_connect_new(zs_trainer *t, struct zs_error *err)
{
	return connect_all(t, t->transport, t->timeout_ms, err);
}

/*
 * A server said ZS_EAGAIN: it may be behind t's placement (it takes the
 * new epoch at its next heartbeat: waited for) or ahead of it (the job
 * was re-placed since t read it: a failover or a rebuild between the
 * job's creation and this join). The coordinator's placement of the same
 * timeline, when newer, is taken; one of another timeline is left to
 * catch_up (resume.c).
 */
static void newer_placement(zs_trainer *t)
{
	struct zs_error e = {0};
	struct zs_job j;

	if (!t->coord || zs_coord_get_job(t->coord, t->job.spec.name, &j, &e))
		return;
	if (j.incarnation == t->job.incarnation && j.timeline == t->timeline &&
	    j.placement.epoch > t->job.placement.epoch && !tr_take_placement(t, &j.placement))
		zs_info("rank %u of job '%s': its placement moved to epoch %llu while it connected",
			t->rank, t->job.spec.name, (unsigned long long)t->job.placement.epoch);
	zs_job_release(&j);
}

enum zs_status tr_reconnect(zs_trainer *t, struct zs_error *err)
{
	int64_t deadline = zs_now_ms() + t->timeout_ms;
	enum zs_status st;

	/* its connections end on purpose: the coordinator hears so first
	 * (client/lease.c; a resume has said it already) */
	tr_lease_reconnecting(t, true);
	tr_disconnect(t);
	while ((st = connect_all(t, t->transport, t->timeout_ms, err)) == ZS_EAGAIN &&
	       zs_now_ms() < deadline) {
		tr_lease_reconnect_again(t);
		tr_disconnect(t);
		newer_placement(t);
		zs_sleep_ms(50, NULL);
	}
	if (st == ZS_EAGAIN)
		st = zs_fail(err, ZS_ETIMEDOUT, "%s (waited %d ms for it)", err->msg, t->timeout_ms);
	if (st)
		tr_disconnect(t);
	else
		tr_lease_reconnecting(t, false);
	return st;
}

enum zs_status tr_take_placement(zs_trainer *t, const struct zs_placement *p)
{
	struct zs_placement q;

	if (zs_placement_primaries(&q, p))
		return ZS_ENOMEM;
	zs_placement_release(&t->job.placement);
	t->job.placement = q;
	return ZS_OK;
}
