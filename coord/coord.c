/*
 * coord.c - the coordinator's life (start, stop) and its RPC method
 * table (see state.h); the lookups and replies every handler shares are
 * lookup.c's.
 *
 * Catalog tables: meta ("next_server_id", "assign_gen": u64 LE),
 * servers (u64 BE id -> ServerInfo), jobs (name -> Job), ckpts.
 */
#include "coord/rpc.h"
#include "coord/catalog.h"
#include "coord/lookup.h"
#include "coord/ckpt.h"
#include "coord/recovery.h"
#include "coord/session.h"

#include <string.h>
#include <time.h>

#include "ctrl/seal.h"

static const struct zs_rpc_method methods[] = {
	{ZS_M_REGISTER, coord_h_register},     {ZS_M_HEARTBEAT, coord_h_heartbeat},
	{ZS_M_ASSIGNMENTS, coord_h_assignments}, {ZS_M_SERVERS, coord_h_servers},
	{ZS_M_CREATE_JOB, coord_h_create_job}, {ZS_M_GET_JOB, coord_h_get_job},
	{ZS_M_JOBS, coord_h_jobs},             {ZS_M_DELETE_JOB, coord_h_delete_job},
	{ZS_M_SET_STAGE, coord_h_set_stage},   {ZS_M_REBALANCE, coord_h_rebalance},
	{ZS_M_JOIN, coord_h_join},             {ZS_M_LEAVE, coord_h_leave},
	{ZS_M_TRAINER_HB, coord_h_trainer_heartbeat},
	{ZS_M_STOP_JOB, coord_h_stop_job},
	{ZS_M_CREATE_JOB_JSON, coord_h_create_job_json},
	{ZS_M_COORD_STATUS, coord_h_status},   {ZS_M_REPORT_NORM, coord_h_report_norm},
	{ZS_M_REPORT_STEP, coord_h_report_step},  {ZS_M_STEP_REPORTS, coord_h_step_reports},
	{ZS_M_DELETE_CKPT, coord_h_delete_ckpt},
	{ZS_M_CREATE_CKPT, coord_h_create_ckpt}, {ZS_M_GET_CKPT, coord_h_get_ckpt},
	{ZS_M_LIST_CKPTS, coord_h_list_ckpts}, {ZS_M_PUT_BLOB, coord_h_put_blob},
	{ZS_M_RESTORE, coord_h_restore},       {ZS_M_SERVER_TASKS, coord_h_server_tasks},
	{ZS_M_TASK_DONE, coord_h_task_done},   {ZS_M_COMM_ID, coord_h_comm_id},
	{ZS_M_READER, coord_h_reader},         {ZS_M_READERS, coord_h_readers},
	{ZS_M_DROPPED_RANKS, coord_h_dropped_ranks},
	{ZS_M_RESIZE_JOB, coord_h_resize_job},
	{ZS_M_REMOVE_SERVER, coord_h_remove_server},
};

/* The configuration's bounds and what it must name. */
static enum zs_status config_check(const struct coord_config *cfg, struct zs_error *err)
{
	if (cfg->lease_ms < 100 || cfg->lease_ms > 3600 * 1000)
		return zs_fail(err, ZS_EINVAL, "lease %u ms is out of range [100, 3600000]",
			       cfg->lease_ms);
	if (cfg->trainer_lease_ms && (cfg->trainer_lease_ms < 3000 ||
				      cfg->trainer_lease_ms > 3600 * 1000))
		return zs_fail(err, ZS_EINVAL,
			       "trainer lease %u ms is out of range [3000, 3600000] (trainers renew it every second)",
			       cfg->trainer_lease_ms);
	if (cfg->trainer_gone_ms && (cfg->trainer_gone_ms < 1500 ||
				     cfg->trainer_gone_ms > 3600 * 1000))
		return zs_fail(err, ZS_EINVAL,
			       "trainer gone bound %u ms is out of range [1500, 3600000] (trainers renew their lease every second)",
			       cfg->trainer_gone_ms);
	if (!cfg->etcd && !cfg->data_dir)
		return zs_fail(err, ZS_EINVAL, "a data dir or etcd endpoints are needed");
	if (cfg->etcd_lease_s > 3600)
		return zs_fail(err, ZS_EINVAL, "etcd lease %u s is out of range [1, 3600]",
			       cfg->etcd_lease_s);
	return ZS_OK;
}

