/*
 * member.c - a shard server's membership side: it registers with the
 * coordinator (waiting, bounded, for one that is not up yet), renews its
 * lease by heartbeat, keeps the shard assignments the coordinator gives it,
 * and answers the Server service (Status, Snapshot, ReadCheckpoint). Its id
 * is kept in LMDB under its data dir, so a restarted server is the same
 * server to the coordinator.
 */
#include "server/daemon.h"

#include "ctrl/token.h"

static void h_status(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct srvd *d = ctx;
	struct zs_server_status s = {0};
	struct zs_job_step_stats js[64];
	struct zs_buf b;
	enum zs_status st;

	(void)p;
	(void)n;
	pthread_mutex_lock(&d->mu);
	s.id = d->me.id;
	snprintf(s.addr, sizeof s.addr, "%s", d->me.addr);
	snprintf(s.coordinator, sizeof s.coordinator, "%s", zs_coord_addr(d->coord));
	s.registered = d->registered;
	s.capacity = d->me.capacity;
	s.assign_gen = d->gen;
	s.uptime_ms = zs_now_ms() - d->started_ms;
	s.n_assignments = d->n_as;
	s.assignments = d->as; /* borrowed for encoding */
	for (uint32_t i = 0; i < d->n_as; i++)
		s.assigned_bytes += d->as[i].bytes;
	snprintf(s.data_addr, sizeof s.data_addr, "%s", d->me.data_addr);
	snprintf(s.shm_addr, sizeof s.shm_addr, "%s", d->me.shm_addr);
	{
		struct engine_stats es;
		engine_stats(d->engine, &es);
		s.jobs_held = es.jobs;
		s.shards = es.shards;
		s.state_bytes = es.bytes;
		s.steps_applied = es.steps_applied;
		s.bytes_in = es.bytes_in;
		s.bytes_out = es.bytes_out;
		s.gathers_waiting = es.held;
		s.shards_on_device = es.on_device;
		s.shards_tiered = es.tiered;
		s.device_bytes = es.device_bytes;
		s.replica_bytes = es.repl_bytes;
		if (engine_device(d->engine))
			zs_fmt(s.device, sizeof s.device, "%s", engine_device(d->engine));
	}
	zs_rss(&s.rss_bytes, &s.rss_peak_bytes);
	zs_fmt(s.rdma, sizeof s.rdma, "%s%s", d->me.transports & ZS_TRANSPORT_RDMA ? "offered: " : "not offered: ",
		 d->rdma_note);
	s.job_steps = js;
	s.n_job_steps = engine_job_steps(d->engine, js, sizeof js / sizeof js[0]);
	st = zs_enc_server_status(&s, &b);
	pthread_mutex_unlock(&d->mu);
	if (st) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode status");
		return;
	}
	zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
}

/* The engine's norm exchange: the coordinator sums every server's norms. */
enum zs_status srvd_exchange_norms(void *ctx, const char *job, uint64_t timeline,
				     uint64_t step, const struct zs_shard_norm *norms, uint32_t n,
				     double *total, struct zs_error *err)
{
	struct srvd *d = ctx;
	struct zs_norm_report r = {.step = step, .server_id = d->me.id, .n = n,
				   .norms = (struct zs_shard_norm *)norms, .timeline = timeline};

	snprintf(r.job, sizeof r.job, "%s", job);
	return zs_coord_report_norm(d->coord, &r, (int)d->step_timeout_ms, total, err);
}

/* The engine's peer resolver: a server's data-plane address, as the
 * coordinator lists it. */
enum zs_status srvd_peer_addr(void *ctx, uint64_t id, char *addr, size_t len,
			      struct zs_error *err)
{
	struct srvd *d = ctx;
	struct zs_server_info *s = NULL;
	uint32_t n = 0;
	enum zs_status st = zs_coord_servers(d->coord, &s, &n, err);

	if (st)
		return st;
	st = zs_fail(err, ZS_ENOTFOUND, "server %llu is not registered", (unsigned long long)id);
	for (uint32_t i = 0; i < n; i++)
		if (s[i].id == id) {
			if (!s[i].data_addr[0])
				st = zs_fail(err, ZS_EUNAVAIL, "server %llu has no data address yet",
					     (unsigned long long)id);
			else {
				snprintf(addr, len, "%s", s[i].data_addr);
				st = ZS_OK;
			}
		}
	free(s);
	return st;
}

/* one refresh at a time: the heartbeat's, a task's, a stale check's */
static pthread_mutex_t refresh_one = PTHREAD_MUTEX_INITIALIZER;

/* The engine's stale check: a trainer reached one of our replicas; when
 * the coordinator has moved the job's placement on (a failover), the
 * assignments are taken now rather than at the next heartbeat. */
