/*
 * replica_common.c - what the replicated-shard tests share (see
 * replica_common.h).
 */
#include "tests/integration/replica_common.h"

/* Reads array a of shard sh from its server (observer connection c). */
void read_array(struct zs_conn *c, const struct zs_shard *sh, int a, float *out,
		       uint64_t *version)
{
	struct zs_xfer x = {.unit = sh->unit, .offset = sh->offset, .length = sh->length,
			    .dtype = ZS_F32, .state_read = true, .state = a, .version = version};
	struct zs_error err = {0};
	struct zs_req *r;

	if (zs_post_read(c, &x, out, &r, &err) || zs_req_wait(r, 20000, &err))
		fail_msg("reading unit %u shard %u copy %u array %d from server %llu: %s", sh->unit,
			 sh->index, sh->copy, a, (unsigned long long)sh->server_id, err.msg);
}

void observe(struct observer *o, const char *job, uint32_t rank)
{
	struct zs_coord_client *c;
	struct zs_error err = {0};

	memset(o, 0, sizeof *o);
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	if (zs_coord_get_job_token(c, job, &o->job, &err) ||
	    zs_coord_servers(c, &o->s, &o->n_s, &err))
		fail_msg("%s: %s", job, err.msg);
	zs_coord_close(c);
	assert_true(o->n_s <= 8);
	for (uint32_t i = 0; i < o->n_s; i++) {
		struct zs_conn_opts co = {.addr = o->s[i].data_addr, .job = job,
					  .token = o->job.token,
					  .incarnation = o->job.incarnation,
					  .epoch = o->job.placement.epoch, .rank = rank,
					  .tls = o->job.spec.data_tls, .timeout_ms = 10000};
		enum zs_status st;
		bool holds = false;
		for (uint32_t k = 0; k < o->job.placement.n_shards; k++)
			holds |= o->job.placement.shards[k].server_id == o->s[i].id;
		if (!holds)
			continue;
		/* a server takes a new placement epoch at its next heartbeat */
		for (int k = 0; (st = zs_connect(&zs_tcp_transport, &co, &o->conn[i], &err)) ==
				    ZS_EAGAIN && k < 50; k++)
			usleep(100 * 1000);
		if (st)
			fail_msg("connecting to server %llu: %s", (unsigned long long)o->s[i].id,
				 err.msg);
	}
}

struct zs_conn *conn_of(struct observer *o, uint64_t id)
{
	for (uint32_t i = 0; i < o->n_s; i++)
		if (o->s[i].id == id)
			return o->conn[i];
	fail_msg("server %llu is not listed", (unsigned long long)id);
	return NULL;
}

/* What keeps the cluster unsettled now ("" when nothing): a test server
 * down, a job with a copy on a server that is down or a restore under
 * way, a copy of job (NULL: none) not seeded yet. */
static void unsettled(struct zs_coord_client *c, const char *job, char *why, size_t len)
{
	struct zs_server_info *s = NULL;
	struct zs_job *jobs = NULL;
	struct zs_error err = {0};
	uint32_t n_s = 0, n_j = 0;

	why[0] = '\0';
	if (zs_coord_servers(c, &s, &n_s, &err) || zs_coord_jobs(c, &jobs, &n_j, &err)) {
		snprintf(why, len, "the coordinator: %.400s", err.msg);
		free(s);
		return;
	}
	for (int k = 0; k < C.n && !why[0]; k++) {
		bool up = false;
		for (uint32_t i = 0; i < n_s; i++)
			up |= s[i].up && !strcmp(s[i].addr, C.srv_addr[k]);
		if (!up)
			snprintf(why, len, "server %d (%s) is not up", k, C.srv_addr[k]);
	}
	for (uint32_t q = 0; q < n_j && !why[0]; q++) {
		const struct zs_job *j = &jobs[q];
		if (j->restore_pending)
			snprintf(why, len, "job '%s' is being restored", j->spec.name);
		for (uint32_t i = 0; i < j->placement.n_shards && !why[0]; i++) {
			const struct zs_shard *sh = &j->placement.shards[i];
			bool up = false;
			for (uint32_t k = 0; k < n_s; k++)
				up |= s[k].id == sh->server_id && s[k].up;
			if (!up)
				snprintf(why, len, "job '%s' has unit %u shard %u on server %llu, which is down",
					 j->spec.name, sh->unit, sh->index,
					 (unsigned long long)sh->server_id);
			else if (sh->fresh && job && !strcmp(job, j->spec.name))
				snprintf(why, len, "job '%s': unit %u shard %u's copy on server %llu is not seeded",
					 j->spec.name, sh->unit, sh->index,
					 (unsigned long long)sh->server_id);
		}
	}
	for (uint32_t q = 0; q < n_j; q++)
		zs_job_release(&jobs[q]);
	free(jobs);
	free(s);
}

void settle_cluster(const char *job)
{
	struct zs_coord_client *c;
	char why[512];
	int64_t deadline = zs_now_ms() + 30000;

	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	for (unsettled(c, job, why, sizeof why); why[0]; unsettled(c, job, why, sizeof why)) {
		if (zs_now_ms() > deadline) {
			zs_coord_close(c);
			fail_msg("the cluster did not settle after the tests before within 30 s: %s",
				 why);
		}
		usleep(50 * 1000);
	}
	zs_coord_close(c);
}