/* The key the catalog's job tokens are sealed with (c->seal): --secret-key,
 * else the data dir's own (made at its first start); with etcd and no
 * --secret-key none, said. */
static enum zs_status open_seal(struct coord *c, const struct coord_config *cfg,
				struct zs_error *err)
{
	char path[4096];
	enum zs_status st;

	if (!cfg->secret_key && cfg->etcd) {
		zs_warn("the job tokens in etcd are not sealed: give every coordinator --secret-key FILE (the same 32 bytes) to keep them sealed there");
		return ZS_OK;
	}
	if (!cfg->secret_key && (st = zs_private_dir(cfg->data_dir, err)))
		return st;
	snprintf(path, sizeof path, "%s/secret.key", cfg->data_dir ? cfg->data_dir : "");
	if ((st = zs_seal_key_load(cfg->secret_key ? cfg->secret_key : path, !cfg->secret_key,
				   c->seal.key, err)))
		return st;
	c->seal.on = true;
	snprintf(c->seal.path, sizeof c->seal.path, "%s", cfg->secret_key ? cfg->secret_key : path);
	return ZS_OK;
}

/* The catalog in cfg's data directory, locked, opened and loaded into c
 * (nothing kept open when it fails). */
static enum zs_status open_catalog(struct coord *c, const struct coord_config *cfg,
				   struct zs_error *err)
{
	enum zs_status st;

	if ((st = zs_private_dir(cfg->data_dir, err)) ||
	    (st = zs_lock_dir(cfg->data_dir, "coordinator.lock", &c->lock_fd, err)))
		return st;
	if (!(st = zs_kv_open(cfg->data_dir, 0, tables, N_TABLES, 0, &c->kv, err)) &&
	    !(st = coord_load(c, err)) && !(st = coord_resume_restores(c, err))) {
		if (!c->seal.resealed)
			return ZS_OK;
		/* tokens it kept in the clear are sealed: their old records'
		 * pages, freed, still hold them until the file is rewritten */
		if (!(st = zs_kv_compact(&c->kv, tables, err))) {
			zs_info("catalog: rewritten without the freed pages that held %u token(s) in the clear",
				c->seal.resealed);
			return ZS_OK;
		}
	}
	zs_kv_close(c->kv);
	c->kv = NULL;
	close(c->lock_fd);
	c->lock_fd = -1;
	coord_free_state(c); /* what a load that stopped midway read */
	return st;
}

enum zs_status coord_start(const struct coord_config *cfg, struct coord **out,
			   char *bound, size_t bound_len, struct zs_error *err)
{
	struct coord *c;
	enum zs_status st;

	if ((st = config_check(cfg, err)))
		return st;
	c = calloc(1, sizeof *c);
	if (!c)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->ha.mu, NULL);
	c->cfg.lease_ms = cfg->lease_ms;
	c->cfg.trainer_lease_ms = cfg->trainer_lease_ms ? cfg->trainer_lease_ms : 10000;
	c->cfg.trainer_gone_ms = cfg->trainer_gone_ms ? cfg->trainer_gone_ms : COORD_GONE_QUIET_MS;
	c->cfg.tls_roles_required = cfg->tls_roles_required;
	c->cfg.data_tls = cfg->data_tls;
	c->nx.timeout_ms = cfg->norm_timeout_ms ? cfg->norm_timeout_ms : 60000;
	c->started_ms = zs_now_ms();
	/* readers' ids grow across restarts: the registry is memory, and a
	 * reader registered before says its id again within its lease; a new
	 * one given an id from 1 again took another's place (found by the
	 * simulator's reader world: reader-ids-restart) */
	c->next_reader = (uint64_t)(zs_wall_ms() / 1000) << 20;
	{
		/* the task generation is not persisted: start it where no
		 * server's remembered value can be, or a server would take the
		 * restarted coordinator's first tasks for ones it has seen */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		c->task_gen = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
	}
	c->lock_fd = -1;
	if ((st = open_seal(c, cfg, err)))
		goto clean_c;
	if (cfg->etcd) { /* the catalog is in etcd, loaded when we lead */
		snprintf(c->cfg.data_dir, sizeof c->cfg.data_dir, "etcd %s", cfg->etcd);
		goto serve;
	}
	snprintf(c->cfg.data_dir, sizeof c->cfg.data_dir, "%s", cfg->data_dir);

	if ((st = open_catalog(c, cfg, err)))
		goto clean_c;
	atomic_store(&c->ha.leading, 1);
	if (c->n_srvs || c->n_jobs)
		zs_info("catalog: %zu servers (down until they heartbeat), %zu jobs",
			c->n_srvs, c->n_jobs);