bool srvd_stale(void *ctx, const char *job, uint64_t epoch)
{
	struct srvd *d = ctx;
	struct zs_error err = {0};
	struct zs_job j;
	bool newer;

	if (zs_coord_get_job(d->coord, job, &j, &err))
		return false;
	newer = j.placement.epoch > epoch;
	zs_job_release(&j);
	if (newer) {
		srvd_refresh_assignments(d);
	} else {
		/* the engine has the epoch, but a refresh may be giving the
		 * shards their roles still: the caller reads its role after */
		pthread_mutex_lock(&refresh_one);
		pthread_mutex_unlock(&refresh_one);
	}
	return newer;
}

/* Snapshot: a trainer's word that a checkpoint of step t is wanted, ahead
 * of the next heartbeat that would bring the task. */
static void h_snapshot(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct srvd *d = ctx;
	struct zs_error err = {0};
	struct zs_task t;

	if (zs_dec_task(p, n, &t, &err))
		return zs_rpc_fail(call, err.code, "%s", err.msg);
	if (t.kind != ZS_TASK_SNAPSHOT)
		return zs_rpc_fail(call, ZS_EINVAL, "only snapshots are asked this way");
	if (srvd_claim(d, &t))
		srvd_run_task(d, &t);
	zs_rpc_reply(call, NULL, 0);
}

static void h_read_ckpt(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct srvd *d = ctx;
	struct zs_error err = {0};
	struct zs_read_ckpt r;
	struct zs_kv_txn *t;
	struct zs_buf b;
	uint64_t step;
	float *out;
	static const enum ckpt_kind kinds[3] = {CKPT_MASTER, CKPT_STATE0, CKPT_STATE1};

	if (zs_dec_read_ckpt(p, n, &r, &err))
		return zs_rpc_fail(call, err.code, "%s", err.msg);
	out = malloc(r.length ? r.length * 4 : 1);
	if (!out)
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	if (zs_kv_begin(d->kv, false, &t, &err) ||
	    ckpt_get_slice(t, KV_CKPT, r.job, r.id, r.unit, r.index, kinds[r.array], r.offset,
			   r.length, &step, out, &err)) {
		zs_kv_abort(t);
		free(out);
		return zs_rpc_fail(call, err.code, "%s", err.msg);
	}
	zs_kv_abort(t);
	if (zs_enc_read_ckpt_reply(step, out, r.length, &b))
		zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	else
		zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
	free(out);
}

const struct zs_rpc_method srvd_methods[] = {
	{ZS_M_SERVER_STATUS, h_status},
	{ZS_M_SERVER_SNAPSHOT, h_snapshot},
	{ZS_M_SERVER_READ_CKPT, h_read_ckpt},
};
const size_t srvd_n_methods = sizeof srvd_methods / sizeof srvd_methods[0];

static enum zs_status save_id(struct srvd *d, uint64_t id, struct zs_error *err)
{
	struct zs_kv_txn *t;
	uint8_t b[8];
	enum zs_status st = zs_kv_begin(d->kv, true, &t, err);

	if (st)
		return st;
	zs_kv_u64_enc(id, b);
	st = zs_kv_put(t, KV_META, "server_id", 9, b, 8, err);
	if (st) {
		zs_kv_abort(t);
		return st;
	}
	return zs_kv_commit(t, err);
}

uint64_t srvd_load_id(struct srvd *d)
{
	struct zs_kv_txn *t;
	const void *v;
	size_t vl;
	uint64_t id = 0;

	if (zs_kv_begin(d->kv, false, &t, NULL))
		return 0;
	if (!zs_kv_get(t, KV_META, "server_id", 9, &v, &vl, NULL) && vl == 8)
		id = zs_kv_u64_dec(v);
	zs_kv_abort(t);
	return id;
}

/*
 * Registers, retrying while the coordinator is unreachable, for at most
 * d->wait_ms. Other errors (a bad address, capacity refused) are final.
 */
enum zs_status srvd_do_register(struct srvd *d, struct zs_error *err)
{
	int64_t t0 = zs_now_ms(), last_note = t0;
	enum zs_status st;
	uint64_t id;
	uint32_t lease;

