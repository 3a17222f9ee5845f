/*
 * peers.c - a replicated job's connections from this server to its copies'
 * servers (rank ZS_RANK_PEER), made when first needed, marked broken by a
 * failed request and closed once nothing waits on them (engine/replica.c
 * sends on them).
 */
#include "engine/repl.h"

#include "net/transport.h"

/* The connection to peer server id for j (made when missing), or NULL. */
struct zs_conn *eng_peer_conn(struct engine *e, struct ejob *j, uint64_t id,
			      struct zs_error *err)
{
	struct zs_conn_opts o = {.job = j->name, .token = j->token, .epoch = j->epoch,
				 .incarnation = j->incarnation, .rank = ZS_RANK_PEER,
				 .tls = j->spec.data_tls, .timeout_ms = 5000};
	char addr[ZS_ADDR_MAX];
	unsigned k;

	for (k = 0; k < j->rc.n; k++)
		if (j->rc.peer[k].id == id && j->rc.peer[k].c && !j->rc.peer[k].broken)
			return j->rc.peer[k].c;
		else if (j->rc.peer[k].id == id && j->rc.peer[k].broken) {
			/* reaped (and made again) after this batch */
			zs_fail(err, ZS_EUNAVAIL, "the connection to server %llu broke",
				(unsigned long long)id);
			return NULL;
		}
	for (k = 0; k < j->rc.n && j->rc.peer[k].id != id; k++)
		;
	if (k == j->rc.n) {
		if (k == sizeof j->rc.peer / sizeof j->rc.peer[0]) {
			zs_fail(err, ZS_ENOSPC, "job '%s' has replicas on more than %u servers here",
				j->name, k);
			return NULL;
		}
		j->rc.peer[j->rc.n++].id = id;
	}
	if (e->rp.peer_fn(e->rp.peer_ctx, id, addr, sizeof addr, err))
		return NULL;
	o.addr = addr;
	if (zs_connect(&zs_tcp_transport, &o, &j->rc.peer[k].c, err)) {
		zs_error_prefix(err, "server %llu (%s)", (unsigned long long)id, addr);
		j->rc.peer[k].c = NULL;
		return NULL;
	}
	return j->rc.peer[k].c;
}

/* Marks the connection to peer id broken: closed (and every request still
 * on it freed) by peers_reap once nothing waits on its requests. */
void eng_peer_broken(struct ejob *j, uint64_t id)
{
	for (unsigned k = 0; k < j->rc.n; k++)
		if (j->rc.peer[k].id == id)
			j->rc.peer[k].broken = true;
}

void eng_peers_reap(struct ejob *j)
{
	for (unsigned k = 0; k < j->rc.n; k++)
		if (j->rc.peer[k].broken) {
			zs_conn_close(j->rc.peer[k].c);
			j->rc.peer[k].c = NULL;
			j->rc.peer[k].broken = false;
		}
}

void eng_repl_close(struct ejob *j)
{
	for (unsigned k = 0; k < j->rc.n; k++)
		zs_conn_close(j->rc.peer[k].c);
	j->rc.n = 0;
}