serve:
	st = zs_rpc_server_start(cfg->listen, methods,
				 sizeof methods / sizeof methods[0], c, &c->rpc,
				 c->cfg.addr, sizeof c->cfg.addr, err);
	if (st)
		goto clean_state;
	/* what Status says; a wildcard is kept there (clients are configured
	 * with the coordinator's address, they never learn it from it) */
	snprintf(c->cfg.adv, sizeof c->cfg.adv, "%s", c->cfg.addr);
	if (cfg->advertise && (st = zs_advertise_addr(cfg->advertise, c->cfg.addr, false, c->cfg.adv,
						      sizeof c->cfg.adv, "control", err)))
		goto clean_rpc;
	if (cfg->metrics && (st = coord_metrics_start(c, cfg->metrics, cfg->advertise,
						      cfg->metrics_certified, methods,
						      sizeof methods / sizeof methods[0], err)))
		goto clean_rpc;
	zs_rpc_server_gate(c->rpc, coord_gate, c);
	if (cfg->etcd && (st = coord_lead_start(c, cfg->etcd, cfg->etcd_prefix, cfg->etcd_lease_s,
						err)))
		goto clean_rpc;
	if (pthread_create(&c->reaper, NULL, coord_reaper, c)) {
		st = zs_fail(err, ZS_ENOMEM, "cannot start the lease thread");
		atomic_store(&c->stop, 1);
		coord_lead_stop(c);
		goto clean_rpc;
	}
	if (bound)
		snprintf(bound, bound_len, "%s", c->cfg.addr);
	*out = c;
	return ZS_OK;

clean_rpc:
	coord_metrics_stop(c);
	zs_rpc_server_free(c->rpc);
	coord_lead_close(c);
	coord_metrics_free(c);
clean_state:
	coord_free_state(c);
	coord_ctasks_free(c);
	zs_kv_close(c->kv);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
clean_c:
	pthread_mutex_destroy(&c->ha.mu);
	pthread_mutex_destroy(&c->mu);
	explicit_bzero(&c->seal, sizeof c->seal);
	free(c);
	return st;
}

void coord_free(struct coord *c)
{
	if (!c)
		return;
	atomic_store(&c->stop, 1);
	coord_metrics_stop(c); /* no scrape reads the state from here on */
	pthread_join(c->reaper, NULL);
	coord_lead_stop(c); /* a leader hands over now */
	/* deferred calls are answered before the RPC server goes */
	pthread_mutex_lock(&c->mu);
	while (c->nx.colls) {
		struct norm_coll *n = c->nx.colls;
		c->nx.colls = n->next;
		coord_norm_fail(n, ZS_EUNAVAIL, "the coordinator is stopping");
	}
	pthread_mutex_unlock(&c->mu);
	zs_rpc_server_free(c->rpc);
	/* what the handlers keep, once none can run (calls received before
	 * the shutdown are still handled while the server drains: a step
	 * report then kept its rank's entries past an earlier drop) */
	pthread_mutex_lock(&c->mu);
	while (c->reports)
		coord_drop_reports(c, c->reports->job);
	coord_steps_forget(c, NULL);
	coord_drop_norms_done(c, NULL);
	coord_drop_comms(c);
	coord_drop_readers(c, NULL);
	pthread_mutex_unlock(&c->mu);
	coord_lead_close(c); /* no call uses the etcd client any more */
	coord_metrics_free(c); /* the RPC server's observer is gone with it */
	zs_kv_close(c->kv);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	coord_free_state(c);
	coord_ctasks_free(c);
	pthread_mutex_destroy(&c->ha.mu);
	pthread_mutex_destroy(&c->mu);
	explicit_bzero(&c->seal, sizeof c->seal);
	free(c);
}