	/* the first registration of this process: whatever shards the
	 * coordinator had placed here are gone with the last one */
	d->me.fresh = !d->registered;
	for (;;) {
		st = zs_coord_register(d->coord, &d->me, &id, &lease, err);
		if (st != ZS_EUNAVAIL && st != ZS_ETIMEDOUT)
			break;
		if (srvd_stop)
			return zs_fail(err, ZS_ECANCELED, "stopped while waiting");
		if (zs_now_ms() - t0 >= d->wait_ms) {
			char last[ZS_ERRMSG_MAX / 2]; /* err->msg cannot format into itself */
			snprintf(last, sizeof last, "%.200s", err->msg);
			return zs_fail(err, ZS_ETIMEDOUT,
				       "no coordinator answered at %s within %lld ms (%s)",
				       zs_coord_addr(d->coord), (long long)d->wait_ms, last);
		}
		if (zs_now_ms() - last_note >= 5000) {
			zs_info("waiting for the coordinator at %s (%lld s so far)",
				zs_coord_addr(d->coord),
				(long long)((zs_now_ms() - t0) / 1000));
			last_note = zs_now_ms();
		}
		zs_sleep_ms(200, (volatile const int *)&srvd_stop);
	}
	if (st)
		return st;
	if (id != d->me.id) {
		st = save_id(d, id, err);
		if (st)
			return st;
	}
	pthread_mutex_lock(&d->mu);
	d->me.id = id;
	d->lease_ms = lease;
	d->registered = 1;
	pthread_mutex_unlock(&d->mu);
	zs_info("registered with %s as server %llu (lease %u ms)",
		zs_coord_addr(d->coord), (unsigned long long)id, lease);
	return ZS_OK;
}

/* Fetches this server's assignments and makes the engine hold them. */
static void refresh(struct srvd *d)
{
	struct zs_error err = {0};
	struct zs_assignment *as, *old;
	uint32_t n_as, n_old;
	uint64_t gen, bytes = 0;

	if (zs_coord_assignments(d->coord, d->me.id, &gen, &as, &n_as, &err)) {
		zs_warn("cannot fetch assignments: %s", err.msg);
		return;
	}
	pthread_mutex_lock(&d->mu);
	old = d->as;
	n_old = d->n_as;
	d->as = as;
	d->n_as = n_as;
	d->gen = gen;
	pthread_mutex_unlock(&d->mu);
	for (uint32_t i = 0; i < n_old; i++)
		zs_assignment_release(&old[i]);
	free(old);
	for (uint32_t i = 0; i < n_as; i++) {
		struct zs_job job;
		bytes += as[i].bytes;
		if (engine_has_job(d->engine, as[i].job, as[i].epoch, as[i].incarnation))
			continue;
		zs_info("assigned %u shards of job '%s' (epoch %llu, %llu bytes)",
			as[i].n_shards, as[i].job, (unsigned long long)as[i].epoch,
			(unsigned long long)as[i].bytes);
		if (zs_coord_get_job(d->coord, as[i].job, &job, &err)) {
			zs_warn("cannot fetch job '%s': %s", as[i].job, err.msg);
			continue;
		}
		if (job.incarnation != as[i].incarnation) {
			/* deleted and created again since: the next assignments
			 * bring the new one, with its token */
			zs_info("job '%s' was created again since its assignment: waiting for the next",
				as[i].job);
			zs_job_release(&job);
			continue;
		}
		/* the data-plane token comes with the assignment, not the listing */
		memcpy(job.token, as[i].token, sizeof job.token);
		zs_reader_token(job.token, job.reader_token);
		if (engine_add_job(d->engine, &job, d->me.id, &err))
			zs_error("cannot hold job '%s': %s", as[i].job, err.msg);
		zs_job_release(&job);
	}
	{
		/* drop jobs that are no longer assigned here */
		char names[64][ZS_JOB_NAME_MAX];
		uint32_t n = engine_job_names(d->engine, names, 64);
		for (uint32_t k = 0; k < n; k++) {
			bool kept = false;
			for (uint32_t i = 0; i < n_as; i++)
				kept |= !strcmp(names[k], as[i].job);
			if (!kept)
				engine_remove_job(d->engine, names[k]);
		}
	}
	zs_info("assignment generation %llu: %u jobs, %llu bytes in all",
		(unsigned long long)gen, n_as, (unsigned long long)bytes);
}

void srvd_refresh_assignments(struct srvd *d)
{
	pthread_mutex_lock(&refresh_one);
	refresh(d);
	pthread_mutex_unlock(&refresh_one);
}

/*
 * The coordinator waits for the norms of steps this server was answered
 * already (the coordinator that answered died before it answered the
 * others, who sent theirs again): those kept go again, settled. All within
 * a third of the lease, on the heartbeat's thread (the next heartbeat is
 * not pushed past the lease); one not sent is asked for at the next.
 */
static void norms_again(struct srvd *d, const struct zs_hb_reply *r)
{
	int64_t deadline = zs_now_ms() + (d->lease_ms / 3 ? d->lease_ms / 3 : 100);

	for (uint32_t i = 0; i < r->n_wants; i++) {
		int64_t left = deadline - zs_now_ms();
		const struct zs_norm_want *w = &r->wants[i];
		struct zs_norm_report rep = {.step = w->step, .server_id = d->me.id,
					     .settled = true, .timeline = w->timeline};
		struct zs_error err = {0};
		double total;
		/* not answered here (yet): this server's own report comes */
		if (left < 1 || engine_norms_answered(d->engine, w->job, w->step, &rep.norms, &rep.n,
						      &rep.settled_total))
			continue;
		snprintf(rep.job, sizeof rep.job, "%s", w->job);
		zs_debug("job '%s' step %llu: the coordinator asks for norms answered here (total %a): sending them again",
			w->job, (unsigned long long)w->step, rep.settled_total);
		if (zs_coord_report_norm(d->coord, &rep, (int)left, &total, &err))
			zs_warn("job '%s' step %llu: cannot send the answered norms again: %s (the next heartbeat asks again)",
				w->job, (unsigned long long)w->step, err.msg);
		free(rep.norms);
	}
}

