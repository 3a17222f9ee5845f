/*
 * lead.c - several coordinators on one etcd cluster, one of them leading.
 *
 * Each coordinator holds an etcd lease of --etcd-lease-s seconds, renewed
 * a few times per period. The one that creates PREFIX/leader (bound to
 * its lease, its address as the value) leads: it loads the catalog from
 * etcd and serves; the others stand by, answering every call with a
 * refusal that names the leader (clients follow it: ctrl/coord_client.c),
 * and try again a few times per period. When the leader dies its lease
 * ends within one period and the key goes with it; a standby creates it,
 * loads the catalog, and leads. A clean stop revokes the lease: the
 * handover is then immediate.
 *
 * Fencing: the leader's writes are etcd transactions that hold only while
 * the key's create revision is the one it created (store.c). A leader cut
 * off from etcd stops serving once its lease may have ended by its own
 * clock (a renewal it has not heard back about counts from when it was
 * sent), and a write that etcd refuses ends its lead at once: it then
 * exits (coord_lost), to be started again as a standby by its supervisor,
 * as its in-memory state may be stale.
 */
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"

#include <time.h>

#include "ctrl/etcd.h"

/* The address the others are told to follow. */
static void set_leader(struct coord *c, const char *addr)
{
	pthread_mutex_lock(&c->ha.mu);
	snprintf(c->ha.leader, sizeof c->ha.leader, "%s", addr);
	pthread_mutex_unlock(&c->ha.mu);
}

bool coord_gate(void *ctx, size_t method, struct zs_rpc_call *call)
{
	struct coord *c = ctx;
	char leader[ZS_ADDR_MAX];

	(void)method;
	if (!coord_role_ok(c, call)) /* answered: the caller's role may not */
		return false;
	if (atomic_load(&c->ha.leading)) {
		/* a leader that was stopped (or cut off) past its lease must not
		 * answer what reached it meanwhile, not even a read: another may
		 * lead by now, and those clients would stay here */
		if (!c->ha.etcd || zs_now_ms() < atomic_load(&c->ha.until))
			return true;
		coord_lead_lost(c, "its etcd lease may have ended: it was not renewed in time");
	}
	pthread_mutex_lock(&c->ha.mu);
	snprintf(leader, sizeof leader, "%s", c->ha.leader);
	pthread_mutex_unlock(&c->ha.mu);
	if (atomic_load(&c->ha.lost))
		zs_rpc_redirect(call, leader, "coordinator %s lost the lead and is stopping%s%s",
				c->cfg.adv, leader[0] ? "; the leader is " : "", leader);
	else if (leader[0] && strcmp(leader, c->cfg.adv))
		zs_rpc_redirect(call, leader, "coordinator %s is a standby; the leader is %s", c->cfg.adv,
				leader);
	else
		zs_rpc_redirect(call, "", "coordinator %s is a standby and no coordinator leads yet",
				c->cfg.adv);
	return false;
}

void coord_lead_lost(struct coord *c, const char *why)
{
	if (!c->ha.etcd || atomic_exchange(&c->ha.lost, 1))
		return;
	atomic_store(&c->ha.leading, 0);
	set_leader(c, ""); /* not us: clients move on to the others */
	zs_error("lost the lead: %s; exiting, to start again as a standby", why);
}

int coord_lost(struct coord *c)
{
	return atomic_load(&c->ha.lost);
}

/* Takes the lead: the catalog from etcd into memory, then serving. */
static enum zs_status take_lead(struct coord *c, int64_t fence, struct zs_error *err)
{
	struct timespec ts;
	enum zs_status st;
	int64_t t0 = zs_now_ms();

	pthread_mutex_lock(&c->mu);
	c->ha.fence = fence;
	/* no server may take this leader's first tasks for ones it has seen */
	clock_gettime(CLOCK_REALTIME, &ts);
	c->task_gen = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	st = coord_load(c, err);
	if (!st)
		st = coord_resume_restores(c, err);
	if (!st) {
		set_leader(c, c->cfg.adv);
		atomic_store(&c->ha.leading, 1); /* until lead_until (hold_lead moves it on) */
	}
	pthread_mutex_unlock(&c->mu);
	if (!st)
		zs_info("leading (etcd %s, fence revision %lld): catalog of %zu servers (down until they heartbeat), %zu jobs, %zu checkpoints loaded in %lld ms",
			zs_etcd_endpoints(c->ha.etcd), (long long)fence, c->n_srvs, c->n_jobs,
			c->ck.n, (long long)(zs_now_ms() - t0));
	if (!st && c->seal.resealed) /* etcd keeps every revision until compacted */
		zs_warn("sealed %u job token(s) etcd held in the clear: its earlier revisions still hold them until etcd's history is compacted (etcdctl compact, then defrag)",
			c->seal.resealed);
	c->seal.resealed = 0;
	return st;
}

/* Our lease, granted or renewed by a request sent at `sent` (our clock) for
 * ttl_s more seconds: we may lead until then, less a quarter period of
 * margin for our clock against etcd's. */
static void renewed(struct coord *c, int64_t sent, int64_t ttl_s)
{
	atomic_store(&c->ha.until, sent + ttl_s * 1000 - (int64_t)c->ha.ttl_s * 1000 / 4);
}

/* A lease of our own, or ZS_EUNAVAIL after saying (once per outage) why. */
static enum zs_status get_lease(struct coord *c, bool *said)
{
	struct zs_error err = {0};
	int64_t ttl, sent = zs_now_ms();