/* C.srv's index of the server with id (by its control address). */
int srv_index(const struct observer *o, uint64_t id)
{
	for (uint32_t i = 0; i < o->n_s; i++)
		if (o->s[i].id == id)
			for (int k = 0; k < C.n; k++)
				if (!strcmp(C.srv_addr[k], o->s[i].addr))
					return k;
	fail_msg("server %llu is not one of the test's", (unsigned long long)id);
	return -1;
}

void unobserve(struct observer *o)
{
	for (uint32_t i = 0; i < o->n_s; i++)
		zs_conn_close(o->conn[i]);
	free(o->s);
	zs_job_release(&o->job);
}

/*
 * Every copy of every shard of job holds the same fp32 state, at step,
 * bit for bit; with want (by unit, the masters expected, or NULL) the
 * masters equal it. Returns the number of shards checked.
 */
uint32_t check_copies(const char *job, uint64_t step, float **want)
{
	struct observer o;
	uint32_t checked = 0;

	/* a copy rebuilt by a failover (of any job: every job on a lost
	 * server moves) is compared once its primary has seeded it */
	for (int w = 0;; w++) {
		bool fresh = false;
		observe(&o, job, ZS_RANK_OBSERVER);
		for (uint32_t i = 0; i < o.job.placement.n_shards; i++)
			fresh |= o.job.placement.shards[i].fresh != 0;
		if (!fresh)
			break;
		unobserve(&o);
		if (w == 100)
			fail_msg("job %s: its new copies were not seeded within 10 s", job);
		usleep(100 * 1000);
	}
	unsigned arrays = 1 + zs_optim_state_arrays(&o.job.spec.optim);
	for (uint32_t i = 0; i < o.job.placement.n_shards; i++) {
		const struct zs_shard *p = &o.job.placement.shards[i];
		/* the job's copies, fewer where a failover left fewer */
		uint32_t K = p->copies ? p->copies : 1;
		if (p->copy)
			continue;
		assert_true(K <= (o.job.spec.replicas ? o.job.spec.replicas : 1));
		for (unsigned a = 0; a < arrays; a++) {
			float *ref = malloc(p->length * 4), *got = malloc(p->length * 4);
			uint64_t v0 = 0;
			uint32_t copies = 1;
			read_array(conn_of(&o, p->server_id), p, (int)a, ref, &v0);
			assert_int_equal(v0, step);
			if (want && a == 0 && memcmp(ref, want[p->unit] + p->offset, p->length * 4))
				fail_msg("job %s unit %u shard %u: the master is not the one expected",
					 job, p->unit, p->index);
			for (uint32_t q = 0; q < o.job.placement.n_shards; q++) {
				const struct zs_shard *r = &o.job.placement.shards[q];
				uint64_t v = 0;
				if (!r->copy || r->unit != p->unit || r->index != p->index)
					continue;
				assert_int_not_equal(r->server_id, p->server_id);
				read_array(conn_of(&o, r->server_id), r, (int)a, got, &v);
				assert_int_equal(v, step);
				for (uint64_t e = 0; e < p->length; e++)
					if (memcmp(&got[e], &ref[e], 4))
						fail_msg("job %s unit %u shard %u array %u element %llu: replica on server %llu has %.9g, the primary on %llu %.9g",
							 job, p->unit, p->index, a,
							 (unsigned long long)e,
							 (unsigned long long)r->server_id, got[e],
							 (unsigned long long)p->server_id, ref[e]);
				copies++;
			}
			assert_int_equal(copies, K);
			free(ref);
			free(got);
		}
		checked++;
	}
	unobserve(&o);
	return checked;
}

/* What t gathers at step n equals the reference after n steps (K
 * micro-batches; prim: the job's first primaries, its norms' order). */
void check_reference_at(const char *name, const struct zs_job_spec *spec,
			       const struct zs_placement *prim, uint64_t n, uint32_t K, int sched,
			       zs_trainer *t)
{
	uint32_t U = spec->layout.n_units;
	float **ref = calloc(U, sizeof *ref);

	for (uint32_t u = 0; u < U; u++)
		ref[u] = malloc(spec->layout.units[u].numel * 4);
	oracle_reference_sched(spec, prim, n, K, sched, ref);
	for (uint32_t u = 0; u < U; u++) {
		unsigned long long numel = spec->layout.units[u].numel;
		float *got = malloc(numel * 4);
		if (fetch(t, u, n, got))
			fail_msg("%s: gather of step %llu: %s", name, (unsigned long long)n,
				 zs_trainer_error(t));
		for (unsigned long long i = 0; i < numel; i++)
			if (memcmp(&got[i], &ref[u][i], 4))
				fail_msg("%s: step %llu: unit %u element %llu is %.9g, the reference %.9g",
					 name, (unsigned long long)n, u, i, got[i], ref[u][i]);
		free(got);
		free(ref[u]);
	}
	free(ref);
}

/* C.srv's index of the server holding the most primaries of job name. */
int busiest_server(const char *name)
{
	struct zs_coord_client *c;
	struct zs_server_info *s;
	struct zs_job j;
	uint32_t n, most = 0;
	int at = -1;

	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, name, &j, NULL), ZS_OK);
	assert_int_equal(zs_coord_servers(c, &s, &n, NULL), ZS_OK);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t held = 0;
		for (uint32_t i = 0; i < j.placement.n_shards; i++)
			held += j.placement.shards[i].server_id == s[k].id &&
				!j.placement.shards[i].copy;
		for (int q = 0; q < C.n && held > most; q++)
			if (!strcmp(s[k].addr, C.srv_addr[q])) {
				most = held;
				at = q;
			}
	}
	free(s);
	zs_job_release(&j);
	zs_coord_close(c);
	return at;
}