/*
 * Trainer ranks whose data connections here all ended, or began again:
 * told to the coordinator at once (it takes one that also stops renewing
 * its lease for gone). Not sent (the coordinator away): given back to the
 * engine (kept, before newer notes) and sent at the next poll (a "back" lost so kept a live rank
 * marked, taken for gone if it then stopped before its next renewal); the
 * trainer's lease still bounds how long it is waited for.
 */
static void report_dropped(struct srvd *d)
{
	struct zs_dropped v[64];
	uint32_t n, marked = 0;
	struct zs_error err = {0};

	while ((n = engine_take_dropped(d->engine, v, sizeof v / sizeof v[0]))) {
		if (zs_coord_report_dropped(d->coord, d->me.id, v, n, &marked, &err)) {
			engine_dropped_settle(d->engine, false);
			if (!d->dropped_unsent++) /* said once until one is sent */
				zs_warn("cannot tell the coordinator that %u trainer rank(s) left or came back to this server (job '%s' rank %u%s): %s; sent again until it takes them",
					n, v[0].job, v[0].rank, n > 1 ? ", ..." : "", err.msg);
			return;
		}
		engine_dropped_settle(d->engine, true);
		d->dropped_unsent = 0;
		zs_debug("told the coordinator that %u trainer rank(s) left this server (job '%s' rank %u%s); %u member(s)",
			 n, v[0].job, v[0].rank, n > 1 ? ", ..." : "", marked);
	}
}

/* Until the next heartbeat (ms from now) or the stop, reporting dropped
 * ranks as they come (polled every 50 ms: a lock and a count). */
static void wait_beat(struct srvd *d, int64_t ms)
{
	int64_t until = zs_now_ms() + ms;

	while (!srvd_stop) {
		int64_t left;
		report_dropped(d);
		if ((left = until - zs_now_ms()) <= 0)
			break;
		zs_sleep_ms(left < 50 ? left : 50, (volatile const int *)&srvd_stop);
	}
}

void *srvd_heartbeat(void *arg)
{
	struct srvd *d = arg;
	int lost = 0;
	static struct zs_seeded seeded[64]; /* this thread's alone */
	uint32_t n_seeded = 0;

	while (!srvd_stop) {
		struct zs_error err = {0};
		struct zs_hb_reply r = {0};
		enum zs_status st;

		wait_beat(d, d->lease_ms / 3 ? d->lease_ms / 3 : 100);
		if (srvd_stop)
			break;
		char health[sizeof d->health];
		pthread_mutex_lock(&d->mu);
		memcpy(health, d->health, sizeof health);
		pthread_mutex_unlock(&d->mu);
		int64_t t0 = zs_now_ms();
		/* new copies seeded: told once the coordinator has heard it */
		n_seeded += engine_take_seeded(d->engine, seeded + n_seeded,
					       (uint32_t)(sizeof seeded / sizeof seeded[0]) - n_seeded);
		st = zs_coord_heartbeat_ex(d->coord, d->me.id, health, seeded, n_seeded, &r, &err);
		if (!st)
			n_seeded = 0;
		srvd_metrics_heartbeat(d, (double)(zs_now_ms() - t0) * 1e-3, !st);
		if (st == ZS_ENOTFOUND) {
			zs_warn("coordinator does not know server %llu: registering again",
				(unsigned long long)d->me.id);
			st = srvd_do_register(d, &err);
			if (!st)
				st = zs_coord_heartbeat_ex(d->coord, d->me.id, health, NULL, 0, &r,
							   &err);
		}
		if (st) {
			if (!lost)
				zs_warn("heartbeat to %s failed: %s (retrying every %u ms)",
					zs_coord_addr(d->coord), err.msg, d->lease_ms / 3);
			lost = 1;
			continue;
		}
		if (lost)
			zs_info("coordinator %s reachable again", zs_coord_addr(d->coord));
		lost = 0;
		d->lease_ms = r.lease_ms;
		if (r.assign_gen != d->gen)
			srvd_refresh_assignments(d);
		if (r.task_gen != d->tk.gen)
			srvd_refresh_tasks(d, r.task_gen);
		norms_again(d, &r);
	}
	return NULL;
}