	if (!zs_etcd_lease_grant(c->ha.etcd, c->ha.ttl_s, &c->ha.lease, &ttl, &err)) {
		c->ha.ttl_s = (uint32_t)ttl;
		renewed(c, sent, ttl);
		if (*said)
			zs_info("etcd answers again");
		*said = false;
		return ZS_OK;
	}
	if (!*said)
		zs_warn("waiting for etcd (%s): %s", zs_etcd_endpoints(c->ha.etcd), err.msg);
	*said = true;
	c->ha.lease = 0;
	return ZS_EUNAVAIL;
}

/* While leading: renews the lease until it is lost or we stop. */
static void hold_lead(struct coord *c)
{
	int64_t period = (int64_t)c->ha.ttl_s * 1000;
	char why[ZS_ERRMSG_MAX] = "";

	while (!atomic_load(&c->stop) && !atomic_load(&c->ha.lost)) {
		struct zs_error err = {0};
		int64_t sent = zs_now_ms(), ttl = 0;

		if (!zs_etcd_lease_keepalive(c->ha.etcd, c->ha.lease, &ttl, &err)) {
			if (!ttl) {
				coord_lead_lost(c, "etcd says its lease has ended");
				break;
			}
			renewed(c, sent, ttl);
			why[0] = '\0';
		} else {
			snprintf(why, sizeof why, "%s", err.msg);
		}
		if (zs_now_ms() >= atomic_load(&c->ha.until)) {
			char msg[ZS_ERRMSG_MAX + 64];
			snprintf(msg, sizeof msg, "the lease was not renewed in time (%s)",
				 why[0] ? why : "etcd did not answer");
			coord_lead_lost(c, msg);
			break;
		}
		zs_sleep_ms(period / 6 > 50 ? period / 6 : 50, (volatile const int *)&c->stop);
	}
}

static void *elector(void *arg)
{
	struct coord *c = arg;
	bool said = false;
	char holder_said[ZS_ADDR_MAX] = "";

	while (!atomic_load(&c->stop) && !atomic_load(&c->ha.lost)) {
		struct zs_error err = {0};
		int64_t poll = (int64_t)c->ha.ttl_s * 1000 / 4, rev = 0, ttl;
		bool won = false;

		if (poll > 500)
			poll = 500;
		if (!c->ha.lease && get_lease(c, &said)) {
			zs_sleep_ms(1000, (volatile const int *)&c->stop);
			continue;
		}
		if (zs_etcd_create(c->ha.etcd, c->ha.key, strlen(c->ha.key), c->cfg.adv, strlen(c->cfg.adv),
				   c->ha.lease, &won, &rev, &err)) {
			if (!said)
				zs_warn("cannot campaign in etcd: %s", err.msg);
			said = true;
			zs_sleep_ms(poll, (volatile const int *)&c->stop);
			continue;
		}
		if (won) {
			if (take_lead(c, rev, &err)) {
				coord_lead_lost(c, err.msg);
				break;
			}
			hold_lead(c);
			break;
		}
		/* a standby: who leads, and our own lease kept */
		struct zs_buf v;
		int64_t crev;
		if (!zs_etcd_get(c->ha.etcd, c->ha.key, strlen(c->ha.key), &v, &crev, &err)) {
			char addr[ZS_ADDR_MAX];
			snprintf(addr, sizeof addr, "%.*s", (int)v.len, (const char *)v.data);
			zs_buf_release(&v);
			set_leader(c, addr);
			if (strcmp(addr, holder_said)) {
				zs_info("standing by: %s leads", addr);
				snprintf(holder_said, sizeof holder_said, "%s", addr);
			}
		}
		int64_t sent = zs_now_ms();
		if (zs_etcd_lease_keepalive(c->ha.etcd, c->ha.lease, &ttl, &err) || !ttl)
			c->ha.lease = 0; /* a new one next round */
		else
			renewed(c, sent, ttl);
		zs_sleep_ms(poll, (volatile const int *)&c->stop);
	}
	return NULL;
}

enum zs_status coord_lead_start(struct coord *c, const char *endpoints, const char *prefix,
				uint32_t lease_s, struct zs_error *err)
{
	enum zs_status st;

	snprintf(c->ha.prefix, sizeof c->ha.prefix, "%s", prefix && *prefix ? prefix : "/zshard");
	/* no trailing slash: the keys add their own */
	for (size_t n = strlen(c->ha.prefix); n > 1 && c->ha.prefix[n - 1] == '/'; n--)
		c->ha.prefix[n - 1] = '\0';
	snprintf(c->ha.key, sizeof c->ha.key, "%s/leader", c->ha.prefix);
	c->ha.ttl_s = lease_s ? lease_s : 5;
	/* one try at one member: well within a lease period */
	c->ha.fenced = coord_lead_lost;
	st = zs_etcd_open(endpoints, (int)c->ha.ttl_s * 1000 / 3, &c->ha.etcd, err);
	if (st)
		return st;
	if (pthread_create(&c->ha.elector, NULL, elector, c)) {
		zs_etcd_close(c->ha.etcd);
		c->ha.etcd = NULL;
		return zs_fail(err, ZS_ENOMEM, "cannot start the election thread");
	}
	c->ha.elector_started = true;
	return ZS_OK;
}

void coord_lead_stop(struct coord *c)
{
	struct zs_error err = {0};

	if (!c->ha.etcd)
		return;
	if (c->ha.elector_started)
		pthread_join(c->ha.elector, NULL);
	/* a clean stop hands over at once: the key goes with the lease */
	if (c->ha.lease && atomic_load(&c->ha.leading) &&
	    zs_etcd_lease_revoke(c->ha.etcd, c->ha.lease, &err))
		zs_warn("cannot hand the lead over (the next leader waits out the lease): %s",
			err.msg);
	atomic_store(&c->ha.leading, 0);
}

void coord_lead_close(struct coord *c)
{
	zs_etcd_close(c->ha.etcd);
	c->ha.etcd = NULL;
}
